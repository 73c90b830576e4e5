/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_common.c: the helpers of fuzz.h: failing loudly, temporary files, and the invariants every placement must keep. */
#include "fuzz.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void fuzz_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s:%d: invariant broken: %s: ", file, line, cond);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    __builtin_trap();
}

/* ------------------------------------------------------------ files */

#define SLOTS 4
static char tmp_paths[SLOTS][256];

static void remove_tmp(void)
{
    for (int i = 0; i < SLOTS; i++)
        if (tmp_paths[i][0] != '\0')
            unlink(tmp_paths[i]);
}

const char *fuzz_tmp_path(int slot)
{
    FUZZ_CHECK(slot >= 0 && slot < SLOTS, "slot %d", slot);
    if (tmp_paths[slot][0] == '\0') {
        static int registered;
        const char *dir = getenv("TMPDIR");
        if (dir == NULL || dir[0] == '\0')
            dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        int n = snprintf(tmp_paths[slot], sizeof(tmp_paths[slot]), "%s/mcr-fuzz-%ld-%d", dir,
                         (long)getpid(), slot);
        FUZZ_CHECK(n > 0 && (size_t)n < sizeof(tmp_paths[slot]), "TMPDIR too long");
        if (!registered) {
            atexit(remove_tmp);
            registered = 1;
        }
    }
    return tmp_paths[slot];
}

const char *fuzz_write_file(int slot, const void *data, size_t len)
{
    const char *path = fuzz_tmp_path(slot);
    FILE *f = fopen(path, "wb");
    FUZZ_CHECK(f != NULL, "cannot create %s", path);
    FUZZ_CHECK(len == 0 || fwrite(data, 1, len, f) == len, "cannot write %s", path);
    FUZZ_CHECK(fclose(f) == 0, "cannot close %s", path);
    return path;
}

char *fuzz_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    FUZZ_CHECK(f != NULL, "cannot open %s", path);
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    FUZZ_CHECK(buf != NULL, "out of memory");
    for (;;) {
        if (n + 1 >= cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            FUZZ_CHECK(buf != NULL, "out of memory");
        }
        size_t k = fread(buf + n, 1, cap - n - 1, f);
        n += k;
        if (k == 0)
            break;
    }
    FUZZ_CHECK(!ferror(f), "cannot read %s", path);
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

char *fuzz_cstr(const uint8_t *data, size_t size)
{
    if (size > 0 && memchr(data, '\0', size) != NULL)
        return NULL;
    char *s = malloc(size + 1);
    FUZZ_CHECK(s != NULL, "out of memory");
    if (size > 0)
        memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* ------------------------------------------------------------ errors */

void fuzz_check_error(int rc, const mcr_error *err, const char *what)
{
    /* MCR_ERR_BUSY: the last code (mcroute.h). */
    FUZZ_CHECK(rc < 0 && rc >= MCR_ERR_BUSY, "%s: status %d is not an error code", what, rc);
    FUZZ_CHECK(strcmp(mcr_strerror(rc), "unknown error") != 0, "%s: status %d unnamed", what, rc);
    FUZZ_CHECK(err->code == rc, "%s: returned %d (%s), err->code %d", what, rc, mcr_strerror(rc),
               err->code);
    FUZZ_CHECK(memchr(err->message, '\0', sizeof(err->message)) != NULL,
               "%s: message not terminated", what);
    FUZZ_CHECK(err->message[0] != '\0', "%s: %s with an empty message", what, mcr_strerror(rc));
}

/* ------------------------------------------------------------ placement */

/* The keys every placement is asked about: fixed ones, then slices of the
 * input (so the fuzzer steers some keys). */
#define NKEYS 40
static size_t make_keys(const uint8_t *data, size_t size, const void *keys[NKEYS],
                        size_t lens[NKEYS])
{
    static const char *const fixed[] = {"",      "a",   "foo",         "key:1",      "key:2",
                                        "{tag}x", "x{}", "user:{42}:n", "\xff\xfe\x80",
                                        "0123456789012345678901234567890123456789"};
    size_t n = 0;
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
        keys[n] = fixed[i];
        lens[n] = strlen(fixed[i]);
        n++;
    }
    for (size_t off = 0; off < size && n < NKEYS; off += 1 + (size / 24)) {
        size_t l = size - off;
        if (l > 260)
            l = 260 - (off % 17);
        keys[n] = data + off;
        lens[n] = l;
        n++;
    }
    return n;
}

void fuzz_check_ring(const mcr_ring *ring, size_t nservers, const uint8_t *data, size_t size)
{
    FUZZ_CHECK(ring != NULL, "no ring");
    size_t n = mcr_ring_server_count(ring);
    FUZZ_CHECK(n == nservers && n > 0, "ring has %zu servers, expected %zu", n, nservers);
    for (size_t i = 0; i < n; i++) {
        const char *name = mcr_ring_server_name(ring, i), *host = mcr_ring_server_host(ring, i);
        int port = mcr_ring_server_port(ring, i);
        uint32_t w = mcr_ring_server_weight(ring, i);
        FUZZ_CHECK(name != NULL && name[0] != '\0', "server %zu has no name", i);
        FUZZ_CHECK(host != NULL && host[0] != '\0' && strlen(host) <= MCR_HOSTNAME_MAX,
                   "server %zu has no host", i);
        FUZZ_CHECK(port >= 1 && port <= 65535, "server %zu port %d", i, port);
        FUZZ_CHECK(w >= 1 && w <= MCR_WEIGHT_MAX, "server %zu weight %u", i, (unsigned)w);
    }
    FUZZ_CHECK(mcr_ring_server_name(ring, n) == NULL, "a name past the last server");
    size_t np = mcr_ring_point_count(ring);
    uint32_t prev = 0;
    for (size_t i = 0; i < np && i < 200000; i++) {
        uint32_t v, s;
        FUZZ_CHECK(mcr_ring_point(ring, i, &v, &s) == MCR_OK, "point %zu of %zu", i, np);
        FUZZ_CHECK(s < n, "point %zu names server %u of %zu", i, (unsigned)s, n);
        FUZZ_CHECK(i == 0 || v >= prev, "point %zu (%u) below point %zu (%u)", i, (unsigned)v,
                   i - 1, (unsigned)prev);
        prev = v;
    }
    FUZZ_CHECK(mcr_ring_point(ring, np, NULL, NULL) == MCR_ERR_INVALID, "a point past the last");

    const void *keys[NKEYS];
    size_t lens[NKEYS];
    uint32_t many[NKEYS];
    size_t nk = make_keys(data, size, keys, lens);
    mcr_ring_locate_many(ring, keys, lens, nk, many);
    for (size_t k = 0; k < nk; k++) {
        uint32_t idx = mcr_ring_locate(ring, keys[k], lens[k]);
        FUZZ_CHECK(idx < n, "key %zu (%zu bytes) on server %u of %zu", k, lens[k], (unsigned)idx,
                   n);
        FUZZ_CHECK(many[k] == idx, "key %zu: locate_many %u, locate %u", k, (unsigned)many[k],
                   (unsigned)idx);
        if (n > 1) {
            uint32_t h = mcr_ring_hash(ring, keys[k], lens[k]);
            uint32_t f = mcr_ring_find(ring, h);
            FUZZ_CHECK(f == idx, "key %zu (%zu bytes): find(hash %u) %u, locate %u (mode %s)", k,
                       lens[k], (unsigned)h, (unsigned)f, (unsigned)idx,
                       mcr_mode_name(mcr_ring_mode(ring)));
            size_t pt = mcr_ring_find_point(ring, h);
            if (np == 0) {
                FUZZ_CHECK(pt == SIZE_MAX, "a point (%zu) without points", pt);
            } else {
                uint32_t s;
                FUZZ_CHECK(pt < np, "point %zu of %zu", pt, np);
                FUZZ_CHECK(mcr_ring_point(ring, pt, NULL, &s) == MCR_OK && s == idx,
                           "key %zu: point %zu on server %u, locate %u", k, pt, (unsigned)s,
                           (unsigned)idx);
            }
        }
    }
}

static void check_checksum_text(const char *sum)
{
    FUZZ_CHECK(sum != NULL && strlen(sum) == MCR_SNAPSHOT_CHECKSUM_LEN, "checksum \"%s\"",
               sum ? sum : "(null)");
    for (size_t i = 0; sum[i] != '\0'; i++)
        FUZZ_CHECK((sum[i] >= '0' && sum[i] <= '9') || (sum[i] >= 'a' && sum[i] <= 'f'),
                   "checksum \"%s\"", sum);
}

void fuzz_check_snapshot(const mcr_snapshot *snap, const uint8_t *data, size_t size)
{
    size_t ns = mcr_snapshot_server_count(snap), na = mcr_snapshot_active_count(snap);
    FUZZ_CHECK(na >= 1 && na <= ns, "%zu active of %zu", na, ns);
    const mcr_ring *ring = mcr_snapshot_ring(snap);
    fuzz_check_ring(ring, na, data, size);
    check_checksum_text(mcr_snapshot_checksum(snap));
    size_t active = 0, nz = mcr_snapshot_zone_count(snap);
    for (size_t i = 0; i < ns; i++) {
        mcr_server_desc d;
        FUZZ_CHECK(mcr_snapshot_server(snap, i, &d) == MCR_OK, "server %zu of %zu", i, ns);
        FUZZ_CHECK(d.id != NULL && d.id[0] != '\0', "server %zu without an id", i);
        FUZZ_CHECK(mcr_snapshot_find(snap, d.id) == (uint32_t)i, "id \"%s\" found at %u, not %zu",
                   d.id, (unsigned)mcr_snapshot_find(snap, d.id), i);
        FUZZ_CHECK(d.zone == NULL || d.zone[0] != '\0', "server %zu: empty zone not NULL", i);
        FUZZ_CHECK(mcr_snapshot_server_zone(snap, i) <= nz, "server %zu zone %u of %zu", i,
                   (unsigned)mcr_snapshot_server_zone(snap, i), nz);
        active += d.state == MCR_STATE_ACTIVE;
    }
    FUZZ_CHECK(active == na, "%zu servers ACTIVE, active count %zu", active, na);
    const void *keys[NKEYS];
    size_t lens[NKEYS];
    size_t nk = make_keys(data, size, keys, lens);
    for (size_t k = 0; k < nk; k++) {
        uint32_t i = mcr_snapshot_locate(snap, keys[k], lens[k]);
        mcr_server_desc d;
        FUZZ_CHECK(i < ns && mcr_snapshot_server(snap, i, &d) == MCR_OK, "key %zu on %u of %zu",
                   k, (unsigned)i, ns);
        FUZZ_CHECK(d.state == MCR_STATE_ACTIVE, "key %zu on server %u, state %d", k, (unsigned)i,
                   (int)d.state);
        uint32_t r = mcr_snapshot_ring_server(snap, mcr_ring_locate(ring, keys[k], lens[k]));
        FUZZ_CHECK(r == i, "key %zu: snapshot locate %u, ring's server %u", k, (unsigned)i,
                   (unsigned)r);
    }

    /* Its file, loaded again: the same snapshot, and the same file (a
     * derived id over 255 bytes, "host:port" of a long host, included:
     * corpus/server_list/long-host-default-id). */
    mcr_error err;
    const char *p1 = fuzz_tmp_path(2), *p2 = fuzz_tmp_path(3);
    int rc = mcr_snapshot_save(snap, p1, &err);
    FUZZ_CHECK(rc == MCR_OK, "save: %s", err.message);
    mcr_snapshot *back = NULL;
    rc = mcr_snapshot_load(p1, NULL, 0, &back, &err);
    FUZZ_CHECK(rc == MCR_OK, "a saved snapshot does not load: %s", err.message);
    FUZZ_CHECK(strcmp(mcr_snapshot_checksum(back), mcr_snapshot_checksum(snap)) == 0,
               "loaded checksum %s, saved %s", mcr_snapshot_checksum(back),
               mcr_snapshot_checksum(snap));
    FUZZ_CHECK(mcr_snapshot_epoch(back) == mcr_snapshot_epoch(snap), "epoch changed");
    rc = mcr_snapshot_save(back, p2, &err);
    FUZZ_CHECK(rc == MCR_OK, "save again: %s", err.message);
    size_t l1, l2;
    char *t1 = fuzz_read_file(p1, &l1), *t2 = fuzz_read_file(p2, &l2);
    FUZZ_CHECK(l1 == l2 && memcmp(t1, t2, l1) == 0, "re-saved file differs (%zu, %zu bytes)", l1,
               l2);
    free(t1);
    free(t2);
    mcr_snapshot_unref(back);
}

/* ------------------------------------------------------------ cost */

uint64_t fuzz_total_weight(mcr_config *cfg)
{
    mcr_ring *r = NULL;
    uint64_t total = 0;
    mcr_config_set_mode(cfg, MCR_MODE_MODULA);
    if (mcr_ring_new(cfg, &r, NULL) != MCR_OK)
        return 0;
    for (size_t i = 0; i < mcr_ring_server_count(r); i++)
        total += mcr_ring_server_weight(r, i);
    mcr_ring_free(r);
    return total;
}

int fuzz_mode_cheap(mcr_mode mode, size_t nservers, uint64_t total)
{
    const uint64_t budget = (uint64_t)1 << 22; /* entries or points */
    switch (mode) {
    case MCR_MODE_STABLE_KETAMA:
    case MCR_MODE_BOUNDED:
        return total * 160 <= budget;
    case MCR_MODE_JUMP:
    case MCR_MODE_TWEMPROXY_MODULA:
        return total <= budget;
    case MCR_MODE_MAGLEV:
        return nservers * 200 <= budget;
    default:
        return nservers <= 20000;
    }
}
