/* SPDX-License-Identifier: BSD-3-Clause */
/* test_fleet_store.c: libmcroute_fleet's blocking calls (mcr_fleet_read, _change, _publish, _clients) against a real etcd member: epochs, compare-and-swap under concurrent writers, options, values corrupted by hand. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fleet_env.h"
#include "realserver.h"
#include "testutil.h"

static void teardown(void)
{
    rs_stop_all();
}

/* Options for pool `pool` on the suite's member. */
static void opts(mcr_fleet_options *o, const char *pool)
{
    fe_options(o, es_endpoints(fe_cluster()), pool);
}

/* The etcd value of the pool's key is exactly the text of `s`. */
static void assert_stored(const mcr_fleet_options *o, const mcr_snapshot *s)
{
    char *v = es_get(fe_cluster(), fe_snapshot_key(o));
    char *t = fe_text(s);

    ck_assert_msg(v != NULL, "%s: %s", fe_snapshot_key(o), es_last_error());
    ck_assert_msg(strcmp(v, t) == 0, "%s holds another text than epoch %llu's",
                  fe_snapshot_key(o), (unsigned long long)mcr_snapshot_epoch(s));
    free(v);
    free(t);
}

/* ------------------------------------------------------------ reading, publishing */

START_TEST(test_read_missing)
{
    mcr_fleet_options o;
    mcr_error err = {0};
    mcr_snapshot *s = NULL;
    mcr_fleet_client sentinel, *cl = &sentinel;
    size_t n = 7;
    uint64_t epoch = 99;

    opts(&o, "no-such-pool");
    { /* reserved areas that are not zero are refused first (mcroute.h) */
        mcr_fleet_options bad = o;
        bad.reserved[2] = 1;
        ck_assert_int_eq(mcr_fleet_read(&bad, &s, NULL, &err), MCR_ERR_INVALID);
        ck_assert_ptr_nonnull(strstr(err.message, "mcr_fleet_options: the reserved area"));
        mcr_fleet_follow_options fo = {0};
        mcr_router *r = NULL;
        mcr_fleet *f = NULL;
        ck_assert_int_eq(mcr_router_new(NULL, &r, &err), MCR_OK);
        fo.reserved[7] = 1;
        ck_assert_int_eq(mcr_fleet_follow(&o, &fo, r, &f, &err), MCR_ERR_INVALID);
        ck_assert_ptr_nonnull(strstr(err.message, "mcr_fleet_follow_options: the reserved"));
        ck_assert_ptr_null(f);
        mcr_router_free(r);
    }
    ck_assert_int_eq(mcr_fleet_read(&o, &s, NULL, &err), MCR_ERR_UNKNOWN);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(err.message, "\"no-such-pool\"") != NULL &&
                      strstr(err.message, "/mcroute/pools/no-such-pool/snapshot") != NULL,
                  "%s", err.message);

    /* A change needs a pool; only publish creates one. */
    int rc = fe_add(&o, "x", "10.0.0.1", 11211, &epoch, &err);
    ck_assert_msg(rc == MCR_ERR_UNKNOWN, "change of a missing pool: %s (%s)", mcr_strerror(rc),
                  err.message);
    ck_assert_int_eq(epoch, 99);
    ck_assert_ptr_null(es_get(fe_cluster(), fe_snapshot_key(&o)));

    /* A missing pool has no clients: not an error. */
    ck_assert_int_eq(mcr_fleet_clients(&o, &cl, &n, &err), MCR_OK);
    ck_assert_ptr_null(cl);
    ck_assert_uint_eq(n, 0);
}
END_TEST

START_TEST(test_publish_create_and_again)
{
    mcr_fleet_options o;
    mcr_error err = {0};
    const char *list = "10.0.0.1:11211:1,10.0.0.2:11211:2,10.0.0.3:11211:3";
    uint64_t rev0 = 0, rev1 = 0;

    opts(&o, "create");
    ck_assert_uint_eq(fe_publish(&o, list), 1);
    mcr_snapshot *s = fe_read(&o, &rev0);
    ck_assert_uint_eq(mcr_snapshot_epoch(s), 1);
    ck_assert_uint_eq(mcr_snapshot_server_count(s), 3);
    fe_assert_has(s, "10.0.0.2:11211", MCR_STATE_ACTIVE, 2);
    assert_stored(&o, s);
    ck_assert_msg(rev0 > 0 && (long long)rev0 == es_revision(fe_cluster()),
                  "read at revision %llu, etcd at %lld", (unsigned long long)rev0,
                  es_revision(fe_cluster()));

    /* The same snapshot as built locally at epoch 1. */
    mcr_config *cfg = fe_config(list);
    mcr_snapshot *local = NULL;
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &local, &err), MCR_OK);
    ck_assert_str_eq(mcr_snapshot_checksum(local), mcr_snapshot_checksum(s));
    mcr_snapshot_unref(local);

    /* The same list again: nothing stored, the epoch returned is 1. */
    long long r = es_revision(fe_cluster());
    uint64_t epoch = 0;
    ck_assert_int_eq(mcr_fleet_publish(&o, cfg, &epoch, &err), MCR_OK);
    ck_assert_uint_eq(epoch, 1);
    ck_assert_int_eq(es_revision(fe_cluster()), r);
    mcr_snapshot *s2 = fe_read(&o, &rev1);
    ck_assert_uint_eq(mcr_snapshot_epoch(s2), 1);
    ck_assert_str_eq(mcr_snapshot_checksum(s2), mcr_snapshot_checksum(s));
    mcr_config_free(cfg);
    mcr_snapshot_unref(s);
    mcr_snapshot_unref(s2);
}
END_TEST

START_TEST(test_publish_other_list)
{
    mcr_fleet_options o;
    mcr_error err = {0};
    mcr_changes *ch = mcr_changes_new();
    uint64_t epoch = 0;

    opts(&o, "other-list");
    ck_assert_uint_eq(fe_publish(&o, "10.0.1.1:11211,10.0.1.2:11211,10.0.1.3:11211"), 1);
    /* .2 draining: a state that a server list does not carry. */
    ck_assert_int_eq(mcr_changes_set_state(ch, "10.0.1.2:11211", MCR_STATE_DRAINING, &err),
                     MCR_OK);
    ck_assert_int_eq(mcr_fleet_change(&o, ch, &epoch, &err), MCR_OK);
    ck_assert_uint_eq(epoch, 2);

    /* .3 out, .4 in, .1 heavier: one epoch for the whole list. */
    ck_assert_uint_eq(fe_publish(&o, "10.0.1.1:11211:5,10.0.1.2:11211,10.0.1.4:11211"), 3);
    mcr_snapshot *s = fe_read(&o, NULL);
    ck_assert_uint_eq(mcr_snapshot_epoch(s), 3);
    ck_assert_uint_eq(mcr_snapshot_server_count(s), 3);
    fe_assert_has(s, "10.0.1.1:11211", MCR_STATE_ACTIVE, 5);
    fe_assert_has(s, "10.0.1.2:11211", MCR_STATE_DRAINING, 1); /* kept */
    fe_assert_has(s, "10.0.1.4:11211", MCR_STATE_ACTIVE, 1);
    ck_assert_msg(!fe_has(s, "10.0.1.3:11211", NULL, NULL), "10.0.1.3 still there");
    assert_stored(&o, s);
    mcr_snapshot_unref(s);
    mcr_changes_free(ch);
}
END_TEST

/* A snapshot's list with its states, as one epoch, and computed again on
 * what is stored: a server another writer added after the snapshot was
 * made is removed too (the pool becomes the snapshot's list). */
START_TEST(test_publish_snapshot)
{
    mcr_fleet_options o;
    mcr_error err = {0};
    uint64_t epoch = 0;

    opts(&o, "pub-snap");
    mcr_snapshot *missing = NULL;
    {
        mcr_config *cfg = fe_config("10.0.2.1:11211");
        ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &missing, &err), MCR_OK);
        mcr_config_free(cfg);
    }
    ck_assert_int_eq(mcr_fleet_publish_snapshot(&o, missing, &epoch, &err), MCR_ERR_UNKNOWN);
    mcr_snapshot_unref(missing);
    ck_assert_uint_eq(fe_publish(&o, "10.0.2.1:11211,10.0.2.2:11211,10.0.2.3:11211"), 1);
    mcr_snapshot *cur = fe_read(&o, NULL);
    /* the target: .2 DOWN, .3 removed, x added */
    mcr_changes *ch = mcr_changes_new();
    ck_assert_int_eq(mcr_changes_set_state(ch, "10.0.2.2:11211", MCR_STATE_DOWN, &err), MCR_OK);
    ck_assert_int_eq(mcr_changes_remove(ch, "10.0.2.3:11211", &err), MCR_OK);
    mcr_snapshot *mid = fe_apply(cur, ch);
    mcr_snapshot *target = fe_apply_add(mid, "x", 7);
    /* meanwhile another writer adds y */
    ck_assert_int_eq(fe_add(&o, "y", "10.0.2.9", 11211, &epoch, &err), MCR_OK);
    ck_assert_uint_eq(epoch, 2);
    ck_assert_msg(mcr_fleet_publish_snapshot(&o, target, &epoch, &err) == MCR_OK, "%s",
                  err.message);
    ck_assert_uint_eq(epoch, 3);
    mcr_snapshot *s = fe_read(&o, NULL);
    ck_assert_uint_eq(mcr_snapshot_server_count(s), 3);
    fe_assert_has(s, "10.0.2.1:11211", MCR_STATE_ACTIVE, 1);
    fe_assert_has(s, "10.0.2.2:11211", MCR_STATE_DOWN, 1);
    fe_assert_has(s, "x", MCR_STATE_ACTIVE, 1);
    ck_assert_msg(!fe_has(s, "y", NULL, NULL), "y kept: the list is not the snapshot's");
    /* the same list again: nothing stored */
    ck_assert_int_eq(mcr_fleet_publish_snapshot(&o, target, &epoch, &err), MCR_OK);
    ck_assert_uint_eq(epoch, 3);
    ck_assert_uint_eq(fe_epoch(&o), 3);
    mcr_snapshot_unref(s);
    mcr_snapshot_unref(target);
    mcr_snapshot_unref(mid);
    mcr_snapshot_unref(cur);
    mcr_changes_free(ch);
}
END_TEST

START_TEST(test_publish_params_differ)
{
    mcr_fleet_options o;
    mcr_error err = {0};
    uint64_t epoch = 0;

    opts(&o, "params");
    ck_assert_uint_eq(fe_publish(&o, "10.0.2.1:11211,10.0.2.2:11211"), 1);
    long long r = es_revision(fe_cluster());

    mcr_config *cfg = fe_config("10.0.2.1:11211,10.0.2.3:11211");
    ck_assert_int_eq(mcr_config_set_mode(cfg, MCR_MODE_MODULA), MCR_OK);
    int rc = mcr_fleet_publish(&o, cfg, &epoch, &err);
    ck_assert_msg(rc == MCR_ERR_INVALID, "another mode: %s (%s)", mcr_strerror(rc), err.message);
    ck_assert_msg(strstr(err.message, "placement parameters") != NULL &&
                      strstr(err.message, "mode ketama") != NULL &&
                      strstr(err.message, "mode modula") != NULL,
                  "%s", err.message);
    mcr_config_free(cfg);

    cfg = fe_config("10.0.2.1:11211,10.0.2.2:11211");
    ck_assert_int_eq(mcr_config_set_hash(cfg, MCR_HASH_FNV1A_32), MCR_OK);
    rc = mcr_fleet_publish(&o, cfg, &epoch, &err);
    ck_assert_msg(rc == MCR_ERR_INVALID, "another hash: %s (%s)", mcr_strerror(rc), err.message);
    ck_assert_msg(strstr(err.message, "hash") != NULL, "%s", err.message);
    mcr_config_free(cfg);

    ck_assert_int_eq(es_revision(fe_cluster()), r);
    ck_assert_uint_eq(fe_epoch(&o), 1);
}
END_TEST

/* Two publishers of different lists to a pool that does not exist yet: one
 * creates it (epoch 1), the other's list becomes epoch 2; neither is lost. */
typedef struct pub_arg {
    const mcr_fleet_options *o;
    const char *list;
    pthread_barrier_t *go;
    int rc;
    uint64_t epoch;
    mcr_error err;
} pub_arg;

static void *publisher(void *arg)
{
    pub_arg *a = arg;
    mcr_config *cfg = mcr_config_new();

    mcr_config_add_servers(cfg, a->list, NULL);
    pthread_barrier_wait(a->go);
    a->rc = mcr_fleet_publish(a->o, cfg, &a->epoch, &a->err);
    mcr_config_free(cfg);
    return NULL;
}

START_TEST(test_publish_create_race)
{
    char pool[32];
    mcr_fleet_options o;
    pthread_barrier_t go;

    for (int round = 0; round < 5; round++) {
        pub_arg a[2] = {{.list = "10.0.3.1:11211,10.0.3.2:11211"},
                        {.list = "10.0.3.1:11211,10.0.3.9:11211"}};
        pthread_t t[2];

        snprintf(pool, sizeof(pool), "create-race-%d", round);
        opts(&o, pool);
        pthread_barrier_init(&go, NULL, 2);
        for (int i = 0; i < 2; i++) {
            a[i].o = &o;
            a[i].go = &go;
            ck_assert_int_eq(pthread_create(&t[i], NULL, publisher, &a[i]), 0);
        }
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
        pthread_barrier_destroy(&go);
        for (int i = 0; i < 2; i++)
            ck_assert_msg(a[i].rc == MCR_OK, "publisher %d: %s (%s)", i, mcr_strerror(a[i].rc),
                          a[i].err.message);
        ck_assert_msg((a[0].epoch == 1 && a[1].epoch == 2) ||
                          (a[0].epoch == 2 && a[1].epoch == 1),
                      "round %d: epochs %llu and %llu", round, (unsigned long long)a[0].epoch,
                      (unsigned long long)a[1].epoch);
        /* The pool holds the list of the one that got epoch 2. */
        const char *second = a[0].epoch == 2 ? "10.0.3.2:11211" : "10.0.3.9:11211";
        const char *first = a[0].epoch == 2 ? "10.0.3.9:11211" : "10.0.3.2:11211";
        mcr_snapshot *s = fe_read(&o, NULL);
        ck_assert_uint_eq(mcr_snapshot_epoch(s), 2);
        ck_assert_msg(fe_has(s, second, NULL, NULL) && !fe_has(s, first, NULL, NULL),
                      "round %d: epoch 2 is not the second publisher's list", round);
        mcr_snapshot_unref(s);
    }
}
END_TEST

/* ------------------------------------------------------------ changes */

static uint64_t change_ok(const mcr_fleet_options *o, mcr_changes *ch)
{
    mcr_error err = {0};
    uint64_t epoch = 0;
    int rc = mcr_fleet_change(o, ch, &epoch, &err);

    ck_assert_msg(rc == MCR_OK, "mcr_fleet_change: %s (%s)", mcr_strerror(rc), err.message);
    mcr_changes_reset(ch);
    return epoch;
}

START_TEST(test_change_one_epoch_each)
{
    mcr_fleet_options o;
    mcr_error err = {0};
    mcr_changes *ch = mcr_changes_new();
    mcr_server_desc d = {.id = "new", .host = "10.0.4.9", .port = 11211, .weight = 3,
                         .zone = "z1"};
    mcr_snapshot *s;
    long long r;

    opts(&o, "changes");
    ck_assert_uint_eq(fe_publish(&o, "10.0.4.1:11211,10.0.4.2:11211,10.0.4.3:11211"), 1);

    ck_assert_int_eq(mcr_changes_add(ch, &d, &err), MCR_OK);
    ck_assert_uint_eq(change_ok(&o, ch), 2);
    s = fe_read(&o, NULL);
    ck_assert_uint_eq(mcr_snapshot_epoch(s), 2);
    fe_assert_has(s, "new", MCR_STATE_ACTIVE, 3);
    assert_stored(&o, s);
    mcr_snapshot_unref(s);

    ck_assert_int_eq(mcr_changes_remove(ch, "10.0.4.1:11211", &err), MCR_OK);
    ck_assert_uint_eq(change_ok(&o, ch), 3);
    s = fe_read(&o, NULL);
    ck_assert_msg(!fe_has(s, "10.0.4.1:11211", NULL, NULL), "removed server still there");
    ck_assert_uint_eq(mcr_snapshot_server_count(s), 3);
    mcr_snapshot_unref(s);

    ck_assert_int_eq(mcr_changes_set_weight(ch, "10.0.4.2:11211", 7, &err), MCR_OK);
    ck_assert_uint_eq(change_ok(&o, ch), 4);
    s = fe_read(&o, NULL);
    fe_assert_has(s, "10.0.4.2:11211", MCR_STATE_ACTIVE, 7);
    mcr_snapshot_unref(s);

    ck_assert_int_eq(mcr_changes_set_state(ch, "10.0.4.3:11211", MCR_STATE_DOWN, &err), MCR_OK);
    ck_assert_uint_eq(change_ok(&o, ch), 5);
    s = fe_read(&o, NULL);
    fe_assert_has(s, "10.0.4.3:11211", MCR_STATE_DOWN, 1);
    mcr_snapshot_unref(s);

    /* A batch is one epoch. */
    ck_assert_int_eq(mcr_changes_set_state(ch, "10.0.4.3:11211", MCR_STATE_ACTIVE, &err),
                     MCR_OK);
    ck_assert_int_eq(mcr_changes_set_weight(ch, "new", 1, &err), MCR_OK);
    ck_assert_int_eq(mcr_changes_remove(ch, "10.0.4.2:11211", &err), MCR_OK);
    ck_assert_uint_eq(change_ok(&o, ch), 6);
    s = fe_read(&o, NULL);
    ck_assert_uint_eq(mcr_snapshot_epoch(s), 6);
    ck_assert_uint_eq(mcr_snapshot_server_count(s), 2);
    fe_assert_has(s, "10.0.4.3:11211", MCR_STATE_ACTIVE, 1);
    fe_assert_has(s, "new", MCR_STATE_ACTIVE, 1);
    assert_stored(&o, s);
    mcr_snapshot_unref(s);

    /* An empty change set stores nothing and says the current epoch. */
    r = es_revision(fe_cluster());
    ck_assert_uint_eq(change_ok(&o, ch), 6);
    ck_assert_int_eq(es_revision(fe_cluster()), r);
    mcr_changes_free(ch);
}
END_TEST

START_TEST(test_change_no_longer_applies)
{
    mcr_fleet_options o;
    mcr_error err = {0};
    mcr_changes *ch = mcr_changes_new();
    uint64_t epoch = 77;
    int rc;

    opts(&o, "stale-change");
    ck_assert_uint_eq(fe_publish(&o, "10.0.5.1:11211,10.0.5.2:11211"), 1);
    long long r = es_revision(fe_cluster());

    ck_assert_int_eq(mcr_changes_remove(ch, "gone-meanwhile", &err), MCR_OK);
    rc = mcr_fleet_change(&o, ch, &epoch, &err);
    ck_assert_msg(rc == MCR_ERR_UNKNOWN, "%s (%s)", mcr_strerror(rc), err.message);
    ck_assert_msg(strstr(err.message, "gone-meanwhile") != NULL, "%s", err.message);
    ck_assert_uint_eq(epoch, 77);
    mcr_changes_reset(ch);

    rc = fe_add(&o, "10.0.5.1:11211", "10.0.5.1", 11211, &epoch, &err);
    ck_assert_msg(rc == MCR_ERR_DUPLICATE, "%s (%s)", mcr_strerror(rc), err.message);

    ck_assert_int_eq(mcr_changes_remove(ch, "10.0.5.1:11211", &err), MCR_OK);
    ck_assert_int_eq(mcr_changes_remove(ch, "10.0.5.2:11211", &err), MCR_OK);
    rc = mcr_fleet_change(&o, ch, &epoch, &err);
    ck_assert_msg(rc == MCR_ERR_EMPTY, "%s (%s)", mcr_strerror(rc), err.message);

    /* Nothing stored by any of them. */
    ck_assert_int_eq(es_revision(fe_cluster()), r);
    ck_assert_uint_eq(fe_epoch(&o), 1);
    mcr_changes_free(ch);
}
END_TEST

/* ------------------------------------------------------------ concurrent writers */

#define WRITES 15

typedef struct writer {
    const mcr_fleet_options *o;
    int w;
    pthread_barrier_t *go;
    uint64_t epochs[WRITES];
    int rc[WRITES];
    char msg[MCR_ERROR_MESSAGE_SIZE];
} writer;

static void writer_run(writer *a)
{
    for (int i = 0; i < WRITES; i++) {
        char id[32], host[32];
        mcr_error err = {0};
        snprintf(id, sizeof(id), "w%d-%d", a->w, i);
        snprintf(host, sizeof(host), "10.1.%d.%d", a->w, i + 1);
        a->rc[i] = fe_add(a->o, id, host, 11211, &a->epochs[i], &err);
        if (a->rc[i] != MCR_OK && a->msg[0] == '\0')
            snprintf(a->msg, sizeof(a->msg), "%s: %.200s", id, err.message);
    }
}

static void *writer_thread(void *arg)
{
    writer *a = arg;
    pthread_barrier_wait(a->go);
    writer_run(a);
    return NULL;
}

/* Every change stored once: epochs initial+1 .. initial+2N each returned to
 * exactly one writer, each writer's increasing, every server in the pool. */
static void check_writers(const mcr_fleet_options *o, writer *wr, uint64_t initial)
{
    unsigned char seen[2 * WRITES + 1] = {0};

    for (int w = 0; w < 2; w++)
        for (int i = 0; i < WRITES; i++) {
            uint64_t e = wr[w].epochs[i];
            ck_assert_msg(wr[w].rc[i] == MCR_OK, "writer %d change %d: %s (%s)", w, i,
                          mcr_strerror(wr[w].rc[i]), wr[w].msg);
            ck_assert_msg(e > initial && e <= initial + 2 * WRITES,
                          "writer %d change %d: epoch %llu", w, i, (unsigned long long)e);
            ck_assert_msg(!seen[e - initial], "epoch %llu returned twice", (unsigned long long)e);
            seen[e - initial] = 1;
            ck_assert_msg(i == 0 || e > wr[w].epochs[i - 1], "writer %d: epoch %llu after %llu", w,
                          (unsigned long long)e, (unsigned long long)wr[w].epochs[i - 1]);
        }
    mcr_snapshot *s = fe_read(o, NULL);
    ck_assert_uint_eq(mcr_snapshot_epoch(s), initial + 2 * WRITES);
    for (int w = 0; w < 2; w++)
        for (int i = 0; i < WRITES; i++) {
            char id[32];
            snprintf(id, sizeof(id), "w%d-%d", w, i);
            ck_assert_msg(fe_has(s, id, NULL, NULL), "change %s lost", id);
        }
    ck_assert_uint_eq(mcr_snapshot_server_count(s), 2 + 2 * WRITES);
    mcr_snapshot_unref(s);
}

START_TEST(test_concurrent_writer_threads)
{
    mcr_fleet_options o;
    pthread_barrier_t go;
    writer wr[2];
    pthread_t t[2];

    opts(&o, "writers-threads");
    ck_assert_uint_eq(fe_publish(&o, "10.0.6.1:11211,10.0.6.2:11211"), 1);
    pthread_barrier_init(&go, NULL, 2);
    for (int w = 0; w < 2; w++) {
        memset(&wr[w], 0, sizeof(wr[w]));
        wr[w].o = &o;
        wr[w].w = w;
        wr[w].go = &go;
        ck_assert_int_eq(pthread_create(&t[w], NULL, writer_thread, &wr[w]), 0);
    }
    for (int w = 0; w < 2; w++)
        pthread_join(t[w], NULL);
    pthread_barrier_destroy(&go);
    check_writers(&o, wr, 1);
}
END_TEST

/* The same with two processes (each its own connections and address
 * space), their results sent back through a pipe. */
START_TEST(test_concurrent_writer_processes)
{
    mcr_fleet_options o;
    writer wr[2];
    int go[2], res[2][2];
    pid_t pid[2];

    opts(&o, "writers-procs");
    ck_assert_uint_eq(fe_publish(&o, "10.0.7.1:11211,10.0.7.2:11211"), 1);
    ck_assert_int_eq(pipe(go), 0);
    for (int w = 0; w < 2; w++) {
        memset(&wr[w], 0, sizeof(wr[w]));
        wr[w].o = &o;
        wr[w].w = w;
        ck_assert_int_eq(pipe(res[w]), 0);
        fflush(NULL);
        pid[w] = fork();
        ck_assert_int_ge(pid[w], 0);
        if (pid[w] == 0) {
            char b;
            close(go[1]);
            close(res[w][0]);
            if (read(go[0], &b, 1) != 0) /* EOF: both children are ready */
                _exit(2);
            writer_run(&wr[w]);
            ssize_t n = write(res[w][1], &wr[w], sizeof(wr[w]));
            _exit(n == (ssize_t)sizeof(wr[w]) ? 0 : 3);
        }
        close(res[w][1]);
    }
    close(go[0]);
    close(go[1]); /* go */
    for (int w = 0; w < 2; w++) {
        int st = 0;
        size_t got = 0;
        char *p = (char *)&wr[w];
        while (got < sizeof(wr[w])) {
            ssize_t n = read(res[w][0], p + got, sizeof(wr[w]) - got);
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        close(res[w][0]);
        ck_assert_int_eq(waitpid(pid[w], &st, 0), pid[w]);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && got == sizeof(wr[w]),
                      "writer process %d: status %d, %zu bytes", w, st, got);
        wr[w].o = &o;
    }
    check_writers(&o, wr, 1);
}
END_TEST

/* ------------------------------------------------------------ clients */

START_TEST(test_clients_listing)
{
    mcr_fleet_options o;
    mcr_error err = {0};
    mcr_fleet_client *cl = NULL;
    size_t n = 0;
    char key[256], val[512];
    es_cluster *c = fe_cluster();

    opts(&o, "clients");
    ck_assert_uint_eq(fe_publish(&o, "10.0.8.1:11211"), 1);
    mcr_snapshot *s = fe_read(&o, NULL);

    /* As followers write them (and two that are not). */
    snprintf(key, sizeof(key), "/mcroute/pools/clients/clients/b-2");
    snprintf(val, sizeof(val), "{\"epoch\":1,\"checksum\":\"%s\",\"host\":\"h2 pid 2 mcroute x\","
                               "\"revision\":5}",
             mcr_snapshot_checksum(s));
    ck_assert_msg(es_put(c, key, val) == 0, "%s", es_last_error());
    snprintf(key, sizeof(key), "/mcroute/pools/clients/clients/a-1");
    snprintf(val, sizeof(val), "{\"epoch\":\"12\",\"checksum\":\"%s\",\"host\":\"h1 pid 1\"}",
             mcr_snapshot_checksum(s));
    ck_assert_msg(es_put(c, key, val) == 0, "%s", es_last_error());
    ck_assert_msg(es_put(c, "/mcroute/pools/clients/clients/c-3", "garbage") == 0, "%s",
                  es_last_error());
    ck_assert_msg(es_put(c, "/mcroute/pools/clients/clients/d-4", "{\"epoch\":3}") == 0, "%s",
                  es_last_error());
    /* Not under clients/ of this pool. */
    ck_assert_msg(es_put(c, "/mcroute/pools/clientsX/clients/e", val) == 0, "%s", es_last_error());

    ck_assert_int_eq(mcr_fleet_clients(&o, &cl, &n, &err), MCR_OK);
    ck_assert_uint_eq(n, 4);
    ck_assert_str_eq(cl[0].id, "a-1");
    ck_assert_uint_eq(cl[0].epoch, 12);
    ck_assert_str_eq(cl[0].host, "h1 pid 1");
    ck_assert_str_eq(cl[0].checksum, mcr_snapshot_checksum(s));
    ck_assert_str_eq(cl[1].id, "b-2");
    ck_assert_uint_eq(cl[1].epoch, 1);
    ck_assert_str_eq(cl[1].host, "h2 pid 2 mcroute x");
    ck_assert_str_eq(cl[2].id, "c-3");
    ck_assert_uint_eq(cl[2].epoch, 0);
    ck_assert_msg(strncmp(cl[2].host, "invalid: ", 9) == 0, "%s", cl[2].host);
    ck_assert_str_eq(cl[3].id, "d-4");
    ck_assert_uint_eq(cl[3].epoch, 0);
    ck_assert_str_eq(cl[3].host, "invalid: no checksum (32 lower-case hex digits)");
    mcr_fleet_clients_free(cl, n);
    mcr_fleet_clients_free(NULL, 0);
    mcr_snapshot_unref(s);
}
END_TEST

/* A pool over etcd's request limit (--max-request-bytes, 1.5 MiB by
 * default): refused with etcd's reason, nothing stored. */
START_TEST(test_too_large)
{
    mcr_fleet_options o;
    mcr_error err = {0};
    uint64_t epoch = 0;
    const int n = 14000;
    char *spec = malloc((size_t)n * 24);
    size_t k = 0;

    for (int i = 0; i < n; i++)
        k += (size_t)sprintf(spec + k, "%s10.%d.%d.%d:11211", i ? "," : "", 50 + i / 62500,
                             i / 250 % 250, i % 250 + 1);
    opts(&o, "too-large");
    mcr_config *cfg = fe_config(spec);
    free(spec);
    long long r = es_revision(fe_cluster());
    int rc = mcr_fleet_publish(&o, cfg, &epoch, &err);
    mcr_config_free(cfg);
    ck_assert_msg(rc == MCR_ERR_PROTOCOL && strstr(err.message, "too large"), "%s (%s)",
                  mcr_strerror(rc), err.message);
    ck_assert_int_eq(es_revision(fe_cluster()), r);
    printf("too_large: %s\n", err.message);
}
END_TEST

/* ------------------------------------------------------------ options */

static void expect_invalid(const mcr_fleet_options *o, const char *want1, const char *want2)
{
    mcr_error err = {0};
    mcr_snapshot *s = NULL;
    mcr_fleet_client *cl = NULL;
    size_t n = 0;
    uint64_t epoch = 0;
    mcr_config *cfg = fe_config("10.0.9.1:11211");
    mcr_changes *ch = mcr_changes_new();
    int64_t t0 = mcr_test_now_ms();

    int rc = mcr_fleet_read(o, &s, NULL, &err);
    ck_assert_msg(rc == MCR_ERR_INVALID, "read: %s (%s) for %s", mcr_strerror(rc), err.message,
                  want1);
    ck_assert_msg(strstr(err.message, want1) != NULL && (!want2 || strstr(err.message, want2)),
                  "\"%s\" does not say \"%s\" / \"%s\"", err.message, want1, want2 ? want2 : "");
    ck_assert_int_eq(mcr_fleet_publish(o, cfg, &epoch, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_fleet_change(o, ch, &epoch, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_fleet_clients(o, &cl, &n, &err), MCR_ERR_INVALID);
    ck_assert_msg(strstr(err.message, want1) != NULL, "%s", err.message);
    /* Refused before any connection is tried. */
    ck_assert_msg(mcr_test_now_ms() - t0 < mcr_test_ms(1000), "options refused in %lld ms",
                  (long long)(mcr_test_now_ms() - t0));
    mcr_config_free(cfg);
    mcr_changes_free(ch);
}

START_TEST(test_options_validation)
{
    mcr_fleet_options o;
    mcr_error err = {0};
    mcr_snapshot *s = NULL;
    char longname[MCR_FLEET_NAME_MAX + 2], many[17 * 24];

    ck_assert_int_eq(mcr_fleet_read(NULL, &s, NULL, &err), MCR_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "NULL") != NULL, "%s", err.message);
    opts(&o, "opts");
    ck_assert_int_eq(mcr_fleet_read(&o, NULL, NULL, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_fleet_change(&o, NULL, NULL, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_fleet_publish(&o, NULL, NULL, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_fleet_clients(&o, NULL, NULL, &err), MCR_ERR_INVALID);

    /* Pool names. */
    o.pool = NULL;
    expect_invalid(&o, "no pool name", NULL);
    o.pool = "";
    expect_invalid(&o, "pool name \"\"", NULL);
    o.pool = "a/b";
    expect_invalid(&o, "pool name \"a/b\"", "A-Z a-z 0-9");
    o.pool = "sp ace";
    expect_invalid(&o, "pool name \"sp ace\"", NULL);
    memset(longname, 'n', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    o.pool = longname;
    expect_invalid(&o, "pool name", "128");
    longname[MCR_FLEET_NAME_MAX] = '\0'; /* 128 bytes: fine, and missing */
    ck_assert_int_eq(mcr_fleet_read(&o, &s, NULL, &err), MCR_ERR_UNKNOWN);

    /* Prefixes. */
    o.pool = "opts";
    o.prefix = "mcroute/";
    expect_invalid(&o, "key prefix \"mcroute/\"", "'/'");
    o.prefix = "/mcroute";
    expect_invalid(&o, "key prefix \"/mcroute\"", NULL);
    o.prefix = "/a b/";
    expect_invalid(&o, "key prefix", "space or control");
    o.prefix = NULL;

    /* Endpoints. */
    o.endpoints = NULL;
    expect_invalid(&o, "no etcd endpoints", NULL);
    o.endpoints = "";
    expect_invalid(&o, "no etcd endpoints", NULL);
    o.endpoints = "https://127.0.0.1:2379";
    expect_invalid(&o, "https://127.0.0.1:2379", "https is not supported");
    o.endpoints = "127.0.0.1";
    expect_invalid(&o, "\"127.0.0.1\"", "HOST:PORT");
    o.endpoints = "http://:2379";
    expect_invalid(&o, "\"http://:2379\"", "HOST:PORT");
    o.endpoints = "http://127.0.0.1:0";
    expect_invalid(&o, "127.0.0.1:0", "port out of range");
    o.endpoints = "http://127.0.0.1:65536";
    expect_invalid(&o, "127.0.0.1:65536", "port");
    o.endpoints = "http://127.0.0.1:99999999999999999999";
    expect_invalid(&o, "bad port", NULL);
    o.endpoints = "http://127.0.0.1:23x9";
    expect_invalid(&o, "127.0.0.1:23x9", "bad port");
    o.endpoints = "http://[::1]:2379";
    expect_invalid(&o, "[::1]:2379", "IPv6");
    o.endpoints = "http://127.0.0.1:2379,,http://127.0.0.1:2380";
    expect_invalid(&o, "an empty entry", NULL);
    size_t k = 0;
    many[0] = '\0';
    for (int i = 0; i < 17; i++)
        k += (size_t)snprintf(many + k, sizeof(many) - k, "%shttp://127.0.0.1:%d", i ? "," : "",
                              3000 + i);
    o.endpoints = many;
    expect_invalid(&o, "more than 16 etcd endpoints", NULL);

    /* Without the scheme, and with a trailing slash: the suite's member. */
    const char *ep = es_endpoint(fe_cluster(), 0);
    char bare[128];
    snprintf(bare, sizeof(bare), "%s/", ep + strlen("http://"));
    o.endpoints = bare;
    ck_assert_int_eq(mcr_fleet_read(&o, &s, NULL, &err), MCR_ERR_UNKNOWN);
    ck_assert_msg(strstr(err.message, "no pool") != NULL, "%s", err.message);
}
END_TEST

/* A custom prefix: the pool is under it, and only there. */
START_TEST(test_prefix)
{
    mcr_fleet_options o, d;
    mcr_error err = {0};
    mcr_snapshot *s = NULL;

    opts(&o, "pref");
    o.prefix = "/test/other-tree/";
    opts(&d, "pref");
    ck_assert_uint_eq(fe_publish(&o, "10.0.10.1:11211"), 1);
    char *v = es_get(fe_cluster(), "/test/other-tree/pref/snapshot");
    ck_assert_msg(v != NULL, "%s", es_last_error());
    free(v);
    ck_assert_int_eq(mcr_fleet_read(&d, &s, NULL, &err), MCR_ERR_UNKNOWN);
    ck_assert_uint_eq(fe_epoch(&o), 1);
}
END_TEST

/* ------------------------------------------------------------ values edited by hand */

static void expect_refused(const mcr_fleet_options *o, int code, const char *what,
                           const char *why)
{
    mcr_error err = {0};
    mcr_snapshot *s = NULL;
    uint64_t epoch = 5;
    char keyname[300];
    long long r = es_revision(fe_cluster());

    snprintf(keyname, sizeof(keyname), "etcd key %s (revision", fe_snapshot_key(o));
    int rc = mcr_fleet_read(o, &s, NULL, &err);
    ck_assert_msg(rc == code, "%s: read gave %s (%s), not %s", what, mcr_strerror(rc),
                  err.message, mcr_strerror(code));
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(err.message, keyname) != NULL && strstr(err.message, why) != NULL,
                  "%s: \"%s\" does not name the key or say \"%s\"", what, err.message, why);

    /* Nothing builds on it. */
    rc = fe_add(o, "on-top", "10.0.12.9", 11211, &epoch, &err);
    ck_assert_msg(rc == code && strstr(err.message, keyname) != NULL, "%s: change: %s (%s)",
                  what, mcr_strerror(rc), err.message);
    mcr_config *cfg = fe_config("10.0.12.1:11211,10.0.12.7:11211");
    rc = mcr_fleet_publish(o, cfg, &epoch, &err);
    mcr_config_free(cfg);
    ck_assert_msg(rc == code, "%s: publish: %s (%s)", what, mcr_strerror(rc), err.message);
    ck_assert_uint_eq(epoch, 5);
    ck_assert_int_eq(es_revision(fe_cluster()), r);
}

START_TEST(test_corrupted_value)
{
    mcr_fleet_options o;
    es_cluster *c = fe_cluster();

    opts(&o, "corrupt");
    ck_assert_uint_eq(fe_publish(&o, "10.0.12.1:11211,10.0.12.2:11211"), 1);
    mcr_snapshot *good = fe_read(&o, NULL);
    char *text = fe_text(good);

    ck_assert_msg(es_put(c, fe_snapshot_key(&o), "not a snapshot at all") == 0, "%s",
                  es_last_error());
    expect_refused(&o, MCR_ERR_SYNTAX, "garbage", "checksum");

    ck_assert_msg(es_put(c, fe_snapshot_key(&o), "") == 0, "%s", es_last_error());
    expect_refused(&o, MCR_ERR_SYNTAX, "empty value", "checksum");

    /* One byte changed: the epoch line says 7. */
    char *bad = strdup(text);
    char *e = strstr(bad, "\nepoch 1\n");
    ck_assert_ptr_nonnull(e);
    e[7] = '7';
    ck_assert_msg(es_put(c, fe_snapshot_key(&o), bad) == 0, "%s", es_last_error());
    expect_refused(&o, MCR_ERR_CORRUPT, "one byte changed", "checksum mismatch");

    /* One byte of a server line. */
    strcpy(bad, text);
    e = strstr(bad, "10.0.12.2");
    ck_assert_ptr_nonnull(e);
    e[8] = '3';
    ck_assert_msg(es_put(c, fe_snapshot_key(&o), bad) == 0, "%s", es_last_error());
    expect_refused(&o, MCR_ERR_CORRUPT, "a server line changed", "checksum mismatch");

    /* The good text back: read and change work again. */
    ck_assert_msg(es_put(c, fe_snapshot_key(&o), text) == 0, "%s", es_last_error());
    mcr_snapshot *back = fe_read(&o, NULL);
    ck_assert_str_eq(mcr_snapshot_checksum(back), mcr_snapshot_checksum(good));
    mcr_error err = {0};
    uint64_t epoch = 0;
    ck_assert_int_eq(fe_add(&o, "after", "10.0.12.5", 11211, &epoch, &err), MCR_OK);
    ck_assert_uint_eq(epoch, 2);
    free(bad);
    free(text);
    mcr_snapshot_unref(good);
    mcr_snapshot_unref(back);
}
END_TEST



static Suite *suite(void)
{
    Suite *s = suite_create("fleet_store");
    const tu_case cases[] = {
        {"read_missing", test_read_missing},
        {"publish_create_and_again", test_publish_create_and_again},
        {"publish_other_list", test_publish_other_list},
        {"publish_snapshot", test_publish_snapshot},
        {"publish_params_differ", test_publish_params_differ},
        {"publish_create_race", test_publish_create_race},
        {"change_one_epoch_each", test_change_one_epoch_each},
        {"change_no_longer_applies", test_change_no_longer_applies},
        {"concurrent_writer_threads", test_concurrent_writer_threads},
        {"concurrent_writer_processes", test_concurrent_writer_processes},
        {"too_large", test_too_large},
        {"clients_listing", test_clients_listing},
        {"options_validation", test_options_validation},
        {"prefix", test_prefix},
        {"corrupted_value", test_corrupted_value},
    };
    tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]), 60, teardown);
    return s;
}

int main(void)
{
    return fe_main(suite(), 1, "fleet-store");
}
