/* SPDX-License-Identifier: BSD-3-Clause */
/* lmc_options.c: libmemcached 1.1.4's option-string language (memcached()), scanned and parsed into an mcr_lmc. */
/*
 * The option language (memcached(), libmemcached's csl/scanner.l and
 * csl/parser.yy) is tokenised like its flex scanner: at each position the
 * longest match among the rules wins, ties go to the earlier rule, options
 * and keywords are case-insensitive, tabs, CR and LF between tokens are
 * skipped, and statements are separated by exactly one space. This is why
 * "--SERVER=ab" (a hostname needs 3 characters), "--SERVER=123" (a number)
 * and "--SERVER=md5" (a keyword) are errors there and here.
 *
 *
 * A string is parsed into a copy of the state (libmemcached.c), which
 * replaces the caller's only when every statement is accepted.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lmc_internal.h"

/* ---------------------------------------------------------------- scanner */

typedef enum tok_kind {
    T_EOF,
    T_SPACE,   /* ' ': the statement separator */
    T_EQ,      /* '=' */
    T_COMMA,   /* ',' */
    T_NUMBER,  /* [0-9]+ */
    T_PORT,    /* :[0-9]{1,5} */
    T_WEIGHT,  /* /?[0-9]{1,5} */
    T_SKIP,    /* [\t\r\n]: ignored */
    T_COMMENT, /* ^#.*$ */
    T_OPTION,  /* a known "--NAME" literal, id = index in `options` */
    T_KEYWORD, /* id = KW_* */
    T_UNKNOWN_OPTION, /* "--" [[:alnum:]]* */
    T_DIST,    /* id = LMC_DIST_* */
    T_HASH,    /* id = mcr_hash */
    T_IPADDRESS, /* ([0-9]{1,3}.){3}[0-9]{1,3} */
    T_WORD,    /* [[:alnum:]]["."[:alnum:]_-]+[[:alnum:]]: hostname or string */
    T_QUOTED,  /* L?"(\\.|[^\\"])*" */
    T_UNKNOWN  /* any other byte */
} tok_kind;

typedef struct tok {
    tok_kind kind;
    size_t start, len; /* in the input */
    int id;
} tok;

/* What follows an option literal in the grammar. */
typedef enum arg_kind {
    ARG_FLAG,      /* a boolean behaviour set to true */
    ARG_NONE,      /* accepted, does nothing (--USER-DATA, --FETCH-VERSION) */
    ARG_NUMBER,    /* a numeric behaviour: NUMBER, ignored */
    ARG_SERVER,    /* --SERVER= */
    ARG_SOCKET,    /* --SOCKET= */
    ARG_STRING,    /* --CONFIGURE-FILE= */
    ARG_NAMESPACE, /* --NAMESPACE= */
    ARG_DIST,      /* --DISTRIBUTION= */
    ARG_HASH       /* --HASH= */
} arg_kind;

/* Effects of the ARG_FLAG options that matter here. */
typedef enum flag_id {
    F_OTHER,
    F_BINARY_PROTOCOL,
    F_BUFFER_REQUESTS,
    F_HASH_WITH_NAMESPACE,
    F_SORT_HOSTS,
    F_USE_UDP,
    F_VERIFY_KEY
} flag_id;

/* The option literals of libmemcached 1.1.4's scanner, in its rule order.
 * `conn`: for an ARG_NUMBER or ARG_FLAG option that sets a connection
 * behaviour, its mcr_lmc_conn_behavior; 0 (NO_BLOCK, which no option sets)
 * for the others. */
static const struct option {
    const char *text;
    arg_kind arg;
    flag_id flag;
    int conn;
} options[] = {
    {"--SERVER=", ARG_SERVER, F_OTHER, 0},
    {"--SOCKET=", ARG_SOCKET, F_OTHER, 0},
    {"--BINARY-PROTOCOL", ARG_FLAG, F_BINARY_PROTOCOL, 0},
    {"--BUFFER-REQUESTS", ARG_FLAG, F_BUFFER_REQUESTS, 0},
    {"--CONFIGURE-FILE=", ARG_STRING, F_OTHER, 0},
    {"--CONNECT-TIMEOUT=", ARG_NUMBER, F_OTHER, MCR_LMC_CONNECT_TIMEOUT},
    {"--DISTRIBUTION=", ARG_DIST, F_OTHER, 0},
    {"--HASH-WITH-NAMESPACE", ARG_FLAG, F_HASH_WITH_NAMESPACE, 0},
    {"--HASH=", ARG_HASH, F_OTHER, 0},
    {"--IO-BYTES-WATERMARK=", ARG_NUMBER, F_OTHER, 0},
    {"--IO-KEY-PREFETCH=", ARG_NUMBER, F_OTHER, 0},
    {"--IO-MSG-WATERMARK=", ARG_NUMBER, F_OTHER, 0},
    {"--NOREPLY", ARG_FLAG, F_OTHER, 0},
    {"--NUMBER-OF-REPLICAS=", ARG_NUMBER, F_OTHER, 0},
    {"--POLL-TIMEOUT=", ARG_NUMBER, F_OTHER, MCR_LMC_POLL_TIMEOUT},
    {"--RANDOMIZE-REPLICA-READ", ARG_FLAG, F_OTHER, 0},
    {"--RCV-TIMEOUT=", ARG_NUMBER, F_OTHER, MCR_LMC_RCV_TIMEOUT},
    {"--REMOVE-FAILED-SERVERS=", ARG_NUMBER, F_OTHER, MCR_LMC_REMOVE_FAILED_SERVERS},
    {"--RETRY-TIMEOUT=", ARG_NUMBER, F_OTHER, MCR_LMC_RETRY_TIMEOUT},
    {"--SND-TIMEOUT=", ARG_NUMBER, F_OTHER, MCR_LMC_SND_TIMEOUT},
    {"--SOCKET-RECV-SIZE=", ARG_NUMBER, F_OTHER, 0},
    {"--SOCKET-SEND-SIZE=", ARG_NUMBER, F_OTHER, 0},
    {"--SORT-HOSTS", ARG_FLAG, F_SORT_HOSTS, 0},
    {"--SUPPORT-CAS", ARG_FLAG, F_OTHER, 0},
    {"--TCP-KEEPALIVE", ARG_FLAG, F_OTHER, 0},
    {"--TCP-KEEPIDLE", ARG_FLAG, F_OTHER, 0},
    {"--TCP-NODELAY", ARG_FLAG, F_OTHER, 0},
    {"--USE-UDP", ARG_FLAG, F_USE_UDP, 0},
    {"--USER-DATA", ARG_NONE, F_OTHER, 0},
    {"--VERIFY-KEY", ARG_FLAG, F_VERIFY_KEY, 0},
    {"--POOL-MIN=", ARG_NUMBER, F_OTHER, 0},
    {"--POOL-MAX=", ARG_NUMBER, F_OTHER, 0},
    {"--NAMESPACE=", ARG_NAMESPACE, F_OTHER, 0},
    {"--FETCH-VERSION", ARG_NONE, F_OTHER, 0},
};
#define NOPTIONS (sizeof(options) / sizeof(options[0]))

enum { KW_INCLUDE, KW_RESET, KW_DEBUG, KW_SERVERS, KW_END, KW_CSL_ERROR, KW_TRUE, KW_FALSE };
static const char *const keywords[] = {"INCLUDE", "RESET",     "DEBUG", "SERVERS",
                                       "END",     "CSL_ERROR", "TRUE",  "FALSE"};
#define NKEYWORDS (sizeof(keywords) / sizeof(keywords[0]))

static const struct {
    const char *text;
    int id;
} dist_words[] = {
    {"CONSISTENT", LMC_DIST_CONSISTENT},
    {"MODULA", LMC_DIST_MODULA},
    {"RANDOM", LMC_DIST_RANDOM},
};

/* The hash keywords of the scanner: no "default", no "murmur3". */
static const struct {
    const char *text;
    mcr_hash id;
} hash_words[] = {
    {"MD5", MCR_HASH_MD5},         {"CRC", MCR_HASH_CRC},         {"FNV1_64", MCR_HASH_FNV1_64},
    {"FNV1A_64", MCR_HASH_FNV1A_64}, {"FNV1_32", MCR_HASH_FNV1_32}, {"FNV1A_32", MCR_HASH_FNV1A_32},
    {"HSIEH", MCR_HASH_HSIEH},     {"MURMUR", MCR_HASH_MURMUR},   {"JENKINS", MCR_HASH_JENKINS},
};

/* [[:alnum:]] and [[:digit:]] of the C locale, as flex compiled them. */
static bool is_alnum(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Length of the case-insensitive literal `lit` at s, or 0. */
static size_t match_lit(const char *s, const char *lit)
{
    size_t i;
    for (i = 0; lit[i] != '\0'; i++)
        if (s[i] == '\0' || tolower((unsigned char)s[i]) != tolower((unsigned char)lit[i]))
            return 0;
    return i;
}

/* Number of leading decimal digits of s, at most `max`. */
static size_t digits(const char *s, size_t max)
{
    size_t n = 0;
    while (n < max && is_digit(s[n]))
        n++;
    return n;
}

/* ([0-9]{1,3}"."){3}[0-9]{1,3}, longest match, or 0. */
static size_t match_ip(const char *s)
{
    size_t p = 0;
    for (int g = 0; g < 3; g++) {
        size_t d = digits(s + p, 3);
        if (d == 0 || s[p + d] != '.')
            return 0;
        p += d + 1;
    }
    size_t d = digits(s + p, 3);
    return d == 0 ? 0 : p + d;
}

/* [[:alnum:]]["."[:alnum:]_-]+[[:alnum:]], longest match, or 0. The scanner
 * writes the middle class as ["."[:alnum:]_-]: inside a flex class the
 * quotes are literal, so a double quote may appear inside a word
 * ("--SERVER=ab\"cd" is the host ab"cd in libmemcached 1.1.4). */
static size_t match_word(const char *s)
{
    size_t run, best = 0;
    if (!is_alnum(s[0]))
        return 0;
    for (run = 1; is_alnum(s[run]) || s[run] == '.' || s[run] == '_' || s[run] == '-' ||
                  s[run] == '"';
         run++)
        if (run + 1 >= 3 && is_alnum(s[run]))
            best = run + 1;
    return best;
}

/* L?\"(\\.|[^\\"])*\", or 0. flex's '.' does not match a newline. */
static size_t match_quoted(const char *s)
{
    size_t p = 0;
    if (s[0] == 'L' || s[0] == 'l')
        p = 1;
    if (s[p] != '"')
        return 0;
    for (p++;; p++) {
        if (s[p] == '\0')
            return 0;
        if (s[p] == '"')
            return p + 1;
        if (s[p] == '\\') {
            if (s[p + 1] == '\0' || s[p + 1] == '\n')
                return 0;
            p++;
        }
    }
}

/* The next token at `pos` of `in`: the longest match, earliest rule on ties. */
static tok scan(const char *in, size_t pos)
{
    const char *s = in + pos;
    tok t = {T_EOF, pos, 0, 0};
    size_t n;

#define CANDIDATE(k, l, i)                                                                        \
    do {                                                                                          \
        size_t l_ = (l);                                                                          \
        if (l_ > t.len) {                                                                         \
            t.kind = (k);                                                                         \
            t.len = l_;                                                                           \
            t.id = (i);                                                                           \
        }                                                                                         \
    } while (0)

    if (*s == '\0')
        return t;
    if (*s == '=' || *s == ',' || *s == ' ')
        CANDIDATE(*s == '=' ? T_EQ : *s == ',' ? T_COMMA : T_SPACE, 1, 0);
    CANDIDATE(T_NUMBER, digits(s, SIZE_MAX), 0);
    if (s[0] == ':' && (n = digits(s + 1, 5)) > 0)
        CANDIDATE(T_PORT, n + 1, 0);
    if (s[0] == '/' && s[1] == '?' && (n = digits(s + 2, 5)) > 0)
        CANDIDATE(T_WEIGHT, n + 2, 0);
    if (*s == '\t' || *s == '\r' || *s == '\n')
        CANDIDATE(T_SKIP, 1, 0);
    if (*s == '#' && (pos == 0 || in[pos - 1] == '\n')) {
        /* ^#.*$: only at the start of a line, and only if a newline ends it
         * (flex's $ does not match at the end of the input). */
        const char *nl = strchr(s, '\n');
        if (nl != NULL)
            CANDIDATE(T_COMMENT, (size_t)(nl - s), 0);
    }
    for (size_t i = 0; i < NOPTIONS; i++)
        CANDIDATE(T_OPTION, match_lit(s, options[i].text), (int)i);
    for (size_t i = 0; i < NKEYWORDS; i++)
        CANDIDATE(T_KEYWORD, match_lit(s, keywords[i]), (int)i);
    if (s[0] == '-' && s[1] == '-') {
        for (n = 2; is_alnum(s[n]); n++)
            ;
        CANDIDATE(T_UNKNOWN_OPTION, n, 0);
    }
    for (size_t i = 0; i < sizeof(dist_words) / sizeof(dist_words[0]); i++)
        CANDIDATE(T_DIST, match_lit(s, dist_words[i].text), dist_words[i].id);
    for (size_t i = 0; i < sizeof(hash_words) / sizeof(hash_words[0]); i++)
        CANDIDATE(T_HASH, match_lit(s, hash_words[i].text), (int)hash_words[i].id);
    CANDIDATE(T_IPADDRESS, match_ip(s), 0);
    CANDIDATE(T_WORD, match_word(s), 0);
    CANDIDATE(T_QUOTED, match_quoted(s), 0);
    CANDIDATE(T_UNKNOWN, 1, 0);
#undef CANDIDATE
    return t;
}

/* ---------------------------------------------------------------- parser */

typedef struct parser {
    const char *in;
    size_t pos;       /* after the last token returned */
    size_t stmt;      /* start of the current statement, for messages */
    bool has_hash;    /* --HASH seen in this string (libmemcached: once per parse) */
    mcr_lmc *st;      /* the working copy */
    mcr_error *err;
} parser;

/* The next token that is not skipped whitespace. */
static tok next(parser *p)
{
    for (;;) {
        tok t = scan(p->in, p->pos);
        p->pos = t.start + t.len;
        if (t.kind != T_SKIP)
            return t;
    }
}

/* The token after the current position, not consumed. */
static tok peek(parser *p)
{
    size_t save = p->pos;
    tok t = next(p);
    p->pos = save;
    return t;
}

/* A token as text for messages, quoted, into buf. */
static const char *tok_desc(const parser *p, tok t, char *buf, size_t cap)
{
    if (t.kind == T_EOF)
        return "the end of the string";
    char q[QUOTE_MAX];
    snprintf(buf, cap, "\"%s\"", mcr__quote(q, sizeof(q), p->in + t.start, t.len));
    return buf;
}

/* Report an error about the current statement, quoting it up to the end of
 * token `at`: "libmemcached options at \"text\": message". */
static int fail(parser *p, int code, tok at, const char *fmt, ...) MCR__PRINTF(4, 5);
static int fail(parser *p, int code, tok at, const char *fmt, ...)
{
    char q[QUOTE_MAX], m[MCR_ERROR_MESSAGE_SIZE];
    size_t end = at.start + at.len;
    va_list ap;

    if (end < p->stmt)
        end = p->stmt;
    va_start(ap, fmt);
    vsnprintf(m, sizeof(m), fmt, ap);
    va_end(ap);
    return mcr__error(p->err, code, "libmemcached options at \"%s\": %s",
                      mcr__quote(q, sizeof(q), p->in + p->stmt, end - p->stmt), m);
}

/* A syntax error at token t (MCR_ERR_UNKNOWN if t is an unknown option). */
static int unexpected(parser *p, tok t, const char *expected)
{
    char d[QUOTE_MAX + 4];
    return fail(p, t.kind == T_UNKNOWN_OPTION ? MCR_ERR_UNKNOWN : MCR_ERR_SYNTAX, t,
                "expected %s, found %s", expected, tok_desc(p, t, d, sizeof(d)));
}

/* The value of a 1..5-digit PORT / WEIGHT token or a NUMBER (saturating). */
static unsigned long tok_number(const parser *p, tok t, size_t skip)
{
    unsigned long v = 0;
    for (size_t i = skip; i < t.len; i++) {
        v = v * 10 + (unsigned long)(p->in[t.start + i] - '0');
        if (v > 0xffffffffUL)
            v = 0xffffffffUL;
    }
    return v;
}

/* A NUMBER token as libmemcached's scanner reads it, atoi(): glibc's
 * strtol() saturating at LONG_MAX (64 bits here), then cut to an int (32
 * bits, modulo 2^32), then widened to the uint64_t of
 * memcached_behavior_set(). */
static uint64_t tok_atoi(const parser *p, tok t)
{
    uint64_t v = 0;
    for (size_t i = 0; i < t.len; i++) {
        unsigned d = (unsigned)(p->in[t.start + i] - '0');
        if (v > ((uint64_t)INT64_MAX - d) / 10) {
            v = (uint64_t)INT64_MAX;
            break;
        }
        v = v * 10 + d;
    }
    return (uint64_t)(int64_t)mcr__lmc_low_int32(v);
}

/* A "string" of the grammar: a WORD or a QUOTED string (contents without
 * the quotes, escapes kept as written, like libmemcached). */
static bool string_value(const parser *p, tok t, const char **s, size_t *len)
{
    if (t.kind == T_WORD) {
        *s = p->in + t.start;
        *len = t.len;
        return true;
    }
    if (t.kind == T_QUOTED) {
        /* libmemcached drops the first and the last byte: with the L prefix,
         * the opening quote stays part of the string. */
        *s = p->in + t.start + 1;
        *len = t.len - 2;
        return true;
    }
    return false;
}

/* --SERVER= (HOSTNAME | IPADDRESS) [PORT] [WEIGHT], then the server add. */
static int parse_server(parser *p)
{
    tok h = next(p), t;
    long port = MCR_DEFAULT_PORT;
    uint32_t weight = 1;
    char what[2 * QUOTE_MAX], q[QUOTE_MAX];

    if (h.kind != T_WORD && h.kind != T_IPADDRESS)
        return unexpected(p, h,
                          "a hostname (3 or more of [A-Za-z0-9._\"-], starting and ending with a "
                          "letter or digit, not all digits, not a keyword) or an IPv4 address");
    t = peek(p);
    if (t.kind == T_PORT) {
        next(p);
        port = (long)tok_number(p, t, 1);
        t = peek(p);
    }
    if (t.kind == T_WEIGHT) {
        next(p);
        weight = (uint32_t)tok_number(p, t, 2);
        t = peek(p);
    }
    if (t.kind != T_SPACE && t.kind != T_EOF) {
        size_t e = t.start;
        while (p->in[e] != '\0' && p->in[e] != ' ')
            e++;
        return fail(p, MCR_ERR_SYNTAX, t,
                    "unexpected \"%s\" after the server (the syntax is "
                    "--SERVER=host[:port][/?weight], port and weight of 1 to 5 digits)",
                    mcr__quote(q, sizeof(q), p->in + t.start, e - t.start));
    }
    snprintf(what, sizeof(what), "libmemcached options at \"%s\": ",
             mcr__quote(q, sizeof(q), p->in + p->stmt, p->pos - p->stmt));
    return mcr__lmc_add(p->st, p->in + h.start, h.len, port, weight, what, p->err);
}

/* --NAMESPACE= string, with memcached_set_namespace()'s checks. */
static int parse_namespace(parser *p)
{
    tok t = next(p);
    const char *s;
    size_t len;
    mcr_lmc *st = p->st;

    if (!string_value(p, t, &s, &len))
        return unexpected(p, t, "a namespace (a word or a \"quoted string\")");
    if (st->has_namespace)
        return fail(p, MCR_ERR_SYNTAX, t, "%s", "--NAMESPACE can only be given once");
    /* libmemcached namespace.cc: not empty, every byte isgraph() unless the
     * binary protocol is on, at most 127 bytes. */
    if (len == 0)
        return fail(p, MCR_ERR_SYNTAX, t, "%s", "the namespace is empty");
    if (!st->binary_protocol)
        for (size_t i = 0; i < len; i++)
            if (s[i] < 0x21 || s[i] > 0x7e)
                return fail(p, MCR_ERR_SYNTAX, t, "%s",
                            "the namespace has a byte that is not a printable non-space ASCII "
                            "character (allowed only after --BINARY-PROTOCOL)");
    if (len > LMC_NAMESPACE_MAX)
        return fail(p, MCR_ERR_TOO_LONG, t, "the namespace is longer than %d bytes", LMC_NAMESPACE_MAX);
    memcpy(st->ns, s, len);
    st->ns[len] = '\0';
    st->ns_len = len;
    st->has_namespace = true;
    return MCR_OK;
}

/* --DISTRIBUTION= (consistent | modula | random) [, hash]. */
static int parse_distribution(parser *p)
{
    tok t = next(p);
    char d[QUOTE_MAX + 4];

    if (t.kind != T_DIST)
        return fail(p, t.kind == T_WORD ? MCR_ERR_UNKNOWN : MCR_ERR_SYNTAX, t,
                    "unknown distribution %s (the option string knows consistent, modula, "
                    "random)",
                    tok_desc(p, t, d, sizeof(d)));
    int dist = t.id;
    int dist_hash = -1;
    tok at = t;
    if (peek(p).kind == T_COMMA) {
        next(p);
        at = next(p);
        if (at.kind != T_HASH)
            return fail(p, at.kind == T_WORD ? MCR_ERR_UNKNOWN : MCR_ERR_SYNTAX, at,
                        "unknown hash %s after the ',' (the option string knows md5, crc, "
                        "fnv1_64, fnv1a_64, fnv1_32, fnv1a_32, hsieh, murmur, jenkins)",
                        tok_desc(p, at, d, sizeof(d)));
        dist_hash = at.id;
    }
    if (dist == LMC_DIST_RANDOM)
        return fail(p, MCR_ERR_UNSUPPORTED, at, "%s",
                    "the random distribution cannot be reproduced");
    mcr__lmc_set_distribution(p->st, dist);
    if (dist_hash >= 0)
        p->st->dist_hash = (mcr_hash)dist_hash; /* ",hash" sets KETAMA_HASH only */
    return MCR_OK;
}

/* --HASH= hash, at most once per option string (libmemcached's Context). */
static int parse_hash(parser *p)
{
    tok t = next(p);
    char d[QUOTE_MAX + 4];

    if (t.kind != T_HASH)
        return fail(p, t.kind == T_WORD ? MCR_ERR_UNKNOWN : MCR_ERR_SYNTAX, t,
                    "unknown hash %s (the option string knows md5, crc, fnv1_64, fnv1a_64, "
                    "fnv1_32, fnv1a_32, hsieh, murmur, jenkins)",
                    tok_desc(p, t, d, sizeof(d)));
    if (p->has_hash)
        return fail(p, MCR_ERR_SYNTAX, t, "%s", "--HASH can only be given once");
    p->has_hash = true;
    p->st->key_hash = (mcr_hash)t.id; /* no rebuild */
    return MCR_OK;
}

/* A boolean option set to true: memcached_behavior_set(..., true). */
static int parse_flag(parser *p, tok t, flag_id f)
{
    mcr_lmc *st = p->st;
    switch (f) {
    case F_BINARY_PROTOCOL:
        st->binary_protocol = true;
        break;
    case F_BUFFER_REQUESTS:
        if (st->use_udp)
            return fail(p, MCR_ERR_INVALID, t, "%s",
                        "libmemcached refuses --BUFFER-REQUESTS after --USE-UDP");
        break;
    case F_HASH_WITH_NAMESPACE:
        st->hash_with_namespace = true;
        break;
    case F_SORT_HOSTS:
        st->sort_hosts = true;
        mcr__lmc_rebuild(st);
        break;
    case F_USE_UDP:
        st->use_udp = true;
        break;
    case F_VERIFY_KEY:
        if (st->binary_protocol)
            return fail(p, MCR_ERR_INVALID, t, "%s",
                        "libmemcached refuses --VERIFY-KEY after --BINARY-PROTOCOL");
        break;
    case F_OTHER:
        break;
    }
    return MCR_OK;
}

/* One statement. Sets *stop when END was read. */
static int parse_statement(parser *p, bool *stop)
{
    tok t = next(p), a;

    p->stmt = t.start;
    switch (t.kind) {
    case T_COMMENT:
        return MCR_OK;
    case T_KEYWORD:
        switch (t.id) {
        case KW_END:
            *stop = true;
            return MCR_OK;
        case KW_RESET: { /* memcached_reset(): back to a fresh memcached_st */
            mcr__lmc_clear_servers(p->st);
            mcr__lmc_defaults(p->st);
            return MCR_OK;
        }
        case KW_DEBUG: /* turns on the parser's trace in libmemcached */
            return MCR_OK;
        case KW_CSL_ERROR:
            return fail(p, MCR_ERR_SYNTAX, t, "%s", "CSL_ERROR asks for the parse to fail");
        case KW_INCLUDE:
            a = next(p);
            if (a.kind != T_SPACE)
                return unexpected(p, a, "a space and a file name after INCLUDE");
            a = next(p);
            if (a.kind != T_WORD && a.kind != T_QUOTED)
                return unexpected(p, a, "a file name after INCLUDE");
            return fail(p, MCR_ERR_UNSUPPORTED, a, "%s",
                        "INCLUDE reads a configuration file; give its options inline");
        default:
            return unexpected(p, t, "an option");
        }
    case T_UNKNOWN_OPTION: {
        size_t e = t.start;
        while (p->in[e] != '\0' && p->in[e] != ' ' && p->in[e] != '=' && e - t.start < 60)
            e++;
        char q[QUOTE_MAX];
        return fail(p, MCR_ERR_UNKNOWN, t, "unknown option \"%s\"",
                    mcr__quote(q, sizeof(q), p->in + t.start, e - t.start));
    }
    case T_OPTION:
        break;
    default:
        return unexpected(p, t, "an option (--NAME or --NAME=VALUE)");
    }

    const struct option *o = &options[t.id];
    switch (o->arg) {
    case ARG_FLAG:
        return parse_flag(p, t, o->flag);
    case ARG_NONE:
        return MCR_OK;
    case ARG_NUMBER:
        a = next(p);
        if (a.kind != T_NUMBER)
            return unexpected(p, a, "a decimal number");
        if (o->conn != 0)
            return mcr__lmc_conn_behavior(p->st, o->conn, tok_atoi(p, a), p->err);
        return MCR_OK;
    case ARG_SERVER:
        return parse_server(p);
    case ARG_SOCKET:
        a = next(p);
        if (a.kind != T_WORD && a.kind != T_QUOTED)
            return unexpected(p, a, "a socket path");
        if (peek(p).kind == T_WEIGHT)
            a = next(p);
        return fail(p, MCR_ERR_UNSUPPORTED, a, "%s",
                    "a UNIX socket server has no port and cannot be placed by mcroute");
    case ARG_STRING:
        a = next(p);
        if (a.kind != T_WORD && a.kind != T_QUOTED)
            return unexpected(p, a, "a file name");
        return fail(p, MCR_ERR_UNSUPPORTED, a, "%s",
                    "--CONFIGURE-FILE reads a configuration file; give its options inline");
    case ARG_NAMESPACE:
        return parse_namespace(p);
    case ARG_DIST:
        return parse_distribution(p);
    case ARG_HASH:
        return parse_hash(p);
    }
    return unexpected(p, t, "an option");
}

int mcr_lmc_parse_options(mcr_lmc *lmc, const char *options_string, mcr_error *err)
{
    mcr_lmc tmp;
    parser p;
    bool stop = false;
    int rc;

    if (lmc == NULL || options_string == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL mcr_lmc or option string");
    if (options_string[0] == '\0')
        return mcr__error(err, MCR_ERR_SYNTAX, "empty libmemcached option string");
    if (mcr__lmc_copy(&tmp, lmc) != MCR_OK)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory");
    p.in = options_string;
    p.pos = 0;
    p.stmt = 0;
    p.has_hash = false;
    p.st = &tmp;
    p.err = err;
    for (;;) {
        rc = parse_statement(&p, &stop);
        if (rc != MCR_OK || stop)
            break;
        tok t = next(&p);
        if (t.kind == T_EOF)
            break;
        if (t.kind != T_SPACE) {
            rc = unexpected(&p, t, "a single space or the end of the string after an option");
            break;
        }
    }
    if (rc != MCR_OK) {
        mcr__lmc_discard(&tmp);
        return rc;
    }
    mcr__lmc_commit(lmc, &tmp);
    return MCR_OK;
}
