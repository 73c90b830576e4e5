/* SPDX-License-Identifier: BSD-3-Clause */
/* pool_floor.c: bench_pool's floor: a raw epoll memcached client (text protocol, one socket per server) doing the pool's rounds, the cost no library can go under. */
#include "pool_floor.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "benchutil.h"

/* Bytes a read asks for at least (the pool's READ_STEP). */
#define READ_MIN 65536
/* An entry with no owner: the END of a pipelined get line. */
#define NO_OWNER UINT32_MAX
/* A longer value is a stream out of step (memcached's item limit is far below). */
#define VALUE_MAX (1u << 30)

/* What a connection expects next, in the order the server answers. */
enum { E_GET, E_SET, E_MKEY, E_END };

typedef struct entry {
    uint32_t key;    /* key index (E_GET, E_SET, E_MKEY) */
    uint32_t owner;  /* the pipelined slot, or the multi-get slot (E_MKEY, its E_END) */
    uint8_t kind;
} entry;

typedef struct fconn {
    int fd;
    char *out;                  /* requests not yet written: out[out_off .. out_len) */
    size_t out_off, out_len, out_cap;
    char *in;                   /* bytes read, not yet parsed: in[in_start .. in_end) */
    size_t in_start, in_end, in_cap;
    entry *q;                   /* ring of expected answers */
    size_t q_head, q_count, q_cap;
    bool line_open;             /* a pipelined "get .." line takes more keys */
    unsigned line_keys;
    bool want_out;              /* EPOLLOUT armed: the socket took part of out */
} fconn;

/* One run's state. */
typedef struct prun {
    const pool_floor_job *job;
    bool set, mget;
    size_t n, next, done, outstanding;
    unsigned keys;              /* multi-gets: keys each */
    size_t chunks;
    uint64_t *t0;               /* per slot: submission time */
    uint32_t *pkey;             /* pipelined: the key of each slot */
    size_t *first;              /* multi-gets: per slot, first key */
    unsigned *lines, *got;      /* multi-gets: per slot, lines unanswered, hits */
    uint32_t **grp;             /* multi-gets: per server, the keys of the one being queued */
    unsigned *ngrp;
    const void **mkey;          /* multi-gets: the keys of the one being queued, */
    uint32_t *mown;             /* and their servers (one batch lookup, as the pool) */
    uint32_t *pend;             /* pipelined gets: the slots queued this wake, */
    size_t npend;               /* routed together before the writes (as the pool) */
    const void **pendkey;
    size_t *pendlen;
} prun;

struct pool_floor {
    const mcr_snapshot *snap;
    size_t nconn;
    fconn *c;
    int ep;
    bool broken;
    unsigned problems;
    const pool_floor_job *job;
    uint64_t writes, reads;     /* system calls that moved bytes */
};

/* ------------------------------------------------------------ problems */

static void bad(pool_floor *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void bad(pool_floor *f, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    f->problems++;
    if (f->job != NULL && f->job->bad != NULL)
        f->job->bad(f->job->ctx, msg);
}

/* A stream out of step (or closed): no later run can trust it. */
static void broken(pool_floor *f, fconn *c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void broken(pool_floor *f, fconn *c, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    bad(f, "floor connection %zu: %s", (size_t)(c - f->c), msg);
    f->broken = true;
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (q == NULL) {
        fprintf(stderr, "bench_pool: out of memory (floor)\n");
        exit(1);
    }
    return q;
}

/* ------------------------------------------------------------ buffers */

static char *out_room(fconn *c, size_t n)
{
    if (c->out_len + n > c->out_cap) {
        if (c->out_off > 0) {
            memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
            c->out_len -= c->out_off;
            c->out_off = 0;
        }
        if (c->out_len + n > c->out_cap) {
            size_t cap = c->out_cap ? c->out_cap : 4096;
            while (cap < c->out_len + n)
                cap *= 2;
            c->out = xrealloc(c->out, cap);
            c->out_cap = cap;
        }
    }
    return c->out + c->out_len;
}

static void out_add(fconn *c, const void *b, size_t n)
{
    memcpy(out_room(c, n), b, n);
    c->out_len += n;
}

static void out_uint(fconn *c, size_t v)
{
    char b[24];
    size_t i = sizeof b;
    do
        b[--i] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    out_add(c, b + i, sizeof b - i);
}

static void q_push(fconn *c, uint8_t kind, uint32_t key, uint32_t owner)
{
    if (c->q_count == c->q_cap) {
        size_t cap = c->q_cap ? c->q_cap * 2 : 1024;
        entry *q = xrealloc(NULL, cap * sizeof *q);
        for (size_t i = 0; i < c->q_count; i++)
            q[i] = c->q[(c->q_head + i) & (c->q_cap - 1)];
        free(c->q);
        c->q = q;
        c->q_head = 0;
        c->q_cap = cap;
    }
    c->q[(c->q_head + c->q_count) & (c->q_cap - 1)] = (entry){key, owner, kind};
    c->q_count++;
}

static entry *q_front(fconn *c)
{
    return c->q_count ? &c->q[c->q_head] : NULL;
}

static void q_pop(fconn *c)
{
    c->q_head = (c->q_head + 1) & (c->q_cap - 1);
    c->q_count--;
}

/* ------------------------------------------------------------ requests */

static void close_line(fconn *c)
{
    if (!c->line_open)
        return;
    out_add(c, "\r\n", 2);
    q_push(c, E_END, 0, NO_OWNER);
    c->line_open = false;
}

/* The get of pipelined slot `slot` on c. */
static void send_get(prun *r, fconn *c, uint32_t slot)
{
    const pool_floor_job *j = r->job;
    uint32_t i = r->pkey[slot];

    if (c->line_open && c->line_keys >= POOL_FLOOR_LINE_KEYS)
        close_line(c);
    if (!c->line_open) {
        out_add(c, "get", 3);
        c->line_open = true;
        c->line_keys = 0;
    }
    out_add(c, " ", 1);
    out_add(c, j->key[i], j->len[i]);
    c->line_keys++;
    q_push(c, E_GET, i, slot);
}

/* The gets queued this wake, routed in one mcr_snapshot_locate_many() call
 * (as the pool routes the gets of a loop pass) and written into their
 * servers' buffers in the order they came. */
static void route_pending(pool_floor *f, prun *r)
{
    if (r->npend == 0)
        return;
    for (size_t k = 0; k < r->npend; k++) {
        r->pendkey[k] = r->job->key[r->pkey[r->pend[k]]];
        r->pendlen[k] = r->job->len[r->pkey[r->pend[k]]];
    }
    mcr_snapshot_locate_many(f->snap, r->pendkey, r->pendlen, r->npend, r->mown);
    for (size_t k = 0; k < r->npend; k++)
        send_get(r, &f->c[r->mown[k]], r->pend[k]);
    r->npend = 0;
}

/* Queues key i for pipelined slot `slot`: a set at once, a get for the
 * routing at the end of the wake. */
static void submit(pool_floor *f, prun *r, uint32_t slot)
{
    const pool_floor_job *j = r->job;
    size_t i = r->next++;

    r->pkey[slot] = (uint32_t)i;
    r->t0[slot] = bench_now_ns();
    r->outstanding++;
    if (!r->set) {
        r->pend[r->npend++] = slot;
        return;
    }
    fconn *c = &f->c[mcr_snapshot_locate(f->snap, j->key[i], j->len[i])];
    close_line(c);
    out_add(c, "set ", 4);
    out_add(c, j->key[i], j->len[i]);
    out_add(c, " ", 1);
    out_uint(c, i); /* flags: the key's index */
    out_add(c, " 0 ", 3);
    out_uint(c, j->value_len);
    out_add(c, "\r\n", 2);
    out_add(c, j->val + i * j->value_len, j->value_len);
    out_add(c, "\r\n", 2);
    q_push(c, E_SET, (uint32_t)i, slot);
}

/* Queues the next multi-get in slot `slot`: one line per server. */
static void mstart(pool_floor *f, prun *r, uint32_t slot)
{
    const pool_floor_job *j = r->job;
    size_t first = (r->next++ % r->chunks) * r->keys;

    r->first[slot] = first;
    r->got[slot] = 0;
    r->lines[slot] = 0;
    r->t0[slot] = bench_now_ns();
    r->outstanding++;
    /* routed as the pool routes a multi-get's keys: all in one call */
    for (size_t i = 0; i < r->keys; i++)
        r->mkey[i] = j->key[first + i];
    mcr_snapshot_locate_many(f->snap, r->mkey, j->len + first, r->keys, r->mown);
    for (size_t i = 0; i < r->keys; i++) {
        uint32_t s = r->mown[i];
        r->grp[s][r->ngrp[s]++] = (uint32_t)(first + i);
    }
    for (size_t s = 0; s < f->nconn; s++) {
        fconn *c = &f->c[s];
        unsigned n = r->ngrp[s];
        if (n == 0)
            continue;
        close_line(c);
        for (unsigned k = 0; k < n; k++) {
            uint32_t i = r->grp[s][k];
            if (k % POOL_FLOOR_MGET_KEYS == 0)
                out_add(c, "get", 3);
            out_add(c, " ", 1);
            out_add(c, j->key[i], j->len[i]);
            q_push(c, E_MKEY, i, slot);
            if (k % POOL_FLOOR_MGET_KEYS == POOL_FLOOR_MGET_KEYS - 1 || k == n - 1) {
                out_add(c, "\r\n", 2);
                q_push(c, E_END, 0, slot);
                r->lines[slot]++;
            }
        }
        r->ngrp[s] = 0;
    }
}

/* ------------------------------------------------------------ answers */

/* A pipelined request answered (hit or not): its latency, the next key. */
static void pdone(pool_floor *f, prun *r, uint32_t slot)
{
    r->job->lat[r->done++] = bench_now_ns() - r->t0[slot];
    r->outstanding--;
    if (r->next < r->n && !f->broken)
        submit(f, r, slot);
}

/* A multi-get line answered (END). */
static void mline_done(pool_floor *f, prun *r, uint32_t slot)
{
    if (--r->lines[slot] > 0)
        return;
    r->job->lat[r->done++] = bench_now_ns() - r->t0[slot];
    r->outstanding--;
    if (r->got[slot] != r->keys)
        bad(f, "multi-get of %u keys from %zu: %u hits", r->keys, r->first[slot], r->got[slot]);
    if (r->next < r->n && !f->broken)
        mstart(f, r, slot);
}

/* The key entry e got no VALUE: a miss, which the checker refuses. */
static void miss(pool_floor *f, prun *r, const entry *e)
{
    bad(f, "key %" PRIu32 " \"%s\": %s answered a miss", e->key, r->job->key[e->key],
        e->kind == E_MKEY ? "multi-get" : "get");
    if (e->kind == E_GET)
        pdone(f, r, e->owner);
}

static void on_value(pool_floor *f, prun *r, fconn *c, const char *k, size_t klen,
                     uint32_t flags, const char *v, size_t vlen)
{
    const pool_floor_job *j = r->job;
    for (;;) {
        entry *h = q_front(c);
        if (h == NULL || (h->kind != E_GET && h->kind != E_MKEY)) {
            broken(f, c, "a result for key \"%.*s\" not asked", (int)(klen < 60 ? klen : 60), k);
            return;
        }
        entry e = *h;
        q_pop(c);
        if (j->len[e.key] != klen || memcmp(j->key[e.key], k, klen) != 0) {
            miss(f, r, &e); /* answered in order: e was skipped */
            continue;
        }
        const char *want = j->val + (size_t)e.key * j->value_len;
        if (vlen != j->value_len || memcmp(v, want, vlen) != 0)
            bad(f, "key %" PRIu32 " \"%s\": value \"%.*s\" (%zu bytes), want \"%.*s\"", e.key,
                j->key[e.key], (int)(vlen < 60 ? vlen : 60), v, vlen, 60, want);
        else if (flags != e.key)
            bad(f, "key %" PRIu32 " \"%s\": flags %" PRIu32 ", want %" PRIu32, e.key,
                j->key[e.key], flags, e.key);
        if (e.kind == E_GET)
            pdone(f, r, e.owner);
        else
            r->got[e.owner]++;
        return;
    }
}

static void on_end(pool_floor *f, prun *r, fconn *c)
{
    for (;;) {
        entry *h = q_front(c);
        if (h == NULL || h->kind == E_SET) {
            broken(f, c, "END with no get line");
            return;
        }
        entry e = *h;
        q_pop(c);
        if (e.kind == E_END) {
            if (e.owner != NO_OWNER)
                mline_done(f, r, e.owner);
            return;
        }
        miss(f, r, &e);
    }
}

static void on_stored(pool_floor *f, prun *r, fconn *c)
{
    entry *h = q_front(c);
    if (h == NULL || h->kind != E_SET) {
        broken(f, c, "STORED with no set");
        return;
    }
    uint32_t slot = h->owner;
    q_pop(c);
    pdone(f, r, slot);
}

/* Digits at *p up to `stop`; false when there are none or something else. */
static bool parse_uint(const char **p, const char *end, char stop, uint64_t *v)
{
    const char *s = *p;
    uint64_t x = 0;
    if (s >= end || *s < '0' || *s > '9')
        return false;
    while (s < end && *s >= '0' && *s <= '9')
        x = x * 10 + (uint64_t)(*s++ - '0');
    if (s >= end || *s != stop)
        return false;
    *v = x;
    *p = s;
    return true;
}

/* Parses every whole answer in c->in. */
static void parse(pool_floor *f, prun *r, fconn *c)
{
    while (!f->broken) {
        const char *p = c->in + c->in_start;
        size_t avail = c->in_end - c->in_start;
        const char *nl = memchr(p, '\n', avail);
        if (nl == NULL)
            break;
        size_t ll = (size_t)(nl - p) + 1;
        if (ll < 2 || nl[-1] != '\r') {
            broken(f, c, "a line without CR LF");
            return;
        }
        if (ll > 6 && memcmp(p, "VALUE ", 6) == 0) {
            const char *k = p + 6, *e = nl - 1, *s;
            uint64_t flags, bytes;
            for (s = k; s < e && *s != ' '; s++)
                ;
            size_t klen = (size_t)(s - k);
            bool ok = klen > 0 && s < e;
            if (ok) {
                s++;
                ok = parse_uint(&s, e, ' ', &flags) && flags <= UINT32_MAX;
            }
            if (ok) {
                s++;
                ok = parse_uint(&s, e + 1, '\r', &bytes) && s == e && bytes <= VALUE_MAX;
            }
            if (!ok) {
                broken(f, c, "a bad VALUE line \"%.*s\"", (int)(ll < 80 ? ll - 2 : 80), p);
                return;
            }
            if (avail < ll + bytes + 2)
                break; /* the data is still coming */
            const char *v = p + ll;
            if (v[bytes] != '\r' || v[bytes + 1] != '\n') {
                broken(f, c, "a value without CR LF after its %" PRIu64 " bytes", bytes);
                return;
            }
            c->in_start += ll + bytes + 2;
            on_value(f, r, c, k, klen, (uint32_t)flags, v, (size_t)bytes);
        } else if (ll == 5 && memcmp(p, "END\r\n", 5) == 0) {
            c->in_start += ll;
            on_end(f, r, c);
        } else if (ll == 8 && memcmp(p, "STORED\r\n", 8) == 0) {
            c->in_start += ll;
            on_stored(f, r, c);
        } else {
            broken(f, c, "answer \"%.*s\"", (int)(ll - 2 < 80 ? ll - 2 : 80), p);
            return;
        }
    }
    if (c->in_start == c->in_end)
        c->in_start = c->in_end = 0;
}

/* ------------------------------------------------------------ the socket */

/* Reads what is readable (stopping at a short read, as the pool does). */
static void read_all(pool_floor *f, fconn *c)
{
    for (;;) {
        if (c->in_cap - c->in_end < READ_MIN) {
            if (c->in_start > 0) {
                memmove(c->in, c->in + c->in_start, c->in_end - c->in_start);
                c->in_end -= c->in_start;
                c->in_start = 0;
            }
            if (c->in_cap - c->in_end < READ_MIN) {
                c->in_cap = c->in_cap ? c->in_cap * 2 : 2 * READ_MIN;
                c->in = xrealloc(c->in, c->in_cap);
            }
        }
        size_t room = c->in_cap - c->in_end;
        ssize_t n = read(c->fd, c->in + c->in_end, room);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                broken(f, c, "read: %s", strerror(errno));
            return;
        }
        if (n == 0) {
            broken(f, c, "closed by the server");
            return;
        }
        c->in_end += (size_t)n;
        f->reads++;
        if ((size_t)n < room)
            return;
    }
}

static void want_out(pool_floor *f, fconn *c, bool on)
{
    struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0u), .data.ptr = c};
    if (epoll_ctl(f->ep, EPOLL_CTL_MOD, c->fd, &ev) != 0)
        broken(f, c, "epoll_ctl: %s", strerror(errno));
    c->want_out = on;
}

/* One write of what c has pending; the socket's refusal arms EPOLLOUT. */
static void write_out(pool_floor *f, fconn *c)
{
    size_t left = c->out_len - c->out_off;
    ssize_t w;
    do
        w = send(c->fd, c->out + c->out_off, left, MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
        broken(f, c, "send: %s", strerror(errno));
        return;
    }
    if (w > 0) {
        c->out_off += (size_t)w;
        f->writes++;
    }
    if (c->out_off == c->out_len) {
        c->out_off = c->out_len = 0;
        if (c->want_out)
            want_out(f, c, false);
    } else if (!c->want_out) {
        want_out(f, c, true);
    }
}

/* The end of a wake: one write per server with bytes pending. */
static void flush_all(pool_floor *f)
{
    for (size_t s = 0; s < f->nconn && !f->broken; s++) {
        fconn *c = &f->c[s];
        close_line(c);
        if (c->out_len > c->out_off && !c->want_out)
            write_out(f, c);
    }
}

static bool queues_empty(const pool_floor *f)
{
    for (size_t s = 0; s < f->nconn; s++)
        if (f->c[s].q_count > 0)
            return false;
    return true;
}

static void loop(pool_floor *f, prun *r)
{
    struct epoll_event ev[16];
    int timeout = (int)r->job->timeout_ms;

    route_pending(f, r);
    flush_all(f);
    while (!f->broken && (r->outstanding > 0 || !queues_empty(f))) {
        int n = epoll_wait(f->ep, ev, (int)(sizeof ev / sizeof ev[0]), timeout);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            bad(f, "epoll_wait: %s", strerror(errno));
            f->broken = true;
            return;
        }
        if (n == 0) {
            bad(f, "floor: no answer within %u ms (%zu requests in flight)", r->job->timeout_ms,
                r->outstanding);
            f->broken = true;
            return;
        }
        for (int i = 0; i < n && !f->broken; i++) {
            fconn *c = ev[i].data.ptr;
            if (ev[i].events & EPOLLOUT)
                write_out(f, c);
            if (ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
                read_all(f, c);
                parse(f, r, c);
            }
        }
        route_pending(f, r);
        flush_all(f);
    }
}

/* ------------------------------------------------------------ runs */

static bool run_begin(pool_floor *f, const pool_floor_job *job)
{
    f->job = job;
    f->problems = 0;
    if (f->broken) {
        bad(f, "floor: unusable after an earlier failure");
        return false;
    }
    return true;
}

unsigned pool_floor_pipeline(pool_floor *f, const pool_floor_job *job, bool set, size_t n,
                             unsigned depth)
{
    if (!run_begin(f, job))
        return f->problems;
    prun r = {.job = job, .set = set, .n = n};
    r.t0 = bench_xmalloc(depth * sizeof *r.t0);
    r.pkey = bench_xmalloc(depth * sizeof *r.pkey);
    r.pend = bench_xmalloc(depth * sizeof *r.pend);
    r.pendkey = bench_xmalloc(depth * sizeof *r.pendkey);
    r.pendlen = bench_xmalloc(depth * sizeof *r.pendlen);
    r.mown = bench_xmalloc(depth * sizeof *r.mown);
    for (uint32_t s = 0; s < depth && r.next < n; s++)
        submit(f, &r, s);
    loop(f, &r);
    if (!f->broken && r.done != n)
        bad(f, "floor: %zu of %zu requests answered", r.done, n);
    free(r.t0);
    free(r.pkey);
    free(r.pend);
    free(r.pendkey);
    free(r.pendlen);
    free(r.mown);
    return f->problems;
}

unsigned pool_floor_multiget(pool_floor *f, const pool_floor_job *job, size_t total,
                             unsigned keys, unsigned depth)
{
    if (!run_begin(f, job))
        return f->problems;
    prun r = {.job = job, .mget = true, .n = total, .keys = keys, .chunks = job->nkeys / keys};
    r.t0 = bench_xmalloc(depth * sizeof *r.t0);
    r.first = bench_xmalloc(depth * sizeof *r.first);
    r.lines = bench_xmalloc(depth * sizeof *r.lines);
    r.got = bench_xmalloc(depth * sizeof *r.got);
    r.grp = bench_xmalloc(f->nconn * sizeof *r.grp);
    r.mkey = bench_xmalloc(keys * sizeof *r.mkey);
    r.mown = bench_xmalloc(keys * sizeof *r.mown);
    r.ngrp = calloc(f->nconn, sizeof *r.ngrp);
    if (r.ngrp == NULL) {
        fprintf(stderr, "bench_pool: out of memory (floor)\n");
        exit(1);
    }
    for (size_t s = 0; s < f->nconn; s++)
        r.grp[s] = bench_xmalloc(keys * sizeof **r.grp);
    for (uint32_t s = 0; s < depth && r.next < total; s++)
        mstart(f, &r, s);
    loop(f, &r);
    if (!f->broken && r.done != total)
        bad(f, "floor: %zu of %zu multi-gets done", r.done, total);
    for (size_t s = 0; s < f->nconn; s++)
        free(r.grp[s]);
    free(r.grp);
    free(r.ngrp);
    free(r.mkey);
    free(r.mown);
    free(r.t0);
    free(r.first);
    free(r.lines);
    free(r.got);
    return f->problems;
}

/* ------------------------------------------------------------ setup */

static int connect_to(const char *host, int port, char *err, size_t errlen)
{
    struct addrinfo hints, *res = NULL, *a;
    char ports[16];
    int fd = -1;

    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    snprintf(ports, sizeof ports, "%d", port);
    if (getaddrinfo(host, ports, &hints, &res) != 0 || res == NULL) {
        snprintf(err, errlen, "cannot resolve %s:%d", host, port);
        return -1;
    }
    for (a = res; a != NULL; a = a->ai_next) {
        fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
            break;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(err, errlen, "connect %s:%d: %s", host, port, strerror(errno));
        return -1;
    }
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0 ||
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
        snprintf(err, errlen, "socket options %s:%d: %s", host, port, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

pool_floor *pool_floor_new(const mcr_snapshot *snap, char *err, size_t errlen)
{
    size_t n = mcr_snapshot_server_count(snap);
    pool_floor *f = calloc(1, sizeof *f);
    if (f == NULL || n == 0) {
        snprintf(err, errlen, n == 0 ? "no server in the snapshot" : "out of memory");
        free(f);
        return NULL;
    }
    f->snap = snap;
    f->ep = epoll_create1(EPOLL_CLOEXEC);
    f->c = calloc(n, sizeof *f->c);
    if (f->ep < 0 || f->c == NULL) {
        snprintf(err, errlen, "epoll_create1 or memory: %s", strerror(errno));
        if (f->ep >= 0)
            close(f->ep);
        free(f->c);
        free(f);
        return NULL;
    }
    f->nconn = n;
    for (size_t i = 0; i < n; i++)
        f->c[i].fd = -1;
    for (size_t i = 0; i < n; i++) {
        mcr_server_desc d;
        if (mcr_snapshot_server(snap, i, &d) != MCR_OK) {
            snprintf(err, errlen, "server %zu of the snapshot", i);
            pool_floor_free(f);
            return NULL;
        }
        fconn *c = &f->c[i];
        c->fd = connect_to(d.host, d.port, err, errlen);
        if (c->fd < 0) {
            pool_floor_free(f);
            return NULL;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(f->ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
            snprintf(err, errlen, "epoll_ctl: %s", strerror(errno));
            pool_floor_free(f);
            return NULL;
        }
    }
    return f;
}

void pool_floor_io(const pool_floor *f, uint64_t *writes, uint64_t *reads)
{
    *writes = f->writes;
    *reads = f->reads;
}

void pool_floor_free(pool_floor *f)
{
    if (f == NULL)
        return;
    for (size_t i = 0; i < f->nconn; i++) {
        if (f->c[i].fd >= 0)
            close(f->c[i].fd);
        free(f->c[i].out);
        free(f->c[i].in);
        free(f->c[i].q);
    }
    if (f->ep >= 0)
        close(f->ep);
    free(f->c);
    free(f);
}
