/* SPDX-License-Identifier: BSD-3-Clause */
/* etcdserver.c: real etcd processes for tests, their health and leader over a raw HTTP/1.0 socket, and etcdctl against them. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "etcdserver.h"
#include "realserver.h"
#include "testutil.h"

extern char **environ;

#define ES_ADDR "127.0.0.1"
/* Attempts at starting a cluster when another process took a picked port. */
#define ES_PORT_TRIES 3
/* One HTTP exchange with a member (health, status): at most, and at least
 * when a deadline is near. */
#define ES_HTTP_MS 2000
#define ES_HTTP_MIN_MS 500
/* The longest HTTP reply read, and the longest output of etcdctl kept. */
#define ES_HTTP_CAP 65536
#define ES_OUT_CAP (64u << 20)
/* Arguments of es_ctl after its own flags. */
#define ES_CTL_ARGS 32
/* Bytes of a member's log shown on stderr when it did not come up. */
#define ES_LOG_TAIL 3000
#define ES_PATH 512

typedef struct es_member {
    pid_t pid; /* > 0 while running */
    int client_port, peer_port;
    char name[8];
    char client_url[40], peer_url[40];
    char data_dir[ES_PATH], log[ES_PATH];
} es_member;

struct es_cluster {
    int n;
    char *dir; /* tu_tmpdir() */
    char token[128];
    char initial[ES_MAX_MEMBERS * 56];
    char endpoints[ES_MAX_MEMBERS * 40];
    char heartbeat[16], election[16];
    es_member m[ES_MAX_MEMBERS];
};

/* ---------------------------------------------------------------- errors, time */

static char es_err[4096];

const char *es_last_error(void)
{
    return es_err;
}

static void es_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(es_err, sizeof(es_err), fmt, ap);
    va_end(ap);
    fprintf(stderr, "etcdserver: %s\n", es_err);
    fflush(stderr);
}

/* Append to the string in buf (cap bytes), cut at its end. */
static void es_cat(char *buf, size_t cap, const char *fmt, ...)
{
    size_t len = strlen(buf);
    va_list ap;
    if (len + 1 >= cap)
        return;
    va_start(ap, fmt);
    vsnprintf(buf + len, cap - len, fmt, ap);
    va_end(ap);
}

static void es_sleep_ms(int64_t ms)
{
    struct timespec ts;
    if (ms <= 0)
        return;
    ts.tv_sec = (time_t)(ms / 1000);
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static int es_min_ms(int64_t a, int64_t b)
{
    int64_t m = a < b ? a : b;
    return m < 0 ? 0 : (int)m;
}

const char *es_etcd_path(void)
{
    const char *e = getenv("MCR_ETCD");
    return e != NULL && *e != '\0' ? e : "/usr/bin/etcd";
}

const char *es_etcdctl_path(void)
{
    const char *e = getenv("MCR_ETCDCTL");
    return e != NULL && *e != '\0' ? e : "/usr/bin/etcdctl";
}

/* The last ES_LOG_TAIL bytes of `path` (from a line start) to stderr. */
static void es_log_tail(const char *path)
{
    char buf[ES_LOG_TAIL + 1];
    FILE *f = fopen(path, "r");
    long size;
    size_t got;
    const char *from = buf;

    if (f == NULL) {
        fprintf(stderr, "etcdserver: (no log at %s: %s)\n", path, strerror(errno));
        return;
    }
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, size > ES_LOG_TAIL ? size - ES_LOG_TAIL : 0, SEEK_SET);
    got = fread(buf, 1, ES_LOG_TAIL, f);
    fclose(f);
    buf[got] = '\0';
    if (size > ES_LOG_TAIL && strchr(buf, '\n') != NULL)
        from = strchr(buf, '\n') + 1;
    fprintf(stderr, "etcdserver: the end of %s:\n%s%s", path, got ? from : "(empty)\n",
            got && buf[got - 1] != '\n' ? "\n" : "");
    fflush(stderr);
}

/* true when the log at `path` says a port was taken. */
static bool es_log_says_port_taken(const char *path)
{
    char buf[16384 + 1];
    FILE *f = fopen(path, "r");
    size_t got;
    long size;

    if (f == NULL)
        return false;
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, size > 16384 ? size - 16384 : 0, SEEK_SET);
    got = fread(buf, 1, 16384, f);
    fclose(f);
    buf[got] = '\0';
    return strstr(buf, "address already in use") != NULL;
}

/* ---------------------------------------------------------------- processes */

/* 1 when pid has exited (a zombie, not reaped: WNOWAIT), 2 when it is no
 * child of ours any more (reaped elsewhere), 0 while it runs. */
static int es_exited(pid_t pid)
{
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0)
        return errno == ECHILD ? 2 : 0;
    return si.si_pid == pid ? 1 : 0;
}

/* Reap member m (exited or about to: rs_stop waits, then SIGKILLs) and
 * unregister it from realserver's table. */
static void es_reap(es_member *m)
{
    rs_proc p;
    if (m->pid <= 0)
        return;
    if (es_exited(m->pid) != 2) {
        memset(&p, 0, sizeof(p));
        p.pid = m->pid;
        rs_stop(&p);
    }
    m->pid = 0;
}

/* Send `sig` to the running members (all when only < 0, else member `only`;
 * SIGCONT after it, so that a SIGSTOPped one acts on it), give them grace_ms
 * to exit, SIGKILL the rest, reap all. */
static void es_stop_members(es_cluster *c, int only, int sig, int grace_ms)
{
    int64_t end = mcr_test_now_ms() + grace_ms;
    for (int i = 0; i < c->n; i++)
        if ((only < 0 || i == only) && c->m[i].pid > 0) {
            kill(c->m[i].pid, sig);
            kill(c->m[i].pid, SIGCONT);
        }
    for (int i = 0; i < c->n; i++) {
        es_member *m = &c->m[i];
        if ((only >= 0 && i != only) || m->pid <= 0)
            continue;
        while (es_exited(m->pid) == 0 && mcr_test_now_ms() < end)
            es_sleep_ms(5);
        if (es_exited(m->pid) == 0)
            kill(m->pid, SIGKILL);
        es_reap(m);
    }
}

static int es_spawn_member(es_cluster *c, int i)
{
    es_member *m = &c->m[i];
    char name[32], data[ES_PATH + 16], lc[64], ac[64], lp[64], ap[64], ic[sizeof(c->initial) + 32];
    char tok[sizeof(c->token) + 32], hb[48], et[48];
    char *argv[24];
    int a = 0;
    FILE *log;

    snprintf(name, sizeof(name), "--name=%s", m->name);
    snprintf(data, sizeof(data), "--data-dir=%s", m->data_dir);
    snprintf(lc, sizeof(lc), "--listen-client-urls=%s", m->client_url);
    snprintf(ac, sizeof(ac), "--advertise-client-urls=%s", m->client_url);
    snprintf(lp, sizeof(lp), "--listen-peer-urls=%s", m->peer_url);
    snprintf(ap, sizeof(ap), "--initial-advertise-peer-urls=%s", m->peer_url);
    snprintf(ic, sizeof(ic), "--initial-cluster=%s", c->initial);
    snprintf(tok, sizeof(tok), "--initial-cluster-token=%s", c->token);
    snprintf(hb, sizeof(hb), "--heartbeat-interval=%s", c->heartbeat);
    snprintf(et, sizeof(et), "--election-timeout=%s", c->election);
    argv[a++] = (char *)es_etcd_path();
    argv[a++] = name;
    argv[a++] = data;
    argv[a++] = lc;
    argv[a++] = ac;
    argv[a++] = lp;
    argv[a++] = ap;
    argv[a++] = ic;
    argv[a++] = "--initial-cluster-state=new";
    argv[a++] = tok;
    argv[a++] = hb;
    argv[a++] = et;
    argv[a++] = "--pre-vote=true";
    argv[a++] = "--logger=zap";
    argv[a++] = "--log-outputs=stderr";
    argv[a] = NULL;

    /* A line in the log saying which start this is (restarts append). */
    log = fopen(m->log, "a");
    if (log != NULL) {
        fprintf(log, "--- etcdserver: starting %s:", m->name);
        for (int k = 0; k < a; k++)
            fprintf(log, " %s", argv[k]);
        fprintf(log, "\n");
        fclose(log);
    }
    m->pid = rs_spawn(argv, m->log);
    if (m->pid < 0) {
        m->pid = 0;
        es_fail("%s: could not start member %s (fork failed, or %d processes running); log %s",
                es_etcd_path(), m->name, RS_MAX_PROCS, m->log);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- HTTP */

/* One HTTP/1.0 exchange with 127.0.0.1:port (the server closes the
 * connection after its reply: no chunking). The reply's body, NUL-terminated,
 * in body (cap bytes). Returns the HTTP status, or -1. */
static int es_http(int port, const char *method, const char *path, const char *json, char *body,
                   size_t cap, int timeout_ms)
{
    int64_t end = mcr_test_now_ms() + timeout_ms;
    char req[1024], *buf;
    size_t have = 0, sent = 0, blen = json != NULL ? strlen(json) : 0;
    int fd, n, status = -1;

    body[0] = '\0';
    n = snprintf(req, sizeof(req),
                 "%s %s HTTP/1.0\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                 "Content-Length: %zu\r\n\r\n%s",
                 method, path, ES_ADDR, port, blen, json != NULL ? json : "");
    if (n < 0 || (size_t)n >= sizeof(req))
        return -1;
    buf = malloc(ES_HTTP_CAP);
    if (buf == NULL)
        return -1;
    fd = rs_connect(ES_ADDR, port, timeout_ms);
    if (fd < 0)
        goto out;
    while (sent < (size_t)n) {
        struct pollfd pf = {fd, POLLOUT, 0};
        int left = es_min_ms(end - mcr_test_now_ms(), INT32_MAX);
        if (left <= 0 || poll(&pf, 1, left) < 0)
            goto out;
        ssize_t w = send(fd, req + sent, (size_t)n - sent, MSG_NOSIGNAL);
        if (w < 0 && errno != EINTR && errno != EAGAIN)
            goto out;
        if (w > 0)
            sent += (size_t)w;
    }
    for (;;) {
        struct pollfd pf = {fd, POLLIN, 0};
        int left = es_min_ms(end - mcr_test_now_ms(), INT32_MAX);
        if (left <= 0 || have + 1 >= ES_HTTP_CAP)
            goto out;
        if (poll(&pf, 1, left) <= 0)
            continue;
        ssize_t r = recv(fd, buf + have, ES_HTTP_CAP - 1 - have, 0);
        if (r == 0)
            break;
        if (r < 0 && errno != EINTR && errno != EAGAIN)
            goto out;
        if (r > 0)
            have += (size_t)r;
    }
    buf[have] = '\0';
    const char *hdr_end = strstr(buf, "\r\n\r\n");
    int code;
    if (hdr_end == NULL || sscanf(buf, "HTTP/1.%*d %d", &code) != 1)
        goto out;
    snprintf(body, cap, "%s", hdr_end + 4);
    status = code;
out:
    if (fd >= 0)
        close(fd);
    free(buf);
    return status;
}

/* The timeout of one exchange before `end`: what is left, within
 * [ES_HTTP_MIN_MS, ES_HTTP_MS] (scaled), so that a last try still has time. */
static int es_http_ms(int64_t end)
{
    int t = es_min_ms(end - mcr_test_now_ms(), mcr_test_ms(ES_HTTP_MS));
    return t < mcr_test_ms(ES_HTTP_MIN_MS) ? mcr_test_ms(ES_HTTP_MIN_MS) : t;
}

/* The JSON string value of the first "key":"..." in json, into out; 0, or -1. */
static int es_json_str(const char *json, const char *key, char *out, size_t cap)
{
    char pat[64];
    const char *p, *q;

    snprintf(pat, sizeof(pat), "\"%s\":\"", key);
    p = strstr(json, pat);
    if (p == NULL)
        return -1;
    p += strlen(pat);
    q = strchr(p, '"');
    if (q == NULL || (size_t)(q - p) >= cap)
        return -1;
    memcpy(out, p, (size_t)(q - p));
    out[q - p] = '\0';
    return 0;
}

/* Wait until member i answers GET /health with "health":"true", until `end`.
 * 0, or -1 (es_fail called; the member is left as it is, or pid 0 when it
 * exited). */
static int es_wait_healthy(es_cluster *c, int i, int64_t end)
{
    es_member *m = &c->m[i];
    char body[512] = "";
    int backoff = 10, status = -1;

    if (rs_wait_port(ES_ADDR, m->client_port, m->pid, es_min_ms(end - mcr_test_now_ms(), INT32_MAX)) != 0) {
        if (es_exited(m->pid) != 0) { /* rs_wait_port reaped it, or it exited since */
            es_reap(m);
            es_fail("%s: member %s exited before its client port %d answered (a bad flag, a "
                    "port taken?); log %s",
                    es_etcd_path(), m->name, m->client_port, m->log);
        } else {
            es_fail("%s: member %s: nothing accepts connections on its client port %d after "
                    "%d ms; log %s",
                    es_etcd_path(), m->name, m->client_port, mcr_test_ms(ES_START_MS), m->log);
        }
        return -1;
    }
    for (;;) {
        if (es_exited(m->pid) != 0) {
            es_reap(m);
            es_fail("%s: member %s exited before it was healthy; log %s", es_etcd_path(),
                    m->name, m->log);
            return -1;
        }
        status = es_http(m->client_port, "GET", "/health", NULL, body, sizeof(body),
                         es_http_ms(end));
        if (status == 200 && strstr(body, "\"health\":\"true\"") != NULL)
            return 0;
        if (mcr_test_now_ms() >= end)
            break;
        es_sleep_ms(es_min_ms(end - mcr_test_now_ms(), backoff));
        backoff = backoff * 2 > 200 ? 200 : backoff * 2;
    }
    es_fail("%s: member %s (%s) not healthy after %d ms: GET /health %s%d %s; log %s",
            es_etcd_path(), m->name, m->client_url, mcr_test_ms(ES_START_MS),
            status < 0 ? "failed " : "answered ", status, body, m->log);
    return -1;
}

/* ---------------------------------------------------------------- the cluster */

static int es_token_seq;

static int es_tag_ok(const char *tag)
{
    size_t n = strlen(tag);
    if (n == 0 || n > 32)
        return 0;
    for (size_t k = 0; k < n; k++) {
        char ch = tag[k];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '_'))
            return 0;
    }
    return 1;
}

/* The first ETCD_* variable of the environment etcd would read, or NULL. */
static const char *es_etcd_env(void)
{
    for (char **e = environ; e != NULL && *e != NULL; e++)
        if (strncmp(*e, "ETCD_", 5) == 0 && strncmp(*e, "ETCD_UNSUPPORTED_ARCH=", 22) != 0)
            return *e;
    return NULL;
}

/* Ports, URLs, paths and token of a new cluster of n in c->dir; 0, or -1. */
static int es_layout(es_cluster *c, const char *tag)
{
    int ports[2 * ES_MAX_MEMBERS], fds[2 * ES_MAX_MEMBERS];

    if (rs_reserve_ports(ES_ADDR, 2 * c->n, ports, fds) != 0) {
        es_fail("could not reserve %d free ports on %s: %s", 2 * c->n, ES_ADDR, strerror(errno));
        return -1;
    }
    for (int i = 0; i < c->n; i++) {
        es_member *m = &c->m[i];
        m->client_port = ports[2 * i];
        m->peer_port = ports[2 * i + 1];
        char name[sizeof(m->name)];
        snprintf(name, sizeof(name), "m%d", i % 100);
        memcpy(m->name, name, sizeof(name));
        snprintf(m->client_url, sizeof(m->client_url), "http://%s:%d", ES_ADDR, m->client_port);
        snprintf(m->peer_url, sizeof(m->peer_url), "http://%s:%d", ES_ADDR, m->peer_port);
        if ((size_t)snprintf(m->data_dir, sizeof(m->data_dir), "%s/%s", c->dir, name) >=
                sizeof(m->data_dir) ||
            (size_t)snprintf(m->log, sizeof(m->log), "%s/%s.log", c->dir, name) >=
                sizeof(m->log)) {
            rs_release_ports(2 * c->n, fds);
            es_fail("the temporary directory's path is too long: %s", c->dir);
            return -1;
        }
        es_cat(c->initial, sizeof(c->initial), "%s%s=%s", i ? "," : "", m->name, m->peer_url);
        es_cat(c->endpoints, sizeof(c->endpoints), "%s%s", i ? "," : "", m->client_url);
    }
    snprintf(c->token, sizeof(c->token), "mcr-%s-%ld-%d-%lld", tag, (long)getpid(),
             ++es_token_seq, (long long)mcr_test_now_ns());
    snprintf(c->heartbeat, sizeof(c->heartbeat), "%d", mcr_test_ms(ES_HEARTBEAT_MS));
    /* etcd refuses an election timeout over 50 s */
    int et = mcr_test_ms(ES_ELECTION_MS);
    snprintf(c->election, sizeof(c->election), "%d", et > 50000 ? 50000 : et);
    /* Free the ports just before etcd binds them. */
    rs_release_ports(2 * c->n, fds);
    return 0;
}

static int es_find_leader(es_cluster *c, int timeout_ms, int report);

static void es_destroy(es_cluster *c)
{
    if (c == NULL)
        return;
    es_stop_members(c, -1, SIGKILL, mcr_test_ms(ES_STOP_MS));
    tu_tmpdir_free(c->dir);
    free(c);
}

es_cluster *es_start(int members, const char *tag)
{
    const char *env;
    char dtag[48];

    if (tag == NULL)
        tag = "etcd";
    if (members < 1 || members > ES_MAX_MEMBERS) {
        es_fail("es_start: %d members: 1 to %d are supported", members, ES_MAX_MEMBERS);
        return NULL;
    }
    if (!es_tag_ok(tag)) {
        es_fail("es_start: bad tag \"%.40s\": 1-32 bytes of [A-Za-z0-9_-]", tag);
        return NULL;
    }
    if (!rs_executable(es_etcd_path())) {
        es_fail("etcd is not an executable file at %s (set MCR_ETCD, or install the Debian "
                "package etcd-server)",
                es_etcd_path());
        return NULL;
    }
    if (!rs_executable(es_etcdctl_path())) {
        es_fail("etcdctl is not an executable file at %s (set MCR_ETCDCTL, or install the "
                "Debian package etcd-client)",
                es_etcdctl_path());
        return NULL;
    }
    if ((env = es_etcd_env()) != NULL) {
        es_fail("%s: the environment has %.200s, which etcd would read as a flag: unset it",
                es_etcd_path(), env);
        return NULL;
    }
    snprintf(dtag, sizeof(dtag), "etcd-%s", tag);
    for (int attempt = 1;; attempt++) {
        es_cluster *c = calloc(1, sizeof(*c));
        int bad = -1, taken = 0;
        if (c == NULL) {
            es_fail("es_start: out of memory");
            return NULL;
        }
        c->n = members;
        c->dir = tu_tmpdir(dtag);
        if (es_layout(c, tag) != 0) {
            es_destroy(c);
            return NULL;
        }
        for (int i = 0; i < members && bad < 0; i++)
            if (es_spawn_member(c, i) != 0)
                bad = i;
        int64_t end = mcr_test_now_ms() + mcr_test_ms(ES_START_MS);
        for (int i = 0; i < members && bad < 0; i++)
            if (es_wait_healthy(c, i, end) != 0)
                bad = i;
        if (bad < 0)
            return c;
        for (int i = 0; i < members; i++)
            taken |= es_log_says_port_taken(c->m[i].log);
        if (taken && attempt < ES_PORT_TRIES) {
            fprintf(stderr, "etcdserver: a port was taken by another process: starting the "
                            "cluster again on new ports\n");
            es_destroy(c);
            continue;
        }
        es_log_tail(c->m[bad].log);
        es_destroy(c);
        return NULL;
    }
}

void es_free(es_cluster *c)
{
    int lead;

    if (c == NULL)
        return;
    /* Followers first: a leader given SIGTERM hands its leadership to a
     * connected follower, and waits seconds for one that is exiting too;
     * with none left it exits at once. */
    lead = c->n > 1 ? es_find_leader(c, 0, 0) : -1;
    if (lead >= 0) {
        pid_t keep = c->m[lead].pid;
        c->m[lead].pid = 0;
        es_stop_members(c, -1, SIGTERM, mcr_test_ms(ES_STOP_MS));
        c->m[lead].pid = keep;
    }
    es_stop_members(c, -1, SIGTERM, mcr_test_ms(ES_STOP_MS));
    tu_tmpdir_free(c->dir);
    free(c);
}

int es_size(const es_cluster *c)
{
    return c->n;
}

const char *es_endpoints(const es_cluster *c)
{
    return c->endpoints;
}

const char *es_endpoint(const es_cluster *c, int i)
{
    return i >= 0 && i < c->n ? c->m[i].client_url : NULL;
}

pid_t es_pid(const es_cluster *c, int i)
{
    return i >= 0 && i < c->n ? c->m[i].pid : 0;
}

const char *es_log(const es_cluster *c, int i)
{
    return i >= 0 && i < c->n ? c->m[i].log : NULL;
}

/* es_leader; with report 0, no message when none is found. */
static int es_find_leader(es_cluster *c, int timeout_ms, int report)
{
    int64_t end = mcr_test_now_ms() + timeout_ms;
    int backoff = 10;
    char seen[512] = "";

    for (;;) {
        char lead[32] = "", body[2048];
        int running = 0, agree = 1, cand = -1;
        seen[0] = '\0';
        for (int i = 0; i < c->n; i++) {
            es_member *m = &c->m[i];
            char id[32], l[32] = "";
            if (m->pid <= 0)
                continue;
            running++;
            if (es_http(m->client_port, "POST", "/v3/maintenance/status", "{}", body,
                        sizeof(body), es_http_ms(end)) != 200 ||
                es_json_str(body, "member_id", id, sizeof(id)) != 0) {
                es_cat(seen, sizeof(seen), " %s: no status;", m->name);
                continue;
            }
            es_json_str(body, "leader", l, sizeof(l)); /* absent: no leader */
            es_cat(seen, sizeof(seen), " %s: id %s leader %s;", m->name, id, l[0] ? l : "none");
            if (l[0] == '\0' || (lead[0] != '\0' && strcmp(lead, l) != 0))
                agree = 0;
            else
                snprintf(lead, sizeof(lead), "%s", l);
            if (l[0] != '\0' && strcmp(id, l) == 0)
                cand = i;
        }
        if (running == 0) {
            if (report)
                es_fail("es_leader: no member is running");
            return -1;
        }
        if (agree && cand >= 0)
            return cand;
        if (mcr_test_now_ms() >= end)
            break;
        es_sleep_ms(es_min_ms(end - mcr_test_now_ms(), backoff));
        backoff = backoff * 2 > 100 ? 100 : backoff * 2;
    }
    if (report)
        es_fail("es_leader: no leader all running members agree on within %d ms:%s",
                timeout_ms, seen);
    return -1;
}

int es_leader(es_cluster *c, int timeout_ms)
{
    return es_find_leader(c, timeout_ms, 1);
}

static int es_member_running(const es_cluster *c, int i, const char *what)
{
    if (i < 0 || i >= c->n) {
        es_fail("%s: no member %d (the cluster has %d)", what, i, c->n);
        return 0;
    }
    if (c->m[i].pid <= 0) {
        es_fail("%s: member %s is not running", what, c->m[i].name);
        return 0;
    }
    return 1;
}

int es_kill(es_cluster *c, int i)
{
    if (!es_member_running(c, i, "es_kill"))
        return -1;
    es_stop_members(c, i, SIGKILL, mcr_test_ms(ES_STOP_MS));
    return 0;
}

int es_stop_member(es_cluster *c, int i)
{
    if (!es_member_running(c, i, "es_stop_member"))
        return -1;
    es_stop_members(c, i, SIGTERM, mcr_test_ms(ES_STOP_MS));
    return 0;
}

int es_restart(es_cluster *c, int i)
{
    if (i < 0 || i >= c->n) {
        es_fail("es_restart: no member %d (the cluster has %d)", i, c->n);
        return -1;
    }
    if (c->m[i].pid > 0) {
        es_fail("es_restart: member %s is running (pid %ld)", c->m[i].name, (long)c->m[i].pid);
        return -1;
    }
    if (es_spawn_member(c, i) != 0)
        return -1;
    if (es_wait_healthy(c, i, mcr_test_now_ms() + mcr_test_ms(ES_START_MS)) != 0) {
        if (es_log_says_port_taken(c->m[i].log))
            fprintf(stderr, "etcdserver: another process took port %d or %d of %s\n",
                    c->m[i].client_port, c->m[i].peer_port, c->m[i].name);
        es_log_tail(c->m[i].log);
        es_stop_members(c, i, SIGKILL, mcr_test_ms(ES_STOP_MS));
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- etcdctl */

typedef struct es_out {
    char *p;
    size_t len, cap;
    int oom;
} es_out;

static void es_out_add(es_out *o, const char *s, size_t n)
{
    if (o->oom || n == 0)
        return;
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        while (cap < o->len + n + 1)
            cap *= 2;
        if (cap > ES_OUT_CAP) /* the rest is dropped */
            return;
        char *p = realloc(o->p, cap);
        if (p == NULL) {
            o->oom = 1;
            return;
        }
        o->p = p;
        o->cap = cap;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = '\0';
}

static void es_out_fmt(es_out *o, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n > 0)
        es_out_add(o, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

/* Give the caller its output (or free it). */
static void es_out_give(es_out *o, char **out)
{
    if (o->oom) {
        free(o->p);
        o->p = NULL;
    } else if (o->p == NULL) {
        o->p = calloc(1, 1);
    }
    if (out != NULL)
        *out = o->p;
    else
        free(o->p);
}

/* Run etcdctl --endpoints=eps with args[0..nargs). */
static int es_ctl_run(const char *eps, char **out, const char *const *args, int nargs)
{
    const char *path = es_etcdctl_path();
    int ctl_ms = mcr_test_ms(ES_CTL_MS), rc = -1, st = 0, pfd[2] = {-1, -1};
    int64_t end = mcr_test_now_ms() + 4 * (int64_t)ctl_ms;
    char ep[ES_MAX_MEMBERS * 40 + 16], dial[48], cmd[48];
    const char *argv[ES_CTL_ARGS + 8];
    char **envp = NULL;
    size_t ne = 0, k = 0;
    es_out o = {0};
    pid_t pid, parent = getpid();
    int a = 0;

    if (out != NULL)
        *out = NULL;
    if (!rs_executable(path)) {
        es_out_fmt(&o, "etcdctl is not an executable file at %s (set MCR_ETCDCTL, or install "
                       "the Debian package etcd-client)\n",
                   path);
        goto done;
    }
    snprintf(ep, sizeof(ep), "--endpoints=%s", eps);
    snprintf(dial, sizeof(dial), "--dial-timeout=%dms", ctl_ms);
    snprintf(cmd, sizeof(cmd), "--command-timeout=%dms", ctl_ms);
    argv[a++] = path;
    argv[a++] = ep;
    argv[a++] = dial;
    argv[a++] = cmd;
    for (int j = 0; j < nargs; j++)
        argv[a++] = args[j];
    argv[a] = NULL;
    /* The environment, without ETCDCTL_* (etcdctl's flags), with ETCDCTL_API=3. */
    for (char **e = environ; e != NULL && *e != NULL; e++)
        ne++;
    envp = calloc(ne + 2, sizeof(*envp));
    if (envp == NULL) {
        es_out_fmt(&o, "es_ctl: out of memory\n");
        goto done;
    }
    for (char **e = environ; e != NULL && *e != NULL; e++)
        if (strncmp(*e, "ETCDCTL_", 8) != 0)
            envp[k++] = *e;
    envp[k++] = "ETCDCTL_API=3";
    envp[k] = NULL;
    if (pipe(pfd) != 0) {
        es_out_fmt(&o, "es_ctl: pipe: %s\n", strerror(errno));
        goto done;
    }
    fcntl(pfd[0], F_SETFD, FD_CLOEXEC);
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        es_out_fmt(&o, "es_ctl: fork: %s\n", strerror(errno));
        goto done;
    }
    if (pid == 0) {
        int in = open("/dev/null", O_RDONLY);
#ifdef __linux__
        prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
        if (getppid() != parent || in < 0)
            _exit(127);
        dup2(in, 0);
        dup2(pfd[1], 1);
        dup2(pfd[1], 2);
        rs_close_fds_from(3);
        execve(path, (char *const *)argv, envp);
        _exit(127);
    }
    close(pfd[1]);
    pfd[1] = -1;
    for (;;) {
        char buf[4096];
        struct pollfd pf = {pfd[0], POLLIN, 0};
        int left = es_min_ms(end - mcr_test_now_ms(), INT32_MAX);
        if (left <= 0)
            break;
        if (poll(&pf, 1, left) <= 0)
            continue;
        ssize_t r = read(pfd[0], buf, sizeof(buf));
        if (r == 0)
            break;
        if (r < 0 && errno != EINTR)
            break;
        if (r > 0)
            es_out_add(&o, buf, (size_t)r);
    }
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR) {
            st = -1;
            break;
        }
        if (mcr_test_now_ms() >= end) {
            kill(pid, SIGKILL);
            while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
            }
            es_out_fmt(&o, "es_ctl: etcdctl %s ran past %d ms: killed\n",
                       nargs > 0 ? args[0] : "", 4 * ctl_ms);
            st = -1;
            break;
        }
        es_sleep_ms(2);
    }
    if (st != -1 && WIFEXITED(st))
        rc = WEXITSTATUS(st);
done:
    if (pfd[0] >= 0)
        close(pfd[0]);
    if (pfd[1] >= 0)
        close(pfd[1]);
    free(envp);
    es_out_give(&o, out);
    return rc;
}

/* The variadic arguments after `arg` into args; their count, or -1. */
static int es_collect(const char **args, const char *arg, va_list ap)
{
    int n = 0;
    for (const char *s = arg; s != NULL; s = va_arg(ap, const char *)) {
        if (n == ES_CTL_ARGS)
            return -1;
        args[n++] = s;
    }
    return n;
}

static int es_ctl_args_fail(char **out)
{
    es_out o = {0};
    es_out_fmt(&o, "es_ctl: more than %d arguments\n", ES_CTL_ARGS);
    es_out_give(&o, out);
    return -1;
}

int es_ctl(const es_cluster *c, char **out, const char *arg, ...)
{
    const char *args[ES_CTL_ARGS];
    va_list ap;
    va_start(ap, arg);
    int n = es_collect(args, arg, ap);
    va_end(ap);
    if (n < 0)
        return es_ctl_args_fail(out);
    return es_ctl_run(c->endpoints, out, args, n);
}

int es_ctl_at(const es_cluster *c, int i, char **out, const char *arg, ...)
{
    const char *args[ES_CTL_ARGS];
    va_list ap;
    if (i < 0 || i >= c->n) {
        es_out o = {0};
        es_out_fmt(&o, "es_ctl_at: no member %d (the cluster has %d)\n", i, c->n);
        es_out_give(&o, out);
        return -1;
    }
    va_start(ap, arg);
    int n = es_collect(args, arg, ap);
    va_end(ap);
    if (n < 0)
        return es_ctl_args_fail(out);
    return es_ctl_run(c->m[i].client_url, out, args, n);
}

int es_put(const es_cluster *c, const char *key, const char *value)
{
    char *out = NULL;
    const char *args[] = {"put", "--", key, value};
    int rc = es_ctl_run(c->endpoints, &out, args, 4);
    int ok = rc == 0 && out != NULL && strncmp(out, "OK", 2) == 0;
    if (!ok)
        es_fail("etcdctl put %.100s: exit %d: %.1000s", key, rc, out != NULL ? out : "");
    free(out);
    return ok ? 0 : -1;
}

static int es_b64(char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    return ch == '+' ? 62 : ch == '/' ? 63 : -1;
}

/* Decode the base64 text s[0..n) (padding allowed) into a new string; NULL
 * when it is not base64 or memory ran out. */
static char *es_unbase64(const char *s, size_t n)
{
    char *v = malloc(n / 4 * 3 + 4);
    size_t len = 0;
    unsigned acc = 0;
    int bits = 0;

    if (v == NULL)
        return NULL;
    for (size_t k = 0; k < n && s[k] != '='; k++) {
        int d = es_b64(s[k]);
        if (d < 0) {
            free(v);
            return NULL;
        }
        acc = (acc << 6) | (unsigned)d;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            v[len++] = (char)((acc >> bits) & 0xff);
        }
    }
    v[len] = '\0';
    return v;
}

static char *es_get_via(const char *eps, const char *key)
{
    char *out = NULL, *v = NULL;
    const char *args[] = {"get", "-w", "json", "--", key};
    int rc = es_ctl_run(eps, &out, args, 5);
    const char *kvs, *p, *q;

    if (rc != 0 || out == NULL || strstr(out, "\"header\"") == NULL) {
        es_fail("etcdctl get %.100s (%s): exit %d: %.1000s", key, eps, rc,
                out != NULL ? out : "");
        free(out);
        return NULL;
    }
    kvs = strstr(out, "\"kvs\":[");
    if (kvs == NULL) {
        snprintf(es_err, sizeof(es_err), "etcdctl get %.100s: no such key", key);
        free(out);
        return NULL;
    }
    p = strstr(kvs, "\"value\":\"");
    if (p == NULL) { /* an empty value is left out of etcdctl's JSON */
        free(out);
        return calloc(1, 1);
    }
    p += 9;
    q = strchr(p, '"');
    if (q != NULL)
        v = es_unbase64(p, (size_t)(q - p));
    if (v == NULL)
        es_fail("etcdctl get %.100s: a value that is not base64: %.1000s", key, out);
    free(out);
    return v;
}

char *es_get(const es_cluster *c, const char *key)
{
    return es_get_via(c->endpoints, key);
}

char *es_get_at(const es_cluster *c, int i, const char *key)
{
    if (i < 0 || i >= c->n) {
        es_fail("es_get_at: no member %d (the cluster has %d)", i, c->n);
        return NULL;
    }
    return es_get_via(c->m[i].client_url, key);
}

long long es_revision(const es_cluster *c)
{
    char *out = NULL;
    const char *args[] = {"get", "-w", "json", "--", "es/revision-probe"};
    int rc = es_ctl_run(c->endpoints, &out, args, 5);
    const char *p = out != NULL ? strstr(out, "\"revision\":") : NULL;
    long long rev = -1;

    if (rc == 0 && p != NULL) {
        char *e;
        rev = strtoll(p + 11, &e, 10);
        if (e == p + 11 || rev < 1)
            rev = -1;
    }
    if (rev < 0)
        es_fail("es_revision: etcdctl get: exit %d: %.1000s", rc, out != NULL ? out : "");
    free(out);
    return rev;
}
