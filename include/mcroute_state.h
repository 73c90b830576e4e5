/* SPDX-License-Identifier: BSD-3-Clause */
/* mcroute_state.h: a host's shared state: one agent per host writes the pool's snapshot and migration, and every process on the host follows it with no thread of its own and no system call on its lookups.
 * Library: libmcroute, `pkg-config --cflags --libs mcroute`.
 *
 * INTRODUCTION
 *
 * Web tiers run many processes per host (PHP-FPM pools, gunicorn or
 * unicorn workers, nginx workers), often hundreds and often short-lived.
 * Following a pool in etcd (mcroute_fleet.h) costs each follower a thread,
 * a watch, a lease and a registration, and etcd one write per follower per
 * change. With a shared state, one process per host follows etcd (the
 * agent: `mcroute agent`, or a program of its own with the writer below)
 * and writes what it adopted into the state; every other process opens a
 * router fed from the state (mcr_router_new_from_state()), which notices a
 * change with one load from shared memory on its next call and loads it
 * then: no watch, no timer, no thread of the library's to follow (the one
 * thread a router has is liburcu's call_rcu thread, which reclaims what a
 * publish replaced, from the first adoption on). A process that forks
 * (a prefork server's master) needs nothing more: the state's routers
 * follow liburcu-bp's fork protocol for it (pthread_atfork(3)). Each process records in the state what it adopted, so the agent
 * can tell etcd the host's slowest process and a resize waits for every
 * process, not only for the agent.
 *
 * Files. A state is two files side by side, typically on tmpfs (the
 * agent's systemd unit puts them under /run/mcroute/):
 *
 *   PATH       the state: the pool's current snapshot and migration as
 *              text, ended by an MD5 checksum (format below). The agent
 *              replaces it whole (a new file renamed over it), so a reader
 *              sees the old state or the new one, never a mix; a state that
 *              does not verify is refused and the last good one kept.
 *              Readable by itself: mcr_state_read(), `mcroute ... --state
 *              PATH`.
 *   PATH.shm   shared memory: a generation the agent raises after each
 *              state it writes, and one slot per process that follows the
 *              state, written only by that process, read by the agent. Its
 *              mode and group (the writer's options) decide who may
 *              follow: a follower must be able to write its slot.
 *
 * The state file, version 1, every line ending in "\n":
 *
 *   mcroute-state 1
 *   generation G            the write's generation, 1 and up
 *   pool NAME               1..128 bytes of A-Z a-z 0-9 . _ - :
 *   written MS              the writer's clock, ms since 1970
 *   migration none          or: migration ID PHASE FROM_EPOCH TO_EPOCH
 *   snapshot N              then N bytes: the snapshot's canonical text
 *   from N                  (a migration in phase copying, switched, grace
 *   to N                     or closing only) each followed by N bytes:
 *                            the migration's snapshots
 *   checksum HEX            MD5 of every byte before this line, 32 hex
 *
 * ID is the migration's id (1..MCR_HOST_STATE_ID_MAX bytes of the pool-name
 * alphabet), PHASE its phase's name (mcr_migration_phase_name(), not
 * "none"), FROM_EPOCH and TO_EPOCH the epochs of its snapshots, TO above
 * FROM. Numbers are decimal without leading zeros. Nothing follows the
 * checksum line. Each snapshot verifies as mcr_snapshot_parse() checks it,
 * with `to` and `from` of the same placement parameters.
 *
 * Errors follow mcroute.h. Specific here: MCR_ERR_CORRUPT (a checksum that
 * does not match; a PATH.shm that is not a state's), MCR_ERR_SYNTAX (a state file not in the format above,
 * the message naming the line), MCR_ERR_IO (a file that cannot be read or
 * written), MCR_ERR_SYSTEM (shared memory that cannot be created, opened,
 * locked or mapped: err->sys_errno), MCR_ERR_BUSY (another writer holds
 * the state).
 */
#ifndef MCROUTE_STATE_H
#define MCROUTE_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "mcroute.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The longest pool name and migration id a state holds (bytes). */
#define MCR_HOST_STATE_POOL_MAX 128
#define MCR_HOST_STATE_ID_MAX 32

/* ==================================================================== */
/*  The state file                                                       */
/* ==================================================================== */

/* What a state says. Filled by mcr_state_read() and mcr_state_parse()
 * (which take references to its snapshots: mcr_state_info_clear()). */
typedef struct mcr_state_info {
    uint64_t generation;
    char pool[MCR_HOST_STATE_POOL_MAX + 1];
    uint64_t written_ms;
    mcr_snapshot *snapshot;   /* the pool's current snapshot */
    /* The pool's migration: MCR_MIGRATION_NONE, or its phase, id and
     * epochs; `from` and `to` are set in phases COPYING to CLOSING (the
     * phases in which processes route through a migration), else NULL. */
    mcr_migration_phase phase;
    char migration_id[MCR_HOST_STATE_ID_MAX + 1];
    uint64_t from_epoch, to_epoch;
    mcr_snapshot *from, *to;
    uint64_t reserved[4]; /* zeroed; room for later fields (mcroute.h) */
} mcr_state_info;

/* mcr_state_parse: check `len` bytes of state text (not NUL-terminated,
 * only read) and fill *out. `name` says where the text comes from in
 * messages (NULL: "state"). Errors (*out zeroed): MCR_ERR_SYNTAX,
 * MCR_ERR_CORRUPT, MCR_ERR_RANGE (a number out of range), the errors of
 * mcr_snapshot_parse() for its snapshots, MCR_ERR_INVALID (NULL `out`, or
 * NULL text with len > 0), MCR_ERR_NOMEM. Thread-safe. */
MCR_EXTERN int mcr_state_parse(const char *text, size_t len, const char *name,
                               mcr_state_info *out, mcr_error *err);

/* mcr_state_read: mcr_state_parse() of the file at `path` (*out zeroed
 * on every error). MCR_ERR_IO when it cannot be read, or is larger than
 * 256 MiB (err->message says why: a missing file names the agent).
 * Thread-safe. */
MCR_EXTERN int mcr_state_read(const char *path, mcr_state_info *out, mcr_error *err);

/* mcr_state_info_clear: drop the references of *info and zero it. NULL is a
 * no-op. */
MCR_EXTERN void mcr_state_info_clear(mcr_state_info *info);

/* ==================================================================== */
/*  Writing a state (the agent)                                          */
/* ==================================================================== */

typedef struct mcr_state_writer mcr_state_writer;

/* Writer settings; all-zero means the defaults. */
typedef struct mcr_state_writer_options {
    /* Slots, the most processes that follow the state at once (a process
     * that finds none routes all the same, but is not counted: its status
     * says so). 0: MCR_HOST_STATE_SLOTS. 1 to MCR_HOST_STATE_SLOTS_MAX. Used when
     * PATH.shm is created; an existing one keeps its own when this is 0,
     * and is replaced (its followers move to the new one) when it has
     * another number. */
    unsigned slots;
    /* Permission bits of both files (PATH.shm gets them with the write bits
     * of `mode`, PATH without any write bit but the owner's), set at every
     * open and write (also on a PATH.shm that is kept). 0:
     * MCR_HOST_STATE_MODE. Followers must be able to write PATH.shm: run
     * them under a user of the files' group, or use 0666. */
    unsigned mode;
    /* 1: give both files the group `gid` (the writer must be a member of
     * it, or root); 0: they keep the writer's group. */
    int set_gid;
    unsigned gid;
    /* Servers whose counters each process publishes (and the processes
     * that left keep, added up): a pool of more servers publishes the
     * first this many it reports, and the updates of the others are
     * counted as dropped (mcr_state_counters_dropped()). 0:
     * MCR_HOST_STATE_COUNTER_SERVERS; 1 to MCR_HOST_STATE_COUNTER_SERVERS_MAX.
     * Used when PATH.shm is created, and kept or replaced as `slots` is
     * (the counts of the processes that left go with a replaced one).
     * PATH.shm's size grows with slots x counter_servers x 256 bytes, of
     * which the memory in use is that of the servers reported (the rest is
     * never touched). */
    unsigned counter_servers;
    unsigned pad_;        /* zero */
    uint64_t reserved[3]; /* zero; room for later fields (mcroute.h) */
} mcr_state_writer_options;

#define MCR_HOST_STATE_SLOTS 4096u
#define MCR_HOST_STATE_SLOTS_MAX 65536u
#define MCR_HOST_STATE_COUNTER_SERVERS 256u
#define MCR_HOST_STATE_COUNTER_SERVERS_MAX 16384u
#define MCR_HOST_STATE_MODE 0660u

/* mcr_state_writer_open: become the writer of the state at `path`: open
 * (or create) PATH.shm, hold an exclusive lock on it while the writer
 * lives, and map it. An existing PATH.shm of the same layout is kept, its
 * generation and slots with it, so that processes that follow it go on
 * following a restarted agent; one of another layout (or not a state's) is
 * replaced, and its followers told to open the new one. PATH itself is
 * written by mcr_state_write() only. `o` may be NULL (defaults). Errors:
 * MCR_ERR_INVALID (arguments, options), MCR_ERR_BUSY (another writer holds
 * the lock), MCR_ERR_SYSTEM (create, lock, size or map failed; the message
 * names the file), MCR_ERR_NOMEM. */
MCR_EXTERN int mcr_state_writer_open(const char *path, const mcr_state_writer_options *o,
                                     mcr_state_writer **out, mcr_error *err);

/* What mcr_state_write() writes. */
typedef struct mcr_state_content {
    const char *pool;              /* the pool's name; required */
    const mcr_snapshot *snapshot;  /* the current snapshot; required */
    /* The migration, as the fleet's record says (mcroute_fleet.h):
     * MCR_MIGRATION_NONE, or its phase and id; in phases COPYING to
     * CLOSING its snapshots (required), in PLANNED, DONE and ABORTED its
     * snapshots or, when they are NULL, their epochs from_epoch and
     * to_epoch. to's epoch is above from's. */
    mcr_migration_phase phase;
    const char *migration_id;
    const mcr_snapshot *from, *to;
    uint64_t from_epoch, to_epoch;
    uint64_t reserved[4]; /* zero; room for later fields (mcroute.h) */
} mcr_state_content;

/* mcr_state_write: write `c` as the next generation: the text to a new
 * file beside PATH, flushed, renamed over PATH, then the generation in
 * PATH.shm raised. Returns the new generation in *generation (may be
 * NULL). On any error PATH and the generation are as they were. Errors:
 * MCR_ERR_INVALID (arguments, a name out of its alphabet, a migration
 * without its snapshots, with epochs in the wrong order or snapshots of
 * other placement parameters), MCR_ERR_IO (the file not written, or its
 * mode or group not set: the message says why), MCR_ERR_NOMEM. Not
 * thread-safe on one writer. */
MCR_EXTERN int mcr_state_write(mcr_state_writer *w, const mcr_state_content *c,
                               uint64_t *generation, mcr_error *err);

/* A process that follows the state, as its slot says. */
typedef struct mcr_state_process {
    uint32_t pid;
    uint32_t slot;
    uint64_t generation;      /* the state it adopted last (0: none yet) */
    uint64_t epoch;           /* that state's snapshot epoch */
    char checksum[MCR_SNAPSHOT_CHECKSUM_LEN + 1];
    mcr_migration_phase phase; /* and its migration */
    char migration_id[MCR_HOST_STATE_ID_MAX + 1];
    uint64_t to_epoch;
    uint64_t adopted_ns;      /* when, CLOCK_REALTIME */
    uint64_t refused;         /* states it refused (did not verify) */
    int last_refusal;         /* the status of the last one, MCR_OK: none */
    uint64_t reserved[4];     /* zeroed; room for later fields (mcroute.h) */
} mcr_state_process;

/* mcr_state_processes: the live processes that follow the state, by slot,
 * as a new array *out of *count entries (mcr_state_processes_free();
 * NULL and 0 when there are none). Slots of processes that have died are
 * freed on the way: a process frees its slot when it frees its router,
 * and the slot of one that exited (or exec'd) without doing so is freed
 * here, or taken over by a process that finds no free slot. A process is
 * alive while its pid is, with the start time it had (kill(2) and
 * /proc/PID/stat): the writer and the processes must share a PID
 * namespace. Errors: MCR_ERR_INVALID, MCR_ERR_NOMEM. Not thread-safe on
 * one writer. */
MCR_EXTERN int mcr_state_processes(mcr_state_writer *w, mcr_state_process **out, size_t *count,
                                   mcr_error *err);

/* mcr_state_processes_free: free an array of mcr_state_processes(). NULL
 * is a no-op. */
MCR_EXTERN void mcr_state_processes_free(mcr_state_process *p);

/* Latency bounds of the counters' histogram (the buckets of
 * mcr_pool_metrics()). */
#define MCR_HOST_STATE_BUCKETS 16

/* One server's counters added up over the processes that follow the
 * state: what their pools published, with those of processes gone. */
typedef struct mcr_state_server_counters {
    char id[256];             /* the server's id; "#HEX" (the id's hash) for
                                 one no state written by this writer named */
    uint64_t requests, hits, misses, errors, timeouts, connect_failures, ejections;
    uint64_t fallback_reads, fallback_hits;
    uint64_t latency_count;   /* replies measured */
    double latency_sum_s;     /* their time from send to reply, seconds */
    uint64_t buckets[MCR_HOST_STATE_BUCKETS]; /* replies within each bound */
    double bounds_s[MCR_HOST_STATE_BUCKETS];  /* the bounds, seconds */
    uint64_t reserved[4];     /* zeroed; room for later fields (mcroute.h) */
} mcr_state_server_counters;

/* mcr_state_counters: the counters of every server, added up over the
 * processes that follow the state, as a new array *out of *count entries
 * (mcr_state_counters_free()). Each process publishes its own into its
 * slot (mcr_router_state_publish(); a pool on a router fed from the state
 * does twice a second); when a process leaves (frees its router, exits or
 * dies) its counts are kept with the state, so every total only grows
 * while PATH.shm lives (a read made while a process leaves may see its
 * counts twice or not at all, once). Errors: MCR_ERR_INVALID,
 * MCR_ERR_NOMEM. Not thread-safe on one writer. */
MCR_EXTERN int mcr_state_counters(mcr_state_writer *w, mcr_state_server_counters **out,
                                  size_t *count, mcr_error *err);

/* mcr_state_counters_free: free an array of mcr_state_counters(). NULL is
 * a no-op. */
MCR_EXTERN void mcr_state_counters_free(mcr_state_server_counters *c);

/* mcr_state_counters_dropped: counter updates of servers beyond
 * `counter_servers` (mcr_state_writer_options) that PATH.shm did not keep,
 * since it was created; 0 while every pool's servers fit. Cannot fail. */
MCR_EXTERN uint64_t mcr_state_counters_dropped(const mcr_state_writer *w);

/* mcr_state_writer_generation: the generation last written (by this
 * writer or the one before it; 0: none). */
MCR_EXTERN uint64_t mcr_state_writer_generation(const mcr_state_writer *w);

/* mcr_state_writer_free: release the lock and unmap. PATH and PATH.shm
 * stay: followers keep the last state until a writer comes back. NULL is
 * a no-op. */
MCR_EXTERN void mcr_state_writer_free(mcr_state_writer *w);

/* ==================================================================== */
/*  Following a state                                                    */
/* ==================================================================== */

/* Flags of mcr_router_new_from_state(). */
#define MCR_HOST_STATE_OBSERVE 1u /* follow without a slot (PATH.shm opened read
                                only): a tool that looks, and that the
                                agent must not wait for */

/* mcr_router_new_from_state: a router that follows the state at `path`.
 * It starts with the state's snapshot (and migration, if one is in force)
 * and claims a slot in PATH.shm. Then the calls that read the router's
 * snapshot or migration (mcr_router_acquire(), mcr_router_locate(),
 * mcr_router_locate_index(), mcr_router_current(), mcr_router_published(),
 * mcr_router_epoch(), mcr_router_generation(), mcr_router_get_migration();
 * so every pool request on it) first compare the generation in PATH.shm
 * with the one they saw: one load. When they differ, that call (unless
 * it is made inside a read-side section, between mcr_router_acquire() and
 * mcr_router_release(), where a publish is not allowed: then a later call
 * does it) reads PATH, checks it and sets its migration
 * (mcr_router_set_migration(), with MCR_MIGRATION_FLAG_CLOSING in phase
 * closing) before it publishes its snapshot, ends the migration it set
 * when the state has none in force, and records what it adopted in its
 * slot. Only one thread loads at a time; a call made meanwhile on another
 * thread goes on with the previous snapshot. A state that does not verify,
 * or whose epoch is not above the one the router holds, is refused: the
 * router keeps what it has (snapshot and migration), the refusal is
 * counted in the slot and in mcr_router_state_status(), and the next
 * generation is tried. A process forked after the router was made follows
 * on its own: its first call claims a slot of its own. A process that
 * makes no call adopts nothing: it is behind until its next call, and
 * holds the agent's registration (so a resize) back meanwhile; an idle
 * worker calls mcr_router_generation() now and then, or frees its router.
 *
 * The router is an ordinary one otherwise (pools, hooks, local states);
 * a snapshot published by hand stays until the state's epoch goes past
 * it (the states before that are refused as stale). Errors (nothing
 * made): MCR_ERR_INVALID, MCR_ERR_IO and the errors of mcr_state_read()
 * (no usable state yet), MCR_ERR_SYSTEM (PATH.shm missing, not writable
 * without MCR_HOST_STATE_OBSERVE, or not mappable: the message names the
 * file and the agent), MCR_ERR_CORRUPT (PATH.shm is not a state's shared
 * memory), MCR_ERR_NOMEM. */
MCR_EXTERN int mcr_router_new_from_state(const char *path, unsigned flags, mcr_router **out,
                                         mcr_error *err);

/* mcr_router_state_publish: publish the counters of `n` servers of this
 * process into its slot of the state, where mcr_state_counters() adds
 * them up (the agent's /metrics). Each entry replaces what was published
 * for that id before (counters only grow: publish totals, not
 * increments); the slot holds the state's counter_servers
 * (mcr_state_writer_options, 256 by default), the others are dropped and
 * counted (mcr_state_counters_dropped()).
 * `writer` identifies the one publisher of the process (a pool passes
 * itself: mcr_pool_new() on such a router publishes twice a second and at
 * mcr_pool_free()); another writer is MCR_ERR_BUSY until the first
 * unpublishes. bounds_s of every entry must be the state's
 * (MCR_HOST_STATE_BUCKETS values: 50, 100, 250, 500 us, 1, 2.5, 5, 10, 25,
 * 50, 100, 250, 500 ms, 1, 2.5, 5 s). Errors: MCR_ERR_INVALID (NULL, a
 * router that follows no state, other bounds), MCR_ERR_EMPTY (the process
 * has no slot), MCR_ERR_BUSY. Thread-safe (takes the state's mutex). */
MCR_EXTERN int mcr_router_state_publish(mcr_router *router, const void *writer,
                                        const mcr_state_server_counters *servers, size_t n);

/* mcr_router_state_unpublish: `writer` publishes no more: its counts are
 * kept with the state as those of a process that left, and the slot may
 * take another writer. MCR_OK, MCR_ERR_INVALID, MCR_ERR_EMPTY,
 * MCR_ERR_BUSY (another writer's). Thread-safe. */
MCR_EXTERN int mcr_router_state_unpublish(mcr_router *router, const void *writer);

/* Where a router fed from a state stands. */
typedef struct mcr_state_status {
    uint64_t generation;  /* the state adopted last */
    uint64_t refused;     /* states refused */
    mcr_error last_refusal; /* why the last one was (code MCR_OK: never) */
    int slot;             /* this process's slot, -1: none (observing, or
                             every slot taken) */
    uint64_t reserved[4]; /* zeroed; room for later fields (mcroute.h) */
} mcr_state_status;

/* mcr_router_state_status: fill *out (checking the state first, as every
 * call does). MCR_OK, MCR_ERR_INVALID (NULL argument, or a router not
 * made by mcr_router_new_from_state()). Thread-safe. */
MCR_EXTERN int mcr_router_state_status(mcr_router *router, mcr_state_status *out);

#ifdef __cplusplus
}
#endif

#endif /* MCROUTE_STATE_H */
