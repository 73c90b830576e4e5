/* SPDX-License-Identifier: BSD-3-Clause */
/* test_placement_util.h: what test_placement.c and test_placement_snapshots.c share: what each mode promises, pools of made-up servers, their snapshots and changes, moved keys and diffs checked, and the suite's scratch directory. */
#ifndef MCR_TEST_PLACEMENT_UTIL_H
#define MCR_TEST_PLACEMENT_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "mcroute.h"
#include "mcroute_snapshot.h"

#define TWO32 4294967296.0
#define MAX_SERVERS 64

/* ------------------------------------------------------------ what each mode promises */

/* The checklist's expectations, mode by mode, as the modes document them.
 * The reference modes reproduce other clients, limits included: the test
 * states those limits instead of skipping the mode. */
typedef struct mode_case {
    mcr_mode mode;
    int weighted;     /* shares follow weights (else: equal shares) */
    int minimal;      /* adding or removing a server moves keys only to or
                         from it (else: others move too, by normalisation
                         or by the modulus) */
    double move_max;  /* moved / ideal, at most, adding or removing one
                         server of 20 (the ideal being its share) */
    double share_tol; /* |share - expected|, 1:2:4 over 3 servers */
    int model_diff;   /* the diff's shares are the model's (jump,
                         rendezvous), not exact counts */
    int no_weights;   /* a weight other than 1 is refused: the pools of
                         these tests have weights 1 */
} mode_case;

/* One case a mode, every mode (test_placement_util.c checks the count). */
extern const mode_case cases[];
#define NCASES ((size_t)MCR_MODE_COUNT)

/* The weight the API takes for `units` of the tests' weight: the same,
 * but in "mcrouter-wch3", whose weights are millionths of 1.0, where a
 * unit is 0.1 (pools of these tests weigh at most 10 units). */
uint32_t api_weight(mcr_mode mode, uint32_t units);

/* A weight w for a server of `mode`: 1 in the modes without weights. */
uint32_t w_of(mcr_mode mode, uint32_t w);

/* ------------------------------------------------------------ pools */

typedef struct spec {
    char host[32];
    int port;
    uint32_t weight;
    char id[32];
    char zone[16];
} spec;

typedef struct pool {
    spec s[MAX_SERVERS];
    size_t n;
    mcr_mode mode;
    mcr_hash hash;
    uint32_t table;  /* maglev table size, 0: default */
    uint32_t slots;  /* slot count, 0: default */
    const char *tag;
} pool;

/* Every test starts from the same addresses, with or without fork. */
void reset_hosts(void);

/* A server of the next address ("10.a.b.c", id "node-<n>"), `zone` NULL: none. */
void new_spec(spec *s, uint32_t weight, const char *zone);

/* A pool of `n` new servers of `weight`, hash md5. */
void plain_pool(pool *p, mcr_mode mode, size_t n, uint32_t weight);

/* The config of `p`; the test fails if a setting or server is refused. */
mcr_config *config_of(const pool *p);

/* The snapshot of `p` at epoch 1; the test fails if it cannot be built. */
mcr_snapshot *snap_of(const pool *p);

/* `ch` applied to `s`; the test fails if it is refused. */
mcr_snapshot *apply_ok(const mcr_snapshot *s, const mcr_changes *ch);

/* The id of server `index`, and that of the owner of a key. */
const char *id_at(const mcr_snapshot *s, uint32_t index);
const char *owner_of(const mcr_snapshot *s, const char *key, size_t len);

/* Keys "key-<i>" into a static buffer. */
size_t key_n(char *buf, unsigned i);

/* The snapshot with server `id` added (weight w) and, for slots, the plan's
 * moves; or removed (w == 0), after a plan for slots. */
mcr_snapshot *with_change(const mcr_snapshot *s, const spec *add, const char *remove,
                          int plan);

/* Fraction of n keys whose owner differs; with `only_to` / `only_from`,
 * fail if a key moved to another server / from another server. */
double moved_keys(const mcr_snapshot *a, const mcr_snapshot *b, unsigned n,
                  const char *only_to, const char *only_from, const char *what);

/* The diff from a to b; the test fails if it cannot be made. */
mcr_diff *diff_of(const mcr_snapshot *a, const mcr_snapshot *b);

/* What every diff must say: sorted positive pairs adding up to the moved
 * share exactly, per-key answers that match lookups, and (sampled) a moved
 * share near the keys'. */
void check_diff(const mcr_snapshot *a, const mcr_snapshot *b, const mcr_diff *d,
                unsigned keys, double tol);

/* ------------------------------------------------------------ scratch files */

extern char *tmpdir; /* the suite's directory (tu_tmpdir), made by main() */

/* `name` in tmpdir, in one of four rotating static buffers. */
const char *tmp_path(const char *name);

#endif /* MCR_TEST_PLACEMENT_UTIL_H */
