/* SPDX-License-Identifier: BSD-3-Clause */
/* py_floor.c: bench_python's raw_floor, bench_pool's raw epoll client (pool_floor.c) as a library bench_python.py loads with ctypes and times in its own runs, beside the Python clients, on the same servers. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcroute.h"
#include "pool_floor.h"

/*
 * What no client can go under on the same servers at the same moment: the
 * same rounds as bench_python's loops (one get or set at a time; 100-key
 * multi-gets one at a time; sets 100 in flight for set_many) made by a
 * hand-written C epoll loop with no library and no interpreter. Each entry
 * point runs a whole loop, so bench_python.py times it as it times a
 * client's loop (process CPU and wall clock around the call) and the one
 * ctypes call costs nothing per key.
 *
 * Its keys are its own ("flr" and 7 digits: 10 bytes, as the others'), its
 * values 100 bytes, flags the key's index: pool_floor.c checks every reply
 * against them. Placement: libmemcached's ketama (the weighted mode, MD5),
 * as bench_pool's floor; the floor routes with mcr_snapshot_locate_many(),
 * the only mcroute call in its loops.
 *
 * Not thread-safe; one floor per bench run.
 */

#define FLOOR_TIMEOUT_MS 10000u

const char *bench_program = "bench_pyfloor"; /* benchutil.c's messages */

typedef struct pyfloor {
    mcr_snapshot *snap;
    pool_floor *f;
    size_t nkeys, value_len;
    char *keybuf;           /* nkeys keys of 10 bytes, one after the other */
    const char **key;
    size_t *len;
    char *val;              /* nkeys values of value_len bytes */
    uint64_t *lat;          /* pool_floor's latencies (unused here) */
    unsigned problems;
    char err[512];          /* the first problem */
} pyfloor;

/* The interface bench_python.py calls with ctypes (no header: no C
 * caller). */
const char *pyfloor_error(const pyfloor *p);
void pyfloor_free(pyfloor *p);
pyfloor *pyfloor_new(const int *ports, size_t nports, size_t nkeys, size_t value_len,
                     char *err, size_t errlen);
unsigned pyfloor_set(pyfloor *p, size_t n, unsigned depth);
unsigned pyfloor_get(pyfloor *p, size_t n, unsigned depth);
unsigned pyfloor_get_many(pyfloor *p, size_t calls, unsigned keys);

static void problem(void *ctx, const char *msg)
{
    pyfloor *p = ctx;
    if (p->problems++ == 0)
        snprintf(p->err, sizeof p->err, "%s", msg);
}

static void say(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* The message of the first problem of the floor's runs ("" when none). */
const char *pyfloor_error(const pyfloor *p)
{
    return p->err;
}

void pyfloor_free(pyfloor *p)
{
    if (p == NULL)
        return;
    pool_floor_free(p->f);
    mcr_snapshot_unref(p->snap);
    free(p->keybuf);
    free(p->key);
    free(p->len);
    free(p->val);
    free(p->lat);
    free(p);
}

static mcr_snapshot *snapshot_of(const int *ports, size_t nports, char *err, size_t errlen)
{
    mcr_error e;
    memset(&e, 0, sizeof e);
    mcr_config *cfg = mcr_config_new();
    int rc = cfg != NULL ? mcr_config_set_mode(cfg, MCR_MODE_WEIGHTED) : MCR_ERR_NOMEM;
    if (rc == MCR_OK)
        rc = mcr_config_set_hash(cfg, MCR_HASH_MD5);
    for (size_t i = 0; i < nports && rc == MCR_OK; i++)
        rc = mcr_config_add_server(cfg, "127.0.0.1", (unsigned)ports[i], 1, &e);
    mcr_snapshot *snap = NULL;
    if (rc == MCR_OK)
        rc = mcr_snapshot_new(cfg, 1, &snap, &e);
    mcr_config_free(cfg);
    if (rc != MCR_OK)
        say(err, errlen, "floor snapshot: %s", e.code ? e.message : mcr_strerror(rc));
    return rc == MCR_OK ? snap : NULL;
}

/* A floor on the memcached servers of 127.0.0.1 at `ports`, with `nkeys`
 * keys of its own and values of value_len bytes (not stored yet:
 * pyfloor_set() stores them). NULL with a message in err. */
pyfloor *pyfloor_new(const int *ports, size_t nports, size_t nkeys, size_t value_len,
                     char *err, size_t errlen)
{
    if (nports == 0 || nkeys == 0 || nkeys > 9999999 || value_len == 0) {
        say(err, errlen, "floor: no server, or keys not 1..9999999, or empty values");
        return NULL;
    }
    pyfloor *p = calloc(1, sizeof *p);
    if (p == NULL) {
        say(err, errlen, "floor: out of memory");
        return NULL;
    }
    p->nkeys = nkeys;
    p->value_len = value_len;
    p->keybuf = malloc(nkeys * 11);
    p->key = malloc(nkeys * sizeof *p->key);
    p->len = malloc(nkeys * sizeof *p->len);
    p->val = malloc(nkeys * value_len);
    p->lat = malloc(nkeys * sizeof *p->lat);
    if (p->keybuf == NULL || p->key == NULL || p->len == NULL || p->val == NULL ||
        p->lat == NULL) {
        say(err, errlen, "floor: out of memory");
        pyfloor_free(p);
        return NULL;
    }
    for (size_t i = 0; i < nkeys; i++) {
        char *k = p->keybuf + i * 11;
        snprintf(k, 11, "flr%07zu", i);
        p->key[i] = k;
        p->len[i] = 10;
        char *v = p->val + i * value_len;
        for (size_t j = 0; j < value_len; j++)
            v[j] = k[j % 10];
    }
    p->snap = snapshot_of(ports, nports, err, errlen);
    if (p->snap == NULL) {
        pyfloor_free(p);
        return NULL;
    }
    p->f = pool_floor_new(p->snap, err, errlen);
    if (p->f == NULL) {
        pyfloor_free(p);
        return NULL;
    }
    return p;
}

static pool_floor_job job_of(pyfloor *p)
{
    pool_floor_job job = {
        .nkeys = p->nkeys, .key = p->key, .len = p->len, .val = p->val,
        .value_len = p->value_len, .lat = p->lat, .timeout_ms = FLOOR_TIMEOUT_MS,
        .bad = problem, .ctx = p,
    };
    return job;
}

/* Requests for keys 0..n-1 (n at most nkeys), `depth` in flight: sets
 * with `set`, else gets (of keys stored before). The number of problems
 * so far (0: every set stored, every get the key's value). */
static unsigned pipeline(pyfloor *p, bool set, size_t n, unsigned depth)
{
    pool_floor_job job = job_of(p);
    if (n > p->nkeys || depth == 0)
        problem(p, "floor: requests for more keys than it has, or depth 0");
    else
        pool_floor_pipeline(p->f, &job, set, n, depth);
    return p->problems;
}

unsigned pyfloor_set(pyfloor *p, size_t n, unsigned depth)
{
    return pipeline(p, true, n, depth);
}

unsigned pyfloor_get(pyfloor *p, size_t n, unsigned depth)
{
    return pipeline(p, false, n, depth);
}

/* `calls` multi-gets of `keys` consecutive keys, one at a time. */
unsigned pyfloor_get_many(pyfloor *p, size_t calls, unsigned keys)
{
    pool_floor_job job = job_of(p);
    if (keys == 0 || keys > p->nkeys || calls > p->nkeys)
        problem(p, "floor: multi-gets of 0 or more keys than it has");
    else
        pool_floor_multiget(p->f, &job, calls, keys, 1);
    return p->problems;
}
