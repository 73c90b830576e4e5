/* SPDX-License-Identifier: BSD-3-Clause */
/* test_router.c: Check suite of the router (publish, apply, hooks, thread caches, lock-free readers under a publish storm); the file watcher's is test_watcher.c. */
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
#include "snapshot/snapshot.h" /* refs: what keeps a snapshot alive, read by the thread-cache tests */
#include "router_count.h"
#include "testutil.h"

/* The bound of changes awaiting reclamation (mcroute_router.h: 256). */
#define RETIRED_MAX 256u
#include "testutil_config.h"
#include "test_router_util.h"

/* ------------------------------------------------------------ router basics */

START_TEST(empty_router)
{
    mcr_router *r = router_of(NULL);
    mcr_route route;
    hook_log h = {0};
    mcr_error err = {0};
    mcr_changes *ch = changes_add("10.0.0.1", 11211, 1);

    ck_assert_ptr_null(mcr_router_acquire(r));
    mcr_router_release(r, NULL);
    ck_assert_int_eq(mcr_router_locate(r, "k", 1, &route), MCR_ERR_EMPTY);
    ck_assert_ptr_null(mcr_router_current(r));
    ck_assert_uint_eq(mcr_router_epoch(r), 0);
    ck_assert_int_eq(mcr_router_apply(r, ch, 0, &err), MCR_ERR_EMPTY);
    ck_assert_int_eq(err.code, MCR_ERR_EMPTY);

    /* The first publish: any epoch; hooks see no old snapshot and no diff. */
    ck_assert_int_eq(mcr_router_add_hook(r, log_hook, &h), MCR_OK);
    mcr_snapshot *s = snap_of("10.0.0.1,10.0.0.2", MCR_MODE_KETAMA, 7);
    ck_assert_int_eq(mcr_router_publish(r, s, NULL), MCR_OK);
    mcr_snapshot_unref(s); /* the router keeps its own reference */
    ck_assert_int_eq(h.calls, 1);
    ck_assert_int_eq(h.null_old, 1);
    ck_assert_int_eq(h.bad, 0);
    ck_assert_uint_eq(mcr_router_epoch(r), 7);
    ck_assert_int_eq(mcr_router_locate(r, "k", 1, &route), MCR_OK);
    ck_assert_uint_eq(route.epoch, 7);
    ck_assert_uint_lt(route.index, 2);
    ck_assert(strcmp(route.host, "10.0.0.1") == 0 || strcmp(route.host, "10.0.0.2") == 0);
    ck_assert_int_eq(route.port, 11211);

    /* NULL arguments. */
    ck_assert_int_eq(mcr_router_new(NULL, NULL, NULL), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_router_publish(NULL, NULL, NULL), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_router_publish(r, NULL, NULL), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_router_apply(r, NULL, 0, NULL), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_router_locate(r, NULL, 3, &route), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_router_locate(r, "k", 1, NULL), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_router_add_hook(r, NULL, NULL), MCR_ERR_INVALID);
    ck_assert_ptr_null(mcr_router_current(NULL));
    ck_assert_uint_eq(mcr_router_epoch(NULL), 0);
    mcr_router_free(NULL);

    /* Flags: unknown ones, and the reclaim modes that do not combine. */
    ck_assert_int_eq(mcr_router_apply(r, ch, 8, &err), MCR_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "unknown flags 0x8"));
    ck_assert_int_eq(mcr_router_set_local_state(r, "x", MCR_STATE_DOWN, 2, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_router_clear_local_state(r, "x", 16, &err), MCR_ERR_INVALID);
    size_t pending = 99;
    ck_assert_int_eq(mcr_router_reclaim(r, 8, &pending), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_router_reclaim(r, MCR_ROUTER_NOWAIT | MCR_ROUTER_PEEK, &pending),
                     MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_router_reclaim(NULL, 0, &pending), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_router_reclaim(NULL, MCR_ROUTER_PEEK, &pending), MCR_ERR_INVALID);
    ck_assert_uint_eq(pending, 99); /* nothing done */
    ck_assert_int_eq(mcr_router_reclaim(NULL, MCR_ROUTER_FLUSH_THREAD, &pending), MCR_OK);
    ck_assert_uint_eq(pending, 0);
    ck_assert_int_eq(mcr_router_reclaim(r, MCR_ROUTER_PEEK | MCR_ROUTER_FLUSH_THREAD, NULL),
                     MCR_OK);
    /* inside a section: only the calls that neither wait nor flush */
    ck_assert_ptr_nonnull(mcr_router_acquire(r));
    ck_assert_int_eq(mcr_router_reclaim(r, 0, NULL), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_router_reclaim(r, MCR_ROUTER_NOWAIT | MCR_ROUTER_FLUSH_THREAD, NULL),
                     MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_router_reclaim(r, MCR_ROUTER_NOWAIT, &pending), MCR_OK);
    ck_assert_int_eq(mcr_router_reclaim(r, MCR_ROUTER_PEEK, &pending), MCR_OK);
    mcr_router_release(r, NULL);

    mcr_changes_free(ch);
    mcr_router_free(r);
}
END_TEST

START_TEST(publish_and_apply)
{
    mcr_snapshot *s1 = snap_of("10.0.0.1,10.0.0.2,10.0.0.3", MCR_MODE_KETAMA, 1);
    mcr_router *r = router_of(s1);
    hook_log h = {0};
    mcr_error err = {0};

    ck_assert_int_eq(mcr_router_add_hook(r, log_hook, &h), MCR_OK);

    /* apply: epoch + 1, one hook call with (old, new, diff). */
    mcr_changes *add = changes_add("10.0.0.4", 11211, 1);
    ck_assert_msg(mcr_router_apply(r, add, 0, &err) == MCR_OK, "%s", err.message);
    ck_assert_uint_eq(mcr_router_epoch(r), 2);
    ck_assert_int_eq(h.calls, 1);
    ck_assert_int_eq(h.bad, 0);
    ck_assert_uint_eq(h.last_old, 1);
    ck_assert_uint_eq(h.last_new, 2);
    ck_assert(h.last_moved > 0.0 && h.last_moved < 0.6);

    /* The same add again: a duplicate, nothing published. */
    ck_assert_int_eq(mcr_router_apply(r, add, 0, &err), MCR_ERR_DUPLICATE);
    ck_assert_uint_eq(mcr_router_epoch(r), 2);
    ck_assert_int_eq(h.calls, 1);
    mcr_changes_free(add);

    /* Unknown id: refused. */
    mcr_changes *ch = mcr_changes_new();
    ck_assert_int_eq(mcr_changes_remove(ch, "10.9.9.9:11211", NULL), MCR_OK);
    ck_assert_int_eq(mcr_router_apply(r, ch, 0, &err), MCR_ERR_UNKNOWN);
    mcr_changes_free(ch);

    /* A batch leaving no active server: refused, nothing published. */
    ch = mcr_changes_new();
    ck_assert_int_eq(mcr_changes_remove(ch, "10.0.0.1:11211", NULL), MCR_OK);
    ck_assert_int_eq(mcr_changes_set_state(ch, "10.0.0.2:11211", MCR_STATE_DOWN, NULL), MCR_OK);
    ck_assert_int_eq(mcr_changes_set_state(ch, "10.0.0.3:11211", MCR_STATE_DRAINING, NULL),
                     MCR_OK);
    ck_assert_int_eq(mcr_changes_remove(ch, "10.0.0.4:11211", NULL), MCR_OK);
    ck_assert_int_eq(mcr_router_apply(r, ch, 0, &err), MCR_ERR_EMPTY);
    ck_assert_uint_eq(mcr_router_epoch(r), 2);
    ck_assert_int_eq(h.calls, 1);
    mcr_changes_free(ch);

    /* Stale publishes: the current epoch again, and an older one. */
    mcr_snapshot *cur = mcr_router_current(r);
    ck_assert_int_eq(mcr_router_publish(r, cur, &err), MCR_ERR_STALE);
    ck_assert_ptr_nonnull(strstr(err.message, "stale"));
    ck_assert_int_eq(mcr_router_publish(r, s1, &err), MCR_ERR_STALE);
    ck_assert_uint_eq(mcr_router_epoch(r), 2);
    ck_assert_int_eq(h.calls, 1);

    /* A publish with a jump in epochs is fine. */
    mcr_snapshot *s9 = snap_of("10.0.0.7", MCR_MODE_KETAMA, 9);
    ck_assert_int_eq(mcr_router_publish(r, s9, &err), MCR_OK);
    ck_assert_uint_eq(mcr_router_epoch(r), 9);
    ck_assert_int_eq(h.calls, 2);
    ck_assert_uint_eq(h.last_old, 2);
    ck_assert_uint_eq(h.last_new, 9);

    /* A reference taken before stays usable after the router dropped it. */
    ck_assert_uint_eq(mcr_snapshot_epoch(cur), 2);
    ck_assert_uint_eq(mcr_snapshot_server_count(cur), 4);
    ck_assert_uint_lt(mcr_snapshot_locate(cur, "key", 3), 4);

    /* Snapshots that cannot be compared (another key hash) are published
     * all the same; the hooks get no diff. */
    mcr_config *fnv = mcr_config_new();
    mcr_snapshot *s10 = NULL;
    ck_assert_int_eq(mcr_config_set_mode(fnv, MCR_MODE_CONSISTENT), MCR_OK);
    ck_assert_int_eq(mcr_config_set_hash(fnv, MCR_HASH_FNV1A_32), MCR_OK);
    ck_assert_int_eq(mcr_config_add_servers(fnv, "10.0.0.7", NULL), MCR_OK);
    ck_assert_int_eq(mcr_snapshot_new(fnv, 10, &s10, NULL), MCR_OK);
    ck_assert_int_eq(mcr_router_publish(r, s10, &err), MCR_OK);
    ck_assert_int_eq(h.calls, 3);
    ck_assert_int_eq(h.null_diff, 1);
    ck_assert_int_eq(h.bad, 0);
    ck_assert_uint_eq(h.last_old, 9);
    ck_assert_uint_eq(h.last_new, 10);
    mcr_snapshot_unref(s10);
    mcr_config_free(fnv);

    /* Hooks removed are not called. */
    ck_assert_int_eq(mcr_router_remove_hook(r, log_hook, &h), MCR_OK);
    ck_assert_int_eq(mcr_router_remove_hook(r, log_hook, &h), MCR_ERR_UNKNOWN);
    add = changes_add("10.0.0.8", 11211, 2);
    ck_assert_int_eq(mcr_router_apply(r, add, 0, &err), MCR_OK);
    ck_assert_int_eq(h.calls, 3);
    mcr_changes_free(add);

    mcr_snapshot_unref(cur);
    mcr_snapshot_unref(s9);
    mcr_snapshot_unref(s1);
    mcr_router_free(r);
}
END_TEST

/* A batch under one acquire sees one snapshot, even across a publish. */
START_TEST(acquire_holds_one_snapshot)
{
    mcr_snapshot *s1 = snap_of("10.0.0.1,10.0.0.2", MCR_MODE_KETAMA, 1);
    mcr_router *r = router_of(s1);
    mcr_error err = {0};

    const mcr_snapshot *held = mcr_router_acquire(r);
    ck_assert_ptr_eq(held, s1);
    /* A publish from this thread now would wait for itself: refused. */
    mcr_snapshot *s2 = snap_of("10.0.0.3", MCR_MODE_KETAMA, 2);
    ck_assert_int_eq(mcr_router_publish(r, s2, &err), MCR_ERR_INVALID);
    mcr_changes *add = changes_add("10.0.0.4", 11211, 1);
    ck_assert_int_eq(mcr_router_apply(r, add, 0, &err), MCR_ERR_INVALID);
    /* Nested sections are fine. */
    const mcr_snapshot *inner = mcr_router_acquire(r);
    ck_assert_ptr_eq(inner, held);
    mcr_router_release(r, inner);
    ck_assert_uint_eq(mcr_snapshot_epoch(held), 1);
    mcr_router_release(r, held);

    ck_assert_int_eq(mcr_router_publish(r, s2, &err), MCR_OK);
    ck_assert_uint_eq(mcr_router_epoch(r), 2);
    ck_assert_uint_eq(mcr_snapshot_epoch(s1), 1); /* our own reference */

    mcr_changes_free(add);
    mcr_snapshot_unref(s1);
    mcr_snapshot_unref(s2);
    mcr_router_free(r);
}
END_TEST

/* Hooks must not change the router that calls them: detected, not a
 * deadlock. Another router is fine. */
typedef struct reentry {
    mcr_router *self, *other;
    int publish_rc, apply_rc, add_hook_rc, remove_hook_rc, other_rc;
    int calls;
    uint64_t other_epoch;
} reentry;

static void noop_hook(const mcr_snapshot *o, const mcr_snapshot *n, const mcr_diff *d, void *a)
{
    (void)o, (void)n, (void)d, (void)a;
}

static void reentrant_hook(const mcr_snapshot *old_snap, const mcr_snapshot *new_snap,
                           const mcr_diff *diff, void *arg)
{
    reentry *re = arg;
    mcr_changes *ch;
    mcr_server_desc d = {.host = "10.1.1.1", .port = 11211, .weight = 1, .state = MCR_STATE_ACTIVE};
    (void)old_snap, (void)diff;

    if (re->calls++ > 0)
        return;
    re->publish_rc = mcr_router_publish(re->self, (mcr_snapshot *)new_snap, NULL);
    ch = mcr_changes_new();
    mcr_changes_add(ch, &d, NULL);
    re->apply_rc = mcr_router_apply(re->self, ch, 0, NULL);
    re->add_hook_rc = mcr_router_add_hook(re->self, noop_hook, NULL);
    re->remove_hook_rc = mcr_router_remove_hook(re->self, reentrant_hook, arg);
    /* Reading the router from its hook is allowed. */
    mcr_route route;
    if (mcr_router_locate(re->self, "k", 1, &route) == MCR_OK)
        re->other_epoch = route.epoch;
    re->other_rc = mcr_router_apply(re->other, ch, 0, NULL);
    mcr_changes_free(ch);
}

START_TEST(hooks_cannot_reenter)
{
    mcr_snapshot *a = snap_of("10.0.0.1,10.0.0.2", MCR_MODE_KETAMA, 1);
    mcr_snapshot *b = snap_of("10.0.0.1,10.0.0.2", MCR_MODE_KETAMA, 1);
    reentry re = {0};
    mcr_error err = {0};

    re.self = router_of(a);
    re.other = router_of(b);
    ck_assert_int_eq(mcr_router_add_hook(re.self, reentrant_hook, &re), MCR_OK);
    mcr_changes *add = changes_add("10.0.0.3", 11211, 1);
    ck_assert_int_eq(mcr_router_apply(re.self, add, 0, &err), MCR_OK);
    ck_assert_int_eq(re.calls, 1);
    ck_assert_int_eq(re.publish_rc, MCR_ERR_INVALID);
    ck_assert_int_eq(re.apply_rc, MCR_ERR_INVALID);
    ck_assert_int_eq(re.add_hook_rc, MCR_ERR_INVALID);
    ck_assert_int_eq(re.remove_hook_rc, MCR_ERR_INVALID);
    ck_assert_uint_eq(re.other_epoch, 2); /* the new snapshot is already current */
    ck_assert_int_eq(re.other_rc, MCR_OK);
    ck_assert_uint_eq(mcr_router_epoch(re.self), 2);
    ck_assert_uint_eq(mcr_router_epoch(re.other), 2);

    mcr_changes_free(add);
    mcr_snapshot_unref(a);
    mcr_snapshot_unref(b);
    mcr_router_free(re.self);
    mcr_router_free(re.other);
}
END_TEST

/* ------------------------------------------------------------ publishing never waits */

/* How long a test waits for an event that should come at once: generous,
 * for loaded machines and sanitizers. A publish that waited for the parked
 * reader would never return: any bound tells the two apart. */
#define EVENT_WAIT_MS 20000

/* One reader thread parked inside a read-side section, and publisher
 * threads, synchronized by events (a mutex and a condition), never by
 * sleeps. */
typedef struct park {
    mcr_router *r;
    /* Read first, around the section on r: r's section is then a nested
     * one, and the reader's thread has no cached snapshot of r, so it is a
     * real RCU section (lib/router/router.c): what makes grace periods wait.
     * NULL: r's section is one of the thread cache, held by a reference. */
    mcr_router *outer;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int inside, may_leave, left;     /* the reader */
    uint64_t epoch_in, epoch_after;  /* what it read from its snapshot */
    uint32_t server_in, server_after;
    const mcr_changes *ch;           /* the publisher's change */
    int published, publish_rc;       /* the publisher */
} park;

static void park_init(park *pk, mcr_router *r)
{
    memset(pk, 0, sizeof *pk);
    pk->r = r;
    ck_assert_int_eq(pthread_mutex_init(&pk->mu, NULL), 0);
    ck_assert_int_eq(pthread_cond_init(&pk->cv, NULL), 0);
}

static void park_destroy(park *pk)
{
    pthread_cond_destroy(&pk->cv);
    pthread_mutex_destroy(&pk->mu);
}

static void park_set(park *pk, int *flag)
{
    pthread_mutex_lock(&pk->mu);
    *flag = 1;
    pthread_cond_broadcast(&pk->cv);
    pthread_mutex_unlock(&pk->mu);
}

/* Wait for *flag, at most EVENT_WAIT_MS. Returns whether it was set. */
static int park_wait(park *pk, const int *flag)
{
    struct timespec dl;
    int rc = 0;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += EVENT_WAIT_MS / 1000;
    pthread_mutex_lock(&pk->mu);
    while (!*flag && rc == 0)
        rc = pthread_cond_timedwait(&pk->cv, &pk->mu, &dl);
    int set = *flag;
    pthread_mutex_unlock(&pk->mu);
    return set;
}

static int park_get(park *pk, const int *flag)
{
    pthread_mutex_lock(&pk->mu);
    int v = *flag;
    pthread_mutex_unlock(&pk->mu);
    return v;
}

static void *parked_reader(void *arg)
{
    park *pk = arg;
    const mcr_snapshot *around = pk->outer ? mcr_router_acquire(pk->outer) : NULL;
    const mcr_snapshot *snap = mcr_router_acquire(pk->r);
    pk->epoch_in = mcr_snapshot_epoch(snap);
    pk->server_in = mcr_snapshot_locate(snap, "parked", 6);
    park_set(pk, &pk->inside);
    park_wait(pk, &pk->may_leave);
    /* The snapshot replaced meanwhile must still be there: under ASan a
     * snapshot reclaimed too early is a use after free right here. */
    pk->epoch_after = mcr_snapshot_epoch(snap);
    pk->server_after = mcr_snapshot_locate(snap, "parked", 6);
    mcr_router_release(pk->r, snap);
    if (pk->outer != NULL)
        mcr_router_release(pk->outer, around);
    park_set(pk, &pk->left);
    return NULL;
}

static void *blocking_publisher(void *arg)
{
    park *pk = arg;
    int rc = mcr_router_apply(pk->r, pk->ch, 0, NULL);
    pthread_mutex_lock(&pk->mu);
    pk->publish_rc = rc;
    pk->published = 1;
    pthread_cond_broadcast(&pk->cv);
    pthread_mutex_unlock(&pk->mu);
    return NULL;
}

/* The server `id` of `s`, or one of weight 0 when there is none (no
 * assertion: it runs before the cleanup). */
static mcr_server_desc find_server_in(const mcr_snapshot *s, const char *id)
{
    mcr_server_desc d;
    uint32_t at = mcr_snapshot_find(s, id);
    if (at == MCR_NO_SERVER || mcr_snapshot_server(s, (size_t)at, &d) != MCR_OK)
        memset(&d, 0, sizeof d);
    return d;
}

/* A publish from another thread returns while a reader is inside a section
 * holding the replaced snapshot, which is reclaimed only once that reader
 * has left. With a grace period waited for in the publish, the publish
 * returns only after the reader leaves, which it does only when told after
 * the publish: the wait below times out. */
START_TEST(publish_does_not_wait_for_readers)
{
    mcr_snapshot *s1 = snap_of("10.0.0.1,10.0.0.2,10.0.0.3", MCR_MODE_KETAMA, 1);
    mcr_router *r = router_of(s1);
    mcr_changes *down = mcr_changes_new();
    mcr_changes *up = mcr_changes_new();
    mcr_snapshot_unref(s1); /* the routers' references are the only ones now */
    ck_assert_int_eq(mcr_changes_set_state(down, "10.0.0.2:11211", MCR_STATE_DOWN, NULL), MCR_OK);
    ck_assert_int_eq(mcr_changes_set_state(up, "10.0.0.2:11211", MCR_STATE_ACTIVE, NULL), MCR_OK);
    mcr_router *outer = router_of(s1);
    park pk;
    pthread_t rd, pub;
    park_init(&pk, r);
    pk.outer = outer;
    pk.ch = down;

    ck_assert_int_eq(pthread_create(&rd, NULL, parked_reader, &pk), 0);
    int inside = park_wait(&pk, &pk.inside);
    ck_assert_int_eq(pthread_create(&pub, NULL, blocking_publisher, &pk), 0);
    int returned = inside && park_wait(&pk, &pk.published);
    int still_inside = !park_get(&pk, &pk.left);
    uint64_t epoch = mcr_router_epoch(r);
    size_t retired = tu_router_retired(r);
    /* The loop's way, also while the reader is inside: the ejection's
     * re-add, epoch + 1. */
    int try_rc = returned ? mcr_router_apply(r, up, MCR_ROUTER_NOWAIT, NULL) : MCR_ERR_INVALID;
    uint64_t epoch2 = mcr_router_epoch(r);
    size_t retired2 = tu_router_retired(r);
    /* Cleanup before asserting, so that a failure leaves nothing behind. */
    park_set(&pk, &pk.may_leave);
    pthread_join(pub, NULL);
    pthread_join(rd, NULL);
    int reclaim_rc = mcr_router_reclaim(r, 0, NULL);
    size_t retired_end = tu_router_retired(r);
    uint64_t epoch_end = mcr_router_epoch(r);
    mcr_router_free(r);
    mcr_router_free(outer);
    mcr_changes_free(down);
    mcr_changes_free(up);
    park_destroy(&pk);

    ck_assert_msg(inside, "the reader never entered its section");
    ck_assert_msg(returned, "mcr_router_apply() did not return within %d ms while a reader "
                            "was inside a section: it waited for a grace period",
                  EVENT_WAIT_MS);
    ck_assert_int_eq(pk.publish_rc, MCR_OK);
    ck_assert_msg(still_inside, "the reader had left before the publish was seen");
    ck_assert_uint_eq(epoch, 2);
    ck_assert_uint_eq(retired, 1); /* snapshot 1: the reader still holds it */
    ck_assert_int_eq(try_rc, MCR_OK);
    ck_assert_uint_eq(epoch2, 3);
    ck_assert_uint_eq(retired2, 2);
    ck_assert_int_eq(reclaim_rc, MCR_OK);
    ck_assert_uint_eq(retired_end, 0);
    ck_assert_uint_eq(epoch_end, 3);
    /* The reader's snapshot stayed whole for as long as it held it. */
    ck_assert_uint_eq(pk.epoch_in, 1);
    ck_assert_uint_eq(pk.epoch_after, 1);
    ck_assert_uint_eq(pk.server_in, pk.server_after);
}
END_TEST

/* Reclamation is bounded: with a reader parked, RETIRED_MAX
 * publishes go through, the next NOWAIT apply refuses (MCR_ERR_BUSY,
 * nothing published), and a blocking apply completes once the reader
 * leaves. */
START_TEST(reclamation_is_bounded)
{
    mcr_snapshot *s1 = snap_of("10.0.0.1,10.0.0.2,10.0.0.3", MCR_MODE_KETAMA, 1);
    mcr_router *r = router_of(s1);
    mcr_router *outer = router_of(s1);
    mcr_snapshot_unref(s1);
    mcr_changes *last = changes_weight("10.0.0.1:11211", 1000);
    mcr_error err = {0};
    park pk;
    pthread_t rd, pub;
    park_init(&pk, r);
    pk.outer = outer;
    pk.ch = last;

    ck_assert_int_eq(pthread_create(&rd, NULL, parked_reader, &pk), 0);
    int inside = park_wait(&pk, &pk.inside);
    unsigned ok = 0;
    int rc = MCR_OK;
    for (unsigned i = 0; inside && i < RETIRED_MAX && rc == MCR_OK; i++) {
        mcr_changes *ch = changes_weight("10.0.0.1:11211", 2 + i);
        rc = mcr_router_apply(r, ch, MCR_ROUTER_NOWAIT, NULL);
        ok += rc == MCR_OK;
        mcr_changes_free(ch);
    }
    size_t full = tu_router_retired(r);
    mcr_changes *more = changes_weight("10.0.0.1:11211", 999);
    int refused = mcr_router_apply(r, more, MCR_ROUTER_NOWAIT, &err);
    uint64_t epoch_full = mcr_router_epoch(r);
    mcr_changes_free(more);
    ck_assert_int_eq(pthread_create(&pub, NULL, blocking_publisher, &pk), 0);
    park_set(&pk, &pk.may_leave);
    int left = park_wait(&pk, &pk.left);
    int returned = park_wait(&pk, &pk.published);
    pthread_join(pub, NULL);
    pthread_join(rd, NULL);
    uint64_t epoch_end = mcr_router_epoch(r);
    size_t retired_end = tu_router_retired(r);
    ck_assert_int_eq(mcr_router_reclaim(r, 0, NULL), MCR_OK);
    size_t reclaimed = tu_router_retired(r);
    mcr_router_free(r);
    mcr_router_free(outer);
    mcr_changes_free(last);
    park_destroy(&pk);

    ck_assert_msg(inside, "the reader never entered its section");
    ck_assert_uint_eq(ok, RETIRED_MAX);
    ck_assert_uint_eq(full, RETIRED_MAX);
    ck_assert_int_eq(refused, MCR_ERR_BUSY);
    ck_assert_msg(strstr(err.message, "await reclamation") != NULL, "%s", err.message);
    ck_assert_uint_eq(epoch_full, 1 + RETIRED_MAX);
    ck_assert(left);
    ck_assert_msg(returned, "the blocking apply never returned after the reader left");
    ck_assert_int_eq(pk.publish_rc, MCR_OK);
    ck_assert_uint_eq(epoch_end, 2 + RETIRED_MAX);
    ck_assert_uint_le(retired_end, RETIRED_MAX);
    ck_assert_uint_eq(reclaimed, 0);
    ck_assert_uint_eq(pk.epoch_after, 1);
}
END_TEST

/* A writer whose hook is slow holds the writer mutex: a NOWAIT apply returns
 * MCR_ERR_BUSY at once instead of waiting behind it, and publishes
 * nothing; once the writer is done, it goes through. */
typedef struct slow_hook {
    park *pk;
    int entered, calls;
} slow_hook;

static void slow_hook_fn(const mcr_snapshot *o, const mcr_snapshot *n, const mcr_diff *d,
                         void *arg)
{
    slow_hook *h = arg;
    (void)o, (void)n, (void)d;
    if (h->calls++ > 0)
        return;
    park_set(h->pk, &h->entered);
    park_wait(h->pk, &h->pk->may_leave);
}

START_TEST(nowait_apply_does_not_wait_for_writers)
{
    mcr_snapshot *s1 = snap_of("10.0.0.1,10.0.0.2", MCR_MODE_KETAMA, 1);
    mcr_router *r = router_of(s1);
    mcr_snapshot_unref(s1);
    mcr_changes *a = changes_weight("10.0.0.1:11211", 7);
    mcr_changes *b = changes_weight("10.0.0.2:11211", 9);
    mcr_error err = {0};
    park pk;
    pthread_t pub;
    park_init(&pk, r);
    slow_hook h = {&pk, 0, 0};
    pk.ch = a;
    ck_assert_int_eq(mcr_router_add_hook(r, slow_hook_fn, &h), MCR_OK);

    ck_assert_int_eq(pthread_create(&pub, NULL, blocking_publisher, &pk), 0);
    int entered = park_wait(&pk, &h.entered);
    int busy = entered ? mcr_router_apply(r, b, MCR_ROUTER_NOWAIT, &err) : MCR_ERR_INVALID;
    park_set(&pk, &pk.may_leave);
    pthread_join(pub, NULL);
    int after = mcr_router_apply(r, b, MCR_ROUTER_NOWAIT, NULL);
    mcr_snapshot *cur = mcr_router_current(r);
    uint64_t epoch = mcr_snapshot_epoch(cur);
    mcr_server_desc d1 = find_server_in(cur, "10.0.0.1:11211");
    mcr_server_desc d2 = find_server_in(cur, "10.0.0.2:11211");
    mcr_snapshot_unref(cur);
    mcr_router_free(r);
    mcr_changes_free(a);
    mcr_changes_free(b);
    park_destroy(&pk);

    ck_assert_msg(entered, "the first writer's hook never ran");
    ck_assert_int_eq(busy, MCR_ERR_BUSY);
    ck_assert_msg(strstr(err.message, "another writer") != NULL, "%s", err.message);
    ck_assert_int_eq(pk.publish_rc, MCR_OK);
    ck_assert_int_eq(after, MCR_OK);
    ck_assert_int_eq(h.calls, 2);
    /* Both changes are in, one epoch each, none lost. */
    ck_assert_uint_eq(epoch, 3);
    ck_assert_uint_eq(d1.weight, 7);
    ck_assert_uint_eq(d2.weight, 9);
}
END_TEST

/* Where replaced snapshots are freed. Those of mcr_router_apply() with MCR_ROUTER_NOWAIT (an
 * event loop's) are not freed in liburcu's call_rcu thread, whose frees
 * would contend with the loop's allocations for its malloc arena, but on
 * the writer's thread: they still count as retired after their callbacks
 * have run, until tu_router_collect() (or the next NOWAIT write) frees them
 * at once. Those of mcr_router_apply() are freed by the callback itself.
 * The callbacks of one thread run in the order they were queued, so once
 * the apply's snapshot (queued last) is gone, both NOWAIT applies' callbacks
 * have run. (urcu_bp_barrier() would say so too, but TSan reports its
 * uninstrumented internals.) */
START_TEST(nowait_garbage_is_freed_by_the_writer)
{
    mcr_snapshot *s1 = snap_of("10.0.0.1,10.0.0.2,10.0.0.3", MCR_MODE_KETAMA, 1);
    mcr_router *r = router_of(s1);
    mcr_snapshot_unref(s1);
    mcr_changes *a = changes_weight("10.0.0.1:11211", 5);
    mcr_changes *b = changes_weight("10.0.0.2:11211", 6);
    mcr_changes *c = changes_weight("10.0.0.3:11211", 7);

    int rc1 = mcr_router_apply(r, a, MCR_ROUTER_NOWAIT, NULL);
    int rc2 = mcr_router_apply(r, b, MCR_ROUTER_NOWAIT, NULL);
    int rc3 = mcr_router_apply(r, c, 0, NULL);
    size_t queued = tu_router_retired(r);
    int64_t deadline = mcr_test_now_ms() + mcr_test_ms(10000);
    while (tu_router_retired(r) > 2 && mcr_test_now_ms() < deadline)
        sleep_ms(1); /* polls a count; the deadline is the bound */
    size_t after_callbacks = tu_router_retired(r);
    size_t left = tu_router_collect(r);
    size_t after_collect = tu_router_retired(r);
    uint64_t epoch = mcr_router_epoch(r);
    mcr_router_free(r);
    mcr_changes_free(a);
    mcr_changes_free(b);
    mcr_changes_free(c);

    ck_assert_int_eq(rc1, MCR_OK);
    ck_assert_int_eq(rc2, MCR_OK);
    ck_assert_int_eq(rc3, MCR_OK);
    ck_assert_uint_le(queued, 3);
    ck_assert_msg(after_callbacks == 2,
                  "%zu replaced snapshots count once the callbacks have run; want the 2 "
                  "of the NOWAIT applies, left to the writer (0: the callbacks freed them on "
                  "liburcu's thread; 3: the apply's was never freed)",
                  after_callbacks);
    ck_assert_uint_eq(left, 0);
    ck_assert_uint_eq(after_collect, 0);
    ck_assert_uint_eq(epoch, 4);
    ck_assert_int_eq(mcr_router_reclaim(NULL, MCR_ROUTER_NOWAIT, NULL), MCR_ERR_INVALID);
}
END_TEST

/* ------------------------------------------------------------ thread caches */

/* The references that keep a snapshot alive (lib/snapshot/snapshot.h). */
static size_t refs_of(const mcr_snapshot *s)
{
    return atomic_load(&s->refs);
}

/* A reader thread driven by commands, one at a time, events only: it
 * acquires a router (and releases at once, then idles), flushes its cache
 * or exits. */
enum { RD_NONE, RD_ACQUIRE, RD_FLUSH, RD_EXIT };

typedef struct idler {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    mcr_router *r;           /* what RD_ACQUIRE reads */
    int cmd;                 /* RD_*, set by the test, cleared by the thread */
    unsigned done;           /* commands carried out */
    const mcr_snapshot *got; /* what the last RD_ACQUIRE returned */
    uint64_t got_epoch;
    int flush_rc;
} idler;

static void *idler_main(void *arg)
{
    idler *t = arg;
    for (;;) {
        pthread_mutex_lock(&t->mu);
        while (t->cmd == RD_NONE)
            pthread_cond_wait(&t->cv, &t->mu);
        int cmd = t->cmd;
        mcr_router *r = t->r;
        pthread_mutex_unlock(&t->mu);
        const mcr_snapshot *got = NULL;
        uint64_t epoch = 0;
        int rc = MCR_OK;
        if (cmd == RD_ACQUIRE) {
            got = mcr_router_acquire(r);
            epoch = mcr_snapshot_epoch(got);
            mcr_router_release(r, got);
        } else if (cmd == RD_FLUSH) {
            rc = mcr_router_reclaim(NULL, MCR_ROUTER_FLUSH_THREAD, NULL);
        }
        pthread_mutex_lock(&t->mu);
        if (cmd == RD_ACQUIRE) {
            t->got = got;
            t->got_epoch = epoch;
        }
        t->flush_rc = rc;
        t->cmd = RD_NONE;
        t->done++;
        pthread_cond_broadcast(&t->cv);
        pthread_mutex_unlock(&t->mu);
        if (cmd == RD_EXIT)
            return NULL;
    }
}

static void idler_start(idler *t, pthread_t *th)
{
    memset(t, 0, sizeof *t);
    ck_assert_int_eq(pthread_mutex_init(&t->mu, NULL), 0);
    ck_assert_int_eq(pthread_cond_init(&t->cv, NULL), 0);
    ck_assert_int_eq(pthread_create(th, NULL, idler_main, t), 0);
}

/* Have the thread carry out `cmd` (on `r` for RD_ACQUIRE) and wait for it,
 * at most EVENT_WAIT_MS. Returns whether it was done. */
static int idler_do(idler *t, int cmd, mcr_router *r)
{
    struct timespec dl;
    int rc = 0;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += EVENT_WAIT_MS / 1000;
    pthread_mutex_lock(&t->mu);
    unsigned want = t->done + 1;
    t->cmd = cmd;
    t->r = r;
    pthread_cond_broadcast(&t->cv);
    while (t->done < want && rc == 0)
        rc = pthread_cond_timedwait(&t->cv, &t->mu, &dl);
    int ok = t->done >= want;
    pthread_mutex_unlock(&t->mu);
    return ok;
}

static void idler_destroy(idler *t)
{
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
}

/* The cost of the thread cache, stated in mcroute_router.h: a thread that
 * read a router and went idle keeps the snapshot it got alive after the
 * router replaced and reclaimed it (the router's reference is gone, the
 * thread's is not), until its next acquire of that router, its
 * mcr_router_reclaim() with MCR_ROUTER_FLUSH_THREAD, or its exit. The test keeps a reference of
 * its own to each snapshot, to count the others. */
START_TEST(idle_thread_keeps_its_snapshot)
{
    mcr_snapshot *s[5];
    for (int i = 1; i <= 4; i++)
        s[i] = snap_of("10.0.0.1,10.0.0.2,10.0.0.3", MCR_MODE_KETAMA, (uint64_t)i);
    mcr_router *r = router_of(s[1]);
    idler t;
    pthread_t th;
    size_t n[16];
    int ok[8], rc[8];
    uint64_t epoch[4];
    idler_start(&t, &th);

    /* Read, then idle. */
    ok[0] = idler_do(&t, RD_ACQUIRE, r);
    epoch[0] = t.got_epoch;
    n[0] = refs_of(s[1]);
    rc[0] = mcr_router_publish(r, s[2], NULL);
    rc[1] = mcr_router_reclaim(r, 0, NULL);
    n[1] = tu_router_retired(r);
    n[2] = refs_of(s[1]); /* the router let go; the idle thread did not */
    /* Its next acquire of the router drops it. */
    ok[1] = idler_do(&t, RD_ACQUIRE, r);
    epoch[1] = t.got_epoch;
    n[3] = refs_of(s[1]);
    n[4] = refs_of(s[2]);
    /* So does a flush. */
    rc[2] = mcr_router_publish(r, s[3], NULL);
    rc[3] = mcr_router_reclaim(r, 0, NULL);
    n[5] = refs_of(s[2]);
    ok[2] = idler_do(&t, RD_FLUSH, NULL);
    rc[4] = t.flush_rc;
    n[6] = refs_of(s[2]);
    /* And its exit. */
    ok[3] = idler_do(&t, RD_ACQUIRE, r);
    epoch[2] = t.got_epoch;
    n[7] = refs_of(s[3]);
    rc[5] = mcr_router_publish(r, s[4], NULL);
    rc[6] = mcr_router_reclaim(r, 0, NULL);
    n[8] = refs_of(s[3]);
    ok[4] = idler_do(&t, RD_EXIT, NULL);
    pthread_join(th, NULL);
    n[9] = refs_of(s[3]);
    /* This thread's own: a flush inside a section is refused (nothing
     * dropped), outside it drops. */
    const mcr_snapshot *in = mcr_router_acquire(r);
    n[10] = refs_of(s[4]);
    rc[7] = mcr_router_reclaim(NULL, MCR_ROUTER_FLUSH_THREAD, NULL);
    n[11] = refs_of(s[4]);
    mcr_router_release(r, in);
    int flushed = mcr_router_reclaim(NULL, MCR_ROUTER_FLUSH_THREAD, NULL);
    n[12] = refs_of(s[4]);
    /* mcr_router_free() drops this thread's reference too. */
    epoch[3] = mcr_router_epoch(r);
    n[13] = refs_of(s[4]);
    mcr_router_free(r);
    n[14] = refs_of(s[4]);
    idler_destroy(&t);
    for (int i = 1; i <= 4; i++)
        mcr_snapshot_unref(s[i]);

    ck_assert(ok[0] && ok[1] && ok[2] && ok[3] && ok[4]);
    ck_assert_uint_eq(epoch[0], 1);
    ck_assert_uint_eq(n[0], 4); /* the test's, the router's two (published, current), the thread's */
    ck_assert_int_eq(rc[0], MCR_OK);
    ck_assert_int_eq(rc[1], MCR_OK);
    ck_assert_uint_eq(n[1], 0);
    ck_assert_msg(n[2] == 2, "snapshot 1 has %zu references after the router reclaimed it; "
                             "want 2: the test's and the idle thread's", n[2]);
    ck_assert_uint_eq(epoch[1], 2);
    ck_assert_msg(n[3] == 1, "%zu references to snapshot 1 after the idle thread's next "
                             "acquire; want 1 (the test's)", n[3]);
    ck_assert_uint_eq(n[4], 4);
    ck_assert_int_eq(rc[2], MCR_OK);
    ck_assert_int_eq(rc[3], MCR_OK);
    ck_assert_uint_eq(n[5], 2);
    ck_assert_int_eq(rc[4], MCR_OK);
    ck_assert_msg(n[6] == 1, "%zu references to snapshot 2 after the flush; want 1", n[6]);
    ck_assert_uint_eq(epoch[2], 3);
    ck_assert_uint_eq(n[7], 4);
    ck_assert_int_eq(rc[5], MCR_OK);
    ck_assert_int_eq(rc[6], MCR_OK);
    ck_assert_uint_eq(n[8], 2);
    ck_assert_msg(n[9] == 1, "%zu references to snapshot 3 after the thread exited; want 1",
                  n[9]);
    ck_assert_uint_eq(n[10], 4);
    ck_assert_int_eq(rc[7], MCR_ERR_INVALID);
    ck_assert_uint_eq(n[11], 4);
    ck_assert_int_eq(flushed, MCR_OK);
    ck_assert_uint_eq(n[12], 3);
    ck_assert_uint_eq(epoch[3], 4);
    ck_assert_uint_eq(n[13], 4);
    ck_assert_uint_eq(n[14], 1);
}
END_TEST

/* A publish and reclaim from another thread (a thread inside a section
 * may not write). */
typedef struct publish_job {
    mcr_router *r;
    mcr_snapshot *snap;
    int rc;
} publish_job;

static void *publish_main(void *arg)
{
    publish_job *j = arg;
    j->rc = mcr_router_publish(j->r, j->snap, NULL);
    if (j->rc == MCR_OK)
        j->rc = mcr_router_reclaim(j->r, 0, NULL);
    return NULL;
}

/* mcr_router_locate_index() gives what acquire, mcr_snapshot_locate() and
 * release give, with the epoch; after a publish, the new snapshot's answer
 * and epoch at once, dropping this thread's reference to the old one as
 * acquire does, but not while a section of this thread is open. */
START_TEST(locate_index_agrees)
{
    mcr_router *r = router_of(NULL);
    mcr_snapshot *s1 = snap_of("10.0.0.1,10.0.0.2,10.0.0.3", MCR_MODE_KETAMA, 5);
    mcr_snapshot *s2 = snap_of("10.0.0.1,10.0.0.2,10.0.0.3,10.0.0.4:11212", MCR_MODE_KETAMA, 6);
    mcr_snapshot *s3 = snap_of("10.0.0.9,10.0.0.8", MCR_MODE_CONSISTENT, 7);
    uint64_t e = 99, seed = tu_seed();
    tu_rng rng;
    unsigned char key[251];
    unsigned differ = 0;

    ck_assert_uint_eq(mcr_router_locate_index(r, "k", 1, &e), MCR_NO_SERVER);
    ck_assert_uint_eq(e, 99); /* untouched */
    ck_assert_int_eq(mcr_router_publish(r, s1, NULL), MCR_OK);
    ck_assert_uint_eq(mcr_router_locate_index(r, NULL, 0, &e), mcr_snapshot_locate(s1, "", 0));
    ck_assert_uint_eq(e, 5);

    tu_rng_init(&rng, seed);
    for (int n = 0; n < 2000; n++) {
        size_t len = tu_below(&rng, sizeof key);
        for (size_t j = 0; j < len; j++)
            key[j] = (unsigned char)tu_below(&rng, 256);
        e = 0;
        uint32_t i = mcr_router_locate_index(r, key, len, &e);
        uint32_t want = mcr_snapshot_locate(s1, key, len);
        ck_assert_msg(i == want && e == 5, "seed %llu key %d: index %u epoch %llu, want %u of 5",
                      (unsigned long long)seed, n, i, (unsigned long long)e, want);
        ck_assert_uint_eq(mcr_router_locate_index(r, key, len, NULL), want);
        differ += want != mcr_snapshot_locate(s2, key, len);
    }
    ck_assert_uint_gt(differ, 0); /* the publish below moves some keys */

    /* The next call after a publish: the new snapshot, and the old one let go. */
    ck_assert_int_eq(mcr_router_publish(r, s2, NULL), MCR_OK);
    ck_assert_int_eq(mcr_router_reclaim(r, 0, NULL), MCR_OK);
    ck_assert_uint_eq(refs_of(s1), 2); /* the test's, this thread's cache */
    tu_rng_init(&rng, seed);
    for (int n = 0; n < 2000; n++) {
        size_t len = tu_below(&rng, sizeof key);
        for (size_t j = 0; j < len; j++)
            key[j] = (unsigned char)tu_below(&rng, 256);
        uint32_t i = mcr_router_locate_index(r, key, len, &e);
        ck_assert_uint_eq(i, mcr_snapshot_locate(s2, key, len));
        ck_assert_uint_eq(e, 6);
    }
    ck_assert_uint_eq(refs_of(s1), 1);

    /* Inside an open section of this thread (so another thread
     * publishes): the new snapshot's answer, and the cached reference kept
     * until the section is closed. */
    const mcr_snapshot *in = mcr_router_acquire(r);
    ck_assert_ptr_eq(in, s2);
    publish_job job = {r, s3, -100};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, publish_main, &job), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_int_eq(job.rc, MCR_OK);
    ck_assert_uint_eq(mcr_router_locate_index(r, "user:1", 6, &e),
                      mcr_snapshot_locate(s3, "user:1", 6));
    ck_assert_uint_eq(e, 7);
    ck_assert_uint_eq(refs_of(s2), 2); /* the test's, the open section's */
    mcr_router_release(r, in);
    ck_assert_uint_eq(mcr_router_locate_index(r, "user:1", 6, &e),
                      mcr_snapshot_locate(s3, "user:1", 6));
    ck_assert_uint_eq(refs_of(s2), 1);

    mcr_router_free(r);
    ck_assert_uint_eq(refs_of(s3), 1);
    mcr_snapshot_unref(s1);
    mcr_snapshot_unref(s2);
    mcr_snapshot_unref(s3);
}
END_TEST

/* A router freed and another created, probably at the same address: a
 * thread that cached the first must get the second's snapshot, never the
 * first's (the stamp is process-unique). And a thread reading more
 * routers than its cache holds gets each one's snapshot. */
START_TEST(thread_cache_never_mixes_routers)
{
    mcr_snapshot *a = snap_of("10.0.0.1,10.0.0.2", MCR_MODE_KETAMA, 1);
    mcr_snapshot *b = snap_of("10.0.0.3,10.0.0.4", MCR_MODE_KETAMA, 7);
    mcr_router *r1 = router_of(a);
    idler t;
    pthread_t th;
    idler_start(&t, &th);

    int ok1 = idler_do(&t, RD_ACQUIRE, r1);
    const mcr_snapshot *got1 = t.got;
    void *addr1 = (void *)r1;
    mcr_router_free(r1);
    size_t refs_a = refs_of(a); /* the test's and the thread's */
    mcr_router *r2 = router_of(b);
    int ok2 = idler_do(&t, RD_ACQUIRE, r2);
    const mcr_snapshot *got2 = t.got;
    uint64_t epoch2 = t.got_epoch;
    printf("thread cache: the second router %s the first's address\n",
           (void *)r2 == addr1 ? "reuses" : "does not reuse");
    /* More routers than slots, in turn, twice. */
    mcr_router *many[MCR_ROUTER_THREAD_CACHE + 2];
    mcr_snapshot *snaps[MCR_ROUTER_THREAD_CACHE + 2];
    int wrong = 0;
    for (int i = 0; i < MCR_ROUTER_THREAD_CACHE + 2; i++) {
        snaps[i] = snap_of("10.0.0.5,10.0.0.6", MCR_MODE_KETAMA, (uint64_t)(10 + i));
        many[i] = router_of(snaps[i]);
    }
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < MCR_ROUTER_THREAD_CACHE + 2; i++)
            wrong += !idler_do(&t, RD_ACQUIRE, many[i]) || t.got != snaps[i];
    int ok3 = idler_do(&t, RD_EXIT, NULL);
    pthread_join(th, NULL);
    size_t refs_b = refs_of(b);
    for (int i = 0; i < MCR_ROUTER_THREAD_CACHE + 2; i++) {
        mcr_router_free(many[i]);
        ck_assert_uint_eq(refs_of(snaps[i]), 1);
        mcr_snapshot_unref(snaps[i]);
    }
    mcr_router_free(r2);
    idler_destroy(&t);

    ck_assert(ok1 && ok2 && ok3);
    ck_assert_ptr_eq(got1, a);
    ck_assert_uint_eq(refs_a, 2);
    ck_assert_ptr_eq(got2, b);
    ck_assert_uint_eq(epoch2, 7);
    ck_assert_int_eq(wrong, 0);
    ck_assert_uint_eq(refs_of(a), 1); /* the thread dropped it when it took r2's */
    ck_assert_uint_eq(refs_b, 3); /* the test's, r2's two: the thread exited */
    mcr_snapshot_unref(a);
    mcr_snapshot_unref(b);
}
END_TEST

/* A section open on a cached snapshot, the router changed meanwhile by
 * another thread: a nested acquire gets the new snapshot (an RCU section
 * of its own), the outer one keeps the old, and once both are released
 * this thread is in no section (reclaim, which refuses inside one, runs)
 * and its next acquire gets the new one. */
START_TEST(nested_acquire_after_a_change)
{
    mcr_snapshot *s1 = snap_of("10.0.0.1,10.0.0.2,10.0.0.3", MCR_MODE_KETAMA, 1);
    mcr_router *r = router_of(s1);
    mcr_changes *ch = changes_weight("10.0.0.1:11211", 9);
    park pk;
    pthread_t pub;
    park_init(&pk, r);
    pk.ch = ch;

    const mcr_snapshot *outer = mcr_router_acquire(r);
    ck_assert_int_eq(pthread_create(&pub, NULL, blocking_publisher, &pk), 0);
    int published = park_wait(&pk, &pk.published);
    pthread_join(pub, NULL);
    const mcr_snapshot *inner = mcr_router_acquire(r);
    uint64_t e_inner = mcr_snapshot_epoch(inner);
    const mcr_snapshot *inner2 = mcr_router_acquire(r);
    int refused = mcr_router_reclaim(r, 0, NULL);
    mcr_router_release(r, inner2);
    mcr_router_release(r, inner);
    uint64_t e_outer = mcr_snapshot_epoch(outer);
    size_t refs_outer = refs_of(s1); /* the test's and this thread's cache */
    mcr_router_release(r, outer);
    int reclaimed = mcr_router_reclaim(r, 0, NULL);
    const mcr_snapshot *again = mcr_router_acquire(r);
    mcr_router_release(r, again);
    size_t refs_s1 = refs_of(s1);
    mcr_router_free(r);
    mcr_changes_free(ch);
    park_destroy(&pk);

    ck_assert(published);
    ck_assert_int_eq(pk.publish_rc, MCR_OK);
    ck_assert_ptr_eq(outer, s1);
    ck_assert_uint_eq(e_inner, 2);
    ck_assert_ptr_eq(inner2, inner);
    ck_assert_int_eq(refused, MCR_ERR_INVALID);
    ck_assert_uint_eq(e_outer, 1);
    ck_assert_uint_ge(refs_outer, 2);
    ck_assert_int_eq(reclaimed, MCR_OK);
    ck_assert_ptr_eq(again, inner);
    ck_assert_uint_eq(refs_s1, 1);
    mcr_snapshot_unref(s1);
}
END_TEST

/* ------------------------------------------------------------ stress */

/* Hook checks of the storm: epochs one apart, a diff, in order. */
typedef struct storm_log {
    unsigned long calls, bad;
    uint64_t last_new;
} storm_log;

static void storm_hook(const mcr_snapshot *old_snap, const mcr_snapshot *new_snap,
                       const mcr_diff *diff, void *arg)
{
    storm_log *l = arg;
    uint64_t o = mcr_snapshot_epoch(old_snap), n = mcr_snapshot_epoch(new_snap);
    l->calls++;
    if (diff == NULL || n != o + 1 || (l->last_new != 0 && o != l->last_new))
        l->bad++;
    else if (mcr_diff_moved(diff) < 0.0 || mcr_diff_moved(diff) > 1.0)
        l->bad++;
    l->last_new = n;
}

/* One random valid change batch against `cur`, or an invalid one (leaves
 * no active server) when `invalid`. Returns the number of changes. */
static int random_changes(tu_rng *rng, const mcr_snapshot *cur, mcr_changes *ch,
                          unsigned *next_host, int invalid)
{
    size_t n = mcr_snapshot_server_count(cur), active = 0;
    mcr_server_desc d;
    int count = 0;

    for (size_t i = 0; i < n; i++) {
        mcr_snapshot_server(cur, i, &d);
        active += d.state == MCR_STATE_ACTIVE;
    }
    if (invalid) {
        for (size_t i = 0; i < n; i++) {
            mcr_snapshot_server(cur, i, &d);
            if (d.state == MCR_STATE_ACTIVE)
                ck_assert_int_eq(mcr_changes_set_state(ch, d.id, MCR_STATE_DOWN, NULL), MCR_OK);
        }
        return (int)active;
    }
    unsigned ops = 1 + tu_below(rng, 3);
    for (unsigned k = 0; k < ops; k++) {
        unsigned op = tu_below(rng, 4);
        size_t i = tu_below(rng, (uint32_t)n);
        mcr_snapshot_server(cur, i, &d);
        if (op == 0 && n < 24) {
            char host[32];
            static const char *zones[] = {"a", "b", "c"};
            unsigned h = (*next_host)++;
            snprintf(host, sizeof host, "10.%u.%u.%u", 1 + h / 65536, h / 256 % 256, h % 256);
            mcr_server_desc add = {.host = host, .port = 11211, .weight = 1 + tu_below(rng, 4),
                                   .zone = zones[tu_below(rng, 3)], .state = MCR_STATE_ACTIVE};
            ck_assert_int_eq(mcr_changes_add(ch, &add, NULL), MCR_OK);
            return count + 1; /* one structural change per batch keeps ids simple */
        } else if (op == 1 && n > 4 && (d.state != MCR_STATE_ACTIVE || active > 2)) {
            ck_assert_int_eq(mcr_changes_remove(ch, d.id, NULL), MCR_OK);
            return count + 1;
        } else if (op == 2) {
            ck_assert_int_eq(mcr_changes_set_weight(ch, d.id, 1 + tu_below(rng, 8), NULL), MCR_OK);
            count++;
        } else if (d.state != MCR_STATE_ACTIVE) {
            ck_assert_int_eq(mcr_changes_set_state(ch, d.id, MCR_STATE_ACTIVE, NULL), MCR_OK);
            active++;
            count++;
        } else if (active > 2) {
            mcr_server_state s = tu_below(rng, 2) ? MCR_STATE_DOWN : MCR_STATE_DRAINING;
            ck_assert_int_eq(mcr_changes_set_state(ch, d.id, s, NULL), MCR_OK);
            active--;
            count++;
        }
    }
    if (count == 0) { /* nothing applied: a weight change always is */
        mcr_snapshot_server(cur, 0, &d);
        ck_assert_int_eq(mcr_changes_set_weight(ch, d.id, 1 + tu_below(rng, 8), NULL), MCR_OK);
        count++;
    }
    return count;
}

START_TEST(stress_publish_while_reading)
{
    stress st;
    reader rd[STRESS_READERS];
    pthread_t th[STRESS_READERS];
    storm_log log = {0};
    tu_rng rng;
    mcr_error err = {0};
    unsigned next_host = 1000;
    unsigned long published = 0, refused_empty = 0, refused_stale = 0;
    uint64_t t0;

    memset(&st, 0, sizeof st);
    tu_rng_init(&rng, 42);
    for (int k = 0; k < STRESS_KEYS; k++)
        st.key_len[k] = tu_key(&rng, st.keys[k], sizeof st.keys[k] - 1);
    mcr_snapshot *first =
        snap_of("10.0.0.1,10.0.0.2,10.0.0.3,10.0.0.4,10.0.0.5,10.0.0.6", MCR_MODE_KETAMA, 1);
    st.router = router_of(first);
    mcr_snapshot_unref(first);
    ck_assert_int_eq(mcr_router_add_hook(st.router, storm_hook, &log), MCR_OK);

    for (unsigned i = 0; i < STRESS_READERS; i++) {
        memset(&rd[i], 0, sizeof rd[i]);
        rd[i].st = &st;
        rd[i].id = i;
        ck_assert_int_eq(pthread_create(&th[i], NULL, reader_main, &rd[i]), 0);
    }

    t0 = (uint64_t)mcr_test_now_ms();
    for (unsigned i = 0; published < STRESS_MAX_PUBLISHES; i++) {
        uint64_t ms = (uint64_t)mcr_test_now_ms() - t0;
        if (ms >= STRESS_MAX_MS || (ms >= STRESS_MS && published >= STRESS_MIN_PUBLISHES))
            break;
        mcr_snapshot *cur = mcr_router_current(st.router);
        mcr_changes *ch = mcr_changes_new();
        uint64_t before = mcr_snapshot_epoch(cur);
        int invalid = i % 97 == 96;
        int rc;

        random_changes(&rng, cur, ch, &next_host, invalid);
        if (i % 3 == 0 && !invalid) {
            /* Built outside the router, published as a whole. */
            mcr_snapshot *next = NULL;
            rc = mcr_snapshot_apply(cur, ch, &next, &err);
            ck_assert_msg(rc == MCR_OK, "apply: %s", err.message);
            rc = mcr_router_publish(st.router, next, &err);
            mcr_snapshot_unref(next);
        } else {
            rc = mcr_router_apply(st.router, ch, 0, &err);
        }
        if (invalid) {
            ck_assert_int_eq(rc, MCR_ERR_EMPTY);
            ck_assert_uint_eq(mcr_router_epoch(st.router), before);
            refused_empty++;
        } else {
            ck_assert_msg(rc == MCR_OK, "publish %u: %s", i, err.message);
            ck_assert_uint_eq(mcr_router_epoch(st.router), before + 1);
            published++;
        }
        if (i % 50 == 49) {
            /* Stale: the snapshot we started from. */
            ck_assert_int_eq(mcr_router_publish(st.router, cur, &err), MCR_ERR_STALE);
            refused_stale++;
        }
        mcr_changes_free(ch);
        mcr_snapshot_unref(cur);
    }
    atomic_store(&st.stop, 1);

    unsigned long lookups = 0;
    for (unsigned i = 0; i < STRESS_READERS; i++) {
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        ck_assert_msg(rd[i].errors == 0, "%lu errors, first: %s", rd[i].errors,
                      rd[i].first_error);
        ck_assert_msg(rd[i].sections > 0 && rd[i].currents > 0, "reader %u starved", i);
        lookups += rd[i].lookups;
    }
    printf("stress: %lu publishes, %lu refused (empty), %lu refused (stale), %lu lookups by %d "
           "readers in %llu ms\n",
           published, refused_empty, refused_stale, lookups, STRESS_READERS,
           (unsigned long long)((uint64_t)mcr_test_now_ms() - t0));
    ck_assert_uint_ge(published, STRESS_MIN_PUBLISHES);
    ck_assert_uint_eq(log.calls, published);
    ck_assert_uint_eq(log.bad, 0);
    ck_assert_uint_eq(log.last_new, mcr_router_epoch(st.router));
    mcr_router_free(st.router);
}
END_TEST

static Suite *router_suite(void)
{
    Suite *s = suite_create("router");
    TCase *tc = tcase_create("router");
    /* The stress test runs for seconds, longer under sanitizers. */
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, empty_router);
    tcase_add_test(tc, publish_and_apply);
    tcase_add_test(tc, acquire_holds_one_snapshot);
    tcase_add_test(tc, hooks_cannot_reenter);
    tcase_add_test(tc, publish_does_not_wait_for_readers);
    tcase_add_test(tc, reclamation_is_bounded);
    tcase_add_test(tc, nowait_apply_does_not_wait_for_writers);
    tcase_add_test(tc, nowait_garbage_is_freed_by_the_writer);
    tcase_add_test(tc, idle_thread_keeps_its_snapshot);
    tcase_add_test(tc, locate_index_agrees);
    tcase_add_test(tc, thread_cache_never_mixes_routers);
    tcase_add_test(tc, nested_acquire_after_a_change);
    tcase_add_test(tc, stress_publish_while_reading);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(router_suite());
}
