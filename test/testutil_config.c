/* SPDX-License-Identifier: BSD-3-Clause */
/* testutil_config.c: configs and rings built from a server list string, for the Check suites (links libmcroute, unlike testutil.c). */
#include <check.h>

#include "testutil_config.h"

mcr_config *tu_config(const char *spec, mcr_mode mode, mcr_hash hash)
{
    mcr_error err = {0};
    mcr_config *cfg = mcr_config_new();
    int rc;

    if (cfg == NULL)
        ck_abort_msg("mcr_config_new: out of memory");
    rc = mcr_config_set_mode(cfg, mode);
    if (rc != MCR_OK)
        ck_abort_msg("mcr_config_set_mode(%d): %s", (int)mode, mcr_strerror(rc));
    if (hash != MCR_HASH_COUNT) {
        rc = mcr_config_set_hash(cfg, hash);
        if (rc != MCR_OK)
            ck_abort_msg("mcr_config_set_hash(%d): %s", (int)hash, mcr_strerror(rc));
    }
    rc = mcr_config_add_servers(cfg, spec, &err);
    if (rc != MCR_OK)
        ck_abort_msg("mcr_config_add_servers(\"%s\"): %s", spec, err.message);
    return cfg;
}

mcr_ring *tu_ring(const char *spec, mcr_mode mode, mcr_hash hash)
{
    mcr_error err = {0};
    mcr_config *cfg = tu_config(spec, mode, hash);
    mcr_ring *ring = NULL;
    int rc = mcr_ring_new(cfg, &ring, &err);

    mcr_config_free(cfg);
    if (rc != MCR_OK)
        ck_abort_msg("mcr_ring_new(\"%s\", mode %s): %s", spec, mcr_mode_name(mode), err.message);
    return ring;
}
