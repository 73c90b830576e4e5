/* SPDX-License-Identifier: BSD-3-Clause */
/* pool_cmds.c: the mcroute commands that talk to the servers through a connection pool: set, get, delete, probe. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "mcroute.h"
#include "mcroute_pool.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"

#include "cli.h"

/* memcached's longest key (the pool adds no prefix here). */
#define KEY_MAX 250
/* The largest value `set` accepts: memcached's default item size limit
 * (-I 1m) and the pool's default max_value_size. A server started with a
 * smaller limit answers SERVER_ERROR, which fails that key only. */
#define VALUE_MAX (1024u * 1024u)
/* Requests of set, delete and probe submitted and not yet answered: enough
 * to keep every connection's pipeline full, few enough that a slow server
 * does not pile up memory. */
#define MAX_IN_FLIGHT 512
/* get: keys per mcr_pool_get_multi() call, and calls in flight at once. */
#define GET_BATCH 256
#define GET_WINDOW 8
/* --ttl: memcached's exptime is a signed 32-bit number. */
#define TTL_MAX 2147483647LL

const char cli_usage_set[] =
    "Usage: mcroute set SOURCE [--ttl SECONDS] [--timeout MS] [--failure-policy NAME]\n"
    "                   [--previous OLD]\n"
    "Store every KEY<TAB>VALUE line of standard input on the server that owns KEY.\n"
    "VALUE is the rest of the line after the first TAB (it may be empty and may\n"
    "contain TABs; a newline ends it, a CR before it is kept). Requests are\n"
    "pipelined. Prints nothing on success; a key that could not be stored prints\n"
    "KEY<TAB>error<TAB>REASON on stderr, and the exit status is then 1. So does a\n"
    "bad line, which is not sent (the other keys are): a bad key, a value over\n"
    "1048576 bytes, or no TAB (KEY is then the whole line); REASON names the line\n"
    "(\"line N: ...\").\n"
    "SOURCE: as for locate (see mcroute --help)\n";

const char cli_usage_get[] =
    "Usage: mcroute get SOURCE [--timeout MS] [--failure-policy NAME] [--previous OLD]\n"
    "                   [KEY...]\n"
    "Print KEY<TAB>VALUE for every key found, in the order of the keys; a key not\n"
    "found prints nothing. With no KEY, reads keys from standard input, one per\n"
    "line. Keys are fetched with multi-key gets, several batches in flight.\n"
    "A key that could not be fetched prints KEY<TAB>error<TAB>REASON on stderr,\n"
    "and the exit status is then 1; so does a bad key (empty, over 250 bytes, with\n"
    "a space or control byte), which is not sent (the other keys are).\n"
    "--previous OLD: read through a migration from OLD (a server list, a server\n"
    "file, a snapshot file or a host's state) to SOURCE: a key SOURCE moved and its\n"
    "new owner misses is read from its owner in OLD (nothing is written back).\n"
    "SOURCE: as for locate (see mcroute --help)\n";

const char cli_usage_delete[] =
    "Usage: mcroute delete SOURCE [--timeout MS] [--failure-policy NAME] [--previous OLD]\n"
    "                      [KEY...]\n"
    "Delete every key from the server that owns it. With no KEY, reads keys from\n"
    "standard input, one per line. A key that is not there is not an error.\n"
    "Prints nothing on success; a key that could not be deleted prints\n"
    "KEY<TAB>error<TAB>REASON on stderr, and the exit status is then 1; so does a\n"
    "bad key, which is not sent (the other keys are).\n"
    "SOURCE: as for locate (see mcroute --help)\n";

const char cli_usage_probe[] =
    "Usage: mcroute probe SOURCE [--timeout MS] [--failure-policy NAME] [--json]\n"
    "                     [--previous OLD] [KEY...]\n"
    "Ask every server of SOURCE for every key and print\n"
    "KEY<TAB>OWNER<TAB>HOLDERS, OWNER the id of the server the placement names and\n"
    "HOLDERS the ids of the servers that hold the key, comma-separated in server\n"
    "order, '-' for none: a key held elsewhere than by its owner was stored\n"
    "under another placement. A key that some server could not be asked about\n"
    "prints KEY<TAB>error<TAB>SERVER: REASON on stderr instead, and the exit\n"
    "status is then 1; a bad key prints KEY<TAB>error<TAB>REASON and is not sent.\n"
    "With no KEY, reads keys from standard input, one per line.\n"
    "With --json: {\"keys\": [{\"key\": K, \"owner\": ID, \"holders\": [ID, ...]}, ...]};\n"
    "a key that failed is {\"key\": K, \"error\": \"SERVER: REASON\"} (and is reported\n"
    "on stderr as well); a key that is not valid UTF-8 also gets \"key_hex\".\n"
    "--previous OLD: OLD's servers are asked too, and a fourth column (\"previous_owner\"\n"
    "in JSON) names the key's owner in OLD.\n"
    "SOURCE: as for locate (see mcroute --help)\n";

/* ------------------------------------------------------------ input */

/* One unit of work: a key, and for set its value (both point into argv or
 * into the buffer of standard input). An item whose input is bad (a bad
 * key, a line without TAB, a value too long) is not sent: it fails alone,
 * with `why`, and every other item goes on. */
typedef struct item {
    const char *key;
    size_t klen;
    const char *value;
    size_t vlen;
    const char *why; /* NULL, or why the item is bad (a static string) */
    int why_status;  /* its mcr_status: MCR_ERR_KEY, _SYNTAX or _TOO_BIG */
    size_t lineno;   /* its line of standard input; 0 for an argument */
} item;

typedef struct input {
    item *items;
    size_t n;
    char *buf; /* standard input, when the items come from it */
} input;

/* The whole of standard input into a malloc'd buffer. */
static char *read_stdin(size_t *len)
{
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    if (buf == NULL)
        cli_fail("out of memory");
    for (;;) {
        if (n == cap) {
            char *nb = cap < SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
            if (nb == NULL) {
                free(buf);
                cli_fail("out of memory reading standard input");
            }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n, stdin);
        n += r;
        if (r == 0) {
            if (ferror(stdin)) {
                free(buf);
                cli_die("error reading standard input: %s", strerror(errno));
            }
            break;
        }
    }
    *len = n;
    return buf;
}

/* Why memcached would refuse `key`, or NULL when it is a valid key: 1 to
 * 250 bytes, none a space or control byte (the rule the pool checks too,
 * so that a key can never inject a command). */
static const char *key_problem(const char *key, size_t len)
{
    if (len == 0)
        return "the key is empty";
    if (len > KEY_MAX)
        return "the key is longer than 250 bytes";
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)key[i];
        if (ch <= 0x20 || ch == 0x7f)
            return "the key contains a space or a control byte";
    }
    return NULL;
}

/* Mark `it` bad: it will fail alone, with `why`. */
static void item_bad(item *it, int status, const char *why)
{
    it->why = why;
    it->why_status = status;
}

/* Split buf (len bytes) into the items of `in`, one a line (without its
 * newline; a last line without newline counts, an empty input has none),
 * KEY<TAB>VALUE lines `with_values`. A bad line is marked (item_bad), its
 * key being the whole line when it has no TAB. */
static void split_lines(char *buf, size_t len, input *in, int with_values)
{
    size_t lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += buf[i] == '\n';
    if (len > 0 && buf[len - 1] != '\n')
        lines++;
    in->items = cli_xcalloc(lines, sizeof(item));
    in->n = 0;
    for (size_t start = 0; start < len;) {
        const char *nl = memchr(buf + start, '\n', len - start);
        size_t end = nl ? (size_t)(nl - buf) : len;
        size_t lineno = in->n + 1;
        item *it = &in->items[in->n++];
        it->key = buf + start;
        it->klen = end - start;
        it->lineno = lineno;
        start = end + 1;
        if (with_values) {
            const char *tab = memchr(it->key, '\t', it->klen);
            if (tab == NULL) {
                item_bad(it, MCR_ERR_SYNTAX,
                         "no TAB between the key and the value (expected KEY<TAB>VALUE)");
                continue;
            }
            it->value = tab + 1;
            it->vlen = it->klen - (size_t)(tab + 1 - it->key);
            it->klen = (size_t)(tab - it->key);
        }
        const char *why = key_problem(it->key, it->klen);
        if (why != NULL)
            item_bad(it, MCR_ERR_KEY, why);
        else if (it->vlen > VALUE_MAX)
            item_bad(it, MCR_ERR_TOO_BIG, "the value is over the limit"); /* see put_why */
    }
}

/* The keys of the arguments, or (none given) of standard input; with
 * `with_values`, KEY<TAB>VALUE lines of standard input. All of it is read
 * and checked here, before anything is sent; bad items are marked. */
static void read_input(int argc, char **argv, int with_values, input *in)
{
    memset(in, 0, sizeof(*in));
    if (argc > 0) {
        in->items = cli_xcalloc((size_t)argc, sizeof(item));
        for (int i = 0; i < argc; i++) {
            item *it = &in->items[in->n++];
            it->key = argv[i];
            it->klen = strlen(argv[i]);
            const char *why = key_problem(it->key, it->klen);
            if (why != NULL)
                item_bad(it, MCR_ERR_KEY, why);
        }
        return;
    }
    size_t len;
    in->buf = read_stdin(&len);
    split_lines(in->buf, len, in, with_values);
}

static void input_free(input *in)
{
    free(in->items);
    free(in->buf);
}

/* ------------------------------------------------------------ pool */

typedef struct settings {
    unsigned timeout_ms; /* 0: the pool's default */
    mcr_policy policy;
    int64_t ttl;
} settings;

static settings parse_settings(const char *cmd, const cli_source *src)
{
    settings st = {0, MCR_POLICY_FAIL_FAST, 0};
    if (src->timeout != NULL)
        st.timeout_ms = cli_parse_ms(cmd, "--timeout", src->timeout);
    if (src->policy != NULL && mcr_policy_from_name(src->policy, &st.policy) != MCR_OK)
        cli_die("%s: --failure-policy '%s': expected fail-fast, eject or failover", cmd,
                src->policy);
    if (src->ttl != NULL) {
        char *end;
        errno = 0;
        long long v = strtoll(src->ttl, &end, 10);
        if (*src->ttl < '0' || *src->ttl > '9' || *end != '\0' || errno != 0 || v > TTL_MAX)
            cli_die("%s: --ttl '%s': expected seconds, 0 to %lld", cmd, src->ttl, TTL_MAX);
        st.ttl = (int64_t)v;
    }
    return st;
}

/* A pool over the snapshot of SOURCE, on an event loop of its own. */
typedef struct conn {
    mcr_snapshot *snap; /* the placement of SOURCE, as given (a later epoch
                           than prev's with --previous) */
    mcr_snapshot *prev; /* --previous OLD: the migration's `from`, or NULL */
    mcr_router *router;
    struct event_base *base;
    mcr_pool *pool;
} conn;

static void conn_close(conn *c);

/* --previous OLD: c->prev, with c->snap at a later epoch than OLD's (a
 * placement built from servers is built again at OLD's epoch + 1; a
 * snapshot file or etcd pool must be later already). */
static void previous_open(conn *c, const char *cmd, cli_source *src)
{
    mcr_error err;
    c->prev = cli_operand_snapshot(cmd, src->previous, src);
    uint64_t pe = mcr_snapshot_epoch(c->prev), ne = mcr_snapshot_epoch(c->snap);
    if (ne > pe)
        return;
    if (src->snapshot != NULL || src->etcd != NULL) {
        mcr_snapshot_unref(c->prev);
        mcr_snapshot_unref(c->snap);
        free(src->behaviors);
        cli_die("%s: SOURCE is epoch %llu, not after --previous's epoch %llu", cmd,
                (unsigned long long)ne, (unsigned long long)pe);
    }
    mcr_config *cfg = cli_build_config(src);
    mcr_snapshot *again = NULL;
    int rc = pe >= UINT64_MAX - 1 ? MCR_ERR_RANGE : mcr_snapshot_new(cfg, pe + 1, &again, &err);
    mcr_config_free(cfg);
    if (rc != MCR_OK) {
        mcr_snapshot_unref(c->prev);
        mcr_snapshot_unref(c->snap);
        free(src->behaviors);
        cli_die("%s: %s", cmd, rc == MCR_ERR_RANGE ? "--previous's epoch is the last one"
                                                   : err.message);
    }
    mcr_snapshot_unref(c->snap);
    c->snap = again;
}

/* Everything a command needs before it sends anything: the snapshot of
 * SOURCE, the input (read and checked: bad items are marked, and fail
 * alone), then the pool. A bad SOURCE exits 2 here, with whatever was
 * built freed. */
static void conn_open(conn *c, const char *cmd, cli_source *src, const settings *st,
                      int no_coalesce, int argc, char **argv, int with_values, input *in)
{
    mcr_error err;

    memset(c, 0, sizeof(*c));
    /* The pool sends keys as they are given; a libmemcached namespace would
     * have to be sent in front of them, and the option string's namespace
     * cannot be read back from mcr_lmc. Refuse rather than store keys where
     * the application would not look. */
    if (src->libmemcached != NULL && strstr(src->libmemcached, "--NAMESPACE=") != NULL) {
        free(src->behaviors);
        cli_die("%s: --NAMESPACE is not supported here: the namespace would not be sent in "
                "front of the keys",
                cmd);
    }
    c->snap = cli_build_snapshot(src);
    if (src->previous != NULL)
        previous_open(c, cmd, src);
    read_input(argc, argv, with_values, in);
    int rc = mcr_router_new(c->snap, &c->router, &err);
    if (rc == MCR_OK && c->prev != NULL)
        rc = mcr_router_set_migration(c->router, c->prev, c->snap, 0, 0, &err);
    if (rc == MCR_OK && (c->base = event_base_new()) == NULL) {
        rc = MCR_ERR_NOMEM;
        snprintf(err.message, sizeof(err.message), "cannot create an event loop");
    }
    if (rc == MCR_OK) {
        mcr_pool_options opts;
        mcr_pool_options_init(&opts);
        opts.connect_timeout_ms = st->timeout_ms;
        opts.request_timeout_ms = st->timeout_ms;
        opts.policy = st->policy;
        opts.max_value_size = VALUE_MAX;
        opts.no_coalesce = no_coalesce;
        rc = mcr_pool_new(c->base, c->router, &opts, &c->pool, &err);
    }
    if (rc != MCR_OK) {
        input_free(in);
        conn_close(c);
        free(src->behaviors);
        cli_die("%s: %s", cmd, err.message);
    }
    /* A server that closes a connection must not kill the process with
     * SIGPIPE on the next write; a closed standard output becomes a write
     * error (exit status 1) instead. */
    signal(SIGPIPE, SIG_IGN);
}

static void conn_close(conn *c)
{
    mcr_pool_free(c->pool);
    if (c->base != NULL)
        event_base_free(c->base);
    mcr_router_free(c->router);
    mcr_snapshot_unref(c->snap);
    mcr_snapshot_unref(c->prev);
}

/* Run the event loop once: at least one event is handled. A pool with
 * requests pending always waits for something (a socket, a timer); if the
 * loop has nothing to wait for, the requests would never complete. */
static void loop_once(conn *c)
{
    int rc = event_base_loop(c->base, EVLOOP_ONCE);
    if (rc != 0) {
        fprintf(stderr, "%s: internal error: %zu requests pending, and the event loop %s\n",
                cli_progname, mcr_pool_pending(c->pool),
                rc < 0 ? "failed" : "has no event to wait for");
        exit(EXIT_FAILED);
    }
}

/* The reason of a failed result for KEY<TAB>error<TAB>REASON: its message
 * (or the name of its status), on one line, no control byte in it. */
static void put_reason(FILE *f, int status, const char *message)
{
    const char *m = message != NULL && *message != '\0' ? message : mcr_strerror(status);
    for (; *m != '\0'; m++)
        fputc((unsigned char)*m < 0x20 || *m == 0x7f ? ' ' : *m, f);
}

/* Whether `message` already begins with "SERVER: " (the pool's messages
 * name their server), so that it is not named twice. */
static int names_server(const char *message, const char *server)
{
    size_t n = strlen(server);
    return message != NULL && strncmp(message, server, n) == 0 && message[n] == ':';
}

/* Why a bad item fails: "line N: " (from standard input) and its reason. */
static void put_why(FILE *f, const item *it)
{
    if (it->lineno > 0)
        fprintf(f, "line %zu: ", it->lineno);
    if (it->why_status == MCR_ERR_TOO_BIG)
        fprintf(f, "the value is %zu bytes, over the limit of %u", it->vlen, VALUE_MAX);
    else
        fputs(it->why, f);
}

/* KEY<TAB>error<TAB>REASON on stderr, KEY escaped (cli_put_escaped): a bad
 * key is there because of its control bytes, which must not reach the
 * terminal that shows the line (nor a newline forge another line). */
static void report_failure(const item *it, const char *server, int status, const char *message)
{
    cli_progress_clear();
    cli_put_escaped(stderr, it->key, it->klen);
    fputs("\terror\t", stderr);
    if (it->why != NULL) { /* bad input: no server was asked */
        put_why(stderr, it);
        fputc('\n', stderr);
        return;
    }
    if (server != NULL && !names_server(message, server))
        fprintf(stderr, "%s: ", server);
    put_reason(stderr, status, message);
    fputc('\n', stderr);
}

/* A result's failure, kept until its key's turn to be reported. */
typedef struct failure {
    int status;
    char *message; /* malloc'd, or NULL (then mcr_strerror(status)) */
} failure;

static void failure_set(failure *f, int status, const char *message)
{
    f->status = status;
    free(f->message);
    f->message = message != NULL && *message != '\0' ? strdup(message) : NULL;
}

/* ------------------------------------------------------------ set, delete */

/* One key of set or delete: 0 while pending, 1 done, and what went wrong. */
typedef struct write_slot {
    int done;
    failure fail; /* status MCR_OK: it worked */
} write_slot;

static void write_done(const mcr_result *res, void *arg)
{
    write_slot *w = arg;
    w->done = 1;
    if (res->status != MCR_OK) {
        failure_set(&w->fail, res->status, res->message);
        return;
    }
    int ok = res->op == MCR_OP_SET ? res->reply == MCR_REPLY_STORED
                                   : res->reply == MCR_REPLY_DELETED || res->reply == MCR_REPLY_MISS;
    if (!ok) {
        char msg[128];
        snprintf(msg, sizeof(msg), "unexpected reply \"%s\" to %s", mcr_reply_name(res->reply),
                 mcr_op_name(res->op));
        failure_set(&w->fail, MCR_ERR_PROTOCOL, msg);
    }
}

/* Report, in input order, the keys done since the last call. */
static int report_writes(const input *in, write_slot *slots, size_t *reported)
{
    int failed = 0;
    while (*reported < in->n && slots[*reported].done) {
        write_slot *w = &slots[*reported];
        if (w->fail.status != MCR_OK) {
            report_failure(&in->items[*reported], NULL, w->fail.status, w->fail.message);
            failed = 1;
        }
        free(w->fail.message);
        w->fail.message = NULL;
        (*reported)++;
    }
    return failed;
}

static int run_writes(const char *cmd, int argc, char **argv, mcr_op op, unsigned allowed,
                      const char *usage)
{
    cli_source src;
    input in;
    conn c;
    int failed = 0;

    int first = cli_parse_options(argc, argv, &src, usage, allowed);
    settings st = parse_settings(cmd, &src);
    if (op == MCR_OP_SET && first < argc)
        cli_die("set: unexpected argument '%s' (set reads KEY<TAB>VALUE lines from standard "
                "input)",
                argv[first]);
    conn_open(&c, cmd, &src, &st, 0, argc - first, argv + first, op == MCR_OP_SET, &in);
    if (in.buf != NULL)
        cli_progress_start(cmd, in.n, false);

    write_slot *slots = cli_xcalloc(in.n, sizeof(*slots));
    size_t reported = 0;
    for (size_t i = 0; i < in.n; i++) {
        while (mcr_pool_pending(c.pool) >= MAX_IN_FLIGHT) {
            loop_once(&c);
            failed |= report_writes(&in, slots, &reported);
            cli_progress_update(reported);
        }
        if (in.items[i].why != NULL) { /* fails alone, reported in its turn */
            slots[i].done = 1;
            slots[i].fail.status = in.items[i].why_status;
            continue;
        }
        mcr_request req;
        mcr_error err;
        memset(&req, 0, sizeof(req));
        req.op = op;
        req.key = in.items[i].key;
        req.key_len = in.items[i].klen;
        req.value = in.items[i].value;
        req.value_len = in.items[i].vlen;
        req.exptime = st.ttl;
        int rc = mcr_pool_submit(c.pool, &req, write_done, &slots[i], &err);
        if (rc != MCR_OK) {
            slots[i].done = 1;
            failure_set(&slots[i].fail, rc, err.message);
        }
    }
    while (reported < in.n) {
        if (mcr_pool_pending(c.pool) == 0) {
            /* The pool says it is done, yet a key never got its callback. */
            for (size_t i = reported; i < in.n; i++)
                if (!slots[i].done) {
                    slots[i].done = 1;
                    failure_set(&slots[i].fail, MCR_ERR_PROTOCOL,
                                "internal error: the request was never completed");
                }
        } else {
            loop_once(&c);
        }
        failed |= report_writes(&in, slots, &reported);
        cli_progress_update(reported);
    }
    cli_progress_end();
    free(slots);
    conn_close(&c);
    input_free(&in);
    free(src.behaviors);
    int out = cli_finish_output();
    return failed ? EXIT_FAILED : out;
}

int cli_cmd_set(int argc, char **argv)
{
    return run_writes("set", argc, argv, MCR_OP_SET, ALLOW_SOURCE | ALLOW_POOL | ALLOW_PREVIOUS | ALLOW_TTL,
                      cli_usage_set);
}

int cli_cmd_delete(int argc, char **argv)
{
    return run_writes("delete", argc, argv, MCR_OP_DELETE, ALLOW_SOURCE | ALLOW_POOL | ALLOW_PREVIOUS,
                      cli_usage_delete);
}

/* ------------------------------------------------------------ get */

/* The result of one distinct key of a batch. */
typedef struct get_slot {
    const char *key; /* into the input */
    size_t klen;
    int seen;
    mcr_reply reply;
    char *value; /* malloc'd copy of a hit's value */
    size_t vlen;
    failure fail;
} get_slot;

/* GET_BATCH keys (or fewer) of the input, fetched by one mcr_pool_get_multi(). */
typedef struct get_batch {
    size_t first, n;  /* input items first .. first + n - 1 */
    size_t nd;        /* distinct keys, sorted, in slots[0 .. nd - 1] */
    get_slot *slots;
    size_t *slot_of;  /* item first + j is slots[slot_of[j]] */
    int done;
} get_batch;

static int cmp_bytes(const char *a, size_t al, const char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c != 0 ? c : (al > bl) - (al < bl);
}

typedef struct sort_entry {
    const char *key;
    size_t klen;
    size_t pos;
} sort_entry;

static int cmp_entry(const void *a, const void *b)
{
    const sort_entry *x = a, *y = b;
    int c = cmp_bytes(x->key, x->klen, y->key, y->klen);
    return c != 0 ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

/* The batch's slot of a key the pool reports (its index into the keys
 * given, checked against the slot's key), or NULL. */
static get_slot *slot_of(get_batch *b, const mcr_result *res)
{
    if (res->key == NULL || res->index >= b->nd)
        return NULL;
    get_slot *s = &b->slots[res->index];
    if (s->klen != res->key_len || (s->klen > 0 && memcmp(s->key, res->key, s->klen) != 0))
        return NULL;
    return s;
}

static void get_key_done(const mcr_result *res, void *arg)
{
    get_batch *b = arg;
    get_slot *s = slot_of(b, res);
    if (s == NULL || s->seen)
        return; /* not ours, or a duplicate report: the first one stands */
    s->seen = 1;
    if (res->status != MCR_OK) {
        failure_set(&s->fail, res->status, res->message);
        return;
    }
    s->reply = res->reply;
    if (res->reply == MCR_REPLY_HIT) {
        s->value = malloc(res->value_len + 1);
        if (s->value == NULL) {
            failure_set(&s->fail, MCR_ERR_NOMEM, NULL);
            return;
        }
        if (res->value_len > 0)
            memcpy(s->value, res->value, res->value_len);
        s->vlen = res->value_len;
    } else if (res->reply != MCR_REPLY_MISS) {
        char msg[128];
        snprintf(msg, sizeof(msg), "unexpected reply \"%s\" to get", mcr_reply_name(res->reply));
        failure_set(&s->fail, MCR_ERR_PROTOCOL, msg);
    }
}

static void get_batch_done(const mcr_result *res, void *arg)
{
    get_batch *b = arg;
    b->done = 1;
    for (size_t i = 0; i < b->nd; i++)
        if (!b->slots[i].seen) {
            /* Every key gets its own callback before this one; a key left
             * without one has no result, which is a failure of that key. */
            b->slots[i].seen = 1;
            failure_set(&b->slots[i].fail, res->status != MCR_OK ? res->status : MCR_ERR_PROTOCOL,
                        res->status != MCR_OK ? res->message : "no result for this key");
        }
}

static get_batch *get_batch_new(const input *in, size_t first, size_t n)
{
    get_batch *b = cli_xcalloc(1, sizeof(*b));
    sort_entry *e = cli_xcalloc(n, sizeof(*e));
    b->first = first;
    b->n = n;
    b->slots = cli_xcalloc(n, sizeof(*b->slots));
    b->slot_of = cli_xcalloc(n, sizeof(*b->slot_of));
    for (size_t j = 0; j < n; j++)
        e[j] = (sort_entry){in->items[first + j].key, in->items[first + j].klen, j};
    qsort(e, n, sizeof(*e), cmp_entry);
    for (size_t j = 0; j < n; j++) {
        if (in->items[first + e[j].pos].why != NULL) { /* bad: fails alone, not asked */
            b->slot_of[e[j].pos] = SIZE_MAX;
            continue;
        }
        if (b->nd == 0 || cmp_bytes(e[j].key, e[j].klen, b->slots[b->nd - 1].key,
                                    b->slots[b->nd - 1].klen) != 0) {
            b->slots[b->nd].key = e[j].key;
            b->slots[b->nd].klen = e[j].klen;
            b->nd++;
        }
        b->slot_of[e[j].pos] = b->nd - 1;
    }
    free(e);
    return b;
}

static void get_batch_submit(conn *c, get_batch *b)
{
    if (b->nd == 0) { /* every key of the batch is bad: nothing to ask */
        b->done = 1;
        return;
    }
    const void **keys = cli_xcalloc(b->nd, sizeof(*keys));
    size_t *lens = cli_xcalloc(b->nd, sizeof(*lens));
    for (size_t i = 0; i < b->nd; i++) {
        keys[i] = b->slots[i].key;
        lens[i] = b->slots[i].klen;
    }
    mcr_error err;
    int rc = mcr_pool_get_multi(c->pool, MCR_OP_GET, keys, lens, b->nd, get_key_done,
                                get_batch_done, b, &err);
    if (rc != MCR_OK) {
        for (size_t i = 0; i < b->nd; i++) {
            b->slots[i].seen = 1;
            failure_set(&b->slots[i].fail, rc, err.message);
        }
        b->done = 1;
    }
    free(keys);
    free(lens);
}

/* Print a finished batch in input order and free it; 1 if a key failed. */
static int get_batch_print(const input *in, get_batch *b)
{
    int failed = 0;
    for (size_t j = 0; j < b->n; j++) {
        const item *it = &in->items[b->first + j];
        if (b->slot_of[j] == SIZE_MAX) {
            report_failure(it, NULL, it->why_status, NULL);
            failed = 1;
            continue;
        }
        const get_slot *s = &b->slots[b->slot_of[j]];
        if (s->fail.status != MCR_OK) {
            report_failure(it, NULL, s->fail.status, s->fail.message);
            failed = 1;
        } else if (s->reply == MCR_REPLY_HIT) {
            cli_put_field(it->key, it->klen);
            putchar('\t');
            cli_put_field(s->value, s->vlen);
            putchar('\n');
        }
    }
    for (size_t i = 0; i < b->nd; i++) {
        free(b->slots[i].value);
        free(b->slots[i].fail.message);
    }
    free(b->slots);
    free(b->slot_of);
    free(b);
    return failed;
}

int cli_cmd_get(int argc, char **argv)
{
    cli_source src;
    input in;
    conn c;
    int failed = 0;

    int first = cli_parse_options(argc, argv, &src, cli_usage_get, ALLOW_SOURCE | ALLOW_POOL | ALLOW_PREVIOUS);
    settings st = parse_settings("get", &src);
    conn_open(&c, "get", &src, &st, 0, argc - first, argv + first, 0, &in);
    if (in.buf != NULL)
        cli_progress_start("get", in.n, true);

    /* A window of batches: the oldest is printed as soon as it is done,
     * while the next ones are on the wire. */
    get_batch *window[GET_WINDOW];
    size_t head = 0, count = 0, next = 0;
    while (next < in.n || count > 0) {
        while (count < GET_WINDOW && next < in.n) {
            size_t n = in.n - next < GET_BATCH ? in.n - next : GET_BATCH;
            get_batch *b = get_batch_new(&in, next, n);
            get_batch_submit(&c, b);
            window[(head + count) % GET_WINDOW] = b;
            count++;
            next += n;
        }
        get_batch *b = window[head];
        while (!b->done) {
            if (mcr_pool_pending(c.pool) == 0) {
                get_batch_done(&(mcr_result){.status = MCR_ERR_PROTOCOL,
                                             .message = "internal error: the request was "
                                                        "never completed"},
                               b);
                break;
            }
            loop_once(&c);
        }
        size_t done = b->first + b->n;
        failed |= get_batch_print(&in, b);
        cli_progress_update(done);
        head = (head + 1) % GET_WINDOW;
        count--;
        if (ferror(stdout))
            next = in.n; /* output is lost (a closed pipe): fetch no more */
    }
    cli_progress_end();
    conn_close(&c);
    input_free(&in);
    free(src.behaviors);
    int out = cli_finish_output();
    return failed ? EXIT_FAILED : out;
}

/* ------------------------------------------------------------ probe */

/* One (key, server) question of probe. */
typedef struct probe_cell {
    int done;
    int holds;
    failure fail;
} probe_cell;

static void probe_done(const mcr_result *res, void *arg)
{
    probe_cell *p = arg;
    p->done = 1;
    if (res->status != MCR_OK)
        failure_set(&p->fail, res->status, res->message);
    else if (res->reply == MCR_REPLY_HIT)
        p->holds = 1;
    else if (res->reply != MCR_REPLY_MISS)
        failure_set(&p->fail, MCR_ERR_PROTOCOL, "unexpected reply to get");
}

/* Where probe prints: lines, or the items of one JSON document. */
typedef struct probe_out {
    int json;
    size_t count; /* JSON items printed */
} probe_out;

static void probe_json_failure(probe_out *po, const item *it, const char *server, int status,
                               const char *message)
{
    const char *m = message != NULL && *message != '\0' ? message : mcr_strerror(status);
    char why[160];
    if (it->why != NULL) { /* bad input: no server was asked */
        if (it->why_status == MCR_ERR_TOO_BIG)
            snprintf(why, sizeof(why), "the value is %zu bytes, over the limit of %u", it->vlen,
                     VALUE_MAX);
        else
            snprintf(why, sizeof(why), "%s", it->why);
        m = why;
        server = NULL;
    }
    if (server != NULL && names_server(m, server))
        server = NULL;
    size_t len = (server ? strlen(server) + 2 : 0) + strlen(m);
    char *text = cli_xcalloc(len + 1, 1);
    snprintf(text, len + 1, "%s%s%s", server ? server : "", server ? ": " : "", m);
    fputs(po->count++ ? ",\n  {" : "\n  {", stdout);
    cli_json_key_member(stdout, "key", it->key, it->klen);
    fputs(", \"error\": ", stdout);
    cli_json_string(stdout, text, len);
    putchar('}');
    free(text);
}

/* Print, in input order, the keys whose every server has answered. */
static int report_probes(const conn *c, const input *in, probe_cell *cells,
                         const char *const *ids, size_t ns, size_t *reported, probe_out *po)
{
    int failed = 0;
    for (; *reported < in->n; (*reported)++) {
        probe_cell *row = &cells[*reported * ns];
        size_t s;
        for (s = 0; s < ns && row[s].done; s++) {
        }
        if (s < ns)
            break;
        const item *it = &in->items[*reported];
        mcr_server_desc d;
        int bad = -1;
        for (s = 0; s < ns && bad < 0; s++)
            if (row[s].fail.status != MCR_OK)
                bad = (int)s;
        if (it->why != NULL) { /* bad input: no server was asked */
            report_failure(it, NULL, it->why_status, NULL);
            if (po->json)
                probe_json_failure(po, it, NULL, it->why_status, NULL);
            failed = 1;
        } else if (bad >= 0) {
            report_failure(it, ids[bad], row[bad].fail.status, row[bad].fail.message);
            if (po->json)
                probe_json_failure(po, it, ids[bad], row[bad].fail.status,
                                   row[bad].fail.message);
            failed = 1;
        } else if (po->json) {
            uint32_t owner = mcr_snapshot_locate(c->snap, it->key, it->klen);
            mcr_snapshot_server(c->snap, owner, &d);
            fputs(po->count++ ? ",\n  {" : "\n  {", stdout);
            cli_json_key_member(stdout, "key", it->key, it->klen);
            fputs(", \"owner\": ", stdout);
            cli_json_string(stdout, d.id, strlen(d.id));
            if (c->prev != NULL) {
                mcr_snapshot_server(c->prev, mcr_snapshot_locate(c->prev, it->key, it->klen), &d);
                fputs(", \"previous_owner\": ", stdout);
                cli_json_string(stdout, d.id, strlen(d.id));
            }
            fputs(", \"holders\": [", stdout);
            int any = 0;
            for (s = 0; s < ns; s++)
                if (row[s].holds) {
                    if (any)
                        fputs(", ", stdout);
                    cli_json_string(stdout, ids[s], strlen(ids[s]));
                    any = 1;
                }
            fputs("]}", stdout);
        } else {
            uint32_t owner = mcr_snapshot_locate(c->snap, it->key, it->klen);
            mcr_snapshot_server(c->snap, owner, &d);
            cli_put_field(it->key, it->klen);
            printf("\t%s\t", d.id);
            int any = 0;
            for (s = 0; s < ns; s++)
                if (row[s].holds) {
                    printf("%s%s", any ? "," : "", ids[s]);
                    any = 1;
                }
            if (!any)
                putchar('-');
            if (c->prev != NULL) {
                mcr_snapshot_server(c->prev, mcr_snapshot_locate(c->prev, it->key, it->klen), &d);
                printf("\t%s", d.id);
            }
            putchar('\n');
        }
        for (s = 0; s < ns; s++) {
            free(row[s].fail.message);
            row[s].fail.message = NULL;
        }
    }
    return failed;
}

int cli_cmd_probe(int argc, char **argv)
{
    cli_source src;
    input in;
    conn c;
    int failed = 0;

    int first = cli_parse_options(argc, argv, &src, cli_usage_probe,
                                  ALLOW_SOURCE | ALLOW_POOL | ALLOW_PREVIOUS | ALLOW_JSON);
    settings st = parse_settings("probe", &src);
    /* Coalescing would answer a get aimed at one server with the reply of
     * the same key's get aimed at another. With no KEY, the keys are the
     * lines of standard input, as for get and delete. */
    conn_open(&c, "probe", &src, &st, 1, argc - first, argv + first, 0, &in);
    if (in.buf != NULL)
        cli_progress_start("probe", in.n, true);

    /* The servers of SOURCE, then those only --previous names. */
    size_t nsnap = mcr_snapshot_server_count(c.snap);
    size_t nprev = c.prev != NULL ? mcr_snapshot_server_count(c.prev) : 0;
    char **ids = cli_xcalloc(nsnap + nprev + 1, sizeof(*ids));
    size_t ns = 0;
    for (size_t i = 0; i < nsnap + nprev; i++) {
        mcr_server_desc d;
        mcr_snapshot_server(i < nsnap ? c.snap : c.prev, i < nsnap ? i : i - nsnap, &d);
        if (i >= nsnap && mcr_snapshot_find(c.snap, d.id) != MCR_NO_SERVER)
            continue;
        ids[ns] = strdup(d.id);
        if (ids[ns++] == NULL)
            cli_fail("out of memory");
    }
    probe_out po = {src.json, 0};
    if (po.json)
        fputs("{\"keys\": [", stdout);
    probe_cell *cells = cli_xcalloc(in.n * ns, sizeof(*cells));
    size_t reported = 0;
    for (size_t i = 0; i < in.n; i++)
        for (size_t s = 0; s < ns; s++) {
            while (mcr_pool_pending(c.pool) >= MAX_IN_FLIGHT) {
                loop_once(&c);
                failed |= report_probes(&c, &in, cells, (const char *const *)ids, ns,
                                        &reported, &po);
                cli_progress_update(reported);
            }
            mcr_request req;
            mcr_error err;
            memset(&req, 0, sizeof(req));
            req.op = MCR_OP_GET;
            req.key = in.items[i].key;
            req.key_len = in.items[i].klen;
            req.server = ids[s];
            probe_cell *p = &cells[i * ns + s];
            if (in.items[i].why != NULL) { /* bad: fails alone, no server asked */
                p->done = 1;
                continue;
            }
            int rc = mcr_pool_submit(c.pool, &req, probe_done, p, &err);
            if (rc != MCR_OK) {
                p->done = 1;
                failure_set(&p->fail, rc, err.message);
            }
        }
    while (reported < in.n) {
        if (mcr_pool_pending(c.pool) == 0) {
            for (size_t i = reported * ns; i < in.n * ns; i++)
                if (!cells[i].done) {
                    cells[i].done = 1;
                    failure_set(&cells[i].fail, MCR_ERR_PROTOCOL,
                                "internal error: the request was never completed");
                }
        } else {
            loop_once(&c);
        }
        failed |= report_probes(&c, &in, cells, (const char *const *)ids, ns, &reported, &po);
        cli_progress_update(reported);
    }
    cli_progress_end();
    for (size_t i = 0; i < ns; i++)
        free(ids[i]);
    free(ids);
    if (po.json)
        fputs(po.count ? "\n]}\n" : "]}\n", stdout);
    free(cells);
    conn_close(&c);
    input_free(&in);
    free(src.behaviors);
    int out = cli_finish_output();
    return failed ? EXIT_FAILED : out;
}
