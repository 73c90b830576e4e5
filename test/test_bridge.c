/* SPDX-License-Identifier: BSD-3-Clause */
/* test_bridge.c: libmemcached handles attached to a router (mcroute_memcached_attach.h) against real memcached servers: every call goes to mcroute's owner of its key, read back from the servers directly; the list follows the router; what the bridge owns is kept; clone, detach, namespace, binary protocol, a state file, 150 servers. */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcroute_memcached_attach.h"
#include "mcroute_state.h"
#include "realserver.h"
#include "testutil.h"

#define NSERVERS 4
#define NKEYS 400
#define WAIT_MS 10000

static rs_proc g_mc[NSERVERS];
static int g_fd[NSERVERS];

static void servers_start(void)
{
    for (int i = 0; i < NSERVERS; i++) {
        ck_assert_msg(rs_memcached_start(&g_mc[i], "127.0.0.1", 0, NULL, WAIT_MS) == 0,
                      "memcached %d did not start (%s)", i, rs_memcached_path());
        g_fd[i] = rs_connect("127.0.0.1", g_mc[i].port, WAIT_MS);
        ck_assert_int_ge(g_fd[i], 0);
    }
}

static void teardown(void)
{
    rs_stop_all();
}

/* A snapshot of the first n servers (ketama unless `mode` says), epoch e. */
static mcr_snapshot *snap_of(int n, mcr_mode mode, uint64_t e)
{
    mcr_config *cfg = mcr_config_new();
    mcr_error err = {0};
    ck_assert_int_eq(mcr_config_set_mode(cfg, mode), MCR_OK);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(mcr_config_add_server(cfg, "127.0.0.1", g_mc[i].port, 1, &err), MCR_OK);
    mcr_snapshot *s = NULL;
    ck_assert_msg(mcr_snapshot_new(cfg, e, &s, &err) == MCR_OK, "%s", err.message);
    mcr_config_free(cfg);
    return s;
}

/* Which of our servers listens on `port`. */
static int server_of_port(int port)
{
    for (int i = 0; i < NSERVERS; i++)
        if (g_mc[i].port == port)
            return i;
    ck_abort_msg("no server on port %d", port);
    return -1;
}

/* The server (our index) mcroute's snapshot places `key` on. */
static int owner(const mcr_snapshot *s, const char *key)
{
    mcr_server_desc d;
    uint32_t i = mcr_snapshot_locate(s, key, strlen(key));
    ck_assert_int_eq(mcr_snapshot_server(s, i, &d), MCR_OK);
    return server_of_port(d.port);
}

static void key_of(char *buf, size_t cap, const char *tag, int k)
{
    snprintf(buf, cap, "%s:%d:%x", tag, k, (unsigned)(k * 2654435761u));
}

/* Every key of `tag`, stored as `prefix` and the key, is held by its
 * owner in s and by no other server (read from the servers directly), with
 * the key as its value: the owner of the key, or with `hash_prefixed` of
 * the stored key (HASH_WITH_NAMESPACE). */
static void placed(const mcr_snapshot *s, const char *tag, int nkeys, const char *prefix,
                   bool hash_prefixed)
{
    for (int k = 0; k < nkeys; k++) {
        char key[96], full[128], val[64];
        key_of(key, sizeof(key), tag, k);
        snprintf(full, sizeof(full), "%s%s", prefix, key);
        int o = owner(s, hash_prefixed ? full : key);
        for (int i = 0; i < NSERVERS; i++) {
            int hit = rs_mc_get(g_fd[i], full, val, sizeof(val), WAIT_MS);
            ck_assert_int_ge(hit, 0);
            if (i == o)
                ck_assert_msg(hit == 1 && strcmp(val, key) == 0,
                              "%s is not at its owner %d (hit %d, value %s)", full, o, hit, val);
            else
                ck_assert_msg(hit == 0, "%s is at server %d, its owner is %d", full, i, o);
        }
    }
}

static void set_all(memcached_st *m, const char *tag, int nkeys)
{
    for (int k = 0; k < nkeys; k++) {
        char key[96];
        key_of(key, sizeof(key), tag, k);
        memcached_return_t rc = memcached_set(m, key, strlen(key), key, strlen(key), 0, 0);
        ck_assert_msg(rc == MEMCACHED_SUCCESS, "set %s: %s", key, memcached_strerror(m, rc));
    }
}

/* memcached_server_by_key() names mcroute's owner for each key. */
static void by_key_agrees(memcached_st *m, const mcr_snapshot *s, int nkeys)
{
    for (int k = 0; k < nkeys; k++) {
        char key[96];
        key_of(key, sizeof(key), "bk", k);
        memcached_return_t rc = MEMCACHED_SUCCESS; /* libmemcached sets it on errors only */
        const memcached_instance_st *in = memcached_server_by_key(m, key, strlen(key), &rc);
        ck_assert_msg(in != NULL && rc == MEMCACHED_SUCCESS, "server_by_key %s: %s", key,
                      memcached_strerror(m, rc));
        mcr_server_desc d;
        ck_assert_int_eq(mcr_snapshot_server(s, mcr_snapshot_locate(s, key, strlen(key)), &d),
                         MCR_OK);
        if (memcached_server_port(in) != (in_port_t)d.port || strcmp(memcached_server_name(in),
                                                                     d.host) != 0)
            ck_abort_msg("%s: libmemcached says %s:%u, mcroute %s:%d", key,
                         memcached_server_name(in), (unsigned)memcached_server_port(in), d.host,
                         d.port);
    }
}

/* ------------------------------------------------------------ tests */

/* Every kind of call reaches mcroute's owner; the server list is
 * mcroute's, whatever the program had; what the bridge owns is refused. */
START_TEST(calls_reach_owners)
{
    servers_start();
    mcr_snapshot *s = snap_of(3, MCR_MODE_KETAMA, 1);
    mcr_router *r = NULL;
    mcr_error err = {0};
    ck_assert_int_eq(mcr_router_new(s, &r, &err), MCR_OK);
    memcached_st *m = memcached_create(NULL);
    ck_assert_int_eq(memcached_server_add(m, "127.0.0.1", (in_port_t)g_mc[3].port),
                     MEMCACHED_SUCCESS); /* the program's own list: replaced */
    ck_assert_msg(mcr_memcached_attach(m, r, 0, &err) == MCR_OK, "%s", err.message);
    ck_assert_ptr_eq(mcr_memcached_router(m), r);
    ck_assert_int_eq(mcr_memcached_attach(m, r, 0, &err), MCR_ERR_INVALID); /* twice */
    ck_assert_uint_eq(memcached_server_count(m), 3);

    set_all(m, "set", NKEYS);
    placed(s, "set", NKEYS, "", false);
    by_key_agrees(m, s, 2000);

    /* get, mget and fetch */
    char key[96];
    key_of(key, sizeof(key), "set", 7);
    size_t vlen = 0;
    uint32_t fl = 0;
    memcached_return_t rc;
    char *v = memcached_get(m, key, strlen(key), &vlen, &fl, &rc);
    ck_assert_msg(v != NULL && vlen == strlen(key) && memcmp(v, key, vlen) == 0, "get %s", key);
    free(v);
    const char *keys[100];
    size_t lens[100];
    char kb[100][96];
    for (int k = 0; k < 100; k++) {
        key_of(kb[k], sizeof(kb[k]), "set", k);
        keys[k] = kb[k];
        lens[k] = strlen(kb[k]);
    }
    ck_assert_int_eq(memcached_mget(m, keys, lens, 100), MEMCACHED_SUCCESS);
    int found = 0;
    memcached_result_st *res;
    while ((res = memcached_fetch_result(m, NULL, &rc)) != NULL) {
        ck_assert_int_eq(memcached_result_length(res), memcached_result_key_length(res));
        ck_assert(memcmp(memcached_result_value(res), memcached_result_key_value(res),
                         memcached_result_length(res)) == 0);
        found++;
        memcached_result_free(res);
    }
    ck_assert_int_eq(found, 100);

    /* _by_key: the group key's owner */
    ck_assert_int_eq(memcached_set_by_key(m, "group-7", 7, "member", 6, "g", 1, 0, 0),
                     MEMCACHED_SUCCESS);
    char val[64];
    int go = owner(s, "group-7");
    for (int i = 0; i < NSERVERS; i++)
        ck_assert_int_eq(rs_mc_get(g_fd[i], "member", val, sizeof(val), WAIT_MS), i == go);

    /* counters, delete, touch, add, append, cas */
    key_of(key, sizeof(key), "ctr", 1);
    uint64_t n = 0;
    ck_assert_int_eq(memcached_set(m, key, strlen(key), "41", 2, 0, 0), MEMCACHED_SUCCESS);
    ck_assert_int_eq(memcached_increment(m, key, strlen(key), 1, &n), MEMCACHED_SUCCESS);
    ck_assert_uint_eq(n, 42);
    ck_assert_int_eq(rs_mc_get(g_fd[owner(s, key)], key, val, sizeof(val), WAIT_MS), 1);
    ck_assert_str_eq(val, "42");
    ck_assert_int_eq(memcached_decrement(m, key, strlen(key), 2, &n), MEMCACHED_SUCCESS);
    ck_assert_uint_eq(n, 40);
    ck_assert_int_eq(memcached_touch(m, key, strlen(key), 100), MEMCACHED_SUCCESS);
    ck_assert_int_eq(memcached_append(m, key, strlen(key), "x", 1, 0, 0), MEMCACHED_SUCCESS);
    ck_assert_int_eq(rs_mc_get(g_fd[owner(s, key)], key, val, sizeof(val), WAIT_MS), 1);
    ck_assert_str_eq(val, "40x");
    ck_assert_int_eq(memcached_exist(m, key, strlen(key)), MEMCACHED_SUCCESS);
    ck_assert_int_eq(memcached_delete(m, key, strlen(key), 0), MEMCACHED_SUCCESS);
    ck_assert_int_eq(rs_mc_get(g_fd[owner(s, key)], key, val, sizeof(val), WAIT_MS), 0);
    ck_assert_int_eq(memcached_add(m, key, strlen(key), "a", 1, 0, 0), MEMCACHED_SUCCESS);
    ck_assert_int_eq(memcached_add(m, key, strlen(key), "b", 1, 0, 0), MEMCACHED_NOTSTORED);

    /* what the bridge owns */
    ck_assert_int_eq(memcached_behavior_set(m, MEMCACHED_BEHAVIOR_DISTRIBUTION,
                                            MEMCACHED_DISTRIBUTION_CONSISTENT),
                     MEMCACHED_NOT_SUPPORTED);
    ck_assert_int_eq(memcached_behavior_set(m, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1),
                     MEMCACHED_NOT_SUPPORTED);
    ck_assert_int_eq(memcached_server_add(m, "127.0.0.1", 1), MEMCACHED_NOT_SUPPORTED);
    ck_assert_int_eq(memcached_behavior_set(m, MEMCACHED_BEHAVIOR_NO_BLOCK, 0), MEMCACHED_SUCCESS);
    ck_assert_uint_eq(memcached_server_count(m), 3);
    by_key_agrees(m, s, 500);

    memcached_free(m); /* detaches */
    mcr_router_free(r);
    mcr_snapshot_unref(s);
}
END_TEST

/* The list follows the router at the next call; a clone is attached too;
 * detach gives the handle its settings back; MCR_MEMCACHED_ACCEPT. */
START_TEST(follows_router)
{
    servers_start();
    mcr_snapshot *s3 = snap_of(3, MCR_MODE_KETAMA, 1), *s4 = snap_of(4, MCR_MODE_KETAMA, 2);
    mcr_router *r = NULL;
    mcr_error err = {0};
    ck_assert_int_eq(mcr_router_new(s3, &r, &err), MCR_OK);
    memcached_st *m = memcached_create(NULL);
    ck_assert_int_eq(memcached_behavior_set(m, MEMCACHED_BEHAVIOR_DISTRIBUTION,
                                            MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA),
                     MEMCACHED_SUCCESS);
    ck_assert_int_eq(mcr_memcached_attach(m, r, MCR_MEMCACHED_ACCEPT, &err), MCR_OK);
    set_all(m, "a", NKEYS);
    placed(s3, "a", NKEYS, "", false);

    ck_assert_int_eq(mcr_router_publish(r, s4, &err), MCR_OK);
    set_all(m, "b", NKEYS); /* the first call takes the new list */
    ck_assert_uint_eq(memcached_server_count(m), 4);
    placed(s4, "b", NKEYS, "", false);
    by_key_agrees(m, s4, 2000);

    memcached_st *c = memcached_clone(NULL, m);
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_eq(mcr_memcached_router(c), r);
    by_key_agrees(c, s4, 2000);
    set_all(c, "c", 100);
    placed(s4, "c", 100, "", false);

    /* accepted, not applied */
    ck_assert_int_eq(memcached_server_add(m, "127.0.0.1", 1), MEMCACHED_SUCCESS);
    ck_assert_int_eq(memcached_behavior_set(m, MEMCACHED_BEHAVIOR_DISTRIBUTION,
                                            MEMCACHED_DISTRIBUTION_MODULA),
                     MEMCACHED_SUCCESS);
    ck_assert_uint_eq(memcached_server_count(m), 4);
    by_key_agrees(m, s4, 500);

    ck_assert_int_eq(mcr_memcached_detach(m), MCR_OK);
    ck_assert_ptr_null(mcr_memcached_router(m));
    ck_assert_int_eq(mcr_memcached_detach(m), MCR_ERR_INVALID);
    ck_assert_uint_eq(memcached_behavior_get(m, MEMCACHED_BEHAVIOR_DISTRIBUTION),
                      MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA);
    ck_assert_uint_eq(memcached_server_count(m), 4); /* keeps the list */
    ck_assert_int_eq(memcached_server_add(m, "127.0.0.1", 1), MEMCACHED_SUCCESS); /* its own */
    memcached_free(m);
    memcached_free(c);
    mcr_router_free(r);
    mcr_snapshot_unref(s3);
    mcr_snapshot_unref(s4);
}
END_TEST

/* The namespace prefixes the stored key; the key placed is the one
 * libmemcached hashes: with HASH_WITH_NAMESPACE the prefixed one. And the
 * binary protocol. */
START_TEST(namespace_and_binary)
{
    servers_start();
    mcr_snapshot *s = snap_of(4, MCR_MODE_CONSISTENT, 1);
    mcr_router *r = NULL;
    mcr_error err = {0};
    ck_assert_int_eq(mcr_router_new(s, &r, &err), MCR_OK);
    for (int binary = 0; binary < 2; binary++) {
        memcached_st *m = memcached_create(NULL);
        ck_assert_int_eq(mcr_memcached_attach(m, r, 0, &err), MCR_OK);
        ck_assert_int_eq(memcached_behavior_set(m, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL,
                                                (uint64_t)binary),
                         MEMCACHED_SUCCESS);
        ck_assert_int_eq(memcached_callback_set(m, MEMCACHED_CALLBACK_NAMESPACE,
                                                binary ? "nb:" : "na:"),
                         MEMCACHED_SUCCESS);
        set_all(m, "ns", 200); /* the key's owner */
        placed(s, "ns", 200, binary ? "nb:" : "na:", false);
        ck_assert_int_eq(memcached_behavior_set(m, MEMCACHED_BEHAVIOR_HASH_WITH_PREFIX_KEY, 1),
                         MEMCACHED_SUCCESS);
        set_all(m, "nsh", 200); /* the prefixed key's owner */
        placed(s, "nsh", 200, binary ? "nb:" : "na:", true);
        memcached_free(m);
    }
    mcr_router_free(r);
    mcr_snapshot_unref(s);
}
END_TEST

/* A router fed from a host's state: a new state is taken at the next call. */
START_TEST(follows_state)
{
    servers_start();
    char *dir = tu_tmpdir("bridge");
    char path[600];
    snprintf(path, sizeof(path), "%s/web.state", dir);
    mcr_state_writer_options o = {.slots = 8, .mode = 0600};
    mcr_state_writer *w = NULL;
    mcr_error err = {0};
    ck_assert_msg(mcr_state_writer_open(path, &o, &w, &err) == MCR_OK, "%s", err.message);
    mcr_snapshot *s2 = snap_of(2, MCR_MODE_KETAMA, 1), *s4 = snap_of(4, MCR_MODE_KETAMA, 2);
    mcr_state_content c = {.pool = "web", .snapshot = s2, .phase = MCR_MIGRATION_NONE};
    ck_assert_int_eq(mcr_state_write(w, &c, NULL, &err), MCR_OK);
    mcr_router *r = NULL;
    ck_assert_msg(mcr_router_new_from_state(path, 0, &r, &err) == MCR_OK, "%s", err.message);
    memcached_st *m = memcached_create(NULL);
    ck_assert_int_eq(mcr_memcached_attach(m, r, 0, &err), MCR_OK);
    set_all(m, "s2", 200);
    placed(s2, "s2", 200, "", false);
    c.snapshot = s4;
    ck_assert_int_eq(mcr_state_write(w, &c, NULL, &err), MCR_OK);
    set_all(m, "s4", 200);
    placed(s4, "s4", 200, "", false);
    memcached_free(m);
    mcr_router_free(r);
    mcr_state_writer_free(w);
    mcr_snapshot_unref(s2);
    mcr_snapshot_unref(s4);
    unlink(path);
    char shm[620];
    snprintf(shm, sizeof(shm), "%s.shm", path);
    unlink(shm);
    ck_assert_int_eq(tu_tmpdir_free(dir), 0);
}
END_TEST

/* 150 servers (no 100-server limit), every mode: libmemcached names
 * mcroute's owner of every key. No server runs: nothing connects. */
START_TEST(many_servers_every_mode)
{
    for (int mode = 0; mode < MCR_MODE_COUNT; mode++) {
        mcr_config *cfg = mcr_config_new();
        mcr_error err = {0};
        ck_assert_int_eq(mcr_config_set_mode(cfg, (mcr_mode)mode), MCR_OK);
        for (int i = 0; i < 150; i++) {
            char host[32];
            snprintf(host, sizeof(host), "127.0.%d.%d", 1 + i / 200, 1 + i % 200);
            ck_assert_int_eq(mcr_config_add_server(cfg, host, 11211 + i % 3, 1, &err), MCR_OK);
        }
        mcr_snapshot *s = NULL;
        ck_assert_msg(mcr_snapshot_new(cfg, 1, &s, &err) == MCR_OK, "%s: %s",
                      mcr_mode_name((mcr_mode)mode), err.message);
        mcr_config_free(cfg);
        mcr_router *r = NULL;
        ck_assert_int_eq(mcr_router_new(s, &r, &err), MCR_OK);
        memcached_st *m = memcached_create(NULL);
        ck_assert_int_eq(mcr_memcached_attach(m, r, 0, &err), MCR_OK);
        ck_assert_uint_eq(memcached_server_count(m), 150);
        by_key_agrees(m, s, 3000);
        memcached_free(m);
        mcr_router_free(r);
        mcr_snapshot_unref(s);
    }
}
END_TEST

/* Bad arguments; a router without a snapshot: calls fail, then work. */
START_TEST(errors)
{
    servers_start();
    mcr_error err = {0};
    mcr_router *r = NULL;
    ck_assert_int_eq(mcr_router_new(NULL, &r, &err), MCR_OK);
    memcached_st *m = memcached_create(NULL);
    ck_assert_int_eq(mcr_memcached_attach(NULL, r, 0, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_memcached_attach(m, NULL, 0, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_memcached_attach(m, r, 0x80, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_memcached_detach(m), MCR_ERR_INVALID);
    ck_assert_ptr_null(mcr_memcached_router(m));
    ck_assert_int_eq(mcr_memcached_attach(m, r, 0, &err), MCR_OK);
    ck_assert_int_eq(memcached_set(m, "k", 1, "v", 1, 0, 0), MEMCACHED_NO_SERVERS);
    memcached_return_t rc = MEMCACHED_SUCCESS;
    ck_assert_ptr_null(memcached_get(m, "k", 1, NULL, NULL, &rc));
    ck_assert_int_eq(rc, MEMCACHED_NO_SERVERS);
    mcr_snapshot *s = snap_of(2, MCR_MODE_KETAMA, 1);
    ck_assert_int_eq(mcr_router_publish(r, s, &err), MCR_OK);
    ck_assert_int_eq(memcached_set(m, "k", 1, "k", 1, 0, 0), MEMCACHED_SUCCESS);
    char val[8];
    ck_assert_int_eq(rs_mc_get(g_fd[owner(s, "k")], "k", val, sizeof(val), WAIT_MS), 1);
    memcached_free(m);
    mcr_router_free(r);
    mcr_snapshot_unref(s);
}
END_TEST

/* Who holds `key` (a bit per server), read from the servers directly. */
static unsigned holders(const char *key, char *val, size_t cap)
{
    unsigned h = 0;
    for (int i = 0; i < NSERVERS; i++) {
        int hit = rs_mc_get(g_fd[i], key, val, cap, WAIT_MS);
        ck_assert_int_ge(hit, 0);
        h |= (unsigned)hit << i;
    }
    return h;
}

/* Through a router's migration (3 servers to 4): while copying, writes of
 * moved keys reach both owners and reads stay at the current one; once
 * switched, a get and a multi-get read the misses of moved keys at their
 * previous owner, and a write that misses at the new owner goes to the
 * old; closing, a miss is the answer and the old copy is deleted; ended,
 * the list is the new servers'. */
START_TEST(through_a_migration)
{
    servers_start();
    mcr_snapshot *from = snap_of(3, MCR_MODE_KETAMA, 1), *to = snap_of(4, MCR_MODE_KETAMA, 2);
    mcr_router *r = NULL;
    mcr_error err = {0};
    ck_assert_int_eq(mcr_router_new(from, &r, &err), MCR_OK);
    ck_assert_int_eq(mcr_router_set_migration(r, from, to, 0, 0, &err), MCR_OK);
    memcached_st *m = memcached_create(NULL);
    ck_assert_int_eq(mcr_memcached_attach(m, r, 0, &err), MCR_OK);
    ck_assert_uint_eq(memcached_server_count(m), 4); /* both snapshots' servers */

    /* copying: writes of moved keys reach both owners */
    char key[64], val[64];
    int moved = 0;
    for (int k = 0; k < 300; k++) {
        key_of(key, sizeof(key), "cp", k);
        ck_assert_int_eq(memcached_set(m, key, strlen(key), key, strlen(key), 0, 0),
                         MEMCACHED_SUCCESS);
        unsigned want = 1u << owner(from, key) | 1u << owner(to, key);
        moved += owner(from, key) != owner(to, key);
        ck_assert_msg(holders(key, val, sizeof(val)) == want, "%s: held by 0x%x, not 0x%x", key,
                      holders(key, val, sizeof(val)), want);
    }
    ck_assert_int_gt(moved, 30);
    /* a moved key: incr on both, delete on both */
    const char *mk = NULL;
    for (int k = 0; k < 300 && mk == NULL; k++) {
        key_of(key, sizeof(key), "cp", k);
        if (owner(from, key) != owner(to, key))
            mk = key;
    }
    ck_assert_ptr_nonnull(mk);
    char ctr[80];
    snprintf(ctr, sizeof(ctr), "%s:n", mk);
    uint64_t n = 0;
    ck_assert_int_eq(memcached_set(m, ctr, strlen(ctr), "10", 2, 0, 0), MEMCACHED_SUCCESS);
    ck_assert_int_eq(memcached_increment(m, ctr, strlen(ctr), 5, &n), MEMCACHED_SUCCESS);
    ck_assert_uint_eq(n, 15);
    for (int i = 0; i < NSERVERS; i++)
        if (i == owner(from, ctr) || i == owner(to, ctr)) {
            ck_assert_int_eq(rs_mc_get(g_fd[i], ctr, val, sizeof(val), WAIT_MS), 1);
            ck_assert_str_eq(val, "15");
        }
    ck_assert_int_eq(memcached_delete(m, mk, strlen(mk), 0), MEMCACHED_SUCCESS);
    ck_assert_uint_eq(holders(mk, val, sizeof(val)), 0);

    /* switched: misses of moved keys read at the previous owner */
    ck_assert_int_eq(mcr_router_publish(r, to, &err), MCR_OK);
    const char *keys[60];
    size_t lens[60];
    char kb[60][64];
    int nk = 0;
    for (int k = 0; nk < 60; k++) {
        key_of(kb[nk], sizeof(kb[nk]), "old", k);
        if (owner(from, kb[nk]) == owner(to, kb[nk]))
            continue;
        /* only at the old owner: a key the copy has not brought yet */
        ck_assert_int_eq(rs_mc_set(g_fd[owner(from, kb[nk])], kb[nk], kb[nk], WAIT_MS), 0);
        keys[nk] = kb[nk];
        lens[nk] = strlen(kb[nk]);
        nk++;
    }
    size_t vl;
    uint32_t fl;
    memcached_return_t rc;
    char *v = memcached_get(m, keys[0], lens[0], &vl, &fl, &rc);
    ck_assert_msg(v != NULL && vl == lens[0] && memcmp(v, keys[0], vl) == 0,
                  "get of a key at its old owner only: %s", memcached_strerror(m, rc));
    free(v);
    ck_assert_int_eq(memcached_mget(m, keys, lens, (size_t)nk), MEMCACHED_SUCCESS);
    int got = 0;
    memcached_result_st *res;
    while ((res = memcached_fetch_result(m, NULL, &rc)) != NULL) {
        got++;
        memcached_result_free(res);
    }
    ck_assert_int_eq(got, nk);
    /* a write that misses at the new owner goes to the old one */
    ck_assert_int_eq(memcached_append(m, keys[1], lens[1], "+", 1, 0, 0), MEMCACHED_SUCCESS);
    ck_assert_int_eq(rs_mc_get(g_fd[owner(from, keys[1])], keys[1], val, sizeof(val), WAIT_MS), 1);
    ck_assert(val[strlen(val) - 1] == '+');
    ck_assert_int_eq(memcached_delete(m, keys[2], lens[2], 0), MEMCACHED_SUCCESS);
    ck_assert_uint_eq(holders(keys[2], val, sizeof(val)), 0);

    /* closing: a miss is the answer; a write that misses deletes the old copy */
    ck_assert_int_eq(mcr_router_set_migration(r, from, to, 0, MCR_MIGRATION_FLAG_CLOSING, &err),
                     MCR_OK);
    v = memcached_get(m, keys[3], lens[3], &vl, &fl, &rc);
    ck_assert_ptr_null(v);
    ck_assert_int_eq(rc, MEMCACHED_NOTFOUND);
    ck_assert_int_eq(memcached_touch(m, keys[3], lens[3], 100), MEMCACHED_NOTFOUND);
    ck_assert_uint_eq(holders(keys[3], val, sizeof(val)), 0);

    /* ended: the new servers only, one owner per write */
    ck_assert_int_eq(mcr_router_clear_migration(r), MCR_OK);
    key_of(key, sizeof(key), "end", 1);
    ck_assert_int_eq(memcached_set(m, key, strlen(key), "e", 1, 0, 0), MEMCACHED_SUCCESS);
    ck_assert_uint_eq(memcached_server_count(m), 4);
    ck_assert_uint_eq(holders(key, val, sizeof(val)), 1u << owner(to, key));
    memcached_free(m);
    mcr_router_free(r);
    mcr_snapshot_unref(from);
    mcr_snapshot_unref(to);
}
END_TEST

/* A program whose search order has libmemcached first is refused, with
 * the reason (bridge_order.c, linked so). */
START_TEST(wrong_order_refused)
{
    /* built beside this suite: $MCR_TEST_BIN_DIR/test/bridge_order */
    char prog[1024];
    snprintf(prog, sizeof(prog), "%s", tu_cli_path());
    char *slash = strrchr(prog, '/');
    ck_assert_ptr_nonnull(slash);
    snprintf(slash + 1, sizeof(prog) - (size_t)(slash + 1 - prog), "test/bridge_order");
    ck_assert_msg(access(prog, X_OK) == 0, "%s is missing: build target bridge_order", prog);
    char *const argv[] = {prog, NULL};
    char *out = NULL;
    int st = rs_run_log(argv, WAIT_MS, NULL, &out);
    ck_assert_msg(st == 0, "bridge_order: status %d: %s", st, out != NULL ? out : "");
    free(out);
}
END_TEST

/* ------------------------------------------------------------ threads */

#define TH_WORKERS 2
#define TH_PUBLISHES 41
#define TH_KEYS 64

struct th_shared {
    mcr_router *router;
    mcr_snapshot *s3, *s4; /* the two memberships published in turn */
    _Atomic unsigned long ops[TH_WORKERS];
    atomic_bool published_all;
};

struct th_worker {
    struct th_shared *sh;
    int id;
    char fail[512]; /* the first fault seen, or "" */
    atomic_bool done; /* the thread ended (after a fault, or its last pass) */
};

/* A thread of its own handle, attached to the shared router while another
 * thread publishes: each set succeeds and each key's server, as
 * libmemcached names it, is its owner in one of the two memberships (a
 * list torn by a change would name another); it stops after the last
 * publish, with one more pass through every key. */
static void *th_work(void *arg)
{
    struct th_worker *w = arg;
    memcached_st *m = memcached_create(NULL);
    mcr_error err = {0};
    if (m == NULL || mcr_memcached_attach(m, w->sh->router, 0, &err) != MCR_OK) {
        snprintf(w->fail, sizeof w->fail, "attach: %s", err.message);
        atomic_store(&w->done, true);
        return NULL;
    }
    char tag[16];
    snprintf(tag, sizeof tag, "th%d", w->id);
    bool last = false;
    for (unsigned long n = 0; w->fail[0] == '\0'; n++) {
        int k = (int)(n % TH_KEYS);
        if (k == 0 && last)
            break;
        if (k == 0 && atomic_load(&w->sh->published_all)) {
            last = true; /* one whole pass after the last publish, of keys */
            snprintf(tag, sizeof tag, "last%d", w->id); /* never written before */
        }
        char key[96];
        key_of(key, sizeof key, tag, k);
        memcached_return_t rc = memcached_set(m, key, strlen(key), key, strlen(key), 0, 0);
        if (rc != MEMCACHED_SUCCESS) {
            snprintf(w->fail, sizeof w->fail, "set %s: %s", key, memcached_strerror(m, rc));
            break;
        }
        rc = MEMCACHED_SUCCESS;
        const memcached_instance_st *in = memcached_server_by_key(m, key, strlen(key), &rc);
        int port = in != NULL ? (int)memcached_server_port(in) : -1;
        int o3 = g_mc[owner(w->sh->s3, key)].port, o4 = g_mc[owner(w->sh->s4, key)].port;
        if (in == NULL || rc != MEMCACHED_SUCCESS || (port != o3 && port != o4)) {
            snprintf(w->fail, sizeof w->fail, "%s: libmemcached names port %d, its owners are %d "
                     "(3 servers) and %d (4 servers)", key, port, o3, o4);
            break;
        }
        atomic_fetch_add(&w->sh->ops[w->id], 1);
    }
    memcached_free(m);
    atomic_store(&w->done, true);
    return NULL;
}

/* Two threads with a handle each on one router while a third publishes
 * 41 membership changes (the last to a list other than the first): every
 * call keeps to a whole list, and after the last change every key of both
 * threads is at its owner. Each change waits until both workers made
 * calls since the last (events, not time). */
START_TEST(threads_share_a_router)
{
    servers_start();
    struct th_shared sh;
    memset(&sh, 0, sizeof sh);
    sh.s3 = snap_of(3, MCR_MODE_KETAMA, 1);
    sh.s4 = snap_of(4, MCR_MODE_KETAMA, 2);
    mcr_error err = {0};
    ck_assert_int_eq(mcr_router_new(sh.s3, &sh.router, &err), MCR_OK);
    struct th_worker w[TH_WORKERS];
    pthread_t t[TH_WORKERS];
    for (int i = 0; i < TH_WORKERS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].sh = &sh;
        w[i].id = i;
        ck_assert_int_eq(pthread_create(&t[i], NULL, th_work, &w[i]), 0);
    }
    unsigned long seen[TH_WORKERS] = {0};
    int final = 3;
    for (int p = 0; p < TH_PUBLISHES; p++) {
        for (int i = 0; i < TH_WORKERS; i++) { /* both made calls since the last change */
            int64_t deadline = mcr_test_now_ms() + mcr_test_ms(WAIT_MS);
            while (atomic_load(&sh.ops[i]) < seen[i] + 5 && !atomic_load(&w[i].done)) {
                ck_assert_msg(mcr_test_now_ms() < deadline, "worker %d makes no progress", i);
                sched_yield();
            }
            seen[i] = atomic_load(&sh.ops[i]);
        }
        /* the same two memberships in turn, each with a later epoch */
        final = p % 2 == 0 ? 4 : 3;
        mcr_snapshot *n = snap_of(final, MCR_MODE_KETAMA, (uint64_t)p + 3);
        ck_assert_msg(mcr_router_publish(sh.router, n, &err) == MCR_OK, "%s", err.message);
        mcr_snapshot_unref(n);
    }
    atomic_store(&sh.published_all, true);
    for (int i = 0; i < TH_WORKERS; i++) {
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        ck_assert_msg(w[i].fail[0] == '\0', "worker %d: %s", i, w[i].fail);
    }
    mcr_snapshot *last = final == 4 ? sh.s4 : sh.s3;
    placed(last, "last0", TH_KEYS, "", false);
    placed(last, "last1", TH_KEYS, "", false);
    mcr_router_free(sh.router);
    mcr_snapshot_unref(sh.s3);
    mcr_snapshot_unref(sh.s4);
}
END_TEST

static Suite *bridge_suite(void)
{
    Suite *s = suite_create("bridge");
    const tu_case cases[] = {
        {"calls_reach_owners", calls_reach_owners},
        {"follows_router", follows_router},
        {"namespace_and_binary", namespace_and_binary},
        {"follows_state", follows_state},
        {"many_servers_every_mode", many_servers_every_mode},
        {"errors", errors},
        {"wrong_order_refused", wrong_order_refused},
        {"through_a_migration", through_a_migration},
        {"threads_share_a_router", threads_share_a_router},
    };
    tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]), mcr_test_sec(120), teardown);
    return s;
}

int main(void)
{
    return tu_run(bridge_suite());
}
