/* SPDX-License-Identifier: BSD-3-Clause */
/* test_fleet_cluster.c: libmcroute_fleet on a three-member etcd cluster: twenty followers and two writers while the leader is killed and restarted; a member that hangs under a follower's watch. */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fleet_env.h"
#include "realserver.h"
#include "testutil.h"

#define FOLLOWERS 20
#define PER_WRITER 15
#define LEADER_MS mcr_test_ms(15000)

static void teardown(void)
{
    rs_stop_all();
}

/* The cluster's endpoints starting at member `first` (so that followers
 * and writers do not all talk to member 0). */
static void rotated(es_cluster *c, int first, char *buf, size_t cap)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int j = 0; j < es_size(c); j++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%s", j ? "," : "",
                              es_endpoint(c, (first + j) % es_size(c)));
}

typedef struct follower {
    mcr_router *router;
    mcr_fleet *f;
    fe_rec rec;
    char id[16];
} follower;

static void follow(follower *x, const mcr_fleet_options *o, mcr_fleet_follow_options *fo)
{
    mcr_error err = {0};
    fe_rec_init(&x->rec);
    fo->on_event = fe_on_event;
    fo->arg = &x->rec;
    ck_assert_int_eq(mcr_router_new(NULL, &x->router, &err), MCR_OK);
    int rc = mcr_fleet_follow(o, fo, x->router, &x->f, &err);
    ck_assert_msg(rc == MCR_OK, "mcr_fleet_follow(%s): %s (%s)", fo->client_id ? fo->client_id : "",
                  mcr_strerror(rc), err.message);
    fe_rec_start(&x->rec, mcr_router_epoch(x->router));
}

static void unfollow(follower *x)
{
    mcr_fleet_free(x->f);
    mcr_router_free(x->router);
    fe_rec_destroy(&x->rec);
}

/* ------------------------------------------------------------ the leader killed */

/* A writer adds PER_WRITER distinct servers, one change each. During the
 * election a call may fail (MCR_ERR_CONNECT, MCR_ERR_BUSY): it tries again.
 * A change whose reply was lost may have been stored: tried again, it is a
 * duplicate (the library recognises its own write when it reads it back;
 * failing that, a later call says MCR_ERR_DUPLICATE), so each server is
 * added exactly once either way. */
typedef struct writer {
    mcr_fleet_options o;
    int w;
    atomic_int done;
    atomic_int failed; /* set after msg is written */
    int retries, duplicates;
    char msg[MCR_ERROR_MESSAGE_SIZE];
} writer;

static void *writer_thread(void *arg)
{
    writer *a = arg;
    for (int i = 0; i < PER_WRITER && !atomic_load(&a->failed); i++) {
        char id[32], host[32];
        int tries = 0;
        int64_t end = mcr_test_now_ms() + mcr_test_ms(60000);
        snprintf(id, sizeof(id), "w%d-%d", a->w, i);
        snprintf(host, sizeof(host), "10.30.%d.%d", a->w, i + 1);
        for (;;) {
            mcr_error err = {0};
            uint64_t epoch = 0;
            int rc = fe_add(&a->o, id, host, 11211, &epoch, &err);
            tries++;
            if (rc == MCR_OK)
                break;
            if (rc == MCR_ERR_DUPLICATE && tries > 1) {
                a->duplicates++; /* stored by an earlier try */
                break;
            }
            if ((rc == MCR_ERR_CONNECT || rc == MCR_ERR_BUSY) && mcr_test_now_ms() < end) {
                a->retries++;
                continue;
            }
            snprintf(a->msg, sizeof(a->msg), "%s, try %d: %s: %.180s", id, tries, mcr_strerror(rc),
                     err.message);
            atomic_store(&a->failed, 1);
            break;
        }
        atomic_fetch_add(&a->done, 1);
    }
    return NULL;
}

static int writes_done(writer *wr)
{
    return atomic_load(&wr[0].done) + atomic_load(&wr[1].done);
}

/* Wait until the writers have made n changes (or one failed), bounded. */
static void wait_writes(writer *wr, int n)
{
    int64_t end = mcr_test_now_ms() + mcr_test_ms(60000);
    while (writes_done(wr) < n && !atomic_load(&wr[0].failed) && !atomic_load(&wr[1].failed) &&
           mcr_test_now_ms() < end)
        fe_nap();
    ck_assert_msg(!atomic_load(&wr[0].failed) && !atomic_load(&wr[1].failed), "writer: %s%s",
                  atomic_load(&wr[0].failed) ? wr[0].msg : "",
                  atomic_load(&wr[1].failed) ? wr[1].msg : "");
    ck_assert_msg(writes_done(wr) >= n, "writers stuck at %d changes of %d", writes_done(wr), n);
}

START_TEST(test_leader_killed)
{
    es_cluster *c = es_start(3, "fleet-cluster");
    static follower fl[FOLLOWERS];
    static writer wr[2];
    pthread_t t[2];
    mcr_fleet_options o;
    char eps[512];
    int64_t t0;

    ck_assert_msg(c != NULL, "es_start(3): %s", es_last_error());
    ck_assert_int_ge(es_leader(c, LEADER_MS), 0);
    fe_options(&o, es_endpoints(c), "cluster");
    ck_assert_uint_eq(fe_publish(&o, "10.30.9.1:11211,10.30.9.2:11211,10.30.9.3:11211"), 1);

    for (int i = 0; i < FOLLOWERS; i++) {
        mcr_fleet_options fo_o;
        mcr_fleet_follow_options fo = {.retry_min_ms = 50, .retry_max_ms = 500};
        snprintf(fl[i].id, sizeof(fl[i].id), "f%02d", i);
        fo.client_id = fl[i].id;
        rotated(c, i, eps, sizeof(eps));
        fe_options(&fo_o, eps, "cluster");
        follow(&fl[i], &fo_o, &fo);
        ck_assert_uint_eq(mcr_router_epoch(fl[i].router), 1);
    }
    for (int w = 0; w < 2; w++) {
        memset(&wr[w], 0, sizeof(wr[w]));
        rotated(c, w + 1, eps, sizeof(eps));
        fe_options(&wr[w].o, eps, "cluster");
        wr[w].w = w;
        ck_assert_int_eq(pthread_create(&t[w], NULL, writer_thread, &wr[w]), 0);
    }

    /* A third of the way: kill the leader. Two thirds: start it again. */
    wait_writes(wr, 2 * PER_WRITER / 3);
    int lead = es_leader(c, LEADER_MS);
    ck_assert_msg(lead >= 0, "%s", es_last_error());
    ck_assert_int_eq(es_kill(c, lead), 0);
    t0 = mcr_test_now_ms();
    int at_kill = writes_done(wr);
    wait_writes(wr, 4 * PER_WRITER / 3);
    int64_t t_more = mcr_test_now_ms() - t0;
    ck_assert_msg(es_restart(c, lead) == 0, "restart m%d: %s", lead, es_last_error());
    for (int w = 0; w < 2; w++)
        pthread_join(t[w], NULL);
    ck_assert_msg(!wr[0].failed && !wr[1].failed, "writer: %s%s", wr[0].msg, wr[1].msg);

    /* Every change once: the epoch is 1 + every change, each server there. */
    mcr_snapshot *s = fe_read(&o, NULL);
    uint64_t last = mcr_snapshot_epoch(s);
    ck_assert_msg(last == 1 + 2 * PER_WRITER, "epoch %llu after %d changes from epoch 1",
                  (unsigned long long)last, 2 * PER_WRITER);
    for (int w = 0; w < 2; w++)
        for (int i = 0; i < PER_WRITER; i++) {
            char id[32];
            snprintf(id, sizeof(id), "w%d-%d", w, i);
            ck_assert_msg(fe_has(s, id, NULL, NULL), "change %s lost", id);
        }
    ck_assert_uint_eq(mcr_snapshot_server_count(s), 3 + 2 * PER_WRITER);

    /* Every follower on that epoch and checksum, having adopted every
     * epoch in order (no compaction here: the watches resume where they
     * were, so none is skipped). */
    uint64_t disconnects = 0;
    for (int i = 0; i < FOLLOWERS; i++) {
        follower *x = &fl[i];
        ck_assert_msg(fe_wait_adopted(&x->rec, last, mcr_test_ms(30000)),
                      "%s: at epoch %llu, not %llu", x->id,
                      (unsigned long long)mcr_router_epoch(x->router), (unsigned long long)last);
        mcr_snapshot *r = mcr_router_current(x->router);
        ck_assert_msg(mcr_snapshot_epoch(r) == last &&
                          strcmp(mcr_snapshot_checksum(r), mcr_snapshot_checksum(s)) == 0,
                      "%s: epoch %llu checksum %s", x->id,
                      (unsigned long long)mcr_snapshot_epoch(r), mcr_snapshot_checksum(r));
        mcr_snapshot_unref(r);
        pthread_mutex_lock(&x->rec.mu);
        ck_assert_msg(x->rec.not_above == 0 && x->rec.skips == 0 &&
                          x->rec.nepochs == 2 * PER_WRITER,
                      "%s: %zu adoptions not above the previous, %zu skips, %zu adopted", x->id,
                      x->rec.not_above, x->rec.skips, x->rec.nepochs);
        pthread_mutex_unlock(&x->rec.mu);
        mcr_fleet_stats st;
        mcr_fleet_get_stats(x->f, &st);
        ck_assert_uint_eq(st.refused, 0);
        disconnects += st.disconnects;
    }

    /* Every follower registered at that epoch (leases survived). */
    int64_t end = mcr_test_now_ms() + mcr_test_ms(20000);
    size_t at_last = 0;
    for (;;) {
        mcr_error err = {0};
        mcr_fleet_client *cl = NULL;
        size_t n = 0;
        ck_assert_int_eq(mcr_fleet_clients(&o, &cl, &n, &err), MCR_OK);
        at_last = 0;
        for (size_t k = 0; k < n; k++)
            at_last += cl[k].epoch == last &&
                       strcmp(cl[k].checksum, mcr_snapshot_checksum(s)) == 0;
        mcr_fleet_clients_free(cl, n);
        if (at_last == FOLLOWERS || mcr_test_now_ms() >= end)
            break;
        fe_nap();
    }
    ck_assert_msg(at_last == FOLLOWERS, "%zu of %d followers registered at epoch %llu", at_last,
                  FOLLOWERS, (unsigned long long)last);
    printf("leader_killed: m%d killed after %d changes, %lld ms to the next %d; writers retried "
           "%d+%d calls, %d+%d found their change stored; followers: %llu disconnects\n",
           lead, at_kill, (long long)t_more, 4 * PER_WRITER / 3 - at_kill, wr[0].retries,
           wr[1].retries, wr[0].duplicates, wr[1].duplicates, (unsigned long long)disconnects);

    for (int i = 0; i < FOLLOWERS; i++)
        unfollow(&fl[i]);
    mcr_snapshot_unref(s);
    es_free(c);
}
END_TEST

/* ------------------------------------------------------------ a member that hangs */

/* The member under a follower's watch stops (SIGSTOP) without closing its
 * connections: the follower (no registration: its status request every
 * third of the lease is what finds the silent member) must notice and watch
 * another member. */
START_TEST(test_member_hangs)
{
    es_cluster *c = es_start(3, "fleet-hang");
    mcr_fleet_options o, w;
    mcr_fleet_follow_options fo = {.retry_min_ms = 50, .retry_max_ms = 200, .no_register = 1};
    follower x;
    mcr_error err = {0};
    uint64_t epoch = 0;
    char eps12[256];

    ck_assert_msg(c != NULL, "es_start(3): %s", es_last_error());
    ck_assert_int_ge(es_leader(c, LEADER_MS), 0);
    fe_options(&o, es_endpoints(c), "hang");
    o.request_timeout_ms = 500; /* a silent watch is suspect after 4 of these */
    snprintf(eps12, sizeof(eps12), "%s,%s", es_endpoint(c, 1), es_endpoint(c, 2));
    fe_options(&w, eps12, "hang");
    ck_assert_uint_eq(fe_publish(&w, "10.31.0.1:11211"), 1);
    follow(&x, &o, &fo);
    ck_assert_msg(fe_wait_count(&x.rec, MCR_FLEET_CONNECTED, 1, mcr_test_ms(10000)), "no watch");
    ck_assert_int_eq(fe_add(&w, "h1", "10.31.1.1", 11211, &epoch, &err), MCR_OK);
    ck_assert_msg(fe_wait_adopted(&x.rec, 2, mcr_test_ms(10000)), "epoch 2 not adopted");

    /* The follower read from member 0 first, so it watches there. */
    ck_assert_int_eq(kill(es_pid(c, 0), SIGSTOP), 0);
    ck_assert_msg(fe_add(&w, "h2", "10.31.1.2", 11211, &epoch, &err) == MCR_OK, "%s",
                  err.message);
    int64_t t0 = mcr_test_now_ms();
    int ok = fe_wait_adopted(&x.rec, epoch, 4 * 500 + 500 + mcr_test_ms(8000));
    int64_t took = mcr_test_now_ms() - t0;
    kill(es_pid(c, 0), SIGCONT);
    ck_assert_msg(ok, "epoch %llu not adopted in %lld ms with the watched member stopped "
                  "(router at %llu)",
                  (unsigned long long)epoch, (long long)took,
                  (unsigned long long)mcr_router_epoch(x.router));
    printf("member_hangs: epoch %llu adopted %lld ms after it was written\n",
           (unsigned long long)epoch, (long long)took);
    unfollow(&x);
    es_free(c);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fleet_cluster");
    const tu_case cases[] = {
        {"leader_killed", test_leader_killed},
        {"member_hangs", test_member_hangs},
    };
    tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]), 150, teardown);
    return s;
}

int main(void)
{
    return fe_main(suite(), 0, NULL);
}
