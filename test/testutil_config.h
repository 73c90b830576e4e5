/* SPDX-License-Identifier: BSD-3-Clause */
/* testutil_config.h: configs and rings built from a server list string, for the Check suites (links libmcroute, unlike testutil.c). */
#ifndef MCR_TESTUTIL_CONFIG_H
#define MCR_TESTUTIL_CONFIG_H

#include "mcroute.h"

/* A new config of mode `mode` holding the servers of `spec`, a list as
 * mcr_config_add_servers() reads it ("host:port:weight,..."). `hash` is set
 * with mcr_config_set_hash(); MCR_HASH_COUNT leaves it unset, so the key
 * hash follows the mode (mcr_mode_default_hash). Any refusal aborts the test
 * (ck_abort_msg) naming the call, the spec and the library's message.
 * The caller frees the config with mcr_config_free(). */
mcr_config *tu_config(const char *spec, mcr_mode mode, mcr_hash hash);

/* The ring of tu_config(spec, mode, hash), the config freed; the same
 * failures abort the test. The caller frees it with mcr_ring_free(). */
mcr_ring *tu_ring(const char *spec, mcr_mode mode, mcr_hash hash);

#endif
