/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_pool.c: the connection pool timed against libmemcached, nutcracker and a raw epoll client (the floor) on the same real memcached servers and keys: pipelined gets and sets, 100-key multi-gets. */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "benchutil.h"
#include "mcroute.h"
#include "mcroute_pool.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"
#include "mcroute_twemproxy.h"
#include "pool_bench.h"
#include "pool_floor.h"
#include "pool_lmc.h"
#include "pool_mcr.h"
#include "pool_report.h"
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

/*
 * The parts: pool_mcr.c runs the mcroute pool, pool_lmc.c libmemcached,
 * pool_floor.c the floor; pool_report.c prints the results. What they share
 * (the settings, the world, the series S, the checks) is in pool_bench.h;
 * this file, the driver, owns it: it parses the settings, starts the
 * servers, builds the world, runs the passes and calls the parts.
 */

#define KEY_SEED 0x706f6f6c62656e63ull
#define START_MS 10000

settings opt = {
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
int failures;

/* ------------------------------------------------------------ systems and phases */

const char *const sys_names[SYS_COUNT] = {"mcroute",      "mcroute_meta", "mcroute_batch",
                                          "libmemcached", "nutcracker",   "floor",
                                          "mcroute_twem"};

const char *const ph_names[PH_COUNT] = {"set_pipelined", "get_pipelined", "multiget"};

series S[PH_COUNT][SYS_COUNT];

/* ------------------------------------------------------------ the world */

world W;

/* ------------------------------------------------------------ small helpers */

static void fail(const char *fmt, const char *detail)
{
    printf("FAIL ");
    printf(fmt, detail);
    printf("\n");
    fflush(stdout);
    failures++;
}

/* This process's user and system CPU time so far, in microseconds. */
static void cpu_split_us(uint64_t *user, uint64_t *sys)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *user = (uint64_t)ru.ru_utime.tv_sec * 1000000u + (uint64_t)ru.ru_utime.tv_usec;
    *sys = (uint64_t)ru.ru_stime.tv_sec * 1000000u + (uint64_t)ru.ru_stime.tv_usec;
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

/* ------------------------------------------------------------ floor runs */

static void floor_bad(void *ctx, const char *msg)
{
    bench_bad(ctx, "%s", msg);
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

/* The client's writes and reads so far: the pool's own counters (summed
 * over its servers), the floor's; false for libmemcached (none kept). */
static bool io_of(int sys, uint64_t *writes, uint64_t *reads)
{
    *writes = *reads = 0;
    if (sys == SYS_LMC)
        return false;
    if (sys == SYS_FLOOR) {
        pool_floor_io(W.floor, writes, reads);
        return true;
    }
    mcr_pool *p = pool_of(sys);
    size_t n = mcr_pool_server_count(p);
    for (size_t i = 0; i < n; i++) {
        mcr_server_stats st;
        if (mcr_pool_server_stats(p, i, &st) == MCR_OK) {
            *writes += st.writes;
            *reads += st.reads;
        }
    }
    return true;
}

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

    uint64_t w0, r0, w1, r1;
    bool io = io_of(sys, &w0, &r0);
    long long nut0 = proc_ticks(W.nut.pid), srv0 = servers_ticks();
    uint64_t u0, k0, u1, k1;
    cpu_split_us(&u0, &k0);
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
    cpu_split_us(&u1, &k1);
    long long nut1 = proc_ticks(W.nut.pid), srv1 = servers_ticks();
    io_of(sys, &w1, &r1);

    if (ck.bad) {
        if (ck.bad > MAX_MESSAGES)
            printf("FAIL %s: %u problems in all\n", what, ck.bad);
        failures++;
    }
    if (timed && !ck.bad) {
        record(ph, sys, nlat, ops, t1 - t0, c1 - c0, nut0, nut1, srv1 - srv0);
        S[ph][sys].io = io;
        S[ph][sys].writes += w1 - w0;
        S[ph][sys].reads += r1 - r0;
        S[ph][sys].user_us += u1 - u0;
        S[ph][sys].sys_us += k1 - k0;
    }
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
    mcr_error err = {0};
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
    mcr_error err = {0};

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

/* Every key on the same server for mcroute ("weighted"), libmemcached and
 * nutcracker's placement as mcroute's twemproxy compat reads it. */
static bool check_placements(const mcr_twem *twem)
{
    mcr_snapshot *snap = mcr_router_current(W.r_direct);
    mcr_ring *tring = NULL;
    mcr_error err = {0};
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
        uint32_t l = lmc_server_of(W.key[i], W.len[i]);
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
    mcr_error err = {0};
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

    if (!lmc_setup())
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
    ok = lmc_setup_sentinels() && seed("setup");
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
    lmc_free();
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
            "client_cpu_ns=.. server_cpu_ns=.. (medians); INFO io lines: the client's\n"
            "send(2) and read(2) calls per request (the pool's counters, the floor's; none\n"
            "for libmemcached); INFO cpu lines: the client's user and system CPU per\n"
            "request, means over the timed passes (getrusage); GOAL lines, a table. Exit status\n"
            "1 when a value, a reply or the setup is wrong, never because of speed; 77 when\n"
            "memcached or nutcracker is missing.\n",
            NSERVERS, NSERVERS);
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
            opt.nkeys = bench_arg_uint("bench_pool", a, v, 1, 10000000);
            keys_given = true;
            i++;
        } else if (v != NULL && strcmp(a, "--depth") == 0) {
            opt.depth = bench_arg_uint("bench_pool", a, v, 1, 1024); /* libmemcached 1.1.4 aborts at 2048 buffered sets */
            i++;
        } else if (v != NULL && strcmp(a, "--reps") == 0) {
            opt.reps = bench_arg_uint("bench_pool", a, v, 1, MAX_REPS);
            reps_given = true;
            i++;
        } else if (v != NULL && strcmp(a, "--mget-keys") == 0) {
            opt.mget_keys = bench_arg_uint("bench_pool", a, v, 1, 100000);
            i++;
        } else if (v != NULL && strcmp(a, "--mget-rounds") == 0) {
            opt.mget_rounds = bench_arg_uint("bench_pool", a, v, 1, 1000);
            rounds_given = true;
            i++;
        } else if (v != NULL && strcmp(a, "--mget-depth") == 0) {
            opt.mget_depth = bench_arg_uint("bench_pool", a, v, 1, 4096);
            i++;
        } else if (v != NULL && strcmp(a, "--memcached-threads") == 0) {
            opt.mc_threads = bench_arg_uint("bench_pool", a, v, 1, 64);
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
            opt.proxy_conns = bench_arg_uint("bench_pool", a, v, 1, 64);
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
    /* Set when --phase or --system left something out: goals may lack data. */
    bool any_phase_skipped = false;

    parse_args(argc, argv);
    printf("INFO setup keys=%zu value_bytes=%d depth=%u reps=%u mget_keys=%u mget_rounds=%u "
           "mget_depth=%u build_type=%s mcroute=%s libmemcached=%s\n",
           opt.nkeys, VALUE_LEN, opt.depth, opt.reps, opt.mget_keys, opt.mget_rounds,
           opt.mget_depth, MCR_BENCH_BUILD_TYPE, mcr_version_string(), lmc_version());
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
        if (failures == 0) {
            /* On a pool of its own that has served nothing yet: the heap it
             * takes for requests in flight (a pool that has served reuses
             * its request blocks, so its heap does not grow at all). */
            mcr_pool *fresh = pool_on(W.r_direct, 1, MCR_PROTO_TEXT, "memory (fresh)");
            if (fresh != NULL) {
                memory_info(fresh);
                mcr_pool_free(fresh);
            }
        }
        summarize();
        goals(any_phase_skipped);
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
