/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cli_pool.c: Check suite of mcroute set, get, delete and probe, run as real processes against real memcached servers. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mcroute.h"
#include "mcroute_snapshot.h"
#include "clirun.h"
#include "realserver.h"
#include "testutil.h"
#include "testutil_config.h"

#define START_MS mcr_test_ms(20000) /* generous deadlines, times MCR_TEST_TIME_SCALE */
#define IO_MS mcr_test_ms(10000)
#define MAX_SERVERS 4

/* Memcached servers on 127.0.0.1, ports picked by the kernel, and the
 * placement the CLI builds from their list (ketama, md5: the -s default). */
typedef struct cluster {
    int n;
    rs_proc mc[MAX_SERVERS];
    char list[512];
    mcr_snapshot *snap;
} cluster;

/* The running test's snapshot, outside its stack frame: a failed assertion
 * leaves the test without running its cluster_stop() (with CK_FORK=no
 * Check longjmps out of it), and the checked teardown frees it and stops
 * every server still running (realserver.c registers them), so no
 * memcached outlives its test and nothing leaks. */
static mcr_snapshot *g_snap;

static void cluster_start(cluster *c, int n)
{
    memset(c, 0, sizeof(*c));
    ck_assert_msg(rs_executable(rs_memcached_path()), "need %s (Debian package memcached)",
                  rs_memcached_path());
    c->n = n;
    size_t o = 0;
    for (int i = 0; i < n; i++) {
        ck_assert_msg(rs_memcached_start(&c->mc[i], "127.0.0.1", 0, NULL, START_MS) == 0,
                      "memcached %d did not start", i);
        o += (size_t)snprintf(c->list + o, sizeof(c->list) - o, "%s127.0.0.1:%d", i ? "," : "",
                              c->mc[i].port);
    }
    mcr_config *cfg = tu_config(c->list, MCR_MODE_KETAMA, MCR_HASH_COUNT);
    int rc = mcr_snapshot_new(cfg, 1, &c->snap, NULL);
    mcr_config_free(cfg);
    ck_assert_int_eq(rc, MCR_OK);
    g_snap = c->snap;
}

static void cluster_stop(cluster *c)
{
    for (int i = 0; i < c->n; i++)
        rs_stop(&c->mc[i]);
    mcr_snapshot_unref(c->snap);
    c->snap = NULL;
    g_snap = NULL;
}

static void texts_free_all(void);

/* Checked teardown: runs after every test, failed or not, in the test's
 * process (forked or not). */
static void teardown(void)
{
    rs_stop_all();
    mcr_snapshot_unref(g_snap);
    g_snap = NULL;
    run_free_all();
    texts_free_all();
}

/* The server (index into c->mc) that owns key. */
static int owner(const cluster *c, const char *key)
{
    return (int)mcr_snapshot_locate(c->snap, key, strlen(key));
}

/* Which of the n keys server i holds, asked with the test's own client. */
static void held_by(const cluster *c, int i, const char *const *keys, size_t n, unsigned char *hit)
{
    size_t *lens = calloc(n, sizeof(*lens));
    char err[256] = "";
    for (size_t k = 0; k < n; k++)
        lens[k] = strlen(keys[k]);
    int fd = rs_connect("127.0.0.1", c->mc[i].port, IO_MS);
    ck_assert_int_ge(fd, 0);
    ck_assert_msg(rs_mc_hits(fd, keys, lens, n, hit, IO_MS, err, sizeof(err)) == 0, "%s", err);
    close(fd);
    free(lens);
}

/* Store key = value on server i only, with the test's own client. */
static void raw_set(const cluster *c, int i, const char *key, const char *value)
{
    size_t len = strlen(key);
    char err[256] = "";
    int fd = rs_connect("127.0.0.1", c->mc[i].port, IO_MS);
    ck_assert_int_ge(fd, 0);
    ck_assert_msg(rs_mc_set_many(fd, &key, &len, 1, value, IO_MS, err, sizeof(err)) == 0, "%s",
                  err);
    close(fd);
}

/* A growing text buffer. */
typedef struct text {
    char *p;
    size_t len, cap;
} text;

/* Every text buffer not yet freed by text_free(), for the teardown: a
 * failed assertion skips the test's own frees. */
#define TEXTS_MAX 32
static char *g_texts[TEXTS_MAX];

static void text_track(char *old, char *now)
{
    for (int i = 0; i < TEXTS_MAX; i++)
        if (g_texts[i] == old) { /* old NULL: the first free slot */
            g_texts[i] = now;
            return;
        }
}

static void text_free(text *t)
{
    if (t->p != NULL)
        text_track(t->p, NULL);
    free(t->p);
    t->p = NULL;
    t->len = t->cap = 0;
}

static void texts_free_all(void)
{
    for (int i = 0; i < TEXTS_MAX; i++) {
        free(g_texts[i]);
        g_texts[i] = NULL;
    }
}

static void add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add(text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (t->len + (size_t)n + 1 > t->cap) {
        t->cap = (t->len + (size_t)n + 1) * 2;
        char *old = t->p, *p = realloc(t->p, t->cap);
        ck_assert_ptr_nonnull(p);
        t->p = p;
        text_track(old, p);
    }
    va_start(ap, fmt);
    vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* The value stored under key number i: tabs, spaces, an empty one, a long one. */
static void value_of(text *t, int i)
{
    switch (i % 5) {
    case 0: add(t, "value %d", i); break;
    case 1: add(t, "a\tb\t\tc %d", i); break;
    case 2: break; /* empty */
    case 3: add(t, "  spaces around %d  ", i); break;
    default:
        for (int k = 0; k < 300; k++)
            add(t, "%d-%d ", i, k);
        break;
    }
}

START_TEST(set_get_round_trip)
{
    cluster c;
    cluster_start(&c, 3);
    enum { N = 1000 };
    static char keys[N][48];
    const char *kp[N];
    text in = {0};
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "rt:%d:%08x", i, (unsigned)(i * 2654435761u));
        kp[i] = keys[i];
        add(&in, "%s\t", keys[i]);
        value_of(&in, i);
        add(&in, "\n");
    }
    run r = run_cli(in.p, in.len, ARGS("set", "-s", c.list));
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    ck_assert_uint_eq(r.outlen, 0);
    ck_assert_str_eq(r.err, "");
    run_free(&r);

    /* Every key went to the server the placement names, and only there. */
    unsigned char *hit = malloc(N);
    for (int s = 0; s < c.n; s++) {
        held_by(&c, s, kp, N, hit);
        for (int i = 0; i < N; i++)
            ck_assert_msg(hit[i] == (owner(&c, keys[i]) == s), "%s on server %d: %d", keys[i], s,
                          hit[i]);
    }
    free(hit);

    /* get from standard input: reversed, with misses and a repeated key
     * between; hits come out in input order, misses print nothing. */
    text q = {0}, want = {0};
    for (int i = N - 1; i >= 0; i--) {
        add(&q, "%s\n", keys[i]);
        add(&want, "%s\t", keys[i]);
        value_of(&want, i);
        add(&want, "\n");
        if (i % 100 == 0) {
            add(&q, "rt:missing:%d\n%s\n", i, keys[i]);
            add(&want, "%s\t", keys[i]);
            value_of(&want, i);
            add(&want, "\n");
        }
    }
    r = run_cli(q.p, q.len, ARGS("get", "-s", c.list));
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    ck_assert_str_eq(r.err, "");
    ck_assert_uint_eq(r.outlen, want.len);
    ck_assert_msg(memcmp(r.out, want.p, want.len) == 0, "get output differs");
    run_free(&r);

    /* keys as arguments; the last line of input may lack its newline */
    r = run_cli(NULL, 0, ARGS("get", "-s", c.list, keys[0], "rt:nope", keys[1]));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.out, "rt:0:00000000\tvalue 0\nrt:1:9e3779b1\ta\tb\t\tc 1\n");
    run_free(&r);
    r = run_cli("rt:last\tno newline", 18, ARGS("set", "-s", c.list, "--ttl", "0"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);
    r = run_cli("rt:last", 7, ARGS("get", "-s", c.list));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.out, "rt:last\tno newline\n");
    run_free(&r);
    text_free(&in);
    text_free(&q);
    text_free(&want);
    cluster_stop(&c);
}
END_TEST

START_TEST(miss_prints_nothing)
{
    cluster c;
    cluster_start(&c, 2);
    run r = run_cli(NULL, 0, ARGS("get", "-s", c.list, "never:1", "never:2"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_uint_eq(r.outlen, 0);
    ck_assert_str_eq(r.err, "");
    run_free(&r);
    r = run_cli("never:3\n", 8, ARGS("get", "-s", c.list, "--timeout", "2000"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_uint_eq(r.outlen, 0);
    run_free(&r);
    /* empty input: nothing to do */
    r = run_cli(NULL, 0, ARGS("get", "-s", c.list));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_uint_eq(r.outlen, 0);
    run_free(&r);
    cluster_stop(&c);
}
END_TEST

START_TEST(probe_finds_misplaced_keys)
{
    cluster c;
    cluster_start(&c, 3);
    const char *k1 = "probe:placed", *k2 = "probe:twice", *k3 = "probe:stray", *k4 = "probe:none";
    text in = {0};
    add(&in, "%s\tv1\n%s\tv2\n", k1, k2);
    run r = run_cli(in.p, in.len, ARGS("set", "-s", c.list));
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);
    /* k2 also on a server that does not own it, k3 only on such a server */
    int o2 = owner(&c, k2), w2 = (o2 + 1) % 3;
    int o3 = owner(&c, k3), w3 = (o3 + 2) % 3;
    raw_set(&c, w2, k2, "stale");
    raw_set(&c, w3, k3, "stray");

    r = run_cli(NULL, 0, ARGS("probe", "-s", c.list, k1, k2, k3, k4));
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    ck_assert_str_eq(r.err, "");
    text want = {0};
    char id[64];
#define ID(i) (snprintf(id, sizeof(id), "127.0.0.1:%d", c.mc[(i)].port), id)
    add(&want, "%s\t%s\t", k1, ID(owner(&c, k1)));
    add(&want, "%s\n", id);
    add(&want, "%s\t%s\t", k2, ID(o2));
    int lo = o2 < w2 ? o2 : w2, hi = o2 < w2 ? w2 : o2;
    add(&want, "%s,", ID(lo));
    add(&want, "%s\n", ID(hi));
    add(&want, "%s\t%s\t", k3, ID(o3));
    add(&want, "%s\n", ID(w3));
    add(&want, "%s\t%s\t-\n", k4, ID(owner(&c, k4)));
    ck_assert_str_eq(r.out, want.p);
    run_free(&r);
    /* no KEY: the keys are the lines of standard input, as for get */
    text keys = {0};
    add(&keys, "%s\n%s\n%s\n%s", k1, k2, k3, k4);
    r = run_cli(keys.p, keys.len, ARGS("probe", "-s", c.list));
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    ck_assert_str_eq(r.out, want.p);
    run_free(&r);
    r = run_cli("", 0, ARGS("probe", "-s", c.list, "--json"));
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    ck_assert_str_eq(r.out, "{\"keys\": []}\n");
    run_free(&r);

    /* --json: the same answers, in the same order */
    r = run_cli(NULL, 0, ARGS("probe", "-s", c.list, "--json", k1, k2, k3, k4));
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    text wj = {0};
    add(&wj, "{\"keys\": [\n  {\"key\": \"%s\", \"owner\": \"%s\", ", k1, ID(owner(&c, k1)));
    add(&wj, "\"holders\": [\"%s\"]},\n", id);
    add(&wj, "  {\"key\": \"%s\", \"owner\": \"%s\", ", k2, ID(o2));
    add(&wj, "\"holders\": [\"%s\", ", ID(lo));
    add(&wj, "\"%s\"]},\n", ID(hi));
    add(&wj, "  {\"key\": \"%s\", \"owner\": \"%s\", ", k3, ID(o3));
    add(&wj, "\"holders\": [\"%s\"]},\n", ID(w3));
    add(&wj, "  {\"key\": \"%s\", \"owner\": \"%s\", \"holders\": []}\n]}\n", k4,
        ID(owner(&c, k4)));
#undef ID
    ck_assert_str_eq(r.out, wj.p);
    ck_assert_str_eq(r.err, "");
    run_free(&r);
    r = run_cli(keys.p, keys.len, ARGS("probe", "-s", c.list, "--json"));
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    ck_assert_str_eq(r.out, wj.p);
    run_free(&r);
    text_free(&wj);
    text_free(&keys);

    /* a server that cannot be asked: the key fails, naming it */
    int dead = owner(&c, k4);
    rs_stop(&c.mc[dead]);
    r = run_cli(NULL, 0, ARGS("probe", "-s", c.list, "--timeout", "500", k4));
    ck_assert_int_eq(r.status, 1);
    ck_assert_uint_eq(r.outlen, 0);
    char prefix[128];
    snprintf(prefix, sizeof(prefix), "%s\terror\t127.0.0.1:%d: ", k4, c.mc[dead].port);
    ck_assert_msg(strncmp(r.err, prefix, strlen(prefix)) == 0, "stderr: %s", r.err);
    ck_assert_uint_eq(count_lines(r.err), 1);
    /* the server is named once, not again by the pool's message */
    ck_assert_msg(strncmp(r.err + strlen(prefix), prefix + strlen(k4) + 7,
                          strlen(prefix) - strlen(k4) - 7) != 0,
                  "stderr: %s", r.err);
    run_free(&r);
    /* with --json the failure is an item of the document too */
    r = run_cli(NULL, 0, ARGS("probe", "-s", c.list, "--timeout", "500", "--json", k4));
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strncmp(r.err, prefix, strlen(prefix)) == 0, "stderr: %s", r.err);
    snprintf(prefix, sizeof(prefix), "{\"keys\": [\n  {\"key\": \"%s\", \"error\": \"127.0.0.1:%d: ",
             k4, c.mc[dead].port);
    ck_assert_msg(strncmp(r.out, prefix, strlen(prefix)) == 0, "stdout: %s", r.out);
    ck_assert_msg(strcmp(r.out + r.outlen - 6, "\"}\n]}\n") == 0, "stdout: %s", r.out);
    run_free(&r);
    text_free(&in);
    text_free(&want);
    cluster_stop(&c);
}
END_TEST

/* --previous OLD: get reads through a transition from OLD (a miss at a
 * key's new owner read at its old one), set writes a moved key to both
 * owners, probe asks OLD's servers too and names the previous owner. */
START_TEST(previous_reads_through_a_transition)
{
    cluster c;
    cluster_start(&c, 3);
    char old_list[256];
    snprintf(old_list, sizeof(old_list), "127.0.0.1:%d,127.0.0.1:%d", c.mc[0].port,
             c.mc[1].port);
    enum { NK = 200 };
    text in = {0}, keys = {0};
    for (int i = 0; i < NK; i++) {
        add(&in, "pv:%d\tv%d\n", i, i);
        add(&keys, "pv:%d\n", i);
    }
    run r = run_cli(in.p, in.len, ARGS("set", "-s", old_list));
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);
    r = run_cli(keys.p, keys.len, ARGS("get", "-s", c.list));
    ck_assert_int_eq(r.status, 0);
    size_t plain = count_lines(r.out);
    ck_assert_msg(plain < NK && plain > NK / 2, "%zu of %d found without --previous", plain, NK);
    run_free(&r);
    r = run_cli(keys.p, keys.len, ARGS("get", "-s", c.list, "--previous", old_list));
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    ck_assert_uint_eq(count_lines(r.out), NK);
    ck_assert_msg(strstr(r.out, "pv:7\tv7\n") != NULL, "%s", r.out);
    run_free(&r);

    /* a key the third server takes: probe names its previous owner */
    char key[32];
    int k = 0;
    do
        snprintf(key, sizeof(key), "pv:%d", k++);
    while (owner(&c, key) != 2);
    mcr_config *cfg = tu_config(old_list, MCR_MODE_KETAMA, MCR_HASH_COUNT);
    mcr_snapshot *old = NULL;
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &old, NULL), MCR_OK);
    mcr_config_free(cfg);
    int prev = (int)mcr_snapshot_locate(old, key, strlen(key));
    mcr_snapshot_unref(old);
    r = run_cli(NULL, 0, ARGS("probe", "-s", c.list, "--previous", old_list, key));
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    char want[256];
    snprintf(want, sizeof(want), "%s\t127.0.0.1:%d\t127.0.0.1:%d\t127.0.0.1:%d\n", key,
             c.mc[2].port, c.mc[prev].port, c.mc[prev].port);
    ck_assert_str_eq(r.out, want);
    run_free(&r);

    /* set through the transition: both owners hold the new value */
    text one = {0};
    add(&one, "%s\tnew\n", key);
    r = run_cli(one.p, one.len, ARGS("set", "-s", c.list, "--previous", old_list));
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);
    const char *kp = key;
    unsigned char hit = 0;
    held_by(&c, 2, &kp, 1, &hit);
    ck_assert_int_eq(hit, 1);
    hit = 0;
    held_by(&c, prev, &kp, 1, &hit);
    ck_assert_int_eq(hit, 1);
    r = run_cli(NULL, 0, ARGS("get", "-s", old_list, key));
    snprintf(want, sizeof(want), "%s\tnew\n", key);
    ck_assert_str_eq(r.out, want);
    run_free(&r);

    /* refused: given twice; not a placement */
    r = run_cli(NULL, 0, ARGS("get", "-s", c.list, "--previous", old_list, "--previous",
                              old_list, key));
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, "--previous given twice") != NULL, "%s", r.err);
    run_free(&r);
    r = run_cli(NULL, 0, ARGS("get", "-s", c.list, "--previous", "no such:host", key));
    ck_assert_int_eq(r.status, 2);
    run_free(&r);
    text_free(&in);
    text_free(&keys);
    text_free(&one);
    cluster_stop(&c);
}
END_TEST

START_TEST(delete_keys)
{
    cluster c;
    cluster_start(&c, 3);
    text in = {0};
    for (int i = 0; i < 10; i++)
        add(&in, "del:%d\tvalue %d\n", i, i);
    run r = run_cli(in.p, in.len, ARGS("set", "-s", c.list));
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);
    r = run_cli(NULL, 0, ARGS("delete", "-s", c.list, "del:0", "del:1", "del:2", "never:there"));
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    ck_assert_uint_eq(r.outlen, 0);
    ck_assert_str_eq(r.err, "");
    run_free(&r);
    r = run_cli("del:3\ndel:4\n", 12, ARGS("delete", "-s", c.list));
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);
    text q = {0};
    for (int i = 0; i < 10; i++)
        add(&q, "del:%d\n", i);
    r = run_cli(q.p, q.len, ARGS("get", "-s", c.list));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.out, "del:5\tvalue 5\ndel:6\tvalue 6\ndel:7\tvalue 7\ndel:8\tvalue 8\n"
                            "del:9\tvalue 9\n");
    run_free(&r);
    text_free(&in);
    text_free(&q);
    cluster_stop(&c);
}
END_TEST

/* Lines of stderr that report a failed key: each "KEY\terror\t...", and the
 * set of keys must be exactly those owned by server `dead`. */
static void expect_failures_of(const cluster *c, const char *err, char keys[][32], int n, int dead)
{
    int want = 0;
    for (int i = 0; i < n; i++) {
        char line[64];
        snprintf(line, sizeof(line), "%s\terror\t", keys[i]);
        const char *p = strstr(err, line);
        int found = p != NULL && (p == err || p[-1] == '\n');
        ck_assert_msg(found == (owner(c, keys[i]) == dead), "%s (owner %d): error line %d",
                      keys[i], owner(c, keys[i]), found);
        want += found;
    }
    ck_assert_uint_eq(count_lines(err), (size_t)want);
    ck_assert_int_gt(want, 0);
}

START_TEST(killed_server)
{
    cluster c;
    cluster_start(&c, 3);
    enum { N = 300 };
    static char keys[N][32], fresh[N][32];
    text in = {0}, q = {0}, in2 = {0};
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "kill:%d", i);
        snprintf(fresh[i], sizeof(fresh[i]), "fresh:%d", i);
        add(&in, "%s\tv%d\n", keys[i], i);
        add(&in2, "%s\tw%d\n", fresh[i], i);
        add(&q, "%s\n", keys[i]);
    }
    run r = run_cli(in.p, in.len, ARGS("set", "-s", c.list));
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);
    const int dead = 1;
    rs_stop(&c.mc[dead]);

    /* get: the keys of the live servers still come, in order; each key of
     * the dead one is an error line; exit status 1 */
    r = run_cli(q.p, q.len, ARGS("get", "-s", c.list, "--timeout", "1000"));
    ck_assert_int_eq(r.status, 1);
    text want = {0};
    for (int i = 0; i < N; i++)
        if (owner(&c, keys[i]) != dead)
            add(&want, "%s\tv%d\n", keys[i], i);
    ck_assert_str_eq(r.out, want.p);
    expect_failures_of(&c, r.err, keys, N, dead);
    run_free(&r);

    /* set: the same, and the keys of the live servers are stored */
    r = run_cli(in2.p, in2.len, ARGS("set", "-s", c.list));
    ck_assert_int_eq(r.status, 1);
    ck_assert_uint_eq(r.outlen, 0);
    expect_failures_of(&c, r.err, fresh, N, dead);
    run_free(&r);
    const char *fp[N];
    unsigned char hit[N];
    for (int i = 0; i < N; i++)
        fp[i] = fresh[i];
    for (int s = 0; s < c.n; s++) {
        if (s == dead)
            continue;
        held_by(&c, s, fp, N, hit);
        for (int i = 0; i < N; i++)
            ck_assert_int_eq(hit[i], owner(&c, fresh[i]) == s);
    }

    /* delete: likewise */
    r = run_cli(q.p, q.len, ARGS("delete", "-s", c.list));
    ck_assert_int_eq(r.status, 1);
    expect_failures_of(&c, r.err, keys, N, dead);
    run_free(&r);

    text_free(&in);
    text_free(&in2);
    text_free(&q);
    text_free(&want);
    cluster_stop(&c);
}
END_TEST

START_TEST(eject_moves_keys_off_a_dead_server)
{
    /* More keys than are in flight at once: once the dead server is
     * ejected, the keys after it go to the others and are stored. */
    cluster c;
    cluster_start(&c, 3);
    const int dead = 2;
    rs_stop(&c.mc[dead]);
    enum { N = 3000 };
    text in = {0};
    int owned = 0;
    for (int i = 0; i < N; i++) {
        char k[32];
        snprintf(k, sizeof(k), "ej:%d", i);
        add(&in, "%s\tv\n", k);
        owned += owner(&c, k) == dead;
    }
    run r = run_cli(in.p, in.len, ARGS("set", "-s", c.list, "--failure-policy", "eject"));
    ck_assert_int_eq(r.status, 1);
    size_t failures = count_lines(r.err);
    ck_assert_uint_gt(failures, 0);
    ck_assert_msg(failures < (size_t)owned, "%zu failures of %d keys on the dead server", failures,
                  owned);
    run_free(&r);
    /* fail-fast: every key of the dead server fails */
    r = run_cli(in.p, in.len, ARGS("set", "-s", c.list, "--failure-policy", "fail-fast"));
    ck_assert_int_eq(r.status, 1);
    ck_assert_uint_eq(count_lines(r.err), (size_t)owned);
    run_free(&r);
    text_free(&in);
    cluster_stop(&c);
}
END_TEST

START_TEST(stopped_server_times_out)
{
    cluster c;
    cluster_start(&c, 3);
    enum { N = 60 };
    static char keys[N][32];
    text in = {0}, q = {0};
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "stop:%d", i);
        add(&in, "%s\tv%d\n", keys[i], i);
        add(&q, "%s\n", keys[i]);
    }
    run r = run_cli(in.p, in.len, ARGS("set", "-s", c.list));
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);
    const int dead = 0;
    ck_assert_int_eq(kill(c.mc[dead].pid, SIGSTOP), 0);

    /* The server accepts connections (the kernel does) but never answers:
     * --timeout bounds the wait; the other servers' keys still come. */
    /* bounds against a hang, not a speed test: under valgrind on a loaded
     * machine a get has taken 10.7 s */
    r = run_cli_deadline(q.p, q.len, ARGS("get", "-s", c.list, "--timeout", "300"), 120000);
    ck_assert_msg(r.status == 1, "status %d after %ld ms: %s", r.status, r.ms, r.err);
    ck_assert_msg(r.ms < mcr_test_ms(60000), "get took %ld ms", r.ms);
    text want = {0};
    for (int i = 0; i < N; i++)
        if (owner(&c, keys[i]) != dead)
            add(&want, "%s\tv%d\n", keys[i], i);
    ck_assert_str_eq(r.out, want.p);
    expect_failures_of(&c, r.err, keys, N, dead);
    ck_assert_msg(strstr(r.err, "no reply within 300 ms") != NULL, "no timeout reported: %s", r.err);
    run_free(&r);

    r = run_cli_deadline(in.p, in.len, ARGS("set", "-s", c.list, "--timeout", "300"), 120000);
    ck_assert_msg(r.status == 1, "status %d after %ld ms: %s", r.status, r.ms, r.err);
    ck_assert_msg(r.ms < mcr_test_ms(60000), "set took %ld ms", r.ms);
    expect_failures_of(&c, r.err, keys, N, dead);
    run_free(&r);

    kill(c.mc[dead].pid, SIGCONT);
    text_free(&in);
    text_free(&q);
    text_free(&want);
    cluster_stop(&c);
}
END_TEST

/* The TTL memcached holds for key on its owner: "mg KEY t" answers
 * "HD t<seconds left>" (-1: none), "EN" for a miss: returns -2. */
static long ttl_left(const cluster *c, const char *key)
{
    char line[300], reply[300];
    int fd = rs_connect("127.0.0.1", c->mc[owner(c, key)].port, IO_MS);
    ck_assert_int_ge(fd, 0);
    snprintf(line, sizeof(line), "mg %s t", key);
    int rc = rs_mc_command(fd, line, reply, sizeof(reply), IO_MS);
    close(fd);
    ck_assert_msg(rc == 0, "%s: no reply", line);
    if (strcmp(reply, "EN") == 0)
        return -2;
    const char *t = strstr(reply, " t");
    ck_assert_msg(strncmp(reply, "HD", 2) == 0 && t != NULL, "%s: %s", line, reply);
    return strtol(t + 2, NULL, 10);
}

/* --ttl reaches memcached, and an expired key is a miss for get. Not a
 * test of timing: the TTLs are read back from memcached, and the expiry is
 * waited for (memcached's clock has whole seconds), not slept for. Under
 * valgrind each CLI run takes seconds, so nothing assumes the short key is
 * still there when the next command runs. */
START_TEST(ttl_expires)
{
    cluster c;
    cluster_start(&c, 2);
    long long before = mcr_test_now_ms();
    run r = run_cli("ttl:a\tshort\n", 12, ARGS("set", "-s", c.list, "--ttl", "2"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);
    long left = ttl_left(&c, "ttl:a");
    /* a hit with at most 2 s left, or already gone: but only after 1 s */
    ck_assert_msg((left >= 0 && left <= 2) ||
                      (left == -2 && mcr_test_now_ms() - before >= 1000),
                  "ttl:a set with --ttl 2: %ld s left (-1 none, -2 missing) after %lld ms", left,
                  mcr_test_now_ms() - before);
    r = run_cli("ttl:b\tlong\n", 11, ARGS("set", "-s", c.list, "--ttl", "3600"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);
    left = ttl_left(&c, "ttl:b");
    ck_assert_msg(left > 3000 && left <= 3600, "ttl:b set with --ttl 3600: %ld s left", left);
    r = run_cli("ttl:c\tforever\n", 14, ARGS("set", "-s", c.list));
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);
    ck_assert_int_eq(ttl_left(&c, "ttl:c"), -1);

    /* wait for ttl:a to expire: at most 2 s after it was set, polled */
    long long deadline = mcr_test_now_ms() + mcr_test_ms(30000);
    while ((left = ttl_left(&c, "ttl:a")) != -2) {
        ck_assert_msg(mcr_test_now_ms() < deadline, "ttl:a (--ttl 2) still there, %ld s left",
                      left);
        struct timespec ts = {0, 100000000}; /* a poll interval, not a wait for time */
        nanosleep(&ts, NULL);
    }
    r = run_cli(NULL, 0, ARGS("get", "-s", c.list, "ttl:a", "ttl:b", "ttl:c"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.out, "ttl:b\tlong\nttl:c\tforever\n");
    run_free(&r);
    cluster_stop(&c);
}
END_TEST

START_TEST(other_sources)
{
    cluster c;
    cluster_start(&c, 2);
    char *dir = tu_tmpdir("clipool");
    char file[300], snap[300];
    snprintf(file, sizeof(file), "%s/servers", dir);
    snprintf(snap, sizeof(snap), "%s/ring.snap", dir);
    char body[300];
    snprintf(body, sizeof(body), "127.0.0.1:%d id=first\n127.0.0.1:%d id=second\n", c.mc[0].port,
             c.mc[1].port);
    tu_write_file(file, body, strlen(body));
    run r = run_cli(NULL, 0, ARGS("snapshot", "-f", file, "-o", snap));
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);
    text in = {0}, q = {0};
    for (int i = 0; i < 50; i++) {
        add(&in, "src:%d\t%d\n", i, i * i);
        add(&q, "src:%d\n", i);
    }
    r = run_cli(in.p, in.len, ARGS("set", "-f", file, "--failure-policy", "failover"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);
    r = run_cli(q.p, q.len, ARGS("get", "--snapshot", snap, "--failure-policy", "eject"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_uint_eq(count_lines(r.out), 50);
    ck_assert(strncmp(r.out, "src:0\t0\nsrc:1\t1\nsrc:2\t4\n", 24) == 0);
    run_free(&r);
    /* probe names servers by id */
    r = run_cli(NULL, 0, ARGS("probe", "--snapshot", snap, "src:7"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strcmp(r.out, "src:7\tfirst\tfirst\n") == 0 ||
                      strcmp(r.out, "src:7\tsecond\tsecond\n") == 0,
                  "%s", r.out);
    run_free(&r);
    /* a libmemcached option string */
    char opts[200];
    snprintf(opts, sizeof(opts), "--SERVER=127.0.0.1:%d --SERVER=127.0.0.1:%d", c.mc[0].port,
             c.mc[1].port);
    r = run_cli("lmc:1\tx\n", 8, ARGS("set", "-l", opts, "-b", "KETAMA_WEIGHTED=1"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);
    r = run_cli(NULL, 0, ARGS("get", "-l", opts, "-b", "KETAMA_WEIGHTED=1", "lmc:1"));
    ck_assert_str_eq(r.out, "lmc:1\tx\n");
    run_free(&r);
    /* a libketama server file and a nutcracker configuration */
    char kfile[300], yml[300];
    snprintf(kfile, sizeof(kfile), "%s/ketama.servers", dir);
    snprintf(yml, sizeof(yml), "%s/nutcracker.yml", dir);
    snprintf(body, sizeof(body), "127.0.0.1:%d\t100\n127.0.0.1:%d\t300\n", c.mc[0].port,
             c.mc[1].port);
    tu_write_file(kfile, body, strlen(body));
    snprintf(body, sizeof(body),
             "alpha:\n  listen: 127.0.0.1:22121\n  distribution: ketama\n  servers:\n"
             "   - 127.0.0.1:%d:1 one\n   - 127.0.0.1:%d:1 two\n",
             c.mc[0].port, c.mc[1].port);
    tu_write_file(yml, body, strlen(body));
    r = run_cli("kf:1\tketama\n", 12, ARGS("set", "-k", kfile));
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);
    r = run_cli("tw:1\ttwemproxy\n", 15, ARGS("set", "-t", yml, "-p", "alpha"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);
    r = run_cli(NULL, 0, ARGS("get", "-k", kfile, "kf:1", "tw:1"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert(strncmp(r.out, "kf:1\tketama\n", 12) == 0);
    run_free(&r);
    r = run_cli(NULL, 0, ARGS("get", "-t", yml, "tw:1"));
    ck_assert_str_eq(r.out, "tw:1\ttwemproxy\n");
    run_free(&r);
    r = run_cli(NULL, 0, ARGS("delete", "-t", yml, "tw:1"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);
    r = run_cli(NULL, 0, ARGS("get", "-t", yml, "tw:1"));
    ck_assert_str_eq(r.out, "");
    run_free(&r);
    tu_tmpdir_free(dir);
    text_free(&in);
    text_free(&q);
    cluster_stop(&c);
}
END_TEST

/* Keys that set wrote, asked on every server with the test's client. */
static size_t stored_anywhere(const cluster *c, const char *const *keys, size_t n)
{
    unsigned char hit[64];
    size_t found = 0;
    for (int s = 0; s < c->n; s++) {
        held_by(c, s, keys, n, hit);
        for (size_t i = 0; i < n; i++)
            found += hit[i];
    }
    return found;
}

/* A bad key or line fails alone (KEY<TAB>error<TAB>REASON, exit 1): the
 * other keys are stored, fetched or deleted. set once refused the whole
 * input, with exit 2, at the first bad key. */
START_TEST(bad_keys_fail_alone)
{
    cluster c;
    cluster_start(&c, 2);
    const char *L = c.list;
    size_t big = 1024 * 1024 + 1;
    text in = {0};
    add(&in, "ok:1\tone\n"
             "bad 2\tv\n"
             "ok:3\tthree\n"
             "no tab here\n"
             "\tempty key\n"
             "ok:6\tsix\n"
             "ctl\x01:7\tv\n"
             "\n"
             "big:9\t");
    for (size_t i = 0; i < big; i++)
        add(&in, "x");
    add(&in, "\nok:10\tten");
    run r = run_cli(in.p, in.len, ARGS("set", "-s", L));
    ck_assert_msg(r.status == 1, "status %d: %s", r.status, r.err);
    ck_assert_uint_eq(r.outlen, 0);
    ck_assert_str_eq(r.err,
                     "bad 2\terror\tline 2: the key contains a space or a control byte\n"
                     "no tab here\terror\tline 4: no TAB between the key and the value "
                     "(expected KEY<TAB>VALUE)\n"
                     "\terror\tline 5: the key is empty\n"
                     "ctl\\x01:7\terror\tline 7: the key contains a space or a control byte\n"
                     "\terror\tline 8: no TAB between the key and the value "
                     "(expected KEY<TAB>VALUE)\n"
                     "big:9\terror\tline 9: the value is 1048577 bytes, over the limit of "
                     "1048576\n");
    run_free(&r);
    text_free(&in);

    /* the good keys are really stored, on their owners; the bad ones nowhere */
    const char *good[] = {"ok:1", "ok:3", "ok:6", "ok:10"};
    unsigned char hit[4];
    for (int s = 0; s < c.n; s++) {
        held_by(&c, s, good, 4, hit);
        for (int i = 0; i < 4; i++)
            ck_assert_msg(hit[i] == (owner(&c, good[i]) == s), "%s on server %d: %d", good[i], s,
                          hit[i]);
    }
    const char *never[] = {"bad", "2", "big:9", "no", "ctl"};
    ck_assert_uint_eq(stored_anywhere(&c, never, 5), 0);
    const char get_in[] = "ok:1\nbad\x7f\nok:3\n\nok:10\n";
    r = run_cli(get_in, sizeof(get_in) - 1, ARGS("get", "-s", L));
    ck_assert_msg(r.status == 1, "status %d: %s", r.status, r.err);
    ck_assert_str_eq(r.out, "ok:1\tone\nok:3\tthree\nok:10\tten\n");
    ck_assert_str_eq(r.err, "bad\\x7f\terror\tline 2: the key contains a space or a control byte\n"
                            "\terror\tline 4: the key is empty\n");
    run_free(&r);

    /* arguments: no line number; every good key is done */
    char longkey[260];
    memset(longkey, 'k', 251);
    longkey[251] = '\0';
    r = run_cli(NULL, 0, ARGS("get", "-s", L, "ok:6", longkey, "ok:1"));
    ck_assert_int_eq(r.status, 1);
    ck_assert_str_eq(r.out, "ok:6\tsix\nok:1\tone\n");
    char want[400];
    snprintf(want, sizeof(want), "%s\terror\tthe key is longer than 250 bytes\n", longkey);
    ck_assert_str_eq(r.err, want);
    run_free(&r);
    r = run_cli(NULL, 0, ARGS("delete", "-s", L, "ok:1", "a b", "ok:3"));
    ck_assert_int_eq(r.status, 1);
    ck_assert_str_eq(r.err, "a b\terror\tthe key contains a space or a control byte\n");
    run_free(&r);
    const char *deleted[] = {"ok:1", "ok:3"};
    ck_assert_uint_eq(stored_anywhere(&c, deleted, 2), 0);
    r = run_cli("ok:6\n\n", 6, ARGS("delete", "-s", L));
    ck_assert_int_eq(r.status, 1);
    ck_assert_str_eq(r.err, "\terror\tline 2: the key is empty\n");
    run_free(&r);
    ck_assert_uint_eq(stored_anywhere(&c, good + 2, 1), 0);
    r = run_cli(NULL, 0, ARGS("probe", "-s", L, "", "ok:10"));
    ck_assert_int_eq(r.status, 1);
    ck_assert_str_eq(r.err, "\terror\tthe key is empty\n");
    ck_assert_msg(strncmp(r.out, "ok:10\t", 6) == 0, "%s", r.out);
    run_free(&r);
    r = run_cli(NULL, 0, ARGS("probe", "-s", L, "--json", "a b"));
    ck_assert_int_eq(r.status, 1);
    ck_assert_str_eq(r.out, "{\"keys\": [\n  {\"key\": \"a b\", \"error\": \"the key contains a "
                            "space or a control byte\"}\n]}\n");
    run_free(&r);
    cluster_stop(&c);
}
END_TEST

/* A key or value that holds control bytes cannot drive the terminal that
 * shows it: error lines always escape the key (\xHH), standard output
 * escapes keys and values when it is a terminal, and into a pipe they stay
 * byte for byte. */
START_TEST(terminal_escapes)
{
    cluster c;
    cluster_start(&c, 2);
    const char *L = c.list;
    static const char in[] = "esc:1\t\x1b[2Jred\x9b\\end\n"
                             "bad\x1b]0;owned\x07\tv\n"
                             "csi\xc2\x9b" "2J\tv2\n";
    run r = run_cli(in, sizeof(in) - 1, ARGS("set", "-s", L));
    ck_assert_int_eq(r.status, 1);
    ck_assert_str_eq(r.err, "bad\\x1b]0;owned\\x07\terror\tline 2: the key contains a space or "
                            "a control byte\n");
    run_free(&r);
    /* a pipe: byte for byte */
    r = run_cli(NULL, 0, ARGS("get", "-s", L, "esc:1", "csi\xc2\x9b" "2J"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.out, "esc:1\t\x1b[2Jred\x9b\\end\ncsi\xc2\x9b" "2J\tv2\n");
    run_free(&r);
    /* a bad key given as an argument: its error line is escaped */
    r = run_cli(NULL, 0, ARGS("get", "-s", L, "k\x1b[31m", "esc:1"));
    ck_assert_int_eq(r.status, 1);
    ck_assert_str_eq(r.err, "k\\x1b[31m\terror\tthe key contains a space or a control byte\n");
    run_free(&r);
    r = run_cli(NULL, 0, ARGS("delete", "-s", L, "\r\nforged\terror\tline"));
    ck_assert_int_eq(r.status, 1);
    ck_assert_str_eq(r.err, "\\x0d\\x0aforged\\x09error\\x09line\terror\tthe key contains a space "
                            "or a control byte\n");
    run_free(&r);
    /* a terminal: escaped, keys and values */
    int st;
    char *tty = run_cli_pty(ARGS("get", "-s", L, "esc:1", "csi\xc2\x9b" "2J"), "/dev/null", 1,
                            &st);
    ck_assert_int_eq(st, 0);
    ck_assert_msg(strstr(tty, "esc:1\t\\x1b[2Jred\\x9b\\x5cend") != NULL, "%s", tty);
    ck_assert_msg(strstr(tty, "csi\\xc2\\x9b2J\tv2") != NULL, "%s", tty);
    ck_assert_msg(strchr(tty, '\x1b') == NULL, "%s", tty);
    free(tty);
    tty = run_cli_pty(ARGS("probe", "-s", L, "csi\xc2\x9b" "2J"), "/dev/null", 1, &st);
    ck_assert_int_eq(st, 0);
    ck_assert_msg(strstr(tty, "csi\\xc2\\x9b2J\t127.0.0.1:") != NULL, "%s", tty);
    free(tty);
    cluster_stop(&c);
}
END_TEST

START_TEST(bad_arguments)
{
    cluster c;
    cluster_start(&c, 2);
    const char *L = c.list;

    expect_usage_error(ARGS("get", "-s", L, "--timeout", "0", "k"), "--timeout '0'");
    expect_usage_error(ARGS("get", "-s", L, "--timeout", "1s", "k"), "--timeout '1s'");
    expect_usage_error(ARGS("get", "-s", L, "--timeout", "-5", "k"), "--timeout '-5'");
    expect_usage_error(ARGS("get", "-s", L, "--timeout", "86400001", "k"), "--timeout");
    expect_usage_error(ARGS("get", "-s", L, "--timeout", "1", "--timeout", "2", "k"),
                       "--timeout given twice");
    expect_usage_error(ARGS("set", "-s", L, "--failure-policy", "retry"),
                       "--failure-policy 'retry': expected fail-fast, eject or failover");
    expect_usage_error(ARGS("set", "-s", L, "--ttl", "-1"), "--ttl '-1'");
    expect_usage_error(ARGS("set", "-s", L, "--ttl", "2147483648"), "--ttl '2147483648'");
    expect_usage_error(ARGS("set", "-s", L, "--ttl", "soon"), "--ttl 'soon'");
    expect_usage_error(ARGS("get", "-s", L, "--ttl", "5", "k"), "option '--ttl' is not valid here");
    expect_usage_error(ARGS("locate", "-s", L, "--timeout", "5", "k"),
                       "option '--timeout' is not valid here");
    expect_usage_error(ARGS("hash", "--hash", "md5", "--failure-policy", "eject", "k"),
                       "option '--failure-policy' is not valid here");
    expect_usage_error(ARGS("set", "-s", L, "extra"), "set: unexpected argument 'extra'");
    expect_usage_error(ARGS("get", "k"), "no servers");
    expect_usage_error(ARGS("get", "-s", "127.0.0.1:0", "k"), "port 0");
    expect_usage_error(ARGS("set", "-s", L, "-f", "/etc/hostname"), "only one");
    expect_usage_error(ARGS("get", "-f", "/nonexistent/servers", "k"), "/nonexistent/servers");
    /* OLD of --previous, and migrate's OLD and NEW, read as diff reads its
     * operands (test_cli): a path that is not there is a missing file,
     * said before anything is sent */
    expect_usage_error(ARGS("get", "-s", L, "--previous", "/nonexistent", "k"),
                       "get: cannot open /nonexistent: No such file or directory");
    expect_usage_error(ARGS("probe", "-s", L, "--previous", "gone.snap", "k"),
                       "probe: cannot open gone.snap: No such file or directory");
    expect_usage_error(ARGS("migrate", L, "/nonexistent/new.snap"),
                       "migrate: cannot open /nonexistent/new.snap: No such file or directory");
    expect_usage_error(ARGS("migrate", "/nonexistent", L),
                       "migrate: cannot open /nonexistent: No such file or directory");
    expect_usage_error(ARGS("get", "-l", "--SERVER=127.0.0.1:1 --NAMESPACE=ns:", "k"),
                       "--NAMESPACE is not supported");
    expect_usage_error(ARGS("frob", "-s", L), "unknown command 'frob'");
    cluster_stop(&c);
}
END_TEST

START_TEST(help_and_output_errors)
{
    static const char *const cmds[] = {"set", "get", "delete", "probe"};
    for (size_t i = 0; i < 4; i++) {
        char want[64];
        snprintf(want, sizeof(want), "Usage: mcroute %s SOURCE", cmds[i]);
        run r = run_cli(NULL, 0, ARGS("help", cmds[i]));
        ck_assert_int_eq(r.status, 0);
        ck_assert_msg(strstr(r.out, want) != NULL, "%s", r.out);
        run_free(&r);
        r = run_cli(NULL, 0, ARGS(cmds[i], "--help"));
        ck_assert_int_eq(r.status, 0);
        ck_assert_msg(strstr(r.out, want) != NULL, "%s", r.out);
        run_free(&r);
    }
    run r = run_cli(NULL, 0, ARGS("--help"));
    for (size_t i = 0; i < 4; i++) {
        char want[64];
        snprintf(want, sizeof(want), "\n  %s SOURCE", cmds[i]);
        ck_assert_msg(strstr(r.out, want) != NULL, "--help lacks %s", cmds[i]);
    }
    run_free(&r);

    /* hits written to a full device: lost, so the exit status says so */
    cluster c;
    cluster_start(&c, 1);
    r = run_cli("out:1\tx\n", 8, ARGS("set", "-s", c.list));
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);
    char cmd[4400];
    snprintf(cmd, sizeof(cmd), "%s get -s %s out:1 >/dev/full 2>/dev/null", tu_cli_path(),
             c.list);
    int st = system(cmd);
    ck_assert(WIFEXITED(st));
    ck_assert_int_eq(WEXITSTATUS(st), 1);
    cluster_stop(&c);
}
END_TEST

static Suite *cli_pool_suite(void)
{
    Suite *s = suite_create("cli_pool");
    TCase *tc = tcase_create("pool");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, set_get_round_trip);
    tcase_add_test(tc, miss_prints_nothing);
    tcase_add_test(tc, probe_finds_misplaced_keys);
    tcase_add_test(tc, previous_reads_through_a_transition);
    tcase_add_test(tc, delete_keys);
    tcase_add_test(tc, killed_server);
    tcase_add_test(tc, eject_moves_keys_off_a_dead_server);
    tcase_add_test(tc, stopped_server_times_out);
    tcase_add_test(tc, ttl_expires);
    tcase_add_test(tc, other_sources);
    tcase_add_test(tc, bad_keys_fail_alone);
    tcase_add_test(tc, terminal_escapes);
    tcase_add_test(tc, bad_arguments);
    tcase_add_test(tc, help_and_output_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(cli_pool_suite());
}
