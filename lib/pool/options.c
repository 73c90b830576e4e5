/* SPDX-License-Identifier: BSD-3-Clause */
/* options.c: names of ops, replies and policies; the pool's options checked and defaulted. */
#include "pool_internal.h"

#define PREFIX_MAX MCR_POOL_PREFIX_MAX
#define CONN_MAX MCR_POOL_CONNECTIONS_MAX

/* ------------------------------------------------------------ names, options */

static const char *const op_names[MCR_OP_COUNT] = {
    "get", "gets", "gat", "gats", "set", "add", "replace", "append", "prepend", "cas",
    "delete", "incr", "decr", "touch", "version", "stats", "flush_all", "noop",
};

const char *mcr_op_name(mcr_op op)
{
    return (unsigned)op < MCR_OP_COUNT ? op_names[op] : "unknown";
}

const char *mcr_reply_name(mcr_reply r)
{
    static const char *const names[] = { "hit", "miss", "stored", "not_stored", "exists",
                                         "deleted", "touched", "number", "ok", "version",
                                         "stats" };
    return (unsigned)r < sizeof(names) / sizeof(names[0]) ? names[r] : "unknown";
}

static const char *const policy_names[] = { "fail-fast", "eject", "failover" };

const char *mcr_policy_name(mcr_policy p)
{
    return (unsigned)p < 3 ? policy_names[p] : "unknown";
}

int mcr_policy_from_name(const char *name, mcr_policy *out)
{
    if (name == NULL || out == NULL)
        return MCR_ERR_INVALID;
    for (unsigned i = 0; i < 3; i++)
        if (strcmp(name, policy_names[i]) == 0) {
            *out = (mcr_policy)i;
            return MCR_OK;
        }
    return MCR_ERR_UNKNOWN;
}

void mcr_pool_options_init(mcr_pool_options *o)
{
    if (o != NULL)
        memset(o, 0, sizeof(*o));
}

#define DAY_MS MCR_POOL_TIMEOUT_MAX_MS
/* queue_timeout_ms left 0: this many request timeouts. A request behind
 * full connections waits for those ahead of it to be answered: a few
 * request timeouts let a busy server work through a burst, and bound the
 * wait behind one that has stopped answering, which would otherwise last a
 * request timeout for each round of connections timing out ahead of it,
 * until the failure limit downs the server. */
#define QUEUE_TIMEOUTS 4u

int mcr__pool_options_normalize(const mcr_pool_options *in, mcr_pool_options *o, mcr_error *err)
{
    if (in != NULL)
        *o = *in;
    else
        memset(o, 0, sizeof(*o));
    if (!mcr__zeroed(o->reserved, sizeof(o->reserved)))
        return mcr__pool_fail(err, MCR_ERR_INVALID,
                              "mcr_pool_options: the reserved area is not zero (fill the "
                              "struct from all-zero: mcroute.h)");
    if (o->connections == 0)
        o->connections = 1;
    if (o->connections > CONN_MAX)
        return mcr__pool_fail(err, MCR_ERR_RANGE, "connections %u is over %d", o->connections,
                              CONN_MAX);
    if (o->connect_timeout_ms == 0)
        o->connect_timeout_ms = 1000;
    if (o->request_timeout_ms == 0)
        o->request_timeout_ms = 1000;
    if (o->connect_timeout_ms > DAY_MS || o->request_timeout_ms > DAY_MS)
        return mcr__pool_fail(err, MCR_ERR_RANGE, "a timeout over one day (%u ms, %u ms)",
                              o->connect_timeout_ms, o->request_timeout_ms);
    if (o->queue_timeout_ms == 0)
        o->queue_timeout_ms = o->request_timeout_ms > DAY_MS / QUEUE_TIMEOUTS
                                  ? DAY_MS
                                  : o->request_timeout_ms * QUEUE_TIMEOUTS;
    if (o->queue_timeout_ms > DAY_MS)
        return mcr__pool_fail(err, MCR_ERR_RANGE, "queue_timeout_ms %u is over one day",
                              o->queue_timeout_ms);
    if ((unsigned)o->policy > MCR_POLICY_FAILOVER)
        return mcr__pool_fail(err, MCR_ERR_RANGE, "unknown failure policy %d", (int)o->policy);
    if (o->protocol != MCR_PROTO_TEXT && o->protocol != MCR_PROTO_META)
        return mcr__pool_fail(err, MCR_ERR_RANGE, "unknown protocol %d", (int)o->protocol);
    if (o->server_failure_limit == 0)
        o->server_failure_limit = 2;
    if (o->server_failure_limit > 1000)
        return mcr__pool_fail(err, MCR_ERR_RANGE, "server_failure_limit %u is over 1000",
                              o->server_failure_limit);
    if (o->retry_timeout_ms == 0)
        o->retry_timeout_ms = 30000;
    if (o->retry_timeout_ms > DAY_MS)
        return mcr__pool_fail(err, MCR_ERR_RANGE, "retry_timeout_ms %u is over one day",
                              o->retry_timeout_ms);
    if (o->retry_max_ms == 0)
        o->retry_max_ms = o->retry_timeout_ms > DAY_MS / 16 ? DAY_MS : o->retry_timeout_ms * 16;
    if (o->retry_max_ms > DAY_MS)
        return mcr__pool_fail(err, MCR_ERR_RANGE, "retry_max_ms %u is over one day",
                              o->retry_max_ms);
    if (o->retry_max_ms < o->retry_timeout_ms)
        o->retry_max_ms = o->retry_timeout_ms;
    if (o->max_value_size == 0)
        o->max_value_size = 1u << 20;
    if (o->max_value_size > MCR_POOL_VALUE_MAX)
        return mcr__pool_fail(err, MCR_ERR_RANGE, "max_value_size %zu is over 1 GiB",
                              o->max_value_size);
    if (o->max_in_flight == 0)
        o->max_in_flight = 1024;
    if (!(o->bounded_epsilon >= 0) || o->bounded_epsilon > MCR_POOL_EPSILON_MAX)
        return mcr__pool_fail(err, MCR_ERR_RANGE, "bounded_epsilon %g is outside 0..%g",
                              o->bounded_epsilon, MCR_POOL_EPSILON_MAX);
    if (o->key_prefix != NULL && o->key_prefix[0] != '\0') {
        size_t n = strlen(o->key_prefix);
        if (n > PREFIX_MAX || !mcr__proto_key_ok(o->key_prefix, n, PREFIX_MAX))
            return mcr__pool_fail(err, MCR_ERR_RANGE,
                                  "key_prefix must be 1..%d bytes without space or control byte",
                                  PREFIX_MAX);
    }
    return MCR_OK;
}
