/* SPDX-License-Identifier: BSD-3-Clause */
/* pool_env.c: the pool test environment of the test_pool_* suites (pool_env.h says what it does). */
#include <errno.h>
#include <event2/event.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "mcroute.h"
#include "mcroute_pool.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"
#include "pool_env.h"
#include "realserver.h"
#include "router_count.h"
#include "testutil.h"

/* ================================================================== time */

void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ================================================================== registering */

void pe_add(Suite *s, const char *name, const TTest *test, int from, int to)
{
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test, from, to);
    suite_add_tcase(s, tc);
}

/* ================================================================== tracking */

int g_submitting;

void violation(tally *t, const char *fmt, ...)
{
    if (t->first[0] != '\0')
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->first, sizeof(t->first), fmt, ap);
    va_end(ap);
}

size_t make_value(char *buf, size_t cap, const char *key, size_t klen, unsigned gen,
                  size_t pad)
{
    int n = snprintf(buf, cap, "val|%.*s|%u|", (int)klen, key, gen);
    size_t len = (size_t)n;
    for (size_t i = 0; i < pad && len + 1 < cap; i++)
        buf[len++] = (char)('a' + (i + gen) % 26);
    buf[len] = '\0';
    return len;
}

static int value_is_for(const char *v, size_t vl, const char *key, size_t kl)
{
    return v != NULL && vl >= kl + 5 && memcmp(v, "val|", 4) == 0 &&
           memcmp(v + 4, key, kl) == 0 && v[4 + kl] == '|';
}

static unsigned g_gen;

ticket *ticket_for(tally *t, rec *r)
{
    ticket *tk = calloc(1, sizeof(*tk));
    ck_assert_ptr_nonnull(tk);
    tk->r = r;
    tk->gen = r->gen;
    tk->next = t->tickets;
    t->tickets = tk;
    return tk;
}

static void tickets_free(tally *t)
{
    while (t->tickets != NULL) {
        ticket *n = t->tickets->next;
        free(t->tickets);
        t->tickets = n;
    }
}

static int is_server_op(mcr_op op)
{
    return op == MCR_OP_VERSION || op == MCR_OP_STATS || op == MCR_OP_FLUSH_ALL ||
           op == MCR_OP_NOOP;
}

void rec_record(const mcr_result *res, rec *r)
{
    tally *t = r->t;

    t->calls++;
    if (g_submitting > 0) {
        t->sync++;
        violation(t, "callback of %s \"%.*s\" made inside a submitting call",
                  mcr_op_name(r->op), (int)r->key_len, r->key);
    }
    if (r->refused) {
        t->unexpected++;
        violation(t, "callback of %s \"%.*s\", whose submission returned %d",
                  mcr_op_name(r->op), (int)r->key_len, r->key, r->refused);
        return;
    }
    if (++r->calls > 1) {
        t->twice++;
        violation(t, "callback %d of %s \"%.*s\" (status %d)", r->calls, mcr_op_name(r->op),
                  (int)r->key_len, r->key, res->status);
        return;
    }
    r->t1 = mcr_test_now_ms();
    r->status = res->status;
    r->reply = res->reply;
    r->res_op = res->op;
    r->flags = res->flags;
    r->cas = res->cas;
    r->number = res->number;
    r->epoch = res->epoch;
    snprintf(r->server, sizeof(r->server), "%s", res->server != NULL ? res->server : "");
    snprintf(r->message, sizeof(r->message), "%s", res->message != NULL ? res->message : "");
    free(r->value);
    r->value = NULL;
    r->value_len = 0;
    if (res->value != NULL) {
        r->value = malloc(res->value_len + 1);
        ck_assert_ptr_nonnull(r->value);
        memcpy(r->value, res->value, res->value_len);
        r->value[res->value_len] = '\0';
        r->value_len = res->value_len;
    }
    if (res->op != r->op)
        violation(t, "result op %s for a %s", mcr_op_name(res->op), mcr_op_name(r->op));
    if (!is_server_op(r->op) &&
        (res->key_len != r->key_len || (r->key_len > 0 && memcmp(res->key, r->key, r->key_len)))) {
        t->foreign++;
        violation(t, "result for key \"%.*s\" delivered to a %s of \"%.*s\"",
                  (int)(res->key_len > 200 ? 200 : res->key_len), res->key ? res->key : "",
                  mcr_op_name(r->op), (int)r->key_len, r->key);
    }
    if (r->check_value && res->status == MCR_OK && res->reply == MCR_REPLY_HIT &&
        !value_is_for(res->value, res->value_len, r->key, r->key_len)) {
        t->foreign++;
        violation(t, "get of \"%.*s\" returned \"%.*s\"", (int)r->key_len, r->key,
                  (int)(res->value_len > 100 ? 100 : res->value_len),
                  res->value ? res->value : "");
    }
}

void rec_cb(const mcr_result *res, void *arg)
{
    ticket *tk = arg;
    rec *r = tk->r;
    if (++tk->calls > 1 || tk->gen != r->gen) {
        tally *t = r->t;
        t->calls++;
        t->twice++;
        violation(t, "callback %d of an earlier %s of \"%.*s\" (status %d), after its record "
                  "was reused", tk->calls, mcr_op_name(res->op), (int)res->key_len,
                  res->key ? res->key : "", res->status);
        return;
    }
    rec_record(res, r);
}

void rec_clear(rec *r)
{
    free(r->value);
    memset(r, 0, sizeof(*r));
}

void recs_free(rec *r, size_t n)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        free(r[i].value);
    free(r);
}

mtrack *mt_new(tally *t, size_t n)
{
    mtrack *m = calloc(1, sizeof(*m));
    ck_assert_ptr_nonnull(m);
    m->t = t;
    m->check_value = 1;
    m->keys = calloc(n ? n : 1, sizeof(char *));
    m->lens = calloc(n ? n : 1, sizeof(size_t));
    m->dmap = calloc(n ? n : 1, sizeof(size_t));
    m->first_of = calloc(n ? n : 1, sizeof(size_t));
    m->want = calloc(n ? n : 1, sizeof(int));
    m->got = calloc(n ? n : 1, sizeof(int));
    m->status = calloc(n ? n : 1, sizeof(int));
    m->reply = calloc(n ? n : 1, sizeof(int));
    m->cas = calloc(n ? n : 1, sizeof(uint64_t));
    m->seen = calloc(n ? n : 1, sizeof(int));
    ck_assert(m->keys && m->lens && m->dmap && m->first_of && m->want && m->got &&
              m->status && m->reply && m->cas && m->seen);
    return m;
}

void mt_add(mtrack *m, const char *key, size_t len)
{
    size_t i = m->n++, d;
    m->keys[i] = malloc(len + 1);
    ck_assert_ptr_nonnull(m->keys[i]);
    memcpy(m->keys[i], key, len);
    m->keys[i][len] = '\0';
    m->lens[i] = len;
    for (d = 0; d < m->nd; d++) {
        size_t f = m->first_of[d];
        if (m->lens[f] == len && memcmp(m->keys[f], key, len) == 0)
            break;
    }
    if (d == m->nd)
        m->first_of[m->nd++] = i;
    m->dmap[i] = d;
    m->want[d]++;
}

void mt_free(mtrack *m)
{
    if (m == NULL)
        return;
    for (size_t i = 0; i < m->n; i++)
        free(m->keys[i]);
    free(m->keys);
    free(m->lens);
    free(m->dmap);
    free(m->first_of);
    free(m->want);
    free(m->got);
    free(m->status);
    free(m->reply);
    free(m->cas);
    free(m->seen);
    free(m);
}

static long mt_distinct(const mtrack *m, const char *key, size_t len)
{
    for (size_t d = 0; d < m->nd; d++) {
        size_t f = m->first_of[d];
        if (m->lens[f] == len && (len == 0 || memcmp(m->keys[f], key, len) == 0))
            return (long)d;
    }
    return -1;
}

void mt_key_cb(const mcr_result *res, void *arg)
{
    mtrack *m = arg;
    tally *t = m->t;

    if (g_submitting > 0) {
        t->sync++;
        violation(t, "key_cb of a multi-get made inside the submitting call");
    }
    if (m->refused) {
        t->unexpected++;
        violation(t, "key_cb of a refused multi-get");
        return;
    }
    if (m->done_calls > 0)
        violation(t, "key_cb of a multi-get after its done_cb");
    m->key_calls++;
    long d = mt_distinct(m, res->key, res->key_len);
    if (d < 0) {
        t->foreign++;
        violation(t, "multi-get key_cb for key \"%.*s\", not asked for",
                  (int)(res->key_len > 200 ? 200 : res->key_len), res->key ? res->key : "");
        return;
    }
    /* mcr_result.index: the position of this very key in the keys given,
     * each position answered once */
    if (res->index >= m->n || m->lens[res->index] != res->key_len ||
        (res->key_len > 0 && memcmp(m->keys[res->index], res->key, res->key_len) != 0)) {
        t->foreign++;
        violation(t, "multi-get key_cb for \"%.*s\" with index %zu of %zu: not that key",
                  (int)(res->key_len > 200 ? 200 : res->key_len), res->key ? res->key : "",
                  res->index, m->n);
    } else if (++m->seen[res->index] > 1) {
        t->twice++;
        violation(t, "multi-get key_cb for index %zu (\"%s\") %d times", res->index,
                  m->keys[res->index], m->seen[res->index]);
    }
    if (++m->got[d] > m->want[d]) {
        t->twice++;
        violation(t, "multi-get key_cb %d for \"%s\", which occurs %d times", m->got[d],
                  m->keys[m->first_of[d]], m->want[d]);
    }
    m->status[d] = res->status;
    m->reply[d] = res->reply;
    m->cas[d] = res->cas;
    if (res->status == MCR_OK && res->reply == MCR_REPLY_HIT) {
        m->hits++;
        if (m->check_value &&
            !value_is_for(res->value, res->value_len, res->key, res->key_len)) {
            t->foreign++;
            violation(t, "multi-get of \"%.*s\" returned \"%.*s\"", (int)res->key_len, res->key,
                      (int)(res->value_len > 100 ? 100 : res->value_len),
                      res->value ? res->value : "");
        }
    }
    if (res->op != MCR_OP_GET && res->op != MCR_OP_GETS)
        violation(t, "multi-get key_cb with op %s", mcr_op_name(res->op));
}

void mt_done_cb(const mcr_result *res, void *arg)
{
    mtrack *m = arg;
    tally *t = m->t;

    t->calls++;
    if (g_submitting > 0) {
        t->sync++;
        violation(t, "done_cb of a multi-get made inside the submitting call");
    }
    if (m->refused) {
        t->unexpected++;
        violation(t, "done_cb of a refused multi-get");
        return;
    }
    if (++m->done_calls > 1) {
        t->twice++;
        violation(t, "done_cb of a multi-get called %d times", m->done_calls);
        return;
    }
    if (m->key_calls != (long)m->n)
        violation(t, "done_cb of a multi-get of %zu keys after %ld key_cb calls", m->n,
                  m->key_calls);
    if (res->index != 0)
        violation(t, "done_cb of a multi-get with index %zu, not 0", res->index);
    m->done_status = res->status;
    m->done_number = res->number;
    m->done_key_len = res->key_len;
}

void mt_check(const mtrack *m)
{
    ck_assert_msg(m->done_calls == 1, "done_cb called %d times", m->done_calls);
    ck_assert_msg(m->key_calls == (long)m->n, "%ld key_cb calls for %zu keys", m->key_calls,
                  m->n);
    for (size_t d = 0; d < m->nd; d++)
        ck_assert_msg(m->got[d] == m->want[d], "key \"%s\": %d key_cb calls, %d occurrences",
                      m->keys[m->first_of[d]], m->got[d], m->want[d]);
    for (size_t i = 0; i < m->n; i++)
        ck_assert_msg(m->seen[i] == 1, "key %zu (\"%s\"): %d key_cb calls with its index", i,
                      m->keys[i], m->seen[i]);
}

/* ================================================================== environment */

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

void env_base(env *e)
{
    struct timeval tv = {0, TICK_MS * 1000};
    e->base = event_base_new();
    ck_assert_ptr_nonnull(e->base);
    e->tick = event_new(e->base, -1, EV_PERSIST, tick_cb, NULL);
    ck_assert_ptr_nonnull(e->tick);
    ck_assert_int_eq(event_add(e->tick, &tv), 0);
}

/* Whether the memcached answering at p's address is p's process: a port
 * picked by the kernel and released can be taken by another process on a
 * shared machine before memcached binds it, and then the start "succeeds"
 * against the other process. */
static int server_is_ours(const rs_proc *p)
{
    int fd = rs_connect(p->addr, p->port, IO_MS);
    if (fd < 0)
        return 0;
    long long pid = rs_mc_stat(fd, NULL, "pid", IO_MS);
    close(fd);
    return pid == (long long)p->pid;
}

void env_start_server(env *e, int i, int port)
{
    char addr[32];
    snprintf(addr, sizeof(addr), "127.0.0.%d", i + 1);
    for (int attempt = 0;; attempt++) {
        ck_assert_msg(rs_memcached_start(&e->mc[i], addr, port, NULL, START_MS) == 0,
                      "cannot start %s on %s:%d", rs_memcached_path(), addr, port);
        if (server_is_ours(&e->mc[i]))
            break;
        rs_stop(&e->mc[i]);
        ck_assert_msg(port == 0 && attempt < 5, "%s:%d is served by another process", addr,
                      port);
    }
    snprintf(e->id[i], sizeof(e->id[i]), "%s:%d", addr, e->mc[i].port);
}

mcr_snapshot *env_snapshot(env *e, int k, const char *key_prefix)
{
    return env_snapshot_at(e, k, key_prefix, 1);
}

mcr_snapshot *env_snapshot_at(env *e, int k, const char *key_prefix, uint64_t epoch)
{
    mcr_error err = {0};
    mcr_config *cfg = mcr_config_new();
    mcr_snapshot *s = NULL;
    ck_assert_ptr_nonnull(cfg);
    if (key_prefix != NULL)
        ck_assert_int_eq(mcr_config_set_key_prefix(cfg, key_prefix, strlen(key_prefix)),
                         MCR_OK);
    for (int i = 0; i < k; i++)
        ck_assert_msg(mcr_config_add_server(cfg, e->mc[i].addr, e->mc[i].port, 1, &err) ==
                          MCR_OK,
                      "%s", err.message);
    ck_assert_msg(mcr_snapshot_new(cfg, epoch, &s, &err) == MCR_OK, "%s", err.message);
    mcr_config_free(cfg);
    return s;
}

void opts_init(mcr_pool_options *o)
{
    mcr_pool_options_init(o);
    o->connect_timeout_ms = (unsigned)TMS(30000);
    o->request_timeout_ms = (unsigned)TMS(30000);
}

void env_new_pool(env *e, const mcr_pool_options *o)
{
    mcr_error err = {0};
    mcr_pool_options base;
    if (o == NULL) {
        opts_init(&base);
        o = &base;
    }
    int rc = mcr_pool_new(e->base, e->router, o, &e->pool, &err);
    ck_assert_msg(rc == MCR_OK, "mcr_pool_new: %d %s", rc, err.message);
    ck_assert_ptr_nonnull(e->pool);
}

void env_init_k(env *e, int n, int k, const mcr_pool_options *o)
{
    memset(e, 0, sizeof(*e));
    e->n = n;
    for (int i = 0; i < n; i++)
        env_start_server(e, i, 0);
    mcr_snapshot *s = env_snapshot(e, k, NULL);
    ck_assert_int_eq(mcr_router_new(s, &e->router, NULL), MCR_OK);
    mcr_snapshot_unref(s);
    env_base(e);
    env_new_pool(e, o);
}

void env_init(env *e, int n, const mcr_pool_options *o)
{
    env_init_k(e, n, n, o);
}

void env_free(env *e)
{
    mcr_pool_free(e->pool);
    e->pool = NULL;
    if (e->tick != NULL)
        event_free(e->tick);
    if (e->base != NULL)
        event_base_free(e->base);
    mcr_router_free(e->router);
    tickets_free(&e->t);
    for (int i = 0; i < e->n; i++)
        rs_stop(&e->mc[i]); /* SIGKILL: a SIGSTOPped one too */
}

void env_kill(env *e, int i)
{
    rs_stop(&e->mc[i]); /* rs_stop is that kill */
}

void run_ms(env *e, unsigned ms)
{
    long long end = mcr_test_now_ms() + ms;
    while (mcr_test_now_ms() < end)
        event_base_loop(e->base, EVLOOP_ONCE);
}

int run_until(env *e, cond_fn done, void *arg, unsigned ms)
{
    long long end = mcr_test_now_ms() + TMS((int)ms);
    while (!done(e, arg)) {
        if (mcr_test_now_ms() >= end)
            return 0;
        event_base_loop(e->base, EVLOOP_ONCE);
    }
    return 1;
}

int c_nothing_retired(env *e, void *arg)
{
    (void)e;
    return tu_router_retired(arg) == 0;
}

int c_idle(env *e, void *arg)
{
    (void)arg;
    return mcr_pool_pending(e->pool) == 0;
}

int c_called(env *e, void *arg)
{
    (void)e;
    return ((rec *)arg)->calls > 0;
}

void tally_ok(env *e)
{
    tally *t = &e->t;
    ck_assert_msg(t->sync == 0 && t->twice == 0 && t->foreign == 0 && t->unexpected == 0,
                  "sync %ld, twice %ld, foreign %ld, unexpected %ld: %s", t->sync, t->twice,
                  t->foreign, t->unexpected, t->first);
    ck_assert_msg(t->calls == t->submitted, "%ld callbacks for %ld submissions", t->calls,
                  t->submitted);
    if (e->pool != NULL)
        ck_assert_uint_eq(mcr_pool_pending(e->pool), 0);
}

/* ================================================================== submitting */

mcr_request rq(mcr_op op, const char *key)
{
    mcr_request q;
    memset(&q, 0, sizeof(q));
    q.op = op;
    q.key = key;
    q.key_len = key != NULL ? strlen(key) : 0;
    return q;
}

mcr_request rq_store(mcr_op op, const char *key, const char *value, uint32_t flags)
{
    mcr_request q = rq(op, key);
    q.value = value;
    q.value_len = strlen(value);
    q.flags = flags;
    return q;
}

void rec_prepare(rec *r, tally *t, const mcr_request *q)
{
    free(r->value);
    memset(r, 0, sizeof(*r));
    r->t = t;
    r->op = q->op;
    r->check_value = !t->raw_values;
    r->gen = ++g_gen;
    r->key_len = q->key_len < sizeof(r->key) ? q->key_len : sizeof(r->key);
    if (q->key != NULL && r->key_len > 0)
        memcpy(r->key, q->key, r->key_len);
    r->t0 = mcr_test_now_ms();
}

int submit_to(env *e, mcr_pool *p, rec *r, const mcr_request *q)
{
    mcr_error err = {0};
    rec_prepare(r, &e->t, q);
    g_submitting++;
    int rc = mcr_pool_submit(p, q, rec_cb, ticket_for(&e->t, r), &err);
    g_submitting--;
    if (rc == MCR_OK)
        e->t.submitted++;
    else {
        r->refused = rc;
        ck_assert_msg(err.code == rc, "mcr_error code %d for a submission returning %d",
                      err.code, rc);
        ck_assert_msg(err.message[0] != '\0', "no message for submission error %d", rc);
    }
    return rc;
}

int submit(env *e, rec *r, const mcr_request *q)
{
    return submit_to(e, e->pool, r, q);
}

/* Submit, assert it was accepted, run until its callback (at most ms). */
static rec *do1_ms(env *e, rec *r, const mcr_request q, unsigned ms)
{
    int rc = submit(e, r, &q);
    ck_assert_msg(rc == MCR_OK, "%s \"%.*s\" refused: %d (%s)", mcr_op_name(q.op),
                  (int)q.key_len, q.key ? (const char *)q.key : "", rc, mcr_strerror(rc));
    ck_assert_msg(run_until(e, c_called, r, ms), "%s \"%.*s\": no callback within %d ms",
                  mcr_op_name(q.op), (int)q.key_len, q.key ? (const char *)q.key : "",
                  TMS((int)ms));
    return r;
}

rec *do1(env *e, rec *r, const mcr_request q)
{
    return do1_ms(e, r, q, 10000);
}

/* ================================================================== snapshot helpers */

int owner_of(mcr_router *router, const char *key, size_t len)
{
    mcr_snapshot *s = mcr_router_current(router);
    ck_assert_ptr_nonnull(s);
    int i = (int)mcr_snapshot_locate(s, key, len);
    mcr_snapshot_unref(s);
    return i;
}

int env_index(const env *e, const char *id)
{
    for (int i = 0; i < e->n; i++)
        if (strcmp(e->id[i], id) == 0)
            return i;
    return -1;
}

const char *owner_id(env *e, const char *key)
{
    mcr_snapshot *s = mcr_router_current(e->router);
    mcr_server_desc d;
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(mcr_snapshot_server(s, mcr_snapshot_locate(s, key, strlen(key)), &d),
                     MCR_OK);
    int i = env_index(e, d.id);
    mcr_snapshot_unref(s);
    ck_assert_msg(i >= 0, "owner %s is not a server of the test", d.id);
    return e->id[i];
}

int owns(env *e, const char *key, const char *id)
{
    mcr_snapshot *s = mcr_router_current(e->router);
    mcr_server_desc d;
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(mcr_snapshot_server(s, mcr_snapshot_locate(s, key, strlen(key)), &d),
                     MCR_OK);
    int yes = strcmp(d.id, id) == 0;
    mcr_snapshot_unref(s);
    return yes;
}

int state_of(mcr_router *router, const char *id)
{
    mcr_snapshot *s = mcr_router_current(router);
    mcr_server_desc d;
    int st = -1;
    uint32_t i = mcr_snapshot_find(s, id);
    if (i != MCR_NO_SERVER && mcr_snapshot_server(s, (size_t)i, &d) == MCR_OK)
        st = (int)d.state;
    mcr_snapshot_unref(s);
    return st;
}

int published_state_of(mcr_router *router, const char *id)
{
    mcr_snapshot *s = mcr_router_published(router);
    mcr_server_desc d;
    int st = -1;
    uint32_t i = mcr_snapshot_find(s, id);
    if (i != MCR_NO_SERVER && mcr_snapshot_server(s, (size_t)i, &d) == MCR_OK)
        st = (int)d.state;
    mcr_snapshot_unref(s);
    return st;
}

const char *key_on(env *e, const char *id, const char *stem, char *buf, size_t cap)
{
    char st[256];
    snprintf(st, sizeof(st), "%s", stem); /* stem may be buf */
    for (int n = 0; n < 100000; n++) {
        int w = snprintf(buf, cap, "%.*s%d", (int)(cap > 12 ? cap - 12 : 0), st, n);
        ck_assert(w > 0 && (size_t)w < cap);
        if (strcmp(owner_id(e, buf), id) == 0)
            return buf;
    }
    ck_abort_msg("no key found for %s", id);
    return NULL;
}

int stats_of(const mcr_pool *p, const char *id, mcr_server_stats *out)
{
    size_t n = mcr_pool_server_count(p);
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(mcr_pool_server_stats(p, i, out), MCR_OK);
        if (strcmp(out->id, id) == 0)
            return 0;
    }
    memset(out, 0, sizeof(*out));
    return -1;
}

/* ================================================================== raw client */

int raw_fd(const env *e, int i)
{
    int fd = rs_connect(e->mc[i].addr, e->mc[i].port, IO_MS);
    ck_assert_msg(fd >= 0, "cannot connect to %s", e->id[i]);
    return fd;
}

void env_sigstop(env *e, int i)
{
    ck_assert_int_eq(kill(e->mc[i].pid, SIGSTOP), 0);
    int fd = rs_connect(e->mc[i].addr, e->mc[i].port, 1000);
    ck_assert_msg(fd >= 0, "cannot connect to stopped %s", e->id[i]);
    ck_assert(send(fd, "version\r\n", 9, MSG_NOSIGNAL) == 9);
    struct pollfd pf = {fd, POLLIN, 0};
    ck_assert_msg(poll(&pf, 1, 100) == 0, "%s answers after SIGSTOP", e->id[i]);
    close(fd);
}

/* Whether a "name value\n" stats text (the pool's STATS value) has the line. */
static int stats_has_line(const char *text, size_t len, const char *line)
{
    size_t ll = strlen(line);
    for (size_t i = 0; i + ll <= len; i++) {
        if ((i == 0 || text[i - 1] == '\n') && memcmp(text + i, line, ll) == 0 &&
            (i + ll == len || text[i + ll] == '\n' || text[i + ll] == '\r'))
            return 1;
    }
    return 0;
}

/* ================================================================== shared by several suites */

int stat_line(const rec *r, const char *line)
{
    return r->value != NULL && stats_has_line(r->value, r->value_len, line);
}

int submit_multi_cb(env *e, mcr_pool *p, mtrack *m, mcr_op op, mcr_pool_cb key_cb)
{
    g_submitting++;
    int rc = mcr_pool_get_multi(p, op, (const void *const *)m->keys, m->lens, m->n, key_cb,
                                mt_done_cb, m, NULL);
    g_submitting--;
    if (rc == MCR_OK)
        e->t.submitted++;
    else
        m->refused = rc;
    return rc;
}

int submit_multi(env *e, mcr_pool *p, mtrack *m, mcr_op op)
{
    return submit_multi_cb(e, p, m, op, mt_key_cb);
}

int c_mt_done(env *e, void *arg)
{
    (void)e;
    return ((mtrack *)arg)->done_calls > 0;
}

void book_init(snap_book *b, mcr_router *router)
{
    memset(b, 0, sizeof(*b));
    mcr_snapshot *s = mcr_router_current(router);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_lt(mcr_snapshot_epoch(s), 64);
    b->by_epoch[mcr_snapshot_epoch(s)][0] = s;
}

void book_hook(const mcr_snapshot *old_snap, const mcr_snapshot *new_snap,
               const mcr_diff *diff, void *arg)
{
    snap_book *b = arg;
    (void)old_snap;
    (void)diff;
    uint64_t ep = mcr_snapshot_epoch(new_snap);
    if (ep >= 64) {
        b->overflow++;
        return;
    }
    int k = 0;
    while (k < BOOK_PER_EPOCH && b->by_epoch[ep][k] != NULL)
        k++;
    if (k == BOOK_PER_EPOCH)
        b->overflow++;
    else
        b->by_epoch[ep][k] = mcr_snapshot_ref(new_snap);
}

void book_free(snap_book *b)
{
    for (int i = 0; i < 64; i++)
        for (int k = 0; k < BOOK_PER_EPOCH; k++)
            mcr_snapshot_unref(b->by_epoch[i][k]);
}

static const char *snap_owner(const mcr_snapshot *s, const char *key, size_t len)
{
    mcr_server_desc d;
    if (mcr_snapshot_server(s, mcr_snapshot_locate(s, key, len), &d) != MCR_OK)
        return NULL;
    return d.id;
}

const char *book_owner(const snap_book *b, uint64_t ep, const char *key, size_t len)
{
    if (ep >= 64 || b->by_epoch[ep][0] == NULL)
        return NULL;
    return snap_owner(b->by_epoch[ep][0], key, len);
}

int book_routes_to(const snap_book *b, uint64_t ep, const char *key, size_t len, const char *id)
{
    for (int k = 0; ep < 64 && k < BOOK_PER_EPOCH && b->by_epoch[ep][k] != NULL; k++) {
        const char *o = snap_owner(b->by_epoch[ep][k], key, len);
        if (o != NULL && strcmp(o, id) == 0)
            return 1;
    }
    return 0;
}

void apply_change(env *e, int what, int server)
{
    mcr_error err = {0};
    mcr_changes *ch = mcr_changes_new();
    ck_assert_ptr_nonnull(ch);
    if (what == 0) {
        mcr_server_desc d = {.host = e->mc[server].addr, .port = e->mc[server].port, .weight = 1,
                             .state = MCR_STATE_ACTIVE, .id_is_default = 0};
        ck_assert_int_eq(mcr_changes_add(ch, &d, &err), MCR_OK);
    } else if (what == 1) {
        ck_assert_int_eq(mcr_changes_remove(ch, e->id[server], &err), MCR_OK);
    } else {
        ck_assert_int_eq(mcr_changes_set_state(ch, e->id[server],
                                               what == 2 ? MCR_STATE_DRAINING : MCR_STATE_ACTIVE,
                                               &err),
                         MCR_OK);
    }
    ck_assert_msg(mcr_router_apply(e->router, ch, 0, &err) == MCR_OK, "%s", err.message);
    mcr_changes_free(ch);
}

int c_conns_back(env *e, void *arg)
{
    (void)e;
    conn_wait *w = arg;
    return rs_mc_stat(w->fd, NULL, "curr_connections", IO_MS) == w->baseline;
}
