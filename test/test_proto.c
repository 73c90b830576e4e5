/* SPDX-License-Identifier: BSD-3-Clause */
/* test_proto.c: Check suite of lib/pool/proto.c: reply lines classified, reply streams framed at every split, over-limit blocks dropped, request lines written. */
/*
 * proto.c knows the wire only: which line is which and where a line or a
 * data block ends. Which request a reply answers (and so a second VALUE for
 * one key, a wrong key, a wrong token) is the pool's business, tested in
 * test_pool_replies.c against a scripted fake server.
 *
 * The framing tests feed reply streams into the pool's input buffer
 * (mcr__inbuf, filled through mcr__inbuf_room() in small steps, so that its
 * bytes are moved and it grows as in the pool) in chunks of every size from
 * 1 byte to the whole stream, and read them with the functions the pool
 * uses, the way it uses them: the events read must be the same for
 * every split, an error must come at the same point, and a value over the
 * limit must never be held.
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "pool/proto.h"
#include "testutil.h"

/* ================================================================== input buffers */

/* Bytes added to an input buffer per mcr__inbuf_room(): small, so that the
 * framing tests move and grow the buffer often. */
#define TEST_STEP 64

static mcr__inbuf *in_new(void)
{
    mcr__inbuf *in = calloc(1, sizeof(*in));
    ck_assert_ptr_nonnull(in);
    return in;
}

static void in_free(mcr__inbuf *in)
{
    mcr__inbuf_free(in);
    free(in);
}

/* s appended the way conn.c reads: into the room the buffer makes. */
static void in_add(mcr__inbuf *in, const void *s, size_t n)
{
    const char *c = s;
    while (n > 0) {
        size_t room;
        char *d = mcr__inbuf_room(in, TEST_STEP, &room);
        ck_assert_ptr_nonnull(d);
        ck_assert(room > 0 && room <= TEST_STEP && in->len + room <= in->cap);
        size_t k = n < room ? n : room;
        memcpy(d, c, k);
        in->len += k;
        c += k;
        n -= k;
    }
}

/* ================================================================== lines */

static mcr__line parse(const char *s)
{
    mcr__line L;
    mcr__proto_parse_line(s, strlen(s), &L);
    return L;
}

static int field_is(const char *p, size_t n, const char *want)
{
    return p != NULL && n == strlen(want) && memcmp(p, want, n) == 0;
}

#define KIND(s, k)                                                                          \
    do {                                                                                    \
        mcr__line L_ = parse(s);                                                            \
        ck_assert_msg(L_.kind == (k), "\"%s\": kind %d, expected %d", (s), (int)L_.kind,   \
                      (int)(k));                                                            \
    } while (0)

START_TEST(test_line_kinds)
{
    static const struct {
        const char *line;
        mcr__line_kind kind;
    } plain[] = {
        {"END", MCR__L_END},         {"STORED", MCR__L_STORED},
        {"NOT_STORED", MCR__L_NOT_STORED}, {"EXISTS", MCR__L_EXISTS},
        {"NOT_FOUND", MCR__L_NOT_FOUND}, {"DELETED", MCR__L_DELETED},
        {"TOUCHED", MCR__L_TOUCHED}, {"OK", MCR__L_OK},
        {"ERROR", MCR__L_ERROR},     {"MN", MCR__L_MN},
        {"EN", MCR__L_EN},           {"HD", MCR__L_HD},
        {"NS", MCR__L_NS},           {"EX", MCR__L_EX},
        {"NF", MCR__L_NF},
    };
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++)
        KIND(plain[i].line, plain[i].kind);

    mcr__line L = parse("VALUE foo 42 7");
    ck_assert_int_eq(L.kind, MCR__L_VALUE);
    ck_assert(field_is(L.key, L.key_len, "foo"));
    ck_assert_uint_eq(L.flags, 42);
    ck_assert_uint_eq(L.bytes, 7);
    ck_assert_int_eq(L.has_cas, 0);

    L = parse("VALUE k 4294967295 1099511627776 18446744073709551615");
    ck_assert_int_eq(L.kind, MCR__L_VALUE);
    ck_assert_uint_eq(L.flags, UINT32_MAX);
    ck_assert_uint_eq(L.bytes, (uint64_t)1 << 40);
    ck_assert_int_eq(L.has_cas, 1);
    ck_assert_uint_eq(L.cas, UINT64_MAX);

    L = parse("18446744073709551615");
    ck_assert_int_eq(L.kind, MCR__L_NUMBER);
    ck_assert_uint_eq(L.number, UINT64_MAX);
    L = parse("0");
    ck_assert_int_eq(L.kind, MCR__L_NUMBER);
    ck_assert_uint_eq(L.number, 0);

    L = parse("VERSION 1.6.21");
    ck_assert_int_eq(L.kind, MCR__L_VERSION);
    ck_assert(field_is(L.text, L.text_len, "1.6.21"));
    L = parse("STAT curr_items 12");
    ck_assert_int_eq(L.kind, MCR__L_STAT);
    ck_assert(field_is(L.text, L.text_len, "curr_items 12"));
    L = parse("CLIENT_ERROR bad data chunk");
    ck_assert_int_eq(L.kind, MCR__L_CLIENT_ERROR);
    ck_assert(field_is(L.text, L.text_len, "bad data chunk"));
    L = parse("SERVER_ERROR");
    ck_assert_int_eq(L.kind, MCR__L_SERVER_ERROR);
    ck_assert_uint_eq(L.text_len, 0);

    L = parse("VA 5 f7 c9 kfoo O123 t-1 s5 W Z");
    ck_assert_int_eq(L.kind, MCR__L_VA);
    ck_assert_uint_eq(L.bytes, 5);
    ck_assert(L.has_flags && L.flags == 7);
    ck_assert(L.has_cas && L.cas == 9);
    ck_assert(field_is(L.key, L.key_len, "foo"));
    ck_assert(field_is(L.opaque, L.opaque_len, "123"));
    ck_assert(L.has_ttl && L.ttl == -1);
    L = parse("VA 1 f0 t3600");
    ck_assert(L.has_ttl && L.ttl == 3600);
    /* a TTL that is not a number, or beyond 32 bits, is not memcached's */
    ck_assert_int_eq(parse("VA 1 f0 t-2").kind, MCR__L_BAD);
    ck_assert_int_eq(parse("VA 1 f0 t").kind, MCR__L_BAD);
    ck_assert_int_eq(parse("VA 1 f0 t99999999999").kind, MCR__L_BAD);
    L = parse("VA 0");
    ck_assert_int_eq(L.kind, MCR__L_VA);
    ck_assert_ptr_null(L.opaque);
    ck_assert_int_eq(L.has_flags, 0);
    L = parse("HD O7 kbar");
    ck_assert_int_eq(L.kind, MCR__L_HD);
    ck_assert(field_is(L.opaque, L.opaque_len, "7"));
    ck_assert(field_is(L.key, L.key_len, "bar"));
    L = parse("EN O4294967295");
    ck_assert_int_eq(L.kind, MCR__L_EN);
    uint32_t o = 0;
    ck_assert(mcr__proto_opaque(L.opaque, L.opaque_len, &o));
    ck_assert_uint_eq(o, UINT32_MAX);
}
END_TEST

START_TEST(test_line_bad)
{
    static const char *const bad[] = {
        "",                     /* empty */
        "HELLO WORLD",          /* not memcached's */
        "end",                  /* case matters */
        "END ",                 /* trailing space */
        " END",                 /* leading space */
        "END x",                /* a word too many */
        "STORED  ",
        "VALUE",                /* too few fields */
        "VALUE k",
        "VALUE k 0",
        "VALUE k 0 1 2 3",      /* too many */
        "VALUE k  0 1",         /* two spaces */
        "VALUE k 4294967296 1", /* flags over 32 bits */
        "VALUE k 0 1099511627777", /* bytes over 2^40 */
        "VALUE k -1 1",
        "VALUE k +1 1",
        "VALUE k 0 1x",
        "VALUE k 0 1 18446744073709551616", /* cas over 64 bits */
        "VALUE k 0 123456789012345678901",  /* 21 digits */
        "18446744073709551616", /* incr result over 64 bits */
        "-1",
        "STAT",                 /* a STAT without name */
        "VA",                   /* meta without size */
        "VA x",
        "VA 5 f-1",             /* bad flag number */
        "VA 5 fx",
        "VA 5 c",
        "VA 5 9",               /* a flag must start with a letter */
        "HD f4294967296",
        "EN  O1",
        "VALUE k\x01 0 1",      /* control bytes */
        "END\r",
        "EN\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        mcr__line L = parse(bad[i]);
        ck_assert_msg(L.kind == MCR__L_BAD, "\"%s\": kind %d, expected BAD", bad[i],
                      (int)L.kind);
    }
    /* a NUL in the line (strlen would stop there) */
    mcr__line L;
    mcr__proto_parse_line("END\0", 4, &L);
    ck_assert_int_eq(L.kind, MCR__L_BAD);
    /* tabs are text */
    KIND("SERVER_ERROR a\tb", MCR__L_SERVER_ERROR);
}
END_TEST

/* The longest line: accepted at MCR__PROTO_MAX_LINE bytes, not one more. */
START_TEST(test_line_limit)
{
    char buf[MCR__PROTO_MAX_LINE + 2];
    memset(buf, 'x', sizeof(buf));
    memcpy(buf, "SERVER_ERROR ", 13);
    mcr__line L;
    mcr__proto_parse_line(buf, MCR__PROTO_MAX_LINE, &L);
    ck_assert_int_eq(L.kind, MCR__L_SERVER_ERROR);
    ck_assert_uint_eq(L.text_len, MCR__PROTO_MAX_LINE - 13);
    mcr__proto_parse_line(buf, MCR__PROTO_MAX_LINE + 1, &L);
    ck_assert_int_eq(L.kind, MCR__L_BAD);

    /* the same through the framing: a line of MAX bytes, then one of MAX + 1 */
    mcr__inbuf *in = in_new();
    const char *line;
    size_t len;
    in_add(in, buf, MCR__PROTO_MAX_LINE);
    ck_assert_int_eq(mcr__proto_peek_line(in, &line, &len), 0);
    in_add(in, "\r\n", 2);
    ck_assert_int_eq(mcr__proto_peek_line(in, &line, &len), 1);
    ck_assert_uint_eq(len, MCR__PROTO_MAX_LINE);
    mcr__inbuf_drain(in, len + 2);
    in_add(in, buf, MCR__PROTO_MAX_LINE + 1);
    in_add(in, "\r", 1);
    /* no CRLF yet, but already too long to be a line: refused without waiting */
    ck_assert_int_eq(mcr__proto_peek_line(in, &line, &len), -1);
    in_add(in, "\n", 1);
    ck_assert_int_eq(mcr__proto_peek_line(in, &line, &len), -1);
    in_free(in);
}
END_TEST

START_TEST(test_key_and_opaque)
{
    ck_assert(mcr__proto_key_ok("a", 1, 250));
    ck_assert(!mcr__proto_key_ok("", 0, 250));
    ck_assert(!mcr__proto_key_ok("a b", 3, 250));
    ck_assert(!mcr__proto_key_ok("a\r\nset", 7, 250));
    ck_assert(!mcr__proto_key_ok("a\x7f", 2, 250));
    ck_assert(mcr__proto_key_ok("\x80\xff", 2, 250)); /* bytes over 0x7f are allowed */
    ck_assert(mcr__proto_key_ok("abc", 3, 3));
    ck_assert(!mcr__proto_key_ok("abcd", 4, 3));

    uint32_t o = 99;
    ck_assert(mcr__proto_opaque("0", 1, &o) && o == 0);
    ck_assert(mcr__proto_opaque("4294967295", 10, &o) && o == UINT32_MAX);
    o = 99;
    ck_assert(!mcr__proto_opaque("4294967296", 10, &o));
    ck_assert(!mcr__proto_opaque("", 0, &o));
    ck_assert(!mcr__proto_opaque("bogus", 5, &o));
    ck_assert(!mcr__proto_opaque("-1", 2, &o));
    ck_assert_uint_eq(o, 99); /* unchanged on failure */
}
END_TEST

/* Every key length 1..70 and 250, every position, every byte value: the
 * word-at-a-time check (a padded word under 8 bytes, an overlapping last
 * word) against the rule read byte by byte. */
START_TEST(test_key_every_byte)
{
    char key[256];
    size_t lens[72], nlens = 0;
    for (size_t n = 1; n <= 70; n++)
        lens[nlens++] = n;
    lens[nlens++] = 250;
    for (size_t li = 0; li < nlens; li++) {
        size_t n = lens[li];
        memset(key, 'k', n);
        ck_assert(mcr__proto_key_ok(key, n, 250));
        ck_assert(!mcr__proto_key_ok(key, n, n - 1));
        for (size_t pos = 0; pos < n; pos++) {
            for (int b = 0; b < 256; b++) {
                key[pos] = (char)b;
                int want = !(b <= 0x20 || b == 0x7f);
                ck_assert_msg(mcr__proto_key_ok(key, n, 250) == want,
                              "key of %zu bytes, byte 0x%02x at %zu: %d", n, b, pos, !want);
            }
            key[pos] = 'k';
        }
    }
}
END_TEST

/* A VALUE line's key ends at the first space, whatever its length and
 * wherever that space falls in a word; a control byte in it sends the line
 * to the general parser (which refuses it). */
START_TEST(test_value_key_lengths)
{
    char line[400], key[260];
    for (size_t n = 1; n <= 250; n++) {
        for (size_t i = 0; i < n; i++)
            key[i] = (char)('a' + (i * 7 + n) % 26);
        for (int cas = 0; cas < 2; cas++) {
            int len = snprintf(line, sizeof(line), "VALUE %.*s %u %zu%s", (int)n, key, 7u, n,
                               cas ? " 99" : "");
            mcr__line L;
            mcr__proto_parse_line(line, (size_t)len, &L);
            ck_assert_int_eq(L.kind, MCR__L_VALUE);
            ck_assert_uint_eq(L.key_len, n);
            ck_assert(memcmp(L.key, key, n) == 0);
            ck_assert_uint_eq(L.flags, 7);
            ck_assert_uint_eq(L.bytes, n);
            ck_assert_int_eq(L.has_cas, cas);
            if (cas)
                ck_assert_uint_eq(L.cas, 99);
            /* a control byte inside the key: not a VALUE line */
            if (n >= 3) {
                line[6 + n / 2] = '\x01';
                mcr__proto_parse_line(line, (size_t)len, &L);
                ck_assert_int_eq(L.kind, MCR__L_BAD);
            }
        }
    }
}
END_TEST

/* The numbers of a VALUE line at every length: 1 to 20 digits in each
 * field (the word-at-a-time path for up to 7 digits with 8 bytes left, the
 * digit loop for the rest), at the line's end and before another field,
 * against strtoull and the fields' limits (flags 32 bits, bytes 2^40). */
START_TEST(test_value_numbers)
{
    tu_rng r;
    tu_rng_init(&r, 0x6e756d73);
    char line[200], num[3][32];
    for (int field = 0; field < 3; field++)
        for (int digits = 1; digits <= 20; digits++)
            for (int rep = 0; rep < 40; rep++) {
                /* the other fields short or long, so that the field tested
                 * has fewer or more than 8 bytes after it */
                for (int f = 0; f < 3; f++) {
                    int nd = f == field ? digits : 1 + (int)(tu_rand(&r) % (f == 0 ? 9 : 12));
                    for (int i = 0; i < nd; i++)
                        num[f][i] = (char)('0' + tu_rand(&r) % 10);
                    if (rep % 5 == 0 && nd > 1)
                        num[f][0] = '0'; /* a leading zero */
                    num[f][nd] = '\0';
                }
                int with_cas = field == 2 || rep % 2;
                int len = snprintf(line, sizeof(line), "VALUE key%d %s %s%s%s", rep, num[0],
                                   num[1], with_cas ? " " : "", with_cas ? num[2] : "");
                mcr__line L;
                mcr__proto_parse_line(line, (size_t)len, &L);
                errno = 0;
                unsigned long long fl = strtoull(num[0], NULL, 10);
                int fl_ok = errno == 0 && fl <= UINT32_MAX;
                errno = 0;
                unsigned long long by = strtoull(num[1], NULL, 10);
                int by_ok = errno == 0 && by <= (1ull << 40);
                errno = 0;
                unsigned long long ca = strtoull(num[2], NULL, 10);
                int ca_ok = errno == 0;
                if (!fl_ok || !by_ok || (with_cas && !ca_ok)) {
                    ck_assert_msg(L.kind == MCR__L_BAD, "\"%s\": kind %d, expected BAD", line,
                                  (int)L.kind);
                    continue;
                }
                ck_assert_msg(L.kind == MCR__L_VALUE, "\"%s\": kind %d", line, (int)L.kind);
                ck_assert_uint_eq(L.flags, fl);
                ck_assert_uint_eq(L.bytes, by);
                ck_assert_int_eq(L.has_cas, with_cas);
                if (with_cas)
                    ck_assert_uint_eq(L.cas, ca);
            }
    /* every byte after a number: a digit lengthens it; anything else is
     * not a VALUE line (a space makes two, which memcached never sends) */
    static const struct {
        const char *fmt, *field;
        unsigned base; /* the number with the byte a digit: base * 10 + digit */
    } after[] = {{"VALUE key 123%c 45 6789012345", "flags", 123},
                 {"VALUE key 1 45%c 6789012345", "bytes", 45}};
    for (size_t a = 0; a < sizeof(after) / sizeof(after[0]); a++)
        for (int b = 1; b < 256; b++) {
            int len = snprintf(line, sizeof(line), after[a].fmt, (char)b);
            mcr__line L;
            mcr__proto_parse_line(line, (size_t)len, &L);
            if (b >= '0' && b <= '9') {
                ck_assert_int_eq(L.kind, MCR__L_VALUE);
                ck_assert_uint_eq(a == 0 ? L.flags : L.bytes,
                                  after[a].base * 10u + (unsigned)(b - '0'));
            } else {
                ck_assert_msg(L.kind == MCR__L_BAD, "byte 0x%02x after %s: kind %d", b,
                              after[a].field, (int)L.kind);
            }
        }
}
END_TEST

/* ================================================================== framing */

/* A reader as the pool's: lines, data blocks within `limit`, blocks over it
 * dropped as they come. It writes what it read into `out`, one event each. */
typedef struct reader {
    uint64_t limit;
    mcr__proto_skip skip;
    char out[16384];
    size_t len;
} reader;

static void say(reader *rd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(reader *rd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(rd->out + rd->len, sizeof(rd->out) - rd->len, fmt, ap);
    va_end(ap);
    ck_assert(n >= 0 && (size_t)n < sizeof(rd->out) - rd->len);
    rd->len += (size_t)n;
}

static void describe(reader *rd, const mcr__line *L)
{
    say(rd, "[%d", (int)L->kind);
    if (L->key != NULL)
        say(rd, " k=%.*s", (int)L->key_len, L->key);
    if (L->opaque != NULL)
        say(rd, " O=%.*s", (int)L->opaque_len, L->opaque);
    if (L->text != NULL)
        say(rd, " t=%.*s", (int)L->text_len, L->text);
    if (L->has_flags)
        say(rd, " f=%" PRIu32, L->flags);
    if (L->has_cas)
        say(rd, " c=%" PRIu64, L->cas);
    if (L->kind == MCR__L_VALUE || L->kind == MCR__L_VA)
        say(rd, " b=%" PRIu64, L->bytes);
    if (L->kind == MCR__L_NUMBER)
        say(rd, " n=%" PRIu64, L->number);
}

/* One event: 1 (read one), 0 (more bytes needed), -1 (the stream is bad). */
static int read_one(reader *rd, mcr__inbuf *in)
{
    if (rd->skip.left > 0) {
        int rc = mcr__proto_skip_run(&rd->skip, in);
        if (rc == 1)
            say(rd, "(dropped)");
        return rc;
    }
    const char *line;
    size_t len;
    int rc = mcr__proto_peek_line(in, &line, &len);
    if (rc <= 0)
        return rc;
    mcr__line L;
    mcr__proto_parse_line(line, len, &L);
    if (L.kind == MCR__L_BAD)
        return -1;
    if (L.kind != MCR__L_VALUE && L.kind != MCR__L_VA) {
        describe(rd, &L);
        say(rd, "]");
        mcr__inbuf_drain(in, len + 2);
        return 1;
    }
    uint64_t bytes = L.bytes;
    if (bytes > rd->limit) {
        describe(rd, &L);
        say(rd, " too big]");
        mcr__inbuf_drain(in, len + 2);
        mcr__proto_skip_start(&rd->skip, bytes);
        return 1;
    }
    /* the line's pointers stay valid while its block is looked at: the
     * pool reads the flags and CAS from the line after it */
    const char *data;
    rc = mcr__proto_peek_block(in, len, bytes, &data);
    if (rc <= 0)
        return rc;
    ck_assert_ptr_eq(data, line + len + 2);
    describe(rd, &L);
    say(rd, " d=%.*s]", (int)bytes, data);
    mcr__inbuf_drain(in, len + 2 + (size_t)bytes + 2);
    return 1;
}

/* Read all that `in` allows: the last read_one() result (0 or -1). */
static int read_all(reader *rd, mcr__inbuf *in)
{
    int rc;
    while ((rc = read_one(rd, in)) == 1) {
    }
    return rc;
}

/* Feed s in chunks of every size; the reading must not depend on the
 * split, and the buffer never holds an over-limit value. */
static void check_splits(const char *name, const char *s, size_t n, uint64_t limit, int bad,
                         size_t max_line)
{
    reader whole;
    memset(&whole, 0, sizeof(whole));
    whole.limit = limit;
    mcr__inbuf *in = in_new();
    ck_assert_ptr_nonnull(in);
    in_add(in, s, n);
    int end = read_all(&whole, in);
    ck_assert_msg(end == (bad ? -1 : 0), "%s: read whole: %d", name, end);
    if (!bad)
        ck_assert_msg(mcr__inbuf_length(in) == 0, "%s: %zu bytes left", name,
                      mcr__inbuf_length(in));
    in_free(in);

    for (size_t cs = 1; cs <= n; cs++) {
        reader rd;
        memset(&rd, 0, sizeof(rd));
        rd.limit = limit;
        in = in_new();
        size_t peak = 0, peak_cap = 0;
        int rc = 0;
        for (size_t off = 0; off < n && rc >= 0; off += cs) {
            in_add(in, s + off, n - off < cs ? n - off : cs);
            if (mcr__inbuf_length(in) > peak)
                peak = mcr__inbuf_length(in);
            if (in->cap > peak_cap)
                peak_cap = in->cap;
            rc = read_all(&rd, in);
        }
        EXPECT_MSG(rc == end, "%s, chunks of %zu: ended %d, whole %d", name, cs, rc, end);
        EXPECT_MSG(rd.len == whole.len && memcmp(rd.out, whole.out, rd.len) == 0,
                   "%s, chunks of %zu: read\n%.*s\nwhole:\n%.*s", name, cs, (int)rd.len, rd.out,
                   (int)whole.len, whole.out);
        /* held at most: a chunk, a line and a block within the limit */
        EXPECT_MSG(peak <= cs + max_line + 2 + limit + 2, "%s, chunks of %zu: %zu bytes held",
                   name, cs, peak);
        /* and its capacity: what it held, and one step */
        EXPECT_MSG(peak_cap <= cs + max_line + 2 + limit + 2 + TEST_STEP,
                   "%s, chunks of %zu: a buffer of %zu bytes", name, cs, peak_cap);
        if (!bad)
            EXPECT_UINT(mcr__inbuf_length(in), ==, 0);
        in_free(in);
    }
}

static const char text_replies[] =
    "VALUE k1 5 3\r\nabc\r\n"
    "VALUE k2 0 0\r\n\r\n"                                 /* an empty value */
    "VALUE k3 4294967295 4 18446744073709551615\r\nab\r\n\r\n" /* CRLF inside the data */
    "END\r\n"
    "STORED\r\nNOT_STORED\r\nEXISTS\r\nNOT_FOUND\r\nDELETED\r\nTOUCHED\r\nOK\r\n"
    "42\r\n"
    "VERSION 1.6.21\r\n"
    "STAT pid 1\r\nSTAT uptime 5\r\nEND\r\n"
    "ERROR\r\nCLIENT_ERROR bad data chunk\r\nSERVER_ERROR out of memory\r\n";

static const char meta_replies[] =
    "VA 5 f7 c9 O1 kfoo t-1\r\nhello\r\n"
    "EN O2\r\nHD O3\r\nNS O4\r\nEX O5\r\nNF O6\r\nMN\r\n"
    "VA 2 O7\r\n10\r\n" /* ma's number */
    "VA 0 f0 O8\r\n\r\n";

START_TEST(test_frame_splits)
{
    check_splits("text", text_replies, sizeof(text_replies) - 1, 1024, 0, 64);
    check_splits("meta", meta_replies, sizeof(meta_replies) - 1, 1024, 0, 64);

    reader rd;
    memset(&rd, 0, sizeof(rd));
    rd.limit = 1024;
    mcr__inbuf *in = in_new();
    in_add(in, text_replies, sizeof(text_replies) - 1);
    ck_assert_int_eq(read_all(&rd, in), 0);
    rd.out[rd.len] = '\0';
    ck_assert_msg(strstr(rd.out, "k=k3 f=4294967295 c=18446744073709551615 b=4 d=ab\r\n]") != NULL,
                  "%s", rd.out);
    ck_assert_msg(strstr(rd.out, "k=k2 f=0 b=0 d=]") != NULL, "%s", rd.out);
    ck_assert_msg(strstr(rd.out, "n=42") != NULL, "%s", rd.out);
    in_free(in);
}
END_TEST

/* A block not ended by CRLF, a line no memcached sends, a line with no end:
 * errors at every split, after the same good events. */
START_TEST(test_frame_bad)
{
    static const char no_crlf[] = "VALUE a 0 1\r\nx\r\nVALUE k 0 3\r\nabcd\r\nEND\r\n";
    static const char garbage[] = "STORED\r\nHELLO WORLD\r\n";
    static const char bare_lf[] = "STORED\r\nEND\n";
    check_splits("block without CRLF", no_crlf, sizeof(no_crlf) - 1, 1024, 1, 64);
    check_splits("garbage", garbage, sizeof(garbage) - 1, 1024, 1, 64);

    /* a bare LF is no end of line: waits, until too long for a line */
    char endless[MCR__PROTO_MAX_LINE + 16];
    memcpy(endless, bare_lf, sizeof(bare_lf) - 1);
    memset(endless + sizeof(bare_lf) - 1, 'x', sizeof(endless) - (sizeof(bare_lf) - 1));
    check_splits("no end of line", endless, sizeof(endless), 1024, 1,
                 MCR__PROTO_MAX_LINE + 2);
}
END_TEST

/* A value over the limit is dropped as it arrives (never held whole, the
 * buffer bounded by a chunk and a line), its CRLF checked, and the replies
 * after it read in step. */
START_TEST(test_frame_too_big)
{
    enum { BIG = 600, LIMIT = 100 };
    char s[BIG + 256];
    size_t n = 0;
    n += (size_t)snprintf(s + n, sizeof(s) - n, "VALUE small 0 5\r\nhello\r\nVALUE big 1 %d\r\n",
                          BIG);
    memset(s + n, 'x', BIG);
    n += BIG;
    n += (size_t)snprintf(s + n, sizeof(s) - n, "\r\nVALUE after 0 2\r\nok\r\nEND\r\n");
    check_splits("text too big", s, n, LIMIT, 0, 64);

    reader rd;
    memset(&rd, 0, sizeof(rd));
    rd.limit = LIMIT;
    mcr__inbuf *in = in_new();
    in_add(in, s, n);
    ck_assert_int_eq(read_all(&rd, in), 0);
    rd.out[rd.len] = '\0';
    ck_assert_msg(strstr(rd.out, "k=big f=1 b=600 too big](dropped)[") != NULL, "%s", rd.out);
    ck_assert_msg(strstr(rd.out, "k=after f=0 b=2 d=ok]") != NULL, "%s", rd.out);
    in_free(in);

    /* at the limit: held and read; one over: dropped */
    char at[LIMIT + 64];
    size_t an = (size_t)snprintf(at, sizeof(at), "VA %d f0 O1\r\n", LIMIT);
    memset(at + an, 'y', LIMIT);
    an += LIMIT;
    memcpy(at + an, "\r\nMN\r\n", 6);
    an += 6;
    memset(&rd, 0, sizeof(rd));
    rd.limit = LIMIT;
    in = in_new();
    in_add(in, at, an);
    ck_assert_int_eq(read_all(&rd, in), 0);
    rd.out[rd.len] = '\0';
    ck_assert_msg(strstr(rd.out, "too big") == NULL && strstr(rd.out, " d=yyy") != NULL, "%s",
                  rd.out);
    in_free(in);
    memset(&rd, 0, sizeof(rd));
    rd.limit = LIMIT - 1;
    in = in_new();
    in_add(in, at, an);
    ck_assert_int_eq(read_all(&rd, in), 0);
    rd.out[rd.len] = '\0';
    ck_assert_msg(strstr(rd.out, "too big](dropped)") != NULL, "%s", rd.out);
    in_free(in);
    check_splits("meta at the limit", at, an, LIMIT, 0, 64);
    check_splits("meta over the limit", at, an, LIMIT - 1, 0, 64);

    /* the dropped block must still end in CRLF */
    s[n - strlen("\r\nVALUE after 0 2\r\nok\r\nEND\r\n")] = 'z';
    check_splits("too big, bad end", s, n, LIMIT, 1, 64);
    static const char lf_only[] = "VALUE big 0 200\r\n";
    char t[sizeof(lf_only) + 200 + 8];
    memcpy(t, lf_only, sizeof(lf_only) - 1);
    memset(t + sizeof(lf_only) - 1, 'q', 200);
    memcpy(t + sizeof(lf_only) - 1 + 200, "\rxEND\r\n", 7);
    check_splits("too big, CR then no LF", t, sizeof(lf_only) - 1 + 200 + 7, LIMIT, 1, 64);
}
END_TEST

/* A skip of 0 data bytes checks only the CRLF; one fed byte by byte ends
 * exactly at its CRLF. */
START_TEST(test_skip_edges)
{
    mcr__proto_skip sk;
    mcr__inbuf *in = in_new();
    mcr__proto_skip_start(&sk, 0);
    ck_assert_int_eq(mcr__proto_skip_run(&sk, in), 0);
    in_add(in, "\r", 1);
    ck_assert_int_eq(mcr__proto_skip_run(&sk, in), 0);
    in_add(in, "\nEND\r\n", 6);
    ck_assert_int_eq(mcr__proto_skip_run(&sk, in), 1);
    ck_assert_uint_eq(mcr__inbuf_length(in), 5); /* the next line is left */
    mcr__inbuf_drain(in, 5);

    mcr__proto_skip_start(&sk, 3);
    for (const char *p = "abc\r"; *p; p++) {
        in_add(in, p, 1);
        ck_assert_int_eq(mcr__proto_skip_run(&sk, in), 0);
        ck_assert_uint_eq(mcr__inbuf_length(in), 0);
    }
    in_add(in, "\n", 1);
    ck_assert_int_eq(mcr__proto_skip_run(&sk, in), 1);
    ck_assert_int_eq(mcr__proto_skip_run(&sk, in), 1); /* done stays done */

    mcr__proto_skip_start(&sk, 1);
    in_add(in, "a\n\r", 3);
    ck_assert_int_eq(mcr__proto_skip_run(&sk, in), -1);
    in_free(in);
}
END_TEST

/* The input buffer: a read's room comes from the front once parsed bytes
 * free it; the buffer grows to fit a block known to be coming (not by
 * doubling), and is given back (trimmed) once it holds little. */
START_TEST(test_inbuf)
{
    enum { STEP = 100, KEEP = 400, BIG = 1000 };
    mcr__inbuf in;
    memset(&in, 0, sizeof(in));
    size_t room, len;
    const char *line, *data;

    /* the first room is one step */
    char *d = mcr__inbuf_room(&in, STEP, &room);
    ck_assert_ptr_nonnull(d);
    ck_assert_uint_eq(room, STEP);
    ck_assert_uint_eq(in.cap, STEP);
    memcpy(d, "END\r\nST", 7);
    in.len += 7;
    ck_assert_int_eq(mcr__proto_peek_line(&in, &line, &len), 1);
    ck_assert_uint_eq(len, 3);
    mcr__inbuf_drain(&in, len + 2);
    ck_assert_uint_eq(in.off, 5);
    /* the tail is short of a step: "ST" moves to the front, no growth */
    d = mcr__inbuf_room(&in, STEP, &room);
    ck_assert_uint_eq(in.off, 0);
    ck_assert_uint_eq(in.len, 2);
    ck_assert_uint_eq(in.cap, STEP);
    ck_assert_uint_eq(room, STEP - 2);
    ck_assert(memcmp(in.data, "ST", 2) == 0);
    memcpy(d, "ORED\r\n", 6);
    in.len += 6;
    ck_assert_int_eq(mcr__proto_peek_line(&in, &line, &len), 1);
    ck_assert(len == 6 && memcmp(line, "STORED", 6) == 0);
    mcr__inbuf_drain(&in, len + 2);
    ck_assert_uint_eq(in.off, 0); /* empty: back to the front */
    ck_assert_uint_eq(in.len, 0);

    /* a value of BIG bytes: the buffer grows to fit its line and block */
    char s[BIG + 64];
    size_t n = (size_t)snprintf(s, sizeof(s), "VALUE k 0 %d\r\n", BIG);
    size_t ll = n - 2, need = n + BIG + 2;
    memset(s + n, 'v', BIG);
    n += BIG;
    memcpy(s + n, "\r\nEN", 4);
    n += 4;
    size_t fed = 0;
    int rc = 0;
    while (fed < n) {
        d = mcr__inbuf_room(&in, STEP, &room);
        ck_assert_ptr_nonnull(d);
        size_t k = n - fed < room ? n - fed : room;
        memcpy(d, s + fed, k);
        in.len += k;
        fed += k;
        ck_assert_uint_le(in.cap, need > 2 * STEP ? need : 2 * STEP);
        rc = mcr__proto_peek_line(&in, &line, &len);
        ck_assert_int_ge(rc, 0);
        if (rc == 1) {
            ck_assert_uint_eq(len, ll);
            rc = mcr__proto_peek_block(&in, len, BIG, &data);
            ck_assert_int_ge(rc, 0);
            if (rc == 0)
                ck_assert_uint_eq(in.need, need);
            else
                break;
        }
    }
    ck_assert_int_eq(rc, 1);
    ck_assert_uint_eq(in.cap, need); /* fitted, not doubled */
    ck_assert_ptr_eq(data, line + ll + 2);
    ck_assert(data[0] == 'v' && data[BIG - 1] == 'v');
    mcr__inbuf_drain(&in, ll + 2 + BIG + 2);
    ck_assert_uint_eq(in.need, 0);
    ck_assert_uint_eq(fed, need); /* the room stopped at the block's end */
    ck_assert_uint_eq(mcr__inbuf_length(&in), 0);
    /* what comes after it is kept; trimming moves it to a small buffer */
    d = mcr__inbuf_room(&in, STEP, &room);
    ck_assert_uint_eq(room, STEP);
    memcpy(d, s + fed, n - fed);
    in.len += n - fed;
    fed = n;
    mcr__inbuf_trim(&in, KEEP);
    ck_assert_uint_eq(in.cap, KEEP / 4);
    ck_assert_uint_eq(in.off, 0);
    ck_assert_uint_eq(mcr__inbuf_length(&in), fed - need);
    ck_assert(memcmp(in.data, s + need, fed - need) == 0);
    mcr__inbuf_trim(&in, KEEP); /* within KEEP: kept */
    ck_assert_uint_eq(in.cap, KEEP / 4);
    mcr__inbuf_free(&in);
    ck_assert_ptr_null(in.data);

    /* an empty buffer over KEEP is given back whole */
    d = mcr__inbuf_room(&in, 2 * KEEP, &room);
    ck_assert_ptr_nonnull(d);
    mcr__inbuf_trim(&in, KEEP);
    ck_assert_ptr_null(in.data);
    ck_assert_uint_eq(in.cap, 0);
    /* and a full one is kept */
    d = mcr__inbuf_room(&in, 2 * KEEP, &room);
    memset(d, 'x', room);
    in.len += room;
    mcr__inbuf_trim(&in, KEEP);
    ck_assert_uint_eq(in.cap, 2 * KEEP);
    mcr__inbuf_free(&in);
}
END_TEST

/* ================================================================== writing */

static void expect_wire(const mcr__wire *w, const char *want)
{
    struct evbuffer *out = evbuffer_new();
    ck_assert_int_eq(mcr__proto_write(out, w), MCR_OK);
    size_t n = evbuffer_get_length(out);
    char *got = malloc(n + 1);
    ck_assert_ptr_nonnull(got);
    evbuffer_remove(out, got, n);
    got[n] = '\0';
    ck_assert_msg(n == strlen(want) && memcmp(got, want, n) == 0, "op %s (%s): wrote \"%s\"",
                  mcr_op_name(w->op), w->proto == MCR_PROTO_META ? "meta" : "text", got);
    free(got);
    evbuffer_free(out);
}

/* w reset to op/proto, one key (keys[0]), prefix "p:". */
static mcr__wire *wire(mcr__wire *w, mcr_op op, mcr_protocol proto, const char **keys,
                       size_t *lens)
{
    memset(w, 0, sizeof(*w));
    w->op = op;
    w->proto = proto;
    w->keys = keys;
    w->key_lens = lens;
    w->nkeys = 1;
    w->prefix = "p:";
    w->prefix_len = 2;
    return w;
}

/* ================================================================== one-pass VALUE lines */

/* Whether two parsed lines say the same (every field the parser sets). */
static int same_line(const mcr__line *a, const mcr__line *b)
{
    return a->kind == b->kind && a->key == b->key && a->key_len == b->key_len &&
           a->opaque == b->opaque && a->opaque_len == b->opaque_len && a->text == b->text &&
           a->text_len == b->text_len && a->bytes == b->bytes && a->number == b->number &&
           a->cas == b->cas && a->flags == b->flags && a->ttl == b->ttl &&
           a->has_cas == b->has_cas && a->has_flags == b->has_flags && a->has_ttl == b->has_ttl;
}

/* mcr__proto_peek_value() on `in` against mcr__proto_peek_line() and
 * mcr__proto_parse_line(): when it takes a line, the same line, length and
 * fields. Returns what it returned. */
static int peek_value_agrees(const mcr__inbuf *in, const char *what)
{
    const char *vl = NULL, *line = NULL;
    size_t vlen = 0, len = 0;
    mcr__line V, L;
    int v = mcr__proto_peek_value(in, &vl, &vlen, &V);
    ck_assert_msg(v == 0 || v == 1, "%s: peek_value returned %d", what, v);
    if (v == 0)
        return 0;
    ck_assert_msg(mcr__proto_peek_line(in, &line, &len) == 1, "%s: a VALUE line not framed", what);
    ck_assert_msg(vl == line && vlen == len, "%s: line of %zu bytes, framing says %zu", what, vlen,
                  len);
    mcr__proto_parse_line(line, len, &L);
    ck_assert_msg(same_line(&V, &L), "%s: \"%.*s\" read otherwise (kind %d against %d)", what,
                  (int)len, line, (int)V.kind, (int)L.kind);
    return 1;
}

/* Plain VALUE lines are taken in one pass, at every length that holds
 * them whole, and never before their CRLF is in. */
START_TEST(test_peek_value)
{
    static const char *const plain[] = {
        "VALUE k 0 0\r\n",
        "VALUE key:1 7 100\r\n",
        "VALUE a\x7f\xff 4294967295 1099511627776 9999999999999999999\r\n",
        "VALUE k 0 5 1234567890123456789\r\n",
        "VALUE 0123456789abcdef0123456789 12 3 4\r\nrest\r\n",
    };
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
        size_t n = strlen(plain[i]), line = (size_t)(strstr(plain[i], "\r\n") - plain[i]);
        for (size_t cut = 0; cut <= n; cut++) {
            mcr__inbuf *in = in_new();
            in_add(in, plain[i], cut);
            int v = peek_value_agrees(in, plain[i]);
            ck_assert_msg(v == (cut >= line + 2), "\"%s\" cut at %zu: %d", plain[i], cut, v);
            in_free(in);
        }
    }
    /* less plain: left to the general parser (which may accept them) */
    static const char *const other[] = {
        "VALUE k 0 0\n",        "VALUE k 0 0\r\r\n",     "VALUE k  0 0\r\n",
        "VALUE k 0 0 \r\n",     "VALUE k\t0 0\r\n",      "VALUE k 4294967296 0\r\n",
        "VALUE k 0 1099511627777\r\n", "VALUE k 0 12345678901234567890\r\n",
        "VALUE k 0\r\n",        "VALUE  k 0 0\r\n",      "VALUE k 0 0 1 2\r\n",
        "VALUE k 0 0 1x\r\n",   "VALUE k 0 0x\r\n",      "VALUEk 0 0\r\n",
        "END\r\n",              "VALUE k\n 0 0\r\n",     "value k 0 0\r\n",
    };
    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
        mcr__inbuf *in = in_new();
        in_add(in, other[i], strlen(other[i]));
        ck_assert_msg(peek_value_agrees(in, other[i]) == 0, "\"%s\" taken in one pass", other[i]);
        in_free(in);
    }
    /* a key that ends the line at MCR__PROTO_MAX_LINE, and one byte over */
    for (size_t over = 0; over <= 1; over++) {
        char buf[MCR__PROTO_MAX_LINE + 16];
        size_t klen = MCR__PROTO_MAX_LINE - strlen("VALUE  0 0") + over;
        memcpy(buf, "VALUE ", 6);
        memset(buf + 6, 'k', klen);
        memcpy(buf + 6 + klen, " 0 0\r\n", 6);
        mcr__inbuf *in = in_new();
        in_add(in, buf, 6 + klen + 6);
        ck_assert_int_eq(peek_value_agrees(in, "a long line"), over ? 0 : 1);
        in_free(in);
    }
}
END_TEST

/* Random lines near the VALUE form (fields of 0..21 digits, spaces, tabs,
 * control bytes, CR and LF where they should not be, cut anywhere):
 * whatever mcr__proto_peek_value() takes, the framing and the general
 * parser read the same. */
START_TEST(test_peek_value_random)
{
    static const char pieces[] = " \t\r\n\x01\x7f\x80" "A" "x09";
    tu_rng rng;
    tu_rng_init(&rng, 0x70726f74);
    size_t taken = 0;
    for (int round = 0; round < 20000; round++) {
        char buf[160];
        size_t n = 0;
        memcpy(buf, "VALUE ", 6);
        n = 6;
        int fields = 3 + (int)(tu_rand(&rng) % 3);
        for (int f = 0; f < fields && n < 120; f++) {
            size_t w = f == 0 ? 1 + tu_rand(&rng) % 12 : tu_rand(&rng) % 22;
            for (size_t k = 0; k < w; k++)
                buf[n++] = f == 0 ? (char)('a' + tu_rand(&rng) % 26)
                                  : (char)('0' + tu_rand(&rng) % 10);
            if (tu_rand(&rng) % 16 == 0)
                buf[n++] = pieces[tu_rand(&rng) % (sizeof(pieces) - 1)];
            if (f + 1 < fields)
                buf[n++] = ' ';
        }
        if (tu_rand(&rng) % 8 != 0) {
            buf[n++] = '\r';
            buf[n++] = '\n';
        }
        memcpy(buf + n, "abc\r\n", 5);
        n += 5;
        size_t cut = tu_rand(&rng) % 4 == 0 ? tu_rand(&rng) % (n + 1) : n;
        mcr__inbuf *in = in_new();
        in_add(in, buf, cut);
        taken += (size_t)peek_value_agrees(in, "random line");
        in_free(in);
    }
    /* most rounds make a plain line: the one-pass reader must take some */
    ck_assert_msg(taken > 1000, "only %zu of 20000 lines taken in one pass", taken);
}
END_TEST

START_TEST(test_write)
{
    const char *k1[] = {"a"}, *k3[] = {"a", "bb", "c"};
    size_t l1[] = {1}, l3[] = {1, 2, 1};
    mcr__wire w;
#define W(OP, PROTO) wire(&w, (OP), (PROTO), k1, l1)

    expect_wire(W(MCR_OP_GET, MCR_PROTO_TEXT), "get p:a\r\n");
    W(MCR_OP_GETS, MCR_PROTO_TEXT);
    w.keys = k3, w.key_lens = l3, w.nkeys = 3;
    expect_wire(&w, "gets p:a p:bb p:c\r\n");
    W(MCR_OP_GAT, MCR_PROTO_TEXT)->exptime = 60;
    expect_wire(&w, "gat 60 p:a\r\n");
    static const struct {
        mcr_op op;
        const char *want;
    } stores[] = {
        {MCR_OP_SET, "set p:a 7 30 3\r\nxyz\r\n"},
        {MCR_OP_ADD, "add p:a 7 30 3\r\nxyz\r\n"},
        {MCR_OP_REPLACE, "replace p:a 7 30 3\r\nxyz\r\n"},
        {MCR_OP_APPEND, "append p:a 7 30 3\r\nxyz\r\n"},
        {MCR_OP_PREPEND, "prepend p:a 7 30 3\r\nxyz\r\n"},
        {MCR_OP_CAS, "cas p:a 7 30 3 99\r\nxyz\r\n"},
    };
    for (size_t i = 0; i < sizeof(stores) / sizeof(stores[0]); i++) {
        W(stores[i].op, MCR_PROTO_TEXT);
        w.value = "xyz", w.value_len = 3, w.flags = 7, w.exptime = 30, w.cas = 99;
        expect_wire(&w, stores[i].want);
    }
    expect_wire(W(MCR_OP_DELETE, MCR_PROTO_TEXT), "delete p:a\r\n");
    W(MCR_OP_INCR, MCR_PROTO_TEXT)->delta = 5;
    expect_wire(&w, "incr p:a 5\r\n");
    W(MCR_OP_TOUCH, MCR_PROTO_TEXT)->exptime = 9;
    expect_wire(&w, "touch p:a 9\r\n");
    W(MCR_OP_STATS, MCR_PROTO_TEXT)->nkeys = 0;
    expect_wire(&w, "stats\r\n");
    expect_wire(W(MCR_OP_FLUSH_ALL, MCR_PROTO_TEXT), "flush_all\r\n");
    expect_wire(W(MCR_OP_NOOP, MCR_PROTO_TEXT), "version\r\n");

    W(MCR_OP_GET, MCR_PROTO_META)->opaque = 5;
    expect_wire(&w, "mg p:a v f t O5\r\n");
    W(MCR_OP_GETS, MCR_PROTO_META);
    w.keys = k3, w.key_lens = l3, w.nkeys = 3, w.opaque = 10;
    expect_wire(&w, "mg p:a v f t c O10 q\r\nmg p:bb v f t c O11 q\r\nmg p:c v f t c O12 q\r\nmn\r\n");
    W(MCR_OP_GAT, MCR_PROTO_META)->exptime = 60;
    w.opaque = 1;
    expect_wire(&w, "mg p:a v f t O1 T60\r\n");
    W(MCR_OP_CAS, MCR_PROTO_META);
    w.value = "xyz", w.value_len = 3, w.flags = 7, w.exptime = 30, w.cas = 99, w.opaque = 2;
    expect_wire(&w, "ms p:a 3 F7 T30 c MS O2 C99\r\nxyz\r\n");
    W(MCR_OP_ADD, MCR_PROTO_META);
    w.value = "", w.value_len = 0, w.opaque = 3;
    expect_wire(&w, "ms p:a 0 F0 T0 c ME O3\r\n\r\n");
    W(MCR_OP_DELETE, MCR_PROTO_META)->opaque = 4;
    expect_wire(&w, "md p:a O4\r\n");
    W(MCR_OP_DELETE, MCR_PROTO_META)->opaque = 4;
    w.cas = 77; /* a delete by CAS */
    expect_wire(&w, "md p:a C77 O4\r\n");
    W(MCR_OP_DECR, MCR_PROTO_META)->delta = 2;
    w.opaque = 6;
    expect_wire(&w, "ma p:a D2 MD v O6\r\n");
    expect_wire(W(MCR_OP_NOOP, MCR_PROTO_META), "mn\r\n");
    expect_wire(W(MCR_OP_VERSION, MCR_PROTO_META), "version\r\n");
#undef W
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("proto");
    TCase *tc = tcase_create("proto");
    tcase_set_timeout(tc, 60); /* every split of every stream: seconds under sanitizers */
    tcase_add_test(tc, test_line_kinds);
    tcase_add_test(tc, test_line_bad);
    tcase_add_test(tc, test_line_limit);
    tcase_add_test(tc, test_key_and_opaque);
    tcase_add_test(tc, test_key_every_byte);
    tcase_add_test(tc, test_value_key_lengths);
    tcase_add_test(tc, test_value_numbers);
    tcase_add_test(tc, test_frame_splits);
    tcase_add_test(tc, test_peek_value);
    tcase_add_test(tc, test_peek_value_random);
    tcase_add_test(tc, test_frame_bad);
    tcase_add_test(tc, test_frame_too_big);
    tcase_add_test(tc, test_skip_edges);
    tcase_add_test(tc, test_inbuf);
    tcase_add_test(tc, test_write);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
