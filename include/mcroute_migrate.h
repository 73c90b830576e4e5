/* SPDX-License-Identifier: BSD-3-Clause */
/* mcroute_migrate.h: warm resizes: copy every key that a placement change moves to its new owner before the change takes traffic.
 * Library: libmcroute_migrate, `pkg-config --cflags --libs mcroute-migrate`
 * (it links libmcroute_pool, libmcroute and libevent; the application
 * needs none of them for this header).
 *
 * INTRODUCTION
 *
 * Consistent hashing limits how many keys a change of servers moves; it
 * does not move them: the moment a fifth server joins four, about a fifth
 * of the cache misses. mcr_migrate_run() copies those keys first. Given
 * the placement in force (`from`) and the one to come (`to`), it
 *
 *   1. finds the servers that lose keys: those of `from` that own, in
 *      `from`, keys that `to` places elsewhere (the (from, to) pairs of
 *      mcr_diff_new()); a server that `to` removes, lists DRAINING or
 *      DOWN, or lists at another address loses all its keys. When the two
 *      snapshots cannot be diffed (different key hashes or placement
 *      rules), every ACTIVE server of `from` is scanned;
 *   2. lists the keys each of them holds, with memcached's
 *      `lru_crawler metadump hash` (memcached 1.6; one connection per
 *      server, the request sent alone on it), and keeps the keys that
 *      `from` places on that server (a key it holds that `from` places
 *      elsewhere, left over from an older placement, is a "stray": counted,
 *      never copied) and that `to` places on another server ("moved");
 *   3. copies each moved key: reads its value, flags, remaining TTL and
 *      CAS from the old owner (a meta get pinned to that server, through
 *      an mcr_pool over `from`), writes them to the new owner with ADD
 *      (pinned, through a pool over `to`; never overwriting a value that
 *      is already there), and then reads the old owner's CAS and TTL
 *      again: when they changed, the copy is deleted from the new owner by
 *      its own CAS (see "Every acknowledged write" below);
 *   Before step 2 it checks the new owners: dumps each server of `to` that
 *   gains keys, and compares every key it holds that `from` places
 *   elsewhere with its old owner's value (value, flags, TTL); a copy that
 *   differs, or whose old owner no longer has it, is deleted by its CAS
 *   (report->removed; step 3 then copies the key afresh). That removes
 *   what a run interrupted between an add and its check left behind.
 *
 * Outcomes. Every moved key ends in exactly one count: copied (the add
 * stored it and the check found the old owner unchanged); undone (four
 * copies in a row were overtaken by writes and deleted again);
 * skipped_present (the add found a value: one written since,
 * newer than ours, or copied by an earlier run); skipped_expired (its
 * expiry had passed, or was within min_ttl seconds: not copied);
 * skipped_gone (the old owner no longer had it when it was read: evicted
 * or deleted since the dump); failed (the read or the write failed: a
 * timeout, a refused connection, a server error; the report names the
 * server). A server that cannot be dumped (unreachable, dumping disabled
 * with `memcached -X`, a malformed line) is a failed source: none of its
 * keys are copied, the others still are.
 *
 * Expiry. The remaining TTL read with the value (so a touch since the dump
 * counts): -1 (never) is written with exptime 0; a key with at most
 * min_ttl seconds left (metadump's exp says so already at the dump, the
 * read's TTL at the copy) is not copied; any other is written as that many
 * seconds, or as an absolute Unix time beyond 30 days (memcached's rule),
 * so the copy expires within a second of the original.
 *
 * Room. A destination (a server of `to` that gains keys) whose memory
 * (memcached -m) is full evicts items to store the copies, or refuses them
 * ("SERVER_ERROR out of memory storing object"): keys copied are then gone
 * although their adds succeeded. So the run reads each destination's
 * counters (`stats`: evictions, slab_reassign_evictions_nomem,
 * store_no_memory) before the first dump and after the last copy, and
 * fails with MCR_ERR_SERVER when they grew (report->evicted, ->refused,
 * ->room_message): give the destinations more memory, or fewer keys,
 * before switching. The counters are the servers', so every eviction on a
 * destination during the run counts, keys of other clients included. Not
 * in a dry run, nor when no server loses keys.
 *
 * Restartable. Nothing is remembered between runs and nothing is ever
 * overwritten, so running the same migration again after a crash, a stop
 * or a failure copies what is missing and counts what is there as
 * skipped_present (after the check has compared it with the old owner): a
 * second run over a complete copy copies nothing and returns MCR_OK.
 *
 * Every acknowledged write. The run is meant to run while clients hold the
 * migration (from, to) in its copying phase (mcroute_router.h,
 * mcroute_pool.h: Migrations), whose writes of a moved key reach the
 * owner in `from` first and then the owner in `to`, and before any of
 * them reads the new owners. Then a copy is never older than a write
 * acknowledged to a client once the run has returned: a write that reached
 * the old owner before the copy's read is in the value copied; one between
 * the read and the check changed its CAS (or TTL, or removed it), and the
 * copy is deleted by its own CAS (a value a client wrote at the new owner
 * since stays) and made again, up to 4 times (then the key is counted
 * undone: it is left to the switched phase's fallback reads); one after
 * the check reaches the new owner after the add and applies to the copy.
 * A copy exists unchecked only during its check, while nobody reads the
 * new owner; one that a stopped run left unchecked is removed by the next
 * run's check of the new owners. A server without CAS (memcached -C)
 * cannot be migrated this way: its keys fail. Clients writing without the
 * migration (plain memcached clients) are outside this rule.
 *
 * Keys. Keys are copied as they are on the wire. A snapshot with a key
 * prefix (mcr_config_set_key_prefix(): libmemcached's namespace) hashes
 * the prefix with the key; the dumped keys carry it, so a key is placed by
 * its bytes after the prefix, and one that does not start with it is a
 * stray. Both snapshots must have the same prefix (MCR_ERR_UNSUPPORTED
 * otherwise: the application's keys themselves would change). A key the
 * text protocol cannot carry (a space or control byte, which the meta
 * protocol's base64 keys allow) fails.
 *
 * Memory. A server's dump is read whole before its keys are copied
 * (memcached's crawler holds the connection until END, and must not wait
 * for copies): the moved keys of one server are kept, about 24 bytes plus
 * the key each (up to twice that while its arrays grow).
 *
 * Errors follow mcroute.h: MCR_OK or a negative status, details in an
 * optional mcr_error; mcr_migrate_report says what happened per server.
 */
#ifndef MCROUTE_MIGRATE_H
#define MCROUTE_MIGRATE_H

#include <stddef.h>
#include <stdint.h>

#include "mcroute.h"
#include "mcroute_snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Defaults and limits of mcr_migrate_options. */
#define MCR_MIGRATE_TIMEOUT_MS 5000u            /* timeout_ms */
#define MCR_MIGRATE_TIMEOUT_MAX_MS 86400000u    /* one day */
#define MCR_MIGRATE_CONCURRENCY 64u             /* concurrency */
#define MCR_MIGRATE_CONCURRENCY_MAX 65536u
#define MCR_MIGRATE_VALUE_SIZE (64u << 20)      /* max_value_size: 64 MiB */
#define MCR_MIGRATE_VALUE_SIZE_MAX (1u << 30)   /* the pool's MCR_POOL_VALUE_MAX */
#define MCR_MIGRATE_RATE_MAX 1e9                /* rate, keys per second */
#define MCR_MIGRATE_MIN_TTL_MAX 2592000u        /* min_ttl: 30 days */

/* Where a run stands, for a progress display: totals so far, and the
 * server being scanned or copied. Valid during the callback only. */
typedef struct mcr_migrate_progress {
    uint64_t scanned, moved, copied, skipped, failed; /* skipped: all reasons */
    const char *server;   /* the id of the source being scanned or copied */
    double keys_per_s;    /* copied / seconds since the run started */
    size_t source;        /* its number, 1 .. nsources */
    size_t nsources;      /* servers that lose keys */
    int copying;          /* 0 while its dump is read, 1 while its keys are copied */
} mcr_migrate_progress;

typedef void (*mcr_migrate_progress_cb)(const mcr_migrate_progress *p, void *arg);

/* The settings of a run. mcr_migrate_options_init() writes the defaults; a
 * field left 0 takes its default too (the rate: unlimited). */
typedef struct mcr_migrate_options {
    double rate;            /* moved keys processed per second (token bucket,
                               a burst of 1/20 s); 0: unlimited; at most
                               MCR_MIGRATE_RATE_MAX */
    int dry_run;            /* 1: scan and select, count, copy nothing */
    unsigned timeout_ms;    /* connect, request, and the longest a dump may
                               stall between two reads; default 5000 */
    unsigned concurrency;   /* copies in flight at once; default 64 */
    size_t max_value_size;  /* the largest value copied (a larger one fails);
                               default 64 MiB, at most 1 GiB */
    mcr_migrate_progress_cb progress; /* NULL: none. Called at most about
                               4 times a second, after each server's dump,
                               and once at the end, on the calling thread */
    void *progress_arg;
    const volatile int *stop; /* optional: when *stop becomes non-zero (from
                               a signal handler, another thread), no new copy
                               starts, those in flight finish, and the run
                               returns MCR_ERR_CANCELLED */
    unsigned min_ttl;       /* a key with at most this many seconds left is
                               not copied (skipped_expired); default 0: only
                               keys already expired; at most 30 days */
    uint64_t reserved[8]; /* zero; room for later fields (mcroute.h) */
} mcr_migrate_options;

/* mcr_migrate_options_init: zero *o and write the defaults above. NULL is
 * a no-op. */
MCR_EXTERN void mcr_migrate_options_init(mcr_migrate_options *o);

/* One server that loses keys, and what became of them. */
typedef struct mcr_migrate_source {
    char id[256];           /* its id in `from` */
    char address[MCR_HOSTNAME_MAX + 16]; /* "host:port" ("[v6]:port") dumped */
    int status;             /* MCR_OK, or why it could not be dumped, or the
                               first failure of one of its keys */
    char message[256];      /* "" when status is MCR_OK, else a sentence
                               naming the server (and the key, the line) */
    uint64_t scanned;       /* lines of its dump */
    uint64_t stray;         /* keys it holds that `from` places elsewhere */
    uint64_t moved;         /* keys it owns in `from` that `to` places elsewhere */
    uint64_t copied, skipped_present, skipped_expired, skipped_gone, failed;
    uint64_t refused;       /* adds of its keys that the new owner refused
                               for want of memory ("SERVER_ERROR out of
                               memory storing object"); counted in failed too */
    uint64_t undone;        /* keys whose copy was removed again 4 times:
                               the source's value changed (or was touched,
                               or deleted) between each copy's read and its
                               check (see "Every acknowledged write" in
                               INTRODUCTION); not in copied */
    uint64_t reserved[4]; /* zero; room for later fields (mcroute.h) */
} mcr_migrate_source;

/* The outcome of a run: the sums over the sources, each source, and the
 * room at the destinations (see "Room" in INTRODUCTION). */
typedef struct mcr_migrate_report {
    uint64_t scanned, stray, moved, copied, skipped_present, skipped_expired,
        skipped_gone, failed;
    double seconds;         /* the whole run */
    size_t nsources;
    mcr_migrate_source *sources; /* malloc'd, in `from`'s server order;
                               free with mcr_migrate_report_clear() */
    int stopped;            /* 1 when *stop ended the run early */
    uint64_t evicted;       /* items the destinations evicted during the run:
                               the growth of their evictions and
                               slab_reassign_evictions_nomem (`stats`) from
                               before the first dump to after the last copy;
                               every eviction on those servers, keys of other
                               clients included */
    uint64_t refused;       /* adds of the run refused for want of memory:
                               the sum of the sources' refused */
    size_t ndestinations;   /* destinations whose counters were read before
                               and after (one that could not be read, before
                               or after, is not counted); 0 in a dry run
                               and when no server loses keys */
    char room_message[256]; /* "" when the destinations had room; else the
                               sentence naming each that evicted items or
                               refused stores (its own counters: every
                               client's) and how many, as in the error */
    uint64_t undone;        /* the sum of the sources' undone */
    uint64_t verified;      /* the check of the new owners before the copy:
                               keys a new owner holds
                               that `from` places on another server, found
                               equal to that server's value */
    uint64_t removed;       /* ... found different, or gone from that
                               server: removed from the new owner (by their
                               CAS) as copies left by an earlier run that
                               was stopped between a copy and its check;
                               the copy then copies them afresh */
    uint64_t reserved[8]; /* zero; room for later fields (mcroute.h) */
} mcr_migrate_report;

/* mcr_migrate_run: copy every key that moves from `from` to `to` to its
 * new owner (see INTRODUCTION). Blocking: it creates its own event_base,
 * two routers and two pools, and frees them before returning. Neither
 * snapshot is changed, nor is anything published: the caller publishes
 * `to` afterwards, when the run succeeded.
 *
 * *out (when not NULL) is always written, first zeroed: on success and on
 * every error after the options were checked it holds what was done (each
 * source's counts, status and message); release it with
 * mcr_migrate_report_clear(). `out` NULL: only the status and `err` say
 * how it went. `opts` may be NULL (the defaults).
 *
 * Returns MCR_OK when every moved key was copied or skipped for a stated
 * reason (moved == copied + skipped_present + skipped_expired +
 * skipped_gone, failed 0, every source dumped) and the destinations had
 * room (nothing evicted or refused: room_message ""). Otherwise:
 *   MCR_ERR_INVALID      NULL from or to;
 *   MCR_ERR_RANGE        an option out of range (the message names it);
 *   MCR_ERR_UNSUPPORTED  the snapshots' key prefixes differ, or a server
 *                        gives no CAS (memcached -C: copies cannot be
 *                        verified);
 *   MCR_ERR_CANCELLED    *stop was set (report->stopped is 1);
 *   MCR_ERR_NOMEM;
 *   MCR_ERR_SYSTEM       the run's event base not created (err->sys_errno);
 *   MCR_ERR_SERVER       the destinations lack room: they evicted items or
 *                        refused stores during the run (report->evicted,
 *                        ->refused; report->room_message is not ""); `err`
 *                        says "migrate: the destinations lack room:
 *                        10.0.0.5:11211 evicted 1,234 items and refused 56
 *                        during the copy (their memory is full: give them
 *                        more memory (-m) or fewer keys before switching)".
 *                        Keys copied may be gone: do not publish `to` yet.
 *                        This status wins over a source's failure (each
 *                        source's status and message still say it);
 * or the first source's failure: MCR_ERR_CONNECT, MCR_ERR_TIMEOUT
 * (unreachable, silent), MCR_ERR_SERVER (it refused the dump: "metadump
 * refused" for memcached -X; room_message ""), MCR_ERR_PROTOCOL (a
 * malformed line, quoted) or the status of the first key that failed;
 * `err` names the server, its id and address, and says how many sources
 * and keys failed. The other sources are copied all the same.
 *
 * Threads: it may run on any thread; concurrent runs need distinct
 * reports. The progress callback runs on the calling thread. */
MCR_EXTERN int mcr_migrate_run(const mcr_snapshot *from, const mcr_snapshot *to,
                               const mcr_migrate_options *opts, mcr_migrate_report *out,
                               mcr_error *err);

/* mcr_migrate_report_clear: free r->sources and zero *r. NULL is a no-op. */
MCR_EXTERN void mcr_migrate_report_clear(mcr_migrate_report *r);

#ifdef __cplusplus
}
#endif

#endif /* MCROUTE_MIGRATE_H */
