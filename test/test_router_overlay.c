/* SPDX-License-Identifier: BSD-3-Clause */
/* test_router_overlay.c: Check suite of the router's local overlay: local states over the published snapshot, the effective snapshot and its epoch, the generation, publishes that keep or drop local states, refusals, hooks, try_ variants, watchers, readers under overlay changes. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mcroute.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"
#include "router_count.h"
#include "testutil.h"
#include "testutil_config.h"
#include "test_router_util.h"

/* ------------------------------------------------------------ helpers */

/* The state of server `id` in `s`, -1 when absent. */
static int state_in(const mcr_snapshot *s, const char *id)
{
    mcr_server_desc d;
    uint32_t i = mcr_snapshot_find(s, id);
    if (i == MCR_NO_SERVER || mcr_snapshot_server(s, (size_t)i, &d) != MCR_OK)
        return -1;
    return (int)d.state;
}

static int current_state(mcr_router *r, const char *id)
{
    mcr_snapshot *s = mcr_router_current(r);
    int st = state_in(s, id);
    mcr_snapshot_unref(s);
    return st;
}

static int published_state(mcr_router *r, const char *id)
{
    mcr_snapshot *s = mcr_router_published(r);
    int st = state_in(s, id);
    mcr_snapshot_unref(s);
    return st;
}

/* How many of `n` keys the current snapshot sends to `id`. */
static int keys_on(mcr_router *r, const char *id, int n)
{
    int hits = 0;
    for (int k = 0; k < n; k++) {
        char key[32];
        mcr_route route;
        int len = snprintf(key, sizeof(key), "key:%d", k);
        EXPECT_INT(mcr_router_locate(r, key, (size_t)len, &route), ==, MCR_OK);
        char want[MCR_HOSTNAME_MAX + 16];
        snprintf(want, sizeof(want), "%s:%d", route.host, route.port);
        hits += strcmp(want, id) == 0;
    }
    return hits;
}

/* What a hook saw: every call, in order. */
#define LOG_MAX 16
typedef struct state_log {
    mcr_router *router;
    const char *id;          /* the server whose state is recorded */
    int calls;
    uint64_t old_epoch[LOG_MAX], new_epoch[LOG_MAX], gen[LOG_MAX];
    int new_state[LOG_MAX];
    int diff_null[LOG_MAX];
    double moved[LOG_MAX];
} state_log;

static void state_hook(const mcr_snapshot *old_snap, const mcr_snapshot *new_snap,
                     const mcr_diff *diff, void *arg)
{
    state_log *h = arg;
    int i = h->calls++;
    if (i >= LOG_MAX)
        return;
    h->old_epoch[i] = old_snap != NULL ? mcr_snapshot_epoch(old_snap) : 0;
    h->new_epoch[i] = mcr_snapshot_epoch(new_snap);
    h->gen[i] = mcr_router_generation(h->router); /* lock-free: callable from a hook */
    h->new_state[i] = state_in(new_snap, h->id);
    h->diff_null[i] = diff == NULL;
    h->moved[i] = diff != NULL ? mcr_diff_moved(diff) : -1.0;
}

#define A "10.0.0.1:11211"
#define B "10.0.0.2:11211"
#define C "10.0.0.3:11211"
#define D "10.0.0.4:11211"
#define E "10.0.0.5:11211"

/* ------------------------------------------------------------ the overlay */

/* A local state: the current snapshot has the server DOWN (no key goes
 * there) under the published epoch; the published snapshot is untouched;
 * the generation moves, the epoch does not; the current snapshot's
 * checksum is its own content's (a file of it loads, checksum verified).
 * Clearing it gives the published snapshot back. */
START_TEST(local_state_applied)
{
    mcr_snapshot *s4 = snap_of(A "," B "," C, MCR_MODE_KETAMA, 4);
    mcr_router *r = router_of(s4);
    mcr_error err = {0};
    uint64_t g0 = mcr_router_generation(r);

    ck_assert_int_gt(keys_on(r, B, 600), 0);
    ck_assert_int_eq(mcr_router_set_local_state(r, B, MCR_STATE_DOWN, 0, &err), MCR_OK);
    ck_assert_uint_eq(mcr_router_epoch(r), 4);
    ck_assert_uint_eq(mcr_router_generation(r), g0 + 1);
    ck_assert_int_eq(current_state(r, B), MCR_STATE_DOWN);
    ck_assert_int_eq(published_state(r, B), MCR_STATE_ACTIVE);
    ck_assert_int_eq(keys_on(r, B, 600), 0);
    mcr_route route;
    ck_assert_int_eq(mcr_router_locate(r, "x", 1, &route), MCR_OK);
    ck_assert_uint_eq(route.epoch, 4);

    mcr_snapshot *pub = mcr_router_published(r), *cur = mcr_router_current(r);
    ck_assert_ptr_eq(pub, s4); /* what was given, as it was */
    ck_assert_ptr_ne(cur, pub);
    ck_assert_uint_eq(mcr_snapshot_epoch(cur), 4);
    ck_assert_str_ne(mcr_snapshot_checksum(cur), mcr_snapshot_checksum(pub));
    ck_assert_uint_eq(mcr_snapshot_active_count(cur), 2);
    char *dir = tu_tmpdir("overlay");
    char path[512];
    snprintf(path, sizeof(path), "%s/effective.snap", dir);
    ck_assert_msg(mcr_snapshot_save(cur, path, &err) == MCR_OK, "%s", err.message);
    mcr_snapshot *back = NULL;
    ck_assert_msg(mcr_snapshot_load(path, NULL, 0, &back, &err) == MCR_OK, "%s", err.message);
    ck_assert_str_eq(mcr_snapshot_checksum(back), mcr_snapshot_checksum(cur));
    ck_assert_uint_eq(mcr_snapshot_epoch(back), 4);
    mcr_snapshot_unref(back);
    tu_tmpdir_free(dir);
    mcr_snapshot_unref(cur);
    mcr_snapshot_unref(pub);

    /* read back */
    mcr_server_state st = MCR_STATE_ACTIVE;
    int applied = 0;
    ck_assert_int_eq(mcr_router_local_state(r, B, &st, &applied), MCR_OK);
    ck_assert_int_eq(st, MCR_STATE_DOWN);
    ck_assert_int_eq(applied, 1);
    ck_assert_int_eq(mcr_router_local_state(r, A, &st, &applied), MCR_ERR_UNKNOWN);
    mcr_local_state *v = NULL;
    size_t n = 99;
    ck_assert_int_eq(mcr_router_local_states(r, &v, &n, &err), MCR_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(v[0].id, B);
    ck_assert_str_eq(v[0].host, "10.0.0.2");
    ck_assert_int_eq(v[0].port, 11211);
    ck_assert_int_eq(v[0].state, MCR_STATE_DOWN);
    ck_assert_int_eq(v[0].applied, 1);
    mcr_router_local_states_free(v);

    /* the same state again: nothing changes */
    ck_assert_int_eq(mcr_router_set_local_state(r, B, MCR_STATE_DOWN, 0, &err), MCR_OK);
    ck_assert_uint_eq(mcr_router_generation(r), g0 + 1);
    /* another state for the same server replaces it */
    ck_assert_int_eq(mcr_router_set_local_state(r, B, MCR_STATE_DRAINING, 0, &err), MCR_OK);
    ck_assert_uint_eq(mcr_router_generation(r), g0 + 2);
    ck_assert_int_eq(current_state(r, B), MCR_STATE_DRAINING);

    /* cleared: the published snapshot itself is current again */
    ck_assert_int_eq(mcr_router_clear_local_state(r, B, 0, &err), MCR_OK);
    ck_assert_uint_eq(mcr_router_generation(r), g0 + 3);
    cur = mcr_router_current(r);
    ck_assert_ptr_eq(cur, s4);
    mcr_snapshot_unref(cur);
    ck_assert_int_gt(keys_on(r, B, 600), 0);
    ck_assert_int_eq(mcr_router_clear_local_state(r, B, 0, &err), MCR_ERR_UNKNOWN);
    ck_assert_msg(strstr(err.message, B) != NULL, "%s", err.message);
    ck_assert_int_eq(mcr_router_local_states(r, &v, &n, &err), MCR_OK);
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(v);
    ck_assert_uint_eq(mcr_router_epoch(r), 4);
    ck_assert_uint_eq(mcr_router_generation(NULL), 0);
    ck_assert_ptr_null(mcr_router_published(NULL));

    ck_assert_int_eq(mcr_router_reclaim(r, 0, NULL), MCR_OK);
    ck_assert_uint_eq(tu_router_retired(r), 0);
    mcr_router_free(r);
    mcr_snapshot_unref(s4);
}
END_TEST

/* The clash: a router fed by epochs from elsewhere keeps accepting them
 * while a local state is set, and re-applies it to each; a publish that
 * no longer lists a server (or lists its id at another address) drops its
 * local state; apply builds from the published snapshot (a local state is
 * never baked into an epoch). */
START_TEST(publish_keeps_local_states)
{
    mcr_snapshot *s5 = snap_of(A "," B "," C "," D, MCR_MODE_KETAMA, 5);
    mcr_router *r = router_of(s5);
    mcr_error err = {0};
    state_log h = {.router = r, .id = B};

    ck_assert_int_eq(mcr_router_add_hook(r, state_hook, &h), MCR_OK);
    ck_assert_int_eq(mcr_router_set_local_state(r, B, MCR_STATE_DOWN, 0, &err), MCR_OK);
    ck_assert_int_eq(mcr_router_set_local_state(r, C, MCR_STATE_DRAINING, 0, &err), MCR_OK);
    ck_assert_uint_eq(mcr_router_epoch(r), 5);
    uint64_t g = mcr_router_generation(r);

    /* epoch 6: C gone, E new; B still DOWN here, ACTIVE as published */
    mcr_snapshot *s6 = snap_of(A "," B "," D "," E, MCR_MODE_KETAMA, 6);
    ck_assert_msg(mcr_router_publish(r, s6, &err) == MCR_OK, "%s", err.message);
    ck_assert_uint_eq(mcr_router_epoch(r), 6);
    ck_assert_uint_eq(mcr_router_generation(r), g + 1);
    ck_assert_int_eq(current_state(r, B), MCR_STATE_DOWN);
    ck_assert_int_eq(published_state(r, B), MCR_STATE_ACTIVE);
    ck_assert_int_eq(current_state(r, E), MCR_STATE_ACTIVE);
    ck_assert_int_eq(mcr_router_local_state(r, C, NULL, NULL), MCR_ERR_UNKNOWN);
    ck_assert_int_eq(mcr_router_local_state(r, B, NULL, NULL), MCR_OK);
    mcr_snapshot *pub = mcr_router_published(r);
    ck_assert_ptr_eq(pub, s6);
    mcr_snapshot_unref(pub);
    ck_assert_int_eq(keys_on(r, B, 600), 0);
    /* the hook saw 5 -> 6 with B DOWN in the new current snapshot */
    ck_assert_int_eq(h.calls, 3);
    ck_assert_uint_eq(h.old_epoch[2], 5);
    ck_assert_uint_eq(h.new_epoch[2], 6);
    ck_assert_int_eq(h.new_state[2], MCR_STATE_DOWN);
    /* a stale epoch is still stale */
    mcr_snapshot *old = snap_of(A "," B, MCR_MODE_KETAMA, 6);
    ck_assert_int_eq(mcr_router_publish(r, old, &err), MCR_ERR_STALE);
    mcr_snapshot_unref(old);

    /* apply: from the published snapshot, epoch + 1 */
    mcr_changes *ch = changes_weight(A, 3);
    ck_assert_msg(mcr_router_apply(r, ch, 0, &err) == MCR_OK, "%s", err.message);
    mcr_changes_free(ch);
    ck_assert_uint_eq(mcr_router_epoch(r), 7);
    ck_assert_int_eq(published_state(r, B), MCR_STATE_ACTIVE);
    ck_assert_int_eq(current_state(r, B), MCR_STATE_DOWN);
    /* a state change published under a local state: the local one wins */
    ch = mcr_changes_new();
    ck_assert_int_eq(mcr_changes_set_state(ch, B, MCR_STATE_DRAINING, NULL), MCR_OK);
    ck_assert_int_eq(mcr_router_apply(r, ch, MCR_ROUTER_NOWAIT, &err), MCR_OK);
    mcr_changes_free(ch);
    ck_assert_int_eq(published_state(r, B), MCR_STATE_DRAINING);
    ck_assert_int_eq(current_state(r, B), MCR_STATE_DOWN);
    ck_assert_int_eq(mcr_router_clear_local_state(r, B, 0, &err), MCR_OK);
    ck_assert_int_eq(current_state(r, B), MCR_STATE_DRAINING);
    ck_assert_uint_eq(mcr_router_epoch(r), 8);

    /* the same id at another address drops the local state */
    mcr_error e2 = {0};
    mcr_config *cfg = mcr_config_new();
    ck_assert_ptr_nonnull(cfg);
    ck_assert_int_eq(mcr_config_add_server_named(cfg, "10.0.0.1", 11211, 1, "a", &e2), MCR_OK);
    ck_assert_int_eq(mcr_config_add_server_named(cfg, "10.0.0.2", 11211, 1, "b", &e2), MCR_OK);
    mcr_snapshot *n9 = NULL, *n10 = NULL;
    ck_assert_int_eq(mcr_snapshot_new(cfg, 9, &n9, &e2), MCR_OK);
    mcr_config_free(cfg);
    cfg = mcr_config_new();
    ck_assert_ptr_nonnull(cfg);
    ck_assert_int_eq(mcr_config_add_server_named(cfg, "10.0.0.1", 11211, 1, "a", &e2), MCR_OK);
    ck_assert_int_eq(mcr_config_add_server_named(cfg, "10.0.0.9", 11211, 1, "b", &e2), MCR_OK);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 10, &n10, &e2), MCR_OK);
    mcr_config_free(cfg);
    ck_assert_int_eq(mcr_router_publish(r, n9, &err), MCR_OK);
    ck_assert_int_eq(mcr_router_set_local_state(r, "b", MCR_STATE_DOWN, 0, &err), MCR_OK);
    ck_assert_int_eq(current_state(r, "b"), MCR_STATE_DOWN);
    ck_assert_int_eq(mcr_router_publish(r, n10, &err), MCR_OK);
    ck_assert_int_eq(mcr_router_local_state(r, "b", NULL, NULL), MCR_ERR_UNKNOWN);
    ck_assert_int_eq(current_state(r, "b"), MCR_STATE_ACTIVE);
    mcr_snapshot *cur = mcr_router_current(r);
    ck_assert_ptr_eq(cur, n10);
    mcr_snapshot_unref(cur);

    mcr_router_free(r);
    mcr_snapshot_unref(s5);
    mcr_snapshot_unref(s6);
    mcr_snapshot_unref(n9);
    mcr_snapshot_unref(n10);
}
END_TEST

/* Refusals name the problem and change nothing: an unknown id, a local
 * state that would leave no ACTIVE server, not a state, NULL arguments,
 * an empty router, a call from a hook or a read-side section. */
static int hook_rc = 1;
static void writing_hook(const mcr_snapshot *o, const mcr_snapshot *n, const mcr_diff *d,
                         void *arg)
{
    (void)o, (void)n, (void)d;
    hook_rc = mcr_router_set_local_state(arg, A, MCR_STATE_DOWN, 0, NULL);
}

START_TEST(local_state_refusals)
{
    mcr_snapshot *s1 = snap_of(A "," B, MCR_MODE_KETAMA, 1);
    mcr_router *r = router_of(s1), *empty = router_of(NULL);
    mcr_error err = {0};

    ck_assert_int_eq(mcr_router_set_local_state(r, "10.9.9.9:1", MCR_STATE_DOWN, 0, &err),
                     MCR_ERR_UNKNOWN);
    ck_assert_msg(strstr(err.message, "10.9.9.9:1") != NULL &&
                      strstr(err.message, "no server") != NULL,
                  "%s", err.message);
    ck_assert_int_eq(mcr_router_set_local_state(r, "nope", MCR_STATE_DOWN, MCR_ROUTER_NOWAIT, &err),
                     MCR_ERR_UNKNOWN);
    ck_assert_int_eq(mcr_router_set_local_state(r, A, (mcr_server_state)7, 0, &err),
                     MCR_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "not a server state") != NULL, "%s", err.message);
    ck_assert_int_eq(mcr_router_set_local_state(NULL, A, MCR_STATE_DOWN, 0, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_router_set_local_state(r, NULL, MCR_STATE_DOWN, 0, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_router_clear_local_state(r, NULL, 0, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_router_clear_local_state(NULL, A, MCR_ROUTER_NOWAIT, &err),
                     MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_router_local_state(NULL, A, NULL, NULL), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_router_local_state(r, NULL, NULL, NULL), MCR_ERR_INVALID);
    mcr_local_state *v = NULL;
    size_t n = 0;
    ck_assert_int_eq(mcr_router_local_states(r, NULL, &n, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_router_local_states(r, &v, NULL, &err), MCR_ERR_INVALID);
    mcr_router_local_states_free(NULL);
    ck_assert_int_eq(mcr_router_set_local_state(empty, A, MCR_STATE_DOWN, 0, &err), MCR_ERR_EMPTY);
    ck_assert_msg(strstr(err.message, "no snapshot") != NULL, "%s", err.message);
    ck_assert_int_eq(mcr_router_clear_local_state(empty, A, 0, &err), MCR_ERR_EMPTY);
    ck_assert_ptr_null(mcr_router_published(empty));
    ck_assert_uint_eq(mcr_router_generation(empty), 0);
    ck_assert_uint_eq(mcr_router_generation(r), 0);

    /* the last ACTIVE server */
    ck_assert_int_eq(mcr_router_set_local_state(r, A, MCR_STATE_DOWN, 0, &err), MCR_OK);
    uint64_t g = mcr_router_generation(r);
    ck_assert_int_eq(mcr_router_set_local_state(r, B, MCR_STATE_DOWN, 0, &err), MCR_ERR_EMPTY);
    ck_assert_msg(strstr(err.message, "no ACTIVE server") != NULL && strstr(err.message, B),
                  "%s", err.message);
    ck_assert_int_eq(mcr_router_set_local_state(r, B, MCR_STATE_DRAINING, MCR_ROUTER_NOWAIT, &err),
                     MCR_ERR_EMPTY);
    ck_assert_uint_eq(mcr_router_generation(r), g);
    ck_assert_int_eq(mcr_router_local_state(r, B, NULL, NULL), MCR_ERR_UNKNOWN);
    ck_assert_int_eq(current_state(r, B), MCR_STATE_ACTIVE);
    /* ACTIVE takes nothing out: kept as a local state */
    ck_assert_int_eq(mcr_router_set_local_state(r, B, MCR_STATE_ACTIVE, 0, &err), MCR_OK);
    ck_assert_uint_eq(mcr_router_generation(r), g); /* no state changed */
    ck_assert_int_eq(mcr_router_local_state(r, B, NULL, NULL), MCR_OK);

    /* from a hook of the same router; inside a read-side section */
    ck_assert_int_eq(mcr_router_add_hook(r, writing_hook, r), MCR_OK);
    ck_assert_int_eq(mcr_router_clear_local_state(r, A, 0, &err), MCR_OK);
    ck_assert_int_eq(hook_rc, MCR_ERR_INVALID);
    ck_assert_int_eq(current_state(r, A), MCR_STATE_ACTIVE);
    ck_assert_int_eq(mcr_router_remove_hook(r, writing_hook, r), MCR_OK);
    const mcr_snapshot *in = mcr_router_acquire(r);
    int rc_in = mcr_router_set_local_state(r, A, MCR_STATE_DOWN, 0, &err);
    mcr_router_release(r, in);
    ck_assert_int_eq(rc_in, MCR_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "mcr_router_acquire") != NULL, "%s", err.message);

    mcr_router_free(r);
    mcr_router_free(empty);
    mcr_snapshot_unref(s1);
}
END_TEST

/* Held local states: a publish that leaves them no other ACTIVE server
 * keeps them, not in force (the earlier set applies, the later is held),
 * and the first change that lets them applies them. */
START_TEST(held_local_states)
{
    mcr_snapshot *s1 = snap_of(A "," B "," C, MCR_MODE_KETAMA, 1);
    mcr_router *r = router_of(s1);
    mcr_error err = {0};
    int applied = -1;

    ck_assert_int_eq(mcr_router_set_local_state(r, A, MCR_STATE_DOWN, 0, &err), MCR_OK);
    ck_assert_int_eq(mcr_router_set_local_state(r, B, MCR_STATE_DOWN, 0, &err), MCR_OK);
    mcr_snapshot *s2 = snap_of(A "," B, MCR_MODE_KETAMA, 2);
    ck_assert_msg(mcr_router_publish(r, s2, &err) == MCR_OK, "%s", err.message);
    ck_assert_int_eq(current_state(r, A), MCR_STATE_DOWN);
    ck_assert_int_eq(current_state(r, B), MCR_STATE_ACTIVE);
    ck_assert_int_eq(mcr_router_local_state(r, B, NULL, &applied), MCR_OK);
    ck_assert_int_eq(applied, 0);
    mcr_local_state *v = NULL;
    size_t n = 0;
    ck_assert_int_eq(mcr_router_local_states(r, &v, &n, &err), MCR_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(v[0].id, A); /* the order they were set */
    ck_assert_int_eq(v[0].applied, 1);
    ck_assert_str_eq(v[1].id, B);
    ck_assert_int_eq(v[1].applied, 0);
    mcr_router_local_states_free(v);

    /* A cleared: B's can apply now, and does */
    uint64_t g = mcr_router_generation(r);
    ck_assert_int_eq(mcr_router_clear_local_state(r, A, 0, &err), MCR_OK);
    ck_assert_uint_eq(mcr_router_generation(r), g + 1);
    ck_assert_int_eq(current_state(r, A), MCR_STATE_ACTIVE);
    ck_assert_int_eq(current_state(r, B), MCR_STATE_DOWN);
    ck_assert_int_eq(mcr_router_local_state(r, B, NULL, &applied), MCR_OK);
    ck_assert_int_eq(applied, 1);

    /* a local ACTIVE on a server published DOWN counts as ACTIVE */
    mcr_changes *ch = mcr_changes_new();
    ck_assert_int_eq(mcr_changes_add(ch, &(mcr_server_desc){.host = "10.0.0.3", .port = 11211,
                                                            .weight = 1,
                                                            .state = MCR_STATE_DOWN},
                                     &err),
                     MCR_OK);
    ck_assert_int_eq(mcr_router_apply(r, ch, 0, &err), MCR_OK);
    mcr_changes_free(ch);
    ck_assert_int_eq(mcr_router_set_local_state(r, C, MCR_STATE_ACTIVE, 0, &err), MCR_OK);
    ck_assert_int_eq(current_state(r, C), MCR_STATE_ACTIVE);
    ck_assert_int_eq(published_state(r, C), MCR_STATE_DOWN);
    ck_assert_int_eq(mcr_router_set_local_state(r, A, MCR_STATE_DOWN, 0, &err), MCR_OK);
    ck_assert_int_eq(current_state(r, A), MCR_STATE_DOWN);
    ck_assert_uint_eq(mcr_router_epoch(r), 3);

    mcr_router_free(r);
    mcr_snapshot_unref(s1);
    mcr_snapshot_unref(s2);
}
END_TEST

/* Hooks: one call per change of the current snapshot, old -> new with
 * their diff, the epoch kept by overlay changes; none for a change that
 * changes no state; the generation grows by one each time. */
START_TEST(hooks_see_overlay_changes)
{
    mcr_snapshot *s3 = snap_of(A "," B "," C, MCR_MODE_KETAMA, 3);
    mcr_router *r = router_of(s3);
    mcr_error err = {0};
    state_log h = {.router = r, .id = B};

    ck_assert_int_eq(mcr_router_add_hook(r, state_hook, &h), MCR_OK);
    ck_assert_int_eq(mcr_router_set_local_state(r, B, MCR_STATE_DOWN, MCR_ROUTER_NOWAIT, &err),
                     MCR_OK);
    ck_assert_int_eq(mcr_router_set_local_state(r, B, MCR_STATE_DOWN, 0, &err), MCR_OK); /* same */
    /* no-op */
    ck_assert_int_eq(mcr_router_set_local_state(r, A, MCR_STATE_ACTIVE, 0, &err), MCR_OK);
    ck_assert_int_eq(mcr_router_clear_local_state(r, B, MCR_ROUTER_NOWAIT, &err), MCR_OK);
    mcr_snapshot *s4 = snap_of(A "," B "," C, MCR_MODE_KETAMA, 4);
    ck_assert_int_eq(mcr_router_publish(r, s4, &err), MCR_OK);

    ck_assert_int_eq(h.calls, 3);
    ck_assert_uint_eq(h.old_epoch[0], 3);
    ck_assert_uint_eq(h.new_epoch[0], 3);
    ck_assert_int_eq(h.new_state[0], MCR_STATE_DOWN);
    ck_assert_int_eq(h.diff_null[0], 0);
    ck_assert_msg(h.moved[0] > 0.1 && h.moved[0] < 0.6, "moved %g", h.moved[0]);
    ck_assert_uint_eq(h.old_epoch[1], 3);
    ck_assert_uint_eq(h.new_epoch[1], 3);
    ck_assert_int_eq(h.new_state[1], MCR_STATE_ACTIVE);
    ck_assert_msg(h.moved[1] > 0.1 && h.moved[1] < 0.6, "moved %g", h.moved[1]);
    ck_assert_uint_eq(h.old_epoch[2], 3);
    ck_assert_uint_eq(h.new_epoch[2], 4);
    for (int i = 0; i < 3; i++)
        ck_assert_uint_eq(h.gen[i], (uint64_t)i + 1);
    ck_assert_uint_eq(mcr_router_generation(r), 3);
    ck_assert_int_eq(mcr_router_remove_hook(r, state_hook, &h), MCR_OK);
    mcr_router_free(r);
    mcr_snapshot_unref(s3);
    mcr_snapshot_unref(s4);
}
END_TEST

/* The try_ variants never wait: while another writer holds the router (a
 * publish whose hook is blocked on a gate) they return MCR_ERR_BUSY at
 * once and change nothing; afterwards they go through. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int entered, open;
    mcr_router *router;
    mcr_snapshot *snap;
    int publish_rc;
} gate;

static int gate_wait(gate *g, int *flag)
{
    int64_t deadline = mcr_test_now_ms() + mcr_test_ms(10000);
    int ok;
    pthread_mutex_lock(&g->mu);
    while (!*flag && mcr_test_now_ms() < deadline) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    }
    ok = *flag;
    pthread_mutex_unlock(&g->mu);
    return ok;
}

static void gate_set(gate *g, int *flag)
{
    pthread_mutex_lock(&g->mu);
    *flag = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void gate_hook(const mcr_snapshot *o, const mcr_snapshot *n, const mcr_diff *d, void *arg)
{
    gate *g = arg;
    (void)o, (void)n, (void)d;
    if (g->entered)
        return;
    gate_set(g, &g->entered);
    gate_wait(g, &g->open);
}

static void *gate_publisher(void *arg)
{
    gate *g = arg;
    g->publish_rc = mcr_router_publish(g->router, g->snap, NULL);
    return NULL;
}

START_TEST(nowait_does_not_wait)
{
    mcr_snapshot *s1 = snap_of(A "," B "," C, MCR_MODE_KETAMA, 1);
    mcr_snapshot *s2 = snap_of(A "," B "," C, MCR_MODE_KETAMA, 2);
    mcr_router *r = router_of(s1);
    mcr_error err = {0}, err2 = {0};
    gate g = {.router = r, .snap = s2};
    pthread_t t;

    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.cv, NULL);
    ck_assert_int_eq(mcr_router_set_local_state(r, C, MCR_STATE_DOWN, 0, &err), MCR_OK);
    ck_assert_int_eq(mcr_router_add_hook(r, gate_hook, &g), MCR_OK);
    ck_assert_int_eq(pthread_create(&t, NULL, gate_publisher, &g), 0);
    int entered = gate_wait(&g, &g.entered);
    int busy_set = entered
                       ? mcr_router_set_local_state(r, B, MCR_STATE_DOWN, MCR_ROUTER_NOWAIT, &err)
                       : MCR_ERR_INVALID;
    int busy_clear =
        entered ? mcr_router_clear_local_state(r, C, MCR_ROUTER_NOWAIT, &err2) : MCR_ERR_INVALID;
    gate_set(&g, &g.open);
    pthread_join(t, NULL);
    int after_set = mcr_router_set_local_state(r, B, MCR_STATE_DOWN, MCR_ROUTER_NOWAIT, NULL);
    int after_clear = mcr_router_clear_local_state(r, C, MCR_ROUTER_NOWAIT, NULL);
    uint64_t epoch = mcr_router_epoch(r);
    int b = current_state(r, B), c = current_state(r, C);
    mcr_router_free(r);
    pthread_cond_destroy(&g.cv);
    pthread_mutex_destroy(&g.mu);
    mcr_snapshot_unref(s1);
    mcr_snapshot_unref(s2);

    ck_assert_msg(entered, "the publisher's hook never ran");
    ck_assert_int_eq(busy_set, MCR_ERR_BUSY);
    ck_assert_msg(strstr(err.message, "another writer") != NULL, "%s", err.message);
    ck_assert_int_eq(busy_clear, MCR_ERR_BUSY);
    ck_assert_msg(strstr(err2.message, "mcr_router_clear_local_state") != NULL, "%s",
                  err2.message);
    ck_assert_int_eq(g.publish_rc, MCR_OK);
    ck_assert_int_eq(after_set, MCR_OK);
    ck_assert_int_eq(after_clear, MCR_OK);
    ck_assert_uint_eq(epoch, 2);
    ck_assert_int_eq(b, MCR_STATE_DOWN);
    ck_assert_int_eq(c, MCR_STATE_ACTIVE);
}
END_TEST

/* Watchers publish from the published snapshot: a snapshot file of the
 * published snapshot is "no change" (not stale for the local state's
 * checksum), and a server file's changes keep the local states. Both are
 * the watchers' first loads, made in mcr_watcher_new(). */
START_TEST(watchers_use_the_published_snapshot)
{
    mcr_snapshot *s1 = snap_of(A "," B, MCR_MODE_KETAMA, 1);
    mcr_router *r = router_of(s1);
    mcr_error err = {0};
    mcr_watcher *w = NULL;
    char *dir = tu_tmpdir("overlay-watch");
    char snap_path[512], list_path[512];

    ck_assert_int_eq(mcr_router_set_local_state(r, A, MCR_STATE_DOWN, 0, &err), MCR_OK);
    snprintf(snap_path, sizeof(snap_path), "%s/fleet.snap", dir);
    ck_assert_int_eq(mcr_snapshot_save(s1, snap_path, &err), MCR_OK);
    ck_assert_msg(mcr_watcher_new(r, snap_path, MCR_WATCH_SNAPSHOT_FILE, NULL, NULL, &w, &err) ==
                      MCR_OK,
                  "%s", err.message);
    mcr_watcher_free(w);
    w = NULL;
    ck_assert_uint_eq(mcr_router_epoch(r), 1);

    snprintf(list_path, sizeof(list_path), "%s/servers", dir);
    const char *list = "10.0.0.1:11211\n10.0.0.2:11211\n10.0.0.3:11211\n";
    tu_write_file(list_path, list, strlen(list));
    ck_assert_msg(mcr_watcher_new(r, list_path, MCR_WATCH_SERVER_FILE, NULL, NULL, &w, &err) ==
                      MCR_OK,
                  "%s", err.message);
    mcr_watcher_free(w);
    ck_assert_uint_eq(mcr_router_epoch(r), 2);
    ck_assert_int_eq(published_state(r, A), MCR_STATE_ACTIVE);
    ck_assert_int_eq(current_state(r, A), MCR_STATE_DOWN);
    ck_assert_int_eq(current_state(r, C), MCR_STATE_ACTIVE);

    tu_tmpdir_free(dir);
    mcr_router_free(r);
    mcr_snapshot_unref(s1);
}
END_TEST

/* Readers under overlay changes and publishes: every snapshot acquired is
 * whole (its epoch that of a published one, the owner of a key ACTIVE in
 * it), a reader sees the generation never go back, and everything
 * replaced is reclaimed (the sanitizers see any early free, any leak). */
#define OV_READERS 3
#define OV_CHANGES 3000
#define OV_MS 4000

typedef struct ov_stress {
    mcr_router *router;
    atomic_int stop;
    atomic_long reads;
    atomic_int bad;
    char bad_msg[160];
} ov_stress;

static void *ov_reader(void *arg)
{
    ov_stress *st = arg;
    uint64_t last_gen = 0;
    unsigned k = 0;
    while (!atomic_load(&st->stop)) {
        uint64_t g = mcr_router_generation(st->router);
        const mcr_snapshot *s = mcr_router_acquire(st->router);
        char key[24];
        int len = snprintf(key, sizeof(key), "k%u", k++);
        uint32_t i = mcr_snapshot_locate(s, key, (size_t)len);
        mcr_server_desc d;
        int ok = mcr_snapshot_server(s, i, &d) == MCR_OK && d.state == MCR_STATE_ACTIVE;
        mcr_router_release(st->router, s);
        if ((k & 63) == 0) {
            mcr_local_state *v = NULL;
            size_t n = 0;
            if (mcr_router_local_states(st->router, &v, &n, NULL) == MCR_OK)
                mcr_router_local_states_free(v);
            mcr_snapshot_unref(mcr_router_published(st->router));
        }
        if ((!ok || g < last_gen) && atomic_exchange(&st->bad, 1) == 0)
            snprintf(st->bad_msg, sizeof(st->bad_msg), "%s (generation %llu after %llu)",
                     ok ? "generation went back" : "a key's owner is not ACTIVE",
                     (unsigned long long)g, (unsigned long long)last_gen);
        last_gen = g;
        atomic_fetch_add(&st->reads, 1);
    }
    return NULL;
}

START_TEST(readers_under_overlay_changes)
{
    mcr_snapshot *s1 = snap_of(A "," B "," C "," D, MCR_MODE_KETAMA, 1);
    ov_stress st = {.router = router_of(s1)};
    pthread_t rd[OV_READERS];
    static const char *const ids[] = {A, B, C, D};
    int64_t end = mcr_test_now_ms() + mcr_test_ms(OV_MS);
    uint64_t epoch = 1;
    int changes = 0, refused = 0;

    atomic_init(&st.stop, 0);
    atomic_init(&st.reads, 0);
    atomic_init(&st.bad, 0);
    for (int i = 0; i < OV_READERS; i++)
        ck_assert_int_eq(pthread_create(&rd[i], NULL, ov_reader, &st), 0);
    for (int i = 0; i < OV_CHANGES && mcr_test_now_ms() < end; i++) {
        const char *id = ids[(unsigned)i * 7u % 4u];
        int rc;
        if (i % 50 == 49) {
            mcr_snapshot *s = snap_of(A "," B "," C "," D, MCR_MODE_KETAMA, ++epoch);
            rc = mcr_router_publish(st.router, s, NULL);
            mcr_snapshot_unref(s);
        } else if (i % 3 == 0) {
            rc = mcr_router_clear_local_state(st.router, id, MCR_ROUTER_NOWAIT, NULL);
        } else if (i % 3 == 1) {
            rc = mcr_router_set_local_state(st.router, id, MCR_STATE_DOWN, MCR_ROUTER_NOWAIT, NULL);
        } else {
            rc = mcr_router_set_local_state(st.router, id, MCR_STATE_DRAINING, 0, NULL);
        }
        changes += rc == MCR_OK;
        refused += rc == MCR_ERR_EMPTY || rc == MCR_ERR_UNKNOWN || rc == MCR_ERR_BUSY;
        EXPECT_MSG(rc == MCR_OK || rc == MCR_ERR_EMPTY || rc == MCR_ERR_UNKNOWN ||
                       rc == MCR_ERR_BUSY,
                   "change %d: %d", i, rc);
    }
    atomic_store(&st.stop, 1);
    for (int i = 0; i < OV_READERS; i++)
        pthread_join(rd[i], NULL);
    ck_assert_msg(!atomic_load(&st.bad), "%s", st.bad_msg);
    ck_assert_int_gt(changes, 100);
    ck_assert_int_gt(atomic_load(&st.reads), 100);
    ck_assert_uint_eq(mcr_router_epoch(st.router), epoch);
    ck_assert_int_eq(mcr_router_reclaim(st.router, 0, NULL), MCR_OK);
    ck_assert_uint_eq(tu_router_retired(st.router), 0);
    (void)refused;
    mcr_router_free(st.router);
    mcr_snapshot_unref(s1);
}
END_TEST

static Suite *overlay_suite(void)
{
    Suite *s = suite_create("router_overlay");
    TCase *tc = tcase_create("overlay");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, local_state_applied);
    tcase_add_test(tc, publish_keeps_local_states);
    tcase_add_test(tc, local_state_refusals);
    tcase_add_test(tc, held_local_states);
    tcase_add_test(tc, hooks_see_overlay_changes);
    tcase_add_test(tc, nowait_does_not_wait);
    tcase_add_test(tc, watchers_use_the_published_snapshot);
    tcase_add_test(tc, readers_under_overlay_changes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(overlay_suite());
}
