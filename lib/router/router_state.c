/* SPDX-License-Identifier: BSD-3-Clause */
/* router_state.c: a router fed from a host's state (mcroute_state.h): every read compares the generation in shared memory with the one adopted; the read that finds it moved loads the state, publishes it and records the adoption in this process's slot; a forked child claims a slot of its own. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "router_internal.h"
#include "state/state_internal.h"

/* A mapping of PATH.shm replaced by a writer: kept until the router is
 * freed, since other threads may still load its generation. */
typedef struct old_map {
    mcr__shm shm;
    struct old_map *next;
} old_map;

typedef struct mcr__router_state {
    mcr_router *router;
    char *path, *shm_path;
    unsigned flags;
    mcr__shm shm;
    old_map *old;
    /* One refresh at a time (trylock: the others go on with what the
     * router has); held by the fork handlers across a fork. Guards
     * everything below. */
    pthread_mutex_t mu;
    pid_t pid;          /* the process that `slot` belongs to */
    int slot;           /* -1: none */
    uint64_t owner;     /* the slot's owner word */
    /* What was adopted: the state's generation and its summary. */
    uint64_t generation;
    mcr__adoption adopted;
    char checksum[MCR_SNAPSHOT_CHECKSUM_LEN + 1];
    char migration_id[MCR_HOST_STATE_ID_MAX + 1];
    /* The migration this follower set on the router (serial 0: none). */
    uint64_t mig_serial;
    unsigned mig_flags;
    uint64_t mig_from, mig_to;
    char mig_id[MCR_HOST_STATE_ID_MAX + 1];
    uint64_t refused;
    mcr_error last_refusal;
    struct mcr__router_state *next; /* every state router, for fork */
} mcr__router_state;

/* ------------------------------------------------------------ fork */

static pthread_mutex_t all_mu = PTHREAD_MUTEX_INITIALIZER;
static mcr__router_state *all;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* Prefork servers (PHP-FPM, gunicorn, unicorn) fork their workers from a
 * master that may hold a router fed from a state: liburcu-bp's fork
 * protocol (its readers' registry, and call_rcu's thread, which publishes
 * start) is followed here for them, as liburcu-bp's header suggests with
 * pthread_atfork(3). */
static bool urcu_forking; /* this fork follows liburcu-bp's protocol here */

static void fork_prepare(void)
{
    pthread_mutex_lock(&all_mu);
    for (mcr__router_state *s = all; s != NULL; s = s->next)
        pthread_mutex_lock(&s->mu);
    /* only while a state's router exists (the handlers stay registered
     * after the last is freed, and the application may then follow the
     * protocol itself, as mcroute_router.h asks of it) */
    urcu_forking = all != NULL;
    if (urcu_forking) {
        urcu_bp_call_rcu_before_fork();
        urcu_bp_before_fork();
    }
}

static void fork_parent(void)
{
    if (urcu_forking) {
        urcu_bp_after_fork_parent();
        urcu_bp_call_rcu_after_fork_parent();
    }
    for (mcr__router_state *s = all; s != NULL; s = s->next)
        pthread_mutex_unlock(&s->mu);
    pthread_mutex_unlock(&all_mu);
}

/* The child's first read of each router looks at its state again, and
 * so claims a slot of its own (the parent's stays the parent's). */
static void fork_child(void)
{
    if (urcu_forking) {
        urcu_bp_after_fork_child();
        urcu_bp_call_rcu_after_fork_child();
    }
    for (mcr__router_state *s = all; s != NULL; s = s->next) {
        atomic_store_explicit(&s->router->state_seen, UINT64_MAX, memory_order_relaxed);
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_unlock(&all_mu);
}

static void atfork_register(void)
{
    (void)pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* ------------------------------------------------------------ adopting */

static uint64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool same_snapshot(const mcr_snapshot *a, const mcr_snapshot *b)
{
    return a != NULL && b != NULL && mcr_snapshot_epoch(a) == mcr_snapshot_epoch(b) &&
           strcmp(mcr_snapshot_checksum(a), mcr_snapshot_checksum(b)) == 0;
}

static void claim_slot(mcr__router_state *st)
{
    st->slot = -1;
    if (st->flags & MCR_HOST_STATE_OBSERVE)
        return;
    st->owner = MCR__SHM_OWNER(st->pid, mcr__proc_start_time((uint32_t)st->pid));
    st->slot = mcr__shm_claim(&st->shm, st->owner);
}

static void record(mcr__router_state *st)
{
    st->adopted.checksum = st->checksum;
    st->adopted.migration_id = st->migration_id;
    mcr__shm_adopted(&st->shm, st->slot, &st->adopted);
}

/* The migration of `info` set on the router (first: a switch publishes
 * `to` with the migration already there), or the one this follower set
 * ended when the state has none in force. */
static int adopt_migration(mcr__router_state *st, const mcr_state_info *info, mcr_error *err)
{
    mcr_router *r = st->router;
    mcr_router_migration t;
    if (info->from == NULL) {
        if (st->mig_serial != 0 && mcr_router_get_migration(r, &t) == MCR_OK) {
            if (t.serial == st->mig_serial)
                (void)mcr_router_clear_migration(r);
            mcr_router_migration_clear(&t);
        }
        st->mig_serial = 0;
        return MCR_OK;
    }
    unsigned flags = info->phase == MCR_MIGRATION_CLOSING ? MCR_MIGRATION_FLAG_CLOSING : 0;
    if (st->mig_serial != 0 && flags == st->mig_flags &&
        strcmp(info->migration_id, st->mig_id) == 0 && info->from_epoch == st->mig_from &&
        info->to_epoch == st->mig_to)
        return MCR_OK; /* the one set already (a phase without routing change) */
    int rc = mcr_router_set_migration(r, info->from, info->to, 0, flags, err);
    if (rc != MCR_OK)
        return rc;
    st->mig_serial = 1;
    st->mig_flags = flags;
    st->mig_from = info->from_epoch;
    st->mig_to = info->to_epoch;
    snprintf(st->mig_id, sizeof(st->mig_id), "%s", info->migration_id);
    if (mcr_router_get_migration(r, &t) == MCR_OK) {
        st->mig_serial = t.serial;
        mcr_router_migration_clear(&t);
    }
    return MCR_OK;
}

/* Publish `info` to the router (migration, snapshot) and note it. A
 * state whose snapshot the router would refuse (an epoch not above the
 * one published, a publish by hand having gone further) changes nothing. */
static int adopt(mcr__router_state *st, const mcr_state_info *info, mcr_error *err)
{
    mcr_router *r = st->router;
    mcr_snapshot *pub = mcr_router_published(r);
    bool same = same_snapshot(pub, info->snapshot);
    uint64_t have = pub != NULL ? mcr_snapshot_epoch(pub) : 0;
    mcr_snapshot_unref(pub);
    if (!same && pub != NULL && mcr_snapshot_epoch(info->snapshot) <= have)
        return mcr__error(err, MCR_ERR_STALE,
                          "state %s: generation %llu has epoch %llu, the router holds epoch "
                          "%llu: not adopted",
                          st->path, (unsigned long long)info->generation,
                          (unsigned long long)mcr_snapshot_epoch(info->snapshot),
                          (unsigned long long)have);
    int rc = MCR_OK;
    if (info->from != NULL)
        rc = adopt_migration(st, info, err);
    if (rc == MCR_OK && !same)
        rc = mcr_router_publish(r, info->snapshot, err);
    if (rc == MCR_OK && info->from == NULL)
        rc = adopt_migration(st, info, err);
    if (rc != MCR_OK)
        return rc;
    st->generation = info->generation;
    st->adopted = (mcr__adoption){info->generation, mcr_snapshot_epoch(info->snapshot),
                                  info->to_epoch, realtime_ns(), NULL, info->phase, NULL};
    snprintf(st->checksum, sizeof(st->checksum), "%s", mcr_snapshot_checksum(info->snapshot));
    snprintf(st->migration_id, sizeof(st->migration_id), "%s", info->migration_id);
    return MCR_OK;
}

/* A state read and published, or refused (counted, kept, recorded).
 * MCR_ERR_NOMEM only when it should be tried again. */
static int load(mcr__router_state *st)
{
    mcr_state_info info;
    mcr_error e = {0};
    mcr_snapshot *basis = mcr_router_published(st->router); /* its point caches */
    int rc = mcr__state_read_basis(st->path, basis, &info, &e);
    mcr_snapshot_unref(basis);
    if (rc == MCR_OK && info.generation == st->generation) {
        mcr_state_info_clear(&info);
        return MCR_OK;
    }
    if (rc == MCR_OK)
        rc = adopt(st, &info, &e);
    mcr_state_info_clear(&info);
    if (rc == MCR_ERR_NOMEM)
        return rc;
    if (rc != MCR_OK) {
        st->refused++;
        st->last_refusal = e;
        st->last_refusal.code = rc;
        mcr__shm_refused(&st->shm, st->slot, rc);
        return MCR_OK;
    }
    record(st);
    return MCR_OK;
}

/* The writer replaced PATH.shm: map the new one (the old mapping stays
 * until the router is freed) and claim a slot there. */
static void reopen(mcr__router_state *st)
{
    mcr__shm fresh;
    mcr_error e = {0};
    if (mcr__shm_open(st->shm_path, !(st->flags & MCR_HOST_STATE_OBSERVE), &fresh, &e) != MCR_OK)
        return; /* not there yet: the next change tries again */
    old_map *o = malloc(sizeof(*o));
    if (o == NULL) {
        mcr__shm_close(&fresh);
        return;
    }
    mcr__shm_release(&st->shm, st->slot, st->owner);
    o->shm = st->shm;
    o->next = st->old;
    st->old = o;
    st->shm = fresh;
    claim_slot(st);
    st->generation = 0; /* load it again: the slot is new */
    atomic_store_explicit(&st->router->state_gen, &st->shm.h->generation, memory_order_release);
}

void mcr__router_state_refresh(mcr_router *r)
{
    mcr__router_state *st = r->state;
    /* a publish inside a read-side section would be refused: the next
     * read outside one adopts */
    if (st == NULL || mcr__router_in_section() || pthread_mutex_trylock(&st->mu) != 0)
        return;
    bool claimed = false;
    pid_t pid = getpid();
    if (pid != st->pid) { /* a forked child */
        st->pid = pid;
        claim_slot(st);
        claimed = true;
    }
    if (atomic_load_explicit(&st->shm.h->replaced, memory_order_acquire))
        reopen(st);
    uint64_t g = atomic_load_explicit(&st->shm.h->generation, memory_order_acquire);
    uint64_t before = st->generation;
    int rc = load(st);
    if (claimed && st->generation == before)
        record(st); /* nothing new, but a new slot says what it holds */
    if (rc == MCR_OK)
        atomic_store_explicit(&r->state_seen, g, memory_order_release);
    pthread_mutex_unlock(&st->mu);
}

/* ------------------------------------------------------------ life */

static void state_free(mcr__router_state *st)
{
    if (st == NULL)
        return;
    if (st->pid == getpid())
        mcr__shm_release(&st->shm, st->slot, st->owner);
    mcr__shm_close(&st->shm);
    while (st->old != NULL) {
        old_map *o = st->old;
        st->old = o->next;
        mcr__shm_close(&o->shm);
        free(o);
    }
    pthread_mutex_destroy(&st->mu);
    free(st->path);
    free(st->shm_path);
    free(st);
}

void mcr__router_state_free(mcr_router *r)
{
    mcr__router_state *st = r->state;
    if (st == NULL)
        return;
    pthread_mutex_lock(&all_mu);
    for (mcr__router_state **p = &all; *p != NULL; p = &(*p)->next)
        if (*p == st) {
            *p = st->next;
            break;
        }
    pthread_mutex_unlock(&all_mu);
    atomic_store_explicit(&r->state_gen, NULL, memory_order_relaxed);
    r->state = NULL;
    state_free(st);
}

int mcr_router_new_from_state(const char *path, unsigned flags, mcr_router **out, mcr_error *err)
{
    char shm_path[4096];
    if (path == NULL || out == NULL || *path == '\0')
        return mcr__error(err, MCR_ERR_INVALID, "mcr_router_new_from_state: NULL or empty argument");
    if (flags & ~MCR_HOST_STATE_OBSERVE)
        return mcr__error(err, MCR_ERR_INVALID, "mcr_router_new_from_state: unknown flags 0x%x",
                          flags);
    int rc = mcr__shm_path(path, shm_path, sizeof(shm_path), err);
    if (rc != MCR_OK)
        return rc;
    mcr__router_state *st = calloc(1, sizeof(*st));
    if (st == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory following state %s", path);
    st->shm.fd = -1;
    st->slot = -1;
    st->flags = flags;
    st->pid = getpid();
    int e = pthread_mutex_init(&st->mu, NULL);
    if (e != 0) {
        free(st);
        return mcr__error_sys(err, e, "state %s: cannot create a mutex", path);
    }
    st->path = strdup(path);
    st->shm_path = strdup(shm_path);
    if (st->path == NULL || st->shm_path == NULL)
        rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory following state %s", path);
    if (rc == MCR_OK)
        rc = mcr__shm_open(shm_path, !(flags & MCR_HOST_STATE_OBSERVE), &st->shm, err);
    uint64_t g = rc == MCR_OK ? atomic_load(&st->shm.h->generation) : 0;
    mcr_state_info info = {0};
    if (rc == MCR_OK)
        rc = mcr_state_read(path, &info, err);
    mcr_router *r = NULL;
    if (rc == MCR_OK)
        rc = mcr_router_new(NULL, &r, err);
    if (rc == MCR_OK) {
        r->state = st;
        st->router = r;
        rc = adopt(st, &info, err);
    }
    mcr_state_info_clear(&info);
    if (rc != MCR_OK) {
        if (r != NULL) {
            r->state = NULL;
            mcr_router_free(r);
        }
        state_free(st);
        return rc;
    }
    claim_slot(st);
    record(st);
    pthread_once(&atfork_once, atfork_register);
    pthread_mutex_lock(&all_mu);
    st->next = all;
    all = st;
    pthread_mutex_unlock(&all_mu);
    atomic_store_explicit(&r->state_seen, g, memory_order_relaxed);
    atomic_store_explicit(&r->state_gen, &st->shm.h->generation, memory_order_release);
    *out = r;
    return MCR_OK;
}

int mcr_router_state_status(mcr_router *router, mcr_state_status *out)
{
    if (router == NULL || out == NULL || router->state == NULL)
        return MCR_ERR_INVALID;
    mcr__router_state_check(router);
    mcr__router_state *st = router->state;
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&st->mu);
    out->generation = st->generation;
    out->refused = st->refused;
    out->last_refusal = st->last_refusal;
    out->slot = st->pid == getpid() ? st->slot : -1;
    pthread_mutex_unlock(&st->mu);
    return MCR_OK;
}

/* ------------------------------------------------------------ counters */

/* This process's counter block for `writer` (taking it when free), or
 * NULL with the reason in *rc. st->mu held. */
static mcr__shm_counters *block_for(mcr__router_state *st, uint64_t writer, int *rc)
{
    if (st->slot < 0 || st->pid != getpid()) {
        *rc = MCR_ERR_EMPTY;
        return NULL;
    }
    mcr__shm_slot *s = &st->shm.slots[st->slot];
    uint64_t w = 0;
    if (!atomic_compare_exchange_strong(&s->counters_writer, &w, writer) && w != writer) {
        *rc = MCR_ERR_BUSY;
        return NULL;
    }
    return mcr__shm_block(&st->shm, (uint32_t)st->slot);
}

int mcr_router_state_publish(mcr_router *router, const void *writer,
                             const mcr_state_server_counters *servers, size_t n)
{
    if (router == NULL || router->state == NULL || writer == NULL || (servers == NULL && n > 0))
        return MCR_ERR_INVALID;
    for (size_t i = 0; i < n; i++)
        for (int b = 0; b < MCR_HOST_STATE_BUCKETS; b++)
            if ((uint64_t)(servers[i].bounds_s[b] * 1e6 + 0.5) != mcr__latency_bounds_us[b])
                return MCR_ERR_INVALID;
    mcr__router_state *st = router->state;
    int rc = MCR_OK;
    pthread_mutex_lock(&st->mu);
    mcr__shm_counters *block = block_for(st, (uint64_t)(uintptr_t)writer, &rc);
    for (size_t i = 0; block != NULL && i < n; i++) {
        const mcr_state_server_counters *c = &servers[i];
        uint64_t v[MCR__CTR_N];
        v[MCR__CTR_REQUESTS] = c->requests;
        v[MCR__CTR_HITS] = c->hits;
        v[MCR__CTR_MISSES] = c->misses;
        v[MCR__CTR_ERRORS] = c->errors;
        v[MCR__CTR_TIMEOUTS] = c->timeouts;
        v[MCR__CTR_REFUSALS] = c->connect_failures;
        v[MCR__CTR_EJECTIONS] = c->ejections;
        v[MCR__CTR_FALLBACK_READS] = c->fallback_reads;
        v[MCR__CTR_FALLBACK_HITS] = c->fallback_hits;
        v[MCR__CTR_LAT_COUNT] = c->latency_count;
        v[MCR__CTR_LAT_SUM_US] = (uint64_t)(c->latency_sum_s * 1e6 + 0.5);
        mcr__shm_publish(&st->shm, block, c->id, v, c->buckets);
    }
    pthread_mutex_unlock(&st->mu);
    return rc;
}

int mcr_router_state_unpublish(mcr_router *router, const void *writer)
{
    if (router == NULL || router->state == NULL || writer == NULL)
        return MCR_ERR_INVALID;
    mcr__router_state *st = router->state;
    int rc = MCR_OK;
    pthread_mutex_lock(&st->mu);
    mcr__shm_counters *b = block_for(st, (uint64_t)(uintptr_t)writer, &rc);
    if (b != NULL) {
        mcr__shm_fold(&st->shm, b);
        mcr__shm_zero_block(&st->shm, b);
        atomic_store(&st->shm.slots[st->slot].counters_writer, 0);
    }
    pthread_mutex_unlock(&st->mu);
    return rc;
}
