/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_lmc_options.c: fuzz target of libmemcached option strings (compat/libmemcached.c): errors, all-or-nothing, statement-by-statement application, and the ring. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "mcroute_libmemcached.h"
#include "mcroute_pool.h"

/* What an mcr_lmc places, as a snapshot checksum (NULL: no ring, with the
 * error's code in *rc). The checksum covers mode, hashes, prefix, servers
 * and points. Checks the ring on the way. */
static char *placement(const mcr_lmc *lmc, int *rc, const uint8_t *data, size_t size)
{
    mcr_config *cfg = NULL;
    mcr_error err;
    *rc = mcr_lmc_config(lmc, &cfg, &err);
    if (*rc != MCR_OK) {
        fuzz_check_error(*rc, &err, "mcr_lmc_config");
        return NULL;
    }
    mcr_ring *ring = NULL;
    int r2 = mcr_lmc_ring(lmc, &ring, &err);
    FUZZ_CHECK(r2 == MCR_OK, "mcr_lmc_config works, mcr_lmc_ring does not: %s", err.message);
    size_t n = mcr_config_server_count(cfg);
    fuzz_check_ring(ring, n, data, size);
    mcr_snapshot *snap = NULL;
    *rc = mcr_snapshot_new(cfg, 1, &snap, &err);
    char *sum = NULL;
    if (*rc == MCR_OK) {
        sum = strdup(mcr_snapshot_checksum(snap));
        FUZZ_CHECK(sum != NULL, "out of memory");
        /* the snapshot places keys as the lmc's own ring */
        const mcr_ring *sr = mcr_snapshot_ring(snap);
        for (size_t off = 0; off < size; off += 7) {
            size_t l = size - off < 40 ? size - off : 40;
            FUZZ_CHECK(mcr_ring_locate(sr, data + off, l) == mcr_ring_locate(ring, data + off, l),
                       "snapshot and lmc ring disagree at offset %zu", off);
        }
        mcr_snapshot_unref(snap);
    } else {
        fuzz_check_error(*rc, &err, "mcr_snapshot_new of an lmc config");
    }
    mcr_ring_free(ring);
    mcr_config_free(cfg);
    return sum;
}

static void check_pool_options(const mcr_lmc *lmc)
{
    mcr_pool_options o, before;
    mcr_error err;
    mcr_pool_options_init(&o);
    before = o;
    int rc = mcr_pool_options_from_lmc(&o, lmc, &err);
    if (rc != MCR_OK) {
        fuzz_check_error(rc, &err, "mcr_pool_options_from_lmc");
        FUZZ_CHECK(memcmp(&o, &before, sizeof(o)) == 0, "options changed by a failed fill");
    }
}

/* A base state the input is applied to, so that all-or-nothing is seen:
 * servers, a distribution and a namespace already set. */
static const char BASE[] = "--SERVER=alpha.example:11211 --SERVER=beta.example:11212/?3 "
                           "--DISTRIBUTION=consistent";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *opts = fuzz_cstr(data, size);
    if (opts == NULL)
        return 0;
    mcr_error err;

    /* 1. Into a fresh handle. */
    mcr_lmc *a = mcr_lmc_new();
    FUZZ_CHECK(a != NULL, "out of memory");
    int rc = mcr_lmc_parse_options(a, opts, &err);
    int prc;
    char *pa = NULL;
    if (rc != MCR_OK) {
        fuzz_check_error(rc, &err, "mcr_lmc_parse_options");
        /* unchanged: still a fresh handle, no servers */
        mcr_config *c = NULL;
        FUZZ_CHECK(mcr_lmc_config(a, &c, &err) == MCR_ERR_EMPTY,
                   "a failed parse left servers behind");
    } else {
        pa = placement(a, &prc, data, size);
        check_pool_options(a);
        /* Deterministic: the same string again, into another fresh handle. */
        mcr_lmc *a2 = mcr_lmc_new();
        FUZZ_CHECK(a2 != NULL, "out of memory");
        FUZZ_CHECK(mcr_lmc_parse_options(a2, opts, &err) == MCR_OK, "second parse failed");
        int prc2;
        char *pa2 = placement(a2, &prc2, data, size);
        FUZZ_CHECK(prc2 == prc && ((pa == NULL && pa2 == NULL) ||
                                   (pa && pa2 && strcmp(pa, pa2) == 0)),
                   "the same options placed differently");
        free(pa2);
        mcr_lmc_free(a2);

        /* Left to right: the first statement, then the rest, into one
         * handle, place keys as the whole string (when the split is at a
         * plain " --" between two statements; --HASH is once per string,
         * so a string with two cannot be split and stay refused). */
        const char *sp = strstr(opts, " --");
        if (sp != NULL && strchr(opts, '"') == NULL && strchr(opts, '#') == NULL &&
            strstr(opts, "END") == NULL && strstr(opts, "INCLUDE") == NULL) {
            char *first = strndup(opts, (size_t)(sp - opts));
            FUZZ_CHECK(first != NULL, "out of memory");
            mcr_lmc *b = mcr_lmc_new();
            FUZZ_CHECK(b != NULL, "out of memory");
            int r1 = mcr_lmc_parse_options(b, first, &err);
            FUZZ_CHECK(r1 == MCR_OK, "\"%s\" parses, its first statement \"%s\" does not: %s",
                       opts, first, err.message);
            int r2 = mcr_lmc_parse_options(b, sp + 1, &err);
            FUZZ_CHECK(r2 == MCR_OK, "\"%s\" parses, its rest \"%s\" after the first does not: %s",
                       opts, sp + 1, err.message);
            int prcb;
            char *pb = placement(b, &prcb, data, size);
            FUZZ_CHECK(prcb == prc && ((pa == NULL && pb == NULL) ||
                                       (pa && pb && strcmp(pa, pb) == 0)),
                       "\"%s\" in one string and in two place keys differently", opts);
            free(pb);
            free(first);
            mcr_lmc_free(b);
        }
    }
    free(pa);
    mcr_lmc_free(a);

    /* 2. Onto a handle already configured: a failure changes nothing. */
    mcr_lmc *base = mcr_lmc_new();
    FUZZ_CHECK(base != NULL, "out of memory");
    FUZZ_CHECK(mcr_lmc_parse_options(base, BASE, &err) == MCR_OK, "base: %s", err.message);
    char *before = placement(base, &prc, NULL, 0);
    FUZZ_CHECK(before != NULL, "base has no placement");
    rc = mcr_lmc_parse_options(base, opts, &err);
    if (rc != MCR_OK) {
        fuzz_check_error(rc, &err, "mcr_lmc_parse_options onto a base");
        char *after = placement(base, &prc, NULL, 0);
        FUZZ_CHECK(after != NULL && strcmp(before, after) == 0,
                   "a failed parse changed the placement");
        free(after);
    } else {
        free(placement(base, &prc, data, size));
        check_pool_options(base);
    }
    free(before);
    mcr_lmc_free(base);
    free(opts);
    return 0;
}
