/* SPDX-License-Identifier: BSD-3-Clause */
/* client.c: a Client made from its source (servers, a server file, a snapshot file followed as it changes, a host's state, an etcd pool) and its pool options; made again in a forked child; closed. */
#include "pyclient.h" /* first: Python.h before the system headers */

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include <event2/event.h>

#include "mcroute_state.h"

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
    if (rc == MCR_OK) /* the base is the pool's alone: no re-entry probe per call */
        rc = mcr_pool_set_own_loop(c->pool, 1);
    c->forks = atomic_load_explicit(&mcpy_forks, memory_order_relaxed);
    return rc;
}

/* Free what build() made (in the process that made it). */
void mcpy_teardown(Client *c)
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
_Atomic unsigned long mcpy_forks;

static void after_fork_child(void)
{
    atomic_fetch_add_explicit(&mcpy_forks, 1, memory_order_relaxed);
}

int mcpy_fork_init(void)
{
    return pthread_atfork(NULL, NULL, after_fork_child) == 0 ? 0 : -1;
}

int mcpy_ready(Client *c)
{
    if (c->busy) {
        PyErr_SetString(mcpy_Error, "mcroute.Client used by two threads at once: give each thread "
                               "its own client, or hold a lock around its calls");
        return -1;
    }
    if (c->closed) {
        PyErr_SetString(mcpy_Error, "mcroute.Client is closed");
        return -1;
    }
    /* a fork since the client was made (counted by the child's atfork
     * handler: no getpid() per call), and this process is the child */
    if (c->forks != atomic_load_explicit(&mcpy_forks, memory_order_relaxed) &&
        c->pid != getpid()) {
        c->pool = NULL; /* the parent's, abandoned */
        c->base = NULL;
        c->router = NULL;
        c->fleet = NULL;
        mcr_error err = {0};
        int rc = build(c, &err);
        if (rc != MCR_OK) {
            mcpy_teardown(c);
            mcpy_raise_status(rc, err.message);
            return -1;
        }
    }
    if (c->src == SRC_SNAPSHOT)
        return follow_snapshot(c);
    return 0;
}

void Client_dealloc(Client *c)
{
    if (c->pid == getpid())
        mcpy_teardown(c);
    free(c->arg);
    free(c->pool_name);
    free(c->mode);
    free(c->client);
    free(c->hash);
    free(c->key_prefix);
    Py_XDECREF(c->serde);
    /* a heap type (the limited API has no static one): its instances hold
     * a reference to it, a subclass's too, given back here */
    PyTypeObject *tp = Py_TYPE((PyObject *)c);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(c);
    Py_DECREF(tp);
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
        PyErr_Format(mcpy_ConfigError, "%s: %R seconds is not a timeout (above 0, at most a day)",
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
        const char *s = PyUnicode_AsUTF8AndSize(v, NULL);
        return s != NULL ? dup_or_null(s) : NULL;
    }
    PyObject *seq = mcpy_tuple_of(v, "servers: a list of \"host:port\" strings, or one "
                                     "comma-separated string");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PyTuple_Size(seq);
    size_t cap = 1, len = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PyTuple_GetItem(seq, i);
        if (!PyUnicode_Check(it)) {
            PyErr_Format(mcpy_ConfigError, "servers[%zd]: %R is not a string", i, it);
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
        const char *s = PyUnicode_AsUTF8AndSize(PyTuple_GetItem(seq, i), &l);
        if (memchr(s, ',', (size_t)l) != NULL) {
            PyErr_Format(mcpy_ConfigError, "servers[%zd]: \"%s\" holds a comma: give one server "
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
        PyErr_Format(mcpy_ConfigError, "%s: %R is not a string", name, v);
        return NULL;
    }
    return PyUnicode_AsUTF8AndSize(v, NULL);
}

int Client_init(Client *c, PyObject *args, PyObject *kw)
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
        PyErr_SetString(mcpy_Error, "mcroute.Client is initialised once");
        return -1;
    }
#define GIVEN(v) ((v) != NULL && (v) != Py_None)
    int nsrc = GIVEN(servers) + GIVEN(server_file) + GIVEN(snapshot) + GIVEN(state) +
               GIVEN(etcd);
    if (nsrc != 1) {
        PyErr_SetString(mcpy_ConfigError,
                        nsrc == 0 ? "no servers: give servers=LIST, server_file=PATH, "
                                    "snapshot=PATH, state=PATH or etcd=URLS with pool=NAME"
                                  : "give only one of servers, server_file, snapshot, state "
                                    "and etcd");
        return -1;
    }
    if (GIVEN(pool) != GIVEN(etcd)) {
        PyErr_SetString(mcpy_ConfigError, GIVEN(etcd) ? "etcd needs pool=NAME (the pool's name in "
                                                   "etcd)"
                                                 : "pool applies only to etcd");
        return -1;
    }
    bool placement = GIVEN(mode) || GIVEN(hash) || GIVEN(client);
    if (placement && !(GIVEN(servers) || GIVEN(server_file))) {
        PyErr_SetString(mcpy_ConfigError, "mode, hash and client apply only to servers and "
                                     "server_file: a snapshot, a state and an etcd pool "
                                     "set the placement");
        return -1;
    }
    if (GIVEN(client) && (GIVEN(mode) || GIVEN(hash))) {
        PyErr_SetString(mcpy_ConfigError, "client sets the mode and the hash: give client or "
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
            const char *s = PyBytes_AsString(path);
            c->arg = s != NULL ? dup_or_null(s) : NULL;
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
            PyErr_Format(mcpy_ConfigError, "policy: unknown policy \"%s\" (fail-fast, eject, "
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
            PyErr_Format(mcpy_ConfigError, "protocol: \"%s\" is neither \"text\" nor \"meta\"", s);
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
            PyErr_Format(mcpy_ConfigError, "max_value_size: %R is not a size from 1 to %u bytes",
                         max_value_size, MCR_POOL_VALUE_MAX);
            return -1;
        }
        c->opts.max_value_size = (size_t)v;
    }
    if (GIVEN(connections)) {
        long v = PyLong_AsLong(connections);
        if (PyErr_Occurred() || v < 1 || v > (long)MCR_POOL_CONNECTIONS_MAX) {
            PyErr_Clear();
            PyErr_Format(mcpy_ConfigError, "connections: %R is not a count from 1 to %u",
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
            PyErr_SetString(mcpy_ConfigError, "serde: an object with serialize(key, value) -> "
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
        mcpy_teardown(c);
        mcpy_raise_status(rc, err.message);
        return -1;
    }
    return 0;
}

/* close(): the connections closed and everything freed; calls after it
 * raise. */
PyObject *Client_close(Client *c, PyObject *unused)
{
    (void)unused;
    if (c->busy) {
        PyErr_SetString(mcpy_Error, "mcroute.Client closed while another thread uses it");
        return NULL;
    }
    if (c->pid == getpid())
        mcpy_teardown(c);
    c->pool = NULL;
    c->closed = true;
    Py_RETURN_NONE;
}
