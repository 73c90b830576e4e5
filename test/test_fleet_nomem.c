/* SPDX-License-Identifier: BSD-3-Clause */
/* test_fleet_nomem.c: libmcroute_fleet's blocking calls against a real etcd with each of their allocations failing in turn: MCR_ERR_NOMEM or a right result, etcd's pool never half written, nothing leaked. */
#include <check.h>
#include <event2/buffer.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet_env.h"
#include "mcroute_fleet.h"
#include "mcroute_router.h"
#include "nomem_wrap.h"
#include "realserver.h"
#include "testutil.h"

/*
 * Each call runs through nm_every_failure() (nomem_wrap.h): once for each
 * allocation it makes, with that one failing. After every run, whatever it
 * returned, the pool in etcd is read back (disarmed) and must be whole: the
 * epoch before the call with its servers, or the next epoch with the
 * call's, never anything in between. A call that says MCR_ERR_NOMEM may
 * still have committed (the failure came after etcd said yes): the test
 * then checks that its message says so, since a caller must not take the
 * change for lost.
 */

/* jansson and libevent are shared libraries, whose allocations the
 * wrappers do not see. jansson takes its allocator from us (main():
 * json_set_alloc_funcs()), one that counts its blocks but never fails them:
 * jansson 2.14 does not survive every allocation failure (a json_loadb()
 * can return an object without the member it could not allocate), and
 * what is tested here is the fleet's code, not jansson's. libevent's
 * evbuffer_readln(), whose line the fleet frees, is wrapped: failed and
 * counted. */
void *__real_malloc(size_t n);

static void *json_counted_malloc(size_t n)
{
    return nm_counted(__real_malloc(n));
}

char *__real_evbuffer_readln(struct evbuffer *buf, size_t *n, enum evbuffer_eol_style style);
char *__wrap_evbuffer_readln(struct evbuffer *buf, size_t *n, enum evbuffer_eol_style style)
    __attribute__((visibility("default"))); /* libevent_extra refers to the name too */

char *__wrap_evbuffer_readln(struct evbuffer *buf, size_t *n, enum evbuffer_eol_style style)
{
    return nm_fail_here() ? NULL : nm_counted(__real_evbuffer_readln(buf, n, style));
}

static void teardown(void)
{
    rs_stop_all();
}

typedef struct fleet_ctx {
    mcr_fleet_options o;
    mcr_config *cfg[2];   /* what publishing alternates between */
    mcr_changes *ch[2];   /* add "extra", remove "extra" */
    int next;             /* which of the two the next run sends */
    uint64_t epoch;       /* the pool's epoch before the run */
    size_t servers;       /* and its server count */
    mcr_snapshot *snap;   /* mcr_fleet_read's */
    uint64_t got_epoch;   /* what the call returned */
    int rc;
    char message[256];
    long committed_errors; /* runs that failed but committed */
} fleet_ctx;

static size_t count_of(int which, const fleet_ctx *c)
{
    return mcr_config_server_count(c->cfg[which]);
}

/* The pool in etcd, read disarmed. */
static mcr_snapshot *stored(const fleet_ctx *c)
{
    return fe_read(&c->o, NULL);
}

/* After a publish or a change: the pool is the old epoch or the next one,
 * whole, whatever the call returned. */
static void after_write(fleet_ctx *c, size_t servers_if_done)
{
    mcr_snapshot *s = stored(c);
    uint64_t e = mcr_snapshot_epoch(s);
    size_t n = mcr_snapshot_server_count(s);
    mcr_snapshot_unref(s);
    if (e == c->epoch) {
        ck_assert_msg(n == c->servers, "epoch %llu unchanged but %zu servers, not %zu",
                      (unsigned long long)e, n, c->servers);
        ck_assert_msg(c->rc != MCR_OK, "the call said MCR_OK, but etcd still has epoch %llu",
                      (unsigned long long)e);
        return;
    }
    ck_assert_msg(e == c->epoch + 1, "epoch %llu after epoch %llu", (unsigned long long)e,
                  (unsigned long long)c->epoch);
    ck_assert_msg(n == servers_if_done, "epoch %llu has %zu servers, not %zu",
                  (unsigned long long)e, n, servers_if_done);
    if (c->rc == MCR_OK) {
        ck_assert_msg(c->got_epoch == e, "the call returned epoch %llu, etcd has %llu",
                      (unsigned long long)c->got_epoch, (unsigned long long)e);
    } else {
        /* committed, then out of memory: the message must not let the
         * caller believe the change was lost */
        ck_assert_msg(strstr(c->message, "may have been stored") != NULL,
                      "epoch %llu was written, but the call failed with \"%s\"",
                      (unsigned long long)e, c->message);
        c->committed_errors++;
    }
    c->epoch = e;
    c->servers = n;
    c->next ^= 1;
}

static void note_rc(fleet_ctx *c, int rc, const mcr_error *err)
{
    c->rc = rc;
    snprintf(c->message, sizeof c->message, "%s", rc == MCR_OK ? "" : err->message);
}

/* --- publish */

static int publish_run(void *v, mcr_error *err)
{
    fleet_ctx *c = v;
    c->got_epoch = 0;
    int rc = mcr_fleet_publish(&c->o, c->cfg[c->next], &c->got_epoch, err);
    note_rc(c, rc, err);
    return rc;
}

static void publish_check(void *v)
{
    (void)v; /* publish_clean checks etcd after every run */
}

static void publish_clean(void *v)
{
    fleet_ctx *c = v;
    after_write(c, count_of(c->next, c));
}

/* --- change */

static int change_run(void *v, mcr_error *err)
{
    fleet_ctx *c = v;
    c->got_epoch = 0;
    int rc = mcr_fleet_change(&c->o, c->ch[c->next], &c->got_epoch, err);
    note_rc(c, rc, err);
    return rc;
}

static void change_clean(void *v)
{
    fleet_ctx *c = v;
    after_write(c, c->next == 0 ? c->servers + 1 : c->servers - 1);
}

/* --- read */

static int read_run(void *v, mcr_error *err)
{
    fleet_ctx *c = v;
    return mcr_fleet_read(&c->o, &c->snap, NULL, err);
}

static void read_check(void *v)
{
    fleet_ctx *c = v;
    ck_assert_ptr_nonnull(c->snap);
    ck_assert_uint_eq(mcr_snapshot_epoch(c->snap), c->epoch);
    ck_assert_uint_eq(mcr_snapshot_server_count(c->snap), c->servers);
}

static void read_clean(void *v)
{
    fleet_ctx *c = v;
    mcr_snapshot_unref(c->snap);
    c->snap = NULL;
}

START_TEST(test_blocking_calls)
{
    static const nm_op publish = {"mcr_fleet_publish", publish_run, publish_check,
                                  publish_clean, 1};
    static const nm_op change = {"mcr_fleet_change", change_run, publish_check, change_clean,
                                 1};
    static const nm_op read = {"mcr_fleet_read", read_run, read_check, read_clean, 1};
    fleet_ctx c;
    mcr_error err;

    memset(&c, 0, sizeof(c));
    fe_options(&c.o, es_endpoints(fe_cluster()), "nomem");
    c.cfg[0] = fe_config("127.0.0.1:11211,127.0.0.1:11212:2,127.0.0.1:11213");
    c.cfg[1] = fe_config("127.0.0.1:11211,127.0.0.1:11214:3");
    c.epoch = fe_publish(&c.o, "127.0.0.1:11299");
    c.servers = 1;
    for (int i = 0; i < 2; i++) {
        c.ch[i] = mcr_changes_new();
        ck_assert_ptr_nonnull(c.ch[i]);
    }
    mcr_server_desc extra = {.id = "extra", .host = "127.0.0.2", .port = 11211, .weight = 1,
                             .state = MCR_STATE_ACTIVE};
    ck_assert_int_eq(mcr_changes_add(c.ch[0], &extra, &err), MCR_OK);
    ck_assert_int_eq(mcr_changes_remove(c.ch[1], "extra", &err), MCR_OK);

    long n = nm_every_failure(&publish, &c, 0, NULL);
    fprintf(stderr, "mcr_fleet_publish: %ld allocations\n", n);
    c.next = 0;
    n = nm_every_failure(&change, &c, 0, NULL);
    fprintf(stderr, "mcr_fleet_change: %ld allocations\n", n);
    n = nm_every_failure(&read, &c, 0, NULL);
    fprintf(stderr, "mcr_fleet_read: %ld allocations\n", n);

    /* One attempt only: a write whose reply was lost to memory cannot be
     * read back within the call, so it must say its outcome is unknown
     * (not MCR_ERR_BUSY, nor a plain "out of memory"). */
    c.o.retries = 1;
    nm_every_failure(&publish, &c, 0, NULL);
    c.next = 0;
    nm_every_failure(&change, &c, 0, NULL);
    fprintf(stderr, "with one attempt: %ld calls failed after etcd stored their write, each "
            "saying so\n", c.committed_errors);
    ck_assert_msg(c.committed_errors > 0, "with one attempt, no call failed after its write "
                  "was stored: the outcome-unknown path was not reached");

    for (int i = 0; i < 2; i++) {
        mcr_changes_free(c.ch[i]);
        mcr_config_free(c.cfg[i]);
    }
}
END_TEST

/* ------------------------------------------------------------ migration records
 *
 * Each run has a pool of its own (set up disarmed by the previous run's
 * clean): its servers published, a migration to one more server planned
 * (and, for the switch, written in phase copying). The run writes the
 * record, or switches; afterwards etcd must hold the state before the call
 * or the one after, and a call that failed while etcd holds the one after
 * must say its outcome is unknown. */

typedef struct mig_ctx {
    mcr_fleet_options o;
    char pool[64];
    unsigned n;            /* pools made */
    int switching;         /* the op: 0 write, 1 switch */
    mcr_migration m;
    int rc;
    char message[256];
    long unknown;          /* failed runs whose write etcd holds (each said so) */
} mig_ctx;

static void mig_setup(mig_ctx *c)
{
    mcr_error err;
    snprintf(c->pool, sizeof c->pool, "nomem-mig-%u-%u", (unsigned)c->switching, c->n++);
    fe_options(&c->o, es_endpoints(fe_cluster()), c->pool);
    c->o.retries = 2;
    ck_assert_uint_eq(fe_publish(&c->o, "127.0.0.1:11211,127.0.0.1:11212"), 1);
    mcr_config *cfg = fe_config("127.0.0.1:11211,127.0.0.1:11212,127.0.0.1:11213");
    mcr_snapshot *target = NULL;
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &target, &err), MCR_OK);
    mcr_config_free(cfg);
    ck_assert_int_eq(mcr_fleet_migration_plan(&c->o, target, 0, &c->m, &err), MCR_OK);
    mcr_snapshot_unref(target);
    if (c->switching) {
        c->m.phase = MCR_MIGRATION_COPYING;
        ck_assert_msg(mcr_fleet_migration_write(&c->o, &c->m, &err) == MCR_OK, "%s",
                      err.message);
    }
}

static int mig_run(void *v, mcr_error *err)
{
    mig_ctx *c = v;
    int rc = c->switching ? mcr_fleet_migration_switch(&c->o, &c->m, err)
                          : mcr_fleet_migration_write(&c->o, &c->m, err);
    c->rc = rc;
    snprintf(c->message, sizeof c->message, "%s", rc == MCR_OK ? "" : err->message);
    return rc;
}

static void mig_check(void *v)
{
    (void)v; /* mig_clean checks etcd after every run */
}

static void mig_clean(void *v)
{
    mig_ctx *c = v;
    mcr_migration r;
    mcr_error err;
    int rc = mcr_fleet_migration_read(&c->o, &r, &err);
    /* no record yet: a write that did not land */
    ck_assert_msg(rc == MCR_OK || (!c->switching && rc == MCR_ERR_EMPTY), "%s", err.message);
    if (rc != MCR_OK)
        memset(&r, 0, sizeof(r));
    int done;
    if (c->switching) {
        mcr_snapshot *s = fe_read(&c->o, NULL);
        done = mcr_snapshot_epoch(s) == 2;
        ck_assert_msg(done == (r.phase == MCR_MIGRATION_SWITCHED),
                      "the pool at epoch %llu, the record in phase %s: half a switch",
                      (unsigned long long)mcr_snapshot_epoch(s), mcr_migration_phase_name(r.phase));
        if (done)
            ck_assert_str_eq(mcr_snapshot_checksum(s), mcr_snapshot_checksum(c->m.to));
        mcr_snapshot_unref(s);
    } else {
        done = r.phase != MCR_MIGRATION_NONE; /* the record exists */
        if (done)
            ck_assert_str_eq(r.id, c->m.id);
    }
    mcr_migration_clear(&r);
    if (c->rc == MCR_OK) {
        ck_assert_msg(done, "the call said MCR_OK, but etcd does not hold its write");
    } else if (done) {
        ck_assert_msg(strstr(c->message, "outcome unknown") != NULL,
                      "etcd holds the write, but the call failed with \"%s\"", c->message);
        c->unknown++;
    }
    mcr_migration_clear(&c->m);
    mig_setup(c);
}

START_TEST(test_migration_records)
{
    static const nm_op op = {"mcr_fleet_migration_write/switch", mig_run, mig_check, mig_clean,
                             1};
    static mig_ctx c;
    for (int sw = 0; sw < 2; sw++) {
        memset(&c, 0, sizeof(c));
        c.switching = sw;
        mig_setup(&c);
        long n = nm_every_failure(&op, &c, 0, NULL);
        fprintf(stderr, "%s: %ld allocations, %ld failed runs whose write etcd holds\n",
                sw ? "mcr_fleet_migration_switch" : "mcr_fleet_migration_write", n, c.unknown);
        mcr_migration_clear(&c.m);
    }
}
END_TEST

/* ------------------------------------------------------------ the follower
 *
 * The follower's thread arms itself (nomem_wrap.h arms one thread) from
 * its event callback when it adopts epoch A, with the k-th allocation from
 * then on failing; the test then publishes epoch B, and the follower must
 * adopt B without any further write: a value it could not take in for want
 * of memory is read again, never skipped until the next change. At B's
 * adoption the callback disarms and says whether the failure came. */

typedef struct follow_rec {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t adopted;   /* the last ADOPTED epoch */
    uint64_t arm_at;    /* arm when this epoch is adopted (0: not) */
    long arm_k;
    uint64_t disarm_at; /* disarm when this epoch is adopted */
    int hit;            /* the armed failure came before disarm_at's adoption */
    int disarmed;
    long refused_nomem; /* REFUSED events that said MCR_ERR_NOMEM */
} follow_rec;

static void follow_cb(const mcr_fleet_event *ev, void *arg)
{
    follow_rec *r = arg;
    pthread_mutex_lock(&r->mu);
    if (ev->kind == MCR_FLEET_REFUSED && ev->status == MCR_ERR_NOMEM)
        r->refused_nomem++;
    if (ev->kind == MCR_FLEET_ADOPTED) {
        r->adopted = ev->epoch;
        if (r->disarm_at != 0 && ev->epoch >= r->disarm_at) {
            r->hit = nm_disarm();
            r->disarmed = 1;
            r->disarm_at = 0;
        }
        if (r->arm_at != 0 && ev->epoch >= r->arm_at) {
            nm_arm(r->arm_k); /* this thread's allocations from here on */
            r->arm_at = 0;
        }
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
}

/* Wait until the follower adopted `epoch` (and, with `disarmed`, disarmed
 * there), at most ms: 1, else 0. */
static int wait_adopted(follow_rec *r, uint64_t epoch, int disarmed, int ms)
{
    struct timespec end;
    clock_gettime(CLOCK_REALTIME, &end);
    end.tv_sec += ms / 1000;
    end.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (end.tv_nsec >= 1000000000L) {
        end.tv_sec++;
        end.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&r->mu);
    int rc = 0;
    while (!(r->adopted >= epoch && (!disarmed || r->disarmed)) && rc == 0)
        rc = pthread_cond_timedwait(&r->cv, &r->mu, &end);
    int ok = r->adopted >= epoch && (!disarmed || r->disarmed);
    pthread_mutex_unlock(&r->mu);
    return ok;
}

START_TEST(test_follower)
{
    static follow_rec r;
    mcr_fleet_options o;
    mcr_fleet_follow_options fo;
    mcr_error err;
    static const char *const specs[2] = {"127.0.0.1:11211,127.0.0.1:11212",
                                         "127.0.0.1:11211,127.0.0.1:11213:2"};

    memset(&r, 0, sizeof(r));
    pthread_mutex_init(&r.mu, NULL);
    pthread_cond_init(&r.cv, NULL);
    fe_options(&o, es_endpoints(fe_cluster()), "nomem-follow");
    uint64_t epoch = fe_publish(&o, "127.0.0.1:11299");
    long live0 = nm_live();

    mcr_router *router = NULL;
    ck_assert_int_eq(mcr_router_new(NULL, &router, &err), MCR_OK);
    memset(&fo, 0, sizeof(fo));
    fo.no_register = 1;
    fo.retry_min_ms = 10;
    fo.retry_max_ms = 100;
    fo.on_event = follow_cb;
    fo.arg = &r;
    mcr_fleet *f = NULL;
    ck_assert_msg(mcr_fleet_follow(&o, &fo, router, &f, &err) == MCR_OK, "%s", err.message);
    ck_assert_uint_eq(mcr_router_epoch(router), epoch);

    long k = 0;
    int hit = 1;
    for (; hit && k < 2000; k++) {
        pthread_mutex_lock(&r.mu);
        r.arm_at = epoch + 1;
        r.arm_k = k;
        r.disarm_at = epoch + 2;
        r.disarmed = 0;
        pthread_mutex_unlock(&r.mu);
        ck_assert_uint_eq(fe_publish(&o, specs[0]), epoch + 1);
        ck_assert_msg(wait_adopted(&r, epoch + 1, 0, mcr_test_ms(10000)),
                      "round %ld: epoch %llu not adopted", k, (unsigned long long)epoch + 1);
        ck_assert_uint_eq(fe_publish(&o, specs[1]), epoch + 2);
        ck_assert_msg(wait_adopted(&r, epoch + 2, 1, mcr_test_ms(10000)),
                      "round %ld: epoch %llu, published after the %ld-th allocation failed, "
                      "not adopted without another write (adopted: %llu)",
                      k, (unsigned long long)epoch + 2, k + 1, (unsigned long long)r.adopted);
        ck_assert_uint_eq(mcr_router_epoch(router), epoch + 2);
        pthread_mutex_lock(&r.mu);
        hit = r.hit;
        pthread_mutex_unlock(&r.mu);
        epoch += 2;
    }
    ck_assert_msg(!hit, "the follower still allocating after %ld rounds", k);
    ck_assert_msg(k > 10, "only %ld allocations between two adoptions", k);
    fprintf(stderr, "follower: %ld rounds, %ld values refused for want of memory and read "
            "again\n", k, r.refused_nomem);
    mcr_fleet_free(f);
    mcr_router_free(router);
    ck_assert_msg(nm_live() == live0, "%ld blocks still allocated after the follower and its "
                  "router were freed", nm_live() - live0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fleet_nomem");
    TCase *tc = tcase_create("blocking_calls");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, test_blocking_calls);
    suite_add_tcase(s, tc);
    TCase *tm = tcase_create("migration_records");
    tcase_set_timeout(tm, 300);
    tcase_add_checked_fixture(tm, NULL, teardown);
    tcase_add_test(tm, test_migration_records);
    suite_add_tcase(s, tm);
    TCase *tf = tcase_create("follower");
    tcase_set_timeout(tf, 300);
    tcase_add_checked_fixture(tf, NULL, teardown);
    tcase_add_test(tf, test_follower);
    suite_add_tcase(s, tf);
    return s;
}

int main(void)
{
    json_set_alloc_funcs(json_counted_malloc, free); /* free: __wrap_free */
    return fe_main(suite(), 1, "fleet-nomem");
}
