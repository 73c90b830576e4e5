/* SPDX-License-Identifier: BSD-3-Clause */
/* test_watcher.c: Check suite of the file watcher (lib/router/watcher.c): server-list and snapshot files reloaded into a router, debounced, bad files refused, with readers running. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mcroute.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"
#include "test_router_util.h"
#include "testutil.h"
#include "testutil_config.h"

/* ------------------------------------------------------------ watcher */

/* A scratch directory per test (tu_tmpdir). */
typedef struct scratch {
    char *dir;
    char path[512], tmp[512];
} scratch;

static void scratch_init(scratch *s, const char *name)
{
    s->dir = tu_tmpdir("router");
    snprintf(s->path, sizeof s->path, "%s/%s", s->dir, name);
    snprintf(s->tmp, sizeof s->tmp, "%s/%s.tmp", s->dir, name);
}

/* The file and its temporary, then the directory, which must hold nothing else. */
static void scratch_free(scratch *s)
{
    unlink(s->path);
    unlink(s->tmp);
    ck_assert_uint_eq(tu_tmpdir_free(s->dir), 0);
    s->dir = NULL;
}

static void write_in_place(const char *path, const char *text, size_t len, const char *mode)
{
    FILE *f = fopen(path, mode);
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(text, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

/* As a careful operator does it: a temporary file renamed over the file. */
static void write_atomic(scratch *s, const char *text)
{
    write_in_place(s->tmp, text, strlen(text), "w");
    ck_assert_int_eq(rename(s->tmp, s->path), 0);
}

/* What the report callback saw. It runs in the watcher's thread. */
typedef struct watch_log {
    pthread_mutex_t mu;
    int ok, published, errors;
    int last_status;
    char last_error[MCR_ERROR_MESSAGE_SIZE];
} watch_log;

static void watch_report(const mcr_watch_event *ev, void *arg)
{
    watch_log *l = arg;
    pthread_mutex_lock(&l->mu);
    l->last_status = ev->status;
    if (ev->status == MCR_OK) {
        l->ok++;
        l->published += ev->published;
    } else {
        l->errors++;
        snprintf(l->last_error, sizeof l->last_error, "%s", ev->err ? ev->err->message : "?");
    }
    pthread_mutex_unlock(&l->mu);
}

static void watch_log_get(watch_log *l, watch_log *copy)
{
    pthread_mutex_lock(&l->mu);
    copy->ok = l->ok;
    copy->published = l->published;
    copy->errors = l->errors;
    copy->last_status = l->last_status;
    memcpy(copy->last_error, l->last_error, sizeof copy->last_error);
    pthread_mutex_unlock(&l->mu);
}

/* Waits (up to 10 s: sanitizers and valgrind are slow) for the report
 * count `ok + errors` to reach `n`. */
static void wait_reports(watch_log *l, int n)
{
    watch_log c;
    uint64_t t0 = (uint64_t)mcr_test_now_ms();
    for (;;) {
        watch_log_get(l, &c);
        if (c.ok + c.errors >= n)
            return;
        ck_assert_msg((uint64_t)mcr_test_now_ms() - t0 < (uint64_t)mcr_test_ms(10000),
                      "no report after %d ms (%d of %d)",
                      mcr_test_ms(10000), c.ok + c.errors, n);
        sleep_ms(5);
    }
}

static const mcr_watch_options fast = {.poll_ms = 10, .settle_ms = 60};

static mcr_server_desc find_server(const mcr_snapshot *s, const char *id)
{
    mcr_server_desc d;
    uint32_t at = mcr_snapshot_find(s, id);
    ck_assert_msg(at != MCR_NO_SERVER, "no server %s", id);
    ck_assert_int_eq(mcr_snapshot_server(s, (size_t)at, &d), MCR_OK);
    return d;
}

START_TEST(watch_server_file)
{
    scratch sc;
    watch_log log = {.mu = PTHREAD_MUTEX_INITIALIZER};
    mcr_watch_options opt = fast;
    mcr_router *r = router_of(NULL);
    mcr_config *tmpl = mcr_config_new();
    mcr_watcher *w = NULL;
    mcr_error err = {0};
    mcr_snapshot *s;
    mcr_server_desc d;
    mcr_route route;
    watch_log c;

    scratch_init(&sc, "servers");
    opt.report = watch_report;
    opt.report_arg = &log;
    ck_assert_int_eq(mcr_config_set_mode(tmpl, MCR_MODE_STABLE_KETAMA), MCR_OK);
    write_atomic(&sc, "# cache tier\n"
                      "10.0.0.1:11211:1 zone=a\n"
                      "10.0.0.2 weight=2 zone=b id=cache-b   # named\n"
                      "\n"
                      "[::1]:11212\n"
                      "10.0.0.4:11213\n");
    /* A reserved area that is not zero is refused (mcroute.h). */
    {
        mcr_watch_options bad = opt;
        bad.reserved[0] = 1;
        ck_assert_int_eq(mcr_watcher_new(r, sc.path, MCR_WATCH_SERVER_FILE, tmpl, &bad, &w, &err),
                         MCR_ERR_INVALID);
        ck_assert_ptr_nonnull(strstr(err.message, "mcr_watch_options: the reserved area"));
        ck_assert_ptr_null(mcr_router_current(r));
    }
    /* An empty router: the first snapshot comes from the template. */
    ck_assert_msg(mcr_watcher_new(r, sc.path, MCR_WATCH_SERVER_FILE, tmpl, &opt, &w, &err) ==
                      MCR_OK,
                  "%s", err.message);
    s = mcr_router_current(r);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(mcr_snapshot_epoch(s), 1);
    ck_assert_uint_eq(mcr_snapshot_server_count(s), 4);
    ck_assert_int_eq(mcr_ring_mode(mcr_snapshot_ring(s)), MCR_MODE_STABLE_KETAMA);
    d = find_server(s, "cache-b");
    ck_assert_str_eq(d.host, "10.0.0.2");
    ck_assert_int_eq(d.port, 11211);
    ck_assert_uint_eq(d.weight, 2);
    ck_assert_str_eq(d.zone, "b");
    d = find_server(s, "[::1]:11212");
    ck_assert_str_eq(d.host, "::1");
    ck_assert_str_eq(find_server(s, "10.0.0.1:11211").zone, "a");
    mcr_snapshot_unref(s);
    /* The template is the caller's and stays as it was (a const pointer):
     * no server was added to it, so it serves another empty router too. */
    ck_assert_uint_eq(mcr_config_server_count(tmpl), 0);
    {
        mcr_router *r2 = NULL;
        mcr_watcher *w2 = NULL;
        const mcr_config *ctmpl = tmpl;
        ck_assert_int_eq(mcr_router_new(NULL, &r2, NULL), MCR_OK);
        int rc2 = mcr_watcher_new(r2, sc.path, MCR_WATCH_SERVER_FILE, ctmpl, &opt, &w2, &err);
        uint64_t e2 = mcr_router_epoch(r2);
        mcr_watcher_free(w2);
        mcr_router_free(r2);
        ck_assert_msg(rc2 == MCR_OK, "a second watcher from the same template: %s", err.message);
        ck_assert_uint_eq(e2, 1);
        ck_assert_uint_eq(mcr_config_server_count(tmpl), 0);
    }

    /* A server taken out of rotation through the router stays so across
     * reloads: the file says nothing about states. */
    mcr_changes *ch = mcr_changes_new();
    ck_assert_int_eq(mcr_changes_set_state(ch, "[::1]:11212", MCR_STATE_DRAINING, NULL), MCR_OK);
    ck_assert_int_eq(mcr_router_apply(r, ch, 0, &err), MCR_OK);
    mcr_changes_free(ch);

    /* A good rewrite: one server gone, one moved (same id), one new, a
     * weight changed. Published as one snapshot, epoch + 1. */
    write_atomic(&sc, "10.0.0.1:11211:3 zone=a\n"
                      "10.0.0.3 weight=2 zone=b id=cache-b\n"
                      "[::1]:11212\n"
                      "10.0.0.5:11211 zone=c\n");
    wait_reports(&log, 1);
    watch_log_get(&log, &c);
    ck_assert_msg(c.errors == 0, "%s", c.last_error);
    ck_assert_int_eq(c.published, 1);
    s = mcr_router_current(r);
    ck_assert_uint_eq(mcr_snapshot_epoch(s), 3);
    ck_assert_uint_eq(mcr_snapshot_server_count(s), 4);
    ck_assert_uint_eq(mcr_snapshot_find(s, "10.0.0.4:11213"), MCR_NO_SERVER);
    ck_assert_str_eq(find_server(s, "cache-b").host, "10.0.0.3");
    ck_assert_uint_eq(find_server(s, "10.0.0.1:11211").weight, 3);
    ck_assert_int_eq(find_server(s, "[::1]:11212").state, MCR_STATE_DRAINING);
    ck_assert_str_eq(find_server(s, "10.0.0.5:11211").zone, "c");
    mcr_snapshot_unref(s);

    /* Rewritten without changing its servers: nothing published. */
    write_atomic(&sc, "# reordered\n10.0.0.5:11211 zone=c\n10.0.0.1:11211 weight=3 zone=a\n"
                      "10.0.0.3 weight=2 zone=b id=cache-b\n[::1]:11212\n");
    wait_reports(&log, 2);
    watch_log_get(&log, &c);
    ck_assert_int_eq(c.ok, 2);
    ck_assert_int_eq(c.published, 1);
    ck_assert_uint_eq(mcr_router_epoch(r), 3);

    /* A corrupted file is refused; the old snapshot keeps serving, and the
     * file is not read again until it changes. */
    write_atomic(&sc, "10.0.0.1:11211\n10.0.0.3:112x1\n");
    wait_reports(&log, 3);
    watch_log_get(&log, &c);
    ck_assert_int_eq(c.errors, 1);
    ck_assert_int_eq(c.last_status, MCR_ERR_SYNTAX);
    ck_assert_msg(strstr(c.last_error, "line 2") != NULL, "%s", c.last_error);
    ck_assert_uint_eq(mcr_router_epoch(r), 3);
    ck_assert_int_eq(mcr_router_locate(r, "some key", 8, &route), MCR_OK);
    ck_assert_uint_eq(route.epoch, 3);
    sleep_ms(200);
    watch_log_get(&log, &c);
    ck_assert_int_eq(c.ok + c.errors, 3);

    /* A list whose only server is draining leaves no active one: refused. */
    write_atomic(&sc, "[::1]:11212\n");
    wait_reports(&log, 4);
    watch_log_get(&log, &c);
    ck_assert_int_eq(c.last_status, MCR_ERR_EMPTY);
    ck_assert_uint_eq(mcr_router_epoch(r), 3);

    /* The file removed: reported once, still serving. */
    ck_assert_int_eq(unlink(sc.path), 0);
    wait_reports(&log, 5);
    watch_log_get(&log, &c);
    ck_assert_int_eq(c.last_status, MCR_ERR_IO);
    sleep_ms(100);
    watch_log_get(&log, &c);
    ck_assert_int_eq(c.ok + c.errors, 5);

    /* Back, good: picked up. */
    write_atomic(&sc, "10.0.0.9\n");
    wait_reports(&log, 6);
    watch_log_get(&log, &c);
    ck_assert_int_eq(c.last_status, MCR_OK);
    ck_assert_int_eq(c.published, 2);
    s = mcr_router_current(r);
    ck_assert_uint_eq(mcr_snapshot_server_count(s), 1);
    ck_assert_uint_eq(mcr_snapshot_epoch(s), 4);
    mcr_snapshot_unref(s);

    mcr_watcher_free(w);
    mcr_config_free(tmpl);
    mcr_router_free(r);
    scratch_free(&sc);
}
END_TEST

/* A file written slowly, in place, is read once, complete: never the
 * invalid first half. */
START_TEST(watch_debounce)
{
    scratch sc;
    watch_log log = {.mu = PTHREAD_MUTEX_INITIALIZER};
    /* The pieces come 40 ms apart; a settle time twenty times that keeps
     * a loaded machine (sanitizers, valgrind) from reading a piece. */
    mcr_watch_options opt = {.poll_ms = 10, .settle_ms = (unsigned)mcr_test_ms(800),
                             .report = watch_report, .report_arg = &log};
    mcr_snapshot *s0 = snap_of("10.0.0.1,10.0.0.2", MCR_MODE_KETAMA, 1);
    mcr_router *r = router_of(s0);
    hook_log h = {0};
    mcr_watcher *w = NULL;
    mcr_error err = {0};
    watch_log c;

    scratch_init(&sc, "servers");
    write_atomic(&sc, "10.0.0.1\n10.0.0.2\n");
    ck_assert_msg(mcr_watcher_new(r, sc.path, MCR_WATCH_SERVER_FILE, NULL, &opt, &w, &err) ==
                      MCR_OK,
                  "%s", err.message);
    ck_assert_uint_eq(mcr_router_epoch(r), 1); /* the file matches: nothing published */
    ck_assert_int_eq(mcr_router_add_hook(r, log_hook, &h), MCR_OK);

    /* Three pieces, 40 ms apart; the first two do not parse. */
    const char *part1 = "10.0.0.1\n10.0.0.2\n10.0.0.3 wei";
    write_in_place(sc.path, part1, strlen(part1), "w");
    sleep_ms(40);
    write_in_place(sc.path, "ght=", 4, "a");
    sleep_ms(40);
    write_in_place(sc.path, "2\n", 2, "a");
    wait_reports(&log, 1);
    watch_log_get(&log, &c);
    ck_assert_msg(c.errors == 0, "a half-written file was read: %s", c.last_error);
    ck_assert_int_eq(c.published, 1);
    ck_assert_int_eq(h.calls, 1);
    ck_assert_uint_eq(h.last_old, 1);
    ck_assert_uint_eq(h.last_new, 2);
    mcr_snapshot *s = mcr_router_current(r);
    ck_assert_uint_eq(find_server(s, "10.0.0.3:11211").weight, 2);
    mcr_snapshot_unref(s);

    mcr_watcher_free(w);
    mcr_snapshot_unref(s0);
    mcr_router_free(r);
    scratch_free(&sc);
}
END_TEST

START_TEST(watch_snapshot_file)
{
    scratch sc;
    watch_log log = {.mu = PTHREAD_MUTEX_INITIALIZER};
    mcr_watch_options opt = fast;
    mcr_snapshot *s1 = snap_of("10.0.0.1,10.0.0.2,10.0.0.3", MCR_MODE_KETAMA, 1);
    mcr_router *r = router_of(s1);
    mcr_watcher *w = NULL;
    mcr_error err = {0};
    watch_log c;
    char other[600];

    scratch_init(&sc, "snapshot");
    snprintf(other, sizeof other, "%s/next", sc.dir);
    opt.report = watch_report;
    opt.report_arg = &log;
    ck_assert_int_eq(mcr_snapshot_save(s1, sc.path, &err), MCR_OK);
    ck_assert_msg(mcr_watcher_new(r, sc.path, MCR_WATCH_SNAPSHOT_FILE, NULL, &opt, &w, &err) ==
                      MCR_OK,
                  "%s", err.message);
    ck_assert_uint_eq(mcr_router_epoch(r), 1); /* the snapshot in force: no change */

    /* A newer snapshot saved over the file: published. */
    mcr_changes *add = changes_add("10.0.0.4", 11211, 1);
    mcr_snapshot *s2 = NULL, *s3 = NULL;
    ck_assert_int_eq(mcr_snapshot_apply(s1, add, &s2, NULL), MCR_OK);
    ck_assert_int_eq(mcr_snapshot_save(s2, sc.path, &err), MCR_OK);
    wait_reports(&log, 1);
    watch_log_get(&log, &c);
    ck_assert_msg(c.last_status == MCR_OK, "%s", c.last_error);
    ck_assert_int_eq(c.published, 1);
    ck_assert_uint_eq(mcr_router_epoch(r), 2);
    mcr_snapshot *cur = mcr_router_current(r);
    ck_assert_str_eq(mcr_snapshot_checksum(cur), mcr_snapshot_checksum(s2));
    mcr_snapshot_unref(cur);

    /* Half of the next snapshot's file: refused, epoch 2 keeps serving. */
    mcr_changes_free(add);
    add = changes_add("10.0.0.5", 11211, 1);
    ck_assert_int_eq(mcr_snapshot_apply(s2, add, &s3, NULL), MCR_OK);
    ck_assert_int_eq(mcr_snapshot_save(s3, other, &err), MCR_OK);
    FILE *f = fopen(other, "r");
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    ck_assert_uint_gt(n, 20);
    write_in_place(sc.tmp, buf, n * 2 / 3, "w");
    ck_assert_int_eq(rename(sc.tmp, sc.path), 0);
    wait_reports(&log, 2);
    watch_log_get(&log, &c);
    ck_assert_int_ne(c.last_status, MCR_OK);
    ck_assert_int_eq(c.errors, 1);
    ck_assert_uint_eq(mcr_router_epoch(r), 2);

    /* One byte changed in the middle: the checksum catches it. */
    memcpy(buf + n, buf, n);
    char *p = strstr(buf + n, "10.0.0.5");
    ck_assert_ptr_nonnull(p);
    p[7] = '6';
    write_in_place(sc.tmp, buf + n, n, "w");
    ck_assert_int_eq(rename(sc.tmp, sc.path), 0);
    wait_reports(&log, 3);
    watch_log_get(&log, &c);
    ck_assert_int_ne(c.last_status, MCR_OK);
    ck_assert_uint_eq(mcr_router_epoch(r), 2);

    /* An older snapshot: stale, refused. */
    ck_assert_int_eq(mcr_snapshot_save(s1, sc.path, &err), MCR_OK);
    wait_reports(&log, 4);
    watch_log_get(&log, &c);
    ck_assert_int_eq(c.last_status, MCR_ERR_STALE);
    ck_assert_ptr_nonnull(strstr(c.last_error, "stale"));
    ck_assert_uint_eq(mcr_router_epoch(r), 2);

    /* The whole next snapshot: published. */
    ck_assert_int_eq(rename(other, sc.path), 0);
    wait_reports(&log, 5);
    watch_log_get(&log, &c);
    ck_assert_msg(c.last_status == MCR_OK, "%s", c.last_error);
    ck_assert_uint_eq(mcr_router_epoch(r), 3);

    mcr_watcher_free(w);
    mcr_changes_free(add);
    mcr_snapshot_unref(s1);
    mcr_snapshot_unref(s2);
    mcr_snapshot_unref(s3);
    mcr_router_free(r);
    scratch_free(&sc);
}
END_TEST

/* Files that cannot start a watcher: the error names the file and line;
 * no watcher, the router untouched. */
START_TEST(watch_refuses_bad_files)
{
    static const struct {
        const char *text;
        int code;
        const char *where;
    } bad[] = {
        {"10.0.0.1\n10.0.0.2 colour=red\n", MCR_ERR_SYNTAX, "line 2"},
        {"10.0.0.1:11211:2 weight=3\n", MCR_ERR_SYNTAX, "line 1"},
        {"fe80::1:11211\n", MCR_ERR_SYNTAX, "line 1"},
        {"[fe80::1\n", MCR_ERR_SYNTAX, "line 1"},
        {"10.0.0.1:70000\n", MCR_ERR_RANGE, "line 1"},
        {"10.0.0.1 weight=0\n", MCR_ERR_RANGE, "line 1"},
        {"10.0.0.1\n# x\n10.0.0.1:11211\n", MCR_ERR_DUPLICATE, "line 3"},
        {"10.0.0.1 id=x\n10.0.0.2 id=x\n", MCR_ERR_DUPLICATE, "line 2"},
        {"10.0.0.1 zone=\n", MCR_ERR_SYNTAX, "line 1"},
        {"10.0.0.1 state=down\n", MCR_ERR_SYNTAX, "line 1"},
        {"# nothing\n\n", MCR_ERR_EMPTY, "no server"},
    };
    scratch sc;
    mcr_snapshot *s0 = snap_of("10.0.0.1,10.0.0.2", MCR_MODE_KETAMA, 1);
    mcr_router *r = router_of(s0);
    mcr_router *empty = router_of(NULL);
    mcr_watcher *w = NULL;
    mcr_error err;

    scratch_init(&sc, "servers");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_atomic(&sc, bad[i].text);
        memset(&err, 0, sizeof err);
        int rc = mcr_watcher_new(r, sc.path, MCR_WATCH_SERVER_FILE, NULL, &fast, &w, &err);
        ck_assert_msg(rc == bad[i].code, "case %zu: %d (%s)", i, rc, err.message);
        ck_assert_msg(strstr(err.message, bad[i].where) != NULL, "case %zu: %s", i, err.message);
        ck_assert_ptr_null(w);
        ck_assert_uint_eq(mcr_router_epoch(r), 1);
    }
    /* A missing file. */
    unlink(sc.path);
    ck_assert_int_eq(mcr_watcher_new(r, sc.path, MCR_WATCH_SERVER_FILE, NULL, &fast, &w, &err),
                     MCR_ERR_IO);
    ck_assert_int_eq(mcr_watcher_new(r, sc.path, MCR_WATCH_SNAPSHOT_FILE, NULL, &fast, &w, &err),
                     MCR_ERR_IO);
    /* An empty router needs a template without servers. */
    write_atomic(&sc, "10.0.0.1\n");
    ck_assert_int_eq(
        mcr_watcher_new(empty, sc.path, MCR_WATCH_SERVER_FILE, NULL, &fast, &w, &err),
        MCR_ERR_INVALID);
    mcr_config *full = mcr_config_new();
    ck_assert_int_eq(mcr_config_add_servers(full, "10.0.0.7", NULL), MCR_OK);
    ck_assert_int_eq(
        mcr_watcher_new(empty, sc.path, MCR_WATCH_SERVER_FILE, full, &fast, &w, &err),
        MCR_ERR_INVALID);
    ck_assert_uint_eq(mcr_router_epoch(empty), 0);
    /* Bad arguments. */
    ck_assert_int_eq(mcr_watcher_new(NULL, sc.path, MCR_WATCH_SERVER_FILE, NULL, NULL, &w, NULL),
                     MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_watcher_new(r, NULL, MCR_WATCH_SERVER_FILE, NULL, NULL, &w, NULL),
                     MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_watcher_new(r, sc.path, (mcr_watch_format)7, NULL, NULL, &w, NULL),
                     MCR_ERR_INVALID);
    mcr_watcher_free(NULL);

    mcr_config_free(full);
    mcr_snapshot_unref(s0);
    mcr_router_free(r);
    mcr_router_free(empty);
    scratch_free(&sc);
}
END_TEST

/* Lookups go on while a watcher publishes; freeing the watcher stops it. */
START_TEST(watch_with_readers)
{
    scratch sc;
    watch_log log = {.mu = PTHREAD_MUTEX_INITIALIZER};
    mcr_watch_options opt = {.poll_ms = 5, .settle_ms = 10, .report = watch_report,
                             .report_arg = &log};
    stress st;
    reader rd[2];
    pthread_t th[2];
    mcr_watcher *w = NULL;
    mcr_error err = {0};
    tu_rng rng;
    char text[256];

    memset(&st, 0, sizeof st);
    tu_rng_init(&rng, 7);
    for (int k = 0; k < STRESS_KEYS; k++)
        st.key_len[k] = tu_key(&rng, st.keys[k], sizeof st.keys[k] - 1);
    scratch_init(&sc, "servers");
    write_atomic(&sc, "10.0.0.1\n10.0.0.2\n");
    mcr_snapshot *s0 = snap_of("10.0.0.1,10.0.0.2", MCR_MODE_KETAMA, 1);
    st.router = router_of(s0);
    mcr_snapshot_unref(s0);
    ck_assert_int_eq(mcr_watcher_new(st.router, sc.path, MCR_WATCH_SERVER_FILE, NULL, &opt, &w,
                                     &err),
                     MCR_OK);
    for (unsigned i = 0; i < 2; i++) {
        memset(&rd[i], 0, sizeof rd[i]);
        rd[i].st = &st;
        rd[i].id = i;
        ck_assert_int_eq(pthread_create(&th[i], NULL, reader_main, &rd[i]), 0);
    }
    for (int v = 0; v < 5; v++) {
        snprintf(text, sizeof text, "10.0.0.1\n10.0.0.2 weight=%d\n10.0.1.%d\n", v + 2, v);
        write_atomic(&sc, text);
        wait_reports(&log, v + 1);
    }
    mcr_watcher_free(w);
    atomic_store(&st.stop, 1);
    for (unsigned i = 0; i < 2; i++) {
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        ck_assert_msg(rd[i].errors == 0, "%s", rd[i].first_error);
    }
    watch_log c;
    watch_log_get(&log, &c);
    ck_assert_msg(c.errors == 0, "%s", c.last_error);
    ck_assert_int_eq(c.published, 5);
    ck_assert_uint_eq(mcr_router_epoch(st.router), 6);
    mcr_router_free(st.router);
    scratch_free(&sc);
}
END_TEST

static Suite *watcher_suite(void)
{
    Suite *s = suite_create("watcher");
    TCase *tw = tcase_create("watcher");
    /* The tests wait for reloads (each wait bounded by 10 s). */
    tcase_set_timeout(tw, 120);
    tcase_add_test(tw, watch_server_file);
    tcase_add_test(tw, watch_debounce);
    tcase_add_test(tw, watch_snapshot_file);
    tcase_add_test(tw, watch_refuses_bad_files);
    tcase_add_test(tw, watch_with_readers);
    suite_add_tcase(s, tw);
    return s;
}

int main(void)
{
    return tu_run(watcher_suite());
}
