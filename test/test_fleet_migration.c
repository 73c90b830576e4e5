/* SPDX-License-Identifier: BSD-3-Clause */
/* test_fleet_migration.c: migration records against real etcd: planning, compare-and-swap writes, the switch as one transaction, the lock; followers adopting each phase (transition set at copying, in force at the switch, ended at done), recording it in their client keys, starting during a migration, refusing malformed records. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet_env.h"
#include "realserver.h"
#include "testutil.h"

/* How long a follower gets to see a change. */
#define SEE_MS mcr_test_ms(10000)

static void teardown(void)
{
    rs_stop_all();
}

static void opts(mcr_fleet_options *o, const char *pool)
{
    fe_options(o, es_endpoints(fe_cluster()), pool);
}

#define FOUR "10.8.0.1:11211,10.8.0.2:11211,10.8.0.3:11211,10.8.0.4:11211"
#define FIVE FOUR ",10.8.0.5:11211"

/* A plan from o's pool (created with FOUR) to the servers of `spec`. */
static void plan(const mcr_fleet_options *o, const char *spec, mcr_migration *m)
{
    mcr_error err = {0};
    mcr_config *cfg = fe_config(spec);
    mcr_snapshot *target = NULL;
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &target, &err), MCR_OK);
    mcr_config_free(cfg);
    int rc = mcr_fleet_migration_plan(o, target, 0, m, &err);
    mcr_snapshot_unref(target);
    ck_assert_msg(rc == MCR_OK, "plan: %s: %s", mcr_strerror(rc), err.message);
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

typedef struct follower {
    mcr_router *router;
    mcr_fleet *f;
    fe_rec rec;
} follower;

static void follow(follower *x, const mcr_fleet_options *o, const char *id)
{
    mcr_error err = {0};
    mcr_fleet_follow_options fo = {.client_id = id, .on_event = fe_on_event, .arg = &x->rec};
    memset(x, 0, sizeof(*x));
    fe_rec_init(&x->rec);
    ck_assert_int_eq(mcr_router_new(NULL, &x->router, &err), MCR_OK);
    int rc = mcr_fleet_follow(o, &fo, x->router, &x->f, &err);
    ck_assert_msg(rc == MCR_OK, "follow %s: %s: %s", o->pool, mcr_strerror(rc), err.message);
    fe_rec_start(&x->rec, mcr_router_epoch(x->router));
}

static void unfollow(follower *x)
{
    mcr_fleet_free(x->f);
    mcr_router_free(x->router);
    fe_rec_destroy(&x->rec);
    memset(x, 0, sizeof(*x));
}

/* Wait for the n-th event of `kind`. */
static void wait_kind(follower *x, mcr_fleet_event_kind kind, size_t n, const char *what)
{
    ck_assert_msg(fe_wait_count(&x->rec, kind, n, SEE_MS), "%s: event %d #%zu not within %d ms "
                  "(%zu so far)", what, (int)kind, n, SEE_MS, fe_count(&x->rec, kind));
}

/* Wait until client `id` shows migration `mid` in `phase` (and, when
 * epoch is not 0, that epoch). */
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
            (epoch == 0 || c.epoch == epoch))
            return;
        if (mcr_test_now_ms() >= end)
            break;
        fe_nap();
    }
    ck_abort_msg("client %s: %s, migration \"%s\" %s at epoch %llu; expected \"%s\" %s (epoch "
                 "%llu)",
                 id, got ? "registered" : "not registered", c.migration_id,
                 mcr_migration_phase_name(c.migration_phase), (unsigned long long)c.epoch, mid,
                 mcr_migration_phase_name(phase), (unsigned long long)epoch);
}

/* The router's transition: its epochs, or 0, 0 when it has none. */
static void transition_of(mcr_router *r, uint64_t *from, uint64_t *to, unsigned *flags)
{
    mcr_router_migration t;
    *from = *to = 0;
    if (mcr_router_get_migration(r, &t) == MCR_OK) {
        *from = mcr_snapshot_epoch(t.from);
        *to = mcr_snapshot_epoch(t.to);
        if (flags != NULL)
            *flags = t.flags;
        mcr_router_migration_clear(&t);
    }
}

/* ------------------------------------------------------------ the store */

START_TEST(test_plan_write_read)
{
    mcr_fleet_options o;
    mcr_migration m, r, other;
    mcr_error err = {0};

    opts(&o, "mig-rw");
    ck_assert_int_eq(mcr_fleet_migration_read(&o, &r, &err), MCR_ERR_EMPTY);
    ck_assert_msg(strstr(err.message, "no migration record") != NULL, "%s", err.message);
    /* no pool: nothing to plan from */
    mcr_config *cfg = fe_config(FIVE);
    mcr_snapshot *five = NULL;
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &five, &err), MCR_OK);
    mcr_config_free(cfg);
    ck_assert_int_eq(mcr_fleet_migration_plan(&o, five, 0, &m, &err), MCR_ERR_UNKNOWN);
    ck_assert_uint_eq(fe_publish(&o, FOUR), 1);
    ck_assert_int_eq(mcr_fleet_migration_plan(&o, five, 0x80, &m, &err), MCR_ERR_INVALID);
    mcr_snapshot_unref(five);

    plan(&o, FIVE, &m);
    ck_assert_int_eq(m.phase, MCR_MIGRATION_PLANNED);
    ck_assert_uint_eq(mcr_snapshot_epoch(m.from), 1);
    ck_assert_uint_eq(mcr_snapshot_epoch(m.to), 2);
    ck_assert_uint_eq(mcr_snapshot_server_count(m.to), 5);
    ck_assert_uint_eq(strlen(m.id), 16);
    ck_assert_uint_eq(m.mod_revision, 0);
    /* the same list: nothing to migrate */
    cfg = fe_config(FOUR);
    mcr_snapshot *four = NULL;
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &four, &err), MCR_OK);
    mcr_config_free(cfg);
    ck_assert_int_eq(mcr_fleet_migration_plan(&o, four, 0, &other, &err), MCR_ERR_EMPTY);
    ck_assert_msg(strstr(err.message, "nothing to migrate") != NULL, "%s", err.message);
    mcr_snapshot_unref(four);

    /* created, read back field for field */
    m.grace_ms = 1500;
    m.progress.moved = 7;
    m.progress.keys_per_s = 2.5;
    snprintf(m.message, sizeof(m.message), "planned by a test");
    put_phase(&o, &m, MCR_MIGRATION_PLANNED);
    ck_assert_uint_gt(m.mod_revision, 0);
    ck_assert_uint_gt(m.updated, 1700000000000ull);
    ck_assert_int_eq(mcr_fleet_migration_read(&o, &r, &err), MCR_OK);
    ck_assert_str_eq(r.id, m.id);
    ck_assert_int_eq(r.phase, MCR_MIGRATION_PLANNED);
    ck_assert_uint_eq(r.mod_revision, m.mod_revision);
    ck_assert_uint_eq(r.updated, m.updated);
    ck_assert_uint_eq(r.grace_ms, 1500);
    ck_assert_uint_eq(r.progress.moved, 7);
    ck_assert(r.progress.keys_per_s == 2.5);
    ck_assert_int_eq(r.warm, 1);
    ck_assert_int_eq(r.rollback, 0);
    ck_assert_str_eq(r.message, "planned by a test");
    ck_assert_str_eq(mcr_snapshot_checksum(r.to), mcr_snapshot_checksum(m.to));
    ck_assert_str_eq(mcr_snapshot_checksum(r.from), mcr_snapshot_checksum(m.from));

    /* a message cut inside a character is written with '?' for its bytes */
    snprintf(r.message, sizeof(r.message), "caf\xc3 \xe2\x82 ok \xc3\xa9");
    put_phase(&o, &r, MCR_MIGRATION_PLANNED);
    mcr_migration_clear(&other);
    ck_assert_int_eq(mcr_fleet_migration_read(&o, &other, &err), MCR_OK);
    ck_assert_str_eq(other.message, "caf? ?? ok \xc3\xa9");
    mcr_migration_clear(&other);
    m.mod_revision = r.mod_revision;
    m.phase = MCR_MIGRATION_PLANNED;

    /* compare-and-swap: a second creation, and a write from an old read,
     * are refused and change nothing */
    plan(&o, FIVE, &other);
    ck_assert_int_eq(mcr_fleet_migration_write(&o, &other, &err), MCR_ERR_STALE);
    ck_assert_msg(strstr(err.message, "exists already") != NULL, "%s", err.message);
    put_phase(&o, &r, MCR_MIGRATION_COPYING); /* r moves on */
    m.phase = MCR_MIGRATION_ABORTED;
    ck_assert_int_eq(mcr_fleet_migration_write(&o, &m, &err), MCR_ERR_STALE);
    ck_assert_msg(strstr(err.message, "changed since revision") != NULL, "%s", err.message);
    mcr_migration_clear(&other);
    ck_assert_int_eq(mcr_fleet_migration_read(&o, &other, &err), MCR_OK);
    ck_assert_int_eq(other.phase, MCR_MIGRATION_COPYING);
    ck_assert_uint_eq(other.mod_revision, r.mod_revision);

    /* an invalid record is not written */
    r.id[0] = 'X';
    ck_assert_int_eq(mcr_fleet_migration_write(&o, &r, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_fleet_migration_write(NULL, &r, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_fleet_migration_write(&o, NULL, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_fleet_migration_read(&o, NULL, &err), MCR_ERR_INVALID);
    ck_assert_str_eq(mcr_migration_phase_name(MCR_MIGRATION_GRACE), "grace");
    ck_assert_str_eq(mcr_migration_phase_name((mcr_migration_phase)42), "unknown");
    mcr_migration_clear(&m);
    mcr_migration_clear(&r);
    mcr_migration_clear(&other);
    mcr_migration_clear(NULL);
}
END_TEST

/* The switch: both keys in one transaction, guarded by both. */
START_TEST(test_switch)
{
    mcr_fleet_options o;
    mcr_migration m, r;
    mcr_error err = {0};
    uint64_t epoch = 0;
    long long rev0, rev1;

    opts(&o, "mig-sw");
    ck_assert_uint_eq(fe_publish(&o, FOUR), 1);
    plan(&o, FIVE, &m);
    put_phase(&o, &m, MCR_MIGRATION_COPYING);
    rev0 = es_revision(fe_cluster());
    ck_assert_int_eq(mcr_fleet_migration_switch(&o, &m, &err), MCR_OK);
    rev1 = es_revision(fe_cluster());
    ck_assert_int_eq(m.phase, MCR_MIGRATION_SWITCHED);
    ck_assert_int_eq(rev1, rev0 + 1); /* one revision: one transaction */
    ck_assert_uint_eq((unsigned long long)m.mod_revision, (unsigned long long)rev1);
    mcr_snapshot *p = fe_read(&o, NULL);
    ck_assert_uint_eq(mcr_snapshot_epoch(p), 2);
    ck_assert_str_eq(mcr_snapshot_checksum(p), mcr_snapshot_checksum(m.to));
    mcr_snapshot_unref(p);
    ck_assert_int_eq(mcr_fleet_migration_read(&o, &r, &err), MCR_OK);
    ck_assert_int_eq(r.phase, MCR_MIGRATION_SWITCHED);
    ck_assert_uint_eq(r.mod_revision, m.mod_revision);
    /* again (a resumed run): nothing written, MCR_OK */
    r.phase = MCR_MIGRATION_COPYING;
    ck_assert_int_eq(mcr_fleet_migration_switch(&o, &r, &err), MCR_OK);
    ck_assert_int_eq(es_revision(fe_cluster()), rev1);
    ck_assert_int_eq(r.phase, MCR_MIGRATION_SWITCHED);
    mcr_migration_clear(&r);
    mcr_migration_clear(&m);

    /* a pool changed during the migration: refused, nothing written */
    opts(&o, "mig-sw2");
    ck_assert_uint_eq(fe_publish(&o, FOUR), 1);
    plan(&o, FIVE, &m);
    put_phase(&o, &m, MCR_MIGRATION_COPYING);
    ck_assert_int_eq(fe_add(&o, "late", "10.8.9.9", 11211, &epoch, &err), MCR_OK);
    rev0 = es_revision(fe_cluster());
    ck_assert_int_eq(mcr_fleet_migration_switch(&o, &m, &err), MCR_ERR_STALE);
    ck_assert_msg(strstr(err.message, "changed during the migration") != NULL, "%s", err.message);
    ck_assert_int_eq(es_revision(fe_cluster()), rev0);
    ck_assert_int_eq(mcr_fleet_migration_read(&o, &r, &err), MCR_OK);
    ck_assert_int_eq(r.phase, MCR_MIGRATION_COPYING);
    mcr_migration_clear(&r);
    /* the record changed meanwhile (another writer): refused too */
    opts(&o, "mig-sw3");
    ck_assert_uint_eq(fe_publish(&o, FOUR), 1);
    mcr_migration_clear(&m);
    plan(&o, FIVE, &m);
    put_phase(&o, &m, MCR_MIGRATION_COPYING);
    ck_assert_int_eq(mcr_fleet_migration_read(&o, &r, &err), MCR_OK);
    put_phase(&o, &r, MCR_MIGRATION_COPYING); /* a progress write of another run */
    ck_assert_int_eq(mcr_fleet_migration_switch(&o, &m, &err), MCR_ERR_STALE);
    ck_assert_msg(strstr(err.message, "changed since revision") != NULL, "%s", err.message);
    ck_assert_uint_eq(fe_epoch(&o), 1);
    mcr_migration_clear(&r);
    mcr_migration_clear(&m);
}
END_TEST

/* The first endpoint loses the reply of every transaction (etcd did it):
 * each write is recognised as ours at the next attempt, on the member. */
START_TEST(test_reply_lost)
{
    es_cluster *c = fe_cluster();
    const char *ep = es_endpoint(c, 0);
    fe_proxy *px = fe_proxy_start(atoi(strrchr(ep, ':') + 1), "POST /v3/kv/txn");
    mcr_fleet_options o, direct;
    mcr_migration m, r;
    mcr_error err = {0};
    char eps[256];

    opts(&direct, "mig-lost");
    ck_assert_uint_eq(fe_publish(&direct, FOUR), 1);
    snprintf(eps, sizeof(eps), "127.0.0.1:%d,%s", fe_proxy_port(px), ep);
    fe_options(&o, eps, "mig-lost");
    plan(&direct, FIVE, &m);
    m.phase = MCR_MIGRATION_PLANNED;
    int rc = mcr_fleet_migration_write(&o, &m, &err);
    ck_assert_msg(rc == MCR_OK, "creation whose reply was lost: %s", err.message);
    ck_assert_int_eq(fe_proxy_dropped(px), 1);
    m.phase = MCR_MIGRATION_COPYING;
    rc = mcr_fleet_migration_write(&o, &m, &err);
    ck_assert_msg(rc == MCR_OK, "update whose reply was lost: %s", err.message);
    ck_assert_int_eq(fe_proxy_dropped(px), 2);
    ck_assert_int_eq(mcr_fleet_migration_read(&direct, &r, &err), MCR_OK);
    ck_assert_int_eq(r.phase, MCR_MIGRATION_COPYING);
    ck_assert_uint_eq(r.mod_revision, m.mod_revision);
    mcr_migration_clear(&r);
    rc = mcr_fleet_migration_switch(&o, &m, &err);
    ck_assert_msg(rc == MCR_OK, "switch whose reply was lost: %s", err.message);
    ck_assert_int_eq(fe_proxy_dropped(px), 3);
    ck_assert_uint_eq(fe_epoch(&direct), 2);
    ck_assert_int_eq(mcr_fleet_migration_read(&direct, &r, &err), MCR_OK);
    ck_assert_int_eq(r.phase, MCR_MIGRATION_SWITCHED);
    ck_assert_uint_eq(r.mod_revision, m.mod_revision);
    mcr_migration_clear(&r);
    mcr_fleet_lock *l = NULL;
    rc = mcr_fleet_migration_lock(&o, "lost", 2, &l, &err);
    ck_assert_msg(rc == MCR_OK, "lock whose reply was lost: %s", err.message);
    ck_assert_int_eq(fe_proxy_dropped(px), 4);
    mcr_fleet_migration_unlock(l);
    mcr_migration_clear(&m);
    fe_proxy_stop(px);
}
END_TEST

START_TEST(test_lock)
{
    mcr_fleet_options o;
    mcr_fleet_lock *a = NULL, *b = NULL;
    mcr_error err = {0};

    opts(&o, "mig-lock");
    ck_assert_int_eq(mcr_fleet_migration_lock(&o, "run one", 2, &a, &err), MCR_OK);
    char *v = es_get(fe_cluster(), "/mcroute/pools/mig-lock/migration-lock");
    ck_assert_msg(v != NULL && strcmp(v, "run one") == 0, "lock value %s", v ? v : es_last_error());
    free(v);
    ck_assert_int_eq(mcr_fleet_migration_lock(&o, "run two", 2, &b, &err), MCR_ERR_BUSY);
    ck_assert_msg(strstr(err.message, "\"run one\"") != NULL, "%s", err.message);
    ck_assert_ptr_null(b);
    /* kept alive past its lease of 2 s: observed over 4 s */
    int64_t end = mcr_test_now_ms() + 4000;
    while (mcr_test_now_ms() < end) {
        v = es_get(fe_cluster(), "/mcroute/pools/mig-lock/migration-lock");
        ck_assert_msg(v != NULL, "the lock lapsed while held");
        free(v);
        fe_nap();
    }
    mcr_fleet_migration_unlock(a);
    ck_assert_int_eq(mcr_fleet_migration_lock(&o, NULL, 0, &b, &err), MCR_OK);
    mcr_fleet_migration_unlock(b);
    mcr_fleet_migration_unlock(NULL);
    ck_assert_int_eq(mcr_fleet_migration_lock(&o, "", 0, &b, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_fleet_migration_lock(&o, "x", 1, &b, &err), MCR_ERR_INVALID);
}
END_TEST

/* ------------------------------------------------------------ followers */

/* A hook that notes, when the migration's `to` epoch is published, whether
 * the router already held the transition to it. */
typedef struct switch_probe {
    mcr_router *router;
    uint64_t to_epoch;
    int seen;         /* `to` was published */
    int with;         /* ... with the transition in place */
} switch_probe;

static void probe_hook(const mcr_snapshot *old_snap, const mcr_snapshot *new_snap,
                       const mcr_diff *diff, void *arg)
{
    (void)old_snap;
    (void)diff;
    switch_probe *p = arg;
    if (new_snap == NULL || mcr_snapshot_epoch(new_snap) != p->to_epoch)
        return;
    uint64_t from = 0, to = 0;
    transition_of(p->router, &from, &to, NULL);
    __atomic_store_n(&p->with, to == p->to_epoch, __ATOMIC_SEQ_CST);
    __atomic_store_n(&p->seen, 1, __ATOMIC_SEQ_CST);
}

START_TEST(test_follower_phases)
{
    mcr_fleet_options o;
    mcr_migration m;
    follower x;
    uint64_t from = 0, to = 0;
    unsigned flags = 99;
    mcr_fleet_stats st;

    opts(&o, "mig-follow");
    ck_assert_uint_eq(fe_publish(&o, FOUR), 1);
    follow(&x, &o, "mf-1");
    mcr_fleet_get_stats(x.f, &st);
    ck_assert_int_eq(st.migration_phase, MCR_MIGRATION_NONE);
    switch_probe probe = {x.router, 2, 0, 0};
    ck_assert_int_eq(mcr_router_add_hook(x.router, probe_hook, &probe), MCR_OK);

    plan(&o, FIVE, &m);
    put_phase(&o, &m, MCR_MIGRATION_PLANNED);
    wait_client(&o, "mf-1", m.id, MCR_MIGRATION_PLANNED, 1);
    transition_of(x.router, &from, &to, NULL);
    ck_assert_uint_eq(to, 0); /* planned: nothing set */

    /* copying: the migration set (the record's "warm" ignored) */
    put_phase(&o, &m, MCR_MIGRATION_COPYING);
    wait_kind(&x, MCR_FLEET_MIGRATION_SET, 1, "copying");
    transition_of(x.router, &from, &to, &flags);
    ck_assert_uint_eq(from, 1);
    ck_assert_uint_eq(to, 2);
    ck_assert_uint_eq(flags, 0);
    wait_client(&o, "mf-1", m.id, MCR_MIGRATION_COPYING, 1);
    mcr_fleet_get_stats(x.f, &st);
    ck_assert_uint_eq(st.migrations_set, 1);
    ck_assert_int_eq(st.migration_phase, MCR_MIGRATION_COPYING);
    ck_assert_str_eq(st.migration_id, m.id);

    /* progress updates do not set it again */
    for (int i = 1; i <= 3; i++) {
        m.progress.copied = (uint64_t)i * 100;
        put_phase(&o, &m, MCR_MIGRATION_COPYING);
    }
    /* the switch: the snapshot `to` adopted with the transition in place */
    mcr_error err = {0};
    ck_assert_int_eq(mcr_fleet_migration_switch(&o, &m, &err), MCR_OK);
    ck_assert_msg(fe_wait_adopted(&x.rec, 2, SEE_MS), "epoch 2 not adopted");
    ck_assert_int_eq(__atomic_load_n(&probe.seen, __ATOMIC_SEQ_CST), 1);
    ck_assert_msg(__atomic_load_n(&probe.with, __ATOMIC_SEQ_CST) == 1,
                  "epoch 2 was published before its transition was set");
    wait_client(&o, "mf-1", m.id, MCR_MIGRATION_SWITCHED, 2);
    ck_assert_uint_eq(fe_count(&x.rec, MCR_FLEET_MIGRATION_SET), 1);
    mcr_router_migration t;
    ck_assert_int_eq(mcr_router_get_migration(x.router, &t), MCR_OK);
    ck_assert_int_eq(mcr_migration_phase_at(&t, mcr_router_epoch(x.router)),
                     MCR_MIGRATION_SWITCHED);
    mcr_router_migration_clear(&t);

    put_phase(&o, &m, MCR_MIGRATION_GRACE);
    wait_client(&o, "mf-1", m.id, MCR_MIGRATION_GRACE, 2);
    transition_of(x.router, &from, &to, NULL);
    ck_assert_uint_eq(to, 2);
    ck_assert_uint_eq(fe_count(&x.rec, MCR_FLEET_MIGRATION_SET), 1);
    ck_assert_uint_eq(fe_count(&x.rec, MCR_FLEET_MIGRATION_CLEARED), 0);

    /* done: ended */
    put_phase(&o, &m, MCR_MIGRATION_DONE);
    wait_kind(&x, MCR_FLEET_MIGRATION_CLEARED, 1, "done");
    transition_of(x.router, &from, &to, NULL);
    ck_assert_uint_eq(to, 0);
    wait_client(&o, "mf-1", m.id, MCR_MIGRATION_DONE, 2);
    mcr_fleet_get_stats(x.f, &st);
    ck_assert_uint_eq(st.migrations_set, 1);
    ck_assert_uint_eq(st.migrations_cleared, 1);
    ck_assert_uint_eq(st.refused, 0);
    ck_assert_uint_eq(st.epoch, 2);
    mcr_router_remove_hook(x.router, probe_hook, &probe);
    unfollow(&x);
    mcr_migration_clear(&m);
}
END_TEST

/* A follower that first hears of the transition in the switch's own
 * transaction (the record planned, then switched: both keys in one
 * revision, the snapshot's put first) still sets it before it adopts the
 * snapshot. */
START_TEST(test_switch_one_event)
{
    mcr_fleet_options o;
    mcr_migration m;
    follower x;
    mcr_error err = {0};

    opts(&o, "mig-one");
    ck_assert_uint_eq(fe_publish(&o, FOUR), 1);
    follow(&x, &o, "mo-1");
    switch_probe probe = {x.router, 2, 0, 0};
    ck_assert_int_eq(mcr_router_add_hook(x.router, probe_hook, &probe), MCR_OK);
    plan(&o, FIVE, &m);
    put_phase(&o, &m, MCR_MIGRATION_PLANNED);
    wait_client(&o, "mo-1", m.id, MCR_MIGRATION_PLANNED, 1);
    ck_assert_int_eq(mcr_fleet_migration_switch(&o, &m, &err), MCR_OK);
    ck_assert_msg(fe_wait_adopted(&x.rec, 2, SEE_MS), "epoch 2 not adopted");
    ck_assert_int_eq(__atomic_load_n(&probe.seen, __ATOMIC_SEQ_CST), 1);
    ck_assert_msg(__atomic_load_n(&probe.with, __ATOMIC_SEQ_CST) == 1,
                  "epoch 2 was published before its transition was set");
    ck_assert_uint_eq(fe_count(&x.rec, MCR_FLEET_MIGRATION_SET), 1);
    wait_client(&o, "mo-1", m.id, MCR_MIGRATION_SWITCHED, 2);
    mcr_router_remove_hook(x.router, probe_hook, &probe);
    unfollow(&x);
    mcr_migration_clear(&m);
}
END_TEST

/* A follower that starts during a migration reads through it at once;
 * an abort and a deleted record end it. */
START_TEST(test_start_during)
{
    mcr_fleet_options o;
    mcr_migration m;
    follower x, y;
    uint64_t from = 0, to = 0;

    opts(&o, "mig-start");
    ck_assert_uint_eq(fe_publish(&o, FOUR), 1);
    plan(&o, FIVE, &m);
    m.warm = 0;
    put_phase(&o, &m, MCR_MIGRATION_COPYING);
    follow(&x, &o, "ms-1");
    unsigned flags = 99;
    transition_of(x.router, &from, &to, &flags);
    ck_assert_uint_eq(from, 1);
    ck_assert_uint_eq(to, 2);
    ck_assert_uint_eq(flags, 0); /* not warm */
    wait_client(&o, "ms-1", m.id, MCR_MIGRATION_COPYING, 1);
    /* registered with its phase before mcr_fleet_follow returned */
    mcr_fleet_stats st;
    mcr_fleet_get_stats(x.f, &st);
    ck_assert_uint_eq(st.migrations_set, 1);
    wait_kind(&x, MCR_FLEET_MIGRATION_SET, 1, "held start event");

    put_phase(&o, &m, MCR_MIGRATION_ABORTED);
    wait_kind(&x, MCR_FLEET_MIGRATION_CLEARED, 1, "aborted");
    transition_of(x.router, &from, &to, NULL);
    ck_assert_uint_eq(to, 0);
    wait_client(&o, "ms-1", m.id, MCR_MIGRATION_ABORTED, 1);

    /* after the switch, a new follower starts at `to` in switched */
    mcr_migration_clear(&m);
    plan(&o, FIVE, &m);
    mcr_migration old;
    mcr_error err = {0};
    ck_assert_int_eq(mcr_fleet_migration_read(&o, &old, &err), MCR_OK);
    m.mod_revision = old.mod_revision; /* over the finished one */
    mcr_migration_clear(&old);
    put_phase(&o, &m, MCR_MIGRATION_COPYING);
    wait_kind(&x, MCR_FLEET_MIGRATION_SET, 2, "a second migration");
    ck_assert_int_eq(mcr_fleet_migration_switch(&o, &m, &err), MCR_OK);
    follow(&y, &o, "ms-2");
    ck_assert_uint_eq(mcr_router_epoch(y.router), 2);
    transition_of(y.router, &from, &to, NULL);
    ck_assert_uint_eq(to, 2);
    wait_client(&o, "ms-2", m.id, MCR_MIGRATION_SWITCHED, 2);
    wait_client(&o, "ms-1", m.id, MCR_MIGRATION_SWITCHED, 2);

    /* the record deleted: ended everywhere, the clients say none */
    ck_assert_msg(es_ctl(fe_cluster(), NULL, "del", "/mcroute/pools/mig-start/migration", NULL) ==
                      0,
                  "etcdctl del");
    wait_kind(&y, MCR_FLEET_MIGRATION_CLEARED, 1, "deleted (y)");
    wait_kind(&x, MCR_FLEET_MIGRATION_CLEARED, 2, "deleted (x)");
    transition_of(y.router, &from, &to, NULL);
    ck_assert_uint_eq(to, 0);
    wait_client(&o, "ms-2", "", MCR_MIGRATION_NONE, 2);
    unfollow(&y);
    unfollow(&x);
    mcr_migration_clear(&m);
}
END_TEST

/* Malformed records: refused, the transition kept. */
START_TEST(test_bad_records)
{
    mcr_fleet_options o;
    mcr_migration m;
    follower x;
    uint64_t from = 0, to = 0;
    mcr_error err = {0};
    const char *key = "/mcroute/pools/mig-bad/migration";

    opts(&o, "mig-bad");
    ck_assert_uint_eq(fe_publish(&o, FOUR), 1);
    plan(&o, FIVE, &m);
    put_phase(&o, &m, MCR_MIGRATION_COPYING);
    follow(&x, &o, "mb-1");
    char *good = es_get(fe_cluster(), key);
    ck_assert_ptr_nonnull(good);

    /* variations of the good record, each with what the refusal names */
    struct {
        const char *from, *to, *says;
    } edits[] = {
        {"\"phase\":\"copying\"", "\"phase\":\"copyin\"", "field \"phase\": \"copyin\""},
        {"\"warm\":true", "\"warm\":1", "field \"warm\""},
        {"\"message\":\"\"", "\"message\":\"\",\"extra\":1", "unknown field \"extra\""},
        {"\"to_epoch\":2", "\"to_epoch\":1", "to_epoch"},
        {"\"backlog\":0", "\"backlog\":-3", "field \"backlog\""},
        {"\"id\":\"", "\"id\":\"Z", "field \"id\""},
        {"checksum ", "checksum 0", "field \"to\""},
        {"\"grace_ms\":0,", "", "no field \"grace_ms\""},
        {"{", "[", "not JSON"},
    };
    size_t n = sizeof(edits) / sizeof(edits[0]);
    for (size_t i = 0; i < n; i++) {
        char *p = strstr(good, edits[i].from);
        ck_assert_msg(p != NULL, "edit %zu: \"%s\" not in the record", i, edits[i].from);
        if (i == 6) /* the second snapshot's checksum: the "to" text */
            p = strstr(strstr(good, "\"to\":"), edits[i].from);
        size_t gl = strlen(good), fl = strlen(edits[i].from), tl = strlen(edits[i].to);
        char *bad = malloc(gl - fl + tl + 1);
        memcpy(bad, good, (size_t)(p - good));
        memcpy(bad + (p - good), edits[i].to, tl);
        memcpy(bad + (p - good) + tl, p + fl, gl - (size_t)(p - good) - fl + 1);
        ck_assert_msg(es_put(fe_cluster(), key, bad) == 0, "es_put: %s", es_last_error());
        free(bad);
        ck_assert_msg(fe_wait_count(&x.rec, MCR_FLEET_REFUSED, i + 1, SEE_MS),
                      "edit %zu not refused", i);
        char msg[MCR_ERROR_MESSAGE_SIZE];
        fe_last_msg(&x.rec, MCR_FLEET_REFUSED, msg, sizeof(msg));
        ck_assert_msg(strstr(msg, edits[i].says) != NULL && strstr(msg, key) != NULL,
                      "edit %zu: refused with \"%s\", not naming %s and \"%s\"", i, msg, key,
                      edits[i].says);
        transition_of(x.router, &from, &to, NULL);
        ck_assert_msg(from == 1 && to == 2, "edit %zu: transition now %llu -> %llu", i,
                      (unsigned long long)from, (unsigned long long)to);
        /* the blocking read refuses it the same way */
        mcr_migration r;
        ck_assert_int_ne(mcr_fleet_migration_read(&o, &r, &err), MCR_OK);
    }
    ck_assert_uint_eq(fe_count(&x.rec, MCR_FLEET_MIGRATION_CLEARED), 0);
    mcr_fleet_stats st;
    mcr_fleet_get_stats(x.f, &st);
    ck_assert_uint_eq(st.refused, n);
    ck_assert_uint_eq(st.migrations_set, 1);
    ck_assert_int_eq(st.migration_phase, MCR_MIGRATION_COPYING);
    free(good);
    unfollow(&x);
    mcr_migration_clear(&m);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fleet_migration");
    const tu_case cases[] = {
        {"plan_write_read", test_plan_write_read},
        {"switch", test_switch},
        {"reply_lost", test_reply_lost},
        {"lock", test_lock},
        {"follower_phases", test_follower_phases},
        {"switch_one_event", test_switch_one_event},
        {"start_during", test_start_during},
        {"bad_records", test_bad_records},
    };
    tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]), 90, teardown);
    return s;
}

int main(void)
{
    return fe_main(suite(), 1, "fleet-migration");
}
