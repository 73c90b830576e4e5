/* SPDX-License-Identifier: BSD-3-Clause */
/* follow_internal.h: the follower's state (struct mcr_fleet), shared by follow.c (the thread, the watch, the start), follow_report.c (its events and counters) and follow_local.c (local states written to etcd). */
#ifndef MCR_FOLLOW_INTERNAL_H
#define MCR_FOLLOW_INTERNAL_H

#include <event2/event.h>
#include <pthread.h>

#include "fleet_internal.h"

struct mcr_fleet {
    mcr__fleet_conf c;
    mcr__etcd e;                 /* requests (its own event_base) */
    struct event_base *wbase;    /* the watch, the timers, the stop pipe */
    mcr_router *router;
    pthread_t thread;
    int thread_started;
    int stop_pipe[2];            /* 'x': stop; 'a': register again */

    /* follow options, copied */
    char *client_id;
    char *client_key;            /* clients_prefix + client_id */
    char *cache_file;
    int no_register;
    unsigned ttl_s;
    unsigned retry_min_ms, retry_max_ms;
    mcr_fleet_fn fn;
    void *arg;
    char host_info[256];

    /* the follower's state (its thread only, after the start) */
    mcr_snapshot *cur;           /* what it published last (a reference) */
    char *params;                /* the placement parameters of the first
                                    snapshot it published (the pool's, for
                                    life): every later one must have them */
    size_t nparams;
    uint64_t revision;           /* the last revision seen: watch from + 1 */
    int need_read;               /* read the pool before watching */
    uint64_t lease;              /* 0: not registered */
    mcr__etcd_watch *watch;
    size_t watch_ep;             /* the endpoint it is on */
    int watch_created;           /* etcd confirmed it (a "created" message) */
    int watch_ended;             /* it ended or failed: restart it */
    int watch_end_status;        /* why (MCR_OK: not ended) */
    mcr_error watch_end_err;
    int resync;                  /* a compaction: read again, then watch */
    int reread;                  /* memory ran out taking a value in: read the
                                    pool again (after a backoff), then watch,
                                    so that no epoch is skipped */
    unsigned backoff_ms;
    struct event *stop_ev, *restart_ev, *keepalive_ev;

    /* The migration adopted (the record at c.migration_key): its id, phase
     * and epochs; mig_serial the router's migration we set (0: none). */
    mcr_migration_phase mig_phase;
    char mig_id[MCR_MIGRATION_ID_MAX + 1];
    uint64_t mig_from_epoch, mig_to_epoch;
    char mig_from_sum[MCR_SNAPSHOT_CHECKSUM_LEN + 1]; /* their checksums: a */
    char mig_to_sum[MCR_SNAPSHOT_CHECKSUM_LEN + 1];   /* record of the same
                                    snapshots continues what was checked */
    uint64_t mig_serial;
    mcr_migration_progress mig_progress; /* the record's, as read last */
    int reg_dirty;               /* the client key is to be written again */
    char *reg_last;              /* the value written last (its lease alive):
                                    the same value is not written again */

    /* publish_local_states: the router's hook wakes the thread through
     * health_pipe; `written` are the states it stored in etcd */
    int publish_local;
    int health_pipe[2];
    struct event *health_ev, *health_poll_ev;
    int hook_added;
    struct written_state {
        char *id;
        mcr_server_state state;
    } *written;
    size_t nwritten;
    uint64_t health_next_ms;     /* after a failed write: not before this */
    unsigned health_backoff_ms;

    pthread_mutex_t lock;        /* st, adoption */
    mcr_fleet_stats st;
    /* mcr_fleet_set_adoption(): registered instead of the follower's own
     * when `adoption_set`; a byte 'a' on the stop pipe wakes the thread to
     * write it. */
    int adoption_set;
    int adoption_wake;           /* an 'a' is in the pipe (at most one) */
    uint64_t adoption_revision;  /* f->revision when it was set: registered
                                    with it, so that the follower's own
                                    adoptions leave the value as it is */
    mcr_fleet_adoption adoption;
    char adoption_note[512];

    /* Events of the start (CACHED, CACHE, REGISTER), which happen on the
     * caller's thread in mcr_fleet_follow(): held until the follower's
     * thread delivers them, first thing. */
    int starting;
    size_t nheld;
    struct held_event {
        mcr_fleet_event_kind kind;
        int status;
        mcr_error err;
        uint64_t revision;
        char endpoint[300];
        int has_endpoint;
    } held[6];
};

/* publish_local_states: how often the local states are looked at besides
 * the router's hook, ms (a lock-free read of a few entries). */
#define HEALTH_POLL_MS 200

/* ---- follow_report.c: events and counters (any of the follower's code) */

/* *field += n under f->lock. */
void mcr__follow_stat_add(mcr_fleet *f, uint64_t *field, uint64_t n);
/* The counters that mirror the follower's state, brought up to date. */
void mcr__follow_sync_stats(mcr_fleet *f);
/* An event to the callback, on the follower's thread (one of the start is
 * held until the thread delivers it); the counters synced first. */
void mcr__follow_report(mcr_fleet *f, mcr_fleet_event_kind kind, int status, const mcr_error *err,
                        uint64_t revision, const char *endpoint);

/* ---- follow_local.c: publish_local_states */

/* The router's hook: wakes the follower's thread through health_pipe. */
void mcr__follow_health_hook(const mcr_snapshot *old_snap, const mcr_snapshot *new_snap,
                             const mcr_diff *diff, void *arg);
/* health_pipe readable, and the HEALTH_POLL_MS timer: store the local
 * states that changed (on the follower's thread). */
void mcr__follow_health_cb(evutil_socket_t fd, short what, void *arg);
void mcr__follow_health_poll_cb(evutil_socket_t fd, short what, void *arg);

#endif
