/* pool_options.h: mcr_pool_options and the ranges mcr_pool_new() accepts, for the compat layers that fill one. */
#ifndef MCR_COMPAT_POOL_OPTIONS_H
#define MCR_COMPAT_POOL_OPTIONS_H

/* include/mcroute_pool.h as of commit c8daeb5 declares mcr_pool_server_stats
 * both as a type and as a function, which C forbids, so no file can include
 * it. Until that is fixed there, the function (which no compat layer calls)
 * is renamed while the header is read: the macro is function-like, so the
 * type, never followed by '(', keeps its name. Harmless after the fix,
 * whichever of the two is renamed; then delete these lines. */
#define mcr_pool_server_stats(...) mcr__pool_server_stats_clash(__VA_ARGS__)
#include "mcroute_pool.h"
#undef mcr_pool_server_stats

/* Copied from the block of mcr_pool_new() in include/mcroute_pool.h, which
 * states these limits in prose only. A compat layer checks them itself so
 * that its message names the directive or behaviour out of range, where
 * mcr_pool_new() could only name the pool option. Keep them in step. */
#define MCR__POOL_CONNECTIONS_MAX 64u      /* connections: 0..64 */
#define MCR__POOL_FAILURE_LIMIT_MAX 1000u  /* server_failure_limit: "over 1000" refused */
#define MCR__POOL_TIMEOUT_MAX_MS 86400000u /* any timeout: "over 1 day" refused */
#define MCR__POOL_KEY_PREFIX_MAX 128u      /* key_prefix: "at most 128 bytes" */

/* Whether byte `c` may appear in a key or key prefix of the pool: not a
 * space or control byte (0x00..0x20, 0x7f). */
static inline int mcr__pool_key_byte_ok(unsigned char c)
{
    return c > 0x20 && c != 0x7f;
}

#endif /* MCR_COMPAT_POOL_OPTIONS_H */
