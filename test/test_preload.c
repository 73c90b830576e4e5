/* SPDX-License-Identifier: BSD-3-Clause */
/* test_preload.c: libmcroute_preload.so in programs nobody changed: php with php-memcached and python3 with pylibmc (test/preload_php.php, test/preload_py.py), real memcached servers; every key at mcroute's owner, read back from the servers directly; a snapshot file and a host's state followed; 150 servers; nothing changed without the variables; a missing state said and retried. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mcroute_snapshot.h"
#include "mcroute_state.h"
#include "realserver.h"
#include "testutil.h"

#define NSERVERS 4
#define WAIT_MS 10000
#define RUN_MS 60000
#define PHP "/usr/bin/php"
#define PYTHON "/usr/bin/python3"
#define PHP_FPM "/usr/sbin/php-fpm8.2"
#define CGI_FCGI "/usr/bin/cgi-fcgi"

extern char **environ;

static rs_proc g_mc[NSERVERS];
static int g_fd[NSERVERS];
static char *g_dir;

static void servers_start(void)
{
    for (int i = 0; i < NSERVERS; i++) {
        ck_assert_msg(rs_memcached_start(&g_mc[i], "127.0.0.1", 0, NULL, WAIT_MS) == 0,
                      "memcached %d did not start (%s)", i, rs_memcached_path());
        g_fd[i] = rs_connect("127.0.0.1", g_mc[i].port, WAIT_MS);
        ck_assert_int_ge(g_fd[i], 0);
    }
    g_dir = tu_tmpdir("preload");
}

/* PHP-FPM's process group (its workers outlive a master that is killed). */
static pid_t g_fpm_group;

static void teardown(void)
{
    if (g_fpm_group > 0)
        kill(-g_fpm_group, SIGKILL);
    rs_stop_all();
}

/* The built preload module, beside the mcroute command. */
static const char *preload_path(void)
{
    static char path[1024];
    snprintf(path, sizeof(path), "%s", tu_cli_path());
    char *slash = strrchr(path, '/');
    ck_assert_ptr_nonnull(slash);
    snprintf(slash + 1, sizeof(path) - (size_t)(slash + 1 - path), "libmcroute_preload.so");
    ck_assert_msg(access(path, R_OK) == 0, "%s is missing: build target mcroute_preload", path);
    return path;
}

static const char *src_file(const char *name)
{
    static char path[2][1024];
    static int k;
    k ^= 1;
    snprintf(path[k], sizeof(path[k]), "%s/test/%s", tu_src_dir(), name);
    return path[k];
}

/* ------------------------------------------------------------ children */

/* A program run with the preload: standard input and output are pipes,
 * standard error goes to a file. */
typedef struct child {
    pid_t pid;
    int in, out;
    char err_path[700];
    char buf[1 << 16];
    size_t len;
} child;

/* Start argv with the environment of this process without MCROUTE_* and
 * LD_PRELOAD, plus LD_PRELOAD (unless `vars` sets it) and `vars` (NULL-
 * terminated "NAME=VALUE"). It gets SIGKILL if this process dies. */
static void child_start(child *c, const char *const *vars, const char *const *argv)
{
    const char *tool = argv[0];
    ck_assert_msg(access(tool, X_OK) == 0, "%s is missing (Debian: %s)", tool,
                  strcmp(tool, PHP) == 0        ? "php-cli php-memcached"
                  : strcmp(tool, PHP_FPM) == 0  ? "php8.2-fpm php-memcached"
                  : strcmp(tool, CGI_FCGI) == 0 ? "libfcgi-bin"
                                                : "python3 python3-pylibmc");
    bool own_preload = false;
    for (size_t i = 0; vars != NULL && vars[i] != NULL; i++)
        own_preload |= strncmp(vars[i], "LD_PRELOAD=", 11) == 0;
    static char preload[1100];
    snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", preload_path());
    size_t n = 0;
    while (environ[n] != NULL)
        n++;
    const char **env = calloc(n + 16, sizeof(*env));
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "MCROUTE_", 8) != 0 && strncmp(environ[i], "LD_PRELOAD=", 11) != 0)
            env[k++] = environ[i];
    if (!own_preload)
        env[k++] = preload;
    for (size_t i = 0; vars != NULL && vars[i] != NULL; i++)
        env[k++] = vars[i];
    env[k] = NULL;
    memset(c, 0, sizeof(*c));
    static unsigned nchild;
    snprintf(c->err_path, sizeof(c->err_path), "%s/child%u.err", g_dir, nchild++);
    int pin[2], pout[2];
    ck_assert_int_eq(pipe(pin), 0);
    ck_assert_int_eq(pipe(pout), 0);
    c->pid = fork();
    ck_assert_int_ge(c->pid, 0);
    if (c->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (strcmp(tool, PHP_FPM) == 0)
            setpgid(0, 0); /* a group of its own, with its workers */
        int e = open(c->err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(pin[0], 0);
        dup2(pout[1], 1);
        dup2(e, 2);
        rs_close_fds_from(3);
        execve(tool, (char *const *)argv, (char *const *)env);
        _exit(127);
    }
    free(env);
    close(pin[0]);
    close(pout[1]);
    c->in = pin[1];
    c->out = pout[0];
}

/* Read the child's output until `want` appears in it (NULL: until its
 * end), at most RUN_MS. */
static void child_read(child *c, const char *want)
{
    int64_t end = mcr_test_now_ms() + (int64_t)mcr_test_sec(RUN_MS / 1000.0) * 1000;
    while (want == NULL || strstr(c->buf, want) == NULL) {
        int64_t left = end - mcr_test_now_ms();
        ck_assert_msg(left > 0, "the child did not print \"%s\" in time; it printed: %s",
                      want != NULL ? want : "(its end)", c->buf);
        struct pollfd p = {c->out, POLLIN, 0};
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        ck_assert_msg(c->len + 1 < sizeof(c->buf), "the child printed too much");
        ssize_t r = read(c->out, c->buf + c->len, sizeof(c->buf) - 1 - c->len);
        if (r <= 0) {
            ck_assert_msg(want == NULL, "the child ended before printing \"%s\": %s", want,
                          c->buf);
            return;
        }
        c->len += (size_t)r;
        c->buf[c->len] = '\0';
    }
}

/* Its end: its exit status (checked 0) and standard error (malloc'd). */
static char *child_finish(child *c)
{
    close(c->in);
    child_read(c, NULL);
    close(c->out);
    int status = 0;
    ck_assert_int_eq(waitpid(c->pid, &status, 0), c->pid);
    char *err = tu_read_file(c->err_path, NULL);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "the child failed (status 0x%x): %s; it printed: %s", status,
                  err != NULL ? err : "", c->buf);
    /* every call went through the bridge's entry points */
    ck_assert_msg(err == NULL || strstr(err, "without passing its entry points") == NULL,
                  "calls bypassed the bridge: %s", err);
    return err != NULL ? err : strdup("");
}

/* Run to the end. */
static char *run(child *c, const char *const *vars, const char *const *argv)
{
    child_start(c, vars, argv);
    return child_finish(c);
}

#define ARGV(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ------------------------------------------------------------ placement */

static char *list_of(int n)
{
    static char list[512];
    list[0] = '\0';
    for (int i = 0; i < n; i++)
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s127.0.0.1:%d",
                 i ? "," : "", g_mc[i].port);
    return list;
}

static mcr_snapshot *snap_of(int n, uint64_t epoch)
{
    mcr_config *cfg = mcr_config_new();
    mcr_error err = {0};
    ck_assert_int_eq(mcr_config_add_servers(cfg, list_of(n), &err), MCR_OK);
    mcr_snapshot *s = NULL;
    ck_assert_msg(mcr_snapshot_new(cfg, epoch, &s, &err) == MCR_OK, "%s", err.message);
    mcr_config_free(cfg);
    return s;
}

/* The writer of a state at g_dir/NAME (mode 0600), its path in path. */
static mcr_state_writer *writer_at(const char *name, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", g_dir, name);
    mcr_state_writer_options o = {.slots = 32, .mode = 0600};
    mcr_state_writer *w = NULL;
    mcr_error err = {0};
    ck_assert_msg(mcr_state_writer_open(path, &o, &w, &err) == MCR_OK, "%s", err.message);
    return w;
}

/* Every key TAG:i (i < n) is held by its owner in s, with the key as its
 * value, and by no other server. */
static void placed(const mcr_snapshot *s, const char *tag, int n)
{
    for (int k = 0; k < n; k++) {
        char key[64], val[64];
        snprintf(key, sizeof(key), "%s:%d", tag, k);
        mcr_server_desc d;
        ck_assert_int_eq(mcr_snapshot_server(s, mcr_snapshot_locate(s, key, strlen(key)), &d),
                         MCR_OK);
        for (int i = 0; i < NSERVERS; i++) {
            int hit = rs_mc_get(g_fd[i], key, val, sizeof(val), WAIT_MS);
            ck_assert_int_ge(hit, 0);
            if (g_mc[i].port == d.port)
                ck_assert_msg(hit == 1 && strcmp(val, key) == 0,
                              "%s is not at its owner %s:%d", key, d.host, d.port);
            else
                ck_assert_msg(hit == 0, "%s is at port %d, its owner is %d", key, g_mc[i].port,
                              d.port);
        }
    }
}

/* ------------------------------------------------------------ tests */

/* pylibmc: a client made with a server of its own routes to mcroute's
 * servers (MCROUTE_SERVERS, MCROUTE_MODE), its clones too; one line says
 * that its own server was not applied. */
START_TEST(pylibmc_servers)
{
    servers_start();
    char vars[2][600];
    snprintf(vars[0], sizeof(vars[0]), "MCROUTE_SERVERS=%s", list_of(3));
    snprintf(vars[1], sizeof(vars[1]), "MCROUTE_MODE=ketama");
    child c;
    char *err = run(&c, ARGV(vars[0], vars[1]),
                    ARGV(PYTHON, src_file("preload_py.py"), "set", "py", "300", "clone", "pyc",
                         "100"));
    ck_assert_msg(strstr(c.buf, "py 300") && strstr(c.buf, "pyc 100"), "%s", c.buf);
    ck_assert_msg(strstr(err, "127.0.0.1:1) not applied") != NULL, "stderr: %s", err);
    mcr_snapshot *s = snap_of(3, 1);
    placed(s, "py", 300);
    placed(s, "pyc", 100);
    mcr_snapshot_unref(s);
    free(err);
}
END_TEST

/* Without the variables the preload changes nothing: the program's own
 * server gets every key. */
START_TEST(no_variables_no_change)
{
    servers_start();
    char own[64];
    snprintf(own, sizeof(own), "127.0.0.1:%d", g_mc[3].port);
    child c;
    char *err = run(&c, NULL, ARGV(PYTHON, src_file("preload_py.py"), "own", own, "set", "mine",
                                   "50"));
    ck_assert_msg(strstr(err, "mcroute") == NULL, "stderr: %s", err);
    char val[64];
    for (int k = 0; k < 50; k++) {
        char key[32];
        snprintf(key, sizeof(key), "mine:%d", k);
        for (int i = 0; i < NSERVERS; i++)
            ck_assert_int_eq(rs_mc_get(g_fd[i], key, val, sizeof(val), WAIT_MS), i == 3);
    }
    free(err);
}
END_TEST

/* php-memcached, its application asking for the consistent distribution
 * and a server of its own: MCROUTE_SNAPSHOT's servers, and a new snapshot
 * file taken within a second or so, by the same persistent handle. */
START_TEST(php_snapshot_follows)
{
    servers_start();
    mcr_snapshot *a = snap_of(2, 1), *b = snap_of(4, 2);
    char pa[700], pb[700], var[720];
    snprintf(pa, sizeof(pa), "%s/cur.snap", g_dir);
    snprintf(pb, sizeof(pb), "%s/next.snap", g_dir);
    mcr_error err = {0};
    ck_assert_int_eq(mcr_snapshot_save(a, pa, &err), MCR_OK);
    ck_assert_int_eq(mcr_snapshot_save(b, pb, &err), MCR_OK);
    snprintf(var, sizeof(var), "MCROUTE_SNAPSHOT=%s", pa);
    child c;
    char *e = run(&c, ARGV(var),
                  ARGV(PHP, src_file("preload_php.php"), "set", "pa", "200", "servers", "rename",
                       pb, pa, "wait", "4", "10000", "set", "pb", "200", "servers"));
    ck_assert_msg(strstr(c.buf, "set pa 200\nservers 2\nservers 4\nset pb 200\nservers 4\n"),
                  "%s", c.buf);
    placed(a, "pa", 200);
    placed(b, "pb", 200);
    free(e);
    mcr_snapshot_unref(a);
    mcr_snapshot_unref(b);
}
END_TEST

/* 150 servers in php-memcached's consistent mode: getServerByKey() names
 * mcroute's owner of every key. */
START_TEST(php_150_servers)
{
    g_dir = tu_tmpdir("preload");
    mcr_config *cfg = mcr_config_new();
    mcr_error err = {0};
    char list[150 * 24] = "";
    for (int i = 0; i < 150; i++)
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s127.0.%d.%d:%d",
                 i ? "," : "", 1 + i / 100, 1 + i % 100, 11211 + i % 2);
    ck_assert_int_eq(mcr_config_add_servers(cfg, list, &err), MCR_OK);
    mcr_snapshot *s = NULL;
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &s, &err), MCR_OK);
    mcr_config_free(cfg);
    char *var = malloc(strlen(list) + 32);
    sprintf(var, "MCROUTE_SERVERS=%s", list);
    child c;
    char *e = run(&c, ARGV(var), ARGV(PHP, src_file("preload_php.php"), "servers", "byk", "2000"));
    ck_assert_msg(strstr(c.buf, "servers 150\n") != NULL, "%s", c.buf);
    int lines = 0;
    for (char *p = strstr(c.buf, "bykey "); p != NULL; p = strstr(p + 1, "bykey ")) {
        char key[32], addr[64];
        ck_assert_int_eq(sscanf(p, "bykey %31s %63s", key, addr), 2);
        mcr_server_desc d;
        ck_assert_int_eq(mcr_snapshot_server(s, mcr_snapshot_locate(s, key, strlen(key)), &d),
                         MCR_OK);
        char want[64];
        snprintf(want, sizeof(want), "%s:%d", d.host, d.port);
        if (strcmp(addr, want) != 0)
            ck_abort_msg("%s: php-memcached says %s, mcroute %s", key, addr, want);
        lines++;
    }
    ck_assert_int_eq(lines, 2000);
    free(e);
    free(var);
    mcr_snapshot_unref(s);
}
END_TEST

/* MCROUTE_STATE: a host's state, and a new one written while the program
 * runs, taken at its next call. */
START_TEST(php_state_follows)
{
    servers_start();
    char path[700], var[720];
    mcr_state_writer *w = writer_at("web.state", path, sizeof(path));
    mcr_error err = {0};
    mcr_snapshot *a = snap_of(2, 1), *b = snap_of(4, 2);
    mcr_state_content st = {.pool = "web", .snapshot = a, .phase = MCR_MIGRATION_NONE};
    ck_assert_int_eq(mcr_state_write(w, &st, NULL, &err), MCR_OK);
    snprintf(var, sizeof(var), "MCROUTE_STATE=%s", path);
    child c;
    child_start(&c, ARGV(var),
                ARGV(PHP, src_file("preload_php.php"), "set", "sa", "200", "line", "wait", "4",
                     "10000", "set", "sb", "200"));
    child_read(&c, "ready\n");
    st.snapshot = b;
    ck_assert_int_eq(mcr_state_write(w, &st, NULL, &err), MCR_OK);
    ck_assert_int_eq(write(c.in, "go\n", 3), 3);
    char *e = child_finish(&c);
    ck_assert_msg(strstr(c.buf, "set sa 200\nready\nservers 4\nset sb 200\n"), "%s", c.buf);
    placed(a, "sa", 200);
    placed(b, "sb", 200);
    free(e);
    mcr_state_writer_free(w);
    mcr_snapshot_unref(a);
    mcr_snapshot_unref(b);
}
END_TEST

/* A state that is not there yet: calls fail (no servers, not the
 * program's own), a clear line says why; once written it is taken. */
START_TEST(missing_state_retried)
{
    servers_start();
    char path[700], var[720];
    snprintf(path, sizeof(path), "%s/later.state", g_dir);
    snprintf(var, sizeof(var), "MCROUTE_STATE=%s", path);
    child c;
    child_start(&c, ARGV(var),
                ARGV(PHP, src_file("preload_php.php"), "fail", "line", "wait", "2", "10000",
                     "set", "late", "50"));
    child_read(&c, "ready\n");
    ck_assert_msg(strstr(c.buf, "fail none") == NULL, "a set succeeded without servers: %s",
                  c.buf);
    mcr_state_writer *w = writer_at("later.state", path, sizeof(path));
    mcr_error err = {0};
    mcr_snapshot *a = snap_of(2, 1);
    mcr_state_content st = {.pool = "web", .snapshot = a, .phase = MCR_MIGRATION_NONE};
    ck_assert_int_eq(mcr_state_write(w, &st, NULL, &err), MCR_OK);
    ck_assert_int_eq(write(c.in, "go\n", 3), 3);
    char *e = child_finish(&c);
    ck_assert_msg(strstr(e, "no servers for libmemcached's handles yet") != NULL &&
                      strstr(e, "later.state") != NULL,
                  "stderr: %s", e);
    ck_assert_msg(strstr(c.buf, "servers 2\nset late 50\n"), "%s", c.buf);
    placed(a, "late", 50);
    free(e);
    mcr_state_writer_free(w);
    mcr_snapshot_unref(a);
}
END_TEST

/* ------------------------------------------------------------ a resize */

/* Every process in the state's slots (at least `want` of them) has
 * adopted generation `gen`; and the servers answered `gets` more gets
 * since: the workers went on in that phase. */
static void phase_reached(mcr_state_writer *w, uint64_t gen, size_t want, long long gets)
{
    int64_t end = mcr_test_now_ms() + (int64_t)mcr_test_sec(30) * 1000;
    long long base = -1, now = 0;
    for (;;) {
        mcr_state_process *p = NULL;
        size_t n = 0, done = 0;
        mcr_error err = {0};
        ck_assert_int_eq(mcr_state_processes(w, &p, &n, &err), MCR_OK);
        for (size_t i = 0; i < n; i++)
            done += p[i].generation >= gen;
        mcr_state_processes_free(p);
        now = 0;
        for (int i = 0; i < NSERVERS; i++)
            now += rs_mc_stat(g_fd[i], NULL, "cmd_get", WAIT_MS);
        if (done >= want && base < 0)
            base = now;
        if (base >= 0 && now - base >= gets)
            return;
        ck_assert_msg(mcr_test_now_ms() < end, "generation %llu: %zu of %zu processes adopted",
                      (unsigned long long)gen, done, want);
        struct timespec ts = {0, 5 * 1000000};
        nanosleep(&ts, NULL);
    }
}

/* A resize (3 servers to 4) that the host's state walks through its
 * phases while PHP and Python workers, with the preload, write, delete
 * and read their keys all along, and the keys that move are copied
 * (mcroute migrate): no read misses a key that was written, none reads an
 * older value or a deleted one. */
START_TEST(resize_php_python)
{
    servers_start();
    enum { WORKERS = 4, KEYS = 150 };
    char path[700], var[720], stop[700];
    snprintf(stop, sizeof(stop), "%s/stop", g_dir);
    mcr_state_writer *w = writer_at("web.state", path, sizeof(path));
    mcr_error err = {0};
    mcr_snapshot *from = snap_of(3, 1), *to = snap_of(4, 2);
    /* every worker's keys hold v0 at their owner */
    for (int wk = 0; wk < WORKERS; wk++)
        for (int k = 0; k < KEYS; k++) {
            char key[32];
            snprintf(key, sizeof(key), "w%d:%d", wk, k);
            mcr_server_desc d;
            ck_assert_int_eq(
                mcr_snapshot_server(from, mcr_snapshot_locate(from, key, strlen(key)), &d), MCR_OK);
            int i = 0;
            while (g_mc[i].port != d.port)
                i++;
            ck_assert_int_eq(rs_mc_set(g_fd[i], key, "v0", WAIT_MS), 0);
        }
    mcr_state_content st = {.pool = "web", .snapshot = from, .phase = MCR_MIGRATION_NONE};
    uint64_t g = 0;
    ck_assert_int_eq(mcr_state_write(w, &st, &g, &err), MCR_OK);
    snprintf(var, sizeof(var), "MCROUTE_STATE=%s", path);
    child c[WORKERS];
    for (int wk = 0; wk < WORKERS; wk++) {
        char prefix[16], seed[16], n[16];
        snprintf(prefix, sizeof(prefix), "w%d", wk);
        snprintf(seed, sizeof(seed), "%d", 1000 + wk);
        snprintf(n, sizeof(n), "%d", KEYS);
        if (wk % 2 == 0)
            child_start(&c[wk], ARGV(var), ARGV(PHP, src_file("preload_worker.php"), prefix, n,
                                                stop, seed));
        else
            child_start(&c[wk], ARGV(var), ARGV(PYTHON, src_file("preload_worker.py"), prefix,
                                                n, stop, seed));
        child_read(&c[wk], "ready\n");
    }
    phase_reached(w, g, WORKERS, 2000);

    /* copying, the copy, switched, closing, ended */
    st.migration_id = "grow";
    st.from = from;
    st.to = to;
    st.phase = MCR_MIGRATION_COPYING;
    ck_assert_int_eq(mcr_state_write(w, &st, &g, &err), MCR_OK);
    phase_reached(w, g, WORKERS, 2000);
    char *old_list = strdup(list_of(3)), *new_list = strdup(list_of(4));
    char *const argv[] = {(char *)tu_cli_path(), "migrate", old_list, new_list, NULL};
    char *out = NULL;
    ck_assert_msg(rs_run_log(argv, 60000, NULL, &out) == 0, "mcroute migrate: %s",
                  out != NULL ? out : "");
    free(out);
    phase_reached(w, g, WORKERS, 2000);
    st.snapshot = to;
    st.phase = MCR_MIGRATION_SWITCHED;
    ck_assert_int_eq(mcr_state_write(w, &st, &g, &err), MCR_OK);
    phase_reached(w, g, WORKERS, 2000);
    st.phase = MCR_MIGRATION_CLOSING;
    ck_assert_int_eq(mcr_state_write(w, &st, &g, &err), MCR_OK);
    phase_reached(w, g, WORKERS, 2000);
    st.phase = MCR_MIGRATION_NONE;
    st.migration_id = NULL;
    st.from = st.to = NULL;
    ck_assert_int_eq(mcr_state_write(w, &st, &g, &err), MCR_OK);
    phase_reached(w, g, WORKERS, 2000);

    FILE *f = fopen(stop, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    for (int wk = 0; wk < WORKERS; wk++) {
        char *e = child_finish(&c[wk]);
        long ops = 0, misses = -1, older = -1;
        const char *line = strstr(c[wk].buf, "ops ");
        ck_assert_msg(line != NULL && sscanf(line, "ops %ld misses %ld older %ld", &ops, &misses,
                                             &older) == 3,
                      "worker %d printed: %s", wk, c[wk].buf);
        ck_assert_msg(misses == 0 && older == 0,
                      "worker %d (%s): %ld ops, %ld misses, %ld older values: %.1500s", wk,
                      wk % 2 == 0 ? "php" : "python", ops, misses, older, e);
        ck_assert_msg(ops > 1000, "worker %d: only %ld ops", wk, ops);
        printf("resize: worker %d (%s): %ld ops, 0 misses, 0 older\n", wk,
               wk % 2 == 0 ? "php" : "python", ops);
        free(e);
    }
    free(old_list);
    free(new_list);
    mcr_state_writer_free(w);
    mcr_snapshot_unref(from);
    mcr_snapshot_unref(to);
}
END_TEST

/* ------------------------------------------------------------ PHP-FPM */

/* One FastCGI request of preload_fpm.php with `query`: the page's body. */
static void fcgi(int port, const char *query, char *body, size_t cap)
{
    char conn[64], script[800], qs[300];
    snprintf(conn, sizeof(conn), "127.0.0.1:%d", port);
    snprintf(script, sizeof(script), "SCRIPT_FILENAME=%s", src_file("preload_fpm.php"));
    snprintf(qs, sizeof(qs), "QUERY_STRING=%s", query);
    child c;
    char *e = run(&c, ARGV("LD_PRELOAD=", "REQUEST_METHOD=GET", "SCRIPT_NAME=/preload_fpm.php",
                           "GATEWAY_INTERFACE=CGI/1.1", "SERVER_PROTOCOL=HTTP/1.1", script, qs),
                  ARGV(CGI_FCGI, "-bind", "-connect", conn));
    free(e);
    const char *b = strstr(c.buf, "\r\n\r\n");
    b = b != NULL ? b + 4 : c.buf;
    size_t n = strlen(b) < cap - 1 ? strlen(b) : cap - 1;
    memcpy(body, b, n);
    body[n] = '\0';
}

/* PHP-FPM's master loads php-memcached with the preload and forks its
 * workers; each worker's persistent handle routes to mcroute's owners,
 * follows a new state at its next request, and the worker follows the
 * state as a process of its own (its slot, its generation). */
START_TEST(php_fpm_workers)
{
    servers_start();
    char path[700], var[720], conf[700], log[700];
    mcr_state_writer *w = writer_at("web.state", path, sizeof(path));
    mcr_error err = {0};
    mcr_snapshot *a = snap_of(2, 1), *b = snap_of(4, 2);
    mcr_state_content st = {.pool = "web", .snapshot = a, .phase = MCR_MIGRATION_NONE};
    ck_assert_int_eq(mcr_state_write(w, &st, NULL, &err), MCR_OK);

    int port, hold;
    ck_assert_int_eq(rs_reserve_ports("127.0.0.1", 1, &port, &hold), 0);
    snprintf(conf, sizeof(conf), "%s/fpm.conf", g_dir);
    snprintf(log, sizeof(log), "%s/fpm.log", g_dir);
    FILE *f = fopen(conf, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "[global]\nerror_log = %s\ndaemonize = no\npid = %s/fpm.pid\n"
            "[www]\n%slisten = 127.0.0.1:%d\npm = static\npm.max_children = 4\n"
            "clear_env = yes\ncatch_workers_output = yes\n",
            log, g_dir, geteuid() == 0 ? "user = root\ngroup = root\n" : "", port);
    fclose(f);
    snprintf(var, sizeof(var), "MCROUTE_STATE=%s", path);
    rs_release_ports(1, &hold);
    child fpm;
    child_start(&fpm, ARGV(var), ARGV(PHP_FPM, "-F", "-R", "-y", conf));
    setpgid(fpm.pid, fpm.pid); /* as the child does: whichever runs first */
    g_fpm_group = fpm.pid;
    ck_assert_msg(rs_wait_port("127.0.0.1", port, fpm.pid, WAIT_MS) == 0,
                  "php-fpm did not listen; its log: %s", tu_read_file(log, NULL));

    char body[512], tag[32], q[96];
    for (int i = 0; i < 8; i++) {
        snprintf(tag, sizeof(tag), "f1_%d", i);
        snprintf(q, sizeof(q), "tag=%s&n=30", tag);
        fcgi(port, q, body, sizeof(body));
        ck_assert_msg(strstr(body, "servers 2 set") != NULL, "%s: %s", q, body);
        placed(a, tag, 30);
    }
    uint64_t g2 = 0;
    st.snapshot = b;
    ck_assert_int_eq(mcr_state_write(w, &st, &g2, &err), MCR_OK);
    int pids[8];
    for (int i = 0; i < 8; i++) {
        snprintf(tag, sizeof(tag), "f2_%d", i);
        snprintf(q, sizeof(q), "tag=%s&n=30&servers=4", tag);
        fcgi(port, q, body, sizeof(body));
        ck_assert_msg(sscanf(body, "pid %d servers 4 set", &pids[i]) == 1, "%s: %s", q, body);
        placed(b, tag, 30);
    }
    /* every worker that answered follows the state in a slot of its own */
    mcr_state_process *p = NULL;
    size_t n = 0;
    ck_assert_int_eq(mcr_state_processes(w, &p, &n, &err), MCR_OK);
    for (int i = 0; i < 8; i++) {
        bool found = false;
        for (size_t j = 0; j < n; j++)
            found |= (int)p[j].pid == pids[i] && p[j].generation == g2;
        ck_assert_msg(found, "worker %d has no slot at generation %llu", pids[i],
                      (unsigned long long)g2);
    }
    mcr_state_processes_free(p);
    kill(fpm.pid, SIGTERM); /* the master stops its workers */
    child_finish(&fpm);
    g_fpm_group = 0;
    char *fl = tu_read_file(log, NULL);
    ck_assert_msg(fl == NULL || strstr(fl, "mcroute") == NULL, "php-fpm's log: %s", fl);
    free(fl);
    mcr_state_writer_free(w);
    mcr_snapshot_unref(a);
    mcr_snapshot_unref(b);
}
END_TEST

static Suite *preload_suite(void)
{
    Suite *s = suite_create("preload");
    const tu_case cases[] = {
        {"pylibmc_servers", pylibmc_servers},
        {"no_variables_no_change", no_variables_no_change},
        {"php_snapshot_follows", php_snapshot_follows},
        {"php_150_servers", php_150_servers},
        {"php_state_follows", php_state_follows},
        {"missing_state_retried", missing_state_retried},
        {"php_fpm_workers", php_fpm_workers},
        {"resize_php_python", resize_php_python},
    };
    tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]), mcr_test_sec(180), teardown);
    return s;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    return tu_run(preload_suite());
}
