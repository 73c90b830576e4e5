/* SPDX-License-Identifier: BSD-3-Clause */
/* twemproxy.c: nutcracker 0.5.0 configurations read with libyaml, and their pools' placement. */
/*
 * What is reproduced, and where each rule comes from (nutcracker 0.5.0's
 * nc_conf.c, and the Debian nutcracker binary through
 * test/test_compat_twemproxy.c, which checks both acceptance with
 * `nutcracker -t` and placement against real memcached servers):
 *
 * File. nutcracker validates the stream three times before it reads a
 * value: exactly one document; no directive, document marker, flow
 * collection, anchor, alias or tag token; a root mapping of pool names, each
 * mapping to a mapping of "key: value" scalars with exactly one sequence of
 * scalars. We read the libyaml event stream once and refuse the same things
 * where they appear, so the message can point at them. Scalars are raw text:
 * nutcracker never resolves YAML types, and refuses an empty scalar.
 *
 * Values. Numbers are nc_atoi(): decimal digits only, no sign, no spaces.
 * Booleans are exactly "true" or "false". Hash and distribution names are
 * compared exactly. A server line is split from its end (conf_add_server):
 * the name after the last space, the weight after the last ':', the port
 * after the ':' before it; a line starting with '/' is a unix socket
 * "/path:weight [name]". The ketama name of a server without one is its host
 * when the port is 11211, else "host:port".
 *
 * Pool checks (conf_validate_pool, conf_validate_server, in this order):
 * listen present, server_connections not 0, redis_auth only with redis,
 * at least one server, no two servers with one ketama name. Then across
 * pools: no two with one listen text, no two with one name.
 *
 * Server order. conf_validate_server sorts the servers with
 * string_compare() on their ketama names (length first, then bytes) to find
 * duplicates, and keeps that order: it is the pool's server order.
 *
 * Pool options. nutcracker arms no timer when its timeout is 0 or -1
 * (msg_tmo_insert), and ejects a server once its failure count, incremented
 * first, is not below server_failure_limit (server_failure in nc_server.c),
 * so a limit of 0 acts as 1; mcr_twem_fill_pool_options maps accordingly.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "internal.h"
#include "mcroute_twemproxy.h"
#include "mcroute_pool.h"

/* ---------------------------------------------------------------- limits */

/* nutcracker's port used without being written in the ketama name
 * (CONF_DEFAULT_KETAMA_PORT, for libmemcached compatibility). */
#define TWEM_KETAMA_PORT 11211
/* A file larger than this is not a configuration (and /dev/zero would
 * never end). */
#define TWEM_FILE_MAX (64u * 1024 * 1024)
/* Longest user text quoted in a message. */
#define QUOTE_MAX 64
/* Length of the pool list in mcr_twem_pool_index's message. */
#define POOL_LIST_MAX 120

/* nutcracker's hash names (HASH_CODEC order) and mcroute's hash for each. */
static const struct {
    const char *name;
    mcr_hash hash;
} twem_hashes[] = {
    {"one_at_a_time", MCR_HASH_DEFAULT}, {"md5", MCR_HASH_MD5},
    {"crc16", MCR_HASH_CRC16},           {"crc32", MCR_HASH_CRC},
    {"crc32a", MCR_HASH_CRC32A},         {"fnv1_64", MCR_HASH_FNV1_64},
    {"fnv1a_64", MCR_HASH_FNV1A_64},     {"fnv1_32", MCR_HASH_FNV1_32},
    {"fnv1a_32", MCR_HASH_FNV1A_32},     {"hsieh", MCR_HASH_HSIEH},
    {"murmur", MCR_HASH_MURMUR},         {"jenkins", MCR_HASH_JENKINS},
};
#define TWEM_HASH_COUNT (sizeof(twem_hashes) / sizeof(twem_hashes[0]))
#define TWEM_DEFAULT_HASH 6 /* fnv1a_64 */

/* nutcracker's distribution names (DIST_CODEC order = mcr_twem_distribution). */
static const char *const twem_dists[] = {"ketama", "modula", "random"};
#define TWEM_DIST_COUNT 3

/* How a directive's value is read. */
typedef enum {
    KIND_LISTEN,
    KIND_SERVERS,
    KIND_HASH,
    KIND_HASH_TAG,
    KIND_DIST,
    KIND_NUM,
    KIND_BOOL,
    KIND_AUTH
} dir_kind;

/* nutcracker 0.5.0's conf_commands, with the option each one sets. */
static const struct {
    const char *name;
    dir_kind kind;
    int opt; /* mcr_twem_option, or -1 */
} twem_directives[] = {
    {"listen", KIND_LISTEN, MCR_TWEM_LISTEN_PORT},
    {"hash", KIND_HASH, MCR_TWEM_HASH},
    {"hash_tag", KIND_HASH_TAG, -1},
    {"distribution", KIND_DIST, MCR_TWEM_DISTRIBUTION},
    {"timeout", KIND_NUM, MCR_TWEM_TIMEOUT},
    {"backlog", KIND_NUM, MCR_TWEM_BACKLOG},
    {"client_connections", KIND_NUM, MCR_TWEM_CLIENT_CONNECTIONS},
    {"redis", KIND_BOOL, MCR_TWEM_REDIS},
    {"tcpkeepalive", KIND_BOOL, MCR_TWEM_TCPKEEPALIVE},
    {"redis_auth", KIND_AUTH, -1},
    {"redis_db", KIND_NUM, MCR_TWEM_REDIS_DB},
    {"preconnect", KIND_BOOL, MCR_TWEM_PRECONNECT},
    {"auto_eject_hosts", KIND_BOOL, MCR_TWEM_AUTO_EJECT_HOSTS},
    {"server_connections", KIND_NUM, MCR_TWEM_SERVER_CONNECTIONS},
    {"server_retry_timeout", KIND_NUM, MCR_TWEM_SERVER_RETRY_TIMEOUT},
    {"server_failure_limit", KIND_NUM, MCR_TWEM_SERVER_FAILURE_LIMIT},
    {"servers", KIND_SERVERS, -1},
};
#define TWEM_DIRECTIVE_COUNT (sizeof(twem_directives) / sizeof(twem_directives[0]))

/* nutcracker's defaults (nc_conf.h CONF_DEFAULT_*), by mcr_twem_option. */
static const int64_t twem_defaults[MCR_TWEM_OPTION_COUNT] = {
    [MCR_TWEM_HASH] = MCR_HASH_FNV1A_64,
    [MCR_TWEM_DISTRIBUTION] = MCR_TWEM_DIST_KETAMA,
    [MCR_TWEM_TIMEOUT] = -1,
    [MCR_TWEM_BACKLOG] = 512,
    [MCR_TWEM_CLIENT_CONNECTIONS] = 0,
    [MCR_TWEM_REDIS] = 0,
    [MCR_TWEM_REDIS_DB] = 0,
    [MCR_TWEM_PRECONNECT] = 0,
    [MCR_TWEM_AUTO_EJECT_HOSTS] = 0,
    [MCR_TWEM_SERVER_CONNECTIONS] = 1,
    [MCR_TWEM_SERVER_RETRY_TIMEOUT] = 30000,
    [MCR_TWEM_SERVER_FAILURE_LIMIT] = 2,
    [MCR_TWEM_TCPKEEPALIVE] = 0,
    [MCR_TWEM_LISTEN_PORT] = 0,
    [MCR_TWEM_LISTEN_PERM] = -1,
};

/* ---------------------------------------------------------------- state */

/* A 1-based position in the file, for messages. */
typedef struct twem_pos {
    size_t line;
    size_t col;
} twem_pos;

typedef struct twem_server {
    char *text;     /* the line as written, for messages */
    char *host;     /* host, or the socket path */
    int port;       /* 0 for a unix socket */
    uint32_t weight;
    char *name;     /* written name (possibly empty), or NULL */
    char *kname;    /* ketama name: the sort key and the label base */
    size_t kname_len;
    twem_pos pos;
} twem_server;

typedef struct twem_pool {
    char *name;
    twem_pos pos;                       /* of the pool's name */
    int64_t opt[MCR_TWEM_OPTION_COUNT]; /* effective values */
    twem_pos opt_pos[MCR_TWEM_OPTION_COUNT];
    bool opt_set[MCR_TWEM_OPTION_COUNT];
    char *text[MCR_TWEM_TEXT_COUNT];    /* owned strings, NULL when unset;
                                           not the two names below */
    const char *hash_name;              /* static: nutcracker's name */
    const char *dist_name;              /* static */
    bool tag_set, auth_set, servers_set;
    twem_pos auth_pos;                  /* of redis_auth, for its message */
    twem_server *servers;               /* nutcracker's order once validated */
    size_t nservers;
    size_t cap;
} twem_pool;

struct mcr_twem {
    char *source; /* path or buffer name, for messages */
    twem_pool *pools;
    size_t npools;
    size_t cap;
};

/* ---------------------------------------------------------------- helpers */

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d != NULL) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* Fill err with "SOURCE:LINE:COL: " and a formatted message; returns code.
 * A zero line leaves the position out. */
static int twem_error(mcr_error *err, const char *src, twem_pos pos, int code,
                      const char *fmt, ...) MCR__PRINTF(5, 6);
static int twem_error(mcr_error *err, const char *src, twem_pos pos, int code,
                      const char *fmt, ...)
{
    char msg[MCR_ERROR_MESSAGE_SIZE];
    char qs[QUOTE_MAX + 8];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    mcr__quote(qs, sizeof(qs), src, strlen(src));
    if (pos.line == 0)
        return mcr__error(err, code, "%s: %s", qs, msg);
    return mcr__error(err, code, "%s:%zu:%zu: %s", qs, pos.line, pos.col, msg);
}

static const char *q(char *buf, size_t cap, const char *s, size_t len)
{
    return mcr__quote(buf, cap, s, len);
}

/* nc_atoi(): decimal digits only, at least one. Returns 0 and sets *out,
 * -1 when not a number, -2 when above INT_MAX (nutcracker wraps). */
static int parse_num(const char *s, size_t len, int64_t *out)
{
    int64_t v = 0;

    if (len == 0)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        if (v <= INT_MAX)
            v = v * 10 + (s[i] - '0');
    }
    if (v > INT_MAX)
        return -2;
    *out = v;
    return 0;
}

/* Last occurrence of c in s[0..len), or NULL. */
static const char *last_of(const char *s, size_t len, char c)
{
    while (len > 0) {
        len--;
        if (s[len] == c)
            return s + len;
    }
    return NULL;
}

static void server_free(twem_server *s)
{
    free(s->text);
    free(s->host);
    free(s->name);
    free(s->kname);
}

static void pool_free(twem_pool *p)
{
    free(p->name);
    for (int i = 0; i < MCR_TWEM_TEXT_COUNT; i++)
        free(p->text[i]);
    for (size_t i = 0; i < p->nservers; i++)
        server_free(&p->servers[i]);
    free(p->servers);
}

void mcr_twem_free(mcr_twem *twem)
{
    if (twem == NULL)
        return;
    for (size_t i = 0; i < twem->npools; i++)
        pool_free(&twem->pools[i]);
    free(twem->pools);
    free(twem->source);
    free(twem);
}

/* ---------------------------------------------------------------- values */

/* The parse state: the libyaml parser, its current event and the error. */
typedef struct pctx {
    yaml_parser_t parser;
    yaml_event_t ev;
    bool have_ev;
    const char *src;
    mcr_error *err;
    mcr_twem *t;
} pctx;

static twem_pos pos_of(const yaml_mark_t *m)
{
    twem_pos p = {m->line + 1, m->column + 1};
    return p;
}

/* Parse a "host:port:weight [name]" or "/path:weight [name]" line into s
 * (zeroed by the caller). */
static int parse_server(pctx *c, const twem_pool *p, const char *v, size_t len, twem_pos pos,
                        twem_server *s)
{
    char qb[QUOTE_MAX + 8], pb[QUOTE_MAX + 8];
    const char *end = v + len; /* end of what is left to split */
    const char *name = NULL, *weight, *port = NULL, *sep;
    size_t name_len = 0, weight_len, port_len = 0, host_len;
    bool is_unix = v[0] == '/';
    int64_t w, pt = 0;

    q(qb, sizeof(qb), v, len);
    q(pb, sizeof(pb), p->name, strlen(p->name));
    sep = last_of(v, len, ' ');
    if (sep != NULL) {
        name = sep + 1;
        name_len = (size_t)(end - name);
        end = sep;
    }
    sep = last_of(v, (size_t)(end - v), ':');
    if (sep == NULL)
        goto format;
    weight = sep + 1;
    weight_len = (size_t)(end - weight);
    end = sep;
    sep = last_of(v, (size_t)(end - v), ':');
    if (is_unix) {
        if (sep != NULL) /* nutcracker finds a third field and refuses */
            goto format;
    } else {
        if (sep == NULL)
            goto format;
        port = sep + 1;
        port_len = (size_t)(end - port);
        end = sep;
    }
    host_len = (size_t)(end - v);

    switch (parse_num(weight, weight_len, &w)) {
    case -1:
        return twem_error(c->err, c->src, pos, MCR_ERR_SYNTAX,
                          "pool \"%s\": server \"%s\": the weight is not a number%s", pb, qb,
                          memchr(weight, ' ', weight_len) != NULL
                              ? " (the name is what follows the last space)"
                              : "");
    case -2:
        return twem_error(c->err, c->src, pos, MCR_ERR_RANGE,
                          "pool \"%s\": server \"%s\": the weight is above %d", pb, qb, INT_MAX);
    default:
        break;
    }
    if (w == 0)
        return twem_error(c->err, c->src, pos, MCR_ERR_RANGE,
                          "pool \"%s\": server \"%s\": a weight of 0", pb, qb);
    if (!is_unix) {
        int rc = parse_num(port, port_len, &pt);
        if (rc == -1)
            return twem_error(c->err, c->src, pos, MCR_ERR_SYNTAX,
                              "pool \"%s\": server \"%s\": the port is not a number", pb, qb);
        if (rc != 0 || pt < 1 || pt > 65535)
            return twem_error(c->err, c->src, pos, MCR_ERR_RANGE,
                              "pool \"%s\": server \"%s\": the port is not in 1..65535", pb, qb);
    }

    s->pos = pos;
    s->port = (int)pt;
    s->weight = (uint32_t)w;
    s->text = dup_n(v, len);
    s->host = dup_n(v, host_len);
    if (name != NULL) {
        s->name = dup_n(name, name_len);
        s->kname = dup_n(name, name_len);
        s->kname_len = name_len;
    } else if (s->port == TWEM_KETAMA_PORT) {
        s->kname = dup_n(v, host_len);
        s->kname_len = host_len;
    } else {
        /* host:port; for a unix socket nutcracker takes "/path:" (the
         * port's length is 0), which only matters for duplicate names. */
        s->kname_len = is_unix ? host_len + 1 : (size_t)(port + port_len - v);
        s->kname = dup_n(v, s->kname_len);
    }
    if (s->text == NULL || s->host == NULL || s->kname == NULL ||
        (name != NULL && s->name == NULL)) {
        server_free(s);
        memset(s, 0, sizeof(*s));
        return mcr__error(c->err, MCR_ERR_NOMEM, "out of memory");
    }
    return MCR_OK;

format:
    return twem_error(c->err, c->src, pos, MCR_ERR_SYNTAX,
                      "pool \"%s\": server \"%s\" is not \"host:port:weight [name]\" nor "
                      "\"/path:weight [name]\"",
                      pb, qb);
}

/* Set directive `d` of pool p from the scalar v (len bytes). */
static int set_directive(pctx *c, twem_pool *p, size_t d, const char *v, size_t len,
                         twem_pos pos)
{
    char qb[QUOTE_MAX + 8], pb[QUOTE_MAX + 8];
    const char *dname = twem_directives[d].name;
    int opt = twem_directives[d].opt;

    q(qb, sizeof(qb), v, len);
    q(pb, sizeof(pb), p->name, strlen(p->name));
    switch (twem_directives[d].kind) {
    case KIND_LISTEN: {
        const char *host = v;
        size_t host_len = len;
        int64_t port = 0, perm = -1;
        if (v[0] == '/') {
            const char *sp = last_of(v, len, ' ');
            if (sp != NULL) {
                /* strtol(perm, NULL, 8) as nutcracker does: the longest
                 * octal prefix, 0 when there is none. */
                char tmp[32];
                size_t pl = (size_t)(v + len - (sp + 1));
                if (pl >= sizeof(tmp))
                    pl = sizeof(tmp) - 1;
                memcpy(tmp, sp + 1, pl);
                tmp[pl] = '\0';
                errno = 0;
                long m = strtol(tmp, NULL, 8);
                if (errno != 0 || m < 0 || m > 0777)
                    return twem_error(c->err, c->src, pos, MCR_ERR_RANGE,
                                      "pool \"%s\": listen \"%s\": the permissions are not an "
                                      "octal mode up to 0777",
                                      pb, qb);
                perm = m;
                host_len = (size_t)(sp - v);
            }
        } else {
            const char *colon = last_of(v, len, ':');
            if (colon == NULL)
                return twem_error(c->err, c->src, pos, MCR_ERR_SYNTAX,
                                  "pool \"%s\": listen \"%s\" is not \"host:port\" nor "
                                  "\"/path [permissions]\"",
                                  pb, qb);
            int rc = parse_num(colon + 1, (size_t)(v + len - colon - 1), &port);
            if (rc != 0 || port < 1 || port > 65535)
                return twem_error(c->err, c->src, pos, MCR_ERR_RANGE,
                                  "pool \"%s\": listen \"%s\": the port is not in 1..65535", pb,
                                  qb);
            host_len = (size_t)(colon - v);
            if (host_len == 0)
                return twem_error(c->err, c->src, pos, MCR_ERR_SYNTAX,
                                  "pool \"%s\": listen \"%s\": empty host", pb, qb);
        }
        p->text[MCR_TWEM_LISTEN] = dup_n(v, len);
        p->text[MCR_TWEM_LISTEN_HOST] = dup_n(host, host_len);
        if (p->text[MCR_TWEM_LISTEN] == NULL || p->text[MCR_TWEM_LISTEN_HOST] == NULL)
            return mcr__error(c->err, MCR_ERR_NOMEM, "out of memory");
        p->opt[MCR_TWEM_LISTEN_PORT] = port;
        p->opt[MCR_TWEM_LISTEN_PERM] = perm;
        p->opt_set[MCR_TWEM_LISTEN_PERM] = perm >= 0;
        p->opt_pos[MCR_TWEM_LISTEN_PERM] = pos;
        break;
    }
    case KIND_HASH: {
        size_t i;
        for (i = 0; i < TWEM_HASH_COUNT; i++)
            if (strlen(twem_hashes[i].name) == len && memcmp(twem_hashes[i].name, v, len) == 0)
                break;
        if (i == TWEM_HASH_COUNT)
            return twem_error(c->err, c->src, pos, MCR_ERR_UNKNOWN,
                              "pool \"%s\": unknown hash \"%s\" (one_at_a_time md5 crc16 crc32 "
                              "crc32a fnv1_64 fnv1a_64 fnv1_32 fnv1a_32 hsieh murmur jenkins)",
                              pb, qb);
        p->opt[opt] = twem_hashes[i].hash;
        p->hash_name = twem_hashes[i].name;
        break;
    }
    case KIND_DIST: {
        size_t i;
        for (i = 0; i < TWEM_DIST_COUNT; i++)
            if (strlen(twem_dists[i]) == len && memcmp(twem_dists[i], v, len) == 0)
                break;
        if (i == TWEM_DIST_COUNT)
            return twem_error(c->err, c->src, pos, MCR_ERR_UNKNOWN,
                              "pool \"%s\": unknown distribution \"%s\" (ketama modula random)",
                              pb, qb);
        p->opt[opt] = (int64_t)i;
        p->dist_name = twem_dists[i];
        break;
    }
    case KIND_HASH_TAG:
        if (len != 2)
            return twem_error(c->err, c->src, pos, MCR_ERR_SYNTAX,
                              "pool \"%s\": hash_tag \"%s\" is not two characters", pb, qb);
        p->text[MCR_TWEM_HASH_TAG] = dup_n(v, len);
        if (p->text[MCR_TWEM_HASH_TAG] == NULL)
            return mcr__error(c->err, MCR_ERR_NOMEM, "out of memory");
        p->tag_set = true;
        break;
    case KIND_AUTH:
        p->text[MCR_TWEM_REDIS_AUTH] = dup_n(v, len);
        if (p->text[MCR_TWEM_REDIS_AUTH] == NULL)
            return mcr__error(c->err, MCR_ERR_NOMEM, "out of memory");
        p->auth_set = true;
        p->auth_pos = pos;
        break;
    case KIND_NUM: {
        int64_t n;
        int rc = parse_num(v, len, &n);
        if (rc == -1)
            return twem_error(c->err, c->src, pos, MCR_ERR_SYNTAX,
                              "pool \"%s\": %s \"%s\" is not a number", pb, dname, qb);
        if (rc == -2)
            return twem_error(c->err, c->src, pos, MCR_ERR_RANGE,
                              "pool \"%s\": %s \"%s\" is above %d", pb, dname, qb, INT_MAX);
        p->opt[opt] = n;
        break;
    }
    case KIND_BOOL:
        if (len == 4 && memcmp(v, "true", 4) == 0)
            p->opt[opt] = 1;
        else if (len == 5 && memcmp(v, "false", 5) == 0)
            p->opt[opt] = 0;
        else
            return twem_error(c->err, c->src, pos, MCR_ERR_SYNTAX,
                              "pool \"%s\": %s \"%s\" is not \"true\" or \"false\"", pb, dname,
                              qb);
        break;
    case KIND_SERVERS: {
        if (p->nservers == p->cap) {
            size_t cap = p->cap ? 2 * p->cap : 8;
            twem_server *ns = realloc(p->servers, cap * sizeof(*ns));
            if (ns == NULL)
                return mcr__error(c->err, MCR_ERR_NOMEM, "out of memory");
            p->servers = ns;
            p->cap = cap;
        }
        twem_server *s = &p->servers[p->nservers];
        memset(s, 0, sizeof(*s));
        int rc = parse_server(c, p, v, len, pos, s);
        if (rc != MCR_OK)
            return rc;
        p->nservers++;
        return MCR_OK;
    }
    }
    if (opt >= 0) {
        p->opt_set[opt] = true;
        p->opt_pos[opt] = pos;
    }
    return MCR_OK;
}

/* ---------------------------------------------------------------- events */

/* Move to the next event; a libyaml error becomes MCR_ERR_SYNTAX naming its
 * position. Refuses what nutcracker's token check refuses. */
static int next_event(pctx *c)
{
    if (c->have_ev) {
        yaml_event_delete(&c->ev);
        c->have_ev = false;
    }
    if (!yaml_parser_parse(&c->parser, &c->ev)) {
        yaml_parser_t *y = &c->parser;
        twem_pos pos = pos_of(&y->problem_mark);
        if (y->error == YAML_MEMORY_ERROR)
            return mcr__error(c->err, MCR_ERR_NOMEM, "out of memory");
        if (y->error == YAML_READER_ERROR) {
            pos.line = 0;
            return twem_error(c->err, c->src, pos, MCR_ERR_SYNTAX,
                              "not YAML: %s at byte %zu", y->problem ? y->problem : "?",
                              y->problem_offset);
        }
        return twem_error(c->err, c->src, pos, MCR_ERR_SYNTAX, "not YAML: %s%s%s",
                          y->problem ? y->problem : "malformed", y->context ? " " : "",
                          y->context ? y->context : "");
    }
    c->have_ev = true;

    const yaml_event_t *e = &c->ev;
    twem_pos pos = pos_of(&e->start_mark);
    const char *what = NULL;
    switch (e->type) {
    case YAML_DOCUMENT_START_EVENT:
        if (e->data.document_start.version_directive != NULL ||
            e->data.document_start.tag_directives.start !=
                e->data.document_start.tag_directives.end)
            what = "a YAML directive (%...)";
        else if (!e->data.document_start.implicit)
            what = "a document start marker (---)";
        break;
    case YAML_DOCUMENT_END_EVENT:
        if (!e->data.document_end.implicit)
            what = "a document end marker (...)";
        break;
    case YAML_ALIAS_EVENT:
        what = "an alias (*name)";
        break;
    case YAML_SCALAR_EVENT:
        if (e->data.scalar.anchor != NULL)
            what = "an anchor (&name)";
        else if (e->data.scalar.tag != NULL)
            what = "a tag (!name)";
        else if (memchr(e->data.scalar.value, '\0', e->data.scalar.length) != NULL)
            return twem_error(c->err, c->src, pos, MCR_ERR_SYNTAX,
                              "a value with a NUL byte");
        else if (e->data.scalar.length == 0)
            return twem_error(c->err, c->src, pos, MCR_ERR_SYNTAX,
                              "an empty value (nutcracker refuses them)");
        break;
    case YAML_SEQUENCE_START_EVENT:
        if (e->data.sequence_start.anchor != NULL)
            what = "an anchor (&name)";
        else if (e->data.sequence_start.tag != NULL)
            what = "a tag (!name)";
        else if (e->data.sequence_start.style == YAML_FLOW_SEQUENCE_STYLE)
            what = "a flow sequence ([...])";
        break;
    case YAML_MAPPING_START_EVENT:
        if (e->data.mapping_start.anchor != NULL)
            what = "an anchor (&name)";
        else if (e->data.mapping_start.tag != NULL)
            what = "a tag (!name)";
        else if (e->data.mapping_start.style == YAML_FLOW_MAPPING_STYLE)
            what = "a flow mapping ({...})";
        break;
    default:
        break;
    }
    if (what != NULL)
        return twem_error(c->err, c->src, pos, MCR_ERR_SYNTAX, "%s: nutcracker does not allow it",
                          what);
    return MCR_OK;
}

static const char *event_noun(yaml_event_type_t t)
{
    switch (t) {
    case YAML_SCALAR_EVENT:
        return "a value";
    case YAML_SEQUENCE_START_EVENT:
        return "a sequence";
    case YAML_MAPPING_START_EVENT:
        return "a mapping";
    default:
        return "the end";
    }
}

static void pool_init(twem_pool *p)
{
    memset(p, 0, sizeof(*p));
    memcpy(p->opt, twem_defaults, sizeof(p->opt));
    p->hash_name = twem_hashes[TWEM_DEFAULT_HASH].name;
    p->dist_name = twem_dists[0];
}

static int kname_cmp(const void *a, const void *b)
{
    const twem_server *x = a, *y = b;
    if (x->kname_len != y->kname_len)
        return x->kname_len < y->kname_len ? -1 : 1;
    return memcmp(x->kname, y->kname, x->kname_len);
}

/* nutcracker's conf_validate_pool and conf_validate_server. */
static int validate_pool(pctx *c, twem_pool *p)
{
    char pb[QUOTE_MAX + 8], nb[QUOTE_MAX + 8];

    q(pb, sizeof(pb), p->name, strlen(p->name));
    if (p->text[MCR_TWEM_LISTEN] == NULL)
        return twem_error(c->err, c->src, p->pos, MCR_ERR_SYNTAX,
                          "pool \"%s\" has no \"listen\" directive", pb);
    if (p->opt_set[MCR_TWEM_SERVER_CONNECTIONS] && p->opt[MCR_TWEM_SERVER_CONNECTIONS] == 0)
        return twem_error(c->err, c->src, p->opt_pos[MCR_TWEM_SERVER_CONNECTIONS],
                          MCR_ERR_RANGE, "pool \"%s\": server_connections cannot be 0", pb);
    if (p->auth_set && !p->opt[MCR_TWEM_REDIS])
        return twem_error(c->err, c->src, p->auth_pos, MCR_ERR_INVALID,
                          "pool \"%s\": redis_auth is only valid in a pool with \"redis: true\"",
                          pb);
    if (p->nservers == 0)
        return twem_error(c->err, c->src, p->pos, MCR_ERR_EMPTY,
                          "pool \"%s\" has no \"servers\" sequence", pb);
    qsort(p->servers, p->nservers, sizeof(*p->servers), kname_cmp);
    for (size_t i = 1; i < p->nservers; i++) {
        const twem_server *a = &p->servers[i - 1], *b = &p->servers[i];
        if (kname_cmp(a, b) == 0) {
            const twem_server *later = a->pos.line > b->pos.line ? a : b;
            const twem_server *earlier = later == a ? b : a;
            return twem_error(c->err, c->src, later->pos, MCR_ERR_DUPLICATE,
                              "pool \"%s\": a second server named \"%s\" (line %zu has it)", pb,
                              q(nb, sizeof(nb), a->kname, a->kname_len), earlier->pos.line);
        }
    }
    return MCR_OK;
}

/* The body of one pool: "key: value" pairs and the servers sequence, up to
 * and including its MAPPING_END. */
static int parse_pool(pctx *c, twem_pool *p)
{
    char pb[QUOTE_MAX + 8], kb[QUOTE_MAX + 8];
    int rc;

    q(pb, sizeof(pb), p->name, strlen(p->name));
    for (;;) {
        if ((rc = next_event(c)) != MCR_OK)
            return rc;
        if (c->ev.type == YAML_MAPPING_END_EVENT)
            return validate_pool(c, p);
        twem_pos kpos = pos_of(&c->ev.start_mark);
        if (c->ev.type != YAML_SCALAR_EVENT)
            return twem_error(c->err, c->src, kpos, MCR_ERR_SYNTAX,
                              "pool \"%s\": %s where a directive name belongs", pb,
                              event_noun(c->ev.type));
        const char *key = (const char *)c->ev.data.scalar.value;
        size_t klen = c->ev.data.scalar.length;
        size_t d;
        for (d = 0; d < TWEM_DIRECTIVE_COUNT; d++)
            if (strlen(twem_directives[d].name) == klen &&
                memcmp(twem_directives[d].name, key, klen) == 0)
                break;
        q(kb, sizeof(kb), key, klen);
        if (d == TWEM_DIRECTIVE_COUNT)
            return twem_error(c->err, c->src, kpos, MCR_ERR_UNKNOWN,
                              "pool \"%s\": unknown directive \"%s\"", pb, kb);
        dir_kind kind = twem_directives[d].kind;
        int opt = twem_directives[d].opt;
        bool dup = (opt >= 0 && p->opt_set[opt]) || (kind == KIND_HASH_TAG && p->tag_set) ||
                   (kind == KIND_AUTH && p->auth_set) ||
                   (kind == KIND_SERVERS && p->servers_set);
        if (dup)
            return twem_error(c->err, c->src, kpos, MCR_ERR_DUPLICATE,
                              "pool \"%s\": directive \"%s\" given twice", pb, kb);

        if ((rc = next_event(c)) != MCR_OK)
            return rc;
        twem_pos vpos = pos_of(&c->ev.start_mark);
        if (kind == KIND_SERVERS) {
            if (c->ev.type != YAML_SEQUENCE_START_EVENT)
                return twem_error(c->err, c->src, vpos, MCR_ERR_SYNTAX,
                                  "pool \"%s\": \"servers\" must be a sequence of "
                                  "\"- host:port:weight [name]\" lines",
                                  pb);
            p->servers_set = true;
            for (;;) {
                if ((rc = next_event(c)) != MCR_OK)
                    return rc;
                if (c->ev.type == YAML_SEQUENCE_END_EVENT)
                    break;
                twem_pos spos = pos_of(&c->ev.start_mark);
                if (c->ev.type != YAML_SCALAR_EVENT)
                    return twem_error(c->err, c->src, spos, MCR_ERR_SYNTAX,
                                      "pool \"%s\": %s in \"servers\", where a "
                                      "\"host:port:weight [name]\" line belongs",
                                      pb, event_noun(c->ev.type));
                rc = set_directive(c, p, d, (const char *)c->ev.data.scalar.value,
                                   c->ev.data.scalar.length, spos);
                if (rc != MCR_OK)
                    return rc;
            }
            continue;
        }
        if (c->ev.type != YAML_SCALAR_EVENT)
            return twem_error(c->err, c->src, vpos, MCR_ERR_SYNTAX,
                              "pool \"%s\": directive \"%s\" has %s, not a single value", pb, kb,
                              event_noun(c->ev.type));
        rc = set_directive(c, p, d, (const char *)c->ev.data.scalar.value,
                           c->ev.data.scalar.length, vpos);
        if (rc != MCR_OK)
            return rc;
    }
}

static int strp_cmp(const void *a, const void *b)
{
    const char *const *x = a, *const *y = b;
    return strcmp(*x, *y);
}

/* Across pools: no two with one listen text or one name (conf_post_validate).
 * Reports the one further down the file. */
static int validate_pools(pctx *c)
{
    mcr_twem *t = c->t;
    char nb[QUOTE_MAX + 8], pb1[QUOTE_MAX + 8], pb2[QUOTE_MAX + 8];

    for (int pass = 0; pass < 2; pass++) {
        /* Sort pointers to the compared strings; the pool is found back
         * by address. */
        const char **keys = malloc(t->npools * sizeof(*keys));
        if (keys == NULL)
            return mcr__error(c->err, MCR_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < t->npools; i++)
            keys[i] = pass == 0 ? t->pools[i].text[MCR_TWEM_LISTEN] : t->pools[i].name;
        qsort(keys, t->npools, sizeof(*keys), strp_cmp);
        const char *dup = NULL;
        for (size_t i = 1; i < t->npools && dup == NULL; i++)
            if (strcmp(keys[i - 1], keys[i]) == 0)
                dup = keys[i];
        if (dup == NULL) {
            free(keys);
            continue;
        }
        const twem_pool *first = NULL, *second = NULL;
        for (size_t i = 0; i < t->npools && second == NULL; i++) {
            const char *k = pass == 0 ? t->pools[i].text[MCR_TWEM_LISTEN] : t->pools[i].name;
            if (strcmp(k, dup) == 0) {
                if (first == NULL)
                    first = &t->pools[i];
                else
                    second = &t->pools[i];
            }
        }
        free(keys);
        q(nb, sizeof(nb), dup, strlen(dup));
        q(pb1, sizeof(pb1), first->name, strlen(first->name));
        q(pb2, sizeof(pb2), second->name, strlen(second->name));
        if (pass == 0)
            return twem_error(c->err, c->src, second->pos, MCR_ERR_DUPLICATE,
                              "pool \"%s\" listens on \"%s\" as pool \"%s\" (line %zu) does",
                              pb2, nb, pb1, first->pos.line);
        return twem_error(c->err, c->src, second->pos, MCR_ERR_DUPLICATE,
                          "a second pool named \"%s\" (line %zu has it)", nb, first->pos.line);
    }
    return MCR_OK;
}

/* The whole stream. */
static int parse_stream(pctx *c)
{
    mcr_twem *t = c->t;
    twem_pos nowhere = {0, 0};
    int rc;

    if ((rc = next_event(c)) != MCR_OK) /* STREAM_START */
        return rc;
    if ((rc = next_event(c)) != MCR_OK)
        return rc;
    if (c->ev.type == YAML_STREAM_END_EVENT)
        return twem_error(c->err, c->src, nowhere, MCR_ERR_EMPTY, "no pool in the file");
    /* DOCUMENT_START */
    if ((rc = next_event(c)) != MCR_OK)
        return rc;
    if (c->ev.type != YAML_MAPPING_START_EVENT)
        return twem_error(c->err, c->src, pos_of(&c->ev.start_mark), MCR_ERR_SYNTAX,
                          "%s where the mapping of pools belongs", event_noun(c->ev.type));
    for (;;) {
        if ((rc = next_event(c)) != MCR_OK)
            return rc;
        if (c->ev.type == YAML_MAPPING_END_EVENT)
            break;
        twem_pos ppos = pos_of(&c->ev.start_mark);
        if (c->ev.type != YAML_SCALAR_EVENT)
            return twem_error(c->err, c->src, ppos, MCR_ERR_SYNTAX,
                              "%s where a pool name belongs", event_noun(c->ev.type));
        if (t->npools == t->cap) {
            size_t cap = t->cap ? 2 * t->cap : 4;
            twem_pool *np = realloc(t->pools, cap * sizeof(*np));
            if (np == NULL)
                return mcr__error(c->err, MCR_ERR_NOMEM, "out of memory");
            t->pools = np;
            t->cap = cap;
        }
        twem_pool *p = &t->pools[t->npools];
        pool_init(p);
        p->pos = ppos;
        p->name = dup_n((const char *)c->ev.data.scalar.value, c->ev.data.scalar.length);
        if (p->name == NULL)
            return mcr__error(c->err, MCR_ERR_NOMEM, "out of memory");
        t->npools++; /* owned from here on, freed with t on error */

        if ((rc = next_event(c)) != MCR_OK)
            return rc;
        if (c->ev.type != YAML_MAPPING_START_EVENT) {
            char pb[QUOTE_MAX + 8];
            return twem_error(c->err, c->src, pos_of(&c->ev.start_mark), MCR_ERR_SYNTAX,
                              "pool \"%s\" has %s where its directives (\"key: value\" lines) "
                              "belong",
                              q(pb, sizeof(pb), p->name, strlen(p->name)),
                              event_noun(c->ev.type));
        }
        if ((rc = parse_pool(c, p)) != MCR_OK)
            return rc;
    }
    if ((rc = next_event(c)) != MCR_OK) /* DOCUMENT_END */
        return rc;
    if ((rc = next_event(c)) != MCR_OK)
        return rc;
    if (c->ev.type != YAML_STREAM_END_EVENT)
        return twem_error(c->err, c->src, pos_of(&c->ev.start_mark), MCR_ERR_SYNTAX,
                          "a second YAML document: nutcracker reads exactly one");
    if (t->npools == 0) /* "{}" is refused as flow; kept for safety */
        return twem_error(c->err, c->src, nowhere, MCR_ERR_EMPTY, "no pool in the file");
    return validate_pools(c);
}

static int load(const unsigned char *data, size_t len, const char *src, mcr_twem **out,
                mcr_error *err)
{
    pctx c;
    int rc;

    memset(&c, 0, sizeof(c));
    c.err = err;
    c.src = src;
    c.t = calloc(1, sizeof(*c.t));
    if (c.t == NULL || (c.t->source = strdup(src)) == NULL) {
        free(c.t);
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory");
    }
    /* Pass 1 checks that the whole stream is YAML nutcracker allows, as its
     * pre-validation does, so a broken line is reported as such rather than
     * as what the structure looks like just before it. Pass 2 reads it. */
    rc = MCR_OK;
    for (int pass = 1; pass <= 2 && rc == MCR_OK; pass++) {
        if (!yaml_parser_initialize(&c.parser)) {
            mcr_twem_free(c.t);
            return mcr__error(err, MCR_ERR_NOMEM, "out of memory");
        }
        yaml_parser_set_input_string(&c.parser, data, len);
        if (pass == 1) {
            do
                rc = next_event(&c);
            while (rc == MCR_OK && c.ev.type != YAML_STREAM_END_EVENT);
        } else {
            rc = parse_stream(&c);
        }
        if (c.have_ev)
            yaml_event_delete(&c.ev);
        c.have_ev = false;
        yaml_parser_delete(&c.parser);
    }
    if (rc != MCR_OK) {
        mcr_twem_free(c.t);
        return rc;
    }
    *out = c.t;
    return MCR_OK;
}

int mcr_twem_load_buffer(const void *data, size_t len, const char *name, mcr_twem **out,
                         mcr_error *err)
{
    if ((data == NULL && len > 0) || out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL argument");
    return load(data != NULL ? data : (const void *)"", len, name != NULL ? name : "<buffer>",
                out, err);
}

int mcr_twem_load(const char *path, mcr_twem **out, mcr_error *err)
{
    char qp[QUOTE_MAX + 8];
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0;
    FILE *f;
    int rc;

    if (path == NULL || out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL argument");
    q(qp, sizeof(qp), path, strlen(path));
    f = fopen(path, "rb");
    if (f == NULL)
        return mcr__error(err, MCR_ERR_IO, "%s: %s", qp, strerror(errno));
    for (;;) {
        if (len == cap) {
            if (cap >= TWEM_FILE_MAX) {
                free(buf);
                fclose(f);
                return mcr__error(err, MCR_ERR_IO, "%s: larger than %u bytes", qp,
                                  TWEM_FILE_MAX);
            }
            cap = cap ? 2 * cap : 4096;
            unsigned char *nb = realloc(buf, cap);
            if (nb == NULL) {
                free(buf);
                fclose(f);
                return mcr__error(err, MCR_ERR_NOMEM, "out of memory");
            }
            buf = nb;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0) {
            if (ferror(f)) {
                int e = errno;
                free(buf);
                fclose(f);
                return mcr__error(err, MCR_ERR_IO, "%s: %s", qp, strerror(e));
            }
            break;
        }
    }
    fclose(f);
    rc = load(buf != NULL ? buf : (const unsigned char *)"", len, path, out, err);
    free(buf);
    return rc;
}

/* ---------------------------------------------------------------- getters */

const char *mcr_twem_source(const mcr_twem *twem)
{
    return twem == NULL ? NULL : twem->source;
}

size_t mcr_twem_pool_count(const mcr_twem *twem)
{
    return twem == NULL ? 0 : twem->npools;
}

const char *mcr_twem_pool_name(const mcr_twem *twem, size_t pool)
{
    if (twem == NULL || pool >= twem->npools)
        return NULL;
    return twem->pools[pool].name;
}

int mcr_twem_pool_index(const mcr_twem *twem, const char *name, size_t *out, mcr_error *err)
{
    char nb[QUOTE_MAX + 8], list[POOL_LIST_MAX + 8];
    size_t used = 0;

    if (twem == NULL || name == NULL || out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL argument");
    for (size_t i = 0; i < twem->npools; i++)
        if (strcmp(twem->pools[i].name, name) == 0) {
            *out = i;
            return MCR_OK;
        }
    list[0] = '\0';
    for (size_t i = 0; i < twem->npools; i++) {
        const char *pn = twem->pools[i].name;
        size_t need = strlen(pn) + (i ? 2 : 0);
        if (used + need > POOL_LIST_MAX) {
            snprintf(list + used, sizeof(list) - used, ", ...");
            break;
        }
        used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "", pn);
    }
    return mcr__error(err, MCR_ERR_UNKNOWN, "no pool \"%s\" in %s; its pools: %s",
                      q(nb, sizeof(nb), name, strlen(name)), twem->source, list);
}

int mcr_twem_pool_option(const mcr_twem *twem, size_t pool, mcr_twem_option opt, int64_t *value)
{
    if (twem == NULL || value == NULL || pool >= twem->npools || (int)opt < 0 ||
        opt >= MCR_TWEM_OPTION_COUNT)
        return MCR_ERR_INVALID;
    *value = twem->pools[pool].opt[opt];
    return MCR_OK;
}

int mcr_twem_pool_is_set(const mcr_twem *twem, size_t pool, mcr_twem_option opt)
{
    if (twem == NULL || pool >= twem->npools || (int)opt < 0 || opt >= MCR_TWEM_OPTION_COUNT)
        return 0;
    if (opt == MCR_TWEM_LISTEN_PORT)
        return 1;
    return twem->pools[pool].opt_set[opt] ? 1 : 0;
}

const char *mcr_twem_pool_text(const mcr_twem *twem, size_t pool, mcr_twem_text what)
{
    if (twem == NULL || pool >= twem->npools || (int)what < 0 || what >= MCR_TWEM_TEXT_COUNT)
        return NULL;
    if (what == MCR_TWEM_HASH_NAME)
        return twem->pools[pool].hash_name;
    if (what == MCR_TWEM_DISTRIBUTION_NAME)
        return twem->pools[pool].dist_name;
    return twem->pools[pool].text[what];
}

size_t mcr_twem_server_count(const mcr_twem *twem, size_t pool)
{
    if (twem == NULL || pool >= twem->npools)
        return 0;
    return twem->pools[pool].nservers;
}

int mcr_twem_server_get(const mcr_twem *twem, size_t pool, size_t i, mcr_twem_server *out)
{
    if (twem == NULL || out == NULL || pool >= twem->npools || i >= twem->pools[pool].nservers)
        return MCR_ERR_INVALID;
    const twem_server *s = &twem->pools[pool].servers[i];
    out->host = s->host;
    out->port = s->port;
    out->weight = s->weight;
    out->name = s->name;
    out->ketama_name = s->kname;
    out->line = s->pos.line;
    return MCR_OK;
}

/* ---------------------------------------------------------------- placement */

int mcr_twem_config(const mcr_twem *twem, size_t pool, mcr_config **out, mcr_error *err)
{
    char pb[QUOTE_MAX + 8], sb[QUOTE_MAX + 8];
    uint64_t total = 0;
    mcr_config *cfg;
    int rc;

    if (twem == NULL || out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL argument");
    if (pool >= twem->npools)
        return mcr__error(err, MCR_ERR_INVALID, "pool %zu does not exist (%s has %zu)", pool,
                          twem->source, twem->npools);
    const twem_pool *p = &twem->pools[pool];
    q(pb, sizeof(pb), p->name, strlen(p->name));
    if (p->opt[MCR_TWEM_DISTRIBUTION] == MCR_TWEM_DIST_RANDOM)
        return twem_error(err, twem->source, p->opt_pos[MCR_TWEM_DISTRIBUTION],
                          MCR_ERR_UNSUPPORTED,
                          "pool \"%s\": distribution random picks a server at random for "
                          "every request: no placement to reproduce",
                          pb);
    for (size_t i = 0; i < p->nservers; i++) {
        const twem_server *s = &p->servers[i];
        if (s->name != NULL && s->name[0] == '\0')
            return twem_error(err, twem->source, s->pos, MCR_ERR_UNSUPPORTED,
                              "pool \"%s\": server \"%s\" ends with a space, so nutcracker "
                              "names it \"\": mcroute's labels cannot be empty",
                              pb, q(sb, sizeof(sb), s->text, strlen(s->text)));
        if (s->port == 0)
            return twem_error(err, twem->source, s->pos, MCR_ERR_UNSUPPORTED,
                              "pool \"%s\": server \"%s\" is a unix socket: mcroute places "
                              "keys on TCP servers only",
                              pb, q(sb, sizeof(sb), s->text, strlen(s->text)));
        total += s->weight;
    }
    if (total > UINT32_MAX)
        return twem_error(err, twem->source, p->pos, MCR_ERR_UNSUPPORTED,
                          "pool \"%s\": a total weight of %llu overflows nutcracker's 32-bit "
                          "sum",
                          pb, (unsigned long long)total);

    cfg = mcr_config_new();
    if (cfg == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory");
    mcr_config_set_mode(cfg, p->opt[MCR_TWEM_DISTRIBUTION] == MCR_TWEM_DIST_MODULA
                                 ? MCR_MODE_TWEMPROXY_MODULA
                                 : MCR_MODE_TWEMPROXY_KETAMA);
    mcr_config_set_hash(cfg, (mcr_hash)p->opt[MCR_TWEM_HASH]);
    if (p->text[MCR_TWEM_HASH_TAG] != NULL)
        mcr_config_set_hash_tag(cfg, p->text[MCR_TWEM_HASH_TAG]);
    for (size_t i = 0; i < p->nservers; i++) {
        const twem_server *s = &p->servers[i];
        mcr_error e;
        rc = mcr_config_add_server_named(cfg, s->host, s->port, s->weight, s->name, &e);
        if (rc == MCR_OK)
            continue;
        mcr_config_free(cfg);
        q(sb, sizeof(sb), s->text, strlen(s->text));
        if (rc == MCR_ERR_DUPLICATE)
            return twem_error(err, twem->source, s->pos, rc,
                              "pool \"%s\": server \"%s\" has the address of another server "
                              "of the pool under another name: nutcracker allows it, mcroute's "
                              "config does not",
                              pb, sb);
        if (rc == MCR_ERR_NOMEM)
            return mcr__error(err, rc, "out of memory");
        return twem_error(err, twem->source, s->pos, rc, "pool \"%s\": server \"%s\": %s", pb,
                          sb, e.message);
    }
    *out = cfg;
    return MCR_OK;
}

int mcr_twem_ring(const mcr_twem *twem, size_t pool, mcr_ring **out, mcr_error *err)
{
    mcr_config *cfg = NULL;
    int rc;

    if (out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL argument");
    rc = mcr_twem_config(twem, pool, &cfg, err);
    if (rc != MCR_OK)
        return rc;
    rc = mcr_ring_new(cfg, out, err);
    mcr_config_free(cfg);
    return rc;
}

/* ---------------------------------------------------------------- pool options */

/* A written millisecond directive `opt` of pool `p` as a pool timeout:
 * nutcracker's 0 and -1 (not written) wait forever, which a pool cannot:
 * 0, the pool's default. Above a day: MCR_ERR_RANGE. */
static int twem_ms(const mcr_twem *twem, const twem_pool *p, mcr_twem_option opt,
                   const char *name, unsigned *out, mcr_error *err)
{
    char pb[QUOTE_MAX + 8];
    int64_t v = p->opt[opt];

    if (v > (int64_t)MCR_POOL_TIMEOUT_MAX_MS)
        return twem_error(err, twem->source, p->opt_pos[opt], MCR_ERR_RANGE,
                          "pool \"%s\": %s %lld ms is above the connection pool's limit of "
                          "%u ms (one day)",
                          q(pb, sizeof(pb), p->name, strlen(p->name)), name, (long long)v,
                          MCR_POOL_TIMEOUT_MAX_MS);
    *out = v > 0 ? (unsigned)v : 0;
    return MCR_OK;
}

int mcr_twem_fill_pool_options(const mcr_twem *twem, size_t pool, mcr_pool_options *opts,
                               mcr_error *err)
{
    char pb[QUOTE_MAX + 8];
    mcr_pool_options o;
    int64_t v;
    int rc;

    if (twem == NULL || opts == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL argument");
    if (pool >= twem->npools)
        return mcr__error(err, MCR_ERR_INVALID, "pool %zu does not exist (%s has %zu)", pool,
                          twem->source, twem->npools);
    const twem_pool *p = &twem->pools[pool];
    q(pb, sizeof(pb), p->name, strlen(p->name));
    if (p->opt[MCR_TWEM_REDIS])
        return twem_error(err, twem->source, p->opt_pos[MCR_TWEM_REDIS], MCR_ERR_UNSUPPORTED,
                          "pool \"%s\": a redis pool; the connection pool speaks the memcached "
                          "protocol only",
                          pb);
    o = *opts;

    v = p->opt[MCR_TWEM_SERVER_CONNECTIONS]; /* >= 1: the loader refuses 0 */
    if (v > (int64_t)MCR_POOL_CONNECTIONS_MAX)
        return twem_error(err, twem->source, p->opt_pos[MCR_TWEM_SERVER_CONNECTIONS],
                          MCR_ERR_RANGE,
                          "pool \"%s\": server_connections %lld is above the connection pool's "
                          "limit of %u per server",
                          pb, (long long)v, MCR_POOL_CONNECTIONS_MAX);
    o.connections = (unsigned)v;
    o.eager = p->opt[MCR_TWEM_PRECONNECT] != 0;

    /* One nutcracker timeout bounds both the connect and the reply. */
    rc = twem_ms(twem, p, MCR_TWEM_TIMEOUT, "timeout", &o.request_timeout_ms, err);
    if (rc != MCR_OK)
        return rc;
    o.connect_timeout_ms = o.request_timeout_ms;

    o.policy = p->opt[MCR_TWEM_AUTO_EJECT_HOSTS] ? MCR_POLICY_EJECT : MCR_POLICY_FAIL_FAST;

    /* nutcracker counts the failure, then ejects unless the count is below
     * the limit (server_failure in nc_server.c): 0 ejects at once, like 1. */
    v = p->opt[MCR_TWEM_SERVER_FAILURE_LIMIT];
    if (v > (int64_t)MCR_POOL_FAILURE_LIMIT_MAX)
        return twem_error(err, twem->source, p->opt_pos[MCR_TWEM_SERVER_FAILURE_LIMIT],
                          MCR_ERR_RANGE,
                          "pool \"%s\": server_failure_limit %lld is above the connection "
                          "pool's limit of %u",
                          pb, (long long)v, MCR_POOL_FAILURE_LIMIT_MAX);
    o.server_failure_limit = v > 0 ? (unsigned)v : 1;

    /* 0 retries at the next rebuild; a pool's 0 would mean its default. */
    rc = twem_ms(twem, p, MCR_TWEM_SERVER_RETRY_TIMEOUT, "server_retry_timeout",
                 &o.retry_timeout_ms, err);
    if (rc != MCR_OK)
        return rc;
    if (o.retry_timeout_ms == 0)
        o.retry_timeout_ms = 1;

    *opts = o;
    return MCR_OK;
}
