/* SPDX-License-Identifier: BSD-3-Clause */
/* libmemcached.c: libmemcached 1.1.4's placement state machine and option-string language. */
/*
 * What is reproduced, and where each fact comes from (all checked against
 * the Debian libmemcached 1.1.4 by test/test_compat_libmemcached.c):
 *
 * State. A memcached_st that matters for placement is: the servers in their
 * current order, the distribution, a "weighted" flag, the key hash, the
 * namespace with its HASH_WITH_NAMESPACE flag, the SORT_HOSTS flag, and the
 * continuum built at the last "rebuild". A rebuild happens on every server
 * add and on every setting of DISTRIBUTION, KETAMA, KETAMA_WEIGHTED and
 * SORT_HOSTS (whatever the value); it sorts the servers in place when
 * SORT_HOSTS is on (in every distribution, modula included) and hashes the
 * labels with the key hash in force at that moment. So the order of the
 * servers is a state, not a flag: turning SORT_HOSTS off later keeps the
 * sorted order and appends new servers after it. We keep that order and
 * remember the key hash of the last rebuild ("point hash"). Sorting at every
 * rebuild would make n adds with SORT_HOSTS on cost n sorts, so the sort is
 * deferred: while SORT_HOSTS stays on, every rebuild leaves the whole list
 * sorted, and since no two servers compare equal (duplicates are refused)
 * one sort before the order is next used gives that same order. It is done
 * when SORT_HOSTS is turned off (the order then stops being re-sorted and
 * new servers go after it) and, on a copy, when a config is built.
 *
 * Side effects of the behaviours (libmemcached behavior.cc):
 *   DISTRIBUTION=CONSISTENT or CONSISTENT_KETAMA  weighting off
 *   DISTRIBUTION=CONSISTENT_WEIGHTED              weighting on
 *   DISTRIBUTION=MODULA / SPY                     weighting unchanged
 *   KETAMA=x          x ? CONSISTENT_KETAMA (weighting off) : MODULA
 *   KETAMA_WEIGHTED=0 same as KETAMA=1
 *   KETAMA_WEIGHTED=x key hash MD5, distribution hash MD5, CONSISTENT_WEIGHTED
 *   adding a server of weight > 1 under a consistent distribution turns
 *   weighting on; a weight of 0 is stored as 1.
 *
 * The option language (memcached(), libmemcached's csl/scanner.l and
 * csl/parser.yy) is tokenised like its flex scanner: at each position the
 * longest match among the rules wins, ties go to the earlier rule, options
 * and keywords are case-insensitive, tabs, CR and LF between tokens are
 * skipped, and statements are separated by exactly one space. This is why
 * "--SERVER=ab" (a hostname needs 3 characters), "--SERVER=123" (a number)
 * and "--SERVER=md5" (a keyword) are errors there and here.
 *
 * Connection behaviours (for mcr_lmc_fill_pool_options) are kept with the
 * types memcached_st gives them (behavior.cc: int32_t timeouts, uint32_t
 * limits, REMOVE_FAILED_SERVERS and AUTO_EJECT_HOSTS one flag), and the
 * option string's numbers are read with atoi() as the scanner reads them,
 * so what mcr_lmc_get_conn_behavior() returns is what
 * memcached_behavior_get() returns, wrapped values included.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "mcroute_libmemcached.h"
#include "mcroute_pool.h"

/* ---------------------------------------------------------------- limits */

/* libmemcached MEMCACHED_MAX_NAMESPACE (128): a namespace is at most 127 bytes. */
#define LMC_NAMESPACE_MAX 127
/* The hash values a memcached_st accepts (hashkit_hash_algorithm_t 0..10;
 * 11 is CUSTOM, which cannot be set as a behaviour). */
#define LMC_HASH_LAST MCR_HASH_MURMUR3
/* Longest text of an option quoted in a message. */
#define QUOTE_MAX 72

/* libmemcached's memcached_behavior_t numbers of the behaviours we take
 * (libmemcached-1.0/types/behavior.h). */
enum {
    LMC_BEHAVIOR_HASH = 2,
    LMC_BEHAVIOR_KETAMA = 3,
    LMC_BEHAVIOR_DISTRIBUTION = 9,
    LMC_BEHAVIOR_SORT_HOSTS = 12,
    LMC_BEHAVIOR_KETAMA_WEIGHTED = 16,
    LMC_BEHAVIOR_KETAMA_HASH = 17,
    LMC_BEHAVIOR_HASH_WITH_PREFIX_KEY = 25
};

/* libmemcached 1.1.4's defaults for the connection behaviours
 * (libmemcached-1.0/defaults.h: MEMCACHED_DEFAULT_TIMEOUT,
 * MEMCACHED_DEFAULT_CONNECT_TIMEOUT, MEMCACHED_SERVER_FAILURE_RETRY_TIMEOUT,
 * MEMCACHED_SERVER_FAILURE_LIMIT, ..._DEAD_TIMEOUT, ..._TIMEOUT_LIMIT;
 * memcached_behavior_get() on a new handle reports the same). */
#define LMC_DEFAULT_POLL_TIMEOUT 5000    /* ms */
#define LMC_DEFAULT_CONNECT_TIMEOUT 4000 /* ms */
#define LMC_DEFAULT_RETRY_TIMEOUT 2      /* s */
#define LMC_DEFAULT_FAILURE_LIMIT 5
#define LMC_DEFAULT_DEAD_TIMEOUT 0       /* s */
#define LMC_DEFAULT_TIMEOUT_LIMIT 0

/* libmemcached's memcached_server_distribution_t
 * (libmemcached-1.0/types/server_distribution.h). */
enum {
    LMC_DIST_MODULA = 0,
    LMC_DIST_CONSISTENT = 1,
    LMC_DIST_CONSISTENT_KETAMA = 2,
    LMC_DIST_RANDOM = 3,
    LMC_DIST_CONSISTENT_KETAMA_SPY = 4,
    LMC_DIST_CONSISTENT_WEIGHTED = 5,
    LMC_DIST_VIRTUAL_BUCKET = 6,
    LMC_DIST_COUNT = 7
};

/* ---------------------------------------------------------------- state */

typedef struct lmc_server {
    char *host; /* NUL-terminated copy */
    size_t host_len;
    int port;
    uint32_t weight; /* >= 1: libmemcached stores 0 as 1 */
} lmc_server;

struct mcr_lmc {
    lmc_server *servers; /* current order: insertion, or sorted at a rebuild */
    size_t count;
    size_t cap;
    /* The servers as a hash set for the duplicate check of each add: open
     * addressing, entries are index + 1 in `servers` (0: empty), at most
     * half full; rebuilt when `servers` is reordered or copied. */
    mcr__slotset set;
    int distribution;  /* LMC_DIST_*, never RANDOM or VIRTUAL_BUCKET */
    bool weighted;     /* memcached_st ketama.weighted_ */
    mcr_hash key_hash; /* MEMCACHED_BEHAVIOR_HASH */
    mcr_hash dist_hash; /* MEMCACHED_BEHAVIOR_KETAMA_HASH: kept, never used */
    mcr_hash point_hash; /* key hash at the last rebuild: labels use it */
    bool sort_hosts;
    bool sort_pending; /* SORT_HOSTS was on at the last rebuild and `servers`
                          is not sorted yet: the real order is the sorted one */
    bool hash_with_namespace;
    bool has_namespace;
    size_t ns_len;
    char ns[LMC_NAMESPACE_MAX + 1];
    /* Flags that only matter because libmemcached refuses some
     * combinations of them (behavior.cc) and the namespace check;
     * binary_protocol is also MCR_LMC_BINARY_PROTOCOL. */
    bool binary_protocol;
    bool use_udp;
    /* Connection behaviours, typed as memcached_st keeps them (behavior.cc
     * casts timeouts to int32_t, limits to uint32_t), so that
     * mcr_lmc_get_conn_behavior() reads what memcached_behavior_get() does
     * and mcr_lmc_fill_pool_options() starts from the same numbers. */
    int32_t poll_timeout;    /* ms */
    int32_t connect_timeout; /* ms */
    int32_t retry_timeout;   /* s */
    int32_t snd_timeout;     /* us */
    int32_t rcv_timeout;     /* us */
    int32_t dead_timeout;    /* s */
    uint32_t server_failure_limit;
    uint32_t server_timeout_limit;
    bool auto_eject; /* REMOVE_FAILED_SERVERS and AUTO_EJECT_HOSTS: one flag */
};

/* Reset to the state of a fresh memcached_st (no servers). */
static void lmc_defaults(mcr_lmc *l)
{
    l->count = 0;
    l->distribution = LMC_DIST_MODULA;
    l->weighted = false;
    l->key_hash = MCR_HASH_DEFAULT;
    l->dist_hash = MCR_HASH_DEFAULT;
    l->point_hash = MCR_HASH_DEFAULT;
    l->sort_hosts = false;
    l->sort_pending = false;
    l->hash_with_namespace = false;
    l->has_namespace = false;
    l->ns_len = 0;
    l->ns[0] = '\0';
    l->binary_protocol = false;
    l->use_udp = false;
    l->poll_timeout = LMC_DEFAULT_POLL_TIMEOUT;
    l->connect_timeout = LMC_DEFAULT_CONNECT_TIMEOUT;
    l->retry_timeout = LMC_DEFAULT_RETRY_TIMEOUT;
    l->snd_timeout = 0;
    l->rcv_timeout = 0;
    l->dead_timeout = LMC_DEFAULT_DEAD_TIMEOUT;
    l->server_failure_limit = LMC_DEFAULT_FAILURE_LIMIT;
    l->server_timeout_limit = LMC_DEFAULT_TIMEOUT_LIMIT;
    l->auto_eject = false;
}

/* Free the hosts; the server array and the set stay allocated (empty). */
static void lmc_clear_servers(mcr_lmc *l)
{
    for (size_t i = 0; i < l->count; i++)
        free(l->servers[i].host);
    l->count = 0;
    mcr__slotset_clear(&l->set);
}

typedef struct lmc_key {
    const char *host;
    size_t len;
    int port;
} lmc_key;

static bool lmc_server_eq(const void *ctx, size_t idx, const void *key)
{
    const lmc_server *s = &((const mcr_lmc *)ctx)->servers[idx];
    const lmc_key *k = key;
    return s->port == k->port && s->host_len == k->len && memcmp(s->host, k->host, k->len) == 0;
}

/* Enter servers[idx] in the set, which has room. */
static void set_put(mcr_lmc *l, size_t idx)
{
    const lmc_server *s = &l->servers[idx];
    mcr__slotset_put(&l->set, mcr__slot_hash(s->host, s->host_len, (uint64_t)s->port), idx);
}

/* Give the set room for `want` servers and refill it. MCR_OK, or
 * MCR_ERR_NOMEM with the old set kept. */
static int set_reindex(mcr_lmc *l, size_t want)
{
    if (mcr__slotset_resize(&l->set, want) != MCR_OK)
        return MCR_ERR_NOMEM;
    for (size_t i = 0; i < l->count; i++)
        set_put(l, i);
    return MCR_OK;
}

/* Whether host (len bytes) and port are already a server. */
static bool set_has(const mcr_lmc *l, const char *host, size_t len, int port)
{
    lmc_key k = {host, len, port};
    return mcr__slotset_find(&l->set, mcr__slot_hash(host, len, (uint64_t)port), lmc_server_eq, l,
                             &k) >= 0;
}

mcr_lmc *mcr_lmc_new(void)
{
    mcr_lmc *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return NULL;
    lmc_defaults(l);
    return l;
}

void mcr_lmc_free(mcr_lmc *lmc)
{
    if (lmc == NULL)
        return;
    lmc_clear_servers(lmc);
    free(lmc->servers);
    mcr__slotset_free(&lmc->set);
    free(lmc);
}

/* Deep copy of `src` into `dst` (uninitialised). MCR_OK or MCR_ERR_NOMEM
 * (dst then owns nothing). */
static int lmc_copy(mcr_lmc *dst, const mcr_lmc *src)
{
    *dst = *src;
    dst->servers = NULL;
    dst->count = dst->cap = 0;
    dst->set = (mcr__slotset){NULL, 0};
    if (src->count == 0)
        return MCR_OK;
    dst->servers = malloc(src->count * sizeof(*dst->servers));
    if (dst->servers == NULL)
        return MCR_ERR_NOMEM;
    dst->cap = src->count;
    for (size_t i = 0; i < src->count; i++) {
        lmc_server *d = &dst->servers[i];
        *d = src->servers[i];
        d->host = malloc(d->host_len + 1);
        if (d->host == NULL) {
            lmc_clear_servers(dst);
            free(dst->servers);
            dst->servers = NULL;
            dst->cap = 0;
            return MCR_ERR_NOMEM;
        }
        memcpy(d->host, src->servers[i].host, d->host_len + 1);
        dst->count++;
    }
    if (set_reindex(dst, dst->count) != MCR_OK) {
        lmc_clear_servers(dst);
        free(dst->servers);
        dst->servers = NULL;
        dst->cap = 0;
        return MCR_ERR_NOMEM;
    }
    return MCR_OK;
}

/* Replace the contents of `l` by those of `tmp` (which is consumed). */
static void lmc_commit(mcr_lmc *l, mcr_lmc *tmp)
{
    lmc_clear_servers(l);
    free(l->servers);
    mcr__slotset_free(&l->set);
    *l = *tmp;
}

/* Release a working copy that is not committed. */
static void lmc_discard(mcr_lmc *tmp)
{
    lmc_clear_servers(tmp);
    free(tmp->servers);
    mcr__slotset_free(&tmp->set);
}

/* libmemcached memcached_is_consistent_distribution(). */
static bool is_consistent(int dist)
{
    return dist == LMC_DIST_CONSISTENT || dist == LMC_DIST_CONSISTENT_KETAMA ||
           dist == LMC_DIST_CONSISTENT_KETAMA_SPY || dist == LMC_DIST_CONSISTENT_WEIGHTED;
}

/* libmemcached hosts.cc compare_servers: strcmp of the hosts, then ports. */
static int cmp_servers(const void *a, const void *b)
{
    const lmc_server *x = a, *y = b;
    int c = strcmp(x->host, y->host);
    if (c != 0)
        return c;
    return (x->port > y->port) - (x->port < y->port);
}

/* Apply a deferred sort. */
static void lmc_settle(mcr_lmc *l)
{
    if (l->sort_pending && l->count > 1) {
        qsort(l->servers, l->count, sizeof(*l->servers), cmp_servers);
        mcr__slotset_clear(&l->set); /* indices moved */
        for (size_t i = 0; i < l->count; i++)
            set_put(l, i);
    }
    l->sort_pending = false;
}

/* libmemcached run_distribution(): sort if asked, and (re)hash the labels
 * with the current key hash. The sort is deferred (see the top of this
 * file): with SORT_HOSTS on it is only recorded; with it off, a pending
 * sort is applied now, before servers can be appended after it. Cannot
 * fail. */
static void lmc_rebuild(mcr_lmc *l)
{
    if (l->sort_hosts)
        l->sort_pending = l->count > 1;
    else
        lmc_settle(l);
    l->point_hash = l->key_hash;
}

/* memcached_behavior_set_distribution(); `d` is valid and reproducible. */
static void lmc_set_distribution(mcr_lmc *l, int d)
{
    if (d == LMC_DIST_CONSISTENT || d == LMC_DIST_CONSISTENT_KETAMA)
        l->weighted = false;
    else if (d == LMC_DIST_CONSISTENT_WEIGHTED)
        l->weighted = true;
    l->distribution = d;
    lmc_rebuild(l);
}

/* Validate and append a server as memcached_server_add_with_weight() does,
 * with mcroute's limits. `host` has `len` bytes, not NUL-terminated. `what`
 * prefixes messages. The state is unchanged on error. */
static int lmc_add(mcr_lmc *l, const char *host, size_t len, long port, uint32_t weight,
                   const char *what, mcr_error *err)
{
    char q[QUOTE_MAX];
    mcr_error e;
    int rc;

    if (len == 0) { /* libmemcached: an empty hostname means "localhost" */
        host = "localhost";
        len = strlen(host);
    }
    rc = mcr__check_host(host, len, &e);
    if (rc != MCR_OK)
        return mcr__error(err, rc, "%s%s", what, e.message);
    if (port == 0) /* libmemcached: port 0 means the default port */
        port = MCR_DEFAULT_PORT;
    if (port < 0 || port > 65535)
        return mcr__error(err, MCR_ERR_RANGE,
                          "%sport %ld of \"%s\" is outside 1..65535 (libmemcached would "
                          "silently use %ld)",
                          what, port, mcr__quote(q, sizeof(q), host, len),
                          port > 65535 ? (port % 65536 ? port % 65536 : MCR_DEFAULT_PORT)
                                       : (long)(uint16_t)port);
    if (weight == 0)
        weight = 1;
    if (weight > MCR_WEIGHT_MAX)
        return mcr__error(err, MCR_ERR_RANGE, "%sweight %lu of \"%s\" is outside 1..%lu", what,
                          (unsigned long)weight, mcr__quote(q, sizeof(q), host, len),
                          (unsigned long)MCR_WEIGHT_MAX);
    if (set_has(l, host, len, (int)port))
        return mcr__error(err, MCR_ERR_DUPLICATE,
                          "%sduplicate server %s:%ld (libmemcached would keep both; "
                          "mcroute refuses it)",
                          what, mcr__quote(q, sizeof(q), host, len), port);
    if (l->count >= UINT32_MAX - 1)
        return mcr__error(err, MCR_ERR_RANGE, "%stoo many servers", what);
    if (2 * (l->count + 1) > l->set.cap && set_reindex(l, l->count + 1) != MCR_OK)
        return mcr__error(err, MCR_ERR_NOMEM, "%sout of memory", what);
    if (l->count == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        lmc_server *n = realloc(l->servers, cap * sizeof(*n));
        if (n == NULL)
            return mcr__error(err, MCR_ERR_NOMEM, "%sout of memory", what);
        l->servers = n;
        l->cap = cap;
    }
    char *h = malloc(len + 1);
    if (h == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "%sout of memory", what);
    memcpy(h, host, len);
    h[len] = '\0';
    l->servers[l->count].host = h;
    l->servers[l->count].host_len = len;
    l->servers[l->count].port = (int)port;
    l->servers[l->count].weight = weight;
    l->count++;
    set_put(l, l->count - 1);
    if (weight > 1 && is_consistent(l->distribution))
        l->weighted = true;
    lmc_rebuild(l);
    return MCR_OK;
}

int mcr_lmc_add_server(mcr_lmc *lmc, const char *host, int port, uint32_t weight,
                       mcr_error *err)
{
    if (lmc == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL mcr_lmc");
    return lmc_add(lmc, host ? host : "", host ? strlen(host) : 0, port, weight, "", err);
}

/* ---------------------------------------------------------------- behaviours */

/* Name (without MEMCACHED_BEHAVIOR_) of a behaviour we take, or NULL. */
static const char *behavior_name(int b)
{
    switch (b) {
    case LMC_BEHAVIOR_HASH: return "HASH";
    case LMC_BEHAVIOR_KETAMA: return "KETAMA";
    case LMC_BEHAVIOR_DISTRIBUTION: return "DISTRIBUTION";
    case LMC_BEHAVIOR_SORT_HOSTS: return "SORT_HOSTS";
    case LMC_BEHAVIOR_KETAMA_WEIGHTED: return "KETAMA_WEIGHTED";
    case LMC_BEHAVIOR_KETAMA_HASH: return "KETAMA_HASH";
    case LMC_BEHAVIOR_HASH_WITH_PREFIX_KEY: return "HASH_WITH_PREFIX_KEY";
    default: return NULL;
    }
}

/* memcached_behavior_set() for a placement behaviour, on `l`. The state is
 * unchanged on error. */
static int lmc_behavior(mcr_lmc *l, int behavior, uint64_t value, mcr_error *err)
{
    switch (behavior) {
    case LMC_BEHAVIOR_HASH:
    case LMC_BEHAVIOR_KETAMA_HASH:
        if (value > LMC_HASH_LAST)
            return mcr__error(err, MCR_ERR_RANGE,
                              "MEMCACHED_BEHAVIOR_%s: %llu is not a libmemcached hash (0..%d)",
                              behavior_name(behavior), (unsigned long long)value,
                              (int)LMC_HASH_LAST);
        if (behavior == LMC_BEHAVIOR_HASH)
            l->key_hash = (mcr_hash)value; /* no rebuild: labels keep the old hash */
        else
            l->dist_hash = (mcr_hash)value; /* no effect on placement in 1.1.4 */
        return MCR_OK;
    case LMC_BEHAVIOR_DISTRIBUTION:
        if (value >= LMC_DIST_COUNT)
            return mcr__error(err, MCR_ERR_RANGE,
                              "MEMCACHED_BEHAVIOR_DISTRIBUTION: %llu is not a libmemcached "
                              "distribution (0..%d)",
                              (unsigned long long)value, LMC_DIST_COUNT - 1);
        if (value == LMC_DIST_RANDOM)
            return mcr__error(err, MCR_ERR_UNSUPPORTED,
                              "MEMCACHED_BEHAVIOR_DISTRIBUTION: the random distribution picks "
                              "a server at random for every key and cannot be reproduced");
        if (value == LMC_DIST_VIRTUAL_BUCKET)
            return mcr__error(err, MCR_ERR_UNSUPPORTED,
                              "MEMCACHED_BEHAVIOR_DISTRIBUTION: the virtual bucket "
                              "distribution needs libmemcached's bucket table, which mcroute "
                              "does not model");
        lmc_set_distribution(l, (int)value);
        return MCR_OK;
    case LMC_BEHAVIOR_KETAMA:
        lmc_set_distribution(l, value ? LMC_DIST_CONSISTENT_KETAMA : LMC_DIST_MODULA);
        return MCR_OK;
    case LMC_BEHAVIOR_KETAMA_WEIGHTED:
        if (value == 0) { /* libmemcached: same as KETAMA=1 */
            lmc_set_distribution(l, LMC_DIST_CONSISTENT_KETAMA);
            return MCR_OK;
        }
        l->key_hash = MCR_HASH_MD5;
        l->dist_hash = MCR_HASH_MD5;
        lmc_set_distribution(l, LMC_DIST_CONSISTENT_WEIGHTED);
        return MCR_OK;
    case LMC_BEHAVIOR_SORT_HOSTS:
        l->sort_hosts = value != 0;
        lmc_rebuild(l);
        return MCR_OK;
    case LMC_BEHAVIOR_HASH_WITH_PREFIX_KEY:
        l->hash_with_namespace = value != 0;
        return MCR_OK;
    default:
        return mcr__error(err, MCR_ERR_UNKNOWN,
                          "behaviour %d is unknown or does not affect placement (mcr_lmc takes "
                          "DISTRIBUTION, HASH, KETAMA, KETAMA_WEIGHTED, KETAMA_HASH, "
                          "SORT_HOSTS, HASH_WITH_PREFIX_KEY)",
                          behavior);
    }
}

int mcr_lmc_set_behavior(mcr_lmc *lmc, mcr_lmc_behavior behavior, uint64_t value,
                         mcr_error *err)
{
    if (lmc == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL mcr_lmc");
    return lmc_behavior(lmc, (int)behavior, value, err);
}

/* ---------------------------------------------------------------- connection behaviours */

/* The low 32 bits of v as a signed number: what libmemcached's int32_t
 * casts keep (behavior.cc), written without implementation-defined
 * conversions. */
static int32_t low_int32(uint64_t v)
{
    uint32_t u = (uint32_t)v;
    return u <= INT32_MAX ? (int32_t)u : (int32_t)((int64_t)u - 4294967296LL);
}

/* memcached_behavior_set() for a connection behaviour, on `l`. The state
 * is unchanged on error. */
static int lmc_conn_behavior(mcr_lmc *l, int behavior, uint64_t value, mcr_error *err)
{
    switch (behavior) {
    case MCR_LMC_POLL_TIMEOUT: l->poll_timeout = low_int32(value); return MCR_OK;
    case MCR_LMC_CONNECT_TIMEOUT: l->connect_timeout = low_int32(value); return MCR_OK;
    case MCR_LMC_RETRY_TIMEOUT: l->retry_timeout = low_int32(value); return MCR_OK;
    case MCR_LMC_SND_TIMEOUT: l->snd_timeout = low_int32(value); return MCR_OK;
    case MCR_LMC_RCV_TIMEOUT: l->rcv_timeout = low_int32(value); return MCR_OK;
    case MCR_LMC_DEAD_TIMEOUT: l->dead_timeout = low_int32(value); return MCR_OK;
    case MCR_LMC_BINARY_PROTOCOL: l->binary_protocol = value != 0; return MCR_OK;
    case MCR_LMC_AUTO_EJECT_HOSTS:
    case MCR_LMC_REMOVE_FAILED_SERVERS: l->auto_eject = value != 0; return MCR_OK;
    case MCR_LMC_SERVER_TIMEOUT_LIMIT: l->server_timeout_limit = (uint32_t)value; return MCR_OK;
    case MCR_LMC_SERVER_FAILURE_LIMIT:
        /* libmemcached checks the 64-bit value, then keeps 32 bits. */
        if (value == 0)
            return mcr__error(err, MCR_ERR_RANGE,
                              "MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT: 0 is refused by "
                              "libmemcached (it needs a value greater than zero)");
        l->server_failure_limit = (uint32_t)value;
        return MCR_OK;
    default:
        return mcr__error(err, MCR_ERR_UNKNOWN,
                          "behaviour %d is not a connection behaviour (mcr_lmc keeps "
                          "POLL_TIMEOUT, CONNECT_TIMEOUT, RETRY_TIMEOUT, BINARY_PROTOCOL, "
                          "SND_TIMEOUT, RCV_TIMEOUT, SERVER_FAILURE_LIMIT, AUTO_EJECT_HOSTS, "
                          "REMOVE_FAILED_SERVERS, DEAD_TIMEOUT, SERVER_TIMEOUT_LIMIT)",
                          behavior);
    }
}

int mcr_lmc_set_conn_behavior(mcr_lmc *lmc, mcr_lmc_conn_behavior behavior, uint64_t value,
                              mcr_error *err)
{
    if (lmc == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL mcr_lmc");
    return lmc_conn_behavior(lmc, (int)behavior, value, err);
}

int mcr_lmc_get_conn_behavior(const mcr_lmc *lmc, mcr_lmc_conn_behavior behavior,
                              uint64_t *value)
{
    int64_t v;

    if (lmc == NULL || value == NULL)
        return MCR_ERR_INVALID;
    switch ((int)behavior) {
    case MCR_LMC_POLL_TIMEOUT: v = lmc->poll_timeout; break;
    case MCR_LMC_CONNECT_TIMEOUT: v = lmc->connect_timeout; break;
    case MCR_LMC_RETRY_TIMEOUT: v = lmc->retry_timeout; break;
    case MCR_LMC_SND_TIMEOUT: v = lmc->snd_timeout; break;
    case MCR_LMC_RCV_TIMEOUT: v = lmc->rcv_timeout; break;
    case MCR_LMC_DEAD_TIMEOUT: v = lmc->dead_timeout; break;
    case MCR_LMC_BINARY_PROTOCOL: v = lmc->binary_protocol; break;
    case MCR_LMC_AUTO_EJECT_HOSTS:
    case MCR_LMC_REMOVE_FAILED_SERVERS: v = lmc->auto_eject; break;
    case MCR_LMC_SERVER_FAILURE_LIMIT: v = lmc->server_failure_limit; break;
    case MCR_LMC_SERVER_TIMEOUT_LIMIT: v = lmc->server_timeout_limit; break;
    default: return MCR_ERR_UNKNOWN;
    }
    /* memcached_behavior_get() returns (uint64_t) of the stored int32_t:
     * a negative timeout wraps modulo 2^64. */
    *value = (uint64_t)v;
    return MCR_OK;
}

/* A libmemcached millisecond timeout `v` (behaviour `name`) as a pool
 * timeout: negative (wait forever) gives 0, the pool's default; 0 (fail at
 * once) has no pool equivalent; above a day mcr_pool_new() refuses it. */
static int lmc_pool_ms(const char *name, int32_t v, unsigned *out, mcr_error *err)
{
    if (v == 0)
        return mcr__error(err, MCR_ERR_RANGE,
                          "MEMCACHED_BEHAVIOR_%s is 0: libmemcached then fails at once, which a "
                          "connection pool cannot do (its 0 means the default)",
                          name);
    if (v > 0 && (uint32_t)v > MCR_POOL_TIMEOUT_MAX_MS)
        return mcr__error(err, MCR_ERR_RANGE,
                          "MEMCACHED_BEHAVIOR_%s %ld ms is above the connection pool's limit of "
                          "%u ms (one day)",
                          name, (long)v, MCR_POOL_TIMEOUT_MAX_MS);
    *out = v > 0 ? (unsigned)v : 0;
    return MCR_OK;
}

int mcr_lmc_fill_pool_options(const mcr_lmc *lmc, mcr_pool_options *opts, mcr_error *err)
{
    mcr_pool_options o;
    int rc;

    if (lmc == NULL || opts == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL mcr_lmc or options");
    o = *opts;
    rc = lmc_pool_ms("CONNECT_TIMEOUT", lmc->connect_timeout, &o.connect_timeout_ms, err);
    if (rc != MCR_OK)
        return rc;
    /* Sockets are always non-blocking in libmemcached (connect.cc): every
     * wait for a reply is a poll() bounded by POLL_TIMEOUT (io.cc), and
     * SO_RCVTIMEO / SO_SNDTIMEO never expire. */
    rc = lmc_pool_ms("POLL_TIMEOUT", lmc->poll_timeout, &o.request_timeout_ms, err);
    if (rc != MCR_OK)
        return rc;
    /* Seconds. 0 or negative: retried once the clock has passed
     * next_retry, at the latest a second later; 1 ms is the closest. */
    if (lmc->retry_timeout > 0 &&
        (uint32_t)lmc->retry_timeout > MCR_POOL_TIMEOUT_MAX_MS / 1000)
        return mcr__error(err, MCR_ERR_RANGE,
                          "MEMCACHED_BEHAVIOR_RETRY_TIMEOUT %ld s is above the connection pool's "
                          "limit of %u s (one day)",
                          (long)lmc->retry_timeout, MCR_POOL_TIMEOUT_MAX_MS / 1000);
    o.retry_timeout_ms = lmc->retry_timeout > 0 ? (unsigned)lmc->retry_timeout * 1000u : 1u;
    if (lmc->server_failure_limit == 0 || lmc->server_failure_limit > MCR_POOL_FAILURE_LIMIT_MAX)
        return mcr__error(err, MCR_ERR_RANGE,
                          "MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT %lu is outside the connection "
                          "pool's 1..%u",
                          (unsigned long)lmc->server_failure_limit, MCR_POOL_FAILURE_LIMIT_MAX);
    o.server_failure_limit = lmc->server_failure_limit;
    o.policy = lmc->auto_eject ? MCR_POLICY_EJECT : MCR_POLICY_FAIL_FAST;
    if (lmc->has_namespace) {
        char q[QUOTE_MAX];
        for (size_t i = 0; i < lmc->ns_len; i++)
            if (((unsigned char)lmc->ns[i] <= 0x20 || (unsigned char)lmc->ns[i] == 0x7f))
                return mcr__error(err, MCR_ERR_RANGE,
                                  "the namespace \"%s\" has a space or control byte, which the "
                                  "connection pool's key prefix cannot carry",
                                  mcr__quote(q, sizeof(q), lmc->ns, lmc->ns_len));
        o.key_prefix = lmc->ns; /* at most 127 bytes: within the pool's 128 */
    } else {
        o.key_prefix = NULL;
    }
    *opts = o;
    return MCR_OK;
}

/* ASCII case-insensitive comparison of NUL-terminated strings. */
static bool ieq(const char *a, const char *b)
{
    for (; *a != '\0' && *b != '\0'; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b))
            return false;
    return *a == *b;
}

/* `s` without `prefix` if it starts with it (case-insensitive), else `s`. */
static const char *skip_prefix(const char *s, const char *prefix)
{
    size_t n = strlen(prefix);
    for (size_t i = 0; i < n; i++)
        if (tolower((unsigned char)s[i]) != tolower((unsigned char)prefix[i]))
            return s;
    return s + n;
}

/* A decimal unsigned 64-bit number. MCR_OK, MCR_ERR_SYNTAX (not a number)
 * or MCR_ERR_RANGE (too large). */
static int parse_u64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (*s == '\0')
        return MCR_ERR_SYNTAX;
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9')
            return MCR_ERR_SYNTAX;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return MCR_ERR_RANGE;
        v = v * 10 + d;
    }
    *out = v;
    return MCR_OK;
}

static const struct {
    const char *name;
    int value;
} dist_names[] = {
    {"modula", LMC_DIST_MODULA},
    {"consistent", LMC_DIST_CONSISTENT},
    {"consistent_ketama", LMC_DIST_CONSISTENT_KETAMA},
    {"ketama", LMC_DIST_CONSISTENT_KETAMA},
    {"random", LMC_DIST_RANDOM},
    {"consistent_ketama_spy", LMC_DIST_CONSISTENT_KETAMA_SPY},
    {"spy", LMC_DIST_CONSISTENT_KETAMA_SPY},
    {"consistent_weighted", LMC_DIST_CONSISTENT_WEIGHTED},
    {"weighted", LMC_DIST_CONSISTENT_WEIGHTED},
    {"virtual_bucket", LMC_DIST_VIRTUAL_BUCKET},
};

int mcr_lmc_set_behavior_name(mcr_lmc *lmc, const char *name, const char *value,
                              mcr_error *err)
{
    static const int behaviors[] = {LMC_BEHAVIOR_HASH,        LMC_BEHAVIOR_KETAMA,
                                    LMC_BEHAVIOR_DISTRIBUTION, LMC_BEHAVIOR_SORT_HOSTS,
                                    LMC_BEHAVIOR_KETAMA_WEIGHTED, LMC_BEHAVIOR_KETAMA_HASH,
                                    LMC_BEHAVIOR_HASH_WITH_PREFIX_KEY};
    char qn[QUOTE_MAX], qv[QUOTE_MAX];
    int b = -1, rc;
    uint64_t v = 0;

    if (lmc == NULL || name == NULL || value == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL mcr_lmc, behaviour name or value");
    mcr__quote(qn, sizeof(qn), name, strlen(name));
    mcr__quote(qv, sizeof(qv), value, strlen(value));
    const char *n = skip_prefix(name, "MEMCACHED_BEHAVIOR_");
    for (size_t i = 0; i < sizeof(behaviors) / sizeof(behaviors[0]); i++)
        if (ieq(n, behavior_name(behaviors[i])))
            b = behaviors[i];
    if (ieq(n, "HASH_WITH_NAMESPACE"))
        b = LMC_BEHAVIOR_HASH_WITH_PREFIX_KEY;
    if (b < 0)
        return mcr__error(err, MCR_ERR_UNKNOWN,
                          "unknown behaviour \"%s\" (known: DISTRIBUTION, HASH, KETAMA, "
                          "KETAMA_WEIGHTED, KETAMA_HASH, SORT_HOSTS, HASH_WITH_PREFIX_KEY; the "
                          "others do not affect placement)",
                          qn);

    rc = parse_u64(value, &v);
    if (rc == MCR_ERR_RANGE)
        return mcr__error(err, rc, "behaviour %s: value \"%s\" is too large", qn, qv);
    if (rc != MCR_OK && b == LMC_BEHAVIOR_DISTRIBUTION) {
        const char *s = skip_prefix(value, "MEMCACHED_DISTRIBUTION_");
        size_t i;
        for (i = 0; i < sizeof(dist_names) / sizeof(dist_names[0]); i++)
            if (ieq(s, dist_names[i].name))
                break;
        if (i == sizeof(dist_names) / sizeof(dist_names[0]))
            return mcr__error(err, *value ? MCR_ERR_UNKNOWN : MCR_ERR_SYNTAX,
                              "behaviour %s: unknown distribution \"%s\" (known: modula, "
                              "consistent, ketama, spy, weighted)",
                              qn, qv);
        v = (uint64_t)dist_names[i].value;
    } else if (rc != MCR_OK && (b == LMC_BEHAVIOR_HASH || b == LMC_BEHAVIOR_KETAMA_HASH)) {
        mcr_hash h;
        if (mcr_hash_from_name(skip_prefix(value, "MEMCACHED_HASH_"), &h) != MCR_OK)
            return mcr__error(err, *value ? MCR_ERR_UNKNOWN : MCR_ERR_SYNTAX,
                              "behaviour %s: unknown hash \"%s\"", qn, qv);
        if ((int)h > LMC_HASH_LAST)
            return mcr__error(err, MCR_ERR_UNKNOWN,
                              "behaviour %s: \"%s\" is a twemproxy hash, libmemcached has none "
                              "of that name",
                              qn, qv);
        v = (uint64_t)h;
    } else if (rc != MCR_OK) {
        if (ieq(value, "true"))
            v = 1;
        else if (ieq(value, "false"))
            v = 0;
        else
            return mcr__error(err, MCR_ERR_SYNTAX,
                              "behaviour %s: value \"%s\" is not a number, true or false", qn,
                              qv);
    }
    return lmc_behavior(lmc, b, v, err);
}

/* ---------------------------------------------------------------- scanner */

typedef enum tok_kind {
    T_EOF,
    T_SPACE,   /* ' ': the statement separator */
    T_EQ,      /* '=' */
    T_COMMA,   /* ',' */
    T_NUMBER,  /* [0-9]+ */
    T_PORT,    /* :[0-9]{1,5} */
    T_WEIGHT,  /* /?[0-9]{1,5} */
    T_SKIP,    /* [\t\r\n]: ignored */
    T_COMMENT, /* ^#.*$ */
    T_OPTION,  /* a known "--NAME" literal, id = index in `options` */
    T_KEYWORD, /* id = KW_* */
    T_UNKNOWN_OPTION, /* "--" [[:alnum:]]* */
    T_DIST,    /* id = LMC_DIST_* */
    T_HASH,    /* id = mcr_hash */
    T_IPADDRESS, /* ([0-9]{1,3}.){3}[0-9]{1,3} */
    T_WORD,    /* [[:alnum:]]["."[:alnum:]_-]+[[:alnum:]]: hostname or string */
    T_QUOTED,  /* L?"(\\.|[^\\"])*" */
    T_UNKNOWN  /* any other byte */
} tok_kind;

typedef struct tok {
    tok_kind kind;
    size_t start, len; /* in the input */
    int id;
} tok;

/* What follows an option literal in the grammar. */
typedef enum arg_kind {
    ARG_FLAG,      /* a boolean behaviour set to true */
    ARG_NONE,      /* accepted, does nothing (--USER-DATA, --FETCH-VERSION) */
    ARG_NUMBER,    /* a numeric behaviour: NUMBER, ignored */
    ARG_SERVER,    /* --SERVER= */
    ARG_SOCKET,    /* --SOCKET= */
    ARG_STRING,    /* --CONFIGURE-FILE= */
    ARG_NAMESPACE, /* --NAMESPACE= */
    ARG_DIST,      /* --DISTRIBUTION= */
    ARG_HASH       /* --HASH= */
} arg_kind;

/* Effects of the ARG_FLAG options that matter here. */
typedef enum flag_id {
    F_OTHER,
    F_BINARY_PROTOCOL,
    F_BUFFER_REQUESTS,
    F_HASH_WITH_NAMESPACE,
    F_SORT_HOSTS,
    F_USE_UDP,
    F_VERIFY_KEY
} flag_id;

/* The option literals of libmemcached 1.1.4's scanner, in its rule order.
 * `conn`: for an ARG_NUMBER or ARG_FLAG option that sets a connection
 * behaviour, its mcr_lmc_conn_behavior; 0 (NO_BLOCK, which no option sets)
 * for the others. */
static const struct option {
    const char *text;
    arg_kind arg;
    flag_id flag;
    int conn;
} options[] = {
    {"--SERVER=", ARG_SERVER, F_OTHER, 0},
    {"--SOCKET=", ARG_SOCKET, F_OTHER, 0},
    {"--BINARY-PROTOCOL", ARG_FLAG, F_BINARY_PROTOCOL, 0},
    {"--BUFFER-REQUESTS", ARG_FLAG, F_BUFFER_REQUESTS, 0},
    {"--CONFIGURE-FILE=", ARG_STRING, F_OTHER, 0},
    {"--CONNECT-TIMEOUT=", ARG_NUMBER, F_OTHER, MCR_LMC_CONNECT_TIMEOUT},
    {"--DISTRIBUTION=", ARG_DIST, F_OTHER, 0},
    {"--HASH-WITH-NAMESPACE", ARG_FLAG, F_HASH_WITH_NAMESPACE, 0},
    {"--HASH=", ARG_HASH, F_OTHER, 0},
    {"--IO-BYTES-WATERMARK=", ARG_NUMBER, F_OTHER, 0},
    {"--IO-KEY-PREFETCH=", ARG_NUMBER, F_OTHER, 0},
    {"--IO-MSG-WATERMARK=", ARG_NUMBER, F_OTHER, 0},
    {"--NOREPLY", ARG_FLAG, F_OTHER, 0},
    {"--NUMBER-OF-REPLICAS=", ARG_NUMBER, F_OTHER, 0},
    {"--POLL-TIMEOUT=", ARG_NUMBER, F_OTHER, MCR_LMC_POLL_TIMEOUT},
    {"--RANDOMIZE-REPLICA-READ", ARG_FLAG, F_OTHER, 0},
    {"--RCV-TIMEOUT=", ARG_NUMBER, F_OTHER, MCR_LMC_RCV_TIMEOUT},
    {"--REMOVE-FAILED-SERVERS=", ARG_NUMBER, F_OTHER, MCR_LMC_REMOVE_FAILED_SERVERS},
    {"--RETRY-TIMEOUT=", ARG_NUMBER, F_OTHER, MCR_LMC_RETRY_TIMEOUT},
    {"--SND-TIMEOUT=", ARG_NUMBER, F_OTHER, MCR_LMC_SND_TIMEOUT},
    {"--SOCKET-RECV-SIZE=", ARG_NUMBER, F_OTHER, 0},
    {"--SOCKET-SEND-SIZE=", ARG_NUMBER, F_OTHER, 0},
    {"--SORT-HOSTS", ARG_FLAG, F_SORT_HOSTS, 0},
    {"--SUPPORT-CAS", ARG_FLAG, F_OTHER, 0},
    {"--TCP-KEEPALIVE", ARG_FLAG, F_OTHER, 0},
    {"--TCP-KEEPIDLE", ARG_FLAG, F_OTHER, 0},
    {"--TCP-NODELAY", ARG_FLAG, F_OTHER, 0},
    {"--USE-UDP", ARG_FLAG, F_USE_UDP, 0},
    {"--USER-DATA", ARG_NONE, F_OTHER, 0},
    {"--VERIFY-KEY", ARG_FLAG, F_VERIFY_KEY, 0},
    {"--POOL-MIN=", ARG_NUMBER, F_OTHER, 0},
    {"--POOL-MAX=", ARG_NUMBER, F_OTHER, 0},
    {"--NAMESPACE=", ARG_NAMESPACE, F_OTHER, 0},
    {"--FETCH-VERSION", ARG_NONE, F_OTHER, 0},
};
#define NOPTIONS (sizeof(options) / sizeof(options[0]))

enum { KW_INCLUDE, KW_RESET, KW_DEBUG, KW_SERVERS, KW_END, KW_CSL_ERROR, KW_TRUE, KW_FALSE };
static const char *const keywords[] = {"INCLUDE", "RESET",     "DEBUG", "SERVERS",
                                       "END",     "CSL_ERROR", "TRUE",  "FALSE"};
#define NKEYWORDS (sizeof(keywords) / sizeof(keywords[0]))

static const struct {
    const char *text;
    int id;
} dist_words[] = {
    {"CONSISTENT", LMC_DIST_CONSISTENT},
    {"MODULA", LMC_DIST_MODULA},
    {"RANDOM", LMC_DIST_RANDOM},
};

/* The hash keywords of the scanner: no "default", no "murmur3". */
static const struct {
    const char *text;
    mcr_hash id;
} hash_words[] = {
    {"MD5", MCR_HASH_MD5},         {"CRC", MCR_HASH_CRC},         {"FNV1_64", MCR_HASH_FNV1_64},
    {"FNV1A_64", MCR_HASH_FNV1A_64}, {"FNV1_32", MCR_HASH_FNV1_32}, {"FNV1A_32", MCR_HASH_FNV1A_32},
    {"HSIEH", MCR_HASH_HSIEH},     {"MURMUR", MCR_HASH_MURMUR},   {"JENKINS", MCR_HASH_JENKINS},
};

/* [[:alnum:]] and [[:digit:]] of the C locale, as flex compiled them. */
static bool is_alnum(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Length of the case-insensitive literal `lit` at s, or 0. */
static size_t match_lit(const char *s, const char *lit)
{
    size_t i;
    for (i = 0; lit[i] != '\0'; i++)
        if (s[i] == '\0' || tolower((unsigned char)s[i]) != tolower((unsigned char)lit[i]))
            return 0;
    return i;
}

/* Number of leading decimal digits of s, at most `max`. */
static size_t digits(const char *s, size_t max)
{
    size_t n = 0;
    while (n < max && is_digit(s[n]))
        n++;
    return n;
}

/* ([0-9]{1,3}"."){3}[0-9]{1,3}, longest match, or 0. */
static size_t match_ip(const char *s)
{
    size_t p = 0;
    for (int g = 0; g < 3; g++) {
        size_t d = digits(s + p, 3);
        if (d == 0 || s[p + d] != '.')
            return 0;
        p += d + 1;
    }
    size_t d = digits(s + p, 3);
    return d == 0 ? 0 : p + d;
}

/* [[:alnum:]]["."[:alnum:]_-]+[[:alnum:]], longest match, or 0. The scanner
 * writes the middle class as ["."[:alnum:]_-]: inside a flex class the
 * quotes are literal, so a double quote may appear inside a word
 * ("--SERVER=ab\"cd" is the host ab"cd in libmemcached 1.1.4). */
static size_t match_word(const char *s)
{
    size_t run, best = 0;
    if (!is_alnum(s[0]))
        return 0;
    for (run = 1; is_alnum(s[run]) || s[run] == '.' || s[run] == '_' || s[run] == '-' ||
                  s[run] == '"';
         run++)
        if (run + 1 >= 3 && is_alnum(s[run]))
            best = run + 1;
    return best;
}

/* L?\"(\\.|[^\\"])*\", or 0. flex's '.' does not match a newline. */
static size_t match_quoted(const char *s)
{
    size_t p = 0;
    if (s[0] == 'L' || s[0] == 'l')
        p = 1;
    if (s[p] != '"')
        return 0;
    for (p++;; p++) {
        if (s[p] == '\0')
            return 0;
        if (s[p] == '"')
            return p + 1;
        if (s[p] == '\\') {
            if (s[p + 1] == '\0' || s[p + 1] == '\n')
                return 0;
            p++;
        }
    }
}

/* The next token at `pos` of `in`: the longest match, earliest rule on ties. */
static tok scan(const char *in, size_t pos)
{
    const char *s = in + pos;
    tok t = {T_EOF, pos, 0, 0};
    size_t n;

#define CANDIDATE(k, l, i)                                                                        \
    do {                                                                                          \
        size_t l_ = (l);                                                                          \
        if (l_ > t.len) {                                                                         \
            t.kind = (k);                                                                         \
            t.len = l_;                                                                           \
            t.id = (i);                                                                           \
        }                                                                                         \
    } while (0)

    if (*s == '\0')
        return t;
    if (*s == '=' || *s == ',' || *s == ' ')
        CANDIDATE(*s == '=' ? T_EQ : *s == ',' ? T_COMMA : T_SPACE, 1, 0);
    CANDIDATE(T_NUMBER, digits(s, SIZE_MAX), 0);
    if (s[0] == ':' && (n = digits(s + 1, 5)) > 0)
        CANDIDATE(T_PORT, n + 1, 0);
    if (s[0] == '/' && s[1] == '?' && (n = digits(s + 2, 5)) > 0)
        CANDIDATE(T_WEIGHT, n + 2, 0);
    if (*s == '\t' || *s == '\r' || *s == '\n')
        CANDIDATE(T_SKIP, 1, 0);
    if (*s == '#' && (pos == 0 || in[pos - 1] == '\n')) {
        /* ^#.*$: only at the start of a line, and only if a newline ends it
         * (flex's $ does not match at the end of the input). */
        const char *nl = strchr(s, '\n');
        if (nl != NULL)
            CANDIDATE(T_COMMENT, (size_t)(nl - s), 0);
    }
    for (size_t i = 0; i < NOPTIONS; i++)
        CANDIDATE(T_OPTION, match_lit(s, options[i].text), (int)i);
    for (size_t i = 0; i < NKEYWORDS; i++)
        CANDIDATE(T_KEYWORD, match_lit(s, keywords[i]), (int)i);
    if (s[0] == '-' && s[1] == '-') {
        for (n = 2; is_alnum(s[n]); n++)
            ;
        CANDIDATE(T_UNKNOWN_OPTION, n, 0);
    }
    for (size_t i = 0; i < sizeof(dist_words) / sizeof(dist_words[0]); i++)
        CANDIDATE(T_DIST, match_lit(s, dist_words[i].text), dist_words[i].id);
    for (size_t i = 0; i < sizeof(hash_words) / sizeof(hash_words[0]); i++)
        CANDIDATE(T_HASH, match_lit(s, hash_words[i].text), (int)hash_words[i].id);
    CANDIDATE(T_IPADDRESS, match_ip(s), 0);
    CANDIDATE(T_WORD, match_word(s), 0);
    CANDIDATE(T_QUOTED, match_quoted(s), 0);
    CANDIDATE(T_UNKNOWN, 1, 0);
#undef CANDIDATE
    return t;
}

/* ---------------------------------------------------------------- parser */

typedef struct parser {
    const char *in;
    size_t pos;       /* after the last token returned */
    size_t stmt;      /* start of the current statement, for messages */
    bool has_hash;    /* --HASH seen in this string (libmemcached: once per parse) */
    mcr_lmc *st;      /* the working copy */
    mcr_error *err;
} parser;

/* The next token that is not skipped whitespace. */
static tok next(parser *p)
{
    for (;;) {
        tok t = scan(p->in, p->pos);
        p->pos = t.start + t.len;
        if (t.kind != T_SKIP)
            return t;
    }
}

/* The token after the current position, not consumed. */
static tok peek(parser *p)
{
    size_t save = p->pos;
    tok t = next(p);
    p->pos = save;
    return t;
}

/* A token as text for messages, quoted, into buf. */
static const char *tok_desc(const parser *p, tok t, char *buf, size_t cap)
{
    if (t.kind == T_EOF)
        return "the end of the string";
    char q[QUOTE_MAX];
    snprintf(buf, cap, "\"%s\"", mcr__quote(q, sizeof(q), p->in + t.start, t.len));
    return buf;
}

/* Report an error about the current statement, quoting it up to the end of
 * token `at`: "libmemcached options at \"text\": message". */
static int fail(parser *p, int code, tok at, const char *fmt, ...) MCR__PRINTF(4, 5);
static int fail(parser *p, int code, tok at, const char *fmt, ...)
{
    char q[QUOTE_MAX], m[MCR_ERROR_MESSAGE_SIZE];
    size_t end = at.start + at.len;
    va_list ap;

    if (end < p->stmt)
        end = p->stmt;
    va_start(ap, fmt);
    vsnprintf(m, sizeof(m), fmt, ap);
    va_end(ap);
    return mcr__error(p->err, code, "libmemcached options at \"%s\": %s",
                      mcr__quote(q, sizeof(q), p->in + p->stmt, end - p->stmt), m);
}

/* A syntax error at token t (MCR_ERR_UNKNOWN if t is an unknown option). */
static int unexpected(parser *p, tok t, const char *expected)
{
    char d[QUOTE_MAX + 4];
    return fail(p, t.kind == T_UNKNOWN_OPTION ? MCR_ERR_UNKNOWN : MCR_ERR_SYNTAX, t,
                "expected %s, found %s", expected, tok_desc(p, t, d, sizeof(d)));
}

/* The value of a 1..5-digit PORT / WEIGHT token or a NUMBER (saturating). */
static unsigned long tok_number(const parser *p, tok t, size_t skip)
{
    unsigned long v = 0;
    for (size_t i = skip; i < t.len; i++) {
        v = v * 10 + (unsigned long)(p->in[t.start + i] - '0');
        if (v > 0xffffffffUL)
            v = 0xffffffffUL;
    }
    return v;
}

/* A NUMBER token as libmemcached's scanner reads it, atoi(): glibc's
 * strtol() saturating at LONG_MAX (64 bits here), then cut to an int (32
 * bits, modulo 2^32), then widened to the uint64_t of
 * memcached_behavior_set(). */
static uint64_t tok_atoi(const parser *p, tok t)
{
    uint64_t v = 0;
    for (size_t i = 0; i < t.len; i++) {
        unsigned d = (unsigned)(p->in[t.start + i] - '0');
        if (v > ((uint64_t)INT64_MAX - d) / 10) {
            v = (uint64_t)INT64_MAX;
            break;
        }
        v = v * 10 + d;
    }
    return (uint64_t)(int64_t)low_int32(v);
}

/* A "string" of the grammar: a WORD or a QUOTED string (contents without
 * the quotes, escapes kept as written, like libmemcached). */
static bool string_value(const parser *p, tok t, const char **s, size_t *len)
{
    if (t.kind == T_WORD) {
        *s = p->in + t.start;
        *len = t.len;
        return true;
    }
    if (t.kind == T_QUOTED) {
        /* libmemcached drops the first and the last byte: with the L prefix,
         * the opening quote stays part of the string. */
        *s = p->in + t.start + 1;
        *len = t.len - 2;
        return true;
    }
    return false;
}

/* --SERVER= (HOSTNAME | IPADDRESS) [PORT] [WEIGHT], then the server add. */
static int parse_server(parser *p)
{
    tok h = next(p), t;
    long port = MCR_DEFAULT_PORT;
    uint32_t weight = 1;
    char what[2 * QUOTE_MAX], q[QUOTE_MAX];

    if (h.kind != T_WORD && h.kind != T_IPADDRESS)
        return unexpected(p, h,
                          "a hostname (3 or more of [A-Za-z0-9._\"-], starting and ending with a "
                          "letter or digit, not all digits, not a keyword) or an IPv4 address");
    t = peek(p);
    if (t.kind == T_PORT) {
        next(p);
        port = (long)tok_number(p, t, 1);
        t = peek(p);
    }
    if (t.kind == T_WEIGHT) {
        next(p);
        weight = (uint32_t)tok_number(p, t, 2);
        t = peek(p);
    }
    if (t.kind != T_SPACE && t.kind != T_EOF) {
        size_t e = t.start;
        while (p->in[e] != '\0' && p->in[e] != ' ')
            e++;
        return fail(p, MCR_ERR_SYNTAX, t,
                    "unexpected \"%s\" after the server (the syntax is "
                    "--SERVER=host[:port][/?weight], port and weight of 1 to 5 digits)",
                    mcr__quote(q, sizeof(q), p->in + t.start, e - t.start));
    }
    snprintf(what, sizeof(what), "libmemcached options at \"%s\": ",
             mcr__quote(q, sizeof(q), p->in + p->stmt, p->pos - p->stmt));
    return lmc_add(p->st, p->in + h.start, h.len, port, weight, what, p->err);
}

/* --NAMESPACE= string, with memcached_set_namespace()'s checks. */
static int parse_namespace(parser *p)
{
    tok t = next(p);
    const char *s;
    size_t len;
    mcr_lmc *st = p->st;

    if (!string_value(p, t, &s, &len))
        return unexpected(p, t, "a namespace (a word or a \"quoted string\")");
    if (st->has_namespace)
        return fail(p, MCR_ERR_SYNTAX, t, "%s", "--NAMESPACE can only be given once");
    /* libmemcached namespace.cc: not empty, every byte isgraph() unless the
     * binary protocol is on, at most 127 bytes. */
    if (len == 0)
        return fail(p, MCR_ERR_SYNTAX, t, "%s", "the namespace is empty");
    if (!st->binary_protocol)
        for (size_t i = 0; i < len; i++)
            if (s[i] < 0x21 || s[i] > 0x7e)
                return fail(p, MCR_ERR_SYNTAX, t, "%s",
                            "the namespace has a byte that is not a printable non-space ASCII "
                            "character (allowed only after --BINARY-PROTOCOL)");
    if (len > LMC_NAMESPACE_MAX)
        return fail(p, MCR_ERR_TOO_LONG, t, "the namespace is longer than %d bytes", LMC_NAMESPACE_MAX);
    memcpy(st->ns, s, len);
    st->ns[len] = '\0';
    st->ns_len = len;
    st->has_namespace = true;
    return MCR_OK;
}

/* --DISTRIBUTION= (consistent | modula | random) [, hash]. */
static int parse_distribution(parser *p)
{
    tok t = next(p);
    char d[QUOTE_MAX + 4];

    if (t.kind != T_DIST)
        return fail(p, t.kind == T_WORD ? MCR_ERR_UNKNOWN : MCR_ERR_SYNTAX, t,
                    "unknown distribution %s (the option string knows consistent, modula, "
                    "random)",
                    tok_desc(p, t, d, sizeof(d)));
    int dist = t.id;
    int dist_hash = -1;
    tok at = t;
    if (peek(p).kind == T_COMMA) {
        next(p);
        at = next(p);
        if (at.kind != T_HASH)
            return fail(p, at.kind == T_WORD ? MCR_ERR_UNKNOWN : MCR_ERR_SYNTAX, at,
                        "unknown hash %s after the ',' (the option string knows md5, crc, "
                        "fnv1_64, fnv1a_64, fnv1_32, fnv1a_32, hsieh, murmur, jenkins)",
                        tok_desc(p, at, d, sizeof(d)));
        dist_hash = at.id;
    }
    if (dist == LMC_DIST_RANDOM)
        return fail(p, MCR_ERR_UNSUPPORTED, at, "%s",
                    "the random distribution cannot be reproduced");
    lmc_set_distribution(p->st, dist);
    if (dist_hash >= 0)
        p->st->dist_hash = (mcr_hash)dist_hash; /* ",hash" sets KETAMA_HASH only */
    return MCR_OK;
}

/* --HASH= hash, at most once per option string (libmemcached's Context). */
static int parse_hash(parser *p)
{
    tok t = next(p);
    char d[QUOTE_MAX + 4];

    if (t.kind != T_HASH)
        return fail(p, t.kind == T_WORD ? MCR_ERR_UNKNOWN : MCR_ERR_SYNTAX, t,
                    "unknown hash %s (the option string knows md5, crc, fnv1_64, fnv1a_64, "
                    "fnv1_32, fnv1a_32, hsieh, murmur, jenkins)",
                    tok_desc(p, t, d, sizeof(d)));
    if (p->has_hash)
        return fail(p, MCR_ERR_SYNTAX, t, "%s", "--HASH can only be given once");
    p->has_hash = true;
    p->st->key_hash = (mcr_hash)t.id; /* no rebuild */
    return MCR_OK;
}

/* A boolean option set to true: memcached_behavior_set(..., true). */
static int parse_flag(parser *p, tok t, flag_id f)
{
    mcr_lmc *st = p->st;
    switch (f) {
    case F_BINARY_PROTOCOL:
        st->binary_protocol = true;
        break;
    case F_BUFFER_REQUESTS:
        if (st->use_udp)
            return fail(p, MCR_ERR_INVALID, t, "%s",
                        "libmemcached refuses --BUFFER-REQUESTS after --USE-UDP");
        break;
    case F_HASH_WITH_NAMESPACE:
        st->hash_with_namespace = true;
        break;
    case F_SORT_HOSTS:
        st->sort_hosts = true;
        lmc_rebuild(st);
        break;
    case F_USE_UDP:
        st->use_udp = true;
        break;
    case F_VERIFY_KEY:
        if (st->binary_protocol)
            return fail(p, MCR_ERR_INVALID, t, "%s",
                        "libmemcached refuses --VERIFY-KEY after --BINARY-PROTOCOL");
        break;
    case F_OTHER:
        break;
    }
    return MCR_OK;
}

/* One statement. Sets *stop when END was read. */
static int parse_statement(parser *p, bool *stop)
{
    tok t = next(p), a;

    p->stmt = t.start;
    switch (t.kind) {
    case T_COMMENT:
        return MCR_OK;
    case T_KEYWORD:
        switch (t.id) {
        case KW_END:
            *stop = true;
            return MCR_OK;
        case KW_RESET: { /* memcached_reset(): back to a fresh memcached_st */
            lmc_clear_servers(p->st);
            lmc_defaults(p->st);
            return MCR_OK;
        }
        case KW_DEBUG: /* turns on the parser's trace in libmemcached */
            return MCR_OK;
        case KW_CSL_ERROR:
            return fail(p, MCR_ERR_SYNTAX, t, "%s", "CSL_ERROR asks for the parse to fail");
        case KW_INCLUDE:
            a = next(p);
            if (a.kind != T_SPACE)
                return unexpected(p, a, "a space and a file name after INCLUDE");
            a = next(p);
            if (a.kind != T_WORD && a.kind != T_QUOTED)
                return unexpected(p, a, "a file name after INCLUDE");
            return fail(p, MCR_ERR_UNSUPPORTED, a, "%s",
                        "INCLUDE reads a configuration file; give its options inline");
        default:
            return unexpected(p, t, "an option");
        }
    case T_UNKNOWN_OPTION: {
        size_t e = t.start;
        while (p->in[e] != '\0' && p->in[e] != ' ' && p->in[e] != '=' && e - t.start < 60)
            e++;
        char q[QUOTE_MAX];
        return fail(p, MCR_ERR_UNKNOWN, t, "unknown option \"%s\"",
                    mcr__quote(q, sizeof(q), p->in + t.start, e - t.start));
    }
    case T_OPTION:
        break;
    default:
        return unexpected(p, t, "an option (--NAME or --NAME=VALUE)");
    }

    const struct option *o = &options[t.id];
    switch (o->arg) {
    case ARG_FLAG:
        return parse_flag(p, t, o->flag);
    case ARG_NONE:
        return MCR_OK;
    case ARG_NUMBER:
        a = next(p);
        if (a.kind != T_NUMBER)
            return unexpected(p, a, "a decimal number");
        if (o->conn != 0)
            return lmc_conn_behavior(p->st, o->conn, tok_atoi(p, a), p->err);
        return MCR_OK;
    case ARG_SERVER:
        return parse_server(p);
    case ARG_SOCKET:
        a = next(p);
        if (a.kind != T_WORD && a.kind != T_QUOTED)
            return unexpected(p, a, "a socket path");
        if (peek(p).kind == T_WEIGHT)
            a = next(p);
        return fail(p, MCR_ERR_UNSUPPORTED, a, "%s",
                    "a UNIX socket server has no port and cannot be placed by mcroute");
    case ARG_STRING:
        a = next(p);
        if (a.kind != T_WORD && a.kind != T_QUOTED)
            return unexpected(p, a, "a file name");
        return fail(p, MCR_ERR_UNSUPPORTED, a, "%s",
                    "--CONFIGURE-FILE reads a configuration file; give its options inline");
    case ARG_NAMESPACE:
        return parse_namespace(p);
    case ARG_DIST:
        return parse_distribution(p);
    case ARG_HASH:
        return parse_hash(p);
    }
    return unexpected(p, t, "an option");
}

int mcr_lmc_parse_options(mcr_lmc *lmc, const char *options_string, mcr_error *err)
{
    mcr_lmc tmp;
    parser p;
    bool stop = false;
    int rc;

    if (lmc == NULL || options_string == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL mcr_lmc or option string");
    if (options_string[0] == '\0')
        return mcr__error(err, MCR_ERR_SYNTAX, "empty libmemcached option string");
    if (lmc_copy(&tmp, lmc) != MCR_OK)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory");
    p.in = options_string;
    p.pos = 0;
    p.stmt = 0;
    p.has_hash = false;
    p.st = &tmp;
    p.err = err;
    for (;;) {
        rc = parse_statement(&p, &stop);
        if (rc != MCR_OK || stop)
            break;
        tok t = next(&p);
        if (t.kind == T_EOF)
            break;
        if (t.kind != T_SPACE) {
            rc = unexpected(&p, t, "a single space or the end of the string after an option");
            break;
        }
    }
    if (rc != MCR_OK) {
        lmc_discard(&tmp);
        return rc;
    }
    lmc_commit(lmc, &tmp);
    return MCR_OK;
}

/* ---------------------------------------------------------------- output */

int mcr_lmc_config(const mcr_lmc *lmc, mcr_config **out, mcr_error *err)
{
    mcr_config *cfg;
    mcr_mode mode;
    int rc;

    if (lmc == NULL || out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL mcr_lmc or output");
    if (lmc->count == 0)
        return mcr__error(err, MCR_ERR_EMPTY, "no servers in the libmemcached configuration");
    switch (lmc->distribution) {
    case LMC_DIST_MODULA:
        mode = MCR_MODE_MODULA;
        break;
    case LMC_DIST_CONSISTENT_KETAMA_SPY:
        mode = lmc->weighted ? MCR_MODE_SPY_WEIGHTED : MCR_MODE_SPY;
        break;
    default: /* CONSISTENT, CONSISTENT_KETAMA, CONSISTENT_WEIGHTED */
        mode = lmc->weighted ? MCR_MODE_WEIGHTED : MCR_MODE_CONSISTENT;
        break;
    }
    cfg = mcr_config_new();
    if (cfg == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory");
    mcr_config_set_mode(cfg, mode);
    mcr_config_set_hash(cfg, lmc->key_hash);
    mcr_config_set_point_hash(cfg, lmc->point_hash);
    /* With HASH_WITH_NAMESPACE, libmemcached applies its prefixed-key rules
     * even without a namespace (an empty prefix). */
    if (lmc->hash_with_namespace)
        mcr_config_set_key_prefix(cfg, lmc->ns, lmc->has_namespace ? lmc->ns_len : 0);
    /* The servers are in libmemcached's order, unless a sort is pending
     * (SORT_HOSTS on at the last rebuild): then libmemcached's order is the
     * sorted one, which mcr_config_sort_servers() gives (same comparison:
     * strcmp of the hosts, then the ports; no two servers are equal). */
    for (size_t i = 0; i < lmc->count; i++) {
        const lmc_server *s = &lmc->servers[i];
        rc = mcr_config_add_server(cfg, s->host, s->port, s->weight, err);
        if (rc != MCR_OK) {
            mcr_config_free(cfg);
            return rc;
        }
    }
    if (lmc->sort_pending)
        mcr_config_sort_servers(cfg);
    *out = cfg;
    return MCR_OK;
}

int mcr_lmc_ring(const mcr_lmc *lmc, mcr_ring **out, mcr_error *err)
{
    mcr_config *cfg;
    int rc;

    if (out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL output");
    rc = mcr_lmc_config(lmc, &cfg, err);
    if (rc != MCR_OK)
        return rc;
    rc = mcr_ring_new(cfg, out, err);
    mcr_config_free(cfg);
    return rc;
}
