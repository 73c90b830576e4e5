/* SPDX-License-Identifier: BSD-3-Clause */
/* room.c: whether a migration's destinations had room: their eviction and out-of-memory counters (memcached's `stats`) read before and after the copy, over dump.c's blocking connection. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "placement/placement_internal.h"
#include "migrate/migrate_internal.h"

/*
 * A copy into a full memcached "succeeds" (each add answers STORED) while
 * the server evicts other items, copied ones among them, to make room; or
 * it refuses the add. Nothing in the replies tells the first, so the
 * servers' own counters are compared. They are the server's, not the
 * copy's: an eviction of another client's key during the run counts too,
 * which is the point (the cache is losing keys either way).
 */

/* The reply to "stats" is about 80 lines of under 80 bytes; a line longer
 * than this is not memcached's. */
#define STATS_LINE_MAX 512
/* The message's share for the servers' list: what "migrate: " and the
 * sentence around the list leave of an mcr_error message. */
#define ROOM_LIST_MAX 110
/* What " and N more servers" takes at most. */
#define ROOM_MORE_MAX 24

/* The counters that say a server lost or refused items. */
typedef struct counters {
    uint64_t evictions;      /* LRU evictions of valid items */
    uint64_t reassign_nomem; /* slab_reassign_evictions_nomem: valid items
                                dropped when a slab page is moved */
    uint64_t no_memory;      /* store_no_memory: stores refused */
} counters;

typedef struct dest {
    unsigned char wanted; /* a destination */
    unsigned char read;   /* its counters were read (before; after close: both) */
    counters c;           /* before; after close: the growth */
} dest;

struct mcr__room {
    const mcr_snapshot *to;
    unsigned timeout_ms;
    size_t n;  /* servers of `to` */
    dest *d;   /* one per server of `to` */
};

/* The value of "STAT name value" into *v when the line is that stat. */
static void take_stat(const char *line, size_t len, const char *name, uint64_t *v, int *seen)
{
    size_t nl = strlen(name);
    if (len < 5 + nl + 2 || memcmp(line + 5, name, nl) != 0 || line[5 + nl] != ' ')
        return;
    uint64_t x = 0;
    size_t i = 5 + nl + 1;
    for (; i < len && line[i] >= '0' && line[i] <= '9'; i++) {
        if (x > (UINT64_MAX - 9) / 10)
            return; /* not a counter of memcached's */
        x = x * 10 + (uint64_t)(line[i] - '0');
    }
    if (i == len && i > 5 + nl + 1) {
        *v = x;
        if (seen != NULL)
            *seen = 1;
    }
}

/* Read the counters of host:port with "stats": MCR_OK, or a status (the
 * server unreachable, silent, answering something else). */
static int read_counters(const char *host, int port, unsigned timeout_ms, counters *out)
{
    static const char req[] = "stats\r\n";
    mcr_error err;
    int fd = mcr__dump_dial(host, port, timeout_ms, NULL, NULL, &err);
    if (fd < 0)
        return fd;
    int rc = mcr__dump_send(fd, req, sizeof(req) - 1, timeout_ms, NULL, NULL, &err);
    char buf[STATS_LINE_MAX + 2];
    size_t len = 0;
    int seen = 0, done = 0;
    memset(out, 0, sizeof(*out));
    while (rc == MCR_OK && !done) {
        ssize_t r = recv(fd, buf + len, sizeof(buf) - len, 0);
        if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) {
            rc = MCR_ERR_CONNECT;
            break;
        }
        if (r < 0) {
            int w = errno == EINTR ? 1 : mcr__dump_wait(fd, POLLIN, timeout_ms, NULL, NULL, &err);
            if (w <= 0)
                rc = w < 0 ? w : MCR_ERR_TIMEOUT;
            continue;
        }
        len += (size_t)r;
        size_t start = 0;
        char *nl;
        while (!done && (nl = memchr(buf + start, '\n', len - start)) != NULL) {
            const char *line = buf + start;
            size_t n = (size_t)(nl - line);
            start += n + 1;
            if (n > 0 && line[n - 1] == '\r')
                n--;
            if (n == 3 && memcmp(line, "END", 3) == 0) {
                done = 1;
            } else if (n > 5 && memcmp(line, "STAT ", 5) == 0) {
                take_stat(line, n, "evictions", &out->evictions, &seen);
                take_stat(line, n, "slab_reassign_evictions_nomem", &out->reassign_nomem, NULL);
                take_stat(line, n, "store_no_memory", &out->no_memory, NULL);
            } else {
                rc = MCR_ERR_PROTOCOL; /* an error reply: not a memcached we can read */
                break;
            }
        }
        memmove(buf, buf + start, len - start);
        len -= start;
        if (rc == MCR_OK && !done && len == sizeof(buf))
            rc = MCR_ERR_PROTOCOL;
    }
    close(fd);
    if (rc == MCR_OK && !seen)
        rc = MCR_ERR_PROTOCOL; /* no evictions counter: nothing to compare */
    return rc;
}

static int read_dest(const mcr__room *r, size_t j, counters *out)
{
    mcr_server_desc sd;
    if (mcr_snapshot_server(r->to, j, &sd) != MCR_OK)
        return MCR_ERR_INVALID;
    return read_counters(sd.host, sd.port, r->timeout_ms, out);
}

/* Whether `from` has server j of `to` ACTIVE at the same address: then it
 * gains only the keys the diff moves to it. */
static int active_before(const mcr_snapshot *from, const mcr_server_desc *b)
{
    mcr_server_desc a;
    uint32_t i = mcr_snapshot_find(from, b->id);
    return i != MCR_NO_SERVER && mcr_snapshot_server(from, (size_t)i, &a) == MCR_OK &&
           a.state == MCR_STATE_ACTIVE && a.port == b->port && strcmp(a.host, b->host) == 0;
}

int mcr__room_open(const mcr_snapshot *from, const mcr_snapshot *to, unsigned timeout_ms,
                   mcr__room **out, mcr_error *err)
{
    *out = NULL;
    mcr__room *r = calloc(1, sizeof(*r));
    size_t n = mcr_snapshot_server_count(to);
    dest *d = calloc(n ? n : 1, sizeof(*d));
    if (r == NULL || d == NULL) {
        free(r);
        free(d);
        return mcr__error(err, MCR_ERR_NOMEM, "migrate: out of memory");
    }
    r->to = to;
    r->timeout_ms = timeout_ms;
    r->n = n;
    r->d = d;
    mcr_diff *diff = NULL;
    mcr_error derr;
    int rc = mcr_diff_new(from, to, &diff, &derr);
    if (rc == MCR_ERR_NOMEM) {
        free(d);
        free(r);
        return mcr__error(err, rc, "migrate: %s", derr.message);
    }
    if (rc == MCR_OK) {
        for (size_t p = 0; p < mcr_diff_pair_count(diff); p++) {
            mcr_diff_pair pr;
            uint32_t j = mcr_diff_pair_get(diff, p, &pr) == MCR_OK ? mcr_snapshot_find(to, pr.to)
                                                                   : MCR_NO_SERVER;
            if (j != MCR_NO_SERVER)
                d[j].wanted = 1;
        }
        mcr_diff_free(diff);
    }
    for (size_t j = 0; j < n; j++) {
        mcr_server_desc sd;
        if (mcr_snapshot_server(to, j, &sd) != MCR_OK || sd.state != MCR_STATE_ACTIVE)
            d[j].wanted = 0; /* owns no key in `to` */
        else if (rc != MCR_OK || !active_before(from, &sd))
            d[j].wanted = 1; /* incomparable placements, or new at this address */
        if (d[j].wanted)
            d[j].read = read_dest(r, j, &d[j].c) == MCR_OK;
    }
    *out = r;
    return MCR_OK;
}

int mcr__room_refusal(int status, const char *message)
{
    return status == MCR_ERR_SERVER && message != NULL &&
           strstr(message, "SERVER_ERROR out of memory") != NULL;
}

/* v with a comma every three digits ("1,234"). */
static const char *grouped(char out[32], uint64_t v)
{
    char digits[24];
    int n = snprintf(digits, sizeof(digits), "%" PRIu64, v), o = 0;
    for (int i = 0; i < n; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            out[o++] = ',';
        out[o++] = digits[i];
    }
    out[o] = '\0';
    return out;
}

static void put(char *dst, size_t cap, const char *fmt, ...) MCR__PRINTF(3, 4);

/* snprintf() of a text that may be cut (a long server id). */
static void put(char *dst, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, cap, fmt, ap);
    va_end(ap);
}

/* "ID (ADDRESS) evicted N items and refused M" for destination j. */
static void describe(const mcr__room *r, size_t j, char *out, size_t cap)
{
    mcr_server_desc sd;
    char addr[MCR_HOSTNAME_MAX + 16] = "", name[MCR_HOSTNAME_MAX + 300], a[32], b[32];
    const counters *c = &r->d[j].c;
    uint64_t ev = c->evictions + c->reassign_nomem;
    if (mcr_snapshot_server(r->to, j, &sd) != MCR_OK) {
        snprintf(name, sizeof(name), "?");
    } else {
        snprintf(addr, sizeof(addr), strchr(sd.host, ':') ? "[%s]:%d" : "%s:%d", sd.host, sd.port);
        if (strcmp(addr, sd.id) == 0)
            snprintf(name, sizeof(name), "%s", sd.id);
        else
            snprintf(name, sizeof(name), "%s (%s)", sd.id, addr);
    }
    if (ev > 0 && c->no_memory > 0)
        put(out, cap, "%s evicted %s item%s and refused %s", name, grouped(a, ev),
            ev == 1 ? "" : "s", grouped(b, c->no_memory));
    else if (ev > 0)
        put(out, cap, "%s evicted %s item%s", name, grouped(a, ev), ev == 1 ? "" : "s");
    else
        put(out, cap, "%s refused %s store%s", name, grouped(b, c->no_memory),
            c->no_memory == 1 ? "" : "s");
}

/* How much a counter grew; one that went back means the server restarted:
 * all of it is new. */
static uint64_t grown(uint64_t after, uint64_t before)
{
    return after >= before ? after - before : after;
}

int mcr__room_close(mcr__room *r, mcr_migrate_report *rep, mcr_error *err)
{
    if (r == NULL)
        return MCR_OK;
    size_t lacking = 0;
    for (size_t j = 0; j < r->n; j++) {
        counters *c = &r->d[j].c, after;
        if (!r->d[j].read)
            continue;
        if (read_dest(r, j, &after) != MCR_OK) {
            r->d[j].read = 0;
            continue;
        }
        c->evictions = grown(after.evictions, c->evictions);
        c->reassign_nomem = grown(after.reassign_nomem, c->reassign_nomem);
        c->no_memory = grown(after.no_memory, c->no_memory);
        rep->ndestinations++;
        rep->evicted += c->evictions + c->reassign_nomem;
        lacking += c->evictions + c->reassign_nomem + c->no_memory > 0;
    }
    int rc = MCR_OK;
    if (lacking > 0 || rep->refused > 0) {
        /* the servers that lost or refused items, as many as fit */
        char list[ROOM_LIST_MAX + 1] = "", one[ROOM_LIST_MAX + 1], n[32];
        size_t used = 0, more = 0, left = lacking;
        for (size_t j = 0; j < r->n; j++) {
            const counters *c = &r->d[j].c;
            if (!r->d[j].read || c->evictions + c->reassign_nomem + c->no_memory == 0)
                continue;
            left--;
            describe(r, j, one, sizeof(one));
            size_t len = strlen(one) + (used ? 2 : 0), reserve = left > 0 ? ROOM_MORE_MAX : 0;
            if (used == 0 || (more == 0 && used + len + reserve <= ROOM_LIST_MAX))
                used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s",
                                         used ? ", " : "", one);
            else
                more++;
        }
        if (used == 0) /* refused adds at servers whose counters were not read */
            snprintf(list, sizeof(list), "%s adds were refused", grouped(n, rep->refused));
        else if (more > 0)
            snprintf(list + used, sizeof(list) - used, " and %zu more server%s", more,
                     more == 1 ? "" : "s");
        snprintf(rep->room_message, sizeof(rep->room_message),
                 "the destinations lack room: %s during the copy (their memory is full: give "
                 "them more memory (-m) or fewer keys before switching)",
                 list);
        rc = mcr__error(err, MCR_ERR_SERVER, "migrate: %s", rep->room_message);
    }
    free(r->d);
    free(r);
    return rc;
}
