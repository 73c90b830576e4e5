/* SPDX-License-Identifier: BSD-3-Clause */
/* mcrouter.c: mcrouter's Ch3 and WeightedCh3 placements: the routing key of a key, furc_hash, the consistent hash that maps it to a server, and the weighted tries over it. */
#include <string.h>

#include "placement_internal.h"

/*
 * Written from the published definitions, not copied: furc_hash and
 * MurmurHash64A as mcrouter/lib/fbi/hash.c (github.com/facebook/mcrouter)
 * defines them, the routing key as mcrouter/lib/carbon/Keys-inl.h
 * (Keys::update) cuts it, WeightedCh3 as mcrouter/lib/WeightedCh3HashFunc.cpp
 * tries it. The fixed vectors of mcrouter's own
 * mcrouter/lib/test/Ch3HashTest.cpp and WeightedCh3HashFuncTest.cpp are in
 * test/test_proxies.c.
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

static inline uint64_t murmur_mix(uint64_t h, uint64_t k)
{
    k *= MURMUR_M;
    k ^= k >> MURMUR_R;
    k *= MURMUR_M;
    h ^= k;
    return h * MURMUR_M;
}

static uint64_t murmur_word(const unsigned char *p)
{
    uint64_t k = 0;
    for (int b = 7; b >= 0; b--)
        k = k << 8 | p[b];
    return k;
}

/* MurmurHash64A (Austin Appleby) of head then tail (at most
 * MCR__SPOOKY_TAIL_MAX bytes) as one message, the 64-bit words read
 * little-endian, as mcrouter reads them on the little-endian machines it
 * runs on. */
static uint64_t murmur64a(const unsigned char *head, size_t hlen, const unsigned char *tail,
                          size_t tlen, uint64_t seed)
{
    size_t len = hlen + tlen;
    uint64_t h = seed ^ (len * MURMUR_M);
    unsigned char rest[8 + MCR__SPOOKY_TAIL_MAX];
    const unsigned char *p = head;
    size_t words = len / 8, w = 0;

    for (; w < words && (w + 1) * 8 <= hlen; w++, p += 8) /* words of the head */
        h = murmur_mix(h, murmur_word(p));
    if (tlen > 0) { /* the rest: the head's last bytes, then the tail */
        size_t r = hlen - w * 8;
        memcpy(rest, p, r);
        memcpy(rest + r, tail, tlen);
        p = rest;
    }
    for (; w < words; w++, p += 8)
        h = murmur_mix(h, murmur_word(p));
    size_t left = len & 7;
    if (left != 0) {
        for (size_t i = left; i-- > 0;)
            h ^= (uint64_t)p[i] << (8 * i);
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
    const unsigned char *key, *tail; /* the key, then a salt (wch3) */
    size_t len, tlen;
    int have; /* words computed */
    uint64_t word[FURC_WORDS];
} furc_bits;

static uint32_t furc_bit(furc_bits *b, uint32_t idx)
{
    int w = (int)(idx >> 6);
    while (b->have <= w) {
        if (b->have == 0) {
            b->word[0] = murmur64a(b->key, b->len, b->tail, b->tlen, FURC_SEED);
        } else {
            unsigned char le[8];
            uint64_t prev = b->word[b->have - 1];
            for (int i = 0; i < 8; i++)
                le[i] = (unsigned char)(prev >> (8 * i));
            b->word[b->have] = murmur64a(le, 8, NULL, 0, FURC_SEED);
        }
        b->have++;
    }
    return (uint32_t)(b->word[w] >> (idx & 63)) & 1;
}

/* furc_hash of key then tail (a salt) as one message. */
static uint32_t furc_parts(const void *key, size_t len, const void *tail, size_t tlen, uint32_t m)
{
    furc_bits b;
    uint32_t d = 0, a;

    if (m <= 1)
        return 0;
    b.key = key;
    b.len = len;
    b.tail = tail;
    b.tlen = tlen;
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

uint32_t mcr__furc(const void *key, size_t len, uint32_t m)
{
    return furc_parts(key, len, NULL, 0, m);
}

/* ---- WeightedCh3 ---- */

/* The seed of WeightedCh3HashFunc's acceptance hash. */
#define WCH3_SEED 0xface2014u

uint32_t mcr__wch3_accept(uint32_t millionths)
{
    /* mcrouter: uint64_t w = weight * std::numeric_limits<uint32_t>::max(),
     * the weight a double read from its decimal; millionths / 1e6 is that
     * same double (both are the decimal correctly rounded) */
    double w = (double)millionths / 1e6;
    return (uint32_t)(w * 4294967295.0);
}

uint32_t mcr__wch3(const void *key, size_t len, const uint32_t *accept, uint32_t n)
{
    char salt[24];
    size_t slen = 0;
    uint32_t index = 0;

    for (uint32_t t = 0; t < MCR_WCH3_TRIES; t++) {
        index = furc_parts(key, len, salt, slen, n);
        uint64_t h1 = WCH3_SEED, h2 = WCH3_SEED;
        mcr__spooky128_parts(key, len, salt, slen, &h1, &h2);
        if ((uint32_t)h1 < accept[index])
            return index;
        /* the next salt: try t's number, its decimal digits lowest first */
        uint32_t v = t;
        slen = 0;
        do {
            salt[slen++] = (char)('0' + v % 10);
            v /= 10;
        } while (v > 0);
    }
    return index;
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
