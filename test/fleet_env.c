/* SPDX-License-Identifier: BSD-3-Clause */
/* fleet_env.c: the fleet suites' shared etcd, pools built from server lists, and the event recorder (see fleet_env.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fleet_env.h"
#include "realserver.h"
#include "testutil.h"
#include "testutil_config.h"

/* ------------------------------------------------------------ the suite's etcd */

static es_cluster *fe_shared;
static char fe_shared_why[512];

int fe_main(Suite *s, int members, const char *tag)
{
    int rc;

    if (members > 0) {
        fe_shared = es_start(members, tag);
        if (fe_shared == NULL)
            snprintf(fe_shared_why, sizeof(fe_shared_why), "%s", es_last_error());
        else if (es_leader(fe_shared, mcr_test_ms(15000)) < 0) {
            snprintf(fe_shared_why, sizeof(fe_shared_why), "no leader: %s", es_last_error());
            es_free(fe_shared);
            fe_shared = NULL;
        }
    }
    rc = tu_run(s);
    es_free(fe_shared);
    fe_shared = NULL;
    rs_stop_all();
    return rc;
}

es_cluster *fe_cluster(void)
{
    if (fe_shared == NULL)
        ck_abort_msg("the suite's etcd did not start: %s", fe_shared_why);
    return fe_shared;
}

/* ------------------------------------------------------------ pools */

void fe_options(mcr_fleet_options *o, const char *endpoints, const char *pool)
{
    static char slots[FE_OPTION_SLOTS][2][1024];
    static unsigned next;
    unsigned k = next++ % FE_OPTION_SLOTS;

    mcr_fleet_options_init(o);
    snprintf(slots[k][0], sizeof(slots[k][0]), "%s", endpoints);
    snprintf(slots[k][1], sizeof(slots[k][1]), "%s", pool);
    o->endpoints = slots[k][0];
    o->pool = slots[k][1];
    o->wait_ms = (unsigned)mcr_test_ms(10000);
}

mcr_config *fe_config(const char *spec)
{
    return tu_config(spec, MCR_MODE_KETAMA, MCR_HASH_COUNT);
}

uint64_t fe_publish(const mcr_fleet_options *o, const char *spec)
{
    mcr_error err = {0};
    mcr_config *cfg = fe_config(spec);
    uint64_t epoch = 0;
    int rc = mcr_fleet_publish(o, cfg, &epoch, &err);

    mcr_config_free(cfg);
    if (rc != MCR_OK)
        ck_abort_msg("mcr_fleet_publish(%s, \"%s\"): %s: %s", o->pool, spec, mcr_strerror(rc),
                     err.message);
    return epoch;
}

mcr_snapshot *fe_read(const mcr_fleet_options *o, uint64_t *revision)
{
    mcr_error err = {0};
    mcr_snapshot *snap = NULL;
    int rc = mcr_fleet_read(o, &snap, revision, &err);

    if (rc != MCR_OK)
        ck_abort_msg("mcr_fleet_read(%s): %s: %s", o->pool, mcr_strerror(rc), err.message);
    if (snap == NULL)
        ck_abort_msg("mcr_fleet_read(%s): MCR_OK without a snapshot", o->pool);
    return snap;
}

uint64_t fe_epoch(const mcr_fleet_options *o)
{
    mcr_snapshot *s = fe_read(o, NULL);
    uint64_t e = mcr_snapshot_epoch(s);

    mcr_snapshot_unref(s);
    return e;
}

int fe_add(const mcr_fleet_options *o, const char *id, const char *host, int port,
           uint64_t *epoch, mcr_error *err)
{
    mcr_changes *ch = mcr_changes_new();
    mcr_server_desc d = {.id = id, .host = host, .port = port, .weight = 1};
    int rc;

    if (ch == NULL)
        return MCR_ERR_NOMEM;
    rc = mcr_changes_add(ch, &d, err);
    if (rc == MCR_OK)
        rc = mcr_fleet_change(o, ch, epoch, err);
    mcr_changes_free(ch);
    return rc;
}

char *fe_text(const mcr_snapshot *snap)
{
    mcr_error err = {0};
    char *t = NULL;
    int rc = mcr_snapshot_text(snap, &t, NULL, &err);

    if (rc != MCR_OK)
        ck_abort_msg("mcr_snapshot_text: %s", err.message);
    return t;
}

const char *fe_snapshot_key(const mcr_fleet_options *o)
{
    static char key[1024];

    snprintf(key, sizeof(key), "%s%s/snapshot", o->prefix ? o->prefix : MCR_FLEET_PREFIX,
             o->pool);
    return key;
}

mcr_snapshot *fe_apply(const mcr_snapshot *snap, const mcr_changes *changes)
{
    mcr_error err = {0};
    mcr_snapshot *out = NULL;
    int rc = mcr_snapshot_apply(snap, changes, &out, &err);

    if (rc != MCR_OK)
        ck_abort_msg("mcr_snapshot_apply: %s", err.message);
    return out;
}

mcr_snapshot *fe_apply_add(const mcr_snapshot *snap, const char *id, int n)
{
    mcr_error err = {0};
    mcr_changes *ch = mcr_changes_new();
    char host[32];
    mcr_snapshot *out;

    snprintf(host, sizeof(host), "10.9.%d.%d", (n / 250) % 250, n % 250 + 1);
    mcr_server_desc d = {.id = id, .host = host, .port = 11211, .weight = 1};
    if (ch == NULL || mcr_changes_add(ch, &d, &err) != MCR_OK)
        ck_abort_msg("mcr_changes_add(%s): %s", id, err.message);
    out = fe_apply(snap, ch);
    mcr_changes_free(ch);
    return out;
}

int fe_has(const mcr_snapshot *snap, const char *id, mcr_server_state *state, uint32_t *weight)
{
    uint32_t i = mcr_snapshot_find(snap, id);
    mcr_server_desc d;

    if (i == MCR_NO_SERVER)
        return 0;
    if (mcr_snapshot_server(snap, (size_t)i, &d) != MCR_OK)
        ck_abort_msg("mcr_snapshot_server(%u) failed", (unsigned)i);
    if (state != NULL)
        *state = d.state;
    if (weight != NULL)
        *weight = d.weight;
    return 1;
}

void fe_assert_has(const mcr_snapshot *snap, const char *id, mcr_server_state state,
                   uint32_t weight)
{
    mcr_server_state st;
    uint32_t w;

    if (!fe_has(snap, id, &st, &w))
        ck_abort_msg("epoch %llu: no server %s", (unsigned long long)mcr_snapshot_epoch(snap), id);
    if (st != state || w != weight)
        ck_abort_msg("server %s: state %d weight %u, not %d and %u", id, (int)st, w, (int)state,
                     weight);
}

/* ------------------------------------------------------------ events */

void fe_rec_init(fe_rec *r)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->thread_ok = 1;
}

void fe_rec_destroy(fe_rec *r)
{
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
}

void fe_rec_start(fe_rec *r, uint64_t epoch)
{
    pthread_mutex_lock(&r->mu);
    r->start_epoch = epoch;
    if (r->nepochs == 0)
        r->last_adopted = epoch;
    pthread_mutex_unlock(&r->mu);
}

void fe_on_event(const mcr_fleet_event *ev, void *arg)
{
    fe_rec *r = arg;
    unsigned k = (unsigned)ev->kind < FE_KINDS ? (unsigned)ev->kind : FE_KINDS - 1;

    pthread_mutex_lock(&r->mu);
    if (!r->have_thread) {
        r->thread = pthread_self();
        r->have_thread = 1;
    } else if (!pthread_equal(r->thread, pthread_self())) {
        r->thread_ok = 0;
    }
    r->count[k]++;
    r->last_status[k] = ev->status;
    snprintf(r->last_msg[k], sizeof(r->last_msg[k]), "%s",
             ev->err != NULL ? ev->err->message : "");
    if (ev->kind == MCR_FLEET_ADOPTED) {
        if (ev->epoch <= r->last_adopted)
            r->not_above++;
        else if (ev->epoch > r->last_adopted + 1)
            r->skips++;
        r->last_adopted = ev->epoch;
        if (r->nepochs < FE_EPOCHS_MAX)
            r->epochs[r->nepochs++] = ev->epoch;
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* pthread_cond_timedwait on CLOCK_MONOTONIC would need a condattr; waits
 * here are short slices re-checked against the monotonic deadline. */
static int fe_wait(fe_rec *r, int (*done)(fe_rec *, uint64_t), uint64_t v, int ms)
{
    int64_t end = mcr_test_now_ms() + ms;
    int ok;

    pthread_mutex_lock(&r->mu);
    while (!(ok = done(r, v)) && mcr_test_now_ms() < end) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&r->cv, &r->mu, &ts);
    }
    pthread_mutex_unlock(&r->mu);
    return ok;
}

static int fe_adopted_done(fe_rec *r, uint64_t epoch)
{
    return r->nepochs > 0 && r->last_adopted >= epoch;
}

int fe_wait_adopted(fe_rec *r, uint64_t epoch, int ms)
{
    return fe_wait(r, fe_adopted_done, epoch, ms);
}

static mcr_fleet_event_kind fe_kind_arg;

static int fe_count_done(fe_rec *r, uint64_t n)
{
    return r->count[fe_kind_arg] >= n;
}

int fe_wait_count(fe_rec *r, mcr_fleet_event_kind kind, size_t n, int ms)
{
    fe_kind_arg = kind; /* the test's thread only */
    return fe_wait(r, fe_count_done, n, ms);
}

size_t fe_count(fe_rec *r, mcr_fleet_event_kind kind)
{
    size_t n;

    pthread_mutex_lock(&r->mu);
    n = r->count[kind];
    pthread_mutex_unlock(&r->mu);
    return n;
}

void fe_last_msg(fe_rec *r, mcr_fleet_event_kind kind, char *buf, size_t cap)
{
    pthread_mutex_lock(&r->mu);
    snprintf(buf, cap, "%s", r->last_msg[kind]);
    pthread_mutex_unlock(&r->mu);
}

void fe_nap(void)
{
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
}

int fe_wait_router_epoch(mcr_router *router, uint64_t epoch, int ms)
{
    int64_t end = mcr_test_now_ms() + ms;

    for (;;) {
        if (mcr_router_epoch(router) == epoch)
            return 1;
        if (mcr_test_now_ms() >= end)
            return 0;
        fe_nap();
    }
}

int fe_client(const mcr_fleet_options *o, const char *id, mcr_fleet_client *c, char *hostbuf,
              size_t cap)
{
    mcr_error err = {0};
    mcr_fleet_client *a = NULL;
    size_t n = 0;
    int found = 0;
    int rc = mcr_fleet_clients(o, &a, &n, &err);

    if (rc != MCR_OK)
        ck_abort_msg("mcr_fleet_clients(%s): %s: %s", o->pool, mcr_strerror(rc), err.message);
    for (size_t i = 0; i < n; i++)
        if (strcmp(a[i].id, id) == 0) {
            found = 1;
            if (c != NULL) {
                *c = a[i];
                c->id = NULL;
                c->host = NULL;
                if (hostbuf != NULL)
                    snprintf(hostbuf, cap, "%s", a[i].host);
            }
        }
    mcr_fleet_clients_free(a, n);
    return found;
}

/* ------------------------------------------------------------ a proxy that loses replies */

#define FE_PROXY_PAIRS 32

struct fe_proxy {
    int lfd, stop[2], port, upstream;
    char drop[64];
    pthread_t thread;
    pthread_mutex_t mu;
    int dropped;
    void (*on_drop)(void *);
    void *on_drop_arg;
    struct {
        int c, u;        /* client and upstream sockets, -1: free */
        int armed;       /* the next reply bytes are dropped */
        char tail[64];   /* the last bytes from the client (a pattern split by reads) */
    } pr[FE_PROXY_PAIRS];
};

static void fe_pair_close(fe_proxy *p, int i)
{
    close(p->pr[i].c);
    close(p->pr[i].u);
    p->pr[i].c = p->pr[i].u = -1;
}

static int fe_write_all(int fd, const char *b, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static void fe_proxy_accept(fe_proxy *p)
{
    struct sockaddr_in sa;
    int c = accept(p->lfd, NULL, NULL), u, i;

    if (c < 0)
        return;
    for (i = 0; i < FE_PROXY_PAIRS && p->pr[i].c >= 0; i++)
        ;
    u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)p->upstream);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (i == FE_PROXY_PAIRS || u < 0 || connect(u, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(c);
        if (u >= 0)
            close(u);
        return;
    }
    p->pr[i].c = c;
    p->pr[i].u = u;
    p->pr[i].armed = 0;
    p->pr[i].tail[0] = '\0';
}

/* Bytes from the client of pair i: passed on, and the pattern looked for
 * in what came before and now. */
static void fe_proxy_from_client(fe_proxy *p, int i)
{
    char b[8192 + 64];
    size_t t = strlen(p->pr[i].tail);
    ssize_t n;

    memcpy(b, p->pr[i].tail, t);
    n = read(p->pr[i].c, b + t, 8192);
    if (n <= 0 || fe_write_all(p->pr[i].u, b + t, (size_t)n) != 0) {
        fe_pair_close(p, i);
        return;
    }
    b[t + (size_t)n] = '\0';
    if (strstr(b, p->drop) != NULL) /* requests are text up to their body */
        p->pr[i].armed = 1;
    size_t keep = t + (size_t)n < sizeof(p->pr[i].tail) - 1 ? t + (size_t)n
                                                            : sizeof(p->pr[i].tail) - 1;
    memcpy(p->pr[i].tail, b + t + (size_t)n - keep, keep);
    p->pr[i].tail[keep] = '\0';
}

static void fe_proxy_from_upstream(fe_proxy *p, int i)
{
    char b[8192];
    ssize_t n = read(p->pr[i].u, b, sizeof(b));

    if (n > 0 && p->pr[i].armed) {
        pthread_mutex_lock(&p->mu);
        p->dropped++;
        void (*fn)(void *) = p->on_drop;
        void *arg = p->on_drop_arg;
        pthread_mutex_unlock(&p->mu);
        if (fn != NULL)
            fn(arg);
        fe_pair_close(p, i);
        return;
    }
    if (n <= 0 || fe_write_all(p->pr[i].c, b, (size_t)n) != 0)
        fe_pair_close(p, i);
}

static void *fe_proxy_run(void *arg)
{
    fe_proxy *p = arg;

    for (;;) {
        struct pollfd pf[2 + 2 * FE_PROXY_PAIRS];
        int who[2 + 2 * FE_PROXY_PAIRS], n = 0;
        pf[n] = (struct pollfd){p->stop[0], POLLIN, 0};
        who[n++] = -1;
        pf[n] = (struct pollfd){p->lfd, POLLIN, 0};
        who[n++] = -2;
        for (int i = 0; i < FE_PROXY_PAIRS; i++)
            if (p->pr[i].c >= 0) {
                pf[n] = (struct pollfd){p->pr[i].c, POLLIN, 0};
                who[n++] = 2 * i;
                pf[n] = (struct pollfd){p->pr[i].u, POLLIN, 0};
                who[n++] = 2 * i + 1;
            }
        if (poll(pf, (nfds_t)n, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pf[0].revents != 0)
            break;
        if (pf[1].revents != 0)
            fe_proxy_accept(p);
        for (int k = 2; k < n; k++) {
            int i = who[k] / 2;
            if (pf[k].revents == 0 || p->pr[i].c < 0)
                continue;
            if (who[k] % 2 == 0)
                fe_proxy_from_client(p, i);
            else
                fe_proxy_from_upstream(p, i);
        }
    }
    for (int i = 0; i < FE_PROXY_PAIRS; i++)
        if (p->pr[i].c >= 0)
            fe_pair_close(p, i);
    return NULL;
}

fe_proxy *fe_proxy_start(int upstream_port, const char *drop)
{
    fe_proxy *p = calloc(1, sizeof(*p));
    int fd = -1;

    if (p == NULL)
        ck_abort_msg("fe_proxy_start: out of memory");
    for (int i = 0; i < FE_PROXY_PAIRS; i++)
        p->pr[i].c = p->pr[i].u = -1;
    snprintf(p->drop, sizeof(p->drop), "%s", drop);
    p->upstream = upstream_port;
    if (rs_reserve_ports("127.0.0.1", 1, &p->port, &fd) != 0 || listen(fd, 64) != 0 ||
        pipe(p->stop) != 0)
        ck_abort_msg("fe_proxy_start: %s", strerror(errno));
    p->lfd = fd;
    pthread_mutex_init(&p->mu, NULL);
    if (pthread_create(&p->thread, NULL, fe_proxy_run, p) != 0)
        ck_abort_msg("fe_proxy_start: cannot start its thread");
    return p;
}

int fe_proxy_port(const fe_proxy *p)
{
    return p->port;
}

int fe_proxy_dropped(fe_proxy *p)
{
    int n;
    pthread_mutex_lock(&p->mu);
    n = p->dropped;
    pthread_mutex_unlock(&p->mu);
    return n;
}

void fe_proxy_on_drop(fe_proxy *p, void (*fn)(void *), void *arg)
{
    pthread_mutex_lock(&p->mu);
    p->on_drop = fn;
    p->on_drop_arg = arg;
    pthread_mutex_unlock(&p->mu);
}

void fe_proxy_stop(fe_proxy *p)
{
    if (p == NULL)
        return;
    if (write(p->stop[1], "x", 1) != 1)
        ck_abort_msg("fe_proxy_stop: %s", strerror(errno));
    pthread_join(p->thread, NULL);
    close(p->lfd);
    close(p->stop[0]);
    close(p->stop[1]);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
