/* SPDX-License-Identifier: BSD-3-Clause */
/* mcroute.h: the public API of libmcroute, client-side memcached key placement.
 * Library: libmcroute, `pkg-config --cflags --libs mcroute`.
 *
 * INTRODUCTION
 *
 * An application that talks to many memcached servers must pick, for every key,
 * the server that holds it. libmcroute computes that placement exactly as the
 * established clients do (libmemcached 1.1.4, libketama), so a deployment can
 * switch to it without a single extra cache miss.
 *
 * Concepts, one opaque handle each:
 *
 *   mcr_config  A mutable description of a placement: the servers (host, port,
 *               weight, in order), the placement mode and the hash functions.
 *               Owned by one thread at a time.
 *   mcr_ring    The continuum built from a config. Immutable once built: any
 *               number of threads may look keys up in the same ring at once
 *               without locking. Freed with mcr_ring_free() once no thread uses it.
 *   mcr_snapshot  (<mcroute_snapshot.h>) A versioned, reference-counted,
 *               immutable placement: servers with stable ids, zones and
 *               states, a ring, an epoch and a checksum; membership changes
 *               build the next snapshot incrementally.
 *
 * Conventions:
 *
 *   - Functions that can fail return an int status: MCR_OK (0) or one of the
 *     negative mcr_status codes. mcr_strerror() names a code.
 *   - Functions that can fail on user input also take an `mcr_error *err`
 *     (may be NULL). On failure it receives the code and a message naming the
 *     problem (the offending text, line or value). On success it is untouched.
 *   - A function that fails leaves its output arguments and the objects it was
 *     given unchanged, unless its block says otherwise.
 *   - `*_free(NULL)` is a no-op. The lookup functions (mcr_ring_hash, _find,
 *     _locate, _locate_many, _mode, _key_hash) take a ring that must not be
 *     NULL: they sit on the hot path and check nothing. The inspection
 *     getters (counts, points, servers) accept NULL and return 0 / NULL /
 *     MCR_ERR_INVALID.
 *   - Nothing is reported through globals; nothing aborts the process.
 *   - Names: `_free(x)` releases an object the library allocated (a
 *     handle, an array it returned); `_unref(x)` drops a counted reference;
 *     `_clear(&s)` releases what a caller-owned struct holds and zeroes it;
 *     `_reset(h)` empties a handle and keeps it. All accept NULL. Verbs
 *     come in pairs: set/clear, add/remove, new/free.
 *   - Structs that grow. Every public struct that a caller allocates ends
 *     with `uint64_t reserved[N]`, from which later releases of the same
 *     major version take their new fields, so that no struct changes size
 *     (or the ABI) within it. A struct the caller fills (options, a
 *     request, a server to add) is filled from all-zero (`= {0}`, a
 *     designated initialiser, memset, or its _init() function), and a new
 *     field's zero keeps the behaviour of before; the library refuses a
 *     reserved area that is not zero (MCR_ERR_INVALID), so that no field
 *     of a later release is ever read from garbage. A struct the library
 *     writes into the caller's memory (a server's description, stats, a
 *     report, a route) is written whole, its reserved area zeroed. Structs
 *     the library hands to a callback (mcr_result, mcr_fleet_event,
 *     mcr_watch_event, mcr_migrate_progress) are the library's, valid during
 *     the call, and may grow at their end: read them through the pointer
 *     (mcr_owned_result keeps a result).
 *
 * The libmemcached option-string and behaviour emulation lives in
 * <mcroute_libmemcached.h>.
 */
#ifndef MCROUTE_H
#define MCROUTE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The export marker of public functions: default visibility while the
 * library itself is built (everything else is hidden), nothing for its
 * users. <mcroute_version.h> has the same definition. */
#ifndef MCR_EXTERN
#if defined(MCR_BUILDING_LIBRARY) && defined(__GNUC__)
#define MCR_EXTERN __attribute__((visibility("default")))
#else
#define MCR_EXTERN
#endif
#endif

/* ==================================================================== */
/*  Version                                                              */
/* ==================================================================== */

/* MCR_VERSION_MAJOR, _MINOR, _PATCH, _HEX and _STRING (the version compiled
 * against), mcr_version() and mcr_version_string() (the version loaded), and
 * the rule that the SONAME changes with the major number: generated from the
 * build's project version. */
#include "mcroute_version.h"

/* ==================================================================== */
/*  Errors                                                               */
/* ==================================================================== */

typedef enum mcr_status {
    MCR_OK = 0,
    MCR_ERR_INVALID = -1,     /* an argument is invalid (NULL, out of range), a call made
                                 where it is not allowed (inside a read-side section, a
                                 hook, a callback) */
    MCR_ERR_NOMEM = -2,       /* memory allocation failed */
    MCR_ERR_SYNTAX = -3,      /* malformed text: server list, option, file line */
    MCR_ERR_RANGE = -4,       /* a number outside its range (port, weight, option) */
    MCR_ERR_DUPLICATE = -5,   /* the same server (host and port, or id) given twice; a
                                 directive given twice */
    MCR_ERR_UNKNOWN = -6,     /* an unknown name: hash, mode, option, behaviour, server id */
    MCR_ERR_EMPTY = -7,       /* no servers where at least one is needed; a router with
                                 no snapshot yet */
    MCR_ERR_IO = -8,          /* a file could not be read or written */
    MCR_ERR_TOO_LONG = -9,    /* a hostname over 255 bytes, a label too long */
    MCR_ERR_UNSUPPORTED = -10, /* valid for the reference, not reproducible here; a diff of
                                  snapshots with different key hashes; an unknown snapshot
                                  file format */
    /* Request outcomes of the connection pool (<mcroute_pool.h>). */
    MCR_ERR_KEY = -11,       /* a key empty, too long, or with a space or control byte */
    MCR_ERR_TOO_BIG = -12,   /* a value over the pool's max_value_size (sent or replied) */
    MCR_ERR_TIMEOUT = -13,   /* no connection or no reply within the timeout */
    MCR_ERR_CONNECT = -14,   /* connection refused, reset, closed or unreachable */
    MCR_ERR_DOWN = -15,      /* the server is down for this pool (failure policy) */
    MCR_ERR_PROTOCOL = -16,  /* a reply that does not fit its request */
    MCR_ERR_SERVER = -17,    /* the server answered ERROR, CLIENT_ERROR or SERVER_ERROR */
    MCR_ERR_CANCELLED = -18, /* the pool was freed first, or the server removed before it was sent */
    /* Snapshots (0.2). */
    MCR_ERR_CORRUPT = -19,   /* a snapshot file whose checksum does not match its text, or
                                whose text does not rebuild to the same snapshot */
    MCR_ERR_STALE = -20,     /* a snapshot published, loaded or watched whose epoch is not
                                above the current one */
    MCR_ERR_BUSY = -21,      /* a call that must not block would have to wait (another
                                writer holds the router, or replaced snapshots await
                                reclamation); nothing was done, call again later */
    MCR_ERR_SYSTEM = -22     /* the system refused a resource: a pipe, a thread, a
                                mutex, an event base (mcr_error.sys_errno keeps errno;
                                a refusal for want of memory is MCR_ERR_NOMEM) */
} mcr_status;

/* mcr_strerror: a static, human-readable name for a status code ("invalid
 * argument", ...). Unknown codes give "unknown error". Cannot fail.
 * Thread-safe. */
MCR_EXTERN const char *mcr_strerror(int status);

/* Detailed error report. Caller-owned, usually on the stack. `code` is the
 * returned status, `message` a NUL-terminated sentence naming the problem
 * (truncated to fit), `sys_errno` the errno value of an MCR_ERR_SYSTEM or
 * MCR_ERR_NOMEM that came from the system (0 for every other report). */
/* The "none" of each index type: what a lookup answers when there is no
 * answer. MCR_NO_SERVER for the uint32_t index of a server in a snapshot
 * or ring (mcr_snapshot_find(), mcr_ring_find(), mcr_snapshot_ring_server(),
 * mcr_snapshot_table_entry(), mcr_snapshot_key_slot(),
 * mcr_router_locate_index(), which also index slots and table entries);
 * MCR_NO_POINT for the size_t index of a continuum point
 * (mcr_ring_find_point()); MCR_HASH_NONE (MCR_HASH_COUNT) for an mcr_hash
 * (mcr_mode_default_hash() of an unknown mode). */
#define MCR_NO_SERVER UINT32_MAX
#define MCR_NO_POINT SIZE_MAX

/* memcached's longest key, in bytes: the one key limit of every layer (a
 * pool's requests with their key prefix, a migration's copies). */
#define MCR_KEY_MAX 250u

#define MCR_ERROR_MESSAGE_SIZE 256
typedef struct mcr_error {
    int code;
    char message[MCR_ERROR_MESSAGE_SIZE];
    int sys_errno;
} mcr_error;

/* ==================================================================== */
/*  Key hashes                                                           */
/* ==================================================================== */

/* The key hashes of libhashkit 1.1.4, bit-exact on any bytes and any length
 * with its x86/amd64 builds, where `char` is signed: libhashkit sign-extends
 * bytes >= 0x80 in one-at-a-time and the FNV hashes, and mcroute does so on
 * every platform (an ARM64 build of libhashkit gives other values there).
 * The numbering follows libhashkit's hashkit_hash_algorithm_t, so a value read
 * from MEMCACHED_BEHAVIOR_HASH converts by a cast. */
typedef enum mcr_hash {
    MCR_HASH_DEFAULT = 0,  /* "default": Bob Jenkins' one-at-a-time */
    MCR_HASH_MD5 = 1,      /* "md5": digest bytes 0..3, little-endian */
    MCR_HASH_CRC = 2,      /* "crc": (CRC-32 >> 16) & 0x7fff */
    MCR_HASH_FNV1_64 = 3,  /* "fnv1_64": 64-bit FNV-1, low 32 bits */
    MCR_HASH_FNV1A_64 = 4, /* "fnv1a_64": 64-bit FNV-1a, low 32 bits */
    MCR_HASH_FNV1_32 = 5,  /* "fnv1_32" */
    MCR_HASH_FNV1A_32 = 6, /* "fnv1a_32" */
    MCR_HASH_HSIEH = 7,    /* "hsieh": SuperFastHash as libmemcached and twemproxy
                              compute it (start value 0, not Hsieh's length) */
    MCR_HASH_MURMUR = 8,   /* "murmur": MurmurHash2, libhashkit's seed */
    MCR_HASH_JENKINS = 9,  /* "jenkins": Bob Jenkins' lookup3 */
    MCR_HASH_MURMUR3 = 10, /* "murmur3": MurmurHash3 x86_32, libhashkit's seed */
    /* From 11 on, twemproxy's hashes that libhashkit does not have (its 11,
     * CUSTOM, has no equivalent: cast only 0..10 from libmemcached). */
    MCR_HASH_CRC16 = 11,   /* "crc16": twemproxy's, as nutcracker computes it:
                              CRC-16/XMODEM steps on a 32-bit accumulator
                              never cut to 16 bits (the low half is the
                              CRC-16; the bits above are kept) */
    MCR_HASH_CRC32A = 12,  /* "crc32a": twemproxy's full CRC-32 (IEEE) */
    /* From 13 on, the key hashes of other clients (mcr_client(3)). Those
     * that read characters read the key as UTF-8; a byte that is not part
     * of a valid UTF-8 sequence (which a string of those languages cannot
     * hold) is read as the character of that value, U+0080..U+00FF. */
    MCR_HASH_CMEMCACHE = 13,    /* "cmemcache": python-memcached's
                                   cmemcache_hash, "crc" with 0 taken as 1 */
    MCR_HASH_HASHCODE = 14,     /* "hashcode": Java's String.hashCode() over
                                   the key's UTF-16 code units, as 32 bits
                                   unsigned (spymemcached's NATIVE_HASH) */
    MCR_HASH_HASHCODE_ABS = 15, /* "hashcode_abs": the absolute value of that
                                   hashCode as a signed 32-bit number, 2^31
                                   for -2^31 (memjs: Math.abs) */
    MCR_HASH_COUNT
} mcr_hash;

/* Not a hash: the "none" of mcr_hash (see MCR_NO_SERVER). */
#define MCR_HASH_NONE MCR_HASH_COUNT

/* mcr_hash_key: the 32-bit hash `h` of `len` bytes at `data` (`data` may be
 * NULL when `len` is 0). Any byte values, any length. Returns 0 for an
 * unknown `h`. Cannot fail otherwise. Thread-safe. */
MCR_EXTERN uint32_t mcr_hash_key(mcr_hash h, const void *data, size_t len);

/* mcr_hash_from_name: parse a hash name ("default", "md5", "crc", "fnv1_64",
 * "fnv1a_64", "fnv1_32", "fnv1a_32", "hsieh", "murmur", "jenkins",
 * "murmur3", "crc16", "crc32a"; case-insensitive; "one_at_a_time" is
 * accepted for "default"). Returns MCR_OK and sets *out, or MCR_ERR_UNKNOWN
 * (MCR_ERR_INVALID for NULL arguments) with *out unchanged. Thread-safe. */
MCR_EXTERN int mcr_hash_from_name(const char *name, mcr_hash *out);

/* mcr_hash_name: the canonical lower-case name of `h`, a static string, or
 * NULL for an unknown value. Thread-safe. */
MCR_EXTERN const char *mcr_hash_name(mcr_hash h);

/* mcr_md5: the 16-byte MD5 digest of `len` bytes at `data` into `out`
 * (`data` may be NULL when `len` is 0). Cannot fail. Thread-safe. */
MCR_EXTERN void mcr_md5(const void *data, size_t len, unsigned char out[16]);

/* ==================================================================== */
/*  Placement modes                                                      */
/* ==================================================================== */

/* The placement modes. Each comment names the mode (as mcr_mode_from_name()
 * takes it) and what it reproduces; mcr_mode(3) has each mode's placement
 * rules (labels, points, tables, scores), its guarantees and its limits.
 * What a caller must know of them is here: the default key hash of each is
 * mcr_mode_default_hash(); in the table and score modes ("jump",
 * "rendezvous", "maglev", "slots") a ring has no continuum, so
 * mcr_ring_point_count() is 0 and mcr_ring_find_point() MCR_NO_POINT; the
 * weight limits and refusals are given per mode below (a weight is
 * 1..MCR_WEIGHT_MAX in every mode). */
typedef enum mcr_mode {
    /* "ketama": libketama; the mode of a new config. */
    MCR_MODE_KETAMA = 0,
    /* "consistent": libmemcached CONSISTENT / CONSISTENT_KETAMA, weighting
     * off; labels valued by the point hash (mcr_config_set_point_hash). */
    MCR_MODE_CONSISTENT = 1,
    /* "weighted": libmemcached with weighting on (KETAMA_WEIGHTED). */
    MCR_MODE_WEIGHTED = 2,
    /* "spy": libmemcached CONSISTENT_KETAMA_SPY, weighting off; labels
     * valued by the point hash. */
    MCR_MODE_SPY = 3,
    /* "spy-weighted": CONSISTENT_KETAMA_SPY with weighting on. */
    MCR_MODE_SPY_WEIGHTED = 4,
    /* "modula": libmemcached MODULA, server = hash % server count; weights
     * are ignored, as libmemcached ignores them. */
    MCR_MODE_MODULA = 5,
    /* "twemproxy-ketama": nutcracker 0.5.0's ketama; servers are used in
     * config order (the twemproxy layer sorts them as nutcracker does). */
    MCR_MODE_TWEMPROXY_KETAMA = 6,
    /* "twemproxy-modula": nutcracker's modula. */
    MCR_MODE_TWEMPROXY_MODULA = 7,
    /* "stable-ketama": mcroute's own continuum for changing memberships,
     * compatible with no other client: a change moves keys only to or from
     * the server it names. A weight above MCR_STABLE_WEIGHT_MAX is refused
     * with MCR_ERR_RANGE when the ring or snapshot is built. */
    MCR_MODE_STABLE_KETAMA = 8,

    /* The native modes below are mcroute's own, compatible with no other
     * client, each with a snapshot, epochs, diffs and replicas like
     * "stable-ketama"; they name a server by its id (see mcr_server_desc). */

    /* "jump": jump consistent hash over a bucket table kept in the
     * snapshot; weights up to MCR_STABLE_WEIGHT_MAX, at most 2^24 buckets.
     * Removing a server other than the last one added moves about twice
     * the ideal (mcr_mode(3)). */
    MCR_MODE_JUMP = 9,
    /* "rendezvous": weighted highest random weight; O(N) per lookup. */
    MCR_MODE_RENDEZVOUS = 10,
    /* "maglev": the Maglev lookup table of M entries, M prime
     * (mcr_config_set_table_size()), fixed for a snapshot and those applied
     * from it; more than M / 100 active servers is refused with
     * MCR_ERR_RANGE. */
    MCR_MODE_MAGLEV = 11,
    /* "slots": S logical slots (mcr_config_set_slot_count()), slot =
     * CRC-16/XMODEM(key) mod S (the config's key hash is not used), and a
     * slot-to-server map kept in the snapshot that only
     * mcr_changes_move_slots() changes. mcr_ring_hash() gives the key's
     * CRC-16 (0..65535), mcr_ring_find() the owner of its slot. Removing a
     * server that still owns slots is refused (MCR_ERR_INVALID) unless the
     * same batch moves them away or re-adds its id. */
    MCR_MODE_SLOTS = 12,
    /* "bounded": consistent hashing with bounded loads on the continuum of
     * "stable-ketama" (same points, same weight limit): mcr_ring_locate()
     * and mcr_snapshot_locate() give the plain owner,
     * mcr_snapshot_locate_bounded() (<mcroute_snapshot.h>) the owner under
     * the caller's loads. */
    MCR_MODE_BOUNDED = 13,

    /* The modes below reproduce other clients (see mcr_client(3), which
     * configures each by name with mcr_config_set_client()). They take
     * servers in list order, have snapshots, epochs and diffs like the
     * others, and replicas (mcroute's: the next servers of the continuum,
     * list or scores) although the clients have none. */

    /* "pymemcache": pymemcache's HashClient: rendezvous (highest random
     * weight), the score of server S for key K MurmurHash3_x86_32, seed 0,
     * of the text "host:port-K" read one character at a time (its low 8
     * bits); equal scores go to the larger "host:port". The key hash is not
     * used for placement (mcr_ring_hash() still gives it). No weights: a weight
     * other than 1 is refused (MCR_ERR_RANGE) when a ring or snapshot is
     * built. mcr_ring_find() answers MCR_NO_SERVER: a hash alone places no
     * key. */
    MCR_MODE_PYMEMCACHE = 14,
    /* "buckets": Cache::Memcached's buckets, as python-memcached and
     * nginx's `hash KEY;` have them: each server `weight` times in list
     * order, the key's bucket the key hash modulo the total weight. */
    MCR_MODE_BUCKETS = 15,
    /* "spymemcached": spymemcached's KetamaNodeLocator with its default key
     * format: 160 points per server at average weight, MD5 of labels
     * "ADDRESS:port-i" for an IP address, "name/ADDRESS:port-i" for a host
     * name, which is resolved when the server is first placed (the first
     * IPv4 address, else the first IPv6, as Java's
     * InetAddress.getByName()); equal points: the server listed later
     * wins. A name that does not resolve fails the build (MCR_ERR_UNKNOWN
     * naming it). */
    MCR_MODE_SPYMEMCACHED = 16,
    /* "spymemcached-libmemcached": the same locator with the key format
     * LIBMEMCACHED: labels "name-i", or "name:port-i" for a port other
     * than 11211, where an IP address is first turned into the name its
     * reverse lookup gives (the address itself without one). */
    MCR_MODE_SPYMEMCACHED_LIBMEMCACHED = 17,
    /* "dalli": dalli's ring: floor(N x 160 x weight / total weight) points
     * per server, each the first 4 bytes, big-endian, of SHA-1("host:port:i");
     * a key goes to the last point at or below its hash (the last point
     * when it is below all of them). */
    MCR_MODE_DALLI = 18,
    /* "hashring": the npm hashring module (node-memcached): libketama's
     * continuum with labels "host-i" for port 11211, "host:port-i"
     * otherwise, label counts computed in double precision. */
    MCR_MODE_HASHRING = 19,
    /* "nginx-consistent": nginx's `hash KEY consistent;`: 160 points per
     * unit of weight, each a CRC-32 chained from the server's host, a zero
     * byte, its port and the previous point; first point at or above the
     * key's hash, wrapping. */
    MCR_MODE_NGINX_CONSISTENT = 20,
    /* "php-memcache": the pecl memcache extension's consistent strategy:
     * 160 points per unit of weight, the key hash of labels "host:port-i",
     * and a key looked up not on the continuum but in 1024 buckets, each
     * the owner of an evenly spaced position of it. */
    MCR_MODE_PHP_MEMCACHE = 21,

    /* The modes below reproduce proxies (mcr_client(3)): keys go where the
     * proxy sends them with the same list of servers. They take servers in
     * list order and have no weights (a weight other than 1 is refused
     * with MCR_ERR_RANGE when a ring or snapshot is built). The key itself
     * places it: the key hash is not used (mcr_ring_hash() still gives it)
     * and mcr_ring_find() answers MCR_NO_SERVER. A snapshot places keys
     * as the proxy would with its active servers, in order. */

    /* "memcached-proxy-jump": the memcached proxy's default pool
     * (mcp.pool()): jump consistent hash (Lamping and Veach) of the key's
     * XXH3-64 (seed 0) into the servers. */
    MCR_MODE_MEMCACHED_PROXY_JUMP = 22,
    /* "mcrouter-ch3": mcrouter's HashRoute with hash_func Ch3: furc_hash
     * of the routing key (a leading "/region/cluster/" dropped, the key
     * cut before its first "|#|") into the servers. */
    MCR_MODE_MCROUTER_CH3 = 23,

    /* Envoy's hash load balancers with their defaults, as a memcached
     * cluster behind Envoy places keys: these two take weights (as Envoy's
     * load_balancing_weight) and name each server by its address as Envoy
     * prints it, "10.0.0.1:11211" or "[::1]:11211" (give addresses: Envoy
     * hashes the address it resolved, not a host name). The key is hashed
     * with XXH64 (seed 0); as in the proxies above, the key hash is not
     * used and mcr_ring_find() answers MCR_NO_SERVER. A snapshot places
     * keys as Envoy would with its active servers. */

    /* "envoy-maglev": Envoy's MAGLEV: a table of 65537 entries filled from
     * the servers sorted by address, offset XXH64(address, 0) % 65537 and
     * skip XXH64(address, 1) % 65536 + 1, each server taking entries in
     * proportion to its weight; a key goes to entry XXH64(key) % 65537. */
    MCR_MODE_ENVOY_MAGLEV = 24,
    /* "envoy-ring-hash": Envoy's RING_HASH: 64-bit points XXH64("address_i")
     * on a ring of at least 1024 points (at most 8388608), each server's
     * count in proportion to its weight; a key goes to the first point at
     * or above XXH64(key), wrapping. mcr_ring_point_count() is 0: the
     * points are 64-bit. */
    MCR_MODE_ENVOY_RING_HASH = 25,

    /* "memcached-proxy-ring-ketama": the memcached proxy's
     * mcp.dist_ring_hash with omode "ketama" (proxy_ring_hash.c): a
     * continuum of 160 points per server, MD5 of "host:port-k" for k = 0..39
     * (the host as written, an IPv6 address without brackets), four
     * little-endian words per digest; a key goes to the first point at or
     * above its hash, wrapping. The key hash is md5 (the low 32 bits of
     * MD5(key), little-endian: mcp.dist_ring_hash.hash, which memcached
     * documents for libketama compatibility). It is libketama's continuum
     * ("ketama") but that every server has 40 labels (libketama's float
     * arithmetic gives 39 with 61, 122, 237, ... servers) and no weights (a
     * weight other than 1 is refused with MCR_ERR_RANGE when a ring or
     * snapshot is built). */
    MCR_MODE_MEMCACHED_PROXY_RING_KETAMA = 26,

    /* "mcrouter-wch3": mcrouter's HashRoute with hash_func WeightedCh3
     * (WeightedCh3HashFunc): up to 32 tries, each furc_hash of the routing
     * key (as "mcrouter-ch3") into the servers, accepted when the low 32
     * bits of SpookyHash V2 (seed 0xface2014) of the same bytes are below
     * weight x 4294967295; a refused try appends the next salt ("0" ..
     * "9", "01", "11", ...: a counter's decimal digits, lowest first) to
     * the routing key; after 32 refusals, the last try's server. A server's
     * weight in this mode is its WeightedCh3 weight in millionths:
     * 0..MCR_WCH3_WEIGHT_ONE (1.0), 0 included; server lists and files
     * read by a config in this mode write it as mcrouter does, a decimal in
     * [0, 1] ("0.5"), and a server without one gets 0.5, the weight
     * mcrouter gives a server its weights list misses. */
    MCR_MODE_MCROUTER_WCH3 = 27,
    MCR_MODE_COUNT
} mcr_mode;

/* Largest weight of a server in "stable-ketama", "bounded" and "jump" (see
 * above). */
#define MCR_STABLE_WEIGHT_MAX 1000u

/* "mcrouter-wch3": the weight that is 1.0 (weights are millionths), the
 * weight of a server listed without one (0.5), and the tries of a key
 * (mcrouter's kNumTries). */
#define MCR_WCH3_WEIGHT_ONE 1000000u
#define MCR_WCH3_WEIGHT_DEFAULT 500000u
#define MCR_WCH3_TRIES 32

/* "maglev": the largest table size (a prime just below 2^26). */
#define MCR_MAGLEV_SIZE_MAX 67108859u

/* "maglev": the largest table size for N servers (listed, in any state) is
 * max(MCR_MAGLEV_SIZE_FREE, MCR_MAGLEV_SIZE_PER_N2 x N^2), at most
 * MCR_MAGLEV_SIZE_MAX: any size up to about a million entries, and beyond
 * that a table that the servers justify (four times the 100 N^2 that keeps
 * movement low, so that half of the servers can be removed). Building a
 * table costs O(M log M) time and 4 M bytes or more; this bound keeps a
 * small snapshot file from demanding a huge one. A larger table is refused
 * with MCR_ERR_RANGE when a ring or a snapshot is built or applied, and when
 * a snapshot file is loaded (before anything is built). */
#define MCR_MAGLEV_SIZE_FREE 1048576u
#define MCR_MAGLEV_SIZE_PER_N2 400u

/* "slots": the default and the largest slot count. */
#define MCR_SLOTS_DEFAULT 16384u
#define MCR_SLOTS_MAX 65536u

/* mcr_mode_from_name: parse a mode name given above (case-insensitive).
 * MCR_OK, or MCR_ERR_UNKNOWN / MCR_ERR_INVALID with *out unchanged.
 * Thread-safe. */
MCR_EXTERN int mcr_mode_from_name(const char *name, mcr_mode *out);

/* mcr_mode_name: canonical name of `m`, a static string, or NULL if unknown. */
MCR_EXTERN const char *mcr_mode_name(mcr_mode m);

/* mcr_mode_default_hash: the key hash of mode `m` when none is chosen, that
 * of the client the mode comes from. A config uses it until
 * mcr_config_set_hash() is called (mcr_config_new, mcr_config_set_mode), and
 * so do `mcroute -m MODE` without --hash and `mcroute simulate`:
 *
 *   ketama                      md5: libketama hashes keys with MD5 only.
 *   memcached-proxy-ring-ketama md5: mcp.dist_ring_hash.hash, the key hash
 *                               memcached documents with omode "ketama".
 *   consistent, spy, modula     default (one-at-a-time): libmemcached's
 *                               MEMCACHED_HASH_DEFAULT, which setting its
 *                               DISTRIBUTION or KETAMA behaviour leaves as is.
 *   weighted, spy-weighted      md5: KETAMA_WEIGHTED, the behaviour that turns
 *                               weighting on, also sets the key hash to MD5.
 *   twemproxy-ketama,
 *   twemproxy-modula            fnv1a_64: nutcracker's default `hash:`.
 *   stable-ketama, jump, rendezvous, maglev, bounded
 *                               md5: mcroute's own modes, which take the
 *                               hash of a new config.
 *   slots                       md5, which the mode does not use (keys are
 *                               placed by their CRC-16/XMODEM).
 *   memcached-proxy-jump,
 *   mcrouter-ch3, mcrouter-wch3,
 *   envoy-maglev,
 *   envoy-ring-hash             md5, which they do not use (the key itself
 *                               places it, hashed as the proxy hashes it).
 *
 * MCR_HASH_NONE (not a hash: mcr_config_set_hash refuses it) for an
 * unknown mode. Cannot fail otherwise. Thread-safe. */
MCR_EXTERN mcr_hash mcr_mode_default_hash(mcr_mode m);

/* ==================================================================== */
/*  Config                                                               */
/* ==================================================================== */

typedef struct mcr_config mcr_config;

/* Limits. A hostname is at most 255 bytes (DNS); ports are 1..65535;
 * weights are 1..MCR_WEIGHT_MAX (in "mcrouter-wch3", millionths:
 * 0..MCR_WCH3_WEIGHT_ONE). */
#define MCR_HOSTNAME_MAX 255
#define MCR_DEFAULT_PORT 11211
#define MCR_WEIGHT_MAX 1000000u

/* mcr_config_new: a config with no servers, mode "ketama", the key hash of
 * that mode (md5, see mcr_mode_default_hash) following the mode until set,
 * and the point hash following the key hash. Returns NULL only when out of
 * memory. Free with mcr_config_free(). */
MCR_EXTERN mcr_config *mcr_config_new(void);

/* mcr_config_free: release `cfg` and everything it owns. NULL is a no-op.
 * Rings built from it stay valid: they own copies of what they need. */
MCR_EXTERN void mcr_config_free(mcr_config *cfg);

/* mcr_config_set_mode: choose the placement mode. Until mcr_config_set_hash()
 * is called on `cfg`, this also sets the key hash to the mode's,
 * mcr_mode_default_hash(mode) (and the point hash, unless it was set).
 * MCR_OK, or MCR_ERR_INVALID for NULL or an unknown mode, and for a change
 * into or out of "mcrouter-wch3" once servers are listed (its weights are
 * millionths: the servers' weights would change meaning; set the mode
 * first). */
MCR_EXTERN int mcr_config_set_mode(mcr_config *cfg, mcr_mode mode);

/* mcr_config_set_hash: the key hash (what a key is hashed with before the
 * continuum lookup or the modulo), kept from then on whatever mode is set
 * before or after. MCR_OK or MCR_ERR_INVALID. */
MCR_EXTERN int mcr_config_set_hash(mcr_config *cfg, mcr_hash hash);

/* mcr_config_set_client: place keys as another client does (mcr_client(3)):
 * set the mode and key hash that reproduce client `name` (case-insensitive;
 * mcr_client_name() lists them), and the client's own rules: a client
 * without weights ("pymemcache", "spymemcached-arraymod", "gomemcache",
 * "memjs") makes mcr_ring_new() and mcr_snapshot_new() refuse a server of
 * weight other than 1 (MCR_ERR_RANGE, naming it); "pylibmc-ketama" is the
 * "consistent" mode while every weight is 1 and libmemcached's weighted
 * continuum (MD5 points, keys one-at-a-time) as soon as one is not, chosen
 * when the ring or snapshot is built. Servers are placed in list order,
 * as the client is given them. A later mcr_config_set_mode() or
 * mcr_config_set_hash() ends the client's setting (the config then has no
 * client). A snapshot records the mode and hashes, not the client: changes
 * applied to it are not checked against the client's rules.
 * MCR_OK; MCR_ERR_UNKNOWN for a name that is no client; MCR_ERR_INVALID for
 * NULL, and for a change into or out of "mcrouter-wch3" once servers are
 * listed (see mcr_config_set_mode). `err` may be NULL. Not thread-safe on
 * one config. */
MCR_EXTERN int mcr_config_set_client(mcr_config *cfg, const char *name, mcr_error *err);

/* mcr_config_client: the name of the client set on cfg (a static string),
 * or NULL when none is. Thread-safe with other readers. */
MCR_EXTERN const char *mcr_config_client(const mcr_config *cfg);

/* mcr_client_name, mcr_client_summary: the name of client i (0, 1, ...) and
 * a one-line summary of what it reproduces (the client, its version and
 * configuration), static strings; NULL once i is past the last client.
 * Thread-safe. */
MCR_EXTERN const char *mcr_client_name(size_t i);
MCR_EXTERN const char *mcr_client_summary(size_t i);

/* mcr_config_set_point_hash: the hash applied to labels in the "consistent"
 * and "spy" modes. By default it follows the key hash; after this call it is
 * fixed to `hash`. libmemcached hashes labels with the key hash in force when
 * its continuum was last rebuilt, which can differ from the current key hash;
 * this setting reproduces that. The weighted and ketama modes always use MD5
 * for points and ignore it. MCR_OK or MCR_ERR_INVALID. */
MCR_EXTERN int mcr_config_set_point_hash(mcr_config *cfg, mcr_hash hash);

/* mcr_config_set_key_prefix: hash `len` bytes at `prefix` in front of every
 * key, with the rules of libmemcached's NAMESPACE + HASH_WITH_NAMESPACE: a
 * prefixed key longer than 250 bytes hashes to 0 instead of being hashed, and
 * key bytes after a NUL byte are hashed as NUL (libmemcached copies them with
 * strncpy). A non-NULL prefix of length 0 applies those rules with nothing
 * prepended; a NULL prefix (len 0) turns prefixing off, the default. The
 * bytes are copied. MCR_OK, or MCR_ERR_INVALID (NULL cfg, NULL prefix with
 * len > 0, len > 255). */
MCR_EXTERN int mcr_config_set_key_prefix(mcr_config *cfg, const void *prefix,
                                         size_t len);

/* mcr_config_set_table_size: the size M of the "maglev" lookup table, a
 * prime in 2..MCR_MAGLEV_SIZE_MAX, or 0 (the default) for the smallest prime
 * >= max(65537, 200 x servers) at the time the ring or first snapshot is
 * built (twice the minimum: room for the servers to double). A snapshot keeps its M through every mcr_snapshot_apply(). When
 * the ring or a snapshot is built, M must be at least 100 times the number
 * of active servers, and at most max(MCR_MAGLEV_SIZE_FREE,
 * MCR_MAGLEV_SIZE_PER_N2 x N^2) for the N servers listed (else
 * MCR_ERR_RANGE). Other modes ignore it. MCR_OK,
 * or (the config unchanged) MCR_ERR_INVALID for a NULL cfg, MCR_ERR_RANGE
 * for a size that is not such a prime. */
MCR_EXTERN int mcr_config_set_table_size(mcr_config *cfg, uint32_t size);

/* mcr_config_set_slot_count: the number of slots of "slots" mode,
 * 1..MCR_SLOTS_MAX; MCR_SLOTS_DEFAULT (Redis Cluster's 16384) until set.
 * Other modes ignore it. MCR_OK, or (the config unchanged) MCR_ERR_INVALID
 * for a NULL cfg, MCR_ERR_RANGE for a count out of range. */
MCR_EXTERN int mcr_config_set_slot_count(mcr_config *cfg, uint32_t count);

/* mcr_config_add_server: append a server. `host` is a hostname, an IPv4
 * address or a bare IPv6 address (no brackets), 1..255 bytes, none of them a
 * space, control byte, DEL, ',', '[', ']', '#' or '/'; `port` 1..65535;
 * `weight` 1..MCR_WEIGHT_MAX (in a config of mode "mcrouter-wch3", the
 * weight in millionths, 0..MCR_WCH3_WEIGHT_ONE: 0 is taken and a weight
 * above 1.0 is refused when a ring or snapshot is built). The host
 * is copied. Errors (the config is unchanged): MCR_ERR_INVALID (NULL),
 * MCR_ERR_SYNTAX (empty host, forbidden byte), MCR_ERR_TOO_LONG,
 * MCR_ERR_RANGE (port, weight), MCR_ERR_DUPLICATE (same host and port
 * already present, compared byte for byte), MCR_ERR_NOMEM. */
MCR_EXTERN int mcr_config_add_server(mcr_config *cfg, const char *host,
                                     int port, uint32_t weight, mcr_error *err);

/* mcr_config_add_server_named: mcr_config_add_server() with a label: the
 * text the "ketama", "stable-ketama" and "twemproxy-ketama" modes hash with
 * "-i" to place the server's points instead of its address (libketama's
 * address as written in its file, a twemproxy server's name). The label is
 * also the server's id in a snapshot (see mcr_config_add_server_desc). NULL
 * means none. 1..255 bytes, no control byte (as ids); copied. Unlike
 * mcr_config_add_server_desc(), labels are not checked for uniqueness here
 * (mcr_snapshot_new() does). Errors as mcr_config_add_server(), and
 * MCR_ERR_SYNTAX / MCR_ERR_TOO_LONG for the label. */
MCR_EXTERN int mcr_config_add_server_named(mcr_config *cfg, const char *host, int port,
                                           uint32_t weight, const char *label,
                                           mcr_error *err);

/* Server state in a snapshot (<mcroute_snapshot.h>). Only ACTIVE servers
 * own points and receive keys; a DRAINING server (being emptied: a pool
 * finishes its in-flight requests) and a DOWN one stay listed, with their
 * id, weight and zone, and own no key. */
typedef enum mcr_server_state {
    MCR_STATE_ACTIVE = 0,   /* owns points, receives keys */
    MCR_STATE_DRAINING = 1, /* listed, owns no keys */
    MCR_STATE_DOWN = 2      /* listed, owns no keys */
} mcr_server_state;

/* Description of one server: given to mcr_config_add_server_desc() and
 * mcr_changes_add(), read back from a snapshot with mcr_snapshot_server().
 * Strings are NUL-terminated. Given to a function, they are copied; read
 * back, they belong to the snapshot and live as long as it does.
 *
 *   id     The server's stable identity: how changes, diffs and hooks name
 *          it, and, in the native modes ("ketama", "stable-ketama", and
 *          "jump" onwards), what its points, permutation or score hash (so a
 *          named server moved to another address moves no key). NULL: "host:port" ("[v6]:port" for IPv6). Given:
 *          1..255 bytes, none of them a control byte (below 0x20, or 0x7f).
 *          In "twemproxy-ketama" an id given is the server's twemproxy name.
 *   zone   A failure domain (rack, availability zone) for replica
 *          placement. NULL or "": none. Same byte rules as the id.
 *   state  See mcr_server_state.
 *   id_is_default
 *          Read back: 1 when the server was given no id, so that `id` is its
 *          default "host:port"; 0 when its id was given. Given to a function:
 *          1 means "no id of its own", as id NULL does (`id` may then be NULL
 *          or must equal the default of host and port, else MCR_ERR_INVALID).
 *          This is what makes a description read back and given again the
 *          same server: in "twemproxy-ketama" a given id is a name, which
 *          places points differently from the default. 0 (a zeroed or
 *          designated initializer): `id` as above. */
typedef struct mcr_server_desc {
    const char *id;
    const char *host;
    int port;
    uint32_t weight;
    const char *zone;
    mcr_server_state state;
    int id_is_default;
    uint64_t reserved[4]; /* zero; room for later fields (mcroute.h) */
} mcr_server_desc;

/* mcr_config_add_server_desc: append the server `d` describes: host, port
 * and weight as mcr_config_add_server(), an id (the label of
 * mcr_config_add_server_named(); NULL for the default "host:port") and a
 * zone. A config describes servers that take keys: `d->state` must be
 * MCR_STATE_ACTIVE (states change through mcr_changes_set_state()).
 * Everything is copied. Errors (the config is unchanged): those of
 * mcr_config_add_server(); MCR_ERR_INVALID (NULL `cfg` or `d`, a state
 * other than ACTIVE, id_is_default with an id that is not the default);
 * MCR_ERR_SYNTAX / MCR_ERR_TOO_LONG (id or zone empty,
 * over 255 bytes, or with a control byte); MCR_ERR_DUPLICATE (the id, given
 * or default, is the id of a server already in the config). */
MCR_EXTERN int mcr_config_add_server_desc(mcr_config *cfg, const mcr_server_desc *d,
                                          mcr_error *err);

/* mcr_config_set_hash_tag: twemproxy's hash_tag: with the two bytes
 * "{}" (any two), only the part of a key between the first '{' and the next
 * '}' after it is hashed, when both exist and that part is not empty;
 * otherwise the whole key. NULL or "" removes it. MCR_OK, or MCR_ERR_INVALID
 * for a NULL cfg or a tag that is not exactly two bytes. */
MCR_EXTERN int mcr_config_set_hash_tag(mcr_config *cfg, const char *tag);

/* mcr_config_add_servers: append every server of a comma-separated list of
 * `host[:port[:weight]]` items, `[v6addr]` or `[v6addr]:port[:weight]` for
 * IPv6; default port 11211 and weight 1. In a config of mode
 * "mcrouter-wch3" a weight is written as mcrouter writes it, a decimal in
 * [0, 1] with at most 6 digits after the point ("0.5"), kept in millionths,
 * and a server without one weighs 0.5 (MCR_WCH3_WEIGHT_DEFAULT); elsewhere
 * a decimal weight is refused (MCR_ERR_SYNTAX, saying whose it is). Spaces
 * around items are ignored.
 * All or nothing: on any error no server of the list is added, and the
 * message names the item. Errors: MCR_ERR_EMPTY (an empty list),
 * MCR_ERR_SYNTAX (an empty item, a malformed item or number, an IPv6 address
 * without brackets), MCR_ERR_RANGE, and those of mcr_config_add_server(). */
MCR_EXTERN int mcr_config_add_servers(mcr_config *cfg, const char *list,
                                      mcr_error *err);

/* mcr_config_load_server_file: append the servers of a file with one
 * server a line, either `host[:port[:weight]]` (same syntax as one item of
 * mcr_config_add_servers) or that item followed by blank-separated
 * attributes:
 *
 *     host[:port] [weight=W] [zone=Z] [id=NAME]
 *
 * in any order, each at most once (and `weight=` not with a
 * `host:port:weight` item). Blank lines and lines whose first non-blank byte
 * is '#' are skipped, as is anything after a '#'. The zone and id follow
 * the rules of mcr_config_add_server_desc(); ids must be unique among the
 * config's servers. All or nothing, like mcr_config_add_servers; messages
 * name the file, the line and the problem: MCR_ERR_SYNTAX (malformed item,
 * unknown attribute, attribute given twice, empty or malformed value),
 * MCR_ERR_RANGE (port, weight), MCR_ERR_DUPLICATE (address or id). A file
 * with no server is MCR_ERR_EMPTY; an unreadable one MCR_ERR_IO. */
MCR_EXTERN int mcr_config_load_server_file(mcr_config *cfg, const char *path,
                                           mcr_error *err);

/* mcr_config_add_server_line: append the one server of `line`, a line of a
 * server file as mcr_config_load_server_file() reads it (same grammar, same
 * rules and messages, "server line" naming it): `host[:port[:weight]]`,
 * then `weight=W`, `zone=Z`, `id=NAME` attributes; anything after a '#' is
 * a comment. For tools that take one server on their command line. Errors
 * (the config is unchanged): MCR_ERR_INVALID (NULL `cfg` or `line`),
 * MCR_ERR_EMPTY (blank or only a comment), MCR_ERR_SYNTAX (also a line
 * with a newline), MCR_ERR_RANGE, MCR_ERR_TOO_LONG, MCR_ERR_DUPLICATE (the
 * address or id of a server already in the config), MCR_ERR_NOMEM. A config
 * belongs to one thread at a time. */
MCR_EXTERN int mcr_config_add_server_line(mcr_config *cfg, const char *line, mcr_error *err);

/* mcr_config_sort_servers: reorder the servers as libmemcached's SORT_HOSTS
 * does: by strcmp() of the host, then by port. MCR_OK or MCR_ERR_INVALID. */
MCR_EXTERN int mcr_config_sort_servers(mcr_config *cfg);

/* mcr_config_server_count: number of servers added so far (0 for NULL). */
MCR_EXTERN size_t mcr_config_server_count(const mcr_config *cfg);

/* ==================================================================== */
/*  Ring                                                                 */
/* ==================================================================== */

typedef struct mcr_ring mcr_ring;

/* mcr_ring_new: build the continuum described by `cfg` into a new ring.
 * `cfg` is only read and may be freed or changed afterwards. Any number of
 * servers (10,000 and more); lookups stay O(1) expected, O(log points) at
 * worst. Errors (*out unchanged): MCR_ERR_INVALID (NULL), MCR_ERR_EMPTY
 * (no servers), MCR_ERR_RANGE (more than 2^31 servers or 2^32 points; in
 * "stable-ketama", a weight above MCR_STABLE_WEIGHT_MAX), MCR_ERR_NOMEM. */
MCR_EXTERN int mcr_ring_new(const mcr_config *cfg, mcr_ring **out,
                            mcr_error *err);

/* mcr_ring_free: release a ring. NULL is a no-op. No thread may use the ring
 * during or after this call. */
MCR_EXTERN void mcr_ring_free(mcr_ring *ring);

/* mcr_ring_hash: the key hash of the ring (key prefix included) of `len`
 * bytes at `key`; in "slots" mode its CRC-16/XMODEM. Thread-safe, cannot
 * fail. */
MCR_EXTERN uint32_t mcr_ring_hash(const mcr_ring *ring, const void *key,
                                  size_t len);

/* mcr_ring_find: the index (0-based, config order) of the server owning hash
 * value `hash`: the first point whose value is >= hash, wrapping past the
 * last point; ties go to the earlier server. In "modula" mode,
 * hash % server count; in the native table modes, by their rule (see
 * mcr_mode): "slots" takes the key's CRC-16 as `hash`. Thread-safe, cannot
 * fail. */
MCR_EXTERN uint32_t mcr_ring_find(const mcr_ring *ring, uint32_t hash);

/* mcr_ring_find_point: the index (0 .. mcr_ring_point_count() - 1, as
 * mcr_ring_point() numbers them) of the point owning hash value `hash`, by the
 * rule of mcr_ring_find(): what libketama's ketama_get_server() returns.
 * MCR_NO_POINT for the modes without points (modula, jump, rendezvous, maglev,
 * slots). `ring` must not be NULL (a lookup: nothing is checked).
 * Thread-safe, cannot fail. */
MCR_EXTERN size_t mcr_ring_find_point(const mcr_ring *ring, uint32_t hash);

/* mcr_ring_locate: the index of the server owning `key`, exactly as the
 * reference of the ring's mode picks it (with one server: 0, without
 * hashing, as libmemcached). Thread-safe, cannot fail. */
MCR_EXTERN uint32_t mcr_ring_locate(const mcr_ring *ring, const void *key,
                                    size_t len);

/* mcr_ring_locate_many: mcr_ring_locate() for `n` keys at once, writing
 * out[i] for keys[i] / lens[i]. Same results; faster per key, because the
 * hashing of several keys is interleaved. Thread-safe, cannot fail. */
MCR_EXTERN void mcr_ring_locate_many(const mcr_ring *ring,
                                     const void *const *keys,
                                     const size_t *lens, size_t n,
                                     uint32_t *out);

/* mcr_ring_server_count: number of servers in the ring. */
MCR_EXTERN size_t mcr_ring_server_count(const mcr_ring *ring);

/* mcr_ring_point_count: number of points of the continuum (0 in the modes
 * without one: modula, jump, rendezvous, maglev, slots). */
MCR_EXTERN size_t mcr_ring_point_count(const mcr_ring *ring);

/* mcr_ring_point: point `i` (ascending by value, ties by server order) into
 * *value and *server (either may be NULL). MCR_OK, or MCR_ERR_INVALID when
 * `i` is out of range. */
MCR_EXTERN int mcr_ring_point(const mcr_ring *ring, size_t i, uint32_t *value,
                              uint32_t *server);

/* mcr_ring_wide_point_count, mcr_ring_wide_point: the 64-bit continuum of
 * "envoy-ring-hash" (whose mcr_ring_point_count() is 0): the number of its
 * points (0 in the other modes and for NULL), and point `i` (ascending by
 * value, ties by server order; a key goes to the first point at or above
 * XXH64(key), wrapping) into *value and *server (either may be NULL).
 * MCR_OK, or MCR_ERR_INVALID when `i` is out of range. Thread-safe. */
MCR_EXTERN size_t mcr_ring_wide_point_count(const mcr_ring *ring);
MCR_EXTERN int mcr_ring_wide_point(const mcr_ring *ring, size_t i, uint64_t *value,
                                   uint32_t *server);

/* mcr_ring_server_name: "host:port" of server `i` as configured, with
 * brackets for IPv6 ("[::1]:11211"); a string owned by the ring, or NULL if
 * `i` is out of range. */
MCR_EXTERN const char *mcr_ring_server_name(const mcr_ring *ring, size_t i);

/* mcr_ring_server_host / _port / _weight: the parts of server `i` (host
 * without brackets, owned by the ring). NULL / 0 if `i` is out of range. */
MCR_EXTERN const char *mcr_ring_server_host(const mcr_ring *ring, size_t i);
MCR_EXTERN int mcr_ring_server_port(const mcr_ring *ring, size_t i);
MCR_EXTERN uint32_t mcr_ring_server_weight(const mcr_ring *ring, size_t i);

/* mcr_ring_mode / mcr_ring_key_hash: what the ring was built with. */
MCR_EXTERN mcr_mode mcr_ring_mode(const mcr_ring *ring);
MCR_EXTERN mcr_hash mcr_ring_key_hash(const mcr_ring *ring);

#ifdef __cplusplus
}
#endif

#endif /* MCROUTE_H */
