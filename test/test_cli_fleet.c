/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cli_fleet.c: Check suite of mcroute members, watch and --etcd SOURCE, the real command run against a real etcd. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clirun.h"
#include "etcdserver.h"
#include "realserver.h"
#include "testutil.h"

/* How long a line of a running watch may take to come, and a command. */
#define LINE_MS mcr_test_ms(15000)
#define RUN_MS 30000 /* run_cli_deadline scales it */

/* The running test's etcd and watches, outside its stack frame: the checked
 * teardown frees and stops them when a failed assertion skipped that. */
static es_cluster *g_etcd;
static char *g_dir; /* the test's files */
#define MAX_WATCHES 4
typedef struct watch {
    pid_t pid;
    int out, err;          /* read ends of its stdout and stderr */
    char obuf[8192], ebuf[16384];
    size_t olen, elen;
} watch;
static watch *g_watches[MAX_WATCHES];

static void teardown(void)
{
    for (int i = 0; i < MAX_WATCHES; i++)
        if (g_watches[i] != NULL && g_watches[i]->pid > 0) {
            kill(g_watches[i]->pid, SIGKILL);
            waitpid(g_watches[i]->pid, NULL, 0);
            g_watches[i]->pid = 0;
        }
    es_free(g_etcd);
    g_etcd = NULL;
    rs_stop_all();
    run_free_all();
    tu_tmpdir_free(g_dir);
    g_dir = NULL;
}

static const char *etcd_start(void)
{
    g_etcd = es_start(1, "clifleet");
    ck_assert_msg(g_etcd != NULL, "es_start: %s", es_last_error());
    return es_endpoints(g_etcd);
}

/* ------------------------------------------------------------ running the CLI */

/* A run that must succeed; its stdout (the caller frees it with run_free). */
static run ok_run(const char *in, const char *const *argv)
{
    run r = run_cli_deadline(in, in ? strlen(in) : 0, argv, RUN_MS);
    ck_assert_msg(r.status == 0, "mcroute %s %s: status %d, stderr: %s", argv[1],
                  argv[2] ? argv[2] : "", r.status, r.err);
    return r;
}

/* A run that must exit 2, nothing on stdout, `needle` in its message. */
static void fails_with(const char *needle, const char *const *argv)
{
    run r = run_cli_deadline(NULL, 0, argv, RUN_MS);
    ck_assert_msg(r.status == 2, "mcroute %s %s: status %d (want 2), stderr: %s", argv[1],
                  argv[2] ? argv[2] : "", r.status, r.err);
    ck_assert_msg(r.outlen == 0, "mcroute %s: stdout not empty: %s", argv[1], r.out);
    ck_assert_msg(strstr(r.err, needle) != NULL, "mcroute %s %s: stderr \"%s\" lacks \"%s\"",
                  argv[1], argv[2] ? argv[2] : "", r.err, needle);
    run_free(&r);
}

/* A change subcommand: it prints exactly "epoch\tN\n". */
static void expect_epoch(unsigned long want, const char *const *argv)
{
    char line[64];
    run r = ok_run(NULL, argv);
    snprintf(line, sizeof(line), "epoch\t%lu\n", want);
    ck_assert_msg(strcmp(r.out, line) == 0, "mcroute %s %s: printed \"%s\", not \"%s\"", argv[1],
                  argv[2], r.out, line);
    run_free(&r);
}

/* Start `mcroute ARGS` with pipes on its stdout and stderr (stdin
 * /dev/null); it dies with the test process. */
static void watch_start(watch *w, const char *const *argv)
{
    int po[2], pe[2];
    memset(w, 0, sizeof(*w));
    ck_assert(pipe(po) == 0 && pipe(pe) == 0);
    pid_t parent = getpid();
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int devnull = open("/dev/null", O_RDONLY);
        dup2(devnull, 0);
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[0]);
        close(pe[0]);
        execv(tu_cli_path(), (char *const *)argv);
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    w->pid = pid;
    w->out = po[0];
    w->err = pe[0];
    for (int i = 0; i < MAX_WATCHES; i++)
        if (g_watches[i] == NULL) {
            g_watches[i] = w;
            break;
        }
}

/* Read what is there on fd into buf (append, NUL-terminated); 0 at EOF. */
static int drain(int fd, char *buf, size_t cap, size_t *len)
{
    ssize_t n = read(fd, buf + *len, cap - 1 - *len);
    if (n <= 0)
        return n == 0 ? 0 : (errno == EINTR || errno == EAGAIN);
    *len += (size_t)n;
    buf[*len] = '\0';
    return 1;
}

/* The next line of the watch's stdout (without its newline) into line,
 * waiting for it (event-driven: poll on the pipe) at most LINE_MS. Its
 * stderr is collected meanwhile. */
static void watch_line(watch *w, char *line, size_t cap)
{
    int64_t deadline = mcr_test_now_ms() + LINE_MS;
    for (;;) {
        char *nl = memchr(w->obuf, '\n', w->olen);
        if (nl != NULL) {
            size_t n = (size_t)(nl - w->obuf);
            ck_assert_uint_lt(n, cap);
            memcpy(line, w->obuf, n);
            line[n] = '\0';
            memmove(w->obuf, nl + 1, w->olen - n - 1);
            w->olen -= n + 1;
            w->obuf[w->olen] = '\0';
            return;
        }
        int64_t left = deadline - mcr_test_now_ms();
        ck_assert_msg(left > 0, "no line from the watch within %d ms (stdout \"%s\", stderr \"%s\")",
                      LINE_MS, w->obuf, w->ebuf);
        struct pollfd p[2] = {{w->out, POLLIN, 0}, {w->err, POLLIN, 0}};
        int rc = poll(p, 2, (int)left);
        ck_assert_msg(rc >= 0 || errno == EINTR, "poll: %s", strerror(errno));
        if (p[1].revents)
            drain(w->err, w->ebuf, sizeof(w->ebuf), &w->elen);
        if (p[0].revents)
            ck_assert_msg(drain(w->out, w->obuf, sizeof(w->obuf), &w->olen),
                          "the watch closed its stdout (stderr \"%s\")", w->ebuf);
    }
}

/* Wait until the watch's stderr holds `needle`, at most LINE_MS. */
static void watch_stderr_has(watch *w, const char *needle)
{
    int64_t deadline = mcr_test_now_ms() + LINE_MS;
    while (strstr(w->ebuf, needle) == NULL) {
        int64_t left = deadline - mcr_test_now_ms();
        ck_assert_msg(left > 0, "the watch's stderr \"%s\" lacks \"%s\" after %d ms", w->ebuf,
                      needle, LINE_MS);
        struct pollfd p = {w->err, POLLIN, 0};
        if (poll(&p, 1, (int)left) > 0)
            ck_assert_msg(drain(w->err, w->ebuf, sizeof(w->ebuf), &w->elen),
                          "the watch closed its stderr: \"%s\"", w->ebuf);
    }
}

/* Wait for the watch to exit by itself (at most LINE_MS): its status. */
static int watch_wait(watch *w)
{
    int64_t deadline = mcr_test_now_ms() + LINE_MS;
    int st;
    for (;;) {
        pid_t r = waitpid(w->pid, &st, WNOHANG);
        if (r == w->pid)
            break;
        ck_assert_msg(mcr_test_now_ms() < deadline, "the watch did not exit within %d ms",
                      LINE_MS);
        /* its stdout and stderr reach EOF when it exits: wait on them */
        struct pollfd p[2] = {{w->out, POLLIN, 0}, {w->err, POLLIN, 0}};
        poll(p, 2, 100);
        if (p[0].revents)
            drain(w->out, w->obuf, sizeof(w->obuf), &w->olen);
        if (p[1].revents)
            drain(w->err, w->ebuf, sizeof(w->ebuf), &w->elen);
    }
    while (drain(w->err, w->ebuf, sizeof(w->ebuf), &w->elen) > 0)
        ;
    w->pid = 0;
    close(w->out);
    close(w->err);
    for (int i = 0; i < MAX_WATCHES; i++)
        if (g_watches[i] == w)
            g_watches[i] = NULL;
    ck_assert_msg(WIFEXITED(st), "the watch was killed by signal %d", WTERMSIG(st));
    return WEXITSTATUS(st);
}

/* "EPOCH\tCHECKSUM\tSERVERS": the parts of a watch line. */
static void parse_watch_line(const char *line, unsigned long *epoch, char *sum, size_t *servers)
{
    char s[64];
    ck_assert_msg(sscanf(line, "%lu\t%32[0-9a-f]\t%zu", epoch, s, servers) == 3 &&
                      strlen(s) == 32,
                  "watch line \"%s\" is not EPOCH<TAB>CHECKSUM<TAB>SERVERS", line);
    strcpy(sum, s);
}

/* The "# epoch N checksum C" first line of show or status. */
static void parse_head(const char *out, unsigned long *epoch, char *sum)
{
    char s[64];
    ck_assert_msg(sscanf(out, "# epoch %lu checksum %32[0-9a-f]\n", epoch, s) == 2 &&
                      strlen(s) == 32,
                  "first line of \"%s\" is not '# epoch N checksum C'", out);
    strcpy(sum, s);
}

/* The checksum line of a snapshot file. */
static void file_checksum(const char *path, char *sum)
{
    char *t = tu_read_file(path, NULL);
    char *p = strstr(t, "\nchecksum ");
    ck_assert_msg(p != NULL, "%s: no checksum line", path);
    ck_assert_int_eq(sscanf(p, "\nchecksum %32s", sum), 1);
    free(t);
}

/* A file of the test's directory holding `text`; the path is static-ish
 * (one of a few rotating buffers). */
static const char *file_with(const char *name, const char *text)
{
    static char paths[8][512];
    static int next;
    char *p = paths[next++ % 8];
    if (g_dir == NULL)
        g_dir = tu_tmpdir("clifleet-files");
    snprintf(p, 512, "%s/%s", g_dir, name);
    tu_write_file(p, text, strlen(text));
    return p;
}

static const char *path_of(const char *name)
{
    static char paths[8][512];
    static int next;
    char *p = paths[next++ % 8];
    if (g_dir == NULL)
        g_dir = tu_tmpdir("clifleet-files");
    snprintf(p, 512, "%s/%s", g_dir, name);
    return p;
}

#define SERVERS                                                                                  \
    "# four servers\n"                                                                          \
    "10.0.0.1:11211 id=cache1 zone=a\n"                                                          \
    "10.0.0.2:11211 weight=2 zone=b id=cache2\n"                                                 \
    "10.0.0.3:11212:3\n"                                                                         \
    "[2001:db8::4]:11211 zone=c id=cache4\n"

/* ------------------------------------------------------------ publish, show */

/* publish -f, show, and show's output given back to -f: the same servers,
 * and the same snapshot (checksum) as the file's. */
START_TEST(publish_show_round_trip)
{
    const char *ep = etcd_start();
    const char *servers = file_with("servers", SERVERS);
    expect_epoch(1, ARGS("members", "publish", "--etcd", ep, "--pool", "web", "-f", servers));

    run r = ok_run(NULL, ARGS("members", "show", "--etcd", ep, "--pool", "web"));
    unsigned long epoch;
    char sum[40], fsum[40];
    parse_head(r.out, &epoch, sum);
    ck_assert_uint_eq(epoch, 1);
    ck_assert_msg(strstr(r.out, "10.0.0.2:11211 weight=2 zone=b id=cache2\n") != NULL, "%s",
                  r.out);
    ck_assert_msg(strstr(r.out, "[2001:db8::4]:11211 weight=1 zone=c id=cache4\n") != NULL, "%s",
                  r.out);
    ck_assert_msg(strstr(r.out, "10.0.0.3:11212 weight=3\n") != NULL, "%s", r.out);
    const char *shown = file_with("shown", r.out);
    run_free(&r);

    /* The shown file is a server file of the same servers: the snapshot
     * built from it is the pool's (epoch 1, same checksum), and the one
     * built from the original file. */
    run s = ok_run(NULL, ARGS("snapshot", "-f", shown, "-o", path_of("shown.snap")));
    run_free(&s);
    file_checksum(path_of("shown.snap"), fsum);
    ck_assert_str_eq(fsum, sum);
    s = ok_run(NULL, ARGS("snapshot", "-f", servers, "-o", path_of("orig.snap")));
    run_free(&s);
    file_checksum(path_of("orig.snap"), fsum);
    ck_assert_str_eq(fsum, sum);

    /* The same list again changes nothing: still epoch 1. */
    expect_epoch(1, ARGS("members", "publish", "--etcd", ep, "--pool", "web", "-f", shown));
    /* A list of another placement is refused, naming the parameter. */
    fails_with("mode", ARGS("members", "publish", "--etcd", ep, "--pool", "web", "-s",
                            "10.0.0.1", "--mode", "maglev"));
    /* A new list: the next epoch. */
    expect_epoch(2, ARGS("members", "publish", "--etcd", ep, "--pool", "web", "-s",
                         "10.0.0.1:11211,10.0.0.9"));
    r = ok_run(NULL, ARGS("members", "show", "--etcd", ep, "--pool", "web"));
    parse_head(r.out, &epoch, sum);
    ck_assert_uint_eq(epoch, 2);
    ck_assert_msg(strstr(r.out, "10.0.0.9:11211 weight=1\n") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "cache2") == NULL, "%s", r.out);
    run_free(&r);
}
END_TEST

/* add, remove, set-weight, set-state: each prints epoch N+1; bad ones
 * change nothing and exit 2. */
START_TEST(changes_one_epoch_each)
{
    const char *ep = etcd_start();
    const char *servers = file_with("servers", SERVERS);
#define POOL "--etcd", ep, "--pool", "db"
    expect_epoch(1, ARGS("members", "publish", POOL, "-f", servers));
    expect_epoch(2, ARGS("members", "add", POOL, "10.0.0.7:11211 weight=2 zone=b id=cache7"));
    expect_epoch(3, ARGS("members", "set-weight", POOL, "cache1", "5"));
    expect_epoch(4, ARGS("members", "set-state", POOL, "cache2", "draining"));
    /* options after the arguments too */
    expect_epoch(5, ARGS("members", "remove", "10.0.0.3:11212", POOL));
    expect_epoch(6, ARGS("members", "set-state", POOL, "cache4", "down"));
    expect_epoch(7, ARGS("members", "set-state", POOL, "cache4", "active"));

    run r = ok_run(NULL, ARGS("members", "show", POOL));
    unsigned long epoch;
    char sum[40];
    parse_head(r.out, &epoch, sum);
    ck_assert_uint_eq(epoch, 7);
    ck_assert_msg(strstr(r.out, "10.0.0.7:11211 weight=2 zone=b id=cache7\n"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "10.0.0.1:11211 weight=5 zone=a id=cache1\n"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "id=cache2 # state=draining\n"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "10.0.0.3") == NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "id=cache4\n"), "%s", r.out);
    run_free(&r);

    /* Bad changes: exit 2, named, nothing stored. */
    fails_with("no server has this id", ARGS("members", "remove", POOL, "nope"));
    fails_with("id already present", ARGS("members", "add", POOL, "10.0.0.8 id=cache1"));
    fails_with("server line: weight 0", ARGS("members", "add", POOL, "10.0.0.8 weight=0"));
    fails_with("server line: unknown attribute", ARGS("members", "add", POOL, "10.0.0.8 up=1"));
    fails_with("weight given twice",
               ARGS("members", "add", POOL, "10.0.0.8:11211:2 weight=3"));
    fails_with("expected SERVER", ARGS("members", "add", POOL));
    fails_with("unexpected argument 'x'", ARGS("members", "add", POOL, "10.0.0.8", "x"));
    fails_with("weight '0'", ARGS("members", "set-weight", POOL, "cache1", "0"));
    fails_with("weight 'x1'", ARGS("members", "set-weight", POOL, "cache1", "x1"));
    fails_with("state 'up'", ARGS("members", "set-state", POOL, "cache1", "up"));
    fails_with("unknown subcommand 'frob'", ARGS("members", "frob", POOL));
    fails_with("not valid here", ARGS("members", "show", POOL, "-s", "10.0.0.1"));
    fails_with("not valid here", ARGS("members", "add", POOL, "--hash", "md5", "10.0.0.8"));
    /* the last active servers cannot all go */
    expect_epoch(8, ARGS("members", "publish", POOL, "-s", "10.0.0.1:11211"));
    fails_with("active", ARGS("members", "set-state", POOL, "10.0.0.1:11211", "down"));
    r = ok_run(NULL, ARGS("members", "show", POOL));
    parse_head(r.out, &epoch, sum);
    ck_assert_uint_eq(epoch, 8);
    run_free(&r);
#undef POOL
}
END_TEST

/* A pool of mcrouter-wch3: weights written as mcrouter's decimals when
 * published, added, set and shown, and show's output published back is
 * the same snapshot. */
START_TEST(wch3_pool_decimal_weights)
{
    const char *ep = etcd_start();
#define POOL "--etcd", ep, "--pool", "mcr"
    expect_epoch(1, ARGS("members", "publish", POOL, "--client", "mcrouter-wch3", "-s",
                         "10.0.0.1:11211:1,10.0.0.2:11211:0.25,10.0.0.3:11211"));
    expect_epoch(2, ARGS("members", "add", POOL, "10.0.0.4:11211 weight=0.125 id=c4"));
    expect_epoch(3, ARGS("members", "add", POOL, "10.0.0.5:11211"));
    expect_epoch(4, ARGS("members", "set-weight", POOL, "10.0.0.1:11211", "0"));
    fails_with("expected a decimal from 0 to 1",
               ARGS("members", "set-weight", POOL, "10.0.0.1:11211", "2"));
    fails_with("outside 0..1", ARGS("members", "add", POOL, "10.0.0.6:11211 weight=3"));
    run r = ok_run(NULL, ARGS("members", "show", POOL));
    unsigned long epoch;
    char sum[40];
    parse_head(r.out, &epoch, sum);
    ck_assert_uint_eq(epoch, 4);
    ck_assert_msg(strstr(r.out, "--mode mcrouter-wch3") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "10.0.0.1:11211 weight=0.0\n") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "10.0.0.2:11211 weight=0.25\n") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "10.0.0.3:11211 weight=0.5\n") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "10.0.0.4:11211 weight=0.125 id=c4\n") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "10.0.0.5:11211 weight=0.5\n") != NULL, "%s", r.out);
    const char *shown = file_with("wch3-shown", r.out);
    run_free(&r);
    /* the same placement: publishing it again is no new epoch */
    expect_epoch(4, ARGS("members", "publish", POOL, "--client", "mcrouter-wch3", "-f", shown));
#undef POOL
}
END_TEST

/* publish --snapshot: the states come along, in one epoch; a new pool from
 * a snapshot file only when it can be its first epoch. */
START_TEST(publish_snapshot_states)
{
    const char *ep = etcd_start();
    const char *servers = file_with("servers", SERVERS);
#define POOL "--etcd", ep, "--pool", "snap"
    expect_epoch(1, ARGS("members", "publish", POOL, "-f", servers));
    expect_epoch(2, ARGS("members", "set-state", POOL, "cache2", "down"));
    run r = ok_run(NULL, ARGS("snapshot", POOL, "-o", path_of("e2.snap")));
    run_free(&r);
    /* A server list keeps the states of the servers that stay. */
    expect_epoch(2, ARGS("members", "publish", POOL, "-f", servers));
    expect_epoch(3, ARGS("members", "set-state", POOL, "cache2", "active"));
    /* The snapshot brings cache2's state back: one epoch. */
    expect_epoch(4, ARGS("members", "publish", POOL, "--snapshot", path_of("e2.snap")));
    r = ok_run(NULL, ARGS("members", "show", POOL));
    ck_assert_msg(strstr(r.out, "id=cache2 # state=down\n"), "%s", r.out);
    run_free(&r);
    expect_epoch(4, ARGS("members", "publish", POOL, "--snapshot", path_of("e2.snap")));

    /* A new pool: not from a snapshot with a server down ... */
    fails_with("cannot be its first epoch: server cache2 is down",
               ARGS("members", "publish", "--etcd", ep, "--pool", "fresh", "--snapshot",
                    path_of("e2.snap")));
    fails_with("no pool \"fresh\"", ARGS("members", "show", "--etcd", ep, "--pool", "fresh"));
    /* ... but from one whose servers are all active: the pool is that
     * snapshot, epoch 1, same checksum. */
    r = ok_run(NULL, ARGS("snapshot", "-f", servers, "--mode", "maglev", "-o",
                          path_of("m.snap")));
    run_free(&r);
    expect_epoch(1, ARGS("members", "publish", "--etcd", ep, "--pool", "fresh", "--snapshot",
                         path_of("m.snap")));
    r = ok_run(NULL, ARGS("members", "show", "--etcd", ep, "--pool", "fresh"));
    unsigned long epoch;
    char sum[40], fsum[40];
    parse_head(r.out, &epoch, sum);
    file_checksum(path_of("m.snap"), fsum);
    ck_assert_str_eq(sum, fsum);
    ck_assert_msg(strstr(r.out, "--mode maglev --hash md5"), "%s", r.out);
    run_free(&r);
    /* Another placement than the pool's is refused. */
    fails_with("placement parameters differ",
               ARGS("members", "publish", POOL, "--snapshot", path_of("m.snap")));
#undef POOL
}
END_TEST

/* ------------------------------------------------------------ --etcd as a SOURCE */

/* locate, dump, stats and diff through --etcd/--pool equal the same through
 * the equivalent server file. */
START_TEST(etcd_source_equals_file)
{
    const char *ep = etcd_start();
    const char *servers = file_with("servers", SERVERS);
    expect_epoch(1, ARGS("members", "publish", "--etcd", ep, "--pool", "web", "-f", servers));
    char *keys = malloc(2000 * 16);
    size_t o = 0;
    for (int i = 0; i < 2000; i++)
        o += (size_t)sprintf(keys + o, "key:%d\n", i);
    run a = ok_run(keys, ARGS("locate", "--etcd", ep, "--pool", "web"));
    run b = ok_run(keys, ARGS("locate", "-f", servers));
    ck_assert_uint_eq(a.outlen, b.outlen);
    ck_assert_msg(memcmp(a.out, b.out, a.outlen) == 0, "locate differs:\n%.300s\n---\n%.300s",
                  a.out, b.out);
    ck_assert_msg(strstr(a.out, "[2001:db8::4]:11211") != NULL, "%.300s", a.out);
    run_free(&a);
    run_free(&b);
    a = ok_run(NULL, ARGS("dump", "--etcd", ep, "--pool", "web"));
    b = ok_run(NULL, ARGS("dump", "-f", servers));
    ck_assert_msg(a.outlen == b.outlen && memcmp(a.out, b.out, a.outlen) == 0, "dump differs");
    run_free(&a);
    run_free(&b);
    a = ok_run(NULL, ARGS("diff", "--etcd", ep, "--pool", "web", servers));
    ck_assert_str_eq(a.out, "moved\t0.000000\n");
    run_free(&a);
    a = ok_run(NULL, ARGS("diff", servers, "--etcd", ep, "--pool", "web"));
    ck_assert_str_eq(a.out, "moved\t0.000000\n");
    run_free(&a);
    /* Two servers fewer: about the share they owned moves (ids compared). */
    a = ok_run(NULL, ARGS("diff", "--etcd", ep, "--pool", "web",
                          file_with("two", "10.0.0.1:11211 id=cache1 zone=a\n"
                                           "10.0.0.2:11211 weight=2 zone=b id=cache2\n")));
    ck_assert_msg(strncmp(a.out, "moved\t0.", 8) == 0 && strcmp(a.out, "moved\t0.000000\n") &&
                      strstr(a.out, "cache4\tcache") != NULL,
                  "%s", a.out);
    run_free(&a);
    /* A server drained through etcd owns no key there. */
    expect_epoch(2, ARGS("members", "set-state", "--etcd", ep, "--pool", "web", "cache1",
                         "draining"));
    a = ok_run(keys, ARGS("locate", "--etcd", ep, "--pool", "web"));
    ck_assert_msg(strstr(a.out, "\t10.0.0.1:11211\n") == NULL, "a draining server owns keys");
    run_free(&a);
    /* --etcd with another source, or without --pool, is bad input. */
    fails_with("give only one of", ARGS("locate", "--etcd", ep, "--pool", "web", "-s", "a", "k"));
    fails_with("--etcd needs --pool", ARGS("locate", "--etcd", ep, "k"));
    fails_with("do not apply to --etcd",
               ARGS("locate", "--etcd", ep, "--pool", "web", "--hash", "crc", "k"));
    fails_with("--etcd-prefix and --etcd-timeout apply only to --etcd",
               ARGS("locate", "-s", "a", "--etcd-timeout", "1", "k"));
    fails_with("--etcd-timeout '0'",
               ARGS("locate", "--etcd", ep, "--pool", "web", "--etcd-timeout", "0", "k"));
    fails_with("--etcd-timeout '1e3'",
               ARGS("locate", "--etcd", ep, "--pool", "web", "--etcd-timeout", "1e3", "k"));
    fails_with("pool name", ARGS("locate", "--etcd", ep, "--pool", "a/b", "k"));
    fails_with("key prefix", ARGS("locate", "--etcd", ep, "--pool", "web", "--etcd-prefix",
                                  "nope", "k"));
    /* another prefix is another pool */
    fails_with("no pool \"web\"", ARGS("locate", "--etcd", ep, "--pool", "web", "--etcd-prefix",
                                       "/other/", "k"));
    free(keys);
}
END_TEST

/* ------------------------------------------------------------ watch, status */

/* A running watch is a client: status counts it; it prints the first epoch,
 * then the next after a change by another mcroute; it unregisters when
 * it ends. */
START_TEST(watch_and_status)
{
    const char *ep = etcd_start();
    const char *servers = file_with("servers", SERVERS);
    expect_epoch(1, ARGS("members", "publish", "--etcd", ep, "--pool", "web", "-f", servers));
    run r = ok_run(NULL, ARGS("members", "status", "--etcd", ep, "--pool", "web"));
    unsigned long epoch, e2;
    char sum[40], wsum[40], line[256];
    size_t n;
    parse_head(r.out, &epoch, sum);
    ck_assert_msg(strchr(r.out, '\n')[1] == '\0', "clients before any watch: %s", r.out);
    run_free(&r);

    static watch w;
    watch_start(&w, ARGS("watch", "--etcd", ep, "--pool", "web", "--client-id", "watcher-1"));
    watch_line(&w, line, sizeof(line));
    parse_watch_line(line, &e2, wsum, &n);
    ck_assert_uint_eq(e2, 1);
    ck_assert_str_eq(wsum, sum);
    ck_assert_uint_eq(n, 4);

    /* The watch registers just after its first read, which its first line
     * may precede: ask until status counts it, bounded. */
    int64_t deadline = mcr_test_now_ms() + LINE_MS;
    for (;;) {
        r = ok_run(NULL, ARGS("members", "status", "--etcd", ep, "--pool", "web"));
        if (strstr(r.out, "\n1\t1\n") != NULL)
            break;
        ck_assert_msg(mcr_test_now_ms() < deadline, "status never counted the watch: %s",
                      r.out);
        run_free(&r);
    }
    run_free(&r);
    r = ok_run(NULL, ARGS("members", "status", "--etcd", ep, "--pool", "web", "--json"));
    ck_assert_msg(strstr(r.out, "\"epochs\": [{\"epoch\": 1, \"clients\": 1}]") != NULL, "%s",
                  r.out);
    ck_assert_msg(strstr(r.out, "{\"id\": \"watcher-1\", \"epoch\": 1, \"checksum\": \"") != NULL,
                  "%s", r.out);
    ck_assert_msg(strstr(r.out, " mcroute ") != NULL, "no host in %s", r.out);
    run_free(&r);

    /* A change by another process: the watch prints it. */
    expect_epoch(2, ARGS("members", "add", "--etcd", ep, "--pool", "web", "10.0.0.5"));
    watch_line(&w, line, sizeof(line));
    parse_watch_line(line, &e2, wsum, &n);
    ck_assert_uint_eq(e2, 2);
    ck_assert_uint_eq(n, 5);
    r = ok_run(NULL, ARGS("members", "show", "--etcd", ep, "--pool", "web"));
    parse_head(r.out, &epoch, sum);
    ck_assert_str_eq(wsum, sum);
    run_free(&r);
    expect_epoch(3, ARGS("members", "remove", "--etcd", ep, "--pool", "web", "10.0.0.5:11211"));
    watch_line(&w, line, sizeof(line));
    parse_watch_line(line, &e2, wsum, &n);
    ck_assert_uint_eq(e2, 3);
    ck_assert_uint_eq(n, 4);

    /* SIGTERM: a clean exit, unregistered. */
    kill(w.pid, SIGTERM);
    ck_assert_int_eq(watch_wait(&w), 0);
    r = ok_run(NULL, ARGS("members", "status", "--etcd", ep, "--pool", "web"));
    ck_assert_msg(strchr(r.out, '\n')[1] == '\0', "still a client after the watch ended: %s",
                  r.out);
    run_free(&r);

    /* --count: it stops by itself after N lines, exit 0, unregistered too. */
    static watch w2;
    watch_start(&w2, ARGS("watch", "--etcd", ep, "--pool", "web", "--count", "2"));
    watch_line(&w2, line, sizeof(line));
    parse_watch_line(line, &e2, wsum, &n);
    ck_assert_uint_eq(e2, 3);
    expect_epoch(4, ARGS("members", "set-weight", "--etcd", ep, "--pool", "web", "cache1", "4"));
    watch_line(&w2, line, sizeof(line));
    parse_watch_line(line, &e2, wsum, &n);
    ck_assert_uint_eq(e2, 4);
    ck_assert_int_eq(watch_wait(&w2), 0);
    ck_assert_msg(w2.olen == 0, "more after --count 2: %s", w2.obuf);

    /* --timeout: exit 0 without --count, 1 with fewer lines than --count. */
    r = ok_run(NULL, ARGS("watch", "--etcd", ep, "--pool", "web", "--timeout", "0.3"));
    ck_assert_msg(strncmp(r.out, "4\t", 2) == 0 && strchr(r.out, '\n')[1] == '\0', "%s", r.out);
    run_free(&r);
    r = run_cli_deadline(NULL, 0,
                         ARGS("watch", "--etcd", ep, "--pool", "web", "--timeout", "0.3",
                              "--count", "2"),
                         RUN_MS);
    ck_assert_msg(r.status == 1, "status %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.err, "1 of 2 lines") != NULL, "%s", r.err);
    run_free(&r);
    r = ok_run(NULL, ARGS("members", "status", "--etcd", ep, "--pool", "web"));
    ck_assert_msg(strchr(r.out, '\n')[1] == '\0', "a client left: %s", r.out);
    run_free(&r);
    fails_with("--count '0'", ARGS("watch", "--etcd", ep, "--pool", "web", "--count", "0"));
    fails_with("--timeout '-1'", ARGS("watch", "--etcd", ep, "--pool", "web", "--timeout=-1"));
    fails_with("not valid here", ARGS("watch", "--etcd", ep, "--pool", "web", "-s", "a"));
}
END_TEST

/* A value that does not verify: show exits 2 naming the key, a running
 * watch refuses it on stderr, keeps its snapshot and goes on. */
START_TEST(corrupted_value)
{
    const char *ep = etcd_start();
    const char *servers = file_with("servers", SERVERS);
    const char *key = "/mcroute/pools/web/snapshot";
    char line[256], wsum[40];
    unsigned long e;
    size_t n;
    expect_epoch(1, ARGS("members", "publish", "--etcd", ep, "--pool", "web", "-f", servers));
    static watch w;
    watch_start(&w, ARGS("watch", "--etcd", ep, "--pool", "web"));
    watch_line(&w, line, sizeof(line));
    parse_watch_line(line, &e, wsum, &n);
    ck_assert_uint_eq(e, 1);

    char *good = es_get(g_etcd, key);
    ck_assert_msg(good != NULL, "%s", es_last_error());
    /* One byte changed: the checksum no longer matches. */
    char *bad = strdup(good);
    char *p = strstr(bad, "weight=2");
    ck_assert_ptr_nonnull(p);
    p[7] = '3';
    ck_assert_msg(es_put(g_etcd, key, bad) == 0, "%s", es_last_error());
    fails_with(key, ARGS("members", "show", "--etcd", ep, "--pool", "web"));
    fails_with("checksum", ARGS("locate", "--etcd", ep, "--pool", "web", "k"));
    fails_with(key, ARGS("members", "add", "--etcd", ep, "--pool", "web", "10.0.0.9"));
    fails_with(key, ARGS("watch", "--etcd", ep, "--pool", "web", "--timeout", "0.2"));
    watch_stderr_has(&w, "refused");
    watch_stderr_has(&w, key);
    watch_stderr_has(&w, "kept epoch 1");
    ck_assert_msg(waitpid(w.pid, NULL, WNOHANG) == 0, "the watch exited on a bad value");

    /* Not a snapshot at all: refused as well. */
    size_t before = w.elen;
    ck_assert(es_put(g_etcd, key, "hello") == 0);
    fails_with(key, ARGS("members", "show", "--etcd", ep, "--pool", "web"));
    int64_t deadline = mcr_test_now_ms() + LINE_MS;
    while (strstr(w.ebuf + before, "refused") == NULL) {
        ck_assert_msg(mcr_test_now_ms() < deadline, "second refusal missing: %s", w.ebuf);
        struct pollfd pf = {w.err, POLLIN, 0};
        if (poll(&pf, 1, 100) > 0)
            drain(w.err, w.ebuf, sizeof(w.ebuf), &w.elen);
    }

    /* The good value back (the epoch it holds: nothing to print), then a
     * change: the watch goes on with epoch 2. */
    ck_assert(es_put(g_etcd, key, good) == 0);
    expect_epoch(2, ARGS("members", "set-weight", "--etcd", ep, "--pool", "web", "cache2", "7"));
    watch_line(&w, line, sizeof(line));
    parse_watch_line(line, &e, wsum, &n);
    ck_assert_uint_eq(e, 2);
    kill(w.pid, SIGINT);
    ck_assert_int_eq(watch_wait(&w), 0);
    free(good);
    free(bad);
}
END_TEST

/* ------------------------------------------------------------ failures */

START_TEST(missing_pool)
{
    const char *ep = etcd_start();
    const char *want = "no pool \"none\" in etcd";
#define NONE "--etcd", ep, "--pool", "none"
    fails_with(want, ARGS("members", "show", NONE));
    fails_with(want, ARGS("members", "status", NONE));
    fails_with(want, ARGS("members", "add", NONE, "10.0.0.1"));
    fails_with(want, ARGS("members", "remove", NONE, "a"));
    fails_with(want, ARGS("members", "set-weight", NONE, "a", "2"));
    fails_with(want, ARGS("members", "set-state", NONE, "a", "down"));
    fails_with(want, ARGS("locate", NONE, "k"));
    fails_with(want, ARGS("stats", NONE));
    fails_with(want, ARGS("get", NONE, "k"));
    fails_with(want, ARGS("snapshot", NONE, "-o", path_of("x.snap")));
    fails_with(want, ARGS("diff", NONE, "10.0.0.1"));
    fails_with(want, ARGS("watch", NONE, "--timeout", "5"));
#undef NONE
}
END_TEST

/* etcd unreachable: exit 2, naming the endpoint, within the bounded wait,
 * both for a port where nothing listens and for one that never answers. */
START_TEST(unreachable_etcd)
{
    int port, fd;
    char refused[64], silent[64];
    ck_assert_int_eq(rs_reserve_ports("127.0.0.1", 1, &port, &fd), 0);
    rs_release_ports(1, &fd); /* nothing listens there now */
    snprintf(refused, sizeof(refused), "http://127.0.0.1:%d", port);
    /* A listener that never accepts: connects succeed, nothing answers. */
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof(a);
    ck_assert(bind(l, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(l, 64) == 0 &&
              getsockname(l, (struct sockaddr *)&a, &al) == 0);
    snprintf(silent, sizeof(silent), "http://127.0.0.1:%d", ntohs(a.sin_port));

    const char *eps[] = {refused, silent};
    for (int i = 0; i < 2; i++) {
        const char *const *cmds[] = {
            ARGS("locate", "--etcd", eps[i], "--pool", "p", "--etcd-timeout", "1", "k"),
            ARGS("members", "show", "--etcd", eps[i], "--pool", "p", "--etcd-timeout", "1"),
            ARGS("members", "publish", "--etcd", eps[i], "--pool", "p", "--etcd-timeout", "1",
                 "-s", "10.0.0.1"),
            ARGS("watch", "--etcd", eps[i], "--pool", "p", "--etcd-timeout", "1"),
        };
        for (size_t k = 0; k < sizeof(cmds) / sizeof(cmds[0]); k++) {
            run r = run_cli_deadline(NULL, 0, cmds[k], RUN_MS);
            ck_assert_msg(r.status == 2, "%s %s against %s: status %d: %s", cmds[k][1],
                          cmds[k][2], eps[i], r.status, r.err);
            ck_assert_msg(strstr(r.err, "unreachable") != NULL && strstr(r.err, eps[i]) != NULL,
                          "%s: %s", cmds[k][1], r.err);
            ck_assert_msg(r.outlen == 0, "%s", r.out);
            /* It kept trying for the second it was given, and no longer
             * than that and a margin. */
            ck_assert_msg(r.ms >= 900 && r.ms <= mcr_test_ms(4000), "%s %s: %ld ms", cmds[k][1],
                          cmds[k][2], r.ms);
            run_free(&r);
        }
    }
    close(l);
}
END_TEST

/* Usage errors that need no etcd. */
START_TEST(bad_arguments)
{
    fails_with("expected a subcommand", ARGS("members"));
    fails_with("--etcd URL[,URL...] is required", ARGS("members", "show", "--pool", "p"));
    fails_with("--pool NAME is required", ARGS("members", "show", "--etcd", "127.0.0.1:1"));
    fails_with("--pool NAME is required", ARGS("watch", "--etcd", "127.0.0.1:1"));
    fails_with("no servers: give -s LIST, -f FILE or --snapshot FILE",
               ARGS("members", "publish", "--etcd", "127.0.0.1:1", "--pool", "p"));
    fails_with("not valid here",
               ARGS("members", "publish", "--etcd", "127.0.0.1:1", "--pool", "p", "-t", "x"));
    fails_with("give only one of", ARGS("members", "publish", "--etcd", "127.0.0.1:1", "--pool",
                                        "p", "-s", "a", "--snapshot", "x"));
    fails_with("unexpected argument", ARGS("members", "show", "--etcd", "127.0.0.1:1", "--pool",
                                           "p", "extra"));
    fails_with("with --etcd, expected NEW only",
               ARGS("diff", "--etcd", "127.0.0.1:1", "--pool", "p", "a", "b"));
    fails_with("apply only to --etcd", ARGS("diff", "--pool", "p", "a"));
    fails_with("--etcd given twice", ARGS("locate", "--etcd", "a", "--etcd", "b"));
    run r = ok_run(NULL, ARGS("help", "members"));
    ck_assert_msg(strstr(r.out, "set-weight ID W") != NULL, "%s", r.out);
    run_free(&r);
    r = ok_run(NULL, ARGS("members", "status", "--help"));
    ck_assert_msg(strncmp(r.out, "Usage: mcroute members", 22) == 0, "%s", r.out);
    run_free(&r);
    r = ok_run(NULL, ARGS("watch", "--help"));
    ck_assert_msg(strncmp(r.out, "Usage: mcroute watch", 20) == 0, "%s", r.out);
    run_free(&r);
}
END_TEST

static Suite *cli_fleet_suite(void)
{
    Suite *s = suite_create("cli_fleet");
    const tu_case cases[] = {
        {"publish_show", publish_show_round_trip},
        {"changes", changes_one_epoch_each},
        {"wch3_pool", wch3_pool_decimal_weights},
        {"publish_snapshot", publish_snapshot_states},
        {"etcd_source", etcd_source_equals_file},
        {"watch_status", watch_and_status},
        {"corrupted", corrupted_value},
        {"missing_pool", missing_pool},
        {"unreachable", unreachable_etcd},
        {"bad_arguments", bad_arguments},
    };
    tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]), mcr_test_sec(180), teardown);
    return s;
}

int main(void)
{
    return tu_run(cli_fleet_suite());
}
