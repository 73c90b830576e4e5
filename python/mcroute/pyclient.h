/* SPDX-License-Identifier: BSD-3-Clause */
/* pyclient.h: what the files of the mcroute package's C extension share: the Client object, the exceptions, and what each file gives the others; never installed. */
#ifndef MCPY_CLIENT_H
#define MCPY_CLIENT_H

/* The stable ABI: one _mcroute.abi3.so serves every CPython from 3.11 on
 * (3.11 is the floor: the buffer protocol, PyObject_CheckBuffer, joined
 * the limited API then). The builds define it too; this covers any other. */
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030B0000
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>  /* the limited API's Python.h (3.11 on) no longer brings them */
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mcroute.h"
#include "mcroute_fleet.h"
#include "mcroute_pool.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"

struct event_base;

typedef enum source {
    SRC_SERVERS,
    SRC_SERVER_FILE,
    SRC_SNAPSHOT,
    SRC_STATE,
    SRC_ETCD
} source;

typedef struct Client {
    PyObject_HEAD
    /* where the servers come from: kept to build it all again in a
     * forked child */
    source src;
    char *arg;                 /* the list, a path, or etcd's URLs */
    char *pool_name;           /* etcd */
    char *mode, *client, *hash;
    mcr_pool_options opts;
    char *key_prefix;          /* opts.key_prefix points here */
    PyObject *serde;           /* NULL, or an object with serialize() and deserialize() */
    /* what serves the calls, made in the process `pid`, when mcpy_forks
     * was `forks` */
    pid_t pid;
    unsigned long forks;
    bool closed;               /* close() was called */
    struct event_base *base;
    mcr_router *router;
    mcr_fleet *fleet;
    mcr_pool *pool;
    struct stat snap_file;     /* SRC_SNAPSHOT: the file as last loaded */
    time_t snap_checked;       /* and when it was last looked at */
    bool busy;                 /* a call is in progress (the GIL released) */
} Client;

/* ---- module.c ---- */
extern PyObject *mcpy_Error, *mcpy_ConfigError, *mcpy_IllegalKeyError, *mcpy_TooBigError,
    *mcpy_ServerError, *mcpy_ConnectionError, *mcpy_TimeoutError, *mcpy_ServerDown,
    *mcpy_ProtocolError;
PyObject *mcpy_raise_status(int status, const char *message);

/* ---- client.c ---- */
/* Forks of the process so far, as the children see them (an atfork
 * handler counts them in the child): a client made before the last one
 * looks at getpid() once to learn whether it is in a child. */
extern _Atomic unsigned long mcpy_forks;
/* The atfork handler registered (module init); -1 when it cannot be. */
int mcpy_fork_init(void);
void mcpy_teardown(Client *c);
int mcpy_ready(Client *c);
void Client_dealloc(Client *c);
int Client_init(Client *c, PyObject *args, PyObject *kw);
PyObject *Client_close(Client *c, PyObject *unused);

/* ---- values.c ---- */
/* The keys of a call on many: their bytes, kept alive by the tuple. */
typedef struct mcpy_keyset {
    PyObject *seq;      /* mcpy_tuple_of the keys */
    Py_ssize_t n;
    const char **p;
    size_t *len;
} mcpy_keyset;
PyObject *mcpy_tuple_of(PyObject *v, const char *message);
int mcpy_key_bytes(PyObject *key, const char **p, Py_ssize_t *len, PyObject **ref);
int mcpy_value_bytes(Client *c, PyObject *key, PyObject *value, const char **p,
                       Py_ssize_t *len, uint32_t *flags, PyObject **owner);
PyObject *mcpy_value_object(Client *c, PyObject *key, const char *p, size_t len,
                              uint32_t flags);
int mcpy_expire_of(PyObject *v, int64_t *out);
void mcpy_keyset_clear(mcpy_keyset *k);
int mcpy_keyset_of(PyObject *keys, mcpy_keyset *k);
int mcpy_check_key(const Client *c, PyObject *key, const char *p, size_t len);

/* ---- calls.c ---- */
int mcpy_run(Client *c, const mcr_request *req, mcr_owned_result *out);
int mcpy_keyed(Client *c, PyObject *key, mcr_request *req, PyObject **ref);
PyObject *Client_get(Client *c, PyObject *args, PyObject *kw);
PyObject *Client_gets(Client *c, PyObject *args, PyObject *kw);
PyObject *Client_set(Client *c, PyObject *a, PyObject *k);
PyObject *Client_add(Client *c, PyObject *a, PyObject *k);
PyObject *Client_replace(Client *c, PyObject *a, PyObject *k);
PyObject *Client_append(Client *c, PyObject *a, PyObject *k);
PyObject *Client_prepend(Client *c, PyObject *a, PyObject *k);
PyObject *Client_cas(Client *c, PyObject *a, PyObject *k);
PyObject *Client_delete(Client *c, PyObject *args, PyObject *kw);
PyObject *Client_touch(Client *c, PyObject *args, PyObject *kw);
PyObject *Client_incr(Client *c, PyObject *a, PyObject *k);
PyObject *Client_decr(Client *c, PyObject *a, PyObject *k);

/* ---- many.c ---- */
/* One request of a set_many / delete_many. */
typedef struct mcpy_slot {
    int status;
    mcr_reply reply;
    char message[160];
} mcpy_slot;
PyObject *Client_get_many(Client *c, PyObject *args, PyObject *kw);
PyObject *Client_gets_many(Client *c, PyObject *args, PyObject *kw);
int mcpy_run_all(Client *c, const mcr_request *req, mcpy_slot *slot, Py_ssize_t n);
PyObject *Client_set_many(Client *c, PyObject *args, PyObject *kw);
PyObject *Client_delete_many(Client *c, PyObject *args, PyObject *kw);
PyObject *Client_flush_all(Client *c, PyObject *args, PyObject *kw);

/* ---- info.c ---- */
PyObject *Client_locate(Client *c, PyObject *key);
PyObject *Client_locate_many(Client *c, PyObject *keys);
PyObject *Client_servers(Client *c, PyObject *unused);
PyObject *Client_stats(Client *c, PyObject *args);
PyObject *Client_epoch(Client *c, PyObject *unused);

#endif
