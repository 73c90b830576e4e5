/* SPDX-License-Identifier: BSD-3-Clause */
/* config.c: the mutable placement description (servers, mode, hashes) and its text parsers. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement_internal.h"

static const char *const mode_names[MCR_MODE_COUNT] = {
    [MCR_MODE_KETAMA] = "ketama",
    [MCR_MODE_CONSISTENT] = "consistent",
    [MCR_MODE_WEIGHTED] = "weighted",
    [MCR_MODE_SPY] = "spy",
    [MCR_MODE_SPY_WEIGHTED] = "spy-weighted",
    [MCR_MODE_MODULA] = "modula",
    [MCR_MODE_TWEMPROXY_KETAMA] = "twemproxy-ketama",
    [MCR_MODE_TWEMPROXY_MODULA] = "twemproxy-modula",
    [MCR_MODE_STABLE_KETAMA] = "stable-ketama",
    [MCR_MODE_JUMP] = "jump",
    [MCR_MODE_RENDEZVOUS] = "rendezvous",
    [MCR_MODE_MAGLEV] = "maglev",
    [MCR_MODE_SLOTS] = "slots",
    [MCR_MODE_BOUNDED] = "bounded",
    [MCR_MODE_PYMEMCACHE] = "pymemcache",
    [MCR_MODE_BUCKETS] = "buckets",
    [MCR_MODE_SPYMEMCACHED] = "spymemcached",
    [MCR_MODE_SPYMEMCACHED_LIBMEMCACHED] = "spymemcached-libmemcached",
    [MCR_MODE_DALLI] = "dalli",
    [MCR_MODE_HASHRING] = "hashring",
    [MCR_MODE_NGINX_CONSISTENT] = "nginx-consistent",
    [MCR_MODE_PHP_MEMCACHE] = "php-memcache",
    [MCR_MODE_MEMCACHED_PROXY_JUMP] = "memcached-proxy-jump",
    [MCR_MODE_MCROUTER_CH3] = "mcrouter-ch3",
    [MCR_MODE_ENVOY_MAGLEV] = "envoy-maglev",
    [MCR_MODE_ENVOY_RING_HASH] = "envoy-ring-hash",
    [MCR_MODE_MEMCACHED_PROXY_RING_KETAMA] = "memcached-proxy-ring-ketama",
    [MCR_MODE_MCROUTER_WCH3] = "mcrouter-wch3",
};

/* The key hash of each mode when none is chosen: the default of the client
 * the mode comes from (see mcr_mode_default_hash in mcroute.h for why). */
static const mcr_hash mode_hashes[MCR_MODE_COUNT] = {
    [MCR_MODE_KETAMA] = MCR_HASH_MD5,            /* libketama: MD5 only */
    [MCR_MODE_CONSISTENT] = MCR_HASH_DEFAULT,    /* libmemcached: DISTRIBUTION and */
    [MCR_MODE_SPY] = MCR_HASH_DEFAULT,           /* KETAMA leave its default, */
    [MCR_MODE_MODULA] = MCR_HASH_DEFAULT,        /* one-at-a-time, in place */
    [MCR_MODE_WEIGHTED] = MCR_HASH_MD5,          /* KETAMA_WEIGHTED sets MD5 */
    [MCR_MODE_SPY_WEIGHTED] = MCR_HASH_MD5,
    [MCR_MODE_TWEMPROXY_KETAMA] = MCR_HASH_FNV1A_64, /* nutcracker's default hash */
    [MCR_MODE_TWEMPROXY_MODULA] = MCR_HASH_FNV1A_64,
    [MCR_MODE_STABLE_KETAMA] = MCR_HASH_MD5,     /* mcroute's own modes */
    [MCR_MODE_JUMP] = MCR_HASH_MD5,
    [MCR_MODE_RENDEZVOUS] = MCR_HASH_MD5,
    [MCR_MODE_MAGLEV] = MCR_HASH_MD5,
    [MCR_MODE_SLOTS] = MCR_HASH_MD5,             /* unused: CRC-16 places keys */
    [MCR_MODE_BOUNDED] = MCR_HASH_MD5,
    [MCR_MODE_PYMEMCACHE] = MCR_HASH_MD5,        /* unused: the key's scores place it */
    [MCR_MODE_BUCKETS] = MCR_HASH_CRC,           /* Cache::Memcached, nginx `hash` */
    [MCR_MODE_SPYMEMCACHED] = MCR_HASH_MD5,      /* KETAMA_HASH */
    [MCR_MODE_SPYMEMCACHED_LIBMEMCACHED] = MCR_HASH_MD5,
    [MCR_MODE_DALLI] = MCR_HASH_CRC32A,          /* Zlib.crc32 */
    [MCR_MODE_HASHRING] = MCR_HASH_MD5,
    [MCR_MODE_NGINX_CONSISTENT] = MCR_HASH_CRC32A, /* ngx_crc32_long */
    [MCR_MODE_PHP_MEMCACHE] = MCR_HASH_CRC32A,   /* memcache.hash_function crc32 */
    [MCR_MODE_MEMCACHED_PROXY_JUMP] = MCR_HASH_MD5, /* unused: XXH3-64 of the key */
    [MCR_MODE_MCROUTER_CH3] = MCR_HASH_MD5,      /* unused: furc of the routing key */
    [MCR_MODE_ENVOY_MAGLEV] = MCR_HASH_MD5,      /* unused: XXH64 of the key */
    [MCR_MODE_ENVOY_RING_HASH] = MCR_HASH_MD5,   /* unused: XXH64 of the key */
    [MCR_MODE_MEMCACHED_PROXY_RING_KETAMA] = MCR_HASH_MD5, /* mcp.dist_ring_hash.hash */
    [MCR_MODE_MCROUTER_WCH3] = MCR_HASH_MD5,     /* unused: furc of the routing key */
};

mcr_hash mcr_mode_default_hash(mcr_mode m)
{
    if ((int)m < 0 || m >= MCR_MODE_COUNT)
        return MCR_HASH_COUNT;
    return mode_hashes[m];
}

int mcr_mode_from_name(const char *name, mcr_mode *out)
{
    if (name == NULL || out == NULL)
        return MCR_ERR_INVALID;
    for (int m = 0; m < MCR_MODE_COUNT; m++) {
        if (mcr__ascii_caseeq(name, mode_names[m])) {
            *out = (mcr_mode)m;
            return MCR_OK;
        }
    }
    return MCR_ERR_UNKNOWN;
}

const char *mcr_mode_name(mcr_mode m)
{
    if ((int)m < 0 || m >= MCR_MODE_COUNT)
        return NULL;
    return mode_names[m];
}

mcr_config *mcr_config_new(void)
{
    mcr_config *cfg = calloc(1, sizeof(*cfg));
    if (cfg == NULL)
        return NULL;
    cfg->mode = MCR_MODE_KETAMA;
    cfg->key_hash = mcr_mode_default_hash(MCR_MODE_KETAMA);
    cfg->point_hash = cfg->key_hash;
    cfg->slot_count = MCR_SLOTS_DEFAULT;
    return cfg;
}

mcr_config *mcr__config_copy_params(const mcr_config *src)
{
    mcr_config *cfg = calloc(1, sizeof(*cfg));
    if (cfg == NULL)
        return NULL;
    cfg->mode = src->mode;
    cfg->key_hash = src->key_hash;
    cfg->point_hash = src->point_hash;
    cfg->key_hash_set = src->key_hash_set;
    cfg->point_hash_set = src->point_hash_set;
    cfg->tag_on = src->tag_on;
    memcpy(cfg->tag, src->tag, sizeof cfg->tag);
    cfg->prefix_on = src->prefix_on;
    memcpy(cfg->prefix, src->prefix, sizeof cfg->prefix);
    cfg->prefix_len = src->prefix_len;
    cfg->maglev_size = src->maglev_size;
    cfg->slot_count = src->slot_count;
    cfg->client = src->client;
    return cfg;
}

void mcr_config_free(mcr_config *cfg)
{
    if (cfg == NULL)
        return;
    for (size_t i = 0; i < cfg->count; i++) {
        free(cfg->servers[i].host);
        free(cfg->servers[i].label);
        free(cfg->servers[i].zone);
    }
    free(cfg->servers);
    mcr__slotset_free(&cfg->hosts);
    mcr__slotset_free(&cfg->ids);
    free(cfg);
}

bool mcr__params_equal(const mcr__params *a, const mcr__params *b)
{
    return a->mode == b->mode && a->key_hash == b->key_hash && a->point_hash == b->point_hash &&
           a->tag_on == b->tag_on && memcmp(a->tag, b->tag, sizeof(a->tag)) == 0 &&
           a->prefix_on == b->prefix_on && a->prefix_len == b->prefix_len &&
           memcmp(a->prefix, b->prefix, a->prefix_len) == 0 && a->table_size == b->table_size;
}

void mcr__config_params(const mcr_config *cfg, mcr__params *out)
{
    memset(out, 0, sizeof(*out));
    out->mode = cfg->mode;
    out->key_hash = cfg->key_hash;
    out->point_hash = cfg->point_hash;
    out->tag_on = cfg->tag_on;
    memcpy(out->tag, cfg->tag, sizeof(out->tag));
    out->prefix_on = cfg->prefix_on;
    out->prefix_len = cfg->prefix_len;
    memcpy(out->prefix, cfg->prefix, cfg->prefix_len);
    if (cfg->mode == MCR_MODE_MAGLEV)
        out->table_size = cfg->maglev_size != 0 ? cfg->maglev_size
                                                : mcr__maglev_auto_size(cfg->count);
    else if (cfg->mode == MCR_MODE_SLOTS)
        out->table_size = cfg->slot_count;
    mcr__client_params(cfg, out);
}

size_t mcr__default_id(const char *host, int port, char *buf)
{
    bool v6 = strchr(host, ':') != NULL;
    return (size_t)snprintf(buf, MCR__NAME_BUF, v6 ? "[%s]:%d" : "%s:%d", host, port);
}

int mcr__desc_id(const mcr_server_desc *d, const char **id, mcr_error *err)
{
    char buf[MCR__NAME_BUF], q[80], qd[80];

    *id = d->id;
    if (!d->id_is_default)
        return MCR_OK;
    *id = NULL;
    if (d->id == NULL)
        return MCR_OK;
    size_t n = mcr__default_id(d->host, d->port, buf);
    if (strcmp(d->id, buf) != 0)
        return mcr__error(err, MCR_ERR_INVALID,
                          "id \"%s\" is marked as the default id, but the default id of the "
                          "server is \"%s\" (set id_is_default to 0 to give it this id, or id "
                          "to NULL)",
                          mcr__quote(q, sizeof(q), d->id, strlen(d->id)),
                          mcr__quote(qd, sizeof(qd), buf, n));
    return MCR_OK;
}

const char *mcr__server_id(const mcr__server *s, char *buf)
{
    if (s->label != NULL)
        return s->label;
    mcr__default_id(s->host, s->port, buf);
    return buf;
}

int mcr__check_name(const char *what, const char *s, mcr_error *err)
{
    char q[80];
    size_t len = strlen(s);

    if (len == 0)
        return mcr__error(err, MCR_ERR_SYNTAX, "empty %s", what);
    if (len > MCR_HOSTNAME_MAX)
        return mcr__error(err, MCR_ERR_TOO_LONG, "%s of %zu bytes is longer than %d bytes: \"%s\"",
                          what, len, MCR_HOSTNAME_MAX, mcr__quote(q, sizeof(q), s, len));
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        /* ids and zones are printed one a line, tab-separated */
        if (c < 0x20 || c == 0x7f)
            return mcr__error(err, MCR_ERR_SYNTAX,
                              "%s \"%s\" contains a control byte 0x%02x at offset %zu", what,
                              mcr__quote(q, sizeof(q), s, len), c, i);
    }
    return MCR_OK;
}

/* Whether the servers' weights would change meaning from mode `from` to
 * `to`: "mcrouter-wch3" counts them in millionths. */
static bool weights_change_meaning(const mcr_config *cfg, mcr_mode from, mcr_mode to)
{
    return cfg->count > 0 && (from == MCR_MODE_MCROUTER_WCH3) != (to == MCR_MODE_MCROUTER_WCH3);
}

int mcr__config_check_mode_change(const mcr_config *cfg, mcr_mode to, mcr_error *err)
{
    if (weights_change_meaning(cfg, cfg->mode, to))
        return mcr__error(err, MCR_ERR_INVALID,
                          "%zu servers are listed, whose weights %s would read as %s: "
                          "choose the mode before the servers",
                          cfg->count, mcr_mode_name(cfg->mode), mcr_mode_name(to));
    return MCR_OK;
}

int mcr_config_set_mode(mcr_config *cfg, mcr_mode mode)
{
    if (cfg == NULL || (int)mode < 0 || mode >= MCR_MODE_COUNT)
        return MCR_ERR_INVALID;
    if (weights_change_meaning(cfg, cfg->mode, mode))
        return MCR_ERR_INVALID;
    cfg->mode = mode;
    cfg->client = 0;
    if (!cfg->key_hash_set) {
        cfg->key_hash = mcr_mode_default_hash(mode);
        if (!cfg->point_hash_set)
            cfg->point_hash = cfg->key_hash;
    }
    return MCR_OK;
}

int mcr_config_set_table_size(mcr_config *cfg, uint32_t size)
{
    if (cfg == NULL)
        return MCR_ERR_INVALID;
    if (size != 0 && (size > MCR_MAGLEV_SIZE_MAX || !mcr__is_prime(size)))
        return MCR_ERR_RANGE;
    cfg->maglev_size = size;
    return MCR_OK;
}

int mcr_config_set_slot_count(mcr_config *cfg, uint32_t count)
{
    if (cfg == NULL)
        return MCR_ERR_INVALID;
    if (count < 1 || count > MCR_SLOTS_MAX)
        return MCR_ERR_RANGE;
    cfg->slot_count = count;
    return MCR_OK;
}

int mcr_config_set_hash(mcr_config *cfg, mcr_hash hash)
{
    if (cfg == NULL || (int)hash < 0 || hash >= MCR_HASH_COUNT)
        return MCR_ERR_INVALID;
    cfg->key_hash = hash;
    cfg->key_hash_set = true;
    cfg->client = 0;
    if (!cfg->point_hash_set)
        cfg->point_hash = hash;
    return MCR_OK;
}

int mcr_config_set_point_hash(mcr_config *cfg, mcr_hash hash)
{
    if (cfg == NULL || (int)hash < 0 || hash >= MCR_HASH_COUNT)
        return MCR_ERR_INVALID;
    cfg->point_hash = hash;
    cfg->point_hash_set = true;
    return MCR_OK;
}

int mcr_config_set_hash_tag(mcr_config *cfg, const char *tag)
{
    if (cfg == NULL)
        return MCR_ERR_INVALID;
    if (tag == NULL || tag[0] == '\0') {
        cfg->tag_on = false;
        return MCR_OK;
    }
    if (tag[1] == '\0' || tag[2] != '\0')
        return MCR_ERR_INVALID;
    cfg->tag[0] = tag[0];
    cfg->tag[1] = tag[1];
    cfg->tag_on = true;
    return MCR_OK;
}

int mcr_config_set_key_prefix(mcr_config *cfg, const void *prefix, size_t len)
{
    if (cfg == NULL || (prefix == NULL && len > 0) || len > sizeof(cfg->prefix) - 1)
        return MCR_ERR_INVALID;
    if (len > 0)
        memcpy(cfg->prefix, prefix, len);
    cfg->prefix_len = len;
    cfg->prefix_on = prefix != NULL;
    return MCR_OK;
}

size_t mcr_config_server_count(const mcr_config *cfg)
{
    return cfg == NULL ? 0 : cfg->count;
}

int mcr__check_host(const char *host, size_t len, mcr_error *err)
{
    char q[80];

    if (len == 0)
        return mcr__error(err, MCR_ERR_SYNTAX, "empty hostname");
    if (len > MCR_HOSTNAME_MAX)
        return mcr__error(err, MCR_ERR_TOO_LONG,
                          "hostname of %zu bytes is longer than %d bytes: \"%s\"", len,
                          MCR_HOSTNAME_MAX, mcr__quote(q, sizeof(q), host, len));
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)host[i];
        /* Bytes that would break the label formats, the list syntax or the
         * line-oriented CLI output. */
        if (c <= 0x20 || c == 0x7f || c == ',' || c == '[' || c == ']' || c == '#' ||
            c == '/')
            return mcr__error(err, MCR_ERR_SYNTAX,
                              "hostname \"%s\" contains a forbidden byte 0x%02x at offset %zu",
                              mcr__quote(q, sizeof(q), host, len), c, i);
    }
    return MCR_OK;
}

/* The keys of the two sets: a host and port, or an id. */
typedef struct host_key {
    const char *host;
    size_t len;
    int port;
} host_key;

static bool host_eq(const void *ctx, size_t idx, const void *key)
{
    const mcr__server *s = &((const mcr_config *)ctx)->servers[idx];
    const host_key *k = key;
    return s->port == k->port && s->host_len == k->len && memcmp(s->host, k->host, k->len) == 0;
}

static bool id_eq(const void *ctx, size_t idx, const void *key)
{
    char buf[MCR__NAME_BUF];
    return strcmp(mcr__server_id(&((const mcr_config *)ctx)->servers[idx], buf), key) == 0;
}

/* Index of server (host, port) in cfg, or -1. */
static long find_server(const mcr_config *cfg, const char *host, size_t len, int port)
{
    host_key k = {host, len, port};
    return mcr__slotset_find(&cfg->hosts, mcr__slot_hash(host, len, (uint64_t)port), host_eq, cfg,
                             &k);
}

/* Index of a server whose id is `id`, or -1. */
static long find_id(const mcr_config *cfg, const char *id)
{
    return mcr__slotset_find(&cfg->ids, mcr__slot_hash(id, strlen(id), 0), id_eq, cfg, id);
}

static void set_insert(mcr_config *cfg, size_t idx)
{
    const mcr__server *s = &cfg->servers[idx];
    char buf[MCR__NAME_BUF];
    const char *id = mcr__server_id(s, buf);
    mcr__slotset_put(&cfg->hosts, mcr__slot_hash(s->host, s->host_len, (uint64_t)s->port), idx);
    mcr__slotset_put(&cfg->ids, mcr__slot_hash(id, strlen(id), 0), idx);
}

/* Refill both sets (same capacity) from the servers. Cannot fail. */
static void set_refill(mcr_config *cfg)
{
    mcr__slotset_clear(&cfg->hosts);
    mcr__slotset_clear(&cfg->ids);
    for (size_t i = 0; i < cfg->count; i++)
        set_insert(cfg, i);
}

/* Give the sets room for `want` servers and refill them. MCR_OK, or
 * MCR_ERR_NOMEM with the old sets kept. */
static int set_rebuild(mcr_config *cfg, size_t want)
{
    mcr__slotset hosts = {NULL, 0}, ids = {NULL, 0};
    if (mcr__slotset_resize(&hosts, want) != MCR_OK || mcr__slotset_resize(&ids, want) != MCR_OK) {
        mcr__slotset_free(&hosts);
        mcr__slotset_free(&ids);
        return MCR_ERR_NOMEM;
    }
    mcr__slotset_free(&cfg->hosts);
    mcr__slotset_free(&cfg->ids);
    cfg->hosts = hosts;
    cfg->ids = ids;
    for (size_t i = 0; i < cfg->count; i++)
        set_insert(cfg, i);
    return MCR_OK;
}

/* Append without validation of duplicates against pending items; callers
 * have validated. Returns MCR_OK or MCR_ERR_NOMEM. */
static int push_server(mcr_config *cfg, const char *host, size_t len, int port,
                       uint32_t weight, const char *label, const char *zone, mcr_error *err)
{
    if (cfg->count == cfg->cap) {
        size_t cap = cfg->cap ? cfg->cap * 2 : 8;
        mcr__server *n = realloc(cfg->servers, cap * sizeof(*n));
        if (n == NULL)
            return mcr__error(err, MCR_ERR_NOMEM, "out of memory adding a server");
        cfg->servers = n;
        cfg->cap = cap;
    }
    if (2 * (cfg->count + 1) > cfg->hosts.cap && set_rebuild(cfg, cfg->count + 1) != MCR_OK)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory adding a server");
    char *h = malloc(len + 1);
    char *l = label != NULL ? strdup(label) : NULL;
    char *z = zone != NULL ? strdup(zone) : NULL;
    if (h == NULL || (label != NULL && l == NULL) || (zone != NULL && z == NULL)) {
        free(h);
        free(l);
        free(z);
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory adding a server");
    }
    memcpy(h, host, len);
    h[len] = '\0';
    mcr__server *s = &cfg->servers[cfg->count++];
    s->host = h;
    s->host_len = len;
    s->port = port;
    s->weight = weight;
    s->ipv6 = memchr(h, ':', len) != NULL;
    s->label = l;
    s->zone = z;
    set_insert(cfg, cfg->count - 1);
    return MCR_OK;
}

int mcr__config_copy_server(mcr_config *cfg, const mcr__server *s, mcr_error *err)
{
    return push_server(cfg, s->host, s->host_len, s->port, s->weight, s->label, s->zone, err);
}

/* Validate and append. With `check_id`, the label must be a valid id
 * (mcr__check_name) and the id (label or default) must be new. */
static int add_server_n(mcr_config *cfg, const char *host, size_t len, int port,
                        uint32_t weight, const char *label, const char *zone, bool check_id,
                        mcr_error *err)
{
    char q[80];
    int rc = mcr__check_host(host, len, err);

    if (rc != MCR_OK)
        return rc;
    if (label != NULL) {
        size_t ll = strlen(label);
        if (ll == 0)
            return mcr__error(err, MCR_ERR_SYNTAX, "empty label for server \"%s\"",
                              mcr__quote(q, sizeof(q), host, len));
        if (ll > MCR_HOSTNAME_MAX)
            return mcr__error(err, MCR_ERR_TOO_LONG,
                              "label of %zu bytes for server \"%s\" is longer than %d bytes", ll,
                              mcr__quote(q, sizeof(q), host, len), MCR_HOSTNAME_MAX);
        /* A label is the server's id in a snapshot: the bytes an id may
         * have, or the server could never be changed by id. */
        if ((rc = mcr__check_name("label", label, err)) != MCR_OK)
            return rc;
    }
    if (port < 1 || port > 65535)
        return mcr__error(err, MCR_ERR_RANGE, "port %d of \"%s\" is outside 1..65535", port,
                          mcr__quote(q, sizeof(q), host, len));
    if (weight < mcr__weight_min(cfg->mode) || weight > MCR_WEIGHT_MAX)
        return mcr__error(err, MCR_ERR_RANGE, "weight %u of \"%s\" is outside %u..%u%s",
                          (unsigned)weight, mcr__quote(q, sizeof(q), host, len),
                          (unsigned)mcr__weight_min(cfg->mode), (unsigned)MCR_WEIGHT_MAX,
                          weight == 0 ? " (only mcrouter-wch3 takes weight 0)" : "");
    if (find_server(cfg, host, len, port) >= 0)
        return mcr__error(err, MCR_ERR_DUPLICATE, "duplicate server %s%s%s:%d",
                          memchr(host, ':', len) ? "[" : "", mcr__quote(q, sizeof(q), host, len),
                          memchr(host, ':', len) ? "]" : "", port);
    if (zone != NULL && (rc = mcr__check_name("zone", zone, err)) != MCR_OK)
        return rc;
    if (check_id) {
        char buf[MCR__NAME_BUF], hbuf[MCR_HOSTNAME_MAX + 1];
        const char *id = label;
        if (id == NULL) {
            memcpy(hbuf, host, len);
            hbuf[len] = '\0';
            mcr__default_id(hbuf, port, buf);
            id = buf;
        }
        if (find_id(cfg, id) >= 0)
            return mcr__error(err, MCR_ERR_DUPLICATE, "duplicate server id \"%s\"",
                              mcr__quote(q, sizeof(q), id, strlen(id)));
    }
    return push_server(cfg, host, len, port, weight, label, zone, err);
}

int mcr_config_add_server(mcr_config *cfg, const char *host, int port, uint32_t weight,
                          mcr_error *err)
{
    return mcr_config_add_server_named(cfg, host, port, weight, NULL, err);
}

int mcr_config_add_server_named(mcr_config *cfg, const char *host, int port, uint32_t weight,
                                const char *label, mcr_error *err)
{
    if (cfg == NULL || host == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL config or host");
    return add_server_n(cfg, host, strlen(host), port, weight, label, NULL, false, err);
}

int mcr_config_add_server_desc(mcr_config *cfg, const mcr_server_desc *d, mcr_error *err)
{
    if (cfg == NULL || d == NULL || d->host == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL config, description or host");
    if (!mcr__zeroed(d->reserved, sizeof(d->reserved)))
        return mcr__error(err, MCR_ERR_INVALID,
                          "mcr_server_desc: the reserved area is not zero (fill the "
                          "struct from all-zero: mcroute.h)");
    if (d->state != MCR_STATE_ACTIVE)
        return mcr__error(err, MCR_ERR_INVALID,
                          "a config lists active servers only (state %d given)", (int)d->state);
    const char *zone = d->zone != NULL && d->zone[0] != '\0' ? d->zone : NULL;
    const char *id;
    int rc = mcr__desc_id(d, &id, err);
    if (rc != MCR_OK)
        return rc;
    return add_server_n(cfg, d->host, strlen(d->host), d->port, d->weight, id, zone, true, err);
}

/* Parse an unsigned decimal field of `len` bytes. Returns MCR_OK, or
 * MCR_ERR_SYNTAX (not a number) / MCR_ERR_RANGE (> max). */
static int parse_uint(const char *s, size_t len, unsigned long max, unsigned long *out)
{
    unsigned long v = 0;

    if (len == 0)
        return MCR_ERR_SYNTAX;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return MCR_ERR_SYNTAX;
        if (v > max) /* keep going to report syntax errors first, without overflow */
            continue;
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    if (v > max)
        return MCR_ERR_RANGE;
    *out = v;
    return MCR_OK;
}

/* A weight as a server list writes it in mode `mode`: a whole number
 * 1..MCR_WEIGHT_MAX, or in "mcrouter-wch3" a decimal in [0, 1] with at
 * most six digits after the point, in millionths. `where` starts the
 * messages. */
static int parse_weight(mcr_mode mode, const char *w, size_t wlen, uint32_t *out,
                        const char *where, mcr_error *err)
{
    char f[32];
    unsigned long v;
    int rc;

    mcr__quote(f, sizeof(f), w, wlen);
    if (mode == MCR_MODE_MCROUTER_WCH3) {
        const char *dot = memchr(w, '.', wlen);
        size_t il = dot ? (size_t)(dot - w) : wlen, fl = dot ? wlen - il - 1 : 0;
        unsigned long frac = 0;
        rc = il == 0 || (dot != NULL && fl == 0) ? MCR_ERR_SYNTAX : parse_uint(w, il, 1, &v);
        if (rc == MCR_OK && fl > 6)
            return mcr__error(err, MCR_ERR_RANGE,
                              "%s: weight %s has more than 6 digits after the point "
                              "(mcrouter-wch3 weights are millionths)",
                              where, f);
        if (rc == MCR_OK && fl > 0)
            rc = parse_uint(dot + 1, fl, 999999, &frac);
        if (rc == MCR_ERR_SYNTAX)
            return mcr__error(err, rc,
                              "%s: weight \"%s\" is not a decimal number "
                              "(mcrouter-wch3 weights are 0 to 1, such as 0.5)",
                              where, f);
        for (size_t i = fl; i < 6; i++)
            frac *= 10;
        if (rc == MCR_ERR_RANGE || v * MCR_WCH3_WEIGHT_ONE + frac > MCR_WCH3_WEIGHT_ONE)
            return mcr__error(err, MCR_ERR_RANGE, "%s: weight %s is outside 0..1 (mcrouter-wch3)",
                              where, f);
        *out = (uint32_t)(v * MCR_WCH3_WEIGHT_ONE + frac);
        return MCR_OK;
    }
    rc = parse_uint(w, wlen, MCR_WEIGHT_MAX, &v);
    if (rc == MCR_ERR_SYNTAX)
        return mcr__error(err, rc, "%s: weight \"%s\" is not a number%s", where, f,
                          memchr(w, '.', wlen) ? " (decimal weights are mcrouter-wch3's: "
                                                 "choose the mode before the servers)"
                                               : "");
    if (rc == MCR_ERR_RANGE || v == 0)
        return mcr__error(err, MCR_ERR_RANGE, "%s: weight %s is outside 1..%u", where, f,
                          (unsigned)MCR_WEIGHT_MAX);
    *out = (uint32_t)v;
    return MCR_OK;
}

int mcr__parse_server_item(const char *item, size_t len, mcr_mode mode, const char **host,
                           size_t *host_len, int *port, uint32_t *weight, const char *what,
                           mcr_error *err)
{
    char q[64];
    const char *h = item, *rest;
    size_t hl, restlen;
    unsigned long v;
    int rc;

    mcr__quote(q, sizeof(q), item, len);
    if (len == 0)
        return mcr__error(err, MCR_ERR_SYNTAX, "%s: empty server entry", what);
    if (item[0] == '[') {
        const char *close = memchr(item, ']', len);
        if (close == NULL)
            return mcr__error(err, MCR_ERR_SYNTAX, "%s: \"%s\": '[' without ']'", what, q);
        h = item + 1;
        hl = (size_t)(close - h);
        rest = close + 1;
        restlen = len - (size_t)(rest - item);
        if (restlen > 0 && rest[0] != ':')
            return mcr__error(err, MCR_ERR_SYNTAX, "%s: \"%s\": expected ':' after ']'", what, q);
    } else {
        const char *c = memchr(item, ':', len);
        hl = c ? (size_t)(c - item) : len;
        rest = item + hl;
        restlen = len - hl;
        size_t colons = 0;
        for (size_t i = 0; i < len; i++)
            colons += item[i] == ':';
        /* "fe80::1", "::1": an IPv6 address without brackets */
        if (colons > 2 || (colons == 2 && (hl == 0 || memchr(rest + 1, ':', restlen - 1) == rest + 1)))
            return mcr__error(err, MCR_ERR_SYNTAX,
                              "%s: \"%s\": too many ':' (write IPv6 addresses as [addr]:port)",
                              what, q);
    }
    rc = mcr__check_host(h, hl, NULL);
    if (rc != MCR_OK) {
        mcr_error e;
        mcr__check_host(h, hl, &e);
        return mcr__error(err, rc, "%s: \"%s\": %s", what, q, e.message);
    }
    *port = MCR_DEFAULT_PORT;
    *weight = mode == MCR_MODE_MCROUTER_WCH3 ? MCR_WCH3_WEIGHT_DEFAULT : 1;
    if (restlen > 0) { /* ":port" or ":port:weight" */
        const char *p = rest + 1;
        size_t plen = restlen - 1;
        const char *c = memchr(p, ':', plen);
        size_t portlen = c ? (size_t)(c - p) : plen;
        char f[32];
        rc = parse_uint(p, portlen, 65535, &v);
        if (rc == MCR_ERR_SYNTAX)
            return mcr__error(err, rc, "%s: \"%s\": port \"%s\" is not a number", what, q,
                              mcr__quote(f, sizeof(f), p, portlen));
        if (rc == MCR_ERR_RANGE || v == 0)
            return mcr__error(err, MCR_ERR_RANGE, "%s: \"%s\": port %s is outside 1..65535",
                              what, q, mcr__quote(f, sizeof(f), p, portlen));
        *port = (int)v;
        if (c != NULL) {
            char where[160];
            snprintf(where, sizeof(where), "%s: \"%s\"", what, q);
            rc = parse_weight(mode, c + 1, plen - portlen - 1, weight, where, err);
            if (rc != MCR_OK)
                return rc;
        }
    }
    *host = h;
    *host_len = hl;
    return MCR_OK;
}

/* Drop servers appended after `keep` (all-or-nothing parsers). */
static void truncate_servers(mcr_config *cfg, size_t keep)
{
    if (cfg->count == keep)
        return;
    while (cfg->count > keep) {
        cfg->count--;
        free(cfg->servers[cfg->count].host);
        free(cfg->servers[cfg->count].label);
        free(cfg->servers[cfg->count].zone);
    }
    set_refill(cfg); /* same capacity: cannot fail */
}

static int add_item(mcr_config *cfg, const char *item, size_t len, const char *what,
                    mcr_error *err)
{
    const char *host;
    size_t hl;
    int port, rc;
    uint32_t weight;
    mcr_error e;

    rc = mcr__parse_server_item(item, len, cfg->mode, &host, &hl, &port, &weight, what, err);
    if (rc != MCR_OK)
        return rc;
    rc = add_server_n(cfg, host, hl, port, weight, NULL, NULL, false, &e);
    if (rc != MCR_OK)
        return mcr__error(err, rc, "%s: %s", what, e.message);
    return MCR_OK;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

int mcr_config_add_servers(mcr_config *cfg, const char *list, mcr_error *err)
{
    size_t keep, n = 0;
    const char *p;

    if (cfg == NULL || list == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL config or server list");
    keep = cfg->count;
    p = list;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *s = p, *e = p + len;
        char what[64];
        while (s < e && is_blank(*s))
            s++;
        while (e > s && is_blank(e[-1]))
            e--;
        n++;
        snprintf(what, sizeof(what), "server list item %zu", n);
        if (s == e) {
            truncate_servers(cfg, keep);
            return mcr__error(err, list[0] == '\0' ? MCR_ERR_EMPTY : MCR_ERR_SYNTAX,
                              list[0] == '\0' ? "empty server list" : "%s is empty", what);
        }
        int rc = add_item(cfg, s, (size_t)(e - s), what, err);
        if (rc != MCR_OK) {
            truncate_servers(cfg, keep);
            return rc;
        }
        if (end == NULL)
            break;
        p = end + 1;
    }
    return MCR_OK;
}

/* Whether a parsed `host:port:weight` / `[v6]:port:weight` item wrote a weight. */
static bool item_has_weight(const char *item, size_t len)
{
    const char *p = item, *end = item + len;
    size_t colons = 0;

    if (len > 0 && item[0] == '[') {
        p = memchr(item, ']', len);
        if (p == NULL)
            return false;
    }
    for (; p < end; p++)
        colons += *p == ':';
    return colons == 2;
}

/* One line of a server file, trimmed, comment removed: an item, then
 * `key=value` attributes separated by blanks. */
static int add_file_line(mcr_config *cfg, const char *s, size_t len, const char *what,
                         mcr_error *err)
{
    const char *end = s + len, *p = s;
    const char *host;
    size_t hl, il;
    int port, rc;
    uint32_t weight;
    bool weight_set;
    char id[MCR_HOSTNAME_MAX + 1], zone[MCR_HOSTNAME_MAX + 1];
    bool id_set = false, zone_set = false;
    char q[80];
    mcr_error e;

    while (p < end && !is_blank(*p))
        p++;
    il = (size_t)(p - s);
    rc = mcr__parse_server_item(s, il, cfg->mode, &host, &hl, &port, &weight, what, err);
    if (rc != MCR_OK)
        return rc;
    weight_set = item_has_weight(s, il);
    for (;;) {
        while (p < end && is_blank(*p))
            p++;
        if (p == end)
            break;
        const char *tok = p;
        while (p < end && !is_blank(*p))
            p++;
        size_t tl = (size_t)(p - tok);
        const char *eq = memchr(tok, '=', tl);
        if (eq == NULL)
            return mcr__error(err, MCR_ERR_SYNTAX,
                              "%s: \"%s\" is not an attribute (write weight=W, zone=Z or id=NAME)",
                              what, mcr__quote(q, sizeof(q), tok, tl));
        size_t kl = (size_t)(eq - tok), vl = tl - kl - 1;
        const char *v = eq + 1;
        if (kl == 6 && memcmp(tok, "weight", 6) == 0) {
            if (weight_set)
                return mcr__error(err, MCR_ERR_SYNTAX, "%s: weight given twice", what);
            rc = parse_weight(cfg->mode, v, vl, &weight, what, err);
            if (rc != MCR_OK)
                return rc;
            weight_set = true;
        } else if ((kl == 4 && memcmp(tok, "zone", 4) == 0) ||
                   (kl == 2 && memcmp(tok, "id", 2) == 0)) {
            bool is_zone = kl == 4;
            bool *seen = is_zone ? &zone_set : &id_set;
            char *dst = is_zone ? zone : id;
            if (*seen)
                return mcr__error(err, MCR_ERR_SYNTAX, "%s: %s given twice", what,
                                  is_zone ? "zone" : "id");
            if (vl == 0)
                return mcr__error(err, MCR_ERR_SYNTAX, "%s: empty %s", what,
                                  is_zone ? "zone" : "id");
            if (vl > MCR_HOSTNAME_MAX)
                return mcr__error(err, MCR_ERR_TOO_LONG, "%s: %s of %zu bytes is longer than %d",
                                  what, is_zone ? "zone" : "id", vl, MCR_HOSTNAME_MAX);
            memcpy(dst, v, vl);
            dst[vl] = '\0';
            *seen = true;
        } else {
            return mcr__error(err, MCR_ERR_SYNTAX,
                              "%s: unknown attribute \"%s\" (known: weight, zone, id)", what,
                              mcr__quote(q, sizeof(q), tok, kl));
        }
    }
    rc = add_server_n(cfg, host, hl, port, weight, id_set ? id : NULL, zone_set ? zone : NULL,
                      true, &e);
    if (rc != MCR_OK)
        return mcr__error(err, rc, "%s: %s", what, e.message);
    return MCR_OK;
}

int mcr_config_load_server_file(mcr_config *cfg, const char *path, mcr_error *err)
{
    FILE *f;
    char *line = NULL;
    size_t cap = 0, lineno = 0, keep, added = 0;
    ssize_t n;
    int rc = MCR_OK;

    if (cfg == NULL || path == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL config or path");
    f = fopen(path, "r");
    if (f == NULL)
        return mcr__error(err, MCR_ERR_IO, "cannot open server file %s: %s", path,
                          strerror(errno));
    keep = cfg->count;
    while ((errno = 0, n = getline(&line, &cap, f)) >= 0) {
        char what[300];
        const char *s = line, *e;
        lineno++;
        if (memchr(line, '\0', (size_t)n) != NULL) {
            rc = mcr__error(err, MCR_ERR_SYNTAX, "%s line %zu: contains a NUL byte", path,
                            lineno);
            break;
        }
        e = memchr(line, '#', (size_t)n);
        if (e == NULL)
            e = line + n;
        while (s < e && is_blank(*s))
            s++;
        while (e > s && is_blank(e[-1]))
            e--;
        if (s == e)
            continue;
        snprintf(what, sizeof(what), "%s line %zu", path, lineno);
        rc = add_file_line(cfg, s, (size_t)(e - s), what, err);
        if (rc != MCR_OK)
            break;
        added++;
    }
    if (rc == MCR_OK)
        rc = mcr__read_end(f, "server file", path, err);
    if (rc == MCR_OK && added == 0)
        rc = mcr__error(err, MCR_ERR_EMPTY, "server file %s has no server", path);
    if (rc != MCR_OK)
        truncate_servers(cfg, keep);
    free(line);
    fclose(f);
    return rc;
}

int mcr_config_add_server_line(mcr_config *cfg, const char *line, mcr_error *err)
{
    if (cfg == NULL || line == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL config or server line");
    if (strchr(line, '\n') != NULL)
        return mcr__error(err, MCR_ERR_SYNTAX, "server line: contains a newline (one server only)");
    const char *s = line, *e = strchr(line, '#');
    if (e == NULL)
        e = line + strlen(line);
    while (s < e && is_blank(*s))
        s++;
    while (e > s && is_blank(e[-1]))
        e--;
    if (s == e)
        return mcr__error(err, MCR_ERR_EMPTY, "server line: no server");
    return add_file_line(cfg, s, (size_t)(e - s), "server line", err);
}

static int cmp_sort_hosts(const void *a, const void *b)
{
    const mcr__server *x = a, *y = b;
    int c = strcmp(x->host, y->host);
    if (c != 0)
        return c;
    return (x->port > y->port) - (x->port < y->port);
}

int mcr_config_sort_servers(mcr_config *cfg)
{
    if (cfg == NULL)
        return MCR_ERR_INVALID;
    if (cfg->count > 1) {
        qsort(cfg->servers, cfg->count, sizeof(cfg->servers[0]), cmp_sort_hosts);
        set_refill(cfg);
    }
    return MCR_OK;
}
