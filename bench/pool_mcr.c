/* SPDX-License-Identifier: BSD-3-Clause */
/* pool_mcr.c: bench_pool's mcroute side: pipelined gets and sets and multi-gets through an mcr_pool with every reply checked, and the pool's memory per request in flight. */
#include <inttypes.h>
#include <malloc.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchutil.h"
#include "mcroute.h"
#include "mcroute_pool.h"
#include "pool_bench.h"
#include "pool_mcr.h"

typedef struct win win;

typedef struct slot {
    win *w;
    size_t idx;       /* key index */
    uint64_t t0;      /* submission */
    bool busy;
} slot;

struct win {
    mcr_pool *pool;
    bool set;
    bool batch;       /* no submission from callbacks: batches of `depth` */
    size_t next, done, n;
    slot *slots;
    bool in_submit;
    bool stop;
    checker *ck;
};

static void on_reply(const mcr_result *res, void *arg);

static void submit_one(win *w, slot *s, uint64_t t0)
{
    size_t i = w->next++;
    int rc;

    s->idx = i;
    s->t0 = t0 ? t0 : bench_now_ns();
    s->busy = true;
    w->in_submit = true;
    if (w->set)
        rc = mcr_pool_set(w->pool, W.key[i], W.len[i], W.val + i * VALUE_LEN, VALUE_LEN,
                          (uint32_t)i, 0, on_reply, s, NULL);
    else
        rc = mcr_pool_get(w->pool, W.key[i], W.len[i], on_reply, s, NULL);
    w->in_submit = false;
    if (rc != MCR_OK) {
        bench_bad(w->ck, "submitting key %zu: %s", i, mcr_strerror(rc));
        s->busy = false;
        w->stop = true;
        W.lat[w->done++] = 0;
    }
}

static void on_reply(const mcr_result *res, void *arg)
{
    slot *s = arg;
    win *w = s->w;
    uint64_t t = bench_now_ns();

    if (w->in_submit)
        bench_bad(w->ck, "callback of key %zu ran inside a submission (the contract says later)", s->idx);
    if (!s->busy) {
        bench_bad(w->ck, "second callback for key %zu", s->idx);
        return;
    }
    s->busy = false;
    W.lat[w->done++] = t - s->t0;
    if (res->status != MCR_OK) {
        bench_bad(w->ck, "key %zu: %s (%s)", s->idx, mcr_strerror(res->status),
            res->message ? res->message : "");
    } else if (w->set) {
        if (res->reply != MCR_REPLY_STORED)
            bench_bad(w->ck, "key %zu: set answered %s", s->idx, mcr_reply_name(res->reply));
    } else if (res->reply != MCR_REPLY_HIT) {
        bench_bad(w->ck, "key %zu: get answered %s", s->idx, mcr_reply_name(res->reply));
    } else {
        if (res->key_len != W.len[s->idx] || memcmp(res->key, W.key[s->idx], res->key_len) != 0)
            bench_bad(w->ck, "key %zu: the result names key \"%.*s\"", s->idx, (int)res->key_len,
                res->key);
        check_value(w->ck, s->idx, res->value, res->value_len, res->flags);
    }
    if (!w->batch && !w->stop && w->next < w->n)
        submit_one(w, s, 0);
}

/* n requests (keys 0..n-1), depth in flight. Fills W.lat[0..n). */
void pool_pipeline(mcr_pool *pool, bool set, bool batch, size_t n, unsigned depth,
                          checker *ck)
{
    win w = {.pool = pool, .set = set, .batch = batch, .n = n, .ck = ck};
    w.slots = bench_xmalloc(depth * sizeof(*w.slots));
    for (unsigned j = 0; j < depth; j++)
        w.slots[j] = (slot){.w = &w};
    need_lat(n);
    if (!batch) {
        for (unsigned j = 0; j < depth && w.next < n && !w.stop; j++)
            submit_one(&w, &w.slots[j], 0);
        mcr_pool_wait(pool);
    } else {
        while (w.next < n && !w.stop) {
            uint64_t t0 = bench_now_ns();
            for (unsigned j = 0; j < depth && w.next < n && !w.stop; j++)
                submit_one(&w, &w.slots[j], t0);
            mcr_pool_wait(pool);
        }
    }
    if (w.done != w.next)
        bench_bad(ck, "%zu requests submitted, %zu called back", w.next, w.done);
    if (w.next < n)
        bench_bad(ck, "stopped after %zu of %zu requests", w.next, n);
    free(w.slots);
}

/* Multi-gets through the pool. */
typedef struct mwin mwin;

typedef struct mslot {
    mwin *w;
    size_t first, m;  /* keys first .. first+m-1 */
    size_t got;       /* key callbacks */
    uint32_t serial;  /* which multi-get: duplicates are told by it */
    uint64_t t0;
    bool busy;
} mslot;

struct mwin {
    mcr_pool *pool;
    size_t next, total;  /* multi-gets submitted, to do */
    size_t done;
    size_t chunks;       /* multi-gets per pass over the keys */
    mslot *slots;
    bool in_submit, stop;
    checker *ck;
};

static void on_mkey(const mcr_result *res, void *arg);
static void on_mdone(const mcr_result *res, void *arg);

static void msubmit(mwin *w, mslot *s)
{
    size_t j = w->next++;
    s->first = (j % w->chunks) * opt.mget_keys;
    s->m = opt.mget_keys;
    s->got = 0;
    s->busy = true;
    s->serial = ++W.serial;
    s->t0 = bench_now_ns();
    w->in_submit = true;
    int rc = mcr_pool_get_multi(w->pool, MCR_OP_GET, (const void *const *)(W.key + s->first),
                                W.len + s->first, s->m, on_mkey, on_mdone, s, NULL);
    w->in_submit = false;
    if (rc != MCR_OK) {
        bench_bad(w->ck, "submitting multi-get of keys %zu..: %s", s->first, mcr_strerror(rc));
        s->busy = false;
        w->stop = true;
        W.lat[w->done++] = 0;
    }
}

static void on_mkey(const mcr_result *res, void *arg)
{
    mslot *s = arg;
    mwin *w = s->w;
    size_t i;

    if (w->in_submit)
        bench_bad(w->ck, "a key callback ran inside mcr_pool_get_multi()");
    s->got++;
    if (res->status != MCR_OK) {
        bench_bad(w->ck, "multi-get key \"%.*s\": %s (%s)", (int)res->key_len, res->key,
            mcr_strerror(res->status), res->message ? res->message : "");
        return;
    }
    /* the key it answers is the one at res->index of those given: checked
     * against them byte for byte (as the floor checks its replies' keys) */
    i = s->first + res->index;
    if (res->index >= s->m || W.len[i] != res->key_len ||
        memcmp(W.key[i], res->key, res->key_len) != 0) {
        bench_bad(w->ck, "multi-get of keys %zu..%zu: a result for key \"%.*s\" at index %zu",
            s->first, s->first + s->m - 1, (int)res->key_len, res->key, res->index);
        return;
    }
    if (W.seen[i] == s->serial)
        bench_bad(w->ck, "key %zu reported twice by one multi-get", i);
    W.seen[i] = s->serial;
    if (res->reply != MCR_REPLY_HIT)
        bench_bad(w->ck, "key %zu: %s", i, mcr_reply_name(res->reply));
    else
        check_value(w->ck, i, res->value, res->value_len, res->flags);
}

static void on_mdone(const mcr_result *res, void *arg)
{
    mslot *s = arg;
    mwin *w = s->w;
    uint64_t t = bench_now_ns();

    if (w->in_submit)
        bench_bad(w->ck, "a done callback ran inside mcr_pool_get_multi()");
    if (!s->busy) {
        bench_bad(w->ck, "second done callback for keys %zu..", s->first);
        return;
    }
    s->busy = false;
    W.lat[w->done++] = t - s->t0;
    if (res->status != MCR_OK)
        bench_bad(w->ck, "multi-get of keys %zu..: %s (%s)", s->first, mcr_strerror(res->status),
            res->message ? res->message : "");
    if (s->got != s->m)
        bench_bad(w->ck, "multi-get of %zu keys: %zu key callbacks", s->m, s->got);
    else if (res->number != s->m)
        bench_bad(w->ck, "multi-get of %zu keys: done says %" PRIu64 " hits", s->m, res->number);
    if (!w->stop && w->next < w->total)
        msubmit(w, s);
}

/* total multi-gets of mget_keys keys each; W.lat[0..total). */
void pool_multiget(mcr_pool *pool, size_t total, checker *ck)
{
    mwin w = {.pool = pool, .total = total, .chunks = W.n / opt.mget_keys, .ck = ck};
    w.slots = bench_xmalloc(opt.mget_depth * sizeof(*w.slots));
    for (unsigned j = 0; j < opt.mget_depth; j++)
        w.slots[j] = (mslot){.w = &w};
    need_lat(total);
    for (unsigned j = 0; j < opt.mget_depth && w.next < total && !w.stop; j++)
        msubmit(&w, &w.slots[j]);
    mcr_pool_wait(pool);
    if (w.done != w.next)
        bench_bad(ck, "%zu multi-gets submitted, %zu done", w.next, w.done);
    free(w.slots);
}

/* Heap bytes in use (glibc: small blocks plus mmap()ed ones). */
static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* The memory per request in flight of `pool`, one that has served nothing
 * yet (the pool has no counter of its own): glibc's heap in use with
 * `depth` gets (and then mget_depth multi-gets) submitted and not yet sent,
 * minus before, over the count. That is the request blocks (from malloc the
 * first time; a pool that has served reuses them), their key copies and the
 * queued wire bytes with the connections' output arrays. Untimed; every
 * reply is checked as in the timed runs. */
void memory_info(mcr_pool *pool)
{
    char what[] = "memory per request in flight";
    checker ck = {what, 0};
    unsigned n = opt.depth < W.n ? opt.depth : (unsigned)W.n;
    win w = {.pool = pool, .batch = true, .n = n, .ck = &ck};
    mwin mw = {.pool = pool, .total = opt.mget_depth, .chunks = W.n / opt.mget_keys,
               .ck = &ck};

    need_lat(n > opt.mget_depth ? n : opt.mget_depth);
    w.slots = bench_xmalloc(n * sizeof(*w.slots));
    mw.slots = bench_xmalloc(opt.mget_depth * sizeof(*mw.slots));
    for (unsigned j = 0; j < n; j++)
        w.slots[j] = (slot){.w = &w};
    for (unsigned j = 0; j < opt.mget_depth; j++)
        mw.slots[j] = (mslot){.w = &mw};

    size_t h0 = heap_in_use();
    for (unsigned j = 0; j < n && !w.stop; j++)
        submit_one(&w, &w.slots[j], 0);
    /* Taken before the loop runs: the gets wait in the pool's routing queue
     * (routed and handed to their connections at the end of the loop's
     * pass), so this is the requests' own memory, not the connections'
     * buffers, which are per connection (docs/benchmarks.md). */
    size_t h1 = heap_in_use();
    mcr_pool_wait(pool);
    size_t h2 = heap_in_use();
    for (unsigned j = 0; j < opt.mget_depth && !mw.stop; j++)
        msubmit(&mw, &mw.slots[j]);
    size_t h3 = heap_in_use();
    mcr_pool_wait(pool);
    if (w.done != n || mw.done != opt.mget_depth)
        bench_bad(&ck, "%zu of %u gets, %zu of %u multi-gets answered", w.done, n, mw.done,
            opt.mget_depth);
    if (ck.bad)
        failures++;
    else
        printf("INFO pool_memory_per_request get_bytes=%.0f (%u gets in flight) "
               "multiget_bytes=%.0f per_key=%.0f (%u multi-gets of %u keys) (glibc mallinfo2 "
               "heap in use with them submitted minus before, on a pool that served nothing yet: "
               "the requests' own memory, not their connections' buffers; the pool has no memory "
               "counter)\n",
               ((double)h1 - (double)h0) / n, n, ((double)h3 - (double)h2) / opt.mget_depth,
               ((double)h3 - (double)h2) / opt.mget_depth / opt.mget_keys, opt.mget_depth,
               opt.mget_keys);
    free(w.slots);
    free(mw.slots);
}
