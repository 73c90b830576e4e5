/* testutil.h: helpers shared by the Check suites: a seeded RNG, random keys, suite runner. */
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
