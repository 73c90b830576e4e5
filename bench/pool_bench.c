/* SPDX-License-Identifier: BSD-3-Clause */
/* pool_bench.c: bench_pool's checks of every reply (value bytes, flags, key) and its latency buffer, shared by the clients' runs. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchutil.h"
#include "pool_bench.h"

void need_lat(size_t n)
{
    if (n > W.lat_cap) {
        free(W.lat);
        W.lat = bench_xmalloc(n * sizeof(*W.lat));
        W.lat_cap = n;
    }
}

size_t key_index(const char *k, size_t len)
{
    size_t v = 0, i = 0;
    for (; i < len && k[i] >= '0' && k[i] <= '9'; i++)
        v = v * 10 + (size_t)(k[i] - '0');
    if (i == 0 || i == len || k[i] != ':' || v >= W.n)
        return SIZE_MAX;
    if (W.len[v] != len || memcmp(W.key[v], k, len) != 0)
        return SIZE_MAX;
    return v;
}

void check_value(checker *c, size_t i, const char *v, size_t vlen, uint32_t flags)
{
    const char *want = W.val + i * VALUE_LEN;
    if (vlen != VALUE_LEN || memcmp(v, want, VALUE_LEN) != 0)
        bench_bad(c, "key %zu \"%s\": value \"%.*s\" (%zu bytes), want \"%.*s\"", i, W.key[i],
            (int)(vlen < 60 ? vlen : 60), v, vlen, 60, want);
    else if (flags != (uint32_t)i)
        bench_bad(c, "key %zu \"%s\": flags %" PRIu32 ", want %zu", i, W.key[i], flags, i);
}
