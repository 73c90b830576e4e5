/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cli_migrate_fleet.c: mcroute migrate --etcd against a real etcd and real memcached servers, with followers in the test process: a full 4 -> 5 migration without a miss, a run killed during the copy and resumed, a laggard named, the end held in closing by a client in the grace, aborts from copying and after the switch, a second run refused, members status, bad arguments. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clirun.h"
#include "etcdserver.h"
#include "fleet_env.h"
#include "realserver.h"
#include "testutil.h"

/* Keys set before each migration (1/5 of them move to a fifth server). */
#define NKEYS 1000
#define NSERVERS 5
#define RUN_MS 60000 /* run_cli_deadline scales it */
#define SEE_MS mcr_test_ms(15000)

static es_cluster *g_etcd;
static rs_proc g_mc[NSERVERS];
static char *g_dir;
#define MAX_BG 4
static pid_t g_bg[MAX_BG]; /* processes started here, killed by the teardown */

static void teardown(void)
{
    for (int i = 0; i < MAX_BG; i++)
        if (g_bg[i] > 0) {
            kill(g_bg[i], SIGKILL);
            waitpid(g_bg[i], NULL, 0);
            g_bg[i] = 0;
        }
    es_free(g_etcd);
    g_etcd = NULL;
    rs_stop_all();
    run_free_all();
    tu_tmpdir_free(g_dir);
    g_dir = NULL;
}

/* ------------------------------------------------------------ the setting */

static char g_list4[200], g_list5[256], g_ep[256];

/* etcd, five memcached servers, and the pool `pool` on the first four. */
static void start(mcr_fleet_options *o, const char *pool)
{
    g_dir = tu_tmpdir("climig");
    g_etcd = es_start(1, "climig");
    ck_assert_msg(g_etcd != NULL, "es_start: %s", es_last_error());
    snprintf(g_ep, sizeof(g_ep), "%s", es_endpoints(g_etcd));
    size_t a = 0;
    for (int i = 0; i < NSERVERS; i++) {
        ck_assert_msg(rs_memcached_start(&g_mc[i], "127.0.0.1", 0, NULL, mcr_test_ms(10000)) == 0,
                      "memcached %d did not start", i);
        if (i < 4)
            a += (size_t)snprintf(g_list4 + a, sizeof(g_list4) - a, "%s127.0.0.1:%d",
                                  i ? "," : "", g_mc[i].port);
    }
    snprintf(g_list5, sizeof(g_list5), "%s,127.0.0.1:%d", g_list4, g_mc[4].port);
    fe_options(o, g_ep, pool);
    o->wait_ms = (unsigned)mcr_test_ms(10000);
    run r = run_cli_deadline(NULL, 0,
                             ARGS("members", "publish", "--etcd", g_ep, "--pool", pool, "-s",
                                  g_list4),
                             RUN_MS);
    ck_assert_msg(r.status == 0, "publish: %d %s", r.status, r.err);
    run_free(&r);
}

static char g_keys[NKEYS][24];

/* NKEYS keys set through the pool (mcroute set). */
static void set_keys(const char *pool, const char *tag)
{
    size_t cap = NKEYS * 48, n = 0;
    char *in = malloc(cap);
    for (int i = 0; i < NKEYS; i++) {
        snprintf(g_keys[i], sizeof(g_keys[i]), "%s-%d", tag, i);
        n += (size_t)snprintf(in + n, cap - n, "%s\tvalue-%d\n", g_keys[i], i);
    }
    run r = run_cli_deadline(in, n, ARGS("set", "--etcd", g_ep, "--pool", pool), RUN_MS);
    free(in);
    ck_assert_msg(r.status == 0, "set: %d %s", r.status, r.err);
    run_free(&r);
}

/* How many keys the owner of each in the pool's current snapshot misses. */
static size_t misses(const mcr_fleet_options *o)
{
    mcr_snapshot *s = fe_read(o, NULL);
    size_t miss = 0, ns = mcr_snapshot_server_count(s);
    for (size_t k = 0; k < ns; k++) {
        mcr_server_desc d;
        mcr_snapshot_server(s, k, &d);
        const char *keys[NKEYS];
        size_t lens[NKEYS], n = 0;
        unsigned char hit[NKEYS];
        for (int i = 0; i < NKEYS; i++)
            if (mcr_snapshot_locate(s, g_keys[i], strlen(g_keys[i])) == k) {
                keys[n] = g_keys[i];
                lens[n++] = strlen(g_keys[i]);
            }
        if (n == 0)
            continue;
        char err[200];
        int fd = rs_connect(d.host, d.port, mcr_test_ms(5000));
        ck_assert_msg(fd >= 0, "connect %s:%d", d.host, d.port);
        ck_assert_msg(rs_mc_hits(fd, keys, lens, n, hit, mcr_test_ms(10000), err, sizeof(err)) ==
                          0,
                      "hits: %s", err);
        close(fd);
        for (size_t i = 0; i < n; i++)
            miss += !hit[i];
    }
    mcr_snapshot_unref(s);
    return miss;
}

/* ------------------------------------------------------------ processes */

/* Start `mcroute ARGS` with stdout and stderr to `log`; it dies with the
 * test's process. */
static pid_t bg_start(const char *log, const char *const *argv)
{
    unlink(log); /* a new log for each run */
    pid_t pid = run_cli_bg(log, argv);
    for (int i = 0; i < MAX_BG; i++)
        if (g_bg[i] <= 0) {
            g_bg[i] = pid;
            break;
        }
    return pid;
}

static void bg_forget(pid_t pid)
{
    for (int i = 0; i < MAX_BG; i++)
        if (g_bg[i] == pid)
            g_bg[i] = 0;
}

/* Wait (at most ms) for pid to exit: its status, -1 for a signal. */
static int bg_wait(pid_t pid, int ms)
{
    int64_t end = mcr_test_now_ms() + ms;
    int st = 0;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            break;
        ck_assert_msg(mcr_test_now_ms() < end, "process %ld still running after %d ms",
                      (long)pid, ms);
        fe_nap();
    }
    bg_forget(pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void bg_kill(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    bg_forget(pid);
}

static const char *path_of(const char *name)
{
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof(p[k]), "%s/%s", g_dir, name);
    return p[k];
}

/* ------------------------------------------------------------ followers */

typedef struct follower {
    mcr_router *router;
    mcr_fleet *f;
    fe_rec rec;
} follower;

static void follow(follower *x, const mcr_fleet_options *o, const char *id)
{
    mcr_error err = {0};
    mcr_fleet_follow_options fo = {.client_id = id, .on_event = fe_on_event, .arg = &x->rec};
    memset(x, 0, sizeof(*x));
    fe_rec_init(&x->rec);
    ck_assert_int_eq(mcr_router_new(NULL, &x->router, &err), MCR_OK);
    int rc = mcr_fleet_follow(o, &fo, x->router, &x->f, &err);
    ck_assert_msg(rc == MCR_OK, "follow: %s: %s", mcr_strerror(rc), err.message);
}

static void unfollow(follower *x)
{
    mcr_fleet_free(x->f);
    mcr_router_free(x->router);
    fe_rec_destroy(&x->rec);
}

static void wait_kind(follower *x, mcr_fleet_event_kind kind, size_t n, const char *what)
{
    ck_assert_msg(fe_wait_count(&x->rec, kind, n, SEE_MS), "%s: event %d #%zu not seen (%zu)",
                  what, (int)kind, n, fe_count(&x->rec, kind));
}

static int has_transition(follower *x)
{
    mcr_router_migration t;
    if (mcr_router_get_migration(x->router, &t) != MCR_OK)
        return 0;
    mcr_router_migration_clear(&t);
    return 1;
}

/* The record now (aborts when there is none). */
static void record(const mcr_fleet_options *o, mcr_migration *m)
{
    mcr_error err = {0};
    int rc = mcr_fleet_migration_read(o, m, &err);
    ck_assert_msg(rc == MCR_OK, "migration record: %s: %s", mcr_strerror(rc), err.message);
}

/* Wait until the record is in `phase` with at least `copied` keys copied. */
static void wait_record(const mcr_fleet_options *o, mcr_migration_phase phase, uint64_t copied)
{
    int64_t end = mcr_test_now_ms() + SEE_MS;
    mcr_migration m;
    mcr_error err;
    for (;;) {
        int rc = mcr_fleet_migration_read(o, &m, &err);
        if (rc == MCR_OK && m.phase == phase && m.progress.copied >= copied) {
            mcr_migration_clear(&m);
            return;
        }
        if (mcr_test_now_ms() >= end)
            ck_abort_msg("the record never reached %s with %llu copied (now %s, %llu)",
                         mcr_migration_phase_name(phase), (unsigned long long)copied,
                         rc == MCR_OK ? mcr_migration_phase_name(m.phase) : err.message,
                         (unsigned long long)(rc == MCR_OK ? m.progress.copied : 0));
        mcr_migration_clear(&m);
        fe_nap();
    }
}

/* Wait until client `id` is registered (with the migration phase given,
 * when not NONE). */
static void wait_client(const mcr_fleet_options *o, const char *id, mcr_migration_phase phase)
{
    int64_t end = mcr_test_now_ms() + SEE_MS;
    mcr_fleet_client c;
    while (!(fe_client(o, id, &c, NULL, 0) &&
             (phase == MCR_MIGRATION_NONE || c.migration_phase == phase))) {
        ck_assert_msg(mcr_test_now_ms() < end, "client %s never showed phase %s", id,
                      mcr_migration_phase_name(phase));
        fe_nap();
    }
}

/* The number after "name": in JSON text (0 when absent: the test fails on it). */
static long long json_num(const char *j, const char *name)
{
    char k[64];
    snprintf(k, sizeof(k), "\"%s\": ", name);
    const char *p = strstr(j, k);
    return p ? strtoll(p + strlen(k), NULL, 10) : -1;
}

/* ------------------------------------------------------------ tests */

/* 4 -> 5 servers with two followers: every step adopted, the transition
 * set at copying and ended at done, no key missed afterwards. */
START_TEST(full_migration)
{
    mcr_fleet_options o;
    follower a, b;
    start(&o, "web");
    set_keys("web", "full");
    follow(&a, &o, "app-a");
    follow(&b, &o, "app-b");
    ck_assert_uint_eq(misses(&o), 0);
    run r = run_cli_deadline(NULL, 0,
                             ARGS("migrate", "--etcd", g_ep, "--pool", "web", "--grace", "0.3",
                                  "--json", g_list5),
                             RUN_MS);
    ck_assert_msg(r.status == 0, "migrate: %d\n%s\n%s", r.status, r.out, r.err);
    ck_assert_msg(strstr(r.out, "\"result\": \"done\"") != NULL, "%s", r.out);
    ck_assert_int_eq(json_num(r.out, "clients"), 2);
    long long moved = json_num(r.out, "moved");
    ck_assert_msg(moved > NKEYS / 10 && moved < NKEYS / 3, "moved %lld", moved);
    ck_assert_int_eq(json_num(r.out, "copied"), moved);
    ck_assert_int_eq(json_num(r.out, "failed"), 0);
    ck_assert_msg(strstr(r.out, "{\"phase\": \"planned\", \"clients\": 2") &&
                      strstr(r.out, "{\"phase\": \"copying\", \"clients\": 2") &&
                      strstr(r.out, "{\"phase\": \"switched\", \"clients\": 2") &&
                      strstr(r.out, "{\"phase\": \"grace\", \"clients\": 2") &&
                      strstr(r.out, "{\"phase\": \"closing\", \"clients\": 2") &&
                      strstr(r.out, "{\"phase\": \"done\", \"clients\": 2"),
                  "steps: %s", r.out);
    run_free(&r);
    /* the followers: the transition set at copying and again at closing,
     * ended, at epoch 2 */
    follower *fs[2] = {&a, &b};
    for (int i = 0; i < 2; i++) {
        wait_kind(fs[i], MCR_FLEET_MIGRATION_CLEARED, 1, "done");
        ck_assert_uint_eq(fe_count(&fs[i]->rec, MCR_FLEET_MIGRATION_SET), 2);
        ck_assert_uint_eq(mcr_router_epoch(fs[i]->router), 2);
        ck_assert_int_eq(has_transition(fs[i]), 0);
    }
    mcr_fleet_client c;
    ck_assert(fe_client(&o, "app-a", &c, NULL, 0));
    ck_assert_int_eq(c.migration_phase, MCR_MIGRATION_DONE);
    ck_assert_uint_eq(c.epoch, 2);
    ck_assert_uint_eq(fe_epoch(&o), 2);
    ck_assert_uint_eq(misses(&o), 0);
    mcr_migration m;
    record(&o, &m);
    ck_assert_int_eq(m.phase, MCR_MIGRATION_DONE);
    ck_assert_uint_eq(m.progress.copied, (uint64_t)moved);
    ck_assert_uint_eq(m.progress.backlog, 0);
    mcr_migration_clear(&m);

    /* status: the migration and who adopted it */
    r = run_cli_deadline(NULL, 0, ARGS("members", "status", "--etcd", g_ep, "--pool", "web"),
                         RUN_MS);
    ck_assert_msg(r.status == 0 && strstr(r.out, "\n2\t2\n") && strstr(r.out, " done: ") &&
                      strstr(r.out, "# adopted: done 2, other 0; 0 laggards"),
                  "status: %s", r.out);
    run_free(&r);
    r = run_cli_deadline(NULL, 0,
                         ARGS("members", "status", "--etcd", g_ep, "--pool", "web", "--json"),
                         RUN_MS);
    ck_assert_msg(r.status == 0 && strstr(r.out, "\"migration\": {\"id\": ") &&
                      strstr(r.out, "\"adopted\": [{\"phase\": \"done\", \"clients\": 2}]") &&
                      strstr(r.out, "\"backlog\": 0"),
                  "status --json: %s", r.out);
    run_free(&r);

    /* the same target again: nothing to migrate, exit 2 */
    r = run_cli_deadline(NULL, 0, ARGS("migrate", "--etcd", g_ep, "--pool", "web", g_list5),
                         RUN_MS);
    ck_assert_msg(r.status == 2 && strstr(r.err, "nothing to migrate"), "%d %s", r.status, r.err);
    run_free(&r);
    unfollow(&a);
    unfollow(&b);
}
END_TEST

/* Killed by SIGKILL during its copy, run again: it resumes in copying
 * (after the dead run's lock lapses) and ends without a miss. A second run
 * while one is running is refused. */
START_TEST(interrupted_resumed)
{
    mcr_fleet_options o;
    follower a;
    start(&o, "web");
    set_keys("web", "intr");
    follow(&a, &o, "app-a");
    const char *log = path_of("first.log");
    /* slow enough that the kill below, after a second run of the command
     * (seconds under ASan on a loaded machine), comes during the copy: 3
     * keys a second over the ~60 moved ones, slower by the time scale (it
     * was 10: once, under ASan with the machine loaded, the copy ended
     * before the kill) */
    char rate[32];
    snprintf(rate, sizeof rate, "%.3f", 3000.0 / mcr_test_ms(1000));
    pid_t pid = bg_start(log, ARGS("migrate", "--etcd", g_ep, "--pool", "web", "--rate", rate,
                                   "--grace", "0.2", g_list5));
    wait_record(&o, MCR_MIGRATION_COPYING, 1); /* progress in the record: copying */
    wait_kind(&a, MCR_FLEET_MIGRATION_SET, 1, "copying");

    /* a second run meanwhile: refused, naming the lock's holder */
    run r = run_cli_deadline(NULL, 0, ARGS("migrate", "--etcd", g_ep, "--pool", "web", g_list5),
                             RUN_MS);
    ck_assert_msg(r.status == 1 && strstr(r.err, "another mcroute migrate holds the migration "
                                                 "lock") &&
                      strstr(r.err, "refused"),
                  "second run: %d %s", r.status, r.err);
    run_free(&r);

    bg_kill(pid);
    mcr_migration m;
    record(&o, &m);
    ck_assert_int_eq(m.phase, MCR_MIGRATION_COPYING);
    ck_assert_msg(m.progress.copied > 0 && m.progress.backlog > 0,
                  "killed with %llu copied, backlog %llu: not during the copy",
                  (unsigned long long)m.progress.copied, (unsigned long long)m.progress.backlog);
    uint64_t moved = m.progress.moved;
    mcr_migration_clear(&m);
    ck_assert_uint_eq(fe_epoch(&o), 1);
    ck_assert_int_eq(has_transition(&a), 1);

    r = run_cli_deadline(NULL, 0,
                         ARGS("migrate", "--etcd", g_ep, "--pool", "web", "--json", g_list5),
                         RUN_MS);
    ck_assert_msg(r.status == 0, "resumed: %d\n%s\n%s", r.status, r.out, r.err);
    ck_assert_msg(strstr(r.out, "\"resumed\": true, \"resumed_at\": \"copying\"") &&
                      strstr(r.out, "\"result\": \"done\""),
                  "%s", r.out);
    ck_assert_msg(json_num(r.out, "present") > 0, "nothing was copied before the kill: %s",
                  r.out);
    run_free(&r);
    record(&o, &m);
    ck_assert_int_eq(m.phase, MCR_MIGRATION_DONE);
    ck_assert_uint_ge(m.progress.moved, moved); /* counted per source as they are listed */
    mcr_migration_clear(&m);
    wait_kind(&a, MCR_FLEET_MIGRATION_CLEARED, 1, "done");
    ck_assert_uint_eq(fe_count(&a.rec, MCR_FLEET_MIGRATION_SET), 2); /* copying, closing */
    ck_assert_uint_eq(misses(&o), 0);
    unfollow(&a);
}
END_TEST

/* Killed during the copy, then aborted: the pool stays at its epoch, the
 * transition ends everywhere. */
START_TEST(abort_copying)
{
    mcr_fleet_options o;
    follower a;
    start(&o, "web");
    set_keys("web", "abc");
    follow(&a, &o, "app-a");
    pid_t pid = bg_start(path_of("run.log"), ARGS("migrate", "--etcd", g_ep, "--pool", "web",
                                                  "--rate", "25", g_list5));
    wait_record(&o, MCR_MIGRATION_COPYING, 1);
    bg_kill(pid);
    wait_kind(&a, MCR_FLEET_MIGRATION_SET, 1, "copying");
    run r = run_cli_deadline(NULL, 0,
                             ARGS("migrate", "--etcd", g_ep, "--pool", "web", "--abort"),
                             RUN_MS);
    ck_assert_msg(r.status == 0 && strstr(r.out, "abort in phase copying") &&
                      strstr(r.out, "aborted: adopted by 1 clients"),
                  "abort: %d\n%s\n%s", r.status, r.out, r.err);
    run_free(&r);
    mcr_migration m;
    record(&o, &m);
    ck_assert_int_eq(m.phase, MCR_MIGRATION_ABORTED);
    ck_assert_int_eq(m.rollback, 0);
    mcr_migration_clear(&m);
    wait_kind(&a, MCR_FLEET_MIGRATION_CLEARED, 1, "aborted");
    ck_assert_int_eq(has_transition(&a), 0);
    ck_assert_uint_eq(fe_epoch(&o), 1);
    ck_assert_uint_eq(mcr_router_epoch(a.router), 1);
    ck_assert_uint_eq(misses(&o), 0);
    /* nothing left to abort */
    r = run_cli_deadline(NULL, 0, ARGS("migrate", "--etcd", g_ep, "--pool", "web", "--abort"),
                         RUN_MS);
    ck_assert_msg(r.status == 2 && strstr(r.err, "no migration in progress"), "%d %s", r.status,
                  r.err);
    run_free(&r);
    unfollow(&a);
}
END_TEST

/* A registered client whose process is stopped (SIGSTOP) after it adopted
 * copying: the switched step fails naming it, the migration stays switched;
 * once it runs again, --abort rolls back to the four servers as the next
 * epoch, and no key is missed. */
START_TEST(laggard_then_abort_switched)
{
    mcr_fleet_options o;
    follower a;
    start(&o, "web");
    set_keys("web", "lag");
    follow(&a, &o, "app-a");
    pid_t w = bg_start(path_of("watch.log"),
                       ARGS("watch", "--etcd", g_ep, "--pool", "web", "--client-id", "slowpoke"));
    wait_client(&o, "slowpoke", MCR_MIGRATION_NONE);
    const char *log = path_of("run.log");
    pid_t pid = bg_start(log, ARGS("migrate", "--etcd", g_ep, "--pool", "web", "--rate", "40",
                                   "--wait", "1", g_list5));
    wait_record(&o, MCR_MIGRATION_COPYING, 1);
    wait_client(&o, "slowpoke", MCR_MIGRATION_COPYING);
    ck_assert_int_eq(kill(w, SIGSTOP), 0);
    int st = bg_wait(pid, mcr_test_ms(60000));
    char *out = tu_read_file(log, NULL);
    ck_assert_msg(st == 1 && strstr(out, "step switched: 1 of 2 clients have not adopted it") &&
                      strstr(out, "slowpoke ("),
                  "the run: status %d: %s", st, out);
    free(out);
    mcr_migration m;
    record(&o, &m);
    ck_assert_int_eq(m.phase, MCR_MIGRATION_SWITCHED);
    mcr_migration_clear(&m);
    ck_assert_uint_eq(fe_epoch(&o), 2);
    /* status names it */
    run r = run_cli_deadline(NULL, 0, ARGS("members", "status", "--etcd", g_ep, "--pool", "web"),
                             RUN_MS);
    ck_assert_msg(r.status == 0 && strstr(r.out, "# laggard slowpoke (") &&
                      strstr(r.out, "1 laggards"),
                  "status: %s", r.out);
    run_free(&r);

    ck_assert_int_eq(kill(w, SIGCONT), 0);
    r = run_cli_deadline(NULL, 0, ARGS("migrate", "--etcd", g_ep, "--pool", "web", "--abort",
                                       "--json"),
                         RUN_MS);
    ck_assert_msg(r.status == 0, "abort: %d\n%s\n%s", r.status, r.out, r.err);
    ck_assert_msg(strstr(r.out, "\"result\": \"aborted\"") && strstr(r.out, "\"rollback\": true") &&
                      strstr(r.out, "\"from_epoch\": 2, \"to_epoch\": 3"),
                  "%s", r.out);
    run_free(&r);
    mcr_snapshot *s = fe_read(&o, NULL);
    ck_assert_uint_eq(mcr_snapshot_epoch(s), 3);
    ck_assert_uint_eq(mcr_snapshot_server_count(s), 4);
    mcr_snapshot_unref(s);
    wait_kind(&a, MCR_FLEET_MIGRATION_SET, 2, "the way back");
    wait_kind(&a, MCR_FLEET_MIGRATION_CLEARED, 1, "aborted");
    ck_assert_int_eq(has_transition(&a), 0);
    ck_assert_uint_eq(mcr_router_epoch(a.router), 3);
    wait_client(&o, "slowpoke", MCR_MIGRATION_ABORTED);
    ck_assert_uint_eq(misses(&o), 0);
    bg_kill(w);
    unfollow(&a);
}
END_TEST

/* The end waits for everybody to stop reading the old owners: a client
 * stopped in the grace holds the migration in closing (the others no
 * longer read the old owners but still write them), never done. Each run
 * of migrate advances one step while the laggard is stopped at the
 * record's phase, then fails naming it. */
START_TEST(closing_waits)
{
    mcr_fleet_options o;
    follower a;
    start(&o, "web");
    set_keys("web", "closing");
    follow(&a, &o, "app-a");
    pid_t w = bg_start(path_of("watch.log"),
                       ARGS("watch", "--etcd", g_ep, "--pool", "web", "--client-id", "slowpoke"));
    wait_client(&o, "slowpoke", MCR_MIGRATION_NONE);
    const char *const expect[] = {"step switched", "step grace", "step closing"};
    for (int i = 0; i < 3; i++) {
        mcr_migration_phase at = (mcr_migration_phase)(MCR_MIGRATION_COPYING + i);
        const char *log = path_of("run.log");
        if (i > 0) { /* stopped where the record is, before the run */
            ck_assert_int_eq(kill(w, SIGCONT), 0);
            wait_client(&o, "slowpoke", at);
            ck_assert_int_eq(kill(w, SIGSTOP), 0);
        }
        pid_t pid = bg_start(log, ARGS("migrate", "--etcd", g_ep, "--pool", "web", "--rate",
                                       "100", "--grace", "0.2", "--wait", "1", g_list5));
        if (i == 0) { /* stopped during the copy (2 s) */
            wait_client(&o, "slowpoke", at);
            ck_assert_int_eq(kill(w, SIGSTOP), 0);
        }
        int st = bg_wait(pid, mcr_test_ms(60000));
        char *out = tu_read_file(log, NULL);
        ck_assert_msg(st == 1 && strstr(out, expect[i]) && strstr(out, "slowpoke ("),
                      "run %d: status %d: %s", i, st, out);
        free(out);
        mcr_migration m;
        record(&o, &m);
        ck_assert_int_eq(m.phase, at + 1);
        mcr_migration_clear(&m);
    }
    /* app-a is closing: its transition says so; slowpoke is still in the
     * grace and nobody has ended */
    wait_client(&o, "app-a", MCR_MIGRATION_CLOSING);
    mcr_router_migration t;
    ck_assert_int_eq(mcr_router_get_migration(a.router, &t), MCR_OK);
    ck_assert_uint_eq(t.flags & MCR_MIGRATION_FLAG_CLOSING, MCR_MIGRATION_FLAG_CLOSING);
    ck_assert_int_eq(mcr_migration_phase_at(&t, mcr_router_epoch(a.router)), MCR_MIGRATION_CLOSING);
    mcr_router_migration_clear(&t);
    ck_assert_uint_eq(fe_count(&a.rec, MCR_FLEET_MIGRATION_CLEARED), 0);
    mcr_fleet_client c;
    ck_assert(fe_client(&o, "slowpoke", &c, NULL, 0));
    ck_assert_int_eq(c.migration_phase, MCR_MIGRATION_GRACE);

    ck_assert_int_eq(kill(w, SIGCONT), 0);
    run r = run_cli_deadline(NULL, 0, ARGS("migrate", "--etcd", g_ep, "--pool", "web", g_list5),
                             RUN_MS);
    ck_assert_msg(r.status == 0 && strstr(r.out, "closing: adopted by 2 clients") &&
                      strstr(r.out, "done: adopted by 2 clients"),
                  "the last run: %d\n%s\n%s", r.status, r.out, r.err);
    run_free(&r);
    wait_kind(&a, MCR_FLEET_MIGRATION_CLEARED, 1, "done");
    ck_assert_int_eq(has_transition(&a), 0);
    wait_client(&o, "slowpoke", MCR_MIGRATION_DONE);
    ck_assert_uint_eq(misses(&o), 0);
    bg_kill(w);
    unfollow(&a);
}
END_TEST

START_TEST(bad_arguments)
{
    mcr_fleet_options o;
    start(&o, "web");
    struct {
        const char *const *argv;
        const char *says;
    } bad[] = {
        {ARGS("migrate", "--etcd", g_ep, "--pool", "web"), "expected NEW only"},
        {ARGS("migrate", "--etcd", g_ep, "--pool", "web", g_list5, g_list4), "expected NEW only"},
        {ARGS("migrate", "--etcd", g_ep, "--pool", "web", "--abort", g_list5), "takes no NEW"},
        {ARGS("migrate", "--etcd", g_ep, "--pool", "web", "--dry-run", g_list5), "--dry-run"},
        {ARGS("migrate", "--etcd", g_ep, "--pool", "web", "--grace", "-1", g_list5), "--grace"},
        {ARGS("migrate", "--etcd", g_ep, "--pool", "web", "--wait", "0", g_list5), "--wait"},
        {ARGS("migrate", "--etcd", g_ep, "--pool", "web", "--rate", "x", g_list5), "--rate"},
        {ARGS("migrate", "--etcd", g_ep, "--pool", "web", "--abort=1"), "takes no value"},
        {ARGS("migrate", g_list4, g_list5, "--grace", "1"), "only with --etcd"},
        {ARGS("migrate", "--etcd", g_ep, "--pool", "nope", g_list5), "no pool \"nope\""},
        {ARGS("migrate", "--etcd", g_ep, "--pool", "web", "-m", "jump", g_list5),
         "placement parameters differ"},
        {ARGS("migrate", "--pool", "web", g_list5), "only to --etcd"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        run r = run_cli_deadline(NULL, 0, bad[i].argv, RUN_MS);
        ck_assert_msg(r.status == 2 && r.outlen == 0 && strstr(r.err, bad[i].says) != NULL,
                      "case %zu: status %d, out \"%s\", err \"%s\" (want 2 and \"%s\")", i,
                      r.status, r.out, r.err, bad[i].says);
        run_free(&r);
    }
    /* an active migration to another target: refused, naming it */
    mcr_migration m;
    mcr_error err = {0};
    mcr_config *cfg = fe_config(g_list5);
    mcr_snapshot *five = NULL;
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &five, &err), MCR_OK);
    mcr_config_free(cfg);
    ck_assert_int_eq(mcr_fleet_migration_plan(&o, five, 0, &m, &err), MCR_OK);
    mcr_snapshot_unref(five);
    ck_assert_int_eq(mcr_fleet_migration_write(&o, &m, &err), MCR_OK);
    char six[300];
    snprintf(six, sizeof(six), "%s,127.0.0.1:1", g_list5);
    run r = run_cli_deadline(NULL, 0, ARGS("migrate", "--etcd", g_ep, "--pool", "web", six),
                             RUN_MS);
    ck_assert_msg(r.status == 2 && strstr(r.err, m.id) && strstr(r.err, "or --abort"), "%d %s",
                  r.status, r.err);
    run_free(&r);
    /* a record that does not check: exit 2 naming the field; status says so */
    ck_assert(es_put(g_etcd, "/mcroute/pools/web/migration", "{\"id\":\"00\"}") == 0);
    r = run_cli_deadline(NULL, 0, ARGS("migrate", "--etcd", g_ep, "--pool", "web", g_list5),
                         RUN_MS);
    ck_assert_msg(r.status == 2 && strstr(r.err, "/mcroute/pools/web/migration") &&
                      strstr(r.err, "no field \"phase\""),
                  "%d %s", r.status, r.err);
    run_free(&r);
    r = run_cli_deadline(NULL, 0, ARGS("members", "status", "--etcd", g_ep, "--pool", "web"),
                         RUN_MS);
    ck_assert_msg(r.status == 0 && strstr(r.out, "# migration record not readable: "), "%s",
                  r.out);
    run_free(&r);
    mcr_migration_clear(&m);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("cli_migrate_fleet");
    const tu_case cases[] = {
        {"full_migration", full_migration},
        {"interrupted_resumed", interrupted_resumed},
        {"abort_copying", abort_copying},
        {"laggard_then_abort_switched", laggard_then_abort_switched},
        {"closing_waits", closing_waits},
        {"bad_arguments", bad_arguments},
    };
    tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]), 180, teardown);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
