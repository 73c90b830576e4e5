/* SPDX-License-Identifier: BSD-3-Clause */
/* test_hash.c: the key hashes and MD5 against libhashkit 1.1.4, OpenSSL and published vectors. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libhashkit-1.0/hashkit.h>
#include <openssl/evp.h>

#include "placement/placement_internal.h"
#include "testutil.h"

/* Longest random string of the every-length sweeps, and strings per length. */
#define SWEEP_MAX 300
#define SWEEP_REPS 8
/* Room for the longest input plus an offset that misaligns it. */
#define BIG_LEN ((1u << 20) + 3)

/* Every hash that Debian's libhashkit computes (it has no hsieh). */
static const mcr_hash checked_by_libhashkit[] = {
    MCR_HASH_DEFAULT,  MCR_HASH_MD5,      MCR_HASH_CRC,    MCR_HASH_FNV1_64,
    MCR_HASH_FNV1A_64, MCR_HASH_FNV1_32,  MCR_HASH_FNV1A_32, MCR_HASH_MURMUR,
    MCR_HASH_JENKINS,  MCR_HASH_MURMUR3,
};
#define N_CHECKED (sizeof(checked_by_libhashkit) / sizeof(checked_by_libhashkit[0]))

/* Does Debian's libhashkit compute h? Not hsieh, not twemproxy's crc16 and
 * crc32a. */
static int in_libhashkit(mcr_hash h)
{
    for (size_t k = 0; k < N_CHECKED; k++)
        if (checked_by_libhashkit[k] == h)
            return 1;
    return 0;
}

static uint32_t hk(mcr_hash h, const void *data, size_t len)
{
    /* The enums share their numbering (the header promises a cast works). */
    return libhashkit_digest((const char *)data, len, (hashkit_hash_algorithm_t)h);
}

/* Fail with everything needed to reproduce; used inside hot loops instead of
 * ck_assert, which records a checkpoint on every passing call. */
static void expect_hash(const char *what, mcr_hash h, size_t len, uint32_t got,
                        uint32_t want)
{
    if (got != want)
        ck_abort_msg("%s: %s of %zu bytes: got %u, want %u (seed 0x%llx)", what,
                     mcr_hash_name(h), len, (unsigned)got, (unsigned)want,
                     (unsigned long long)tu_seed());
}

/* ==================================================================== */
/*  Published and recorded vectors                                       */
/* ==================================================================== */

/* The key list and expected values of libmemcached's tests/hash_results.h
 * (also used by twemproxy's src/test_all.c and other clients' tests). */
static const char *const words[25] = {
    "apple", "beat",  "carrot",    "daikon",    "eggplant",   "flower", "green",
    "hide",  "ick",   "jack",      "kick",      "lime",       "mushrooms",
    "nectarine",      "orange",    "peach",     "quant",      "ripen",
    "strawberry",     "tang",      "up",        "volumne",    "when",
    "yellow",         "zip",
};

static const uint32_t words_md5[25] = {
    3195025439u, 2556848621u, 3724893440u, 3332385401u, 245758794u,  2550894432u,
    121710495u,  3053817768u, 1250994555u, 1862072655u, 2631955953u, 2951528551u,
    1451250070u, 2820856945u, 2060845566u, 3646985608u, 2138080750u, 217675895u,
    2230934345u, 1234361223u, 3968582726u, 2455685270u, 1293568479u, 199067604u,
    2042482093u};
static const uint32_t words_crc[25] = {
    10542u, 22009u, 14526u, 19510u, 19432u, 10199u, 20634u, 9369u,  11511u,
    10362u, 7893u,  31289u, 11313u, 9354u,  7621u,  30628u, 15218u, 25967u,
    2695u,  9380u,  17300u, 28156u, 9192u,  20484u, 16925u};
static const uint32_t words_fnv1_64[25] = {
    473199127u,  4148981457u, 3971873300u, 3257986707u, 1722477987u, 2991193800u,
    4147007314u, 3633179701u, 1805162104u, 3503289120u, 3395702895u, 3325073042u,
    2345265314u, 3340346032u, 2722964135u, 1173398992u, 2815549194u, 2562818319u,
    224996066u,  2680194749u, 3035305390u, 246890365u,  2395624193u, 4145193337u,
    1801941682u};
static const uint32_t words_fnv1a_64[25] = {
    1488911807u, 2500855813u, 1510099634u, 1390325195u, 3647689787u, 3241528582u,
    1669328060u, 2604311949u, 734810122u,  1516407546u, 560948863u,  1767346780u,
    561034892u,  4156330026u, 3716417003u, 3475297030u, 1518272172u, 227211583u,
    3938128828u, 126112909u,  3043416448u, 3131561933u, 1328739897u, 2455664041u,
    2272238452u};
static const uint32_t words_fnv1_32[25] = {
    67176023u,   1190179409u, 2043204404u, 3221866419u, 2567703427u, 3787535528u,
    4147287986u, 3500475733u, 344481048u,  3865235296u, 2181839183u, 119581266u,
    510234242u,  4248244304u, 1362796839u, 103389328u,  1449620010u, 182962511u,
    3554262370u, 3206747549u, 1551306158u, 4127558461u, 1889140833u, 2774173721u,
    1180552018u};
static const uint32_t words_fnv1a_32[25] = {
    280767167u,  2421315013u, 3072375666u, 855001899u,  459261019u,  3521085446u,
    18738364u,   1625305005u, 2162232970u, 777243802u,  3323728671u, 132336572u,
    3654473228u, 260679466u,  1169454059u, 2698319462u, 1062177260u, 235516991u,
    2218399068u, 405302637u,  1128467232u, 3579622413u, 2138539289u, 96429129u,
    2877453236u};
static const uint32_t words_hsieh[25] = {
    3738850110u, 3636226060u, 3821074029u, 3489929160u, 3485772682u, 80540287u,
    1805464076u, 1895033657u, 409795758u,  979934958u,  3634096985u, 1284445480u,
    2265380744u, 707972988u,  353823508u,  1549198350u, 1327930172u, 9304163u,
    4220749037u, 2493964934u, 2777873870u, 2057831732u, 1510213931u, 2027828987u,
    3395453351u};
static const uint32_t words_murmur[25] = {
    4142305122u, 734504955u,  3802834688u, 4076891445u, 387802650u,  560515427u,
    3274673488u, 3150339524u, 1527441970u, 2728642900u, 3613992239u, 2938419259u,
    2321988328u, 1145154116u, 4038540960u, 2224541613u, 264013145u,  3995512858u,
    2400956718u, 2346666219u, 926327338u,  442757446u,  1770805201u, 560483147u,
    3902279934u};
static const uint32_t words_jenkins[25] = {
    1442444624u, 4253821186u, 1885058256u, 2120131735u, 3261968576u, 3515188778u,
    4232909173u, 4288625128u, 1812047395u, 3689182164u, 2502979932u, 1214050606u,
    2415988847u, 1494268927u, 1025545760u, 3920481083u, 4153263658u, 3824871822u,
    3072759809u, 798622255u,  3065432577u, 1453328165u, 2691550971u, 3408888387u,
    2629893356u};
/* No published list for these two was found; recorded from Debian's
 * libhashkit 1.1.4 (amd64). The first default value, "apple" 2297466611,
 * is also published in twemproxy's src/test_all.c. */
static const uint32_t words_default[25] = {
    2297466611u, 3902465932u, 469785835u,  1937308741u, 261917617u,  3785641677u,
    1439605128u, 1649152283u, 1493851484u, 1246520657u, 2221159044u, 1973511823u,
    384136800u,  214358653u,  2379473940u, 4269788650u, 2864377005u, 2638630052u,
    427683330u,  990491717u,  1747111141u, 792127364u,  2599214128u, 2553037199u,
    2509838425u};
static const uint32_t words_murmur3[25] = {
    1120212521u, 1448785489u, 4186307405u, 2686268514u, 444808887u,  221750260u,
    3074673162u, 1946933257u, 2826416675u, 2430719166u, 3200429559u, 297894347u,
    732888124u,  4050076964u, 3298336176u, 1336207361u, 810553576u,  3748182674u,
    3860119212u, 3439537197u, 3044240981u, 1464271804u, 3896193724u, 2915115798u,
    1702843840u};

/* twemproxy's two extra hashes. crc32a from Python's binascii.crc32 (the IEEE
 * CRC-32), an independent implementation; crc16 from a Python model of
 * nutcracker's recurrence (XMODEM table, 32-bit accumulator never cut), which
 * test_compat_twemproxy confirms against a live nutcracker; "123456789"
 * gives 0x869031c3 there. */
static const uint32_t words_crc16[25] = {
    3662830516u, 1367196201u, 1587355143u, 1408286071u, 2151303434u, 2245540512u,
    1282857017u, 2142183942u, 4260202062u, 2553814678u, 713474435u,  3017953903u,
    1074266364u, 3715722173u, 2387329708u, 1347872669u, 1689449354u, 2040418847u,
    206139219u,  3098611899u, 3049787u,    4183891588u, 2095274021u, 577624699u,
    3743076588u};
static const uint32_t words_crc32a[25] = {
    2838417488u, 3589867164u, 3099497678u, 3426096493u, 3421029968u, 2815934938u,
    3499814433u, 2761542443u, 754428169u,  2826627544u, 517332741u,  4198098741u,
    741427107u,  613084243u,  499495288u,  2007261434u, 3144826071u, 3849275350u,
    176645439u,  2762275602u, 1133833840u, 1845282447u, 602410524u,  3489983647u,
    1109235014u};

/* python-memcached's cmemcache_hash, and Java's String.hashCode over the
 * characters (plain and with Math.abs), from Python models of the clients'
 * code (zlib.crc32; 31 h + u over UTF-16 units). */
static const uint32_t words_cmemcache[25] = {
    10542u, 22009u, 14526u, 19510u, 19432u, 10199u,
    20634u, 9369u, 11511u, 10362u, 7893u, 31289u,
    11313u, 9354u, 7621u, 30628u, 15218u, 25967u,
    2695u, 9380u, 17300u, 28156u, 9192u, 20484u,
    16925u};
static const uint32_t words_hashcode[25] = {
    93029210u, 3019702u, 2927376771u, 2955731070u, 4204301702u, 3023338075u,
    98619139u, 3202370u, 104081u, 3254239u, 3291718u, 3321813u,
    376176411u, 4056271527u, 3286115886u, 106539633u, 107940163u, 108520322u,
    170385743u, 3552486u, 3739u, 632421794u, 3648314u, 3560727668u,
    120609u};
static const uint32_t words_hashcode_abs[25] = {
    93029210u, 3019702u, 1367590525u, 1339236226u, 90665594u, 1271629221u,
    98619139u, 3202370u, 104081u, 3254239u, 3291718u, 3321813u,
    376176411u, 238695769u, 1008851410u, 106539633u, 107940163u, 108520322u,
    170385743u, 3552486u, 3739u, 632421794u, 3648314u, 734239628u,
    120609u};

static const uint32_t *const words_values[MCR_HASH_COUNT] = {
    [MCR_HASH_DEFAULT] = words_default,   [MCR_HASH_MD5] = words_md5,
    [MCR_HASH_CRC] = words_crc,           [MCR_HASH_FNV1_64] = words_fnv1_64,
    [MCR_HASH_FNV1A_64] = words_fnv1a_64, [MCR_HASH_FNV1_32] = words_fnv1_32,
    [MCR_HASH_FNV1A_32] = words_fnv1a_32, [MCR_HASH_HSIEH] = words_hsieh,
    [MCR_HASH_MURMUR] = words_murmur,     [MCR_HASH_JENKINS] = words_jenkins,
    [MCR_HASH_MURMUR3] = words_murmur3,   [MCR_HASH_CRC16] = words_crc16,
    [MCR_HASH_CRC32A] = words_crc32a,     [MCR_HASH_CMEMCACHE] = words_cmemcache,
    [MCR_HASH_HASHCODE] = words_hashcode, [MCR_HASH_HASHCODE_ABS] = words_hashcode_abs,
};

/* Bytes >= 0x80 are where libhashkit's signed-char arithmetic shows. The
 * prefixes of length 1..9 of this string, recorded from libhashkit 1.1.4
 * (amd64); hsieh from mcroute, whose tail handling was checked against
 * nutcracker 0.5.0's placement of such keys. */
static const unsigned char high_bytes[9] = {0xc3, 0xa9, 0x80, 0xff, 0x7f,
                                            0x00, 0x41, 0xfe, 0x90};
static const uint32_t high_values[MCR_HASH_COUNT][9] = {
    [MCR_HASH_DEFAULT] = {2000696922u, 26298542u, 2375438420u, 57379187u, 4143723663u,
                          4224452373u, 3150140625u, 1960784547u, 1325889526u},
    [MCR_HASH_MD5] = {4118184663u, 2546851174u, 3906829652u, 2176934643u, 2885510670u,
                      551462120u, 711761102u, 2576557346u, 822953035u},
    [MCR_HASH_CRC] = {20591u, 3588u, 32469u, 1428u, 27231u, 8431u, 28447u, 6103u,
                      20089u},
    [MCR_HASH_FNV1_64] = {2046707740u, 3035330621u, 2481106983u, 3050220986u,
                          3996201841u, 3181013251u, 761294936u, 3844151926u,
                          2831157522u},
    [MCR_HASH_FNV1A_64] = {2046712530u, 3033280513u, 3372849203u, 1689411492u,
                           454615329u, 189172499u, 685685846u, 2374366840u,
                           2237584696u},
    [MCR_HASH_FNV1_32] = {4210270940u, 376872957u, 2789352647u, 2128616122u,
                          1959400113u, 2333830307u, 2670462168u, 2511626230u,
                          1594683346u},
    [MCR_HASH_FNV1A_32] = {3321057138u, 1023043777u, 1120738131u, 2199780036u,
                           590460001u, 3359569075u, 756783350u, 93204888u,
                           1227314840u},
    [MCR_HASH_HSIEH] = {1536849644u, 3203012475u, 3264167317u, 2241349937u,
                        1501063276u, 2204105730u, 4207164383u, 2554795213u,
                        1744151483u},
    [MCR_HASH_MURMUR] = {1709072801u, 2111574343u, 1833487537u, 1650880525u,
                         3589496900u, 1729032338u, 842572869u, 2301430259u,
                         310403997u},
    [MCR_HASH_JENKINS] = {299549032u, 934048990u, 610670938u, 616982032u, 840003696u,
                          3458589002u, 3047330350u, 3107523034u, 1838549038u},
    [MCR_HASH_MURMUR3] = {980348736u, 3038764589u, 1099788212u, 1008338451u,
                          1595954104u, 1355244800u, 2076232955u, 2176322755u,
                          3450864568u},
    /* Python models, as above */
    [MCR_HASH_CRC16] = {59695u, 15296452u, 3915860425u, 1732840989u, 1225683894u,
                        242481396u, 1945682674u, 4173465055u, 3255110684u},
    [MCR_HASH_CRC32A] = {3496967303u, 235179326u, 4275402123u, 2241105885u, 3932142022u,
                         2700072881u, 1864364614u, 400018369u, 3464059172u},
    /* the characters of these bytes: U+00C3 alone (a truncated sequence),
     * then U+00E9, and every other byte >= 0x80 its own value */
    [MCR_HASH_CMEMCACHE] = {20591u, 3588u, 32469u, 1428u, 27231u, 8431u, 28447u, 6103u, 20089u},
    [MCR_HASH_HASHCODE] = {195u, 233u, 7351u, 228136u, 7072343u, 219242633u, 2501554392u, 238775078u, 3107060266u},
    [MCR_HASH_HASHCODE_ABS] = {195u, 233u, 7351u, 228136u, 7072343u, 219242633u, 1793412904u, 238775078u, 1187907030u},
};

/* The empty key (libhashkit 1.1.4). jenkins gives lookup3's unmixed
 * 0xdeadbeef + 13; md5 the first word of MD5(""). */
static const uint32_t empty_values[MCR_HASH_COUNT] = {
    [MCR_HASH_DEFAULT] = 0u,          [MCR_HASH_MD5] = 3649838548u,
    [MCR_HASH_CRC] = 0u,              [MCR_HASH_FNV1_64] = 2216829733u,
    [MCR_HASH_FNV1A_64] = 2216829733u, [MCR_HASH_FNV1_32] = 2166136261u,
    [MCR_HASH_FNV1A_32] = 2166136261u, [MCR_HASH_HSIEH] = 0u,
    [MCR_HASH_MURMUR] = 0u,           [MCR_HASH_JENKINS] = 3735928572u,
    [MCR_HASH_MURMUR3] = 0u,          [MCR_HASH_CRC16] = 0u,
    [MCR_HASH_CRC32A] = 0u,           [MCR_HASH_CMEMCACHE] = 1u,
    [MCR_HASH_HASHCODE] = 0u,         [MCR_HASH_HASHCODE_ABS] = 0u,
};

/* ==================================================================== */
/*  Against libhashkit                                                   */
/* ==================================================================== */

/* Loop index i: checked_by_libhashkit[i]. Random bytes of every value, every
 * length 0..SWEEP_MAX, at every alignment modulo 8. */
START_TEST(libhashkit_every_length)
{
    mcr_hash h = checked_by_libhashkit[_i];
    unsigned char buf[SWEEP_MAX + 8];
    tu_rng r;

    tu_rng_init(&r, 100 + (uint64_t)h);
    for (size_t len = 0; len <= SWEEP_MAX; len++) {
        for (int rep = 0; rep < SWEEP_REPS; rep++) {
            unsigned char *p = buf + tu_below(&r, 8);
            tu_bytes(&r, p, len);
            expect_hash("vs libhashkit", h, len, mcr_hash_key(h, p, len), hk(h, p, len));
        }
    }
}
END_TEST

/* Long inputs: many blocks, and lengths past 16 bits. */
START_TEST(libhashkit_long)
{
    static const size_t lens[] = {1000, 4096, 4099, 65536, 65537, BIG_LEN - 7};
    unsigned char *buf = malloc(BIG_LEN);
    tu_rng r;

    ck_assert_ptr_nonnull(buf);
    tu_rng_init(&r, 200);
    tu_bytes(&r, buf, BIG_LEN);
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        for (size_t k = 0; k < N_CHECKED; k++) {
            mcr_hash h = checked_by_libhashkit[k];
            const unsigned char *p = buf + (i & 3); /* vary the alignment */
            expect_hash("long vs libhashkit", h, lens[i],
                        mcr_hash_key(h, p, lens[i]), hk(h, p, lens[i]));
        }
    }
    free(buf);
}
END_TEST

/* Printable keys as applications use them, lengths 1..250 (memcached's
 * limit). Cheap extra coverage of the ASCII-only path. */
START_TEST(libhashkit_printable_keys)
{
    char key[251];
    tu_rng r;

    tu_rng_init(&r, 300);
    for (int i = 0; i < 5000; i++) {
        size_t len = tu_key(&r, key, 250);
        for (size_t k = 0; k < N_CHECKED; k++) {
            mcr_hash h = checked_by_libhashkit[k];
            expect_hash("key vs libhashkit", h, len, mcr_hash_key(h, key, len),
                        hk(h, key, len));
        }
    }
}
END_TEST

/* Debian's libhashkit is built without hsieh and answers 1 for any key. If
 * this fails, libhashkit gained hsieh: compare it with ours directly. */
START_TEST(libhashkit_has_no_hsieh)
{
    unsigned char buf[SWEEP_MAX];
    tu_rng r;

    tu_rng_init(&r, 400);
    ck_assert(!libhashkit_has_algorithm(HASHKIT_HASH_HSIEH));
    for (size_t len = 0; len <= SWEEP_MAX; len++) {
        tu_bytes(&r, buf, len);
        if (hk(MCR_HASH_HSIEH, buf, len) != 1)
            ck_abort_msg("libhashkit hsieh of %zu bytes is %u, not 1: it has hsieh now",
                         len, (unsigned)hk(MCR_HASH_HSIEH, buf, len));
    }
}
END_TEST

/* ==================================================================== */
/*  Fixed vectors                                                        */
/* ==================================================================== */

/* Loop index: the hash. Ours must give the literals; so must libhashkit
 * (except hsieh), or the reference itself changed. */
START_TEST(fixed_words)
{
    mcr_hash h = (mcr_hash)_i;

    for (size_t i = 0; i < 25; i++) {
        size_t len = strlen(words[i]);
        ck_assert_msg(mcr_hash_key(h, words[i], len) == words_values[h][i],
                      "%s(\"%s\") = %u, want %u", mcr_hash_name(h), words[i],
                      (unsigned)mcr_hash_key(h, words[i], len),
                      (unsigned)words_values[h][i]);
        if (in_libhashkit(h))
            ck_assert_msg(hk(h, words[i], len) == words_values[h][i],
                          "libhashkit changed: %s(\"%s\") = %u, want %u",
                          mcr_hash_name(h), words[i], (unsigned)hk(h, words[i], len),
                          (unsigned)words_values[h][i]);
    }
}
END_TEST

START_TEST(fixed_high_bytes)
{
    mcr_hash h = (mcr_hash)_i;

    for (size_t len = 1; len <= sizeof high_bytes; len++) {
        ck_assert_msg(mcr_hash_key(h, high_bytes, len) == high_values[h][len - 1],
                      "%s(high bytes, %zu) = %u, want %u", mcr_hash_name(h), len,
                      (unsigned)mcr_hash_key(h, high_bytes, len),
                      (unsigned)high_values[h][len - 1]);
        if (in_libhashkit(h))
            ck_assert_msg(hk(h, high_bytes, len) == high_values[h][len - 1],
                          "libhashkit changed: %s(high bytes, %zu) = %u",
                          mcr_hash_name(h), len, (unsigned)hk(h, high_bytes, len));
    }
}
END_TEST

/* The empty key, given as NULL and as a real pointer. */
START_TEST(fixed_empty)
{
    mcr_hash h = (mcr_hash)_i;

    ck_assert_uint_eq(mcr_hash_key(h, NULL, 0), empty_values[h]);
    ck_assert_uint_eq(mcr_hash_key(h, "", 0), empty_values[h]);
    if (in_libhashkit(h))
        ck_assert_uint_eq(hk(h, "", 0), empty_values[h]);
}
END_TEST

/* ==================================================================== */
/*  hsieh                                                                */
/* ==================================================================== */

/*
 * With no hsieh in libhashkit, ours is held to:
 *  - the 25 published libmemcached values (fixed_words above);
 *  - folly's published values for Hsieh's original SuperFastHash
 *    (folly/hash/test/HsiehHashTest.cpp), which starts its running hash at
 *    the length where libmemcached starts at 0;
 *  - this re-implementation, written from Hsieh's description, which takes
 *    the start value as a parameter so both published sets can validate it.
 * Limitation: every published vector is ASCII. Which tail bytes enter
 * sign-extended (the third of three: yes; a lone last byte: no) was measured
 * on nutcracker 0.5.0, not read from a published vector; the reference below
 * encodes that measurement, and fixed_high_bytes pins the result.
 */
static uint32_t ref_u16(const unsigned char *p)
{
    return (uint32_t)p[0] + ((uint32_t)p[1] << 8);
}

static uint32_t ref_hsieh(const unsigned char *data, size_t len, uint32_t start)
{
    uint32_t hash = start;
    size_t i = 0;

    if (len == 0)
        return 0;
    /* Each 4-byte group: two 16-bit little-endian halves. */
    while (len - i >= 4) {
        uint32_t lo = ref_u16(data + i), hi = ref_u16(data + i + 2);
        hash += lo;
        hash = (hash << 16) ^ ((hi << 11) ^ hash);
        hash += hash >> 11;
        i += 4;
    }
    if (len - i == 3) {
        int32_t third = (signed char)data[i + 2];
        hash += ref_u16(data + i);
        hash ^= hash << 16;
        hash ^= (uint32_t)third << 18;
        hash += hash >> 11;
    } else if (len - i == 2) {
        hash += ref_u16(data + i);
        hash ^= hash << 11;
        hash += hash >> 17;
    } else if (len - i == 1) {
        hash += data[i];
        hash ^= hash << 10;
        hash += hash >> 1;
    }
    hash ^= hash << 3;
    hash += hash >> 5;
    hash ^= hash << 4;
    hash += hash >> 17;
    hash ^= hash << 25;
    hash += hash >> 6;
    return hash;
}

START_TEST(hsieh_reference_is_sound)
{
    static const struct {
        const char *s;
        uint32_t v;
    } folly[] = {
        {"hello, world!", 2918802987u},
        {"monkeys! m0nk3yz! ev3ry \\/\\/here~~~~", 47373213u},
        {"", 0u},
    };

    for (size_t i = 0; i < sizeof folly / sizeof folly[0]; i++) {
        size_t len = strlen(folly[i].s);
        ck_assert_uint_eq(ref_hsieh((const unsigned char *)folly[i].s, len,
                                    (uint32_t)len),
                          folly[i].v);
    }
    for (size_t i = 0; i < 25; i++)
        ck_assert_uint_eq(ref_hsieh((const unsigned char *)words[i], strlen(words[i]), 0),
                          words_hsieh[i]);
}
END_TEST

START_TEST(hsieh_vs_reference)
{
    unsigned char buf[SWEEP_MAX + 8];
    tu_rng r;

    tu_rng_init(&r, 500);
    for (size_t len = 0; len <= SWEEP_MAX; len++) {
        for (int rep = 0; rep < SWEEP_REPS; rep++) {
            unsigned char *p = buf + tu_below(&r, 8);
            tu_bytes(&r, p, len);
            expect_hash("vs reference", MCR_HASH_HSIEH, len,
                        mcr_hash_key(MCR_HASH_HSIEH, p, len), ref_hsieh(p, len, 0));
        }
    }
}
END_TEST

/* ==================================================================== */
/*  MD5                                                                  */
/* ==================================================================== */

static void openssl_md5(const void *data, size_t len, unsigned char out[16])
{
    unsigned int n = 0;

    /* EVP_Digest wants a valid pointer even for no bytes. */
    ck_assert_int_eq(EVP_Digest(len ? data : "", len, out, &n, EVP_md5(), NULL), 1);
    ck_assert_uint_eq(n, 16);
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

/* All three entry points against OpenSSL for one input. */
static void check_md5(const unsigned char *p, size_t len)
{
    unsigned char want[16], got[16];
    uint32_t words4[4];

    openssl_md5(p, len, want);
    mcr_md5(p, len, got);
    if (memcmp(got, want, 16) != 0)
        ck_abort_msg("mcr_md5 of %zu bytes differs from OpenSSL", len);
    mcr__md5_words(p, len, words4);
    for (int i = 0; i < 4; i++)
        if (words4[i] != le32(want + 4 * i))
            ck_abort_msg("mcr__md5_words of %zu bytes: word %d is %08x, want %08x", len,
                         i, (unsigned)words4[i], (unsigned)le32(want + 4 * i));
    if (mcr__md5_u32(p, len) != le32(want))
        ck_abort_msg("mcr__md5_u32 of %zu bytes: %08x, want %08x", len,
                     (unsigned)mcr__md5_u32(p, len), (unsigned)le32(want));
}

START_TEST(md5_every_length)
{
    unsigned char buf[SWEEP_MAX + 8];
    tu_rng r;

    tu_rng_init(&r, 600);
    for (size_t len = 0; len <= SWEEP_MAX; len++) {
        for (int rep = 0; rep < SWEEP_REPS; rep++) {
            unsigned char *p = buf + tu_below(&r, 8);
            tu_bytes(&r, p, len);
            check_md5(p, len);
        }
    }
}
END_TEST

/* Where the padding spills into a second block (56), where a block is
 * exactly full (64), and the same one and two blocks later. */
START_TEST(md5_block_boundaries)
{
    unsigned char *buf = malloc(BIG_LEN);
    tu_rng r;

    ck_assert_ptr_nonnull(buf);
    tu_rng_init(&r, 700);
    tu_bytes(&r, buf, BIG_LEN);
    for (size_t base = 0; base <= 4 * 64; base += 64) {
        static const size_t offs[] = {54, 55, 56, 57, 62, 63, 64, 65};
        for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++)
            for (size_t align = 0; align < 4; align++)
                check_md5(buf + align, base + offs[i]);
    }
    check_md5(buf, 4096);
    check_md5(buf + 1, 65537);
    check_md5(buf + 3, BIG_LEN - 3);
    free(buf);
}
END_TEST

/* RFC 1321's test suite (appendix A.5), and ketama points published in
 * twemproxy's src/test_all.c. */
START_TEST(md5_published)
{
    static const struct {
        const char *s;
        const char *hex;
    } rfc[] = {
        {"", "d41d8cd98f00b204e9800998ecf8427e"},
        {"a", "0cc175b9c0f1b6a831c399e269772661"},
        {"abc", "900150983cd24fb0d6963f7d28e17f72"},
        {"message digest", "f96b697d7cb7938d525a2f31aaf161d0"},
        {"abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"},
        {"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
         "d174ab98d277d9f5a5611c2c9f419d9f"},
        {"1234567890123456789012345678901234567890"
         "1234567890123456789012345678901234567890",
         "57edf4a22be3c955ac49da2e2107b67a"},
    };
    uint32_t w[4];

    for (size_t i = 0; i < sizeof rfc / sizeof rfc[0]; i++) {
        unsigned char d[16];
        char hex[33];
        mcr_md5(rfc[i].s, strlen(rfc[i].s), d);
        for (int j = 0; j < 16; j++)
            snprintf(hex + 2 * j, 3, "%02x", d[j]);
        ck_assert_str_eq(hex, rfc[i].hex);
    }
    mcr__md5_words("server1-8", 9, w);
    ck_assert_uint_eq(w[0], 3853726576u);
    ck_assert_uint_eq(w[3], 2667054752u);
}
END_TEST

/* dalli's SHA-1 word: the first 4 bytes of the digest, big-endian, against
 * OpenSSL's SHA-1, every length 0..300 (one and two final blocks, every
 * padding case) of random bytes. */
START_TEST(sha1_vs_openssl)
{
    tu_rng r;
    unsigned char buf[300], md[EVP_MAX_MD_SIZE];
    unsigned int mdlen;

    tu_rng_init(&r, 0x736861);
    for (size_t len = 0; len <= sizeof buf; len++) {
        tu_bytes(&r, buf, len);
        ck_assert_int_eq(EVP_Digest(buf, len, md, &mdlen, EVP_sha1(), NULL), 1);
        uint32_t want = (uint32_t)md[0] << 24 | (uint32_t)md[1] << 16 | (uint32_t)md[2] << 8 | md[3];
        ck_assert_msg(mcr__sha1_u32be(buf, len) == want, "SHA-1 of %zu bytes: %08x, want %08x",
                      len, (unsigned)mcr__sha1_u32be(buf, len), (unsigned)want);
    }
    /* FIPS 180 "abc": a9993e36... */
    ck_assert_uint_eq(mcr__sha1_u32be("abc", 3), 0xa9993e36u);
}
END_TEST

/* The characters the hashes of Java and JavaScript clients read: valid
 * UTF-8 decoded, every other byte the character of its value. */
START_TEST(utf8_characters)
{
    static const struct {
        const char *bytes;
        size_t len;
        uint32_t cp[4];
        size_t n;
    } cases[] = {
        {"A", 1, {0x41}, 1},
        {"\xc3\xa9", 2, {0xe9}, 1},
        {"\xe2\x82\xac", 3, {0x20ac}, 1},
        {"\xf0\x9f\x98\x80", 4, {0x1f600}, 1},
        {"\xc0\x80", 2, {0xc0, 0x80}, 2},                /* overlong */
        {"\xed\xa0\x80", 3, {0xed, 0xa0, 0x80}, 3},      /* a surrogate */
        {"\xf4\x90\x80\x80", 4, {0xf4, 0x90, 0x80, 0x80}, 4}, /* above U+10FFFF */
        {"\xe2\x82", 2, {0xe2, 0x82}, 2},                /* truncated */
        {"\xe2\x41", 2, {0xe2, 0x41}, 2},                /* not a continuation */
        {"\xff", 1, {0xff}, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const unsigned char *p = (const unsigned char *)cases[c].bytes;
        size_t i = 0, k = 0;
        while (i < cases[c].len) {
            uint32_t cp = mcr__utf8_next(p, cases[c].len, &i);
            ck_assert_msg(k < cases[c].n && cp == cases[c].cp[k], "case %zu char %zu: U+%04X",
                          c, k, (unsigned)cp);
            k++;
        }
        ck_assert_uint_eq(k, cases[c].n);
    }
    /* a supplementary character is a surrogate pair to String.hashCode:
     * "\U0001F600" is "\uD83D\uDE00", 31 * 0xD83D + 0xDE00 */
    ck_assert_uint_eq(mcr_hash_key(MCR_HASH_HASHCODE, "\xf0\x9f\x98\x80", 4),
                      31u * 0xd83du + 0xde00u);
    /* memjs: Math.abs of the signed value; "123456789" hashes to
     * 2427588661, -1867378635 as an int */
    ck_assert_uint_eq(mcr_hash_key(MCR_HASH_HASHCODE, "123456789", 9), 2427588661u);
    ck_assert_uint_eq(mcr_hash_key(MCR_HASH_HASHCODE_ABS, "123456789", 9), 1867378635u);
}
END_TEST

START_TEST(md5_null_empty)
{
    unsigned char d[16], want[16];
    uint32_t w[4];

    openssl_md5("", 0, want);
    mcr_md5(NULL, 0, d);
    ck_assert_mem_eq(d, want, 16);
    mcr__md5_words(NULL, 0, w);
    ck_assert_uint_eq(w[0], le32(want));
    ck_assert_uint_eq(mcr__md5_u32(NULL, 0), le32(want));
}
END_TEST

/* ==================================================================== */
/*  Names and arguments                                                  */
/* ==================================================================== */

START_TEST(names_round_trip)
{
    for (int i = 0; i < MCR_HASH_COUNT; i++) {
        const char *name = mcr_hash_name((mcr_hash)i);
        mcr_hash h = MCR_HASH_COUNT;

        ck_assert_ptr_nonnull(name);
        for (const char *c = name; *c; c++)
            ck_assert_msg(!(*c >= 'A' && *c <= 'Z'), "%s is not lower-case", name);
        ck_assert_int_eq(mcr_hash_from_name(name, &h), MCR_OK);
        ck_assert_int_eq(h, i);
        for (int j = 0; j < i; j++)
            ck_assert_str_ne(name, mcr_hash_name((mcr_hash)j));
    }
    ck_assert_str_eq(mcr_hash_name(MCR_HASH_DEFAULT), "default");
    ck_assert_str_eq(mcr_hash_name(MCR_HASH_FNV1A_64), "fnv1a_64");
    ck_assert_str_eq(mcr_hash_name(MCR_HASH_MURMUR3), "murmur3");
    ck_assert_ptr_null(mcr_hash_name(MCR_HASH_COUNT));
    ck_assert_ptr_null(mcr_hash_name((mcr_hash)-1));
    ck_assert_ptr_null(mcr_hash_name((mcr_hash)1000));
}
END_TEST

START_TEST(names_case_and_alias)
{
    static const struct {
        const char *name;
        mcr_hash h;
    } ok[] = {
        {"MD5", MCR_HASH_MD5},           {"Md5", MCR_HASH_MD5},
        {"CRC", MCR_HASH_CRC},           {"FNV1A_32", MCR_HASH_FNV1A_32},
        {"Fnv1_64", MCR_HASH_FNV1_64},   {"HSIEH", MCR_HASH_HSIEH},
        {"Murmur", MCR_HASH_MURMUR},     {"MURMUR3", MCR_HASH_MURMUR3},
        {"JENKINS", MCR_HASH_JENKINS},   {"DEFAULT", MCR_HASH_DEFAULT},
        {"one_at_a_time", MCR_HASH_DEFAULT}, {"ONE_AT_A_TIME", MCR_HASH_DEFAULT},
        {"One_At_A_Time", MCR_HASH_DEFAULT},
    };

    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        mcr_hash h = MCR_HASH_COUNT;
        ck_assert_msg(mcr_hash_from_name(ok[i].name, &h) == MCR_OK, "%s", ok[i].name);
        ck_assert_int_eq(h, ok[i].h);
    }
}
END_TEST

START_TEST(names_errors)
{
    static const char *const bad[] = {
        "", "md", "md55", "md5 ", " md5", "sha1", "fnv1a", "murmur2", "one-at-a-time",
        "crc32", "default\n", "hsieh\xc3\xa9",
    };
    mcr_hash h = MCR_HASH_JENKINS;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(mcr_hash_from_name(bad[i], &h) == MCR_ERR_UNKNOWN, "\"%s\"",
                      bad[i]);
        ck_assert_int_eq(h, MCR_HASH_JENKINS); /* untouched */
    }
    ck_assert_int_eq(mcr_hash_from_name(NULL, &h), MCR_ERR_INVALID);
    ck_assert_int_eq(h, MCR_HASH_JENKINS);
    ck_assert_int_eq(mcr_hash_from_name("md5", NULL), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_hash_from_name(NULL, NULL), MCR_ERR_INVALID);
}
END_TEST

START_TEST(unknown_hash_is_zero)
{
    ck_assert_uint_eq(mcr_hash_key(MCR_HASH_COUNT, "key", 3), 0);
    ck_assert_uint_eq(mcr_hash_key((mcr_hash)-1, "key", 3), 0);
    ck_assert_uint_eq(mcr_hash_key((mcr_hash)12345, NULL, 0), 0);
}
END_TEST

/* mcr_hash_key(MD5) is the shortcut, mcr__md5_u32; both must agree. */
START_TEST(md5_key_hash_is_u32)
{
    char key[251];
    tu_rng r;

    tu_rng_init(&r, 800);
    for (int i = 0; i < 2000; i++) {
        size_t len = tu_key(&r, key, 250);
        ck_assert_uint_eq(mcr_hash_key(MCR_HASH_MD5, key, len), mcr__md5_u32(key, len));
    }
}
END_TEST

/* The SIMD many-keys MD5 equals the scalar one, in every lane width the CPU
 * has (16, 8, scalar), for group sizes that leave partial groups, and with
 * keys of 56+ bytes (two blocks) mixed in. */
START_TEST(crc16_check_value)
{
    /* nutcracker 0.5.0 gives 0x869031c3 for the CRC catalogue's check string;
     * its low half 0x31c3 is CRC-16/XMODEM's check value */
    ck_assert_uint_eq(mcr_hash_key(MCR_HASH_CRC16, "123456789", 9), 0x869031c3u);
}
END_TEST

START_TEST(md5_many_equals_scalar)
{
    enum { N = 1000 };
    static unsigned char buf[N][130];
    const void *keys[N];
    size_t lens[N];
    uint32_t out[N];
    tu_rng r;
    int forced[] = {16, 8, 0};

    tu_rng_init(&r, 900);
    for (int i = 0; i < N; i++) {
        lens[i] = tu_below(&r, 10) == 0 ? tu_below(&r, 130) : tu_below(&r, 56);
        tu_bytes(&r, buf[i], lens[i]);
        keys[i] = buf[i];
    }
    for (int f = 0; f < 3; f++) {
        int lanes = mcr__md5_force_lanes(forced[f]);
        ck_assert_int_le(lanes, forced[f]);
        size_t sizes[] = {N, 1, 3, 4, 7, 15, 17, 33, 100};
        for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
            memset(out, 0, sizeof(out));
            mcr__md5_u32_many(keys, lens, sizes[z], out);
            for (size_t i = 0; i < sizes[z]; i++)
                ck_assert_msg(out[i] == mcr__md5_u32(keys[i], lens[i]),
                              "lanes %d, n %zu, key %zu (len %zu)", lanes, sizes[z], i, lens[i]);
        }
    }
    mcr__md5_force_lanes(-1);
}
END_TEST

/* mcr__hash_many (lockstep and SIMD paths) equals the one-key hash for every
 * hash, with group sizes that leave remainders and keys of unequal lengths,
 * high bytes included. */
START_TEST(hash_many_equals_one)
{
    enum { N = 203 };
    static unsigned char buf[N][300];
    const void *keys[N];
    size_t lens[N];
    uint32_t out[N];
    tu_rng r;

    tu_rng_init(&r, 901 + (uint64_t)_i);
    for (int i = 0; i < N; i++) {
        lens[i] = tu_below(&r, 8) == 0 ? tu_below(&r, 300) : tu_below(&r, 48);
        tu_bytes(&r, buf[i], lens[i]);
        keys[i] = buf[i];
    }
    for (size_t n = 0; n <= 9; n++) {
        size_t cnt = n == 9 ? N : n;
        mcr__hash_many((mcr_hash)_i, keys, lens, cnt, out);
        for (size_t i = 0; i < cnt; i++)
            ck_assert_msg(out[i] == mcr_hash_key((mcr_hash)_i, keys[i], lens[i]),
                          "hash %s, n %zu, key %zu (len %zu)", mcr_hash_name((mcr_hash)_i), cnt, i,
                          lens[i]);
    }
}
END_TEST

static Suite *hash_suite(void)
{
    Suite *s = suite_create("hash");
    TCase *tc;

    tc = tcase_create("libhashkit");
    tcase_set_timeout(tc, 600); /* valgrind and sanitizer runs are slow */
    tcase_add_loop_test(tc, libhashkit_every_length, 0, (int)N_CHECKED);
    tcase_add_test(tc, libhashkit_long);
    tcase_add_test(tc, libhashkit_printable_keys);
    tcase_add_test(tc, libhashkit_has_no_hsieh);
    suite_add_tcase(s, tc);

    tc = tcase_create("fixed");
    tcase_add_loop_test(tc, fixed_words, 0, MCR_HASH_COUNT);
    tcase_add_loop_test(tc, fixed_high_bytes, 0, MCR_HASH_COUNT);
    tcase_add_loop_test(tc, fixed_empty, 0, MCR_HASH_COUNT);
    suite_add_tcase(s, tc);

    tc = tcase_create("hsieh");
    tcase_add_test(tc, hsieh_reference_is_sound);
    tcase_add_test(tc, hsieh_vs_reference);
    suite_add_tcase(s, tc);

    tc = tcase_create("md5");
    tcase_set_timeout(tc, 600); /* valgrind and sanitizer runs are slow */
    tcase_add_test(tc, md5_every_length);
    tcase_add_test(tc, md5_block_boundaries);
    tcase_add_test(tc, md5_published);
    tcase_add_test(tc, md5_null_empty);
    tcase_add_test(tc, sha1_vs_openssl);
    tcase_add_test(tc, utf8_characters);
    tcase_add_test(tc, md5_key_hash_is_u32);
    tcase_add_test(tc, md5_many_equals_scalar);
    tcase_add_test(tc, crc16_check_value);
    tcase_add_loop_test(tc, hash_many_equals_one, 0, MCR_HASH_COUNT);
    suite_add_tcase(s, tc);

    tc = tcase_create("api");
    tcase_add_test(tc, names_round_trip);
    tcase_add_test(tc, names_case_and_alias);
    tcase_add_test(tc, names_errors);
    tcase_add_test(tc, unknown_hash_is_zero);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(hash_suite());
}
