/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz.h: what the fuzz targets share: the invariant check that aborts, temporary files, and the checks of errors, rings and snapshots. */
#ifndef MCR_FUZZ_H
#define MCR_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "mcroute.h"
#include "mcroute_snapshot.h"

/* The entry point of every target: libFuzzer calls it, and so does
 * replay.c in the ordinary build. Returns 0; an input that breaks an
 * invariant never returns (fuzz_fail). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* fuzz_fail: print where and what was broken, then trap (libFuzzer
 * records the input; the replay test dies with SIGILL). */
#if defined(__GNUC__)
__attribute__((noreturn, format(printf, 4, 5)))
#endif
void fuzz_fail(const char *file, int line, const char *cond, const char *fmt, ...);

/* FUZZ_CHECK(cond, fmt, ...): an invariant; fails with the message. */
#define FUZZ_CHECK(cond, ...)                                   \
    do {                                                        \
        if (!(cond))                                            \
            fuzz_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);  \
    } while (0)

/* fuzz_tmp_path: the path of this process's temporary file number `slot`
 * (0..3), in $TMPDIR, else /dev/shm when it exists (no disk for fsync),
 * else /tmp. Removed at exit. */
const char *fuzz_tmp_path(int slot);

/* fuzz_write_file: write `len` bytes to temporary file `slot`, replacing
 * it; returns its path. Traps when it cannot (not the input's fault, but
 * a run that tests nothing must not pass). */
const char *fuzz_write_file(int slot, const void *data, size_t len);

/* fuzz_read_file: the contents of `path` (malloc'ed, NUL-terminated,
 * length in *len); traps when it cannot be read. */
char *fuzz_read_file(const char *path, size_t *len);

/* fuzz_cstr: `data` as a NUL-terminated string (malloc'ed): NULL when it
 * holds a NUL byte, which a C string argument cannot carry. */
char *fuzz_cstr(const uint8_t *data, size_t size);

/* fuzz_check_error: a failed call's report: rc negative and known to
 * mcr_strerror, err->code == rc, a non-empty NUL-terminated message. */
void fuzz_check_error(int rc, const mcr_error *err, const char *what);

/* fuzz_check_ring: every key (fixed ones and slices of `data`) locates
 * on one of the ring's `nservers` servers, mcr_ring_locate_many() agrees
 * with mcr_ring_locate(), and so does mcr_ring_find(mcr_ring_hash()) when
 * there are several servers; the points are sorted and name servers of
 * the ring; every server has a name, a host, a port and a weight. */
void fuzz_check_ring(const mcr_ring *ring, size_t nservers, const uint8_t *data, size_t size);

/* fuzz_check_snapshot: the snapshot's ring as above (its active
 * servers), every key on an ACTIVE server, ids found again by
 * mcr_snapshot_find(), a checksum of 32 hex digits; then saved and
 * loaded again: the same checksum, and saving the loaded one gives the
 * same bytes. */
void fuzz_check_snapshot(const mcr_snapshot *snap, const uint8_t *data, size_t size);

/* fuzz_total_weight: the sum of the weights of `cfg`'s servers, read from
 * a "modula" ring (cheap whatever the weights): `cfg` is left in mode
 * "modula", so set the mode (and then the hash) after this call. 0 when
 * that ring cannot be built (no server). */
uint64_t fuzz_total_weight(mcr_config *cfg);

/* fuzz_mode_cheap: 0 when the ring of `nservers` servers weighing `total`
 * in `mode` would take more memory or time than one fuzz input should,
 * else 1: the modes whose point or table counts grow with the total
 * weight ("stable-ketama", "bounded", "jump", "twemproxy-modula") past a
 * few million. The library accepts such configs; the targets skip
 * building them. */
int fuzz_mode_cheap(mcr_mode mode, size_t nservers, uint64_t total);

#endif
