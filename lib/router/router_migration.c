/* SPDX-License-Identifier: BSD-3-Clause */
/* router_migration.c: a router's migration (the snapshots a resize moves keys between, its deadline), set, ended and read under its own mutex. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "placement/placement_internal.h"
#include "mcroute_router.h"
#include "router_internal.h"

/* ---- migrations ---- */

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Drop an expired migration; trans_mu held. 1 when one is in force. */
static int transition_live(mcr_router *router, uint64_t now)
{
    if (router->t_to == NULL)
        return 0;
    if (router->t_deadline_ns != 0 && now >= router->t_deadline_ns) {
        mcr_snapshot_unref(router->t_from);
        mcr_snapshot_unref(router->t_to);
        router->t_from = router->t_to = NULL;
        atomic_fetch_add_explicit(&router->generation, 1, memory_order_release);
        return 0;
    }
    return 1;
}

int mcr_router_set_migration(mcr_router *router, const mcr_snapshot *from,
                              const mcr_snapshot *to, uint64_t grace_ms, unsigned flags,
                              mcr_error *err)
{
    if (router == NULL || from == NULL || to == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "mcr_router_set_migration: NULL argument");
    if (mcr_snapshot_epoch(to) <= mcr_snapshot_epoch(from))
        return mcr__error(err, MCR_ERR_INVALID,
                          "a migration goes to a higher epoch: from epoch %llu to epoch %llu",
                          (unsigned long long)mcr_snapshot_epoch(from),
                          (unsigned long long)mcr_snapshot_epoch(to));
    if ((flags & ~MCR_MIGRATION_FLAG_CLOSING) != 0)
        return mcr__error(err, MCR_ERR_INVALID, "unknown migration flags 0x%x", flags);
    if (grace_ms > UINT64_MAX / 2000000u)
        grace_ms = UINT64_MAX / 2000000u;
    uint64_t now = mono_ns();
    pthread_mutex_lock(&router->trans_mu);
    mcr_snapshot *of = router->t_from, *ot = router->t_to;
    router->t_from = mcr_snapshot_ref(from);
    router->t_to = mcr_snapshot_ref(to);
    router->t_flags = flags;
    router->t_deadline_ns = grace_ms ? now + grace_ms * 1000000u : 0;
    router->t_serial++;
    atomic_fetch_add_explicit(&router->generation, 1, memory_order_release);
    pthread_mutex_unlock(&router->trans_mu);
    mcr_snapshot_unref(of);
    mcr_snapshot_unref(ot);
    return MCR_OK;
}

int mcr_router_clear_migration(mcr_router *router)
{
    if (router == NULL)
        return MCR_ERR_INVALID;
    pthread_mutex_lock(&router->trans_mu);
    if (!transition_live(router, mono_ns())) {
        pthread_mutex_unlock(&router->trans_mu);
        return MCR_ERR_EMPTY;
    }
    mcr_snapshot *of = router->t_from, *ot = router->t_to;
    router->t_from = router->t_to = NULL;
    atomic_fetch_add_explicit(&router->generation, 1, memory_order_release);
    pthread_mutex_unlock(&router->trans_mu);
    mcr_snapshot_unref(of);
    mcr_snapshot_unref(ot);
    return MCR_OK;
}

int mcr_router_get_migration(mcr_router *router, mcr_router_migration *out)
{
    if (out != NULL)
        memset(out, 0, sizeof(*out));
    if (router == NULL || out == NULL)
        return MCR_ERR_INVALID;
    mcr__router_state_check(router);
    uint64_t now = mono_ns();
    pthread_mutex_lock(&router->trans_mu);
    if (!transition_live(router, now)) {
        pthread_mutex_unlock(&router->trans_mu);
        return MCR_ERR_EMPTY;
    }
    out->from = mcr_snapshot_ref(router->t_from);
    out->to = mcr_snapshot_ref(router->t_to);
    out->flags = router->t_flags;
    out->serial = router->t_serial;
    if (router->t_deadline_ns != 0) {
        uint64_t left = (router->t_deadline_ns - now + 999999u) / 1000000u;
        out->remaining_ms = left ? left : 1;
    }
    pthread_mutex_unlock(&router->trans_mu);
    return MCR_OK;
}

void mcr_router_migration_clear(mcr_router_migration *t)
{
    if (t == NULL)
        return;
    mcr_snapshot_unref(t->from);
    mcr_snapshot_unref(t->to);
    memset(t, 0, sizeof(*t));
}

mcr_migration_phase mcr_migration_phase_at(const mcr_router_migration *t, uint64_t epoch)
{
    if (t == NULL || t->from == NULL || t->to == NULL)
        return MCR_MIGRATION_NONE;
    if (epoch >= mcr_snapshot_epoch(t->to))
        return (t->flags & MCR_MIGRATION_FLAG_CLOSING) ? MCR_MIGRATION_CLOSING : MCR_MIGRATION_SWITCHED;
    if (epoch >= mcr_snapshot_epoch(t->from))
        return MCR_MIGRATION_COPYING;
    return MCR_MIGRATION_NONE;
}
