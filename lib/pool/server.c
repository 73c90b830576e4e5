/* SPDX-License-Identifier: BSD-3-Clause */
/* server.c: the pool's servers: health, failures counted, fail-fast and ejection with probes, the wait queue (and its timeout) and dispatch to connections. */
#include "pool_internal.h"

#include <inttypes.h>
#include <stdlib.h>

/* ------------------------------------------------------------ servers */

void mcr__server_fail_waiting(mcr__pool_server *s, int status, const char *msg)
{
    mcr__pool_req *r = s->wait_head;
    s->wait_head = s->wait_tail = NULL;
    while (r != NULL) {
        mcr__pool_req *n = r->next;
        mcr__fail_later(s->pool, r, status, msg);
        r = n;
    }
}

void mcr__server_close_idle(mcr__pool_server *s)
{
    for (unsigned i = 0; i < s->pool->o.connections; i++) {
        mcr__pool_conn *c = s->conns[i];
        if (c != NULL && c->inflight == 0)
            mcr__conn_fail(c, MCR_ERR_CANCELLED, "server removed");
    }
}

void mcr__server_destroy(mcr__pool_server *s)
{
    mcr_pool *p = s->pool;
    size_t i = s->list_pos;
    p->servers[i] = p->servers[--p->nservers];
    p->servers[i]->list_pos = i;
    if (s->retry_ev != NULL)
        event_free(s->retry_ev);
    if (s->queue_ev != NULL)
        event_free(s->queue_ev);
    free(s->conns);
    free(s->id);
    free(s);
}

void mcr__server_maybe_free(mcr__pool_server *s)
{
    if (!s->retired || s->refs > 0 || s->pool->freeing)
        return;
    for (unsigned i = 0; i < s->pool->o.connections; i++)
        if (s->conns[i] != NULL) {
            if (s->conns[i]->inflight == 0)
                mcr__conn_fail(s->conns[i], MCR_ERR_CANCELLED, "server removed");
            if (s->conns[i] != NULL)
                return; /* a busy connection: freed when it is */
        }
    mcr__server_destroy(s);
}

static unsigned next_backoff(mcr__pool_server *s, uint64_t now)
{
    const mcr_pool_options *o = &s->pool->o;
    if (s->readded_at != 0 && now - s->readded_at < (uint64_t)o->retry_timeout_ms * 1000000u &&
        s->backoff_ms != 0) {
        uint64_t b = (uint64_t)s->backoff_ms * 2;
        return b > o->retry_max_ms ? o->retry_max_ms : (unsigned)b;
    }
    return o->retry_timeout_ms;
}

void mcr__server_schedule_probe(mcr__pool_server *s)
{
    struct timeval tv = {(time_t)(s->backoff_ms / 1000),
                         (suseconds_t)(s->backoff_ms % 1000) * 1000};
    evtimer_add(s->retry_ev, &tv);
}

static void server_down(mcr__pool_server *s)
{
    mcr_pool *p = s->pool;
    uint64_t now = mcr__now_ns();
    s->backoff_ms = next_backoff(s, now);
    if (p->o.policy == MCR_POLICY_EJECT && !s->retired) {
        s->health = MCR_HEALTH_EJECTED;
        s->eject_pending = 1;
        p->ops_pending = 1;
        event_active(p->done_ev, EV_TIMEOUT, 0);
    } else {
        s->health = MCR_HEALTH_DOWN;
        s->retry_at = now + (uint64_t)s->backoff_ms * 1000000u;
    }
    mcr__server_fail_waiting(s, MCR_ERR_DOWN, "server down after consecutive failures");
}

void mcr__server_failed(mcr__pool_server *s, int status)
{
    if (status == MCR_ERR_TIMEOUT)
        s->timeouts++;
    else
        s->refusals++;
    s->consecutive++;
    if (s->health == MCR_HEALTH_UP && s->consecutive >= s->pool->o.server_failure_limit)
        server_down(s);
}

/* Eject / re-add: a local state in the router's overlay, never a new
 * epoch. The router is shared by the process (its pools, an application, a
 * fleet's publishes): an ejection is this process's decision about one
 * address, laid over whatever the fleet publishes, and a publish neither
 * undoes it nor is refused because of it. */
int mcr__server_overlay(mcr_pool *p, mcr__pool_server *s, int down)
{
    mcr_server_state st;
    int rc;

    if (!down) {
        if (!s->overlay_set)
            return MCR_OK;
        /* Only ours: a local state changed since (an operator's DRAINING)
         * is not the pool's to clear. */
        if (mcr_router_local_state(p->router, s->id, &st, NULL) == MCR_OK &&
            st == MCR_STATE_DOWN) {
            rc = mcr_router_clear_local_state(p->router, s->id, MCR_ROUTER_NOWAIT, NULL);
            if (rc == MCR_ERR_BUSY)
                return rc;
        }
        /* Cleared, or gone already (cleared by someone else, or dropped
         * with the server by a publish). */
        s->overlay_set = 0;
        return MCR_OK;
    }
    mcr_snapshot *pub = mcr_router_published(p->router);
    if (pub == NULL)
        return MCR_ERR_EMPTY;
    uint32_t i = mcr_snapshot_find(pub, s->id);
    mcr_server_desc d;
    rc = MCR_ERR_UNKNOWN;
    if (i != MCR_NO_SERVER && mcr_snapshot_server(pub, (size_t)i, &d) == MCR_OK && d.port == s->port &&
        strcmp(d.host, s->host) == 0) {
        if (d.state == MCR_STATE_DRAINING ||
            (mcr_router_local_state(p->router, s->id, &st, NULL) == MCR_OK &&
             st == MCR_STATE_DRAINING)) {
            rc = MCR_ERR_INVALID; /* an operator's choice, not ours to override */
        } else {
            /* Also when it is DOWN already (published so, or set by another
             * pool): the local state keeps it out until this pool's probe
             * says otherwise, whatever is published meanwhile. */
            rc = mcr_router_set_local_state(p->router, s->id, MCR_STATE_DOWN, MCR_ROUTER_NOWAIT,
                                            NULL);
            if (rc == MCR_OK) {
                s->overlay_set = 1;
                s->ejections++;
            }
        }
    }
    mcr_snapshot_unref(pub);
    return rc;
}

static void probe_cb(const mcr_result *res, void *arg)
{
    mcr__pool_server *s = arg;
    mcr_pool *p = s->pool;
    s->probing = 0;
    if (s->retired)
        return;
    if (res->status == MCR_OK) {
        s->health = MCR_HEALTH_UP;
        s->consecutive = 0;
        s->readded_at = mcr__now_ns();
        s->readd_pending = 1;
        p->ops_pending = 1;
        event_active(p->done_ev, EV_TIMEOUT, 0);
    } else {
        uint64_t b = (uint64_t)s->backoff_ms * 2;
        s->backoff_ms = b > p->o.retry_max_ms ? p->o.retry_max_ms : (unsigned)b;
        mcr__server_schedule_probe(s);
    }
}

static void retry_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    mcr__pool_server *s = arg;
    mcr_pool *p = s->pool;
    if (s->retired || s->probing || s->health == MCR_HEALTH_UP)
        return;
    mcr__pool_req *r = mcr__req_new(p, 0, 0, 0);
    if (r == NULL) {
        mcr__server_schedule_probe(s);
        return;
    }
    r->op = MCR_OP_VERSION;
    r->internal = 1;
    r->cb = probe_cb;
    r->arg = s;
    r->server = s;
    r->epoch = p->epoch;
    mcr__server_ref(s);
    s->probing = 1;
    s->consecutive = 0;
    mcr__server_dispatch(s, r);
}

/* ------------------------------------------------------------ the wait queue */

/* A request waits in s's queue when every connection of s is at
 * max_in_flight (or none can be opened now). The queue is FIFO, so its
 * head is the oldest request: one timer, armed for the head's deadline
 * (queued_ns + queue_timeout_ms), bounds them all, and a request costs no
 * timer of its own. The timer is left armed when the queue empties before
 * it fires (a call saved per pump); it then finds nothing to do.
 *
 * A queue timeout is not counted as a failure of the server (not in
 * `timeouts`, not towards server_failure_limit): what held the queue is
 * the requests in flight, whose own timeouts are counted already, one per
 * connection; and a server that answers, but slower than the application
 * submits, is busy, not down: counting the backlog the client piled up
 * would eject a live server and move that backlog to the others. The
 * request's error still counts in `errors`. */

static void queue_arm(mcr__pool_server *s, uint64_t deadline)
{
    uint64_t now = mcr__now_ns();
    uint64_t d = deadline > now ? deadline - now : 0;
    struct timeval tv = {(time_t)(d / 1000000000u), (suseconds_t)((d % 1000000000u) / 1000)};
    evtimer_add(s->queue_ev, &tv);
    s->queue_armed = 1;
}

static void wait_push(mcr__pool_server *s, mcr__pool_req *r)
{
    r->queued_ns = mcr__pool_now(s->pool);
    mcr__queue_push(&s->wait_head, &s->wait_tail, r);
    /* Armed: for an earlier request's deadline, which comes first. */
    if (!s->queue_armed)
        queue_arm(s, r->queued_ns + (uint64_t)s->pool->o.queue_timeout_ms * 1000000u);
}

/* Fail the requests at the head of s's queue that have waited
 * queue_timeout_ms by `now` (from the loop, with MCR_ERR_TIMEOUT). */
static void queue_expire(mcr__pool_server *s, uint64_t now)
{
    mcr_pool *p = s->pool;
    uint64_t limit = (uint64_t)p->o.queue_timeout_ms * 1000000u;
    while (s->wait_head != NULL && now >= s->wait_head->queued_ns + limit) {
        mcr__pool_req *r = s->wait_head;
        s->wait_head = r->next;
        if (s->wait_head == NULL)
            s->wait_tail = NULL;
        mcr__hot_remove(p, r); /* a get submitted from now on does not join it */
        /* mcr__fail_later() with the message written in place */
        r->status = MCR_ERR_TIMEOUT;
        mcr__set_msg(r->message,
                     "%s:%d: waited %" PRIu64 " ms in the queue without being sent "
                     "(queue_timeout_ms %u; its connections at max_in_flight %u)",
                     s->host, s->port, (now - r->queued_ns) / 1000000u, p->o.queue_timeout_ms,
                     p->o.max_in_flight);
        mcr__deferred_push(p, r);
    }
}

static void queue_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    mcr__pool_server *s = arg;
    s->queue_armed = 0; /* it fired: not pending any more */
    queue_expire(s, mcr__now_ns());
    if (s->wait_head != NULL)
        queue_arm(s, s->wait_head->queued_ns + (uint64_t)s->pool->o.queue_timeout_ms * 1000000u);
}

mcr__pool_server *mcr__server_new(mcr_pool *p, const mcr_server_desc *d)
{
    if (p->nservers == p->cap) {
        size_t n = p->cap ? p->cap * 2 : 16;
        mcr__pool_server **t = realloc(p->servers, n * sizeof(*t));
        if (t == NULL)
            return NULL;
        p->servers = t;
        p->cap = n;
    }
    mcr__pool_server *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->pool = p;
    s->idx = SIZE_MAX;
    s->id = strdup(d->id);
    s->conns = calloc(p->o.connections, sizeof(*s->conns));
    s->retry_ev = evtimer_new(p->base, retry_timer_cb, s);
    s->queue_ev = evtimer_new(p->base, queue_timer_cb, s);
    if (s->id == NULL || s->conns == NULL || s->retry_ev == NULL || s->queue_ev == NULL) {
        if (s->retry_ev != NULL)
            event_free(s->retry_ev);
        if (s->queue_ev != NULL)
            event_free(s->queue_ev);
        free(s->conns);
        free(s->id);
        free(s);
        return NULL;
    }
    snprintf(s->host, sizeof(s->host), "%s", d->host);
    s->port = d->port;
    s->list_pos = p->nservers;
    p->servers[p->nservers++] = s;
    return s;
}

void mcr__server_retire(mcr__pool_server *s)
{
    if (s->retired)
        return;
    s->retired = 1;
    s->health = MCR_HEALTH_DRAINING;
    event_del(s->retry_ev);
    mcr__server_fail_waiting(s, MCR_ERR_CANCELLED, "server removed from the snapshot");
    /* Requests on a connection not made yet never reached the server. */
    for (unsigned i = 0; i < s->pool->o.connections; i++) {
        mcr__pool_conn *c = s->conns[i];
        if (c != NULL && c->state == MCR__CONN_CONNECTING)
            mcr__conn_fail(c, MCR_ERR_CANCELLED, "server removed before its connection was made");
    }
    mcr__server_close_idle(s);
    mcr__server_maybe_free(s);
}

/* The connection to use for one more request, or NULL (all full). */
static mcr__pool_conn *pick_conn(mcr__pool_server *s)
{
    mcr_pool *p = s->pool;
    mcr__pool_conn *best = NULL;
    int empty = -1;
    for (unsigned i = 0; i < p->o.connections; i++) {
        mcr__pool_conn *c = s->conns[i];
        if (c == NULL) {
            if (empty < 0)
                empty = (int)i;
        } else if (best == NULL || c->inflight < best->inflight) {
            best = c;
        }
    }
    if (best != NULL && best->inflight == 0)
        return best;
    if (empty >= 0) {
        mcr__pool_conn *c = mcr__conn_open(s, empty);
        if (c != NULL)
            return c;
    }
    if (best != NULL && best->inflight < p->o.max_in_flight)
        return best;
    return NULL;
}

/* Send r to s now, or queue it there. The value is copied if it must wait.
 * MCR_OK, or MCR_ERR_NOMEM (r untouched, not queued). */
int mcr__server_dispatch(mcr__pool_server *s, mcr__pool_req *r)
{
    mcr__pool_conn *c = s->wait_head == NULL ? pick_conn(s) : NULL;
    if (c != NULL) {
        int rc = mcr__conn_send(c, r);
        if (rc == MCR_OK)
            return MCR_OK;
        if (rc == MCR_ERR_PROTOCOL) {
            mcr__conn_fail(c, MCR_ERR_CONNECT, "out of memory writing a request");
            return MCR_ERR_NOMEM;
        }
        return rc;
    }
    if (r->val != NULL && r->val_copy == NULL && r->val_len > 0) {
        r->val_copy = malloc(r->val_len);
        if (r->val_copy == NULL)
            return MCR_ERR_NOMEM;
        memcpy(r->val_copy, r->val, r->val_len);
        r->val = r->val_copy;
    }
    wait_push(s, r);
    /* No connection could be opened at all: fail it from the loop. */
    int open = 0;
    for (unsigned i = 0; i < s->pool->o.connections; i++)
        open += s->conns[i] != NULL;
    if (open == 0 && s->open_nomem)
        mcr__server_fail_waiting(s, MCR_ERR_NOMEM, "out of memory opening a connection");
    else if (open == 0)
        mcr__server_fail_waiting(s, s->health == MCR_HEALTH_UP ? MCR_ERR_CONNECT : MCR_ERR_DOWN,
                                 "cannot connect");
    return MCR_OK;
}

void mcr__server_pump(mcr__pool_server *s)
{
    /* Inside a read callback the pass's clock: no clock read per pump. */
    if (s->wait_head != NULL)
        queue_expire(s, mcr__pool_now(s->pool));
    while (s->wait_head != NULL) {
        mcr__pool_conn *c = pick_conn(s);
        if (c == NULL)
            break;
        mcr__pool_req *r = s->wait_head;
        s->wait_head = r->next;
        if (s->wait_head == NULL)
            s->wait_tail = NULL;
        int rc = mcr__conn_send(c, r);
        if (rc != MCR_OK) {
            mcr__fail_later(s->pool, r, MCR_ERR_NOMEM, "out of memory writing a request");
            if (rc == MCR_ERR_PROTOCOL)
                mcr__conn_fail(c, MCR_ERR_CONNECT, "out of memory writing a request");
        }
    }
    int open = 0;
    for (unsigned i = 0; i < s->pool->o.connections; i++)
        open += s->conns[i] != NULL;
    if (open == 0 && s->wait_head != NULL)
        mcr__server_fail_waiting(s, s->open_nomem ? MCR_ERR_NOMEM : MCR_ERR_CONNECT,
                                 s->open_nomem ? "out of memory opening a connection"
                                               : "cannot connect");
}
