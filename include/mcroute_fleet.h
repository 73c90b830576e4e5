/* SPDX-License-Identifier: BSD-3-Clause */
/* mcroute_fleet.h: one membership for a whole fleet: pools kept in etcd, changed by compare-and-swap, followed by every process.
 * Library: libmcroute_fleet, `pkg-config --cflags --libs mcroute-fleet` (it
 * links libmcroute, libevent and jansson; the application needs none of
 * them for this header).
 *
 * INTRODUCTION
 *
 * A pool is a named sequence of snapshots (mcroute_snapshot.h) kept in etcd
 * (version 3 API, over its JSON gateway: plain HTTP to the client URLs):
 *
 *   PREFIX NAME /snapshot      the pool's current snapshot, its canonical
 *                              text (mcr_snapshot_text()): epoch, servers
 *                              with ids, zones, weights and states, the
 *                              placement parameters, the checksum.
 *   PREFIX NAME /clients/ID    one key per process following the pool: the
 *                              epoch and checksum it has adopted, attached
 *                              to an etcd lease that the process keeps
 *                              alive, so a process that dies disappears by
 *                              itself when the lease expires.
 *
 * PREFIX is MCR_FLEET_PREFIX unless the options say otherwise.
 *
 * Changes. Every change is one compare-and-swap: read the snapshot and its
 * mod_revision, apply one change set (mcr_snapshot_apply(): epoch + 1),
 * write it only if the key's mod_revision is still the one read (an etcd
 * transaction), else read again and retry (a bounded number of times). Two
 * writers at the same moment never lose a change, and every successful
 * change is exactly one epoch. A pool that does not exist yet is created
 * (epoch 1) by mcr_fleet_publish() only; the other calls refuse a missing
 * pool (MCR_ERR_UNKNOWN).
 *
 * Following. mcr_fleet_follow() reads the pool, publishes its snapshot to
 * an mcr_router, then watches the key from the revision it read and
 * publishes each new epoch (hooks and diffs as for any publish). Every
 * value is checked first: a snapshot text that verifies (checksum, canonical
 * form), of an epoch above the current one; anything else (an edit by hand,
 * a deleted key, an older epoch) keeps the current snapshot and is reported
 * (callback and counters). It runs on a thread of its own with its own
 * libevent loop, so it never blocks the application's event loop; all it
 * does to the application is publish to the router.
 *
 * Health. A connection pool on the router (mcroute_pool.h) that ejects a
 * failing server does it as a local state of the router
 * (mcr_router_set_local_state()): the fleet's snapshot stays as etcd has
 * it, every new epoch is adopted with the local states applied on top, and
 * a network blip seen by one process does not reshape the ring of every
 * other. Writing them to etcd as well is an explicit option
 * (publish_local_states below), off by default.
 *
 * etcd trouble. Every request goes to one endpoint at a time; a failure
 * (refused, reset, timed out, an HTTP error) moves to the next endpoint of
 * the list, and after a round of failures the follower waits with backoff
 * (retry_min_ms doubling up to retry_max_ms) before the next round. A watch
 * resumes from the revision after the last one it saw; when etcd has
 * compacted that revision away, the follower reads the pool again. While
 * etcd is unreachable the router keeps the last good snapshot.
 *
 * Errors follow mcroute.h: MCR_OK or a negative status, details in an
 * optional mcr_error. Specific to this header: MCR_ERR_CONNECT (no endpoint
 * answered within wait_ms; the message names the endpoints and the last
 * error), MCR_ERR_UNKNOWN (no such pool), MCR_ERR_PROTOCOL (etcd answered
 * something that is not its API's reply), MCR_ERR_BUSY (a change kept
 * conflicting with other writers for `retries` attempts), and the snapshot
 * errors (MCR_ERR_CORRUPT, MCR_ERR_SYNTAX, ...) for a stored value that
 * does not verify, the message naming the key.
 */
#ifndef MCROUTE_FLEET_H
#define MCROUTE_FLEET_H

#include <stddef.h>
#include <stdint.h>

#include "mcroute.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The default key prefix: a pool NAME is kept under "/mcroute/pools/NAME/". */
#define MCR_FLEET_PREFIX "/mcroute/pools/"

/* The longest pool name and client id (bytes); both are 1 or more of
 * A-Z a-z 0-9 '.' '_' '-' ':' (so a key never needs quoting). */
#define MCR_FLEET_NAME_MAX 128

/* Where a pool is and how to talk to etcd; all-zero fields take the
 * defaults (mcr_fleet_options_init() writes them out). Strings are copied
 * by every call that takes the options. Times are at most
 * MCR_FLEET_LIMIT_S seconds and retries at most 10000 (else
 * MCR_ERR_INVALID naming the field). */
typedef struct mcr_fleet_options {
    /* Comma-separated etcd client URLs, "http://HOST:PORT" (the scheme may
     * be left out; https is not supported). Required. */
    const char *endpoints;
    /* The pool's name. Required. */
    const char *pool;
    /* The key prefix, ending in '/'. NULL: MCR_FLEET_PREFIX. */
    const char *prefix;
    /* One request to one endpoint, ms. 0: MCR_FLEET_REQUEST_TIMEOUT_MS. */
    unsigned request_timeout_ms;
    /* The most a blocking call (and mcr_fleet_follow()'s first read) keeps
     * trying the endpoints before it gives up with MCR_ERR_CONNECT, ms.
     * 0: MCR_FLEET_WAIT_MS. */
    unsigned wait_ms;
    /* Compare-and-swap attempts of one change before MCR_ERR_BUSY.
     * 0: MCR_FLEET_RETRIES. */
    unsigned retries;
} mcr_fleet_options;

/* The longest timeout, wait, lease or backoff the options take: one day
 * (MCR_ERR_INVALID above it). */
#define MCR_FLEET_LIMIT_S 86400u

#define MCR_FLEET_REQUEST_TIMEOUT_MS 2000u
#define MCR_FLEET_WAIT_MS 10000u
#define MCR_FLEET_RETRIES 32u

/* mcr_fleet_options_init: zero *o and set the defaults above. Cannot fail. */
MCR_EXTERN void mcr_fleet_options_init(mcr_fleet_options *o);

/* ==================================================================== */
/*  The store: blocking calls, for tools and operators                    */
/* ==================================================================== */

/* The blocking calls run their own short-lived event loop on the calling
 * thread and return within about wait_ms. They are thread-safe (each call
 * has its own connections) and must not be called from a libevent callback
 * of a loop that has to keep running meanwhile. */

/* mcr_fleet_read: the pool's current snapshot, verified as
 * mcr_snapshot_parse() verifies (*out, a new reference), and the etcd
 * revision it was read at (*revision, when not NULL). Errors (*out
 * unchanged): MCR_ERR_INVALID (NULL or malformed options: the message
 * names the field), MCR_ERR_CONNECT, MCR_ERR_UNKNOWN (no such pool),
 * MCR_ERR_PROTOCOL, MCR_ERR_NOMEM, and the errors of mcr_snapshot_parse()
 * for a value that does not verify. */
MCR_EXTERN int mcr_fleet_read(const mcr_fleet_options *o, mcr_snapshot **out,
                              uint64_t *revision, mcr_error *err);

/* mcr_fleet_change: apply `changes` to the pool's current snapshot and
 * store the result (epoch + 1) by compare-and-swap, retrying on conflict
 * with a fresh read (the changes are applied again to what the other
 * writer stored, so a change that no longer applies fails instead: an id
 * removed meanwhile is MCR_ERR_UNKNOWN). On success *epoch (when not NULL)
 * is the epoch stored. An empty change set stores nothing and returns the
 * current epoch. A write whose reply is lost is recognised as ours at the
 * next read (also when another writer built on it since). Errors: those of
 * mcr_fleet_read(), those of mcr_snapshot_apply() (nothing stored),
 * MCR_ERR_BUSY (still conflicting after `retries` attempts), and
 * MCR_ERR_CONNECT with a message starting "outcome unknown" when a write
 * was sent but etcd stopped answering before it could be told whether it
 * landed (read the pool before trying again). */
MCR_EXTERN int mcr_fleet_change(const mcr_fleet_options *o, const mcr_changes *changes,
                                uint64_t *epoch, mcr_error *err);

/* mcr_fleet_publish: make the servers of `cfg` the pool's next epoch: the
 * changes that turn the current snapshot into that list
 * (mcr_changes_between(), states kept for servers that stay), stored by
 * compare-and-swap as mcr_fleet_change() does; a list equal to the pool's
 * stores nothing. The pool keeps its placement parameters; those of `cfg`
 * must be the same (else MCR_ERR_INVALID naming the first that differs).
 * When the pool does not exist, it is created with the snapshot of `cfg`
 * (mcr_snapshot_new(), epoch 1), only if nobody created it meanwhile (else
 * as above). *epoch as for mcr_fleet_change(). */
MCR_EXTERN int mcr_fleet_publish(const mcr_fleet_options *o, const mcr_config *cfg,
                                 uint64_t *epoch, mcr_error *err);

/* mcr_fleet_publish_snapshot: make the servers of `snap`, with their
 * states, the pool's next epoch: the changes that turn the current
 * snapshot into that list (mcr_changes_between() with MCR_CHANGES_STATES),
 * computed again from each snapshot read, stored by compare-and-swap as
 * mcr_fleet_change() does; a list equal to the pool's stores nothing.
 * `snap`'s epoch is not used; its placement parameters must be the pool's
 * (else MCR_ERR_INVALID). A missing pool is MCR_ERR_UNKNOWN: create it with
 * mcr_fleet_publish(). *epoch as for mcr_fleet_change(). */
MCR_EXTERN int mcr_fleet_publish_snapshot(const mcr_fleet_options *o, const mcr_snapshot *snap,
                                          uint64_t *epoch, mcr_error *err);

/* One process following a pool, as it registered itself. */
typedef struct mcr_fleet_client {
    char *id;               /* the client id */
    uint64_t epoch;         /* the epoch it has adopted */
    char checksum[MCR_SNAPSHOT_CHECKSUM_LEN + 1];
    char *host;             /* as it says: host name, pid, library version */
} mcr_fleet_client;

/* mcr_fleet_clients: the processes registered under the pool (live
 * leases), sorted by id, as a new array *out of *count entries that
 * mcr_fleet_clients_free() releases (NULL and 0 when there are none). A
 * client value that does not parse is reported with epoch 0 and host
 * "invalid: <why>". Errors (*out unchanged): those of mcr_fleet_read(),
 * except MCR_ERR_UNKNOWN (a missing pool has no clients). */
MCR_EXTERN int mcr_fleet_clients(const mcr_fleet_options *o, mcr_fleet_client **out,
                                 size_t *count, mcr_error *err);

/* mcr_fleet_clients_free: release what mcr_fleet_clients() returned. NULL
 * is a no-op. */
MCR_EXTERN void mcr_fleet_clients_free(mcr_fleet_client *clients, size_t count);

/* ==================================================================== */
/*  Following a pool                                                     */
/* ==================================================================== */

typedef struct mcr_fleet mcr_fleet;

/* What a follower reports. */
typedef enum mcr_fleet_event_kind {
    MCR_FLEET_ADOPTED = 0,     /* a new epoch published to the router */
    MCR_FLEET_REFUSED = 1,     /* a value that does not verify, or not
                                  newer, or the key deleted: kept the
                                  current snapshot (status, err say why) */
    MCR_FLEET_DISCONNECTED = 2,/* the watch or a request failed on an
                                  endpoint (status, err); trying the next */
    MCR_FLEET_CONNECTED = 3,   /* a watch is established (again) */
    MCR_FLEET_RESYNC = 4,      /* the watch's revision was compacted: the
                                  pool is read again */
    MCR_FLEET_CACHED = 5,      /* started from the cache file (etcd was
                                  unreachable): epoch is the cached one */
    MCR_FLEET_REGISTER = 6,    /* the client key could not be written or
                                  its lease kept alive (status, err) */
    MCR_FLEET_CACHE = 7,       /* the cache file could not be written
                                  (status, err) */
    MCR_FLEET_HEALTH = 8       /* publish_local_states: a local state was
                                  written to etcd (status MCR_OK, epoch the
                                  new one), or could not be (status, err) */
} mcr_fleet_event_kind;

typedef struct mcr_fleet_event {
    mcr_fleet_event_kind kind;
    int status;            /* MCR_OK, or why (REFUSED, DISCONNECTED, REGISTER) */
    const mcr_error *err;  /* status != MCR_OK: the details; else NULL */
    uint64_t epoch;        /* the router's epoch after the event */
    uint64_t revision;     /* the etcd revision the event is about (0: none) */
    const char *endpoint;  /* the endpoint concerned, or NULL */
} mcr_fleet_event;

/* Called on the follower's thread; must not call mcr_fleet_free() on its
 * own follower. All pointers are valid during the call only. */
typedef void (*mcr_fleet_fn)(const mcr_fleet_event *ev, void *arg);

/* Follower settings; all-zero means the defaults. */
typedef struct mcr_fleet_follow_options {
    /* This process's client id (1 to MCR_FLEET_NAME_MAX bytes of the
     * pool-name alphabet). NULL: "HOSTNAME-PID". */
    const char *client_id;
    /* 1: do not register under clients/ (a read-only observer). */
    int no_register;
    /* The client key's lease, seconds (kept alive every third of it).
     * 0: MCR_FLEET_LEASE_TTL_S. 2 to MCR_FLEET_LIMIT_S. */
    unsigned lease_ttl_s;
    /* A file where the last good snapshot is saved (mcr_snapshot_save())
     * after each adoption, and from which mcr_fleet_follow() starts when
     * etcd does not answer within wait_ms. NULL: none. */
    const char *cache_file;
    /* Backoff between rounds of failed endpoints, ms. 0:
     * MCR_FLEET_RETRY_MIN_MS and MCR_FLEET_RETRY_MAX_MS. */
    unsigned retry_min_ms;
    unsigned retry_max_ms;
    /* Event callback (NULL: none) and its argument. */
    mcr_fleet_fn on_event;
    void *arg;
    /* 1: write the router's local states to etcd as well. A pool's
     * ejections (MCR_POLICY_EJECT) are local states of its router
     * (mcr_router_set_local_state()), seen by this process only, so that a
     * network blip between one application server and a memcached server
     * does not reshape the ring for every other: that is the default (0).
     * With 1, each local state in force (DOWN or DRAINING) is stored as the
     * server's state in the pool (mcr_fleet_change(), a new epoch for the
     * whole fleet), and when it is cleared (the pool re-added the server)
     * the server is stored ACTIVE again. Only the states this follower
     * wrote are restored; an operator's change in between is overwritten
     * by the restore. */
    int publish_local_states;
} mcr_fleet_follow_options;

#define MCR_FLEET_LEASE_TTL_S 10u
#define MCR_FLEET_RETRY_MIN_MS 50u
#define MCR_FLEET_RETRY_MAX_MS 2000u

/* mcr_fleet_follow: read the pool, publish its snapshot to `router` (unless
 * the router already holds that epoch and checksum), register this process
 * (unless no_register), and start the follower's thread, which watches the
 * pool and publishes each new epoch. When etcd does not answer within
 * wait_ms and fo->cache_file holds a snapshot that loads, the follower
 * starts from it instead (a MCR_FLEET_CACHED event, and a warning in *err
 * with status MCR_OK: "etcd unreachable, starting from cached epoch N")
 * and keeps trying etcd in the background. `router` must outlive the
 * follower; it may hold no snapshot yet. `fo` may be NULL (defaults).
 * Errors (nothing started, nothing published): MCR_ERR_INVALID (options),
 * MCR_ERR_CONNECT (etcd unreachable and no usable cache file; the message
 * says why the cache was not used), MCR_ERR_UNKNOWN (no such pool),
 * MCR_ERR_STALE (the router holds a newer epoch than the pool), the
 * errors of mcr_fleet_read(), MCR_ERR_NOMEM. */
MCR_EXTERN int mcr_fleet_follow(const mcr_fleet_options *o, const mcr_fleet_follow_options *fo,
                                mcr_router *router, mcr_fleet **out, mcr_error *err);

/* mcr_fleet_free: stop the follower's thread, delete its client key (bounded by
 * request_timeout_ms; the lease expires anyway) and free it. The router
 * keeps the last snapshot published. NULL is a no-op. Not from the
 * follower's own callback. */
MCR_EXTERN void mcr_fleet_free(mcr_fleet *f);

/* Counters of a follower (each only grows). */
typedef struct mcr_fleet_stats {
    uint64_t adopted;      /* epochs published to the router */
    uint64_t refused;      /* values kept out (MCR_FLEET_REFUSED) */
    uint64_t disconnects;  /* failed watches and requests */
    uint64_t resyncs;      /* compactions that forced a re-read */
    uint64_t requests;     /* HTTP requests sent to etcd */
    uint64_t watch_events; /* key events the watch delivered */
    uint64_t epoch;        /* the router's epoch as last published by it */
    uint64_t revision;     /* the last etcd revision seen */
    int connected;         /* 1 while a watch is established */
    int registered;        /* 1 while the client key is written and its lease alive */
} mcr_fleet_stats;

/* mcr_fleet_get_stats: a copy of the counters. Thread-safe; never blocks
 * on etcd (it takes the follower's short internal lock). */
MCR_EXTERN void mcr_fleet_get_stats(mcr_fleet *f, mcr_fleet_stats *out);

/* mcr_fleet_client_id: the client id the follower registers under (valid
 * until mcr_fleet_free()). */
MCR_EXTERN const char *mcr_fleet_client_id(const mcr_fleet *f);

#ifdef __cplusplus
}
#endif

#endif /* MCROUTE_FLEET_H */
