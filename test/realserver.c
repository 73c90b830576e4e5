/* SPDX-License-Identifier: BSD-3-Clause */
/* realserver.c: real memcached and nutcracker processes for tests, and memcached's text protocol. */
#define _DEFAULT_SOURCE /* syscall (close_range) */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "realserver.h"

/* Attempts at starting a server on a freshly picked port. */
#define RS_PORT_TRIES 5
/* Keys per multi-key get, and the longest get line we build. */
#define RS_GET_KEYS 40
#define RS_GET_LINE 2000

/* ---------------------------------------------------------------- registry */

static pid_t rs_pids[RS_MAX_PROCS];
static pid_t rs_owner; /* the process that started them */
static int rs_atexit_done;

static void rs_unregister(pid_t pid)
{
    for (int i = 0; i < RS_MAX_PROCS; i++)
        if (rs_pids[i] == pid)
            rs_pids[i] = 0;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Kill and reap one pid. SIGKILL at once: nothing of a test server's is
 * kept past its stop, and memcached acts on SIGTERM only at its next clock
 * tick (once a second), which made every stop a wait of up to a second. */
static void rs_kill(pid_t pid)
{
    int st;

    if (pid <= 0)
        return;
    if (kill(pid, SIGKILL) != 0 && errno == ESRCH) {
        waitpid(pid, &st, WNOHANG);
        return;
    }
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
}

void rs_stop_all(void)
{
    if (rs_owner != getpid())
        return;
    for (int i = 0; i < RS_MAX_PROCS; i++)
        if (rs_pids[i] > 0) {
            pid_t pid = rs_pids[i];
            rs_pids[i] = 0;
            rs_kill(pid);
        }
}

void rs_stop(rs_proc *p)
{
    if (p == NULL || p->pid <= 0)
        return;
    rs_kill(p->pid);
    rs_unregister(p->pid);
    p->pid = 0;
}

/* ---------------------------------------------------------------- processes */

const char *rs_memcached_path(void)
{
    const char *e = getenv("MCR_MEMCACHED");
    return e != NULL && *e != '\0' ? e : "/usr/bin/memcached";
}

const char *rs_nutcracker_path(void)
{
    const char *e = getenv("MCR_NUTCRACKER");
    return e != NULL && *e != '\0' ? e : "/usr/sbin/nutcracker";
}

bool rs_executable(const char *path)
{
    struct stat st;
    return path != NULL && stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
           access(path, X_OK) == 0;
}

static int v4(const char *addr, int port, struct sockaddr_in *sa)
{
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons((unsigned short)port);
    return inet_pton(AF_INET, addr, &sa->sin_addr) == 1 ? 0 : -1;
}

int rs_port_free(const char *addr, int port)
{
    struct sockaddr_in sa;
    int fd, ok;

    if (v4(addr, port, &sa) != 0)
        return -1;
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    /* No SO_REUSEADDR: a listener, or a socket still in use, makes it busy. */
    ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(fd, 1) == 0;
    close(fd);
    return ok ? 1 : 0;
}

int rs_reserve_ports(const char *addr, int n, int *ports, int *fds)
{
    for (int i = 0; i < n; i++) {
        struct sockaddr_in sa;
        socklen_t sl = sizeof(sa);
        if (v4(addr, 0, &sa) != 0) {
            rs_release_ports(i, fds);
            return -1;
        }
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fds[i] < 0 || bind(fds[i], (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
            getsockname(fds[i], (struct sockaddr *)&sa, &sl) != 0) {
            if (fds[i] >= 0)
                close(fds[i]);
            rs_release_ports(i, fds);
            return -1;
        }
        ports[i] = ntohs(sa.sin_port);
    }
    return 0;
}

void rs_release_ports(int n, int *fds)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
}

void rs_close_fds_from(int first)
{
#ifdef SYS_close_range
    /* One call (Linux 5.9): the loop below is 65,000 close() calls, which
     * valgrind, tracing the child until its exec, makes slow. */
    if (syscall(SYS_close_range, (unsigned)first, ~0u, 0u) == 0)
        return;
#endif
    long maxfd = sysconf(_SC_OPEN_MAX);
    if (maxfd < 0 || maxfd > 65536)
        maxfd = 65536;
    for (long fd = first; fd < maxfd; fd++)
        close((int)fd);
}

pid_t rs_spawn(char *const argv[], const char *log)
{
    int slot = -1;
    pid_t parent = getpid(), pid;

    for (int i = 0; i < RS_MAX_PROCS && slot < 0; i++)
        if (rs_pids[i] <= 0)
            slot = i;
    if (slot < 0)
        return -1;
    if (rs_owner != parent) {
        /* First spawn in this process (or in a forked child that inherited
         * another owner's table): start afresh. */
        memset(rs_pids, 0, sizeof(rs_pids));
        rs_owner = parent;
    }
    if (!rs_atexit_done) {
        atexit(rs_stop_all);
        rs_atexit_done = 1;
    }
    fflush(NULL);
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int in = open("/dev/null", O_RDONLY);
        int out = open(log != NULL ? log : "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0644);
#ifdef __linux__
        prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
        if (getppid() != parent) /* the parent died before prctl */
            _exit(127);
        if (in < 0 || out < 0)
            _exit(127);
        dup2(in, 0);
        dup2(out, 1);
        dup2(out, 2);
        rs_close_fds_from(3);
        execv(argv[0], argv);
        _exit(127);
    }
    rs_pids[slot] = pid;
    return pid;
}

int rs_wait_port(const char *addr, int port, pid_t pid, int timeout_ms)
{
    long long end = now_ms() + timeout_ms;

    for (;;) {
        int st;
        if (pid > 0 && waitpid(pid, &st, WNOHANG) == pid) {
            rs_unregister(pid);
            return -1;
        }
        long long left = end - now_ms();
        if (left <= 0)
            return -1;
        int fd = rs_connect(addr, port, left < 200 ? (int)left : 200);
        if (fd >= 0) {
            close(fd);
            return 0;
        }
        sleep_ms(10);
    }
}

static const char *current_user(void)
{
    struct passwd *pw = getpwuid(geteuid());
    return pw != NULL ? pw->pw_name : "root";
}

int rs_memcached_start(rs_proc *p, const char *addr, int port, const char *log,
                       int timeout_ms)
{
    return rs_memcached_start_opts(p, addr, port, NULL, log, timeout_ms);
}

int rs_memcached_start_opts(rs_proc *p, const char *addr, int port, const char *const *extra,
                            const char *log, int timeout_ms)
{
    memset(p, 0, sizeof(*p));
    for (int attempt = 0; attempt < RS_PORT_TRIES; attempt++) {
        int use = port, fd = -1;
        char ports[16];
        if (use == 0 && rs_reserve_ports(addr, 1, &use, &fd) != 0)
            return -1;
        rs_release_ports(1, &fd);
        snprintf(ports, sizeof(ports), "%d", use);
        char *argv[32];
        int a = 0;
        argv[a++] = (char *)rs_memcached_path();
        argv[a++] = "-l";
        argv[a++] = (char *)addr;
        argv[a++] = "-p";
        argv[a++] = ports;
        argv[a++] = "-U";
        argv[a++] = "0";
        argv[a++] = "-t";
        argv[a++] = "1";
        argv[a++] = "-m";
        argv[a++] = "64";
        argv[a++] = "-c";
        argv[a++] = "1024";
        if (geteuid() == 0) {
            argv[a++] = "-u";
            argv[a++] = (char *)current_user();
        }
        for (int i = 0; extra != NULL && extra[i] != NULL && a < 31; i++)
            argv[a++] = (char *)extra[i];
        argv[a] = NULL;
        pid_t pid = rs_spawn(argv, log);
        if (pid < 0)
            return -1;
        if (rs_wait_port(addr, use, pid, timeout_ms) == 0) {
            p->pid = pid;
            snprintf(p->addr, sizeof(p->addr), "%s", addr);
            p->port = use;
            return 0;
        }
        rs_kill(pid);
        rs_unregister(pid);
        if (port != 0) /* a fixed port: the caller picks another address */
            return -1;
    }
    return -1;
}

int rs_nutcracker_start(rs_proc *p, const char *conf, const char *log, const char *pidfile,
                        int stats_port, const char *addr, int port, int timeout_ms)
{
    char sp[16];
    char *argv[16];
    int a = 0;

    memset(p, 0, sizeof(*p));
    snprintf(sp, sizeof(sp), "%d", stats_port);
    argv[a++] = (char *)rs_nutcracker_path();
    argv[a++] = "-c";
    argv[a++] = (char *)conf;
    argv[a++] = "-o";
    argv[a++] = (char *)log;
    argv[a++] = "-p";
    argv[a++] = (char *)pidfile;
    argv[a++] = "-s";
    argv[a++] = sp;
    argv[a++] = "-a";
    argv[a++] = "127.0.0.1";
    argv[a] = NULL;
    pid_t pid = rs_spawn(argv, NULL);
    if (pid < 0)
        return -1;
    if (rs_wait_port(addr, port, pid, timeout_ms) != 0) {
        rs_kill(pid);
        rs_unregister(pid);
        return -1;
    }
    p->pid = pid;
    snprintf(p->addr, sizeof(p->addr), "%s", addr);
    p->port = port;
    return 0;
}

static int rs_run_wait(char *const argv[], int timeout_ms, const char *log);

int rs_run(char *const argv[], int timeout_ms)
{
    return rs_run_log(argv, timeout_ms, NULL, NULL);
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t n = 0, cap = 0;
    if (f == NULL)
        return NULL;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            char *b = realloc(buf, cap = cap * 2 + 8192);
            if (b == NULL) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = b;
        }
        size_t k = fread(buf + n, 1, 4096, f);
        n += k;
        if (k == 0)
            break;
    }
    fclose(f);
    buf[n] = '\0';
    return buf;
}

int rs_run_log(char *const argv[], int timeout_ms, const char *log, char **out)
{
    int rc = rs_run_wait(argv, timeout_ms, log);
    if (out != NULL)
        *out = log != NULL ? read_all(log) : NULL;
    return rc;
}

static int rs_run_wait(char *const argv[], int timeout_ms, const char *log)
{
    pid_t pid = rs_spawn(argv, log);
    long long end = now_ms() + timeout_ms;
    int st;

    if (pid < 0)
        return -1;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            rs_unregister(pid);
            return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        }
        if (r < 0 || now_ms() >= end) {
            rs_kill(pid);
            rs_unregister(pid);
            return -1;
        }
        sleep_ms(2);
    }
}

/* ---------------------------------------------------------------- client */

static int fail(char *err, size_t cap, const char *fmt, ...)
{
    if (err != NULL && cap > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int rs_connect(const char *addr, int port, int timeout_ms)
{
    struct sockaddr_in sa;
    struct pollfd pf;
    int fd, one = 1, soerr = 0;
    socklen_t sl = sizeof(soerr);

    if (v4(addr, port, &sa) != 0)
        return -1;
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        if (errno != EINPROGRESS) {
            close(fd);
            return -1;
        }
        pf.fd = fd;
        pf.events = POLLOUT;
        if (poll(&pf, 1, timeout_ms) != 1 ||
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0) {
            close(fd);
            return -1;
        }
    }
    return fd;
}

/* A reply parser: consumes complete replies from buf[0..len), sets *used;
 * returns 1 when every expected reply has arrived, 0 for more, -1 on a
 * wrong reply (with err filled). */
typedef int (*rs_parser)(void *ctx, const char *buf, size_t len, size_t *used, char *err,
                         size_t cap);

/* Write out[0..outlen) while reading and parsing replies, until the parser
 * is done, at most timeout_ms. */
static int pipeline(int fd, const char *out, size_t outlen, rs_parser parse, void *ctx,
                    int timeout_ms, char *err, size_t cap)
{
    long long end = now_ms() + timeout_ms;
    size_t sent = 0, have = 0, bcap = 65536;
    char *buf = malloc(bcap);
    int rc = -1;

    if (buf == NULL)
        return fail(err, cap, "out of memory");
    for (;;) {
        struct pollfd pf = {fd, POLLIN | (sent < outlen ? POLLOUT : 0), 0};
        long long left = end - now_ms();
        if (left <= 0) {
            fail(err, cap, "timeout after %d ms (%zu of %zu bytes sent)", timeout_ms, sent,
                 outlen);
            break;
        }
        int n = poll(&pf, 1, (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fail(err, cap, "poll: %s", strerror(errno));
            break;
        }
        if (n == 0)
            continue;
        if ((pf.revents & POLLOUT) && sent < outlen) {
            ssize_t w = send(fd, out + sent, outlen - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                fail(err, cap, "send: %s", strerror(errno));
                break;
            }
            if (w > 0)
                sent += (size_t)w;
        }
        if (pf.revents & (POLLIN | POLLHUP | POLLERR)) {
            if (have == bcap) {
                char *nb = realloc(buf, bcap * 2);
                if (nb == NULL) {
                    fail(err, cap, "out of memory");
                    break;
                }
                buf = nb;
                bcap *= 2;
            }
            ssize_t r = recv(fd, buf + have, bcap - have, MSG_DONTWAIT);
            if (r == 0) {
                fail(err, cap, "connection closed by the server");
                break;
            }
            if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                fail(err, cap, "recv: %s", strerror(errno));
                break;
            }
            if (r > 0) {
                size_t used = 0;
                have += (size_t)r;
                int pr = parse(ctx, buf, have, &used, err, cap);
                memmove(buf, buf + used, have - used);
                have -= used;
                if (pr < 0)
                    break;
                if (pr > 0) {
                    rc = sent == outlen ? 0 : fail(err, cap, "replies before the requests");
                    break;
                }
            }
        }
    }
    free(buf);
    return rc;
}

/* Append to a growing buffer; -1 when out of memory. */
typedef struct rs_buf {
    char *p;
    size_t len, cap;
} rs_buf;

static int put(rs_buf *b, const void *s, size_t n)
{
    if (b->len + n > b->cap) {
        size_t nc = b->cap ? b->cap : 4096;
        while (nc < b->len + n)
            nc *= 2;
        char *np = realloc(b->p, nc);
        if (np == NULL)
            return -1;
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}

/* One line ending in "\r\n" at buf: its length without them, or -1. */
static long line_len(const char *buf, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++)
        if (buf[i] == '\r' && buf[i + 1] == '\n')
            return (long)i;
    return -1;
}

typedef struct set_ctx {
    size_t expect, got;
} set_ctx;

static int parse_stored(void *ctx, const char *buf, size_t len, size_t *used, char *err,
                        size_t cap)
{
    set_ctx *c = ctx;
    size_t off = 0;
    long l;

    while (c->got < c->expect && (l = line_len(buf + off, len - off)) >= 0) {
        if (l != 6 || memcmp(buf + off, "STORED", 6) != 0) {
            *used = off;
            return fail(err, cap, "reply %zu to a set: \"%.*s\"", c->got, (int)(l > 80 ? 80 : l),
                        buf + off);
        }
        off += (size_t)l + 2;
        c->got++;
    }
    *used = off;
    return c->got == c->expect ? 1 : 0;
}

int rs_mc_set_many(int fd, const char *const *keys, const size_t *lens, size_t n,
                   const char *value, int timeout_ms, char *err, size_t cap)
{
    rs_buf b = {0};
    set_ctx c = {n, 0};
    size_t vlen = strlen(value);
    int rc;

    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char hdr[32];
        int hl = snprintf(hdr, sizeof(hdr), " 0 0 %zu\r\n", vlen);
        if (put(&b, "set ", 4) || put(&b, keys[i], lens[i]) || put(&b, hdr, (size_t)hl) ||
            put(&b, value, vlen) || put(&b, "\r\n", 2)) {
            free(b.p);
            return fail(err, cap, "out of memory");
        }
    }
    rc = pipeline(fd, b.p, b.len, parse_stored, &c, timeout_ms, err, cap);
    free(b.p);
    return rc;
}

typedef struct get_ctx {
    const char *const *keys;
    const size_t *lens;
    size_t n;
    size_t cursor;       /* keys before it cannot be hits any more */
    unsigned char *hit;
    size_t ends_expected, ends; /* one END per get command */
} get_ctx;

static int parse_values(void *ctx, const char *buf, size_t len, size_t *used, char *err,
                        size_t cap)
{
    get_ctx *c = ctx;
    size_t off = 0;
    long l;

    *used = 0;
    while (c->ends < c->ends_expected && (l = line_len(buf + off, len - off)) >= 0) {
        const char *line = buf + off;
        if (l == 3 && memcmp(line, "END", 3) == 0) {
            off += 5;
            c->ends++;
            *used = off;
            continue;
        }
        if (l < 6 || memcmp(line, "VALUE ", 6) != 0)
            return fail(err, cap, "reply to a get: \"%.*s\"", (int)(l > 80 ? 80 : l), line);
        /* VALUE <key> <flags> <bytes> */
        const char *k = line + 6, *e = line + l;
        const char *ks = memchr(k, ' ', (size_t)(e - k));
        if (ks == NULL)
            return fail(err, cap, "malformed VALUE line");
        const char *fs = memchr(ks + 1, ' ', (size_t)(e - ks - 1));
        if (fs == NULL)
            return fail(err, cap, "malformed VALUE line");
        size_t bytes = 0;
        for (const char *d = fs + 1; d < e; d++) {
            if (*d < '0' || *d > '9')
                return fail(err, cap, "malformed VALUE line");
            bytes = bytes * 10 + (size_t)(*d - '0');
        }
        size_t whole = (size_t)l + 2 + bytes + 2;
        if (len - off < whole)
            break; /* the data is not all here yet */
        size_t klen = (size_t)(ks - k), j = c->cursor;
        while (j < c->n && !(c->lens[j] == klen && memcmp(c->keys[j], k, klen) == 0))
            j++;
        if (j == c->n)
            return fail(err, cap, "a value for a key not asked for: \"%.*s\"",
                        (int)(klen > 80 ? 80 : klen), k);
        c->hit[j] = 1;
        c->cursor = j + 1;
        off += whole;
        *used = off;
    }
    return c->ends == c->ends_expected ? 1 : 0;
}

int rs_mc_hits(int fd, const char *const *keys, const size_t *lens, size_t n,
               unsigned char *hit, int timeout_ms, char *err, size_t cap)
{
    rs_buf b = {0};
    get_ctx c = {keys, lens, n, 0, hit, 0, 0};
    size_t i = 0;
    int rc;

    memset(hit, 0, n);
    while (i < n) {
        size_t line = 3, k = 0;
        if (put(&b, "get", 3))
            goto nomem;
        while (i < n && k < RS_GET_KEYS && (k == 0 || line + 1 + lens[i] <= RS_GET_LINE)) {
            if (put(&b, " ", 1) || put(&b, keys[i], lens[i]))
                goto nomem;
            line += 1 + lens[i];
            i++;
            k++;
        }
        if (put(&b, "\r\n", 2))
            goto nomem;
        c.ends_expected++;
    }
    if (n == 0)
        return 0;
    rc = pipeline(fd, b.p, b.len, parse_values, &c, timeout_ms, err, cap);
    free(b.p);
    return rc;
nomem:
    free(b.p);
    return fail(err, cap, "out of memory");
}

typedef struct line_ctx {
    char *reply;
    size_t cap;
} line_ctx;

static int parse_line(void *ctx, const char *buf, size_t len, size_t *used, char *err,
                      size_t cap)
{
    line_ctx *c = ctx;
    long l = line_len(buf, len);
    (void)err;
    (void)cap;
    if (l < 0) {
        *used = 0;
        return 0;
    }
    snprintf(c->reply, c->cap, "%.*s", (int)l, buf);
    *used = (size_t)l + 2;
    return 1;
}

int rs_mc_command(int fd, const char *line, char *reply, size_t cap, int timeout_ms)
{
    rs_buf b = {0};
    line_ctx c = {reply, cap};
    int rc;

    if (put(&b, line, strlen(line)) || put(&b, "\r\n", 2)) {
        free(b.p);
        return -1;
    }
    rc = pipeline(fd, b.p, b.len, parse_line, &c, timeout_ms, NULL, 0);
    free(b.p);
    return rc;
}

/* ---------------------------------------------------------------- the raw client of the pool suites */

/* Send `req` and read until the reply ends with `end` (or is one line when
 * end is NULL). The reply, NUL-terminated, in buf. 0, or -1. */
static int raw_exchange(int fd, const char *req, size_t req_len, const char *end, char *buf,
                        size_t cap, int timeout_ms)
{
    long long deadline = now_ms() + timeout_ms;
    size_t have = 0, sent = 0;

    while (sent < req_len) {
        ssize_t w = send(fd, req + sent, req_len - sent, MSG_NOSIGNAL);
        if (w < 0 && errno != EINTR && errno != EAGAIN)
            return -1;
        if (w > 0)
            sent += (size_t)w;
    }
    for (;;) {
        buf[have] = '\0';
        if (end != NULL) {
            size_t el = strlen(end);
            if (have >= el && memcmp(buf + have - el, end, el) == 0 &&
                (have == el || buf[have - el - 1] == '\n'))
                return 0;
            /* errors end a reply too */
            if (have >= 2 && buf[have - 1] == '\n' &&
                (strncmp(buf, "ERROR", 5) == 0 || strncmp(buf, "CLIENT_ERROR", 12) == 0 ||
                 strncmp(buf, "SERVER_ERROR", 12) == 0))
                return 0;
        } else if (have >= 2 && buf[have - 2] == '\r' && buf[have - 1] == '\n') {
            return 0;
        }
        long long left = deadline - now_ms();
        if (left <= 0 || have + 1 >= cap)
            return -1;
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, (int)left) <= 0)
            continue;
        ssize_t r = recv(fd, buf + have, cap - 1 - have, MSG_DONTWAIT);
        if (r == 0)
            return -1;
        if (r > 0)
            have += (size_t)r;
    }
}

int rs_mc_get(int fd, const char *key, char *val, size_t cap, int timeout_ms)
{
    char req[600], *buf = malloc(1 << 20);
    int rc = -1;
    if (buf == NULL)
        return -1;
    int n = snprintf(req, sizeof(req), "get %s\r\n", key);
    if (raw_exchange(fd, req, (size_t)n, "END\r\n", buf, 1 << 20, timeout_ms) == 0) {
        if (strncmp(buf, "END\r\n", 5) == 0)
            rc = 0;
        else if (strncmp(buf, "VALUE ", 6) == 0) {
            char *nl = strstr(buf, "\r\n");
            char *sp = nl ? nl : buf;
            while (sp > buf && sp[-1] != ' ')
                sp--;
            size_t len = strtoul(sp, NULL, 10);
            if (nl != NULL && val != NULL) {
                snprintf(val, cap, "%.*s", (int)len, nl + 2);
            }
            rc = 1;
        }
    }
    free(buf);
    return rc;
}

long long rs_mc_stat(int fd, const char *group, const char *name, int timeout_ms)
{
    char req[128], *buf = malloc(1 << 16);
    long long v = -1;
    if (buf == NULL)
        return -1;
    int n = snprintf(req, sizeof(req), "stats%s%s\r\n", group ? " " : "", group ? group : "");
    if (raw_exchange(fd, req, (size_t)n, "END\r\n", buf, 1 << 16, timeout_ms) == 0) {
        char pat[128];
        snprintf(pat, sizeof(pat), "STAT %s ", name);
        char *p = strstr(buf, pat);
        if (p != NULL)
            v = strtoll(p + strlen(pat), NULL, 10);
    }
    free(buf);
    return v;
}

int rs_mc_set(int fd, const char *key, const char *value, int timeout_ms)
{
    char req[2048], buf[256];
    int n = snprintf(req, sizeof(req), "set %s 0 0 %zu\r\n%s\r\n", key, strlen(value), value);
    if (raw_exchange(fd, req, (size_t)n, NULL, buf, sizeof(buf), timeout_ms) != 0)
        return -1;
    return strcmp(buf, "STORED\r\n") == 0 ? 0 : -1;
}

int rs_mc_line(int fd, const char *line, char *out, size_t cap, int timeout_ms)
{
    char req[1024];
    int n = snprintf(req, sizeof(req), "%s\r\n", line);
    return raw_exchange(fd, req, (size_t)n, NULL, out, cap, timeout_ms);
}
