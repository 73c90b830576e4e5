/* SPDX-License-Identifier: BSD-3-Clause */
/* mcroute_twemproxy.h: twemproxy (nutcracker 0.5.0) pool configurations for mcroute.
 * Library: libmcroute_twemproxy, `pkg-config --cflags --libs
 * mcroute-twemproxy` (and libmcroute, which it links; it reads YAML with
 * libyaml).
 *
 * An operator who moves a pool from behind nutcracker to client-side
 * routing loads nutcracker's own YAML file here and gets, for every key, the
 * server nutcracker would have picked. Checked against the Debian nutcracker
 * 0.5.0 routing to real memcached servers (test/test_compat_twemproxy.c).
 *
 * An mcr_twem is a parsed configuration: its pools, each with its servers
 * and directives. It is immutable once loaded: any number of threads may read
 * the same mcr_twem at once. The configs and rings it produces are new,
 * independent objects (see mcroute.h).
 *
 * THE FILE
 *
 * The file is read as nutcracker 0.5.0 reads it, with libyaml, and refused
 * where nutcracker refuses it: one YAML document of block mappings, no
 * "---" or "..." markers, directives, anchors, aliases, tags or flow
 * collections ({...}, [...]). Each top-level key is a pool:
 *
 *     alpha:
 *       listen: 127.0.0.1:22121
 *       hash: fnv1a_64
 *       distribution: ketama
 *       hash_tag: "{}"
 *       servers:
 *        - 10.0.0.1:11211:1
 *        - 10.0.0.2:11211:2 cache-b
 *
 * Every scalar is taken as its text (nutcracker does not resolve YAML types:
 * "~" is the text "~"), and none may be empty. The directives, each at most
 * once per pool, case-sensitive (mcr_twem_option names the numeric ones):
 *
 *   listen                "host:port" (port 1..65535), or "/path [perm]"
 *                         (a unix socket, perm an octal mode <= 0777); required.
 *   servers               a sequence of "host:port:weight [name]" (or
 *                         "/path:weight [name]", a unix socket); required, and
 *                         the only directive that is a sequence.
 *   hash                  one_at_a_time md5 crc16 crc32 crc32a fnv1_64
 *                         fnv1a_64 fnv1_32 fnv1a_32 hsieh murmur jenkins;
 *                         default fnv1a_64.
 *   hash_tag              exactly two bytes, such as "{}"; default none.
 *   distribution          ketama, modula or random; default ketama.
 *   timeout backlog client_connections redis_db server_connections
 *   server_retry_timeout server_failure_limit
 *                         decimal numbers 0..2147483647 (server_connections
 *                         not 0).
 *   redis preconnect auto_eject_hosts tcpkeepalive
 *                         "true" or "false".
 *   redis_auth            any text; only in a pool with "redis: true".
 *
 * Server lines are split as nutcracker splits them, from the end: the name
 * is what follows the last space, then the weight follows the last ':', the
 * port the ':' before it, and the host is everything before that, so
 * "::1:11211:1" is host "::1". Weights are 1 or more. Two servers of a pool
 * may not have the same name; a server without a name is named "host" when
 * its port is 11211, else "host:port" (nutcracker's libmemcached
 * compatibility). Pools may not share a name or a listen text.
 *
 * PLACEMENT
 *
 * nutcracker sorts a pool's servers by name, shorter names first, names of
 * equal length by their bytes; that order, not the file's, is the server
 * order of the config and ring built here (ketama ties, modula entries, and
 * the index mcr_ring_locate() returns). The ring's server names
 * (mcr_ring_server_name) are "host:port" as configured; the name, when
 * given, is the server's label (mcr_config_add_server_named), which ketama
 * hashes instead of the address. "ketama" maps to MCR_MODE_TWEMPROXY_KETAMA,
 * "modula" to MCR_MODE_TWEMPROXY_MODULA; "crc32" is mcroute's MCR_HASH_CRC,
 * "crc32a" MCR_HASH_CRC32A, "one_at_a_time" MCR_HASH_DEFAULT, "crc16"
 * MCR_HASH_CRC16 (nutcracker's own: the XMODEM CRC-16 in the low 16 bits and
 * the high bytes of the two previous CRC values above them, because it
 * never cuts its 32-bit accumulator). As in nutcracker, a pool of one
 * server takes every key without hashing, the hash tag narrows a key to
 * the text between its first opening byte and the next closing byte when
 * that text is not empty, and an empty key (which the redis protocol can
 * send) hashes to 0. The placement is the one of a pool with every server
 * live (auto_eject_hosts ejects servers that fail, which only the
 * connection pool can know).
 *
 * DIFFERENCES FROM NUTCRACKER, ON PURPOSE
 *
 *   - A pool nutcracker accepts but whose placement cannot be reproduced
 *     loads fine (its directives can be read) and mcr_twem_config() refuses
 *     it with MCR_ERR_UNSUPPORTED: distribution random, unix-socket servers,
 *     an empty name (a quoted line ending with a space). So does a pool
 *     mcroute's config cannot hold: the same host and port twice under
 *     different names (MCR_ERR_DUPLICATE), a weight above MCR_WEIGHT_MAX
 *     (MCR_ERR_RANGE), or a host that mcr_config_add_server() refuses
 *     ("[::1]", which nutcracker cannot resolve either).
 *   - No name is resolved: nutcracker refuses a listen host that does not
 *     resolve; here only its form is checked.
 *   - Stricter: a number above 2147483647 (nutcracker's int silently wraps)
 *     is MCR_ERR_RANGE; a scalar with a NUL byte is refused; only "servers"
 *     may be a sequence (nutcracker also takes a one-item sequence for another
 *     directive when "servers" is then a single scalar).
 *
 * ERRORS
 *
 * Messages start with "FILE:LINE:COLUMN: " (1-based, libyaml's marks; FILE
 * is the path, or the name given to mcr_twem_load_buffer) and name the pool
 * and the directive or server line, then the problem. A file that cannot be
 * read, or holds no pool, gives "FILE: " and the problem.
 */
#ifndef MCROUTE_TWEMPROXY_H
#define MCROUTE_TWEMPROXY_H

#include <stddef.h>
#include <stdint.h>

#include "mcroute.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mcr_twem mcr_twem;

/* ==================================================================== */
/*  Loading                                                              */
/* ==================================================================== */

/* mcr_twem_load: parse the nutcracker configuration file at `path` into a
 * new mcr_twem (*out, freed with mcr_twem_free). The whole file is checked
 * (see THE FILE above) before anything is returned. Errors (*out unchanged):
 * MCR_ERR_INVALID (NULL argument), MCR_ERR_IO (the file cannot be read),
 * MCR_ERR_SYNTAX (not YAML, a forbidden YAML feature, a wrong structure, a
 * malformed value or server line, a missing listen), MCR_ERR_UNKNOWN (an
 * unknown directive, hash or distribution), MCR_ERR_DUPLICATE (a directive
 * given twice, two pools with one name or one listen, two servers of a pool
 * with one name), MCR_ERR_RANGE (a port, a weight of 0, server_connections
 * 0, a number above 2147483647), MCR_ERR_EMPTY (no pool, a pool without
 * servers), MCR_ERR_INVALID (redis_auth in a pool that is not redis),
 * MCR_ERR_NOMEM. Thread-safe (no shared state). */
MCR_EXTERN int mcr_twem_load(const char *path, mcr_twem **out, mcr_error *err);

/* mcr_twem_load_buffer: mcr_twem_load() of `len` bytes at `data` (a whole
 * file's contents, not NUL-terminated necessarily; copied as needed, so the
 * buffer may be freed afterwards). `name` stands for the file in messages
 * and mcr_twem_source(); NULL means "<buffer>". Errors as mcr_twem_load(),
 * without MCR_ERR_IO. */
MCR_EXTERN int mcr_twem_load_buffer(const void *data, size_t len, const char *name,
                                    mcr_twem **out, mcr_error *err);

/* mcr_twem_free: release `twem`. NULL is a no-op. Strings returned by the
 * getters below become invalid; configs and rings built from it stay valid. */
MCR_EXTERN void mcr_twem_free(mcr_twem *twem);

/* mcr_twem_source: the path (or buffer name) the configuration was loaded
 * from, owned by `twem`; NULL for a NULL `twem`. */
MCR_EXTERN const char *mcr_twem_source(const mcr_twem *twem);

/* ==================================================================== */
/*  Pools                                                                */
/* ==================================================================== */

/* mcr_twem_pool_count: the number of pools (at least 1 in a loaded
 * configuration; 0 for NULL). Pools are numbered 0.. in file order. */
MCR_EXTERN size_t mcr_twem_pool_count(const mcr_twem *twem);

/* mcr_twem_pool_name: the name of pool `pool`, owned by `twem`, or NULL when
 * `twem` is NULL or `pool` out of range. */
MCR_EXTERN const char *mcr_twem_pool_name(const mcr_twem *twem, size_t pool);

/* mcr_twem_pool_index: the number of the pool called `name` (exact,
 * case-sensitive) into *out. MCR_OK, MCR_ERR_INVALID (NULL argument), or
 * MCR_ERR_UNKNOWN with a message naming `name` and listing the pools (as
 * many as fit); *out is unchanged on error. */
MCR_EXTERN int mcr_twem_pool_index(const mcr_twem *twem, const char *name, size_t *out,
                                   mcr_error *err);

/* mcr_twem_config: a new mcr_config (*out, owned by the caller) placing keys
 * as nutcracker places them in pool `pool`: its mode, hash, hash tag and
 * servers in nutcracker's order (see PLACEMENT above). Errors (*out
 * unchanged), each message naming the file, line and pool:
 * MCR_ERR_INVALID (NULL argument, `pool` out of range), MCR_ERR_UNSUPPORTED
 * (distribution random, a unix-socket server, an empty name, a total weight
 * above 2^32 - 1), MCR_ERR_DUPLICATE (one host and port under two names), and the
 * errors of mcr_config_add_server_named() for a server mcroute cannot hold
 * (MCR_ERR_RANGE for a weight above MCR_WEIGHT_MAX, MCR_ERR_SYNTAX,
 * MCR_ERR_TOO_LONG), MCR_ERR_NOMEM. Thread-safe on a shared `twem`. */
MCR_EXTERN int mcr_twem_config(const mcr_twem *twem, size_t pool, mcr_config **out,
                               mcr_error *err);

/* mcr_twem_ring: mcr_twem_config() then mcr_ring_new(): the ring of pool
 * `pool` (*out, freed with mcr_ring_free). Errors as mcr_twem_config() and
 * mcr_ring_new(); *out unchanged on error. Thread-safe on a shared `twem`. */
MCR_EXTERN int mcr_twem_ring(const mcr_twem *twem, size_t pool, mcr_ring **out,
                             mcr_error *err);

/* ==================================================================== */
/*  Directives (what the connection pool honours)                         */
/* ==================================================================== */

/* Distributions, in nutcracker's order. */
typedef enum mcr_twem_distribution {
    MCR_TWEM_DIST_KETAMA = 0,
    MCR_TWEM_DIST_MODULA = 1,
    MCR_TWEM_DIST_RANDOM = 2 /* not reproducible: mcr_twem_config() refuses it */
} mcr_twem_distribution;

/* The numeric and boolean directives of a pool (booleans are 0 or 1). */
typedef enum mcr_twem_option {
    MCR_TWEM_HASH = 0,                 /* an mcr_hash; default MCR_HASH_FNV1A_64 */
    MCR_TWEM_DISTRIBUTION = 1,         /* an mcr_twem_distribution; default ketama */
    MCR_TWEM_TIMEOUT = 2,              /* msec to connect or wait for a reply;
                                          -1 (default): wait forever */
    MCR_TWEM_BACKLOG = 3,              /* listen backlog; default 512 */
    MCR_TWEM_CLIENT_CONNECTIONS = 4,   /* as written; default 0 (unlimited).
                                          nutcracker 0.5.0 reads it and then
                                          resets it to 0: it never limits */
    MCR_TWEM_REDIS = 5,                /* redis protocol; default 0 (memcached) */
    MCR_TWEM_REDIS_DB = 6,             /* default 0 */
    MCR_TWEM_PRECONNECT = 7,           /* connect to every server at start; 0 */
    MCR_TWEM_AUTO_EJECT_HOSTS = 8,     /* eject failing servers; default 0 */
    MCR_TWEM_SERVER_CONNECTIONS = 9,   /* per server, >= 1; default 1 */
    MCR_TWEM_SERVER_RETRY_TIMEOUT = 10,/* msec before retrying an ejected
                                          server; default 30000 */
    MCR_TWEM_SERVER_FAILURE_LIMIT = 11,/* consecutive failures that eject a
                                          server; default 2 */
    MCR_TWEM_TCPKEEPALIVE = 12,        /* SO_KEEPALIVE on server connections; 0 */
    MCR_TWEM_LISTEN_PORT = 13,         /* the listen port; 0 for a unix socket */
    MCR_TWEM_LISTEN_PERM = 14,         /* a unix socket's mode, -1 when not
                                          given (and for host:port) */
    MCR_TWEM_OPTION_COUNT
} mcr_twem_option;

/* mcr_twem_pool_option: the value of `opt` in pool `pool` into *value: the
 * one written in the file, else nutcracker's default (given above), so the
 * caller never needs to know which. MCR_OK, or MCR_ERR_INVALID (NULL
 * argument, `pool` or `opt` out of range) with *value unchanged. */
MCR_EXTERN int mcr_twem_pool_option(const mcr_twem *twem, size_t pool, mcr_twem_option opt,
                                    int64_t *value);

/* mcr_twem_pool_is_set: 1 when `opt` is written in pool `pool`'s section,
 * 0 when it takes its default (or for a NULL `twem`, an out-of-range `pool`
 * or `opt`; MCR_TWEM_LISTEN_PORT is always written). */
MCR_EXTERN int mcr_twem_pool_is_set(const mcr_twem *twem, size_t pool, mcr_twem_option opt);

/* The text directives of a pool. */
typedef enum mcr_twem_text {
    MCR_TWEM_LISTEN = 0,      /* listen as written: "127.0.0.1:22121", "/run/s 0666" */
    MCR_TWEM_LISTEN_HOST = 1, /* its host (before the last ':'), or the socket path */
    MCR_TWEM_HASH_TAG = 2,    /* the two bytes of hash_tag, or NULL */
    MCR_TWEM_REDIS_AUTH = 3,  /* redis_auth, or NULL */
    MCR_TWEM_HASH_NAME = 4,   /* nutcracker's name of the hash, "fnv1a_64" by default */
    MCR_TWEM_DISTRIBUTION_NAME = 5, /* "ketama", "modula" or "random" */
    MCR_TWEM_TEXT_COUNT
} mcr_twem_text;

/* mcr_twem_pool_text: the text of `what` in pool `pool`, NUL-terminated,
 * owned by `twem`; NULL when not set (hash_tag, redis_auth) or for a NULL
 * `twem`, an out-of-range `pool` or `what`. */
MCR_EXTERN const char *mcr_twem_pool_text(const mcr_twem *twem, size_t pool,
                                          mcr_twem_text what);

/* ==================================================================== */
/*  Servers                                                              */
/* ==================================================================== */

/* mcr_twem_server_count: the number of servers of pool `pool` (0 for a
 * NULL `twem` or an out-of-range `pool`). */
MCR_EXTERN size_t mcr_twem_server_count(const mcr_twem *twem, size_t pool);

/* A server of a pool as written, every string owned by the mcr_twem. */
typedef struct mcr_twem_server {
    const char *host;   /* the host, or the socket path of a unix socket */
    int port;           /* 1..65535; 0 for a unix socket */
    uint32_t weight;    /* >= 1 */
    const char *name;   /* the name written after the address, or NULL */
    const char *ketama_name; /* what nutcracker sorts and hashes by: the
                                name, else "host" (port 11211) or
                                "host:port" */
    size_t line;        /* 1-based line of the server in the file */
    uint64_t reserved[4]; /* zero; room for later fields (mcroute.h) */
} mcr_twem_server;

/* mcr_twem_server_get: server `i` of pool `pool`, in nutcracker's order
 * (by ketama_name, shorter first: the ring's order), into *out. MCR_OK, or
 * MCR_ERR_INVALID (NULL argument, `pool` or `i` out of range) with *out
 * unchanged. */
MCR_EXTERN int mcr_twem_server_get(const mcr_twem *twem, size_t pool, size_t i,
                                   mcr_twem_server *out);

/* ==================================================================== */
/*  Connection pool options                                              */
/* ==================================================================== */

/* mcr_twem_fill_pool_options: set the fields of *opts (an mcr_pool_options
 * of mcroute_pool.h) that the directives of pool `pool` decide, so that a
 * connection pool treats the servers as nutcracker does. The fields listed
 * here are always written; every other field of *opts is left as it is
 * (start from a zeroed struct or mcr_pool_options_init(), and set the rest
 * before or after).
 * Each directive is read as mcr_twem_pool_option() gives it: as written,
 * else nutcracker 0.5.0's default.
 *
 *   server_connections    -> connections (nutcracker's default 1).
 *   preconnect            -> eager (default false).
 *   timeout               -> connect_timeout_ms and request_timeout_ms, in
 *                            ms both. nutcracker waits forever when the
 *                            timeout is 0 or not written (its default, -1);
 *                            a pool cannot, so both are then set to 0: the
 *                            pool's default (1000 ms).
 *   auto_eject_hosts      -> policy: true gives MCR_POLICY_EJECT, false (the
 *                            default) MCR_POLICY_FAIL_FAST.
 *   server_failure_limit  -> server_failure_limit (default 2). nutcracker
 *                            ejects at the first failure with 0 as with 1;
 *                            0 gives 1 (the pool's 0 would mean 2).
 *   server_retry_timeout  -> retry_timeout_ms (default 30000). 0 (retry at
 *                            once) gives 1 ms, the shortest a pool knows
 *                            (its 0 would mean 30000).
 *
 * Differences that remain: without auto_eject_hosts nutcracker sends every
 * request to a failing server (its failure limit and retry timeout are then
 * unused), where MCR_POLICY_FAIL_FAST answers MCR_ERR_DOWN at once for
 * retry_timeout_ms after server_failure_limit failures; the ring is left
 * unchanged by both. nutcracker probes an ejected server again every
 * server_retry_timeout, where a pool doubles the wait of a server that
 * fails again, up to retry_max_ms: set retry_max_ms to retry_timeout_ms for
 * nutcracker's fixed interval. Not mapped: tcpkeepalive, backlog,
 * client_connections and listen (the pool has no listener and no keepalive
 * option); hash, distribution and hash_tag are placement
 * (mcr_twem_config()).
 *
 * Errors, *opts unchanged, messages naming the file, line, pool and
 * directive: MCR_ERR_INVALID (NULL twem or opts, `pool` out of range),
 * MCR_ERR_UNSUPPORTED (a pool with "redis: true": the connection pool
 * speaks memcached only), MCR_ERR_RANGE (a value outside what
 * mcr_pool_new() accepts: server_connections above 64,
 * server_failure_limit above 1000, timeout or server_retry_timeout above
 * 86400000 ms, one day). Thread-safe on a shared `twem`. */
struct mcr_pool_options; /* mcroute_pool.h: include it to fill one */
MCR_EXTERN int mcr_twem_fill_pool_options(const mcr_twem *twem, size_t pool,
                                          struct mcr_pool_options *opts, mcr_error *err);

#ifdef __cplusplus
}
#endif

#endif /* MCROUTE_TWEMPROXY_H */
