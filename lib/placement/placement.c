/* SPDX-License-Identifier: BSD-3-Clause */
/* placement.c: the algorithms of the native table modes: jump consistent hash, Maglev tables, weighted rendezvous, CRC-16 slots. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "placement_internal.h"

/* ------------------------------------------------------------ mixing */

/* SplitMix64's increment (Steele, Lea and Flood, "Fast splittable
 * pseudorandom number generators", OOPSLA 2014): 2^64 / golden ratio. */
#define GOLDEN_GAMMA 0x9e3779b97f4a7c15ULL

uint64_t mcr__mix64(uint64_t x)
{
    /* The first output of SplitMix64 seeded with x: a bijection of 64-bit
     * words in which every input bit affects every output bit. */
    uint64_t z = x + GOLDEN_GAMMA;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t mcr__id_seed(const char *id, size_t len)
{
    unsigned char d[16];
    uint64_t v = 0;
    mcr_md5(id, len, d);
    for (int i = 7; i >= 0; i--)
        v = v << 8 | d[i];
    return v;
}

/* ------------------------------------------------------------ CRC-16 */

/* CRC-16/XMODEM (polynomial 0x1021, initial value 0, most significant bit
 * first, no final xor): the slot hash of Redis Cluster. crc16_table[b] is
 * the CRC of the byte b followed by a zero byte (its 8 steps done at once). */
static const uint16_t crc16_table[256] = {
    0x0000, 0x1021, 0x2042, 0x3063, 0x4084, 0x50a5, 0x60c6, 0x70e7,
    0x8108, 0x9129, 0xa14a, 0xb16b, 0xc18c, 0xd1ad, 0xe1ce, 0xf1ef,
    0x1231, 0x0210, 0x3273, 0x2252, 0x52b5, 0x4294, 0x72f7, 0x62d6,
    0x9339, 0x8318, 0xb37b, 0xa35a, 0xd3bd, 0xc39c, 0xf3ff, 0xe3de,
    0x2462, 0x3443, 0x0420, 0x1401, 0x64e6, 0x74c7, 0x44a4, 0x5485,
    0xa56a, 0xb54b, 0x8528, 0x9509, 0xe5ee, 0xf5cf, 0xc5ac, 0xd58d,
    0x3653, 0x2672, 0x1611, 0x0630, 0x76d7, 0x66f6, 0x5695, 0x46b4,
    0xb75b, 0xa77a, 0x9719, 0x8738, 0xf7df, 0xe7fe, 0xd79d, 0xc7bc,
    0x48c4, 0x58e5, 0x6886, 0x78a7, 0x0840, 0x1861, 0x2802, 0x3823,
    0xc9cc, 0xd9ed, 0xe98e, 0xf9af, 0x8948, 0x9969, 0xa90a, 0xb92b,
    0x5af5, 0x4ad4, 0x7ab7, 0x6a96, 0x1a71, 0x0a50, 0x3a33, 0x2a12,
    0xdbfd, 0xcbdc, 0xfbbf, 0xeb9e, 0x9b79, 0x8b58, 0xbb3b, 0xab1a,
    0x6ca6, 0x7c87, 0x4ce4, 0x5cc5, 0x2c22, 0x3c03, 0x0c60, 0x1c41,
    0xedae, 0xfd8f, 0xcdec, 0xddcd, 0xad2a, 0xbd0b, 0x8d68, 0x9d49,
    0x7e97, 0x6eb6, 0x5ed5, 0x4ef4, 0x3e13, 0x2e32, 0x1e51, 0x0e70,
    0xff9f, 0xefbe, 0xdfdd, 0xcffc, 0xbf1b, 0xaf3a, 0x9f59, 0x8f78,
    0x9188, 0x81a9, 0xb1ca, 0xa1eb, 0xd10c, 0xc12d, 0xf14e, 0xe16f,
    0x1080, 0x00a1, 0x30c2, 0x20e3, 0x5004, 0x4025, 0x7046, 0x6067,
    0x83b9, 0x9398, 0xa3fb, 0xb3da, 0xc33d, 0xd31c, 0xe37f, 0xf35e,
    0x02b1, 0x1290, 0x22f3, 0x32d2, 0x4235, 0x5214, 0x6277, 0x7256,
    0xb5ea, 0xa5cb, 0x95a8, 0x8589, 0xf56e, 0xe54f, 0xd52c, 0xc50d,
    0x34e2, 0x24c3, 0x14a0, 0x0481, 0x7466, 0x6447, 0x5424, 0x4405,
    0xa7db, 0xb7fa, 0x8799, 0x97b8, 0xe75f, 0xf77e, 0xc71d, 0xd73c,
    0x26d3, 0x36f2, 0x0691, 0x16b0, 0x6657, 0x7676, 0x4615, 0x5634,
    0xd94c, 0xc96d, 0xf90e, 0xe92f, 0x99c8, 0x89e9, 0xb98a, 0xa9ab,
    0x5844, 0x4865, 0x7806, 0x6827, 0x18c0, 0x08e1, 0x3882, 0x28a3,
    0xcb7d, 0xdb5c, 0xeb3f, 0xfb1e, 0x8bf9, 0x9bd8, 0xabbb, 0xbb9a,
    0x4a75, 0x5a54, 0x6a37, 0x7a16, 0x0af1, 0x1ad0, 0x2ab3, 0x3a92,
    0xfd2e, 0xed0f, 0xdd6c, 0xcd4d, 0xbdaa, 0xad8b, 0x9de8, 0x8dc9,
    0x7c26, 0x6c07, 0x5c64, 0x4c45, 0x3ca2, 0x2c83, 0x1ce0, 0x0cc1,
    0xef1f, 0xff3e, 0xcf5d, 0xdf7c, 0xaf9b, 0xbfba, 0x8fd9, 0x9ff8,
    0x6e17, 0x7e36, 0x4e55, 0x5e74, 0x2e93, 0x3eb2, 0x0ed1, 0x1ef0,
};

uint16_t mcr__crc16(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint16_t crc = 0;

    for (size_t i = 0; i < len; i++)
        crc = (uint16_t)(crc << 8 ^ crc16_table[(crc >> 8 ^ p[i]) & 0xff]);
    return crc;
}

/* ------------------------------------------------------------ jump */

/* Jump consistent hash, the loop published by Lamping and Veach ("A Fast,
 * Minimal Memory, Consistent Hash Algorithm", 2014): the key drives a
 * 64-bit linear congruential generator (multiplier 2862933555777941757,
 * increment 1) and jumps forward from bucket to bucket; the last bucket
 * below nbuckets is the answer. Each step computes
 * (b + 1) * (2^31 / ((key >> 33) + 1)) in double precision, as published:
 * IEEE arithmetic, so every platform gets the same bucket. */
uint32_t mcr__jump(uint64_t key, uint32_t nbuckets)
{
    int64_t b = -1, j = 0;
    while (j < (int64_t)nbuckets) {
        b = j;
        key = key * 2862933555777941757ULL + 1;
        j = (int64_t)((double)(b + 1) * ((double)(1LL << 31) / (double)((key >> 33) + 1)));
    }
    return (uint32_t)b;
}

/* ------------------------------------------------------------ primes */

int mcr__is_prime(uint32_t n)
{
    if (n < 2)
        return 0;
    if (n % 2 == 0)
        return n == 2;
    for (uint32_t d = 3; d <= n / d; d += 2)
        if (n % d == 0)
            return 0;
    return 1;
}

uint32_t mcr__maglev_auto_size(size_t servers)
{
    uint64_t want = (uint64_t)MCR__MAGLEV_AUTO_FACTOR * servers;
    if (want < MCR__MAGLEV_DEFAULT_SIZE)
        want = MCR__MAGLEV_DEFAULT_SIZE;
    if (want >= MCR_MAGLEV_SIZE_MAX)
        return MCR_MAGLEV_SIZE_MAX;
    uint32_t m = (uint32_t)want;
    while (!mcr__is_prime(m))
        m++;
    return m;
}

uint32_t mcr__maglev_size_limit(size_t listed)
{
    uint64_t n = listed, lim = MCR_MAGLEV_SIZE_FREE;
    if (n < (1u << 16) && MCR_MAGLEV_SIZE_PER_N2 * n * n > lim)
        lim = MCR_MAGLEV_SIZE_PER_N2 * n * n;
    else if (n >= (1u << 16))
        lim = MCR_MAGLEV_SIZE_MAX;
    return lim < MCR_MAGLEV_SIZE_MAX ? (uint32_t)lim : MCR_MAGLEV_SIZE_MAX;
}

int mcr__maglev_check_limit(uint32_t m, size_t listed, mcr_error *err)
{
    uint32_t lim = mcr__maglev_size_limit(listed);
    if (m <= lim)
        return MCR_OK;
    return mcr__error(err, MCR_ERR_RANGE,
                      "maglev: a table of %u entries for %zu server%s is above the limit of %u "
                      "(max(%u, %u x servers^2)): use a smaller table",
                      (unsigned)m, listed, listed == 1 ? "" : "s", (unsigned)lim,
                      (unsigned)MCR_MAGLEV_SIZE_FREE, (unsigned)MCR_MAGLEV_SIZE_PER_N2);
}

/* ------------------------------------------------------------ Maglev */

void mcr__maglev_perm(const char *id, size_t len, uint32_t m, uint32_t *offset, uint32_t *skip)
{
    unsigned char d[16];
    uint64_t h1 = 0, h2 = 0;
    mcr_md5(id, len, d);
    for (int i = 7; i >= 0; i--) {
        h1 = h1 << 8 | d[i];
        h2 = h2 << 8 | d[8 + i];
    }
    *offset = (uint32_t)(h1 % m);
    *skip = (uint32_t)(h2 % (m - 1) + 1);
}

/* A turn of the weighted round robin: server `who` has taken `taken`
 * turns; its next one falls at virtual time (taken + 1) / weight. */
typedef struct turn {
    uint64_t taken;
    uint32_t weight;
    uint32_t who;
} turn;

/* Whether turn a comes before turn b: earlier virtual time, compared
 * exactly by cross-multiplication ((taken + 1) < 2^27, weight < 2^20:
 * products below 2^47), then the lower server index. */
static int turn_before(const turn *a, const turn *b)
{
    uint64_t x = (a->taken + 1) * b->weight, y = (b->taken + 1) * a->weight;
    return x < y || (x == y && a->who < b->who);
}

static void heap_down(turn *h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, best = i;
        if (l < n && turn_before(&h[l], &h[best]))
            best = l;
        if (l + 1 < n && turn_before(&h[l + 1], &h[best]))
            best = l + 1;
        if (best == i)
            return;
        turn t = h[i];
        h[i] = h[best];
        h[best] = t;
        i = best;
    }
}

int mcr__maglev_fill(const uint32_t *offset, const uint32_t *skip, const uint32_t *weight,
                     size_t n, uint32_t m, uint32_t *table)
{
    /* Eisenbud et al., "Maglev: A Fast and Reliable Software Network Load
     * Balancer" (NSDI 2016), section 3.4: each server walks its own
     * permutation of the table (offset, offset + skip, ... mod m) and, at
     * its turn, claims the first entry of it still free. The paper takes
     * turns round robin; here a server's turns come at the virtual times
     * 1/w, 2/w, 3/w, ... so that it claims entries in proportion to its
     * weight w (with equal weights: the paper's round robin exactly). */
    turn *h = malloc(n * sizeof(*h));
    uint32_t *next = calloc(n, sizeof(*next));
    if (h == NULL || next == NULL) {
        free(h);
        free(next);
        return MCR_ERR_NOMEM;
    }
    for (uint32_t c = 0; c < m; c++)
        table[c] = MCR__HOLE;
    for (size_t i = 0; i < n; i++)
        h[i] = (turn){0, weight[i], (uint32_t)i};
    for (size_t i = n / 2; i-- > 0;)
        heap_down(h, n, i);
    for (uint32_t filled = 0; filled < m; filled++) {
        uint32_t who = h[0].who;
        uint64_t c;
        do /* a permutation visits every entry: some is free */
            c = (offset[who] + (uint64_t)next[who]++ * skip[who]) % m;
        while (table[c] != MCR__HOLE);
        table[c] = who;
        h[0].taken++;
        heap_down(h, n, 0);
    }
    free(h);
    free(next);
    return MCR_OK;
}

/* ------------------------------------------------------------ rendezvous */

double mcr__rdv_time(uint64_t key, uint64_t seed, uint32_t weight)
{
    /* u in (0, 1): the top 53 bits of a mix of the key and the server,
     * centred in their interval so that neither 0 nor 1 occurs. */
    uint64_t z = mcr__mix64(seed ^ key);
    double u = ((double)(z >> 11) + 0.5) * 0x1p-53;
    return -log(u) / (double)weight;
}

/* ------------------------------------------------------------ quotas */

typedef struct rem {
    uint64_t frac;
    uint32_t idx;
} rem;

static int rem_cmp(const void *x, const void *y)
{
    const rem *a = x, *b = y;
    if (a->frac != b->frac)
        return a->frac > b->frac ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

int mcr__quotas(const uint32_t *weight, size_t n, uint32_t total, uint32_t *quota)
{
    uint64_t w = 0, given = 0;
    for (size_t i = 0; i < n; i++)
        w += weight[i];
    if (w == 0) {
        memset(quota, 0, n * sizeof(*quota));
        return MCR_OK;
    }
    rem *r = malloc((n ? n : 1) * sizeof(*r));
    if (r == NULL)
        return MCR_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        uint64_t x = (uint64_t)total * weight[i];
        quota[i] = (uint32_t)(x / w);
        given += quota[i];
        r[i].frac = x % w;
        r[i].idx = (uint32_t)i;
    }
    qsort(r, n, sizeof(*r), rem_cmp);
    for (size_t k = 0; given < total; k++, given++)
        quota[r[k].idx]++;
    free(r);
    return MCR_OK;
}

/* ------------------------------------------------------------ slots */

/* Probes of the fallback of a slot whose owner is not active. */
#define SLOT_PROBES 64

uint32_t mcr__slot_probe(uint32_t slot, uint32_t k, uint32_t nslots)
{
    return (uint32_t)(mcr__mix64((uint64_t)slot << 32 | k) % nslots);
}

int mcr__slots_resolve(uint32_t *table, const uint32_t *map, uint32_t nslots,
                       uint32_t nactive)
{
    /* next[s]: the first slot at or after s (cyclically) whose owner is
     * active, for the rare slot whose probes all miss. */
    uint32_t *next = malloc((size_t)nslots * sizeof(*next));
    uint32_t live = MCR__HOLE;

    if (next == NULL)
        return MCR_ERR_NOMEM;
    for (uint32_t pass = 0; pass < 2; pass++)
        for (uint32_t s = nslots; s-- > 0;) {
            if (map[s] != MCR__HOLE)
                live = s;
            next[s] = live;
        }
    for (uint32_t s = 0; s < nslots; s++) {
        uint32_t o = map[s];
        for (uint32_t k = 1; o == MCR__HOLE && live != MCR__HOLE && k <= SLOT_PROBES; k++)
            o = map[mcr__slot_probe(s, k, nslots)];
        if (o == MCR__HOLE && live != MCR__HOLE)
            o = map[next[s]];
        if (o == MCR__HOLE) /* no slot has an active owner */
            o = (uint32_t)(mcr__mix64(s) % nactive);
        table[s] = o;
    }
    free(next);
    return MCR_OK;
}
