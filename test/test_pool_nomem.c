/* SPDX-License-Identifier: BSD-3-Clause */
/* test_pool_nomem.c: the pool under traffic with each of its allocations failing in turn: every request refused or called back once, no reply mixed up, the pool whole again after, nothing leaked. */
#include <check.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "mcroute.h"
#include "mcroute_pool.h"
#include "nomem_wrap.h"
#include "pool_env.h"
#include "testutil.h"

/*
 * Each round arms one allocation failure (nomem_wrap.h) on the test's thread,
 * which runs the loop and so every callback: the k-th allocation the pool
 * makes from its mcr_pool_new() (a new pool each round) until it is idle
 * again fails, for k = 0, 1, 2, ... until a round makes fewer than k + 1.
 * A round submits sets, gets and a multi-get of NK keys, a version and a
 * stats (whose replies the pool keeps in blocks of its own), then runs the loop
 * until the pool is idle (a deadline: a lost request fails the test). The
 * callbacks here allocate nothing, so that the failure is always the
 * pool's; libevent's own allocations (a shared library) are not failed.
 *
 * Every round, whatever failed: each submission was refused with
 * MCR_ERR_NOMEM (and a message) or called back exactly once, with its own
 * key; a hit carries a value of its key; an error has a message. Then,
 * disarmed, the pool must serve every key right again (it may have closed a
 * connection: a reconnect is its business), and after the environment is
 * freed, every block allocated through the wrappers is free again.
 */

/* getaddrinfo() and socket() can fail for want of memory too (EAI_MEMORY,
 * ENOBUFS): the suite wraps them as allocations of their own
 * (test/CMakeLists.txt adds the --wrap options for this suite). */
int __real_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                       struct addrinfo **res);
int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                       struct addrinfo **res);
int __real_socket(int domain, int type, int protocol);
int __wrap_socket(int domain, int type, int protocol);

int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                       struct addrinfo **res)
{
    return nm_fail_here() ? EAI_MEMORY : __real_getaddrinfo(node, service, hints, res);
}

int __wrap_socket(int domain, int type, int protocol)
{
    if (nm_fail_here()) {
        errno = ENOBUFS;
        return -1;
    }
    return __real_socket(domain, type, protocol);
}

#define NK 24
#define ROUNDS_MAX 4000

typedef struct nrec {
    int refused; /* the submission's error; 0: accepted */
    int calls;
    int status;
    mcr_reply reply;
    int bad; /* a result for another key, a value of another key, no message */
    char why[160];
} nrec;

typedef struct batch {
    char key[NK][32];
    size_t klen[NK];
    const void *kp[NK];
    nrec set[NK], get[NK];
    nrec mkey[NK]; /* the multi-get's key_cb, per key */
    nrec mdone;
    nrec version, stats; /* server commands to server 0: replies the pool keeps */
    unsigned gen;
} batch;

static int value_of(const char *key, size_t klen, const char *v, size_t vlen)
{
    return vlen > klen + 5 && memcmp(v, "val|", 4) == 0 && memcmp(v + 4, key, klen) == 0 &&
           v[4 + klen] == '|';
}

static void note(nrec *r, const mcr_result *res, const char *key, size_t klen)
{
    r->calls++;
    r->status = res->status;
    r->reply = res->reply;
    if (klen > 0 && (res->key_len != klen || memcmp(res->key, key, klen) != 0)) {
        r->bad = 1;
        snprintf(r->why, sizeof r->why, "a result for \"%.*s\" given to \"%.*s\"",
                 (int)(res->key_len > 40 ? 40 : res->key_len),
                 res->key ? (const char *)res->key : "", (int)klen, key);
    } else if (klen > 0 && res->status == MCR_OK && res->reply == MCR_REPLY_HIT &&
               !value_of(key, klen, res->value, res->value_len)) {
        r->bad = 1;
        snprintf(r->why, sizeof r->why, "\"%.*s\" got the value \"%.*s\"", (int)klen, key,
                 (int)(res->value_len > 60 ? 60 : res->value_len),
                 res->value ? (const char *)res->value : "");
    } else if (res->status != MCR_OK && (res->message == NULL || res->message[0] == '\0')) {
        r->bad = 1;
        snprintf(r->why, sizeof r->why, "status %d without a message", res->status);
    } else if (res->status != MCR_OK) {
        snprintf(r->why, sizeof r->why, "%s", res->message); /* what it said */
    }
}

/* The callbacks' argument: a record and the round, to find the key. */
typedef struct slot {
    batch *rd;
    nrec *r;
    int i;
} slot;

static slot set_slot[NK], get_slot[NK];

static void one_cb(const mcr_result *res, void *arg)
{
    slot *s = arg;
    note(s->r, res, s->rd->key[s->i], s->rd->klen[s->i]);
}

static void mkey_cb(const mcr_result *res, void *arg)
{
    batch *rd = arg;
    if (res->index >= NK) {
        rd->mdone.bad = 1;
        snprintf(rd->mdone.why, sizeof rd->mdone.why, "key_cb with index %zu", res->index);
        return;
    }
    note(&rd->mkey[res->index], res, rd->key[res->index], rd->klen[res->index]);
}

static void mdone_cb(const mcr_result *res, void *arg)
{
    batch *rd = arg;
    note(&rd->mdone, res, NULL, 0);
}

static void server_cb(const mcr_result *res, void *arg)
{
    nrec *r = arg;
    note(r, res, NULL, 0);
    if (res->status == MCR_OK && (res->value == NULL || res->value_len == 0)) {
        r->bad = 1;
        snprintf(r->why, sizeof r->why, "a %s reply with no text", mcr_op_name(res->op));
    }
}

static void batch_init(batch *rd, unsigned gen)
{
    memset(rd, 0, sizeof(*rd));
    rd->gen = gen;
    for (int i = 0; i < NK; i++) {
        rd->klen[i] = (size_t)snprintf(rd->key[i], sizeof rd->key[i], "nomem:%d:k", i);
        rd->kp[i] = rd->key[i];
        set_slot[i] = (slot){rd, &rd->set[i], i};
        get_slot[i] = (slot){rd, &rd->get[i], i};
    }
}

static void refused(nrec *r, int rc, const mcr_error *err, const char *what)
{
    r->refused = rc;
    if (rc != MCR_ERR_NOMEM || err->code != rc || err->message[0] == '\0') {
        r->bad = 1;
        snprintf(r->why, sizeof r->why, "%s refused with %d (%s), code %d: \"%.60s\"", what, rc,
                 mcr_strerror(rc), err->code, err->message);
    }
}

/* Submits the round: the first half of the keys set, every key got, and one
 * multi-get of them all. */
static void submit_batch(env *e, batch *rd)
{
    char val[64];
    mcr_error err;
    for (int i = 0; i < NK; i++) {
        if (i < NK / 2) {
            int n = snprintf(val, sizeof val, "val|%s|g%u", rd->key[i], rd->gen);
            memset(&err, 0, sizeof(err));
            int rc = mcr_pool_set(e->pool, rd->key[i], rd->klen[i], val, (size_t)n, 0, 0, one_cb,
                                  &set_slot[i], &err);
            if (rc != MCR_OK)
                refused(&rd->set[i], rc, &err, "a set");
        } else {
            rd->set[i].refused = -1; /* not submitted */
        }
        memset(&err, 0, sizeof(err));
        int rc = mcr_pool_get(e->pool, rd->key[i], rd->klen[i], one_cb, &get_slot[i], &err);
        if (rc != MCR_OK)
            refused(&rd->get[i], rc, &err, "a get");
    }
    for (int k = 0; k < 2; k++) {
        mcr_request q;
        memset(&q, 0, sizeof(q));
        q.op = k == 0 ? MCR_OP_VERSION : MCR_OP_STATS;
        q.server = e->id[0];
        nrec *r = k == 0 ? &rd->version : &rd->stats;
        memset(&err, 0, sizeof(err));
        int rc = mcr_pool_submit(e->pool, &q, server_cb, r, &err);
        if (rc != MCR_OK)
            refused(r, rc, &err, k == 0 ? "a version" : "a stats");
    }
    memset(&err, 0, sizeof(err));
    int rc = mcr_pool_get_multi(e->pool, MCR_OP_GET, rd->kp, rd->klen, NK, mkey_cb, mdone_cb, rd,
                                &err);
    if (rc != MCR_OK) {
        refused(&rd->mdone, rc, &err, "a multi-get");
        for (int i = 0; i < NK; i++)
            rd->mkey[i].refused = rc;
    }
}

/* Every record of the round is consistent; `failed` counts the errors. */
static void check_one(const nrec *r, const char *what, int i, long k, long *failed)
{
    ck_assert_msg(!r->bad, "round %ld, %s %d: %s", k, what, i, r->why);
    if (r->refused != 0) {
        ck_assert_msg(r->calls == 0, "round %ld, %s %d: refused (%d) and called back", k, what,
                      i, r->refused);
        *failed += r->refused != -1;
        return;
    }
    ck_assert_msg(r->calls == 1, "round %ld, %s %d: %d callbacks", k, what, i, r->calls);
    /* memory is all that fails here: an error that blames the server or
     * the wire would send an operator looking in the wrong place */
    ck_assert_msg(r->status == MCR_OK || r->status == MCR_ERR_NOMEM,
                  "round %ld, %s %d: failed with %d (%s), not MCR_ERR_NOMEM: %s", k, what, i,
                  r->status, mcr_strerror(r->status), r->why);
    *failed += r->status != MCR_OK;
}

static long check_batch(const batch *rd, long k)
{
    long failed = 0;
    for (int i = 0; i < NK; i++) {
        check_one(&rd->set[i], "set", i, k, &failed);
        check_one(&rd->get[i], "get", i, k, &failed);
        check_one(&rd->mkey[i], "multi-get key", i, k, &failed);
    }
    check_one(&rd->mdone, "multi-get done", 0, k, &failed);
    check_one(&rd->version, "version", 0, k, &failed);
    check_one(&rd->stats, "stats", 0, k, &failed);
    return failed;
}

/* Disarmed: every key set and got right. */
static void pool_whole(env *e, batch *rd, long k)
{
    char val[64];
    for (int pass = 0; pass < 2; pass++) {
        batch_init(rd, rd->gen + 1);
        for (int i = 0; i < NK; i++) {
            mcr_error err;
            int n = snprintf(val, sizeof val, "val|%s|g%u", rd->key[i], rd->gen);
            int rc = pass == 0 ? mcr_pool_set(e->pool, rd->key[i], rd->klen[i], val, (size_t)n,
                                              0, 0, one_cb, &set_slot[i], &err)
                               : mcr_pool_get(e->pool, rd->key[i], rd->klen[i], one_cb,
                                              &get_slot[i], &err);
            ck_assert_msg(rc == MCR_OK, "after round %ld: refused: %s", k, err.message);
        }
        WAIT_IDLE(e, 10000);
        for (int i = 0; i < NK; i++) {
            const nrec *r = pass == 0 ? &rd->set[i] : &rd->get[i];
            ck_assert_msg(!r->bad && r->calls == 1, "after round %ld, key %d: %d calls %s", k, i,
                          r->calls, r->why);
            ck_assert_msg(r->status == MCR_OK &&
                              r->reply == (pass == 0 ? MCR_REPLY_STORED : MCR_REPLY_HIT),
                          "after round %ld, %s of key %d: status %d, reply %s", k,
                          pass == 0 ? "set" : "get", i, r->status, mcr_reply_name(r->reply));
        }
    }
}

START_TEST(test_traffic)
{
    static batch rd;
    env e;
    mcr_pool_options o;
    long live0 = nm_live();

    opts_init(&o);
    o.protocol = _i ? MCR_PROTO_META : MCR_PROTO_TEXT;
    /* one failure downs a server: running out of memory is the client's
     * failure, never the server's, so none may be counted against it */
    o.server_failure_limit = 1;
    env_init(&e, 2, &o);
    batch_init(&rd, 1);
    pool_whole(&e, &rd, -1);

    long k = 0, failures = 0, seen = 0, refused_new = 0;
    for (; k < ROUNDS_MAX; k++) {
        /* a new pool each round: connecting, buffers, tables, lines, every
         * first allocation (a pool that has served reuses its blocks) */
        mcr_pool_free(e.pool);
        e.pool = NULL;
        batch_init(&rd, rd.gen + 1);
        mcr_error err = {0};
        nm_arm(k);
        int rc = mcr_pool_new(e.base, e.router, &o, &e.pool, &err);
        if (rc != MCR_OK) {
            nm_disarm();
            ck_assert_msg(rc == MCR_ERR_NOMEM && err.code == rc && err.message[0] != '\0',
                          "round %ld: mcr_pool_new: %d (%s), code %d: %s", k, rc,
                          mcr_strerror(rc), err.code, err.message);
            ck_assert_ptr_null(e.pool);
            refused_new++;
            continue;
        }
        submit_batch(&e, &rd);
        int idle = run_until(&e, c_idle, NULL, 10000);
        seen = nm_seen();
        int hit = nm_disarm();
        ck_assert_msg(idle, "round %ld: %zu requests still pending", k,
                      mcr_pool_pending(e.pool));
        long failed = check_batch(&rd, k);
        if (!hit)
            break; /* a round of fewer than k + 1 allocations: all were failed once */
        failures += failed > 0;
        pool_whole(&e, &rd, k);
    }
    ck_assert_msg(k < ROUNDS_MAX, "still allocating after %d rounds", ROUNDS_MAX);
    ck_assert_msg(k > 10, "only %ld allocations in a round: the wrappers are not linked in", k);
    ck_assert_msg(refused_new > 0, "mcr_pool_new never refused");
    ck_assert_msg(failures > 0, "no failure reached a request in %ld rounds", k);
    fprintf(stderr, "%s: %ld rounds (a round makes %ld allocations): mcr_pool_new refused %ld, "
            "%ld with failed requests\n", _i ? "meta" : "text", k, seen, refused_new, failures);
    env_free(&e);
    ck_assert_msg(nm_live() == live0, "%ld blocks still allocated after the pool and the "
                  "router were freed", nm_live() - live0);
}
END_TEST

static Suite *pool_nomem_suite(void)
{
    Suite *s = suite_create("pool_nomem");
    PE_ADD_LOOP(s, traffic, 0, 2);
    return s;
}

int main(void)
{
    return tu_run(pool_nomem_suite());
}
