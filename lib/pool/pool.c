/* SPDX-License-Identifier: BSD-3-Clause */
/* pool.c: the libevent connection pool: routing through the router's snapshot, pipelined connections, timeouts, failure policies, hot-key sharing, counters. */
#include "mcroute_pool.h"

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "internal.h"
#include "proto.h"

/* memcached's key limit, prefix included (KEY_MAX_LENGTH in memcached). */
#define KEY_MAX MCR_KEY_MAX
#define PREFIX_MAX MCR_POOL_PREFIX_MAX
#define CONN_MAX MCR_POOL_CONNECTIONS_MAX
/* Keys of one server in one multi-get request: memcached reads a long get
 * line in pieces, so the bound only keeps one request's reply moderate. */
#define BATCH_MAX 256
/* STATS replies are collected whole; more than this is not memcached. */
#define STATS_MAX (4u << 20)
#define HIST_SUB 16
#define HIST_BUCKETS (64 * HIST_SUB)
#define MSG_SIZE 160

typedef struct pool_server pool_server;
typedef struct pool_conn pool_conn;
typedef struct pool_req pool_req;

typedef struct pool_waiter {
    struct pool_waiter *next;
    mcr_pool_cb cb;
    void *arg;
} pool_waiter;

/* A multi-get: its per-server requests report here. */
typedef struct pool_mget {
    mcr_pool_cb key_cb, done_cb;
    void *arg;
    size_t outstanding;   /* requests (and deferred key errors) not finished */
    uint64_t hits;
    int status;           /* first error met, MCR_OK otherwise */
    uint64_t epoch;
    size_t *next_dup;     /* next user index with the same key, SIZE_MAX: none */
    char message[MSG_SIZE];
} pool_mget;

struct pool_req {
    pool_req *next;            /* connection queue, server wait queue or deferred list */
    pool_server *server;
    pool_conn *conn;           /* while in flight */
    mcr_pool_cb cb;            /* single request */
    void *arg;
    pool_waiter *waiters;      /* gets sharing this one's reply */
    pool_mget *mget;           /* part of a multi-get */
    size_t *user_idx;          /* mget: first user index of key j */
    pool_req *hot_next;        /* hot-key table chain */
    uint32_t hot_hash;
    unsigned in_hot : 1;       /* in the hot-key table: others may join */
    unsigned delivered : 1;    /* single: its callback has run */
    unsigned internal : 1;     /* a probe of the pool itself */
    unsigned failed_batch : 1; /* meta multi-get: an error line came before MN */
    unsigned joined : 1;       /* text get: its keys share the previous request's line */
    unsigned group_done : 1;   /* text get: its line's END came (or its error) */
    mcr_op op;
    uint64_t epoch;
    uint64_t sent_ns;
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
    char message[MSG_SIZE];
};

enum { CONN_CONNECTING, CONN_READY };

/* The bytes of one pipelined text get line, at most (keys are added to an
 * open "get" line until then). */
#define LINE_KEYS_MAX 100
/* Bytes read by one system call. */
#define READ_STEP 65536

struct pool_conn {
    pool_server *server;
    evutil_socket_t fd;
    struct event *rev;         /* readable: persistent while open */
    struct event *wev;         /* writable: only while connecting or blocked */
    struct evbuffer *in, *out;
    struct event *timer;
    pool_conn *flush_next;     /* in the pool's list of connections to flush */
    int flush_queued;
    int line_open;             /* a text get line is being extended */
    mcr_op line_op;
    unsigned line_keys;
    pool_req *line_first;      /* the first request on the open line */
    mcr__proto_skip skip;      /* a value over max_value_size, dropped as it comes */
    pool_req *head, *tail;     /* in flight, in send order */
    size_t inflight;
    int state;
    int slot;
    int busy;                  /* inside its read callback */
    int dead;                  /* closed; freed when no longer busy */
    uint32_t opaque_seq;
    uint64_t connect_deadline;
    uint64_t graced;           /* sent_ns of the request given a read grace */
    uint64_t armed_at;         /* when the timer fires, if pending */
};

struct pool_server {
    mcr_pool *pool;
    char *id;
    char host[MCR_HOSTNAME_MAX + 1];
    int port;
    struct sockaddr_storage addr;
    socklen_t addrlen;          /* 0: not resolved yet */
    pool_conn **conns;          /* options.connections slots */
    pool_req *wait_head, *wait_tail;
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
    size_t list_pos;
    /* multi-get grouping scratch */
    size_t mg_head, mg_tail, mg_count;
    int mg_marked;
    /* counters */
    uint64_t requests, hits, misses, errors, timeouts, refusals, ejections, coalesced;
    uint64_t lat_count, lat_max;
    uint32_t hist[HIST_BUCKETS];
};

typedef struct unix_map {
    char *id;
    char *path;
} unix_map;

struct mcr_pool {
    struct event_base *base;
    mcr_router *router;
    mcr_pool_options o;
    char prefix[PREFIX_MAX + 1];
    size_t prefix_len;
    mcr_snapshot *snap;
    uint64_t epoch;
    pool_server **by_index;     /* snapshot server index -> server */
    size_t nby;
    pool_server **servers;      /* current and draining */
    size_t nservers, cap;
    pool_req *def_head, *def_tail;
    struct event *done_ev;
    struct event *flush_ev;     /* writes what this loop pass queued */
    struct event *collect_ev;   /* frees what our ejections replaced */
    pool_conn *flush_head;
    int ops_pending;
    size_t pending;
    int in_callback;
    int freeing;
    pool_req **hot;
    size_t hot_mask, hot_count;
    unix_map *unix_paths;
    size_t nunix;
    uint32_t *load;             /* snapshot index -> refs of its server: the
                                   loads of bounded reads */
    uint64_t load_total;        /* the loads of the ACTIVE servers */
    size_t read_peak;           /* most bytes a read buffer held: mcr__pool_read_peak() */
};

/* ------------------------------------------------------------ small helpers */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void set_msg(char *dst, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, MSG_SIZE, fmt, ap);
    va_end(ap);
}

static int fail(mcr_error *err, int code, const char *fmt, ...)
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

static uint32_t fnv1a(const void *p, size_t n, uint32_t h)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 16777619u;
    return h;
}

/* What failover may send to a replica: reads that change nothing. */
static int is_read_op(mcr_op op)
{
    return op == MCR_OP_GET || op == MCR_OP_GETS;
}

static int is_get_family(mcr_op op)
{
    return op == MCR_OP_GET || op == MCR_OP_GETS || op == MCR_OP_GAT || op == MCR_OP_GATS;
}

static int is_server_op(mcr_op op)
{
    return op == MCR_OP_VERSION || op == MCR_OP_STATS || op == MCR_OP_FLUSH_ALL ||
           op == MCR_OP_NOOP;
}

static int is_store_op(mcr_op op)
{
    return op >= MCR_OP_SET && op <= MCR_OP_CAS;
}

static void hist_add(pool_server *s, uint64_t ns)
{
    uint64_t us = ns / 1000;
    size_t idx;
    if (us < HIST_SUB) {
        idx = (size_t)us;
    } else {
        int msb = 63 - __builtin_clzll(us);
        idx = (size_t)(msb - 3) * HIST_SUB + (size_t)((us >> (msb - 4)) & (HIST_SUB - 1));
    }
    s->hist[idx]++;
    s->lat_count++;
    if (us > s->lat_max)
        s->lat_max = us;
}

static double hist_value(size_t idx)
{
    if (idx < HIST_SUB)
        return (double)idx + 0.5;
    int msb = (int)(idx / HIST_SUB) + 3;
    uint64_t sub = idx % HIST_SUB;
    double lo = (double)((HIST_SUB | sub) << (msb - 4));
    double width = (double)(1ull << (msb - 4));
    return lo + width / 2;
}

static double hist_pct(const pool_server *s, double q)
{
    if (s->lat_count == 0)
        return 0;
    uint64_t rank = (uint64_t)(q * (double)s->lat_count);
    if (rank >= s->lat_count)
        rank = s->lat_count - 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < HIST_BUCKETS; i++) {
        seen += s->hist[i];
        if (seen > rank) {
            double v = hist_value(i);
            return v > (double)s->lat_max ? (double)s->lat_max : v;
        }
    }
    return (double)s->lat_max;
}

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

static int normalize_options(const mcr_pool_options *in, mcr_pool_options *o, mcr_error *err)
{
    if (in != NULL)
        *o = *in;
    else
        memset(o, 0, sizeof(*o));
    if (o->connections == 0)
        o->connections = 1;
    if (o->connections > CONN_MAX)
        return fail(err, MCR_ERR_RANGE, "connections %u is over %d", o->connections, CONN_MAX);
    if (o->connect_timeout_ms == 0)
        o->connect_timeout_ms = 1000;
    if (o->request_timeout_ms == 0)
        o->request_timeout_ms = 1000;
    if (o->connect_timeout_ms > DAY_MS || o->request_timeout_ms > DAY_MS)
        return fail(err, MCR_ERR_RANGE, "a timeout over one day (%u ms, %u ms)",
                    o->connect_timeout_ms, o->request_timeout_ms);
    if ((unsigned)o->policy > MCR_POLICY_FAILOVER)
        return fail(err, MCR_ERR_RANGE, "unknown failure policy %d", (int)o->policy);
    if (o->protocol != MCR_PROTO_TEXT && o->protocol != MCR_PROTO_META)
        return fail(err, MCR_ERR_RANGE, "unknown protocol %d", (int)o->protocol);
    if (o->server_failure_limit == 0)
        o->server_failure_limit = 2;
    if (o->server_failure_limit > 1000)
        return fail(err, MCR_ERR_RANGE, "server_failure_limit %u is over 1000",
                    o->server_failure_limit);
    if (o->retry_timeout_ms == 0)
        o->retry_timeout_ms = 30000;
    if (o->retry_timeout_ms > DAY_MS)
        return fail(err, MCR_ERR_RANGE, "retry_timeout_ms %u is over one day", o->retry_timeout_ms);
    if (o->retry_max_ms == 0)
        o->retry_max_ms = o->retry_timeout_ms > DAY_MS / 16 ? DAY_MS : o->retry_timeout_ms * 16;
    if (o->retry_max_ms > DAY_MS)
        return fail(err, MCR_ERR_RANGE, "retry_max_ms %u is over one day", o->retry_max_ms);
    if (o->retry_max_ms < o->retry_timeout_ms)
        o->retry_max_ms = o->retry_timeout_ms;
    if (o->max_value_size == 0)
        o->max_value_size = 1u << 20;
    if (o->max_value_size > MCR_POOL_VALUE_MAX)
        return fail(err, MCR_ERR_RANGE, "max_value_size %zu is over 1 GiB", o->max_value_size);
    if (o->max_in_flight == 0)
        o->max_in_flight = 1024;
    if (!(o->bounded_epsilon >= 0) || o->bounded_epsilon > MCR_POOL_EPSILON_MAX)
        return fail(err, MCR_ERR_RANGE, "bounded_epsilon %g is outside 0..%g", o->bounded_epsilon,
                    MCR_POOL_EPSILON_MAX);
    if (o->key_prefix != NULL && o->key_prefix[0] != '\0') {
        size_t n = strlen(o->key_prefix);
        if (n > PREFIX_MAX || !mcr__proto_key_ok(o->key_prefix, n, PREFIX_MAX))
            return fail(err, MCR_ERR_RANGE,
                        "key_prefix must be 1..%d bytes without space or control byte",
                        PREFIX_MAX);
    }
    return MCR_OK;
}

/* ------------------------------------------------------------ forward */

static void conn_fail(pool_conn *c, int status, const char *msg);
static void server_pump(pool_server *s);
static void finish_req(mcr_pool *p, pool_req *r);
static int pool_refresh(mcr_pool *p);
static void server_maybe_free(pool_server *s);

/* A request points at s from now on / no longer: its refs, and the load
 * that bounded reads see. */
static void server_ref(pool_server *s)
{
    s->refs++;
    if (s->idx != SIZE_MAX) {
        s->pool->load[s->idx]++;
        s->pool->load_total += (uint64_t)s->counted;
    }
}

static void server_unref(pool_server *s)
{
    s->refs--;
    if (s->idx != SIZE_MAX) {
        s->pool->load[s->idx]--;
        s->pool->load_total -= (uint64_t)s->counted;
    }
}

/* ------------------------------------------------------------ requests */

static pool_req *req_new(size_t nkeys, size_t keybytes, int with_user_idx)
{
    size_t sz = sizeof(pool_req) + nkeys * (sizeof(char *) + sizeof(size_t)) +
                (with_user_idx ? nkeys * sizeof(size_t) : 0) + keybytes;
    pool_req *r = calloc(1, sz);
    if (r == NULL)
        return NULL;
    char *p = (char *)(r + 1);
    r->keys = (const char **)(void *)p;
    p += nkeys * sizeof(char *);
    r->klens = (size_t *)(void *)p;
    p += nkeys * sizeof(size_t);
    if (with_user_idx) {
        r->user_idx = (size_t *)(void *)p;
        p += nkeys * sizeof(size_t);
    }
    /* key bytes follow; placed by the caller with req_key_area() */
    return r;
}

static char *req_key_area(pool_req *r, size_t nkeys, int with_user_idx)
{
    return (char *)(r + 1) + nkeys * (sizeof(char *) + sizeof(size_t)) +
           (with_user_idx ? nkeys * sizeof(size_t) : 0);
}

static void req_free(pool_req *r)
{
    pool_waiter *w = r->waiters;
    while (w != NULL) {
        pool_waiter *n = w->next;
        free(w);
        w = n;
    }
    free(r->val_copy);
    free(r->text);
    free(r);
}

/* Append r to the queue (*head, *tail): a connection's requests in flight,
 * a server's waiting ones, the pool's deferred completions. */
static void queue_push(pool_req **head, pool_req **tail, pool_req *r)
{
    r->next = NULL;
    if (*tail != NULL)
        (*tail)->next = r;
    else
        *head = r;
    *tail = r;
}

static void deferred_push(mcr_pool *p, pool_req *r)
{
    queue_push(&p->def_head, &p->def_tail, r);
    event_active(p->done_ev, EV_TIMEOUT, 0);
}

/* ------------------------------------------------------------ hot keys */

static uint32_t hot_hash(mcr_op op, const void *key, size_t len)
{
    return fnv1a(key, len, 2166136261u ^ (uint32_t)op);
}

static pool_req **hot_slot(mcr_pool *p, uint32_t h)
{
    return &p->hot[h & p->hot_mask];
}

static pool_req *hot_find(mcr_pool *p, mcr_op op, const void *key, size_t len, uint32_t h)
{
    if (p->hot == NULL)
        return NULL;
    for (pool_req *r = *hot_slot(p, h); r != NULL; r = r->hot_next)
        if (r->hot_hash == h && r->op == op && r->klens[0] == len &&
            memcmp(r->keys[0], key, len) == 0)
            return r;
    return NULL;
}

static void hot_remove(mcr_pool *p, pool_req *r)
{
    if (!r->in_hot)
        return;
    for (pool_req **pp = hot_slot(p, r->hot_hash); *pp != NULL; pp = &(*pp)->hot_next)
        if (*pp == r) {
            *pp = r->hot_next;
            break;
        }
    r->in_hot = 0;
    r->hot_next = NULL;
    p->hot_count--;
}

static void hot_insert(mcr_pool *p, pool_req *r, uint32_t h)
{
    if (p->hot == NULL || p->hot_count >= p->hot_mask + 1) {
        size_t n = p->hot == NULL ? 256 : (p->hot_mask + 1) * 2;
        pool_req **t = calloc(n, sizeof(*t));
        if (t == NULL)
            return; /* no sharing for this one: still correct */
        if (p->hot != NULL) {
            for (size_t i = 0; i <= p->hot_mask; i++) {
                pool_req *e = p->hot[i];
                while (e != NULL) {
                    pool_req *nx = e->hot_next;
                    e->hot_next = t[e->hot_hash & (n - 1)];
                    t[e->hot_hash & (n - 1)] = e;
                    e = nx;
                }
            }
            free(p->hot);
        }
        p->hot = t;
        p->hot_mask = n - 1;
    }
    r->hot_hash = h;
    r->hot_next = *hot_slot(p, h);
    *hot_slot(p, h) = r;
    r->in_hot = 1;
    p->hot_count++;
}

/* A write of `key` ends sharing of gets already in flight. */
static void hot_invalidate(mcr_pool *p, const void *key, size_t len)
{
    if (p->hot_count == 0)
        return;
    for (int op = MCR_OP_GET; op <= MCR_OP_GETS; op++) {
        uint32_t h = hot_hash((mcr_op)op, key, len);
        pool_req *r = hot_find(p, (mcr_op)op, key, len, h);
        if (r != NULL)
            hot_remove(p, r);
    }
}

/* ------------------------------------------------------------ delivery */

static void call_cb(mcr_pool *p, mcr_pool_cb cb, void *arg, const mcr_result *res)
{
    p->in_callback++;
    cb(res, arg);
    p->in_callback--;
}

static void count_result(pool_server *s, const mcr_result *res)
{
    if (s == NULL)
        return;
    if (res->status != MCR_OK)
        s->errors++;
    else if (res->reply == MCR_REPLY_HIT)
        s->hits++;
    else if (res->reply == MCR_REPLY_MISS && is_get_family(res->op))
        s->misses++;
}

/* Report key j of r: to the single request's callback (and the gets that
 * share it), or to the multi-get's key callback once per occurrence. */
static void deliver_key(mcr_pool *p, pool_req *r, uint32_t j, const mcr_result *res)
{
    if (r->mget != NULL) {
        pool_mget *m = r->mget;
        for (size_t u = r->user_idx[j]; u != SIZE_MAX; u = m->next_dup[u]) {
            count_result(r->server, res);
            if (res->status == MCR_OK && res->reply == MCR_REPLY_HIT)
                m->hits++;
            else if (res->status != MCR_OK && m->status == MCR_OK) {
                m->status = res->status;
                snprintf(m->message, sizeof(m->message), "%s", res->message ? res->message : "");
            }
            call_cb(p, m->key_cb, m->arg, res);
        }
        return;
    }
    if (r->delivered)
        return;
    r->delivered = 1;
    hot_remove(p, r);
    count_result(r->server, res);
    if (!r->internal)
        p->pending--;
    call_cb(p, r->cb, r->arg, res);
    pool_waiter *w = r->waiters;
    r->waiters = NULL;
    while (w != NULL) {
        pool_waiter *n = w->next;
        if (r->server != NULL)
            r->server->coalesced++;
        count_result(r->server, res);
        p->pending--;
        call_cb(p, w->cb, w->arg, res);
        free(w);
        w = n;
    }
}

static void result_init(mcr_result *res, const pool_req *r, uint32_t j)
{
    memset(res, 0, sizeof(*res));
    res->op = r->op;
    res->status = MCR_OK;
    if (j < r->nkeys) {
        res->key = r->keys[j];
        res->key_len = r->klens[j];
    }
    res->server = r->server != NULL ? r->server->id : NULL;
    res->epoch = r->epoch;
}

static void deliver_simple(mcr_pool *p, pool_req *r, uint32_t j, int status, mcr_reply reply,
                           const char *msg)
{
    mcr_result res;
    result_init(&res, r, j);
    res.status = status;
    res.reply = reply;
    res.flags = r->flags;
    res.cas = r->cas;
    res.number = r->number;
    if (status == MCR_OK && (reply == MCR_REPLY_VERSION || reply == MCR_REPLY_STATS)) {
        res.value = r->text != NULL ? r->text : "";
        res.value_len = r->text_len;
    }
    res.message = status != MCR_OK ? (msg != NULL && msg[0] ? msg : mcr_strerror(status)) : NULL;
    deliver_key(p, r, j, &res);
}

/* The end of a request: report what is left, count, free. */
static void finish_req(mcr_pool *p, pool_req *r)
{
    pool_server *s = r->server;
    if (r->sent_ns != 0 && s != NULL && r->status != MCR_ERR_TIMEOUT &&
        r->status != MCR_ERR_CONNECT && r->status != MCR_ERR_CANCELLED &&
        r->status != MCR_ERR_PROTOCOL && r->status != MCR_ERR_DOWN)
        hist_add(s, now_ns() - r->sent_ns);
    if (r->mget != NULL) {
        for (uint32_t j = r->cursor; j < r->nkeys; j++)
            deliver_simple(p, r, j, r->status, MCR_REPLY_MISS, r->message);
        r->cursor = r->nkeys;
        pool_mget *m = r->mget;
        if (--m->outstanding == 0) {
            mcr_result res;
            memset(&res, 0, sizeof(res));
            res.op = r->op;
            res.status = m->status;
            res.number = m->hits;
            res.epoch = m->epoch;
            res.message = m->status != MCR_OK ? m->message : NULL;
            p->pending--;
            call_cb(p, m->done_cb, m->arg, &res);
            free(m->next_dup);
            free(m);
        }
    } else if (!r->delivered) {
        deliver_simple(p, r, 0, r->status, r->reply, r->message);
    }
    hot_remove(p, r);
    if (s != NULL) {
        server_unref(s);
        server_maybe_free(s);
    }
    req_free(r);
}

/* Fail a request not yet in flight, later (never inside the submitting
 * call): the libuv contract. */
static void fail_later(mcr_pool *p, pool_req *r, int status, const char *msg)
{
    r->status = status;
    set_msg(r->message, "%s", msg);
    deferred_push(p, r);
}

/* ------------------------------------------------------------ servers */

static void server_fail_waiting(pool_server *s, int status, const char *msg)
{
    pool_req *r = s->wait_head;
    s->wait_head = s->wait_tail = NULL;
    while (r != NULL) {
        pool_req *n = r->next;
        fail_later(s->pool, r, status, msg);
        r = n;
    }
}

static void server_close_idle(pool_server *s)
{
    for (unsigned i = 0; i < s->pool->o.connections; i++) {
        pool_conn *c = s->conns[i];
        if (c != NULL && c->inflight == 0)
            conn_fail(c, MCR_ERR_CANCELLED, "server removed");
    }
}

static void server_destroy(pool_server *s)
{
    mcr_pool *p = s->pool;
    size_t i = s->list_pos;
    p->servers[i] = p->servers[--p->nservers];
    p->servers[i]->list_pos = i;
    if (s->retry_ev != NULL)
        event_free(s->retry_ev);
    free(s->conns);
    free(s->id);
    free(s);
}

static void server_maybe_free(pool_server *s)
{
    if (!s->retired || s->refs > 0 || s->pool->freeing)
        return;
    for (unsigned i = 0; i < s->pool->o.connections; i++)
        if (s->conns[i] != NULL) {
            if (s->conns[i]->inflight == 0)
                conn_fail(s->conns[i], MCR_ERR_CANCELLED, "server removed");
            if (s->conns[i] != NULL)
                return; /* a busy connection: freed when it is */
        }
    server_destroy(s);
}

static unsigned next_backoff(pool_server *s, uint64_t now)
{
    const mcr_pool_options *o = &s->pool->o;
    if (s->readded_at != 0 && now - s->readded_at < (uint64_t)o->retry_timeout_ms * 1000000u &&
        s->backoff_ms != 0) {
        uint64_t b = (uint64_t)s->backoff_ms * 2;
        return b > o->retry_max_ms ? o->retry_max_ms : (unsigned)b;
    }
    return o->retry_timeout_ms;
}

static void schedule_probe(pool_server *s)
{
    struct timeval tv = { (time_t)(s->backoff_ms / 1000), (suseconds_t)(s->backoff_ms % 1000) * 1000 };
    evtimer_add(s->retry_ev, &tv);
}

static void server_down(pool_server *s)
{
    mcr_pool *p = s->pool;
    uint64_t now = now_ns();
    s->backoff_ms = next_backoff(s, now);
    if (p->o.policy == MCR_POLICY_EJECT && !s->retired) {
        s->health = MCR_HEALTH_EJECTED;
        s->eject_pending = 1;
        p->ops_pending = 1;
        event_active(p->done_ev, EV_TIMEOUT, 0);
    } else {
        s->health = MCR_HEALTH_DOWN;
        s->retry_at = now + (uint64_t)s->backoff_ms * 1000000u;
    }
    server_fail_waiting(s, MCR_ERR_DOWN, "server down after consecutive failures");
}

static void server_failed(pool_server *s, int status)
{
    if (status == MCR_ERR_TIMEOUT)
        s->timeouts++;
    else
        s->refusals++;
    s->consecutive++;
    if (s->health == MCR_HEALTH_UP && s->consecutive >= s->pool->o.server_failure_limit)
        server_down(s);
}

/* Change one server's state through the router (eject / re-add). */
static int publish_state(mcr_pool *p, pool_server *s, mcr_server_state want)
{
    mcr_snapshot *cur = mcr_router_current(p->router);
    if (cur == NULL)
        return MCR_ERR_EMPTY;
    long i = mcr_snapshot_find(cur, s->id);
    mcr_server_desc d;
    int rc = MCR_ERR_UNKNOWN;
    if (i >= 0 && mcr_snapshot_server(cur, (size_t)i, &d) == MCR_OK && d.port == s->port &&
        strcmp(d.host, s->host) == 0) {
        if (d.state == want) {
            rc = MCR_OK; /* someone else did it */
        } else if (d.state == MCR_STATE_DRAINING) {
            /* an operator's choice, not ours to override either way */
            rc = want == MCR_STATE_ACTIVE ? MCR_OK : MCR_ERR_INVALID;
        } else {
            mcr_changes *ch = mcr_changes_new();
            rc = ch == NULL ? MCR_ERR_NOMEM : mcr_changes_set_state(ch, s->id, want, NULL);
            if (rc == MCR_OK)
                rc = mcr_router_try_apply(p->router, ch, NULL); /* never blocks the loop */
            mcr_changes_free(ch);
            if (rc == MCR_OK && want == MCR_STATE_DOWN)
                s->ejections++;
        }
    }
    mcr_snapshot_unref(cur);
    return rc;
}

static void probe_cb(const mcr_result *res, void *arg)
{
    pool_server *s = arg;
    mcr_pool *p = s->pool;
    s->probing = 0;
    if (s->retired)
        return;
    if (res->status == MCR_OK) {
        s->health = MCR_HEALTH_UP;
        s->consecutive = 0;
        s->readded_at = now_ns();
        s->readd_pending = 1;
        p->ops_pending = 1;
        event_active(p->done_ev, EV_TIMEOUT, 0);
    } else {
        uint64_t b = (uint64_t)s->backoff_ms * 2;
        s->backoff_ms = b > p->o.retry_max_ms ? p->o.retry_max_ms : (unsigned)b;
        schedule_probe(s);
    }
}

static int dispatch(pool_server *s, pool_req *r);

static void retry_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    pool_server *s = arg;
    mcr_pool *p = s->pool;
    if (s->retired || s->probing || s->health == MCR_HEALTH_UP)
        return;
    pool_req *r = req_new(0, 0, 0);
    if (r == NULL) {
        schedule_probe(s);
        return;
    }
    r->op = MCR_OP_VERSION;
    r->internal = 1;
    r->cb = probe_cb;
    r->arg = s;
    r->server = s;
    r->epoch = p->epoch;
    server_ref(s);
    s->probing = 1;
    s->consecutive = 0;
    dispatch(s, r);
}

/* The snapshots our publishes (mcr_router_try_apply()) replaced are freed
 * on this thread once no reader holds them, not on liburcu's thread, whose
 * frees would contend with this loop's allocations for its malloc arena
 * (see lib/router.c). A grace period lasts milliseconds, urcu-bp polls
 * its readers every 10 ms: collect at that pace until none is left. */
static void collect_cb(evutil_socket_t fd, short what, void *arg)
{
    static const struct timeval again = {0, 10000};
    mcr_pool *p = arg;
    (void)fd;
    (void)what;
    if (mcr_router_collect(p->router) > 0)
        event_add(p->collect_ev, &again);
}

static void run_ops(mcr_pool *p)
{
    /* MCR_ERR_TIMEOUT: the router is busy (another writer, or reclamation
     * at its bound). The change stays pending and is tried again on a later
     * turn of the loop; a server's re-add waits for its ejection. */
    static const struct timeval retry = {0, 1000};
    int busy = 0;
    p->ops_pending = 0;
    for (size_t i = 0; i < p->nservers; i++) {
        pool_server *s = p->servers[i];
        if (s->eject_pending) {
            s->eject_pending = 0;
            if (s->retired)
                continue;
            int rc = publish_state(p, s, MCR_STATE_DOWN);
            if (rc == MCR_ERR_TIMEOUT) {
                s->eject_pending = busy = 1;
                continue;
            }
            if (rc != MCR_OK) {
                /* The ring cannot lose it (the last active server, or it
                 * changed meanwhile): behave as fail-fast for it. */
                s->health = MCR_HEALTH_DOWN;
                s->retry_at = now_ns() + (uint64_t)s->backoff_ms * 1000000u;
            }
            schedule_probe(s);
        }
        if (s->readd_pending) {
            s->readd_pending = 0;
            if (!s->retired && publish_state(p, s, MCR_STATE_ACTIVE) == MCR_ERR_TIMEOUT)
                s->readd_pending = busy = 1;
        }
    }
    if (busy) {
        p->ops_pending = 1;
        event_add(p->done_ev, &retry);
    }
    if (!evtimer_pending(p->collect_ev, NULL))
        collect_cb(-1, 0, p);
    pool_refresh(p);
}

static void pool_done_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    mcr_pool *p = arg;
    if (p->ops_pending)
        run_ops(p);
    pool_req *r = p->def_head;
    p->def_head = p->def_tail = NULL;
    while (r != NULL) {
        pool_req *n = r->next;
        finish_req(p, r);
        r = n;
    }
}

static pool_server *server_new(mcr_pool *p, const mcr_server_desc *d)
{
    if (p->nservers == p->cap) {
        size_t n = p->cap ? p->cap * 2 : 16;
        pool_server **t = realloc(p->servers, n * sizeof(*t));
        if (t == NULL)
            return NULL;
        p->servers = t;
        p->cap = n;
    }
    pool_server *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->pool = p;
    s->idx = SIZE_MAX;
    s->id = strdup(d->id);
    s->conns = calloc(p->o.connections, sizeof(*s->conns));
    s->retry_ev = evtimer_new(p->base, retry_timer_cb, s);
    if (s->id == NULL || s->conns == NULL || s->retry_ev == NULL) {
        if (s->retry_ev != NULL)
            event_free(s->retry_ev);
        free(s->conns);
        free(s->id);
        free(s);
        return NULL;
    }
    snprintf(s->host, sizeof(s->host), "%s", d->host);
    s->port = d->port;
    s->list_pos = p->nservers;
    p->servers[p->nservers++] = s;
    return s;
}

static void server_retire(pool_server *s)
{
    if (s->retired)
        return;
    s->retired = 1;
    s->health = MCR_HEALTH_DRAINING;
    event_del(s->retry_ev);
    server_fail_waiting(s, MCR_ERR_CANCELLED, "server removed from the snapshot");
    /* Requests on a connection not made yet never reached the server. */
    for (unsigned i = 0; i < s->pool->o.connections; i++) {
        pool_conn *c = s->conns[i];
        if (c != NULL && c->state == CONN_CONNECTING)
            conn_fail(c, MCR_ERR_CANCELLED, "server removed before its connection was made");
    }
    server_close_idle(s);
    server_maybe_free(s);
}

/* ------------------------------------------------------------ connections */

static void conn_destroy(pool_conn *c)
{
    if (c->rev != NULL)
        event_free(c->rev);
    if (c->wev != NULL)
        event_free(c->wev);
    if (c->timer != NULL)
        event_free(c->timer);
    if (c->in != NULL)
        evbuffer_free(c->in);
    if (c->out != NULL)
        evbuffer_free(c->out);
    if (c->fd >= 0)
        evutil_closesocket(c->fd);
    free(c);
}

static void conn_arm(pool_conn *c, uint64_t deadline)
{
    uint64_t now = now_ns();
    uint64_t d = deadline > now ? deadline - now : 0;
    struct timeval tv = { (time_t)(d / 1000000000u), (suseconds_t)((d % 1000000000u) / 1000) };
    evtimer_add(c->timer, &tv);
    c->armed_at = deadline;
}

/* Close c: every request in flight fails with `status`. */
static void conn_fail(pool_conn *c, int status, const char *msg)
{
    if (c->dead)
        return;
    c->dead = 1;
    pool_server *s = c->server;
    mcr_pool *p = s->pool;
    if (s->conns[c->slot] == c)
        s->conns[c->slot] = NULL;
    int counts = status != MCR_ERR_CANCELLED && (c->inflight > 0 || c->state == CONN_CONNECTING);
    pool_req *r = c->head;
    c->head = c->tail = NULL;
    s->inflight -= c->inflight;
    c->inflight = 0;
    while (r != NULL) {
        pool_req *n = r->next;
        r->conn = NULL;
        r->status = status;
        set_msg(r->message, "%s:%d: %s", s->host, s->port, msg);
        deferred_push(p, r);
        r = n;
    }
    if (c->rev != NULL)
        event_del(c->rev);
    if (c->wev != NULL)
        event_del(c->wev);
    evtimer_del(c->timer);
    if (c->flush_queued) {
        for (pool_conn **pp = &p->flush_head; *pp != NULL; pp = &(*pp)->flush_next)
            if (*pp == c) {
                *pp = c->flush_next;
                break;
            }
        c->flush_queued = 0;
    }
    if (!c->busy)
        conn_destroy(c);
    if (counts)
        server_failed(s, status);
    if (!p->freeing && s->wait_head != NULL && s->health == MCR_HEALTH_UP)
        server_pump(s);
}

static int reply_waiting(pool_conn *c)
{
    char b;
    return c->fd >= 0 && recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 1;
}

static void conn_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    pool_conn *c = arg;
    mcr_pool *p = c->server->pool;
    uint64_t now = now_ns();
    if (c->state == CONN_CONNECTING && now >= c->connect_deadline) {
        char m[64];
        snprintf(m, sizeof(m), "no connection within %u ms", p->o.connect_timeout_ms);
        conn_fail(c, MCR_ERR_TIMEOUT, m);
        return;
    }
    uint64_t next = c->state == CONN_CONNECTING ? c->connect_deadline : 0;
    if (c->head != NULL) {
        uint64_t d = c->head->sent_ns + (uint64_t)p->o.request_timeout_ms * 1000000u;
        if (now >= d && c->graced != c->head->sent_ns && reply_waiting(c)) {
            /* The reply arrived but the loop has not read it yet (a
             * program that runs the loop only now and then): read first. */
            c->graced = c->head->sent_ns;
            conn_arm(c, now + 1000000u);
            return;
        }
        if (now >= d) {
            char m[64];
            snprintf(m, sizeof(m), "no reply within %u ms", p->o.request_timeout_ms);
            conn_fail(c, MCR_ERR_TIMEOUT, m);
            return;
        }
        if (next == 0 || d < next)
            next = d;
    }
    if (next != 0)
        conn_arm(c, next);
}

static int parse_reply(pool_conn *c, pool_req *r, struct evbuffer *in, char *msg);

/* Write what c has queued, as far as the socket takes it; arm the write
 * event for the rest. MSG_NOSIGNAL: a closed peer is an error, not SIGPIPE. */
static void conn_flush(pool_conn *c)
{
    if (c->line_open) {
        if (evbuffer_add(c->out, "\r\n", 2) != 0) {
            conn_fail(c, MCR_ERR_NOMEM, "out of memory writing a request");
            return;
        }
        c->line_open = 0;
    }
    if (c->state != CONN_READY)
        return;
    while (evbuffer_get_length(c->out) > 0) {
        struct evbuffer_iovec v[32];
        int n = evbuffer_peek(c->out, READ_STEP, NULL, v, 32);
        struct iovec iov[32];
        int k = n < 32 ? n : 32;
        for (int i = 0; i < k; i++) {
            iov[i].iov_base = v[i].iov_base;
            iov[i].iov_len = v[i].iov_len;
        }
        struct msghdr mh;
        memset(&mh, 0, sizeof(mh));
        mh.msg_iov = iov;
        mh.msg_iovlen = (size_t)k;
        ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                event_add(c->wev, NULL);
                return;
            }
            char m[96];
            snprintf(m, sizeof(m), "send: %s", strerror(errno));
            conn_fail(c, MCR_ERR_CONNECT, m);
            return;
        }
        evbuffer_drain(c->out, (size_t)w);
    }
}

static void flush_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    mcr_pool *p = arg;
    while (p->flush_head != NULL) {
        pool_conn *c = p->flush_head;
        p->flush_head = c->flush_next;
        c->flush_queued = 0;
        conn_flush(c);
    }
}

/* Have c's queued bytes written at the end of this loop pass, together
 * with whatever else is queued for it by then. */
static void flush_later(pool_conn *c)
{
    if (c->flush_queued)
        return;
    mcr_pool *p = c->server->pool;
    c->flush_queued = 1;
    c->flush_next = p->flush_head;
    p->flush_head = c;
    event_active(p->flush_ev, EV_TIMEOUT, 0);
}

static void conn_connected(pool_conn *c)
{
    c->state = CONN_READY;
    if (c->server->addr.ss_family != AF_UNIX) {
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    /* the connect deadline no longer applies; request deadlines do */
    if (c->head == NULL)
        evtimer_del(c->timer);
    conn_flush(c);
}

static void conn_write_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    pool_conn *c = arg;
    if (c->state == CONN_CONNECTING) {
        int e = 0;
        socklen_t len = sizeof(e);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) != 0)
            e = errno;
        if (e == EINPROGRESS || e == EALREADY || e == EINTR) {
            event_add(c->wev, NULL);
            return;
        }
        if (e != 0) {
            char m[96];
            snprintf(m, sizeof(m), "connect: %s", strerror(e));
            conn_fail(c, MCR_ERR_CONNECT, m);
            return;
        }
        conn_connected(c);
        return;
    }
    conn_flush(c);
}

static void conn_read_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    pool_conn *c = arg;
    pool_server *s = c->server;
    mcr_pool *p = s->pool;
    struct evbuffer *in = c->in;
    char msg[MSG_SIZE];

    c->busy++;
    if (c->state == CONN_CONNECTING) {
        /* readable before writable: the connect failed (or the server
         * spoke first); the write callback's SO_ERROR check decides */
        int e = 0;
        socklen_t len = sizeof(e);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len);
        if (e != 0) {
            char m[96];
            snprintf(m, sizeof(m), "connect: %s", strerror(e));
            conn_fail(c, MCR_ERR_CONNECT, m);
        } else {
            conn_connected(c);
        }
    }
    for (int step = 0; step < 4 && !c->dead; step++) {
        struct evbuffer_iovec v[2];
        int nv = evbuffer_reserve_space(in, READ_STEP, v, 2);
        if (nv <= 0) {
            conn_fail(c, MCR_ERR_NOMEM, "out of memory reading a reply");
            break;
        }
        /* at most READ_STEP a read (the reservation may be larger): what a
         * callback buffers before parsing stays bounded */
        struct iovec iov[2];
        size_t room = READ_STEP;
        for (int i = 0; i < nv; i++) {
            iov[i].iov_base = v[i].iov_base;
            iov[i].iov_len = v[i].iov_len < room ? v[i].iov_len : room;
            room -= iov[i].iov_len;
        }
        ssize_t n = readv(fd, iov, nv);
        if (n < 0) {
            evbuffer_commit_space(in, v, 0);
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            char m[96];
            snprintf(m, sizeof(m), "receive: %s", strerror(errno));
            conn_fail(c, MCR_ERR_CONNECT, m);
            break;
        }
        if (n == 0) {
            evbuffer_commit_space(in, v, 0);
            conn_fail(c, MCR_ERR_CONNECT, "connection closed by the server");
            break;
        }
        size_t left = (size_t)n;
        for (int i = 0; i < nv; i++) {
            size_t take = left < v[i].iov_len ? left : v[i].iov_len;
            v[i].iov_len = take;
            left -= take;
        }
        evbuffer_commit_space(in, v, nv);
        if (evbuffer_get_length(in) > p->read_peak)
            p->read_peak = evbuffer_get_length(in);
        if ((size_t)n < READ_STEP)
            break;
    }

    while (!c->dead) {
        pool_req *r = c->head;
        if (r == NULL) {
            if (evbuffer_get_length(in) > 0)
                conn_fail(c, MCR_ERR_PROTOCOL, "reply with no request");
            break;
        }
        msg[0] = '\0';
        int rc = parse_reply(c, r, in, msg);
        if (rc == 0)
            break;
        if (rc < 0) {
            conn_fail(c, MCR_ERR_PROTOCOL, msg);
            break;
        }
        if (c->dead) /* a callback closed it (pool refresh): r was failed with it */
            break;
        c->head = r->next;
        if (c->head == NULL)
            c->tail = NULL;
        c->inflight--;
        s->inflight--;
        s->consecutive = 0;
        r->conn = NULL;
        finish_req(p, r);
    }
    /* A snapshot published meanwhile: adopt it now, so servers it removed
     * close as soon as their last request is answered. */
    if (!c->dead && mcr_router_epoch(p->router) != p->epoch)
        pool_refresh(p);
    c->busy--;
    if (c->dead) {
        if (c->busy == 0)
            conn_destroy(c);
        return;
    }
    if (s->retired && c->inflight == 0) {
        conn_fail(c, MCR_ERR_CANCELLED, "server removed");
        server_maybe_free(s);
        return;
    }
    if (s->inactive && c->inflight == 0 && s->wait_head == NULL) {
        /* DRAINING or DOWN in the snapshot: its last request is answered */
        conn_fail(c, MCR_ERR_CANCELLED, "server no longer active");
        return;
    }
    if (s->wait_head != NULL)
        server_pump(s);
}

static int server_resolve(pool_server *s)
{
    mcr_pool *p = s->pool;
    for (size_t i = 0; i < p->nunix; i++)
        if (strcmp(p->unix_paths[i].id, s->id) == 0) {
            struct sockaddr_un *un = (struct sockaddr_un *)&s->addr;
            memset(un, 0, sizeof(*un));
            un->sun_family = AF_UNIX;
            snprintf(un->sun_path, sizeof(un->sun_path), "%s", p->unix_paths[i].path);
            s->addrlen = sizeof(*un);
            return MCR_OK;
        }
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    char port[16];
    snprintf(port, sizeof(port), "%d", s->port);
    if (getaddrinfo(s->host, port, &hints, &res) != 0 || res == NULL)
        return MCR_ERR_CONNECT;
    memcpy(&s->addr, res->ai_addr, res->ai_addrlen);
    s->addrlen = (socklen_t)res->ai_addrlen;
    freeaddrinfo(res);
    return MCR_OK;
}

static pool_conn *conn_open(pool_server *s, int slot)
{
    mcr_pool *p = s->pool;
    if (s->addrlen == 0 && server_resolve(s) != MCR_OK) {
        s->refusals++;
        s->consecutive++;
        return NULL;
    }
    pool_conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->server = s;
    c->slot = slot;
    c->state = CONN_CONNECTING;
    c->fd = socket(s->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        free(c);
        s->refusals++;
        s->consecutive++;
        return NULL;
    }
    c->in = evbuffer_new();
    c->out = evbuffer_new();
    c->rev = event_new(p->base, c->fd, EV_READ | EV_PERSIST, conn_read_cb, c);
    c->wev = event_new(p->base, c->fd, EV_WRITE, conn_write_cb, c);
    c->timer = evtimer_new(p->base, conn_timer_cb, c);
    if (c->in == NULL || c->out == NULL || c->rev == NULL || c->wev == NULL || c->timer == NULL) {
        conn_destroy(c);
        return NULL;
    }
    s->conns[slot] = c;
    c->connect_deadline = now_ns() + (uint64_t)p->o.connect_timeout_ms * 1000000u;
    conn_arm(c, c->connect_deadline);
    int rc;
    do
        rc = connect(c->fd, (struct sockaddr *)&s->addr, s->addrlen);
    while (rc != 0 && errno == EINTR);
    if (rc == 0) {
        event_add(c->rev, NULL);
        c->state = CONN_READY;
        if (s->addr.ss_family != AF_UNIX) {
            int one = 1;
            setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        }
        evtimer_del(c->timer);
        return c;
    }
    if (errno == EINPROGRESS) {
        event_add(c->rev, NULL);
        event_add(c->wev, NULL);
        return c;
    }
    /* Failed at once (refused on a Unix socket, unreachable): counted like
     * any other failure; its requests are failed from the loop. */
    char m[96];
    snprintf(m, sizeof(m), "connect: %s", strerror(errno));
    c->busy++;
    conn_fail(c, MCR_ERR_CONNECT, m);
    c->busy--;
    conn_destroy(c);
    return NULL;
}

/* The connection to use for one more request, or NULL (all full). */
static pool_conn *pick_conn(pool_server *s)
{
    mcr_pool *p = s->pool;
    pool_conn *best = NULL;
    int empty = -1;
    for (unsigned i = 0; i < p->o.connections; i++) {
        pool_conn *c = s->conns[i];
        if (c == NULL) {
            if (empty < 0)
                empty = (int)i;
        } else if (best == NULL || c->inflight < best->inflight) {
            best = c;
        }
    }
    if (best != NULL && best->inflight == 0)
        return best;
    if (empty >= 0) {
        pool_conn *c = conn_open(s, empty);
        if (c != NULL)
            return c;
    }
    if (best != NULL && best->inflight < p->o.max_in_flight)
        return best;
    return NULL;
}

/* Whether one of r's keys is on c's open get line already. memcached
 * answers the keys of a line in order, one VALUE each (misses send none):
 * with every key at most once on a line, a VALUE names one request, and a
 * second VALUE for a key is a protocol error, never another's answer. */
static int line_has_key(const pool_conn *c, const pool_req *r)
{
    for (const pool_req *x = c->line_first; x != NULL; x = x->next)
        for (uint32_t i = 0; i < x->nkeys; i++)
            for (uint32_t j = 0; j < r->nkeys; j++)
                if (x->klens[i] == r->klens[j] && memcmp(x->keys[i], r->keys[j], r->klens[j]) == 0)
                    return 1;
    return 0;
}

/* Write r on c. MCR_OK, or an error with r untouched (not queued). */
static int conn_send(pool_conn *c, pool_req *r)
{
    mcr_pool *p = c->server->pool;
    mcr__wire w;
    memset(&w, 0, sizeof(w));
    w.op = r->op;
    w.proto = p->o.protocol;
    w.prefix = p->prefix;
    w.prefix_len = is_server_op(r->op) ? 0 : p->prefix_len;
    w.keys = r->keys;
    w.key_lens = r->klens;
    w.nkeys = r->nkeys;
    w.value = r->val;
    w.value_len = r->val_len;
    w.flags = r->flags_in;
    w.exptime = r->exptime;
    w.cas = r->cas_in;
    w.delta = r->delta;
    w.opaque = c->opaque_seq;
    r->opaque = c->opaque_seq;
    c->opaque_seq += r->nkeys > 0 ? r->nkeys : 1;
    struct evbuffer *out = c->out;
    size_t before = evbuffer_get_length(out);
    int rc;
    r->joined = 0;
    if (p->o.protocol == MCR_PROTO_TEXT && (r->op == MCR_OP_GET || r->op == MCR_OP_GETS)) {
        /* Text gets queued in one loop pass share one "get k1 k2 ..."
         * line: memcached answers a line with one reply (one send)
         * instead of one per get. */
        if (c->line_open && c->line_op == r->op && c->line_keys + r->nkeys <= LINE_KEYS_MAX &&
            !line_has_key(c, r)) {
            r->joined = 1;
        } else if (c->line_open) {
            rc = evbuffer_add(out, "\r\n", 2);
            c->line_open = 0;
            if (rc != 0)
                return MCR_ERR_PROTOCOL;
        }
        rc = MCR_OK;
        if (!r->joined) {
            rc = evbuffer_add(out, r->op == MCR_OP_GET ? "get" : "gets",
                              r->op == MCR_OP_GET ? 3 : 4) == 0 ? MCR_OK : MCR_ERR_NOMEM;
            c->line_open = 1;
            c->line_op = r->op;
            c->line_keys = 0;
            c->line_first = NULL;
        }
        for (uint32_t j = 0; j < r->nkeys && rc == MCR_OK; j++)
            if (evbuffer_add(out, " ", 1) != 0 ||
                (p->prefix_len && evbuffer_add(out, p->prefix, p->prefix_len) != 0) ||
                evbuffer_add(out, r->keys[j], r->klens[j]) != 0)
                rc = MCR_ERR_NOMEM;
        c->line_keys += r->nkeys;
    } else {
        if (c->line_open) {
            c->line_open = 0;
            if (evbuffer_add(out, "\r\n", 2) != 0)
                return MCR_ERR_PROTOCOL;
            before += 2;
        }
        rc = mcr__proto_write(out, &w);
    }
    if (rc != MCR_OK) {
        /* take back what was written */
        size_t after = evbuffer_get_length(out);
        if (after > before) {
            /* evbuffer has no truncate-at-end: the stream is unusable */
            return MCR_ERR_PROTOCOL;
        }
        return MCR_ERR_NOMEM;
    }
    r->conn = c;
    r->sent_ns = now_ns();
    queue_push(&c->head, &c->tail, r);
    if (c->line_open && !r->joined)
        c->line_first = r;
    c->inflight++;
    c->server->inflight++;
    c->server->requests += r->nkeys > 0 ? r->nkeys : 1;
    /* The timer serves the earliest deadline: the head request's, or the
     * connect deadline, which may come after this request's own. */
    uint64_t deadline = r->sent_ns + (uint64_t)p->o.request_timeout_ms * 1000000u;
    if (!evtimer_pending(c->timer, NULL) || deadline < c->armed_at)
        conn_arm(c, deadline);
    flush_later(c);
    /* the value was written: no copy needed any more */
    r->val = NULL;
    free(r->val_copy);
    r->val_copy = NULL;
    return MCR_OK;
}

static void wait_push(pool_server *s, pool_req *r)
{
    queue_push(&s->wait_head, &s->wait_tail, r);
}

/* Send r to s now, or queue it there. The value is copied if it must wait.
 * MCR_OK, or MCR_ERR_NOMEM (r untouched, not queued). */
static int dispatch(pool_server *s, pool_req *r)
{
    pool_conn *c = s->wait_head == NULL ? pick_conn(s) : NULL;
    if (c != NULL) {
        int rc = conn_send(c, r);
        if (rc == MCR_OK)
            return MCR_OK;
        if (rc == MCR_ERR_PROTOCOL) {
            conn_fail(c, MCR_ERR_CONNECT, "out of memory writing a request");
            return MCR_ERR_NOMEM;
        }
        return rc;
    }
    if (r->val != NULL && r->val_copy == NULL && r->val_len > 0) {
        r->val_copy = malloc(r->val_len);
        if (r->val_copy == NULL)
            return MCR_ERR_NOMEM;
        memcpy(r->val_copy, r->val, r->val_len);
        r->val = r->val_copy;
    }
    wait_push(s, r);
    /* No connection could be opened at all: fail it from the loop. */
    int open = 0;
    for (unsigned i = 0; i < s->pool->o.connections; i++)
        open += s->conns[i] != NULL;
    if (open == 0)
        server_fail_waiting(s, s->health == MCR_HEALTH_UP ? MCR_ERR_CONNECT : MCR_ERR_DOWN,
                            "cannot connect");
    return MCR_OK;
}

static void server_pump(pool_server *s)
{
    while (s->wait_head != NULL) {
        pool_conn *c = pick_conn(s);
        if (c == NULL)
            break;
        pool_req *r = s->wait_head;
        s->wait_head = r->next;
        if (s->wait_head == NULL)
            s->wait_tail = NULL;
        int rc = conn_send(c, r);
        if (rc != MCR_OK) {
            fail_later(s->pool, r, MCR_ERR_NOMEM, "out of memory writing a request");
            if (rc == MCR_ERR_PROTOCOL)
                conn_fail(c, MCR_ERR_CONNECT, "out of memory writing a request");
        }
    }
    int open = 0;
    for (unsigned i = 0; i < s->pool->o.connections; i++)
        open += s->conns[i] != NULL;
    if (open == 0 && s->wait_head != NULL)
        server_fail_waiting(s, MCR_ERR_CONNECT, "cannot connect");
}

/* ------------------------------------------------------------ reply parsing */

static int key_matches(const mcr_pool *p, const pool_req *r, uint32_t j, const char *k, size_t kl)
{
    return kl == p->prefix_len + r->klens[j] && memcmp(k, p->prefix, p->prefix_len) == 0 &&
           memcmp(k + p->prefix_len, r->keys[j], r->klens[j]) == 0;
}

/* Whether key k was answered already on r's line (r is its first request
 * still in flight): a second VALUE for it. */
static int line_answered(const mcr_pool *p, const pool_req *r, const char *k, size_t kl)
{
    for (const pool_req *x = r; x != NULL && (x == r || x->joined); x = x->next)
        for (uint32_t j = 0; j < x->cursor; j++)
            if (key_matches(p, x, j, k, kl))
                return 1;
    return 0;
}

static int error_line(const mcr__line *L)
{
    return L->kind == MCR__L_ERROR || L->kind == MCR__L_CLIENT_ERROR ||
           L->kind == MCR__L_SERVER_ERROR;
}

static void error_text(const mcr__line *L, char *msg)
{
    static const char *const w[] = { [MCR__L_ERROR] = "ERROR",
                                     [MCR__L_CLIENT_ERROR] = "CLIENT_ERROR",
                                     [MCR__L_SERVER_ERROR] = "SERVER_ERROR" };
    set_msg(msg, "%s%s%.*s", w[L->kind], L->text_len ? " " : "", (int)L->text_len,
            L->text ? L->text : "");
}

static int opaque_is(const pool_req *r, const mcr__line *L, uint32_t j)
{
    uint32_t o;
    return L->opaque != NULL && mcr__proto_opaque(L->opaque, L->opaque_len, &o) &&
           o == r->opaque + j;
}

/* The status lines that answer a store, delete, touch or arithmetic
 * command, in each protocol. */
static const struct status_rule {
    mcr_op op;                 /* MCR_OP_SET: every store; MCR_OP_INCR: incr and decr */
    mcr__line_kind text, meta;
    mcr_reply reply;
} status_rules[] = {
    { MCR_OP_SET, MCR__L_STORED, MCR__L_HD, MCR_REPLY_STORED },
    { MCR_OP_SET, MCR__L_NOT_STORED, MCR__L_NS, MCR_REPLY_NOT_STORED },
    { MCR_OP_SET, MCR__L_EXISTS, MCR__L_EX, MCR_REPLY_EXISTS },
    { MCR_OP_SET, MCR__L_NOT_FOUND, MCR__L_NF, MCR_REPLY_MISS },
    { MCR_OP_DELETE, MCR__L_DELETED, MCR__L_HD, MCR_REPLY_DELETED },
    { MCR_OP_DELETE, MCR__L_NOT_FOUND, MCR__L_NF, MCR_REPLY_MISS },
    { MCR_OP_TOUCH, MCR__L_TOUCHED, MCR__L_HD, MCR_REPLY_TOUCHED },
    { MCR_OP_TOUCH, MCR__L_NOT_FOUND, MCR__L_EN, MCR_REPLY_MISS },
    { MCR_OP_INCR, MCR__L_NOT_FOUND, MCR__L_NF, MCR_REPLY_MISS },
};

/* 1 and *out when `kind` answers `op` in that protocol, else 0. */
static int status_reply(mcr_op op, int meta, mcr__line_kind kind, mcr_reply *out)
{
    if (is_store_op(op))
        op = MCR_OP_SET;
    else if (op == MCR_OP_DECR)
        op = MCR_OP_INCR;
    for (size_t i = 0; i < sizeof(status_rules) / sizeof(status_rules[0]); i++) {
        const struct status_rule *q = &status_rules[i];
        if (q->op == op && (meta ? q->meta : q->text) == kind) {
            *out = q->reply;
            return 1;
        }
    }
    return 0;
}

/* Parse what the head request r expects. 1: r is complete (the caller pops
 * it); 0: more bytes needed; -1: the stream does not fit r (msg says why). */
static int parse_reply(pool_conn *c, pool_req *r, struct evbuffer *in, char *msg)
{
    mcr_pool *p = c->server->pool;
    int meta = p->o.protocol == MCR_PROTO_META;
    if (r->group_done)
        return 1; /* answered with the request before it on its line */
    for (;;) {
        if (c->skip.left > 0) {
            int sk = mcr__proto_skip_run(&c->skip, in);
            if (sk <= 0) {
                if (sk < 0)
                    set_msg(msg, "data block not ended by CRLF");
                return sk;
            }
            if (meta && r->nkeys == 1)
                return 1; /* the VA was the whole reply, its key reported */
        }
        const char *line;
        size_t len;
        int rc = mcr__proto_peek_line(in, &line, &len);
        if (rc == 0)
            return 0;
        if (rc < 0) {
            set_msg(msg, "reply line over %d bytes", MCR__PROTO_MAX_LINE);
            return -1;
        }
        mcr__line L;
        mcr__proto_parse_line(line, len, &L);
        if (L.kind == MCR__L_BAD) {
            set_msg(msg, "unexpected reply line \"%.*s\" to %s", (int)(len > 40 ? 40 : len), line,
                    mcr_op_name(r->op));
            return -1;
        }

        if (is_get_family(r->op)) {
            int single_meta = meta && r->nkeys == 1;
            if ((!meta && L.kind == MCR__L_VALUE) || (meta && L.kind == MCR__L_VA)) {
                pool_req *g = r;
                uint32_t j;
                if (!meta) {
                    /* the key, in this request or a later one on its line */
                    for (;;) {
                        j = g->cursor;
                        while (j < g->nkeys && !key_matches(p, g, j, L.key, L.key_len))
                            j++;
                        if (j < g->nkeys)
                            break;
                        g = g->next;
                        if (g == NULL || !g->joined) {
                            set_msg(msg, "VALUE for a key %s: \"%.*s\"",
                                    line_answered(p, r, L.key, L.key_len)
                                        ? "already answered on this line"
                                        : "not asked for (or out of order)",
                                    (int)(L.key_len > 60 ? 60 : L.key_len), L.key);
                            return -1;
                        }
                    }
                } else {
                    uint32_t o = 0;
                    int ours = L.opaque != NULL && mcr__proto_opaque(L.opaque, L.opaque_len, &o);
                    if (!ours || o - r->opaque >= r->nkeys || o - r->opaque < r->cursor) {
                        set_msg(msg, "VA with an opaque token %s",
                                ours && o - r->opaque < r->cursor
                                    ? "already answered (or out of order)"
                                    : "not awaited");
                        return -1;
                    }
                    j = o - r->opaque;
                }
                int gets = r->op == MCR_OP_GETS || r->op == MCR_OP_GATS;
                if ((gets && !L.has_cas) || (meta && !L.has_flags)) {
                    set_msg(msg, "%s without the %s asked for", meta ? "VA" : "VALUE",
                            gets ? "CAS unique" : "flags");
                    return -1;
                }
                if (L.bytes > MCR_POOL_VALUE_MAX) {
                    set_msg(msg, "a value of %" PRIu64 " bytes", L.bytes);
                    return -1;
                }
                /* A value over max_value_size fails its key with
                 * MCR_ERR_TOO_BIG and is dropped as it arrives: the
                 * connection stays in step without holding it. */
                int too_big = L.bytes > p->o.max_value_size;
                const char *data = NULL;
                size_t ll = len;
                uint64_t bytes = L.bytes;
                uint32_t flags = L.flags;
                uint64_t cas = L.cas;
                if (!too_big) {
                    rc = mcr__proto_peek_block(in, ll, bytes, &data);
                    if (rc == 0)
                        return 0;
                    if (rc < 0) {
                        set_msg(msg, "data block not ended by CRLF");
                        return -1;
                    }
                }
                /* keys passed over are misses */
                for (pool_req *x = r; x != g; x = x->next) {
                    for (; x->cursor < x->nkeys && !c->dead; x->cursor++)
                        deliver_simple(p, x, x->cursor, MCR_OK, MCR_REPLY_MISS, NULL);
                    if (c->dead)
                        return 0;
                }
                for (; g->cursor < j && !c->dead; g->cursor++)
                    deliver_simple(p, g, g->cursor, MCR_OK, MCR_REPLY_MISS, NULL);
                if (c->dead)
                    return 0;
                mcr_result res;
                char big[MSG_SIZE];
                result_init(&res, g, j);
                if (too_big) {
                    set_msg(big, "%s:%d: a value of %" PRIu64 " bytes, over max_value_size (%zu)",
                            c->server->host, c->server->port, bytes, p->o.max_value_size);
                    res.status = MCR_ERR_TOO_BIG;
                    res.message = big;
                } else {
                    res.reply = MCR_REPLY_HIT;
                    res.value = data;
                    res.value_len = (size_t)bytes;
                    res.flags = flags;
                    res.cas = cas;
                }
                g->cursor = j + 1;
                deliver_key(p, g, j, &res);
                if (c->dead)
                    return 0;
                if (too_big) {
                    evbuffer_drain(in, ll + 2);
                    mcr__proto_skip_start(&c->skip, bytes);
                    if (single_meta) {
                        r->status = MCR_ERR_TOO_BIG;
                        memcpy(r->message, big, sizeof(r->message));
                    }
                    continue;
                }
                evbuffer_drain(in, ll + 2 + (size_t)bytes + 2);
                if (single_meta) {
                    r->status = MCR_OK;
                    r->reply = MCR_REPLY_HIT;
                    return 1;
                }
                continue;
            }
            if (single_meta && L.kind == MCR__L_EN) {
                if (!opaque_is(r, &L, 0)) {
                    set_msg(msg, "EN with an opaque token not awaited");
                    return -1;
                }
                evbuffer_drain(in, len + 2);
                r->status = MCR_OK;
                r->reply = MCR_REPLY_MISS;
                return 1; /* finish_req reports the miss */
            }
            if (meta && L.kind == MCR__L_EN) {
                /* quiet gets send none; an older server might: a miss,
                 * after which that token is answered */
                uint32_t o;
                if (L.opaque == NULL || !mcr__proto_opaque(L.opaque, L.opaque_len, &o) ||
                    o - r->opaque >= r->nkeys || o - r->opaque < r->cursor) {
                    set_msg(msg, "EN with an opaque token not awaited");
                    return -1;
                }
                evbuffer_drain(in, len + 2);
                for (; r->cursor <= o - r->opaque && !c->dead; r->cursor++)
                    deliver_simple(p, r, r->cursor, MCR_OK, MCR_REPLY_MISS, NULL);
                if (c->dead)
                    return 0;
                continue;
            }
            if ((!meta && L.kind == MCR__L_END) || (meta && !single_meta && L.kind == MCR__L_MN)) {
                evbuffer_drain(in, len + 2);
                if (r->failed_batch) {
                    r->status = MCR_ERR_SERVER;
                    return 1; /* the rest fail with the error seen */
                }
                /* the line's END: every key of its requests not seen is a miss */
                for (pool_req *x = r; x != NULL && (x == r || x->joined); x = x->next) {
                    for (; x->cursor < x->nkeys && !c->dead; x->cursor++)
                        deliver_simple(p, x, x->cursor, MCR_OK, MCR_REPLY_MISS, NULL);
                    if (c->dead)
                        return 0;
                    x->status = MCR_OK;
                    x->reply = MCR_REPLY_MISS;
                    if (x != r)
                        x->group_done = 1;
                }
                return 1;
            }
            if (error_line(&L)) {
                error_text(&L, r->message);
                evbuffer_drain(in, len + 2);
                if (!meta) {
                    /* the whole line failed */
                    for (pool_req *x = r->next; x != NULL && x->joined; x = x->next) {
                        x->status = MCR_ERR_SERVER;
                        memcpy(x->message, r->message, sizeof(x->message));
                        x->group_done = 1;
                    }
                }
                if (meta && !single_meta) {
                    /* each quiet mg may answer an error; MN still ends the batch */
                    r->failed_batch = 1;
                    continue;
                }
                r->status = MCR_ERR_SERVER;
                return 1;
            }
            set_msg(msg, "unexpected reply \"%.*s\" to %s", (int)(len > 40 ? 40 : len), line,
                    mcr_op_name(r->op));
            return -1;
        }

        /* One-line replies (and incr's VA, stats' lines). */
        if (error_line(&L)) {
            error_text(&L, r->message);
            evbuffer_drain(in, len + 2);
            r->status = MCR_ERR_SERVER;
            return 1;
        }
        int ok = 1;
        mcr_reply reply = MCR_REPLY_OK;
        int meta_cmd = meta && (is_store_op(r->op) || r->op == MCR_OP_DELETE ||
                                r->op == MCR_OP_INCR || r->op == MCR_OP_DECR ||
                                r->op == MCR_OP_TOUCH);
        if (meta_cmd && !opaque_is(r, &L, 0)) {
            set_msg(msg, "reply with an opaque token not awaited (%.*s)",
                    (int)(len > 40 ? 40 : len), line);
            return -1;
        }
        switch (r->op) {
        case MCR_OP_SET:
        case MCR_OP_ADD:
        case MCR_OP_REPLACE:
        case MCR_OP_APPEND:
        case MCR_OP_PREPEND:
        case MCR_OP_CAS:
        case MCR_OP_DELETE:
        case MCR_OP_TOUCH:
            ok = status_reply(r->op, meta, L.kind, &reply);
            break;
        case MCR_OP_INCR:
        case MCR_OP_DECR:
            if (!meta && L.kind == MCR__L_NUMBER) {
                r->number = L.number;
                reply = MCR_REPLY_NUMBER;
            } else if (status_reply(r->op, meta, L.kind, &reply)) {
                /* a miss */
            } else if (meta && L.kind == MCR__L_VA && L.bytes <= 20) {
                const char *data;
                size_t ll = len;
                uint64_t bytes = L.bytes;
                rc = mcr__proto_peek_block(in, ll, bytes, &data);
                if (rc == 0)
                    return 0;
                mcr__line N;
                if (rc > 0)
                    mcr__proto_parse_line(data, (size_t)bytes, &N);
                if (rc < 0 || N.kind != MCR__L_NUMBER) {
                    set_msg(msg, "ma reply without a number");
                    return -1;
                }
                r->number = N.number;
                evbuffer_drain(in, ll + 2 + (size_t)bytes);
                len = 0; /* the final CRLF is drained below */
                reply = MCR_REPLY_NUMBER;
            } else {
                ok = 0;
            }
            break;
        case MCR_OP_VERSION:
        case MCR_OP_NOOP:
            if (L.kind == MCR__L_VERSION && !(meta && r->op == MCR_OP_NOOP)) {
                if (r->op == MCR_OP_VERSION) {
                    r->text = malloc(L.text_len + 1);
                    if (r->text == NULL) {
                        set_msg(msg, "out of memory");
                        return -1;
                    }
                    memcpy(r->text, L.text, L.text_len);
                    r->text[L.text_len] = '\0';
                    r->text_len = L.text_len;
                    reply = MCR_REPLY_VERSION;
                }
            } else if (!(meta && r->op == MCR_OP_NOOP && L.kind == MCR__L_MN)) {
                ok = 0;
            }
            break;
        case MCR_OP_FLUSH_ALL:
            ok = L.kind == MCR__L_OK;
            break;
        case MCR_OP_STATS:
            if (L.kind == MCR__L_STAT) {
                size_t need = r->text_len + L.text_len + 2;
                if (need > STATS_MAX) {
                    set_msg(msg, "stats reply over %u bytes", STATS_MAX);
                    return -1;
                }
                if (need > r->text_cap) {
                    size_t cap = r->text_cap ? r->text_cap * 2 : 1024;
                    while (cap < need)
                        cap *= 2;
                    char *t = realloc(r->text, cap);
                    if (t == NULL) {
                        set_msg(msg, "out of memory");
                        return -1;
                    }
                    r->text = t;
                    r->text_cap = cap;
                }
                memcpy(r->text + r->text_len, L.text, L.text_len);
                r->text_len += L.text_len;
                r->text[r->text_len++] = '\n';
                r->text[r->text_len] = '\0';
                evbuffer_drain(in, len + 2);
                continue;
            }
            ok = L.kind == MCR__L_END;
            reply = MCR_REPLY_STATS;
            break;
        default:
            ok = 0;
        }
        if (!ok) {
            set_msg(msg, "unexpected reply \"%.*s\" to %s", (int)(len > 40 ? 40 : len), line,
                    mcr_op_name(r->op));
            return -1;
        }
        evbuffer_drain(in, len + 2);
        r->status = MCR_OK;
        r->reply = reply;
        return 1;
    }
}

/* ------------------------------------------------------------ snapshots */

static int pool_refresh(mcr_pool *p)
{
    uint64_t e = mcr_router_epoch(p->router);
    if (p->snap != NULL && e == p->epoch)
        return MCR_OK;
    mcr_snapshot *snap = mcr_router_current(p->router);
    if (snap == NULL)
        return MCR_ERR_EMPTY;
    size_t n = mcr_snapshot_server_count(snap);
    pool_server **by = calloc(n ? n : 1, sizeof(*by));
    uint32_t *load = calloc(n ? n : 1, sizeof(*load));
    if (by == NULL || load == NULL) {
        free(by);
        free(load);
        mcr_snapshot_unref(snap);
        return MCR_ERR_NOMEM;
    }
    /* Keep the servers with the same id and address; mark the rest. */
    for (size_t i = 0; i < p->nservers; i++)
        p->servers[i]->mg_marked = 0;
    for (size_t i = 0; i < n; i++) {
        mcr_server_desc d;
        mcr_snapshot_server(snap, i, &d);
        pool_server *s = NULL;
        if (p->snap != NULL) {
            long oi = mcr_snapshot_find(p->snap, d.id);
            if (oi >= 0 && (size_t)oi < p->nby) {
                pool_server *o = p->by_index[oi];
                if (o != NULL && !o->retired && o->port == d.port && strcmp(o->host, d.host) == 0)
                    s = o;
            }
        }
        if (s == NULL) {
            s = server_new(p, &d);
            if (s == NULL) {
                free(by);
                free(load);
                mcr_snapshot_unref(snap);
                return MCR_ERR_NOMEM;
            }
        }
        s->mg_marked = 1;
        by[i] = s;
    }
    for (size_t i = 0; i < p->nservers;) {
        pool_server *s = p->servers[i];
        size_t before = p->nservers;
        if (!s->mg_marked && !s->retired)
            server_retire(s);
        if (p->nservers == before)
            i++;
    }
    if (p->snap != NULL)
        mcr_snapshot_unref(p->snap);
    free(p->by_index);
    free(p->load);
    p->snap = snap;
    p->by_index = by;
    p->nby = n;
    p->epoch = mcr_snapshot_epoch(snap);
    /* The loads by the new indexes: what each server has pointing at it. */
    p->load = load;
    p->load_total = 0;
    for (size_t i = 0; i < p->nservers; i++) {
        p->servers[i]->idx = SIZE_MAX;
        p->servers[i]->counted = 0;
    }
    for (size_t i = 0; i < n; i++) {
        mcr_server_desc d;
        mcr_snapshot_server(snap, i, &d);
        by[i]->idx = i;
        by[i]->counted = d.state == MCR_STATE_ACTIVE;
        load[i] = by[i]->refs > UINT32_MAX ? UINT32_MAX : (uint32_t)by[i]->refs;
        if (by[i]->counted)
            p->load_total += load[i];
    }
    for (size_t i = 0; i < n; i++) {
        mcr_server_desc d;
        mcr_snapshot_server(snap, i, &d);
        pool_server *s = by[i];
        s->mg_marked = 0;
        s->inactive = d.state != MCR_STATE_ACTIVE;
        if (s->inactive)
            server_close_idle(s);
        if (d.state == MCR_STATE_ACTIVE && s->health == MCR_HEALTH_EJECTED && !s->probing &&
            !s->eject_pending) {
            /* re-added by someone else (another pool, an operator) */
            s->health = MCR_HEALTH_UP;
            s->consecutive = 0;
            event_del(s->retry_ev);
        }
        if (p->o.eager && d.state == MCR_STATE_ACTIVE && s->health == MCR_HEALTH_UP)
            for (unsigned k = 0; k < p->o.connections; k++)
                if (s->conns[k] == NULL)
                    conn_open(s, (int)k);
    }
    return MCR_OK;
}

int mcr_pool_refresh(mcr_pool *p)
{
    if (p == NULL || p->freeing)
        return MCR_ERR_INVALID;
    return pool_refresh(p);
}

/* ------------------------------------------------------------ pool */

int mcr_pool_new(struct event_base *base, mcr_router *router, const mcr_pool_options *opts,
                 mcr_pool **out, mcr_error *err)
{
    if (base == NULL || router == NULL || out == NULL)
        return fail(err, MCR_ERR_INVALID, "mcr_pool_new: NULL argument");
    mcr_pool_options o;
    int rc = normalize_options(opts, &o, err);
    if (rc != MCR_OK)
        return rc;
    mcr_pool *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return fail(err, MCR_ERR_NOMEM, "out of memory");
    p->base = base;
    p->router = router;
    p->o = o;
    if (o.key_prefix != NULL) {
        p->prefix_len = strlen(o.key_prefix);
        memcpy(p->prefix, o.key_prefix, p->prefix_len);
    }
    p->o.key_prefix = p->prefix;
    p->done_ev = event_new(base, -1, 0, pool_done_cb, p);
    p->flush_ev = event_new(base, -1, 0, flush_cb, p);
    p->collect_ev = evtimer_new(base, collect_cb, p);
    if (p->done_ev == NULL || p->flush_ev == NULL || p->collect_ev == NULL) {
        if (p->done_ev != NULL)
            event_free(p->done_ev);
        if (p->flush_ev != NULL)
            event_free(p->flush_ev);
        if (p->collect_ev != NULL)
            event_free(p->collect_ev);
        free(p);
        return fail(err, MCR_ERR_NOMEM, "out of memory");
    }
    rc = pool_refresh(p);
    if (rc == MCR_ERR_NOMEM) {
        mcr_pool_free(p);
        return fail(err, MCR_ERR_NOMEM, "out of memory");
    }
    *out = p;
    return MCR_OK;
}

void mcr_pool_free(mcr_pool *p)
{
    if (p == NULL)
        return;
    p->freeing = 1;
    /* Cancel everything: in flight, waiting, deferred. */
    for (size_t i = 0; i < p->nservers; i++) {
        pool_server *s = p->servers[i];
        event_del(s->retry_ev);
        server_fail_waiting(s, MCR_ERR_CANCELLED, "pool freed");
        for (unsigned k = 0; k < p->o.connections; k++)
            if (s->conns[k] != NULL)
                conn_fail(s->conns[k], MCR_ERR_CANCELLED, "pool freed");
    }
    /* Those already failed and waiting to be reported (a down server, a
     * refused connection, a multi-get's bad key) are cancelled too: what
     * the callback has not heard yet is MCR_ERR_CANCELLED. */
    while (p->def_head != NULL) {
        pool_req *r = p->def_head;
        p->def_head = p->def_tail = NULL;
        while (r != NULL) {
            pool_req *n = r->next;
            if (r->status != MCR_ERR_CANCELLED) {
                r->status = MCR_ERR_CANCELLED;
                set_msg(r->message, "pool freed");
            }
            finish_req(p, r);
            r = n;
        }
    }
    while (p->nservers > 0)
        server_destroy(p->servers[p->nservers - 1]);
    free(p->servers);
    free(p->by_index);
    free(p->load);
    free(p->hot);
    for (size_t i = 0; i < p->nunix; i++) {
        free(p->unix_paths[i].id);
        free(p->unix_paths[i].path);
    }
    free(p->unix_paths);
    if (p->snap != NULL)
        mcr_snapshot_unref(p->snap);
    event_free(p->done_ev);
    event_free(p->flush_ev);
    event_free(p->collect_ev);
    /* What is left (grace periods not over) goes at the next collect by
     * any writer, or with the router. */
    (void)mcr_router_collect(p->router);
    free(p);
}

int mcr_pool_set_unix_path(mcr_pool *p, const char *id, const char *path)
{
    if (p == NULL || id == NULL)
        return MCR_ERR_INVALID;
    struct sockaddr_un un;
    if (path != NULL && strlen(path) >= sizeof(un.sun_path))
        return MCR_ERR_TOO_LONG;
    size_t i = 0;
    while (i < p->nunix && strcmp(p->unix_paths[i].id, id) != 0)
        i++;
    if (path == NULL) {
        if (i < p->nunix) {
            free(p->unix_paths[i].id);
            free(p->unix_paths[i].path);
            p->unix_paths[i] = p->unix_paths[--p->nunix];
        }
    } else {
        char *cp = strdup(path);
        if (cp == NULL)
            return MCR_ERR_NOMEM;
        if (i < p->nunix) {
            free(p->unix_paths[i].path);
            p->unix_paths[i].path = cp;
        } else {
            char *cid = strdup(id);
            unix_map *t = realloc(p->unix_paths, (p->nunix + 1) * sizeof(*t));
            if (cid == NULL || t == NULL) {
                free(cid);
                free(cp);
                if (t != NULL)
                    p->unix_paths = t;
                return MCR_ERR_NOMEM;
            }
            p->unix_paths = t;
            t[p->nunix].id = cid;
            t[p->nunix].path = cp;
            p->nunix++;
        }
    }
    /* Connections opened from now on resolve again. */
    for (size_t k = 0; k < p->nservers; k++)
        if (strcmp(p->servers[k]->id, id) == 0)
            p->servers[k]->addrlen = 0;
    return MCR_OK;
}

size_t mcr_pool_pending(const mcr_pool *p)
{
    return p == NULL ? 0 : p->pending;
}

/* 1 when called from inside a callback run by p's event loop: the loop
 * cannot be run again from there. libevent refuses re-entry (-1), which a
 * non-blocking pass detects; otherwise that pass just runs what is ready.
 * (event_base_get_running_event() would be the direct question, but
 * libevent 2.1.12 dereferences NULL there when no loop runs.) */
static int inside_loop(mcr_pool *p)
{
    return p->in_callback || event_base_loop(p->base, EVLOOP_NONBLOCK) < 0;
}

int mcr_pool_wait(mcr_pool *p)
{
    if (p == NULL || inside_loop(p))
        return MCR_ERR_INVALID;
    while (p->pending > 0)
        event_base_loop(p->base, EVLOOP_ONCE);
    return MCR_OK;
}

/* ------------------------------------------------------------ submission */

/* The server for a keyed request, or NULL with *status set. */
static pool_server *route_key(mcr_pool *p, mcr_op op, const void *key, size_t len, int *status)
{
    /* Reads with bounded loads skip an owner that has its share already. */
    uint32_t i = p->o.bounded_epsilon > 0 && is_read_op(op)
                     ? mcr_snapshot_locate_bounded(p->snap, key, len, p->load, p->load_total,
                                                   p->o.bounded_epsilon)
                     : mcr_snapshot_locate(p->snap, key, len);
    pool_server *s = p->by_index[i];
    if (s->health == MCR_HEALTH_UP)
        return s;
    uint64_t now = now_ns();
    if (s->health == MCR_HEALTH_DOWN && now >= s->retry_at) {
        /* one more try: a single failure downs it again */
        s->health = MCR_HEALTH_UP;
        s->consecutive = p->o.server_failure_limit - 1;
        s->readded_at = now;
        return s;
    }
    if (p->o.policy == MCR_POLICY_FAILOVER && is_read_op(op)) {
        uint32_t rep[8];
        size_t na = mcr_snapshot_active_count(p->snap);
        size_t n = mcr_snapshot_replicas(p->snap, key, len, na < 8 ? na : 8, rep, NULL);
        for (size_t k = 1; k < n; k++) {
            pool_server *t = p->by_index[rep[k]];
            if (t->health == MCR_HEALTH_UP)
                return t;
            if (t->health == MCR_HEALTH_DOWN && now >= t->retry_at) {
                t->health = MCR_HEALTH_UP;
                t->consecutive = p->o.server_failure_limit - 1;
                t->readded_at = now;
                return t;
            }
        }
    }
    *status = MCR_ERR_DOWN;
    return s;
}

static pool_server *server_by_id(mcr_pool *p, const char *id)
{
    long i = mcr_snapshot_find(p->snap, id);
    return i < 0 || (size_t)i >= p->nby ? NULL : p->by_index[i];
}

static int check_request(mcr_pool *p, const mcr_request *q, mcr_error *err)
{
    if ((unsigned)q->op >= MCR_OP_COUNT)
        return fail(err, MCR_ERR_INVALID, "unknown op %d", (int)q->op);
    if (q->exptime < 0 || q->exptime > INT32_MAX)
        return fail(err, MCR_ERR_INVALID, "exptime %" PRId64 " outside 0..2147483647", q->exptime);
    if (is_server_op(q->op)) {
        if (q->server == NULL)
            return fail(err, MCR_ERR_INVALID, "%s needs a server id", mcr_op_name(q->op));
        if (q->op == MCR_OP_STATS && q->key_len > 0 &&
            (q->key == NULL || !mcr__proto_key_ok(q->key, q->key_len, KEY_MAX)))
            return fail(err, MCR_ERR_KEY, "stats group must be 1..250 bytes without space or control byte");
        return MCR_OK;
    }
    if (q->key == NULL && q->key_len > 0)
        return fail(err, MCR_ERR_INVALID, "NULL key");
    if (!mcr__proto_key_ok(q->key, q->key_len, KEY_MAX - p->prefix_len)) {
        char qb[80];
        return fail(err, MCR_ERR_KEY,
                    "key \"%s\" is not 1..%zu bytes without space or control byte",
                    mcr__quote(qb, sizeof(qb), q->key ? q->key : "", q->key_len),
                    (size_t)KEY_MAX - p->prefix_len);
    }
    if (is_store_op(q->op)) {
        if (q->value == NULL && q->value_len > 0)
            return fail(err, MCR_ERR_INVALID, "NULL value");
        if (q->value_len > p->o.max_value_size)
            return fail(err, MCR_ERR_TOO_BIG, "value of %zu bytes is over the limit of %zu",
                        q->value_len, p->o.max_value_size);
    }
    return MCR_OK;
}

int mcr_pool_submit(mcr_pool *p, const mcr_request *q, mcr_pool_cb cb, void *arg, mcr_error *err)
{
    if (p == NULL || q == NULL || cb == NULL)
        return fail(err, MCR_ERR_INVALID, "mcr_pool_submit: NULL argument");
    if (p->freeing)
        return fail(err, MCR_ERR_INVALID, "the pool is being freed");
    int rc = check_request(p, q, err);
    if (rc != MCR_OK)
        return rc;
    rc = pool_refresh(p);
    if (rc != MCR_OK)
        return fail(err, rc, rc == MCR_ERR_EMPTY ? "the router holds no snapshot" : "out of memory");

    int status = MCR_OK;
    pool_server *s;
    if (q->server != NULL) {
        s = server_by_id(p, q->server);
        if (s == NULL) {
            char qb[80];
            return fail(err, MCR_ERR_UNKNOWN, "no server %s in the snapshot (epoch %" PRIu64 ")",
                        mcr__quote(qb, sizeof(qb), q->server, strlen(q->server)), p->epoch);
        }
        if (s->health != MCR_HEALTH_UP && s->health != MCR_HEALTH_EJECTED)
            status = s->health == MCR_HEALTH_DRAINING ? MCR_ERR_CANCELLED : MCR_ERR_DOWN;
        if (s->health == MCR_HEALTH_DOWN && now_ns() >= s->retry_at) {
            s->health = MCR_HEALTH_UP;
            s->consecutive = p->o.server_failure_limit - 1;
            status = MCR_OK;
        }
    } else {
        s = route_key(p, q->op, q->key, q->key_len, &status);
    }

    int keyed = !is_server_op(q->op);
    size_t klen = keyed || (q->op == MCR_OP_STATS && q->key_len > 0) ? q->key_len : 0;

    /* Hot keys: join a get of the same key in flight. */
    uint32_t h = 0;
    int shareable = !p->o.no_coalesce && (q->op == MCR_OP_GET || q->op == MCR_OP_GETS) &&
                    q->server == NULL && status == MCR_OK;
    if (shareable) {
        h = hot_hash(q->op, q->key, q->key_len);
        pool_req *lead = hot_find(p, q->op, q->key, q->key_len, h);
        if (lead != NULL && lead->server != s) {
            /* routed elsewhere since (a new snapshot, a failover): this
             * request leads from now on */
            hot_remove(p, lead);
            lead = NULL;
        }
        if (lead != NULL) {
            pool_waiter *w = malloc(sizeof(*w));
            if (w == NULL)
                return fail(err, MCR_ERR_NOMEM, "out of memory");
            w->cb = cb;
            w->arg = arg;
            w->next = lead->waiters;
            lead->waiters = w;
            p->pending++;
            return MCR_OK;
        }
    } else if (keyed && !is_get_family(q->op)) {
        hot_invalidate(p, q->key, q->key_len);
    }

    pool_req *r = req_new(klen ? 1 : 0, klen, 0);
    if (r == NULL)
        return fail(err, MCR_ERR_NOMEM, "out of memory");
    if (klen) {
        char *kb = req_key_area(r, 1, 0);
        memcpy(kb, q->key, klen);
        r->keys[0] = kb;
        r->klens[0] = klen;
        r->nkeys = 1;
    }
    r->op = q->op;
    r->cb = cb;
    r->arg = arg;
    r->flags_in = q->flags;
    r->exptime = q->exptime;
    r->cas_in = q->cas;
    r->delta = q->delta;
    r->val = q->value;
    r->val_len = is_store_op(q->op) ? q->value_len : 0;
    r->server = s;
    r->epoch = p->epoch;
    server_ref(s);
    p->pending++;
    if (status != MCR_OK) {
        char m[96];
        snprintf(m, sizeof(m), "server %s is %s", s->id,
                 status == MCR_ERR_DOWN ? "down" : "being removed");
        r->val = NULL;
        fail_later(p, r, status, m);
        return MCR_OK;
    }
    rc = dispatch(s, r);
    if (rc != MCR_OK) {
        server_unref(s);
        p->pending--;
        req_free(r);
        return fail(err, rc, "out of memory");
    }
    if (r->val != NULL && r->val_copy == NULL)
        r->val = NULL; /* never read after this call */
    if (shareable)
        hot_insert(p, r, h);
    return MCR_OK;
}

int mcr_pool_get(mcr_pool *p, const void *key, size_t len, mcr_pool_cb cb, void *arg)
{
    mcr_request q;
    memset(&q, 0, sizeof(q));
    q.op = MCR_OP_GET;
    q.key = key;
    q.key_len = len;
    return mcr_pool_submit(p, &q, cb, arg, NULL);
}

int mcr_pool_set(mcr_pool *p, const void *key, size_t key_len, const void *value,
                 size_t value_len, uint32_t flags, int64_t exptime, mcr_pool_cb cb, void *arg)
{
    mcr_request q;
    memset(&q, 0, sizeof(q));
    q.op = MCR_OP_SET;
    q.key = key;
    q.key_len = key_len;
    q.value = value;
    q.value_len = value_len;
    q.flags = flags;
    q.exptime = exptime;
    return mcr_pool_submit(p, &q, cb, arg, NULL);
}

int mcr_pool_delete(mcr_pool *p, const void *key, size_t len, mcr_pool_cb cb, void *arg)
{
    mcr_request q;
    memset(&q, 0, sizeof(q));
    q.op = MCR_OP_DELETE;
    q.key = key;
    q.key_len = len;
    return mcr_pool_submit(p, &q, cb, arg, NULL);
}

/* ------------------------------------------------------------ multi-get */

/* A key-level failure of a multi-get, reported from the loop. */
static int mget_key_error(mcr_pool *p, pool_mget *m, mcr_op op, pool_server *s, const void *key,
                          size_t len, size_t user, int status, const char *msg)
{
    pool_req *r = req_new(1, len, 1);
    if (r == NULL)
        return MCR_ERR_NOMEM;
    char *kb = req_key_area(r, 1, 1);
    if (len > 0)
        memcpy(kb, key, len);
    r->keys[0] = kb;
    r->klens[0] = len;
    r->nkeys = 1;
    r->user_idx[0] = user;
    r->op = op; /* the multi-get's own: get or gets */
    r->mget = m;
    r->epoch = p->epoch;
    r->server = s;
    if (s != NULL)
        server_ref(s);
    m->outstanding++;
    fail_later(p, r, status, msg);
    return MCR_OK;
}

int mcr_pool_get_multi(mcr_pool *p, mcr_op op, const void *const *keys, const size_t *lens,
                       size_t n, mcr_pool_cb key_cb, mcr_pool_cb done_cb, void *arg)
{
    if (p == NULL || keys == NULL || lens == NULL || key_cb == NULL || done_cb == NULL || n == 0 ||
        (op != MCR_OP_GET && op != MCR_OP_GETS) || p->freeing)
        return MCR_ERR_INVALID;
    int rc = pool_refresh(p);
    if (rc != MCR_OK)
        return rc;
    pool_mget *m = calloc(1, sizeof(*m));
    size_t *next_dup = malloc(n * sizeof(size_t));
    size_t *next_in = malloc(n * sizeof(size_t));   /* next key of the same server */
    size_t tsize = 16;
    while (tsize < 2 * n)
        tsize *= 2;
    size_t *table = malloc(tsize * sizeof(size_t)); /* dedupe: first user index */
    pool_server **touched = malloc(n * sizeof(*touched));
    if (m == NULL || next_dup == NULL || next_in == NULL || table == NULL ||
        touched == NULL) {
        free(m);
        free(next_dup);
        free(next_in);
        free(table);
        free(touched);
        return MCR_ERR_NOMEM;
    }
    for (size_t i = 0; i < tsize; i++)
        table[i] = SIZE_MAX;
    m->key_cb = key_cb;
    m->done_cb = done_cb;
    m->arg = arg;
    m->next_dup = next_dup;
    m->epoch = p->epoch;
    m->outstanding = 1; /* held until every request is submitted */
    p->pending++;
    size_t ntouched = 0;
    rc = MCR_OK;

    for (size_t i = 0; i < n && rc == MCR_OK; i++) {
        next_dup[i] = SIZE_MAX;
        const void *k = keys[i];
        size_t kl = lens[i];
        if (k == NULL || !mcr__proto_key_ok(k, kl, KEY_MAX - p->prefix_len)) {
            rc = mget_key_error(p, m, op, NULL, k, k != NULL ? kl : 0, i, MCR_ERR_KEY,
                                "key is not 1..250 bytes without space or control byte");
            continue;
        }
        /* duplicates: chain to the first occurrence */
        size_t slot = fnv1a(k, kl, 2166136261u) & (tsize - 1);
        int dup = 0;
        while (table[slot] != SIZE_MAX) {
            size_t f = table[slot];
            if (lens[f] == kl && memcmp(keys[f], k, kl) == 0) {
                size_t t = f;
                while (next_dup[t] != SIZE_MAX)
                    t = next_dup[t];
                next_dup[t] = i;
                dup = 1;
                break;
            }
            slot = (slot + 1) & (tsize - 1);
        }
        if (dup)
            continue;
        table[slot] = i;
        int status = MCR_OK;
        pool_server *s = route_key(p, op, k, kl, &status);
        if (status != MCR_OK) {
            char msg[96];
            snprintf(msg, sizeof(msg), "server %s is down", s->id);
            rc = mget_key_error(p, m, op, s, k, kl, i, status, msg);
            continue;
        }
        next_in[i] = SIZE_MAX;
        if (!s->mg_marked) {
            s->mg_marked = 1;
            s->mg_head = s->mg_tail = i;
            s->mg_count = 1;
            touched[ntouched++] = s;
        } else {
            next_in[s->mg_tail] = i;
            s->mg_tail = i;
            s->mg_count++;
        }
    }

    /* One request per server (per BATCH_MAX keys). */
    for (size_t t = 0; t < ntouched; t++) {
        pool_server *s = touched[t];
        s->mg_marked = 0;
        size_t u = s->mg_head;
        while (u != SIZE_MAX && rc == MCR_OK) {
            size_t cnt = 0, bytes = 0;
            for (size_t v = u; v != SIZE_MAX && cnt < BATCH_MAX; v = next_in[v]) {
                cnt++;
                bytes += lens[v];
            }
            pool_req *r = req_new(cnt, bytes, 1);
            if (r == NULL) {
                rc = MCR_ERR_NOMEM;
                break;
            }
            char *kb = req_key_area(r, cnt, 1);
            for (size_t j = 0; j < cnt; j++, u = next_in[u]) {
                memcpy(kb, keys[u], lens[u]);
                r->keys[j] = kb;
                r->klens[j] = lens[u];
                r->user_idx[j] = u;
                kb += lens[u];
            }
            r->nkeys = (uint32_t)cnt;
            r->op = op;
            r->mget = m;
            r->server = s;
            r->epoch = p->epoch;
            server_ref(s);
            m->outstanding++;
            if (dispatch(s, r) != MCR_OK) {
                /* out of memory sending: fail these keys from the loop */
                fail_later(p, r, MCR_ERR_NOMEM, "out of memory");
            }
        }
        if (rc != MCR_OK) {
            /* keys not yet in a request: report them failed */
            for (; u != SIZE_MAX; u = next_in[u])
                mget_key_error(p, m, op, s, keys[u], lens[u], u, MCR_ERR_NOMEM, "out of memory");
        }
    }
    for (size_t t = 0; t < ntouched; t++)
        touched[t]->mg_marked = 0;
    free(next_in);
    free(table);
    free(touched);
    /* Release the submission's hold from the loop, so done_cb can never
     * run inside this call. */
    pool_req *hold = req_new(0, 0, 1);
    if (hold == NULL) {
        /* cannot defer: keep the hold; the last request finishes it */
        m->outstanding--;
        if (m->outstanding == 0) {
            /* nothing at all was submitted (cannot happen: n > 0) */
            p->pending--;
            free(m->next_dup);
            free(m);
            return MCR_ERR_NOMEM;
        }
        return MCR_OK;
    }
    hold->mget = m;
    hold->op = op;
    hold->epoch = p->epoch;
    hold->status = MCR_OK;
    deferred_push(p, hold);
    return MCR_OK;
}

/* ------------------------------------------------------------ synchronous */

typedef struct exec_state {
    int done;
    mcr_owned_result *out;
} exec_state;

static void exec_cb(const mcr_result *res, void *arg)
{
    exec_state *st = arg;
    mcr_owned_result *o = st->out;
    o->status = res->status;
    o->reply = res->reply;
    o->flags = res->flags;
    o->cas = res->cas;
    o->number = res->number;
    o->epoch = res->epoch;
    snprintf(o->server, sizeof(o->server), "%s", res->server ? res->server : "");
    snprintf(o->message, sizeof(o->message), "%s", res->message ? res->message : "");
    if (res->value != NULL) {
        o->value = malloc(res->value_len + 1);
        if (o->value == NULL) {
            o->status = MCR_ERR_NOMEM;
            snprintf(o->message, sizeof(o->message), "out of memory copying the value");
        } else {
            memcpy(o->value, res->value, res->value_len);
            o->value[res->value_len] = '\0';
            o->value_len = res->value_len;
        }
    }
    st->done = 1;
}

int mcr_pool_exec(mcr_pool *p, const mcr_request *q, mcr_owned_result *out)
{
    if (out == NULL)
        return MCR_ERR_INVALID;
    memset(out, 0, sizeof(*out));
    if (q == NULL) {
        out->status = MCR_ERR_INVALID;
        snprintf(out->message, sizeof(out->message), "mcr_pool_exec: NULL request");
        return MCR_ERR_INVALID;
    }
    if (p == NULL || inside_loop(p)) {
        out->status = MCR_ERR_INVALID;
        snprintf(out->message, sizeof(out->message), "mcr_pool_exec: %s",
                 p == NULL ? "NULL pool" : "called from inside the pool's event loop");
        return MCR_ERR_INVALID;
    }
    exec_state st = { 0, out };
    mcr_error e;
    memset(&e, 0, sizeof(e));
    int rc = mcr_pool_submit(p, q, exec_cb, &st, &e);
    if (rc != MCR_OK) {
        out->status = rc;
        snprintf(out->message, sizeof(out->message), "%s", e.message);
        return rc;
    }
    while (!st.done)
        event_base_loop(p->base, EVLOOP_ONCE);
    return out->status;
}

void mcr_owned_result_clear(mcr_owned_result *o)
{
    if (o == NULL)
        return;
    free(o->value);
    memset(o, 0, sizeof(*o));
}

/* ------------------------------------------------------------ observability */

size_t mcr__pool_read_peak(const mcr_pool *p)
{
    return p == NULL ? 0 : p->read_peak;
}

size_t mcr_pool_server_count(const mcr_pool *p)
{
    return p == NULL ? 0 : p->nservers;
}

int mcr_pool_server_stats(const mcr_pool *p, size_t i, mcr_server_stats *out)
{
    if (p == NULL || out == NULL || i >= p->nservers)
        return MCR_ERR_INVALID;
    const pool_server *s = p->servers[i];
    memset(out, 0, sizeof(*out));
    snprintf(out->id, sizeof(out->id), "%s", s->id);
    snprintf(out->host, sizeof(out->host), "%s", s->host);
    out->port = s->port;
    out->health = s->inactive && s->health == MCR_HEALTH_UP ? MCR_HEALTH_DRAINING : s->health;
    out->requests = s->requests;
    out->hits = s->hits;
    out->misses = s->misses;
    out->errors = s->errors;
    out->timeouts = s->timeouts;
    out->refusals = s->refusals;
    out->ejections = s->ejections;
    out->coalesced = s->coalesced;
    out->consecutive_failures = s->consecutive;
    for (unsigned k = 0; k < p->o.connections; k++)
        out->connections += s->conns[k] != NULL && s->conns[k]->state == CONN_READY;
    out->in_flight = s->inflight;
    out->latency_count = s->lat_count;
    out->p50_us = hist_pct(s, 0.50);
    out->p90_us = hist_pct(s, 0.90);
    out->p99_us = hist_pct(s, 0.99);
    out->p999_us = hist_pct(s, 0.999);
    out->max_us = (double)s->lat_max;
    return MCR_OK;
}
