/* SPDX-License-Identifier: BSD-3-Clause */
/* test_fleet_nomem.c: libmcroute_fleet's blocking calls against a real etcd with each of their allocations failing in turn: MCR_ERR_NOMEM or a right result, etcd's pool never half written, nothing leaked. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet_env.h"
#include "mcroute_fleet.h"
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

/* jansson is a shared library: its json_dumps(), whose text the fleet frees
 * with free(), goes through here to be counted (and failed in its turn). */
char *__real_json_dumps(const json_t *json, size_t flags);
char *__wrap_json_dumps(const json_t *json, size_t flags);

char *__wrap_json_dumps(const json_t *json, size_t flags)
{
    return nm_fail_here() ? NULL : nm_counted(__real_json_dumps(json, flags));
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
    mcr_server_desc extra = {"extra", "127.0.0.2", 11211, 1, NULL, MCR_STATE_ACTIVE, 0};
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

static Suite *suite(void)
{
    Suite *s = suite_create("fleet_nomem");
    TCase *tc = tcase_create("blocking_calls");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, test_blocking_calls);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fe_main(suite(), 1, "fleet-nomem");
}
