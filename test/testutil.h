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

#endif
