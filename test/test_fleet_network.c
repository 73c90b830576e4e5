/* SPDX-License-Identifier: BSD-3-Clause */
/* test_fleet_network.c: libmcroute_fleet's blocking calls when etcd is in trouble: nothing listening, a listener that never answers, a reply lost after etcd committed the write (a proxy that drops it), with and without another writer's change on top. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "fleet_env.h"
#include "realserver.h"
#include "testutil.h"

static void teardown(void)
{
    rs_stop_all();
}

static void opts(mcr_fleet_options *o, const char *pool)
{
    fe_options(o, es_endpoints(fe_cluster()), pool);
}

/* ------------------------------------------------------------ etcd unreachable */

START_TEST(test_unreachable)
{
    int ports[2], fds[2];
    char eps[128];
    mcr_fleet_options o;
    mcr_error err = {0};
    mcr_snapshot *s = NULL;
    uint64_t epoch = 0;
    const unsigned wait = 1000;

    ck_assert_int_eq(rs_reserve_ports("127.0.0.1", 2, ports, fds), 0);
    rs_release_ports(2, fds); /* nothing listens there now */
    snprintf(eps, sizeof(eps), "http://127.0.0.1:%d,127.0.0.1:%d", ports[0], ports[1]);
    fe_options(&o, eps, "unreachable");
    o.wait_ms = wait;

    int64_t t0 = mcr_test_now_ms();
    int rc = mcr_fleet_read(&o, &s, NULL, &err);
    int64_t took = mcr_test_now_ms() - t0;
    ck_assert_msg(rc == MCR_ERR_CONNECT, "%s (%s)", mcr_strerror(rc), err.message);
    ck_assert_ptr_null(s);
    ck_assert_msg(took >= wait - 20 && took <= wait + mcr_test_ms(1000),
                  "gave up after %lld ms for wait_ms %u", (long long)took, wait);
    char p0[32], p1[32];
    snprintf(p0, sizeof(p0), "127.0.0.1:%d", ports[0]);
    snprintf(p1, sizeof(p1), "127.0.0.1:%d", ports[1]);
    ck_assert_msg(strstr(err.message, p0) && strstr(err.message, p1) &&
                      strstr(err.message, "unreachable"),
                  "%s", err.message);

    t0 = mcr_test_now_ms();
    rc = fe_add(&o, "x", "10.0.11.1", 11211, &epoch, &err);
    took = mcr_test_now_ms() - t0;
    ck_assert_msg(rc == MCR_ERR_CONNECT && took <= wait + mcr_test_ms(1000), "change: %s in %lld ms",
                  mcr_strerror(rc), (long long)took);
    mcr_config *cfg = fe_config("10.0.11.1:11211");
    ck_assert_int_eq(mcr_fleet_publish(&o, cfg, &epoch, &err), MCR_ERR_CONNECT);
    mcr_config_free(cfg);

    /* A dead endpoint before a live one: the live one answers. */
    snprintf(eps, sizeof(eps), "http://127.0.0.1:%d,%s", ports[0], es_endpoint(fe_cluster(), 0));
    fe_options(&o, eps, "unreachable");
    rc = mcr_fleet_read(&o, &s, NULL, &err);
    ck_assert_msg(rc == MCR_ERR_UNKNOWN, "%s (%s)", mcr_strerror(rc), err.message);
}
END_TEST

/* A listener that never answers (accepted by the kernel, never read): each
 * request times out after request_timeout_ms; the call still ends near wait_ms. */
START_TEST(test_silent_endpoint)
{
    int port, fd;
    char eps[64];
    mcr_fleet_options o;
    mcr_error err = {0};
    mcr_snapshot *s = NULL;

    ck_assert_int_eq(rs_reserve_ports("127.0.0.1", 1, &port, &fd), 0);
    ck_assert_int_eq(listen(fd, 64), 0);
    snprintf(eps, sizeof(eps), "127.0.0.1:%d", port);
    fe_options(&o, eps, "silent");
    o.wait_ms = 1000;
    o.request_timeout_ms = 300;
    int64_t t0 = mcr_test_now_ms();
    int rc = mcr_fleet_read(&o, &s, NULL, &err);
    int64_t took = mcr_test_now_ms() - t0;
    rs_release_ports(1, &fd);
    ck_assert_msg(rc == MCR_ERR_CONNECT, "%s (%s)", mcr_strerror(rc), err.message);
    ck_assert_msg(strstr(err.message, "timed out") != NULL, "%s", err.message);
    ck_assert_msg(took >= 900 && took <= 1000 + 300 + mcr_test_ms(1000),
                  "gave up after %lld ms (wait 1000, request timeout 300)", (long long)took);
}
END_TEST

/* ------------------------------------------------------------ a reply lost */

/* The first endpoint is a proxy that passes every request on to the
 * member but loses the reply of each compare-and-swap (as when a leader
 * dies between committing and answering); the second is the member. Each
 * call's write lands, the library hears nothing, tries the member: the
 * compare fails (its own write moved the revision), it reads again and
 * must recognise what it finds as its own write: MCR_OK, one epoch. */
START_TEST(test_reply_lost)
{
    es_cluster *c = fe_cluster();
    const char *ep = es_endpoint(c, 0);
    fe_proxy *px = fe_proxy_start(atoi(strrchr(ep, ':') + 1), "POST /v3/kv/txn");
    char eps[256];
    mcr_fleet_options o, direct;
    mcr_error err = {0};
    mcr_changes *ch = mcr_changes_new();
    uint64_t epoch = 0;
    int rc;

    opts(&direct, "reply-lost");
    ck_assert_uint_eq(fe_publish(&direct, "10.0.13.1:11211,10.0.13.2:11211"), 1);
    snprintf(eps, sizeof(eps), "127.0.0.1:%d,%s", fe_proxy_port(px), ep);
    fe_options(&o, eps, "reply-lost");

    rc = fe_add(&o, "added", "10.0.13.3", 11211, &epoch, &err);
    ck_assert_int_eq(fe_proxy_dropped(px), 1);
    ck_assert_msg(rc == MCR_OK, "an add whose reply was lost: %s (%s)", mcr_strerror(rc),
                  err.message);
    ck_assert_uint_eq(epoch, 2);
    ck_assert_uint_eq(fe_epoch(&direct), 2);

    /* A change that would apply again: still one epoch. */
    ck_assert_int_eq(mcr_changes_set_weight(ch, "added", 4, &err), MCR_OK);
    rc = mcr_fleet_change(&o, ch, &epoch, &err);
    ck_assert_int_eq(fe_proxy_dropped(px), 2);
    ck_assert_msg(rc == MCR_OK && epoch == 3, "set-weight whose reply was lost: %s, epoch %llu (%s)",
                  mcr_strerror(rc), (unsigned long long)epoch, err.message);
    mcr_snapshot *s = fe_read(&direct, NULL);
    ck_assert_uint_eq(mcr_snapshot_epoch(s), 3);
    fe_assert_has(s, "added", MCR_STATE_ACTIVE, 4);
    mcr_snapshot_unref(s);

    /* Publish: its list is there after the lost write. */
    mcr_config *cfg = fe_config("10.0.13.1:11211,10.0.13.5:11211");
    rc = mcr_fleet_publish(&o, cfg, &epoch, &err);
    mcr_config_free(cfg);
    ck_assert_int_eq(fe_proxy_dropped(px), 3);
    ck_assert_msg(rc == MCR_OK && epoch == 4, "publish: %s, epoch %llu (%s)", mcr_strerror(rc),
                  (unsigned long long)epoch, err.message);
    ck_assert_uint_eq(fe_epoch(&direct), 4);

    /* Creation too: the pool created by the lost write is the one wanted. */
    fe_options(&o, eps, "reply-lost-new");
    cfg = fe_config("10.0.13.7:11211");
    rc = mcr_fleet_publish(&o, cfg, &epoch, &err);
    mcr_config_free(cfg);
    ck_assert_int_eq(fe_proxy_dropped(px), 4);
    ck_assert_msg(rc == MCR_OK && epoch == 1, "create: %s, epoch %llu (%s)", mcr_strerror(rc),
                  (unsigned long long)epoch, err.message);
    mcr_changes_free(ch);
    fe_proxy_stop(px);
}
END_TEST

/* The same, with another writer's change landing on top of the lost write
 * before the library reads again: its write is no longer the current
 * value, but it is in the key's history, and found there. */
typedef struct intruder {
    mcr_fleet_options o;
    int n, rc;
} intruder;

static void intrude(void *arg)
{
    intruder *in = arg;
    char id[32], host[32];
    mcr_error err = {0};
    snprintf(id, sizeof(id), "other-%d", in->n);
    snprintf(host, sizeof(host), "10.0.14.%d", 100 + in->n);
    in->n++;
    int rc = fe_add(&in->o, id, host, 11211, NULL, &err);
    if (rc != MCR_OK && in->rc == MCR_OK)
        in->rc = rc;
}

static void intrude_and_compact(void *arg)
{
    intruder *in = arg;
    char rev[32], *out = NULL;
    intrude(arg);
    snprintf(rev, sizeof(rev), "%lld", es_revision(fe_cluster()));
    if (es_ctl(fe_cluster(), &out, "compaction", rev, NULL) != 0 && in->rc == MCR_OK)
        in->rc = MCR_ERR_IO;
    free(out);
}

START_TEST(test_reply_lost_then_overwritten)
{
    es_cluster *c = fe_cluster();
    const char *ep = es_endpoint(c, 0);
    fe_proxy *px = fe_proxy_start(atoi(strrchr(ep, ':') + 1), "POST /v3/kv/txn");
    static intruder in;
    char eps[256];
    mcr_fleet_options o;
    mcr_error err = {0};
    mcr_changes *ch = mcr_changes_new();
    uint64_t epoch = 0;
    int rc;

    opts(&in.o, "lost-overwritten");
    ck_assert_uint_eq(fe_publish(&in.o, "10.0.14.1:11211,10.0.14.2:11211"), 1);
    fe_proxy_on_drop(px, intrude, &in);
    snprintf(eps, sizeof(eps), "127.0.0.1:%d,%s", fe_proxy_port(px), ep);
    fe_options(&o, eps, "lost-overwritten");

    rc = fe_add(&o, "mine", "10.0.14.3", 11211, &epoch, &err);
    ck_assert_int_eq(fe_proxy_dropped(px), 1);
    ck_assert_int_eq(in.rc, MCR_OK);
    ck_assert_msg(rc == MCR_OK && epoch == 2, "an add whose reply was lost, overwritten: %s, "
                  "epoch %llu (%s)", mcr_strerror(rc), (unsigned long long)epoch, err.message);
    mcr_snapshot *s = fe_read(&in.o, NULL);
    ck_assert_uint_eq(mcr_snapshot_epoch(s), 3);
    ck_assert_msg(fe_has(s, "mine", NULL, NULL) && fe_has(s, "other-0", NULL, NULL), "lost");
    mcr_snapshot_unref(s);

    ck_assert_int_eq(mcr_changes_set_weight(ch, "mine", 4, &err), MCR_OK);
    rc = mcr_fleet_change(&o, ch, &epoch, &err);
    ck_assert_int_eq(fe_proxy_dropped(px), 2);
    ck_assert_msg(rc == MCR_OK && epoch == 4, "set-weight whose reply was lost, overwritten: %s, "
                  "epoch %llu (%s)", mcr_strerror(rc), (unsigned long long)epoch, err.message);
    s = fe_read(&in.o, NULL);
    ck_assert_uint_eq(mcr_snapshot_epoch(s), 5); /* 4 was the weight, 5 the other writer's */
    fe_assert_has(s, "mine", MCR_STATE_ACTIVE, 4);
    ck_assert_msg(fe_has(s, "other-1", NULL, NULL), "other-1 lost");
    mcr_snapshot_unref(s);

    /* With that history compacted away too, the library cannot tell: it
     * applies the changes again, and this add is a duplicate. */
    fe_proxy_on_drop(px, intrude_and_compact, &in);
    rc = fe_add(&o, "mine-2", "10.0.14.4", 11211, &epoch, &err);
    ck_assert_int_eq(fe_proxy_dropped(px), 3);
    ck_assert_int_eq(in.rc, MCR_OK);
    ck_assert_msg(rc == MCR_ERR_DUPLICATE, "lost, overwritten and compacted: %s (%s)",
                  mcr_strerror(rc), err.message);
    s = fe_read(&in.o, NULL);
    ck_assert_uint_eq(mcr_snapshot_epoch(s), 7);
    ck_assert_msg(fe_has(s, "mine-2", NULL, NULL) && fe_has(s, "other-2", NULL, NULL), "lost");
    mcr_snapshot_unref(s);
    mcr_changes_free(ch);
    fe_proxy_stop(px);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fleet_network");
    const tu_case cases[] = {
        {"unreachable", test_unreachable},
        {"silent_endpoint", test_silent_endpoint},
        {"reply_lost", test_reply_lost},
        {"reply_lost_then_overwritten", test_reply_lost_then_overwritten},
    };
    tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]), 60, teardown);
    return s;
}

int main(void)
{
    return fe_main(suite(), 1, "fleet-network");
}
