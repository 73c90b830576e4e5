/* SPDX-License-Identifier: BSD-3-Clause */
/* test_fleet_follow.c: mcr_fleet_follow against real etcd: adoption in order, values refused (edited by hand, stale, deleted), a watch whose revision was compacted, etcd down at the start (with and without a cache file), registration under clients/ and its lease. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fleet_env.h"
#include "realserver.h"
#include "testutil.h"

/* How long a follower gets to see a change (a watch event, a re-read). */
#define SEE_MS mcr_test_ms(10000)

static void teardown(void)
{
    rs_stop_all();
}

static void opts(mcr_fleet_options *o, const char *pool)
{
    fe_options(o, es_endpoints(fe_cluster()), pool);
}

typedef struct follower {
    mcr_router *router;
    mcr_fleet *f;
    fe_rec rec;
} follower;

/* Follow o's pool with fo (NULL: defaults; on_event is set here), into a
 * new empty router. Returns the status; on MCR_OK the follower runs. */
static int follow_try(follower *x, const mcr_fleet_options *o, mcr_fleet_follow_options *fo,
                      mcr_error *err)
{
    mcr_fleet_follow_options d;
    int rc;

    memset(x, 0, sizeof(*x));
    if (fo == NULL) {
        memset(&d, 0, sizeof(d));
        fo = &d;
    }
    fe_rec_init(&x->rec);
    fo->on_event = fe_on_event;
    fo->arg = &x->rec;
    ck_assert_int_eq(mcr_router_new(NULL, &x->router, err), MCR_OK);
    rc = mcr_fleet_follow(o, fo, x->router, &x->f, err);
    if (rc == MCR_OK)
        fe_rec_start(&x->rec, mcr_router_epoch(x->router));
    return rc;
}

static void follow(follower *x, const mcr_fleet_options *o, mcr_fleet_follow_options *fo)
{
    mcr_error err = {0};
    int rc = follow_try(x, o, fo, &err);

    ck_assert_msg(rc == MCR_OK, "mcr_fleet_follow(%s): %s (%s)", o->pool, mcr_strerror(rc),
                  err.message);
    ck_assert_msg(err.code == MCR_OK && err.message[0] == '\0', "a message on success: %s",
                  err.message);
}

static void unfollow(follower *x)
{
    mcr_fleet_free(x->f);
    x->f = NULL;
    mcr_router_free(x->router);
    x->router = NULL;
    fe_rec_destroy(&x->rec);
}

static mcr_fleet_stats stats(follower *x)
{
    mcr_fleet_stats s;
    mcr_fleet_get_stats(x->f, &s);
    return s;
}

/* The router holds the pool's current snapshot (epoch and checksum). */
static void assert_current(follower *x, const mcr_fleet_options *o)
{
    mcr_snapshot *p = fe_read(o, NULL), *r = mcr_router_current(x->router);

    ck_assert_ptr_nonnull(r);
    ck_assert_msg(mcr_snapshot_epoch(r) == mcr_snapshot_epoch(p) &&
                      strcmp(mcr_snapshot_checksum(r), mcr_snapshot_checksum(p)) == 0,
                  "router at epoch %llu %s, pool at %llu %s",
                  (unsigned long long)mcr_snapshot_epoch(r), mcr_snapshot_checksum(r),
                  (unsigned long long)mcr_snapshot_epoch(p), mcr_snapshot_checksum(p));
    mcr_snapshot_unref(p);
    mcr_snapshot_unref(r);
}

static void wait_adopted(follower *x, uint64_t epoch)
{
    if (!fe_wait_adopted(&x->rec, epoch, SEE_MS)) {
        mcr_fleet_stats s = stats(x);
        ck_abort_msg("epoch %llu not adopted within %d ms: router at %llu (adopted %llu, "
                     "refused %llu, disconnects %llu, connected %d)",
                     (unsigned long long)epoch, SEE_MS,
                     (unsigned long long)mcr_router_epoch(x->router),
                     (unsigned long long)s.adopted, (unsigned long long)s.refused,
                     (unsigned long long)s.disconnects, s.connected);
    }
    ck_assert_uint_eq(mcr_router_epoch(x->router), epoch);
}

/* The next REFUSED event (the n-th): its status and message checked. */
static void wait_refused(follower *x, size_t n, int status, const char *says)
{
    char msg[MCR_ERROR_MESSAGE_SIZE];

    ck_assert_msg(fe_wait_count(&x->rec, MCR_FLEET_REFUSED, n, SEE_MS),
                  "refusal %zu not reported within %d ms (%zu so far)", n, SEE_MS,
                  fe_count(&x->rec, MCR_FLEET_REFUSED));
    pthread_mutex_lock(&x->rec.mu);
    int st = x->rec.last_status[MCR_FLEET_REFUSED];
    pthread_mutex_unlock(&x->rec.mu);
    fe_last_msg(&x->rec, MCR_FLEET_REFUSED, msg, sizeof(msg));
    ck_assert_msg(st == status && strstr(msg, says) != NULL,
                  "refusal %zu: %s \"%s\", expected %s saying \"%s\"", n, mcr_strerror(st), msg,
                  mcr_strerror(status), says);
    ck_assert_uint_eq(stats(x).refused, n);
}

static void put(es_cluster *c, const char *key, const char *value)
{
    ck_assert_msg(es_put(c, key, value) == 0, "es_put %s: %s", key, es_last_error());
}

static void put_snapshot(es_cluster *c, const char *key, const mcr_snapshot *s)
{
    char *t = fe_text(s);
    put(c, key, t);
    free(t);
}

/* ------------------------------------------------------------ adoption */

/* Changes one at a time: each epoch adopted, in order, none skipped. */
START_TEST(test_adopt_spaced)
{
    mcr_fleet_options o;
    follower x;
    mcr_error err = {0};
    uint64_t epoch = 0;

    opts(&o, "spaced");
    ck_assert_uint_eq(fe_publish(&o, "10.2.0.1:11211,10.2.0.2:11211"), 1);
    follow(&x, &o, NULL);
    ck_assert_uint_eq(mcr_router_epoch(x.router), 1);
    assert_current(&x, &o);
    mcr_fleet_stats s = stats(&x);
    ck_assert_uint_eq(s.adopted, 1);
    ck_assert_uint_eq(s.epoch, 1);
    ck_assert_msg(fe_wait_count(&x.rec, MCR_FLEET_CONNECTED, 1, SEE_MS), "no watch established");

    for (int i = 0; i < 8; i++) {
        char id[16], host[32];
        snprintf(id, sizeof(id), "s%d", i);
        snprintf(host, sizeof(host), "10.2.1.%d", i + 1);
        ck_assert_int_eq(fe_add(&o, id, host, 11211, &epoch, &err), MCR_OK);
        ck_assert_uint_eq(epoch, 2 + (uint64_t)i);
        wait_adopted(&x, epoch);
        assert_current(&x, &o);
    }
    pthread_mutex_lock(&x.rec.mu);
    ck_assert_uint_eq(x.rec.nepochs, 8);
    for (size_t i = 0; i < x.rec.nepochs; i++)
        ck_assert_uint_eq(x.rec.epochs[i], 2 + i);
    ck_assert_uint_eq(x.rec.not_above, 0);
    ck_assert_uint_eq(x.rec.skips, 0);
    ck_assert_msg(x.rec.thread_ok && !pthread_equal(x.rec.thread, pthread_self()),
                  "events not all on the follower's own thread");
    pthread_mutex_unlock(&x.rec.mu);
    s = stats(&x);
    ck_assert_uint_eq(s.adopted, 9);
    ck_assert_uint_eq(s.epoch, 9);
    ck_assert_uint_eq(s.refused, 0);
    ck_assert_msg(s.watch_events >= 8 && s.connected == 1 && s.registered == 1,
                  "watch_events %llu connected %d registered %d",
                  (unsigned long long)s.watch_events, s.connected, s.registered);
    unfollow(&x);
}
END_TEST

/* Two writers as fast as they can: the watch delivers every revision of
 * the key, so the follower adopts every epoch, in order, none skipped
 * (skipping happens only on a re-read: after a compaction, or from the
 * cache file). */
typedef struct burst {
    const mcr_fleet_options *o;
    int w, n, failed;
    char msg[MCR_ERROR_MESSAGE_SIZE];
} burst;

static void *burst_writer(void *arg)
{
    burst *b = arg;
    for (int i = 0; i < b->n; i++) {
        char id[16], host[32];
        mcr_error err = {0};
        uint64_t e;
        snprintf(id, sizeof(id), "b%d-%d", b->w, i);
        snprintf(host, sizeof(host), "10.3.%d.%d", b->w, i + 1);
        if (fe_add(b->o, id, host, 11211, &e, &err) != MCR_OK && !b->failed) {
            b->failed = 1;
            snprintf(b->msg, sizeof(b->msg), "%s: %.200s", id, err.message);
        }
    }
    return NULL;
}

START_TEST(test_adopt_burst)
{
    mcr_fleet_options o;
    follower x;
    burst b[2];
    pthread_t t[2];
    const int n = 15;

    opts(&o, "burst");
    ck_assert_uint_eq(fe_publish(&o, "10.3.9.1:11211"), 1);
    follow(&x, &o, NULL);
    for (int w = 0; w < 2; w++) {
        b[w] = (burst){.o = &o, .w = w, .n = n};
        ck_assert_int_eq(pthread_create(&t[w], NULL, burst_writer, &b[w]), 0);
    }
    for (int w = 0; w < 2; w++) {
        pthread_join(t[w], NULL);
        ck_assert_msg(!b[w].failed, "writer %d: %s", w, b[w].msg);
    }
    ck_assert_uint_eq(fe_epoch(&o), 1 + 2 * (uint64_t)n);
    wait_adopted(&x, 1 + 2 * (uint64_t)n);
    assert_current(&x, &o);
    pthread_mutex_lock(&x.rec.mu);
    ck_assert_uint_eq(x.rec.not_above, 0);
    ck_assert_msg(x.rec.skips == 0 && x.rec.nepochs == 2 * (size_t)n,
                  "%zu skips, %zu epochs adopted of %d", x.rec.skips, x.rec.nepochs, 2 * n);
    pthread_mutex_unlock(&x.rec.mu);
    ck_assert_uint_eq(stats(&x).refused, 0);
    unfollow(&x);
}
END_TEST

/* ------------------------------------------------------------ refusals */

START_TEST(test_refused_values)
{
    mcr_fleet_options o;
    follower x;
    es_cluster *c = fe_cluster();
    char *out = NULL;
    size_t n = 0;

    opts(&o, "refuse");
    ck_assert_uint_eq(fe_publish(&o, "10.4.0.1:11211,10.4.0.2:11211"), 1);
    const char *key = fe_snapshot_key(&o);
    char keyc[256];
    snprintf(keyc, sizeof(keyc), "%s", key);
    mcr_snapshot *e1 = fe_read(&o, NULL);
    mcr_snapshot *e2 = fe_apply_add(e1, "two", 2);
    mcr_snapshot *e2b = fe_apply_add(e1, "two-b", 3); /* epoch 2 too, other servers */
    mcr_snapshot *e3 = fe_apply_add(e2, "three", 4);
    mcr_snapshot *e4 = fe_apply_add(e3, "four", 5);
    mcr_snapshot *e5 = fe_apply_add(e4, "five", 6);
    follow(&x, &o, NULL);
    ck_assert_msg(fe_wait_count(&x.rec, MCR_FLEET_CONNECTED, 1, SEE_MS), "no watch");

    /* Garbage. */
    put(c, keyc, "edited by hand");
    wait_refused(&x, ++n, MCR_ERR_SYNTAX, keyc);
    ck_assert_uint_eq(mcr_router_epoch(x.router), 1);

    /* A valid text with one byte changed. */
    char *t = fe_text(e2);
    char *p = strstr(t, "10.9.0.3");
    ck_assert_ptr_nonnull(p);
    p[7] = '7';
    put(c, keyc, t);
    free(t);
    wait_refused(&x, n + 1, MCR_ERR_CORRUPT, "checksum mismatch");
    n++;
    ck_assert_uint_eq(mcr_router_epoch(x.router), 1);

    /* The next valid one is adopted. */
    put_snapshot(c, keyc, e2);
    wait_adopted(&x, 2);

    /* Stale: an older epoch, then the same epoch with other servers. */
    put_snapshot(c, keyc, e1);
    wait_refused(&x, ++n, MCR_ERR_STALE, "epoch 1 is not above the adopted epoch 2");
    put_snapshot(c, keyc, e2b);
    wait_refused(&x, ++n, MCR_ERR_STALE, "epoch 2 is not above");
    ck_assert_uint_eq(mcr_router_epoch(x.router), 2);

    /* The key deleted. */
    ck_assert_msg(es_ctl(c, &out, "del", "--", keyc, NULL) == 0, "del: %s", out);
    free(out);
    wait_refused(&x, ++n, MCR_ERR_UNKNOWN, "deleted");
    ck_assert_uint_eq(mcr_router_epoch(x.router), 2);

    /* Then created again by publish: epoch 1, older than what the
     * follower holds, so refused as stale too (a pool deleted and created
     * again must start above the epochs its followers hold). */
    ck_assert_uint_eq(fe_publish(&o, "10.4.0.1:11211"), 1);
    wait_refused(&x, ++n, MCR_ERR_STALE, "epoch 1 is not above");

    /* The epoch already held, written again: nothing (neither adopted nor
     * refused); then epochs 3 and 4 are adopted. */
    put_snapshot(c, keyc, e3);
    wait_adopted(&x, 3);
    put_snapshot(c, keyc, e3);
    put_snapshot(c, keyc, e4);
    wait_adopted(&x, 4);
    ck_assert_uint_eq(stats(&x).refused, n);
    pthread_mutex_lock(&x.rec.mu);
    ck_assert_uint_eq(x.rec.nepochs, 3);
    ck_assert_uint_eq(x.rec.epochs[0], 2);
    ck_assert_uint_eq(x.rec.epochs[1], 3);
    ck_assert_uint_eq(x.rec.epochs[2], 4);
    pthread_mutex_unlock(&x.rec.mu);

    /* And a change through the library builds on what is there. */
    put_snapshot(c, keyc, e5);
    wait_adopted(&x, 5);
    assert_current(&x, &o);
    mcr_snapshot_unref(e1);
    mcr_snapshot_unref(e2);
    mcr_snapshot_unref(e2b);
    mcr_snapshot_unref(e3);
    mcr_snapshot_unref(e4);
    mcr_snapshot_unref(e5);
    unfollow(&x);
}
END_TEST

/* ------------------------------------------------------------ compaction */

/* The follower talks to member 0 only. Member 0 stopped, changes written
 * through members 1 and 2, the log compacted at the latest revision, member
 * 0 started again: the follower's watch resumes from a revision that is
 * gone, so it reads the pool again (RESYNC) and ends on the last epoch,
 * having skipped the ones in between. */
START_TEST(test_compaction)
{
    es_cluster *c = es_start(3, "fleet-compact");
    mcr_fleet_options o, w;
    mcr_fleet_follow_options fo = {.retry_min_ms = 50, .retry_max_ms = 200, .no_register = 1};
    follower x;
    mcr_error err = {0};
    uint64_t epoch = 0;
    char eps12[256], rev[32], *out = NULL;

    ck_assert_msg(c != NULL, "es_start(3): %s", es_last_error());
    ck_assert_int_ge(es_leader(c, mcr_test_ms(15000)), 0);
    fe_options(&o, es_endpoint(c, 0), "compact");
    snprintf(eps12, sizeof(eps12), "%s,%s", es_endpoint(c, 1), es_endpoint(c, 2));
    fe_options(&w, eps12, "compact");
    ck_assert_uint_eq(fe_publish(&w, "10.5.0.1:11211,10.5.0.2:11211"), 1);
    follow(&x, &o, &fo);
    ck_assert_msg(fe_wait_count(&x.rec, MCR_FLEET_CONNECTED, 1, SEE_MS), "no watch");
    ck_assert_int_eq(fe_add(&w, "c0", "10.5.1.1", 11211, &epoch, &err), MCR_OK);
    wait_adopted(&x, 2);

    ck_assert_int_eq(es_stop_member(c, 0), 0);
    ck_assert_msg(fe_wait_count(&x.rec, MCR_FLEET_DISCONNECTED, 1, SEE_MS),
                  "the watch on the stopped member did not end");
    mcr_fleet_stats ds = stats(&x);
    ck_assert_msg(ds.connected == 0 && ds.disconnects >= 1, "connected %d, disconnects %llu",
                  ds.connected, (unsigned long long)ds.disconnects);
    for (int i = 1; i <= 5; i++) {
        char id[16], host[32];
        snprintf(id, sizeof(id), "c%d", i);
        snprintf(host, sizeof(host), "10.5.1.%d", i + 1);
        ck_assert_msg(fe_add(&w, id, host, 11211, &epoch, &err) == MCR_OK, "%s", err.message);
    }
    ck_assert_uint_eq(epoch, 7);
    snprintf(rev, sizeof(rev), "%lld", es_revision(c));
    ck_assert_msg(es_ctl_at(c, 1, &out, "compaction", rev, NULL) == 0, "compaction: %s", out);
    free(out);
    ck_assert_uint_eq(mcr_router_epoch(x.router), 2);

    ck_assert_msg(es_restart(c, 0) == 0, "restart m0: %s", es_last_error());
    wait_adopted(&x, 7);
    assert_current(&x, &w);
    mcr_fleet_stats s = stats(&x);
    ck_assert_msg(s.resyncs >= 1 && fe_count(&x.rec, MCR_FLEET_RESYNC) >= 1,
                  "no resync (resyncs %llu)", (unsigned long long)s.resyncs);
    pthread_mutex_lock(&x.rec.mu);
    ck_assert_uint_eq(x.rec.not_above, 0);
    ck_assert_msg(x.rec.nepochs == 2 && x.rec.epochs[1] == 7 && x.rec.skips == 1,
                  "adopted %zu epochs, last %llu, %zu skips", x.rec.nepochs,
                  (unsigned long long)x.rec.last_adopted, x.rec.skips);
    pthread_mutex_unlock(&x.rec.mu);

    /* And it watches again from there. */
    ck_assert_int_eq(fe_add(&w, "c6", "10.5.1.9", 11211, &epoch, &err), MCR_OK);
    wait_adopted(&x, 8);
    unfollow(&x);
    es_free(c);
}
END_TEST

/* ------------------------------------------------------------ etcd down at the start */

START_TEST(test_start_unreachable)
{
    int ports[1], fds[1];
    char eps[64];
    mcr_fleet_options o;
    mcr_fleet_follow_options fo = {0};
    follower x;
    mcr_error err = {0};

    ck_assert_int_eq(rs_reserve_ports("127.0.0.1", 1, ports, fds), 0);
    rs_release_ports(1, fds);
    snprintf(eps, sizeof(eps), "http://127.0.0.1:%d", ports[0]);
    fe_options(&o, eps, "down");
    o.wait_ms = 800;
    int64_t t0 = mcr_test_now_ms();
    int rc = follow_try(&x, &o, &fo, &err);
    int64_t took = mcr_test_now_ms() - t0;
    ck_assert_msg(rc == MCR_ERR_CONNECT, "%s (%s)", mcr_strerror(rc), err.message);
    ck_assert_ptr_null(x.f);
    ck_assert_uint_eq(mcr_router_epoch(x.router), 0);
    ck_assert_msg(strstr(err.message, eps) != NULL, "%s", err.message);
    ck_assert_msg(took >= 780 && took <= 800 + mcr_test_ms(1000), "gave up after %lld ms",
                  (long long)took);
    unfollow(&x);

    /* A cache file that is not there, or not a snapshot: said so. */
    char *dir = tu_tmpdir("fleet-cache");
    char path[512];
    snprintf(path, sizeof(path), "%s/none", dir);
    fo.cache_file = path;
    rc = follow_try(&x, &o, &fo, &err);
    ck_assert_msg(rc == MCR_ERR_CONNECT && strstr(err.message, "cache file is not usable") &&
                      strstr(err.message, path),
                  "%s (%s)", mcr_strerror(rc), err.message);
    unfollow(&x);
    tu_write_file(path, "junk\n", 5);
    rc = follow_try(&x, &o, &fo, &err);
    ck_assert_msg(rc == MCR_ERR_CONNECT && strstr(err.message, "cache file is not usable"),
                  "%s (%s)", mcr_strerror(rc), err.message);
    unfollow(&x);
    tu_tmpdir_free(dir);
}
END_TEST

/* A follower saves the pool to its cache file; later etcd is down when
 * another starts: it starts from the file (a warning, MCR_FLEET_CACHED),
 * and catches up to the pool's newer epoch once etcd is back. */
START_TEST(test_start_from_cache)
{
    es_cluster *c = es_start(1, "fleet-cache");
    char *dir = tu_tmpdir("fleet-cache");
    char path[512];
    mcr_fleet_options o;
    mcr_fleet_follow_options fo = {.retry_min_ms = 50, .retry_max_ms = 200,
                                   .client_id = "cached"};
    follower x;
    mcr_error err = {0};
    uint64_t epoch = 0;
    mcr_snapshot *s = NULL;

    ck_assert_msg(c != NULL, "es_start: %s", es_last_error());
    snprintf(path, sizeof(path), "%s/pool.snap", dir);
    fo.cache_file = path;
    fe_options(&o, es_endpoints(c), "cached");
    ck_assert_uint_eq(fe_publish(&o, "10.6.0.1:11211,10.6.0.2:11211"), 1);
    ck_assert_int_eq(fe_add(&o, "a", "10.6.1.1", 11211, &epoch, &err), MCR_OK);

    /* The first follower writes the file at its start, and on adoption. */
    follow(&x, &o, &fo);
    ck_assert_int_eq(mcr_snapshot_load(path, NULL, 0, &s, &err), MCR_OK);
    ck_assert_uint_eq(mcr_snapshot_epoch(s), 2);
    mcr_snapshot_unref(s);
    ck_assert_int_eq(fe_add(&o, "b", "10.6.1.2", 11211, &epoch, &err), MCR_OK);
    wait_adopted(&x, 3);
    ck_assert_int_eq(mcr_snapshot_load(path, NULL, 0, &s, &err), MCR_OK);
    ck_assert_uint_eq(mcr_snapshot_epoch(s), 3);
    mcr_snapshot_unref(s);
    unfollow(&x);

    /* A change it did not see, then etcd down. */
    ck_assert_int_eq(fe_add(&o, "c", "10.6.1.3", 11211, &epoch, &err), MCR_OK);
    ck_assert_uint_eq(epoch, 4);
    ck_assert_int_eq(es_stop_member(c, 0), 0);

    o.wait_ms = 800;
    err.code = MCR_ERR_IO;
    snprintf(err.message, sizeof(err.message), "untouched");
    int rc = follow_try(&x, &o, &fo, &err);
    ck_assert_msg(rc == MCR_OK, "%s (%s)", mcr_strerror(rc), err.message);
    ck_assert_msg(err.code == MCR_ERR_IO, "err written on success: %s", err.message);
    ck_assert_uint_eq(mcr_router_epoch(x.router), 3);
    ck_assert_msg(fe_wait_count(&x.rec, MCR_FLEET_CACHED, 1, SEE_MS), "no CACHED event");
    pthread_mutex_lock(&x.rec.mu);
    /* the warning comes with the event; err is untouched on success */
    const char *w = x.rec.last_msg[MCR_FLEET_CACHED];
    ck_assert_msg(x.rec.last_status[MCR_FLEET_CACHED] == MCR_OK && strstr(w, "cached epoch 3") &&
                      strstr(w, "etcd unreachable") && strstr(w, path),
                  "warning: \"%s\"", w);
    ck_assert_str_eq(err.message, "untouched");
    ck_assert_msg(x.rec.thread_ok && !pthread_equal(x.rec.thread, pthread_self()),
                  "CACHED reported on the caller's thread, not the follower's");
    pthread_mutex_unlock(&x.rec.mu);
    ck_assert_msg(fe_wait_count(&x.rec, MCR_FLEET_DISCONNECTED, 1, SEE_MS),
                  "no DISCONNECTED while etcd is down");
    ck_assert_uint_eq(mcr_router_epoch(x.router), 3);

    /* etcd back on the same ports: epoch 4 adopted, registered. */
    ck_assert_msg(es_restart(c, 0) == 0, "restart: %s", es_last_error());
    wait_adopted(&x, 4);
    assert_current(&x, &o);
    ck_assert_int_eq(mcr_snapshot_load(path, NULL, 0, &s, &err), MCR_OK);
    ck_assert_uint_eq(mcr_snapshot_epoch(s), 4);
    mcr_snapshot_unref(s);
    mcr_fleet_client cl;
    int64_t end = mcr_test_now_ms() + SEE_MS;
    while (!(fe_client(&o, "cached", &cl, NULL, 0) && cl.epoch == 4) && mcr_test_now_ms() < end)
        fe_nap();
    ck_assert_msg(fe_client(&o, "cached", &cl, NULL, 0) && cl.epoch == 4,
                  "not registered at epoch 4 after etcd came back");

    /* etcd gone again: mcr_fleet_free still returns at once (a refused
     * revoke), the router keeps epoch 4. */
    ck_assert_int_eq(es_stop_member(c, 0), 0);
    int64_t t0 = mcr_test_now_ms();
    mcr_fleet_free(x.f);
    x.f = NULL;
    ck_assert_msg(mcr_test_now_ms() - t0 < mcr_test_ms(3000), "mcr_fleet_free took %lld ms",
                  (long long)(mcr_test_now_ms() - t0));
    ck_assert_uint_eq(mcr_router_epoch(x.router), 4);
    unfollow(&x);
    es_free(c);
    tu_tmpdir_free(dir);
}
END_TEST

/* A cache file that cannot be written: MCR_FLEET_CACHE at the start and on
 * each adoption (on the follower's thread, as every event), and the
 * follower goes on. */
START_TEST(test_cache_unwritable)
{
    mcr_fleet_options o;
    char *dir = tu_tmpdir("fleet-cache");
    char path[512], msg[MCR_ERROR_MESSAGE_SIZE];
    mcr_fleet_follow_options fo = {.no_register = 1};
    follower x;
    mcr_error err = {0};
    uint64_t epoch = 0;

    snprintf(path, sizeof(path), "%s/no-such-dir/pool.snap", dir);
    fo.cache_file = path;
    opts(&o, "cache-unwritable");
    ck_assert_uint_eq(fe_publish(&o, "10.6.9.1:11211"), 1);
    follow(&x, &o, &fo);
    ck_assert_msg(fe_wait_count(&x.rec, MCR_FLEET_CACHE, 1, SEE_MS), "no CACHE event");
    ck_assert_int_eq(fe_add(&o, "u", "10.6.9.2", 11211, &epoch, &err), MCR_OK);
    wait_adopted(&x, 2);
    ck_assert_msg(fe_wait_count(&x.rec, MCR_FLEET_CACHE, 2, SEE_MS), "no CACHE event on adoption");
    fe_last_msg(&x.rec, MCR_FLEET_CACHE, msg, sizeof(msg));
    pthread_mutex_lock(&x.rec.mu);
    int st = x.rec.last_status[MCR_FLEET_CACHE];
    ck_assert_msg(x.rec.thread_ok && !pthread_equal(x.rec.thread, pthread_self()),
                  "events not all on the follower's thread");
    pthread_mutex_unlock(&x.rec.mu);
    ck_assert_msg(st == MCR_ERR_IO && strstr(msg, path), "%s: %s", mcr_strerror(st), msg);
    unfollow(&x);
    tu_tmpdir_free(dir);
}
END_TEST

/* ------------------------------------------------------------ registration */

/* The lease of `key` on the suite's member (etcdctl get -w json), 0 when the
 * key is not there. */
static unsigned long long key_lease(const char *key)
{
    char *out = NULL;
    unsigned long long lease = 0;
    ck_assert_msg(es_ctl(fe_cluster(), &out, "get", key, "-w", "json", NULL) == 0, "get %s: %s",
                  key, out);
    const char *l = strstr(out, "\"lease\":");
    if (l != NULL)
        lease = strtoull(l + 8, NULL, 10);
    free(out);
    return lease;
}

START_TEST(test_registration)
{
    mcr_fleet_options o;
    mcr_fleet_follow_options fo = {.client_id = "reg-1", .lease_ttl_s = 2};
    follower x, y, z;
    mcr_fleet_client cl;
    mcr_error err = {0};
    char host[256], pid[32];
    uint64_t epoch = 0;

    opts(&o, "reg");
    ck_assert_uint_eq(fe_publish(&o, "10.7.0.1:11211"), 1);
    mcr_snapshot *s = fe_read(&o, NULL);
    follow(&x, &o, &fo);
    ck_assert_str_eq(mcr_fleet_client_id(x.f), "reg-1");
    /* Registered before mcr_fleet_follow returns. */
    ck_assert_msg(fe_client(&o, "reg-1", &cl, host, sizeof(host)), "not registered");
    ck_assert_uint_eq(cl.epoch, 1);
    ck_assert_str_eq(cl.checksum, mcr_snapshot_checksum(s));
    snprintf(pid, sizeof(pid), " pid %ld mcroute ", (long)getpid());
    ck_assert_msg(strstr(host, pid) != NULL, "host \"%s\"", host);
    ck_assert_int_eq(stats(&x).registered, 1);
    mcr_snapshot_unref(s);

    /* A read-only observer, and one with the default id HOST-PID. */
    mcr_fleet_follow_options ro = {.no_register = 1, .client_id = "observer"};
    follow(&y, &o, &ro);
    ck_assert_msg(!fe_client(&o, "observer", NULL, NULL, 0), "no_register registered");
    ck_assert_int_eq(stats(&y).registered, 0);
    follow(&z, &o, NULL);
    const char *zid = mcr_fleet_client_id(z.f);
    char tail[32];
    snprintf(tail, sizeof(tail), "-%ld", (long)getpid());
    ck_assert_msg(strlen(zid) > strlen(tail) && strcmp(zid + strlen(zid) - strlen(tail), tail) == 0,
                  "default id \"%s\"", zid);
    ck_assert_msg(fe_client(&o, zid, NULL, NULL, 0), "%s not registered", zid);

    /* The epoch registered follows adoption. */
    ck_assert_int_eq(fe_add(&o, "r1", "10.7.1.1", 11211, &epoch, &err), MCR_OK);
    wait_adopted(&x, 2);
    int64_t end = mcr_test_now_ms() + SEE_MS;
    while (!(fe_client(&o, "reg-1", &cl, NULL, 0) && cl.epoch == 2) && mcr_test_now_ms() < end)
        fe_nap();
    ck_assert_msg(fe_client(&o, "reg-1", &cl, NULL, 0) && cl.epoch == 2,
                  "registration still at epoch %llu", (unsigned long long)cl.epoch);
    s = fe_read(&o, NULL);
    ck_assert_str_eq(cl.checksum, mcr_snapshot_checksum(s));
    mcr_snapshot_unref(s);

    /* Kept alive past its 2 s lease: present at every look for 5 s. */
    end = mcr_test_now_ms() + 5000;
    while (mcr_test_now_ms() < end) {
        ck_assert_msg(fe_client(&o, "reg-1", NULL, NULL, 0), "the lease of reg-1 expired");
        /* an observation window, not a synchronisation */
        nanosleep(&(struct timespec){0, 200 * 1000000L}, NULL);
    }
    ck_assert_int_eq(stats(&x).registered, 1);

    /* Its lease revoked by hand (the key goes with it): the next keepalive
     * finds the lease gone and registers again on a new one. */
    char key[256], *out = NULL, hex[32];
    snprintf(key, sizeof(key), "/mcroute/pools/reg/clients/reg-1");
    unsigned long long lease = key_lease(key);
    ck_assert_msg(lease != 0, "%s has no lease", key);
    snprintf(hex, sizeof(hex), "%llx", lease);
    ck_assert_msg(es_ctl(fe_cluster(), &out, "lease", "revoke", hex, NULL) == 0, "revoke %s: %s",
                  hex, out);
    free(out);
    /* (it may be back before a look finds it gone: the proof is a new lease) */
    end = mcr_test_now_ms() + 2000 + mcr_test_ms(5000);
    unsigned long long again = 0;
    while (((again = key_lease(key)) == 0 || again == lease) && mcr_test_now_ms() < end)
        fe_nap();
    ck_assert_msg(again != 0 && again != lease && fe_client(&o, "reg-1", &cl, NULL, 0) &&
                      cl.epoch == 2,
                  "not registered again after its lease %llx was revoked (lease now %llx)", lease,
                  again);

    /* Gone as mcr_fleet_free returns. */
    unfollow(&x);
    ck_assert_msg(!fe_client(&o, "reg-1", NULL, NULL, 0), "reg-1 still registered after free");
    ck_assert_msg(fe_client(&o, zid, NULL, NULL, 0), "the other one went too");
    unfollow(&z);
    unfollow(&y);
    size_t n = 9;
    mcr_fleet_client *all = NULL;
    ck_assert_int_eq(mcr_fleet_clients(&o, &all, &n, &err), MCR_OK);
    ck_assert_uint_eq(n, 0);
}
END_TEST

/* A process that dies without mcr_fleet_free: its key goes when the lease
 * expires. */
START_TEST(test_registration_expires)
{
    mcr_fleet_options o;
    int up[2], go[2];
    const unsigned ttl = 2;
    char b = 0;

    opts(&o, "expire");
    ck_assert_uint_eq(fe_publish(&o, "10.8.0.1:11211"), 1);
    ck_assert_int_eq(pipe(up), 0);
    ck_assert_int_eq(pipe(go), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        mcr_router *r = NULL;
        mcr_fleet *f = NULL;
        mcr_fleet_follow_options fo = {.client_id = "dies", .lease_ttl_s = ttl};
        close(up[0]);
        close(go[1]);
        if (mcr_router_new(NULL, &r, NULL) != MCR_OK ||
            mcr_fleet_follow(&o, &fo, r, &f, NULL) != MCR_OK)
            _exit(2);
        if (write(up[1], "u", 1) != 1 || read(go[0], &b, 1) != 1)
            _exit(3);
        _exit(0); /* no mcr_fleet_free: the lease is left to expire */
    }
    close(up[1]);
    close(go[0]);
    ck_assert_msg(read(up[0], &b, 1) == 1, "the child did not start following");
    ck_assert_msg(fe_client(&o, "dies", NULL, NULL, 0), "the child is not registered");
    ck_assert_int_eq(write(go[1], "g", 1), 1);
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
    int64_t dead = mcr_test_now_ms();
    /* The lease outlives the process by up to its ttl. */
    int64_t end = dead + ttl * 1000 + mcr_test_ms(4000);
    while (fe_client(&o, "dies", NULL, NULL, 0) && mcr_test_now_ms() < end)
        fe_nap();
    int64_t took = mcr_test_now_ms() - dead;
    ck_assert_msg(!fe_client(&o, "dies", NULL, NULL, 0),
                  "still registered %lld ms after the process died", (long long)took);
    printf("registration_expires: the key went %lld ms after the process died (ttl %u s)\n",
           (long long)took, ttl);
    close(up[0]);
    close(go[1]);
}
END_TEST

/* ------------------------------------------------------------ a large pool */

/* 3,000 servers: a value of some 400 KB (530 KB of base64), read in one
 * reply and watched as one line over many chunks. */
START_TEST(test_large_pool)
{
    mcr_fleet_options o;
    follower x;
    mcr_error err = {0};
    uint64_t epoch = 0;
    const int n = 3000;
    char *spec = malloc((size_t)n * 24);
    size_t k = 0;

    for (int i = 0; i < n; i++)
        k += (size_t)sprintf(spec + k, "%s10.40.%d.%d:11211", i ? "," : "", i / 250, i % 250 + 1);
    opts(&o, "large");
    ck_assert_uint_eq(fe_publish(&o, spec), 1);
    free(spec);
    char *v = es_get(fe_cluster(), fe_snapshot_key(&o));
    ck_assert_msg(v != NULL && strlen(v) > 300000, "value of %zu bytes", v ? strlen(v) : 0);
    free(v);
    follow(&x, &o, NULL);
    const mcr_snapshot *held = mcr_router_acquire(x.router);
    ck_assert_uint_eq(mcr_snapshot_server_count(held), (size_t)n);
    mcr_router_release(x.router, held);
    ck_assert_int_eq(fe_add(&o, "one-more", "10.41.0.1", 11211, &epoch, &err), MCR_OK);
    wait_adopted(&x, 2);
    assert_current(&x, &o);
    ck_assert_uint_eq(stats(&x).refused, 0);
    unfollow(&x);
}
END_TEST

/* ------------------------------------------------------------ arguments */

START_TEST(test_follow_arguments)
{
    mcr_fleet_options o;
    follower x;
    mcr_error err = {0};
    mcr_fleet *f = NULL;
    mcr_router *r = NULL;
    int rc;

    opts(&o, "args");
    ck_assert_uint_eq(fe_publish(&o, "10.9.9.1:11211,10.9.9.2:11211"), 1);
    mcr_fleet_follow_options bad[] = {
        {.client_id = "a b"}, {.client_id = ""}, {.lease_ttl_s = 1},
        {.retry_min_ms = 500, .retry_max_ms = 100}};
    const char *says[] = {"client id \"a b\"", "client id \"\"", "lease_ttl_s",
                          "retry_min_ms above retry_max_ms"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        rc = follow_try(&x, &o, &bad[i], &err);
        ck_assert_msg(rc == MCR_ERR_INVALID && strstr(err.message, says[i]),
                      "case %zu: %s (%s)", i, mcr_strerror(rc), err.message);
        ck_assert_uint_eq(mcr_router_epoch(x.router), 0);
        unfollow(&x);
    }
    ck_assert_int_eq(mcr_router_new(NULL, &r, &err), MCR_OK);
    ck_assert_int_eq(mcr_fleet_follow(&o, NULL, NULL, &f, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_fleet_follow(&o, NULL, r, NULL, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_fleet_follow(NULL, NULL, r, &f, &err), MCR_ERR_INVALID);

    /* No such pool. */
    mcr_fleet_options m;
    opts(&m, "args-missing");
    rc = mcr_fleet_follow(&m, NULL, r, &f, &err);
    ck_assert_msg(rc == MCR_ERR_UNKNOWN && strstr(err.message, "args-missing"), "%s (%s)",
                  mcr_strerror(rc), err.message);
    ck_assert_ptr_null(f);

    /* A value that does not verify at the start: its error, nothing
     * started (a cache file is for etcd unreachable only). */
    mcr_fleet_options cv;
    opts(&cv, "args-corrupt");
    char ckey[256];
    snprintf(ckey, sizeof(ckey), "%s", fe_snapshot_key(&cv));
    put(fe_cluster(), ckey, "garbage");
    rc = mcr_fleet_follow(&cv, NULL, r, &f, &err);
    ck_assert_msg(rc == MCR_ERR_SYNTAX && strstr(err.message, ckey), "%s (%s)", mcr_strerror(rc),
                  err.message);
    ck_assert_uint_eq(mcr_router_epoch(r), 0);

    /* A router ahead of the pool: STALE, nothing started. */
    mcr_snapshot *p = fe_read(&o, NULL);
    mcr_snapshot *ahead = fe_apply_add(p, "ahead", 1);
    ck_assert_int_eq(mcr_router_publish(r, ahead, &err), MCR_OK);
    rc = mcr_fleet_follow(&o, NULL, r, &f, &err);
    ck_assert_msg(rc == MCR_ERR_STALE && strstr(err.message, "epoch 2"), "%s (%s)",
                  mcr_strerror(rc), err.message);
    ck_assert_uint_eq(mcr_router_epoch(r), 2);
    mcr_router_free(r);

    /* A router at the pool's epoch and checksum: followed, not republished. */
    ck_assert_int_eq(mcr_router_new(p, &r, &err), MCR_OK);
    ck_assert_int_eq(mcr_fleet_follow(&o, NULL, r, &f, &err), MCR_OK);
    const mcr_snapshot *held = mcr_router_acquire(r);
    ck_assert_ptr_eq(held, p);
    mcr_router_release(r, held);
    mcr_fleet_free(f);
    mcr_fleet_free(NULL);
    mcr_router_free(r);
    mcr_snapshot_unref(p);
    mcr_snapshot_unref(ahead);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fleet_follow");
    const tu_case cases[] = {
        {"adopt_spaced", test_adopt_spaced},
        {"adopt_burst", test_adopt_burst},
        {"refused_values", test_refused_values},
        {"compaction", test_compaction},
        {"start_unreachable", test_start_unreachable},
        {"start_from_cache", test_start_from_cache},
        {"cache_unwritable", test_cache_unwritable},
        {"registration", test_registration},
        {"registration_expires", test_registration_expires},
        {"large_pool", test_large_pool},
        {"follow_arguments", test_follow_arguments},
    };
    tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]), 90, teardown);
    return s;
}

int main(void)
{
    return fe_main(suite(), 1, "fleet-follow");
}
