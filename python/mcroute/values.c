/* SPDX-License-Identifier: BSD-3-Clause */
/* values.c: keys, values and expiry times from Python objects (a serde's included) and back; the key rule checked before a call on many keys sends anything. */
#include "pyclient.h" /* first: Python.h before the system headers */

#include <string.h>

/* The items of `v` in a tuple, as PySequence_Fast (not in the limited API)
 * gives them in a list, with the same TypeError `message` for what is not
 * iterable. A tuple is v itself, a list is copied: the caller's list can
 * then change (in a serde's code, called in the middle of a call) without
 * freeing a key the call still refers to. */
PyObject *mcpy_tuple_of(PyObject *v, const char *message)
{
    if (PyTuple_CheckExact(v) || PyList_CheckExact(v))
        return PySequence_Tuple(v);
    PyObject *it = PyObject_GetIter(v);
    if (it == NULL) {
        if (PyErr_ExceptionMatches(PyExc_TypeError))
            PyErr_SetString(PyExc_TypeError, message);
        return NULL;
    }
    PyObject *t = PySequence_Tuple(it);
    Py_DECREF(it);
    return t;
}

/* The bytes of a bytes object, as *p and *len. */
static int bytes_of(PyObject *b, const char **p, Py_ssize_t *len)
{
    char *s;
    if (PyBytes_AsStringAndSize(b, &s, len) != 0)
        return -1;
    *p = s;
    return 0;
}

/* `exc` raised with `format`, whose one %U is the type's name of `o` (the
 * limited API has no tp_name to read). */
static void raise_type(PyObject *exc, const char *format, PyObject *o)
{
    PyObject *name = PyType_GetName(Py_TYPE(o));
    if (name == NULL)
        return;
    PyErr_Format(exc, format, name);
    Py_DECREF(name);
}

/* A key: str (UTF-8) or bytes. *ref holds what keeps the bytes alive. */
int mcpy_key_bytes(PyObject *key, const char **p, Py_ssize_t *len, PyObject **ref)
{
    *ref = NULL;
    if (PyUnicode_Check(key)) {
        *p = PyUnicode_AsUTF8AndSize(key, len);
        return *p != NULL ? 0 : -1;
    }
    if (PyBytes_Check(key))
        return bytes_of(key, p, len);
    raise_type(mcpy_IllegalKeyError, "a key is str or bytes, not %.80U", key);
    return -1;
}

/* A value to store: through serde.serialize() when the client has one,
 * else bytes (and other buffers), str (UTF-8) or int (decimal) as they
 * are, flags 0. *owner keeps the bytes alive (a new reference). */
int mcpy_value_bytes(Client *c, PyObject *key, PyObject *value, const char **p,
                       Py_ssize_t *len, uint32_t *flags, PyObject **owner)
{
    *owner = NULL;
    *flags = 0;
    PyObject *v = value;
    if (c->serde != NULL) {
        PyObject *r = PyObject_CallMethod(c->serde, "serialize", "OO", key, value);
        if (r == NULL)
            return -1;
        if (!PyTuple_Check(r) || PyTuple_Size(r) != 2) {
            raise_type(PyExc_TypeError, "serde.serialize() returned %.80U, not a tuple "
                                        "(bytes, flags)", r);
            Py_DECREF(r);
            return -1;
        }
        /* a pair: the items are there (borrowed from r) */
        unsigned long f = PyLong_AsUnsignedLong(PyTuple_GetItem(r, 1));
        if (PyErr_Occurred() || f > UINT32_MAX) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "serde.serialize(): flags are an int from 0 "
                                              "to 2**32 - 1");
            Py_DECREF(r);
            return -1;
        }
        *flags = (uint32_t)f;
        v = PyTuple_GetItem(r, 0);
        Py_INCREF(v);
        Py_DECREF(r);
    } else {
        Py_INCREF(v);
    }
    if (PyBytes_Check(v)) {
        if (bytes_of(v, p, len) != 0) {
            Py_DECREF(v);
            return -1;
        }
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
        if (*p == NULL) {
            Py_DECREF(s);
            return -1;
        }
        *owner = s;
        return 0;
    }
    if (PyObject_CheckBuffer(v)) {
        PyObject *b = PyBytes_FromObject(v);
        Py_DECREF(v);
        if (b == NULL)
            return -1;
        if (bytes_of(b, p, len) != 0) {
            Py_DECREF(b);
            return -1;
        }
        *owner = b;
        return 0;
    }
    raise_type(PyExc_TypeError,
               "a value is bytes, str or int without a serde (mcroute.PickleSerde stores "
               "any object), not %.80U", v);
    Py_DECREF(v);
    return -1;
}

/* A value read: through serde.deserialize() when the client has one, else
 * bytes. */
PyObject *mcpy_value_object(Client *c, PyObject *key, const char *p, size_t len,
                              uint32_t flags)
{
    PyObject *b = PyBytes_FromStringAndSize(p, (Py_ssize_t)len);
    if (b == NULL || c->serde == NULL)
        return b;
    PyObject *r = PyObject_CallMethod(c->serde, "deserialize", "OOI", key, b, (unsigned)flags);
    Py_DECREF(b);
    return r;
}

int mcpy_expire_of(PyObject *v, int64_t *out)
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

void mcpy_keyset_clear(mcpy_keyset *k)
{
    Py_XDECREF(k->seq);
    PyMem_Free(k->p);
    PyMem_Free(k->len);
    memset(k, 0, sizeof *k);
}

int mcpy_keyset_of(PyObject *keys, mcpy_keyset *k)
{
    memset(k, 0, sizeof *k);
    k->seq = mcpy_tuple_of(keys, "keys: a list, tuple or other iterable of keys");
    if (k->seq == NULL)
        return -1;
    k->n = PyTuple_Size(k->seq);
    k->p = PyMem_Calloc((size_t)k->n + 1, sizeof *k->p);
    k->len = PyMem_Calloc((size_t)k->n + 1, sizeof *k->len);
    if (k->p == NULL || k->len == NULL) {
        mcpy_keyset_clear(k);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < k->n; i++) {
        PyObject *ref;
        Py_ssize_t l;
        if (mcpy_key_bytes(PyTuple_GetItem(k->seq, i), &k->p[i], &l, &ref) != 0) {
            mcpy_keyset_clear(k);
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
int mcpy_check_key(const Client *c, PyObject *key, const char *p, size_t len)
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
    PyErr_Format(mcpy_IllegalKeyError, "key %.100R %s: nothing was sent", key, why);
    return -1;
}
