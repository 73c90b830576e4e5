/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_transition.c: what a router's migration costs a pool, timed against plain requests on the same real memcached servers and keys: gets at the new owner, gets served by the previous owner, dual writes. */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "benchutil.h"
#include "mcroute.h"
#include "mcroute_pool.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"
#include "realserver.h"

/*
 * The resize: five real memcached servers on 127.0.0.1; snapshot A (epoch
 * 1) lists the first four, snapshot B (epoch 2) all five, in the default
 * mode. The keys are the ones B moves (their owner in A differs from their
 * owner in B: about a fifth of the candidates, all to the fifth server),
 * found before anything is timed. Every case runs on these same keys and
 * servers, in one process and one thread, with two pools on one
 * event_base, each on a router whose current snapshot is B:
 *
 *   plain   a router without a migration;
 *   tx      a router holding the migration A -> B, switched (epoch 2).
 *
 * The cases (lib/pool/migration.c says what the pool does):
 *
 *   get_plain          (a) a get through `plain`: one request, at the
 *                      key's owner in B (the new owner), a hit.
 *   get_switched_hit   (b) a get through `tx`, the value at the new owner:
 *                      one request, a hit; the difference to (a) is the
 *                      migration's check (is the key moved?).
 *   get_fallback       (c) a get through `tx`, the key deleted at the new
 *                      owner (untimed, before the pass): a miss there,
 *                      then a meta get at the owner in A, a hit with
 *                      via_previous: two round trips, one after the other.
 *   get_miss_then_old  the reference for (c): what a client does by hand
 *                      without a migration, through `plain`: a get at the
 *                      new owner (a miss: the key deleted there) and, from
 *                      its callback, a get at the old owner (`server` set).
 *   set_plain          a set through `plain`: the new owner only.
 *   set_dual           (d) a set through `tx`: the same set to both owners
 *                      at once, the callback when both answered.
 *   set_both_plain     the reference for (d), by hand through `plain`: a
 *                      set routed by key and one at the old owner, at once,
 *                      done when both answered.
 *
 * So (c)/(a) and (d)/set_plain are what a moved key costs, and (c) over
 * get_miss_then_old and (d) over set_both_plain what the migration's code
 * adds to the extra requests themselves.
 *
 * Before each pass every key holds the current value at both its owners;
 * the untimed steps around a pass restore that (get_fallback and
 * get_miss_then_old put the value back at the new owner, set_plain writes
 * the old owner). Every result is checked: the reply, the value (it
 * spells the key and a generation: every set pass writes a new one), the
 * flags (the key's index), the server that answered and via_previous;
 * after each pass the pool's counters must say what the case did
 * (fallback reads and hits, dual writes: one per key, or none), and after
 * a pass that wrote both owners they are read back. A wrong byte, a
 * missing fallback or a write that reached one owner fails the run.
 *
 * Each case is timed at two depths: one request at a time ("serial": the
 * latency of one operation, where the fallback's second round trip shows
 * in full) and `--depth` in flight ("pipelined": what the extra requests
 * cost in throughput). Latency = from the call that submits a request to
 * its callback. Repetitions are interleaved (the case going first
 * rotates) and medians of them reported: p50, p99 and mean per operation,
 * operations per second (a pass's keys over its time, mcr_pool_wait()
 * included) and requests per operation (the pool's counters).
 *
 * Keys copied per second by mcr_migrate_run() are bench_migrate's.
 */

#define NSERVERS 5 /* A lists the first NSERVERS - 1 */
#define VALUE_LEN 100
#define KEY_MAX 48
#define KEY_SEED 0x7472616e736974ull
#define MAX_REPS 101
#define START_MS 10000
#define MAX_MESSAGES BENCH_MAX_MESSAGES

typedef struct settings {
    bool quick, verbose, keep, meta;
    size_t nkeys;   /* moved keys */
    unsigned depth; /* requests in flight, pipelined runs */
    unsigned reps;
    const char *only; /* --case: this case alone (for profiles) */
} settings;

static settings opt = {.nkeys = 2000, .depth = 128, .reps = 11};

const char *bench_program = "bench_transition";
static int failures;

/* ------------------------------------------------------------ cases */

enum { POOL_PLAIN, POOL_TX, POOL_COUNT };
static const char *const pool_names[POOL_COUNT] = {"plain", "tx"};

enum { C_GET_PLAIN, C_GET_SWITCHED, C_GET_FALLBACK, C_GET_BY_HAND, C_SET_PLAIN, C_SET_DUAL,
       C_SET_BY_HAND, C_COUNT };
static const char *const case_names[C_COUNT] = {
    "get_plain", "get_switched_hit", "get_fallback",  "get_miss_then_old",
    "set_plain", "set_dual",         "set_both_plain"};
static const int case_pool[C_COUNT] = {POOL_PLAIN, POOL_TX, POOL_TX,   POOL_PLAIN,
                                       POOL_PLAIN, POOL_TX, POOL_PLAIN};

enum { D_SERIAL, D_PIPELINED, D_COUNT };
static const char *const depth_names[D_COUNT] = {"serial", "pipelined"};

/* What one request is and what its result must be. */
enum {
    K_GET,          /* routed by key */
    K_SET,          /* routed by key, the current generation */
    K_PIN_GET_NEW,  /* at the key's owner in B */
    K_PIN_GET_OLD,  /* at the key's owner in A */
    K_PIN_SET_NEW,
    K_PIN_SET_OLD,
    K_PIN_DEL_NEW,
    K_GET_THEN_OLD, /* routed by key (a miss), then at the owner in A */
    K_SET_BOTH      /* routed by key and at the owner in A at once */
};

typedef struct expect {
    mcr_reply reply;
    int at_old;       /* the result's server: 1 the owner in A, 0 in B */
    int via_previous;
} expect;

/* ------------------------------------------------------------ results */

typedef struct run {
    double ops_per_s, p50_us, p99_us, mean_us, req_per_op;
} run;

typedef struct series {
    run r[MAX_REPS];
    unsigned n;
    run med;
} series;

static series S[C_COUNT][D_COUNT];

/* ------------------------------------------------------------ the world */

typedef struct world {
    char dir[64];
    rs_proc mc[NSERVERS];
    char id[NSERVERS][64]; /* "127.0.0.1:port", the snapshots' ids */

    size_t n;
    char *key_bytes;
    const char **key;
    size_t *len;
    unsigned char *old_of, *new_of; /* owner index in A, in B */
    char *val;                      /* n * VALUE_LEN, the current generation */
    unsigned gen;
    size_t candidates;              /* keys looked at to find n moved ones */

    struct event_base *base;
    mcr_snapshot *a, *b;
    mcr_router *r[POOL_COUNT];
    mcr_pool *p[POOL_COUNT];

    uint64_t *lat;
} world;

static world W;

/* ------------------------------------------------------------ helpers */

typedef bench_checker checker;

static bool checked(checker *c)
{
    if (c->bad == 0)
        return true;
    if (c->bad > MAX_MESSAGES)
        printf("FAIL %s: %u problems in all\n", c->what, c->bad);
    failures++;
    return false;
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* Nearest-rank percentile of sorted v[0..n), in microseconds. */
static double pct_us(const uint64_t *v, size_t n, double p)
{
    size_t rank = (size_t)(p * (double)n + 0.999999);
    if (n == 0)
        return 0.0;
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return (double)v[rank - 1] / 1e3;
}

/* Value of key i in generation gen: "<key>|g<gen>|" then letters that
 * depend on both. */
static void make_value(char *out, size_t i, unsigned gen)
{
    uint64_t rng = ((uint64_t)i << 24) ^ gen ^ 0x7478766c7565ull;
    int k = snprintf(out, VALUE_LEN, "%.*s|g%u|", (int)W.len[i], W.key[i], gen);
    size_t at = k < 0 ? 0 : (size_t)k >= VALUE_LEN ? VALUE_LEN - 1 : (size_t)k;
    uint64_t r = 0;
    for (size_t j = at; j < VALUE_LEN; j++) {
        if ((j - at) % 8 == 0)
            r = bench_next_rand(&rng);
        out[j] = (char)('a' + (r & 0xff) % 26);
        r >>= 8;
    }
}

static void next_generation(void)
{
    W.gen++;
    for (size_t i = 0; i < W.n; i++)
        make_value(W.val + i * VALUE_LEN, i, W.gen);
}

/* The counters of a pool, summed over its servers. */
typedef struct counters {
    uint64_t requests, fallback_reads, fallback_hits, dual_writes, errors;
} counters;

static counters counters_of(const mcr_pool *p)
{
    counters c;
    memset(&c, 0, sizeof(c));
    size_t n = mcr_pool_server_count(p);
    for (size_t i = 0; i < n; i++) {
        mcr_server_stats st;
        if (mcr_pool_server_stats(p, i, &st) != MCR_OK)
            continue;
        c.requests += st.requests;
        c.fallback_reads += st.fallback_reads;
        c.fallback_hits += st.fallback_hits;
        c.dual_writes += st.dual_writes;
        c.errors += st.errors;
    }
    return c;
}

/* ------------------------------------------------------------ a pass */

typedef struct pass_ctx pass_ctx;

typedef struct slot {
    pass_ctx *pc;
    size_t idx;
    uint64_t t0;
    bool busy;
    int waiting; /* replies still due (K_GET_THEN_OLD, K_SET_BOTH: 2) */
} slot;

struct pass_ctx {
    mcr_pool *pool;
    int kind;
    expect ex;
    size_t next, done, n;
    slot *slots;
    bool in_submit, stop;
    checker *ck;
};

static void on_reply(const mcr_result *res, void *arg);

/* Request `op` of key i: at its owner in A (`old`), in B (`new_`), or
 * routed by key (neither). */
static int send_req(pass_ctx *pc, slot *s, mcr_op op, size_t i, bool old, bool new_)
{
    mcr_request q;
    mcr_error err = {0};

    memset(&q, 0, sizeof(q));
    q.op = op;
    q.key = W.key[i];
    q.key_len = W.len[i];
    if (op == MCR_OP_SET) {
        q.value = W.val + i * VALUE_LEN;
        q.value_len = VALUE_LEN;
        q.flags = (uint32_t)i;
    }
    if (old)
        q.server = W.id[W.old_of[i]];
    else if (new_)
        q.server = W.id[W.new_of[i]];
    pc->in_submit = true;
    int rc = mcr_pool_submit(pc->pool, &q, on_reply, s, &err);
    pc->in_submit = false;
    if (rc != MCR_OK) {
        bench_bad(pc->ck, "submitting %s of key %zu: %s", mcr_op_name(op), i,
            err.code ? err.message : mcr_strerror(rc));
        pc->stop = true;
    }
    return rc;
}

static void submit_one(pass_ctx *pc, slot *s)
{
    size_t i = pc->next++;
    int k = pc->kind, rc;

    s->idx = i;
    s->busy = true;
    s->waiting = k == K_GET_THEN_OLD || k == K_SET_BOTH ? 2 : 1;
    s->t0 = bench_now_ns();
    switch (k) {
    case K_GET:
    case K_GET_THEN_OLD:
        rc = send_req(pc, s, MCR_OP_GET, i, false, false);
        break;
    case K_PIN_GET_NEW:
    case K_PIN_GET_OLD:
        rc = send_req(pc, s, MCR_OP_GET, i, k == K_PIN_GET_OLD, k == K_PIN_GET_NEW);
        break;
    case K_PIN_DEL_NEW:
        rc = send_req(pc, s, MCR_OP_DELETE, i, false, true);
        break;
    case K_SET_BOTH:
        rc = send_req(pc, s, MCR_OP_SET, i, false, false);
        if (rc == MCR_OK && send_req(pc, s, MCR_OP_SET, i, true, false) != MCR_OK)
            s->waiting = 1; /* the first one's callback still comes */
        break;
    default:
        rc = send_req(pc, s, MCR_OP_SET, i, k == K_PIN_SET_OLD, k == K_PIN_SET_NEW);
        break;
    }
    if (rc != MCR_OK) {
        s->busy = false;
        W.lat[pc->done++] = 0;
    }
}

static void on_reply(const mcr_result *res, void *arg)
{
    slot *s = arg;
    pass_ctx *pc = s->pc;
    uint64_t t = bench_now_ns();
    size_t i = s->idx;
    expect ex = pc->ex;

    if (pc->in_submit)
        bench_bad(pc->ck, "the callback of key %zu ran inside its submission", i);
    if (!s->busy) {
        bench_bad(pc->ck, "a second callback for key %zu", i);
        return;
    }
    if (pc->kind == K_GET_THEN_OLD && s->waiting == 2)
        ex = (expect){MCR_REPLY_MISS, 0, 0}; /* the first get */
    if (pc->kind == K_SET_BOTH && res->server != NULL &&
        strcmp(res->server, W.id[W.old_of[i]]) == 0)
        ex.at_old = 1; /* the second set's reply */
    const char *want_server = W.id[ex.at_old ? W.old_of[i] : W.new_of[i]];
    if (res->status != MCR_OK) {
        bench_bad(pc->ck, "key %zu \"%s\": %s (%s)", i, W.key[i], mcr_strerror(res->status),
            res->message ? res->message : "");
    } else if (res->reply != ex.reply) {
        bench_bad(pc->ck, "key %zu \"%s\": %s from %s, want %s", i, W.key[i],
            mcr_reply_name(res->reply), res->server ? res->server : "no server",
            mcr_reply_name(ex.reply));
    } else if (res->server == NULL || strcmp(res->server, want_server) != 0) {
        bench_bad(pc->ck, "key %zu \"%s\": answered by %s, want %s", i, W.key[i],
            res->server ? res->server : "no server", want_server);
    } else if (res->via_previous != ex.via_previous) {
        bench_bad(pc->ck, "key %zu \"%s\": via_previous %d, want %d", i, W.key[i], res->via_previous,
            ex.via_previous);
    } else if (res->reply == MCR_REPLY_HIT) {
        const char *want = W.val + i * VALUE_LEN;
        if (res->key_len != W.len[i] || memcmp(res->key, W.key[i], W.len[i]) != 0)
            bench_bad(pc->ck, "key %zu: the result names key \"%.*s\"", i, (int)res->key_len,
                res->key);
        else if (res->value_len != VALUE_LEN || memcmp(res->value, want, VALUE_LEN) != 0)
            bench_bad(pc->ck, "key %zu \"%s\": value \"%.*s\" (%zu bytes), want \"%.*s\"", i, W.key[i],
                (int)(res->value_len < 60 ? res->value_len : 60), res->value, res->value_len,
                60, want);
        else if (res->flags != (uint32_t)i)
            bench_bad(pc->ck, "key %zu \"%s\": flags %" PRIu32 ", want %zu", i, W.key[i], res->flags,
                i);
    }
    if (--s->waiting > 0) {
        /* by hand: the second get after the first one's miss */
        if (pc->kind == K_GET_THEN_OLD && send_req(pc, s, MCR_OP_GET, i, true, false) != MCR_OK)
            s->waiting = 0;
        else
            return;
    }
    s->busy = false;
    W.lat[pc->done++] = t - s->t0;
    if (!pc->stop && pc->next < pc->n)
        submit_one(pc, s);
}

/* Every key once through `pool` as `kind`, `depth` in flight; W.lat[0..n)
 * gets the latencies. Returns the time from the first submission to the
 * end of mcr_pool_wait(), in ns. */
static uint64_t run_pass(mcr_pool *pool, int kind, expect ex, unsigned depth, checker *ck)
{
    pass_ctx pc = {.pool = pool, .kind = kind, .ex = ex, .n = W.n, .ck = ck};
    pc.slots = bench_xmalloc(depth * sizeof(*pc.slots));
    for (unsigned j = 0; j < depth; j++)
        pc.slots[j] = (slot){.pc = &pc};
    uint64_t t0 = bench_now_ns();
    for (unsigned j = 0; j < depth && pc.next < pc.n && !pc.stop; j++)
        submit_one(&pc, &pc.slots[j]);
    int rc = mcr_pool_wait(pool);
    uint64_t t1 = bench_now_ns();
    if (rc != MCR_OK)
        bench_bad(ck, "mcr_pool_wait: %s", mcr_strerror(rc));
    if (pc.done != pc.next)
        bench_bad(ck, "%zu requests submitted, %zu called back", pc.next, pc.done);
    if (pc.next < pc.n)
        bench_bad(ck, "stopped after %zu of %zu requests", pc.next, pc.n);
    free(pc.slots);
    return t1 - t0;
}

/* An untimed step through the plain pool (pinned requests) or a check. */
static bool step(const char *what, int pool, int kind, expect ex)
{
    char buf[160];
    checker ck = {buf, 0};
    snprintf(buf, sizeof buf, "%s", what);
    run_pass(W.p[pool], kind, ex, opt.depth, &ck);
    return checked(&ck);
}

static const expect HIT_NEW = {MCR_REPLY_HIT, 0, 0};
static const expect HIT_OLD = {MCR_REPLY_HIT, 1, 0};
static const expect HIT_OLD_VIA = {MCR_REPLY_HIT, 1, 1};
static const expect STORED_NEW = {MCR_REPLY_STORED, 0, 0};
static const expect STORED_OLD = {MCR_REPLY_STORED, 1, 0};
static const expect DELETED_NEW = {MCR_REPLY_DELETED, 0, 0};

/* The counter changes a pass of case c must show, per key. */
static void check_counters(int c, const counters *b, const counters *e, checker *ck)
{
    uint64_t n = W.n;
    uint64_t fr = e->fallback_reads - b->fallback_reads, fh = e->fallback_hits - b->fallback_hits;
    uint64_t dw = e->dual_writes - b->dual_writes;
    uint64_t want_fr = c == C_GET_FALLBACK ? n : 0, want_dw = c == C_SET_DUAL ? n : 0;
    if (fr != want_fr || fh != want_fr)
        bench_bad(ck, "fallback_reads +%" PRIu64 ", fallback_hits +%" PRIu64 ", want +%" PRIu64
                " each",
            fr, fh, want_fr);
    if (dw != want_dw)
        bench_bad(ck, "dual_writes +%" PRIu64 ", want +%" PRIu64, dw, want_dw);
    if (e->errors != b->errors)
        bench_bad(ck, "errors +%" PRIu64, e->errors - b->errors);
}

static void record(int c, int d, uint64_t ns, uint64_t requests)
{
    series *s = &S[c][d];
    run *r = &s->r[s->n++];
    double sum = 0;
    for (size_t i = 0; i < W.n; i++)
        sum += (double)W.lat[i];
    qsort(W.lat, W.n, sizeof(*W.lat), cmp_u64);
    r->ops_per_s = (double)W.n / ((double)ns / 1e9);
    r->p50_us = pct_us(W.lat, W.n, 0.50);
    r->p99_us = pct_us(W.lat, W.n, 0.99);
    r->mean_us = sum / (double)W.n / 1e3;
    r->req_per_op = (double)requests / (double)W.n;
    if (opt.verbose)
        printf("INFO rep %s %s ops_per_s=%.0f p50_us=%.1f p99_us=%.1f mean_us=%.1f "
               "requests_per_op=%.2f\n",
               case_names[c], depth_names[d], r->ops_per_s, r->p50_us, r->p99_us, r->mean_us,
               r->req_per_op);
}

/* One pass of case c at depth d, with its untimed preparation and checks.
 * false when something was wrong (counted in failures). */
static bool pass(int c, int d, bool timed)
{
    if (opt.only != NULL && strcmp(opt.only, case_names[c]) != 0)
        return true;
    char what[96];
    checker ck = {what, 0};
    int pool = case_pool[c];
    unsigned depth = d == D_SERIAL ? 1 : opt.depth;
    snprintf(what, sizeof what, "%s %s%s", case_names[c], depth_names[d],
             timed ? "" : " (warm-up)");

    /* before: the state the case reads */
    if ((c == C_GET_FALLBACK || c == C_GET_BY_HAND) &&
        !step("deleting the keys at their new owner", POOL_PLAIN, K_PIN_DEL_NEW, DELETED_NEW))
        return false;
    if (c >= C_SET_PLAIN)
        next_generation();

    counters before = counters_of(W.p[pool]);
    uint64_t ns;
    switch (c) {
    case C_GET_PLAIN:
    case C_GET_SWITCHED:
        ns = run_pass(W.p[pool], K_GET, HIT_NEW, depth, &ck);
        break;
    case C_GET_FALLBACK:
        ns = run_pass(W.p[pool], K_GET, HIT_OLD_VIA, depth, &ck);
        break;
    case C_GET_BY_HAND:
        ns = run_pass(W.p[pool], K_GET_THEN_OLD, HIT_OLD, depth, &ck);
        break;
    case C_SET_BY_HAND:
        ns = run_pass(W.p[pool], K_SET_BOTH, STORED_NEW, depth, &ck);
        break;
    default:
        ns = run_pass(W.p[pool], K_SET, STORED_NEW, depth, &ck);
        break;
    }
    counters after = counters_of(W.p[pool]);
    check_counters(c, &before, &after, &ck);
    if (!checked(&ck))
        return false;
    if (timed)
        record(c, d, ns, after.requests - before.requests);

    /* after: both owners hold the current value again */
    switch (c) {
    case C_GET_FALLBACK:
    case C_GET_BY_HAND:
        return step("restoring the keys at their new owner", POOL_PLAIN, K_PIN_SET_NEW,
                    STORED_NEW);
    case C_SET_PLAIN:
        return step("writing the old owner after plain sets", POOL_PLAIN, K_PIN_SET_OLD,
                    STORED_OLD);
    case C_SET_DUAL:
    case C_SET_BY_HAND:
        return step("read-back at the new owner after both-owner sets", POOL_PLAIN,
                    K_PIN_GET_NEW, HIT_NEW) &&
               step("read-back at the old owner after both-owner sets", POOL_PLAIN,
                    K_PIN_GET_OLD, HIT_OLD);
    default:
        return true;
    }
}

/* ------------------------------------------------------------ setup */

static mcr_snapshot *snapshot_of(int nservers, uint64_t epoch)
{
    mcr_config *cfg = mcr_config_new();
    mcr_snapshot *s = NULL;
    mcr_error err = {0};
    int rc = cfg ? MCR_OK : MCR_ERR_NOMEM;
    for (int i = 0; i < nservers && rc == MCR_OK; i++)
        rc = mcr_config_add_server(cfg, W.mc[i].addr, W.mc[i].port, 1, &err);
    if (rc == MCR_OK)
        rc = mcr_snapshot_new(cfg, epoch, &s, &err);
    mcr_config_free(cfg);
    if (rc != MCR_OK) {
        printf("FAIL setup: snapshot of %d servers: %s\n", nservers,
               err.code ? err.message : mcr_strerror(rc));
        failures++;
        return NULL;
    }
    return s;
}

/* The owner of a key in s, as an index into W.mc (ids are "addr:port"). */
static int owner_in(const mcr_snapshot *s, const char *key, size_t len)
{
    mcr_server_desc d;
    if (mcr_snapshot_server(s, mcr_snapshot_locate(s, key, len), &d) != MCR_OK)
        return -1;
    for (int i = 0; i < NSERVERS; i++)
        if (strcmp(d.id, W.id[i]) == 0)
            return i;
    return -1;
}

/* Candidates until n moved keys are found. */
static bool find_moved_keys(size_t n)
{
    uint64_t rng = KEY_SEED;
    char cand[KEY_MAX];
    size_t limit = n * 100 + 1000;

    W.n = 0;
    W.key_bytes = bench_xmalloc(n * KEY_MAX);
    W.key = bench_xmalloc(n * sizeof(*W.key));
    W.len = bench_xmalloc(n * sizeof(*W.len));
    W.old_of = bench_xmalloc(n);
    W.new_of = bench_xmalloc(n);
    W.val = bench_xmalloc(n * VALUE_LEN);
    W.lat = bench_xmalloc(n * sizeof(*W.lat));
    for (W.candidates = 0; W.n < n && W.candidates < limit; W.candidates++) {
        uint64_t r = bench_next_rand(&rng);
        int len;
        /* the candidate's number first: no two keys are the same */
        switch (r % 3) {
        case 0:
            len = snprintf(cand, KEY_MAX, "%zu:user:%08u:profile", W.candidates,
                           (unsigned)(r >> 8) % 100000000u);
            break;
        case 1:
            len = snprintf(cand, KEY_MAX, "%zu:session:%016" PRIx64, W.candidates, r);
            break;
        default:
            len = snprintf(cand, KEY_MAX, "%zu:page:/c/%u/v%u", W.candidates,
                           (unsigned)(r >> 24) % 100000u, (unsigned)(r >> 8) % 7u);
            break;
        }
        int o = owner_in(W.a, cand, (size_t)len), nw = owner_in(W.b, cand, (size_t)len);
        if (o < 0 || nw < 0) {
            printf("FAIL setup: key \"%s\" has no owner among the servers\n", cand);
            failures++;
            return false;
        }
        if (o == nw)
            continue;
        char *p = W.key_bytes + W.n * KEY_MAX;
        memcpy(p, cand, (size_t)len + 1);
        W.key[W.n] = p;
        W.len[W.n] = (size_t)len;
        W.old_of[W.n] = (unsigned char)o;
        W.new_of[W.n] = (unsigned char)nw;
        W.n++;
    }
    if (W.n < n) {
        printf("FAIL setup: %zu of %zu candidate keys move, %zu wanted\n", W.n, W.candidates,
               n);
        failures++;
        return false;
    }
    size_t to[NSERVERS] = {0};
    for (size_t i = 0; i < W.n; i++)
        to[W.new_of[i]]++;
    printf("INFO keys moved=%zu candidates=%zu moved_share=%.3f to_server4=%zu\n", W.n,
           W.candidates, (double)W.n / (double)W.candidates, to[NSERVERS - 1]);
    return true;
}

static bool setup(void)
{
    mcr_error err = {0};
    int rc;

    snprintf(W.dir, sizeof W.dir, "/tmp/mcr-bench-tx-XXXXXX");
    if (mkdtemp(W.dir) == NULL) {
        printf("FAIL setup: mkdtemp %s\n", W.dir);
        failures++;
        W.dir[0] = '\0';
        return false;
    }
    for (int i = 0; i < NSERVERS; i++) {
        char log[128];
        snprintf(log, sizeof log, "%s/memcached-%d.log", W.dir, i);
        if (rs_memcached_start(&W.mc[i], "127.0.0.1", 0, log, START_MS) != 0) {
            printf("FAIL setup: memcached %d did not start (logs in %s)\n", i, W.dir);
            failures++;
            opt.keep = true;
            return false;
        }
        snprintf(W.id[i], sizeof W.id[i], "%s:%d", W.mc[i].addr, W.mc[i].port);
    }
    printf("INFO servers memcached=%d ports=%d,%d,%d,%d,%d (A: the first %d, B: all) dir=%s\n",
           NSERVERS, W.mc[0].port, W.mc[1].port, W.mc[2].port, W.mc[3].port, W.mc[4].port,
           NSERVERS - 1, W.dir);
    if ((W.a = snapshot_of(NSERVERS - 1, 1)) == NULL || (W.b = snapshot_of(NSERVERS, 2)) == NULL)
        return false;
    if (!find_moved_keys(opt.nkeys))
        return false;

    W.base = event_base_new();
    if (W.base == NULL) {
        printf("FAIL setup: event_base_new\n");
        failures++;
        return false;
    }
    for (int k = 0; k < POOL_COUNT; k++) {
        rc = mcr_router_new(W.b, &W.r[k], &err);
        if (rc == MCR_OK && k != POOL_PLAIN)
            rc = mcr_router_set_migration(W.r[k], W.a, W.b, 0, 0, &err);
        if (rc == MCR_OK) {
            mcr_router_migration t;
            mcr_migration_phase ph = MCR_MIGRATION_NONE;
            if (mcr_router_get_migration(W.r[k], &t) == MCR_OK)
                ph = mcr_migration_phase_at(&t, mcr_router_epoch(W.r[k]));
            mcr_router_migration_clear(&t);
            if (ph != (k == POOL_PLAIN ? MCR_MIGRATION_NONE : MCR_MIGRATION_SWITCHED)) {
                printf("FAIL setup: router %s: phase %s\n", pool_names[k],
                       mcr_migration_phase_name(ph));
                failures++;
                return false;
            }
        }
        if (rc == MCR_OK) {
            mcr_pool_options o;
            mcr_pool_options_init(&o);
            o.connections = 1;
            o.eager = 1;
            o.connect_timeout_ms = 2000;
            o.request_timeout_ms = 5000;
            o.retry_timeout_ms = 100;
            o.protocol = opt.meta ? MCR_PROTO_META : MCR_PROTO_TEXT;
            rc = mcr_pool_new(W.base, W.r[k], &o, &W.p[k], &err);
        }
        if (rc != MCR_OK) {
            printf("FAIL setup: %s router and pool: %s\n", pool_names[k],
                   err.code ? err.message : mcr_strerror(rc));
            failures++;
            return false;
        }
    }
    /* Every key at both its owners, then checked there. */
    next_generation();
    return step("seeding the new owners", POOL_PLAIN, K_PIN_SET_NEW, STORED_NEW) &&
           step("seeding the old owners", POOL_PLAIN, K_PIN_SET_OLD, STORED_OLD) &&
           step("reading the seed at the old owners", POOL_PLAIN, K_PIN_GET_OLD, HIT_OLD) &&
           step("reading the seed through the plain pool", POOL_PLAIN, K_GET, HIT_NEW);
}

static void teardown(void)
{
    for (int k = 0; k < POOL_COUNT; k++) {
        mcr_pool_free(W.p[k]);
        mcr_router_free(W.r[k]);
    }
    if (W.base)
        event_base_free(W.base);
    mcr_snapshot_unref(W.a);
    mcr_snapshot_unref(W.b);
    for (int i = 0; i < NSERVERS; i++)
        rs_stop(&W.mc[i]);
    if (W.dir[0] && !opt.keep) {
        for (int i = 0; i < NSERVERS; i++) {
            char log[128];
            snprintf(log, sizeof log, "%s/memcached-%d.log", W.dir, i);
            unlink(log);
        }
        rmdir(W.dir);
    } else if (W.dir[0]) {
        printf("INFO logs kept in %s\n", W.dir);
    }
    free(W.key_bytes);
    free(W.key);
    free(W.len);
    free(W.old_of);
    free(W.new_of);
    free(W.val);
    free(W.lat);
}

/* ------------------------------------------------------------ reporting */

static double median_of(const series *s, size_t field)
{
    double v[MAX_REPS];
    for (unsigned i = 0; i < s->n; i++)
        v[i] = *(const double *)((const char *)&s->r[i] + field);
    return bench_median(v, s->n);
}

static void summarize(void)
{
    for (int c = 0; c < C_COUNT; c++)
        for (int d = 0; d < D_COUNT; d++) {
            series *s = &S[c][d];
            if (s->n == 0)
                continue;
            s->med.ops_per_s = median_of(s, offsetof(run, ops_per_s));
            s->med.p50_us = median_of(s, offsetof(run, p50_us));
            s->med.p99_us = median_of(s, offsetof(run, p99_us));
            s->med.mean_us = median_of(s, offsetof(run, mean_us));
            s->med.req_per_op = median_of(s, offsetof(run, req_per_op));
            printf("RESULT %s %s ops_per_s=%.0f p50_us=%.1f p99_us=%.1f mean_us=%.1f "
                   "requests_per_op=%.2f reps=%u\n",
                   case_names[c], depth_names[d], s->med.ops_per_s, s->med.p50_us,
                   s->med.p99_us, s->med.mean_us, s->med.req_per_op, s->n);
        }
}

/* Latency ratios (case over base: above 1 is slower) and the throughput
 * ratio (case over base: below 1 is slower). */
static void ratios(void)
{
    static const struct {
        const char *name;
        int c, base;
    } R[] = {
        {"switched_hit_vs_plain_get", C_GET_SWITCHED, C_GET_PLAIN},
        {"fallback_vs_plain_get", C_GET_FALLBACK, C_GET_PLAIN},
        {"dual_set_vs_plain_set", C_SET_DUAL, C_SET_PLAIN},
        {"miss_then_old_by_hand_vs_plain_get", C_GET_BY_HAND, C_GET_PLAIN},
        {"both_sets_by_hand_vs_plain_set", C_SET_BY_HAND, C_SET_PLAIN},
        {"fallback_vs_by_hand", C_GET_FALLBACK, C_GET_BY_HAND},
        {"dual_set_vs_by_hand", C_SET_DUAL, C_SET_BY_HAND},
    };
    for (size_t k = 0; k < sizeof R / sizeof R[0]; k++)
        for (int d = 0; d < D_COUNT; d++) {
            const run *a = &S[R[k].c][d].med, *b = &S[R[k].base][d].med;
            if (S[R[k].c][d].n == 0 || S[R[k].base][d].n == 0 || b->p50_us <= 0 ||
                b->p99_us <= 0 || b->mean_us <= 0 || b->ops_per_s <= 0)
                continue;
            printf("RATIO %s %s p50=%.2fx p99=%.2fx mean=%.2fx ops_per_s=%.2fx\n", R[k].name,
                   depth_names[d], a->p50_us / b->p50_us, a->p99_us / b->p99_us,
                   a->mean_us / b->mean_us, a->ops_per_s / b->ops_per_s);
        }
}

static void table(void)
{
    printf("\n%-18s %-9s %10s %9s %9s %9s %7s %7s %7s\n", "case", "depth", "ops/s", "p50 us",
           "p99 us", "mean us", "req/op", "p50 x", "ops x");
    for (int c = 0; c < C_COUNT; c++)
        for (int d = 0; d < D_COUNT; d++) {
            const series *s = &S[c][d];
            int base = c >= C_SET_PLAIN ? C_SET_PLAIN : C_GET_PLAIN;
            const run *b = &S[base][d].med;
            if (s->n == 0)
                continue;
            printf("%-18s %-9s %10.0f %9.1f %9.1f %9.1f %7.2f", case_names[c], depth_names[d],
                   s->med.ops_per_s, s->med.p50_us, s->med.p99_us, s->med.mean_us,
                   s->med.req_per_op);
            if (S[base][d].n > 0 && b->p50_us > 0 && b->ops_per_s > 0)
                printf(" %7.2f %7.2f", s->med.p50_us / b->p50_us, s->med.ops_per_s / b->ops_per_s);
            printf("\n");
        }
    printf("%zu moved keys, %d memcached servers; medians of %u repetitions; serial: one\n"
           "request at a time, pipelined: %u in flight. p50 x, ops x: over get_plain (gets)\n"
           "or set_plain (sets) at the same depth.\n\n",
           W.n, NSERVERS, opt.reps, opt.depth);
}

static void pool_info(void)
{
    for (int k = 0; k < POOL_COUNT; k++) {
        size_t n = mcr_pool_server_count(W.p[k]);
        for (size_t i = 0; i < n; i++) {
            mcr_server_stats st;
            if (mcr_pool_server_stats(W.p[k], i, &st) != MCR_OK)
                continue;
            printf("INFO pool %s server=%s requests=%" PRIu64 " hits=%" PRIu64
                   " misses=%" PRIu64 " fallback_reads=%" PRIu64 " fallback_hits=%" PRIu64
                   " dual_writes=%" PRIu64 " errors=%" PRIu64 " p50_us=%.1f p99_us=%.1f\n",
                   pool_names[k], st.id, st.requests, st.hits, st.misses, st.fallback_reads,
                   st.fallback_hits, st.dual_writes, st.errors, st.p50_us, st.p99_us);
        }
    }
}

/* ------------------------------------------------------------ main */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench_transition [--quick] [--keys N] [--depth N] [--reps N] [--meta]\n"
            "                        [--case NAME] [--verbose] [--keep]\n"
            "  Starts %d memcached servers, finds the keys that adding the last one to the\n"
            "  others moves, and times on those keys, through pools on two routers (no\n"
            "  migration; the migration switched): plain gets, gets that hit at the new\n"
            "  owner, gets served by the previous owner, plain and dual sets, and the same\n"
            "  extra requests made by hand without a migration; one at a time and pipelined.\n"
            "  Every result is checked. Needs memcached ($MCR_MEMCACHED).\n"
            "  --quick      200 moved keys, 3 repetitions: a smoke run\n"
            "  --keys N     moved keys (default 2000)\n"
            "  --depth N    requests in flight in the pipelined runs (default 128)\n"
            "  --reps N     timed repetitions per case (default 11, odd is best)\n"
            "  --meta       the pools speak the meta protocol (default text)\n"
            "  --case NAME  only this case (for profiles): get_plain, get_switched_hit,\n"
            "               get_fallback, get_miss_then_old, set_plain, set_dual,\n"
            "               set_both_plain\n"
            "  --verbose    every repetition, and the pools' counters at the end\n"
            "  --keep       keep the temporary directory (memcached logs)\n"
            "Output: RESULT <case> serial|pipelined ops_per_s=.. p50_us=.. p99_us=..\n"
            "mean_us=.. requests_per_op=.. (medians), RATIO lines (latency: case over\n"
            "base, above 1 slower; ops_per_s: case over base, below 1 slower), a table.\n"
            "Exit status 1 when a value, a reply, a counter or the setup is wrong, never\n"
            "because of speed; 77 (a failure too) when memcached is missing.\n",
            NSERVERS);
}

static void parse_args(int argc, char **argv)
{
    bool keys_given = false, reps_given = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0) {
            opt.quick = true;
        } else if (strcmp(a, "--verbose") == 0) {
            opt.verbose = true;
        } else if (strcmp(a, "--keep") == 0) {
            opt.keep = true;
        } else if (strcmp(a, "--meta") == 0) {
            opt.meta = true;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (v != NULL && strcmp(a, "--keys") == 0) {
            opt.nkeys = bench_arg_uint("bench_transition", a, v, 1, 1000000);
            keys_given = true;
            i++;
        } else if (v != NULL && strcmp(a, "--depth") == 0) {
            opt.depth = bench_arg_uint("bench_transition", a, v, 1, 4096);
            i++;
        } else if (v != NULL && strcmp(a, "--case") == 0) {
            int c = 0;
            while (c < C_COUNT && strcmp(case_names[c], v) != 0)
                c++;
            if (c == C_COUNT) {
                fprintf(stderr, "bench_transition: --case: no case '%s' (see --help)\n", v);
                exit(2);
            }
            opt.only = v;
            i++;
        } else if (v != NULL && strcmp(a, "--reps") == 0) {
            opt.reps = bench_arg_uint("bench_transition", a, v, 1, MAX_REPS);
            reps_given = true;
            i++;
        } else {
            fprintf(stderr, "bench_transition: unknown argument '%s'\n", a);
            usage(stderr);
            exit(2);
        }
    }
    if (opt.quick) {
        if (!keys_given)
            opt.nkeys = 200;
        if (!reps_given)
            opt.reps = 3;
    }
}

static void print_load(void)
{
    char buf[128] = "";
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fgets(buf, sizeof buf, f) == NULL)
            buf[0] = '\0';
        fclose(f);
    }
    buf[strcspn(buf, "\n")] = '\0';
    printf("INFO machine cpus=%ld loadavg=\"%s\"\n", sysconf(_SC_NPROCESSORS_ONLN), buf);
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    printf("INFO setup keys=%zu value_bytes=%d depth=%u reps=%u protocol=%s build_type=%s "
           "mcroute=%s\n",
           opt.nkeys, VALUE_LEN, opt.depth, opt.reps, opt.meta ? "meta" : "text",
           MCR_BENCH_BUILD_TYPE, mcr_version_string());
    print_load();
    if (!rs_executable(rs_memcached_path())) {
        printf("FAIL memcached (%s) is not installed\n", rs_memcached_path());
        return 77;
    }
    fflush(stdout);
    if (setup()) {
        /* Warm-up: one untimed pass of each case at each depth. */
        for (int c = 0; c < C_COUNT && failures == 0; c++)
            for (int d = 0; d < D_COUNT && failures == 0; d++)
                pass(c, d, false);
        for (unsigned rep = 0; rep < opt.reps && failures == 0; rep++)
            for (int j = 0; j < C_COUNT && failures == 0; j++)
                for (int d = 0; d < D_COUNT && failures == 0; d++)
                    pass((int)((rep + (unsigned)j) % C_COUNT), d, true);
        if (failures == 0) {
            summarize();
            ratios();
            table();
        }
        if (opt.verbose)
            pool_info();
    }
    teardown();
    if (failures)
        printf("FAILED %d problem(s), see the FAIL lines\n", failures);
    fflush(stdout);
    return failures ? 1 : 0;
}
