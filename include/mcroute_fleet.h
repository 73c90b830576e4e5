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
 *                              epoch and checksum it has adopted (and the
 *                              migration phase, see below), attached to an
 *                              etcd lease that the process keeps alive, so
 *                              a process that dies disappears by itself
 *                              when the lease expires.
 *   PREFIX NAME /migration     the pool's migration, when one was ever
 *                              run: a resize as a state machine that every
 *                              follower adopts (JSON, see "Migrations").
 *   PREFIX NAME /migration-lock  held (on a lease) by the one process that
 *                              runs a migration (mcr_fleet_migration_lock()).
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
 * form), of an epoch above the current one, but neither 2^63 or more nor
 * more than 2^32 above it (epochs grow by one a change: a forged epoch,
 * adopted, would lock the pool out of its later changes), with the
 * placement parameters of the first snapshot adopted (a pool keeps them
 * for life); anything else (an edit by hand, a deleted key, an older or a
 * forged epoch, other parameters) keeps the current snapshot and is
 * reported (callback and counters). It runs on a thread of its own with its
 * own libevent loop, so it never blocks the application's event loop; all
 * it does to the application is publish to the router.
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
    uint64_t reserved[8]; /* zero; room for later fields (mcroute.h) */
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
 * landed (read the pool before trying again). Memory running out while a
 * write is sent or its reply read is handled as a lost reply: the next read
 * tells whether it landed; when that read fails for want of memory too,
 * MCR_ERR_NOMEM with a message starting "outcome unknown". A pool whose
 * epoch followers refuse is not built on: MCR_ERR_RANGE, nothing stored,
 * when its epoch is 2^63 - 1 or more (the next would be 2^63), or more than
 * 2^32 above the value before it (read from the key's history when the
 * epoch is above 2^32, while etcd keeps that revision): a forged or
 * corrupt value, to repair by writing back the last good snapshot. */
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

/* The longest migration id: hex digits (lower-case), 1 to this many. */
#define MCR_MIGRATION_ID_MAX 32

/* One process following a pool, as it registered itself. */
typedef struct mcr_fleet_client {
    char *id;               /* the client id */
    uint64_t epoch;         /* the epoch it has adopted */
    char checksum[MCR_SNAPSHOT_CHECKSUM_LEN + 1];
    char *host;             /* as it says: host name, pid, library version */
    /* The migration it has adopted ("" and MCR_MIGRATION_NONE: none, or a
     * follower older than migrations): the record's id and phase, from the
     * record's `from` and `to` epochs. */
    char migration_id[MCR_MIGRATION_ID_MAX + 1];
    mcr_migration_phase migration_phase;
    uint64_t migration_to_epoch;
    uint64_t reserved[4]; /* zero; room for later fields (mcroute.h) */
} mcr_fleet_client;

/* mcr_fleet_clients: the processes registered under the pool (live
 * leases), sorted by id, as a new array *out of *count entries that
 * mcr_fleet_clients_free() releases (NULL and 0 when there are none). A
 * client value that does not parse (its migration fields included) is
 * reported with epoch 0 and host "invalid: <why>". Errors (*out unchanged): those of mcr_fleet_read(),
 * except MCR_ERR_UNKNOWN (a missing pool has no clients). */
MCR_EXTERN int mcr_fleet_clients(const mcr_fleet_options *o, mcr_fleet_client **out,
                                 size_t *count, mcr_error *err);

/* mcr_fleet_clients_free: release what mcr_fleet_clients() returned. NULL
 * is a no-op. */
MCR_EXTERN void mcr_fleet_clients_free(mcr_fleet_client *clients, size_t count);

/* ==================================================================== */
/*  Migrations: a resize that every follower goes through together      */
/* ==================================================================== */

/* A migration moves a pool to a new server list without misses (mcroute
 * migrate --etcd runs one): the moving keys are copied to their new owners
 * while every process writes them to both owners, then the new epoch is
 * published while every process reads a miss at a new owner from the old
 * one, and after a grace period the processes stop reading the old
 * owners, then stop writing them. It is recorded at
 * PREFIX NAME /migration, one JSON object:
 *
 *   {"id": "9f3c0a51d2e47b86", "phase": "copying",
 *    "from_epoch": 4, "to_epoch": 5, "from": "<snapshot text>",
 *    "to": "<snapshot text>", "warm": true, "rollback": false,
 *    "grace_ms": 60000, "grace_until": 0,
 *    "progress": {"scanned": 0, "moved": 0, "copied": 0, "skipped": 0,
 *                 "failed": 0, "backlog": 0, "keys_per_s": 0},
 *    "updated": 1764694800000, "message": ""}
 *
 * "from" and "to" are canonical snapshot texts (mcr_snapshot_text()),
 * "updated" and "grace_until" Unix times in ms. The phases run
 * planned -> copying -> switched -> grace -> closing -> done; aborted ends
 * a migration given up. Followers (mcr_fleet_follow()) watch the record
 * with the snapshot key: copying, switched and grace set (from, to) as the
 * router's migration (mcr_router_set_migration(), no grace time of its
 * own; the record's "warm" is read and ignored), once per record id and pair of
 * snapshots (not at every progress update); closing sets it again with
 * MCR_MIGRATION_FLAG_CLOSING (no more reads at the old owners, writes still
 * reach them); done, aborted or a deleted record end it
 * (mcr_router_clear_migration()). Closing comes between the grace and the
 * end because processes adopt a phase one after the other: a process that
 * ended its migration deletes a key at its new owner only, and one still
 * in the grace would read the old owner's copy on its miss there; once
 * every process is closing, none reads an old owner. The switch stores the snapshot
 * `to` and the phase switched in one etcd transaction, and a follower sets
 * a migration before it adopts a snapshot of the same revision, so the
 * switch is never a moment without the migration. Each follower writes
 * the migration id and phase it adopted in its clients/ID key
 * (mcr_fleet_client), which is what a migration waits for at each step.
 *
 * "rollback": true is the way back of a migration aborted after its
 * switch: `from` is the snapshot it switched to, `to` the servers it came
 * from as the next epoch (epochs only rise); its phases are copying,
 * switched, closing and aborted.
 *
 * Every read of a record (these calls and every follower) checks it
 * strictly: a JSON object with every field above and no other, each of its
 * type, the phase one of the names, the id 1 to MCR_MIGRATION_ID_MAX
 * lower-case hex digits, both snapshots verified (mcr_snapshot_parse())
 * and of the epochs given, to's above from's. A record that fails is
 * MCR_ERR_SYNTAX (a snapshot's own error for a snapshot text), the message
 * naming the key, its revision and the field; followers refuse it
 * (MCR_FLEET_REFUSED) and keep the migration they had.
 *
 * Followers check more before they adopt a record, and refuse it the same
 * way (nothing set or ended, the phase not written to their clients/ID
 * key): its `to` must have the placement parameters of its `from`
 * (MCR_ERR_INVALID) and an epoch at most 2^32 above it (MCR_ERR_RANGE); and
 * it must be about the pool's snapshot, the one the follower holds (or,
 * when it reads the pool, the one read with the record), by epoch and checksum
 * (MCR_ERR_STALE): in planned and copying that is `from`, in switched,
 * grace and closing `to`, or still `from` (a follower handles the switch's record
 * before its snapshot, see above); done and aborted are not held to it
 * (they end a migration). A record of the migration a follower adopted
 * last, with the same id and the same two snapshots (a progress update,
 * the next phase), passes without that last check: the pool may have
 * changed since (a server state written during the copy or the grace).
 * mcr_fleet_migration_read() makes none of these checks. */

/* What a migration has done so far (the copy's counts, mcroute_migrate.h). */
typedef struct mcr_migration_progress {
    uint64_t scanned;      /* keys listed on the servers that lose keys */
    uint64_t moved;        /* of those, keys whose owner changes */
    uint64_t copied;       /* copied to their new owner */
    uint64_t skipped;      /* not copied, for a stated reason */
    uint64_t failed;       /* could not be copied */
    uint64_t backlog;      /* moved keys not copied, skipped or failed yet */
    double keys_per_s;     /* the copy's speed */
    uint64_t reserved[4]; /* zero; room for later fields (mcroute.h) */
} mcr_migration_progress;

/* A migration record, decoded. */
typedef struct mcr_migration {
    char id[MCR_MIGRATION_ID_MAX + 1];
    mcr_migration_phase phase;
    mcr_snapshot *from;    /* counted references: mcr_migration_clear() */
    mcr_snapshot *to;
    int warm;              /* kept for followers of 0.3, which require it;
                              no effect (nothing read at an old owner is
                              written to a new one) */
    int rollback;          /* 1: the way back of an abort (see above) */
    uint64_t grace_ms;     /* the grace period, ms */
    uint64_t grace_until;  /* Unix ms when the grace ends; 0 before it */
    mcr_migration_progress progress;
    uint64_t updated;      /* Unix ms of the last write */
    char message[256];     /* what the last writer said ("" for nothing) */
    uint64_t mod_revision; /* the record's etcd mod_revision as read or
                              written; 0: not stored (a new record) */
    uint64_t reserved[8]; /* zero; room for later fields (mcroute.h) */
} mcr_migration;

/* mcr_migration_clear: drop the references of *m and zero it. NULL is a
 * no-op. */
MCR_EXTERN void mcr_migration_clear(mcr_migration *m);

/* mcr_fleet_migration_read: the pool's migration record into *out (a
 * zeroed or cleared mcr_migration; its snapshots are new references),
 * checked as above. Errors (*out zeroed): MCR_ERR_EMPTY (there is no
 * record), MCR_ERR_SYNTAX and the snapshot errors (a record that does not
 * check: the message names the key, revision and field), and those of
 * mcr_fleet_read() (MCR_ERR_INVALID, MCR_ERR_CONNECT, MCR_ERR_PROTOCOL,
 * MCR_ERR_NOMEM). Blocking, thread-safe, as the other blocking calls. */
MCR_EXTERN int mcr_fleet_migration_read(const mcr_fleet_options *o, mcr_migration *out,
                                        mcr_error *err);

/* mcr_fleet_migration_plan: a new migration (not stored) from the pool's
 * current snapshot to the servers of `target` as its next epoch, computed
 * as mcr_fleet_publish() and mcr_fleet_publish_snapshot() compute it
 * (mcr_changes_between(); flags 0: servers the list keeps keep their
 * state in the pool, new ones are ACTIVE; MCR_CHANGES_STATES: target's
 * states). *out: from the pool's snapshot, to the next one, a new random
 * id, phase PLANNED, warm 1, mod_revision 0, the rest 0. `target`'s epoch
 * is not used; its placement parameters must be the pool's. Errors (*out
 * zeroed): MCR_ERR_INVALID (NULL argument, other flags, parameters that
 * differ: the message names the first), MCR_ERR_EMPTY (target's list is
 * the pool's: nothing to migrate), those of mcr_fleet_read() (a missing
 * pool is MCR_ERR_UNKNOWN) and of mcr_snapshot_apply(). */
MCR_EXTERN int mcr_fleet_migration_plan(const mcr_fleet_options *o, const mcr_snapshot *target,
                                        unsigned flags, mcr_migration *out, mcr_error *err);

/* mcr_fleet_migration_write: store *m as the pool's record by
 * compare-and-swap: only if the record's mod_revision is still
 * m->mod_revision (0: only if there is no record). m->updated is set to
 * the current time first; on success m->mod_revision is the write's
 * revision. A write whose reply was lost is recognised at the next
 * attempt (the record then holds exactly what was sent). Errors:
 * MCR_ERR_INVALID (NULL, or *m not a record: the message names the field),
 * MCR_ERR_STALE (the record changed since m->mod_revision, was created or
 * deleted: another writer; nothing written), MCR_ERR_CONNECT (with
 * "outcome unknown" when a write was sent and no answer came: read the
 * record again), MCR_ERR_PROTOCOL, MCR_ERR_NOMEM. */
MCR_EXTERN int mcr_fleet_migration_write(const mcr_fleet_options *o, mcr_migration *m,
                                         mcr_error *err);

/* mcr_fleet_migration_switch: the switch of *m, in one etcd transaction:
 * the pool's snapshot key becomes m->to and the record becomes *m with
 * phase SWITCHED, guarded by both keys' mod_revisions (the snapshot's as
 * read here, which must be m->from: its epoch and checksum; the record's
 * m->mod_revision). On success m->phase is MCR_MIGRATION_SWITCHED and
 * m->updated and m->mod_revision are the write's. A switch already made
 * (the pool holds m->to and the record is *m switched: a reply lost, a run
 * resumed) is MCR_OK without a write. Errors: MCR_ERR_INVALID (as for
 * mcr_fleet_migration_write()), MCR_ERR_STALE (the pool's snapshot is not
 * m->from, or either key changed meanwhile: nothing written; the message
 * says which), MCR_ERR_UNKNOWN (no pool), and those of
 * mcr_fleet_migration_write(). */
MCR_EXTERN int mcr_fleet_migration_switch(const mcr_fleet_options *o, mcr_migration *m,
                                          mcr_error *err);

/* The lock a migration runs under. */
typedef struct mcr_fleet_lock mcr_fleet_lock;

/* mcr_fleet_migration_lock: take the pool's migration lock: create
 * PREFIX NAME /migration-lock, holding `owner` (1 to 255 bytes; NULL:
 * "HOSTNAME pid PID"), only if it does not exist, on a lease of ttl_s
 * seconds (0: MCR_FLEET_LOCK_TTL_S; 2 to MCR_FLEET_LIMIT_S) that a thread
 * of the lock keeps alive every third of it, until
 * mcr_fleet_migration_unlock(). A process that dies loses the lock when
 * the lease expires. *out: the lock. Errors: MCR_ERR_BUSY (another holds
 * it: the message quotes its owner), MCR_ERR_INVALID, MCR_ERR_CONNECT,
 * MCR_ERR_PROTOCOL, MCR_ERR_NOMEM, MCR_ERR_SYSTEM (the keepalive thread or
 * its pipe not created, err->sys_errno; the lease is revoked). */
MCR_EXTERN int mcr_fleet_migration_lock(const mcr_fleet_options *o, const char *owner,
                                        unsigned ttl_s, mcr_fleet_lock **out, mcr_error *err);

#define MCR_FLEET_LOCK_TTL_S 5u

/* mcr_fleet_migration_unlock: stop the keepalive thread, revoke the lease
 * (the lock key goes with it; bounded by the request timeout, the lease
 * expires anyway) and free the lock. NULL is a no-op. */
MCR_EXTERN void mcr_fleet_migration_unlock(mcr_fleet_lock *lock);

/* ==================================================================== */
/*  Following a pool                                                     */
/* ==================================================================== */

typedef struct mcr_fleet mcr_fleet;

/* What a follower reports. */
typedef enum mcr_fleet_event_kind {
    MCR_FLEET_ADOPTED = 0,     /* a new epoch published to the router */
    MCR_FLEET_REFUSED = 1,     /* a value that does not verify, or not
                                  newer, or past the epoch bounds, or with
                                  other placement parameters, or the key
                                  deleted; a migration record that does
                                  not check: kept the current snapshot
                                  and migration (status, err say why);
                                  with MCR_ERR_NOMEM, the pool is read
                                  again after a backoff */
    MCR_FLEET_DISCONNECTED = 2,/* the watch or a request failed on an
                                  endpoint (status, err); trying the next */
    MCR_FLEET_CONNECTED = 3,   /* a watch is established (again) */
    MCR_FLEET_RESYNC = 4,      /* the watch's revision was compacted: the
                                  pool is read again */
    MCR_FLEET_CACHED = 5,      /* started from the cache file (etcd was
                                  unreachable): epoch is the cached one,
                                  err the warning to log */
    MCR_FLEET_REGISTER = 6,    /* the client key could not be written or
                                  its lease kept alive (status, err) */
    MCR_FLEET_CACHE = 7,       /* the cache file could not be written
                                  (status, err) */
    MCR_FLEET_HEALTH = 8,      /* publish_local_states: a local state was
                                  written to etcd (status MCR_OK, epoch the
                                  new one), or could not be (status, err) */
    MCR_FLEET_MIGRATION_SET = 9,  /* the migration record's snapshots were set on the
                                  router (mcr_router_set_migration()), or
                                  could not be (status, err) */
    MCR_FLEET_MIGRATION_CLEARED = 10 /* the router's migration was ended: the
                                  migration is done, aborted or deleted */
} mcr_fleet_event_kind;

typedef struct mcr_fleet_event {
    mcr_fleet_event_kind kind;
    int status;            /* MCR_OK, or why (REFUSED, DISCONNECTED, REGISTER) */
    const mcr_error *err;  /* status != MCR_OK: the details; MCR_FLEET_CACHED:
                              the warning (code MCR_OK, "pool \"NAME\": etcd
                              unreachable, starting from cached epoch N
                              (FILE)"); else NULL */
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
    uint64_t reserved[8]; /* zero; room for later fields (mcroute.h) */
} mcr_fleet_follow_options;

#define MCR_FLEET_LEASE_TTL_S 10u
#define MCR_FLEET_RETRY_MIN_MS 50u
#define MCR_FLEET_RETRY_MAX_MS 2000u

/* mcr_fleet_follow: read the pool, publish its snapshot to `router` (unless
 * the router already holds that epoch and checksum), register this process
 * (unless no_register), and start the follower's thread, which watches the
 * pool and publishes each new epoch. When etcd does not answer within
 * wait_ms and fo->cache_file holds a snapshot that loads, the follower
 * starts from it instead (a MCR_FLEET_CACHED event carrying the warning
 * "etcd unreachable, starting from cached epoch N"; *err is untouched, as
 * on every success) and keeps trying etcd in the background. `router` must
 * outlive the follower; it may hold no snapshot yet. `fo` may be NULL (defaults).
 * Errors (nothing started, nothing published): MCR_ERR_INVALID (options),
 * MCR_ERR_CONNECT (etcd unreachable and no usable cache file; the message
 * says why the cache was not used), MCR_ERR_UNKNOWN (no such pool),
 * MCR_ERR_STALE (the router holds a newer epoch than the pool),
 * MCR_ERR_RANGE (the pool's epoch is 2^63 or more: forged or corrupt; a
 * cache file of such an epoch is not usable either), the errors of
 * mcr_fleet_read(), MCR_ERR_NOMEM, MCR_ERR_SYSTEM (the event loop, a pipe,
 * the mutex or the thread not created: err->sys_errno). */
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
    uint64_t migrations_set;  /* migrations' migrations set on the router */
    uint64_t migrations_cleared; /* and ended */
    mcr_migration_phase migration_phase; /* the phase adopted last (NONE: none) */
    char migration_id[MCR_MIGRATION_ID_MAX + 1]; /* its id, "" when none */
    uint64_t migration_from_epoch; /* its snapshots' epochs (0: none) */
    uint64_t migration_to_epoch;
    /* its copy, as the record said last (mcr_migration_progress) */
    uint64_t migration_copied;
    uint64_t migration_backlog;
    double migration_keys_per_s;
    uint64_t reserved[3]; /* zero; room for later fields (mcroute.h) */
} mcr_fleet_stats;

/* mcr_fleet_get_stats: a copy of the counters. Thread-safe; never blocks
 * on etcd (it takes the follower's short internal lock). */
MCR_EXTERN void mcr_fleet_get_stats(mcr_fleet *f, mcr_fleet_stats *out);

/* mcr_fleet_client_id: the client id the follower registers under (valid
 * until mcr_fleet_free()). */
MCR_EXTERN const char *mcr_fleet_client_id(const mcr_fleet *f);

/* What a follower registers under clients/ID in place of what it adopted
 * itself: for an agent that speaks for the processes behind it (a host's
 * shared state, mcroute_state.h), the adoption of its slowest process. */
typedef struct mcr_fleet_adoption {
    uint64_t epoch;
    char checksum[MCR_SNAPSHOT_CHECKSUM_LEN + 1];
    mcr_migration_phase phase;            /* MCR_MIGRATION_NONE: none */
    char migration_id[MCR_MIGRATION_ID_MAX + 1];
    uint64_t migration_to_epoch;
    /* Said after the host in the registration (mcr_fleet_client.host),
     * where `mcroute migrate --etcd` shows it for a client that holds a
     * step back: say who is behind. At most 511 bytes (cut there), or
     * NULL. */
    const char *note;
    uint64_t reserved[4]; /* zero; room for later fields (mcroute.h) */
} mcr_fleet_adoption;

/* mcr_fleet_set_adoption: register `a` from now on instead of the
 * follower's own adoption (NULL: the follower's own again). The client
 * key is written again on the follower's thread soon after the call (and
 * after every adoption of the follower, with `a` still). Thread-safe; not
 * from the follower's callback. A follower made with no_register writes
 * nothing, as ever. Errors: MCR_ERR_INVALID (NULL follower, reserved not
 * zero, an unknown phase, an epoch of 0, a checksum that is not 32
 * lower-case hex digits, a phase without its id (lower-case hex digits)
 * or to_epoch: what mcr_fleet_clients() would read back as invalid). */
MCR_EXTERN int mcr_fleet_set_adoption(mcr_fleet *f, const mcr_fleet_adoption *a, mcr_error *err);

#ifdef __cplusplus
}
#endif

#endif /* MCROUTE_FLEET_H */
