/* SPDX-License-Identifier: BSD-3-Clause */
/* copy.c: the migration engine: which servers lose keys, their dumps read and selected, each moved key copied to its new owner with add semantics, rate-limited, bounded in flight. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "placement/placement_internal.h"
#include "mcroute_migrate.h"
#include "mcroute_pool.h"
#include "mcroute_router.h"
#include "migrate/migrate_internal.h"

/* How often the loop looks at the stop flag and reports progress, and the
 * least time between two progress reports (about 4 a second). */
#define TICK_MS 100
#define PROGRESS_EVERY_S 0.25
/* The token bucket holds this many seconds of the rate (and at least 1). */
#define BURST_S 0.05

/* A moved key of the source being copied: its bytes in the key arena. */
typedef struct mig_item {
    size_t off;
    uint32_t len;
    uint32_t dest;  /* its owner in `to`, a snapshot index */
    int64_t exp;    /* metadump's exp: -1 never, else a Unix time */
} mig_item;

typedef struct engine engine;

/* One copy in flight: a get with its CAS (R), an add (W), the source's
 * CAS read again (C), and the copy removed when it changed (see
 * copy_rule below). */
typedef struct mig_slot {
    engine *e;
    size_t item;
    uint64_t cas_src, cas_dst;
    int64_t ttl;        /* R's remaining TTL: -1 never */
    double read_at;     /* when R answered, monotonic seconds */
    unsigned tries;     /* copies of the key undone so far */
} mig_slot;

struct engine {
    const mcr_snapshot *from, *to;
    mcr_migrate_options o;
    mcr_migrate_report *rep;
    char prefix[256];    /* the snapshots' key prefix */
    size_t prefix_len;
    int has_prefix;
    double start;        /* monotonic seconds */
    double last_progress;

    /* The source being scanned or copied. */
    size_t si;
    uint32_t src;        /* its index in `from` */
    mcr_migrate_source *s;
    mig_item *items;
    size_t nitems, items_cap;
    char *keys;
    size_t keys_len, keys_cap;
    int dump_oom;

    /* The copy loop. */
    struct event_base *base;
    mcr_router *rfrom, *rto;
    mcr_pool *pfrom, *pto;
    struct event *tick, *wake;
    mig_slot *slots;
    size_t *free_slots, nfree;
    size_t next, in_flight;
    double tokens, refilled;
    int wake_armed;
    int stopping;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int64_t unix_now(void)
{
    return (int64_t)time(NULL);
}

void mcr_migrate_options_init(mcr_migrate_options *o)
{
    if (o == NULL)
        return;
    memset(o, 0, sizeof(*o));
    o->timeout_ms = MCR_MIGRATE_TIMEOUT_MS;
    o->concurrency = MCR_MIGRATE_CONCURRENCY;
    o->max_value_size = MCR_MIGRATE_VALUE_SIZE;
}

void mcr_migrate_report_clear(mcr_migrate_report *r)
{
    if (r == NULL)
        return;
    free(r->sources);
    memset(r, 0, sizeof(*r));
}

/* The options with their defaults, checked. */
static int check_options(const mcr_migrate_options *in, mcr_migrate_options *o, mcr_error *err)
{
    mcr_migrate_options_init(o);
    if (in == NULL)
        return MCR_OK;
    *o = *in;
    if (!mcr__zeroed(o->reserved, sizeof(o->reserved)))
        return mcr__error(err, MCR_ERR_INVALID,
                          "mcr_migrate_options: the reserved area is not zero (fill the "
                          "struct from all-zero: mcroute.h)");
    if (o->timeout_ms == 0)
        o->timeout_ms = MCR_MIGRATE_TIMEOUT_MS;
    if (o->concurrency == 0)
        o->concurrency = MCR_MIGRATE_CONCURRENCY;
    if (o->max_value_size == 0)
        o->max_value_size = MCR_MIGRATE_VALUE_SIZE;
    if (!(o->rate >= 0) || o->rate > MCR_MIGRATE_RATE_MAX)
        return mcr__error(err, MCR_ERR_RANGE,
                          "migrate: rate %g: expected 0 (unlimited) to %g keys per second",
                          o->rate, MCR_MIGRATE_RATE_MAX);
    if (o->timeout_ms > MCR_MIGRATE_TIMEOUT_MAX_MS)
        return mcr__error(err, MCR_ERR_RANGE, "migrate: timeout_ms %u: at most %u", o->timeout_ms,
                          MCR_MIGRATE_TIMEOUT_MAX_MS);
    if (o->concurrency > MCR_MIGRATE_CONCURRENCY_MAX)
        return mcr__error(err, MCR_ERR_RANGE, "migrate: concurrency %u: at most %u",
                          o->concurrency, MCR_MIGRATE_CONCURRENCY_MAX);
    if (o->max_value_size > MCR_MIGRATE_VALUE_SIZE_MAX)
        return mcr__error(err, MCR_ERR_RANGE, "migrate: max_value_size %zu: at most %u",
                          o->max_value_size, MCR_MIGRATE_VALUE_SIZE_MAX);
    if (o->min_ttl > MCR_MIGRATE_MIN_TTL_MAX)
        return mcr__error(err, MCR_ERR_RANGE, "migrate: min_ttl %u: at most %u seconds",
                          o->min_ttl, MCR_MIGRATE_MIN_TTL_MAX);
    return MCR_OK;
}

/* ------------------------------------------------------------ key prefix */

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The key prefix of a snapshot, from its canonical text's "key-prefix"
 * line ("key-prefix off" or "key-prefix value=<percent-encoded>"):
 * *has 0 or 1, the bytes in out (at most 255). */
static int snapshot_prefix(const mcr_snapshot *snap, int *has, char *out, size_t *len,
                           mcr_error *err)
{
    char *text = NULL;
    size_t tlen = 0;
    int rc = mcr_snapshot_text(snap, &text, &tlen, err);
    if (rc != MCR_OK)
        return rc;
    const char *line = NULL;
    for (const char *p = text; p < text + tlen;) {
        const char *nl = memchr(p, '\n', (size_t)(text + tlen - p));
        if (strncmp(p, "key-prefix ", 11) == 0) {
            line = p + 11;
            break;
        }
        if (nl == NULL)
            break;
        p = nl + 1;
    }
    rc = MCR_OK;
    *has = 0;
    *len = 0;
    if (line == NULL) {
        rc = mcr__error(err, MCR_ERR_UNSUPPORTED, "migrate: a snapshot text without key-prefix");
    } else if (strncmp(line, "value=", 6) == 0) {
        *has = 1;
        for (const char *p = line + 6; *p != '\n' && *p != '\0' && *p != ' '; p++) {
            int c = (unsigned char)*p;
            if (c == '%') {
                int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);
                if (hi < 0 || lo < 0) {
                    rc = mcr__error(err, MCR_ERR_UNSUPPORTED,
                                    "migrate: a snapshot's key-prefix line does not decode");
                    break;
                }
                c = hi << 4 | lo;
                p += 2;
            }
            if (*len >= 255) {
                rc = mcr__error(err, MCR_ERR_UNSUPPORTED, "migrate: a key prefix too long");
                break;
            }
            out[(*len)++] = (char)c;
        }
    } else if (strncmp(line, "off", 3) != 0) {
        rc = mcr__error(err, MCR_ERR_UNSUPPORTED,
                        "migrate: a snapshot's key-prefix line is neither off nor value=");
    }
    free(text);
    return rc;
}

/* ------------------------------------------------------------ sources */

/* "host:port" of server i of snap, brackets for IPv6. */
static void server_address(const mcr_snapshot *snap, size_t i, char *out, size_t cap)
{
    mcr_server_desc d;
    if (mcr_snapshot_server(snap, i, &d) != MCR_OK) {
        snprintf(out, cap, "?");
        return;
    }
    snprintf(out, cap, strchr(d.host, ':') ? "[%s]:%d" : "%s:%d", d.host, d.port);
}

/* Whether `to` has server `id` ACTIVE at the address it has in `from`. */
static int kept_as_is(const mcr_snapshot *from, size_t i, const mcr_snapshot *to)
{
    mcr_server_desc a, b;
    if (mcr_snapshot_server(from, i, &a) != MCR_OK)
        return 0;
    uint32_t j = mcr_snapshot_find(to, a.id);
    if (j == MCR_NO_SERVER || mcr_snapshot_server(to, (size_t)j, &b) != MCR_OK)
        return 0;
    return b.state == MCR_STATE_ACTIVE && b.port == a.port && strcmp(a.host, b.host) == 0;
}

/* The servers that lose keys, in `from`'s order, into rep->sources; their
 * indexes in `from` into *idx (malloc'd). */
static int find_sources(engine *e, uint32_t **idx, mcr_error *err)
{
    size_t n = mcr_snapshot_server_count(e->from);
    unsigned char *lose = calloc(n ? n : 1, 1);
    if (lose == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "migrate: out of memory");
    mcr_diff *d = NULL;
    mcr_error derr;
    int rc = mcr_diff_new(e->from, e->to, &d, &derr);
    if (rc == MCR_ERR_NOMEM) {
        free(lose);
        return mcr__error(err, rc, "migrate: %s", derr.message);
    }
    for (size_t i = 0; i < n; i++) {
        mcr_server_desc sd;
        if (mcr_snapshot_server(e->from, i, &sd) != MCR_OK || sd.state != MCR_STATE_ACTIVE)
            continue;
        /* Incomparable placements: every active server may lose keys. */
        if (rc != MCR_OK || !kept_as_is(e->from, i, e->to))
            lose[i] = 1;
    }
    if (rc == MCR_OK) {
        for (size_t p = 0; p < mcr_diff_pair_count(d); p++) {
            mcr_diff_pair pr;
            if (mcr_diff_pair_get(d, p, &pr) != MCR_OK)
                continue;
            uint32_t i = mcr_snapshot_find(e->from, pr.from);
            if (i != MCR_NO_SERVER)
                lose[i] = 1;
        }
        mcr_diff_free(d);
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += lose[i];
    e->rep->sources = calloc(k ? k : 1, sizeof(*e->rep->sources));
    *idx = calloc(k ? k : 1, sizeof(**idx));
    if (e->rep->sources == NULL || *idx == NULL) {
        free(lose);
        free(*idx);
        *idx = NULL;
        return mcr__error(err, MCR_ERR_NOMEM, "migrate: out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        if (!lose[i])
            continue;
        mcr_migrate_source *s = &e->rep->sources[e->rep->nsources];
        mcr_server_desc sd;
        mcr_snapshot_server(e->from, i, &sd);
        snprintf(s->id, sizeof(s->id), "%s", sd.id);
        server_address(e->from, i, s->address, sizeof(s->address));
        (*idx)[e->rep->nsources++] = (uint32_t)i;
    }
    free(lose);
    return MCR_OK;
}

/* ------------------------------------------------------------ progress */

static void progress(engine *e, int copying, int force)
{
    if (e->o.progress == NULL)
        return;
    double t = now_s();
    if (!force && t - e->last_progress < PROGRESS_EVERY_S)
        return;
    e->last_progress = t;
    const mcr_migrate_report *r = e->rep;
    mcr_migrate_progress p;
    memset(&p, 0, sizeof(p));
    p.scanned = r->scanned;
    p.moved = r->moved;
    p.copied = r->copied;
    p.skipped = r->skipped_present + r->skipped_expired + r->skipped_gone;
    p.failed = r->failed;
    p.server = e->s != NULL ? e->s->id : "";
    p.source = e->s != NULL ? e->si + 1 : r->nsources;
    p.nsources = r->nsources;
    p.copying = copying;
    double el = t - e->start;
    p.keys_per_s = el > 0 ? (double)r->copied / el : 0;
    e->o.progress(&p, e->o.progress_arg);
}

/* ------------------------------------------------------------ the dump */

/* Where key (len bytes, as dumped) goes: the placement key, without the
 * prefix; 0 when it is not one of ours (a key without the prefix). */
static int placement_key(const engine *e, const char *key, size_t len, const char **pk,
                         size_t *plen)
{
    if (e->has_prefix) {
        if (len < e->prefix_len || memcmp(key, e->prefix, e->prefix_len) != 0)
            return 0;
        key += e->prefix_len;
        len -= e->prefix_len;
    }
    *pk = key;
    *plen = len;
    return 1;
}

/* Whether exp (metadump's) leaves nothing worth copying at `now`. */
static int expired(const engine *e, int64_t exp, int64_t now)
{
    return exp != -1 && exp <= now + (int64_t)e->o.min_ttl;
}

static int keep_item(engine *e, const mcr__md_item *it, uint32_t dest)
{
    if (e->nitems == e->items_cap) {
        size_t nc = e->items_cap ? e->items_cap * 2 : 1024;
        mig_item *ni = realloc(e->items, nc * sizeof(*ni));
        if (ni == NULL)
            return -1;
        e->items = ni;
        e->items_cap = nc;
    }
    if (e->keys_len + it->key_len > e->keys_cap) {
        size_t nc = e->keys_cap ? e->keys_cap * 2 : 65536;
        while (nc < e->keys_len + it->key_len)
            nc *= 2;
        char *nk = realloc(e->keys, nc);
        if (nk == NULL)
            return -1;
        e->keys = nk;
        e->keys_cap = nc;
    }
    memcpy(e->keys + e->keys_len, it->key, it->key_len);
    mig_item *m = &e->items[e->nitems++];
    m->off = e->keys_len;
    m->len = (uint32_t)it->key_len;
    m->dest = dest;
    m->exp = it->exp;
    e->keys_len += it->key_len;
    return 0;
}

static int on_line(const char *line, size_t len, void *arg, mcr_error *err)
{
    engine *e = arg;
    mcr__md_item it;
    char why[128], q[120];
    if (mcr__md_parse(line, len, &it, why, sizeof(why)) != 0)
        return mcr__error(err, MCR_ERR_PROTOCOL, "malformed metadump line \"%s\": %s",
                          mcr__quote(q, sizeof(q), line, len), why);
    e->s->scanned++;
    e->rep->scanned++;
    const char *pk;
    size_t plen;
    if (!placement_key(e, it.key, it.key_len, &pk, &plen) ||
        mcr_snapshot_locate(e->from, pk, plen) != e->src) {
        e->s->stray++;
        e->rep->stray++;
        return MCR_OK;
    }
    uint32_t dest = mcr_snapshot_locate(e->to, pk, plen);
    mcr_server_desc a, b;
    if (mcr_snapshot_server(e->from, e->src, &a) == MCR_OK &&
        mcr_snapshot_server(e->to, dest, &b) == MCR_OK && strcmp(a.id, b.id) == 0 &&
        a.port == b.port && strcmp(a.host, b.host) == 0)
        return MCR_OK; /* it stays */
    e->s->moved++;
    e->rep->moved++;
    if (expired(e, it.exp, unix_now())) {
        e->s->skipped_expired++;
        e->rep->skipped_expired++;
        return MCR_OK;
    }
    if (e->o.dry_run)
        return MCR_OK;
    if (keep_item(e, &it, dest) != 0) {
        e->dump_oom = 1;
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for its moved keys");
    }
    return MCR_OK;
}

static int on_dump_tick(void *arg, mcr_error *err)
{
    engine *e = arg;
    if (e->o.stop != NULL && *e->o.stop) {
        e->stopping = 1;
        return mcr__error(err, MCR_ERR_CANCELLED, "migrate: stopped");
    }
    progress(e, 0, 0);
    return MCR_OK;
}

/* ------------------------------------------------------------ the copy */

static void pump(engine *e);

static void set_source_failure(engine *e, int status, const char *fmt, ...) MCR__PRINTF(3, 4);

/* Record a key's failure on the source: its first one names it. */
static void set_source_failure(engine *e, int status, const char *fmt, ...)
{
    mcr_migrate_source *s = e->s;
    s->failed++;
    e->rep->failed++;
    if (s->status == MCR_OK) {
        va_list ap;
        s->status = status;
        va_start(ap, fmt);
        vsnprintf(s->message, sizeof(s->message), fmt, ap);
        va_end(ap);
    }
}

static void finish(engine *e, mig_slot *sl)
{
    e->free_slots[e->nfree++] = (size_t)(sl - e->slots);
    e->in_flight--;
    progress(e, 1, 0);
    pump(e);
}

static const char *item_key(const engine *e, const mig_item *m, char *q, size_t cap)
{
    return mcr__quote(q, cap, e->keys + m->off, m->len);
}

/* A request of op for item m, pinned to the server of that id. */
static void item_request(const engine *e, const mig_item *m, mcr_op op, const char *server,
                         mcr_request *rq)
{
    memset(rq, 0, sizeof(*rq));
    rq->op = op;
    rq->key = e->keys + m->off;
    rq->key_len = m->len;
    rq->server = server;
}

/*
 * copy_rule: a copy is trusted only when its source did not change
 * between R and C. While copying, every client write of a moved key
 * reaches the old owner first and the new one once the old answered (the
 * pool's migration: the same command, or a delete of the new owner's
 * copy); a set reaches both at once. So a write that came before R is in
 * the value read; one between R and C changes the source's CAS (or TTL,
 * or removes the key), and the copy is removed by its own CAS (a value
 * written since at the new owner stays) and made again; one after C
 * reaches the new owner after the add and applies to the copy. Nobody
 * reads the new owner before the switch, which comes after the run: a
 * copy's moment between W and C is seen by no client. A key whose copies
 * are overtaken COPY_TRIES times is counted `undone`: it stays at the old
 * owner only (read through the switched phase's fallback).
 */

/* A TTL read again may differ by the seconds between the reads (memcached's
 * clock ticks once a second): more means the item was touched meanwhile. */
#define TTL_SLACK_S 2
/* Copies of one key tried before it is left `undone` (its writes kept
 * overtaking the copy: the switched phase's fallback reads serve it). */
#define COPY_TRIES 4

static int read_source(engine *e, mig_slot *sl);

static void on_undo(const mcr_result *res, void *arg)
{
    mig_slot *sl = arg;
    engine *e = sl->e;
    const mig_item *m = &e->items[sl->item];
    char q[80], addr[MCR_HOSTNAME_MAX + 16];
    if (res->status == MCR_OK) {
        /* DELETED; EXISTS or MISS: a client's write replaced or removed it
         * first. Before the switch nobody reads the new owner: copy the
         * key again, from what the old owner holds now. */
        if (++sl->tries < COPY_TRIES && !e->stopping) {
            if (read_source(e, sl) == MCR_OK)
                return;
            finish(e, sl); /* its failure is counted */
            return;
        }
        e->s->undone++;
        e->rep->undone++;
    } else {
        server_address(e->to, m->dest, addr, sizeof(addr));
        set_source_failure(e, res->status,
                           "key \"%s\": changed at its source while copied, and its copy "
                           "could not be removed from server %s (%s): %s",
                           item_key(e, m, q, sizeof(q)), res->server ? res->server : "?", addr,
                           res->message ? res->message : mcr_strerror(res->status));
    }
    finish(e, sl);
}

/* Remove the slot's copy from the new owner, by its CAS. */
static void undo(engine *e, mig_slot *sl)
{
    const mig_item *m = &e->items[sl->item];
    mcr_server_desc d;
    mcr_snapshot_server(e->to, m->dest, &d);
    mcr_request rq;
    item_request(e, m, MCR_OP_DELETE, d.id, &rq);
    rq.cas = sl->cas_dst;
    mcr_error serr;
    mcr_result r;
    int rc = sl->cas_dst == 0 ? MCR_ERR_UNSUPPORTED
                              : mcr_pool_submit(e->pto, &rq, on_undo, sl, &serr);
    if (rc != MCR_OK) {
        if (sl->cas_dst == 0)
            snprintf(serr.message, sizeof(serr.message),
                     "its copy has no CAS (memcached -C): not removed");
        memset(&r, 0, sizeof(r));
        r.status = rc;
        r.message = serr.message;
        r.server = d.id;
        on_undo(&r, sl);
    }
}

static void on_check(const mcr_result *res, void *arg)
{
    mig_slot *sl = arg;
    engine *e = sl->e;
    int same = res->status == MCR_OK && res->reply == MCR_REPLY_HIT && res->cas == sl->cas_src;
    if (same && (res->ttl == -1) != (sl->ttl == -1))
        same = 0;
    if (same && sl->ttl != -1) {
        double want = (double)sl->ttl - (now_s() - sl->read_at);
        same = (double)res->ttl >= want - TTL_SLACK_S && (double)res->ttl <= want + TTL_SLACK_S;
    }
    if (!same) {
        undo(e, sl);
        return;
    }
    e->s->copied++;
    e->rep->copied++;
    finish(e, sl);
}

/* C: the source's CAS read again. */
static void check(engine *e, mig_slot *sl)
{
    const mig_item *m = &e->items[sl->item];
    mcr_request rq;
    item_request(e, m, MCR_OP_GETS, e->s->id, &rq);
    mcr_error serr;
    if (mcr_pool_submit(e->pfrom, &rq, on_check, sl, &serr) != MCR_OK)
        undo(e, sl);
}

static void on_add(const mcr_result *res, void *arg)
{
    mig_slot *sl = arg;
    engine *e = sl->e;
    const mig_item *m = &e->items[sl->item];
    char q[80], addr[MCR_HOSTNAME_MAX + 16];
    if (res->status == MCR_OK && res->reply == MCR_REPLY_STORED) {
        sl->cas_dst = res->cas;
        check(e, sl);
        return;
    } else if (res->status == MCR_OK && res->reply == MCR_REPLY_NOT_STORED) {
        e->s->skipped_present++;
        e->rep->skipped_present++;
    } else {
        if (mcr__room_refusal(res->status, res->message)) { /* the new owner is full */
            e->s->refused++;
            e->rep->refused++;
        }
        server_address(e->to, m->dest, addr, sizeof(addr));
        set_source_failure(e, res->status != MCR_OK ? res->status : MCR_ERR_PROTOCOL,
                           "key \"%s\": add to server %s (%s): %s", item_key(e, m, q, sizeof(q)),
                           res->server ? res->server : "?", addr,
                           res->status != MCR_OK && res->message ? res->message
                                                                 : mcr_reply_name(res->reply));
    }
    finish(e, sl);
}

static void on_get(const mcr_result *res, void *arg)
{
    mig_slot *sl = arg;
    engine *e = sl->e;
    const mig_item *m = &e->items[sl->item];
    char q[80], addr[MCR_HOSTNAME_MAX + 16];
    if (res->status != MCR_OK) {
        set_source_failure(e, res->status, "key \"%s\": get from server %s (%s): %s",
                           item_key(e, m, q, sizeof(q)), e->s->id, e->s->address,
                           res->message ? res->message : mcr_strerror(res->status));
        finish(e, sl);
        return;
    }
    if (res->reply != MCR_REPLY_HIT) {
        e->s->skipped_gone++;
        e->rep->skipped_gone++;
        finish(e, sl);
        return;
    }
    /* the TTL as read now (a touch since the dump counts), in memcached's
     * exptime: seconds up to 30 days, a Unix time beyond */
    int64_t exptime = 0;
    if (res->cas == 0) {
        /* memcached -C: no CAS, so a copy cannot be checked against its
         * source, nor removed without removing a client's write */
        set_source_failure(e, MCR_ERR_UNSUPPORTED,
                           "key \"%s\": server %s (%s) gives no CAS (memcached -C): a copy "
                           "cannot be verified; run it without -C to migrate",
                           item_key(e, m, q, sizeof(q)), e->s->id, e->s->address);
        finish(e, sl);
        return;
    }
    sl->cas_src = res->cas;
    sl->ttl = res->ttl;
    sl->read_at = now_s();
    if (res->ttl != -1) {
        int64_t abs_exp = unix_now() + (res->ttl > 0 ? res->ttl : 0);
        if (res->ttl <= 0 || expired(e, abs_exp, unix_now())) {
            e->s->skipped_expired++;
            e->rep->skipped_expired++;
            finish(e, sl);
            return;
        }
        if (res->ttl > 30 * 24 * 3600 && abs_exp > INT32_MAX) {
            set_source_failure(e, MCR_ERR_RANGE,
                               "key \"%s\": its expiry %lld is past what memcached's exptime "
                               "holds (2^31-1)",
                               item_key(e, m, q, sizeof(q)), (long long)abs_exp);
            finish(e, sl);
            return;
        }
        exptime = res->ttl > 30 * 24 * 3600 ? abs_exp : res->ttl;
    }
    mcr_server_desc d;
    mcr_snapshot_server(e->to, m->dest, &d);
    mcr_request rq;
    item_request(e, m, MCR_OP_ADD, d.id, &rq);
    rq.value = res->value;
    rq.value_len = res->value_len;
    rq.flags = res->flags;
    rq.exptime = exptime;
    mcr_error serr;
    int rc = mcr_pool_submit(e->pto, &rq, on_add, sl, &serr);
    if (rc != MCR_OK) {
        server_address(e->to, m->dest, addr, sizeof(addr));
        set_source_failure(e, rc, "key \"%s\": add to server %s (%s): %s",
                           item_key(e, m, q, sizeof(q)), d.id, addr, serr.message);
        finish(e, sl);
    }
}

/* Start the copy of item i in a free slot. */
static void start(engine *e, size_t i)
{
    const mig_item *m = &e->items[i];
    if (expired(e, m->exp, unix_now())) {
        e->s->skipped_expired++;
        e->rep->skipped_expired++;
        return;
    }
    mig_slot *sl = &e->slots[e->free_slots[--e->nfree]];
    sl->e = e;
    sl->item = i;
    sl->tries = 0;
    e->in_flight++;
    if (read_source(e, sl) != MCR_OK) {
        e->free_slots[e->nfree++] = (size_t)(sl - e->slots);
        e->in_flight--;
    }
}

/* R: the slot's key read at the source with its CAS and TTL. MCR_OK, or
 * the failure recorded (the slot's key failed). */
static int read_source(engine *e, mig_slot *sl)
{
    const mig_item *m = &e->items[sl->item];
    char q[80];
    mcr_request rq;
    item_request(e, m, MCR_OP_GETS, e->s->id, &rq);
    mcr_error serr;
    int rc = mcr_pool_submit(e->pfrom, &rq, on_get, sl, &serr);
    if (rc != MCR_OK)
        set_source_failure(e, rc, "key \"%s\": get from server %s (%s): %s",
                           item_key(e, m, q, sizeof(q)), e->s->id, e->s->address, serr.message);
    return rc;
}

/* Copies done: leave the loop. */
static void maybe_done(engine *e)
{
    if (e->in_flight == 0 && (e->next == e->nitems || e->stopping))
        event_base_loopbreak(e->base);
}

/* Start what the concurrency and the token bucket allow. */
static void pump(engine *e)
{
    while (!e->stopping && e->next < e->nitems && e->in_flight < e->o.concurrency) {
        if (e->o.rate > 0) {
            double t = now_s(), burst = e->o.rate * BURST_S;
            if (burst < 1)
                burst = 1;
            e->tokens += (t - e->refilled) * e->o.rate;
            e->refilled = t;
            if (e->tokens > burst)
                e->tokens = burst;
            if (e->tokens < 1) {
                if (!e->wake_armed) {
                    double wait = (1 - e->tokens) / e->o.rate;
                    struct timeval tv;
                    tv.tv_sec = (time_t)wait;
                    tv.tv_usec = (suseconds_t)((wait - (double)tv.tv_sec) * 1e6) + 1;
                    e->wake_armed = 1;
                    evtimer_add(e->wake, &tv);
                }
                break;
            }
            e->tokens -= 1;
        }
        start(e, e->next++);
    }
    maybe_done(e);
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    engine *e = arg;
    e->wake_armed = 0;
    pump(e);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    engine *e = arg;
    if (e->o.stop != NULL && *e->o.stop && !e->stopping)
        e->stopping = 1;
    progress(e, 1, 0);
    maybe_done(e);
}

/* The loop, routers and pools of the copies (once per run). */
static int copier_open(engine *e, mcr_error *err)
{
    errno = 0;
    if ((e->base = event_base_new()) == NULL)
        return mcr__error_sys(err, errno, "migrate: cannot create an event_base");
    int rc = mcr_router_new(e->from, &e->rfrom, err);
    if (rc == MCR_OK)
        rc = mcr_router_new(e->to, &e->rto, err);
    mcr_pool_options po;
    mcr_pool_options_init(&po);
    po.connect_timeout_ms = e->o.timeout_ms;
    po.request_timeout_ms = e->o.timeout_ms;
    po.max_value_size = e->o.max_value_size;
    po.policy = MCR_POLICY_FAIL_FAST;
    po.no_coalesce = 1;
    po.protocol = MCR_PROTO_META; /* a read's TTL and CAS, an add's CAS, md C */
    if (rc == MCR_OK)
        rc = mcr_pool_new(e->base, e->rfrom, &po, &e->pfrom, err);
    if (rc == MCR_OK)
        rc = mcr_pool_new(e->base, e->rto, &po, &e->pto, err);
    if (rc != MCR_OK)
        return rc;
    e->slots = calloc(e->o.concurrency, sizeof(*e->slots));
    e->free_slots = calloc(e->o.concurrency, sizeof(*e->free_slots));
    e->tick = event_new(e->base, -1, EV_PERSIST, on_tick, e);
    e->wake = evtimer_new(e->base, on_wake, e);
    if (e->slots == NULL || e->free_slots == NULL || e->tick == NULL || e->wake == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "migrate: out of memory");
    struct timeval tv = {0, TICK_MS * 1000};
    evtimer_add(e->tick, &tv);
    e->refilled = now_s();
    e->tokens = 1;
    return MCR_OK;
}

static void copier_close(engine *e)
{
    mcr_pool_free(e->pfrom);
    mcr_pool_free(e->pto);
    if (e->tick != NULL)
        event_free(e->tick);
    if (e->wake != NULL)
        event_free(e->wake);
    if (e->base != NULL)
        event_base_free(e->base);
    mcr_router_free(e->rfrom);
    mcr_router_free(e->rto);
    free(e->slots);
    free(e->free_slots);
}

/* Copy the items of the current source. */
static void copy_source(engine *e)
{
    e->next = 0;
    e->nfree = 0;
    for (size_t i = 0; i < e->o.concurrency; i++)
        e->free_slots[e->nfree++] = e->o.concurrency - 1 - i;
    pump(e);
    if (e->in_flight > 0 || (e->next < e->nitems && !e->stopping))
        event_base_loop(e->base, 0);
    if (e->o.stop != NULL && *e->o.stop)
        e->stopping = 1;
}

/* ------------------------------------------------------------ the run */

static void put_message(char *dst, size_t cap, const char *fmt, ...) MCR__PRINTF(3, 4);

/* snprintf() of a message that may be cut (a sentence naming a server). */
static void put_message(char *dst, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, cap, fmt, ap);
    va_end(ap);
}

/* The run's status and message from the sources. */
static int summarize(engine *e, mcr_error *err)
{
    const mcr_migrate_report *r = e->rep;
    if (r->stopped) {
        uint64_t done = r->copied + r->skipped_present + r->skipped_expired + r->skipped_gone +
                        r->failed;
        return mcr__error(err, MCR_ERR_CANCELLED,
                          "migrate: stopped early: %llu of %llu moved keys so far were handled",
                          (unsigned long long)done, (unsigned long long)r->moved);
    }
    size_t bad = 0;
    const mcr_migrate_source *first = NULL;
    for (size_t i = 0; i < r->nsources; i++)
        if (r->sources[i].status != MCR_OK) {
            bad++;
            if (first == NULL)
                first = &r->sources[i];
        }
    if (first == NULL)
        return MCR_OK;
    char what[96];
    if (r->failed > 0)
        snprintf(what, sizeof(what), ", %llu key%s failed", (unsigned long long)r->failed,
                 r->failed == 1 ? "" : "s");
    else
        what[0] = '\0';
    return mcr__error(err, first->status, "migrate: %zu of %zu source%s failed%s; %s", bad,
                      r->nsources, r->nsources == 1 ? "" : "s", what, first->message);
}

int mcr_migrate_run(const mcr_snapshot *from, const mcr_snapshot *to,
                    const mcr_migrate_options *opts, mcr_migrate_report *out, mcr_error *err)
{
    mcr_migrate_report local;
    mcr_migrate_report *rep = out != NULL ? out : &local;
    memset(rep, 0, sizeof(*rep));
    if (from == NULL || to == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "migrate: NULL snapshot");
    engine e;
    memset(&e, 0, sizeof(e));
    e.from = from;
    e.to = to;
    e.rep = rep;
    e.start = now_s();
    int rc = check_options(opts, &e.o, err);
    if (rc != MCR_OK)
        return rc;
    /* Both placements must see the same keys on the wire. */
    int has_to;
    char prefix_to[256];
    size_t len_to;
    rc = snapshot_prefix(from, &e.has_prefix, e.prefix, &e.prefix_len, err);
    if (rc == MCR_OK)
        rc = snapshot_prefix(to, &has_to, prefix_to, &len_to, err);
    if (rc == MCR_OK && (has_to != e.has_prefix || len_to != e.prefix_len ||
                         memcmp(prefix_to, e.prefix, len_to) != 0))
        rc = mcr__error(err, MCR_ERR_UNSUPPORTED,
                        "migrate: the two snapshots have different key prefixes: the keys "
                        "themselves would change, not only their servers");
    uint32_t *idx = NULL;
    if (rc == MCR_OK)
        rc = find_sources(&e, &idx, err);
    if (rc == MCR_OK && !e.o.dry_run && rep->nsources > 0)
        rc = copier_open(&e, err);
    /* the destinations' counters before any copy (room.c) */
    mcr__room *room = NULL;
    if (rc == MCR_OK && !e.o.dry_run && rep->nsources > 0)
        rc = mcr__room_open(from, to, e.o.timeout_ms, &room, err);
    int verify_rc = MCR_OK;
    mcr_error verr;
    if (rc == MCR_OK && !e.o.dry_run && rep->nsources > 0) {
        /* before a switch, and before this run copies anything: what the
         * new owners hold is checked against the old owners (copies an
         * earlier, interrupted run left unchecked are removed, and then
         * copied again below) */
        mcr__verify_ctx vc;
        memset(&vc, 0, sizeof(vc));
        vc.from = from;
        vc.to = to;
        vc.base = e.base;
        vc.pfrom = e.pfrom;
        vc.pto = e.pto;
        vc.prefix = e.prefix;
        vc.prefix_len = e.prefix_len;
        vc.has_prefix = e.has_prefix;
        vc.timeout_ms = e.o.timeout_ms;
        vc.concurrency = e.o.concurrency;
        vc.stop = e.o.stop;
        int vrc = mcr__verify_new_owners(&vc, &rep->verified, &rep->removed, &verr);
        if (vrc == MCR_ERR_CANCELLED)
            e.stopping = 1; /* reported as stopped, below */
        else if (vrc == MCR_ERR_NOMEM)
            rc = mcr__error(err, vrc, "%s", verr.message);
        else
            verify_rc = vrc; /* the copy goes on; the run fails with it below */
    }
    for (size_t i = 0; rc == MCR_OK && i < rep->nsources && !e.stopping; i++) {
        e.si = i;
        e.src = idx[i];
        e.s = &rep->sources[i];
        e.nitems = 0;
        e.keys_len = 0;
        mcr_server_desc sd;
        mcr_snapshot_server(from, e.src, &sd);
        mcr_error derr;
        int drc = mcr__dump_run(sd.host, sd.port, e.o.timeout_ms, on_line, on_dump_tick, &e,
                                &derr);
        if (drc == MCR_ERR_CANCELLED)
            break;
        if (drc != MCR_OK) {
            e.s->status = drc;
            put_message(e.s->message, sizeof(e.s->message), "server %s (%s): %s", e.s->id,
                        e.s->address, derr.message);
            if (e.dump_oom)
                rc = mcr__error(err, MCR_ERR_NOMEM, "migrate: %s", e.s->message);
            continue; /* nothing of it is copied: its dump is not whole */
        }
        progress(&e, 1, 1);
        if (!e.o.dry_run && e.nitems > 0)
            copy_source(&e);
        if (e.s->failed > 0) {
            char first[sizeof(e.s->message)];
            snprintf(first, sizeof(first), "%s", e.s->message);
            put_message(e.s->message, sizeof(e.s->message),
                        "server %s (%s): %llu key%s failed; first: %s", e.s->id, e.s->address,
                        (unsigned long long)e.s->failed, e.s->failed == 1 ? "" : "s", first);
        }
    }
    if (e.stopping)
        rep->stopped = 1;
    copier_close(&e);
    free(e.items);
    free(e.keys);
    free(idx);
    /* and after the last one: what they evicted or refused meanwhile */
    mcr_error room_err;
    int room_rc = mcr__room_close(room, rep, &room_err);
    rep->seconds = now_s() - e.start;
    e.s = NULL;
    progress(&e, 1, 1);
    if (rc == MCR_OK)
        rc = summarize(&e, err);
    if (rc == MCR_OK && verify_rc != MCR_OK)
        rc = mcr__error(err, verify_rc, "%s", verr.message); /* not to be switched to */
    if (room_rc != MCR_OK && rc != MCR_ERR_CANCELLED && rc != MCR_ERR_NOMEM)
        rc = mcr__error(err, room_rc, "%s", room_err.message); /* keys copied may be gone */
    if (out == NULL)
        mcr_migrate_report_clear(&local);
    return rc;
}
