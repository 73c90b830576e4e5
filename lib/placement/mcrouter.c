/* SPDX-License-Identifier: BSD-3-Clause */
/* mcrouter.c: mcrouter's Ch3 placement: the routing key of a key and furc_hash, the consistent hash that maps it to a server. */
#include <string.h>

#include "placement_internal.h"

/*
 * Written from the published definitions, not copied: furc_hash and
 * MurmurHash64A as mcrouter/lib/fbi/hash.c (github.com/facebook/mcrouter)
 * defines them, the routing key as mcrouter/lib/carbon/Keys-inl.h
 * (Keys::update) cuts it. The fixed vectors of mcrouter's own
 * mcrouter/lib/test/Ch3HashTest.cpp are in test/test_proxies.c.
 */

/* furc's MurmurHash64A seed, for the key and for every rehash. */
#define FURC_SEED 4193360111u
/* Tries for a number below m before furc settles for 0. */
#define FURC_TRIES 32
/* The gap between the bit indexes of one number's bits: at most 2^23
 * servers (MCR__FURC_MAX). */
#define FURC_SHIFT 23
/* The bit stream's words that a lookup can read: each try reads at most
 * FURC_SHIFT bits FURC_SHIFT apart past where the last one stopped. */
#define FURC_WORDS ((FURC_TRIES * (FURC_SHIFT + 1) * FURC_SHIFT + FURC_SHIFT) / 64 + 2)

#define MURMUR_M 0xc6a4a7935bd1e995ULL
#define MURMUR_R 47

/* MurmurHash64A (Austin Appleby), the 64-bit words read little-endian, as
 * mcrouter reads them on the little-endian machines it runs on. */
static uint64_t murmur64a(const unsigned char *p, size_t len, uint64_t seed)
{
    uint64_t h = seed ^ (len * MURMUR_M);
    size_t words = len / 8;

    for (size_t i = 0; i < words; i++, p += 8) {
        uint64_t k = 0;
        for (int b = 7; b >= 0; b--)
            k = k << 8 | p[b];
        k *= MURMUR_M;
        k ^= k >> MURMUR_R;
        k *= MURMUR_M;
        h ^= k;
        h *= MURMUR_M;
    }
    size_t tail = len & 7;
    if (tail != 0) {
        for (size_t b = tail; b-- > 0;)
            h ^= (uint64_t)p[b] << (8 * b);
        h *= MURMUR_M;
    }
    h ^= h >> MURMUR_R;
    h *= MURMUR_M;
    h ^= h >> MURMUR_R;
    return h;
}

/* furc's bit stream: word 0 is MurmurHash64A of the key, word i the same
 * hash of word i - 1's 8 bytes; computed as far as the lookup reads. */
typedef struct furc_bits {
    const unsigned char *key;
    size_t len;
    int have; /* words computed */
    uint64_t word[FURC_WORDS];
} furc_bits;

static uint32_t furc_bit(furc_bits *b, uint32_t idx)
{
    int w = (int)(idx >> 6);
    while (b->have <= w) {
        if (b->have == 0) {
            b->word[0] = murmur64a(b->key, b->len, FURC_SEED);
        } else {
            unsigned char le[8];
            uint64_t prev = b->word[b->have - 1];
            for (int i = 0; i < 8; i++)
                le[i] = (unsigned char)(prev >> (8 * i));
            b->word[b->have] = murmur64a(le, 8, FURC_SEED);
        }
        b->have++;
    }
    return (uint32_t)(b->word[w] >> (idx & 63)) & 1;
}

uint32_t mcr__furc(const void *key, size_t len, uint32_t m)
{
    furc_bits b;
    uint32_t d = 0, a;

    if (m <= 1)
        return 0;
    b.key = key;
    b.len = len;
    b.have = 0;
    while (m > (1u << d)) /* the bits of m - 1 */
        d++;
    a = d;
    for (int t = 0; t < FURC_TRIES; t++) {
        /* The leading bit of a number of d bits, or fewer bits */
        while (furc_bit(&b, a) == 0) {
            if (--d == 0)
                return 0;
            a = d;
        }
        a += FURC_SHIFT;
        uint32_t num = 1;
        for (uint32_t i = 0; i + 1 < d; i++) {
            num = num << 1 | furc_bit(&b, a);
            a += FURC_SHIFT;
        }
        if (num < m)
            return num;
    }
    return 0; /* as mcrouter: 0 is valid for every m */
}

void mcr__mcrouter_routing_key(const void *key, size_t len, const void **rk, size_t *rklen)
{
    const char *k = key, *end = k + len;

    /* "/region/cluster/rest": the routing prefix, up to and with the
     * second '/' after the first byte, is not hashed */
    if (len > 0 && k[0] == '/') {
        const char *p = k + 1;
        int found = 0;
        for (; found < 2; found++) {
            const char *s = p < end ? memchr(p, '/', (size_t)(end - p)) : NULL;
            if (s == NULL)
                break;
            p = s + 1;
        }
        if (found == 2)
            k = p;
    }
    /* the hash stop: the routing key ends before the first "|#|" */
    for (const char *p = k; end - p >= 3; p++) {
        p = memchr(p, '|', (size_t)(end - p - 2));
        if (p == NULL)
            break;
        if (p[1] == '#' && p[2] == '|') {
            end = p;
            break;
        }
    }
    *rk = k;
    *rklen = (size_t)(end - k);
}
