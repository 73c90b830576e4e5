/* SPDX-License-Identifier: BSD-3-Clause */
/* mcroute_memcached_st.h: an mcroute ring equivalent to a live libmemcached handle.
 * Library: libmcroute_libmemcached, `pkg-config --cflags --libs
 * mcroute-libmemcached` (and libmcroute and libmemcached).
 *
 * INTRODUCTION
 *
 * An application that already configured a memcached_st (with memcached(),
 * memcached_server_add*(), memcached_behavior_set(), ...) can adopt mcroute
 * beside it without restating its configuration: mcr_memcached_st_ring()
 * reads the handle and returns a ring that places every key on the same
 * server as memcached_generate_hash() / memcached_server_by_key() would.
 * Index i of the ring is position i of memcached_server_instance_by_position().
 *
 * This is a separate library, libmcroute_libmemcached, because it links
 * libmemcached; link with -lmcroute_libmemcached -lmcroute -lmemcached.
 *
 * How it works. Only libmemcached's public API and the public fields of
 * struct memcached_st are used. Most of the placement state is readable
 * there: the servers and their order, the distribution, the key hash, the
 * weighting flag (memc->ketama.weighted_), the namespace and
 * HASH_WITH_NAMESPACE. Two things are not, and are found by probing the
 * handle with memcached_generate_hash(), which is pure computation (it
 * never connects):
 *
 *   - the hash that valued the labels of the continuum: libmemcached uses
 *     the key hash in force when the continuum was last rebuilt, which may
 *     differ from the current one. Every hash libmemcached accepts is a
 *     candidate. Those whose ring agrees with the handle on a few hundred
 *     fixed probe keys are kept, and each of them is checked against the
 *     continuum libmemcached itself builds with that hash on a private
 *     handle (a hash libmemcached refuses cannot have valued the labels).
 *     With a key hash of 32-bit values, in practice one candidate remains
 *     (a wrong one agrees with the handle on about 1/servers of the keys).
 *     With crc,
 *     whose values are 0..32767, several can: two candidates whose rings
 *     place every value the key hash can produce alike are equivalent, and
 *     no key can tell which one the handle used (the ring keeps one; its
 *     points, mcr_ring_point(), may then be those of the other). For two
 *     that differ, the intervals of hash values where they disagree are
 *     computed, keys hashing into them are generated (deterministically, at
 *     most 2^21 per pair) and asked of memcached_generate_hash(), which
 *     eliminates one or both; this repeats until one equivalence class is
 *     left. If no key reaches the difference, the function fails.
 *   - the weights, which only matter when weighting is on (libmemcached has
 *     no accessor for them). They are recovered from the continuum itself: a
 *     private copy of the handle (memcached_clone()) is given a hash
 *     function that returns a chosen value, which reveals the owner of any
 *     hash value. The resulting ring is checked to give the same owner as
 *     libmemcached at every point of both continua, so it is equivalent for
 *     all keys. The weights it carries (mcr_ring_server_weight()) give the
 *     same point counts as the configured ones but may differ from them.
 *
 * Every ring returned has also agreed with the handle on all the probe
 * keys; if anything cannot be matched or decided, the function fails
 * instead of returning an approximation.
 *
 * Side effects. None on `memc`. When weighting is on, the private copy is
 * made with memcached_clone() and released with memcached_free(), so clone
 * and cleanup callbacks installed on `memc`
 * (MEMCACHED_CALLBACK_CLONE_FUNCTION, MEMCACHED_CALLBACK_CLEANUP_FUNCTION)
 * run once for it. Nothing connects to a server.
 *
 * Thread-safety. The handle is only read, but libmemcached's accessors are
 * not documented as thread-safe: no other thread may use or change `memc`
 * during the call. The ring returned is immutable and may be shared (see
 * mcroute.h). It is a snapshot: later changes to `memc` do not reach it.
 */
#ifndef MCROUTE_MEMCACHED_ST_H
#define MCROUTE_MEMCACHED_ST_H

#include <libmemcached/memcached.h>

#include "mcroute.h"

#ifdef __cplusplus
extern "C" {
#endif

/* mcr_memcached_st_ring: build into *out the ring that places keys as
 * `memc` does now. The caller owns the ring (mcr_ring_free()). `memc` is
 * not modified and not connected.
 *
 * The ring uses the distribution of `memc` (modula, consistent / ketama,
 * weighted ketama, spy, spy weighted), its key hash, its server order, and
 * its namespace when HASH_WITH_NAMESPACE is on (with libmemcached's rules
 * for prefixed keys, see mcr_config_set_key_prefix()). Like libmemcached,
 * it places every key on server 0 when there is one server.
 *
 * Errors (*out unchanged, err filled):
 *   MCR_ERR_INVALID      `memc` or `out` is NULL.
 *   MCR_ERR_EMPTY        `memc` has no server.
 *   MCR_ERR_UNSUPPORTED  a state mcroute cannot reproduce: the random or
 *                        virtual-bucket distribution, a custom hash function,
 *                        a UNIX socket server, a continuum that matches no
 *                        candidate (e.g. servers ejected by AUTO_EJECT_HOSTS,
 *                        or a hash that differs from mcroute's, such as a
 *                        build of libhashkit without hsieh), or two
 *                        candidate label hashes that no generated key tells
 *                        apart (see above); the message says which.
 *   MCR_ERR_DUPLICATE    the same host and port twice (libmemcached allows it,
 *                        mcroute does not).
 *   MCR_ERR_TOO_LONG, MCR_ERR_SYNTAX, MCR_ERR_RANGE
 *                        a server mcr_config_add_server() refuses (hostname
 *                        over 255 bytes, forbidden byte, weight above
 *                        MCR_WEIGHT_MAX).
 *   MCR_ERR_NOMEM        out of memory (in mcroute or in memcached_clone()). */
MCR_EXTERN int mcr_memcached_st_ring(const memcached_st *memc, mcr_ring **out,
                                     mcr_error *err);

#ifdef __cplusplus
}
#endif

#endif /* MCROUTE_MEMCACHED_ST_H */
