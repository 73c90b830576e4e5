/* SPDX-License-Identifier: BSD-3-Clause */
/* fleet_etcd.c: bench_fleet's etcd: one member started on ports the kernel picked and stopped by its pid, HTTP/1.0 calls to it, its count of calls and its CPU time. */
/* nftw() is XSI; _XOPEN_SOURCE 700 includes POSIX.1-2008. */
#undef _POSIX_C_SOURCE
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "benchutil.h"
#include "fleet_etcd.h"

#define ADDR FE_ADDR
#define START_TRIES 3
#define START_MS 30000
#define HTTP_MS 5000

#define FAIL(...)                                                                                \
    do {                                                                                         \
        printf("FAIL " __VA_ARGS__);                                                             \
        printf("\n");                                                                            \
        fflush(stdout);                                                                          \
        (*e->failures)++;                                                                        \
    } while (0)


/* rs_connect() with the socket made blocking (reads wait, writes complete). */
int fe_connect(const fe_etcd *e)
{
    int fd = rs_connect(ADDR, e->client_port, HTTP_MS);
    int fl = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
    if (fl >= 0 && fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* One HTTP/1.0 exchange with etcd, read to the end (each read waits at
 * most HTTP_MS): the status (0: no reply), the body in *out (malloc'd). */
int fe_http(const fe_etcd *e, const char *method, const char *path, char **out)
{
    int fd = fe_connect(e), status = 0;
    struct timeval tv = {HTTP_MS / 1000, 0};
    char head[256];
    int hl = snprintf(head, sizeof head, "%s %s HTTP/1.0\r\nHost: %s:%d\r\n\r\n", method, path,
                      ADDR, e->client_port);
    size_t cap = 65536, len = 0;
    char *buf = bench_xmalloc(cap), *sep;
    *out = NULL;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
        write(fd, head, (size_t)hl) != hl)
        len = cap; /* nothing to read */
    for (ssize_t r = 1; r > 0 && len < cap;) {
        if (len + 4096 >= cap && (buf = realloc(buf, cap *= 2)) == NULL)
            abort();
        if ((r = read(fd, buf + len, cap - len - 1)) > 0)
            len += (size_t)r;
        else if (r < 0 && errno == EINTR)
            r = 1;
        else if (r < 0)
            len = cap; /* timed out or failed */
    }
    if (fd >= 0)
        close(fd);
    if (len < cap && (buf[len] = '\0', sep = strstr(buf, "\r\n\r\n")) != NULL &&
        sscanf(buf, "HTTP/%*d.%*d %d", &status) == 1) {
        memmove(buf, sep + 4, len - (size_t)(sep + 4 - buf) + 1);
        *out = buf;
        return status;
    }
    free(buf);
    return 0;
}

static bool healthy(const fe_etcd *e)
{
    char *b = NULL;
    int st = fe_http(e, "GET", "/health", &b);
    bool ok = st == 200 && b != NULL && strstr(b, "\"health\":\"true\"") != NULL;
    free(b);
    return ok;
}

bool fe_start(fe_etcd *e, int *failures)
{
    memset(e, 0, sizeof *e);
    e->failures = failures;
    const char *bin = getenv("MCR_ETCD") ? getenv("MCR_ETCD") : "/usr/bin/etcd";
    extern char **environ;
    for (char **v = environ; *v; v++)
        if (strncmp(*v, "ETCD_", 5) == 0) {
            FAIL("setup: %.*s is set in the environment (etcd would read it as a flag); unset it",
                 (int)strcspn(*v, "="), *v);
            return false;
        }
    if (!rs_executable(bin)) {
        printf("FAIL setup: etcd (%s) is not installed or not executable (set MCR_ETCD)\n", bin);
        exit(77);
    }
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(e->dir, sizeof e->dir, "%s/bench_fleet.XXXXXX", tmp);
    if (mkdtemp(e->dir) == NULL) {
        FAIL("setup: mkdtemp %s: %s", e->dir, strerror(errno));
        return false;
    }
    snprintf(e->log, sizeof e->log, "%s/etcd.log", e->dir);
    for (int attempt = 0; attempt < START_TRIES; attempt++) {
        int ports[2], fds[2];
        if (rs_reserve_ports(ADDR, 2, ports, fds) != 0) {
            FAIL("setup: cannot reserve two ports on %s", ADDR);
            return false;
        }
        char data[300], curl[64], purl[64], cluster[96], token[64];
        snprintf(data, sizeof data, "%s/data%d", e->dir, attempt);
        snprintf(curl, sizeof curl, "http://%s:%d", ADDR, ports[0]);
        snprintf(purl, sizeof purl, "http://%s:%d", ADDR, ports[1]);
        snprintf(cluster, sizeof cluster, "bench=%s", purl);
        snprintf(token, sizeof token, "bench-fleet-%ld-%" PRIu64, (long)getpid(), bench_now_ns());
        char *argv[] = {(char *)bin, "--name", "bench", "--data-dir", data,
                        "--listen-client-urls", curl, "--advertise-client-urls", curl,
                        "--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
                        "--initial-cluster", cluster, "--initial-cluster-token", token,
                        "--initial-cluster-state", "new", "--logger", "zap",
                        "--log-outputs", "stderr", NULL};
        rs_release_ports(2, fds);
        pid_t pid = rs_spawn(argv, e->log);
        if (pid < 0) {
            FAIL("setup: cannot start %s", bin);
            return false;
        }
        e->proc.pid = pid;
        snprintf(e->proc.addr, sizeof e->proc.addr, "%s", ADDR);
        e->proc.port = e->client_port = ports[0];
        snprintf(e->endpoint, sizeof e->endpoint, "%s", curl);
        if (rs_wait_port(ADDR, ports[0], pid, START_MS) == 0) {
            uint64_t end = bench_now_ns() + (uint64_t)START_MS * 1000000u;
            while (!healthy(e) && bench_now_ns() < end)
                bench_sleep_ms(20);
            if (healthy(e))
                return true;
            rs_stop(&e->proc);
            break;
        }
        e->proc.pid = 0; /* it exited (a port taken meanwhile?): new ports */
    }
    FAIL("setup: etcd %s did not become healthy on %s in %d ms: see its log %s", bin,
         e->endpoint, START_MS, e->log);
    return false;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    if (remove(path) != 0)
        fprintf(stderr, "bench_fleet: remove %s: %s\n", path, strerror(errno));
    return 0;
}

void fe_stop(fe_etcd *e, bool keep)
{
    if (e->proc.pid > 0)
        rs_stop(&e->proc);
    if (e->dir[0] == '\0')
        return;
    if (keep || *e->failures)
        printf("INFO kept %s (etcd log: %s)\n", e->dir, e->log);
    else
        nftw(e->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *const fe_call_names[FE_M_N] = {"Range",      "Txn",         "Put",
                                          "DeleteRange", "Watch",      "LeaseGrant",
                                          "LeaseKeepAlive", "LeaseRevoke", "other"};

bool fe_calls(const fe_etcd *e, fe_call_counts *c)
{
    char *b = NULL;
    memset(c, 0, sizeof *c);
    if (fe_http(e, "GET", "/metrics", &b) != 200 || b == NULL) {
        free(b);
        FAIL("etcd: GET /metrics failed");
        return false;
    }
    static const char key[] = "grpc_server_started_total{";
    for (char *line = b; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, key, sizeof key - 1) != 0)
            continue;
        char *m = strstr(line, "grpc_method=\""), *svc = strstr(line, "grpc_service=\"");
        char *val = strchr(line, '}');
        if (m == NULL || svc == NULL || val == NULL || strncmp(svc + 14, "etcdserverpb.", 13) != 0)
            continue;
        m += 13;
        double v = strtod(val + 1, NULL);
        int k = FE_M_OTHER;
        for (int i = 0; i < FE_M_OTHER; i++)
            if (strncmp(m, fe_call_names[i], strlen(fe_call_names[i])) == 0 && m[strlen(fe_call_names[i])] == '"')
                k = i;
        c->n[k] += v;
        c->total += v;
    }
    free(b);
    return true;
}

/* CPU time so far (ms): etcd's (/proc/PID/stat utime + stime) and this
 * process's (every follower, raw watcher and the writer). */
void fe_cpu_marks(const fe_etcd *e, double out[2])
{
    char path[64], buf[1024] = "";
    unsigned long ut = 0, st = 0;
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)e->proc.pid);
    FILE *f = fopen(path, "r");
    if (f != NULL && fgets(buf, sizeof buf, f) != NULL && strrchr(buf, ')') != NULL)
        sscanf(strrchr(buf, ')') + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
               &st);
    if (f != NULL)
        fclose(f);
    out[0] = (double)(ut + st) * 1000.0 / (double)sysconf(_SC_CLK_TCK);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    out[1] = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
             (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}
