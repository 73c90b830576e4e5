/* SPDX-License-Identifier: BSD-3-Clause */
/* proto.c: memcached's text and meta protocols: request lines written; reply lines classified and framed in a linear input buffer, over-limit blocks dropped. */
#include "proto.h"

#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "base/decimal.h"

/* Whether a byte of word x (eight key bytes) may be a space, a control
 * byte or DEL: the subtractions borrow into a byte whose top bit was clear
 * exactly when it is below 0x21 (or is 0x7f after the xor); a flagged word
 * is checked a byte at a time (a borrow may also flag the byte above a bad
 * one, never miss one). */
static inline uint64_t word_bad_mask(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    uint64_t del = x ^ (0x7f * ones);
    return (((x - 0x21 * ones) & ~x) | ((del - ones) & ~del)) & highs;
}

static inline int byte_bad(unsigned char b)
{
    return b <= 0x20 || b == 0x7f;
}

int mcr__proto_key_ok(const void *key, size_t len, size_t max)
{
    if (len == 0 || len > max)
        return 0;
    const unsigned char *p = key;
    if (len < 8) {
        /* the key's bytes in a word of 'a's (a good byte) */
        uint64_t x = 0x6161616161616161ull;
        memcpy(&x, p, len);
        if (word_bad_mask(x))
            for (size_t k = 0; k < len; k++)
                if (byte_bad(p[k]))
                    return 0;
        return 1;
    }
    /* eight bytes a step, the flags of all words gathered; the last word
     * ends at the key's end and may overlap the one before it. Any flag:
     * the bytes themselves decide. */
    uint64_t any = 0, x;
    size_t i = 0;
    for (; i + 8 < len; i += 8) {
        memcpy(&x, p + i, 8);
        any |= word_bad_mask(x);
    }
    memcpy(&x, p + len - 8, 8);
    any |= word_bad_mask(x);
    if (any)
        for (size_t k = 0; k < len; k++)
            if (byte_bad(p[k]))
                return 0;
    return 1;
}

/* Plain decimal: 1..20 digits, no sign, value <= max. Up to 19 digits
 * cannot overflow 64 bits (10^19 - 1 < 2^64); only a 20th digit is checked. */
static int parse_u64(const char *s, size_t len, uint64_t max, uint64_t *out)
{
    if (len == 0 || len > 20)
        return 0;
    uint64_t v = 0;
    size_t n = len < 20 ? len : 19;
    for (size_t i = 0; i < n; i++) {
        unsigned d = (unsigned)(unsigned char)s[i] - '0';
        if (d > 9)
            return 0;
        v = v * 10 + d;
    }
    if (len == 20) {
        unsigned d = (unsigned)(unsigned char)s[19] - '0';
        if (d > 9 || v > (UINT64_MAX - d) / 10)
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
        const char *sp = memchr(s + i, ' ', len - i);
        size_t j = sp != NULL ? (size_t)(sp - s) : len;
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

/* Whether line (len bytes) holds a control byte other than tab: eight bytes
 * a step, a byte at a time only in a word that may hold one (a word holds
 * a byte below 0x20 exactly when the subtraction borrows into a byte whose
 * top bit was clear; the test may also flag a byte above such a byte, never
 * miss one). */
static int has_control(const char *line, size_t len)
{
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t x;
        memcpy(&x, line + i, 8);
        if (((x - 0x20 * ones) & ~x & highs) == 0)
            continue;
        for (size_t k = i; k < i + 8; k++)
            if ((unsigned char)line[k] < 0x20 && line[k] != '\t')
                return 1;
    }
    for (; i < len; i++)
        if ((unsigned char)line[i] < 0x20 && line[i] != '\t')
            return 1;
    return 0;
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

/* The kinds a reply line can be, by its first word. */
enum first_word {
    W_NONE,    /* not a word memcached sends first (a number, or BAD) */
    W_TEXT,    /* free text follows: CLIENT_ERROR, SERVER_ERROR, VERSION, STAT */
    W_SINGLE,  /* a line of that one word: END, STORED, ... */
    W_VALUE,
    W_META,    /* EN, HD, NS, EX, NF: meta flags follow */
    W_VA
};

/* What the first word w (n bytes) of a line is: its class, and *kind. */
static enum first_word classify(const char *w, size_t n, mcr__line_kind *kind)
{
    static const struct {
        const char *word;
        unsigned char len;
        unsigned char cls;
        mcr__line_kind kind;
    } words[] = {
        { "END", 3, W_SINGLE, MCR__L_END },
        { "VALUE", 5, W_VALUE, MCR__L_VALUE },
        { "STORED", 6, W_SINGLE, MCR__L_STORED },
        { "VA", 2, W_VA, MCR__L_VA },
        { "EN", 2, W_META, MCR__L_EN },
        { "HD", 2, W_META, MCR__L_HD },
        { "MN", 2, W_SINGLE, MCR__L_MN },
        { "NS", 2, W_META, MCR__L_NS },
        { "EX", 2, W_META, MCR__L_EX },
        { "NF", 2, W_META, MCR__L_NF },
        { "NOT_STORED", 10, W_SINGLE, MCR__L_NOT_STORED },
        { "EXISTS", 6, W_SINGLE, MCR__L_EXISTS },
        { "NOT_FOUND", 9, W_SINGLE, MCR__L_NOT_FOUND },
        { "DELETED", 7, W_SINGLE, MCR__L_DELETED },
        { "TOUCHED", 7, W_SINGLE, MCR__L_TOUCHED },
        { "OK", 2, W_SINGLE, MCR__L_OK },
        { "ERROR", 5, W_SINGLE, MCR__L_ERROR },
        { "CLIENT_ERROR", 12, W_TEXT, MCR__L_CLIENT_ERROR },
        { "SERVER_ERROR", 12, W_TEXT, MCR__L_SERVER_ERROR },
        { "VERSION", 7, W_TEXT, MCR__L_VERSION },
        { "STAT", 4, W_TEXT, MCR__L_STAT },
    };
    /* Every word begins with a capital letter; a digit starts a number. */
    if (n < 2 || n > 12 || w[0] < 'A' || w[0] > 'Z')
        return W_NONE;
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (words[i].len == n && words[i].word[0] == w[0] && memcmp(words[i].word, w, n) == 0) {
            *kind = words[i].kind;
            return (enum first_word)words[i].cls;
        }
    return W_NONE;
}

/* Up to 19 digits from *p (fewer than 20 cannot overflow): 1, *v and *p
 * past them; 0 when there is no digit. What follows them is the caller's
 * to check (a 20th digit is no byte that may end a field). */
static inline int fast_u64(const char **p, const char *end, uint64_t *v)
{
    const char *s = *p, *stop = end - s > 19 ? s + 19 : end;
    uint64_t x = 0;
    for (; s < stop; s++) {
        unsigned d = (unsigned)(unsigned char)*s - '0';
        if (d > 9)
            break;
        x = x * 10 + d;
    }
    if (s == *p)
        return 0;
    *p = s;
    *v = x;
    return 1;
}

/* The common line "VALUE key flags bytes[ cas]" in one pass, from its key
 * (p, just after "VALUE ") on: 1 with *out set exactly as the general
 * parser sets it; 0 for anything less plain (a tab, a control byte, long
 * numbers, a missing field), which the general parser then reads. With
 * `framed` 0, [line, end) is the line without its CRLF; with `framed` 1 it
 * is the bytes received (at most MCR__PROTO_MAX_LINE + 2 of them, so that a
 * longer line is never taken), the line must end in them with CRLF, and
 * *len is set to its length without the CRLF (a line that does not end
 * there is 0: the framing decides). */
static int value_fast(const char *line, const char *end, int framed, mcr__line *out,
                      size_t *len)
{
    const char *p = line + 6, *key = p;
    /* the key's end: eight bytes a step while no byte may be 0x20 or below
     * (the test of has_control(), for bytes below 0x21), then byte by byte */
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    while (end - p >= 8) {
        uint64_t x;
        memcpy(&x, p, 8);
        uint64_t m = (x - 0x21 * ones) & ~x & highs;
        if (m != 0) {
            /* a borrow only carries upwards: the lowest flagged byte is
             * the first one below 0x21 (in memory order on little endian) */
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            p += __builtin_ctzll(m) / 8;
#endif
            break;
        }
        p += 8;
    }
    while (p < end && (unsigned char)*p > 0x20)
        p++;
    if (p == key || p == end || *p != ' ')
        return 0;
    size_t key_len = (size_t)(p - key);
    uint64_t flags, bytes, cas = 0;
    p++;
    if (!fast_u64(&p, end, &flags) || flags > UINT32_MAX || p == end || *p != ' ')
        return 0;
    p++;
    if (!fast_u64(&p, end, &bytes) || bytes > MAX_DATA)
        return 0;
    int has_cas = 0;
    if (p < end && *p == ' ') {
        p++;
        if (!fast_u64(&p, end, &cas))
            return 0;
        has_cas = 1;
    }
    /* the line ends here: at `end`, or (framed) with CRLF in the buffer */
    if (framed) {
        if (end - p < 2 || p[0] != '\r' || p[1] != '\n')
            return 0;
        *len = (size_t)(p - line);
    } else if (p != end) {
        return 0;
    }
    /* control bytes below 0x20 other than tab would have stopped the key;
     * DEL and bytes >= 0x80 are allowed in a key, as in the general path */
    static const mcr__line zero; /* copied: a memset() is `rep stos` on x86-64 */
    *out = zero;
    out->key = key;
    out->key_len = key_len;
    out->flags = (uint32_t)flags;
    out->has_flags = 1;
    out->bytes = bytes;
    out->cas = cas;
    out->has_cas = has_cas;
    out->kind = MCR__L_VALUE;
    return 1;
}

int mcr__proto_peek_value(const mcr__inbuf *in, const char **line, size_t *len, mcr__line *out)
{
    size_t have = in->len - in->off;
    /* the shortest is "VALUE k 0 0" and its CRLF */
    if (have < 13 || memcmp(in->data + in->off, "VALUE ", 6) != 0)
        return 0;
    const char *p = in->data + in->off;
    if (!value_fast(p, p + (have < MCR__PROTO_MAX_LINE + 2 ? have : MCR__PROTO_MAX_LINE + 2), 1,
                    out, len))
        return 0;
    *line = p;
    return 1;
}

void mcr__proto_parse_line(const char *line, size_t len, mcr__line *out)
{
    if (len > 6 && len <= MCR__PROTO_MAX_LINE && memcmp(line, "VALUE ", 6) == 0 &&
        value_fast(line, line + len, 0, out, NULL))
        return;
    static const mcr__line zero; /* copied: a memset() is `rep stos` on x86-64 */
    *out = zero;
    out->kind = MCR__L_BAD;
    if (len == 0 || len > MCR__PROTO_MAX_LINE)
        return;
    /* the lines that end a get, a meta batch and answer a set, whole */
    if ((len == 3 && memcmp(line, "END", 3) == 0) || (len == 2 && memcmp(line, "MN", 2) == 0) ||
        (len == 6 && memcmp(line, "STORED", 6) == 0)) {
        out->kind = len == 3 ? MCR__L_END : len == 2 ? MCR__L_MN : MCR__L_STORED;
        return;
    }
    /* No control byte but tab; and where the first word ends. */
    if (has_control(line, len))
        return;
    const char *sp = memchr(line, ' ', len);
    size_t first = sp != NULL ? (size_t)(sp - line) : len;

    mcr__line_kind kind = MCR__L_BAD;
    enum first_word cls = classify(line, first, &kind);
    if (cls == W_TEXT) {
        /* free text after the word (double spaces and all) */
        out->kind = kind;
        out->text = first < len ? line + first + 1 : line + first;
        out->text_len = first < len ? len - first - 1 : 0;
        if (kind == MCR__L_STAT && out->text_len == 0)
            out->kind = MCR__L_BAD;
        return;
    }

    const char *tok[MAX_TOK];
    size_t tlen[MAX_TOK];
    int n = tokenize(line, len, tok, tlen, MAX_TOK);
    if (n <= 0 || n > MAX_TOK)
        return;

    switch (cls) {
    case W_SINGLE:
        if (n == 1)
            out->kind = kind;
        return;
    case W_VALUE: {
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
    case W_META:
        if (parse_meta_flags(tok + 1, tlen + 1, n - 1, out))
            out->kind = kind;
        return;
    case W_VA:
        if (n < 2 || !parse_u64(tok[1], tlen[1], MAX_DATA, &out->bytes))
            return;
        if (parse_meta_flags(tok + 2, tlen + 2, n - 2, out))
            out->kind = MCR__L_VA;
        return;
    default:
        break;
    }

    /* incr/decr: a bare number. */
    if (n == 1 && parse_u64(tok[0], tlen[0], UINT64_MAX, &out->number)) {
        out->kind = MCR__L_NUMBER;
        return;
    }
}

/* ------------------------------------------------------------ framing */

char *mcr__inbuf_room(mcr__inbuf *in, size_t step, size_t *room)
{
    size_t have = in->len - in->off;
    if (in->cap - in->len < step && in->off > 0) {
        /* what was parsed makes room at the front: the bytes left are one
         * reply begun, a few hundred bytes as a rule */
        memmove(in->data, in->data + in->off, have);
        in->off = 0;
        in->len = have;
    }
    size_t want = step / 4 > 0 ? step / 4 : 1;
    if (in->need > have && in->need - have < want)
        want = in->need - have; /* the rest of a block fits: no growth for it */
    if (in->cap - in->len < want) {
        /* here off == 0: the tail was short of step, so the bytes moved */
        size_t cap = have + step;
        if (in->need > cap)
            cap = in->need; /* a value: the buffer fits it, not a doubling */
        char *d = realloc(in->data, cap);
        if (d == NULL)
            return NULL;
        in->data = d;
        in->cap = cap;
    }
    size_t n = in->cap - in->len;
    *room = n < step ? n : step;
    return in->data + in->len;
}

void mcr__inbuf_trim(mcr__inbuf *in, size_t keep)
{
    if (in->cap <= keep)
        return;
    size_t have = in->len - in->off;
    if (have == 0) {
        mcr__inbuf_free(in);
        return;
    }
    if (have > keep / 4)
        return; /* still reading something large */
    char *d = malloc(keep / 4);
    if (d == NULL)
        return;
    memcpy(d, in->data + in->off, have);
    free(in->data);
    in->data = d;
    in->cap = keep / 4;
    in->off = 0;
    in->len = have;
}

void mcr__inbuf_free(mcr__inbuf *in)
{
    free(in->data);
    memset(in, 0, sizeof(*in));
}

int mcr__proto_peek_line(const mcr__inbuf *in, const char **line, size_t *len)
{
    size_t have = in->len - in->off;
    if (have == 0)
        return 0;
    /* a CRLF that ends a line of at most MAX bytes lies in the first MAX + 2 */
    const char *p = in->data + in->off;
    size_t lim = have < MCR__PROTO_MAX_LINE + 2 ? have : MCR__PROTO_MAX_LINE + 2;
    const char *s = p, *end = p + lim;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        if (nl == NULL)
            break;
        if (nl > p && nl[-1] == '\r') {
            *line = p;
            *len = (size_t)(nl - 1 - p);
            return 1;
        }
        s = nl + 1; /* a bare LF ends no line */
    }
    /* MAX + 2 bytes without CRLF: any line there is over MAX */
    return lim == MCR__PROTO_MAX_LINE + 2 ? -1 : 0;
}

int mcr__proto_peek_block(mcr__inbuf *in, size_t line_len, uint64_t bytes, const char **data)
{
    if (bytes > MAX_DATA)
        return -1;
    size_t need = line_len + 2 + (size_t)bytes + 2;
    if (in->len - in->off < need) {
        in->need = need;
        return 0;
    }
    const char *p = in->data + in->off;
    if (p[need - 2] != '\r' || p[need - 1] != '\n')
        return -1;
    *data = p + line_len + 2;
    return 1;
}

void mcr__proto_skip_start(mcr__proto_skip *s, uint64_t bytes)
{
    s->left = bytes + 2;
}

int mcr__proto_skip_run(mcr__proto_skip *s, mcr__inbuf *in)
{
    size_t have = in->len - in->off, n = 0;
    if (s->left > 2) {
        uint64_t data = s->left - 2;
        n = have < data ? have : (size_t)data;
        s->left -= n;
    }
    /* the CRLF, which may arrive a byte at a time */
    while (s->left > 0 && s->left <= 2 && n < have) {
        if (in->data[in->off + n] != (s->left == 2 ? '\r' : '\n'))
            return -1;
        n++;
        s->left--;
    }
    if (n > 0)
        mcr__inbuf_drain(in, n);
    return s->left == 0 ? 1 : 0;
}

/* ------------------------------------------------------------ writing */

/* A request is formatted straight into space reserved in the output buffer,
 * one reservation per request: its size is bounded before (mcr__proto_bound()),
 * and nothing is appended when the reservation fails. */

/* Longest text of a number written below: 20 digits and a sign. */
#define NUM_MAX 21
/* Longest fixed text around one key: a meta get's "mg " + " v f t c O<n> q
 * T<n>" + CRLF, a store's five numbers, and the like. */
#define KEY_EXTRA (4 * NUM_MAX + 40)

static inline char *put(char *d, const void *s, size_t n)
{
    memcpy(d, s, n);
    return d + n;
}
#define PUT_LIT(d, lit) put((d), (lit), sizeof(lit) - 1)


static char *put_i64(char *d, int64_t v)
{
    if (v < 0) {
        *d++ = '-';
        return mcr__put_u64(d, (uint64_t)0 - (uint64_t)v);
    }
    return mcr__put_u64(d, (uint64_t)v);
}

static inline char *put_key(char *d, const mcr__wire *w, size_t i)
{
    if (w->prefix_len > 0)
        d = put(d, w->prefix, w->prefix_len);
    return put(d, w->keys[i], w->key_lens[i]);
}

size_t mcr__proto_bound(const mcr__wire *w)
{
    size_t n = KEY_EXTRA + w->value_len;
    for (size_t i = 0; i < w->nkeys; i++)
        n += w->prefix_len + w->key_lens[i] + KEY_EXTRA;
    return n;
}

/* The request in the text protocol, from d on: the end, or NULL for an op
 * the protocol does not have. */
static char *format_text(char *d, const mcr__wire *w)
{
    switch (w->op) {
    case MCR_OP_GET:
    case MCR_OP_GETS:
    case MCR_OP_GAT:
    case MCR_OP_GATS:
        if (w->op == MCR_OP_GET) {
            d = PUT_LIT(d, "get");
        } else if (w->op == MCR_OP_GETS) {
            d = PUT_LIT(d, "gets");
        } else {
            d = w->op == MCR_OP_GAT ? PUT_LIT(d, "gat ") : PUT_LIT(d, "gats ");
            d = put_i64(d, w->exptime);
        }
        for (size_t i = 0; i < w->nkeys; i++) {
            *d++ = ' ';
            d = put_key(d, w, i);
        }
        return PUT_LIT(d, "\r\n");
    case MCR_OP_SET:
    case MCR_OP_ADD:
    case MCR_OP_REPLACE:
    case MCR_OP_APPEND:
    case MCR_OP_PREPEND:
    case MCR_OP_CAS: {
        static const struct { const char *s; size_t n; } verb[] = {
            [MCR_OP_SET] = { "set ", 4 },         [MCR_OP_ADD] = { "add ", 4 },
            [MCR_OP_REPLACE] = { "replace ", 8 }, [MCR_OP_APPEND] = { "append ", 7 },
            [MCR_OP_PREPEND] = { "prepend ", 8 }, [MCR_OP_CAS] = { "cas ", 4 },
        };
        d = put(d, verb[w->op].s, verb[w->op].n);
        d = put_key(d, w, 0);
        *d++ = ' ';
        d = mcr__put_u64(d, w->flags);
        *d++ = ' ';
        d = put_i64(d, w->exptime);
        *d++ = ' ';
        d = mcr__put_u64(d, w->value_len);
        if (w->op == MCR_OP_CAS) {
            *d++ = ' ';
            d = mcr__put_u64(d, w->cas);
        }
        d = PUT_LIT(d, "\r\n");
        if (w->value_len > 0)
            d = put(d, w->value, w->value_len);
        return PUT_LIT(d, "\r\n");
    }
    case MCR_OP_DELETE:
        d = PUT_LIT(d, "delete ");
        d = put_key(d, w, 0);
        return PUT_LIT(d, "\r\n");
    case MCR_OP_INCR:
    case MCR_OP_DECR:
        d = w->op == MCR_OP_INCR ? PUT_LIT(d, "incr ") : PUT_LIT(d, "decr ");
        d = put_key(d, w, 0);
        *d++ = ' ';
        d = mcr__put_u64(d, w->delta);
        return PUT_LIT(d, "\r\n");
    case MCR_OP_TOUCH:
        d = PUT_LIT(d, "touch ");
        d = put_key(d, w, 0);
        *d++ = ' ';
        d = put_i64(d, w->exptime);
        return PUT_LIT(d, "\r\n");
    case MCR_OP_VERSION:
    case MCR_OP_NOOP:
        return PUT_LIT(d, "version\r\n");
    case MCR_OP_STATS:
        if (w->nkeys == 0)
            return PUT_LIT(d, "stats\r\n");
        d = PUT_LIT(d, "stats ");
        d = put(d, w->keys[0], w->key_lens[0]);
        return PUT_LIT(d, "\r\n");
    case MCR_OP_FLUSH_ALL:
        if (w->exptime == 0)
            return PUT_LIT(d, "flush_all\r\n");
        d = PUT_LIT(d, "flush_all ");
        d = put_i64(d, w->exptime);
        return PUT_LIT(d, "\r\n");
    case MCR_OP_COUNT:
        break;
    }
    return NULL;
}

/* The same in the meta protocol (ops it has no command of go as text). */
static char *format_meta(char *d, const mcr__wire *w)
{
    switch (w->op) {
    case MCR_OP_GET:
    case MCR_OP_GETS:
    case MCR_OP_GAT:
    case MCR_OP_GATS: {
        /* One key: a plain mg, answered VA or EN. Several: quiet gets
         * (misses send nothing) closed by a no-op: hits come back tagged
         * with their opaque, then MN ends the batch. */
        int cas = w->op == MCR_OP_GETS || w->op == MCR_OP_GATS;
        int touch = w->op == MCR_OP_GAT || w->op == MCR_OP_GATS;
        for (size_t i = 0; i < w->nkeys; i++) {
            d = PUT_LIT(d, "mg ");
            d = put_key(d, w, i);
            d = cas ? PUT_LIT(d, " v f t c O") : PUT_LIT(d, " v f t O");
            d = mcr__put_u64(d, (uint32_t)(w->opaque + i));
            if (w->nkeys > 1)
                d = PUT_LIT(d, " q");
            if (touch) {
                d = PUT_LIT(d, " T");
                d = put_i64(d, w->exptime);
            }
            d = PUT_LIT(d, "\r\n");
        }
        return w->nkeys > 1 ? PUT_LIT(d, "mn\r\n") : d;
    }
    case MCR_OP_SET:
    case MCR_OP_ADD:
    case MCR_OP_REPLACE:
    case MCR_OP_APPEND:
    case MCR_OP_PREPEND:
    case MCR_OP_CAS: {
        static const char mode[] = { [MCR_OP_SET] = 'S', [MCR_OP_ADD] = 'E',
                                     [MCR_OP_REPLACE] = 'R', [MCR_OP_APPEND] = 'A',
                                     [MCR_OP_PREPEND] = 'P', [MCR_OP_CAS] = 'S' };
        d = PUT_LIT(d, "ms ");
        d = put_key(d, w, 0);
        *d++ = ' ';
        d = mcr__put_u64(d, w->value_len);
        d = PUT_LIT(d, " F");
        d = mcr__put_u64(d, w->flags);
        d = PUT_LIT(d, " T");
        d = put_i64(d, w->exptime);
        d = PUT_LIT(d, " c M");
        *d++ = mode[w->op];
        d = PUT_LIT(d, " O");
        d = mcr__put_u64(d, w->opaque);
        if (w->op == MCR_OP_CAS) {
            d = PUT_LIT(d, " C");
            d = mcr__put_u64(d, w->cas);
        }
        d = PUT_LIT(d, "\r\n");
        if (w->value_len > 0)
            d = put(d, w->value, w->value_len);
        return PUT_LIT(d, "\r\n");
    }
    case MCR_OP_DELETE:
        d = PUT_LIT(d, "md ");
        d = put_key(d, w, 0);
        if (w->cas != 0) { /* deleted only while the item's CAS is still w->cas */
            d = PUT_LIT(d, " C");
            d = mcr__put_u64(d, w->cas);
        }
        d = PUT_LIT(d, " O");
        d = mcr__put_u64(d, w->opaque);
        return PUT_LIT(d, "\r\n");
    case MCR_OP_INCR:
    case MCR_OP_DECR:
        d = PUT_LIT(d, "ma ");
        d = put_key(d, w, 0);
        d = PUT_LIT(d, " D");
        d = mcr__put_u64(d, w->delta);
        d = w->op == MCR_OP_INCR ? PUT_LIT(d, " MI v O") : PUT_LIT(d, " MD v O");
        d = mcr__put_u64(d, w->opaque);
        return PUT_LIT(d, "\r\n");
    case MCR_OP_TOUCH:
        d = PUT_LIT(d, "mg ");
        d = put_key(d, w, 0);
        d = PUT_LIT(d, " T");
        d = put_i64(d, w->exptime);
        d = PUT_LIT(d, " O");
        d = mcr__put_u64(d, w->opaque);
        return PUT_LIT(d, "\r\n");
    case MCR_OP_NOOP:
        return PUT_LIT(d, "mn\r\n");
    default:
        return format_text(d, w);
    }
}

char *mcr__proto_format(char *d, const mcr__wire *w)
{
    if ((unsigned)w->op >= MCR_OP_COUNT)
        return NULL;
    return w->proto == MCR_PROTO_META ? format_meta(d, w) : format_text(d, w);
}

int mcr__proto_write(struct evbuffer *out, const mcr__wire *w)
{
    struct evbuffer_iovec v;
    size_t bound = mcr__proto_bound(w);
    if ((unsigned)w->op >= MCR_OP_COUNT)
        return MCR_ERR_INVALID;
    if (evbuffer_reserve_space(out, (ev_ssize_t)bound, &v, 1) != 1 || v.iov_len < bound)
        return MCR_ERR_NOMEM;
    char *d = v.iov_base;
    char *end = mcr__proto_format(d, w);
    if (end == NULL) /* not committed: nothing was appended */
        return MCR_ERR_INVALID;
    v.iov_len = (size_t)(end - d);
    return evbuffer_commit_space(out, &v, 1) == 0 ? MCR_OK : MCR_ERR_NOMEM;
}
