/* SPDX-License-Identifier: BSD-3-Clause */
/* test_migrate_nomem.c: a resize copied between real memcached servers (mcr_migrate_run) with each of its allocations failing in turn: MCR_ERR_NOMEM or every moved key copied right, nothing leaked. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcroute.h"
#include "mcroute_migrate.h"
#include "mcroute_snapshot.h"
#include "nomem_wrap.h"
#include "realserver.h"
#include "testutil.h"
#include "testutil_config.h"

/*
 * Two servers grow to three: the keys the third one takes are copied from
 * the other two. Each run goes through nm_every_failure() (nomem_wrap.h),
 * once for each allocation of the run (two routers, two pools, the dumps'
 * parsers, the copies, the destinations' counters and the diff that finds
 * them: the library's; libevent's are a shared library's and not failed),
 * with that one failing. A run that returns MCR_OK must have
 * copied every moved key with its value; a failing one must say
 * MCR_ERR_NOMEM. After each run the third server is flushed, so that the
 * next one copies the same keys again.
 */

#define NK 80
#define START_MS mcr_test_ms(20000)
#define IO_MS mcr_test_ms(10000)

typedef struct mig_ctx {
    rs_proc mc[3];
    mcr_snapshot *from, *to;
    char key[NK][32];
    int moved[NK]; /* 1: its owner in `to` is the new server */
    long nmoved;
    mcr_migrate_report report;
} mig_ctx;

static void teardown(void)
{
    rs_stop_all();
}

static void value_of(int i, char *buf, size_t cap)
{
    snprintf(buf, cap, "migrated value %d of the nomem test", i);
}

static mcr_snapshot *snapshot_of(const mig_ctx *c, int n, uint64_t epoch)
{
    char spec[256];
    size_t o = 0;
    for (int i = 0; i < n; i++)
        o += (size_t)snprintf(spec + o, sizeof spec - o, "%s127.0.0.1:%d", i ? "," : "",
                              c->mc[i].port);
    mcr_config *cfg = tu_config(spec, MCR_MODE_KETAMA, MCR_HASH_COUNT);
    mcr_snapshot *s = NULL;
    ck_assert_int_eq(mcr_snapshot_new(cfg, epoch, &s, NULL), MCR_OK);
    mcr_config_free(cfg);
    return s;
}

static int mig_run(void *v, mcr_error *err)
{
    mig_ctx *c = v;
    mcr_migrate_options o;
    mcr_migrate_options_init(&o);
    o.timeout_ms = (unsigned)mcr_test_ms(10000);
    return mcr_migrate_run(c->from, c->to, &o, &c->report, err);
}

/* Every moved key on the new server with its value. */
static void mig_check(void *v)
{
    mig_ctx *c = v;
    ck_assert_uint_eq(c->report.moved, (uint64_t)c->nmoved);
    ck_assert_uint_eq(c->report.copied, (uint64_t)c->nmoved);
    ck_assert_uint_eq(c->report.failed, 0);
    /* the new server's counters read before and after (room.c): room */
    ck_assert_uint_eq(c->report.ndestinations, 1);
    ck_assert_uint_eq(c->report.evicted, 0);
    ck_assert_uint_eq(c->report.refused, 0);
    ck_assert_str_eq(c->report.room_message, "");
    int fd = rs_connect("127.0.0.1", c->mc[2].port, IO_MS);
    ck_assert_int_ge(fd, 0);
    for (int i = 0; i < NK; i++) {
        if (!c->moved[i])
            continue;
        char want[64], got[128];
        value_of(i, want, sizeof want);
        ck_assert_msg(rs_mc_get(fd, c->key[i], got, sizeof got, IO_MS) == 1,
                      "moved key %s not on the new server", c->key[i]);
        ck_assert_str_eq(got, want);
    }
    close(fd);
}

/* The report freed, the new server emptied for the next run. */
static void mig_clean(void *v)
{
    mig_ctx *c = v;
    mcr_migrate_report_clear(&c->report);
    int fd = rs_connect("127.0.0.1", c->mc[2].port, IO_MS);
    ck_assert_int_ge(fd, 0);
    char reply[64];
    ck_assert_int_eq(rs_mc_command(fd, "flush_all", reply, sizeof reply, IO_MS), 0);
    ck_assert_str_eq(reply, "OK");
    close(fd);
}

START_TEST(test_resize)
{
    static const nm_op op = {"mcr_migrate_run", mig_run, mig_check, mig_clean, 1};
    static mig_ctx c;
    memset(&c, 0, sizeof(c));
    for (int i = 0; i < 3; i++)
        ck_assert_msg(rs_memcached_start(&c.mc[i], "127.0.0.1", 0, NULL, START_MS) == 0,
                      "memcached %d did not start", i);
    c.from = snapshot_of(&c, 2, 1);
    c.to = snapshot_of(&c, 3, 2);

    int fd[2];
    for (int s = 0; s < 2; s++) {
        fd[s] = rs_connect("127.0.0.1", c.mc[s].port, IO_MS);
        ck_assert_int_ge(fd[s], 0);
    }
    for (int i = 0; i < NK; i++) {
        char val[64];
        size_t kl = (size_t)snprintf(c.key[i], sizeof c.key[i], "nomem:mig:%d", i);
        value_of(i, val, sizeof val);
        uint32_t owner = mcr_snapshot_locate(c.from, c.key[i], kl);
        ck_assert_uint_lt(owner, 2);
        ck_assert_int_eq(rs_mc_set(fd[owner], c.key[i], val, IO_MS), 0);
        c.moved[i] = mcr_snapshot_locate(c.to, c.key[i], kl) == 2;
        c.nmoved += c.moved[i];
    }
    close(fd[0]);
    close(fd[1]);
    ck_assert_int_gt(c.nmoved, 5);

    long n = nm_every_failure(&op, &c, 0, NULL);
    fprintf(stderr, "mcr_migrate_run: %ld allocations, %ld keys moved\n", n, c.nmoved);

    mcr_snapshot_unref(c.from);
    mcr_snapshot_unref(c.to);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("migrate_nomem");
    TCase *tc = tcase_create("resize");
    tcase_set_timeout(tc, 600);
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, test_resize);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
