/* SPDX-License-Identifier: BSD-3-Clause */
/* test_fleet_validate.c: what followers refuse to adopt, against real etcd: snapshots with other placement parameters, epochs past the bounds (and writers refusing to build on them, a pool repaired as docs/fleet.md says), migration records whose snapshots are not the pool's; and the legitimate records that must still pass (a switch heard of first, a rollback, a pool changed during a migration, a resync in the switched phase, a watch catching up on a change and a plan in one response). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet_env.h"
#include "realserver.h"
#include "testutil.h"

/* How long a follower gets to see a change. */
#define SEE_MS mcr_test_ms(10000)

#define FOUR "10.11.0.1:11211,10.11.0.2:11211,10.11.0.3:11211,10.11.0.4:11211"
#define FIVE FOUR ",10.11.0.5:11211"

#define JUMP (UINT64_C(1) << 32)
#define TOP (UINT64_C(1) << 63)

static void teardown(void)
{
    rs_stop_all();
}

static void opts(mcr_fleet_options *o, const char *pool)
{
    fe_options(o, es_endpoints(fe_cluster()), pool);
}

/* ------------------------------------------------------------ followers */

typedef struct follower {
    mcr_router *router;
    mcr_fleet *f;
    fe_rec rec;
} follower;

/* Follow o's pool as client `id`, with fo's other settings (NULL: none):
 * the status; on MCR_OK the follower runs. */
static int follow_try(follower *x, const mcr_fleet_options *o, const char *id,
                      const mcr_fleet_follow_options *fo, mcr_error *err)
{
    mcr_fleet_follow_options d = {0};
    if (fo != NULL)
        d = *fo;
    memset(x, 0, sizeof(*x));
    fe_rec_init(&x->rec);
    d.client_id = id;
    d.on_event = fe_on_event;
    d.arg = &x->rec;
    ck_assert_int_eq(mcr_router_new(NULL, &x->router, err), MCR_OK);
    int rc = mcr_fleet_follow(o, &d, x->router, &x->f, err);
    if (rc == MCR_OK)
        fe_rec_start(&x->rec, mcr_router_epoch(x->router));
    return rc;
}

static void follow(follower *x, const mcr_fleet_options *o, const char *id)
{
    mcr_error err = {0};
    int rc = follow_try(x, o, id, NULL, &err);
    ck_assert_msg(rc == MCR_OK, "follow %s: %s: %s", o->pool, mcr_strerror(rc), err.message);
    ck_assert_msg(fe_wait_count(&x->rec, MCR_FLEET_CONNECTED, 1, SEE_MS), "%s: no watch", id);
}

static void unfollow(follower *x)
{
    mcr_fleet_free(x->f);
    mcr_router_free(x->router);
    fe_rec_destroy(&x->rec);
    memset(x, 0, sizeof(*x));
}

static mcr_fleet_stats stats(follower *x)
{
    mcr_fleet_stats s;
    mcr_fleet_get_stats(x->f, &s);
    return s;
}

static void wait_adopted(follower *x, uint64_t epoch)
{
    ck_assert_msg(fe_wait_adopted(&x->rec, epoch, SEE_MS),
                  "epoch %llu not adopted within %d ms: router at %llu, %llu refused",
                  (unsigned long long)epoch, SEE_MS,
                  (unsigned long long)mcr_router_epoch(x->router),
                  (unsigned long long)stats(x).refused);
    ck_assert_uint_eq(mcr_router_epoch(x->router), epoch);
}

/* The n-th REFUSED event: its status, and a message that says `says`. */
static void wait_refused(follower *x, size_t n, int status, const char *says)
{
    char msg[MCR_ERROR_MESSAGE_SIZE];
    ck_assert_msg(fe_wait_count(&x->rec, MCR_FLEET_REFUSED, n, SEE_MS),
                  "refusal %zu not reported within %d ms (%zu so far; expected \"%s\")", n,
                  SEE_MS, fe_count(&x->rec, MCR_FLEET_REFUSED), says);
    pthread_mutex_lock(&x->rec.mu);
    int st = x->rec.last_status[MCR_FLEET_REFUSED];
    pthread_mutex_unlock(&x->rec.mu);
    fe_last_msg(&x->rec, MCR_FLEET_REFUSED, msg, sizeof(msg));
    fprintf(stderr, "refused: %s\n", msg); /* the messages docs/fleet.md quotes */
    ck_assert_msg(st == status && strstr(msg, says) != NULL,
                  "refusal %zu: %s \"%s\", expected %s saying \"%s\"", n, mcr_strerror(st), msg,
                  mcr_strerror(status), says);
    ck_assert_uint_eq(stats(x).refused, n);
}

/* Wait until n events of `kind` came. */
static void wait_kind(follower *x, mcr_fleet_event_kind kind, size_t n, const char *what)
{
    ck_assert_msg(fe_wait_count(&x->rec, kind, n, SEE_MS), "%s: event %d #%zu not within %d ms "
                  "(%zu so far)", what, (int)kind, n, SEE_MS, fe_count(&x->rec, kind));
}

/* Wait until client `id` shows migration `mid` in `phase` ("" and NONE:
 * none) at `epoch`. */
static void wait_client(const mcr_fleet_options *o, const char *id, const char *mid,
                        mcr_migration_phase phase, uint64_t epoch)
{
    mcr_fleet_client c;
    int64_t end = mcr_test_now_ms() + SEE_MS;
    int got = 0;
    for (;;) {
        memset(&c, 0, sizeof(c));
        got = fe_client(o, id, &c, NULL, 0);
        if (got && strcmp(c.migration_id, mid) == 0 && c.migration_phase == phase &&
            c.epoch == epoch)
            return;
        if (mcr_test_now_ms() >= end)
            break;
        fe_nap();
    }
    ck_abort_msg("client %s: %s, migration \"%s\" %s at epoch %llu; expected \"%s\" %s at epoch "
                 "%llu",
                 id, got ? "registered" : "not registered", c.migration_id,
                 mcr_migration_phase_name(c.migration_phase), (unsigned long long)c.epoch, mid,
                 mcr_migration_phase_name(phase), (unsigned long long)epoch);
}

/* The router's transition: its epochs, or 0, 0. */
static void transition_of(mcr_router *r, uint64_t *from, uint64_t *to)
{
    mcr_router_migration t;
    *from = *to = 0;
    if (mcr_router_get_migration(r, &t) == MCR_OK) {
        *from = mcr_snapshot_epoch(t.from);
        *to = mcr_snapshot_epoch(t.to);
        mcr_router_migration_clear(&t);
    }
}

/* ------------------------------------------------------------ values */

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

/* The ketama snapshot of `spec` at `epoch`, with hash tag `tag` (NULL:
 * none, as the pools of fe_publish). */
static mcr_snapshot *make(const char *spec, uint64_t epoch, const char *tag)
{
    mcr_error err = {0};
    mcr_config *cfg = fe_config(spec);
    mcr_snapshot *s = NULL;
    if (tag != NULL)
        ck_assert_int_eq(mcr_config_set_hash_tag(cfg, tag), MCR_OK);
    ck_assert_msg(mcr_snapshot_new(cfg, epoch, &s, &err) == MCR_OK, "%s", err.message);
    mcr_config_free(cfg);
    return s;
}

/* A plan from o's pool to the servers of `spec`. */
static void plan(const mcr_fleet_options *o, const char *spec, mcr_migration *m)
{
    mcr_error err = {0};
    mcr_snapshot *target = make(spec, 1, NULL);
    int rc = mcr_fleet_migration_plan(o, target, 0, m, &err);
    mcr_snapshot_unref(target);
    ck_assert_msg(rc == MCR_OK, "plan: %s: %s", mcr_strerror(rc), err.message);
}

/* The record's mod_revision now (0: none), for a record written over it. */
static uint64_t record_revision(const mcr_fleet_options *o)
{
    mcr_migration r;
    mcr_error err = {0};
    uint64_t rev = 0;
    if (mcr_fleet_migration_read(o, &r, &err) == MCR_OK) {
        rev = r.mod_revision;
        mcr_migration_clear(&r);
    }
    return rev;
}

/* Write m with `phase`: must succeed. */
static void put_phase(const mcr_fleet_options *o, mcr_migration *m, mcr_migration_phase phase)
{
    mcr_error err = {0};
    m->phase = phase;
    if (phase == MCR_MIGRATION_GRACE && m->grace_until == 0)
        m->grace_until = 1; /* any time: followers do not time the grace */
    int rc = mcr_fleet_migration_write(o, m, &err);
    ck_assert_msg(rc == MCR_OK, "write %s: %s: %s", mcr_migration_phase_name(phase),
                  mcr_strerror(rc), err.message);
}

/* A record of our own making: id, from, to (references taken), written
 * over the record there is in `phase`. */
static void put_record(const mcr_fleet_options *o, const char *id, const mcr_snapshot *from,
                       const mcr_snapshot *to, mcr_migration_phase phase)
{
    mcr_migration m;
    memset(&m, 0, sizeof(m));
    snprintf(m.id, sizeof(m.id), "%s", id);
    m.from = mcr_snapshot_ref(from);
    m.to = mcr_snapshot_ref(to);
    m.warm = 1;
    m.mod_revision = record_revision(o);
    put_phase(o, &m, phase);
    mcr_migration_clear(&m);
}

static void change(const mcr_fleet_options *o, const char *id, int n, uint64_t want)
{
    mcr_error err = {0};
    uint64_t epoch = 0;
    char host[32];
    snprintf(host, sizeof(host), "10.11.9.%d", n);
    int rc = fe_add(o, id, host, 11211, &epoch, &err);
    ck_assert_msg(rc == MCR_OK, "add %s: %s: %s", id, mcr_strerror(rc), err.message);
    ck_assert_uint_eq(epoch, want);
}

/* ------------------------------------------------------------ snapshots */

/* Other placement parameters than the pool's: refused (the writers refuse
 * them too); the next value with the pool's parameters is adopted. */
START_TEST(test_snapshot_params)
{
    mcr_fleet_options o;
    follower x;
    es_cluster *c = fe_cluster();
    char key[256];

    opts(&o, "val-params");
    ck_assert_uint_eq(fe_publish(&o, FOUR), 1);
    snprintf(key, sizeof(key), "%s", fe_snapshot_key(&o));
    follow(&x, &o, "vp-1");

    mcr_snapshot *tagged = make(FOUR, 2, "{}");
    put_snapshot(c, key, tagged);
    wait_refused(&x, 1, MCR_ERR_INVALID,
                 "placement parameters differ from the pool's: the pool has \"hash-tag off\", "
                 "the value \"hash-tag value={}\"");
    mcr_config *cfg = fe_config(FOUR);
    mcr_snapshot *modula = NULL;
    mcr_error err = {0};
    ck_assert_int_eq(mcr_config_set_mode(cfg, MCR_MODE_MODULA), MCR_OK);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 3, &modula, &err), MCR_OK);
    mcr_config_free(cfg);
    put_snapshot(c, key, modula);
    wait_refused(&x, 2, MCR_ERR_INVALID, "the pool has \"mode ketama\", the value \"mode modula\"");
    ck_assert_uint_eq(mcr_router_epoch(x.router), 1);

    mcr_snapshot *two = make(FOUR, 2, NULL);
    put_snapshot(c, key, two);
    wait_adopted(&x, 2);
    ck_assert_uint_eq(stats(&x).refused, 2);
    mcr_snapshot_unref(tagged);
    mcr_snapshot_unref(modula);
    mcr_snapshot_unref(two);
    unfollow(&x);
}
END_TEST

/* Epochs past the bounds: refused; the bound itself is not. A follower
 * that starts on a pool at 2^63 or more fails. */
START_TEST(test_epoch_bounds)
{
    mcr_fleet_options o, t;
    follower x, y;
    es_cluster *c = fe_cluster();
    char key[256], msg[128];
    mcr_error err = {0};

    opts(&o, "val-epochs");
    ck_assert_uint_eq(fe_publish(&o, FOUR), 1);
    snprintf(key, sizeof(key), "%s", fe_snapshot_key(&o));
    follow(&x, &o, "ve-1");

    const uint64_t bad[] = {1 + JUMP + 1, TOP, UINT64_MAX};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        mcr_snapshot *s = make(FOUR, bad[i], NULL);
        put_snapshot(c, key, s);
        mcr_snapshot_unref(s);
        if (bad[i] >= TOP)
            snprintf(msg, sizeof(msg), "epoch %llu is 2^63 or more", (unsigned long long)bad[i]);
        else
            snprintf(msg, sizeof(msg), "epoch %llu is more than 2^32 above the adopted epoch 1",
                     (unsigned long long)bad[i]);
        wait_refused(&x, i + 1, MCR_ERR_RANGE, msg);
        ck_assert_uint_eq(mcr_router_epoch(x.router), 1);
        ck_assert_uint_eq(stats(&x).epoch, 1);
    }
    mcr_snapshot *s = make(FOUR, 1 + JUMP, NULL); /* 2^32 above: still adopted */
    put_snapshot(c, key, s);
    mcr_snapshot_unref(s);
    wait_adopted(&x, 1 + JUMP);
    unfollow(&x);

    /* At the start: nothing started, nothing published. */
    opts(&t, "val-epochs-top");
    char tkey[256];
    snprintf(tkey, sizeof(tkey), "%s", fe_snapshot_key(&t));
    s = make(FOUR, TOP + 5, NULL);
    put_snapshot(c, tkey, s);
    mcr_snapshot_unref(s);
    int rc = follow_try(&y, &t, "ve-2", NULL, &err);
    ck_assert_msg(rc == MCR_ERR_RANGE && strstr(err.message, "is 2^63 or more") &&
                      strstr(err.message, tkey),
                  "start on epoch 2^63 + 5: %s (%s)", mcr_strerror(rc), err.message);
    ck_assert_uint_eq(mcr_router_epoch(y.router), 0);
    mcr_router_free(y.router);
    fe_rec_destroy(&y.rec);
}
END_TEST

/* The key's mod_revision, through etcdctl. */
static long long mod_revision(es_cluster *c, const char *key)
{
    char *out = NULL;
    ck_assert_msg(es_ctl(c, &out, "get", "-w", "json", "--", key, NULL) == 0, "get: %s", out);
    const char *p = strstr(out, "\"mod_revision\":");
    ck_assert_msg(p != NULL, "no mod_revision in %s", out);
    long long r = atoll(p + strlen("\"mod_revision\":"));
    free(out);
    return r;
}

/* A huge epoch forged with etcdctl: refused by the follower, which keeps
 * serving; writers refuse to build on it; the repair of docs/fleet.md
 * ("Repairing a pool": the last good value put back, from the key's
 * history) brings the pool back, and the next change is adopted. */
START_TEST(test_huge_epoch_repair)
{
    mcr_fleet_options o;
    follower x;
    es_cluster *c = fe_cluster();
    char key[256], rev[32], *out = NULL;
    mcr_error err = {0};
    uint64_t epoch = 0;

    opts(&o, "val-repair");
    ck_assert_uint_eq(fe_publish(&o, FOUR), 1);
    change(&o, "r2", 2, 2);
    change(&o, "r3", 3, 3);
    snprintf(key, sizeof(key), "%s", fe_snapshot_key(&o));
    long long good_rev = mod_revision(c, key);
    follow(&x, &o, "vr-1");
    wait_client(&o, "vr-1", "", MCR_MIGRATION_NONE, 3);

    /* 2^40: more than 2^32 above the epoch held, then 2^63 + 5. */
    struct {
        uint64_t epoch;
        const char *follower_says, *writer_says;
    } forged[] = {
        {UINT64_C(1) << 40, "epoch 1099511627776 is more than 2^32 above the adopted epoch 3",
         "more than 2^32 above epoch 3 before it"},
        {TOP + 5, "epoch 9223372036854775813 is 2^63 or more",
         "its next epoch would be 2^63 or more"},
    };
    for (size_t i = 0; i < 2; i++) {
        mcr_snapshot *s = make(FOUR, forged[i].epoch, NULL);
        char *text = fe_text(s);
        put(c, key, text);
        wait_refused(&x, i + 1, MCR_ERR_RANGE, forged[i].follower_says);
        /* keeps serving epoch 3 */
        ck_assert_uint_eq(mcr_router_epoch(x.router), 3);
        const mcr_snapshot *held = mcr_router_acquire(x.router);
        ck_assert_uint_eq(mcr_snapshot_epoch(held), 3);
        ck_assert_uint_lt(mcr_snapshot_locate(held, "user:1", 6), mcr_snapshot_server_count(held));
        mcr_router_release(x.router, held);
        /* a writer refuses to build on it, and writes nothing */
        int rc = fe_add(&o, "w", "10.11.8.1", 11211, &epoch, &err);
        fprintf(stderr, "writer: %s\n", err.message);
        ck_assert_msg(rc == MCR_ERR_RANGE && strstr(err.message, forged[i].writer_says) &&
                          strstr(err.message, "write back the last good snapshot"),
                      "add on epoch %llu: %s (%s)", (unsigned long long)forged[i].epoch,
                      mcr_strerror(rc), err.message);
        char *now = es_get(c, key);
        ck_assert_msg(now != NULL && strcmp(now, text) == 0, "the pool was written over");
        free(now);
        free(text);
        mcr_snapshot_unref(s);
    }

    /* The repair: the last good value from the key's history, unchanged. */
    snprintf(rev, sizeof(rev), "%lld", good_rev);
    ck_assert_msg(es_ctl(c, &out, "get", "--rev", rev, "--print-value-only", "--", key, NULL) ==
                      0,
                  "get --rev: %s", out);
    size_t n = strlen(out);
    ck_assert_msg(n > 1 && out[n - 1] == '\n' && out[n - 2] == '\n', "value: %s", out);
    out[n - 1] = '\0'; /* the newline etcdctl adds */
    put(c, key, out);
    free(out);
    /* the follower held that epoch: nothing; the next change is adopted */
    change(&o, "r4", 4, 4);
    wait_adopted(&x, 4);
    wait_client(&o, "vr-1", "", MCR_MIGRATION_NONE, 4);
    pthread_mutex_lock(&x.rec.mu);
    ck_assert_msg(x.rec.nepochs == 1 && x.rec.epochs[0] == 4, "adopted %zu epochs, last %llu",
                  x.rec.nepochs, (unsigned long long)x.rec.last_adopted);
    pthread_mutex_unlock(&x.rec.mu);
    ck_assert_uint_eq(stats(&x).refused, 2);
    unfollow(&x);
}
END_TEST

/* ------------------------------------------------------------ records */

/* planned and copying records whose `from` is not the pool's snapshot
 * (an older epoch; the same epoch with other servers): refused, nothing
 * set, the client key does not show them; a record from the pool's
 * snapshot is adopted. */
START_TEST(test_record_from_stale)
{
    mcr_fleet_options o;
    mcr_migration m, ok;
    follower x;
    uint64_t from = 0, to = 0;

    opts(&o, "val-rfrom");
    ck_assert_uint_eq(fe_publish(&o, FOUR), 1);
    follow(&x, &o, "vf-1");
    plan(&o, FIVE, &m); /* from epoch 1 */
    change(&o, "f2", 2, 2);
    wait_adopted(&x, 2);

    put_phase(&o, &m, MCR_MIGRATION_COPYING);
    wait_refused(&x, 1, MCR_ERR_STALE,
                 "phase copying from epoch 1 (checksum ");
    char msg[MCR_ERROR_MESSAGE_SIZE];
    fe_last_msg(&x.rec, MCR_FLEET_REFUSED, msg, sizeof(msg));
    ck_assert_msg(strstr(msg, "not from the pool's snapshot, epoch 2 (checksum") != NULL, "%s",
                  msg);
    put_phase(&o, &m, MCR_MIGRATION_PLANNED);
    wait_refused(&x, 2, MCR_ERR_STALE, "phase planned from epoch 1");

    /* epoch 2, but not the pool's epoch 2 */
    mcr_snapshot *other2 = make(FIVE, 2, NULL), *other3 = fe_apply_add(other2, "o3", 7);
    put_record(&o, "ab12", other2, other3, MCR_MIGRATION_COPYING);
    wait_refused(&x, 3, MCR_ERR_STALE, "phase copying from epoch 2");
    transition_of(x.router, &from, &to);
    ck_assert_uint_eq(to, 0);
    ck_assert_uint_eq(fe_count(&x.rec, MCR_FLEET_MIGRATION_SET), 0);
    ck_assert_int_eq(stats(&x).migration_phase, MCR_MIGRATION_NONE);
    wait_client(&o, "vf-1", "", MCR_MIGRATION_NONE, 2);

    /* from the pool's snapshot: adopted */
    plan(&o, FIVE, &ok);
    ok.mod_revision = record_revision(&o);
    put_phase(&o, &ok, MCR_MIGRATION_COPYING);
    wait_kind(&x, MCR_FLEET_MIGRATION_SET, 1, "copying from epoch 2");
    transition_of(x.router, &from, &to);
    ck_assert_uint_eq(from, 2);
    ck_assert_uint_eq(to, 3);
    wait_client(&o, "vf-1", ok.id, MCR_MIGRATION_COPYING, 2);
    ck_assert_uint_eq(stats(&x).refused, 3);
    mcr_snapshot_unref(other2);
    mcr_snapshot_unref(other3);
    mcr_migration_clear(&m);
    mcr_migration_clear(&ok);
    unfollow(&x);
}
END_TEST

/* switched and grace records whose `to` and `from` are neither the pool's
 * snapshot: refused; done is not held to the pool's snapshot (it only
 * ends a transition). */
START_TEST(test_record_switched_stale)
{
    mcr_fleet_options o;
    mcr_migration m;
    follower x;

    opts(&o, "val-rswitch");
    ck_assert_uint_eq(fe_publish(&o, FOUR), 1);
    follow(&x, &o, "vs-1");
    plan(&o, FIVE, &m); /* 1 -> 2 */
    change(&o, "s2", 2, 2); /* another epoch 2 */
    wait_adopted(&x, 2);
    put_phase(&o, &m, MCR_MIGRATION_SWITCHED);
    wait_refused(&x, 1, MCR_ERR_STALE, "phase switched to epoch 2 (checksum ");
    char msg[MCR_ERROR_MESSAGE_SIZE];
    fe_last_msg(&x.rec, MCR_FLEET_REFUSED, msg, sizeof(msg));
    ck_assert_msg(strstr(msg, "but the pool's snapshot is epoch 2") &&
                      strstr(msg, "neither \"to\" nor \"from\""),
                  "%s", msg);
    put_phase(&o, &m, MCR_MIGRATION_GRACE);
    wait_refused(&x, 2, MCR_ERR_STALE, "phase grace to epoch 2");
    ck_assert_uint_eq(fe_count(&x.rec, MCR_FLEET_MIGRATION_SET), 0);
    wait_client(&o, "vs-1", "", MCR_MIGRATION_NONE, 2);
    put_phase(&o, &m, MCR_MIGRATION_DONE);
    wait_client(&o, "vs-1", m.id, MCR_MIGRATION_DONE, 2);
    ck_assert_uint_eq(stats(&x).refused, 2);
    mcr_migration_clear(&m);
    unfollow(&x);
}
END_TEST

/* A record whose `to` has other placement parameters than its `from`, or
 * an epoch more than 2^32 above it: refused in any phase. */
START_TEST(test_record_snapshots)
{
    mcr_fleet_options o;
    follower x;

    opts(&o, "val-rsnap");
    ck_assert_uint_eq(fe_publish(&o, FOUR), 1);
    follow(&x, &o, "vn-1");
    mcr_snapshot *cur = fe_read(&o, NULL);
    mcr_snapshot *tagged = make(FIVE, 2, "{}"), *far = make(FIVE, 2 + JUMP, NULL);
    put_record(&o, "c1", cur, tagged, MCR_MIGRATION_COPYING);
    wait_refused(&x, 1, MCR_ERR_INVALID,
                 "\"to\" has other placement parameters than \"from\": \"hash-tag value={}\", not "
                 "\"hash-tag off\"");
    put_record(&o, "c1", cur, tagged, MCR_MIGRATION_DONE);
    wait_refused(&x, 2, MCR_ERR_INVALID, "\"to\" has other placement parameters");
    put_record(&o, "c2", cur, far, MCR_MIGRATION_COPYING);
    wait_refused(&x, 3, MCR_ERR_RANGE,
                 "to_epoch 4294967298 is more than 2^32 above from_epoch 1");
    ck_assert_uint_eq(fe_count(&x.rec, MCR_FLEET_MIGRATION_SET), 0);
    ck_assert_int_eq(stats(&x).migration_phase, MCR_MIGRATION_NONE);
    wait_client(&o, "vn-1", "", MCR_MIGRATION_NONE, 1);
    mcr_snapshot_unref(cur);
    mcr_snapshot_unref(tagged);
    mcr_snapshot_unref(far);
    unfollow(&x);
}
END_TEST

/* ------------------------------------------------------------ what still passes */

/* A follower that first hears of a migration at its switch (written over
 * the record of another one, with the snapshot, in one transaction)
 * handles the record before the snapshot, while it still holds `from`:
 * adopted, the transition in place when `to` is. */
START_TEST(test_switch_first_heard)
{
    mcr_fleet_options o;
    mcr_migration m, done;
    follower x;
    mcr_error err = {0};
    uint64_t from = 0, to = 0;

    opts(&o, "val-first");
    ck_assert_uint_eq(fe_publish(&o, FOUR), 1);
    follow(&x, &o, "vh-1");
    plan(&o, FIVE, &done);
    put_phase(&o, &done, MCR_MIGRATION_DONE);
    wait_client(&o, "vh-1", done.id, MCR_MIGRATION_DONE, 1);
    plan(&o, FIVE, &m);
    m.mod_revision = done.mod_revision;
    mcr_migration_clear(&done);
    ck_assert_int_eq(mcr_fleet_migration_switch(&o, &m, &err), MCR_OK);
    wait_adopted(&x, 2);
    transition_of(x.router, &from, &to);
    ck_assert_uint_eq(from, 1);
    ck_assert_uint_eq(to, 2);
    wait_client(&o, "vh-1", m.id, MCR_MIGRATION_SWITCHED, 2);
    ck_assert_uint_eq(stats(&x).refused, 0);
    mcr_migration_clear(&m);
    unfollow(&x);
}
END_TEST

/* A migration switched, then rolled back as mcroute migrate --abort does
 * (a rollback record from the switched-to snapshot to the old servers at
 * epoch + 1, through copying, switched, aborted): nothing refused. */
START_TEST(test_rollback_passes)
{
    mcr_fleet_options o;
    mcr_migration m, back;
    follower x;
    mcr_error err = {0};
    uint64_t from = 0, to = 0;

    opts(&o, "val-rollback");
    ck_assert_uint_eq(fe_publish(&o, FOUR), 1);
    follow(&x, &o, "vb-1");
    plan(&o, FIVE, &m);
    put_phase(&o, &m, MCR_MIGRATION_PLANNED);
    put_phase(&o, &m, MCR_MIGRATION_COPYING);
    wait_kind(&x, MCR_FLEET_MIGRATION_SET, 1, "copying");
    ck_assert_int_eq(mcr_fleet_migration_switch(&o, &m, &err), MCR_OK);
    wait_adopted(&x, 2);
    wait_client(&o, "vb-1", m.id, MCR_MIGRATION_SWITCHED, 2);

    ck_assert_int_eq(mcr_fleet_migration_plan(&o, m.from, MCR_CHANGES_STATES, &back, &err),
                     MCR_OK);
    memcpy(back.id, m.id, sizeof(back.id));
    back.rollback = 1;
    back.mod_revision = m.mod_revision;
    put_phase(&o, &back, MCR_MIGRATION_COPYING);
    wait_kind(&x, MCR_FLEET_MIGRATION_SET, 2, "rollback copying");
    transition_of(x.router, &from, &to);
    ck_assert_uint_eq(from, 2);
    ck_assert_uint_eq(to, 3);
    ck_assert_int_eq(mcr_fleet_migration_switch(&o, &back, &err), MCR_OK);
    wait_adopted(&x, 3);
    wait_client(&o, "vb-1", m.id, MCR_MIGRATION_SWITCHED, 3);
    put_phase(&o, &back, MCR_MIGRATION_ABORTED);
    wait_kind(&x, MCR_FLEET_MIGRATION_CLEARED, 1, "aborted");
    wait_client(&o, "vb-1", m.id, MCR_MIGRATION_ABORTED, 3);
    ck_assert_uint_eq(stats(&x).refused, 0);
    mcr_migration_clear(&m);
    mcr_migration_clear(&back);
    unfollow(&x);
}
END_TEST

/* The pool changed during a migration (a state written by
 * publish_local_states, an operator's add): the records of the migration
 * already adopted go on being adopted (progress, abort; grace after a
 * change that followed the switch), not refused for a `from` or `to` that
 * is no longer the pool's snapshot. */
START_TEST(test_pool_moves_during)
{
    mcr_fleet_options o;
    mcr_migration m;
    follower x;
    mcr_error err = {0};

    opts(&o, "val-moves");
    ck_assert_uint_eq(fe_publish(&o, FOUR), 1);
    follow(&x, &o, "vm-1");
    plan(&o, FIVE, &m); /* 1 -> 2 */
    put_phase(&o, &m, MCR_MIGRATION_COPYING);
    wait_client(&o, "vm-1", m.id, MCR_MIGRATION_COPYING, 1);
    change(&o, "m2", 2, 2);
    wait_adopted(&x, 2);
    m.progress.copied = 10;
    put_phase(&o, &m, MCR_MIGRATION_COPYING);
    m.progress.copied = 20;
    put_phase(&o, &m, MCR_MIGRATION_COPYING);
    ck_assert_int_eq(mcr_fleet_migration_switch(&o, &m, &err), MCR_ERR_STALE);
    put_phase(&o, &m, MCR_MIGRATION_ABORTED);
    wait_client(&o, "vm-1", m.id, MCR_MIGRATION_ABORTED, 2);
    ck_assert_uint_eq(fe_count(&x.rec, MCR_FLEET_MIGRATION_CLEARED), 1);
    ck_assert_uint_eq(stats(&x).refused, 0);
    uint64_t rev = m.mod_revision;
    mcr_migration_clear(&m);

    /* the next one switched, then the pool changed, then grace and done */
    plan(&o, FIVE, &m); /* 2 -> 3 */
    m.mod_revision = rev;
    put_phase(&o, &m, MCR_MIGRATION_COPYING);
    wait_kind(&x, MCR_FLEET_MIGRATION_SET, 2, "second copying");
    ck_assert_int_eq(mcr_fleet_migration_switch(&o, &m, &err), MCR_OK);
    wait_adopted(&x, 3);
    change(&o, "m4", 4, 4);
    wait_adopted(&x, 4);
    put_phase(&o, &m, MCR_MIGRATION_GRACE);
    wait_client(&o, "vm-1", m.id, MCR_MIGRATION_GRACE, 4);
    put_phase(&o, &m, MCR_MIGRATION_DONE);
    wait_client(&o, "vm-1", m.id, MCR_MIGRATION_DONE, 4);
    ck_assert_uint_eq(fe_count(&x.rec, MCR_FLEET_MIGRATION_CLEARED), 2);
    ck_assert_uint_eq(stats(&x).refused, 0);
    mcr_migration_clear(&m);
    unfollow(&x);
}
END_TEST

/* A follower away during a whole migration (started from its cache file,
 * etcd down) reads the pool again when etcd is back: the record, switched
 * from an epoch it never held, is checked against the snapshot read with
 * it (the switch's `to`), not against the older one it held: adopted. */
START_TEST(test_resync_switched)
{
    es_cluster *c = es_start(1, "fleet-validate");
    char *dir = tu_tmpdir("fleet-validate");
    char path[512];
    mcr_fleet_options o;
    mcr_fleet_follow_options fo = {.retry_min_ms = 50, .retry_max_ms = 200};
    follower x;
    mcr_migration m;
    mcr_error err = {0};
    uint64_t from = 0, to = 0;

    ck_assert_msg(c != NULL, "es_start: %s", es_last_error());
    snprintf(path, sizeof(path), "%s/pool.snap", dir);
    fo.cache_file = path;
    fe_options(&o, es_endpoints(c), "val-resync");
    ck_assert_uint_eq(fe_publish(&o, FOUR), 1);
    ck_assert_int_eq(follow_try(&x, &o, "vy-1", &fo, &err), MCR_OK); /* caches epoch 1 */
    unfollow(&x);

    change(&o, "y2", 2, 2);
    plan(&o, FIVE, &m); /* 2 -> 3 */
    put_phase(&o, &m, MCR_MIGRATION_COPYING);
    ck_assert_int_eq(mcr_fleet_migration_switch(&o, &m, &err), MCR_OK);
    ck_assert_int_eq(es_stop_member(c, 0), 0);

    o.wait_ms = 800;
    int rc = follow_try(&x, &o, "vy-1", &fo, &err);
    ck_assert_msg(rc == MCR_OK, "%s (%s)", mcr_strerror(rc), err.message);
    ck_assert_msg(fe_wait_count(&x.rec, MCR_FLEET_CACHED, 1, SEE_MS), "no CACHED event");
    pthread_mutex_lock(&x.rec.mu);
    ck_assert_msg(strstr(x.rec.last_msg[MCR_FLEET_CACHED], "cached epoch 1") != NULL,
                  "CACHED: \"%s\"", x.rec.last_msg[MCR_FLEET_CACHED]);
    pthread_mutex_unlock(&x.rec.mu);
    ck_assert_msg(es_restart(c, 0) == 0, "restart: %s", es_last_error());
    wait_adopted(&x, 3);
    transition_of(x.router, &from, &to);
    ck_assert_uint_eq(from, 2);
    ck_assert_uint_eq(to, 3);
    wait_client(&o, "vy-1", m.id, MCR_MIGRATION_SWITCHED, 3);
    ck_assert_uint_eq(stats(&x).refused, 0);
    mcr_migration_clear(&m);
    unfollow(&x);
    es_free(c);
    tu_tmpdir_free(dir);
}
END_TEST

/* A watch that resumes after its member went away catches up on several
 * revisions in one response: a change, then a migration planned from it.
 * The record is checked against the pool as of its own revision (the
 * change adopted first), not refused against the snapshot before it. */
START_TEST(test_batched_catch_up)
{
    es_cluster *c = es_start(3, "fleet-validate3");
    mcr_fleet_options o, w;
    mcr_fleet_follow_options fo = {.retry_min_ms = 50, .retry_max_ms = 200, .no_register = 1};
    follower x;
    mcr_migration m;
    mcr_error err = {0};
    char eps12[256];

    ck_assert_msg(c != NULL, "es_start(3): %s", es_last_error());
    ck_assert_int_ge(es_leader(c, mcr_test_ms(15000)), 0);
    fe_options(&o, es_endpoint(c, 0), "val-batch");
    snprintf(eps12, sizeof(eps12), "%s,%s", es_endpoint(c, 1), es_endpoint(c, 2));
    fe_options(&w, eps12, "val-batch");
    ck_assert_uint_eq(fe_publish(&w, FOUR), 1);
    ck_assert_int_eq(follow_try(&x, &o, "vc-1", &fo, &err), MCR_OK);
    ck_assert_msg(fe_wait_count(&x.rec, MCR_FLEET_CONNECTED, 1, SEE_MS), "no watch");

    ck_assert_int_eq(es_stop_member(c, 0), 0);
    ck_assert_msg(fe_wait_count(&x.rec, MCR_FLEET_DISCONNECTED, 1, SEE_MS),
                  "the watch on the stopped member did not end");
    change(&w, "c2", 2, 2);
    plan(&w, FIVE, &m); /* from epoch 2 */
    put_phase(&w, &m, MCR_MIGRATION_PLANNED);
    ck_assert_msg(es_restart(c, 0) == 0, "restart m0: %s", es_last_error());
    wait_adopted(&x, 2);
    int64_t end = mcr_test_now_ms() + SEE_MS;
    while (stats(&x).migration_phase != MCR_MIGRATION_PLANNED && stats(&x).refused == 0 &&
           mcr_test_now_ms() < end)
        fe_nap();
    mcr_fleet_stats st = stats(&x);
    char msg[MCR_ERROR_MESSAGE_SIZE] = "";
    fe_last_msg(&x.rec, MCR_FLEET_REFUSED, msg, sizeof(msg));
    ck_assert_msg(st.migration_phase == MCR_MIGRATION_PLANNED && st.refused == 0,
                  "phase %s, %llu refused (%s)", mcr_migration_phase_name(st.migration_phase),
                  (unsigned long long)st.refused, msg);
    ck_assert_str_eq(st.migration_id, m.id);
    mcr_migration_clear(&m);
    unfollow(&x);
    es_free(c);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fleet_validate");
    const tu_case cases[] = {
        {"snapshot_params", test_snapshot_params},
        {"epoch_bounds", test_epoch_bounds},
        {"huge_epoch_repair", test_huge_epoch_repair},
        {"record_from_stale", test_record_from_stale},
        {"record_switched_stale", test_record_switched_stale},
        {"record_snapshots", test_record_snapshots},
        {"switch_first_heard", test_switch_first_heard},
        {"rollback_passes", test_rollback_passes},
        {"pool_moves_during", test_pool_moves_during},
        {"resync_switched", test_resync_switched},
        {"batched_catch_up", test_batched_catch_up},
    };
    tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]), 90, teardown);
    return s;
}

int main(void)
{
    return fe_main(suite(), 1, "fleet-validate");
}
