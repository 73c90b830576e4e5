/* SPDX-License-Identifier: BSD-3-Clause */
/* pool.c: the pool's lifecycle: new and free, adopting the router's snapshots, the loop's deferred work, unix paths, waiting. */
#include "pool_internal.h"
#include "mcroute_state.h"

#include <stdlib.h>
#include <sys/un.h>

/* ------------------------------------------------------------ deferred work */

/* The snapshots our overlay changes (mcr_router_set_local_state() and
 * _clear_local_state() with MCR_ROUTER_NOWAIT) replaced are freed
 * on this thread once no reader holds them, not on liburcu's thread, whose
 * frees would contend with this loop's allocations for its malloc arena
 * (see lib/router/router.c). A grace period lasts milliseconds, urcu-bp polls
 * its readers every 10 ms: collect at that pace until none is left. */
static void collect_cb(evutil_socket_t fd, short what, void *arg)
{
    static const struct timeval again = {0, 10000};
    mcr_pool *p = arg;
    (void)fd;
    (void)what;
    size_t left = 0;
    if (mcr_router_reclaim(p->router, MCR_ROUTER_NOWAIT, &left) == MCR_OK && left > 0)
        event_add(p->collect_ev, &again);
}

static void run_ops(mcr_pool *p)
{
    /* MCR_ERR_BUSY: the router is busy (another writer, or reclamation
     * at its bound). The change stays pending and is tried again on a later
     * turn of the loop; a server's re-add waits for its ejection. */
    static const struct timeval retry = {0, 1000};
    int busy = 0;
    p->ops_pending = 0;
    for (size_t i = 0; i < p->nservers; i++) {
        mcr__pool_server *s = p->servers[i];
        if (s->eject_pending) {
            s->eject_pending = 0;
            if (s->retired)
                continue;
            int rc = mcr__server_overlay(p, s, 1);
            if (rc == MCR_ERR_BUSY) {
                s->eject_pending = busy = 1;
                continue;
            }
            if (rc != MCR_OK) {
                /* The ring cannot lose it (the last active server, or it
                 * changed meanwhile): behave as fail-fast for it. */
                s->health = MCR_HEALTH_DOWN;
                s->retry_at = mcr__now_ns() + (uint64_t)s->backoff_ms * 1000000u;
            }
            mcr__server_schedule_probe(s);
        }
        if (s->readd_pending) {
            s->readd_pending = 0;
            if (!s->retired && mcr__server_overlay(p, s, 0) == MCR_ERR_BUSY)
                s->readd_pending = busy = 1;
        }
    }
    if (busy) {
        p->ops_pending = 1;
        event_add(p->done_ev, &retry);
    }
    if (!evtimer_pending(p->collect_ev, NULL))
        collect_cb(-1, 0, p);
    mcr__pool_refresh(p);
}

static void pool_done_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    mcr_pool *p = arg;
    if (p->ops_pending)
        run_ops(p);
    mcr__pool_req *r = p->def_head;
    p->def_head = p->def_tail = NULL;
    while (r != NULL) {
        mcr__pool_req *n = r->next;
        mcr__finish_req(p, r);
        r = n;
    }
}

/* ------------------------------------------------------------ snapshots */

/* The server of the pool for d: one of `by` (n of them) or of the pool's
 * servers with the same id and address, not retired; NULL when none. */
static mcr__pool_server *same_server(mcr_pool *p, mcr__pool_server **by, size_t n,
                                     const mcr_server_desc *d)
{
    for (size_t i = 0; i < n; i++)
        if (by[i] != NULL && strcmp(by[i]->id, d->id) == 0 && by[i]->port == d->port &&
            strcmp(by[i]->host, d->host) == 0)
            return by[i];
    for (size_t i = 0; i < p->nservers; i++) {
        mcr__pool_server *s = p->servers[i];
        if (!s->retired && strcmp(s->id, d->id) == 0 && s->port == d->port &&
            strcmp(s->host, d->host) == 0)
            return s;
    }
    return NULL;
}

/* Adopt the router's migration for snap (n servers in by): p->tx and the
 * servers of the other snapshot, marked so that they are not retired.
 * MCR_OK or MCR_ERR_NOMEM (the old migration kept). */
static int adopt_migration(mcr_pool *p, mcr_snapshot *snap, mcr__pool_server **by, size_t n)
{
    mcr_router_migration t;
    mcr__pool_server **txb = NULL;
    size_t m = 0;
    mcr_migration_phase ph = MCR_MIGRATION_NONE;
    const mcr_snapshot *other = NULL;
    if (mcr_router_get_migration(p->router, &t) == MCR_OK)
        ph = mcr_migration_phase_at(&t, mcr_snapshot_epoch(snap));
    if (ph != MCR_MIGRATION_NONE) {
        other = ph == MCR_MIGRATION_COPYING ? t.to : t.from;
        m = mcr_snapshot_server_count(other);
        txb = calloc(m ? m : 1, sizeof(*txb));
        if (txb == NULL) {
            mcr_router_migration_clear(&t);
            return MCR_ERR_NOMEM;
        }
        for (size_t i = 0; i < m; i++) {
            mcr_server_desc d;
            mcr_snapshot_server(other, i, &d);
            mcr__pool_server *s = same_server(p, by, n, &d);
            if (s == NULL)
                s = same_server(p, txb, i, &d);
            if (s == NULL && (s = mcr__server_new(p, &d)) == NULL) {
                free(txb);
                mcr_router_migration_clear(&t);
                return MCR_ERR_NOMEM;
            }
            s->mg_marked = 1;
            txb[i] = s;
        }
    }
    mcr_router_migration_clear(&p->tx);
    free(p->tx_by);
    p->tx = t;
    if (ph == MCR_MIGRATION_NONE)
        mcr_router_migration_clear(&p->tx);
    p->tx_phase = ph;
    p->tx_other = other;
    p->tx_by = txb;
    p->ntx_by = m;
    p->tx_deadline_ns = ph != MCR_MIGRATION_NONE && t.remaining_ms
                            ? mcr__now_ns() + t.remaining_ms * 1000000u
                            : 0;
    return MCR_OK;
}

int mcr__pool_refresh_slow(mcr_pool *p)
{
    /* The generation, not the epoch: a local state (an ejection) changes
     * the snapshot and keeps the epoch. Read before the snapshot, which is
     * then that generation's or a later one. */
    uint64_t g = mcr_router_generation(p->router);
    if (p->snap != NULL && g == p->gen &&
        (p->tx_deadline_ns == 0 || mcr__now_ns() < p->tx_deadline_ns))
        return MCR_OK;
    /* Gets queued for routing go by the snapshot (and migration) they
     * were submitted under, as if routed then. */
    if (p->route_head != NULL)
        mcr__route_pending(p);
    mcr_snapshot *snap = mcr_router_current(p->router);
    if (snap == NULL)
        return MCR_ERR_EMPTY;
    size_t n = mcr_snapshot_server_count(snap);
    mcr__pool_server **by = calloc(n ? n : 1, sizeof(*by));
    uint32_t *load = calloc(n ? n : 1, sizeof(*load));
    if (by == NULL || load == NULL) {
        free(by);
        free(load);
        mcr_snapshot_unref(snap);
        return MCR_ERR_NOMEM;
    }
    /* Keep the servers with the same id and address; mark the rest. */
    for (size_t i = 0; i < p->nservers; i++)
        p->servers[i]->mg_marked = 0;
    for (size_t i = 0; i < n; i++) {
        mcr_server_desc d;
        mcr_snapshot_server(snap, i, &d);
        mcr__pool_server *s = NULL;
        if (p->snap != NULL) {
            uint32_t oi = mcr_snapshot_find(p->snap, d.id);
            if (oi != MCR_NO_SERVER && (size_t)oi < p->nby) {
                mcr__pool_server *o = p->by_index[oi];
                if (o != NULL && !o->retired && o->port == d.port && strcmp(o->host, d.host) == 0)
                    s = o;
            }
        }
        if (s == NULL)
            s = same_server(p, NULL, 0, &d); /* kept for a migration until now */
        if (s == NULL) {
            s = mcr__server_new(p, &d);
            if (s == NULL) {
                free(by);
                free(load);
                mcr_snapshot_unref(snap);
                return MCR_ERR_NOMEM;
            }
        }
        s->mg_marked = 1;
        by[i] = s;
    }
    if (adopt_migration(p, snap, by, n) != MCR_OK) {
        for (size_t i = 0; i < p->nservers; i++)
            p->servers[i]->mg_marked = 0;
        free(by);
        free(load);
        mcr_snapshot_unref(snap);
        return MCR_ERR_NOMEM;
    }
    for (size_t i = 0; i < p->nservers;) {
        mcr__pool_server *s = p->servers[i];
        size_t before = p->nservers;
        if (!s->mg_marked && !s->retired)
            mcr__server_retire(s);
        if (p->nservers == before)
            i++;
    }
    if (p->snap != NULL)
        mcr_snapshot_unref(p->snap);
    free(p->by_index);
    free(p->load);
    p->snap = snap;
    p->by_index = by;
    p->nby = n;
    p->epoch = mcr_snapshot_epoch(snap);
    p->gen = g;
    /* The loads by the new indexes: what each server has pointing at it. */
    p->load = load;
    p->load_total = 0;
    for (size_t i = 0; i < p->nservers; i++) {
        p->servers[i]->idx = SIZE_MAX;
        p->servers[i]->counted = 0;
    }
    for (size_t i = 0; i < n; i++) {
        mcr_server_desc d;
        mcr_snapshot_server(snap, i, &d);
        by[i]->idx = i;
        by[i]->counted = d.state == MCR_STATE_ACTIVE;
        load[i] = by[i]->refs > UINT32_MAX ? UINT32_MAX : (uint32_t)by[i]->refs;
        if (by[i]->counted)
            p->load_total += load[i];
    }
    for (size_t i = 0; i < p->ntx_by; i++)
        p->tx_by[i]->mg_marked = 0;
    for (size_t i = 0; i < n; i++) {
        mcr_server_desc d;
        mcr_snapshot_server(snap, i, &d);
        mcr__pool_server *s = by[i];
        s->mg_marked = 0;
        s->inactive = d.state != MCR_STATE_ACTIVE;
        if (s->inactive)
            mcr__server_close_idle(s);
        if (d.state == MCR_STATE_ACTIVE && s->health == MCR_HEALTH_EJECTED && !s->probing &&
            !s->eject_pending) {
            /* Re-added by someone else (another pool or an operator cleared
             * the local state), or our local state is held (a publish left
             * it the last ACTIVE server): in use again. A held state of
             * ours goes, or it would take the server out later with no
             * probe to bring it back. */
            s->health = MCR_HEALTH_UP;
            s->consecutive = 0;
            event_del(s->retry_ev);
            if (s->overlay_set) {
                s->readd_pending = 1;
                p->ops_pending = 1;
                event_active(p->done_ev, EV_TIMEOUT, 0);
            }
        }
        if (p->o.eager && d.state == MCR_STATE_ACTIVE && s->health == MCR_HEALTH_UP)
            for (unsigned k = 0; k < p->o.connections; k++)
                if (s->conns[k] == NULL)
                    mcr__conn_open(s, (int)k);
    }
    return MCR_OK;
}

int mcr_pool_refresh(mcr_pool *p)
{
    if (p == NULL || p->freeing)
        return MCR_ERR_INVALID;
    return mcr__pool_refresh(p);
}

/* ------------------------------------------------------------ pool */

static void publish_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    mcr__pool_publish_counters(arg);
}

int mcr_pool_new(struct event_base *base, mcr_router *router, const mcr_pool_options *opts,
                 mcr_pool **out, mcr_error *err)
{
    if (base == NULL || router == NULL || out == NULL)
        return mcr__pool_fail(err, MCR_ERR_INVALID, "mcr_pool_new: NULL argument");
    mcr_pool_options o;
    int rc = mcr__pool_options_normalize(opts, &o, err);
    if (rc != MCR_OK)
        return rc;
    mcr_pool *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return mcr__pool_fail(err, MCR_ERR_NOMEM, "out of memory");
    p->base = base;
    p->router = router;
    p->o = o;
    if (o.key_prefix != NULL) {
        p->prefix_len = strlen(o.key_prefix);
        memcpy(p->prefix, o.key_prefix, p->prefix_len);
    }
    p->o.key_prefix = p->prefix;
    p->done_ev = event_new(base, -1, 0, pool_done_cb, p);
    p->flush_ev = event_new(base, -1, 0, mcr__conn_flush_cb, p);
    p->collect_ev = evtimer_new(base, collect_cb, p);
    if (p->done_ev == NULL || p->flush_ev == NULL || p->collect_ev == NULL) {
        if (p->done_ev != NULL)
            event_free(p->done_ev);
        if (p->flush_ev != NULL)
            event_free(p->flush_ev);
        if (p->collect_ev != NULL)
            event_free(p->collect_ev);
        free(p);
        return mcr__pool_fail(err, MCR_ERR_NOMEM, "out of memory");
    }
    mcr_state_status fed;
    if (mcr_router_state_status(router, &fed) == MCR_OK) { /* a router fed from a state */
        p->publish_ev = event_new(base, -1, EV_PERSIST, publish_cb, p);
        struct timeval tv = {MCR__PUBLISH_MS / 1000, (MCR__PUBLISH_MS % 1000) * 1000};
        if (p->publish_ev == NULL || event_add(p->publish_ev, &tv) != 0) {
            mcr_pool_free(p);
            return mcr__pool_fail(err, MCR_ERR_NOMEM, "out of memory");
        }
    }
    rc = mcr__pool_refresh(p);
    if (rc == MCR_ERR_NOMEM) {
        mcr_pool_free(p);
        return mcr__pool_fail(err, MCR_ERR_NOMEM, "out of memory");
    }
    *out = p;
    return MCR_OK;
}

void mcr_pool_free(mcr_pool *p)
{
    if (p == NULL)
        return;
    p->freeing = 1;
    if (p->publish_ev != NULL) { /* the last counts, kept with the state */
        event_free(p->publish_ev);
        mcr__pool_publish_counters(p);
        (void)mcr_router_state_unpublish(p->router, p);
    }
    /* Our ejections go with us: a server no pool probes any more is not
     * kept out of the ring. Blocking (the writer mutex, or the reclamation
     * bound): not the loop's hot path. Only a local DOWN still ours. */
    for (size_t i = 0; i < p->nservers; i++) {
        mcr__pool_server *s = p->servers[i];
        mcr_server_state st;
        if (s->overlay_set && !s->retired &&
            mcr_router_local_state(p->router, s->id, &st, NULL) == MCR_OK &&
            st == MCR_STATE_DOWN)
            (void)mcr_router_clear_local_state(p->router, s->id, 0, NULL);
        s->overlay_set = 0;
    }
    /* Cancel everything: in flight, waiting, deferred. */
    for (size_t i = 0; i < p->nservers; i++) {
        mcr__pool_server *s = p->servers[i];
        event_del(s->retry_ev);
        mcr__server_fail_waiting(s, MCR_ERR_CANCELLED, "pool freed");
        for (unsigned k = 0; k < p->o.connections; k++)
            if (s->conns[k] != NULL)
                mcr__conn_fail(s->conns[k], MCR_ERR_CANCELLED, "pool freed");
    }
    /* Gets not routed yet: cancelled where they wait. */
    while (p->route_head != NULL) {
        mcr__pool_req *r = p->route_head;
        p->route_head = r->next;
        r->status = MCR_ERR_CANCELLED;
        mcr__set_msg(r->message, "pool freed");
        mcr__finish_req(p, r);
    }
    p->route_tail = NULL;
    /* Those already failed and waiting to be reported (a down server, a
     * refused connection, a multi-get's bad key) are cancelled too: what
     * the callback has not heard yet is MCR_ERR_CANCELLED. */
    while (p->def_head != NULL) {
        mcr__pool_req *r = p->def_head;
        p->def_head = p->def_tail = NULL;
        while (r != NULL) {
            mcr__pool_req *n = r->next;
            if (r->status != MCR_ERR_CANCELLED) {
                r->status = MCR_ERR_CANCELLED;
                mcr__set_msg(r->message, "pool freed");
            }
            mcr__finish_req(p, r);
            r = n;
        }
    }
    while (p->nservers > 0)
        mcr__server_destroy(p->servers[p->nservers - 1]);
    free(p->servers);
    free(p->by_index);
    free(p->load);
    free(p->hot);
    mcr__req_free_all(p);
    free(p->mg_scratch);
    for (size_t i = 0; i < p->nunix; i++) {
        free(p->unix_paths[i].id);
        free(p->unix_paths[i].path);
    }
    free(p->unix_paths);
    if (p->snap != NULL)
        mcr_snapshot_unref(p->snap);
    mcr_router_migration_clear(&p->tx);
    free(p->tx_by);
    event_free(p->done_ev);
    event_free(p->flush_ev);
    event_free(p->collect_ev);
    /* What is left (grace periods not over) goes at the next collect by
     * any writer, or with the router. */
    (void)mcr_router_reclaim(p->router, MCR_ROUTER_NOWAIT, NULL);
    free(p);
}

int mcr_pool_set_unix_path(mcr_pool *p, const char *id, const char *path)
{
    if (p == NULL || id == NULL)
        return MCR_ERR_INVALID;
    struct sockaddr_un un;
    if (path != NULL && strlen(path) >= sizeof(un.sun_path))
        return MCR_ERR_TOO_LONG;
    size_t i = 0;
    while (i < p->nunix && strcmp(p->unix_paths[i].id, id) != 0)
        i++;
    if (path == NULL) {
        if (i < p->nunix) {
            free(p->unix_paths[i].id);
            free(p->unix_paths[i].path);
            p->unix_paths[i] = p->unix_paths[--p->nunix];
        }
    } else {
        char *cp = strdup(path);
        if (cp == NULL)
            return MCR_ERR_NOMEM;
        if (i < p->nunix) {
            free(p->unix_paths[i].path);
            p->unix_paths[i].path = cp;
        } else {
            char *cid = strdup(id);
            mcr__pool_unix *t = realloc(p->unix_paths, (p->nunix + 1) * sizeof(*t));
            if (cid == NULL || t == NULL) {
                free(cid);
                free(cp);
                if (t != NULL)
                    p->unix_paths = t;
                return MCR_ERR_NOMEM;
            }
            p->unix_paths = t;
            t[p->nunix].id = cid;
            t[p->nunix].path = cp;
            p->nunix++;
        }
    }
    /* Connections opened from now on resolve again. */
    for (size_t k = 0; k < p->nservers; k++)
        if (strcmp(p->servers[k]->id, id) == 0)
            p->servers[k]->addrlen = 0;
    return MCR_OK;
}

size_t mcr_pool_pending(const mcr_pool *p)
{
    return p == NULL ? 0 : p->pending;
}

/* 1 when called from inside a callback run by p's event loop: the loop
 * cannot be run again from there. libevent refuses re-entry (-1), which a
 * non-blocking pass detects; otherwise that pass just runs what is ready.
 * (event_base_get_running_event() would be the direct question, but
 * libevent 2.1.12 dereferences NULL there when no loop runs.) */
int mcr__pool_inside_loop(mcr_pool *p)
{
    return p->in_callback || (!p->own_loop && event_base_loop(p->base, EVLOOP_NONBLOCK) < 0);
}

int mcr_pool_set_own_loop(mcr_pool *p, int own)
{
    if (p == NULL)
        return MCR_ERR_INVALID;
    p->own_loop = own != 0;
    return MCR_OK;
}

int mcr_pool_wait(mcr_pool *p)
{
    if (p == NULL || mcr__pool_inside_loop(p))
        return MCR_ERR_INVALID;
    mcr__pool_flush_now(p);
    while (p->pending > 0)
        event_base_loop(p->base, EVLOOP_ONCE);
    return MCR_OK;
}

int mcr_pool_run_once(mcr_pool *p)
{
    if (p == NULL || mcr__pool_inside_loop(p))
        return MCR_ERR_INVALID;
    mcr__pool_flush_now(p);
    if (p->pending > 0)
        event_base_loop(p->base, EVLOOP_ONCE);
    return MCR_OK;
}
