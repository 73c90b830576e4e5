/* SPDX-License-Identifier: BSD-3-Clause */
/* module.c: the module mcroute._mcroute: its exceptions and the status of the library each stands for, the Client type and its method table. */
#include "pyclient.h" /* first: Python.h before the system headers */

#include <string.h>

PyObject *mcpy_Error, *mcpy_ConfigError, *mcpy_IllegalKeyError, *mcpy_TooBigError, *mcpy_ServerError,
    *mcpy_ConnectionError, *mcpy_TimeoutError, *mcpy_ServerDown, *mcpy_ProtocolError;

/* The exception class for a status of the library. */
static PyObject *exc_of(int status)
{
    switch (status) {
    case MCR_ERR_KEY: return mcpy_IllegalKeyError;
    case MCR_ERR_TOO_BIG: return mcpy_TooBigError;
    case MCR_ERR_TIMEOUT: return mcpy_TimeoutError;
    case MCR_ERR_CONNECT: return mcpy_ConnectionError;
    case MCR_ERR_DOWN: return mcpy_ServerDown;
    case MCR_ERR_PROTOCOL: return mcpy_ProtocolError;
    case MCR_ERR_SERVER: return mcpy_ServerError;
    case MCR_ERR_CANCELLED: return mcpy_ServerError;
    case MCR_ERR_NOMEM: return PyExc_MemoryError;
    case MCR_ERR_SYNTAX:
    case MCR_ERR_RANGE:
    case MCR_ERR_DUPLICATE:
    case MCR_ERR_UNKNOWN:
    case MCR_ERR_TOO_LONG:
    case MCR_ERR_UNSUPPORTED:
    case MCR_ERR_CORRUPT:
    case MCR_ERR_STALE:
    case MCR_ERR_IO: return mcpy_ConfigError;
    default: return mcpy_Error;
    }
}

/* Raise the exception of `status` with the library's message (or its
 * name when there is none); NULL, for return. */
PyObject *mcpy_raise_status(int status, const char *message)
{
    if (status == MCR_ERR_NOMEM)
        return PyErr_NoMemory();
    PyErr_SetString(exc_of(status),
                    message != NULL && message[0] != '\0' ? message : mcr_strerror(status));
    return NULL;
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

/* The Client type, made at module init from its spec: the limited API has
 * no static type objects (their layout is not part of the stable ABI). */
static PyType_Slot Client_slots[] = {
    {Py_tp_doc, (void *)"A memcached client routed by mcroute (see help(mcroute))."},
    {Py_tp_new, (void *)PyType_GenericNew},
    {Py_tp_init, (void *)Client_init},
    {Py_tp_dealloc, (void *)Client_dealloc},
    {Py_tp_methods, Client_methods},
    {0, NULL}};

static PyType_Spec Client_spec = {
    .name = "mcroute._mcroute.Client",
    .basicsize = sizeof(Client),
    /* immutable, as the static type was (PyType_Ready marks static types
     * so): no code replaces Client's methods under the process's others */
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = Client_slots,
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
    if (mcpy_fork_init() != 0) {
        PyErr_SetString(PyExc_OSError, "mcroute: pthread_atfork failed");
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    /* the module keeps the type (nothing else refers to it but its
     * instances, each holding a reference) */
    PyObject *t = PyType_FromModuleAndSpec(m, &Client_spec, NULL);
    if (t == NULL || PyModule_AddObjectRef(m, "Client", t) != 0) {
        Py_XDECREF(t);
        goto fail;
    }
    Py_DECREF(t);
    PyObject *b;
    if ((mcpy_Error = new_exc(m, "Error", NULL, "Every error of mcroute.")) == NULL)
        goto fail;
    if ((b = PyTuple_Pack(2, mcpy_Error, PyExc_ValueError)) == NULL)
        goto fail;
    mcpy_ConfigError = new_exc(m, "ConfigError", b, "Servers, a placement or an option refused.");
    mcpy_IllegalKeyError = new_exc(m, "IllegalKeyError", b,
                              "A key empty, too long, or with a space or control byte.");
    mcpy_TooBigError = new_exc(m, "TooBigError", b, "A value over the client's max_value_size.");
    Py_DECREF(b);
    mcpy_ServerError = new_exc(m, "ServerError", mcpy_Error,
                          "A server failed a request (its error, a lost connection).");
    if (mcpy_ConfigError == NULL || mcpy_IllegalKeyError == NULL || mcpy_TooBigError == NULL ||
        mcpy_ServerError == NULL)
        goto fail;
    if ((b = PyTuple_Pack(2, mcpy_ServerError, PyExc_ConnectionError)) == NULL)
        goto fail;
    mcpy_ConnectionError = new_exc(m, "ConnectionError", b,
                               "A server refused, reset or closed the connection.");
    mcpy_ServerDown = new_exc(m, "ServerDown", b,
                         "A server is down for this client (its failure policy).");
    Py_DECREF(b);
    if ((b = PyTuple_Pack(2, mcpy_ServerError, PyExc_TimeoutError)) == NULL)
        goto fail;
    mcpy_TimeoutError = new_exc(m, "TimeoutError", b, "No connection or no reply in time.");
    Py_DECREF(b);
    mcpy_ProtocolError = new_exc(m, "ProtocolError", mcpy_ServerError,
                            "A reply that does not fit its request.");
    if (mcpy_ConnectionError == NULL || mcpy_ServerDown == NULL || mcpy_TimeoutError == NULL ||
        mcpy_ProtocolError == NULL)
        goto fail;
    if (PyModule_AddIntConstant(m, "KEY_MAX", MCR_KEY_MAX) != 0)
        goto fail;
    return m;
fail: /* the import fails: the module and what it holds go */
    Py_DECREF(m);
    return NULL;
}
