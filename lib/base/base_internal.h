/* SPDX-License-Identifier: BSD-3-Clause */
/* base_internal.h: what every layer of mcroute shares (never installed): attributes, loads, index sets, errors, quoting. */
#ifndef MCR_BASE_INTERNAL_H
#define MCR_BASE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "mcroute.h"

#if defined(__GNUC__)
#define MCR__PRINTF(f, a) __attribute__((format(printf, f, a)))
#define MCR__LIKELY(x) __builtin_expect(!!(x), 1)
#define MCR__UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define MCR__PRINTF(f, a)
#define MCR__LIKELY(x) (x)
#define MCR__UNLIKELY(x) (x)
#endif

/* Little-endian 32-bit load from any address: what MD5 and the Murmur
 * hashes read their input as. memcpy() is how C spells an unaligned load;
 * compilers turn it into one mov. */
static inline uint32_t mcr__load_le32(const unsigned char *p)
{
#if defined(__BYTE_ORDER__) && defined(__ORDER_BIG_ENDIAN__) && \
    __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
#else
    uint32_t v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
#endif
}

/* ---- index sets (slotset.c) ---- */

/* An open-addressing set of indexes into a caller's array (stored as
 * index + 1, 0 = empty): the O(1) duplicate checks of configs (host:port,
 * ids) and of mcr_lmc. The caller hashes keys (mcr__slot_hash) and says
 * when an entry equals a key; it keeps the set at most half full with
 * mcr__slotset_resize, which empties it (then put every entry again). */
typedef struct mcr__slotset {
    uint32_t *slots;
    size_t cap; /* a power of two, or 0 */
} mcr__slotset;

typedef bool (*mcr__slot_eq)(const void *ctx, size_t idx, const void *key);

/* FNV-1a 64 of `len` bytes then `extra` (a port, or 0), folded to size_t. */
size_t mcr__slot_hash(const void *bytes, size_t len, uint64_t extra);
/* The index equal to `key`, or -1. */
long mcr__slotset_find(const mcr__slotset *s, size_t hash, mcr__slot_eq eq, const void *ctx,
                       const void *key);
/* Enter idx; the set must have room (cap > 2 * entries). */
void mcr__slotset_put(mcr__slotset *s, size_t hash, size_t idx);
/* Empty the set with room for `want` entries. MCR_OK, or MCR_ERR_NOMEM with
 * the old set (and its entries) kept. */
int mcr__slotset_resize(mcr__slotset *s, size_t want);
void mcr__slotset_clear(mcr__slotset *s);
void mcr__slotset_free(mcr__slotset *s);

/* ---- errors (error.c) ---- */

/* Fill `err` (if not NULL) with `code` and a formatted message; returns
 * `code` so callers can `return mcr__error(err, MCR_ERR_RANGE, ...)`. */
int mcr__error(mcr_error *err, int code, const char *fmt, ...) MCR__PRINTF(3, 4);

/* 1 when the `n` bytes at `p` are all zero: a public struct's reserved
 * area (mcroute.h, "Structs that grow"). */
int mcr__zeroed(const void *p, size_t n);

/* A system call or resource failed with errno value `e`: MCR_ERR_SYSTEM
 * (MCR_ERR_NOMEM when e is ENOMEM), e kept in err->sys_errno, and the
 * message followed by ": " and strerror(e). Returns the code. */
int mcr__error_sys(mcr_error *err, int e, const char *fmt, ...) MCR__PRINTF(3, 4);

/* Write `len` bytes of `s` into `out` (size `cap`, NUL-terminated), quoting
 * non-printable bytes as \xNN and cutting long text with "...": for messages
 * that name user input. Returns `out`. */
const char *mcr__quote(char *out, size_t cap, const char *s, size_t len);

/* After getline() on `f` returned -1 (errno cleared before the call): MCR_OK
 * at the end of the file; else MCR_ERR_NOMEM "out of memory reading WHAT
 * PATH" (a buffer that could not grow: ENOMEM, with the stream's error flag
 * (POSIX.1-2024, musl) or without it (glibc)) or MCR_ERR_IO "error reading
 * WHAT PATH: reason". A -1 before the end is never taken for the end. */
int mcr__read_end(FILE *f, const char *what, const char *path, mcr_error *err);

/* 1 if a and b are equal ignoring ASCII case, else 0. Names are ASCII, and
 * strcasecmp() would follow the process locale (a Turkish locale folds 'I'
 * differently). */
int mcr__ascii_caseeq(const char *a, const char *b);

#endif /* MCR_BASE_INTERNAL_H */
