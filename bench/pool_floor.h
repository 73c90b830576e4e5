/* SPDX-License-Identifier: BSD-3-Clause */
/* pool_floor.h: bench_pool's floor, a raw memcached client with no library (one epoll loop, one socket per server, text protocol) doing the pool's rounds. */
#ifndef MCR_POOL_FLOOR_H
#define MCR_POOL_FLOOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcroute_snapshot.h"

/*
 * What a hand-written event loop costs for the rounds bench_pool times,
 * with nothing a library adds: no callbacks, no per-request allocation, no
 * timers, no health. One epoll loop; one nonblocking TCP_NODELAY socket per
 * server of the snapshot (the pool's bench configuration has one
 * connection per server). Per wake it reads everything readable, parses
 * and checks every reply, queues the follow-up requests into a buffer per
 * server and then makes one write per server that has bytes pending.
 *
 * The wire is the pool's: pipelined text gets queued in one wake share one
 * "get k1 k2 ..." line per server of at most POOL_FLOOR_LINE_KEYS keys (as
 * lib/pool/conn.c joins them), a set is one "set" command, and a multi-get
 * sends one "get k1 .. kn" line per server holding some of its keys (at
 * most POOL_FLOOR_MGET_KEYS keys a line, as lib/pool/multiget.c). A key's
 * server is mcr_snapshot_locate() on the snapshot given for a set; the
 * gets queued in one wake, and a multi-get's keys, are routed in one
 * mcr_snapshot_locate_many() call, as the pool routes them: the only
 * mcroute calls in the timed functions, so that the floor and the pool pay
 * the same for placement.
 *
 * Checks, as bench_pool's pool checker: every get must hit, and its value
 * bytes, flags (the key's index) and key must be the expected ones; a key
 * answered twice or not asked is an error; every set must be STORED.
 * Problems go to the caller's `bad` function; after a protocol error, a
 * closed connection or a timeout the floor is unusable (every later run
 * fails at once).
 *
 * One thread; not thread-safe. Blocking connects at creation (untimed).
 */

/* Keys on one pipelined get line (lib/pool/conn.c's LINE_KEYS_MAX). */
#define POOL_FLOOR_LINE_KEYS 100
/* Keys of one server on one multi-get line (lib/pool/multiget.c's BATCH_MAX). */
#define POOL_FLOOR_MGET_KEYS 256

typedef struct pool_floor pool_floor;

/* The keys and values of a run, and where its results go. Key i's value
 * is val[i * value_len ..], its flags are i. */
typedef struct pool_floor_job {
    size_t nkeys;
    const char *const *key;
    const size_t *len;
    const char *val;
    size_t value_len;
    uint64_t *lat;        /* out: one latency (ns) per request / multi-get */
    unsigned timeout_ms;  /* no reply at all for this long: the run fails */
    /* A problem (a formatted message); ctx is the caller's. */
    void (*bad)(void *ctx, const char *msg);
    void *ctx;
} pool_floor_job;

/* Connects to every server of `snap` (which must outlive the floor; the
 * caller keeps its reference). NULL on failure, with a message in err. */
pool_floor *pool_floor_new(const mcr_snapshot *snap, char *err, size_t errlen);

/* Closes the sockets; NULL is fine. */
void pool_floor_free(pool_floor *f);

/* Requests for keys 0..n-1, `depth` in flight: each answer queues the next
 * key. Sets with `set` (values from job->val), else gets. job->lat[0..n)
 * gets each request's time from its queueing to the parse of its reply.
 * Returns the number of problems (0: every reply right). */
unsigned pool_floor_pipeline(pool_floor *f, const pool_floor_job *job, bool set, size_t n,
                             unsigned depth);

/* `total` multi-gets of `keys` consecutive keys (the j-th starts at key
 * (j % (nkeys / keys)) * keys), `depth` of them in flight; a multi-get is
 * done when every server it asked has answered END, and the next one
 * starts then. job->lat[0..total) gets each one's time. Returns the number
 * of problems. */
unsigned pool_floor_multiget(pool_floor *f, const pool_floor_job *job, size_t total,
                             unsigned keys, unsigned depth);

/* The floor's send(2) and read(2) calls that moved bytes, since it was
 * created (the pool's writes and reads in mcr_server_stats). */
void pool_floor_io(const pool_floor *f, uint64_t *writes, uint64_t *reads);

#endif
