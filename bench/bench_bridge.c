/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_bridge.c: the CPU a libmemcached call costs with the bridge (mcr_memcached_attach(), libmcroute_preload.so) against without it, in one run: C, php-memcached and pylibmc, a get and a 100-key multi-get, on real memcached servers. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "benchutil.h"
#include "mcroute_memcached_attach.h"
#include "realserver.h"

/*
 * What is measured, in one run.
 *
 *  C: two libmemcached handles on the same NSERVERS memcached servers:
 *     libmemcached's own ketama (MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, the
 *     weighted continuum most applications use) and one attached to an
 *     mcroute router of the same servers (mode weighted: the same
 *     placement). Each stores its KEYS
 *     keys, then per repetition: GETS memcached_get() of keys in a fixed
 *     pseudo-random order, and MGETS memcached_mget() of 100 keys with
 *     memcached_fetch_result() of all: the calling thread's CPU time
 *     (CLOCK_THREAD_CPUTIME_ID) per call, which is what the bridge adds to
 *     (the servers' time is the same for both). Repetitions interleaved,
 *     the side going first alternating; medians, and the ratio
 *     bridge / plain of the medians (at most 1.00: the bridge costs
 *     nothing).
 *  php and python: the same in a php-memcached script (the application
 *     asks for consistent hashing with libketama compatibility) and a
 *     pylibmc one (ketama), each run without the preload and with
 *     LD_PRELOAD=libmcroute_preload.so, MCROUTE_SERVERS (the same
 *     servers) and MCROUTE_CLIENT naming the placement the application
 *     asked for (php-memcached-ketama, pylibmc-ketama: every key stays
 *     where it was, as in a real switch); the script measures its own
 *     CPU (getrusage) over its loops only. Runs interleaved, medians.
 *
 *  Instructions: the CPU time of a call is mostly the kernel's (send,
 *     poll, recv: the same on both sides) and moves from run to run by
 *     more than the bridge can add or save. The instructions a process
 *     runs in user space do not: each side (C through this program's
 *     --count mode, php, python) runs under valgrind's callgrind with
 *     gets only, multi-gets only and neither; the differences over the
 *     call counts are the instructions per call, start-up and stores
 *     cancelled out. INSTR lines; skipped with a line saying so when
 *     valgrind is not installed (--quick skips them).
 */

#define NSERVERS 4
#define KEYS 2000
#define MGET_KEYS 100
#define WAIT_MS 10000
#define PHP "/usr/bin/php"
#define VALGRIND "/usr/bin/valgrind"
#define COUNT_GETS 1000
#define COUNT_MGETS 50
#define PYTHON "/usr/bin/python3"

const char *bench_program = "bench_bridge";

static struct {
    unsigned reps, gets, mgets, script_reps;
    bool quick;
} opt = {21, 20000, 1000, 5, false};

static rs_proc g_mc[NSERVERS];
static char g_list[512];
static char g_preload[1024];

static double thread_cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void key_of(char *buf, size_t cap, unsigned k)
{
    snprintf(buf, cap, "bench:%u:%08x", k, k * 2654435761u);
}

static void fail(const char *what)
{
    fprintf(stderr, "bench_bridge: %s\n", what);
    rs_stop_all();
    exit(1);
}

/* ------------------------------------------------------------ C */

static void store(memcached_st *m)
{
    char key[64];
    for (unsigned k = 0; k < KEYS; k++) {
        key_of(key, sizeof key, k);
        if (memcached_set(m, key, strlen(key), key, strlen(key), 0, 0) != MEMCACHED_SUCCESS)
            fail("a set failed");
    }
}

/* CPU ns per get over opt.gets gets. */
static double time_gets(memcached_st *m, uint64_t seed)
{
    char key[64];
    double t0 = thread_cpu_ns();
    for (unsigned i = 0; i < opt.gets; i++) {
        key_of(key, sizeof key, (unsigned)(bench_next_rand(&seed) % KEYS));
        size_t len;
        uint32_t flags;
        memcached_return_t rc;
        char *v = memcached_get(m, key, strlen(key), &len, &flags, &rc);
        if (v == NULL || len != strlen(key))
            fail("a get did not find its key");
        free(v);
    }
    return (thread_cpu_ns() - t0) / opt.gets;
}

/* CPU ns per 100-key multi-get (fetches included) over opt.mgets. */
static double time_mgets(memcached_st *m, uint64_t seed)
{
    static char kb[MGET_KEYS][64];
    const char *keys[MGET_KEYS];
    size_t lens[MGET_KEYS];
    double t0 = thread_cpu_ns();
    for (unsigned i = 0; i < opt.mgets; i++) {
        for (unsigned j = 0; j < MGET_KEYS; j++) {
            key_of(kb[j], sizeof kb[j], (unsigned)(bench_next_rand(&seed) % KEYS));
            keys[j] = kb[j];
            lens[j] = strlen(kb[j]);
        }
        if (memcached_mget(m, keys, lens, MGET_KEYS) != MEMCACHED_SUCCESS)
            fail("an mget failed");
        memcached_return_t rc;
        memcached_result_st *r;
        unsigned got = 0;
        while ((r = memcached_fetch_result(m, NULL, &rc)) != NULL) {
            got++;
            memcached_result_free(r);
        }
        if (got == 0)
            fail("an mget found nothing");
    }
    return (thread_cpu_ns() - t0) / opt.mgets;
}

static void report(const char *name, double *plain, double *bridge, unsigned n, double *ratio)
{
    double p = bench_median(plain, n), b = bench_median(bridge, n);
    double pmin = plain[0], pmax = plain[0], bmin = bridge[0], bmax = bridge[0];
    for (unsigned i = 1; i < n; i++) {
        pmin = plain[i] < pmin ? plain[i] : pmin;
        pmax = plain[i] > pmax ? plain[i] : pmax;
        bmin = bridge[i] < bmin ? bridge[i] : bmin;
        bmax = bridge[i] > bmax ? bridge[i] : bmax;
    }
    *ratio = b / p;
    printf("RESULT %s plain_us=%.3f bridge_us=%.3f ratio=%.3f plain_range=%.3f-%.3f "
           "bridge_range=%.3f-%.3f reps=%u\n",
           name, p / 1e3, b / 1e3, *ratio, pmin / 1e3, pmax / 1e3, bmin / 1e3, bmax / 1e3, n);
}

/* The two handles on g_list's servers: libmemcached's weighted ketama,
 * and one attached to a router of the same servers and the same placement
 * (mode weighted: each key on the same server, as a switch keeps it; *r,
 * *s: its router and snapshot, the caller's to free). */
static void make_handles(memcached_st **plain, memcached_st **bridged, mcr_router **r,
                         mcr_snapshot **s)
{
    mcr_config *cfg = mcr_config_new();
    mcr_error err = {0};
    if (mcr_config_add_servers(cfg, g_list, &err) != MCR_OK ||
        mcr_config_set_mode(cfg, MCR_MODE_WEIGHTED) != MCR_OK ||
        mcr_snapshot_new(cfg, 1, s, &err) != MCR_OK || mcr_router_new(*s, r, &err) != MCR_OK)
        fail(err.message);
    mcr_config_free(cfg);
    *plain = memcached_create(NULL);
    *bridged = memcached_create(NULL);
    memcached_behavior_set(*plain, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1);
    memcached_server_list_st list = memcached_servers_parse(g_list);
    if (list == NULL || memcached_server_push(*plain, list) != MEMCACHED_SUCCESS)
        fail("the server list does not parse");
    memcached_server_list_free(list);
    if (mcr_memcached_attach(*bridged, *r, 0, &err) != MCR_OK)
        fail(err.message);
}

static void run_c(double ratios[2])
{
    memcached_st *plain, *bridged;
    mcr_router *r;
    mcr_snapshot *s;
    make_handles(&plain, &bridged, &r, &s);
    store(plain);
    store(bridged);
    double *gp = bench_xmalloc(opt.reps * sizeof(double)), *gb = bench_xmalloc(opt.reps * sizeof(double));
    double *mp = bench_xmalloc(opt.reps * sizeof(double)), *mb = bench_xmalloc(opt.reps * sizeof(double));
    for (unsigned k = 0; k < opt.reps; k++) {
        uint64_t seed = 0x9e3779b97f4a7c15ull * (k + 1);
        if (k % 2 == 0) {
            gp[k] = time_gets(plain, seed);
            gb[k] = time_gets(bridged, seed);
            mp[k] = time_mgets(plain, seed);
            mb[k] = time_mgets(bridged, seed);
        } else {
            gb[k] = time_gets(bridged, seed);
            gp[k] = time_gets(plain, seed);
            mb[k] = time_mgets(bridged, seed);
            mp[k] = time_mgets(plain, seed);
        }
    }
    report("c_get", gp, gb, opt.reps, &ratios[0]);
    report("c_mget100", mp, mb, opt.reps, &ratios[1]);
    free(gp);
    free(gb);
    free(mp);
    free(mb);
    memcached_free(plain);
    memcached_free(bridged);
    mcr_router_free(r);
    mcr_snapshot_unref(s);
}

/* ------------------------------------------------------------ scripts */

static const char php_script[] =
    "$m = new Memcached();"
    "$m->setOption(Memcached::OPT_DISTRIBUTION, Memcached::DISTRIBUTION_CONSISTENT);"
    "$m->setOption(Memcached::OPT_LIBKETAMA_COMPATIBLE, true);"
    "foreach (explode(',', getenv('BENCH_SERVERS')) as $s) {"
    "  [$h, $p] = explode(':', $s); $m->addServer($h, (int)$p); }"
    "$n = (int)getenv('BENCH_KEYS'); $g = (int)getenv('BENCH_GETS');"
    "$mg = (int)getenv('BENCH_MGETS');"
    "$key = function ($k) { return sprintf('bench:%u:%08x', $k, ($k * 2654435761) & 0xffffffff); };"
    "for ($k = 0; $k < $n; $k++) { if (!$m->set($key($k), $key($k))) exit(1); }"
    "$cpu = function () { $r = getrusage(); return $r['ru_utime.tv_sec'] * 1e6 + "
    "  $r['ru_utime.tv_usec'] + $r['ru_stime.tv_sec'] * 1e6 + $r['ru_stime.tv_usec']; };"
    "mt_srand(7); $t = $cpu();"
    "for ($i = 0; $i < $g; $i++) { if ($m->get($key(mt_rand(0, $n - 1))) === false) exit(1); }"
    "$get = ($cpu() - $t) / max($g, 1); $t = $cpu();"
    "for ($i = 0; $i < $mg; $i++) { $ks = [];"
    "  for ($j = 0; $j < 100; $j++) $ks[] = $key(mt_rand(0, $n - 1));"
    "  if (!$m->getMulti($ks)) exit(1); }"
    "$mget = ($cpu() - $t) / max($mg, 1);"
    "printf(\"%.3f %.3f\\n\", $get, $mget);";

static const char py_script[] =
    "import os, random, resource, pylibmc\n"
    "servers = os.environ['BENCH_SERVERS'].split(',')\n"
    "m = pylibmc.Client(servers, binary=False, behaviors={'ketama': True})\n"
    "n = int(os.environ['BENCH_KEYS']); g = int(os.environ['BENCH_GETS'])\n"
    "mg = int(os.environ['BENCH_MGETS'])\n"
    "key = lambda k: 'bench:%u:%08x' % (k, (k * 2654435761) & 0xffffffff)\n"
    "for k in range(n):\n"
    "    m.set(key(k), key(k))\n"
    "def cpu():\n"
    "    r = resource.getrusage(resource.RUSAGE_SELF)\n"
    "    return (r.ru_utime + r.ru_stime) * 1e6\n"
    "rnd = random.Random(7)\n"
    "t = cpu()\n"
    "for i in range(g):\n"
    "    if m.get(key(rnd.randrange(n))) is None: raise SystemExit(1)\n"
    "get = (cpu() - t) / max(g, 1); t = cpu()\n"
    "for i in range(mg):\n"
    "    if not m.get_multi([key(rnd.randrange(n)) for j in range(100)]): raise SystemExit(1)\n"
    "mget = (cpu() - t) / max(mg, 1)\n"
    "print('%.3f %.3f' % (get, mget))\n";

/* The preload's placement for a script: the one its application asks
 * libmemcached for, so that each key stays on its server. */
static const char *client_of(const char *tool)
{
    return strcmp(tool, PHP) == 0 ? "MCROUTE_CLIENT=php-memcached-ketama"
                                  : "MCROUTE_CLIENT=pylibmc-ketama";
}

/* One run of a script (php or python), with the preload or not: its
 * CPU us per get and per multi-get. */
static void run_script(const char *tool, bool bridged, double *get_us, double *mget_us)
{
    char keys[32], gets[32], mgets[32], servers[600], mcs[600];
    snprintf(keys, sizeof keys, "BENCH_KEYS=%u", KEYS);
    snprintf(gets, sizeof gets, "BENCH_GETS=%u", opt.gets / 4);
    snprintf(mgets, sizeof mgets, "BENCH_MGETS=%u", opt.mgets / 4);
    snprintf(servers, sizeof servers, "BENCH_SERVERS=%s", g_list);
    snprintf(mcs, sizeof mcs, "MCROUTE_SERVERS=%s", g_list);
    char *const env_plain[] = {keys, gets, mgets, servers, "PATH=/usr/bin:/bin", NULL};
    char *const env_bridge[] = {keys, gets, mgets, servers, "PATH=/usr/bin:/bin", mcs,
                                (char *)client_of(tool), g_preload, NULL};
    int pfd[2];
    if (pipe(pfd) != 0)
        fail("pipe");
    pid_t pid = fork();
    if (pid < 0)
        fail("fork");
    if (pid == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        close(pfd[1]);
        if (strcmp(tool, PHP) == 0)
            execle(PHP, PHP, "-r", php_script, (char *)NULL, bridged ? env_bridge : env_plain);
        else
            execle(PYTHON, PYTHON, "-c", py_script, (char *)NULL,
                   bridged ? env_bridge : env_plain);
        _exit(127);
    }
    close(pfd[1]);
    char out[256] = "";
    size_t len = 0;
    ssize_t r;
    while (len + 1 < sizeof out && (r = read(pfd[0], out + len, sizeof out - 1 - len)) > 0)
        len += (size_t)r;
    out[len] = '\0';
    close(pfd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
        sscanf(out, "%lf %lf", get_us, mget_us) != 2) {
        fprintf(stderr, "bench_bridge: %s %s failed (status 0x%x): %s\n", tool,
                bridged ? "with the preload" : "plain", status, out);
        fail("a script failed (php-memcached or pylibmc missing?)");
    }
}

static void run_scripts(const char *tool, const char *name, double ratios[2])
{
    unsigned n = opt.script_reps;
    double *gp = bench_xmalloc(n * sizeof(double)), *gb = bench_xmalloc(n * sizeof(double));
    double *mp = bench_xmalloc(n * sizeof(double)), *mb = bench_xmalloc(n * sizeof(double));
    for (unsigned k = 0; k < n; k++) {
        bool first = k % 2 == 0;
        run_script(tool, !first, first ? &gp[k] : &gb[k], first ? &mp[k] : &mb[k]);
        run_script(tool, first, first ? &gb[k] : &gp[k], first ? &mb[k] : &mp[k]);
    }
    /* the scripts report microseconds: the report takes ns */
    for (unsigned k = 0; k < n; k++) {
        gp[k] *= 1e3;
        gb[k] *= 1e3;
        mp[k] *= 1e3;
        mb[k] *= 1e3;
    }
    char a[64], b[64];
    snprintf(a, sizeof a, "%s_get", name);
    snprintf(b, sizeof b, "%s_mget100", name);
    report(a, gp, gb, n, &ratios[0]);
    report(b, mp, mb, n, &ratios[1]);
    free(gp);
    free(gb);
    free(mp);
    free(mb);
}

/* ------------------------------------------------------------ instructions */

/* --count c-plain|c-bridge GETS MGETS: the C side's loops alone, on the
 * handle named, for a count under callgrind (the parent stored the keys;
 * BENCH_SERVERS names the servers). */
static int count_mode(const char *which, const char *gets, const char *mgets)
{
    const char *list = getenv("BENCH_SERVERS");
    if (list == NULL || strlen(list) >= sizeof g_list)
        fail("--count needs BENCH_SERVERS");
    strcpy(g_list, list);
    opt.gets = bench_arg_uint("bench_bridge", "--count GETS", gets, 0, 1000000);
    opt.mgets = bench_arg_uint("bench_bridge", "--count MGETS", mgets, 0, 1000000);
    memcached_st *plain, *bridged;
    mcr_router *r;
    mcr_snapshot *s;
    make_handles(&plain, &bridged, &r, &s);
    memcached_st *m = strcmp(which, "c-bridge") == 0 ? bridged : plain;
    if (opt.gets > 0)
        time_gets(m, 42);
    if (opt.mgets > 0)
        time_mgets(m, 42);
    memcached_free(plain);
    memcached_free(bridged);
    mcr_router_free(r);
    mcr_snapshot_unref(s);
    return 0;
}

/* The instructions `side` (c, PHP or PYTHON) runs in user space with
 * `gets` gets and `mgets` multi-gets, plain or bridged, counted by
 * callgrind. */
static double count_run(const char *side, bool bridged, unsigned gets, unsigned mgets)
{
    char keys[32], ngets[32], nmgets[32], servers[600], mcs[600], self[1024];
    snprintf(keys, sizeof keys, "BENCH_KEYS=%u", KEYS);
    snprintf(ngets, sizeof ngets, "%u", gets);
    snprintf(nmgets, sizeof nmgets, "%u", mgets);
    char bgets[48], bmgets[48];
    snprintf(bgets, sizeof bgets, "BENCH_GETS=%u", gets);
    snprintf(bmgets, sizeof bmgets, "BENCH_MGETS=%u", mgets);
    snprintf(servers, sizeof servers, "BENCH_SERVERS=%s", g_list);
    snprintf(mcs, sizeof mcs, "MCROUTE_SERVERS=%s", g_list);
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        fail("readlink /proc/self/exe");
    self[n] = '\0';
    char *env[] = {keys, bgets, bmgets, servers, "PATH=/usr/bin:/bin", "PYTHONHASHSEED=0",
                   NULL, NULL, NULL, NULL};
    if (bridged && strcmp(side, "c") != 0) {
        env[6] = mcs;
        env[7] = (char *)client_of(side);
        env[8] = g_preload;
    }
    int epipe[2];
    if (pipe(epipe) != 0)
        fail("pipe");
    pid_t pid = fork();
    if (pid < 0)
        fail("fork");
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(epipe[1], 2);
        close(epipe[0]);
        close(epipe[1]);
        const char *vg[] = {VALGRIND, "--tool=callgrind", "--callgrind-out-file=/dev/null"};
        if (strcmp(side, "c") == 0)
            execle(vg[0], vg[0], vg[1], vg[2], self, "--count", bridged ? "c-bridge" : "c-plain",
                   ngets, nmgets, (char *)NULL, env);
        else if (strcmp(side, PHP) == 0)
            execle(vg[0], vg[0], vg[1], vg[2], PHP, "-r", php_script, (char *)NULL, env);
        else
            execle(vg[0], vg[0], vg[1], vg[2], PYTHON, "-c", py_script, (char *)NULL, env);
        _exit(127);
    }
    close(epipe[1]);
    char buf[8192];
    size_t len = 0;
    double total = -1;
    for (;;) { /* callgrind's last lines: "==PID== Collected : N" */
        ssize_t r = read(epipe[0], buf + len, sizeof buf - 1 - len);
        if (r <= 0)
            break;
        len += (size_t)r;
        buf[len] = '\0';
        const char *c = strstr(buf, "Collected : ");
        if (c != NULL)
            total = strtod(c + 12, NULL);
        if (len > sizeof buf / 2) { /* keep the tail */
            memmove(buf, buf + len - 256, 256);
            len = 256;
        }
    }
    close(epipe[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || total < 0) {
        fprintf(stderr, "bench_bridge: counting %s %s failed (status 0x%x)\n", side,
                bridged ? "bridged" : "plain", status);
        fail("an instruction count failed");
    }
    return total;
}

/* Instructions per get and per multi-get of one side, plain and bridged. */
static void count_side(const char *side, const char *name)
{
    double per[2][2];
    for (int b = 0; b < 2; b++) {
        double none = count_run(side, b, 0, 0);
        per[b][0] = (count_run(side, b, COUNT_GETS, 0) - none) / COUNT_GETS;
        per[b][1] = (count_run(side, b, 0, COUNT_MGETS) - none) / COUNT_MGETS;
    }
    const char *what[2] = {"get", "mget100"};
    for (int k = 0; k < 2; k++)
        printf("INSTR %s_%s plain=%.0f bridge=%.0f added=%+.0f ratio=%.3f\n", name, what[k],
               per[0][k], per[1][k], per[1][k] - per[0][k], per[1][k] / per[0][k]);
}

/* ------------------------------------------------------------ main */

static void goal(const char *name, double ratio)
{
    printf("GOAL bridge_cpu_%s target=<=1.00x measured=%.3fx %s\n", name, ratio,
           ratio <= 1.0 ? "PASS" : "MISS");
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "--count") == 0)
        return count_mode(argv[2], argv[3], argv[4]);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            opt.quick = true;
            opt.reps = 3;
            opt.gets = 2000;
            opt.mgets = 100;
            opt.script_reps = 1;
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            opt.reps = bench_arg_uint(argv[0], "--reps", argv[++i], 1, 1001);
        } else {
            fprintf(stderr,
                    "usage: bench_bridge [--quick] [--reps N]\n"
                    "CPU per libmemcached get and 100-key multi-get with the bridge against\n"
                    "without it: C (mcr_memcached_attach), php-memcached and pylibmc (the\n"
                    "preload), on %d real memcached servers. Output: RESULT and GOAL lines;\n"
                    "exit 1 when a call fails or the setup does, never because of speed.\n",
                    NSERVERS);
            return 2;
        }
    }
    snprintf(g_preload, sizeof g_preload, "LD_PRELOAD=%s/libmcroute_preload.so",
             MCR_BENCH_BUILD_DIR);
    if (access(g_preload + 11, R_OK) != 0)
        fail("libmcroute_preload.so is not built (target mcroute_preload)");
    for (int i = 0; i < NSERVERS; i++) {
        if (rs_memcached_start(&g_mc[i], "127.0.0.1", 0, NULL, WAIT_MS) != 0)
            fail("memcached did not start");
        snprintf(g_list + strlen(g_list), sizeof g_list - strlen(g_list), "%s127.0.0.1:%d",
                 i ? "," : "", g_mc[i].port);
    }
    printf("INFO setup servers=%d keys=%u gets=%u mgets=%u reps=%u script_reps=%u "
           "build_type=%s\n",
           NSERVERS, KEYS, opt.gets, opt.mgets, opt.reps, opt.script_reps, MCR_BENCH_BUILD_TYPE);
    double c[2], php[2], py[2];
    run_c(c);
    run_scripts(PHP, "php", php);
    run_scripts(PYTHON, "python", py);
    if (!opt.quick && access(VALGRIND, X_OK) != 0) {
        printf("INFO instructions not counted: %s is not installed\n", VALGRIND);
    } else if (!opt.quick) {
        count_side("c", "c");
        count_side(PHP, "php");
        count_side(PYTHON, "python");
    }
    goal("c_get", c[0]);
    goal("c_mget100", c[1]);
    goal("php_get", php[0]);
    goal("php_mget100", php[1]);
    goal("python_get", py[0]);
    goal("python_mget100", py[1]);
    rs_stop_all();
    return 0;
}
