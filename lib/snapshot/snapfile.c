/* SPDX-License-Identifier: BSD-3-Clause */
/* snapfile.c: saving a snapshot to a file atomically, and loading one: the text (snaptext.c) checked, parsed and rebuilt. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snapshot.h"

/* The format is described in snaptext.c. */
#define FORMAT_VERSION MCR__SNAP_FORMAT
#define FORMAT_VERSION_TABLES MCR__SNAP_FORMAT_TABLES
#define MAGIC MCR__SNAP_MAGIC
/* Snapshot files larger than this are refused (10,000 servers take ~2 MB). */
#define FILE_MAX ((size_t)1 << 30)

/* ------------------------------------------------------------ saving */

int mcr_snapshot_save(const mcr_snapshot *s, const char *path, mcr_error *err)
{
    char *text, *tmp;
    size_t len;
    int rc, fd, e;

    if (s == NULL || path == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL snapshot or path");
    rc = mcr__snapshot_text(s, &text, &len, err);
    if (rc != MCR_OK)
        return rc;
    tmp = malloc(strlen(path) + sizeof(".tmp.XXXXXX"));
    if (tmp == NULL) {
        free(text);
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory writing a snapshot");
    }
    sprintf(tmp, "%s.tmp.XXXXXX", path);
    fd = mkstemp(tmp);
    if (fd < 0) {
        e = errno;
        free(text);
        rc = mcr__error(err, MCR_ERR_IO, "cannot create a temporary file for %s: %s", path,
                        strerror(e));
        free(tmp);
        return rc;
    }
    const char *what = "write";
    size_t off = 0;
    e = 0;
    if (fchmod(fd, 0644) != 0) {
        what = "chmod";
        e = errno;
    }
    while (e == 0 && off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            e = w < 0 ? errno : EIO;
            break;
        }
        off += (size_t)w;
    }
    if (e == 0 && fsync(fd) != 0) {
        what = "sync";
        e = errno;
    }
    if (close(fd) != 0 && e == 0) {
        what = "close";
        e = errno;
    }
    if (e == 0 && rename(tmp, path) != 0) {
        what = "rename";
        e = errno;
    }
    free(text);
    if (e != 0) {
        unlink(tmp);
        free(tmp);
        return mcr__error(err, MCR_ERR_IO, "cannot %s snapshot file %s: %s", what, path,
                          strerror(e));
    }
    free(tmp);
    /* Make the rename itself durable: sync the directory (best effort: some
     * file systems refuse to open or sync a directory). */
    char *dir = strdup(path);
    if (dir != NULL) {
        char *slash = strrchr(dir, '/');
        const char *d = slash == NULL ? "." : slash == dir ? "/" : (*slash = '\0', dir);
        int dfd = open(d, O_RDONLY);
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
        free(dir);
    }
    return MCR_OK;
}

/* ------------------------------------------------------------ loading */

static int read_file(const char *path, char **out, size_t *len, mcr_error *err)
{
    FILE *f = fopen(path, "rb");
    size_t cap = 1 << 16, n = 0;
    char *buf;

    if (f == NULL)
        return mcr__error(err, MCR_ERR_IO, "cannot open snapshot file %s: %s", path,
                          strerror(errno));
    buf = malloc(cap);
    for (;;) {
        if (buf == NULL) {
            fclose(f);
            return mcr__error(err, MCR_ERR_NOMEM, "out of memory reading %s", path);
        }
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        if (cap >= FILE_MAX) {
            free(buf);
            fclose(f);
            return mcr__error(err, MCR_ERR_RANGE, "snapshot file %s is larger than %zu bytes",
                              path, FILE_MAX);
        }
        char *nb = realloc(buf, 2 * cap);
        if (nb == NULL)
            free(buf);
        buf = nb;
        cap *= 2;
    }
    if (ferror(f)) {
        int e = errno;
        free(buf);
        fclose(f);
        return mcr__error(err, MCR_ERR_IO, "error reading snapshot file %s: %s", path,
                          strerror(e ? e : EIO));
    }
    fclose(f);
    *out = buf;
    *len = n;
    return MCR_OK;
}

/* A line of the file: [p, p + len) without its '\n'; `no` counts from 1. */
typedef struct line {
    const char *p;
    size_t len;
    size_t no;
} line;

typedef struct loader {
    const char *path;
    mcr_error *err;
    char *scratch;   /* decoded strings (never longer than the file) */
    size_t used;
} loader;

static int bad(loader *L, const line *l, int code, const char *msg, const char *a)
{
    char q[80];
    return mcr__error(L->err, code, "%s line %zu: %s%s%s", L->path, l->no, msg,
                      a != NULL ? ": " : "", a != NULL ? mcr__quote(q, sizeof(q), a, strlen(a)) : "");
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1; /* upper case is not canonical */
}

/* Decode n percent-encoded bytes at s into the scratch area; *out is a
 * NUL-terminated string of *dlen bytes. */
static int decode(loader *L, const line *l, const char *s, size_t n, const char **out,
                  size_t *dlen)
{
    char *d = L->scratch + L->used, *o = d;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            *o++ = s[i];
            continue;
        }
        int hi = i + 2 < n ? hexval(s[i + 1]) : -1;
        int lo = hi >= 0 ? hexval(s[i + 2]) : -1;
        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
            return bad(L, l, MCR_ERR_SYNTAX, "bad %-escape", NULL);
        *o++ = (char)(hi << 4 | lo);
        i += 2;
    }
    *o = '\0';
    L->used += (size_t)(o - d) + 1;
    *out = d;
    if (dlen != NULL)
        *dlen = (size_t)(o - d);
    return MCR_OK;
}

/* Parse a decimal number of l's text [s, s + n) up to max. */
static int number(loader *L, const line *l, const char *s, size_t n, uint64_t max,
                  const char *what, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0 || n > 20 || (n > 1 && s[0] == '0'))
        return bad(L, l, MCR_ERR_SYNTAX, what, "not a canonical number");
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return bad(L, l, MCR_ERR_SYNTAX, what, "not a number");
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (max - d) / 10)
            return bad(L, l, MCR_ERR_RANGE, what, "out of range");
        v = v * 10 + d;
    }
    *out = v;
    return MCR_OK;
}

/* The value after "key " on line l, into [*v, *v + *vn). */
static int keyword(loader *L, const line *l, const char *key, const char **v, size_t *vn)
{
    size_t k = strlen(key);
    if (l->len <= k || memcmp(l->p, key, k) != 0 || l->p[k] != ' ') {
        char want[64];
        snprintf(want, sizeof(want), "expected \"%s ...\"", key);
        return bad(L, l, MCR_ERR_SYNTAX, want, NULL);
    }
    *v = l->p + k + 1;
    *vn = l->len - k - 1;
    return MCR_OK;
}

static bool is(const char *v, size_t n, const char *word)
{
    return strlen(word) == n && memcmp(v, word, n) == 0;
}

/* "off" or "value=X": *on and the decoded value. */
static int optional_value(loader *L, const line *l, const char *v, size_t n, bool *on,
                          const char **val, size_t *vlen)
{
    if (is(v, n, "off")) {
        *on = false;
        return MCR_OK;
    }
    if (n < 6 || memcmp(v, "value=", 6) != 0)
        return bad(L, l, MCR_ERR_SYNTAX, "expected \"off\" or \"value=...\"", NULL);
    *on = true;
    return decode(L, l, v + 6, n - 6, val, vlen);
}

/* The header: parameters, epoch, server count, and the format, which says
 * where the server lines start (*first). */
static int parse_header(loader *L, const line *ls, size_t nl, mcr__params *p, uint64_t *epoch,
                        size_t *nservers, int *format, size_t *first)
{
    const char *v, *val;
    size_t n, vlen;
    uint64_t x;
    int rc;
    char tmp[64];

    memset(p, 0, sizeof(*p));
    if (nl < 10)
        return mcr__error(L->err, MCR_ERR_SYNTAX, "%s: truncated: %zu lines", L->path, nl);
    if ((rc = keyword(L, &ls[0], MAGIC, &v, &n)) != MCR_OK)
        return mcr__error(L->err, MCR_ERR_SYNTAX, "%s line 1: not an mcroute snapshot file",
                          L->path);
    if ((rc = number(L, &ls[0], v, n, UINT32_MAX, "format version", &x)) != MCR_OK)
        return rc;
    if (x != FORMAT_VERSION && x != FORMAT_VERSION_TABLES)
        return mcr__error(L->err, MCR_ERR_UNSUPPORTED,
                          "%s line 1: snapshot format %llu (this build reads formats %d and %d)",
                          L->path, (unsigned long long)x, FORMAT_VERSION, FORMAT_VERSION_TABLES);
    *format = (int)x;
    size_t sl = *format == FORMAT_VERSION_TABLES ? 9 : 8; /* the "servers" line */
    if (nl < sl + 2)
        return mcr__error(L->err, MCR_ERR_SYNTAX, "%s: truncated: %zu lines", L->path, nl);
    if ((rc = keyword(L, &ls[1], "algorithm", &v, &n)) != MCR_OK ||
        (rc = number(L, &ls[1], v, n, UINT32_MAX, "algorithm", &x)) != MCR_OK)
        return rc;
    if (x != MCR_SNAPSHOT_ALGORITHM)
        return mcr__error(L->err, MCR_ERR_UNSUPPORTED,
                          "%s line 2: placement algorithm %llu (this build places keys with "
                          "algorithm %d)",
                          L->path, (unsigned long long)x, MCR_SNAPSHOT_ALGORITHM);
    if ((rc = keyword(L, &ls[2], "epoch", &v, &n)) != MCR_OK ||
        (rc = number(L, &ls[2], v, n, UINT64_MAX, "epoch", epoch)) != MCR_OK)
        return rc;
    if ((rc = keyword(L, &ls[3], "mode", &v, &n)) != MCR_OK)
        return rc;
    snprintf(tmp, sizeof(tmp), "%.*s", (int)(n < 60 ? n : 60), v);
    if (mcr_mode_from_name(tmp, &p->mode) != MCR_OK)
        return bad(L, &ls[3], MCR_ERR_UNKNOWN, "unknown mode", tmp);
    if (mcr__snapshot_format(p->mode) != *format)
        return bad(L, &ls[3], MCR_ERR_SYNTAX,
                   *format == FORMAT_VERSION ? "a mode written in format 2, not 1"
                                             : "a mode written in format 1, not 2",
                   tmp);
    static const char *const hk[2] = {"hash", "point-hash"};
    for (int h = 0; h < 2; h++) {
        const line *l = &ls[4 + h];
        if ((rc = keyword(L, l, hk[h], &v, &n)) != MCR_OK)
            return rc;
        snprintf(tmp, sizeof(tmp), "%.*s", (int)(n < 60 ? n : 60), v);
        if (mcr_hash_from_name(tmp, h == 0 ? &p->key_hash : &p->point_hash) != MCR_OK)
            return bad(L, l, MCR_ERR_UNKNOWN, "unknown hash", tmp);
    }
    if ((rc = keyword(L, &ls[6], "hash-tag", &v, &n)) != MCR_OK ||
        (rc = optional_value(L, &ls[6], v, n, &p->tag_on, &val, &vlen)) != MCR_OK)
        return rc;
    if (p->tag_on) {
        if (vlen != 2)
            return bad(L, &ls[6], MCR_ERR_SYNTAX, "a hash tag is two bytes", NULL);
        memcpy(p->tag, val, 2);
    }
    if ((rc = keyword(L, &ls[7], "key-prefix", &v, &n)) != MCR_OK ||
        (rc = optional_value(L, &ls[7], v, n, &p->prefix_on, &val, &vlen)) != MCR_OK)
        return rc;
    if (p->prefix_on) {
        if (vlen > sizeof(p->prefix) - 1)
            return bad(L, &ls[7], MCR_ERR_RANGE, "key prefix longer than 255 bytes", NULL);
        memcpy(p->prefix, val, vlen);
        p->prefix_len = vlen;
    }
    if (*format == FORMAT_VERSION_TABLES) {
        if ((rc = keyword(L, &ls[8], "table", &v, &n)) != MCR_OK ||
            (rc = number(L, &ls[8], v, n, UINT32_MAX, "table size", &x)) != MCR_OK)
            return rc;
        if ((p->mode == MCR_MODE_SLOTS && (x < 1 || x > MCR_SLOTS_MAX)) ||
            (p->mode == MCR_MODE_MAGLEV &&
             (x > MCR_MAGLEV_SIZE_MAX || !mcr__is_prime((uint32_t)x))) ||
            (p->mode != MCR_MODE_SLOTS && p->mode != MCR_MODE_MAGLEV && x != 0))
            return bad(L, &ls[8], MCR_ERR_RANGE, "table size invalid for the mode", NULL);
        p->table_size = (uint32_t)x;
    }
    if ((rc = keyword(L, &ls[sl], "servers", &v, &n)) != MCR_OK ||
        (rc = number(L, &ls[sl], v, n, UINT32_MAX / 2, "server count", &x)) != MCR_OK)
        return rc;
    if (x == 0)
        return bad(L, &ls[sl], MCR_ERR_EMPTY, "no servers", NULL);
    if (x != nl - sl - 2)
        return mcr__error(L->err, MCR_ERR_SYNTAX,
                          "%s line %zu: %llu servers announced, %zu server lines follow", L->path,
                          sl + 1, (unsigned long long)x, nl - sl - 2);
    /* The table a file may demand is bounded by its servers, checked here
     * before anything is built: a few hundred bytes must not cost minutes
     * and gigabytes (MCR_MAGLEV_SIZE_FREE). */
    if (p->mode == MCR_MODE_MAGLEV) {
        mcr_error e2;
        if ((rc = mcr__maglev_check_limit(p->table_size, (size_t)x, &e2)) != MCR_OK)
            return mcr__error(L->err, rc, "%s line 9: %s", L->path, e2.message);
    }
    *nservers = (size_t)x;
    *first = sl + 1;
    return MCR_OK;
}

/* A server line; in format 2 its map field into [*map, *map + *mapn). */
static int parse_server(loader *L, const line *l, int format, mcr__entry *e, const char **map,
                        size_t *mapn)
{
    static const char *const keys[] = {"id", "host", "port", "weight", "zone",
                                       "state", "named", "points", "digest", "map"};
    const char *f[10];
    size_t fn[10];
    const char *p = l->p, *end = l->p + l->len;
    int nf = format == FORMAT_VERSION_TABLES ? 10 : 9;
    uint64_t x;
    int rc;

    if (l->len < 7 || memcmp(p, "server ", 7) != 0)
        return bad(L, l, MCR_ERR_SYNTAX, "expected \"server ...\"", NULL);
    p += 7;
    for (int k = 0; k < nf; k++) {
        size_t kl = strlen(keys[k]);
        const char *sp = memchr(p, ' ', (size_t)(end - p));
        const char *fe = sp != NULL ? sp : end;
        if ((size_t)(fe - p) <= kl || memcmp(p, keys[k], kl) != 0 || p[kl] != '=') {
            char want[64];
            snprintf(want, sizeof(want), "expected \"%s=\" as field %d", keys[k], k + 1);
            return bad(L, l, MCR_ERR_SYNTAX, want, NULL);
        }
        if ((k < nf - 1) != (sp != NULL))
            return bad(L, l, MCR_ERR_SYNTAX, k < nf - 1 ? "missing fields" : "extra fields",
                       NULL);
        f[k] = p + kl + 1;
        fn[k] = (size_t)(fe - f[k]);
        p = fe + 1;
    }
    const char *id, *host, *zone;
    size_t hl, zl, il;
    mcr_error e2;
    if ((rc = decode(L, l, f[0], fn[0], &id, &il)) != MCR_OK ||
        (rc = decode(L, l, f[1], fn[1], &host, &hl)) != MCR_OK ||
        (rc = decode(L, l, f[4], fn[4], &zone, &zl)) != MCR_OK)
        return rc;
    if ((rc = mcr__check_host(host, hl, &e2)) != MCR_OK)
        return bad(L, l, rc, e2.message, NULL);
    if (zl > 0 && (rc = mcr__check_name("zone", zone, &e2)) != MCR_OK)
        return bad(L, l, rc, e2.message, NULL);
    if ((rc = number(L, l, f[2], fn[2], 65535, "port", &x)) != MCR_OK)
        return rc;
    if (x == 0)
        return bad(L, l, MCR_ERR_RANGE, "port 0", NULL);
    e->port = (int)x;
    if ((rc = number(L, l, f[3], fn[3], MCR_WEIGHT_MAX, "weight", &x)) != MCR_OK)
        return rc;
    e->weight = (uint32_t)x; /* 0: only where the mode takes it (below) */
    if (is(f[5], fn[5], "active"))
        e->state = MCR_STATE_ACTIVE;
    else if (is(f[5], fn[5], "draining"))
        e->state = MCR_STATE_DRAINING;
    else if (is(f[5], fn[5], "down"))
        e->state = MCR_STATE_DOWN;
    else
        return bad(L, l, MCR_ERR_UNKNOWN, "unknown state", NULL);
    if (!is(f[6], fn[6], "0") && !is(f[6], fn[6], "1"))
        return bad(L, l, MCR_ERR_SYNTAX, "named is 0 or 1", NULL);
    e->named = f[6][0] == '1';
    /* A given id is 1..255 bytes; a derived one is "host:port" ("[host]:port"
     * for IPv6), up to 263 bytes for a 255-byte host. Which derived id it is
     * is checked with the rest, by comparing with the rebuilt text. */
    if (il == 0 || il > (e->named ? (size_t)MCR_HOSTNAME_MAX : (size_t)MCR__NAME_BUF - 1))
        return bad(L, l, MCR_ERR_SYNTAX,
                   e->named ? "an id is 1..255 bytes" : "a derived id longer than host:port",
                   NULL);
    /* points= and digest= are checked by comparing with the rebuilt text. */
    *map = nf == 10 ? f[9] : NULL;
    *mapn = nf == 10 ? fn[9] : 0;
    e->id = e->named ? id : NULL;
    e->host = host;
    e->host_len = hl;
    e->ipv6 = memchr(host, ':', hl) != NULL;
    e->zone = zl > 0 ? zone : NULL;
    return MCR_OK;
}

/* The map field of server `idx` (line l): ranges "a-b" or "a" joined by
 * ','; each number, below nmap, enters map[number] = idx once. */
static int parse_map(loader *L, const line *l, const char *v, size_t n, uint32_t idx,
                     uint32_t *map, size_t nmap)
{
    size_t i = 0;
    while (i < n) {
        uint64_t lo, hi;
        size_t j = i;
        while (j < n && v[j] != '-' && v[j] != ',')
            j++;
        int rc = number(L, l, v + i, j - i, UINT32_MAX, "map", &lo);
        if (rc != MCR_OK)
            return rc;
        hi = lo;
        if (j < n && v[j] == '-') {
            size_t k = ++j;
            while (j < n && v[j] != ',')
                j++;
            if ((rc = number(L, l, v + k, j - k, UINT32_MAX, "map", &hi)) != MCR_OK)
                return rc;
            if (hi <= lo)
                return bad(L, l, MCR_ERR_SYNTAX, "map: a range a-b needs a < b", NULL);
        }
        if (hi >= nmap)
            return bad(L, l, MCR_ERR_RANGE, "map: an entry beyond the table", NULL);
        for (uint64_t x = lo; x <= hi; x++) {
            if (map[x] != MCR__HOLE)
                return bad(L, l, MCR_ERR_DUPLICATE, "map: an entry another server owns", NULL);
            map[x] = idx;
        }
        if (j < n && (++j == n)) /* a trailing ',' */
            return bad(L, l, MCR_ERR_SYNTAX, "map: a trailing comma", NULL);
        i = j;
    }
    return MCR_OK;
}

/* Split text into lines; every line must end with '\n'. */
static int split_lines(loader *L, const char *t, size_t n, line **out, size_t *nl)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        count += t[i] == '\n';
    line *ls = malloc((count > 0 ? count : 1) * sizeof(*ls));
    if (ls == NULL)
        return mcr__error(L->err, MCR_ERR_NOMEM, "out of memory reading %s", L->path);
    const char *p = t, *end = t + n;
    size_t k = 0;
    while (p < end) {
        const char *nlp = memchr(p, '\n', (size_t)(end - p));
        if (nlp == NULL)
            break; /* an unterminated last line: reported by the caller */
        ls[k].p = p;
        ls[k].len = (size_t)(nlp - p);
        ls[k].no = k + 1;
        k++;
        p = nlp + 1;
    }
    *out = ls;
    *nl = k;
    return MCR_OK;
}

int mcr_snapshot_load(const char *path, const mcr_snapshot *current, int force,
                      mcr_snapshot **out, mcr_error *err)
{
    char *text = NULL;
    size_t len = 0;
    if (path == NULL || out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL path or output");
    int rc = read_file(path, &text, &len, err);
    if (rc != MCR_OK)
        return rc;
    rc = mcr_snapshot_parse(text, len, path, current, force ? MCR_SNAPSHOT_FORCE : 0u, out, err);
    free(text);
    return rc;
}

int mcr_snapshot_text(const mcr_snapshot *snap, char **out, size_t *len, mcr_error *err)
{
    if (snap == NULL || out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL snapshot or output");
    size_t n = 0;
    int rc = mcr__snapshot_text(snap, out, &n, err);
    if (rc == MCR_OK && len != NULL)
        *len = n;
    return rc;
}

/* The servers of `basis` that continue in e[0..n): the same id, zone and
 * what their labels are made of (host, port, name, IPv6 spelling): from[i]
 * is their index there, e[i] shares their point cache, so that the build
 * hashes only what changed, and takes their line's digest, which the
 * build keeps only when the rest of the line (weight, state, points,
 * digest) is the same too, and computes again otherwise. Nothing when the
 * placements differ. */
static void continue_from(const mcr_snapshot *basis, const mcr__params *p, mcr__entry *e,
                          size_t n, long *from)
{
    if (basis == NULL || !mcr__params_equal(&basis->params, p))
        return;
    for (size_t i = 0; i < n; i++) {
        /* An unnamed server's id is its address, as the build spells it. */
        char addr[MCR__NAME_BUF];
        const char *id = e[i].id;
        if (id == NULL && e[i].host_len + 10 <= sizeof(addr)) {
            snprintf(addr, sizeof(addr), e[i].ipv6 ? "[%s]:%d" : "%s:%d", e[i].host, e[i].port);
            id = addr;
        }
        uint32_t j = id != NULL ? mcr_snapshot_find(basis, id) : MCR_NO_SERVER;
        if (j == MCR_NO_SERVER)
            continue;
        const mcr__entry *o = &basis->servers[j];
        if (o->port != e[i].port || o->host_len != e[i].host_len ||
            memcmp(o->host, e[i].host, o->host_len) != 0 || o->named != e[i].named ||
            o->ipv6 != e[i].ipv6 || (o->zone == NULL) != (e[i].zone == NULL) ||
            (o->zone != NULL && strcmp(o->zone, e[i].zone) != 0))
            continue;
        from[i] = (long)j;
        e[i].pc = mcr__pcache_ref(o->pc);
        memcpy(e[i].ldigest, o->ldigest, sizeof(e[i].ldigest));
    }
}

static int parse_impl(const char *text, size_t len, const char *path, const mcr_snapshot *current,
                      const mcr_snapshot *basis, unsigned flags, mcr_snapshot **out,
                      mcr_error *err);

int mcr_snapshot_parse(const char *text, size_t len, const char *path,
                       const mcr_snapshot *current, unsigned flags, mcr_snapshot **out,
                       mcr_error *err)
{
    return parse_impl(text, len, path, current, NULL, flags, out, err);
}

int mcr__snapshot_parse_basis(const char *text, size_t len, const char *name,
                              const mcr_snapshot *basis, mcr_snapshot **out, mcr_error *err)
{
    return parse_impl(text, len, name, NULL, basis, 0, out, err);
}

static int parse_impl(const char *text, size_t len, const char *path, const mcr_snapshot *current,
                      const mcr_snapshot *basis, unsigned flags, mcr_snapshot **out,
                      mcr_error *err)
{
    char *rebuilt = NULL;
    size_t rlen = 0, nl = 0, nservers = 0;
    line *ls = NULL;
    mcr__entry *e = NULL;
    long *from = NULL;
    mcr_snapshot *snap = NULL;
    loader L = {path, err, NULL, 0};
    mcr__params p;
    uint64_t epoch;
    uint32_t *map = NULL;
    size_t nmap = 0, first = 0;
    int rc, format = 0;

    if ((text == NULL && len > 0) || out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL text or output");
    if ((flags & ~(unsigned)MCR_SNAPSHOT_FORCE) != 0)
        return mcr__error(err, MCR_ERR_INVALID, "unknown flags 0x%x", flags);
    if (path == NULL)
        path = "snapshot text";
    L.path = path;
    bool force = (flags & MCR_SNAPSHOT_FORCE) != 0;
    if (len > 0 && memchr(text, '\0', len) != NULL) {
        rc = mcr__error(err, MCR_ERR_SYNTAX, "%s: contains a NUL byte: not a snapshot file", path);
        goto out;
    }
    rc = split_lines(&L, text, len, &ls, &nl);
    if (rc != MCR_OK)
        goto out;

    /* 1. The checksum line, last. */
    const line *cl = nl > 0 ? &ls[nl - 1] : NULL;
    if (len == 0 || text[len - 1] != '\n' || cl == NULL || cl->len != 9 + MCR_SNAPSHOT_CHECKSUM_LEN ||
        memcmp(cl->p, "checksum ", 9) != 0) {
        rc = mcr__error(err, MCR_ERR_SYNTAX,
                        "%s: truncated or not a snapshot file: the last line is not "
                        "\"checksum <32 hex digits>\"",
                        path);
        goto out;
    }

    /* 2. The checksum of the text as it is. */
    size_t first_server = 0;
    while (first_server < nl - 1 && !(ls[first_server].len >= 7 &&
                                      memcmp(ls[first_server].p, "server ", 7) == 0))
        first_server++;
    size_t hlen = (size_t)(ls[first_server].p - text);
    size_t nd = nl - 1 - first_server;
    unsigned char *buf = malloc(hlen + nd * 16);
    if (buf == NULL) {
        rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory reading %s", path);
        goto out;
    }
    memcpy(buf, text, hlen);
    for (size_t i = 0; i < nd; i++) {
        const line *l = &ls[first_server + i];
        mcr_md5(l->p, l->len + 1, buf + hlen + 16 * i);
    }
    unsigned char d[16];
    char sum[MCR_SNAPSHOT_CHECKSUM_LEN + 1];
    mcr_md5(buf, hlen + nd * 16, d);
    free(buf);
    mcr__checksum_hex(d, sum);
    if (memcmp(sum, cl->p + 9, MCR_SNAPSHOT_CHECKSUM_LEN) != 0) {
        char q[48];
        rc = mcr__error(err, MCR_ERR_CORRUPT,
                        "%s line %zu: checksum mismatch: the file says %s, its text gives %s "
                        "(corrupted or edited)",
                        path, cl->no, mcr__quote(q, sizeof(q), cl->p + 9, MCR_SNAPSHOT_CHECKSUM_LEN),
                        sum);
        goto out;
    }

    /* 3. Parse. */
    L.scratch = malloc(len + 1);
    if (L.scratch == NULL) {
        rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory reading %s", path);
        goto out;
    }
    rc = parse_header(&L, ls, nl, &p, &epoch, &nservers, &format, &first);
    if (rc != MCR_OK)
        goto out;

    /* 4. Stale? */
    if (current != NULL && !force && epoch <= current->epoch) {
        rc = mcr__error(err, MCR_ERR_STALE,
                        "%s line 3: stale snapshot: epoch %llu is not above the current epoch "
                        "%llu (force to load it anyway)",
                        path, (unsigned long long)epoch, (unsigned long long)current->epoch);
        goto out;
    }
    e = calloc(nservers, sizeof(*e));
    from = malloc(nservers * sizeof(*from));
    if (e == NULL || from == NULL) {
        rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory reading %s", path);
        goto out;
    }
    const char **mf = calloc(nservers, sizeof(*mf));
    size_t *mfn = calloc(nservers, sizeof(*mfn));
    if (mf == NULL || mfn == NULL) {
        free(mf);
        free(mfn);
        rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory reading %s", path);
        goto out;
    }
    for (size_t i = 0; i < nservers && rc == MCR_OK; i++) {
        from[i] = -1;
        rc = parse_server(&L, &ls[first + i], format, &e[i], &mf[i], &mfn[i]);
        /* The mode's weight limit before the map is sized by weights (the
         * build checks it too, with the same words). */
        if (rc == MCR_OK && e[i].weight > mcr__weight_max(p.mode))
            rc = bad(&L, &ls[first + i], MCR_ERR_RANGE, "weight above the limit of the mode",
                     mcr_mode_name(p.mode));
        if (rc == MCR_OK && e[i].weight < mcr__weight_min(p.mode))
            rc = bad(&L, &ls[first + i], MCR_ERR_RANGE, "weight 0", NULL);
        nmap += e[i].weight; /* jump: a bucket a unit of weight */
    }
    if (rc == MCR_OK && mcr__mode_has_map(p.mode)) {
        if (p.mode == MCR_MODE_SLOTS)
            nmap = p.table_size;
        if (nmap > MCR__JUMP_BUCKETS_MAX)
            rc = mcr__error(err, MCR_ERR_RANGE, "%s: a map of %zu entries is too large", path,
                            nmap);
        else if ((map = malloc(nmap * sizeof(*map))) == NULL)
            rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory reading %s", path);
        for (size_t b = 0; rc == MCR_OK && b < nmap; b++)
            map[b] = MCR__HOLE;
        for (size_t i = 0; i < nservers && rc == MCR_OK; i++)
            rc = parse_map(&L, &ls[first + i], mf[i], mfn[i], (uint32_t)i, map, nmap);
        for (size_t b = 0; rc == MCR_OK && b < nmap; b++)
            if (map[b] == MCR__HOLE)
                rc = mcr__error(err, MCR_ERR_SYNTAX, "%s: %s %zu is owned by no server", path,
                                p.mode == MCR_MODE_JUMP ? "bucket" : "slot", b);
    } else {
        nmap = 0;
        for (size_t i = 0; i < nservers && rc == MCR_OK; i++)
            if (mfn[i] != 0)
                rc = bad(&L, &ls[first + i], MCR_ERR_SYNTAX, "a map in a mode without one", NULL);
    }
    free(mf);
    free(mfn);
    if (rc != MCR_OK)
        goto out;

    /* 5. Rebuild (from what continues of `basis`) and compare. */
    {
        mcr_error e2;
        continue_from(basis, &p, e, nservers, from);
        bool reuse = false;
        for (size_t i = 0; i < nservers && !reuse; i++)
            reuse = from[i] >= 0;
        rc = mcr__snapshot_build(&p, e, nservers, from, reuse ? basis : NULL, epoch, true, map,
                                 nmap, &snap, &e2);
        e = NULL; /* taken over */
        map = NULL;
        if (rc != MCR_OK) {
            rc = mcr__error(err, rc, "%s: %s", path, e2.message);
            goto out;
        }
    }
    if (strcmp(snap->checksum, sum) != 0) {
        rc = mcr__snapshot_text(snap, &rebuilt, &rlen, err);
        if (rc != MCR_OK)
            goto out;
        size_t i = 0, lineno = 1;
        while (i < len && i < rlen && text[i] == rebuilt[i])
            lineno += text[i++] == '\n';
        rc = mcr__error(err, MCR_ERR_CORRUPT,
                        "%s line %zu: differs from the snapshot rebuilt from the file (written "
                        "by an incompatible build, or not canonical)",
                        path, lineno);
        goto out;
    }
    *out = snap;
    snap = NULL;
    rc = MCR_OK;
out:
    mcr_snapshot_unref(snap);
    free(e);
    free(map);
    free(from);
    free(ls);
    free(L.scratch);
    free(rebuilt);
    return rc;
}
