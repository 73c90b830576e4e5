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

/* What a step of the parse returns besides mcr__parse_reply()'s own results
 * (1 done, 0 more bytes needed, -1 and -2 errors): its line was taken and
 * the reply goes on. */
enum { GO_ON = 2 };

static int unexpected(const mcr__pool_req *r, const char *line, size_t len, char *msg)
{
    mcr__set_msg(msg, "unexpected reply \"%.*s\" to %s", (int)(len > 40 ? 40 : len), line,
                 mcr_op_name(r->op));
    return -1;
}

/* r answered by the line of `len` bytes (without its CRLF), taken. */
static int reply_done(mcr__pool_req *r, mcr__inbuf *in, size_t len, mcr_reply reply)
{
    mcr__inbuf_drain(in, len + 2);
    r->status = MCR_OK;
    r->reply = reply;
    return 1;
}

/* The next line of the reply, left in place: a plain VALUE line framed and
 * read in one pass, any other line found, then read. 1: *line, *len, *L;
 * 0: more bytes needed; -1: no line memcached sends (msg says why). */
static int next_line(const mcr__pool_req *r, mcr__inbuf *in, const char **line, size_t *len,
                     mcr__line *L, char *msg)
{
    if (!mcr__proto_peek_value(in, line, len, L)) {
        int rc = mcr__proto_peek_line(in, line, len);
        if (rc == 0)
            return 0;
        if (rc < 0) {
            mcr__set_msg(msg, "reply line over %d bytes", MCR__PROTO_MAX_LINE);
            return -1;
        }
        mcr__proto_parse_line(*line, *len, L);
    }
    if (L->kind == MCR__L_BAD) {
        mcr__set_msg(msg, "unexpected reply line \"%.*s\" to %s", (int)(*len > 40 ? 40 : *len),
                     *line, mcr_op_name(r->op));
        return -1;
    }
    return 1;
}

/* ------------------------------------------------ get, gets, gat, gats */

/* The request of r's line and its key j that a text VALUE for key k
 * answers: looked for from the request the line's last VALUE answered on
 * (the keys before it are all answered: memcached keeps the line's order).
 * 1: *g and *j; -1: no such key waits (msg says why). */
static int text_value_key(const mcr_pool *p, mcr__pool_req *r, const char *k, size_t kl,
                          mcr__pool_req **g, uint32_t *j, char *msg)
{
    mcr__pool_req *x = r->line_scan != NULL ? r->line_scan : r;
    for (;;) {
        uint32_t i = x->cursor;
        while (i < x->nkeys && !key_matches(p, x, i, k, kl))
            i++;
        if (i < x->nkeys) {
            *g = x;
            *j = i;
            return 1;
        }
        x = x->next;
        if (x == NULL || !x->joined) {
            mcr__set_msg(msg, "VALUE for a key %s: \"%.*s\"",
                         line_answered(p, r, k, kl) ? "already answered on this line"
                                                    : "not asked for (or out of order)",
                         (int)(kl > 60 ? 60 : kl), k);
            return -1;
        }
    }
}

/* The key j of r that a meta VA answers, by its opaque token. 1: *j; -1:
 * a token not awaited (msg says why). */
static int meta_value_key(const mcr__pool_req *r, const mcr__line *L, uint32_t *j, char *msg)
{
    uint32_t o = 0;
    int ours = L->opaque != NULL && mcr__proto_opaque(L->opaque, L->opaque_len, &o);
    if (!ours || o - r->opaque >= r->nkeys || o - r->opaque < r->cursor) {
        mcr__set_msg(msg, "VA with an opaque token %s",
                     ours && o - r->opaque < r->cursor ? "already answered (or out of order)"
                                                       : "not awaited");
        return -1;
    }
    *j = o - r->opaque;
    return 1;
}

/* The keys of r's line passed over before key j of g: misses, reported in
 * order. 0 when a callback closed c. */
static int misses_before(mcr__pool_conn *c, mcr__pool_req *r, mcr__pool_req *g, uint32_t j)
{
    mcr_pool *p = c->server->pool;
    for (mcr__pool_req *x = r->line_scan != NULL ? r->line_scan : r; x != g; x = x->next) {
        for (; x->cursor < x->nkeys && !c->dead; x->cursor++)
            mcr__deliver_simple(p, x, x->cursor, MCR_OK, MCR_REPLY_MISS, NULL);
        if (c->dead)
            return 0;
    }
    for (; g->cursor < j && !c->dead; g->cursor++)
        mcr__deliver_simple(p, g, g->cursor, MCR_OK, MCR_REPLY_MISS, NULL);
    return !c->dead;
}

/* Key j of g answered by value line L: a hit with its data block, or (data
 * NULL: over max_value_size) MCR_ERR_TOO_BIG with the message put in big. */
static void deliver_value(mcr__pool_conn *c, mcr__pool_req *g, uint32_t j, const mcr__line *L,
                          const char *data, char *big)
{
    mcr_pool *p = c->server->pool;
    mcr_result res;
    mcr__result_init(&res, g, j);
    if (data == NULL) {
        mcr__set_msg(big, "%s:%d: a value of %" PRIu64 " bytes, over max_value_size (%zu)",
                     c->server->host, c->server->port, L->bytes, p->o.max_value_size);
        res.status = MCR_ERR_TOO_BIG;
        res.message = big;
    } else {
        res.reply = MCR_REPLY_HIT;
        res.value = data;
        res.value_len = (size_t)L->bytes;
        res.flags = L->flags;
        res.cas = L->cas;
        if (L->has_ttl)
            res.ttl = L->ttl;
    }
    mcr__deliver_key(p, g, j, &res);
}

/* A VALUE (text) or VA (meta) line of `len` bytes and its data block: a
 * key's hit. A value over max_value_size fails its key with
 * MCR_ERR_TOO_BIG instead and is dropped as it arrives: the connection
 * stays in step without holding it. */
static int value_reply(mcr__pool_conn *c, mcr__pool_req *r, mcr__inbuf *in, size_t len,
                       const mcr__line *L, int meta, char *msg)
{
    mcr_pool *p = c->server->pool;
    mcr__pool_req *g = r;
    uint32_t j;
    int rc = meta ? meta_value_key(r, L, &j, msg)
                  : text_value_key(p, r, L->key, L->key_len, &g, &j, msg);
    if (rc < 0)
        return -1;
    int gets = r->op == MCR_OP_GETS || r->op == MCR_OP_GATS;
    if ((gets && !L->has_cas) || (meta && !L->has_flags)) {
        mcr__set_msg(msg, "%s without the %s asked for", meta ? "VA" : "VALUE",
                     gets ? "CAS unique" : "flags");
        return -1;
    }
    if (L->bytes > MCR_POOL_VALUE_MAX) {
        mcr__set_msg(msg, "a value of %" PRIu64 " bytes", L->bytes);
        return -1;
    }
    int too_big = L->bytes > p->o.max_value_size;
    const char *data = NULL;
    if (!too_big) {
        rc = mcr__proto_peek_block(in, len, L->bytes, &data);
        if (rc <= 0) {
            if (rc < 0)
                mcr__set_msg(msg, "data block not ended by CRLF");
            return rc;
        }
    }
    if (!misses_before(c, r, g, j))
        return 0;
    char big[MCR__MSG_SIZE];
    g->cursor = j + 1;
    if (!meta)
        r->line_scan = g;
    deliver_value(c, g, j, L, data, big);
    if (c->dead)
        return 0;

    int single_meta = meta && r->nkeys == 1;
    if (too_big) {
        mcr__inbuf_drain(in, len + 2);
        mcr__proto_skip_start(&c->skip, L->bytes);
        if (single_meta) {
            r->status = MCR_ERR_TOO_BIG;
            memcpy(r->message, big, sizeof(r->message));
        }
        return GO_ON;
    }
    mcr__inbuf_drain(in, len + 2 + (size_t)L->bytes + 2);
    if (single_meta) {
        r->status = MCR_OK;
        r->reply = MCR_REPLY_HIT;
        return 1;
    }
    return GO_ON;
}

/* A meta EN: the single key's miss, or (quiet gets send none; an older
 * server might) the miss of a batch's key, after which that token is
 * answered. */
static int meta_miss(mcr__pool_conn *c, mcr__pool_req *r, mcr__inbuf *in, size_t len,
                     const mcr__line *L, char *msg)
{
    mcr_pool *p = c->server->pool;
    if (r->nkeys == 1) {
        if (!opaque_is(r, L, 0)) {
            mcr__set_msg(msg, "EN with an opaque token not awaited");
            return -1;
        }
        mcr__inbuf_drain(in, len + 2);
        r->status = MCR_OK;
        r->reply = MCR_REPLY_MISS;
        return 1; /* mcr__finish_req reports the miss */
    }
    uint32_t o;
    if (L->opaque == NULL || !mcr__proto_opaque(L->opaque, L->opaque_len, &o) ||
        o - r->opaque >= r->nkeys || o - r->opaque < r->cursor) {
        mcr__set_msg(msg, "EN with an opaque token not awaited");
        return -1;
    }
    mcr__inbuf_drain(in, len + 2);
    for (; r->cursor <= o - r->opaque && !c->dead; r->cursor++)
        mcr__deliver_simple(p, r, r->cursor, MCR_OK, MCR_REPLY_MISS, NULL);
    if (c->dead)
        return 0;
    return GO_ON;
}

/* The END of a text get line, the MN of a meta batch: every key of the
 * line's requests not seen is a miss (unless an error line came first:
 * then the rest fail with it). */
static int get_end(mcr__pool_conn *c, mcr__pool_req *r, mcr__inbuf *in, size_t len)
{
    mcr_pool *p = c->server->pool;
    mcr__inbuf_drain(in, len + 2);
    if (r->failed_batch) {
        r->status = MCR_ERR_SERVER;
        return 1; /* the rest fail with the error seen */
    }
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

/* An error line answering a get: in text the whole line's requests fail;
 * in a meta batch each quiet mg may answer one, and MN still ends it. */
static int get_error(mcr__pool_req *r, mcr__inbuf *in, size_t len, const mcr__line *L, int meta)
{
    error_text(L, r->message);
    mcr__inbuf_drain(in, len + 2);
    if (!meta) {
        for (mcr__pool_req *x = r->next; x != NULL && x->joined; x = x->next) {
            x->status = MCR_ERR_SERVER;
            memcpy(x->message, r->message, sizeof(x->message));
            x->group_done = 1;
        }
    }
    if (meta && r->nkeys != 1) {
        r->failed_batch = 1;
        return GO_ON;
    }
    r->status = MCR_ERR_SERVER;
    return 1;
}

/* A line of the reply to a get (text: the request's line, joined requests
 * included; meta: one mg, or a batch of quiet ones ended by MN). */
static int get_line(mcr__pool_conn *c, mcr__pool_req *r, mcr__inbuf *in, const char *line,
                    size_t len, const mcr__line *L, int meta, char *msg)
{
    int single_meta = meta && r->nkeys == 1;
    if (L->kind == (meta ? MCR__L_VA : MCR__L_VALUE))
        return value_reply(c, r, in, len, L, meta, msg);
    if (meta && L->kind == MCR__L_EN)
        return meta_miss(c, r, in, len, L, msg);
    if (L->kind == (meta ? MCR__L_MN : MCR__L_END) && !single_meta)
        return get_end(c, r, in, len);
    if (error_line(L))
        return get_error(r, in, len, L, meta);
    return unexpected(r, line, len, msg);
}

/* ------------------------------------------------ one-line replies */

/* store, delete, touch: a status line. */
static int status_line(mcr__pool_req *r, mcr__inbuf *in, const char *line, size_t len,
                       const mcr__line *L, int meta, char *msg)
{
    mcr_reply reply;
    if (!status_reply(r->op, meta, L->kind, &reply))
        return unexpected(r, line, len, msg);
    if (meta && reply == MCR_REPLY_STORED && L->has_cas)
        r->cas = L->cas; /* ms ... c: the stored item's CAS */
    return reply_done(r, in, len, reply);
}

/* incr, decr: the new value (text: a number line; meta: a VA of at most
 * 20 digits), or a miss. */
static int arith_line(mcr__pool_req *r, mcr__inbuf *in, const char *line, size_t len,
                      const mcr__line *L, int meta, char *msg)
{
    mcr_reply reply;
    if (!meta && L->kind == MCR__L_NUMBER) {
        r->number = L->number;
        return reply_done(r, in, len, MCR_REPLY_NUMBER);
    }
    if (status_reply(r->op, meta, L->kind, &reply))
        return reply_done(r, in, len, reply); /* a miss */
    if (!(meta && L->kind == MCR__L_VA && L->bytes <= 20))
        return unexpected(r, line, len, msg);
    const char *data;
    int rc = mcr__proto_peek_block(in, len, L->bytes, &data);
    if (rc == 0)
        return 0;
    mcr__line N;
    if (rc > 0)
        mcr__proto_parse_line(data, (size_t)L->bytes, &N);
    if (rc < 0 || N.kind != MCR__L_NUMBER) {
        mcr__set_msg(msg, "ma reply without a number");
        return -1;
    }
    r->number = N.number;
    mcr__inbuf_drain(in, len + 2 + (size_t)L->bytes);
    return reply_done(r, in, 0, MCR_REPLY_NUMBER); /* the block's CRLF */
}

/* version: its VERSION line, kept. */
static int version_line(mcr__pool_req *r, mcr__inbuf *in, const char *line, size_t len,
                        const mcr__line *L, char *msg)
{
    if (L->kind != MCR__L_VERSION)
        return unexpected(r, line, len, msg);
    r->text = malloc(L->text_len + 1);
    if (r->text == NULL) {
        mcr__set_msg(msg, "out of memory keeping a version reply");
        return -2;
    }
    memcpy(r->text, L->text, L->text_len);
    r->text[L->text_len] = '\0';
    r->text_len = L->text_len;
    return reply_done(r, in, len, MCR_REPLY_VERSION);
}

/* stats: STAT lines, collected, until END. */
static int stats_line(mcr__pool_req *r, mcr__inbuf *in, const char *line, size_t len,
                      const mcr__line *L, char *msg)
{
    if (L->kind == MCR__L_END)
        return reply_done(r, in, len, MCR_REPLY_STATS);
    if (L->kind != MCR__L_STAT)
        return unexpected(r, line, len, msg);
    size_t need = r->text_len + L->text_len + 2;
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
    memcpy(r->text + r->text_len, L->text, L->text_len);
    r->text_len += L->text_len;
    r->text[r->text_len++] = '\n';
    r->text[r->text_len] = '\0';
    mcr__inbuf_drain(in, len + 2);
    return GO_ON;
}

/* A line of the reply to any command but a get: one line (or incr's VA,
 * stats' lines). */
static int command_line(mcr__pool_req *r, mcr__inbuf *in, const char *line, size_t len,
                        const mcr__line *L, int meta, char *msg)
{
    if (error_line(L)) {
        error_text(L, r->message);
        mcr__inbuf_drain(in, len + 2);
        r->status = MCR_ERR_SERVER;
        return 1;
    }
    int keyed = mcr__is_store_op(r->op) || r->op == MCR_OP_DELETE || r->op == MCR_OP_INCR ||
                r->op == MCR_OP_DECR || r->op == MCR_OP_TOUCH;
    if (meta && keyed && !opaque_is(r, L, 0)) {
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
        return status_line(r, in, line, len, L, meta, msg);
    case MCR_OP_INCR:
    case MCR_OP_DECR:
        return arith_line(r, in, line, len, L, meta, msg);
    case MCR_OP_VERSION:
        return version_line(r, in, line, len, L, msg);
    case MCR_OP_NOOP:
        /* text sends "version" for it (its text dropped); meta "mn" */
        if (L->kind != (meta ? MCR__L_MN : MCR__L_VERSION))
            return unexpected(r, line, len, msg);
        return reply_done(r, in, len, MCR_REPLY_OK);
    case MCR_OP_FLUSH_ALL:
        if (L->kind != MCR__L_OK)
            return unexpected(r, line, len, msg);
        return reply_done(r, in, len, MCR_REPLY_OK);
    case MCR_OP_STATS:
        return stats_line(r, in, line, len, L, msg);
    default:
        return unexpected(r, line, len, msg);
    }
}

/* ------------------------------------------------ the reply */

/* Parse what the head request r expects. 1: r is complete (the caller pops
 * it); 0: more bytes needed; -1: the stream does not fit r (msg says why);
 * -2: out of memory keeping the reply. */
int mcr__parse_reply(mcr__pool_conn *c, mcr__pool_req *r, mcr__inbuf *in, char *msg)
{
    int meta = c->server->pool->o.protocol == MCR_PROTO_META || r->force_meta;
    if (r->group_done)
        return 1; /* answered with the request before it on its line */
    for (;;) {
        int rc;
        if (c->skip.left > 0) {
            /* the rest of a value over max_value_size, dropped */
            rc = mcr__proto_skip_run(&c->skip, in);
            if (rc <= 0) {
                if (rc < 0)
                    mcr__set_msg(msg, "data block not ended by CRLF");
                return rc;
            }
            if (meta && r->nkeys == 1)
                return 1; /* the VA was the whole reply, its key reported */
        }
        const char *line;
        size_t len;
        mcr__line L;
        rc = next_line(r, in, &line, &len, &L, msg);
        if (rc <= 0)
            return rc;
        if (mcr__is_get_family(r->op))
            rc = get_line(c, r, in, line, len, &L, meta, msg);
        else
            rc = command_line(r, in, line, len, &L, meta, msg);
        if (rc != GO_ON)
            return rc;
    }
}
