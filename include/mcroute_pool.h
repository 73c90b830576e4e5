/* SPDX-License-Identifier: BSD-3-Clause */
/* mcroute_pool.h: a libevent connection pool that routes every request through a router's current snapshot.
 * Library: libmcroute_pool, `pkg-config --cflags --libs mcroute-pool` (and
 * libmcroute, which it links; the application links libevent itself, for
 * its event_base).
 *
 * INTRODUCTION
 *
 * A pool sends memcached requests to the servers that the current snapshot
 * of a router (mcroute_router.h) names, over connections it keeps, from an
 * event loop that the application owns (a libevent `struct event_base`).
 *
 *   mcr_pool  Connections to the servers of one router, driven by one
 *             event_base. One pool per event-loop thread; several pools (in
 *             several threads) may share one router.
 *
 * Routing. Each request is routed when it is submitted: the pool looks at
 * the router's generation (mcr_router_generation(), lock-free: it moves at
 * every new current snapshot, a publish or a local state) and, when it
 * changed, takes a reference to the new snapshot. The key goes to mcr_snapshot_locate()'s server. A
 * request then completes against the server it was routed to, even if
 * another snapshot is published meanwhile; servers that a new snapshot no
 * longer lists (or lists as DRAINING / DOWN) get no new request, finish what
 * they have in flight, and their connections close. The pool looks for a
 * new snapshot at every submission and whenever a connection has read
 * replies; mcr_pool_refresh() adopts it without either (a pool with no
 * traffic at all keeps its idle connections to removed servers until then).
 *
 * Several pools on one router. With MCR_POLICY_EJECT, an ejection is a
 * local state of the router (mcr_router_set_local_state()), shared by every
 * pool of that router, in this process only: the pool that ejects a server
 * is the one that probes it and re-adds it (clears the local state); a
 * pool that finds the server ejected already sets it too, and either
 * pool's re-add brings it back for both. mcr_pool_free() clears the local
 * states the pool set and has not cleared (a server no pool probes is not
 * kept out); another pool that still fails to reach it ejects it again.
 * The router's published snapshot, and so its epoch, is never changed by a
 * pool.
 *
 * Migrations. While the router holds a migration (a resize from
 * snapshot `from` to `to`, mcr_router_set_migration() in
 * mcroute_router.h), the pool treats the keys whose owner differs between
 * its current snapshot and the migration's other one (`to` while
 * copying, `from` once switched) as moved, and only those:
 *   - reads (get, gets, multi-gets): from the current owner; once
 *     switched, a miss there is read at the owner in `from` (in meta,
 *     whatever the pool's protocol, to learn the TTL) and its hit is the
 *     result, with via_previous = 1 and `server` naming that owner. If the
 *     previous owner fails or misses, the result is the first miss.
 *     Nothing read at a previous owner is written to the current one:
 *     such a copy could be read by another process before anything could
 *     check it against a delete
 *     acknowledged meanwhile. The copy before the switch brings the keys
 *     (mcroute_migrate.h). Closing (MCR_MIGRATION_FLAG_CLOSING set), a miss at
 *     the current owner is the result;
 *   - writes reach both owners, in both phases. A set goes to both at
 *     once. Every other write (add, replace, append, prepend, cas, delete,
 *     touch, incr, decr, and gat and gats, which touch) goes to the
 *     current owner first, then, by its answer, to the other:
 *       it applied (stored, deleted, touched, a number, a gat's hit): the
 *         same to the other (a cas there as a set of the same value, a
 *         delete by CAS as a plain delete, a gat as a touch: a CAS belongs
 *         to one server), and if the other ends elsewhere (it held another
 *         value: another number, an add that finds a value) its copy is
 *         deleted;
 *       it missed (no such key; replace, append, prepend not stored):
 *         while copying, the other's copy (at the owner in `to`) is
 *         deleted: it can only be older; once switched, the key may not
 *         have reached the current owner: the command goes to the owner in
 *         `from`, whose answer is the result (via_previous = 1); closing
 *         (MCR_MIGRATION_FLAG_CLOSING), the owner in `from`'s copy is deleted:
 *         the closing processes no longer read it there;
 *       anything else (an add finding a value, a cas finding another
 *       CAS): the other is not written.
 *     The callback runs once both answered; if the other owner failed (an
 *     error, not a miss) the write's status is that error, with a message
 *     naming both servers.
 * Why this holds: the owner in `from` holds every key's latest value
 * while copying (every write reaches it first), and the owner in `to`
 * never holds a value the owner in `from` does not, but for the moment
 * between a write's two parts; the copy of mcroute_migrate.h reads a key
 * at its old owner, adds it to the new one and reads the old owner again,
 * removing its copy when a write came between, and nobody reads the new
 * owner before the switch. Once switched, both owners take every write
 * alike. So a reader on either side of the switch, in this process or
 * another one whose router has the same migration (processes adopt the
 * switch one after the other), never reads a value older than an
 * acknowledged write, nor a value whose delete was acknowledged. (Writes
 * to one key from two processes at once have no order between them, and
 * may leave the two owners with different values.) The end is the other
 * moment processes differ: one that ended its migration writes only the
 * current owner, so one still reading misses at the previous owner could
 * read there a value that the first deleted; hence the closing step, no
 * reads at the previous owner while writes still reach it, which a fleet
 * takes before it ends the migration (mcroute_fleet.h, Migrations).
 * The pool keeps connections to the servers only the other snapshot names
 * (mcr_server_stats.migration_only) until the migration ends. Its extra
 * requests count in mcr_pool_pending() and complete before
 * mcr_pool_wait() returns. Counters per server: fallback_reads,
 * fallback_hits, dual_writes.
 * A server command or a request with `server` set never goes through the
 * migration.
 *
 * Asynchronous calls. Every request function takes a callback and follows
 * libuv's contract: when the function returns an error (MCR_ERR_INVALID,
 * MCR_ERR_UNKNOWN, MCR_ERR_KEY, MCR_ERR_TOO_BIG, MCR_ERR_EMPTY,
 * MCR_ERR_NOMEM), nothing was submitted and the callback is never called;
 * when it returns MCR_OK, the callback is called exactly once, later (never
 * from inside the submitting call): from the event loop, or from
 * mcr_pool_free() for requests still pending then. It gets a result or an
 * error: a timeout, a refused connection, a server down for this pool, a
 * server error, a malformed reply, or MCR_ERR_CANCELLED (the pool was freed
 * first, or the request was still waiting for a connection to a server that
 * a new snapshot removed; requests already sent to it are answered). The
 * result and everything it points to are valid during the callback only. A
 * callback may submit further requests on the same pool; it must not free
 * the pool.
 *
 * Synchronous calls. mcr_pool_exec() submits a request and runs the event
 * loop (EVLOOP_ONCE at a time) until it completes; mcr_pool_wait() runs it
 * until every request of the pool has completed; other events of the same event_base run meanwhile. They must
 * not be called from a callback running in that event loop.
 *
 * Wire protocol. MCR_PROTO_TEXT (default) speaks memcached's classic text
 * protocol; MCR_PROTO_META turns gets, stores, deletes and arithmetic into
 * meta commands (mg, ms, md, ma; mn closes a multi-get), each carrying an
 * opaque token that the reply must echo. Replies on one connection come in
 * request order; a reply that does not fit the request at the head of the
 * queue (wrong key, wrong token, unknown line, a length over the limits)
 * closes the connection and fails every request in flight on it with
 * MCR_ERR_PROTOCOL: a reply is never delivered to another request. Text
 * gets sent in one loop pass share a "get k1 k2 ..." line, which carries a
 * key once (a get of a key already on it starts another line), so a VALUE
 * names one request: a second VALUE for a key within one reply, a VALUE for
 * a key not asked for or out of the line's order, is a protocol error; in
 * meta, so is a second reply for one token.
 *
 * Failures. A connection that cannot be made (refused, unreachable, connect
 * timeout) or breaks fails its requests; a request not answered within
 * request_timeout_ms closes its connection and fails every request in
 * flight there with MCR_ERR_TIMEOUT. Each such event counts one failure for
 * the server (timeouts and refusals counted apart); any reply resets the
 * consecutive count. After server_failure_limit consecutive failures the
 * server is "down" for this pool, and the failure policy decides:
 *
 *   MCR_POLICY_FAIL_FAST  Requests for the server fail at once (MCR_ERR_DOWN)
 *                         until retry_timeout_ms has passed; then the next
 *                         request tries a new connection, and one failure
 *                         downs the server again. A server that fails again
 *                         within retry_timeout_ms of a retry waits twice as
 *                         long (up to retry_max_ms) before the next. The
 *                         ring is never changed.
 *   MCR_POLICY_EJECT      The pool sets the server DOWN in the router's local
 *                         overlay (mcr_router_set_local_state(), NOWAIT: never
 *                         a new epoch, never blocking the loop), so its
 *                         keys move to the others, for every pool of the
 *                         router, in this process; the published snapshot
 *                         still says ACTIVE, and a later publish (a new
 *                         epoch from a fleet, an operator, a watcher) keeps
 *                         the server DOWN here while it applies. After
 *                         retry_timeout_ms the pool probes it with `version`
 *                         on a new connection, and clears the local state
 *                         only when it answers. A server that fails again
 *                         within retry_timeout_ms of coming back waits twice
 *                         as long for its next probe (up to
 *                         retry_max_ms), so the ring does not flap. A
 *                         server the published snapshot has DRAINING (an
 *                         operator's choice), or the last ACTIVE one, is
 *                         not ejected: the pool treats it as fail-fast
 *                         does.
 *   MCR_POLICY_FAILOVER   Plain reads (get, gets, multi-gets) of a down
 *                         server's keys go to the next replica that is not
 *                         down (mcr_snapshot_replicas()); everything else,
 *                         gat, gats and touch included (they change the
 *                         item), fails with MCR_ERR_DOWN. As in fail-fast,
 *                         the next request after retry_timeout_ms tries the
 *                         server again. The ring is never changed.
 *
 * Queued requests. A request that finds every connection of its server at
 * max_in_flight waits in the pool, in a queue per server (oldest first),
 * and is sent when a connection has room; one that has waited
 * queue_timeout_ms without being sent fails with MCR_ERR_TIMEOUT and a
 * message naming the server and the wait ("... waited N ms in the queue
 * without being sent ..."). So a server that accepts connections and never
 * answers holds no request for more than queue_timeout_ms plus
 * request_timeout_ms, however many rounds of connections time out ahead of
 * it. The same holds for the keys of a multi-get (their request to that
 * server is queued as one) and for gets sharing a queued get's reply (hot
 * keys): they end with it. A request is queued as well while its server's
 * connections are being made, if max_in_flight requests are written to
 * them already; a request written to a connection not made yet is not
 * queued but in flight: connect_timeout_ms bounds the connect (the
 * connection then fails, its requests with MCR_ERR_TIMEOUT) and
 * request_timeout_ms, from the write, its reply, whichever ends first.
 * A queue timeout is not a failure of the server: it counts in `errors`
 * (the request ended with an error), not in `timeouts`, never towards
 * server_failure_limit, so it never downs or ejects a server. The requests
 * in flight that held the queue are what failed, and their timeouts are
 * counted, one per connection; and a server that answers, only slower
 * than the application submits, is busy, not down: ejecting it for the
 * backlog would move that backlog onto the others.
 *
 * Keys and values. A key is 1 to 250 bytes together with the pool's key
 * prefix, without space or control byte (0x00..0x20, 0x7f); anything else is
 * refused before a byte is sent (MCR_ERR_KEY), so a key cannot inject a
 * command. Values are at most max_value_size bytes (MCR_ERR_TOO_BIG), both
 * those sent and those replied: a reply's value over it fails that key with
 * MCR_ERR_TOO_BIG, and the pool drops its bytes as they arrive, never
 * holding them; the connection stays open and in step (the server
 * answered: no failure is counted), and the next keys of the reply are
 * read as usual. A reply length over MCR_POOL_VALUE_MAX is a protocol
 * error. So a connection holds at most max_value_size plus one line plus
 * 64 KiB (one read: each is parsed before the next) of replies not yet
 * parsed. The
 * key prefix (libmemcached's namespace) is prepended on the wire and taken
 * off again in results; whether it is part of the hashed key is the
 * snapshot's business (mcr_config_set_key_prefix()). A hash tag set on the
 * config (mcr_config_set_hash_tag()) applies to routing as usual.
 *
 * Hot keys. While a plain get (or gets) of a key is in flight, further gets
 * of the same key on the pool that route to the same server wait for its
 * reply instead of sending another request, and each gets its own
 * callback. Any write of the key on the pool ends that sharing, so a get
 * submitted after a set never sees a value older than that set's request;
 * so does a get routed to another server (a new snapshot, a failover).
 *
 * Threads. A pool, and everything it calls back, lives in the thread that
 * runs its event_base: all its functions must be called from that thread
 * only, and mcr_pool_free() not from inside one of the pool's callbacks.
 * The router may be shared with any number of threads. The pool writes
 * with MSG_NOSIGNAL: a server closing a connection never raises SIGPIPE.
 *
 * Errors follow mcroute.h: MCR_OK or a negative status. The request
 * outcomes MCR_ERR_KEY .. MCR_ERR_CANCELLED are listed in mcr_status.
 */
#ifndef MCROUTE_POOL_H
#define MCROUTE_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "mcroute.h"
#include "mcroute_router.h"

#ifdef __cplusplus
extern "C" {
#endif

struct event_base;

/* ==================================================================== */
/*  Options                                                              */
/* ==================================================================== */

/* Limits of mcr_pool_options, checked by mcr_pool_new(). */
#define MCR_POOL_CONNECTIONS_MAX 64u      /* connections per server */
#define MCR_POOL_FAILURE_LIMIT_MAX 1000u  /* server_failure_limit */
#define MCR_POOL_TIMEOUT_MAX_MS 86400000u /* any timeout or retry delay: one day */
#define MCR_POOL_VALUE_MAX (1u << 30)     /* max_value_size: 1 GiB */
#define MCR_POOL_PREFIX_MAX 128u          /* key_prefix bytes */
#define MCR_POOL_EPSILON_MAX 1000.0       /* bounded_epsilon */
/* MCR_KEY_MAX (mcroute.h): the longest key, the pool's key prefix included. */

typedef enum mcr_policy {
    MCR_POLICY_FAIL_FAST = 0,
    MCR_POLICY_EJECT = 1,
    MCR_POLICY_FAILOVER = 2
} mcr_policy;

typedef enum mcr_protocol {
    MCR_PROTO_TEXT = 0,
    MCR_PROTO_META = 1
} mcr_protocol;

/* Pool settings. Zero-fill (or mcr_pool_options_init()) and set what you
 * need; a field left 0 takes the default named beside it. */
typedef struct mcr_pool_options {
    unsigned connections;          /* per server; default 1, at most 64 */
    int eager;                     /* 1: connect to every active server at
                                      creation and on each new snapshot;
                                      0: on first use */
    unsigned connect_timeout_ms;   /* default 1000 */
    unsigned request_timeout_ms;   /* default 1000 */
    mcr_policy policy;             /* default MCR_POLICY_FAIL_FAST */
    unsigned server_failure_limit; /* consecutive failures; default 2 */
    unsigned retry_timeout_ms;     /* default 30000 */
    unsigned retry_max_ms;         /* backoff ceiling; default 16 x retry_timeout_ms */
    size_t max_value_size;         /* default 1 MiB (1048576); values sent and
                                      replied (see Keys and values above) */
    const char *key_prefix;        /* namespace sent before every key; NULL or "": none.
                                      Copied. At most 128 bytes, key rules. */
    mcr_protocol protocol;         /* default MCR_PROTO_TEXT */
    unsigned max_in_flight;        /* per connection; default 1024: further
                                      requests wait in the pool, at most
                                      queue_timeout_ms (their request
                                      timeout starts when they are sent) */
    int no_coalesce;               /* 1: turn hot-key sharing off */
    double bounded_epsilon;        /* 0 (default): get and gets go to the
                                      key's owner. Above 0: to the server
                                      mcr_snapshot_locate_bounded() picks
                                      with this epsilon (0.25 is usual),
                                      a server's load being the requests of
                                      this pool not yet completed on it
                                      (queued or in flight, probes
                                      included): a hot key overflows to the
                                      next servers. Best with the "bounded"
                                      mode (<mcroute.h>); at most
                                      MCR_POOL_EPSILON_MAX. Only plain reads
                                      move: writes go to the owner, so a
                                      read that overflows finds the value
                                      only where it was written too (the
                                      servers of mcr_snapshot_replicas(),
                                      same order) and misses otherwise. */
    unsigned queue_timeout_ms;     /* how long a request may wait in the pool
                                      without being sent (every connection
                                      of its server at max_in_flight): then
                                      it fails with MCR_ERR_TIMEOUT, a
                                      message saying it waited in the queue,
                                      never sent; not a failure of the
                                      server (see Failures). Default 4 x
                                      request_timeout_ms, capped at
                                      MCR_POOL_TIMEOUT_MAX_MS. */
    uint64_t reserved[8]; /* zero; room for later fields (mcroute.h) */
} mcr_pool_options;

/* mcr_pool_options_init: zero-fill *opts (all defaults). NULL is a no-op. */
MCR_EXTERN void mcr_pool_options_init(mcr_pool_options *opts);

/* An option handle of libmemcached's vocabulary (mcroute_libmemcached.h,
 * in libmcroute). */
typedef struct mcr_lmc mcr_lmc;

/* mcr_pool_options_from_lmc: set the fields of *opts that an mcr_lmc's
 * (mcroute_libmemcached.h) libmemcached connection behaviours and
 * namespace decide, so that a connection pool treats the servers as the
 * libmemcached handle would. These fields are always written, from the
 * current values (libmemcached's defaults when never set: 4000, 5000,
 * 2000, 5, FAIL_FAST, NULL for a new mcr_lmc); the others are left as they
 * are (start from a zeroed struct, or mcr_pool_options_init()):
 *
 *   CONNECT_TIMEOUT (ms)   -> connect_timeout_ms
 *   POLL_TIMEOUT (ms)      -> request_timeout_ms. libmemcached's sockets
 *                             are always non-blocking and every wait for a
 *                             reply is a poll() bounded by POLL_TIMEOUT;
 *                             RCV_TIMEOUT and SND_TIMEOUT (SO_RCVTIMEO,
 *                             SO_SNDTIMEO) bound nothing there and are not
 *                             used.
 *                             For both: a negative value (libmemcached waits
 *                             forever) gives 0, the pool's default (1000 ms).
 *   RETRY_TIMEOUT (s)      -> retry_timeout_ms, times 1000; 0 or negative
 *                             (retry at the next request, in a later second)
 *                             gives 1 ms, the shortest a pool knows.
 *   SERVER_FAILURE_LIMIT   -> server_failure_limit
 *   REMOVE_FAILED_SERVERS  -> policy: on (it is AUTO_EJECT_HOSTS too) gives
 *                             MCR_POLICY_EJECT, off MCR_POLICY_FAIL_FAST.
 *   NAMESPACE              -> key_prefix: a pointer into `lmc`, NULL when
 *                             there is no namespace. It stays valid until
 *                             `lmc` is freed or its namespace changes (an
 *                             option string with RESET); mcr_pool_new()
 *                             copies it, so create the pool before that.
 *                             Sent with every key whether or not
 *                             HASH_WITH_NAMESPACE puts it in the hash, as
 *                             libmemcached does; placement is
 *                             mcr_lmc_config()'s business.
 *
 * Not used: BINARY_PROTOCOL (the pool speaks the text or meta protocol to
 * the same servers, which keep the same items whatever protocol stored
 * them; a key that only the binary protocol can carry, with a space or a
 * control byte, is refused per request with MCR_ERR_KEY), DEAD_TIMEOUT
 * (the pool's retry_timeout_ms serves for removed servers too),
 * SERVER_TIMEOUT_LIMIT, and the options that are not connection behaviours
 * (--TCP-NODELAY, --NUMBER-OF-REPLICAS, ...). libmemcached never backs
 * off: set retry_max_ms to retry_timeout_ms for its fixed interval.
 *
 * Errors, *opts unchanged, the message naming the behaviour and its value:
 * MCR_ERR_INVALID (NULL lmc or opts), MCR_ERR_RANGE (what mcr_pool_new()
 * would refuse or the pool cannot express: CONNECT_TIMEOUT or
 * POLL_TIMEOUT 0, with which libmemcached fails every connection or
 * request at once, or above 86400000 ms (one day); RETRY_TIMEOUT above
 * 86400 s; SERVER_FAILURE_LIMIT 0 (a 2^32 multiple, truncated) or above
 * 1000; a namespace with a space or control byte, which libmemcached
 * allows with the binary protocol and the pool's key rules do not). */
MCR_EXTERN int mcr_pool_options_from_lmc(mcr_pool_options *opts, const mcr_lmc *lmc,
                                         mcr_error *err);

/* mcr_policy_from_name: "fail-fast", "eject" or "failover" (exactly, case
 * matters) into *out. MCR_OK, MCR_ERR_UNKNOWN (*out unchanged), or
 * MCR_ERR_INVALID (NULL argument). */
MCR_EXTERN int mcr_policy_from_name(const char *name, mcr_policy *out);

/* mcr_policy_name: the name of a policy, "unknown" for other values. */
MCR_EXTERN const char *mcr_policy_name(mcr_policy policy);

/* ==================================================================== */
/*  Pool                                                                 */
/* ==================================================================== */

typedef struct mcr_pool mcr_pool;

/* mcr_pool_new: a pool over `router` on `base`. Both must outlive the pool;
 * the router may hold no snapshot yet (requests then fail with
 * MCR_ERR_EMPTY at submission). `opts` may be NULL (defaults); it is
 * copied. Errors (*out unchanged): MCR_ERR_INVALID (NULL base, router or
 * out), MCR_ERR_RANGE (an option out of range, `err` names it: connections
 * over MCR_POOL_CONNECTIONS_MAX, server_failure_limit over
 * MCR_POOL_FAILURE_LIMIT_MAX, a timeout or retry delay over
 * MCR_POOL_TIMEOUT_MAX_MS, max_value_size over MCR_POOL_VALUE_MAX, a
 * key_prefix over MCR_POOL_PREFIX_MAX bytes or with a space or control
 * byte, an unknown policy or protocol, a bounded_epsilon negative, NaN or
 * over MCR_POOL_EPSILON_MAX), MCR_ERR_NOMEM. A retry_max_ms left
 * 0 becomes 16 x retry_timeout_ms capped at MCR_POOL_TIMEOUT_MAX_MS; one
 * below retry_timeout_ms is raised to it. max_in_flight takes any value
 * from 1 (0: the default). */
MCR_EXTERN int mcr_pool_new(struct event_base *base, mcr_router *router,
                            const mcr_pool_options *opts, mcr_pool **out, mcr_error *err);

/* mcr_pool_free: close every connection and free the pool. Every request
 * whose callback has not run yet completes first, inside this call, exactly
 * once, with MCR_ERR_CANCELLED: in flight, queued, not yet sent, sharing
 * another get's reply, and those that had failed already (a down server, a
 * refused connection, a multi-get's bad key) but were not reported yet.
 * Results already delivered are not repeated: a multi-get's keys reported
 * keep theirs, its other keys get MCR_ERR_CANCELLED, and its done_cb the
 * first error met, as always. The callbacks must not use the pool. NULL is
 * a no-op. Not from a callback of this pool. */
MCR_EXTERN void mcr_pool_free(mcr_pool *pool);

/* mcr_pool_set_unix_path: connect to the server whose id is `id` through
 * the Unix socket `path` instead of its host and port (which then only
 * place keys). Takes effect for connections opened afterwards. The id
 * need not be in the current snapshot: the mapping waits for a server of
 * that id to appear. `path` NULL removes the mapping. MCR_OK, MCR_ERR_INVALID (NULL pool or id),
 * MCR_ERR_TOO_LONG (path too long for sockaddr_un), MCR_ERR_NOMEM. */
MCR_EXTERN int mcr_pool_set_unix_path(mcr_pool *pool, const char *id, const char *path);

/* mcr_pool_refresh: adopt the router's current snapshot now (servers it
 * dropped start draining; with `eager`, new ones are connected). Called
 * implicitly by every submission. MCR_OK, MCR_ERR_EMPTY (no snapshot),
 * MCR_ERR_NOMEM, MCR_ERR_INVALID (NULL pool). */
MCR_EXTERN int mcr_pool_refresh(mcr_pool *pool);

/* mcr_pool_pending: requests submitted and not yet called back (a
 * multi-get counts once); 0 for NULL. */
MCR_EXTERN size_t mcr_pool_pending(const mcr_pool *pool);

/* mcr_pool_wait: run the event loop (EVLOOP_ONCE at a time) until no
 * request of the pool is pending (the pool's own probes of ejected servers
 * do not count). MCR_OK, or MCR_ERR_INVALID (NULL pool; called from inside
 * a callback run by the pool's event_base, which libevent cannot re-enter).
 * Not thread-safe (the loop's thread). */
MCR_EXTERN int mcr_pool_wait(mcr_pool *pool);

/* mcr_pool_run_once: one step of mcr_pool_wait(): what is submitted is
 * sent, then, if a request is pending, one pass of the event loop runs
 * (EVLOOP_ONCE: it blocks until an event is ready and runs the callbacks
 * of those ready), so that the caller can work on the results that came
 * (a binding turning them into its own objects, say) while the other
 * requests are on their way. Returns at once when nothing is pending.
 * Loop on it while mcr_pool_pending() is not 0 to wait for all. MCR_OK,
 * or MCR_ERR_INVALID as mcr_pool_wait(). Not thread-safe (the loop's
 * thread). */
MCR_EXTERN int mcr_pool_run_once(mcr_pool *pool);

/* mcr_pool_set_own_loop: `own` 1 declares that nothing but mcr_pool_wait()
 * and mcr_pool_exec() runs the loop of the pool's event_base (the base of
 * a synchronous client, made for the pool alone): they then skip their
 * check that they are not called from inside a callback of that loop, a
 * non-blocking pass of the loop (an epoll_wait(2)) at every call. Called
 * from one of this pool's own callbacks they still fail with
 * MCR_ERR_INVALID; from a callback of a loop the program runs on the base
 * itself they would re-enter libevent: never set it then. 0 (the default):
 * checked. MCR_OK, or MCR_ERR_INVALID (NULL pool). Not thread-safe (the
 * loop's thread). */
MCR_EXTERN int mcr_pool_set_own_loop(mcr_pool *pool, int own);

/* ==================================================================== */
/*  Requests                                                             */
/* ==================================================================== */

typedef enum mcr_op {
    MCR_OP_GET = 0,
    MCR_OP_GETS,      /* get with the CAS unique */
    MCR_OP_GAT,       /* get and touch: exptime is the new expiry */
    MCR_OP_GATS,
    MCR_OP_SET,
    MCR_OP_ADD,
    MCR_OP_REPLACE,
    MCR_OP_APPEND,
    MCR_OP_PREPEND,
    MCR_OP_CAS,       /* set if the item's CAS unique is still `cas` */
    MCR_OP_DELETE,
    MCR_OP_INCR,
    MCR_OP_DECR,
    MCR_OP_TOUCH,
    /* Server commands: sent to the server named by `server` (an id of the
     * current snapshot, in any state), not routed by key. */
    MCR_OP_VERSION,
    MCR_OP_STATS,     /* `key` (optional): the stats group, e.g. "slabs" */
    MCR_OP_FLUSH_ALL, /* exptime: delay in seconds, 0 now */
    MCR_OP_NOOP,      /* text: "version"; meta: "mn". A round trip. */
    MCR_OP_COUNT
} mcr_op;

/* mcr_op_name: the command's name ("get", "set", "flush_all", ...), a
 * static string; "unknown" for values outside mcr_op. */
MCR_EXTERN const char *mcr_op_name(mcr_op op);

/* A request; only the fields its op uses are read. Everything is copied
 * at submission: the caller may reuse the memory when the call returns. */
typedef struct mcr_request {
    mcr_op op;
    const void *key;       /* without the pool's key prefix */
    size_t key_len;
    const void *value;     /* set, add, replace, append, prepend, cas */
    size_t value_len;
    uint32_t flags;        /* client flags stored with the value */
    int64_t exptime;       /* TTL in seconds (or a Unix time, memcached's rule);
                              also gat/gats/touch/flush_all; 0..2^31-1 */
    uint64_t cas;          /* MCR_OP_CAS; MCR_OP_DELETE: 0, or delete only
                              while the item's CAS is still this one
                              (meta `md C`, sent in meta whatever the
                              pool's protocol; MCR_REPLY_EXISTS when it
                              changed) */
    uint64_t delta;        /* incr, decr */
    const char *server;    /* server commands: the server's id (of the current
                              snapshot, or of a migration's other one). Keyed ops:
                              NULL routes by key; an id sends the request
                              to that server of the snapshot instead,
                              whatever its state (to probe where a key
                              really is, or repair it); no failover. */
    uint64_t reserved[4]; /* zero; room for later fields (mcroute.h) */
} mcr_request;

/* What a reply said, when status is MCR_OK. */
typedef enum mcr_reply {
    MCR_REPLY_HIT = 0,     /* get family: value, flags (and cas) set. Delivered as
                              soon as the value has arrived (before the reply's
                              END): a connection lost after it does not undo it */
    MCR_REPLY_MISS,        /* get family, touch, incr/decr, delete, cas: no such key */
    MCR_REPLY_STORED,
    MCR_REPLY_NOT_STORED,  /* add of an existing key, replace/append of a missing one */
    MCR_REPLY_EXISTS,      /* cas, a delete by CAS: the item changed since */
    MCR_REPLY_DELETED,
    MCR_REPLY_TOUCHED,
    MCR_REPLY_NUMBER,      /* incr/decr: `number` holds the new value */
    MCR_REPLY_OK,          /* flush_all, noop */
    MCR_REPLY_VERSION,     /* value: the version string */
    MCR_REPLY_STATS        /* value: "name value\n" lines */
} mcr_reply;

/* mcr_reply_name: "hit", "miss", "stored", "not_stored", "exists",
 * "deleted", "touched", "number", "ok", "version", "stats"; "unknown" for
 * other values. A static string. */
MCR_EXTERN const char *mcr_reply_name(mcr_reply reply);

/* A completed request, valid during its callback only. */
typedef struct mcr_result {
    int status;            /* MCR_OK, or why the request failed */
    mcr_reply reply;       /* status == MCR_OK: what the server said */
    mcr_op op;
    const char *key;       /* the key as given (without prefix); not NUL-terminated */
    size_t key_len;
    const char *value;     /* HIT, VERSION, STATS; else NULL */
    size_t value_len;
    uint32_t flags;
    uint64_t cas;          /* gets, gats; in MCR_PROTO_META also a stored
                              item's CAS (set, add, ... answered STORED) */
    uint64_t number;       /* incr, decr */
    const char *server;    /* id of the server it was sent to; NULL when it was
                              refused before choosing one (MCR_ERR_EMPTY) */
    uint64_t epoch;        /* epoch of the snapshot it was routed with (local
                              states, ejections included, keep the epoch) */
    const char *message;   /* status != MCR_OK: a sentence naming the problem */
    int64_t ttl;           /* a HIT in MCR_PROTO_META (and a migration's reads
                              from a previous owner): the item's remaining
                              seconds, -1 when it never expires;
                              MCR_TTL_UNKNOWN otherwise (text replies carry none) */
    int via_previous;      /* 1: served by the key's owner in a migration's
                              `from` snapshot (see Migrations); `server` names it */
    size_t index;          /* a multi-get's key callback: the key's position in
                              the keys given to mcr_pool_get_multi() (a key given
                              twice is answered twice, once with each); 0 for
                              anything else */
} mcr_result;

/* mcr_result.ttl when the reply did not say. */
#define MCR_TTL_UNKNOWN (-2)

typedef void (*mcr_pool_cb)(const mcr_result *res, void *arg);

/* mcr_pool_submit: route and send one request; `cb(result, arg)` later.
 * A get or gets routed by key (no `server`, no bounded loads) is routed at
 * the end of the loop pass, before its writes, with the other such gets of
 * the pass (their keys hashed together, mcr_snapshot_locate_many()), by
 * the snapshot current at its submission; every other request goes out
 * after the gets submitted before it. Such a get that cannot be queued for
 * its server for want of memory is called back with MCR_ERR_NOMEM.
 * Errors (nothing sent, cb never called): MCR_ERR_INVALID (NULL pool, req
 * or cb; an unknown op; a server command without `server`; exptime outside
 * 0..2^31-1; NULL key or value with a length; called while the pool is
 * being freed), MCR_ERR_UNKNOWN (`server` names no server of the current
 * snapshot), MCR_ERR_KEY, MCR_ERR_TOO_BIG, MCR_ERR_EMPTY (the router holds
 * no snapshot), MCR_ERR_NOMEM. `err` (may be NULL) names the problem. */
MCR_EXTERN int mcr_pool_submit(mcr_pool *pool, const mcr_request *req, mcr_pool_cb cb,
                               void *arg, mcr_error *err);

/* Shorthands for mcr_pool_submit() with a request of that op: the same
 * errors, named in `err` (may be NULL). */
MCR_EXTERN int mcr_pool_get(mcr_pool *pool, const void *key, size_t len, mcr_pool_cb cb,
                            void *arg, mcr_error *err);
MCR_EXTERN int mcr_pool_set(mcr_pool *pool, const void *key, size_t key_len,
                            const void *value, size_t value_len, uint32_t flags,
                            int64_t exptime, mcr_pool_cb cb, void *arg, mcr_error *err);
MCR_EXTERN int mcr_pool_delete(mcr_pool *pool, const void *key, size_t len, mcr_pool_cb cb,
                               void *arg, mcr_error *err);

/* mcr_pool_get_multi: get (op MCR_OP_GET or MCR_OP_GETS) `n` keys: they
 * are split by server, one request per server (several when a connection's
 * share is large), and the results merged. `key_cb` is called once per
 * key (keys[i], lens[i]), in any order, with a HIT, a MISS or an error for
 * that key alone (MCR_ERR_KEY for a key that breaks the rules: the others
 * are still fetched) and mcr_result.index = i; then `done_cb` once, after
 * every key_cb, with a result whose status is MCR_OK when every key got a
 * reply (hits and misses) or the first error met otherwise, `number` the
 * count of hits (a key given twice and found counts twice, as it is
 * reported twice), key_len and index 0. Duplicate keys are fetched once and
 * reported once per occurrence, each with its own index. Errors (no
 * callback at all): MCR_ERR_INVALID (NULL pool, keys, lens or a callback;
 * n == 0; another op; the pool being freed), MCR_ERR_EMPTY, MCR_ERR_NOMEM.
 * `err` (may be NULL) names the problem. */
MCR_EXTERN int mcr_pool_get_multi(mcr_pool *pool, mcr_op op, const void *const *keys,
                                  const size_t *lens, size_t n, mcr_pool_cb key_cb,
                                  mcr_pool_cb done_cb, void *arg, mcr_error *err);

/* ==================================================================== */
/*  Synchronous calls                                                    */
/* ==================================================================== */

/* An owned copy of a result, filled by mcr_pool_exec(). */
typedef struct mcr_owned_result {
    int status;
    mcr_reply reply;
    char *value;           /* malloc'd, NUL-terminated (also value_len), or NULL */
    size_t value_len;
    uint32_t flags;
    uint64_t cas;
    uint64_t number;
    char server[256];      /* "" when none */
    uint64_t epoch;
    char message[256];
    uint64_t reserved[4]; /* zero; room for later fields (mcroute.h) */
} mcr_owned_result;

/* mcr_pool_exec: submit `req` and run the loop until it completes; copy the
 * result into *out (free out->value with mcr_owned_result_clear()). *out is
 * overwritten first, without freeing what it held: clear a used one before.
 * Returns the submission error (then *out holds it too, with the message),
 * or the result's status. MCR_ERR_INVALID (also in out->status) for a NULL
 * pool or req, or when called from inside a callback run by the pool's
 * event_base; with a NULL `out`, MCR_ERR_INVALID and nothing else. */
MCR_EXTERN int mcr_pool_exec(mcr_pool *pool, const mcr_request *req, mcr_owned_result *out);

/* mcr_owned_result_clear: free out->value and zero *out. NULL is a no-op. */
MCR_EXTERN void mcr_owned_result_clear(mcr_owned_result *out);

/* ==================================================================== */
/*  Observability                                                        */
/* ==================================================================== */

typedef enum mcr_server_health {
    MCR_HEALTH_UP = 0,       /* in use */
    MCR_HEALTH_DOWN = 1,     /* failure limit reached, waiting to retry (fail-fast, failover) */
    MCR_HEALTH_EJECTED = 2,  /* set DOWN by this pool in the router's local overlay
                                (eject policy), waiting to probe */
    MCR_HEALTH_DRAINING = 3  /* no longer in the pool's snapshot, or listed there DRAINING
                                or DOWN: no keyed request; its connections close once
                                their requests are answered */
} mcr_server_health;

/* Per-server counters of one pool, since the pool was created. */
typedef struct mcr_server_stats {
    char id[256];
    char host[MCR_HOSTNAME_MAX + 1];
    int port;
    mcr_server_health health;
    uint64_t requests;        /* requests sent (one per key of a multi-get) */
    uint64_t hits, misses;    /* get family */
    uint64_t errors;          /* requests that ended with an error */
    uint64_t timeouts;        /* timeout failures */
    uint64_t refusals;        /* connect failures, resets, closes */
    uint64_t ejections;       /* times this pool ejected it (set it DOWN locally) */
    uint64_t coalesced;       /* gets answered by another get's reply */
    /* Its connections' system calls (all of them, since the pool was created),
     * to tell how many requests a write carries (requests / writes) and what
     * goes over the wire: */
    uint64_t writes;          /* send(2) calls that wrote requests to it */
    uint64_t bytes_sent;      /* the bytes they wrote */
    uint64_t reads;           /* read(2) calls that returned replies from it */
    uint64_t bytes_received;  /* the bytes they returned */
    /* A router's migration (see Migrations), counted on the server named: */
    uint64_t fallback_reads;  /* reads sent to it as a moved key's previous owner */
    uint64_t fallback_hits;   /* ... that it answered with a value */
    uint64_t dual_writes;     /* writes (or deletes of its copy) it took as a
                                 moved key's other owner */
    int migration_only;       /* 1: only the migration's other snapshot lists it */
    unsigned consecutive_failures;
    unsigned connections;     /* open now */
    size_t in_flight;         /* requests sent, not answered */
    uint64_t latency_count;   /* replies measured */
    double p50_us, p90_us, p99_us, p999_us, max_us; /* send to reply */
    uint64_t reserved[8]; /* zero; room for later fields (mcroute.h) */
} mcr_server_stats;

/* mcr_pool_server_count: servers the pool knows (current and draining,
 * with those removed and drained already forgotten); 0 for NULL. */
MCR_EXTERN size_t mcr_pool_server_count(const mcr_pool *pool);

/* mcr_pool_server_stats: counters of server i (0 .. count-1, in an order
 * that stays the same until the pool adopts another snapshot or forgets a
 * drained server). MCR_OK, or MCR_ERR_INVALID (NULL argument, i out of
 * range). Percentiles come from a log-linear histogram (relative error
 * under 4%); all 0 before the first reply. */
MCR_EXTERN int mcr_pool_server_stats(const mcr_pool *pool, size_t i, mcr_server_stats *out);

/* mcr_pool_metrics: the counters of every server of the pool, and its
 * latency histogram, in the Prometheus text exposition format (0.0.4), as
 * a new NUL-terminated buffer *text (malloc'ed, the caller frees it) of
 * *len bytes (`len` may be NULL). Every sample carries the labels
 * server="ID" and address="HOST:PORT", and the pairs of `labels`: NULL,
 * or a NULL-terminated array of names and values (name, value, name,
 * value, ..., NULL), names of [a-zA-Z_][a-zA-Z0-9_]* other than server,
 * address, le and __*, values escaped here. The metrics:
 * mcroute_server_requests_total, _hits_total, _misses_total,
 * _errors_total, _timeouts_total, _connect_failures_total,
 * _ejections_total, _fallback_reads_total, _fallback_hits_total,
 * _sent_bytes_total, _received_bytes_total (counters, as
 * mcr_pool_server_stats() counts them), mcroute_server_in_flight and
 * mcroute_server_up (gauges), and the histogram
 * mcroute_server_request_duration_seconds, from send to reply, with
 * buckets from 50 us to 5 s (each count exact: a bound takes the
 * histogram's buckets that lie wholly below it, so a bucket's count may
 * leave out latencies up to 1/16 below its bound, never add any above).
 * Not thread-safe (the pool's thread). Errors: MCR_ERR_INVALID (NULL
 * argument, a label name refused, a name without its value),
 * MCR_ERR_NOMEM. */
MCR_EXTERN int mcr_pool_metrics(const mcr_pool *pool, const char *const *labels, char **text,
                                size_t *len, mcr_error *err);

#ifdef __cplusplus
}
#endif

#endif /* MCROUTE_POOL_H */
