/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_publish.c: how long a publisher (a pool's event loop ejecting and re-adding servers) spends inside a publish, at 1,000 publishes a second with 4 reader threads looking keys up. */
/* RUSAGE_THREAD (Linux): the per-thread context switch counts. */
#undef _POSIX_C_SOURCE
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "benchutil.h"
#include "mcroute.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"

/*
 * What is measured. The pool's eject policy publishes from its event loop:
 * on an ejection, and on the re-add after a probe, it reads the current
 * snapshot, checks the server's state, and applies one state change
 * (lib/pool/server.c, mcr__server_publish_state()). This program does the
 * same at a fixed rate (one change per period, eject and re-add in turn,
 * cycling over the servers) while reader threads look keys up through the
 * router without pause, and times each change from the read of the current
 * snapshot to the return of the apply: the time a loop would be held. It
 * reports the longest, the 99th percentile and the median.
 *
 * On a loaded machine the wall clock also counts the time the publisher
 * was preempted, which no library can prevent. So each call is also
 * classed by the thread's context switches during it (getrusage
 * RUSAGE_THREAD): a voluntary switch means the call blocked (a mutex, a
 * condition, the sleeps of a grace period), an involuntary one that the
 * scheduler took the CPU away. "undisturbed" is the longest call with
 * neither; "blocked" counts calls with a voluntary switch.
 *
 * The readers check what they get: a server index within the snapshot and,
 * per reader, epochs that never go back.
 *
 * Before and after. Built against a router without mcr_router_apply() with MCR_ROUTER_NOWAIT
 * (the headers of commit 4479180, whose publishes wait for a grace period),
 * it times mcr_router_apply(), which the pool called then; otherwise it
 * times mcr_router_apply() with MCR_ROUTER_NOWAIT, which the pool calls now, and also
 * mcr_router_apply() (--api apply). A NOWAIT apply refused because the
 * router is busy (MCR_ERR_TIMEOUT) is counted and, as the pool does, tried
 * again at the next period: its time counts like any other call's.
 */

#ifdef MCR_ROUTER_NOWAIT
#define HAVE_TRY_APPLY 1
#else
#define HAVE_TRY_APPLY 0
#endif

#define READERS 4
#define RATE 1000 /* publishes a second */
#define SERVERS_DEFAULT 10
#define SECONDS_FULL 10
#define SECONDS_QUICK 1
#define GOAL_MAX_US 1000.0

typedef struct settings {
    bool quick;
    unsigned seconds, servers;
    int use_try; /* 1: mcr_router_apply() with MCR_ROUTER_NOWAIT; 0: mcr_router_apply() */
} settings;

typedef struct reader {
    mcr_router *router;
    atomic_int *stop;
    uint64_t lookups, errors;
    char first_error[160];
} reader;

static settings opt;
const char *bench_program = "bench_publish";

static void *reader_main(void *arg)
{
    reader *rd = arg;
    uint64_t rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)rd, last_epoch = 0;
    char key[32];

    while (!atomic_load_explicit(rd->stop, memory_order_relaxed)) {
        for (int i = 0; i < 64; i++) {
            int n = snprintf(key, sizeof key, "user:%" PRIu64, bench_next_rand(&rng) % 100000);
            const mcr_snapshot *snap = mcr_router_acquire(rd->router);
            uint64_t e = mcr_snapshot_epoch(snap);
            uint32_t idx = mcr_snapshot_locate(snap, key, (size_t)n);
            size_t count = mcr_snapshot_server_count(snap);
            mcr_router_release(rd->router, snap);
            if ((idx >= count || e < last_epoch) && rd->errors++ == 0)
                snprintf(rd->first_error, sizeof rd->first_error,
                         "index %u of %zu servers, epoch %" PRIu64 " after %" PRIu64, idx,
                         count, e, last_epoch);
            last_epoch = e;
            rd->lookups++;
        }
    }
    return NULL;
}

static mcr_snapshot *initial_snapshot(unsigned n)
{
    mcr_config *cfg = mcr_config_new();
    mcr_snapshot *snap = NULL;
    mcr_error err = {0};
    char host[32];

    if (cfg == NULL || mcr_config_set_mode(cfg, MCR_MODE_KETAMA) != MCR_OK) {
        fprintf(stderr, "bench_publish: cannot make a config\n");
        exit(1);
    }
    for (unsigned i = 0; i < n; i++) {
        snprintf(host, sizeof host, "10.0.%u.%u", i / 250, i % 250 + 1);
        if (mcr_config_add_server(cfg, host, 11211, 1, &err) != MCR_OK) {
            fprintf(stderr, "bench_publish: %s\n", err.message);
            exit(1);
        }
    }
    if (mcr_snapshot_new(cfg, 1, &snap, &err) != MCR_OK) {
        fprintf(stderr, "bench_publish: %s\n", err.message);
        exit(1);
    }
    mcr_config_free(cfg);
    return snap;
}

/* One change the pool's way: read the current snapshot, look the server
 * up, apply its new state. MCR_OK, MCR_ERR_TIMEOUT (NOWAIT: busy), or
 * another error (a bug: the bench stops). */
static int pool_like_change(mcr_router *r, unsigned server, mcr_server_state want)
{
    char id[48];
    mcr_snapshot *cur = mcr_router_current(r);
    mcr_server_desc d;
    int rc = MCR_ERR_UNKNOWN;

    snprintf(id, sizeof id, "10.0.%u.%u:11211", server / 250, server % 250 + 1);
    uint32_t i = mcr_snapshot_find(cur, id);
    if (i != MCR_NO_SERVER && mcr_snapshot_server(cur, (size_t)i, &d) == MCR_OK) {
        mcr_changes *ch = mcr_changes_new();
        rc = ch == NULL ? MCR_ERR_NOMEM : mcr_changes_set_state(ch, id, want, NULL);
        if (rc == MCR_OK) {
#if HAVE_TRY_APPLY
            rc = mcr_router_apply(r, ch, opt.use_try ? MCR_ROUTER_NOWAIT : 0, NULL);
#else
            rc = mcr_router_apply(r, ch, NULL); /* a router of before 0.4 */
#endif
        }
        mcr_changes_free(ch);
    }
    mcr_snapshot_unref(cur);
    return rc;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void add_ns(struct timespec *t, uint64_t ns)
{
    uint64_t v = (uint64_t)t->tv_nsec + ns;
    t->tv_sec += (time_t)(v / 1000000000u);
    t->tv_nsec = (long)(v % 1000000000u);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench_publish [--quick] [--seconds N] [--servers N] [--api try|apply]\n"
            "  %d publishes a second (eject and re-add of a server in turn, as a pool's\n"
            "  event loop does them) for N seconds (default %d, --quick %d) on a ketama\n"
            "  router of N servers (default %d), while %d threads look keys up through it.\n"
            "  --api  the call timed: try (mcr_router_apply with MCR_ROUTER_NOWAIT, the\n"
            "         pool's; the default) or apply (without it). Built against a router\n"
            "         that has no MCR_ROUTER_NOWAIT, it times mcr_router_apply.\n"
            "Output: RESULT publish_<api> max_us=<x> p99_us=<y> p50_us=<z> ... (the time\n"
            "one change holds the publisher; undisturbed_max_us over the calls without a\n"
            "context switch; blocked: calls that slept), INFO and GOAL lines (goals: max\n"
            "under %.0f us, no call blocked). Exit status 1 when a reader saw a wrong answer or a change\n"
            "failed, never because of speed.\n",
            RATE, SECONDS_FULL, SECONDS_QUICK, SERVERS_DEFAULT, READERS, GOAL_MAX_US);
}

static void parse_args(int argc, char **argv)
{
    opt.servers = SERVERS_DEFAULT;
    opt.use_try = HAVE_TRY_APPLY;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            opt.quick = true;
        } else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            opt.seconds = (unsigned)strtoul(argv[++i], NULL, 10);
            if (opt.seconds == 0 || opt.seconds > 3600) {
                fprintf(stderr, "bench_publish: --seconds: 1 to 3600\n");
                exit(2);
            }
        } else if (strcmp(argv[i], "--servers") == 0 && i + 1 < argc) {
            opt.servers = (unsigned)strtoul(argv[++i], NULL, 10);
            if (opt.servers < 2 || opt.servers > 10000) {
                fprintf(stderr, "bench_publish: --servers: 2 to 10000\n");
                exit(2);
            }
        } else if (strcmp(argv[i], "--api") == 0 && i + 1 < argc) {
            const char *a = argv[++i];
            if (strcmp(a, "apply") == 0) {
                opt.use_try = 0;
            } else if (strcmp(a, "try") == 0 && HAVE_TRY_APPLY) {
                opt.use_try = 1;
            } else {
                fprintf(stderr, "bench_publish: --api: 'try'%s or 'apply', not '%s'\n",
                        HAVE_TRY_APPLY ? "" : " (not in this router)", a);
                exit(2);
            }
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            exit(0);
        } else {
            fprintf(stderr, "bench_publish: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            exit(2);
        }
    }
    if (opt.seconds == 0)
        opt.seconds = opt.quick ? SECONDS_QUICK : SECONDS_FULL;
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    const char *api = opt.use_try ? "try_apply" : "apply";
    size_t total = (size_t)opt.seconds * RATE, done = 0;
    uint64_t *ns = bench_xmalloc(total * sizeof *ns);
    uint64_t blocked = 0, preempted = 0, undisturbed_max = 0;
    uint64_t busy = 0, late = 0, failed = 0;
    size_t retired_max = 0;
    mcr_snapshot *s1 = initial_snapshot(opt.servers);
    mcr_router *r = NULL;
    atomic_int stop = 0;
    reader rd[READERS];
    pthread_t th[READERS];
    int rc;

    if (mcr_router_new(s1, &r, NULL) != MCR_OK) {
        fprintf(stderr, "bench_publish: cannot make a router\n");
        return 1;
    }
    mcr_snapshot_unref(s1);
    printf("INFO setup api=%s rate=%d/s seconds=%u servers=%u readers=%d build_type=%s "
           "mcroute=%s reclamation=%s\n",
           api, RATE, opt.seconds, opt.servers, READERS, MCR_BENCH_BUILD_TYPE,
           mcr_version_string(), HAVE_TRY_APPLY ? "deferred" : "synchronous");
    fflush(stdout);
    for (int i = 0; i < READERS; i++) {
        memset(&rd[i], 0, sizeof rd[i]);
        rd[i].router = r;
        rd[i].stop = &stop;
        if (pthread_create(&th[i], NULL, reader_main, &rd[i]) != 0) {
            fprintf(stderr, "bench_publish: cannot start a reader\n");
            return 1;
        }
    }

    /* One change per period, on absolute deadlines: a slow change does not
     * stretch the schedule (a late period starts at once, and is counted). */
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    uint64_t start = bench_now_ns();
    unsigned server = 0;
    mcr_server_state want = MCR_STATE_DOWN;
    while (done < total) {
        add_ns(&next, 1000000000u / RATE);
        struct rusage u0, u1;
        getrusage(RUSAGE_THREAD, &u0);
        uint64_t t0 = bench_now_ns();
        rc = pool_like_change(r, server, want);
        uint64_t t1 = bench_now_ns();
        getrusage(RUSAGE_THREAD, &u1);
        ns[done++] = t1 - t0;
        if (u1.ru_nvcsw != u0.ru_nvcsw)
            blocked++;
        else if (u1.ru_nivcsw != u0.ru_nivcsw)
            preempted++;
        else if (t1 - t0 > undisturbed_max)
            undisturbed_max = t1 - t0;
        if (rc == MCR_OK) {
            /* eject, then re-add the same server, then the next one */
            if (want == MCR_STATE_ACTIVE)
                server = (server + 1) % opt.servers;
            want = want == MCR_STATE_DOWN ? MCR_STATE_ACTIVE : MCR_STATE_DOWN;
        } else if (rc == MCR_ERR_TIMEOUT) {
            busy++; /* the same change again next period */
        } else if (failed++ == 0) {
            printf("FAIL publish: %s\n", mcr_strerror(rc));
        }
#if HAVE_TRY_APPLY
        size_t pending = 0;
        (void)mcr_router_reclaim(r, MCR_ROUTER_PEEK, &pending);
        if (pending > retired_max)
            retired_max = pending;
#endif
        while ((rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL)) == EINTR)
            ;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > next.tv_sec ||
            (now.tv_sec == next.tv_sec && now.tv_nsec > next.tv_nsec + 1000000L))
            late++;
    }
    double secs = (double)(bench_now_ns() - start) / 1e9;
    atomic_store(&stop, 1);
    uint64_t lookups = 0, errors = 0;
    for (int i = 0; i < READERS; i++) {
        pthread_join(th[i], NULL);
        lookups += rd[i].lookups;
        errors += rd[i].errors;
        if (rd[i].errors > 0)
            printf("FAIL reader %d: %" PRIu64 " wrong answers, first: %s\n", i, rd[i].errors,
                   rd[i].first_error);
    }
    uint64_t epoch = mcr_router_epoch(r);
    mcr_router_free(r);

    qsort(ns, done, sizeof *ns, cmp_u64);
    double max_us = (double)ns[done - 1] / 1e3;
    double p99_us = (double)ns[(done * 99) / 100] / 1e3;
    double p50_us = (double)ns[done / 2] / 1e3;
    double und_us = (double)undisturbed_max / 1e3;
    printf("RESULT publish_%s max_us=%.1f p99_us=%.1f p50_us=%.1f undisturbed_max_us=%.1f "
           "blocked=%" PRIu64 " preempted=%" PRIu64 " publishes=%zu refused_busy=%" PRIu64
           " late_periods=%" PRIu64 " rate=%.0f/s lookups=%" PRIu64 " retired_max=%zu epoch=%" PRIu64
           "\n",
           api, max_us, p99_us, p50_us, und_us, blocked, preempted, done, busy, late,
           (double)done / secs, lookups, retired_max, epoch);
    printf("GOAL publish_%s_max target=<%.0fus measured=%.1fus %s\n", api, GOAL_MAX_US, max_us,
           max_us < GOAL_MAX_US ? "PASS" : "MISS");
    printf("GOAL publish_%s_undisturbed_max target=<%.0fus measured=%.1fus %s\n", api,
           GOAL_MAX_US, und_us, und_us < GOAL_MAX_US ? "PASS" : "MISS");
    printf("GOAL publish_%s_never_blocks target=0 measured=%" PRIu64 " %s\n", api, blocked,
           blocked == 0 ? "PASS" : "MISS");
    free(ns);
    if (errors || failed) {
        printf("FAILED: %" PRIu64 " wrong lookups, %" PRIu64 " failed changes\n", errors, failed);
        return 1;
    }
    return 0;
}
