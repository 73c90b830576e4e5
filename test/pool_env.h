/* SPDX-License-Identifier: BSD-3-Clause */
/* pool_env.h: the pool test environment shared by the test_pool_* suites: servers, loop, router, pool, tracked requests. */
#ifndef MCR_POOL_ENV_H
#define MCR_POOL_ENV_H
/*
 * Every test starts its own memcached processes (on 127.0.0.1, 127.0.0.2,
 * ... at ports the kernel picks), its own event_base, router and pool, and
 * stops them at its end (realserver.c also kills them when the test's
 * process exits or dies). Requests are tracked one record each: every
 * callback is counted, so a callback made twice, never, for a request that
 * was refused, or inside the submitting call is caught in every test; a HIT
 * whose value does not encode its key ("val|<key>|...") is caught too.
 *
 * The event loop is never run unbounded: a 5 ms timer makes EVLOOP_ONCE
 * return, and every wait has a deadline, so a pool that loses a request
 * fails the test instead of hanging it.
 *
 * Time. A test that is not about timing waits on events (a callback, the
 * pool idle, a server state) up to a generous deadline, and gives the pool
 * timeouts far beyond what it needs. A test about timing (timeouts,
 * retries, backoff) asserts order and bounds with a margin, measured from
 * the instant the pool's own clock starts: a request's timeout cannot fire
 * before the earliest send on its connection plus request_timeout_ms, and
 * must fire within a margin after it. Every such limit, the pool's options
 * included, is TMS(ms): ms times MCR_TEST_TIME_SCALE (testutil.h), so a
 * slow or loaded machine raises one factor; deadlines of waits scale too.
 *
 * Suites: test_pool_basic, test_pool_failures, test_pool_membership,
 * test_pool_replies, test_pool_flow and test_pool_chaos, one ctest test
 * each, so that ctest -j runs their waits side by side. Each test function
 * is a Check tcase of its own, named after it without "test_":
 * CK_RUN_CASE=eject test_pool_failures runs test_eject alone.
 *
 * Environment: MCR_TEST_SEED changes the keys and the chaos;
 * CK_RUN_CASE=name runs one tcase (a test function);
 * MCR_TEST_TIME_SCALE multiplies every time limit.
 *
 * Not thread-safe: one thread (the test's) uses an env.
 */
#include <event2/event.h>
#include <stddef.h>
#include <stdint.h>

#include "mcroute.h"
#include "mcroute_pool.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"
#include "realserver.h"
#include "testutil.h"

/* Register the START_TEST test_NAME as a tcase of its own named NAME (so
 * that CK_RUN_CASE=NAME runs it alone), for the loop iterations [from, to),
 * with the suite's 60 s tcase timeout. PE_ADD: one iteration. */
#define PE_ADD_LOOP(s, name, from, to) pe_add((s), #name, test_##name, (from), (to))
#define PE_ADD(s, name) PE_ADD_LOOP(s, name, 0, 1)
void pe_add(Suite *s, const char *name, const TTest *test, int from, int to);


#define MAX_SERVERS 6
/* ms times the time scale: every timing-bound limit of the suite. */
#define TMS(ms) mcr_test_ms(ms)
#define START_MS TMS(20000) /* a memcached must accept connections within this */
#define IO_MS TMS(10000)    /* the raw client's deadline */
#define TICK_MS 5           /* the longest EVLOOP_ONCE blocks */

/* ================================================================== time */

/* The clock is testutil's mcr_test_now_ms(). */
void sleep_ms(unsigned ms);

/* ================================================================== tracking */

/* What the callbacks of one test saw. */
typedef struct tally {
    long submitted;   /* submissions that returned MCR_OK: callbacks owed */
    long calls;       /* final callbacks (a request's, a multi-get's done_cb) */
    long sync;        /* callbacks made inside a submitting call */
    long twice;       /* callbacks of a request already called back */
    long foreign;     /* a result for another key, a value of another key */
    long unexpected;  /* callbacks of a submission that was refused */
    int raw_values;   /* 1: values need not encode their key (checked one by one) */
    char first[512];  /* the first violation */
    struct ticket *tickets; /* every callback argument given out, freed at the end */
} tally;

/* > 0 while the test is inside a submitting call of the pool. */
extern int g_submitting;

void violation(tally *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Values written by the tests encode their key: "val|<key>|<anything>". */
size_t make_value(char *buf, size_t cap, const char *key, size_t klen, unsigned gen,
                  size_t pad);

/* One request and what its callback said. */
typedef struct rec {
    tally *t;
    int refused;        /* the submission's error, 0 when accepted */
    int calls;
    int check_value;    /* 1: a HIT must carry a value of its key */
    mcr_op op;
    char key[300];      /* as submitted */
    size_t key_len;
    /* the result */
    int status;
    mcr_reply reply;
    mcr_op res_op;
    char *value;        /* malloc'd copy, NUL-terminated */
    size_t value_len;
    uint32_t flags;
    uint64_t cas, number, epoch;
    char server[256];
    char message[256];
    long long t0, t1;   /* submitted, called back */
    unsigned gen;       /* which submission the record is for now */
} rec;

/* The callback argument of one submission: records are reused, so a late
 * or repeated callback of an earlier submission must not pass for the
 * current one's. */
typedef struct ticket {
    struct ticket *next;
    rec *r;
    unsigned gen;
    int calls;
} ticket;

ticket *ticket_for(tally *t, rec *r);

/* Record the result of r's current submission (and check the contract). */
void rec_record(const mcr_result *res, rec *r);

void rec_cb(const mcr_result *res, void *arg);

void rec_clear(rec *r);

void recs_free(rec *r, size_t n);

/* A multi-get and what its callbacks said. Keys are told apart by the
 * key of each result; duplicates are counted per distinct key. */
typedef struct mtrack {
    tally *t;
    int refused;
    int check_value;
    size_t n;              /* keys passed (with duplicates) */
    char **keys;
    size_t *lens;
    size_t nd;             /* distinct keys */
    size_t *dmap;          /* keys[i] is distinct key dmap[i] */
    size_t *first_of;      /* distinct d: its first index in keys */
    int *want, *got;       /* per distinct: occurrences, key_cb calls */
    int *status;           /* per distinct: last status */
    int *reply;
    uint64_t *cas;
    int *seen;             /* per key passed: key_cb calls with that index */
    long key_calls, hits;
    int done_calls;
    int done_status;
    uint64_t done_number;
    size_t done_key_len;
} mtrack;

mtrack *mt_new(tally *t, size_t n);

void mt_add(mtrack *m, const char *key, size_t len);

void mt_free(mtrack *m);

void mt_key_cb(const mcr_result *res, void *arg);

void mt_done_cb(const mcr_result *res, void *arg);

/* Every distinct key reported exactly as often as it occurs, done once. */
void mt_check(const mtrack *m);

/* ================================================================== environment */

/* Servers, an event loop, a router and a pool: one per test. */
typedef struct env {
    int n;                            /* memcached processes started */
    rs_proc mc[MAX_SERVERS];
    char id[MAX_SERVERS][64];         /* "127.0.0.x:port", the default ids */
    struct event_base *base;
    struct event *tick;
    mcr_router *router;
    mcr_pool *pool;
    tally t;
} env;

void env_base(env *e);

/* Start memcached number i on 127.0.0.(i+1), at `port` (0: any). */
void env_start_server(env *e, int i, int port);

/* A snapshot (epoch 1) of servers 0..k-1, in that order. */
mcr_snapshot *env_snapshot(env *e, int k, const char *key_prefix);

/* The same at `epoch` (a resize's second snapshot: a later epoch). */
mcr_snapshot *env_snapshot_at(env *e, int k, const char *key_prefix, uint64_t epoch);

/* The suite's base options: the library's defaults, but connect and
 * request timeouts of TMS(30000), so that a test not about timeouts never
 * sees one on a loaded machine. Tests about timeouts set their own. */
void opts_init(mcr_pool_options *o);

/* A pool on e's base and router with options o (NULL: opts_init's). */
void env_new_pool(env *e, const mcr_pool_options *o);

/* n servers started, the first k of them in the router's snapshot, a pool
 * with options o (NULL: defaults). */
void env_init_k(env *e, int n, int k, const mcr_pool_options *o);

void env_init(env *e, int n, const mcr_pool_options *o);

void env_free(env *e);

/* Kill server i at once (SIGKILL: a crash, and no shutdown delay) and reap it:
 * rs_stop(), named for what the tests mean by it. */
void env_kill(env *e, int i);

/* Run the loop for `ms`. */
void run_ms(env *e, unsigned ms);

typedef int (*cond_fn)(env *e, void *arg);

/* Run the loop until done(e, arg) or `ms` (times the time scale) passed: 1
 * when done. A deadline, never a pause: it returns as soon as done. */
int run_until(env *e, cond_fn done, void *arg, unsigned ms);

int c_nothing_retired(env *e, void *arg);

int c_idle(env *e, void *arg);

int c_called(env *e, void *arg);

#define WAIT_IDLE(e, ms)                                                                    \
    ck_assert_msg(run_until((e), c_idle, NULL, (ms)), "%zu requests still pending after %d ms", \
                  mcr_pool_pending((e)->pool), TMS((int)(ms)))

/* The contract held for every callback of the test so far. */
void tally_ok(env *e);

/* ================================================================== submitting */

mcr_request rq(mcr_op op, const char *key);

mcr_request rq_store(mcr_op op, const char *key, const char *value, uint32_t flags);

void rec_prepare(rec *r, tally *t, const mcr_request *q);

/* Submit q to pool p with r as its record. */
int submit_to(env *e, mcr_pool *p, rec *r, const mcr_request *q);

int submit(env *e, rec *r, const mcr_request *q);

rec *do1(env *e, rec *r, const mcr_request q);

/* Evaluate r once: it is often the do1() that runs the request. */
#define EXPECT_REPLY(r, st, rep)                                                                   \
    do {                                                                                     \
        const rec *r_ = (r);                                                                 \
        ck_assert_msg(r_->status == (st) && ((st) != MCR_OK || r_->reply == (rep)),          \
                      "%s \"%s\": status %d (%s), reply %s; expected %d, %s [%s]; "          \
                      "value \"%.*s\" from %s",                                              \
                      mcr_op_name(r_->op), r_->key, r_->status, mcr_strerror(r_->status),    \
                      mcr_reply_name(r_->reply), (int)(st), mcr_reply_name(rep), r_->message, \
                      r_->value ? (int)(r_->value_len > 80 ? 80 : r_->value_len) : 0,        \
                      r_->value ? r_->value : "", r_->server);                               \
    } while (0)

#define EXPECT_VALUE(r, v)                                                                   \
    do {                                                                                     \
        const rec *r_ = (r);                                                                 \
        const char *v_ = (v);                                                                \
        ck_assert_msg(r_->value != NULL && r_->value_len == strlen(v_) &&                   \
                          memcmp(r_->value, v_, strlen(v_)) == 0,                            \
                      "%s \"%s\": value \"%s\", expected \"%s\"", mcr_op_name(r_->op),       \
                      r_->key, r_->value ? r_->value : "(null)", v_);                        \
    } while (0)

/* ================================================================== snapshot helpers */

/* Snapshot index of the server owning key in the router's current snapshot. */
int owner_of(mcr_router *router, const char *key, size_t len);

/* Index in env of the server with this id, or -1. */
int env_index(const env *e, const char *id);

/* The id of the server owning key now (a string of env). */
const char *owner_id(env *e, const char *key);

/* 1 when server `id` owns key in the router's current snapshot. */
int owns(env *e, const char *key, const char *id);

/* State of server `id` in the router's current snapshot; -1 when absent. */
int state_of(mcr_router *router, const char *id);

/* State of server `id` in the router's published snapshot (without the
 * local states, mcr_router_published()); -1 when absent. */
int published_state_of(mcr_router *router, const char *id);

/* A key (into buf) owned by server `id`, "<stem><n>" for the first n that fits. */
const char *key_on(env *e, const char *id, const char *stem, char *buf, size_t cap);

/* The pool's counters of server `id`; 0 when found, -1 when not listed. */
int stats_of(const mcr_pool *p, const char *id, mcr_server_stats *out);

/* ================================================================== raw client */

int raw_fd(const env *e, int i);

/* Stop server i with SIGSTOP and make sure it no longer answers (a
 * stopped process's kernel still accepts connections, but nothing replies). */
void env_sigstop(env *e, int i);

/* ================================================================== shared by several suites */

/* "name value" line of a STATS result. */
int stat_line(const rec *r, const char *line);

/* A multi-get of m's keys with key_cb for each key (mt_key_cb, or a
 * variant that checks more) and mt_done_cb. */
int submit_multi_cb(env *e, mcr_pool *p, mtrack *m, mcr_op op, mcr_pool_cb key_cb);

int submit_multi(env *e, mcr_pool *p, mtrack *m, mcr_op op);

int c_mt_done(env *e, void *arg);

/* Every current snapshot a router had, by epoch (references kept): the
 * first one of an epoch, then those of the same epoch that local states
 * made (a pool's ejections and re-adds), in order. */
#define BOOK_PER_EPOCH 32
typedef struct snap_book {
    mcr_snapshot *by_epoch[64][BOOK_PER_EPOCH];
    int overflow;          /* snapshots not recorded (epoch >= 64, or too many) */
} snap_book;

/* An empty book holding the router's current snapshot; then add book_hook
 * to the router with it. */
void book_init(snap_book *b, mcr_router *router);

void book_hook(const mcr_snapshot *old_snap, const mcr_snapshot *new_snap,
               const mcr_diff *diff, void *arg);

void book_free(snap_book *b);

/* The id of the server that the first snapshot of epoch `ep` in the book
 * gives key to (exact when no local state changed within the epoch). */
const char *book_owner(const snap_book *b, uint64_t ep, const char *key, size_t len);

/* 1 when one of the snapshots of epoch `ep` in the book gives key to
 * server `id`: a request routed with that epoch may have been routed by
 * any of them (a result carries the epoch, not which local states were in
 * force). */
int book_routes_to(const snap_book *b, uint64_t ep, const char *key, size_t len, const char *id);

void apply_change(env *e, int what, int server);

typedef struct conn_wait {
    int fd;
    long long baseline;
} conn_wait;

int c_conns_back(env *e, void *arg);

#endif
