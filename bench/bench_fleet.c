/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_fleet.c: the time from a change stored in etcd (mcr_fleet_change() returning) to its adoption by N followers, against N raw etcd watches of the same key on the same changes, and the etcd requests per change. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "benchutil.h"
#include "mcroute.h"
#include "mcroute_fleet.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"
#include "fleet_etcd.h"
#include "realserver.h"

/*
 * What is measured.
 *
 *  - One etcd (3.4, /usr/bin/etcd or $MCR_ETCD) started here on ports the
 *    kernel picked, with a fresh data dir; stopped by its pid at the end.
 *  - A pool of --servers servers (mode ketama, weight 100) created with
 *    mcr_fleet_publish(). Each change sets one server's weight (100 <-> 101,
 *    cycling over the servers): one epoch, the continuum rebuilt.
 *  - mcroute: N followers (mcr_fleet_follow(), each with its own router,
 *    thread and connections, registered under clients/ as applications are
 *    by default). Adoption: the on_event callback's MCR_FLEET_ADOPTED (the
 *    snapshot parsed, verified and published to the router), by epoch.
 *  - The reference: N raw watch streams of the same key (POST /v3/watch,
 *    HTTP/1.0 over a plain socket, a thread each, as the followers have),
 *    open at the same time as the followers, on the same changes. Their
 *    "adoption": the watch message parsed and the value's epoch decoded,
 *    what any client must do to learn the new value.
 *  - Both are timed from the return of mcr_fleet_change(), and from its
 *    call (which adds the writer's connection, read and commit). A watcher
 *    may see the value before the writer has etcd's reply: such times are
 *    negative ("early"). "each": every adoption (N x K); "slowest": per
 *    change, the last of the N; and per change, the slowest follower minus
 *    the slowest raw watch: what mcroute adds on the same changes.
 *  - Both sides share the cores with each other and with etcd; --watchers 0
 *    runs the followers alone, --followers 0 the raw watches alone.
 *  - Changes are spaced: the next starts when every follower and watcher
 *    has the last one and the followers' request counters have been still
 *    for SETTLE_MS (their registrations written), plus --gap-ms.
 *  - Requests: mcr_fleet_get_stats() requests summed over the followers,
 *    and etcd's own count (grpc_server_started_total in /metrics: one per
 *    gateway request), over the timed changes; the writer's per change
 *    first, alone (no follower, no watcher), from etcd's count.
 *  - CPU: each follower's and raw watcher's thread clock over the timed
 *    changes (read where it records them), etcd's and this process's.
 */

#define ADDR "127.0.0.1"
#define START_MS 30000
#define CHANGE_WAIT_MS 30000
#define SETTLE_MS 20
#define SETTLE_POLL_MS 5
#define SETTLE_MAX_MS 3000
#define WARMUP 3
#define FOLLOWERS_MAX 1000
#define WEIGHT 100u

typedef struct settings {
    bool quick, verbose, keep, no_register;
    unsigned followers, watchers, changes, writer_changes, servers, gap_ms;
} settings;

static settings opt = {.followers = 100, .watchers = 0, .changes = 200, .writer_changes = 20,
                       .servers = 10};

const char *bench_program = "bench_fleet";
static int failures;

#define FAIL(...)                                                                                \
    do {                                                                                         \
        printf("FAIL " __VA_ARGS__);                                                             \
        printf("\n");                                                                            \
        fflush(stdout);                                                                          \
        failures++;                                                                              \
    } while (0)


static fe_etcd E;

/* ------------------------------------------------------------ recording */

/* Slot k is the change to epoch first_epoch + k; a row holds one time per
 * slot (0: not yet). */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t first_epoch;
    unsigned slots;
    unsigned *count;       /* per slot: followers + watchers that have it */
    unsigned connected;    /* followers' CONNECTED events, watchers' "created" */
    atomic_uint stray;     /* epochs outside the slots (never expected) */
} R = {.lock = PTHREAD_MUTEX_INITIALIZER};

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The calling thread's times for the change to `epoch`: `now` in row, and
 * its CPU clock at the last untimed change and at the last change in cpu[]
 * (so cpu[1] - cpu[0] is what the K timed changes cost the thread). */
static void record(uint64_t *row, uint64_t cpu[2], uint64_t epoch, uint64_t now)
{
    if (epoch < R.first_epoch || epoch - R.first_epoch >= R.slots) {
        atomic_fetch_add(&R.stray, 1);
        return;
    }
    size_t k = (size_t)(epoch - R.first_epoch);
    if (row[k] != 0)
        return;
    row[k] = now;
    if (k == WARMUP - 1 || k == R.slots - 1)
        cpu[k != WARMUP - 1] = thread_cpu_ns();
    pthread_mutex_lock(&R.lock);
    R.count[k]++;
    pthread_cond_broadcast(&R.cond);
    pthread_mutex_unlock(&R.lock);
}

static void connected_one(void)
{
    pthread_mutex_lock(&R.lock);
    R.connected++;
    pthread_cond_broadcast(&R.cond);
    pthread_mutex_unlock(&R.lock);
}

/* Wait until *v reaches `want` (under R.lock), at most ms: true when it did. */
static bool wait_for(const unsigned *v, unsigned want, unsigned ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&R.lock);
    int rc = 0;
    while (*v < want && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&R.cond, &R.lock, &ts);
    bool ok = *v >= want;
    pthread_mutex_unlock(&R.lock);
    return ok;
}

/* ------------------------------------------------------------ followers */

typedef struct follower {
    mcr_router *router;
    mcr_fleet *fleet;
    uint64_t *row, cpu[2];
    atomic_uint refused, disconnected, other;
    atomic_flag connected;          /* its first CONNECTED was counted */
    char first_problem[200];
    atomic_flag problem_set;
} follower;

static void on_event(const mcr_fleet_event *ev, void *arg)
{
    uint64_t now = bench_now_ns();
    follower *fl = arg;
    switch (ev->kind) {
    case MCR_FLEET_ADOPTED:
        record(fl->row, fl->cpu, ev->epoch, now);
        return;
    case MCR_FLEET_CONNECTED:
        if (!atomic_flag_test_and_set(&fl->connected))
            connected_one();
        return;
    case MCR_FLEET_REFUSED:
        atomic_fetch_add(&fl->refused, 1);
        break;
    case MCR_FLEET_DISCONNECTED:
        atomic_fetch_add(&fl->disconnected, 1);
        break;
    default:
        atomic_fetch_add(&fl->other, 1);
        break;
    }
    if (!atomic_flag_test_and_set(&fl->problem_set))
        snprintf(fl->first_problem, sizeof fl->first_problem, "event %d: %.150s", (int)ev->kind,
                 ev->err ? ev->err->message : mcr_strerror(ev->status));
}

/* ------------------------------------------------------------ raw watchers */

typedef struct watcher {
    pthread_t thread;
    int fd;
    bool started;
    uint64_t *row, cpu[2];
    atomic_bool stopping;
    char problem[200];
    unsigned messages;
} watcher;

static const char *watch_body; /* the create_request, the same for all */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Base64 (RFC 4648, padded) into out (at least 3/4 of n + 1 bytes), NUL
 * terminated: the length, or -1. */
static long b64_decode(const char *s, size_t n, char *out)
{
    size_t o = 0;
    unsigned acc = 0, bits = 0;
    for (size_t i = 0; i < n && s[i] != '='; i++) {
        const char *v = s[i] ? strchr(b64, s[i]) : NULL;
        if (v == NULL)
            return -1;
        acc = (acc << 6) | (unsigned)(v - b64);
        if ((bits += 6) >= 8) {
            bits -= 8;
            out[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    out[o] = '\0';
    return (long)o;
}

static char *b64_encode(const char *s)
{
    const char *a = b64;
    size_t n = strlen(s), o = 0;
    char *out = bench_xmalloc(4 * (n / 3 + 1) + 1);
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned char)s[i] << 16;
        if (i + 1 < n)
            v |= (unsigned char)s[i + 1] << 8;
        if (i + 2 < n)
            v |= (unsigned char)s[i + 2];
        out[o++] = a[(v >> 18) & 63];
        out[o++] = a[(v >> 12) & 63];
        out[o++] = i + 1 < n ? a[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? a[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

/* One watch message (one JSON line): "created", or events whose values are
 * snapshot texts, each recorded by its "epoch" line. */
static void watch_line(watcher *w, const char *line, size_t len)
{
    json_error_t je;
    json_t *j = json_loadb(line, len, 0, &je);
    json_t *res = j ? json_object_get(j, "result") : NULL;
    if (!json_is_object(res)) {
        if (w->problem[0] == '\0')
            snprintf(w->problem, sizeof w->problem, "not a watch result: %.120s", line);
        json_decref(j);
        return;
    }
    if (w->messages++ == 0 && json_is_true(json_object_get(res, "created")))
        connected_one();
    json_t *evs = json_object_get(res, "events");
    for (size_t i = 0; json_is_array(evs) && i < json_array_size(evs); i++) {
        json_t *kv = json_object_get(json_array_get(evs, i), "kv");
        const char *v = json_string_value(json_object_get(kv, "value"));
        if (v == NULL)
            continue;
        size_t vl = strlen(v);
        char *text = bench_xmalloc(vl / 4 * 3 + 4);
        const char *e;
        uint64_t epoch = 0;
        if (b64_decode(v, vl, text) >= 0 && (e = strstr(text, "\nepoch ")) != NULL)
            epoch = strtoull(e + 7, NULL, 10);
        free(text);
        if (epoch > 0)
            record(w->row, w->cpu, epoch, bench_now_ns());
        else if (w->problem[0] == '\0')
            snprintf(w->problem, sizeof w->problem, "a watched value without an epoch line");
    }
    json_decref(j);
}

/* The stream: the headers, then one JSON message a line. The request is
 * HTTP/1.0, so the body comes as it is (no chunks) until etcd closes. */
static void *watcher_main(void *arg)
{
    watcher *w = arg;
    size_t cap = 1 << 16, len = 0;
    char *buf = bench_xmalloc(cap);
    bool headers = true;
    for (;;) {
        if (len + 4096 > cap && (buf = realloc(buf, cap *= 2)) == NULL)
            abort();
        ssize_t r = read(w->fd, buf + len, cap - len - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (!atomic_load(&w->stopping) && w->problem[0] == '\0')
                snprintf(w->problem, sizeof w->problem, "the watch stream ended: %s",
                         r < 0 ? strerror(errno) : "closed by etcd");
            break;
        }
        len += (size_t)r;
        buf[len] = '\0';
        char *p = buf, *nl;
        if (headers) {
            int status = 0;
            if ((nl = strstr(buf, "\r\n\r\n")) == NULL)
                continue;
            if (sscanf(buf, "HTTP/%*d.%*d %d", &status) != 1 || status != 200 ||
                strstr(buf, "chunked") != NULL) {
                snprintf(w->problem, sizeof w->problem, "watch: not a plain 200 reply: %.100s",
                         buf);
                break;
            }
            headers = false;
            p = nl + 4;
        }
        while ((nl = memchr(p, '\n', len - (size_t)(p - buf))) != NULL) {
            if (nl > p)
                watch_line(w, p, (size_t)(nl - p));
            p = nl + 1;
        }
        len -= (size_t)(p - buf);
        memmove(buf, p, len);
    }
    free(buf);
    return NULL;
}

static bool watcher_start(watcher *w)
{
    w->fd = fe_connect(&E);
    if (w->fd < 0) {
        FAIL("raw watcher: cannot connect to %s", E.endpoint);
        return false;
    }
    char head[512];
    size_t bl = strlen(watch_body);
    int hl = snprintf(head, sizeof head,
                      "POST /v3/watch HTTP/1.0\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n\r\n",
                      ADDR, E.client_port, bl);
    if (write(w->fd, head, (size_t)hl) != hl || write(w->fd, watch_body, bl) != (ssize_t)bl) {
        FAIL("raw watcher: cannot send the watch request: %s", strerror(errno));
        return false;
    }
    if (pthread_create(&w->thread, NULL, watcher_main, w) != 0) {
        FAIL("raw watcher: cannot start a thread");
        return false;
    }
    w->started = true;
    return true;
}

static void watcher_stop(watcher *w)
{
    if (w->fd >= 0) {
        atomic_store(&w->stopping, true);
        shutdown(w->fd, SHUT_RDWR);
    }
    if (w->started)
        pthread_join(w->thread, NULL);
    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
    w->started = false;
}

/* ------------------------------------------------------------ the pool */

static mcr_fleet_options fopts;
static uint32_t *weights;

static bool create_pool(uint64_t *epoch)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    if (cfg == NULL) {
        FAIL("setup: cannot make a config");
        return false;
    }
    weights = bench_xmalloc(opt.servers * sizeof *weights);
    for (unsigned i = 0; i < opt.servers; i++) {
        char host[32];
        snprintf(host, sizeof host, "10.0.%u.%u", i / 250, i % 250 + 1);
        weights[i] = WEIGHT;
        if (mcr_config_add_server(cfg, host, 11211, WEIGHT, &err) != MCR_OK) {
            FAIL("setup: %s", err.message);
            mcr_config_free(cfg);
            return false;
        }
    }
    int rc = mcr_fleet_publish(&fopts, cfg, epoch, &err);
    mcr_config_free(cfg);
    if (rc != MCR_OK)
        FAIL("setup: mcr_fleet_publish: %s", err.message);
    return rc == MCR_OK;
}

/* Change number k: one server's weight, 100 <-> 101. The epoch stored in
 * *epoch, the clock before the call in *called and after it in *returned. */
static bool one_change(unsigned k, uint64_t *epoch, uint64_t *called, uint64_t *returned)
{
    mcr_error err;
    char id[40];
    unsigned s = k % opt.servers;
    snprintf(id, sizeof id, "10.0.%u.%u:11211", s / 250, s % 250 + 1);
    uint32_t w = weights[s] == WEIGHT ? WEIGHT + 1 : WEIGHT;
    mcr_changes *ch = mcr_changes_new();
    if (ch == NULL || mcr_changes_set_weight(ch, id, w, &err) != MCR_OK) {
        FAIL("change %u: cannot record it", k);
        mcr_changes_free(ch);
        return false;
    }
    *called = bench_now_ns();
    int rc = mcr_fleet_change(&fopts, ch, epoch, &err);
    *returned = bench_now_ns();
    mcr_changes_free(ch);
    if (rc != MCR_OK) {
        FAIL("change %u: mcr_fleet_change: %s", k, err.message);
        return false;
    }
    weights[s] = w;
    return true;
}

/* ------------------------------------------------------------ statistics */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

typedef struct dist {
    double p50, p99, max; /* ms */
    size_t n, early;      /* samples; those below 0 */
} dist;

/* Nearest-rank percentiles of v[0..n) (ns), sorted in place. */
static dist summarize(int64_t *v, size_t n)
{
    dist d = {0, 0, 0, n, 0};
    if (n == 0)
        return d;
    qsort(v, n, sizeof *v, cmp_i64);
    for (size_t i = 0; i < n; i++)
        d.early += v[i] < 0;
    size_t i50 = (n * 50 + 99) / 100, i99 = (n * 99 + 99) / 100;
    d.p50 = (double)v[i50 ? i50 - 1 : 0] / 1e6;
    d.p99 = (double)v[i99 ? i99 - 1 : 0] / 1e6;
    d.max = (double)v[n - 1] / 1e6;
    return d;
}

/* The run: followers, raw watchers, and per slot (change) the clock when
 * mcr_fleet_change() was called and when it returned. */
static struct {
    unsigned nf, nw, slots, started, done;
    follower *fl;
    watcher *wa;
    uint64_t *called, *returned;
    uint64_t req0, req1; /* the followers' requests before and after the timed changes */
    fe_call_counts c0, c1;        /* etcd's calls, the same */
    double cpu0[2], cpu1[2]; /* cpu_marks(), the same */
    double writer_alone; /* etcd calls per change with no follower (-1: not measured) */
} B = {.writer_alone = -1};

static uint64_t *row_of(bool followers, unsigned i)
{
    return followers ? B.fl[i].row : B.wa[i].row;
}

/* Over the timed slots, from origin[k]: every sample (each), and per change
 * the slowest of the rows (fleet); worst[k] gets the slowest (ns). */
static void latencies(bool followers, const uint64_t *origin, dist *each, dist *fleet,
                      int64_t *worst)
{
    unsigned timed = opt.changes, nrows = followers ? B.nf : B.nw;
    int64_t *all = bench_xmalloc((size_t)nrows * timed * sizeof *all);
    int64_t *w = bench_xmalloc(timed * sizeof *w);
    size_t n = 0;
    for (unsigned k = 0; k < timed; k++) {
        unsigned slot = WARMUP + k;
        w[k] = INT64_MIN;
        for (unsigned r = 0; r < nrows; r++) {
            int64_t d = (int64_t)(row_of(followers, r)[slot] - origin[slot]);
            all[n++] = d;
            if (d > w[k])
                w[k] = d;
        }
        if (worst != NULL)
            worst[k] = w[k];
    }
    *each = summarize(all, n);
    *fleet = summarize(w, timed);
    free(all);
    free(w);
}

static uint64_t followers_requests(void)
{
    uint64_t sum = 0;
    for (unsigned i = 0; i < B.started; i++) {
        mcr_fleet_stats st;
        mcr_fleet_get_stats(B.fl[i].fleet, &st);
        sum += st.requests;
    }
    return sum;
}

/* Until the followers' request counters have been still for SETTLE_MS. */
static void settle(void)
{
    uint64_t last = followers_requests(), still = bench_now_ns();
    uint64_t end = still + (uint64_t)SETTLE_MAX_MS * 1000000u;
    while (bench_now_ns() - still < (uint64_t)SETTLE_MS * 1000000u && bench_now_ns() < end) {
        bench_sleep_ms(SETTLE_POLL_MS);
        uint64_t now = followers_requests();
        if (now != last) {
            last = now;
            still = bench_now_ns();
        }
    }
    if (opt.gap_ms)
        bench_sleep_ms(opt.gap_ms);
}

/* ------------------------------------------------------------ phases */

/* The writer alone: etcd's calls per mcr_fleet_change(), no follower. */
static void writer_alone(void)
{
    fe_call_counts a, b;
    unsigned n = opt.writer_changes;
    if (n == 0 || !fe_calls(&E, &a))
        return;
    int64_t *took = bench_xmalloc(n * sizeof *took);
    for (unsigned k = 0; k < n; k++) {
        uint64_t e, c, r;
        if (!one_change(k, &e, &c, &r)) {
            free(took);
            return;
        }
        took[k] = (int64_t)(r - c);
    }
    if (fe_calls(&E, &b)) {
        B.writer_alone = (b.total - a.total) / n;
        dist d = summarize(took, n);
        printf("RESULT writer_alone changes=%u etcd_calls_per_change=%.2f Range=%.2f Txn=%.2f "
               "call_p50_ms=%.3f call_p99_ms=%.3f\n", n, B.writer_alone,
               (b.n[FE_M_RANGE] - a.n[FE_M_RANGE]) / n, (b.n[FE_M_TXN] - a.n[FE_M_TXN]) / n, d.p50, d.p99);
    }
    free(took);
}

/* N followers (a router each), then N raw watchers; until every watch is
 * established. */
static bool start_all(void)
{
    uint64_t t0 = bench_now_ns();
    for (; B.started < B.nf; B.started++) {
        follower *f = &B.fl[B.started];
        mcr_error err;
        char id[32];
        snprintf(id, sizeof id, "bench-%u", B.started);
        mcr_fleet_follow_options fo = {.client_id = id, .no_register = opt.no_register,
                                       .on_event = on_event, .arg = f};
        if (mcr_router_new(NULL, &f->router, &err) != MCR_OK ||
            mcr_fleet_follow(&fopts, &fo, f->router, &f->fleet, &err) != MCR_OK) {
            FAIL("follower %u: %s", B.started, err.message);
            return false;
        }
    }
    char *kb = b64_encode(MCR_FLEET_PREFIX "bench/snapshot");
    json_t *wb = json_pack("{s:{s:s}}", "create_request", "key", kb);
    free(kb);
    watch_body = wb ? json_dumps(wb, JSON_COMPACT) : NULL;
    json_decref(wb);
    if (watch_body == NULL) {
        FAIL("setup: out of memory");
        return false;
    }
    for (unsigned i = 0; i < B.nw; i++)
        if (!watcher_start(&B.wa[i]))
            return false;
    if (!wait_for(&R.connected, B.nf + B.nw, START_MS)) {
        FAIL("setup: %u of %u watches established in %d ms", R.connected, B.nf + B.nw, START_MS);
        return false;
    }
    printf("INFO %u followers and %u raw watchers connected in %.0f ms\n", B.nf, B.nw,
           (double)(bench_now_ns() - t0) / 1e6);
    settle();
    return true;
}

static int64_t slowest(bool followers, unsigned k)
{
    int64_t w = 0;
    for (unsigned i = 0; i < (followers ? B.nf : B.nw); i++) {
        int64_t d = (int64_t)(row_of(followers, i)[k] - B.returned[k]);
        w = d > w ? d : w;
    }
    return w;
}

/* WARMUP untimed changes, then the timed ones, each awaited everywhere. */
static void run_changes(void)
{
    for (unsigned k = 0; k < B.slots; k++) {
        if (k == WARMUP) {
            B.req0 = followers_requests();
            if (!fe_calls(&E, &B.c0))
                return;
            fe_cpu_marks(&E, B.cpu0);
        }
        uint64_t e = 0;
        if (!one_change(k, &e, &B.called[k], &B.returned[k]))
            return;
        if (e != R.first_epoch + k) {
            FAIL("change %u stored epoch %" PRIu64 ", expected %" PRIu64 " (another writer?)",
                 k, e, R.first_epoch + k);
            return;
        }
        if (!wait_for(&R.count[k], B.nf + B.nw, CHANGE_WAIT_MS)) {
            unsigned mf = 0, mw = 0;
            for (unsigned i = 0; i < B.nf; i++)
                mf += B.fl[i].row[k] == 0;
            for (unsigned i = 0; i < B.nw; i++)
                mw += B.wa[i].row[k] == 0;
            FAIL("change %u (epoch %" PRIu64 "): not adopted in %d ms by %u of %u followers, "
                 "not seen by %u of %u raw watchers",
                 k, e, CHANGE_WAIT_MS, mf, B.nf, mw, B.nw);
            return;
        }
        if (opt.verbose)
            printf("CHANGE %u epoch=%" PRIu64 " call_ms=%.3f fleet_ms=%.3f raw_ms=%.3f%s\n", k, e,
                   (double)(B.returned[k] - B.called[k]) / 1e6, (double)slowest(true, k) / 1e6,
                   (double)slowest(false, k) / 1e6, k < WARMUP ? " (warm-up)" : "");
        settle();
        B.done = k + 1;
    }
    B.req1 = followers_requests();
    fe_cpu_marks(&E, B.cpu1);
    fe_calls(&E, &B.c1);
}

/* ------------------------------------------------------------ the report */

static void rows3(const char *title, const dist *m, const dist *r)
{
    double mv[3] = {m->p50, m->p99, m->max}, rv[3] = {r->p50, r->p99, r->max};
    printf("| %-44s | %8s | %8s | %8s |\n", title, "", "", "");
    if (B.nf)
        printf("| %-44s | %8.3f | %8.3f | %8.3f |\n", "  mcroute followers", mv[0], mv[1], mv[2]);
    if (B.nw)
        printf("| %-44s | %8.3f | %8.3f | %8.3f |\n", "  raw etcd watches", rv[0], rv[1], rv[2]);
    if (B.nf == 0 || B.nw == 0)
        return;
    printf("| %-44s |", "  ratio mcroute / raw");
    for (int i = 0; i < 3; i++)
        if (rv[i] >= 0.05) /* else a ratio means nothing */
            printf(" %7.1fx |", mv[i] / rv[i]);
        else
            printf(" %8s |", "n/a");
    printf("\n");
}

static void result(const char *name, const dist *d)
{
    printf("RESULT %s n=%zu p50_ms=%.3f p99_ms=%.3f max_ms=%.3f early=%zu\n", name, d->n, d->p50,
           d->p99, d->max, d->early);
}

/* One side (followers or raw watches): from the return and from the call,
 * each and slowest; worst[k] the slowest from the return. */
static void side(bool followers, dist d[4], int64_t *worst)
{
    const char *n = followers ? "follower" : "raw";
    char name[48];
    latencies(followers, B.returned, &d[0], &d[1], worst);
    latencies(followers, B.called, &d[2], &d[3], NULL);
    static const char *const what[4] = {"each", "fleet", "each_from_call", "fleet_from_call"};
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s_%s", n, what[i]);
        result(name, &d[i]);
    }
}

static void report(unsigned disconnects, unsigned other)
{
    unsigned K = opt.changes;
    dist f[4] = {{0}}, w[4] = {{0}}, call, extra;
    int64_t *fw = calloc(K, sizeof *fw), *ww = calloc(K, sizeof *ww);
    if (fw == NULL || ww == NULL)
        abort();
    for (unsigned k = 0; k < K; k++)
        ww[k] = (int64_t)(B.returned[WARMUP + k] - B.called[WARMUP + k]);
    call = summarize(ww, K);
    result("change_call", &call);
    if (B.nf)
        side(true, f, fw);
    if (B.nw)
        side(false, w, ww);
    for (unsigned k = 0; k < K; k++)
        fw[k] -= ww[k]; /* the slowest follower after the slowest watcher */
    extra = summarize(fw, K);
    if (B.nf && B.nw)
        result("fleet_minus_raw_fleet", &extra);
    free(fw);
    free(ww);

    double freq = (double)(B.req1 - B.req0) / K, etcd = (B.c1.total - B.c0.total) / K;
    double each = B.nf ? freq / B.nf : 0;
    printf("RESULT requests_per_change followers=%.2f per_follower=%.3f etcd_total=%.2f "
           "writer_in_run=%.2f writer_alone=%.2f disconnects=%u\n",
           freq, each, etcd, etcd - freq, B.writer_alone, disconnects);
    printf("\n%u followers, %u raw watchers, %u changes; mcr_fleet_change() took p50 %.3f ms, "
           "p99 %.3f ms, max %.3f ms\n\n",
           B.nf, B.nw, K, call.p50, call.p99, call.max);
    printf("| %-44s | %8s | %8s | %8s |\n", "ms", "p50", "p99", "max");
    printf("|----------------------------------------------|----------|----------|----------|\n");
    rows3("from mcr_fleet_change() returning, each", &f[0], &w[0]);
    rows3("from mcr_fleet_change() returning, slowest", &f[1], &w[1]);
    rows3("from mcr_fleet_change() called, each", &f[2], &w[2]);
    rows3("from mcr_fleet_change() called, slowest", &f[3], &w[3]);
    if (B.nf && B.nw)
        printf("| %-44s | %8.3f | %8.3f | %8.3f |\n", "slowest follower - slowest raw watch",
               extra.p50, extra.p99, extra.max);
    printf("\n\"each\": every adoption (followers x changes); \"slowest\": per change, the "
           "last one.\nearly (before mcr_fleet_change() returned): followers %zu of %zu, raw "
           "watches %zu of %zu\n",
           f[0].early, f[0].n, w[0].early, w[0].n);
    char alone[32] = "not measured";
    if (B.writer_alone >= 0)
        snprintf(alone, sizeof alone, "%.2f", B.writer_alone);
    printf("etcd requests per change: followers %.2f (%.3f each), writer %.2f (alone, "
           "before: %s), etcd's count %.2f; raw watches 0 (a stream each, opened before)\n"
           "etcd's count by method:",
           freq, each, etcd - freq, alone, etcd);
    for (int i = 0; i < FE_M_N; i++)
        if (B.c1.n[i] - B.c0.n[i] > 0)
            printf(" %s %.2f", fe_call_names[i], (B.c1.n[i] - B.c0.n[i]) / K);
    double fcpu = 0, wcpu = 0; /* us per change and thread */
    for (unsigned i = 0; i < B.nf; i++)
        fcpu += (double)(B.fl[i].cpu[1] - B.fl[i].cpu[0]) / 1e3 / K / B.nf;
    for (unsigned i = 0; i < B.nw; i++)
        wcpu += (double)(B.wa[i].cpu[1] - B.wa[i].cpu[0]) / 1e3 / K / B.nw;
    printf("\nCPU per change: a follower's thread %.1f us, a raw watch's thread %.1f us "
           "(ratio %.1fx); etcd %.2f ms; this whole process %.2f ms\n",
           fcpu, wcpu, wcpu > 0 ? fcpu / wcpu : 0, (B.cpu1[0] - B.cpu0[0]) / K,
           (B.cpu1[1] - B.cpu0[1]) / K);
    printf("RESULT cpu_per_change follower_thread_us=%.1f raw_thread_us=%.1f etcd_ms=%.3f "
           "process_ms=%.3f\n",
           fcpu, wcpu, (B.cpu1[0] - B.cpu0[0]) / K, (B.cpu1[1] - B.cpu0[1]) / K);
    printf("follower events other than adopted/connected: %u disconnects, %u other\n",
           disconnects, other);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench_fleet [options]\n"
            "Starts an etcd, creates a pool, starts N followers (mcr_fleet_follow, one\n"
            "router each) and N raw watch streams of the same key, makes K changes and\n"
            "times each from mcr_fleet_change() returning (and from its call) to its\n"
            "adoption by every follower and its arrival at every raw watcher.\n"
            "  --quick               20 followers, 30 changes: a smoke run\n"
            "  --followers N         followers (default 100, at most %d; 0: the raw\n"
            "                        watches alone)\n"
            "  --watchers N          raw watch streams (default: as many as followers;\n"
            "                        0: none, no reference)\n"
            "  --changes K           timed changes (default 200; %d untimed first)\n"
            "  --writer-changes W    changes timed with no follower first, for the\n"
            "                        writer's requests (default 20; 0: skip)\n"
            "  --servers S           servers in the pool (default 10)\n"
            "  --gap-ms G            pause between changes after they settle (default 0)\n"
            "  --no-register         followers do not register under clients/\n"
            "  --verbose             one line per change\n"
            "  --keep                keep the temporary directory (etcd's data and log)\n"
            "Output: RESULT lines, then a table. Exit status 1 when a change is lost,\n"
            "refused or the setup fails, never because of speed; 77 when etcd is\n"
            "missing.\n",
            FOLLOWERS_MAX, WARMUP);
}

static void parse_args(int argc, char **argv)
{
    bool f_given = false, c_given = false, w_given = false, wc_given = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0) {
            opt.quick = true;
        } else if (strcmp(a, "--verbose") == 0) {
            opt.verbose = true;
        } else if (strcmp(a, "--keep") == 0) {
            opt.keep = true;
        } else if (strcmp(a, "--no-register") == 0) {
            opt.no_register = true;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (v != NULL && strcmp(a, "--followers") == 0) {
            opt.followers = bench_arg_uint("bench_fleet", a, v, 0, FOLLOWERS_MAX);
            f_given = true;
            i++;
        } else if (v != NULL && strcmp(a, "--watchers") == 0) {
            opt.watchers = bench_arg_uint("bench_fleet", a, v, 0, FOLLOWERS_MAX);
            w_given = true;
            i++;
        } else if (v != NULL && strcmp(a, "--changes") == 0) {
            opt.changes = bench_arg_uint("bench_fleet", a, v, 1, 100000);
            c_given = true;
            i++;
        } else if (v != NULL && strcmp(a, "--writer-changes") == 0) {
            opt.writer_changes = bench_arg_uint("bench_fleet", a, v, 0, 100000);
            wc_given = true;
            i++;
        } else if (v != NULL && strcmp(a, "--servers") == 0) {
            opt.servers = bench_arg_uint("bench_fleet", a, v, 2, 10000);
            i++;
        } else if (v != NULL && strcmp(a, "--gap-ms") == 0) {
            opt.gap_ms = bench_arg_uint("bench_fleet", a, v, 0, 60000);
            i++;
        } else {
            fprintf(stderr, "bench_fleet: unknown argument '%s'%s\n", a,
                    v == NULL && strncmp(a, "--", 2) == 0 ? " (or its value is missing)" : "");
            usage(stderr);
            exit(2);
        }
    }
    if (opt.quick) {
        if (!f_given)
            opt.followers = 20;
        if (!c_given)
            opt.changes = 30;
        if (!wc_given)
            opt.writer_changes = 10;
    }
    if (!w_given)
        opt.watchers = opt.followers;
    if (opt.followers + opt.watchers == 0) {
        fprintf(stderr, "bench_fleet: --followers 0 needs --watchers 1 or more\n");
        exit(2);
    }
}

/* Enough descriptors: each follower keeps two connections (requests, the
 * watch), each writer call one, each raw watcher one. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)(3 * opt.followers + opt.watchers + 64);
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need) {
        rl.rlim_cur = need < rl.rlim_max ? need : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        if (rl.rlim_cur < need)
            printf("INFO only %llu file descriptors for %llu wanted\n",
                   (unsigned long long)rl.rlim_cur, (unsigned long long)need);
    }
}

static void print_load(const char *when)
{
    char buf[128] = "";
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fgets(buf, sizeof buf, f) == NULL)
            buf[0] = '\0';
        fclose(f);
    }
    buf[strcspn(buf, "\n")] = '\0';
    printf("INFO machine %s cpus=%ld loadavg=\"%s\"\n", when, sysconf(_SC_NPROCESSORS_ONLN), buf);
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("INFO setup followers=%u watchers=%u changes=%u warmup=%d writer_changes=%u "
           "servers=%u register=%s gap_ms=%u build_type=%s mcroute=%s\n",
           opt.followers, opt.watchers, opt.changes, WARMUP, opt.writer_changes, opt.servers,
           opt.no_register ? "no" : "yes", opt.gap_ms, MCR_BENCH_BUILD_TYPE,
           mcr_version_string());
    print_load("before");
    raise_fd_limit();

    B.nf = opt.followers;
    B.nw = opt.watchers;
    B.slots = R.slots = WARMUP + opt.changes;
    B.fl = calloc(B.nf, sizeof *B.fl);
    B.wa = calloc(B.nw + 1, sizeof *B.wa);
    B.called = calloc(B.slots, sizeof *B.called);
    B.returned = calloc(B.slots, sizeof *B.returned);
    R.count = calloc(B.slots, sizeof *R.count);
    if (B.fl == NULL || B.wa == NULL || B.called == NULL || B.returned == NULL || R.count == NULL) {
        fprintf(stderr, "bench_fleet: out of memory\n");
        return 1;
    }
    for (unsigned i = 0; i < B.nf; i++)
        B.fl[i].row = calloc(B.slots, sizeof *B.fl[i].row);
    for (unsigned i = 0; i < B.nw; i++) {
        B.wa[i].fd = -1;
        B.wa[i].row = calloc(B.slots, sizeof *B.wa[i].row);
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&R.cond, &ca);

    uint64_t epoch = 0;
    mcr_fleet_options_init(&fopts);
    if (fe_start(&E, &failures)) {
        fopts.endpoints = E.endpoint;
        fopts.pool = "bench";
        printf("INFO etcd %s pid %ld dir %s\n", E.endpoint, (long)E.proc.pid, E.dir);
        if (create_pool(&epoch))
            writer_alone();
    }
    if (failures == 0) {
        mcr_snapshot *s = NULL;
        mcr_error err;
        if (mcr_fleet_read(&fopts, &s, NULL, &err) == MCR_OK) {
            R.first_epoch = mcr_snapshot_epoch(s) + 1;
            mcr_snapshot_unref(s);
            if (start_all())
                run_changes();
        } else {
            FAIL("setup: mcr_fleet_read: %s", err.message);
        }
    }

    print_load("after");
    for (unsigned i = 0; i < B.nw; i++)
        watcher_stop(&B.wa[i]);
    for (unsigned i = 0; i < B.started; i++) /* joins their threads */
        mcr_fleet_free(B.fl[i].fleet);
    unsigned refused = 0, disconnects = 0, other = 0;
    for (unsigned i = 0; i < B.started; i++) {
        refused += atomic_load(&B.fl[i].refused);
        disconnects += atomic_load(&B.fl[i].disconnected);
        other += atomic_load(&B.fl[i].other);
        if (B.fl[i].first_problem[0] && opt.verbose)
            printf("INFO follower %u: %s\n", i, B.fl[i].first_problem);
    }
    for (unsigned i = 0; i < B.nw; i++)
        if (B.wa[i].problem[0] != '\0' && (B.done == B.slots || opt.verbose))
            FAIL("raw watcher %u: %s", i, B.wa[i].problem);
    if (refused)
        FAIL("%u values refused by followers", refused);
    if (atomic_load(&R.stray))
        FAIL("%u adoptions of epochs nobody changed to", atomic_load(&R.stray));
    if (B.done == B.slots && failures == 0)
        report(disconnects, other);
    else if (failures == 0)
        FAIL("the run stopped after %u of %u changes", B.done, B.slots);

    for (unsigned i = 0; i < B.nf; i++) {
        mcr_router_free(B.fl[i].router);
        free(B.fl[i].row);
    }
    for (unsigned i = 0; i < B.nw; i++)
        free(B.wa[i].row);
    fe_stop(&E, opt.keep);
    free((void *)watch_body);
    free(B.fl);
    free(B.wa);
    free(B.called);
    free(B.returned);
    free(R.count);
    free(weights);
    if (failures)
        printf("FAILED %d problem(s), see the FAIL lines\n", failures);
    return failures ? 1 : 0;
}
