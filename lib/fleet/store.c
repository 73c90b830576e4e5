/* SPDX-License-Identifier: BSD-3-Clause */
/* store.c: a pool kept in etcd: options, reading it, and changing it by compare-and-swap (mcr_fleet_read, _change, _publish, _clients). */
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "fleet_internal.h"

/* ------------------------------------------------------------ options */

void mcr_fleet_options_init(mcr_fleet_options *o)
{
    if (o == NULL)
        return;
    memset(o, 0, sizeof(*o));
    o->prefix = MCR_FLEET_PREFIX;
    o->request_timeout_ms = MCR_FLEET_REQUEST_TIMEOUT_MS;
    o->wait_ms = MCR_FLEET_WAIT_MS;
    o->retries = MCR_FLEET_RETRIES;
}

bool mcr__fleet_name_ok(const char *s)
{
    size_t n = 0;
    if (s == NULL)
        return false;
    for (; s[n] != '\0'; n++) {
        char c = s[n];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-' || c == ':'))
            return false;
    }
    return n >= 1 && n <= MCR_FLEET_NAME_MAX;
}

void mcr__fleet_sigpipe_block(sigset_t *old)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &s, old);
}

void mcr__fleet_sigpipe_restore(const sigset_t *old)
{
    if (!sigismember(old, SIGPIPE)) {
        sigset_t s, pending;
        sigemptyset(&s);
        sigaddset(&s, SIGPIPE);
        struct timespec zero = {0, 0};
        while (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) &&
               sigtimedwait(&s, NULL, &zero) == SIGPIPE)
            ;
    }
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

uint64_t mcr__fleet_unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t mcr__fleet_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static char *cat3(const char *a, const char *b, const char *c)
{
    size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
    char *s = malloc(la + lb + lc + 1);
    if (s != NULL) {
        memcpy(s, a, la);
        memcpy(s + la, b, lb);
        memcpy(s + la + lb, c, lc + 1);
    }
    return s;
}

void mcr__fleet_conf_cleanup(mcr__fleet_conf *c)
{
    free(c->endpoints);
    free(c->pool);
    free(c->prefix);
    free(c->snapshot_key);
    free(c->clients_prefix);
    free(c->migration_key);
    free(c->lock_key);
    memset(c, 0, sizeof(*c));
}

int mcr__fleet_conf_init(mcr__fleet_conf *c, const mcr_fleet_options *o, mcr_error *err)
{
    char q[160];
    memset(c, 0, sizeof(*c));
    if (o == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL fleet options");
    if (!mcr__zeroed(o->reserved, sizeof(o->reserved)))
        return mcr__error(err, MCR_ERR_INVALID,
                          "mcr_fleet_options: the reserved area is not zero (fill the "
                          "struct from all-zero: mcroute.h)");
    if (o->endpoints == NULL || *o->endpoints == '\0')
        return mcr__error(err, MCR_ERR_INVALID, "fleet options: no etcd endpoints");
    if (o->pool == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "fleet options: no pool name");
    if (!mcr__fleet_name_ok(o->pool))
        return mcr__error(err, MCR_ERR_INVALID,
                          "fleet options: pool name \"%s\": need 1 to %d of A-Z a-z 0-9 . _ - :",
                          mcr__quote(q, sizeof(q), o->pool, strlen(o->pool)),
                          MCR_FLEET_NAME_MAX);
    const char *prefix = o->prefix ? o->prefix : MCR_FLEET_PREFIX;
    size_t pl = strlen(prefix);
    if (pl == 0 || prefix[0] != '/' || prefix[pl - 1] != '/' || pl > 512)
        return mcr__error(err, MCR_ERR_INVALID,
                          "fleet options: key prefix \"%s\": must start and end with '/'",
                          mcr__quote(q, sizeof(q), prefix, pl));
    for (size_t i = 0; i < pl; i++)
        if ((unsigned char)prefix[i] <= 0x20 || (unsigned char)prefix[i] >= 0x7f)
            return mcr__error(err, MCR_ERR_INVALID,
                              "fleet options: key prefix \"%s\": a space or control byte",
                              mcr__quote(q, sizeof(q), prefix, pl));
    if (o->request_timeout_ms > MCR_FLEET_LIMIT_S * 1000u || o->wait_ms > MCR_FLEET_LIMIT_S * 1000u)
        return mcr__error(err, MCR_ERR_INVALID,
                          "fleet options: request_timeout_ms and wait_ms: at most %u s",
                          MCR_FLEET_LIMIT_S);
    if (o->retries > 10000u)
        return mcr__error(err, MCR_ERR_INVALID, "fleet options: retries: at most 10000");
    c->endpoints = strdup(o->endpoints);
    c->pool = strdup(o->pool);
    c->prefix = strdup(prefix);
    char *base = cat3(prefix, o->pool, "");
    if (base != NULL) {
        c->snapshot_key = cat3(base, "/snapshot", "");
        c->clients_prefix = cat3(base, "/clients/", "");
        c->migration_key = cat3(base, "/migration", "");
        c->lock_key = cat3(base, "/migration-lock", "");
    }
    free(base);
    c->request_timeout_ms = o->request_timeout_ms ? o->request_timeout_ms
                                                  : MCR_FLEET_REQUEST_TIMEOUT_MS;
    c->wait_ms = o->wait_ms ? o->wait_ms : MCR_FLEET_WAIT_MS;
    c->retries = o->retries ? o->retries : MCR_FLEET_RETRIES;
    if (c->endpoints == NULL || c->pool == NULL || c->prefix == NULL ||
        c->snapshot_key == NULL || c->clients_prefix == NULL || c->migration_key == NULL ||
        c->lock_key == NULL) {
        mcr__fleet_conf_cleanup(c);
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory");
    }
    return MCR_OK;
}

/* ------------------------------------------------------------ reading */

int mcr__fleet_parse(const mcr__fleet_conf *c, const unsigned char *value, size_t len,
                     uint64_t mod_revision, const mcr_snapshot *current, mcr_snapshot **out,
                     mcr_error *err)
{
    char name[700];
    snprintf(name, sizeof(name), "etcd key %s (revision %llu)", c->snapshot_key,
             (unsigned long long)mod_revision);
    return mcr_snapshot_parse((const char *)value, len, name, current, 0, out, err);
}

int mcr__fleet_get(mcr__etcd *e, const mcr__fleet_conf *c, bool *missing, mcr_snapshot **out,
                   uint64_t *mod_revision, uint64_t *revision, mcr_error *err)
{
    if (missing != NULL)
        *missing = false;
    bool found = false;
    mcr__etcd_kv kv;
    uint64_t rev = 0;
    int rc = mcr__etcd_get(e, c->snapshot_key, &found, &kv, &rev, err);
    if (rc != MCR_OK)
        return rc;
    if (revision != NULL)
        *revision = rev;
    if (!found) {
        if (missing != NULL)
            *missing = true;
        return mcr__error(err, MCR_ERR_UNKNOWN, "no pool \"%s\" in etcd (no key %s)", c->pool,
                          c->snapshot_key);
    }
    rc = mcr__fleet_parse(c, kv.value, kv.value_len, kv.mod_revision, NULL, out, err);
    if (rc == MCR_OK && mod_revision != NULL)
        *mod_revision = kv.mod_revision;
    mcr__etcd_kv_clear(&kv);
    return rc;
}

/* ------------------------------------------------------------ blocking calls */

int mcr__fleet_session_open(mcr__fleet_session *s, const mcr_fleet_options *o, mcr_error *err)
{
    memset(s, 0, sizeof(*s));
    int rc = mcr__fleet_conf_init(&s->c, o, err);
    if (rc != MCR_OK)
        return rc;
    rc = mcr__etcd_init(&s->e, s->c.endpoints, s->c.request_timeout_ms, err);
    if (rc != MCR_OK) {
        mcr__etcd_cleanup(&s->e);
        mcr__fleet_conf_cleanup(&s->c);
        return rc;
    }
    mcr__fleet_sigpipe_block(&s->sigmask);
    s->deadline = mcr__fleet_now_ms() + s->c.wait_ms;
    s->backoff_ms = MCR_FLEET_RETRY_MIN_MS;
    return MCR_OK;
}

void mcr__fleet_session_close(mcr__fleet_session *s)
{
    mcr__etcd_cleanup(&s->e);
    mcr__fleet_conf_cleanup(&s->c);
    mcr__fleet_sigpipe_restore(&s->sigmask);
}

/* After a failed round: wait (on the client's event_base, so nothing else
 * is blocked) and say whether to try again. */
bool mcr__fleet_session_again(mcr__fleet_session *s, int rc)
{
    if (rc != MCR_ERR_CONNECT)
        return false;
    uint64_t now = mcr__fleet_now_ms();
    if (now >= s->deadline)
        return false;
    uint64_t wait = s->backoff_ms;
    if (now + wait > s->deadline)
        wait = s->deadline - now;
    struct timeval tv = {(time_t)(wait / 1000), (suseconds_t)(wait % 1000) * 1000};
    event_base_loopexit(s->e.base, &tv);
    event_base_dispatch(s->e.base);
    s->backoff_ms = s->backoff_ms * 2 > MCR_FLEET_RETRY_MAX_MS ? MCR_FLEET_RETRY_MAX_MS
                                                               : s->backoff_ms * 2;
    return true;
}

int mcr_fleet_read(const mcr_fleet_options *o, mcr_snapshot **out, uint64_t *revision,
                   mcr_error *err)
{
    mcr__fleet_session s;
    if (out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL output");
    int rc = mcr__fleet_session_open(&s, o, err);
    if (rc != MCR_OK)
        return rc;
    do
        rc = mcr__fleet_get(&s.e, &s.c, NULL, out, NULL, revision, err);
    while (mcr__fleet_session_again(&s, rc));
    mcr__fleet_session_close(&s);
    return rc;
}

/* The next snapshot of `cur`: `changes` applied, or (publish) the changes
 * to `target`'s list. *next NULL: nothing to store. */
typedef int (*next_fn)(const mcr_snapshot *cur, const void *arg, mcr_snapshot **next,
                       mcr_error *err);

static int next_by_changes(const mcr_snapshot *cur, const void *arg, mcr_snapshot **next,
                           mcr_error *err)
{
    const mcr_changes *ch = arg;
    *next = NULL;
    if (mcr_changes_count(ch) == 0)
        return MCR_OK;
    return mcr_snapshot_apply(cur, ch, next, err);
}

/* ------------------------------------------------------------ placement parameters */

/* Whether line `p` (of the `end - p` bytes left) starts with `word`. */
static bool line_is(const char *p, const char *end, const char *word)
{
    size_t n = strlen(word);
    return (size_t)(end - p) >= n && memcmp(p, word, n) == 0;
}

bool mcr__fleet_params_at(const char *text, size_t len, const char **at, size_t *n)
{
    const char *p = text, *end = text + len, *a = NULL;
    while (p < end) {
        if (a == NULL && line_is(p, end, "mode "))
            a = p;
        else if (a != NULL && line_is(p, end, "servers ")) {
            *at = a;
            *n = (size_t)(p - a);
            return true;
        }
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (nl == NULL)
            break;
        p = nl + 1;
    }
    return false;
}

bool mcr__fleet_params_differ(const char *a, size_t na, const char *b, size_t nb, char *la,
                              char *lb, size_t cap)
{
    if (na == nb && memcmp(a, b, na) == 0)
        return false;
    size_t i = 0, m = na < nb ? na : nb;
    while (i < m && a[i] == b[i])
        i++;
    while (i > 0 && a[i - 1] != '\n') /* the line's start, the same in both */
        i--;
    const char *ea = memchr(a + i, '\n', na - i), *eb = memchr(b + i, '\n', nb - i);
    mcr__quote(la, cap, a + i, ea ? (size_t)(ea - (a + i)) : na - i);
    mcr__quote(lb, cap, b + i, eb ? (size_t)(eb - (b + i)) : nb - i);
    return true;
}

int mcr__fleet_params_cmp(const mcr_snapshot *a, const mcr_snapshot *b, bool *same, char *la,
                          char *lb, size_t cap, mcr_error *err)
{
    char *ta = NULL, *tb = NULL;
    size_t lena = 0, lenb = 0, na = 0, nb = 0;
    const char *pa = NULL, *pb = NULL;
    int rc = mcr_snapshot_text(a, &ta, &lena, err);
    if (rc == MCR_OK)
        rc = mcr_snapshot_text(b, &tb, &lenb, err);
    if (rc == MCR_OK && (!mcr__fleet_params_at(ta, lena, &pa, &na) ||
                         !mcr__fleet_params_at(tb, lenb, &pb, &nb)))
        rc = mcr__error(err, MCR_ERR_CORRUPT, "a snapshot text without its header");
    if (rc == MCR_OK)
        *same = !mcr__fleet_params_differ(pa, na, pb, nb, la, lb, cap);
    free(ta);
    free(tb);
    return rc;
}

/* A pool keeps its placement parameters: `target`'s must be `pool`'s. */
static int same_params(const mcr_snapshot *pool, const mcr_snapshot *target, mcr_error *err)
{
    char la[128], lb[128];
    bool same = false;
    int rc = mcr__fleet_params_cmp(pool, target, &same, la, lb, sizeof(la), err);
    if (rc == MCR_OK && !same)
        rc = mcr__error(err, MCR_ERR_INVALID,
                        "the pool's placement parameters differ from the list's: the pool "
                        "has \"%s\", the list \"%s\" (a pool keeps its parameters)",
                        la, lb);
    return rc;
}

/* The next snapshot: the changes from `cur` to `target`'s list (with its
 * states when `flags` says MCR_CHANGES_STATES), computed again from each
 * snapshot read; *next NULL when the lists match. */
int mcr__fleet_next_to(const mcr_snapshot *cur, const mcr_snapshot *target, unsigned flags,
                       mcr_snapshot **next, mcr_error *err)
{
    mcr_changes *ch = NULL;
    size_t n = 0;
    *next = NULL;
    int rc = same_params(cur, target, err);
    if (rc == MCR_OK)
        rc = mcr_changes_between(cur, target, flags, &ch, &n, err);
    if (rc == MCR_OK && n > 0)
        rc = mcr_snapshot_apply(cur, ch, next, err);
    mcr_changes_free(ch);
    return rc;
}

/* publish: a server list (states kept); publish_snapshot: with states. */
static int next_by_list(const mcr_snapshot *cur, const void *arg, mcr_snapshot **next,
                        mcr_error *err)
{
    return mcr__fleet_next_to(cur, arg, 0, next, err);
}

static int next_by_snapshot(const mcr_snapshot *cur, const void *arg, mcr_snapshot **next,
                            mcr_error *err)
{
    return mcr__fleet_next_to(cur, arg, MCR_CHANGES_STATES, next, err);
}

/* Whether a write of ours that an endpoint left unanswered (see cas_loop)
 * is in the key's history, other writes possibly after it: it would be the
 * first modification of the key after `after` (the mod_revision its
 * compare named; 0 for a creation). Found by bisecting the revisions from
 * after + 1 to the key's current mod_revision `modrev` (ranges as of a
 * revision, keys only: the key's mod_revision there does not decrease),
 * then told by its checksum, the text's last line (it covers the epoch).
 * 1: it is there; 0: it is not, or that history is compacted or
 * unreadable; MCR_ERR_NOMEM (err set): memory ran out reading it, so it
 * cannot be told. */
static int landed(mcr__fleet_session *s, uint64_t after, uint64_t modrev, const char *sum,
                  mcr_error *err)
{
    uint64_t lo = after + 1, hi = modrev;
    const size_t cl = strlen("checksum ") + MCR_SNAPSHOT_CHECKSUM_LEN + 1;
    mcr__etcd_kv kv;
    bool found = false, mine;
    mcr_error e2;

    int rc;
    if (hi < lo)
        return 0;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2, m = 0;
        rc = mcr__etcd_get_at(&s->e, s->c.snapshot_key, mid, true, &found, &kv, NULL, &e2);
        if (rc == MCR_ERR_NOMEM)
            return mcr__error(err, rc, "%s", e2.message);
        if (rc != MCR_OK)
            return 0;
        if (found) {
            m = kv.mod_revision;
            mcr__etcd_kv_clear(&kv);
        }
        if (m > after)
            hi = mid;
        else
            lo = mid + 1;
    }
    rc = mcr__etcd_get_at(&s->e, s->c.snapshot_key, lo, false, &found, &kv, NULL, &e2);
    if (rc == MCR_ERR_NOMEM)
        return mcr__error(err, rc, "%s", e2.message);
    if (rc != MCR_OK || !found)
        return 0;
    mine = kv.mod_revision > after && kv.value_len >= cl && kv.value[kv.value_len - 1] == '\n' &&
           memcmp(kv.value + kv.value_len - cl, "checksum ", 9) == 0 &&
           memcmp(kv.value + kv.value_len - cl + 9, sum, MCR_SNAPSHOT_CHECKSUM_LEN) == 0;
    mcr__etcd_kv_clear(&kv);
    return mine ? 1 : 0;
}


int mcr__fleet_outcome_unknown(mcr_error *err, int rc, const char *what)
{
    char m[MCR_ERROR_MESSAGE_SIZE];
    snprintf(m, sizeof(m), "%s", err ? err->message : "etcd unreachable");
    return mcr__error(err, rc == MCR_ERR_NOMEM ? rc : MCR_ERR_CONNECT,
                      "outcome unknown: %s may have been stored; read it before trying again "
                      "(%s)",
                      what, m);
}

/* A write was sent and no answer came back (rc MCR_ERR_CONNECT), or memory
 * ran out where it would have been read (MCR_ERR_NOMEM), nor could a read
 * tell whether it landed: say so, so that an operator checks before doing
 * it again. */
static int outcome_unknown(mcr_error *err, int rc, uint64_t epoch, const char *sum)
{
    char what[96];
    snprintf(what, sizeof(what), "epoch %llu (checksum %s) of the pool",
             (unsigned long long)epoch, sum);
    return mcr__fleet_outcome_unknown(err, rc, what);
}

/* Writers store no epoch that followers refuse (follow.c): none at or
 * above MCR__FLEET_EPOCH_LIMIT, and none built on a value more than
 * MCR__FLEET_EPOCH_JUMP above the one before it (a hand-written epoch: the
 * followers refused it, and they would refuse every epoch built on it). So
 * a change to such a pool fails, pointing to the repair. The value before
 * `cur` (the key as of its mod_revision `modrev` - 1) is read only for an
 * epoch above the jump, which no pool reaches one change at a time, and
 * tells only while etcd keeps that revision (not compacted). */
static int check_room(mcr__fleet_session *s, const mcr_snapshot *cur, uint64_t modrev,
                      mcr_error *err)
{
    uint64_t e = mcr_snapshot_epoch(cur);
    if (e >= MCR__FLEET_EPOCH_LIMIT - 1)
        return mcr__error(err, MCR_ERR_RANGE,
                          "pool \"%s\" is at epoch %llu (revision %llu): its next epoch would "
                          "be 2^63 or more, which followers refuse (a forged or corrupt value?): "
                          "write back the last good snapshot",
                          s->c.pool, (unsigned long long)e, (unsigned long long)modrev);
    if (e <= MCR__FLEET_EPOCH_JUMP || modrev <= 1)
        return MCR_OK;
    mcr__etcd_kv kv;
    bool found = false;
    int rc;
    do
        rc = mcr__etcd_get_at(&s->e, s->c.snapshot_key, modrev - 1, false, &found, &kv, NULL,
                              err);
    while (mcr__fleet_session_again(s, rc));
    if (rc == MCR_ERR_CONNECT || rc == MCR_ERR_NOMEM)
        return rc;
    if (rc != MCR_OK || !found)
        return MCR_OK; /* compacted, or created there: cannot be told */
    mcr_snapshot *prev = NULL;
    mcr_error e2;
    rc = mcr__fleet_parse(&s->c, kv.value, kv.value_len, kv.mod_revision, NULL, &prev, &e2);
    uint64_t pe = rc == MCR_OK ? mcr_snapshot_epoch(prev) : 0, pm = kv.mod_revision;
    mcr_snapshot_unref(prev);
    mcr__etcd_kv_clear(&kv);
    if (rc == MCR_ERR_NOMEM)
        return mcr__error(err, rc, "%s", e2.message);
    if (rc == MCR_OK && pe < e && e - pe > MCR__FLEET_EPOCH_JUMP)
        return mcr__error(err, MCR_ERR_RANGE,
                          "pool \"%s\" is at epoch %llu (revision %llu), more than 2^32 above "
                          "epoch %llu before it (revision %llu), which followers refuse (a forged "
                          "or corrupt value?): write back the last good snapshot",
                          s->c.pool, (unsigned long long)e, (unsigned long long)modrev,
                          (unsigned long long)pe, (unsigned long long)pm);
    return MCR_OK;
}

/* Read, compute the next snapshot, compare-and-swap; again on conflict.
 * `create`: the snapshot that creates a missing pool (else a missing pool
 * is MCR_ERR_UNKNOWN).
 *
 * A compare-and-swap that an endpoint did not answer (a timeout, a
 * connection lost, an HTTP 5xx such as a leader lost: e.failures counts
 * them, and the request then goes to the next endpoint) may still have been
 * committed; tried again, its compare fails against our own write, and
 * another writer may have built on it meanwhile. So the next read is
 * checked first: when it holds exactly what we tried to write (epoch and
 * checksum), or the key's history has it right after the revision our
 * compare named (landed()), that write is stored and the call succeeded.
 * Without this, applying the changes again gave MCR_ERR_DUPLICATE for an
 * add that was stored, or a second epoch for a set-weight (found by
 * test_fleet_store reply_lost, reply_lost_then_overwritten and
 * test_fleet_cluster leader_killed). Only a writer storing the very same
 * snapshot (same changes on the same epoch) could look alike, and then the
 * pool holds what both asked for. With that history compacted away, the
 * changes are applied again, as for any conflict. */
static int cas_loop(mcr__fleet_session *s, next_fn fn, const void *arg, const mcr_snapshot *create,
                    uint64_t *epoch, mcr_error *err)
{
    int rc = MCR_OK;
    /* an unanswered write of ours: its epoch, checksum, compared revision */
    uint64_t sent_epoch = 0, sent_after = 0;
    char sent_sum[MCR_SNAPSHOT_CHECKSUM_LEN + 1] = "";
    for (unsigned attempt = 0; attempt < s->c.retries; attempt++) {
        mcr_snapshot *cur = NULL, *next = NULL;
        uint64_t modrev = 0;
        bool missing = false;
        do
            rc = mcr__fleet_get(&s->e, &s->c, &missing, &cur, &modrev, NULL, err);
        while (mcr__fleet_session_again(s, rc));
        if (rc == MCR_OK && sent_epoch != 0) {
            int in = mcr_snapshot_epoch(cur) == sent_epoch &&
                             strcmp(mcr_snapshot_checksum(cur), sent_sum) == 0
                         ? 1
                         : landed(s, sent_after, modrev, sent_sum, err);
            if (in == 1) {
                if (epoch != NULL)
                    *epoch = sent_epoch;
                mcr_snapshot_unref(cur);
                return MCR_OK;
            }
            if (in != 0) { /* memory ran out looking: it cannot be told */
                mcr_snapshot_unref(cur);
                return outcome_unknown(err, MCR_ERR_NOMEM, sent_epoch, sent_sum);
            }
            sent_epoch = 0; /* it did not land: a conflict as any other */
        }
        const mcr_snapshot *write;
        if (missing && create != NULL) {
            write = create;
            modrev = 0; /* only if it still does not exist */
        } else if (rc != MCR_OK) {
            if (sent_epoch != 0 && (rc == MCR_ERR_CONNECT || rc == MCR_ERR_NOMEM))
                return outcome_unknown(err, rc, sent_epoch, sent_sum);
            return rc;
        } else {
            rc = check_room(s, cur, modrev, err);
            if (rc == MCR_OK)
                rc = fn(cur, arg, &next, err);
            if (rc != MCR_OK || next == NULL) {
                if (rc == MCR_OK && epoch != NULL)
                    *epoch = mcr_snapshot_epoch(cur);
                mcr_snapshot_unref(cur);
                return rc;
            }
            write = next;
        }
        char *text = NULL;
        size_t len = 0;
        bool ok = false;
        rc = mcr_snapshot_text(write, &text, &len, err);
        if (rc == MCR_OK) {
            uint64_t failures = s->e.failures; /* requests to an endpoint that did not answer */
            do
                rc = mcr__etcd_cas(&s->e, s->c.snapshot_key, text, len, modrev, &ok, NULL, err);
            while (mcr__fleet_session_again(s, rc));
            /* out of memory while the request was built, sent or its
             * reply read: it may have been committed, as when no answer came */
            if (s->e.failures != failures || rc == MCR_ERR_NOMEM) {
                sent_epoch = mcr_snapshot_epoch(write);
                sent_after = modrev;
                memcpy(sent_sum, mcr_snapshot_checksum(write), sizeof(sent_sum));
            }
        }
        free(text);
        if (rc == MCR_OK && ok && epoch != NULL)
            *epoch = mcr_snapshot_epoch(write);
        mcr_snapshot_unref(cur);
        mcr_snapshot_unref(next);
        if (rc == MCR_ERR_CONNECT && sent_epoch != 0)
            return outcome_unknown(err, rc, sent_epoch, sent_sum);
        if (rc == MCR_ERR_NOMEM && sent_epoch != 0) {
            if (attempt + 1 < s->c.retries)
                continue; /* the next read tells whether it landed */
            return outcome_unknown(err, rc, sent_epoch, sent_sum); /* no attempt left */
        }
        if (rc != MCR_OK || ok)
            return rc;
        /* another writer came first: read again */
    }
    return mcr__error(err, MCR_ERR_BUSY,
                      "pool \"%s\": still conflicting with other writers after %u attempts",
                      s->c.pool, s->c.retries);
}

int mcr_fleet_change(const mcr_fleet_options *o, const mcr_changes *changes, uint64_t *epoch,
                     mcr_error *err)
{
    mcr__fleet_session s;
    if (changes == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL changes");
    int rc = mcr__fleet_session_open(&s, o, err);
    if (rc != MCR_OK)
        return rc;
    rc = cas_loop(&s, next_by_changes, changes, NULL, epoch, err);
    mcr__fleet_session_close(&s);
    return rc;
}

int mcr_fleet_publish(const mcr_fleet_options *o, const mcr_config *cfg, uint64_t *epoch,
                      mcr_error *err)
{
    mcr__fleet_session s;
    mcr_snapshot *first = NULL;
    if (cfg == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL config");
    int rc = mcr_snapshot_new(cfg, 1, &first, err);
    if (rc != MCR_OK)
        return rc;
    rc = mcr__fleet_session_open(&s, o, err);
    if (rc == MCR_OK) {
        rc = cas_loop(&s, next_by_list, first, first, epoch, err);
        mcr__fleet_session_close(&s);
    }
    mcr_snapshot_unref(first);
    return rc;
}

int mcr_fleet_publish_snapshot(const mcr_fleet_options *o, const mcr_snapshot *snap,
                               uint64_t *epoch, mcr_error *err)
{
    mcr__fleet_session s;
    if (snap == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL snapshot");
    int rc = mcr__fleet_session_open(&s, o, err);
    if (rc != MCR_OK)
        return rc;
    rc = cas_loop(&s, next_by_snapshot, snap, NULL, epoch, err);
    mcr__fleet_session_close(&s);
    return rc;
}

/* ------------------------------------------------------------ clients */

/* A client's "migration": {"id":"hex","phase":"name","to_epoch":N}, or
 * absent (none adopted, or a follower older than migrations). NULL when it
 * checks, else why not. */
static const char *client_migration(const json_t *j, mcr_fleet_client *c)
{
    json_t *m = json_object_get(j, "migration");
    if (m == NULL)
        return NULL;
    json_t *id = json_object_get(m, "id"), *ph = json_object_get(m, "phase");
    uint64_t to = 0;
    if (!json_is_object(m))
        return "\"migration\" is not an object";
    if (!json_is_string(id) || !mcr__migration_id_ok(json_string_value(id)))
        return "\"migration\": no id (hex digits)";
    if (!json_is_string(ph) || !mcr__migration_phase_parse(json_string_value(ph),
                                                          &c->migration_phase) ||
        c->migration_phase == MCR_MIGRATION_NONE)
        return "\"migration\": no phase";
    if (!json_is_integer(json_object_get(m, "to_epoch")) || !mcr__json_u64(m, "to_epoch", &to) ||
        to == 0)
        return "\"migration\": no to_epoch";
    snprintf(c->migration_id, sizeof(c->migration_id), "%s", json_string_value(id));
    c->migration_to_epoch = to;
    return NULL;
}

/* A client's value: {"epoch":N,"checksum":"...","host":"...", "migration":
 * {...}}. */
static void client_of(const mcr__etcd_kv *kv, const char *prefix, mcr_fleet_client *c)
{
    size_t plen = strlen(prefix);
    memset(c, 0, sizeof(*c));
    if (kv->key_len < plen || memcmp(kv->key, prefix, plen) != 0) {
        /* not one we asked for (a broken proxy): said, never read past */
        c->id = strdup("?");
        c->host = strdup("invalid: a key outside clients/");
        return;
    }
    c->id = strndup((const char *)kv->key + plen, kv->key_len - plen);
    json_error_t je;
    json_t *j = json_loadb((const char *)kv->value, kv->value_len, 0, &je);
    json_t *sum = json_object_get(j, "checksum"), *host = json_object_get(j, "host");
    uint64_t ep = 0;
    const char *why = NULL;
    if (!json_is_object(j))
        why = "not a JSON object";
    else if (!mcr__json_u64(j, "epoch", &ep) || ep == 0)
        why = "no epoch";
    else if (!json_is_string(sum) || strlen(json_string_value(sum)) != MCR_SNAPSHOT_CHECKSUM_LEN ||
             strspn(json_string_value(sum), "0123456789abcdef") != MCR_SNAPSHOT_CHECKSUM_LEN)
        why = "no checksum (32 lower-case hex digits)";
    else
        why = client_migration(j, c);
    if (why != NULL) {
        char b[96];
        snprintf(b, sizeof(b), "invalid: %s", why);
        c->host = strdup(b);
        c->migration_id[0] = '\0';
        c->migration_phase = MCR_MIGRATION_NONE;
        c->migration_to_epoch = 0;
    } else {
        c->epoch = ep;
        memcpy(c->checksum, json_string_value(sum), MCR_SNAPSHOT_CHECKSUM_LEN + 1);
        c->host = strdup(json_is_string(host) ? json_string_value(host) : "");
    }
    json_decref(j);
}

static int cmp_client(const void *a, const void *b)
{
    const mcr_fleet_client *x = a, *y = b;
    return strcmp(x->id ? x->id : "", y->id ? y->id : "");
}

void mcr_fleet_clients_free(mcr_fleet_client *clients, size_t count)
{
    if (clients == NULL)
        return;
    for (size_t i = 0; i < count; i++) {
        free(clients[i].id);
        free(clients[i].host);
    }
    free(clients);
}

int mcr_fleet_clients(const mcr_fleet_options *o, mcr_fleet_client **out, size_t *count,
                      mcr_error *err)
{
    mcr__fleet_session s;
    if (out == NULL || count == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL output");
    int rc = mcr__fleet_session_open(&s, o, err);
    if (rc != MCR_OK)
        return rc;
    mcr__etcd_kv *kvs = NULL;
    size_t n = 0;
    do
        rc = mcr__etcd_get_prefix(&s.e, s.c.clients_prefix, &kvs, &n, err);
    while (mcr__fleet_session_again(&s, rc));
    char *prefix = rc == MCR_OK ? strdup(s.c.clients_prefix) : NULL;
    mcr__fleet_session_close(&s);
    if (rc != MCR_OK)
        return rc; /* nothing read */
    mcr_fleet_client *a = n ? calloc(n, sizeof(*a)) : NULL;
    if ((n > 0 && a == NULL) || prefix == NULL)
        rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (rc == MCR_OK)
            client_of(&kvs[i], prefix, &a[i]);
        mcr__etcd_kv_clear(&kvs[i]);
    }
    free(kvs);
    free(prefix);
    if (rc != MCR_OK)
        free(a);
    if (rc != MCR_OK)
        return rc;
    for (size_t i = 0; i < n; i++)
        if (a[i].id == NULL || a[i].host == NULL) {
            mcr_fleet_clients_free(a, n);
            return mcr__error(err, MCR_ERR_NOMEM, "out of memory");
        }
    if (n > 1)
        qsort(a, n, sizeof(*a), cmp_client);
    *out = a;
    *count = n;
    return MCR_OK;
}
