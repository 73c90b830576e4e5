/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_state.c: a host's shared state (mcroute_state.h): lookups through a router fed from a state against a plain router, the time P follower processes take to adopt each change, etcd's calls per change with `mcroute agent` against P direct followers, and the state's size and a follower's memory. */
/* MAP_ANONYMOUS (glibc: a BSD and SVID name). */
#define _DEFAULT_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* liburcu-bp's fork protocol, which mcroute_router.h ("Threads and
 * processes") asks of a program that forks without exec and uses routers in
 * the child: the followers below are such children. */
#include <urcu-bp.h>

#include "benchutil.h"
#include "mcroute.h"
#include "mcroute_fleet.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"
#include "mcroute_state.h"
#include "fleet_etcd.h"
#include "realserver.h"

/*
 * What is measured, in one run.
 *
 *  1. Hot path. The same snapshot (ketama, md5, 10 and then 100 servers)
 *     behind a plain router (mcr_router_new()) and behind a router fed from
 *     a state holding it (mcr_state_write(), mcr_router_new_from_state()):
 *     mcr_router_locate_index() of the same fixed pseudo-random keys, the
 *     same loop function for both, repetitions interleaved with the side
 *     going first alternating. Per repetition the ns per lookup of each and
 *     their ratio (plain ns / state-fed ns: the state-fed router's speed
 *     relative to the plain one); medians of each, quartiles of the ratio.
 *     Both must send every key to the same server. The difference is the
 *     state's check on every read: one load of the generation in PATH.shm.
 *  2. Adoption. A writer in this process (the state in a fresh directory
 *     under /dev/shm, removed at the end) and P follower processes forked
 *     from it (a router each, made in the child). Each follower loops:
 *     mcr_router_generation() on its router (timed: the call that adopts a
 *     new state; its thread's CPU time too), mcr_router_state_status()
 *     (which generation it holds now), then nanosleep() for --gap-ms on
 *     average (drawn from G/2 to 3G/2, so that the followers do not call in
 *     step): a worker between requests. It records in shared memory, per
 *     change, when its adopting call started and returned (CLOCK_MONOTONIC,
 *     as this process's). The parent writes WARMUP + K changes (each a new
 *     snapshot of one server more or less), each once every follower
 *     adopted the one before and --pause-ms (plus 0..G ms) passed: a
 *     change lands on a host at rest. Reported over the K timed changes:
 *     (a) mcr_state_write() returned -> adopted (includes the wait for the
 *     process's next call), (b) the adopting call's start -> adopted (what
 *     the adoption adds to one request; with 1000 processes on a few cores
 *     mostly the wait for a core, which its CPU time tells apart), (c) per
 *     change the slowest process. A status call that adopted where the
 *     timed call had not (a write between the two) is timed instead, and
 *     counted. Then the adopting call alone (this process, no other
 *     follower) by pool size: 10, 100 and 1,000 servers.
 *  3. etcd's calls per change. A real etcd (fleet_etcd.c), a pool of
 *     POOL_SERVERS servers (mcr_fleet_publish()), changes by
 *     mcr_fleet_change() (a server added, removed). First the writer alone
 *     (no follower): its own calls per change. (i) `mcroute agent` as a
 *     process on a state, with P state followers as in 2; (ii) P direct
 *     followers (--direct: mcr_fleet_follow(), a router each, in this
 *     process). etcd's count of calls (grpc_server_started_total in its
 *     /metrics) over WARMUP + K changes, the K timed ones counted, each
 *     awaited by every process or follower and settled: the agent's
 *     request counter (its /metrics) still for SETTLE_MS after it reports
 *     nobody behind, or each direct follower's counter (mcr_fleet_get_stats)
 *     moved since the change and then still for SETTLE_MS. The agent's and
 *     the followers' calls are etcd's count less the writer's (alone).
 *     Lease keepalives are counted too: they come with time, not changes.
 *  4. Size: the state file's and PATH.shm's bytes (and what tmpfs holds of
 *     it), and a follower's memory: VmRSS, RssShmem and threads from
 *     /proc/self/status in a child forked after 1 (before this process has
 *     a call_rcu thread that the fork protocol would start again in it),
 *     before and after mcr_router_new_from_state() and after its first
 *     lookup; and the P followers' of 2 before and after the changes.
 */

#define KEYS_FULL 65536
#define KEYS_QUICK 8192
#define REPS_FULL 41
#define REPS_QUICK 11
#define KEY_LEN_MAX 40
#define KEY_SEED 0x6d63726f75746521ull
#define POOL "bench"
#define POOL_SERVERS 10
#define WARMUP 1
#define PROCS_MAX 4000
#define DIRECT_MAX 2000
#define READY_MS 60000        /* P followers forked and following */
#define ADOPT_WAIT_MS 10000   /* one change adopted by every follower (plus the gap) */
#define CHANGE_WAIT_MS 30000  /* one etcd change adopted everywhere */
#define AGENT_START_MS 30000
#define AGENT_STOP_MS 10000
#define STOP_MS 10000         /* followers gone once their pipe closed */
#define SETTLE_MS 20
#define SETTLE_POLL_MS 5
#define SETTLE_MAX_MS 5000
#define WRITER_CHANGES_FULL 10
#define WRITER_CHANGES_QUICK 3
#define NAMED_MAX 5           /* followers named in a FAIL line, at most */

/* The goals. */
#define GOAL_SPEED 0.98         /* state-fed lookups at least this fast as plain */
#define GOAL_ADOPT_P99_MS 1.0   /* (b) p99 */
#define GOAL_AGENT_CALLS 3.0    /* the agent's etcd calls per change */

#ifndef MCR_BENCH_CLI
#define MCR_BENCH_CLI ""
#endif

typedef struct settings {
    bool quick, verbose, keep;
    unsigned procs, direct, changes, gap_ms, pause_ms, reps, writer_changes;
    size_t nkeys;
} settings;

static settings opt = {.procs = 1000, .direct = 1000, .changes = 20, .gap_ms = 20,
                       .pause_ms = 200};

const char *bench_program = "bench_state";
static int failures;
static volatile uint64_t g_sink;
static char dir[256]; /* the states' directory, under /dev/shm */

#define FAIL(...)                                                                                \
    do {                                                                                         \
        printf("FAIL " __VA_ARGS__);                                                             \
        printf("\n");                                                                            \
        fflush(stdout);                                                                          \
        failures++;                                                                              \
    } while (0)

/* ------------------------------------------------------------ utilities */

typedef struct dist {
    double p50, p99, max; /* ms */
    size_t n, early;      /* samples; those below 0 */
} dist;

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

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

static void path_of(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

/* `name`'s value in /proc/PID/status (kB for the Vm* lines), -1 if absent;
 * pid 0: this process. */
static long proc_status(pid_t pid, const char *name)
{
    char path[64], line[256];
    long v = -1;
    size_t n = strlen(name);
    if (pid == 0)
        snprintf(path, sizeof path, "/proc/self/status");
    else
        snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, name, n) == 0 && line[n] == ':') {
            v = strtol(line + n + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* The bytes a file takes (st_blocks: tmpfs files are sparse), -1. */
static long file_allocated(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_blocks * 512 : -1;
}

/* liburcu-bp's fork protocol around the forks of followers (a batch of
 * forks between one prepare and one parent). */
static void fork_prepare(void)
{
    fflush(NULL);
    urcu_bp_call_rcu_before_fork();
    urcu_bp_before_fork();
}

static void fork_parent(void)
{
    urcu_bp_after_fork_parent();
    urcu_bp_call_rcu_after_fork_parent();
}

static void fork_child(void)
{
    urcu_bp_after_fork_child();
    urcu_bp_call_rcu_after_fork_child();
}

/* Wait for `pid` at most ms: its status, or -1 (still running). */
static int wait_pid_ms(pid_t pid, unsigned ms)
{
    uint64_t end = bench_now_ns() + (uint64_t)ms * 1000000u;
    for (;;) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return status;
        if (r < 0 && errno != EINTR)
            return 0; /* not our child any more: nothing to wait for */
        if (bench_now_ns() >= end)
            return -1;
        bench_sleep_ms(2);
    }
}

static void status_text(int status, char *out, size_t cap)
{
    if (WIFEXITED(status))
        snprintf(out, cap, "exit %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(out, cap, "signal %d", WTERMSIG(status));
    else
        snprintf(out, cap, "status 0x%x", (unsigned)status);
}

/* ------------------------------------------------------------ keys and snapshots */

typedef struct keyset {
    size_t n;
    char *bytes;
    const void **key;
    size_t *len;
} keyset;

/* Keys of the shapes of bench_router (ids, sessions, composite keys). */
static void keyset_init(keyset *ks, size_t n)
{
    uint64_t rng = KEY_SEED;
    ks->n = n;
    ks->bytes = bench_xmalloc(n * (KEY_LEN_MAX + 1));
    ks->key = bench_xmalloc(n * sizeof(*ks->key));
    ks->len = bench_xmalloc(n * sizeof(*ks->len));
    char *p = ks->bytes;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = bench_next_rand(&rng), s = bench_next_rand(&rng);
        unsigned a = (unsigned)(s % 100000000u);
        int len;
        switch (r % 4) {
        case 0:
            len = snprintf(p, KEY_LEN_MAX + 1, "user:%08u", a);
            break;
        case 1:
            len = snprintf(p, KEY_LEN_MAX + 1, "session:%016" PRIx64, s);
            break;
        case 2:
            len = snprintf(p, KEY_LEN_MAX + 1, "cart:%u:items:%u", a, (unsigned)(s >> 40) % 100u);
            break;
        default:
            len = snprintf(p, KEY_LEN_MAX + 1, "page:/c/%u/item/%u?v=2",
                           (unsigned)(s >> 32) % 1000u, a % 1000000u);
            break;
        }
        if (len < 0 || len > KEY_LEN_MAX)
            len = KEY_LEN_MAX;
        ks->key[i] = p;
        ks->len[i] = (size_t)len;
        p += len + 1;
    }
}

static void keyset_free(keyset *ks)
{
    free(ks->bytes);
    free(ks->key);
    free(ks->len);
}

static void host_of(char *out, size_t cap, unsigned i)
{
    snprintf(out, cap, "10.%u.%u.%u", i / 65536 + 1, i / 256 % 256, i % 256);
}

/* Servers 0..n-1, port 11211, weight 1, mode ketama (md5): a new config. */
static mcr_config *config_of(unsigned n)
{
    mcr_config *cfg = mcr_config_new();
    mcr_error err = {0};
    char host[32];
    if (cfg == NULL) {
        FAIL("setup: cannot make a config");
        return NULL;
    }
    for (unsigned i = 0; i < n; i++) {
        host_of(host, sizeof host, i);
        if (mcr_config_add_server(cfg, host, MCR_DEFAULT_PORT, 1, &err) != MCR_OK) {
            FAIL("setup: %s", err.message);
            mcr_config_free(cfg);
            return NULL;
        }
    }
    return cfg;
}

static mcr_snapshot *snapshot_of(unsigned n)
{
    mcr_config *cfg = config_of(n);
    mcr_snapshot *s = NULL;
    mcr_error err = {0};
    if (cfg != NULL && mcr_snapshot_new(cfg, 1, &s, &err) != MCR_OK)
        FAIL("setup: mcr_snapshot_new: %s", err.message);
    mcr_config_free(cfg);
    return s;
}

/* Change k of a pool of servers 0..n-1: even k adds server n, odd k
 * removes it again. */
static mcr_changes *change_of(unsigned k, unsigned n)
{
    mcr_changes *ch = mcr_changes_new();
    char host[32], id[48];
    int rc = ch ? MCR_OK : MCR_ERR_NOMEM;
    host_of(host, sizeof host, n);
    snprintf(id, sizeof id, "%s:%d", host, MCR_DEFAULT_PORT);
    if (rc == MCR_OK && k % 2 == 0) {
        mcr_server_desc d = {.host = host, .port = MCR_DEFAULT_PORT, .weight = 1,
                             .state = MCR_STATE_ACTIVE};
        rc = mcr_changes_add(ch, &d, NULL);
    } else if (rc == MCR_OK) {
        rc = mcr_changes_remove(ch, id, NULL);
    }
    if (rc != MCR_OK) {
        FAIL("setup: cannot record change %u: %s", k, mcr_strerror(rc));
        mcr_changes_free(ch);
        return NULL;
    }
    return ch;
}

static mcr_state_writer *writer_open(const char *path, unsigned slots)
{
    mcr_state_writer_options o = {.slots = slots};
    mcr_state_writer *w = NULL;
    mcr_error err = {0};
    if (mcr_state_writer_open(path, &o, &w, &err) != MCR_OK) {
        FAIL("setup: mcr_state_writer_open %s: %s", path, err.message);
        return NULL;
    }
    return w;
}

static bool state_put(mcr_state_writer *w, const mcr_snapshot *s, uint64_t *generation)
{
    mcr_state_content c;
    mcr_error err = {0};
    memset(&c, 0, sizeof c);
    c.pool = POOL;
    c.snapshot = s;
    c.phase = MCR_MIGRATION_NONE;
    if (mcr_state_write(w, &c, generation, &err) != MCR_OK) {
        FAIL("mcr_state_write: %s", err.message);
        return false;
    }
    return true;
}

/* ------------------------------------------------------------ 1. hot path */

static struct {
    unsigned cases, reported;
    double worst; /* the worse speed of the cases */
    char worst_case[64];
} speed_goal;

static NOINLINE uint64_t loop_index(mcr_router *r, const keyset *ks)
{
    uint64_t sum = 0, epochs = 0;
    for (size_t i = 0; i < ks->n; i++) {
        uint64_t e = 0;
        sum += mcr_router_locate_index(r, ks->key[i], ks->len[i], &e);
        epochs += e;
    }
    g_sink += epochs;
    return sum;
}

static void hot_case(unsigned servers, const keyset *ks)
{
    char name[64], file[300];
    snprintf(name, sizeof name, "state_lookup_index_ketama_%u", servers);
    snprintf(file, sizeof file, "hot%u", servers);
    char path[600];
    path_of(path, sizeof path, file);
    speed_goal.cases++;

    mcr_error err = {0};
    mcr_snapshot *snap = snapshot_of(servers), *cur = NULL;
    mcr_state_writer *w = NULL;
    mcr_router *plain = NULL, *fed = NULL;
    unsigned reps = opt.reps;
    double *tp = bench_xmalloc(reps * sizeof *tp), *tf = bench_xmalloc(reps * sizeof *tf);
    double *ratio = bench_xmalloc(reps * sizeof *ratio);
    bool ok = false;

    if (snap == NULL || (w = writer_open(path, 0)) == NULL || !state_put(w, snap, NULL))
        goto out;
    if (mcr_router_new(snap, &plain, &err) != MCR_OK) {
        FAIL("%s: mcr_router_new: %s", name, err.message);
        goto out;
    }
    if (mcr_router_new_from_state(path, 0, &fed, &err) != MCR_OK) {
        FAIL("%s: mcr_router_new_from_state: %s", name, err.message);
        goto out;
    }
    cur = mcr_router_current(fed);
    if (cur == NULL || mcr_snapshot_epoch(cur) != mcr_snapshot_epoch(snap) ||
        strcmp(mcr_snapshot_checksum(cur), mcr_snapshot_checksum(snap)) != 0) {
        FAIL("%s: the state-fed router does not hold the state's snapshot (epoch %" PRIu64
             " %s, written %" PRIu64 " %s)",
             name, mcr_snapshot_epoch(cur), cur ? mcr_snapshot_checksum(cur) : "-",
             mcr_snapshot_epoch(snap), mcr_snapshot_checksum(snap));
        goto out;
    }
    uint64_t want = loop_index(plain, ks);
    if (loop_index(fed, ks) != want) { /* also a warm-up of both */
        FAIL("%s: the state-fed and the plain router place keys differently", name);
        goto out;
    }
    ok = true;
    for (unsigned i = 0; i < reps && ok; i++) {
        for (int side = 0; side < 2; side++) {
            bool state_side = (side ^ (int)(i & 1)) == 0;
            mcr_router *r = state_side ? fed : plain;
            uint64_t t0 = bench_now_ns();
            uint64_t got = loop_index(r, ks);
            double ns = (double)(bench_now_ns() - t0) / (double)ks->n;
            *(state_side ? &tf[i] : &tp[i]) = ns;
            if (got != want) {
                FAIL("%s: the %s router's placement changed between repetitions", name,
                     state_side ? "state-fed" : "plain");
                ok = false;
            }
        }
        ratio[i] = tp[i] / tf[i];
    }
    if (ok) {
        double mf = bench_median(tf, reps), mp = bench_median(tp, reps);
        double mr = bench_median(ratio, reps); /* each sorted now */
        printf("RESULT %s state_ns=%.2f plain_ns=%.2f speed=%.3f speed_q1=%.3f speed_q3=%.3f "
               "state_ns_min=%.2f plain_ns_min=%.2f reps=%u keys=%zu\n",
               name, mf, mp, mr, ratio[(reps - 1) / 4], ratio[(3 * (reps - 1) + 3) / 4], tf[0],
               tp[0], reps, ks->n);
        if (speed_goal.reported++ == 0 || mr < speed_goal.worst) {
            speed_goal.worst = mr;
            snprintf(speed_goal.worst_case, sizeof speed_goal.worst_case, "%s", name);
        }
    }
out:
    free(tp);
    free(tf);
    free(ratio);
    mcr_snapshot_unref(cur);
    mcr_router_free(fed);
    mcr_router_free(plain);
    mcr_state_writer_free(w);
    mcr_snapshot_unref(snap);
}

static void hot_path(void)
{
    keyset ks;
    keyset_init(&ks, opt.nkeys);
    printf("INFO hot path: mcr_router_locate_index() of %zu keys, ketama md5, a router fed from "
           "a state against a plain router on the same snapshot, %u interleaved repetitions; "
           "speed = plain ns / state-fed ns\n",
           ks.n, opt.reps);
    hot_case(10, &ks);
    hot_case(100, &ks);
    keyset_free(&ks);
}

/* ------------------------------------------------------------ followers (processes) */

typedef struct proc_row {
    _Atomic int state;           /* 0 starting, 1 following, 2 stopped, -1 failed (msg) */
    _Atomic uint64_t generation; /* the state's generation it adopted last */
    _Atomic uint64_t epoch;      /* that state's snapshot epoch */
    _Atomic uint32_t by_status;  /* adoptions made by the status call, not the timed one */
    _Atomic uint32_t skipped;    /* generations it went past without holding them */
    int slot;                    /* its slot in PATH.shm (-1: none) */
    uint64_t loops, cpu_ns;      /* at its end: calls made, its CPU time (all threads) */
    char msg[200];
} proc_row;

/* P follower processes of the state at `path`. Shared with them (mapped
 * before the fork): rows[P], and t[P][slots][3], per change slot k (the
 * state's generation base_gen + 1 + k) the start and the return of the call
 * that adopted it (CLOCK_MONOTONIC ns, 0: not yet) and the CPU time its
 * thread spent in it (CLOCK_THREAD_CPUTIME_ID, read around the call). */
typedef struct procs {
    const char *what;
    char path[600];
    unsigned n, slots, started, stopped;
    uint64_t base_gen, forked_ns, stopped_ns; /* CLOCK_MONOTONIC */
    proc_row *rows;
    uint64_t *t;
    size_t rows_len, t_len;
    pid_t *pid;
    int quit[2]; /* the followers poll quit[0]; closing quit[1] stops them */
} procs;

static uint64_t *times_of(const procs *p, unsigned i, unsigned k)
{
    return &p->t[((size_t)i * p->slots + k) * 3];
}

static uint64_t cpu_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A follower: a router fed from the state, a loop of requests until the
 * quit pipe closes. Never returns. */
static void follower_main(const procs *p, unsigned i, pid_t parent)
{
    proc_row *row = &p->rows[i];
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
    close(p->quit[1]);
    mcr_router *r = NULL;
    mcr_error err = {0};
    if (mcr_router_new_from_state(p->path, 0, &r, &err) != MCR_OK) {
        snprintf(row->msg, sizeof row->msg, "mcr_router_new_from_state: %.150s", err.message);
        atomic_store(&row->state, -1);
        _exit(3);
    }
    mcr_state_status st;
    mcr_router_state_status(r, &st);
    row->slot = st.slot;
    uint64_t last = st.generation, rg = mcr_router_generation(r);
    atomic_store(&row->epoch, mcr_router_epoch(r));
    atomic_store(&row->generation, last);
    atomic_store(&row->state, 1);
    /* pauses of gap_ms on average, drawn from gap_ms/2 to 3*gap_ms/2: the
     * followers do not call in step (a herd that a change would find all at
     * once), as requests come at random */
    uint64_t rng = KEY_SEED ^ ((uint64_t)i << 32 | (uint64_t)getpid()), loops = 0;
    uint64_t gap_ns = (uint64_t)opt.gap_ms * 1000000u;
    for (;; loops++) {
        uint64_t c0 = cpu_ns(CLOCK_THREAD_CPUTIME_ID), t0 = bench_now_ns();
        uint64_t g = mcr_router_generation(r); /* a request's first read: adopts */
        uint64_t t1 = bench_now_ns(), c1 = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
        mcr_router_state_status(r, &st);
        uint64_t t2 = bench_now_ns();
        if (st.generation != last) {
            /* the router's generation moves at each publish: if it did not
             * in the timed call, the status call adopted */
            bool timed = g != rg;
            if (!timed)
                atomic_fetch_add(&row->by_status, 1);
            if (st.generation != last + 1)
                atomic_fetch_add(&row->skipped, 1);
            if (st.generation > p->base_gen && st.generation - p->base_gen - 1 < p->slots) {
                uint64_t *tt = times_of(p, i, (unsigned)(st.generation - p->base_gen - 1));
                tt[0] = timed ? t0 : t1;
                tt[1] = timed ? t1 : t2;
                tt[2] = timed ? c1 - c0 : 0; /* the status call's: not measured */
            }
            atomic_store(&row->epoch, mcr_router_epoch(r));
            atomic_store_explicit(&row->generation, st.generation, memory_order_release);
            last = st.generation;
        }
        rg = g;
        uint64_t ns = gap_ns / 2 + (gap_ns ? bench_next_rand(&rng) % (gap_ns + 1) : 0);
        struct timespec gap = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
        nanosleep(&gap, NULL);
        struct pollfd pf = {p->quit[0], POLLIN, 0};
        if (poll(&pf, 1, 0) != 0)
            break; /* closed */
    }
    mcr_router_free(r);
    row->loops = loops;
    row->cpu_ns = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
    atomic_store(&row->state, 2);
    _exit(0);
}

static void procs_init(procs *p, const char *what, const char *path, unsigned n, unsigned slots,
                       uint64_t base_gen)
{
    memset(p, 0, sizeof *p);
    p->what = what;
    snprintf(p->path, sizeof p->path, "%s", path);
    p->n = n;
    p->slots = slots;
    p->base_gen = base_gen;
    p->quit[0] = p->quit[1] = -1;
    p->rows = MAP_FAILED;
    p->t = MAP_FAILED;
}

/* Fork the followers and wait until each follows (or failed): false after
 * FAIL lines. procs_stop() and procs_free() in any case. */
static bool procs_start(procs *p)
{
    p->rows_len = p->n * sizeof *p->rows;
    p->t_len = (size_t)p->n * p->slots * 3 * sizeof *p->t + 1;
    p->rows = mmap(NULL, p->rows_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    p->t = mmap(NULL, p->t_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    p->pid = calloc(p->n, sizeof *p->pid);
    if (p->rows == MAP_FAILED || p->t == MAP_FAILED || p->pid == NULL) {
        FAIL("%ss: cannot map their shared memory: %s", p->what, strerror(errno));
        return false;
    }
    if (pipe(p->quit) != 0) {
        FAIL("%ss: pipe: %s", p->what, strerror(errno));
        p->quit[0] = p->quit[1] = -1;
        return false;
    }
    pid_t parent = getpid();
    int fork_errno = 0;
    uint64_t t0 = p->forked_ns = bench_now_ns();
    fork_prepare();
    for (; p->started < p->n; p->started++) {
        pid_t pid = fork();
        if (pid < 0) {
            fork_errno = errno;
            break;
        }
        if (pid == 0) {
            fork_child();
            follower_main(p, p->started, parent);
        }
        p->pid[p->started] = pid;
    }
    fork_parent();
    if (p->started < p->n) {
        FAIL("%s %u: fork: %s", p->what, p->started, strerror(fork_errno));
        return false;
    }
    uint64_t forked = bench_now_ns();
    uint64_t end = forked + (uint64_t)READY_MS * 1000000u;
    unsigned ready = 0, failed = 0;
    for (;;) {
        ready = failed = 0;
        for (unsigned i = 0; i < p->n; i++) {
            int s = atomic_load(&p->rows[i].state);
            ready += s == 1;
            failed += s < 0;
        }
        if (ready + failed == p->n || bench_now_ns() >= end)
            break;
        bench_sleep_ms(2);
    }
    if (ready < p->n) {
        unsigned named = 0;
        for (unsigned i = 0; i < p->n && named < NAMED_MAX; i++) {
            int s = atomic_load(&p->rows[i].state);
            if (s == 1)
                continue;
            named++;
            FAIL("%s %u (pid %ld): %s", p->what, i, (long)p->pid[i],
                 s < 0 ? p->rows[i].msg : "not following in time");
        }
        FAIL("%u of %u %ss not following after %d ms (%u failed)", p->n - ready, p->n, p->what,
             READY_MS, failed);
        return false;
    }
    unsigned noslot = 0;
    for (unsigned i = 0; i < p->n; i++)
        noslot += p->rows[i].slot < 0;
    printf("INFO %u %ss forked in %.0f ms, following in %.0f ms more%s\n", p->n, p->what,
           (double)(forked - t0) / 1e6, (double)(bench_now_ns() - forked) / 1e6,
           noslot ? " (some without a slot)" : "");
    if (noslot)
        printf("INFO %u %ss found no slot in the state (not counted by its writer)\n", noslot,
               p->what);
    return true;
}

/* Until every follower holds a generation >= gen (epoch >= epoch when
 * gen is 0), at most ms: true when they all did, else FAIL lines naming
 * those that did not. */
static bool procs_wait(procs *p, uint64_t gen, uint64_t epoch, unsigned ms, const char *change)
{
    uint64_t end = bench_now_ns() + (uint64_t)ms * 1000000u;
    unsigned from = 0; /* the followers before it have it */
    for (;;) {
        while (from < p->n &&
               (gen ? atomic_load_explicit(&p->rows[from].generation, memory_order_acquire) >= gen
                    : atomic_load(&p->rows[from].epoch) >= epoch))
            from++;
        if (from == p->n)
            return true;
        if (bench_now_ns() >= end)
            break;
        bench_sleep_ms(1);
    }
    unsigned missing = 0, named = 0;
    for (unsigned i = 0; i < p->n; i++) {
        proc_row *row = &p->rows[i];
        uint64_t g = atomic_load(&row->generation), e = atomic_load(&row->epoch);
        if (gen ? g >= gen : e >= epoch)
            continue;
        missing++;
        if (named++ < NAMED_MAX)
            FAIL("%s %u (pid %ld) did not adopt %s (%s %" PRIu64 ") within %u ms: it holds "
                 "generation %" PRIu64 ", epoch %" PRIu64 "%s",
                 p->what, i, (long)p->pid[i], change, gen ? "generation" : "epoch",
                 gen ? gen : epoch, ms, g, e,
                 atomic_load(&row->state) == 1 ? "" : " (it stopped)");
    }
    if (missing > NAMED_MAX)
        FAIL("%u %ss in all did not adopt %s", missing, p->what, change);
    return false;
}

/* Memory and threads of the running followers: medians and maxima. */
static void procs_memory(const procs *p, const char *when)
{
    double *rss = bench_xmalloc(p->started * sizeof *rss);
    double *shm = bench_xmalloc(p->started * sizeof *shm);
    double *thr = bench_xmalloc(p->started * sizeof *thr);
    unsigned n = 0;
    for (unsigned i = 0; i < p->started; i++) {
        long r = proc_status(p->pid[i], "VmRSS"), s = proc_status(p->pid[i], "RssShmem");
        long t = proc_status(p->pid[i], "Threads");
        if (r >= 0 && s >= 0 && t >= 0) {
            rss[n] = (double)r;
            shm[n] = (double)s;
            thr[n++] = (double)t;
        }
    }
    if (n > 0) {
        double mr = bench_median(rss, n), ms = bench_median(shm, n), mt = bench_median(thr, n);
        printf("INFO %s memory %s: VmRSS median %.0f kB, max %.0f kB (RssShmem median %.0f kB); "
               "threads median %.0f, max %.0f (of %u processes)\n",
               p->what, when, mr, rss[n - 1], ms, mt, thr[n - 1], n);
    }
    free(rss);
    free(shm);
    free(thr);
}

/* Close the pipe, reap every follower by its pid (SIGKILL after STOP_MS). */
static void procs_stop(procs *p)
{
    if (p->quit[1] >= 0)
        close(p->quit[1]);
    uint64_t end = bench_now_ns() + (uint64_t)STOP_MS * 1000000u;
    unsigned bad = 0;
    for (unsigned i = 0; i < p->started; i++) {
        uint64_t now = bench_now_ns();
        int status = wait_pid_ms(p->pid[i], now < end ? (unsigned)((end - now) / 1000000u) : 0);
        if (status == -1) {
            kill(p->pid[i], SIGKILL);
            status = wait_pid_ms(p->pid[i], STOP_MS);
            if (bad++ < NAMED_MAX)
                FAIL("%s %u (pid %ld) did not stop when its pipe closed: killed", p->what, i,
                     (long)p->pid[i]);
        } else if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0) &&
                   atomic_load(&p->rows[i].state) != -1) {
            char s[48];
            status_text(status, s, sizeof s);
            if (bad++ < NAMED_MAX)
                FAIL("%s %u (pid %ld) ended with %s", p->what, i, (long)p->pid[i], s);
        }
    }
    if (p->quit[0] >= 0)
        close(p->quit[0]);
    p->quit[0] = p->quit[1] = -1;
    p->stopped = p->started;
    p->started = 0;
    p->stopped_ns = bench_now_ns();
}

/* Their shared memory unmapped. */
static void procs_free(procs *p)
{
    if (p->rows != MAP_FAILED)
        munmap(p->rows, p->rows_len);
    if (p->t != MAP_FAILED)
        munmap(p->t, p->t_len);
    p->rows = MAP_FAILED;
    p->t = MAP_FAILED;
    free(p->pid);
    p->pid = NULL;
}

/* ------------------------------------------------------------ 2. adoption */

static struct {
    bool done;
    dist call; /* (b) p99 for the goal */
} adopt_goal;

static void result(const char *name, const dist *d, const char *extra)
{
    printf("RESULT %s n=%zu p50_ms=%.3f p99_ms=%.3f max_ms=%.3f%s\n", name, d->n, d->p50, d->p99,
           d->max, extra ? extra : "");
}

static void adoption_report(const procs *p, const uint64_t *called, const uint64_t *returned)
{
    unsigned K = opt.changes, P = p->n;
    size_t n = (size_t)P * K;
    int64_t *from_write = bench_xmalloc(n * sizeof *from_write);
    int64_t *call = bench_xmalloc(n * sizeof *call);
    int64_t *slow_write = bench_xmalloc(K * sizeof *slow_write);
    int64_t *slow_call = bench_xmalloc(K * sizeof *slow_call);
    int64_t *write_call = bench_xmalloc(K * sizeof *write_call);
    int64_t *warm = bench_xmalloc(P * WARMUP * sizeof *warm);
    int64_t *cpu = bench_xmalloc(n * sizeof *cpu);
    size_t m = 0, missing = 0, nw = 0, nc = 0;
    double cpu_calls = 0; /* ns, the timed adopting calls of every change */
    for (unsigned k = 0; k < WARMUP; k++)
        for (unsigned i = 0; i < P; i++) {
            const uint64_t *tt = times_of(p, i, k);
            if (tt[1] != 0)
                warm[nw++] = (int64_t)(tt[1] - tt[0]);
        }
    for (unsigned j = 0; j < K; j++) {
        unsigned k = WARMUP + j;
        slow_write[j] = slow_call[j] = INT64_MIN;
        write_call[j] = (int64_t)(returned[k] - called[k]);
        for (unsigned i = 0; i < P; i++) {
            const uint64_t *tt = times_of(p, i, k);
            if (tt[1] == 0) {
                missing++;
                continue;
            }
            int64_t a = (int64_t)(tt[1] - returned[k]), b = (int64_t)(tt[1] - tt[0]);
            if (tt[2] != 0)
                cpu[nc++] = (int64_t)tt[2];
            from_write[m] = a;
            call[m++] = b;
            slow_write[j] = a > slow_write[j] ? a : slow_write[j];
            slow_call[j] = b > slow_call[j] ? b : slow_call[j];
        }
    }
    unsigned by_status = 0, skipped = 0;
    double cpu_all = 0, loops = 0; /* ns, calls: every follower's, whole run */
    for (unsigned i = 0; i < P; i++) {
        by_status += atomic_load(&p->rows[i].by_status);
        skipped += atomic_load(&p->rows[i].skipped);
        cpu_all += (double)p->rows[i].cpu_ns;
        loops += (double)p->rows[i].loops;
        for (unsigned k = 0; k < p->slots; k++)
            cpu_calls += (double)times_of(p, i, k)[2];
    }
    if (missing || skipped)
        FAIL("adoption: %zu (process, change) times missing, %u generations skipped", missing,
             skipped);
    dist dw = summarize(write_call, K), da = summarize(from_write, m), db = summarize(call, m);
    dist dsw = summarize(slow_write, K), dsc = summarize(slow_call, K);
    dist dwarm = summarize(warm, nw), dc = summarize(cpu, nc);
    char extra[96];
    result("adopt_write_call", &dw, " (mcr_state_write(), the writer's call)");
    snprintf(extra, sizeof extra, " procs=%u changes=%u gap_ms=%u", P, K, opt.gap_ms);
    result("adopt_call", &db, extra);
    result("adopt_call_cpu", &dc, " (the adopting call's own CPU time, its thread's clock)");
    result("adopt_slowest_call", &dsc, NULL);
    snprintf(extra, sizeof extra, " gap_ms=%u early=%zu", opt.gap_ms, dsw.early);
    result("adopt_slowest_from_write", &dsw, extra);
    printf("INFO adopt_from_write n=%zu p50_ms=%.3f p99_ms=%.3f max_ms=%.3f early=%zu: from "
           "mcr_state_write() returning to the adopting call's return; includes the wait for "
           "the process's next call, one every gap_ms=%u on average, plus the call\n",
           da.n, da.p50, da.p99, da.max, da.early, opt.gap_ms);
    printf("INFO adopt warm-up (the first change after the followers started, not in the "
           "results): adopting call p50 %.3f ms, p99 %.3f ms, max %.3f ms\n",
           dwarm.p50, dwarm.p99, dwarm.max);
    printf("INFO adopt: %u of %zu adoptions were made by the status call after the timed one "
           "(a write in between; that call is timed instead)\n",
           by_status, (size_t)P * (K + WARMUP));
    double wall = (double)(p->stopped_ns - p->forked_ns);
    printf("INFO adopt: the followers used %.2f of %ld cores over their %.1f s (%.0f calls, "
           "%.1f us of CPU per call, their start and end included); their adopting calls "
           "%.1f%% of that (%.0f us per adoption)\n",
           cpu_all / wall, sysconf(_SC_NPROCESSORS_ONLN), wall / 1e9, loops,
           loops > 0 ? cpu_all / loops / 1e3 : 0.0,
           cpu_all > 0 ? 100.0 * cpu_calls / cpu_all : 0.0,
           cpu_calls / ((double)P * p->slots) / 1e3);
    adopt_goal.done = true;
    adopt_goal.call = db;
    free(from_write);
    free(call);
    free(slow_write);
    free(slow_call);
    free(write_call);
    free(warm);
    free(cpu);
}

/* One process alone (this one): the adopting call's time, by pool size
 * (the state's parse and the ring's build grow with it). */
static void adopt_alone(unsigned servers, unsigned reps)
{
    char file[32], path[600];
    snprintf(file, sizeof file, "alone%u", servers);
    path_of(path, sizeof path, file);
    mcr_state_writer *w = writer_open(path, 0);
    mcr_snapshot *cur = snapshot_of(servers);
    mcr_router *r = NULL;
    mcr_error err = {0};
    int64_t *call = bench_xmalloc(reps * sizeof *call), *wr = bench_xmalloc(reps * sizeof *wr);
    unsigned done = 0;
    if (w == NULL || cur == NULL || !state_put(w, cur, NULL))
        goto out;
    if (mcr_router_new_from_state(path, 0, &r, &err) != MCR_OK) {
        FAIL("adopt alone: mcr_router_new_from_state: %s", err.message);
        goto out;
    }
    for (; done < reps; done++) {
        mcr_changes *ch = change_of(done, servers);
        mcr_snapshot *next = NULL;
        int rc = ch ? mcr_snapshot_apply(cur, ch, &next, &err) : MCR_ERR_NOMEM;
        mcr_changes_free(ch);
        if (rc != MCR_OK) {
            FAIL("adopt alone: mcr_snapshot_apply: %s", err.message);
            goto out;
        }
        mcr_snapshot_unref(cur);
        cur = next;
        uint64_t gen = 0, t0 = bench_now_ns();
        if (!state_put(w, cur, &gen))
            goto out;
        uint64_t t1 = bench_now_ns();
        g_sink += mcr_router_generation(r);
        uint64_t t2 = bench_now_ns();
        mcr_state_status st;
        mcr_router_state_status(r, &st);
        if (st.generation != gen) {
            FAIL("adopt alone: %u servers: generation %" PRIu64 " written, %" PRIu64 " held",
                 servers, gen, st.generation);
            goto out;
        }
        wr[done] = (int64_t)(t1 - t0);
        call[done] = (int64_t)(t2 - t1);
    }
    dist d = summarize(call, done), dw = summarize(wr, done);
    printf("RESULT adopt_call_alone servers=%u n=%zu p50_ms=%.3f p99_ms=%.3f max_ms=%.3f "
           "write_p50_ms=%.3f state_bytes=%ld\n",
           servers, d.n, d.p50, d.p99, d.max, dw.p50, file_size(path));
out:
    free(call);
    free(wr);
    mcr_router_free(r);
    mcr_snapshot_unref(cur);
    mcr_state_writer_free(w);
}

static void adoption(void)
{
    char path[600];
    path_of(path, sizeof path, "adopt");
    unsigned slots = WARMUP + opt.changes;
    unsigned shm_slots = opt.procs + 64 > MCR_HOST_STATE_SLOTS ? opt.procs + 64 : 0;
    mcr_state_writer *w = writer_open(path, shm_slots);
    mcr_snapshot **snaps = calloc(slots + 1, sizeof *snaps);
    uint64_t *called = calloc(slots, sizeof *called), *returned = calloc(slots, sizeof *returned);
    uint64_t gen = 0;
    procs p;
    procs_init(&p, "follower", path, opt.procs, slots, 0);
    if (w == NULL || snaps == NULL || called == NULL || returned == NULL)
        goto out;
    /* the snapshots first: each change k one server more (k even) or less */
    if ((snaps[0] = snapshot_of(POOL_SERVERS)) == NULL)
        goto out;
    for (unsigned k = 0; k < slots; k++) {
        mcr_changes *ch = change_of(k, POOL_SERVERS);
        mcr_error err = {0};
        int rc = ch ? mcr_snapshot_apply(snaps[k], ch, &snaps[k + 1], &err) : MCR_ERR_NOMEM;
        mcr_changes_free(ch);
        if (rc != MCR_OK) {
            FAIL("setup: mcr_snapshot_apply: %s", err.message);
            goto out;
        }
    }
    if (!state_put(w, snaps[0], &gen))
        goto out;
    p.base_gen = gen;
    printf("INFO adoption: %u follower processes, a call every %u ms each on average, %d + %u "
           "changes of a %d-server ketama pool written by this process, each %u to %u ms after "
           "the last follower adopted the one before\n",
           opt.procs, opt.gap_ms, WARMUP, opt.changes, POOL_SERVERS, opt.pause_ms,
           opt.pause_ms + opt.gap_ms);
    if (!procs_start(&p))
        goto out;
    procs_memory(&p, "before the changes");
    uint64_t t0 = bench_now_ns(), rng = KEY_SEED;
    for (unsigned k = 0; k < slots; k++) {
        char what[48];
        called[k] = bench_now_ns();
        bool ok = state_put(w, snaps[k + 1], &gen);
        returned[k] = bench_now_ns();
        if (!ok)
            goto out;
        if (gen != p.base_gen + 1 + k) {
            FAIL("adoption: change %u wrote generation %" PRIu64 ", expected %" PRIu64, k, gen,
                 p.base_gen + 1 + k);
            goto out;
        }
        snprintf(what, sizeof what, "change %u", k);
        if (!procs_wait(&p, gen, 0, ADOPT_WAIT_MS + opt.gap_ms, what))
            goto out;
        /* a host at rest before the next change, which lands at a moment
         * unrelated to the followers' calls */
        bench_sleep_ms(opt.pause_ms + (unsigned)(bench_next_rand(&rng) % (opt.gap_ms + 1)));
        if (opt.verbose) {
            uint64_t slow = 0, slow_call = 0;
            for (unsigned i = 0; i < p.n; i++) {
                const uint64_t *tt = times_of(&p, i, k);
                slow = tt[1] - returned[k] > slow ? tt[1] - returned[k] : slow;
                slow_call = tt[1] - tt[0] > slow_call ? tt[1] - tt[0] : slow_call;
            }
            printf("CHANGE adopt %u generation=%" PRIu64 " write_ms=%.3f slowest_ms=%.3f "
                   "slowest_call_ms=%.3f%s\n",
                   k, gen, (double)(returned[k] - called[k]) / 1e6, (double)slow / 1e6,
                   (double)slow_call / 1e6, k < WARMUP ? " (warm-up)" : "");
        }
    }
    printf("INFO adoption: %u changes adopted by %u processes in %.0f ms\n", slots, p.n,
           (double)(bench_now_ns() - t0) / 1e6);
    procs_memory(&p, "after the changes");
    procs_stop(&p);
    if (failures == 0)
        adoption_report(&p, called, returned);
out:
    procs_stop(&p);
    procs_free(&p);
    if (failures == 0) {
        printf("INFO adoption alone: the adopting call in this process, no other process "
               "following, by pool size\n");
        adopt_alone(10, opt.quick ? 21 : 101);
        adopt_alone(100, opt.quick ? 11 : 31);
        adopt_alone(1000, opt.quick ? 3 : 11);
    }
    for (unsigned k = 0; snaps != NULL && k <= slots; k++)
        mcr_snapshot_unref(snaps[k]);
    free(snaps);
    free(called);
    free(returned);
    mcr_state_writer_free(w);
}

/* ------------------------------------------------------------ 3. etcd */

static fe_etcd E;
static mcr_fleet_options fopts;
static unsigned pool_changes; /* changes made to the pool so far (change_of()'s k) */

typedef struct etcd_run {
    bool done;
    unsigned changes, members; /* timed changes; processes or followers */
    fe_call_counts sum;        /* etcd's calls over them */
    double min, max;           /* one change's total */
} etcd_run;

static etcd_run run_writer, run_agent, run_direct;
static const char *agent_skipped; /* why (i) did not run, or NULL */

static bool pool_create(void)
{
    mcr_config *cfg = config_of(POOL_SERVERS);
    mcr_error err = {0};
    uint64_t epoch = 0;
    if (cfg == NULL)
        return false;
    int rc = mcr_fleet_publish(&fopts, cfg, &epoch, &err);
    mcr_config_free(cfg);
    if (rc != MCR_OK)
        FAIL("setup: mcr_fleet_publish: %s", err.message);
    return rc == MCR_OK;
}

/* The next change of the pool: its epoch in *epoch. */
static bool pool_change(uint64_t *epoch)
{
    mcr_error err = {0};
    mcr_changes *ch = change_of(pool_changes, POOL_SERVERS);
    if (ch == NULL)
        return false;
    int rc = mcr_fleet_change(&fopts, ch, epoch, &err);
    mcr_changes_free(ch);
    if (rc != MCR_OK) {
        FAIL("change %u: mcr_fleet_change: %s", pool_changes, err.message);
        return false;
    }
    pool_changes++;
    return true;
}

static void counts_add(fe_call_counts *sum, const fe_call_counts *a, const fe_call_counts *b)
{
    for (int i = 0; i < FE_M_N; i++)
        sum->n[i] += b->n[i] - a->n[i];
    sum->total += b->total - a->total;
}

/* One change counted into run: etcd's calls from `before` to now. */
static bool run_count(etcd_run *run, const fe_call_counts *before, const char *what, unsigned k)
{
    fe_call_counts after;
    if (!fe_calls(&E, &after))
        return false;
    double t = after.total - before->total;
    if (run->changes == 0 || t < run->min)
        run->min = t;
    if (run->changes == 0 || t > run->max)
        run->max = t;
    run->changes++;
    counts_add(&run->sum, before, &after);
    if (opt.verbose) {
        printf("CHANGE %s %u etcd_calls=%.0f", what, k, t);
        for (int i = 0; i < FE_M_N; i++)
            if (after.n[i] - before->n[i] > 0)
                printf(" %s=%.0f", fe_call_names[i], after.n[i] - before->n[i]);
        printf("\n");
    }
    return true;
}

/* The writer alone: etcd's calls per mcr_fleet_change(), nobody following. */
static bool writer_alone(void)
{
    for (unsigned k = 0; k < opt.writer_changes; k++) {
        fe_call_counts before;
        uint64_t e;
        if (!fe_calls(&E, &before) || !pool_change(&e) || !run_count(&run_writer, &before,
                                                                     "writer", k))
            return false;
    }
    run_writer.done = true;
    return true;
}

/* -------- (i) the agent */

typedef struct agent_proc {
    pid_t pid;
    int metrics_port;
    char path[600], log[600];
} agent_proc;

typedef struct agent_metrics {
    double requests, behind, state_epoch, total;
} agent_metrics;

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    size_t cap = 4096, len = 0, r;
    char *b = bench_xmalloc(cap);
    while ((r = fread(b + len, 1, cap - len - 1, f)) > 0) {
        len += r;
        if (len + 1 == cap && (b = realloc(b, cap *= 2)) == NULL)
            abort();
    }
    fclose(f);
    b[len] = '\0';
    return b;
}

/* The value of the line `name` or `name{...}` in a Prometheus text. */
static bool metric(const char *text, const char *name, double *v)
{
    size_t n = strlen(name);
    for (const char *p = text; p != NULL && *p != '\0';) {
        if (strncmp(p, name, n) == 0 && (p[n] == '{' || p[n] == ' ')) {
            const char *val = p[n] == '{' ? strchr(p, '}') : p + n;
            if (val == NULL)
                return false;
            *v = strtod(val + 1, NULL);
            return true;
        }
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    return false;
}

static bool agent_read_metrics(const agent_proc *a, agent_metrics *m)
{
    fe_etcd at; /* fe_http() speaks to the agent's port as well as to etcd's */
    memset(&at, 0, sizeof at);
    at.client_port = a->metrics_port;
    at.failures = &failures;
    char *b = NULL;
    int st = fe_http(&at, "GET", "/metrics", &b);
    bool ok = st == 200 && b != NULL && metric(b, "mcroute_etcd_requests_total", &m->requests) &&
              metric(b, "mcroute_processes_behind", &m->behind) &&
              metric(b, "mcroute_state_epoch", &m->state_epoch);
    /* the count of processes: a check only (its name changed once) */
    if (b == NULL || (!metric(b, "mcroute_following_processes", &m->total) &&
                      !metric(b, "mcroute_processes_total", &m->total)))
        m->total = -1;
    if (!ok)
        FAIL("agent: GET /metrics on port %d: status %d%s", a->metrics_port, st,
             st == 200 ? ", a metric missing" : "");
    free(b);
    return ok;
}

static void agent_log_tail(const agent_proc *a)
{
    char *t = read_text(a->log);
    size_t n = t ? strlen(t) : 0;
    printf("INFO agent log %s (last bytes): %s\n", a->log, t ? t + (n > 600 ? n - 600 : 0) : "");
    free(t);
}

/* `mcroute agent` on the pool, its metrics on a port of its choosing;
 * until it wrote its first state. */
static bool agent_start(agent_proc *a)
{
    path_of(a->path, sizeof a->path, "agent");
    path_of(a->log, sizeof a->log, "agent.log");
    char *argv[] = {(char *)MCR_BENCH_CLI, "agent", "--etcd", E.endpoint, "--pool", POOL,
                    "--state", a->path, "--metrics", FE_ADDR ":0", "--id", "bench-agent",
                    NULL};
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        FAIL("agent: fork: %s", strerror(errno));
        return false;
    }
    if (pid == 0) {
        int in = open("/dev/null", O_RDONLY);
        int out = open(a->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent || in < 0 || out < 0)
            _exit(127);
        dup2(in, 0);
        dup2(out, 1);
        dup2(out, 2);
        rs_close_fds_from(3);
        execv(argv[0], argv);
        _exit(127);
    }
    a->pid = pid;
    uint64_t end = bench_now_ns() + (uint64_t)AGENT_START_MS * 1000000u;
    for (;;) {
        char *t = read_text(a->log);
        const char *m = t ? strstr(t, "metrics http://") : NULL;
        const char *port = m ? strchr(m + 15, ':') : NULL;
        bool ready = port != NULL && strstr(t, "generation ") != NULL;
        if (ready)
            a->metrics_port = atoi(port + 1);
        free(t);
        if (ready && a->metrics_port > 0)
            return true;
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            char s[48];
            status_text(status, s, sizeof s);
            a->pid = 0;
            FAIL("agent: %s ended with %s before writing a state", MCR_BENCH_CLI, s);
            agent_log_tail(a);
            return false;
        }
        if (bench_now_ns() >= end) {
            FAIL("agent: no state written in %d ms", AGENT_START_MS);
            agent_log_tail(a);
            return false;
        }
        bench_sleep_ms(10);
    }
}

/* SIGTERM, and wait for it by its pid (SIGKILL after AGENT_STOP_MS). */
static void agent_stop(agent_proc *a)
{
    if (a->pid <= 0)
        return;
    kill(a->pid, SIGTERM);
    int status = wait_pid_ms(a->pid, AGENT_STOP_MS);
    if (status == -1) {
        kill(a->pid, SIGKILL);
        wait_pid_ms(a->pid, AGENT_STOP_MS);
        FAIL("agent (pid %ld) did not stop within %d ms of SIGTERM: killed", (long)a->pid,
             AGENT_STOP_MS);
        agent_log_tail(a);
    } else if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        char s[48];
        status_text(status, s, sizeof s);
        FAIL("agent (pid %ld) ended with %s after SIGTERM", (long)a->pid, s);
        agent_log_tail(a);
    }
    a->pid = 0;
}

/* The agent has epoch e in its state, nobody behind, and its etcd
 * requests moved since `before` and were then still for SETTLE_MS. */
static bool agent_settle(const agent_proc *a, uint64_t e, unsigned nprocs, double before)
{
    uint64_t end = bench_now_ns() + (uint64_t)SETTLE_MAX_MS * 1000000u, still = 0;
    agent_metrics m;
    double last = -1;
    for (;;) {
        if (!agent_read_metrics(a, &m))
            return false;
        uint64_t now = bench_now_ns();
        bool caught_up = m.state_epoch >= (double)e && m.behind == 0 &&
                         (m.total < 0 || m.total >= nprocs);
        if (m.requests != last) {
            last = m.requests;
            still = now;
        } else if (caught_up && m.requests > before &&
                   now - still >= (uint64_t)SETTLE_MS * 1000000u) {
            return true;
        }
        if (now >= end) {
            if (!caught_up) {
                FAIL("agent: epoch %" PRIu64 " not settled in %d ms: state epoch %.0f, %.0f of "
                     "%.0f processes behind",
                     e, SETTLE_MAX_MS, m.state_epoch, m.behind, m.total);
                return false;
            }
            printf("INFO agent: epoch %" PRIu64 ": its requests not still for %d ms within %d "
                   "ms\n", e, SETTLE_MS, SETTLE_MAX_MS);
            return true;
        }
        bench_sleep_ms(SETTLE_POLL_MS);
    }
}

static void agent_run(void)
{
    agent_proc a;
    memset(&a, 0, sizeof a);
    procs p;
    procs_init(&p, "agent follower", "", opt.procs, WARMUP + opt.changes, 0);
    if (!agent_start(&a))
        goto out;
    mcr_state_info info;
    mcr_error err = {0};
    if (mcr_state_read(a.path, &info, &err) != MCR_OK) {
        FAIL("agent: mcr_state_read: %s", err.message);
        goto out;
    }
    p.base_gen = info.generation;
    mcr_state_info_clear(&info);
    snprintf(p.path, sizeof p.path, "%s", a.path);
    printf("INFO agent %s pid %ld, metrics on port %d, state %s\n", MCR_BENCH_CLI, (long)a.pid,
           a.metrics_port, a.path);
    if (!procs_start(&p))
        goto out;
    for (unsigned k = 0; k < WARMUP + opt.changes; k++) {
        fe_call_counts before;
        agent_metrics m;
        uint64_t e;
        char what[48];
        if (!agent_read_metrics(&a, &m) || !fe_calls(&E, &before) || !pool_change(&e))
            goto out;
        snprintf(what, sizeof what, "etcd change %u", k);
        if (!procs_wait(&p, 0, e, CHANGE_WAIT_MS, what) ||
            !agent_settle(&a, e, p.n, m.requests))
            goto out;
        if (k >= WARMUP && !run_count(&run_agent, &before, "agent", k))
            goto out;
    }
    run_agent.members = p.n;
    run_agent.done = true;
out:
    procs_stop(&p);
    procs_free(&p);
    agent_stop(&a);
}

/* -------- (ii) direct followers */

typedef struct direct {
    mcr_router *router;
    mcr_fleet *fleet;
    atomic_bool connected;
    atomic_uint refused, disconnected;
    uint64_t req0, last, still; /* settle(): requests at the change, last seen, since when */
    bool settled;
} direct;

static struct {
    direct *d;
    unsigned n, started;
    atomic_uint connected;
} D;

static void on_event(const mcr_fleet_event *ev, void *arg)
{
    direct *d = arg;
    switch (ev->kind) {
    case MCR_FLEET_CONNECTED:
        if (!atomic_exchange(&d->connected, true))
            atomic_fetch_add(&D.connected, 1);
        break;
    case MCR_FLEET_REFUSED:
        atomic_fetch_add(&d->refused, 1);
        break;
    case MCR_FLEET_DISCONNECTED:
        atomic_fetch_add(&d->disconnected, 1);
        break;
    default:
        break;
    }
}

/* Enough descriptors: each follower keeps two connections (requests, the
 * watch), each writer call one. */
static void raise_fd_limit(unsigned followers)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)(3 * followers + 64);
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need) {
        rl.rlim_cur = need < rl.rlim_max ? need : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        if (rl.rlim_cur < need)
            printf("INFO only %llu file descriptors for %llu wanted\n",
                   (unsigned long long)rl.rlim_cur, (unsigned long long)need);
    }
}

static bool direct_start(void)
{
    uint64_t t0 = bench_now_ns();
    D.d = calloc(D.n, sizeof *D.d);
    if (D.d == NULL) {
        FAIL("direct followers: out of memory");
        return false;
    }
    for (; D.started < D.n; D.started++) {
        direct *d = &D.d[D.started];
        mcr_error err = {0};
        char id[32];
        snprintf(id, sizeof id, "direct-%u", D.started);
        mcr_fleet_follow_options fo = {.client_id = id, .on_event = on_event, .arg = d};
        if (mcr_router_new(NULL, &d->router, &err) != MCR_OK ||
            mcr_fleet_follow(&fopts, &fo, d->router, &d->fleet, &err) != MCR_OK) {
            FAIL("direct follower %u: %s", D.started, err.message);
            if (d->router != NULL && d->fleet == NULL) {
                mcr_router_free(d->router);
                d->router = NULL;
            }
            return false;
        }
    }
    uint64_t end = bench_now_ns() + (uint64_t)CHANGE_WAIT_MS * 1000000u;
    while (atomic_load(&D.connected) < D.n && bench_now_ns() < end)
        bench_sleep_ms(5);
    if (atomic_load(&D.connected) < D.n) {
        FAIL("direct followers: %u of %u watches established in %d ms",
             atomic_load(&D.connected), D.n, CHANGE_WAIT_MS);
        return false;
    }
    printf("INFO %u direct followers (mcr_fleet_follow, a router and a thread each) connected "
           "in %.0f ms\n",
           D.n, (double)(bench_now_ns() - t0) / 1e6);
    return true;
}

/* Every follower has epoch e (at most CHANGE_WAIT_MS), and its request
 * counter moved since the change and then stayed still for SETTLE_MS (its
 * registration written; at most SETTLE_MAX_MS). */
static bool direct_settle(uint64_t e, const char *change)
{
    uint64_t t0 = bench_now_ns(), end = t0 + (uint64_t)CHANGE_WAIT_MS * 1000000u;
    uint64_t settle_end = 0;
    unsigned settled = 0;
    for (unsigned i = 0; i < D.n; i++) {
        D.d[i].settled = false;
        D.d[i].last = D.d[i].req0;
        D.d[i].still = t0;
    }
    for (;;) {
        unsigned adopted = 0;
        uint64_t now = bench_now_ns();
        for (unsigned i = 0; i < D.n; i++) {
            direct *d = &D.d[i];
            mcr_fleet_stats st;
            if (d->settled) {
                adopted++;
                continue;
            }
            mcr_fleet_get_stats(d->fleet, &st);
            if (st.epoch < e)
                continue;
            adopted++;
            if (st.requests != d->last) {
                d->last = st.requests;
                d->still = now;
            } else if (st.requests > d->req0 && now - d->still >= (uint64_t)SETTLE_MS * 1000000u) {
                d->settled = true;
                settled++;
            }
        }
        if (settled == D.n)
            return true;
        if (adopted == D.n && settle_end == 0)
            settle_end = now + (uint64_t)SETTLE_MAX_MS * 1000000u;
        if (settle_end != 0 && now >= settle_end) {
            printf("INFO direct followers: %s: %u of %u settled within %d ms of adopting\n",
                   change, settled, D.n, SETTLE_MAX_MS);
            return true;
        }
        if (adopted < D.n && now >= end) {
            FAIL("direct followers: %s (epoch %" PRIu64 ") adopted by %u of %u in %d ms", change,
                 e, adopted, D.n, CHANGE_WAIT_MS);
            return false;
        }
        bench_sleep_ms(SETTLE_POLL_MS);
    }
}

static void direct_run(void)
{
    D.n = opt.direct;
    raise_fd_limit(D.n);
    if (!direct_start())
        goto out;
    for (unsigned k = 0; k < WARMUP + opt.changes; k++) {
        fe_call_counts before;
        uint64_t e;
        char what[48];
        for (unsigned i = 0; i < D.n; i++) {
            mcr_fleet_stats st;
            mcr_fleet_get_stats(D.d[i].fleet, &st);
            D.d[i].req0 = st.requests;
        }
        if (!fe_calls(&E, &before) || !pool_change(&e))
            goto out;
        snprintf(what, sizeof what, "etcd change %u", k);
        if (!direct_settle(e, what))
            goto out;
        if (k >= WARMUP && !run_count(&run_direct, &before, "direct", k))
            goto out;
    }
    run_direct.members = D.n;
    run_direct.done = true;
out:;
    unsigned refused = 0, disconnected = 0;
    uint64_t t0 = bench_now_ns();
    for (unsigned i = 0; i < D.started; i++) {
        refused += atomic_load(&D.d[i].refused);
        disconnected += atomic_load(&D.d[i].disconnected);
        mcr_fleet_free(D.d[i].fleet); /* joins its thread, deletes its client key */
        mcr_router_free(D.d[i].router);
    }
    if (D.started)
        printf("INFO direct followers stopped in %.0f ms; %u disconnects\n",
               (double)(bench_now_ns() - t0) / 1e6, disconnected);
    if (refused)
        FAIL("direct followers: %u values refused", refused);
    free(D.d);
    D.d = NULL;
}

/* -------- the report */

/* etcd's calls per change of a run less the writer's (alone). */
static double besides_writer(const etcd_run *r)
{
    return (r->sum.total - run_writer.sum.total / run_writer.changes * r->changes) / r->changes;
}

static void run_result(const char *name, const etcd_run *r, const char *members)
{
    double K = r->changes;
    printf("RESULT %s %s=%u changes=%u calls_per_change=%.2f", name, members, r->members,
           r->changes, r->sum.total / K);
    if (r != &run_writer)
        printf(" besides_writer=%.2f", besides_writer(r));
    printf(" min=%.0f max=%.0f", r->min, r->max);
    for (int i = 0; i < FE_M_N; i++)
        printf(" %s=%.2f", fe_call_names[i], r->sum.n[i] / K);
    printf("\n");
}

static void etcd_report(void)
{
    if (run_writer.done)
        run_result("etcd_writer_alone", &run_writer, "followers");
    if (run_agent.done)
        run_result("etcd_agent", &run_agent, "procs");
    if (run_direct.done)
        run_result("etcd_direct", &run_direct, "followers");
    if (!run_writer.done)
        return;
    if (run_agent.done && run_direct.done) {
        double a = besides_writer(&run_agent), d = besides_writer(&run_direct);
        printf("RESULT etcd_direct_over_agent ratio=%.1f total_ratio=%.1f (calls per change "
               "besides the writer's, and in all)\n",
               a > 0 ? d / a : 0.0, run_direct.sum.total / run_agent.sum.total);
    }
    if (run_direct.done) {
        double d = besides_writer(&run_direct);
        printf("INFO direct followers: %.2f etcd calls per change besides the writer's %.2f, "
               "%.3f per follower (%u followers; Put %.2f, LeaseKeepAlive %.2f per change)\n",
               d, run_writer.sum.total / run_writer.changes, d / run_direct.members,
               run_direct.members, run_direct.sum.n[FE_M_PUT] / run_direct.changes,
               run_direct.sum.n[FE_M_KEEPALIVE] / run_direct.changes);
    }
}

static void etcd_part(void)
{
    if (MCR_BENCH_CLI[0] == '\0')
        agent_skipped = "this build has no mcroute CLI, the target mcroute_cli: see the "
                        "parts the configure lists";
    else if (!rs_executable(MCR_BENCH_CLI))
        agent_skipped = "the mcroute CLI is not built yet: " MCR_BENCH_CLI;
    if (!fe_start(&E, &failures))
        return;
    mcr_fleet_options_init(&fopts);
    fopts.endpoints = E.endpoint;
    fopts.pool = POOL;
    printf("INFO etcd %s pid %ld dir %s\n", E.endpoint, (long)E.proc.pid, E.dir);
    if (pool_create() && writer_alone()) {
        if (agent_skipped != NULL)
            printf("INFO etcd (i) mcroute agent: skipped: %s\n", agent_skipped);
        else
            agent_run();
        if (failures == 0)
            direct_run();
    }
    etcd_report();
    fe_stop(&E, opt.keep);
}

/* ------------------------------------------------------------ 4. size */

typedef struct rss_report {
    _Atomic int done; /* 1 done, -1 failed */
    long rss[3], shmem[3], threads[3];
    char msg[200];
} rss_report;

/* Measured after the hot path (before this process has liburcu's call_rcu
 * thread, which a forked child would start again), reported in 4. */
static struct {
    unsigned servers;
    rss_report r;
} memory[2];

static void size_files(const char *name, const char *what)
{
    char path[600], shm[620];
    path_of(path, sizeof path, name);
    snprintf(shm, sizeof shm, "%s.shm", path);
    long s = file_size(path), m = file_size(shm), ma = file_allocated(shm);
    if (s >= 0 && m >= 0)
        printf("INFO size %s: state file %ld bytes, PATH.shm %ld bytes (%ld allocated)\n", what,
               s, m, ma);
}

/* A child forked from here: VmRSS, RssShmem and threads before
 * mcr_router_new_from_state() of the hot path's state of `servers`, after
 * it and after its first lookup, into memory[which]. */
static void size_memory(unsigned which, unsigned servers)
{
    char file[32], path[600];
    snprintf(file, sizeof file, "hot%u", servers);
    path_of(path, sizeof path, file);
    memory[which].servers = servers;
    if (file_size(path) < 0)
        return; /* the hot path failed */
    rss_report *r = mmap(NULL, sizeof *r, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                         -1, 0);
    if (r == MAP_FAILED) {
        FAIL("size: mmap: %s", strerror(errno));
        return;
    }
    memset(r, 0, sizeof *r);
    pid_t parent = getpid();
    fork_prepare();
    pid_t pid = fork();
    if (pid == 0) {
        fork_child();
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        mcr_router *rt = NULL;
        mcr_error err = {0};
        r->rss[0] = proc_status(0, "VmRSS");
        r->shmem[0] = proc_status(0, "RssShmem");
        r->threads[0] = proc_status(0, "Threads");
        if (mcr_router_new_from_state(path, 0, &rt, &err) != MCR_OK) {
            snprintf(r->msg, sizeof r->msg, "%.190s", err.message);
            atomic_store(&r->done, -1);
            _exit(3);
        }
        r->rss[1] = proc_status(0, "VmRSS");
        r->shmem[1] = proc_status(0, "RssShmem");
        r->threads[1] = proc_status(0, "Threads");
        g_sink += mcr_router_locate_index(rt, "key", 3, NULL);
        r->rss[2] = proc_status(0, "VmRSS");
        r->shmem[2] = proc_status(0, "RssShmem");
        r->threads[2] = proc_status(0, "Threads");
        mcr_router_free(rt);
        atomic_store(&r->done, 1);
        _exit(0);
    }
    int fork_errno = errno;
    fork_parent();
    if (pid < 0) {
        FAIL("size: fork: %s", strerror(fork_errno));
    } else {
        if (wait_pid_ms(pid, STOP_MS) == -1) {
            kill(pid, SIGKILL);
            wait_pid_ms(pid, STOP_MS);
        }
        if (atomic_load(&r->done) != 1)
            FAIL("size: the child failed: %s", r->done == -1 ? r->msg : "no report");
        memcpy(&memory[which].r, r, sizeof *r);
    }
    munmap(r, sizeof *r);
}

static void size_part(void)
{
    size_files("hot10", "10 servers (hot path)");
    size_files("hot100", "100 servers (hot path)");
    char what[64];
    snprintf(what, sizeof what, "%d-%d servers (adoption)", POOL_SERVERS, POOL_SERVERS + 1);
    size_files("adopt", what);
    if (run_agent.done)
        size_files("agent", "the agent's");
    for (unsigned i = 0; i < 2; i++) {
        const rss_report *r = &memory[i].r;
        if (atomic_load(&r->done) != 1)
            continue;
        printf("INFO size a follower process of %u servers (forked from this one): VmRSS %ld kB "
               "before mcr_router_new_from_state(), %ld kB after (+%ld kB, of which RssShmem "
               "+%ld kB), %ld kB after its first lookup (+%ld kB); threads %ld, %ld, %ld\n",
               memory[i].servers, r->rss[0], r->rss[1], r->rss[1] - r->rss[0],
               r->shmem[1] - r->shmem[0], r->rss[2], r->rss[2] - r->rss[0], r->threads[0],
               r->threads[1], r->threads[2]);
    }
}

/* ------------------------------------------------------------ main */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench_state [options]\n"
            "A host's shared state (mcroute_state.h), in one run:\n"
            "  1. lookups (mcr_router_locate_index) through a router fed from a state against\n"
            "     a plain router on the same snapshot (ketama, 10 and 100 servers);\n"
            "  2. P follower processes forked from here adopting K changes written here:\n"
            "     from the write to the adoption, and the adopting call's own time;\n"
            "  3. etcd's calls per change (a real etcd): `mcroute agent` with P state\n"
            "     followers, against P direct followers (mcr_fleet_follow) in this process;\n"
            "  4. the state's size and a follower process's memory.\n"
            "  --quick          %u processes, %u direct followers, %u changes, fewer keys: a\n"
            "                   smoke run\n"
            "  --procs N        follower processes (default 1000, at most %d)\n"
            "  --direct N       direct etcd followers (default 1000, at most %d)\n"
            "  --changes K      timed changes in 2 and 3 (default 20; %d untimed first)\n"
            "  --gap-ms G       a follower's pause between calls (default 20)\n"
            "  --pause-ms W     in 2, the rest between a change adopted by every follower\n"
            "                   and the next, plus 0..G ms (default 200; --quick 50; 0:\n"
            "                   back to back)\n"
            "  --verbose        one line per change\n"
            "  --keep           keep the states' directory and etcd's (data and log)\n"
            "Output: INFO, RESULT and GOAL lines. Exit status 1 when a change is not adopted\n"
            "or refused, or the setup fails, never because of speed; 77 when etcd is\n"
            "missing.\n",
            50u, 50u, 10u, PROCS_MAX, DIRECT_MAX, WARMUP);
}

static void parse_args(int argc, char **argv)
{
    bool p_given = false, d_given = false, c_given = false, p_pause = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0) {
            opt.quick = true;
        } else if (strcmp(a, "--verbose") == 0) {
            opt.verbose = true;
        } else if (strcmp(a, "--keep") == 0) {
            opt.keep = true;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (v != NULL && strcmp(a, "--procs") == 0) {
            opt.procs = bench_arg_uint("bench_state", a, v, 1, PROCS_MAX);
            p_given = true;
            i++;
        } else if (v != NULL && strcmp(a, "--direct") == 0) {
            opt.direct = bench_arg_uint("bench_state", a, v, 1, DIRECT_MAX);
            d_given = true;
            i++;
        } else if (v != NULL && strcmp(a, "--changes") == 0) {
            opt.changes = bench_arg_uint("bench_state", a, v, 1, 10000);
            c_given = true;
            i++;
        } else if (v != NULL && strcmp(a, "--gap-ms") == 0) {
            opt.gap_ms = bench_arg_uint("bench_state", a, v, 0, 60000);
            i++;
        } else if (v != NULL && strcmp(a, "--pause-ms") == 0) {
            opt.pause_ms = bench_arg_uint("bench_state", a, v, 0, 60000);
            p_pause = true;
            i++;
        } else {
            fprintf(stderr, "bench_state: unknown argument '%s'%s\n", a,
                    v == NULL && strncmp(a, "--", 2) == 0 ? " (or its value is missing)" : "");
            usage(stderr);
            exit(2);
        }
    }
    if (opt.quick) {
        if (!p_given)
            opt.procs = 50;
        if (!d_given)
            opt.direct = 50;
        if (!c_given)
            opt.changes = 10;
        if (!p_pause)
            opt.pause_ms = 50;
    }
    opt.nkeys = opt.quick ? KEYS_QUICK : KEYS_FULL;
    opt.reps = opt.quick ? REPS_QUICK : REPS_FULL;
    opt.writer_changes = opt.quick ? WRITER_CHANGES_QUICK : WRITER_CHANGES_FULL;
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

/* The states' directory: its files, then itself. */
static void remove_dir(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[600];
    while (d != NULL && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) != 0)
            fprintf(stderr, "bench_state: remove %s: %s\n", path, strerror(errno));
    }
    if (d != NULL)
        closedir(d);
    if (rmdir(dir) != 0)
        fprintf(stderr, "bench_state: remove %s: %s\n", dir, strerror(errno));
}

/* At exit (also fe_start()'s exit 77): the directory goes unless kept. */
static void cleanup(void)
{
    if (!opt.keep && failures == 0)
        remove_dir();
}

static void goals(void)
{
    if (speed_goal.reported < speed_goal.cases)
        printf("GOAL state_lookup_speed target=%.3fx measured=none MISS (a case failed)\n",
               GOAL_SPEED);
    else
        printf("GOAL state_lookup_speed target=%.3fx measured=%.3fx %s (the worse of %u cases: "
               "%s)\n",
               GOAL_SPEED, speed_goal.worst, speed_goal.worst >= GOAL_SPEED ? "PASS" : "MISS",
               speed_goal.reported, speed_goal.worst_case);
    if (!adopt_goal.done)
        printf("GOAL state_adopt_call_p99 target=<=%.3fms measured=none MISS (the run failed)\n",
               GOAL_ADOPT_P99_MS);
    else
        printf("GOAL state_adopt_call_p99 target=<=%.3fms measured=%.3fms %s (a change visible "
               "to a process within 1 ms of its next call; %u processes)\n",
               GOAL_ADOPT_P99_MS, adopt_goal.call.p99,
               adopt_goal.call.p99 <= GOAL_ADOPT_P99_MS ? "PASS" : "MISS", opt.procs);
    if (agent_skipped != NULL)
        printf("GOAL agent_etcd_calls_per_change target=<=%.0f measured=none NOT RUN (%s)\n",
               GOAL_AGENT_CALLS, agent_skipped);
    else if (!run_agent.done || !run_writer.done)
        printf("GOAL agent_etcd_calls_per_change target=<=%.0f measured=none MISS (the run "
               "failed)\n",
               GOAL_AGENT_CALLS);
    else {
        double a = besides_writer(&run_agent);
        printf("GOAL agent_etcd_calls_per_change target=<=%.0f measured=%.2f %s (etcd's calls "
               "per change besides mcr_fleet_change()'s own %.2f; %u processes behind the "
               "agent)\n",
               GOAL_AGENT_CALLS, a, a <= GOAL_AGENT_CALLS ? "PASS" : "MISS",
               run_writer.sum.total / run_writer.changes, run_agent.members);
    }
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    setvbuf(stdout, NULL, _IOLBF, 0);
    uint64_t t0 = bench_now_ns();
    printf("INFO setup procs=%u direct=%u changes=%u warmup=%d gap_ms=%u pause_ms=%u keys=%zu "
           "reps=%u pool_servers=%d build_type=%s mcroute=%s cli=%s\n",
           opt.procs, opt.direct, opt.changes, WARMUP, opt.gap_ms, opt.pause_ms, opt.nkeys,
           opt.reps, POOL_SERVERS, MCR_BENCH_BUILD_TYPE, mcr_version_string(),
           MCR_BENCH_CLI[0] ? MCR_BENCH_CLI : "none");
    print_load("before");
    snprintf(dir, sizeof dir, "/dev/shm/bench_state.XXXXXX");
    if (mkdtemp(dir) == NULL) {
        printf("FAIL setup: mkdtemp %s: %s\n", dir, strerror(errno));
        return 1;
    }
    printf("INFO states in %s\n", dir);
    atexit(cleanup);

    hot_path();
    size_memory(0, 10);
    size_memory(1, 100);
    adoption();
    etcd_part();
    size_part();
    goals();

    print_load("after");
    if (opt.keep || failures)
        printf("INFO kept %s\n", dir);
    printf("INFO run took %.1f s\n", (double)(bench_now_ns() - t0) / 1e9);
    if (failures)
        printf("FAILED %d problem(s), see the FAIL lines\n", failures);
    return failures ? 1 : 0;
}
