/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_modes.c: lookup cost, build time and memory of every native placement mode at 10, 120, 1,000 and 10,000 servers, on the same keys, each mode's answers checked first. */
#include <inttypes.h>
#include <malloc.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchutil.h"
#include "mcroute.h"
#include "mcroute_snapshot.h"

/*
 * What is timed, and why it is comparable across modes:
 *
 *  - One lookup is mcr_snapshot_locate(): key bytes in, snapshot server
 *    index out, hashing included (md5 for the continuum modes, jump and
 *    rendezvous; CRC-16 for slots), as an application calls it through the
 *    router. "bounded" is timed twice: its plain lookup (the owner, as
 *    stable-ketama) and mcr_snapshot_locate_bounded() with every server at
 *    the same load, below its capacity (the walk stops at the owner: the
 *    cost of the check itself; a server at capacity adds one step per
 *    server skipped).
 *  - Every mode gets the same servers (weight 1, ids host:port) and the same
 *    keys at each size. A pass is over as many keys as fit in the time
 *    budget (a pass of rendezvous at 10,000 servers would otherwise take
 *    seconds), the reported figure is the median pass, in ns per lookup.
 *  - Before timing, each mode's answers are checked against what its
 *    documentation promises, by code written here from the papers and the
 *    header, not by the library's own functions: jump against Lamping and
 *    Veach's loop on the documented 64-bit key; rendezvous against the
 *    highest -w / ln(u) score (10 to 1,000 servers); maglev and slots
 *    against their tables (entry hash % M, the owner of the key's slot),
 *    maglev's table for its balance (floor or ceil of M / N entries each);
 *    the continuum modes against mcr_ring_find of the key hash; bounded at
 *    zero load against the owner; mcr_ring_locate_many against
 *    mcr_snapshot_locate. Every timed pass must reproduce the checksum of
 *    the check. A mismatch is a FAIL line and exit status 1; speed never
 *    is.
 *  - Build: mcr_snapshot_new() from a prepared config, median of a few;
 *    memory: the heap growth across the first build (glibc mallinfo2),
 *    while the snapshot lives.
 */


#define KEYS_FULL 65536
#define KEYS_QUICK 8192
#define KEY_LEN_MAX 40
#define KEY_SEED 0x6d6f646573212121ull
/* Rendezvous is checked by brute force up to this many servers, on this
 * many keys. */
#define RDV_CHECK_SERVERS 1000
#define RDV_CHECK_KEYS 2000

static const unsigned sizes[] = {10, 120, 1000, 10000};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* The modes, and bounded's walk as a mode of its own. */
typedef struct bench_mode {
    const char *name;
    mcr_mode mode;
    bool walk; /* mcr_snapshot_locate_bounded */
} bench_mode;

static const bench_mode modes[] = {
    {"ketama", MCR_MODE_KETAMA, false},
    {"stable-ketama", MCR_MODE_STABLE_KETAMA, false},
    {"jump", MCR_MODE_JUMP, false},
    {"rendezvous", MCR_MODE_RENDEZVOUS, false},
    {"maglev", MCR_MODE_MAGLEV, false},
    {"slots", MCR_MODE_SLOTS, false},
    {"bounded", MCR_MODE_BOUNDED, false},
    {"bounded-walk", MCR_MODE_BOUNDED, true},
};
#define NMODES (sizeof(modes) / sizeof(modes[0]))

typedef struct settings {
    bool quick;
    unsigned reps;         /* timed passes per case */
    unsigned build_reps;
    double pass_budget_ns; /* work per pass */
    size_t nkeys;
} settings;

typedef struct keyset {
    size_t n;
    char *bytes;
    const void **key;
    size_t *len;
} keyset;

typedef struct cell {
    double ns, build_us, memory_kib;
    bool ok;
} cell;

static settings opt;
static int failures;
static volatile uint64_t g_sink;
static cell results[NMODES][NSIZES];

const char *bench_program = "bench_modes";

static void fail(const char *mode, unsigned n, const char *what, size_t key)
{
    printf("FAIL %s_%u: %s (key %zu)\n", mode, n, what, key);
    fflush(stdout);
    failures++;
}

/* ------------------------------------------------------------ inputs */

/* Key shapes of memcached deployments: ids, sessions, composite keys. */
static void keyset_init(keyset *ks, size_t n)
{
    uint64_t rng = KEY_SEED;
    ks->n = n;
    ks->bytes = bench_xmalloc(n * (KEY_LEN_MAX + 1));
    ks->key = bench_xmalloc(n * sizeof(*ks->key));
    ks->len = bench_xmalloc(n * sizeof(*ks->len));
    for (size_t i = 0; i < n; i++) {
        char *out = ks->bytes + i * (KEY_LEN_MAX + 1);
        uint64_t r = bench_next_rand(&rng), s = bench_next_rand(&rng);
        int len;
        switch (r % 4) {
        case 0: len = snprintf(out, KEY_LEN_MAX + 1, "user:%08u", (unsigned)(s % 100000000u)); break;
        case 1: len = snprintf(out, KEY_LEN_MAX + 1, "sess:%016" PRIx64, s); break;
        case 2:
            len = snprintf(out, KEY_LEN_MAX + 1, "obj:%u:rev:%u", (unsigned)(s % 1000000u),
                           (unsigned)((s >> 32) % 100u));
            break;
        default:
            len = snprintf(out, KEY_LEN_MAX + 1, "/page/%u/fragment/%u", (unsigned)(s % 50000u),
                           (unsigned)((s >> 40) % 1000u));
            break;
        }
        ks->key[i] = out;
        ks->len[i] = (size_t)len;
    }
}

static void keyset_free(keyset *ks)
{
    free(ks->bytes);
    free(ks->key);
    free(ks->len);
}

static mcr_config *make_config(mcr_mode mode, unsigned n)
{
    mcr_config *cfg = mcr_config_new();
    if (cfg == NULL) {
        fprintf(stderr, "bench_modes: out of memory\n");
        exit(1);
    }
    mcr_config_set_mode(cfg, mode);
    mcr_config_set_hash(cfg, MCR_HASH_MD5);
    for (unsigned i = 1; i <= n; i++) {
        char host[32];
        snprintf(host, sizeof(host), "10.%u.%u.%u", (i >> 16) & 255, (i >> 8) & 255, i & 255);
        if (mcr_config_add_server(cfg, host, MCR_DEFAULT_PORT, 1, NULL) != MCR_OK) {
            fprintf(stderr, "bench_modes: cannot add %s\n", host);
            exit(1);
        }
    }
    return cfg;
}

static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* ------------------------------------------------------------ independent models */

/* SplitMix64's first output for a seed (Steele, Lea and Flood, 2014). */
static uint64_t splitmix_first(uint64_t seed)
{
    uint64_t z = seed + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Lamping and Veach's jump consistent hash, from the paper's listing. */
static int32_t jump_hash(uint64_t key, int32_t buckets)
{
    int64_t b = -1, j = 0;
    while (j < buckets) {
        b = j;
        key = key * 2862933555777941757ull + 1;
        j = (int64_t)((double)(b + 1) * ((double)(1ll << 31) / (double)((key >> 33) + 1)));
    }
    return (int32_t)b;
}

/* The documented 64-bit key of jump and rendezvous: SplitMix64's first
 * output seeded with the 32-bit md5 key hash. */
static uint64_t key64(const keyset *ks, size_t i)
{
    return splitmix_first(mcr_hash_key(MCR_HASH_MD5, ks->key[i], ks->len[i]));
}

/* The first 8 bytes, little-endian, of the MD5 of a server's id. */
static uint64_t id_seed(const char *id)
{
    unsigned char d[16];
    uint64_t v = 0;
    mcr_md5(id, strlen(id), d);
    for (int b = 7; b >= 0; b--)
        v = v << 8 | d[b];
    return v;
}

static uint32_t rendezvous_owner(uint64_t k, const uint64_t *seed, unsigned n)
{
    double best = -1;
    uint32_t owner = 0;
    for (unsigned s = 0; s < n; s++) {
        uint64_t z = splitmix_first(k ^ seed[s]);
        double u = ((double)(z >> 11) + 0.5) * 0x1p-53;
        double score = -1.0 / log(u); /* weight 1 */
        if (score > best) {
            best = score;
            owner = s;
        }
    }
    return owner;
}

/* ------------------------------------------------------------ checks */

/* Every key's server by the mode's rule; the checksum the timed passes
 * must reproduce. */
static bool check_mode(const bench_mode *bm, unsigned n, const mcr_snapshot *snap,
                       const keyset *ks, const uint32_t *load, uint64_t total, uint64_t *sum)
{
    const mcr_ring *ring = mcr_snapshot_ring(snap);
    uint64_t *seeds = NULL;
    uint32_t *many = bench_xmalloc(ks->n * sizeof(*many));
    bool ok = true;
    *sum = 0;

    if (bm->mode == MCR_MODE_RENDEZVOUS && n <= RDV_CHECK_SERVERS) {
        seeds = bench_xmalloc(n * sizeof(*seeds));
        for (unsigned s = 0; s < n; s++) {
            mcr_server_desc d;
            mcr_snapshot_server(snap, s, &d);
            seeds[s] = id_seed(d.id);
        }
    }
    if (bm->mode == MCR_MODE_MAGLEV) {
        /* each server owns floor(M / N) or ceil(M / N) entries */
        size_t m = mcr_snapshot_table_size(snap);
        uint32_t *count = calloc(n, sizeof(*count));
        for (size_t e = 0; e < m; e++) {
            uint32_t s = mcr_snapshot_table_entry(snap, e);
            if (s >= n) {
                fail(bm->name, n, "a table entry names no server", e);
                ok = false;
                break;
            }
            count[s]++;
        }
        for (unsigned s = 0; s < n && ok; s++)
            if (count[s] != m / n && count[s] != (m + n - 1) / n) {
                fail(bm->name, n, "a server's entries are not floor or ceil of M / N", s);
                ok = false;
            }
        free(count);
    }
    mcr_ring_locate_many(ring, ks->key, ks->len, ks->n, many);
    for (size_t i = 0; i < ks->n && ok; i++) {
        uint32_t got = bm->walk ? mcr_snapshot_locate_bounded(snap, ks->key[i], ks->len[i], load,
                                                               total, 0.25)
                                : mcr_snapshot_locate(snap, ks->key[i], ks->len[i]);
        uint32_t plain = mcr_snapshot_locate(snap, ks->key[i], ks->len[i]);
        uint32_t want = plain;
        const char *why = NULL;
        switch (bm->mode) {
        case MCR_MODE_JUMP: want = (uint32_t)jump_hash(key64(ks, i), (int32_t)n); break;
        case MCR_MODE_RENDEZVOUS:
            if (seeds && i < RDV_CHECK_KEYS)
                want = rendezvous_owner(key64(ks, i), seeds, n);
            break;
        case MCR_MODE_MAGLEV: {
            size_t m = mcr_snapshot_table_size(snap);
            want = mcr_snapshot_table_entry(snap, mcr_ring_hash(ring, ks->key[i], ks->len[i]) % m);
            break;
        }
        case MCR_MODE_SLOTS:
            want = mcr_snapshot_table_entry(snap, mcr_snapshot_key_slot(snap, ks->key[i], ks->len[i]));
            break;
        default: /* the continuum: the first point at or above the hash */
            want = mcr_ring_find(ring, mcr_ring_hash(ring, ks->key[i], ks->len[i]));
            break;
        }
        if (got >= n)
            why = "a server index out of range";
        else if (got != want)
            why = bm->walk ? "the bounded walk at low load left the owner"
                           : "the server differs from the mode's rule";
        else if (many[i] != plain)
            why = "mcr_ring_locate_many differs from mcr_snapshot_locate";
        if (why) {
            fail(bm->name, n, why, i);
            ok = false;
        }
        *sum += got;
    }
    free(many);
    free(seeds);
    return ok;
}

/* ------------------------------------------------------------ timing */

static NOINLINE uint64_t pass(const bench_mode *bm, const mcr_snapshot *snap, const keyset *ks,
                              size_t n, const uint32_t *load, uint64_t total)
{
    uint64_t sum = 0;
    if (bm->walk)
        for (size_t i = 0; i < n; i++)
            sum += mcr_snapshot_locate_bounded(snap, ks->key[i], ks->len[i], load, total, 0.25);
    else
        for (size_t i = 0; i < n; i++)
            sum += mcr_snapshot_locate(snap, ks->key[i], ks->len[i]);
    return sum;
}

static void run_case(size_t mi, size_t si, const keyset *ks)
{
    const bench_mode *bm = &modes[mi];
    unsigned n = sizes[si];
    char name[64];
    cell *c = &results[mi][si];
    snprintf(name, sizeof(name), "%s_%u", bm->name, n);

    /* build */
    mcr_config *cfg = make_config(bm->mode, n);
    mcr_snapshot *snap = NULL;
    double *bt = bench_xmalloc(opt.build_reps * sizeof(*bt));
    for (unsigned r = 0; r < opt.build_reps; r++) {
        mcr_snapshot *s = NULL;
        mcr_error err;
        size_t h0 = heap_in_use();
        uint64_t t0 = bench_now_ns();
        if (mcr_snapshot_new(cfg, 1, &s, &err) != MCR_OK) {
            printf("FAIL %s: mcr_snapshot_new: %s\n", name, err.message);
            failures++;
            free(bt);
            mcr_config_free(cfg);
            mcr_snapshot_unref(snap);
            return;
        }
        bt[r] = (double)(bench_now_ns() - t0) / 1e3;
        if (r == 0) {
            size_t h1 = heap_in_use();
            c->memory_kib = h1 > h0 ? (double)(h1 - h0) / 1024.0 : 0;
            snap = s;
        } else
            mcr_snapshot_unref(s);
    }
    c->build_us = bench_median(bt, opt.build_reps);
    free(bt);
    mcr_config_free(cfg);

    /* equal loads, below capacity: the walk stops at the owner */
    uint32_t *load = bench_xmalloc(n * sizeof(*load));
    for (unsigned s = 0; s < n; s++)
        load[s] = 100;
    uint64_t total = (uint64_t)100 * n;

    /* check, then time the same keys */
    uint64_t want;
    size_t nk = ks->n;
    if (check_mode(bm, n, snap, ks, load, total, &want)) {
        /* calibrate the keys per pass to the budget, caches warm */
        size_t probe = nk < 1024 ? nk : 1024;
        g_sink += pass(bm, snap, ks, probe, load, total);
        uint64_t t0 = bench_now_ns();
        g_sink += pass(bm, snap, ks, probe, load, total);
        double per = (double)(bench_now_ns() - t0) / (double)probe;
        size_t fit = (size_t)(opt.pass_budget_ns / (per > 1 ? per : 1));
        size_t use = fit >= nk ? nk : fit < 256 ? (nk < 256 ? nk : 256) : fit;
        uint64_t want_use = want;
        if (use < nk) /* the checksum of the prefix, from the checked answers */
            want_use = pass(bm, snap, ks, use, load, total);
        double *v = bench_xmalloc(opt.reps * sizeof(*v));
        for (unsigned r = 0; r < opt.reps; r++) {
            uint64_t s0 = bench_now_ns();
            uint64_t sum = pass(bm, snap, ks, use, load, total);
            v[r] = (double)(bench_now_ns() - s0) / (double)use;
            if (sum != want_use) {
                printf("FAIL %s: pass %u gave checksum %" PRIu64 ", the check %" PRIu64 "\n",
                       name, r, sum, want_use);
                failures++;
            }
            g_sink += sum;
        }
        c->ns = bench_median(v, opt.reps);
        c->ok = true;
        free(v);
        printf("RESULT lookup_%s ns=%.2f keys_per_pass=%zu\n", name, c->ns, use);
        printf("RESULT build_%s us=%.1f memory_kib=%.1f entries=%zu\n", name, c->build_us,
               c->memory_kib,
               mcr_snapshot_table_size(snap) ? mcr_snapshot_table_size(snap)
                                             : mcr_ring_point_count(mcr_snapshot_ring(snap)));
        fflush(stdout);
    }
    free(load);
    mcr_snapshot_unref(snap);
}

/* ------------------------------------------------------------ main */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench_modes [--quick]\n"
            "  Lookup cost (mcr_snapshot_locate, ns per key), build time and memory of\n"
            "  ketama, stable-ketama, jump, rendezvous, maglev, slots and bounded (plain\n"
            "  and its bounded walk) at 10, 120, 1000 and 10000 servers, on the same keys,\n"
            "  each mode's answers checked against its rule first.\n"
            "  --quick   few passes and 8K keys: a smoke run of a few seconds\n"
            "Output: RESULT lookup_<mode>_<servers> ns=<x> keys_per_pass=<n>, RESULT\n"
            "build_<mode>_<servers> us=<x> memory_kib=<y> entries=<z>, then tables.\n"
            "Exit status 1 when a mode gives a wrong answer, never because of speed.\n");
}

int main(int argc, char **argv)
{
    keyset ks;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            opt.quick = true;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "bench_modes: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (opt.quick) {
        opt.nkeys = KEYS_QUICK;
        opt.reps = 3;
        opt.build_reps = 1;
        opt.pass_budget_ns = 2e6;
    } else {
        opt.nkeys = KEYS_FULL;
        opt.reps = 11;
        opt.build_reps = 5;
        opt.pass_budget_ns = 20e6;
    }
    keyset_init(&ks, opt.nkeys);
    printf("INFO setup keys=%zu reps=%u build_reps=%u build_type=%s mcroute=%s\n", ks.n, opt.reps,
           opt.build_reps, MCR_BENCH_BUILD_TYPE, mcr_version_string());
    fflush(stdout);
    /* One snapshot built and dropped first, so that the library's and the
     * allocator's one-time allocations are not counted as the memory of the
     * first case. */
    mcr_config *warm_cfg = make_config(MCR_MODE_KETAMA, 10);
    mcr_snapshot *warm = NULL;
    if (mcr_snapshot_new(warm_cfg, 1, &warm, NULL) != MCR_OK) {
        printf("FAIL warm-up: mcr_snapshot_new\n");
        failures++;
    }
    mcr_snapshot_unref(warm);
    mcr_config_free(warm_cfg);
    for (size_t si = 0; si < NSIZES; si++)
        for (size_t mi = 0; mi < NMODES; mi++)
            run_case(mi, si, &ks);

    printf("\nns per lookup (median pass; mcr_snapshot_locate, bounded-walk: "
           "mcr_snapshot_locate_bounded)\n%-14s", "servers");
    for (size_t si = 0; si < NSIZES; si++)
        printf(" %9u", sizes[si]);
    for (size_t mi = 0; mi < NMODES; mi++) {
        printf("\n%-14s", modes[mi].name);
        for (size_t si = 0; si < NSIZES; si++) {
            if (results[mi][si].ok)
                printf(" %9.1f", results[mi][si].ns);
            else
                printf(" %9s", "-");
        }
    }
    printf("\n\nbuild us (mcr_snapshot_new, median) / memory KiB\n%-14s", "servers");
    for (size_t si = 0; si < NSIZES; si++)
        printf(" %19u", sizes[si]);
    for (size_t mi = 0; mi < NMODES; mi++) {
        if (modes[mi].walk)
            continue;
        printf("\n%-14s", modes[mi].name);
        for (size_t si = 0; si < NSIZES; si++) {
            if (results[mi][si].ok)
                printf(" %9.0f /%8.0f", results[mi][si].build_us, results[mi][si].memory_kib);
            else
                printf(" %19s", "-");
        }
    }
    printf("\n");
    if (failures)
        printf("FAILED %d case(s), see the FAIL lines\n", failures);
    fflush(stdout);
    keyset_free(&ks);
    return failures ? 1 : 0;
}
