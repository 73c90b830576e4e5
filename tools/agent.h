/* SPDX-License-Identifier: BSD-3-Clause */
/* agent.h: what mcroute agent's files share: the agent (agent.c: the pool followed into the shared state, the processes' adoption registered) and its metrics (agent_metrics.c: the Prometheus text, served over HTTP). */
#ifndef MCR_AGENT_H
#define MCR_AGENT_H

#include <stdint.h>

#include <event2/event.h>
#include <event2/http.h>

#include "mcroute.h"
#include "mcroute_fleet.h"
#include "mcroute_router.h"
#include "mcroute_state.h"

/* What the agent wrote last into the state. */
typedef struct agent_written {
    uint64_t generation;
    uint64_t epoch;
    char checksum[MCR_SNAPSHOT_CHECKSUM_LEN + 1];
    mcr_migration_phase phase;
    char migration_id[MCR_HOST_STATE_ID_MAX + 1];
    uint64_t from_epoch, to_epoch;
    int64_t at_ms; /* CLOCK_REALTIME */
} agent_written;

typedef struct agent {
    const char *pool;
    const char *path;
    mcr_state_writer *writer;
    mcr_router *router;
    mcr_fleet *fleet;
    agent_written last;
    int written;               /* last is set */
    uint64_t write_errors;     /* states that could not be written */
    int write_failed;          /* the last write failed */
    char warned[600];          /* the last warning, and when (monotonic) */
    int64_t warned_ms;
    mcr_state_process *procs;  /* as read at the last tick */
    size_t nprocs;
    size_t behind;             /* of them, on an older generation */
    mcr_fleet_adoption reg;    /* registered last */
    char reg_note[512];
    int reg_set;
    int64_t reg_ms;            /* when (CLOCK_MONOTONIC) */
    struct event_base *base;
    struct event *tick, *sigint, *sigterm;
    struct evhttp *http;
} agent;

/* Serve the metrics at `addr` ("HOST:PORT", "[V6]:PORT"; port 0 picks
 * one): prints the URL on stdout. Exits EXIT_USAGE on a bad address,
 * EXIT_FAILED when it cannot listen. */
void agent_metrics_start(agent *a, const char *addr);

/* The Prometheus text exposition of the agent's state into a new buffer
 * (malloc'ed, NUL-terminated), or NULL when out of memory. */
char *agent_metrics_text(const agent *a);

#endif
