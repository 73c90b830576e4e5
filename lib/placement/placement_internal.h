/* SPDX-License-Identifier: BSD-3-Clause */
/* placement_internal.h: configs, clients, modes, tables and rings (never installed), above hash/. */
#ifndef MCR_PLACEMENT_INTERNAL_H
#define MCR_PLACEMENT_INTERNAL_H

#include "hash/hash_internal.h"

/* ---- config (config.c) ---- */

typedef struct mcr__server {
    char *host;      /* as given, without brackets; NUL-terminated */
    size_t host_len;
    int port;
    uint32_t weight;
    bool ipv6;       /* host contains ':', written with brackets in names */
    char *label;     /* ketama label base (libketama address, twemproxy
                        name), or NULL for the mode's default; also the
                        server's id in a snapshot (NULL: "host:port") */
    char *zone;      /* failure domain for replicas, or NULL */
} mcr__server;

struct mcr_config {
    mcr__server *servers;
    size_t count;
    size_t cap;
    mcr__slotset hosts;       /* (host, port) -> index: O(1) duplicate check
                                 for 10,000+ servers */
    mcr__slotset ids;         /* id (label, else "host:port") -> index, for
                                 add_server_desc; same capacity as hosts */
    mcr_mode mode;
    mcr_hash key_hash;
    mcr_hash point_hash;
    bool key_hash_set;        /* false: key hash follows the mode
                                 (mcr_mode_default_hash) */
    bool point_hash_set;      /* false: point hash follows the key hash */
    bool tag_on;              /* twemproxy hash_tag in force */
    char tag[2];              /* its opening and closing bytes */
    bool prefix_on;           /* libmemcached HASH_WITH_NAMESPACE rules apply */
    unsigned char prefix[256];/* hashed before each key (namespace) */
    size_t prefix_len;
    uint32_t maglev_size;     /* "maglev" table size, 0: chosen at build */
    uint32_t slot_count;      /* "slots" slot count */
    int client;               /* 1 + the index of the client set by
                                 mcr_config_set_client(), 0 for none */
};

/* Everything of a placement but its servers: what a ring and a snapshot
 * copy from a config, and what a snapshot file records. */
typedef struct mcr__params {
    mcr_mode mode;
    mcr_hash key_hash;
    mcr_hash point_hash;      /* resolved: the key hash unless set apart */
    bool tag_on;
    char tag[2];
    bool prefix_on;
    size_t prefix_len;
    unsigned char prefix[256];
    uint32_t table_size;      /* "maglev": M, resolved; "slots": the slot
                                 count; 0 in every other mode */
} mcr__params;

/* A new config with every parameter of `src` (mode, hashes, hash tag, key
 * prefix, table sizes) and no servers; NULL when out of memory. */
mcr_config *mcr__config_copy_params(const mcr_config *src);

/* Append a copy of server `s` of another config, everything it has (host,
 * port, weight, label, zone), without checks: it was valid there. MCR_OK
 * or MCR_ERR_NOMEM. */
int mcr__config_copy_server(mcr_config *cfg, const mcr__server *s, mcr_error *err);

/* The parameters of cfg. Cannot fail. */
void mcr__config_params(const mcr_config *cfg, mcr__params *out);
/* Whether two placements' parameters are the same. */
bool mcr__params_equal(const mcr__params *a, const mcr__params *b);

/* ---- clients (client.c) ---- */

/* MCR_OK, or MCR_ERR_RANGE naming the server when cfg's client has no
 * weights and a server's weight is not 1. */
int mcr__config_check_client(const mcr_config *cfg, mcr_error *err);
/* Adjust the parameters of a config with a client where the client's
 * placement depends on the servers (pylibmc-ketama). */
void mcr__client_params(const mcr_config *cfg, mcr__params *p);

/* Room for an id, a label prefix ("[host]:65535-"), a label with its
 * index: 255 bytes of text and a little more. */
#define MCR__NAME_BUF (MCR_HOSTNAME_MAX + 128)

/* The default id of a server, "host:port" or "[host]:port" for IPv6, into
 * buf (MCR__NAME_BUF bytes); returns its length. */
size_t mcr__default_id(const char *host, int port, char *buf);

/* The id given by description d: d->id, or NULL when d has none of its own
 * (id NULL, or id_is_default, when d->id must then be NULL or the default
 * id of d->host and d->port: else MCR_ERR_INVALID). d->host not NULL. */
int mcr__desc_id(const mcr_server_desc *d, const char **id, mcr_error *err);

/* The id of config server s: its label, else the default id written into
 * buf (MCR__NAME_BUF bytes). */
const char *mcr__server_id(const mcr__server *s, char *buf);

/* Check an id or a zone (`what` names it in messages): 1..255 bytes, no
 * byte below 0x20, no 0x7f. MCR_OK, MCR_ERR_SYNTAX or MCR_ERR_TOO_LONG. */
int mcr__check_name(const char *what, const char *s, mcr_error *err);

/* Parse one `host[:port[:weight]]` / `[v6]:port:weight` item of `len` bytes
 * (already trimmed). On success fills host (pointer into item, not
 * NUL-terminated), host_len, port, weight, the weight read as mode `mode`
 * writes it (parse_weight in config.c: millionths written as a decimal in
 * "mcrouter-wch3"). `what` names the item's origin in messages ("server
 * list", "file x line 3"). */
int mcr__parse_server_item(const char *item, size_t len, mcr_mode mode, const char **host,
                           size_t *host_len, int *port, uint32_t *weight,
                           const char *what, mcr_error *err);

/* Validate a host of `len` bytes (not NUL-terminated) as add_server does. */
int mcr__check_host(const char *host, size_t len, mcr_error *err);

/* ---- modes ---- */

/* How the key space falls to a ring's servers: how a diff reads it. */
typedef enum mcr__shape {
    MCR__SHAPE_CONTINUUM, /* arcs between points (mcr__ring_points) */
    MCR__SHAPE_RESIDUES,  /* hash % period: mcr__ring_table's entries, or
                             server b owns mcr__ring_residues(r, b) in turn */
    MCR__SHAPE_SLOTS,     /* "slots": CRC-16 of the key % the table */
    MCR__SHAPE_JUMP,      /* "jump": buckets of jump hashing, some holes */
    MCR__SHAPE_SCORES,    /* the best score of every server's */
    MCR__SHAPE_WIDE       /* "envoy-ring-hash": arcs of a 64-bit continuum
                             (mcr__ring_wide) */
} mcr__shape;

/* 1 when mode m places keys on a continuum of points (the continuum modes
 * and "bounded"); a valid mode. */
int mcr__mode_has_points(mcr_mode m);

/* The modes whose snapshots carry a map of their own (history, not a
 * function of the servers): "jump" (bucket -> server) and "slots" (slot ->
 * server). */
static inline bool mcr__mode_has_map(mcr_mode m)
{
    return m == MCR_MODE_JUMP || m == MCR_MODE_SLOTS;
}

/* The largest weight a mode accepts: the modes whose structure grows with
 * weight (points or buckets) stop at MCR_STABLE_WEIGHT_MAX. */
static inline uint32_t mcr__weight_max(mcr_mode m)
{
    if (m == MCR_MODE_MCROUTER_WCH3)
        return MCR_WCH3_WEIGHT_ONE; /* 1.0 */
    return m == MCR_MODE_STABLE_KETAMA || m == MCR_MODE_BOUNDED || m == MCR_MODE_JUMP
               ? MCR_STABLE_WEIGHT_MAX
               : MCR_WEIGHT_MAX;
}

/* The smallest weight a mode accepts: 0 in "mcrouter-wch3" (a weight
 * of 0.0, which mcrouter takes), 1 elsewhere. */
static inline uint32_t mcr__weight_min(mcr_mode m)
{
    return m == MCR_MODE_MCROUTER_WCH3 ? 0 : 1;
}

/* MCR_OK when cfg may change to mode `to`, else MCR_ERR_INVALID saying why
 * (the servers' weights would change meaning: see mcr_config_set_mode). */
int mcr__config_check_mode_change(const mcr_config *cfg, mcr_mode to, mcr_error *err);

/* ---- native table modes (placement.c) ---- */

/* No server: a jump bucket or a slot whose server is not active. */
#define MCR__HOLE UINT32_MAX
/* "maglev": the table is at least this many times the active servers
 * (Eisenbud et al. keep M > 100 N for shares within 1%). Chosen
 * automatically it is at least the paper's 65537 entries and twice that
 * minimum, so that the servers can double before the table is too small. */
#define MCR__MAGLEV_MIN_FACTOR 100u
#define MCR__MAGLEV_AUTO_FACTOR 200u
#define MCR__MAGLEV_DEFAULT_SIZE 65537u
/* "jump": at most this many buckets (a table of 64 MiB). */
#define MCR__JUMP_BUCKETS_MAX (1u << 24)

/* The first output of SplitMix64 seeded with x (a bijection). */
uint64_t mcr__mix64(uint64_t x);
/* The first 8 bytes, little-endian, of MD5(id): a server's seed. */
uint64_t mcr__id_seed(const char *id, size_t len);
/* CRC-16/XMODEM of len bytes. */
uint16_t mcr__crc16(const void *data, size_t len);
/* Jump consistent hash of key into [0, nbuckets) (nbuckets >= 1). */
uint32_t mcr__jump(uint64_t key, uint32_t nbuckets);
int mcr__is_prime(uint32_t n);

/* ---- mcrouter (mcrouter.c) ---- */

/* furc_hash takes at most this many servers (2^23). */
#define MCR__FURC_MAX (1u << 23)
/* mcrouter's furc_hash of len bytes into [0, m) (m <= MCR__FURC_MAX; 0 for
 * m <= 1). Cannot fail. */
uint32_t mcr__furc(const void *key, size_t len, uint32_t m);
/* The routing key of a key (into it): a leading "/region/cluster/"
 * dropped, the rest cut before its first "|#|". Cannot fail. */
void mcr__mcrouter_routing_key(const void *key, size_t len, const void **rk, size_t *rklen);

/* SpookyHash V2 (spooky.c): Hash128 of len bytes with the seeds in *h1,
 * *h2, the result written back; and Hash32, the low 32 bits of Hash128
 * with both seeds `seed`. The _parts form hashes head then tail as one
 * message (tail at most MCR__SPOOKY_TAIL_MAX bytes), without a copy of the
 * head. Cannot fail. */
#define MCR__SPOOKY_TAIL_MAX 32
void mcr__spooky128(const void *data, size_t len, uint64_t *h1, uint64_t *h2);
void mcr__spooky128_parts(const void *head, size_t hlen, const void *tail, size_t tlen,
                          uint64_t *h1, uint64_t *h2);
uint32_t mcr__spooky32(const void *data, size_t len, uint32_t seed);

/* "mcrouter-wch3" (mcrouter.c): the index of a key among n servers (1 <= n
 * <= MCR__FURC_MAX) whose acceptance thresholds are accept[i] (weight x
 * 4294967295, truncated), as WeightedCh3HashFunc tries it. Cannot fail. */
uint32_t mcr__wch3(const void *key, size_t len, const uint32_t *accept, uint32_t n);
/* The threshold of a weight in millionths (0..MCR_WCH3_WEIGHT_ONE). */
uint32_t mcr__wch3_accept(uint32_t millionths);

/* ---- Envoy (ring_table.c, ring_wide.c) ---- */

/* Envoy's MaglevTable::DefaultTableSize, and RingHash's default
 * minimum_ring_size and maximum_ring_size. */
#define MCR__ENVOY_MAGLEV_SIZE 65537u
#define MCR__ENVOY_RING_MIN 1024u
#define MCR__ENVOY_RING_MAX 8388608u
/* Envoy's MAGLEV table of `size` entries (a prime) for n hosts named
 * name[i] (len[i] bytes, Envoy's host keys) with weights weight[i] >= 1:
 * table[e] = the host's index i. MCR_OK or MCR_ERR_NOMEM. */
int mcr__envoy_maglev_fill(const char *const *name, const size_t *len, const uint32_t *weight,
                           size_t n, uint32_t size, uint32_t *table);
/* Envoy's RING_HASH ring for n hosts (as above) with minimum ring size
 * `min_size` and the default maximum: *value (ascending) and *server
 * (malloc'ed, *npoints of them). MCR_OK or MCR_ERR_NOMEM. */
int mcr__envoy_ring_points(const char *const *name, const size_t *len, const uint32_t *weight,
                           size_t n, uint64_t min_size, uint64_t **value, uint32_t **server,
                           size_t *npoints);
/* The 64-bit points of an "envoy-ring-hash" ring, ascending, with their
 * servers in *server and their count in *n; NULL and 0 for other modes. */
const uint64_t *mcr__ring_wide(const mcr_ring *r, const uint32_t **server, size_t *n);
/* The first of n ascending 64-bit points >= h, wrapping to 0. n >= 1. */
size_t mcr__envoy_ring_find(const uint64_t *value, size_t n, uint64_t h);
/* The smallest prime >= max(65537, 200 x servers), capped at
 * MCR_MAGLEV_SIZE_MAX. */
uint32_t mcr__maglev_auto_size(size_t servers);
/* The largest maglev table size for `listed` servers (see
 * MCR_MAGLEV_SIZE_FREE), and the check of a size m against it: MCR_OK, or
 * MCR_ERR_RANGE with a message saying so. */
uint32_t mcr__maglev_size_limit(size_t listed);
int mcr__maglev_check_limit(uint32_t m, size_t listed, mcr_error *err);
/* A server's Maglev permutation in a table of m entries (m >= 2). */
void mcr__maglev_perm(const char *id, size_t len, uint32_t m, uint32_t *offset, uint32_t *skip);
/* Fill table[0..m) with server numbers 0..n-1 (n >= 1), each server's
 * turns in proportion to its weight. MCR_OK or MCR_ERR_NOMEM. */
int mcr__maglev_fill(const uint32_t *offset, const uint32_t *skip, const uint32_t *weight,
                     size_t n, uint32_t m, uint32_t *table);
/* The rendezvous "time" -ln(u) / weight of a server (the lowest wins: the
 * highest score -weight / ln(u)); key is mcr__mix64(key hash). */
double mcr__rdv_time(uint64_t key, uint64_t seed, uint32_t weight);
/* Largest-remainder quotas: total split in proportion to weight[0..n),
 * the remainder to the largest fractions, ties to the lower index.
 * MCR_OK or MCR_ERR_NOMEM. */
int mcr__quotas(const uint32_t *weight, size_t n, uint32_t total, uint32_t *quota);
/* The k-th fallback probe (k >= 1) of a slot. */
uint32_t mcr__slot_probe(uint32_t slot, uint32_t k, uint32_t nslots);
/* Effective owners of nslots slots: table[s] = map[s] (a ring index) when
 * it is not a hole, else the owner of the first probe of s that is not a
 * hole, else of the next slot that is not, else mix(s) % nactive.
 * MCR_OK or MCR_ERR_NOMEM. */
int mcr__slots_resolve(uint32_t *table, const uint32_t *map, uint32_t nslots,
                       uint32_t nactive);

/* ---- ring (ring.c) ---- */

/* One point of a continuum: a value and the ring index of its server. */
typedef struct mcr__point {
    uint32_t value;
    uint32_t server;
} mcr__point;

/* A ring's point array has this many slots after its last point, for the
 * sentinels of the lookup. */
#define MCR__RING_PAD 4

/* Points-per-label of a mode that hashes labels with MD5: 4 words. */
#define MCR__POINTS_PER_DIGEST 4

/* How many labels a server of `weight` gets in `mode` among `n` servers of
 * `total_weight`, and (in *per_label) how many points each label yields;
 * 0 labels and per_label 0 for the modula modes. The references' float
 * arithmetic, bit for bit. Cannot fail. */
uint32_t mcr__labels_for(mcr_mode mode, uint32_t weight, uint64_t total_weight, uint32_t n,
                         uint32_t *per_label);

/* The label prefix (everything before the index) of server s in `mode`
 * into buf (MCR__NAME_BUF bytes); returns its length, never 0 but when the
 * name lookups of the spymemcached modes ran out of memory (EAI_MEMORY). */
size_t mcr__label_prefix(mcr_mode mode, const mcr__server *s, char *buf);

/* The point values of labels from..to-1 of a server whose label prefix is
 * prefix[0..plen) (writable, MCR__NAME_BUF bytes; restored), in label
 * order: per_label 4 gives the MD5 words, 1 the point hash of the label
 * (dalli: SHA-1; nginx-consistent: its chained CRC-32, the prefix being the
 * chain's base).
 * out receives (to - from) * per_label values. Cannot fail. */
void mcr__label_values(mcr_mode mode, char *prefix, size_t plen, uint32_t per_label,
                       mcr_hash point_hash, uint32_t from, uint32_t to, uint32_t *out);

/* The label prefix of server s in the spymemcached modes (javaname.c): its
 * address as Java writes it, resolving s->host when it is a name (the
 * default key format), or its host name, reverse-resolved when it is an IP
 * literal (libmemcached_format). Into buf (MCR__NAME_BUF bytes); returns
 * its length. Cannot fail: a name that does not resolve is written as Java
 * writes it, "NAME/<unresolved>:PORT-". */
size_t mcr__java_label_prefix(const mcr__server *s, bool libmemcached_format, char *buf);

/* Write v in decimal at p (no NUL); returns the digits written. */
size_t mcr__put_uint(char *p, uint32_t v);

/* Stable sort of n points by value (LSD radix). MCR_OK or MCR_ERR_NOMEM
 * (the points unchanged). */
int mcr__sort_points(mcr__point *p, size_t n);

/* Define `static int NAME(TYPE *p, size_t n)`: a stable sort of n TYPEs by
 * their uint32_t member `value` (insertion sort when small, else an LSD
 * radix sort on bytes, skipping a byte that all values share). Stability is
 * what gives the references' tie rule: among equal values, the element that
 * came first stays first. MCR_OK or MCR_ERR_NOMEM (p unchanged). One macro
 * for the ring's points and the snapshot builder's labelled points, which
 * differ in size. Needs <stdlib.h> and <string.h>. */
#define MCR__DEFINE_STABLE_SORT(NAME, TYPE)                                        \
    static int NAME(TYPE *p, size_t n)                                             \
    {                                                                              \
        if (n <= 64) {                                                             \
            for (size_t i = 1; i < n; i++) {                                       \
                TYPE x = p[i];                                                     \
                size_t j = i;                                                      \
                while (j > 0 && p[j - 1].value > x.value) {                        \
                    p[j] = p[j - 1];                                               \
                    j--;                                                           \
                }                                                                  \
                p[j] = x;                                                          \
            }                                                                      \
            return MCR_OK;                                                         \
        }                                                                          \
        TYPE *tmp = malloc(n * sizeof(*tmp));                                      \
        if (tmp == NULL)                                                           \
            return MCR_ERR_NOMEM;                                                  \
        TYPE *src = p, *dst = tmp;                                                 \
        for (unsigned sh = 0; sh < 32; sh += 8) {                                  \
            size_t count[256] = {0};                                               \
            for (size_t i = 0; i < n; i++)                                         \
                count[(src[i].value >> sh) & 0xff]++;                              \
            if (count[(src[0].value >> sh) & 0xff] == n)                           \
                continue;                                                          \
            size_t sum = 0;                                                        \
            for (int b = 0; b < 256; b++) {                                        \
                size_t c = count[b];                                               \
                count[b] = sum;                                                    \
                sum += c;                                                          \
            }                                                                      \
            for (size_t i = 0; i < n; i++)                                         \
                dst[count[(src[i].value >> sh) & 0xff]++] = src[i];                \
            TYPE *t = src;                                                         \
            src = dst;                                                             \
            dst = t;                                                               \
        }                                                                          \
        if (src != p)                                                              \
            memcpy(p, src, n * sizeof(*p));                                        \
        free(tmp);                                                                 \
        return MCR_OK;                                                             \
    }

/* A ring with parameters p over servers[0..n) (copied: the ring owns what it
 * needs) and the continuum `points`, which must hold npoints points sorted
 * by value then server, each server < n, and MCR__RING_PAD free slots
 * after them. Only the continuum modes take points (else NULL, 0). "jump"
 * and "slots" take `map`, nmap entries of ring indexes or MCR__HOLE (jump:
 * bucket -> server; slots: slot -> server, nmap = p->table_size); the
 * others NULL, 0. The ring takes `points` and `map` over in every case
 * (freed on error). Errors: MCR_ERR_INVALID, MCR_ERR_EMPTY (no server),
 * MCR_ERR_RANGE, MCR_ERR_NOMEM. */
int mcr__ring_build(const mcr__params *p, const mcr__server *servers, size_t n,
                    mcr__point *points, size_t npoints, uint32_t *map, size_t nmap,
                    mcr_ring **out, mcr_error *err);

/* The default map of "jump" (server i owns weight[i] consecutive buckets,
 * in order) or of "slots" (contiguous ranges in proportion to weight), for
 * n servers: a malloc'ed array of *nmap server numbers. MCR_OK,
 * MCR_ERR_RANGE (jump: too many buckets), MCR_ERR_NOMEM. */
int mcr__default_map(const mcr__params *p, const uint32_t *weight, size_t n, uint32_t **map,
                     size_t *nmap, mcr_error *err);

/* The table of a ring ("jump": buckets with holes; "maglev", "slots": the
 * effective owners) into *n; NULL (and 0) in the other modes. */
const uint32_t *mcr__ring_table(const mcr_ring *r, size_t *n);

/* "mcrouter-wch3": per ring server, the SpookyHash values below which a
 * try is accepted (mcr__wch3); NULL in the other modes. */
const uint32_t *mcr__ring_accept(const mcr_ring *r);

/* The key hash of a ring (mcr_ring_hash) made 64 bits for "jump" and
 * "rendezvous": mcr__mix64(hash). */
static inline uint64_t mcr__key64(uint32_t hash)
{
    return mcr__mix64(hash);
}

/* Candidates for a key in a mode's order of preference: what replicas and
 * bounded lookups walk. The first candidate is the primary; each later one
 * is a ring index, possibly one met before: clockwise points, modula's next
 * servers, or the native modes' own sequence, which a sweep of every ring
 * index from the primary's up follows (jump, maglev, slots; rendezvous
 * without memory for its scores), so that every active server is met. */
typedef struct mcr__walk {
    const mcr_ring *r;
    uint32_t hash;
    uint32_t primary;
    size_t step;       /* candidates given so far */
    size_t own;        /* length of the mode's own sequence */
    size_t pos;        /* continuum: the key's point; tables: the entry */
    uint64_t key;      /* jump: the generator's state */
    /* rendezvous: every server's time, and (once more than a few
     * candidates are asked) the servers sorted by it */
    double *times;
    uint32_t *order;
    uint32_t last;     /* rendezvous: the previous candidate */
    bool sweep;        /* after its own sequence, every other server once */
    double local[64];
} mcr__walk;

/* Start a walk for a key (the primary is mcr_ring_locate(r, key, len)).
 * Cannot fail: without memory for rendezvous's times, the walk is the
 * primary and the sweep. */
void mcr__walk_init(mcr__walk *w, const mcr_ring *r, const void *key, size_t len);
/* The next candidate, or UINT32_MAX once the walk is over. */
uint32_t mcr__walk_next(mcr__walk *w);
void mcr__walk_release(mcr__walk *w);

/* How r's key space falls to servers, and in MCR__SHAPE_RESIDUES without
 * a table how many residues in turn server b owns (its weight in
 * "twemproxy-modula", else 1). */
mcr__shape mcr__ring_shape(const mcr_ring *r);
uint32_t mcr__ring_residues(const mcr_ring *r, uint32_t b);

/* 1 when r's continuum follows the successor rule with ties to the first
 * point (every continuum mode but spymemcached, dalli and php-memcache). */
int mcr__ring_rule_is_succ(const mcr_ring *r);

/* The continuum of r (mcr_ring_point_count() points), owned by r; NULL in
 * the modula modes. */
const mcr__point *mcr__ring_points(const mcr_ring *r);

/* A ring over cfg's servers with the given points instead of computed ones
 * (tests, imported continua). Points are sorted stably; lookups follow the
 * usual successor rule. Errors: MCR_ERR_INVALID (server index out of range),
 * MCR_ERR_EMPTY, MCR_ERR_NOMEM. */
int mcr__ring_new_points(const mcr_config *cfg, const uint32_t *values,
                         const uint32_t *servers, size_t n, mcr_ring **out, mcr_error *err);

#endif /* MCR_PLACEMENT_INTERNAL_H */
