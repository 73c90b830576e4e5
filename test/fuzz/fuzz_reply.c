/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_reply.c: fuzz target of the memcached text and meta protocols (lib/pool/proto.c): reply lines read as the pool frames them (its input buffer, at every split), and request lines written. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "fuzz.h"
#include "pool/proto.h"

#define MAX_DATA ((uint64_t)1 << 40)

/* p..p+n lies inside line..line+len. */
static int inside(const char *line, size_t len, const char *p, size_t n)
{
    return p >= line && n <= len && (size_t)(p - line) <= len - n;
}

static int is_meta_status(mcr__line_kind k)
{
    return k == MCR__L_EN || k == MCR__L_HD || k == MCR__L_NS || k == MCR__L_EX ||
           k == MCR__L_NF || k == MCR__L_VA;
}

static const char *meta_word(mcr__line_kind k)
{
    switch (k) {
    case MCR__L_EN: return "EN";
    case MCR__L_HD: return "HD";
    case MCR__L_NS: return "NS";
    case MCR__L_EX: return "EX";
    case MCR__L_NF: return "NF";
    default: return "VA";
    }
}

/* The line that says what `L` says, in canonical form (into buf). */
static size_t canonical(const mcr__line *L, char *buf, size_t cap)
{
    int n = 0;
    if (L->kind == MCR__L_VALUE) {
        n = snprintf(buf, cap, "VALUE %.*s %" PRIu32 " %" PRIu64, (int)L->key_len, L->key,
                     L->flags, L->bytes);
        if (L->has_cas)
            n += snprintf(buf + n, cap - (size_t)n, " %" PRIu64, L->cas);
    } else if (L->kind == MCR__L_NUMBER) {
        n = snprintf(buf, cap, "%" PRIu64, L->number);
    } else {
        n = snprintf(buf, cap, "%s", meta_word(L->kind));
        if (L->kind == MCR__L_VA)
            n += snprintf(buf + n, cap - (size_t)n, " %" PRIu64, L->bytes);
        if (L->has_flags)
            n += snprintf(buf + n, cap - (size_t)n, " f%" PRIu32, L->flags);
        if (L->has_cas)
            n += snprintf(buf + n, cap - (size_t)n, " c%" PRIu64, L->cas);
        if (L->key != NULL)
            n += snprintf(buf + n, cap - (size_t)n, " k%.*s", (int)L->key_len, L->key);
        if (L->opaque != NULL)
            n += snprintf(buf + n, cap - (size_t)n, " O%.*s", (int)L->opaque_len, L->opaque);
    }
    FUZZ_CHECK(n > 0 && (size_t)n < cap, "canonical line of %d bytes", n);
    return (size_t)n;
}

static int same_bytes(const char *a, size_t al, const char *b, size_t bl)
{
    if ((a == NULL) != (b == NULL))
        return 0;
    return al == bl && (al == 0 || memcmp(a, b, al) == 0);
}

/* Everything one parsed line must satisfy. */
static void check_line(const char *line, size_t len, const mcr__line *L)
{
    FUZZ_CHECK(L->kind >= MCR__L_BAD && L->kind <= MCR__L_MN, "kind %d", (int)L->kind);
    if (L->kind == MCR__L_BAD)
        return;
    FUZZ_CHECK(len >= 1 && len <= MCR__PROTO_MAX_LINE, "a %zu-byte line accepted", len);
    for (size_t i = 0; i < len; i++)
        FUZZ_CHECK((unsigned char)line[i] >= 0x20 || line[i] == '\t',
                   "control byte 0x%02x at %zu accepted", (unsigned char)line[i], i);
    FUZZ_CHECK(L->key == NULL || inside(line, len, L->key, L->key_len), "key outside the line");
    FUZZ_CHECK(L->opaque == NULL || inside(line, len, L->opaque, L->opaque_len),
               "opaque outside the line");
    FUZZ_CHECK(L->text == NULL || inside(line, len, L->text, L->text_len),
               "text outside the line");
    FUZZ_CHECK(L->bytes <= MAX_DATA, "a data block of %" PRIu64 " bytes", L->bytes);
    if (L->key != NULL)
        FUZZ_CHECK(memchr(L->key, ' ', L->key_len) == NULL, "a key with a space");
    if (L->opaque != NULL) {
        uint32_t o;
        if (mcr__proto_opaque(L->opaque, L->opaque_len, &o)) {
            char t[16];
            int n = snprintf(t, sizeof(t), "%" PRIu32, o);
            FUZZ_CHECK(L->opaque_len >= (size_t)n &&
                           memcmp(L->opaque + L->opaque_len - (size_t)n, t, (size_t)n) == 0,
                       "opaque \"%.*s\" read as %s", (int)L->opaque_len, L->opaque, t);
        }
    }

    static const char *const single[] = {
        [MCR__L_END] = "END",         [MCR__L_STORED] = "STORED",
        [MCR__L_NOT_STORED] = "NOT_STORED", [MCR__L_EXISTS] = "EXISTS",
        [MCR__L_NOT_FOUND] = "NOT_FOUND", [MCR__L_DELETED] = "DELETED",
        [MCR__L_TOUCHED] = "TOUCHED", [MCR__L_OK] = "OK",
        [MCR__L_ERROR] = "ERROR",     [MCR__L_MN] = "MN",
    };
    if ((size_t)L->kind < sizeof(single) / sizeof(single[0]) && single[L->kind] != NULL) {
        FUZZ_CHECK(len == strlen(single[L->kind]) && memcmp(line, single[L->kind], len) == 0,
                   "\"%.*s\" taken for %s", (int)len, line, single[L->kind]);
        return;
    }
    switch (L->kind) {
    case MCR__L_STAT:
        FUZZ_CHECK(L->text != NULL && L->text_len > 0, "STAT without text");
        /* fall through */
    case MCR__L_VERSION:
    case MCR__L_CLIENT_ERROR:
    case MCR__L_SERVER_ERROR:
        FUZZ_CHECK(L->text != NULL && L->text + L->text_len == line + len,
                   "text does not end the line");
        return;
    case MCR__L_VALUE:
        FUZZ_CHECK(L->key != NULL && L->key_len > 0 && L->has_flags, "VALUE without key/flags");
        break;
    case MCR__L_NUMBER:
        break;
    default:
        FUZZ_CHECK(is_meta_status(L->kind), "kind %d", (int)L->kind);
        break;
    }
    /* Round trip: the canonical form of what was read reads the same. */
    char buf[MCR__PROTO_MAX_LINE + 128];
    size_t n = canonical(L, buf, sizeof(buf));
    if (n > MCR__PROTO_MAX_LINE)
        return; /* leading zeros made the original shorter than its canonical form */
    mcr__line M;
    mcr__proto_parse_line(buf, n, &M);
    FUZZ_CHECK(M.kind == L->kind, "\"%.*s\" (kind %d) rewritten \"%.*s\" reads as kind %d",
               (int)len, line, (int)L->kind, (int)n, buf, (int)M.kind);
    FUZZ_CHECK(M.bytes == L->bytes && M.number == L->number && M.flags == L->flags &&
                   M.cas == L->cas && M.has_cas == L->has_cas && M.has_flags == L->has_flags,
               "\"%.*s\" rewritten \"%.*s\": numbers differ", (int)len, line, (int)n, buf);
    FUZZ_CHECK(same_bytes(M.key, M.key_len, L->key, L->key_len) &&
                   same_bytes(M.opaque, M.opaque_len, L->opaque, L->opaque_len),
               "\"%.*s\" rewritten \"%.*s\": key or opaque differs", (int)len, line, (int)n, buf);
}

/* The stream as the pool reads it: CRLF-terminated lines of at most
 * MCR__PROTO_MAX_LINE bytes, VALUE and VA lines followed by their data
 * block and CRLF. Returns the bytes consumed. */
static size_t read_stream(const char *in, size_t size, size_t *values)
{
    size_t pos = 0;
    while (pos < size) {
        const char *cr = NULL;
        for (size_t i = pos; i + 1 < size && i - pos <= MCR__PROTO_MAX_LINE; i++)
            if (in[i] == '\r' && in[i + 1] == '\n') {
                cr = in + i;
                break;
            }
        if (cr == NULL)
            break;
        size_t len = (size_t)(cr - (in + pos));
        mcr__line L;
        mcr__proto_parse_line(in + pos, len, &L);
        check_line(in + pos, len, &L);
        if (L.kind == MCR__L_BAD)
            break;
        pos += len + 2;
        if (L.kind == MCR__L_VALUE || L.kind == MCR__L_VA) {
            /* the declared length, never more than what is there */
            if (L.bytes > size - pos || size - pos - (size_t)L.bytes < 2)
                break;
            const char *block = in + pos;
            if (block[L.bytes] != '\r' || block[L.bytes + 1] != '\n')
                break;
            FUZZ_CHECK(block + L.bytes + 2 <= in + size, "a block past the input");
            pos += (size_t)L.bytes + 2;
            (*values)++;
        }
    }
    FUZZ_CHECK(pos <= size, "consumed %zu of %zu bytes", pos, size);
    return pos;
}

/* A reader of the pool's input buffer as reply.c reads it: lines, data
 * blocks within `limit` (the line's pointers still valid after its block),
 * blocks over it dropped as they come. What it read is folded into `sum`. */
typedef struct frame_reader {
    uint64_t limit;
    mcr__proto_skip skip;
    uint64_t sum;
    size_t events;
} frame_reader;

static void fold(frame_reader *fr, const void *p, size_t n, uint64_t tag)
{
    const unsigned char *b = p;
    uint64_t h = fr->sum ^ (tag * 0x9e3779b97f4a7c15ull);
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    fr->sum = h;
    fr->events++;
}

/* One event: 1 (read one), 0 (more bytes needed), -1 (the stream is bad). */
static int frame_one(frame_reader *fr, mcr__inbuf *in)
{
    if (fr->skip.left > 0) {
        int rc = mcr__proto_skip_run(&fr->skip, in);
        if (rc == 1)
            fold(fr, "", 0, 1);
        FUZZ_CHECK(rc != 0 || mcr__inbuf_length(in) == 0, "a skip left %zu bytes",
                   mcr__inbuf_length(in));
        return rc;
    }
    const char *line, *vline = NULL;
    size_t len, vlen = 0;
    mcr__line V;
    int fast = mcr__proto_peek_value(in, &vline, &vlen, &V);
    int rc = mcr__proto_peek_line(in, &line, &len);
    /* the pool's one-pass VALUE reader takes nothing the framing and the
     * parser would read otherwise */
    FUZZ_CHECK(!fast || (rc == 1 && vline == line && vlen == len),
               "a one-pass VALUE line of %zu bytes, framed otherwise (%d)", vlen, rc);
    if (rc <= 0) {
        FUZZ_CHECK(rc == 0 || mcr__inbuf_length(in) >= MCR__PROTO_MAX_LINE + 2,
                   "a line refused in %zu bytes", mcr__inbuf_length(in));
        return rc;
    }
    FUZZ_CHECK(len <= MCR__PROTO_MAX_LINE && len + 2 <= mcr__inbuf_length(in) &&
                   line == in->data + in->off && line[len] == '\r' && line[len + 1] == '\n',
               "a line of %zu bytes framed wrong", len);
    mcr__line L;
    mcr__proto_parse_line(line, len, &L);
    FUZZ_CHECK(!fast || (V.kind == L.kind && V.key == L.key && V.key_len == L.key_len &&
                         V.flags == L.flags && V.has_flags == L.has_flags &&
                         V.bytes == L.bytes && V.cas == L.cas && V.has_cas == L.has_cas &&
                         V.opaque == L.opaque && V.text == L.text && V.has_ttl == L.has_ttl),
               "a one-pass VALUE line read otherwise");
    if (L.kind == MCR__L_BAD)
        return -1;
    if (L.kind != MCR__L_VALUE && L.kind != MCR__L_VA) {
        fold(fr, line, len, 2);
        mcr__inbuf_drain(in, len + 2);
        return 1;
    }
    if (L.bytes > fr->limit) {
        fold(fr, line, len, 3);
        mcr__inbuf_drain(in, len + 2);
        mcr__proto_skip_start(&fr->skip, L.bytes);
        return 1;
    }
    const char *data;
    rc = mcr__proto_peek_block(in, len, L.bytes, &data);
    if (rc <= 0) {
        FUZZ_CHECK(rc < 0 || in->need == len + 2 + L.bytes + 2, "need %zu", in->need);
        return rc;
    }
    FUZZ_CHECK(data == line + len + 2, "a block apart from its line");
    fold(fr, line, len, 4); /* the line, read after its block was found */
    fold(fr, data, (size_t)L.bytes, 5);
    mcr__inbuf_drain(in, len + 2 + (size_t)L.bytes + 2);
    return 1;
}

static int frame_all(frame_reader *fr, mcr__inbuf *in)
{
    int rc;
    while ((rc = frame_one(fr, in)) == 1) {
    }
    return rc;
}

/* s (n bytes) added to in through the room it makes, `step` a read. */
static void frame_add(mcr__inbuf *in, const char *s, size_t n, size_t step)
{
    while (n > 0) {
        size_t room;
        char *d = mcr__inbuf_room(in, step, &room);
        FUZZ_CHECK(d != NULL && room > 0 && room <= step && in->len + room <= in->cap,
                   "room %zu for a step of %zu", room, step);
        size_t k = n < room ? n : room;
        memcpy(d, s, k);
        in->len += k;
        s += k;
        n -= k;
    }
}

/* The input read whole, then in pieces of a size it picks (through reads of
 * a step it picks, so that the buffer moves and grows): the same events,
 * the same end, and never more held than a piece, a line and a block
 * within the limit. */
static void check_framing(const uint8_t *data, size_t size)
{
    if (size < 2)
        return;
    const char *in = (const char *)data;
    size_t piece = 1 + data[0] % 61;
    size_t step = 8 + data[1] % 120;
    uint64_t limit = data[size - 1] % 97;

    frame_reader whole = {.limit = limit};
    mcr__inbuf b;
    memset(&b, 0, sizeof(b));
    frame_add(&b, in, size, size);
    int end = frame_all(&whole, &b);
    size_t left = mcr__inbuf_length(&b);
    mcr__inbuf_free(&b);

    frame_reader fr = {.limit = limit};
    int rc = 0;
    size_t peak = 0;
    for (size_t off = 0; off < size && rc >= 0; off += piece) {
        frame_add(&b, in + off, size - off < piece ? size - off : piece, step);
        if (mcr__inbuf_length(&b) > peak)
            peak = mcr__inbuf_length(&b);
        rc = frame_all(&fr, &b);
        mcr__inbuf_trim(&b, 4 * step);
    }
    FUZZ_CHECK(rc == end, "in pieces of %zu: ended %d, whole %d", piece, rc, end);
    FUZZ_CHECK(fr.events == whole.events && fr.sum == whole.sum,
               "in pieces of %zu: %zu events, whole %zu", piece, fr.events, whole.events);
    FUZZ_CHECK(end < 0 || mcr__inbuf_length(&b) == left, "in pieces of %zu: %zu bytes left, whole %zu",
               piece, mcr__inbuf_length(&b), left);
    FUZZ_CHECK(peak <= piece + MCR__PROTO_MAX_LINE + 2 + limit + 2, "%zu bytes held", peak);
    mcr__inbuf_free(&b);
}

/* A request built from the input, written, and read back: it ends with
 * CRLF, names its key, and a store declares exactly its value's length. */
static void check_write(const uint8_t *data, size_t size)
{
    if (size < 4)
        return;
    mcr_op op = (mcr_op)(data[0] % MCR_OP_COUNT);
    mcr_protocol proto = (data[1] & 1) ? MCR_PROTO_META : MCR_PROTO_TEXT;
    size_t klen = 1 + data[2] % 64;
    if (klen > size - 3)
        klen = size - 3;
    const char *key = (const char *)data + 3;
    if (!mcr__proto_key_ok(key, klen, 250))
        return;
    size_t vlen = size - 3 - klen;
    const char *keys[1] = {key};
    size_t lens[1] = {klen};
    mcr__wire w = {.op = op, .proto = proto, .keys = keys, .key_lens = lens, .nkeys = 1,
                   .value = data + 3 + klen, .value_len = vlen, .flags = data[1],
                   .exptime = (int64_t)data[2] - 100, .cas = 7, .delta = data[0],
                   .opaque = 1000u + data[1]};
    if (op == MCR_OP_STATS || op == MCR_OP_VERSION || op == MCR_OP_FLUSH_ALL || op == MCR_OP_NOOP)
        w.nkeys = data[2] & 1;
    struct evbuffer *out = evbuffer_new();
    FUZZ_CHECK(out != NULL, "out of memory");
    int rc = mcr__proto_write(out, &w);
    FUZZ_CHECK(rc == MCR_OK, "write %s: %d", mcr_op_name(op), rc);
    size_t n = evbuffer_get_length(out);
    const char *t = (const char *)evbuffer_pullup(out, -1);
    FUZZ_CHECK(n >= 2 && t[n - 2] == '\r' && t[n - 1] == '\n', "%s not ended by CRLF",
               mcr_op_name(op));
    const char *eol = NULL;
    for (size_t i = 0; i + 1 < n; i++)
        if (t[i] == '\r' && t[i + 1] == '\n') {
            eol = t + i;
            break;
        }
    size_t ll = (size_t)(eol - t);
    int has_key = w.nkeys == 1 && op != MCR_OP_VERSION && op != MCR_OP_NOOP &&
                  op != MCR_OP_FLUSH_ALL;
    if (has_key) {
        /* " key" then a space or the end of the line */
        int found = 0;
        for (size_t i = 0; i + klen < ll + 1 && !found; i++)
            found = t[i] == ' ' && i + 1 + klen <= ll && memcmp(t + i + 1, key, klen) == 0 &&
                    (i + 1 + klen == ll || t[i + 1 + klen] == ' ');
        FUZZ_CHECK(found, "%s line \"%.*s\" does not name its key", mcr_op_name(op), (int)ll, t);
    }
    int store = op >= MCR_OP_SET && op <= MCR_OP_CAS;
    if (store) {
        /* the length field: text "cmd key flags exptime LEN [cas]",
         * meta "ms key LEN ..." */
        const char *f[8];
        size_t fl[8], nf = 0, i = 0;
        while (i < ll && nf < 8) {
            size_t j = i;
            while (j < ll && t[j] != ' ')
                j++;
            f[nf] = t + i;
            fl[nf++] = j - i;
            i = j + 1;
        }
        size_t at = proto == MCR_PROTO_META ? 2 : 4;
        FUZZ_CHECK(nf > at, "\"%.*s\": no length field", (int)ll, t);
        uint64_t declared = 0;
        for (size_t k = 0; k < fl[at]; k++) {
            FUZZ_CHECK(f[at][k] >= '0' && f[at][k] <= '9', "\"%.*s\": length field", (int)ll, t);
            declared = declared * 10 + (uint64_t)(f[at][k] - '0');
        }
        FUZZ_CHECK(declared == vlen, "%s declares %" PRIu64 " bytes for a %zu-byte value",
                   mcr_op_name(op), declared, vlen);
        FUZZ_CHECK(n == ll + 2 + vlen + 2 && memcmp(t + ll + 2, w.value, vlen) == 0,
                   "%s: %zu bytes written for a %zu-byte line and a %zu-byte value",
                   mcr_op_name(op), n, ll, vlen);
    } else if (!(proto == MCR_PROTO_META && op <= MCR_OP_GATS)) {
        FUZZ_CHECK(n == ll + 2, "%s: %zu bytes after its line", mcr_op_name(op), n - ll - 2);
    }
    evbuffer_free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    size_t values = 0;
    read_stream(in, size, &values);

    /* Every '\n'-terminated piece as a line of its own too (with or
     * without its '\r'), so that lines after a bad one are reached. */
    size_t start = 0;
    for (size_t i = 0; i <= size; i++) {
        if (i == size || in[i] == '\n') {
            size_t len = i - start;
            if (len > 0 && in[start + len - 1] == '\r')
                len--;
            if (len <= MCR__PROTO_MAX_LINE + 1) {
                /* an exact-size copy: a read past the line is an ASan error */
                char *copy = malloc(len > 0 ? len : 1);
                FUZZ_CHECK(copy != NULL, "out of memory");
                memcpy(copy, in + start, len);
                mcr__line L;
                mcr__proto_parse_line(copy, len, &L);
                check_line(copy, len, &L);
                free(copy);
            }
            start = i + 1;
        }
    }

    /* mcr__proto_key_ok against its definition. */
    size_t kl = size < 300 ? size : 300;
    int ok = kl >= 1 && kl <= 250;
    for (size_t i = 0; i < kl; i++)
        ok = ok && data[i] > 0x20 && data[i] != 0x7f;
    FUZZ_CHECK(mcr__proto_key_ok(data, kl, 250) == ok, "key_ok of %zu bytes", kl);

    check_framing(data, size);
    check_write(data, size);
    return 0;
}
