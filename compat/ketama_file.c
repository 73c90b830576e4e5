/* SPDX-License-Identifier: BSD-3-Clause */
/* ketama_file.c: reader of libketama's server files (`address memory` a line) into an mcr_config. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "placement/placement_internal.h"
#include "mcroute_ketama.h"

/* libketama skips a line shorter than this, newline included. */
#define KETAMA_MIN_LINE 2

/* libketama splits fields on tabs and spaces only (strtok(line, "\t ")). */
static bool is_sep(char c)
{
    return c == ' ' || c == '\t';
}

/* Parse the memory field: a plain decimal number 1..MCR_WEIGHT_MAX. */
static int parse_memory(const char *m, size_t len, const char *what, uint32_t *out,
                        mcr_error *err)
{
    char q[48];
    uint64_t v = 0;

    for (size_t i = 0; i < len; i++) {
        if (m[i] < '0' || m[i] > '9')
            return mcr__error(err, MCR_ERR_SYNTAX,
                              "%s: memory \"%s\" is not a number (a decimal count, as 600)",
                              what, mcr__quote(q, sizeof(q), m, len));
        if (v <= MCR_WEIGHT_MAX) /* saturate: keep scanning for bad bytes */
            v = v * 10 + (uint64_t)(m[i] - '0');
    }
    if (v == 0)
        return mcr__error(err, MCR_ERR_RANGE, "%s: memory 0: a server needs memory of at least 1",
                          what);
    if (v > MCR_WEIGHT_MAX)
        return mcr__error(err, MCR_ERR_RANGE,
                          "%s: memory %s is above %u, the largest weight mcroute supports",
                          what, mcr__quote(q, sizeof(q), m, len), (unsigned)MCR_WEIGHT_MAX);
    *out = (uint32_t)v;
    return MCR_OK;
}

/* Parse an address `host`, `host:port`, `[v6]` or `[v6]:port` (no weight:
 * in libketama the weight is the memory field) into host and port. */
static int parse_address(const char *a, size_t len, const char *what, const char **host,
                         size_t *host_len, int *port, mcr_error *err)
{
    char q[80];
    const char *tail = a;
    size_t colons = 0;
    uint32_t unused_weight;

    if (len > MCR_HOSTNAME_MAX)
        return mcr__error(err, MCR_ERR_TOO_LONG, "%s: address of %zu bytes is longer than %d bytes",
                          what, len, MCR_HOSTNAME_MAX);
    if (a[0] == '[') {
        const char *close = memchr(a, ']', len);
        if (close == NULL) /* mcr__parse_server_item() says what is missing */
            tail = a + len;
        else
            tail = close + 1;
    }
    for (const char *p = tail; p < a + len; p++)
        colons += *p == ':';
    /* mcr__parse_server_item() would take a third field as a weight, and
     * says what to do about a bare IPv6 address. */
    if (colons > 1)
        return mcr__error(err, MCR_ERR_SYNTAX,
                          "%s: address \"%s\" has more than one ':' (write host:port, and IPv6 "
                          "addresses as [addr]:port)",
                          what, mcr__quote(q, sizeof(q), a, len));
    return mcr__parse_server_item(a, len, MCR_MODE_KETAMA, host, host_len, port, &unused_weight,
                                  what, err);
}

/* The line (1-based) where the server equal to (host, port) was added to
 * tmp, or 0 if it was in the config before this file. */
static size_t first_line_of(const mcr_config *tmp, size_t keep, const size_t *line_of,
                            const char *host, size_t hl, int port)
{
    for (size_t j = 0; j < tmp->count; j++) {
        const mcr__server *s = &tmp->servers[j];
        if (s->port == port && s->host_len == hl && memcmp(s->host, host, hl) == 0)
            return j < keep ? 0 : line_of[j - keep];
    }
    return 0;
}

/* A copy of cfg's servers (not its settings), each with everything it has
 * (label, that is id, and zone: a config's servers are all active): the
 * file is read into it, so that cfg is replaced only once the whole file
 * has proven good. */
static int copy_servers(const mcr_config *cfg, mcr_config **out, mcr_error *err)
{
    mcr_config *tmp = mcr_config_new();

    if (tmp == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory reading a ketama server file");
    for (size_t i = 0; i < cfg->count; i++) {
        int rc = mcr__config_copy_server(tmp, &cfg->servers[i], err);
        if (rc != MCR_OK) { /* only NOMEM: these servers were valid in cfg */
            mcr_config_free(tmp);
            return rc;
        }
    }
    *out = tmp;
    return MCR_OK;
}

/* Exchange the server lists of a and b, settings untouched. */
static void swap_servers(mcr_config *a, mcr_config *b)
{
    mcr_config t = *a;
    a->servers = b->servers;
    a->count = b->count;
    a->cap = b->cap;
    a->hosts = b->hosts;
    a->ids = b->ids;
    b->servers = t.servers;
    b->count = t.count;
    b->cap = t.cap;
    b->hosts = t.hosts;
    b->ids = t.ids;
}

/* One non-comment line (without its line end) into tmp. */
static int add_line(mcr_config *tmp, size_t keep, const size_t *line_of, const char *s,
                    const char *end, const char *what, mcr_error *err)
{
    char q[80], hostbuf[MCR_HOSTNAME_MAX + 1], label[MCR_HOSTNAME_MAX + 1];
    const char *addr = s, *mem, *host;
    size_t alen, mlen, hl;
    uint32_t memory = 0;
    int port = 0, rc;
    mcr_error e;

    while (s < end && !is_sep(*s))
        s++;
    alen = (size_t)(s - addr);
    while (s < end && is_sep(*s))
        s++;
    if (s == end)
        return mcr__error(err, MCR_ERR_SYNTAX,
                          "%s: \"%s\" has no memory field (a server line is `address memory`)",
                          what, mcr__quote(q, sizeof(q), addr, alen));
    mem = s;
    while (s < end && !is_sep(*s))
        s++;
    mlen = (size_t)(s - mem);
    while (s < end && is_sep(*s))
        s++;
    if (s < end && *s != '#')
        return mcr__error(err, MCR_ERR_SYNTAX,
                          "%s: unexpected \"%s\" after the memory field (a server line is "
                          "`address memory`)",
                          what, mcr__quote(q, sizeof(q), s, (size_t)(end - s)));
    rc = parse_memory(mem, mlen, what, &memory, err);
    if (rc != MCR_OK)
        return rc;
    rc = parse_address(addr, alen, what, &host, &hl, &port, err);
    if (rc != MCR_OK)
        return rc;
    memcpy(hostbuf, host, hl); /* hl <= alen <= MCR_HOSTNAME_MAX */
    hostbuf[hl] = '\0';
    memcpy(label, addr, alen);
    label[alen] = '\0';
    rc = mcr_config_add_server_named(tmp, hostbuf, port, memory, label, &e);
    if (rc == MCR_ERR_DUPLICATE) {
        size_t first = first_line_of(tmp, keep, line_of, host, hl, port);
        if (first > 0)
            return mcr__error(err, rc, "%s: duplicate server \"%s\" (the same host and port as "
                              "line %zu)", what, label, first);
        return mcr__error(err, rc, "%s: duplicate server \"%s\" (already in the config)", what,
                          label);
    }
    if (rc != MCR_OK)
        return mcr__error(err, rc, "%s: %s", what, e.message);
    return MCR_OK;
}

int mcr_ketama_load_file(mcr_config *cfg, const char *path, mcr_error *err)
{
    FILE *f;
    mcr_config *tmp = NULL;
    char *line = NULL;
    size_t cap = 0, lineno = 0, keep, *line_of = NULL, line_cap = 0;
    ssize_t n;
    int rc;

    if (cfg == NULL || path == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL config or path");
    f = fopen(path, "r");
    if (f == NULL)
        return mcr__error(err, MCR_ERR_IO, "cannot open ketama server file %s: %s", path,
                          strerror(errno));
    rc = copy_servers(cfg, &tmp, err);
    keep = cfg->count;
    while (rc == MCR_OK && (errno = 0, n = getline(&line, &cap, f)) >= 0) {
        char what[300];
        const char *s = line, *end = line + n;

        lineno++;
        if (n < KETAMA_MIN_LINE)
            continue;
        if (memchr(line, '\0', (size_t)n) != NULL) {
            rc = mcr__error(err, MCR_ERR_SYNTAX, "%s line %zu: contains a NUL byte", path, lineno);
            break;
        }
        if (end > s && end[-1] == '\n')
            end--;
        if (end > s && end[-1] == '\r')
            end--;
        while (s < end && is_sep(*s))
            s++;
        if (s == end || *s == '#')
            continue;
        if (tmp->count - keep == line_cap) {
            size_t nc = line_cap ? 2 * line_cap : 16;
            size_t *nl = realloc(line_of, nc * sizeof(*nl));
            if (nl == NULL) {
                rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory reading %s", path);
                break;
            }
            line_of = nl;
            line_cap = nc;
        }
        snprintf(what, sizeof(what), "%s line %zu", path, lineno);
        rc = add_line(tmp, keep, line_of, s, end, what, err);
        if (rc == MCR_OK)
            line_of[tmp->count - keep - 1] = lineno;
    }
    if (rc == MCR_OK)
        rc = mcr__read_end(f, "ketama server file", path, err);
    if (rc == MCR_OK && tmp->count == keep)
        rc = mcr__error(err, MCR_ERR_EMPTY,
                        "ketama server file %s has no server (a server line is `address memory`)",
                        path);
    if (rc == MCR_OK)
        swap_servers(cfg, tmp);
    mcr_config_free(tmp);
    free(line_of);
    free(line);
    fclose(f);
    return rc;
}

const char *mcr_ketama_address(const mcr_config *cfg, size_t i)
{
    if (cfg == NULL || i >= cfg->count)
        return NULL;
    return cfg->servers[i].label;
}
