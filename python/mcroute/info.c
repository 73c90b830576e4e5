/* SPDX-License-Identifier: BSD-3-Clause */
/* info.c: what a client can tell without changing anything: where keys go (locate), the current servers and epoch, the servers' stats. */
#include "pyclient.h" /* first: Python.h before the system headers */

#include <string.h>

static PyObject *route_text(const mcr_route *r)
{
    return strchr(r->host, ':') != NULL ? PyUnicode_FromFormat("[%s]:%d", r->host, r->port)
                                        : PyUnicode_FromFormat("%s:%d", r->host, r->port);
}

/* locate(key): "host:port" of the server that owns the key now, as
 * `mcroute locate` prints it. */
PyObject *Client_locate(Client *c, PyObject *key)
{
    if (mcpy_ready(c) != 0)
        return NULL;
    const char *p;
    Py_ssize_t len;
    PyObject *ref;
    if (mcpy_key_bytes(key, &p, &len, &ref) != 0)
        return NULL;
    mcr_route r;
    int rc = mcr_router_locate(c->router, p, (size_t)len, &r);
    if (rc != MCR_OK)
        return mcpy_raise_status(rc, "the router holds no servers yet");
    return route_text(&r);
}

PyObject *Client_locate_many(Client *c, PyObject *keys)
{
    if (mcpy_ready(c) != 0)
        return NULL;
    mcpy_keyset k;
    if (mcpy_keyset_of(keys, &k) != 0)
        return NULL;
    PyObject *out = PyList_New(k.n);
    for (Py_ssize_t i = 0; out != NULL && i < k.n; i++) {
        mcr_route r;
        int rc = mcr_router_locate(c->router, k.p[i], k.len[i], &r);
        PyObject *s = rc == MCR_OK ? route_text(&r)
                                   : mcpy_raise_status(rc, "the router holds no servers yet");
        /* PyList_SetItem takes s, even when it fails */
        if (s == NULL || PyList_SetItem(out, i, s) != 0)
            Py_CLEAR(out);
    }
    mcpy_keyset_clear(&k);
    return out;
}

/* servers(): the ids of the servers of the current snapshot, in order. */
PyObject *Client_servers(Client *c, PyObject *unused)
{
    (void)unused;
    if (mcpy_ready(c) != 0)
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
                PyErr_SetString(mcpy_Error, "a server of the snapshot cannot be read");
            Py_CLEAR(out);
        } else if (PyList_SetItem(out, (Py_ssize_t)i, id) != 0) { /* id taken */
            Py_CLEAR(out);
        }
    }
    mcr_snapshot_unref(s);
    return out;
}

/* stats(*args): {server id: {name: value}} of every server of the current
 * snapshot ("stats" with the group given, e.g. "slabs"); values are str
 * as the server sent them. */
PyObject *Client_stats(Client *c, PyObject *args)
{
    const char *group = NULL;
    if (!PyArg_ParseTuple(args, "|z:stats", &group))
        return NULL;
    PyObject *ids = Client_servers(c, NULL);
    if (ids == NULL)
        return NULL;
    PyObject *out = PyDict_New();
    Py_ssize_t n = PyList_Size(ids);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        PyObject *id = PyList_GetItem(ids, i); /* borrowed, from our own list */
        mcr_request req = {.op = MCR_OP_STATS, .server = PyUnicode_AsUTF8AndSize(id, NULL)};
        if (req.server == NULL) {
            Py_CLEAR(out);
            break;
        }
        if (group != NULL) {
            req.key = group;
            req.key_len = strlen(group);
        }
        mcr_owned_result r;
        PyObject *d = NULL;
        if (mcpy_run(c, &req, &r) == 0) {
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

/* epoch(): the epoch of the snapshot the client routes by. */
PyObject *Client_epoch(Client *c, PyObject *unused)
{
    (void)unused;
    if (mcpy_ready(c) != 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(mcr_router_epoch(c->router));
}
