/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_pool.c: the connection pool timed against libmemcached, nutcracker and a raw epoll client (the floor) on the same real memcached servers and keys: pipelined gets and sets, 100-key multi-gets. */
#include <inttypes.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <libmemcached/memcached.h>

#include "benchutil.h"
#include "mcroute.h"
#include "mcroute_pool.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"
#include "mcroute_twemproxy.h"
#include "pool_floor.h"
#include "realserver.h"

/*
 * What is compared, and why it is fair:
 *
 *  - One process starts NSERVERS real memcached servers on 127.0.0.1 and one
 *    nutcracker whose single pool spreads keys over the same servers. All
 *    three clients run in this process, in one thread, one after the other,
 *    on the same servers and the same keys; repetitions are interleaved
 *    (the system going first rotates) and medians are reported.
 *  - Placement. mcroute uses mode "weighted" with md5, libmemcached
 *    KETAMA_WEIGHTED with md5 on the servers added in the same order, and
 *    nutcracker "ketama" with md5; mcroute's twemproxy compat reads the very
 *    YAML file nutcracker runs. Before anything is timed every key is checked
 *    to go to the same server on the three: with equal weights the three
 *    continua are the same. (Should the nutcracker placement differ, the
 *    comparison with nutcracker uses a second mcroute pool on the placement
 *    read from its YAML, reported as "mcroute_twem".)
 *  - Values are VALUE_LEN bytes that spell their key and a generation
 *    number, and the client flags are the key's index. Every set pass writes
 *    a new generation and is read back afterwards (untimed) by another
 *    client than the one that wrote it; every get checks the value, the
 *    flags and the key. A single wrong byte fails the run.
 *  - Pipelined gets and sets. mcroute: mcr_pool_get/_set with `depth`
 *    requests in flight; each callback submits the next request. Latency =
 *    from the call that submits a request to its callback. libmemcached
 *    cannot keep requests in flight across calls, so it runs batches of the
 *    same depth: gets are one memcached_mget() of `depth` keys then
 *    memcached_fetch_result() until the end (latency of a key = from the
 *    mget call to the fetch that returns it); sets are `depth` buffered
 *    memcached_set() calls (BUFFER_REQUESTS: libmemcached reads their
 *    replies later and discards them) closed by a round trip that reads
 *    every reply (an mget of one sentinel key per server: the cheapest
 *    public way to wait for them); the latency of each set is the batch's
 *    time. "mcroute_batch" runs the pool the libmemcached way (a batch of
 *    `depth`, wait for all, next batch) so the two can also be compared
 *    like for like. nutcracker: the same mcroute pool code, pointed at
 *    nutcracker's listen address (one server; as many connections as the
 *    pool has to the servers), `depth` in flight: the difference is the
 *    proxy hop.
 *  - Protocols. "mcroute" is the pool as configured by default (text
 *    protocol); the GOAL lines are its. "mcroute_meta" is the same pool with
 *    MCR_PROTO_META, reported beside it (INFO lines); nutcracker 0.5.0 and
 *    libmemcached's mget speak text.
 *  - Multi-gets: `mget_keys` consecutive keys, one multi-get at a time
 *    (mget_depth): mcr_pool_get_multi() on the servers, memcached_mget() +
 *    fetch, and mcr_pool_get_multi() through nutcracker (one "get k1 .. k100"
 *    that nutcracker splits by server). Latency = the whole multi-get.
 *    Throughput is counted in keys per second.
 *  - libmemcached 1.1: text protocol, NO_BLOCK, BUFFER_REQUESTS,
 *    TCP_NODELAY, KETAMA_WEIGHTED, HASH md5; one preallocated
 *    memcached_result_st, so no allocation per key.
 *  - The floor ("floor", bench/pool_floor.c): what no library can go under.
 *    A raw client with no library: one epoll loop, one nonblocking
 *    TCP_NODELAY socket per server (the pool here has one connection per
 *    server), text protocol, the pool's rounds on the pool's wire: per wake
 *    it reads everything readable, parses and checks every reply as the
 *    pool's checker does (value bytes, flags, key), queues the follow-ups
 *    into a buffer per server, then makes one write per server with bytes
 *    pending. Pipelined gets queued in one wake share one "get k1 k2 .."
 *    line per server (at most 100 keys, as the pool joins them); a
 *    multi-get is one "get k1 .. kn" line per server holding some of its
 *    keys, done at the last END, and the next starts then (mget_depth in
 *    flight, like the pool). Keys are routed by mcr_snapshot_locate() on
 *    the pool's snapshot: routing is work every client does. Latency is
 *    taken as for the pool: from queueing a request to parsing its reply.
 *    The GOAL lines compare the pool's client CPU with it.
 *  - CPU. The machine may have few cores for 4 memcached, nutcracker and
 *    this client: client CPU time per request (CLOCK_PROCESS_CPUTIME_ID) and
 *    the servers' and nutcracker's CPU time (from /proc) are reported too.
 */


#define NSERVERS 4
#define VALUE_LEN 100
#define KEY_MAX 48
#define KEY_SEED 0x706f6f6c62656e63ull
#define MAX_REPS 101
#define START_MS 10000
/* Mismatch messages printed per run; the rest are only counted. */
#define MAX_MESSAGES 5

typedef struct settings {
    bool quick;
    bool verbose;
    bool keep;             /* keep the temporary directory (logs, YAML) */
    size_t nkeys;
    unsigned depth;        /* requests in flight (pipelined runs) */
    unsigned reps;
    unsigned mget_keys;    /* keys per multi-get */
    unsigned mget_rounds;  /* passes over the key set per multi-get repetition */
    unsigned mget_depth;   /* multi-gets in flight */
    unsigned mc_threads;   /* memcached -t */
    unsigned proxy_conns;  /* pool connections to nutcracker */
    const char *phase;     /* --phase: only this phase ("set", "get", "multiget") */
    const char *system;    /* --system: only this system (and the readers checking it) */
    bool twem_pool;        /* --twem-pool: run mcroute_twem even on the same placement */
} settings;

static settings opt = {
    .nkeys = 10000,
    .depth = 128,
    .reps = 11,
    .mget_keys = 100,
    .mget_rounds = 5,
    .mget_depth = 1,
    .mc_threads = 1,
    .proxy_conns = NSERVERS,
};

const char *bench_program = "bench_pool";
static int failures;

/* ------------------------------------------------------------ systems and phases */

enum {
    SYS_MCROUTE,       /* the pool, text protocol (the default) */
    SYS_MCROUTE_META,  /* the pool, meta protocol */
    SYS_MCROUTE_BATCH, /* the pool (text) in libmemcached's batches */
    SYS_LMC,
    SYS_NUT,
    SYS_FLOOR,         /* the raw epoll client with no library (pool_floor.c) */
    SYS_MCROUTE_TWEM,  /* the pool on nutcracker's placement, when it differs */
    SYS_COUNT
};
static const char *const sys_names[SYS_COUNT] = {"mcroute",      "mcroute_meta", "mcroute_batch",
                                                 "libmemcached", "nutcracker",   "floor",
                                                 "mcroute_twem"};

enum { PH_SET, PH_GET, PH_MGET, PH_COUNT };
static const char *const ph_names[PH_COUNT] = {"set_pipelined", "get_pipelined", "multiget"};

/* One repetition of one system in one phase. */
typedef struct run {
    double ops_per_s;   /* requests per second (keys per second for multi-gets) */
    double p50_us, p99_us;
    double cpu_ns;      /* client CPU per request (per key for multi-gets) */
} run;

typedef struct series {
    bool used;
    run r[MAX_REPS];
    unsigned n;
    uint64_t ops;            /* requests (keys) over all timed repetitions */
    long long proxy_ticks;   /* nutcracker CPU over them, clock ticks */
    long long server_ticks;  /* all memcached CPU over them, clock ticks */
    run med;                 /* medians */
} series;

static series S[PH_COUNT][SYS_COUNT];

/* ------------------------------------------------------------ the world */

typedef struct world {
    char dir[64];
    rs_proc mc[NSERVERS];
    rs_proc nut;
    int nut_port;

    /* keys and the values of the current generation */
    size_t n;
    char *key_bytes;
    const char **key;
    size_t *len;
    char *val;            /* n * VALUE_LEN */
    unsigned gen;
    uint32_t *seen;       /* multi-gets: serial + 1 of the last multi-get that returned key i */
    uint32_t serial;      /* multi-gets submitted so far */

    struct event_base *base;
    mcr_router *r_direct; /* "weighted" md5, the servers in order */
    mcr_router *r_twem;   /* from nutcracker's YAML (NULL when the same placement) */
    mcr_router *r_proxy;  /* nutcracker's listen address alone */
    mcr_pool *p_direct, *p_meta, *p_twem, *p_proxy;
    memcached_st *memc;
    memcached_result_st result;
    mcr_snapshot *floor_snap; /* r_direct's, held for the floor's routing */
    pool_floor *floor;
    bool result_ok;

    /* one key per server for closing libmemcached set batches */
    char sentinel[NSERVERS][KEY_MAX];
    size_t sentinel_len[NSERVERS];
    const char *sentinel_ptr[NSERVERS];
    bool same_placement;  /* nutcracker's placement is libmemcached's */

    uint64_t *lat;        /* per-request latencies of one pass, ns */
    size_t lat_cap;
} world;

static world W;

/* ------------------------------------------------------------ small helpers */

static void fail(const char *fmt, const char *detail)
{
    printf("FAIL ");
    printf(fmt, detail);
    printf("\n");
    fflush(stdout);
    failures++;
}

static double cpu_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* utime + stime of a process, in clock ticks; -1 when unreadable. */
static long long proc_ticks(pid_t pid)
{
    char path[64], buf[1024];
    long long ut = 0, st = 0;
    FILE *f;
    size_t len;

    if (pid <= 0)
        return -1;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (f == NULL)
        return -1;
    len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    /* Fields after the command name (which may hold spaces): state is
     * field 3; utime and stime are fields 14 and 15. */
    char *p = strrchr(buf, ')');
    if (p == NULL)
        return -1;
    p++;
    for (int field = 3; field <= 15 && *p; field++) {
        while (*p == ' ')
            p++;
        if (field == 14)
            ut = strtoll(p, NULL, 10);
        if (field == 15)
            st = strtoll(p, NULL, 10);
        while (*p && *p != ' ')
            p++;
    }
    return ut + st;
}

static long long servers_ticks(void)
{
    long long sum = 0;
    for (int i = 0; i < NSERVERS; i++) {
        long long t = proc_ticks(W.mc[i].pid);
        if (t > 0)
            sum += t;
    }
    return sum;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted v[0..n), in microseconds. */
static double pct_us(const uint64_t *v, size_t n, double p)
{
    if (n == 0)
        return 0.0;
    size_t rank = (size_t)(p * (double)n + 0.999999);
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return (double)v[rank - 1] / 1e3;
}

static void need_lat(size_t n)
{
    if (n > W.lat_cap) {
        free(W.lat);
        W.lat = bench_xmalloc(n * sizeof(*W.lat));
        W.lat_cap = n;
    }
}

/* The key's index: keys start with it in decimal, then ':'. SIZE_MAX when
 * the text is no key of ours. */
static size_t key_index(const char *k, size_t len)
{
    size_t v = 0, i = 0;
    for (; i < len && k[i] >= '0' && k[i] <= '9'; i++)
        v = v * 10 + (size_t)(k[i] - '0');
    if (i == 0 || i == len || k[i] != ':' || v >= W.n)
        return SIZE_MAX;
    if (W.len[v] != len || memcmp(W.key[v], k, len) != 0)
        return SIZE_MAX;
    return v;
}

/* ------------------------------------------------------------ keys and values */

static void keys_init(size_t n)
{
    uint64_t rng = KEY_SEED;
    char *p;

    W.n = n;
    W.key_bytes = bench_xmalloc(n * KEY_MAX);
    W.key = bench_xmalloc(n * sizeof(*W.key));
    W.len = bench_xmalloc(n * sizeof(*W.len));
    W.val = bench_xmalloc(n * VALUE_LEN);
    W.seen = calloc(n, sizeof(*W.seen));
    if (W.seen == NULL) {
        fprintf(stderr, "bench_pool: out of memory\n");
        exit(1);
    }
    p = W.key_bytes;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = bench_next_rand(&rng);
        int len;
        switch (r % 4) {
        case 0:
            len = snprintf(p, KEY_MAX, "%zu:user:%08u", i, (unsigned)(r >> 8) % 100000000u);
            break;
        case 1:
            len = snprintf(p, KEY_MAX, "%zu:session:%016" PRIx64, i, r);
            break;
        case 2:
            len = snprintf(p, KEY_MAX, "%zu:cart:%u:items", i, (unsigned)(r >> 16) % 1000000u);
            break;
        default:
            len = snprintf(p, KEY_MAX, "%zu:page:/c/%u/v2", i, (unsigned)(r >> 24) % 100000u);
            break;
        }
        W.key[i] = p;
        W.len[i] = (size_t)len;
        p += KEY_MAX;
    }
}

/* Value of key i in generation gen: "<key>|g<gen>|" then letters that
 * depend on both. */
static void make_value(char *out, size_t i, unsigned gen)
{
    uint64_t rng = ((uint64_t)i << 20) ^ gen ^ 0x76616c7565ull;
    int n = snprintf(out, VALUE_LEN, "%.*s|g%u|", (int)W.len[i], W.key[i], gen);
    size_t at = n < 0 ? 0 : (size_t)n >= VALUE_LEN ? VALUE_LEN - 1 : (size_t)n;
    uint64_t r = 0;
    for (size_t j = at; j < VALUE_LEN; j++) {
        if ((j - at) % 8 == 0)
            r = bench_next_rand(&rng);
        out[j] = (char)('a' + (r & 0xff) % 26);
        r >>= 8;
    }
}

static void values_for(unsigned gen)
{
    W.gen = gen;
    for (size_t i = 0; i < W.n; i++)
        make_value(W.val + i * VALUE_LEN, i, gen);
}

/* ------------------------------------------------------------ checks */

/* One mismatch or error: printed for the first few of a run. */
typedef struct checker {
    const char *what; /* "get_pipelined mcroute" */
    unsigned bad;
} checker;

static void bad(checker *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void bad(checker *c, const char *fmt, ...)
{
    if (c->bad++ < MAX_MESSAGES) {
        va_list ap;
        va_start(ap, fmt);
        printf("FAIL %s: ", c->what);
        vprintf(fmt, ap);
        printf("\n");
        fflush(stdout);
        va_end(ap);
    }
}

static void check_value(checker *c, size_t i, const char *v, size_t vlen, uint32_t flags)
{
    const char *want = W.val + i * VALUE_LEN;
    if (vlen != VALUE_LEN || memcmp(v, want, VALUE_LEN) != 0)
        bad(c, "key %zu \"%s\": value \"%.*s\" (%zu bytes), want \"%.*s\"", i, W.key[i],
            (int)(vlen < 60 ? vlen : 60), v, vlen, 60, want);
    else if (flags != (uint32_t)i)
        bad(c, "key %zu \"%s\": flags %" PRIu32 ", want %zu", i, W.key[i], flags, i);
}

/* ------------------------------------------------------------ pool runs */

typedef struct win win;

typedef struct slot {
    win *w;
    size_t idx;       /* key index */
    uint64_t t0;      /* submission */
    bool busy;
} slot;

struct win {
    mcr_pool *pool;
    bool set;
    bool batch;       /* no submission from callbacks: batches of `depth` */
    size_t next, done, n;
    slot *slots;
    bool in_submit;
    bool stop;
    checker *ck;
};

static void on_reply(const mcr_result *res, void *arg);

static void submit_one(win *w, slot *s, uint64_t t0)
{
    size_t i = w->next++;
    int rc;

    s->idx = i;
    s->t0 = t0 ? t0 : bench_now_ns();
    s->busy = true;
    w->in_submit = true;
    if (w->set)
        rc = mcr_pool_set(w->pool, W.key[i], W.len[i], W.val + i * VALUE_LEN, VALUE_LEN,
                          (uint32_t)i, 0, on_reply, s, NULL);
    else
        rc = mcr_pool_get(w->pool, W.key[i], W.len[i], on_reply, s, NULL);
    w->in_submit = false;
    if (rc != MCR_OK) {
        bad(w->ck, "submitting key %zu: %s", i, mcr_strerror(rc));
        s->busy = false;
        w->stop = true;
        W.lat[w->done++] = 0;
    }
}

static void on_reply(const mcr_result *res, void *arg)
{
    slot *s = arg;
    win *w = s->w;
    uint64_t t = bench_now_ns();

    if (w->in_submit)
        bad(w->ck, "callback of key %zu ran inside a submission (the contract says later)", s->idx);
    if (!s->busy) {
        bad(w->ck, "second callback for key %zu", s->idx);
        return;
    }
    s->busy = false;
    W.lat[w->done++] = t - s->t0;
    if (res->status != MCR_OK) {
        bad(w->ck, "key %zu: %s (%s)", s->idx, mcr_strerror(res->status),
            res->message ? res->message : "");
    } else if (w->set) {
        if (res->reply != MCR_REPLY_STORED)
            bad(w->ck, "key %zu: set answered %s", s->idx, mcr_reply_name(res->reply));
    } else if (res->reply != MCR_REPLY_HIT) {
        bad(w->ck, "key %zu: get answered %s", s->idx, mcr_reply_name(res->reply));
    } else {
        if (res->key_len != W.len[s->idx] || memcmp(res->key, W.key[s->idx], res->key_len) != 0)
            bad(w->ck, "key %zu: the result names key \"%.*s\"", s->idx, (int)res->key_len,
                res->key);
        check_value(w->ck, s->idx, res->value, res->value_len, res->flags);
    }
    if (!w->batch && !w->stop && w->next < w->n)
        submit_one(w, s, 0);
}

/* n requests (keys 0..n-1), depth in flight. Fills W.lat[0..n). */
static void pool_pipeline(mcr_pool *pool, bool set, bool batch, size_t n, unsigned depth,
                          checker *ck)
{
    win w = {.pool = pool, .set = set, .batch = batch, .n = n, .ck = ck};
    w.slots = bench_xmalloc(depth * sizeof(*w.slots));
    for (unsigned j = 0; j < depth; j++)
        w.slots[j] = (slot){.w = &w};
    need_lat(n);
    if (!batch) {
        for (unsigned j = 0; j < depth && w.next < n && !w.stop; j++)
            submit_one(&w, &w.slots[j], 0);
        mcr_pool_wait(pool);
    } else {
        while (w.next < n && !w.stop) {
            uint64_t t0 = bench_now_ns();
            for (unsigned j = 0; j < depth && w.next < n && !w.stop; j++)
                submit_one(&w, &w.slots[j], t0);
            mcr_pool_wait(pool);
        }
    }
    if (w.done != w.next)
        bad(ck, "%zu requests submitted, %zu called back", w.next, w.done);
    if (w.next < n)
        bad(ck, "stopped after %zu of %zu requests", w.next, n);
    free(w.slots);
}

/* Multi-gets through the pool. */
typedef struct mwin mwin;

typedef struct mslot {
    mwin *w;
    size_t first, m;  /* keys first .. first+m-1 */
    size_t got;       /* key callbacks */
    uint32_t serial;  /* which multi-get: duplicates are told by it */
    uint64_t t0;
    bool busy;
} mslot;

struct mwin {
    mcr_pool *pool;
    size_t next, total;  /* multi-gets submitted, to do */
    size_t done;
    size_t chunks;       /* multi-gets per pass over the keys */
    mslot *slots;
    bool in_submit, stop;
    checker *ck;
};

static void on_mkey(const mcr_result *res, void *arg);
static void on_mdone(const mcr_result *res, void *arg);

static void msubmit(mwin *w, mslot *s)
{
    size_t j = w->next++;
    s->first = (j % w->chunks) * opt.mget_keys;
    s->m = opt.mget_keys;
    s->got = 0;
    s->busy = true;
    s->serial = ++W.serial;
    s->t0 = bench_now_ns();
    w->in_submit = true;
    int rc = mcr_pool_get_multi(w->pool, MCR_OP_GET, (const void *const *)(W.key + s->first),
                                W.len + s->first, s->m, on_mkey, on_mdone, s, NULL);
    w->in_submit = false;
    if (rc != MCR_OK) {
        bad(w->ck, "submitting multi-get of keys %zu..: %s", s->first, mcr_strerror(rc));
        s->busy = false;
        w->stop = true;
        W.lat[w->done++] = 0;
    }
}

static void on_mkey(const mcr_result *res, void *arg)
{
    mslot *s = arg;
    mwin *w = s->w;
    size_t i;

    if (w->in_submit)
        bad(w->ck, "a key callback ran inside mcr_pool_get_multi()");
    s->got++;
    if (res->status != MCR_OK) {
        bad(w->ck, "multi-get key \"%.*s\": %s (%s)", (int)res->key_len, res->key,
            mcr_strerror(res->status), res->message ? res->message : "");
        return;
    }
    i = key_index(res->key, res->key_len);
    if (i == SIZE_MAX || i < s->first || i >= s->first + s->m) {
        bad(w->ck, "multi-get of keys %zu..%zu: a result for key \"%.*s\"", s->first,
            s->first + s->m - 1, (int)res->key_len, res->key);
        return;
    }
    if (W.seen[i] == s->serial)
        bad(w->ck, "key %zu reported twice by one multi-get", i);
    W.seen[i] = s->serial;
    if (res->reply != MCR_REPLY_HIT)
        bad(w->ck, "key %zu: %s", i, mcr_reply_name(res->reply));
    else
        check_value(w->ck, i, res->value, res->value_len, res->flags);
}

static void on_mdone(const mcr_result *res, void *arg)
{
    mslot *s = arg;
    mwin *w = s->w;
    uint64_t t = bench_now_ns();

    if (w->in_submit)
        bad(w->ck, "a done callback ran inside mcr_pool_get_multi()");
    if (!s->busy) {
        bad(w->ck, "second done callback for keys %zu..", s->first);
        return;
    }
    s->busy = false;
    W.lat[w->done++] = t - s->t0;
    if (res->status != MCR_OK)
        bad(w->ck, "multi-get of keys %zu..: %s (%s)", s->first, mcr_strerror(res->status),
            res->message ? res->message : "");
    if (s->got != s->m)
        bad(w->ck, "multi-get of %zu keys: %zu key callbacks", s->m, s->got);
    else if (res->number != s->m)
        bad(w->ck, "multi-get of %zu keys: done says %" PRIu64 " hits", s->m, res->number);
    if (!w->stop && w->next < w->total)
        msubmit(w, s);
}

/* total multi-gets of mget_keys keys each; W.lat[0..total). */
static void pool_multiget(mcr_pool *pool, size_t total, checker *ck)
{
    mwin w = {.pool = pool, .total = total, .chunks = W.n / opt.mget_keys, .ck = ck};
    w.slots = bench_xmalloc(opt.mget_depth * sizeof(*w.slots));
    for (unsigned j = 0; j < opt.mget_depth; j++)
        w.slots[j] = (mslot){.w = &w};
    need_lat(total);
    for (unsigned j = 0; j < opt.mget_depth && w.next < total && !w.stop; j++)
        msubmit(&w, &w.slots[j]);
    mcr_pool_wait(pool);
    if (w.done != w.next)
        bad(ck, "%zu multi-gets submitted, %zu done", w.next, w.done);
    free(w.slots);
}

/* Heap bytes in use (glibc: small blocks plus mmap()ed ones). */
static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* The pool's memory per request in flight (the pool has no counter of its
 * own): glibc's heap in use with `depth` gets (and then mget_depth
 * multi-gets) submitted and not yet sent, minus before, over the count.
 * That is the request records, their key copies and the queued wire bytes
 * (the connections' buffers have grown in the warm-up passes already).
 * Untimed; every reply is checked as in the timed runs. */
static void memory_info(void)
{
    char what[] = "memory per request in flight";
    checker ck = {what, 0};
    unsigned n = opt.depth < W.n ? opt.depth : (unsigned)W.n;
    win w = {.pool = W.p_direct, .batch = true, .n = n, .ck = &ck};
    mwin mw = {.pool = W.p_direct, .total = opt.mget_depth, .chunks = W.n / opt.mget_keys,
               .ck = &ck};

    need_lat(n > opt.mget_depth ? n : opt.mget_depth);
    w.slots = bench_xmalloc(n * sizeof(*w.slots));
    mw.slots = bench_xmalloc(opt.mget_depth * sizeof(*mw.slots));
    for (unsigned j = 0; j < n; j++)
        w.slots[j] = (slot){.w = &w};
    for (unsigned j = 0; j < opt.mget_depth; j++)
        mw.slots[j] = (mslot){.w = &mw};

    size_t h0 = heap_in_use();
    for (unsigned j = 0; j < n && !w.stop; j++)
        submit_one(&w, &w.slots[j], 0);
    size_t h1 = heap_in_use();
    mcr_pool_wait(W.p_direct);
    size_t h2 = heap_in_use();
    for (unsigned j = 0; j < opt.mget_depth && !mw.stop; j++)
        msubmit(&mw, &mw.slots[j]);
    size_t h3 = heap_in_use();
    mcr_pool_wait(W.p_direct);
    if (w.done != n || mw.done != opt.mget_depth)
        bad(&ck, "%zu of %u gets, %zu of %u multi-gets answered", w.done, n, mw.done,
            opt.mget_depth);
    if (ck.bad)
        failures++;
    else
        printf("INFO pool_memory_per_request get_bytes=%.0f (%u gets in flight) "
               "multiget_bytes=%.0f per_key=%.0f (%u multi-gets of %u keys) (glibc mallinfo2 "
               "heap in use with them submitted minus before; the pool has no memory counter)\n",
               ((double)h1 - (double)h0) / n, n, ((double)h3 - (double)h2) / opt.mget_depth,
               ((double)h3 - (double)h2) / opt.mget_depth / opt.mget_keys, opt.mget_depth,
               opt.mget_keys);
    free(w.slots);
    free(mw.slots);
}

/* ------------------------------------------------------------ libmemcached runs */

/* Reads every result of the mget in progress, checking each; with `per_key`
 * W.lat[i] gets key i's latency from t0. Returns the number of results;
 * `first`/`m` bound the keys asked (m 0: any key). */
static size_t lmc_fetch_all(checker *ck, uint64_t t0, size_t first, size_t m, bool per_key)
{
    memcached_return_t rc = MEMCACHED_SUCCESS;
    memcached_result_st *r;
    size_t got = 0;

    while ((r = memcached_fetch_result(W.memc, &W.result, &rc)) != NULL) {
        uint64_t t = bench_now_ns();
        const char *k = memcached_result_key_value(r);
        size_t klen = memcached_result_key_length(r);
        size_t i = key_index(k, klen);
        got++;
        if (i == SIZE_MAX || (m && (i < first || i >= first + m))) {
            bad(ck, "a result for key \"%.*s\"", (int)klen, k);
            continue;
        }
        check_value(ck, i, memcached_result_value(r), memcached_result_length(r),
                    memcached_result_flags(r));
        if (per_key)
            W.lat[i] = t - t0;
    }
    if (rc != MEMCACHED_END && rc != MEMCACHED_NOTFOUND && rc != MEMCACHED_SUCCESS)
        bad(ck, "memcached_fetch_result: %s", memcached_strerror(W.memc, rc));
    return got;
}

/* Gets in batches of depth keys; W.lat[i] for key i. */
static void lmc_gets(size_t n, unsigned depth, checker *ck)
{
    need_lat(n);
    for (size_t i = 0; i < n; i += depth) {
        size_t m = n - i < depth ? n - i : depth;
        uint64_t t0 = bench_now_ns();
        memcached_return_t rc = memcached_mget(W.memc, W.key + i, W.len + i, m);
        if (rc != MEMCACHED_SUCCESS) {
            bad(ck, "memcached_mget: %s", memcached_strerror(W.memc, rc));
            return;
        }
        size_t got = lmc_fetch_all(ck, t0, i, m, true);
        if (got != m)
            bad(ck, "mget of %zu keys from %zu: %zu results", m, i, got);
    }
}

/* Waits for every buffered set's reply: an mget of the sentinels (whose
 * values are generation 0, set once at setup) first reads and discards the
 * pending replies of each server. */
static void lmc_drain(checker *ck)
{
    memcached_return_t rc = memcached_mget(W.memc, W.sentinel_ptr, W.sentinel_len, NSERVERS);
    memcached_result_st *r;
    size_t got = 0;

    if (rc != MEMCACHED_SUCCESS) {
        bad(ck, "memcached_mget of the sentinels: %s", memcached_strerror(W.memc, rc));
        return;
    }
    while ((r = memcached_fetch_result(W.memc, &W.result, &rc)) != NULL)
        got++;
    if (got != NSERVERS)
        bad(ck, "sentinel mget: %zu of %d results (%s)", got, NSERVERS,
            memcached_strerror(W.memc, rc));
}

/* Sets in buffered batches of depth; each set's latency is its batch's. */
static void lmc_sets(size_t n, unsigned depth, checker *ck)
{
    need_lat(n);
    for (size_t i = 0; i < n; i += depth) {
        size_t m = n - i < depth ? n - i : depth;
        uint64_t t0 = bench_now_ns();
        for (size_t j = i; j < i + m; j++) {
            memcached_return_t rc = memcached_set(W.memc, W.key[j], W.len[j],
                                                  W.val + j * VALUE_LEN, VALUE_LEN, 0,
                                                  (uint32_t)j);
            if (rc != MEMCACHED_BUFFERED && rc != MEMCACHED_SUCCESS)
                bad(ck, "memcached_set of key %zu: %s", j, memcached_strerror(W.memc, rc));
        }
        lmc_drain(ck);
        uint64_t dt = bench_now_ns() - t0;
        for (size_t j = i; j < i + m; j++)
            W.lat[j] = dt;
    }
}

/* total multi-gets one after the other. */
static void lmc_multiget(size_t total, checker *ck)
{
    size_t chunks = W.n / opt.mget_keys;
    need_lat(total);
    for (size_t j = 0; j < total; j++) {
        size_t first = (j % chunks) * opt.mget_keys;
        uint64_t t0 = bench_now_ns();
        memcached_return_t rc =
            memcached_mget(W.memc, W.key + first, W.len + first, opt.mget_keys);
        if (rc != MEMCACHED_SUCCESS) {
            bad(ck, "memcached_mget: %s", memcached_strerror(W.memc, rc));
            return;
        }
        size_t got = lmc_fetch_all(ck, t0, first, opt.mget_keys, false);
        W.lat[j] = bench_now_ns() - t0;
        if (got != opt.mget_keys)
            bad(ck, "multi-get of %u keys from %zu: %zu results", opt.mget_keys, first, got);
    }
}

/* ------------------------------------------------------------ floor runs */

static void floor_bad(void *ctx, const char *msg)
{
    bad(ctx, "%s", msg);
}

static pool_floor_job floor_job(checker *ck)
{
    return (pool_floor_job){.nkeys = W.n,
                            .key = W.key,
                            .len = W.len,
                            .val = W.val,
                            .value_len = VALUE_LEN,
                            .lat = W.lat,
                            .timeout_ms = 5000, /* the pools' request_timeout_ms */
                            .bad = floor_bad,
                            .ctx = ck};
}

static void floor_pipeline(bool set, size_t n, unsigned depth, checker *ck)
{
    need_lat(n);
    pool_floor_job job = floor_job(ck);
    pool_floor_pipeline(W.floor, &job, set, n, depth);
}

static void floor_multiget(size_t total, checker *ck)
{
    need_lat(total);
    pool_floor_job job = floor_job(ck);
    pool_floor_multiget(W.floor, &job, total, opt.mget_keys, opt.mget_depth);
}

/* ------------------------------------------------------------ verification */

/* Reads every key back through `sys` (untimed) and checks the current
 * generation. */
static void verify_with(int sys, const char *after)
{
    char what[160];
    checker ck = {what, 0};
    snprintf(what, sizeof what, "read-back by %s after %s", sys_names[sys], after);
    switch (sys) {
    case SYS_LMC:
        lmc_gets(W.n, opt.depth, &ck);
        break;
    case SYS_NUT:
        pool_pipeline(W.p_proxy, false, false, W.n, opt.depth, &ck);
        break;
    case SYS_MCROUTE_TWEM:
        pool_pipeline(W.p_twem, false, false, W.n, opt.depth, &ck);
        break;
    default:
        pool_pipeline(W.p_direct, false, false, W.n, opt.depth, &ck);
        break;
    }
    if (ck.bad)
        failures++;
}

/* Who reads back what `sys` wrote: another client, on the same placement. */
static int verifier_of(int sys)
{
    switch (sys) {
    case SYS_MCROUTE:
    case SYS_MCROUTE_META:
    case SYS_MCROUTE_BATCH:
    case SYS_FLOOR:
        return SYS_LMC;
    case SYS_LMC:
        return SYS_MCROUTE;
    case SYS_NUT:
        return W.same_placement ? SYS_MCROUTE : SYS_MCROUTE_TWEM;
    default:
        return SYS_NUT;
    }
}

/* ------------------------------------------------------------ one timed pass */

static mcr_pool *pool_of(int sys)
{
    switch (sys) {
    case SYS_NUT:
        return W.p_proxy;
    case SYS_MCROUTE_META:
        return W.p_meta;
    case SYS_MCROUTE_TWEM:
        return W.p_twem;
    default:
        return W.p_direct;
    }
}

static void record(int ph, int sys, size_t nlat, size_t ops, uint64_t ns, double cpu_s,
                   long long nut0, long long nut1, long long srv);

/* Runs one pass of `ph` on `sys`; with `timed`, records it in S. */
static void pass(int ph, int sys, bool timed)
{
    char what[96];
    checker ck = {what, 0};
    size_t nlat, ops;
    snprintf(what, sizeof what, "%s %s%s", ph_names[ph], sys_names[sys],
             timed ? "" : " (warm-up)");

    if (ph == PH_SET)
        values_for(W.gen + 1); /* untimed: the values of a new generation */

    long long nut0 = proc_ticks(W.nut.pid), srv0 = servers_ticks();
    double c0 = cpu_now_s();
    uint64_t t0 = bench_now_ns();
    if (ph == PH_MGET) {
        nlat = (W.n / opt.mget_keys) * opt.mget_rounds;
        ops = nlat * opt.mget_keys;
        if (sys == SYS_LMC)
            lmc_multiget(nlat, &ck);
        else if (sys == SYS_FLOOR)
            floor_multiget(nlat, &ck);
        else
            pool_multiget(pool_of(sys), nlat, &ck);
    } else {
        nlat = ops = W.n;
        if (sys == SYS_LMC) {
            if (ph == PH_SET)
                lmc_sets(W.n, opt.depth, &ck);
            else
                lmc_gets(W.n, opt.depth, &ck);
        } else if (sys == SYS_FLOOR) {
            floor_pipeline(ph == PH_SET, W.n, opt.depth, &ck);
        } else {
            pool_pipeline(pool_of(sys), ph == PH_SET, sys == SYS_MCROUTE_BATCH, W.n, opt.depth,
                          &ck);
        }
    }
    uint64_t t1 = bench_now_ns();
    double c1 = cpu_now_s();
    long long nut1 = proc_ticks(W.nut.pid), srv1 = servers_ticks();

    if (ck.bad) {
        if (ck.bad > MAX_MESSAGES)
            printf("FAIL %s: %u problems in all\n", what, ck.bad);
        failures++;
    }
    if (timed && !ck.bad)
        record(ph, sys, nlat, ops, t1 - t0, c1 - c0, nut0, nut1, srv1 - srv0);
    /* W.lat is free again: read back what a set pass wrote. */
    if (ph == PH_SET)
        verify_with(verifier_of(sys), what);
}

/* Stores one timed pass: W.lat[0..nlat) holds its latencies. */
static void record(int ph, int sys, size_t nlat, size_t ops, uint64_t ns, double cpu_s,
                   long long nut0, long long nut1, long long srv)
{
    series *s = &S[ph][sys];
    run *r = &s->r[s->n++];
    qsort(W.lat, nlat, sizeof(*W.lat), cmp_u64);
    r->ops_per_s = (double)ops / ((double)ns / 1e9);
    r->p50_us = pct_us(W.lat, nlat, 0.50);
    r->p99_us = pct_us(W.lat, nlat, 0.99);
    r->cpu_ns = cpu_s * 1e9 / (double)ops;
    s->used = true;
    s->ops += ops;
    if (nut0 >= 0 && nut1 >= 0)
        s->proxy_ticks += nut1 - nut0;
    s->server_ticks += srv;
    if (opt.verbose)
        printf("INFO rep %s %s ops_per_s=%.0f p50_us=%.1f p99_us=%.1f cpu_ns=%.0f\n",
               ph_names[ph], sys_names[sys], r->ops_per_s, r->p50_us, r->p99_us, r->cpu_ns);
}

/* ------------------------------------------------------------ setup */

static bool start_memcached(int i)
{
    char log[128];
    snprintf(log, sizeof log, "%s/memcached-%d.log", W.dir, i);
    if (opt.mc_threads <= 1)
        return rs_memcached_start(&W.mc[i], "127.0.0.1", 0, log, START_MS) == 0;

    /* As rs_memcached_start(), with more worker threads. */
    for (int attempt = 0; attempt < 5; attempt++) {
        int port, fd;
        char ports[16], threads[16];
        if (rs_reserve_ports("127.0.0.1", 1, &port, &fd) != 0)
            return false;
        rs_release_ports(1, &fd);
        snprintf(ports, sizeof ports, "%d", port);
        snprintf(threads, sizeof threads, "%u", opt.mc_threads);
        char *argv[] = {(char *)rs_memcached_path(), "-l", "127.0.0.1", "-p", ports, "-U", "0",
                        "-t", threads, "-m", "64", "-c", "1024", NULL};
        pid_t pid = rs_spawn(argv, log);
        if (pid < 0)
            return false;
        if (rs_wait_port("127.0.0.1", port, pid, START_MS) == 0) {
            W.mc[i].pid = pid;
            snprintf(W.mc[i].addr, sizeof W.mc[i].addr, "127.0.0.1");
            W.mc[i].port = port;
            return true;
        }
        rs_proc p = {.pid = pid};
        rs_stop(&p);
    }
    return false;
}

/* nutcracker's YAML: one pool over the servers, ketama md5, as in
 * production (preconnect, no ejection: nothing fails here). */
static size_t write_yaml(char *out, size_t cap)
{
    size_t n = (size_t)snprintf(out, cap,
                                "bench:\n"
                                "  listen: 127.0.0.1:%d\n"
                                "  hash: md5\n"
                                "  distribution: ketama\n"
                                "  timeout: 5000\n"
                                "  preconnect: true\n"
                                "  auto_eject_hosts: false\n"
                                "  server_connections: 1\n"
                                "  servers:\n",
                                W.nut_port);
    for (int i = 0; i < NSERVERS; i++)
        n += (size_t)snprintf(out + n, cap - n, "   - 127.0.0.1:%d:1\n", W.mc[i].port);
    return n;
}

static bool start_nutcracker(const char *yaml, size_t len)
{
    char conf[128], log[128], pidf[128];
    int port, fd;
    FILE *f;

    snprintf(conf, sizeof conf, "%s/nutcracker.yml", W.dir);
    snprintf(log, sizeof log, "%s/nutcracker.log", W.dir);
    snprintf(pidf, sizeof pidf, "%s/nutcracker.pid", W.dir);
    f = fopen(conf, "w");
    if (f == NULL || fwrite(yaml, 1, len, f) != len) {
        if (f)
            fclose(f);
        return false;
    }
    fclose(f);
    /* The listen port was reserved by the caller; the stats port here. */
    if (rs_reserve_ports("127.0.0.1", 1, &port, &fd) != 0)
        return false;
    rs_release_ports(1, &fd);
    return rs_nutcracker_start(&W.nut, conf, log, pidf, port, "127.0.0.1", W.nut_port,
                               START_MS) == 0;
}

static mcr_router *router_of(mcr_config *cfg, const char *what)
{
    mcr_snapshot *snap = NULL;
    mcr_router *r = NULL;
    mcr_error err = {0, ""};
    int rc = mcr_snapshot_new(cfg, 1, &snap, &err);
    if (rc == MCR_OK)
        rc = mcr_router_new(snap, &r, &err);
    mcr_snapshot_unref(snap);
    if (rc != MCR_OK) {
        printf("FAIL setup: %s: %s\n", what, err.code ? err.message : mcr_strerror(rc));
        failures++;
        return NULL;
    }
    return r;
}

static mcr_pool *pool_on(mcr_router *r, unsigned connections, mcr_protocol proto,
                         const char *what)
{
    mcr_pool_options o;
    mcr_pool *p = NULL;
    mcr_error err = {0, ""};

    mcr_pool_options_init(&o);
    o.connections = connections;
    o.eager = 1;
    o.connect_timeout_ms = 2000;
    o.request_timeout_ms = 5000;
    o.retry_timeout_ms = 100;
    o.protocol = proto;
    int rc = mcr_pool_new(W.base, r, &o, &p, &err);
    if (rc != MCR_OK) {
        printf("FAIL setup: %s pool: %s\n", what, err.code ? err.message : mcr_strerror(rc));
        failures++;
        return NULL;
    }
    return p;
}

static bool setup_lmc(void)
{
    memcached_return_t rc = MEMCACHED_SUCCESS;
    W.memc = memcached_create(NULL);
    if (W.memc == NULL)
        return false;
    for (int i = 0; i < NSERVERS && rc == MEMCACHED_SUCCESS; i++)
        rc = memcached_server_add_with_weight(W.memc, "127.0.0.1", (in_port_t)W.mc[i].port, 1);
    if (rc == MEMCACHED_SUCCESS)
        rc = memcached_behavior_set(W.memc, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1);
    if (rc == MEMCACHED_SUCCESS)
        rc = memcached_behavior_set(W.memc, MEMCACHED_BEHAVIOR_HASH, MEMCACHED_HASH_MD5);
    if (rc == MEMCACHED_SUCCESS)
        rc = memcached_behavior_set(W.memc, MEMCACHED_BEHAVIOR_NO_BLOCK, 1);
    if (rc == MEMCACHED_SUCCESS)
        rc = memcached_behavior_set(W.memc, MEMCACHED_BEHAVIOR_BUFFER_REQUESTS, 1);
    if (rc == MEMCACHED_SUCCESS)
        rc = memcached_behavior_set(W.memc, MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
    if (rc == MEMCACHED_SUCCESS)
        rc = memcached_behavior_set(W.memc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 5000);
    if (rc != MEMCACHED_SUCCESS) {
        printf("FAIL setup: libmemcached: %s\n", memcached_strerror(W.memc, rc));
        failures++;
        return false;
    }
    W.result_ok = memcached_result_create(W.memc, &W.result) != NULL;
    return W.result_ok;
}

/* Every key on the same server for mcroute ("weighted"), libmemcached and
 * nutcracker's placement as mcroute's twemproxy compat reads it. */
static bool check_placements(const mcr_twem *twem)
{
    mcr_snapshot *snap = mcr_router_current(W.r_direct);
    mcr_ring *tring = NULL;
    mcr_error err = {0, ""};
    size_t lmc_diff = 0, twem_diff = 0;
    int rc = mcr_twem_ring(twem, 0, &tring, &err);

    if (rc != MCR_OK || snap == NULL) {
        printf("FAIL setup: nutcracker ring: %s\n", err.code ? err.message : mcr_strerror(rc));
        failures++;
        mcr_snapshot_unref(snap);
        return false;
    }
    for (size_t i = 0; i < W.n; i++) {
        uint32_t m = mcr_snapshot_locate(snap, W.key[i], W.len[i]);
        uint32_t l = memcached_generate_hash(W.memc, W.key[i], W.len[i]);
        uint32_t t = mcr_ring_locate(tring, W.key[i], W.len[i]);
        mcr_server_desc d;
        if (m != l) {
            if (lmc_diff++ < MAX_MESSAGES)
                printf("FAIL placement: key \"%s\" on server %u (mcroute), %u (libmemcached)\n",
                       W.key[i], (unsigned)m, (unsigned)l);
        }
        if (mcr_snapshot_server(snap, m, &d) != MCR_OK ||
            strcmp(d.host, mcr_ring_server_host(tring, t)) != 0 ||
            d.port != mcr_ring_server_port(tring, t))
            twem_diff++;
    }
    mcr_ring_free(tring);
    mcr_snapshot_unref(snap);
    if (lmc_diff) {
        printf("FAIL placement: %zu of %zu keys differ between mcroute and libmemcached\n",
               lmc_diff, W.n);
        failures++;
        return false;
    }
    W.same_placement = twem_diff == 0;
    printf("INFO placement keys=%zu mcroute_vs_libmemcached_differ=0 "
           "libmemcached_vs_nutcracker_differ=%zu%s\n",
           W.n, twem_diff,
           twem_diff ? " (nutcracker compared with mcroute_twem, its own placement)" : "");
    return true;
}

/* Pick, for each server, a key placed there (sentinels for closing
 * libmemcached set batches), and store it. */
static bool setup_sentinels(void)
{
    int found = 0;
    for (unsigned k = 0; k < 100000 && found < NSERVERS; k++) {
        char key[KEY_MAX];
        int len = snprintf(key, sizeof key, "sentinel:%u", k);
        uint32_t s = memcached_generate_hash(W.memc, key, (size_t)len);
        if (s < NSERVERS && W.sentinel_len[s] == 0) {
            memcpy(W.sentinel[s], key, (size_t)len + 1);
            W.sentinel_len[s] = (size_t)len;
            W.sentinel_ptr[s] = W.sentinel[s];
            found++;
        }
    }
    if (found < NSERVERS)
        return false;
    for (int s = 0; s < NSERVERS; s++) {
        mcr_request req = {.op = MCR_OP_SET,
                           .key = W.sentinel[s],
                           .key_len = W.sentinel_len[s],
                           .value = "sentinel",
                           .value_len = 8};
        mcr_owned_result res;
        int rc = mcr_pool_exec(W.p_direct, &req, &res);
        if (rc != MCR_OK || res.reply != MCR_REPLY_STORED) {
            printf("FAIL setup: storing sentinel %s: %s %s\n", W.sentinel[s], mcr_strerror(rc),
                   res.message);
            mcr_owned_result_clear(&res);
            failures++;
            return false;
        }
        mcr_owned_result_clear(&res);
    }
    return true;
}

/* Writes the current generation through the pools of both placements
 * (untimed), so every reader finds it. */
static bool seed(const char *why)
{
    char what[96];
    checker ck = {what, 0};
    snprintf(what, sizeof what, "seeding (%s)", why);
    values_for(W.gen + 1);
    pool_pipeline(W.p_direct, true, false, W.n, opt.depth, &ck);
    if (W.p_twem)
        pool_pipeline(W.p_twem, true, false, W.n, opt.depth, &ck);
    if (ck.bad) {
        failures++;
        return false;
    }
    return true;
}

static bool setup(void)
{
    char yaml[2048];
    size_t ylen;
    mcr_twem *twem = NULL;
    mcr_config *cfg = NULL, *pcfg = NULL;
    mcr_error err = {0, ""};
    int fd;
    bool ok = false;

    snprintf(W.dir, sizeof W.dir, "/tmp/mcr-bench-pool-XXXXXX");
    if (mkdtemp(W.dir) == NULL) {
        fail("setup: mkdtemp %s", W.dir);
        return false;
    }
    for (int i = 0; i < NSERVERS; i++)
        if (!start_memcached(i)) {
            printf("FAIL setup: memcached %d did not start (logs in %s)\n", i, W.dir);
            failures++;
            return false;
        }
    if (rs_reserve_ports("127.0.0.1", 1, &W.nut_port, &fd) != 0) {
        fail("setup: %s", "no free port for nutcracker");
        return false;
    }
    rs_release_ports(1, &fd);
    ylen = write_yaml(yaml, sizeof yaml);
    if (!start_nutcracker(yaml, ylen)) {
        printf("FAIL setup: nutcracker did not start (log %s/nutcracker.log)\n", W.dir);
        failures++;
        return false;
    }
    printf("INFO servers memcached=%d threads_each=%u ports=%d,%d,%d,%d nutcracker=127.0.0.1:%d"
           " dir=%s\n",
           NSERVERS, opt.mc_threads, W.mc[0].port, W.mc[1].port, W.mc[2].port, W.mc[3].port,
           W.nut_port, W.dir);

    if (!setup_lmc())
        return false;

    /* mcroute, libmemcached's placement */
    cfg = mcr_config_new();
    int rc = cfg ? mcr_config_set_mode(cfg, MCR_MODE_WEIGHTED) : MCR_ERR_NOMEM;
    if (rc == MCR_OK)
        rc = mcr_config_set_hash(cfg, MCR_HASH_MD5);
    for (int i = 0; i < NSERVERS && rc == MCR_OK; i++)
        rc = mcr_config_add_server(cfg, "127.0.0.1", W.mc[i].port, 1, &err);
    if (rc != MCR_OK) {
        printf("FAIL setup: config: %s\n", err.code ? err.message : mcr_strerror(rc));
        failures++;
        goto out;
    }
    W.r_direct = router_of(cfg, "the servers' snapshot");
    if (W.r_direct == NULL)
        goto out;

    /* nutcracker's placement, from the file it runs */
    rc = mcr_twem_load_buffer(yaml, ylen, "nutcracker.yml", &twem, &err);
    if (rc != MCR_OK) {
        printf("FAIL setup: mcr_twem_load_buffer: %s\n", err.code ? err.message : mcr_strerror(rc));
        failures++;
        goto out;
    }
    if (!check_placements(twem))
        goto out;
    if (!W.same_placement || opt.twem_pool) {
        mcr_config *tcfg = NULL;
        rc = mcr_twem_config(twem, 0, &tcfg, &err);
        if (rc != MCR_OK) {
            printf("FAIL setup: mcr_twem_config: %s\n", err.code ? err.message : mcr_strerror(rc));
            failures++;
            goto out;
        }
        W.r_twem = router_of(tcfg, "nutcracker's snapshot");
        mcr_config_free(tcfg);
        if (W.r_twem == NULL)
            goto out;
    }

    /* nutcracker itself: one server */
    pcfg = mcr_config_new();
    rc = pcfg ? mcr_config_add_server(pcfg, "127.0.0.1", W.nut_port, 1, &err) : MCR_ERR_NOMEM;
    if (rc != MCR_OK) {
        printf("FAIL setup: proxy config: %s\n", err.code ? err.message : mcr_strerror(rc));
        failures++;
        goto out;
    }
    W.r_proxy = router_of(pcfg, "nutcracker's address");
    if (W.r_proxy == NULL)
        goto out;

    W.base = event_base_new();
    if (W.base == NULL) {
        fail("setup: %s", "event_base_new failed");
        goto out;
    }
    W.p_direct = pool_on(W.r_direct, 1, MCR_PROTO_TEXT, "servers");
    W.p_meta = pool_on(W.r_direct, 1, MCR_PROTO_META, "servers (meta)");
    /* nutcracker 0.5.0 speaks the text protocol only */
    W.p_proxy = pool_on(W.r_proxy, opt.proxy_conns, MCR_PROTO_TEXT, "nutcracker");
    if (W.r_twem)
        W.p_twem = pool_on(W.r_twem, 1, MCR_PROTO_TEXT, "servers (nutcracker's placement)");
    if (W.p_direct == NULL || W.p_meta == NULL || W.p_proxy == NULL ||
        (W.r_twem && W.p_twem == NULL))
        goto out;
    /* The floor: its own sockets, routed on the pool's snapshot. */
    {
        char ferr[160] = "the router holds no snapshot";
        W.floor_snap = mcr_router_current(W.r_direct);
        if (W.floor_snap != NULL)
            W.floor = pool_floor_new(W.floor_snap, ferr, sizeof ferr);
        if (W.floor == NULL) {
            printf("FAIL setup: floor: %s\n", ferr);
            failures++;
            goto out;
        }
    }
    ok = setup_sentinels() && seed("setup");
out:
    mcr_config_free(cfg);
    mcr_config_free(pcfg);
    mcr_twem_free(twem);
    return ok;
}

static void teardown(void)
{
    pool_floor_free(W.floor);
    mcr_snapshot_unref(W.floor_snap);
    mcr_pool_free(W.p_direct);
    mcr_pool_free(W.p_meta);
    mcr_pool_free(W.p_twem);
    mcr_pool_free(W.p_proxy);
    if (W.base)
        event_base_free(W.base);
    mcr_router_free(W.r_direct);
    mcr_router_free(W.r_twem);
    mcr_router_free(W.r_proxy);
    if (W.result_ok)
        memcached_result_free(&W.result);
    memcached_free(W.memc);
    rs_stop(&W.nut);
    for (int i = 0; i < NSERVERS; i++)
        rs_stop(&W.mc[i]);
    if (W.dir[0] && !opt.keep && failures == 0) {
        static const char *const files[] = {"nutcracker.yml", "nutcracker.log", "nutcracker.pid",
                                            "memcached-0.log", "memcached-1.log",
                                            "memcached-2.log", "memcached-3.log"};
        char path[160];
        for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
            snprintf(path, sizeof path, "%s/%s", W.dir, files[i]);
            unlink(path);
        }
        rmdir(W.dir);
    } else if (W.dir[0]) {
        printf("INFO logs kept in %s\n", W.dir);
    }
    free(W.key_bytes);
    free(W.key);
    free(W.len);
    free(W.val);
    free(W.seen);
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

static double ticks_ns(long long ticks, uint64_t ops);

static void summarize(void)
{
    for (int ph = 0; ph < PH_COUNT; ph++)
        for (int sys = 0; sys < SYS_COUNT; sys++) {
            series *s = &S[ph][sys];
            if (!s->used || s->n == 0)
                continue;
            s->med.ops_per_s = median_of(s, offsetof(run, ops_per_s));
            s->med.p50_us = median_of(s, offsetof(run, p50_us));
            s->med.p99_us = median_of(s, offsetof(run, p99_us));
            s->med.cpu_ns = median_of(s, offsetof(run, cpu_ns));
            printf("RESULT %s %s %s=%.0f p50_us=%.1f p99_us=%.1f client_cpu_ns=%.0f "
                   "server_cpu_ns=%.0f",
                   ph_names[ph], sys_names[sys], ph == PH_MGET ? "keys_per_s" : "ops_per_s",
                   s->med.ops_per_s, s->med.p50_us, s->med.p99_us, s->med.cpu_ns,
                   ticks_ns(s->server_ticks, s->ops));
            if (sys == SYS_NUT)
                printf(" proxy_cpu_ns=%.0f", ticks_ns(s->proxy_ticks, s->ops));
            printf(" reps=%u\n", s->n);
        }
    fflush(stdout);
}

/* Set when --phase or --system left something out: goals may lack data. */
static bool any_phase_skipped;

/* How a goal's measured ratio must compare with its target. */
typedef enum { CMP_GE, CMP_GT, CMP_LE, CMP_LT } goal_cmp;
static const char *const cmp_names[] = {">=", ">", "<=", "<"};

typedef struct goal {
    const char *name;
    const char *rule;  /* how to read the ratio */
    double target;
    goal_cmp cmp;      /* throughput ratios: >= or >; cost ratios: <= or < */
    double measured;   /* < 0: not measured */
    const char *no_goal; /* non-NULL: an INFO line only, saying why (e.g. "mget-depth < 4") */
} goal;

static bool goal_met(const goal *g)
{
    switch (g->cmp) {
    case CMP_GE:
        return g->measured >= g->target;
    case CMP_GT:
        return g->measured > g->target;
    case CMP_LE:
        return g->measured <= g->target;
    default:
        return g->measured < g->target;
    }
}

static void goal_line(const goal *g)
{
    if (g->measured < 0) {
        printf("GOAL %s target=%s%.2fx measured=none %s\n", g->name, cmp_names[g->cmp],
               g->target, any_phase_skipped ? "NOT RUN" : "MISS (a run failed)");
        return;
    }
    printf("GOAL %s target=%s%.2fx measured=%.2fx %s (%s)\n", g->name, cmp_names[g->cmp],
           g->target, g->measured, goal_met(g) ? "PASS" : "MISS", g->rule);
}

/* A goal as an INFO line: for a variant of the pool, or where the goal
 * does not apply (`why`). */
static void goal_info(const goal *g, const char *why)
{
    if (g->measured < 0)
        return;
    printf("INFO %s measured=%.2fx (%s; would %s the goal of %s%.2fx; %s)\n", g->name,
           g->measured, g->rule, goal_met(g) ? "meet" : "miss", cmp_names[g->cmp], g->target,
           why);
}

static double ratio_tput(int ph, int a, int b)
{
    const series *x = &S[ph][a], *y = &S[ph][b];
    if (!x->used || !y->used || x->n == 0 || y->n == 0 || y->med.ops_per_s <= 0)
        return -1;
    return x->med.ops_per_s / y->med.ops_per_s;
}

static double ratio_p99(int ph, int a, int b) /* b's p99 over a's: > 1 when a is lower */
{
    const series *x = &S[ph][a], *y = &S[ph][b];
    if (!x->used || !y->used || x->n == 0 || y->n == 0 || x->med.p99_us <= 0)
        return -1;
    return y->med.p99_us / x->med.p99_us;
}

static double ratio_cpu(int ph, int a, int b) /* a's client CPU per request over b's */
{
    const series *x = &S[ph][a], *y = &S[ph][b];
    if (!x->used || !y->used || x->n == 0 || y->n == 0 || y->med.cpu_ns <= 0)
        return -1;
    return x->med.cpu_ns / y->med.cpu_ns;
}

/* The goals of pool system `m` (`m_nut` against nutcracker) as GOAL lines,
 * or with `info` as INFO lines for a variant of the pool (names + suffix).
 * Issue 16's goals depend on the multi-gets in flight: at mget_depth 1
 * every client pays about one wakeup per server per multi-get, so the
 * pool is held to 1.10x the floor there and the libmemcached goals (which
 * a blocking client cannot overlap) apply from 4 in flight. */
static void goals_of(int m, int m_nut, const char *suffix, bool info)
{
    bool deep = opt.mget_depth >= 4;
    const char *shallow = deep ? NULL : "no goal below --mget-depth 4";
    const goal g[] = {
        {"multiget_vs_libmemcached", "keys/s over libmemcached's", 1.5, CMP_GE,
         ratio_tput(PH_MGET, m, SYS_LMC), NULL},
        {"get_pipelined_vs_libmemcached", "gets/s over libmemcached's", 1.5, CMP_GE,
         ratio_tput(PH_GET, m, SYS_LMC), NULL},
        {"get_pipelined_vs_nutcracker", "gets/s over nutcracker's", 1.0, CMP_GT,
         ratio_tput(PH_GET, m_nut, SYS_NUT), NULL},
        {"get_pipelined_p99_vs_nutcracker", "nutcracker's p99 over mcroute's: >1 = lower", 1.0,
         CMP_GT, ratio_p99(PH_GET, m_nut, SYS_NUT), NULL},
        {"set_pipelined_vs_nutcracker", "sets/s over nutcracker's", 1.0, CMP_GT,
         ratio_tput(PH_SET, m_nut, SYS_NUT), NULL},
        {"set_pipelined_p99_vs_nutcracker", "nutcracker's p99 over mcroute's: >1 = lower", 1.0,
         CMP_GT, ratio_p99(PH_SET, m_nut, SYS_NUT), NULL},
        {"multiget_vs_nutcracker", "keys/s over nutcracker's", 1.0, CMP_GT,
         ratio_tput(PH_MGET, m_nut, SYS_NUT), NULL},
        {"multiget_p99_vs_nutcracker", "nutcracker's p99 over mcroute's: >1 = lower", 1.0, CMP_GT,
         ratio_p99(PH_MGET, m_nut, SYS_NUT), NULL},
        /* issue 16 part 3: client CPU per key against the floor and libmemcached */
        {"multiget_cpu_vs_floor", "client CPU per key over the floor's", deep ? 1.25 : 1.10,
         CMP_LE, ratio_cpu(PH_MGET, m, SYS_FLOOR),
         opt.mget_depth == 1 || deep ? NULL : "no goal at --mget-depth 2 or 3"},
        {"multiget_cpu_vs_libmemcached", "client CPU per key over libmemcached's", 0.40, CMP_LE,
         ratio_cpu(PH_MGET, m, SYS_LMC), shallow},
        {"multiget_2x_vs_libmemcached", "keys/s over libmemcached's", 2.0, CMP_GE,
         ratio_tput(PH_MGET, m, SYS_LMC), shallow},
        {"get_pipelined_cpu_vs_floor", "client CPU per get over the floor's", 1.25, CMP_LE,
         ratio_cpu(PH_GET, m, SYS_FLOOR), NULL},
        {"set_pipelined_cpu_vs_floor", "client CPU per set over the floor's", 1.25, CMP_LE,
         ratio_cpu(PH_SET, m, SYS_FLOOR), NULL},
        {"get_pipelined_cpu_vs_libmemcached", "client CPU per get over libmemcached's", 1.0,
         CMP_LT, ratio_cpu(PH_GET, m, SYS_LMC), NULL},
        {"set_pipelined_cpu_vs_libmemcached", "client CPU per set over libmemcached's", 1.0,
         CMP_LT, ratio_cpu(PH_SET, m, SYS_LMC), NULL},
    };
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        char name[96];
        goal x = g[i];
        snprintf(name, sizeof name, "%s%s", g[i].name, suffix);
        x.name = name;
        if (info)
            goal_info(&x, "a variant of the pool");
        else if (x.no_goal != NULL)
            goal_info(&x, x.no_goal);
        else
            goal_line(&x);
    }

    /* p99 against the references: printed, no target (issue 16 asks "no
     * worse than today", a comparison across runs). */
    static const int refs[] = {SYS_LMC, SYS_FLOOR};
    for (int ph = 0; ph < PH_COUNT; ph++)
        for (size_t k = 0; k < sizeof refs / sizeof refs[0]; k++) {
            double r = ratio_p99(ph, m, refs[k]);
            if (r > 0)
                printf("INFO %s_p99_vs_%s%s measured=%.2fx (%s's p99 over mcroute's: >1 = "
                       "lower; %.1f us against %.1f; no goal)\n",
                       ph_names[ph], sys_names[refs[k]], suffix, r, sys_names[refs[k]],
                       S[ph][m].med.p99_us, S[ph][refs[k]].med.p99_us);
        }
}

static void goals(void)
{
    double r;
    if ((r = ratio_tput(PH_SET, SYS_MCROUTE, SYS_LMC)) > 0)
        printf("INFO set_pipelined_vs_libmemcached measured=%.2fx (no goal)\n", r);
    if ((r = ratio_tput(PH_GET, SYS_MCROUTE_BATCH, SYS_LMC)) > 0)
        printf("INFO get_batch_vs_libmemcached measured=%.2fx (the pool in libmemcached's "
               "batches, no goal)\n", r);
    if ((r = ratio_tput(PH_SET, SYS_MCROUTE_BATCH, SYS_LMC)) > 0)
        printf("INFO set_batch_vs_libmemcached measured=%.2fx (the pool in libmemcached's "
               "batches, no goal)\n", r);
    if ((r = ratio_tput(PH_SET, SYS_MCROUTE_META, SYS_LMC)) > 0)
        printf("INFO set_pipelined_meta_vs_libmemcached measured=%.2fx (no goal)\n", r);
    /* The meta protocol against nutcracker, which speaks text only: the
     * pool's best against the proxy's only way. */
    goals_of(SYS_MCROUTE_META, SYS_MCROUTE_META, "_meta", true);
    goals_of(SYS_MCROUTE, W.same_placement ? SYS_MCROUTE : SYS_MCROUTE_TWEM, "", false);
    fflush(stdout);
}

static double ticks_ns(long long ticks, uint64_t ops)
{
    long tck = sysconf(_SC_CLK_TCK);
    return tck > 0 && ops > 0 ? (double)ticks * 1e9 / (double)tck / (double)ops : 0.0;
}

static void table(void)
{
    printf("\n%-14s %-14s %10s %9s %9s %8s %8s %8s\n", "phase", "system", "ops/s", "p50 us",
           "p99 us", "cli ns", "srv ns", "prx ns");
    for (int ph = 0; ph < PH_COUNT; ph++)
        for (int sys = 0; sys < SYS_COUNT; sys++) {
            const series *s = &S[ph][sys];
            if (!s->used || s->n == 0)
                continue;
            printf("%-14s %-14s %10.0f %9.1f %9.1f %8.0f %8.0f", ph_names[ph], sys_names[sys],
                   s->med.ops_per_s, s->med.p50_us, s->med.p99_us, s->med.cpu_ns,
                   ticks_ns(s->server_ticks, s->ops));
            if (sys == SYS_NUT)
                printf(" %8.0f", ticks_ns(s->proxy_ticks, s->ops));
            printf("\n");
        }
    printf("multiget: ops/s counts keys, latency is per %u-key multi-get. Medians of %u\n"
           "repetitions, %u requests in flight. cli/srv/prx ns: CPU time per request (per\n"
           "key) of this client, of the %d memcached together, of nutcracker.\n\n",
           opt.mget_keys, opt.reps, opt.depth, NSERVERS);
    fflush(stdout);
}

static void pool_info(mcr_pool *p, const char *name)
{
    size_t n = mcr_pool_server_count(p);
    for (size_t i = 0; i < n; i++) {
        mcr_server_stats st;
        if (mcr_pool_server_stats(p, i, &st) != MCR_OK)
            continue;
        printf("INFO pool %s server=%s requests=%" PRIu64 " hits=%" PRIu64 " misses=%" PRIu64
               " errors=%" PRIu64 " timeouts=%" PRIu64 " coalesced=%" PRIu64
               " connections=%u p50_us=%.1f p99_us=%.1f max_us=%.1f\n",
               name, st.id, st.requests, st.hits, st.misses, st.errors, st.timeouts,
               st.coalesced, st.connections, st.p50_us, st.p99_us, st.max_us);
    }
}

/* ------------------------------------------------------------ main */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench_pool [--quick] [--keys N] [--depth N] [--reps N] [--mget-keys N]\n"
            "                  [--mget-rounds N] [--mget-depth N] [--memcached-threads N]\n"
            "                  [--proxy-connections N] [--phase set|get|multiget]\n"
            "                  [--system NAME] [--twem-pool]\n"
            "                  [--verbose] [--keep]\n"
            "  Starts %d memcached servers and a nutcracker over them, then times the\n"
            "  mcroute pool, libmemcached, nutcracker (through the mcroute pool) and the\n"
            "  floor (a raw epoll client, no library) on the same keys: pipelined sets\n"
            "  and gets (`depth` in flight; libmemcached in batches of `depth`), and\n"
            "  multi-gets of `mget-keys` keys. Every value is checked. Needs memcached and\n"
            "  nutcracker ($MCR_MEMCACHED, $MCR_NUTCRACKER).\n"
            "  --quick               1,000 keys, 3 repetitions: a smoke run\n"
            "  --keys N              keys (a multiple of --mget-keys; default 10000)\n"
            "  --depth N             requests in flight (default 128)\n"
            "  --reps N              timed repetitions per case (default 11, odd is best)\n"
            "  --mget-rounds N       passes over the keys per multi-get repetition (5)\n"
            "  --mget-depth N        multi-gets in flight for mcroute and the floor (1)\n"
            "  --memcached-threads N memcached -t (default 1)\n"
            "  --proxy-connections N pool connections to nutcracker (default %d)\n"
            "  --phase P             only the phase P: set, get or multiget (for profiles)\n"
            "  --system S            only the system S: mcroute, mcroute_meta, mcroute_batch,\n"
            "                        libmemcached, nutcracker, floor (for profiles; set\n"
            "                        passes are still read back)\n"
            "  --twem-pool           also time the pool on the placement mcroute reads from\n"
            "                        nutcracker's YAML (mcroute_twem; always when it differs)\n"
            "  --keep                keep the temporary directory (YAML, logs)\n"
            "Output: RESULT <phase> <system> ops_per_s|keys_per_s=.. p50_us=.. p99_us=..\n"
            "client_cpu_ns=.. server_cpu_ns=.. (medians), GOAL lines, a table. Exit status\n"
            "1 when a value, a reply or the setup is wrong, never because of speed; 77 when\n"
            "memcached or nutcracker is missing.\n",
            NSERVERS, NSERVERS);
}

static unsigned arg_uint(const char *name, const char *v, unsigned lo, unsigned hi)
{
    char *end;
    unsigned long x = strtoul(v, &end, 10);
    if (*v == '\0' || *end != '\0' || x < lo || x > hi) {
        fprintf(stderr, "bench_pool: %s wants a number in %u..%u, not '%s'\n", name, lo, hi, v);
        exit(2);
    }
    return (unsigned)x;
}

static void parse_args(int argc, char **argv)
{
    bool keys_given = false, reps_given = false, rounds_given = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0) {
            opt.quick = true;
        } else if (strcmp(a, "--verbose") == 0) {
            opt.verbose = true;
        } else if (strcmp(a, "--keep") == 0) {
            opt.keep = true;
        } else if (strcmp(a, "--twem-pool") == 0) {
            opt.twem_pool = true;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (v != NULL && strcmp(a, "--keys") == 0) {
            opt.nkeys = arg_uint(a, v, 1, 10000000);
            keys_given = true;
            i++;
        } else if (v != NULL && strcmp(a, "--depth") == 0) {
            opt.depth = arg_uint(a, v, 1, 1024); /* libmemcached 1.1.4 aborts at 2048 buffered sets */
            i++;
        } else if (v != NULL && strcmp(a, "--reps") == 0) {
            opt.reps = arg_uint(a, v, 1, MAX_REPS);
            reps_given = true;
            i++;
        } else if (v != NULL && strcmp(a, "--mget-keys") == 0) {
            opt.mget_keys = arg_uint(a, v, 1, 100000);
            i++;
        } else if (v != NULL && strcmp(a, "--mget-rounds") == 0) {
            opt.mget_rounds = arg_uint(a, v, 1, 1000);
            rounds_given = true;
            i++;
        } else if (v != NULL && strcmp(a, "--mget-depth") == 0) {
            opt.mget_depth = arg_uint(a, v, 1, 4096);
            i++;
        } else if (v != NULL && strcmp(a, "--memcached-threads") == 0) {
            opt.mc_threads = arg_uint(a, v, 1, 64);
            i++;
        } else if (v != NULL && strcmp(a, "--phase") == 0) {
            if (strcmp(v, "set") != 0 && strcmp(v, "get") != 0 && strcmp(v, "multiget") != 0) {
                fprintf(stderr, "bench_pool: --phase is set, get or multiget, not '%s'\n", v);
                exit(2);
            }
            opt.phase = v;
            i++;
        } else if (v != NULL && strcmp(a, "--system") == 0) {
            opt.system = v;
            i++;
        } else if (v != NULL && strcmp(a, "--proxy-connections") == 0) {
            opt.proxy_conns = arg_uint(a, v, 1, 64);
            i++;
        } else {
            fprintf(stderr, "bench_pool: unknown argument '%s'\n", a);
            usage(stderr);
            exit(2);
        }
    }
    if (opt.quick) {
        if (!keys_given)
            opt.nkeys = 1000;
        if (!reps_given)
            opt.reps = 3;
        if (!rounds_given)
            opt.mget_rounds = 2;
    }
    if (opt.nkeys % opt.mget_keys != 0 || opt.nkeys < opt.mget_keys) {
        fprintf(stderr, "bench_pool: --keys (%zu) must be a multiple of --mget-keys (%u)\n",
                opt.nkeys, opt.mget_keys);
        exit(2);
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
    static const int phases[] = {PH_SET, PH_GET, PH_MGET};

    parse_args(argc, argv);
    printf("INFO setup keys=%zu value_bytes=%d depth=%u reps=%u mget_keys=%u mget_rounds=%u "
           "mget_depth=%u build_type=%s mcroute=%s libmemcached=%s\n",
           opt.nkeys, VALUE_LEN, opt.depth, opt.reps, opt.mget_keys, opt.mget_rounds,
           opt.mget_depth, MCR_BENCH_BUILD_TYPE, mcr_version_string(), memcached_lib_version());
    print_load();
    if (!rs_executable(rs_memcached_path()) || !rs_executable(rs_nutcracker_path())) {
        printf("SKIP memcached (%s) or nutcracker (%s) is not installed\n", rs_memcached_path(),
               rs_nutcracker_path());
        return 77;
    }
    fflush(stdout);
    keys_init(opt.nkeys);
    if (setup()) {
        for (size_t p = 0; p < sizeof phases / sizeof phases[0] && failures == 0; p++) {
            int ph = phases[p], sys_list[SYS_COUNT], ns = 0;
            if (opt.phase != NULL && strncmp(ph_names[ph], opt.phase, strlen(opt.phase)) != 0) {
                any_phase_skipped = true;
                continue;
            }
            for (int sys = 0; sys < SYS_COUNT; sys++) {
                if (sys == SYS_MCROUTE_TWEM && W.p_twem == NULL)
                    continue;
                if (sys == SYS_MCROUTE_BATCH && ph == PH_MGET)
                    continue; /* one multi-get at a time already is a batch */
                if (opt.system != NULL && strcmp(opt.system, sys_names[sys]) != 0) {
                    any_phase_skipped = true;
                    continue;
                }
                sys_list[ns++] = sys;
            }
            if (ph == PH_GET && !seed("before the gets"))
                break;
            /* Warm-up: one untimed pass each. */
            for (int j = 0; j < ns; j++)
                pass(ph, sys_list[j], false);
            for (unsigned rep = 0; rep < opt.reps && failures == 0; rep++)
                for (int j = 0; j < ns; j++)
                    pass(ph, sys_list[(rep + (unsigned)j) % (unsigned)ns], true);
        }
        if (failures == 0)
            memory_info();
        summarize();
        goals();
        table();
        if (opt.verbose) {
            pool_info(W.p_direct, "servers");
            pool_info(W.p_proxy, "nutcracker");
        }
    }
    teardown();
    if (failures)
        printf("FAILED %d problem(s), see the FAIL lines\n", failures);
    fflush(stdout);
    return failures ? 1 : 0;
}
