/* SPDX-License-Identifier: BSD-3-Clause */
/* txcopy.c: a moved key's value copied from its previous owner to its current one during a transition, verified by the source's CAS, so that the copy never outlives a write acknowledged meanwhile. */
#include "pool_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/*
 * The copy (R, W, C), every request pinned to its server and in meta:
 *   R  the source's value, flags, TTL and CAS (mg v f t c), unless the
 *      caller has read it already (a fallback read);
 *   W  an add of that value at the destination (ms ... ME c): never over
 *      a value there, and it returns the stored item's CAS;
 *   C  the source's CAS read again. Unchanged: the copy stands. Changed,
 *      or the key gone, or its TTL moved: a write reached the source
 *      between R and C, and the copy is removed from the destination by
 *      its CAS (md C<cas>), so that a value written there since is kept.
 *
 * Why that suffices: every write of a moved key reaches the source
 * (its owner in the transition's `from`) before it reaches the
 * destination, when its effect there depends on what the destination
 * holds (a delete, a touch, or the delete that stands for add, incr,
 * append...; transition.c). A write whose source part comes before R is
 * in the value read; one that comes between R and C is seen by C and the
 * copy goes; one that comes after C reaches the destination after W, and
 * applies to the copy. A set reaches both owners at once: at the
 * destination before W it makes W fail, after W it replaces the copy.
 */

/* A TTL read again at C may differ from R's by the seconds between them
 * (memcached's clock ticks once a second): more means it was touched. */
#define TTL_SLACK_S 2

typedef struct mcr__txcopy mcr__txcopy;

struct mcr__txcopy {
    mcr_pool *p;
    mcr__txcopy_cb cb;
    void *arg;
    char src[256], dst[256]; /* server ids: looked up at each step */
    uint64_t cas_src, cas_dst;
    int64_t ttl;             /* R's remaining TTL, -1: never */
    uint64_t read_ns;
    uint32_t flags;
    char *value;
    size_t value_len;
    size_t key_len;
    char key[];
};

static mcr__pool_server *server_named(mcr_pool *p, const char *id)
{
    for (size_t i = 0; i < p->nservers; i++)
        if (!p->servers[i]->retired && strcmp(p->servers[i]->id, id) == 0)
            return p->servers[i];
    return NULL;
}

static void end(mcr__txcopy *x, mcr__txcopy_outcome outcome)
{
    mcr__pool_server *d = server_named(x->p, x->dst);
    if (d != NULL) {
        if (outcome == MCR__TXC_STORED)
            d->warm_writes++;
        else if (outcome == MCR__TXC_PRESENT)
            d->warm_skipped++;
        else if (outcome == MCR__TXC_UNDONE)
            d->warm_undone++;
        else if (outcome == MCR__TXC_FAILED)
            d->warm_failures++;
    }
    if (x->cb != NULL)
        x->cb(outcome, x->arg);
    free(x->value);
    free(x);
}

/* Submit q to the server of that id, in meta; MCR_OK or why not. */
static int send_to(mcr__txcopy *x, const char *id, mcr_request *q, mcr_pool_cb cb)
{
    mcr__pool_server *s = x->p->freeing ? NULL : server_named(x->p, id);
    if (s == NULL)
        return MCR_ERR_CANCELLED;
    q->key = x->key;
    q->key_len = x->key_len;
    return mcr__submit(x->p, q, s, 1, cb, x, NULL);
}

/* The exptime that gives an item `ttl` seconds more (memcached reads
 * values over 30 days as absolute Unix times); 0 for -1 (never); -1 when
 * it expires now and is not worth writing. */
static int64_t exptime_of(int64_t ttl)
{
    if (ttl == -1)
        return 0;
    if (ttl <= 0)
        return -1;
    if (ttl > 30 * 24 * 3600)
        return (int64_t)time(NULL) + ttl;
    return ttl;
}

static void on_undo(const mcr_result *res, void *arg)
{
    (void)res; /* DELETED, or EXISTS / MISS: a write replaced or removed it first */
    end(arg, MCR__TXC_UNDONE);
}

static void undo(mcr__txcopy *x)
{
    static const mcr_request zero;
    mcr_request q = zero;
    q.op = MCR_OP_DELETE;
    q.cas = x->cas_dst;
    if (send_to(x, x->dst, &q, on_undo) != MCR_OK)
        end(x, MCR__TXC_FAILED);
}

static void on_check(const mcr_result *res, void *arg)
{
    mcr__txcopy *x = arg;
    if (res->status != MCR_OK) {
        /* the source cannot say: the copy cannot be trusted */
        undo(x);
        return;
    }
    int same = res->reply == MCR_REPLY_HIT && res->cas == x->cas_src;
    if (same && res->ttl != MCR_TTL_UNKNOWN) {
        if ((res->ttl == -1) != (x->ttl == -1)) {
            same = 0;
        } else if (x->ttl != -1) {
            int64_t passed = (int64_t)((mcr__now_ns() - x->read_ns) / 1000000000u);
            int64_t want = x->ttl - passed;
            same = res->ttl >= want - TTL_SLACK_S && res->ttl <= want + TTL_SLACK_S;
        }
    }
    if (same)
        end(x, MCR__TXC_STORED);
    else
        undo(x);
}

static void on_add(const mcr_result *res, void *arg)
{
    mcr__txcopy *x = arg;
    if (res->status != MCR_OK) {
        end(x, MCR__TXC_FAILED);
        return;
    }
    if (res->reply != MCR_REPLY_STORED) {
        end(x, MCR__TXC_PRESENT); /* a value there already: never older */
        return;
    }
    x->cas_dst = res->cas;
    static const mcr_request zero;
    mcr_request q = zero;
    q.op = MCR_OP_GETS;
    if (send_to(x, x->src, &q, on_check) != MCR_OK)
        undo(x);
}

/* W, from the value R read (res: a hit). */
static void add(mcr__txcopy *x, const mcr_result *res)
{
    int64_t ex = exptime_of(res->ttl);
    if (ex < 0 || res->cas == 0) {
        end(x, ex < 0 ? MCR__TXC_ABSENT : MCR__TXC_FAILED);
        return;
    }
    x->cas_src = res->cas;
    x->ttl = res->ttl;
    x->flags = res->flags;
    x->value_len = res->value_len;
    x->value = malloc(res->value_len ? res->value_len : 1);
    if (x->value == NULL) {
        end(x, MCR__TXC_FAILED);
        return;
    }
    memcpy(x->value, res->value, res->value_len);
    static const mcr_request zero;
    mcr_request q = zero;
    q.op = MCR_OP_ADD;
    q.value = x->value;
    q.value_len = x->value_len;
    q.flags = x->flags;
    q.exptime = ex;
    if (send_to(x, x->dst, &q, on_add) != MCR_OK)
        end(x, MCR__TXC_FAILED);
}

static void on_read(const mcr_result *res, void *arg)
{
    mcr__txcopy *x = arg;
    if (res->status != MCR_OK)
        end(x, MCR__TXC_FAILED);
    else if (res->reply != MCR_REPLY_HIT)
        end(x, MCR__TXC_ABSENT);
    else
        add(x, res);
}

int mcr__txcopy_start(mcr_pool *p, const void *key, size_t len, const char *src, const char *dst,
                      const mcr_result *read, uint64_t read_ns, mcr__txcopy_cb cb, void *arg)
{
    if (p->freeing)
        return MCR_ERR_CANCELLED;
    mcr__txcopy *x = calloc(1, sizeof(*x) + len);
    if (x == NULL)
        return MCR_ERR_NOMEM;
    x->p = p;
    x->cb = cb;
    x->arg = arg;
    snprintf(x->src, sizeof(x->src), "%s", src);
    snprintf(x->dst, sizeof(x->dst), "%s", dst);
    memcpy(x->key, key, len);
    x->key_len = len;
    if (read != NULL) {
        /* the caller's callback runs on: report through cb only */
        x->read_ns = read_ns;
        add(x, read);
        return MCR_OK;
    }
    x->read_ns = mcr__now_ns();
    static const mcr_request zero;
    mcr_request q = zero;
    q.op = MCR_OP_GETS;
    int rc = send_to(x, x->src, &q, on_read);
    if (rc != MCR_OK) {
        free(x);
        return rc;
    }
    return MCR_OK;
}
