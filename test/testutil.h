/* SPDX-License-Identifier: BSD-3-Clause */
/* testutil.h: helpers shared by the Check suites: a seeded RNG, random keys, suite runner, time scale and clock, temporary directories and files, the CLI's path. */
#ifndef MCR_TESTUTIL_H
#define MCR_TESTUTIL_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

/* xorshift64* generator; deterministic for a seed so failures reproduce.
 * The seed is taken from MCR_TEST_SEED when set, printed by tu_run(). */
typedef struct tu_rng { uint64_t s; } tu_rng;
void tu_rng_init(tu_rng *r, uint64_t salt);
uint64_t tu_rand(tu_rng *r);
uint32_t tu_below(tu_rng *r, uint32_t n); /* uniform in [0, n) */
void tu_bytes(tu_rng *r, unsigned char *buf, size_t n);
/* A random printable key (no spaces/control bytes) of length 1..maxlen into
 * buf (size > maxlen), NUL-terminated; returns its length. */
size_t tu_key(tu_rng *r, char *buf, size_t maxlen);
/* The base seed in use (MCR_TEST_SEED or a fixed default). */
uint64_t tu_seed(void);

/* Run one suite with CK_NORMAL output and return the process exit code. */
int tu_run(Suite *s);

/* One test case per test, named after it (so CK_RUN_CASE=name runs one),
 * each with `timeout_s` (Check's CK_TIMEOUT_MULTIPLIER applies) and the
 * fixture `teardown` (NULL: none), run after the test in its process. */
typedef struct tu_case {
    const char *name;
    const TTest *test;
} tu_case;
void tu_add_cases(Suite *s, const tu_case *cases, size_t n, double timeout_s, SFun teardown);

/* How many random cases a single-threaded differential loop draws, for a
 * full count of n: n itself in a plain build; in a sanitizer build n divided
 * by tu_case_divisor() and rounded up (at least 1): TU_TSAN_CASE_DIVISOR
 * under ThreadSanitizer, which finds races a loop on one thread cannot have
 * and runs such loops 5-25 times slower; TU_ASAN_CASE_DIVISOR under
 * AddressSanitizer, 3-8 times slower, where the code paths matter more than
 * the number of random inputs through them (the fuzz targets search inputs).
 * Every kind of case still runs (the loops iterate their kinds, the
 * families and modes, as i % kinds, and draw the rest; the seed is fixed),
 * and the plain build runs the full counts. ASan's is 4 (was 2):
 * test_compat_libmemcached (then also what test_compat_lmc_options and
 * test_compat_lmc_cases hold) spent about 120 of its 135 s under ASan in such
 * loops; a quarter is still 28 configurations of 1,600 keys per family,
 * 60 from_memcached_random configurations and 5,000 option strings.
 * Not for loops whose count is the point of the test (a stress test, a
 * coverage bound), nor for tests with threads. tu_run() prints the divisor
 * in use. */
#define TU_TSAN_CASE_DIVISOR 4
#define TU_ASAN_CASE_DIVISOR 4
int tu_case_divisor(void);
int tu_cases(int n);

/* Debian's python3, by its path, for the suites that check output with
 * Python (scripts/deps.sh installs it): a python3 earlier on PATH (a version
 * manager's shim) is neither needed nor the same. */
#define TU_PYTHON3 "/usr/bin/python3"

/* Time scale of the tests: the one factor by which every timing-bound limit
 * of the suites grows on a slow or loaded machine (CI, sanitizers, valgrind).
 *
 * It is MCR_TEST_TIME_SCALE from the environment, a positive number (1, 2.5,
 * 10; at most 1000), 1 when unset. Anything else (empty, 0, negative, "2x",
 * "inf") fails the program at start-up with a message naming the variable:
 * a test never runs with a silently defaulted scale.
 *
 * ctest: CMake reads MCR_TEST_TIME_SCALE when configuring (environment or
 * -DMCR_TEST_TIME_SCALE=N; see cmake/test_time_scale.cmake) and multiplies
 * every test's TIMEOUT by it; the value is passed to the tests as
 * MCR_TEST_TIME_SCALE_CTEST. A test run by ctest with no MCR_TEST_TIME_SCALE
 * of its own takes the configured value; one whose MCR_TEST_TIME_SCALE is
 * larger than the configured value fails at start-up (ctest would kill it
 * at a timeout made for the smaller scale: reconfigure instead).
 *
 * Check: before main(), testutil.c sets CK_TIMEOUT_MULTIPLIER to the scale
 * (unless it is already set), so every tcase's timeout, CK_DEFAULT_TIMEOUT
 * included, grows with it.
 *
 * Use it for limits only: a deadline a test waits up to, a bound a latency
 * must stay under. Never to sleep longer: a test waits on events. */
double mcr_test_time_scale(void);
/* ms multiplied by the time scale, rounded up, at most INT_MAX; ms <= 0 is
 * returned as is. */
int mcr_test_ms(int ms);
/* The same for seconds, as a double (for Check timeouts and poll loops). */
double mcr_test_sec(double sec);
/* CLOCK_MONOTONIC in milliseconds and nanoseconds, for deadlines and
 * durations: the one clock of the suites. */
int64_t mcr_test_now_ms(void);

/* 1 when the n bytes at p are all zero (a struct's reserved area). */
int mcr_test_zeroed(const void *p, size_t n);
int64_t mcr_test_now_ns(void);

/* ------------------------------------------------------------ files
 * Each of these, when it fails, aborts the test (ck_abort_msg) with a
 * message naming the path and the system's reason: a test never goes on
 * with a file it did not get. Outside a suite's run (before tu_run(), or in
 * a program that does not call it) the message goes to stderr and the
 * program exits with status 1, Check having no test to fail. */

/* A new empty directory $TMPDIR/mcr-<tag>-XXXXXX (/tmp when TMPDIR is unset
 * or empty), made with mkdtemp (mode 0700). Returns its path (malloc'd, the
 * caller's; give it to tu_tmpdir_free()). The directory is remembered with
 * the id of the process that made it: if a failed assertion skips its
 * tu_tmpdir_free(), that process removes it when it exits. */
char *tu_tmpdir(const char *tag);

/* Remove `dir`, made by tu_tmpdir(), with everything below it (what a test
 * wrote there; symbolic links are removed, never followed, and nothing on
 * another file system is entered), then free the path. Returns how many
 * entries below `dir` it removed. A path tu_tmpdir() did not make in this
 * process aborts the test: it removes only what it made. NULL: returns 0.
 * MCR_TEST_KEEP=1 in the environment: the directory is kept, its path
 * printed ("kept PATH"), and 0 returned. */
size_t tu_tmpdir_free(char *dir);

/* A new file $TMPDIR/mcr-<tag>-XXXXXX (mkstemp, mode 0600) holding the `len`
 * bytes at `data`; returns its path (malloc'd; give it to tu_temp_file_free()). */
char *tu_temp_file(const char *tag, const void *data, size_t len);

/* unlink(path), then free(path). NULL is a no-op. */
void tu_temp_file_free(char *path);

/* Write the `len` bytes at `data` to `path`, created or truncated. */
void tu_write_file(const char *path, const void *data, size_t len);

/* The whole file at `path`, malloc'd (the caller frees it), with a NUL after
 * its last byte; its size (without the NUL) in *len when len is not NULL. */
char *tu_read_file(const char *path, size_t *len);

/* ------------------------------------------------------------ the CLI
 * Where the build put things, from the environment ctest gives every suite
 * (test/CMakeLists.txt; scripts/test.sh sets the same for valgrind). Unset
 * or empty: the test aborts naming the variable. */

/* $MCR_TEST_BIN_DIR/mcroute, the built command (a static buffer). */
const char *tu_cli_path(void);
/* $MCR_TEST_SRC_DIR, the top of the source tree. */
const char *tu_src_dir(void);


/* Assertions for hot loops: Check's ck_assert_* record every passing
 * check (a write to a pipe in fork mode), which would dominate the run
 * time of suites that check millions of values; these only act on
 * failure, with both operands printed. EXPECT_STR needs <string.h>. */
#define EXPECT(c)                                                                        \
    do {                                                                                 \
        if (!(c))                                                                        \
            ck_abort_msg("Assertion '%s' failed", #c);                                   \
    } while (0)
#define EXPECT_MSG(c, ...)                                                               \
    do {                                                                                 \
        if (!(c))                                                                        \
            ck_abort_msg(__VA_ARGS__);                                                   \
    } while (0)
#define EXPECT_OP(T, fmt, x, op, y)                                                      \
    do {                                                                                 \
        T x_ = (x), y_ = (y);                                                            \
        if (!(x_ op y_))                                                                 \
            ck_abort_msg("Assertion '%s %s %s' failed: " fmt " vs " fmt, #x, #op, #y,   \
                         x_, y_);                                                        \
    } while (0)
#define EXPECT_INT(x, op, y) EXPECT_OP(long long, "%lld", x, op, y)
#define EXPECT_UINT(x, op, y) EXPECT_OP(unsigned long long, "%llu", x, op, y)
#define EXPECT_DBL(x, op, y) EXPECT_OP(double, "%.9g", x, op, y)
#define EXPECT_STR(x, op, y)                                                             \
    do {                                                                                 \
        const char *x_ = (x), *y_ = (y);                                                 \
        if (!(strcmp(x_, y_) op 0))                                                      \
            ck_abort_msg("Assertion '%s %s %s' failed: \"%s\" vs \"%s\"", #x, #op, #y, \
                         x_, y_);                                                        \
    } while (0)

#endif
