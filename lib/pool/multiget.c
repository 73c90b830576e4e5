/* SPDX-License-Identifier: BSD-3-Clause */
/* multiget.c: mcr_pool_get_multi(): keys deduplicated, grouped by server, one request per server and batch. */
#include "pool_internal.h"

#include <stdlib.h>

/* Keys of one server in one multi-get request: memcached reads a long get
 * line in pieces, so the bound only keeps one request's reply moderate. */
#define BATCH_MAX 256

/* ------------------------------------------------------------ multi-get */

/* A key-level failure of a multi-get, reported from the loop. */
static int mget_key_error(mcr_pool *p, mcr__pool_mget *m, mcr_op op, mcr__pool_server *s,
                          const void *key, size_t len, size_t user, int status, const char *msg)
{
    mcr__pool_req *r = mcr__req_new(p, 1, len, 1);
    if (r == NULL)
        return MCR_ERR_NOMEM;
    char *kb = mcr__req_key_area(r, 1, 1);
    if (len > 0)
        memcpy(kb, key, len);
    r->keys[0] = kb;
    r->klens[0] = len;
    r->khash[0] = mcr__key_hash(kb, len, 0);
    r->nkeys = 1;
    r->user_idx[0] = user;
    r->op = op; /* the multi-get's own: get or gets */
    r->mget = m;
    r->epoch = p->epoch;
    r->server = s;
    if (s != NULL)
        mcr__server_ref(s);
    m->outstanding++;
    mcr__fail_later(p, r, status, msg);
    return MCR_OK;
}

int mcr__get_multi(mcr_pool *p, mcr_op op, const void *const *keys, const size_t *lens,
                       size_t n, mcr_pool_cb key_cb, mcr_pool_cb done_cb, void *arg,
                       mcr_error *err)
{
    if (p == NULL || keys == NULL || lens == NULL || key_cb == NULL || done_cb == NULL)
        return mcr__pool_fail(err, MCR_ERR_INVALID,
                              "mcr_pool_get_multi: NULL pool, keys, lens or callback");
    if (n == 0)
        return mcr__pool_fail(err, MCR_ERR_INVALID, "mcr_pool_get_multi: no key (n is 0)");
    if (op != MCR_OP_GET && op != MCR_OP_GETS)
        return mcr__pool_fail(err, MCR_ERR_INVALID, "mcr_pool_get_multi: op %s, not get or gets",
                              mcr_op_name(op) != NULL ? mcr_op_name(op) : "(unknown)");
    if (p->freeing)
        return mcr__pool_fail(err, MCR_ERR_INVALID, "mcr_pool_get_multi: the pool is being freed");
    int rc = mcr__pool_refresh(p);
    if (rc != MCR_OK)
        return mcr__pool_fail(err, rc, "%s",
                              rc == MCR_ERR_EMPTY ? "the router holds no snapshot" : "out of memory");
    if (p->route_head != NULL)
        mcr__route_pending(p); /* the gets submitted before it go first */
    size_t tsize = 16;
    while (tsize < 2 * n)
        tsize *= 2;
    /* The working arrays live in the pool's scratch space, reused by every
     * multi-get (nothing here runs a callback, so none can start another
     * meanwhile): the next key of the same server, the dedupe table (first
     * user index by key hash), the valid keys (their lengths, pointers,
     * owners, and a flag per key), the servers touched, the key hashes. The
     * multi-get's own record and its chain of duplicates live until its
     * end. */
    size_t scratch = (2 * n + tsize) * sizeof(size_t) + n * sizeof(mcr__pool_server *) +
                     n * sizeof(void *) + 2 * n * sizeof(uint32_t) + n;
    if (scratch > p->mg_scratch_size) {
        void *grown = malloc(scratch);
        if (grown == NULL)
            return mcr__pool_fail(err, MCR_ERR_NOMEM, "out of memory");
        free(p->mg_scratch);
        p->mg_scratch = grown;
        p->mg_scratch_size = scratch;
    }
    size_t *next_in = p->mg_scratch;
    size_t *table = next_in + n;
    size_t *vlens = table + tsize;
    const void **vkeys = (const void **)(void *)(vlens + n);
    mcr__pool_server **touched = (mcr__pool_server **)(void *)(vkeys + n);
    uint32_t *khash = (uint32_t *)(void *)(touched + n); /* key i's hash */
    uint32_t *owner = khash + n;                         /* valid key v's owner */
    unsigned char *valid = (unsigned char *)(owner + n);
    mcr__pool_mget *m = malloc(sizeof(*m) + n * sizeof(size_t));
    if (m == NULL)
        return mcr__pool_fail(err, MCR_ERR_NOMEM, "out of memory");
    static const mcr__pool_mget zero; /* copied: a memset() is `rep stos` on x86-64 */
    *m = zero;
    size_t *next_dup = (size_t *)(void *)(m + 1);
    for (size_t i = 0; i < tsize; i++)
        table[i] = SIZE_MAX;
    m->key_cb = key_cb;
    m->done_cb = done_cb;
    m->arg = arg;
    m->next_dup = next_dup;
    m->epoch = p->epoch;
    m->outstanding = 1; /* held until every request is submitted */
    p->pending++;
    size_t ntouched = 0;
    rc = MCR_OK;

    /* The owners of the valid keys, all at once: mcr_snapshot_locate_many()
     * hashes them side by side (MD5 in SIMD lanes), several times faster
     * per key than one lookup each. Bounded loads place key by key. */
    int batch = !(p->o.bounded_epsilon > 0);
    size_t nvalid = 0;
    for (size_t i = 0; i < n; i++) {
        valid[i] = keys[i] != NULL &&
                   mcr__proto_key_ok(keys[i], lens[i], MCR_KEY_MAX - p->prefix_len);
        if (valid[i] && batch) {
            vkeys[nvalid] = keys[i];
            vlens[nvalid++] = lens[i];
        }
    }
    if (batch)
        mcr_snapshot_locate_many(p->snap, vkeys, vlens, nvalid, owner);

    size_t nv = 0; /* the next valid key's place in owner[] */
    for (size_t i = 0; i < n && rc == MCR_OK; i++) {
        next_dup[i] = SIZE_MAX;
        const void *k = keys[i];
        size_t kl = lens[i];
        if (!valid[i]) {
            rc = mget_key_error(p, m, op, NULL, k, k != NULL ? kl : 0, i, MCR_ERR_KEY,
                                "key is not 1..250 bytes without space or control byte");
            continue;
        }
        uint32_t own = batch ? owner[nv++] : 0;
        /* duplicates: chain to the first occurrence */
        khash[i] = mcr__key_hash(k, kl, 0);
        size_t slot = khash[i] & (tsize - 1);
        int dup = 0;
        while (table[slot] != SIZE_MAX) {
            size_t f = table[slot];
            if (lens[f] == kl && memcmp(keys[f], k, kl) == 0) {
                size_t t = f;
                while (next_dup[t] != SIZE_MAX)
                    t = next_dup[t];
                next_dup[t] = i;
                dup = 1;
                break;
            }
            slot = (slot + 1) & (tsize - 1);
        }
        if (dup)
            continue;
        table[slot] = i;
        int status = MCR_OK;
        mcr__pool_server *s = batch ? mcr__route_owner(p, op, k, kl, own, &status)
                                    : mcr__route_key(p, op, k, kl, &status);
        if (status != MCR_OK) {
            char msg[96];
            snprintf(msg, sizeof(msg), "server %s is down", s->id);
            rc = mget_key_error(p, m, op, s, k, kl, i, status, msg);
            continue;
        }
        next_in[i] = SIZE_MAX;
        if (!s->mg_marked) {
            s->mg_marked = 1;
            s->mg_head = s->mg_tail = i;
            s->mg_count = 1;
            touched[ntouched++] = s;
        } else {
            next_in[s->mg_tail] = i;
            s->mg_tail = i;
            s->mg_count++;
        }
    }

    /* One request per server (per BATCH_MAX keys). */
    for (size_t t = 0; t < ntouched; t++) {
        mcr__pool_server *s = touched[t];
        s->mg_marked = 0;
        size_t u = s->mg_head;
        while (u != SIZE_MAX && rc == MCR_OK) {
            size_t cnt = 0, bytes = 0;
            for (size_t v = u; v != SIZE_MAX && cnt < BATCH_MAX; v = next_in[v]) {
                cnt++;
                bytes += lens[v];
            }
            mcr__pool_req *r = mcr__req_new(p, cnt, bytes, 1);
            if (r == NULL) {
                rc = MCR_ERR_NOMEM;
                break;
            }
            char *kb = mcr__req_key_area(r, cnt, 1);
            for (size_t j = 0; j < cnt; j++, u = next_in[u]) {
                memcpy(kb, keys[u], lens[u]);
                r->keys[j] = kb;
                r->klens[j] = lens[u];
                r->khash[j] = khash[u];
                r->user_idx[j] = u;
                kb += lens[u];
            }
            r->nkeys = (uint32_t)cnt;
            r->op = op;
            r->mget = m;
            r->server = s;
            r->epoch = p->epoch;
            mcr__server_ref(s);
            m->outstanding++;
            if (mcr__server_dispatch(s, r) != MCR_OK) {
                /* out of memory sending: fail these keys from the loop */
                mcr__fail_later(p, r, MCR_ERR_NOMEM, "out of memory");
            }
        }
        if (rc != MCR_OK) {
            /* keys not yet in a request: report them failed */
            for (; u != SIZE_MAX; u = next_in[u])
                mget_key_error(p, m, op, s, keys[u], lens[u], u, MCR_ERR_NOMEM, "out of memory");
        }
    }
    for (size_t t = 0; t < ntouched; t++)
        touched[t]->mg_marked = 0;
    /* Release the submission's hold from the loop, so done_cb can never
     * run inside this call. */
    mcr__pool_req *hold = mcr__req_new(p, 0, 0, 1);
    if (hold == NULL) {
        /* cannot defer: keep the hold; the last request finishes it */
        m->outstanding--;
        if (m->outstanding == 0) {
            /* nothing at all was submitted (cannot happen: n > 0) */
            p->pending--;
            free(m);
            return mcr__pool_fail(err, MCR_ERR_NOMEM, "out of memory");
        }
        return MCR_OK;
    }
    hold->mget = m;
    hold->op = op;
    hold->epoch = p->epoch;
    hold->status = MCR_OK;
    mcr__deferred_push(p, hold);
    return MCR_OK;
}
