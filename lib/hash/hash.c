/* SPDX-License-Identifier: BSD-3-Clause */
/* hash.c: the key hashes of libhashkit 1.1.4, bit for bit, and their names. */
#include <string.h>

#include "hash_internal.h"

/*
 * Each hash below reproduces what Debian's libhashkit 1.1.4 (amd64) returns
 * for the same bytes, including its quirks, because a key must land on the
 * server where libmemcached put it. The quirks that matter:
 *
 *  - one-at-a-time and the four FNV variants read the key through a plain
 *    `char *`, which is signed on x86: a byte >= 0x80 enters the arithmetic
 *    sign-extended (0xC3 as 0xFFFFFFC3, or 0xFFFFFFFFFFFFFFC3 for FNV-64).
 *    We sign-extend explicitly, so the results are the x86 ones on every
 *    platform, also where char is unsigned.
 *  - murmur, jenkins and murmur3 use seeds of libhashkit's choosing (see
 *    their comments); they were found by comparing with libhashkit_digest()
 *    (test/test_hash.c keeps comparing).
 *  - Debian builds libhashkit without hsieh (it returns 1 for every key).
 *    Ours is the SuperFastHash that libmemcached and twemproxy ship, so keys
 *    place as under a libmemcached built with hsieh, and as in twemproxy.
 */

/* A key byte as libhashkit's signed `char` arithmetic sees it. */
#define HK_SCHAR32(p, i) ((uint32_t)(int32_t)(signed char)(p)[i])
#define HK_SCHAR64(p, i) ((uint64_t)(int64_t)(signed char)(p)[i])

static inline uint32_t rotl32(uint32_t x, unsigned r)
{
    return (x << r) | (x >> (32 - r));
}


/* The last n (1..3) bytes as a little-endian word, zero-extended: what the
 * Murmur tails build byte by byte with shifts. */
static inline uint32_t load_tail(const unsigned char *p, size_t n)
{
    unsigned char b[4] = {0, 0, 0, 0};

    memcpy(b, p, n);
    return mcr__load_le32(b);
}

/* ---------------------------------------------------------------- default */

/* Bob Jenkins' one-at-a-time. */
static uint32_t hash_one_at_a_time(const unsigned char *p, size_t len)
{
    uint32_t h = 0;

    for (size_t i = 0; i < len; i++) {
        h += HK_SCHAR32(p, i);
        h += h << 10;
        h ^= h >> 6;
    }
    h += h << 3;
    h ^= h >> 11;
    h += h << 15;
    return h;
}

/* ---------------------------------------------------------------- crc */

/* CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), one byte a step.
 * Keys are short and crc is a rare choice: a 1 KiB table is enough (it is as
 * fast as libhashkit's) and wider slicing would cost 8 KiB of cache. */
static const uint32_t crc32_table[256] = {
    0x00000000u, 0x77073096u, 0xee0e612cu, 0x990951bau, 0x076dc419u, 0x706af48fu,
    0xe963a535u, 0x9e6495a3u, 0x0edb8832u, 0x79dcb8a4u, 0xe0d5e91eu, 0x97d2d988u,
    0x09b64c2bu, 0x7eb17cbdu, 0xe7b82d07u, 0x90bf1d91u, 0x1db71064u, 0x6ab020f2u,
    0xf3b97148u, 0x84be41deu, 0x1adad47du, 0x6ddde4ebu, 0xf4d4b551u, 0x83d385c7u,
    0x136c9856u, 0x646ba8c0u, 0xfd62f97au, 0x8a65c9ecu, 0x14015c4fu, 0x63066cd9u,
    0xfa0f3d63u, 0x8d080df5u, 0x3b6e20c8u, 0x4c69105eu, 0xd56041e4u, 0xa2677172u,
    0x3c03e4d1u, 0x4b04d447u, 0xd20d85fdu, 0xa50ab56bu, 0x35b5a8fau, 0x42b2986cu,
    0xdbbbc9d6u, 0xacbcf940u, 0x32d86ce3u, 0x45df5c75u, 0xdcd60dcfu, 0xabd13d59u,
    0x26d930acu, 0x51de003au, 0xc8d75180u, 0xbfd06116u, 0x21b4f4b5u, 0x56b3c423u,
    0xcfba9599u, 0xb8bda50fu, 0x2802b89eu, 0x5f058808u, 0xc60cd9b2u, 0xb10be924u,
    0x2f6f7c87u, 0x58684c11u, 0xc1611dabu, 0xb6662d3du, 0x76dc4190u, 0x01db7106u,
    0x98d220bcu, 0xefd5102au, 0x71b18589u, 0x06b6b51fu, 0x9fbfe4a5u, 0xe8b8d433u,
    0x7807c9a2u, 0x0f00f934u, 0x9609a88eu, 0xe10e9818u, 0x7f6a0dbbu, 0x086d3d2du,
    0x91646c97u, 0xe6635c01u, 0x6b6b51f4u, 0x1c6c6162u, 0x856530d8u, 0xf262004eu,
    0x6c0695edu, 0x1b01a57bu, 0x8208f4c1u, 0xf50fc457u, 0x65b0d9c6u, 0x12b7e950u,
    0x8bbeb8eau, 0xfcb9887cu, 0x62dd1ddfu, 0x15da2d49u, 0x8cd37cf3u, 0xfbd44c65u,
    0x4db26158u, 0x3ab551ceu, 0xa3bc0074u, 0xd4bb30e2u, 0x4adfa541u, 0x3dd895d7u,
    0xa4d1c46du, 0xd3d6f4fbu, 0x4369e96au, 0x346ed9fcu, 0xad678846u, 0xda60b8d0u,
    0x44042d73u, 0x33031de5u, 0xaa0a4c5fu, 0xdd0d7cc9u, 0x5005713cu, 0x270241aau,
    0xbe0b1010u, 0xc90c2086u, 0x5768b525u, 0x206f85b3u, 0xb966d409u, 0xce61e49fu,
    0x5edef90eu, 0x29d9c998u, 0xb0d09822u, 0xc7d7a8b4u, 0x59b33d17u, 0x2eb40d81u,
    0xb7bd5c3bu, 0xc0ba6cadu, 0xedb88320u, 0x9abfb3b6u, 0x03b6e20cu, 0x74b1d29au,
    0xead54739u, 0x9dd277afu, 0x04db2615u, 0x73dc1683u, 0xe3630b12u, 0x94643b84u,
    0x0d6d6a3eu, 0x7a6a5aa8u, 0xe40ecf0bu, 0x9309ff9du, 0x0a00ae27u, 0x7d079eb1u,
    0xf00f9344u, 0x8708a3d2u, 0x1e01f268u, 0x6906c2feu, 0xf762575du, 0x806567cbu,
    0x196c3671u, 0x6e6b06e7u, 0xfed41b76u, 0x89d32be0u, 0x10da7a5au, 0x67dd4accu,
    0xf9b9df6fu, 0x8ebeeff9u, 0x17b7be43u, 0x60b08ed5u, 0xd6d6a3e8u, 0xa1d1937eu,
    0x38d8c2c4u, 0x4fdff252u, 0xd1bb67f1u, 0xa6bc5767u, 0x3fb506ddu, 0x48b2364bu,
    0xd80d2bdau, 0xaf0a1b4cu, 0x36034af6u, 0x41047a60u, 0xdf60efc3u, 0xa867df55u,
    0x316e8eefu, 0x4669be79u, 0xcb61b38cu, 0xbc66831au, 0x256fd2a0u, 0x5268e236u,
    0xcc0c7795u, 0xbb0b4703u, 0x220216b9u, 0x5505262fu, 0xc5ba3bbeu, 0xb2bd0b28u,
    0x2bb45a92u, 0x5cb36a04u, 0xc2d7ffa7u, 0xb5d0cf31u, 0x2cd99e8bu, 0x5bdeae1du,
    0x9b64c2b0u, 0xec63f226u, 0x756aa39cu, 0x026d930au, 0x9c0906a9u, 0xeb0e363fu,
    0x72076785u, 0x05005713u, 0x95bf4a82u, 0xe2b87a14u, 0x7bb12baeu, 0x0cb61b38u,
    0x92d28e9bu, 0xe5d5be0du, 0x7cdcefb7u, 0x0bdbdf21u, 0x86d3d2d4u, 0xf1d4e242u,
    0x68ddb3f8u, 0x1fda836eu, 0x81be16cdu, 0xf6b9265bu, 0x6fb077e1u, 0x18b74777u,
    0x88085ae6u, 0xff0f6a70u, 0x66063bcau, 0x11010b5cu, 0x8f659effu, 0xf862ae69u,
    0x616bffd3u, 0x166ccf45u, 0xa00ae278u, 0xd70dd2eeu, 0x4e048354u, 0x3903b3c2u,
    0xa7672661u, 0xd06016f7u, 0x4969474du, 0x3e6e77dbu, 0xaed16a4au, 0xd9d65adcu,
    0x40df0b66u, 0x37d83bf0u, 0xa9bcae53u, 0xdebb9ec5u, 0x47b2cf7fu, 0x30b5ffe9u,
    0xbdbdf21cu, 0xcabac28au, 0x53b39330u, 0x24b4a3a6u, 0xbad03605u, 0xcdd70693u,
    0x54de5729u, 0x23d967bfu, 0xb3667a2eu, 0xc4614ab8u, 0x5d681b02u, 0x2a6f2b94u,
    0xb40bbe37u, 0xc30c8ea1u, 0x5a05df1bu, 0x2d02ef8du,
};

/* libhashkit's "crc": the standard CRC-32, of which it keeps only bits
 * 16..30, so the result is 0..32767. */
static uint32_t hash_crc(const unsigned char *p, size_t len)
{
    uint32_t crc = 0xffffffffu;

    for (size_t i = 0; i < len; i++)
        crc = crc32_table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    crc = ~crc;
    return (crc >> 16) & 0x7fff;
}

/* twemproxy's "crc32a": the full CRC-32 that "crc" keeps 15 bits of. */
static uint32_t hash_crc32a(const unsigned char *p, size_t len)
{
    return ~mcr__crc32_update(0xffffffffu, p, len);
}

uint32_t mcr__crc32_update(uint32_t crc, const void *data, size_t len)
{
    const unsigned char *p = data;

    for (size_t i = 0; i < len; i++)
        crc = crc32_table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return crc;
}

/* python-memcached's cmemcache_hash: "crc", but 0 becomes 1 (`or 1`). */
static uint32_t hash_cmemcache(const unsigned char *p, size_t len)
{
    uint32_t h = hash_crc(p, len);
    return h != 0 ? h : 1;
}

/* twemproxy's "crc16" as nutcracker 0.5.0 computes it: the CRC-16/XMODEM
 * table step (polynomial 0x1021, initial value 0, MSB first), but on a 32-bit
 * accumulator that is never cut to 16 bits, so the bytes shifted out of the
 * CRC pile up above it: crc = (crc << 8) ^ T[((crc >> 8) ^ byte) & 0xff]. The
 * low 16 bits are the real CRC-16. Found by test_compat_twemproxy against a
 * live nutcracker; T[i] is computed a bit at a time (a rare choice of hash). */
static uint32_t crc16_table_entry(uint32_t i)
{
    uint32_t c = i << 8;
    for (int b = 0; b < 8; b++)
        c = (c & 0x8000) ? ((c << 1) ^ 0x1021) : (c << 1);
    return c & 0xffff;
}

static uint32_t hash_crc16(const unsigned char *p, size_t len)
{
    uint32_t crc = 0;

    for (size_t i = 0; i < len; i++)
        crc = (crc << 8) ^ crc16_table_entry(((crc >> 8) ^ p[i]) & 0xff);
    return crc;
}

/* ---------------------------------------------------------------- FNV */

#define FNV64_OFFSET 0xcbf29ce484222325ULL
#define FNV64_PRIME 0x100000001b3ULL
#define FNV32_OFFSET 2166136261u
#define FNV32_PRIME 16777619u

static uint32_t hash_fnv1_64(const unsigned char *p, size_t len)
{
    uint64_t h = FNV64_OFFSET;

    for (size_t i = 0; i < len; i++) {
        h *= FNV64_PRIME;
        h ^= HK_SCHAR64(p, i);
    }
    return (uint32_t)h;
}

static uint32_t hash_fnv1a_64(const unsigned char *p, size_t len)
{
    uint64_t h = FNV64_OFFSET;

    for (size_t i = 0; i < len; i++) {
        h ^= HK_SCHAR64(p, i);
        h *= FNV64_PRIME;
    }
    return (uint32_t)h;
}

static uint32_t hash_fnv1_32(const unsigned char *p, size_t len)
{
    uint32_t h = FNV32_OFFSET;

    for (size_t i = 0; i < len; i++) {
        h *= FNV32_PRIME;
        h ^= HK_SCHAR32(p, i);
    }
    return h;
}

static uint32_t hash_fnv1a_32(const unsigned char *p, size_t len)
{
    uint32_t h = FNV32_OFFSET;

    for (size_t i = 0; i < len; i++) {
        h ^= HK_SCHAR32(p, i);
        h *= FNV32_PRIME;
    }
    return h;
}

/* ---------------------------------------------------------------- hsieh */

/* Paul Hsieh's SuperFastHash, as libmemcached and twemproxy carry it: the
 * running hash starts at 0 (Hsieh's own starts at the length). In the tail,
 * a lone last byte (length % 4 == 1) is added unsigned, but the third byte
 * of a 3-byte tail enters sign-extended, as a signed char. That signedness
 * was measured on a real nutcracker 0.5.0 with keys of bytes >= 0x80
 * (Debian's libhashkit has no hsieh to ask). An empty key hashes to 0. */
static uint32_t hash_hsieh(const unsigned char *p, size_t len)
{
    uint32_t h = 0, tmp;
    size_t rem = len & 3;

    if (len == 0)
        return 0;
    for (size_t n = len >> 2; n > 0; n--, p += 4) {
        h += (uint32_t)p[0] | (uint32_t)p[1] << 8;
        tmp = (((uint32_t)p[2] | (uint32_t)p[3] << 8) << 11) ^ h;
        h = (h << 16) ^ tmp;
        h += h >> 11;
    }
    switch (rem) {
    case 3:
        h += (uint32_t)p[0] | (uint32_t)p[1] << 8;
        h ^= h << 16;
        h ^= HK_SCHAR32(p, 2) << 18;
        h += h >> 11;
        break;
    case 2:
        h += (uint32_t)p[0] | (uint32_t)p[1] << 8;
        h ^= h << 11;
        h += h >> 17;
        break;
    case 1:
        h += p[0];
        h ^= h << 10;
        h += h >> 1;
        break;
    default:
        break;
    }
    /* Avalanche the last bits. */
    h ^= h << 3;
    h += h >> 5;
    h ^= h << 4;
    h += h >> 17;
    h ^= h << 25;
    h += h >> 6;
    return h;
}

/* ---------------------------------------------------------------- murmur */

/* Austin Appleby's MurmurHash2 (32-bit). libhashkit seeds it with
 * 0xdeadbeef * length (mod 2^32), so the seed varies with the key length. */
static uint32_t hash_murmur(const unsigned char *p, size_t len)
{
    const uint32_t m = 0x5bd1e995u;
    const uint32_t seed = 0xdeadbeefu * (uint32_t)len;
    uint32_t h = seed ^ (uint32_t)len;

    for (size_t n = len >> 2; n > 0; n--, p += 4) {
        uint32_t k = mcr__load_le32(p);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    if ((len & 3) != 0) {
        h ^= load_tail(p, len & 3);
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

/* ---------------------------------------------------------------- jenkins */

/* Bob Jenkins' lookup3 hashlittle(). libhashkit's initial value is 13. */
#define JENKINS_INITVAL 13u

#define LOOKUP3_MIX(a, b, c)                          \
    do {                                              \
        a -= c; a ^= rotl32(c, 4);  c += b;           \
        b -= a; b ^= rotl32(a, 6);  a += c;           \
        c -= b; c ^= rotl32(b, 8);  b += a;           \
        a -= c; a ^= rotl32(c, 16); c += b;           \
        b -= a; b ^= rotl32(a, 19); a += c;           \
        c -= b; c ^= rotl32(b, 4);  b += a;           \
    } while (0)

#define LOOKUP3_FINAL(a, b, c)                        \
    do {                                              \
        c ^= b; c -= rotl32(b, 14);                   \
        a ^= c; a -= rotl32(c, 11);                   \
        b ^= a; b -= rotl32(a, 25);                   \
        c ^= b; c -= rotl32(b, 16);                   \
        a ^= c; a -= rotl32(c, 4);                    \
        b ^= a; b -= rotl32(a, 14);                   \
        c ^= b; c -= rotl32(b, 24);                   \
    } while (0)

static uint32_t hash_jenkins(const unsigned char *p, size_t len)
{
    uint32_t a, b, c;
    unsigned char last[12];

    a = b = c = 0xdeadbeefu + (uint32_t)len + JENKINS_INITVAL;
    if (len == 0) /* lookup3 returns c unmixed for no bytes */
        return c;
    /* All blocks but the last, which may be full (12 bytes) and must then
     * go through the final mix, not the block mix. */
    while (len > 12) {
        a += mcr__load_le32(p);
        b += mcr__load_le32(p + 4);
        c += mcr__load_le32(p + 8);
        LOOKUP3_MIX(a, b, c);
        p += 12;
        len -= 12;
    }
    /* 1..12 bytes left, zero-padded: the same as lookup3's byte switch. */
    memset(last, 0, sizeof last);
    memcpy(last, p, len);
    a += mcr__load_le32(last);
    b += mcr__load_le32(last + 4);
    c += mcr__load_le32(last + 8);
    LOOKUP3_FINAL(a, b, c);
    return c;
}

/* ---------------------------------------------------------------- murmur3 */

/* Austin Appleby's MurmurHash3_x86_32. libhashkit seeds it as it seeds
 * MurmurHash2: 0xdeadbeef * length (mod 2^32), so the empty key gives 0. */
static uint32_t hash_murmur3(const unsigned char *p, size_t len)
{
    uint32_t h = 0xdeadbeefu * (uint32_t)len;

    for (size_t n = len >> 2; n > 0; n--, p += 4)
        h = mcr__murmur3_block(h, mcr__load_le32(p));
    if ((len & 3) != 0)
        h ^= mcr__murmur3_k(load_tail(p, len & 3));
    return mcr__murmur3_final(h, (uint32_t)len);
}

/* ---------------------------------------------------------------- dispatch */

uint32_t mcr_hash_key(mcr_hash h, const void *data, size_t len)
{
    return mcr__hash_key(h, data, len);
}

uint32_t mcr__hash_key(mcr_hash h, const void *data, size_t len)
{
    /* A NULL pointer with len 0 is never read or offset: every loop above
     * runs zero times, no tail is taken and no memcpy() is given it. */
    const unsigned char *p = data;

    switch (h) {
    case MCR_HASH_DEFAULT: return hash_one_at_a_time(p, len);
    case MCR_HASH_MD5: return mcr__md5_u32(p, len);
    case MCR_HASH_CRC: return hash_crc(p, len);
    case MCR_HASH_FNV1_64: return hash_fnv1_64(p, len);
    case MCR_HASH_FNV1A_64: return hash_fnv1a_64(p, len);
    case MCR_HASH_FNV1_32: return hash_fnv1_32(p, len);
    case MCR_HASH_FNV1A_32: return hash_fnv1a_32(p, len);
    case MCR_HASH_HSIEH: return hash_hsieh(p, len);
    case MCR_HASH_MURMUR: return hash_murmur(p, len);
    case MCR_HASH_JENKINS: return hash_jenkins(p, len);
    case MCR_HASH_MURMUR3: return hash_murmur3(p, len);
    case MCR_HASH_CRC16: return hash_crc16(p, len);
    case MCR_HASH_CRC32A: return hash_crc32a(p, len);
    case MCR_HASH_CMEMCACHE: return hash_cmemcache(p, len);
    case MCR_HASH_HASHCODE: return mcr__hash_hashcode(p, len);
    case MCR_HASH_HASHCODE_ABS: return mcr__hash_hashcode_abs(p, len);
    case MCR_HASH_COUNT: break;
    }
    return 0;
}

/* ---------------------------------------------------------------- many keys */

/*
 * One-at-a-time and FNV are one chain of dependent steps per byte (FNV: an
 * xor and a 3-cycle multiply), so a single key runs at the latency of that
 * chain. Hashing four keys in lockstep gives the CPU four independent chains
 * to overlap; each key's remaining bytes are then finished on their own.
 * Same values as the one-key functions above (test/test_hash.c checks).
 */
#define STEP_OAAT(h, c) ((h) += (c), (h) += (h) << 10, (h) ^= (h) >> 6)
#define FINAL_OAAT(h) ((h) += (h) << 3, (h) ^= (h) >> 11, (h) += (h) << 15, (uint32_t)(h))
#define STEP_FNV1(h, c, P) ((h) *= (P), (h) ^= (c))
#define STEP_FNV1A(h, c, P) ((h) ^= (c), (h) *= (P))
#define STEP_FNV1_32(h, c) STEP_FNV1(h, c, FNV32_PRIME)
#define STEP_FNV1A_32(h, c) STEP_FNV1A(h, c, FNV32_PRIME)
#define STEP_FNV1_64(h, c) STEP_FNV1(h, c, FNV64_PRIME)
#define STEP_FNV1A_64(h, c) STEP_FNV1A(h, c, FNV64_PRIME)
#define FINAL_TRUNC(h) ((uint32_t)(h))

#define SERIAL_X4(NAME, T, INIT, STEP, FINAL, SCHAR)                          \
    static void NAME(const void *const *keys, const size_t *lens, uint32_t *out) \
    {                                                                         \
        const unsigned char *p0 = keys[0], *p1 = keys[1], *p2 = keys[2],      \
                            *p3 = keys[3];                                    \
        size_t m = lens[0];                                                   \
        T h0 = (INIT), h1 = (INIT), h2 = (INIT), h3 = (INIT);                 \
        for (int k = 1; k < 4; k++)                                           \
            m = lens[k] < m ? lens[k] : m;                                    \
        for (size_t i = 0; i < m; i++) {                                      \
            STEP(h0, SCHAR(p0, i));                                           \
            STEP(h1, SCHAR(p1, i));                                           \
            STEP(h2, SCHAR(p2, i));                                           \
            STEP(h3, SCHAR(p3, i));                                           \
        }                                                                     \
        for (size_t i = m; i < lens[0]; i++)                                  \
            STEP(h0, SCHAR(p0, i));                                           \
        for (size_t i = m; i < lens[1]; i++)                                  \
            STEP(h1, SCHAR(p1, i));                                           \
        for (size_t i = m; i < lens[2]; i++)                                  \
            STEP(h2, SCHAR(p2, i));                                           \
        for (size_t i = m; i < lens[3]; i++)                                  \
            STEP(h3, SCHAR(p3, i));                                           \
        out[0] = FINAL(h0);                                                   \
        out[1] = FINAL(h1);                                                   \
        out[2] = FINAL(h2);                                                   \
        out[3] = FINAL(h3);                                                   \
    }

SERIAL_X4(oaat_x4, uint32_t, 0, STEP_OAAT, FINAL_OAAT, HK_SCHAR32)
SERIAL_X4(fnv1_32_x4, uint32_t, FNV32_OFFSET, STEP_FNV1_32, FINAL_TRUNC, HK_SCHAR32)
SERIAL_X4(fnv1a_32_x4, uint32_t, FNV32_OFFSET, STEP_FNV1A_32, FINAL_TRUNC, HK_SCHAR32)
SERIAL_X4(fnv1_64_x4, uint64_t, FNV64_OFFSET, STEP_FNV1_64, FINAL_TRUNC, HK_SCHAR64)
SERIAL_X4(fnv1a_64_x4, uint64_t, FNV64_OFFSET, STEP_FNV1A_64, FINAL_TRUNC, HK_SCHAR64)

void mcr__hash_many(mcr_hash h, const void *const *keys, const size_t *lens, size_t n,
                    uint32_t *out)
{
    void (*x4)(const void *const *, const size_t *, uint32_t *) = NULL;
    size_t i = 0;

    switch (h) {
    case MCR_HASH_MD5: mcr__md5_u32_many(keys, lens, n, out); return;
    case MCR_HASH_DEFAULT: x4 = oaat_x4; break;
    case MCR_HASH_FNV1_32: x4 = fnv1_32_x4; break;
    case MCR_HASH_FNV1A_32: x4 = fnv1a_32_x4; break;
    case MCR_HASH_FNV1_64: x4 = fnv1_64_x4; break;
    case MCR_HASH_FNV1A_64: x4 = fnv1a_64_x4; break;
    default: break;
    }
    if (x4 != NULL)
        for (; i + 4 <= n; i += 4)
            x4(keys + i, lens + i, out + i);
    for (; i < n; i++)
        out[i] = mcr__hash_key(h, keys[i], lens[i]);
}

/* ---------------------------------------------------------------- names */

static const char *const hash_names[MCR_HASH_COUNT] = {
    [MCR_HASH_DEFAULT] = "default",   [MCR_HASH_MD5] = "md5",
    [MCR_HASH_CRC] = "crc",           [MCR_HASH_FNV1_64] = "fnv1_64",
    [MCR_HASH_FNV1A_64] = "fnv1a_64", [MCR_HASH_FNV1_32] = "fnv1_32",
    [MCR_HASH_FNV1A_32] = "fnv1a_32", [MCR_HASH_HSIEH] = "hsieh",
    [MCR_HASH_MURMUR] = "murmur",     [MCR_HASH_JENKINS] = "jenkins",
    [MCR_HASH_MURMUR3] = "murmur3",   [MCR_HASH_CRC16] = "crc16",
    [MCR_HASH_CRC32A] = "crc32a",     [MCR_HASH_CMEMCACHE] = "cmemcache",
    [MCR_HASH_HASHCODE] = "hashcode", [MCR_HASH_HASHCODE_ABS] = "hashcode_abs",
};

int mcr_hash_from_name(const char *name, mcr_hash *out)
{
    if (name == NULL || out == NULL)
        return MCR_ERR_INVALID;
    for (int i = 0; i < MCR_HASH_COUNT; i++) {
        if (mcr__ascii_caseeq(name, hash_names[i])) {
            *out = (mcr_hash)i;
            return MCR_OK;
        }
    }
    /* The name of the default hash in twemproxy and in libhashkit's API
     * (libhashkit_one_at_a_time). */
    if (mcr__ascii_caseeq(name, "one_at_a_time")) {
        *out = MCR_HASH_DEFAULT;
        return MCR_OK;
    }
    return MCR_ERR_UNKNOWN;
}

const char *mcr_hash_name(mcr_hash h)
{
    /* Compare as unsigned so a negative value is rejected too. */
    if ((unsigned)h >= (unsigned)MCR_HASH_COUNT)
        return NULL;
    return hash_names[h];
}
