/* SPDX-License-Identifier: BSD-3-Clause */
/* conn.c: the pool's connections: connect, pipelined sends (text gets on one line), reads, timeouts, close. */
#include "pool_internal.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <sys/un.h>
#include <unistd.h>

/* The bytes of one pipelined text get line, at most (keys are added to an
 * open "get" line until then). */
#define LINE_KEYS_MAX 100
/* Bytes read by one system call, and reads by one read callback (what it
 * buffers stays bounded: mcroute_pool.h, max_value_size). */
#define READ_STEP 65536
#define READ_STEPS 4
/* The input buffer: one array per connection, READ_STEP bytes to begin
 * with, grown to fit a large value; over IN_KEEP it is given back as soon
 * as it holds little (mcr__inbuf_trim()), so a large value costs memory
 * while it is read only. */
#define IN_KEEP (4u * READ_STEP)
/* Slots of a connection's table of the keys on its open get line: a power
 * of two, at least twice LINE_KEYS_MAX. */
#define LINE_TAB 256
_Static_assert(LINE_TAB >= 2 * LINE_KEYS_MAX && (LINE_TAB & (LINE_TAB - 1)) == 0,
               "the line table keeps probes short");

/* A key on the open get line (the bytes are the request's, in flight). */
struct mcr__line_slot {
    uint32_t gen;   /* the line it belongs to; another line's slot is free */
    uint32_t hash;
    const char *key;
    size_t len;
};

/* ------------------------------------------------------------ connections */

static void conn_destroy(mcr__pool_conn *c)
{
    if (c->rev != NULL)
        event_free(c->rev);
    if (c->wev != NULL)
        event_free(c->wev);
    if (c->timer != NULL)
        event_free(c->timer);
    mcr__inbuf_free(&c->in);
    free(c->out);
    free(c->line_tab);
    if (c->fd >= 0)
        evutil_closesocket(c->fd);
    free(c);
}

/* The output buffer: one array per connection, kept between passes (its
 * capacity is what the busiest pass queued; an empty buffer over OUT_KEEP
 * is given back). A request is formatted straight into it, and a failed
 * one is taken back whole. */
#define OUT_KEEP (1u << 20)

/* Room for n more bytes at c->out + c->out_len, or NULL (out of memory). */
static char *out_room(mcr__pool_conn *c, size_t n)
{
    if (c->out_cap - c->out_len >= n)
        return c->out + c->out_len;
    if (c->out_off > 0) { /* what was written makes room at the front */
        memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
        c->out_len -= c->out_off;
        c->out_off = 0;
        if (c->out_cap - c->out_len >= n)
            return c->out + c->out_len;
    }
    size_t cap = c->out_cap ? c->out_cap : 4096;
    while (cap - c->out_len < n) {
        if (cap > SIZE_MAX / 2)
            return NULL;
        cap *= 2;
    }
    char *b = realloc(c->out, cap);
    if (b == NULL)
        return NULL;
    c->out = b;
    c->out_cap = cap;
    return c->out + c->out_len;
}

static int out_add(mcr__pool_conn *c, const char *s, size_t n)
{
    char *d = out_room(c, n);
    if (d == NULL)
        return -1;
    memcpy(d, s, n);
    c->out_len += n;
    return 0;
}

static void conn_arm(mcr__pool_conn *c, uint64_t deadline)
{
    uint64_t now = mcr__now_ns();
    uint64_t d = deadline > now ? deadline - now : 0;
    struct timeval tv = { (time_t)(d / 1000000000u), (suseconds_t)((d % 1000000000u) / 1000) };
    evtimer_add(c->timer, &tv);
    c->armed_at = deadline;
    c->armed = 1;
}

/* Close c: every request in flight fails with `status`. */
void mcr__conn_fail(mcr__pool_conn *c, int status, const char *msg)
{
    if (c->dead)
        return;
    c->dead = 1;
    mcr__pool_server *s = c->server;
    mcr_pool *p = s->pool;
    if (s->conns[c->slot] == c)
        s->conns[c->slot] = NULL;
    /* a failure of the server's, not ours: not a cancel, nor our memory */
    int counts = status != MCR_ERR_CANCELLED && status != MCR_ERR_NOMEM &&
                 (c->inflight > 0 || c->state == MCR__CONN_CONNECTING);
    mcr__pool_req *r = c->head;
    c->head = c->tail = NULL;
    s->inflight -= c->inflight;
    c->inflight = 0;
    while (r != NULL) {
        mcr__pool_req *n = r->next;
        r->conn = NULL;
        r->status = status;
        mcr__set_msg(r->message, "%s:%d: %s", s->host, s->port, msg);
        mcr__deferred_push(p, r);
        r = n;
    }
    if (c->rev != NULL)
        event_del(c->rev);
    if (c->wev != NULL)
        event_del(c->wev);
    evtimer_del(c->timer);
    c->armed = 0;
    if (c->flush_queued) {
        for (mcr__pool_conn **pp = &p->flush_head; *pp != NULL; pp = &(*pp)->flush_next)
            if (*pp == c) {
                *pp = c->flush_next;
                break;
            }
        c->flush_queued = 0;
    }
    if (!c->busy)
        conn_destroy(c);
    if (counts)
        mcr__server_failed(s, status);
    if (!p->freeing && s->wait_head != NULL && s->health == MCR_HEALTH_UP)
        mcr__server_pump(s);
}

static int reply_waiting(mcr__pool_conn *c)
{
    char b;
    return c->fd >= 0 && recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 1;
}

static void conn_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    mcr__pool_conn *c = arg;
    mcr_pool *p = c->server->pool;
    uint64_t now = mcr__now_ns();
    c->armed = 0; /* it fired: not pending any more */
    if (c->state == MCR__CONN_CONNECTING && now >= c->connect_deadline) {
        char m[64];
        snprintf(m, sizeof(m), "no connection within %u ms", p->o.connect_timeout_ms);
        mcr__conn_fail(c, MCR_ERR_TIMEOUT, m);
        return;
    }
    uint64_t next = c->state == MCR__CONN_CONNECTING ? c->connect_deadline : 0;
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
            mcr__conn_fail(c, MCR_ERR_TIMEOUT, m);
            return;
        }
        if (next == 0 || d < next)
            next = d;
    }
    if (next != 0)
        conn_arm(c, next);
}

/* Write what c has queued, as far as the socket takes it; arm the write
 * event for the rest. MSG_NOSIGNAL: a closed peer is an error, not SIGPIPE. */
static void conn_flush(mcr__pool_conn *c)
{
    if (c->line_open) {
        if (out_add(c, "\r\n", 2) != 0) {
            mcr__conn_fail(c, MCR_ERR_NOMEM, "out of memory writing a request");
            return;
        }
        c->line_open = 0;
    }
    if (c->state != MCR__CONN_READY)
        return;
    while (c->out_len > c->out_off) {
        ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                event_add(c->wev, NULL);
                return;
            }
            char m[96];
            snprintf(m, sizeof(m), "send: %s", strerror(errno));
            mcr__conn_fail(c, MCR_ERR_CONNECT, m);
            return;
        }
        c->out_off += (size_t)w;
        c->server->writes++;
        c->server->bytes_sent += (uint64_t)w;
    }
    c->out_off = c->out_len = 0;
    if (c->out_cap > OUT_KEEP) {
        free(c->out);
        c->out = NULL;
        c->out_cap = 0;
    }
}

void mcr__conn_flush_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    mcr_pool *p = arg;
    p->flushing = 1;
    /* the gets of this pass still to be routed go out with the rest */
    if (p->route_head != NULL)
        mcr__route_pending(p);
    while (p->flush_head != NULL) {
        mcr__pool_conn *c = p->flush_head;
        p->flush_head = c->flush_next;
        c->flush_queued = 0;
        conn_flush(c);
    }
    p->flushing = 0;
}

void mcr__pool_flush_now(mcr_pool *p)
{
    if (p->flush_head == NULL && p->route_head == NULL)
        return;
    event_del(p->flush_ev); /* out of the active queue: it runs here instead */
    mcr__conn_flush_cb(-1, EV_TIMEOUT, p);
}

/* Have c's queued bytes written at the end of this loop pass, together
 * with whatever else is queued for it by then. */
static void flush_later(mcr__pool_conn *c)
{
    if (c->flush_queued)
        return;
    mcr_pool *p = c->server->pool;
    c->flush_queued = 1;
    c->flush_next = p->flush_head;
    p->flush_head = c;
    if (!p->flushing) /* else the running flush takes it */
        event_active(p->flush_ev, EV_TIMEOUT, 0);
}

static void conn_connected(mcr__pool_conn *c)
{
    c->state = MCR__CONN_READY;
    if (c->server->addr.ss_family != AF_UNIX) {
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    /* the connect deadline no longer applies; request deadlines do */
    if (c->head == NULL) {
        evtimer_del(c->timer);
        c->armed = 0;
    }
    conn_flush(c);
}

static void conn_write_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    mcr__pool_conn *c = arg;
    if (c->state == MCR__CONN_CONNECTING) {
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
            mcr__conn_fail(c, MCR_ERR_CONNECT, m);
            return;
        }
        conn_connected(c);
        return;
    }
    conn_flush(c);
}

/* Parse what c's buffer holds, answering the requests in flight in order. */
static void conn_parse(mcr__pool_conn *c)
{
    mcr__pool_server *s = c->server;
    mcr_pool *p = s->pool;
    char msg[MCR__MSG_SIZE];
    while (!c->dead) {
        mcr__pool_req *r = c->head;
        if (r == NULL) {
            if (mcr__inbuf_length(&c->in) > 0)
                mcr__conn_fail(c, MCR_ERR_PROTOCOL, "reply with no request");
            break;
        }
        msg[0] = '\0';
        int rc = mcr__parse_reply(c, r, &c->in, msg);
        if (rc == 0)
            break;
        if (rc < 0) {
            mcr__conn_fail(c, rc == -2 ? MCR_ERR_NOMEM : MCR_ERR_PROTOCOL, msg);
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
        mcr__finish_req(p, r);
    }
}

static void conn_read(evutil_socket_t fd, mcr__pool_conn *c)
{
    mcr__pool_server *s = c->server;
    mcr_pool *p = s->pool;

    c->busy++;
    if (c->state == MCR__CONN_CONNECTING) {
        /* readable before writable: the connect failed (or the server
         * spoke first); the write callback's SO_ERROR check decides */
        int e = 0;
        socklen_t len = sizeof(e);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len);
        if (e != 0) {
            char m[96];
            snprintf(m, sizeof(m), "connect: %s", strerror(e));
            mcr__conn_fail(c, MCR_ERR_CONNECT, m);
        } else {
            conn_connected(c);
        }
    }
    /* Each read is parsed before the next: the buffer holds one reply begun
     * and one read at most, READ_STEPS reads a callback. */
    for (int step = 0; step < READ_STEPS && !c->dead; step++) {
        size_t room;
        char *d = mcr__inbuf_room(&c->in, READ_STEP, &room);
        if (d == NULL) {
            mcr__conn_fail(c, MCR_ERR_NOMEM, "out of memory reading a reply");
            break;
        }
        ssize_t n = read(fd, d, room);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            char m[96];
            snprintf(m, sizeof(m), "receive: %s", strerror(errno));
            mcr__conn_fail(c, MCR_ERR_CONNECT, m);
            break;
        }
        if (n == 0) {
            mcr__conn_fail(c, MCR_ERR_CONNECT, "connection closed by the server");
            break;
        }
        c->in.len += (size_t)n;
        s->reads++;
        s->bytes_received += (uint64_t)n;
        if (mcr__inbuf_length(&c->in) > p->read_peak)
            p->read_peak = mcr__inbuf_length(&c->in);
        conn_parse(c);
        if ((size_t)n < room)
            break; /* the socket is drained */
    }
    if (!c->dead)
        mcr__inbuf_trim(&c->in, IN_KEEP);
    /* A new current snapshot (published, or a local state changed)
     * meanwhile: adopt it now, so servers it removed close as soon as their
     * last request is answered. */
    if (!c->dead && mcr_router_generation(p->router) != p->gen)
        mcr__pool_refresh_slow(p);
    c->busy--;
    if (c->dead) {
        if (c->busy == 0)
            conn_destroy(c);
        return;
    }
    if (s->retired && c->inflight == 0) {
        mcr__conn_fail(c, MCR_ERR_CANCELLED, "server removed");
        mcr__server_maybe_free(s);
        return;
    }
    if (s->inactive && c->inflight == 0 && s->wait_head == NULL) {
        /* DRAINING or DOWN in the snapshot: its last request is answered */
        mcr__conn_fail(c, MCR_ERR_CANCELLED, "server no longer active");
        return;
    }
    if (s->wait_head != NULL)
        mcr__server_pump(s);
}

static void conn_read_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    mcr__pool_conn *c = arg;
    mcr_pool *p = c->server->pool; /* outlives the callback, unlike c */
    uint64_t outer = p->pass_ns;
    p->pass_ns = mcr__now_ns();
    conn_read(fd, c);
    p->pass_ns = outer;
}

static int server_resolve(mcr__pool_server *s)
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
    int g = getaddrinfo(s->host, port, &hints, &res);
    if (g == EAI_MEMORY)
        return MCR_ERR_NOMEM;
    if (g != 0 || res == NULL)
        return MCR_ERR_CONNECT;
    memcpy(&s->addr, res->ai_addr, res->ai_addrlen);
    s->addrlen = (socklen_t)res->ai_addrlen;
    freeaddrinfo(res);
    return MCR_OK;
}

mcr__pool_conn *mcr__conn_open(mcr__pool_server *s, int slot)
{
    mcr_pool *p = s->pool;
    s->open_nomem = 0;
    int rr = s->addrlen == 0 ? server_resolve(s) : MCR_OK;
    if (rr == MCR_ERR_NOMEM) {
        s->open_nomem = 1; /* the client's memory, not the server's fault */
        return NULL;
    }
    if (rr != MCR_OK) {
        s->refusals++;
        s->consecutive++;
        return NULL;
    }
    mcr__pool_conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        s->open_nomem = 1;
        return NULL;
    }
    c->server = s;
    c->slot = slot;
    c->state = MCR__CONN_CONNECTING;
    c->fd = socket(s->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        int e = errno;
        free(c);
        if (e == ENOMEM || e == ENOBUFS) { /* the kernel's memory: not the server's fault */
            s->open_nomem = 1;
            return NULL;
        }
        s->refusals++;
        s->consecutive++;
        return NULL;
    }
    c->rev = event_new(p->base, c->fd, EV_READ | EV_PERSIST, conn_read_cb, c);
    c->wev = event_new(p->base, c->fd, EV_WRITE, conn_write_cb, c);
    c->timer = evtimer_new(p->base, conn_timer_cb, c);
    if (c->rev == NULL || c->wev == NULL || c->timer == NULL) {
        conn_destroy(c);
        s->open_nomem = 1;
        return NULL;
    }
    s->conns[slot] = c;
    c->connect_deadline = mcr__now_ns() + (uint64_t)p->o.connect_timeout_ms * 1000000u;
    conn_arm(c, c->connect_deadline);
    int rc;
    do
        rc = connect(c->fd, (struct sockaddr *)&s->addr, s->addrlen);
    while (rc != 0 && errno == EINTR);
    if (rc == 0) {
        event_add(c->rev, NULL);
        c->state = MCR__CONN_READY;
        if (s->addr.ss_family != AF_UNIX) {
            int one = 1;
            setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        }
        evtimer_del(c->timer);
        c->armed = 0;
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
    mcr__conn_fail(c, MCR_ERR_CONNECT, m);
    c->busy--;
    conn_destroy(c);
    return NULL;
}

/* The keys of c's open get line by hash: memcached answers the keys of a
 * line in order, one VALUE each (misses send none): with every key at most
 * once on a line, a VALUE names one request, and a second VALUE for a key
 * is a protocol error, never another's answer. The table is filled when a
 * request first asks to join the line (a line never joined costs nothing)
 * and is emptied by starting a new line number. */
static void line_put(mcr__pool_conn *c, const char *key, size_t len, uint32_t h)
{
    uint32_t i = h & (LINE_TAB - 1);
    while (c->line_tab[i].gen == c->line_gen)
        i = (i + 1) & (LINE_TAB - 1);
    c->line_tab[i] = (struct mcr__line_slot){ c->line_gen, h, key, len };
}

static int line_find(const mcr__pool_conn *c, const char *key, size_t len, uint32_t h)
{
    for (uint32_t i = h & (LINE_TAB - 1); c->line_tab[i].gen == c->line_gen;
         i = (i + 1) & (LINE_TAB - 1)) {
        const struct mcr__line_slot *e = &c->line_tab[i];
        if (e->hash == h && e->len == len && memcmp(e->key, key, len) == 0)
            return 1;
    }
    return 0;
}

/* Whether r may join c's open line: none of its keys is on it already (r's
 * own keys are distinct: a multi-get removes duplicates). -1: no memory
 * for the table (r starts a new line instead). */
static int line_may_join(mcr__pool_conn *c, const mcr__pool_req *r)
{
    if (c->line_tab == NULL) {
        c->line_tab = calloc(LINE_TAB, sizeof(*c->line_tab));
        if (c->line_tab == NULL)
            return -1;
    }
    if (!c->line_indexed) {
        c->line_indexed = 1;
        for (const mcr__pool_req *x = c->line_first; x != NULL; x = x->next)
            for (uint32_t i = 0; i < x->nkeys; i++)
                line_put(c, x->keys[i], x->klens[i], x->khash[i]);
    }
    for (uint32_t j = 0; j < r->nkeys; j++)
        if (line_find(c, r->keys[j], r->klens[j], r->khash[j]))
            return 0;
    return 1;
}

/* A new get line on c: no key is on it. */
static void line_start(mcr__pool_conn *c)
{
    c->line_indexed = 0;
    if (++c->line_gen == 0) { /* numbers wrapped: make every slot free again */
        if (c->line_tab != NULL)
            memset(c->line_tab, 0, LINE_TAB * sizeof(*c->line_tab));
        c->line_gen = 1;
    }
}

/* Append r's keys to the get line: " key" each, the line's word first
 * when r opens it. MCR_OK or MCR_ERR_NOMEM (nothing appended). */
static int line_append(mcr__pool_conn *c, const mcr__pool_req *r, int opens)
{
    mcr_pool *p = c->server->pool;
    size_t need = opens ? 4 : 0;
    for (uint32_t j = 0; j < r->nkeys; j++)
        need += 1 + p->prefix_len + r->klens[j];
    char *d = out_room(c, need);
    if (d == NULL)
        return MCR_ERR_NOMEM;
    if (opens) {
        size_t w = r->op == MCR_OP_GET ? 3 : 4;
        memcpy(d, r->op == MCR_OP_GET ? "get" : "gets", w);
        d += w;
    }
    for (uint32_t j = 0; j < r->nkeys; j++) {
        *d++ = ' ';
        if (p->prefix_len > 0) { /* a call saved per key: most pools have none */
            memcpy(d, p->prefix, p->prefix_len);
            d += p->prefix_len;
        }
        memcpy(d, r->keys[j], r->klens[j]);
        d += r->klens[j];
    }
    c->out_len = (size_t)(d - c->out);
    return MCR_OK;
}

/* Write r on c. MCR_OK, or an error with r untouched (not queued). */
int mcr__conn_send(mcr__pool_conn *c, mcr__pool_req *r)
{
    mcr_pool *p = c->server->pool;
    mcr_protocol proto = r->force_meta ? MCR_PROTO_META : p->o.protocol;
    r->opaque = c->opaque_seq;
    c->opaque_seq += r->nkeys > 0 ? r->nkeys : 1;
    int rc;
    r->joined = 0;
    if (proto == MCR_PROTO_TEXT && (r->op == MCR_OP_GET || r->op == MCR_OP_GETS)) {
        /* Text gets queued in one loop pass share one "get k1 k2 ..."
         * line: memcached answers a line with one reply (one send)
         * instead of one per get. */
        int join = c->line_open && c->line_op == r->op &&
                   c->line_keys + r->nkeys <= LINE_KEYS_MAX && line_may_join(c, r) == 1;
        if (!join && c->line_open) {
            if (out_add(c, "\r\n", 2) != 0)
                return MCR_ERR_NOMEM; /* the open line stays open */
            c->line_open = 0;
        }
        rc = line_append(c, r, !join);
        if (rc != MCR_OK)
            return rc; /* nothing of r was written */
        r->joined = join ? 1 : 0;
        if (!join) {
            c->line_open = 1;
            c->line_op = r->op;
            c->line_keys = 0;
            c->line_first = NULL;
            line_start(c);
        } else if (c->line_indexed) {
            for (uint32_t j = 0; j < r->nkeys; j++)
                line_put(c, r->keys[j], r->klens[j], r->khash[j]);
        }
        c->line_keys += r->nkeys;
    } else {
        if (c->line_open) {
            if (out_add(c, "\r\n", 2) != 0)
                return MCR_ERR_NOMEM;
            c->line_open = 0;
        }
        static const mcr__wire zero; /* copied: a memset() is `rep stos` on x86-64 */
        mcr__wire w = zero;
        w.op = r->op;
        w.proto = proto;
        w.prefix = p->prefix;
        w.prefix_len = mcr__is_server_op(r->op) ? 0 : p->prefix_len;
        w.keys = r->keys;
        w.key_lens = r->klens;
        w.nkeys = r->nkeys;
        w.value = r->val;
        w.value_len = r->val_len;
        w.flags = r->flags_in;
        w.exptime = r->exptime;
        w.cas = r->cas_in;
        w.delta = r->delta;
        w.opaque = r->opaque;
        char *d = out_room(c, mcr__proto_bound(&w));
        if (d == NULL)
            return MCR_ERR_NOMEM;
        char *end = mcr__proto_format(d, &w);
        if (end == NULL)
            return MCR_ERR_INVALID;
        c->out_len = (size_t)(end - c->out);
    }
    r->conn = c;
    r->sent_ns = mcr__pool_now(p);
    mcr__queue_push(&c->head, &c->tail, r);
    if (c->line_open && !r->joined)
        c->line_first = r;
    c->inflight++;
    c->server->inflight++;
    c->server->requests += r->nkeys > 0 ? r->nkeys : 1;
    /* The timer serves the earliest deadline: the head request's, or the
     * connect deadline, which may come after this request's own. */
    uint64_t deadline = r->sent_ns + (uint64_t)p->o.request_timeout_ms * 1000000u;
    if (!c->armed || deadline < c->armed_at)
        conn_arm(c, deadline);
    flush_later(c);
    /* the value was written: no copy needed any more */
    r->val = NULL;
    if (r->val_copy != NULL) {
        free(r->val_copy);
        r->val_copy = NULL;
    }
    return MCR_OK;
}
