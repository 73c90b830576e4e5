/* SPDX-License-Identifier: BSD-3-Clause */
/* follow_local.c: publish_local_states: the router's local states (a pool's ejections) written to etcd as the servers' states, and restored when they clear. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "follow_internal.h"

/* The router's hook (any writer's thread, its writer mutex held): only wake
 * the follower's thread, which reads the local states lock-free. */
void mcr__follow_health_hook(const mcr_snapshot *old_snap, const mcr_snapshot *new_snap,
                             const mcr_diff *diff, void *arg)
{
    (void)old_snap;
    (void)new_snap;
    (void)diff;
    mcr_fleet *f = arg;
    ssize_t w = write(f->health_pipe[1], "h", 1); /* full pipe: a wake-up is pending */
    (void)w;
}

/* Store one state in etcd; report either way. */
static int store_state(mcr_fleet *f, const char *id, mcr_server_state st)
{
    mcr_fleet_options o;
    mcr_fleet_options_init(&o);
    o.endpoints = f->c.endpoints;
    o.pool = f->c.pool;
    o.prefix = f->c.prefix;
    o.request_timeout_ms = f->c.request_timeout_ms;
    /* one round of endpoints: the thread has a watch to keep; a failure
     * is tried again after a backoff (sync_local_states) */
    o.wait_ms = f->c.request_timeout_ms;
    o.retries = f->c.retries;
    mcr_error err;
    mcr_changes *ch = mcr_changes_new();
    uint64_t epoch = 0;
    int rc = ch == NULL ? mcr__error(&err, MCR_ERR_NOMEM, "out of memory")
                        : mcr_changes_set_state(ch, id, st, &err);
    if (rc == MCR_OK)
        rc = mcr_fleet_change(&o, ch, &epoch, &err);
    mcr_changes_free(ch);
    if (rc != MCR_OK) {
        char m[MCR_ERROR_MESSAGE_SIZE];
        snprintf(m, sizeof(m), "%s", err.message);
        mcr__error(&err, rc, "local state of %s not written to etcd: %s", id, m);
    }
    mcr__follow_report(f, MCR_FLEET_HEALTH, rc, &err, epoch, NULL);
    return rc;
}

static void sync_local_states(mcr_fleet *f);

void mcr__follow_health_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    char b[64];
    while (read(fd, b, sizeof(b)) > 0)
        ;
    sync_local_states(arg);
}

void mcr__follow_health_poll_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    sync_local_states(arg);
}

/* Store what changed in the local states since the last look; after a
 * failed write, nothing until the backoff has passed. */
static void sync_local_states(mcr_fleet *f)
{
    uint64_t now = mcr__fleet_now_ms();
    if (now < f->health_next_ms)
        return;
    int failed = 0;
    mcr_local_state *ls = NULL;
    size_t n = 0;
    mcr_error err;
    if (mcr_router_local_states(f->router, &ls, &n, &err) != MCR_OK) {
        mcr__follow_report(f, MCR_FLEET_HEALTH, err.code, &err, 0, NULL);
        return;
    }
    /* In force and not stored yet (or stored with another state): store. */
    for (size_t i = 0; i < n; i++) {
        if (!ls[i].applied || ls[i].state == MCR_STATE_ACTIVE)
            continue;
        size_t k = 0;
        while (k < f->nwritten && strcmp(f->written[k].id, ls[i].id) != 0)
            k++;
        if (k < f->nwritten && f->written[k].state == ls[i].state)
            continue;
        if (store_state(f, ls[i].id, ls[i].state) != MCR_OK) {
            failed = 1;
            break;
        }
        if (k == f->nwritten) {
            struct written_state *w = realloc(f->written, (f->nwritten + 1) * sizeof(*w));
            char *id = strdup(ls[i].id);
            if (w == NULL || id == NULL) {
                free(id);
                if (w != NULL)
                    f->written = w;
                continue; /* not remembered: not restored either */
            }
            f->written = w;
            f->written[f->nwritten].id = id;
            f->nwritten++;
        }
        f->written[k].state = ls[i].state;
    }
    /* Stored, and no longer a local state in force: restore ACTIVE. */
    for (size_t k = 0; k < f->nwritten;) {
        size_t i = 0;
        while (i < n && !(strcmp(ls[i].id, f->written[k].id) == 0 && ls[i].applied &&
                          ls[i].state != MCR_STATE_ACTIVE))
            i++;
        if (i < n) {
            k++;
            continue;
        }
        int rc = failed ? MCR_ERR_CONNECT : store_state(f, f->written[k].id, MCR_STATE_ACTIVE);
        if (rc != MCR_OK && rc != MCR_ERR_UNKNOWN) { /* an id gone from the pool: done */
            failed = 1;
            k++;
            continue; /* tried again after the backoff */
        }
        free(f->written[k].id);
        f->written[k] = f->written[--f->nwritten];
    }
    mcr_router_local_states_free(ls);
    if (failed) {
        if (f->health_backoff_ms == 0)
            f->health_backoff_ms = f->retry_min_ms;
        f->health_next_ms = mcr__fleet_now_ms() + f->health_backoff_ms;
        f->health_backoff_ms = f->health_backoff_ms > f->retry_max_ms / 2
                                   ? f->retry_max_ms
                                   : f->health_backoff_ms * 2;
    } else {
        f->health_backoff_ms = 0;
    }
}
