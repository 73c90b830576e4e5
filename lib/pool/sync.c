/* SPDX-License-Identifier: BSD-3-Clause */
/* sync.c: the shorthands of mcr_pool_submit() (get, set, delete) and mcr_pool_exec(), which runs the loop until one request completes. */
#include "pool_internal.h"

#include <stdlib.h>

int mcr_pool_get(mcr_pool *p, const void *key, size_t len, mcr_pool_cb cb, void *arg,
                 mcr_error *err)
{
    mcr_request q;
    memset(&q, 0, sizeof(q));
    q.op = MCR_OP_GET;
    q.key = key;
    q.key_len = len;
    return mcr_pool_submit(p, &q, cb, arg, err);
}

int mcr_pool_set(mcr_pool *p, const void *key, size_t key_len, const void *value,
                 size_t value_len, uint32_t flags, int64_t exptime, mcr_pool_cb cb, void *arg,
                 mcr_error *err)
{
    mcr_request q;
    memset(&q, 0, sizeof(q));
    q.op = MCR_OP_SET;
    q.key = key;
    q.key_len = key_len;
    q.value = value;
    q.value_len = value_len;
    q.flags = flags;
    q.exptime = exptime;
    return mcr_pool_submit(p, &q, cb, arg, err);
}

int mcr_pool_delete(mcr_pool *p, const void *key, size_t len, mcr_pool_cb cb, void *arg,
                    mcr_error *err)
{
    mcr_request q;
    memset(&q, 0, sizeof(q));
    q.op = MCR_OP_DELETE;
    q.key = key;
    q.key_len = len;
    return mcr_pool_submit(p, &q, cb, arg, err);
}

/* ------------------------------------------------------------ synchronous */

typedef struct exec_state {
    int done;
    mcr_owned_result *out;
} exec_state;

static void exec_cb(const mcr_result *res, void *arg)
{
    exec_state *st = arg;
    mcr_owned_result *o = st->out;
    o->status = res->status;
    o->reply = res->reply;
    o->flags = res->flags;
    o->cas = res->cas;
    o->number = res->number;
    o->epoch = res->epoch;
    snprintf(o->server, sizeof(o->server), "%s", res->server ? res->server : "");
    snprintf(o->message, sizeof(o->message), "%s", res->message ? res->message : "");
    if (res->value != NULL) {
        o->value = malloc(res->value_len + 1);
        if (o->value == NULL) {
            o->status = MCR_ERR_NOMEM;
            snprintf(o->message, sizeof(o->message), "out of memory copying the value");
        } else {
            memcpy(o->value, res->value, res->value_len);
            o->value[res->value_len] = '\0';
            o->value_len = res->value_len;
        }
    }
    st->done = 1;
}

int mcr_pool_exec(mcr_pool *p, const mcr_request *q, mcr_owned_result *out)
{
    if (out == NULL)
        return MCR_ERR_INVALID;
    memset(out, 0, sizeof(*out));
    if (q == NULL) {
        out->status = MCR_ERR_INVALID;
        snprintf(out->message, sizeof(out->message), "mcr_pool_exec: NULL request");
        return MCR_ERR_INVALID;
    }
    if (p == NULL || mcr__pool_inside_loop(p)) {
        out->status = MCR_ERR_INVALID;
        snprintf(out->message, sizeof(out->message), "mcr_pool_exec: %s",
                 p == NULL ? "NULL pool" : "called from inside the pool's event loop");
        return MCR_ERR_INVALID;
    }
    exec_state st = { 0, out };
    mcr_error e;
    memset(&e, 0, sizeof(e));
    int rc = mcr_pool_submit(p, q, exec_cb, &st, &e);
    if (rc != MCR_OK) {
        out->status = rc;
        snprintf(out->message, sizeof(out->message), "%s", e.message);
        return rc;
    }
    mcr__pool_flush_now(p);
    while (!st.done)
        event_base_loop(p->base, EVLOOP_ONCE);
    return out->status;
}

void mcr_owned_result_clear(mcr_owned_result *o)
{
    if (o == NULL)
        return;
    free(o->value);
    memset(o, 0, sizeof(*o));
}
