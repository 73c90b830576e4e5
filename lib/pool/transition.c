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
 * `from`, in meta (for the TTL and the CAS) whatever the pool's protocol;
 * a hit there is the result (via_previous = 1) and, with
 * MCR_TRANSITION_WARM, is copied to the current owner by txcopy.c (an add
 * verified by the previous owner's CAS: removed again when a write came
 * meanwhile). The fallback failing leaves the first miss as the answer.
 *
 * Writes, in both phases, reach both owners, and the callback runs once
 * both have answered (write_plan):
 *   set                     the same command to both at once;
 *   delete, touch           the same command, to the owner in `from`
 *                           first, to the owner in `to` once it answered;
 *   add, replace, append, prepend, cas, incr, decr
 *                           the op at the current owner and a delete of
 *                           the other's copy (their outcome depends on
 *                           what each holds: the other copy is dropped,
 *                           never left older). Copying: the op (at the
 *                           owner in `from`), then the delete. Switched:
 *                           the value copied to the current owner first
 *                           (txcopy.c, when the previous owner holds it),
 *                           then the op, then the delete;
 *   gat, gats               to the current owner only (a read).
 * The owner in `from` comes first whenever the effect at the other
 * depends on what that one holds: that is what lets a copy (the warm add,
 * the copier of libmcroute_migrate) verify itself by reading the owner in
 * `from` again after its add (txcopy.c says why it is enough). A set to
 * both at once is safe: at the new owner before a copy's add it makes the
 * add fail; after it, it replaces the copy.
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

/* How a write of a moved key reaches its two owners. */
typedef enum write_plan {
    PLAN_BOTH,        /* a set: the same command to both at once */
    PLAN_FROM_FIRST,  /* the owner in `from` answers before the owner in `to`
                         is sent its part */
    PLAN_ENSURE       /* switched, an op whose outcome depends on the value:
                         the value copied to the current owner first
                         (txcopy.c), the op there, then its old copy
                         deleted */
} write_plan;

/* Copies of the value to fetch again, at most, when the previous owner's
 * value changes while it is copied (another process writing the key). */
#define ENSURE_TRIES 3

typedef struct tx_write {
    mcr_pool *p;
    mcr_pool_cb cb;
    void *arg;
    int outstanding;
    kept_result main, other;
    mcr_request q;           /* the caller's request, key and value copied */
    char other_id[256];      /* the key's other owner */
    char main_id[256];       /* its current owner when submitted */
    int switched;            /* the phase when submitted */
    write_plan plan;
    int tries;
    char *key;
    size_t key_len;
} tx_write;

static void write_end(tx_write *w)
{
    mcr_result res;
    memset(&res, 0, sizeof(res));
    res.op = w->q.op;
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
    if (w->q.op == MCR_OP_DELETE && res.status == MCR_OK && res.reply == MCR_REPLY_MISS &&
        w->other.status == MCR_OK && w->other.reply == MCR_REPLY_DELETED)
        res.reply = MCR_REPLY_DELETED; /* it was only on the other owner */
    if (res.status == MCR_OK && w->other.status != MCR_OK) {
        snprintf(msg, sizeof(msg), "%s reached %s but not the key's other owner %s: %s",
                 mcr_op_name(w->q.op), w->main.server, w->other.server, w->other.message);
        res.status = w->other.status;
        res.message = msg;
    }
    w->cb(&res, w->arg);
    free(w);
}

static void part_done(tx_write *w)
{
    if (--w->outstanding == 0)
        write_end(w);
}

/* A part that could not be submitted: reported as its result. */
static void part_failed(tx_write *w, kept_result *k, const char *server, int rc,
                        const char *message)
{
    k->status = rc;
    snprintf(k->server, sizeof(k->server), "%s", server);
    snprintf(k->message, sizeof(k->message), "%s", message);
    part_done(w);
}

static void other_cb(const mcr_result *res, void *arg)
{
    tx_write *w = arg;
    keep(&w->other, res);
    mcr__pool_server *o = res->status == MCR_OK ? server_named(w->p, res->server) : NULL;
    if (o != NULL)
        o->dual_writes++;
    part_done(w);
}

/* The other owner's part: the same command (set, delete, touch), or a
 * delete of its copy. */
static void send_other(tx_write *w)
{
    mcr_request o = w->q;
    if (o.op != MCR_OP_SET && o.op != MCR_OP_DELETE && o.op != MCR_OP_TOUCH) {
        memset(&o, 0, sizeof(o));
        o.op = MCR_OP_DELETE;
        o.key = w->q.key;
        o.key_len = w->q.key_len;
    }
    o.server = NULL;
    mcr__pool_server *s = w->p->freeing ? NULL : server_named(w->p, w->other_id);
    mcr_error e2;
    int rc = s == NULL ? MCR_ERR_CANCELLED : mcr__submit(w->p, &o, s, 0, other_cb, w, &e2);
    if (rc != MCR_OK)
        part_failed(w, &w->other, w->other_id, rc,
                    s == NULL ? "the server left the pool" : e2.message);
}

static void main_cb(const mcr_result *res, void *arg);

/* The current owner's part: the caller's request, routed by key. */
static void send_main(tx_write *w)
{
    mcr_error e2;
    int rc = w->p->freeing ? MCR_ERR_CANCELLED
                           : mcr__submit(w->p, &w->q, NULL, 0, main_cb, w, &e2);
    if (rc != MCR_OK) {
        int other_follows = w->outstanding == 2;
        part_failed(w, &w->main, w->main_id, rc,
                    w->p->freeing ? "the pool is being freed" : e2.message);
        if (other_follows)
            send_other(w); /* the other owner's part still goes (or fails) */
    }
}

static void main_cb(const mcr_result *res, void *arg)
{
    tx_write *w = arg;
    keep(&w->main, res);
    /* copying, or an op that needed the value: the other part follows
     * (w lives on: its part is outstanding) */
    int follows = w->plan == PLAN_ENSURE || (w->plan == PLAN_FROM_FIRST && !w->switched);
    part_done(w);
    if (follows)
        send_other(w);
}

/* Switched, delete or touch: the previous owner answered; now the current. */
static void first_other_cb(const mcr_result *res, void *arg)
{
    tx_write *w = arg;
    other_cb(res, arg); /* outstanding 2 -> 1 */
    send_main(w);
}

static void ensure_cb(mcr__txcopy_outcome outcome, void *arg)
{
    tx_write *w = arg;
    if (outcome == MCR__TXC_UNDONE && ++w->tries < ENSURE_TRIES && !w->p->freeing &&
        mcr__txcopy_start(w->p, w->key, w->key_len, w->other_id, w->main_id, NULL, 0, ensure_cb,
                          w) == MCR_OK)
        return;
    /* the current owner holds the value if the previous one had it (or
     * the copy could not be made: the op then works on what is there) */
    send_main(w);
}

static int submit_write(mcr_pool *p, const mcr_request *q, mcr__pool_server *other,
                        mcr__pool_server *cur, mcr_pool_cb cb, void *arg, mcr_error *err)
{
    size_t vlen = mcr__is_store_op(q->op) ? q->value_len : 0;
    tx_write *w = calloc(1, sizeof(*w) + q->key_len + vlen);
    if (w == NULL)
        return mcr__pool_fail(err, MCR_ERR_NOMEM, "out of memory");
    w->p = p;
    w->cb = cb;
    w->arg = arg;
    w->q = *q;
    w->key = (char *)(w + 1);
    memcpy(w->key, q->key, q->key_len);
    w->key_len = q->key_len;
    w->q.key = w->key;
    if (vlen > 0) {
        memcpy(w->key + q->key_len, q->value, vlen);
        w->q.value = w->key + q->key_len;
    }
    snprintf(w->other_id, sizeof(w->other_id), "%s", other->id);
    snprintf(w->main_id, sizeof(w->main_id), "%s", cur->id);
    w->switched = p->tx_phase == MCR_PHASE_SWITCHED;
    w->outstanding = 2;
    write_plan plan = q->op == MCR_OP_SET ? PLAN_BOTH
                      : !w->switched || q->op == MCR_OP_DELETE || q->op == MCR_OP_TOUCH
                          ? PLAN_FROM_FIRST
                          : PLAN_ENSURE;
    w->plan = plan;
    int rc;
    if (plan == PLAN_ENSURE) {
        rc = mcr__txcopy_start(p, w->key, w->key_len, w->other_id, w->main_id, NULL, 0,
                               ensure_cb, w);
        if (rc != MCR_OK) {
            free(w);
            return mcr__pool_fail(err, rc, rc == MCR_ERR_NOMEM ? "out of memory"
                                                               : "the key's owner left the pool");
        }
        return MCR_OK;
    }
    if (plan == PLAN_FROM_FIRST && w->switched) {
        /* the previous owner first: its part is the same delete or touch */
        mcr_request o = w->q;
        o.server = NULL;
        rc = mcr__submit(p, &o, other, 0, first_other_cb, w, err);
    } else {
        rc = mcr__submit(p, &w->q, NULL, 0, main_cb, w, err);
    }
    if (rc != MCR_OK) {
        free(w);
        return rc;
    }
    if (plan == PLAN_BOTH)
        send_other(w);
    return MCR_OK;
}

/* ------------------------------------------------------------ reads */


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
        if ((p->tx.flags & MCR_TRANSITION_WARM) && !p->freeing) {
            /* added to the current owner, verified by the previous
             * owner's CAS: a write acknowledged meanwhile wins */
            mcr__pool_server *c = server_named(p, t->first.server);
            if (o == NULL || c == NULL ||
                mcr__txcopy_start(p, t->key, t->key_len, o->id, c->id, res, mcr__now_ns(), NULL,
                                  NULL) != MCR_OK) {
                if (c != NULL)
                    c->warm_failures++;
            }
        }
        if (t->op != MCR_OP_GETS)
            r2.cas = 0; /* read with gets for the copy's check only */
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
    q.op = MCR_OP_GETS; /* its CAS: a warm copy is verified by it */
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
    mcr__pool_server *cur = NULL;
    mcr__pool_server *o = moved_other(p, q->key, q->key_len, &cur);
    if (o == NULL || q->op == MCR_OP_GAT || q->op == MCR_OP_GATS)
        return mcr__submit(p, q, NULL, 0, cb, arg, err);
    if (!mcr__is_read_op(q->op))
        return submit_write(p, q, o, cur, cb, arg, err);
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
