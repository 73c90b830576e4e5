/* SPDX-License-Identifier: BSD-3-Clause */
/* pool_lmc.c: bench_pool's libmemcached reference: its setup on the servers (KETAMA_WEIGHTED md5, buffered requests), the set-batch sentinels, and its checked gets, sets and multi-gets. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <libmemcached/memcached.h>

#include "benchutil.h"
#include "mcroute.h"
#include "mcroute_pool.h"
#include "pool_bench.h"
#include "pool_lmc.h"

/* libmemcached's side of the world. */
static struct {
    memcached_st *memc;
    memcached_result_st result;
    bool result_ok;

    /* one key per server for closing libmemcached set batches */
    char sentinel[NSERVERS][KEY_MAX];
    size_t sentinel_len[NSERVERS];
    const char *sentinel_ptr[NSERVERS];
} L;

/* ------------------------------------------------------------ setup */

bool lmc_setup(void)
{
    memcached_return_t rc = MEMCACHED_SUCCESS;
    L.memc = memcached_create(NULL);
    if (L.memc == NULL)
        return false;
    for (int i = 0; i < NSERVERS && rc == MEMCACHED_SUCCESS; i++)
        rc = memcached_server_add_with_weight(L.memc, "127.0.0.1", (in_port_t)W.mc[i].port, 1);
    if (rc == MEMCACHED_SUCCESS)
        rc = memcached_behavior_set(L.memc, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1);
    if (rc == MEMCACHED_SUCCESS)
        rc = memcached_behavior_set(L.memc, MEMCACHED_BEHAVIOR_HASH, MEMCACHED_HASH_MD5);
    if (rc == MEMCACHED_SUCCESS)
        rc = memcached_behavior_set(L.memc, MEMCACHED_BEHAVIOR_NO_BLOCK, 1);
    if (rc == MEMCACHED_SUCCESS)
        rc = memcached_behavior_set(L.memc, MEMCACHED_BEHAVIOR_BUFFER_REQUESTS, 1);
    if (rc == MEMCACHED_SUCCESS)
        rc = memcached_behavior_set(L.memc, MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
    if (rc == MEMCACHED_SUCCESS)
        rc = memcached_behavior_set(L.memc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 5000);
    if (rc != MEMCACHED_SUCCESS) {
        printf("FAIL setup: libmemcached: %s\n", memcached_strerror(L.memc, rc));
        failures++;
        return false;
    }
    L.result_ok = memcached_result_create(L.memc, &L.result) != NULL;
    return L.result_ok;
}

uint32_t lmc_server_of(const char *key, size_t len)
{
    return memcached_generate_hash(L.memc, key, len);
}

/* Pick, for each server, a key placed there (sentinels for closing
 * libmemcached set batches), and store it. */
bool lmc_setup_sentinels(void)
{
    int found = 0;
    for (unsigned k = 0; k < 100000 && found < NSERVERS; k++) {
        char key[KEY_MAX];
        int len = snprintf(key, sizeof key, "sentinel:%u", k);
        uint32_t s = lmc_server_of(key, (size_t)len);
        if (s < NSERVERS && L.sentinel_len[s] == 0) {
            memcpy(L.sentinel[s], key, (size_t)len + 1);
            L.sentinel_len[s] = (size_t)len;
            L.sentinel_ptr[s] = L.sentinel[s];
            found++;
        }
    }
    if (found < NSERVERS)
        return false;
    for (int s = 0; s < NSERVERS; s++) {
        mcr_request req = {.op = MCR_OP_SET,
                           .key = L.sentinel[s],
                           .key_len = L.sentinel_len[s],
                           .value = "sentinel",
                           .value_len = 8};
        mcr_owned_result res;
        int rc = mcr_pool_exec(W.p_direct, &req, &res);
        if (rc != MCR_OK || res.reply != MCR_REPLY_STORED) {
            printf("FAIL setup: storing sentinel %s: %s %s\n", L.sentinel[s], mcr_strerror(rc),
                   res.message);
            mcr_owned_result_clear(&res);
            failures++;
            return false;
        }
        mcr_owned_result_clear(&res);
    }
    return true;
}

void lmc_free(void)
{
    if (L.result_ok)
        memcached_result_free(&L.result);
    memcached_free(L.memc);
}

const char *lmc_version(void)
{
    return memcached_lib_version();
}

/* ------------------------------------------------------------ libmemcached runs */

/* Reads every result of the mget in progress, checking each; with `per_key`
 * W.lat[i] gets key i's latency from t0. Returns the number of results;
 * `first`/`m` bound the keys asked (m 0: any key). */
static size_t lmc_fetch_all(checker *ck, uint64_t t0, size_t first, size_t m, bool per_key)
{
    memcached_return_t rc = MEMCACHED_SUCCESS;
    memcached_result_st *r;
    size_t got = 0;

    while ((r = memcached_fetch_result(L.memc, &L.result, &rc)) != NULL) {
        uint64_t t = bench_now_ns();
        const char *k = memcached_result_key_value(r);
        size_t klen = memcached_result_key_length(r);
        size_t i = key_index(k, klen);
        got++;
        if (i == SIZE_MAX || (m && (i < first || i >= first + m))) {
            bench_bad(ck, "a result for key \"%.*s\"", (int)klen, k);
            continue;
        }
        check_value(ck, i, memcached_result_value(r), memcached_result_length(r),
                    memcached_result_flags(r));
        if (per_key)
            W.lat[i] = t - t0;
    }
    if (rc != MEMCACHED_END && rc != MEMCACHED_NOTFOUND && rc != MEMCACHED_SUCCESS)
        bench_bad(ck, "memcached_fetch_result: %s", memcached_strerror(L.memc, rc));
    return got;
}

/* Gets in batches of depth keys; W.lat[i] for key i. */
void lmc_gets(size_t n, unsigned depth, checker *ck)
{
    need_lat(n);
    for (size_t i = 0; i < n; i += depth) {
        size_t m = n - i < depth ? n - i : depth;
        uint64_t t0 = bench_now_ns();
        memcached_return_t rc = memcached_mget(L.memc, W.key + i, W.len + i, m);
        if (rc != MEMCACHED_SUCCESS) {
            bench_bad(ck, "memcached_mget: %s", memcached_strerror(L.memc, rc));
            return;
        }
        size_t got = lmc_fetch_all(ck, t0, i, m, true);
        if (got != m)
            bench_bad(ck, "mget of %zu keys from %zu: %zu results", m, i, got);
    }
}

/* Waits for every buffered set's reply: an mget of the sentinels (whose
 * values are generation 0, set once at setup) first reads and discards the
 * pending replies of each server. */
static void lmc_drain(checker *ck)
{
    memcached_return_t rc = memcached_mget(L.memc, L.sentinel_ptr, L.sentinel_len, NSERVERS);
    memcached_result_st *r;
    size_t got = 0;

    if (rc != MEMCACHED_SUCCESS) {
        bench_bad(ck, "memcached_mget of the sentinels: %s", memcached_strerror(L.memc, rc));
        return;
    }
    while ((r = memcached_fetch_result(L.memc, &L.result, &rc)) != NULL)
        got++;
    if (got != NSERVERS)
        bench_bad(ck, "sentinel mget: %zu of %d results (%s)", got, NSERVERS,
            memcached_strerror(L.memc, rc));
}

/* Sets in buffered batches of depth; each set's latency is its batch's. */
void lmc_sets(size_t n, unsigned depth, checker *ck)
{
    need_lat(n);
    for (size_t i = 0; i < n; i += depth) {
        size_t m = n - i < depth ? n - i : depth;
        uint64_t t0 = bench_now_ns();
        for (size_t j = i; j < i + m; j++) {
            memcached_return_t rc = memcached_set(L.memc, W.key[j], W.len[j],
                                                  W.val + j * VALUE_LEN, VALUE_LEN, 0,
                                                  (uint32_t)j);
            if (rc != MEMCACHED_BUFFERED && rc != MEMCACHED_SUCCESS)
                bench_bad(ck, "memcached_set of key %zu: %s", j, memcached_strerror(L.memc, rc));
        }
        lmc_drain(ck);
        uint64_t dt = bench_now_ns() - t0;
        for (size_t j = i; j < i + m; j++)
            W.lat[j] = dt;
    }
}

/* total multi-gets one after the other. */
void lmc_multiget(size_t total, checker *ck)
{
    size_t chunks = W.n / opt.mget_keys;
    need_lat(total);
    for (size_t j = 0; j < total; j++) {
        size_t first = (j % chunks) * opt.mget_keys;
        uint64_t t0 = bench_now_ns();
        memcached_return_t rc =
            memcached_mget(L.memc, W.key + first, W.len + first, opt.mget_keys);
        if (rc != MEMCACHED_SUCCESS) {
            bench_bad(ck, "memcached_mget: %s", memcached_strerror(L.memc, rc));
            return;
        }
        size_t got = lmc_fetch_all(ck, t0, first, opt.mget_keys, false);
        W.lat[j] = bench_now_ns() - t0;
        if (got != opt.mget_keys)
            bench_bad(ck, "multi-get of %u keys from %zu: %zu results", opt.mget_keys, first, got);
    }
}
