/* SPDX-License-Identifier: BSD-3-Clause */
/* testutil.c: seeded randomness, the time scale of timing-bound limits, and the common main() of the Check suites. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "testutil.h"

uint64_t tu_seed(void)
{
    const char *e = getenv("MCR_TEST_SEED");
    if (e != NULL && *e != '\0')
        return strtoull(e, NULL, 0);
    return 0x6d63726f757465ULL; /* "mcroute" */
}

void tu_rng_init(tu_rng *r, uint64_t salt)
{
    r->s = (tu_seed() ^ (salt * 0x9e3779b97f4a7c15ULL)) | 1;
    for (int i = 0; i < 4; i++)
        tu_rand(r);
}

uint64_t tu_rand(tu_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545f4914f6cdd1dULL;
}

uint32_t tu_below(tu_rng *r, uint32_t n)
{
    return (uint32_t)((tu_rand(r) >> 32) * (uint64_t)n >> 32);
}

void tu_bytes(tu_rng *r, unsigned char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = (unsigned char)(tu_rand(r) >> 56);
}

size_t tu_key(tu_rng *r, char *buf, size_t maxlen)
{
    static const char alpha[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:-./";
    size_t len = 1 + tu_below(r, (uint32_t)maxlen);
    for (size_t i = 0; i < len; i++)
        buf[i] = alpha[tu_below(r, sizeof(alpha) - 1)];
    buf[len] = '\0';
    return len;
}

#define MCR_TU_STR_(x) #x
#define MCR_TU_STR(x) MCR_TU_STR_(x)
#if defined(__SANITIZE_THREAD__)
#define TU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TU_TSAN 1
#endif
#endif
#ifndef TU_TSAN
#define TU_TSAN 0
#endif

int tu_cases(int n)
{
    if (!TU_TSAN || n <= 1)
        return n;
    return (n + TU_TSAN_CASE_DIVISOR - 1) / TU_TSAN_CASE_DIVISOR;
}

int tu_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    int failed;

    printf("seed: 0x%llx (set MCR_TEST_SEED to change), time scale %g "
           "(MCR_TEST_TIME_SCALE)%s\n",
           (unsigned long long)tu_seed(), mcr_test_time_scale(),
           TU_TSAN ? ", random cases 1/" MCR_TU_STR(TU_TSAN_CASE_DIVISOR)
                     " of the full counts (a TSan build)" : "");
    fflush(stdout);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* The largest MCR_TEST_TIME_SCALE accepted: past it a deadline in ms would
 * overflow an int in the suites' arithmetic, and no machine is that slow. */
#define TU_MAX_TIME_SCALE 1000.0

/* Parse a scale: a finite number in (0, TU_MAX_TIME_SCALE], nothing after
 * it. Returns it, or 0 with *why set. */
static double parse_scale(const char *s, const char **why)
{
    char *end = NULL;
    double v;

    if (*s == '\0') {
        *why = "empty";
        return 0;
    }
    errno = 0;
    v = strtod(s, &end);
    if (end == s || *end != '\0' || errno != 0 || !isfinite(v)) {
        *why = "not a finite number";
        return 0;
    }
    if (!(v > 0)) {
        *why = "not positive";
        return 0;
    }
    if (v > TU_MAX_TIME_SCALE) {
        *why = "larger than 1000";
        return 0;
    }
    return v;
}

/* Fail the whole program: a bad scale must not be replaced by a default. */
static void scale_fail(const char *var, const char *val, const char *why)
{
    fprintf(stderr,
            "%s=\"%s\": %s; it must be a positive number such as 1, 2.5 or 10 "
            "(the factor by which the tests' time limits grow)\n",
            var, val, why);
    fflush(stderr);
    _Exit(2); /* not exit(): no atexit handler of a half-started suite */
}

static double resolve_scale(void)
{
    const char *env = getenv("MCR_TEST_TIME_SCALE");
    const char *ct = getenv("MCR_TEST_TIME_SCALE_CTEST");
    const char *why = NULL;
    double ctest = 0, scale = 0;

    if (ct != NULL) {
        ctest = parse_scale(ct, &why);
        if (ctest == 0)
            scale_fail("MCR_TEST_TIME_SCALE_CTEST", ct, why);
    }
    if (env != NULL) {
        scale = parse_scale(env, &why);
        if (scale == 0)
            scale_fail("MCR_TEST_TIME_SCALE", env, why);
        if (ct != NULL && scale > ctest) {
            fprintf(stderr,
                    "MCR_TEST_TIME_SCALE=%s is larger than the %s this build's ctest "
                    "timeouts were configured for: ctest would kill the test early. "
                    "Reconfigure with MCR_TEST_TIME_SCALE=%s in the environment of "
                    "cmake (or -DMCR_TEST_TIME_SCALE=%s)\n",
                    env, ct, env, env);
            fflush(stderr);
            _Exit(2);
        }
        return scale;
    }
    return ct != NULL ? ctest : 1.0;
}

static double tu_scale; /* 0 until resolved */

double mcr_test_time_scale(void)
{
    if (tu_scale == 0)
        tu_scale = resolve_scale();
    return tu_scale;
}

int mcr_test_ms(int ms)
{
    double v;
    int r;

    if (ms <= 0)
        return ms;
    v = (double)ms * mcr_test_time_scale();
    if (v >= (double)INT_MAX)
        return INT_MAX;
    r = (int)v; /* truncated: round up, without libm's ceil */
    return (double)r < v ? r + 1 : r;
}

double mcr_test_sec(double sec)
{
    return sec * mcr_test_time_scale();
}

int64_t mcr_test_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t mcr_test_now_ms(void)
{
    return mcr_test_now_ns() / 1000000;
}

/* Before main(): resolve the scale (so a bad value stops the program before
 * any test or server starts) and hand it to Check, whose tcase_create() and
 * tcase_set_timeout() multiply every timeout by CK_TIMEOUT_MULTIPLIER. An
 * explicit CK_TIMEOUT_MULTIPLIER is left as it is. */
__attribute__((constructor)) static void tu_time_scale_init(void)
{
    char buf[32];
    double s = mcr_test_time_scale();

    if (getenv("CK_TIMEOUT_MULTIPLIER") == NULL) {
        snprintf(buf, sizeof(buf), "%.17g", s);
        setenv("CK_TIMEOUT_MULTIPLIER", buf, 1);
    }
}
