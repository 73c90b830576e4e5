/* SPDX-License-Identifier: BSD-3-Clause */
/* snapshot.h: the layout of a snapshot, shared by snapshot.c (building, reading), changes.c (change sets), snaptext.c (canonical text, checksum), snapfile.c (files) and router.c (its one-call lookup reads a snapshot in place); never installed. */
#ifndef MCR_SNAPSHOT_INTERNAL_H
#define MCR_SNAPSHOT_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>

#include "placement/placement_internal.h"
#include "mcroute_snapshot.h"

/* The point values of one server, in label order, shared (reference
 * counted, immutable) by every snapshot where the server keeps the same
 * label prefix. Defined in snapshot.c. */
typedef struct mcr__pcache mcr__pcache;

/* One server of a snapshot. Strings point into the snapshot's `strings`
 * (while a snapshot is being built: into the caller's data). */
typedef struct mcr__entry {
    const char *id;      /* never NULL once built; NULL before: "host:port" */
    const char *host;
    size_t host_len;
    const char *zone;    /* NULL: none */
    int port;
    uint32_t weight;
    mcr_server_state state;
    bool named;          /* id given (twemproxy-ketama hashes it) */
    bool ipv6;
    uint32_t zone_no;    /* 0: none, else 1..nzones */
    uint32_t ring;       /* ring index, UINT32_MAX unless ACTIVE */
    uint32_t labels;     /* labels in the continuum (0 unless ACTIVE) */
    uint32_t owned;      /* table modes: buckets (jump), slots of the map
                            (slots), table entries (maglev) it owns */
    mcr__pcache *pc;     /* one reference, or NULL (never active yet) */
    uint64_t pdigest;    /* hash of its point values in the continuum, or
                            of the numbers of what it owns (table modes) */
    unsigned char ldigest[16]; /* MD5 of its line of the canonical text */
} mcr__entry;

struct mcr_snapshot {
    atomic_size_t refs;
    uint64_t epoch;
    mcr__params params;
    mcr__entry *servers;
    size_t nservers;
    size_t nactive;
    uint32_t *ring_map;      /* ring index -> snapshot index */
    mcr_ring *ring;
    const mcr__point *points;/* the ring's continuum (npoints of them) */
    uint32_t *labels;        /* label number of each point: what lets the
                                next build filter points without rehashing */
    size_t npoints;
    uint32_t per_label;      /* points per label; 0 in the modula modes */
    uint32_t *idmap;         /* open addressing over ids: index + 1 */
    size_t idmap_mask;
    size_t nzones;
    uint64_t active_weight;  /* total weight of the ACTIVE servers */
    uint32_t *map;           /* "jump": bucket -> snapshot index; "slots":
                                slot -> snapshot index (any state) */
    size_t nmap;
    uint32_t *owned_start;   /* map modes: server i owns owned_list[... */
    uint32_t *owned_list;    /* ...owned_start[i] .. owned_start[i+1]),
                                ascending: its buckets or slots */
    char *strings;           /* ids, hosts, zones */
    char checksum[MCR_SNAPSHOT_CHECKSUM_LEN + 1];
};

/* Build a snapshot of the entries e[0..n) (taken over in every case,
 * with their cache references) with parameters p and `epoch`. `from[i]` is
 * the index in `old` of the server e[i] continues, or -1; `old` may be NULL
 * (then every from[i] is -1). With `check`, duplicate ids and addresses are
 * refused (an apply has checked them). `map` (nmap entries, indexes into
 * e) is the bucket or slot map of "jump" and "slots", taken over in every
 * case; NULL gives the default map (mcr__default_map); other modes take
 * NULL. A map that breaks the mode's rules (jump: server i owns exactly
 * weight buckets; slots: nmap is the slot count; every entry names a
 * server) is MCR_ERR_INVALID. Errors: MCR_ERR_EMPTY, MCR_ERR_DUPLICATE,
 * MCR_ERR_RANGE, MCR_ERR_INVALID, MCR_ERR_NOMEM. */
int mcr__snapshot_build(const mcr__params *p, mcr__entry *e, size_t n, const long *from,
                        const mcr_snapshot *old, uint64_t epoch, bool check, uint32_t *map,
                        size_t nmap, mcr_snapshot **out, mcr_error *err);

/* mcr_snapshot_parse() (no stale check, no flags) that takes the point
 * caches of the servers of `basis` (may be NULL) that continue in the
 * text, so that only what changed is hashed: the result is the same (the
 * parse compares it with the text, as ever). snapfile.c. */
int mcr__snapshot_parse_basis(const char *text, size_t len, const char *name,
                              const mcr_snapshot *basis, mcr_snapshot **out, mcr_error *err);

/* mcr_snapshot_apply() with the epoch of the result given: the snapshot
 * built from `old` and the changes `ch` has epoch `epoch` (any value; the
 * caller decides what it means). mcr_snapshot_apply() is this with
 * old->epoch + 1; a router's local overlay (lib/snapshot/overlay.c) builds its
 * effective snapshot with the epoch of the published one. Errors: those
 * of mcr_snapshot_apply() but the epoch's MCR_ERR_RANGE. changes.c. */
int mcr__snapshot_apply_at(const mcr_snapshot *old, const mcr_changes *ch, uint64_t epoch,
                           mcr_snapshot **out, mcr_error *err);

/* The seed of the roll digests (the "digest" of a server line). */
#define MCR__ROLL_SEED 0x6d63726f75746521ULL /* "mcroute!" */

/* A new reference to a point cache (NULL stays NULL); snapshot.c. */
mcr__pcache *mcr__pcache_ref(mcr__pcache *c);

/* The hash of the id and address indexes (FNV-1a with a final mix). */
#define MCR__FNV_OFFSET 0xcbf29ce484222325ULL
static inline uint64_t mcr__str_hash(const char *s, size_t len, uint64_t h)
{
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
    return h ^ (h >> 29);
}

/* The size of an open-addressing index for n entries: a power of two, at
 * least 16 and at least 2n. */
static inline size_t mcr__map_cap(size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    return cap;
}

/* ---- the canonical text and checksum (snaptext.c) */

#define MCR__SNAP_MAGIC "mcroute-snapshot"
#define MCR__SNAP_FORMAT 1        /* the modes up to "stable-ketama" */
#define MCR__SNAP_FORMAT_TABLES 2 /* the native table modes */

/* The file format a mode's snapshots are written in. */
int mcr__snapshot_format(mcr_mode m);

/* Fill the line digests of s's servers (reused from `old` for servers that
 * did not change) and its checksum. MCR_OK or MCR_ERR_NOMEM. */
int mcr__snapshot_digest(mcr_snapshot *s, const mcr_snapshot *old, const long *from,
                         mcr_error *err);

/* The whole text of s with its checksum line, malloc'ed, into *out and
 * its length into *len. MCR_OK or MCR_ERR_NOMEM. */
int mcr__snapshot_text(const mcr_snapshot *s, char **out, size_t *len, mcr_error *err);

/* The 32 lower-case hex digits of an MD5 digest, NUL-terminated. */
void mcr__checksum_hex(const unsigned char d[16], char out[MCR_SNAPSHOT_CHECKSUM_LEN + 1]);

/* Whether st is one of the three states; its name ("active", "draining",
 * "down"), or NULL. */
bool mcr__state_valid(mcr_server_state st);
const char *mcr__state_name(mcr_server_state st);

#endif
