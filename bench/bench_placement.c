/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_placement.c: times mcroute against libmemcached 1.1.4 on the same servers and keys, after checking both place every key alike. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libmemcached/memcached.h>
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
#include <malloc.h>
#define HAVE_MALLINFO2 1
#endif

#include "benchutil.h"
#include "mcroute.h"

/*
 * What is compared, and why it is a fair comparison:
 *
 *  - Both sides get the same 100 servers (libmemcached's consistent
 *    distributions abort above 100) and the same key set, and before any
 *    timing every key is checked to land on the same server index on both
 *    sides. A case that disagrees on one key is reported and not timed: a
 *    benchmark of different work is worthless. Every timed repetition must
 *    then reproduce the checksum of the check, so no side can skip work.
 *  - libmemcached is configured as an application would configure it
 *    (memcached_behavior_set() in the usual order); mcroute gets the
 *    equivalent mcr_config, including libmemcached's quirk that labels keep
 *    the key hash in force when the continuum was built. The config is
 *    written out rather than derived through mcr_lmc, so that the timings do
 *    not depend on the compat layer; the per-key check proves both are the
 *    same placement.
 *  - One operation is memcached_generate_hash() on one side and
 *    mcr_ring_locate() (or a share of mcr_ring_locate_many()) on the other:
 *    key in, server index out. For builds, one operation is one continuum
 *    rebuild of libmemcached (a behaviour set on a handle that already holds
 *    the servers) against one mcr_ring_new() from a prepared config.
 *  - The machine is shared and noisy: repetitions of the two sides are
 *    interleaved (the side that goes first alternates), and the median
 *    repetition is reported.
 */


/* libmemcached's consistent distributions abort above this many servers. */
#define REF_SERVERS 100
/* mcroute alone: the size libmemcached cannot serve. */
#define BIG_SERVERS 10000
/* Keys: 64K keys of 10..40 bytes (about 2.4 MiB with their pointer and
 * length arrays), beyond L1 and L2, like the keys of a real request stream. */
#define KEYS_FULL 65536
#define KEYS_QUICK 16384
#define KEY_LEN_MIN 10
#define KEY_LEN_MAX 40
/* Keys per mcr_ring_locate_many() call: a large multi-get. */
#define BATCH 64
/* Fixed seed: the same keys in every run, on every machine. */
#define KEY_SEED 0x6d63726f75746521ull

typedef struct settings {
    bool quick;
    bool verbose;
    const char *filter;
    unsigned lookup_reps;     /* repetitions over the whole key set */
    unsigned build_reps;      /* continuum builds, 100 servers */
    unsigned big_build_reps;  /* continuum builds, 10,000 servers */
    unsigned big_lookup_reps; /* repetitions over the key set, 10,000 servers */
    size_t nkeys;
} settings;

typedef struct keyset {
    size_t n;
    char *bytes;       /* all keys, back to back */
    const void **key;  /* key[i]: start of key i in bytes */
    size_t *len;
    double avg_len;
} keyset;

typedef struct server {
    char host[32];
    int port;
    uint32_t weight;
} server;

/* A placement, described once and given to both sides. */
typedef struct placement {
    mcr_mode mode; /* MCR_MODE_WEIGHTED, MCR_MODE_CONSISTENT or MCR_MODE_MODULA */
    mcr_hash hash; /* key hash, set with HASH after the distribution */
    /* For CONSISTENT: the hash the labels were hashed with, i.e. the key hash
     * when libmemcached last rebuilt its continuum. */
    mcr_hash point_hash;
} placement;

typedef struct goal {
    const char *name;
    double target;
    double measured; /* < 0: not measured (filtered out or failed) */
    bool failed;
    bool at_most;    /* a cost ratio: met when measured <= target */
} goal;

enum {
    GOAL_WEIGHTED,
    GOAL_CONSISTENT,
    GOAL_MANY_WEIGHTED,
    GOAL_MANY_CONSISTENT,
    GOAL_BUILD_WEIGHTED,
    GOAL_BUILD_CONSISTENT,
    GOAL_BIG_WEIGHTED,
    GOAL_COUNT
};

static goal goals[GOAL_COUNT] = {
    [GOAL_WEIGHTED] = {"lookup_weighted_md5", 3.0, -1.0, false},
    [GOAL_CONSISTENT] = {"lookup_consistent_fnv1a_32", 5.0, -1.0, false},
    /* The same goals for the batch API (one thread, many keys per call, as
     * a multi-get routes them): hashing several keys at once is the only way
     * past the latency of one key's MD5 or FNV chain. */
    [GOAL_MANY_WEIGHTED] = {"many_weighted_md5", 3.0, -1.0, false},
    [GOAL_MANY_CONSISTENT] = {"many_consistent_fnv1a_32", 5.0, -1.0, false},
    [GOAL_BUILD_WEIGHTED] = {"build_weighted", 3.0, -1.0, false},
    [GOAL_BUILD_CONSISTENT] = {"build_consistent", 3.0, -1.0, false},
    /* Not a speedup: the cost of one lookup at 10,000 servers over its cost
     * at 100 (issue 16), both timed in one case, interleaved. */
    [GOAL_BIG_WEIGHTED] = {"lookup_weighted_md5_10000_vs_100", 2.0, -1.0, false, true},
};

static settings opt;
static int failures;              /* cases that could not be set up or disagreed */
static volatile uint64_t g_sink;  /* every checksum ends here: nothing is dead code */

/* ------------------------------------------------------------ utilities */

const char *bench_program = "bench_placement";

/* --filter: a substring of the case name; a leading '^' or a trailing '$'
 * anchors it (the 10,000-server names contain the 100-server ones). */
static bool any_selected; /* a --filter that matches nothing is a mistake */

static bool match(const char *name)
{
    const char *f = opt.filter;
    size_t n, len = strlen(name);
    bool at_start, at_end;

    if (f == NULL)
        return true;
    at_start = f[0] == '^';
    f += at_start;
    n = strlen(f);
    at_end = n > 0 && f[n - 1] == '$';
    n -= at_end;
    if (n > len)
        return false;
    if (at_start && at_end)
        return n == len && strncmp(name, f, n) == 0;
    if (at_start)
        return strncmp(name, f, n) == 0;
    if (at_end)
        return strncmp(name + len - n, f, n) == 0;
    for (const char *p = name; p + n <= name + len; p++)
        if (strncmp(p, f, n) == 0)
            return true;
    return false;
}

static bool selected(const char *name)
{
    bool yes = match(name);
    any_selected |= yes;
    return yes;
}

static void fail(const char *name, const char *fmt, const char *detail)
{
    printf("FAIL %s: ", name);
    printf(fmt, detail);
    printf("\n");
    fflush(stdout);
    failures++;
}

/* ------------------------------------------------------------ inputs */

/* Key shapes seen in memcached deployments: ids, session tokens, composite
 * keys, paths. Each gives 10..40 bytes. */
static size_t make_key(char *out, uint64_t *rng)
{
    uint64_t r = bench_next_rand(rng);
    uint64_t s = bench_next_rand(rng);
    unsigned a = (unsigned)(s % 100000000u), b = (unsigned)((s >> 32) % 100000u);
    int n;

    switch (r % 10) {
    case 0:
    case 1:
    case 2: /* the most common shape: user:12345678 */
        n = snprintf(out, KEY_LEN_MAX + 1, "user:%08u", a);
        break;
    case 3:
        n = snprintf(out, KEY_LEN_MAX + 1, "session:%016" PRIx64, s);
        break;
    case 4:
        n = snprintf(out, KEY_LEN_MAX + 1, "product:%u:price", a % 1000000u);
        break;
    case 5:
        n = snprintf(out, KEY_LEN_MAX + 1, "cart:%u:items:%u", a, b % 100u);
        break;
    case 6:
        n = snprintf(out, KEY_LEN_MAX + 1, "page:/c/%u/item/%u?v=2", b, a % 1000000u);
        break;
    case 7:
        n = snprintf(out, KEY_LEN_MAX + 1, "feed:v2:%u:%u", a, b);
        break;
    case 8:
        n = snprintf(out, KEY_LEN_MAX + 1, "rate:ip:10.%u.%u.%u", (unsigned)(s >> 8) & 255,
                     (unsigned)(s >> 16) & 255, (unsigned)(s >> 24) & 255);
        break;
    default:
        n = snprintf(out, KEY_LEN_MAX + 1, "tpl:%" PRIx64 ":fragment:%u", s >> 20, b % 1000u);
        break;
    }
    if (n < 0)
        n = 0;
    if (n > KEY_LEN_MAX)
        n = KEY_LEN_MAX; /* snprintf cut it there */
    while (n < KEY_LEN_MIN) /* not reached with these shapes; keeps the promise */
        out[n++] = '_';
    out[n] = '\0';
    return (size_t)n;
}

static void keyset_init(keyset *ks, size_t n)
{
    uint64_t rng = KEY_SEED;
    size_t total = 0;

    ks->n = n;
    ks->bytes = bench_xmalloc(n * (KEY_LEN_MAX + 1));
    ks->key = bench_xmalloc(n * sizeof(*ks->key));
    ks->len = bench_xmalloc(n * sizeof(*ks->len));
    char *p = ks->bytes;
    for (size_t i = 0; i < n; i++) {
        ks->len[i] = make_key(p, &rng);
        ks->key[i] = p;
        p += ks->len[i] + 1;
        total += ks->len[i];
    }
    ks->avg_len = n ? (double)total / (double)n : 0.0;
}

static void keyset_free(keyset *ks)
{
    free(ks->bytes);
    free(ks->key);
    free(ks->len);
}

/* Servers as in a data centre: private addresses, the default port, and
 * mixed weights (machines of 1, 2 and 4 units of memory). The weights matter
 * only where the reference uses them (weighted); both sides ignore them
 * elsewhere. */
static server *make_servers(size_t n)
{
    static const uint32_t weights[] = {1, 2, 4, 2};
    server *sv = bench_xmalloc(n * sizeof(*sv));

    for (size_t i = 0; i < n; i++) {
        snprintf(sv[i].host, sizeof sv[i].host, "10.%u.%u.%u", (unsigned)(i / 65536 + 1),
                 (unsigned)(i / 256 % 256), (unsigned)(i % 256));
        sv[i].port = MCR_DEFAULT_PORT;
        sv[i].weight = weights[i % 4];
    }
    return sv;
}

/* ------------------------------------------------------------ the two sides */

/* libmemcached, configured as an application does it: servers first, then
 * the distribution, then the key hash. Returns NULL (reported) on failure. */
static memcached_st *ref_new(const char *name, const placement *pl, const server *sv, size_t n)
{
    memcached_st *memc = memcached_create(NULL);
    memcached_return_t rc = MEMCACHED_SUCCESS;

    if (memc == NULL) {
        fail(name, "%s", "memcached_create failed");
        return NULL;
    }
    for (size_t i = 0; i < n && rc == MEMCACHED_SUCCESS; i++)
        rc = memcached_server_add_with_weight(memc, sv[i].host, (in_port_t)sv[i].port, sv[i].weight);
    if (rc == MEMCACHED_SUCCESS) {
        switch (pl->mode) {
        case MCR_MODE_WEIGHTED: /* also sets the key hash to md5 */
            rc = memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1);
            break;
        case MCR_MODE_CONSISTENT:
            /* Labels are hashed now, with the point hash; HASH below does not
             * rebuild. */
            rc = memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_HASH, pl->point_hash);
            if (rc == MEMCACHED_SUCCESS)
                rc = memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_DISTRIBUTION,
                                            MEMCACHED_DISTRIBUTION_CONSISTENT);
            break;
        default:
            break;
        }
    }
    if (rc == MEMCACHED_SUCCESS)
        rc = memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_HASH, pl->hash);
    if (rc != MEMCACHED_SUCCESS) {
        fail(name, "libmemcached setup: %s", memcached_strerror(memc, rc));
        memcached_free(memc);
        return NULL;
    }
    return memc;
}

/* The mcroute config of the same placement. Returns NULL (reported) on failure. */
static mcr_config *mcr_cfg_new(const char *name, const placement *pl, const server *sv, size_t n)
{
    mcr_config *cfg = mcr_config_new();
    mcr_error err = {0};
    int rc = cfg ? MCR_OK : MCR_ERR_NOMEM;

    for (size_t i = 0; i < n && rc == MCR_OK; i++)
        rc = mcr_config_add_server(cfg, sv[i].host, sv[i].port, sv[i].weight, &err);
    if (rc == MCR_OK)
        rc = mcr_config_set_mode(cfg, pl->mode);
    if (rc == MCR_OK)
        rc = mcr_config_set_hash(cfg, pl->hash);
    if (rc == MCR_OK && pl->mode == MCR_MODE_CONSISTENT)
        rc = mcr_config_set_point_hash(cfg, pl->point_hash);
    if (rc != MCR_OK) {
        fail(name, "mcroute config: %s", err.code ? err.message : mcr_strerror(rc));
        mcr_config_free(cfg);
        return NULL;
    }
    return cfg;
}

static mcr_ring *mcr_ring_of(const char *name, const mcr_config *cfg)
{
    mcr_ring *ring = NULL;
    mcr_error err = {0};
    int rc = mcr_ring_new(cfg, &ring, &err);

    if (rc != MCR_OK) {
        fail(name, "mcr_ring_new: %s", err.code ? err.message : mcr_strerror(rc));
        return NULL;
    }
    return ring;
}

/* ------------------------------------------------------------ timed loops */

/* Kept out of line so that profiles show each loop as one function, and so
 * the compiler cannot merge the two sides. */

static NOINLINE uint64_t loop_mcr(const mcr_ring *ring, const keyset *ks)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < ks->n; i++)
        sum += mcr_ring_locate(ring, ks->key[i], ks->len[i]);
    return sum;
}

static NOINLINE uint64_t loop_mcr_many(const mcr_ring *ring, const keyset *ks)
{
    uint32_t out[BATCH];
    uint64_t sum = 0;
    for (size_t i = 0; i < ks->n; i += BATCH) {
        size_t m = ks->n - i < BATCH ? ks->n - i : BATCH;
        mcr_ring_locate_many(ring, ks->key + i, ks->len + i, m, out);
        for (size_t j = 0; j < m; j++)
            sum += out[j];
    }
    return sum;
}

static NOINLINE uint64_t loop_ref(const memcached_st *memc, const keyset *ks)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < ks->n; i++)
        sum += memcached_generate_hash(memc, (const char *)ks->key[i], ks->len[i]);
    return sum;
}

/* One side of a case: runs one repetition, stores its time per operation
 * in ns, returns a checksum that must be the same in every repetition. */
typedef struct side {
    uint64_t (*rep)(struct side *s, double *ns_per_op);
    const keyset *ks;
    const mcr_ring *ring;     /* lookups */
    const memcached_st *memc; /* reference lookups */
    const mcr_config *cfg;    /* mcroute builds */
    mcr_ring *built;          /* mcroute builds: the last ring built */
    memcached_st *rebuild;    /* reference builds: the handle to rebuild */
    memcached_behavior_t behavior;
    uint64_t value;
} side;

static uint64_t rep_mcr(side *s, double *ns)
{
    uint64_t t0 = bench_now_ns();
    uint64_t sum = loop_mcr(s->ring, s->ks);
    *ns = (double)(bench_now_ns() - t0) / (double)s->ks->n;
    return sum;
}

static uint64_t rep_mcr_many(side *s, double *ns)
{
    uint64_t t0 = bench_now_ns();
    uint64_t sum = loop_mcr_many(s->ring, s->ks);
    *ns = (double)(bench_now_ns() - t0) / (double)s->ks->n;
    return sum;
}

static uint64_t rep_ref(side *s, double *ns)
{
    uint64_t t0 = bench_now_ns();
    uint64_t sum = loop_ref(s->memc, s->ks);
    *ns = (double)(bench_now_ns() - t0) / (double)s->ks->n;
    return sum;
}

/* Checksum of a build: the point count, or ~0 when the build failed. */
static uint64_t rep_mcr_build(side *s, double *ns)
{
    mcr_ring *ring = NULL;
    uint64_t t0 = bench_now_ns();
    int rc = mcr_ring_new(s->cfg, &ring, NULL);
    *ns = (double)(bench_now_ns() - t0);
    if (rc != MCR_OK)
        return UINT64_MAX;
    mcr_ring_free(s->built); /* outside the timed part */
    s->built = ring;
    return mcr_ring_point_count(ring);
}

static uint64_t rep_ref_build(side *s, double *ns)
{
    uint64_t t0 = bench_now_ns();
    memcached_return_t rc = memcached_behavior_set(s->rebuild, s->behavior, s->value);
    *ns = (double)(bench_now_ns() - t0);
    return rc == MEMCACHED_SUCCESS ? 0 : UINT64_MAX;
}

/* Interleaved repetitions of both sides (the side that runs first
 * alternates); medians into *m and *r. A repetition whose checksum differs
 * from the expected one fails the case. Returns false on failure. */
static bool measure(const char *name, side *ms, side *rs, unsigned reps, uint64_t expect_m,
                    uint64_t expect_r, double *m, double *r)
{
    double *tm = bench_xmalloc(reps * sizeof(*tm)), *tr = bench_xmalloc(reps * sizeof(*tr));
    bool ok = true;

    for (unsigned i = 0; i < reps && ok; i++) {
        uint64_t cm, cr;
        if (i % 2 == 0) {
            cm = ms->rep(ms, &tm[i]);
            cr = rs->rep(rs, &tr[i]);
        } else {
            cr = rs->rep(rs, &tr[i]);
            cm = ms->rep(ms, &tm[i]);
        }
        g_sink += cm + cr;
        if (cm != expect_m || cr != expect_r) {
            char msg[160];
            snprintf(msg, sizeof msg,
                     "repetition %u: checksums mcroute=%" PRIu64 " reference=%" PRIu64
                     ", expected %" PRIu64 " and %" PRIu64,
                     i, cm, cr, expect_m, expect_r);
            fail(name, "%s", msg);
            ok = false;
        }
    }
    if (ok) {
        *m = bench_median(tm, reps);
        *r = bench_median(tr, reps);
        if (opt.verbose)
            printf("INFO %s reps=%u mcroute_min=%.2f mcroute_max=%.2f reference_min=%.2f "
                   "reference_max=%.2f\n",
                   name, reps, tm[0], tm[reps - 1], tr[0], tr[reps - 1]);
    }
    free(tm);
    free(tr);
    return ok;
}

static void report(const char *name, double m, double r, int goal_id)
{
    double speedup = r / m;
    printf("RESULT %s mcroute_ns=%.2f reference_ns=%.2f speedup=%.2f\n", name, m, r, speedup);
    fflush(stdout);
    if (goal_id >= 0)
        goals[goal_id].measured = speedup;
}

/* Every key on the same server on both sides, or the case fails. With
 * `many`, the batch API is the one checked. Sets the expected checksums. */
static bool verify(const char *name, const mcr_ring *ring, const memcached_st *memc,
                   const keyset *ks, bool many, uint64_t *sum)
{
    uint32_t *got = bench_xmalloc(ks->n * sizeof(*got));
    bool ok = true;

    if (many)
        mcr_ring_locate_many(ring, ks->key, ks->len, ks->n, got);
    else
        for (size_t i = 0; i < ks->n; i++)
            got[i] = mcr_ring_locate(ring, ks->key[i], ks->len[i]);
    *sum = 0;
    for (size_t i = 0; i < ks->n && ok; i++) {
        uint32_t want = memcached_generate_hash(memc, (const char *)ks->key[i], ks->len[i]);
        if (got[i] != want) {
            char msg[200];
            snprintf(msg, sizeof msg, "key %zu \"%s\": mcroute server %u, libmemcached server %u",
                     i, (const char *)ks->key[i], (unsigned)got[i], (unsigned)want);
            fail(name, "placements differ, case not timed: %s", msg);
            ok = false;
        }
        *sum += got[i];
    }
    free(got);
    return ok;
}

/* ------------------------------------------------------------ 100-server cases */

static void case_lookup(const char *name, const placement *pl, bool many, const server *sv,
                        const keyset *ks, int goal_id)
{
    mcr_config *cfg = NULL;
    mcr_ring *ring = NULL;
    memcached_st *memc = NULL;
    uint64_t sum;
    double m, r;

    if (!selected(name))
        return;
    if (goal_id >= 0)
        goals[goal_id].failed = true; /* until measured */
    memc = ref_new(name, pl, sv, REF_SERVERS);
    cfg = memc ? mcr_cfg_new(name, pl, sv, REF_SERVERS) : NULL;
    ring = cfg ? mcr_ring_of(name, cfg) : NULL;
    if (ring && verify(name, ring, memc, ks, many, &sum)) {
        side ms = {.rep = many ? rep_mcr_many : rep_mcr, .ks = ks, .ring = ring};
        side rs = {.rep = rep_ref, .ks = ks, .memc = memc};
        if (measure(name, &ms, &rs, opt.lookup_reps, sum, sum, &m, &r)) {
            report(name, m, r, goal_id);
            if (goal_id >= 0)
                goals[goal_id].failed = false;
        }
    }
    mcr_ring_free(ring);
    mcr_config_free(cfg);
    memcached_free(memc);
}

/* One continuum rebuild each. libmemcached rebuilds on every setting of
 * DISTRIBUTION or KETAMA_WEIGHTED, even to the value it has, so setting it
 * again on a handle holding the servers times exactly one rebuild. */
static void case_build(const char *name, const placement *pl, const server *sv, const keyset *ks,
                       int goal_id)
{
    mcr_config *cfg = NULL;
    memcached_st *memc = NULL;
    side ms = {.rep = rep_mcr_build}, rs = {.rep = rep_ref_build};
    uint64_t sum, npoints;
    double m, r;

    if (!selected(name))
        return;
    if (goal_id >= 0)
        goals[goal_id].failed = true;
    memc = ref_new(name, pl, sv, REF_SERVERS);
    cfg = memc ? mcr_cfg_new(name, pl, sv, REF_SERVERS) : NULL;
    if (cfg == NULL)
        goto out;
    if (pl->mode == MCR_MODE_WEIGHTED) {
        rs.behavior = MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED;
        rs.value = 1;
    } else {
        rs.behavior = MEMCACHED_BEHAVIOR_DISTRIBUTION;
        rs.value = MEMCACHED_DISTRIBUTION_CONSISTENT;
        /* The rebuild hashes the labels with the key hash in force now. */
        if (mcr_config_set_point_hash(cfg, pl->hash) != MCR_OK) {
            fail(name, "%s", "mcr_config_set_point_hash failed");
            goto out;
        }
    }
    rs.rebuild = memc;
    ms.cfg = cfg;
    /* A first build on each side gives the expected checksums. */
    double warm;
    npoints = rep_mcr_build(&ms, &warm);
    if (npoints == UINT64_MAX || rep_ref_build(&rs, &warm) != 0) {
        fail(name, "%s", "first build failed");
        goto out;
    }
    if (!measure(name, &ms, &rs, opt.build_reps, npoints, 0, &m, &r))
        goto out;
    /* After the rebuilds both must still agree on every key. For the
     * consistent case this also proves that the timed setting did rebuild:
     * the labels now carry the new key hash, which the mcroute config
     * expects, and the original continuum would not match. */
    if (!verify(name, ms.built, memc, ks, false, &sum))
        goto out;
    report(name, m, r, goal_id);
    if (goal_id >= 0)
        goals[goal_id].failed = false;
out:
    mcr_ring_free(ms.built);
    mcr_config_free(cfg);
    memcached_free(memc);
}

/* ------------------------------------------------------------ 10,000 servers */

/* Without a reference that can take this many servers, check the ring
 * against a plain binary search over its own points (successor rule,
 * wrap-around). */
static bool verify_big(const char *name, const mcr_ring *ring, const keyset *ks, uint64_t *sum)
{
    size_t np = mcr_ring_point_count(ring);
    uint32_t *val = bench_xmalloc(np * sizeof(*val)), *srv = bench_xmalloc(np * sizeof(*srv));
    bool ok = np > 0;

    for (size_t i = 0; i < np && ok; i++)
        ok = mcr_ring_point(ring, i, &val[i], &srv[i]) == MCR_OK;
    *sum = 0;
    for (size_t k = 0; k < ks->n && ok; k++) {
        uint32_t h = mcr_ring_hash(ring, ks->key[k], ks->len[k]);
        size_t lo = 0, hi = np;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (val[mid] < h)
                lo = mid + 1;
            else
                hi = mid;
        }
        uint32_t want = srv[lo == np ? 0 : lo];
        uint32_t got = mcr_ring_locate(ring, ks->key[k], ks->len[k]);
        if (got != want) {
            char msg[200];
            snprintf(msg, sizeof msg, "key %zu \"%s\": mcroute server %u, binary search %u", k,
                     (const char *)ks->key[k], (unsigned)got, (unsigned)want);
            fail(name, "%s", msg);
            ok = false;
        }
        *sum += got;
    }
    if (np == 0)
        fail(name, "%s", "ring without points");
    free(val);
    free(srv);
    return ok;
}

/* Heap bytes in use (glibc), to state what a ring takes; 0 elsewhere. */
static size_t heap_in_use(void)
{
#ifdef HAVE_MALLINFO2
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
#else
    return 0;
#endif
}

/* The heap a ring of cfg takes (a ring built for this alone). */
static void report_memory(const char *name, const mcr_config *cfg, size_t nservers)
{
    mcr_ring *ring = NULL;
    size_t before = heap_in_use();
    if (mcr_ring_new(cfg, &ring, NULL) != MCR_OK) {
        fail(name, "%s", "mcr_ring_new failed");
        return;
    }
    size_t bytes = heap_in_use() - before, np = mcr_ring_point_count(ring);
    if (before > 0)
        printf("INFO %s bytes=%zu points=%zu bytes_per_point=%.1f servers=%zu\n", name, bytes, np,
               np ? (double)bytes / (double)np : 0.0, nservers);
    else
        printf("INFO %s bytes=unknown (no mallinfo2) points=%zu servers=%zu\n", name, np, nservers);
    fflush(stdout);
    mcr_ring_free(ring);
}

/* mcroute alone: big_lookup_reps repetitions of side s, every one's
 * checksum `sum`; an INFO line of the median ns a lookup (with --verbose,
 * the fastest and slowest). */
static void time_lookups(const char *name, side *s, uint64_t sum, int servers)
{
    double *t = bench_xmalloc(opt.big_lookup_reps * sizeof(*t));
    bool ok = true;
    for (unsigned i = 0; i < opt.big_lookup_reps && ok; i++) {
        uint64_t c = s->rep(s, &t[i]);
        g_sink += c;
        if (c != sum) {
            fail(name, "%s", "checksum differs between repetitions");
            ok = false;
        }
    }
    if (ok) {
        printf("INFO %s mcroute_ns=%.2f servers=%d\n", name,
               bench_median(t, opt.big_lookup_reps), servers);
        if (opt.verbose)
            printf("INFO %s reps=%u mcroute_min=%.2f mcroute_max=%.2f\n", name,
                   opt.big_lookup_reps, t[0], t[opt.big_lookup_reps - 1]);
    }
    fflush(stdout);
    free(t);
}

/* One lookup at 10,000 servers (`big`, whose keys sum to big_sum) against
 * one at 100 of the same placement, repetitions interleaved: the ratio of
 * the medians, big over small. */
static void case_big_vs_small(const char *name, const placement *pl, const server *sv,
                              const keyset *ks, const mcr_ring *big, uint64_t big_sum, int goal_id)
{
    mcr_config *cfg = mcr_cfg_new(name, pl, sv, REF_SERVERS);
    mcr_ring *small = cfg ? mcr_ring_of(name, cfg) : NULL;
    double m, r;

    if (goal_id >= 0)
        goals[goal_id].failed = true;
    if (small != NULL) {
        side bs = {.rep = rep_mcr, .ks = ks, .ring = big};
        side ss = {.rep = rep_mcr, .ks = ks, .ring = small};
        uint64_t small_sum = loop_mcr(small, ks);
        if (measure(name, &bs, &ss, opt.lookup_reps, big_sum, small_sum, &m, &r)) {
            printf("%s %s servers_%d_ns=%.2f servers_%d_ns=%.2f ratio=%.2f\n",
                   goal_id >= 0 ? "RESULT" : "INFO", name, BIG_SERVERS, m, REF_SERVERS, r, m / r);
            fflush(stdout);
            if (goal_id >= 0) {
                goals[goal_id].measured = m / r;
                goals[goal_id].failed = false;
            }
        }
    }
    mcr_ring_free(small);
    mcr_config_free(cfg);
}

static void case_big(const char *tag, const placement *pl, const server *sv, const keyset *ks,
                     int goal_id)
{
    char build_name[64], lookup_name[64], many_name[64], vs_name[80], mem_name[64];
    mcr_config *cfg;
    mcr_ring *ring = NULL;
    uint64_t sum;

    snprintf(build_name, sizeof build_name, "build_%s_%d", tag, BIG_SERVERS);
    snprintf(lookup_name, sizeof lookup_name, "lookup_%s_%s_%d", tag, mcr_hash_name(pl->hash),
             BIG_SERVERS);
    snprintf(many_name, sizeof many_name, "many_%s_%s_%d", tag, mcr_hash_name(pl->hash),
             BIG_SERVERS);
    snprintf(vs_name, sizeof vs_name, "%s_vs_%d", lookup_name, REF_SERVERS);
    snprintf(mem_name, sizeof mem_name, "memory_%s_%d", tag, BIG_SERVERS);
    /* (each selected() once: it records that the filter matched) */
    bool sel_build = selected(build_name), sel_lookup = selected(lookup_name);
    bool sel_many = selected(many_name), sel_vs = selected(vs_name), sel_mem = selected(mem_name);
    if (!sel_build && !sel_lookup && !sel_many && !sel_vs && !sel_mem)
        return;
    cfg = mcr_cfg_new(build_name, pl, sv, BIG_SERVERS);
    if (cfg == NULL)
        return;

    if (sel_mem)
        report_memory(mem_name, cfg, BIG_SERVERS);
    if (sel_build) {
        double *t = bench_xmalloc(opt.big_build_reps * sizeof(*t));
        for (unsigned i = 0; i < opt.big_build_reps && ring == NULL; i++) {
            mcr_ring *r = NULL;
            uint64_t t0 = bench_now_ns();
            int rc = mcr_ring_new(cfg, &r, NULL);
            t[i] = (double)(bench_now_ns() - t0) / 1e6;
            if (rc != MCR_OK) {
                fail(build_name, "mcr_ring_new: %s", mcr_strerror(rc));
                free(t);
                mcr_config_free(cfg);
                return;
            }
            if (i + 1 == opt.big_build_reps)
                ring = r; /* keep the last one for the lookups */
            else
                mcr_ring_free(r);
        }
        printf("INFO %s mcroute_ms=%.2f points=%zu servers=%d\n", build_name,
               bench_median(t, opt.big_build_reps), mcr_ring_point_count(ring), BIG_SERVERS);
        fflush(stdout);
        free(t);
    } else {
        ring = mcr_ring_of(build_name, cfg);
    }
    mcr_config_free(cfg);
    if (ring == NULL)
        return;

    if ((sel_lookup || sel_many || sel_vs) && verify_big(lookup_name, ring, ks, &sum)) {
        for (int many = 0; many < 2; many++) {
            const char *name = many ? many_name : lookup_name;
            if (!(many ? sel_many : sel_lookup))
                continue;
            side s = {.rep = many ? rep_mcr_many : rep_mcr, .ks = ks, .ring = ring};
            time_lookups(name, &s, sum, BIG_SERVERS);
        }
        if (sel_vs)
            case_big_vs_small(vs_name, pl, sv, ks, ring, sum, goal_id);
    }
    mcr_ring_free(ring);
}

/* ------------------------------------------------------------ proxies */

/* The placement of a proxy (--client NAME), mcroute alone (the proxies are
 * not a library to time against): REF_SERVERS servers of weight 1 (of
 * 1.0 or 0.5 in mcrouter-wch3), the key
 * set checked first to land alike through mcr_ring_locate() and
 * mcr_ring_locate_many(), then timed as the 10,000-server cases are. */
static void case_proxy(const char *client, const server *sv, const keyset *ks)
{
    char name[96];
    mcr_config *cfg = mcr_config_new();
    mcr_error err = {0};
    int rc = cfg ? mcr_config_set_client(cfg, client, &err) : MCR_ERR_NOMEM;

    snprintf(name, sizeof name, "lookup_client_%s_%d", client, REF_SERVERS);
    if (!selected(name)) {
        mcr_config_free(cfg);
        return;
    }
    /* mcrouter-wch3's weights are millionths: 1.0, every tenth server 0.5
     * (a drained tenth: some keys take a second try) */
    bool wch3 = strcmp(client, "mcrouter-wch3") == 0;
    for (size_t i = 0; i < REF_SERVERS && rc == MCR_OK; i++)
        rc = mcr_config_add_server(cfg, sv[i].host, sv[i].port,
                                   !wch3 ? 1 : i % 10 ? MCR_WCH3_WEIGHT_ONE : MCR_WCH3_WEIGHT_ONE / 2,
                                   &err);
    mcr_ring *ring = rc == MCR_OK ? mcr_ring_of(name, cfg) : NULL;
    if (rc != MCR_OK)
        fail(name, "config: %s", err.code ? err.message : mcr_strerror(rc));
    mcr_config_free(cfg);
    if (ring == NULL)
        return;
    uint64_t sum = loop_mcr(ring, ks);
    if (loop_mcr_many(ring, ks) != sum) {
        fail(name, "%s", "mcr_ring_locate_many() disagrees with mcr_ring_locate()");
        mcr_ring_free(ring);
        return;
    }
    side s = {.rep = rep_mcr, .ks = ks, .ring = ring};
    time_lookups(name, &s, sum, REF_SERVERS);
    mcr_ring_free(ring);
}

/* ------------------------------------------------------------ main */

/* Debian's libhashkit is built without hsieh: it returns 1 for every key. */
static bool reference_has_hsieh(void)
{
    return memcached_generate_hash_value("user:1", 6, MEMCACHED_HASH_HSIEH) != 1 ||
           memcached_generate_hash_value("user:2", 6, MEMCACHED_HASH_HSIEH) != 1;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench_placement [--quick] [--filter SUBSTR] [--verbose]\n"
            "  Times mcroute against libmemcached's memcached_generate_hash() on the same\n"
            "  100 servers and keys (each key checked to land on the same server first),\n"
            "  then mcroute alone at 10,000 servers, and the proxies' placements\n"
            "  (lookup_client_NAME_100: --client NAME, mcroute alone).\n"
            "  --quick          few repetitions and 16K keys: a smoke run of a few seconds\n"
            "  --filter SUBSTR  only the cases whose name contains SUBSTR ('^' and '$'\n"
            "                   anchor it: --filter 'lookup_weighted_md5$')\n"
            "  --verbose        also the fastest and slowest repetition of each case\n"
            "Output: RESULT <case> mcroute_ns=<x> reference_ns=<y> speedup=<y/x> (ns per\n"
            "lookup or per build, medians), INFO lines, GOAL lines. The *_10000_vs_100\n"
            "cases time one lookup at 10,000 and at 100 servers interleaved and give the\n"
            "cost ratio (a GOAL met when at most its target); memory_*_10000 is the heap a\n"
            "10,000-server ring takes. Exit status 1 when a case fails its placement\n"
            "check, never because of speed.\n");
}

static void parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            opt.quick = true;
        } else if (strcmp(argv[i], "--verbose") == 0) {
            opt.verbose = true;
        } else if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc) {
            opt.filter = argv[++i];
        } else if (strncmp(argv[i], "--filter=", 9) == 0) {
            opt.filter = argv[i] + 9;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            exit(0);
        } else {
            fprintf(stderr, "bench_placement: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            exit(2);
        }
    }
    if (opt.quick) {
        opt.nkeys = KEYS_QUICK;
        opt.lookup_reps = 3;
        opt.build_reps = 5;
        opt.big_build_reps = 1;
        opt.big_lookup_reps = 1;
    } else {
        opt.nkeys = KEYS_FULL;
        opt.lookup_reps = 41;
        opt.build_reps = 101;
        opt.big_build_reps = 7;
        opt.big_lookup_reps = 11;
    }
}

int main(int argc, char **argv)
{
    keyset ks;
    server *sv;
    char name[64];

    parse_args(argc, argv);
    keyset_init(&ks, opt.nkeys);
    sv = make_servers(BIG_SERVERS); /* the 100-server cases use the first 100 */

    printf("INFO setup servers=%d keys=%zu key_bytes=%d..%d avg_key_bytes=%.1f "
           "lookup_reps=%u build_reps=%u build_type=%s mcroute=%s libmemcached=%s\n",
           REF_SERVERS, ks.n, KEY_LEN_MIN, KEY_LEN_MAX, ks.avg_len, opt.lookup_reps,
           opt.build_reps, MCR_BENCH_BUILD_TYPE, mcr_version_string(), memcached_lib_version());
    fflush(stdout);

    /* The goals first. */
    placement weighted = {MCR_MODE_WEIGHTED, MCR_HASH_MD5, MCR_HASH_MD5};
    /* DISTRIBUTION=consistent, then HASH=fnv1a_32: labels one-at-a-time. */
    placement consistent = {MCR_MODE_CONSISTENT, MCR_HASH_FNV1A_32, MCR_HASH_DEFAULT};
    case_lookup("lookup_weighted_md5", &weighted, false, sv, &ks, GOAL_WEIGHTED);
    case_lookup("lookup_consistent_fnv1a_32", &consistent, false, sv, &ks, GOAL_CONSISTENT);
    case_build("build_weighted", &weighted, sv, &ks, GOAL_BUILD_WEIGHTED);
    case_build("build_consistent", &consistent, sv, &ks, GOAL_BUILD_CONSISTENT);

    /* The batch API against the same reference. */
    case_lookup("many_weighted_md5", &weighted, true, sv, &ks, GOAL_MANY_WEIGHTED);
    case_lookup("many_consistent_fnv1a_32", &consistent, true, sv, &ks, GOAL_MANY_CONSISTENT);

    /* Every other key hash, consistent (labels one-at-a-time) and modula. */
    bool hsieh = reference_has_hsieh();
    for (int mode = 0; mode < 2; mode++) {
        for (int h = 0; h <= MCR_HASH_MURMUR3; h++) { /* libmemcached's hashes */
            placement pl = {mode ? MCR_MODE_MODULA : MCR_MODE_CONSISTENT, (mcr_hash)h,
                            MCR_HASH_DEFAULT};
            if (pl.mode == MCR_MODE_CONSISTENT && pl.hash == MCR_HASH_FNV1A_32)
                continue; /* a goal case above */
            snprintf(name, sizeof name, "lookup_%s_%s", mcr_mode_name(pl.mode),
                     mcr_hash_name(pl.hash));
            if (pl.hash == MCR_HASH_HSIEH && !hsieh) {
                if (selected(name))
                    printf("INFO %s skipped: this libhashkit has no hsieh (returns 1 for "
                           "every key)\n",
                           name);
                continue;
            }
            case_lookup(name, &pl, false, sv, &ks, -1);
        }
    }

    /* 10,000 servers: libmemcached aborts there, mcroute alone. */
    case_big("weighted", &weighted, sv, &ks, GOAL_BIG_WEIGHTED);
    case_big("consistent", &consistent, sv, &ks, -1); /* the ratio as a RESULT only */

    /* The proxies' placements (--client), mcroute alone; Envoy's maglev table
     * and ring are built once, with the ring, as a snapshot builds them. */
    static const char *const proxies[] = {"memcached-proxy-jump", "mcrouter-ch3", "mcrouter-wch3",
                                          "envoy-maglev", "envoy-ring-hash",
                                          "memcached-proxy-ring-ketama"};
    for (size_t i = 0; i < sizeof(proxies) / sizeof(proxies[0]); i++)
        case_proxy(proxies[i], sv, &ks);

    for (int g = 0; g < GOAL_COUNT; g++) {
        const goal *gl = &goals[g];
        if (gl->failed)
            printf("GOAL %s target=%.0fx measured=none MISS (the case failed)\n", gl->name,
                   gl->target);
        else if (gl->measured >= 0)
            printf("GOAL %s target=%s%.0fx measured=%.2fx %s\n", gl->name, gl->at_most ? "<=" : "",
                   gl->target, gl->measured,
                   (gl->at_most ? gl->measured <= gl->target : gl->measured >= gl->target)
                       ? "PASS"
                       : "MISS");
    }
    if (!any_selected) {
        printf("FAIL no case matches --filter '%s'\n", opt.filter);
        failures++;
    }
    if (failures)
        printf("FAILED %d case(s), see the FAIL lines\n", failures);
    fflush(stdout);
    free(sv);
    keyset_free(&ks);
    return failures ? 1 : 0;
}
