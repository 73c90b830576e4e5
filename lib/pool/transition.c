/* SPDX-License-Identifier: BSD-3-Clause */
/* transition.c: mcr_pool_submit() and mcr_pool_get_multi() through a router's transition: reads of a moved key falling back to its previous owner (and warming the new one), writes reaching both owners. */
#include "pool_internal.h"

#include <stdlib.h>
#include <time.h>

/*
 * A key "moves" when its owner in the pool's snapshot (p->snap, local
 * states applied) and its owner in the transition's other snapshot
 * (p->tx_other: `to` while copying, `from` once switched) are different
 * servers. Only moved keys take the paths below; everything else goes
 * straight to submit.c and multiget.c.
 *
 * Reads. Copying: from the current owner only (the new one is being
 * filled). Switched: from the current owner; on a miss, from the owner in
 * `from`, in meta (for the TTL) whatever the pool's protocol; a hit there
 * is the result (via_previous = 1) and, with MCR_TRANSITION_WARM, is
 * added to the current owner with its flags and remaining TTL (add: a
 * value written meanwhile is never overwritten). The fallback failing
 * leaves the first miss as the answer.
 *
 * Writes, in both phases, go to both owners at once, and the callback
 * runs once both have answered:
 *   set, delete, touch      the same command to both;
 *   add, replace, append, prepend, cas, incr, decr
 *                           to the current owner, and a delete to the
 *                           other (their outcome depends on what each
 *                           holds: the other's copy is dropped, never
 *                           left older);
 *   gat, gats               to the current owner only (a read).
 * The result is the current owner's; an error of the other (not a miss)
 * fails the whole write with a message naming both, so that an
 * acknowledged write is on both or the other holds nothing of the key.
 * Why both, and not "new owner plus delete at the old" for sets too:
 * clients still copying read the old owner, and a delete there would make
 * every write a miss for them until they switch.
 */

/* ------------------------------------------------------------ helpers */

/* The server owning key in the other snapshot, and in p->snap; NULL when
 * the key does not move (or no transition applies). */
static mcr__pool_server *moved_other(mcr_pool *p, const void *key, size_t len,
                                     mcr__pool_server **cur)
{
    if (p->tx_phase == MCR_PHASE_NONE || p->tx_other == NULL)
        return NULL;
    if (p->tx_deadline_ns != 0 && mcr__now_ns() >= p->tx_deadline_ns)
        return NULL;
    if (!mcr__proto_key_ok(key, len, MCR__KEY_MAX - p->prefix_len))
        return NULL;
    mcr__pool_server *c = p->by_index[mcr_snapshot_locate(p->snap, key, len)];
    mcr__pool_server *o = p->tx_by[mcr_snapshot_locate(p->tx_other, key, len)];
    if (cur != NULL)
        *cur = c;
    return c == o ? NULL : o;
}

/* An owned copy of what a result says, but its value. */
typedef struct kept_result {
    int status;
    mcr_reply reply;
    uint32_t flags;
    uint64_t cas, number, epoch;
    char server[256];
    char message[256];
} kept_result;

static void keep(kept_result *k, const mcr_result *res)
{
    k->status = res->status;
    k->reply = res->reply;
    k->flags = res->flags;
    k->cas = res->cas;
    k->number = res->number;
    k->epoch = res->epoch;
    snprintf(k->server, sizeof(k->server), "%s", res->server ? res->server : "");
    snprintf(k->message, sizeof(k->message), "%s", res->message ? res->message : "");
}

/* The pool's server of that id, not retired; NULL when none. */
static mcr__pool_server *server_named(mcr_pool *p, const char *id)
{
    for (size_t i = 0; i < p->nservers; i++)
        if (id != NULL && !p->servers[i]->retired && strcmp(p->servers[i]->id, id) == 0)
            return p->servers[i];
    return NULL;
}

/* ------------------------------------------------------------ writes */

typedef struct tx_write {
    mcr_pool *p;
    mcr_pool_cb cb;
    void *arg;
    int outstanding;
    kept_result main, other;
    mcr_op op;
    char *key;
    size_t key_len;
} tx_write;

static void write_end(tx_write *w)
{
    mcr_result res;
    memset(&res, 0, sizeof(res));
    res.op = w->op;
    res.key = w->key;
    res.key_len = w->key_len;
    res.ttl = MCR_TTL_UNKNOWN;
    res.status = w->main.status;
    res.reply = w->main.reply;
    res.flags = w->main.flags;
    res.cas = w->main.cas;
    res.number = w->main.number;
    res.epoch = w->main.epoch;
    res.server = w->main.server[0] ? w->main.server : NULL;
    res.message = w->main.status != MCR_OK ? w->main.message : NULL;
    char msg[900];
    if (w->op == MCR_OP_DELETE && res.status == MCR_OK && res.reply == MCR_REPLY_MISS &&
        w->other.status == MCR_OK && w->other.reply == MCR_REPLY_DELETED)
        res.reply = MCR_REPLY_DELETED; /* it was only on the other owner */
    if (res.status == MCR_OK && w->other.status != MCR_OK) {
        snprintf(msg, sizeof(msg), "%s reached %s but not the key's other owner %s: %s",
                 mcr_op_name(w->op), w->main.server, w->other.server, w->other.message);
        res.status = w->other.status;
        res.message = msg;
    }
    w->cb(&res, w->arg);
    free(w);
}

static void write_main_cb(const mcr_result *res, void *arg)
{
    tx_write *w = arg;
    keep(&w->main, res);
    if (--w->outstanding == 0)
        write_end(w);
}

static void write_other_cb(const mcr_result *res, void *arg)
{
    tx_write *w = arg;
    keep(&w->other, res);
    mcr__pool_server *o = res->status == MCR_OK ? server_named(w->p, res->server) : NULL;
    if (o != NULL)
        o->dual_writes++;
    if (--w->outstanding == 0)
        write_end(w);
}

static int submit_write(mcr_pool *p, const mcr_request *q, mcr__pool_server *other,
                        mcr_pool_cb cb, void *arg, mcr_error *err)
{
    tx_write *w = calloc(1, sizeof(*w) + q->key_len);
    if (w == NULL)
        return mcr__pool_fail(err, MCR_ERR_NOMEM, "out of memory");
    w->p = p;
    w->cb = cb;
    w->arg = arg;
    w->op = q->op;
    w->key = (char *)(w + 1);
    memcpy(w->key, q->key, q->key_len);
    w->key_len = q->key_len;
    w->outstanding = 2;
    int rc = mcr__submit(p, q, NULL, 0, write_main_cb, w, err);
    if (rc != MCR_OK) {
        free(w);
        return rc;
    }
    /* the other owner: the same command, or a delete of its copy */
    mcr_request o = *q;
    o.server = NULL;
    if (q->op != MCR_OP_SET && q->op != MCR_OP_DELETE && q->op != MCR_OP_TOUCH) {
        memset(&o, 0, sizeof(o));
        o.op = MCR_OP_DELETE;
        o.key = q->key;
        o.key_len = q->key_len;
    }
    mcr_error e2;
    rc = mcr__submit(p, &o, other, 0, write_other_cb, w, &e2);
    if (rc != MCR_OK) {
        /* the main request is on its way: report this one with it */
        w->other.status = rc;
        snprintf(w->other.server, sizeof(w->other.server), "%s", other->id);
        snprintf(w->other.message, sizeof(w->other.message), "%s", e2.message);
        w->outstanding--;
    }
    return MCR_OK;
}

/* ------------------------------------------------------------ reads */


static void warm_cb(const mcr_result *res, void *arg)
{
    mcr_pool *p = arg;
    mcr__pool_server *s = server_named(p, res->server);
    if (s == NULL)
        return;
    if (res->status != MCR_OK)
        s->warm_failures++;
    else if (res->reply == MCR_REPLY_STORED)
        s->warm_writes++;
    else
        s->warm_skipped++;
}

/* The exptime that gives an item `ttl` seconds more (memcached reads
 * values over 30 days as absolute Unix times); 0 for -1 (never); -1 when
 * it expires now and is not worth writing. */
static int64_t warm_exptime(int64_t ttl)
{
    if (ttl == -1)
        return 0;
    if (ttl <= 0)
        return -1;
    if (ttl > 30 * 24 * 3600)
        return (int64_t)time(NULL) + ttl;
    return ttl;
}

typedef struct tx_read {
    mcr_pool *p;
    mcr_pool_cb cb;          /* a single get; NULL for a multi-get's key */
    void *arg;
    struct tx_mget *mg;      /* the multi-get it belongs to, or NULL */
    kept_result first;       /* the current owner's miss */
    size_t index;            /* a multi-get's key: its mcr_result.index */
    mcr_op op;
    char *key;
    size_t key_len;
} tx_read;

typedef struct tx_mget {
    mcr_pool *p;
    mcr_op op;
    mcr_pool_cb key_cb, done_cb;
    void *arg;
    size_t outstanding; /* fallbacks in flight, + 1 until the inner done_cb */
    kept_result done;
    uint64_t extra_hits;
} tx_mget;

static void mget_maybe_done(tx_mget *m)
{
    if (--m->outstanding > 0)
        return;
    mcr_result res;
    memset(&res, 0, sizeof(res));
    res.op = m->op;
    res.status = m->done.status;
    res.epoch = m->done.epoch;
    res.number = m->done.number + m->extra_hits;
    res.ttl = MCR_TTL_UNKNOWN;
    res.message = m->done.status != MCR_OK ? m->done.message : NULL;
    m->done_cb(&res, m->arg);
    free(m);
}

static void deliver_read(tx_read *t, const mcr_result *res)
{
    if (t->mg != NULL) {
        tx_mget *m = t->mg;
        if (res->status == MCR_OK && res->reply == MCR_REPLY_HIT && res->via_previous)
            m->extra_hits++;
        m->key_cb(res, m->arg);
        mget_maybe_done(m);
    } else {
        t->cb(res, t->arg);
    }
}

static void fallback_cb(const mcr_result *res, void *arg)
{
    tx_read *t = arg;
    mcr_pool *p = t->p;
    mcr__pool_server *o = server_named(p, res->server);
    if (res->status == MCR_OK && res->reply == MCR_REPLY_HIT) {
        if (o != NULL)
            o->fallback_hits++;
        mcr_result r2 = *res;
        r2.op = t->op;
        r2.key = t->key;
        r2.key_len = t->key_len;
        r2.index = t->index;
        r2.via_previous = 1;
        int64_t ex = warm_exptime(res->ttl);
        if ((p->tx.flags & MCR_TRANSITION_WARM) && ex >= 0 && !p->freeing) {
            mcr_request q;
            memset(&q, 0, sizeof(q));
            q.op = MCR_OP_ADD;
            q.key = t->key;
            q.key_len = t->key_len;
            q.value = res->value;
            q.value_len = res->value_len;
            q.flags = res->flags;
            q.exptime = ex;
            if (mcr__submit(p, &q, NULL, 0, warm_cb, p, NULL) != MCR_OK) {
                mcr__pool_server *c = server_named(p, t->first.server);
                if (c != NULL)
                    c->warm_failures++;
            }
        }
        deliver_read(t, &r2);
    } else {
        /* a miss there too, or it failed: the current owner's miss */
        mcr_result r2;
        memset(&r2, 0, sizeof(r2));
        r2.status = t->first.status;
        r2.reply = t->first.reply;
        r2.op = t->op;
        r2.key = t->key;
        r2.key_len = t->key_len;
        r2.epoch = t->first.epoch;
        r2.server = t->first.server[0] ? t->first.server : NULL;
        r2.ttl = MCR_TTL_UNKNOWN;
        r2.index = t->index;
        deliver_read(t, &r2);
    }
    free(t);
}

/* The current owner missed: read the previous one. 1 when a fallback was
 * submitted (t is then owned by it), 0 otherwise. */
static int start_fallback(tx_read *t, const mcr_result *res)
{
    mcr_pool *p = t->p;
    if (p->freeing || res->status != MCR_OK || res->reply != MCR_REPLY_MISS)
        return 0;
    /* the routing of the moment: a new snapshot may have come meanwhile */
    mcr__pool_server *cur = NULL;
    mcr__pool_server *o = p->tx_phase == MCR_PHASE_SWITCHED
                              ? moved_other(p, t->key, t->key_len, &cur)
                              : NULL;
    if (o == NULL)
        return 0;
    keep(&t->first, res);
    mcr_request q;
    memset(&q, 0, sizeof(q));
    q.op = t->op;
    q.key = t->key;
    q.key_len = t->key_len;
    if (mcr__submit(p, &q, o, 1, fallback_cb, t, NULL) != MCR_OK)
        return 0;
    o->fallback_reads++;
    return 1;
}

static tx_read *read_new(mcr_pool *p, mcr_op op, const void *key, size_t len)
{
    tx_read *t = calloc(1, sizeof(*t) + len);
    if (t == NULL)
        return NULL;
    t->p = p;
    t->op = op;
    t->key = (char *)(t + 1);
    memcpy(t->key, key, len);
    t->key_len = len;
    return t;
}

static void read_first_cb(const mcr_result *res, void *arg)
{
    tx_read *t = arg;
    if (start_fallback(t, res))
        return;
    t->cb(res, t->arg);
    free(t);
}

/* ------------------------------------------------------------ entry points */

int mcr_pool_submit(mcr_pool *p, const mcr_request *q, mcr_pool_cb cb, void *arg, mcr_error *err)
{
    if (p == NULL || q == NULL || cb == NULL)
        return mcr__pool_fail(err, MCR_ERR_INVALID, "mcr_pool_submit: NULL argument");
    if (p->freeing || q->server != NULL || (unsigned)q->op >= MCR_OP_COUNT ||
        mcr__is_server_op(q->op) || q->key == NULL || mcr__pool_refresh(p) != MCR_OK)
        return mcr__submit(p, q, NULL, 0, cb, arg, err);
    mcr__pool_server *o = moved_other(p, q->key, q->key_len, NULL);
    if (o == NULL || q->op == MCR_OP_GAT || q->op == MCR_OP_GATS)
        return mcr__submit(p, q, NULL, 0, cb, arg, err);
    if (!mcr__is_read_op(q->op))
        return submit_write(p, q, o, cb, arg, err);
    if (p->tx_phase != MCR_PHASE_SWITCHED)
        return mcr__submit(p, q, NULL, 0, cb, arg, err);
    tx_read *t = read_new(p, q->op, q->key, q->key_len);
    if (t == NULL)
        return mcr__pool_fail(err, MCR_ERR_NOMEM, "out of memory");
    t->cb = cb;
    t->arg = arg;
    int rc = mcr__submit(p, q, NULL, 0, read_first_cb, t, err);
    if (rc != MCR_OK)
        free(t);
    return rc;
}

static void mget_key_cb(const mcr_result *res, void *arg)
{
    tx_mget *m = arg;
    if (res->status == MCR_OK && res->reply == MCR_REPLY_MISS && res->key != NULL) {
        tx_read *t = read_new(m->p, m->op, res->key, res->key_len);
        if (t != NULL) {
            t->mg = m;
            t->index = res->index;
            m->outstanding++;
            if (start_fallback(t, res))
                return;
            m->outstanding--;
            free(t);
        }
    }
    m->key_cb(res, m->arg);
}

static void mget_done_cb(const mcr_result *res, void *arg)
{
    tx_mget *m = arg;
    keep(&m->done, res);
    mget_maybe_done(m);
}

int mcr_pool_get_multi(mcr_pool *p, mcr_op op, const void *const *keys, const size_t *lens,
                       size_t n, mcr_pool_cb key_cb, mcr_pool_cb done_cb, void *arg,
                       mcr_error *err)
{
    if (p == NULL || p->freeing || key_cb == NULL || done_cb == NULL ||
        mcr__pool_refresh(p) != MCR_OK || p->tx_phase != MCR_PHASE_SWITCHED)
        return mcr__get_multi(p, op, keys, lens, n, key_cb, done_cb, arg, err);
    tx_mget *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return mcr__pool_fail(err, MCR_ERR_NOMEM, "out of memory");
    m->p = p;
    m->op = op;
    m->key_cb = key_cb;
    m->done_cb = done_cb;
    m->arg = arg;
    m->outstanding = 1;
    int rc = mcr__get_multi(p, op, keys, lens, n, mget_key_cb, mget_done_cb, m, err);
    if (rc != MCR_OK)
        free(m);
    return rc;
}
