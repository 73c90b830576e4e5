/* testutil.c: seeded randomness and the common main() of the Check suites. */
#include <stdio.h>
#include <stdlib.h>

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

int tu_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    int failed;

    printf("seed: 0x%llx (set MCR_TEST_SEED to change)\n", (unsigned long long)tu_seed());
    fflush(stdout);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
