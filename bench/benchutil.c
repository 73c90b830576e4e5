/* SPDX-License-Identifier: BSD-3-Clause */
/* benchutil.c: what the benchmark programs share: a clock, allocation, a fixed random sequence, medians. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "benchutil.h"

uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void bench_sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void *bench_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL) {
        fprintf(stderr, "%s: out of memory (%zu bytes)\n", bench_program, n);
        exit(1);
    }
    return p;
}

uint64_t bench_next_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, unsigned n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

void bench_bad(bench_checker *c, const char *fmt, ...)
{
    if (c->bad++ < BENCH_MAX_MESSAGES) {
        va_list ap;
        va_start(ap, fmt);
        printf("FAIL %s: ", c->what);
        vprintf(fmt, ap);
        printf("\n");
        fflush(stdout);
        va_end(ap);
    }
}

unsigned bench_arg_uint(const char *prog, const char *name, const char *v, unsigned lo,
                        unsigned hi)
{
    char *end;
    unsigned long x = strtoul(v, &end, 10);
    if (*v == '\0' || *end != '\0' || x < lo || x > hi) {
        fprintf(stderr, "%s: %s wants a number in %u..%u, not '%s'\n", prog, name, lo, hi, v);
        exit(2);
    }
    return (unsigned)x;
}
