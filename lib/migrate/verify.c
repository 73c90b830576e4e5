/* SPDX-License-Identifier: BSD-3-Clause */
/* verify.c: before a switch, every key a new owner gained from another server compared with that server's value; a copy that differs, or whose source lost it, is removed by its CAS. */
#include <event2/event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "placement/placement_internal.h"
#include "mcroute_pool.h"
#include "migrate/migrate_internal.h"

/*
 * Why: a run copies each key with a read, an add and a check of the
 * source (copy.c). A run stopped between an add and its check (killed,
 * or its connection lost) leaves a copy nobody checked, which a client's
 * delete or incr acknowledged meanwhile has made older than the source.
 * The next run would not find it in the source's dump (a deleted key is
 * not there), so the check starts from the other side: the new owners'
 * dumps, before that run copies anything (what it removes, it then copies
 * again; what it finds equal, its adds skip). The stopped run's last
 * requests were answered long before: its process is gone, and memcached
 * serves what a closed connection sent in microseconds. Each key a new owner holds that `from` placed elsewhere is read
 * at the new owner (gets: its CAS) and then at its owner in `from`;
 * equal values, flags and TTLs (within TTL_SLACK_S) keep it. Otherwise
 * the source is read once more (a set reaches both owners at once, so
 * the new owner may be ahead for a moment), and a copy still different
 * is deleted by its CAS: a client's write there since is kept.
 *
 * Before the switch only: the old owners then hold every key's value
 * (every client write reaches them first). After it, the new owners do.
 */

#define TTL_SLACK_S 2

typedef struct vkey {
    size_t off;
    uint32_t len;
    uint32_t src;      /* its owner in `from` */
} vkey;

typedef struct vslot {
    struct vrun *v;
    size_t key;
    int again;         /* the source read a second time */
    int busy;
    char *val;         /* the new owner's value */
    size_t val_len;
    uint32_t flags;
    int64_t ttl;
    uint64_t cas;
} vslot;

typedef struct vrun {
    const mcr__verify_ctx *c;
    uint32_t dst;      /* the new owner dumped, a `to` index */
    char dst_id[256];
    vkey *keys;
    size_t nkeys, keys_cap;
    char *arena;
    size_t arena_len, arena_cap;
    vslot *slots;
    size_t next, in_flight;
    uint64_t verified, removed;
    int status;
    char message[256];
    int oom;
} vrun;

static int same_server(const mcr_snapshot *a, uint32_t i, const mcr_snapshot *b, uint32_t j)
{
    mcr_server_desc x, y;
    return mcr_snapshot_server(a, i, &x) == MCR_OK && mcr_snapshot_server(b, j, &y) == MCR_OK &&
           strcmp(x.id, y.id) == 0 && x.port == y.port && strcmp(x.host, y.host) == 0;
}

static void fail(vrun *v, int status, const char *fmt, ...) MCR__PRINTF(3, 4);

/* The first failure of the check, kept (the sentence may be cut). */
static void fail(vrun *v, int status, const char *fmt, ...)
{
    if (v->status != MCR_OK)
        return;
    v->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->message, sizeof(v->message), fmt, ap);
    va_end(ap);
}

static int on_line(const char *line, size_t len, void *arg, mcr_error *err)
{
    vrun *v = arg;
    const mcr__verify_ctx *c = v->c;
    mcr__md_item it;
    char why[128];
    if (mcr__md_parse(line, len, &it, why, sizeof(why)) != 0)
        return mcr__error(err, MCR_ERR_PROTOCOL, "malformed metadump line: %s", why);
    const char *pk = it.key;
    size_t plen = it.key_len;
    if (c->has_prefix) {
        if (plen < c->prefix_len || memcmp(pk, c->prefix, c->prefix_len) != 0)
            return MCR_OK;
        pk += c->prefix_len;
        plen -= c->prefix_len;
    }
    if (mcr_snapshot_locate(c->to, pk, plen) != v->dst)
        return MCR_OK; /* not its key */
    uint32_t src = mcr_snapshot_locate(c->from, pk, plen);
    if (same_server(c->from, src, c->to, v->dst))
        return MCR_OK; /* it did not move */

    if (v->nkeys == v->keys_cap) {
        size_t n = v->keys_cap ? v->keys_cap * 2 : 1024;
        vkey *k = realloc(v->keys, n * sizeof(*k));
        if (k == NULL)
            goto oom;
        v->keys = k;
        v->keys_cap = n;
    }
    if (v->arena_len + it.key_len > v->arena_cap) {
        size_t n = v->arena_cap ? v->arena_cap * 2 : 65536;
        while (n < v->arena_len + it.key_len)
            n *= 2;
        char *a = realloc(v->arena, n);
        if (a == NULL)
            goto oom;
        v->arena = a;
        v->arena_cap = n;
    }
    memcpy(v->arena + v->arena_len, it.key, it.key_len);
    v->keys[v->nkeys].off = v->arena_len;
    v->keys[v->nkeys].len = (uint32_t)it.key_len;
    v->keys[v->nkeys].src = src;
    v->nkeys++;
    v->arena_len += it.key_len;
    return MCR_OK;
oom:
    v->oom = 1;
    return mcr__error(err, MCR_ERR_NOMEM, "out of memory for its keys");
}

static int on_tick(void *arg, mcr_error *err)
{
    vrun *v = arg;
    if (v->c->stop != NULL && *v->c->stop)
        return mcr__error(err, MCR_ERR_CANCELLED, "migrate: stopped");
    return MCR_OK;
}

static void pump(vrun *v);

static void slot_end(vslot *sl)
{
    vrun *v = sl->v;
    free(sl->val);
    sl->val = NULL;
    sl->busy = 0;
    v->in_flight--;
    pump(v);
}

/* A key's request, pinned to server `id` of the pool. */
static int vsend(vslot *sl, mcr_pool *p, mcr_op op, const char *id, uint64_t cas,
                mcr_pool_cb cb)
{
    vrun *v = sl->v;
    const vkey *k = &v->keys[sl->key];
    mcr_request q;
    memset(&q, 0, sizeof(q));
    q.op = op;
    q.key = v->arena + k->off;
    q.key_len = k->len;
    q.server = id;
    q.cas = cas;
    mcr_error e;
    int rc = mcr_pool_submit(p, &q, cb, sl, &e);
    if (rc != MCR_OK)
        fail(v, rc, "%s: %s", id, e.message);
    return rc;
}

static void on_removed(const mcr_result *res, void *arg)
{
    vslot *sl = arg;
    if (res->status == MCR_OK)
        sl->v->removed++; /* DELETED, or replaced / removed by a client first */
    else
        fail(sl->v, res->status, "%s: %s", res->server ? res->server : "?",
             res->message ? res->message : "");
    slot_end(sl);
}

static void on_source(const mcr_result *res, void *arg);

static void on_source(const mcr_result *res, void *arg)
{
    vslot *sl = arg;
    vrun *v = sl->v;
    if (res->status != MCR_OK) {
        fail(v, res->status, "%s: %s", res->server ? res->server : "?",
             res->message ? res->message : "");
        slot_end(sl);
        return;
    }
    int same = res->reply == MCR_REPLY_HIT && res->value_len == sl->val_len &&
               memcmp(res->value, sl->val, sl->val_len) == 0 && res->flags == sl->flags &&
               (res->ttl == -1) == (sl->ttl == -1) &&
               (res->ttl == -1 || (res->ttl >= sl->ttl - TTL_SLACK_S &&
                                   res->ttl <= sl->ttl + TTL_SLACK_S));
    if (same) {
        v->verified++;
        slot_end(sl);
        return;
    }
    mcr_server_desc d;
    mcr_snapshot_server(v->c->from, v->keys[sl->key].src, &d);
    if (!sl->again) {
        sl->again = 1;
        if (vsend(sl, v->c->pfrom, MCR_OP_GET, d.id, 0, on_source) != MCR_OK)
            slot_end(sl);
        return;
    }
    if (vsend(sl, v->c->pto, MCR_OP_DELETE, v->dst_id, sl->cas, on_removed) != MCR_OK)
        slot_end(sl);
}

static void on_dest(const mcr_result *res, void *arg)
{
    vslot *sl = arg;
    vrun *v = sl->v;
    if (res->status != MCR_OK) {
        fail(v, res->status, "%s: %s", v->dst_id, res->message ? res->message : "");
        slot_end(sl);
        return;
    }
    if (res->reply != MCR_REPLY_HIT) { /* gone since the dump */
        slot_end(sl);
        return;
    }
    if (res->cas == 0) {
        fail(v, MCR_ERR_UNSUPPORTED, "%s gives no CAS (memcached -C): its copies cannot be "
                                     "checked; run it without -C to migrate", v->dst_id);
        slot_end(sl);
        return;
    }
    sl->val = malloc(res->value_len ? res->value_len : 1);
    if (sl->val == NULL) {
        v->oom = 1;
        fail(v, MCR_ERR_NOMEM, "out of memory");
        slot_end(sl);
        return;
    }
    memcpy(sl->val, res->value, res->value_len);
    sl->val_len = res->value_len;
    sl->flags = res->flags;
    sl->ttl = res->ttl;
    sl->cas = res->cas;
    mcr_server_desc d;
    mcr_snapshot_server(v->c->from, v->keys[sl->key].src, &d);
    if (vsend(sl, v->c->pfrom, MCR_OP_GET, d.id, 0, on_source) != MCR_OK)
        slot_end(sl);
}

static void pump(vrun *v)
{
    while (v->next < v->nkeys && v->in_flight < v->c->concurrency && v->status == MCR_OK &&
           !(v->c->stop != NULL && *v->c->stop)) {
        vslot *sl = NULL;
        for (size_t i = 0; i < v->c->concurrency; i++)
            if (!v->slots[i].busy) {
                sl = &v->slots[i];
                break;
            }
        if (sl == NULL)
            return;
        memset(sl, 0, sizeof(*sl));
        sl->v = v;
        sl->busy = 1;
        sl->key = v->next++;
        v->in_flight++;
        if (vsend(sl, v->c->pto, MCR_OP_GETS, v->dst_id, 0, on_dest) != MCR_OK) {
            sl->busy = 0;
            v->in_flight--;
        }
    }
}

int mcr__verify_new_owners(const mcr__verify_ctx *c, uint64_t *verified, uint64_t *removed,
                           mcr_error *err)
{
    vrun v;
    memset(&v, 0, sizeof(v));
    v.c = c;
    v.slots = calloc(c->concurrency ? c->concurrency : 1, sizeof(*v.slots));
    if (v.slots == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "migrate: out of memory");
    int rc = MCR_OK;
    size_t n = mcr_snapshot_server_count(c->to);
    unsigned char *gain = calloc(n ? n : 1, 1);
    if (gain == NULL) {
        free(v.slots);
        return mcr__error(err, MCR_ERR_NOMEM, "migrate: out of memory");
    }
    /* the servers that gain keys: a pair's `to`, or one that `from` does
     * not have ACTIVE at the same address (every key it holds is new) */
    mcr_diff *diff = NULL;
    mcr_error derr0;
    int drc0 = mcr_diff_new(c->from, c->to, &diff, &derr0);
    if (drc0 == MCR_ERR_NOMEM) {
        free(gain);
        free(v.slots);
        return mcr__error(err, MCR_ERR_NOMEM, "migrate: %s", derr0.message);
    }
    for (uint32_t j = 0; j < n; j++) {
        mcr_server_desc d, f;
        if (mcr_snapshot_server(c->to, j, &d) != MCR_OK || d.state != MCR_STATE_ACTIVE)
            continue;
        uint32_t i = mcr_snapshot_find(c->from, d.id);
        gain[j] = drc0 != MCR_OK || i == MCR_NO_SERVER ||
                  mcr_snapshot_server(c->from, (size_t)i, &f) != MCR_OK ||
                  f.state != MCR_STATE_ACTIVE || f.port != d.port || strcmp(f.host, d.host) != 0;
    }
    for (size_t k = 0; drc0 == MCR_OK && k < mcr_diff_pair_count(diff); k++) {
        mcr_diff_pair pr;
        uint32_t j = mcr_diff_pair_get(diff, k, &pr) == MCR_OK ? mcr_snapshot_find(c->to, pr.to)
                                                               : MCR_NO_SERVER;
        if (j != MCR_NO_SERVER)
            gain[j] = 1;
    }
    mcr_diff_free(diff);
    /* a new owner that cannot be checked is reported; the others still
     * are (out of memory or a stop ends the check) */
    for (uint32_t j = 0; j < n && rc != MCR_ERR_NOMEM && rc != MCR_ERR_CANCELLED; j++) {
        mcr_server_desc d;
        if (!gain[j] || mcr_snapshot_server(c->to, j, &d) != MCR_OK)
            continue;
        v.dst = j;
        snprintf(v.dst_id, sizeof(v.dst_id), "%s", d.id);
        v.nkeys = 0;
        v.arena_len = 0;
        v.next = 0;
        v.status = MCR_OK;
        mcr_error derr;
        int drc = mcr__dump_run(d.host, d.port, c->timeout_ms, on_line, on_tick, &v, &derr);
        if (drc == MCR_OK) {
            pump(&v);
            while (v.in_flight > 0)
                event_base_loop(c->base, EVLOOP_ONCE);
        }
        int first = rc == MCR_OK;
        if (drc != MCR_OK && (first || drc == MCR_ERR_NOMEM || drc == MCR_ERR_CANCELLED))
            rc = mcr__error(err, drc, "migrate: checking the new owner %s: %s", d.id,
                            derr.message);
        else if (v.status != MCR_OK && (first || v.status == MCR_ERR_NOMEM))
            rc = mcr__error(err, v.status, "migrate: checking the new owner %s: %s", d.id,
                            v.message);
        else if (c->stop != NULL && *c->stop)
            rc = mcr__error(err, MCR_ERR_CANCELLED, "migrate: stopped");
    }
    *verified = v.verified;
    *removed = v.removed;
    free(gain);
    free(v.slots);
    free(v.keys);
    free(v.arena);
    return rc;
}
