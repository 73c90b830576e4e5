/* SPDX-License-Identifier: BSD-3-Clause */
/* bridge_migrate.c: an attached handle's calls through a migration (a resize): writes of a moved key to both owners, a get's and a multi-get's misses read at the previous owner once switched; the rules of the pool (mcroute_pool.h, Migrations), with each call sent to one owner by the bridge's hash. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bridge.h"

/* The key libmemcached hashes: with HASH_WITH_PREFIX_KEY the namespace and
 * the key (into buf), else the key. */
static size_t hashed_key(const mcr__bridge *b, const char *key, size_t len, char *buf, size_t cap,
                         const char **out)
{
    const mcr__lmc *l = mcr__lmc_get(NULL);
    *out = key;
    if (l->memcached_behavior_get(b->memc, MEMCACHED_BEHAVIOR_HASH_WITH_PREFIX_KEY) == 0)
        return len;
    memcached_return_t rc;
    const char *ns = l->memcached_callback_get(b->memc, MEMCACHED_CALLBACK_NAMESPACE, &rc);
    size_t nl = ns != NULL ? strlen(ns) : 0;
    if (nl == 0 || nl + len > cap)
        return len;
    memcpy(buf, ns, nl);
    memcpy(buf + nl, key, len);
    *out = buf;
    return nl + len;
}

int64_t mcr__bridge_moved(const mcr__bridge *b, const char *key, size_t len)
{
    if (b->other == NULL || b->ring == NULL)
        return -1;
    char buf[2 * MEMCACHED_MAX_KEY];
    const char *k;
    size_t n = hashed_key(b, key, len, buf, sizeof(buf), &k);
    uint32_t cur = mcr_ring_locate(b->ring, k, n);
    uint32_t other = b->other_pos[mcr_ring_locate(b->other, k, n)];
    return other != cur ? (int64_t)other : -1;
}

static bool switched(const mcr__bridge *b)
{
    return b->phase == MCR_MIGRATION_SWITCHED || b->phase == MCR_MIGRATION_GRACE;
}

/* ------------------------------------------------------------ writes */

/* Call `op` with `a` at list position `pos` (-1: the key's current owner). */
static memcached_return_t op_at(mcr__bridge *b, int64_t pos, mcr__wop op, const mcr__wargs *a,
                                uint64_t *number)
{
    const mcr__lmc *l = mcr__lmc_get(NULL);
    memcached_st *m = b->memc;
    const char *g = a->group != NULL ? a->group : a->key;
    size_t gl = a->group != NULL ? a->group_len : a->key_len;
    uint64_t scratch = 0;
    if (number == NULL)
        number = &scratch;
    int64_t saved = b->route;
    b->route = pos;
    memcached_return_t rc = MEMCACHED_INVALID_ARGUMENTS;
    switch (op) {
    case MCR__W_SET:
        rc = l->memcached_set_by_key(m, g, gl, a->key, a->key_len, a->value, a->value_len,
                                     a->expiration, a->flags);
        break;
    case MCR__W_ADD:
        rc = l->memcached_add_by_key(m, g, gl, a->key, a->key_len, a->value, a->value_len,
                                     a->expiration, a->flags);
        break;
    case MCR__W_REPLACE:
        rc = l->memcached_replace_by_key(m, g, gl, a->key, a->key_len, a->value, a->value_len,
                                         a->expiration, a->flags);
        break;
    case MCR__W_APPEND:
        rc = l->memcached_append_by_key(m, g, gl, a->key, a->key_len, a->value, a->value_len,
                                        a->expiration, a->flags);
        break;
    case MCR__W_PREPEND:
        rc = l->memcached_prepend_by_key(m, g, gl, a->key, a->key_len, a->value, a->value_len,
                                         a->expiration, a->flags);
        break;
    case MCR__W_CAS:
        rc = l->memcached_cas_by_key(m, g, gl, a->key, a->key_len, a->value, a->value_len,
                                     a->expiration, a->flags, a->cas);
        break;
    case MCR__W_DELETE:
        rc = l->memcached_delete_by_key(m, g, gl, a->key, a->key_len, a->expiration);
        break;
    case MCR__W_TOUCH:
        rc = l->memcached_touch_by_key(m, g, gl, a->key, a->key_len, a->expiration);
        break;
    case MCR__W_INCR:
        rc = l->memcached_increment_by_key(m, g, gl, a->key, a->key_len, a->offset, number);
        break;
    case MCR__W_DECR:
        rc = l->memcached_decrement_by_key(m, g, gl, a->key, a->key_len, a->offset, number);
        break;
    case MCR__W_INCR_INIT:
        rc = l->memcached_increment_with_initial_by_key(m, g, gl, a->key, a->key_len, a->offset,
                                                        a->initial, a->expiration, number);
        break;
    case MCR__W_DECR_INIT:
        rc = l->memcached_decrement_with_initial_by_key(m, g, gl, a->key, a->key_len, a->offset,
                                                        a->initial, a->expiration, number);
        break;
    }
    b->route = saved;
    return rc;
}

/* The answers that are not a failure of the server or the connection. */
static bool answered(memcached_return_t rc)
{
    return rc == MEMCACHED_SUCCESS || rc == MEMCACHED_STORED || rc == MEMCACHED_DELETED ||
           rc == MEMCACHED_NOTFOUND || rc == MEMCACHED_NOTSTORED ||
           rc == MEMCACHED_DATA_EXISTS || rc == MEMCACHED_BUFFERED || rc == MEMCACHED_END;
}

static bool applied(memcached_return_t rc)
{
    return rc == MEMCACHED_SUCCESS || rc == MEMCACHED_STORED || rc == MEMCACHED_DELETED ||
           rc == MEMCACHED_BUFFERED;
}

/* Delete the key's copy at `pos`: MEMCACHED_SUCCESS when it is gone (or
 * was not there), else the failure. */
static memcached_return_t drop_at(mcr__bridge *b, int64_t pos, const mcr__wargs *a)
{
    mcr__wargs d = *a;
    d.expiration = 0;
    memcached_return_t rc = op_at(b, pos, MCR__W_DELETE, &d, NULL);
    return answered(rc) ? MEMCACHED_SUCCESS : rc;
}

static bool is_counter(mcr__wop op)
{
    return op == MCR__W_INCR || op == MCR__W_DECR || op == MCR__W_INCR_INIT ||
           op == MCR__W_DECR_INIT;
}

memcached_return_t mcr__bridge_write(mcr__bridge *b, mcr__wop op, const mcr__wargs *a)
{
    const char *g = a->group != NULL ? a->group : a->key;
    size_t gl = a->group != NULL ? a->group_len : a->key_len;
    int64_t other = mcr__bridge_moved(b, g, gl);
    uint64_t n1 = 0;
    memcached_return_t rc = op_at(b, -1, op, a, &n1);
    if (a->number != NULL)
        *a->number = n1;
    if (other < 0)
        return rc;
    if (op == MCR__W_SET) { /* to both owners */
        memcached_return_t r2 = op_at(b, other, MCR__W_SET, a, NULL);
        return !answered(rc) ? rc : !answered(r2) ? r2 : rc;
    }
    bool missed = rc == MEMCACHED_NOTFOUND ||
                  (rc == MEMCACHED_NOTSTORED &&
                   (op == MCR__W_REPLACE || op == MCR__W_APPEND || op == MCR__W_PREPEND));
    if (applied(rc)) {
        /* the same at the other owner: a CAS belongs to one server (a set
         * of the same value there), an increment with an initial value
         * only increments a copy that is there */
        mcr__wop same = op == MCR__W_CAS         ? MCR__W_SET
                        : op == MCR__W_INCR_INIT ? MCR__W_INCR
                        : op == MCR__W_DECR_INIT ? MCR__W_DECR
                                                 : op;
        uint64_t n2 = 0;
        memcached_return_t r2 = op_at(b, other, same, a, &n2);
        /* the other ended elsewhere (another number, an add that found a
         * value): its copy is deleted */
        if ((is_counter(op) && r2 == MEMCACHED_SUCCESS && n2 != n1) ||
            (op == MCR__W_ADD && r2 == MEMCACHED_NOTSTORED))
            r2 = drop_at(b, other, a);
        return answered(r2) ? rc : r2;
    }
    if (missed) {
        if (switched(b)) { /* the key may not have reached the current owner */
            memcached_return_t r2 = op_at(b, other, op, a, &n1);
            if (a->number != NULL)
                *a->number = n1;
            return r2;
        }
        /* copying: the new owner's copy can only be older; closing: the
         * old owner's is read no more */
        memcached_return_t r2 = drop_at(b, other, a);
        return r2 == MEMCACHED_SUCCESS ? rc : r2;
    }
    return rc; /* an add that found a value, a cas that found another */
}

/* ------------------------------------------------------------ reads */

char *mcr__bridge_get(mcr__bridge *b, const char *group, size_t group_len, const char *key,
                      size_t key_len, size_t *value_length, uint32_t *flags,
                      memcached_return_t *error)
{
    const mcr__lmc *l = mcr__lmc_get(NULL);
    const char *g = group != NULL ? group : key;
    size_t gl = group != NULL ? group_len : key_len;
    memcached_return_t rc = MEMCACHED_SUCCESS;
    char *v = l->memcached_get_by_key(b->memc, g, gl, key, key_len, value_length, flags, &rc);
    int64_t other;
    if (v == NULL && rc == MEMCACHED_NOTFOUND && switched(b) &&
        (other = mcr__bridge_moved(b, g, gl)) >= 0) {
        memcached_return_t r2 = MEMCACHED_SUCCESS;
        b->route = other;
        char *v2 = l->memcached_get_by_key(b->memc, g, gl, key, key_len, value_length, flags, &r2);
        b->route = -1;
        if (v2 != NULL) { /* else the first miss is the answer */
            v = v2;
            rc = r2;
        }
    }
    if (error != NULL)
        *error = rc;
    return v;
}

/* A multi-get's keys, for the fallback reads once switched. */
struct mcr__mget {
    size_t n;
    char **keys;
    size_t *lens;
    int64_t *pos;          /* the previous owner's list position, or -1 */
    unsigned char *state;  /* 0 asked at the current owner, 1 found, 2 asked at the previous */
};

_Atomic unsigned mcr__mget_pending;

void mcr__bridge_mget_end(mcr__bridge *b)
{
    struct mcr__mget *m = b->mget;
    if (m == NULL)
        return;
    atomic_fetch_sub_explicit(&mcr__mget_pending, 1, memory_order_relaxed);
    for (size_t i = 0; i < m->n; i++)
        free(m->keys[i]);
    free(m->keys);
    free(m->lens);
    free(m->pos);
    free(m->state);
    free(m);
    b->mget = NULL;
}

void mcr__bridge_mget_begin(mcr__bridge *b, const char *group, size_t group_len,
                            const char *const *keys, const size_t *lens, size_t n)
{
    mcr__bridge_mget_end(b);
    if (!switched(b) || n == 0)
        return;
    int64_t gpos = group != NULL ? mcr__bridge_moved(b, group, group_len) : -1;
    if (group != NULL && gpos < 0)
        return; /* every key at the group key's owner, which did not move */
    struct mcr__mget *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return; /* no fallback reads: misses stay misses */
    m->keys = calloc(n, sizeof(*m->keys));
    m->lens = calloc(n, sizeof(*m->lens));
    m->pos = calloc(n, sizeof(*m->pos));
    m->state = calloc(n, 1);
    bool any = false;
    if (m->keys != NULL && m->lens != NULL && m->pos != NULL && m->state != NULL) {
        for (size_t i = 0; i < n; i++) {
            m->pos[i] = group != NULL ? gpos : mcr__bridge_moved(b, keys[i], lens[i]);
            if (m->pos[i] < 0)
                continue;
            if ((m->keys[i] = malloc(lens[i] + 1)) == NULL) {
                m->pos[i] = -1;
                continue;
            }
            memcpy(m->keys[i], keys[i], lens[i]);
            m->lens[i] = lens[i];
            any = true;
        }
    }
    m->n = n;
    b->mget = m;
    atomic_fetch_add_explicit(&mcr__mget_pending, 1, memory_order_relaxed);
    if (!any)
        mcr__bridge_mget_end(b);
}

static void mark_found(struct mcr__mget *m, const char *key, size_t len)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->pos[i] >= 0 && m->state[i] != 1 && m->lens[i] == len &&
            memcmp(m->keys[i], key, len) == 0) {
            m->state[i] = 1;
            return;
        }
}

/* The next round of fallback reads: the missed keys of one previous owner,
 * asked there. false when none is left. */
static bool next_round(mcr__bridge *b, struct mcr__mget *m)
{
    const mcr__lmc *l = mcr__lmc_get(NULL);
    for (;;) {
        size_t first = m->n;
        for (size_t i = 0; i < m->n && first == m->n; i++)
            if (m->pos[i] >= 0 && m->state[i] == 0)
                first = i;
        if (first == m->n)
            return false;
        int64_t p = m->pos[first];
        size_t cnt = 0;
        const char **ks = malloc(m->n * sizeof(*ks));
        size_t *ls = malloc(m->n * sizeof(*ls));
        if (ks == NULL || ls == NULL) {
            free(ks);
            free(ls);
            return false;
        }
        for (size_t i = first; i < m->n; i++)
            if (m->pos[i] == p && m->state[i] == 0) {
                m->state[i] = 2;
                ks[cnt] = m->keys[i];
                ls[cnt++] = m->lens[i];
            }
        b->route = p;
        memcached_return_t rc =
            l->memcached_mget_by_key(b->memc, ks[0], ls[0], (const char *const *)ks, ls, cnt);
        b->route = -1;
        free(ks);
        free(ls);
        if (rc == MEMCACHED_SUCCESS || rc == MEMCACHED_SOME_ERRORS)
            return true;
        /* that owner failed: its keys stay misses; the next one */
    }
}

memcached_result_st *mcr__bridge_fetch_result(mcr__bridge *b, memcached_result_st *result,
                                              memcached_return_t *error)
{
    const mcr__lmc *l = mcr__lmc_get(NULL);
    for (;;) {
        memcached_return_t rc = MEMCACHED_SUCCESS;
        memcached_result_st *r = l->memcached_fetch_result(b->memc, result, &rc);
        struct mcr__mget *m = b->mget;
        if (r != NULL) {
            if (m != NULL)
                mark_found(m, memcached_result_key_value(r), memcached_result_key_length(r));
            if (error != NULL)
                *error = rc;
            return r;
        }
        if (m == NULL || (rc != MEMCACHED_END && rc != MEMCACHED_NOTFOUND) ||
            !next_round(b, m)) {
            if (rc == MEMCACHED_END || rc == MEMCACHED_NOTFOUND)
                mcr__bridge_mget_end(b);
            if (error != NULL)
                *error = rc;
            return NULL;
        }
    }
}
