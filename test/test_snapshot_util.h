/* SPDX-License-Identifier: BSD-3-Clause */
/* test_snapshot_util.h: what test_snapshot.c and test_snapshot_files.c share: the keys, random servers and configs, snapshots made and changed, the continuum compared, the modes, and the suite's scratch directory. */
#ifndef MCR_TEST_SNAPSHOT_UTIL_H
#define MCR_TEST_SNAPSHOT_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mcroute.h"
#include "mcroute_snapshot.h"
#include "testutil.h"

/* Check records every assertion it evaluates (a write(2) per call), so
 * loops over thousands of keys or points test in plain C and call Check
 * only to report a failure (with both values). */
#define FAST_UINT_EQ(a, b)              \
    do {                                \
        if ((a) != (b))                 \
            ck_assert_uint_eq((a), (b)); \
    } while (0)
#define FAST_STR_EQ(a, b)               \
    do {                                \
        if (strcmp((a), (b)) != 0)      \
            ck_assert_str_eq((a), (b)); \
    } while (0)

#define NKEYS 4000

/* The keys every test looks up, made once by main() (make_keys). */
extern char keys[NKEYS][24];
extern size_t key_len[NKEYS];
void make_keys(void);

/* The key hash each mode is tested with. */
mcr_hash hash_for(mcr_mode m);

/* A random server i into d (strings in buf, 64 bytes each). Every fourth
 * server has an id, every third a zone; some hosts are IPv6. */
void random_desc(tu_rng *r, unsigned i, mcr_server_desc *d, char host[64], char id[64],
                 char zone[64], uint32_t max_weight);

/* A config of mode m with n random servers numbered from `base`. */
mcr_config *random_config(tu_rng *r, mcr_mode m, unsigned n, unsigned base,
                          uint32_t max_weight);

/* The snapshot of cfg at `epoch`; the test fails if it is refused. */
mcr_snapshot *snap_of(const mcr_config *cfg, uint64_t epoch);

/* ch applied to old (epoch + 1); the test fails if it is refused. */
mcr_snapshot *apply_ok(const mcr_snapshot *old, const mcr_changes *ch);

/* The same continuum: same points, and ring servers with the same ids. */
void assert_same_points(const mcr_snapshot *a, const mcr_snapshot *b);

/* Two servers in stable-ketama ("a" in zone z1, and 10.0.0.2:11211 of
 * weight 2) at `epoch`. */
mcr_snapshot *small_snapshot(uint64_t epoch);

extern char *tmpdir; /* the suite's directory (tu_tmpdir), made by main() */

/* A path in the test's directory; each call has its own buffer (a few at
 * a time are in use). */
const char *tmp_path(const char *name);

/* The modes the every-mode loops go through (test_snapshot_util.c checks
 * the count). */
extern const mcr_mode all_modes[];
#define NMODES ((size_t)9)

#endif /* MCR_TEST_SNAPSHOT_UTIL_H */
