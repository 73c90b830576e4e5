/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cli_migrate.c: Check suite of mcroute migrate, run as a real process against real memcached servers: the table and --json, exit statuses, failing servers, resuming, bad arguments, the progress line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clirun.h"
#include "realserver.h"
#include "testutil.h"

#define NKEYS 2000
#define MAX_SERVERS 5
#define START_MS mcr_test_ms(20000)
#define IO_MS mcr_test_ms(10000)
#define RUN_MS 60000 /* run_cli_deadline scales it */

typedef struct cluster {
    int n;
    rs_proc mc[MAX_SERVERS];
} cluster;

static char *g_dir;

static void teardown(void)
{
    rs_stop_all();
    run_free_all();
    tu_tmpdir_free(g_dir);
    g_dir = NULL;
}

static void cluster_start(cluster *c, int n, int noxdump)
{
    static const char *const dash_x[] = {"-X", NULL};
    memset(c, 0, sizeof(*c));
    ck_assert_msg(rs_executable(rs_memcached_path()), "need %s (Debian package memcached)",
                  rs_memcached_path());
    for (int i = 0; i < n; i++)
        ck_assert_msg(rs_memcached_start_opts(&c->mc[i], "127.0.0.1", 0,
                                              i == noxdump ? dash_x : NULL, NULL, START_MS) == 0,
                      "memcached %d did not start", i);
    c->n = n;
}

/* "127.0.0.1:P,..." of servers first .. first+count-1 into buf. */
static const char *list_of(const cluster *c, int first, int count, char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = first; i < first + count; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s127.0.0.1:%d", i > first ? "," : "",
                              c->mc[i].port);
    return buf;
}

/* The keys "k0".."kN-1", one a line, and "kI<TAB>vI" lines. */
static char *keys_text(int n, int with_values, size_t *len)
{
    char *t = malloc((size_t)n * 32 + 1);
    size_t o = 0;
    for (int i = 0; i < n; i++)
        o += (size_t)(with_values ? sprintf(t + o, "k%d\tv%d\n", i, i) : sprintf(t + o, "k%d\n", i));
    *len = o;
    return t;
}

static void set_keys(const char *list, int n)
{
    size_t len;
    char *kv = keys_text(n, 1, &len);
    run r = run_cli_deadline(kv, len, ARGS("set", "-s", list, "--ttl", "5000"), RUN_MS);
    ck_assert_msg(r.status == 0, "set: %s", r.err);
    run_free(&r);
    free(kv);
}

/* How many of the n keys `mcroute get -s list` finds. */
static long hits(const char *list, int n)
{
    size_t len;
    char *k = keys_text(n, 0, &len);
    run r = run_cli_deadline(k, len, ARGS("get", "-s", list), RUN_MS);
    ck_assert_msg(r.status == 0, "get: %s", r.err);
    long lines = 0;
    for (size_t i = 0; i < r.outlen; i++)
        lines += r.out[i] == '\n';
    run_free(&r);
    free(k);
    return lines;
}

/* What `mcroute diff OLD NEW --keys` counts as moving. */
static long keys_moved(const char *a, const char *b, int n)
{
    size_t len;
    char *k = keys_text(n, 0, &len);
    run r = run_cli_deadline(k, len, ARGS("diff", a, b, "--keys", "-"), RUN_MS);
    ck_assert_msg(r.status == 0, "diff: %s", r.err);
    const char *p = strstr(r.out, "keys_moved\t");
    ck_assert_ptr_nonnull(p);
    long m = strtol(p + 11, NULL, 10);
    run_free(&r);
    free(k);
    return m;
}

/* The number after "\"name\": " at its first occurrence (the totals come
 * before the sources); -1 when absent. */
static long json_number(const char *doc, const char *name)
{
    char want[64];
    snprintf(want, sizeof(want), "\"%s\": ", name);
    const char *p = strstr(doc, want);
    return p ? strtol(p + strlen(want), NULL, 10) : -1;
}

static char *write_temp(const char *data, size_t len)
{
    if (g_dir == NULL)
        g_dir = tu_tmpdir("climigrate");
    static int seq;
    char *path = malloc(strlen(g_dir) + 32);
    sprintf(path, "%s/f%d", g_dir, seq++);
    tu_write_file(path, data, len);
    return path;
}

/* test_cli_json.py migrate: the table and the JSON of the same dry run
 * agree, and the JSON's counts add up. */
static void python_agrees(const run *json, const run *text)
{
    ck_assert_msg(system(TU_PYTHON3 " -c 'import json' >/dev/null 2>&1") == 0,
                  TU_PYTHON3 " with its json module is needed (Debian package python3)");
    char *jf = write_temp(json->out, json->outlen);
    char *tf = write_temp(text->out, text->outlen);
    char cmd[4096];
    snprintf(cmd, sizeof(cmd), TU_PYTHON3 " '%s/test/test_cli_json.py' migrate '%s' '%s'",
             tu_src_dir(), jf, tf);
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "JSON and table disagree:\n%s\n%s",
                  json->out, text->out);
    free(jf);
    free(tf);
}

static long long curr_items(int port)
{
    int fd = rs_connect("127.0.0.1", port, IO_MS);
    ck_assert_int_ge(fd, 0);
    long long n = rs_mc_stat(fd, NULL, "curr_items", IO_MS);
    close(fd);
    return n;
}

/* ------------------------------------------------------------ tests */

/* 4 -> 5: a dry run (table and JSON agree, nothing copied), the copy
 * (--json: as many keys as diff says move), every key then found through
 * NEW, a second run copying nothing (the table). */
START_TEST(grow_json_and_table)
{
    cluster c;
    cluster_start(&c, 5, -1);
    char four[256], five[256];
    list_of(&c, 0, 4, four, sizeof(four));
    list_of(&c, 0, 5, five, sizeof(five));
    set_keys(four, NKEYS);
    long moved = keys_moved(four, five, NKEYS);
    ck_assert_int_gt(moved, NKEYS / 10);
    ck_assert_int_eq(hits(five, NKEYS), NKEYS - moved);

    run dj = run_cli_deadline(NULL, 0, ARGS("migrate", four, five, "--dry-run", "--json"), RUN_MS);
    ck_assert_msg(dj.status == 0, "%s", dj.err);
    ck_assert_str_eq(dj.err, "");
    run dt = run_cli_deadline(NULL, 0, ARGS("migrate", "--dry-run", four, five), RUN_MS);
    ck_assert_msg(dt.status == 0, "%s", dt.err);
    python_agrees(&dj, &dt);
    ck_assert_int_eq(json_number(dj.out, "moved"), moved);
    ck_assert_int_eq(json_number(dj.out, "copied"), 0);
    ck_assert_msg(strstr(dj.out, "\"dry_run\": true") != NULL, "%s", dj.out);
    ck_assert_msg(strstr(dt.out, "dry run: ") != NULL, "%s", dt.out);
    run_free(&dj);
    run_free(&dt);
    ck_assert_int_eq(curr_items(c.mc[4].port), 0);

    run r = run_cli_deadline(NULL, 0, ARGS("migrate", four, five, "--json"), RUN_MS);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.err, "");
    ck_assert_int_eq(json_number(r.out, "scanned"), NKEYS);
    ck_assert_int_eq(json_number(r.out, "moved"), moved);
    ck_assert_int_eq(json_number(r.out, "copied"), moved);
    ck_assert_int_eq(json_number(r.out, "present"), 0);
    ck_assert_int_eq(json_number(r.out, "expired"), 0);
    ck_assert_int_eq(json_number(r.out, "gone"), 0);
    ck_assert_int_eq(json_number(r.out, "failed"), 0);
    ck_assert_int_eq(json_number(r.out, "evicted"), 0); /* the new server had room */
    ck_assert_int_eq(json_number(r.out, "refused"), 0);
    ck_assert_int_eq(json_number(r.out, "destinations"), 1);
    ck_assert_msg(strstr(r.out, "\"keys_per_s\": ") != NULL && strstr(r.out, "\"seconds\": ") &&
                      strstr(r.out, "\"status\": \"ok\"") != NULL,
                  "%s", r.out);
    ck_assert_msg(strstr(r.out, "\"sources\": [\n  {\"id\": \"127.0.0.1:") != NULL, "%s", r.out);
    run_free(&r);
    ck_assert_int_eq(hits(five, NKEYS), NKEYS);

    /* again, the table: everything present already */
    r = run_cli_deadline(NULL, 0, ARGS("migrate", four, five), RUN_MS);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strncmp(r.out, "SERVER ", 7) == 0, "%s", r.out);
    char want[128];
    snprintf(want, sizeof(want), "\ntotal ");
    const char *tot = strstr(r.out, want);
    ck_assert_msg(tot != NULL, "%s", r.out);
    long scanned, mv, copied, present;
    ck_assert_int_eq(sscanf(tot, " total %ld %ld %ld %ld", &scanned, &mv, &copied, &present), 4);
    ck_assert_int_eq(mv, moved);
    ck_assert_int_eq(copied, 0);
    ck_assert_int_eq(present, moved);
    snprintf(want, sizeof(want), "copied 0 of %ld moved keys in ", moved);
    ck_assert_msg(strstr(r.out, want) != NULL, "%s", r.out);
    run_free(&r);
}
END_TEST

/* `mcroute CMD --client mcrouter-wch3 ...` with the keys k0..kN-1 on
 * standard input (and their values vI with `values`): `b` given, CMD A B
 * --keys -; else CMD -s A (set: --ttl 5000). The caller frees the run. */
static run wch3_run(const char *cmd, const char *a, const char *b, int values)
{
    size_t len;
    char *in = keys_text(NKEYS, values, &len);
    run r = b != NULL ? run_cli_deadline(in, len,
                                         ARGS(cmd, "--client", "mcrouter-wch3", a, b, "--keys",
                                              "-"),
                                         RUN_MS)
            : values  ? run_cli_deadline(in, len,
                                         ARGS(cmd, "--client", "mcrouter-wch3", "-s", a, "--ttl",
                                              "5000"),
                                         RUN_MS)
                      : run_cli_deadline(in, len, ARGS(cmd, "--client", "mcrouter-wch3", "-s", a),
                                         RUN_MS);
    free(in);
    ck_assert_msg(r.status == 0, "%s: %s", cmd, r.err);
    return r;
}

static long lines_of(const run *r)
{
    long lines = 0;
    for (size_t i = 0; i < r->outlen; i++)
        lines += r->out[i] == '\n';
    return lines;
}

/* mcrouter-wch3, its weights mcrouter's decimals: one weight lowered and a
 * server added; the keys that move (as diff counts them) are copied, and
 * every key is then found through the new placement. */
START_TEST(wch3_reweight_and_grow)
{
    cluster c;
    cluster_start(&c, 5, -1);
    char old[512], grown[512];
    snprintf(old, sizeof(old), "127.0.0.1:%d:1,127.0.0.1:%d:0.8,127.0.0.1:%d,127.0.0.1:%d:0.25",
             c.mc[0].port, c.mc[1].port, c.mc[2].port, c.mc[3].port);
    snprintf(grown, sizeof(grown),
             "127.0.0.1:%d:1,127.0.0.1:%d:0.3,127.0.0.1:%d,127.0.0.1:%d:0.25,127.0.0.1:%d:1",
             c.mc[0].port, c.mc[1].port, c.mc[2].port, c.mc[3].port, c.mc[4].port);
    run r = wch3_run("set", old, NULL, 1);
    run_free(&r);
    r = wch3_run("diff", old, grown, 0);
    const char *p = strstr(r.out, "keys_moved\t");
    ck_assert_msg(p != NULL, "%s", r.out);
    long moved = strtol(p + 11, NULL, 10);
    run_free(&r);
    ck_assert_int_gt(moved, NKEYS / 10);
    r = wch3_run("get", grown, NULL, 0);
    ck_assert_int_eq(lines_of(&r), NKEYS - moved);
    run_free(&r);

    r = run_cli_deadline(NULL, 0,
                         ARGS("migrate", "--client", "mcrouter-wch3", old, grown, "--json"),
                         RUN_MS);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_int_eq(json_number(r.out, "moved"), moved);
    ck_assert_int_eq(json_number(r.out, "copied"), moved);
    ck_assert_int_eq(json_number(r.out, "failed"), 0);
    run_free(&r);
    r = wch3_run("get", grown, NULL, 0);
    ck_assert_int_eq(lines_of(&r), NKEYS);
    run_free(&r);
}
END_TEST

/* 5 -> 4 given as snapshot files: the removed server's keys copied. */
START_TEST(removal_snapshot_files)
{
    cluster c;
    cluster_start(&c, 5, -1);
    char four[256], five[256];
    list_of(&c, 0, 4, four, sizeof(four));
    list_of(&c, 0, 5, five, sizeof(five));
    set_keys(five, NKEYS);
    if (g_dir == NULL)
        g_dir = tu_tmpdir("climigrate");
    char a[512], b[512];
    snprintf(a, sizeof(a), "%s/five.snap", g_dir);
    snprintf(b, sizeof(b), "%s/four.snap", g_dir);
    run r = run_cli(NULL, 0, ARGS("snapshot", "-s", five, "-o", a));
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);
    r = run_cli(NULL, 0, ARGS("snapshot", "-s", four, "-o", b));
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);
    long moved = keys_moved(a, b, NKEYS);
    r = run_cli_deadline(NULL, 0, ARGS("migrate", a, b, "--json"), RUN_MS);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_int_eq(json_number(r.out, "copied"), moved);
    run_free(&r);
    rs_stop(&c.mc[4]);
    ck_assert_int_eq(hits(four, NKEYS), NKEYS);
}
END_TEST

/* Dumping disabled on one server (-X): exit 1, the server named on
 * stderr and in the JSON, the other servers copied. */
START_TEST(metadump_disabled)
{
    cluster c;
    cluster_start(&c, 5, 2);
    char four[256], five[256], xid[64];
    list_of(&c, 0, 4, four, sizeof(four));
    list_of(&c, 0, 5, five, sizeof(five));
    snprintf(xid, sizeof(xid), "127.0.0.1:%d", c.mc[2].port);
    set_keys(four, NKEYS);
    run r = run_cli_deadline(NULL, 0, ARGS("migrate", four, five, "--json"), RUN_MS);
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, xid) != NULL && strstr(r.err, "metadump not allowed") != NULL &&
                      strstr(r.err, "-X") != NULL,
                  "%s", r.err);
    ck_assert_msg(strstr(r.out, "\"status\": \"server error\"") != NULL, "%s", r.out);
    ck_assert_int_eq(json_number(r.out, "failed"), 0);
    long copied = json_number(r.out, "copied");
    ck_assert_int_gt(copied, 0);
    run_free(&r);
    /* the table says it too, and the others' keys are there now */
    r = run_cli_deadline(NULL, 0, ARGS("migrate", four, five), RUN_MS);
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.out, xid) != NULL && strstr(r.out, "server error") != NULL, "%s",
                  r.out);
    run_free(&r);
    ck_assert_int_eq(curr_items(c.mc[4].port), copied);
}
END_TEST

/* The new server not running: every copy fails, exit 1 naming it; once it
 * runs, the same command copies everything (resumable). */
START_TEST(destination_down_then_resumed)
{
    cluster c;
    cluster_start(&c, 5, -1);
    char four[256], five[256], destid[64];
    list_of(&c, 0, 4, four, sizeof(four));
    list_of(&c, 0, 5, five, sizeof(five));
    set_keys(four, NKEYS);
    long moved = keys_moved(four, five, NKEYS);
    int port = c.mc[4].port;
    snprintf(destid, sizeof(destid), "127.0.0.1:%d", port);
    rs_stop(&c.mc[4]);
    run r = run_cli_deadline(NULL, 0, ARGS("migrate", four, five, "--timeout", "2000"), RUN_MS);
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, destid) != NULL && strstr(r.err, "keys failed") != NULL, "%s",
                  r.err);
    run_free(&r);
    ck_assert_int_eq(rs_memcached_start(&c.mc[4], "127.0.0.1", port, NULL, START_MS), 0);
    r = run_cli_deadline(NULL, 0, ARGS("migrate", four, five, "--json"), RUN_MS);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_int_eq(json_number(r.out, "copied"), moved);
    run_free(&r);
    ck_assert_int_eq(hits(five, NKEYS), NKEYS);
}
END_TEST

/* A destination whose memory is full (memcached -m 2, about 460 values of
 * 4,000 bytes): every add answers STORED while it evicts, so the copy looks
 * whole; exit 1 with the line naming it and the count, in --json too. */
START_TEST(destination_without_room)
{
    static const char *const small[] = {"-m", "2", NULL};
    enum { N = 3000, VALUE = 4000 };
    cluster c;
    memset(&c, 0, sizeof(c));
    ck_assert_msg(rs_executable(rs_memcached_path()), "need %s (Debian package memcached)",
                  rs_memcached_path());
    ck_assert_int_eq(rs_memcached_start(&c.mc[0], "127.0.0.1", 0, NULL, START_MS), 0);
    ck_assert_int_eq(rs_memcached_start_opts(&c.mc[1], "127.0.0.1", 0, small, NULL, START_MS), 0);
    c.n = 2;
    char one[64], two[128], destid[64];
    list_of(&c, 0, 1, one, sizeof(one));
    list_of(&c, 0, 2, two, sizeof(two));
    snprintf(destid, sizeof(destid), "127.0.0.1:%d", c.mc[1].port);
    /* N values of VALUE bytes on the one server of OLD */
    static char names[N][16];
    const char *keys[N];
    size_t lens[N];
    for (int i = 0; i < N; i++) {
        lens[i] = (size_t)snprintf(names[i], sizeof(names[i]), "big%d", i);
        keys[i] = names[i];
    }
    char *value = malloc(VALUE + 1), why[256] = "";
    memset(value, 'v', VALUE);
    value[VALUE] = '\0';
    int fd = rs_connect("127.0.0.1", c.mc[0].port, IO_MS);
    ck_assert_int_ge(fd, 0);
    ck_assert_msg(rs_mc_set_many(fd, keys, lens, N, value, IO_MS, why, sizeof(why)) == 0, "%s",
                  why);
    close(fd);
    free(value);

    run r = run_cli_deadline(NULL, 0, ARGS("migrate", one, two), RUN_MS);
    ck_assert_int_eq(r.status, 1);
    char want[160];
    snprintf(want, sizeof(want), "mcroute: migrate: the destinations lack room: %s evicted ",
             destid);
    const char *line = strstr(r.err, want);
    ck_assert_msg(line != NULL, "%s", r.err);
    long evicted = 0;
    const char *p = line + strlen(want);
    for (; (*p >= '0' && *p <= '9') || *p == ','; p++)
        if (*p != ',')
            evicted = evicted * 10 + (*p - '0');
    static const char tail[] = " items during the copy (their memory is full: give them more "
                               "memory (-m) or fewer keys before switching)\n";
    ck_assert_msg(strncmp(p, tail, strlen(tail)) == 0, "%s", r.err);
    /* every key was copied (the table says so), not every key kept */
    const char *tot = strstr(r.out, "\ntotal ");
    ck_assert_msg(tot != NULL, "%s", r.out);
    long scanned, mv, copied;
    ck_assert_int_eq(sscanf(tot, " total %ld %ld %ld", &scanned, &mv, &copied), 3);
    ck_assert_int_gt(mv, 1000);
    ck_assert_int_eq(copied, mv);
    ck_assert_int_gt(evicted, 0);
    ck_assert_int_eq(evicted, copied - curr_items(c.mc[1].port));
    run_free(&r);

    /* again, --json: those evicted are copied again, and evict others */
    r = run_cli_deadline(NULL, 0, ARGS("migrate", one, two, "--json"), RUN_MS);
    ck_assert_int_eq(r.status, 1);
    ck_assert_int_gt(json_number(r.out, "evicted"), 0);
    ck_assert_int_eq(json_number(r.out, "destinations"), 1);
    ck_assert_int_eq(json_number(r.out, "refused"), 0);
    ck_assert_int_eq(json_number(r.out, "failed"), 0);
    ck_assert_msg(strstr(r.out, "\"status\": \"server error\", \"message\": \"migrate: the "
                                "destinations lack room: ") != NULL,
                  "%s", r.out);
    ck_assert_msg(strstr(r.err, want) != NULL, "%s", r.err);
    run_free(&r);
}
END_TEST

/* The progress line: on a terminal, not with --json, erased at the end. */
START_TEST(progress_line)
{
    cluster c;
    cluster_start(&c, 2, -1);
    char one[64], two[128];
    list_of(&c, 0, 1, one, sizeof(one));
    list_of(&c, 0, 2, two, sizeof(two));
    set_keys(one, 500);
    char *empty = write_temp("", 0);
    int st;
    char *tty = run_cli_pty(ARGS("migrate", one, two, "--dry-run"), empty, 0, &st);
    ck_assert_int_eq(st, 0);
    ck_assert_msg(strstr(tty, "\rmcroute migrate: 1/1 ") != NULL, "%s", tty);
    size_t tl = strlen(tty);
    ck_assert(tl > 2 && tty[tl - 1] == '\r' && tty[tl - 2] == ' '); /* erased */
    free(tty);
    tty = run_cli_pty(ARGS("migrate", one, two, "--json"), empty, 0, &st);
    ck_assert_int_eq(st, 0);
    ck_assert_msg(strstr(tty, "mcroute migrate:") == NULL, "%s", tty);
    free(tty);
    free(empty);
}
END_TEST

START_TEST(bad_arguments)
{
    expect_usage_error(ARGS("migrate"), "expected OLD and NEW");
    expect_usage_error(ARGS("migrate", "127.0.0.1:1"), "expected OLD and NEW");
    expect_usage_error(ARGS("migrate", "a:1", "b:1", "c:1"), "expected OLD and NEW");
    expect_usage_error(ARGS("migrate", "a:1", "b:1", "--rate", "0"), "--rate '0'");
    expect_usage_error(ARGS("migrate", "a:1", "b:1", "--rate", "-5"), "--rate '-5'");
    expect_usage_error(ARGS("migrate", "a:1", "b:1", "--rate", "fast"), "--rate 'fast'");
    expect_usage_error(ARGS("migrate", "a:1", "b:1", "--rate", "1e3"), "--rate '1e3'");
    expect_usage_error(ARGS("migrate", "a:1", "b:1", "--rate", "1", "--rate", "2"),
                       "--rate given twice");
    expect_usage_error(ARGS("migrate", "a:1", "b:1", "--timeout", "0"), "--timeout '0'");
    expect_usage_error(ARGS("migrate", "a:1", "b:1", "--timeout", "86400001"), "--timeout");
    expect_usage_error(ARGS("migrate", "a:1", "b:1", "--dry-run=yes"), "takes no value");
    expect_usage_error(ARGS("migrate", "a:1", "b:1", "--failure-policy", "eject"),
                       "not valid here");
    expect_usage_error(ARGS("migrate", "a:1", "b:1", "--ttl", "5"), "not valid here");
    expect_usage_error(ARGS("migrate", "a:1", "b:1", "--bogus"), "unknown");
    expect_usage_error(ARGS("migrate", "a:1", ""), "empty");
    expect_usage_error(ARGS("migrate", "a:1", "b:1", "--mode", "nope"), "unknown mode");
    expect_usage_error(ARGS("locate", "-s", "a:1", "--dry-run", "k"), "not valid here");
    /* --etcd is the migration through etcd (tools/migrate_fleet.c,
     * test_cli_migrate_fleet): etcd unreachable is bad input */
    expect_usage_error(ARGS("migrate", "--etcd", "http://127.0.0.1:1", "--etcd-timeout", "0.2",
                            "--pool", "p", "b:1"),
                       "etcd unreachable");
    /* a snapshot file sets its own mode */
    if (g_dir == NULL)
        g_dir = tu_tmpdir("climigrate");
    char snap[512];
    snprintf(snap, sizeof(snap), "%s/s.snap", g_dir);
    run r = run_cli(NULL, 0, ARGS("snapshot", "-s", "a:1,b:1", "-o", snap));
    ck_assert_int_eq(r.status, 0);
    run_free(&r);
    expect_usage_error(ARGS("migrate", snap, "a:1", "--mode", "jump"), "sets its own mode");
    /* OLD and NEW are operands, not SOURCE options */
    expect_usage_error(ARGS("migrate", "-l", "--SERVER=a:1", "b:1"), "not valid here");
    /* help */
    r = run_cli(NULL, 0, ARGS("help", "migrate"));
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(strstr(r.out, "Usage: mcroute migrate OLD NEW") != NULL, "%s", r.out);
    run_free(&r);
    r = run_cli(NULL, 0, ARGS("--help"));
    ck_assert_msg(strstr(r.out, "\n  migrate OLD NEW ") != NULL, "%s", r.out);
    run_free(&r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("cli_migrate");
    const tu_case cases[] = {
        {"grow_json_and_table", grow_json_and_table},
        {"wch3_reweight_and_grow", wch3_reweight_and_grow},
        {"removal_snapshot_files", removal_snapshot_files},
        {"metadump_disabled", metadump_disabled},
        {"destination_down_then_resumed", destination_down_then_resumed},
        {"destination_without_room", destination_without_room},
        {"progress_line", progress_line},
        {"bad_arguments", bad_arguments},
    };
    tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]), 300, teardown);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
