/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_ketama_file.c: fuzz target of libketama server files (compat/ketama_file.c): all or nothing, labels as written, a ring every key locates on, and a round trip through the file syntax. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "mcroute_ketama.h"

/* 1 when the `n` bytes at `needle` occur in `hay` (memmem is not C11). */
static int contains(const uint8_t *hay, size_t size, const char *needle, size_t n)
{
    for (size_t i = 0; n <= size && i <= size - n; i++)
        if (memcmp(hay + i, needle, n) == 0)
            return 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8192)
        return 0;
    mcr_error err;
    const char *path = fuzz_write_file(0, data, size);

    /* Onto a config that has a server already: all or nothing. */
    mcr_config *base = mcr_config_new();
    FUZZ_CHECK(base != NULL, "out of memory");
    FUZZ_CHECK(mcr_config_add_server_named(base, "base.example", 1, 1, "base.example:1", &err) ==
                   MCR_OK,
               "base");
    int rc = mcr_ketama_load_file(base, path, &err);
    if (rc != MCR_OK) {
        fuzz_check_error(rc, &err, "mcr_ketama_load_file onto a base");
        FUZZ_CHECK(mcr_config_server_count(base) == 1, "a failed load added %zu servers",
                   mcr_config_server_count(base) - 1);
        FUZZ_CHECK(strcmp(mcr_ketama_address(base, 0), "base.example:1") == 0,
                   "a failed load changed the base's label");
    }
    mcr_config_free(base);

    mcr_config *cfg = mcr_config_new();
    FUZZ_CHECK(cfg != NULL, "out of memory");
    int rc2 = mcr_ketama_load_file(cfg, path, &err);
    if (rc2 != MCR_OK) {
        fuzz_check_error(rc2, &err, "mcr_ketama_load_file");
        FUZZ_CHECK(mcr_config_server_count(cfg) == 0, "a failed load added servers");
        mcr_config_free(cfg);
        return 0;
    }
    size_t n = mcr_config_server_count(cfg);
    FUZZ_CHECK(n >= 1, "an accepted file with no server");
    FUZZ_CHECK(mcr_ketama_address(cfg, n) == NULL, "an address past the last");
    for (size_t i = 0; i < n; i++) {
        const char *a = mcr_ketama_address(cfg, i);
        FUZZ_CHECK(a != NULL && a[0] != '\0' && strlen(a) <= MCR_HOSTNAME_MAX,
                   "server %zu address", i);
        FUZZ_CHECK(strpbrk(a, " \t\r\n#") == NULL, "address \"%s\" with a blank or '#'", a);
        FUZZ_CHECK(contains(data, size, a, strlen(a)), "address \"%s\" not in the file", a);
    }
    /* Loading it again: every server is a duplicate. */
    rc = mcr_ketama_load_file(cfg, path, &err);
    FUZZ_CHECK(rc == MCR_ERR_DUPLICATE, "the same file twice: %d (%s)", rc,
               rc ? err.message : "accepted");
    fuzz_check_error(rc, &err, "a ketama file loaded twice");
    FUZZ_CHECK(mcr_config_server_count(cfg) == n, "a failed reload changed the config");

    mcr_ring *ring = NULL;
    rc = mcr_ring_new(cfg, &ring, &err);
    FUZZ_CHECK(rc == MCR_OK, "a loaded ketama file builds no ring: %s", err.message);
    fuzz_check_ring(ring, n, data, size);
    mcr_snapshot *snap = NULL;
    rc = mcr_snapshot_new(cfg, 1, &snap, &err);
    if (rc == MCR_OK) {
        fuzz_check_snapshot(snap, data, size);
        mcr_snapshot_unref(snap);
    } else {
        fuzz_check_error(rc, &err, "mcr_snapshot_new of a ketama file");
    }

    /* Written back, "address weight" a line: the same continuum. */
    size_t cap = n * (MCR_HOSTNAME_MAX + 16) + 1, len = 0;
    char *text = malloc(cap);
    FUZZ_CHECK(text != NULL, "out of memory");
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, cap - len, "%s\t%" PRIu32 "\n",
                                mcr_ketama_address(cfg, i), mcr_ring_server_weight(ring, i));
    mcr_config *c2 = mcr_config_new();
    FUZZ_CHECK(c2 != NULL, "out of memory");
    rc = mcr_ketama_load_file(c2, fuzz_write_file(1, text, len), &err);
    FUZZ_CHECK(rc == MCR_OK, "written back, the file is refused: %s\n%s", err.message, text);
    mcr_ring *r2 = NULL;
    FUZZ_CHECK(mcr_ring_new(c2, &r2, &err) == MCR_OK, "ring: %s", err.message);
    size_t np = mcr_ring_point_count(ring);
    FUZZ_CHECK(mcr_ring_server_count(r2) == n && mcr_ring_point_count(r2) == np,
               "written back: %zu servers %zu points, then %zu and %zu", n, np,
               mcr_ring_server_count(r2), mcr_ring_point_count(r2));
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(strcmp(mcr_ketama_address(cfg, i), mcr_ketama_address(c2, i)) ==
                           0 &&
                       strcmp(mcr_ring_server_name(ring, i), mcr_ring_server_name(r2, i)) == 0,
                   "server %zu written back differs", i);
    for (size_t i = 0; i < np; i++) {
        uint32_t v1, s1, v2, s2;
        mcr_ring_point(ring, i, &v1, &s1);
        mcr_ring_point(r2, i, &v2, &s2);
        FUZZ_CHECK(v1 == v2 && s1 == s2, "point %zu written back differs", i);
    }
    mcr_ring_free(r2);
    mcr_config_free(c2);
    free(text);
    mcr_ring_free(ring);
    mcr_config_free(cfg);
    return 0;
}
