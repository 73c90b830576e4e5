/* SPDX-License-Identifier: BSD-3-Clause */
/* http_cache.c: example HTTP cache service on libevent's evhttp, answering every request from the callback of an mcroute pool in the same event loop.
 *
 * Usage: http_cache -s HOST:PORT[,HOST:PORT...] [--listen ADDR:PORT] [-m MODE]
 *                   [--timeout-ms MS] [--retry-ms MS] [--meta]
 *
 *   GET    /cache/KEY             200 and the value; 404 when memcached has no such key
 *   PUT    /cache/KEY[?ttl=SEC]   body = value; 201 when the key was new, 204 when it
 *                                 replaced a value; ttl 0..2592000 seconds (0: no expiry)
 *   DELETE /cache/KEY             204; 404 when there was no such key
 *   GET    /stats                 the pool's per-server counters, one line a server
 *
 * KEY is percent-decoded; a key memcached cannot take (empty, over 250 bytes,
 * a space or control byte) is refused with 400 and a message naming the
 * problem. A failure between the pool and memcached is told by its status:
 * 504 (no reply or no connection within the timeout), 502 (connection
 * refused or reset, a reply memcached should not have sent, a server error),
 * 503 (the server is down for the pool after consecutive failures, or the
 * service is stopping); the body gives the reason. Every reply to a keyed
 * request carries X-Cache-Server, the memcached server the pool used.
 *
 * --listen defaults to 127.0.0.1:8080; port 0 lets the kernel pick one. The
 * address actually bound is printed on standard output as the first line,
 * "listening on ADDR:PORT", so that a script can read it. Keys are placed
 * with mode MODE (default ketama, as `mcroute locate -s` places them).
 * --meta speaks memcached's meta protocol instead of the text protocol.
 *
 * How it embeds the pool. One event_base runs both evhttp and the pool
 * (mcroute_pool.h). A request handler only validates and submits: the pool
 * calls back later, from the same loop, and the callback sends the HTTP
 * reply, so the loop never waits for memcached (mcr_pool_exec() would
 * block every other client meanwhile). A PUT is an `add` whose callback,
 * when the key exists, submits a `set` from inside the pool's callback
 * (which the pool allows).
 *
 * SIGINT and SIGTERM stop the service: the pool is freed first, which calls
 * back every request still waiting for memcached with MCR_ERR_CANCELLED
 * (answered 503), the listener is closed, and after a short grace period for
 * those replies to be written, everything is freed; exit status 0.
 *
 * Exit status: 0 after a signal, 1 when the service cannot start, 2 on a
 * usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include <mcroute.h>
#include <mcroute_pool.h>
#include <mcroute_router.h>
#include <mcroute_snapshot.h>

/* memcached treats an exptime above 30 days as a Unix time: a TTL is below. */
#define TTL_MAX 2592000L
/* The largest value accepted: memcached's default item size is 1 MiB,
 * key and item header included, so stay below it. */
#define VALUE_MAX 1000000u
/* How long replies of cancelled requests get to be written at shutdown. */
#define SHUTDOWN_GRACE_MS 200
#define CACHE_PREFIX "/cache/"

typedef struct service {
    struct event_base *base;
    struct evhttp *http;
    struct evhttp_bound_socket *listener;
    mcr_config *cfg;
    mcr_snapshot *snap;
    mcr_router *router;
    mcr_pool *pool;              /* NULL once stopping */
    struct event *sigint_ev, *sigterm_ev, *grace_ev;
    uint64_t answered;           /* HTTP replies sent, of every kind */
    uint64_t waiting;            /* requests waiting for the pool */
} service;

/* One HTTP request waiting for the pool's callback. */
typedef struct job {
    service *svc;
    struct evhttp_request *req;
    char *key;                   /* decoded, not NUL-terminated (key_len bytes) */
    size_t key_len;
    char *value;                 /* PUT: kept for the `set` that may follow the `add` */
    size_t value_len;
    int64_t ttl;
} job;

/* ------------------------------------------------------------ replies */

static void reply(service *svc, struct evhttp_request *req, int code, const char *reason,
                  const char *server, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* A text reply: `fmt` is the body (NULL: none). */
static void reply(service *svc, struct evhttp_request *req, int code, const char *reason,
                  const char *server, const char *fmt, ...)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    struct evbuffer *body = NULL;
    if (server != NULL)
        evhttp_add_header(h, "X-Cache-Server", server);
    if (fmt != NULL) {
        body = evbuffer_new();
        if (body != NULL) {
            va_list ap;
            va_start(ap, fmt);
            evbuffer_add_vprintf(body, fmt, ap);
            va_end(ap);
        }
        evhttp_add_header(h, "Content-Type", "text/plain; charset=utf-8");
    }
    evhttp_send_reply(req, code, reason, body);
    if (body != NULL)
        evbuffer_free(body);
    svc->answered++;
}

/* The HTTP status telling a pool error, and its reason phrase. */
static int http_status(int status, const char **reason)
{
    switch (status) {
    case MCR_ERR_TIMEOUT:
        *reason = "Gateway Timeout";
        return 504;
    case MCR_ERR_CONNECT:
    case MCR_ERR_PROTOCOL:
    case MCR_ERR_SERVER:
        *reason = "Bad Gateway";
        return 502;
    case MCR_ERR_DOWN:
    case MCR_ERR_CANCELLED:
    case MCR_ERR_EMPTY:
        *reason = "Service Unavailable";
        return 503;
    case MCR_ERR_KEY:
    case MCR_ERR_INVALID:
        *reason = "Bad Request";
        return 400;
    case MCR_ERR_TOO_BIG:
        *reason = "Payload Too Large";
        return 413;
    default:
        *reason = "Internal Server Error";
        return 500;
    }
}

static void reply_error(service *svc, struct evhttp_request *req, int status,
                        const char *server, const char *message)
{
    const char *reason;
    int code = http_status(status, &reason);
    reply(svc, req, code, reason, server, "%s: %s\n", mcr_strerror(status),
          message != NULL ? message : mcr_strerror(status));
}

static void job_free(job *j)
{
    if (j == NULL)
        return;
    free(j->key);
    free(j->value);
    free(j);
}

/* The end of a job: its reply was sent (or the request is refused). */
static void job_done(job *j)
{
    j->svc->waiting--;
    job_free(j);
}

/* ------------------------------------------------------------ pool callbacks */

static void get_done(const mcr_result *res, void *arg)
{
    job *j = arg;
    service *svc = j->svc;
    if (res->status != MCR_OK) {
        reply_error(svc, j->req, res->status, res->server, res->message);
    } else if (res->reply == MCR_REPLY_HIT) {
        struct evkeyvalq *h = evhttp_request_get_output_headers(j->req);
        struct evbuffer *body = evbuffer_new();
        evhttp_add_header(h, "Content-Type", "application/octet-stream");
        evhttp_add_header(h, "X-Cache-Server", res->server);
        if (body == NULL) {
            reply_error(svc, j->req, MCR_ERR_NOMEM, res->server, "out of memory");
        } else {
            /* res->value lives during this callback only: copied here. */
            evbuffer_add(body, res->value, res->value_len);
            evhttp_send_reply(j->req, 200, "OK", body);
            evbuffer_free(body);
            svc->answered++;
        }
    } else {
        reply(svc, j->req, 404, "Not Found", res->server, "no such key\n");
    }
    job_done(j);
}

static void put_set_done(const mcr_result *res, void *arg)
{
    job *j = arg;
    if (res->status != MCR_OK)
        reply_error(j->svc, j->req, res->status, res->server, res->message);
    else if (res->reply == MCR_REPLY_STORED)
        reply(j->svc, j->req, 204, "No Content", res->server, NULL);
    else
        reply(j->svc, j->req, 502, "Bad Gateway", res->server, "set answered %s\n",
              mcr_reply_name(res->reply));
    job_done(j);
}

static void put_add_done(const mcr_result *res, void *arg)
{
    job *j = arg;
    service *svc = j->svc;
    if (res->status == MCR_OK && res->reply == MCR_REPLY_NOT_STORED) {
        /* The key exists: replace it. A callback may submit to its pool. */
        mcr_request q;
        mcr_error err;
        memset(&q, 0, sizeof(q));
        memset(&err, 0, sizeof(err));
        q.op = MCR_OP_SET;
        q.key = j->key;
        q.key_len = j->key_len;
        q.value = j->value;
        q.value_len = j->value_len;
        q.exptime = j->ttl;
        int rc = svc->pool == NULL ? MCR_ERR_CANCELLED
                                   : mcr_pool_submit(svc->pool, &q, put_set_done, j, &err);
        if (rc == MCR_OK)
            return; /* put_set_done answers */
        reply_error(svc, j->req, rc, res->server, err.message[0] ? err.message : NULL);
    } else if (res->status != MCR_OK) {
        reply_error(svc, j->req, res->status, res->server, res->message);
    } else if (res->reply == MCR_REPLY_STORED) {
        reply(svc, j->req, 201, "Created", res->server, NULL);
    } else {
        reply(svc, j->req, 502, "Bad Gateway", res->server, "add answered %s\n",
              mcr_reply_name(res->reply));
    }
    job_done(j);
}

static void delete_done(const mcr_result *res, void *arg)
{
    job *j = arg;
    if (res->status != MCR_OK)
        reply_error(j->svc, j->req, res->status, res->server, res->message);
    else if (res->reply == MCR_REPLY_DELETED)
        reply(j->svc, j->req, 204, "No Content", res->server, NULL);
    else
        reply(j->svc, j->req, 404, "Not Found", res->server, "no such key\n");
    job_done(j);
}

/* ------------------------------------------------------------ HTTP handlers */

/* The ttl query parameter: 0 when absent; -1 (and a reply sent) when bad. */
static int64_t parse_ttl(service *svc, struct evhttp_request *req)
{
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    struct evkeyvalq params;
    int64_t ttl = 0;
    if (query == NULL)
        return 0;
    if (evhttp_parse_query_str(query, &params) != 0) { /* it initializes params */
        reply(svc, req, 400, "Bad Request", NULL, "malformed query string\n");
        return -1;
    }
    const char *t = evhttp_find_header(&params, "ttl");
    if (t != NULL) {
        char *end;
        errno = 0;
        long v = strtol(t, &end, 10);
        if (*t == '\0' || *end != '\0' || errno != 0 || v < 0 || v > TTL_MAX) {
            reply(svc, req, 400, "Bad Request", NULL,
                  "ttl must be a number of seconds from 0 to %ld, not \"%.40s\"\n", TTL_MAX, t);
            ttl = -1;
        } else {
            ttl = v;
        }
    }
    evhttp_clear_headers(&params);
    return ttl;
}

static void handle_stats(service *svc, struct evhttp_request *req)
{
    static const char *const health[] = {"up", "down", "ejected", "draining"};
    struct evbuffer *body = evbuffer_new();
    if (body == NULL) {
        reply_error(svc, req, MCR_ERR_NOMEM, NULL, "out of memory");
        return;
    }
    for (size_t i = 0; i < mcr_pool_server_count(svc->pool); i++) {
        mcr_server_stats st;
        if (mcr_pool_server_stats(svc->pool, i, &st) != MCR_OK)
            continue;
        evbuffer_add_printf(body,
                            "%s %s requests=%" PRIu64 " hits=%" PRIu64 " misses=%" PRIu64
                            " errors=%" PRIu64 " timeouts=%" PRIu64 " p99_us=%.0f\n",
                            st.id, health[st.health & 3], st.requests, st.hits, st.misses,
                            st.errors, st.timeouts, st.p99_us);
    }
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "text/plain; charset=utf-8");
    evhttp_send_reply(req, 200, "OK", body);
    evbuffer_free(body);
    svc->answered++;
}

static void handle(struct evhttp_request *req, void *arg)
{
    service *svc = arg;
    enum evhttp_cmd_type method = evhttp_request_get_command(req);
    const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));

    if (svc->pool == NULL) {
        reply(svc, req, 503, "Service Unavailable", NULL, "the service is stopping\n");
        return;
    }
    if (path != NULL && strcmp(path, "/stats") == 0 && method == EVHTTP_REQ_GET) {
        handle_stats(svc, req);
        return;
    }
    if (path == NULL || strncmp(path, CACHE_PREFIX, strlen(CACHE_PREFIX)) != 0) {
        reply(svc, req, 404, "Not Found", NULL, "no such resource: use %sKEY or /stats\n",
              CACHE_PREFIX);
        return;
    }
    if (method != EVHTTP_REQ_GET && method != EVHTTP_REQ_PUT && method != EVHTTP_REQ_DELETE) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, PUT, DELETE");
        reply(svc, req, 405, "Method Not Allowed", NULL, "%sKEY takes GET, PUT and DELETE\n",
              CACHE_PREFIX);
        return;
    }

    job *j = calloc(1, sizeof(*j));
    size_t klen = 0;
    char *key = j != NULL ? evhttp_uridecode(path + strlen(CACHE_PREFIX), 0, &klen) : NULL;
    if (key == NULL) {
        free(j);
        reply_error(svc, req, MCR_ERR_NOMEM, NULL, "out of memory");
        return;
    }
    j->svc = svc;
    j->req = req;
    j->key = key;
    j->key_len = klen;

    mcr_request q;
    mcr_pool_cb cb;
    memset(&q, 0, sizeof(q));
    q.key = j->key;
    q.key_len = j->key_len;
    if (method == EVHTTP_REQ_GET) {
        q.op = MCR_OP_GET;
        cb = get_done;
    } else if (method == EVHTTP_REQ_DELETE) {
        q.op = MCR_OP_DELETE;
        cb = delete_done;
    } else {
        struct evbuffer *in = evhttp_request_get_input_buffer(req);
        if ((j->ttl = parse_ttl(svc, req)) < 0) {
            job_free(j);
            return;
        }
        j->value_len = evbuffer_get_length(in);
        j->value = malloc(j->value_len ? j->value_len : 1);
        if (j->value == NULL) {
            job_free(j);
            reply_error(svc, req, MCR_ERR_NOMEM, NULL, "out of memory");
            return;
        }
        evbuffer_copyout(in, j->value, j->value_len);
        q.op = MCR_OP_ADD;
        q.value = j->value;
        q.value_len = j->value_len;
        q.exptime = j->ttl;
        cb = put_add_done;
    }

    /* Refused at submission (a bad key, a value too big, no server): the
     * callback will never run, so answer now. */
    mcr_error err;
    memset(&err, 0, sizeof(err));
    int rc = mcr_pool_submit(svc->pool, &q, cb, j, &err);
    if (rc != MCR_OK) {
        reply_error(svc, req, rc, NULL, err.message[0] ? err.message : NULL);
        job_free(j);
        return;
    }
    svc->waiting++;
}

/* ------------------------------------------------------------ shutdown */

static void grace_over(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    event_base_loopbreak(((service *)arg)->base);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    service *svc = arg;
    (void)what;
    if (svc->pool == NULL)
        return; /* already stopping */
    fprintf(stderr, "http_cache: %s: stopping (%" PRIu64 " requests waiting for memcached)\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM", svc->waiting);
    /* Not a callback of the pool: it may be freed here. Every request
     * still waiting is called back now with MCR_ERR_CANCELLED and answered
     * 503; the loop runs a little longer to write those replies. */
    mcr_pool *pool = svc->pool;
    svc->pool = NULL;
    mcr_pool_free(pool);
    if (svc->listener != NULL) {
        evhttp_del_accept_socket(svc->http, svc->listener);
        svc->listener = NULL;
    }
    struct timeval tv = {0, SHUTDOWN_GRACE_MS * 1000};
    evtimer_add(svc->grace_ev, &tv);
}

/* ------------------------------------------------------------ setup */

static void usage(FILE *f)
{
    fprintf(f, "usage: http_cache -s HOST:PORT[,HOST:PORT...] [--listen ADDR:PORT] [-m MODE]\n"
               "                  [--timeout-ms MS] [--retry-ms MS] [--meta]\n");
}

/* "ADDR:PORT" into addr (NUL-terminated) and *port. 0 or -1. */
static int split_listen(const char *s, char *addr, size_t cap, int *port)
{
    const char *colon = strrchr(s, ':');
    char *end;
    if (colon == NULL || (size_t)(colon - s) >= cap || colon == s)
        return -1;
    errno = 0;
    long p = strtol(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end != '\0' || errno != 0 || p < 0 || p > 65535)
        return -1;
    memcpy(addr, s, (size_t)(colon - s));
    addr[colon - s] = '\0';
    *port = (int)p;
    return 0;
}

static unsigned parse_ms(const char *s, const char *what)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno != 0 || v == 0 || v > 3600000) {
        fprintf(stderr, "http_cache: %s must be 1..3600000 ms, not \"%s\"\n", what, s);
        exit(2);
    }
    return (unsigned)v;
}

/* The port the listener really has (the kernel's choice for port 0). */
static int bound_port(struct evhttp_bound_socket *listener)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    evutil_socket_t fd = evhttp_bound_socket_get_fd(listener);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return -1;
    if (ss.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return -1;
}

static void service_free(service *svc)
{
    mcr_pool_free(svc->pool); /* before evhttp: its callbacks answer HTTP requests */
    svc->pool = NULL;
    if (svc->http != NULL)
        evhttp_free(svc->http);
    if (svc->sigint_ev != NULL)
        event_free(svc->sigint_ev);
    if (svc->sigterm_ev != NULL)
        event_free(svc->sigterm_ev);
    if (svc->grace_ev != NULL)
        event_free(svc->grace_ev);
    mcr_router_free(svc->router);
    mcr_snapshot_unref(svc->snap);
    mcr_config_free(svc->cfg);
    if (svc->base != NULL)
        event_base_free(svc->base);
}

int main(int argc, char **argv)
{
    enum { OPT_LISTEN = 256, OPT_TIMEOUT, OPT_RETRY, OPT_META };
    static const struct option longopts[] = {
        {"servers", required_argument, NULL, 's'},
        {"mode", required_argument, NULL, 'm'},
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"timeout-ms", required_argument, NULL, OPT_TIMEOUT},
        {"retry-ms", required_argument, NULL, OPT_RETRY},
        {"meta", no_argument, NULL, OPT_META},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *servers = NULL, *listen = "127.0.0.1:8080", *mode_name = "ketama";
    mcr_pool_options opts;
    mcr_pool_options_init(&opts);
    opts.max_value_size = VALUE_MAX;
    int c;
    while ((c = getopt_long(argc, argv, "s:m:h", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            servers = optarg;
            break;
        case 'm':
            mode_name = optarg;
            break;
        case OPT_LISTEN:
            listen = optarg;
            break;
        case OPT_TIMEOUT:
            /* Both: a request sent while its connection is still being made
             * waits for the connect timeout, not for its own (lib/pool/conn.c). */
            opts.request_timeout_ms = opts.connect_timeout_ms = parse_ms(optarg, "--timeout-ms");
            break;
        case OPT_META:
            opts.protocol = MCR_PROTO_META;
            break;
        case OPT_RETRY:
            opts.retry_timeout_ms = parse_ms(optarg, "--retry-ms");
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    char addr[256];
    int port;
    mcr_mode mode;
    if (servers == NULL || optind != argc) {
        usage(stderr);
        return 2;
    }
    if (split_listen(listen, addr, sizeof(addr), &port) != 0) {
        fprintf(stderr, "http_cache: --listen wants ADDR:PORT (port 0..65535), not \"%s\"\n",
                listen);
        return 2;
    }
    if (mcr_mode_from_name(mode_name, &mode) != MCR_OK) {
        fprintf(stderr, "http_cache: unknown mode \"%s\"\n", mode_name);
        return 2;
    }

    /* A client that goes away must not kill the service. */
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);

    service svc;
    memset(&svc, 0, sizeof(svc));
    mcr_error err;
    memset(&err, 0, sizeof(err));
    int rc;
    svc.cfg = mcr_config_new();
    if (svc.cfg == NULL) {
        fprintf(stderr, "http_cache: out of memory\n");
        return 1;
    }
    if ((rc = mcr_config_set_mode(svc.cfg, mode)) != MCR_OK ||
        (rc = mcr_config_add_servers(svc.cfg, servers, &err)) != MCR_OK ||
        (rc = mcr_snapshot_new(svc.cfg, 1, &svc.snap, &err)) != MCR_OK ||
        (rc = mcr_router_new(svc.snap, &svc.router, &err)) != MCR_OK) {
        fprintf(stderr, "http_cache: %s\n", err.message[0] ? err.message : mcr_strerror(rc));
        service_free(&svc);
        return rc == MCR_ERR_NOMEM ? 1 : 2;
    }

    svc.base = event_base_new();
    if (svc.base == NULL ||
        (rc = mcr_pool_new(svc.base, svc.router, &opts, &svc.pool, &err)) != MCR_OK) {
        fprintf(stderr, "http_cache: %s\n",
                svc.base == NULL ? "cannot create an event base" : err.message);
        service_free(&svc);
        return 1;
    }
    svc.http = evhttp_new(svc.base);
    svc.sigint_ev = evsignal_new(svc.base, SIGINT, on_signal, &svc);
    svc.sigterm_ev = evsignal_new(svc.base, SIGTERM, on_signal, &svc);
    svc.grace_ev = evtimer_new(svc.base, grace_over, &svc);
    if (svc.http == NULL || svc.sigint_ev == NULL || svc.sigterm_ev == NULL ||
        svc.grace_ev == NULL || event_add(svc.sigint_ev, NULL) != 0 ||
        event_add(svc.sigterm_ev, NULL) != 0) {
        fprintf(stderr, "http_cache: cannot set up libevent\n");
        service_free(&svc);
        return 1;
    }
    /* evhttp answers 413 itself to a larger body, before reading it all. */
    evhttp_set_max_body_size(svc.http, VALUE_MAX);
    evhttp_set_gencb(svc.http, handle, &svc);
    svc.listener = evhttp_bind_socket_with_handle(svc.http, addr, (ev_uint16_t)port);
    int bound = svc.listener != NULL ? bound_port(svc.listener) : -1;
    if (bound < 0) {
        fprintf(stderr, "http_cache: cannot listen on %s: %s\n", listen, strerror(errno));
        service_free(&svc);
        return 1;
    }
    printf("listening on %s:%d\n", addr, bound);
    fflush(stdout);
    fprintf(stderr, "http_cache: %zu memcached servers (%s, %s protocol), pool timeout %u ms\n",
            mcr_config_server_count(svc.cfg), mcr_mode_name(mode),
            opts.protocol == MCR_PROTO_META ? "meta" : "text",
            opts.request_timeout_ms ? opts.request_timeout_ms : 1000);

    event_base_dispatch(svc.base);

    fprintf(stderr, "http_cache: stopped after %" PRIu64 " replies\n", svc.answered);
    service_free(&svc);
    return 0;
}
