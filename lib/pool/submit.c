/* SPDX-License-Identifier: BSD-3-Clause */
/* submit.c: submitting one request: checks, routing (bounded loads, failover), hot-key joining; mcr_pool_exec() on top. */
#include "pool_internal.h"

#include <inttypes.h>
#include <stdlib.h>

/* ------------------------------------------------------------ submission */

/* The one retry a DOWN server is given once its time (retry_at) has come:
 * UP again, one failure from DOWN. 1 when s was given it. *now is the
 * clock, read here on first need (0: not read yet). `readd`: also stamp s
 * re-added (server.c: failing again soon after, it backs off longer), as a
 * request routed by key does; one pinned or sent by server id does not. */
static int retry_down(mcr_pool *p, mcr__pool_server *s, uint64_t *now, int readd)
{
    if (s->health != MCR_HEALTH_DOWN)
        return 0;
    if (*now == 0)
        *now = mcr__now_ns();
    if (*now < s->retry_at)
        return 0;
    s->health = MCR_HEALTH_UP;
    s->consecutive = p->o.server_failure_limit - 1;
    if (readd)
        s->readded_at = *now;
    return 1;
}

mcr__pool_server *mcr__route_owner(mcr_pool *p, mcr_op op, const void *key, size_t len,
                                   uint32_t owner, int *status)
{
    mcr__pool_server *s = p->by_index[owner];
    uint64_t now = 0;
    if (s->health == MCR_HEALTH_UP || retry_down(p, s, &now, 1))
        return s;
    if (p->o.policy == MCR_POLICY_FAILOVER && mcr__is_read_op(op)) {
        uint32_t rep[8];
        size_t na = mcr_snapshot_active_count(p->snap);
        size_t n = mcr_snapshot_replicas(p->snap, key, len, na < 8 ? na : 8, rep, NULL);
        for (size_t k = 1; k < n; k++) {
            mcr__pool_server *t = p->by_index[rep[k]];
            if (t->health == MCR_HEALTH_UP || retry_down(p, t, &now, 1))
                return t;
        }
    }
    *status = MCR_ERR_DOWN;
    return s;
}

mcr__pool_server *mcr__route_key(mcr_pool *p, mcr_op op, const void *key, size_t len, int *status)
{
    /* Reads with bounded loads skip an owner that has its share already. */
    uint32_t i = p->o.bounded_epsilon > 0 && mcr__is_read_op(op)
                     ? mcr_snapshot_locate_bounded(p->snap, key, len, p->load, p->load_total,
                                                   p->o.bounded_epsilon)
                     : mcr_snapshot_locate(p->snap, key, len);
    return mcr__route_owner(p, op, key, len, i, status);
}

/* A server of the current snapshot, else of the migration's other one. */
static mcr__pool_server *server_by_id(mcr_pool *p, const char *id)
{
    uint32_t i = mcr_snapshot_find(p->snap, id);
    if (i != MCR_NO_SERVER && (size_t)i < p->nby)
        return p->by_index[i];
    if (p->tx_other == NULL)
        return NULL;
    i = mcr_snapshot_find(p->tx_other, id);
    return i == MCR_NO_SERVER || (size_t)i >= p->ntx_by ? NULL : p->tx_by[i];
}

static int check_request(mcr_pool *p, const mcr_request *q, mcr_error *err)
{
    if ((unsigned)q->op >= MCR_OP_COUNT)
        return mcr__pool_fail(err, MCR_ERR_INVALID, "unknown op %d", (int)q->op);
    if (q->exptime < 0 || q->exptime > INT32_MAX)
        return mcr__pool_fail(err, MCR_ERR_INVALID, "exptime %" PRId64 " outside 0..2147483647",
                              q->exptime);
    if (mcr__is_server_op(q->op)) {
        if (q->server == NULL)
            return mcr__pool_fail(err, MCR_ERR_INVALID, "%s needs a server id", mcr_op_name(q->op));
        if (q->op == MCR_OP_STATS && q->key_len > 0 &&
            (q->key == NULL || !mcr__proto_key_ok(q->key, q->key_len, MCR_KEY_MAX)))
            return mcr__pool_fail(err, MCR_ERR_KEY,
                                  "stats group must be 1..250 bytes without space or control byte");
        return MCR_OK;
    }
    if (q->key == NULL && q->key_len > 0)
        return mcr__pool_fail(err, MCR_ERR_INVALID, "NULL key");
    if (!mcr__proto_key_ok(q->key, q->key_len, MCR_KEY_MAX - p->prefix_len)) {
        char qb[80];
        return mcr__pool_fail(err, MCR_ERR_KEY,
                              "key \"%s\" is not 1..%zu bytes without space or control byte",
                              mcr__quote(qb, sizeof(qb), q->key ? q->key : "", q->key_len),
                              (size_t)MCR_KEY_MAX - p->prefix_len);
    }
    if (mcr__is_store_op(q->op)) {
        if (q->value == NULL && q->value_len > 0)
            return mcr__pool_fail(err, MCR_ERR_INVALID, "NULL value");
        if (q->value_len > p->o.max_value_size)
            return mcr__pool_fail(err, MCR_ERR_TOO_BIG,
                                  "value of %zu bytes is over the limit of %zu", q->value_len,
                                  p->o.max_value_size);
    }
    return MCR_OK;
}

/* Fail r, routed to s which cannot take it (`status`: MCR_ERR_DOWN, or
 * MCR_ERR_CANCELLED for a server being removed), from the loop. */
static void fail_unserved(mcr_pool *p, mcr__pool_req *r, const mcr__pool_server *s, int status)
{
    char m[96];
    snprintf(m, sizeof(m), "server %s is %s", s->id,
             status == MCR_ERR_DOWN ? "down" : "being removed");
    mcr__fail_later(p, r, status, m);
}

/* The gets waiting in the routing queue, routed and sent in the order they
 * came: their owners found a chunk at a time by mcr_snapshot_locate_many()
 * (MD5 in SIMD lanes: several times cheaper per key than a lookup each),
 * then each through the same health and failover rules as any request.
 * Runs before the pass's writes (the flush event), before a request that
 * is not queued (a multi-get too), and before the pool adopts another
 * snapshot, so each get is routed by the snapshot it was submitted under.
 * Calls no callback. */
void mcr__route_pending(mcr_pool *p)
{
    enum { CHUNK = 64 };
    uint64_t outer = p->pass_ns;
    if (outer == 0)
        p->pass_ns = mcr__now_ns(); /* one clock read stamps the lot */
    while (p->route_head != NULL) {
        mcr__pool_req *batch[CHUNK];
        const void *keys[CHUNK];
        size_t lens[CHUNK];
        uint32_t owner[CHUNK];
        size_t m = 0;
        for (; m < CHUNK && p->route_head != NULL; m++) {
            mcr__pool_req *r = p->route_head;
            p->route_head = r->next;
            r->next = NULL;
            batch[m] = r;
            keys[m] = r->keys[0];
            lens[m] = r->klens[0];
        }
        if (p->route_head == NULL)
            p->route_tail = NULL;
        mcr_snapshot_locate_many(p->snap, keys, lens, m, owner);
        for (size_t i = 0; i < m; i++) {
            mcr__pool_req *r = batch[i];
            int status = MCR_OK, rc;
            mcr__pool_server *s = mcr__route_owner(p, r->op, keys[i], lens[i], owner[i], &status);
            r->server = s;
            mcr__server_ref(s);
            if (status != MCR_OK) {
                mcr__hot_remove(p, r); /* no later get joins a failure */
                fail_unserved(p, r, s, status);
            } else if ((rc = mcr__server_dispatch(s, r)) != MCR_OK) {
                mcr__hot_remove(p, r);
                mcr__fail_later(p, r, rc,
                                rc == MCR_ERR_NOMEM ? "out of memory" : "cannot be written");
            }
        }
    }
    p->pass_ns = outer;
}

/* Where a request goes, decided before it is built (mcr__submit). A get by
 * key is either queued (routed with the others at the end of the pass) or
 * routed now; it may join a get of the same key in flight, or let later ones
 * join it (shareable), only while its server can take it. */
typedef struct submit_plan {
    mcr__pool_server *s; /* NULL while queued */
    int status;          /* MCR_OK, or why s cannot take it: failed from the loop */
    int queue;           /* a get by key, waiting in the routing queue */
    int shareable;       /* a get by key that later ones may join (hot keys) */
    uint32_t kh, h;      /* shareable: mcr__key_hash() of its key, its table hash */
} submit_plan;

/* Where q goes: to `pin` (a migration's request to a server it chose), to
 * the server q names, routed by its key now, or queued. MCR_OK, or
 * MCR_ERR_UNKNOWN for a server id not in the snapshot; a server that cannot
 * take q is no error here (pl->status). */
static int plan_route(mcr_pool *p, const mcr_request *q, mcr__pool_server *pin, submit_plan *pl,
                      mcr_error *err)
{
    int get = q->op == MCR_OP_GET || q->op == MCR_OP_GETS;
    uint64_t now = 0;
    memset(pl, 0, sizeof(*pl));
    pl->status = MCR_OK;
    /* A get routed by its key waits in the routing queue for the end of
     * the loop pass, where the queue's keys are placed together (see
     * route_pending). Anything else goes out now, after the gets queued
     * before it: a request never overtakes an earlier one. */
    pl->queue = get && pin == NULL && q->server == NULL && !(p->o.bounded_epsilon > 0);
    if (!pl->queue && p->route_head != NULL)
        mcr__route_pending(p);

    if (pin != NULL) {
        pl->s = pin;
        retry_down(p, pin, &now, 0);
        if (pin->retired)
            pl->status = MCR_ERR_CANCELLED;
        else if (pin->health == MCR_HEALTH_DOWN)
            pl->status = MCR_ERR_DOWN;
    } else if (q->server != NULL) {
        mcr__pool_server *s = server_by_id(p, q->server);
        if (s == NULL) {
            char qb[80];
            return mcr__pool_fail(
                err, MCR_ERR_UNKNOWN, "no server %s in the snapshot (epoch %" PRIu64 ")",
                mcr__quote(qb, sizeof(qb), q->server, strlen(q->server)), p->epoch);
        }
        pl->s = s;
        retry_down(p, s, &now, 0);
        if (s->health != MCR_HEALTH_UP && s->health != MCR_HEALTH_EJECTED)
            pl->status = s->health == MCR_HEALTH_DRAINING ? MCR_ERR_CANCELLED : MCR_ERR_DOWN;
    } else if (!pl->queue) {
        pl->s = mcr__route_key(p, q->op, q->key, q->key_len, &pl->status);
    }
    pl->shareable = !p->o.no_coalesce && get && q->server == NULL && pin == NULL &&
                    pl->status == MCR_OK;
    return MCR_OK;
}

/* Hot keys: the get of q's key in flight that this shareable one joins, or
 * NULL. A lead already routed is joined only on the server this one would
 * go to now (a new snapshot or a failover since may send it elsewhere); a
 * lead still queued will be routed as this one would be. */
static mcr__pool_req *find_lead(mcr_pool *p, const mcr_request *q, submit_plan *pl)
{
    pl->kh = mcr__key_hash(q->key, q->key_len, 0);
    pl->h = mcr__hot_hash(q->op, pl->kh);
    mcr__pool_req *lead = mcr__hot_find(p, q->op, q->key, q->key_len, pl->h);
    if (lead == NULL)
        return NULL;
    if (lead->server != NULL && pl->s == NULL) {
        /* the lead is routed: whether this one goes there too */
        pl->queue = 0;
        if (p->route_head != NULL)
            mcr__route_pending(p);
        pl->s = mcr__route_key(p, q->op, q->key, q->key_len, &pl->status);
    }
    if (pl->status != MCR_OK) {
        pl->shareable = 0; /* no sharing: this one fails on its own */
        return NULL;
    }
    if (lead->server != NULL && lead->server != pl->s) {
        /* routed elsewhere since: this request leads from now on */
        mcr__hot_remove(p, lead);
        return NULL;
    }
    return lead;
}

/* cb joins `lead`: called with its reply. MCR_OK or MCR_ERR_NOMEM. */
static int join_lead(mcr_pool *p, mcr__pool_req *lead, mcr_pool_cb cb, void *arg, mcr_error *err)
{
    mcr__pool_waiter *w = malloc(sizeof(*w));
    if (w == NULL)
        return mcr__pool_fail(err, MCR_ERR_NOMEM, "out of memory");
    w->cb = cb;
    w->arg = arg;
    w->next = lead->waiters;
    lead->waiters = w;
    p->pending++;
    return MCR_OK;
}

/* The request of q, going where pl says, neither queued nor sent; NULL:
 * out of memory. */
static mcr__pool_req *new_request(mcr_pool *p, const mcr_request *q, const submit_plan *pl,
                                  int force_meta, mcr_pool_cb cb, void *arg)
{
    int keyed = !mcr__is_server_op(q->op);
    size_t klen = keyed || (q->op == MCR_OP_STATS && q->key_len > 0) ? q->key_len : 0;
    mcr__pool_req *r = mcr__req_new(p, klen ? 1 : 0, klen, 0);
    if (r == NULL)
        return NULL;
    if (klen) {
        char *kb = mcr__req_key_area(r, 1, 0);
        memcpy(kb, q->key, klen);
        r->keys[0] = kb;
        r->klens[0] = klen;
        /* get and gets may share a text get line: its table wants their hash */
        r->khash[0] = pl->shareable ? pl->kh
                      : q->op == MCR_OP_GET || q->op == MCR_OP_GETS ? mcr__key_hash(kb, klen, 0)
                                                                   : 0;
        r->nkeys = 1;
    }
    r->op = q->op;
    r->cb = cb;
    r->arg = arg;
    r->flags_in = q->flags;
    r->exptime = q->exptime;
    r->cas_in = q->cas;
    r->delta = q->delta;
    r->val = q->value;
    r->val_len = mcr__is_store_op(q->op) ? q->value_len : 0;
    r->server = pl->s;
    r->epoch = p->epoch;
    /* a delete by CAS exists in meta only (md C<cas>): memcached takes
     * meta commands on any connection */
    r->force_meta = force_meta || (q->op == MCR_OP_DELETE && q->cas != 0) ? 1 : 0;
    return r;
}

/* Start the new request r: queued for routing, failed from the loop (its
 * server cannot take it), or sent. MCR_OK, or an error with r freed. */
static int start_request(mcr_pool *p, mcr__pool_req *r, const submit_plan *pl, mcr_error *err)
{
    p->pending++;
    if (pl->queue) {
        r->val = NULL; /* a get: no value, and the caller's pointer is not kept */
        if (p->route_head == NULL) {
            event_active(p->flush_ev, EV_TIMEOUT, 0);
        }
        mcr__queue_push(&p->route_head, &p->route_tail, r);
        if (pl->shareable)
            mcr__hot_insert(p, r, pl->h);
        return MCR_OK;
    }
    mcr__server_ref(pl->s);
    if (pl->status != MCR_OK) {
        r->val = NULL;
        fail_unserved(p, r, pl->s, pl->status);
        return MCR_OK;
    }
    int rc = mcr__server_dispatch(pl->s, r);
    if (rc != MCR_OK) {
        mcr__server_unref(pl->s);
        p->pending--;
        mcr__req_free(p, r);
        return mcr__pool_fail(err, rc, "out of memory");
    }
    if (r->val != NULL && r->val_copy == NULL)
        r->val = NULL; /* never read after this call */
    if (pl->shareable)
        mcr__hot_insert(p, r, pl->h);
    return MCR_OK;
}

int mcr__submit(mcr_pool *p, const mcr_request *q, mcr__pool_server *pin, int force_meta,
                mcr_pool_cb cb, void *arg, mcr_error *err)
{
    if (p == NULL || q == NULL || cb == NULL)
        return mcr__pool_fail(err, MCR_ERR_INVALID, "mcr_pool_submit: NULL argument");
    if (p->freeing)
        return mcr__pool_fail(err, MCR_ERR_INVALID, "the pool is being freed");
    int rc = check_request(p, q, err);
    if (rc != MCR_OK)
        return rc;
    rc = mcr__pool_refresh(p);
    if (rc != MCR_OK)
        return mcr__pool_fail(
            err, rc, rc == MCR_ERR_EMPTY ? "the router holds no snapshot" : "out of memory");

    submit_plan pl;
    rc = plan_route(p, q, pin, &pl, err);
    if (rc != MCR_OK)
        return rc;
    if (pl.shareable) {
        mcr__pool_req *lead = find_lead(p, q, &pl);
        if (lead != NULL)
            return join_lead(p, lead, cb, arg, err);
    } else if (!mcr__is_server_op(q->op) && !mcr__is_get_family(q->op)) {
        mcr__hot_invalidate(p, q->key, q->key_len); /* a write ends sharing */
    }
    mcr__pool_req *r = new_request(p, q, &pl, force_meta, cb, arg);
    if (r == NULL)
        return mcr__pool_fail(err, MCR_ERR_NOMEM, "out of memory");
    return start_request(p, r, &pl, err);
}
