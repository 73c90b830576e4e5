/* SPDX-License-Identifier: BSD-3-Clause */
/* many.c: the calls on many keys or servers (get_many, gets_many, set_many, delete_many, flush_all): the requests submitted at once, then the loop run until all are answered. */
#include "pyclient.h" /* first: Python.h before the system headers */

#include <string.h>

/* One key's outcome in a multi-get. */
typedef struct mget_slot {
    int status;         /* MCR_OK: hit or miss as `hit` says */
    bool hit;
    size_t off;         /* the value: at mget_call.buf + off */
    size_t value_len;
    uint32_t flags;
    uint64_t cas;
} mget_slot;

/* A multi-get's results between two passes of the loop: the keys answered
 * in the order they came (ready[]), their values one after the other in
 * one buffer (a malloc per call, not per key), emptied when the keys
 * answered so far become Python objects. */
typedef struct mget_call {
    mget_slot *slot;
    size_t *ready;      /* the keys' indexes, as they were answered */
    size_t nready;
    char *buf;
    size_t len, cap;
    bool done;          /* the multi-get's done callback ran */
    int status;
    char message[256];
} mget_call;

static void mget_fail(mget_call *m, int status, const char *message)
{
    if (m->status == MCR_OK) {
        m->status = status;
        snprintf(m->message, sizeof m->message, "%s", message != NULL ? message : "");
    }
}

static void mget_key_cb(const mcr_result *res, void *arg)
{
    mget_call *m = arg;
    mget_slot *s = &m->slot[res->index];
    s->status = res->status;
    if (res->status != MCR_OK) {
        mget_fail(m, res->status, res->message);
        return;
    }
    if (res->reply != MCR_REPLY_HIT)
        return;
    if (m->buf == NULL || m->cap - m->len < res->value_len) {
        size_t cap = m->cap ? m->cap : 4096;
        while (cap - m->len < res->value_len)
            cap *= 2;
        char *b = realloc(m->buf, cap);
        if (b == NULL) {
            s->status = MCR_ERR_NOMEM;
            mget_fail(m, MCR_ERR_NOMEM, "out of memory keeping the values");
            return;
        }
        m->buf = b;
        m->cap = cap;
    }
    memcpy(m->buf + m->len, res->value, res->value_len);
    s->off = m->len;
    m->len += res->value_len;
    s->value_len = res->value_len;
    s->flags = res->flags;
    s->cas = res->cas;
    s->hit = true;
    m->ready[m->nready++] = res->index;
}

static void mget_done_cb(const mcr_result *res, void *arg)
{
    (void)res;
    ((mget_call *)arg)->done = true;
}

/* The hits answered since the last pass into `out` (the GIL held), and
 * the buffer emptied for the next pass's values. */
static int mget_convert(Client *c, mget_call *m, const mcpy_keyset *k, mcr_op op,
                        PyObject *out)
{
    for (size_t j = 0; j < m->nready; j++) {
        size_t i = m->ready[j];
        mget_slot *s = &m->slot[i];
        PyObject *key = PyTuple_GetItem(k->seq, (Py_ssize_t)i); /* borrowed */
        PyObject *v = mcpy_value_object(c, key, m->buf + s->off, s->value_len, s->flags);
        if (v != NULL && op == MCR_OP_GETS)
            v = Py_BuildValue("(NK)", v, (unsigned long long)s->cas);
        if (v == NULL || PyDict_SetItem(out, key, v) != 0) {
            Py_XDECREF(v);
            return -1;
        }
        Py_DECREF(v);
    }
    m->nready = 0;
    m->len = 0;
    return 0;
}

/* get_many / gets_many: {key: value} of the keys found (as given: str or
 * bytes). A key the rules refuse raises mcpy_IllegalKeyError before anything is
 * sent; a server's error raises for the first key it failed (the others'
 * values are dropped: pymemcache's rule is to raise too). The values of
 * one server's reply become Python objects while the other servers' are
 * still on their way: the loop runs a pass at a time (the GIL released
 * during each), the objects are made between the passes (at the end with
 * a serializer). */
static PyObject *many(Client *c, PyObject *keys, mcr_op op)
{
    if (mcpy_ready(c) != 0)
        return NULL;
    mcpy_keyset k;
    if (mcpy_keyset_of(keys, &k) != 0)
        return NULL;
    PyObject *out = PyDict_New();
    if (out == NULL || k.n == 0) {
        mcpy_keyset_clear(&k);
        return out;
    }
    mget_call m = {.status = MCR_OK};
    m.slot = calloc((size_t)k.n, sizeof *m.slot);
    m.ready = malloc((size_t)k.n * sizeof *m.ready);
    if (m.slot == NULL || m.ready == NULL) {
        free(m.slot);
        free(m.ready);
        mcpy_keyset_clear(&k);
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    mcr_error err = {0};
    int rc, converted = 0;
    c->busy = true;
    Py_BEGIN_ALLOW_THREADS
    rc = mcr_pool_get_multi(c->pool, op, (const void *const *)k.p, k.len, (size_t)k.n,
                            mget_key_cb, mget_done_cb, &m, &err);
    if (rc == MCR_OK)
        rc = mcr_pool_run_once(c->pool);
    Py_END_ALLOW_THREADS
    /* Between the passes only without a serializer: its deserialize() is
     * the caller's Python code, which could call this client while the
     * call is in progress; with one, all values are made at the end. */
    bool early = c->serde == NULL;
    while (rc == MCR_OK && !m.done) {
        /* a failed conversion stops the objects, not the loop: the
         * requests still refer to m until the done callback */
        if (early && converted == 0 && m.status == MCR_OK) {
            if (mget_convert(c, &m, &k, op, out) != 0)
                converted = -1;
        }
        if (early) {
            m.nready = 0;
            m.len = 0;
        }
        Py_BEGIN_ALLOW_THREADS
        rc = mcr_pool_run_once(c->pool);
        Py_END_ALLOW_THREADS
    }
    c->busy = false;
    if (rc != MCR_OK) {
        mcpy_raise_status(rc, err.message);
    } else if (converted != 0) {
        if (m.status != MCR_OK) { /* the server's error, rather than the object's */
            PyErr_Clear();
            mcpy_raise_status(m.status, m.message);
        }
        rc = -1;
    } else if (m.status != MCR_OK) {
        mcpy_raise_status(m.status, m.message);
    } else if (mget_convert(c, &m, &k, op, out) != 0) {
        rc = -1;
    }
    free(m.buf);
    free(m.slot);
    free(m.ready);
    mcpy_keyset_clear(&k);
    if (rc != MCR_OK || m.status != MCR_OK) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

PyObject *Client_get_many(Client *c, PyObject *args, PyObject *kw)
{
    static char *names[] = {"keys", NULL};
    PyObject *keys;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:get_many", names, &keys))
        return NULL;
    return many(c, keys, MCR_OP_GET);
}

PyObject *Client_gets_many(Client *c, PyObject *args, PyObject *kw)
{
    static char *names[] = {"keys", NULL};
    PyObject *keys;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:gets_many", names, &keys))
        return NULL;
    return many(c, keys, MCR_OP_GETS);
}

static void multi_cb(const mcr_result *res, void *arg)
{
    mcpy_slot *s = arg;
    s->status = res->status;
    s->reply = res->reply;
    if (res->status != MCR_OK)
        snprintf(s->message, sizeof s->message, "%s", res->message ? res->message : "");
}

/* Submit the n requests at once and wait for all: the slots filled. On a
 * submission error, the requests submitted before it are waited for and
 * -1 returned with the exception of the refused one. */
int mcpy_run_all(Client *c, const mcr_request *req, mcpy_slot *slot, Py_ssize_t n)
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
        mcpy_raise_status(rc, err.message);
        return -1;
    }
    return 0;
}

/* The i-th (key, value) of a mapping's items (borrowed from `items`):
 * a dict's are pairs, another mapping's items() may give anything. */
static int item_pair(PyObject *items, Py_ssize_t i, PyObject **key, PyObject **value)
{
    PyObject *it = PyList_GetItem(items, i);
    if (it == NULL)
        return -1;
    if (!PyTuple_Check(it) || PyTuple_Size(it) != 2) {
        PyErr_Format(PyExc_TypeError, "values: item %zd of items() is %.100R, not a "
                                      "(key, value) pair", i, it);
        return -1;
    }
    *key = PyTuple_GetItem(it, 0);
    *value = PyTuple_GetItem(it, 1);
    return 0;
}

/* set_many({key: value}, expire=0): the keys that were not stored (a
 * server's error for them included), as pymemcache returns them. A bad key
 * or value raises before anything is sent. */
PyObject *Client_set_many(Client *c, PyObject *args, PyObject *kw)
{
    static char *names[] = {"values", "expire", "noreply", "flags", NULL};
    PyObject *values, *expire = NULL, *noreply = NULL, *flags = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OOO:set_many", names, &values, &expire,
                                     &noreply, &flags))
        return NULL;
    int64_t exptime;
    if (mcpy_ready(c) != 0 || mcpy_expire_of(expire, &exptime) != 0)
        return NULL;
    PyObject *items = PyMapping_Items(values);
    if (items == NULL)
        return NULL;
    Py_ssize_t n = PyList_Size(items); /* a list: PyMapping_Items makes one */
    mcr_request *req = PyMem_Calloc((size_t)n + 1, sizeof *req);
    mcpy_slot *slot = PyMem_Calloc((size_t)n + 1, sizeof *slot);
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
        PyObject *key, *value, *ref;
        const char *kp, *vp;
        Py_ssize_t kl, vl;
        if (item_pair(items, i, &key, &value) != 0 || mcpy_key_bytes(key, &kp, &kl, &ref) != 0 ||
            mcpy_check_key(c, key, kp, (size_t)kl) != 0 ||
            mcpy_value_bytes(c, key, value, &vp, &vl, &req[i].flags, &owner[i]) != 0)
            goto done;
        size_t vmax = c->opts.max_value_size != 0 ? c->opts.max_value_size : 1048576;
        if ((size_t)vl > vmax) {
            PyErr_Format(mcpy_TooBigError, "the value of %.100R is %zd bytes, over max_value_size "
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
    if (mcpy_run_all(c, req, slot, n) != 0)
        goto done;
    out = PyList_New(0);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        PyObject *key, *value;
        if ((slot[i].status != MCR_OK || slot[i].reply != MCR_REPLY_STORED) &&
            (item_pair(items, i, &key, &value) != 0 || PyList_Append(out, key) != 0))
            Py_CLEAR(out);
    }
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
PyObject *Client_delete_many(Client *c, PyObject *args, PyObject *kw)
{
    static char *names[] = {"keys", "noreply", NULL};
    PyObject *keys, *noreply = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:delete_many", names, &keys, &noreply))
        return NULL;
    if (mcpy_ready(c) != 0)
        return NULL;
    mcpy_keyset k;
    if (mcpy_keyset_of(keys, &k) != 0)
        return NULL;
    mcr_request *req = PyMem_Calloc((size_t)k.n + 1, sizeof *req);
    mcpy_slot *slot = PyMem_Calloc((size_t)k.n + 1, sizeof *slot);
    PyObject *out = NULL;
    if (req == NULL || slot == NULL) {
        PyErr_NoMemory();
    } else {
        for (Py_ssize_t i = 0; i < k.n; i++)
            if (mcpy_check_key(c, PyTuple_GetItem(k.seq, i), k.p[i], k.len[i]) != 0)
                goto out;
        for (Py_ssize_t i = 0; i < k.n; i++) {
            req[i].op = MCR_OP_DELETE;
            req[i].key = k.p[i];
            req[i].key_len = k.len[i];
        }
        if (mcpy_run_all(c, req, slot, k.n) == 0) {
            out = Py_NewRef(Py_True);
            for (Py_ssize_t i = 0; i < k.n; i++)
                if (slot[i].status != MCR_OK) {
                    Py_CLEAR(out);
                    mcpy_raise_status(slot[i].status, slot[i].message);
                    break;
                }
        }
    }
out:
    PyMem_Free(req);
    PyMem_Free(slot);
    mcpy_keyset_clear(&k);
    return out;
}

/* flush_all(delay=0): every server of the current snapshot flushed (after
 * `delay` seconds); True, or the first server's error raised (the others
 * are still asked). */
PyObject *Client_flush_all(Client *c, PyObject *args, PyObject *kw)
{
    static char *names[] = {"delay", "noreply", NULL};
    PyObject *delay = NULL, *noreply = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:flush_all", names, &delay, &noreply))
        return NULL;
    int64_t d;
    if (mcpy_expire_of(delay, &d) != 0)
        return NULL;
    PyObject *ids = Client_servers(c, NULL);
    if (ids == NULL)
        return NULL;
    Py_ssize_t n = PyList_Size(ids);
    mcr_request *req = PyMem_Calloc((size_t)n + 1, sizeof *req);
    mcpy_slot *slot = PyMem_Calloc((size_t)n + 1, sizeof *slot);
    PyObject *out = NULL;
    if (req == NULL || slot == NULL) {
        PyErr_NoMemory();
    } else {
        bool ok = true;
        for (Py_ssize_t i = 0; ok && i < n; i++) {
            req[i].op = MCR_OP_FLUSH_ALL;
            req[i].exptime = d;
            /* borrowed from our own list, which lives until the end */
            req[i].server = PyUnicode_AsUTF8AndSize(PyList_GetItem(ids, i), NULL);
            ok = req[i].server != NULL;
        }
        if (ok && mcpy_run_all(c, req, slot, n) == 0) {
            out = Py_NewRef(Py_True);
            for (Py_ssize_t i = 0; i < n; i++)
                if (slot[i].status != MCR_OK) {
                    Py_CLEAR(out);
                    mcpy_raise_status(slot[i].status, slot[i].message);
                    break;
                }
        }
    }
    PyMem_Free(req);
    PyMem_Free(slot);
    Py_DECREF(ids);
    return out;
}
