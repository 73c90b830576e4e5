/* SPDX-License-Identifier: BSD-3-Clause */
/* proto.c: memcached's text and meta protocols: request lines written to an evbuffer; reply lines classified, framed and over-limit blocks dropped. */
#include "proto.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

int mcr__proto_key_ok(const void *key, size_t len, size_t max)
{
    if (len == 0 || len > max)
        return 0;
    const unsigned char *p = key;
    for (size_t i = 0; i < len; i++)
        if (p[i] <= 0x20 || p[i] == 0x7f)
            return 0;
    return 1;
}

/* Plain decimal: 1..20 digits, no sign, value <= max. */
static int parse_u64(const char *s, size_t len, uint64_t max, uint64_t *out)
{
    if (len == 0 || len > 20)
        return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return 0;
        v = v * 10 + d;
    }
    if (v > max)
        return 0;
    *out = v;
    return 1;
}

int mcr__proto_opaque(const char *tok, size_t len, uint32_t *out)
{
    uint64_t v;
    if (!parse_u64(tok, len, UINT32_MAX, &v))
        return 0;
    *out = (uint32_t)v;
    return 1;
}

/* Split on single spaces: up to max tokens; returns the count, or max + 1
 * when there are more. Empty tokens (two spaces) make the line bad: -1. */
static int tokenize(const char *s, size_t len, const char **tok, size_t *tlen, int max)
{
    int n = 0;
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && s[j] != ' ')
            j++;
        if (j == i)
            return -1;
        if (n == max)
            return max + 1;
        tok[n] = s + i;
        tlen[n] = j - i;
        n++;
        i = j + 1;
        if (j < len && i == len)
            return -1; /* trailing space */
    }
    return n;
}

static int tok_is(const char *t, size_t len, const char *lit)
{
    size_t n = strlen(lit);
    return len == n && memcmp(t, lit, n) == 0;
}

/* Meta reply flags after the code (and after VA's size): f, c, t, k, O
 * are read; others (s, h, l, W, X, Z, b, ...) are allowed and ignored. */
static int parse_meta_flags(const char **tok, const size_t *tlen, int n, mcr__line *out)
{
    for (int i = 0; i < n; i++) {
        const char *t = tok[i];
        size_t l = tlen[i];
        uint64_t v;
        switch (t[0]) {
        case 'f':
            if (!parse_u64(t + 1, l - 1, UINT32_MAX, &v))
                return 0;
            out->flags = (uint32_t)v;
            out->has_flags = 1;
            break;
        case 'c':
            if (!parse_u64(t + 1, l - 1, UINT64_MAX, &v))
                return 0;
            out->cas = v;
            out->has_cas = 1;
            break;
        case 't':
            /* remaining TTL: -1 for an item that never expires */
            if (l == 3 && t[1] == '-' && t[2] == '1') {
                out->ttl = -1;
            } else {
                if (!parse_u64(t + 1, l - 1, INT32_MAX, &v))
                    return 0;
                out->ttl = (int64_t)v;
            }
            out->has_ttl = 1;
            break;
        case 'k':
            out->key = t + 1;
            out->key_len = l - 1;
            break;
        case 'O':
            out->opaque = t + 1;
            out->opaque_len = l - 1;
            break;
        default:
            if (!((t[0] >= 'a' && t[0] <= 'z') || (t[0] >= 'A' && t[0] <= 'Z')))
                return 0;
            break;
        }
    }
    return 1;
}

#define MAX_TOK 24
#define MAX_DATA ((uint64_t)1 << 40)

void mcr__proto_parse_line(const char *line, size_t len, mcr__line *out)
{
    memset(out, 0, sizeof(*out));
    out->kind = MCR__L_BAD;
    if (len == 0 || len > MCR__PROTO_MAX_LINE)
        return;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)line[i] < 0x20 && line[i] != '\t')
            return;

    /* Lines with free text after the first word. */
    static const struct { const char *word; mcr__line_kind kind; } textual[] = {
        { "CLIENT_ERROR", MCR__L_CLIENT_ERROR },
        { "SERVER_ERROR", MCR__L_SERVER_ERROR },
        { "VERSION", MCR__L_VERSION },
        { "STAT", MCR__L_STAT },
    };
    for (size_t i = 0; i < sizeof(textual) / sizeof(textual[0]); i++) {
        size_t n = strlen(textual[i].word);
        if (len >= n && memcmp(line, textual[i].word, n) == 0 && (len == n || line[n] == ' ')) {
            out->kind = textual[i].kind;
            out->text = len > n ? line + n + 1 : line + n;
            out->text_len = len > n ? len - n - 1 : 0;
            if (out->kind == MCR__L_STAT && out->text_len == 0)
                out->kind = MCR__L_BAD;
            return;
        }
    }

    const char *tok[MAX_TOK];
    size_t tlen[MAX_TOK];
    int n = tokenize(line, len, tok, tlen, MAX_TOK);
    if (n <= 0 || n > MAX_TOK)
        return;

    static const struct { const char *word; mcr__line_kind kind; } single[] = {
        { "END", MCR__L_END },           { "STORED", MCR__L_STORED },
        { "NOT_STORED", MCR__L_NOT_STORED }, { "EXISTS", MCR__L_EXISTS },
        { "NOT_FOUND", MCR__L_NOT_FOUND }, { "DELETED", MCR__L_DELETED },
        { "TOUCHED", MCR__L_TOUCHED },   { "OK", MCR__L_OK },
        { "ERROR", MCR__L_ERROR },       { "MN", MCR__L_MN },
    };
    for (size_t i = 0; i < sizeof(single) / sizeof(single[0]); i++) {
        if (tok_is(tok[0], tlen[0], single[i].word)) {
            if (n == 1)
                out->kind = single[i].kind;
            return;
        }
    }

    if (tok_is(tok[0], tlen[0], "VALUE")) {
        uint64_t v;
        if (n != 4 && n != 5)
            return;
        out->key = tok[1];
        out->key_len = tlen[1];
        if (!parse_u64(tok[2], tlen[2], UINT32_MAX, &v))
            return;
        out->flags = (uint32_t)v;
        out->has_flags = 1;
        if (!parse_u64(tok[3], tlen[3], MAX_DATA, &out->bytes))
            return;
        if (n == 5) {
            if (!parse_u64(tok[4], tlen[4], UINT64_MAX, &out->cas))
                return;
            out->has_cas = 1;
        }
        out->kind = MCR__L_VALUE;
        return;
    }

    static const struct { const char *word; mcr__line_kind kind; } meta[] = {
        { "EN", MCR__L_EN }, { "HD", MCR__L_HD }, { "NS", MCR__L_NS },
        { "EX", MCR__L_EX }, { "NF", MCR__L_NF },
    };
    for (size_t i = 0; i < sizeof(meta) / sizeof(meta[0]); i++) {
        if (tok_is(tok[0], tlen[0], meta[i].word)) {
            if (parse_meta_flags(tok + 1, tlen + 1, n - 1, out))
                out->kind = meta[i].kind;
            return;
        }
    }
    if (tok_is(tok[0], tlen[0], "VA")) {
        if (n < 2 || !parse_u64(tok[1], tlen[1], MAX_DATA, &out->bytes))
            return;
        if (parse_meta_flags(tok + 2, tlen + 2, n - 2, out))
            out->kind = MCR__L_VA;
        return;
    }

    /* incr/decr: a bare number. */
    if (n == 1 && parse_u64(tok[0], tlen[0], UINT64_MAX, &out->number)) {
        out->kind = MCR__L_NUMBER;
        return;
    }
}

/* ------------------------------------------------------------ framing */

int mcr__proto_peek_line(struct evbuffer *in, const char **line, size_t *len)
{
    size_t eol = 0;
    struct evbuffer_ptr e = evbuffer_search_eol(in, NULL, &eol, EVBUFFER_EOL_CRLF_STRICT);
    if (e.pos < 0) /* MAX + 2 bytes without CRLF: a line over MAX */
        return evbuffer_get_length(in) >= MCR__PROTO_MAX_LINE + 2 ? -1 : 0;
    if ((size_t)e.pos > MCR__PROTO_MAX_LINE)
        return -1;
    *line = (const char *)evbuffer_pullup(in, e.pos + 2);
    if (*line == NULL)
        return -1;
    *len = (size_t)e.pos;
    return 1;
}

int mcr__proto_peek_block(struct evbuffer *in, size_t line_len, uint64_t bytes, const char **data)
{
    if (bytes > MAX_DATA)
        return -1;
    size_t need = line_len + 2 + (size_t)bytes + 2;
    if (evbuffer_get_length(in) < need)
        return 0;
    const char *p = (const char *)evbuffer_pullup(in, (ev_ssize_t)need);
    if (p == NULL || p[need - 2] != '\r' || p[need - 1] != '\n')
        return -1;
    *data = p + line_len + 2;
    return 1;
}

void mcr__proto_skip_start(mcr__proto_skip *s, uint64_t bytes)
{
    s->left = bytes + 2;
}

int mcr__proto_skip_run(mcr__proto_skip *s, struct evbuffer *in)
{
    size_t have = evbuffer_get_length(in);
    if (s->left > 2) {
        uint64_t data = s->left - 2;
        size_t n = have < data ? have : (size_t)data;
        evbuffer_drain(in, n);
        s->left -= n;
        have -= n;
    }
    /* the CRLF, which may arrive a byte at a time */
    while (s->left > 0 && s->left <= 2 && have > 0) {
        char b;
        evbuffer_copyout(in, &b, 1);
        if (b != (s->left == 2 ? '\r' : '\n'))
            return -1;
        evbuffer_drain(in, 1);
        s->left--;
        have--;
    }
    return s->left == 0 ? 1 : 0;
}

/* ------------------------------------------------------------ writing */

static int add(struct evbuffer *out, const void *p, size_t n)
{
    return evbuffer_add(out, p, n) == 0 ? MCR_OK : MCR_ERR_NOMEM;
}

static int add_key(struct evbuffer *out, const mcr__wire *w, size_t i)
{
    if (w->prefix_len > 0 && add(out, w->prefix, w->prefix_len) != MCR_OK)
        return MCR_ERR_NOMEM;
    return add(out, w->keys[i], w->key_lens[i]);
}

/* A text or meta command with one key: "<head><key><tail>\r\n". */
static int line1(struct evbuffer *out, const mcr__wire *w, const char *head, const char *tail)
{
    if (add(out, head, strlen(head)) != MCR_OK || add_key(out, w, 0) != MCR_OK ||
        add(out, tail, strlen(tail)) != MCR_OK)
        return MCR_ERR_NOMEM;
    return add(out, "\r\n", 2);
}

static int write_text(struct evbuffer *out, const mcr__wire *w)
{
    char tail[128];
    switch (w->op) {
    case MCR_OP_GET:
    case MCR_OP_GETS:
    case MCR_OP_GAT:
    case MCR_OP_GATS: {
        char head[48];
        if (w->op == MCR_OP_GET || w->op == MCR_OP_GETS)
            snprintf(head, sizeof(head), "%s", w->op == MCR_OP_GET ? "get" : "gets");
        else
            snprintf(head, sizeof(head), "%s %" PRId64, w->op == MCR_OP_GAT ? "gat" : "gats",
                     w->exptime);
        if (add(out, head, strlen(head)) != MCR_OK)
            return MCR_ERR_NOMEM;
        for (size_t i = 0; i < w->nkeys; i++)
            if (add(out, " ", 1) != MCR_OK || add_key(out, w, i) != MCR_OK)
                return MCR_ERR_NOMEM;
        return add(out, "\r\n", 2);
    }
    case MCR_OP_SET:
    case MCR_OP_ADD:
    case MCR_OP_REPLACE:
    case MCR_OP_APPEND:
    case MCR_OP_PREPEND:
    case MCR_OP_CAS: {
        static const char *const verb[] = {
            [MCR_OP_SET] = "set ",         [MCR_OP_ADD] = "add ",
            [MCR_OP_REPLACE] = "replace ", [MCR_OP_APPEND] = "append ",
            [MCR_OP_PREPEND] = "prepend ", [MCR_OP_CAS] = "cas ",
        };
        const char *head = verb[w->op];
        if (w->op == MCR_OP_CAS)
            snprintf(tail, sizeof(tail), " %" PRIu32 " %" PRId64 " %zu %" PRIu64, w->flags,
                     w->exptime, w->value_len, w->cas);
        else
            snprintf(tail, sizeof(tail), " %" PRIu32 " %" PRId64 " %zu", w->flags, w->exptime,
                     w->value_len);
        if (line1(out, w, head, tail) != MCR_OK || add(out, w->value, w->value_len) != MCR_OK)
            return MCR_ERR_NOMEM;
        return add(out, "\r\n", 2);
    }
    case MCR_OP_DELETE:
        return line1(out, w, "delete ", "");
    case MCR_OP_INCR:
    case MCR_OP_DECR:
        snprintf(tail, sizeof(tail), " %" PRIu64, w->delta);
        return line1(out, w, w->op == MCR_OP_INCR ? "incr " : "decr ", tail);
    case MCR_OP_TOUCH:
        snprintf(tail, sizeof(tail), " %" PRId64, w->exptime);
        return line1(out, w, "touch ", tail);
    case MCR_OP_VERSION:
    case MCR_OP_NOOP:
        return add(out, "version\r\n", 9);
    case MCR_OP_STATS:
        if (w->nkeys == 0)
            return add(out, "stats\r\n", 7);
        if (add(out, "stats ", 6) != MCR_OK || add(out, w->keys[0], w->key_lens[0]) != MCR_OK)
            return MCR_ERR_NOMEM;
        return add(out, "\r\n", 2);
    case MCR_OP_FLUSH_ALL:
        if (w->exptime == 0)
            return add(out, "flush_all\r\n", 11);
        snprintf(tail, sizeof(tail), "flush_all %" PRId64 "\r\n", w->exptime);
        return add(out, tail, strlen(tail));
    case MCR_OP_COUNT:
        break;
    }
    return MCR_ERR_INVALID;
}

static int write_meta(struct evbuffer *out, const mcr__wire *w)
{
    char tail[160];
    switch (w->op) {
    case MCR_OP_GET:
    case MCR_OP_GETS:
    case MCR_OP_GAT:
    case MCR_OP_GATS:
        /* One key: a plain mg, answered VA or EN. Several: quiet gets
         * (misses send nothing) closed by a no-op: hits come back tagged
         * with their opaque, then MN ends the batch. */
        for (size_t i = 0; i < w->nkeys; i++) {
            int k = snprintf(tail, sizeof(tail), " v f t%s O%" PRIu32 "%s",
                             (w->op == MCR_OP_GETS || w->op == MCR_OP_GATS) ? " c" : "",
                             (uint32_t)(w->opaque + i), w->nkeys > 1 ? " q" : "");
            if (w->op == MCR_OP_GAT || w->op == MCR_OP_GATS)
                snprintf(tail + k, sizeof(tail) - (size_t)k, " T%" PRId64, w->exptime);
            if (line1(out, &(mcr__wire){ .prefix = w->prefix, .prefix_len = w->prefix_len,
                                         .keys = w->keys + i, .key_lens = w->key_lens + i,
                                         .nkeys = 1 },
                      "mg ", tail) != MCR_OK)
                return MCR_ERR_NOMEM;
        }
        return w->nkeys > 1 ? add(out, "mn\r\n", 4) : MCR_OK;
    case MCR_OP_SET:
    case MCR_OP_ADD:
    case MCR_OP_REPLACE:
    case MCR_OP_APPEND:
    case MCR_OP_PREPEND:
    case MCR_OP_CAS: {
        static const char mode[] = { [MCR_OP_SET] = 'S', [MCR_OP_ADD] = 'E',
                                     [MCR_OP_REPLACE] = 'R', [MCR_OP_APPEND] = 'A',
                                     [MCR_OP_PREPEND] = 'P', [MCR_OP_CAS] = 'S' };
        int k = snprintf(tail, sizeof(tail), " %zu F%" PRIu32 " T%" PRId64 " M%c O%" PRIu32,
                         w->value_len, w->flags, w->exptime, mode[w->op], w->opaque);
        if (w->op == MCR_OP_CAS)
            snprintf(tail + k, sizeof(tail) - (size_t)k, " C%" PRIu64, w->cas);
        if (line1(out, w, "ms ", tail) != MCR_OK || add(out, w->value, w->value_len) != MCR_OK)
            return MCR_ERR_NOMEM;
        return add(out, "\r\n", 2);
    }
    case MCR_OP_DELETE:
        snprintf(tail, sizeof(tail), " O%" PRIu32, w->opaque);
        return line1(out, w, "md ", tail);
    case MCR_OP_INCR:
    case MCR_OP_DECR:
        snprintf(tail, sizeof(tail), " D%" PRIu64 " M%c v O%" PRIu32, w->delta,
                 w->op == MCR_OP_INCR ? 'I' : 'D', w->opaque);
        return line1(out, w, "ma ", tail);
    case MCR_OP_TOUCH:
        snprintf(tail, sizeof(tail), " T%" PRId64 " O%" PRIu32, w->exptime, w->opaque);
        return line1(out, w, "mg ", tail);
    case MCR_OP_NOOP:
        return add(out, "mn\r\n", 4);
    default:
        return write_text(out, w);
    }
}

int mcr__proto_write(struct evbuffer *out, const mcr__wire *w)
{
    return w->proto == MCR_PROTO_META ? write_meta(out, w) : write_text(out, w);
}
