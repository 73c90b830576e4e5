/* SPDX-License-Identifier: BSD-3-Clause */
/* fleet_internal.h: what the fleet's files share: options checked and copied, the pool's keys, reading a pool's value, the bounds of an epoch and the comparison of placement parameters (writers and followers), the blocking calls' session (store.c), migration records as JSON (migration_record.c); never installed. */
#ifndef MCR_FLEET_INTERNAL_H
#define MCR_FLEET_INTERNAL_H

#include <signal.h>

#include "etcd.h"
#include "mcroute_fleet.h"

/* The options, checked, with their strings copied and the keys derived. */
typedef struct mcr__fleet_conf {
    char *endpoints;
    char *pool;
    char *prefix;
    char *snapshot_key;   /* PREFIX POOL "/snapshot" */
    char *clients_prefix; /* PREFIX POOL "/clients/" */
    char *migration_key;  /* PREFIX POOL "/migration" */
    char *lock_key;       /* PREFIX POOL "/migration-lock" */
    unsigned request_timeout_ms;
    unsigned wait_ms;
    unsigned retries;
} mcr__fleet_conf;

/* Check o (MCR_ERR_INVALID naming the field) and fill c. */
int mcr__fleet_conf_init(mcr__fleet_conf *c, const mcr_fleet_options *o, mcr_error *err);
void mcr__fleet_conf_cleanup(mcr__fleet_conf *c);

/* Whether s is a valid pool name or client id (1..MCR_FLEET_NAME_MAX of
 * [A-Za-z0-9._:-]). */
bool mcr__fleet_name_ok(const char *s);

/* SIGPIPE. libevent writes to sockets with writev(), without MSG_NOSIGNAL:
 * a connection etcd resets while a request is written would raise SIGPIPE,
 * whose default action ends the process. So every call that talks to etcd
 * blocks SIGPIPE on its thread for the call (block, then restore: a
 * SIGPIPE raised meanwhile, pending on the thread, is taken away first),
 * and the follower's thread is created with it blocked. */
void mcr__fleet_sigpipe_block(sigset_t *old);
void mcr__fleet_sigpipe_restore(const sigset_t *old);

/* Monotonic milliseconds. */
uint64_t mcr__fleet_now_ms(void);

/* Read the pool's snapshot through e: MCR_OK with *out (a new reference)
 * and the key's mod_revision and the read's revision; MCR_ERR_UNKNOWN when
 * the key does not exist (then *missing, when not NULL, is set: a value
 * that does not parse may fail with MCR_ERR_UNKNOWN too, an unknown mode);
 * the parse errors for a value that does not verify. */
int mcr__fleet_get(mcr__etcd *e, const mcr__fleet_conf *c, bool *missing, mcr_snapshot **out,
                   uint64_t *mod_revision, uint64_t *revision, mcr_error *err);

/* Parse a value of the snapshot key read at `mod_revision`. */
int mcr__fleet_parse(const mcr__fleet_conf *c, const unsigned char *value, size_t len,
                     uint64_t mod_revision, const mcr_snapshot *current, mcr_snapshot **out,
                     mcr_error *err);

/* ---- the bounds of an epoch, and placement parameters (store.c) */

/* Followers refuse an epoch at or above MCR__FLEET_EPOCH_LIMIT (2^63: one
 * near 2^64 would leave no room for the pool's later changes; a migration
 * record cannot hold it either) and one more than MCR__FLEET_EPOCH_JUMP
 * (2^32) above the epoch they hold: epochs grow by one a change, so such a
 * value was forged or corrupted, and adopting it would lock the pool out
 * of every change that followers of the old epochs could take. Writers
 * store neither (store.c, check_room). */
#define MCR__FLEET_EPOCH_LIMIT (UINT64_C(1) << 63)
#define MCR__FLEET_EPOCH_JUMP (UINT64_C(1) << 32)

/* Where the canonical text of a snapshot (`len` bytes, not necessarily
 * NUL-terminated) holds its placement parameters: the header lines from
 * "mode" to the one before "servers" (mode, hashes, hash tag, key prefix,
 * table size). true and *at, *n; false when the text has no such lines. */
bool mcr__fleet_params_at(const char *text, size_t len, const char **at, size_t *n);

/* Whether two spans of mcr__fleet_params_at() differ; when they do, the
 * first line that differs in each, quoted (mcr__quote) into la and lb, cap
 * bytes each. Cannot fail. */
bool mcr__fleet_params_differ(const char *a, size_t na, const char *b, size_t nb, char *la,
                              char *lb, size_t cap);

/* Compare the placement parameters of a and b: MCR_OK and *same (when
 * false, la and lb as above); MCR_ERR_NOMEM (the texts could not be made),
 * MCR_ERR_CORRUPT (a text without its header). Both for `publish` (a pool
 * keeps its parameters) and for followers (what they adopt keeps them). */
int mcr__fleet_params_cmp(const mcr_snapshot *a, const mcr_snapshot *b, bool *same, char *la,
                          char *lb, size_t cap, mcr_error *err);

/* ---- the blocking calls (store.c) */

/* One blocking call: an etcd client on this thread and a deadline; an
 * operation is retried across rounds of endpoints (with backoff) while it
 * fails with MCR_ERR_CONNECT and the deadline has not passed. SIGPIPE is
 * blocked between open and close. */
typedef struct mcr__fleet_session {
    sigset_t sigmask;   /* the thread's, restored at the end */
    mcr__fleet_conf c;
    mcr__etcd e;
    uint64_t deadline;
    unsigned backoff_ms;
} mcr__fleet_session;

int mcr__fleet_session_open(mcr__fleet_session *s, const mcr_fleet_options *o, mcr_error *err);
void mcr__fleet_session_close(mcr__fleet_session *s);
/* After a failed round (rc MCR_ERR_CONNECT): wait, and say whether to try
 * again (false: not a connection failure, or the deadline passed). */
bool mcr__fleet_session_again(mcr__fleet_session *s, int rc);

/* The next snapshot of `cur`: the changes from it to `target`'s list (with
 * its states when flags has MCR_CHANGES_STATES) applied, epoch + 1; *next
 * NULL when the lists match. MCR_ERR_INVALID when the placement parameters
 * differ (the message names the first). */
int mcr__fleet_next_to(const mcr_snapshot *cur, const mcr_snapshot *target, unsigned flags,
                       mcr_snapshot **next, mcr_error *err);

/* "outcome unknown: ..." for a write sent and not answered, `what` naming
 * it, the failure's message (err's) kept: MCR_ERR_NOMEM when `rc` is (memory
 * ran out where the answer would have been read), else MCR_ERR_CONNECT. */
int mcr__fleet_outcome_unknown(mcr_error *err, int rc, const char *what);

/* Unix time in ms (CLOCK_REALTIME). */
uint64_t mcr__fleet_unix_ms(void);

/* ---- migration records (migration_record.c) */

/* The phase called `name`: true and *out, or false. */
bool mcr__migration_phase_parse(const char *name, mcr_migration_phase *out);

/* Decode and check a record's value, read at `mod_revision` of `key` (both
 * for messages): *out filled (its snapshots new references, mod_revision
 * set). MCR_ERR_SYNTAX naming the key and the field, the snapshot errors,
 * MCR_ERR_NOMEM; *out zeroed on error. */
int mcr__migration_parse(const char *key, uint64_t mod_revision, const unsigned char *value,
                         size_t len, mcr_migration *out, mcr_error *err);

/* Check *m (MCR_ERR_INVALID naming the field) and write it as JSON text
 * (malloc'd, *len its length). */
int mcr__migration_format(const mcr_migration *m, char **out, size_t *len, mcr_error *err);

/* Whether s is 1 to MCR_MIGRATION_ID_MAX lower-case hex digits. */
bool mcr__migration_id_ok(const char *s);

#endif
