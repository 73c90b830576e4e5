/* SPDX-License-Identifier: BSD-3-Clause */
/* migrate_internal.h: what the files of libmcroute_migrate share: one metadump line parsed (metadump.c), a server's metadump read (dump.c), the destinations' room (room.c); never installed. */
#ifndef MCR_MIGRATE_INTERNAL_H
#define MCR_MIGRATE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "mcroute.h"
#include "mcroute_migrate.h"

/* ---- one metadump line (metadump.c, a leaf) ---- */

/* The longest metadump line accepted (without its newline): a key of 250
 * bytes, each encoded as %XX, and the other fields take under 1 KiB; more
 * is not memcached's output. */
#define MCR__MD_LINE_MAX 4096

/* One item of `lru_crawler metadump`, as memcached 1.6 prints it:
 *   key=<url-encoded> exp=<n> la=<n> cas=<n> fetch=<yes|no> cls=<n> size=<n>
 * (memcached's crawler.c, crawler_metadump_eval; exp and la are Unix
 * times, exp -1 for an item that never expires). */
typedef struct mcr__md_item {
    char key[MCR_KEY_MAX + 1]; /* decoded, NUL-terminated (may hold NULs) */
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

/* ---- the blocking connection of dump.c, shared (room.c) ---- */

/* mcr__dump_dial: a connected socket (non-blocking, close-on-exec) to one
 * of host's addresses (numeric or a name; IPv4 or IPv6), within timeout_ms
 * for each; tick as for mcr__dump_run (may be NULL). Returns the socket, or
 * a status < 0 with `err` set: MCR_ERR_CONNECT, MCR_ERR_TIMEOUT, or what
 * tick returned. */
int mcr__dump_dial(const char *host, int port, unsigned timeout_ms, mcr__dump_tick_fn tick,
                   void *arg, mcr_error *err);

/* mcr__dump_wait: wait for `events` (poll's) on fd, at most ms, calling
 * tick (may be NULL) at least every 100 ms. 1 when ready, 0 on timeout, a
 * status < 0 (tick's, or MCR_ERR_CONNECT for a poll error, `err` set). */
int mcr__dump_wait(int fd, short events, unsigned ms, mcr__dump_tick_fn tick, void *arg,
                   mcr_error *err);

/* mcr__dump_send: write the n bytes of req, each wait at most timeout_ms.
 * MCR_OK, or MCR_ERR_CONNECT, MCR_ERR_TIMEOUT, tick's status (`err` set). */
int mcr__dump_send(int fd, const char *req, size_t n, unsigned timeout_ms,
                   mcr__dump_tick_fn tick, void *arg, mcr_error *err);

/* ---- the destinations' room (room.c) ---- */

/*
 * memcached evicts items (LRU) or refuses stores ("SERVER_ERROR out of
 * memory storing object") when its memory (-m) is full, and a copy then
 * "succeeds" with keys gone. So the servers of `to` that gain keys (the
 * destinations) have their counters read (`stats`) before the first dump
 * and after the last copy: the growth of evictions,
 * slab_reassign_evictions_nomem (valid items dropped when the slab
 * rebalancer moves a page) and store_no_memory is what they lost meanwhile,
 * every client's, not only the copy's.
 */
typedef struct mcr__room mcr__room;

/* mcr__room_open: the destinations of the change from `from` to `to`: every
 * ACTIVE server of `to` that the pairs of mcr_diff_new() give keys to, or
 * that `from` has not ACTIVE at the same address (it gains all its keys);
 * every ACTIVE server of `to` when the two cannot be diffed. Reads their
 * counters, each over a new connection, each wait at most timeout_ms; a
 * server whose counters cannot be read is left out (not counted). Returns
 * MCR_OK and *out (free it with mcr__room_close), or MCR_ERR_NOMEM with
 * `err` set and *out NULL. */
int mcr__room_open(const mcr_snapshot *from, const mcr_snapshot *to, unsigned timeout_ms,
                   mcr__room **out, mcr_error *err);

/* mcr__room_refusal: 1 when a failed store's status and message are
 * memcached's refusal for want of memory ("SERVER_ERROR out of memory
 * ..."), else 0. `message` may be NULL. Cannot fail. */
int mcr__room_refusal(int status, const char *message);

/* mcr__room_close: read the counters of r's destinations again, write into
 * rep the items they evicted (rep->evicted), how many were read both times
 * (rep->ndestinations) and, when they lacked room (anything evicted, or a
 * store refused: rep->refused, the adds of the run that on_add counted, or
 * a destination's store_no_memory), the sentence naming them
 * (rep->room_message); then free r. Returns MCR_OK, or MCR_ERR_SERVER with
 * that sentence in `err` ("migrate: the destinations lack room: ..."). NULL
 * r: MCR_OK, nothing written. Allocates nothing. */
int mcr__room_close(mcr__room *r, mcr_migrate_report *rep, mcr_error *err);

/* ---- the new owners checked before a switch (verify.c) ---- */

struct event_base;
typedef struct mcr_pool mcr_pool;

/* What mcr__verify_new_owners() works with: the run's snapshots, its
 * event_base and its two pools (meta protocol: CAS and TTL), the key
 * prefix on the wire, the bounds and the stop flag of the run. */
typedef struct mcr__verify_ctx {
    const mcr_snapshot *from, *to;
    struct event_base *base;
    mcr_pool *pfrom, *pto;
    const char *prefix;
    size_t prefix_len;
    int has_prefix;
    unsigned timeout_ms, concurrency;
    const volatile int *stop;
} mcr__verify_ctx;

/* mcr__verify_new_owners: dump every ACTIVE server of `to` that gains keys
 * (a pair of mcr_diff_new()'s, or a server new at its address); each key it
 * holds that `from` places on another server is compared with that
 * server's value (value, flags, TTL); a copy that differs, or whose source
 * no longer has it, is deleted by its CAS. *verified: keys compared;
 * *removed: copies deleted. MCR_OK, or the first error (a dump or a
 * request that failed, MCR_ERR_CANCELLED when *stop was set,
 * MCR_ERR_NOMEM), `err` naming the server. verify.c says why. */
int mcr__verify_new_owners(const mcr__verify_ctx *c, uint64_t *verified, uint64_t *removed,
                           mcr_error *err);

#endif
