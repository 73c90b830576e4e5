/* SPDX-License-Identifier: BSD-3-Clause */
/* delayproxy.c: a TCP proxy for tests that holds the reply to a read of one key until the test releases it (delayproxy.h). */
#include "delayproxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define DP_CONNS 64
#define DP_HELD_MAX (1 << 20)

typedef struct dp_conn {
    int cfd, sfd;       /* client side, server side; -1: closed */
    int held;           /* 1: the server's bytes are kept back */
    char *hold;
    size_t hold_len;
    char line[512];     /* the start of the client's current line */
    size_t line_len;
} dp_conn;

struct dp_proxy {
    int lfd, upstream, port;
    int wake[2];        /* a byte written wakes the thread's poll */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char key[256];      /* armed: the key to hold the first read of */
    int armed, release, stop;
    size_t held_bytes;
    dp_conn conns[DP_CONNS];
};

static void close_conn(dp_conn *c)
{
    if (c->cfd >= 0)
        close(c->cfd);
    if (c->sfd >= 0)
        close(c->sfd);
    free(c->hold);
    memset(c, 0, sizeof(*c));
    c->cfd = c->sfd = -1;
}

static int write_all(int fd, const char *b, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Whether `line` (a client's request line) reads key. */
static int reads_key(const char *line, size_t n, const char *key)
{
    static const char *const verbs[] = {"get ", "gets ", "mg "};
    size_t kl = strlen(key);
    for (size_t v = 0; v < 3; v++) {
        size_t vl = strlen(verbs[v]);
        if (n >= vl + kl && memcmp(line, verbs[v], vl) == 0 &&
            memcmp(line + vl, key, kl) == 0 &&
            (n == vl + kl || line[vl + kl] == ' ' || line[vl + kl] == '\r'))
            return 1;
    }
    return 0;
}

/* Look at the client's bytes line by line (under p->mu). */
static void scan_client(dp_proxy *p, dp_conn *c, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (b[i] == '\n') {
            if (p->armed && reads_key(c->line, c->line_len, p->key)) {
                c->held = 1;
                p->armed = 0;
            }
            c->line_len = 0;
        } else if (c->line_len < sizeof(c->line)) {
            c->line[c->line_len++] = b[i];
        }
    }
}

static void accept_one(dp_proxy *p)
{
    int cfd = accept(p->lfd, NULL, NULL);
    if (cfd < 0)
        return;
    int sfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)p->upstream);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (sfd < 0 || connect(sfd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(cfd);
        if (sfd >= 0)
            close(sfd);
        return;
    }
    for (int i = 0; i < DP_CONNS; i++)
        if (p->conns[i].cfd < 0) {
            p->conns[i].cfd = cfd;
            p->conns[i].sfd = sfd;
            return;
        }
    close(cfd);
    close(sfd);
}

static void *run(void *arg)
{
    dp_proxy *p = arg;
    char buf[65536];
    for (;;) {
        struct pollfd pf[2 + 2 * DP_CONNS];
        int idx[2 + 2 * DP_CONNS];
        int n = 0;
        pf[n].fd = p->wake[0], pf[n].events = POLLIN, idx[n++] = -1;
        pf[n].fd = p->lfd, pf[n].events = POLLIN, idx[n++] = -2;
        for (int i = 0; i < DP_CONNS; i++)
            if (p->conns[i].cfd >= 0) {
                pf[n].fd = p->conns[i].cfd, pf[n].events = POLLIN, idx[n++] = 2 * i;
                pf[n].fd = p->conns[i].sfd, pf[n].events = POLLIN, idx[n++] = 2 * i + 1;
            }
        if (poll(pf, (nfds_t)n, -1) < 0 && errno != EINTR)
            break;
        pthread_mutex_lock(&p->mu);
        if (p->stop) {
            pthread_mutex_unlock(&p->mu);
            break;
        }
        if (p->release) {
            for (int i = 0; i < DP_CONNS; i++) {
                dp_conn *c = &p->conns[i];
                if (c->held && c->cfd >= 0 && c->hold_len > 0)
                    (void)write_all(c->cfd, c->hold, c->hold_len);
                c->held = 0;
                c->hold_len = 0;
            }
            p->release = 0;
            p->held_bytes = 0;
        }
        for (int k = 0; k < n; k++) {
            if (!(pf[k].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (idx[k] == -1) {
                (void)read(p->wake[0], buf, sizeof(buf));
                continue;
            }
            if (idx[k] == -2) {
                accept_one(p);
                continue;
            }
            dp_conn *c = &p->conns[idx[k] / 2];
            if (c->cfd < 0)
                continue;
            int from_server = idx[k] % 2;
            ssize_t r = recv(from_server ? c->sfd : c->cfd, buf, sizeof(buf), 0);
            if (r <= 0) {
                close_conn(c);
                continue;
            }
            if (!from_server) {
                scan_client(p, c, buf, (size_t)r);
                if (write_all(c->sfd, buf, (size_t)r) != 0)
                    close_conn(c);
            } else if (c->held) {
                char *h = c->hold_len + (size_t)r > DP_HELD_MAX
                              ? NULL
                              : realloc(c->hold, c->hold_len + (size_t)r);
                if (h == NULL) {
                    close_conn(c);
                    continue;
                }
                c->hold = h;
                memcpy(c->hold + c->hold_len, buf, (size_t)r);
                c->hold_len += (size_t)r;
                p->held_bytes += (size_t)r;
                pthread_cond_broadcast(&p->cv);
            } else if (write_all(c->cfd, buf, (size_t)r) != 0) {
                close_conn(c);
            }
        }
        pthread_mutex_unlock(&p->mu);
    }
    return NULL;
}

static void wake(dp_proxy *p)
{
    char b = 1;
    (void)write(p->wake[1], &b, 1);
}

dp_proxy *dp_start(int upstream_port)
{
    dp_proxy *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return NULL;
    for (int i = 0; i < DP_CONNS; i++)
        p->conns[i].cfd = p->conns[i].sfd = -1;
    p->upstream = upstream_port;
    p->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof(a);
    if (p->lfd < 0 || bind(p->lfd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        listen(p->lfd, 64) != 0 || getsockname(p->lfd, (struct sockaddr *)&a, &al) != 0 ||
        pipe(p->wake) != 0) {
        if (p->lfd >= 0)
            close(p->lfd);
        free(p);
        return NULL;
    }
    p->port = ntohs(a.sin_port);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (pthread_create(&p->thread, NULL, run, p) != 0) {
        close(p->lfd);
        close(p->wake[0]);
        close(p->wake[1]);
        free(p);
        return NULL;
    }
    return p;
}

int dp_port(const dp_proxy *p)
{
    return p->port;
}

void dp_hold(dp_proxy *p, const char *key)
{
    pthread_mutex_lock(&p->mu);
    size_t n = strlen(key);
    if (n >= sizeof(p->key))
        n = sizeof(p->key) - 1;
    memcpy(p->key, key, n);
    p->key[n] = '\0';
    p->armed = 1;
    pthread_mutex_unlock(&p->mu);
}

int dp_wait_held(dp_proxy *p, int timeout_ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    int rc = 0;
    pthread_mutex_lock(&p->mu);
    while (p->held_bytes == 0 && rc == 0)
        rc = pthread_cond_timedwait(&p->cv, &p->mu, &dl);
    int ok = p->held_bytes > 0;
    pthread_mutex_unlock(&p->mu);
    return ok ? 0 : -1;
}

void dp_release(dp_proxy *p)
{
    pthread_mutex_lock(&p->mu);
    p->release = 1;
    p->armed = 0;
    pthread_mutex_unlock(&p->mu);
    wake(p);
}

void dp_stop(dp_proxy *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_mutex_unlock(&p->mu);
    wake(p);
    pthread_join(p->thread, NULL);
    for (int i = 0; i < DP_CONNS; i++)
        if (p->conns[i].cfd >= 0)
            close_conn(&p->conns[i]);
    close(p->lfd);
    close(p->wake[0]);
    close(p->wake[1]);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
