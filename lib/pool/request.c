/* SPDX-License-Identifier: BSD-3-Clause */
/* request.c: the life of a request: allocation, queues, hot-key sharing, delivery of results to callbacks, its end. */
#include "pool_internal.h"

#include <stdlib.h>

/* ------------------------------------------------------------ requests */

/* Small blocks: a request with one key of up to MCR_KEY_MAX bytes and its
 * user index. A pool keeps up to REUSE_MAX of them for its next requests:
 * malloc's per-thread cache holds only a few blocks of a size, and a loop
 * pass that ends a hundred requests overflows it. */
#define SMALL_KEYBYTES MCR_KEY_MAX
#define SMALL_SIZE                                                                                 \
    (sizeof(mcr__pool_req) + sizeof(char *) + 2 * sizeof(size_t) + sizeof(uint32_t) +         \
     SMALL_KEYBYTES)
#define REUSE_MAX 1024

mcr__pool_req *mcr__req_new(mcr_pool *p, size_t nkeys, size_t keybytes, int with_user_idx)
{
    mcr__pool_req *r;
    int small = nkeys <= 1 && keybytes <= SMALL_KEYBYTES;
    if (small && p->req_free != NULL) {
        r = p->req_free;
        p->req_free = r->next;
        p->nreq_free--;
        /* zeroed but for the message text (the last member), which is
         * read as a string only */
        _Static_assert(sizeof(mcr__pool_req) - offsetof(mcr__pool_req, message) -
                               MCR__MSG_SIZE <
                           _Alignof(mcr__pool_req),
                       "message is the last member of mcr__pool_req");
        static const mcr__pool_req zero; /* copied: no `rep stos` */
        memcpy(r, &zero, offsetof(mcr__pool_req, message));
        r->message[0] = '\0';
    } else {
        size_t sz = small ? SMALL_SIZE
                          : sizeof(mcr__pool_req) +
                                nkeys * (sizeof(char *) + sizeof(size_t) + sizeof(uint32_t)) +
                                (with_user_idx ? nkeys * sizeof(size_t) : 0) + keybytes;
        r = calloc(1, sz);
        if (r == NULL)
            return NULL;
    }
    r->small = small ? 1 : 0;
    char *a = (char *)(r + 1);
    r->keys = (const char **)(void *)a;
    a += nkeys * sizeof(char *);
    r->klens = (size_t *)(void *)a;
    a += nkeys * sizeof(size_t);
    if (with_user_idx) {
        r->user_idx = (size_t *)(void *)a;
        a += nkeys * sizeof(size_t);
    }
    r->khash = (uint32_t *)(void *)a;
    a += nkeys * sizeof(uint32_t);
    /* key bytes follow; placed by the caller with mcr__req_key_area() */
    return r;
}

void mcr__req_free(mcr_pool *p, mcr__pool_req *r)
{
    mcr__pool_waiter *w = r->waiters;
    while (w != NULL) {
        mcr__pool_waiter *n = w->next;
        free(w);
        w = n;
    }
    if (r->val_copy != NULL) /* each free(NULL) is still a call */
        free(r->val_copy);
    if (r->text != NULL)
        free(r->text);
    if (r->small && p->nreq_free < REUSE_MAX && !p->freeing) {
        r->next = p->req_free;
        p->req_free = r;
        p->nreq_free++;
        return;
    }
    free(r);
}

void mcr__req_free_all(mcr_pool *p)
{
    while (p->req_free != NULL) {
        mcr__pool_req *r = p->req_free;
        p->req_free = r->next;
        free(r);
    }
    p->nreq_free = 0;
}

void mcr__deferred_push(mcr_pool *p, mcr__pool_req *r)
{
    mcr__queue_push(&p->def_head, &p->def_tail, r);
    event_active(p->done_ev, EV_TIMEOUT, 0);
}

/* ------------------------------------------------------------ hot keys */

static mcr__pool_req **hot_slot(mcr_pool *p, uint32_t h)
{
    return &p->hot[h & p->hot_mask];
}

mcr__pool_req *mcr__hot_find(mcr_pool *p, mcr_op op, const void *key, size_t len, uint32_t h)
{
    if (p->hot == NULL)
        return NULL;
    for (mcr__pool_req *r = *hot_slot(p, h); r != NULL; r = r->hot_next)
        if (r->hot_hash == h && r->op == op && r->klens[0] == len &&
            memcmp(r->keys[0], key, len) == 0)
            return r;
    return NULL;
}

void mcr__hot_remove(mcr_pool *p, mcr__pool_req *r)
{
    if (!r->in_hot)
        return;
    for (mcr__pool_req **pp = hot_slot(p, r->hot_hash); *pp != NULL; pp = &(*pp)->hot_next)
        if (*pp == r) {
            *pp = r->hot_next;
            break;
        }
    r->in_hot = 0;
    r->hot_next = NULL;
    p->hot_count--;
}

void mcr__hot_insert(mcr_pool *p, mcr__pool_req *r, uint32_t h)
{
    if (p->hot == NULL || p->hot_count >= p->hot_mask + 1) {
        size_t n = p->hot == NULL ? 256 : (p->hot_mask + 1) * 2;
        mcr__pool_req **t = calloc(n, sizeof(*t));
        if (t == NULL)
            return; /* no sharing for this one: still correct */
        if (p->hot != NULL) {
            for (size_t i = 0; i <= p->hot_mask; i++) {
                mcr__pool_req *e = p->hot[i];
                while (e != NULL) {
                    mcr__pool_req *nx = e->hot_next;
                    e->hot_next = t[e->hot_hash & (n - 1)];
                    t[e->hot_hash & (n - 1)] = e;
                    e = nx;
                }
            }
            free(p->hot);
        }
        p->hot = t;
        p->hot_mask = n - 1;
    }
    r->hot_hash = h;
    r->hot_next = *hot_slot(p, h);
    *hot_slot(p, h) = r;
    r->in_hot = 1;
    p->hot_count++;
}

/* A write of `key` ends sharing of gets already in flight. */
void mcr__hot_invalidate(mcr_pool *p, const void *key, size_t len)
{
    if (p->hot_count == 0)
        return;
    uint32_t kh = mcr__key_hash(key, len, 0);
    for (int op = MCR_OP_GET; op <= MCR_OP_GETS; op++) {
        uint32_t h = mcr__hot_hash((mcr_op)op, kh);
        mcr__pool_req *r = mcr__hot_find(p, (mcr_op)op, key, len, h);
        if (r != NULL)
            mcr__hot_remove(p, r);
    }
}

/* ------------------------------------------------------------ delivery */

static void call_cb(mcr_pool *p, mcr_pool_cb cb, void *arg, const mcr_result *res)
{
    p->in_callback++;
    cb(res, arg);
    p->in_callback--;
}

static void count_result(mcr__pool_server *s, const mcr_result *res)
{
    if (s == NULL)
        return;
    if (res->status != MCR_OK)
        s->errors++;
    else if (res->reply == MCR_REPLY_HIT)
        s->hits++;
    else if (res->reply == MCR_REPLY_MISS && mcr__is_get_family(res->op))
        s->misses++;
}

/* Report key j of r: to the single request's callback (and the gets that
 * share it), or to the multi-get's key callback once per occurrence. */
void mcr__deliver_key(mcr_pool *p, mcr__pool_req *r, uint32_t j, mcr_result *res)
{
    if (r->mget != NULL) {
        mcr__pool_mget *m = r->mget;
        for (size_t u = r->user_idx[j]; u != SIZE_MAX; u = m->next_dup[u]) {
            res->index = u;
            count_result(r->server, res);
            if (res->status == MCR_OK && res->reply == MCR_REPLY_HIT)
                m->hits++;
            else if (res->status != MCR_OK && m->status == MCR_OK) {
                m->status = res->status;
                snprintf(m->message, sizeof(m->message), "%s", res->message ? res->message : "");
            }
            call_cb(p, m->key_cb, m->arg, res);
        }
        return;
    }
    if (r->delivered)
        return;
    r->delivered = 1;
    mcr__hot_remove(p, r);
    count_result(r->server, res);
    if (!r->internal)
        p->pending--;
    call_cb(p, r->cb, r->arg, res);
    mcr__pool_waiter *w = r->waiters;
    r->waiters = NULL;
    while (w != NULL) {
        mcr__pool_waiter *n = w->next;
        if (r->server != NULL)
            r->server->coalesced++;
        count_result(r->server, res);
        p->pending--;
        call_cb(p, w->cb, w->arg, res);
        free(w);
        w = n;
    }
}

void mcr__result_init(mcr_result *res, const mcr__pool_req *r, uint32_t j)
{
    static const mcr_result zero; /* copied: no `rep stos` (see md5.c's md5_pad) */
    *res = zero;
    res->op = r->op;
    res->status = MCR_OK;
    if (j < r->nkeys) {
        res->key = r->keys[j];
        res->key_len = r->klens[j];
    }
    res->server = r->server != NULL ? r->server->id : NULL;
    res->epoch = r->epoch;
    res->ttl = MCR_TTL_UNKNOWN;
}

void mcr__deliver_simple(mcr_pool *p, mcr__pool_req *r, uint32_t j, int status, mcr_reply reply,
                         const char *msg)
{
    mcr_result res;
    mcr__result_init(&res, r, j);
    res.status = status;
    res.reply = reply;
    res.flags = r->flags;
    res.cas = r->cas;
    res.number = r->number;
    if (status == MCR_OK && (reply == MCR_REPLY_VERSION || reply == MCR_REPLY_STATS)) {
        res.value = r->text != NULL ? r->text : "";
        res.value_len = r->text_len;
    }
    res.message = status != MCR_OK ? (msg != NULL && msg[0] ? msg : mcr_strerror(status)) : NULL;
    mcr__deliver_key(p, r, j, &res);
}

/* The end of a request: report what is left, count, free. */
void mcr__finish_req(mcr_pool *p, mcr__pool_req *r)
{
    mcr__pool_server *s = r->server;
    if (r->sent_ns != 0 && s != NULL && r->status != MCR_ERR_TIMEOUT &&
        r->status != MCR_ERR_CONNECT && r->status != MCR_ERR_CANCELLED &&
        r->status != MCR_ERR_PROTOCOL && r->status != MCR_ERR_DOWN)
        mcr__hist_add(s, mcr__pool_now(p) - r->sent_ns);
    if (r->mget != NULL) {
        for (uint32_t j = r->cursor; j < r->nkeys; j++)
            mcr__deliver_simple(p, r, j, r->status, MCR_REPLY_MISS, r->message);
        r->cursor = r->nkeys;
        mcr__pool_mget *m = r->mget;
        if (--m->outstanding == 0) {
            static const mcr_result zero;
            mcr_result res = zero;
            res.op = r->op;
            res.status = m->status;
            res.number = m->hits;
            res.epoch = m->epoch;
            res.message = m->status != MCR_OK ? m->message : NULL;
            p->pending--;
            call_cb(p, m->done_cb, m->arg, &res);
            free(m);
        }
    } else if (!r->delivered) {
        mcr__deliver_simple(p, r, 0, r->status, r->reply, r->message);
    }
    mcr__hot_remove(p, r);
    if (s != NULL) {
        mcr__server_unref(s);
        /* only a retired server is freed */
        if (s->retired)
            mcr__server_maybe_free(s);
    }
    mcr__req_free(p, r);
}

/* Fail a request not yet in flight, later (never inside the submitting
 * call): the libuv contract. */
void mcr__fail_later(mcr_pool *p, mcr__pool_req *r, int status, const char *msg)
{
    r->status = status;
    mcr__set_msg(r->message, "%s", msg);
    mcr__deferred_push(p, r);
}
