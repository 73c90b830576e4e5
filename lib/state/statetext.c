/* SPDX-License-Identifier: BSD-3-Clause */
/* statetext.c: the state file's text (mcroute_state.h): written from a content, and parsed strictly back, every field checked. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state_internal.h"

#define STATE_MAGIC "mcroute-state 1"

bool mcr__state_name_ok(const char *s, size_t max)
{
    size_t n = 0;
    if (s == NULL)
        return false;
    for (; s[n] != '\0'; n++) {
        char c = s[n];
        if (n >= max || !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                          (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' || c == ':'))
            return false;
    }
    return n > 0;
}

/* The phases in which processes route through a migration: the state
 * carries its snapshots. */
static bool phase_routes(mcr_migration_phase p)
{
    return p >= MCR_MIGRATION_COPYING && p <= MCR_MIGRATION_CLOSING;
}

static bool params_same(const mcr_snapshot *a, const mcr_snapshot *b)
{
    return mcr__params_equal(&a->params, &b->params);
}

/* ------------------------------------------------------------ writing */

typedef struct buf {
    char *p;
    size_t len, cap;
    bool nomem;
} buf;

static void put(buf *b, const void *s, size_t n)
{
    if (b->nomem)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            b->nomem = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void putf(buf *b, const char *fmt, ...) MCR__PRINTF(2, 3);
static void putf(buf *b, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    put(b, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

/* "LABEL N\n" and the snapshot's N bytes of text. */
static int put_snapshot(buf *b, const char *label, const mcr_snapshot *s, mcr_error *err)
{
    char *t = NULL;
    size_t n = 0;
    int rc = mcr_snapshot_text(s, &t, &n, err);
    if (rc != MCR_OK)
        return rc;
    putf(b, "%s %zu\n", label, n);
    put(b, t, n);
    free(t);
    return MCR_OK;
}

/* The migration's epochs: its snapshots', or the ones given without them. */
static void content_epochs(const mcr_state_content *c, uint64_t *from, uint64_t *to)
{
    *from = c->from != NULL ? mcr_snapshot_epoch(c->from) : c->from_epoch;
    *to = c->to != NULL ? mcr_snapshot_epoch(c->to) : c->to_epoch;
}

static int check_content(const mcr_state_content *c, mcr_error *err)
{
    if (c->snapshot == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "state: no snapshot");
    if (!mcr__state_name_ok(c->pool, MCR_HOST_STATE_POOL_MAX))
        return mcr__error(err, MCR_ERR_INVALID,
                          "state: pool name must be 1 to %d bytes of A-Z a-z 0-9 . _ - :",
                          MCR_HOST_STATE_POOL_MAX);
    if (!mcr__zeroed(c->reserved, sizeof(c->reserved)))
        return mcr__error(err, MCR_ERR_INVALID, "mcr_state_content: reserved is not zero");
    if (c->phase == MCR_MIGRATION_NONE)
        return MCR_OK;
    if ((unsigned)c->phase > MCR_MIGRATION_ABORTED)
        return mcr__error(err, MCR_ERR_INVALID, "state: migration phase %d is unknown",
                          (int)c->phase);
    if (!mcr__state_name_ok(c->migration_id, MCR_HOST_STATE_ID_MAX))
        return mcr__error(err, MCR_ERR_INVALID,
                          "state: migration id must be 1 to %d bytes of A-Z a-z 0-9 . _ - :",
                          MCR_HOST_STATE_ID_MAX);
    if ((c->from == NULL || c->to == NULL) && (phase_routes(c->phase) || c->from != c->to))
        return mcr__error(err, MCR_ERR_INVALID, "state: migration %s without its snapshots",
                          c->migration_id);
    uint64_t fe, te;
    content_epochs(c, &fe, &te);
    if (te <= fe)
        return mcr__error(err, MCR_ERR_INVALID,
                          "state: migration %s: to's epoch %llu is not above from's %llu",
                          c->migration_id, (unsigned long long)te, (unsigned long long)fe);
    if (c->from != NULL && !params_same(c->from, c->to))
        return mcr__error(err, MCR_ERR_INVALID,
                          "state: migration %s: from and to have different placement parameters",
                          c->migration_id);
    return MCR_OK;
}

int mcr__state_text(const mcr_state_content *c, uint64_t gen, uint64_t written_ms, char **out,
                    size_t *len, mcr_error *err)
{
    buf b = {0};
    unsigned char d[16];
    int rc = check_content(c, err);
    if (rc != MCR_OK)
        return rc;

    putf(&b, STATE_MAGIC "\ngeneration %llu\npool %s\nwritten %llu\n", (unsigned long long)gen,
         c->pool, (unsigned long long)written_ms);
    if (c->phase == MCR_MIGRATION_NONE)
        putf(&b, "migration none\n");
    else {
        uint64_t fe, te;
        content_epochs(c, &fe, &te);
        putf(&b, "migration %s %s %llu %llu\n", c->migration_id,
             mcr_migration_phase_name(c->phase), (unsigned long long)fe, (unsigned long long)te);
    }
    rc = put_snapshot(&b, "snapshot", c->snapshot, err);
    if (rc == MCR_OK && phase_routes(c->phase))
        rc = put_snapshot(&b, "from", c->from, err);
    if (rc == MCR_OK && phase_routes(c->phase))
        rc = put_snapshot(&b, "to", c->to, err);
    if (rc == MCR_OK && !b.nomem) {
        mcr_md5(b.p, b.len, d);
        putf(&b, "checksum ");
        for (int i = 0; i < 16; i++)
            putf(&b, "%02x", d[i]);
        putf(&b, "\n");
    }
    if (rc == MCR_OK && b.nomem)
        rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory writing a state");
    if (rc != MCR_OK) {
        free(b.p);
        return rc;
    }
    *out = b.p;
    *len = b.len;
    return MCR_OK;
}

/* ------------------------------------------------------------ parsing */

typedef struct reader {
    const char *p, *end;
    const char *name;
    unsigned line;
    const mcr_snapshot *basis; /* point caches to take (mcr__state_read_basis) */
} reader;

/* The next line (without its "\n") into *s, *n; false at the end or when
 * no "\n" ends it. */
static bool next_line(reader *r, const char **s, size_t *n)
{
    if (r->p >= r->end)
        return false;
    const char *nl = memchr(r->p, '\n', (size_t)(r->end - r->p));
    if (nl == NULL)
        return false;
    *s = r->p;
    *n = (size_t)(nl - r->p);
    r->p = nl + 1;
    r->line++;
    return true;
}

/* A decimal without leading zeros (or "0"), at most max. */
static bool parse_u64(const char *s, size_t n, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0 || n > 20 || (n > 1 && s[0] == '0'))
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        unsigned dgt = (unsigned)(s[i] - '0');
        if (v > (max - dgt) / 10)
            return false;
        v = v * 10 + dgt;
    }
    *out = v;
    return true;
}

/* "KEY VALUE": the value of line `key` (the line must start "KEY "). */
static int keyed(reader *r, const char *key, const char **v, size_t *vn, mcr_error *err)
{
    const char *s;
    size_t n, kl = strlen(key);
    if (!next_line(r, &s, &n))
        return mcr__error(err, MCR_ERR_SYNTAX, "%s: line %u: missing \"%s\" line (truncated?)",
                          r->name, r->line + 1, key);
    if (n <= kl || memcmp(s, key, kl) != 0 || s[kl] != ' ')
        return mcr__error(err, MCR_ERR_SYNTAX, "%s: line %u: expected \"%s ...\"", r->name,
                          r->line, key);
    *v = s + kl + 1;
    *vn = n - kl - 1;
    return MCR_OK;
}

static int keyed_u64(reader *r, const char *key, uint64_t min, uint64_t max, uint64_t *out,
                     mcr_error *err)
{
    const char *v;
    size_t n;
    int rc = keyed(r, key, &v, &n, err);
    if (rc != MCR_OK)
        return rc;
    if (!parse_u64(v, n, UINT64_MAX, out))
        return mcr__error(err, MCR_ERR_SYNTAX, "%s: line %u: %s is not a decimal number",
                          r->name, r->line, key);
    if (*out < min || *out > max)
        return mcr__error(err, MCR_ERR_RANGE, "%s: line %u: %s %llu is out of range", r->name,
                          r->line, key, (unsigned long long)*out);
    return MCR_OK;
}

/* A name value into out (cap max + 1). */
static int copy_name(reader *r, const char *what, const char *v, size_t n, char *out,
                     size_t max, mcr_error *err)
{
    if (n == 0 || n > max)
        return mcr__error(err, MCR_ERR_SYNTAX, "%s: line %u: %s must be 1 to %zu bytes", r->name,
                          r->line, what, max);
    memcpy(out, v, n);
    out[n] = '\0';
    if (!mcr__state_name_ok(out, max))
        return mcr__error(err, MCR_ERR_SYNTAX,
                          "%s: line %u: %s has a byte outside A-Z a-z 0-9 . _ - :", r->name,
                          r->line, what);
    return MCR_OK;
}

/* "migration none" or "migration ID PHASE FROM TO". */
static int parse_migration(reader *r, mcr_state_info *out, mcr_error *err)
{
    const char *v, *f[4];
    size_t n, fl[4], k = 0;
    int rc = keyed(r, "migration", &v, &n, err);
    if (rc != MCR_OK)
        return rc;
    if (n == 4 && memcmp(v, "none", 4) == 0)
        return MCR_OK;
    /* split at single spaces: exactly four fields */
    for (const char *p = v, *e = v + n; k < 5; k++) {
        const char *sp = memchr(p, ' ', (size_t)(e - p));
        const char *end = sp != NULL ? sp : e;
        if (k < 4) {
            f[k] = p;
            fl[k] = (size_t)(end - p);
        }
        if (sp == NULL) {
            k++;
            break;
        }
        p = sp + 1;
    }
    if (k != 4)
        return mcr__error(err, MCR_ERR_SYNTAX,
                          "%s: line %u: expected \"migration none\" or \"migration ID PHASE "
                          "FROM_EPOCH TO_EPOCH\"",
                          r->name, r->line);
    rc = copy_name(r, "migration id", f[0], fl[0], out->migration_id, MCR_HOST_STATE_ID_MAX, err);
    if (rc != MCR_OK)
        return rc;
    for (int p = MCR_MIGRATION_PLANNED; p <= MCR_MIGRATION_ABORTED; p++) {
        const char *nm = mcr_migration_phase_name((mcr_migration_phase)p);
        if (strlen(nm) == fl[1] && memcmp(nm, f[1], fl[1]) == 0)
            out->phase = (mcr_migration_phase)p;
    }
    if (out->phase == MCR_MIGRATION_NONE)
        return mcr__error(err, MCR_ERR_SYNTAX, "%s: line %u: migration phase \"%.*s\" is unknown",
                          r->name, r->line, (int)(fl[1] < 32 ? fl[1] : 32), f[1]);
    if (!parse_u64(f[2], fl[2], UINT64_MAX, &out->from_epoch) ||
        !parse_u64(f[3], fl[3], UINT64_MAX, &out->to_epoch))
        return mcr__error(err, MCR_ERR_SYNTAX,
                          "%s: line %u: migration epochs must be decimal numbers", r->name,
                          r->line);
    if (out->to_epoch <= out->from_epoch)
        return mcr__error(err, MCR_ERR_RANGE,
                          "%s: line %u: migration to_epoch %llu is not above from_epoch %llu",
                          r->name, r->line, (unsigned long long)out->to_epoch,
                          (unsigned long long)out->from_epoch);
    return MCR_OK;
}

/* "LABEL N" and N bytes of snapshot text, parsed. */
static int parse_snapshot(reader *r, const char *label, mcr_snapshot **out, mcr_error *err)
{
    uint64_t n;
    char where[MCR_ERROR_MESSAGE_SIZE / 2];
    int rc = keyed_u64(r, label, 1, MCR__STATE_FILE_MAX, &n, err);
    if (rc != MCR_OK)
        return rc;
    if ((uint64_t)(r->end - r->p) < n)
        return mcr__error(err, MCR_ERR_SYNTAX, "%s: line %u: %s of %llu bytes, %zu left (truncated?)",
                          r->name, r->line, label, (unsigned long long)n,
                          (size_t)(r->end - r->p));
    snprintf(where, sizeof(where), "%s (%s)", r->name, label);
    rc = mcr__snapshot_parse_basis(r->p, (size_t)n, where, r->basis, out, err);
    if (rc != MCR_OK)
        return rc;
    for (const char *p = r->p, *e = r->p + n; p < e; p++)
        r->line += *p == '\n';
    r->p += n;
    return MCR_OK;
}

/* The last line must be "checksum HEX", the MD5 of every byte before it:
 * checked first, so that damage anywhere is told as such before any field
 * is read; r->end is then the start of that line. */
static int check_sum(reader *r, mcr_error *err)
{
    const char *text = r->p, *end = r->end;
    unsigned char d[16];
    char hex[33];
    static const char key[] = "checksum ";
    size_t kl = sizeof(key) - 1, n = (size_t)(end - text);
    /* "checksum " and 32 hex digits and "\n", at the start of a line */
    if (n < kl + 33 || end[-1] != '\n' || memcmp(end - 33 - kl, key, kl) != 0 ||
        (n > kl + 33 && end[-34 - (long)kl] != '\n'))
        return mcr__error(err, MCR_ERR_SYNTAX,
                          "%s: does not end with a \"checksum\" line (truncated?)", r->name);
    const char *line = end - 33 - kl, *v = line + kl;
    mcr_md5(text, (size_t)(line - text), d);
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    if (memcmp(v, hex, 32) != 0)
        return mcr__error(err, MCR_ERR_CORRUPT,
                          "%s: checksum mismatch: the file says %.32s, its text %s (damaged, "
                          "or changed by hand)",
                          r->name, v, hex);
    r->end = line;
    return MCR_OK;
}

static int parse_body(reader *r, mcr_state_info *out, mcr_error *err)
{
    const char *s, *v;
    size_t n;
    int rc = check_sum(r, err);
    if (rc != MCR_OK)
        return rc;
    if (!next_line(r, &s, &n) || n != strlen(STATE_MAGIC) || memcmp(s, STATE_MAGIC, n) != 0)
        return mcr__error(err, MCR_ERR_SYNTAX,
                          "%s: line 1: not a state file (expected \"" STATE_MAGIC "\")",
                          r->name);
    rc = keyed_u64(r, "generation", 1, UINT64_MAX / 2, &out->generation, err);
    if (rc == MCR_OK)
        rc = keyed(r, "pool", &v, &n, err);
    if (rc == MCR_OK)
        rc = copy_name(r, "pool", v, n, out->pool, MCR_HOST_STATE_POOL_MAX, err);
    if (rc == MCR_OK)
        rc = keyed_u64(r, "written", 0, UINT64_MAX, &out->written_ms, err);
    if (rc == MCR_OK)
        rc = parse_migration(r, out, err);
    if (rc == MCR_OK)
        rc = parse_snapshot(r, "snapshot", &out->snapshot, err);
    if (rc == MCR_OK && phase_routes(out->phase)) {
        rc = parse_snapshot(r, "from", &out->from, err);
        if (rc == MCR_OK)
            rc = parse_snapshot(r, "to", &out->to, err);
        if (rc == MCR_OK && (mcr_snapshot_epoch(out->from) != out->from_epoch ||
                             mcr_snapshot_epoch(out->to) != out->to_epoch))
            rc = mcr__error(err, MCR_ERR_SYNTAX,
                            "%s: the migration's snapshots are epochs %llu and %llu, its line "
                            "says %llu and %llu",
                            r->name, (unsigned long long)mcr_snapshot_epoch(out->from),
                            (unsigned long long)mcr_snapshot_epoch(out->to),
                            (unsigned long long)out->from_epoch,
                            (unsigned long long)out->to_epoch);
        if (rc == MCR_OK && !params_same(out->from, out->to))
            rc = mcr__error(err, MCR_ERR_SYNTAX,
                            "%s: the migration's snapshots have different placement parameters",
                            r->name);
    }
    if (rc == MCR_OK && r->p != r->end)
        return mcr__error(err, MCR_ERR_SYNTAX, "%s: line %u: more than the format has", r->name,
                          r->line + 1);
    return rc;
}

int mcr_state_parse(const char *text, size_t len, const char *name, mcr_state_info *out,
                    mcr_error *err)
{
    return mcr__state_parse_basis(text, len, name, NULL, out, err);
}

int mcr__state_parse_basis(const char *text, size_t len, const char *name,
                           const mcr_snapshot *basis, mcr_state_info *out, mcr_error *err)
{
    if (out == NULL || (text == NULL && len > 0))
        return mcr__error(err, MCR_ERR_INVALID, "mcr_state_parse: NULL argument");
    memset(out, 0, sizeof(*out));
    reader r = {text, text + len, name != NULL ? name : "state", 0, basis};
    int rc = parse_body(&r, out, err);
    if (rc != MCR_OK)
        mcr_state_info_clear(out);
    return rc;
}

void mcr_state_info_clear(mcr_state_info *info)
{
    if (info == NULL)
        return;
    mcr_snapshot_unref(info->snapshot);
    mcr_snapshot_unref(info->from);
    mcr_snapshot_unref(info->to);
    memset(info, 0, sizeof(*info));
}

int mcr_state_read(const char *path, mcr_state_info *out, mcr_error *err)
{
    return mcr__state_read_basis(path, NULL, out, err);
}

int mcr__state_read_basis(const char *path, const mcr_snapshot *basis, mcr_state_info *out,
                          mcr_error *err)
{
    if (out != NULL)
        memset(out, 0, sizeof(*out));
    if (path == NULL || out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "mcr_state_read: NULL argument");
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        int e = errno;
        if (e == ENOENT)
            return mcr__error(err, MCR_ERR_IO,
                              "state %s: no such file (is the agent running? `mcroute agent "
                              "--state %s` writes it)",
                              path, path);
        return mcr__error(err, MCR_ERR_IO, "state %s: %s", path, strerror(e));
    }
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    int rc = MCR_OK;
    while (text != NULL) {
        if (len == cap) {
            if (cap >= MCR__STATE_FILE_MAX) {
                rc = mcr__error(err, MCR_ERR_IO, "state %s: larger than %u bytes (not a state)",
                                path, (unsigned)MCR__STATE_FILE_MAX);
                break;
            }
            char *t = realloc(text, cap * 2);
            if (t == NULL) {
                free(text);
                text = NULL;
                break;
            }
            text = t;
            cap *= 2;
        }
        size_t got = fread(text + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    if (text == NULL)
        rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory reading state %s", path);
    else if (rc == MCR_OK && ferror(f))
        rc = mcr__error(err, MCR_ERR_IO, "state %s: read error", path);
    fclose(f);
    if (rc == MCR_OK)
        rc = mcr__state_parse_basis(text, len, path, basis, out, err);
    free(text);
    return rc;
}
