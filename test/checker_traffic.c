/* SPDX-License-Identifier: BSD-3-Clause */
/* checker_traffic.c: a traffic process of test_migrate_checker: follower, pool, writes recorded in the shared model, reads checked against it (see checker_traffic.h). */
#include <event2/event.h>
#include <execinfo.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checker_traffic.h"
#include "mcroute_fleet.h"
#include "mcroute_pool.h"
#include "mcroute_router.h"
#include "testutil.h"

#define TICK_MS 10        /* phase, stop flag and slow requests looked at */
#define BACKOFF_MS 250    /* a bad server gets no request for this long */
#define WRITE_CAP 20      /* writes in flight that may reach one server: what a
                             stopped server freezes at most, per process */
#define FOCUS_PCT 75      /* requests for moved keys */
#define SOURCE_PCT 80     /* ... of them for the keys of the server being copied from */
/* While this process is copying, the copier races its writes (its reads go
 * to the old owner, which holds every acknowledged write): more writes, and
 * nearly all of them on moved keys. */
#define COPY_FOCUS_PCT 95
#define COPY_WRITE_PCT 80
#define NOTE_VALUE 60     /* bytes of a value quoted in a note */

typedef enum kind { K_READ, K_WRITE, K_SPY } kind;

/* A key this process writes: what it holds, as acknowledged. */
typedef struct own {
    char val[CK_VALUE_MAX + 1];
    uint8_t len;
    uint8_t present, numeric;
    uint8_t busy;   /* a write (or its spy read) in flight */
    uint8_t frozen; /* a write failed: never written again */
    uint8_t reset;  /* a reply contradicted the model: set it afresh */
    uint8_t cold;   /* its copy was seen at the new owner: not written again until the
                       grace period (read, by every process, after the switch) */
} own;

typedef struct keylist {
    uint32_t *k;
    uint32_t n;
} keylist;

struct proc;

/* One request in flight. */
typedef struct slot {
    struct proc *p;
    kind kind;
    uint32_t key;
    uint32_t ver;          /* a write's version; a read's lowest acceptable */
    mcr_op op;
    int phase;             /* the process's phase when it was sent */
    int hot;               /* a write of a moved key while copying: spy after it */
    int64_t start_ms;
    int srv[2], nsrv;      /* the memcached servers it may reach */
    mcr_reply expect;      /* a write's expected reply */
    int present, numeric;  /* what the write leaves */
    char val[CK_VALUE_MAX + 1];
    size_t len;
    char arg[CK_VALUE_MAX + 1]; /* the request's value */
    size_t arglen;
    uint64_t delta, number; /* incr: the delta, the expected result */
    char kbuf[24];
    size_t klen;
} slot;

typedef struct srv {
    int bad, probing;
    int64_t until;
    unsigned ops, writes;
} srv;

typedef struct proc {
    const ck_traffic_cfg *c;
    ck_table *t;
    ck_counts *n;
    struct event_base *base;
    struct event *tick;
    mcr_router *router, *spy_router;
    mcr_fleet *fleet;
    mcr_pool *pool, *spy;
    tu_rng rng;
    slot *slots;
    uint32_t *free_slots, nfree;
    own *own;
    uint8_t *reading;                /* per key: a read in flight here */
    keylist mine, mine_moved, moved; /* own keys, own moved keys, every moved key */
    keylist mine_src[CK_SERVERS_MAX], src[CK_SERVERS_MAX]; /* moved keys by their source */
    srv srv[CK_SERVERS_MAX];
    int phase;
    uint64_t to_epoch; /* a request routed at this epoch was routed by `to` */
    int stopping;
    int populating;
    uint32_t pop_next, pop_pending;
} proc;

static const char *phase_name(int phase)
{
    return mcr_migration_phase_name((mcr_migration_phase)phase);
}

static own *own_of(proc *p, uint32_t k)
{
    return &p->own[k / p->t->nprocs];
}

static int is_moved(const proc *p, uint32_t k)
{
    return p->c->from_mc[k] != p->c->to_mc[k];
}

/* ------------------------------------------------------------ servers */

static void srv_bad(proc *p, int s, int64_t now)
{
    p->srv[s].bad = 1;
    p->srv[s].probing = 0;
    p->srv[s].until = now + BACKOFF_MS;
}

static int srv_ok(proc *p, int s, int write, int64_t now)
{
    srv *v = &p->srv[s];
    if (v->bad) {
        if (now < v->until)
            return 0;
        v->bad = 0;
        v->probing = 1;
    }
    if (v->probing)
        return !write && v->ops == 0;
    return !write || v->writes < WRITE_CAP;
}

static int servers_ok(proc *p, uint32_t k, int write)
{
    int64_t now = mcr_test_now_ms();
    int a = p->c->from_mc[k], b = p->c->to_mc[k];
    return srv_ok(p, a, write, now) && (a == b || srv_ok(p, b, write, now));
}

static void slot_servers(proc *p, slot *s, int only_to)
{
    int a = p->c->from_mc[s->key], b = p->c->to_mc[s->key];
    s->nsrv = 0;
    if (!only_to)
        s->srv[s->nsrv++] = a;
    if (only_to || a != b)
        s->srv[s->nsrv++] = b;
    for (int i = 0; i < s->nsrv; i++) {
        p->srv[s->srv[i]].ops++;
        p->srv[s->srv[i]].writes += s->kind == K_WRITE;
    }
}

static void slot_servers_done(proc *p, slot *s, int ok)
{
    int64_t now = mcr_test_now_ms();
    for (int i = 0; i < s->nsrv; i++) {
        srv *v = &p->srv[s->srv[i]];
        v->ops--;
        v->writes -= s->kind == K_WRITE;
        if (!ok)
            srv_bad(p, s->srv[i], now);
        else if (v->probing)
            v->probing = 0;
    }
    s->nsrv = 0;
}

/* ------------------------------------------------------------ slots */

static slot *slot_get(proc *p, kind kd, uint32_t k)
{
    slot *s = &p->slots[p->free_slots[--p->nfree]];
    s->kind = kd;
    s->key = k;
    s->phase = p->phase;
    s->hot = 0;
    s->start_ms = mcr_test_now_ms();
    s->klen = ck_key_name(k, s->kbuf, sizeof(s->kbuf));
    return s;
}

static void slot_put(proc *p, slot *s)
{
    p->free_slots[p->nfree++] = (uint32_t)(s - p->slots);
}

static void refill(proc *p);

/* ------------------------------------------------------------ picking keys */

static uint32_t pick(proc *p, int mine, int write)
{
    int f = atomic_load(&p->t->focus);
    for (int tries = 0; tries < 12; tries++) {
        const keylist *l = mine ? &p->mine : NULL;
        int copying = p->phase == MCR_MIGRATION_COPYING;
        if (tu_below(&p->rng, 100) < (copying ? COPY_FOCUS_PCT : FOCUS_PCT)) {
            l = mine ? &p->mine_moved : &p->moved;
            if (f >= 0 && f < CK_SERVERS_MAX && tu_below(&p->rng, 100) < SOURCE_PCT) {
                const keylist *s = mine ? &p->mine_src[f] : &p->src[f];
                if (s->n > 0)
                    l = s;
            }
            if (l->n == 0)
                l = mine ? &p->mine : NULL;
        }
        uint32_t k = l != NULL ? l->k[tu_below(&p->rng, l->n)] : tu_below(&p->rng, p->t->nkeys);
        if (write) {
            own *o = own_of(p, k);
            if (o->busy || o->frozen ||
                (o->cold && (copying || p->phase == MCR_MIGRATION_SWITCHED)))
                continue;
        } else if (p->reading[k]) {
            continue;
        }
        if (servers_ok(p, k, write))
            return k;
    }
    return UINT32_MAX;
}

/* ------------------------------------------------------------ notes */

static void quote(char *buf, size_t cap, const char *v, size_t len)
{
    snprintf(buf, cap, "\"%.*s%s\"", (int)(len > NOTE_VALUE ? NOTE_VALUE : len), v,
             len > NOTE_VALUE ? "..." : "");
}

/* ------------------------------------------------------------ reads */

static void read_cb(const mcr_result *res, void *arg)
{
    slot *s = arg;
    proc *p = s->p;
    p->reading[s->key] = 0;
    slot_servers_done(p, s, res->status == MCR_OK);
    if (res->epoch >= p->to_epoch && s->phase < MCR_MIGRATION_SWITCHED)
        s->phase = MCR_MIGRATION_SWITCHED; /* routed by `to`: the follower's stats lag */
    if (res->status != MCR_OK) {
        atomic_fetch_add(&p->n->read_errors, 1);
    } else {
        int hit = res->reply == MCR_REPLY_HIT;
        uint32_t age;
        int rc = ck_check(p->t, s->key, s->ver, hit, res->value, res->value_len, &age);
        atomic_fetch_add(&p->n->reads[s->phase], 1);
        if (res->via_previous)
            atomic_fetch_add(&p->n->via_previous, 1);
        if (rc == CK_UNCHECKED) {
            atomic_fetch_add(&p->n->unchecked, 1);
        } else if (rc != CK_OK) {
            char q[NOTE_VALUE + 8] = "a miss", ages[48] = "";
            if (hit)
                quote(q, sizeof(q), res->value, res->value_len);
            if (age > 0)
                snprintf(ages, sizeof(ages), " (the value of v%u)", s->ver - age);
            atomic_fetch_add(rc == CK_OLDER ? &p->n->older_reads[s->phase]
                                            : &p->n->missing_reads[s->phase],
                             1);
            ck_mark(p->t, s->key, rc);
            ck_note(p->t, p->c->proc,
                    "%s: process %d read %s in phase %s: %s%s from %s%s at epoch %llu; "
                    "acknowledged v%u (by process %u in phase %s)",
                    rc == CK_OLDER ? "older value" : "missing key", p->c->proc, s->kbuf,
                    phase_name(s->phase), q, ages, res->server ? res->server : "?",
                    res->via_previous ? " (previous owner)" : "", (unsigned long long)res->epoch,
                    s->ver, s->key % p->t->nprocs,
                    phase_name((int)atomic_load(&p->t->keys[s->key].phase)));
        }
    }
    slot_put(p, s);
    refill(p);
}

static int start_read(proc *p)
{
    uint32_t k = pick(p, tu_below(&p->rng, 2), 0);
    if (k == UINT32_MAX)
        return 0;
    slot *s = slot_get(p, K_READ, k);
    s->ver = ck_read_start(p->t, k);
    mcr_error err;
    slot_servers(p, s, 0);
    p->reading[k] = 1;
    if (mcr_pool_get(p->pool, s->kbuf, s->klen, read_cb, s, &err) != MCR_OK) {
        p->reading[k] = 0;
        slot_servers_done(p, s, 1);
        atomic_fetch_add(&p->n->read_errors, 1);
        slot_put(p, s);
    }
    return 1;
}

/* ------------------------------------------------------------ writes */

/* A new value for version v: a number (for incr) or a string. */
static size_t fresh(proc *p, uint32_t v, char *buf, int *numeric)
{
    int n;
    if (tu_below(&p->rng, 100) < 40) {
        *numeric = 1;
        n = snprintf(buf, CK_VALUE_MAX + 1, "%llu",
                     (unsigned long long)v * 1000000ull + tu_below(&p->rng, 1000));
    } else {
        *numeric = 0;
        n = snprintf(buf, CK_VALUE_MAX + 1, "s%u.%08x%.*s", v, (unsigned)tu_rand(&p->rng),
                     (int)tu_below(&p->rng, 24), "xxxxxxxxxxxxxxxxxxxxxxxx");
    }
    return (size_t)n;
}

/* The writes of a key in each state, percent. Those of a moved key while
 * copying ("hot") all drop the new owner's copy. A few expect "nothing
 * there" (a delete or append of an absent key) or "already there" (an add
 * of a present one): they find a copy that came back, or one that went. */
typedef struct mix {
    mcr_op op;
    unsigned pct;
} mix;

#define MIX(a) a, sizeof(a) / sizeof(a[0])
static const mix ABSENT[] = {
    {MCR_OP_SET, 45}, {MCR_OP_ADD, 45}, {MCR_OP_DELETE, 5}, {MCR_OP_APPEND, 5}};
static const mix ABSENT_HOT[] = {{MCR_OP_ADD, 100}};
static const mix NUMBER[] = {{MCR_OP_INCR, 40},   {MCR_OP_SET, 10},    {MCR_OP_DELETE, 15},
                             {MCR_OP_REPLACE, 10}, {MCR_OP_TOUCH, 10}, {MCR_OP_APPEND, 10},
                             {MCR_OP_ADD, 5}};
static const mix NUMBER_HOT[] = {
    {MCR_OP_INCR, 55}, {MCR_OP_DELETE, 30}, {MCR_OP_REPLACE, 10}, {MCR_OP_APPEND, 5}};
static const mix STRING[] = {{MCR_OP_APPEND, 35}, {MCR_OP_SET, 20},   {MCR_OP_DELETE, 20},
                             {MCR_OP_REPLACE, 10}, {MCR_OP_TOUCH, 10}, {MCR_OP_ADD, 5}};
static const mix STRING_HOT[] = {{MCR_OP_APPEND, 50}, {MCR_OP_DELETE, 35}, {MCR_OP_REPLACE, 15}};

static mcr_op choose(proc *p, const mix *m, size_t n)
{
    unsigned r = tu_below(&p->rng, 100);
    for (size_t i = 0; i + 1 < n; r -= m[i++].pct)
        if (r < m[i].pct)
            return m[i].op;
    return m[n - 1].op;
}

/* Choose the write of key k (o its state), version v: op, request, what
 * it must answer and what it leaves. */
static void plan(proc *p, slot *s, const own *o, uint32_t v)
{
    int room = o->len + 12 <= CK_VALUE_MAX;
    mcr_op op;
    if (o->reset)
        op = MCR_OP_SET;
    else if (!o->present)
        op = s->hot ? choose(p, MIX(ABSENT_HOT)) : choose(p, MIX(ABSENT));
    else if (o->numeric)
        op = s->hot ? choose(p, MIX(NUMBER_HOT)) : choose(p, MIX(NUMBER));
    else
        op = s->hot ? choose(p, MIX(STRING_HOT)) : choose(p, MIX(STRING));
    if (op == MCR_OP_APPEND && o->present && !room)
        op = s->hot ? MCR_OP_REPLACE : MCR_OP_SET;

    s->op = op;
    s->arglen = 0;
    s->delta = 0;
    /* by default it leaves what there is */
    s->present = o->present;
    s->numeric = o->numeric;
    memcpy(s->val, o->val, o->len);
    s->len = o->len;
    switch (op) {
    case MCR_OP_SET:
    case MCR_OP_ADD:
    case MCR_OP_REPLACE:
        s->arglen = fresh(p, v, s->arg, &s->numeric);
        if (op == MCR_OP_ADD && o->present && !o->reset) {
            s->expect = MCR_REPLY_NOT_STORED; /* leaves what there is */
            s->numeric = o->numeric;
        } else {
            s->expect = MCR_REPLY_STORED;
            s->present = 1;
            memcpy(s->val, s->arg, s->arglen);
            s->len = s->arglen;
        }
        break;
    case MCR_OP_APPEND:
        s->arglen = (size_t)snprintf(s->arg, sizeof(s->arg), "+%u", v);
        if (o->present) {
            s->expect = MCR_REPLY_STORED;
            memcpy(s->val + s->len, s->arg, s->arglen);
            s->len += s->arglen;
            s->numeric = 0;
        } else {
            s->expect = MCR_REPLY_NOT_STORED;
        }
        break;
    case MCR_OP_DELETE:
        s->expect = o->present ? MCR_REPLY_DELETED : MCR_REPLY_MISS;
        s->present = 0;
        s->len = 0;
        break;
    case MCR_OP_INCR:
        s->delta = 1 + tu_below(&p->rng, 9);
        s->number = strtoull(o->val, NULL, 10) + s->delta;
        s->expect = MCR_REPLY_NUMBER;
        s->len = (size_t)snprintf(s->val, sizeof(s->val), "%llu", (unsigned long long)s->number);
        break;
    default: /* touch */
        s->expect = MCR_REPLY_TOUCHED;
        break;
    }
    s->val[s->len] = '\0';
}

static void own_set(own *o, int present, int numeric, const char *val, size_t len)
{
    o->present = (uint8_t)present;
    o->numeric = (uint8_t)(present && numeric);
    o->len = (uint8_t)(present ? len : 0);
    if (present)
        memcpy(o->val, val, len);
    o->val[o->len] = '\0';
}

static void spy_cb(const mcr_result *res, void *arg);

/* After a write of a moved key while copying: read its new owner. */
static int start_spy(proc *p, slot *s)
{
    mcr_server_desc d;
    uint32_t idx = mcr_snapshot_locate(p->c->to, s->kbuf, s->klen);
    if (mcr_snapshot_server(p->c->to, idx, &d) != MCR_OK)
        return 0;
    mcr_request q;
    memset(&q, 0, sizeof(q));
    q.op = MCR_OP_GET;
    q.key = s->kbuf;
    q.key_len = s->klen;
    q.server = d.id;
    s->kind = K_SPY;
    s->start_ms = mcr_test_now_ms();
    slot_servers(p, s, 1);
    mcr_error err;
    if (mcr_pool_submit(p->spy, &q, spy_cb, s, &err) != MCR_OK) {
        slot_servers_done(p, s, 1);
        return 0;
    }
    return 1;
}

static void spy_cb(const mcr_result *res, void *arg)
{
    slot *s = arg;
    proc *p = s->p;
    own *o = own_of(p, s->key);
    slot_servers_done(p, s, res->status == MCR_OK);
    if (res->status == MCR_OK && res->reply == MCR_REPLY_HIT) {
        o->cold = 1;
        atomic_fetch_add(&p->n->copies_seen, 1);
        if (!o->present || res->value_len != o->len || memcmp(res->value, o->val, o->len) != 0) {
            char q[NOTE_VALUE + 8];
            quote(q, sizeof(q), res->value, res->value_len);
            if (atomic_fetch_add(&p->n->stale_copies, 1) < 2)
                ck_note(p->t, p->c->proc,
                        "(diagnostic) stale copy: %s at its new owner %s during the copy is %s, "
                        "acknowledged v%u left %s%s%s",
                        s->kbuf, res->server ? res->server : "?", q, s->ver,
                        o->present ? "\"" : "no value", o->present ? o->val : "",
                        o->present ? "\"" : "");
        }
    }
    o->busy = 0;
    slot_put(p, s);
    refill(p);
}

static void violation(proc *p, slot *s, int older, const mcr_result *res)
{
    char got[NOTE_VALUE + 40];
    if (res->reply == MCR_REPLY_NUMBER)
        snprintf(got, sizeof(got), "%llu", (unsigned long long)res->number);
    else
        snprintf(got, sizeof(got), "%s", mcr_reply_name(res->reply));
    atomic_fetch_add(older ? &p->n->older_writes[s->phase] : &p->n->missing_writes[s->phase], 1);
    ck_mark(p->t, s->key, older ? CK_OLDER : CK_MISSING);
    ck_note(p->t, p->c->proc,
            "%s: process %d %s %s (v%u) in phase %s answered %s by %s at epoch %llu, expected "
            "%s%s%.*s",
            older ? "older value" : "missing key", p->c->proc, mcr_op_name(s->op), s->kbuf,
            s->ver, phase_name(s->phase), got, res->server ? res->server : "?",
            (unsigned long long)res->epoch,
            s->expect == MCR_REPLY_NUMBER ? "" : mcr_reply_name(s->expect),
            s->expect == MCR_REPLY_NUMBER ? "" : " ",
            s->expect == MCR_REPLY_NUMBER ? (int)s->len : 0, s->val);
}

static void write_cb(const mcr_result *res, void *arg)
{
    slot *s = arg;
    proc *p = s->p;
    own *o = own_of(p, s->key);
    ck_table *t = p->t;
    slot_servers_done(p, s, res->status == MCR_OK);
    if (p->populating && s->phase == -1) {
        p->pop_pending--;
        s->phase = MCR_MIGRATION_NONE;
    }
    if (res->epoch >= p->to_epoch && s->phase < MCR_MIGRATION_SWITCHED && s->phase >= 0)
        s->phase = MCR_MIGRATION_SWITCHED; /* routed by `to`: the follower's stats lag */
    if (res->status != MCR_OK) {
        /* it may have landed on one owner, both or neither */
        o->frozen = 1;
        ck_freeze(t, s->key);
        if (atomic_fetch_add(&p->n->failed, 1) < 2)
            ck_note(t, p->c->proc, "(diagnostic) failed write: process %d %s %s (v%u) in phase "
                    "%s: %s: %s", p->c->proc, mcr_op_name(s->op), s->kbuf, s->ver,
                    phase_name(s->phase), mcr_strerror(res->status),
                    res->message ? res->message : "");
        o->busy = 0;
        slot_put(p, s);
        refill(p);
        return;
    }
    int ok = res->reply == s->expect &&
             (s->expect != MCR_REPLY_NUMBER || res->number == s->number);
    if (ok) {
        own_set(o, s->present, s->numeric, s->val, s->len);
        o->reset = 0;
    } else if (s->op == MCR_OP_TOUCH && res->reply == MCR_REPLY_MISS &&
               s->phase >= MCR_MIGRATION_COPYING && s->phase <= MCR_MIGRATION_CLOSING) {
        /* the current owner's answer, while the key may be at the other
         * one only (copied, or written there since): not a loss by itself;
         * the reads tell whether it is still there */
        atomic_fetch_add(&p->n->touch_misses, 1);
    } else if (s->op == MCR_OP_DELETE) {
        violation(p, s, s->expect == MCR_REPLY_MISS, res); /* absent either way now */
        own_set(o, 0, 0, NULL, 0);
    } else if (s->op == MCR_OP_INCR && res->reply == MCR_REPLY_NUMBER) {
        violation(p, s, 1, res);
        s->len = (size_t)snprintf(s->val, sizeof(s->val), "%llu",
                                  (unsigned long long)res->number);
        ck_record(t, s->key, s->ver, 1, 0, s->val, s->len);
        own_set(o, 1, 1, s->val, s->len);
    } else if (s->op == MCR_OP_ADD && s->expect == MCR_REPLY_NOT_STORED &&
               res->reply == MCR_REPLY_STORED) {
        violation(p, s, 0, res); /* nothing was there: it holds the add's value */
        ck_record(t, s->key, s->ver, 1, 0, s->arg, s->arglen);
        own_set(o, 1, s->numeric, s->arg, s->arglen);
    } else if ((s->op == MCR_OP_REPLACE || s->op == MCR_OP_APPEND || s->op == MCR_OP_INCR) &&
               s->expect != MCR_REPLY_NOT_STORED &&
               (res->reply == MCR_REPLY_NOT_STORED || res->reply == MCR_REPLY_MISS)) {
        violation(p, s, 0, res); /* nothing at its owner, and its other copy deleted */
        ck_record(t, s->key, s->ver, 0, 0, NULL, 0);
        own_set(o, 0, 0, NULL, 0);
    } else {
        /* an add or append that found a value after a delete, a touch that
         * found none: what is there now is not known */
        violation(p, s, s->expect == MCR_REPLY_NOT_STORED || s->op == MCR_OP_ADD, res);
        ck_record(t, s->key, s->ver, 0, 1, NULL, 0);
        o->reset = 1;
    }
    ck_ack(t, s->key, s->ver, s->phase);
    atomic_fetch_add(&p->n->writes[s->phase], 1);
    if (s->hot && !p->stopping && p->phase == MCR_MIGRATION_COPYING && start_spy(p, s))
        return; /* the key stays busy until the spy read */
    o->busy = 0;
    slot_put(p, s);
    refill(p);
}

/* Write key k (populate: its first write, a set). */
static int start_write_key(proc *p, uint32_t k, int populate)
{
    own *o = own_of(p, k);
    slot *s = slot_get(p, K_WRITE, k);
    uint32_t v = atomic_load(&p->t->keys[k].issued) + 1;
    s->hot = !populate && p->phase == MCR_MIGRATION_COPYING && is_moved(p, k);
    if (populate)
        o->reset = 1;
    plan(p, s, o, v);
    if (populate) {
        s->phase = -1; /* counted in pop_pending; NONE once answered */
        p->pop_pending++;
    }
    s->ver = ck_begin(p->t, k, s->present, s->val, s->len);
    o->busy = 1;
    slot_servers(p, s, 0);
    mcr_request q;
    memset(&q, 0, sizeof(q));
    q.op = s->op;
    q.key = s->kbuf;
    q.key_len = s->klen;
    q.value = s->arglen ? s->arg : NULL;
    q.value_len = s->arglen;
    q.delta = s->delta;
    mcr_error err;
    if (mcr_pool_submit(p->pool, &q, write_cb, s, &err) != MCR_OK) {
        /* not sent: counted as a failed write all the same */
        mcr_result r;
        memset(&r, 0, sizeof(r));
        r.status = MCR_ERR_INVALID;
        write_cb(&r, s);
    }
    return 1;
}

static int start_write(proc *p)
{
    uint32_t k = pick(p, 1, 1);
    return k == UINT32_MAX ? 0 : start_write_key(p, k, 0);
}

/* ------------------------------------------------------------ the loop */

static void refill(proc *p)
{
    while (!p->stopping && p->nfree > 0) {
        if (p->populating) {
            if (p->pop_next < p->mine.n) {
                start_write_key(p, p->mine.k[p->pop_next++], 1);
                continue;
            }
            if (p->pop_pending > 0)
                break;
            p->populating = 0;
            atomic_fetch_add(&p->t->ready, 1);
        }
        unsigned rp = p->phase == MCR_MIGRATION_COPYING ? 100 - COPY_WRITE_PCT : p->c->read_pct;
        int read = tu_below(&p->rng, 100) < rp;
        if (!(read ? start_read(p) : start_write(p)) && !(read ? start_write(p) : start_read(p)))
            break;
    }
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    proc *p = arg;
    mcr_fleet_stats st;
    mcr_fleet_get_stats(p->fleet, &st);
    if ((int)st.migration_phase >= 0 && (int)st.migration_phase < CK_PHASES)
        p->phase = (int)st.migration_phase;
    if (atomic_load(&p->t->stop))
        p->stopping = 1;
    int64_t now = mcr_test_now_ms();
    for (uint32_t i = 0; i < p->c->depth; i++) {
        slot *s = &p->slots[i];
        if (s->nsrv > 0 && now - s->start_ms > (int64_t)p->c->slow_ms)
            for (int j = 0; j < s->nsrv; j++)
                if (!p->srv[s->srv[j]].bad)
                    srv_bad(p, s->srv[j], now);
    }
    if (p->stopping && p->nfree == p->c->depth)
        event_base_loopbreak(p->base);
    else
        refill(p);
}

static void list_add(keylist *l, uint32_t k)
{
    l->k[l->n++] = k;
}

static int give_up(proc *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int give_up(proc *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->t->error[p->c->proc], CK_NOTE_LEN, fmt, ap);
    va_end(ap);
    return 1;
}

/* Key lists and local state; 0, or -1 for want of memory. */
static int setup_keys(proc *p)
{
    const ck_traffic_cfg *c = p->c;
    uint32_t nk = p->t->nkeys, np = p->t->nprocs;
    p->own = calloc(nk / np + 1, sizeof(*p->own));
    p->reading = calloc(nk, 1);
    keylist *lists[] = {&p->mine, &p->mine_moved, &p->moved};
    for (size_t i = 0; i < 3; i++)
        lists[i]->k = calloc(nk, sizeof(uint32_t));
    for (int s = 0; s < CK_SERVERS_MAX; s++) {
        p->mine_src[s].k = calloc(nk, sizeof(uint32_t));
        p->src[s].k = calloc(nk, sizeof(uint32_t));
        if (p->mine_src[s].k == NULL || p->src[s].k == NULL)
            return -1;
    }
    if (p->own == NULL || p->reading == NULL || p->mine.k == NULL || p->mine_moved.k == NULL ||
        p->moved.k == NULL)
        return -1;
    for (uint32_t k = 0; k < nk; k++) {
        int mine = k % np == (uint32_t)c->proc, moved = c->from_mc[k] != c->to_mc[k];
        if (mine)
            list_add(&p->mine, k);
        if (moved) {
            list_add(&p->moved, k);
            list_add(&p->src[c->from_mc[k]], k);
        }
        if (mine && moved) {
            list_add(&p->mine_moved, k);
            list_add(&p->mine_src[c->from_mc[k]], k);
        }
    }
    p->slots = calloc(c->depth, sizeof(*p->slots));
    p->free_slots = calloc(c->depth, sizeof(uint32_t));
    if (p->slots == NULL || p->free_slots == NULL)
        return -1;
    for (uint32_t i = 0; i < c->depth; i++) {
        p->slots[i].p = p;
        p->free_slots[p->nfree++] = c->depth - 1 - i;
    }
    return 0;
}

static void teardown_keys(proc *p)
{
    free(p->own);
    free(p->reading);
    free(p->mine.k);
    free(p->mine_moved.k);
    free(p->moved.k);
    for (int s = 0; s < CK_SERVERS_MAX; s++) {
        free(p->mine_src[s].k);
        free(p->src[s].k);
    }
    free(p->slots);
    free(p->free_slots);
}

static int run(proc *p)
{
    const ck_traffic_cfg *c = p->c;
    mcr_error err = {0};
    mcr_fleet_options o;
    char id[32];
    mcr_fleet_options_init(&o);
    o.endpoints = c->endpoints;
    o.pool = c->pool;
    o.wait_ms = (unsigned)mcr_test_ms(10000);
    snprintf(id, sizeof(id), "ck-%d", c->proc);
    mcr_fleet_follow_options fo;
    memset(&fo, 0, sizeof(fo));
    fo.client_id = id;
    if (setup_keys(p) != 0)
        return give_up(p, "process %d: out of memory", c->proc);
    if ((p->base = event_base_new()) == NULL)
        return give_up(p, "process %d: event_base_new failed", c->proc);
    int rc = mcr_router_new(NULL, &p->router, &err);
    if (rc == MCR_OK)
        rc = mcr_fleet_follow(&o, &fo, p->router, &p->fleet, &err);
    if (rc != MCR_OK)
        return give_up(p, "process %d: following the pool: %s: %s", c->proc, mcr_strerror(rc),
                    err.message);
    mcr_pool_options po;
    mcr_pool_options_init(&po);
    po.request_timeout_ms = c->request_timeout_ms;
    po.retry_timeout_ms = 200;
    rc = mcr_pool_new(p->base, p->router, &po, &p->pool, &err);
    if (rc == MCR_OK)
        rc = mcr_router_new(c->to, &p->spy_router, &err);
    if (rc == MCR_OK)
        rc = mcr_pool_new(p->base, p->spy_router, &po, &p->spy, &err);
    if (rc != MCR_OK)
        return give_up(p, "process %d: pools: %s: %s", c->proc, mcr_strerror(rc), err.message);
    p->tick = event_new(p->base, -1, EV_PERSIST, on_tick, p);
    struct timeval tv = {0, TICK_MS * 1000};
    if (p->tick == NULL || event_add(p->tick, &tv) != 0)
        return give_up(p, "process %d: the tick timer", c->proc);
    p->populating = 1;
    refill(p);
    event_base_dispatch(p->base);
    return 0;
}

/* A traffic process that crashes says where, on the test's stderr (the
 * addresses resolve with addr2line -e test_migrate_checker), then dies of
 * the same signal: the test fails naming the signal. */
static void on_crash(int sig)
{
    void *frames[48];
    static const char head[] = "test_migrate_checker: a traffic process crashed:\n";
    ssize_t w = write(STDERR_FILENO, head, sizeof(head) - 1);
    (void)w;
    backtrace_symbols_fd(frames, backtrace(frames, 48), STDERR_FILENO);
    raise(sig);
}

int ck_traffic_run(const ck_traffic_cfg *c)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_crash;
    sa.sa_flags = (int)SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    sigaction(SIGABRT, &sa, NULL);
    void *warm[2];
    (void)backtrace(warm, 2); /* loads what backtrace needs now, not in the handler */
    proc p;
    memset(&p, 0, sizeof(p));
    p.c = c;
    p.t = c->table;
    p.n = &c->table->counts[c->proc];
    p.to_epoch = mcr_snapshot_epoch(c->to);
    tu_rng_init(&p.rng, c->seed);
    int st = run(&p);
    if (p.tick != NULL)
        event_free(p.tick);
    mcr_pool_free(p.pool);
    mcr_pool_free(p.spy);
    mcr_fleet_free(p.fleet);
    mcr_router_free(p.router);
    mcr_router_free(p.spy_router);
    if (p.base != NULL)
        event_base_free(p.base);
    teardown_keys(&p);
    return st;
}
