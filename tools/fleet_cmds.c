/* SPDX-License-Identifier: BSD-3-Clause */
/* fleet_cmds.c: mcroute members: publish a pool to etcd, change its servers one compare-and-swap at a time, show it as a server file, count its clients. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mcroute.h"
#include "mcroute_fleet.h"
#include "mcroute_snapshot.h"

#include "cli.h"

const char cli_usage_members[] =
    "Usage: mcroute members SUBCOMMAND --etcd URLS --pool NAME [--etcd-prefix PREFIX]\n"
    "                       [--etcd-timeout SECONDS] [ARGS]\n"
    "A pool kept in etcd (see libmcroute_fleet): every change is one\n"
    "compare-and-swap of its snapshot, one epoch.\n"
    "  publish SOURCE      make the servers of SOURCE the pool's next epoch (or its\n"
    "                      first: the pool is created): -s LIST or -f FILE, with\n"
    "                      --mode and --hash for a new pool (an existing pool keeps\n"
    "                      its placement, which they must then match), or\n"
    "                      --snapshot FILE, whose server states come along\n"
    "  add SERVER          add a server, written as a line of a server file:\n"
    "                      'HOST[:PORT] [weight=W] [zone=Z] [id=NAME]' (one argument)\n"
    "  remove ID           remove the server whose id is ID\n"
    "  set-weight ID W     set its weight, 1 to 1000000 (mcrouter-wch3: 0 to 1)\n"
    "  set-state ID STATE  set its state: active, draining or down\n"
    "  show                print '# epoch N checksum C', then the pool as a server\n"
    "                      file that -f reads back (states as '# state=...'\n"
    "                      comments, which -f ignores)\n"
    "  status [--json]     print '# epoch N checksum C', then EPOCH<TAB>CLIENTS for\n"
    "                      every epoch its clients (mcroute watch and other\n"
    "                      followers) have adopted; with a migration (mcroute\n"
    "                      migrate --etcd), '# migration ...' lines: its phase,\n"
    "                      progress (backlog, speed), how many clients adopted\n"
    "                      which phase, and each laggard; --json: {\"epoch\",\n"
    "                      \"checksum\", \"epochs\": [{\"epoch\", \"clients\"}],\n"
    "                      \"migration\": {...} or null, \"clients\": [{\"id\",\n"
    "                      \"epoch\", \"checksum\", \"host\", \"migration\"}]}\n"
    "publish, add, remove, set-weight and set-state print epoch<TAB>N, the epoch\n"
    "stored (the current one when nothing changed). --etcd-prefix is the key prefix\n"
    "(default /mcroute/pools/), --etcd-timeout how long to keep trying the\n"
    "endpoints (default 10 seconds).\n"
    "Exit status: 0; 1 a change kept conflicting with other writers, or output was\n"
    "lost; 2 bad input, etcd unreachable, no such pool or server, a change that\n"
    "does not apply, a stored value that does not verify.\n";

/* ------------------------------------------------------------ shared */

static void print_epoch(uint64_t epoch)
{
    printf("epoch\t%llu\n", (unsigned long long)epoch);
}

/* Store `ch` (freed here) as the pool's next epoch and print it. */
static int change(const char *cmd, const cli_source *src, mcr_changes *ch)
{
    mcr_fleet_options o;
    mcr_error err;
    uint64_t epoch = 0;
    cli_fleet_options(cmd, src, &o);
    int rc = mcr_fleet_change(&o, ch, &epoch, &err);
    mcr_changes_free(ch);
    if (rc != MCR_OK)
        cli_die_status(rc, "%s: %s", cmd, err.message);
    print_epoch(epoch);
    return cli_finish_output();
}

static mcr_changes *new_changes(void)
{
    mcr_changes *ch = mcr_changes_new();
    if (ch == NULL)
        cli_fail("out of memory");
    return ch;
}

/* The pool's current snapshot; exits 2 (or 1) with the library's message. */
static mcr_snapshot *read_pool(const char *cmd, const mcr_fleet_options *o)
{
    mcr_error err;
    mcr_snapshot *snap = NULL;
    int rc = mcr_fleet_read(o, &snap, NULL, &err);
    if (rc != MCR_OK)
        cli_die_status(rc, "%s: %s", cmd, err.message);
    return snap;
}

/* ------------------------------------------------------------ publish */

/* A failure of this file: `code` and the message into *err; returns code. */
static int failure(mcr_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int failure(mcr_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
    err->code = code;
    return code;
}

/* The header lines of a snapshot's text that hold its placement parameters:
 * from "mode" to the line before "servers" (malloc'd), or NULL (*err). */
static char *params_text(const mcr_snapshot *snap, mcr_error *err)
{
    char *t = NULL;
    if (mcr_snapshot_text(snap, &t, NULL, err) != MCR_OK)
        return NULL;
    char *a = strstr(t, "\nmode "), *b = strstr(t, "\nservers ");
    if (a == NULL || b == NULL || b < a) {
        free(t);
        failure(err, MCR_ERR_CORRUPT, "a snapshot text without its header");
        return NULL;
    }
    size_t n = (size_t)(b - a);
    memmove(t, a + 1, n);
    t[n] = '\0';
    return t;
}

/* The value of header line `key` ("mode", "hash-tag", ...) of params text. */
static const char *param(const char *params, const char *key, char *buf, size_t cap)
{
    size_t kl = strlen(key);
    for (const char *p = params; *p != '\0';) {
        size_t n = strcspn(p, "\n");
        if (n > kl && strncmp(p, key, kl) == 0 && p[kl] == ' ') {
            snprintf(buf, cap, "%.*s", (int)(n - kl - 1), p + kl + 1);
            return buf;
        }
        p += n + (p[n] == '\n');
    }
    return NULL;
}

/* Decode the percent-encoded bytes of a "value=..." (hash tag, key prefix)
 * into out; returns their count, or -1 when malformed. */
static long unpercent(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    for (; *s != '\0'; s++) {
        unsigned v;
        if (n >= cap)
            return -1;
        if (*s == '%') {
            if (sscanf(s + 1, "%2x", &v) != 1)
                return -1;
            out[n++] = (char)v;
            s += 2;
        } else {
            out[n++] = *s;
        }
    }
    return (long)n;
}

/* Skip the epoch and checksum lines of a snapshot text at s. */
static const char *skip_numbering(const char *s)
{
    while (strncmp(s, "epoch ", 6) == 0 || strncmp(s, "checksum ", 9) == 0) {
        size_t n = strcspn(s, "\n");
        s += n + (s[n] == '\n');
    }
    return s;
}

/* The first line of `a` that differs from `b`, the epoch and checksum lines
 * aside, quoted into buf; NULL when none does. */
static const char *first_difference(const char *a, const char *b, char *buf, size_t cap)
{
    for (;;) {
        a = skip_numbering(a);
        b = skip_numbering(b);
        size_t na = strcspn(a, "\n"), nb = strcspn(b, "\n");
        if (*a == '\0' && *b == '\0')
            return NULL;
        if (na != nb || strncmp(a, b, na) != 0) {
            snprintf(buf, cap, "\"%.*s\"", (int)(na > 120 ? 120 : na), a);
            return buf;
        }
        a += na + (a[na] == '\n');
        b += nb + (b[nb] == '\n');
    }
}

/* Set the placement parameters of params text on cfg: false when one
 * cannot be set. */
static bool set_params(mcr_config *cfg, const char *params)
{
    char v[300];
    mcr_mode mode;
    mcr_hash hash, point;
    bool ok = param(params, "mode", v, sizeof(v)) && mcr_mode_from_name(v, &mode) == MCR_OK &&
              mcr_config_set_mode(cfg, mode) == MCR_OK;
    ok = ok && param(params, "hash", v, sizeof(v)) && mcr_hash_from_name(v, &hash) == MCR_OK &&
         mcr_config_set_hash(cfg, hash) == MCR_OK;
    ok = ok && param(params, "point-hash", v, sizeof(v)) &&
         mcr_hash_from_name(v, &point) == MCR_OK && mcr_config_set_point_hash(cfg, point) == MCR_OK;
    if (ok && param(params, "hash-tag", v, sizeof(v)) && strncmp(v, "value=", 6) == 0) {
        char tag[3];
        ok = unpercent(v + 6, tag, 2) == 2;
        tag[2] = '\0';
        ok = ok && mcr_config_set_hash_tag(cfg, tag) == MCR_OK;
    }
    if (ok && param(params, "key-prefix", v, sizeof(v)) && strncmp(v, "value=", 6) == 0) {
        char prefix[256];
        long len = unpercent(v + 6, prefix, sizeof(prefix));
        ok = len >= 0 && mcr_config_set_key_prefix(cfg, prefix, (size_t)len) == MCR_OK;
    }
    if (ok && param(params, "table", v, sizeof(v))) {
        unsigned long t = strtoul(v, NULL, 10);
        if (mode == MCR_MODE_MAGLEV)
            ok = mcr_config_set_table_size(cfg, (uint32_t)t) == MCR_OK;
        else if (mode == MCR_MODE_SLOTS)
            ok = mcr_config_set_slot_count(cfg, (uint32_t)t) == MCR_OK;
    }
    return ok;
}

/* A new pool from a snapshot file: *out, the config of its servers and
 * parameters, when that config gives exactly its placement and every
 * server is active (a pool is created by mcr_fleet_publish(), from a
 * config: epoch 1, every server active). Otherwise refused, saying why. */
static int config_of_snapshot(const char *path, const mcr_snapshot *snap, const char *pool,
                              mcr_config **out, mcr_error *err)
{
    static const char *const state_names[] = {"active", "draining", "down"};
    static const char advice[] =
        "create the pool from a server list (-s or -f), then publish the snapshot";
    char buf[200];
    size_t n = mcr_snapshot_server_count(snap);
    for (size_t i = 0; i < n; i++) {
        mcr_server_desc d;
        mcr_snapshot_server(snap, i, &d);
        if (d.state != MCR_STATE_ACTIVE)
            return failure(err, MCR_ERR_INVALID,
                           "there is no pool \"%s\" yet, and %s cannot be its first epoch: "
                           "server %s is %s, and a new pool starts with every server active; %s",
                           pool, path, d.id, state_names[d.state <= 2 ? d.state : 0], advice);
    }
    char *params = params_text(snap, err);
    if (params == NULL)
        return err->code;
    mcr_config *cfg = mcr_config_new();
    int rc = cfg == NULL ? failure(err, MCR_ERR_NOMEM, "out of memory") : MCR_OK;
    if (rc == MCR_OK && !set_params(cfg, params))
        rc = failure(err, MCR_ERR_INVALID, "%s: its placement parameters cannot be given to a "
                                           "new pool; %s",
                     path, advice);
    free(params);
    for (size_t i = 0; rc == MCR_OK && i < n; i++) {
        mcr_server_desc d;
        mcr_snapshot_server(snap, i, &d);
        rc = mcr_config_add_server_desc(cfg, &d, err);
    }
    /* The pool would be the snapshot of this config: it must be the file's
     * placement, line for line (the slot map of a "slots" snapshot that
     * slots were moved in is history that a server list does not carry). */
    mcr_snapshot *again = NULL;
    char *ta = NULL, *tb = NULL;
    if (rc == MCR_OK)
        rc = mcr_snapshot_new(cfg, 1, &again, err);
    if (rc == MCR_OK && (rc = mcr_snapshot_text(again, &ta, NULL, err)) == MCR_OK)
        rc = mcr_snapshot_text(snap, &tb, NULL, err);
    const char *diff = rc == MCR_OK ? first_difference(tb, ta, buf, sizeof(buf)) : NULL;
    if (diff != NULL)
        rc = failure(err, MCR_ERR_INVALID,
                     "there is no pool \"%s\" yet, and %s cannot be its first epoch: its "
                     "servers, given to a new pool, would not be placed as in the file (line %s "
                     "differs); %s",
                     pool, path, diff, advice);
    free(ta);
    free(tb);
    mcr_snapshot_unref(again);
    if (rc != MCR_OK) {
        mcr_config_free(cfg);
        return rc;
    }
    *out = cfg;
    return MCR_OK;
}

/* Whether the pool's placement parameters are the file's (else *err names
 * the first line that differs). */
static int same_params(const mcr_snapshot *pool, const mcr_snapshot *file, const char *path,
                       mcr_error *err)
{
    char *a = params_text(pool, err), *b = a ? params_text(file, err) : NULL;
    int rc = b != NULL ? MCR_OK : err->code;
    if (rc == MCR_OK && strcmp(a, b) != 0) {
        const char *pa = a, *pb = b;
        size_t na, nb;
        for (;; pa += na + 1, pb += nb + 1) {
            na = strcspn(pa, "\n");
            nb = strcspn(pb, "\n");
            if (na != nb || strncmp(pa, pb, na) != 0)
                break;
        }
        rc = failure(err, MCR_ERR_INVALID,
                     "the pool's placement parameters differ from %s's: the pool has \"%.*s\", "
                     "the file \"%.*s\" (a pool keeps its parameters)",
                     path, (int)(na > 100 ? 100 : na), pa, (int)(nb > 100 ? 100 : nb), pb);
    }
    free(a);
    free(b);
    return rc;
}

/* publish --snapshot FILE: the file's servers, with their states. An
 * existing pool gets them by mcr_fleet_publish_snapshot(): one epoch,
 * states included, the change set computed again from each read (a
 * concurrent writer's change is not kept by mistake). A missing pool is
 * created by mcr_fleet_publish() from the file's config
 * (config_of_snapshot). */
static int publish_snapshot(const mcr_fleet_options *o, const char *path,
                            const mcr_snapshot *snap, uint64_t *epoch, mcr_error *err)
{
    mcr_snapshot *cur = NULL;
    int rc = mcr_fleet_read(o, &cur, NULL, err);
    if (rc == MCR_ERR_UNKNOWN) {
        mcr_config *cfg = NULL;
        rc = config_of_snapshot(path, snap, o->pool, &cfg, err);
        if (rc == MCR_OK)
            rc = mcr_fleet_publish(o, cfg, epoch, err);
        mcr_config_free(cfg);
        return rc;
    }
    if (rc != MCR_OK)
        return rc;
    rc = same_params(cur, snap, path, err); /* the file named in the message */
    mcr_snapshot_unref(cur);
    if (rc == MCR_OK)
        rc = mcr_fleet_publish_snapshot(o, snap, epoch, err);
    return rc;
}

static int members_publish(const char *cmd, int argc, char **argv)
{
    cli_source src;
    mcr_fleet_options o;
    mcr_error err;
    uint64_t epoch = 0;
    int rc;
    int first = cli_parse_options(argc, argv, &src, cli_usage_members, ALLOW_LIST | PERMUTE);
    if (first < argc)
        cli_die("%s: unexpected argument '%s'", cmd, argv[first]);
    if (src.servers == NULL && src.server_file == NULL && src.snapshot == NULL)
        cli_die("%s: no servers: give -s LIST, -f FILE or --snapshot FILE", cmd);
    cli_fleet_options(cmd, &src, &o);
    /* The SOURCE, without the etcd options (they name where it goes). */
    cli_source from = src;
    from.etcd = from.pool = from.etcd_prefix = from.etcd_timeout = NULL;
    if (from.snapshot != NULL) {
        mcr_snapshot *snap = cli_build_snapshot(&from); /* checks the combination too */
        rc = publish_snapshot(&o, from.snapshot, snap, &epoch, &err);
        mcr_snapshot_unref(snap);
    } else {
        mcr_config *cfg = cli_build_config(&from);
        rc = mcr_fleet_publish(&o, cfg, &epoch, &err);
        mcr_config_free(cfg);
    }
    free(src.behaviors);
    if (rc != MCR_OK)
        cli_die_status(rc, "%s: %s", cmd, err.message);
    print_epoch(epoch);
    return cli_finish_output();
}

/* ------------------------------------------------------------ changes */

/* The options of a change subcommand and its `n` arguments (named by
 * `what`); returns the index of the first. */
static int change_args(const char *cmd, int argc, char **argv, cli_source *src, int n,
                       const char *what)
{
    int first =
        cli_parse_options(argc, argv, src, cli_usage_members, ALLOW_ETCD | PERMUTE | NO_HASH);
    if (argc - first < n)
        cli_die("%s: expected %s", cmd, what);
    if (argc - first > n)
        cli_die("%s: unexpected argument '%s' (expected %s)", cmd, argv[first + n], what);
    return first;
}

/* The pool's mode: how its weights are written (mcrouter-wch3's are
 * decimals in [0, 1], in millionths). */
static mcr_mode pool_mode(const char *cmd, const cli_source *src)
{
    mcr_fleet_options o;
    cli_fleet_options(cmd, src, &o);
    mcr_snapshot *snap = read_pool(cmd, &o);
    mcr_mode m = mcr_ring_mode(mcr_snapshot_ring(snap));
    mcr_snapshot_unref(snap);
    return m;
}

static int members_add(const char *cmd, int argc, char **argv)
{
    cli_source src;
    mcr_error err;
    mcr_snapshot *one = NULL;
    mcr_server_desc d;
    int first = change_args(cmd, argc, argv, &src, 1,
                            "SERVER, a server-file line: 'HOST[:PORT] [weight=W] [zone=Z] "
                            "[id=NAME]' as one argument");
    /* the line's weight as the pool writes weights (and its default); read
     * first: a pool that cannot be read ends the command here */
    bool wch3 = pool_mode(cmd, &src) == MCR_MODE_MCROUTER_WCH3;
    mcr_config *cfg = mcr_config_new();
    mcr_changes *ch = mcr_changes_new();
    int rc = cfg == NULL || ch == NULL ? MCR_ERR_NOMEM : MCR_OK;
    if (rc != MCR_OK)
        snprintf(err.message, sizeof(err.message), "out of memory");
    if (rc == MCR_OK && wch3)
        rc = mcr_config_set_mode(cfg, MCR_MODE_MCROUTER_WCH3);
    /* Exactly a line of a server file; its one server, described as a
     * snapshot describes it, is what the change adds. */
    if (rc == MCR_OK && (rc = mcr_config_add_server_line(cfg, argv[first], &err)) == MCR_OK &&
        (rc = mcr_snapshot_new(cfg, 1, &one, &err)) == MCR_OK) {
        mcr_snapshot_server(one, 0, &d);
        rc = mcr_changes_add(ch, &d, &err);
    }
    mcr_config_free(cfg);
    mcr_snapshot_unref(one);
    free(src.behaviors);
    if (rc != MCR_OK) {
        mcr_changes_free(ch);
        cli_die_status(rc, "%s: %s", cmd, err.message);
    }
    return change(cmd, &src, ch);
}

static int members_remove(const char *cmd, int argc, char **argv)
{
    cli_source src;
    mcr_error err;
    int first = change_args(cmd, argc, argv, &src, 1, "ID, the id of a server of the pool");
    mcr_changes *ch = new_changes();
    free(src.behaviors);
    if (mcr_changes_remove(ch, argv[first], &err) != MCR_OK) {
        mcr_changes_free(ch);
        cli_die_status(err.code, "%s: %s", cmd, err.message);
    }
    return change(cmd, &src, ch);
}

static int members_set_weight(const char *cmd, int argc, char **argv)
{
    cli_source src;
    mcr_error err;
    int first = change_args(cmd, argc, argv, &src, 2, "ID and WEIGHT");
    const char *w = argv[first + 1];
    char *end;
    errno = 0;
    unsigned long v = strtoul(w, &end, 10);
    bool whole = *w >= '0' && *w <= '9' && *end == '\0' && errno == 0;
    if (pool_mode(cmd, &src) == MCR_MODE_MCROUTER_WCH3) {
        /* a decimal in [0, 1], read as a server line's weight= is */
        char line[96];
        mcr_config *one = mcr_config_new();
        mcr_ring *r = NULL;
        snprintf(line, sizeof(line), "weight.invalid weight=%.40s", w);
        if (one == NULL || mcr_config_set_mode(one, MCR_MODE_MCROUTER_WCH3) != MCR_OK)
            cli_fail("out of memory");
        int rc = strlen(w) > 40 ? MCR_ERR_RANGE : mcr_config_add_server_line(one, line, &err);
        if (rc == MCR_OK)
            rc = mcr_ring_new(one, &r, &err);
        mcr_config_free(one);
        if (rc != MCR_OK)
            cli_die("%s: weight '%s': expected a decimal from 0 to 1 (the pool is "
                    "mcrouter-wch3's), at most 6 digits after the point",
                    cmd, w);
        v = mcr_ring_server_weight(r, 0);
        mcr_ring_free(r);
    } else if (!whole || v < 1 || v > MCR_WEIGHT_MAX) {
        cli_die("%s: weight '%s': expected a number from 1 to %u", cmd, w,
                (unsigned)MCR_WEIGHT_MAX);
    }
    mcr_changes *ch = new_changes();
    free(src.behaviors);
    if (mcr_changes_set_weight(ch, argv[first], (uint32_t)v, &err) != MCR_OK) {
        mcr_changes_free(ch);
        cli_die_status(err.code, "%s: %s", cmd, err.message);
    }
    return change(cmd, &src, ch);
}

static int members_set_state(const char *cmd, int argc, char **argv)
{
    cli_source src;
    mcr_error err;
    int first = change_args(cmd, argc, argv, &src, 2, "ID and STATE (active, draining or down)");
    const char *s = argv[first + 1];
    mcr_server_state st;
    if (strcmp(s, "active") == 0)
        st = MCR_STATE_ACTIVE;
    else if (strcmp(s, "draining") == 0)
        st = MCR_STATE_DRAINING;
    else if (strcmp(s, "down") == 0)
        st = MCR_STATE_DOWN;
    else
        cli_die("%s: state '%s': expected active, draining or down", cmd, s);
    mcr_changes *ch = new_changes();
    free(src.behaviors);
    if (mcr_changes_set_state(ch, argv[first], st, &err) != MCR_OK) {
        mcr_changes_free(ch);
        cli_die_status(err.code, "%s: %s", cmd, err.message);
    }
    return change(cmd, &src, ch);
}

/* ------------------------------------------------------------ show, status */

/* Whether a server file can hold `s` as an attribute value: a token ends at
 * a blank and a comment starts at '#'. */
static bool file_token_ok(const char *s)
{
    return s == NULL || strpbrk(s, " \t\r\n\v\f#") == NULL;
}

static int members_show(const char *cmd, int argc, char **argv)
{
    static const char *const state_names[] = {"active", "draining", "down"};
    cli_source src;
    mcr_fleet_options o;
    int first =
        cli_parse_options(argc, argv, &src, cli_usage_members, ALLOW_ETCD | PERMUTE | NO_HASH);
    if (first < argc)
        cli_die("%s: unexpected argument '%s'", cmd, argv[first]);
    cli_fleet_options(cmd, &src, &o);
    mcr_snapshot *snap = read_pool(cmd, &o);
    size_t n = mcr_snapshot_server_count(snap);
    for (size_t i = 0; i < n; i++) {
        mcr_server_desc d;
        mcr_snapshot_server(snap, i, &d);
        if (!file_token_ok(d.zone) || (!d.id_is_default && !file_token_ok(d.id))) {
            char id[MCR_HOSTNAME_MAX + 1];
            const char *what = file_token_ok(d.zone) ? "id" : "zone";
            snprintf(id, sizeof(id), "%s", d.id);
            mcr_snapshot_unref(snap);
            free(src.behaviors);
            cli_fail("%s: server \"%s\": its %s has a blank or a '#', which a server file "
                     "cannot hold",
                     cmd, id, what);
        }
    }
    const mcr_ring *ring = mcr_snapshot_ring(snap);
    printf("# epoch %llu checksum %s\n", (unsigned long long)mcr_snapshot_epoch(snap),
           mcr_snapshot_checksum(snap));
    printf("# pool %s: %zu servers, %zu active; placement --mode %s --hash %s\n", o.pool, n,
           mcr_snapshot_active_count(snap), mcr_mode_name(mcr_ring_mode(ring)),
           mcr_hash_name(mcr_ring_key_hash(ring)));
    /* What -f cannot give, said so rather than left out silently. */
    mcr_error err;
    char *params = params_text(snap, &err), v[300];
    static const char *const extra[] = {"hash-tag", "key-prefix"};
    for (size_t i = 0; params != NULL && i < 2; i++)
        if (param(params, extra[i], v, sizeof(v)) && strcmp(v, "off") != 0)
            printf("# also %s %s (percent-encoded), which a server file cannot give\n",
                   extra[i], v);
    free(params);
    for (size_t i = 0; i < n; i++) {
        mcr_server_desc d;
        mcr_snapshot_server(snap, i, &d);
        printf(strchr(d.host, ':') ? "[%s]:%d" : "%s:%d", d.host, d.port);
        char wt[CLI_WEIGHT_BUF];
        printf(" weight=%s", cli_weight_text(mcr_ring_mode(ring), d.weight, wt));
        if (d.zone != NULL && *d.zone != '\0')
            printf(" zone=%s", d.zone);
        if (!d.id_is_default)
            printf(" id=%s", d.id);
        if (d.state != MCR_STATE_ACTIVE)
            printf(" # state=%s", state_names[d.state <= 2 ? d.state : 0]);
        putchar('\n');
    }
    mcr_snapshot_unref(snap);
    free(src.behaviors);
    return cli_finish_output();
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Whether client `c` has adopted the record's phase. */
static bool client_current(const mcr_fleet_client *c, const mcr_migration *m)
{
    return c->epoch != 0 && strcmp(c->migration_id, m->id) == 0 && c->migration_phase == m->phase;
}

/* The migration part of status: '# ' lines, or a "migration" member. */
static void status_migration(const mcr_fleet_options *o, const mcr_fleet_client *cl, size_t n,
                             bool json)
{
    mcr_migration m;
    mcr_error err;
    int rc = mcr_fleet_migration_read(o, &m, &err);
    if (rc == MCR_ERR_EMPTY) {
        if (json)
            fputs(", \"migration\": null", stdout);
        return;
    }
    if (rc != MCR_OK) {
        if (json) {
            fputs(", \"migration\": {\"error\": ", stdout);
            cli_json_string(stdout, err.message, strlen(err.message));
            putchar('}');
        } else {
            printf("# migration record not readable: %s\n", err.message);
        }
        return;
    }
    /* clients per phase of this migration adopted ("none": another one, or none) */
    size_t per[MCR_MIGRATION_ABORTED + 1] = {0}, other = 0, late = 0;
    for (size_t i = 0; i < n; i++) {
        if (cl[i].epoch != 0 && strcmp(cl[i].migration_id, m.id) == 0 &&
            cl[i].migration_phase <= MCR_MIGRATION_ABORTED)
            per[cl[i].migration_phase]++;
        else
            other++;
        late += !client_current(&cl[i], &m);
    }
    const mcr_migration_progress *p = &m.progress;
    uint64_t now = 0;
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) == 0)
        now = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
    double ago = now > m.updated ? (double)(now - m.updated) / 1000.0 : 0.0;
    if (json) {
        printf(", \"migration\": {\"id\": \"%s\", \"phase\": \"%s\", \"rollback\": %s, "
               "\"from_epoch\": %llu, \"to_epoch\": %llu, \"warm\": %s, \"grace_ms\": %llu, "
               "\"grace_until\": %llu, \"updated\": %llu, \"message\": ",
               m.id, mcr_migration_phase_name(m.phase), m.rollback ? "true" : "false",
               (unsigned long long)mcr_snapshot_epoch(m.from),
               (unsigned long long)mcr_snapshot_epoch(m.to), m.warm ? "true" : "false",
               (unsigned long long)m.grace_ms, (unsigned long long)m.grace_until,
               (unsigned long long)m.updated);
        cli_json_string(stdout, m.message, strlen(m.message));
        printf(", \"progress\": {\"scanned\": %llu, \"moved\": %llu, \"copied\": %llu, "
               "\"skipped\": %llu, \"failed\": %llu, \"backlog\": %llu, \"keys_per_s\": %.1f}, "
               "\"adopted\": [",
               (unsigned long long)p->scanned, (unsigned long long)p->moved,
               (unsigned long long)p->copied, (unsigned long long)p->skipped,
               (unsigned long long)p->failed, (unsigned long long)p->backlog, p->keys_per_s);
        size_t k = 0;
        for (int ph = MCR_MIGRATION_PLANNED; ph <= MCR_MIGRATION_ABORTED; ph++)
            if (per[ph] > 0)
                printf("%s{\"phase\": \"%s\", \"clients\": %zu}", k++ ? ", " : "",
                       mcr_migration_phase_name((mcr_migration_phase)ph), per[ph]);
        printf("], \"other\": %zu, \"laggards\": [", other);
        k = 0;
        for (size_t i = 0; i < n; i++)
            if (!client_current(&cl[i], &m)) {
                fputs(k++ ? ", " : "", stdout);
                cli_json_string(stdout, cl[i].id, strlen(cl[i].id));
            }
        fputs("]}", stdout);
    } else {
        printf("# migration %s %s%s: epoch %llu -> %llu, %s, grace %.1f s; updated %.1f s ago%s%s\n",
               m.id, mcr_migration_phase_name(m.phase), m.rollback ? " (rolling back)" : "",
               (unsigned long long)mcr_snapshot_epoch(m.from),
               (unsigned long long)mcr_snapshot_epoch(m.to), m.warm ? "warm" : "not warm",
               (double)m.grace_ms / 1000.0, ago, m.message[0] ? ": " : "", m.message);
        printf("# progress: scanned %llu, moved %llu, copied %llu, skipped %llu, failed %llu, "
               "backlog %llu, %.1f keys/s\n",
               (unsigned long long)p->scanned, (unsigned long long)p->moved,
               (unsigned long long)p->copied, (unsigned long long)p->skipped,
               (unsigned long long)p->failed, (unsigned long long)p->backlog, p->keys_per_s);
        fputs("# adopted:", stdout);
        for (int ph = MCR_MIGRATION_PLANNED; ph <= MCR_MIGRATION_ABORTED; ph++)
            if (per[ph] > 0)
                printf(" %s %zu,", mcr_migration_phase_name((mcr_migration_phase)ph), per[ph]);
        printf(" other %zu; %zu laggards\n", other, late);
        for (size_t i = 0; i < n; i++)
            if (!client_current(&cl[i], &m))
                printf("# laggard %s (%s): %s, epoch %llu\n", cl[i].id, cl[i].host,
                       strcmp(cl[i].migration_id, m.id) == 0
                           ? mcr_migration_phase_name(cl[i].migration_phase)
                           : "not this migration",
                       (unsigned long long)cl[i].epoch);
    }
    mcr_migration_clear(&m);
}

static int members_status(const char *cmd, int argc, char **argv)
{
    cli_source src;
    mcr_fleet_options o;
    mcr_error err;
    mcr_fleet_client *cl = NULL;
    size_t n = 0;
    int first = cli_parse_options(argc, argv, &src, cli_usage_members,
                                  ALLOW_ETCD | PERMUTE | NO_HASH | ALLOW_JSON);
    if (first < argc)
        cli_die("%s: unexpected argument '%s'", cmd, argv[first]);
    cli_fleet_options(cmd, &src, &o);
    mcr_snapshot *snap = read_pool(cmd, &o);
    int rc = mcr_fleet_clients(&o, &cl, &n, &err);
    if (rc != MCR_OK) {
        mcr_snapshot_unref(snap);
        free(src.behaviors);
        cli_die_status(rc, "%s: %s", cmd, err.message);
    }
    /* The epochs in use, ascending; a client value that did not parse
     * (epoch 0) is counted apart. */
    uint64_t *ep = cli_xcalloc(n, sizeof(*ep));
    size_t ne = 0, invalid = 0;
    for (size_t i = 0; i < n; i++) {
        if (cl[i].epoch == 0)
            invalid++;
        else
            ep[ne++] = cl[i].epoch;
    }
    qsort(ep, ne, sizeof(*ep), cmp_u64);
    if (src.json) {
        printf("{\"epoch\": %llu, \"checksum\": \"%s\", \"epochs\": [",
               (unsigned long long)mcr_snapshot_epoch(snap), mcr_snapshot_checksum(snap));
    } else {
        printf("# epoch %llu checksum %s\n", (unsigned long long)mcr_snapshot_epoch(snap),
               mcr_snapshot_checksum(snap));
    }
    size_t groups = 0;
    for (size_t i = 0; i < ne;) {
        size_t j = i;
        while (j < ne && ep[j] == ep[i])
            j++;
        if (src.json)
            printf("%s{\"epoch\": %llu, \"clients\": %zu}", groups ? ", " : "",
                   (unsigned long long)ep[i], j - i);
        else
            printf("%llu\t%zu\n", (unsigned long long)ep[i], j - i);
        groups++;
        i = j;
    }
    if (!src.json && invalid > 0)
        printf("invalid\t%zu\n", invalid);
    if (src.json)
        printf("], \"invalid\": %zu", invalid);
    status_migration(&o, cl, n, src.json);
    if (src.json) {
        fputs(", \"clients\": [", stdout);
        for (size_t i = 0; i < n; i++) {
            fputs(i ? ",\n  {\"id\": " : "\n  {\"id\": ", stdout);
            cli_json_string(stdout, cl[i].id, strlen(cl[i].id));
            if (cl[i].epoch == 0) {
                fputs(", \"error\": ", stdout);
            } else {
                printf(", \"epoch\": %llu, \"checksum\": \"%s\", \"host\": ",
                       (unsigned long long)cl[i].epoch, cl[i].checksum);
            }
            cli_json_string(stdout, cl[i].host, strlen(cl[i].host));
            if (cl[i].epoch != 0 && cl[i].migration_phase != MCR_MIGRATION_NONE)
                printf(", \"migration\": {\"id\": \"%s\", \"phase\": \"%s\", "
                       "\"to_epoch\": %llu}",
                       cl[i].migration_id, mcr_migration_phase_name(cl[i].migration_phase),
                       (unsigned long long)cl[i].migration_to_epoch);
            else if (cl[i].epoch != 0)
                fputs(", \"migration\": null", stdout);
            putchar('}');
        }
        fputs(n ? "\n]}\n" : "]}\n", stdout);
    }
    free(ep);
    mcr_fleet_clients_free(cl, n);
    mcr_snapshot_unref(snap);
    free(src.behaviors);
    return cli_finish_output();
}

/* ------------------------------------------------------------ dispatch */

static const struct subcommand {
    const char *name;
    int (*run)(const char *cmd, int argc, char **argv);
} subcommands[] = {
    {"publish", members_publish},       {"add", members_add},
    {"remove", members_remove},         {"set-weight", members_set_weight},
    {"set-state", members_set_state},   {"show", members_show},
    {"status", members_status},
};

int cli_cmd_members(int argc, char **argv)
{
    if (argc < 2)
        cli_die("members: expected a subcommand: publish add remove set-weight set-state show "
                "status (see mcroute help members)");
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0)
        cli_print_usage_and_exit(cli_usage_members);
    for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
        if (strcmp(subcommands[i].name, name) == 0) {
            /* Messages name "members SUBCOMMAND" (getopt's argv[0]). */
            static char cmd[64];
            snprintf(cmd, sizeof(cmd), "members %s", name);
            argv[1] = cmd;
            return subcommands[i].run(cmd, argc - 1, argv + 1);
        }
    cli_die("members: unknown subcommand '%s' (publish add remove set-weight set-state show "
            "status)",
            name);
}
