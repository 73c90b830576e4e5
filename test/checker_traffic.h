/* SPDX-License-Identifier: BSD-3-Clause */
/* checker_traffic.h: one process of test_migrate_checker's fleet: it follows the pool in etcd, routes through a connection pool on that follower, writes its own keys (each write recorded in the shared model) and reads everyone's (each read checked against it). */
#ifndef MCR_CHECKER_TRAFFIC_H
#define MCR_CHECKER_TRAFFIC_H

#include <stdint.h>

#include "checker_model.h"
#include "mcroute_snapshot.h"

/* The test's memcached servers are numbered 0 .. CK_SERVERS_MAX - 1. */
#define CK_SERVERS_MAX 8

typedef struct ck_traffic_cfg {
    ck_table *table;
    int proc;                    /* it writes the keys k with k % nprocs == proc */
    const char *endpoints;       /* etcd's client URLs */
    const char *pool;            /* the pool's name */
    const mcr_snapshot *to;      /* the migration's target: the new owners (spy reads) */
    const uint8_t *from_mc;      /* per key: its owner before the migration, a memcached number */
    const uint8_t *to_mc;        /* ... and after it */
    unsigned depth;              /* requests in flight */
    unsigned read_pct;           /* reads among the requests, percent */
    unsigned request_timeout_ms; /* the pool's */
    unsigned slow_ms;            /* a request in flight longer marks its servers as slow */
    uint64_t seed;
} ck_traffic_cfg;

/*
 * The process's whole life, in a child forked for it (it must not use
 * Check): follow the pool (client id "ck-PROC"), write each of its keys
 * once and count itself in table->ready, then traffic until table->stop,
 * wait for every request in flight, free everything. Returns the exit
 * status: 0, or 1 with table->error[proc] saying why.
 *
 * The traffic: `depth` requests in flight, `read_pct` percent reads.
 * Three in four requests are for keys that the migration moves, most of
 * them of the server being copied from (table->focus). Writes are set,
 * add, replace, append, delete, incr and touch, each chosen so that the
 * model says what it must answer (and a few whose answer is "nothing
 * there" or "already there", which catch a copy that came back). While
 * this process is in phase copying, its writes of moved keys are only
 * those that drop the new owner's copy (add, replace, append, delete,
 * incr): after each, a read of the new owner directly ("spy", not
 * checked as a fleet read) tells whether the copier's add has landed
 * since; once it has, the key is not written again until the grace
 * period, so that a copy that raced a write (the copier read the value
 * before the write and added it after) stays there for the reads after the
 * switch to find.
 *
 * Servers that time out are avoided for a while (writes to them would
 * only freeze keys): a request in flight longer than slow_ms, or failed,
 * marks the servers it may reach as bad for 250 ms, then one read probes
 * them; writes go there again once a request succeeded.
 */
int ck_traffic_run(const ck_traffic_cfg *c);

#endif
