/* SPDX-License-Identifier: BSD-3-Clause */
/* _mcroute.c: the C half of the mcroute Python package: Client, a pool of connections to memcached servers placed by an mcroute router (a server list, a server file, a snapshot file, a host's state or an etcd pool), its calls with the GIL released while the event loop waits, and the exceptions. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "mcroute.h"
#include "mcroute_fleet.h"
#include "mcroute_pool.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"
#include "mcroute_state.h"

/* ------------------------------------------------------------ errors */

static PyObject *Error, *ConfigError, *IllegalKeyError, *TooBigError, *ServerError,
    *ConnectionError_, *TimeoutError_, *ServerDown, *ProtocolError;

/* The exception class for a status of the library. */
static PyObject *exc_of(int status)
{
    switch (status) {
    case MCR_ERR_KEY: return IllegalKeyError;
    case MCR_ERR_TOO_BIG: return TooBigError;
    case MCR_ERR_TIMEOUT: return TimeoutError_;
    case MCR_ERR_CONNECT: return ConnectionError_;
    case MCR_ERR_DOWN: return ServerDown;
    case MCR_ERR_PROTOCOL: return ProtocolError;
    case MCR_ERR_SERVER: return ServerError;
    case MCR_ERR_CANCELLED: return ServerError;
    case MCR_ERR_NOMEM: return PyExc_MemoryError;
    case MCR_ERR_SYNTAX:
    case MCR_ERR_RANGE:
    case MCR_ERR_DUPLICATE:
    case MCR_ERR_UNKNOWN:
    case MCR_ERR_TOO_LONG:
    case MCR_ERR_UNSUPPORTED:
    case MCR_ERR_CORRUPT:
    case MCR_ERR_STALE:
    case MCR_ERR_IO: return ConfigError;
    default: return Error;
    }
}

/* Raise the exception of `status` with the library's message (or its
 * name when there is none); NULL, for return. */
static PyObject *raise_status(int status, const char *message)
{
    if (status == MCR_ERR_NOMEM)
        return PyErr_NoMemory();
    PyErr_SetString(exc_of(status),
                    message != NULL && message[0] != '\0' ? message : mcr_strerror(status));
    return NULL;
}

/* ------------------------------------------------------------ the client */

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
    /* what serves the calls, made in the process `pid` */
    pid_t pid;
    struct event_base *base;
    mcr_router *router;
    mcr_fleet *fleet;
    mcr_pool *pool;
    struct stat snap_file;     /* SRC_SNAPSHOT: the file as last loaded */
    time_t snap_checked;       /* and when it was last looked at */
    bool busy;                 /* a call is in progress (the GIL released) */
} Client;

static char *dup_or_null(const char *s)
{
    if (s == NULL)
        return NULL;
    char *d = strdup(s);
    if (d == NULL)
        PyErr_NoMemory();
    return d;
}

/* A snapshot of a server list or a server file with mode, hash or client,
 * as the CLI's -s and -f make it. */
static int config_snapshot(Client *c, mcr_snapshot **out, mcr_error *err)
{
    mcr_config *cfg = mcr_config_new();
    if (cfg == NULL)
        return MCR_ERR_NOMEM;
    int rc = MCR_OK;
    mcr_mode m = MCR_MODE_KETAMA;
    if (c->mode != NULL && mcr_mode_from_name(c->mode, &m) != MCR_OK) {
        snprintf(err->message, sizeof err->message, "mode: unknown mode \"%.60s\"", c->mode);
        rc = MCR_ERR_UNKNOWN;
    }
    if (rc == MCR_OK)
        rc = mcr_config_set_mode(cfg, m);
    if (rc == MCR_OK && c->hash != NULL) {
        mcr_hash h;
        if (mcr_hash_from_name(c->hash, &h) != MCR_OK) {
            snprintf(err->message, sizeof err->message, "hash: unknown hash \"%.60s\"",
                     c->hash);
            rc = MCR_ERR_UNKNOWN;
        } else {
            rc = mcr_config_set_hash(cfg, h);
        }
    }
    if (rc == MCR_OK && c->client != NULL)
        rc = mcr_config_set_client(cfg, c->client, err);
    if (rc == MCR_OK)
        rc = c->src == SRC_SERVERS ? mcr_config_add_servers(cfg, c->arg, err)
                                   : mcr_config_load_server_file(cfg, c->arg, err);
    if (rc == MCR_OK)
        rc = mcr_snapshot_new(cfg, 1, out, err);
    mcr_config_free(cfg);
    return rc;
}

/* The router, the follower (etcd), the event base and the pool, made for
 * this process. Called without the GIL held is not needed: it is held. */
static int build(Client *c, mcr_error *err)
{
    int rc = MCR_OK;
    mcr_snapshot *s = NULL;
    c->pid = getpid();
    switch (c->src) {
    case SRC_SERVERS:
    case SRC_SERVER_FILE:
        rc = config_snapshot(c, &s, err);
        break;
    case SRC_SNAPSHOT:
        if (stat(c->arg, &c->snap_file) != 0) {
            snprintf(err->message, sizeof err->message, "snapshot %.200s: %s", c->arg,
                     strerror(errno));
            rc = MCR_ERR_IO;
        } else {
            rc = mcr_snapshot_load(c->arg, NULL, 0, &s, err);
            c->snap_checked = time(NULL);
        }
        break;
    case SRC_STATE:
        rc = mcr_router_new_from_state(c->arg, 0, &c->router, err);
        break;
    case SRC_ETCD:
        rc = mcr_router_new(NULL, &c->router, err);
        if (rc == MCR_OK) {
            mcr_fleet_options o;
            mcr_fleet_options_init(&o);
            o.endpoints = c->arg;
            o.pool = c->pool_name;
            mcr_fleet_follow_options fo;
            memset(&fo, 0, sizeof fo);
            Py_BEGIN_ALLOW_THREADS
            rc = mcr_fleet_follow(&o, &fo, c->router, &c->fleet, err);
            Py_END_ALLOW_THREADS
        }
        break;
    }
    if (rc == MCR_OK && s != NULL)
        rc = mcr_router_new(s, &c->router, err);
    mcr_snapshot_unref(s);
    if (rc == MCR_OK && (c->base = event_base_new()) == NULL) {
        snprintf(err->message, sizeof err->message, "libevent: no event base");
        rc = MCR_ERR_SYSTEM;
    }
    if (rc == MCR_OK)
        rc = mcr_pool_new(c->base, c->router, &c->opts, &c->pool, err);
    return rc;
}

/* Free what build() made (in the process that made it). */
static void teardown(Client *c)
{
    mcr_pool_free(c->pool);
    c->pool = NULL;
    if (c->base != NULL)
        event_base_free(c->base);
    c->base = NULL;
    mcr_fleet_free(c->fleet);
    c->fleet = NULL;
    mcr_router_free(c->router);
    c->router = NULL;
}

/* A snapshot file that changed is loaded and published, looked at no more
 * than once a second; a bad one is refused with a warning, and the
 * client keeps its servers. */
static int follow_snapshot(Client *c)
{
    time_t now = time(NULL);
    if (now == c->snap_checked)
        return 0;
    c->snap_checked = now;
    struct stat st;
    if (stat(c->arg, &st) != 0 ||
        (st.st_mtim.tv_sec == c->snap_file.st_mtim.tv_sec &&
         st.st_mtim.tv_nsec == c->snap_file.st_mtim.tv_nsec && st.st_ino == c->snap_file.st_ino &&
         st.st_size == c->snap_file.st_size))
        return 0;
    c->snap_file = st;
    mcr_snapshot *cur = mcr_router_published(c->router), *s = NULL;
    mcr_error err = {0};
    int rc = mcr_snapshot_load(c->arg, cur, 0, &s, &err);
    if (rc == MCR_OK)
        rc = mcr_router_publish(c->router, s, &err);
    mcr_snapshot_unref(s);
    mcr_snapshot_unref(cur);
    if (rc != MCR_OK)
        return PyErr_WarnFormat(PyExc_RuntimeWarning, 1, "mcroute: snapshot %s not taken: %s",
                                c->arg, err.message);
    return 0;
}

/* Before a call: not in use by another thread; in a forked child, all made
 * again for this process (what the parent made is left alone: freeing it
 * here would touch the parent's connections and event loop); a snapshot
 * file followed. -1 with an exception set. */
static int ready(Client *c)
{
    if (c->busy) {
        PyErr_SetString(Error, "mcroute.Client used by two threads at once: give each thread "
                               "its own client, or hold a lock around its calls");
        return -1;
    }
    if (c->pool == NULL && c->pid == getpid()) {
        PyErr_SetString(Error, "mcroute.Client is closed");
        return -1;
    }
    if (c->pid != getpid()) {
        c->pool = NULL; /* the parent's, abandoned */
        c->base = NULL;
        c->router = NULL;
        c->fleet = NULL;
        mcr_error err = {0};
        int rc = build(c, &err);
        if (rc != MCR_OK) {
            teardown(c);
            raise_status(rc, err.message);
            return -1;
        }
    }
    if (c->src == SRC_SNAPSHOT)
        return follow_snapshot(c);
    return 0;
}

static void Client_dealloc(Client *c)
{
    if (c->pid == getpid())
        teardown(c);
    free(c->arg);
    free(c->pool_name);
    free(c->mode);
    free(c->client);
    free(c->hash);
    free(c->key_prefix);
    Py_XDECREF(c->serde);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

/* seconds (int or float, or None) -> ms in *out; 0 stays the default. */
static int seconds_ms(PyObject *v, const char *name, unsigned *out)
{
    if (v == NULL || v == Py_None)
        return 0;
    double s = PyFloat_AsDouble(v);
    if (s == -1.0 && PyErr_Occurred())
        return -1;
    if (!(s > 0) || s * 1000.0 > (double)MCR_POOL_TIMEOUT_MAX_MS) {
        PyErr_Format(ConfigError, "%s: %R seconds is not a timeout (above 0, at most a day)",
                     name, v);
        return -1;
    }
    double ms = s * 1000.0;
    *out = ms < 1.0 ? 1u : (unsigned)(ms + 0.5);
    return 0;
}

/* A server list: a str "h:p,h:p" or a sequence of str. malloc'd. */
static char *servers_text(PyObject *v)
{
    if (PyUnicode_Check(v)) {
        const char *s = PyUnicode_AsUTF8(v);
        return s != NULL ? dup_or_null(s) : NULL;
    }
    PyObject *seq = PySequence_Fast(v, "servers: a list of \"host:port\" strings, or one "
                                       "comma-separated string");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    size_t cap = 1, len = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyUnicode_Check(it)) {
            PyErr_Format(ConfigError, "servers[%zd]: %R is not a string", i, it);
            Py_DECREF(seq);
            return NULL;
        }
        Py_ssize_t l;
        if (PyUnicode_AsUTF8AndSize(it, &l) == NULL) {
            Py_DECREF(seq);
            return NULL;
        }
        cap += (size_t)l + 1;
    }
    char *out = malloc(cap);
    if (out == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t l;
        const char *s = PyUnicode_AsUTF8AndSize(PySequence_Fast_GET_ITEM(seq, i), &l);
        if (memchr(s, ',', (size_t)l) != NULL) {
            PyErr_Format(ConfigError, "servers[%zd]: \"%s\" holds a comma: give one server "
                                      "per item", i, s);
            free(out);
            Py_DECREF(seq);
            return NULL;
        }
        if (i > 0)
            out[len++] = ',';
        memcpy(out + len, s, (size_t)l);
        len += (size_t)l;
    }
    out[len] = '\0';
    Py_DECREF(seq);
    return out;
}

static const char *opt_str(PyObject *v, const char *name)
{
    if (v == NULL || v == Py_None)
        return NULL;
    if (!PyUnicode_Check(v)) {
        PyErr_Format(ConfigError, "%s: %R is not a string", name, v);
        return NULL;
    }
    return PyUnicode_AsUTF8(v);
}

static int Client_init(Client *c, PyObject *args, PyObject *kw)
{
    static char *names[] = {"servers", "server_file", "snapshot", "state", "etcd", "pool",
                            "mode", "client", "hash", "connect_timeout", "timeout",
                            "policy", "protocol", "key_prefix", "max_value_size",
                            "connections", "serde", NULL};
    PyObject *servers = NULL, *server_file = NULL, *snapshot = NULL, *state = NULL,
             *etcd = NULL, *pool = NULL, *mode = NULL, *client = NULL, *hash = NULL,
             *connect_timeout = NULL, *timeout = NULL, *policy = NULL, *protocol = NULL,
             *key_prefix = NULL, *max_value_size = NULL, *connections = NULL, *serde = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O$OOOOOOOOOOOOOOOO", names, &servers,
                                     &server_file, &snapshot, &state, &etcd, &pool, &mode,
                                     &client, &hash, &connect_timeout, &timeout, &policy,
                                     &protocol, &key_prefix, &max_value_size, &connections,
                                     &serde))
        return -1;
    if (c->pool != NULL || c->arg != NULL) {
        PyErr_SetString(Error, "mcroute.Client is initialised once");
        return -1;
    }
#define GIVEN(v) ((v) != NULL && (v) != Py_None)
    int nsrc = GIVEN(servers) + GIVEN(server_file) + GIVEN(snapshot) + GIVEN(state) +
               GIVEN(etcd);
    if (nsrc != 1) {
        PyErr_SetString(ConfigError,
                        nsrc == 0 ? "no servers: give servers=LIST, server_file=PATH, "
                                    "snapshot=PATH, state=PATH or etcd=URLS with pool=NAME"
                                  : "give only one of servers, server_file, snapshot, state "
                                    "and etcd");
        return -1;
    }
    if (GIVEN(pool) != GIVEN(etcd)) {
        PyErr_SetString(ConfigError, GIVEN(etcd) ? "etcd needs pool=NAME (the pool's name in "
                                                   "etcd)"
                                                 : "pool applies only to etcd");
        return -1;
    }
    bool placement = GIVEN(mode) || GIVEN(hash) || GIVEN(client);
    if (placement && !(GIVEN(servers) || GIVEN(server_file))) {
        PyErr_SetString(ConfigError, "mode, hash and client apply only to servers and "
                                     "server_file: a snapshot, a state and an etcd pool "
                                     "set the placement");
        return -1;
    }
    if (GIVEN(client) && (GIVEN(mode) || GIVEN(hash))) {
        PyErr_SetString(ConfigError, "client sets the mode and the hash: give client or "
                                     "mode (and hash), not both");
        return -1;
    }
    if (GIVEN(servers)) {
        c->src = SRC_SERVERS;
        c->arg = servers_text(servers);
    } else {
        PyObject *v = GIVEN(server_file) ? server_file
                      : GIVEN(snapshot)  ? snapshot
                      : GIVEN(state)     ? state
                                         : etcd;
        c->src = GIVEN(server_file) ? SRC_SERVER_FILE
                 : GIVEN(snapshot)  ? SRC_SNAPSHOT
                 : GIVEN(state)     ? SRC_STATE
                                    : SRC_ETCD;
        PyObject *path = NULL;
        if (c->src == SRC_ETCD) {
            const char *s = opt_str(v, "etcd");
            c->arg = s != NULL ? dup_or_null(s) : NULL;
        } else if (PyUnicode_FSConverter(v, &path)) {
            c->arg = dup_or_null(PyBytes_AS_STRING(path));
            Py_DECREF(path);
        }
    }
    if (c->arg == NULL)
        return -1;
    const char *s;
    if (GIVEN(pool) && ((s = opt_str(pool, "pool")) == NULL ||
                        (c->pool_name = dup_or_null(s)) == NULL))
        return -1;
    if (GIVEN(mode) && ((s = opt_str(mode, "mode")) == NULL || (c->mode = dup_or_null(s)) == NULL))
        return -1;
    if (GIVEN(hash) && ((s = opt_str(hash, "hash")) == NULL || (c->hash = dup_or_null(s)) == NULL))
        return -1;
    if (GIVEN(client) &&
        ((s = opt_str(client, "client")) == NULL || (c->client = dup_or_null(s)) == NULL))
        return -1;
    mcr_pool_options_init(&c->opts);
    if (seconds_ms(connect_timeout, "connect_timeout", &c->opts.connect_timeout_ms) != 0 ||
        seconds_ms(timeout, "timeout", &c->opts.request_timeout_ms) != 0)
        return -1;
    if (GIVEN(policy)) {
        if ((s = opt_str(policy, "policy")) == NULL)
            return -1;
        if (mcr_policy_from_name(s, &c->opts.policy) != MCR_OK) {
            PyErr_Format(ConfigError, "policy: unknown policy \"%s\" (fail-fast, eject, "
                                      "failover)", s);
            return -1;
        }
    }
    if (GIVEN(protocol)) {
        if ((s = opt_str(protocol, "protocol")) == NULL)
            return -1;
        if (strcmp(s, "text") == 0) {
            c->opts.protocol = MCR_PROTO_TEXT;
        } else if (strcmp(s, "meta") == 0) {
            c->opts.protocol = MCR_PROTO_META;
        } else {
            PyErr_Format(ConfigError, "protocol: \"%s\" is neither \"text\" nor \"meta\"", s);
            return -1;
        }
    }
    if (GIVEN(key_prefix)) {
        if ((s = opt_str(key_prefix, "key_prefix")) == NULL ||
            (c->key_prefix = dup_or_null(s)) == NULL)
            return -1;
        c->opts.key_prefix = c->key_prefix;
    }
    if (GIVEN(max_value_size)) {
        unsigned long long v = PyLong_AsUnsignedLongLong(max_value_size);
        if (PyErr_Occurred() || v == 0 || v > MCR_POOL_VALUE_MAX) {
            PyErr_Clear();
            PyErr_Format(ConfigError, "max_value_size: %R is not a size from 1 to %u bytes",
                         max_value_size, MCR_POOL_VALUE_MAX);
            return -1;
        }
        c->opts.max_value_size = (size_t)v;
    }
    if (GIVEN(connections)) {
        long v = PyLong_AsLong(connections);
        if (PyErr_Occurred() || v < 1 || v > (long)MCR_POOL_CONNECTIONS_MAX) {
            PyErr_Clear();
            PyErr_Format(ConfigError, "connections: %R is not a count from 1 to %u",
                         connections, MCR_POOL_CONNECTIONS_MAX);
            return -1;
        }
        c->opts.connections = (unsigned)v;
    }
    if (GIVEN(serde)) {
        PyObject *a = PyObject_GetAttrString(serde, "serialize"),
                 *b = PyObject_GetAttrString(serde, "deserialize");
        bool ok = a != NULL && b != NULL && PyCallable_Check(a) && PyCallable_Check(b);
        Py_XDECREF(a);
        Py_XDECREF(b);
        if (!ok) {
            PyErr_Clear();
            PyErr_SetString(ConfigError, "serde: an object with serialize(key, value) -> "
                                         "(bytes, flags) and deserialize(key, value, flags)");
            return -1;
        }
        Py_INCREF(serde);
        c->serde = serde;
    }
#undef GIVEN
    mcr_error err = {0};
    int rc = build(c, &err);
    if (rc != MCR_OK) {
        teardown(c);
        raise_status(rc, err.message);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ keys and values */

/* A key: str (UTF-8) or bytes. *ref holds what keeps the bytes alive. */
static int key_bytes(PyObject *key, const char **p, Py_ssize_t *len, PyObject **ref)
{
    *ref = NULL;
    if (PyUnicode_Check(key)) {
        *p = PyUnicode_AsUTF8AndSize(key, len);
        return *p != NULL ? 0 : -1;
    }
    if (PyBytes_Check(key)) {
        *p = PyBytes_AS_STRING(key);
        *len = PyBytes_GET_SIZE(key);
        return 0;
    }
    PyErr_Format(IllegalKeyError, "a key is str or bytes, not %.80s", Py_TYPE(key)->tp_name);
    return -1;
}

/* A value to store: through serde.serialize() when the client has one,
 * else bytes (and other buffers), str (UTF-8) or int (decimal) as they
 * are, flags 0. *owner keeps the bytes alive (a new reference). */
static int value_bytes(Client *c, PyObject *key, PyObject *value, const char **p,
                       Py_ssize_t *len, uint32_t *flags, PyObject **owner)
{
    *owner = NULL;
    *flags = 0;
    PyObject *v = value;
    if (c->serde != NULL) {
        PyObject *r = PyObject_CallMethod(c->serde, "serialize", "OO", key, value);
        if (r == NULL)
            return -1;
        if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2) {
            PyErr_Format(PyExc_TypeError, "serde.serialize() returned %.80s, not a tuple "
                                          "(bytes, flags)", Py_TYPE(r)->tp_name);
            Py_DECREF(r);
            return -1;
        }
        unsigned long f = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(r, 1));
        if (PyErr_Occurred() || f > UINT32_MAX) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "serde.serialize(): flags are an int from 0 "
                                              "to 2**32 - 1");
            Py_DECREF(r);
            return -1;
        }
        *flags = (uint32_t)f;
        v = PyTuple_GET_ITEM(r, 0);
        Py_INCREF(v);
        Py_DECREF(r);
    } else {
        Py_INCREF(v);
    }
    if (PyBytes_Check(v)) {
        *p = PyBytes_AS_STRING(v);
        *len = PyBytes_GET_SIZE(v);
        *owner = v;
        return 0;
    }
    if (PyUnicode_Check(v)) {
        *p = PyUnicode_AsUTF8AndSize(v, len);
        if (*p == NULL) {
            Py_DECREF(v);
            return -1;
        }
        *owner = v;
        return 0;
    }
    if (PyLong_Check(v) && !PyBool_Check(v)) {
        PyObject *s = PyObject_Str(v);
        Py_DECREF(v);
        if (s == NULL)
            return -1;
        *p = PyUnicode_AsUTF8AndSize(s, len);
        *owner = s;
        return 0;
    }
    if (PyObject_CheckBuffer(v)) {
        PyObject *b = PyBytes_FromObject(v);
        Py_DECREF(v);
        if (b == NULL)
            return -1;
        *p = PyBytes_AS_STRING(b);
        *len = PyBytes_GET_SIZE(b);
        *owner = b;
        return 0;
    }
    PyErr_Format(PyExc_TypeError,
                 "a value is bytes, str or int without a serde (mcroute.PickleSerde stores "
                 "any object), not %.80s", Py_TYPE(v)->tp_name);
    Py_DECREF(v);
    return -1;
}

/* A value read: through serde.deserialize() when the client has one, else
 * bytes. */
static PyObject *value_object(Client *c, PyObject *key, const char *p, size_t len,
                              uint32_t flags)
{
    PyObject *b = PyBytes_FromStringAndSize(p, (Py_ssize_t)len);
    if (b == NULL || c->serde == NULL)
        return b;
    PyObject *r = PyObject_CallMethod(c->serde, "deserialize", "OOI", key, b, (unsigned)flags);
    Py_DECREF(b);
    return r;
}

static int expire_of(PyObject *v, int64_t *out)
{
    *out = 0;
    if (v == NULL || v == Py_None)
        return 0;
    long long e = PyLong_AsLongLong(v);
    if (PyErr_Occurred() || e < 0 || e > 2147483647LL) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "expire: %R is not a number of seconds from 0 to "
                                       "2**31 - 1", v);
        return -1;
    }
    *out = e;
    return 0;
}

/* ------------------------------------------------------------ one request */

/* Run `req` to its end with the GIL released: MCR_OK with *out filled, or
 * -1 with an exception set (a submission or request error). Statuses the
 * caller handles itself come back in out->status. */
static int run(Client *c, const mcr_request *req, mcr_owned_result *out)
{
    int rc;
    c->busy = true;
    Py_BEGIN_ALLOW_THREADS
    rc = mcr_pool_exec(c->pool, req, out);
    Py_END_ALLOW_THREADS
    c->busy = false;
    if (rc != MCR_OK) {
        raise_status(rc, out->message);
        mcr_owned_result_clear(out);
        return -1;
    }
    return 0;
}

/* The start of every keyed call: the client ready, the key's bytes. */
static int keyed(Client *c, PyObject *key, mcr_request *req, PyObject **ref)
{
    if (ready(c) != 0)
        return -1;
    const char *p;
    Py_ssize_t len;
    if (key_bytes(key, &p, &len, ref) != 0)
        return -1;
    req->key = p;
    req->key_len = (size_t)len;
    return 0;
}

static PyObject *Client_get(Client *c, PyObject *args, PyObject *kw)
{
    static char *names[] = {"key", "default", NULL};
    PyObject *key, *dflt = Py_None, *ref;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:get", names, &key, &dflt))
        return NULL;
    mcr_request req = {.op = MCR_OP_GET};
    mcr_owned_result r;
    if (keyed(c, key, &req, &ref) != 0 || run(c, &req, &r) != 0)
        return NULL;
    PyObject *v;
    if (r.reply == MCR_REPLY_HIT) {
        v = value_object(c, key, r.value, r.value_len, r.flags);
    } else {
        Py_INCREF(dflt);
        v = dflt;
    }
    mcr_owned_result_clear(&r);
    return v;
}

static PyObject *Client_gets(Client *c, PyObject *args, PyObject *kw)
{
    static char *names[] = {"key", "default", "cas_default", NULL};
    PyObject *key, *dflt = Py_None, *cas_dflt = Py_None, *ref;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OO:gets", names, &key, &dflt, &cas_dflt))
        return NULL;
    mcr_request req = {.op = MCR_OP_GETS};
    mcr_owned_result r;
    if (keyed(c, key, &req, &ref) != 0 || run(c, &req, &r) != 0)
        return NULL;
    PyObject *out;
    if (r.reply == MCR_REPLY_HIT) {
        PyObject *v = value_object(c, key, r.value, r.value_len, r.flags);
        out = v != NULL ? Py_BuildValue("(NK)", v, (unsigned long long)r.cas) : NULL;
    } else {
        out = Py_BuildValue("(OO)", dflt, cas_dflt);
    }
    mcr_owned_result_clear(&r);
    return out;
}

/* set, add, replace, append, prepend and cas: True when stored, False
 * when not (add of a key that exists, replace or append of one that does
 * not); cas: True, False when the item changed, None when it is gone. */
static PyObject *store(Client *c, mcr_op op, PyObject *args, PyObject *kw, const char *fmt)
{
    static char *names[] = {"key", "value", "expire", "noreply", "flags", NULL};
    static char *cas_names[] = {"key", "value", "cas", "expire", "noreply", "flags", NULL};
    PyObject *key, *value, *expire = NULL, *noreply = NULL, *flags = NULL, *cas = NULL, *ref;
    int ok = op == MCR_OP_CAS
                 ? PyArg_ParseTupleAndKeywords(args, kw, fmt, cas_names, &key, &value, &cas,
                                               &expire, &noreply, &flags)
                 : PyArg_ParseTupleAndKeywords(args, kw, fmt, names, &key, &value, &expire,
                                               &noreply, &flags);
    (void)noreply; /* every request is answered: accepted for pymemcache's signature */
    if (!ok)
        return NULL;
    mcr_request req = {.op = op};
    if (keyed(c, key, &req, &ref) != 0 || expire_of(expire, &req.exptime) != 0)
        return NULL;
    if (op == MCR_OP_CAS) {
        unsigned long long u = PyLong_AsUnsignedLongLong(cas);
        if (PyErr_Occurred())
            return NULL;
        req.cas = u;
    }
    const char *p;
    Py_ssize_t len;
    PyObject *owner;
    if (value_bytes(c, key, value, &p, &len, &req.flags, &owner) != 0)
        return NULL;
    if (flags != NULL && flags != Py_None) {
        unsigned long f = PyLong_AsUnsignedLong(flags);
        if (PyErr_Occurred() || f > UINT32_MAX) {
            PyErr_Clear();
            Py_DECREF(owner);
            PyErr_SetString(PyExc_ValueError, "flags: an int from 0 to 2**32 - 1");
            return NULL;
        }
        req.flags = (uint32_t)f;
    }
    req.value = p;
    req.value_len = (size_t)len;
    mcr_owned_result r;
    int rc = run(c, &req, &r);
    Py_DECREF(owner);
    if (rc != 0)
        return NULL;
    PyObject *out = r.reply == MCR_REPLY_STORED     ? Py_True
                    : r.reply == MCR_REPLY_MISS     ? Py_None
                                                    : Py_False;
    mcr_owned_result_clear(&r);
    Py_INCREF(out);
    return out;
}

static PyObject *Client_set(Client *c, PyObject *a, PyObject *k)
{
    return store(c, MCR_OP_SET, a, k, "OO|OOO:set");
}
static PyObject *Client_add(Client *c, PyObject *a, PyObject *k)
{
    return store(c, MCR_OP_ADD, a, k, "OO|OOO:add");
}
static PyObject *Client_replace(Client *c, PyObject *a, PyObject *k)
{
    return store(c, MCR_OP_REPLACE, a, k, "OO|OOO:replace");
}
static PyObject *Client_append(Client *c, PyObject *a, PyObject *k)
{
    return store(c, MCR_OP_APPEND, a, k, "OO|OOO:append");
}
static PyObject *Client_prepend(Client *c, PyObject *a, PyObject *k)
{
    return store(c, MCR_OP_PREPEND, a, k, "OO|OOO:prepend");
}
static PyObject *Client_cas(Client *c, PyObject *a, PyObject *k)
{
    return store(c, MCR_OP_CAS, a, k, "OOO|OOO:cas");
}

/* delete: True when deleted, False when there was no such key. */
static PyObject *Client_delete(Client *c, PyObject *args, PyObject *kw)
{
    static char *names[] = {"key", "noreply", NULL};
    PyObject *key, *noreply = NULL, *ref;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:delete", names, &key, &noreply))
        return NULL;
    mcr_request req = {.op = MCR_OP_DELETE};
    mcr_owned_result r;
    if (keyed(c, key, &req, &ref) != 0 || run(c, &req, &r) != 0)
        return NULL;
    PyObject *out = r.reply == MCR_REPLY_DELETED ? Py_True : Py_False;
    mcr_owned_result_clear(&r);
    Py_INCREF(out);
    return out;
}

/* touch: True when touched, False when there was no such key. */
static PyObject *Client_touch(Client *c, PyObject *args, PyObject *kw)
{
    static char *names[] = {"key", "expire", "noreply", NULL};
    PyObject *key, *expire = NULL, *noreply = NULL, *ref;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OO:touch", names, &key, &expire, &noreply))
        return NULL;
    mcr_request req = {.op = MCR_OP_TOUCH};
    mcr_owned_result r;
    if (keyed(c, key, &req, &ref) != 0 || expire_of(expire, &req.exptime) != 0 ||
        run(c, &req, &r) != 0)
        return NULL;
    PyObject *out = r.reply == MCR_REPLY_TOUCHED ? Py_True : Py_False;
    mcr_owned_result_clear(&r);
    Py_INCREF(out);
    return out;
}

/* incr and decr: the new value, or None when there is no such key. */
static PyObject *counter(Client *c, mcr_op op, PyObject *args, PyObject *kw, const char *fmt)
{
    static char *names[] = {"key", "value", "noreply", NULL};
    PyObject *key, *delta = NULL, *noreply = NULL, *ref;
    if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, names, &key, &delta, &noreply))
        return NULL;
    mcr_request req = {.op = op, .delta = 1};
    if (delta != NULL) {
        unsigned long long d = PyLong_AsUnsignedLongLong(delta);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "value: %R is not an int from 0 to 2**64 - 1",
                         delta);
            return NULL;
        }
        req.delta = d;
    }
    mcr_owned_result r;
    if (keyed(c, key, &req, &ref) != 0 || run(c, &req, &r) != 0)
        return NULL;
    PyObject *out = r.reply == MCR_REPLY_NUMBER ? PyLong_FromUnsignedLongLong(r.number)
                                                : Py_NewRef(Py_None);
    mcr_owned_result_clear(&r);
    return out;
}

static PyObject *Client_incr(Client *c, PyObject *a, PyObject *k)
{
    return counter(c, MCR_OP_INCR, a, k, "O|OO:incr");
}
static PyObject *Client_decr(Client *c, PyObject *a, PyObject *k)
{
    return counter(c, MCR_OP_DECR, a, k, "O|OO:decr");
}

/* ------------------------------------------------------------ many keys */

/* The keys of a call on many: their bytes, kept alive by the sequence. */
typedef struct keyset {
    PyObject *seq;      /* PySequence_Fast of the keys */
    Py_ssize_t n;
    const char **p;
    size_t *len;
} keyset;

static void keyset_clear(keyset *k)
{
    Py_XDECREF(k->seq);
    PyMem_Free(k->p);
    PyMem_Free(k->len);
    memset(k, 0, sizeof *k);
}

static int keyset_of(PyObject *keys, keyset *k)
{
    memset(k, 0, sizeof *k);
    k->seq = PySequence_Fast(keys, "keys: a list, tuple or other iterable of keys");
    if (k->seq == NULL)
        return -1;
    k->n = PySequence_Fast_GET_SIZE(k->seq);
    k->p = PyMem_Calloc((size_t)k->n + 1, sizeof *k->p);
    k->len = PyMem_Calloc((size_t)k->n + 1, sizeof *k->len);
    if (k->p == NULL || k->len == NULL) {
        keyset_clear(k);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < k->n; i++) {
        PyObject *ref;
        Py_ssize_t l;
        if (key_bytes(PySequence_Fast_GET_ITEM(k->seq, i), &k->p[i], &l, &ref) != 0) {
            keyset_clear(k);
            return -1;
        }
        k->len[i] = (size_t)l;
    }
    return 0;
}

/* The pool's key rule (mcroute_pool.h, "Keys and values"), checked
 * before any request of a call on many keys is sent, so that a bad key
 * changes nothing: 1 to MCR_KEY_MAX bytes with the key prefix, no space or
 * control byte. */
static int check_key(const Client *c, PyObject *key, const char *p, size_t len)
{
    size_t plen = c->key_prefix != NULL ? strlen(c->key_prefix) : 0;
    const char *why = NULL;
    if (len == 0)
        why = "is empty";
    else if (len + plen > MCR_KEY_MAX)
        why = "is longer than 250 bytes (with the key prefix)";
    for (size_t i = 0; why == NULL && i < len; i++)
        if ((unsigned char)p[i] <= 0x20 || (unsigned char)p[i] == 0x7f)
            why = "holds a space or a control byte";
    if (why == NULL)
        return 0;
    PyErr_Format(IllegalKeyError, "key %.100R %s: nothing was sent", key, why);
    return -1;
}

/* One key's outcome in a multi-get. */
typedef struct mget_slot {
    int status;         /* MCR_OK: hit or miss as `hit` says */
    bool hit;
    char *value;        /* malloc'd */
    size_t value_len;
    uint32_t flags;
    uint64_t cas;
} mget_slot;

typedef struct mget_call {
    mget_slot *slot;
    int status;
    char message[256];
} mget_call;

static void mget_key_cb(const mcr_result *res, void *arg)
{
    mget_call *m = arg;
    mget_slot *s = &m->slot[res->index];
    s->status = res->status;
    if (res->status != MCR_OK) {
        if (m->status == MCR_OK) {
            m->status = res->status;
            snprintf(m->message, sizeof m->message, "%s", res->message ? res->message : "");
        }
        return;
    }
    if (res->reply != MCR_REPLY_HIT)
        return;
    s->value = malloc(res->value_len + 1);
    if (s->value == NULL) {
        s->status = MCR_ERR_NOMEM;
        return;
    }
    memcpy(s->value, res->value, res->value_len);
    s->value_len = res->value_len;
    s->flags = res->flags;
    s->cas = res->cas;
    s->hit = true;
}

static void mget_done_cb(const mcr_result *res, void *arg)
{
    (void)res;
    (void)arg;
}

/* get_many / gets_many: {key: value} of the keys found (as given: str or
 * bytes). A key the rules refuse raises IllegalKeyError before anything is
 * sent; a server's error raises for the first key it failed (the others'
 * values are dropped: pymemcache's rule is to raise too). */
static PyObject *many(Client *c, PyObject *keys, mcr_op op)
{
    if (ready(c) != 0)
        return NULL;
    keyset k;
    if (keyset_of(keys, &k) != 0)
        return NULL;
    PyObject *out = PyDict_New();
    if (out == NULL || k.n == 0) {
        keyset_clear(&k);
        return out;
    }
    mget_call m = {.status = MCR_OK};
    m.slot = calloc((size_t)k.n, sizeof *m.slot);
    if (m.slot == NULL) {
        keyset_clear(&k);
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    mcr_error err = {0};
    int rc;
    c->busy = true;
    Py_BEGIN_ALLOW_THREADS
    rc = mcr_pool_get_multi(c->pool, op, (const void *const *)k.p, k.len, (size_t)k.n,
                            mget_key_cb, mget_done_cb, &m, &err);
    if (rc == MCR_OK)
        rc = mcr_pool_wait(c->pool);
    Py_END_ALLOW_THREADS
    c->busy = false;
    if (rc != MCR_OK) {
        raise_status(rc, err.message);
    } else if (m.status != MCR_OK) {
        raise_status(m.status, m.message);
    } else {
        for (Py_ssize_t i = 0; i < k.n; i++) {
            mget_slot *s = &m.slot[i];
            if (!s->hit)
                continue;
            PyObject *key = PySequence_Fast_GET_ITEM(k.seq, i);
            PyObject *v = value_object(c, key, s->value, s->value_len, s->flags);
            if (v != NULL && op == MCR_OP_GETS)
                v = Py_BuildValue("(NK)", v, (unsigned long long)s->cas);
            if (v == NULL || PyDict_SetItem(out, key, v) != 0) {
                Py_XDECREF(v);
                rc = -1;
                break;
            }
            Py_DECREF(v);
        }
    }
    for (Py_ssize_t i = 0; i < k.n; i++)
        free(m.slot[i].value);
    free(m.slot);
    keyset_clear(&k);
    if (rc != MCR_OK || m.status != MCR_OK) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

static PyObject *Client_get_many(Client *c, PyObject *args, PyObject *kw)
{
    static char *names[] = {"keys", NULL};
    PyObject *keys;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:get_many", names, &keys))
        return NULL;
    return many(c, keys, MCR_OP_GET);
}

static PyObject *Client_gets_many(Client *c, PyObject *args, PyObject *kw)
{
    static char *names[] = {"keys", NULL};
    PyObject *keys;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:gets_many", names, &keys))
        return NULL;
    return many(c, keys, MCR_OP_GETS);
}

/* One request of a set_many / delete_many. */
typedef struct multi_slot {
    int status;
    mcr_reply reply;
    char message[160];
} multi_slot;

static void multi_cb(const mcr_result *res, void *arg)
{
    multi_slot *s = arg;
    s->status = res->status;
    s->reply = res->reply;
    if (res->status != MCR_OK)
        snprintf(s->message, sizeof s->message, "%s", res->message ? res->message : "");
}

/* Submit the n requests at once and wait for all: the slots filled. On a
 * submission error, the requests submitted before it are waited for and
 * -1 returned with the exception of the refused one. */
static int run_all(Client *c, const mcr_request *req, multi_slot *slot, Py_ssize_t n)
{
    int rc = MCR_OK;
    Py_ssize_t bad = -1;
    mcr_error err = {0};
    c->busy = true;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n && rc == MCR_OK; i++) {
        rc = mcr_pool_submit(c->pool, &req[i], multi_cb, &slot[i], &err);
        if (rc != MCR_OK)
            bad = i;
    }
    mcr_pool_wait(c->pool);
    Py_END_ALLOW_THREADS
    c->busy = false;
    if (bad >= 0) {
        raise_status(rc, err.message);
        return -1;
    }
    return 0;
}

/* set_many({key: value}, expire=0): the keys that were not stored (a
 * server's error for them included), as pymemcache returns them. A bad key
 * or value raises before anything is sent. */
static PyObject *Client_set_many(Client *c, PyObject *args, PyObject *kw)
{
    static char *names[] = {"values", "expire", "noreply", "flags", NULL};
    PyObject *values, *expire = NULL, *noreply = NULL, *flags = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OOO:set_many", names, &values, &expire,
                                     &noreply, &flags))
        return NULL;
    int64_t exptime;
    if (ready(c) != 0 || expire_of(expire, &exptime) != 0)
        return NULL;
    PyObject *items = PyMapping_Items(values);
    if (items == NULL)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(items);
    mcr_request *req = PyMem_Calloc((size_t)n + 1, sizeof *req);
    multi_slot *slot = PyMem_Calloc((size_t)n + 1, sizeof *slot);
    PyObject **owner = PyMem_Calloc((size_t)n + 1, sizeof *owner);
    PyObject *out = NULL;
    if (req == NULL || slot == NULL || owner == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    uint32_t fl = 0;
    bool fixed_flags = flags != NULL && flags != Py_None;
    if (fixed_flags) {
        unsigned long f = PyLong_AsUnsignedLong(flags);
        if (PyErr_Occurred() || f > UINT32_MAX) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "flags: an int from 0 to 2**32 - 1");
            goto done;
        }
        fl = (uint32_t)f;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PyList_GET_ITEM(items, i), *key = PyTuple_GET_ITEM(it, 0), *ref;
        const char *kp, *vp;
        Py_ssize_t kl, vl;
        if (key_bytes(key, &kp, &kl, &ref) != 0 || check_key(c, key, kp, (size_t)kl) != 0 ||
            value_bytes(c, key, PyTuple_GET_ITEM(it, 1), &vp, &vl, &req[i].flags,
                        &owner[i]) != 0)
            goto done;
        size_t vmax = c->opts.max_value_size != 0 ? c->opts.max_value_size : 1048576;
        if ((size_t)vl > vmax) {
            PyErr_Format(TooBigError, "the value of %.100R is %zd bytes, over max_value_size "
                                      "(%zu): nothing was sent", key, vl, vmax);
            goto done;
        }
        req[i].op = MCR_OP_SET;
        req[i].key = kp;
        req[i].key_len = (size_t)kl;
        req[i].value = vp;
        req[i].value_len = (size_t)vl;
        req[i].exptime = exptime;
        if (fixed_flags)
            req[i].flags = fl;
    }
    if (run_all(c, req, slot, n) != 0)
        goto done;
    out = PyList_New(0);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++)
        if ((slot[i].status != MCR_OK || slot[i].reply != MCR_REPLY_STORED) &&
            PyList_Append(out, PyTuple_GET_ITEM(PyList_GET_ITEM(items, i), 0)) != 0)
            Py_CLEAR(out);
done:
    for (Py_ssize_t i = 0; owner != NULL && i < n; i++)
        Py_XDECREF(owner[i]);
    PyMem_Free(owner);
    PyMem_Free(req);
    PyMem_Free(slot);
    Py_DECREF(items);
    return out;
}

/* delete_many(keys): True; a server's error raises (the first met). */
static PyObject *Client_delete_many(Client *c, PyObject *args, PyObject *kw)
{
    static char *names[] = {"keys", "noreply", NULL};
    PyObject *keys, *noreply = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:delete_many", names, &keys, &noreply))
        return NULL;
    if (ready(c) != 0)
        return NULL;
    keyset k;
    if (keyset_of(keys, &k) != 0)
        return NULL;
    mcr_request *req = PyMem_Calloc((size_t)k.n + 1, sizeof *req);
    multi_slot *slot = PyMem_Calloc((size_t)k.n + 1, sizeof *slot);
    PyObject *out = NULL;
    if (req == NULL || slot == NULL) {
        PyErr_NoMemory();
    } else {
        for (Py_ssize_t i = 0; i < k.n; i++)
            if (check_key(c, PySequence_Fast_GET_ITEM(k.seq, i), k.p[i], k.len[i]) != 0)
                goto out;
        for (Py_ssize_t i = 0; i < k.n; i++) {
            req[i].op = MCR_OP_DELETE;
            req[i].key = k.p[i];
            req[i].key_len = k.len[i];
        }
        if (run_all(c, req, slot, k.n) == 0) {
            out = Py_NewRef(Py_True);
            for (Py_ssize_t i = 0; i < k.n; i++)
                if (slot[i].status != MCR_OK) {
                    Py_CLEAR(out);
                    raise_status(slot[i].status, slot[i].message);
                    break;
                }
        }
    }
out:
    PyMem_Free(req);
    PyMem_Free(slot);
    keyset_clear(&k);
    return out;
}

/* ------------------------------------------------------------ placement */

static PyObject *route_text(const mcr_route *r)
{
    return strchr(r->host, ':') != NULL ? PyUnicode_FromFormat("[%s]:%d", r->host, r->port)
                                        : PyUnicode_FromFormat("%s:%d", r->host, r->port);
}

/* locate(key): "host:port" of the server that owns the key now, as
 * `mcroute locate` prints it. */
static PyObject *Client_locate(Client *c, PyObject *key)
{
    if (ready(c) != 0)
        return NULL;
    const char *p;
    Py_ssize_t len;
    PyObject *ref;
    if (key_bytes(key, &p, &len, &ref) != 0)
        return NULL;
    mcr_route r;
    int rc = mcr_router_locate(c->router, p, (size_t)len, &r);
    if (rc != MCR_OK)
        return raise_status(rc, "the router holds no servers yet");
    return route_text(&r);
}

static PyObject *Client_locate_many(Client *c, PyObject *keys)
{
    if (ready(c) != 0)
        return NULL;
    keyset k;
    if (keyset_of(keys, &k) != 0)
        return NULL;
    PyObject *out = PyList_New(k.n);
    for (Py_ssize_t i = 0; out != NULL && i < k.n; i++) {
        mcr_route r;
        int rc = mcr_router_locate(c->router, k.p[i], k.len[i], &r);
        PyObject *s = rc == MCR_OK ? route_text(&r)
                                   : raise_status(rc, "the router holds no servers yet");
        if (s == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, i, s);
    }
    keyset_clear(&k);
    return out;
}

/* servers(): the ids of the servers of the current snapshot, in order. */
static PyObject *Client_servers(Client *c, PyObject *unused)
{
    (void)unused;
    if (ready(c) != 0)
        return NULL;
    mcr_snapshot *s = mcr_router_current(c->router);
    if (s == NULL)
        return PyList_New(0);
    size_t n = mcr_snapshot_server_count(s);
    PyObject *out = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; out != NULL && i < n; i++) {
        mcr_server_desc d;
        PyObject *id = mcr_snapshot_server(s, i, &d) == MCR_OK ? PyUnicode_FromString(d.id)
                                                               : NULL;
        if (id == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(Error, "a server of the snapshot cannot be read");
            Py_CLEAR(out);
        } else {
            PyList_SET_ITEM(out, (Py_ssize_t)i, id);
        }
    }
    mcr_snapshot_unref(s);
    return out;
}

/* stats(*args): {server id: {name: value}} of every server of the current
 * snapshot ("stats" with the group given, e.g. "slabs"); values are str
 * as the server sent them. */
static PyObject *Client_stats(Client *c, PyObject *args)
{
    const char *group = NULL;
    if (!PyArg_ParseTuple(args, "|z:stats", &group))
        return NULL;
    PyObject *ids = Client_servers(c, NULL);
    if (ids == NULL)
        return NULL;
    PyObject *out = PyDict_New();
    for (Py_ssize_t i = 0; out != NULL && i < PyList_GET_SIZE(ids); i++) {
        PyObject *id = PyList_GET_ITEM(ids, i);
        mcr_request req = {.op = MCR_OP_STATS, .server = PyUnicode_AsUTF8(id)};
        if (group != NULL) {
            req.key = group;
            req.key_len = strlen(group);
        }
        mcr_owned_result r;
        PyObject *d = NULL;
        if (run(c, &req, &r) == 0) {
            d = PyDict_New();
            char *line = r.value, *end = r.value != NULL ? r.value + r.value_len : NULL;
            while (d != NULL && line != NULL && line < end) {
                char *nl = memchr(line, '\n', (size_t)(end - line));
                char *stop = nl != NULL ? nl : end;
                char *sp = memchr(line, ' ', (size_t)(stop - line));
                if (sp != NULL) {
                    PyObject *k = PyUnicode_FromStringAndSize(line, sp - line),
                             *v = PyUnicode_FromStringAndSize(sp + 1, stop - sp - 1);
                    if (k == NULL || v == NULL || PyDict_SetItem(d, k, v) != 0)
                        Py_CLEAR(d);
                    Py_XDECREF(k);
                    Py_XDECREF(v);
                }
                line = stop + 1;
            }
            mcr_owned_result_clear(&r);
        }
        if (d == NULL || PyDict_SetItem(out, id, d) != 0)
            Py_CLEAR(out);
        Py_XDECREF(d);
    }
    Py_DECREF(ids);
    return out;
}

/* flush_all(delay=0): every server of the current snapshot flushed (after
 * `delay` seconds); True, or the first server's error raised (the others
 * are still asked). */
static PyObject *Client_flush_all(Client *c, PyObject *args, PyObject *kw)
{
    static char *names[] = {"delay", "noreply", NULL};
    PyObject *delay = NULL, *noreply = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:flush_all", names, &delay, &noreply))
        return NULL;
    int64_t d;
    if (expire_of(delay, &d) != 0)
        return NULL;
    PyObject *ids = Client_servers(c, NULL);
    if (ids == NULL)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(ids);
    mcr_request *req = PyMem_Calloc((size_t)n + 1, sizeof *req);
    multi_slot *slot = PyMem_Calloc((size_t)n + 1, sizeof *slot);
    PyObject *out = NULL;
    if (req == NULL || slot == NULL) {
        PyErr_NoMemory();
    } else {
        for (Py_ssize_t i = 0; i < n; i++) {
            req[i].op = MCR_OP_FLUSH_ALL;
            req[i].exptime = d;
            req[i].server = PyUnicode_AsUTF8(PyList_GET_ITEM(ids, i));
        }
        if (run_all(c, req, slot, n) == 0) {
            out = Py_NewRef(Py_True);
            for (Py_ssize_t i = 0; i < n; i++)
                if (slot[i].status != MCR_OK) {
                    Py_CLEAR(out);
                    raise_status(slot[i].status, slot[i].message);
                    break;
                }
        }
    }
    PyMem_Free(req);
    PyMem_Free(slot);
    Py_DECREF(ids);
    return out;
}

/* epoch(): the epoch of the snapshot the client routes by. */
static PyObject *Client_epoch(Client *c, PyObject *unused)
{
    (void)unused;
    if (ready(c) != 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(mcr_router_epoch(c->router));
}

/* close(): the connections closed and everything freed; calls after it
 * raise. */
static PyObject *Client_close(Client *c, PyObject *unused)
{
    (void)unused;
    if (c->busy) {
        PyErr_SetString(Error, "mcroute.Client closed while another thread uses it");
        return NULL;
    }
    if (c->pid == getpid())
        teardown(c);
    c->pool = NULL;
    c->pid = getpid();
    Py_RETURN_NONE;
}

static PyMethodDef Client_methods[] = {
    {"get", (PyCFunction)(void (*)(void))Client_get, METH_VARARGS | METH_KEYWORDS,
     "get(key, default=None): the value, or default when the key is not there."},
    {"gets", (PyCFunction)(void (*)(void))Client_gets, METH_VARARGS | METH_KEYWORDS,
     "gets(key, default=None, cas_default=None): (value, cas)."},
    {"get_many", (PyCFunction)(void (*)(void))Client_get_many, METH_VARARGS | METH_KEYWORDS,
     "get_many(keys): {key: value} of the keys found."},
    {"gets_many", (PyCFunction)(void (*)(void))Client_gets_many, METH_VARARGS | METH_KEYWORDS,
     "gets_many(keys): {key: (value, cas)} of the keys found."},
    {"set", (PyCFunction)(void (*)(void))Client_set, METH_VARARGS | METH_KEYWORDS,
     "set(key, value, expire=0, noreply=None, flags=None): True."},
    {"set_many", (PyCFunction)(void (*)(void))Client_set_many, METH_VARARGS | METH_KEYWORDS,
     "set_many(values, expire=0, noreply=None, flags=None): the keys not stored."},
    {"add", (PyCFunction)(void (*)(void))Client_add, METH_VARARGS | METH_KEYWORDS,
     "add(key, value, expire=0): True when stored, False when the key exists."},
    {"replace", (PyCFunction)(void (*)(void))Client_replace, METH_VARARGS | METH_KEYWORDS,
     "replace(key, value, expire=0): True when stored, False when the key is missing."},
    {"append", (PyCFunction)(void (*)(void))Client_append, METH_VARARGS | METH_KEYWORDS,
     "append(key, value): True when stored, False when the key is missing."},
    {"prepend", (PyCFunction)(void (*)(void))Client_prepend, METH_VARARGS | METH_KEYWORDS,
     "prepend(key, value): True when stored, False when the key is missing."},
    {"cas", (PyCFunction)(void (*)(void))Client_cas, METH_VARARGS | METH_KEYWORDS,
     "cas(key, value, cas, expire=0): True stored, False changed since, None missing."},
    {"delete", (PyCFunction)(void (*)(void))Client_delete, METH_VARARGS | METH_KEYWORDS,
     "delete(key): True when deleted, False when it was not there."},
    {"delete_many", (PyCFunction)(void (*)(void))Client_delete_many,
     METH_VARARGS | METH_KEYWORDS, "delete_many(keys): True."},
    {"incr", (PyCFunction)(void (*)(void))Client_incr, METH_VARARGS | METH_KEYWORDS,
     "incr(key, value=1): the new value, or None when the key is missing."},
    {"decr", (PyCFunction)(void (*)(void))Client_decr, METH_VARARGS | METH_KEYWORDS,
     "decr(key, value=1): the new value (not below 0), or None when missing."},
    {"touch", (PyCFunction)(void (*)(void))Client_touch, METH_VARARGS | METH_KEYWORDS,
     "touch(key, expire=0): True when touched, False when missing."},
    {"stats", (PyCFunction)Client_stats, METH_VARARGS,
     "stats(group=None): {server: {name: value}}."},
    {"locate", (PyCFunction)Client_locate, METH_O, "locate(key): \"host:port\" of its owner."},
    {"locate_many", (PyCFunction)Client_locate_many, METH_O,
     "locate_many(keys): [\"host:port\", ...] of their owners."},
    {"servers", (PyCFunction)Client_servers, METH_NOARGS,
     "servers(): the ids of the current snapshot's servers."},
    {"flush_all", (PyCFunction)(void (*)(void))Client_flush_all, METH_VARARGS | METH_KEYWORDS,
     "flush_all(delay=0): flush every server; True."},
    {"epoch", (PyCFunction)Client_epoch, METH_NOARGS,
     "epoch(): the epoch of the snapshot routed by."},
    {"close", (PyCFunction)Client_close, METH_NOARGS, "close(): close the connections."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject ClientType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mcroute._mcroute.Client",
    .tp_doc = "A memcached client routed by mcroute (see help(mcroute)).",
    .tp_basicsize = sizeof(Client),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Client_init,
    .tp_dealloc = (destructor)Client_dealloc,
    .tp_methods = Client_methods,
};

/* ------------------------------------------------------------ module */

static PyObject *new_exc(PyObject *m, const char *name, PyObject *bases, const char *doc)
{
    char full[96];
    snprintf(full, sizeof full, "mcroute.%s", name);
    PyObject *e = PyErr_NewExceptionWithDoc(full, doc, bases, NULL);
    if (e == NULL || PyModule_AddObjectRef(m, name, e) != 0) {
        Py_XDECREF(e);
        return NULL;
    }
    return e;
}

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "mcroute._mcroute",
                                    "The C half of the mcroute package.", -1, NULL,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__mcroute(void); /* the one symbol the module exports */

PyMODINIT_FUNC PyInit__mcroute(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL || PyType_Ready(&ClientType) < 0)
        return NULL;
    if (PyModule_AddObjectRef(m, "Client", (PyObject *)&ClientType) != 0)
        return NULL;
    PyObject *b;
    if ((Error = new_exc(m, "Error", NULL, "Every error of mcroute.")) == NULL)
        return NULL;
    if ((b = PyTuple_Pack(2, Error, PyExc_ValueError)) == NULL)
        return NULL;
    ConfigError = new_exc(m, "ConfigError", b, "Servers, a placement or an option refused.");
    IllegalKeyError = new_exc(m, "IllegalKeyError", b,
                              "A key empty, too long, or with a space or control byte.");
    TooBigError = new_exc(m, "TooBigError", b, "A value over the client's max_value_size.");
    Py_DECREF(b);
    ServerError = new_exc(m, "ServerError", Error,
                          "A server failed a request (its error, a lost connection).");
    if (ConfigError == NULL || IllegalKeyError == NULL || TooBigError == NULL ||
        ServerError == NULL)
        return NULL;
    if ((b = PyTuple_Pack(2, ServerError, PyExc_ConnectionError)) == NULL)
        return NULL;
    ConnectionError_ = new_exc(m, "ConnectionError", b,
                               "A server refused, reset or closed the connection.");
    ServerDown = new_exc(m, "ServerDown", b,
                         "A server is down for this client (its failure policy).");
    Py_DECREF(b);
    if ((b = PyTuple_Pack(2, ServerError, PyExc_TimeoutError)) == NULL)
        return NULL;
    TimeoutError_ = new_exc(m, "TimeoutError", b, "No connection or no reply in time.");
    Py_DECREF(b);
    ProtocolError = new_exc(m, "ProtocolError", ServerError,
                            "A reply that does not fit its request.");
    if (ConnectionError_ == NULL || ServerDown == NULL || TimeoutError_ == NULL ||
        ProtocolError == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "KEY_MAX", MCR_KEY_MAX) != 0)
        return NULL;
    return m;
}
