/* SPDX-License-Identifier: BSD-3-Clause */
/* pool_bench.h: what bench_pool's parts share: its settings, the world (servers, keys, pools), the timed series and the checks of every reply. */
#ifndef MCR_POOL_BENCH_H
#define MCR_POOL_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "benchutil.h"
#include "mcroute_pool.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"
#include "pool_floor.h"
#include "realserver.h"

/*
 * bench_pool.c (the driver) defines the data declared here; the parts
 * (pool_mcr.c, pool_lmc.c, pool_report.c) read and write it and call
 * pool_bench.c's checks, never the driver nor each other.
 */

#define NSERVERS 4
#define VALUE_LEN 100
#define KEY_MAX 48
#define MAX_REPS 101
/* Mismatch messages printed per run; the rest are only counted. */
#define MAX_MESSAGES BENCH_MAX_MESSAGES

typedef struct settings {
    bool quick;
    bool verbose;
    bool keep;             /* keep the temporary directory (logs, YAML) */
    size_t nkeys;
    unsigned depth;        /* requests in flight (pipelined runs) */
    unsigned reps;
    unsigned mget_keys;    /* keys per multi-get */
    unsigned mget_rounds;  /* passes over the key set per multi-get repetition */
    unsigned mget_depth;   /* multi-gets in flight */
    unsigned mc_threads;   /* memcached -t */
    unsigned proxy_conns;  /* pool connections to nutcracker */
    const char *phase;     /* --phase: only this phase ("set", "get", "multiget") */
    const char *system;    /* --system: only this system (and the readers checking it) */
    bool twem_pool;        /* --twem-pool: run mcroute_twem even on the same placement */
} settings;

extern settings opt;
/* Problems so far: the exit status is 1 when not 0. */
extern int failures;

/* ------------------------------------------------------------ systems and phases */

enum {
    SYS_MCROUTE,       /* the pool, text protocol (the default) */
    SYS_MCROUTE_META,  /* the pool, meta protocol */
    SYS_MCROUTE_BATCH, /* the pool (text) in libmemcached's batches */
    SYS_LMC,
    SYS_NUT,
    SYS_FLOOR,         /* the raw epoll client with no library (pool_floor.c) */
    SYS_MCROUTE_TWEM,  /* the pool on nutcracker's placement, when it differs */
    SYS_COUNT
};
extern const char *const sys_names[SYS_COUNT];

enum { PH_SET, PH_GET, PH_MGET, PH_COUNT };
extern const char *const ph_names[PH_COUNT];

/* One repetition of one system in one phase. */
typedef struct run {
    double ops_per_s;   /* requests per second (keys per second for multi-gets) */
    double p50_us, p99_us;
    double cpu_ns;      /* client CPU per request (per key for multi-gets) */
} run;

typedef struct series {
    bool used;
    run r[MAX_REPS];
    unsigned n;
    uint64_t ops;            /* requests (keys) over all timed repetitions */
    long long proxy_ticks;   /* nutcracker CPU over them, clock ticks */
    long long server_ticks;  /* all memcached CPU over them, clock ticks */
    bool io;                 /* writes and reads counted (not libmemcached) */
    uint64_t writes, reads;  /* the client's send(2)/read(2) calls over them */
    uint64_t user_us, sys_us; /* the client's user and system CPU over them
                                 (getrusage: the kernel's split, sampled at
                                 its tick, of the exact total) */
    run med;                 /* medians */
} series;

extern series S[PH_COUNT][SYS_COUNT];

/* ------------------------------------------------------------ the world */

struct event_base;

typedef struct world {
    char dir[64];
    rs_proc mc[NSERVERS];
    rs_proc nut;
    int nut_port;

    /* keys and the values of the current generation */
    size_t n;
    char *key_bytes;
    const char **key;
    size_t *len;
    char *val;            /* n * VALUE_LEN */
    unsigned gen;
    uint32_t *seen;       /* multi-gets: serial + 1 of the last multi-get that returned key i */
    uint32_t serial;      /* multi-gets submitted so far */

    struct event_base *base;
    mcr_router *r_direct; /* "weighted" md5, the servers in order */
    mcr_router *r_twem;   /* from nutcracker's YAML (NULL when the same placement) */
    mcr_router *r_proxy;  /* nutcracker's listen address alone */
    mcr_pool *p_direct, *p_meta, *p_twem, *p_proxy;
    mcr_snapshot *floor_snap; /* r_direct's, held for the floor's routing */
    pool_floor *floor;
    bool same_placement;  /* nutcracker's placement is libmemcached's */

    uint64_t *lat;        /* per-request latencies of one pass, ns */
    size_t lat_cap;
} world;

extern world W;

/* ------------------------------------------------------------ checks (pool_bench.c) */

/* One run's mismatches (benchutil.h): what = "get_pipelined mcroute". */
typedef bench_checker checker;

/* Checks key i's value and flags against the current generation. */
void check_value(checker *c, size_t i, const char *v, size_t vlen, uint32_t flags);

/* The key's index: keys start with it in decimal, then ':'. SIZE_MAX when
 * the text is no key of ours. */
size_t key_index(const char *k, size_t len);

/* Room for n latencies in W.lat. */
void need_lat(size_t n);

#endif
