/* SPDX-License-Identifier: BSD-3-Clause */
/* slotset.c: a small open-addressing set of array indexes, for the duplicate checks of configs and of mcr_lmc. */
#include <stdlib.h>
#include <string.h>

#include "base_internal.h"

size_t mcr__slot_hash(const void *bytes, size_t len, uint64_t extra)
{
    const unsigned char *p = bytes;
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a, 64 bit */
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    h = (h ^ extra) * 0x100000001b3ULL;
    return (size_t)(h ^ (h >> 29));
}

long mcr__slotset_find(const mcr__slotset *s, size_t hash, mcr__slot_eq eq, const void *ctx,
                       const void *key)
{
    if (s->cap == 0)
        return -1;
    size_t mask = s->cap - 1;
    for (size_t i = hash & mask; s->slots[i] != 0; i = (i + 1) & mask)
        if (eq(ctx, s->slots[i] - 1, key))
            return (long)(s->slots[i] - 1);
    return -1;
}

void mcr__slotset_put(mcr__slotset *s, size_t hash, size_t idx)
{
    size_t mask = s->cap - 1;
    size_t i = hash & mask;
    while (s->slots[i] != 0)
        i = (i + 1) & mask;
    s->slots[i] = (uint32_t)idx + 1;
}

int mcr__slotset_resize(mcr__slotset *s, size_t want)
{
    size_t cap = 16;
    while (cap < 2 * want)
        cap *= 2;
    uint32_t *slots = calloc(cap, sizeof(*slots));
    if (slots == NULL)
        return MCR_ERR_NOMEM;
    free(s->slots);
    s->slots = slots;
    s->cap = cap;
    return MCR_OK;
}

void mcr__slotset_clear(mcr__slotset *s)
{
    if (s->cap > 0)
        memset(s->slots, 0, s->cap * sizeof(*s->slots));
}

void mcr__slotset_free(mcr__slotset *s)
{
    free(s->slots);
    s->slots = NULL;
    s->cap = 0;
}
