/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_twemproxy.c: fuzz target of nutcracker YAML (compat/twemproxy.c): what loads is consistent, places keys on its servers, and written back as YAML loads the same. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "mcroute_pool.h"
#include "mcroute_twemproxy.h"

static const char *const opt_names[MCR_TWEM_OPTION_COUNT] = {
    [MCR_TWEM_TIMEOUT] = "timeout",
    [MCR_TWEM_BACKLOG] = "backlog",
    [MCR_TWEM_CLIENT_CONNECTIONS] = "client_connections",
    [MCR_TWEM_REDIS] = "redis",
    [MCR_TWEM_REDIS_DB] = "redis_db",
    [MCR_TWEM_PRECONNECT] = "preconnect",
    [MCR_TWEM_AUTO_EJECT_HOSTS] = "auto_eject_hosts",
    [MCR_TWEM_SERVER_CONNECTIONS] = "server_connections",
    [MCR_TWEM_SERVER_RETRY_TIMEOUT] = "server_retry_timeout",
    [MCR_TWEM_SERVER_FAILURE_LIMIT] = "server_failure_limit",
    [MCR_TWEM_TCPKEEPALIVE] = "tcpkeepalive",
};

static int is_bool(mcr_twem_option o)
{
    return o == MCR_TWEM_REDIS || o == MCR_TWEM_PRECONNECT || o == MCR_TWEM_AUTO_EJECT_HOSTS ||
           o == MCR_TWEM_TCPKEEPALIVE;
}

/* A growing buffer. */
typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

static void put(buf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        while (b->n + n + 1 > b->cap)
            b->cap = b->cap ? b->cap * 2 : 1024;
        b->p = realloc(b->p, b->cap);
        FUZZ_CHECK(b->p != NULL, "out of memory");
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void puts_(buf *b, const char *s)
{
    put(b, s, strlen(s));
}

/* A YAML double-quoted scalar of `s`. */
static void quoted(buf *b, const char *s)
{
    put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char e[8];
        if (*p == '"' || *p == '\\') {
            e[0] = '\\';
            e[1] = (char)*p;
            put(b, e, 2);
        } else if (*p < 0x20 || *p == 0x7f) {
            snprintf(e, sizeof(e), "\\x%02x", *p);
            put(b, e, 4);
        } else if (*p >= 0xc2 && *p <= 0xef && (p[1] & 0xc0) == 0x80 &&
                   (*p < 0xe0 || (p[2] & 0xc0) == 0x80)) {
            /* A character YAML does not allow raw (a C1 control but NEL,
             * U+FFFE, U+FFFF) as \uXXXX; any other as its UTF-8 bytes. */
            unsigned c = *p < 0xe0 ? (unsigned)(*p & 0x1f) << 6 | (p[1] & 0x3f)
                                   : (unsigned)(*p & 0x0f) << 12 | (unsigned)(p[1] & 0x3f) << 6 |
                                         (p[2] & 0x3f);
            size_t n = *p < 0xe0 ? 2 : 3;
            if ((c >= 0x80 && c <= 0x9f && c != 0x85) || c == 0xfffe || c == 0xffff) {
                snprintf(e, sizeof(e), "\\u%04x", c);
                put(b, e, 6);
            } else {
                put(b, (const char *)p, n);
            }
            p += n - 1;
        } else {
            put(b, (const char *)p, 1);
        }
    }
    put(b, "\"", 1);
}

/* The configuration written back as nutcracker YAML. */
static char *write_yaml(const mcr_twem *t, size_t *len)
{
    buf b = {0};
    char tmp[64];
    for (size_t i = 0; i < mcr_twem_pool_count(t); i++) {
        quoted(&b, mcr_twem_pool_name(t, i));
        puts_(&b, ":\n  listen: ");
        quoted(&b, mcr_twem_pool_text(t, i, MCR_TWEM_LISTEN));
        puts_(&b, "\n");
        if (mcr_twem_pool_is_set(t, i, MCR_TWEM_HASH)) {
            puts_(&b, "  hash: ");
            quoted(&b, mcr_twem_pool_text(t, i, MCR_TWEM_HASH_NAME));
            puts_(&b, "\n");
        }
        if (mcr_twem_pool_is_set(t, i, MCR_TWEM_DISTRIBUTION)) {
            puts_(&b, "  distribution: ");
            quoted(&b, mcr_twem_pool_text(t, i, MCR_TWEM_DISTRIBUTION_NAME));
            puts_(&b, "\n");
        }
        const char *tag = mcr_twem_pool_text(t, i, MCR_TWEM_HASH_TAG);
        if (tag != NULL) {
            puts_(&b, "  hash_tag: ");
            quoted(&b, tag);
            puts_(&b, "\n");
        }
        const char *auth = mcr_twem_pool_text(t, i, MCR_TWEM_REDIS_AUTH);
        if (auth != NULL) {
            puts_(&b, "  redis_auth: ");
            quoted(&b, auth);
            puts_(&b, "\n");
        }
        for (int o = 0; o < MCR_TWEM_OPTION_COUNT; o++) {
            int64_t v;
            if (opt_names[o] == NULL || !mcr_twem_pool_is_set(t, i, (mcr_twem_option)o))
                continue;
            FUZZ_CHECK(mcr_twem_pool_option(t, i, (mcr_twem_option)o, &v) == MCR_OK, "option");
            if (is_bool((mcr_twem_option)o))
                snprintf(tmp, sizeof(tmp), "  %s: %s\n", opt_names[o], v ? "true" : "false");
            else
                snprintf(tmp, sizeof(tmp), "  %s: %" PRId64 "\n", opt_names[o], v);
            puts_(&b, tmp);
        }
        puts_(&b, "  servers:\n");
        for (size_t k = 0; k < mcr_twem_server_count(t, i); k++) {
            mcr_twem_server s;
            FUZZ_CHECK(mcr_twem_server_get(t, i, k, &s) == MCR_OK, "server");
            buf line = {0};
            /* An unnamed server's name is its "host:port" as written
             * ("h:0123" is port 123 named "h:0123"): write that text. */
            if (s.name == NULL && s.port != 0 && s.port != 11211) {
                puts_(&line, s.ketama_name);
            } else {
                puts_(&line, s.host);
                if (s.port != 0) {
                    snprintf(tmp, sizeof(tmp), ":%d", s.port);
                    puts_(&line, tmp);
                }
            }
            snprintf(tmp, sizeof(tmp), ":%" PRIu32, s.weight);
            puts_(&line, tmp);
            if (s.name != NULL) {
                puts_(&line, " ");
                puts_(&line, s.name);
            }
            puts_(&b, "   - ");
            quoted(&b, line.p);
            puts_(&b, "\n");
            free(line.p);
        }
    }
    *len = b.n;
    return b.p;
}

/* nutcracker's order: shorter names first, then by bytes. */
static int name_before(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    return la != lb ? la < lb : memcmp(a, b, la) <= 0;
}

static void check_loaded(const mcr_twem *t, const uint8_t *data, size_t size)
{
    mcr_error err;
    size_t np = mcr_twem_pool_count(t);
    FUZZ_CHECK(np >= 1, "a loaded configuration without pools");
    FUZZ_CHECK(mcr_twem_pool_name(t, np) == NULL, "a pool past the last");
    for (size_t i = 0; i < np; i++) {
        const char *name = mcr_twem_pool_name(t, i);
        size_t idx;
        FUZZ_CHECK(name != NULL && name[0] != '\0', "pool %zu without a name", i);
        FUZZ_CHECK(mcr_twem_pool_index(t, name, &idx, &err) == MCR_OK && idx == i,
                   "pool \"%s\" not found at %zu", name, i);
        FUZZ_CHECK(mcr_twem_pool_text(t, i, MCR_TWEM_LISTEN) != NULL, "pool without listen");
        for (int o = 0; o < MCR_TWEM_OPTION_COUNT; o++) {
            int64_t v;
            FUZZ_CHECK(mcr_twem_pool_option(t, i, (mcr_twem_option)o, &v) == MCR_OK, "option %d",
                       o);
            if (is_bool((mcr_twem_option)o))
                FUZZ_CHECK(v == 0 || v == 1, "boolean %d is %" PRId64, o, v);
        }
        size_t ns = mcr_twem_server_count(t, i);
        FUZZ_CHECK(ns >= 1, "pool \"%s\" without servers", name);
        const char *prev = NULL;
        uint64_t total = 0;
        int unix_sock = 0;
        for (size_t k = 0; k < ns; k++) {
            mcr_twem_server s;
            FUZZ_CHECK(mcr_twem_server_get(t, i, k, &s) == MCR_OK, "server %zu", k);
            FUZZ_CHECK(s.host != NULL && s.ketama_name != NULL, "server %zu incomplete", k);
            FUZZ_CHECK(s.port >= 0 && s.port <= 65535 && s.weight >= 1 && s.line >= 1,
                       "server %zu: port %d weight %u line %zu", k, s.port, (unsigned)s.weight,
                       s.line);
            FUZZ_CHECK(prev == NULL || name_before(prev, s.ketama_name),
                       "servers out of order: \"%s\" before \"%s\"", prev, s.ketama_name);
            prev = s.ketama_name;
            total += s.weight;
            unix_sock |= s.port == 0;
        }
        mcr_pool_options o, before;
        mcr_pool_options_init(&o);
        before = o;
        int rc = mcr_twem_fill_pool_options(t, i, &o, &err);
        if (rc != MCR_OK) {
            fuzz_check_error(rc, &err, "mcr_twem_fill_pool_options");
            FUZZ_CHECK(memcmp(&o, &before, sizeof(o)) == 0, "options changed by a failed fill");
        }
        int64_t dist;
        mcr_twem_pool_option(t, i, MCR_TWEM_DISTRIBUTION, &dist);
        mcr_mode mode = dist == MCR_TWEM_DIST_MODULA ? MCR_MODE_TWEMPROXY_MODULA
                                                     : MCR_MODE_TWEMPROXY_KETAMA;
        if (!unix_sock && !fuzz_mode_cheap(mode, ns, total))
            continue;
        mcr_config *cfg = NULL;
        rc = mcr_twem_config(t, i, &cfg, &err);
        if (rc != MCR_OK) {
            fuzz_check_error(rc, &err, "mcr_twem_config");
            continue;
        }
        FUZZ_CHECK(mcr_config_server_count(cfg) == ns, "config of %zu servers, pool of %zu",
                   mcr_config_server_count(cfg), ns);
        mcr_ring *ring = NULL;
        rc = mcr_twem_ring(t, i, &ring, &err);
        if (rc != MCR_OK) {
            fuzz_check_error(rc, &err, "mcr_twem_ring");
            mcr_config_free(cfg);
            continue;
        }
        fuzz_check_ring(ring, ns, data, size);
        FUZZ_CHECK(mcr_ring_mode(ring) == mode, "mode %d", (int)mcr_ring_mode(ring));
        for (size_t k = 0; k < ns; k++) {
            mcr_twem_server s;
            mcr_twem_server_get(t, i, k, &s);
            FUZZ_CHECK(strcmp(mcr_ring_server_host(ring, k), s.host) == 0 &&
                           mcr_ring_server_port(ring, k) == s.port &&
                           mcr_ring_server_weight(ring, k) == s.weight,
                       "ring server %zu is not pool server %zu", k, k);
        }
        mcr_snapshot *snap = NULL;
        rc = mcr_snapshot_new(cfg, 1, &snap, &err);
        if (rc == MCR_OK) {
            fuzz_check_snapshot(snap, data, size);
            for (size_t off = 0; off < size; off += 5) {
                size_t l = size - off < 30 ? size - off : 30;
                FUZZ_CHECK(mcr_snapshot_locate(snap, data + off, l) ==
                               mcr_snapshot_ring_server(snap,
                                                        mcr_ring_locate(ring, data + off, l)),
                           "snapshot and ring disagree");
            }
            mcr_snapshot_unref(snap);
        } else {
            fuzz_check_error(rc, &err, "mcr_snapshot_new of a twemproxy pool");
        }
        mcr_ring_free(ring);
        mcr_config_free(cfg);
    }
}

/* The same pools, directives and servers. */
static void check_same(const mcr_twem *a, const mcr_twem *b)
{
    FUZZ_CHECK(mcr_twem_pool_count(a) == mcr_twem_pool_count(b), "pool count");
    for (size_t i = 0; i < mcr_twem_pool_count(a); i++) {
        FUZZ_CHECK(strcmp(mcr_twem_pool_name(a, i), mcr_twem_pool_name(b, i)) == 0, "pool name");
        for (int o = 0; o < MCR_TWEM_OPTION_COUNT; o++) {
            int64_t x, y;
            mcr_twem_pool_option(a, i, (mcr_twem_option)o, &x);
            mcr_twem_pool_option(b, i, (mcr_twem_option)o, &y);
            FUZZ_CHECK(x == y, "pool %zu option %d: %" PRId64 " then %" PRId64, i, o, x, y);
            FUZZ_CHECK(mcr_twem_pool_is_set(a, i, (mcr_twem_option)o) ==
                           mcr_twem_pool_is_set(b, i, (mcr_twem_option)o),
                       "pool %zu option %d set", i, o);
        }
        for (int w = 0; w < MCR_TWEM_TEXT_COUNT; w++) {
            const char *x = mcr_twem_pool_text(a, i, (mcr_twem_text)w),
                       *y = mcr_twem_pool_text(b, i, (mcr_twem_text)w);
            FUZZ_CHECK((x == NULL) == (y == NULL) && (x == NULL || strcmp(x, y) == 0),
                       "pool %zu text %d: \"%s\" then \"%s\"", i, w, x ? x : "(null)",
                       y ? y : "(null)");
        }
        FUZZ_CHECK(mcr_twem_server_count(a, i) == mcr_twem_server_count(b, i), "server count");
        for (size_t k = 0; k < mcr_twem_server_count(a, i); k++) {
            mcr_twem_server x, y;
            mcr_twem_server_get(a, i, k, &x);
            mcr_twem_server_get(b, i, k, &y);
            FUZZ_CHECK(strcmp(x.host, y.host) == 0 && x.port == y.port && x.weight == y.weight &&
                           (x.name == NULL) == (y.name == NULL) &&
                           (x.name == NULL || strcmp(x.name, y.name) == 0) &&
                           strcmp(x.ketama_name, y.ketama_name) == 0,
                       "pool %zu server %zu: \"%s\" then \"%s\"", i, k, x.ketama_name,
                       y.ketama_name);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8192)
        return 0;
    mcr_twem *t = NULL;
    mcr_error err;
    int rc = mcr_twem_load_buffer(data, size, "fuzz.yml", &t, &err);
    if (rc != MCR_OK) {
        fuzz_check_error(rc, &err, "mcr_twem_load_buffer");
        FUZZ_CHECK(t == NULL, "output set by a failed load");
        return 0;
    }
    FUZZ_CHECK(strcmp(mcr_twem_source(t), "fuzz.yml") == 0, "source \"%s\"", mcr_twem_source(t));
    check_loaded(t, data, size);

    /* Written back and loaded again: the same configuration. */
    size_t len;
    char *yaml = write_yaml(t, &len);
    mcr_twem *u = NULL;
    rc = mcr_twem_load_buffer(yaml, len, "again.yml", &u, &err);
    FUZZ_CHECK(rc == MCR_OK, "written back, it does not load: %s\n%s", err.message, yaml);
    check_same(t, u);
    /* and the same from a file */
    mcr_twem *v = NULL;
    rc = mcr_twem_load(fuzz_write_file(0, data, size), &v, &err);
    FUZZ_CHECK(rc == MCR_OK, "loads from a buffer, not from a file: %s", err.message);
    check_same(t, v);
    mcr_twem_free(v);
    mcr_twem_free(u);
    free(yaml);
    mcr_twem_free(t);
    return 0;
}
