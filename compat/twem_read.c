/* SPDX-License-Identifier: BSD-3-Clause */
/* twem_read.c: nutcracker 0.5.0 configurations read with libyaml into the model of twem_internal.h. */
/*
 * What is reproduced, and where each rule comes from (nutcracker 0.5.0's
 * nc_conf.c, and the Debian nutcracker binary through
 * test/test_compat_twem_parse.c, which checks acceptance with
 * `nutcracker -t`, and test/test_compat_twemproxy.c, placement against real
 * memcached servers):
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

 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "twem_internal.h"

/* ---------------------------------------------------------------- limits */

/* nutcracker's port used without being written in the ketama name
 * (CONF_DEFAULT_KETAMA_PORT, for libmemcached compatibility). */
#define TWEM_KETAMA_PORT 11211
/* A file larger than this is not a configuration (and /dev/zero would
 * never end). */
#define TWEM_FILE_MAX (64u * 1024 * 1024)

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

    twem_q(qb, sizeof(qb), v, len);
    twem_q(pb, sizeof(pb), p->name, strlen(p->name));
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
        return mcr__twem_error(c->err, c->src, pos, MCR_ERR_SYNTAX,
                               "pool \"%s\": server \"%s\": the weight is not a number%s", pb, qb,
                               memchr(weight, ' ', weight_len) != NULL
                                   ? " (the name is what follows the last space)"
                                   : "");
    case -2:
        return mcr__twem_error(c->err, c->src, pos, MCR_ERR_RANGE,
                               "pool \"%s\": server \"%s\": the weight is above %d", pb, qb,
                               INT_MAX);
    default:
        break;
    }
    if (w == 0)
        return mcr__twem_error(c->err, c->src, pos, MCR_ERR_RANGE,
                               "pool \"%s\": server \"%s\": a weight of 0", pb, qb);
    if (!is_unix) {
        int rc = parse_num(port, port_len, &pt);
        if (rc == -1)
            return mcr__twem_error(c->err, c->src, pos, MCR_ERR_SYNTAX,
                                   "pool \"%s\": server \"%s\": the port is not a number", pb, qb);
        if (rc != 0 || pt < 1 || pt > 65535)
            return mcr__twem_error(c->err, c->src, pos, MCR_ERR_RANGE,
                                   "pool \"%s\": server \"%s\": the port is not in 1..65535", pb,
                                   qb);
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
        mcr__twem_server_free(s);
        memset(s, 0, sizeof(*s));
        return mcr__error(c->err, MCR_ERR_NOMEM, "out of memory");
    }
    return MCR_OK;

format:
    return mcr__twem_error(c->err, c->src, pos, MCR_ERR_SYNTAX,
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

    twem_q(qb, sizeof(qb), v, len);
    twem_q(pb, sizeof(pb), p->name, strlen(p->name));
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
                    return mcr__twem_error(c->err, c->src, pos, MCR_ERR_RANGE,
                                           "pool \"%s\": listen \"%s\": the permissions are not an "
                                           "octal mode up to 0777",
                                           pb, qb);
                perm = m;
                host_len = (size_t)(sp - v);
            }
        } else {
            const char *colon = last_of(v, len, ':');
            if (colon == NULL)
                return mcr__twem_error(c->err, c->src, pos, MCR_ERR_SYNTAX,
                                       "pool \"%s\": listen \"%s\" is not \"host:port\" nor "
                                       "\"/path [permissions]\"",
                                       pb, qb);
            int rc = parse_num(colon + 1, (size_t)(v + len - colon - 1), &port);
            if (rc != 0 || port < 1 || port > 65535)
                return mcr__twem_error(c->err, c->src, pos, MCR_ERR_RANGE,
                                       "pool \"%s\": listen \"%s\": the port is not in 1..65535",
                                       pb,
                                       qb);
            host_len = (size_t)(colon - v);
            if (host_len == 0)
                return mcr__twem_error(c->err, c->src, pos, MCR_ERR_SYNTAX,
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
            return mcr__twem_error(c->err, c->src, pos, MCR_ERR_UNKNOWN,
                                   "pool \"%s\": unknown hash \"%s\" (one_at_a_time md5 crc16 "
                                   "crc32 crc32a fnv1_64 fnv1a_64 fnv1_32 fnv1a_32 hsieh "
                                   "murmur jenkins)",
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
            return mcr__twem_error(c->err, c->src, pos, MCR_ERR_UNKNOWN,
                                   "pool \"%s\": unknown distribution \"%s\" (ketama modula "
                                   "random)",
                                   pb, qb);
        p->opt[opt] = (int64_t)i;
        p->dist_name = twem_dists[i];
        break;
    }
    case KIND_HASH_TAG:
        if (len != 2)
            return mcr__twem_error(c->err, c->src, pos, MCR_ERR_SYNTAX,
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
            return mcr__twem_error(c->err, c->src, pos, MCR_ERR_SYNTAX,
                                   "pool \"%s\": %s \"%s\" is not a number", pb, dname, qb);
        if (rc == -2)
            return mcr__twem_error(c->err, c->src, pos, MCR_ERR_RANGE,
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
            return mcr__twem_error(c->err, c->src, pos, MCR_ERR_SYNTAX,
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
            return mcr__twem_error(c->err, c->src, pos, MCR_ERR_SYNTAX,
                                   "not YAML: %s at byte %zu", y->problem ? y->problem : "?",
                                   y->problem_offset);
        }
        return mcr__twem_error(c->err, c->src, pos, MCR_ERR_SYNTAX, "not YAML: %s%s%s",
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
            return mcr__twem_error(c->err, c->src, pos, MCR_ERR_SYNTAX,
                                   "a value with a NUL byte");
        else if (e->data.scalar.length == 0)
            return mcr__twem_error(c->err, c->src, pos, MCR_ERR_SYNTAX,
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
        return mcr__twem_error(c->err, c->src, pos, MCR_ERR_SYNTAX,
                               "%s: nutcracker does not allow it",
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

    twem_q(pb, sizeof(pb), p->name, strlen(p->name));
    if (p->text[MCR_TWEM_LISTEN] == NULL)
        return mcr__twem_error(c->err, c->src, p->pos, MCR_ERR_SYNTAX,
                               "pool \"%s\" has no \"listen\" directive", pb);
    if (p->opt_set[MCR_TWEM_SERVER_CONNECTIONS] && p->opt[MCR_TWEM_SERVER_CONNECTIONS] == 0)
        return mcr__twem_error(c->err, c->src, p->opt_pos[MCR_TWEM_SERVER_CONNECTIONS],
                               MCR_ERR_RANGE, "pool \"%s\": server_connections cannot be 0", pb);
    if (p->auth_set && !p->opt[MCR_TWEM_REDIS])
        return mcr__twem_error(c->err, c->src, p->auth_pos, MCR_ERR_INVALID,
                               "pool \"%s\": redis_auth is only valid in a pool with \"redis: "
                               "true\"",
                               pb);
    if (p->nservers == 0)
        return mcr__twem_error(c->err, c->src, p->pos, MCR_ERR_EMPTY,
                               "pool \"%s\" has no \"servers\" sequence", pb);
    qsort(p->servers, p->nservers, sizeof(*p->servers), kname_cmp);
    for (size_t i = 1; i < p->nservers; i++) {
        const twem_server *a = &p->servers[i - 1], *b = &p->servers[i];
        if (kname_cmp(a, b) == 0) {
            const twem_server *later = a->pos.line > b->pos.line ? a : b;
            const twem_server *earlier = later == a ? b : a;
            return mcr__twem_error(c->err, c->src, later->pos, MCR_ERR_DUPLICATE,
                                   "pool \"%s\": a second server named \"%s\" (line %zu has it)",
                                   pb,
                                   twem_q(nb, sizeof(nb), a->kname, a->kname_len),
                                   earlier->pos.line);
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

    twem_q(pb, sizeof(pb), p->name, strlen(p->name));
    for (;;) {
        if ((rc = next_event(c)) != MCR_OK)
            return rc;
        if (c->ev.type == YAML_MAPPING_END_EVENT)
            return validate_pool(c, p);
        twem_pos kpos = pos_of(&c->ev.start_mark);
        if (c->ev.type != YAML_SCALAR_EVENT)
            return mcr__twem_error(c->err, c->src, kpos, MCR_ERR_SYNTAX,
                                   "pool \"%s\": %s where a directive name belongs", pb,
                                   event_noun(c->ev.type));
        const char *key = (const char *)c->ev.data.scalar.value;
        size_t klen = c->ev.data.scalar.length;
        size_t d;
        for (d = 0; d < TWEM_DIRECTIVE_COUNT; d++)
            if (strlen(twem_directives[d].name) == klen &&
                memcmp(twem_directives[d].name, key, klen) == 0)
                break;
        twem_q(kb, sizeof(kb), key, klen);
        if (d == TWEM_DIRECTIVE_COUNT)
            return mcr__twem_error(c->err, c->src, kpos, MCR_ERR_UNKNOWN,
                                   "pool \"%s\": unknown directive \"%s\"", pb, kb);
        dir_kind kind = twem_directives[d].kind;
        int opt = twem_directives[d].opt;
        bool dup = (opt >= 0 && p->opt_set[opt]) || (kind == KIND_HASH_TAG && p->tag_set) ||
                   (kind == KIND_AUTH && p->auth_set) ||
                   (kind == KIND_SERVERS && p->servers_set);
        if (dup)
            return mcr__twem_error(c->err, c->src, kpos, MCR_ERR_DUPLICATE,
                                   "pool \"%s\": directive \"%s\" given twice", pb, kb);

        if ((rc = next_event(c)) != MCR_OK)
            return rc;
        twem_pos vpos = pos_of(&c->ev.start_mark);
        if (kind == KIND_SERVERS) {
            if (c->ev.type != YAML_SEQUENCE_START_EVENT)
                return mcr__twem_error(c->err, c->src, vpos, MCR_ERR_SYNTAX,
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
                    return mcr__twem_error(c->err, c->src, spos, MCR_ERR_SYNTAX,
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
            return mcr__twem_error(c->err, c->src, vpos, MCR_ERR_SYNTAX,
                                   "pool \"%s\": directive \"%s\" has %s, not a single value", pb,
                                   kb,
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
        twem_q(nb, sizeof(nb), dup, strlen(dup));
        twem_q(pb1, sizeof(pb1), first->name, strlen(first->name));
        twem_q(pb2, sizeof(pb2), second->name, strlen(second->name));
        if (pass == 0)
            return mcr__twem_error(c->err, c->src, second->pos, MCR_ERR_DUPLICATE,
                                   "pool \"%s\" listens on \"%s\" as pool \"%s\" (line %zu) does",
                                   pb2, nb, pb1, first->pos.line);
        return mcr__twem_error(c->err, c->src, second->pos, MCR_ERR_DUPLICATE,
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
        return mcr__twem_error(c->err, c->src, nowhere, MCR_ERR_EMPTY, "no pool in the file");
    /* DOCUMENT_START */
    if ((rc = next_event(c)) != MCR_OK)
        return rc;
    if (c->ev.type != YAML_MAPPING_START_EVENT)
        return mcr__twem_error(c->err, c->src, pos_of(&c->ev.start_mark), MCR_ERR_SYNTAX,
                               "%s where the mapping of pools belongs", event_noun(c->ev.type));
    for (;;) {
        if ((rc = next_event(c)) != MCR_OK)
            return rc;
        if (c->ev.type == YAML_MAPPING_END_EVENT)
            break;
        twem_pos ppos = pos_of(&c->ev.start_mark);
        if (c->ev.type != YAML_SCALAR_EVENT)
            return mcr__twem_error(c->err, c->src, ppos, MCR_ERR_SYNTAX,
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
            return mcr__twem_error(c->err, c->src, pos_of(&c->ev.start_mark), MCR_ERR_SYNTAX,
                                   "pool \"%s\" has %s where its directives (\"key: value\" lines) "
                                   "belong",
                                   twem_q(pb, sizeof(pb), p->name, strlen(p->name)),
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
        return mcr__twem_error(c->err, c->src, pos_of(&c->ev.start_mark), MCR_ERR_SYNTAX,
                               "a second YAML document: nutcracker reads exactly one");
    if (t->npools == 0) /* "{}" is refused as flow; kept for safety */
        return mcr__twem_error(c->err, c->src, nowhere, MCR_ERR_EMPTY, "no pool in the file");
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
    twem_q(qp, sizeof(qp), path, strlen(path));
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

