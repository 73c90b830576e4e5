/* SPDX-License-Identifier: BSD-3-Clause */
/* test_agent.c: mcroute agent with real parts: a real etcd, the agent as a process, and follower processes forked from the test that route through a router fed from the state: a change reaching 200 of them with a registration or two in etcd (not 200), the slowest process registered and named, the agent killed and restarted while they keep serving, a migrate --etcd that waits for every process and names one that does not adopt, and /metrics parsed by Prometheus's own text parser. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "clirun.h"
#include "etcdserver.h"
#include "fleet_env.h"
#include "mcroute_pool.h"
#include "mcroute_state.h"
#include "realserver.h"
#include "state/state_internal.h"
#include "testutil.h"

#define RUN_MS 60000 /* run_cli_deadline scales it */
#define SEE_MS mcr_test_ms(20000)
#define MAX_FOLLOWERS 256
#define AGENT_ID "host-agent"

static es_cluster *g_etcd;
static char *g_dir;
static char g_ep[256], g_state[512], g_url[128];
static pid_t g_agent;
static pid_t g_followers[MAX_FOLLOWERS];
static int g_nfollowers;
static int g_quit[2] = {-1, -1}; /* followers exit when it closes */

static void stop_pid(pid_t *p)
{
    if (*p > 0) {
        kill(*p, SIGKILL);
        waitpid(*p, NULL, 0);
        *p = 0;
    }
}

static void teardown(void)
{
    for (int i = 0; i < g_nfollowers; i++)
        stop_pid(&g_followers[i]);
    g_nfollowers = 0;
    stop_pid(&g_agent);
    for (int i = 0; i < 2; i++)
        if (g_quit[i] >= 0) {
            close(g_quit[i]);
            g_quit[i] = -1;
        }
    es_free(g_etcd);
    g_etcd = NULL;
    rs_stop_all();
    run_free_all();
    tu_tmpdir_free(g_dir);
    g_dir = NULL;
}

static const char *path_of(const char *name)
{
    static char buf[4][600];
    static int k;
    char *b = buf[k++ % 4];
    snprintf(b, 600, "%s/%s", g_dir, name);
    return b;
}

/* etcd, and the pool `pool` of `list`. */
static void start(mcr_fleet_options *o, const char *pool, const char *list)
{
    g_dir = tu_tmpdir("agent");
    g_etcd = es_start(1, "agent");
    ck_assert_msg(g_etcd != NULL, "es_start: %s", es_last_error());
    snprintf(g_ep, sizeof(g_ep), "%s", es_endpoints(g_etcd));
    snprintf(g_state, sizeof(g_state), "%s/web.state", g_dir);
    fe_options(o, g_ep, pool);
    run r = run_cli_deadline(NULL, 0,
                             ARGS("members", "publish", "--etcd", g_ep, "--pool", pool, "-s", list),
                             RUN_MS);
    ck_assert_msg(r.status == 0, "publish: %d %s", r.status, r.err);
    run_free(&r);
    ck_assert_int_eq(pipe(g_quit), 0);
}

/* The agent on the pool, metrics on a port of its choosing: waits for
 * its first state and its metrics URL. */
static void agent_start(const char *pool)
{
    const char *log = path_of("agent.log");
    tu_write_file(log, "", 0);
    g_agent = run_cli_bg(log, ARGS("agent", "--etcd", g_ep, "--pool", pool, "--state", g_state,
                                  "--metrics", "127.0.0.1:0", "--id", AGENT_ID,
                                  "--file-mode", "0600"));
    int64_t end = mcr_test_now_ms() + SEE_MS;
    for (;;) {
        char *text = tu_read_file(log, NULL);
        const char *m = text ? strstr(text, "metrics http://") : NULL;
        bool ready = m != NULL && strstr(text, "generation ") != NULL;
        if (ready) {
            const char *e = strchr(m, '\n');
            snprintf(g_url, sizeof(g_url), "%.*s", (int)(e - m - 8), m + 8);
        }
        int status;
        ck_assert_msg(waitpid(g_agent, &status, WNOHANG) == 0, "the agent exited: %s",
                      text ? text : "");
        free(text);
        if (ready)
            return;
        ck_assert_msg(mcr_test_now_ms() < end, "the agent wrote no state");
        fe_nap();
    }
}

/* A follower: a router fed from the state, a lookup every 2 ms, until the
 * quit pipe closes. */
static void follower_main(void)
{
    mcr_router *r = NULL;
    close(g_quit[1]);
    if (mcr_router_new_from_state(g_state, 0, &r, NULL) != MCR_OK)
        _exit(3);
    char key[32];
    for (unsigned i = 0;; i++) {
        int n = snprintf(key, sizeof(key), "key-%u", i);
        if (mcr_router_locate_index(r, key, (size_t)n, NULL) == MCR_NO_SERVER)
            _exit(4);
        struct pollfd p = {g_quit[0], POLLIN, 0};
        if (poll(&p, 1, 2) != 0)
            break; /* closed */
    }
    mcr_router_free(r);
    _exit(0);
}

static void followers_start(int n)
{
    ck_assert_int_le(g_nfollowers + n, MAX_FOLLOWERS);
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            follower_main();
        }
        g_followers[g_nfollowers++] = pid;
    }
}

/* The live processes in the state's slots, and how many adopted epoch
 * `epoch` (and, with `id`, phase `phase` of migration `id`). */
static int adopted(int *live, uint64_t epoch, const char *id, mcr_migration_phase phase)
{
    char shm[700];
    mcr__shm m;
    mcr_error err;
    snprintf(shm, sizeof(shm), "%s.shm", g_state);
    ck_assert_msg(mcr__shm_open(shm, false, &m, &err) == MCR_OK, "%s", err.message);
    int n = 0, l = 0;
    for (uint32_t i = 0; i < m.h->nslots; i++) {
        mcr_state_process p;
        if (!mcr__shm_read_slot(&m, i, &p) || kill((pid_t)p.pid, 0) != 0)
            continue;
        l++;
        n += p.epoch == epoch && (id == NULL || (strcmp(p.migration_id, id) == 0 &&
                                                 p.phase == phase));
    }
    mcr__shm_close(&m);
    if (live != NULL)
        *live = l;
    return n;
}

static void wait_adopted(int want, uint64_t epoch)
{
    int64_t end = mcr_test_now_ms() + SEE_MS;
    int n = 0, live = 0;
    while ((n = adopted(&live, epoch, NULL, MCR_MIGRATION_NONE)) < want &&
           mcr_test_now_ms() < end)
        fe_nap();
    ck_assert_msg(n >= want, "%d of %d processes (%d live) adopted epoch %llu", n, want, live,
                  (unsigned long long)epoch);
}

/* The agent's registration: its epoch, and its host text into host. */
static uint64_t registered(const mcr_fleet_options *o, char *host, size_t cap)
{
    mcr_fleet_client c;
    if (!fe_client(o, AGENT_ID, &c, host, cap))
        return 0;
    return c.epoch;
}

static void wait_registered(const mcr_fleet_options *o, uint64_t epoch)
{
    char host[600];
    int64_t end = mcr_test_now_ms() + SEE_MS;
    while (registered(o, host, sizeof(host)) != epoch && mcr_test_now_ms() < end)
        fe_nap();
    ck_assert_uint_eq(registered(o, host, sizeof(host)), epoch);
}

/* ------------------------------------------------------------ tests */

/* 200 processes follow a change; etcd sees the change and the agent's
 * registration (one or two writes), not one write per process; the
 * registration waits for the slowest process and names it. */
START_TEST(change_reaches_all)
{
    mcr_fleet_options o;
    start(&o, "web", "10.1.0.1:11211,10.1.0.2:11211");
    agent_start("web");
    int n = tu_cases(200);
    followers_start(n);
    wait_adopted(n, 1);
    wait_registered(&o, 1);

    uint64_t rev0 = 0, rev1 = 0, epoch = 0;
    mcr_snapshot_unref(fe_read(&o, &rev0));
    mcr_error err;
    ck_assert_int_eq(fe_add(&o, "n3", "10.1.0.3", 11211, &epoch, &err), MCR_OK);
    ck_assert_uint_eq(epoch, 2);
    wait_adopted(n, 2);
    wait_registered(&o, 2);
    /* settle: nothing more is written for this change */
    nanosleep(&(struct timespec){0, 300 * 1000000}, NULL);
    mcr_snapshot_unref(fe_read(&o, &rev1));
    printf("change_reaches_all: %d processes, %llu etcd writes for one change\n", n,
           (unsigned long long)(rev1 - rev0));
    ck_assert_msg(rev1 - rev0 <= 3,
                  "%llu writes to etcd for one change with %d processes (the change, and the "
                  "agent's registration once or twice)",
                  (unsigned long long)(rev1 - rev0), n);

    /* one process stopped: the registration stays on its epoch and names it */
    pid_t slow = g_followers[n / 2];
    ck_assert_int_eq(kill(slow, SIGSTOP), 0);
    ck_assert_int_eq(fe_add(&o, "n4", "10.1.0.4", 11211, &epoch, &err), MCR_OK);
    wait_adopted(n - 1, 3);
    char host[600] = "", pidtext[64];
    snprintf(pidtext, sizeof(pidtext), "pid %d (epoch 2", (int)slow);
    int64_t end = mcr_test_now_ms() + SEE_MS; /* named within a second or so */
    while ((registered(&o, host, sizeof(host)) != 2 || strstr(host, pidtext) == NULL) &&
           mcr_test_now_ms() < end)
        fe_nap();
    ck_assert_uint_eq(registered(&o, host, sizeof(host)), 2);
    ck_assert_msg(strstr(host, pidtext) != NULL && strstr(host, "1 behind") != NULL, "%s", host);
    ck_assert_int_eq(kill(slow, SIGCONT), 0);
    wait_adopted(n, 3);
    wait_registered(&o, 3);
}
END_TEST

/* The agent killed: the processes keep the last state and serve; a change
 * meanwhile reaches them once a new agent runs. */
START_TEST(agent_restart)
{
    mcr_fleet_options o;
    start(&o, "web", "10.1.0.1:11211,10.1.0.2:11211");
    agent_start("web");
    followers_start(10);
    wait_adopted(10, 1);
    stop_pid(&g_agent);
    uint64_t epoch;
    mcr_error err;
    ck_assert_int_eq(fe_add(&o, "n3", "10.1.0.3", 11211, &epoch, &err), MCR_OK);
    nanosleep(&(struct timespec){0, 200 * 1000000}, NULL);
    int live = 0;
    ck_assert_int_eq(adopted(&live, 1, NULL, MCR_MIGRATION_NONE), 10); /* serving epoch 1 */
    ck_assert_int_eq(live, 10);
    for (int i = 0; i < g_nfollowers; i++) /* and alive: they look keys up all along */
        ck_assert_int_eq(waitpid(g_followers[i], NULL, WNOHANG), 0);
    agent_start("web");
    wait_adopted(10, 2);
    wait_registered(&o, 2);

    /* The state as an operand of diff: its snapshot (epoch 2, n3 in it). */
    run r = run_cli(NULL, 0, ARGS("diff", g_state, "10.1.0.1:11211,10.1.0.2:11211"));
    ck_assert_msg(r.status == 0 && strncmp(r.out, "moved\t", 6) == 0 &&
                      strstr(r.out, "\nn3\t10.1.0.") != NULL,
                  "diff STATE LIST: status %d, out %s, err %s", r.status, r.out, r.err);
    run_free(&r);
    r = run_cli(NULL, 0, ARGS("diff", "--mode", "modula", g_state, "10.1.0.1:11211"));
    ck_assert_msg(r.status == 2 && strstr(r.err, "is a host's state") != NULL,
                  "diff --mode with a state: status %d, err %s", r.status, r.err);
    run_free(&r);
}
END_TEST

/* mcroute migrate --etcd with processes behind the agent: every step
 * waits for every process; a stopped process holds a step, named. */
START_TEST(migrate_waits_for_processes)
{
    mcr_fleet_options o;
    rs_proc mc[3];
    char list2[128], list3[200];
    for (int i = 0; i < 3; i++)
        ck_assert_msg(rs_memcached_start(&mc[i], "127.0.0.1", 0, NULL, mcr_test_ms(10000)) == 0,
                      "memcached %d", i);
    snprintf(list2, sizeof(list2), "127.0.0.1:%d,127.0.0.1:%d", mc[0].port, mc[1].port);
    snprintf(list3, sizeof(list3), "%s,127.0.0.1:%d", list2, mc[2].port);
    start(&o, "web", list2);
    agent_start("web");
    followers_start(20);
    wait_adopted(20, 1);
    run r = run_cli_deadline(NULL, 0,
                             ARGS("migrate", "--etcd", g_ep, "--pool", "web", "--grace", "0.2",
                                  "--json", list3),
                             RUN_MS);
    ck_assert_msg(r.status == 0, "migrate: %d\n%s\n%s", r.status, r.out, r.err);
    ck_assert_msg(strstr(r.out, "\"result\": \"done\"") != NULL, "%s", r.out);
    run_free(&r);
    /* every process went through it: done, on epoch 2 */
    int64_t end = mcr_test_now_ms() + SEE_MS;
    mcr_migration m;
    ck_assert_int_eq(mcr_fleet_migration_read(&o, &m, NULL), MCR_OK);
    char id[64];
    snprintf(id, sizeof(id), "%s", m.id);
    mcr_migration_clear(&m);
    while (adopted(NULL, 2, id, MCR_MIGRATION_DONE) < 20 && mcr_test_now_ms() < end)
        fe_nap();
    ck_assert_int_eq(adopted(NULL, 2, id, MCR_MIGRATION_DONE), 20);

    /* back to two servers with one process stopped: the first step waits
     * for it and names it */
    pid_t slow = g_followers[7];
    ck_assert_int_eq(kill(slow, SIGSTOP), 0);
    r = run_cli_deadline(NULL, 0,
                         ARGS("migrate", "--etcd", g_ep, "--pool", "web", "--wait", "1", list2),
                         RUN_MS);
    char pidtext[32];
    snprintf(pidtext, sizeof(pidtext), "pid %d", (int)slow);
    ck_assert_msg(r.status == 1 && strstr(r.err, AGENT_ID) && strstr(r.err, pidtext),
                  "migrate: %d\n%s\n%s", r.status, r.out, r.err);
    run_free(&r);
    ck_assert_int_eq(kill(slow, SIGCONT), 0);
    r = run_cli_deadline(NULL, 0, ARGS("migrate", "--etcd", g_ep, "--pool", "web", "--abort"),
                         RUN_MS);
    ck_assert_msg(r.status == 0, "abort: %d\n%s\n%s", r.status, r.out, r.err);
    run_free(&r);
}
END_TEST

/* A follower with a real pool: NGETS gets through a pool on a router fed
 * from the state, then the pool freed (its counts published) and the
 * process waits for the quit pipe. */
#define NGETS 50
static pid_t pool_follower_start(void)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid != 0)
        return g_followers[g_nfollowers++] = pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(g_quit[1]);
    mcr_router *r = NULL;
    struct event_base *base = event_base_new();
    mcr_pool *pool = NULL;
    if (base == NULL || mcr_router_new_from_state(g_state, 0, &r, NULL) != MCR_OK ||
        mcr_pool_new(base, r, NULL, &pool, NULL) != MCR_OK)
        _exit(3);
    for (int i = 0; i < NGETS; i++) {
        char key[32];
        mcr_request q = {.op = MCR_OP_GET, .key = key};
        q.key_len = (size_t)snprintf(key, sizeof(key), "k%d", i);
        mcr_owned_result res;
        if (mcr_pool_exec(pool, &q, &res) != MCR_OK || res.reply != MCR_REPLY_MISS)
            _exit(4);
        mcr_owned_result_clear(&res);
    }
    mcr_pool_free(pool);
    struct pollfd p = {g_quit[0], POLLIN, 0};
    (void)poll(&p, 1, -1);
    mcr_router_free(r);
    event_base_free(base);
    _exit(0);
}

/* /metrics, parsed by python3-prometheus-client's text parser, agrees
 * with the processes, and gives the host's totals per server of what the
 * processes' pools published. */
START_TEST(metrics_scrape)
{
    mcr_fleet_options o;
    rs_proc mc;
    char list[64], server[64];
    ck_assert_msg(rs_memcached_start(&mc, "127.0.0.1", 0, NULL, mcr_test_ms(10000)) == 0,
                  "memcached");
    snprintf(list, sizeof(list), "127.0.0.1:%d", mc.port);
    snprintf(server, sizeof(server), "127.0.0.1:%d", mc.port);
    start(&o, "web", list);
    agent_start("web");
    followers_start(12);
    pool_follower_start();
    wait_adopted(13, 1);
    nanosleep(&(struct timespec){0, 300 * 1000000}, NULL); /* a slow tick of the agent */
    const char *script =
        "import sys, urllib.request, time\n"
        "from prometheus_client.parser import text_string_to_metric_families\n"
        "p = (('pool', 'web'),)\n"
        "srv = (('pool', 'web'), ('server', sys.argv[2]))\n"
        "for attempt in range(100):\n"
        "    text = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode()\n"
        "    v = {}\n"
        "    for fam in text_string_to_metric_families(text):\n"
        "        for s in fam.samples:\n"
        "            v[(s.name, tuple(sorted(s.labels.items())))] = s.value\n"
        "    if v.get(('mcroute_host_server_requests_total', srv), 0) >= int(sys.argv[3]):\n"
        "        break\n"
        "    time.sleep(0.1)\n"
        "print(int(v[('mcroute_epoch', p)]), int(v[('mcroute_following_processes', p)]),\n"
        "      int(v[('mcroute_processes', (('epoch', '1'), ('phase', 'none'), ('pool', 'web')))]),\n"
        "      int(v[('mcroute_processes_behind', p)]),\n"
        "      int(v[('mcroute_state_generation', p)]), len(v),\n"
        "      int(v[('mcroute_host_server_requests_total', srv)]),\n"
        "      int(v[('mcroute_host_server_misses_total', srv)]),\n"
        "      int(v[('mcroute_host_server_request_duration_seconds_count', srv)]))\n";
    char ngets[16];
    snprintf(ngets, sizeof(ngets), "%d", NGETS);
    char *const argv[] = {TU_PYTHON3, "-c", (char *)script, g_url, server, ngets, NULL};
    char *out = NULL;
    int rc = rs_run_log(argv, mcr_test_ms(30000), path_of("scrape.log"), &out);
    ck_assert_msg(rc == 0, "the scrape: %d: %s", rc, out ? out : "");
    unsigned long long epoch, total, at1, behind, gen, nmetrics, req, miss, lat;
    ck_assert_msg(sscanf(out, "%llu %llu %llu %llu %llu %llu %llu %llu %llu", &epoch, &total,
                         &at1, &behind, &gen, &nmetrics, &req, &miss, &lat) == 9,
                  "%s", out);
    ck_assert_uint_eq(epoch, 1);
    ck_assert_uint_eq(total, 13);
    ck_assert_uint_eq(at1, 13);
    ck_assert_uint_eq(behind, 0);
    ck_assert_uint_eq(gen, 1);
    ck_assert_uint_ge(nmetrics, 15);
    ck_assert_uint_eq(req, NGETS);
    ck_assert_uint_eq(miss, NGETS);
    ck_assert_uint_eq(lat, NGETS);
    free(out);
}
END_TEST

/* The agent's exit statuses at its start: etcd unreachable is a failure a
 * restart may outlive (1), no such pool bad input (2); neither writes a
 * state. */
START_TEST(start_failures)
{
    mcr_fleet_options o;
    start(&o, "web", "10.1.0.1:11211");
    char path[700];
    snprintf(path, sizeof(path), "%s.other", g_state);
    run r = run_cli_deadline(NULL, 0,
                             ARGS("agent", "--etcd", "http://127.0.0.1:1", "--pool", "web",
                                  "--state", path, "--etcd-timeout", "1"),
                             30000);
    ck_assert_msg(r.status == 1 && strstr(r.err, "unreachable") != NULL,
                  "etcd unreachable: status %d, err %s", r.status, r.err);
    run_free(&r);
    r = run_cli_deadline(NULL, 0,
                         ARGS("agent", "--etcd", g_ep, "--pool", "nosuch", "--state", path,
                              "--etcd-timeout", "5"),
                         30000);
    ck_assert_msg(r.status == 2 && strstr(r.err, "nosuch") != NULL,
                  "no such pool: status %d, err %s", r.status, r.err);
    run_free(&r);
    ck_assert_int_eq(access(path, F_OK), -1);
    char shm[720];
    snprintf(shm, sizeof(shm), "%s.shm", path);
    unlink(shm); /* opened (and locked) before the pool was read */
}
END_TEST

static Suite *agent_suite(void)
{
    Suite *s = suite_create("agent");
    const tu_case cases[] = {
        {"change_reaches_all", change_reaches_all},
        {"agent_restart", agent_restart},
        {"migrate_waits_for_processes", migrate_waits_for_processes},
        {"metrics_scrape", metrics_scrape},
        {"start_failures", start_failures},
    };
    tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]), mcr_test_sec(180), teardown);
    return s;
}

int main(void)
{
    return tu_run(agent_suite());
}
