/* SPDX-License-Identifier: BSD-3-Clause */
/* test_router_util.h: what test_router.c, test_watcher.c and test_router_overlay.c share: snapshots and routers made for a test, a logging hook, and the readers of the publish storm. */
#ifndef MCR_TEST_ROUTER_UTIL_H
#define MCR_TEST_ROUTER_UTIL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "mcroute.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"

/* A snapshot of the servers in `list` (tu_config()) at `epoch`; the test
 * fails if it cannot be built. */
mcr_snapshot *snap_of(const char *list, mcr_mode mode, uint64_t epoch);

/* A router holding `initial` (NULL: none yet); the test fails otherwise. */
mcr_router *router_of(mcr_snapshot *initial);

void sleep_ms(unsigned ms);

/* What a hook saw. Written by the publishing thread, read after it. */
typedef struct hook_log {
    int calls;
    int bad;          /* calls whose arguments broke the contract */
    uint64_t last_old, last_new;
    double last_moved;
    int null_old;     /* calls with old == NULL (first snapshot) */
    int null_diff;    /* calls with an old snapshot but no diff */
} hook_log;

/* An mcr_router_hook recording into the hook_log `arg`. */
void log_hook(const mcr_snapshot *old_snap, const mcr_snapshot *new_snap, const mcr_diff *diff,
              void *arg);

/* A change set adding one active server. */
mcr_changes *changes_add(const char *host, int port, uint32_t weight);

/* A change set setting the weight of server `id`. */
mcr_changes *changes_weight(const char *id, uint32_t w);


/* Readers look keys up without pause while one writer publishes thousands
 * of snapshots. Bounded by count and time, so sanitizer and valgrind runs
 * stay short. Four readers and a writer: more threads than a small CI
 * machine has cores, so readers get preempted inside sections, which is
 * what makes grace periods long and interesting. The minimum
 * makes sure the storm really happened; a slow run (valgrind runs one
 * thread at a time, so each grace period waits for readers to be scheduled)
 * gets up to STRESS_MAX_MS to reach it. */
#define STRESS_READERS 4
#define STRESS_MAX_PUBLISHES 5000
#define STRESS_MIN_PUBLISHES 100
#define STRESS_MS 4000
#define STRESS_MAX_MS 16000
#define STRESS_KEYS 256

typedef struct stress {
    mcr_router *router;
    atomic_int stop;
    char keys[STRESS_KEYS][24];
    size_t key_len[STRESS_KEYS];
} stress;

typedef struct reader {
    stress *st;
    unsigned id;
    unsigned long lookups, sections, currents;
    unsigned long errors;
    char first_error[200];
} reader;

/* A reader thread (pthread_create() with a reader whose `st` is set): looks
 * keys of st up in every way the router offers until st->stop, checking
 * each answer; errors counted in the reader, the first one described. */
void *reader_main(void *arg);

#endif /* MCR_TEST_ROUTER_UTIL_H */
