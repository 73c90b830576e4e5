/* SPDX-License-Identifier: BSD-3-Clause */
/* test_router_util.c: what test_router.c, test_watcher.c and test_router_overlay.c share (test_router_util.h). */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "test_router_util.h"
#include "testutil.h"
#include "testutil_config.h"

mcr_snapshot *snap_of(const char *list, mcr_mode mode, uint64_t epoch)
{
    mcr_error err = {0};
    mcr_config *cfg = tu_config(list, mode, MCR_HASH_COUNT);
    mcr_snapshot *s = NULL;
    ck_assert_msg(mcr_snapshot_new(cfg, epoch, &s, &err) == MCR_OK, "%s", err.message);
    mcr_config_free(cfg);
    return s;
}

mcr_router *router_of(mcr_snapshot *initial)
{
    mcr_router *r = NULL;
    ck_assert_int_eq(mcr_router_new(initial, &r, NULL), MCR_OK);
    ck_assert_ptr_nonnull(r);
    return r;
}

void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

void log_hook(const mcr_snapshot *old_snap, const mcr_snapshot *new_snap,
                     const mcr_diff *diff, void *arg)
{
    hook_log *h = arg;
    h->calls++;
    if (new_snap == NULL || (old_snap == NULL && diff != NULL)) {
        h->bad++;
        return;
    }
    h->last_new = mcr_snapshot_epoch(new_snap);
    if (old_snap == NULL) {
        h->null_old++;
        return;
    }
    h->last_old = mcr_snapshot_epoch(old_snap);
    if (diff == NULL) {
        h->null_diff++;
        return;
    }
    h->last_moved = mcr_diff_moved(diff);
    if (h->last_new <= h->last_old || h->last_moved < 0.0 || h->last_moved > 1.0)
        h->bad++;
}

mcr_changes *changes_add(const char *host, int port, uint32_t weight)
{
    mcr_changes *ch = mcr_changes_new();
    mcr_server_desc d = {.host = host, .port = port, .weight = weight, .state = MCR_STATE_ACTIVE};
    ck_assert_ptr_nonnull(ch);
    ck_assert_int_eq(mcr_changes_add(ch, &d, NULL), MCR_OK);
    return ch;
}

mcr_changes *changes_weight(const char *id, uint32_t w)
{
    mcr_changes *ch = mcr_changes_new();
    ck_assert_ptr_nonnull(ch);
    ck_assert_int_eq(mcr_changes_set_weight(ch, id, w, NULL), MCR_OK);
    return ch;
}

static void reader_error(reader *rd, const char *what, unsigned long long a, unsigned long long b)
{
    if (rd->errors++ == 0)
        snprintf(rd->first_error, sizeof rd->first_error, "reader %u: %s (%llu, %llu)", rd->id,
                 what, a, b);
}

/* The server a lookup returned must be a valid, active server of the
 * snapshot it was made in. Touching its strings lets ASan and TSan see a
 * snapshot freed too early. */
static void check_result(reader *rd, const mcr_snapshot *snap, uint32_t idx)
{
    mcr_server_desc d;
    size_t n = mcr_snapshot_server_count(snap);
    if (idx >= n) {
        reader_error(rd, "server index out of range", idx, n);
        return;
    }
    if (mcr_snapshot_server(snap, idx, &d) != MCR_OK || d.id == NULL || d.host == NULL ||
        d.id[0] == '\0' || d.host[0] == '\0' || d.port <= 0 || d.weight == 0)
        reader_error(rd, "invalid server description", idx, n);
    else if (d.state != MCR_STATE_ACTIVE)
        reader_error(rd, "a key on a server that is not active", idx, (unsigned)d.state);
}

void *reader_main(void *arg)
{
    reader *rd = arg;
    stress *st = rd->st;
    tu_rng rng;
    uint64_t last_epoch = 0;

    tu_rng_init(&rng, 100 + rd->id);
    while (!atomic_load_explicit(&st->stop, memory_order_relaxed)) {
        unsigned mode = tu_below(&rng, 8);
        if (mode < 5) {
            /* Several lookups against one snapshot. */
            const mcr_snapshot *snap = mcr_router_acquire(st->router);
            uint64_t e = mcr_snapshot_epoch(snap);
            if (e < last_epoch)
                reader_error(rd, "epoch went backwards (acquire)", e, last_epoch);
            last_epoch = e;
            if (strlen(mcr_snapshot_checksum(snap)) != 32)
                reader_error(rd, "bad checksum", 0, 0);
            for (int i = 0; i < 8; i++) {
                unsigned k = tu_below(&rng, STRESS_KEYS);
                check_result(rd, snap, mcr_snapshot_locate(snap, st->keys[k], st->key_len[k]));
                rd->lookups++;
            }
            if (mcr_snapshot_epoch(snap) != e)
                reader_error(rd, "snapshot changed under a section", e, 0);
            mcr_router_release(st->router, snap);
            rd->sections++;
        } else if (mode == 6 && tu_below(&rng, 2) == 0) {
            /* The index lookup: epochs in order, and an index below the
             * storm's largest table (24 servers; the snapshot itself is
             * not at hand to check it against). */
            uint64_t e = 0;
            unsigned k = tu_below(&rng, STRESS_KEYS);
            uint32_t idx = mcr_router_locate_index(st->router, st->keys[k], st->key_len[k], &e);
            if (idx == UINT32_MAX)
                reader_error(rd, "mcr_router_locate_index found no snapshot", e, 0);
            else if (idx >= 24)
                reader_error(rd, "locate_index: server index out of range", idx, e);
            else if (e < last_epoch)
                reader_error(rd, "epoch went backwards (locate_index)", e, last_epoch);
            last_epoch = e > last_epoch ? e : last_epoch;
            rd->lookups++;
        } else if (mode < 7) {
            /* The convenience lookup. */
            mcr_route route;
            unsigned k = tu_below(&rng, STRESS_KEYS);
            int rc = mcr_router_locate(st->router, st->keys[k], st->key_len[k], &route);
            if (rc != MCR_OK)
                reader_error(rd, "mcr_router_locate failed", (unsigned long long)-rc, 0);
            else if (route.epoch < last_epoch)
                reader_error(rd, "epoch went backwards (locate)", route.epoch, last_epoch);
            else if (route.host[0] == '\0' || route.port <= 0)
                reader_error(rd, "empty route", route.epoch, 0);
            last_epoch = route.epoch > last_epoch ? route.epoch : last_epoch;
            rd->lookups++;
        } else {
            /* A counted reference, kept across publishes for a while. */
            mcr_snapshot *snap = mcr_router_current(st->router);
            uint64_t e = mcr_snapshot_epoch(snap);
            if (e < last_epoch)
                reader_error(rd, "epoch went backwards (current)", e, last_epoch);
            last_epoch = e;
            for (int i = 0; i < 64; i++) {
                unsigned k = tu_below(&rng, STRESS_KEYS);
                check_result(rd, snap, mcr_snapshot_locate(snap, st->keys[k], st->key_len[k]));
                rd->lookups++;
            }
            mcr_snapshot_unref(snap);
            rd->currents++;
        }
    }
    return NULL;
}
