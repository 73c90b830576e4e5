/* SPDX-License-Identifier: BSD-3-Clause */
/* clienthash.c: the hashes of other clients that read a key as characters (Java's String.hashCode, pymemcache's murmur3), and SHA-1 for dalli's points. */
#include <string.h>

#include "hash_internal.h"

/*
 * Java, JavaScript and Python hash strings, not bytes: a key reaches them as
 * the characters its UTF-8 bytes decode to. A byte that starts no valid
 * UTF-8 sequence (an overlong form, a surrogate, a code point above
 * U+10FFFF, a truncated sequence) cannot be part of such a string; it is
 * read as the character of the same value, U+0080..U+00FF, so that every
 * key has one defined answer (documented in mcr_hash(3)).
 */
uint32_t mcr__utf8_next(const unsigned char *p, size_t len, size_t *i)
{
    size_t k = *i;
    uint32_t c = p[k], cp, min;
    size_t need;

    if (c < 0x80) {
        *i = k + 1;
        return c;
    }
    if (c >= 0xc2 && c <= 0xdf) {
        need = 1;
        cp = c & 0x1f;
        min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        need = 2;
        cp = c & 0x0f;
        min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 3;
        cp = c & 0x07;
        min = 0x10000;
    } else {
        *i = k + 1;
        return c;
    }
    if (len - k - 1 < need) {
        *i = k + 1;
        return c;
    }
    for (size_t j = 1; j <= need; j++) {
        uint32_t b = p[k + j];
        if ((b & 0xc0) != 0x80) {
            *i = k + 1;
            return c;
        }
        cp = (cp << 6) | (b & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
        *i = k + 1;
        return c;
    }
    *i = k + 1 + need;
    return cp;
}

/* Java's String.hashCode(): h = 31 h + u over the UTF-16 code units u
 * (a code point above U+FFFF is a surrogate pair), in 32-bit arithmetic. */
uint32_t mcr__hash_hashcode(const unsigned char *p, size_t len)
{
    uint32_t h = 0;

    for (size_t i = 0; i < len;) {
        uint32_t cp = mcr__utf8_next(p, len, &i);
        if (cp >= 0x10000) {
            cp -= 0x10000;
            h = 31 * h + (0xd800 + (cp >> 10));
            h = 31 * h + (0xdc00 + (cp & 0x3ff));
        } else {
            h = 31 * h + cp;
        }
    }
    return h;
}

/* memjs: Math.abs() of that hash read as a signed 32-bit number; -2^31 has
 * no 32-bit opposite and gives 2^31. */
uint32_t mcr__hash_hashcode_abs(const unsigned char *p, size_t len)
{
    uint32_t h = mcr__hash_hashcode(p, len);
    return (h & 0x80000000u) ? (uint32_t)(0u - h) : h;
}

/* ---------------------------------------------------------------- pymemcache */

static inline uint32_t rotl32(uint32_t x, unsigned r)
{
    return (x << r) | (x >> (32 - r));
}

/* pymemcache's murmur3_32 (client/murmur3.py), seed 0, over the characters
 * of a text: each block word is built from the low 8 bits of four
 * characters (Python's unbounded integers keep every low 32 bits exact;
 * nothing above bit 31 ever flows down), and the length is the number of
 * characters. The text is "NAME-KEY" as two UTF-8 pieces, so nothing is
 * copied. */
typedef struct char_stream {
    const unsigned char *p[2];
    size_t len[2];
    size_t part, i;
    int dash;        /* the '-' between the two pieces is still to come */
} char_stream;

static int stream_next(char_stream *s, uint32_t *c)
{
    while (s->part < 2) {
        if (s->part == 1 && s->dash) {
            s->dash = 0;
            *c = '-';
            return 1;
        }
        if (s->i < s->len[s->part]) {
            *c = mcr__utf8_next(s->p[s->part], s->len[s->part], &s->i);
            return 1;
        }
        s->part++;
        s->i = 0;
    }
    return 0;
}

uint32_t mcr__pymemcache_score(const char *name, size_t nlen, const void *key, size_t len)
{
    char_stream s = {{(const unsigned char *)name, key}, {nlen, len}, 0, 0, 1};
    uint32_t h = 0, k, c[4], count = 0;
    int n;

    for (;;) {
        for (n = 0; n < 4 && stream_next(&s, &c[n]); n++)
            ;
        count += (uint32_t)n;
        if (n < 4)
            break;
        k = (c[0] & 0xff) | (c[1] & 0xff) << 8 | (c[2] & 0xff) << 16 | (c[3] & 0xff) << 24;
        h = mcr__murmur3_block(h, k);
    }
    if (n > 0) {
        k = 0;
        for (int j = n - 1; j >= 0; j--)
            k = (k << 8) | (c[j] & 0xff);
        h ^= mcr__murmur3_k(k);
    }
    return mcr__murmur3_final(h, count);
}

/* ---------------------------------------------------------------- SHA-1 */

/* FIPS 180-4 SHA-1, one shot, for dalli's points (the first 4 bytes of the
 * digest of "host:port:i", big-endian). Only the first word of the digest is
 * returned. The core library links no libcrypto (the tests check these
 * values against OpenSSL's). */
static void sha1_block(uint32_t st[5], const unsigned char *b)
{
    uint32_t w[80], a = st[0], bb = st[1], c = st[2], d = st[3], e = st[4];

    for (int t = 0; t < 16; t++)
        w[t] = (uint32_t)b[4 * t] << 24 | (uint32_t)b[4 * t + 1] << 16 |
               (uint32_t)b[4 * t + 2] << 8 | (uint32_t)b[4 * t + 3];
    for (int t = 16; t < 80; t++)
        w[t] = rotl32(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1);
    for (int t = 0; t < 80; t++) {
        uint32_t f, kk;
        if (t < 20) {
            f = (bb & c) | (~bb & d);
            kk = 0x5a827999u;
        } else if (t < 40) {
            f = bb ^ c ^ d;
            kk = 0x6ed9eba1u;
        } else if (t < 60) {
            f = (bb & c) | (bb & d) | (c & d);
            kk = 0x8f1bbcdcu;
        } else {
            f = bb ^ c ^ d;
            kk = 0xca62c1d6u;
        }
        uint32_t tmp = rotl32(a, 5) + f + e + kk + w[t];
        e = d;
        d = c;
        c = rotl32(bb, 30);
        bb = a;
        a = tmp;
    }
    st[0] += a;
    st[1] += bb;
    st[2] += c;
    st[3] += d;
    st[4] += e;
}

uint32_t mcr__sha1_u32be(const void *data, size_t len)
{
    uint32_t st[5] = {0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u, 0xc3d2e1f0u};
    const unsigned char *p = data;
    unsigned char tail[128];
    size_t full = len & ~(size_t)63, rest = len - full, tl;
    uint64_t bits = (uint64_t)len * 8;

    for (size_t i = 0; i < full; i += 64)
        sha1_block(st, p + i);
    static const unsigned char zeros[128]; /* copied: a memset() is `rep stos` on x86-64 */
    memcpy(tail, zeros, sizeof(tail));
    if (rest > 0)
        memcpy(tail, p + full, rest);
    tail[rest] = 0x80;
    tl = rest + 1 + 8 <= 64 ? 64 : 128;
    for (int j = 0; j < 8; j++)
        tail[tl - 1 - j] = (unsigned char)(bits >> (8 * j));
    sha1_block(st, tail);
    if (tl == 128)
        sha1_block(st, tail + 64);
    return st[0];
}
