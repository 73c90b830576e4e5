/* SPDX-License-Identifier: BSD-3-Clause */
/* reply.c: the reply to the request at the head of a connection, read line by line and delivered key by key. */
#include "pool_internal.h"

#include <inttypes.h>
#include <stdlib.h>

/* STATS replies are collected whole; more than this is not memcached. */
#define STATS_MAX (4u << 20)

/* ------------------------------------------------------------ reply parsing */

static int key_matches(const mcr_pool *p, const mcr__pool_req *r, uint32_t j, const char *k,
                       size_t kl)
{
    return kl == p->prefix_len + r->klens[j] &&
           (p->prefix_len == 0 || memcmp(k, p->prefix, p->prefix_len) == 0) &&
           memcmp(k + p->prefix_len, r->keys[j], r->klens[j]) == 0;
}

/* Whether key k was answered already on r's line (r is its first request
 * still in flight): a second VALUE for it. */
static int line_answered(const mcr_pool *p, const mcr__pool_req *r, const char *k, size_t kl)
{
    for (const mcr__pool_req *x = r; x != NULL && (x == r || x->joined); x = x->next)
        for (uint32_t j = 0; j < x->cursor; j++)
            if (key_matches(p, x, j, k, kl))
                return 1;
    return 0;
}

static int error_line(const mcr__line *L)
{
    return L->kind == MCR__L_ERROR || L->kind == MCR__L_CLIENT_ERROR ||
           L->kind == MCR__L_SERVER_ERROR;
}

static void error_text(const mcr__line *L, char *msg)
{
    static const char *const w[] = { [MCR__L_ERROR] = "ERROR",
                                     [MCR__L_CLIENT_ERROR] = "CLIENT_ERROR",
                                     [MCR__L_SERVER_ERROR] = "SERVER_ERROR" };
    mcr__set_msg(msg, "%s%s%.*s", w[L->kind], L->text_len ? " " : "", (int)L->text_len,
                 L->text ? L->text : "");
}

static int opaque_is(const mcr__pool_req *r, const mcr__line *L, uint32_t j)
{
    uint32_t o;
    return L->opaque != NULL && mcr__proto_opaque(L->opaque, L->opaque_len, &o) &&
           o == r->opaque + j;
}

/* The status lines that answer a store, delete, touch or arithmetic
 * command, in each protocol. */
static const struct status_rule {
    mcr_op op;                 /* MCR_OP_SET: every store; MCR_OP_INCR: incr and decr */
    mcr__line_kind text, meta;
    mcr_reply reply;
} status_rules[] = {
    { MCR_OP_SET, MCR__L_STORED, MCR__L_HD, MCR_REPLY_STORED },
    { MCR_OP_SET, MCR__L_NOT_STORED, MCR__L_NS, MCR_REPLY_NOT_STORED },
    { MCR_OP_SET, MCR__L_EXISTS, MCR__L_EX, MCR_REPLY_EXISTS },
    { MCR_OP_SET, MCR__L_NOT_FOUND, MCR__L_NF, MCR_REPLY_MISS },
    { MCR_OP_DELETE, MCR__L_DELETED, MCR__L_HD, MCR_REPLY_DELETED },
    { MCR_OP_DELETE, MCR__L_NOT_FOUND, MCR__L_NF, MCR_REPLY_MISS },
    { MCR_OP_DELETE, MCR__L_EXISTS, MCR__L_EX, MCR_REPLY_EXISTS }, /* md C<cas>: changed */
    { MCR_OP_TOUCH, MCR__L_TOUCHED, MCR__L_HD, MCR_REPLY_TOUCHED },
    { MCR_OP_TOUCH, MCR__L_NOT_FOUND, MCR__L_EN, MCR_REPLY_MISS },
    { MCR_OP_INCR, MCR__L_NOT_FOUND, MCR__L_NF, MCR_REPLY_MISS },
};

/* 1 and *out when `kind` answers `op` in that protocol, else 0. */
static int status_reply(mcr_op op, int meta, mcr__line_kind kind, mcr_reply *out)
{
    if (mcr__is_store_op(op))
        op = MCR_OP_SET;
    else if (op == MCR_OP_DECR)
        op = MCR_OP_INCR;
    for (size_t i = 0; i < sizeof(status_rules) / sizeof(status_rules[0]); i++) {
        const struct status_rule *q = &status_rules[i];
        if (q->op == op && (meta ? q->meta : q->text) == kind) {
            *out = q->reply;
            return 1;
        }
    }
    return 0;
}

/* Parse what the head request r expects. 1: r is complete (the caller pops
 * it); 0: more bytes needed; -1: the stream does not fit r (msg says why). */
int mcr__parse_reply(mcr__pool_conn *c, mcr__pool_req *r, mcr__inbuf *in, char *msg)
{
    mcr_pool *p = c->server->pool;
    int meta = p->o.protocol == MCR_PROTO_META || r->force_meta;
    if (r->group_done)
        return 1; /* answered with the request before it on its line */
    for (;;) {
        if (c->skip.left > 0) {
            int sk = mcr__proto_skip_run(&c->skip, in);
            if (sk <= 0) {
                if (sk < 0)
                    mcr__set_msg(msg, "data block not ended by CRLF");
                return sk;
            }
            if (meta && r->nkeys == 1)
                return 1; /* the VA was the whole reply, its key reported */
        }
        const char *line;
        size_t len;
        mcr__line L;
        int rc;
        /* a plain VALUE line framed and read in one pass; any other line
         * found, then read */
        if (!mcr__proto_peek_value(in, &line, &len, &L)) {
            rc = mcr__proto_peek_line(in, &line, &len);
            if (rc == 0)
                return 0;
            if (rc < 0) {
                mcr__set_msg(msg, "reply line over %d bytes", MCR__PROTO_MAX_LINE);
                return -1;
            }
            mcr__proto_parse_line(line, len, &L);
        }
        if (L.kind == MCR__L_BAD) {
            mcr__set_msg(msg, "unexpected reply line \"%.*s\" to %s", (int)(len > 40 ? 40 : len),
                         line, mcr_op_name(r->op));
            return -1;
        }

        if (mcr__is_get_family(r->op)) {
            int single_meta = meta && r->nkeys == 1;
            if ((!meta && L.kind == MCR__L_VALUE) || (meta && L.kind == MCR__L_VA)) {
                mcr__pool_req *g = r;
                uint32_t j;
                if (!meta) {
                    /* the key, in the request the line's last VALUE
                     * answered or a later one on the line (those before it
                     * are all answered: memcached keeps the line's order) */
                    if (r->line_scan != NULL)
                        g = r->line_scan;
                    for (;;) {
                        j = g->cursor;
                        while (j < g->nkeys && !key_matches(p, g, j, L.key, L.key_len))
                            j++;
                        if (j < g->nkeys)
                            break;
                        g = g->next;
                        if (g == NULL || !g->joined) {
                            mcr__set_msg(msg, "VALUE for a key %s: \"%.*s\"",
                                         line_answered(p, r, L.key, L.key_len)
                                             ? "already answered on this line"
                                             : "not asked for (or out of order)",
                                         (int)(L.key_len > 60 ? 60 : L.key_len), L.key);
                            return -1;
                        }
                    }
                } else {
                    uint32_t o = 0;
                    int ours = L.opaque != NULL && mcr__proto_opaque(L.opaque, L.opaque_len, &o);
                    if (!ours || o - r->opaque >= r->nkeys || o - r->opaque < r->cursor) {
                        mcr__set_msg(msg, "VA with an opaque token %s",
                                     ours && o - r->opaque < r->cursor
                                         ? "already answered (or out of order)"
                                         : "not awaited");
                        return -1;
                    }
                    j = o - r->opaque;
                }
                int gets = r->op == MCR_OP_GETS || r->op == MCR_OP_GATS;
                if ((gets && !L.has_cas) || (meta && !L.has_flags)) {
                    mcr__set_msg(msg, "%s without the %s asked for", meta ? "VA" : "VALUE",
                                 gets ? "CAS unique" : "flags");
                    return -1;
                }
                if (L.bytes > MCR_POOL_VALUE_MAX) {
                    mcr__set_msg(msg, "a value of %" PRIu64 " bytes", L.bytes);
                    return -1;
                }
                /* A value over max_value_size fails its key with
                 * MCR_ERR_TOO_BIG and is dropped as it arrives: the
                 * connection stays in step without holding it. */
                int too_big = L.bytes > p->o.max_value_size;
                const char *data = NULL;
                size_t ll = len;
                uint64_t bytes = L.bytes;
                uint32_t flags = L.flags;
                uint64_t cas = L.cas;
                if (!too_big) {
                    rc = mcr__proto_peek_block(in, ll, bytes, &data);
                    if (rc == 0)
                        return 0;
                    if (rc < 0) {
                        mcr__set_msg(msg, "data block not ended by CRLF");
                        return -1;
                    }
                }
                /* keys passed over are misses */
                for (mcr__pool_req *x = r->line_scan != NULL ? r->line_scan : r; x != g;
                     x = x->next) {
                    for (; x->cursor < x->nkeys && !c->dead; x->cursor++)
                        mcr__deliver_simple(p, x, x->cursor, MCR_OK, MCR_REPLY_MISS, NULL);
                    if (c->dead)
                        return 0;
                }
                for (; g->cursor < j && !c->dead; g->cursor++)
                    mcr__deliver_simple(p, g, g->cursor, MCR_OK, MCR_REPLY_MISS, NULL);
                if (c->dead)
                    return 0;
                mcr_result res;
                char big[MCR__MSG_SIZE];
                mcr__result_init(&res, g, j);
                if (too_big) {
                    mcr__set_msg(big,
                                 "%s:%d: a value of %" PRIu64 " bytes, over max_value_size (%zu)",
                                 c->server->host, c->server->port, bytes, p->o.max_value_size);
                    res.status = MCR_ERR_TOO_BIG;
                    res.message = big;
                } else {
                    res.reply = MCR_REPLY_HIT;
                    res.value = data;
                    res.value_len = (size_t)bytes;
                    res.flags = flags;
                    res.cas = cas;
                    if (L.has_ttl)
                        res.ttl = L.ttl;
                }
                g->cursor = j + 1;
                if (!meta)
                    r->line_scan = g;
                mcr__deliver_key(p, g, j, &res);
                if (c->dead)
                    return 0;
                if (too_big) {
                    mcr__inbuf_drain(in, ll + 2);
                    mcr__proto_skip_start(&c->skip, bytes);
                    if (single_meta) {
                        r->status = MCR_ERR_TOO_BIG;
                        memcpy(r->message, big, sizeof(r->message));
                    }
                    continue;
                }
                mcr__inbuf_drain(in, ll + 2 + (size_t)bytes + 2);
                if (single_meta) {
                    r->status = MCR_OK;
                    r->reply = MCR_REPLY_HIT;
                    return 1;
                }
                continue;
            }
            if (single_meta && L.kind == MCR__L_EN) {
                if (!opaque_is(r, &L, 0)) {
                    mcr__set_msg(msg, "EN with an opaque token not awaited");
                    return -1;
                }
                mcr__inbuf_drain(in, len + 2);
                r->status = MCR_OK;
                r->reply = MCR_REPLY_MISS;
                return 1; /* mcr__finish_req reports the miss */
            }
            if (meta && L.kind == MCR__L_EN) {
                /* quiet gets send none; an older server might: a miss,
                 * after which that token is answered */
                uint32_t o;
                if (L.opaque == NULL || !mcr__proto_opaque(L.opaque, L.opaque_len, &o) ||
                    o - r->opaque >= r->nkeys || o - r->opaque < r->cursor) {
                    mcr__set_msg(msg, "EN with an opaque token not awaited");
                    return -1;
                }
                mcr__inbuf_drain(in, len + 2);
                for (; r->cursor <= o - r->opaque && !c->dead; r->cursor++)
                    mcr__deliver_simple(p, r, r->cursor, MCR_OK, MCR_REPLY_MISS, NULL);
                if (c->dead)
                    return 0;
                continue;
            }
            if ((!meta && L.kind == MCR__L_END) || (meta && !single_meta && L.kind == MCR__L_MN)) {
                mcr__inbuf_drain(in, len + 2);
                if (r->failed_batch) {
                    r->status = MCR_ERR_SERVER;
                    return 1; /* the rest fail with the error seen */
                }
                /* the line's END: every key of its requests not seen is a miss */
                for (mcr__pool_req *x = r; x != NULL && (x == r || x->joined); x = x->next) {
                    for (; x->cursor < x->nkeys && !c->dead; x->cursor++)
                        mcr__deliver_simple(p, x, x->cursor, MCR_OK, MCR_REPLY_MISS, NULL);
                    if (c->dead)
                        return 0;
                    x->status = MCR_OK;
                    x->reply = MCR_REPLY_MISS;
                    if (x != r)
                        x->group_done = 1;
                }
                return 1;
            }
            if (error_line(&L)) {
                error_text(&L, r->message);
                mcr__inbuf_drain(in, len + 2);
                if (!meta) {
                    /* the whole line failed */
                    for (mcr__pool_req *x = r->next; x != NULL && x->joined; x = x->next) {
                        x->status = MCR_ERR_SERVER;
                        memcpy(x->message, r->message, sizeof(x->message));
                        x->group_done = 1;
                    }
                }
                if (meta && !single_meta) {
                    /* each quiet mg may answer an error; MN still ends the batch */
                    r->failed_batch = 1;
                    continue;
                }
                r->status = MCR_ERR_SERVER;
                return 1;
            }
            mcr__set_msg(msg, "unexpected reply \"%.*s\" to %s", (int)(len > 40 ? 40 : len), line,
                         mcr_op_name(r->op));
            return -1;
        }

        /* One-line replies (and incr's VA, stats' lines). */
        if (error_line(&L)) {
            error_text(&L, r->message);
            mcr__inbuf_drain(in, len + 2);
            r->status = MCR_ERR_SERVER;
            return 1;
        }
        int ok = 1;
        mcr_reply reply = MCR_REPLY_OK;
        int meta_cmd =
            meta && (mcr__is_store_op(r->op) || r->op == MCR_OP_DELETE || r->op == MCR_OP_INCR ||
                     r->op == MCR_OP_DECR || r->op == MCR_OP_TOUCH);
        if (meta_cmd && !opaque_is(r, &L, 0)) {
            mcr__set_msg(msg, "reply with an opaque token not awaited (%.*s)",
                         (int)(len > 40 ? 40 : len), line);
            return -1;
        }
        switch (r->op) {
        case MCR_OP_SET:
        case MCR_OP_ADD:
        case MCR_OP_REPLACE:
        case MCR_OP_APPEND:
        case MCR_OP_PREPEND:
        case MCR_OP_CAS:
        case MCR_OP_DELETE:
        case MCR_OP_TOUCH:
            ok = status_reply(r->op, meta, L.kind, &reply);
            if (ok && meta && reply == MCR_REPLY_STORED && L.has_cas)
                r->cas = L.cas; /* ms ... c: the stored item's CAS */
            break;
        case MCR_OP_INCR:
        case MCR_OP_DECR:
            if (!meta && L.kind == MCR__L_NUMBER) {
                r->number = L.number;
                reply = MCR_REPLY_NUMBER;
            } else if (status_reply(r->op, meta, L.kind, &reply)) {
                /* a miss */
            } else if (meta && L.kind == MCR__L_VA && L.bytes <= 20) {
                const char *data;
                size_t ll = len;
                uint64_t bytes = L.bytes;
                rc = mcr__proto_peek_block(in, ll, bytes, &data);
                if (rc == 0)
                    return 0;
                mcr__line N;
                if (rc > 0)
                    mcr__proto_parse_line(data, (size_t)bytes, &N);
                if (rc < 0 || N.kind != MCR__L_NUMBER) {
                    mcr__set_msg(msg, "ma reply without a number");
                    return -1;
                }
                r->number = N.number;
                mcr__inbuf_drain(in, ll + 2 + (size_t)bytes);
                len = 0; /* the final CRLF is drained below */
                reply = MCR_REPLY_NUMBER;
            } else {
                ok = 0;
            }
            break;
        case MCR_OP_VERSION:
        case MCR_OP_NOOP:
            if (L.kind == MCR__L_VERSION && !(meta && r->op == MCR_OP_NOOP)) {
                if (r->op == MCR_OP_VERSION) {
                    r->text = malloc(L.text_len + 1);
                    if (r->text == NULL) {
                        mcr__set_msg(msg, "out of memory keeping a version reply");
                        return -2;
                    }
                    memcpy(r->text, L.text, L.text_len);
                    r->text[L.text_len] = '\0';
                    r->text_len = L.text_len;
                    reply = MCR_REPLY_VERSION;
                }
            } else if (!(meta && r->op == MCR_OP_NOOP && L.kind == MCR__L_MN)) {
                ok = 0;
            }
            break;
        case MCR_OP_FLUSH_ALL:
            ok = L.kind == MCR__L_OK;
            break;
        case MCR_OP_STATS:
            if (L.kind == MCR__L_STAT) {
                size_t need = r->text_len + L.text_len + 2;
                if (need > STATS_MAX) {
                    mcr__set_msg(msg, "stats reply over %u bytes", STATS_MAX);
                    return -1;
                }
                if (need > r->text_cap) {
                    size_t cap = r->text_cap ? r->text_cap * 2 : 1024;
                    while (cap < need)
                        cap *= 2;
                    char *t = realloc(r->text, cap);
                    if (t == NULL) {
                        mcr__set_msg(msg, "out of memory keeping a stats reply");
                        return -2;
                    }
                    r->text = t;
                    r->text_cap = cap;
                }
                memcpy(r->text + r->text_len, L.text, L.text_len);
                r->text_len += L.text_len;
                r->text[r->text_len++] = '\n';
                r->text[r->text_len] = '\0';
                mcr__inbuf_drain(in, len + 2);
                continue;
            }
            ok = L.kind == MCR__L_END;
            reply = MCR_REPLY_STATS;
            break;
        default:
            ok = 0;
        }
        if (!ok) {
            mcr__set_msg(msg, "unexpected reply \"%.*s\" to %s", (int)(len > 40 ? 40 : len), line,
                         mcr_op_name(r->op));
            return -1;
        }
        mcr__inbuf_drain(in, len + 2);
        r->status = MCR_OK;
        r->reply = reply;
        return 1;
    }
}
