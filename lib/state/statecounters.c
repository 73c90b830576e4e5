/* SPDX-License-Identifier: BSD-3-Clause */
/* statecounters.c: the counters the processes' pools publish into a state (one block of servers per slot, written by one pool of the process) and those of the processes that left (the departed block), added up per server. */
#include <stdlib.h>
#include <string.h>

#include "state_internal.h"

const uint64_t mcr__latency_bounds_us[MCR__LATENCY_BOUNDS] = {
    50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
    1000000, 2500000, 5000000};

_Static_assert(sizeof(mcr__shm_counters) == 256, "a counter entry's layout");

uint64_t mcr__id_hash(const char *id)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
    for (const unsigned char *p = (const unsigned char *)id; *p != '\0'; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return h != 0 ? h : 1;
}

/* The entry of id_hash in a block of `bs` (the first free one taken), or
 * NULL when the block is full. `shared`: others may take entries at the
 * same time. */
static mcr__shm_counters *entry(mcr__shm_counters *b, uint32_t bs, uint64_t id_hash, bool shared)
{
    for (uint32_t k = 0; k < bs; k++) {
        uint64_t h = atomic_load_explicit(&b[k].id_hash, memory_order_acquire);
        if (h == id_hash)
            return &b[k];
        if (h != 0)
            continue;
        uint64_t zero = 0;
        if (!shared) {
            atomic_store_explicit(&b[k].id_hash, id_hash, memory_order_release);
            return &b[k];
        }
        if (atomic_compare_exchange_strong(&b[k].id_hash, &zero, id_hash) || zero == id_hash)
            return &b[k];
    }
    return NULL;
}

void mcr__shm_fold(mcr__shm *m, const mcr__shm_counters *b)
{
    for (uint32_t k = 0; k < m->bs; k++) {
        uint64_t h = atomic_load_explicit(&b[k].id_hash, memory_order_acquire);
        if (h == 0)
            break; /* the rest is free */
        mcr__shm_counters *d = entry(m->departed, m->bs, h, true);
        if (d == NULL) { /* more servers than a block holds: their counts go */
            atomic_fetch_add_explicit(&m->h->counters_dropped, 1, memory_order_relaxed);
            continue;
        }
        for (int c = 0; c < MCR__CTR_N; c++)
            atomic_fetch_add_explicit(&d->v[c],
                                      atomic_load_explicit(&b[k].v[c], memory_order_relaxed),
                                      memory_order_relaxed);
        for (int c = 0; c < MCR__LATENCY_BOUNDS; c++)
            atomic_fetch_add_explicit(&d->le[c],
                                      atomic_load_explicit(&b[k].le[c], memory_order_relaxed),
                                      memory_order_relaxed);
    }
}

void mcr__shm_publish(mcr__shm *m, mcr__shm_counters *block, const char *id,
                      const uint64_t v[MCR__CTR_N], const uint64_t le[MCR__LATENCY_BOUNDS])
{
    mcr__shm_counters *e = entry(block, m->bs, mcr__id_hash(id), false);
    if (e == NULL) {
        atomic_fetch_add_explicit(&m->h->counters_dropped, 1, memory_order_relaxed);
        return;
    }
    for (int c = 0; c < MCR__CTR_N; c++)
        atomic_store_explicit(&e->v[c], v[c], memory_order_relaxed);
    for (int c = 0; c < MCR__LATENCY_BOUNDS; c++)
        atomic_store_explicit(&e->le[c], le[c], memory_order_relaxed);
}

/* Add block b (of bs entries) into the totals t (n of them, cap, grown). */
static int add_block(const mcr__shm_counters *b, uint32_t bs, mcr__server_total **t, size_t *n,
                     size_t *cap)
{
    for (uint32_t k = 0; k < bs; k++) {
        uint64_t h = atomic_load_explicit(&b[k].id_hash, memory_order_acquire);
        if (h == 0)
            break; /* the rest is free */
        /* Processes of one pool mostly list its servers in one order: try
         * the same position first. */
        size_t j = k < *n && (*t)[k].id_hash == h ? k : 0;
        while (j < *n && (*t)[j].id_hash != h)
            j++;
        if (j == *n) {
            if (*n == *cap) {
                size_t c = *cap ? *cap * 2 : 64;
                mcr__server_total *g = realloc(*t, c * sizeof(*g));
                if (g == NULL)
                    return MCR_ERR_NOMEM;
                *t = g;
                *cap = c;
            }
            memset(&(*t)[j], 0, sizeof((*t)[j]));
            (*t)[j].id_hash = h;
            (*n)++;
        }
        for (int c = 0; c < MCR__CTR_N; c++)
            (*t)[j].v[c] += atomic_load_explicit(&b[k].v[c], memory_order_relaxed);
        for (int c = 0; c < MCR__LATENCY_BOUNDS; c++)
            (*t)[j].le[c] += atomic_load_explicit(&b[k].le[c], memory_order_relaxed);
    }
    return MCR_OK;
}

int mcr__shm_sum(const mcr__shm *m, mcr__server_total **out, size_t *count)
{
    mcr__server_total *t = NULL;
    size_t n = 0, cap = 0;
    uint32_t hw = atomic_load(&m->h->high_water);
    if (hw > m->h->nslots)
        hw = m->h->nslots;
    int rc = add_block(m->departed, m->bs, &t, &n, &cap);
    for (uint32_t i = 0; i < hw && rc == MCR_OK; i++) {
        uint64_t o = atomic_load_explicit(&m->slots[i].owner, memory_order_acquire);
        if (o != 0 && MCR__SHM_PID(o) != 0) /* a process's (not one being folded) */
            rc = add_block(mcr__shm_block(m, i), m->bs, &t, &n, &cap);
    }
    if (rc != MCR_OK) {
        free(t);
        return rc;
    }
    *out = t;
    *count = n;
    return MCR_OK;
}
