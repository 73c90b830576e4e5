/* SPDX-License-Identifier: BSD-3-Clause */
/* etcd_http.c: HTTP to etcd's JSON gateway with libevent's evhttp: endpoint lists, one request at a time with failover, and streaming watches. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "etcd.h"

/* The most bytes of one reply (a pool of thousands of servers is a few
 * hundred KiB of text, base64 and JSON around it). */
#define REPLY_MAX (64u << 20)

/* ------------------------------------------------------------ endpoints */

static int parse_endpoint(const char *s, size_t n, mcr__etcd_endpoint *ep, mcr_error *err)
{
    char q[128];
    const char *p = s, *end = s + n;
    if (n >= 8 && strncmp(s, "https://", 8) == 0)
        return mcr__error(err, MCR_ERR_INVALID,
                          "etcd endpoint \"%s\": https is not supported (use http://)",
                          mcr__quote(q, sizeof(q), s, n));
    if (n >= 7 && strncmp(s, "http://", 7) == 0)
        p += 7;
    while (end > p && end[-1] == '/')
        end--;
    const char *colon = NULL;
    for (const char *c = p; c < end; c++)
        if (*c == ':')
            colon = c;
    if (colon == NULL || colon == p || colon + 1 == end)
        return mcr__error(err, MCR_ERR_INVALID,
                          "etcd endpoint \"%s\": expected http://HOST:PORT",
                          mcr__quote(q, sizeof(q), s, n));
    size_t hl = (size_t)(colon - p);
    if (hl >= sizeof(ep->host))
        return mcr__error(err, MCR_ERR_INVALID, "etcd endpoint \"%s\": host too long",
                          mcr__quote(q, sizeof(q), s, n));
    long port = 0;
    for (const char *c = colon + 1; c < end; c++) {
        if (!isdigit((unsigned char)*c) || port > 65535)
            return mcr__error(err, MCR_ERR_INVALID, "etcd endpoint \"%s\": bad port",
                              mcr__quote(q, sizeof(q), s, n));
        port = port * 10 + (*c - '0');
    }
    if (port < 1 || port > 65535)
        return mcr__error(err, MCR_ERR_INVALID, "etcd endpoint \"%s\": port out of range",
                          mcr__quote(q, sizeof(q), s, n));
    for (const char *c = p; c < colon; c++)
        if (!isalnum((unsigned char)*c) && *c != '.' && *c != '-' && *c != '_')
            return mcr__error(err, MCR_ERR_INVALID,
                              "etcd endpoint \"%s\": bad host name (IPv6 is not supported)",
                              mcr__quote(q, sizeof(q), s, n));
    memcpy(ep->host, p, hl);
    ep->host[hl] = '\0';
    ep->port = (int)port;
    memcpy(ep->url, "http://", 7);
    memcpy(ep->url + 7, p, hl);
    snprintf(ep->url + 7 + hl, sizeof(ep->url) - 7 - hl, ":%ld", port);
    ep->conn = NULL;
    return MCR_OK;
}

int mcr__etcd_init(mcr__etcd *e, const char *endpoints, unsigned timeout_ms, mcr_error *err)
{
    memset(e, 0, sizeof(*e));
    if (endpoints == NULL || *endpoints == '\0')
        return mcr__error(err, MCR_ERR_INVALID, "no etcd endpoint given");
    const char *p = endpoints;
    while (*p != '\0') {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        if (n == 0)
            return mcr__error(err, MCR_ERR_INVALID, "etcd endpoints \"%s\": an empty entry",
                              endpoints);
        if (e->nep == MCR__ETCD_MAX_ENDPOINTS)
            return mcr__error(err, MCR_ERR_INVALID, "more than %d etcd endpoints",
                              MCR__ETCD_MAX_ENDPOINTS);
        int rc = parse_endpoint(p, n, &e->ep[e->nep], err);
        if (rc != MCR_OK)
            return rc;
        e->nep++;
        p += n;
        if (*p == ',')
            p++;
    }
    e->timeout_ms = timeout_ms ? timeout_ms : 2000;
    errno = 0;
    e->base = event_base_new();
    if (e->base == NULL)
        return mcr__error_sys(err, errno, "cannot create an event_base for etcd");
    return MCR_OK;
}

void mcr__etcd_cleanup(mcr__etcd *e)
{
    for (size_t i = 0; i < e->nep; i++)
        if (e->ep[i].conn != NULL) {
            evhttp_connection_free(e->ep[i].conn);
            e->ep[i].conn = NULL;
        }
    if (e->base != NULL)
        event_base_free(e->base);
    e->base = NULL;
}

static struct evhttp_connection *conn_new(struct event_base *base, const mcr__etcd_endpoint *ep,
                                          unsigned timeout_ms)
{
    struct evhttp_connection *c = evhttp_connection_base_new(base, NULL, ep->host,
                                                             (unsigned short)ep->port);
    if (c == NULL)
        return NULL;
    struct timeval tv = {(time_t)(timeout_ms / 1000), (suseconds_t)(timeout_ms % 1000) * 1000};
    evhttp_connection_set_timeout_tv(c, &tv);
    evhttp_connection_set_retries(c, 0);
    return c;
}

static int prepare(struct evhttp_request *req, const mcr__etcd_endpoint *ep, const char *body)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    char host[300];
    snprintf(host, sizeof(host), "%s:%d", ep->host, ep->port);
    if (evhttp_add_header(h, "Host", host) != 0 ||
        evhttp_add_header(h, "Content-Type", "application/json") != 0)
        return -1;
    return evbuffer_add(evhttp_request_get_output_buffer(req), body, strlen(body));
}

/* ------------------------------------------------------------ one request */

typedef struct call {
    int done;
    int timed_out;           /* the whole request took over the timeout */
    int code;                /* HTTP status, 0: no reply */
    int error;               /* an evhttp_request_error, or -1 */
    char *body;
    size_t len;
    int too_long;
} call;

static void call_done(struct evhttp_request *req, void *arg)
{
    call *c = arg;
    c->done = 1;
    if (req == NULL)
        return;
    c->code = evhttp_request_get_response_code(req);
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t n = evbuffer_get_length(in);
    if (n > REPLY_MAX) {
        c->too_long = 1;
        return;
    }
    c->body = malloc(n + 1);
    if (c->body != NULL) {
        evbuffer_remove(in, c->body, n);
        c->body[n] = '\0';
        c->len = n;
    }
}

static void call_deadline(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    ((call *)arg)->timed_out = 1;
}

static void call_error(enum evhttp_request_error e, void *arg)
{
    call *c = arg;
    c->error = (int)e;
}

static const char *error_name(int e)
{
    switch (e) {
    case EVREQ_HTTP_TIMEOUT: return "timed out";
    case EVREQ_HTTP_EOF: return "connection closed";
    case EVREQ_HTTP_INVALID_HEADER: return "invalid reply header";
    case EVREQ_HTTP_BUFFER_ERROR: return "connection refused or reset";
    case EVREQ_HTTP_REQUEST_CANCEL: return "cancelled";
    case EVREQ_HTTP_DATA_TOO_LONG: return "reply too long";
    default: return "connection failed or closed without a reply";
    }
}

int mcr__json_loadb(const char *text, size_t len, size_t flags, json_t **out, json_error_t *je)
{
    *out = json_loadb(text, len, flags, je);
    if (*out != NULL)
        return MCR_OK;
    return json_error_code(je) == json_error_out_of_memory ? MCR_ERR_NOMEM : MCR_ERR_PROTOCOL;
}

/* One attempt on one endpoint: MCR_OK with the reply, MCR_ERR_CONNECT
 * (try another), MCR_ERR_PROTOCOL (the cluster said no), MCR_ERR_NOMEM. */
static int post_one(mcr__etcd *e, mcr__etcd_endpoint *ep, const char *path, const char *body,
                    json_t **reply, mcr_error *err)
{
    call c = {0, 0, 0, -1, NULL, 0, 0};
    char q[160];
    if (ep->conn == NULL) {
        if ((ep->conn = conn_new(e->base, ep, e->timeout_ms)) == NULL)
            return mcr__error(err, MCR_ERR_NOMEM, "%s: cannot create a connection", ep->url);
        /* evhttp holds a whole body before the callback: bound it (a
         * watch's connection is not bounded so: its body is a stream) */
        evhttp_connection_set_max_body_size(ep->conn, REPLY_MAX);
        evhttp_connection_set_max_headers_size(ep->conn, 64u << 10);
    }
    struct evhttp_request *req = evhttp_request_new(call_done, &c);
    if (req == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory");
    evhttp_request_set_error_cb(req, call_error);
    if (prepare(req, ep, body) != 0) {
        evhttp_request_free(req);
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory");
    }
    e->requests++;
    if (evhttp_make_request(ep->conn, req, EVHTTP_REQ_POST, path) != 0) {
        /* evhttp freed the request */
        evhttp_connection_free(ep->conn);
        ep->conn = NULL;
        e->failures++;
        return mcr__error(err, MCR_ERR_CONNECT, "%s: cannot send the request", ep->url);
    }
    /* The connection's timeout is one of inactivity: a member that trickles
     * bytes would hold the request for ever. The whole request gets
     * timeout_ms. */
    struct event *deadline = evtimer_new(e->base, call_deadline, &c);
    struct timeval tv = {(time_t)(e->timeout_ms / 1000),
                         (suseconds_t)(e->timeout_ms % 1000) * 1000};
    if (deadline != NULL)
        evtimer_add(deadline, &tv);
    while (!c.done && !c.timed_out)
        if (event_base_loop(e->base, EVLOOP_ONCE) < 0)
            break;
    if (deadline != NULL)
        event_free(deadline);
    if (!c.done) {
        /* freeing the connection cancels the request without a callback */
        evhttp_connection_free(ep->conn);
        ep->conn = NULL;
        e->failures++;
        return mcr__error(err, MCR_ERR_CONNECT, "%s%s: timed out: no complete reply within %u ms",
                          ep->url, path, e->timeout_ms);
    }
    if (c.code == 0) {
        /* call_done may have copied an (empty) body even without a reply
         * (a refused connection comes with response code 0): freed here, it
         * leaked a byte per failed request (found by LeakSanitizer in the
         * test_fleet_* suites, etcd unreachable). */
        free(c.body);
        /* a broken connection is not reused */
        evhttp_connection_free(ep->conn);
        ep->conn = NULL;
        e->failures++;
        return mcr__error(err, MCR_ERR_CONNECT, "%s%s: %s", ep->url, path,
                          error_name(c.error));
    }
    int rc = MCR_OK;
    if (c.too_long) {
        rc = mcr__error(err, MCR_ERR_PROTOCOL, "%s%s: reply over %u bytes", ep->url, path,
                        REPLY_MAX);
    } else if (c.body == NULL) {
        rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory");
    } else if (c.code >= 500) {
        e->failures++;
        rc = mcr__error(err, MCR_ERR_CONNECT, "%s%s: HTTP %d: %s", ep->url, path, c.code,
                        mcr__quote(q, sizeof(q), c.body, c.len));
    } else if (c.code != 200) {
        rc = mcr__error(err, MCR_ERR_PROTOCOL, "%s%s: HTTP %d: %s", ep->url, path, c.code,
                        mcr__quote(q, sizeof(q), c.body, c.len));
    } else {
        json_error_t je;
        json_t *j = NULL;
        if (mcr__json_loadb(c.body, c.len, 0, &j, &je) == MCR_ERR_NOMEM) {
            rc = mcr__error(err, MCR_ERR_NOMEM, "%s%s: out of memory parsing the reply",
                            ep->url, path);
        } else if (j == NULL || !json_is_object(j)) {
            json_decref(j);
            rc = mcr__error(err, MCR_ERR_PROTOCOL, "%s%s: not a JSON object: %s", ep->url,
                            path, mcr__quote(q, sizeof(q), c.body, c.len));
        } else {
            *reply = j;
        }
    }
    free(c.body);
    return rc;
}

int mcr__etcd_post(mcr__etcd *e, const char *path, const char *body, json_t **reply,
                   mcr_error *err)
{
    char tried[512] = "";
    size_t used = 0;
    mcr_error last;
    last.message[0] = '\0';
    for (size_t k = 0; k < e->nep; k++) {
        size_t i = (e->cur + k) % e->nep;
        int rc = post_one(e, &e->ep[i], path, body, reply, &last);
        if (rc == MCR_OK) {
            e->cur = i;
            return MCR_OK;
        }
        if (rc != MCR_ERR_CONNECT) {
            if (err != NULL)
                *err = last;
            return rc;
        }
        int w = snprintf(tried + used, sizeof(tried) - used, "%s%s", used ? ", " : "",
                         e->ep[i].url);
        if (w > 0 && (size_t)w < sizeof(tried) - used)
            used += (size_t)w;
    }
    e->cur = (e->cur + 1) % e->nep;
    return mcr__error(err, MCR_ERR_CONNECT, "etcd unreachable (%s): %s", tried, last.message);
}

/* ------------------------------------------------------------ watches */

struct mcr__etcd_watch {
    struct evhttp_connection *conn;
    struct evhttp_request *req;   /* in flight, or NULL */
    struct evbuffer *buf;         /* bytes of an unfinished line */
    mcr__etcd_line_fn on_line;
    mcr__etcd_end_fn on_end;
    void *arg;
    int ended;                    /* on_end was called: no more callbacks */
    int error;                    /* the evhttp_request_error, or -1 */
};

static void watch_end(mcr__etcd_watch *w, int status, const char *why)
{
    if (w->ended)
        return;
    w->ended = 1;
    w->on_end(status, why, w->arg);
}

/* Hand every complete line of the buffer over (callbacks never free the
 * watch: the owner frees it later, from outside evhttp's callbacks). */
static void watch_lines(mcr__etcd_watch *w)
{
    while (!w->ended) {
        size_t n;
        char *line = evbuffer_readln(w->buf, &n, EVBUFFER_EOL_LF);
        if (line == NULL) {
            /* no whole line yet, or none could be allocated: a line that is
             * there is not left waiting for more bytes that may never come */
            if (evbuffer_search_eol(w->buf, NULL, NULL, EVBUFFER_EOL_LF).pos >= 0)
                watch_end(w, MCR_ERR_NOMEM, "out of memory reading a watch line");
            break;
        }
        if (n == 0) {
            free(line);
            continue;
        }
        json_error_t je;
        json_t *j = NULL;
        int jrc = mcr__json_loadb(line, n, 0, &j, &je);
        free(line);
        if (jrc == MCR_ERR_NOMEM) {
            watch_end(w, MCR_ERR_NOMEM, "out of memory parsing a watch line");
            break;
        }
        if (j == NULL || !json_is_object(j)) {
            json_decref(j);
            watch_end(w, MCR_ERR_PROTOCOL, "a watch line that is not a JSON object");
            break;
        }
        w->on_line(j, w->arg);
        json_decref(j);
    }
}

static void watch_chunk(struct evhttp_request *req, void *arg)
{
    mcr__etcd_watch *w = arg;
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    if (w->ended) {
        evbuffer_drain(in, evbuffer_get_length(in));
        return;
    }
    evbuffer_add_buffer(w->buf, in);
    if (evbuffer_get_length(w->buf) > REPLY_MAX) {
        watch_end(w, MCR_ERR_PROTOCOL, "a watch line over the size limit");
        return;
    }
    watch_lines(w);
}

static void watch_done(struct evhttp_request *req, void *arg)
{
    mcr__etcd_watch *w = arg;
    w->req = NULL;
    if (w->ended)
        return;
    if (req == NULL || evhttp_request_get_response_code(req) == 0) {
        watch_end(w, w->error == EVREQ_HTTP_TIMEOUT ? MCR_ERR_TIMEOUT : MCR_ERR_CONNECT,
                  error_name(w->error));
        return;
    }
    int code = evhttp_request_get_response_code(req);
    if (code != 200) {
        char why[200], q[140];
        struct evbuffer *in = evhttp_request_get_input_buffer(req);
        size_t n = evbuffer_get_length(in);
        char head[128];
        n = n < sizeof(head) ? n : sizeof(head);
        evbuffer_copyout(in, head, n);
        snprintf(why, sizeof(why), "HTTP %d: %s", code, mcr__quote(q, sizeof(q), head, n));
        watch_end(w, code >= 500 ? MCR_ERR_CONNECT : MCR_ERR_PROTOCOL, why);
        return;
    }
    evbuffer_add_buffer(w->buf, evhttp_request_get_input_buffer(req));
    evbuffer_add(w->buf, "\n", 1);
    watch_lines(w);
    watch_end(w, MCR_OK, "the server ended the watch");
}

static void watch_error(enum evhttp_request_error e, void *arg)
{
    mcr__etcd_watch *w = arg;
    w->error = (int)e;
}

mcr__etcd_watch *mcr__etcd_watch_start(const mcr__etcd_endpoint *ep, struct event_base *base,
                                       const char *body, unsigned idle_ms,
                                       mcr__etcd_line_fn on_line, mcr__etcd_end_fn on_end,
                                       void *arg)
{
    mcr__etcd_watch *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return NULL;
    w->on_line = on_line;
    w->on_end = on_end;
    w->arg = arg;
    w->error = -1;
    w->buf = evbuffer_new();
    w->conn = conn_new(base, ep, idle_ms);
    if (w->buf == NULL || w->conn == NULL)
        goto fail;
    w->req = evhttp_request_new(watch_done, w);
    if (w->req == NULL)
        goto fail;
    evhttp_request_set_chunked_cb(w->req, watch_chunk);
    evhttp_request_set_error_cb(w->req, watch_error);
    if (prepare(w->req, ep, body) != 0) {
        evhttp_request_free(w->req);
        w->req = NULL;
        goto fail;
    }
    if (evhttp_make_request(w->conn, w->req, EVHTTP_REQ_POST, "/v3/watch") != 0) {
        w->req = NULL;
        goto fail;
    }
    return w;
fail:
    if (w->conn != NULL)
        evhttp_connection_free(w->conn);
    if (w->buf != NULL)
        evbuffer_free(w->buf);
    free(w);
    return NULL;
}

void mcr__etcd_watch_free(mcr__etcd_watch *w)
{
    if (w == NULL)
        return;
    w->ended = 1;
    /* Cancel the request in flight (its callbacks are not called), then
     * free the connection. */
    if (w->req != NULL)
        evhttp_cancel_request(w->req);
    evhttp_connection_free(w->conn);
    evbuffer_free(w->buf);
    free(w);
}
