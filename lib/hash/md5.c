/* SPDX-License-Identifier: BSD-3-Clause */
/* md5.c: a one-shot MD5 (RFC 1321) tuned for short inputs: the "md5" key hash and ketama's points. */
#include <string.h>

#include "hash_internal.h"

/*
 * Every caller has its whole input in memory, and almost every input (a key,
 * a ketama label such as "10.0.0.1:11211-39") fits in one 64-byte block. So
 * there is no streaming context: full blocks are read straight from the
 * input, the last bytes are padded in a stack buffer, and the common case is
 * a single compression with no loop. Nothing is allocated, nothing is shared,
 * so every function here is thread-safe.
 */

#if defined(__BYTE_ORDER__) && defined(__ORDER_BIG_ENDIAN__) && \
    __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define MD5_BIG_ENDIAN 1
#endif


/* The round functions, written so that the part that does not depend on the
 * newest word b can start before b is known: F and I each leave two
 * dependent operations after b arrives, H one. G's two terms have no bit in
 * common, so '+' may replace '|' and the compiler can fold (c & ~d) into the
 * sum early. */
#define MD5_F(b, c, d) ((d) ^ ((b) & ((c) ^ (d))))
#define MD5_G(b, c, d) (((b) & (d)) + ((c) & ~(d)))
#define MD5_H(b, c, d) ((b) ^ (c) ^ (d))
#define MD5_I(b, c, d) ((c) ^ ((b) | ~(d)))

#define MD5_ROTL(x, s) (((x) << (s)) | ((x) >> (32 - (s))))

/* One step: a = b + ((a + f(b,c,d) + x + t) <<< s). */
#define MD5_STEP(f, a, b, c, d, x, t, s)                 \
    do {                                                 \
        (a) += f((b), (c), (d)) + (x) + (uint32_t)(t);   \
        (a) = MD5_ROTL((a), (s)) + (b);                  \
    } while (0)

#define MD5_LOAD_WORDS(p)                                                   \
    const uint32_t X0 = mcr__load_le32((p) + 0), X1 = mcr__load_le32((p) + 4),          \
                   X2 = mcr__load_le32((p) + 8), X3 = mcr__load_le32((p) + 12),         \
                   X4 = mcr__load_le32((p) + 16), X5 = mcr__load_le32((p) + 20),        \
                   X6 = mcr__load_le32((p) + 24), X7 = mcr__load_le32((p) + 28),        \
                   X8 = mcr__load_le32((p) + 32), X9 = mcr__load_le32((p) + 36),        \
                   X10 = mcr__load_le32((p) + 40), X11 = mcr__load_le32((p) + 44),      \
                   X12 = mcr__load_le32((p) + 48), X13 = mcr__load_le32((p) + 52),      \
                   X14 = mcr__load_le32((p) + 56), X15 = mcr__load_le32((p) + 60)

/* Steps 1..61: everything the final word A depends on. */
#define MD5_STEPS_1_TO_61                                    \
    MD5_STEP(MD5_F, a, b, c, d, X0, 0xd76aa478, 7);          \
    MD5_STEP(MD5_F, d, a, b, c, X1, 0xe8c7b756, 12);         \
    MD5_STEP(MD5_F, c, d, a, b, X2, 0x242070db, 17);         \
    MD5_STEP(MD5_F, b, c, d, a, X3, 0xc1bdceee, 22);         \
    MD5_STEP(MD5_F, a, b, c, d, X4, 0xf57c0faf, 7);          \
    MD5_STEP(MD5_F, d, a, b, c, X5, 0x4787c62a, 12);         \
    MD5_STEP(MD5_F, c, d, a, b, X6, 0xa8304613, 17);         \
    MD5_STEP(MD5_F, b, c, d, a, X7, 0xfd469501, 22);         \
    MD5_STEP(MD5_F, a, b, c, d, X8, 0x698098d8, 7);          \
    MD5_STEP(MD5_F, d, a, b, c, X9, 0x8b44f7af, 12);         \
    MD5_STEP(MD5_F, c, d, a, b, X10, 0xffff5bb1, 17);        \
    MD5_STEP(MD5_F, b, c, d, a, X11, 0x895cd7be, 22);        \
    MD5_STEP(MD5_F, a, b, c, d, X12, 0x6b901122, 7);         \
    MD5_STEP(MD5_F, d, a, b, c, X13, 0xfd987193, 12);        \
    MD5_STEP(MD5_F, c, d, a, b, X14, 0xa679438e, 17);        \
    MD5_STEP(MD5_F, b, c, d, a, X15, 0x49b40821, 22);        \
    MD5_STEP(MD5_G, a, b, c, d, X1, 0xf61e2562, 5);          \
    MD5_STEP(MD5_G, d, a, b, c, X6, 0xc040b340, 9);          \
    MD5_STEP(MD5_G, c, d, a, b, X11, 0x265e5a51, 14);        \
    MD5_STEP(MD5_G, b, c, d, a, X0, 0xe9b6c7aa, 20);         \
    MD5_STEP(MD5_G, a, b, c, d, X5, 0xd62f105d, 5);          \
    MD5_STEP(MD5_G, d, a, b, c, X10, 0x02441453, 9);         \
    MD5_STEP(MD5_G, c, d, a, b, X15, 0xd8a1e681, 14);        \
    MD5_STEP(MD5_G, b, c, d, a, X4, 0xe7d3fbc8, 20);         \
    MD5_STEP(MD5_G, a, b, c, d, X9, 0x21e1cde6, 5);          \
    MD5_STEP(MD5_G, d, a, b, c, X14, 0xc33707d6, 9);         \
    MD5_STEP(MD5_G, c, d, a, b, X3, 0xf4d50d87, 14);         \
    MD5_STEP(MD5_G, b, c, d, a, X8, 0x455a14ed, 20);         \
    MD5_STEP(MD5_G, a, b, c, d, X13, 0xa9e3e905, 5);         \
    MD5_STEP(MD5_G, d, a, b, c, X2, 0xfcefa3f8, 9);          \
    MD5_STEP(MD5_G, c, d, a, b, X7, 0x676f02d9, 14);         \
    MD5_STEP(MD5_G, b, c, d, a, X12, 0x8d2a4c8a, 20);        \
    MD5_STEP(MD5_H, a, b, c, d, X5, 0xfffa3942, 4);          \
    MD5_STEP(MD5_H, d, a, b, c, X8, 0x8771f681, 11);         \
    MD5_STEP(MD5_H, c, d, a, b, X11, 0x6d9d6122, 16);        \
    MD5_STEP(MD5_H, b, c, d, a, X14, 0xfde5380c, 23);        \
    MD5_STEP(MD5_H, a, b, c, d, X1, 0xa4beea44, 4);          \
    MD5_STEP(MD5_H, d, a, b, c, X4, 0x4bdecfa9, 11);         \
    MD5_STEP(MD5_H, c, d, a, b, X7, 0xf6bb4b60, 16);         \
    MD5_STEP(MD5_H, b, c, d, a, X10, 0xbebfbc70, 23);        \
    MD5_STEP(MD5_H, a, b, c, d, X13, 0x289b7ec6, 4);         \
    MD5_STEP(MD5_H, d, a, b, c, X0, 0xeaa127fa, 11);         \
    MD5_STEP(MD5_H, c, d, a, b, X3, 0xd4ef3085, 16);         \
    MD5_STEP(MD5_H, b, c, d, a, X6, 0x04881d05, 23);         \
    MD5_STEP(MD5_H, a, b, c, d, X9, 0xd9d4d039, 4);          \
    MD5_STEP(MD5_H, d, a, b, c, X12, 0xe6db99e5, 11);        \
    MD5_STEP(MD5_H, c, d, a, b, X15, 0x1fa27cf8, 16);        \
    MD5_STEP(MD5_H, b, c, d, a, X2, 0xc4ac5665, 23);         \
    MD5_STEP(MD5_I, a, b, c, d, X0, 0xf4292244, 6);          \
    MD5_STEP(MD5_I, d, a, b, c, X7, 0x432aff97, 10);         \
    MD5_STEP(MD5_I, c, d, a, b, X14, 0xab9423a7, 15);        \
    MD5_STEP(MD5_I, b, c, d, a, X5, 0xfc93a039, 21);         \
    MD5_STEP(MD5_I, a, b, c, d, X12, 0x655b59c3, 6);         \
    MD5_STEP(MD5_I, d, a, b, c, X3, 0x8f0ccc92, 10);         \
    MD5_STEP(MD5_I, c, d, a, b, X10, 0xffeff47d, 15);        \
    MD5_STEP(MD5_I, b, c, d, a, X1, 0x85845dd1, 21);         \
    MD5_STEP(MD5_I, a, b, c, d, X8, 0x6fa87e4f, 6);          \
    MD5_STEP(MD5_I, d, a, b, c, X15, 0xfe2ce6e0, 10);        \
    MD5_STEP(MD5_I, c, d, a, b, X6, 0xa3014314, 15);         \
    MD5_STEP(MD5_I, b, c, d, a, X13, 0x4e0811a1, 21);        \
    MD5_STEP(MD5_I, a, b, c, d, X4, 0xf7537e82, 6)

/* Steps 62..64 change only d, c and b. */
#define MD5_STEPS_62_TO_64                                   \
    MD5_STEP(MD5_I, d, a, b, c, X11, 0xbd3af235, 10);        \
    MD5_STEP(MD5_I, c, d, a, b, X2, 0x2ad7d2bb, 15);         \
    MD5_STEP(MD5_I, b, c, d, a, X9, 0xeb86d391, 21)

#define MD5_INIT_A 0x67452301u
#define MD5_INIT_B 0xefcdab89u
#define MD5_INIT_C 0x98badcfeu
#define MD5_INIT_D 0x10325476u

/* Compress the 64-byte block at p into h. */
static void md5_block(uint32_t h[4], const unsigned char *p)
{
    MD5_LOAD_WORDS(p);
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3];

    MD5_STEPS_1_TO_61;
    MD5_STEPS_62_TO_64;
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
}

/* The first word of the state after compressing the block at p into h: the
 * last block of the "md5" key hash, which needs no other word. */
static inline uint32_t md5_block_a(const uint32_t h[4], const unsigned char *p)
{
    MD5_LOAD_WORDS(p);
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3];

    MD5_STEPS_1_TO_61;
    return h[0] + a;
}

/* Pad the last `rem` (< 64) bytes at p of a `total`-byte message into
 * `tail`: the bytes, 0x80, zeros, the bit length little-endian. Returns the
 * padded size, 64 or 128 (when the length no longer fits after the bytes).
 * The buffer is cleared by copying a fixed block of zeros: the compiler
 * makes that a few vector stores, where a memset() of the same size becomes
 * `rep stos` on x86-64, which costs tens of cycles to start. */
static inline size_t md5_pad(unsigned char tail[128], const unsigned char *p,
                             size_t rem, size_t total)
{
    size_t n = rem < 56 ? 64 : 128;
    uint64_t bits = (uint64_t)total << 3; /* RFC 1321: length mod 2^64 */

    static const unsigned char zeros[128];

    if (n == 64)
        memcpy(tail, zeros, 64);
    else
        memcpy(tail, zeros, 128);
    if (rem > 0) /* p may be NULL for an empty message */
        memcpy(tail, p, rem);
    tail[rem] = 0x80;
    for (size_t i = 0; i < 8; i++)
        tail[n - 8 + i] = (unsigned char)(bits >> (8 * i));
    return n;
}

/* The four state words after the whole message. */
static void md5_words(const void *data, size_t len, uint32_t h[4])
{
    const unsigned char *p = data;
    unsigned char tail[128];
    size_t n;

    h[0] = MD5_INIT_A;
    h[1] = MD5_INIT_B;
    h[2] = MD5_INIT_C;
    h[3] = MD5_INIT_D;
    for (size_t blocks = len >> 6; blocks > 0; blocks--, p += 64)
        md5_block(h, p);
    n = md5_pad(tail, p, len & 63, len);
    md5_block(h, tail);
    if (n == 128)
        md5_block(h, tail + 64);
}

void mcr_md5(const void *data, size_t len, unsigned char out[16])
{
    uint32_t h[4];

    md5_words(data, len, h);
    for (size_t i = 0; i < 16; i++)
        out[i] = (unsigned char)(h[i >> 2] >> (8 * (i & 3)));
}

void mcr__md5_words(const void *data, size_t len, uint32_t out[4])
{
    md5_words(data, len, out);
}

uint32_t mcr__md5_u32(const void *data, size_t len)
{
    static const uint32_t init[4] = {MD5_INIT_A, MD5_INIT_B, MD5_INIT_C, MD5_INIT_D};
    unsigned char tail[128];

    /* Keys are short: one block, no loop. */
    if (MCR__LIKELY(len < 56)) {
        md5_pad(tail, data, len, len);
        return md5_block_a(init, tail);
    }

    const unsigned char *p = data;
    uint32_t h[4] = {MD5_INIT_A, MD5_INIT_B, MD5_INIT_C, MD5_INIT_D};
    size_t n;

    for (size_t blocks = len >> 6; blocks > 0; blocks--, p += 64)
        md5_block(h, p);
    n = md5_pad(tail, p, len & 63, len);
    if (n == 128)
        md5_block(h, tail);
    return md5_block_a(h, tail + n - 64);
}

/* ------------------------------------------------------------------
 * Many keys at once. One MD5 is a chain of 61 dependent steps (~4.5 cycles
 * each), so a single key cannot go faster than ~65 ns here; independent keys
 * can share the steps in SIMD lanes. The same step macros run on GCC vector
 * types, compiled for AVX-512 (16 lanes) or AVX2 (8 lanes) and picked at run
 * time from what the CPU supports; other machines use the scalar code.
 * ------------------------------------------------------------------ */

#if defined(__GNUC__) && defined(__x86_64__) && !defined(MD5_BIG_ENDIAN)
#define MD5_HAVE_LANES 1

typedef uint32_t md5_v16 __attribute__((vector_size(64)));
typedef uint32_t md5_v8 __attribute__((vector_size(32)));

/* Word A of the digest of N one-block messages, given transposed: w[j*N+k]
 * is word j of message k. */
#define MD5_LANES_FN(NAME, VT, N, TARGET)                                      \
    __attribute__((target(TARGET))) static void NAME(const uint32_t *w,       \
                                                     uint32_t *out)           \
    {                                                                          \
        VT X0, X1, X2, X3, X4, X5, X6, X7, X8, X9, X10, X11, X12, X13, X14, X15; \
        VT *xs[16] = {&X0, &X1, &X2,  &X3,  &X4,  &X5,  &X6,  &X7,            \
                      &X8, &X9, &X10, &X11, &X12, &X13, &X14, &X15};          \
        for (int j = 0; j < 16; j++)                                           \
            memcpy(xs[j], w + j * (N), sizeof(VT));                            \
        VT zero = {0};                                                         \
        VT a = zero + MD5_INIT_A, b = zero + MD5_INIT_B;                       \
        VT c = zero + MD5_INIT_C, d = zero + MD5_INIT_D;                       \
        MD5_STEPS_1_TO_61;                                                     \
        a += MD5_INIT_A;                                                       \
        memcpy(out, &a, sizeof(VT));                                           \
    }

MD5_LANES_FN(md5_a_x16, md5_v16, 16, "avx512f")
MD5_LANES_FN(md5_a_x8, md5_v8, 8, "avx2")

/* Set by tests to exercise every path; -1: pick from the CPU. */
static int md5_lanes_forced = -1;

/* 16, 8, or 0 when neither AVX-512F nor AVX2 is available. */
static size_t md5_lane_count(void)
{
    if (md5_lanes_forced >= 0) {
        if (md5_lanes_forced == 16 && __builtin_cpu_supports("avx512f"))
            return 16;
        if (md5_lanes_forced >= 8 && __builtin_cpu_supports("avx2"))
            return 8;
        return 0;
    }
    if (__builtin_cpu_supports("avx512f"))
        return 16;
    if (__builtin_cpu_supports("avx2"))
        return 8;
    return 0;
}

static void md5_a_lanes(size_t lanes, const uint32_t *w, uint32_t *out)
{
    if (lanes == 16)
        md5_a_x16(w, out);
    else
        md5_a_x8(w, out);
}
#endif

int mcr__md5_force_lanes(int lanes)
{
#ifdef MD5_HAVE_LANES
    md5_lanes_forced = lanes;
    return (int)md5_lane_count();
#else
    (void)lanes;
    return 0;
#endif
}

void mcr__md5_u32_many(const void *const *keys, const size_t *lens, size_t n, uint32_t *out)
{
#ifdef MD5_HAVE_LANES
    size_t lanes = md5_lane_count();
    if (lanes != 0 && n >= 4) {
        uint32_t w[16 * 16], res[16];
        size_t idx[16], k = 0;
        unsigned char blk[128];

        for (size_t i = 0; i < n; i++) {
            if (lens[i] >= 56) { /* more than one block: rare for keys */
                out[i] = mcr__md5_u32(keys[i], lens[i]);
                continue;
            }
            md5_pad(blk, keys[i], lens[i], lens[i]);
            for (size_t j = 0; j < 16; j++)
                w[j * lanes + k] = mcr__load_le32(blk + 4 * j);
            idx[k++] = i;
            if (k == lanes) {
                md5_a_lanes(lanes, w, res);
                for (size_t l = 0; l < lanes; l++)
                    out[idx[l]] = res[l];
                k = 0;
            }
        }
        if (k > 0) { /* a partial group: fill the spare lanes with copies */
            for (size_t l = k; l < lanes; l++)
                for (size_t j = 0; j < 16; j++)
                    w[j * lanes + l] = w[j * lanes];
            md5_a_lanes(lanes, w, res);
            for (size_t l = 0; l < k; l++)
                out[idx[l]] = res[l];
        }
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        out[i] = mcr__md5_u32(keys[i], lens[i]);
}
