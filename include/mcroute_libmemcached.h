/* SPDX-License-Identifier: BSD-3-Clause */
/* mcroute_libmemcached.h: libmemcached 1.1.4 configuration vocabulary for mcroute.
 * Library: libmcroute, `pkg-config --cflags --libs mcroute`. A connection
 * pool takes an mcr_lmc's connection behaviours with
 * mcr_pool_options_from_lmc() (mcroute_pool.h, libmcroute_pool).
 *
 * An application configured through libmemcached (an option string given to
 * memcached(), then memcached_behavior_set() calls) can hand the same
 * configuration to mcroute and get the same placement for every key.
 *
 * mcr_lmc reproduces libmemcached's placement state machine, not just its
 * final settings: the order of the settings matters, as it does there. In
 * libmemcached every server add and every setting of DISTRIBUTION, KETAMA,
 * KETAMA_WEIGHTED or SORT_HOSTS rebuilds the continuum with the key hash in
 * force at that moment; HASH and KETAMA_HASH do not. So
 * "DISTRIBUTION=consistent, HASH=fnv1a_32" hashes labels with one-at-a-time
 * and keys with fnv1a_32, while the other order uses fnv1a_32 for both.
 *
 * An mcr_lmc belongs to one thread at a time. The rings it builds are
 * independent immutable objects (see mcroute.h).
 *
 * Differences from libmemcached, on purpose: no 100-server limit in the
 * consistent distributions (libmemcached aborts there); a real "hsieh" (the
 * Debian build returns 1 for every key); the "random" distribution cannot be
 * reproduced and is refused with MCR_ERR_UNSUPPORTED; a server given twice is
 * refused with MCR_ERR_DUPLICATE.
 */
#ifndef MCROUTE_LIBMEMCACHED_H
#define MCROUTE_LIBMEMCACHED_H

#include <stdint.h>

#include "mcroute.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mcr_lmc mcr_lmc;

/* The behaviours that affect placement, numbered as libmemcached's
 * memcached_behavior_t. A seventh, HASH_WITH_PREFIX_KEY (25, also known as
 * HASH_WITH_NAMESPACE; value: 0 off, any other on), has no constant here but
 * is taken by mcr_lmc_set_behavior() too. */
typedef enum mcr_lmc_behavior {
    MCR_LMC_DISTRIBUTION = 9,     /* value: mcr_lmc_distribution */
    MCR_LMC_HASH = 2,             /* value: mcr_hash */
    MCR_LMC_KETAMA = 3,           /* value: 0 off, any other on */
    MCR_LMC_KETAMA_WEIGHTED = 16, /* value: 0 off, any other on */
    MCR_LMC_KETAMA_HASH = 17,     /* value: mcr_hash; no effect on placement */
    MCR_LMC_SORT_HOSTS = 12       /* value: 0 off, any other on */
} mcr_lmc_behavior;

/* Distributions, numbered as libmemcached's memcached_server_distribution_t. */
typedef enum mcr_lmc_distribution {
    MCR_LMC_DIST_MODULA = 0,
    MCR_LMC_DIST_CONSISTENT = 1,
    MCR_LMC_DIST_CONSISTENT_KETAMA = 2,
    MCR_LMC_DIST_RANDOM = 3, /* refused: not reproducible */
    MCR_LMC_DIST_CONSISTENT_KETAMA_SPY = 4,
    MCR_LMC_DIST_CONSISTENT_WEIGHTED = 5,
    MCR_LMC_DIST_VIRTUAL_BUCKET = 6 /* refused: needs a bucket table */
} mcr_lmc_distribution;

/* mcr_lmc_new: the state of a fresh memcached_st: no servers, MODULA,
 * one-at-a-time, weighting off, no sorting, no namespace, libmemcached's
 * default connection behaviours (see mcr_lmc_conn_behavior). NULL only when
 * out of memory. */
MCR_EXTERN mcr_lmc *mcr_lmc_new(void);

/* mcr_lmc_free: release. NULL is a no-op. */
MCR_EXTERN void mcr_lmc_free(mcr_lmc *lmc);

/* mcr_lmc_parse_options: apply a libmemcached option string, left to right,
 * as memcached() would, with libmemcached's own grammar: --SERVER=host[:port]
 * [/?weight], --DISTRIBUTION=modula|consistent|random (optionally ",<hash>",
 * which only sets KETAMA_HASH), --HASH=<name>, --SORT-HOSTS,
 * --NAMESPACE=<ns>, --HASH-WITH-NAMESPACE, and the options that do not
 * affect placement: those of the connection behaviours below
 * (--CONNECT-TIMEOUT, --POLL-TIMEOUT, --RETRY-TIMEOUT, --SND-TIMEOUT,
 * --RCV-TIMEOUT, --REMOVE-FAILED-SERVERS, --BINARY-PROTOCOL) are recorded
 * as libmemcached records them, the others (--TCP-NODELAY, ...) accepted
 * and ignored. Statements are separated by one space; a
 * hostname has at least three characters and is not all digits (libmemcached's
 * scanner); IPv6 addresses cannot be written there (use mcr_lmc_add_server).
 * Errors: MCR_ERR_SYNTAX (an empty string, a malformed option or value),
 * MCR_ERR_UNKNOWN (unknown option or hash), MCR_ERR_RANGE (a port above
 * 65535, which libmemcached would wrap), MCR_ERR_DUPLICATE, MCR_ERR_TOO_LONG,
 * MCR_ERR_INVALID (a combination libmemcached refuses, such as
 * --BINARY-PROTOCOL with --VERIFY-KEY), MCR_ERR_UNSUPPORTED (random
 * distribution, --SOCKET servers, --CONFIGURE-FILE and INCLUDE, which read
 * files), MCR_ERR_NOMEM; the message names the option. All or nothing: on
 * error the state is unchanged. */
MCR_EXTERN int mcr_lmc_parse_options(mcr_lmc *lmc, const char *options,
                                     mcr_error *err);

/* mcr_lmc_set_behavior: memcached_behavior_set() for one of the seven
 * behaviours that affect placement: the six of mcr_lmc_behavior and
 * HASH_WITH_PREFIX_KEY (25, also known as HASH_WITH_NAMESPACE), with
 * libmemcached's side effects (KETAMA=1 means CONSISTENT_KETAMA without
 * weighting, KETAMA_WEIGHTED=1 also sets the key hash to MD5,
 * KETAMA_WEIGHTED=0 acts as KETAMA=1, ...). As in libmemcached, the flags
 * (KETAMA, KETAMA_WEIGHTED, SORT_HOSTS, HASH_WITH_PREFIX_KEY) take any
 * value: 0 is off, any other on. Errors: MCR_ERR_UNKNOWN (behaviour),
 * MCR_ERR_RANGE (a hash above 10, a distribution above 6),
 * MCR_ERR_UNSUPPORTED (random, virtual bucket). */
MCR_EXTERN int mcr_lmc_set_behavior(mcr_lmc *lmc, mcr_lmc_behavior behavior,
                                    uint64_t value, mcr_error *err);

/* mcr_lmc_set_behavior_name: the same with text, as the CLI takes it: NAME is
 * DISTRIBUTION, HASH, KETAMA, KETAMA_WEIGHTED, KETAMA_HASH, SORT_HOSTS or
 * HASH_WITH_NAMESPACE (alias HASH_WITH_PREFIX_KEY), optionally prefixed
 * MEMCACHED_BEHAVIOR_, case-insensitive. VALUE, case-insensitive, is one of
 * modula consistent ketama (alias consistent_ketama) spy (alias
 * consistent_ketama_spy) weighted (alias consistent_weighted), optionally
 * prefixed MEMCACHED_DISTRIBUTION_ (DISTRIBUTION; random and virtual_bucket
 * are recognised and refused); a hash name of mcr_hash_from_name(),
 * optionally prefixed MEMCACHED_HASH_ (HASH, KETAMA_HASH); true or false for
 * the flags; or, for any of them, libmemcached's decimal number, checked as
 * mcr_lmc_set_behavior() checks it (so a flag takes any number: 0 is off).
 * Errors as mcr_lmc_set_behavior() (MCR_ERR_UNKNOWN also for an unknown
 * distribution or hash name, MCR_ERR_RANGE also for a number above 2^64-1),
 * plus MCR_ERR_SYNTAX for a malformed value. */
MCR_EXTERN int mcr_lmc_set_behavior_name(mcr_lmc *lmc, const char *name,
                                         const char *value, mcr_error *err);

/* mcr_lmc_add_server: memcached_server_add_with_weight(): append a server
 * (as libmemcached does: weight 0 is taken as 1, port 0 as 11211, a NULL or
 * empty host as "localhost"; IPv6 addresses without brackets). Adding a server with
 * weight > 1 under a consistent distribution turns weighting on. Errors as
 * mcr_config_add_server(). */
MCR_EXTERN int mcr_lmc_add_server(mcr_lmc *lmc, const char *host, int port,
                                  uint32_t weight, mcr_error *err);

/* mcr_lmc_ring: build the ring that places keys as libmemcached would in
 * the current state. Errors: MCR_ERR_INVALID, MCR_ERR_EMPTY (no server),
 * MCR_ERR_NOMEM. */
MCR_EXTERN int mcr_lmc_ring(const mcr_lmc *lmc, mcr_ring **out,
                            mcr_error *err);

/* mcr_lmc_config: the same placement as a new mcr_config (owned by the
 * caller), to inspect or change further. Errors as mcr_lmc_ring(). */
MCR_EXTERN int mcr_lmc_config(const mcr_lmc *lmc, mcr_config **out,
                              mcr_error *err);

/* ==================================================================== */
/*  Connection behaviours and pool options                               */
/* ==================================================================== */

/* The behaviours that configure connections rather than placement,
 * numbered as libmemcached's memcached_behavior_t. An mcr_lmc keeps them as
 * libmemcached 1.1.4 keeps them, for mcr_lmc_fill_pool_options(): the
 * timeouts as 32-bit signed numbers, the limits as 32-bit unsigned ones,
 * the flags as 0 or 1. They are set by mcr_lmc_set_conn_behavior() and by
 * the option string (its numbers read as libmemcached reads them, with
 * atoi(): "--RETRY-TIMEOUT=4294967297" is 1), and RESET restores the
 * defaults, which are libmemcached's (libmemcached-1.0/defaults.h; what
 * memcached_behavior_get() reports on a new handle). The option string has
 * no --SERVER-FAILURE-LIMIT: libmemcached 1.1.4's refuses it too. */
typedef enum mcr_lmc_conn_behavior {
    MCR_LMC_POLL_TIMEOUT = 8,           /* ms to wait for a socket (a reply);
                                           default 5000; 0: fail at once;
                                           negative: wait forever */
    MCR_LMC_CONNECT_TIMEOUT = 14,       /* ms to wait for a connection;
                                           default 4000; 0 and negative as
                                           for POLL_TIMEOUT */
    MCR_LMC_RETRY_TIMEOUT = 15,         /* seconds before a server that
                                           failed is tried again; default 2 */
    MCR_LMC_BINARY_PROTOCOL = 18,       /* flag; default 0 */
    MCR_LMC_SND_TIMEOUT = 19,           /* microseconds, SO_SNDTIMEO; default 0 */
    MCR_LMC_RCV_TIMEOUT = 20,           /* microseconds, SO_RCVTIMEO; default 0 */
    MCR_LMC_SERVER_FAILURE_LIMIT = 21,  /* failures that mark a server dead;
                                           default 5; setting 0 is refused */
    MCR_LMC_AUTO_EJECT_HOSTS = 28,      /* flag: the same one as
                                           REMOVE_FAILED_SERVERS */
    MCR_LMC_REMOVE_FAILED_SERVERS = 35, /* flag: take dead servers out of
                                           the continuum; default 0 */
    MCR_LMC_DEAD_TIMEOUT = 36,          /* seconds before a removed server is
                                           tried again; default 0 */
    MCR_LMC_SERVER_TIMEOUT_LIMIT = 37   /* timeouts that count as one
                                           failure; default 0 */
} mcr_lmc_conn_behavior;

/* mcr_lmc_set_conn_behavior: memcached_behavior_set() for one of the
 * connection behaviours, stored as libmemcached stores it: a timeout keeps
 * the low 32 bits of `value` as a signed number (so (uint64_t)-1 is -1,
 * "wait forever"), a limit the low 32 bits, a flag 0 for 0 and 1 for any
 * other value. Errors (state unchanged): MCR_ERR_INVALID (NULL lmc),
 * MCR_ERR_UNKNOWN (not a connection behaviour; the placement ones go to
 * mcr_lmc_set_behavior()), MCR_ERR_RANGE (SERVER_FAILURE_LIMIT 0, which
 * libmemcached refuses). */
MCR_EXTERN int mcr_lmc_set_conn_behavior(mcr_lmc *lmc, mcr_lmc_conn_behavior behavior,
                                         uint64_t value, mcr_error *err);

/* mcr_lmc_get_conn_behavior: what memcached_behavior_get() would return for
 * a connection behaviour, into *value (a negative timeout reads as a
 * number near 2^64, as there). MCR_OK, MCR_ERR_INVALID (NULL argument) or
 * MCR_ERR_UNKNOWN, *value unchanged on error. */
MCR_EXTERN int mcr_lmc_get_conn_behavior(const mcr_lmc *lmc, mcr_lmc_conn_behavior behavior,
                                         uint64_t *value);

/* mcr_lmc_namespace: the namespace set by the option string (--NAMESPACE),
 * `*len` bytes (len may be NULL; the text is also NUL-terminated), or NULL
 * when there is none (*len 0) or `lmc` is NULL. The pointer stays valid
 * until `lmc` is freed or its namespace changes (an option string with
 * RESET). */
MCR_EXTERN const char *mcr_lmc_namespace(const mcr_lmc *lmc, size_t *len);

#ifdef __cplusplus
}
#endif

#endif /* MCROUTE_LIBMEMCACHED_H */
