/* snapshot.h: the layout of a snapshot, shared by snapshot.c (building, changes) and snapfile.c (canonical text, files); never installed. */
#ifndef MCR_SNAPSHOT_INTERNAL_H
#define MCR_SNAPSHOT_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>

#include "internal.h"
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
    mcr__pcache *pc;     /* one reference, or NULL (never active yet) */
    uint64_t pdigest;    /* hash of its point values in the continuum */
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
    char *strings;           /* ids, hosts, zones */
    char checksum[MCR_SNAPSHOT_CHECKSUM_LEN + 1];
};

/* Build a snapshot of the entries e[0..n) (taken over in every case,
 * with their cache references) with parameters p and `epoch`. `from[i]` is
 * the index in `old` of the server e[i] continues, or -1; `old` may be NULL
 * (then every from[i] is -1). With `check`, duplicate ids and addresses are
 * refused (an apply has checked them). Errors: MCR_ERR_EMPTY,
 * MCR_ERR_DUPLICATE, MCR_ERR_RANGE, MCR_ERR_NOMEM. */
int mcr__snapshot_build(const mcr__params *p, mcr__entry *e, size_t n, const long *from,
                        const mcr_snapshot *old, uint64_t epoch, bool check, mcr_snapshot **out,
                        mcr_error *err);

/* Fill the line digests of s's servers (reused from `old` for servers that
 * did not change) and its checksum. MCR_OK or MCR_ERR_NOMEM. */
int mcr__snapshot_digest(mcr_snapshot *s, const mcr_snapshot *old, const long *from,
                         mcr_error *err);

/* "active", "draining", "down", or NULL. */
const char *mcr__state_name(mcr_server_state st);

#endif
