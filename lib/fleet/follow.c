/* SPDX-License-Identifier: BSD-3-Clause */
/* follow.c: a router fed by etcd: the first read, then a thread that watches the pool's snapshot and migration keys, checks each new epoch and migration record against what it holds (epoch bounds, placement parameters, the record's snapshots), adopts them, registers the process under clients/ with a kept-alive lease, and rides out etcd failures. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fleet_internal.h"
#include "follow_internal.h"
#include "mcroute_version.h"

/* How long a watch may stay silent before it is established again (a
 * member that hangs without closing the connection), ms: etcd sends nothing
 * on the watch of a key that does not change, so this is one request per
 * follower per period on a quiet pool. A hung member is found sooner: every
 * third of the lease the follower sends a request to the watch's member
 * first (its lease keepalive, or a status request when it does not
 * register), and when that member does not answer, the watch moves
 * (keepalive_cb). At least WATCH_IDLE_TIMEOUTS request timeouts. */
#define WATCH_IDLE_MS 60000u
#define WATCH_IDLE_TIMEOUTS 4u

/* ------------------------------------------------------------ adoption */

static void register_client(mcr_fleet *f);

/* Publish `snap` (a verified snapshot of a newer epoch) to the router. */
static int adopt(mcr_fleet *f, mcr_snapshot *snap, uint64_t revision, mcr_error *err)
{
    int rc = mcr_router_publish(f->router, snap, err);
    if (rc != MCR_OK)
        return rc;
    mcr_snapshot_unref(f->cur);
    f->cur = mcr_snapshot_ref(snap);
    mcr__follow_stat_add(f, &f->st.adopted, 1);
    if (f->cache_file != NULL) {
        mcr_error ce;
        if (mcr_snapshot_save(snap, f->cache_file, &ce) != MCR_OK)
            mcr__follow_report(f, MCR_FLEET_CACHE, ce.code, &ce, revision, NULL);
    }
    mcr__follow_report(f, MCR_FLEET_ADOPTED, MCR_OK, NULL, revision, NULL);
    f->reg_dirty = 1; /* written once the watch event is done (flush_register) */
    return MCR_OK;
}

/* judge(): the value is the snapshot held (same epoch and checksum):
 * nothing to do, no event. */
#define SAME_SNAPSHOT 1

/* Whether `snap`, a verified value of the snapshot key at `modrev` whose
 * canonical text is `text`, may be adopted: MCR_OK; SAME_SNAPSHOT; else
 * the refusal (err set): an epoch not above the adopted one
 * (MCR_ERR_STALE), one at or above 2^63 or more than 2^32 above the
 * adopted one (MCR_ERR_RANGE: forged, it would lock the pool out of the
 * changes to come), placement parameters other than the pool's
 * (MCR_ERR_INVALID: every key would move; publish refuses them too). */
static int judge(mcr_fleet *f, const mcr_snapshot *snap, const char *text, size_t len,
                 uint64_t modrev, mcr_error *err)
{
    if (f->cur == NULL)
        return MCR_OK;
    uint64_t have = mcr_snapshot_epoch(f->cur), got = mcr_snapshot_epoch(snap);
    if (got == have && strcmp(mcr_snapshot_checksum(snap), mcr_snapshot_checksum(f->cur)) == 0)
        return SAME_SNAPSHOT;
    if (got <= have)
        return mcr__error(err, MCR_ERR_STALE,
                          "etcd key %s (revision %llu): epoch %llu is not above the adopted "
                          "epoch %llu: kept epoch %llu",
                          f->c.snapshot_key, (unsigned long long)modrev, (unsigned long long)got,
                          (unsigned long long)have, (unsigned long long)have);
    if (got >= MCR__FLEET_EPOCH_LIMIT)
        return mcr__error(err, MCR_ERR_RANGE,
                          "etcd key %s (revision %llu): epoch %llu is 2^63 or more (forged or "
                          "corrupt: no room left for later epochs): kept epoch %llu",
                          f->c.snapshot_key, (unsigned long long)modrev, (unsigned long long)got,
                          (unsigned long long)have);
    if (got - have > MCR__FLEET_EPOCH_JUMP)
        return mcr__error(err, MCR_ERR_RANGE,
                          "etcd key %s (revision %llu): epoch %llu is more than 2^32 above the "
                          "adopted epoch %llu (forged or corrupt): kept epoch %llu",
                          f->c.snapshot_key, (unsigned long long)modrev, (unsigned long long)got,
                          (unsigned long long)have, (unsigned long long)have);
    const char *at = NULL;
    size_t n = 0;
    char la[128], lb[128];
    if (f->params != NULL && mcr__fleet_params_at(text, len, &at, &n) &&
        mcr__fleet_params_differ(f->params, f->nparams, at, n, la, lb, sizeof(la)))
        return mcr__error(err, MCR_ERR_INVALID,
                          "etcd key %s (revision %llu): the placement parameters differ from "
                          "the pool's: the pool has \"%s\", the value \"%s\" (a pool keeps its "
                          "parameters): kept epoch %llu",
                          f->c.snapshot_key, (unsigned long long)modrev, la, lb,
                          (unsigned long long)have);
    return MCR_OK;
}

/* Act on judge()'s verdict `rc` (err) on `snap` (a reference, dropped
 * here; NULL when the value did not parse: rc is why): adopt it, or report
 * the refusal. */
static void conclude(mcr_fleet *f, mcr_snapshot *snap, uint64_t modrev, int rc, mcr_error *err)
{
    if (rc == SAME_SNAPSHOT) {
        mcr_snapshot_unref(snap);
        return;
    }
    if (rc == MCR_OK)
        rc = adopt(f, snap, modrev, err);
    mcr_snapshot_unref(snap);
    if (rc != MCR_OK) {
        mcr__follow_stat_add(f, &f->st.refused, 1);
        mcr__follow_report(f, MCR_FLEET_REFUSED, rc, err, modrev, NULL);
        if (rc == MCR_ERR_NOMEM)
            f->reread = 1; /* not the value's fault: take it in again */
    }
}

/* A value of the snapshot key at `modrev`: adopt it, or say why not. */
static void consider(mcr_fleet *f, const unsigned char *value, size_t len, uint64_t modrev)
{
    mcr_error err;
    mcr_snapshot *snap = NULL;
    int rc = mcr__fleet_parse(&f->c, value, len, modrev, NULL, &snap, &err);
    if (rc == MCR_OK)
        rc = judge(f, snap, (const char *)value, len, modrev, &err);
    conclude(f, snap, modrev, rc, &err);
}

/* ------------------------------------------------------------ migrations */

/* End the migration we set, unless the router holds another one now
 * (the application's own). */
static void end_migration(mcr_fleet *f, uint64_t revision)
{
    mcr_router_migration t;
    if (f->mig_serial == 0)
        return;
    if (mcr_router_get_migration(f->router, &t) == MCR_OK) {
        if (t.serial == f->mig_serial)
            (void)mcr_router_clear_migration(f->router);
        mcr_router_migration_clear(&t);
    }
    f->mig_serial = 0;
    mcr__follow_stat_add(f, &f->st.migrations_cleared, 1);
    mcr__follow_report(f, MCR_FLEET_MIGRATION_CLEARED, MCR_OK, NULL, revision, NULL);
}

static bool same_snapshot(const mcr_snapshot *a, const mcr_snapshot *b)
{
    return a != NULL && b != NULL && mcr_snapshot_epoch(a) == mcr_snapshot_epoch(b) &&
           strcmp(mcr_snapshot_checksum(a), mcr_snapshot_checksum(b)) == 0;
}

/* Whether m is the migration adopted last: its id and both snapshots
 * (epochs and checksums); its phase and progress may differ. */
static bool same_migration(const mcr_fleet *f, const mcr_migration *m)
{
    return strcmp(f->mig_id, m->id) == 0 && f->mig_from_epoch == mcr_snapshot_epoch(m->from) &&
           f->mig_to_epoch == mcr_snapshot_epoch(m->to) &&
           strcmp(f->mig_from_sum, mcr_snapshot_checksum(m->from)) == 0 &&
           strcmp(f->mig_to_sum, mcr_snapshot_checksum(m->to)) == 0;
}

/* "epoch E (checksum 12345678...)" of s, for messages. */
static const char *snap_name(char *buf, size_t cap, const mcr_snapshot *s)
{
    if (s == NULL)
        snprintf(buf, cap, "none");
    else
        snprintf(buf, cap, "epoch %llu (checksum %.8s...)",
                 (unsigned long long)mcr_snapshot_epoch(s), mcr_snapshot_checksum(s));
    return buf;
}

/* Whether a record that parsed (read at `modrev`) may be adopted by a
 * follower whose pool's snapshot is `basis` (the one it holds, or the one
 * read with the record at the same revision): MCR_OK, or the refusal (err
 * set). Its two snapshots must have the same placement parameters
 * (MCR_ERR_INVALID) and epochs at most 2^32 apart (MCR_ERR_RANGE, as for a
 * snapshot). Then what it would set must be the pool's (MCR_ERR_STALE):
 * in planned and copying, `from` is the pool's snapshot; in switched,
 * grace and closing, `to` is, or still `from` (in the switch's watch response the
 * record is handled before the snapshot: see on_line). done and aborted
 * only end a migration, after which the pool may move on. A record of the
 * migration adopted last, with the same snapshots (a progress update, the
 * next phase), was checked then: it is not held to the pool's snapshot
 * again, which may have moved since (publish_local_states writing a state
 * during the copy or the grace). */
static int check_migration(mcr_fleet *f, const mcr_migration *m, const mcr_snapshot *basis,
                           uint64_t modrev, mcr_error *err)
{
    char la[128], lb[128], na[64], nb[64];
    bool same = false;
    int rc = mcr__fleet_params_cmp(m->from, m->to, &same, la, lb, sizeof(la), err);
    if (rc == MCR_ERR_NOMEM)
        return mcr__error(err, rc, "etcd key %s (revision %llu): out of memory checking the "
                          "migration record", f->c.migration_key, (unsigned long long)modrev);
    if (rc != MCR_OK)
        return rc;
    if (!same)
        return mcr__error(err, MCR_ERR_INVALID,
                          "etcd key %s (revision %llu): \"to\" has other placement parameters "
                          "than \"from\": \"%s\", not \"%s\": not adopted",
                          f->c.migration_key, (unsigned long long)modrev, lb, la);
    uint64_t fe = mcr_snapshot_epoch(m->from), te = mcr_snapshot_epoch(m->to);
    if (te - fe > MCR__FLEET_EPOCH_JUMP) /* te > fe: checked by the parse */
        return mcr__error(err, MCR_ERR_RANGE,
                          "etcd key %s (revision %llu): to_epoch %llu is more than 2^32 above "
                          "from_epoch %llu: not adopted",
                          f->c.migration_key, (unsigned long long)modrev,
                          (unsigned long long)te, (unsigned long long)fe);
    if (same_migration(f, m))
        return MCR_OK;
    switch (m->phase) {
    case MCR_MIGRATION_PLANNED:
    case MCR_MIGRATION_COPYING:
        if (!same_snapshot(m->from, basis))
            return mcr__error(err, MCR_ERR_STALE,
                              "etcd key %s (revision %llu): phase %s from %s, not from the "
                              "pool's snapshot, %s: not adopted",
                              f->c.migration_key, (unsigned long long)modrev,
                              mcr_migration_phase_name(m->phase),
                              snap_name(na, sizeof(na), m->from),
                              snap_name(nb, sizeof(nb), basis));
        break;
    case MCR_MIGRATION_SWITCHED:
    case MCR_MIGRATION_GRACE:
    case MCR_MIGRATION_CLOSING:
        if (!same_snapshot(m->to, basis) && !same_snapshot(m->from, basis))
            return mcr__error(err, MCR_ERR_STALE,
                              "etcd key %s (revision %llu): phase %s to %s, but the pool's "
                              "snapshot is %s, neither \"to\" nor \"from\": not adopted",
                              f->c.migration_key, (unsigned long long)modrev,
                              mcr_migration_phase_name(m->phase),
                              snap_name(na, sizeof(na), m->to),
                              snap_name(nb, sizeof(nb), basis));
        break;
    default: /* done, aborted */
        break;
    }
    return MCR_OK;
}

/* Adopt a checked migration record (read at `revision`): copying, switched
 * and grace set its migration, once per id and pair of snapshots, and
 * closing once more with MCR_MIGRATION_FLAG_CLOSING; done and aborted end it;
 * planned ends one of another migration. */
static void adopt_migration(mcr_fleet *f, const mcr_migration *m, uint64_t revision)
{
    uint64_t fe = mcr_snapshot_epoch(m->from), te = mcr_snapshot_epoch(m->to);
    int same = same_migration(f, m);
    switch (m->phase) {
    case MCR_MIGRATION_COPYING:
    case MCR_MIGRATION_SWITCHED:
    case MCR_MIGRATION_GRACE:
    case MCR_MIGRATION_CLOSING: {
        int closing = m->phase == MCR_MIGRATION_CLOSING;
        if (!same || f->mig_serial == 0 || closing != (f->mig_phase == MCR_MIGRATION_CLOSING)) {
            mcr_error err;
            mcr_router_migration t;
            unsigned flags = closing ? MCR_MIGRATION_FLAG_CLOSING : 0;
            int rc = mcr_router_set_migration(f->router, m->from, m->to, 0, flags, &err);
            if (rc != MCR_OK) {
                /* not adopted: the client key keeps saying what it was */
                mcr__follow_report(f, MCR_FLEET_MIGRATION_SET, rc, &err, revision, NULL);
                return;
            }
            f->mig_serial = 1;
            if (mcr_router_get_migration(f->router, &t) == MCR_OK) {
                f->mig_serial = t.serial;
                mcr_router_migration_clear(&t);
            }
            mcr__follow_stat_add(f, &f->st.migrations_set, 1);
            mcr__follow_report(f, MCR_FLEET_MIGRATION_SET, MCR_OK, NULL, revision, NULL);
        }
        break;
    }
    case MCR_MIGRATION_PLANNED:
        if (!same)
            end_migration(f, revision);
        break;
    default: /* done, aborted */
        end_migration(f, revision);
        break;
    }
    if (!same || f->mig_phase != m->phase)
        f->reg_dirty = 1;
    memcpy(f->mig_id, m->id, sizeof(f->mig_id));
    f->mig_phase = m->phase;
    f->mig_progress = m->progress;
    f->mig_from_epoch = fe;
    f->mig_to_epoch = te;
    memcpy(f->mig_from_sum, mcr_snapshot_checksum(m->from), sizeof(f->mig_from_sum));
    memcpy(f->mig_to_sum, mcr_snapshot_checksum(m->to), sizeof(f->mig_to_sum));
    mcr__follow_sync_stats(f);
}

/* A value of the migration key at `modrev`: parsed and checked against
 * the pool's snapshot `basis` (check_migration), then adopted; a record
 * that does not check is refused and changes nothing (neither the
 * migration nor the phase in the client key). */
static void consider_migration(mcr_fleet *f, const unsigned char *value, size_t len,
                               uint64_t modrev, const mcr_snapshot *basis)
{
    mcr_error err;
    mcr_migration m;
    int rc = mcr__migration_parse(f->c.migration_key, modrev, value, len, &m, &err);
    if (rc == MCR_OK)
        rc = check_migration(f, &m, basis, modrev, &err);
    if (rc != MCR_OK) {
        mcr_migration_clear(&m);
        mcr__follow_stat_add(f, &f->st.refused, 1);
        mcr__follow_report(f, MCR_FLEET_REFUSED, rc, &err, modrev, NULL);
        if (rc == MCR_ERR_NOMEM)
            f->reread = 1;
        return;
    }
    adopt_migration(f, &m, modrev);
    mcr_migration_clear(&m);
}

/* The migration key deleted (or missing at a read): no migration. */
static void migration_gone(mcr_fleet *f, uint64_t revision)
{
    end_migration(f, revision);
    if (f->mig_phase != MCR_MIGRATION_NONE)
        f->reg_dirty = 1;
    f->mig_phase = MCR_MIGRATION_NONE;
    f->mig_id[0] = '\0';
    f->mig_from_epoch = f->mig_to_epoch = 0;
    f->mig_from_sum[0] = f->mig_to_sum[0] = '\0';
    memset(&f->mig_progress, 0, sizeof(f->mig_progress));
    mcr__follow_sync_stats(f);
}

/* The migration key as of revision `at` (the snapshot's read): adopted or
 * refused, checked against `basis`, the pool's snapshot read at `at` (or,
 * when it is refused, the one held). MCR_OK, or the request's error. */
static int read_migration(mcr_fleet *f, uint64_t at, const mcr_snapshot *basis, mcr_error *err)
{
    mcr__etcd_kv kv;
    bool found = false;
    int rc = mcr__etcd_get_at(&f->e, f->c.migration_key, at, false, &found, &kv, NULL, err);
    if (rc != MCR_OK)
        return rc;
    if (found) {
        consider_migration(f, kv.value, kv.value_len, kv.mod_revision, basis);
        mcr__etcd_kv_clear(&kv);
    } else {
        migration_gone(f, at);
    }
    return MCR_OK;
}

/* ------------------------------------------------------------ registration */

static int client_value(mcr_fleet *f, char **out)
{
    /* the follower's own adoption, or the one set for it */
    uint64_t epoch = f->cur ? mcr_snapshot_epoch(f->cur) : 0, to_epoch = f->mig_to_epoch;
    uint64_t revision = f->revision;
    char sum[MCR_SNAPSHOT_CHECKSUM_LEN + 1], id[MCR_MIGRATION_ID_MAX + 1], host[800];
    mcr_migration_phase phase = f->mig_phase;
    snprintf(sum, sizeof(sum), "%s", f->cur ? mcr_snapshot_checksum(f->cur) : "");
    snprintf(id, sizeof(id), "%s", f->mig_id);
    snprintf(host, sizeof(host), "%s", f->host_info);
    pthread_mutex_lock(&f->lock);
    if (f->adoption_set) {
        const mcr_fleet_adoption *a = &f->adoption;
        epoch = a->epoch;
        to_epoch = a->migration_to_epoch;
        phase = a->phase;
        revision = f->adoption_revision;
        snprintf(sum, sizeof(sum), "%s", a->checksum);
        snprintf(id, sizeof(id), "%s", a->migration_id);
        if (f->adoption_note[0] != '\0')
            snprintf(host, sizeof(host), "%s; %s", f->host_info, f->adoption_note);
    }
    pthread_mutex_unlock(&f->lock);
    json_t *j = json_pack("{s:I,s:s,s:s,s:I}", "epoch", (json_int_t)epoch, "checksum", sum,
                          "host", host, "revision", (json_int_t)revision);
    if (j != NULL && phase != MCR_MIGRATION_NONE &&
        json_object_set_new(j, "migration",
                            json_pack("{s:s,s:s,s:I}", "id", id, "phase",
                                      mcr_migration_phase_name(phase), "to_epoch",
                                      (json_int_t)to_epoch)) != 0) {
        json_decref(j); /* never a registration that hides the migration adopted */
        j = NULL;
    }
    *out = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    return *out ? MCR_OK : MCR_ERR_NOMEM;
}

/* Write clients/ID with the adopted epoch, granting a lease first when
 * there is none. Failures are reported; the keepalive timer tries again. */
static void register_client(mcr_fleet *f)
{
    mcr_error err;
    char *v = NULL;
    if (f->no_register || f->cur == NULL)
        return;
    f->reg_dirty = 0;
    int rc = MCR_OK;
    if (f->lease == 0) { /* a new lease: the value must be written again */
        free(f->reg_last);
        f->reg_last = NULL;
        rc = mcr__etcd_lease_grant(&f->e, f->ttl_s, &f->lease, &err);
    }
    if (rc == MCR_OK)
        rc = client_value(f, &v);
    if (rc == MCR_OK && f->reg_last != NULL && strcmp(v, f->reg_last) == 0) {
        free(v); /* written already, under this lease */
        mcr__follow_sync_stats(f);
        return;
    }
    if (rc == MCR_OK)
        rc = mcr__etcd_put(&f->e, f->client_key, v, strlen(v), f->lease, &err);
    free(f->reg_last);
    f->reg_last = rc == MCR_OK ? v : NULL;
    if (rc != MCR_OK)
        free(v);
    if (rc == MCR_ERR_PROTOCOL) /* e.g. the lease expired meanwhile */
        f->lease = 0;
    if (rc != MCR_OK) {
        f->reg_dirty = 1; /* the keepalive timer tries again */
        if (rc == MCR_ERR_NOMEM)
            mcr__error(&err, rc, "out of memory registering the client");
        mcr__follow_report(f, MCR_FLEET_REGISTER, rc, &err, 0, f->e.ep[f->e.cur].url);
    }
    mcr__follow_sync_stats(f);
}

/* Write the client key when an adoption changed what it says. */
static void flush_register(mcr_fleet *f)
{
    if (f->reg_dirty)
        register_client(f);
}

static void schedule_restart(mcr_fleet *f, unsigned ms);

static void keepalive_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    mcr_fleet *f = arg;
    /* Requests start at the watch's member (e.cur): one that moved away
     * from it means that member did not answer. */
    f->e.cur = f->watch_ep;
    uint64_t failures = f->e.failures;
    if (f->no_register) {
        mcr_error err;
        (void)mcr__etcd_ping(&f->e, &err); /* only: does the watch's member answer? */
    } else if (f->lease != 0) {
        mcr_error err;
        bool alive = false;
        int rc = mcr__etcd_lease_keepalive(&f->e, f->lease, &alive, &err);
        if (rc == MCR_OK && (!alive || f->reg_dirty)) {
            if (!alive)
                f->lease = 0; /* expired (etcd was away too long): a new one */
            register_client(f);
        } else if (rc != MCR_OK) {
            mcr__follow_report(f, MCR_FLEET_REGISTER, rc, &err, 0, NULL);
        }
    } else {
        register_client(f);
    }
    if (f->watch != NULL && !f->watch_ended && f->e.failures > failures &&
        f->e.cur != f->watch_ep) {
        f->watch_ended = 1;
        f->watch_end_status = MCR_ERR_CONNECT;
        mcr__error(&f->watch_end_err, MCR_ERR_CONNECT,
                   "%s did not answer a keepalive: the watch moves to %s",
                   f->e.ep[f->watch_ep].url, f->e.ep[f->e.cur].url);
        schedule_restart(f, 0);
    }
    mcr__follow_sync_stats(f);
}

/* ------------------------------------------------------------ watching */

static void schedule_restart(mcr_fleet *f, unsigned ms)
{
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
    evtimer_add(f->restart_ev, &tv);
}

static unsigned next_backoff(mcr_fleet *f)
{
    unsigned b = f->backoff_ms;
    f->backoff_ms = b * 2 > f->retry_max_ms ? f->retry_max_ms : b * 2;
    return b;
}

static void watch_failed(mcr_fleet *f, int status, const mcr_error *err)
{
    const char *url = f->e.ep[f->watch_ep].url;
    mcr__follow_stat_add(f, &f->st.disconnects, 1);
    pthread_mutex_lock(&f->lock);
    f->st.connected = 0;
    pthread_mutex_unlock(&f->lock);
    mcr__follow_report(f, MCR_FLEET_DISCONNECTED, status, err, f->revision, url);
    f->e.cur = (f->watch_ep + 1) % f->e.nep; /* the next endpoint next time */
    f->watch_ep = f->e.cur;
    schedule_restart(f, next_backoff(f));
}

/* Whether the key of kv is `key`. */
static bool key_is(const mcr__etcd_kv *kv, const char *key)
{
    return kv->key_len == strlen(key) && memcmp(kv->key, key, kv->key_len) == 0;
}

/* Whether a key lies in the watched range: from the migration key to the
 * snapshot key (other keys there, such as the migration lock, are not the
 * follower's business). */
static bool key_in_range(const mcr_fleet *f, const mcr__etcd_kv *kv)
{
    const char *lo = f->c.migration_key, *hi = f->c.snapshot_key;
    size_t nl = strlen(lo), nh = strlen(hi), k = kv->key_len;
    int a = memcmp(kv->key, lo, k < nl ? k : nl), b = memcmp(kv->key, hi, k < nh ? k : nh);
    return (a > 0 || (a == 0 && k >= nl)) && (b < 0 || (b == 0 && k <= nh));
}

/* One event of a watch response: pass 0 counts it, refuses what is
 * malformed or outside the range and adopts the migration record's; pass 1
 * the snapshot's. */
static void watch_event(mcr_fleet *f, json_t *ev, uint64_t hrev, int pass)
{
    json_t *type = json_object_get(ev, "type");
    int deleted = json_is_string(type) && strcmp(json_string_value(type), "DELETE") == 0;
    mcr__etcd_kv kv;
    mcr_error err;
    if (pass == 0)
        mcr__follow_stat_add(f, &f->st.watch_events, 1);
    if (mcr__etcd_kv_parse(json_object_get(ev, "kv"), &kv, &err) != MCR_OK) {
        if (pass == 0) {
            mcr__follow_stat_add(f, &f->st.refused, 1);
            mcr__follow_report(f, MCR_FLEET_REFUSED, err.code, &err, hrev, NULL);
        }
        if (err.code == MCR_ERR_NOMEM)
            f->reread = 1; /* the event may have been the snapshot's */
        return;
    }
    if (pass == 0 && !key_in_range(f, &kv)) {
        mcr__error(&err, MCR_ERR_PROTOCOL, "etcd watch of %s delivered an event of another key",
                   f->c.snapshot_key);
        mcr__follow_stat_add(f, &f->st.refused, 1);
        mcr__follow_report(f, MCR_FLEET_REFUSED, err.code, &err, hrev, NULL);
    } else if (pass == 0 && key_is(&kv, f->c.migration_key)) {
        if (kv.mod_revision > f->revision)
            f->revision = kv.mod_revision;
        if (deleted)
            migration_gone(f, kv.mod_revision);
        else
            consider_migration(f, kv.value, kv.value_len, kv.mod_revision, f->cur);
    } else if (pass == 1 && key_is(&kv, f->c.snapshot_key)) {
        if (kv.mod_revision > f->revision)
            f->revision = kv.mod_revision;
        if (deleted) {
            mcr__error(&err, MCR_ERR_UNKNOWN,
                       "etcd key %s deleted (revision %llu): kept epoch %llu",
                       f->c.snapshot_key, (unsigned long long)kv.mod_revision,
                       (unsigned long long)(f->cur ? mcr_snapshot_epoch(f->cur) : 0));
            mcr__follow_stat_add(f, &f->st.refused, 1);
            mcr__follow_report(f, MCR_FLEET_REFUSED, err.code, &err, kv.mod_revision, NULL);
        } else {
            consider(f, kv.value, kv.value_len, kv.mod_revision);
        }
    }
    mcr__etcd_kv_clear(&kv);
}

/* The revision of a watch event (its kv's mod_revision; 0 when it has
 * none: watch_event() refuses it). */
static uint64_t event_revision(json_t *ev)
{
    uint64_t r = 0;
    json_t *kv = json_object_get(ev, "kv");
    if (json_is_object(kv) && !mcr__json_u64(kv, "mod_revision", &r))
        r = 0;
    return r;
}

static void on_line(json_t *line, void *arg)
{
    mcr_fleet *f = arg;
    json_t *res = json_object_get(line, "result");
    mcr_error err;
    if (!json_is_object(res)) {
        json_t *e = json_object_get(line, "error");
        json_t *m = json_is_object(e) ? json_object_get(e, "message") : NULL;
        mcr__error(&err, MCR_ERR_PROTOCOL, "etcd watch error: %s",
                   json_is_string(m) ? json_string_value(m) : "malformed watch message");
        f->watch_end_status = MCR_ERR_PROTOCOL;
        f->watch_end_err = err;
        f->watch_ended = 1;
        schedule_restart(f, 0);
        return;
    }
    uint64_t hrev = mcr__etcd_revision(res), compact = 0;
    mcr__json_u64(res, "compact_revision", &compact);
    if (compact > 0) {
        /* our revision is gone: read the pool again, then watch from there */
        f->need_read = 1;
        f->resync = 1;
        schedule_restart(f, 0);
        return;
    }
    if (json_is_true(json_object_get(res, "canceled"))) {
        /* cancelled for another reason than a compaction (auth, ...) */
        json_t *why = json_object_get(res, "cancel_reason");
        f->watch_end_status = MCR_ERR_PROTOCOL;
        mcr__error(&f->watch_end_err, MCR_ERR_PROTOCOL, "%s: etcd cancelled the watch: %s",
                   f->e.ep[f->watch_ep].url,
                   json_is_string(why) ? json_string_value(why) : "no reason given");
        f->watch_ended = 1;
        schedule_restart(f, 0);
        return;
    }
    if (json_is_true(json_object_get(res, "created"))) {
        f->watch_created = 1;
        pthread_mutex_lock(&f->lock);
        f->st.connected = 1;
        pthread_mutex_unlock(&f->lock);
        f->backoff_ms = f->retry_min_ms;
        mcr__follow_report(f, MCR_FLEET_CONNECTED, MCR_OK, NULL, hrev, f->e.ep[f->watch_ep].url);
    }
    json_t *evs = json_object_get(res, "events");
    size_t n = json_is_array(evs) ? json_array_size(evs) : 0;
    /* In revision order (etcd's), the events of one revision (one
     * transaction) in two passes: the migration record's first, then the
     * snapshot's, so that a switch (both keys in one transaction) sets the
     * migration before the snapshot is adopted. Not two passes over the
     * whole response: a response that catches up on several revisions (a
     * watch resumed) would check a record planned after a change against
     * the snapshot before that change (check_migration), and refuse it. */
    for (size_t i = 0; i < n;) {
        uint64_t r = event_revision(json_array_get(evs, i));
        size_t j = i + 1;
        while (j < n && event_revision(json_array_get(evs, j)) == r)
            j++;
        for (int pass = 0; pass < 2; pass++)
            for (size_t k = i; k < j; k++)
                watch_event(f, json_array_get(evs, k), hrev, pass);
        i = j;
    }
    flush_register(f);
    if (hrev > f->revision && n > 0)
        f->revision = hrev;
    if (f->reread) {
        /* a value not taken in for want of memory: read the pool again
         * (restart_cb ends this watch), after a backoff */
        f->need_read = 1;
        schedule_restart(f, next_backoff(f));
    }
}

static void on_end(int status, const char *why, void *arg)
{
    mcr_fleet *f = arg;
    /* Never free the watch here (inside evhttp's callback): the restart
     * timer does, at once. */
    if (f->watch_end_status == MCR_OK) {
        f->watch_end_status = status == MCR_OK ? MCR_ERR_CONNECT : status;
        mcr__error(&f->watch_end_err, f->watch_end_status, "%s: etcd watch ended: %s",
                   f->e.ep[f->watch_ep].url, why);
    }
    f->watch_ended = 1;
    schedule_restart(f, 0);
}

/* Read the pool (when needed) and start a watch from the revision after the
 * last one seen. On failure: report, next endpoint, back off. */
static void restart_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    mcr_fleet *f = arg;
    mcr_error err;

    if (f->watch != NULL && !f->watch_ended && !f->resync && !f->reread)
        return;
    if (f->watch != NULL) {
        /* Silence on an established watch is no failure: establish it again
         * (a member that hangs does not confirm the new one, and that is) */
        int idle = f->watch_ended && f->watch_end_status == MCR_ERR_TIMEOUT && f->watch_created;
        int st = f->watch_end_status;
        mcr_error e2 = f->watch_end_err;
        mcr__etcd_watch_free(f->watch);
        f->watch = NULL;
        f->watch_ended = 0;
        f->watch_created = 0;
        f->watch_end_status = MCR_OK;
        if (f->resync) {
            f->resync = 0;
            mcr__follow_stat_add(f, &f->st.resyncs, 1);
            mcr__follow_report(f, MCR_FLEET_RESYNC, MCR_OK, NULL, f->revision, NULL);
        } else if (f->reread) {
            /* ended by us: read again below (need_read is set) */
        } else if (!idle && st != MCR_OK) {
            watch_failed(f, st, &e2);
            return;
        } else if (idle) {
            /* Silent for its idle time: a quiet pool, or a member that
             * hangs without closing the connection. Watching the same
             * endpoint again never left a hung member (with no_register,
             * no keepalive request moved e.cur either: test_fleet_cluster
             * member_hangs). A request tells: it fails over from an
             * endpoint that does not answer and leaves e.cur on one that
             * does, where the watch goes next. Its value is not needed:
             * the watch resumes after the last revision seen. */
            f->e.cur = f->watch_ep; /* the watch's member first */
            int rc = mcr__etcd_ping(&f->e, &err);
            if (rc == MCR_ERR_CONNECT) {
                watch_failed(f, rc, &err);
                return;
            }
        }
    }
    if (f->need_read) {
        mcr_snapshot *snap = NULL;
        uint64_t modrev = 0, rev = 0;
        f->reread = 0;
        int rc = mcr__fleet_get(&f->e, &f->c, NULL, &snap, &modrev, &rev, &err);
        /* The snapshot judged first: the migration record is checked
         * against it when it is to be adopted, else against the one held. */
        int verdict = rc;
        mcr_error verr;
        if (rc == MCR_OK) {
            char *text = NULL;
            size_t len = 0;
            verdict = mcr_snapshot_text(snap, &text, &len, &verr);
            if (verdict == MCR_OK)
                verdict = judge(f, snap, text, len, modrev, &verr);
            free(text);
        }
        const mcr_snapshot *basis =
            verdict == MCR_OK || verdict == SAME_SNAPSHOT ? snap : f->cur;
        mcr_error merr;
        /* the migration as of the same revision, adopted first */
        int mrc = rc == MCR_ERR_CONNECT || rev == 0 ? MCR_OK : read_migration(f, rev, basis, &merr);
        if (rc == MCR_ERR_CONNECT || mrc == MCR_ERR_CONNECT) {
            mcr_snapshot_unref(snap);
            watch_failed(f, MCR_ERR_CONNECT, rc == MCR_ERR_CONNECT ? &err : &merr);
            return;
        }
        if (mrc != MCR_OK) {
            mcr__follow_stat_add(f, &f->st.refused, 1);
            mcr__follow_report(f, MCR_FLEET_REFUSED, mrc, &merr, rev, NULL);
            if (mrc == MCR_ERR_NOMEM)
                f->reread = 1;
        }
        if (rc == MCR_OK) {
            conclude(f, snap, modrev, verdict, &verr);
        } else {
            /* missing or invalid: keep serving, watch for the next value */
            mcr__follow_stat_add(f, &f->st.refused, 1);
            mcr__follow_report(f, MCR_FLEET_REFUSED, rc, &err, rev, NULL);
            if (rc == MCR_ERR_NOMEM)
                f->reread = 1;
        }
        if (f->reread) {
            /* out of memory: the same read again after a backoff, not a
             * watch from past a value never taken in */
            schedule_restart(f, next_backoff(f));
            mcr__follow_sync_stats(f);
            return;
        }
        if (rev > f->revision)
            f->revision = rev;
        f->need_read = 0;
        if (f->lease == 0 || f->reg_dirty)
            register_client(f); /* started from the cache, lost the lease, adopted */
    }
    char *body = mcr__etcd_watch_range_body(f->c.migration_key, f->c.snapshot_key,
                                            f->revision + 1);
    unsigned idle = WATCH_IDLE_TIMEOUTS * f->c.request_timeout_ms;
    if (idle < WATCH_IDLE_MS)
        idle = WATCH_IDLE_MS;
    f->watch_ep = f->e.cur;
    if (body != NULL)
        f->watch = mcr__etcd_watch_start(&f->e.ep[f->e.cur], f->wbase, body, idle, on_line,
                                         on_end, f);
    free(body);
    f->e.requests++; /* the watch's own request */
    if (f->watch == NULL) {
        mcr__error(&err, MCR_ERR_NOMEM, "cannot start a watch");
        watch_failed(f, MCR_ERR_NOMEM, &err);
    }
    mcr__follow_sync_stats(f);
}

/* The stop pipe: 'x' stops the loop, 'a' (mcr_fleet_set_adoption())
 * writes the client key again. */
static void stop_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    mcr_fleet *f = arg;
    char b[64];
    ssize_t n;
    int stop = 0, adopt = 0;
    while ((n = read(fd, b, sizeof(b))) > 0)
        for (ssize_t i = 0; i < n; i++) {
            if (b[i] == 'a')
                adopt = 1;
            else
                stop = 1;
        }
    if (stop) {
        event_base_loopbreak(f->wbase);
        return;
    }
    if (adopt) {
        pthread_mutex_lock(&f->lock);
        f->adoption_wake = 0;
        pthread_mutex_unlock(&f->lock);
        f->reg_dirty = 1;
        flush_register(f);
    }
}

static void *follow_thread(void *arg)
{
    mcr_fleet *f = arg;
    f->starting = 0;
    for (size_t i = 0; i < f->nheld; i++) {
        struct held_event *h = &f->held[i];
        mcr__follow_report(f, h->kind, h->status, &h->err, h->revision, h->has_endpoint ? h->endpoint : NULL);
    }
    f->nheld = 0;
    event_base_dispatch(f->wbase);
    return NULL;
}

/* ------------------------------------------------------------ the start */

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static void fleet_free(mcr_fleet *f)
{
    if (f->hook_added) {
        mcr_router_remove_hook(f->router, mcr__follow_health_hook, f);
        f->hook_added = 0;
    }
    if (f->restart_ev)
        event_free(f->restart_ev);
    if (f->keepalive_ev)
        event_free(f->keepalive_ev);
    if (f->stop_ev)
        event_free(f->stop_ev);
    if (f->health_ev)
        event_free(f->health_ev);
    if (f->health_poll_ev)
        event_free(f->health_poll_ev);
    for (int i = 0; i < 2; i++)
        if (f->health_pipe[i] >= 0)
            close(f->health_pipe[i]);
    for (size_t k = 0; k < f->nwritten; k++)
        free(f->written[k].id);
    free(f->written);
    mcr__etcd_watch_free(f->watch);
    if (f->wbase)
        event_base_free(f->wbase);
    mcr__etcd_cleanup(&f->e);
    mcr__fleet_conf_cleanup(&f->c);
    if (f->stop_pipe[0] >= 0)
        close(f->stop_pipe[0]);
    if (f->stop_pipe[1] >= 0)
        close(f->stop_pipe[1]);
    mcr_snapshot_unref(f->cur);
    free(f->params);
    free(f->client_id);
    free(f->client_key);
    free(f->reg_last);
    free(f->cache_file);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

/* The first snapshot: from etcd, trying rounds of endpoints until wait_ms;
 * else from the cache file. *from_cache tells which. */
static int first_read(mcr_fleet *f, mcr_snapshot **out, int *from_cache, mcr_error *err)
{
    uint64_t deadline = mcr__fleet_now_ms() + f->c.wait_ms;
    unsigned backoff = f->retry_min_ms;
    uint64_t modrev = 0, rev = 0;
    int rc;
    mcr_error ge; /* the last attempt's: err is written only on failure */
    *from_cache = 0;
    for (;;) {
        rc = mcr__fleet_get(&f->e, &f->c, NULL, out, &modrev, &rev, &ge);
        if (rc != MCR_ERR_CONNECT)
            break;
        uint64_t now = mcr__fleet_now_ms();
        if (now >= deadline)
            break;
        unsigned w = (uint64_t)backoff > deadline - now ? (unsigned)(deadline - now) : backoff;
        struct timeval tv = {(time_t)(w / 1000), (suseconds_t)(w % 1000) * 1000};
        event_base_loopexit(f->e.base, &tv);
        event_base_dispatch(f->e.base);
        backoff = backoff * 2 > f->retry_max_ms ? f->retry_max_ms : backoff * 2;
    }
    if (rc != MCR_OK && rc != MCR_ERR_CONNECT && err != NULL)
        *err = ge;
    if (rc == MCR_OK && mcr_snapshot_epoch(*out) >= MCR__FLEET_EPOCH_LIMIT) {
        rc = mcr__error(err, MCR_ERR_RANGE,
                        "etcd key %s (revision %llu): epoch %llu is 2^63 or more (forged or "
                        "corrupt: no room left for later epochs)",
                        f->c.snapshot_key, (unsigned long long)modrev,
                        (unsigned long long)mcr_snapshot_epoch(*out));
        mcr_snapshot_unref(*out);
        *out = NULL;
        return rc;
    }
    if (rc == MCR_OK) {
        f->revision = rev > modrev ? rev : modrev;
        return MCR_OK;
    }
    if (rc != MCR_ERR_CONNECT)
        return rc;
    if (f->cache_file == NULL) {
        if (err != NULL)
            *err = ge;
        return rc;
    }
    mcr_error ce;
    char why[MCR_ERROR_MESSAGE_SIZE];
    snprintf(why, sizeof(why), "%s", ge.message);
    int crc = mcr_snapshot_load(f->cache_file, NULL, 0, out, &ce);
    if (crc == MCR_OK && mcr_snapshot_epoch(*out) >= MCR__FLEET_EPOCH_LIMIT) {
        crc = mcr__error(&ce, MCR_ERR_RANGE, "%s: epoch %llu is 2^63 or more", f->cache_file,
                         (unsigned long long)mcr_snapshot_epoch(*out));
        mcr_snapshot_unref(*out);
        *out = NULL;
    }
    if (crc != MCR_OK)
        return mcr__error(err, MCR_ERR_CONNECT, "%s; and the cache file is not usable: %s", why,
                          ce.message);
    *from_cache = 1;
    f->need_read = 1; /* read etcd as soon as it answers */
    return MCR_OK;
}

/* The placement parameters of the first snapshot, which every later one
 * must have (judge()). */
static int keep_params(mcr_fleet *f, const mcr_snapshot *snap, mcr_error *err)
{
    char *text = NULL;
    size_t len = 0;
    const char *at = NULL;
    int rc = mcr_snapshot_text(snap, &text, &len, err);
    if (rc != MCR_OK)
        return rc;
    if (!mcr__fleet_params_at(text, len, &at, &f->nparams)) {
        free(text);
        return mcr__error(err, MCR_ERR_CORRUPT, "a snapshot text without its header");
    }
    memmove(text, at, f->nparams);
    char *small = realloc(text, f->nparams + 1); /* the header only */
    f->params = small != NULL ? small : text;
    return MCR_OK;
}

static int follow_start(const mcr_fleet_options *o, const mcr_fleet_follow_options *fo,
                        mcr_router *router, mcr_fleet **out, mcr_error *err);

int mcr_fleet_follow(const mcr_fleet_options *o, const mcr_fleet_follow_options *fo,
                     mcr_router *router, mcr_fleet **out, mcr_error *err)
{
    /* SIGPIPE blocked for the first read and the start: the follower's
     * thread, created meanwhile, keeps it blocked for its whole life. */
    sigset_t old;
    mcr__fleet_sigpipe_block(&old);
    int rc = follow_start(o, fo, router, out, err);
    mcr__fleet_sigpipe_restore(&old);
    return rc;
}

/* The follower's options, checked before anything is made. */
static int check_follow_options(const mcr_fleet_follow_options *fo, mcr_error *err)
{
    char q[160];
    if (!mcr__zeroed(fo->reserved, sizeof(fo->reserved)))
        return mcr__error(err, MCR_ERR_INVALID,
                          "mcr_fleet_follow_options: the reserved area is not zero (fill the "
                          "struct from all-zero: mcroute.h)");
    if (fo->client_id != NULL && !mcr__fleet_name_ok(fo->client_id))
        return mcr__error(err, MCR_ERR_INVALID,
                          "client id \"%s\": need 1 to %d of A-Z a-z 0-9 . _ - :",
                          mcr__quote(q, sizeof(q), fo->client_id, strlen(fo->client_id)),
                          MCR_FLEET_NAME_MAX);
    if (fo->lease_ttl_s == 1 || fo->lease_ttl_s > MCR_FLEET_LIMIT_S)
        return mcr__error(err, MCR_ERR_INVALID, "lease_ttl_s: 2 to %u seconds",
                          MCR_FLEET_LIMIT_S);
    if (fo->retry_min_ms > MCR_FLEET_LIMIT_S * 1000u || fo->retry_max_ms > MCR_FLEET_LIMIT_S * 1000u)
        return mcr__error(err, MCR_ERR_INVALID, "retry_min_ms, retry_max_ms: at most %u s",
                          MCR_FLEET_LIMIT_S);
    if (fo->retry_min_ms != 0 && fo->retry_max_ms != 0 && fo->retry_min_ms > fo->retry_max_ms)
        return mcr__error(err, MCR_ERR_INVALID, "retry_min_ms above retry_max_ms");
    return MCR_OK;
}

/* A follower with its settings, etcd client and identity (host, client
 * id and key), nothing running: *out, or an error with nothing left. */
static int fleet_new(const mcr_fleet_options *o, const mcr_fleet_follow_options *fo,
                     mcr_router *router, mcr_fleet **out, mcr_error *err)
{
    mcr_fleet *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory");
    f->stop_pipe[0] = f->stop_pipe[1] = -1;
    f->health_pipe[0] = f->health_pipe[1] = -1;
    f->starting = 1;
    int rc = pthread_mutex_init(&f->lock, NULL);
    if (rc != 0) {
        free(f);
        return mcr__error_sys(err, rc, "cannot create the follower's mutex");
    }
    rc = mcr__fleet_conf_init(&f->c, o, err);
    if (rc == MCR_OK)
        rc = mcr__etcd_init(&f->e, f->c.endpoints, f->c.request_timeout_ms, err);
    if (rc != MCR_OK) {
        fleet_free(f);
        return rc;
    }
    f->router = router;
    f->no_register = fo->no_register;
    f->ttl_s = fo->lease_ttl_s ? fo->lease_ttl_s : MCR_FLEET_LEASE_TTL_S;
    f->retry_min_ms = fo->retry_min_ms ? fo->retry_min_ms : MCR_FLEET_RETRY_MIN_MS;
    f->retry_max_ms = fo->retry_max_ms ? fo->retry_max_ms : MCR_FLEET_RETRY_MAX_MS;
    if (f->retry_max_ms < f->retry_min_ms)
        f->retry_max_ms = f->retry_min_ms;
    f->backoff_ms = f->retry_min_ms;
    f->fn = fo->on_event;
    f->arg = fo->arg;
    f->publish_local = fo->publish_local_states != 0;
    char hn[128] = "unknown";
    gethostname(hn, sizeof(hn) - 1);
    hn[sizeof(hn) - 1] = '\0';
    snprintf(f->host_info, sizeof(f->host_info), "%s pid %ld mcroute %s", hn, (long)getpid(),
             MCR_VERSION_STRING);
    if (fo->client_id != NULL) {
        f->client_id = strdup(fo->client_id);
    } else {
        char id[MCR_FLEET_NAME_MAX + 1];
        size_t k = 0;
        for (size_t i = 0; hn[i] && k < 100; i++) /* keep the id's alphabet */
            id[k++] = mcr__fleet_name_ok((char[]){hn[i], 0}) ? hn[i] : '_';
        snprintf(id + k, sizeof(id) - k, "-%ld", (long)getpid());
        f->client_id = strdup(id);
    }
    f->cache_file = dup_or_null(fo->cache_file);
    size_t kl = strlen(f->c.clients_prefix) + (f->client_id ? strlen(f->client_id) : 0) + 1;
    f->client_key = malloc(kl);
    if (f->client_id == NULL || f->client_key == NULL || (fo->cache_file && !f->cache_file)) {
        fleet_free(f);
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory");
    }
    snprintf(f->client_key, kl, "%s%s", f->c.clients_prefix, f->client_id);
    *out = f;
    return MCR_OK;
}

/* The thread's loop (the stop pipe, the restart and keepalive timers, and
 * with publish_local_states the router's local states watched), made
 * before the first publish so that nothing fails after it. */
static int loop_new(mcr_fleet *f, mcr_error *err)
{
    errno = 0;
    f->wbase = event_base_new();
    int sys = f->wbase == NULL ? errno : 0;
    if (f->wbase != NULL && pipe(f->stop_pipe) != 0)
        sys = errno;
    else if (f->wbase != NULL) {
        fcntl(f->stop_pipe[0], F_SETFL, O_NONBLOCK);
        fcntl(f->stop_pipe[0], F_SETFD, FD_CLOEXEC);
        fcntl(f->stop_pipe[1], F_SETFD, FD_CLOEXEC);
        f->stop_ev = event_new(f->wbase, f->stop_pipe[0], EV_READ | EV_PERSIST, stop_cb, f);
        f->restart_ev = evtimer_new(f->wbase, restart_cb, f);
        f->keepalive_ev = event_new(f->wbase, -1, EV_PERSIST, keepalive_cb, f);
    }
    if (sys != 0 || f->wbase == NULL)
        return mcr__error_sys(err, sys, "cannot set up the follower's event loop");
    if (f->stop_ev == NULL || f->restart_ev == NULL || f->keepalive_ev == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "cannot set up the follower's event loop");
    if (!f->publish_local)
        return MCR_OK;
    if (pipe(f->health_pipe) != 0)
        return mcr__error_sys(err, errno, "cannot create a pipe");
    for (int i = 0; i < 2; i++) {
        fcntl(f->health_pipe[i], F_SETFL, O_NONBLOCK);
        fcntl(f->health_pipe[i], F_SETFD, FD_CLOEXEC);
    }
    f->health_ev = event_new(f->wbase, f->health_pipe[0], EV_READ | EV_PERSIST, mcr__follow_health_cb, f);
    /* The hook wakes the thread when the current snapshot changes; a
     * local state cleared over a published state equal to it (DOWN in
     * the fleet because we wrote it) changes nothing and calls no hook,
     * so the states are also looked at every HEALTH_POLL_MS. */
    f->health_poll_ev = event_new(f->wbase, -1, EV_PERSIST, mcr__follow_health_poll_cb, f);
    struct timeval hp = {0, HEALTH_POLL_MS * 1000};
    if (f->health_ev == NULL || event_add(f->health_ev, NULL) != 0 ||
        f->health_poll_ev == NULL || event_add(f->health_poll_ev, &hp) != 0 ||
        mcr_router_add_hook(f->router, mcr__follow_health_hook, f) != MCR_OK)
        return mcr__error(err, MCR_ERR_NOMEM, "cannot watch the router's local states");
    f->hook_added = 1;
    mcr__follow_health_hook(NULL, NULL, NULL, f); /* local states set before the start */
    return MCR_OK;
}

/* The first snapshot (from etcd, or the cache file: *from_cache), its
 * migration adopted before it is published, published unless the router
 * holds it already. */
static int publish_first(mcr_fleet *f, int *from_cache, mcr_error *err)
{
    mcr_snapshot *snap = NULL;
    int rc = first_read(f, &snap, from_cache, err);
    if (rc == MCR_OK)
        rc = keep_params(f, snap, err);
    if (rc != MCR_OK) {
        mcr_snapshot_unref(snap);
        return rc;
    }
    mcr_snapshot *have = mcr_router_current(f->router);
    if (have != NULL && mcr_snapshot_epoch(have) == mcr_snapshot_epoch(snap) &&
        strcmp(mcr_snapshot_checksum(have), mcr_snapshot_checksum(snap)) == 0) {
        f->cur = mcr_snapshot_ref(snap);
    } else if (have != NULL && mcr_snapshot_epoch(have) >= mcr_snapshot_epoch(snap)) {
        rc = mcr__error(err, MCR_ERR_STALE,
                        "pool \"%s\": the router holds epoch %llu, not below the pool's "
                        "epoch %llu",
                        f->c.pool, (unsigned long long)mcr_snapshot_epoch(have),
                        (unsigned long long)mcr_snapshot_epoch(snap));
    }
    /* A migration under way is adopted before the snapshot is published
     * (a follower that starts during one reads through its migration from
     * the start). */
    if (rc == MCR_OK && !*from_cache)
        rc = read_migration(f, f->revision, snap, err);
    if (rc == MCR_OK && f->cur == NULL) {
        rc = mcr_router_publish(f->router, snap, err);
        if (rc == MCR_OK) {
            f->cur = mcr_snapshot_ref(snap);
            f->st.adopted = 1;
        } else {
            end_migration(f, 0); /* nothing started: nothing left set */
        }
    }
    mcr_snapshot_unref(have);
    mcr_snapshot_unref(snap);
    return rc;
}

/* Save the cache, arm the timers, register, and start the thread, which
 * then owns f. */
static int start_thread(mcr_fleet *f, int from_cache, mcr_error *err)
{
    if (!from_cache && f->cache_file != NULL) {
        mcr_error ce;
        if (mcr_snapshot_save(f->cur, f->cache_file, &ce) != MCR_OK)
            mcr__follow_report(f, MCR_FLEET_CACHE, ce.code, &ce, f->revision, NULL);
    }
    event_add(f->stop_ev, NULL);
    unsigned ka = f->ttl_s * 1000u / 3u;
    struct timeval katv = {(time_t)(ka / 1000), (suseconds_t)(ka % 1000) * 1000};
    event_add(f->keepalive_ev, &katv); /* registered or not: see keepalive_cb */
    if (!from_cache)
        register_client(f);
    schedule_restart(f, 0);
    if (from_cache) {
        mcr_error w; /* held with the event: see mcr__follow_report() */
        mcr__error(&w, MCR_OK, "pool \"%s\": etcd unreachable, starting from cached epoch %llu (%s)",
                   f->c.pool, (unsigned long long)mcr_snapshot_epoch(f->cur), f->cache_file);
        mcr__follow_report(f, MCR_FLEET_CACHED, MCR_OK, &w, 0, NULL);
    }
    int te = pthread_create(&f->thread, NULL, follow_thread, f);
    if (te != 0)
        return mcr__error_sys(err, te, "cannot start the follower's thread");
    /* From here on the thread owns f: only its constant fields are read. */
    f->thread_started = 1;
    return MCR_OK;
}

static int follow_start(const mcr_fleet_options *o, const mcr_fleet_follow_options *fo,
                        mcr_router *router, mcr_fleet **out, mcr_error *err)
{
    mcr_fleet_follow_options dflt;
    if (router == NULL || out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL router or output");
    if (fo == NULL) {
        memset(&dflt, 0, sizeof(dflt));
        fo = &dflt;
    }
    mcr_fleet *f = NULL;
    int from_cache = 0;
    int rc = check_follow_options(fo, err);
    if (rc == MCR_OK)
        rc = fleet_new(o, fo, router, &f, err);
    if (rc != MCR_OK)
        return rc;
    rc = loop_new(f, err);
    if (rc == MCR_OK)
        rc = publish_first(f, &from_cache, err);
    if (rc == MCR_OK)
        rc = start_thread(f, from_cache, err);
    if (rc != MCR_OK) {
        fleet_free(f);
        return rc;
    }
    *out = f;
    return MCR_OK;
}

void mcr_fleet_free(mcr_fleet *f)
{
    if (f == NULL)
        return;
    if (f->hook_added) {
        mcr_router_remove_hook(f->router, mcr__follow_health_hook, f);
        f->hook_added = 0;
    }
    if (f->thread_started) {
        ssize_t w;
        do
            w = write(f->stop_pipe[1], "x", 1);
        while (w < 0 && errno == EINTR);
        pthread_join(f->thread, NULL);
    }
    /* Unregister at once rather than when the lease expires. */
    if (f->lease != 0) {
        sigset_t old;
        mcr__fleet_sigpipe_block(&old);
        mcr_error err;
        /* One try, bounded by the request timeout, on the endpoint that
         * answered last: moved to the front, as a list of one. */
        mcr__etcd_endpoint tmp = f->e.ep[0];
        f->e.ep[0] = f->e.ep[f->e.cur];
        f->e.ep[f->e.cur] = tmp;
        size_t keep = f->e.nep;
        f->e.nep = 1;
        f->e.cur = 0;
        int rc = mcr__etcd_lease_revoke(&f->e, f->lease, &err);
        if (rc != MCR_OK && rc != MCR_ERR_CONNECT) /* not a lease any more: the key */
            (void)mcr__etcd_delete(&f->e, f->client_key, &err);
        f->e.nep = keep;
        mcr__fleet_sigpipe_restore(&old);
    }
    fleet_free(f);
}

void mcr_fleet_get_stats(mcr_fleet *f, mcr_fleet_stats *out)
{
    if (f == NULL || out == NULL) {
        if (out != NULL)
            memset(out, 0, sizeof(*out));
        return;
    }
    pthread_mutex_lock(&f->lock);
    *out = f->st;
    pthread_mutex_unlock(&f->lock);
}

int mcr_fleet_set_adoption(mcr_fleet *f, const mcr_fleet_adoption *a, mcr_error *err)
{
    if (f == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "mcr_fleet_set_adoption: NULL follower");
    if (a != NULL) {
        if (!mcr__zeroed(a->reserved, sizeof(a->reserved)))
            return mcr__error(err, MCR_ERR_INVALID, "mcr_fleet_adoption: reserved is not zero");
        if ((unsigned)a->phase > MCR_MIGRATION_ABORTED)
            return mcr__error(err, MCR_ERR_INVALID, "mcr_fleet_adoption: phase %d is unknown",
                              (int)a->phase);
        if (memchr(a->checksum, '\0', sizeof(a->checksum)) == NULL ||
            memchr(a->migration_id, '\0', sizeof(a->migration_id)) == NULL)
            return mcr__error(err, MCR_ERR_INVALID,
                              "mcr_fleet_adoption: checksum or migration_id not terminated");
        /* what mcr_fleet_clients() reads back as valid, or a migration
         * would wait for this client for ever */
        size_t cl = strlen(a->checksum), il = strlen(a->migration_id);
        if (a->epoch == 0 || cl != MCR_SNAPSHOT_CHECKSUM_LEN ||
            strspn(a->checksum, "0123456789abcdef") != cl)
            return mcr__error(err, MCR_ERR_INVALID,
                              "mcr_fleet_adoption: an epoch above 0 and a checksum of %d "
                              "lower-case hex digits are required",
                              MCR_SNAPSHOT_CHECKSUM_LEN);
        if (a->phase != MCR_MIGRATION_NONE &&
            (il == 0 || strspn(a->migration_id, "0123456789abcdef") != il ||
             a->migration_to_epoch == 0))
            return mcr__error(err, MCR_ERR_INVALID,
                              "mcr_fleet_adoption: a migration phase needs its id (lower-case "
                              "hex digits) and to_epoch");
    }
    pthread_mutex_lock(&f->lock);
    f->adoption_set = a != NULL;
    if (a != NULL) {
        f->adoption = *a;
        f->adoption.note = NULL;
        f->adoption_revision = f->st.revision;
        snprintf(f->adoption_note, sizeof(f->adoption_note), "%s", a->note ? a->note : "");
    }
    int wake = !f->adoption_wake;
    f->adoption_wake = 1;
    pthread_mutex_unlock(&f->lock);
    if (wake) { /* one byte at most in the pipe: never full */
        ssize_t w;
        do
            w = write(f->stop_pipe[1], "a", 1);
        while (w < 0 && errno == EINTR);
    }
    return MCR_OK;
}

const char *mcr_fleet_client_id(const mcr_fleet *f)
{
    return f ? f->client_id : NULL;
}
