/* SPDX-License-Identifier: BSD-3-Clause */
/* hash_internal.h: the key hashes' internal entry points (never installed), above base/. */
#ifndef MCR_HASH_INTERNAL_H
#define MCR_HASH_INTERNAL_H

#include "base/base_internal.h"

/* ---- hashing (hash.c, md5.c) ---- */

/* mcr_hash_key() without the exported entry point: a direct call from
 * inside the library (no PLT), same results. */
uint32_t mcr__hash_key(mcr_hash h, const void *data, size_t len);

/* mcr__hash_key() of n keys into out[0..n-1]: same values, higher
 * throughput (MD5 in SIMD lanes, byte-serial hashes four keys in lockstep). */
void mcr__hash_many(mcr_hash h, const void *const *keys, const size_t *lens, size_t n,
                    uint32_t *out);

/* Low 32 bits, little-endian, of the MD5 digest of data: the "md5" key hash.
 * Faster than a full digest (skips work that does not reach those bits). */
uint32_t mcr__md5_u32(const void *data, size_t len);

/* mcr__md5_u32 of n keys at once into out[0..n-1]: same values, several
 * times the throughput on CPUs with AVX2 or AVX-512 (keys in SIMD lanes). */
void mcr__md5_u32_many(const void *const *keys, const size_t *lens, size_t n, uint32_t *out);

/* Tests only (not thread-safe): make mcr__md5_u32_many use 16, 8 or 0 lanes
 * where the CPU allows it, -1 to choose automatically again. Returns the lane
 * count now in force. */
int mcr__md5_force_lanes(int lanes);

/* The four little-endian 32-bit words of the MD5 digest: ketama's four
 * points per label. */
void mcr__md5_words(const void *data, size_t len, uint32_t out[4]);

/* The CRC-32 (IEEE) register after len more bytes, without the final
 * inversion: crc32(x) = ~mcr__crc32_update(0xffffffff, x). nginx chains
 * its consistent points through it. */
uint32_t mcr__crc32_update(uint32_t crc, const void *data, size_t len);

/* MurmurHash3_x86_32's steps (Austin Appleby's public-domain algorithm),
 * shared by libhashkit's "murmur3" (hash.c) and pymemcache's (clienthash.c),
 * which differ only in seed and in what a character is. */
static inline uint32_t mcr__murmur3_k(uint32_t k)
{
    k *= 0xcc9e2d51u;
    k = (k << 15) | (k >> 17);
    return k * 0x1b873593u;
}
static inline uint32_t mcr__murmur3_block(uint32_t h, uint32_t k)
{
    h ^= mcr__murmur3_k(k);
    h = (h << 13) | (h >> 19);
    return h * 5 + 0xe6546b64u;
}
static inline uint32_t mcr__murmur3_final(uint32_t h, uint32_t len)
{
    h ^= len;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    return h ^ (h >> 16);
}

/* ---- the hashes of other clients (clienthash.c) ---- */

/* The next character of a UTF-8 text p[0..len) from *i (< len), *i moved
 * past it; a byte that starts no valid sequence is the character of its
 * value (U+0080..U+00FF). */
uint32_t mcr__utf8_next(const unsigned char *p, size_t len, size_t *i);
/* "hashcode" and "hashcode_abs" (see mcr_hash). */
uint32_t mcr__hash_hashcode(const unsigned char *p, size_t len);
uint32_t mcr__hash_hashcode_abs(const unsigned char *p, size_t len);
/* pymemcache's score of server `name` for a key: its murmur3_32 of the
 * text "NAME-KEY" read as characters. */
uint32_t mcr__pymemcache_score(const char *name, size_t nlen, const void *key, size_t len);
/* The first 4 bytes of SHA-1(data), big-endian (dalli's points). */
uint32_t mcr__sha1_u32be(const void *data, size_t len);

#endif /* MCR_HASH_INTERNAL_H */
