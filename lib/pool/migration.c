/* SPDX-License-Identifier: BSD-3-Clause */
/* migration.c: mcr_pool_submit() and mcr_pool_get_multi() through a router's migration: reads of a moved key falling back to its previous owner (and warming the new one), writes reaching both owners. */
#include "pool_internal.h"

#include <stdlib.h>

/*
 * A key "moves" when its owner in the pool's snapshot (p->snap, local
 * states applied) and its owner in the migration's other snapshot
 * (p->tx_other: `to` while copying, `from` once switched) are different
 * servers. Only moved keys take the paths below; everything else goes
 * straight to submit.c and multiget.c.
 *
 * Reads. Copying: from the current owner only (the new one is being
 * filled). Switched: from the current owner; on a miss, from the owner in
 * `from`, in meta (for the TTL) whatever the pool's protocol; a hit there
 * is the result (via_previous = 1). Closing: from the current owner only,
 * a miss being the answer (the fleet's last step before the migration
 * ends, router.h). Nothing read there is written to the
 * current owner: such a copy, however it is checked afterwards, could be
 * read by another process between its add and its check after a delete
 * was acknowledged. The fallback failing leaves the first miss as the
 * answer.
 *
 * Writes, in both phases, reach both owners (see "writes" below), and the
 * callback runs once both have answered: a set goes to both at once;
 * every other write to the current owner first, then, by what it said, to
 * the other; gat and gats to the current owner only (reads). The result
 * is the current owner's (the previous owner's when, switched, the key
 * was not at the current one); an error of the other (not a miss) fails
 * the whole write with a message naming both, so that an acknowledged
 * write is on both or the other holds nothing of the key.
 * Why both, and not "new owner plus delete at the old": clients still
 * copying (or not yet switched) read the old owner, and a delete there
 * would make every write a miss for them until they switch.
 */

/* ------------------------------------------------------------ helpers */

/* The server owning key in the other snapshot; NULL when the key does not
 * move (or no migration applies). */
static mcr__pool_server *moved_other(mcr_pool *p, const void *key, size_t len)
{
    if (p->tx_phase == MCR_MIGRATION_NONE || p->tx_other == NULL)
        return NULL;
    if (p->tx_deadline_ns != 0 && mcr__now_ns() >= p->tx_deadline_ns)
        return NULL;
    if (!mcr__proto_key_ok(key, len, MCR_KEY_MAX - p->prefix_len))
        return NULL;
    mcr__pool_server *c = p->by_index[mcr_snapshot_locate(p->snap, key, len)];
    mcr__pool_server *o = p->tx_by[mcr_snapshot_locate(p->tx_other, key, len)];
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

/*
 * A write other than a set goes to the current owner first (the "main"
 * part), then to the other owner, by what the first said:
 *   applied   (stored, deleted, touched, a number): the same command to
 *             the other owner, which holds the same value or nothing; if
 *             the other says something else (it held nothing, or another
 *             number), its copy is deleted: the two never differ;
 *   missed    (no such key; not stored for replace, append, prepend):
 *             copying: the other's copy (the new owner's) is deleted: it
 *             can only be an older copy. Closing: the other's copy (the
 *             old owner's) is deleted: the processes still switched
 *             would read it on their miss at the new owner, and the
 *             closing ones no longer read it. Switched: the key may not have
 *             reached the new owner: the command goes to the previous
 *             owner, whose answer is the result (its value is what the
 *             switched phase's fallback reads serve);
 *   anything else (add finding a value, cas finding another CAS): the
 *             other owner is left as it is (nothing changed).
 * While copying the current owner is the one in `from`, so the owner in
 * `from` is always written first: the copier's check (copy.c) relies on it.
 */

/* What a write's first answer means (see above). */
typedef enum outcome {
    OUT_APPLIED,
    OUT_MISSED,
    OUT_OTHER,
    OUT_FAILED
} outcome;

static outcome outcome_of(mcr_op op, const kept_result *k)
{
    if (k->status != MCR_OK)
        return OUT_FAILED;
    switch (k->reply) {
    case MCR_REPLY_STORED:
    case MCR_REPLY_DELETED:
    case MCR_REPLY_TOUCHED:
    case MCR_REPLY_NUMBER:
    case MCR_REPLY_HIT: /* gat, gats */
        return OUT_APPLIED;
    case MCR_REPLY_MISS:
        return OUT_MISSED;
    case MCR_REPLY_NOT_STORED:
        return op == MCR_OP_ADD ? OUT_OTHER : OUT_MISSED;
    default:
        return OUT_OTHER;
    }
}

typedef struct tx_write {
    mcr_pool *p;
    mcr_pool_cb cb;
    void *arg;
    kept_result main, other;
    mcr_request q;           /* the caller's request, key and value copied */
    char other_id[256];      /* the key's other owner */
    int switched;            /* the phase when submitted */
    int outstanding;         /* parts in flight: 2 for a set, else 1 */
    int other_is_result;     /* switched, missed: the previous owner answers */
    int cleanup;             /* the other part is a delete of its copy */
    char *value;             /* gat, gats: the value of the answer (malloc'd) */
    size_t value_len;
    char *key;
    size_t key_len;
} tx_write;

/* gat, gats: keep the answer's value (the result), if it has one. */
static void keep_value(tx_write *w, const mcr_result *res)
{
    if (res->value == NULL || (w->q.op != MCR_OP_GAT && w->q.op != MCR_OP_GATS))
        return;
    free(w->value);
    w->value = malloc(res->value_len ? res->value_len : 1);
    if (w->value != NULL) {
        memcpy(w->value, res->value, res->value_len);
        w->value_len = res->value_len;
    } else {
        w->value_len = 0;
    }
}

static void write_end(tx_write *w)
{
    const kept_result *k = w->other_is_result ? &w->other : &w->main;
    mcr_result res;
    memset(&res, 0, sizeof(res));
    res.op = w->q.op;
    res.key = w->key;
    res.key_len = w->key_len;
    res.ttl = MCR_TTL_UNKNOWN;
    res.status = k->status;
    res.reply = k->reply;
    res.flags = k->flags;
    res.cas = k->cas;
    res.number = k->number;
    res.epoch = w->main.epoch;
    res.server = k->server[0] ? k->server : NULL;
    res.message = k->status != MCR_OK ? k->message : NULL;
    res.via_previous = w->other_is_result;
    if (res.status == MCR_OK && res.reply == MCR_REPLY_HIT) {
        if (w->value == NULL) { /* its copy could not be made */
            res.status = MCR_ERR_NOMEM;
            res.message = "out of memory";
        } else {
            res.value = w->value;
            res.value_len = w->value_len;
        }
    }
    if ((w->q.op == MCR_OP_DELETE || w->q.op == MCR_OP_TOUCH) && res.status == MCR_OK &&
        res.reply == MCR_REPLY_MISS && w->other.status == MCR_OK &&
        (w->other.reply == MCR_REPLY_DELETED || w->other.reply == MCR_REPLY_TOUCHED))
        res.reply = w->other.reply; /* it was only on the other owner */
    char msg[900];
    if (!w->other_is_result && res.status == MCR_OK && w->other.status != MCR_OK &&
        w->other.server[0] != '\0') {
        snprintf(msg, sizeof(msg), "%s reached %s but not the key's other owner %s: %s",
                 mcr_op_name(w->q.op), w->main.server, w->other.server, w->other.message);
        res.status = w->other.status;
        res.message = msg;
    }
    w->cb(&res, w->arg);
    free(w->value);
    free(w);
}

/* A part that could not be submitted: reported as its result. */
static void part_failed(kept_result *k, const char *server, int rc, const char *message)
{
    k->status = rc;
    snprintf(k->server, sizeof(k->server), "%s", server);
    snprintf(k->message, sizeof(k->message), "%s", message);
}

static void other_cb(const mcr_result *res, void *arg);

/* Send `op` (the caller's command, or a delete of the copy) to the other
 * owner; on a failure to submit, end the part there. */
static void send_other(tx_write *w, int as_delete)
{
    mcr_request o = w->q;
    if (as_delete) {
        memset(&o, 0, sizeof(o));
        o.op = MCR_OP_DELETE;
        o.key = w->q.key;
        o.key_len = w->q.key_len;
    } else if (!w->other_is_result) {
        /* what the current owner did, as the other can take it: a CAS
         * belongs to one server (the cas stored there: the same value set
         * here; a delete by CAS: a plain delete), and a gat's touch */
        if (o.op == MCR_OP_CAS)
            o.op = MCR_OP_SET;
        else if (o.op == MCR_OP_GAT || o.op == MCR_OP_GATS)
            o.op = MCR_OP_TOUCH;
        o.cas = 0;
    }
    o.server = NULL;
    w->cleanup = as_delete;
    /* the pool's snapshot adopted first: adopting it inside mcr__submit()
     * may free a server the migration no longer names */
    mcr__pool_server *s = w->p->freeing || mcr__pool_refresh(w->p) != MCR_OK
                              ? NULL
                              : server_named(w->p, w->other_id);
    if (s == NULL && !w->p->freeing && !w->other_is_result &&
        moved_other(w->p, w->key, w->key_len) == NULL) {
        /* the migration ended meanwhile (or the key no longer moves): the
         * other owner is nobody's any more, the current owner's answer
         * stands alone */
        if (--w->outstanding == 0)
            write_end(w);
        return;
    }
    mcr_error e2;
    int rc = s == NULL ? MCR_ERR_CANCELLED : mcr__submit(w->p, &o, s, 0, other_cb, w, &e2);
    if (rc != MCR_OK) {
        part_failed(&w->other, w->other_id, rc,
                    s == NULL ? "the server left the pool" : e2.message);
        if (--w->outstanding == 0)
            write_end(w);
    }
}

static void other_cb(const mcr_result *res, void *arg)
{
    tx_write *w = arg;
    keep(&w->other, res);
    if (w->other_is_result)
        keep_value(w, res);
    mcr__pool_server *o = res->status == MCR_OK ? server_named(w->p, res->server) : NULL;
    if (o != NULL)
        o->dual_writes++;
    if (w->q.op != MCR_OP_SET && !w->cleanup && !w->other_is_result && res->status == MCR_OK &&
        (outcome_of(w->q.op, &w->other) == OUT_OTHER ||
         (w->main.reply == MCR_REPLY_NUMBER && w->other.reply == MCR_REPLY_NUMBER &&
          w->other.number != w->main.number))) {
        /* the other held something else than the current owner (a miss
         * means it holds nothing): drop its copy */
        send_other(w, 1);
        return;
    }
    if (--w->outstanding == 0)
        write_end(w);
}

static void main_cb(const mcr_result *res, void *arg)
{
    tx_write *w = arg;
    keep(&w->main, res);
    keep_value(w, res);
    if (w->q.op == MCR_OP_SET || w->p->freeing) {
        if (--w->outstanding == 0)
            write_end(w);
        return;
    }
    switch (outcome_of(w->q.op, &w->main)) {
    case OUT_APPLIED:
        send_other(w, 0);
        break;
    case OUT_MISSED:
        if (w->switched) {
            w->other_is_result = 1;
            send_other(w, 0);
        } else {
            send_other(w, 1);
        }
        break;
    case OUT_FAILED:
        send_other(w, 1); /* unknown: the other's copy cannot stay */
        break;
    case OUT_OTHER:
        if (--w->outstanding == 0)
            write_end(w);
        break;
    }
}

static int submit_write(mcr_pool *p, const mcr_request *q, mcr__pool_server *other,
                        mcr_pool_cb cb, void *arg, mcr_error *err)
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
    w->switched = p->tx_phase == MCR_MIGRATION_SWITCHED;
    w->outstanding = q->op == MCR_OP_SET ? 2 : 1;
    int rc = mcr__submit(p, &w->q, NULL, 0, main_cb, w, err);
    if (rc != MCR_OK) {
        free(w);
        return rc;
    }
    if (q->op == MCR_OP_SET)
        send_other(w, 0); /* to both at once */
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
    /* the routing of the moment: a new snapshot may have come meanwhile
     * (adopted now, not inside mcr__submit(), which could free `o`) */
    if (mcr__pool_refresh(p) != MCR_OK)
        return 0;
    mcr__pool_server *o =
        p->tx_phase == MCR_MIGRATION_SWITCHED ? moved_other(p, t->key, t->key_len) : NULL;
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

_Static_assert(sizeof(((mcr_request *)0)->reserved) == 4 * sizeof(uint64_t),
               "mcr_pool_submit() checks mcr_request.reserved as four words");

int mcr_pool_submit(mcr_pool *p, const mcr_request *q, mcr_pool_cb cb, void *arg, mcr_error *err)
{
    if (p == NULL || q == NULL || cb == NULL)
        return mcr__pool_fail(err, MCR_ERR_INVALID, "mcr_pool_submit: NULL argument");
    /* four words OR'd: this is every request's path, not a byte loop */
    if ((q->reserved[0] | q->reserved[1] | q->reserved[2] | q->reserved[3]) != 0)
        return mcr__pool_fail(err, MCR_ERR_INVALID,
                              "mcr_request: the reserved area is not zero (fill the struct from "
                              "all-zero: mcroute.h)");
    if (p->freeing || q->server != NULL || (unsigned)q->op >= MCR_OP_COUNT ||
        mcr__is_server_op(q->op) || q->key == NULL || mcr__pool_refresh(p) != MCR_OK)
        return mcr__submit(p, q, NULL, 0, cb, arg, err);
    mcr__pool_server *o = moved_other(p, q->key, q->key_len);
    if (o == NULL)
        return mcr__submit(p, q, NULL, 0, cb, arg, err);
    if (!mcr__is_read_op(q->op) || q->op == MCR_OP_GAT || q->op == MCR_OP_GATS)
        return submit_write(p, q, o, cb, arg, err); /* gat, gats: a touch too */
    if (p->tx_phase != MCR_MIGRATION_SWITCHED)
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
        mcr__pool_refresh(p) != MCR_OK || p->tx_phase != MCR_MIGRATION_SWITCHED)
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
