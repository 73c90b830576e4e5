/* SPDX-License-Identifier: BSD-3-Clause */
/* spooky.c: SpookyHash V2 (Bob Jenkins, 2012), the 128-bit hash whose low 32 bits mcrouter's WeightedCh3 draws a key's acceptance from. */
#include <string.h>

#include "placement_internal.h"

/*
 * Written from the published definition (Bob Jenkins's SpookyV2, public
 * domain; folly/hash/SpookyHashV2 is the same function): messages below
 * 192 bytes take the short path (four lanes, 32 bytes a round), longer
 * ones the long path (twelve lanes, 96-byte blocks). Words are read
 * little-endian, as on the machines mcrouter runs on. The 512 vectors of
 * folly/hash/test/SpookyHashV2Test.cpp are checked in test/test_proxies.c.
 */

#define SPOOKY_CONST 0xdeadbeefdeadbeefULL /* sc_const */
#define SPOOKY_LANES 12                    /* sc_numVars */
#define SPOOKY_BLOCK (SPOOKY_LANES * 8)    /* sc_blockSize: 96 bytes */
#define SPOOKY_SHORT (2 * SPOOKY_BLOCK)    /* sc_bufSize: below it, the short path */

static inline uint64_t rot64(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static inline uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static inline uint64_t le32(const unsigned char *p)
{
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24;
}

/* ---- the short path: four lanes ---- */

/* One step of ShortMix: a lane rotated, the next added, another xored. */
#define SM(x, k, y, z) (x = rot64(x, k), x += y, z ^= x)

static void short_mix(uint64_t h[4])
{
    SM(h[2], 50, h[3], h[0]);
    SM(h[3], 52, h[0], h[1]);
    SM(h[0], 30, h[1], h[2]);
    SM(h[1], 41, h[2], h[3]);
    SM(h[2], 54, h[3], h[0]);
    SM(h[3], 48, h[0], h[1]);
    SM(h[0], 38, h[1], h[2]);
    SM(h[1], 37, h[2], h[3]);
    SM(h[2], 62, h[3], h[0]);
    SM(h[3], 34, h[0], h[1]);
    SM(h[0], 5, h[1], h[2]);
    SM(h[1], 36, h[2], h[3]);
}

/* One step of ShortEnd: a lane xored with another, which is rotated and
 * added back. */
#define SE(x, y, k) (x ^= y, y = rot64(y, k), x += y)

static void short_end(uint64_t h[4])
{
    SE(h[3], h[2], 15);
    SE(h[0], h[3], 52);
    SE(h[1], h[0], 26);
    SE(h[2], h[1], 51);
    SE(h[3], h[2], 28);
    SE(h[0], h[3], 9);
    SE(h[1], h[0], 47);
    SE(h[2], h[1], 54);
    SE(h[3], h[2], 32);
    SE(h[0], h[3], 25);
    SE(h[1], h[0], 63);
}

static void spooky_short(const unsigned char *p, size_t len, uint64_t *h1, uint64_t *h2)
{
    uint64_t h[4] = {*h1, *h2, SPOOKY_CONST, SPOOKY_CONST};
    size_t rest = len % 32;

    if (len > 15) {
        for (size_t i = 0; i < len / 32; i++, p += 32) {
            h[2] += le64(p);
            h[3] += le64(p + 8);
            short_mix(h);
            h[0] += le64(p + 16);
            h[1] += le64(p + 24);
        }
        if (rest >= 16) {
            h[2] += le64(p);
            h[3] += le64(p + 8);
            short_mix(h);
            p += 16;
            rest -= 16;
        }
    }
    /* the last 0..15 bytes: c takes bytes 0..7, d bytes 8..14 and the
     * length in its top byte; no bytes at all add the constant to both */
    h[3] += (uint64_t)len << 56;
    if (rest == 0) {
        h[2] += SPOOKY_CONST;
        h[3] += SPOOKY_CONST;
    } else if (rest >= 12) {
        h[2] += le64(p);
        h[3] += le32(p + 8);
        for (size_t i = 12; i < rest; i++)
            h[3] += (uint64_t)p[i] << (8 * (i - 8));
    } else if (rest >= 8) {
        h[2] += le64(p);
        for (size_t i = 8; i < rest; i++)
            h[3] += (uint64_t)p[i] << (8 * (i - 8));
    } else if (rest >= 4) {
        h[2] += le32(p);
        for (size_t i = 4; i < rest; i++)
            h[2] += (uint64_t)p[i] << (8 * i);
    } else {
        for (size_t i = 0; i < rest; i++)
            h[2] += (uint64_t)p[i] << (8 * i);
    }
    short_end(h);
    *h1 = h[0];
    *h2 = h[1];
}

/* ---- the long path: twelve lanes ---- */

/* The rotations of Mix, lane by lane, and of EndPartial. */
static const int mix_rot[SPOOKY_LANES] = {11, 32, 43, 31, 17, 28, 39, 57, 55, 54, 22, 46};
static const int end_rot[SPOOKY_LANES] = {44, 15, 34, 21, 38, 33, 10, 13, 38, 53, 42, 54};

/* Mix: lane i takes data word i, xors lane i+10 into lane i+2 and itself
 * into lane i+11, is rotated, and lane i+1 is added to lane i+11 (lane
 * numbers mod 12); the steps run in lane order. */
static void mix(const unsigned char *block, uint64_t s[SPOOKY_LANES])
{
    for (int i = 0; i < SPOOKY_LANES; i++) {
        s[i] += le64(block + 8 * i);
        s[(i + 2) % 12] ^= s[(i + 10) % 12];
        s[(i + 11) % 12] ^= s[i];
        s[i] = rot64(s[i], mix_rot[i]);
        s[(i + 11) % 12] += s[(i + 1) % 12];
    }
}

/* EndPartial: lane i+1 is added to lane i+11, lane i+11 xored into lane
 * i+2, and lane i+1 rotated. */
static void end_partial(uint64_t h[SPOOKY_LANES])
{
    for (int i = 0; i < SPOOKY_LANES; i++) {
        h[(i + 11) % 12] += h[(i + 1) % 12];
        h[(i + 2) % 12] ^= h[(i + 11) % 12];
        h[(i + 1) % 12] = rot64(h[(i + 1) % 12], end_rot[i]);
    }
}

void mcr__spooky128_parts(const void *head, size_t hlen, const void *tail, size_t tlen,
                          uint64_t *h1, uint64_t *h2)
{
    size_t len = hlen + tlen;
    uint64_t h[SPOOKY_LANES];
    /* the head's last bytes that fill no block, the tail, the padding */
    unsigned char rest[2 * SPOOKY_BLOCK + MCR__SPOOKY_TAIL_MAX];

    if (len < SPOOKY_SHORT) {
        if (tlen == 0) {
            spooky_short(head, len, h1, h2);
        } else {
            memcpy(rest, head, hlen);
            memcpy(rest + hlen, tail, tlen);
            spooky_short(rest, len, h1, h2);
        }
        return;
    }
    for (int i = 0; i < SPOOKY_LANES; i += 3) {
        h[i] = *h1;
        h[i + 1] = *h2;
        h[i + 2] = SPOOKY_CONST;
    }
    const unsigned char *p = head;
    size_t done = 0;
    for (; done + SPOOKY_BLOCK <= hlen; done += SPOOKY_BLOCK, p += SPOOKY_BLOCK)
        mix(p, h);
    size_t r = hlen - done;
    memcpy(rest, p, r);
    if (tlen > 0)
        memcpy(rest + r, tail, tlen);
    r += tlen;
    p = rest;
    for (; r >= SPOOKY_BLOCK; r -= SPOOKY_BLOCK, p += SPOOKY_BLOCK)
        mix(p, h);
    /* the last partial block, zero-padded, its length in the last byte */
    unsigned char last[SPOOKY_BLOCK];
    memcpy(last, p, r);
    memset(last + r, 0, SPOOKY_BLOCK - r);
    last[SPOOKY_BLOCK - 1] = (unsigned char)r;
    for (int i = 0; i < SPOOKY_LANES; i++)
        h[i] += le64(last + 8 * i);
    end_partial(h);
    end_partial(h);
    end_partial(h);
    *h1 = h[0];
    *h2 = h[1];
}

void mcr__spooky128(const void *data, size_t len, uint64_t *h1, uint64_t *h2)
{
    mcr__spooky128_parts(data, len, NULL, 0, h1, h2);
}

uint32_t mcr__spooky32(const void *data, size_t len, uint32_t seed)
{
    uint64_t h1 = seed, h2 = seed;
    mcr__spooky128(data, len, &h1, &h2);
    return (uint32_t)h1;
}
