/* SPDX-License-Identifier: BSD-3-Clause */
/* test_compat_libmemcached.c: mcr_lmc and mcr_memcached_st_ring against the real libmemcached 1.1.4. */
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
 * servers; larger rings are checked without it.
 */
#include <libmemcached/memcached.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mcroute_libmemcached.h"
#include "mcroute_memcached_st.h"
/* mcr_pool_options, and the pool's ranges (includes mcroute_pool.h). */
#include "mcroute_pool.h"
#include "testutil.h"

#define MAX_SERVERS 100
#define MAX_OPS 160
#define OPTS_MAX 16384

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

/* Counts of the current test (each test runs in its own process). */
static size_t g_keys, g_configs;

static void print_counts(const char *test)
{
    printf("%s: %zu configurations, %zu keys compared\n", test, g_configs, g_keys);
    fflush(stdout);
}

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

static size_t append(char *buf, size_t o, const char *s)
{
    size_t n = strlen(s);
    ck_assert_msg(o + n + 1 < OPTS_MAX, "option string too long");
    memcpy(buf + o, s, n + 1);
    return o + n;
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

/* A random key: printable or arbitrary bytes, 1..250 bytes, and with
 * `longer` sometimes up to 300 (libmemcached's prefixed-key limit). */
static size_t gen_key(tu_rng *r, unsigned char *buf, bool longer)
{
    size_t max = longer && tu_below(r, 8) == 0 ? 300 : 250;
    if (tu_below(r, 2))
        return tu_key(r, (char *)buf, max);
    size_t len = 1 + tu_below(r, (uint32_t)max);
    tu_bytes(r, buf, len);
    if (tu_below(r, 4) == 0) /* NUL bytes matter with HASH_WITH_NAMESPACE */
        buf[tu_below(r, (uint32_t)len)] = 0;
    return len;
}

/* Compare placement of `nkeys` random keys. Returns the number compared. */
static size_t compare_keys(tu_rng *r, memcached_st *m, const mcr_ring *ring, size_t nkeys,
                           bool longer, const char *what)
{
    unsigned char key[320];
    ck_assert_uint_eq(mcr_ring_server_count(ring), memcached_server_count(m));
    for (uint32_t i = 0; i < memcached_server_count(m); i++) {
        const memcached_instance_st *in = memcached_server_instance_by_position(m, i);
        ck_assert_msg(strcmp(mcr_ring_server_host(ring, i), memcached_server_name(in)) == 0 &&
                          mcr_ring_server_port(ring, i) == memcached_server_port(in),
                      "server %u: %s:%d vs libmemcached %s:%u; %s", (unsigned)i,
                      mcr_ring_server_host(ring, i), mcr_ring_server_port(ring, i),
                      memcached_server_name(in), (unsigned)memcached_server_port(in), what);
    }
    g_keys += nkeys;
    for (size_t k = 0; k < nkeys; k++) {
        size_t len = gen_key(r, key, longer);
        uint32_t want = memcached_generate_hash(m, (const char *)key, len);
        uint32_t got = mcr_ring_locate(ring, key, len);
        if (want != got) {
            char hex[700];
            for (size_t i = 0; i < len; i++)
                sprintf(hex + 2 * i, "%02x", key[i]);
            ck_abort_msg("key %s (%zu bytes): libmemcached %u, mcroute %u; %s", hex, len,
                         (unsigned)want, (unsigned)got, what);
        }
    }
    return nkeys;
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

/* ------------------------------------------------------------------ fixed vectors */

static void check_vector(const char *opts, int b1, uint64_t v1, int b2, uint64_t v2,
                         const uint32_t want[8])
{
    static const char *const keys[8] = {"user:1", "user:2", "user:3", "session:abcdef",
                                        "a", "the quick brown fox", "k42", "x"};
    mcr_lmc *l = mcr_lmc_new();
    mcr_ring *ring = NULL;
    mcr_error e;
    ck_assert_msg(mcr_lmc_parse_options(l, opts, &e) == MCR_OK, "%s", e.message);
    if (b1 >= 0)
        ck_assert_int_eq(mcr_lmc_set_behavior(l, (mcr_lmc_behavior)b1, v1, &e), MCR_OK);
    if (b2 >= 0)
        ck_assert_int_eq(mcr_lmc_set_behavior(l, (mcr_lmc_behavior)b2, v2, &e), MCR_OK);
    ck_assert_int_eq(mcr_lmc_ring(l, &ring, &e), MCR_OK);
    for (int i = 0; i < 8; i++)
        ck_assert_msg(mcr_ring_locate(ring, keys[i], strlen(keys[i])) == want[i],
                      "%s: key %s: got %u, want %u", opts, keys[i],
                      (unsigned)mcr_ring_locate(ring, keys[i], strlen(keys[i])),
                      (unsigned)want[i]);
    mcr_ring_free(ring);
    mcr_lmc_free(l);
}

/* Expected indices written down from libmemcached 1.1.4 (Debian 1.1.4-1). */
START_TEST(fixed_vectors)
{
    static const uint32_t v1[8] = {0, 1, 2, 1, 2, 2, 3, 0};
    static const uint32_t v2[8] = {3, 3, 3, 3, 3, 1, 0, 2};
    static const uint32_t v3[8] = {3, 1, 3, 0, 2, 1, 2, 1};
    static const uint32_t v4[8] = {1, 0, 3, 3, 3, 1, 2, 0};
    static const uint32_t v5[8] = {3, 0, 1, 2, 3, 1, 3, 1};
    const char *four = "--SERVER=10.0.1.1 --SERVER=10.0.1.2:11212 "
                       "--SERVER=cache-3.example.com --SERVER=cache-4.example.com:22122";
    char o[512];

    /* labels valued with one-at-a-time (the hash at the rebuild), keys
     * with fnv1a_32 */
    snprintf(o, sizeof(o), "%s --DISTRIBUTION=consistent --HASH=fnv1a_32", four);
    check_vector(o, -1, 0, -1, 0, v1);
    /* the other order: both with fnv1a_32 */
    snprintf(o, sizeof(o), "--HASH=fnv1a_32 %s --DISTRIBUTION=consistent", four);
    check_vector(o, -1, 0, -1, 0, v2);
    check_vector("--SERVER=10.0.1.1/?1 --SERVER=10.0.1.2:11212/?3 "
                 "--SERVER=cache-3.example.com/?2 --SERVER=cache-4.example.com:22122/?5",
                 MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1, -1, 0, v3);
    snprintf(o, sizeof(o), "%s --HASH=crc", four);
    check_vector(o, -1, 0, -1, 0, v4);
    snprintf(o, sizeof(o), "%s --NAMESPACE=\"app1:\" --HASH-WITH-NAMESPACE --SORT-HOSTS", four);
    check_vector(o, MEMCACHED_BEHAVIOR_DISTRIBUTION, MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY,
                 MEMCACHED_BEHAVIOR_HASH, MEMCACHED_HASH_MURMUR3, v5);
}
END_TEST

/* ------------------------------------------------------------------ state machine */

/* Build both sides from an option string and API steps written as text,
 * and compare on keys. Steps: "B<behavior>=<value>" or "A<host>:<port>/<w>". */
static void check_script(const char *opts, const char *const *steps, size_t nsteps)
{
    tu_rng r;
    memcached_st *m = opts ? memcached(opts, strlen(opts)) : memcached_create(NULL);
    mcr_lmc *l = mcr_lmc_new();
    mcr_ring *ring = NULL;
    mcr_error e;

    tu_rng_init(&r, 31);
    ck_assert_msg(m != NULL, "libmemcached refused %s", opts);
    if (opts)
        ck_assert_msg(mcr_lmc_parse_options(l, opts, &e) == MCR_OK, "%s", e.message);
    for (size_t i = 0; i < nsteps; i++) {
        if (steps[i][0] == 'B') {
            int b;
            unsigned long long v;
            ck_assert(sscanf(steps[i] + 1, "%d=%llu", &b, &v) == 2);
            ck_assert_int_eq(memcached_behavior_set(m, (memcached_behavior_t)b, v), MEMCACHED_SUCCESS);
            ck_assert_msg(mcr_lmc_set_behavior(l, (mcr_lmc_behavior)b, v, &e) == MCR_OK, "%s",
                          e.message);
        } else {
            char host[128];
            int port;
            unsigned w;
            ck_assert(sscanf(steps[i] + 1, "%127[^:]:%d/%u", host, &port, &w) == 3);
            ck_assert_int_eq(memcached_server_add_with_weight(m, host, (in_port_t)port, w),
                             MEMCACHED_SUCCESS);
            ck_assert_msg(mcr_lmc_add_server(l, host, port, w, &e) == MCR_OK, "%s", e.message);
        }
    }
    ck_assert_msg(mcr_lmc_ring(l, &ring, &e) == MCR_OK, "%s", e.message);
    compare_keys(&r, m, ring, 20000, true, opts ? opts : "(script)");
    mcr_ring_free(ring);
    mcr_lmc_free(l);
    memcached_free(m);
}

#define B(b, v) "B" #b "=" #v
START_TEST(state_machine_cases)
{
    const char *base = "--SERVER=zeta.example --SERVER=alpha.example:11300 "
                       "--SERVER=alpha.example:11299 --SERVER=mid.example";
    /* SORT_HOSTS sorts in modula too, and the order stays after turning it
     * off: later servers are appended after the sorted ones. */
    const char *s1[] = {B(12, 1), B(12, 0), "Aaaa.example:11211/1"};
    check_script(base, s1, 3);
    /* The same with adds while sorting, a weight turning weighting on, and
     * sorting turned on again (mcr_lmc defers the sort; the order must be
     * libmemcached's at every step). */
    const char *s10[] = {B(12, 1), "Abbb.example:11211/1", B(9, 1), "Aaab.example:11300/1",
                         B(12, 0), "Aaaa.example:11211/2", "A0ne.example:11211/1",
                         B(2, 5), B(12, 1), "Accc.example:11211/1", B(12, 0),
                         "Aaaa.example:11212/1"};
    check_script(base, s10, 12);
    check_script("--SORT-HOSTS --SERVER=zeta.example --SERVER=alpha.example:11300 "
                 "--DISTRIBUTION=consistent --SERVER=alpha.example:11299 --SERVER=mid.example",
                 s1, 3);
    /* KETAMA_WEIGHTED=0 means KETAMA=1: consistent ketama, weighting off. */
    const char *s2[] = {"Aw1.example:11211/3", B(16, 1), B(16, 0)};
    check_script(base, s2, 3);
    /* Weighting survives MODULA and applies again under SPY. */
    const char *s3[] = {B(16, 1), B(9, 0), B(9, 4), "Aw2.example:5000/9"};
    check_script(base, s3, 4);
    /* KETAMA=0 keeps the weighting flag; weight 0 is stored as 1. */
    const char *s4[] = {B(9, 5), B(3, 0), "Aw3.example:11211/0", B(9, 4)};
    check_script(base, s4, 4);
    /* HASH after the last rebuild only changes the key hash... */
    const char *s5[] = {B(9, 1), B(2, 6)};
    check_script(base, s5, 2);
    /* ...KETAMA_HASH changes nothing, SORT_HOSTS=0 still rebuilds. */
    const char *s6[] = {B(9, 1), B(2, 6), B(17, 2), B(12, 0)};
    check_script(base, s6, 4);
    /* HASH_WITH_PREFIX_KEY without a namespace: keys over 250 bytes hash to 0. */
    const char *s7[] = {B(25, 1), B(9, 2)};
    check_script(base, s7, 2);
    const char *s9[] = {B(9, 1)};
    check_script("--SERVER=abc --HASH=md5 RESET --SERVER=def.example --SERVER=ghi.example",
                 s9, 1);
    check_script("--SERVER=abc.example END --this is ignored", NULL, 0);
    check_script("# a comment\n --SERVER=abc.example \n# another\n --SERVER=1.2.3.4:5/?2 "
                 "--DISTRIBUTION=consistent",
                 NULL, 0);
    check_script("--SERVER=abc.example:0 --SERVER=def.example/?0 --DISTRIBUTION=consistent,crc "
                 "--HASH=murmur",
                 NULL, 0);
    check_script("--BINARY-PROTOCOL --NAMESPACE=\"name space\" --HASH-WITH-NAMESPACE "
                 "--SERVER=abc.example --SERVER=def.example",
                 NULL, 0);
    check_script("--NAMESPACE=L\"xy\" --HASH-WITH-NAMESPACE --SERVER=abc.example "
                 "--SERVER=def.example --HASH=jenkins",
                 NULL, 0);
}
END_TEST

/* IPv6 hosts through the API (the option language cannot express them). */
START_TEST(ipv6_api)
{
    static const char *const hosts[] = {"::1", "fe80::1", "2001:db8::7", "10.1.1.1"};
    for (int dist = 0; dist < 6; dist++) {
        if (dist == MEMCACHED_DISTRIBUTION_RANDOM)
            continue;
        tu_rng r;
        memcached_st *m = memcached_create(NULL);
        mcr_lmc *l = mcr_lmc_new();
        mcr_ring *ring = NULL;
        tu_rng_init(&r, 40 + (uint64_t)dist);
        memcached_behavior_set(m, MEMCACHED_BEHAVIOR_DISTRIBUTION, (uint64_t)dist);
        ck_assert_int_eq(mcr_lmc_set_behavior(l, (mcr_lmc_behavior)MEMCACHED_BEHAVIOR_DISTRIBUTION,
                                              (uint64_t)dist, NULL),
                         MCR_OK);
        for (int i = 0; i < 4; i++) {
            ck_assert_int_eq(memcached_server_add_with_weight(m, hosts[i], (in_port_t)(11211 + i), (uint32_t)i + 1),
                             MEMCACHED_SUCCESS);
            ck_assert_int_eq(mcr_lmc_add_server(l, hosts[i], 11211 + i, (uint32_t)i + 1, NULL), MCR_OK);
        }
        ck_assert_int_eq(mcr_lmc_ring(l, &ring, NULL), MCR_OK);
        compare_keys(&r, m, ring, 5000, false, "ipv6");
        mcr_ring_free(ring);
        mcr_lmc_free(l);
        memcached_free(m);
    }
}
END_TEST

/* ------------------------------------------------------------------ option language */

/* The connection behaviours mcr_lmc keeps. */
static const mcr_lmc_conn_behavior conn_behaviors[] = {
    MCR_LMC_POLL_TIMEOUT,         MCR_LMC_CONNECT_TIMEOUT,       MCR_LMC_RETRY_TIMEOUT,
    MCR_LMC_BINARY_PROTOCOL,      MCR_LMC_SND_TIMEOUT,           MCR_LMC_RCV_TIMEOUT,
    MCR_LMC_SERVER_FAILURE_LIMIT, MCR_LMC_AUTO_EJECT_HOSTS,      MCR_LMC_REMOVE_FAILED_SERVERS,
    MCR_LMC_DEAD_TIMEOUT,         MCR_LMC_SERVER_TIMEOUT_LIMIT,
};
#define NCONN (sizeof(conn_behaviors) / sizeof(conn_behaviors[0]))

/* Every connection behaviour reads the same in both. */
static void compare_conn_behaviors(memcached_st *m, const mcr_lmc *l, const char *what)
{
    for (size_t i = 0; i < NCONN; i++) {
        uint64_t mine = 12345;
        ck_assert_int_eq(mcr_lmc_get_conn_behavior(l, conn_behaviors[i], &mine), MCR_OK);
        uint64_t theirs = memcached_behavior_get(m, (memcached_behavior_t)conn_behaviors[i]);
        ck_assert_msg(mine == theirs, "%s: behaviour %d: mcroute %llu, libmemcached %llu", what,
                      (int)conn_behaviors[i], (unsigned long long)mine,
                      (unsigned long long)theirs);
    }
}

/* An option string both sides see: acceptance must match, and placement
 * and connection behaviours when accepted. */
static void check_same_acceptance(tu_rng *r, const char *opts)
{
    char ebuf[1024];
    memcached_return_t chk = libmemcached_check_configuration(opts, strlen(opts), ebuf, sizeof(ebuf));
    mcr_lmc *l = mcr_lmc_new();
    mcr_error e;
    int rc = mcr_lmc_parse_options(l, opts, &e);
    ck_assert_msg((chk == MEMCACHED_SUCCESS) == (rc == MCR_OK),
                  "\"%s\": libmemcached %s (%s), mcroute %s (%s)", opts,
                  memcached_strerror(NULL, chk), ebuf, mcr_strerror(rc),
                  rc == MCR_OK ? "" : e.message);
    if (rc == MCR_OK) {
        memcached_st *m = memcached(opts, strlen(opts));
        mcr_ring *ring = NULL;
        ck_assert(m != NULL);
        compare_conn_behaviors(m, l, opts);
        if (memcached_server_count(m) == 0) {
            ck_assert_int_eq(mcr_lmc_ring(l, &ring, NULL), MCR_ERR_EMPTY);
        } else {
            ck_assert_int_eq(mcr_lmc_ring(l, &ring, &e), MCR_OK);
            compare_keys(r, m, ring, 300, true, opts);
        }
        mcr_ring_free(ring);
        memcached_free(m);
    }
    mcr_lmc_free(l);
}

START_TEST(option_language_table)
{
    static const char *const cases[] = {
        /* accepted */
        "--SERVER=abc", "--server=abc:11212/?3 --SERVER=bcd/?2", "--SERVER=12a",
        "--SERVER=a_b", "--SERVER=a..b", "--SERVER=999.999.999.999", "--SERVER=1.2.3.4.5",
        "--SERVER=consistentx", "--SERVER=abc END --FOO", "--SERVER=abc\t --SERVER=bcd",
        "--SERVER=abc \n--SERVER=bcd", "--SERVER=abc\t:11212", "# c\n --SERVER=abc",
        "--SERVER=abc/?99999", "--SERVER=1.2.3.4567", "--SERVER=abc:0", "--NAMESPACE=abc",
        "--NAMESPACE=\"a\\\"b\" --SERVER=abc --HASH-WITH-NAMESPACE",
        "--DISTRIBUTION=consistent,murmur --SERVER=abc --SERVER=def",
        "--DISTRIBUTION=modula,md5 --SERVER=abc --SERVER=def", "--HASH=Md5 --SERVER=abc --SERVER=def",
        "--SORT-HOSTS --SERVER=zzz --SERVER=aaa --SERVER=mmm", "--VERIFY-KEY --BINARY-PROTOCOL",
        "--USE-UDP --SERVER=abc --SERVER=def", "--SERVER=abc --USE-UDP", "END", "RESET",
        "--SERVER=abc RESET --SERVER=def", "--TCP-KEEPIDLE", "--REMOVE-FAILED-SERVERS=1",
        "--CONNECT-TIMEOUT=99999999999999", "--DISTRIBUTION=consistent --DISTRIBUTION=modula",
        "--SERVER=abc --SERVER=def --DISTRIBUTION=consistent --SORT-HOSTS",
        /* refused by both */
        "--SERVER=a", "--SERVER=ab", "--SERVER=123", "--SERVER=-ab", "--SERVER=consistent",
        "--SERVER=END", "--SERVER=md5", " --SERVER=abc", "--SERVER=abc ", "--SERVER=abc  --SERVER=bcd",
        "--SERVER=abc\n--SERVER=bcd", "#x", "--SERVER=abc #x", "--SERVER=abc:123456",
        "--SERVER=abc:11211/?x", "--SERVER=abc:11211:3", "--SERVER=abc/?100000",
        "--SERVER=abc:11211 /?3", "--SERVER=[::1]:11211", "--SERVER=::1", "--SERVERS=abc,def",
        "--FOO", "--REMOVE_FAILED_SERVERS", "--SERVER-FAILURE-LIMIT=3", "--POOL-MIN",
        "--TCP-KEEPIDLE=5", "--CONNECT-TIMEOUT=-1", "--CONNECT-TIMEOUT=", "--HASH=murmur3",
        "--HASH=default", "--HASH=MD5 --HASH=crc", "--HASH=md5 RESET --HASH=crc",
        "--DISTRIBUTION=ketama", "--DISTRIBUTION=consistent, md5", "--NAMESPACE=foo --NAMESPACE=bar",
        "--NAMESPACE=\"foo bar\"", "--NAMESPACE=ab", "--NAMESPACE=1.2.3.4", "--NAMESPACE=\"\"",
        "--NAMESPACE=md5", "--USE-UDP --BUFFER-REQUESTS", "--BINARY-PROTOCOL --VERIFY-KEY",
        "TRUE", "CSL_ERROR", "ERROR", "--NOREPLYX", "--SORT-HOSTSXYZ", "--", "=", ",",
        "--SERVER=abc,def", "--SERVER=\"abc\"", "SERVERS", "--SERVER=abc-",
    };
    tu_rng r;
    tu_rng_init(&r, 50);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        check_same_acceptance(&r, cases[i]);
}
END_TEST

/* Random strings of the language: valid statements joined by separators,
 * sometimes mutated byte by byte, and soups of its pieces. Acceptance must
 * be the same, and placement when accepted. Kept out on purpose: DEBUG
 * (turns on libmemcached's parser trace for the whole process), file
 * options, sockets and random, and whatever mcroute refuses on purpose
 * (ports over 65535, duplicate servers, long hostnames: see bad_inputs). */
static const char *const fuzz_statements[] = {
    "--SERVER=host-a.example", "--SERVER=host-b:11212", "--SERVER=10.0.0.1/?3",
    "--SERVER=1.2.3.4:11300/?2", "--SERVER=cache_c", "--server=mixed.Case.example:7/?0",
    "--SERVER=q\"uote", "--DISTRIBUTION=consistent", "--DISTRIBUTION=modula",
    "--DISTRIBUTION=consistent,md5", "--HASH=crc", "--HASH=fnv1a_32", "--hash=JENKINS",
    "--NAMESPACE=ns.one", "--NAMESPACE=\"quoted ns\"", "--NAMESPACE=L\"x\"",
    "--SORT-HOSTS", "--HASH-WITH-NAMESPACE", "--BINARY-PROTOCOL", "--VERIFY-KEY",
    "--TCP-NODELAY", "--CONNECT-TIMEOUT=10", "--POOL-MAX=4", "--USE-UDP", "--BUFFER-REQUESTS",
    "--NOREPLY", "RESET", "END", "#comment\n", "--USER-DATA", "--FETCH-VERSION",
};
static const char *const fuzz_pieces[] = {
    "--SERVER=", "--DISTRIBUTION=", "--HASH=", "--NAMESPACE=", "--SORT-HOSTS", "RESET", "END",
    "TRUE", "--FOO", " ", " ", " ", "\t", "\n", "=", ",", ":", ":11212", ":0", "/?", "/?3",
    "123", "7", "consistent", "modula", "md5", "murmur", "ketama", "\"", "\"q s\"", "L\"xy\"",
    "#", "-", ".", "_", "x", "1.2.3.4", "host-a.example", "host-b", "ab",
};
static const char fuzz_bytes[] = " \t\n\"#-_.:/?=,0123456789abcdeEND";

static void fuzz_string(tu_rng *r, char *s, size_t cap)
{
    size_t o = 0;
    s[0] = '\0';
    if (tu_below(r, 4) == 0) { /* a soup of pieces */
        for (int k = 1 + (int)tu_below(r, 12); k > 0; k--) {
            const char *p = fuzz_pieces[tu_below(r, sizeof(fuzz_pieces) / sizeof(fuzz_pieces[0]))];
            if (o + strlen(p) + 1 >= cap)
                break;
            o = append(s, o, p);
        }
        return;
    }
    for (int k = 1 + (int)tu_below(r, 6); k > 0; k--) {
        const char *p =
            fuzz_statements[tu_below(r, sizeof(fuzz_statements) / sizeof(fuzz_statements[0]))];
        static const char *const seps[] = {" ", " ", " ", " ", " ", " \n", "\t ", "  ", ""};
        if (o + strlen(p) + 4 >= cap)
            break;
        if (o > 0)
            o = append(s, o, seps[tu_below(r, sizeof(seps) / sizeof(seps[0]))]);
        o = append(s, o, p);
    }
    for (int m = tu_below(r, 3) == 0 ? 1 + (int)tu_below(r, 3) : 0; m > 0 && o > 0; m--) {
        size_t at = tu_below(r, (uint32_t)o);
        char c = fuzz_bytes[tu_below(r, sizeof(fuzz_bytes) - 1)];
        switch (tu_below(r, 3)) {
        case 0: /* replace */
            s[at] = c;
            break;
        case 1: /* delete */
            memmove(s + at, s + at + 1, o - at);
            o--;
            break;
        default: /* insert */
            if (o + 2 < cap) {
                memmove(s + at + 1, s + at, o - at + 1);
                s[at] = c;
                o++;
            }
        }
    }
}

START_TEST(option_language_fuzz)
{
    tu_rng r;
    tu_rng_init(&r, 51);
    size_t accepted = 0, refused = 0;
    const int n = tu_cases(20000);
    for (int i = 0; i < n; i++) {
        char s[512];
        fuzz_string(&r, s, sizeof(s));
        if (s[0] == '\0' || strstr(s, "DEBUG") != NULL)
            continue;
        mcr_lmc *l = mcr_lmc_new();
        mcr_error e;
        int rc = mcr_lmc_parse_options(l, s, &e);
        mcr_lmc_free(l);
        if (rc == MCR_ERR_UNSUPPORTED || rc == MCR_ERR_DUPLICATE || rc == MCR_ERR_TOO_LONG ||
            rc == MCR_ERR_RANGE)
            continue;
        check_same_acceptance(&r, s);
        if (rc == MCR_OK)
            accepted++;
        else
            refused++;
        g_configs++;
    }
    printf("option_language_fuzz: %zu strings accepted by both, %zu refused by both\n", accepted,
           refused);
    print_counts("option_language_fuzz");
    /* Each side at least 15% of the strings drawn (about 27% and 72%). */
    const size_t least = (size_t)n * 3 / 20;
    ck_assert_msg(accepted > least && refused > least,
                  "fuzz too one-sided: %zu / %zu accepted / refused, at least %zu each", accepted,
                  refused, least);
}
END_TEST

/* ------------------------------------------------------------------ bad inputs */

/* A fingerprint of an mcr_lmc's placement: its ring on fixed keys. */
static void fingerprint(const mcr_lmc *l, char *out, size_t cap)
{
    mcr_ring *ring = NULL;
    size_t o = 0;
    int rc = mcr_lmc_ring(l, &ring, NULL);
    o += (size_t)snprintf(out + o, cap - o, "rc=%d", rc);
    if (rc == MCR_OK) {
        o += (size_t)snprintf(out + o, cap - o, " mode=%d hash=%d n=%zu pts=%zu",
                              (int)mcr_ring_mode(ring), (int)mcr_ring_key_hash(ring),
                              mcr_ring_server_count(ring), mcr_ring_point_count(ring));
        for (size_t i = 0; i < mcr_ring_server_count(ring) && o < cap - 64; i++)
            o += (size_t)snprintf(out + o, cap - o, " %s/%u", mcr_ring_server_name(ring, i),
                                  (unsigned)mcr_ring_server_weight(ring, i));
        for (int k = 0; k < 64 && o < cap - 16; k++) {
            char key[16];
            int len = snprintf(key, sizeof(key), "key%d", k);
            o += (size_t)snprintf(out + o, cap - o, " %u",
                                  (unsigned)mcr_ring_locate(ring, key, (size_t)len));
        }
    }
    mcr_ring_free(ring);
}

static mcr_lmc *base_lmc(void)
{
    mcr_lmc *l = mcr_lmc_new();
    ck_assert_int_eq(mcr_lmc_parse_options(l, "--SERVER=host1.example --SERVER=host2.example:11212/?3 "
                                              "--DISTRIBUTION=consistent --HASH=crc --NAMESPACE=ns1 "
                                              "--HASH-WITH-NAMESPACE",
                                           NULL),
                     MCR_OK);
    ck_assert_int_eq(mcr_lmc_set_behavior(l, (mcr_lmc_behavior)MEMCACHED_BEHAVIOR_HASH, MCR_HASH_FNV1A_32, NULL), MCR_OK);
    return l;
}

static void expect_option_error(const char *opts, int code, const char *needle)
{
    mcr_lmc *l = base_lmc();
    char before[4096], after[4096];
    mcr_error e;
    memset(&e, 0, sizeof(e));
    fingerprint(l, before, sizeof(before));
    int rc = mcr_lmc_parse_options(l, opts, &e);
    ck_assert_msg(rc == code, "\"%s\": got %d (%s), want %d", opts, rc, e.message, code);
    ck_assert_int_eq(e.code, code);
    ck_assert_msg(strstr(e.message, needle) != NULL, "\"%s\": message \"%s\" lacks \"%s\"", opts,
                  e.message, needle);
    fingerprint(l, after, sizeof(after));
    ck_assert_msg(strcmp(before, after) == 0, "\"%s\" changed the state", opts);
    mcr_lmc_free(l);
}

static void expect_behavior_error(const char *name, const char *value, int code, const char *needle)
{
    mcr_lmc *l = base_lmc();
    char before[4096], after[4096];
    mcr_error e;
    fingerprint(l, before, sizeof(before));
    int rc = mcr_lmc_set_behavior_name(l, name, value, &e);
    ck_assert_msg(rc == code, "%s=%s: got %d (%s), want %d", name, value, rc,
                  rc ? e.message : "", code);
    ck_assert_msg(strstr(e.message, needle) != NULL, "%s=%s: message \"%s\" lacks \"%s\"", name,
                  value, e.message, needle);
    fingerprint(l, after, sizeof(after));
    ck_assert_str_eq(before, after);
    mcr_lmc_free(l);
}

START_TEST(bad_inputs)
{
    char longhost[400], opt[512];
    memset(longhost, 'h', 256);
    longhost[256] = '\0';

    expect_option_error("--SERVER=ok.example --FOO-BAR=1", MCR_ERR_UNKNOWN, "--FOO-BAR");
    expect_option_error("--SERVERS=a.example,b.example", MCR_ERR_UNKNOWN, "--SERVERS");
    expect_option_error("--SERVER=ok.example --HASH=sha1", MCR_ERR_UNKNOWN, "sha1");
    expect_option_error("--HASH=murmur3", MCR_ERR_UNKNOWN, "murmur3");
    expect_option_error("--DISTRIBUTION=ketama", MCR_ERR_UNKNOWN, "ketama");
    expect_option_error("--DISTRIBUTION=consistent,sha1", MCR_ERR_UNKNOWN, "sha1");
    expect_option_error("--SERVER=ok.example --SERVER=bad.example:70000", MCR_ERR_RANGE, "70000");
    expect_option_error("--SERVER=bad.example:65536", MCR_ERR_RANGE, "65536");
    expect_option_error("--SERVER=ok.example --SERVER=bad.example/?x", MCR_ERR_SYNTAX, "/?x");
    expect_option_error("--SERVER=bad.example:x1", MCR_ERR_SYNTAX, ":x1");
    expect_option_error("--SERVER=bad.example:11211:3", MCR_ERR_SYNTAX, ":3");
    expect_option_error("--SERVER=dup.example --SERVER=dup.example:11211", MCR_ERR_DUPLICATE,
                        "dup.example");
    expect_option_error("--SERVER=host1.example", MCR_ERR_DUPLICATE, "host1.example");
    expect_option_error("--SERVER=ok.example --DISTRIBUTION=random", MCR_ERR_UNSUPPORTED, "random");
    expect_option_error("--DISTRIBUTION=random,md5", MCR_ERR_UNSUPPORTED, "random");
    snprintf(opt, sizeof(opt), "--SERVER=ok.example --SERVER=%s", longhost);
    expect_option_error(opt, MCR_ERR_TOO_LONG, "255");
    expect_option_error("--SOCKET=\"/tmp/mc.sock\"", MCR_ERR_UNSUPPORTED, "socket");
    expect_option_error("--CONFIGURE-FILE=conf.txt", MCR_ERR_UNSUPPORTED, "CONFIGURE-FILE");
    expect_option_error("INCLUDE \"conf.txt\"", MCR_ERR_UNSUPPORTED, "INCLUDE");
    expect_option_error("--NAMESPACE=again", MCR_ERR_SYNTAX, "once");
    expect_option_error("--HASH=md5 --HASH=crc", MCR_ERR_SYNTAX, "once");
    expect_option_error("--SERVER=ab", MCR_ERR_SYNTAX, "hostname");
    expect_option_error("--SERVER=ok.example ", MCR_ERR_SYNTAX, "expected");
    expect_option_error("--BINARY-PROTOCOL --VERIFY-KEY", MCR_ERR_INVALID, "VERIFY-KEY");
    expect_option_error("CSL_ERROR", MCR_ERR_SYNTAX, "CSL_ERROR");
    expect_option_error("", MCR_ERR_SYNTAX, "empty");

    expect_behavior_error("NO_SUCH_BEHAVIOR", "1", MCR_ERR_UNKNOWN, "NO_SUCH_BEHAVIOR");
    expect_behavior_error("TCP_NODELAY", "1", MCR_ERR_UNKNOWN, "TCP_NODELAY");
    expect_behavior_error("DISTRIBUTION", "ring", MCR_ERR_UNKNOWN, "ring");
    expect_behavior_error("DISTRIBUTION", "random", MCR_ERR_UNSUPPORTED, "random");
    expect_behavior_error("DISTRIBUTION", "virtual_bucket", MCR_ERR_UNSUPPORTED, "bucket");
    expect_behavior_error("DISTRIBUTION", "7", MCR_ERR_RANGE, "7");
    expect_behavior_error("MEMCACHED_BEHAVIOR_HASH", "sha1", MCR_ERR_UNKNOWN, "sha1");
    expect_behavior_error("HASH", "11", MCR_ERR_RANGE, "11");
    expect_behavior_error("SORT_HOSTS", "yes please", MCR_ERR_SYNTAX, "yes please");
    expect_behavior_error("KETAMA", "99999999999999999999999", MCR_ERR_RANGE, "too large");

    /* the numeric API */
    mcr_lmc *l = base_lmc();
    mcr_error e;
    ck_assert_int_eq(mcr_lmc_set_behavior(l, (mcr_lmc_behavior)MEMCACHED_BEHAVIOR_TCP_NODELAY, 1, &e),
                     MCR_ERR_UNKNOWN);
    ck_assert_int_eq(mcr_lmc_set_behavior(l, (mcr_lmc_behavior)MEMCACHED_BEHAVIOR_DISTRIBUTION,
                                          MEMCACHED_DISTRIBUTION_RANDOM, &e),
                     MCR_ERR_UNSUPPORTED);
    ck_assert_int_eq(mcr_lmc_add_server(l, longhost, 11211, 1, &e), MCR_ERR_TOO_LONG);
    ck_assert_int_eq(mcr_lmc_add_server(l, "ok.example", 70000, 1, &e), MCR_ERR_RANGE);
    ck_assert_int_eq(mcr_lmc_add_server(l, "ok.example", 11211, MCR_WEIGHT_MAX + 1, &e), MCR_ERR_RANGE);
    ck_assert_int_eq(mcr_lmc_add_server(l, "host1.example", 0, 1, &e), MCR_ERR_DUPLICATE);
    ck_assert_int_eq(mcr_lmc_add_server(l, "bad host", 11211, 1, &e), MCR_ERR_SYNTAX);
    ck_assert_int_eq(mcr_lmc_add_server(NULL, "x", 1, 1, &e), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_lmc_parse_options(NULL, "--SERVER=abc", &e), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_lmc_parse_options(l, NULL, &e), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_lmc_ring(l, NULL, &e), MCR_ERR_INVALID);
    mcr_lmc_free(l);
    mcr_lmc_free(NULL);

    mcr_lmc *empty = mcr_lmc_new();
    mcr_ring *ring = NULL;
    mcr_config *cfg = NULL;
    ck_assert_int_eq(mcr_lmc_ring(empty, &ring, &e), MCR_ERR_EMPTY);
    ck_assert_int_eq(mcr_lmc_config(empty, &cfg, &e), MCR_ERR_EMPTY);
    ck_assert(ring == NULL && cfg == NULL);
    mcr_lmc_free(empty);
}
END_TEST

/* The value forms the man pages promise: any number for a flag (0 off), as
 * libmemcached takes it, true/false, MEMCACHED_* names, the seventh
 * behaviour HASH_WITH_NAMESPACE; each compared with libmemcached. */
START_TEST(behavior_values)
{
    static const struct {
        const char *name, *value;
        int behavior;
        uint64_t number;
    } ok[] = {
        {"SORT_HOSTS", "7", MEMCACHED_BEHAVIOR_SORT_HOSTS, 7},
        {"sort_hosts", "TRUE", MEMCACHED_BEHAVIOR_SORT_HOSTS, 1},
        {"MEMCACHED_BEHAVIOR_SORT_HOSTS", "false", MEMCACHED_BEHAVIOR_SORT_HOSTS, 0},
        {"KETAMA", "42", MEMCACHED_BEHAVIOR_KETAMA, 42},
        {"KETAMA_WEIGHTED", "True", MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1},
        {"HASH_WITH_NAMESPACE", "2", MEMCACHED_BEHAVIOR_HASH_WITH_PREFIX_KEY, 2},
        {"MEMCACHED_BEHAVIOR_HASH_WITH_PREFIX_KEY", "true",
         MEMCACHED_BEHAVIOR_HASH_WITH_PREFIX_KEY, 1},
        {"DISTRIBUTION", "MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY",
         MEMCACHED_BEHAVIOR_DISTRIBUTION, MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY},
        {"DISTRIBUTION", "consistent_weighted", MEMCACHED_BEHAVIOR_DISTRIBUTION,
         MEMCACHED_DISTRIBUTION_CONSISTENT_WEIGHTED},
        {"DISTRIBUTION", "Consistent_Ketama", MEMCACHED_BEHAVIOR_DISTRIBUTION,
         MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA},
        {"DISTRIBUTION", "1", MEMCACHED_BEHAVIOR_DISTRIBUTION, MEMCACHED_DISTRIBUTION_CONSISTENT},
        {"HASH", "MEMCACHED_HASH_FNV1A_32", MEMCACHED_BEHAVIOR_HASH, MEMCACHED_HASH_FNV1A_32},
        {"HASH", "one_at_a_time", MEMCACHED_BEHAVIOR_HASH, MEMCACHED_HASH_DEFAULT},
        {"KETAMA_HASH", "10", MEMCACHED_BEHAVIOR_KETAMA_HASH, MEMCACHED_HASH_MURMUR3},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        const char *opts = "--SERVER=a1.example --SERVER=b2.example:11300 --SERVER=a1.example:5 "
                           "--NAMESPACE=nsx --HASH=crc";
        memcached_st *m = memcached(opts, strlen(opts));
        mcr_lmc *byname = mcr_lmc_new(), *bynum = mcr_lmc_new();
        mcr_ring *r1 = NULL, *r2 = NULL;
        mcr_error e;
        tu_rng r;
        tu_rng_init(&r, 50 + i);
        ck_assert(m != NULL);
        ck_assert_int_eq(mcr_lmc_parse_options(byname, opts, NULL), MCR_OK);
        ck_assert_int_eq(mcr_lmc_parse_options(bynum, opts, NULL), MCR_OK);
        ck_assert_int_eq(memcached_behavior_set(m, (memcached_behavior_t)ok[i].behavior, ok[i].number),
                         MEMCACHED_SUCCESS);
        ck_assert_msg(mcr_lmc_set_behavior_name(byname, ok[i].name, ok[i].value, &e) == MCR_OK,
                      "%s=%s: %s", ok[i].name, ok[i].value, e.message);
        ck_assert_int_eq(mcr_lmc_set_behavior(bynum, (mcr_lmc_behavior)ok[i].behavior, ok[i].number, &e),
                         MCR_OK);
        /* a server after the setting shows the sort order and the weighting */
        memcached_server_add_with_weight(m, "0first.example", 11211, 3);
        ck_assert_int_eq(mcr_lmc_add_server(byname, "0first.example", 11211, 3, NULL), MCR_OK);
        ck_assert_int_eq(mcr_lmc_add_server(bynum, "0first.example", 11211, 3, NULL), MCR_OK);
        ck_assert_int_eq(mcr_lmc_ring(byname, &r1, NULL), MCR_OK);
        ck_assert_int_eq(mcr_lmc_ring(bynum, &r2, NULL), MCR_OK);
        compare_keys(&r, m, r1, 2000, true, ok[i].value);
        compare_keys(&r, m, r2, 2000, true, ok[i].value);
        mcr_ring_free(r1);
        mcr_ring_free(r2);
        mcr_lmc_free(byname);
        mcr_lmc_free(bynum);
        memcached_free(m);
    }
    expect_behavior_error("DISTRIBUTION", "", MCR_ERR_SYNTAX, "DISTRIBUTION");
    expect_behavior_error("HASH", "12x", MCR_ERR_UNKNOWN, "12x");
    expect_behavior_error("HASH_WITH_NAMESPACE", "", MCR_ERR_SYNTAX, "HASH_WITH_NAMESPACE");
    expect_behavior_error("SORT_HOSTS", "on", MCR_ERR_SYNTAX, "true or false");
    expect_behavior_error("KETAMA_HASH", "11", MCR_ERR_RANGE, "11");
}
END_TEST

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

/* ------------------------------------------------------------------ beyond the reference */

/* More servers than libmemcached can handle in the consistent modes: no
 * reference, but the ring must build and place every key on a server. */
START_TEST(many_servers)
{
    static const int dists[] = {MEMCACHED_DISTRIBUTION_MODULA, MEMCACHED_DISTRIBUTION_CONSISTENT,
                                MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA,
                                MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY,
                                MEMCACHED_DISTRIBUTION_CONSISTENT_WEIGHTED};
    tu_rng r;
    tu_rng_init(&r, 60);
    for (size_t d = 0; d < sizeof(dists) / sizeof(dists[0]); d++) {
        const int n = 1500;
        mcr_lmc *l = mcr_lmc_new();
        mcr_ring *ring = NULL;
        mcr_error e;
        /* half through one option string, half through the API */
        char *opts = malloc((size_t)n * 48);
        size_t o = 0;
        for (int i = 0; i < n / 2; i++)
            o += (size_t)sprintf(opts + o, "%s--SERVER=node%d.example:%d/?%d", i ? " " : "", i,
                                 11211 + i % 5, 1 + i % 4);
        ck_assert_int_eq(mcr_lmc_parse_options(l, opts, &e), MCR_OK);
        free(opts);
        ck_assert_int_eq(mcr_lmc_set_behavior(l, (mcr_lmc_behavior)MEMCACHED_BEHAVIOR_DISTRIBUTION,
                                              (uint64_t)dists[d], &e),
                         MCR_OK);
        for (int i = n / 2; i < n; i++) {
            char host[32];
            snprintf(host, sizeof(host), "10.%d.%d.%d", i / 65536, (i / 256) % 256, i % 256);
            ck_assert_int_eq(mcr_lmc_add_server(l, host, 11211, (uint32_t)(1 + i % 3), &e), MCR_OK);
        }
        ck_assert_int_eq(mcr_lmc_ring(l, &ring, &e), MCR_OK);
        ck_assert_uint_eq(mcr_ring_server_count(ring), (size_t)n);
        if (dists[d] == MEMCACHED_DISTRIBUTION_MODULA)
            ck_assert_uint_eq(mcr_ring_point_count(ring), 0);
        else if (dists[d] == MEMCACHED_DISTRIBUTION_CONSISTENT_WEIGHTED)
            ck_assert(mcr_ring_point_count(ring) > (size_t)n * 150);
        else /* the string's weights > 1 turned weighting on, except after CONSISTENT */
            ck_assert(mcr_ring_point_count(ring) >= (size_t)n * 100);
        size_t hit[1500] = {0};
        for (int k = 0; k < 200000; k++) {
            unsigned char key[320];
            size_t len = gen_key(&r, key, false);
            uint32_t s = mcr_ring_locate(ring, key, len);
            EXPECT_UINT(s, <, (uint32_t)n);
            hit[s]++;
        }
        size_t used = 0;
        for (int i = 0; i < n; i++)
            used += hit[i] != 0;
        ck_assert_msg(used > (size_t)n * 9 / 10, "only %zu of %d servers got keys", used, n);
        mcr_ring_free(ring);
        mcr_lmc_free(l);
    }
}
END_TEST

/* True if servers [from, to) of the ring are in SORT_HOSTS order. */
static bool sorted_range(const mcr_ring *ring, size_t from, size_t to)
{
    for (size_t i = from + 1; i < to; i++) {
        int c = strcmp(mcr_ring_server_host(ring, i - 1), mcr_ring_server_host(ring, i));
        if (c > 0 || (c == 0 && mcr_ring_server_port(ring, i - 1) >= mcr_ring_server_port(ring, i)))
            return false;
    }
    return true;
}

/* SORT_HOSTS with 10,000 servers (libmemcached re-sorts at every add; so
 * must the result, not the cost): through one option string, and through
 * SORT_HOSTS=1 then API adds, then SORT_HOSTS=0 and more adds, which go
 * after the sorted ones. */
START_TEST(many_servers_sorted)
{
    const int n = 10000;
    char *opts = malloc((size_t)n * 48 + 64);
    size_t o = (size_t)sprintf(opts, "--SORT-HOSTS --DISTRIBUTION=consistent");
    mcr_lmc *l = mcr_lmc_new();
    mcr_ring *ring = NULL;
    mcr_error e;

    ck_assert(opts != NULL && l != NULL);
    for (int i = 0; i < n; i++) /* a scrambled order, several ports per host */
        o += (size_t)sprintf(opts + o, " --SERVER=node%d.example:%d", (i * 7919) % (n / 2),
                             11211 + (i * 7919) / (n / 2) % n);
    ck_assert_msg(mcr_lmc_parse_options(l, opts, &e) == MCR_OK, "%s", e.message);
    free(opts);
    ck_assert_msg(mcr_lmc_ring(l, &ring, &e) == MCR_OK, "%s", e.message);
    ck_assert_uint_eq(mcr_ring_server_count(ring), (size_t)n);
    ck_assert_uint_eq(mcr_ring_point_count(ring), (size_t)n * 100);
    ck_assert(sorted_range(ring, 0, (size_t)n));
    for (int k = 0; k < 1000; k++) {
        char key[16];
        int len = snprintf(key, sizeof(key), "k%d", k);
        ck_assert_uint_lt(mcr_ring_locate(ring, key, (size_t)len), (uint32_t)n);
    }
    /* the same placement as mcroute's own sort of the same servers */
    mcr_config *cfg = NULL;
    mcr_ring *ring2 = NULL;
    ck_assert_int_eq(mcr_lmc_config(l, &cfg, NULL), MCR_OK);
    ck_assert_int_eq(mcr_config_sort_servers(cfg), MCR_OK);
    ck_assert_int_eq(mcr_ring_new(cfg, &ring2, NULL), MCR_OK);
    for (size_t i = 0; i < (size_t)n; i += 97)
        ck_assert_str_eq(mcr_ring_server_name(ring, i), mcr_ring_server_name(ring2, i));
    mcr_ring_free(ring2);
    mcr_config_free(cfg);
    mcr_ring_free(ring);
    mcr_lmc_free(l);

    l = mcr_lmc_new();
    ck_assert_int_eq(mcr_lmc_set_behavior(l, MCR_LMC_SORT_HOSTS, 1, NULL), MCR_OK);
    for (int i = 0; i < n; i++) {
        char host[32];
        snprintf(host, sizeof(host), "10.%d.%d.%d", (i * 7919) % n / 65536, (i * 7919) % n / 256 % 256,
                 (i * 7919) % n % 256);
        ck_assert_int_eq(mcr_lmc_add_server(l, host, 11211, 1, &e), MCR_OK);
    }
    ck_assert_int_eq(mcr_lmc_set_behavior(l, MCR_LMC_DISTRIBUTION, MCR_LMC_DIST_CONSISTENT_KETAMA_SPY, NULL), MCR_OK);
    ck_assert_int_eq(mcr_lmc_set_behavior(l, MCR_LMC_SORT_HOSTS, 0, NULL), MCR_OK);
    ck_assert_int_eq(mcr_lmc_add_server(l, "zz.example", 11211, 1, &e), MCR_OK);
    ck_assert_int_eq(mcr_lmc_add_server(l, "00.example", 11211, 1, &e), MCR_OK);
    ck_assert_int_eq(mcr_lmc_add_server(l, "10.0.0.0", 11211, 1, &e), MCR_ERR_DUPLICATE);
    ck_assert_msg(mcr_lmc_ring(l, &ring, &e) == MCR_OK, "%s", e.message);
    ck_assert_uint_eq(mcr_ring_server_count(ring), (size_t)n + 2);
    ck_assert_uint_eq(mcr_ring_point_count(ring), ((size_t)n + 2) * 100);
    ck_assert(sorted_range(ring, 0, (size_t)n));
    ck_assert_str_eq(mcr_ring_server_host(ring, 0), "10.0.0.0");
    ck_assert_str_eq(mcr_ring_server_host(ring, (size_t)n), "zz.example");
    ck_assert_str_eq(mcr_ring_server_host(ring, (size_t)n + 1), "00.example");
    for (int k = 0; k < 1000; k++) {
        char key[16];
        int len = snprintf(key, sizeof(key), "k%d", k);
        ck_assert_uint_lt(mcr_ring_locate(ring, key, (size_t)len), (uint32_t)n + 2);
    }
    mcr_ring_free(ring);
    mcr_lmc_free(l);
}
END_TEST

/* mcr_lmc_config gives the same placement as mcr_lmc_ring, as a config the
 * caller owns. */
START_TEST(config_roundtrip)
{
    mcr_lmc *l = base_lmc();
    mcr_config *cfg = NULL;
    mcr_ring *a = NULL, *b = NULL;
    ck_assert_int_eq(mcr_lmc_config(l, &cfg, NULL), MCR_OK);
    ck_assert_uint_eq(mcr_config_server_count(cfg), 2);
    ck_assert_int_eq(mcr_ring_new(cfg, &a, NULL), MCR_OK);
    ck_assert_int_eq(mcr_lmc_ring(l, &b, NULL), MCR_OK);
    for (int k = 0; k < 1000; k++) {
        char key[16];
        int len = snprintf(key, sizeof(key), "k%d", k);
        ck_assert_uint_eq(mcr_ring_locate(a, key, (size_t)len), mcr_ring_locate(b, key, (size_t)len));
    }
    mcr_ring_free(a);
    mcr_ring_free(b);
    mcr_config_free(cfg);
    mcr_lmc_free(l);
}
END_TEST

/* The header promises libmemcached's numbering for its enums. */
START_TEST(header_enum_numbering)
{
    ck_assert_int_eq(MCR_LMC_HASH, MEMCACHED_BEHAVIOR_HASH);
    ck_assert_int_eq(MCR_LMC_DISTRIBUTION, MEMCACHED_BEHAVIOR_DISTRIBUTION);
    ck_assert_int_eq(MCR_LMC_SORT_HOSTS, MEMCACHED_BEHAVIOR_SORT_HOSTS);
    ck_assert_int_eq(MCR_LMC_KETAMA, MEMCACHED_BEHAVIOR_KETAMA);
    ck_assert_int_eq(MCR_LMC_KETAMA_WEIGHTED, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED);
    ck_assert_int_eq(MCR_LMC_KETAMA_HASH, MEMCACHED_BEHAVIOR_KETAMA_HASH);
    ck_assert_int_eq(MCR_LMC_DIST_MODULA, MEMCACHED_DISTRIBUTION_MODULA);
    ck_assert_int_eq(MCR_LMC_DIST_CONSISTENT, MEMCACHED_DISTRIBUTION_CONSISTENT);
    ck_assert_int_eq(MCR_LMC_DIST_CONSISTENT_KETAMA, MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA);
    ck_assert_int_eq(MCR_LMC_DIST_RANDOM, MEMCACHED_DISTRIBUTION_RANDOM);
    ck_assert_int_eq(MCR_LMC_DIST_CONSISTENT_KETAMA_SPY, MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY);
    ck_assert_int_eq(MCR_LMC_DIST_CONSISTENT_WEIGHTED, MEMCACHED_DISTRIBUTION_CONSISTENT_WEIGHTED);
    ck_assert_int_eq(MCR_LMC_DIST_VIRTUAL_BUCKET, MEMCACHED_DISTRIBUTION_VIRTUAL_BUCKET);
    ck_assert_int_eq(MCR_LMC_POLL_TIMEOUT, MEMCACHED_BEHAVIOR_POLL_TIMEOUT);
    ck_assert_int_eq(MCR_LMC_CONNECT_TIMEOUT, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT);
    ck_assert_int_eq(MCR_LMC_RETRY_TIMEOUT, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT);
    ck_assert_int_eq(MCR_LMC_BINARY_PROTOCOL, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL);
    ck_assert_int_eq(MCR_LMC_SND_TIMEOUT, MEMCACHED_BEHAVIOR_SND_TIMEOUT);
    ck_assert_int_eq(MCR_LMC_RCV_TIMEOUT, MEMCACHED_BEHAVIOR_RCV_TIMEOUT);
    ck_assert_int_eq(MCR_LMC_SERVER_FAILURE_LIMIT, MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT);
    ck_assert_int_eq(MCR_LMC_AUTO_EJECT_HOSTS, MEMCACHED_BEHAVIOR_AUTO_EJECT_HOSTS);
    ck_assert_int_eq(MCR_LMC_REMOVE_FAILED_SERVERS, MEMCACHED_BEHAVIOR_REMOVE_FAILED_SERVERS);
    ck_assert_int_eq(MCR_LMC_DEAD_TIMEOUT, MEMCACHED_BEHAVIOR_DEAD_TIMEOUT);
    ck_assert_int_eq(MCR_LMC_SERVER_TIMEOUT_LIMIT, MEMCACHED_BEHAVIOR_SERVER_TIMEOUT_LIMIT);
}
END_TEST

/* ------------------------------------------------------------------ connection behaviours */

/* Option strings that set connection behaviours, including the numbers
 * libmemcached's atoi() wraps or saturates: both sides must read the same
 * values back (check_same_acceptance compares them). */
START_TEST(conn_behaviors_option_strings)
{
    static const char *const cases[] = {
        "--SERVER=abc",
        "--CONNECT-TIMEOUT=123 --POLL-TIMEOUT=456 --RETRY-TIMEOUT=7 --RCV-TIMEOUT=789 "
        "--SND-TIMEOUT=11",
        "--REMOVE-FAILED-SERVERS=3", "--REMOVE-FAILED-SERVERS=0",
        "--REMOVE-FAILED-SERVERS=1 --REMOVE-FAILED-SERVERS=0",
        "--REMOVE-FAILED-SERVERS=4294967296", /* atoi: 0 */
        "--REMOVE-FAILED-SERVERS=4294967297", /* atoi: 1 */
        "--CONNECT-TIMEOUT=99999999999999",   /* cut to 32 bits */
        "--POLL-TIMEOUT=2147483648",          /* negative */
        "--POLL-TIMEOUT=4294967295",          /* -1 */
        "--RETRY-TIMEOUT=4294967297",         /* 1 */
        "--RETRY-TIMEOUT=99999999999999999999999", /* strtol saturates: -1 */
        "--RCV-TIMEOUT=0 --SND-TIMEOUT=000000000000000000000000000000000000000012",
        "--Poll-Timeout=10 --connect-timeout=20", "--BINARY-PROTOCOL",
        "--POLL-TIMEOUT=7 RESET --SERVER=abc", "--BINARY-PROTOCOL RESET",
        "--REMOVE-FAILED-SERVERS=1 --SERVER=abc RESET --RETRY-TIMEOUT=9",
        "--POLL-TIMEOUT=7 END --POLL-TIMEOUT=8",
        "--BINARY-PROTOCOL --NAMESPACE=\"a b\" --SERVER=abc",
    };
    tu_rng r;
    tu_rng_init(&r, 60);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        check_same_acceptance(&r, cases[i]);
}
END_TEST

/* memcached_behavior_set() and mcr_lmc_set_conn_behavior() with the same
 * random values, in the same order, on top of the same option string. */
START_TEST(conn_behaviors_set)
{
    static const uint64_t special[] = {0, 1, 2, 1000, 0x7fffffffULL, 0x80000000ULL,
                                       0xffffffffULL, 0x100000000ULL, 0x100000001ULL,
                                       0x7fffffffffffffffULL, UINT64_MAX};
    tu_rng r;
    tu_rng_init(&r, 61);
    for (int round = 0; round < 300; round++) {
        const char *opts = round % 2 ? "--SERVER=abc --POLL-TIMEOUT=77" : "--SERVER=abc";
        memcached_st *m = memcached(opts, strlen(opts));
        mcr_lmc *l = mcr_lmc_new();
        ck_assert(m != NULL && l != NULL);
        ck_assert_int_eq(mcr_lmc_parse_options(l, opts, NULL), MCR_OK);
        int nsets = 1 + (int)tu_below(&r, 12);
        for (int k = 0; k < nsets; k++) {
            mcr_lmc_conn_behavior b = conn_behaviors[tu_below(&r, NCONN)];
            uint64_t v;
            switch (tu_below(&r, 3)) {
            case 0: v = special[tu_below(&r, sizeof(special) / sizeof(special[0]))]; break;
            case 1: v = tu_below(&r, 100000); break;
            default: v = tu_rand(&r); break;
            }
            memcached_return_t mrc = memcached_behavior_set(m, (memcached_behavior_t)b, v);
            mcr_error e;
            int rc = mcr_lmc_set_conn_behavior(l, b, v, &e);
            ck_assert_msg((mrc == MEMCACHED_SUCCESS) == (rc == MCR_OK),
                          "behaviour %d = %llu: libmemcached %s, mcroute %s", (int)b,
                          (unsigned long long)v, memcached_strerror(m, mrc), mcr_strerror(rc));
            if (rc != MCR_OK) { /* only SERVER_FAILURE_LIMIT 0 */
                ck_assert_int_eq(rc, MCR_ERR_RANGE);
                ck_assert_int_eq(b, MCR_LMC_SERVER_FAILURE_LIMIT);
                ck_assert(strstr(e.message, "SERVER_FAILURE_LIMIT") != NULL);
            }
            compare_conn_behaviors(m, l, opts);
            g_configs++;
        }
        /* Placement behaviours are not connection behaviours, and back. */
        uint64_t v = 99;
        ck_assert_int_eq(mcr_lmc_set_conn_behavior(l, (mcr_lmc_conn_behavior)MCR_LMC_HASH, 1, NULL),
                         MCR_ERR_UNKNOWN);
        ck_assert_int_eq(mcr_lmc_get_conn_behavior(l, (mcr_lmc_conn_behavior)MCR_LMC_HASH, &v),
                         MCR_ERR_UNKNOWN);
        ck_assert_int_eq(mcr_lmc_set_behavior(l, (mcr_lmc_behavior)MCR_LMC_POLL_TIMEOUT, 1, NULL),
                         MCR_ERR_UNKNOWN);
        ck_assert_uint_eq(v, 99);
        mcr_lmc_free(l);
        memcached_free(m);
    }
    ck_assert_int_eq(mcr_lmc_set_conn_behavior(NULL, MCR_LMC_POLL_TIMEOUT, 1, NULL),
                     MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_lmc_get_conn_behavior(NULL, MCR_LMC_POLL_TIMEOUT, NULL), MCR_ERR_INVALID);
    print_counts("conn_behaviors_set");
}
END_TEST

/* The documented mapping, computed from what libmemcached itself reports
 * for the same configuration. */
static void expected_pool_options(memcached_st *m, mcr_pool_options *o)
{
    int32_t connect = (int32_t)memcached_behavior_get(m, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT);
    int32_t poll = (int32_t)memcached_behavior_get(m, MEMCACHED_BEHAVIOR_POLL_TIMEOUT);
    int32_t retry = (int32_t)memcached_behavior_get(m, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT);
    o->connect_timeout_ms = connect > 0 ? (unsigned)connect : 0;
    o->request_timeout_ms = poll > 0 ? (unsigned)poll : 0;
    o->retry_timeout_ms = retry > 0 ? (unsigned)retry * 1000u : 1u;
    o->server_failure_limit =
        (unsigned)memcached_behavior_get(m, MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT);
    o->policy = memcached_behavior_get(m, MEMCACHED_BEHAVIOR_REMOVE_FAILED_SERVERS)
                    ? MCR_POLICY_EJECT
                    : MCR_POLICY_FAIL_FAST;
}

/* Options with every field set to a value nothing maps to. */
static mcr_pool_options lmc_sentinel_options(void)
{
    mcr_pool_options o;
    memset(&o, 0, sizeof(o));
    o.connections = 3;
    o.eager = 1;
    o.connect_timeout_ms = 11;
    o.request_timeout_ms = 12;
    o.policy = MCR_POLICY_FAILOVER;
    o.server_failure_limit = 999;
    o.retry_timeout_ms = 13;
    o.retry_max_ms = 14;
    o.max_value_size = 15;
    o.key_prefix = "keep:";
    o.protocol = MCR_PROTO_META;
    o.max_in_flight = 16;
    o.no_coalesce = 1;
    return o;
}

START_TEST(pool_options_match_libmemcached)
{
    static const char *const cases[] = {
        "--SERVER=abc",
        "--SERVER=abc --CONNECT-TIMEOUT=250 --POLL-TIMEOUT=1500 --RETRY-TIMEOUT=30",
        "--SERVER=abc --REMOVE-FAILED-SERVERS=1 --RETRY-TIMEOUT=0",
        "--SERVER=abc --REMOVE-FAILED-SERVERS=7 --CONNECT-TIMEOUT=4294967295",
        "--SERVER=abc --POLL-TIMEOUT=2147483648 --RETRY-TIMEOUT=4294967295",
        "--SERVER=abc --RCV-TIMEOUT=5 --SND-TIMEOUT=5 --BINARY-PROTOCOL",
        "--SERVER=abc --CONNECT-TIMEOUT=86400000 --POLL-TIMEOUT=86400000 --RETRY-TIMEOUT=86400",
        "--SERVER=abc --NAMESPACE=app1.x --HASH-WITH-NAMESPACE",
        "--SERVER=abc --NAMESPACE=app2",
        "--SERVER=abc --NAMESPACE=app3 RESET --SERVER=def",
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *opts = cases[i];
        memcached_st *m = memcached(opts, strlen(opts));
        mcr_lmc *l = mcr_lmc_new();
        mcr_error e;
        ck_assert(m != NULL && l != NULL);
        ck_assert_int_eq(mcr_lmc_parse_options(l, opts, NULL), MCR_OK);
        for (int with_limit = 0; with_limit < 2; with_limit++) {
            if (with_limit) { /* the option string cannot set it */
                ck_assert_int_eq(memcached_behavior_set(m, MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT,
                                                        17),
                                 MEMCACHED_SUCCESS);
                ck_assert_int_eq(mcr_lmc_set_conn_behavior(l, MCR_LMC_SERVER_FAILURE_LIMIT, 17,
                                                           NULL),
                                 MCR_OK);
            }
            mcr_pool_options got = lmc_sentinel_options(), want = got;
            expected_pool_options(m, &want);
            ck_assert_msg(mcr_lmc_fill_pool_options(l, &got, &e) == MCR_OK, "%s: %s", opts,
                          e.message);
            ck_assert_msg(got.connect_timeout_ms == want.connect_timeout_ms &&
                              got.request_timeout_ms == want.request_timeout_ms &&
                              got.retry_timeout_ms == want.retry_timeout_ms &&
                              got.server_failure_limit == want.server_failure_limit &&
                              got.policy == want.policy,
                          "%s: got connect %u request %u retry %u limit %u policy %d, want %u %u "
                          "%u %u %d",
                          opts, got.connect_timeout_ms, got.request_timeout_ms,
                          got.retry_timeout_ms, got.server_failure_limit, (int)got.policy,
                          want.connect_timeout_ms, want.request_timeout_ms,
                          want.retry_timeout_ms, want.server_failure_limit, (int)want.policy);
            /* The namespace is libmemcached's prefix key. */
            const char *ns = memcached_callback_get(m, MEMCACHED_CALLBACK_PREFIX_KEY, NULL);
            if (ns == NULL || *ns == '\0')
                ck_assert_ptr_null(got.key_prefix);
            else
                ck_assert_str_eq(got.key_prefix, ns);
            /* Fields that nothing maps are left alone. */
            ck_assert_uint_eq(got.connections, 3);
            ck_assert_int_eq(got.eager, 1);
            ck_assert_uint_eq(got.retry_max_ms, 14);
            ck_assert_uint_eq(got.max_value_size, 15);
            ck_assert_int_eq(got.protocol, MCR_PROTO_META);
            ck_assert_uint_eq(got.max_in_flight, 16);
            ck_assert_int_eq(got.no_coalesce, 1);
        }
        mcr_lmc_free(l);
        memcached_free(m);
    }

    /* A new mcr_lmc: libmemcached's defaults. */
    mcr_lmc *l = mcr_lmc_new();
    mcr_pool_options o = lmc_sentinel_options();
    ck_assert_int_eq(mcr_lmc_fill_pool_options(l, &o, NULL), MCR_OK);
    ck_assert_uint_eq(o.connect_timeout_ms, 4000);
    ck_assert_uint_eq(o.request_timeout_ms, 5000);
    ck_assert_uint_eq(o.retry_timeout_ms, 2000);
    ck_assert_uint_eq(o.server_failure_limit, 5);
    ck_assert_int_eq(o.policy, MCR_POLICY_FAIL_FAST);
    ck_assert_ptr_null(o.key_prefix);
    /* The prefix points into the mcr_lmc. */
    ck_assert_int_eq(mcr_lmc_parse_options(l, "--NAMESPACE=pfx.a", NULL), MCR_OK);
    ck_assert_int_eq(mcr_lmc_fill_pool_options(l, &o, NULL), MCR_OK);
    ck_assert_str_eq(o.key_prefix, "pfx.a");
    ck_assert_int_eq(mcr_lmc_set_conn_behavior(l, MCR_LMC_AUTO_EJECT_HOSTS, 1, NULL), MCR_OK);
    ck_assert_int_eq(mcr_lmc_fill_pool_options(l, &o, NULL), MCR_OK);
    ck_assert_int_eq(o.policy, MCR_POLICY_EJECT);
    ck_assert_int_eq(mcr_lmc_fill_pool_options(NULL, &o, NULL), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_lmc_fill_pool_options(l, NULL, NULL), MCR_ERR_INVALID);
    mcr_lmc_free(l);
}
END_TEST

/* What the pool cannot take: refused, *opts unchanged, the message naming
 * the behaviour. */
static void expect_fill_error(const char *opts, int behavior, uint64_t value, const char *needle)
{
    mcr_lmc *l = mcr_lmc_new();
    mcr_pool_options o = lmc_sentinel_options(), before = o;
    mcr_error e;
    memset(&e, 0, sizeof(e));
    ck_assert_int_eq(mcr_lmc_parse_options(l, opts, NULL), MCR_OK);
    if (behavior >= 0)
        ck_assert_int_eq(mcr_lmc_set_conn_behavior(l, (mcr_lmc_conn_behavior)behavior, value, NULL),
                         MCR_OK);
    int rc = mcr_lmc_fill_pool_options(l, &o, &e);
    ck_assert_msg(rc == MCR_ERR_RANGE, "%s: got %d (%s)", opts, rc, e.message);
    ck_assert_int_eq(e.code, MCR_ERR_RANGE);
    ck_assert_msg(strstr(e.message, needle) != NULL, "%s: message \"%s\" lacks \"%s\"", opts,
                  e.message, needle);
    ck_assert(memcmp(&o, &before, sizeof(o)) == 0);
    mcr_lmc_free(l);
}

START_TEST(pool_options_refused)
{
    expect_fill_error("--POLL-TIMEOUT=0", -1, 0, "POLL_TIMEOUT is 0");
    expect_fill_error("--CONNECT-TIMEOUT=0", -1, 0, "CONNECT_TIMEOUT is 0");
    expect_fill_error("--CONNECT-TIMEOUT=86400001", -1, 0, "CONNECT_TIMEOUT 86400001");
    expect_fill_error("--POLL-TIMEOUT=2147483647", -1, 0, "POLL_TIMEOUT 2147483647");
    expect_fill_error("--RETRY-TIMEOUT=86401", -1, 0, "RETRY_TIMEOUT 86401");
    expect_fill_error("--SERVER=abc", MCR_LMC_SERVER_FAILURE_LIMIT, 1001, "SERVER_FAILURE_LIMIT 1001");
    /* libmemcached checks 64 bits and keeps 32: 2^32 is stored as 0. */
    expect_fill_error("--SERVER=abc", MCR_LMC_SERVER_FAILURE_LIMIT, 0x100000000ULL,
                      "SERVER_FAILURE_LIMIT 0");
    expect_fill_error("--BINARY-PROTOCOL --NAMESPACE=\"a b\"", -1, 0, "a b");
    expect_fill_error("--SERVER=abc", MCR_LMC_POLL_TIMEOUT, 0, "POLL_TIMEOUT");
}
END_TEST

static Suite *compat_suite(void)
{
    Suite *s = suite_create("compat_libmemcached");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, header_enum_numbering);
    tcase_add_test(t, conn_behaviors_option_strings);
    tcase_add_test(t, conn_behaviors_set);
    tcase_add_test(t, pool_options_match_libmemcached);
    tcase_add_test(t, pool_options_refused);
    tcase_add_test(t, fixed_vectors);
    tcase_add_test(t, state_machine_cases);
    tcase_add_test(t, ipv6_api);
    tcase_add_test(t, option_language_table);
    tcase_add_test(t, option_language_fuzz);
    tcase_add_test(t, bad_inputs);
    tcase_add_test(t, behavior_values);
    tcase_add_test(t, config_roundtrip);
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
    tcase_add_test(t, many_servers);
    tcase_add_test(t, many_servers_sorted);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(compat_suite());
}
