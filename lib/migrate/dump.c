/* SPDX-License-Identifier: BSD-3-Clause */
/* dump.c: a server's `lru_crawler metadump hash` read over a blocking socket, line by line until END, every wait bounded; its connection code shared (room.c reads stats with it). */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "placement/placement_internal.h"
#include "migrate/migrate_internal.h"

/*
 * memcached 1.6 answers the metadump from its crawler thread, which takes
 * the connection over until END; a command pipelined before it on the same
 * read is refused ("ERROR cannot pipeline other commands before
 * metadump"), so the command is the first and only thing sent on a fresh
 * connection. Item lines end in "\n", END and error lines in "\r\n".
 */

#define DUMP_READ_CHUNK 65536
/* The longest a poll() waits before the tick callback runs again. */
#define DUMP_TICK_MS 100

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* (migrate_internal.h: the connection code, shared with room.c) */
int mcr__dump_wait(int fd, short events, unsigned ms, mcr__dump_tick_fn tick, void *arg,
                   mcr_error *err)
{
    uint64_t deadline = now_ms() + ms;
    for (;;) {
        uint64_t t = now_ms();
        if (t >= deadline)
            return 0;
        uint64_t left = deadline - t;
        struct pollfd p = {fd, events, 0};
        int r = poll(&p, 1, (int)(left < DUMP_TICK_MS ? left : DUMP_TICK_MS));
        if (r > 0)
            return 1;
        if (r < 0 && errno != EINTR)
            return mcr__error(err, MCR_ERR_CONNECT, "poll: %s", strerror(errno));
        if (tick != NULL) {
            int rc = tick(arg, err);
            if (rc != MCR_OK)
                return rc;
        }
    }
}

int mcr__dump_dial(const char *host, int port, unsigned timeout_ms, mcr__dump_tick_fn tick,
                   void *arg, mcr_error *err)
{
    char ports[16];
    struct addrinfo hints, *res = NULL;
    snprintf(ports, sizeof(ports), "%d", port);
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    int gai = getaddrinfo(host, ports, &hints, &res);
    if (gai != 0)
        return mcr__error(err, MCR_ERR_CONNECT, "cannot resolve %s: %s", host,
                          gai_strerror(gai));
    int last = ECONNREFUSED, timed_out = 0, rc = MCR_OK;
    for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                        ai->ai_protocol);
        if (fd < 0) {
            last = errno;
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            freeaddrinfo(res);
            return fd;
        }
        if (errno != EINPROGRESS) {
            last = errno;
            close(fd);
            continue;
        }
        int w = mcr__dump_wait(fd, POLLOUT, timeout_ms, tick, arg, err);
        if (w < 0) {
            rc = w;
            close(fd);
            break;
        }
        if (w == 0) {
            timed_out = 1;
            close(fd);
            continue;
        }
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0) {
            freeaddrinfo(res);
            return fd;
        }
        last = soerr != 0 ? soerr : errno;
        close(fd);
    }
    freeaddrinfo(res);
    if (rc != MCR_OK)
        return rc;
    if (timed_out)
        return mcr__error(err, MCR_ERR_TIMEOUT, "connect timed out after %u ms", timeout_ms);
    return mcr__error(err, MCR_ERR_CONNECT, "cannot connect: %s", strerror(last));
}

/* An error reply of memcached instead of the dump. */
static int is_error_reply(const char *line, size_t len)
{
    static const char *const words[] = {"ERROR", "CLIENT_ERROR", "SERVER_ERROR", "BUSY",
                                        "BADCLASS"};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        size_t n = strlen(words[i]);
        if (len >= n && memcmp(line, words[i], n) == 0 && (len == n || line[n] == ' '))
            return 1;
    }
    return 0;
}

int mcr__dump_send(int fd, const char *req, size_t n, unsigned timeout_ms,
                   mcr__dump_tick_fn tick, void *arg, mcr_error *err)
{
    size_t off = 0;
    while (off < n) {
        ssize_t w = send(fd, req + off, n - off, MSG_NOSIGNAL);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return mcr__error(err, MCR_ERR_CONNECT, "sending the request: %s", strerror(errno));
        int r = mcr__dump_wait(fd, POLLOUT, timeout_ms, tick, arg, err);
        if (r < 0)
            return r;
        if (r == 0)
            return mcr__error(err, MCR_ERR_TIMEOUT, "sending timed out after %u ms", timeout_ms);
    }
    return MCR_OK;
}

/* Hand the complete lines of buf[0..*len) to fn; keep the rest at the
 * front. 1 when END was read, 0 to read on, <0 a status. */
static int take_lines(char *buf, size_t *len, mcr__dump_line_fn fn,
                      void *arg, mcr_error *err)
{
    size_t start = 0;
    for (;;) {
        char *nl = memchr(buf + start, '\n', *len - start);
        if (nl == NULL)
            break;
        size_t n = (size_t)(nl - (buf + start));
        const char *line = buf + start;
        start += n + 1;
        if (n > 0 && line[n - 1] == '\r')
            n--;
        if (n == 3 && memcmp(line, "END", 3) == 0)
            return 1;
        if (n > MCR__MD_LINE_MAX) {
            char q[80];
            return mcr__error(err, MCR_ERR_PROTOCOL, "a line of %zu bytes in the dump: %s", n,
                              mcr__quote(q, sizeof(q), line, n));
        }
        if (is_error_reply(line, n)) {
            char q[200];
            mcr__quote(q, sizeof(q), line, n);
            if (n >= 26 && memcmp(line, "ERROR metadump not allowed", 26) == 0)
                return mcr__error(err, MCR_ERR_SERVER,
                                  "metadump refused (\"%s\": memcached runs with -X, dumping "
                                  "disabled)",
                                  q);
            if (n >= 4 && memcmp(line, "BUSY", 4) == 0) /* another dump runs: wait */
                return mcr__error(err, MCR_ERR_BUSY, "the server answered \"%s\"", q);
            return mcr__error(err, MCR_ERR_SERVER, "the server answered \"%s\"", q);
        }
        int rc = fn(line, n, arg, err);
        if (rc != MCR_OK)
            return rc;
    }
    memmove(buf, buf + start, *len - start);
    *len -= start;
    if (*len > MCR__MD_LINE_MAX + 2) {
        char q[80];
        return mcr__error(err, MCR_ERR_PROTOCOL,
                          "a line of more than %d bytes in the dump: %s", MCR__MD_LINE_MAX,
                          mcr__quote(q, sizeof(q), buf, *len));
    }
    return 0;
}

static int dump_once(const char *host, int port, unsigned timeout_ms, mcr__dump_line_fn fn,
                     mcr__dump_tick_fn tick, void *arg, mcr_error *err);

/* A crawler busy with another dump (one that a stopped or failed run left
 * behind goes on to its end) answers BUSY before any line: the dump is
 * tried again every BUSY_RETRY_MS, for at most timeout_ms. */
#define BUSY_RETRY_MS 50

int mcr__dump_run(const char *host, int port, unsigned timeout_ms, mcr__dump_line_fn fn,
                  mcr__dump_tick_fn tick, void *arg, mcr_error *err)
{
    for (unsigned waited = 0;; waited += BUSY_RETRY_MS) {
        int rc = dump_once(host, port, timeout_ms, fn, tick, arg, err);
        if (rc != MCR_ERR_BUSY)
            return rc;
        if (waited >= timeout_ms) {
            char busy[sizeof(err->message)];
            snprintf(busy, sizeof(busy), "%s", err != NULL ? err->message : "BUSY");
            return mcr__error(err, MCR_ERR_SERVER, "%s for %u ms", busy, waited);
        }
        if (tick != NULL && (rc = tick(arg, err)) != MCR_OK)
            return rc;
        struct timespec ts = {0, BUSY_RETRY_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static int dump_once(const char *host, int port, unsigned timeout_ms, mcr__dump_line_fn fn,
                     mcr__dump_tick_fn tick, void *arg, mcr_error *err)
{
    static const char req[] = "lru_crawler metadump hash\r\n";
    int fd = mcr__dump_dial(host, port, timeout_ms, tick, arg, err);
    if (fd < 0)
        return fd;
    int rc = mcr__dump_send(fd, req, sizeof(req) - 1, timeout_ms, tick, arg, err);
    size_t cap = DUMP_READ_CHUNK + MCR__MD_LINE_MAX + 8, len = 0;
    char *buf = rc == MCR_OK ? malloc(cap) : NULL;
    if (rc == MCR_OK && buf == NULL)
        rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory for the dump");
    while (rc == MCR_OK) {
        ssize_t r = recv(fd, buf + len, cap - len, 0);
        if (r > 0) {
            len += (size_t)r;
            int t = take_lines(buf, &len, fn, arg, err);
            if (t == 1)
                break;
            rc = t;
            continue;
        }
        if (r == 0) {
            rc = mcr__error(err, MCR_ERR_CONNECT, "the connection closed before the dump's END");
            break;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            rc = mcr__error(err, MCR_ERR_CONNECT, "reading the dump: %s", strerror(errno));
            break;
        }
        int w = mcr__dump_wait(fd, POLLIN, timeout_ms, tick, arg, err);
        if (w < 0)
            rc = w;
        else if (w == 0)
            rc = mcr__error(err, MCR_ERR_TIMEOUT, "the dump stalled: nothing for %u ms",
                            timeout_ms);
    }
    free(buf);
    close(fd);
    return rc;
}
