/* SPDX-License-Identifier: BSD-3-Clause */
/* test_migrate.c: Check suite of libmcroute_migrate: resizes copied between real memcached servers (values, flags, expiry, never an overwrite), failing servers, restarts, and the metadump parser. */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "mcroute.h"
#include "mcroute_migrate.h"
#include "mcroute_pool.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"
#include "migrate/migrate_internal.h"
#include "realserver.h"
#include "testutil.h"
#include "testutil_config.h"

/* The keys of the big resizes: set through a pool, copied, read back. */
#define NKEYS 10000
/* The smaller runs (failures, options). */
#define NSMALL 2000
#define MAX_SERVERS 6
#define START_MS mcr_test_ms(20000)
#define IO_MS mcr_test_ms(10000)
/* How far a copied key's remaining TTL may be from its original's: the
 * seconds the test takes between setting and reading (scaled), and one for
 * memcached's clock, which ticks once a second. */
#define TTL_SLACK_S ((int64_t)mcr_test_sec(30) + 2)

/* ------------------------------------------------------------ servers */

typedef struct cluster {
    int n;
    rs_proc mc[MAX_SERVERS];
} cluster;

static mcr_snapshot *g_snaps[8];

static void teardown(void)
{
    rs_stop_all();
    for (size_t i = 0; i < sizeof(g_snaps) / sizeof(g_snaps[0]); i++) {
        mcr_snapshot_unref(g_snaps[i]);
        g_snaps[i] = NULL;
    }
}

/* Remember snap for the teardown; returns it. */
static mcr_snapshot *track(mcr_snapshot *snap)
{
    for (size_t i = 0; i < sizeof(g_snaps) / sizeof(g_snaps[0]); i++)
        if (g_snaps[i] == NULL) {
            g_snaps[i] = snap;
            return snap;
        }
    ck_abort_msg("too many snapshots");
    return NULL;
}

/* Start n memcached; `noxdump` >= 0 starts that one with -X. */
static void cluster_start(cluster *c, int n, int noxdump)
{
    static const char *const dash_x[] = {"-X", NULL};
    memset(c, 0, sizeof(*c));
    ck_assert_msg(rs_executable(rs_memcached_path()), "need %s (Debian package memcached)",
                  rs_memcached_path());
    for (int i = 0; i < n; i++)
        ck_assert_msg(rs_memcached_start_opts(&c->mc[i], "127.0.0.1", 0,
                                              i == noxdump ? dash_x : NULL, NULL, START_MS) == 0,
                      "memcached %d did not start", i);
    c->n = n;
}

/* The snapshot (ketama, md5) of servers first .. first+count-1. */
static mcr_snapshot *snap_of(const cluster *c, int first, int count)
{
    char list[1024];
    size_t o = 0;
    for (int i = first; i < first + count; i++)
        o += (size_t)snprintf(list + o, sizeof(list) - o, "%s127.0.0.1:%d", i > first ? "," : "",
                              c->mc[i].port);
    mcr_config *cfg = tu_config(list, MCR_MODE_KETAMA, MCR_HASH_COUNT);
    mcr_snapshot *snap = NULL;
    int rc = mcr_snapshot_new(cfg, 1, &snap, NULL);
    mcr_config_free(cfg);
    ck_assert_int_eq(rc, MCR_OK);
    return track(snap);
}

/* The snapshot index of the server id `id`, and its rs_proc. */
static rs_proc *proc_of(cluster *c, const char *id)
{
    for (int i = 0; i < c->n; i++) {
        char want[64];
        snprintf(want, sizeof(want), "127.0.0.1:%d", c->mc[i].port);
        if (strcmp(want, id) == 0)
            return &c->mc[i];
    }
    ck_abort_msg("no server %s", id);
    return NULL;
}

static int port_of(const mcr_snapshot *snap, uint32_t i)
{
    mcr_server_desc d;
    ck_assert_int_eq(mcr_snapshot_server(snap, i, &d), MCR_OK);
    return d.port;
}

/* ------------------------------------------------------------ the keys */

static int64_t g_t0; /* when the keys were set (Unix time) */

static int key_of(int i, char *buf)
{
    return sprintf(buf, "mig:%d", i);
}

/* Values of assorted sizes, each naming its key. */
static size_t value_of(int i, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "val|mig:%d|", i);
    size_t want = i % 11 == 0 ? 3000 : 10 + (size_t)(i % 40);
    size_t len = (size_t)n;
    while (len < want && len + 1 < cap)
        buf[len++] = (char)('a' + i % 26);
    buf[len] = '\0';
    return len;
}

static uint32_t flags_of(int i)
{
    return (uint32_t)i * 2654435761u;
}

/* Expiry: never, a relative TTL of 3000-3999 s, or an absolute time. */
static int64_t exptime_of(int i)
{
    switch (i % 3) {
    case 0: return 0;
    case 1: return 3000 + i % 1000;
    default: return g_t0 + 200000 + i;
    }
}

/* The Unix time key i expires at, -1 for never. */
static int64_t expires_at(int i)
{
    int64_t e = exptime_of(i);
    return e == 0 ? -1 : i % 3 == 1 ? g_t0 + e : e;
}

/* ------------------------------------------------------------ pools */

typedef struct pool_run {
    struct event_base *base;
    mcr_router *router;
    mcr_pool *pool;
    long ok, bad;
    long misses, wrong;
    char first_bad[256];
} pool_run;

static void pool_open(pool_run *pr, const mcr_snapshot *snap)
{
    memset(pr, 0, sizeof(*pr));
    pr->base = event_base_new();
    ck_assert_ptr_nonnull(pr->base);
    ck_assert_int_eq(mcr_router_new(snap, &pr->router, NULL), MCR_OK);
    mcr_pool_options po;
    mcr_pool_options_init(&po);
    po.connect_timeout_ms = (unsigned)IO_MS;
    po.request_timeout_ms = (unsigned)IO_MS;
    ck_assert_int_eq(mcr_pool_new(pr->base, pr->router, &po, &pr->pool, NULL), MCR_OK);
}

static void pool_close(pool_run *pr)
{
    mcr_pool_free(pr->pool);
    mcr_router_free(pr->router);
    event_base_free(pr->base);
}

static void on_set(const mcr_result *res, void *arg)
{
    pool_run *pr = arg;
    if (res->status == MCR_OK && res->reply == MCR_REPLY_STORED) {
        pr->ok++;
    } else {
        if (pr->bad++ == 0)
            snprintf(pr->first_bad, sizeof(pr->first_bad), "%s", res->message ? res->message : "?");
    }
}

/* Set keys first .. first+n-1 through a pool on snap. */
static void set_keys(const mcr_snapshot *snap, int first, int n)
{
    pool_run pr;
    pool_open(&pr, snap);
    char key[32], val[4096];
    for (int i = first; i < first + n; i++) {
        int kl = key_of(i, key);
        size_t vl = value_of(i, val, sizeof(val));
        mcr_request rq;
        memset(&rq, 0, sizeof(rq));
        rq.op = MCR_OP_SET;
        rq.key = key;
        rq.key_len = (size_t)kl;
        rq.value = val;
        rq.value_len = vl;
        rq.flags = flags_of(i);
        rq.exptime = exptime_of(i);
        ck_assert_int_eq(mcr_pool_submit(pr.pool, &rq, on_set, &pr, NULL), MCR_OK);
        if ((i - first) % 500 == 499)
            ck_assert_int_eq(mcr_pool_wait(pr.pool), MCR_OK);
    }
    ck_assert_int_eq(mcr_pool_wait(pr.pool), MCR_OK);
    ck_assert_msg(pr.bad == 0, "%ld sets failed: %s", pr.bad, pr.first_bad);
    ck_assert_int_eq(pr.ok, n);
    pool_close(&pr);
}

static void on_get(const mcr_result *res, void *arg)
{
    pool_run *pr = arg;
    if (res->status != MCR_OK) {
        if (pr->bad++ == 0)
            snprintf(pr->first_bad, sizeof(pr->first_bad), "%s", res->message ? res->message : "?");
        return;
    }
    if (res->reply == MCR_REPLY_MISS) {
        pr->misses++;
        return;
    }
    /* the key is "mig:N": its value and flags must be N's */
    char key[32], val[4096];
    char got[32];
    snprintf(got, sizeof(got), "%.*s", (int)(res->key_len < 31 ? res->key_len : 31), res->key);
    int i = atoi(got + 4);
    key_of(i, key);
    size_t vl = value_of(i, val, sizeof(val));
    if (res->key_len != strlen(key) || memcmp(res->key, key, res->key_len) != 0 ||
        res->value_len != vl || memcmp(res->value, val, vl) != 0 || res->flags != flags_of(i)) {
        if (pr->wrong++ == 0)
            snprintf(pr->first_bad, sizeof(pr->first_bad), "key %.*s: wrong value or flags",
                     (int)res->key_len, res->key);
        return;
    }
    pr->ok++;
}

/* Read keys first .. first+n-1 through a pool on snap: *misses, and every
 * hit checked (value and flags); a failed read or a wrong value fails. */
static long misses_through(const mcr_snapshot *snap, int first, int n)
{
    pool_run pr;
    pool_open(&pr, snap);
    char key[32];
    for (int i = first; i < first + n; i++) {
        int kl = key_of(i, key);
        ck_assert_int_eq(mcr_pool_get(pr.pool, key, (size_t)kl, on_get, &pr, NULL), MCR_OK);
        if ((i - first) % 500 == 499)
            ck_assert_int_eq(mcr_pool_wait(pr.pool), MCR_OK);
    }
    ck_assert_int_eq(mcr_pool_wait(pr.pool), MCR_OK);
    ck_assert_msg(pr.bad == 0, "%ld gets failed: %s", pr.bad, pr.first_bad);
    ck_assert_msg(pr.wrong == 0, "%ld wrong values: %s", pr.wrong, pr.first_bad);
    ck_assert_int_eq(pr.ok + pr.misses, n);
    long m = pr.misses;
    pool_close(&pr);
    return m;
}

/* The keys of first .. first+n-1 that move from `from` to `to`. */
static long count_moved(const mcr_snapshot *from, const mcr_snapshot *to, int first, int n,
                        int (*pick)(int i))
{
    char key[32];
    long moved = 0;
    mcr_server_desc a, b;
    for (int i = first; i < first + n; i++) {
        int kl = key_of(i, key);
        mcr_snapshot_server(from, mcr_snapshot_locate(from, key, (size_t)kl), &a);
        mcr_snapshot_server(to, mcr_snapshot_locate(to, key, (size_t)kl), &b);
        if (strcmp(a.id, b.id) != 0 && (pick == NULL || pick(i)))
            moved++;
    }
    return moved;
}

/* A raw line to server `port`, its one-line reply in out. */
static void raw(int port, const char *line, char *out, size_t cap)
{
    int fd = rs_connect("127.0.0.1", port, IO_MS);
    ck_assert_int_ge(fd, 0);
    ck_assert_msg(rs_mc_line(fd, line, out, cap, IO_MS) == 0, "%s: no reply", line);
    close(fd);
}

/* The remaining TTL (`mg KEY t f`) and flags of key i on server port:
 * 0 when it is not there. */
static int meta_ttl(int port, int i, int64_t *ttl, uint32_t *flags)
{
    char key[32], line[64], reply[256];
    key_of(i, key);
    snprintf(line, sizeof(line), "mg %s t f", key);
    raw(port, line, reply, sizeof(reply));
    if (strncmp(reply, "EN", 2) == 0)
        return 0;
    ck_assert_msg(strncmp(reply, "HD ", 3) == 0, "mg %s: %s", key, reply);
    const char *t = strstr(reply, " t"), *f = strstr(reply, " f");
    ck_assert_msg(t != NULL && f != NULL, "mg %s: %s", key, reply);
    *ttl = strtoll(t + 2, NULL, 10);
    *flags = (uint32_t)strtoul(f + 2, NULL, 10);
    return 1;
}

static long long curr_items(int port)
{
    int fd = rs_connect("127.0.0.1", port, IO_MS);
    ck_assert_int_ge(fd, 0);
    long long n = rs_mc_stat(fd, NULL, "curr_items", IO_MS);
    close(fd);
    return n;
}

static void run_ok(const mcr_snapshot *from, const mcr_snapshot *to,
                   const mcr_migrate_options *o, mcr_migrate_report *r)
{
    mcr_error err = {0};
    int rc = mcr_migrate_run(from, to, o, r, &err);
    ck_assert_msg(rc == MCR_OK, "mcr_migrate_run: %s (%s)", mcr_strerror(rc), err.message);
    ck_assert_uint_eq(r->failed, 0);
    if (o == NULL || !o->dry_run)
        ck_assert_uint_eq(r->moved, r->copied + r->skipped_present + r->skipped_expired +
                                        r->skipped_gone);
}

/* ------------------------------------------------------------ resizes */

/* 4 -> 5 servers: without migrate about a fifth of the keys miss; with
 * it none, values, flags and expiry kept; a second run copies nothing. */
START_TEST(test_grow_without_misses)
{
    cluster c;
    cluster_start(&c, 5, -1);
    mcr_snapshot *four = snap_of(&c, 0, 4), *five = snap_of(&c, 0, 5);
    g_t0 = (int64_t)time(NULL);
    set_keys(four, 0, NKEYS);
    long moved = count_moved(four, five, 0, NKEYS, NULL);
    ck_assert_int_gt(moved, NKEYS / 10);
    /* the control: the resize alone misses every moved key */
    ck_assert_int_eq(misses_through(five, 0, NKEYS), moved);

    mcr_migrate_report r;
    run_ok(four, five, NULL, &r);
    ck_assert_uint_eq(r.scanned, NKEYS);
    ck_assert_uint_eq(r.stray, 0);
    ck_assert_uint_eq(r.moved, (uint64_t)moved);
    ck_assert_uint_eq(r.copied, (uint64_t)moved);
    ck_assert_uint_eq(r.nsources, 4); /* ketama: each old server loses to the new one */
    uint64_t sum = 0;
    for (size_t i = 0; i < r.nsources; i++) {
        ck_assert_int_eq(r.sources[i].status, MCR_OK);
        ck_assert_str_eq(r.sources[i].message, "");
        ck_assert_uint_gt(r.sources[i].copied, 0);
        sum += r.sources[i].copied;
    }
    ck_assert_uint_eq(sum, r.copied);
    ck_assert(r.seconds > 0);
    /* the new server had room: nothing evicted nor refused */
    ck_assert_uint_eq(r.ndestinations, 1);
    ck_assert_uint_eq(r.evicted, 0);
    ck_assert_uint_eq(r.refused, 0);
    ck_assert_str_eq(r.room_message, "");
    mcr_migrate_report_clear(&r);
    ck_assert_ptr_null(r.sources);
    ck_assert_int_eq(misses_through(five, 0, NKEYS), 0);

    /* expiry and flags on the new owner, read with the meta protocol */
    int64_t now = (int64_t)time(NULL);
    char key[32];
    int checked = 0;
    for (int i = 0; i < NKEYS; i += 7) {
        int kl = key_of(i, key);
        uint32_t d = mcr_snapshot_locate(five, key, (size_t)kl);
        if (d != 4)
            continue;
        int64_t ttl;
        uint32_t fl;
        ck_assert_msg(meta_ttl(port_of(five, d), i, &ttl, &fl), "key %d not copied", i);
        ck_assert_uint_eq(fl, flags_of(i));
        int64_t at = expires_at(i);
        if (at == -1) {
            ck_assert_msg(ttl == -1, "key %d: ttl %lld, expected none", i, (long long)ttl);
        } else {
            int64_t want = at - now;
            ck_assert_msg(llabs((long long)(ttl - want)) <= TTL_SLACK_S,
                          "key %d: remaining ttl %lld, expected about %lld", i, (long long)ttl,
                          (long long)want);
        }
        checked++;
    }
    ck_assert_int_gt(checked, 100);

    /* restartable: again, everything is there already */
    run_ok(four, five, NULL, &r);
    ck_assert_uint_eq(r.copied, 0);
    ck_assert_uint_eq(r.skipped_present, (uint64_t)moved);
    mcr_migrate_report_clear(&r);
}
END_TEST

/* 5 -> 4: the removed server's keys copied before it leaves. */
START_TEST(test_removal_without_misses)
{
    cluster c;
    cluster_start(&c, 5, -1);
    mcr_snapshot *five = snap_of(&c, 0, 5), *four = snap_of(&c, 0, 4);
    g_t0 = (int64_t)time(NULL);
    set_keys(five, 0, NKEYS);
    long moved = count_moved(five, four, 0, NKEYS, NULL);
    ck_assert_int_gt(moved, NKEYS / 10);
    mcr_migrate_report r;
    run_ok(five, four, NULL, &r);
    ck_assert_uint_eq(r.nsources, 1);
    ck_assert_int_eq(r.sources[0].status, MCR_OK);
    char want[64];
    snprintf(want, sizeof(want), "127.0.0.1:%d", c.mc[4].port);
    ck_assert_str_eq(r.sources[0].id, want);
    ck_assert_str_eq(r.sources[0].address, want);
    ck_assert_uint_eq(r.moved, (uint64_t)moved);
    ck_assert_uint_eq(r.copied, (uint64_t)moved);
    mcr_migrate_report_clear(&r);
    rs_stop(&c.mc[4]); /* it leaves */
    ck_assert_int_eq(misses_through(four, 0, NKEYS), 0);
}
END_TEST

/* ------------------------------------------------------------ outcomes */

static int is_relative_ttl(int i)
{
    return i % 3 == 1;
}

/* What the progress callback of test_skips does at the start of each
 * source's copy: delete its first moved keys (they are then gone). */
typedef struct skips_ctx {
    cluster *c;
    const mcr_snapshot *from, *to;
    char last[256];
    long deleted;
} skips_ctx;

static void delete_some(const mcr_migrate_progress *p, void *arg)
{
    skips_ctx *sc = arg;
    if (!p->copying || p->server[0] == '\0' || strcmp(p->server, sc->last) == 0)
        return;
    snprintf(sc->last, sizeof(sc->last), "%s", p->server);
    rs_proc *src = proc_of(sc->c, p->server);
    uint32_t s = mcr_snapshot_find(sc->from, p->server);
    char key[32], line[64], reply[64];
    int done = 0;
    /* from the end: test_skips writes newer values for the first ones */
    for (int i = NSMALL - 1; i >= 0 && done < 5; i--) {
        int kl = key_of(i, key);
        /* moved from this source, not a relative TTL (skipped as expired) */
        if (mcr_snapshot_locate(sc->from, key, (size_t)kl) != (uint32_t)s ||
            mcr_snapshot_locate(sc->to, key, (size_t)kl) == (uint32_t)s || is_relative_ttl(i))
            continue;
        snprintf(line, sizeof(line), "delete %s", key);
        raw(src->port, line, reply, sizeof(reply));
        if (strncmp(reply, "DELETED", 7) == 0) {
            done++;
            sc->deleted++;
        }
    }
}

/* Dry run; a value already at the new owner; keys about to expire; keys
 * gone since the dump; a stray key. */
START_TEST(test_skips)
{
    cluster c;
    cluster_start(&c, 5, -1);
    mcr_snapshot *four = snap_of(&c, 0, 4), *five = snap_of(&c, 0, 5);
    g_t0 = (int64_t)time(NULL);
    set_keys(four, 0, NSMALL);
    long moved = count_moved(four, five, 0, NSMALL, NULL);
    long relative = count_moved(four, five, 0, NSMALL, is_relative_ttl);
    ck_assert_int_gt(moved, 100);
    ck_assert_int_gt(relative, 10);

    /* dry run: counted, nothing copied */
    mcr_migrate_options o;
    mcr_migrate_options_init(&o);
    o.dry_run = 1;
    { /* a reserved area that is not zero is refused first (mcroute.h) */
        mcr_migrate_options bad = o;
        mcr_migrate_report br;
        mcr_error err = {0};
        bad.reserved[5] = 1;
        ck_assert_int_eq(mcr_migrate_run(four, five, &bad, &br, &err), MCR_ERR_INVALID);
        ck_assert_ptr_nonnull(strstr(err.message, "mcr_migrate_options: the reserved area"));
        ck_assert(mcr_test_zeroed(br.reserved, sizeof(br.reserved)));
        mcr_migrate_report_clear(&br);
    }
    mcr_migrate_report r;
    run_ok(four, five, &o, &r);
    ck_assert_uint_eq(r.moved, (uint64_t)moved);
    ck_assert_uint_eq(r.copied, 0);
    ck_assert_uint_eq(r.skipped_present + r.skipped_gone, 0);
    ck_assert_uint_eq(r.ndestinations, 0); /* nobody asked */
    mcr_migrate_report_clear(&r);
    ck_assert_int_eq(curr_items(c.mc[4].port), 0);

    /* a newer value of 3 moved keys at both owners, as a transition's set
     * writes it (never overwritten: the check before the switch finds the
     * two equal);
     * a stray key on server 0 that `four` places on another server */
    char key[32], line[128], reply[256];
    int newer[3], nn = 0, stray = -1;
    for (int i = 0; i < NSMALL && (nn < 3 || stray < 0); i++) {
        int kl = key_of(i, key);
        uint32_t a = mcr_snapshot_locate(four, key, (size_t)kl);
        uint32_t b = mcr_snapshot_locate(five, key, (size_t)kl);
        if (nn < 3 && b == 4 && !is_relative_ttl(i)) {
            snprintf(line, sizeof(line), "set %s 7 0 5\r\nnewer", key);
            raw(c.mc[4].port, line, reply, sizeof(reply));
            ck_assert_str_eq(reply, "STORED\r\n");
            raw(c.mc[a].port, line, reply, sizeof(reply));
            ck_assert_str_eq(reply, "STORED\r\n");
            newer[nn++] = i;
        }
        if (stray < 0 && a != 0 && b != 0) {
            snprintf(line, sizeof(line), "set %s 0 0 1\r\nx", key);
            raw(c.mc[0].port, line, reply, sizeof(reply));
            ck_assert_str_eq(reply, "STORED\r\n");
            stray = i;
        }
    }
    ck_assert_int_eq(nn, 3);

    /* keys with under 5000 s left are not copied (the relative TTLs) */
    mcr_migrate_options_init(&o);
    o.min_ttl = 5000;
    skips_ctx sc;
    memset(&sc, 0, sizeof(sc));
    sc.c = &c;
    sc.from = four;
    sc.to = five;
    o.progress = delete_some;
    o.progress_arg = &sc;
    run_ok(four, five, &o, &r);
    ck_assert_uint_eq(r.moved, (uint64_t)moved);
    ck_assert_uint_eq(r.stray, 1);
    ck_assert_uint_eq(r.scanned, NSMALL + 1);
    ck_assert_uint_eq(r.skipped_present, 3);
    ck_assert_uint_eq(r.skipped_expired, (uint64_t)relative);
    ck_assert_int_eq(sc.deleted, 5 * 4);
    ck_assert_uint_eq(r.skipped_gone, (uint64_t)sc.deleted);
    ck_assert_uint_eq(r.copied, (uint64_t)(moved - relative - 3 - sc.deleted));
    mcr_migrate_report_clear(&r);
    for (int k = 0; k < 3; k++) {
        char val[64];
        int fd = rs_connect("127.0.0.1", c.mc[4].port, IO_MS);
        key_of(newer[k], key);
        ck_assert_int_eq(rs_mc_get(fd, key, val, sizeof(val), IO_MS), 1);
        ck_assert_str_eq(val, "newer");
        close(fd);
    }
    /* neither the expiring keys nor the stray one are at the new owner */
    for (int i = 0; i < NSMALL; i++) {
        int kl = key_of(i, key);
        if (mcr_snapshot_locate(five, key, (size_t)kl) != 4 || !is_relative_ttl(i))
            continue;
        int64_t ttl;
        uint32_t fl;
        ck_assert_msg(!meta_ttl(c.mc[4].port, i, &ttl, &fl), "key %d copied", i);
    }
}
END_TEST

/* ------------------------------------------------------------ failures */

/* One server with dumping disabled (-X), one not running: both named, the
 * others copied. */
START_TEST(test_source_failures)
{
    cluster c;
    cluster_start(&c, 5, 1);
    mcr_snapshot *four = snap_of(&c, 0, 4), *five = snap_of(&c, 0, 5);
    g_t0 = (int64_t)time(NULL);
    set_keys(four, 0, NSMALL);
    char xid[64], downid[64];
    snprintf(xid, sizeof(xid), "127.0.0.1:%d", c.mc[1].port);
    snprintf(downid, sizeof(downid), "127.0.0.1:%d", c.mc[2].port);
    rs_stop(&c.mc[2]);

    mcr_migrate_report r;
    mcr_error err = {0};
    int rc = mcr_migrate_run(four, five, NULL, &r, &err);
    ck_assert_msg(rc == MCR_ERR_SERVER, "%s: %s", mcr_strerror(rc), err.message);
    ck_assert_msg(strstr(err.message, xid) != NULL && strstr(err.message, "metadump") != NULL &&
                      strstr(err.message, "2 of 4 sources failed") != NULL,
                  "%s", err.message);
    ck_assert_uint_eq(r.nsources, 4);
    int seen = 0;
    for (size_t i = 0; i < r.nsources; i++) {
        const mcr_migrate_source *s = &r.sources[i];
        if (strcmp(s->id, xid) == 0) {
            ck_assert_int_eq(s->status, MCR_ERR_SERVER);
            ck_assert_msg(strstr(s->message, xid) != NULL &&
                              strstr(s->message, "metadump not allowed") != NULL &&
                              strstr(s->message, "-X") != NULL,
                          "%s", s->message);
            ck_assert_uint_eq(s->scanned, 0);
            seen++;
        } else if (strcmp(s->id, downid) == 0) {
            ck_assert_int_eq(s->status, MCR_ERR_CONNECT);
            ck_assert_msg(strstr(s->message, downid) != NULL &&
                              strstr(s->message, "connect") != NULL,
                          "%s", s->message);
            seen++;
        } else {
            ck_assert_msg(s->status == MCR_OK, "%s", s->message);
            ck_assert_uint_gt(s->copied, 0);
            ck_assert_uint_eq(s->copied, s->moved);
        }
    }
    ck_assert_int_eq(seen, 2);
    mcr_migrate_report_clear(&r);
}
END_TEST

/* The destination killed (by PID) from the progress callback after some
 * copies: failures naming it; restarted (empty), a second run copies
 * everything. */
typedef struct kill_ctx {
    rs_proc *victim;
    int killed;
    uint64_t copied_at_kill;
} kill_ctx;

static void kill_dest(const mcr_migrate_progress *p, void *arg)
{
    kill_ctx *k = arg;
    if (!k->killed && p->copying && p->copied > 0) {
        rs_stop(k->victim);
        k->killed = 1;
        k->copied_at_kill = p->copied;
    }
}

START_TEST(test_destination_killed_then_resumed)
{
    cluster c;
    cluster_start(&c, 5, -1);
    mcr_snapshot *four = snap_of(&c, 0, 4), *five = snap_of(&c, 0, 5);
    g_t0 = (int64_t)time(NULL);
    set_keys(four, 0, NSMALL);
    long moved = count_moved(four, five, 0, NSMALL, NULL);
    int port = c.mc[4].port;
    char destid[64];
    snprintf(destid, sizeof(destid), "127.0.0.1:%d", port);

    /* at 400 keys a second the copy lasts about a second: progress is
     * reported every quarter of one, with copies done */
    mcr_migrate_options o;
    mcr_migrate_options_init(&o);
    o.rate = 400;
    o.timeout_ms = (unsigned)mcr_test_ms(2000);
    kill_ctx k = {&c.mc[4], 0, 0};
    o.progress = kill_dest;
    o.progress_arg = &k;
    mcr_migrate_report r;
    mcr_error err = {0};
    int rc = mcr_migrate_run(four, five, &o, &r, &err);
    ck_assert(k.killed);
    ck_assert_msg(rc != MCR_OK, "the run succeeded with its destination killed");
    ck_assert_uint_gt(r.failed, 0);
    ck_assert_uint_lt(r.copied, (uint64_t)moved);
    ck_assert_uint_eq(r.moved, r.copied + r.skipped_present + r.skipped_expired +
                                   r.skipped_gone + r.failed);
    ck_assert_msg(strstr(err.message, destid) != NULL && strstr(err.message, "failed") != NULL,
                  "%s", err.message);
    for (size_t i = 0; i < r.nsources; i++)
        if (r.sources[i].failed > 0)
            ck_assert_msg(strstr(r.sources[i].message, destid) != NULL &&
                              strstr(r.sources[i].message, "add to server") != NULL,
                          "%s", r.sources[i].message);
    mcr_migrate_report_clear(&r);

    /* back, empty, on its port: the run again copies every moved key */
    ck_assert_int_eq(rs_memcached_start(&c.mc[4], "127.0.0.1", port, NULL, START_MS), 0);
    run_ok(four, five, NULL, &r);
    ck_assert_uint_eq(r.copied, (uint64_t)moved);
    mcr_migrate_report_clear(&r);
    ck_assert_int_eq(misses_through(five, 0, NSMALL), 0);
}
END_TEST

/* ------------------------------------------------------------ room */

/* The keys of the room tests: ROOM_KEYS values of ROOM_VALUE bytes on one
 * server, about 12 MB; a server with -m 2 holds about 460 of them. */
#define ROOM_KEYS 3000
#define ROOM_VALUE 4000

static void set_big_keys(int port)
{
    char *value = malloc(ROOM_VALUE + 1);
    ck_assert_ptr_nonnull(value);
    memset(value, 'r', ROOM_VALUE);
    value[ROOM_VALUE] = '\0';
    static char names[ROOM_KEYS][16];
    const char *keys[ROOM_KEYS];
    size_t lens[ROOM_KEYS];
    for (int i = 0; i < ROOM_KEYS; i++) {
        lens[i] = (size_t)snprintf(names[i], sizeof(names[i]), "room:%d", i);
        keys[i] = names[i];
    }
    char why[256] = "";
    int fd = rs_connect("127.0.0.1", port, IO_MS);
    ck_assert_int_ge(fd, 0);
    ck_assert_msg(rs_mc_set_many(fd, keys, lens, ROOM_KEYS, value, IO_MS, why, sizeof(why)) == 0,
                  "%s", why);
    close(fd);
    free(value);
}

/* The number after `word` in text, its commas skipped ("evicted 1,234"). */
static uint64_t number_after(const char *text, const char *word)
{
    const char *p = strstr(text, word);
    ck_assert_msg(p != NULL, "no \"%s\" in: %s", word, text);
    uint64_t v = 0;
    for (p += strlen(word); (*p >= '0' && *p <= '9') || *p == ','; p++)
        if (*p != ',')
            v = v * 10 + (uint64_t)(*p - '0');
    return v;
}

/* A destination whose memory is full: every add answers STORED while it
 * evicts (-m 2), or the adds are refused (-m 2 -M): MCR_ERR_SERVER, the
 * server and the counts named, report->evicted and ->refused as memcached
 * counted them. */
START_TEST(test_destination_without_room)
{
    static const char *const evicts[] = {"-m", "2", NULL};
    static const char *const refuses[] = {"-m", "2", "-M", NULL};
    cluster c;
    memset(&c, 0, sizeof(c));
    ck_assert_msg(rs_executable(rs_memcached_path()), "need %s (Debian package memcached)",
                  rs_memcached_path());
    /* 0 evicts, 1 the source, 2 refuses */
    ck_assert_int_eq(rs_memcached_start_opts(&c.mc[0], "127.0.0.1", 0, evicts, NULL, START_MS), 0);
    ck_assert_int_eq(rs_memcached_start(&c.mc[1], "127.0.0.1", 0, NULL, START_MS), 0);
    ck_assert_int_eq(rs_memcached_start_opts(&c.mc[2], "127.0.0.1", 0, refuses, NULL, START_MS),
                     0);
    c.n = 3;
    mcr_snapshot *source = snap_of(&c, 1, 1), *to_evicting = snap_of(&c, 0, 2),
                 *to_refusing = snap_of(&c, 1, 2);
    set_big_keys(c.mc[1].port);
    char id[64], want[128];

    /* evicted: every key copied, not every key kept */
    mcr_migrate_report r;
    mcr_error err = {0};
    int rc = mcr_migrate_run(source, to_evicting, NULL, &r, &err);
    ck_assert_msg(rc == MCR_ERR_SERVER, "%s: %s", mcr_strerror(rc), err.message);
    ck_assert_uint_gt(r.moved, 1000);
    ck_assert_uint_eq(r.copied, r.moved);
    ck_assert_uint_eq(r.failed, 0);
    ck_assert_uint_eq(r.refused, 0);
    ck_assert_uint_eq(r.ndestinations, 1);
    ck_assert_uint_gt(r.evicted, 0);
    ck_assert_uint_eq(r.evicted, r.copied - (uint64_t)curr_items(c.mc[0].port));
    snprintf(id, sizeof(id), "127.0.0.1:%d", c.mc[0].port);
    snprintf(want, sizeof(want), "migrate: the destinations lack room: %s evicted ", id);
    ck_assert_msg(strncmp(err.message, want, strlen(want)) == 0, "%s", err.message);
    ck_assert_uint_eq(number_after(err.message, " evicted "), r.evicted);
    ck_assert_msg(strstr(err.message, " items during the copy (their memory is full: give them "
                                      "more memory (-m) or fewer keys before switching)") != NULL,
                  "%s", err.message);
    ck_assert_str_eq(r.room_message, err.message + strlen("migrate: "));
    ck_assert_int_eq(r.sources[0].status, MCR_OK); /* no key failed */
    mcr_migrate_report_clear(&r);

    /* refused: those adds failed, and are counted as refused too */
    rc = mcr_migrate_run(source, to_refusing, NULL, &r, &err);
    ck_assert_msg(rc == MCR_ERR_SERVER, "%s: %s", mcr_strerror(rc), err.message);
    ck_assert_uint_gt(r.refused, 0);
    ck_assert_uint_eq(r.failed, r.refused);
    ck_assert_uint_eq(r.sources[0].refused, r.refused);
    ck_assert_uint_eq(r.copied + r.refused, r.moved);
    ck_assert_uint_eq((uint64_t)curr_items(c.mc[2].port), r.copied);
    ck_assert_uint_eq(r.evicted, 0);
    snprintf(id, sizeof(id), "127.0.0.1:%d", c.mc[2].port);
    snprintf(want, sizeof(want), "migrate: the destinations lack room: %s refused ", id);
    ck_assert_msg(strncmp(err.message, want, strlen(want)) == 0, "%s", err.message);
    ck_assert_uint_eq(number_after(err.message, " refused "), r.refused);
    ck_assert_msg(strstr(r.sources[0].message, "SERVER_ERROR out of memory") != NULL, "%s",
                  r.sources[0].message);
    mcr_migrate_report_clear(&r);
}
END_TEST

/* The rate: M keys at R a second take about (M - burst) / R seconds. */
START_TEST(test_rate_limit)
{
    cluster c;
    cluster_start(&c, 2, -1);
    mcr_snapshot *one = snap_of(&c, 0, 1), *other = snap_of(&c, 1, 1);
    g_t0 = (int64_t)time(NULL);
    set_keys(one, 0, 300); /* all of them move */
    mcr_migrate_options o;
    mcr_migrate_options_init(&o);
    o.rate = 500;
    mcr_migrate_report r;
    run_ok(one, other, &o, &r);
    ck_assert_uint_eq(r.copied, 300);
    /* 300 keys, a burst of 25: at least 275 / 500 s */
    ck_assert_msg(r.seconds >= 0.5, "%g s", r.seconds);
    mcr_migrate_report_clear(&r);
}
END_TEST

/* Stopping: the flag set from the callback ends the run early. */
typedef struct stop_ctx {
    volatile int flag;
} stop_ctx;

static void stop_now(const mcr_migrate_progress *p, void *arg)
{
    stop_ctx *s = arg;
    if (p->copying && p->copied > 0)
        s->flag = 1;
}

START_TEST(test_stop_flag)
{
    cluster c;
    cluster_start(&c, 2, -1);
    mcr_snapshot *one = snap_of(&c, 0, 1), *other = snap_of(&c, 1, 1);
    g_t0 = (int64_t)time(NULL);
    set_keys(one, 0, 1000);
    stop_ctx sc = {0};
    mcr_migrate_options o;
    mcr_migrate_options_init(&o);
    o.rate = 400;
    o.progress = stop_now;
    o.progress_arg = &sc;
    o.stop = &sc.flag;
    mcr_migrate_report r;
    mcr_error err = {0};
    int rc = mcr_migrate_run(one, other, &o, &r, &err);
    ck_assert_msg(rc == MCR_ERR_CANCELLED, "%s: %s", mcr_strerror(rc), err.message);
    ck_assert_int_eq(r.stopped, 1);
    ck_assert_uint_gt(r.copied, 0);
    ck_assert_uint_lt(r.copied, 1000);
    ck_assert_msg(strstr(err.message, "stopped") != NULL, "%s", err.message);
    mcr_migrate_report_clear(&r);
    /* and then the rest */
    run_ok(one, other, NULL, &r);
    ck_assert_uint_eq(r.copied + r.skipped_present, 1000);
    ck_assert_uint_gt(r.skipped_present, 0);
    mcr_migrate_report_clear(&r);
}
END_TEST

/* ------------------------------------------------------------ a scripted server */

/* A listener that answers every connection with `reply` (then closes it),
 * until script_stop(): a dump answered BUSY is tried again. */
typedef struct script {
    int fd, port;
    const char *reply;
    pthread_t th;
} script;

static void *script_main(void *arg)
{
    script *s = arg;
    int c;
    while ((c = accept(s->fd, NULL, NULL)) >= 0) {
        char buf[256];
        size_t n = 0;
        while (n < sizeof(buf) - 1) { /* the request line */
            ssize_t r = read(c, buf + n, sizeof(buf) - 1 - n);
            if (r <= 0)
                break;
            n += (size_t)r;
            if (memchr(buf, '\n', n) != NULL)
                break;
        }
        size_t len = strlen(s->reply);
        for (size_t off = 0; off < len;) {
            ssize_t w = write(c, s->reply + off, len - off);
            if (w <= 0)
                break;
            off += (size_t)w;
        }
        close(c);
    }
    return NULL;
}

static void script_start(script *s, const char *reply)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(s->fd, 0);
    ck_assert_int_eq(bind(s->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(s->fd, 4), 0);
    ck_assert_int_eq(getsockname(s->fd, (struct sockaddr *)&sa, &sl), 0);
    s->port = ntohs(sa.sin_port);
    s->reply = reply;
    ck_assert_int_eq(pthread_create(&s->th, NULL, script_main, s), 0);
}

static void script_stop(script *s)
{
    shutdown(s->fd, SHUT_RDWR);
    pthread_join(s->th, NULL);
    close(s->fd);
}

/* From [scripted, real] to [real]: the scripted server is the source. */
static int run_scripted(const char *reply, mcr_migrate_report *r, mcr_error *err, char *id,
                        size_t cap)
{
    cluster c;
    cluster_start(&c, 1, -1);
    script s;
    script_start(&s, reply);
    char list[128];
    snprintf(list, sizeof(list), "127.0.0.1:%d,127.0.0.1:%d", s.port, c.mc[0].port);
    mcr_config *cfg = tu_config(list, MCR_MODE_KETAMA, MCR_HASH_COUNT);
    mcr_snapshot *from = NULL;
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &from, NULL), MCR_OK);
    mcr_config_free(cfg);
    track(from);
    mcr_snapshot *to = snap_of(&c, 0, 1);
    snprintf(id, cap, "127.0.0.1:%d", s.port);
    mcr_migrate_options o;
    mcr_migrate_options_init(&o);
    o.timeout_ms = (unsigned)mcr_test_ms(3000);
    int rc = mcr_migrate_run(from, to, &o, r, err);
    script_stop(&s);
    return rc;
}

START_TEST(test_malformed_dump)
{
    static const struct {
        const char *reply;
        int status;
        const char *needle;
    } cases[] = {
        {"key=a exp=-1 la=1 cas=1 fetch=no cls=1 size=60\nkey=b exp=soon la=1 cas=2 "
         "fetch=no cls=1 size=60\nEND\r\n",
         MCR_ERR_PROTOCOL, "malformed metadump line \"key=b exp=soon"},
        {"key=a exp=-1 la=1 cas=1 fetch=no cls=1\nEND\r\n", MCR_ERR_PROTOCOL, "size= is missing"},
        {"key=a exp=-1 la=1 cas=1 fetch=no cls=1 size=60\n", MCR_ERR_CONNECT, "before the dump's END"},
        {"BUSY currently processing crawler request\r\n", MCR_ERR_SERVER,
         "answered \"BUSY currently processing crawler request\""},
        {"", MCR_ERR_CONNECT, "closed"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        mcr_migrate_report r;
        mcr_error err = {0};
        char id[64];
        int rc = run_scripted(cases[i].reply, &r, &err, id, sizeof(id));
        ck_assert_msg(rc == cases[i].status, "case %zu: %s: %s", i, mcr_strerror(rc),
                      err.message);
        ck_assert_uint_eq(r.nsources, 1);
        ck_assert_str_eq(r.sources[0].id, id);
        ck_assert_msg(strstr(r.sources[0].message, id) != NULL &&
                          strstr(r.sources[0].message, cases[i].needle) != NULL,
                      "case %zu: %s", i, r.sources[0].message);
        ck_assert_msg(strstr(err.message, cases[i].needle) != NULL, "case %zu: %s", i,
                      err.message);
        ck_assert_uint_eq(r.copied, 0);
        mcr_migrate_report_clear(&r);
        teardown();
    }
}
END_TEST

/* A server that accepts and never answers: the dump's stall timeout. */
START_TEST(test_silent_server)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(fd, 4), 0); /* the kernel accepts; nobody reads */
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    char list[128];
    snprintf(list, sizeof(list), "127.0.0.1:%d,127.0.0.1:1", ntohs(sa.sin_port));
    mcr_config *cfg = tu_config(list, MCR_MODE_KETAMA, MCR_HASH_COUNT);
    mcr_snapshot *from = NULL, *to = NULL;
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &from, NULL), MCR_OK);
    mcr_config_free(cfg);
    track(from);
    cfg = tu_config("127.0.0.1:1", MCR_MODE_KETAMA, MCR_HASH_COUNT);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &to, NULL), MCR_OK);
    mcr_config_free(cfg);
    track(to);
    mcr_migrate_options o;
    mcr_migrate_options_init(&o);
    o.timeout_ms = 300;
    mcr_migrate_report r;
    mcr_error err = {0};
    int64_t t = mcr_test_now_ms();
    int rc = mcr_migrate_run(from, to, &o, &r, &err);
    t = mcr_test_now_ms() - t;
    ck_assert_msg(rc == MCR_ERR_TIMEOUT, "%s: %s", mcr_strerror(rc), err.message);
    ck_assert_msg(strstr(err.message, "stalled") != NULL, "%s", err.message);
    ck_assert_int_ge(t, 300);
    mcr_migrate_report_clear(&r);
    close(fd);
}
END_TEST

/* ------------------------------------------------------------ arguments */

START_TEST(test_arguments)
{
    mcr_migrate_options o;
    mcr_migrate_options_init(&o);
    ck_assert_uint_eq(o.timeout_ms, MCR_MIGRATE_TIMEOUT_MS);
    ck_assert_uint_eq(o.concurrency, MCR_MIGRATE_CONCURRENCY);
    ck_assert_uint_eq(o.max_value_size, MCR_MIGRATE_VALUE_SIZE);
    ck_assert(o.rate == 0 && o.dry_run == 0 && o.stop == NULL && o.progress == NULL);
    mcr_migrate_options_init(NULL);
    mcr_migrate_report_clear(NULL);

    mcr_config *cfg = tu_config("127.0.0.1:1,127.0.0.1:2", MCR_MODE_KETAMA, MCR_HASH_COUNT);
    mcr_snapshot *a = NULL, *b = NULL, *p = NULL;
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &a, NULL), MCR_OK);
    track(a);
    ck_assert_int_eq(mcr_config_set_key_prefix(cfg, "ns:", 3), MCR_OK);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &p, NULL), MCR_OK);
    track(p);
    mcr_config_free(cfg);
    cfg = tu_config("127.0.0.1:1", MCR_MODE_KETAMA, MCR_HASH_COUNT);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &b, NULL), MCR_OK);
    mcr_config_free(cfg);
    track(b);

    mcr_migrate_report r;
    mcr_error err = {0};
    ck_assert_int_eq(mcr_migrate_run(NULL, b, NULL, &r, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_migrate_run(a, NULL, NULL, NULL, NULL), MCR_ERR_INVALID);
    ck_assert_uint_eq(r.nsources, 0);
    ck_assert_ptr_null(r.sources);
    static const struct {
        double rate;
        unsigned timeout, conc, min_ttl;
        size_t value;
        const char *needle;
    } bad[] = {
        {-1, 0, 0, 0, 0, "rate"},
        {NAN, 0, 0, 0, 0, "rate"},
        {2e9, 0, 0, 0, 0, "rate"},
        {0, MCR_MIGRATE_TIMEOUT_MAX_MS + 1, 0, 0, 0, "timeout_ms"},
        {0, 0, MCR_MIGRATE_CONCURRENCY_MAX + 1, 0, 0, "concurrency"},
        {0, 0, 0, MCR_MIGRATE_MIN_TTL_MAX + 1, 0, "min_ttl"},
        {0, 0, 0, 0, (size_t)MCR_MIGRATE_VALUE_SIZE_MAX + 1, "max_value_size"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        mcr_migrate_options_init(&o);
        o.rate = bad[i].rate;
        o.timeout_ms = bad[i].timeout;
        o.concurrency = bad[i].conc;
        o.min_ttl = bad[i].min_ttl;
        o.max_value_size = bad[i].value;
        ck_assert_int_eq(mcr_migrate_run(a, b, &o, &r, &err), MCR_ERR_RANGE);
        ck_assert_msg(strstr(err.message, bad[i].needle) != NULL, "%s", err.message);
        ck_assert_ptr_null(r.sources);
    }
    /* different key prefixes: the keys themselves would change */
    ck_assert_int_eq(mcr_migrate_run(p, b, NULL, &r, &err), MCR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.message, "key prefix") != NULL, "%s", err.message);
    mcr_migrate_report_clear(&r);
    /* the same placement: nothing moves, no server is asked */
    mcr_migrate_report_clear(&r);
    ck_assert_int_eq(mcr_migrate_run(a, a, NULL, &r, &err), MCR_OK);
    ck_assert_uint_eq(r.nsources, 0);
    ck_assert_uint_eq(r.moved, 0);
    mcr_migrate_report_clear(&r);
    /* a NULL report: only the status */
    ck_assert_int_eq(mcr_migrate_run(a, a, NULL, NULL, NULL), MCR_OK);
}
END_TEST

/* A snapshot with a key prefix: dumped keys carry it; one without it is a
 * stray. */
START_TEST(test_key_prefix)
{
    cluster c;
    cluster_start(&c, 2, -1);
    char l1[64], l2[128];
    snprintf(l1, sizeof(l1), "127.0.0.1:%d", c.mc[0].port);
    snprintf(l2, sizeof(l2), "127.0.0.1:%d,127.0.0.1:%d", c.mc[0].port, c.mc[1].port);
    mcr_snapshot *one = NULL, *two = NULL;
    mcr_config *cfg = tu_config(l1, MCR_MODE_KETAMA, MCR_HASH_COUNT);
    mcr_config_set_key_prefix(cfg, "ns:", 3);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &one, NULL), MCR_OK);
    mcr_config_free(cfg);
    track(one);
    cfg = tu_config(l2, MCR_MODE_KETAMA, MCR_HASH_COUNT);
    mcr_config_set_key_prefix(cfg, "ns:", 3);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &two, NULL), MCR_OK);
    mcr_config_free(cfg);
    track(two);
    /* 200 keys "ns:kN" as libmemcached's namespace writes them, one other */
    char line[128], reply[64], key[32];
    long want = 0;
    for (int i = 0; i < 200; i++) {
        int kl = snprintf(key, sizeof(key), "k%d", i);
        snprintf(line, sizeof(line), "set ns:%s 3 0 2\r\nv%d", key, i % 10);
        raw(c.mc[0].port, line, reply, sizeof(reply));
        ck_assert_str_eq(reply, "STORED\r\n");
        want += mcr_snapshot_locate(two, key, (size_t)kl) == 1;
    }
    raw(c.mc[0].port, "set other 0 0 1\r\nx", reply, sizeof(reply));
    mcr_migrate_report r;
    run_ok(one, two, NULL, &r);
    ck_assert_uint_eq(r.scanned, 201);
    ck_assert_uint_eq(r.stray, 1);
    ck_assert_uint_eq(r.moved, (uint64_t)want);
    ck_assert_uint_eq(r.copied, (uint64_t)want);
    mcr_migrate_report_clear(&r);
    ck_assert_int_eq(curr_items(c.mc[1].port), want);
}
END_TEST

/* ------------------------------------------------------------ metadump lines */

START_TEST(test_metadump_lines)
{
    mcr__md_item it;
    char why[128];
    const char *ok = "key=a%2520b%C3%A9 exp=1796231676 la=1796231576 cas=2 fetch=yes cls=1 "
                     "size=67";
    ck_assert_int_eq(mcr__md_parse(ok, strlen(ok), &it, why, sizeof(why)), 0);
    ck_assert_uint_eq(it.key_len, 7);
    ck_assert(memcmp(it.key, "a%20b\xc3\xa9", 7) == 0);
    ck_assert_int_eq(it.exp, 1796231676);
    ck_assert_uint_eq(it.la, 1796231576);
    ck_assert_uint_eq(it.cas, 2);
    ck_assert_int_eq(it.fetched, 1);
    ck_assert_uint_eq(it.cls, 1);
    ck_assert_uint_eq(it.size, 67);
    const char *never = "key=k exp=-1 la=0 cas=0 fetch=no cls=63 size=1 flags=5 extra=x";
    ck_assert_int_eq(mcr__md_parse(never, strlen(never), &it, why, sizeof(why)), 0);
    ck_assert_int_eq(it.exp, -1);
    ck_assert_int_eq(it.fetched, 0);
    /* a 250-byte key, every byte encoded */
    char big[1024];
    size_t n = (size_t)sprintf(big, "key=");
    for (int i = 0; i < 250; i++)
        n += (size_t)sprintf(big + n, "%%%02X", 0x41 + i % 26);
    sprintf(big + n, " exp=-1 la=1 cas=1 fetch=no cls=1 size=1");
    ck_assert_int_eq(mcr__md_parse(big, strlen(big), &it, why, sizeof(why)), 0);
    ck_assert_uint_eq(it.key_len, 250);
    big[n] = '\0';
    strcat(big, "%41 exp=-1 la=1 cas=1 fetch=no cls=1 size=1");
    ck_assert_int_eq(mcr__md_parse(big, strlen(big), &it, why, sizeof(why)), -1);
    ck_assert_msg(strstr(why, "longer than 250") != NULL, "%s", why);

    static const struct {
        const char *line, *why;
    } bad[] = {
        {"", "empty"},
        {"key= exp=-1 la=1 cas=1 fetch=no cls=1 size=1", "key is empty"},
        {"key=a%2 exp=-1 la=1 cas=1 fetch=no cls=1 size=1", "two hex digits"},
        {"key=a%zz exp=-1 la=1 cas=1 fetch=no cls=1 size=1", "two hex digits"},
        {"key=a exp=0 la=1 cas=1 fetch=no cls=1 size=1", "exp"},
        {"key=a exp=+5 la=1 cas=1 fetch=no cls=1 size=1", "exp"},
        {"key=a exp=-2 la=1 cas=1 fetch=no cls=1 size=1", "exp"},
        {"key=a exp=-1 la=01 cas=1 fetch=no cls=1 size=1", "la"},
        {"key=a exp=-1 la=1 cas=18446744073709551616 fetch=no cls=1 size=1", "cas"},
        {"key=a exp=-1 la=1 cas=1 fetch=maybe cls=1 size=1", "fetch"},
        {"key=a exp=-1 la=1 cas=1 fetch=no cls=4294967296 size=1", "cls"},
        {"key=a exp=-1 la=1 cas=1 fetch=no cls=1 size=x", "size"},
        {"key=a exp=-1 la=1 cas=1 fetch=no cls=1", "size= is missing"},
        {"exp=-1 key=a la=1 cas=1 fetch=no cls=1 size=1", "key="},
        {"key=a  exp=-1 la=1 cas=1 fetch=no cls=1 size=1", "two spaces"},
        {"key=a exp=-1 la=1 cas=1 fetch=no cls=1 size=1 ", "space at an end"},
        {"key=a exp=-1 la=1 cas=1 fetch=no cls=1 size=1 size=2", "given twice"},
        {"key=a exp=-1 la=1 cas=1 fetch=no cls=1 size=1 junk", "NAME=VALUE"},
        {"STAT items:1:number 5", "NAME=VALUE"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why[0] = '\0';
        ck_assert_msg(mcr__md_parse(bad[i].line, strlen(bad[i].line), &it, why, sizeof(why)) == -1,
                      "accepted: %s", bad[i].line);
        ck_assert_msg(strstr(why, bad[i].why) != NULL, "%s: %s", bad[i].line, why);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("migrate");
    const tu_case cases[] = {
        {"metadump_lines", test_metadump_lines},
        {"arguments", test_arguments},
        {"grow_without_misses", test_grow_without_misses},
        {"removal_without_misses", test_removal_without_misses},
        {"skips", test_skips},
        {"source_failures", test_source_failures},
        {"destination_killed_then_resumed", test_destination_killed_then_resumed},
        {"destination_without_room", test_destination_without_room},
        {"rate_limit", test_rate_limit},
        {"stop_flag", test_stop_flag},
        {"malformed_dump", test_malformed_dump},
        {"silent_server", test_silent_server},
        {"key_prefix", test_key_prefix},
    };
    tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]), 120, teardown);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
