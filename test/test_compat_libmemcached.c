/* SPDX-License-Identifier: BSD-3-Clause */
/* test_compat_libmemcached.c: mcr_lmc and mcr_memcached_st_ring against the real libmemcached 1.1.4: random configurations and handles placed by both, label hashes, refused handles. */
/*
 * Every differential test builds the same configuration twice: in
 * libmemcached (memcached() with an option string, then
 * memcached_behavior_set() and memcached_server_add_with_weight() calls in a
 * random order) and in mcr_lmc (mcr_lmc_parse_options(), then
 * mcr_lmc_set_behavior[_name]() and mcr_lmc_add_server() in the same
 * order), and compares memcached_generate_hash() with mcr_ring_locate() on
 * random keys. memcached_generate_hash() is pure computation: nothing here
 * connects to a server.
 *
 * hsieh is never used as a hash here: Debian's libhashkit is built without
 * it (libhashkit_digest() returns 1 for every key and memcached_behavior_set
 * refuses it), while mcroute has the real function, so there is nothing to
 * compare against.
 *
 * libmemcached aborts (an assertion in hosts.cc) above 100 servers in the
 * consistent distributions, so the reference is only run with 1..100
 * servers; larger rings are checked without it (test_compat_lmc_cases.c).
 *
 * The option language, behaviour values and connection behaviours are
 * test_compat_lmc_options.c; fixed vectors, scripted state machines, IPv6
 * hosts and large rings test_compat_lmc_cases.c; what the three share
 * (compare_keys and the counts) test_compat_lmc_util.c.
 */
#include <libmemcached/memcached.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "mcroute_libmemcached.h"
#include "mcroute_memcached_st.h"
#include "test_compat_lmc_util.h"
#include "testutil.h"

#define MAX_SERVERS 100
#define MAX_OPS 160

/* Families of final states, for coverage accounting. */
enum { FAM_MODULA, FAM_CONSISTENT, FAM_KETAMA, FAM_WEIGHTED, FAM_SPY, FAM_SPY_WEIGHTED, FAM_COUNT };
static const char *const fam_names[FAM_COUNT] = {"modula", "consistent", "ketama",
                                                 "weighted", "spy", "spy-weighted"};

/* The hashes both sides have (no hsieh, see above). */
static const mcr_hash usable_hashes[] = {MCR_HASH_DEFAULT, MCR_HASH_MD5,      MCR_HASH_CRC,
                                         MCR_HASH_FNV1_64, MCR_HASH_FNV1A_64, MCR_HASH_FNV1_32,
                                         MCR_HASH_FNV1A_32, MCR_HASH_MURMUR,  MCR_HASH_JENKINS,
                                         MCR_HASH_MURMUR3};
#define NUSABLE (sizeof(usable_hashes) / sizeof(usable_hashes[0]))
/* The hash words of the option language (no default, murmur3 or hsieh). */
static const char *const opt_hashes[] = {"md5",     "crc",      "fnv1_64", "fnv1a_64",
                                         "fnv1_32", "fnv1a_32", "murmur",  "jenkins"};
#define NOPTHASHES (sizeof(opt_hashes) / sizeof(opt_hashes[0]))

/* Options that do not affect placement, with a value where they take one. */
static const char *const noise_options[] = {
    "--BINARY-PROTOCOL",     "--BUFFER-REQUESTS",       "--CONNECT-TIMEOUT=250",
    "--IO-BYTES-WATERMARK=65536", "--IO-KEY-PREFETCH=3", "--IO-MSG-WATERMARK=500",
    "--NOREPLY",             "--NUMBER-OF-REPLICAS=2",  "--POLL-TIMEOUT=1000",
    "--RANDOMIZE-REPLICA-READ", "--RCV-TIMEOUT=99",     "--REMOVE-FAILED-SERVERS=1",
    "--RETRY-TIMEOUT=2",     "--SND-TIMEOUT=7",         "--SOCKET-RECV-SIZE=4096",
    "--SOCKET-SEND-SIZE=4096", "--SUPPORT-CAS",         "--TCP-KEEPALIVE",
    "--TCP-KEEPIDLE",        "--TCP-NODELAY",           "--USER-DATA",
    "--POOL-MIN=1",          "--POOL-MAX=8",            "--FETCH-VERSION",
    "--tcp-nodelay",         "--Connect-Timeout=0",
};
#define NNOISE (sizeof(noise_options) / sizeof(noise_options[0]))

/* ------------------------------------------------------------------ configs */

typedef struct srvspec {
    char host[96];
    int port;         /* as given: 0 means default */
    uint32_t weight;  /* as given: 0 means none / default */
    bool weight_given;
    bool in_string;   /* added by the option string, else by an API call */
} srvspec;

typedef enum { OP_ADD, OP_BEHAVIOR } opkind;

typedef struct op {
    opkind kind;
    int srv;        /* OP_ADD */
    int behavior;   /* OP_BEHAVIOR: libmemcached number */
    uint64_t value;
    bool by_name;   /* give it to mcr_lmc_set_behavior_name */
} op;

typedef struct cfgspec {
    char opts[OPTS_MAX];
    srvspec srv[MAX_SERVERS];
    int nsrv;
    op ops[MAX_OPS];
    int nops;
    bool hwn_possible; /* HASH_WITH_NAMESPACE may be on: use long keys too */
} cfgspec;

static bool is_keyword(const char *s)
{
    static const char *const kw[] = {"include", "reset", "debug", "servers", "end", "csl_error",
                                     "true", "false", "consistent", "modula", "random", "md5",
                                     "crc", "fnv1_64", "fnv1a_64", "fnv1_32", "fnv1a_32",
                                     "hsieh", "murmur", "jenkins"};
    for (size_t i = 0; i < sizeof(kw) / sizeof(kw[0]); i++)
        if (strcasecmp(s, kw[i]) == 0)
            return true;
    return false;
}

/* A hostname both libmemcached's scanner and mcroute accept. */
static void gen_host(tu_rng *r, char *buf, size_t cap)
{
    static const char alnum[] = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    static const char mid[] = "abcdefghijklmnopqrstuvwxyz0123456789.-_";
    for (;;) {
        switch (tu_below(r, 5)) {
        case 0:
            snprintf(buf, cap, "%u.%u.%u.%u", tu_below(r, 256), tu_below(r, 256),
                     tu_below(r, 256), tu_below(r, 256));
            return;
        case 1:
            snprintf(buf, cap, "cache-%u.example.com", tu_below(r, 100000));
            return;
        case 2:
            snprintf(buf, cap, "mc%02u.dc%u.internal", tu_below(r, 100), tu_below(r, 9));
            return;
        default: {
            size_t len = 3 + tu_below(r, 40);
            buf[0] = alnum[tu_below(r, sizeof(alnum) - 1)];
            for (size_t i = 1; i + 1 < len; i++)
                buf[i] = mid[tu_below(r, sizeof(mid) - 1)];
            buf[len - 1] = alnum[tu_below(r, sizeof(alnum) - 1)];
            buf[len] = '\0';
            bool digits = true;
            for (size_t i = 0; i < len; i++)
                digits = digits && buf[i] >= '0' && buf[i] <= '9';
            if (!digits && !is_keyword(buf))
                return;
        }
        }
    }
}

static bool duplicate(const cfgspec *c, int upto, const char *host, int port)
{
    int p = port ? port : 11211;
    for (int i = 0; i < upto; i++)
        if ((c->srv[i].port ? c->srv[i].port : 11211) == p && strcmp(c->srv[i].host, host) == 0)
            return true;
    return false;
}

static void push_op(cfgspec *c, op o)
{
    ck_assert(c->nops < MAX_OPS);
    c->ops[c->nops++] = o;
}

static op behavior_op(tu_rng *r, int b, uint64_t v)
{
    op o = {OP_BEHAVIOR, -1, b, v, tu_below(r, 3) == 0};
    return o;
}

/* The distribution setting that leads to family `fam`. */
static op family_op(tu_rng *r, int fam)
{
    switch (fam) {
    case FAM_MODULA:
        return tu_below(r, 2) ? behavior_op(r, MEMCACHED_BEHAVIOR_KETAMA, 0)
                              : behavior_op(r, MEMCACHED_BEHAVIOR_DISTRIBUTION,
                                            MEMCACHED_DISTRIBUTION_MODULA);
    case FAM_CONSISTENT:
        return behavior_op(r, MEMCACHED_BEHAVIOR_DISTRIBUTION, MEMCACHED_DISTRIBUTION_CONSISTENT);
    case FAM_KETAMA:
        switch (tu_below(r, 3)) {
        case 0: return behavior_op(r, MEMCACHED_BEHAVIOR_KETAMA, 1 + tu_below(r, 3));
        case 1: return behavior_op(r, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 0);
        default:
            return behavior_op(r, MEMCACHED_BEHAVIOR_DISTRIBUTION,
                               MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA);
        }
    case FAM_WEIGHTED:
        return tu_below(r, 2) ? behavior_op(r, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1)
                              : behavior_op(r, MEMCACHED_BEHAVIOR_DISTRIBUTION,
                                            MEMCACHED_DISTRIBUTION_CONSISTENT_WEIGHTED);
    default: /* spy: weighting is whatever came before, see gen_config */
        return behavior_op(r, MEMCACHED_BEHAVIOR_DISTRIBUTION,
                           MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY);
    }
}

/* A random placement-relevant behaviour setting. */
static op random_behavior(tu_rng *r)
{
    switch (tu_below(r, 8)) {
    case 0:
    case 1: return behavior_op(r, MEMCACHED_BEHAVIOR_HASH, usable_hashes[tu_below(r, NUSABLE)]);
    case 2: return behavior_op(r, MEMCACHED_BEHAVIOR_KETAMA_HASH, usable_hashes[tu_below(r, NUSABLE)]);
    case 3: return behavior_op(r, MEMCACHED_BEHAVIOR_SORT_HOSTS, tu_below(r, 2));
    case 4: return behavior_op(r, MEMCACHED_BEHAVIOR_HASH_WITH_PREFIX_KEY, tu_below(r, 2));
    case 5: return behavior_op(r, MEMCACHED_BEHAVIOR_KETAMA, tu_below(r, 2));
    case 6: return behavior_op(r, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, tu_below(r, 2));
    default: {
        static const int d[] = {MEMCACHED_DISTRIBUTION_MODULA, MEMCACHED_DISTRIBUTION_CONSISTENT,
                                MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA,
                                MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY,
                                MEMCACHED_DISTRIBUTION_CONSISTENT_WEIGHTED};
        return behavior_op(r, MEMCACHED_BEHAVIOR_DISTRIBUTION, (uint64_t)d[tu_below(r, 5)]);
    }
    }
}

/* A server count: mostly small, sometimes up to the reference's limit. */
static int gen_count(tu_rng *r)
{
    switch (tu_below(r, 4)) {
    case 0: return 1 + (int)tu_below(r, 4);
    case 1: return 2 + (int)tu_below(r, 15);
    case 2: return 10 + (int)tu_below(r, 40);
    default: return 1 + (int)tu_below(r, MAX_SERVERS);
    }
}

/* A random configuration aiming at family `fam`. */
static void gen_config(tu_rng *r, cfgspec *c, int fam)
{
    const char *stmts[MAX_SERVERS + 32];
    static char stmtbuf[MAX_SERVERS + 32][320];
    int ns = 0;
    bool weights = fam == FAM_WEIGHTED || fam == FAM_SPY_WEIGHTED || tu_below(r, 3) == 0;

    memset(c, 0, sizeof(*c));
    c->nsrv = gen_count(r);
    for (int i = 0; i < c->nsrv; i++) {
        srvspec *s = &c->srv[i];
        do {
            gen_host(r, s->host, sizeof(s->host));
            switch (tu_below(r, 5)) {
            case 0: s->port = 11211; break;
            case 1: s->port = 11212 + (int)tu_below(r, 8); break;
            case 2: s->port = 1 + (int)tu_below(r, 65535); break;
            default: s->port = 0; break;
            }
        } while (duplicate(c, i, s->host, s->port));
        if (weights && tu_below(r, 6) != 0) {
            s->weight_given = true;
            s->weight = tu_below(r, 4) == 0 ? tu_below(r, 200) : tu_below(r, 8);
        }
        s->in_string = tu_below(r, 3) != 0;
    }

    /* The option string: servers and settings in a random order. */
    for (int i = 0; i < c->nsrv; i++) {
        const srvspec *s = &c->srv[i];
        if (!s->in_string)
            continue;
        char *b = stmtbuf[ns];
        int o = snprintf(b, 320, "%s%s", tu_below(r, 8) == 0 ? "--server=" : "--SERVER=", s->host);
        if (s->port != 0)
            o += snprintf(b + o, 320 - (size_t)o, ":%d", s->port);
        else if (tu_below(r, 6) == 0)
            o += snprintf(b + o, 320 - (size_t)o, ":11211");
        if (s->weight_given)
            snprintf(b + o, 320 - (size_t)o, "/?%u", (unsigned)s->weight);
        stmts[ns] = b;
        ns++;
    }
    if (tu_below(r, 2) == 0) {
        snprintf(stmtbuf[ns], 320, "--HASH=%s", opt_hashes[tu_below(r, NOPTHASHES)]);
        stmts[ns] = stmtbuf[ns];
        ns++;
    }
    if (tu_below(r, 3) == 0) {
        switch (tu_below(r, 3)) {
        case 0: snprintf(stmtbuf[ns], 320, "--DISTRIBUTION=consistent"); break;
        case 1: snprintf(stmtbuf[ns], 320, "--DISTRIBUTION=modula"); break;
        default:
            snprintf(stmtbuf[ns], 320, "--DISTRIBUTION=consistent,%s",
                     opt_hashes[tu_below(r, NOPTHASHES)]);
        }
        stmts[ns] = stmtbuf[ns];
        ns++;
    }
    if (tu_below(r, 4) == 0)
        stmts[ns++] = "--SORT-HOSTS";
    if (tu_below(r, 3) == 0) {
        /* a word of the scanner (not an address, number or keyword), or a
         * quoted string */
        if (tu_below(r, 2))
            snprintf(stmtbuf[ns], 320, "--NAMESPACE=app%u.v%u_x", tu_below(r, 1000), tu_below(r, 10));
        else
            snprintf(stmtbuf[ns], 320, "--NAMESPACE=\"app:%u/%u\"", tu_below(r, 100000),
                     tu_below(r, 10));
        stmts[ns] = stmtbuf[ns];
        ns++;
        c->hwn_possible = true;
    }
    if (tu_below(r, 3) == 0) {
        stmts[ns++] = "--HASH-WITH-NAMESPACE";
        c->hwn_possible = true;
    }
    for (int k = (int)tu_below(r, 4); k > 0; k--)
        stmts[ns++] = noise_options[tu_below(r, NNOISE)];
    for (int i = ns - 1; i > 0; i--) {
        int j = (int)tu_below(r, (uint32_t)i + 1);
        const char *t = stmts[i];
        stmts[i] = stmts[j];
        stmts[j] = t;
    }
    size_t o = 0;
    for (int i = 0; i < ns; i++) {
        if (i > 0) {
            static const char *const seps[] = {" ", " ", " ", " ", "\t ", " \n", "\r\n "};
            o = append(c->opts, o, seps[tu_below(r, 7)]);
        }
        o = append(c->opts, o, stmts[i]);
    }

    /* Then behaviours and the remaining servers, interleaved. */
    int pending[MAX_SERVERS], np = 0;
    for (int i = 0; i < c->nsrv; i++)
        if (!c->srv[i].in_string)
            pending[np++] = i;
    for (int k = (int)tu_below(r, 7); k > 0; k--)
        push_op(c, random_behavior(r));
    if (fam == FAM_SPY_WEIGHTED)
        push_op(c, behavior_op(r, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1));
    if (fam == FAM_SPY && tu_below(r, 2))
        push_op(c, behavior_op(r, MEMCACHED_BEHAVIOR_KETAMA, 1)); /* weighting off */
    int split = np ? (int)tu_below(r, (uint32_t)np + 1) : 0;
    for (int i = 0; i < split; i++) {
        op a = {OP_ADD, pending[i], 0, 0, false};
        push_op(c, a);
        if (tu_below(r, 5) == 0)
            push_op(c, random_behavior(r));
    }
    push_op(c, family_op(r, fam));
    for (int i = split; i < np; i++) {
        op a = {OP_ADD, pending[i], 0, 0, false};
        push_op(c, a);
        if (tu_below(r, 6) == 0)
            push_op(c, behavior_op(r, MEMCACHED_BEHAVIOR_HASH, usable_hashes[tu_below(r, NUSABLE)]));
    }
    if (tu_below(r, 2))
        push_op(c, behavior_op(r, MEMCACHED_BEHAVIOR_HASH, usable_hashes[tu_below(r, NUSABLE)]));
    for (int i = 0; i < c->nops; i++)
        if (c->ops[i].kind == OP_BEHAVIOR && c->ops[i].behavior == MEMCACHED_BEHAVIOR_HASH_WITH_PREFIX_KEY)
            c->hwn_possible = true;
}

/* Human-readable description of a configuration, for failure messages. */
static const char *describe(const cfgspec *c)
{
    static char buf[OPTS_MAX + 8192];
    size_t o = (size_t)snprintf(buf, sizeof(buf), "memcached(\"%s\")", c->opts);
    for (int i = 0; i < c->nops && o < sizeof(buf) - 200; i++) {
        const op *p = &c->ops[i];
        if (p->kind == OP_ADD)
            o += (size_t)snprintf(buf + o, sizeof(buf) - o, "; add(%s, %d, %u)",
                                  c->srv[p->srv].host, c->srv[p->srv].port,
                                  (unsigned)c->srv[p->srv].weight);
        else
            o += (size_t)snprintf(buf + o, sizeof(buf) - o, "; %s=%llu%s",
                                  libmemcached_string_behavior((memcached_behavior_t)p->behavior),
                                  (unsigned long long)p->value, p->by_name ? " (by name)" : "");
    }
    return buf;
}

static memcached_st *build_reference(const cfgspec *c)
{
    memcached_st *m = c->opts[0] ? memcached(c->opts, strlen(c->opts)) : memcached_create(NULL);
    ck_assert_msg(m != NULL, "libmemcached refused %s", describe(c));
    for (int i = 0; i < c->nops; i++) {
        const op *p = &c->ops[i];
        memcached_return_t rc;
        if (p->kind == OP_ADD)
            rc = memcached_server_add_with_weight(m, c->srv[p->srv].host,
                                                  (in_port_t)c->srv[p->srv].port,
                                                  c->srv[p->srv].weight);
        else
            rc = memcached_behavior_set(m, (memcached_behavior_t)p->behavior, p->value);
        ck_assert_msg(rc == MEMCACHED_SUCCESS, "libmemcached step %d failed: %s", i,
                      describe(c));
    }
    return m;
}

/* Text for a behaviour and value, as mcr_lmc_set_behavior_name() takes it. */
static void behavior_text(tu_rng *r, const op *p, char *name, char *value)
{
    static const char *const dist[] = {"modula", "consistent", "ketama", "random", "spy",
                                       "weighted", "virtual_bucket"};
    const char *full = libmemcached_string_behavior((memcached_behavior_t)p->behavior);
    strcpy(name, tu_below(r, 2) ? full : full + strlen("MEMCACHED_BEHAVIOR_"));
    if (p->behavior == MEMCACHED_BEHAVIOR_DISTRIBUTION && tu_below(r, 3))
        strcpy(value, dist[p->value]);
    else if ((p->behavior == MEMCACHED_BEHAVIOR_HASH ||
              p->behavior == MEMCACHED_BEHAVIOR_KETAMA_HASH) && tu_below(r, 3))
        strcpy(value, mcr_hash_name((mcr_hash)p->value));
    else
        sprintf(value, "%llu", (unsigned long long)p->value);
}

static mcr_lmc *build_mcr(tu_rng *r, const cfgspec *c)
{
    mcr_lmc *l = mcr_lmc_new();
    mcr_error e;
    ck_assert(l != NULL);
    if (c->opts[0])
        ck_assert_msg(mcr_lmc_parse_options(l, c->opts, &e) == MCR_OK, "%s: %s", e.message,
                      describe(c));
    for (int i = 0; i < c->nops; i++) {
        const op *p = &c->ops[i];
        int rc;
        if (p->kind == OP_ADD) {
            rc = mcr_lmc_add_server(l, c->srv[p->srv].host, c->srv[p->srv].port,
                                    c->srv[p->srv].weight, &e);
        } else if (p->by_name) {
            char name[96], value[64];
            behavior_text(r, p, name, value);
            rc = mcr_lmc_set_behavior_name(l, name, value, &e);
        } else {
            rc = mcr_lmc_set_behavior(l, (mcr_lmc_behavior)p->behavior, p->value, &e);
        }
        ck_assert_msg(rc == MCR_OK, "mcr_lmc step %d: %s; %s", i, e.message, describe(c));
    }
    return l;
}

static int family_of(memcached_st *m)
{
    uint64_t d = memcached_behavior_get(m, MEMCACHED_BEHAVIOR_DISTRIBUTION);
    bool w = m->ketama.weighted_;
    switch (d) {
    case MEMCACHED_DISTRIBUTION_MODULA: return FAM_MODULA;
    case MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY: return w ? FAM_SPY_WEIGHTED : FAM_SPY;
    case MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA: return w ? FAM_WEIGHTED : FAM_KETAMA;
    case MEMCACHED_DISTRIBUTION_CONSISTENT: return w ? FAM_WEIGHTED : FAM_CONSISTENT;
    default: return FAM_WEIGHTED;
    }
}

/* ------------------------------------------------------------------ differential */


static void run_family(int fam, int nconfigs, size_t keys_per_config, uint64_t salt)
{
    tu_rng r;
    static cfgspec c;
    size_t fams[FAM_COUNT] = {0};

    tu_rng_init(&r, salt);
    nconfigs = tu_cases(nconfigs);
    for (int i = 0; i < nconfigs; i++) {
        gen_config(&r, &c, fam);
        memcached_st *m = build_reference(&c);
        mcr_lmc *l = build_mcr(&r, &c);
        mcr_ring *ring = NULL;
        mcr_error e;
        ck_assert_msg(mcr_lmc_ring(l, &ring, &e) == MCR_OK, "%s; %s", e.message, describe(&c));
        fams[family_of(m)]++;
        compare_keys(&r, m, ring, keys_per_config, c.hwn_possible, describe(&c));
        g_configs++;
        mcr_ring_free(ring);
        mcr_lmc_free(l);
        memcached_free(m);
    }
    /* The final distribution step makes the family the intended one, except
     * that a weight > 1 added later turns weighting on. */
    print_counts(fam_names[fam]);
    ck_assert_msg(fams[fam] >= (size_t)nconfigs / 2, "only %zu of %d configs ended as %s",
                  fams[fam], nconfigs, fam_names[fam]);
}

#define CONFIGS_PER_FAMILY 110
#define KEYS_PER_CONFIG 1600

START_TEST(differential_modula) { run_family(FAM_MODULA, CONFIGS_PER_FAMILY, KEYS_PER_CONFIG, 11); }
END_TEST
START_TEST(differential_consistent) { run_family(FAM_CONSISTENT, CONFIGS_PER_FAMILY, KEYS_PER_CONFIG, 12); }
END_TEST
START_TEST(differential_ketama) { run_family(FAM_KETAMA, CONFIGS_PER_FAMILY, KEYS_PER_CONFIG, 13); }
END_TEST
START_TEST(differential_weighted) { run_family(FAM_WEIGHTED, CONFIGS_PER_FAMILY, KEYS_PER_CONFIG, 14); }
END_TEST
START_TEST(differential_spy) { run_family(FAM_SPY, CONFIGS_PER_FAMILY, KEYS_PER_CONFIG, 15); }
END_TEST
START_TEST(differential_spy_weighted) { run_family(FAM_SPY_WEIGHTED, CONFIGS_PER_FAMILY, KEYS_PER_CONFIG, 16); }
END_TEST

/* mcr_memcached_st_ring on the same kind of random handles. */
START_TEST(from_memcached_random)
{
    tu_rng r;
    static cfgspec c;
    tu_rng_init(&r, 21);
    for (int i = 0; i < tu_cases(240); i++) {
        gen_config(&r, &c, i % FAM_COUNT);
        memcached_st *m = build_reference(&c);
        mcr_ring *ring = NULL, *ring2 = NULL;
        mcr_error e;
        ck_assert_msg(mcr_memcached_st_ring(m, &ring, &e) == MCR_OK, "%s; %s", e.message,
                      describe(&c));
        compare_keys(&r, m, ring, 1000, c.hwn_possible, describe(&c));
        g_configs++;
        /* The same placement as the mcr_lmc route. */
        mcr_lmc *l = build_mcr(&r, &c);
        ck_assert_int_eq(mcr_lmc_ring(l, &ring2, NULL), MCR_OK);
        ck_assert_uint_eq(mcr_ring_mode(ring), mcr_ring_mode(ring2));
        for (int k = 0; k < 200; k++) {
            unsigned char key[320];
            size_t len = gen_key(&r, key, c.hwn_possible);
            EXPECT_UINT(mcr_ring_locate(ring, key, len), ==, mcr_ring_locate(ring2, key, len));
        }
        mcr_ring_free(ring2);
        mcr_lmc_free(l);
        mcr_ring_free(ring);
        memcached_free(m);
    }
    print_counts("from_memcached_random");
}
END_TEST

/* Weighted handles where weights are large, skewed, or give a server no
 * point at all: the weights must be recovered from the continuum. */
START_TEST(from_memcached_weights)
{
    tu_rng r;
    tu_rng_init(&r, 22);
    for (int i = 0; i < tu_cases(60); i++) {
        memcached_st *m = memcached_create(NULL);
        int n = 2 + (int)tu_below(&r, 99);
        /* weighted ketama, or spy with weighting on */
        memcached_behavior_set(m, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1);
        if (i % 2 == 0)
            memcached_behavior_set(m, MEMCACHED_BEHAVIOR_DISTRIBUTION,
                                   MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY);
        for (int s = 0; s < n; s++) {
            char host[64];
            uint32_t w;
            switch (i % 4) {
            case 0: w = 1 + tu_below(&r, 3); break;
            case 1: w = 1 + tu_below(&r, 100000); break;
            case 2: w = s == 0 ? 5000 : 1 + tu_below(&r, 2); break; /* tiny shares */
            default: w = 7; break;
            }
            snprintf(host, sizeof(host), "w%d-%u.example.net", s, tu_below(&r, 1000));
            ck_assert_int_eq(memcached_server_add_with_weight(m, host, (in_port_t)(11211 + s % 3), w),
                             MEMCACHED_SUCCESS);
        }
        mcr_ring *ring = NULL;
        mcr_error e;
        ck_assert_msg(mcr_memcached_st_ring(m, &ring, &e) == MCR_OK, "case %d: %s", i,
                      e.message);
        compare_keys(&r, m, ring, 3000, false, "from_memcached_weights");
        g_configs++;
        mcr_ring_free(ring);
        memcached_free(m);
    }
    print_counts("from_memcached_weights");
}
END_TEST

/* ------------------------------------------------------------------ label hash */

/* True if rings a and b (same servers) put every hash value in [0, hmax]
 * on the same server: compared at every value with crc (hmax 32767), else
 * at every point of both rings and at the top, where owners can change. */
static bool same_placement(const mcr_ring *a, const mcr_ring *b, uint32_t hmax)
{
    if (hmax <= 0xffff) {
        for (uint32_t h = 0; h <= hmax; h++)
            if (mcr_ring_find(a, h) != mcr_ring_find(b, h))
                return false;
        return true;
    }
    const mcr_ring *both[2] = {a, b};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < mcr_ring_point_count(both[k]); i++) {
            uint32_t v;
            mcr_ring_point(both[k], i, &v, NULL);
            if (mcr_ring_find(a, v) != mcr_ring_find(b, v))
                return false;
        }
    return mcr_ring_find(a, UINT32_MAX) == mcr_ring_find(b, UINT32_MAX);
}

static uint32_t reachable_max(const mcr_ring *ring)
{
    return mcr_ring_key_hash(ring) == MCR_HASH_CRC ? 0x7fff : UINT32_MAX;
}

/* Key hash crc keeps 15 bits, so the 320 probe keys of
 * mcr_memcached_st_ring() cannot tell most label hashes apart: here
 * md5 valued the labels, and the other candidates agree with it on nearly
 * every key. The ring must agree with libmemcached on every one of the
 * 32,768 crc values, reached by keys. */
START_TEST(from_memcached_crc_label_hash)
{
    memcached_st *m = memcached_create(NULL);
    mcr_ring *ring = NULL;
    mcr_error e;
    static unsigned char seen[32768];
    size_t covered = 0, compared = 0;

    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_HASH, MEMCACHED_HASH_MD5);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_DISTRIBUTION, MEMCACHED_DISTRIBUTION_CONSISTENT);
    memcached_server_add(m, "h724-0.example", 11211);
    memcached_server_add(m, "h724-1.example", 11211);
    memcached_server_add(m, "h724-2.example", 11211);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_HASH, MEMCACHED_HASH_CRC);
    ck_assert_msg(mcr_memcached_st_ring(m, &ring, &e) == MCR_OK, "%s", e.message);
    ck_assert_uint_eq(memcached_generate_hash(m, "key38548", 8), 2);
    ck_assert_uint_eq(mcr_ring_locate(ring, "key38548", 8), 2);
    memset(seen, 0, sizeof(seen));
    for (uint32_t i = 0; covered < 32768 && i < 4000000; i++) {
        char key[24];
        int len = snprintf(key, sizeof(key), "key%u", i);
        uint32_t h = mcr_ring_hash(ring, key, (size_t)len);
        ck_assert_uint_le(h, 0x7fff);
        if (seen[h])
            continue;
        seen[h] = 1;
        covered++;
        compared++;
        ck_assert_msg(memcached_generate_hash(m, key, (size_t)len) ==
                          mcr_ring_locate(ring, key, (size_t)len),
                      "key %s (crc %u): libmemcached %u, mcroute %u", key, (unsigned)h,
                      (unsigned)memcached_generate_hash(m, key, (size_t)len),
                      (unsigned)mcr_ring_locate(ring, key, (size_t)len));
    }
    ck_assert_uint_eq(covered, 32768);
    g_keys += compared;
    g_configs++;
    mcr_ring_free(ring);
    memcached_free(m);
    print_counts("from_memcached_crc_label_hash");
}
END_TEST

/* Hosts with a label that the given hash values below 202, the lowest crc
 * value of the probe keys of mcr_memcached_st_ring() (found by search;
 * checked below). With key hash crc, the server owning that point gets
 * only keys that no probe has, so label hashes that differ exactly there
 * pass every probe. style 0: labels "host-i" (consistent and ketama,
 * port 11211); 1: "/host:11211-i" (spy). */
static const struct {
    mcr_hash hash;
    int style;
    const char *host;
} low_label_hosts[] = {
    {MCR_HASH_DEFAULT, 0, "hot113766.example"}, {MCR_HASH_DEFAULT, 1, "hot113804.example"},
    {MCR_HASH_MD5, 0, "hot171301.example"},     {MCR_HASH_MD5, 1, "hot583574.example"},
    {MCR_HASH_FNV1_64, 0, "hot937099.example"}, {MCR_HASH_FNV1_64, 1, "hot3903288.example"},
    {MCR_HASH_FNV1A_64, 0, "hot84901.example"}, {MCR_HASH_FNV1A_64, 1, "hot197114.example"},
    {MCR_HASH_FNV1_32, 0, "hot1131695.example"}, {MCR_HASH_FNV1_32, 1, "hot51398.example"},
    {MCR_HASH_FNV1A_32, 0, "hot32207.example"}, {MCR_HASH_FNV1A_32, 1, "hot195273.example"},
    {MCR_HASH_MURMUR, 0, "hot68252.example"},   {MCR_HASH_MURMUR, 1, "hot41761.example"},
    {MCR_HASH_JENKINS, 0, "hot151369.example"}, {MCR_HASH_JENKINS, 1, "hot293460.example"},
    {MCR_HASH_MURMUR3, 0, "hot200283.example"}, {MCR_HASH_MURMUR3, 1, "hot67157.example"},
};

/* Handles whose continuum has a point below every probe's crc value, the
 * labels valued by another hash than the key hash crc. */
START_TEST(from_memcached_crc_low_points)
{
    tu_rng r;
    size_t n_low = 0;
    tu_rng_init(&r, 23);
    for (size_t t = 0; t < sizeof(low_label_hosts) / sizeof(low_label_hosts[0]); t++) {
        for (int v = 0; v < 12; v++) {
            const char *hosts[4];
            char other[3][32];
            int n = 2 + (int)tu_below(&r, 3), hot = (int)tu_below(&r, (uint32_t)n), o = 0;
            int dist = low_label_hosts[t].style ? MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY
                       : v % 2 ? MEMCACHED_DISTRIBUTION_CONSISTENT
                               : MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA;
            int dist_at = (int)tu_below(&r, (uint32_t)n + 1); /* before add number dist_at */
            for (int i = 0; i < n; i++) {
                if (i == hot) {
                    hosts[i] = low_label_hosts[t].host;
                } else {
                    snprintf(other[o], sizeof(other[o]), "peer%u-%d.example", tu_below(&r, 100000), i);
                    hosts[i] = other[o++];
                }
            }
            memcached_st *m = memcached_create(NULL);
            mcr_config *cfg = mcr_config_new();
            mcr_ring *want = NULL, *ring = NULL;
            mcr_error e;
            memcached_behavior_set(m, MEMCACHED_BEHAVIOR_HASH, (uint64_t)low_label_hosts[t].hash);
            for (int i = 0; i <= n; i++) {
                if (i == dist_at)
                    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_DISTRIBUTION, (uint64_t)dist);
                if (i < n) {
                    memcached_server_add(m, hosts[i], 11211);
                    mcr_config_add_server(cfg, hosts[i], 11211, 1, NULL);
                }
            }
            memcached_behavior_set(m, MEMCACHED_BEHAVIOR_HASH, MEMCACHED_HASH_CRC);
            mcr_config_set_mode(cfg, low_label_hosts[t].style ? MCR_MODE_SPY : MCR_MODE_CONSISTENT);
            mcr_config_set_hash(cfg, MCR_HASH_CRC);
            mcr_config_set_point_hash(cfg, low_label_hosts[t].hash);
            ck_assert_int_eq(mcr_ring_new(cfg, &want, NULL), MCR_OK);
            uint32_t first;
            mcr_ring_point(want, 0, &first, NULL);
            ck_assert_msg(first < 202, "%s: lowest point %u", low_label_hosts[t].host,
                          (unsigned)first);
            ck_assert_msg(mcr_memcached_st_ring(m, &ring, &e) == MCR_OK, "%s: %s",
                          low_label_hosts[t].host, e.message);
            ck_assert_msg(same_placement(ring, want, 0x7fff), "%s (%s), %d servers, hot %d",
                          low_label_hosts[t].host, mcr_hash_name(low_label_hosts[t].hash), n,
                          hot);
            /* and libmemcached itself, on keys hashing below 1024 */
            for (int k = 0, low = 0; low < 48 && k < 200000; k++) {
                char key[32];
                size_t len = tu_key(&r, key, 24);
                if (mcr_ring_hash(ring, key, len) >= 1024)
                    continue;
                low++;
                n_low++;
                ck_assert_uint_eq(mcr_ring_locate(ring, key, len),
                                  memcached_generate_hash(m, key, len));
            }
            compare_keys(&r, m, ring, 200, false, low_label_hosts[t].host);
            g_configs++;
            mcr_ring_free(ring);
            mcr_ring_free(want);
            mcr_config_free(cfg);
            memcached_free(m);
        }
    }
    g_keys += n_low;
    print_counts("from_memcached_crc_low_points");
}
END_TEST

/* Many small handles with the key hash set before and after the
 * distribution and the adds (so labels and keys often use different
 * hashes), every hash including crc: the ring must place every hash value
 * the key hash can produce as mcr_lmc does (itself checked against
 * libmemcached above), and keys as libmemcached does. */
START_TEST(from_memcached_label_hash_sweep)
{
    static const int dists[] = {MEMCACHED_DISTRIBUTION_CONSISTENT,
                                MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA,
                                MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY};
    tu_rng r;
    size_t differ = 0;
    tu_rng_init(&r, 24);
    for (int it = 0; it < tu_cases(2000); it++) {
        const char *opts = NULL;
        char ns[64];
        int n = 2 + (int)tu_below(&r, 3);
        int dist = dists[tu_below(&r, 3)];
        int dist_at = (int)tu_below(&r, (uint32_t)n + 1);
        int hash_at = (int)tu_below(&r, (uint32_t)n + 2); /* a second HASH, n + 1: none */
        uint64_t h1 = usable_hashes[tu_below(&r, NUSABLE)];
        uint64_t h2 = usable_hashes[tu_below(&r, NUSABLE)];
        uint64_t h3 = usable_hashes[tu_below(&r, NUSABLE)];
        if (tu_below(&r, 4) == 0) {
            snprintf(ns, sizeof(ns), "--NAMESPACE=ns%u --HASH-WITH-NAMESPACE", tu_below(&r, 1000));
            opts = ns;
        }
        memcached_st *m = opts ? memcached(opts, strlen(opts)) : memcached_create(NULL);
        mcr_lmc *l = mcr_lmc_new();
        ck_assert(m != NULL && l != NULL);
        if (opts)
            ck_assert_int_eq(mcr_lmc_parse_options(l, opts, NULL), MCR_OK);
#define BOTH(b, v)                                                                        \
    do {                                                                                  \
        ck_assert_int_eq(memcached_behavior_set(m, (b), (v)), MEMCACHED_SUCCESS);         \
        ck_assert_int_eq(mcr_lmc_set_behavior(l, (mcr_lmc_behavior)(b), (v), NULL), MCR_OK); \
    } while (0)
        if (tu_below(&r, 4) != 0)
            BOTH(MEMCACHED_BEHAVIOR_HASH, h1);
        for (int i = 0; i <= n; i++) {
            if (i == dist_at)
                BOTH(MEMCACHED_BEHAVIOR_DISTRIBUTION, (uint64_t)dist);
            if (i == hash_at)
                BOTH(MEMCACHED_BEHAVIOR_HASH, h2);
            if (i < n) {
                char host[48];
                int port = tu_below(&r, 4) ? 11211 : 11212 + (int)tu_below(&r, 50);
                snprintf(host, sizeof(host), "s%u-%d.example", tu_below(&r, 1000000), i);
                ck_assert_int_eq(memcached_server_add(m, host, (in_port_t)port), MEMCACHED_SUCCESS);
                ck_assert_int_eq(mcr_lmc_add_server(l, host, port, 1, NULL), MCR_OK);
            }
        }
        if (tu_below(&r, 4) != 0)
            BOTH(MEMCACHED_BEHAVIOR_HASH, h3);
#undef BOTH
        mcr_ring *ring = NULL, *want = NULL;
        mcr_error e, untouched;
        memset(&e, 0x5a, sizeof(e));
        memcpy(&untouched, &e, sizeof(e));
        ck_assert_msg(mcr_memcached_st_ring(m, &ring, &e) == MCR_OK, "handle %d: %s", it,
                      e.message);
        ck_assert_msg(memcmp(&e, &untouched, sizeof(e)) == 0, "handle %d: err written on success",
                      it);
        ck_assert_int_eq(mcr_lmc_ring(l, &want, NULL), MCR_OK);
        ck_assert_msg(same_placement(ring, want, reachable_max(want)),
                      "handle %d: labels %llu/%llu, keys %s, %d servers", it,
                      (unsigned long long)h1, (unsigned long long)h2,
                      mcr_hash_name(mcr_ring_key_hash(want)), n);
        /* (the label hash itself may differ where no key can tell) */
        uint32_t v1, v2;
        mcr_ring_point(ring, 0, &v1, NULL);
        mcr_ring_point(want, 0, &v2, NULL);
        differ += v1 != v2;
        compare_keys(&r, m, ring, 150, opts != NULL, "from_memcached_label_hash_sweep");
        g_configs++;
        mcr_ring_free(ring);
        mcr_ring_free(want);
        mcr_lmc_free(l);
        memcached_free(m);
    }
    print_counts("from_memcached_label_hash_sweep");
    printf("from_memcached_label_hash_sweep: %zu rings with another, equivalent label hash\n",
           differ);
}
END_TEST

/* ------------------------------------------------------------------ refused handles */

static uint32_t constant_hash(const char *key, size_t len, void *ctx)
{
    (void)key;
    (void)len;
    (void)ctx;
    return 42;
}

START_TEST(from_memcached_bad_inputs)
{
    mcr_ring *ring = NULL;
    mcr_error e;
    memcached_st *m = memcached_create(NULL);

    ck_assert_int_eq(mcr_memcached_st_ring(NULL, &ring, &e), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_memcached_st_ring(m, NULL, &e), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_memcached_st_ring(m, &ring, &e), MCR_ERR_EMPTY);
    memcached_server_add(m, "one.example", 11211);
    memcached_server_add(m, "two.example", 11211);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_DISTRIBUTION, MEMCACHED_DISTRIBUTION_RANDOM);
    ck_assert_int_eq(mcr_memcached_st_ring(m, &ring, &e), MCR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(e.message, "random") != NULL, "%s", e.message);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_DISTRIBUTION, MEMCACHED_DISTRIBUTION_CONSISTENT);
    memcached_server_add(m, "two.example", 11211); /* libmemcached keeps duplicates */
    ck_assert_int_eq(mcr_memcached_st_ring(m, &ring, &e), MCR_ERR_DUPLICATE);
    ck_assert_msg(strstr(e.message, "two.example") != NULL, "%s", e.message);
    memcached_free(m);

    const char *sock = "--SERVER=one.example --SOCKET=\"/tmp/mcr.sock\"";
    m = memcached(sock, strlen(sock));
    ck_assert(m != NULL);
    ck_assert_int_eq(mcr_memcached_st_ring(m, &ring, &e), MCR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(e.message, "socket") != NULL, "%s", e.message);
    memcached_free(m);

    /* a custom hash function */
    const char *two = "--SERVER=one.example --SERVER=two.example";
    m = memcached(two, strlen(two));
    hashkit_st *hk = hashkit_create(NULL);
    ck_assert_int_eq(hashkit_set_custom_function(hk, constant_hash, NULL), HASHKIT_SUCCESS);
    memcached_set_hashkit(m, hk);
    hashkit_free(hk);
    ck_assert_int_eq(mcr_memcached_st_ring(m, &ring, &e), MCR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(e.message, "custom") != NULL, "%s", e.message);
    memcached_free(m);
    ck_assert(ring == NULL);

    /* one server: everything on it */
    const char *one = "--SERVER=one.example --DISTRIBUTION=consistent";
    m = memcached(one, strlen(one));
    ck_assert_int_eq(mcr_memcached_st_ring(m, &ring, &e), MCR_OK);
    ck_assert_uint_eq(mcr_ring_locate(ring, "k", 1), 0);
    mcr_ring_free(ring);
    memcached_free(m);
}
END_TEST

static Suite *compat_suite(void)
{
    Suite *s = suite_create("compat_libmemcached");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, differential_modula);
    tcase_add_test(t, differential_consistent);
    tcase_add_test(t, differential_ketama);
    tcase_add_test(t, differential_weighted);
    tcase_add_test(t, differential_spy);
    tcase_add_test(t, differential_spy_weighted);
    tcase_add_test(t, from_memcached_random);
    tcase_add_test(t, from_memcached_weights);
    tcase_add_test(t, from_memcached_crc_label_hash);
    tcase_add_test(t, from_memcached_crc_low_points);
    tcase_add_test(t, from_memcached_label_hash_sweep);
    tcase_add_test(t, from_memcached_bad_inputs);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(compat_suite());
}
