/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_migrate.c: keys copied per second by mcr_migrate_run() in a resize from 4 to 5 real memcached servers, against pipelined plain reads of the same keys in the same run. */
/*
 * Usage: bench_migrate [--quick] [--keys N] [--reps R]
 *
 * Five memcached servers on 127.0.0.1 (ports the kernel picks). Each
 * repetition: flush every server, store N keys (100-byte values) through a
 * pool on the four-server snapshot A, read every key the resize moves once
 * through the same pool with 128 gets in flight (the reference: what a
 * plain read of those keys costs), then time mcr_migrate_run(A, B), which
 * lists each old server with lru_crawler metadump and copies the moved
 * keys (a get at the old owner, an add at the new one, 64 in flight, no
 * rate limit), and check that every moved key is now at its new owner.
 * Prints RESULT lines (medians over the repetitions) and the ratio of
 * keys copied per second to keys read per second: a copy is a read plus
 * an add, plus the dump, so about 0.5 is what the work itself allows.
 */
#include <event2/event.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchutil.h"
#include "mcroute.h"
#include "mcroute_migrate.h"
#include "mcroute_pool.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"
#include "realserver.h"

#define NSERVERS 5
#define DEPTH 128
#define MAX_REPS 51

const char *bench_program = "bench_migrate";
static rs_proc mc[NSERVERS];
static int done_count, errors;

static mcr_snapshot *snap_of(int n, uint64_t epoch)
{
    mcr_config *cfg = mcr_config_new();
    mcr_snapshot *s = NULL;
    mcr_error err;
    for (int i = 0; i < n; i++)
        if (mcr_config_add_server(cfg, mc[i].addr, mc[i].port, 1, &err) != MCR_OK) {
            fprintf(stderr, "bench_migrate: %s\n", err.message);
            exit(1);
        }
    if (mcr_snapshot_new(cfg, epoch, &s, &err) != MCR_OK) {
        fprintf(stderr, "bench_migrate: %s\n", err.message);
        exit(1);
    }
    mcr_config_free(cfg);
    return s;
}

static void count_cb(const mcr_result *res, void *arg)
{
    int want_hit = *(int *)arg;
    if (res->status != MCR_OK || (want_hit && res->reply != MCR_REPLY_HIT))
        errors++;
    done_count++;
}

/* Submit n requests of op for keys[i] (index list idx), DEPTH at a time. */
static void run_ops(struct event_base *base, mcr_pool *pool, mcr_op op, char **keys,
                    const size_t *idx, size_t n, const char *value, int want_hit)
{
    static int hit_flag[2] = {0, 1};
    size_t next = 0;
    done_count = 0;
    while ((size_t)done_count < n) {
        while (next < n && next - (size_t)done_count < DEPTH) {
            mcr_request q;
            memset(&q, 0, sizeof(q));
            q.op = op;
            q.key = keys[idx ? idx[next] : next];
            q.key_len = strlen(q.key);
            if (value != NULL) {
                q.value = value;
                q.value_len = strlen(value);
            }
            mcr_error err;
            if (mcr_pool_submit(pool, &q, count_cb, &hit_flag[want_hit], &err) != MCR_OK) {
                fprintf(stderr, "bench_migrate: %s\n", err.message);
                exit(1);
            }
            next++;
        }
        event_base_loop(base, EVLOOP_ONCE);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    size_t nkeys = 50000;
    unsigned reps = 5;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            nkeys = 3000;
            reps = 1;
        } else if (strcmp(argv[i], "--keys") == 0 && i + 1 < argc) {
            nkeys = strtoul(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = (unsigned)strtoul(argv[++i], NULL, 10);
        } else {
            fprintf(stderr, "usage: bench_migrate [--quick] [--keys N] [--reps R]\n");
            return 2;
        }
    }
    if (nkeys < 100 || nkeys > 10000000 || reps < 1 || reps > MAX_REPS) {
        fprintf(stderr, "bench_migrate: --keys 100..10000000, --reps 1..%d\n", MAX_REPS);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    for (int i = 0; i < NSERVERS; i++)
        if (rs_memcached_start(&mc[i], "127.0.0.1", 0, NULL, 10000) != 0) {
            fprintf(stderr, "bench_migrate: memcached %d did not start (%s)\n", i,
                    rs_memcached_path());
            return 1;
        }
    mcr_snapshot *a = snap_of(NSERVERS - 1, 1), *b = snap_of(NSERVERS, 2);
    char **keys = bench_xmalloc(nkeys * sizeof(*keys));
    size_t *moved = bench_xmalloc(nkeys * sizeof(*moved));
    size_t nmoved = 0;
    for (size_t i = 0; i < nkeys; i++) {
        keys[i] = bench_xmalloc(32);
        snprintf(keys[i], 32, "bm:%zu", i);
        mcr_server_desc da, db;
        mcr_snapshot_server(a, mcr_snapshot_locate(a, keys[i], strlen(keys[i])), &da);
        mcr_snapshot_server(b, mcr_snapshot_locate(b, keys[i], strlen(keys[i])), &db);
        if (strcmp(da.id, db.id) != 0)
            moved[nmoved++] = i;
    }
    char value[101];
    memset(value, 'v', 100);
    value[100] = '\0';
    struct event_base *base = event_base_new();
    mcr_router *ra = NULL, *rb = NULL;
    mcr_pool *pa = NULL, *pb = NULL;
    if (base == NULL || mcr_router_new(a, &ra, NULL) != MCR_OK ||
        mcr_router_new(b, &rb, NULL) != MCR_OK ||
        mcr_pool_new(base, ra, NULL, &pa, NULL) != MCR_OK ||
        mcr_pool_new(base, rb, NULL, &pb, NULL) != MCR_OK) {
        fprintf(stderr, "bench_migrate: setup failed\n");
        return 1;
    }
    double read_rate[MAX_REPS], copy_rate[MAX_REPS];
    int failed = 0;
    for (unsigned r = 0; r < reps; r++) {
        for (int i = 0; i < NSERVERS; i++) { /* flush_all through B's pool: all five */
            mcr_server_desc d;
            mcr_snapshot_server(b, (size_t)i, &d);
            mcr_request q;
            memset(&q, 0, sizeof(q));
            q.op = MCR_OP_FLUSH_ALL;
            q.server = d.id;
            mcr_owned_result o;
            mcr_pool_exec(pb, &q, &o);
            if (o.status != MCR_OK)
                failed = 1;
            mcr_owned_result_clear(&o);
        }
        errors = 0;
        run_ops(base, pa, MCR_OP_SET, keys, NULL, nkeys, value, 0);
        uint64_t t0 = bench_now_ns();
        run_ops(base, pa, MCR_OP_GET, keys, moved, nmoved, NULL, 1);
        uint64_t t1 = bench_now_ns();
        read_rate[r] = (double)nmoved / ((double)(t1 - t0) / 1e9);
        mcr_migrate_options mo;
        mcr_migrate_options_init(&mo);
        mcr_migrate_report rep;
        mcr_error err;
        t0 = bench_now_ns();
        int rc = mcr_migrate_run(a, b, &mo, &rep, &err);
        t1 = bench_now_ns();
        copy_rate[r] = (double)rep.copied / ((double)(t1 - t0) / 1e9);
        if (rc != MCR_OK || rep.copied != nmoved) {
            fprintf(stderr, "bench_migrate: rep %u: copied %" PRIu64 " of %zu moved: %s\n", r,
                    rep.copied, nmoved, rc != MCR_OK ? err.message : "");
            failed = 1;
        }
        mcr_migrate_report_clear(&rep);
        /* every moved key is at its new owner */
        run_ops(base, pb, MCR_OP_GET, keys, moved, nmoved, NULL, 1);
        if (errors != 0) {
            fprintf(stderr, "bench_migrate: rep %u: %d reads failed or missed\n", r, errors);
            failed = 1;
        }
    }
    qsort(read_rate, reps, sizeof(double), cmp_double);
    qsort(copy_rate, reps, sizeof(double), cmp_double);
    double rr = read_rate[reps / 2], cr = copy_rate[reps / 2];
    printf("INFO keys=%zu moved=%zu reps=%u servers=%d->%d build=%s\n", nkeys, nmoved, reps,
           NSERVERS - 1, NSERVERS, MCR_BENCH_BUILD_TYPE);
    printf("RESULT plain_read_moved_keys keys_per_s=%.0f\n", rr);
    printf("RESULT migrate_copy keys_per_s=%.0f\n", cr);
    printf("RATIO migrate_copy/plain_read keys_per_s=%.2fx\n", cr / rr);
    mcr_pool_free(pa);
    mcr_pool_free(pb);
    mcr_router_free(ra);
    mcr_router_free(rb);
    event_base_free(base);
    mcr_snapshot_unref(a);
    mcr_snapshot_unref(b);
    for (size_t i = 0; i < nkeys; i++)
        free(keys[i]);
    free(keys);
    free(moved);
    for (int i = 0; i < NSERVERS; i++)
        rs_stop(&mc[i]);
    return failed;
}
