/* SPDX-License-Identifier: BSD-3-Clause */
/* testutil.c: seeded randomness, the time scale of timing-bound limits, temporary directories and files, the CLI's path, and the common main() of the Check suites. */
#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700 /* nftw, mkdtemp */
#endif
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

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
#if defined(__SANITIZE_ADDRESS__)
#define TU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TU_ASAN 1
#endif
#endif
#ifndef TU_ASAN
#define TU_ASAN 0
#endif

int tu_case_divisor(void)
{
    return TU_TSAN ? TU_TSAN_CASE_DIVISOR : TU_ASAN ? TU_ASAN_CASE_DIVISOR : 1;
}

int tu_cases(int n)
{
    int d = tu_case_divisor();
    if (d == 1 || n <= 1)
        return n;
    return (n + d - 1) / d;
}

static int tu_in_run; /* inside tu_run()'s srunner_run_all() */

void tu_add_cases(Suite *s, const tu_case *cases, size_t n, double timeout_s, SFun teardown)
{
    for (size_t i = 0; i < n; i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_set_timeout(tc, timeout_s);
        if (teardown != NULL)
            tcase_add_checked_fixture(tc, NULL, teardown);
        tcase_add_test(tc, cases[i].test);
        suite_add_tcase(s, tc);
    }
}

int tu_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    int failed;

    printf("seed: 0x%llx (set MCR_TEST_SEED to change), time scale %g "
           "(MCR_TEST_TIME_SCALE)%s\n",
           (unsigned long long)tu_seed(), mcr_test_time_scale(),
           TU_TSAN   ? ", random cases 1/" MCR_TU_STR(TU_TSAN_CASE_DIVISOR)
                       " of the full counts (a TSan build)"
           : TU_ASAN ? ", random cases 1/" MCR_TU_STR(TU_ASAN_CASE_DIVISOR)
                       " of the full counts (an ASan build)"
                     : "");
    fflush(stdout);
    tu_in_run = 1;
    srunner_run_all(sr, CK_NORMAL);
    tu_in_run = 0;
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

/* ------------------------------------------------------------ files */


/* Fail with a message: the test, with ck_abort_msg(), inside a suite's run;
 * the program (exit status 1) outside one, where Check has no test to fail
 * (a suite's main() before tu_run(), or a program that does not use it). */
static void tu_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void tu_fail(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (tu_in_run)
        ck_abort_msg("%s", msg);
    fprintf(stderr, "%s\n", msg);
    fflush(stderr);
    exit(EXIT_FAILURE);
}

/* The directories tu_tmpdir() made and tu_tmpdir_free() has not removed
 * yet, each with the process that made it: a forked Check child inherits
 * its parent's list, and must neither remove the parent's directories at
 * its exit nor be allowed to remove them by tu_tmpdir_free(). */
#define TU_DIRS_MAX 64
static struct {
    char *path;
    pid_t owner;
} tu_dirs[TU_DIRS_MAX];
static int tu_dirs_hooked; /* atexit(tu_dirs_sweep) done */

static const char *tu_tmp_root(void)
{
    const char *t = getenv("TMPDIR");
    return t != NULL && *t != '\0' ? t : "/tmp";
}

static char *tu_template(const char *tag)
{
    const char *root = tu_tmp_root();
    size_t n = strlen(root) + strlen(tag) + sizeof("/mcr--XXXXXX");
    char *path = malloc(n);

    if (path == NULL)
        tu_fail("temporary path for %s: out of memory", tag);
    snprintf(path, n, "%s/mcr-%s-XXXXXX", root, tag);
    return path;
}

static size_t tu_removed; /* entries tu_rm_entry() removed in this walk */

static int tu_rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    if (remove(path) != 0) {
        int e = errno;
        /* not tu_fail(): that would longjmp or exit out of nftw */
        fprintf(stderr, "tu_tmpdir_free: remove %s: %s\n", path, strerror(e));
        errno = e;
        return -1;
    }
    if (ftw->level > 0)
        tu_removed++;
    (void)type;
    return 0;
}

/* Remove `path` and everything below it; 0, or -1 with errno's text on stderr. */
static int tu_rm_tree(const char *path)
{
    tu_removed = 0;
    return nftw(path, tu_rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

/* At exit: the directories this process made and did not remove (a failed
 * assertion skipped the test's tu_tmpdir_free()). */
static void tu_dirs_sweep(void)
{
    for (int i = 0; i < TU_DIRS_MAX; i++) {
        if (tu_dirs[i].path == NULL || tu_dirs[i].owner != getpid())
            continue;
        const char *keep = getenv("MCR_TEST_KEEP");
        if (keep != NULL && strcmp(keep, "1") == 0)
            printf("kept %s\n", tu_dirs[i].path);
        else
            tu_rm_tree(tu_dirs[i].path);
        free(tu_dirs[i].path);
        tu_dirs[i].path = NULL;
    }
}

char *tu_tmpdir(const char *tag)
{
    char *path = tu_template(tag);
    int slot = -1;

    for (int i = 0; i < TU_DIRS_MAX && slot < 0; i++)
        if (tu_dirs[i].path == NULL)
            slot = i;
    if (slot < 0)
        tu_fail("tu_tmpdir(%s): more than %d directories not yet freed", tag, TU_DIRS_MAX);
    if (mkdtemp(path) == NULL)
        tu_fail("mkdtemp %s: %s", path, strerror(errno));
    if (!tu_dirs_hooked) {
        atexit(tu_dirs_sweep);
        tu_dirs_hooked = 1;
    }
    tu_dirs[slot].path = path;
    tu_dirs[slot].owner = getpid();
    return path;
}

size_t tu_tmpdir_free(char *dir)
{
    const char *keep = getenv("MCR_TEST_KEEP");
    int slot = -1;

    if (dir == NULL)
        return 0;
    for (int i = 0; i < TU_DIRS_MAX && slot < 0; i++)
        if (tu_dirs[i].path == dir && tu_dirs[i].owner == getpid())
            slot = i;
    if (slot < 0)
        tu_fail("tu_tmpdir_free(%s): not a directory tu_tmpdir() made in this process", dir);
    tu_dirs[slot].path = NULL;
    if (keep != NULL && strcmp(keep, "1") == 0) {
        printf("kept %s\n", dir);
        free(dir);
        return 0;
    }
    if (tu_rm_tree(dir) != 0) {
        int e = errno;
        tu_fail("tu_tmpdir_free: could not remove %s: %s (see stderr)", dir, strerror(e));
    }
    free(dir);
    return tu_removed;
}

char *tu_temp_file(const char *tag, const void *data, size_t len)
{
    char *path = tu_template(tag);
    int fd = mkstemp(path);

    if (fd < 0)
        tu_fail("mkstemp %s: %s", path, strerror(errno));
    for (size_t off = 0; off < len;) {
        ssize_t w = write(fd, (const char *)data + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            tu_fail("write %s: %s", path, w < 0 ? strerror(errno) : "wrote nothing");
        off += (size_t)w;
    }
    if (close(fd) != 0)
        tu_fail("close %s: %s", path, strerror(errno));
    return path;
}

void tu_temp_file_free(char *path)
{
    if (path == NULL)
        return;
    if (unlink(path) != 0)
        tu_fail("unlink %s: %s", path, strerror(errno));
    free(path);
}

void tu_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");

    if (f == NULL)
        tu_fail("open %s for writing: %s", path, strerror(errno));
    if (fwrite(data, 1, len, f) != len) {
        int e = errno;
        fclose(f);
        tu_fail("write %zu bytes to %s: %s", len, path, strerror(e));
    }
    if (fclose(f) != 0)
        tu_fail("close %s: %s", path, strerror(errno));
}

char *tu_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    size_t cap = 1 << 16, n = 0, r;
    char *buf;

    if (f == NULL)
        tu_fail("open %s: %s", path, strerror(errno));
    buf = malloc(cap + 1);
    if (buf == NULL)
        tu_fail("read %s: out of memory", path);
    while ((r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            char *b = realloc(buf, (cap *= 2) + 1);
            if (b == NULL) {
                free(buf);
                fclose(f);
                tu_fail("read %s: out of memory past %zu bytes", path, n);
            }
            buf = b;
        }
    }
    if (ferror(f)) {
        int e = errno;
        free(buf);
        fclose(f);
        tu_fail("read %s: %s", path, strerror(e));
    }
    fclose(f);
    buf[n] = '\0';
    if (len != NULL)
        *len = n;
    return buf;
}

/* ------------------------------------------------------------ the CLI */

static const char *tu_env_dir(const char *var)
{
    const char *v = getenv(var);
    if (v == NULL || *v == '\0')
        tu_fail("%s is not set: run the suite with ctest, or set it as "
                     "test/CMakeLists.txt does", var);
    return v;
}

const char *tu_cli_path(void)
{
    static char path[4096];
    const char *dir = tu_env_dir("MCR_TEST_BIN_DIR");

    if ((size_t)snprintf(path, sizeof(path), "%s/mcroute", dir) >= sizeof(path))
        tu_fail("MCR_TEST_BIN_DIR is too long (%zu bytes)", strlen(dir));
    return path;
}

const char *tu_src_dir(void)
{
    return tu_env_dir("MCR_TEST_SRC_DIR");
}

int mcr_test_zeroed(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != 0)
            return 0;
    return 1;
}
