/* SPDX-License-Identifier: BSD-3-Clause */
/* pool_internal.h: what the pool's source files share (the structs of pools, servers, connections and requests, small helpers, cross-file calls), never installed. */
#ifndef MCR_POOL_INTERNAL_H
#define MCR_POOL_INTERNAL_H

/* The pool in layers. Each file calls only into the files below it:
 *
 *   sync.c       the shorthands (get, set, delete) and mcr_pool_exec()
 *   migration.c mcr_pool_submit() and mcr_pool_get_multi(): a router's
 *                migration (reads falling back to the previous owner,
 *                writes reaching both owners), else straight down
 *   multiget.c   multi-gets: keys deduplicated, split by server
 *   submit.c     one request: checks, routing, hot-key joining
 *   pool.c       lifecycle (new, free, unix paths, wait), adopting the
 *                router's snapshots, the loop's deferred work (ejections
 *                set in the router's local overlay, failures reported)
 *   server.c     server health and policies: failures counted, down,
 *                ejection and probes; a server's wait queue and dispatch
 *   conn.c       connections and I/O: connect, send (text gets batched on
 *                one line), read, timeouts
 *   reply.c      the reply to the request at the head of a connection
 *   request.c    requests: allocation, queues, hot-key sharing, delivery
 *                of results to callbacks, a request's end
 *   options.c    names of ops, replies and policies; options checked
 *   stats.c      latency histograms and mcr_pool_server_stats()
 *   proto.c      the wire: request lines written, reply lines read; a leaf
 *                that knows nothing of the pool
 *
 * The files call each other directly (a folder is one layer): a connection
 * that failed tells its server (server.c), a read adopts a new snapshot
 * (pool.c), the flush routes the gets queued for routing (submit.c). */

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/event.h>

#include "placement/placement_internal.h"
#include "mcroute_pool.h"
#include "proto.h"

/* memcached's key limit, prefix included (KEY_MAX_LENGTH in memcached). */
#define MCR__HIST_SUB 16
#define MCR__HIST_BUCKETS (64 * MCR__HIST_SUB)
#define MCR__MSG_SIZE 160

typedef struct mcr__pool_server mcr__pool_server;
typedef struct mcr__pool_conn mcr__pool_conn;
typedef struct mcr__pool_req mcr__pool_req;

typedef struct mcr__pool_waiter {
    struct mcr__pool_waiter *next;
    mcr_pool_cb cb;
    void *arg;
} mcr__pool_waiter;

/* A multi-get: its per-server requests report here. */
typedef struct mcr__pool_mget {
    mcr_pool_cb key_cb, done_cb;
    void *arg;
    size_t outstanding;   /* requests (and deferred key errors) not finished */
    uint64_t hits;
    int status;           /* first error met, MCR_OK otherwise */
    uint64_t epoch;
    size_t *next_dup;     /* next user index with the same key, SIZE_MAX: none */
    char message[MCR__MSG_SIZE];
} mcr__pool_mget;

struct mcr__pool_req {
    mcr__pool_req *next;            /* connection queue, server wait queue, deferred
                                       list or the pool's routing queue */
    mcr__pool_server *server;
    mcr__pool_conn *conn;           /* while in flight */
    mcr_pool_cb cb;            /* single request */
    void *arg;
    mcr__pool_waiter *waiters;      /* gets sharing this one's reply */
    mcr__pool_mget *mget;           /* part of a multi-get */
    size_t *user_idx;          /* mget: first user index of key j */
    uint32_t *khash;           /* key j's mcr__key_hash() with seed 0, set
                                  with the key (the open line's table) */
    mcr__pool_req *hot_next;        /* hot-key table chain */
    mcr__pool_req *line_scan;       /* text get, the first request of its line: the
                                   request the line's last VALUE answered (reply.c
                                   looks for the next one from there) */
    uint32_t hot_hash;
    unsigned in_hot : 1;       /* in the hot-key table: others may join */
    unsigned delivered : 1;    /* single: its callback has run */
    unsigned internal : 1;     /* a probe of the pool itself */
    unsigned failed_batch : 1; /* meta multi-get: an error line came before MN */
    unsigned joined : 1;       /* text get: its keys share the previous request's line */
    unsigned group_done : 1;   /* text get: its line's END came (or its error) */
    unsigned small : 1;        /* a small block: back to the pool's reuse list */
    unsigned force_meta : 1;   /* sent in meta whatever the pool's protocol
                                  (a migration's fallback read, for the TTL) */
    mcr_op op;
    uint64_t epoch;
    uint64_t sent_ns;
    uint64_t queued_ns;        /* when it began to wait in its server's queue
                                  (server.c: the queue timeout) */
    uint32_t opaque;
    uint32_t nkeys, cursor;    /* keys; keys [0, cursor) are reported */
    uint32_t flags_in;
    int64_t exptime;
    uint64_t cas_in, delta;
    const void *val;           /* value to send; points to val_copy once queued */
    size_t val_len;
    char *val_copy;
    /* outcome */
    int status;
    mcr_reply reply;
    uint32_t flags;
    uint64_t cas, number;
    char *text;                /* VERSION / STATS text */
    size_t text_len, text_cap;
    const char **keys;
    size_t *klens;
    char message[MCR__MSG_SIZE];
};

enum { MCR__CONN_CONNECTING, MCR__CONN_READY };

struct mcr__pool_conn {
    mcr__pool_server *server;
    evutil_socket_t fd;
    struct event *rev;         /* readable: persistent while open */
    struct event *wev;         /* writable: only while connecting or blocked */
    mcr__inbuf in;             /* replies read, not parsed yet (conn.c reads, reply.c parses) */
    char *out;                 /* requests not yet written: out[out_off, out_len) (conn.c) */
    size_t out_off, out_len, out_cap;
    struct event *timer;
    mcr__pool_conn *flush_next;     /* in the pool's list of connections to flush */
    int flush_queued;
    int line_open;             /* a text get line is being extended */
    mcr_op line_op;
    unsigned line_keys;
    mcr__pool_req *line_first;      /* the first request on the open line */
    struct mcr__line_slot *line_tab; /* the open line's keys by hash (conn.c),
                                        allocated when a line is first joined */
    uint32_t line_gen;         /* the open line's number: slots of others are free */
    int line_indexed;          /* the open line's keys are in line_tab */
    mcr__proto_skip skip;      /* a value over max_value_size, dropped as it comes */
    mcr__pool_req *head, *tail;     /* in flight, in send order */
    size_t inflight;
    int state;
    int slot;
    int busy;                  /* inside its read callback */
    int dead;                  /* closed; freed when no longer busy */
    uint32_t opaque_seq;
    uint64_t connect_deadline;
    uint64_t graced;           /* sent_ns of the request given a read grace */
    uint64_t armed_at;         /* when the timer fires, if pending */
    int armed;                 /* the timer is pending (kept here: asking
                                  libevent costs a call per request) */
};

struct mcr__pool_server {
    mcr_pool *pool;
    char *id;
    char host[MCR_HOSTNAME_MAX + 1];
    int port;
    struct sockaddr_storage addr;
    socklen_t addrlen;          /* 0: not resolved yet */
    int open_nomem;             /* the last mcr__conn_open() ran out of memory
                                   (not the server's fault: not counted) */
    mcr__pool_conn **conns;          /* options.connections slots */
    mcr__pool_req *wait_head, *wait_tail;
    struct event *queue_ev;     /* queue_timeout_ms of wait_head, the oldest: one
                                   timer for the queue, none per request */
    int queue_armed;            /* queue_ev is pending (then wait_head's deadline
                                   is at or after its time) */
    size_t inflight;
    size_t refs;                /* requests pointing here (any queue) */
    size_t idx;                 /* its index in the pool's snapshot, or
                                   SIZE_MAX once retired */
    int counted;                /* ACTIVE there: its load is in load_total */
    mcr_server_health health;
    unsigned consecutive;
    uint64_t retry_at;          /* DOWN: when a request may try again */
    unsigned backoff_ms;
    uint64_t readded_at;
    struct event *retry_ev;     /* EJECTED: the probe timer */
    int retired;                /* not in the pool's snapshot any more */
    int inactive;               /* listed there, but DRAINING or DOWN */
    int eject_pending, readd_pending, probing;
    int overlay_set;            /* this pool set it DOWN in the router's local
                                   overlay and has not cleared that yet */
    size_t list_pos;
    /* multi-get grouping scratch */
    size_t mg_head, mg_tail, mg_count;
    int mg_marked;
    /* counters */
    uint64_t requests, hits, misses, errors, timeouts, refusals, ejections, coalesced;
    uint64_t writes, bytes_sent, reads, bytes_received;
    uint64_t fallback_reads, fallback_hits,
        dual_writes;
    uint64_t lat_count, lat_max;
    uint64_t lat_sum;            /* µs, of the replies measured */
    uint32_t hist[MCR__HIST_BUCKETS];
};

typedef struct mcr__pool_unix {
    char *id;
    char *path;
} mcr__pool_unix;

struct mcr_pool {
    struct event_base *base;
    mcr_router *router;
    mcr_pool_options o;
    char prefix[MCR_POOL_PREFIX_MAX + 1];
    size_t prefix_len;
    mcr_snapshot *snap;
    uint64_t epoch;             /* snap's epoch: what results report */
    uint64_t gen;               /* the router's generation when snap was
                                   taken: what tells a new snapshot */
    mcr__pool_server **by_index;     /* snapshot server index -> server */
    size_t nby;
    mcr__pool_server **servers;      /* current and draining */
    size_t nservers, cap;
    mcr__pool_req *def_head, *def_tail;
    struct event *done_ev;
    struct event *flush_ev;     /* writes what this loop pass queued */
    struct event *collect_ev;   /* frees what our overlay changes replaced */
    struct event *publish_ev;   /* a router fed from a state: the counters into
                                   the process's slot (metrics.c), or NULL */
    mcr__pool_conn *flush_head;
    int flushing;               /* inside the flush event: a connection queued
                                   now is written by the same pass (conn.c) */
    mcr__pool_req *route_head, *route_tail; /* gets submitted, routed at the end of
                                   the loop pass, all at once (submit.c) */
    int ops_pending;
    size_t pending;
    int in_callback;
    int own_loop;       /* mcr_pool_set_own_loop(): no re-entry probe */
    int freeing;
    mcr__pool_req **hot;
    size_t hot_mask, hot_count;
    mcr__pool_req *req_free;    /* small request blocks to reuse (request.c) */
    size_t nreq_free;
    void *mg_scratch;           /* a multi-get's working arrays (multiget.c) */
    size_t mg_scratch_size;
    mcr__pool_unix *unix_paths;
    size_t nunix;
    uint32_t *load;             /* snapshot index -> refs of its server: the
                                   loads of bounded reads */
    uint64_t load_total;        /* the loads of the ACTIVE servers */
    size_t read_peak;           /* most bytes a read buffer held: mcr__pool_read_peak() */
    uint64_t pass_ns;           /* the clock when the read callback running now began
                                   (0: none runs): mcr__pool_now() */
    /* The router's migration as adopted with snap (pool.c): references
     * in tx, its phase at snap's epoch, the other snapshot (tx.to while
     * copying, tx.from once switched) and its servers by index (servers of
     * snap where id and address match, others kept only for it). */
    mcr_router_migration tx;
    mcr_migration_phase tx_phase;
    const mcr_snapshot *tx_other;
    mcr__pool_server **tx_by;
    size_t ntx_by;
    uint64_t tx_deadline_ns;    /* CLOCK_MONOTONIC; 0: until ended */
};

/* ------------------------------------------------------------ small helpers */

static inline uint64_t mcr__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Now, for stamping requests: inside a read callback, the clock read when it
 * began (one read per pass instead of two per request). A request queued
 * there is stamped at most that callback's duration early; it is written
 * only at the end of the pass anyway, so its stamp was always earlier than
 * its send by as much. */
static inline uint64_t mcr__pool_now(const mcr_pool *p)
{
    return p->pass_ns != 0 ? p->pass_ns : mcr__now_ns();
}

static inline void mcr__set_msg(char *dst, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, MCR__MSG_SIZE, fmt, ap);
    va_end(ap);
}

static inline int mcr__pool_fail(mcr_error *err, int code, const char *fmt, ...)
{
    if (err != NULL) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        vsnprintf(err->message, sizeof(err->message), fmt, ap);
        va_end(ap);
    }
    return code;
}

/* A hash of key bytes for the pool's own tables (hot keys, a multi-get's
 * duplicates, the keys of an open get line): eight bytes a step, each step
 * a multiply and a fold (the constants are the 64-bit golden ratio and
 * MurmurHash3's fmix64 multipliers). Not a placement hash: nothing outside
 * this process sees it, and every table compares the keys themselves. */
static inline uint32_t mcr__key_hash(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *s = p;
    uint64_t h = (seed ^ (uint64_t)n) * 0x9e3779b97f4a7c15ull;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    if (n > 0) {
        uint64_t w = 0;
        memcpy(&w, s, n);
        h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    }
    h ^= h >> 29;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 32;
    return (uint32_t)h;
}

/* What failover may send to a replica: reads that change nothing. */
static inline int mcr__is_read_op(mcr_op op)
{
    return op == MCR_OP_GET || op == MCR_OP_GETS;
}

static inline int mcr__is_get_family(mcr_op op)
{
    return op == MCR_OP_GET || op == MCR_OP_GETS || op == MCR_OP_GAT || op == MCR_OP_GATS;
}

static inline int mcr__is_server_op(mcr_op op)
{
    return op == MCR_OP_VERSION || op == MCR_OP_STATS || op == MCR_OP_FLUSH_ALL ||
           op == MCR_OP_NOOP;
}

static inline int mcr__is_store_op(mcr_op op)
{
    return op >= MCR_OP_SET && op <= MCR_OP_CAS;
}


/* A request points at s from now on / no longer: its refs, and the load
 * that bounded reads see. */
static inline void mcr__server_ref(mcr__pool_server *s)
{
    s->refs++;
    if (s->idx != SIZE_MAX) {
        s->pool->load[s->idx]++;
        s->pool->load_total += (uint64_t)s->counted;
    }
}

static inline void mcr__server_unref(mcr__pool_server *s)
{
    s->refs--;
    if (s->idx != SIZE_MAX) {
        s->pool->load[s->idx]--;
        s->pool->load_total -= (uint64_t)s->counted;
    }
}

static inline char *mcr__req_key_area(mcr__pool_req *r, size_t nkeys, int with_user_idx)
{
    return (char *)(r + 1) + nkeys * (sizeof(char *) + sizeof(size_t) + sizeof(uint32_t)) +
           (with_user_idx ? nkeys * sizeof(size_t) : 0);
}

/* Append r to the queue (*head, *tail): a connection's requests in flight,
 * a server's waiting ones, the pool's deferred completions. */
static inline void mcr__queue_push(mcr__pool_req **head, mcr__pool_req **tail, mcr__pool_req *r)
{
    r->next = NULL;
    if (*tail != NULL)
        (*tail)->next = r;
    else
        *head = r;
    *tail = r;
}

/* ---- stats.c */

/* Count one latency of ns nanoseconds in s's histogram. */
void mcr__hist_add(mcr__pool_server *s, uint64_t ns);
/* The upper edge, µs, of histogram bucket idx (latencies below it). */
uint64_t mcr__hist_upper(size_t idx);

/* ---- options.c */

/* *o: *in (or zeros) with every 0 defaulted; MCR_ERR_RANGE (err set) on a
 * value out of range. */
int mcr__pool_options_normalize(const mcr_pool_options *in, mcr_pool_options *o, mcr_error *err);

/* ---- request.c */

/* A request of p with room for nkeys keys of keybytes bytes in all (and
 * their user indexes for a multi-get), zeroed (its key area excepted); NULL
 * when out of memory. Requests of at most one key come from p's reuse list. */
mcr__pool_req *mcr__req_new(mcr_pool *p, size_t nkeys, size_t keybytes, int with_user_idx);
void mcr__req_free(mcr_pool *p, mcr__pool_req *r);
/* The reuse list emptied (mcr_pool_free). */
void mcr__req_free_all(mcr_pool *p);
/* Queue r's end for the loop (pool.c reports it from its done event). */
void mcr__deferred_push(mcr_pool *p, mcr__pool_req *r);
/* The hot-key table: gets in flight that others of the same key may join. */
/* The hot-key table's hash of a key whose mcr__key_hash() (seed 0) is kh. */
static inline uint32_t mcr__hot_hash(mcr_op op, uint32_t kh)
{
    return kh ^ ((uint32_t)op * 0x9e3779b9u);
}
mcr__pool_req *mcr__hot_find(mcr_pool *p, mcr_op op, const void *key, size_t len, uint32_t h);
void mcr__hot_remove(mcr_pool *p, mcr__pool_req *r);
void mcr__hot_insert(mcr_pool *p, mcr__pool_req *r, uint32_t h);
void mcr__hot_invalidate(mcr_pool *p, const void *key, size_t len);
/* Delivery of key j's result to the callbacks waiting for it; *res is the
 * caller's and is changed (a multi-get's index, per duplicate). */
void mcr__deliver_key(mcr_pool *p, mcr__pool_req *r, uint32_t j, mcr_result *res);
void mcr__result_init(mcr_result *res, const mcr__pool_req *r, uint32_t j);
void mcr__deliver_simple(mcr_pool *p, mcr__pool_req *r, uint32_t j, int status, mcr_reply reply,
                         const char *msg);
void mcr__finish_req(mcr_pool *p, mcr__pool_req *r);
void mcr__fail_later(mcr_pool *p, mcr__pool_req *r, int status, const char *msg);

/* ---- reply.c */

/* Parse what the head request r of c expects from in. 1: complete; 0: more
 * bytes needed; -1: the stream does not fit r (msg says why); -2: out of
 * memory keeping the reply (msg says so). */
int mcr__parse_reply(mcr__pool_conn *c, mcr__pool_req *r, mcr__inbuf *in, char *msg);

/* ---- conn.c */

/* Close c; every request in flight fails with status. */
void mcr__conn_fail(mcr__pool_conn *c, int status, const char *msg);
/* Open a connection in s's slot; NULL when it cannot be (counted). */
mcr__pool_conn *mcr__conn_open(mcr__pool_server *s, int slot);
/* Write r on c: MCR_OK, or an error with r not queued. */
int mcr__conn_send(mcr__pool_conn *c, mcr__pool_req *r);
/* The pool's flush event: write what this loop pass queued. */
void mcr__conn_flush_cb(evutil_socket_t fd, short what, void *arg);
/* Outside the loop (mcr_pool_exec, mcr_pool_wait): what the flush event
 * would write at the loop's next pass written now, the event taken off the
 * active queue: the loop's first pass then blocks for replies instead of
 * polling once for the flush (an epoll_wait(2) less a call). */
void mcr__pool_flush_now(mcr_pool *p);

/* ---- server.c */

void mcr__server_fail_waiting(mcr__pool_server *s, int status, const char *msg);
void mcr__server_close_idle(mcr__pool_server *s);
void mcr__server_destroy(mcr__pool_server *s);
void mcr__server_maybe_free(mcr__pool_server *s);
void mcr__server_schedule_probe(mcr__pool_server *s);
void mcr__server_failed(mcr__pool_server *s, int status);
/* Eject s (down 1: DOWN in the router's local overlay) or re-add it (down
 * 0: clear what this pool set), never blocking: MCR_OK, MCR_ERR_BUSY (try
 * again later), or why it cannot be ejected (MCR_ERR_EMPTY: the last
 * ACTIVE server; MCR_ERR_INVALID: DRAINING, an operator's choice;
 * MCR_ERR_UNKNOWN: not in the published snapshot at this address). */
int mcr__server_overlay(mcr_pool *p, mcr__pool_server *s, int down);
mcr__pool_server *mcr__server_new(mcr_pool *p, const mcr_server_desc *d);
void mcr__server_retire(mcr__pool_server *s);
/* Send r to s now, or queue it there: MCR_OK, or MCR_ERR_NOMEM. */
int mcr__server_dispatch(mcr__pool_server *s, mcr__pool_req *r);
void mcr__server_pump(mcr__pool_server *s);

/* ---- pool.c */

/* Adopt the router's current snapshot if it is new (its generation moved):
 * MCR_OK, MCR_ERR_EMPTY or MCR_ERR_NOMEM. mcr__pool_refresh() is the check
 * every request makes, inline: nothing to adopt and no migration deadline
 * to watch is one load and a compare; anything else is the full function. */
int mcr__pool_refresh_slow(mcr_pool *p);
static inline int mcr__pool_refresh(mcr_pool *p)
{
    if (p->snap != NULL && p->tx_deadline_ns == 0 && mcr_router_generation(p->router) == p->gen)
        return MCR_OK;
    return mcr__pool_refresh_slow(p);
}
/* On a router fed from a state: publish the servers' counters into the
 * process's slot (when this pool is its writer). metrics.c. */
void mcr__pool_publish_counters(mcr_pool *p);
/* How often, ms. */
#define MCR__PUBLISH_MS 500

/* 1 when called from inside a callback run by p's event loop. */
int mcr__pool_inside_loop(mcr_pool *p);

/* ---- submit.c */

/* The server for a keyed request: its owner in p->snap, or (owner not up)
 * a retry or a failover replica; with *status set when none can take it
 * (the owner is returned then). */
mcr__pool_server *mcr__route_key(mcr_pool *p, mcr_op op, const void *key, size_t len, int *status);
/* The same, for a key whose owner, snapshot index `owner`, is known
 * (mcr_snapshot_locate_many() over a batch; not under bounded loads,
 * where the owner depends on the loads). */
mcr__pool_server *mcr__route_owner(mcr_pool *p, mcr_op op, const void *key, size_t len,
                                   uint32_t owner, int *status);
/* Route and send the gets waiting in p's routing queue (see submit.c). */
void mcr__route_pending(mcr_pool *p);
/* mcr_pool_submit() without the migration: routed by key (pin NULL) or
 * sent to `pin`, a server of the pool; force_meta: in meta whatever the
 * pool's protocol (the reply's TTL). */
int mcr__submit(mcr_pool *p, const mcr_request *q, mcr__pool_server *pin, int force_meta,
                mcr_pool_cb cb, void *arg, mcr_error *err);

/* ---- multiget.c */

/* mcr_pool_get_multi() without the migration. */
int mcr__get_multi(mcr_pool *p, mcr_op op, const void *const *keys, const size_t *lens, size_t n,
                   mcr_pool_cb key_cb, mcr_pool_cb done_cb, void *arg, mcr_error *err);

/* The most reply bytes one connection of the pool held unparsed at once
 * (its read buffer, measured after each read), since the pool was created:
 * what a server's replies made it buffer. 0 for NULL. For the tests of the
 * reply limits. */
size_t mcr__pool_read_peak(const struct mcr_pool *p);


#endif
