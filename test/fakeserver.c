/* SPDX-License-Identifier: BSD-3-Clause */
/* fakeserver.c: a scripted fake memcached in a thread, answering the get family with malformed replies (see fakeserver.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fakeserver.h"

/* Connections served at once; more are accepted and closed at once. */
#define FS_MAX_CONNS 32
/* A request line longer than this (without "\r\n") is answered ERROR and
 * the connection closed: no client of the tests sends one. */
#define FS_LINE_MAX 65536
/* Tokens of one request line that are looked at. */
#define FS_MAX_TOKENS 64
/* The byte count of FS_HUGE_LENGTH: over every limit a pool may have. */
#define FS_HUGE "1099511627776"

typedef struct fs_conn {
    int fd;              /* -1: slot free */
    int bad;             /* 1: the script applies to this connection */
    int mute;            /* 1: a reply broke the stream; answer nothing more */
    int close_after;     /* 1: close once `out` is flushed */
    char *in;
    size_t in_len, in_cap;
    char *out;
    size_t out_len, out_off, out_cap;
    long long next_ms;   /* FS_TRICKLE: the next byte not before this time */
    size_t hold_at;      /* FS_BIG: send no byte of `out` from here on until released; 0: none */
} fs_conn;

struct fs_server {
    int lfd, port;
    int wake[2];         /* written by fs_stop() to end the thread */
    fs_script script;
    unsigned bad_conns, trickle_ms;
    pthread_t thr;
    atomic_uint accepted, peer_closed, open, gets, bad_replies, holding, released;
    int held;            /* FS_BIG: a value was held back once already */
    fs_conn conns[FS_MAX_CONNS];
};

static long long fs_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---------------------------------------------------------------- output */

static void out_put(fs_conn *c, const char *s, size_t n)
{
    if (c->out_len + n > c->out_cap) {
        size_t nc = c->out_cap ? c->out_cap : 4096;
        while (nc < c->out_len + n)
            nc *= 2;
        char *p = realloc(c->out, nc);
        if (p == NULL)
            abort(); /* a test helper: no recovery from running out of memory */
        c->out = p;
        c->out_cap = nc;
    }
    memcpy(c->out + c->out_len, s, n);
    c->out_len += n;
}

static void out_str(fs_conn *c, const char *s)
{
    out_put(c, s, strlen(s));
}

static void out_fmt(fs_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void out_fmt(fs_conn *c, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n > 0)
        out_put(c, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

/* ---------------------------------------------------------------- replies */

typedef struct tok {
    const char *p;
    size_t n;
} tok;

static int tok_is(const tok *t, const char *s)
{
    return t->n == strlen(s) && memcmp(t->p, s, t->n) == 0;
}

/* Whether a script misbehaves on this connection. */
static int misbehaves(const fs_server *fs, const fs_conn *c)
{
    return c->bad && fs->script != FS_GOOD;
}

/* The value of `key`: "fake:" + key. */
static void value_of(const tok *key, const char *infix, char *buf, size_t cap, size_t *len)
{
    int n = snprintf(buf, cap, "fake:%s%.*s", infix, (int)key->n, key->p);
    *len = n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

/* FS_BIG: whether key is one of the big ones. */
static int is_big(const fs_server *fs, const fs_conn *c, const tok *key)
{
    return misbehaves(fs, c) && fs->script == FS_BIG && key->n >= 3 &&
           memcmp(key->p, "big", 3) == 0;
}

/* FS_BIG: FS_BIG_BYTES of data and its CRLF, after a line just written;
 * the first big value is held back after FS_BIG_HOLD bytes. */
static void big_data(fs_server *fs, fs_conn *c)
{
    static const char chunk[4096] = {0};
    if (!fs->held) {
        fs->held = 1;
        c->hold_at = c->out_len + FS_BIG_HOLD;
    }
    for (size_t left = FS_BIG_BYTES; left > 0;) {
        size_t n = left < sizeof(chunk) ? left : sizeof(chunk);
        out_put(c, chunk, n);
        left -= n;
    }
    out_str(c, "\r\n");
    atomic_fetch_add(&fs->bad_replies, 1);
}

/* get / gets / gat / gats of keys t[0..n) (cas: gets, gats). */
static void text_get(fs_server *fs, fs_conn *c, const tok *keys, int n, int cas)
{
    char v[600];
    size_t vl;
    const char *cas_s = cas ? " 1" : "";

    atomic_fetch_add(&fs->gets, 1);
    if (!misbehaves(fs, c) || fs->script == FS_WRONG_OPAQUE || fs->script == FS_BIG) {
        for (int i = 0; i < n; i++) {
            if (is_big(fs, c, &keys[i])) {
                out_fmt(c, "VALUE %.*s 0 %d%s\r\n", (int)keys[i].n, keys[i].p, FS_BIG_BYTES,
                        cas_s);
                big_data(fs, c);
                continue;
            }
            value_of(&keys[i], "", v, sizeof(v), &vl);
            out_fmt(c, "VALUE %.*s 0 %zu%s\r\n", (int)keys[i].n, keys[i].p, vl, cas_s);
            out_put(c, v, vl);
            out_str(c, "\r\n");
        }
        out_str(c, "END\r\n");
        return;
    }
    atomic_fetch_add(&fs->bad_replies, 1);
    const tok *k = &keys[0];
    switch (fs->script) {
    case FS_GARBAGE:
        out_str(c, "HELLO WORLD\r\n");
        break;
    case FS_OTHER_KEY:
        value_of(k, "zz", v, sizeof(v), &vl);
        out_fmt(c, "VALUE zz%.*s 0 %zu%s\r\n", (int)k->n, k->p, vl, cas_s);
        out_put(c, v, vl);
        out_str(c, "\r\nEND\r\n");
        break;
    case FS_WRONG_BYTES:
        value_of(k, "", v, sizeof(v), &vl);
        out_fmt(c, "VALUE %.*s 0 3%s\r\n", (int)k->n, k->p, cas_s);
        out_put(c, v, vl);
        out_str(c, "\r\nEND\r\n");
        break;
    case FS_TRUNCATE:
        out_fmt(c, "VALUE %.*s 0 100%s\r\nfake", (int)k->n, k->p, cas_s);
        c->close_after = 1;
        c->mute = 1;
        break;
    case FS_HUGE_LENGTH:
        out_fmt(c, "VALUE %.*s 0 " FS_HUGE "%s\r\n", (int)k->n, k->p, cas_s);
        c->mute = 1;
        break;
    case FS_NO_END:
        for (int i = 0; i < n; i++) {
            value_of(&keys[i], "", v, sizeof(v), &vl);
            out_fmt(c, "VALUE %.*s 0 %zu%s\r\n", (int)keys[i].n, keys[i].p, vl, cas_s);
            out_put(c, v, vl);
            out_str(c, "\r\n");
        }
        break;
    case FS_UNSOLICITED:
        for (int i = 0; i < n; i++) {
            value_of(&keys[i], "", v, sizeof(v), &vl);
            out_fmt(c, "VALUE %.*s 0 %zu%s\r\n", (int)keys[i].n, keys[i].p, vl, cas_s);
            out_put(c, v, vl);
            out_str(c, "\r\n");
        }
        out_str(c, "END\r\n");
        out_fmt(c, "VALUE %.*s 0 5%s\r\nSTALE\r\nEND\r\n", (int)k->n, k->p, cas_s);
        break;
    case FS_TRICKLE:
        for (int i = 0; i < n; i++) {
            value_of(&keys[i], "", v, sizeof(v), &vl);
            out_fmt(c, "VALUE %.*s 0 %zu%s\r\n", (int)keys[i].n, keys[i].p, vl, cas_s);
            out_put(c, v, vl);
            out_str(c, "\r\n");
        }
        out_str(c, "END\r\n");
        break;
    case FS_SILENT:
        break;
    case FS_CLOSE:
        c->close_after = 1;
        c->mute = 1;
        break;
    case FS_DUP_VALUE:
        for (int i = 0; i < n; i++) {
            value_of(&keys[i], "", v, sizeof(v), &vl);
            out_fmt(c, "VALUE %.*s 0 %zu%s\r\n", (int)keys[i].n, keys[i].p, vl, cas_s);
            out_put(c, v, vl);
            out_str(c, "\r\n");
            if (i == 0) {
                value_of(&keys[i], "dup:", v, sizeof(v), &vl);
                out_fmt(c, "VALUE %.*s 0 %zu%s\r\n", (int)keys[i].n, keys[i].p, vl, cas_s);
                out_put(c, v, vl);
                out_str(c, "\r\n");
            }
        }
        out_str(c, "END\r\n");
        break;
    default:
        break;
    }
}

/* The return flags of a meta reply to the flags of a request (t[0..n)). */
static void meta_echo(char *buf, size_t cap, const tok *flags, int n, const tok *key,
                      size_t vlen, const char *key_infix, int bogus_opaque, int all)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && off < cap; i++) {
        const tok *f = &flags[i];
        int w = 0;
        if (f->n == 0)
            continue;
        switch (f->p[0]) {
        case 'O':
            w = bogus_opaque ? snprintf(buf + off, cap - off, " Obogus")
                             : snprintf(buf + off, cap - off, " %.*s", (int)f->n, f->p);
            break;
        case 'k':
            w = snprintf(buf + off, cap - off, " k%s%.*s", key_infix, (int)key->n, key->p);
            break;
        case 'b':
            w = snprintf(buf + off, cap - off, " b");
            break;
        case 'f':
            if (all)
                w = snprintf(buf + off, cap - off, " f0");
            break;
        case 'c':
            if (all)
                w = snprintf(buf + off, cap - off, " c1");
            break;
        case 't':
            if (all)
                w = snprintf(buf + off, cap - off, " t-1");
            break;
        case 's':
            if (all)
                w = snprintf(buf + off, cap - off, " s%zu", vlen);
            break;
        default:
            break;
        }
        if (w > 0)
            off += (size_t)w < cap - off ? (size_t)w : cap - off - 1;
    }
}

static int has_flag(const tok *flags, int n, char f)
{
    for (int i = 0; i < n; i++)
        if (flags[i].n > 0 && flags[i].p[0] == f)
            return 1;
    return 0;
}

/* mg <key> <flags>* */
static void meta_get(fs_server *fs, fs_conn *c, const tok *t, int nt)
{
    char v[600], echo[700];
    size_t vl;
    const tok *key = &t[1];
    const tok *flags = t + 2;
    int nf = nt - 2, want_v = has_flag(flags, nf, 'v');

    atomic_fetch_add(&fs->gets, 1);
    value_of(key, "", v, sizeof(v), &vl);
    if (is_big(fs, c, key)) {
        meta_echo(echo, sizeof(echo), flags, nf, key, FS_BIG_BYTES, "", 0, 1);
        out_fmt(c, "VA %d%s\r\n", FS_BIG_BYTES, echo);
        big_data(fs, c);
        return;
    }
    int bad = misbehaves(fs, c) && fs->script != FS_NO_END && fs->script != FS_BIG;
    if (bad)
        atomic_fetch_add(&fs->bad_replies, 1);
    switch (bad ? fs->script : FS_GOOD) {
    case FS_GARBAGE:
        out_str(c, "HELLO WORLD\r\n");
        return;
    case FS_OTHER_KEY:
        value_of(key, "zz", v, sizeof(v), &vl);
        meta_echo(echo, sizeof(echo), flags, nf, key, vl, "zz", 0, 1);
        break;
    case FS_WRONG_OPAQUE:
        meta_echo(echo, sizeof(echo), flags, nf, key, vl, "", 1, 1);
        break;
    case FS_WRONG_BYTES:
        meta_echo(echo, sizeof(echo), flags, nf, key, vl, "", 0, 1);
        out_fmt(c, "VA 3%s\r\n", echo);
        out_put(c, v, vl);
        out_str(c, "\r\n");
        return;
    case FS_TRUNCATE:
        meta_echo(echo, sizeof(echo), flags, nf, key, vl, "", 0, 1);
        out_fmt(c, "VA 100%s\r\nfake", echo);
        c->close_after = 1;
        c->mute = 1;
        return;
    case FS_HUGE_LENGTH:
        meta_echo(echo, sizeof(echo), flags, nf, key, vl, "", 0, 1);
        out_fmt(c, "VA " FS_HUGE "%s\r\n", echo);
        c->mute = 1;
        return;
    case FS_SILENT:
        return;
    case FS_CLOSE:
        c->close_after = 1;
        c->mute = 1;
        return;
    default: /* FS_GOOD, FS_UNSOLICITED, FS_TRICKLE */
        meta_echo(echo, sizeof(echo), flags, nf, key, vl, "", 0, 1);
        break;
    }
    if (want_v) {
        out_fmt(c, "VA %zu%s\r\n", vl, echo);
        out_put(c, v, vl);
        out_str(c, "\r\n");
    } else {
        out_fmt(c, "HD%s\r\n", echo);
    }
    if (bad && fs->script == FS_DUP_VALUE && want_v) {
        value_of(key, "dup:", v, sizeof(v), &vl);
        out_fmt(c, "VA %zu%s\r\n", vl, echo);
        out_put(c, v, vl);
        out_str(c, "\r\n");
    }
    if (bad && fs->script == FS_UNSOLICITED) {
        if (want_v)
            out_fmt(c, "VA 5%s\r\nSTALE\r\n", echo);
        else
            out_fmt(c, "HD%s\r\n", echo);
    }
}

/* ms / md / ma: HD (ma with v: VA 1 / "1"), nothing with q. */
static void meta_simple(fs_conn *c, const tok *t, int nt, int first_flag, int arith)
{
    char echo[700];
    const tok *flags = t + first_flag;
    int nf = nt - first_flag;
    if (nf < 0)
        nf = 0;
    if (has_flag(flags, nf, 'q'))
        return;
    meta_echo(echo, sizeof(echo), flags, nf, &t[1], 1, "", 0, 0);
    if (arith && has_flag(flags, nf, 'v'))
        out_fmt(c, "VA 1%s\r\n1\r\n", echo);
    else
        out_fmt(c, "HD%s\r\n", echo);
}

static int ends_noreply(const tok *t, int nt)
{
    return nt > 0 && tok_is(&t[nt - 1], "noreply");
}

static void respond(fs_server *fs, fs_conn *c, const tok *t, int nt)
{
    const tok *cmd = &t[0];

    if (c->mute || nt == 0)
        return;
    if ((tok_is(cmd, "get") || tok_is(cmd, "gets")) && nt >= 2)
        text_get(fs, c, t + 1, nt - 1, tok_is(cmd, "gets"));
    else if ((tok_is(cmd, "gat") || tok_is(cmd, "gats")) && nt >= 3)
        text_get(fs, c, t + 2, nt - 2, tok_is(cmd, "gats"));
    else if (tok_is(cmd, "mg") && nt >= 2)
        meta_get(fs, c, t, nt);
    else if (tok_is(cmd, "mn")) {
        if (!(misbehaves(fs, c) && fs->script == FS_NO_END))
            out_str(c, "MN\r\n");
    } else if (tok_is(cmd, "ms") && nt >= 3)
        meta_simple(c, t, nt, 3, 0);
    else if (tok_is(cmd, "md") && nt >= 2)
        meta_simple(c, t, nt, 2, 0);
    else if (tok_is(cmd, "ma") && nt >= 2)
        meta_simple(c, t, nt, 2, 1);
    else if (tok_is(cmd, "set") || tok_is(cmd, "add") || tok_is(cmd, "replace") ||
             tok_is(cmd, "append") || tok_is(cmd, "prepend") || tok_is(cmd, "cas")) {
        if (!ends_noreply(t, nt))
            out_str(c, "STORED\r\n");
    } else if (tok_is(cmd, "delete")) {
        if (!ends_noreply(t, nt))
            out_str(c, "DELETED\r\n");
    } else if (tok_is(cmd, "incr") || tok_is(cmd, "decr")) {
        if (!ends_noreply(t, nt))
            out_str(c, "1\r\n");
    } else if (tok_is(cmd, "touch")) {
        if (!ends_noreply(t, nt))
            out_str(c, "TOUCHED\r\n");
    } else if (tok_is(cmd, "version"))
        out_str(c, "VERSION 1.6.18-fake\r\n");
    else if (tok_is(cmd, "flush_all")) {
        if (!ends_noreply(t, nt))
            out_str(c, "OK\r\n");
    } else if (tok_is(cmd, "stats"))
        out_str(c, "STAT pid 0\r\nEND\r\n");
    else
        out_str(c, "ERROR\r\n");
}

/* The data block length that follows a request line, or -1 for none. */
static long long data_len(const tok *t, int nt)
{
    const tok *n = NULL;
    if (nt >= 5 && (tok_is(&t[0], "set") || tok_is(&t[0], "add") || tok_is(&t[0], "replace") ||
                    tok_is(&t[0], "append") || tok_is(&t[0], "prepend") ||
                    tok_is(&t[0], "cas")))
        n = &t[4];
    else if (nt >= 3 && tok_is(&t[0], "ms"))
        n = &t[2];
    if (n == NULL)
        return -1;
    long long v = 0;
    for (size_t i = 0; i < n->n; i++) {
        if (n->p[i] < '0' || n->p[i] > '9' || v > (1LL << 40))
            return 0;
        v = v * 10 + (n->p[i] - '0');
    }
    return v;
}

/* Answer every complete request in c->in. 0, or -1 to close at once. */
static int process(fs_server *fs, fs_conn *c)
{
    size_t off = 0;
    for (;;) {
        const char *buf = c->in + off;
        size_t len = c->in_len - off, l = 0;
        while (l + 1 < len && !(buf[l] == '\r' && buf[l + 1] == '\n'))
            l++;
        if (l + 1 >= len) {
            if (len > FS_LINE_MAX)
                return -1;
            break;
        }
        tok t[FS_MAX_TOKENS];
        int nt = 0;
        for (size_t i = 0; i < l && nt < FS_MAX_TOKENS;) {
            while (i < l && buf[i] == ' ')
                i++;
            size_t s = i;
            while (i < l && buf[i] != ' ')
                i++;
            if (i > s) {
                t[nt].p = buf + s;
                t[nt].n = i - s;
                nt++;
            }
        }
        long long dl = data_len(t, nt);
        size_t whole = l + 2 + (dl >= 0 ? (size_t)dl + 2 : 0);
        if (len < whole)
            break; /* the data block is not all here */
        respond(fs, c, t, nt);
        off += whole;
    }
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
    return 0;
}

/* ---------------------------------------------------------------- loop */

static void conn_close(fs_server *fs, fs_conn *c)
{
    close(c->fd);
    c->fd = -1;
    free(c->in);
    free(c->out);
    memset(c, 0, sizeof(*c));
    c->fd = -1;
    atomic_fetch_sub(&fs->open, 1);
}

static int trickles(const fs_server *fs, const fs_conn *c)
{
    return fs->script == FS_TRICKLE && c->bad;
}

/* The end of what c may send now: FS_BIG holds its value back. */
static size_t send_limit(fs_server *fs, fs_conn *c)
{
    if (c->hold_at != 0 && atomic_load(&fs->released))
        c->hold_at = 0;
    if (c->hold_at != 0 && c->out_off >= c->hold_at)
        atomic_store(&fs->holding, 1);
    return c->hold_at != 0 && c->hold_at < c->out_len ? c->hold_at : c->out_len;
}

static void *fs_thread(void *arg)
{
    fs_server *fs = arg;
    struct pollfd pf[FS_MAX_CONNS + 2];
    int idx[FS_MAX_CONNS + 2];

    for (;;) {
        int n = 0, timeout = -1;
        long long now = fs_now_ms();
        pf[n].fd = fs->wake[0];
        pf[n].events = POLLIN;
        idx[n++] = -1;
        pf[n].fd = fs->lfd;
        pf[n].events = POLLIN;
        idx[n++] = -1;
        for (int i = 0; i < FS_MAX_CONNS; i++) {
            fs_conn *c = &fs->conns[i];
            if (c->fd < 0)
                continue;
            short ev = POLLIN;
            if (c->out_off < c->out_len && c->out_off >= send_limit(fs, c)) {
                if (timeout < 0 || timeout > 5)
                    timeout = 5; /* held back: look for fs_release() again soon */
            } else if (c->out_off < c->out_len) {
                if (trickles(fs, c) && c->next_ms > now) {
                    int wait = (int)(c->next_ms - now);
                    if (timeout < 0 || wait < timeout)
                        timeout = wait;
                } else {
                    ev |= POLLOUT;
                }
            } else if (c->close_after) {
                timeout = 0;
            }
            pf[n].fd = c->fd;
            pf[n].events = ev;
            idx[n++] = i;
        }
        int r = poll(pf, (nfds_t)n, timeout);
        if (r < 0 && errno != EINTR)
            break;
        if (r < 0)
            continue;
        if (pf[0].revents & POLLIN)
            break;
        if (pf[1].revents & POLLIN) {
            int fd = accept(fs->lfd, NULL, NULL);
            if (fd >= 0) {
                int slot = -1;
                for (int i = 0; i < FS_MAX_CONNS && slot < 0; i++)
                    if (fs->conns[i].fd < 0)
                        slot = i;
                unsigned nth = atomic_fetch_add(&fs->accepted, 1);
                if (slot < 0) {
                    close(fd);
                } else {
                    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
                    fs_conn *c = &fs->conns[slot];
                    memset(c, 0, sizeof(*c));
                    c->fd = fd;
                    c->bad = fs->bad_conns == 0 || nth < fs->bad_conns;
                    atomic_fetch_add(&fs->open, 1);
                }
            }
        }
        now = fs_now_ms();
        for (int j = 2; j < n; j++) {
            fs_conn *c = &fs->conns[idx[j]];
            if (c->fd < 0)
                continue;
            if (pf[j].revents & (POLLIN | POLLHUP | POLLERR)) {
                if (c->in_cap - c->in_len < 4096) {
                    size_t nc = c->in_cap ? c->in_cap * 2 : 8192;
                    char *p = realloc(c->in, nc);
                    if (p == NULL)
                        abort();
                    c->in = p;
                    c->in_cap = nc;
                }
                ssize_t got = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
                if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
                    atomic_fetch_add(&fs->peer_closed, 1);
                    conn_close(fs, c);
                    continue;
                }
                if (got > 0) {
                    c->in_len += (size_t)got;
                    if (process(fs, c) != 0) {
                        conn_close(fs, c);
                        continue;
                    }
                }
            }
            if (c->out_off < send_limit(fs, c) && (!trickles(fs, c) || c->next_ms <= now)) {
                size_t want = send_limit(fs, c) - c->out_off;
                if (trickles(fs, c))
                    want = 1;
                ssize_t w = send(c->fd, c->out + c->out_off, want, MSG_NOSIGNAL);
                if (w < 0 && errno != EAGAIN && errno != EINTR) {
                    atomic_fetch_add(&fs->peer_closed, 1);
                    conn_close(fs, c);
                    continue;
                }
                if (w > 0) {
                    c->out_off += (size_t)w;
                    c->next_ms = now + fs->trickle_ms;
                }
                if (c->out_off == c->out_len)
                    c->out_off = c->out_len = c->hold_at = 0;
            }
            if (c->close_after && c->out_off == c->out_len)
                conn_close(fs, c);
        }
    }
    return NULL;
}

fs_server *fs_start(fs_script script, unsigned bad_conns, unsigned trickle_ms)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    fs_server *fs = calloc(1, sizeof(*fs));

    if (fs == NULL)
        return NULL;
    fs->script = script;
    fs->bad_conns = bad_conns;
    fs->trickle_ms = trickle_ms;
    for (int i = 0; i < FS_MAX_CONNS; i++)
        fs->conns[i].fd = -1;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    fs->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fs->lfd < 0 || bind(fs->lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(fs->lfd, 64) != 0 || getsockname(fs->lfd, (struct sockaddr *)&sa, &sl) != 0 ||
        pipe(fs->wake) != 0) {
        if (fs->lfd >= 0)
            close(fs->lfd);
        free(fs);
        return NULL;
    }
    fs->port = ntohs(sa.sin_port);
    if (pthread_create(&fs->thr, NULL, fs_thread, fs) != 0) {
        close(fs->lfd);
        close(fs->wake[0]);
        close(fs->wake[1]);
        free(fs);
        return NULL;
    }
    return fs;
}

void fs_stop(fs_server *fs)
{
    if (fs == NULL)
        return;
    ssize_t w = write(fs->wake[1], "x", 1);
    (void)w;
    pthread_join(fs->thr, NULL);
    for (int i = 0; i < FS_MAX_CONNS; i++)
        if (fs->conns[i].fd >= 0)
            conn_close(fs, &fs->conns[i]);
    close(fs->lfd);
    close(fs->wake[0]);
    close(fs->wake[1]);
    free(fs);
}

int fs_port(const fs_server *fs)
{
    return fs->port;
}

unsigned fs_accepted(const fs_server *fs)
{
    return atomic_load(&fs->accepted);
}

unsigned fs_peer_closed(const fs_server *fs)
{
    return atomic_load(&fs->peer_closed);
}

unsigned fs_open(const fs_server *fs)
{
    return atomic_load(&fs->open);
}

unsigned fs_gets(const fs_server *fs)
{
    return atomic_load(&fs->gets);
}

unsigned fs_bad_replies(const fs_server *fs)
{
    return atomic_load(&fs->bad_replies);
}

unsigned fs_holding(const fs_server *fs)
{
    return atomic_load(&fs->holding);
}

void fs_release(fs_server *fs)
{
    atomic_store(&fs->released, 1);
    atomic_store(&fs->holding, 0);
}
