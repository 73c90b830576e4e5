/* SPDX-License-Identifier: BSD-3-Clause */
/* fleet_env.h: what the fleet suites (test_fleet_*) share: a suite-wide etcd, options, pools built from server lists, and a recorder of a follower's events with waits on it. */
#ifndef MCR_FLEET_ENV_H
#define MCR_FLEET_ENV_H

#include <check.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "etcdserver.h"
#include "mcroute_fleet.h"

/* ------------------------------------------------------------ the suite's etcd
 * fe_main() starts one etcd cluster of `members` (0: none) in the suite's
 * own process, before Check forks the tests, runs the suite with tu_run()
 * and stops the cluster. Tests that only read and write pools share it,
 * each under pools of its own names; a test that stops, kills or compacts
 * etcd starts a cluster of its own. When the cluster did not start, every
 * test that asks for it fails with the harness's reason. */
int fe_main(Suite *s, int members, const char *tag);
/* The shared cluster; aborts the test when there is none. */
es_cluster *fe_cluster(void);

/* ------------------------------------------------------------ pools
 * Every helper named fe_* that is not documented as returning a status
 * aborts the test (ck_abort_msg) naming the call and the library's message
 * when the library refuses. */

/* mcr_fleet_options_init, then endpoints and pool (both copied into one of
 * FE_OPTION_SLOTS static buffers used in turn: the options stay valid for
 * the next FE_OPTION_SLOTS - 1 calls), wait_ms mcr_test_ms(10000). */
#define FE_OPTION_SLOTS 64
void fe_options(mcr_fleet_options *o, const char *endpoints, const char *pool);

/* A ketama config of `spec` ("host:port:weight,..."). */
mcr_config *fe_config(const char *spec);

/* mcr_fleet_publish of fe_config(spec): the epoch it returned. */
uint64_t fe_publish(const mcr_fleet_options *o, const char *spec);

/* mcr_fleet_read: the snapshot (unref it), *revision when not NULL. */
mcr_snapshot *fe_read(const mcr_fleet_options *o, uint64_t *revision);
/* The pool's current epoch (fe_read). */
uint64_t fe_epoch(const mcr_fleet_options *o);

/* One change "add server `id` at host:port weight 1" by mcr_fleet_change:
 * its status, *epoch as mcr_fleet_change sets it, err filled. */
int fe_add(const mcr_fleet_options *o, const char *id, const char *host, int port,
           uint64_t *epoch, mcr_error *err);

/* The canonical text of snap (malloc'd). */
char *fe_text(const mcr_snapshot *snap);

/* The snapshot key of o's pool: PREFIX POOL "/snapshot" (a static buffer). */
const char *fe_snapshot_key(const mcr_fleet_options *o);

/* snap with `changes` applied (epoch + 1): a new reference. */
mcr_snapshot *fe_apply(const mcr_snapshot *snap, const mcr_changes *changes);
/* snap with one server added (id, host 10.9.I.J from n, port 11211). */
mcr_snapshot *fe_apply_add(const mcr_snapshot *snap, const char *id, int n);

/* Whether the server `id` is in snap (and its state and weight). */
int fe_has(const mcr_snapshot *snap, const char *id, mcr_server_state *state, uint32_t *weight);
/* Abort unless snap has server `id` in `state` with `weight`. */
void fe_assert_has(const mcr_snapshot *snap, const char *id, mcr_server_state state,
                   uint32_t weight);

/* ------------------------------------------------------------ a follower's events */

#define FE_KINDS 11
#define FE_EPOCHS_MAX 4096

typedef struct fe_rec {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t count[FE_KINDS];          /* events of each kind */
    int last_status[FE_KINDS];
    char last_msg[FE_KINDS][MCR_ERROR_MESSAGE_SIZE];
    uint64_t epochs[FE_EPOCHS_MAX];  /* the ADOPTED epochs, in order */
    size_t nepochs;
    uint64_t last_adopted;
    size_t not_above;                /* ADOPTED events whose epoch was not above the previous */
    size_t skips;                    /* ADOPTED events more than 1 above the previous */
    uint64_t start_epoch;            /* the epoch before the first event (fe_rec_start) */
    int thread_ok;                   /* 1 while every event came on one thread */
    pthread_t thread;
    int have_thread;
} fe_rec;

void fe_rec_init(fe_rec *r);
void fe_rec_destroy(fe_rec *r);
/* The epoch the follower started at (mcr_fleet_follow published it without
 * an event): the base for not_above and skips. */
void fe_rec_start(fe_rec *r, uint64_t epoch);
/* The mcr_fleet_fn: give it with the recorder as arg. */
void fe_on_event(const mcr_fleet_event *ev, void *arg);

/* Wait until an ADOPTED event of epoch >= `epoch` came, at most ms
 * (mcr_test_ms applied by the caller): 1, else 0. */
int fe_wait_adopted(fe_rec *r, uint64_t epoch, int ms);
/* Wait until at least n events of `kind` came: 1, else 0. */
int fe_wait_count(fe_rec *r, mcr_fleet_event_kind kind, size_t n, int ms);
/* count[kind] now. */
size_t fe_count(fe_rec *r, mcr_fleet_event_kind kind);
/* A copy of the last message of `kind` into buf. */
void fe_last_msg(fe_rec *r, mcr_fleet_event_kind kind, char *buf, size_t cap);

/* Poll mcr_router_epoch(router) until it is `epoch`, at most ms: 1, else 0. */
int fe_wait_router_epoch(mcr_router *router, uint64_t epoch, int ms);

/* The registered client `id` of o's pool: 1 and *c filled (host copied
 * into hostbuf), 0 when not registered. Aborts when mcr_fleet_clients fails. */
int fe_client(const mcr_fleet_options *o, const char *id, mcr_fleet_client *c, char *hostbuf,
              size_t cap);

/* A short sleep for poll loops (bounded by their deadline): 20 ms. */
void fe_nap(void);

/* ------------------------------------------------------------ a proxy that loses replies
 * A TCP proxy on 127.0.0.1 (a port of its own) to 127.0.0.1:upstream, on a
 * thread of its own: bytes pass both ways, except that after a client
 * sent a request whose bytes contain `drop` ("POST /v3/kv/txn"), the first
 * bytes of the reply close both connections instead of being passed on:
 * etcd did the request, and the client never hears of it (a reply lost
 * with a leader that died after committing). */
typedef struct fe_proxy fe_proxy;
fe_proxy *fe_proxy_start(int upstream_port, const char *drop);
int fe_proxy_port(const fe_proxy *p);
/* Replies dropped so far. */
int fe_proxy_dropped(fe_proxy *p);
/* Call fn(arg) on the proxy's thread each time a reply is dropped, before
 * the client's connection is closed (so before the client hears of it):
 * another writer's change then lands on top of the lost write. */
void fe_proxy_on_drop(fe_proxy *p, void (*fn)(void *), void *arg);
void fe_proxy_stop(fe_proxy *p);

#endif
