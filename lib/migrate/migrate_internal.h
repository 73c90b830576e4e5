/* SPDX-License-Identifier: BSD-3-Clause */
/* migrate_internal.h: what the files of libmcroute_migrate share: one metadump line parsed (metadump.c), a server's metadump read (dump.c); never installed. */
#ifndef MCR_MIGRATE_INTERNAL_H
#define MCR_MIGRATE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "mcroute.h"

/* ---- one metadump line (metadump.c, a leaf) ---- */

/* memcached's longest key. */
#define MCR__MD_KEY_MAX 250
/* The longest metadump line accepted (without its newline): a key of 250
 * bytes, each encoded as %XX, and the other fields take under 1 KiB; more
 * is not memcached's output. */
#define MCR__MD_LINE_MAX 4096

/* One item of `lru_crawler metadump`, as memcached 1.6 prints it:
 *   key=<url-encoded> exp=<n> la=<n> cas=<n> fetch=<yes|no> cls=<n> size=<n>
 * (memcached's crawler.c, crawler_metadump_eval; exp and la are Unix
 * times, exp -1 for an item that never expires). */
typedef struct mcr__md_item {
    char key[MCR__MD_KEY_MAX + 1]; /* decoded, NUL-terminated (may hold NULs) */
    size_t key_len;
    int64_t exp;       /* -1: never; else a Unix time, > 0 */
    uint64_t la;       /* last access, Unix time */
    uint64_t cas;
    int fetched;       /* fetch=yes */
    uint32_t cls;      /* slab class */
    uint64_t size;     /* the item's size in memory, header included */
} mcr__md_item;

/* mcr__md_parse: parse one line (`len` bytes, no newline) into *out.
 * Strict: the seven fields in that order, each exactly once, separated by
 * one space; numbers plain decimal within their type; the key 1 to 250
 * bytes once decoded, every '%' followed by two hex digits. Fields after
 * the seven, each NAME=VALUE, are accepted and ignored (later memcached
 * versions append some). Returns 0, or -1 with `why` (cap bytes,
 * NUL-terminated) saying what is wrong, without quoting the line. */
int mcr__md_parse(const char *line, size_t len, mcr__md_item *out, char *why, size_t cap);

/* ---- a server's metadump (dump.c) ---- */

/* Called for each line of the dump before END (without its newline);
 * returns MCR_OK to go on, anything else to stop the dump with that status
 * (the callback fills `err` itself). */
typedef int (*mcr__dump_line_fn)(const char *line, size_t len, void *arg, mcr_error *err);

/* Called between reads (at least every 100 ms while the server is silent),
 * for progress reports and the stop flag: returns MCR_OK to go on, anything
 * else to stop the dump with that status (filling `err`). */
typedef int (*mcr__dump_tick_fn)(void *arg, mcr_error *err);

/* mcr__dump_run: connect to host:port (numeric or a name; IPv4 or IPv6)
 * within timeout_ms, send "lru_crawler metadump hash\r\n" alone on the new
 * connection, and call `fn` for every line until END. Blocking; each wait
 * for the server (connect, every read) is at most timeout_ms, so a dump of
 * any size works while a server that stalls fails. Returns MCR_OK, what a
 * callback returned, or MCR_ERR_CONNECT (refused, reset, closed before
 * END, unresolvable), MCR_ERR_TIMEOUT, MCR_ERR_SERVER (the server answered
 * an error: its text quoted, "metadump not allowed" for memcached -X),
 * MCR_ERR_PROTOCOL (a line over MCR__MD_LINE_MAX bytes), MCR_ERR_NOMEM;
 * `err` names the address and the problem (the caller adds the server's
 * id). `tick` may be NULL. */
int mcr__dump_run(const char *host, int port, unsigned timeout_ms, mcr__dump_line_fn fn,
                  mcr__dump_tick_fn tick, void *arg, mcr_error *err);

#endif
