/* SPDX-License-Identifier: BSD-3-Clause */
/* preload.h: libmcroute_preload.so's side of the bridge (preload.c): the process's router from its environment, and every handle the program creates attached to it; never installed. */
#ifndef MCR_PRELOAD_H
#define MCR_PRELOAD_H

#include "bridge.h"

/* A handle the program created (memcached_create(), memcached(),
 * memcached_clone() of one not attached): attached with
 * MCR_MEMCACHED_ACCEPT when the environment names servers
 * (MCROUTE_STATE, MCROUTE_SNAPSHOT or MCROUTE_SERVERS); left alone
 * otherwise. */
void mcr__preload_created(memcached_st *memc);

/* The process's router, made at the first call and, while it cannot be
 * (a state or snapshot file missing or refused, bad variables), tried
 * again at most once a second (a line on standard error each time): NULL
 * until then. With MCROUTE_SNAPSHOT it also publishes the file again when
 * it changed (looked at once a second). Thread-safe; once the router
 * exists, two atomic loads (and time() with MCROUTE_SNAPSHOT). */
mcr_router *mcr__preload_router(void);

#endif /* MCR_PRELOAD_H */
