/* SPDX-License-Identifier: BSD-3-Clause */
/* lmc_internal.h: the state of an mcr_lmc, shared by libmemcached.c (the state machine) and lmc_options.c (the option language); never installed. */
#ifndef MCR_LMC_INTERNAL_H
#define MCR_LMC_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "placement/placement_internal.h"
#include "mcroute_libmemcached.h"

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
     * and mcr_pool_options_from_lmc() starts from the same numbers. */
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

/* ---------------------------------------------------------------- state machine (libmemcached.c) */

/* The operations of the state machine that the option language uses; each
 * is documented at its definition. */
void mcr__lmc_defaults(mcr_lmc *l);        /* a fresh memcached_st's state */
void mcr__lmc_clear_servers(mcr_lmc *l);   /* drop every server */
int mcr__lmc_copy(mcr_lmc *dst, const mcr_lmc *src); /* a working copy */
void mcr__lmc_commit(mcr_lmc *l, mcr_lmc *tmp);      /* the copy replaces l */
void mcr__lmc_discard(mcr_lmc *tmp);                 /* the copy dropped */
int mcr__lmc_add(mcr_lmc *l, const char *host, size_t len, long port, uint32_t weight,
                 const char *what, mcr_error *err); /* memcached_server_add */
void mcr__lmc_rebuild(mcr_lmc *l);                  /* memcached's run_distribution */
void mcr__lmc_set_distribution(mcr_lmc *l, int d);  /* with its side effects */
int mcr__lmc_conn_behavior(mcr_lmc *l, int behavior, uint64_t value, mcr_error *err);
int32_t mcr__lmc_low_int32(uint64_t v);             /* behavior.cc's int32_t cast */

#endif
