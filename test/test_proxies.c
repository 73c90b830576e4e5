/* SPDX-License-Identifier: BSD-3-Clause */
/* test_proxies.c: Check suite of the proxies' placements (--client mcrouter-ch3, mcrouter-wch3, memcached-proxy-jump, envoy-maglev, envoy-ring-hash, memcached-proxy-ring-ketama): the projects' own test vectors, and the properties each algorithm promises on random configurations. */
#include <math.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "mcroute.h"
#include "mcroute_snapshot.h"
#include "placement/placement_internal.h"
#include "testutil.h"

/*
 * The proxies are not installed here (mcrouter, a memcached built with its
 * proxy, Envoy): the reference is each project's own unit tests, whose
 * expected values are copied below with the file they come from. The
 * random tests then check what each algorithm promises, through the ring,
 * the batch lookup and the snapshot alike.
 */

#define KEY_MAX 250

/* ------------------------------------------------------------ vectors */

/* github.com/dgryski/go-jump, jump_test.go (TestHash: "Generated from the
 * reference C++ code" of Lamping and Veach): bucket[i] = Hash(key, i + 1). */
static const struct {
    uint64_t key;
    int n;
    int32_t bucket[20];
} jump_vectors[] = {
    {0, 20, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
    {1, 19, {0, 0, 0, 0, 0, 0, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 17, 17}},
    {0xdeadbeef, 19, {0, 1, 2, 3, 3, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 16, 16, 16}},
    {0x0ddc0ffeebadf00d, 19, {0, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 15, 15, 15, 15}},
};

START_TEST(jump_reference_vectors)
{
    for (size_t v = 0; v < sizeof(jump_vectors) / sizeof(jump_vectors[0]); v++)
        for (int i = 0; i < jump_vectors[v].n; i++)
            ck_assert_int_eq((int32_t)mcr__jump(jump_vectors[v].key, (uint32_t)i + 1),
                             jump_vectors[v].bucket[i]);
}
END_TEST

/* github.com/facebook/mcrouter, mcrouter/lib/test/Ch3HashTest.cpp
 * (Ch3Func.basic, Ch3Func.ch3_3, Ch3HashFunc.ch3_10). */
START_TEST(furc_mcrouter_vectors)
{
    char key[256];
    ck_assert_uint_eq(mcr__furc("sample", 6, 100), 97);
    ck_assert_uint_eq(mcr__furc("sample", 6, 1), 0);
    ck_assert_uint_eq(mcr__furc("", 0, 100), 72);
    ck_assert_uint_eq(mcr__furc("", 0, 1), 0);
    ck_assert_uint_eq(mcr__furc("", 0, MCR__FURC_MAX), 6173600);
    ck_assert_uint_eq(mcr__furc("sample", 6, MCR__FURC_MAX), 5167780);
    for (int i = 0; i < 256; i++) /* -128 .. 127 */
        key[i] = (char)(i - 128);
    ck_assert_uint_eq(mcr__furc(key, 256, 99999), 31015);
    for (int i = 0; i < 256; i++) /* 127 .. -128 */
        key[i] = (char)(127 - i);
    ck_assert_uint_eq(mcr__furc(key, 256, 99999), 67101);

    unsigned c3[3] = {0}, c10[10] = {0};
    static const unsigned want3[3] = {307, 342, 351};
    static const unsigned want10[10] = {995, 955, 1046, 968, 1032, 972, 1016, 1038, 1010, 968};
    for (unsigned i = 0; i < 10000; i++) {
        int n = snprintf(key, sizeof(key), "%u", i);
        if (i < 1000)
            c3[mcr__furc(key, (size_t)n, 3)]++;
        c10[mcr__furc(key, (size_t)n, 10)]++;
    }
    for (int i = 0; i < 3; i++)
        ck_assert_uint_eq(c3[i], want3[i]);
    for (int i = 0; i < 10; i++)
        ck_assert_uint_eq(c10[i], want10[i]);
}
END_TEST

/* github.com/facebook/folly, folly/hash/test/SpookyHashV2Test.cpp
 * (TestResults): Hash32 of the bytes 128, 129, ... (i + 128 mod 256), the
 * first i of them, seed 0, for i = 0..511: both the short path (below 192
 * bytes) and the long one. */
static const uint32_t spooky_vectors[512] = {
0x6bf50919,0x70de1d26,0xa2b37298,0x35bc5fbf,
      0x8223b279,0x5bcb315e,0x53fe88a1,0xf9f1a233,
      0xee193982,0x54f86f29,0xc8772d36,0x9ed60886,
      0x5f23d1da,0x1ed9f474,0xf2ef0c89,0x83ec01f9,
      0xf274736c,0x7e9ac0df,0xc7aed250,0xb1015811,
      0xe23470f5,0x48ac20c4,0xe2ab3cd5,0x608f8363,
      0xd0639e68,0xc4e8e7ab,0x863c7c5b,0x4ea63579,
      0x99ae8622,0x170c658b,0x149ba493,0x027bca7c,
      0xe5cfc8b6,0xce01d9d7,0x11103330,0x5d1f5ed4,
      0xca720ecb,0xef408aec,0x733b90ec,0x855737a6,
      0x9856c65f,0x647411f7,0x50777c74,0xf0f1a8b7,
      0x9d7e55a5,0xc68dd371,0xfc1af2cc,0x75728d0a,
      0x390e5fdc,0xf389b84c,0xfb0ccf23,0xc95bad0e,
      0x5b1cb85a,0x6bdae14f,0x6deb4626,0x93047034,
      0x6f3266c6,0xf529c3bd,0x396322e7,0x3777d042,
      0x1cd6a5a2,0x197b402e,0xc28d0d2b,0x09c1afb4,
      0x069c8bb7,0x6f9d4e1e,0xd2621b5c,0xea68108d,
      0x8660cb8f,0xd61e6de6,0x7fba15c7,0xaacfaa97,
      0xdb381902,0x4ea22649,0x5d414a1e,0xc3fc5984,
      0xa0fc9e10,0x347dc51c,0x37545fb6,0x8c84b26b,
      0xf57efa5d,0x56afaf16,0xb6e1eb94,0x9218536a,
      0xe3cc4967,0xd3275ef4,0xea63536e,0x6086e499,
      0xaccadce7,0xb0290d82,0x4ebfd0d6,0x46ccc185,
      0x2eeb10d3,0x474e3c8c,0x23c84aee,0x3abae1cb,
      0x1499b81a,0xa2993951,0xeed176ad,0xdfcfe84c,
      0xde4a961f,0x4af13fe6,0xe0069c42,0xc14de8f5,
      0x6e02ce8f,0x90d19f7f,0xbca4a484,0xd4efdd63,
      0x780fd504,0xe80310e3,0x03abbc12,0x90023849,
      0xd6f6fb84,0xd6b354c5,0x5b8575f0,0x758f14e4,
      0x450de862,0x90704afb,0x47209a33,0xf226b726,
      0xf858dab8,0x7c0d6de9,0xb05ce777,0xee5ff2d4,
      0x7acb6d5c,0x2d663f85,0x41c72a91,0x82356bf2,
      0x94e948ec,0xd358d448,0xeca7814d,0x78cd7950,
      0xd6097277,0x97782a5d,0xf43fc6f4,0x105f0a38,
      0x9e170082,0x4bfe566b,0x4371d25f,0xef25a364,
      0x698eb672,0x74f850e4,0x4678ff99,0x4a290dc6,
      0x3918f07c,0x32c7d9cd,0x9f28e0af,0x0d3c5a86,
      0x7bfc8a45,0xddf0c7e1,0xdeacb86b,0x970b3c5c,
      0x5e29e199,0xea28346d,0x6b59e71b,0xf8a8a46a,
      0x862f6ce4,0x3ccb740b,0x08761e9e,0xbfa01e5f,
      0xf17cfa14,0x2dbf99fb,0x7a0be420,0x06137517,
      0xe020b266,0xd25bfc61,0xff10ed00,0x42e6be8b,
      0x029ef587,0x683b26e0,0xb08afc70,0x7c1fd59e,
      0xbaae9a70,0x98c8c801,0xb6e35a26,0x57083971,
      0x90a6a680,0x1b44169e,0x1dce237c,0x518e0a59,
      0xccb11358,0x7b8175fb,0xb8fe701a,0x10d259bb,
      0xe806ce10,0x9212be79,0x4604ae7b,0x7fa22a84,
      0xe715b13a,0x0394c3b2,0x11efbbae,0xe13d9e19,
      0x77e012bd,0x2d05114c,0xaecf2ddd,0xb2a2b4aa,
      0xb9429546,0x55dce815,0xc89138f8,0x46dcae20,
      0x1f6f7162,0x0c557ebc,0x5b996932,0xafbbe7e2,
      0xd2bd5f62,0xff475b9f,0x9cec7108,0xeaddcffb,
      0x5d751aef,0xf68f7bdf,0xf3f4e246,0x00983fcd,
      0x00bc82bb,0xbf5fd3e7,0xe80c7e2c,0x187d8b1f,
      0xefafb9a7,0x8f27a148,0x5c9606a9,0xf2d2be3e,
      0xe992d13a,0xe4bcd152,0xce40b436,0x63d6a1fc,
      0xdc1455c4,0x64641e39,0xd83010c9,0x2d535ae0,
      0x5b748f3e,0xf9a9146b,0x80f10294,0x2859acd4,
      0x5fc846da,0x56d190e9,0x82167225,0x98e4daba,
      0xbf7865f3,0x00da7ae4,0x9b7cd126,0x644172f8,
      0xde40c78f,0xe8803efc,0xdd331a2b,0x48485c3c,
      0x4ed01ddc,0x9c0b2d9e,0xb1c6e9d7,0xd797d43c,
      0x274101ff,0x3bf7e127,0x91ebbc56,0x7ffeb321,
      0x4d42096f,0xd6e9456a,0x0bade318,0x2f40ee0b,
      0x38cebf03,0x0cbc2e72,0xbf03e704,0x7b3e7a9a,
      0x8e985acd,0x90917617,0x413895f8,0xf11dde04,
      0xc66f8244,0xe5648174,0x6c420271,0x2469d463,
      0x2540b033,0xdc788e7b,0xe4140ded,0x0990630a,
      0xa54abed4,0x6e124829,0xd940155a,0x1c8836f6,
      0x38fda06c,0x5207ab69,0xf8be9342,0x774882a8,
      0x56fc0d7e,0x53a99d6e,0x8241f634,0x9490954d,
      0x447130aa,0x8cc4a81f,0x0868ec83,0xc22c642d,
      0x47880140,0xfbff3bec,0x0f531f41,0xf845a667,
      0x08c15fb7,0x1996cd81,0x86579103,0xe21dd863,
      0x513d7f97,0x3984a1f1,0xdfcdc5f4,0x97766a5e,
      0x37e2b1da,0x41441f3f,0xabd9ddba,0x23b755a9,
      0xda937945,0x103e650e,0x3eef7c8f,0x2760ff8d,
      0x2493a4cd,0x1d671225,0x3bf4bd4c,0xed6e1728,
      0xc70e9e30,0x4e05e529,0x928d5aa6,0x164d0220,
      0xb5184306,0x4bd7efb3,0x63830f11,0xf3a1526c,
      0xf1545450,0xd41d5df5,0x25a5060d,0x77b368da,
      0x4fe33c7e,0xeae09021,0xfdb053c4,0x2930f18d,
      0xd37109ff,0x8511a781,0xc7e7cdd7,0x6aeabc45,
      0xebbeaeaa,0x9a0c4f11,0xda252cbb,0x5b248f41,
      0x5223b5eb,0xe32ab782,0x8e6a1c97,0x11d3f454,
      0x3e05bd16,0x0059001d,0xce13ac97,0xf83b2b4c,
      0x71db5c9a,0xdc8655a6,0x9e98597b,0x3fcae0a2,
      0x75e63ccd,0x076c72df,0x4754c6ad,0x26b5627b,
      0xd818c697,0x998d5f3d,0xe94fc7b2,0x1f49ad1a,
      0xca7ff4ea,0x9fe72c05,0xfbd0cbbf,0xb0388ceb,
      0xb76031e3,0xd0f53973,0xfb17907c,0xa4c4c10f,
      0x9f2d8af9,0xca0e56b0,0xb0d9b689,0xfcbf37a3,
      0xfede8f7d,0xf836511c,0x744003fc,0x89eba576,
      0xcfdcf6a6,0xc2007f52,0xaaaf683f,0x62d2f9ca,
      0xc996f77f,0x77a7b5b3,0x8ba7d0a4,0xef6a0819,
      0xa0d903c0,0x01b27431,0x58fffd4c,0x4827f45c,
      0x44eb5634,0xae70edfc,0x591c740b,0x478bf338,
      0x2f3b513b,0x67bf518e,0x6fef4a0c,0x1e0b6917,
      0x5ac0edc5,0x2e328498,0x077de7d5,0x5726020b,
      0x2aeda888,0x45b637ca,0xcf60858d,0x3dc91ae2,
      0x3e6d5294,0xe6900d39,0x0f634c71,0x827a5fa4,
      0xc713994b,0x1c363494,0x3d43b615,0xe5fe7d15,
      0xf6ada4f2,0x472099d5,0x04360d39,0x7f2a71d0,
      0x88a4f5ff,0x2c28fac5,0x4cd64801,0xfd78dd33,
      0xc9bdd233,0x21e266cc,0x9bbf419d,0xcbf7d81d,
      0x80f15f96,0x04242657,0x53fb0f66,0xded11e46,
      0xf2fdba97,0x8d45c9f1,0x4eeae802,0x17003659,
      0xb9db81a7,0xe734b1b2,0x9503c54e,0xb7c77c3e,
      0x271dd0ab,0xd8b906b5,0x0d540ec6,0xf03b86e0,
      0x0fdb7d18,0x95e261af,0xad9ec04e,0x381f4a64,
      0xfec798d7,0x09ea20be,0x0ef4ca57,0x1e6195bb,
      0xfd0da78b,0xcea1653b,0x157d9777,0xf04af50f,
      0xad7baa23,0xd181714a,0x9bbdab78,0x6c7d1577,
      0x645eb1e7,0xa0648264,0x35839ca6,0x2287ef45,
      0x32a64ca3,0x26111f6f,0x64814946,0xb0cddaf1,
      0x4351c59e,0x1b30471c,0xb970788a,0x30e9f597,
      0xd7e58df1,0xc6d2b953,0xf5f37cf4,0x3d7c419e,
      0xf91ecb2d,0x9c87fd5d,0xb22384ce,0x8c7ac51c,
      0x62c96801,0x57e54091,0x964536fe,0x13d3b189,
      0x4afd1580,0xeba62239,0xb82ea667,0xae18d43a,
      0xbef04402,0x1942534f,0xc54bf260,0x3c8267f5,
      0xa1020ddd,0x112fcc8a,0xde596266,0xe91d0856,
      0xf300c914,0xed84478e,0x5b65009e,0x4764da16,
      0xaf8e07a2,0x4088dc2c,0x9a0cad41,0x2c3f179b,
      0xa67b83f7,0xf27eab09,0xdbe10e28,0xf04c911f,
      0xd1169f87,0x8e1e4976,0x17f57744,0xe4f5a33f,
      0x27c2e04b,0x0b7523bd,0x07305776,0xc6be7503,
      0x918fa7c9,0xaf2e2cd9,0x82046f8e,0xcc1c8250
};

START_TEST(spooky_folly_vectors)
{
    unsigned char buf[512];
    for (int i = 0; i < 512; i++) {
        buf[i] = (unsigned char)(i + 128);
        uint32_t h = mcr__spooky32(buf, (size_t)i, 0);
        ck_assert_msg(h == spooky_vectors[i], "%d bytes: %08x, expected %08x", i, (unsigned)h,
                      (unsigned)spooky_vectors[i]);
    }
    /* the two-part form hashes the same message, split anywhere */
    for (size_t len = 0; len < 512; len += 7) {
        for (size_t tl = 0; tl <= MCR__SPOOKY_TAIL_MAX && tl <= len; tl += 5) {
            uint64_t a1 = 3, a2 = 5, b1 = 3, b2 = 5;
            mcr__spooky128(buf, len, &a1, &a2);
            mcr__spooky128_parts(buf, len - tl, buf + len - tl, tl, &b1, &b2);
            ck_assert_msg(a1 == b1 && a2 == b2, "%zu bytes split at %zu", len, len - tl);
        }
    }
}
END_TEST

/* The thresholds of n servers of one weight (millionths). */
static uint32_t *wch3_accept_all(size_t n, uint32_t millionths)
{
    uint32_t *a = malloc(n * sizeof(*a));
    ck_assert_ptr_nonnull(a);
    for (size_t i = 0; i < n; i++)
        a[i] = mcr__wch3_accept(millionths);
    return a;
}

/* github.com/facebook/mcrouter, mcrouter/lib/test/WeightedCh3HashFuncTest.cpp
 * (WeightedCh3HashFunc.basic, zeroWeight, reducedWeight, randomWeights). */
START_TEST(wch3_mcrouter_vectors)
{
    char key[256];
    /* basic: every weight 1.0 is Ch3 */
    uint32_t *one = wch3_accept_all(MCR__FURC_MAX, MCR_WCH3_WEIGHT_ONE);
    ck_assert_uint_eq(mcr__wch3("sample", 6, one, 100), 97);
    ck_assert_uint_eq(mcr__wch3("sample", 6, one, 1), 0);
    ck_assert_uint_eq(mcr__wch3("", 0, one, 100), 72);
    ck_assert_uint_eq(mcr__wch3("", 0, one, 1), 0);
    ck_assert_uint_eq(mcr__wch3("", 0, one, MCR__FURC_MAX), 6173600);
    ck_assert_uint_eq(mcr__wch3("sample", 6, one, MCR__FURC_MAX), 5167780);
    for (int i = 0; i < 256; i++) /* -128 .. 127 */
        key[i] = (char)(i - 128);
    ck_assert_uint_eq(mcr__wch3(key, 256, one, 99999), 31015);
    for (int i = 0; i < 256; i++) /* 127 .. -128 */
        key[i] = (char)(127 - i);
    ck_assert_uint_eq(mcr__wch3(key, 256, one, 99999), 67101);
    free(one);

    /* zeroWeight: every try refused, the last one's index */
    uint32_t *zero = wch3_accept_all(100, 0);
    ck_assert_uint_eq(mcr__wch3("sample", 6, zero, 1), 0);
    ck_assert_uint_eq(mcr__wch3("", 0, zero, 1), 0);
    ck_assert_uint_eq(mcr__wch3("sample", 6, zero, 100), 59);
    ck_assert_uint_eq(mcr__wch3("", 0, zero, 100), 45);
    free(zero);

    /* reducedWeight: {1.0, 1.0, 0.7}; keys of the full-weight servers stay */
    uint32_t reduced[3] = {mcr__wch3_accept(1000000), mcr__wch3_accept(1000000),
                           mcr__wch3_accept(700000)};
    unsigned c3[3] = {0};
    static const unsigned want3[3] = {341, 371, 288};
    for (unsigned i = 0; i < 1000; i++) {
        int n = snprintf(key, sizeof(key), "%u", i);
        uint32_t ch3 = mcr__furc(key, (size_t)n, 3), w = mcr__wch3(key, (size_t)n, reduced, 3);
        if (ch3 != 2)
            ck_assert_uint_eq(w, ch3);
        c3[w]++;
    }
    for (int i = 0; i < 3; i++)
        ck_assert_uint_eq(c3[i], want3[i]);
}
END_TEST

/* WeightedCh3HashFunc.randomWeights, through a config read from a server
 * list with mcrouter's decimal weights, its ring and its snapshot. */
START_TEST(wch3_random_weights_list)
{
    static const unsigned want[10] = {1016, 1252, 288, 2354, 661, 195, 247, 122, 1668, 2197};
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    ck_assert_ptr_nonnull(cfg);
    ck_assert_int_eq(mcr_config_set_client(cfg, "mcrouter-wch3", &err), MCR_OK);
    ck_assert_int_eq(mcr_config_add_servers(cfg,
                                            "10.0.0.1:11211:0.429,10.0.0.2:11211:0.541,"
                                            "10.0.0.3:11211:0.117,10.0.0.4:11211:0.998,"
                                            "10.0.0.5:11211:0.283,10.0.0.6:11211:0.065,"
                                            "10.0.0.7:11211:0.109,10.0.0.8:11211:0.042,"
                                            "10.0.0.9:11211:0.676,10.0.0.10:11211:0.943",
                                            &err),
                     MCR_OK);
    mcr_ring *ring = NULL;
    mcr_snapshot *snap = NULL;
    ck_assert_msg(mcr_ring_new(cfg, &ring, &err) == MCR_OK, "%s", err.message);
    ck_assert_msg(mcr_snapshot_new(cfg, 1, &snap, &err) == MCR_OK, "%s", err.message);
    ck_assert_uint_eq(mcr_ring_server_weight(ring, 2), 117000);
    unsigned c[10] = {0};
    char key[32];
    for (unsigned i = 0; i < 10000; i++) {
        int n = snprintf(key, sizeof(key), "%u", i);
        uint32_t s = mcr_ring_locate(ring, key, (size_t)n);
        ck_assert_uint_eq(mcr_snapshot_locate(snap, key, (size_t)n), s);
        /* a routing prefix and a hash stop change nothing */
        char wrapped[64];
        int wn = snprintf(wrapped, sizeof(wrapped), "/reg/clu/%s|#|tail", key);
        ck_assert_uint_eq(mcr_ring_locate(ring, wrapped, (size_t)wn), s);
        c[s]++;
    }
    for (int i = 0; i < 10; i++)
        ck_assert_uint_eq(c[i], want[i]);
    mcr_snapshot_unref(snap);
    mcr_ring_free(ring);
    mcr_config_free(cfg);
}
END_TEST

/* mcrouter's routing key (mcrouter/lib/carbon/Keys-inl.h, Keys::update). */
START_TEST(mcrouter_routing_keys)
{
    static const struct {
        const char *key, *rk;
    } v[] = {
        {"sample", "sample"},
        {"/region/cluster/sample", "sample"},
        {"/region/cluster/", ""},
        {"/region/cluster", "/region/cluster"},    /* no second '/': kept whole */
        {"/r/c/a/b", "a/b"},                       /* only two components */
        {"sample|#|suffix", "sample"},
        {"/r/c/sample|#|x|#|y", "sample"},
        {"a|#", "a|#"},
        {"|#|", ""},
        {"x/r/c/y", "x/r/c/y"},                    /* not a leading '/' */
        {"//c/k", "k"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        const void *rk;
        size_t n;
        mcr__mcrouter_routing_key(v[i].key, strlen(v[i].key), &rk, &n);
        ck_assert_msg(n == strlen(v[i].rk) && memcmp(rk, v[i].rk, n) == 0,
                      "routing key of \"%s\": \"%.*s\", not \"%s\"", v[i].key, (int)n,
                      (const char *)rk, v[i].rk);
    }
}
END_TEST

/* Envoy's test hosts: "127.0.0.1:90" ... in list order. */
static void envoy_hosts(int first, size_t n, char names[][32], const char **name, size_t *len)
{
    for (size_t i = 0; i < n; i++) {
        snprintf(names[i], 32, "127.0.0.1:%d", first + (int)i);
        name[i] = names[i];
        len[i] = strlen(names[i]);
    }
}

/* github.com/envoyproxy/envoy,
 * test/extensions/load_balancing_policies/maglev/maglev_lb_test.cc:
 * MaglevLoadBalancerTest.Basic (6 hosts 127.0.0.1:90..95, table 7: entry
 * i -> host expected_assignments[i]) and .Weighted (127.0.0.1:90 weight 1,
 * :91 weight 2, table 17, 6 and 11 entries). The tests give the request
 * hash directly: entry = hash % size. */
START_TEST(envoy_maglev_vectors)
{
    char names[6][32];
    const char *name[6];
    size_t len[6];
    uint32_t table[17];
    static const uint32_t ones[6] = {1, 1, 1, 1, 1, 1};
    static const uint32_t basic[7] = {2, 4, 0, 1, 5, 0, 3};
    envoy_hosts(90, 6, names, name, len);
    ck_assert_int_eq(mcr__envoy_maglev_fill(name, len, ones, 6, 7, table), MCR_OK);
    for (int i = 0; i < 7; i++)
        ck_assert_uint_eq(table[i], basic[i]);

    static const uint32_t w[2] = {1, 2};
    static const uint32_t weighted[17] = {1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 0, 1};
    ck_assert_int_eq(mcr__envoy_maglev_fill(name, len, w, 2, 17, table), MCR_OK);
    unsigned count[2] = {0};
    for (int i = 0; i < 17; i++) {
        ck_assert_uint_eq(table[i], weighted[i]);
        count[table[i]]++;
    }
    ck_assert_uint_eq(count[0], 6); /* min_entries_per_host */
    ck_assert_uint_eq(count[1], 11); /* max_entries_per_host */

    /* the list order does not matter: Envoy sorts the hosts by address
     * (MaglevLoadBalancerTest.BasicStability) */
    const char *rname[6];
    size_t rlen[6];
    for (int i = 0; i < 6; i++) {
        rname[i] = name[5 - i];
        rlen[i] = len[5 - i];
    }
    ck_assert_int_eq(mcr__envoy_maglev_fill(rname, rlen, ones, 6, 7, table), MCR_OK);
    for (int i = 0; i < 7; i++)
        ck_assert_uint_eq(table[i], 5 - basic[i]);
}
END_TEST

/* github.com/envoyproxy/envoy,
 * test/extensions/load_balancing_policies/ring_hash/ring_hash_lb_test.cc:
 * RingHashLoadBalancerTest.Basic (6 hosts 127.0.0.1:90..95,
 * minimum_ring_size 12: the ring of 12 points it lists, and its lookups
 * of hashes 0, 2^64 - 1, 3551244743356806947 and the next). */
START_TEST(envoy_ring_hash_vectors)
{
    char names[6][32];
    const char *name[6];
    size_t len[6];
    static const uint32_t ones[6] = {1, 1, 1, 1, 1, 1};
    static const struct {
        int port;
        uint64_t value;
    } ring[12] = {
        {94, 833437586790550860u},   {92, 928266305478181108u},   {90, 1033482794131418490u},
        {95, 3551244743356806947u},  {93, 3851675632748031481u},  {91, 5583722120771150861u},
        {91, 6311230543546372928u},  {93, 7700377290971790572u},  {95, 13144177310400110813u},
        {92, 13444792449719432967u}, {94, 15516499411664133160u}, {90, 16117243373044804889u},
    };
    uint64_t *value;
    uint32_t *server;
    size_t n;
    envoy_hosts(90, 6, names, name, len);
    ck_assert_int_eq(mcr__envoy_ring_points(name, len, ones, 6, 12, &value, &server, &n), MCR_OK);
    ck_assert_uint_eq(n, 12); /* ring_hash_lb.size */
    for (size_t i = 0; i < 12; i++) {
        ck_assert_uint_eq(value[i], ring[i].value);
        ck_assert_uint_eq(server[i], (uint32_t)(ring[i].port - 90));
    }
    ck_assert_uint_eq(server[mcr__envoy_ring_find(value, n, 0)], 4);
    ck_assert_uint_eq(server[mcr__envoy_ring_find(value, n, UINT64_MAX)], 4);
    ck_assert_uint_eq(server[mcr__envoy_ring_find(value, n, 3551244743356806947u)], 5);
    ck_assert_uint_eq(server[mcr__envoy_ring_find(value, n, 3551244743356806948u)], 3);
    ck_assert_uint_eq(server[mcr__envoy_ring_find(value, n, 16117243373044804880u)], 0);
    free(value);
    free(server);
}
END_TEST

/* ------------------------------------------------------------ configs */

typedef struct proxy {
    const char *client;
    mcr_mode mode;
} proxy;

static const proxy proxies[] = {
    {"memcached-proxy-jump", MCR_MODE_MEMCACHED_PROXY_JUMP},
    {"mcrouter-ch3", MCR_MODE_MCROUTER_CH3},
};
#define NPROXIES (sizeof(proxies) / sizeof(proxies[0]))

/* A config of client c with n servers 10.x.y.z:port, numbered from `first`. */
static mcr_config *proxy_config(const char *client, size_t first, size_t n)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    ck_assert_ptr_nonnull(cfg);
    ck_assert_int_eq(mcr_config_set_client(cfg, client, &err), MCR_OK);
    for (size_t i = first; i < first + n; i++) {
        char host[32];
        snprintf(host, sizeof(host), "10.%zu.%zu.%zu", (i >> 16) & 255, (i >> 8) & 255, i & 255);
        ck_assert_int_eq(mcr_config_add_server(cfg, host, 11211 + (int)(i % 3), 1, &err), MCR_OK);
    }
    return cfg;
}

static mcr_ring *ring_of(const mcr_config *cfg)
{
    mcr_error err;
    mcr_ring *r = NULL;
    int rc = mcr_ring_new(cfg, &r, &err);
    ck_assert_msg(rc == MCR_OK, "mcr_ring_new: %s", err.message);
    return r;
}

/* A random key of 1..KEY_MAX bytes: printable, or any bytes (non-ASCII,
 * UTF-8 or not), sometimes with mcrouter's routing prefix or hash stop. */
static size_t random_key(tu_rng *rng, unsigned char *buf)
{
    size_t len;
    switch (tu_below(rng, 4)) {
    case 0:
        len = 1 + tu_below(rng, KEY_MAX);
        tu_bytes(rng, buf, len);
        return len;
    case 1: {
        static const char *const words[] = {"/r/c/", "|#|", "\xc3\xa9t\xc3\xa9", "\xe2\x82\xac",
                                            "user:", "/", "|"};
        len = 0;
        while (len < 200) {
            const char *w = words[tu_below(rng, 7)];
            memcpy(buf + len, w, strlen(w));
            len += strlen(w);
            if (tu_below(rng, 4) == 0)
                break;
        }
        return len;
    }
    default:
        return tu_key(rng, (char *)buf, KEY_MAX);
    }
}

/* What the proxy computes directly, for n servers. */
static uint32_t direct(mcr_mode mode, const unsigned char *key, size_t len, uint32_t n)
{
    if (n == 1)
        return 0;
    if (mode == MCR_MODE_MEMCACHED_PROXY_JUMP) {
        /* XXH3-64: libxxhash (Debian), the library memcached's proxy vendors */
        return mcr__jump(XXH3_64bits_withSeed(key, len, 0), n);
    }
    const void *rk;
    size_t rl;
    mcr__mcrouter_routing_key(key, len, &rk, &rl);
    return mcr__furc(rk, rl, n);
}

/* ------------------------------------------------------------ properties */

/* ---- mcrouter-wch3 ---- */

/* WeightedCh3 as mcrouter's WeightedCh3HashFunc.cpp writes it, apart from
 * the library's: the salted key built in a buffer of its own, the
 * threshold from the weight's double (strtod of the decimal the list
 * wrote, as folly reads JSON numbers). */
static uint32_t wch3_reference(const unsigned char *key, size_t len, const double *w, uint32_t n)
{
    const void *rk;
    size_t rl;
    mcr__mcrouter_routing_key(key, len, &rk, &rl);
    char *buf = malloc(rl + 24);
    ck_assert_ptr_nonnull(buf);
    memcpy(buf, rk, rl);
    size_t kl = rl, salt = 0;
    uint32_t index = 0;
    for (int i = 0; i < 32; i++) {
        index = mcr__furc(buf, kl, n);
        uint64_t p = mcr__spooky32(buf, kl, 0xface2014u);
        uint64_t thr = (uint64_t)(w[index] * 4294967295.0);
        if (p < thr)
            break;
        size_t v = salt++;
        kl = rl;
        do {
            buf[kl++] = (char)('0' + v % 10);
            v /= 10;
        } while (v > 0);
    }
    free(buf);
    return index;
}

/* A random WeightedCh3 weight as a list writes it into text (empty: none,
 * 0.5), its double into *w. */
static void wch3_weight_text(tu_rng *rng, char *text, size_t cap, double *w)
{
    switch (tu_below(rng, 8)) {
    case 0:
        text[0] = '\0';
        *w = 0.5;
        return;
    case 1:
        snprintf(text, cap, "%s", tu_below(rng, 2) ? "1" : "1.0");
        break;
    case 2:
        snprintf(text, cap, "0");
        break;
    default: {
        unsigned digits = 1 + tu_below(rng, 6), max = 1;
        for (unsigned i = 0; i < digits; i++)
            max *= 10;
        snprintf(text, cap, "0.%0*u", (int)digits, tu_below(rng, max));
    }
    }
    *w = strtod(text, NULL);
}

/* A list of n servers 10.x.y.z with random WeightedCh3 weights. */
static char *wch3_list(tu_rng *rng, size_t n, double *w)
{
    size_t cap = n * 40 + 1, at = 0;
    char *list = malloc(cap);
    ck_assert_ptr_nonnull(list);
    for (size_t i = 0; i < n; i++) {
        char wt[16];
        wch3_weight_text(rng, wt, sizeof(wt), &w[i]);
        at += (size_t)snprintf(list + at, cap - at, "%s10.%zu.%zu.%zu:11211%s%s", i ? "," : "",
                               (i >> 16) & 255, (i >> 8) & 255, i & 255, wt[0] ? ":" : "", wt);
    }
    return list;
}

static mcr_config *wch3_config(const char *list)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    ck_assert_ptr_nonnull(cfg);
    ck_assert_int_eq(mcr_config_set_client(cfg, "mcrouter-wch3", &err), MCR_OK);
    int rc = mcr_config_add_servers(cfg, list, &err);
    ck_assert_msg(rc == MCR_OK, "%s", err.message);
    return cfg;
}

/* Random pools (1 to 1,000 servers, weights 0 to 1 and missing ones) and
 * random keys: the ring, the batch lookup and the snapshot all place
 * every key as the reference does. */
START_TEST(wch3_random_reference)
{
    tu_rng rng;
    tu_rng_init(&rng, 7100);
    int rounds = tu_cases(16);
    for (int round = 0; round < rounds; round++) {
        size_t n = round < 3 ? (size_t)round + 1 : 1 + tu_below(&rng, 1000);
        double *w = malloc(n * sizeof(*w));
        ck_assert_ptr_nonnull(w);
        char *list = wch3_list(&rng, n, w);
        mcr_config *cfg = wch3_config(list);
        mcr_ring *ring = ring_of(cfg);
        mcr_snapshot *snap = NULL;
        mcr_error err;
        ck_assert_msg(mcr_snapshot_new(cfg, 1, &snap, &err) == MCR_OK, "%s", err.message);
        unsigned char keys[32][KEY_MAX + 1];
        const void *kp[32];
        size_t kl[32];
        uint32_t out[32];
        for (int batch = 0; batch < 8; batch++) {
            for (int k = 0; k < 32; k++) {
                kl[k] = random_key(&rng, keys[k]);
                kp[k] = keys[k];
            }
            mcr_ring_locate_many(ring, kp, kl, 32, out);
            for (int k = 0; k < 32; k++) {
                uint32_t want = wch3_reference(keys[k], kl[k], w, (uint32_t)n);
                ck_assert_msg(mcr_ring_locate(ring, keys[k], kl[k]) == want,
                              "%zu servers: key %d of batch %d: %u, the reference %u", n, k,
                              batch, (unsigned)mcr_ring_locate(ring, keys[k], kl[k]),
                              (unsigned)want);
                ck_assert_uint_eq(out[k], want);
                ck_assert_uint_eq(mcr_snapshot_locate(snap, keys[k], kl[k]), want);
            }
        }
        mcr_snapshot_unref(snap);
        mcr_ring_free(ring);
        mcr_config_free(cfg);
        free(list);
        free(w);
    }
}
END_TEST

/* WeightedCh3 is consistent in each weight: lowering one server's weight
 * moves keys only away from it, raising it only to it; and a pool whose
 * weights are all 1.0 is Ch3. */
START_TEST(wch3_weight_consistency)
{
    tu_rng rng;
    tu_rng_init(&rng, 7200);
    int rounds = tu_cases(12);
    mcr_error err;
    for (int round = 0; round < rounds; round++) {
        size_t n = 2 + tu_below(&rng, 40);
        double *w = malloc(n * sizeof(*w));
        ck_assert_ptr_nonnull(w);
        char *list = wch3_list(&rng, n, w);
        mcr_config *cfg = wch3_config(list);
        mcr_snapshot *a = NULL, *b = NULL;
        ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &a, &err), MCR_OK);
        uint32_t k = tu_below(&rng, (uint32_t)n);
        mcr_server_desc d;
        ck_assert_int_eq(mcr_snapshot_server(a, k, &d), MCR_OK);
        uint32_t nw = tu_below(&rng, MCR_WCH3_WEIGHT_ONE + 1);
        mcr_changes *ch = mcr_changes_new();
        ck_assert_int_eq(mcr_changes_set_weight(ch, d.id, nw, &err), MCR_OK);
        ck_assert_msg(mcr_snapshot_apply(a, ch, &b, &err) == MCR_OK, "%s", err.message);
        bool lower = nw < d.weight;
        for (unsigned i = 0; i < 3000; i++) {
            char key[32];
            int kl = snprintf(key, sizeof(key), "k%u", i);
            uint32_t x = mcr_snapshot_locate(a, key, (size_t)kl),
                     y = mcr_snapshot_locate(b, key, (size_t)kl);
            if (x != y)
                ck_assert_msg(lower ? x == k : y == k,
                              "weight of %u from %u to %u: %s moved %u -> %u", (unsigned)k,
                              (unsigned)d.weight, (unsigned)nw, key, (unsigned)x, (unsigned)y);
        }
        mcr_changes_free(ch);
        mcr_snapshot_unref(a);
        mcr_snapshot_unref(b);
        mcr_config_free(cfg);
        free(list);
        free(w);
    }
    /* all 1.0: Ch3 */
    mcr_config *one = wch3_config("a:1:1,b:1:1.0,c:1:1.000000,d:1:1,e:1:1");
    mcr_ring *r = ring_of(one);
    for (unsigned i = 0; i < 2000; i++) {
        char key[32];
        int kl = snprintf(key, sizeof(key), "/x/y/%u", i);
        const void *rk;
        size_t rl;
        mcr__mcrouter_routing_key(key, (size_t)kl, &rk, &rl);
        ck_assert_uint_eq(mcr_ring_locate(r, key, (size_t)kl), mcr__furc(rk, rl, 5));
    }
    mcr_ring_free(r);
    mcr_config_free(one);
}
END_TEST

/* The diff of two WeightedCh3 snapshots is the model's: each pair's share
 * within a few standard deviations of the keys counted, after a weight
 * change, a server added (with a weight) or one removed (those after it
 * renumbered). */
START_TEST(wch3_diff_model)
{
    tu_rng rng;
    tu_rng_init(&rng, 7300 + (uint64_t)_i);
    enum { KEYS = 20000 };
    mcr_error err;
    int rounds = tu_cases(6);
    for (int round = 0; round < rounds; round++) {
        size_t n = 2 + tu_below(&rng, 12);
        double *w = malloc((n + 1) * sizeof(*w));
        ck_assert_ptr_nonnull(w);
        char *list = wch3_list(&rng, n, w);
        mcr_config *cfg = wch3_config(list);
        mcr_snapshot *a = NULL, *b = NULL;
        ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &a, &err), MCR_OK);
        mcr_changes *ch = mcr_changes_new();
        mcr_server_desc d;
        uint32_t k = tu_below(&rng, (uint32_t)n);
        ck_assert_int_eq(mcr_snapshot_server(a, k, &d), MCR_OK);
        switch (_i) {
        case 0:
            ck_assert_int_eq(mcr_changes_set_weight(ch, d.id, tu_below(&rng, 1000001), &err),
                             MCR_OK);
            break;
        case 1: {
            mcr_server_desc x = {.host = "10.9.9.9", .port = 11211,
                                 .weight = tu_below(&rng, 1000001), .state = MCR_STATE_ACTIVE};
            ck_assert_int_eq(mcr_changes_add(ch, &x, &err), MCR_OK);
            break;
        }
        default:
            ck_assert_int_eq(mcr_changes_remove(ch, d.id, &err), MCR_OK);
        }
        ck_assert_msg(mcr_snapshot_apply(a, ch, &b, &err) == MCR_OK, "%s", err.message);
        mcr_diff *diff = NULL;
        ck_assert_msg(mcr_diff_new(a, b, &diff, &err) == MCR_OK, "%s", err.message);
        /* the keys counted per pair of snapshot indexes */
        size_t na = mcr_snapshot_server_count(a), nb = mcr_snapshot_server_count(b);
        unsigned *count = calloc(na * nb, sizeof(*count));
        ck_assert_ptr_nonnull(count);
        unsigned moved = 0;
        for (unsigned i = 0; i < KEYS; i++) {
            char key[32];
            int kl = snprintf(key, sizeof(key), "m%u-%d", i, round);
            uint32_t x = mcr_snapshot_locate(a, key, (size_t)kl),
                     y = mcr_snapshot_locate(b, key, (size_t)kl);
            mcr_server_desc dx, dy;
            mcr_snapshot_server(a, x, &dx);
            mcr_snapshot_server(b, y, &dy);
            if (strcmp(dx.id, dy.id) != 0) {
                count[x * nb + y]++;
                moved++;
            }
        }
        double tol_all = 4 * sqrt(0.25 / KEYS) + 0.005;
        ck_assert_msg(fabs(mcr_diff_moved(diff) - (double)moved / KEYS) <= tol_all,
                      "case %d, %zu servers: moved %g, the model %g", _i, n,
                      (double)moved / KEYS, mcr_diff_moved(diff));
        for (size_t p = 0; p < mcr_diff_pair_count(diff); p++) {
            mcr_diff_pair pr;
            ck_assert_int_eq(mcr_diff_pair_get(diff, p, &pr), MCR_OK);
            uint32_t x = mcr_snapshot_find(a, pr.from), y = mcr_snapshot_find(b, pr.to);
            double got = (double)count[x * nb + y] / KEYS;
            double tol = 5 * sqrt(pr.fraction * (1 - pr.fraction) / KEYS) + 0.003;
            ck_assert_msg(fabs(got - pr.fraction) <= tol,
                          "case %d, %zu servers: %s -> %s counted %g, the model %g", _i, n,
                          pr.from, pr.to, got, pr.fraction);
        }
        free(count);
        mcr_diff_free(diff);
        mcr_changes_free(ch);
        mcr_snapshot_unref(a);
        mcr_snapshot_unref(b);
        mcr_config_free(cfg);
        free(list);
        free(w);
    }
}
END_TEST

/* What mcrouter-wch3 refuses, and says. */
START_TEST(wch3_refusals)
{
    static const struct {
        const char *list, *says;
    } bad[] = {
        {"a:1:1.5", "outside 0..1"},
        {"a:1:2", "outside 0..1"},
        {"a:1:0.1234567", "more than 6 digits"},
        {"a:1:.5", "not a decimal"},
        {"a:1:0.", "not a decimal"},
        {"a:1:-0.5", "not a decimal"},
        {"a:1:0;5", "not a decimal"},
        {"a:1:1e-3", "not a decimal"},
    };
    mcr_error err;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        mcr_config *cfg = mcr_config_new();
        ck_assert_int_eq(mcr_config_set_client(cfg, "mcrouter-wch3", &err), MCR_OK);
        ck_assert_msg(mcr_config_add_servers(cfg, bad[i].list, &err) != MCR_OK, "%s taken",
                      bad[i].list);
        ck_assert_msg(strstr(err.message, bad[i].says) != NULL, "%s: \"%s\"", bad[i].list,
                      err.message);
        ck_assert_uint_eq(mcr_config_server_count(cfg), 0);
        mcr_config_free(cfg);
    }
    /* a decimal weight in another mode says whose it is */
    mcr_config *cfg = mcr_config_new();
    ck_assert_int_ne(mcr_config_add_servers(cfg, "a:1:0.5", &err), MCR_OK);
    ck_assert_msg(strstr(err.message, "mcrouter-wch3") != NULL, "%s", err.message);
    /* a file line's weight= too, and a missing weight is 0.5 */
    ck_assert_int_eq(mcr_config_set_client(cfg, "mcrouter-wch3", &err), MCR_OK);
    ck_assert_int_eq(mcr_config_add_server_line(cfg, "a:1 weight=0.25", &err), MCR_OK);
    ck_assert_int_eq(mcr_config_add_server_line(cfg, "b:1", &err), MCR_OK);
    ck_assert_int_ne(mcr_config_add_server_line(cfg, "c:1 weight=3", &err), MCR_OK);
    mcr_ring *r = ring_of(cfg);
    ck_assert_uint_eq(mcr_ring_server_weight(r, 0), 250000);
    ck_assert_uint_eq(mcr_ring_server_weight(r, 1), MCR_WCH3_WEIGHT_DEFAULT);
    mcr_ring_free(r);
    mcr_config_free(cfg);
}
END_TEST



/* Through the config, the ring and the batch lookup: the proxy's function;
 * growing the list by one server moves keys only to the new server, about
 * 1/(n+1) of them. */
START_TEST(random_growth)
{
    const proxy *p = &proxies[_i % NPROXIES];
    tu_rng rng;
    tu_rng_init(&rng, 4000 + (uint64_t)_i);
    unsigned char keys[64][KEY_MAX + 1];
    const void *kp[64];
    size_t kl[64];
    uint32_t out[64];
    int rounds = tu_cases(24);

    for (int round = 0; round < rounds; round++) {
        size_t n = round < 4 ? (size_t)round + 1 : 1 + tu_below(&rng, 999);
        mcr_config *a = proxy_config(p->client, 0, n), *b = proxy_config(p->client, 0, n + 1);
        mcr_ring *ra = ring_of(a), *rb = ring_of(b);
        ck_assert_int_eq(mcr_ring_mode(ra), p->mode);
        unsigned moved = 0, total = 0;
        for (int batch = 0; batch < 16; batch++) {
            for (int k = 0; k < 64; k++) {
                kl[k] = random_key(&rng, keys[k]);
                kp[k] = keys[k];
            }
            mcr_ring_locate_many(ra, kp, kl, 64, out);
            for (int k = 0; k < 64; k++) {
                uint32_t x = mcr_ring_locate(ra, kp[k], kl[k]);
                uint32_t y = mcr_ring_locate(rb, kp[k], kl[k]);
                ck_assert_uint_eq(x, direct(p->mode, keys[k], kl[k], (uint32_t)n));
                ck_assert_uint_eq(out[k], x);
                ck_assert_uint_lt(x, n);
                if (x != y) {
                    ck_assert_msg(y == n, "%s: a key moved from %u to %u, not to the new %zu",
                                  p->client, x, y, n);
                    moved++;
                }
                total++;
            }
        }
        /* 1,024 keys: the share moved is 1/(n+1), binomial; loosely, since
         * the keys built of routing prefixes and hash stops repeat a few
         * routing keys ("", "/") */
        double want = (double)total / (double)(n + 1);
        ck_assert_msg((double)moved < want + 8.0 * __builtin_sqrt(want) + 24,
                      "%s: %u of %u keys moved to server %zu of %zu", p->client, moved, total,
                      n + 1, n + 1);
        mcr_ring_free(ra);
        mcr_ring_free(rb);
        mcr_config_free(a);
        mcr_config_free(b);
    }
}
END_TEST

/* Balance: 20,000 keys over 10 servers, each server's count within 6
 * standard deviations of 2,000 (mcrouter's own test wants 15%). */
START_TEST(random_balance)
{
    const proxy *p = &proxies[_i % NPROXIES];
    tu_rng rng;
    tu_rng_init(&rng, 4100 + (uint64_t)_i);
    mcr_config *cfg = proxy_config(p->client, 0, 10);
    mcr_ring *r = ring_of(cfg);
    unsigned count[10] = {0};
    unsigned char key[KEY_MAX + 1];
    for (int i = 0; i < 20000; i++) {
        size_t len = tu_key(&rng, (char *)key, 40);
        count[mcr_ring_locate(r, key, len)]++;
    }
    for (int i = 0; i < 10; i++)
        ck_assert_msg(count[i] > 2000 - 6 * 42 && count[i] < 2000 + 6 * 42,
                      "%s: server %d has %u of 20000 keys", p->client, i, count[i]);
    mcr_ring_free(r);
    mcr_config_free(cfg);
}
END_TEST

/* The snapshots random_snapshots and envoy_random_snapshots check, of a
 * config of n servers in mode `mode`: s[0] made from it, s[1] read back
 * from s[0]'s text, s[2] = s[0] with a random server DOWN, whose index is
 * returned. */
static size_t snapshot_trio(const mcr_config *cfg, mcr_mode mode, size_t n, tu_rng *rng,
                            mcr_snapshot *s[3])
{
    mcr_error err;
    char *text;
    size_t tlen;
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &s[0], &err), MCR_OK);
    ck_assert_int_eq(mcr_snapshot_text(s[0], &text, &tlen, &err), MCR_OK);
    ck_assert_int_eq(mcr_snapshot_parse(text, tlen, NULL, NULL, 0, &s[1], &err), MCR_OK);
    ck_assert_int_eq(mcr_ring_mode(mcr_snapshot_ring(s[1])), mode);
    ck_assert_ptr_nonnull(strstr(text, mcr_mode_name(mode)));
    free(text);
    size_t down = tu_below(rng, (uint32_t)n);
    mcr_server_desc d;
    ck_assert_int_eq(mcr_snapshot_server(s[0], down, &d), MCR_OK);
    mcr_changes *ch = mcr_changes_new();
    ck_assert_int_eq(mcr_changes_set_state(ch, d.id, MCR_STATE_DOWN, &err), MCR_OK);
    ck_assert_int_eq(mcr_snapshot_apply(s[0], ch, &s[2], &err), MCR_OK);
    mcr_changes_free(ch);
    return down;
}

/* The server the proxy picks for a key with the list without the server
 * set DOWN (an index in that shorter list). */
typedef uint32_t (*without_fn)(const void *ctx, const unsigned char *key, size_t len);

/* 2,000 random keys through the trio: s[0] and s[1] place each as cfg's
 * ring; s[2] as `without` does among the others; the diff of s[0] and s[2]
 * names the keys that move, and its share of them is within `tol` of
 * theirs. Frees the trio. */
static void check_trio(const char *client, const mcr_config *cfg, mcr_snapshot *s[3],
                       size_t n, size_t down, without_fn without, const void *ctx, tu_rng *rng,
                       double tol)
{
    mcr_error err;
    mcr_diff *diff = NULL;
    ck_assert_int_eq(mcr_diff_new(s[0], s[2], &diff, &err), MCR_OK);
    mcr_ring *ring = ring_of(cfg);
    unsigned char key[KEY_MAX + 1];
    unsigned moved = 0, total = 2000;
    for (unsigned k = 0; k < total; k++) {
        size_t len = random_key(rng, key);
        uint32_t x = mcr_ring_locate(ring, key, len);
        ck_assert_uint_eq(mcr_snapshot_locate(s[0], key, len), x);
        ck_assert_uint_eq(mcr_snapshot_locate(s[1], key, len), x);
        uint32_t y = without(ctx, key, len);
        uint32_t z = mcr_snapshot_locate(s[2], key, len);
        ck_assert_uint_eq(z, y < down ? y : y + 1); /* ring index -> listed index */
        moved += z != x;
        ck_assert_int_eq(mcr_diff_key_moved(diff, key, len), z != x);
    }
    double share = (double)moved / total;
    ck_assert_msg(fabs(share - mcr_diff_moved(diff)) < tol,
                  "%s, %zu servers, %zu down: %f of keys moved, the diff says %f", client, n,
                  down, share, mcr_diff_moved(diff));
    mcr_diff_free(diff);
    mcr_ring_free(ring);
    for (int i = 0; i < 3; i++)
        mcr_snapshot_unref(s[i]);
}

/* A proxy computing directly, for its list less one server. */
typedef struct direct_less {
    mcr_mode mode;
    uint32_t n;
} direct_less;

static uint32_t direct_without(const void *ctx, const unsigned char *key, size_t len)
{
    const direct_less *d = ctx;
    return direct(d->mode, key, len, d->n);
}

static uint32_t ring_without(const void *ctx, const unsigned char *key, size_t len)
{
    return mcr_ring_locate(ctx, key, len);
}

/* A snapshot places as the ring; saved and parsed back it places the same
 * and keeps its mode; a server set DOWN places as the proxy with the list
 * of active servers; a diff of the two counts what moved. */
START_TEST(random_snapshots)
{
    const proxy *p = &proxies[_i % NPROXIES];
    tu_rng rng;
    tu_rng_init(&rng, 4200 + (uint64_t)_i);
    int rounds = tu_cases(8);

    for (int round = 0; round < rounds; round++) {
        size_t n = 2 + tu_below(&rng, round < 4 ? 20 : 999);
        mcr_config *cfg = proxy_config(p->client, 0, n);
        mcr_snapshot *s[3];
        /* server `down` DOWN: the proxy given the list without it */
        size_t down = snapshot_trio(cfg, p->mode, n, &rng, s);
        direct_less dl = {p->mode, (uint32_t)n - 1};
        /* the diff's model share against the keys' (2,000 keys) */
        check_trio(p->client, cfg, s, n, down, direct_without, &dl, &rng, 0.08);
        mcr_config_free(cfg);
    }
}
END_TEST

/* What the proxies do not have: weights; and a hash alone places no key. */
START_TEST(refusals)
{
    const proxy *p = &proxies[_i % NPROXIES];
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    mcr_ring *r = NULL;
    mcr_snapshot *s = NULL;
    ck_assert_int_eq(mcr_config_set_client(cfg, p->client, &err), MCR_OK);
    ck_assert_str_eq(mcr_config_client(cfg), p->client);
    ck_assert_int_eq(mcr_config_add_servers(cfg, "10.0.0.1,10.0.0.2:11211:2", &err), MCR_OK);
    ck_assert_int_eq(mcr_ring_new(cfg, &r, &err), MCR_ERR_RANGE);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &s, &err), MCR_ERR_RANGE);
    ck_assert_int_eq(mcr_config_set_mode(cfg, p->mode), MCR_OK); /* the mode alone too */
    ck_assert_int_eq(mcr_ring_new(cfg, &r, &err), MCR_ERR_RANGE);
    mcr_config_free(cfg);

    cfg = proxy_config(p->client, 0, 3);
    r = ring_of(cfg);
    ck_assert_uint_eq(mcr_ring_find(r, 12345), MCR_NO_SERVER);
    ck_assert_uint_eq(mcr_ring_point_count(r), 0);
    mcr_ring_free(r);
    mcr_config_free(cfg);
}
END_TEST

/* The ring places "sample" as mcrouter's Ch3HashTest does (100 servers:
 * 97), whatever routing prefix or hash stop surrounds it. */
START_TEST(ch3_ring_vectors)
{
    mcr_config *cfg = proxy_config("mcrouter-ch3", 0, 100);
    mcr_ring *r = ring_of(cfg);
    static const char *const keys[] = {"sample", "/region/cluster/sample", "sample|#|x",
                                       "/a/b/sample|#|"};
    for (size_t i = 0; i < 4; i++)
        ck_assert_uint_eq(mcr_ring_locate(r, keys[i], strlen(keys[i])), 97);
    ck_assert_uint_eq(mcr_ring_locate(r, "", 0), 72);
    ck_assert_uint_eq(mcr_ring_locate(r, "/region/cluster/", 16), 72);
    mcr_ring_free(r);
    mcr_config_free(cfg);
}
END_TEST

/* ------------------------------------------------------------ Envoy */

/*
 * Envoy's tests fix tables and rings of a few hosts (the vectors above);
 * beyond them, what its algorithms promise, on random configurations of 1
 * to 1,000 servers with weights, through the config, the ring, the batch
 * lookup and the snapshot.
 */

static const proxy envoys[] = {
    {"envoy-maglev", MCR_MODE_ENVOY_MAGLEV},
    {"envoy-ring-hash", MCR_MODE_ENVOY_RING_HASH},
};
#define NENVOYS (sizeof(envoys) / sizeof(envoys[0]))

/* A config of client c with n servers 10.x.y.z:port from `first`, weights
 * 1..wmax (all 1 when wmax is 1). */
static mcr_config *envoy_config(const char *client, size_t first, size_t n, tu_rng *rng,
                                uint32_t wmax)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    ck_assert_ptr_nonnull(cfg);
    ck_assert_int_eq(mcr_config_set_client(cfg, client, &err), MCR_OK);
    for (size_t i = first; i < first + n; i++) {
        char host[32];
        snprintf(host, sizeof(host), "10.%zu.%zu.%zu", (i >> 16) & 255, (i >> 8) & 255, i & 255);
        uint32_t w = wmax > 1 ? 1 + tu_below(rng, wmax) : 1;
        ck_assert_int_eq(mcr_config_add_server(cfg, host, 11211 + (int)(i % 3), w, &err), MCR_OK);
    }
    return cfg;
}

/* The host keys and weights of a ring's servers, as Envoy sees them. */
typedef struct envoy_hosts_of {
    const char **name;
    size_t *len;
    uint32_t *weight;
    size_t n;
} envoy_hosts_of;

static envoy_hosts_of hosts_of(const mcr_ring *r)
{
    envoy_hosts_of h;
    h.n = mcr_ring_server_count(r);
    h.name = malloc(h.n * sizeof(*h.name));
    h.len = malloc(h.n * sizeof(*h.len));
    h.weight = malloc(h.n * sizeof(*h.weight));
    ck_assert(h.name != NULL && h.len != NULL && h.weight != NULL);
    for (size_t i = 0; i < h.n; i++) {
        h.name[i] = mcr_ring_server_name(r, i);
        h.len[i] = strlen(h.name[i]);
        h.weight[i] = mcr_ring_server_weight(r, i);
    }
    return h;
}

static void hosts_free(envoy_hosts_of *h)
{
    free(h->name);
    free(h->len);
    free(h->weight);
}

/* Maglev: the table is full, and each host's entries are its weight's
 * share within the fill's rounding: a host of normalised weight w takes
 * an entry in 1 + floor(R w / max_w) of the R rounds, so its count is
 * (65537 - about n) w + 1, give or take one. Ring hash: the ring has the
 * size Envoy computes (scale = min(ceil(min_w 1024) / min_w, 8388608),
 * each host the points its running sum gives it), the points ascend and
 * each is XXH64 of "address_i". Both: the ring, the batch lookup and the
 * direct lookup agree. */
START_TEST(envoy_random_structure)
{
    const proxy *p = &envoys[_i % NENVOYS];
    tu_rng rng;
    tu_rng_init(&rng, 4300 + (uint64_t)_i);
    int rounds = tu_cases(12);

    for (int round = 0; round < rounds; round++) {
        size_t n = round < 3 ? (size_t)round + 1 : 1 + tu_below(&rng, 1000);
        uint32_t wmax = round % 3 == 0 ? 1 : round % 3 == 1 ? 5 : 1000;
        mcr_config *cfg = envoy_config(p->client, 0, n, &rng, wmax);
        mcr_ring *r = ring_of(cfg);
        envoy_hosts_of h = hosts_of(r);
        uint64_t sum = 0;
        for (size_t i = 0; i < n; i++)
            sum += h.weight[i];
        unsigned char key[KEY_MAX + 1];

        if (p->mode == MCR_MODE_ENVOY_MAGLEV) {
            uint32_t *table = malloc(MCR__ENVOY_MAGLEV_SIZE * sizeof(*table));
            unsigned *count = calloc(n, sizeof(*count));
            ck_assert(table != NULL && count != NULL);
            for (uint32_t e = 0; e < MCR__ENVOY_MAGLEV_SIZE; e++)
                table[e] = UINT32_MAX;
            ck_assert_int_eq(mcr__envoy_maglev_fill(h.name, h.len, h.weight, n,
                                                    MCR__ENVOY_MAGLEV_SIZE, table),
                             MCR_OK);
            for (uint32_t e = 0; e < MCR__ENVOY_MAGLEV_SIZE; e++) {
                ck_assert_uint_lt(table[e], n); /* full */
                count[table[e]]++;
            }
            for (size_t i = 0; i < n; i++) {
                double w = (double)h.weight[i] / (double)sum;
                double want = (MCR__ENVOY_MAGLEV_SIZE - (double)n) * w + 1;
                ck_assert_msg(count[i] >= 1 && fabs(count[i] - want) <= 2.0 + (double)n * w,
                              "%zu servers: server %zu (weight %u of %llu) has %u entries, "
                              "about %.1f expected",
                              n, i, h.weight[i], (unsigned long long)sum, count[i], want);
            }
            for (int k = 0; k < 500; k++) {
                size_t len = random_key(&rng, key);
                uint32_t want = n == 1 ? 0 : table[XXH64(key, len, 0) % MCR__ENVOY_MAGLEV_SIZE];
                ck_assert_uint_eq(mcr_ring_locate(r, key, len), want);
            }
            free(table);
            free(count);
        } else {
            double min_w = 1.0;
            for (size_t i = 0; i < n; i++)
                min_w = fmin(min_w, (double)h.weight[i] / (double)sum);
            double scale = fmin(ceil(min_w * 1024) / min_w, 8388608.0);
            uint64_t *value;
            uint32_t *server;
            size_t np;
            ck_assert_int_eq(mcr__envoy_ring_points(h.name, h.len, h.weight, n, 1024, &value,
                                                    &server, &np),
                             MCR_OK);
            /* ring_hash_lb.size: ceil(scale), the running sums' rounding aside */
            ck_assert_msg(fabs((double)np - ceil(scale)) <= 1.0, "%zu servers: %zu points, scale %f",
                          n, np, scale);
            ck_assert_uint_ge(np, 1024 < scale ? 1024 : (size_t)floor(scale));
            unsigned *count = calloc(n, sizeof(*count));
            ck_assert_ptr_nonnull(count);
            for (size_t j = 0; j < np; j++) {
                ck_assert(j == 0 || value[j - 1] <= value[j]);
                count[server[j]]++;
            }
            double cur = 0, target = 0;
            for (size_t i = 0; i < n; i++) {
                target += scale * ((double)h.weight[i] / (double)sum);
                unsigned c = 0;
                for (; cur < target; cur++)
                    c++;
                ck_assert_uint_eq(count[i], c);
                ck_assert_uint_ge(c, 1); /* min_hashes_per_host */
            }
            /* a point of each server, by its label */
            for (size_t i = 0; i < n; i += 1 + n / 16) {
                char label[64];
                int ll = snprintf(label, sizeof(label), "%s_%u", h.name[i], count[i] - 1);
                uint64_t v = XXH64(label, (size_t)ll, 0);
                size_t at = mcr__envoy_ring_find(value, np, v);
                ck_assert_uint_eq(value[at], v);
                ck_assert_uint_eq(server[at], i);
            }
            for (int k = 0; k < 500; k++) {
                size_t len = random_key(&rng, key);
                uint64_t hk = XXH64(key, len, 0);
                /* the first point >= h, or point 0 past the last */
                size_t j = mcr__envoy_ring_find(value, np, hk);
                if (j == 0)
                    ck_assert(hk <= value[0] || hk > value[np - 1]);
                else
                    ck_assert(value[j - 1] < hk && hk <= value[j]);
                uint32_t want = n == 1 ? 0 : server[j];
                ck_assert_uint_eq(mcr_ring_locate(r, key, len), want);
            }
            free(count);
            free(value);
            free(server);
        }

        /* the batch lookup answers as the single one */
        unsigned char keys[64][KEY_MAX + 1];
        const void *kp[64];
        size_t kl[64];
        uint32_t out[64];
        for (int k = 0; k < 64; k++) {
            kl[k] = random_key(&rng, keys[k]);
            kp[k] = keys[k];
        }
        mcr_ring_locate_many(r, kp, kl, 64, out);
        for (int k = 0; k < 64; k++)
            ck_assert_uint_eq(out[k], mcr_ring_locate(r, kp[k], kl[k]));
        hosts_free(&h);
        mcr_ring_free(r);
        mcr_config_free(cfg);
    }
}
END_TEST

/* Growth by one server (equal weights) moves few keys: maglev about the
 * new server's share and the table's disruption (below 2 N / M); the ring
 * its share and the keys of the points each server loses when the ring's
 * points per server shrink (ceil(1024 / n) before, ceil(1024 / (n + 1))
 * after). */
START_TEST(envoy_random_growth)
{
    const proxy *p = &envoys[_i % NENVOYS];
    tu_rng rng;
    tu_rng_init(&rng, 4400 + (uint64_t)_i);
    int rounds = tu_cases(16);
    unsigned char key[KEY_MAX + 1];

    for (int round = 0; round < rounds; round++) {
        size_t n = round < 3 ? (size_t)round + 1 : 1 + tu_below(&rng, 999);
        mcr_config *a = envoy_config(p->client, 0, n, &rng, 1);
        mcr_config *b = envoy_config(p->client, 0, n + 1, &rng, 1);
        mcr_ring *ra = ring_of(a), *rb = ring_of(b);
        unsigned moved = 0, total = 4096;
        for (unsigned k = 0; k < total; k++) {
            size_t len = tu_key(&rng, (char *)key, KEY_MAX);
            moved += mcr_ring_locate(ra, key, len) != mcr_ring_locate(rb, key, len);
        }
        double lost = 0;
        if (p->mode == MCR_MODE_ENVOY_RING_HASH) {
            double ca = ceil(1024.0 / (double)n), cb = ceil(1024.0 / (double)(n + 1));
            lost = 1.0 - cb / ca;
        } else {
            /* Maglev's disruption beside the share: entries that change
             * hands between old servers as the permutations refill, which
             * grows with N / M (measured here: about 1.1 N / M) */
            lost = 2.0 * (double)n / MCR__ENVOY_MAGLEV_SIZE;
        }
        double want = 1.0 / (double)(n + 1) + lost;
        double share = (double)moved / total;
        ck_assert_msg(share <= want + 4.0 * sqrt(want / total) + 0.005,
                      "%s: %zu -> %zu servers moved %f of the keys, at most %f expected",
                      p->client, n, n + 1, share, want);
        mcr_ring_free(ra);
        mcr_ring_free(rb);
        mcr_config_free(a);
        mcr_config_free(b);
    }
}
END_TEST

/* Snapshots: text round trips place identically and keep the mode; a
 * server DOWN places as Envoy with the active servers (their weights
 * renormalised); diffs count what moved: envoy-maglev's the table entries
 * that changed, envoy-ring-hash's the 64-bit arcs. */
START_TEST(envoy_random_snapshots)
{
    const proxy *p = &envoys[_i % NENVOYS];
    tu_rng rng;
    tu_rng_init(&rng, 4500 + (uint64_t)_i);
    mcr_error err;
    int rounds = tu_cases(6);

    for (int round = 0; round < rounds; round++) {
        size_t n = 2 + tu_below(&rng, round < 3 ? 20 : 999);
        mcr_config *cfg = envoy_config(p->client, 0, n, &rng, round % 2 ? 100 : 1);
        mcr_snapshot *s[3];
        size_t down = snapshot_trio(cfg, p->mode, n, &rng, s);
        /* Envoy given the list without the server */
        mcr_config *less = mcr_config_new();
        ck_assert_int_eq(mcr_config_set_client(less, p->client, &err), MCR_OK);
        for (size_t i = 0; i < n; i++) {
            mcr_server_desc x;
            ck_assert_int_eq(mcr_snapshot_server(s[0], i, &x), MCR_OK);
            if (i != down)
                ck_assert_int_eq(mcr_config_add_server(less, x.host, x.port, x.weight, &err),
                                 MCR_OK);
        }
        mcr_ring *rless = ring_of(less);
        check_trio(p->client, cfg, s, n, down, ring_without, rless, &rng, 0.05);
        mcr_ring_free(rless);
        mcr_config_free(less);
        mcr_config_free(cfg);
    }
}
END_TEST

/* A 32-bit hash places no key; the other maglev's snapshots and a
 * continuum's do not diff against envoy-maglev's, nor a 32-bit continuum
 * against envoy-ring-hash's. */
START_TEST(envoy_refusals)
{
    mcr_error err;
    tu_rng rng;
    tu_rng_init(&rng, 4600);
    for (size_t e = 0; e < NENVOYS; e++) {
        mcr_config *cfg = envoy_config(envoys[e].client, 0, 3, &rng, 3);
        mcr_ring *r = ring_of(cfg);
        ck_assert_uint_eq(mcr_ring_find(r, 12345), MCR_NO_SERVER);
        ck_assert_uint_eq(mcr_ring_point_count(r), 0);
        mcr_ring_free(r);
        mcr_config_free(cfg);
    }
    static const struct {
        const char *client;
        mcr_mode other;
    } pairs[] = {{"envoy-maglev", MCR_MODE_MAGLEV},
                 {"envoy-maglev", MCR_MODE_KETAMA},
                 {"envoy-maglev", MCR_MODE_ENVOY_RING_HASH},
                 {"envoy-ring-hash", MCR_MODE_KETAMA}};
    for (size_t o = 0; o < sizeof(pairs) / sizeof(pairs[0]); o++) {
        mcr_config *a = envoy_config(pairs[o].client, 0, 5, &rng, 1);
        mcr_config *b = envoy_config(pairs[o].client, 0, 5, &rng, 1);
        ck_assert_int_eq(mcr_config_set_mode(b, pairs[o].other), MCR_OK);
        mcr_snapshot *sa, *sb;
        mcr_diff *d;
        ck_assert_int_eq(mcr_snapshot_new(a, 1, &sa, &err), MCR_OK);
        ck_assert_int_eq(mcr_snapshot_new(b, 1, &sb, &err), MCR_OK);
        ck_assert_int_eq(mcr_diff_new(sa, sb, &d, &err), MCR_ERR_UNSUPPORTED);
        ck_assert_int_eq(mcr_diff_new(sb, sa, &d, &err), MCR_ERR_UNSUPPORTED);
        mcr_snapshot_unref(sa);
        mcr_snapshot_unref(sb);
        mcr_config_free(a);
        mcr_config_free(b);
    }
}
END_TEST

/* ------------------------------------------------------------ memcached's ring hash */

/*
 * memcached-proxy-ring-ketama, computed here from memcached's
 * proxy_ring_hash.c (github.com/memcached/memcached; the same in the stored
 * commits 2a903f04 and 84fae8a9) with nothing of libmcroute: OpenSSL's MD5,
 * glibc's qsort with the proxy's comparator (ketama_compare: by point
 * alone; glibc sorts with a merge sort when it can allocate, so equal
 * points keep the list's order) and the proxy's lookup (ketama_get_server:
 * libketama's bisection). memcached's own tests (t/proxy*.t, t/proxy*.lua)
 * place no key through mcp.dist_ring_hash: there are no vectors of theirs
 * to copy, so the reference is this computation, and libketama's continuum
 * where the two agree (ring_ketama_is_libketama_but).
 */
typedef struct cpoint {
    unsigned int point;
    unsigned int id; /* 1-based, as the pool's backends */
} cpoint;

static int ketama_compare(const void *p1, const void *p2)
{
    const cpoint *a = p1, *b = p2;
    return (a->point < b->point) ? -1 : ((a->point > b->point) ? 1 : 0);
}

static void md5_of(const void *s, size_t len, unsigned char d[16])
{
    unsigned int dl = 0;
    ck_assert_int_eq(EVP_Digest(s, len, d, &dl, EVP_md5(), NULL), 1);
}

/* _add_server_ketama: obuckets (160) / 4 labels "addr:port-k", four
 * little-endian words of each digest; then the qsort. */
static cpoint *proxy_continuum(char hosts[][32], const int *ports, size_t n, size_t *count)
{
    cpoint *c = malloc(n * 160 * sizeof(*c));
    ck_assert_ptr_nonnull(c);
    unsigned cont = 0;
    for (size_t i = 0; i < n; i++) {
        for (int k = 0; k < 160 / 4; k++) {
            char label[64];
            unsigned char d[16];
            int len = snprintf(label, sizeof(label), "%s:%d-%d", hosts[i], ports[i], k);
            md5_of(label, (size_t)len, d);
            for (int h = 0; h < 4; h++) {
                c[cont].point = (unsigned)d[3 + h * 4] << 24 | (unsigned)d[2 + h * 4] << 16 |
                                (unsigned)d[1 + h * 4] << 8 | d[h * 4];
                c[cont].id = (unsigned)i + 1;
                cont++;
            }
        }
    }
    qsort(c, cont, sizeof(cpoint), ketama_compare);
    *count = cont;
    return c;
}

/* ketama_key_hasher: the low 32 bits of MD5(key), little-endian. */
static unsigned proxy_key_hash(const void *key, size_t len)
{
    unsigned char d[16];
    md5_of(key, len, d);
    return (unsigned)d[3] << 24 | (unsigned)d[2] << 16 | (unsigned)d[1] << 8 | d[0];
}

/* ketama_get_server, zero-based. */
static unsigned proxy_get_server(const cpoint *c, unsigned total, unsigned h)
{
    int highp = (int)total, lowp = 0, midp;
    unsigned midval, midval1;
    for (;;) {
        midp = (lowp + highp) / 2;
        if (midp == (int)total)
            return c[0].id - 1;
        midval = c[midp].point;
        midval1 = midp == 0 ? 0 : c[midp - 1].point;
        if (h <= midval && h > midval1)
            return c[midp].id - 1;
        if (midval < h)
            lowp = midp + 1;
        else
            highp = midp - 1;
        if (lowp > highp)
            return c[0].id - 1;
    }
}

/* n servers: IPv4 addresses, host names, IPv6 addresses (no brackets in
 * the label: the proxy's backend host), random ports. */
static mcr_config *ring_ketama_config(tu_rng *rng, size_t n, char hosts[][32], int *ports)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    ck_assert_ptr_nonnull(cfg);
    ck_assert_int_eq(mcr_config_set_client(cfg, "memcached-proxy-ring-ketama", &err), MCR_OK);
    for (size_t i = 0; i < n; i++) {
        switch (tu_below(rng, 3)) {
        case 0:
            snprintf(hosts[i], 32, "10.%zu.%zu.%zu", (i >> 16) & 255, (i >> 8) & 255, i & 255);
            break;
        case 1: snprintf(hosts[i], 32, "cache-%u.example", (unsigned)i); break;
        default: snprintf(hosts[i], 32, "2001:db8::%zx", i + 1); break;
        }
        ports[i] = 1 + (int)tu_below(rng, 65535);
        ck_assert_msg(mcr_config_add_server(cfg, hosts[i], ports[i], 1, &err) == MCR_OK, "%s",
                      err.message);
    }
    return cfg;
}

/* The whole continuum, point by point, and random keys (1..250 bytes, any
 * bytes) through the ring, the batch lookup, a snapshot and its text read
 * back, against the proxy computed above; and the continuum's edges. */
START_TEST(ring_ketama_random)
{
    tu_rng rng;
    tu_rng_init(&rng, 4400 + (uint64_t)_i);
    mcr_error err;
    int rounds = tu_cases(10);
    static char hosts[1001][32];
    static int ports[1001];

    for (int round = 0; round < rounds; round++) {
        size_t n = round < 3 ? (size_t)round + 1 : round == 3 ? 1000 : 1 + tu_below(&rng, 1000);
        mcr_config *cfg = ring_ketama_config(&rng, n, hosts, ports);
        mcr_ring *r = ring_of(cfg);
        ck_assert_int_eq(mcr_ring_mode(r), MCR_MODE_MEMCACHED_PROXY_RING_KETAMA);
        size_t total;
        cpoint *c = proxy_continuum(hosts, ports, n, &total);
        ck_assert_uint_eq(mcr_ring_point_count(r), total);
        for (size_t i = 0; i < total; i++) {
            uint32_t v, s;
            ck_assert_int_eq(mcr_ring_point(r, i, &v, &s), MCR_OK);
            ck_assert_uint_eq(v, c[i].point);
            ck_assert_uint_eq(s, c[i].id - 1);
        }
        mcr_snapshot *s1, *s2;
        ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &s1, &err), MCR_OK);
        char *text;
        size_t tlen;
        ck_assert_int_eq(mcr_snapshot_text(s1, &text, &tlen, &err), MCR_OK);
        ck_assert_int_eq(mcr_snapshot_parse(text, tlen, NULL, NULL, 0, &s2, &err), MCR_OK);
        ck_assert_ptr_nonnull(strstr(text, "memcached-proxy-ring-ketama"));
        free(text);
        unsigned char keys[64][KEY_MAX + 1];
        const void *kp[64];
        size_t kl[64];
        uint32_t out[64];
        for (int batch = 0; batch < 8; batch++) {
            for (int k = 0; k < 64; k++) {
                kl[k] = random_key(&rng, keys[k]);
                kp[k] = keys[k];
            }
            mcr_ring_locate_many(r, kp, kl, 64, out);
            for (int k = 0; k < 64; k++) {
                uint32_t want =
                    n == 1 ? 0 : proxy_get_server(c, (unsigned)total, proxy_key_hash(kp[k], kl[k]));
                ck_assert_uint_eq(mcr_ring_locate(r, kp[k], kl[k]), want);
                ck_assert_uint_eq(out[k], want);
                ck_assert_uint_eq(mcr_snapshot_locate(s1, kp[k], kl[k]), want);
                ck_assert_uint_eq(mcr_snapshot_locate(s2, kp[k], kl[k]), want);
            }
        }
        /* the edges: 0, each side of points, past the last (wrapping) */
        for (int e = 0; e < 64 && n > 1; e++) {
            size_t i = tu_below(&rng, (uint32_t)total);
            uint32_t hs[] = {0, 1, UINT32_MAX, c[i].point, c[i].point - 1, c[i].point + 1};
            for (size_t j = 0; j < sizeof(hs) / sizeof(hs[0]); j++)
                ck_assert_uint_eq(mcr_ring_find(r, hs[j]),
                                  proxy_get_server(c, (unsigned)total, hs[j]));
        }
        free(c);
        mcr_snapshot_unref(s1);
        mcr_snapshot_unref(s2);
        mcr_ring_free(r);
        mcr_config_free(cfg);
    }
}
END_TEST

/* Equal points keep the list's order (glibc's merge sort): two servers of
 * the same host and port text cannot be configured, so ties are made on
 * the points themselves, through mcr__sort_points against qsort. */
START_TEST(ring_ketama_ties)
{
    tu_rng rng;
    tu_rng_init(&rng, 4500);
    enum { N = 4000 };
    cpoint *c = malloc(N * sizeof(*c));
    mcr__point *p = malloc(N * sizeof(*p));
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_nonnull(p);
    for (unsigned i = 0; i < N; i++) {
        c[i].point = tu_below(&rng, 64); /* many ties */
        c[i].id = i / 40 + 1;
        p[i].value = c[i].point;
        p[i].server = c[i].id - 1;
    }
    qsort(c, N, sizeof(cpoint), ketama_compare);
    ck_assert_int_eq(mcr__sort_points(p, N), MCR_OK);
    for (unsigned i = 0; i < N; i++) {
        ck_assert_uint_eq(p[i].value, c[i].point);
        ck_assert_uint_eq(p[i].server, c[i].id - 1);
    }
    free(c);
    free(p);
}
END_TEST

/* Is it libketama's continuum ("ketama") with every weight 1? The same
 * labels and points, but libketama gives each server
 * floorf(1/n * 40.0 * n) labels in float arithmetic, which is 39, not 40,
 * for 61, 122, 237, 244, 474, 488, 933, ... servers: not an alias. */
START_TEST(ring_ketama_is_libketama_but)
{
    static const struct {
        size_t n;
        size_t ketama_points; /* libketama's continuum, weights 1 */
    } cases[] = {{1, 160}, {3, 3 * 160}, {60, 60 * 160}, {61, 61 * 156}, {62, 62 * 160},
                 {122, 122 * 156}, {237, 237 * 156}};
    for (size_t t = 0; t < sizeof(cases) / sizeof(cases[0]); t++) {
        size_t n = cases[t].n;
        mcr_config *a = proxy_config("memcached-proxy-ring-ketama", 0, n);
        mcr_config *b = proxy_config("memcached-proxy-ring-ketama", 0, n);
        ck_assert_int_eq(mcr_config_set_mode(b, MCR_MODE_KETAMA), MCR_OK);
        mcr_ring *ra = ring_of(a), *rb = ring_of(b);
        /* both hash keys as mcp.dist_ring_hash.hash */
        ck_assert_uint_eq(mcr_ring_hash(ra, "user:1", 6), proxy_key_hash("user:1", 6));
        ck_assert_uint_eq(mcr_ring_hash(rb, "user:1", 6), proxy_key_hash("user:1", 6));
        ck_assert_uint_eq(mcr_ring_point_count(ra), n * 160);
        ck_assert_uint_eq(mcr_ring_point_count(rb), cases[t].ketama_points);
        int same = mcr_ring_point_count(ra) == mcr_ring_point_count(rb);
        for (size_t i = 0; same && i < n * 160; i++) {
            uint32_t va, sa, vb, sb;
            mcr_ring_point(ra, i, &va, &sa);
            mcr_ring_point(rb, i, &vb, &sb);
            ck_assert(va == vb && sa == sb);
        }
        mcr_ring_free(ra);
        mcr_ring_free(rb);
        mcr_config_free(a);
        mcr_config_free(b);
    }
}
END_TEST

/* Growth: a server added at the end takes keys only from the others,
 * about 1/(n+1) of them; a server set DOWN places as the proxy without it,
 * and the continuum diff counts the keys that move. */
START_TEST(ring_ketama_growth_and_down)
{
    tu_rng rng;
    tu_rng_init(&rng, 4600 + (uint64_t)_i);
    mcr_error err;
    int rounds = tu_cases(8);
    static char hosts[1001][32];
    static int ports[1001];

    for (int round = 0; round < rounds; round++) {
        size_t n = 2 + tu_below(&rng, round < 3 ? 10 : 998);
        tu_rng copy = rng;
        mcr_config *a = ring_ketama_config(&rng, n, hosts, ports);
        rng = copy;
        mcr_config *b = ring_ketama_config(&rng, n + 1, hosts, ports);
        mcr_ring *ra = ring_of(a), *rb = ring_of(b);
        mcr_snapshot *s1, *s3;
        ck_assert_int_eq(mcr_snapshot_new(a, 1, &s1, &err), MCR_OK);
        size_t down = tu_below(&rng, (uint32_t)n);
        mcr_server_desc d;
        ck_assert_int_eq(mcr_snapshot_server(s1, down, &d), MCR_OK);
        mcr_changes *ch = mcr_changes_new();
        ck_assert_int_eq(mcr_changes_set_state(ch, d.id, MCR_STATE_DOWN, &err), MCR_OK);
        ck_assert_int_eq(mcr_snapshot_apply(s1, ch, &s3, &err), MCR_OK);
        mcr_changes_free(ch);
        mcr_diff *diff;
        ck_assert_int_eq(mcr_diff_new(s1, s3, &diff, &err), MCR_OK);
        /* the proxy with the list without server `down` */
        char (*less)[32] = malloc(n * 32);
        int *lports = malloc(n * sizeof(int));
        ck_assert_ptr_nonnull(less);
        ck_assert_ptr_nonnull(lports);
        for (size_t i = 0, j = 0; i < n; i++)
            if (i != down) {
                memcpy(less[j], hosts[i], 32);
                lports[j++] = ports[i];
            }
        size_t total;
        cpoint *c = proxy_continuum(less, lports, n - 1, &total);

        unsigned moved = 0, gone = 0, keys = 2000;
        unsigned char key[KEY_MAX + 1];
        for (unsigned k = 0; k < keys; k++) {
            size_t len = random_key(&rng, key);
            uint32_t x = mcr_ring_locate(ra, key, len), y = mcr_ring_locate(rb, key, len);
            if (x != y) {
                ck_assert_msg(y == n, "a key moved from %u to %u, not to the new %zu", x, y, n);
                moved++;
            }
            uint32_t z = mcr_snapshot_locate(s3, key, len);
            uint32_t w = n - 1 == 1 ? 0 : proxy_get_server(c, (unsigned)total, proxy_key_hash(key, len));
            ck_assert_uint_eq(z, w < down ? w : w + 1);
            ck_assert_int_eq(mcr_diff_key_moved(diff, key, len), z != x);
            ck_assert(z == x || x == down); /* only the down server's keys move */
            gone += z != x;
        }
        double want = (double)keys / (double)(n + 1);
        ck_assert_msg((double)moved < want + 8.0 * sqrt(want) + 24, "%u of %u keys moved", moved,
                      keys);
        ck_assert_msg(fabs((double)gone / keys - mcr_diff_moved(diff)) < 0.08,
                      "%u of %u keys moved, the diff says %f", gone, keys, mcr_diff_moved(diff));
        free(c);
        free(less);
        free(lports);
        mcr_diff_free(diff);
        mcr_snapshot_unref(s1);
        mcr_snapshot_unref(s3);
        mcr_ring_free(ra);
        mcr_ring_free(rb);
        mcr_config_free(a);
        mcr_config_free(b);
    }
}
END_TEST

/* No weights: the client refuses any weight but 1, the mode any above 1,
 * in rings and snapshots. */
START_TEST(ring_ketama_refusals)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    mcr_ring *r = NULL;
    mcr_snapshot *s = NULL;
    ck_assert_int_eq(mcr_config_set_client(cfg, "memcached-proxy-ring-ketama", &err), MCR_OK);
    ck_assert_int_eq(mcr_config_add_servers(cfg, "10.0.0.1,10.0.0.2:11211:2", &err), MCR_OK);
    ck_assert_int_eq(mcr_ring_new(cfg, &r, &err), MCR_ERR_RANGE);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &s, &err), MCR_ERR_RANGE);
    ck_assert_int_eq(mcr_config_set_mode(cfg, MCR_MODE_MEMCACHED_PROXY_RING_KETAMA), MCR_OK);
    ck_assert_int_eq(mcr_ring_new(cfg, &r, &err), MCR_ERR_RANGE);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &s, &err), MCR_ERR_RANGE);
    mcr_config_free(cfg);
}
END_TEST

static Suite *proxies_suite(void)
{
    Suite *s = suite_create("proxies");
    TCase *tv = tcase_create("vectors");
    tcase_add_test(tv, jump_reference_vectors);
    tcase_add_test(tv, furc_mcrouter_vectors);
    tcase_add_test(tv, mcrouter_routing_keys);
    tcase_add_test(tv, spooky_folly_vectors);
    tcase_add_test(tv, wch3_mcrouter_vectors);
    tcase_add_test(tv, wch3_random_weights_list);
    tcase_add_test(tv, ch3_ring_vectors);
    tcase_add_test(tv, envoy_maglev_vectors);
    tcase_add_test(tv, envoy_ring_hash_vectors);
    suite_add_tcase(s, tv);

    TCase *tp = tcase_create("properties");
    tcase_set_timeout(tp, 600);
    tcase_add_loop_test(tp, random_growth, 0, (int)NPROXIES);
    tcase_add_loop_test(tp, random_balance, 0, (int)NPROXIES);
    tcase_add_loop_test(tp, random_snapshots, 0, (int)NPROXIES);
    tcase_add_loop_test(tp, refusals, 0, (int)NPROXIES);
    tcase_add_loop_test(tp, envoy_random_structure, 0, (int)NENVOYS);
    tcase_add_loop_test(tp, envoy_random_growth, 0, (int)NENVOYS);
    tcase_add_loop_test(tp, envoy_random_snapshots, 0, (int)NENVOYS);
    tcase_add_test(tp, envoy_refusals);

    tcase_add_loop_test(tp, ring_ketama_random, 0, 2);
    tcase_add_test(tp, ring_ketama_ties);
    tcase_add_test(tp, ring_ketama_is_libketama_but);
    tcase_add_loop_test(tp, ring_ketama_growth_and_down, 0, 2);
    tcase_add_test(tp, ring_ketama_refusals);
    suite_add_tcase(s, tp);

    TCase *tw = tcase_create("wch3"); /* mcrouter-wch3's properties */
    tcase_set_timeout(tw, 600);
    tcase_add_test(tw, wch3_random_reference);
    tcase_add_test(tw, wch3_weight_consistency);
    tcase_add_loop_test(tw, wch3_diff_model, 0, 3);
    tcase_add_test(tw, wch3_refusals);
    suite_add_tcase(s, tw);
    return s;
}

int main(void)
{
    return tu_run(proxies_suite());
}
