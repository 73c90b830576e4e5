/* SPDX-License-Identifier: BSD-3-Clause */
/* test_migrate_checker.c: a checker under real load across mcroute migrate --etcd, faults included: processes of a fleet write and read thousands of keys through pools that follow the pool in etcd while the migration runs; no read may return a value older than the last acknowledged write, and no acknowledged value may go missing, during the migration or after it. */
/*
 * Each test: a three-member etcd cluster, five memcached servers on
 * loopback (-m 64: nothing is evicted), the pool "ck" on four of them or
 * on all five, and NPROCS processes forked from the test (each its own
 * mcr_fleet_follow(), router and mcr_pool, registered in etcd as ck-N:
 * checker_traffic.c). Key k is written by process k % NPROCS only, so the
 * writes of a key have one order; every write is recorded in a model
 * shared by the processes (checker_model.c): what each version leaves,
 * which is acknowledged. Every read, by any process and in whichever
 * phase it is, is checked against it: a value older than the last write
 * acknowledged when the read was sent is an older value, a miss where that
 * write left a value a missing key. Writes check too (a delete finding
 * nothing, an add finding a value, an incr counting from an older number).
 * A write that failed makes its key uncertain: its writer leaves it alone
 * and reads accept its last acknowledged value, the failed write's, or a
 * miss (counted: "uncertain"; at most 5% of the keys, or the test fails).
 *
 * Once every process has written its keys, `mcroute migrate --etcd
 * ENDPOINTS --pool ck --rate R --grace G NEW` runs (4 -> 5 or 5 -> 4
 * servers), the rate set so that the copy takes the mode's copy time
 * times the time scale, the grace 1 s; the test's fault lands during the
 * copy (on an event: the migration record's progress in etcd, once a fifth
 * of the moved keys are copied):
 *   kill_migrate      the run killed with SIGKILL, then run again;
 *   stop_source       a server keys are copied from stopped (SIGSTOP) for
 *                     STOP_MS, then SIGCONT; the run may fail and is run
 *                     again; writes to it fail meanwhile (uncertain keys);
 *   kill_etcd_leader  the etcd leader killed, a new one waited for, the
 *                     member restarted; a run that fails is run again;
 *   no_fault          none.
 * The traffic goes on through the switch, the grace period and past the
 * end, until the mode's number of acknowledged writes. Then every key is
 * read through a fresh follower and directly from its owner. One line
 * gives the counts ("checker NAME: ..."); the test asserts 0 older values
 * and 0 missing keys, and that the traffic and the fault did happen
 * during the copy.
 *
 * Modes (the traffic is not throttled: each process keeps 32 requests in
 * flight, and on 2 cores a test makes about a million acknowledged
 * writes; the counts below are floors, the traffic going on past the
 * migration's end until they are reached):
 *   short (default; CI): 3,000 keys, a copy of about 6 s (times the time
 *     scale), at least 50,000 acknowledged writes per test (about
 *     1,000,000 in practice); 10-17 s a test, about a minute for the suite
 *     on 2 cores.
 *   long: MCR_CHECKER_LONG=1 build/test/test_migrate_checker (run the
 *     binary: ctest's timeout is made for the short mode): 10,000 keys, a
 *     copy of about 40 s, at least 260,000 acknowledged writes per test,
 *     over 1,000,000 for the suite (about 6,000,000 a test in practice);
 *     about a minute a test.
 *   CK_RUN_CASE=NAME runs one test (tu_add_cases: one TCase per test);
 *   MCR_TEST_SEED changes the traffic's random choices.
 * The processes' notes (the first violations each met, with key, version,
 * phase, server and epoch) follow the counts.
 */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checker_model.h"
#include "checker_traffic.h"
#include "etcdserver.h"
#include "fleet_env.h"
#include "mcroute_fleet.h"
#include "mcroute_pool.h"
#include "realserver.h"
#include "testutil.h"

#define POOL "ck"
#define NSERVERS 5
#define NPROCS 3
#define ETCD_MEMBERS 3
#define STOP_MS 3000     /* how long stop_source keeps the server stopped */
#define POST_MS 1000     /* traffic after the migration is done, at least */
#define MAX_RUNS 6       /* mcroute migrate runs of one migration */
#define SEE_MS mcr_test_ms(30000)

typedef struct mode {
    uint32_t keys;
    double copy_s;    /* the copy's length at time scale 1 */
    uint64_t writes;  /* acknowledged writes per test, at least */
    unsigned depth;   /* requests in flight per process */
    double timeout_s; /* a test's Check timeout */
} mode;

static const mode g_short = {3000, 6.0, 50000, 32, 300};
static const mode g_long = {10000, 40.0, 260000, 32, 1800};
static mode g_mode;

typedef enum fault { F_NONE, F_KILL_MIGRATE, F_STOP_SOURCE, F_KILL_LEADER } fault;

/* What the teardown stops when an assertion cut the test short. */
static es_cluster *g_etcd;
static rs_proc g_mc[NSERVERS];
static char *g_dir;
static pid_t g_kids[NPROCS + 1]; /* the traffic processes and a migrate run */
static ck_table *g_table;

static void release(void);

static void teardown(void)
{
    for (int i = 0; i <= NPROCS; i++)
        if (g_kids[i] > 0) {
            kill(g_kids[i], SIGKILL);
            waitpid(g_kids[i], NULL, 0);
            g_kids[i] = 0;
        }
    es_free(g_etcd);
    g_etcd = NULL;
    rs_stop_all();
    ck_table_free(g_table);
    g_table = NULL;
    tu_tmpdir_free(g_dir);
    g_dir = NULL;
    release();
}

/* One test's setting and what it counted. */
typedef struct ctx {
    const char *name;
    fault fault;
    int grow; /* 1: 4 -> 5 servers; 0: 5 -> 4 */
    mcr_fleet_options o;
    char ep[512], from_list[256], to_list[256];
    mcr_snapshot *from, *to;
    uint8_t *from_mc, *to_mc; /* per key: its owner before and after (memcached number) */
    uint32_t moved;           /* keys the migration moves */
    ck_table *t;
    int64_t t0;
    int runs;                 /* mcroute migrate runs */
    char fired[300];          /* what the fault did, "" until it did */
    uint64_t copied, skipped; /* the record's progress at the end */
    int64_t done_ms;
    uint64_t final_older, final_missing, owner_older, owner_missing, final_errors;
} ctx;

static ctx g_x; /* the test's, released by the teardown */

static const char *phase_name(int p)
{
    return mcr_migration_phase_name((mcr_migration_phase)p);
}

/* ------------------------------------------------------------ the setting */

static int mc_of_port(int port)
{
    for (int i = 0; i < NSERVERS; i++)
        if (g_mc[i].port == port)
            return i;
    ck_abort_msg("no memcached of the test listens on port %d", port);
    return -1;
}

static uint8_t owner(const mcr_snapshot *s, uint32_t k)
{
    char key[24];
    size_t n = ck_key_name(k, key, sizeof(key));
    mcr_server_desc d;
    ck_assert_int_eq(mcr_snapshot_server(s, mcr_snapshot_locate(s, key, n), &d), MCR_OK);
    return (uint8_t)mc_of_port(d.port);
}

/* etcd, the memcached servers, the pool on FROM, and TO as the migration
 * will compute it; each key's owners in both. */
static void setup(ctx *x)
{
    mcr_error err = {0};
    g_dir = tu_tmpdir("ckr");
    g_etcd = es_start(ETCD_MEMBERS, "ckr");
    ck_assert_msg(g_etcd != NULL, "es_start: %s", es_last_error());
    ck_assert_msg(es_leader(g_etcd, mcr_test_ms(15000)) >= 0, "%s", es_last_error());
    snprintf(x->ep, sizeof(x->ep), "%s", es_endpoints(g_etcd));
    char l4[200] = "", l5[256];
    size_t a = 0;
    for (int i = 0; i < NSERVERS; i++) {
        ck_assert_msg(rs_memcached_start(&g_mc[i], "127.0.0.1", 0, NULL, mcr_test_ms(10000)) == 0,
                      "memcached %d did not start", i);
        if (i < 4)
            a += (size_t)snprintf(l4 + a, sizeof(l4) - a, "%s127.0.0.1:%d", i ? "," : "",
                                  g_mc[i].port);
    }
    snprintf(l5, sizeof(l5), "%s,127.0.0.1:%d", l4, g_mc[4].port);
    snprintf(x->from_list, sizeof(x->from_list), "%s", x->grow ? l4 : l5);
    snprintf(x->to_list, sizeof(x->to_list), "%s", x->grow ? l5 : l4);
    fe_options(&x->o, x->ep, POOL);
    ck_assert_uint_eq(fe_publish(&x->o, x->from_list), 1);

    mcr_config *cfg = fe_config(x->to_list);
    mcr_snapshot *target = NULL;
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &target, &err), MCR_OK);
    mcr_config_free(cfg);
    mcr_migration m;
    int rc = mcr_fleet_migration_plan(&x->o, target, 0, &m, &err);
    mcr_snapshot_unref(target);
    ck_assert_msg(rc == MCR_OK, "plan: %s", err.message);
    x->from = mcr_snapshot_ref(m.from);
    x->to = mcr_snapshot_ref(m.to);
    mcr_migration_clear(&m);

    x->from_mc = malloc(g_mode.keys);
    x->to_mc = malloc(g_mode.keys);
    ck_assert(x->from_mc != NULL && x->to_mc != NULL);
    for (uint32_t k = 0; k < g_mode.keys; k++) {
        x->from_mc[k] = owner(x->from, k);
        x->to_mc[k] = owner(x->to, k);
        x->moved += x->from_mc[k] != x->to_mc[k];
    }
    x->t = g_table = ck_table_new(g_mode.keys, NPROCS);
}

static void release(void)
{
    mcr_snapshot_unref(g_x.from);
    mcr_snapshot_unref(g_x.to);
    free(g_x.from_mc);
    free(g_x.to_mc);
    memset(&g_x, 0, sizeof(g_x));
}

/* ------------------------------------------------------------ processes */

static void start_traffic(ctx *x)
{
    fflush(NULL);
    for (int i = 0; i < NPROCS; i++) {
        ck_traffic_cfg c = {
            .table = x->t,
            .proc = i,
            .endpoints = x->ep,
            .pool = POOL,
            .to = x->to,
            .from_mc = x->from_mc,
            .to_mc = x->to_mc,
            .depth = g_mode.depth,
            .read_pct = 40,
            .request_timeout_ms = (unsigned)mcr_test_ms(2000),
            .slow_ms = (unsigned)mcr_test_ms(300),
            .seed = tu_seed() * 31 + (uint64_t)i + 1,
        };
        pid_t parent = getpid(), pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(127);
            _exit(ck_traffic_run(&c));
        }
        g_kids[i] = pid;
    }
}

/* Abort when a traffic process has exited. */
static void check_traffic(ctx *x)
{
    for (int i = 0; i < NPROCS; i++) {
        int st;
        if (g_kids[i] > 0 && waitpid(g_kids[i], &st, WNOHANG) == g_kids[i]) {
            g_kids[i] = 0;
            ck_abort_msg("traffic process %d ended early (%s %d): %s", i,
                         WIFEXITED(st) ? "status" : "signal",
                         WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
                         x->t->error[i][0] ? x->t->error[i] : "no message");
        }
    }
}

static void stop_traffic(ctx *x)
{
    atomic_store(&x->t->stop, 1);
    int64_t end = mcr_test_now_ms() + SEE_MS;
    for (int i = 0; i < NPROCS; i++) {
        int st = 0;
        for (;;) {
            pid_t r = waitpid(g_kids[i], &st, WNOHANG);
            if (r == g_kids[i])
                break;
            ck_assert_msg(mcr_test_now_ms() < end, "traffic process %d did not stop", i);
            fe_nap();
        }
        g_kids[i] = 0;
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "traffic process %d: %s %d: %s", i,
                      WIFEXITED(st) ? "status" : "signal",
                      WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), x->t->error[i]);
    }
}

static uint64_t acked_writes(const ctx *x)
{
    ck_totals tot;
    ck_sum(x->t, &tot);
    return tot.writes;
}

/* Every process has written its keys once and is registered. */
static void wait_ready(ctx *x)
{
    int64_t end = mcr_test_now_ms() + SEE_MS;
    for (;;) {
        check_traffic(x);
        if (atomic_load(&x->t->ready) == NPROCS) {
            mcr_fleet_client *cl = NULL;
            size_t n = 0;
            mcr_error err;
            if (mcr_fleet_clients(&x->o, &cl, &n, &err) == MCR_OK) {
                mcr_fleet_clients_free(cl, n);
                if (n == NPROCS)
                    return;
            }
        }
        ck_assert_msg(mcr_test_now_ms() < end, "the traffic processes were not ready: %d of %d",
                      atomic_load(&x->t->ready), NPROCS);
        fe_nap();
    }
}

/* ------------------------------------------------------------ the migration */

static pid_t start_migrate(ctx *x)
{
    char rate[32], grace[32], wait[32], timeout[32], log[600];
    double scale = mcr_test_time_scale();
    snprintf(rate, sizeof(rate), "%.3f", x->moved / (g_mode.copy_s * scale));
    snprintf(grace, sizeof(grace), "%.3f", mcr_test_sec(1.0));
    snprintf(wait, sizeof(wait), "%.3f", mcr_test_sec(30.0));
    snprintf(timeout, sizeof(timeout), "%d", mcr_test_ms(1000));
    snprintf(log, sizeof(log), "%s/migrate-%d.log", g_dir, ++x->runs);
    const char *argv[] = {"mcroute", "migrate", "--etcd", x->ep, "--pool", POOL, "--rate", rate,
                          "--grace", grace, "--wait", wait, "--timeout", timeout, x->to_list,
                          NULL};
    fflush(NULL);
    pid_t parent = getpid(), pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int in = open("/dev/null", O_RDONLY);
        int out = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (in < 0 || out < 0)
            _exit(126);
        dup2(in, 0);
        dup2(out, 1);
        dup2(out, 2);
        execv(tu_cli_path(), (char *const *)argv);
        _exit(127);
    }
    g_kids[NPROCS] = pid;
    return pid;
}

static const char *run_log(ctx *x)
{
    static char *text;
    char log[600];
    free(text);
    snprintf(log, sizeof(log), "%s/migrate-%d.log", g_dir, x->runs);
    text = tu_read_file(log, NULL);
    return text;
}

/* The memcached a record's message "copying: 127.0.0.1:PORT" names, or -1. */
static int copying_from(const mcr_migration *m)
{
    const char *c = strrchr(m->message, ':');
    if (m->phase != MCR_MIGRATION_COPYING || strncmp(m->message, "copying: ", 9) != 0 ||
        c == NULL)
        return -1;
    int port = atoi(c + 1);
    for (int i = 0; i < NSERVERS; i++)
        if (g_mc[i].port == port)
            return i;
    return -1;
}

/* The fault, now that the copy is under way (m: the record). */
static void fire(ctx *x, pid_t *pid, const mcr_migration *m, int *stopped, int64_t *cont_at)
{
    unsigned long long copied = m->progress.copied, moved = m->progress.moved;
    switch (x->fault) {
    case F_KILL_MIGRATE: {
        kill(*pid, SIGKILL);
        waitpid(*pid, NULL, 0);
        g_kids[NPROCS] = *pid = 0;
        mcr_migration r;
        mcr_error err;
        ck_assert_int_eq(mcr_fleet_migration_read(&x->o, &r, &err), MCR_OK);
        ck_assert_msg(r.phase == MCR_MIGRATION_COPYING && r.progress.backlog > 0,
                      "the kill came after the copy (%s, backlog %llu)", phase_name(r.phase),
                      (unsigned long long)r.progress.backlog);
        snprintf(x->fired, sizeof(x->fired), "run %d killed during the copy (%llu of %llu copied)",
                 x->runs, copied, moved);
        mcr_migration_clear(&r);
        *pid = start_migrate(x);
        break;
    }
    case F_STOP_SOURCE: {
        int s = x->grow ? copying_from(m) : 4; /* 5 -> 4: every key moves from the fifth */
        if (s < 0)
            s = 0;
        ck_assert_int_eq(kill(g_mc[s].pid, SIGSTOP), 0);
        *stopped = s;
        *cont_at = mcr_test_now_ms() + STOP_MS;
        snprintf(x->fired, sizeof(x->fired),
                 "memcached %d (port %d) stopped for %d ms during the copy (%llu of %llu copied)",
                 s, g_mc[s].port, STOP_MS, copied, moved);
        break;
    }
    case F_KILL_LEADER: {
        int lead = es_leader(g_etcd, mcr_test_ms(15000));
        ck_assert_msg(lead >= 0, "%s", es_last_error());
        ck_assert_int_eq(es_kill(g_etcd, lead), 0);
        int64_t t = mcr_test_now_ms();
        int next = es_leader(g_etcd, mcr_test_ms(15000));
        ck_assert_msg(next >= 0 && next != lead, "no new leader: %s", es_last_error());
        int64_t elected = mcr_test_now_ms() - t;
        ck_assert_msg(es_restart(g_etcd, lead) == 0, "restarting m%d: %s", lead, es_last_error());
        snprintf(x->fired, sizeof(x->fired),
                 "etcd leader m%d killed during the copy (%llu of %llu copied), m%d elected in "
                 "%lld ms, m%d restarted",
                 lead, copied, moved, next, (long long)elected, lead);
        break;
    }
    case F_NONE:
        snprintf(x->fired, sizeof(x->fired), "no fault (%llu of %llu copied at the mark)", copied,
                 moved);
        break;
    }
}

/* Run the migration to its end, the fault landing during the copy. */
static void migrate(ctx *x)
{
    int64_t end = mcr_test_now_ms() + mcr_test_ms((int)(g_mode.copy_s * 3000) + 180000);
    int stopped = -1;
    int64_t cont_at = 0;
    pid_t pid = start_migrate(x);
    for (;;) {
        mcr_migration m;
        mcr_error err;
        int rc = mcr_fleet_migration_read(&x->o, &m, &err);
        if (rc == MCR_OK) {
            atomic_store(&x->t->focus, copying_from(&m));
            x->copied = m.progress.copied;
            x->skipped = m.progress.skipped;
            /* a fifth of the moved keys handled (copied, or found at
             * their new owner already: the traffic's sets reach both) */
            if (!x->fired[0] && m.phase == MCR_MIGRATION_COPYING &&
                m.progress.copied + m.progress.skipped >=
                    (x->moved / 5 > 0 ? x->moved / 5 : 1))
                fire(x, &pid, &m, &stopped, &cont_at);
            mcr_migration_clear(&m);
        }
        check_traffic(x);
        if (stopped >= 0 && mcr_test_now_ms() >= cont_at) {
            kill(g_mc[stopped].pid, SIGCONT);
            stopped = -1;
        }
        int st;
        if (pid > 0 && waitpid(pid, &st, WNOHANG) == pid) {
            g_kids[NPROCS] = pid = 0;
            if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
                break;
            printf("checker %s: mcroute migrate run %d ended with %s %d (run again):\n%s\n",
                   x->name, x->runs, WIFEXITED(st) ? "status" : "signal",
                   WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), run_log(x));
            ck_assert_msg(x->runs < MAX_RUNS, "%d runs and the migration is not done", x->runs);
        }
        if (pid == 0 && stopped < 0)
            pid = start_migrate(x); /* not while its source is stopped: it would fail again */
        ck_assert_msg(mcr_test_now_ms() < end, "the migration did not end in time (run %d): %s",
                      x->runs, run_log(x));
        fe_nap();
    }
    atomic_store(&x->t->focus, -1);
    x->done_ms = mcr_test_now_ms();
    ck_assert_msg(x->fired[0], "the copy was over before the fault (%llu copied): slow it down\n%s",
                  (unsigned long long)x->copied, run_log(x));
    mcr_migration m;
    mcr_error err;
    ck_assert_int_eq(mcr_fleet_migration_read(&x->o, &m, &err), MCR_OK);
    ck_assert_msg(m.phase == MCR_MIGRATION_DONE, "the record is %s", phase_name(m.phase));
    x->copied = m.progress.copied;
    x->skipped = m.progress.skipped;
    mcr_migration_clear(&m);
}

/* ------------------------------------------------------------ the final reads */

typedef struct final_read {
    ctx *x;
    uint32_t base;
} final_read;

static void note_final(ctx *x, const char *how, uint32_t k, int rc, const char *val, size_t len)
{
    char key[24];
    ck_key_name(k, key, sizeof(key));
    if (x->final_older + x->final_missing + x->owner_older + x->owner_missing <= 6)
        printf("checker %s: %s %s: %s%.*s%s (acknowledged v%u%s)\n", x->name, how, key,
               rc == CK_OLDER ? "older value \"" : "missing key", rc == CK_OLDER ? (int)len : 0,
               val ? val : "", rc == CK_OLDER ? "\"" : "",
               atomic_load(&x->t->keys[k].acked),
               atomic_load(&x->t->keys[k].frozen) ? ", uncertain" : "");
}

static void final_cb(const mcr_result *res, void *arg)
{
    final_read *f = arg;
    ctx *x = f->x;
    uint32_t k = f->base + (uint32_t)res->index, age;
    if (res->status != MCR_OK) {
        x->final_errors++;
        return;
    }
    int hit = res->reply == MCR_REPLY_HIT;
    int rc = ck_check(x->t, k, ck_read_start(x->t, k), hit, res->value, res->value_len, &age);
    if (rc == CK_OLDER || rc == CK_MISSING) {
        *(rc == CK_OLDER ? &x->final_older : &x->final_missing) += 1;
        ck_mark(x->t, k, rc);
        note_final(x, "through a fresh follower", k, rc, res->value, res->value_len);
    }
}

static void final_done(const mcr_result *res, void *arg)
{
    (void)res;
    (void)arg;
}

/* Every key through a fresh follower (at the new epoch, no transition),
 * then directly from its owner. */
static void final_check(ctx *x)
{
    mcr_error err = {0};
    mcr_router *r = NULL;
    mcr_fleet *f = NULL;
    mcr_fleet_follow_options fo;
    memset(&fo, 0, sizeof(fo));
    fo.no_register = 1;
    ck_assert_int_eq(mcr_router_new(NULL, &r, &err), MCR_OK);
    int rc = mcr_fleet_follow(&x->o, &fo, r, &f, &err);
    ck_assert_msg(rc == MCR_OK, "follow: %s", err.message);
    ck_assert_uint_eq(mcr_router_epoch(r), mcr_snapshot_epoch(x->to));
    mcr_router_migration tr;
    ck_assert_msg(mcr_router_get_migration(r, &tr) != MCR_OK, "a transition after the migration");
    struct event_base *base = event_base_new();
    mcr_pool *pool = NULL;
    mcr_pool_options po;
    mcr_pool_options_init(&po);
    po.request_timeout_ms = (unsigned)mcr_test_ms(5000);
    ck_assert_int_eq(mcr_pool_new(base, r, &po, &pool, &err), MCR_OK);
    enum { BATCH = 200 };
    char names[BATCH][24];
    const void *keys[BATCH];
    size_t lens[BATCH];
    for (uint32_t b = 0; b < g_mode.keys; b += BATCH) {
        uint32_t n = g_mode.keys - b < BATCH ? g_mode.keys - b : BATCH;
        for (uint32_t i = 0; i < n; i++) {
            lens[i] = ck_key_name(b + i, names[i], sizeof(names[i]));
            keys[i] = names[i];
        }
        final_read fr = {x, b};
        ck_assert_int_eq(mcr_pool_get_multi(pool, MCR_OP_GET, keys, lens, n, final_cb, final_done,
                                            &fr, &err),
                         MCR_OK);
        ck_assert_int_eq(mcr_pool_wait(pool), MCR_OK);
    }
    mcr_pool_free(pool);
    event_base_free(base);

    /* directly from each key's owner in the pool's snapshot */
    mcr_snapshot *s = mcr_router_current(r);
    int fds[NSERVERS];
    for (int i = 0; i < NSERVERS; i++) {
        fds[i] = rs_connect("127.0.0.1", g_mc[i].port, mcr_test_ms(5000));
        ck_assert_msg(fds[i] >= 0, "connect to memcached %d", i);
    }
    for (uint32_t k = 0; k < g_mode.keys; k++) {
        char key[24], val[CK_VALUE_MAX + 64];
        uint32_t age;
        ck_key_name(k, key, sizeof(key));
        int hit = rs_mc_get(fds[owner(s, k)], key, val, sizeof(val), mcr_test_ms(5000));
        ck_assert_msg(hit >= 0, "get %s from its owner failed", key);
        int c = ck_check(x->t, k, ck_read_start(x->t, k), hit, val, hit ? strlen(val) : 0, &age);
        if (c == CK_OLDER || c == CK_MISSING) {
            *(c == CK_OLDER ? &x->owner_older : &x->owner_missing) += 1;
            ck_mark(x->t, k, c);
            note_final(x, "from its owner", k, c, val, hit ? strlen(val) : 0);
        }
    }
    for (int i = 0; i < NSERVERS; i++)
        close(fds[i]);
    mcr_snapshot_unref(s);
    mcr_fleet_free(f);
    mcr_router_free(r);
}

/* ------------------------------------------------------------ the test */

static void report(ctx *x)
{
    ck_totals tot;
    ck_sum(x->t, &tot);
    uint32_t frozen = ck_frozen_count(x->t);
    uint64_t older = tot.older_reads + tot.older_writes + x->final_older + x->owner_older;
    uint64_t missing =
        tot.missing_reads + tot.missing_writes + x->final_missing + x->owner_missing;
    double secs = (double)(mcr_test_now_ms() - x->t0) / 1000.0;
    printf("checker %s: %llu acknowledged writes, %llu reads; older values %llu (on %u keys), "
           "missing keys %llu (%u keys), uncertain keys %u; %.1f s\n",
           x->name, (unsigned long long)tot.writes, (unsigned long long)tot.reads,
           (unsigned long long)older, ck_marked_count(x->t, CK_OLDER),
           (unsigned long long)missing, ck_marked_count(x->t, CK_MISSING), frozen, secs);
    printf("checker %s: %s, %s -> %s servers, %u keys (%u moved; %llu copied, %llu skipped), "
           "%d migrate runs\n",
           x->name, x->fired, x->grow ? "4" : "5", x->grow ? "5" : "4", g_mode.keys, x->moved,
           (unsigned long long)x->copied, (unsigned long long)x->skipped, x->runs);
    printf("checker %s: writes by phase: none %llu, copying %llu, switched %llu, grace %llu, "
           "closing %llu, done %llu; older values: reads %llu, writes %llu, fresh follower %llu, owners %llu; "
           "missing keys: reads %llu, writes %llu, fresh follower %llu, owners %llu\n",
           x->name, (unsigned long long)tot.writes_in[MCR_MIGRATION_NONE],
           (unsigned long long)tot.writes_in[MCR_MIGRATION_COPYING],
           (unsigned long long)tot.writes_in[MCR_MIGRATION_SWITCHED],
           (unsigned long long)tot.writes_in[MCR_MIGRATION_GRACE],
           (unsigned long long)tot.writes_in[MCR_MIGRATION_CLOSING],
           (unsigned long long)tot.writes_in[MCR_MIGRATION_DONE],
           (unsigned long long)tot.older_reads, (unsigned long long)tot.older_writes,
           (unsigned long long)x->final_older, (unsigned long long)x->owner_older,
           (unsigned long long)tot.missing_reads, (unsigned long long)tot.missing_writes,
           (unsigned long long)x->final_missing, (unsigned long long)x->owner_missing);
    printf("checker %s: violations by phase (older/missing): planned %llu/%llu, copying "
           "%llu/%llu, switched %llu/%llu, grace %llu/%llu, closing %llu/%llu, done %llu/%llu; "
           "reads via the "
           "previous owner %llu, read errors %llu (final %llu), unchecked %llu, failed writes "
           "%llu; copies seen at new owners %llu, of them stale %llu; touches answered miss in "
           "a transition %llu\n",
           x->name, (unsigned long long)tot.older_in[1], (unsigned long long)tot.missing_in[1],
           (unsigned long long)tot.older_in[2], (unsigned long long)tot.missing_in[2],
           (unsigned long long)tot.older_in[3], (unsigned long long)tot.missing_in[3],
           (unsigned long long)tot.older_in[4], (unsigned long long)tot.missing_in[4],
           (unsigned long long)tot.older_in[5], (unsigned long long)tot.missing_in[5],
           (unsigned long long)tot.older_in[6], (unsigned long long)tot.missing_in[6],
           (unsigned long long)tot.via_previous, (unsigned long long)tot.read_errors,
           (unsigned long long)x->final_errors, (unsigned long long)tot.unchecked,
           (unsigned long long)tot.failed,
           (unsigned long long)tot.copies_seen, (unsigned long long)tot.stale_copies,
           (unsigned long long)tot.touch_misses);
    for (uint32_t p = 0; p < NPROCS; p++) {
        uint32_t n = atomic_load(&x->t->nnotes[p]);
        for (uint32_t i = 0; i < n && i < CK_NOTES; i++)
            printf("checker %s: %s\n", x->name, x->t->notes[p][i]);
    }
    fflush(stdout);

    ck_assert_msg(older == 0 && missing == 0,
                  "%llu older values and %llu missing keys across the migration (see above)",
                  (unsigned long long)older, (unsigned long long)missing);
    ck_assert_msg(tot.writes_in[MCR_MIGRATION_COPYING] > 0 &&
                      tot.writes_in[MCR_MIGRATION_SWITCHED] + tot.writes_in[MCR_MIGRATION_GRACE] >
                          0,
                  "no traffic during the copy or after the switch");
    ck_assert_msg(x->final_errors == 0, "%llu final reads failed",
                  (unsigned long long)x->final_errors);
    ck_assert_msg(tot.unchecked * 1000 <= tot.reads, "%llu reads of %llu not checked",
                  (unsigned long long)tot.unchecked, (unsigned long long)tot.reads);
    ck_assert_msg(frozen * 20 <= g_mode.keys,
                  "%u keys uncertain (failed writes): too many to be a check", frozen);
}

static void checker(const char *name, fault f, int grow)
{
    ctx *x = &g_x;
    x->name = name;
    x->fault = f;
    x->grow = grow;
    x->t0 = mcr_test_now_ms();
    setup(x);
    start_traffic(x);
    wait_ready(x);
    migrate(x);
    /* the traffic goes on after the end, to the mode's number of writes */
    int64_t end = mcr_test_now_ms() + mcr_test_ms((int)(g_mode.copy_s * 10000) + 60000);
    while (mcr_test_now_ms() < x->done_ms + POST_MS || acked_writes(x) < g_mode.writes) {
        check_traffic(x);
        ck_assert_msg(mcr_test_now_ms() < end, "only %llu acknowledged writes",
                      (unsigned long long)acked_writes(x));
        fe_nap();
    }
    stop_traffic(x);
    final_check(x);
    report(x);
}

START_TEST(kill_migrate)
{
    checker("kill_migrate", F_KILL_MIGRATE, 1);
}
END_TEST

START_TEST(stop_source)
{
    checker("stop_source", F_STOP_SOURCE, 0);
}
END_TEST

START_TEST(kill_etcd_leader)
{
    checker("kill_etcd_leader", F_KILL_LEADER, 1);
}
END_TEST

START_TEST(no_fault)
{
    checker("no_fault", F_NONE, 0);
}
END_TEST

int main(void)
{
    const char *l = getenv("MCR_CHECKER_LONG");
    g_mode = l != NULL && strcmp(l, "1") == 0 ? g_long : g_short;
    Suite *s = suite_create("migrate_checker");
    const tu_case cases[] = {
        {"kill_migrate", kill_migrate},
        {"stop_source", stop_source},
        {"kill_etcd_leader", kill_etcd_leader},
        {"no_fault", no_fault},
    };
    tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]), g_mode.timeout_s, teardown);
    printf("migrate_checker: %s mode (MCR_CHECKER_LONG=1: long): %u keys, copy %.0f s, at least "
           "%llu acknowledged writes per test\n",
           l != NULL && strcmp(l, "1") == 0 ? "long" : "short", g_mode.keys, g_mode.copy_s,
           (unsigned long long)g_mode.writes);
    return tu_run(s);
}
