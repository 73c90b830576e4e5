/* SPDX-License-Identifier: BSD-3-Clause */
/* state_internal.h: a host's shared state (mcroute_state.h): the state
 * file's text (statetext.c), the shared memory beside it and its slots
 * (stateshm.c), the writer (statewriter.c); above snapshot/, below router/
 * (whose router_state.c follows a state). Never installed. */
#ifndef MCR_STATE_INTERNAL_H
#define MCR_STATE_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>

#include "snapshot/snapshot.h"
#include "mcroute_state.h"

/* The largest state file read (three snapshots of 100,000 servers fit). */
#define MCR__STATE_FILE_MAX (256u << 20)

/* ---- the text (statetext.c) ---- */

/* The text of `c` at generation `gen`, written at `written_ms`: a new
 * malloc'ed buffer *out of *len bytes. MCR_OK, MCR_ERR_INVALID (content
 * that breaks the format's rules, the message says which), MCR_ERR_NOMEM. */
int mcr__state_text(const mcr_state_content *c, uint64_t gen, uint64_t written_ms, char **out,
                    size_t *len, mcr_error *err);

/* mcr_state_parse() and mcr_state_read() that take the point caches of
 * `basis` (a router's snapshot, may be NULL) for the servers that continue
 * in the state's snapshots: a follower hashes only what changed. */
int mcr__state_parse_basis(const char *text, size_t len, const char *name,
                           const mcr_snapshot *basis, mcr_state_info *out, mcr_error *err);
int mcr__state_read_basis(const char *path, const mcr_snapshot *basis, mcr_state_info *out,
                          mcr_error *err);

/* 1 when s is 1..max bytes of the pool-name alphabet. */
bool mcr__state_name_ok(const char *s, size_t max);

/* ---- the shared memory (stateshm.c) ---- */

/* PATH.shm, version 1: a header, then `nslots` slots of `slot_size` bytes.
 * Every field another process may read at the same time is atomic. */
#define MCR__SHM_MAGIC "MCRSHM01"
#define MCR__SHM_VERSION 2u /* 2: the counter blocks' size in the header */
#define MCR__SHM_HEADER_SIZE 256u
#define MCR__SHM_SLOT_SIZE 256u

typedef struct mcr__shm_header {
    char magic[8];
    uint32_t version;
    uint32_t header_size;
    uint32_t slot_size;
    uint32_t nslots;
    /* 1 once a writer has replaced this file by another (a new layout):
     * followers open PATH.shm again. Raised before `generation` moves. */
    _Atomic uint32_t replaced;
    /* 1 + the highest slot ever claimed: readers of the slots stop there */
    _Atomic uint32_t high_water;
    /* Servers a counter block holds (the departed block and each slot's) */
    uint32_t block_servers;
    uint32_t pad1a;
    /* Counter updates of a server that found its block full (a pool of
     * more servers than block_servers), and were not kept */
    _Atomic uint64_t counters_dropped;
    char pad1[16];
    /* Its own cache line: followers load it on every call; it changes
     * only when a state is written. */
    _Atomic uint64_t generation;
    char pad2[56];
    _Atomic uint32_t writer_pid;
    char pad3[124];
} mcr__shm_header;

/* One process's slot. `owner` 0 is a free slot; a process claims one by a
 * compare-and-swap of its owner word over 0 (or over that of a process
 * that died) and frees it by one back to 0. The owner word holds the pid
 * and the low 32 bits of the process's start time, so that a pid reused by
 * another process does not pass for the dead one. Only its process writes
 * the rest, between two increments of `seq` (odd while it writes: a
 * seqlock, read by mcr__shm_read_slot()). Strings are packed into atomic
 * words. */
#define MCR__SHM_OWNER(pid, start) ((uint64_t)(pid) << 32 | (uint32_t)(start))
#define MCR__SHM_PID(owner) ((uint32_t)((owner) >> 32))
#define MCR__SHM_START(owner) ((uint32_t)(owner))
typedef struct mcr__shm_slot {
    _Atomic uint64_t owner;
    _Atomic uint32_t seq;
    uint32_t pad0;
    _Atomic uint64_t generation;
    _Atomic uint64_t epoch;
    _Atomic uint64_t to_epoch;
    _Atomic uint64_t adopted_ns;
    _Atomic uint64_t refused;
    _Atomic uint32_t phase;
    _Atomic int32_t last_refusal;
    _Atomic uint64_t checksum[4];     /* 32 bytes, NUL-padded */
    _Atomic uint64_t migration_id[4]; /* 32 bytes, NUL-padded */
    _Atomic uint64_t counters_writer; /* the one pool of the process that
                                         publishes into its counter block
                                         (0: none yet) */
    char pad[120];
} mcr__shm_slot;

/* The counters of one server as a process's pool publishes them (its
 * slot's counter block, written by that pool alone), or as processes that
 * left added them up (the departed block, added to atomically). */
enum {
    MCR__CTR_REQUESTS, MCR__CTR_HITS, MCR__CTR_MISSES, MCR__CTR_ERRORS, MCR__CTR_TIMEOUTS,
    MCR__CTR_REFUSALS, MCR__CTR_EJECTIONS, MCR__CTR_FALLBACK_READS, MCR__CTR_FALLBACK_HITS,
    MCR__CTR_LAT_COUNT, MCR__CTR_LAT_SUM_US, MCR__CTR_N
};
#define MCR__LATENCY_BOUNDS MCR_HOST_STATE_BUCKETS
/* The latency histogram's bounds, µs: the pool's Prometheus buckets. */
extern const uint64_t mcr__latency_bounds_us[MCR__LATENCY_BOUNDS];

typedef struct mcr__shm_counters {
    _Atomic uint64_t id_hash;  /* mcr__id_hash() of the server's id; 0: free */
    _Atomic uint64_t v[MCR__CTR_N];
    _Atomic uint64_t le[MCR__LATENCY_BOUNDS]; /* replies within each bound */
    char pad[32];
} mcr__shm_counters;
/* A block's entries are taken in order and freed only all at once (the
 * block zeroed), so that a scan stops at the first free entry and touches
 * only the pages of the servers in use. */

/* A server id's key in the counter blocks: FNV-1a 64, never 0. */
uint64_t mcr__id_hash(const char *id);

/* A mapping of PATH.shm. */
typedef struct mcr__shm {
    mcr__shm_header *h;
    mcr__shm_slot *slots;
    mcr__shm_counters *departed; /* bs entries, shared */
    mcr__shm_counters *blocks;   /* bs entries per slot */
    uint32_t bs;                 /* h->block_servers, as checked at the open */
    size_t size;
    int fd;
} mcr__shm;

/* The path of PATH.shm into buf (cap bytes): MCR_OK or MCR_ERR_INVALID
 * (too long). */
int mcr__shm_path(const char *path, char *buf, size_t cap, mcr_error *err);

/* Map an existing PATH.shm (`shm_path`), read-write or read-only, and
 * check its header. MCR_OK; MCR_ERR_SYSTEM (open or map failed, errno
 * kept); MCR_ERR_CORRUPT (not a state's shared memory, or another version,
 * or too short for its slots). */
int mcr__shm_open(const char *shm_path, bool writable, mcr__shm *out, mcr_error *err);
void mcr__shm_close(mcr__shm *m);

/* What a process adopted, for its slot. */
typedef struct mcr__adoption {
    uint64_t generation, epoch, to_epoch, adopted_ns;
    const char *checksum;     /* may be NULL: "" */
    mcr_migration_phase phase;
    const char *migration_id; /* may be NULL: "" */
} mcr__adoption;

/* Claim a free slot for this process (pid, start time): its index, or -1
 * when every slot is taken by a live process. A slot of a process that
 * died is taken over when no slot is free. */
int mcr__shm_claim(mcr__shm *m, uint64_t owner);
/* Free slot i if `owner` holds it. */
void mcr__shm_release(mcr__shm *m, int i, uint64_t owner);
/* Free slot i if its process died: 1 when it did. */
int mcr__shm_reap(mcr__shm *m, uint32_t i);
/* Record an adoption, or a refusal (status), in slot i. */
void mcr__shm_adopted(mcr__shm *m, int i, const mcr__adoption *a);
void mcr__shm_refused(mcr__shm *m, int i, int status);
/* A consistent copy of slot i into *out: 1, or 0 for a free slot. */
int mcr__shm_read_slot(const mcr__shm *m, uint32_t i, mcr_state_process *out);

/* The size of a PATH.shm of n slots and counter blocks of bs servers
 * (SIZE_MAX: above MCR__SHM_SIZE_MAX), and where its parts are. */
#define MCR__SHM_SIZE_MAX ((size_t)1 << 34)
size_t mcr__shm_size(uint32_t nslots, uint32_t bs);
void mcr__shm_locate(mcr__shm *m);
/* Slot i's counter block. */
static inline mcr__shm_counters *mcr__shm_block(const mcr__shm *m, uint32_t i)
{
    return m->blocks + (size_t)i * m->bs;
}
/* Add block b's counts into the departed block (its process left); and
 * clear a block. */
void mcr__shm_fold(mcr__shm *m, const mcr__shm_counters *b);
void mcr__shm_zero_block(const mcr__shm *m, mcr__shm_counters *b);
/* A pool's counters of server `id` into its process's block (the block's
 * one writer). A full block keeps the servers it has and counts the
 * update of another in h->counters_dropped. */
void mcr__shm_publish(mcr__shm *m, mcr__shm_counters *block, const char *id,
                      const uint64_t v[MCR__CTR_N], const uint64_t le[MCR__LATENCY_BOUNDS]);
/* The totals per server of every live process's block and the departed
 * block: a new array of *count (malloc'ed). MCR_OK or MCR_ERR_NOMEM. A
 * fold in progress may count a process's block twice or not at all for
 * that one read. */
typedef struct mcr__server_total {
    uint64_t id_hash;
    uint64_t v[MCR__CTR_N];
    uint64_t le[MCR__LATENCY_BOUNDS];
} mcr__server_total;
int mcr__shm_sum(const mcr__shm *m, mcr__server_total **out, size_t *count);

/* Process pid's start time (field 22 of /proc/PID/stat), 0 unknown; and
 * whether the process of an owner word is alive (a start time of 0, or
 * one that cannot be read, trusts the pid alone). */
uint64_t mcr__proc_start_time(uint32_t pid);
bool mcr__proc_alive(uint64_t owner);

#endif /* MCR_STATE_INTERNAL_H */
