/* SPDX-License-Identifier: BSD-3-Clause */
/* ring_internal.h: the ring's layout and the operations of each family of
 * modes. ring.c holds what every ring shares (servers, key hashing, the
 * dispatch, walks, inspection); each family's file holds how its modes
 * build, find and walk: ring_points.c (the continuum modes), ring_modula.c,
 * ring_jump.c (jump, and the proxies' memcached-proxy-jump and
 * mcrouter-ch3), ring_table.c (maglev, slots, envoy-maglev), ring_wide.c
 * (envoy-ring-hash's 64-bit continuum), ring_scores.c (rendezvous,
 * pymemcache). Private to lib/placement/. */
#ifndef MCR_RING_INTERNAL_H
#define MCR_RING_INTERNAL_H

#include "placement_internal.h"
#include "ringsearch.h"

/* The points array ends with this many sentinels (see ringsearch.h). */
#define MCR__SCAN_WIDTH MCR__RING_PAD
/* The walks of "jump" and "slots" (replicas, bounded loads): new keys, or
 * probed slots, tried per active server before the sweep takes over, and
 * at most this many in all. */
#define MCR__WALK_PER_SERVER 4
#define MCR__WALK_MAX 1024
/* php-memcache (memcache_consistent_hash.c): MMC_CONSISTENT_BUCKETS, and the
 * position of bucket b, b x (0xffffffff / 1024). */
#define MCR__PHP_BUCKETS 1024u
#define MCR__PHP_BUCKET_STEP (0xffffffffu / MCR__PHP_BUCKETS)

/* Which point of a continuum owns a key hash h (see mcr_mode(3)). */
typedef enum mcr__rule {
    MCR__RULE_SUCC,      /* the first point >= h, wrapping; of equal points
                            the first (libmemcached, libketama, twemproxy) */
    MCR__RULE_SUCC_LAST, /* the same, but of equal points the last
                            (spymemcached's TreeMap: a later put overwrites) */
    MCR__RULE_PRED,      /* the last point <= h, wrapping to the last (dalli) */
    MCR__RULE_BUCKETS    /* php-memcache: bucket h % 1024, each bucket the
                            successor of an evenly spaced position */
} mcr__rule;

typedef struct mcr__ring_server {
    const char *host;   /* points into ring->strings */
    const char *name;   /* "host:port" / "[host]:port", into ring->strings */
    const char *pyname; /* "host:port" without brackets: pymemcache's node */
    size_t pylen;       /* strlen(pyname), not counted again per key */
    int port;
    uint32_t weight;
} mcr__ring_server;

typedef struct mcr__family mcr__family;

struct mcr_ring {
    mcr_mode mode;
    const mcr__family *family; /* how the mode builds, finds and walks */
    mcr_hash key_hash;
    uint32_t nservers;
    bool succ;            /* points in successor order: the inline lookup */
    size_t npoints;
    mcr__point *points;   /* ascending by value; ties in server order; then
                             MCR__SCAN_WIDTH sentinels {UINT32_MAX, owner of
                             points[0]} that make the wrap-around implicit */
    mcr__search search;   /* which point owns a hash (ringsearch.h) */
    mcr__ring_server *servers;
    char *strings;        /* hosts and names of all servers */
    bool special_hash;    /* any of the key rules below: take the slow path */
    bool empty_is_zero;   /* twemproxy: an empty key hashes to 0 */
    bool tag_on;          /* twemproxy hash_tag */
    char tag[2];
    uint64_t *cum_weight; /* twemproxy-modula: running sums of the weights */
    uint64_t total_weight;
    bool prefix_on;       /* libmemcached HASH_WITH_NAMESPACE rules apply */
    size_t prefix_len;
    unsigned char prefix[256];
    bool crc_keys;        /* "slots": keys hash with CRC-16/XMODEM */
    uint32_t *table;      /* "jump": bucket -> ring index or MCR__HOLE;
                             "maglev", "slots": entry -> ring index;
                             php-memcache: bucket -> ring index */
    uint32_t ntable;
    uint32_t njump;       /* "jump": the buckets jumped over: up to the last
                             that is not a hole (trailing holes would only
                             send keys elsewhere that had their place) */
    uint32_t *live;       /* "jump": the buckets that are not holes */
    uint32_t nlive;
    uint64_t *seeds;      /* "rendezvous": per server, mcr__id_seed(id) */
    mcr__rule rule;
    uint32_t *bucket_point; /* MCR__RULE_BUCKETS: bucket -> point index */
    uint64_t *wide;       /* "envoy-ring-hash": the 64-bit points, ascending,
                             apart from `points` so that the 32-bit
                             continua keep their layout and their speed */
    uint32_t *wide_server;/* the server of each of them */
    size_t nwide;
    uint32_t *accept;     /* "mcrouter-wch3": per server, the SpookyHash
                             values below which a try is accepted */
};

/* The find of the families whose key itself places it, not a 32-bit hash
 * (the proxies' modes: .locate): MCR_NO_SERVER, whatever the hash. */
uint32_t mcr__find_no_server(const mcr_ring *r, uint32_t hash);

/* What a family of modes does; one const table per family. ring.c calls
 * these after the parts every ring has (servers, key rules) are set. */
struct mcr__family {
    const char *name;
    /* Build the family's structure for cfg's servers (mcr_ring_new). MCR_OK
     * or an error in err; the caller frees r either way. */
    int (*build)(mcr_ring *r, const mcr_config *cfg, mcr_error *err);
    /* The same from a snapshot's parts (mcr__ring_build): `points`
     * (continuum families) or `map` ("jump", "slots") is taken over, and
     * freed on failure; the others are NULL. */
    int (*adopt)(mcr_ring *r, const mcr__params *p, const mcr__server *servers,
                 mcr__point *points, size_t npoints, uint32_t *map, size_t nmap,
                 mcr_error *err);
    /* The server of a key hash. Continuum rings in successor order with
     * points never get here: ring.c looks them up inline. */
    uint32_t (*find)(const mcr_ring *r, uint32_t hash);
    /* The server of a key, for a family that places the key rather than its
     * hash (pymemcache); NULL otherwise. */
    uint32_t (*locate)(const mcr_ring *r, const void *key, size_t len);
    /* Start a walk: w->r, w->hash and w->primary are set; set w->own (the
     * length of the family's own sequence, the primary included), w->sweep
     * and the family's state. Cannot fail. */
    void (*walk_init)(mcr__walk *w, const void *key, size_t len);
    /* Candidate s of the family's own sequence, 1 <= s < w->own. */
    uint32_t (*walk_step)(mcr__walk *w, size_t s);
    /* How the key space falls to servers, for the diffs. */
    mcr__shape (*shape)(const mcr_ring *r);
    /* The families whose snapshots keep a map ("jump", "slots"): the map of
     * n servers with these weights that a new placement starts from (see
     * mcr__default_map); NULL in the others. */
    int (*default_map)(const mcr__params *p, const uint32_t *weight, size_t n, uint32_t **map,
                       size_t *nmap, mcr_error *err);
};

extern const mcr__family mcr__family_points;
extern const mcr__family mcr__family_modula;
extern const mcr__family mcr__family_wmodula;
extern const mcr__family mcr__family_jump;
extern const mcr__family mcr__family_keyjump;
extern const mcr__family mcr__family_maglev;
extern const mcr__family mcr__family_envoy_maglev;
extern const mcr__family mcr__family_envoy_ring;
extern const mcr__family mcr__family_slots;
extern const mcr__family mcr__family_rendezvous;
extern const mcr__family mcr__family_pymemcache;

/* The hosts of an Envoy placement as Envoy hashes them: each server's
 * address text, its length and its weight, in server order. */
typedef struct mcr__envoy_hosts {
    const char **name; /* the servers' own strings, not copies */
    size_t *len;
    uint32_t *weight;
} mcr__envoy_hosts;

/* r's hosts into *h (free with mcr__envoy_hosts_clear()): MCR_OK,
 * MCR_ERR_RANGE when the weights sum above Envoy's limit (UINT32_MAX), or
 * MCR_ERR_NOMEM, each named in err (ring_table.c). */
int mcr__envoy_hosts_of(const mcr_ring *r, mcr__envoy_hosts *h, mcr_error *err);
void mcr__envoy_hosts_clear(mcr__envoy_hosts *h);

/* The family of a mode (a valid one). */
const mcr__family *mcr__mode_family(mcr_mode m);

/* A ring with cfg's or the given servers and key rules and no structure
 * yet (ring.c); the family fills the rest, then mcr__ring_finish. */
int mcr__ring_alloc(const mcr__params *p, const mcr__server *servers, size_t n, mcr_ring **out,
                    mcr_error *err);
int mcr__ring_alloc_cfg(const mcr_config *cfg, mcr_ring **out, mcr_error *err);
/* A map family's build: its default map for cfg's servers, adopted. */
int mcr__ring_build_map(mcr_ring *r, const mcr_config *cfg, mcr_error *err);
/* What lookups read once the family has built r: the fast paths' flags. */
void mcr__ring_finish(mcr_ring *r);

/* The first point >= h, or npoints (ring_points.c). */
static inline uint32_t mcr__ring_succ_index(const mcr_ring *r, uint32_t h)
{
    return mcr__search_index(&r->search, r->points, h);
}

/* The walks' candidate count for families that generate candidates (jump
 * keys, slot probes): a few per server, bounded. */
static inline size_t mcr__walk_budget(const mcr_ring *r)
{
    size_t n = (size_t)r->nservers * MCR__WALK_PER_SERVER;
    return n > MCR__WALK_MAX ? MCR__WALK_MAX : n;
}

#endif /* MCR_RING_INTERNAL_H */
