/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_server_list.c: fuzz target of server lists and server files (lib/placement/config.c): all or nothing, a ring every key locates on, and a round trip through the list and file syntax. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

/* An optional first line "#!MODE [HASH]" (a comment to the file parser)
 * picks the mode and key hash; default "ketama", md5. */
static size_t header(const uint8_t *data, size_t size, mcr_mode *mode, mcr_hash *hash,
                     int *hash_set)
{
    *mode = MCR_MODE_KETAMA;
    *hash = MCR_HASH_MD5;
    *hash_set = 0;
    if (size < 2 || data[0] != '#' || data[1] != '!')
        return 0;
    const uint8_t *nl = memchr(data, '\n', size);
    size_t end = nl ? (size_t)(nl - data) : size;
    char line[64];
    size_t l = end - 2 < sizeof(line) - 1 ? end - 2 : sizeof(line) - 1;
    memcpy(line, data + 2, l);
    line[l] = '\0';
    char *sp = strchr(line, ' ');
    if (sp != NULL) {
        *sp = '\0';
        *hash_set = mcr_hash_from_name(sp + 1, hash) == MCR_OK;
    }
    if (mcr_mode_from_name(line, mode) != MCR_OK)
        *mode = MCR_MODE_KETAMA;
    return nl ? end + 1 : size;
}

/* Set the mode and hash, after the cost check; 0 when too costly. */
static int configure(mcr_config *cfg, mcr_mode mode, mcr_hash hash, int hash_set)
{
    uint64_t total = fuzz_total_weight(cfg);
    if (!fuzz_mode_cheap(mode, mcr_config_server_count(cfg), total))
        return 0;
    FUZZ_CHECK(mcr_config_set_mode(cfg, mode) == MCR_OK, "set_mode");
    if (hash_set)
        FUZZ_CHECK(mcr_config_set_hash(cfg, hash) == MCR_OK, "set_hash");
    return 1;
}

/* "host:port:weight" of ring server i, brackets for IPv6. */
static int item(const mcr_ring *r, size_t i, char *out, size_t cap)
{
    const char *h = mcr_ring_server_host(r, i);
    int v6 = strchr(h, ':') != NULL;
    return snprintf(out, cap, "%s%s%s:%d:%" PRIu32, v6 ? "[" : "", h, v6 ? "]" : "",
                    mcr_ring_server_port(r, i), mcr_ring_server_weight(r, i));
}

static void same_servers(const mcr_ring *a, const mcr_ring *b, const char *what)
{
    size_t n = mcr_ring_server_count(a);
    FUZZ_CHECK(mcr_ring_server_count(b) == n, "%s: %zu servers, then %zu", what, n,
               mcr_ring_server_count(b));
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(strcmp(mcr_ring_server_host(a, i), mcr_ring_server_host(b, i)) == 0 &&
                       mcr_ring_server_port(a, i) == mcr_ring_server_port(b, i) &&
                       mcr_ring_server_weight(a, i) == mcr_ring_server_weight(b, i),
                   "%s: server %zu \"%s\" then \"%s\"", what, i, mcr_ring_server_name(a, i),
                   mcr_ring_server_name(b, i));
}

static void list_target(const char *list, mcr_mode mode, mcr_hash hash, int hash_set,
                        const uint8_t *data, size_t size)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    FUZZ_CHECK(cfg != NULL, "out of memory");
    FUZZ_CHECK(mcr_config_add_server(cfg, "base.example", 1, 1, &err) == MCR_OK, "base");
    int rc = mcr_config_add_servers(cfg, list, &err);
    if (rc != MCR_OK) {
        fuzz_check_error(rc, &err, "mcr_config_add_servers");
        FUZZ_CHECK(mcr_config_server_count(cfg) == 1, "a failed list added %zu servers",
                   mcr_config_server_count(cfg) - 1);
        mcr_config_free(cfg);
        return;
    }
    size_t n = mcr_config_server_count(cfg);
    FUZZ_CHECK(n >= 2, "an accepted list added no server");
    if (!configure(cfg, mode, hash, hash_set)) {
        mcr_config_free(cfg);
        return;
    }
    mcr_ring *ring = NULL;
    rc = mcr_ring_new(cfg, &ring, &err);
    if (rc != MCR_OK) {
        fuzz_check_error(rc, &err, "mcr_ring_new of a list");
        mcr_config_free(cfg);
        return;
    }
    fuzz_check_ring(ring, n, data, size);

    /* The list written back from the ring reads as the same servers,
     * which place every key alike. */
    size_t cap = n * (MCR_HOSTNAME_MAX + 32) + 1, len = 0;
    char *again = malloc(cap);
    FUZZ_CHECK(again != NULL, "out of memory");
    for (size_t i = 1; i < n; i++) {
        if (len > 0)
            again[len++] = ',';
        len += (size_t)item(ring, i, again + len, cap - len);
    }
    mcr_config *c2 = mcr_config_new();
    FUZZ_CHECK(c2 != NULL, "out of memory");
    FUZZ_CHECK(mcr_config_add_server(c2, "base.example", 1, 1, &err) == MCR_OK, "base");
    rc = mcr_config_add_servers(c2, again, &err);
    FUZZ_CHECK(rc == MCR_OK, "\"%s\" written back as \"%s\" is refused: %s", list, again,
               err.message);
    FUZZ_CHECK(mcr_config_set_mode(c2, mode) == MCR_OK, "set_mode");
    if (hash_set)
        mcr_config_set_hash(c2, hash);
    mcr_ring *r2 = NULL;
    FUZZ_CHECK(mcr_ring_new(c2, &r2, &err) == MCR_OK, "ring of the list written back: %s",
               err.message);
    same_servers(ring, r2, "list written back");
    for (size_t off = 0; off < size; off += 3) {
        size_t l = size - off < 50 ? size - off : 50;
        FUZZ_CHECK(mcr_ring_locate(ring, data + off, l) == mcr_ring_locate(r2, data + off, l),
                   "list written back places key at %zu elsewhere", off);
    }
    mcr_ring_free(r2);
    mcr_config_free(c2);
    free(again);
    mcr_ring_free(ring);
    mcr_config_free(cfg);
}

/* A value the file syntax can carry back: no blank, '#' or '='. */
static int plain(const char *s)
{
    return s != NULL && strpbrk(s, " \t#=") == NULL;
}

static void file_target(const uint8_t *data, size_t size, mcr_mode mode, mcr_hash hash,
                        int hash_set)
{
    mcr_error err;
    const char *path = fuzz_write_file(0, data, size);
    mcr_config *cfg = mcr_config_new();
    FUZZ_CHECK(cfg != NULL, "out of memory");
    FUZZ_CHECK(mcr_config_add_server(cfg, "base.example", 1, 1, &err) == MCR_OK, "base");
    int rc = mcr_config_load_server_file(cfg, path, &err);
    if (rc != MCR_OK) {
        fuzz_check_error(rc, &err, "mcr_config_load_server_file");
        FUZZ_CHECK(mcr_config_server_count(cfg) == 1, "a failed file added %zu servers",
                   mcr_config_server_count(cfg) - 1);
        mcr_config_free(cfg);
        return;
    }
    size_t n = mcr_config_server_count(cfg);
    FUZZ_CHECK(n >= 2, "an accepted file added no server");
    /* Loading it again into the same config: every server is a duplicate. */
    rc = mcr_config_load_server_file(cfg, path, &err);
    FUZZ_CHECK(rc == MCR_ERR_DUPLICATE, "the same file loaded twice: %d (%s)", rc,
               rc ? err.message : "accepted");
    fuzz_check_error(rc, &err, "a file loaded twice");
    FUZZ_CHECK(mcr_config_server_count(cfg) == n, "a failed reload changed the config");
    if (!configure(cfg, mode, hash, hash_set)) {
        mcr_config_free(cfg);
        return;
    }
    mcr_snapshot *snap = NULL;
    rc = mcr_snapshot_new(cfg, 1, &snap, &err);
    if (rc != MCR_OK) {
        fuzz_check_error(rc, &err, "mcr_snapshot_new of a server file");
        mcr_config_free(cfg);
        return;
    }
    FUZZ_CHECK(mcr_snapshot_server_count(snap) == n, "snapshot of %zu servers, config of %zu",
               mcr_snapshot_server_count(snap), n);
    fuzz_check_snapshot(snap, data, size);

    /* Written back as a server file: the same servers, ids and zones. */
    size_t cap = n * (4 * MCR_HOSTNAME_MAX + 64) + 1, len = 0;
    char *text = malloc(cap);
    FUZZ_CHECK(text != NULL, "out of memory");
    int writable = 1;
    for (size_t i = 1; i < n && writable; i++) {
        mcr_server_desc d;
        mcr_snapshot_server(snap, i, &d);
        int v6 = strchr(d.host, ':') != NULL;
        /* (a derived id over 255 bytes, "host:port" of a long host, cannot
         * be given as id=, whose limit is 255) */
        writable = plain(d.id) && strlen(d.id) <= MCR_HOSTNAME_MAX &&
                   (d.zone == NULL || plain(d.zone));
        len += (size_t)snprintf(text + len, cap - len, "%s%s%s:%d weight=%" PRIu32 " id=%s%s%s\n",
                                v6 ? "[" : "", d.host, v6 ? "]" : "", d.port, d.weight, d.id,
                                d.zone ? " zone=" : "", d.zone ? d.zone : "");
    }
    if (writable) {
        mcr_config *c2 = mcr_config_new();
        FUZZ_CHECK(c2 != NULL, "out of memory");
        FUZZ_CHECK(mcr_config_add_server(c2, "base.example", 1, 1, &err) == MCR_OK, "base");
        rc = mcr_config_load_server_file(c2, fuzz_write_file(1, text, len), &err);
        FUZZ_CHECK(rc == MCR_OK, "written back, the file is refused: %s\n%s", err.message, text);
        mcr_config_set_mode(c2, mode);
        if (hash_set)
            mcr_config_set_hash(c2, hash);
        mcr_snapshot *s2 = NULL;
        rc = mcr_snapshot_new(c2, 1, &s2, &err);
        FUZZ_CHECK(rc == MCR_OK, "the file written back builds no snapshot: %s", err.message);
        FUZZ_CHECK(mcr_snapshot_server_count(s2) == n, "servers");
        for (size_t i = 0; i < n; i++) {
            mcr_server_desc x, y;
            mcr_snapshot_server(snap, i, &x);
            mcr_snapshot_server(s2, i, &y);
            FUZZ_CHECK(strcmp(x.id, y.id) == 0 && strcmp(x.host, y.host) == 0 &&
                           x.port == y.port && x.weight == y.weight &&
                           (x.zone == NULL) == (y.zone == NULL) &&
                           (x.zone == NULL || strcmp(x.zone, y.zone) == 0),
                       "server %zu \"%s\" written back as \"%s\"", i, x.id, y.id);
        }
        mcr_snapshot_unref(s2);
        mcr_config_free(c2);
    }
    free(text);
    mcr_snapshot_unref(snap);
    mcr_config_free(cfg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8192)
        return 0;
    mcr_mode mode;
    mcr_hash hash;
    int hash_set;
    size_t skip = header(data, size, &mode, &hash, &hash_set);
    char *list = fuzz_cstr(data + skip, size - skip);
    if (list != NULL) {
        list_target(list, mode, hash, hash_set, data, size);
        free(list);
    }
    file_target(data, size, mode, hash, hash_set);
    return 0;
}
