/* SPDX-License-Identifier: BSD-3-Clause */
/* mcroute_snapshot.h: versioned immutable placement snapshots, membership changes, diffs and replicas.
 * Library: libmcroute, `pkg-config --cflags --libs mcroute`.
 *
 * INTRODUCTION
 *
 * Servers join and leave while traffic flows. A snapshot is one whole,
 * immutable placement: the parameters (mode, key hash, point hash, hash tag,
 * key prefix, table size, MCR_SNAPSHOT_ALGORITHM), the servers (stable id,
 * address, weight, zone, state), the continuum or table built from the
 * active ones, the bucket or slot map of "jump" and "slots", an epoch and a
 * checksum over a canonical serialization of all of that. A change
 * (add, remove, set weight, set state, alone or in a batch) never modifies a
 * snapshot: mcr_snapshot_apply() builds a new one with epoch + 1. A router
 * (<mcroute_router.h>) publishes snapshots atomically to lock-free readers.
 *
 * Identity. Every server has an id (see mcr_server_desc in <mcroute.h>):
 * "host:port" ("[v6]:port") unless one is given (an id of
 * mcr_config_add_server_desc() or mcr_changes_add(), or the label of
 * mcr_config_add_server_named()). Ids are unique in a snapshot and are how
 * changes, diffs and hooks name servers. In the native modes ("ketama",
 * "stable-ketama", and "jump" onwards) the points, permutations and scores
 * hash the id, so moving a named server to another address moves no key. In the reference modes (libmemcached,
 * twemproxy) labels are what the reference hashes (the address, or the
 * twemproxy name, which is the id when one was given).
 *
 * Order. A snapshot lists its servers in config order; servers added by a
 * change are appended, removed ones leave the list (later indexes shift
 * down). Ties between equal point values go to the earlier server.
 *
 * States. Only ACTIVE servers own points and receive keys; the continuum
 * and the point counts of the reference modes are those of the active
 * servers alone, as if the others were absent. DRAINING and DOWN servers
 * stay listed and own no keys. A change that would leave no active server
 * is refused.
 *
 * Indexes. The ring of a snapshot (mcr_snapshot_ring()) holds the active
 * servers only, in snapshot order: the server numbers that mcr_ring_find()
 * and mcr_ring_point() give are ring indexes, which
 * mcr_snapshot_ring_server() turns into snapshot indexes.
 * mcr_snapshot_locate() gives snapshot indexes directly.
 *
 * Lifetime and threads. Snapshots are reference counted with C11 atomics:
 * mcr_snapshot_ref() / mcr_snapshot_unref() may be called from any thread,
 * and the last unref frees it. Every function that returns a snapshot
 * returns a new reference the caller owns. A snapshot never changes after
 * it is built, so any number of threads may read it at once without
 * locking; strings and the ring it hands out live as long as it does.
 * A mcr_changes list belongs to one thread at a time.
 *
 * Errors follow <mcroute.h>: an int status, details in an optional
 * mcr_error; a function that fails builds and publishes nothing and leaves
 * its outputs unchanged.
 */
#ifndef MCROUTE_SNAPSHOT_H
#define MCROUTE_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "mcroute.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mcr_snapshot mcr_snapshot;
typedef struct mcr_changes mcr_changes;
typedef struct mcr_diff mcr_diff;

/* The placement algorithm version: part of every snapshot's checksum and
 * written to snapshot files. It changes whenever any mode would place a key
 * differently for the same servers, so a file written by another version is
 * refused rather than silently rebuilt into another continuum. */
#define MCR_SNAPSHOT_ALGORITHM 1

/* Length of a checksum: 32 hexadecimal digits (an MD5 digest). */
#define MCR_SNAPSHOT_CHECKSUM_LEN 32

/* mcr_server_state and mcr_server_desc are declared in <mcroute.h>, which
 * mcr_config_add_server_desc() shares. */

/* ==================================================================== */
/*  Building                                                             */
/* ==================================================================== */

/* mcr_snapshot_new: the first snapshot, numbered `epoch` (usually 1), of
 * the servers of `cfg` in config order, with its mode, hashes, hash tag and
 * key prefix. Every server is ACTIVE, with the id and zone of the config
 * (see mcr_config_add_server_desc). `cfg` is only read. The continuum is
 * the one mcr_ring_new() builds from `cfg`, point for point.
 * On success *out is a new reference (free with mcr_snapshot_unref()).
 * Errors (*out unchanged): those of mcr_ring_new() (MCR_ERR_INVALID for a
 * NULL argument, MCR_ERR_EMPTY for no server, MCR_ERR_RANGE, MCR_ERR_NOMEM);
 * MCR_ERR_DUPLICATE (two servers with one id); MCR_ERR_RANGE (a weight over
 * MCR_STABLE_WEIGHT_MAX in "stable-ketama"). Thread-safe for distinct
 * configs.
 *
 * The native table modes: "maglev" takes its table size M from `cfg` (the
 * automatic size is chosen here, from the server count, and kept by every
 * snapshot applied from this one); "jump" gives server i, in config order,
 * the next `weight` buckets; "slots" gives each server a contiguous range
 * of slots in proportion to its weight. Also MCR_ERR_RANGE for a weight over
 * MCR_STABLE_WEIGHT_MAX in "bounded" and "jump", more than 2^24 buckets, and
 * a maglev table under 100 entries per server. */
MCR_EXTERN int mcr_snapshot_new(const mcr_config *cfg, uint64_t epoch, mcr_snapshot **out,
                                mcr_error *err);

/* mcr_snapshot_ref: take one more reference to `snap`; returns `snap`
 * (NULL gives NULL), as a non-const pointer the caller owns one reference
 * through (to mcr_snapshot_unref() later). It takes a const pointer, so
 * that the snapshots routers and hooks hand out (const) can be kept with
 * no cast: a snapshot is immutable, only its reference count changes. Any
 * thread, lock-free. */
MCR_EXTERN mcr_snapshot *mcr_snapshot_ref(const mcr_snapshot *snap);

/* mcr_snapshot_unref: drop one reference; the last one frees the snapshot
 * (its ring, strings and its share of the point caches). NULL is a no-op.
 * Any thread, lock-free; no thread may use a snapshot after dropping its
 * last reference to it. */
MCR_EXTERN void mcr_snapshot_unref(mcr_snapshot *snap);

/* ==================================================================== */
/*  Reading (any thread, no lock)                                        */
/* ==================================================================== */

/* mcr_snapshot_epoch: the snapshot's number: the `epoch` it was built with,
 * plus one per mcr_snapshot_apply(). 0 for NULL. */
MCR_EXTERN uint64_t mcr_snapshot_epoch(const mcr_snapshot *snap);

/* mcr_snapshot_checksum: MCR_SNAPSHOT_CHECKSUM_LEN lower-case hex digits
 * and a NUL, owned by the snapshot (NULL for NULL): a digest of the
 * snapshot's canonical text (its file, see mcr_snapshot_save, without the
 * last line), MD5(header lines || MD5(server line 1) || ... || MD5(server
 * line n)), so that a new snapshot rehashes only the lines of the servers a
 * change touched. It covers the parameters, MCR_SNAPSHOT_ALGORITHM,
 * the epoch, every field of every server and every continuum point (each
 * server line carries its point count and a 64-bit hash of its point
 * values; in the table modes, the count and a hash of the numbers of the
 * table entries, buckets or slots it owns, and in "jump" and "slots" the
 * map itself). Two snapshots with the same checksum place every key alike.
 * An integrity check against corruption, not a defence against forgery. */
MCR_EXTERN const char *mcr_snapshot_checksum(const mcr_snapshot *snap);

/* mcr_snapshot_ring: the continuum (or table) of the active servers, owned
 * by the snapshot (never free it; it lives as long as the snapshot). Its
 * server numbers are ring indexes (see Indexes above). NULL for NULL. */
MCR_EXTERN const mcr_ring *mcr_snapshot_ring(const mcr_snapshot *snap);

/* mcr_snapshot_server_count: number of servers listed, in every state
 * (0 for NULL). */
MCR_EXTERN size_t mcr_snapshot_server_count(const mcr_snapshot *snap);

/* mcr_snapshot_active_count: number of ACTIVE servers, which is
 * mcr_ring_server_count() of the ring; at least 1 (0 for NULL). */
MCR_EXTERN size_t mcr_snapshot_active_count(const mcr_snapshot *snap);

/* mcr_snapshot_server: describe server `i` (0-based, snapshot order) into
 * *out: its id (never NULL), host (without brackets), port, weight, zone
 * (NULL when it has none), state, and id_is_default (1 when the id is the
 * default "host:port", none having been given): given back to
 * mcr_config_add_server_desc() or mcr_changes_add(), *out describes the same
 * server, placed the same way. The strings belong to the snapshot.
 * MCR_OK, or MCR_ERR_INVALID (NULL argument, `i` out of range; *out
 * unchanged). */
MCR_EXTERN int mcr_snapshot_server(const mcr_snapshot *snap, size_t i, mcr_server_desc *out);

/* mcr_snapshot_find: index of the server whose id is `id` (compared byte
 * for byte), or MCR_NO_SERVER when there is none or an argument is NULL.
 * O(1). */
MCR_EXTERN uint32_t mcr_snapshot_find(const mcr_snapshot *snap, const char *id);

/* mcr_snapshot_ring_server: the snapshot index of ring server `ring_index`
 * (a server number from mcr_ring_find(), mcr_ring_point(), ...), or
 * MCR_NO_SERVER when it is out of range or `snap` is NULL. O(1). */
MCR_EXTERN uint32_t mcr_snapshot_ring_server(const mcr_snapshot *snap, uint32_t ring_index);

/* mcr_snapshot_zone_count: number of distinct zones among the listed
 * servers (servers without a zone not counted). 0 for NULL. */
MCR_EXTERN size_t mcr_snapshot_zone_count(const mcr_snapshot *snap);

/* mcr_snapshot_server_zone: the zone number of server `i`: 0 when it has no
 * zone, else 1..mcr_snapshot_zone_count(), equal numbers for equal zone
 * strings (numbered in order of first appearance). 0 for a NULL `snap` or
 * an `i` out of range. O(1): for replica placement on the hot path. */
MCR_EXTERN uint32_t mcr_snapshot_server_zone(const mcr_snapshot *snap, size_t i);

/* mcr_snapshot_locate: the snapshot index of the server owning `key`
 * (`len` bytes), by the rule of the snapshot's mode: mcr_ring_locate() on
 * the ring, translated by mcr_snapshot_ring_server(). Always an ACTIVE
 * server. `snap` must not be NULL (hot path: nothing is checked).
 * Thread-safe, cannot fail. */
MCR_EXTERN uint32_t mcr_snapshot_locate(const mcr_snapshot *snap, const void *key, size_t len);

/* mcr_snapshot_locate_many: mcr_snapshot_locate() for `n` keys at once:
 * out[i] is the snapshot index of the server owning keys[i] (lens[i]
 * bytes). The same results, at a lower cost per key: the keys are hashed
 * several at a time (MD5 in SIMD lanes where the CPU has them) and the
 * ring's cache misses overlap, as in mcr_ring_locate_many(). For a
 * multi-get's keys, or any batch known at once. `snap`, `keys`, `lens` and
 * `out` must not be NULL unless `n` is 0, nor any keys[i] (hot path:
 * nothing is checked). The caller owns the arrays; nothing is kept.
 * Thread-safe, cannot fail. */
MCR_EXTERN void mcr_snapshot_locate_many(const mcr_snapshot *snap, const void *const *keys,
                                         const size_t *lens, size_t n, uint32_t *out);

/* mcr_snapshot_locate_bounded: the server for one request on `key` (`len`
 * bytes) under bounded loads (Mirrokni, Thorup and Zadimoghaddam, 2018):
 * the first ACTIVE server, in the key's order of mcr_snapshot_replicas()
 * (the primary, then clockwise in "bounded" and the continuum modes; the
 * mode's own order otherwise), whose load stays within its capacity once
 * this request is counted:
 *
 *     load[i] + 1 <= ceil((1 + epsilon) * (total + 1) * weight[i] / W)
 *
 * W being the total weight of the active servers (with equal weights:
 * ceil((1 + epsilon) * (total + 1) / N), the paper's bound). The caller
 * counts its requests in flight: `load` has one count per snapshot server
 * (mcr_snapshot_server_count() of them, indexed as mcr_snapshot_server()
 * numbers them; the counts of servers that are not active are not read)
 * and `total` is the sum of the counts of the ACTIVE servers. The caller
 * adds the request to load[returned index] (and to total) when it sends it
 * and removes it when it completes. With the loads all 0 it returns
 * mcr_snapshot_locate(); a key whose owner is at capacity goes to the next
 * server with room, so a hot key spreads over a few servers instead of
 * overloading one, and every server stays within (1 + epsilon) times the
 * average load (+1). epsilon: 0.25 is the paper's suggestion; a negative
 * or NaN epsilon counts as 0 (the tightest bound); a large one makes it
 * mcr_snapshot_locate(). Since the capacities add up to more than `total`,
 * a server with room always exists when `total` is right; if none is found
 * (a `total` below the sum), the primary is returned.
 *
 * Work: one step per candidate of the walk (points of the continuum,
 * entries of a table, servers in score order), usually a few.
 * `snap` and `load` must not be NULL (hot path: nothing is checked).
 * Thread-safe (`load` is only read; synchronising its updates is the
 * caller's business), cannot fail. */
MCR_EXTERN uint32_t mcr_snapshot_locate_bounded(const mcr_snapshot *snap, const void *key,
                                                size_t len, const uint32_t *load,
                                                uint64_t total, double epsilon);

/* mcr_snapshot_table_size: the number of entries of the snapshot's table:
 * "maglev": the table size M; "envoy-maglev": Envoy's 65537; "slots": the
 * slot count; "jump": the bucket count (the total weight of the listed
 * servers). 0 in the other modes and for NULL. O(1). */
MCR_EXTERN size_t mcr_snapshot_table_size(const mcr_snapshot *snap);

/* mcr_snapshot_table_entry: the snapshot index of the server that entry
 * `i` (0 .. mcr_snapshot_table_size() - 1) names: "maglev", "envoy-maglev":
 * the server of table entry i (always ACTIVE); "slots": the owner of slot i in the slot
 * map, in any state (a slot of a DOWN server keeps its owner; lookups use
 * the fallback meanwhile, see mcr_mode(3)); "jump": the server of
 * bucket i, in any state. MCR_NO_SERVER for NULL, an `i` out of range, or the
 * other modes. O(1). Thread-safe. */
MCR_EXTERN uint32_t mcr_snapshot_table_entry(const mcr_snapshot *snap, size_t i);

/* mcr_snapshot_key_slot: in "slots" mode, the slot of `key` (`len` bytes):
 * CRC-16/XMODEM of the key (after the hash tag and key prefix rules) mod
 * the slot count. MCR_NO_SERVER for a NULL `snap`, a NULL key with len > 0,
 * and the other modes. Thread-safe. */
MCR_EXTERN uint32_t mcr_snapshot_key_slot(const mcr_snapshot *snap, const void *key, size_t len);

/* ==================================================================== */
/*  Changes                                                              */
/* ==================================================================== */

/* A mcr_changes is an ordered list of membership changes to apply to a
 * snapshot in one batch. Recording a change checks its own arguments only;
 * whether the ids exist is decided by mcr_snapshot_apply(), against the
 * snapshot it is applied to, so one list can be applied to several
 * snapshots. Owned by one thread at a time; not modified by apply. */

/* mcr_changes_new: an empty list. NULL only when out of memory. */
MCR_EXTERN mcr_changes *mcr_changes_new(void);

/* mcr_changes_free: release a list. NULL is a no-op. */
MCR_EXTERN void mcr_changes_free(mcr_changes *ch);

/* mcr_changes_count: number of changes recorded (0 for NULL). */
MCR_EXTERN size_t mcr_changes_count(const mcr_changes *ch);

/* mcr_changes_reset: forget every recorded change, keeping the memory.
 * NULL is a no-op. */
MCR_EXTERN void mcr_changes_reset(mcr_changes *ch);

/* mcr_changes_add: record "add the server `server` describes" (copied):
 * host, port and weight as mcr_config_add_server() (but weight 0, which
 * is recorded and refused when applied to a snapshot whose mode is not
 * "mcrouter-wch3", with MCR_ERR_RANGE), id and zone as
 * mcr_server_desc says, any state (a server may join DOWN or DRAINING).
 * When applied it is appended to the server list. MCR_OK, or (nothing
 * recorded) MCR_ERR_INVALID (NULL `ch` / `server` / host, unknown state,
 * id_is_default with an id that is not the default),
 * MCR_ERR_SYNTAX, MCR_ERR_TOO_LONG, MCR_ERR_RANGE (port, weight),
 * MCR_ERR_NOMEM. */
MCR_EXTERN int mcr_changes_add(mcr_changes *ch, const mcr_server_desc *server, mcr_error *err);

/* mcr_changes_remove: record "remove the server with id `id`" (copied).
 * MCR_OK, or MCR_ERR_INVALID (NULL), MCR_ERR_SYNTAX (empty id),
 * MCR_ERR_TOO_LONG, MCR_ERR_NOMEM. */
MCR_EXTERN int mcr_changes_remove(mcr_changes *ch, const char *id, mcr_error *err);

/* mcr_changes_set_weight: record "server `id` now weighs `weight`"
 * (0..MCR_WEIGHT_MAX; the mode's range checked by apply: 1..MCR_WEIGHT_MAX,
 * at most MCR_STABLE_WEIGHT_MAX in "stable-ketama", "bounded" and "jump",
 * millionths 0..MCR_WCH3_WEIGHT_ONE in "mcrouter-wch3"). Errors as
 * mcr_changes_remove(), and MCR_ERR_RANGE. */
MCR_EXTERN int mcr_changes_set_weight(mcr_changes *ch, const char *id, uint32_t weight,
                                      mcr_error *err);

/* mcr_changes_set_state: record "server `id` is now in `state`". Errors as
 * mcr_changes_remove(), and MCR_ERR_INVALID for an unknown state. */
MCR_EXTERN int mcr_changes_set_state(mcr_changes *ch, const char *id, mcr_server_state state,
                                     mcr_error *err);

/* Flags of mcr_changes_between(). */
#define MCR_CHANGES_STATES 1u /* also make the states those of `to` */

/* mcr_changes_between: a new change set (*out, free with
 * mcr_changes_free()) that turns the server list of `from` into that of
 * `to` when applied to `from`: servers are matched by id ("host:port"
 * unless given); those only in `to` are added, those only in `from`
 * removed, those that moved (same id, another address or zone) removed
 * and added again, and weights set. The order makes every step valid: the
 * additions first (the active count only grows), then the removals (which
 * free ids and addresses), then the servers that take over a freed address
 * or moved, then weights (and states). Without MCR_CHANGES_STATES the
 * states are not compared: a server that stays keeps the state it has in
 * `from` (so does one that moves) and a new one joins ACTIVE, which is
 * what a server file, which says nothing about states, means; with it, the
 * states become those of `to`. Placement parameters are not compared (a
 * change set cannot change them). *count (when not NULL) is the number of
 * changes: 0 when the lists match. Errors (*out unchanged):
 * MCR_ERR_INVALID (NULL argument, unknown flag), MCR_ERR_NOMEM. Whether
 * the result applies (no active server left, a slots server still owning
 * slots) is for mcr_snapshot_apply() to say. Thread-safe. */
MCR_EXTERN int mcr_changes_between(const mcr_snapshot *from, const mcr_snapshot *to,
                                   unsigned flags, mcr_changes **out, size_t *count,
                                   mcr_error *err);

/* mcr_changes_move_slots: record "slots first..last (inclusive) now belong
 * to the server with id `id`" (copied), for snapshots in "slots" mode: the
 * only change that alters a slot map. The server may be in any state, and
 * may be one that an earlier change of the same batch adds. Applied to a
 * snapshot of another mode, or with `last` at or beyond its slot count, the
 * batch is refused (MCR_ERR_INVALID, MCR_ERR_RANGE). MCR_OK, or (nothing
 * recorded) MCR_ERR_INVALID (NULL `ch` or `id`), MCR_ERR_RANGE (first >
 * last, or last >= MCR_SLOTS_MAX), MCR_ERR_SYNTAX / MCR_ERR_TOO_LONG (the
 * id), MCR_ERR_NOMEM. */
MCR_EXTERN int mcr_changes_move_slots(mcr_changes *ch, uint32_t first, uint32_t last,
                                      const char *id, mcr_error *err);

/* mcr_slots_plan: the move plan of a "slots" snapshot. It applies `ch` to
 * `snap` as mcr_snapshot_apply() would (without building anything), except
 * that slots of removed servers are set aside instead of refused, then
 * appends to `ch` the moves (mcr_changes_move_slots(), ranges of
 * consecutive slots) that give every server its quota: the slot count
 * split in proportion to weight (largest remainders, ties to the earlier
 * server) among the servers that remain and are not DRAINING (a DOWN
 * server keeps its share: its slots are served by the fallback until it
 * returns, or until it is set DRAINING or removed). The plan moves the
 * fewest slots that can reach the quotas: the slots of removed and
 * draining servers, and from every server above its quota its highest
 * slots beyond it, each to the servers below quota, in snapshot order,
 * lowest slots first; a server never loses a slot within its quota.
 * Afterwards mcr_snapshot_apply(snap, ch) succeeds (unless the changes
 * fail for another reason) and gives a balanced map.
 *
 * Typical uses: add a server (mcr_changes_add, then the plan moves its
 * share to it), remove one (mcr_changes_remove, then the plan moves its
 * slots away first), reweight, or rebalance (an empty `ch`). *moved (when
 * not NULL) receives the number of slots the plan moves (0: balanced
 * already). `snap` is only read. Errors (nothing appended, *moved
 * unchanged): MCR_ERR_INVALID (NULL `snap` or `ch`; a snapshot not in
 * "slots" mode), MCR_ERR_EMPTY (no server left to own slots), the errors of
 * mcr_snapshot_apply() for `ch` itself, MCR_ERR_NOMEM. Thread-safe for
 * distinct `ch`. */
MCR_EXTERN int mcr_slots_plan(const mcr_snapshot *snap, mcr_changes *ch, size_t *moved,
                              mcr_error *err);

/* mcr_snapshot_apply: a new snapshot, epoch old + 1, with the changes of
 * `ch` applied one after the other (a later change sees the earlier ones:
 * "remove a" then "add a at another address" is valid). An empty list gives
 * a copy with epoch + 1. `old` and `ch` are only read.
 *
 * Incremental: no point of a server that stays active is rehashed. Each
 * server's point values are kept (shared between snapshots); the new
 * continuum is the old one with the points of removed servers (and the
 * labels dropped from servers whose count shrank) filtered out, merged with
 * the sorted points of added servers (and labels added to servers whose
 * count grew): linear in the number of points, plus hashing and sorting the
 * added points only. The result is identical, point for point and in its
 * checksum, to mcr_snapshot_new() on a config listing the same servers in
 * the same order. In "stable-ketama" no other server's point count ever
 * changes; in "ketama" and the weighted reference modes a change of the
 * server count or total weight may change every server's count by rounding
 * (their references normalise), which costs more but still hashes only the
 * labels that are new.
 *
 * The native table modes. "bounded" is "stable-ketama" here. "maglev" and
 * "rendezvous" rebuild their table (O(M log M)) or seeds (O(N)) from the
 * servers, and are identical to mcr_snapshot_new() as above. "jump" and
 * "slots" carry a map that is history, not a function of the servers, so
 * their snapshots are not those of mcr_snapshot_new() once a server was
 * removed or slots moved:
 *   - jump: an added server's buckets are appended, as are the buckets a
 *     higher weight adds; DOWN and DRAINING keep buckets (holes). At the
 *     end of the batch, the buckets of removed servers and those a lower
 *     weight drops (a server's highest ones) are freed, highest first: the
 *     server of the last bucket takes the freed bucket over and the last
 *     bucket goes (see mcr_mode(3)). A server removed and added again
 *     under its id in one batch (another address) keeps its buckets.
 *   - slots: only mcr_changes_move_slots() changes the map; a server added
 *     owns nothing; a server removed must not own a slot at the end of the
 *     batch (its slots moved away by the batch, or the id added again,
 *     which keeps them), else MCR_ERR_INVALID naming the slots.
 *
 * On success *out is a new reference. Errors (nothing is built, *out
 * unchanged; for a change that fails, the message names it by its
 * position in the batch and its id):
 * MCR_ERR_INVALID (NULL argument; slots still owned by a removed server;
 * a slot move in another mode than "slots"), MCR_ERR_UNKNOWN (an id not in
 * the snapshot at that point of the batch), MCR_ERR_DUPLICATE (adding an
 * id, or a host and port, already present), MCR_ERR_EMPTY (no active server
 * would remain), MCR_ERR_RANGE (a weight over MCR_STABLE_WEIGHT_MAX in
 * "stable-ketama", "bounded" and "jump"; a slot move beyond the slot
 * count; more than 2^24 jump buckets; more active servers than a maglev
 * table of M entries holds, M / 100, or fewer servers than it needs (see
 * MCR_MAGLEV_SIZE_FREE); the epoch would overflow; too many
 * points), MCR_ERR_NOMEM. Thread-safe: any number of threads may apply
 * changes to the same snapshot at once (each gets its own new snapshot). */
MCR_EXTERN int mcr_snapshot_apply(const mcr_snapshot *old, const mcr_changes *ch,
                                  mcr_snapshot **out, mcr_error *err);

/* ==================================================================== */
/*  Diffs                                                                */
/* ==================================================================== */

/* A diff says what moved between two snapshots, usually an old one and its
 * successor (the router's hooks receive one with every publish), so an
 * application can plan a migration, warm a new server or invalidate:
 *
 *   - the arcs of the hash space [0, 2^32) whose owner changed, each with
 *     its old and its new owner;
 *   - the moved fraction: the share of the hash space whose owner changed,
 *     in total and per (from, to) pair of servers;
 *   - a per-key test, mcr_diff_key_moved().
 *
 * Owners are compared by server id, not by address: a server that kept its
 * id owns the same hash values in both snapshots if the continuum gives it
 * the same points, whatever its address became.
 *
 * Continuum modes (every mode with points). A point owns the hash values
 * from just above the previous point up to its own value; among points of
 * equal value the first (the earlier server) owns them and the others own
 * nothing; the first point also owns the wrap-around: the values above the
 * last point and those from 0 up to its own. Arcs never wrap (first <= last):
 * a change across 4294967295 -> 0 is reported as two arcs, one ending at
 * 4294967295 and one starting at 0. Arcs are ascending and disjoint;
 * adjacent changed values with the same (from, to) form one arc.
 *
 * Modula modes ("modula", "twemproxy-modula"). The owner of a hash value is
 * that of its remainder, so ownership changes every few values and a diff
 * involving a modula snapshot lists no arcs (mcr_diff_arc_count() is 0).
 * Its fractions and pairs are still exact: they are counted over the moduli
 * (over one period, the least common multiple of both moduli, when both
 * snapshots are modula; over every arc of the other snapshot's continuum
 * otherwise). When that count would be too long (a period above 2^24 hash
 * values, or more than 2^26 steps of continuum servers times modulus),
 * mcr_diff_new() refuses with MCR_ERR_UNSUPPORTED; mcr_diff_key_moved() on
 * sample keys still answers per key.
 *
 * Maglev. The owner of a hash value is that of table entry hash % M: a
 * residue mode like modula (no arcs; exact fractions counted over the
 * table's runs, with the same limits), comparable with the continuum and
 * modula modes.
 *
 * Slots. What a "slots" snapshot places is the key's CRC-16, not its key
 * hash: fractions and pairs count the 65536 CRC-16 values, each owned by
 * the effective owner of its slot (value mod slot count), so moved is
 * (CRC-16 values whose owner changed) / 65536, exact: with 16384 slots,
 * moved slots / 16384. No arcs. Comparable only with another "slots"
 * snapshot (any key hash, any slot count).
 *
 * Jump and rendezvous. Their owners are not runs of hash values, and
 * counting 2^32 of them would take seconds: a diff gives the shares of the
 * algorithm's model, exact in it (computed in closed form, to double
 * precision), which are what the keys of a workload converge to. Jump:
 * each of the B buckets takes 1/B of the keys, and going from B1 to B2
 * buckets a key stays in its bucket unless it jumps past B1, as the
 * algorithm guarantees; a bucket whose server is not active sends its keys
 * on as the lookup does ("memcached-proxy-jump" and "mcrouter-ch3" too,
 * their servers the buckets). "mcrouter-wch3": tries of that model on both
 * sides, each accepted or not by one uniform value under each side's
 * weight, the sides going on together while both refuse, then alone, the
 * 32nd try's server when all are refused. Rendezvous: the exponential race
 * that the logarithmic method realizes (each server's time an independent
 * exponential of rate its weight), integrated exactly over the old and new
 * weights. No arcs. Comparable only with a snapshot of the same mode, and
 * refused (MCR_ERR_UNSUPPORTED) when more than 2^24 (from, to) pairs
 * would have to be weighed (a change of most weights among thousands of
 * servers). mcr_diff_key_moved() is exact in every mode.
 *
 * Hash values stand for keys only when both snapshots hash keys alike:
 * mcr_diff_new() refuses snapshots with different key hashes (except two
 * "slots" snapshots), and snapshots whose modes place keys by different
 * rules (a continuum, modula or maglev snapshot against jump, rendezvous
 * or slots; jump against rendezvous; ...).
 *
 * A diff is immutable once built: any number of threads may read it at
 * once. It holds a reference to each snapshot (mcr_snapshot_ref()), so the
 * ids it returns stay valid until mcr_diff_free(), whatever happens to the
 * caller's own references. */

/* mcr_diff_new: the diff from `old` to `new_snap` into *out, to be freed
 * with mcr_diff_free(). Any two snapshots may be compared, in either order;
 * identical placements give an empty diff (no arc, no pair, moved 0). Time
 * and memory O(points of both continua + servers of both snapshots) (about
 * 1 ms for 1,000 servers); with a modula or maglev snapshot, the counts
 * above; slots: 65536 steps; jump O(buckets + pairs); rendezvous
 * O(N log N + pairs).
 * Errors (*out unchanged): MCR_ERR_INVALID (a NULL argument),
 * MCR_ERR_UNSUPPORTED (different key hashes or placement rules, a modula
 * count too long, too many model pairs, see above), MCR_ERR_NOMEM. */
MCR_EXTERN int mcr_diff_new(const mcr_snapshot *old, const mcr_snapshot *new_snap,
                            mcr_diff **out, mcr_error *err);

/* mcr_diff_free: release `d` and its references to both snapshots. NULL is
 * a no-op. No thread may use `d`, or an id read from it, afterwards. */
MCR_EXTERN void mcr_diff_free(mcr_diff *d);

/* mcr_diff_moved: the share of the hash space [0, 2^32) whose owner
 * changed, in 0..1: moved hash values / 2^32, exact (a double holds it
 * exactly); for "slots", moved CRC-16 values / 65536; for "jump" and
 * "rendezvous", the model's share (see above). It equals the sum of the
 * pairs' fractions, added in their order, and, in the continuum modes, the
 * arcs' total length / 2^32. 0 for NULL. */
MCR_EXTERN double mcr_diff_moved(const mcr_diff *d);

/* One arc of changed ownership: every hash value h with first <= h <= last
 * belonged to `from` in the old snapshot and belongs to `to` in the new one
 * (ids, never equal; strings owned by the diff's snapshots). */
typedef struct mcr_diff_arc {
    uint32_t first, last;   /* inclusive hash range, first <= last */
    const char *from, *to;  /* server ids, owned by the diff */
    uint64_t reserved[4]; /* zero; room for later fields (mcroute.h) */
} mcr_diff_arc;

/* mcr_diff_arc_count: number of arcs (0 for NULL, for an empty diff, and
 * when either snapshot has no continuum: the modula and table modes). */
MCR_EXTERN size_t mcr_diff_arc_count(const mcr_diff *d);

/* mcr_diff_arc_get: arc `i` (ascending by hash value) into *out. MCR_OK, or
 * MCR_ERR_INVALID (NULL argument, `i` out of range) with *out unchanged. */
MCR_EXTERN int mcr_diff_arc_get(const mcr_diff *d, size_t i, mcr_diff_arc *out);

/* One (from, to) pair: the share of the hash space that moved from server
 * `from` to server `to` (ids, never equal; owned by the diff). */
typedef struct mcr_diff_pair {
    const char *from, *to;
    double fraction;        /* moved hash values / 2^32, exact, > 0 (see
                               mcr_diff_moved() for slots, jump and
                               rendezvous) */
    uint64_t reserved[4]; /* zero; room for later fields (mcroute.h) */
} mcr_diff_pair;

/* mcr_diff_pair_count: number of (from, to) pairs with something moved
 * (0 for NULL and for an empty diff). */
MCR_EXTERN size_t mcr_diff_pair_count(const mcr_diff *d);

/* mcr_diff_pair_get: pair `i` into *out. Pairs are sorted by fraction, largest
 * first; equal fractions by `from`, then `to` (strcmp), so the order is
 * reproducible. MCR_OK, or MCR_ERR_INVALID (NULL argument, `i` out of
 * range) with *out unchanged. */
MCR_EXTERN int mcr_diff_pair_get(const mcr_diff *d, size_t i, mcr_diff_pair *out);

/* mcr_diff_key_moved: 1 if `key` (`len` bytes) is owned by servers with
 * different ids in the two snapshots, else 0. It locates the key in both
 * (mcr_snapshot_locate()), so every key rule of their modes applies exactly
 * as in lookups: the one-server shortcut, twemproxy's empty key and hash
 * tag, libmemcached's namespace. `d` must not be NULL (a lookup: nothing is
 * checked). Thread-safe, cannot fail. */
MCR_EXTERN int mcr_diff_key_moved(const mcr_diff *d, const void *key, size_t len);

/* ==================================================================== */
/*  Snapshot files                                                       */
/* ==================================================================== */

/* A snapshot file is the canonical text of a snapshot, one item a line,
 * every line ending in '\n':
 *
 *     mcroute-snapshot 1
 *     algorithm 1
 *     epoch 7
 *     mode stable-ketama
 *     hash md5
 *     point-hash md5
 *     hash-tag off                  (or: hash-tag value={})
 *     key-prefix off                (or: key-prefix value=ns:)
 *     servers 2
 *     server id=a host=10.0.0.1 port=11211 weight=1 zone=z1 state=active named=1 points=160 digest=...
 *     server id=10.0.0.2:11211 host=10.0.0.2 port=11211 weight=2 zone= state=down named=0 points=0 digest=...
 *     checksum 0123456789abcdef0123456789abcdef
 *
 * Values are percent-encoded (bytes outside 0x21..0x7e, and '%', as %XX);
 * an empty zone is none; `named` says whether the id was given (it matters
 * in "twemproxy-ketama"); `points` is the server's point count in the
 * continuum and `digest` a 64-bit hash of those point values. The text is
 * canonical: one snapshot has exactly one text, and a file is accepted only
 * if it is exactly the text of the snapshot rebuilt from it.
 *
 * That is format 1, the format of every mode up to "stable-ketama" (so
 * their files and checksums are what they always were). The native table
 * modes ("jump" onwards) write format 2, which this build reads as well
 * (and which older builds refuse as an unknown format):
 *
 *     mcroute-snapshot 2
 *     ...                           (as format 1 down to key-prefix)
 *     table 16384                   (maglev: M; slots: the slot count; else 0)
 *     servers 2
 *     server id=a ... points=8192 digest=... map=0-8191
 *     server id=b ... points=8192 digest=... map=8192-16383
 *     checksum ...
 *
 * where `map` lists what the server owns in the map of "jump" (its
 * buckets) or "slots" (its slots), as ascending maximal ranges "a-b" or
 * single numbers "a" joined by ','; it is empty in the other modes. In the
 * table modes `points` counts the entries, buckets or slots the server owns
 * and `digest` hashes their numbers. A file must list every bucket or slot
 * exactly once (else MCR_ERR_DUPLICATE or MCR_ERR_SYNTAX naming it), and a
 * jump server exactly `weight` buckets. */

/* mcr_snapshot_save: write the canonical text of `snap` and its checksum
 * line to `path`, atomically: into a new temporary file in the same
 * directory (mode 0644), flushed to disk (fsync), then renamed over `path`,
 * so a reader (or mcr_snapshot_load) sees the old file or the new one,
 * never a part. MCR_OK, or MCR_ERR_INVALID (NULL argument), MCR_ERR_IO
 * (cannot create, write, sync or rename; the message names the file and
 * the system error; the temporary file is removed and `path` untouched),
 * MCR_ERR_NOMEM. Thread-safe for distinct paths. */
MCR_EXTERN int mcr_snapshot_save(const mcr_snapshot *snap, const char *path, mcr_error *err);

/* mcr_snapshot_load: read a snapshot file written by mcr_snapshot_save(),
 * verify it and rebuild the snapshot. In order:
 *   1. the file must end with a checksum line; a file without one
 *      (truncated, empty, not a snapshot file) is MCR_ERR_SYNTAX;
 *   2. the checksum of the text must match it: any changed byte gives
 *      MCR_ERR_CORRUPT ("checksum mismatch");
 *   3. the header lines must parse (MCR_ERR_SYNTAX naming the line; an
 *      unknown format version or MCR_SNAPSHOT_ALGORITHM is
 *      MCR_ERR_UNSUPPORTED; a known name that is invalid here,
 *      MCR_ERR_UNKNOWN / MCR_ERR_RANGE), and a maglev table must be one its
 *      servers justify (MCR_ERR_RANGE, see MCR_MAGLEV_SIZE_FREE), checked
 *      before anything is built: the checksum only tells corruption apart,
 *      since whoever writes a file can compute it;
 *   4. when `current` is not NULL and `force` is 0, the file's epoch must be
 *      above current's: an equal or older one is stale, MCR_ERR_STALE (so a
 *      stale file is reported as stale even if a server line is bad);
 *   5. every server line must parse, as in 3 (and MCR_ERR_DUPLICATE);
 *   6. the snapshot rebuilt from the file (continuum included) must have
 *      exactly the file's text: otherwise MCR_ERR_CORRUPT naming the first
 *      line that differs (a file written by an incompatible build).
 * Messages name the file, and the line where there is one. On success *out
 * is a new reference with the file's epoch; on any error nothing is built
 * and *out is unchanged, so a caller keeps serving `current`. `current` is
 * only read. Also MCR_ERR_IO (unreadable file), MCR_ERR_NOMEM. Thread-safe. */
MCR_EXTERN int mcr_snapshot_load(const char *path, const mcr_snapshot *current, int force,
                                 mcr_snapshot **out, mcr_error *err);

/* mcr_snapshot_text: the canonical text of `snap` (what mcr_snapshot_save()
 * writes, checksum line included), for a store other than a file (the
 * fleet keeps it in etcd). On success *out is a new NUL-terminated buffer
 * that the caller releases with free(), and *len (when `len` is not NULL)
 * its length without the NUL. Errors (*out unchanged): MCR_ERR_INVALID
 * (NULL snap or out), MCR_ERR_NOMEM. Thread-safe. */
MCR_EXTERN int mcr_snapshot_text(const mcr_snapshot *snap, char **out, size_t *len,
                                 mcr_error *err);

/* Flags of mcr_snapshot_parse(). */
#define MCR_SNAPSHOT_FORCE 1u /* accept an epoch not above current's */

/* mcr_snapshot_parse: mcr_snapshot_load() of `len` bytes of text in memory
 * (they need not be NUL-terminated, and are only read): the same checks in
 * the same order, with the same results. `name` says where the text comes
 * from in messages, as the path does for a file ("etcd key /x", say); NULL
 * gives "snapshot text". `flags` is 0 or MCR_SNAPSHOT_FORCE (load's
 * `force`); other bits are MCR_ERR_INVALID. `text` may be NULL only when
 * `len` is 0 (then MCR_ERR_SYNTAX, as for an empty file). On success *out
 * is a new reference; on any error *out is unchanged. Thread-safe. */
MCR_EXTERN int mcr_snapshot_parse(const char *text, size_t len, const char *name,
                                  const mcr_snapshot *current, unsigned flags,
                                  mcr_snapshot **out, mcr_error *err);

/* ==================================================================== */
/*  Replicas                                                             */
/* ==================================================================== */

/* mcr_snapshot_replicas: the servers that hold `n` copies of `key` (`len`
 * bytes): the primary, then further ACTIVE servers found clockwise from the
 * key's point, never one server twice. Writes snapshot server indexes (as
 * mcr_snapshot_locate() and mcr_snapshot_server() number them) to
 * out[0 .. count-1] and returns count (<= n); out[0] is always
 * mcr_snapshot_locate(snap, key, len).
 *
 * Order. The walk goes clockwise over the continuum from the key's point
 * (in the modula modes: over the active servers from the primary's upwards,
 * wrapping). In the native table modes it follows the mode's own order:
 * "rendezvous", the servers by descending score (the top N); "maglev", the
 * table entries after the key's; "slots", the servers of the slots of the
 * key's slot's probe sequence (the sequence of its fallback, so that the
 * server that serves a slot while its owner is down is, in general, its
 * first replica); "jump", the servers of the buckets met by jumping on
 * with the next keys (as a key in a hole does). Slots and jump try at most
 * 4 probes per active server (and 1024); then, in these four modes only,
 * every active server from the primary's ring index upwards, so that all
 * are met. Each
 * server not met before is taken at once if it has a zone
 * that no server taken so far has; otherwise it is set aside. Once the walk
 * is over, the set-aside servers fill the remaining places: first those
 * without a zone, then those in a zone already used, each group in
 * clockwise order. So distinct zones come before a second server in one
 * zone, and when no server has a zone the result is simply the primary and
 * the next distinct servers clockwise.
 *
 * Under-replication. *under_replicated (when not NULL) is set to 1 if
 * count < n (fewer active servers than n; in the weighted reference modes a
 * server too light for a single point owns none and is never met either),
 * or if the servers returned span fewer distinct zones than min(n, Z), Z
 * being the number of distinct zones among the active servers (servers
 * without a zone count for no zone; a primary without a zone can make it
 * so); otherwise to 0.
 *
 * Work. The walk visits each point (entry, bucket) at most once and stops
 * as soon as the answer is settled: n servers in distinct zones, or every
 * zone used and enough servers set aside. "rendezvous" computes every
 * server's score once (O(N)), and sorts them when more than 4 candidates
 * are needed (heap memory beyond 32 servers; without it, the walk is the
 * primary and the sweep). n == 0 returns 0 (`out` may then be NULL) with
 * *under_replicated 0. `snap`, and `out` when n > 0, must not be NULL.
 * Thread-safe. Cannot fail. */
MCR_EXTERN size_t mcr_snapshot_replicas(const mcr_snapshot *snap, const void *key, size_t len,
                                        size_t n, uint32_t *out, int *under_replicated);

#ifdef __cplusplus
}
#endif

#endif /* MCROUTE_SNAPSHOT_H */
