/* SPDX-License-Identifier: BSD-3-Clause */
/* fleet_internal.h: what store.c (the blocking calls) and follow.c (the follower) share: options checked and copied, the pool's keys, reading a pool's value; never installed. */
#ifndef MCR_FLEET_INTERNAL_H
#define MCR_FLEET_INTERNAL_H

#include <signal.h>

#include "etcd.h"
#include "mcroute_fleet.h"

/* The options, checked, with their strings copied and the keys derived. */
typedef struct mcr__fleet_conf {
    char *endpoints;
    char *pool;
    char *prefix;
    char *snapshot_key;   /* PREFIX POOL "/snapshot" */
    char *clients_prefix; /* PREFIX POOL "/clients/" */
    unsigned request_timeout_ms;
    unsigned wait_ms;
    unsigned retries;
} mcr__fleet_conf;

/* Check o (MCR_ERR_INVALID naming the field) and fill c. */
int mcr__fleet_conf_init(mcr__fleet_conf *c, const mcr_fleet_options *o, mcr_error *err);
void mcr__fleet_conf_cleanup(mcr__fleet_conf *c);

/* Whether s is a valid pool name or client id (1..MCR_FLEET_NAME_MAX of
 * [A-Za-z0-9._:-]). */
bool mcr__fleet_name_ok(const char *s);

/* SIGPIPE. libevent writes to sockets with writev(), without MSG_NOSIGNAL:
 * a connection etcd resets while a request is written would raise SIGPIPE,
 * whose default action ends the process. So every call that talks to etcd
 * blocks SIGPIPE on its thread for the call (block, then restore: a
 * SIGPIPE raised meanwhile, pending on the thread, is taken away first),
 * and the follower's thread is created with it blocked. */
void mcr__fleet_sigpipe_block(sigset_t *old);
void mcr__fleet_sigpipe_restore(const sigset_t *old);

/* Monotonic milliseconds. */
uint64_t mcr__fleet_now_ms(void);

/* Read the pool's snapshot through e: MCR_OK with *out (a new reference)
 * and the key's mod_revision and the read's revision; MCR_ERR_UNKNOWN when
 * the key does not exist (then *missing, when not NULL, is set: a value
 * that does not parse may fail with MCR_ERR_UNKNOWN too, an unknown mode);
 * the parse errors for a value that does not verify. */
int mcr__fleet_get(mcr__etcd *e, const mcr__fleet_conf *c, bool *missing, mcr_snapshot **out,
                   uint64_t *mod_revision, uint64_t *revision, mcr_error *err);

/* Parse a value of the snapshot key read at `mod_revision`. */
int mcr__fleet_parse(const mcr__fleet_conf *c, const unsigned char *value, size_t len,
                     uint64_t mod_revision, const mcr_snapshot *current, mcr_snapshot **out,
                     mcr_error *err);

#endif
