/* SPDX-License-Identifier: BSD-3-Clause */
/* options_lmc.c: mcr_pool_options_from_lmc(): a pool's options from the connection behaviours and namespace of a libmemcached option handle, read through its public getters. */
#include <stdint.h>
#include <stdio.h>

#include "mcroute_libmemcached.h"
#include "pool_internal.h"

/* A timeout behaviour as libmemcached stores it: the low 32 bits, signed
 * (memcached_behavior_get() returns the int32_t widened, so a negative
 * one reads as a number near 2^64). */
static int32_t lmc_i32(const mcr_lmc *lmc, mcr_lmc_conn_behavior b)
{
    uint64_t v = 0;
    (void)mcr_lmc_get_conn_behavior(lmc, b, &v);
    return (int32_t)(int64_t)v;
}

/* A libmemcached millisecond timeout `v` (behaviour `name`) as a pool
 * timeout: negative (wait forever) gives 0, the pool's default; 0 (fail at
 * once) has no pool equivalent; above a day mcr_pool_new() refuses it. */
static int lmc_pool_ms(const char *name, int32_t v, unsigned *out, mcr_error *err)
{
    if (v == 0)
        return mcr__pool_fail(err, MCR_ERR_RANGE,
                              "MEMCACHED_BEHAVIOR_%s is 0: libmemcached then fails at once, "
                              "which a connection pool cannot do (its 0 means the default)",
                              name);
    if (v > 0 && (uint32_t)v > MCR_POOL_TIMEOUT_MAX_MS)
        return mcr__pool_fail(err, MCR_ERR_RANGE,
                              "MEMCACHED_BEHAVIOR_%s %ld ms is above the connection pool's limit "
                              "of %u ms (one day)",
                              name, (long)v, MCR_POOL_TIMEOUT_MAX_MS);
    *out = v > 0 ? (unsigned)v : 0;
    return MCR_OK;
}

int mcr_pool_options_from_lmc(mcr_pool_options *opts, const mcr_lmc *lmc, mcr_error *err)
{
    mcr_pool_options o;
    int rc;

    if (lmc == NULL || opts == NULL)
        return mcr__pool_fail(err, MCR_ERR_INVALID, "NULL mcr_lmc or options");
    o = *opts;
    rc = lmc_pool_ms("CONNECT_TIMEOUT", lmc_i32(lmc, MCR_LMC_CONNECT_TIMEOUT),
                     &o.connect_timeout_ms, err);
    if (rc != MCR_OK)
        return rc;
    /* Sockets are always non-blocking in libmemcached (connect.cc): every
     * wait for a reply is a poll() bounded by POLL_TIMEOUT (io.cc), and
     * SO_RCVTIMEO / SO_SNDTIMEO never expire. */
    rc = lmc_pool_ms("POLL_TIMEOUT", lmc_i32(lmc, MCR_LMC_POLL_TIMEOUT), &o.request_timeout_ms,
                     err);
    if (rc != MCR_OK)
        return rc;
    /* Seconds. 0 or negative: retried once the clock has passed
     * next_retry, at the latest a second later; 1 ms is the closest. */
    int32_t retry = lmc_i32(lmc, MCR_LMC_RETRY_TIMEOUT);
    if (retry > 0 && (uint32_t)retry > MCR_POOL_TIMEOUT_MAX_MS / 1000)
        return mcr__pool_fail(err, MCR_ERR_RANGE,
                              "MEMCACHED_BEHAVIOR_RETRY_TIMEOUT %ld s is above the connection "
                              "pool's limit of %u s (one day)",
                              (long)retry, MCR_POOL_TIMEOUT_MAX_MS / 1000);
    o.retry_timeout_ms = retry > 0 ? (unsigned)retry * 1000u : 1u;
    uint64_t limit = 0, eject = 0;
    (void)mcr_lmc_get_conn_behavior(lmc, MCR_LMC_SERVER_FAILURE_LIMIT, &limit);
    (void)mcr_lmc_get_conn_behavior(lmc, MCR_LMC_REMOVE_FAILED_SERVERS, &eject);
    if (limit == 0 || limit > MCR_POOL_FAILURE_LIMIT_MAX)
        return mcr__pool_fail(err, MCR_ERR_RANGE,
                              "MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT %lu is outside the "
                              "connection pool's 1..%u",
                              (unsigned long)limit, MCR_POOL_FAILURE_LIMIT_MAX);
    o.server_failure_limit = (unsigned)limit;
    o.policy = eject ? MCR_POLICY_EJECT : MCR_POLICY_FAIL_FAST;
    size_t ns_len = 0;
    const char *ns = mcr_lmc_namespace(lmc, &ns_len);
    if (ns != NULL) {
        char q[72];
        for (size_t i = 0; i < ns_len; i++)
            if ((unsigned char)ns[i] <= 0x20 || (unsigned char)ns[i] == 0x7f)
                return mcr__pool_fail(err, MCR_ERR_RANGE,
                                      "the namespace \"%s\" has a space or control byte, which "
                                      "the connection pool's key prefix cannot carry",
                                      mcr__quote(q, sizeof(q), ns, ns_len));
        o.key_prefix = ns; /* at most 127 bytes: within the pool's 128 */
    } else {
        o.key_prefix = NULL;
    }
    *opts = o;
    return MCR_OK;
}
