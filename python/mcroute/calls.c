/* SPDX-License-Identifier: BSD-3-Clause */
/* calls.c: the calls on one key (get, gets, set, add, replace, append, prepend, cas, delete, touch, incr, decr), each one request run to its end with the GIL released. */
#include "pyclient.h" /* first: Python.h before the system headers */

#include <string.h>

/* Run `req` to its end with the GIL released: MCR_OK with *out filled, or
 * -1 with an exception set (a submission or request error). Statuses the
 * caller handles itself come back in out->status. */
int mcpy_run(Client *c, const mcr_request *req, mcr_owned_result *out)
{
    int rc;
    c->busy = true;
    Py_BEGIN_ALLOW_THREADS
    rc = mcr_pool_exec(c->pool, req, out);
    Py_END_ALLOW_THREADS
    c->busy = false;
    if (rc != MCR_OK) {
        mcpy_raise_status(rc, out->message);
        mcr_owned_result_clear(out);
        return -1;
    }
    return 0;
}

/* The start of every keyed call: the client ready, the key's bytes. */
int mcpy_keyed(Client *c, PyObject *key, mcr_request *req, PyObject **ref)
{
    if (mcpy_ready(c) != 0)
        return -1;
    const char *p;
    Py_ssize_t len;
    if (mcpy_key_bytes(key, &p, &len, ref) != 0)
        return -1;
    req->key = p;
    req->key_len = (size_t)len;
    return 0;
}

PyObject *Client_get(Client *c, PyObject *args, PyObject *kw)
{
    static char *names[] = {"key", "default", NULL};
    PyObject *key, *dflt = Py_None, *ref;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:get", names, &key, &dflt))
        return NULL;
    mcr_request req = {.op = MCR_OP_GET};
    mcr_owned_result r;
    if (mcpy_keyed(c, key, &req, &ref) != 0 || mcpy_run(c, &req, &r) != 0)
        return NULL;
    PyObject *v;
    if (r.reply == MCR_REPLY_HIT) {
        v = mcpy_value_object(c, key, r.value, r.value_len, r.flags);
    } else {
        Py_INCREF(dflt);
        v = dflt;
    }
    mcr_owned_result_clear(&r);
    return v;
}

PyObject *Client_gets(Client *c, PyObject *args, PyObject *kw)
{
    static char *names[] = {"key", "default", "cas_default", NULL};
    PyObject *key, *dflt = Py_None, *cas_dflt = Py_None, *ref;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OO:gets", names, &key, &dflt, &cas_dflt))
        return NULL;
    mcr_request req = {.op = MCR_OP_GETS};
    mcr_owned_result r;
    if (mcpy_keyed(c, key, &req, &ref) != 0 || mcpy_run(c, &req, &r) != 0)
        return NULL;
    PyObject *out;
    if (r.reply == MCR_REPLY_HIT) {
        PyObject *v = mcpy_value_object(c, key, r.value, r.value_len, r.flags);
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
    if (mcpy_keyed(c, key, &req, &ref) != 0 || mcpy_expire_of(expire, &req.exptime) != 0)
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
    if (mcpy_value_bytes(c, key, value, &p, &len, &req.flags, &owner) != 0)
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
    int rc = mcpy_run(c, &req, &r);
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

PyObject *Client_set(Client *c, PyObject *a, PyObject *k)
{
    return store(c, MCR_OP_SET, a, k, "OO|OOO:set");
}
PyObject *Client_add(Client *c, PyObject *a, PyObject *k)
{
    return store(c, MCR_OP_ADD, a, k, "OO|OOO:add");
}
PyObject *Client_replace(Client *c, PyObject *a, PyObject *k)
{
    return store(c, MCR_OP_REPLACE, a, k, "OO|OOO:replace");
}
PyObject *Client_append(Client *c, PyObject *a, PyObject *k)
{
    return store(c, MCR_OP_APPEND, a, k, "OO|OOO:append");
}
PyObject *Client_prepend(Client *c, PyObject *a, PyObject *k)
{
    return store(c, MCR_OP_PREPEND, a, k, "OO|OOO:prepend");
}
PyObject *Client_cas(Client *c, PyObject *a, PyObject *k)
{
    return store(c, MCR_OP_CAS, a, k, "OOO|OOO:cas");
}

/* delete: True when deleted, False when there was no such key. */
PyObject *Client_delete(Client *c, PyObject *args, PyObject *kw)
{
    static char *names[] = {"key", "noreply", NULL};
    PyObject *key, *noreply = NULL, *ref;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:delete", names, &key, &noreply))
        return NULL;
    mcr_request req = {.op = MCR_OP_DELETE};
    mcr_owned_result r;
    if (mcpy_keyed(c, key, &req, &ref) != 0 || mcpy_run(c, &req, &r) != 0)
        return NULL;
    PyObject *out = r.reply == MCR_REPLY_DELETED ? Py_True : Py_False;
    mcr_owned_result_clear(&r);
    Py_INCREF(out);
    return out;
}

/* touch: True when touched, False when there was no such key. */
PyObject *Client_touch(Client *c, PyObject *args, PyObject *kw)
{
    static char *names[] = {"key", "expire", "noreply", NULL};
    PyObject *key, *expire = NULL, *noreply = NULL, *ref;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OO:touch", names, &key, &expire, &noreply))
        return NULL;
    mcr_request req = {.op = MCR_OP_TOUCH};
    mcr_owned_result r;
    if (mcpy_keyed(c, key, &req, &ref) != 0 || mcpy_expire_of(expire, &req.exptime) != 0 ||
        mcpy_run(c, &req, &r) != 0)
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
    if (mcpy_keyed(c, key, &req, &ref) != 0 || mcpy_run(c, &req, &r) != 0)
        return NULL;
    PyObject *out = r.reply == MCR_REPLY_NUMBER ? PyLong_FromUnsignedLongLong(r.number)
                                                : Py_NewRef(Py_None);
    mcr_owned_result_clear(&r);
    return out;
}

PyObject *Client_incr(Client *c, PyObject *a, PyObject *k)
{
    return counter(c, MCR_OP_INCR, a, k, "O|OO:incr");
}
PyObject *Client_decr(Client *c, PyObject *a, PyObject *k)
{
    return counter(c, MCR_OP_DECR, a, k, "O|OO:decr");
}
