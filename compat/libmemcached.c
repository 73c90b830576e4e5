/* SPDX-License-Identifier: BSD-3-Clause */
/* libmemcached.c: libmemcached 1.1.4's placement state machine: servers, behaviours, and the config or ring they give. */
/*
 * What is reproduced, and where each fact comes from (all checked against
 * the Debian libmemcached 1.1.4 by test/test_compat_libmemcached.c,
 * test_compat_lmc_options.c and test_compat_lmc_cases.c):
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
 * Connection behaviours (for mcr_pool_options_from_lmc()) are kept with the
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

#include "lmc_internal.h"
/* Reset to the state of a fresh memcached_st (no servers). */
void mcr__lmc_defaults(mcr_lmc *l)
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
void mcr__lmc_clear_servers(mcr_lmc *l)
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
    mcr__lmc_defaults(l);
    return l;
}

void mcr_lmc_free(mcr_lmc *lmc)
{
    if (lmc == NULL)
        return;
    mcr__lmc_clear_servers(lmc);
    free(lmc->servers);
    mcr__slotset_free(&lmc->set);
    free(lmc);
}

/* Deep copy of `src` into `dst` (uninitialised). MCR_OK or MCR_ERR_NOMEM
 * (dst then owns nothing). */
int mcr__lmc_copy(mcr_lmc *dst, const mcr_lmc *src)
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
            mcr__lmc_clear_servers(dst);
            free(dst->servers);
            dst->servers = NULL;
            dst->cap = 0;
            return MCR_ERR_NOMEM;
        }
        memcpy(d->host, src->servers[i].host, d->host_len + 1);
        dst->count++;
    }
    if (set_reindex(dst, dst->count) != MCR_OK) {
        mcr__lmc_clear_servers(dst);
        free(dst->servers);
        dst->servers = NULL;
        dst->cap = 0;
        return MCR_ERR_NOMEM;
    }
    return MCR_OK;
}

/* Replace the contents of `l` by those of `tmp` (which is consumed). */
void mcr__lmc_commit(mcr_lmc *l, mcr_lmc *tmp)
{
    mcr__lmc_clear_servers(l);
    free(l->servers);
    mcr__slotset_free(&l->set);
    *l = *tmp;
}

/* Release a working copy that is not committed. */
void mcr__lmc_discard(mcr_lmc *tmp)
{
    mcr__lmc_clear_servers(tmp);
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
void mcr__lmc_rebuild(mcr_lmc *l)
{
    if (l->sort_hosts)
        l->sort_pending = l->count > 1;
    else
        lmc_settle(l);
    l->point_hash = l->key_hash;
}

/* memcached_behavior_set_distribution(); `d` is valid and reproducible. */
void mcr__lmc_set_distribution(mcr_lmc *l, int d)
{
    if (d == LMC_DIST_CONSISTENT || d == LMC_DIST_CONSISTENT_KETAMA)
        l->weighted = false;
    else if (d == LMC_DIST_CONSISTENT_WEIGHTED)
        l->weighted = true;
    l->distribution = d;
    mcr__lmc_rebuild(l);
}

/* Validate and append a server as memcached_server_add_with_weight() does,
 * with mcroute's limits. `host` has `len` bytes, not NUL-terminated. `what`
 * prefixes messages. The state is unchanged on error. */
int mcr__lmc_add(mcr_lmc *l, const char *host, size_t len, long port, uint32_t weight,
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
    mcr__lmc_rebuild(l);
    return MCR_OK;
}

int mcr_lmc_add_server(mcr_lmc *lmc, const char *host, int port, uint32_t weight,
                       mcr_error *err)
{
    if (lmc == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL mcr_lmc");
    return mcr__lmc_add(lmc, host ? host : "", host ? strlen(host) : 0, port, weight, "", err);
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
        mcr__lmc_set_distribution(l, (int)value);
        return MCR_OK;
    case LMC_BEHAVIOR_KETAMA:
        mcr__lmc_set_distribution(l, value ? LMC_DIST_CONSISTENT_KETAMA : LMC_DIST_MODULA);
        return MCR_OK;
    case LMC_BEHAVIOR_KETAMA_WEIGHTED:
        if (value == 0) { /* libmemcached: same as KETAMA=1 */
            mcr__lmc_set_distribution(l, LMC_DIST_CONSISTENT_KETAMA);
            return MCR_OK;
        }
        l->key_hash = MCR_HASH_MD5;
        l->dist_hash = MCR_HASH_MD5;
        mcr__lmc_set_distribution(l, LMC_DIST_CONSISTENT_WEIGHTED);
        return MCR_OK;
    case LMC_BEHAVIOR_SORT_HOSTS:
        l->sort_hosts = value != 0;
        mcr__lmc_rebuild(l);
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
int32_t mcr__lmc_low_int32(uint64_t v)
{
    uint32_t u = (uint32_t)v;
    return u <= INT32_MAX ? (int32_t)u : (int32_t)((int64_t)u - 4294967296LL);
}

/* memcached_behavior_set() for a connection behaviour, on `l`. The state
 * is unchanged on error. */
int mcr__lmc_conn_behavior(mcr_lmc *l, int behavior, uint64_t value, mcr_error *err)
{
    switch (behavior) {
    case MCR_LMC_POLL_TIMEOUT: l->poll_timeout = mcr__lmc_low_int32(value); return MCR_OK;
    case MCR_LMC_CONNECT_TIMEOUT: l->connect_timeout = mcr__lmc_low_int32(value); return MCR_OK;
    case MCR_LMC_RETRY_TIMEOUT: l->retry_timeout = mcr__lmc_low_int32(value); return MCR_OK;
    case MCR_LMC_SND_TIMEOUT: l->snd_timeout = mcr__lmc_low_int32(value); return MCR_OK;
    case MCR_LMC_RCV_TIMEOUT: l->rcv_timeout = mcr__lmc_low_int32(value); return MCR_OK;
    case MCR_LMC_DEAD_TIMEOUT: l->dead_timeout = mcr__lmc_low_int32(value); return MCR_OK;
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
    return mcr__lmc_conn_behavior(lmc, (int)behavior, value, err);
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

const char *mcr_lmc_namespace(const mcr_lmc *lmc, size_t *len)
{
    if (len != NULL)
        *len = lmc != NULL && lmc->has_namespace ? lmc->ns_len : 0;
    return lmc != NULL && lmc->has_namespace ? lmc->ns : NULL;
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
