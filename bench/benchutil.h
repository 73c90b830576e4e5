/* SPDX-License-Identifier: BSD-3-Clause */
/* benchutil.h: what the benchmark programs share: a clock, allocation, a fixed random sequence, medians. */
#ifndef MCR_BENCHUTIL_H
#define MCR_BENCHUTIL_H

#if defined(__GNUC__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE
#endif

/* The build type the benchmark was compiled in (CMake passes it). */
#ifndef MCR_BENCH_BUILD_TYPE
#define MCR_BENCH_BUILD_TYPE "unknown"
#endif

#include <stddef.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_now_ns(void);

/* Sleep `ms` milliseconds (nanosleep, resumed after a signal). */
void bench_sleep_ms(unsigned ms);

/* malloc() that exits the program (naming `bench_program`) when out of
 * memory: a benchmark has nothing useful to do then. */
extern const char *bench_program;
void *bench_xmalloc(size_t n);

/* splitmix64: a fixed, portable sequence, so the keys never change. */
uint64_t bench_next_rand(uint64_t *state);

/* Sorts v[0..n) in place and returns its median. */
double bench_median(double *v, unsigned n);

/* The number of option `name` (digits, lo..hi), or a message naming `prog`
 * and exit 2. */
unsigned bench_arg_uint(const char *prog, const char *name, const char *v, unsigned lo,
                        unsigned hi);

/* Mismatches of one run (a pass, a case): the first BENCH_MAX_MESSAGES are
 * printed as "FAIL what: ...", the rest only counted in `bad`. */
#define BENCH_MAX_MESSAGES 5
typedef struct bench_checker {
    const char *what;
    unsigned bad;
} bench_checker;
void bench_bad(bench_checker *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
