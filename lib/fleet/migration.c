/* SPDX-License-Identifier: BSD-3-Clause */
/* migration.c: a pool's migration in etcd: reading, planning and writing its record by compare-and-swap, the switch as one transaction with the snapshot, and the lock a migration runs under. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fleet_internal.h"

/* ------------------------------------------------------------ reading */

/* The record through s: MCR_OK with *m, MCR_ERR_EMPTY when there is none,
 * the parse errors. Retries connection failures until the deadline. */
static int get_record(mcr__fleet_session *s, mcr_migration *m, mcr_error *err)
{
    mcr__etcd_kv kv;
    bool found = false;
    int rc;
    memset(m, 0, sizeof(*m));
    do
        rc = mcr__etcd_get(&s->e, s->c.migration_key, &found, &kv, NULL, err);
    while (mcr__fleet_session_again(s, rc));
    if (rc != MCR_OK)
        return rc;
    if (!found)
        return mcr__error(err, MCR_ERR_EMPTY, "pool \"%s\": no migration record (no key %s)",
                          s->c.pool, s->c.migration_key);
    rc = mcr__migration_parse(s->c.migration_key, kv.mod_revision, kv.value, kv.value_len, m, err);
    mcr__etcd_kv_clear(&kv);
    return rc;
}

int mcr_fleet_migration_read(const mcr_fleet_options *o, mcr_migration *out, mcr_error *err)
{
    mcr__fleet_session s;
    if (out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL output");
    memset(out, 0, sizeof(*out));
    int rc = mcr__fleet_session_open(&s, o, err);
    if (rc != MCR_OK)
        return rc;
    rc = get_record(&s, out, err);
    if (rc != MCR_OK)
        memset(out, 0, sizeof(*out));
    mcr__fleet_session_close(&s);
    return rc;
}

/* ------------------------------------------------------------ planning */

/* 16 random hex digits. */
static int new_id(char *id, size_t cap, mcr_error *err)
{
    unsigned char b[8];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, b, sizeof(b)) : -1;
    int e = errno;
    if (fd >= 0)
        close(fd);
    if (n != (ssize_t)sizeof(b))
        return mcr__error(err, MCR_ERR_IO, "cannot read /dev/urandom for a migration id: %s",
                          n < 0 ? strerror(e) : "short read");
    for (size_t i = 0; i < sizeof(b) && 2 * i + 2 < cap; i++)
        snprintf(id + 2 * i, 3, "%02x", b[i]);
    return MCR_OK;
}

int mcr_fleet_migration_plan(const mcr_fleet_options *o, const mcr_snapshot *target,
                             unsigned flags, mcr_migration *out, mcr_error *err)
{
    mcr__fleet_session s;
    if (out == NULL || target == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL target or output");
    memset(out, 0, sizeof(*out));
    if ((flags & ~(unsigned)MCR_CHANGES_STATES) != 0)
        return mcr__error(err, MCR_ERR_INVALID, "unknown flags 0x%x", flags);
    int rc = mcr__fleet_session_open(&s, o, err);
    if (rc != MCR_OK)
        return rc;
    mcr_snapshot *cur = NULL, *next = NULL;
    do
        rc = mcr__fleet_get(&s.e, &s.c, NULL, &cur, NULL, NULL, err);
    while (mcr__fleet_session_again(&s, rc));
    if (rc == MCR_OK)
        rc = mcr__fleet_next_to(cur, target, flags, &next, err);
    if (rc == MCR_OK && next == NULL)
        rc = mcr__error(err, MCR_ERR_EMPTY,
                        "pool \"%s\" already has these servers (epoch %llu): nothing to migrate",
                        s.c.pool, (unsigned long long)mcr_snapshot_epoch(cur));
    if (rc == MCR_OK)
        rc = new_id(out->id, sizeof(out->id), err);
    mcr__fleet_session_close(&s);
    if (rc != MCR_OK) {
        mcr_snapshot_unref(cur);
        mcr_snapshot_unref(next);
        memset(out, 0, sizeof(*out));
        return rc;
    }
    out->phase = MCR_MIGRATION_PLANNED;
    out->from = cur;
    out->to = next;
    out->warm = 1;
    return MCR_OK;
}

/* ------------------------------------------------------------ writing */

/* Why a compare failed: the record as it is now, for the message. */
static int record_changed(mcr__fleet_session *s, uint64_t expected, mcr_error *err)
{
    mcr__etcd_kv kv;
    bool found = false;
    char now[64] = "now unknown";
    mcr_error e2;
    if (mcr__etcd_get(&s->e, s->c.migration_key, &found, &kv, NULL, &e2) == MCR_OK) {
        if (found)
            snprintf(now, sizeof(now), "now revision %llu", (unsigned long long)kv.mod_revision);
        else
            snprintf(now, sizeof(now), "now deleted");
        if (found)
            mcr__etcd_kv_clear(&kv);
    }
    if (expected == 0)
        return mcr__error(err, MCR_ERR_STALE,
                          "pool \"%s\": a migration record exists already (%s): another "
                          "mcroute migrate wrote it",
                          s->c.pool, now);
    return mcr__error(err, MCR_ERR_STALE,
                      "pool \"%s\": the migration record changed since revision %llu (%s): "
                      "another mcroute migrate wrote it",
                      s->c.pool, (unsigned long long)expected, now);
}

/* Whether the record holds exactly `text` now (a write of ours whose reply
 * was lost): true and its mod_revision. */
static bool record_is(mcr__fleet_session *s, const char *text, size_t len, uint64_t *modrev)
{
    mcr__etcd_kv kv;
    bool found = false, same = false;
    mcr_error e2;
    if (mcr__etcd_get(&s->e, s->c.migration_key, &found, &kv, NULL, &e2) != MCR_OK || !found)
        return false;
    same = kv.value_len == len && memcmp(kv.value, text, len) == 0;
    *modrev = kv.mod_revision;
    mcr__etcd_kv_clear(&kv);
    return same;
}

/* Send the transaction `ops` until it is answered: MCR_OK with *ok, or the
 * error; *unanswered is set when an attempt was sent and not answered (it
 * may have been applied). */
static int send_txn(mcr__fleet_session *s, const mcr__etcd_put_if *ops, size_t n, bool *ok,
                    uint64_t *rev, bool *unanswered, mcr_error *err)
{
    int rc;
    do {
        uint64_t failures = s->e.failures;
        rc = mcr__etcd_cas_many(&s->e, ops, n, ok, rev, err);
        /* unanswered, or out of memory while it was sent or its reply read:
         * either way it may have been committed */
        if (s->e.failures != failures || rc == MCR_ERR_NOMEM)
            *unanswered = true;
    } while (mcr__fleet_session_again(s, rc));
    return rc;
}

int mcr_fleet_migration_write(const mcr_fleet_options *o, mcr_migration *m, mcr_error *err)
{
    mcr__fleet_session s;
    char *text = NULL;
    size_t len = 0;
    if (m == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL migration");
    uint64_t keep = m->updated;
    m->updated = mcr__fleet_unix_ms();
    int rc = mcr__migration_format(m, &text, &len, err);
    if (rc != MCR_OK) {
        m->updated = keep;
        return rc;
    }
    rc = mcr__fleet_session_open(&s, o, err);
    if (rc != MCR_OK) {
        free(text);
        return rc;
    }
    mcr__etcd_put_if op = {s.c.migration_key, text, len, m->mod_revision, 0};
    bool ok = false, unanswered = false;
    uint64_t rev = 0;
    rc = send_txn(&s, &op, 1, &ok, &rev, &unanswered, err);
    if (rc == MCR_OK && ok) {
        m->mod_revision = rev;
    } else if (rc == MCR_OK || unanswered) {
        /* refused, or maybe applied: the record tells */
        uint64_t modrev = 0;
        if (unanswered && record_is(&s, text, len, &modrev)) {
            m->mod_revision = modrev;
            rc = MCR_OK;
        } else if (rc == MCR_OK) {
            rc = record_changed(&s, m->mod_revision, err);
        } else {
            rc = mcr__fleet_outcome_unknown(err, rc, "the migration record");
        }
    }
    mcr__fleet_session_close(&s);
    free(text);
    return rc;
}

/* ------------------------------------------------------------ the switch */

static bool same_snapshot(const mcr_snapshot *a, const mcr_snapshot *b)
{
    return mcr_snapshot_epoch(a) == mcr_snapshot_epoch(b) &&
           strcmp(mcr_snapshot_checksum(a), mcr_snapshot_checksum(b)) == 0;
}

int mcr_fleet_migration_switch(const mcr_fleet_options *o, mcr_migration *m, mcr_error *err)
{
    mcr__fleet_session s;
    if (m == NULL || m->from == NULL || m->to == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL migration or snapshot");
    mcr_migration sw = *m; /* the record as switched: shares m's references */
    sw.phase = MCR_MIGRATION_SWITCHED;
    sw.updated = mcr__fleet_unix_ms();
    char *rtext = NULL, *stext = NULL;
    size_t rlen = 0, slen = 0;
    int rc = mcr__migration_format(&sw, &rtext, &rlen, err);
    if (rc == MCR_OK)
        rc = mcr_snapshot_text(m->to, &stext, &slen, err);
    if (rc == MCR_OK)
        rc = mcr__fleet_session_open(&s, o, err);
    if (rc != MCR_OK) {
        free(rtext);
        free(stext);
        return rc;
    }
    bool unanswered = false, last_nomem = false;
    for (unsigned attempt = 0;; attempt++) {
        mcr_snapshot *cur = NULL;
        uint64_t snap_rev = 0;
        mcr_migration now;
        do
            rc = mcr__fleet_get(&s.e, &s.c, NULL, &cur, &snap_rev, NULL, err);
        while (mcr__fleet_session_again(&s, rc));
        if (rc != MCR_OK) {
            if (last_nomem) /* the switch sent last may have been committed */
                rc = mcr__fleet_outcome_unknown(err, rc, "the switch (snapshot and record)");
            break;
        }
        rc = get_record(&s, &now, err);
        if (rc != MCR_OK && last_nomem) {
            mcr_snapshot_unref(cur);
            rc = mcr__fleet_outcome_unknown(err, rc, "the switch (snapshot and record)");
            break;
        }
        if (rc == MCR_OK && same_snapshot(cur, m->to) && strcmp(now.id, m->id) == 0 &&
            now.phase == MCR_MIGRATION_SWITCHED && same_snapshot(now.to, m->to)) {
            /* switched already: by us (a lost reply) or by a run resumed */
            m->phase = MCR_MIGRATION_SWITCHED;
            m->updated = now.updated;
            m->mod_revision = now.mod_revision;
            mcr_migration_clear(&now);
            mcr_snapshot_unref(cur);
            break;
        }
        uint64_t rec_rev = now.mod_revision;
        mcr_migration_clear(&now);
        if (rc == MCR_OK && rec_rev != m->mod_revision)
            rc = record_changed(&s, m->mod_revision, err);
        else if (rc == MCR_OK && !same_snapshot(cur, m->from))
            rc = mcr__error(err, MCR_ERR_STALE,
                            "pool \"%s\" is at epoch %llu (checksum %s), not at the migration's "
                            "epoch %llu (checksum %s): it was changed during the migration",
                            s.c.pool, (unsigned long long)mcr_snapshot_epoch(cur),
                            mcr_snapshot_checksum(cur),
                            (unsigned long long)mcr_snapshot_epoch(m->from),
                            mcr_snapshot_checksum(m->from));
        mcr_snapshot_unref(cur);
        if (rc != MCR_OK)
            break;
        if (attempt >= s.c.retries) {
            rc = last_nomem ? mcr__error(err, MCR_ERR_NOMEM,
                                         "pool \"%s\": out of memory sending the switch",
                                         s.c.pool)
                            : mcr__error(err, MCR_ERR_BUSY,
                                         "pool \"%s\": the switch kept conflicting with other "
                                         "writers after %u attempts",
                                         s.c.pool, s.c.retries);
            break;
        }
        mcr__etcd_put_if ops[2] = {{s.c.snapshot_key, stext, slen, snap_rev, 0},
                                   {s.c.migration_key, rtext, rlen, m->mod_revision, 0}};
        bool ok = false;
        uint64_t rev = 0;
        rc = send_txn(&s, ops, 2, &ok, &rev, &unanswered, err);
        if (rc == MCR_OK && ok) {
            m->phase = MCR_MIGRATION_SWITCHED;
            m->updated = sw.updated;
            m->mod_revision = rev;
            break;
        }
        last_nomem = rc == MCR_ERR_NOMEM;
        if (last_nomem)
            continue; /* the next reads tell whether it was committed (ours) */
        if (rc != MCR_OK) {
            if (unanswered)
                rc = mcr__fleet_outcome_unknown(err, rc, "the switch (snapshot and record)");
            break;
        }
        /* a compare failed: the next reads say which (or that it was ours) */
    }
    mcr__fleet_session_close(&s);
    free(rtext);
    free(stext);
    return rc;
}

/* ------------------------------------------------------------ the lock */

struct mcr_fleet_lock {
    mcr__fleet_conf c;
    mcr__etcd e;        /* the keepalive thread's, then unlock's */
    uint64_t lease;
    unsigned ttl_s;
    pthread_t thread;
    int thread_started;
    int stop_pipe[2];
};

static void *lock_thread(void *arg)
{
    mcr_fleet_lock *l = arg;
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &s, NULL);
    int period = (int)(l->ttl_s * 1000u / 3u);
    for (;;) {
        struct pollfd p = {l->stop_pipe[0], POLLIN, 0};
        int n = poll(&p, 1, period);
        if (n < 0 && errno == EINTR)
            continue;
        if (n != 0)
            break; /* stop */
        bool alive = false;
        mcr_error err;
        /* a failure is tried again at the next period; a lease etcd no
         * longer knows is lost for good, and the record's compare-and-swap
         * protects the migration from then on */
        (void)mcr__etcd_lease_keepalive(&l->e, l->lease, &alive, &err);
    }
    return NULL;
}

static void lock_free(mcr_fleet_lock *l)
{
    if (l->lease != 0) {
        mcr_error err;
        (void)mcr__etcd_lease_revoke(&l->e, l->lease, &err);
    }
    for (int i = 0; i < 2; i++)
        if (l->stop_pipe[i] >= 0)
            close(l->stop_pipe[i]);
    mcr__etcd_cleanup(&l->e);
    mcr__fleet_conf_cleanup(&l->c);
    free(l);
}

/* Take the lock through s (l->lease granted): MCR_OK, or MCR_ERR_BUSY
 * naming the holder. */
static int take(mcr__fleet_session *s, mcr_fleet_lock *l, const char *owner, mcr_error *err)
{
    mcr__etcd_put_if op = {s->c.lock_key, owner, strlen(owner), 0, l->lease};
    bool ok = false, unanswered = false;
    int rc = send_txn(s, &op, 1, &ok, NULL, &unanswered, err);
    if (rc != MCR_OK || ok)
        return rc;
    mcr__etcd_kv kv;
    bool found = false;
    do
        rc = mcr__etcd_get(&s->e, s->c.lock_key, &found, &kv, NULL, err);
    while (mcr__fleet_session_again(s, rc));
    if (rc != MCR_OK)
        return rc;
    if (!found) /* released meanwhile: the caller may try again */
        return mcr__error(err, MCR_ERR_BUSY,
                          "pool \"%s\": the migration lock was held by another process, and "
                          "released just now: try again",
                          s->c.pool);
    if (kv.lease == l->lease) { /* ours: a reply lost */
        mcr__etcd_kv_clear(&kv);
        return MCR_OK;
    }
    char q[160];
    rc = mcr__error(err, MCR_ERR_BUSY,
                    "pool \"%s\": another mcroute migrate holds the migration lock (%s: \"%s\")",
                    s->c.pool, s->c.lock_key,
                    mcr__quote(q, sizeof(q), (const char *)kv.value, kv.value_len));
    mcr__etcd_kv_clear(&kv);
    return rc;
}

int mcr_fleet_migration_lock(const mcr_fleet_options *o, const char *owner, unsigned ttl_s,
                             mcr_fleet_lock **out, mcr_error *err)
{
    char dflt[200];
    if (out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL output");
    if (ttl_s == 0)
        ttl_s = MCR_FLEET_LOCK_TTL_S;
    if (ttl_s < 2 || ttl_s > MCR_FLEET_LIMIT_S)
        return mcr__error(err, MCR_ERR_INVALID, "lock ttl_s: 2 to %u seconds", MCR_FLEET_LIMIT_S);
    if (owner == NULL) {
        char hn[128] = "unknown";
        gethostname(hn, sizeof(hn) - 1);
        hn[sizeof(hn) - 1] = '\0';
        snprintf(dflt, sizeof(dflt), "%s pid %ld", hn, (long)getpid());
        owner = dflt;
    }
    if (*owner == '\0' || strlen(owner) > 255)
        return mcr__error(err, MCR_ERR_INVALID, "lock owner: 1 to 255 bytes");
    mcr_fleet_lock *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory");
    l->stop_pipe[0] = l->stop_pipe[1] = -1;
    l->ttl_s = ttl_s;
    mcr__fleet_session s;
    int rc = mcr__fleet_session_open(&s, o, err);
    if (rc != MCR_OK) {
        free(l);
        return rc;
    }
    rc = mcr__fleet_conf_init(&l->c, o, err);
    if (rc == MCR_OK)
        rc = mcr__etcd_init(&l->e, l->c.endpoints, l->c.request_timeout_ms, err);
    if (rc == MCR_OK)
        do
            rc = mcr__etcd_lease_grant(&s.e, ttl_s, &l->lease, err);
        while (mcr__fleet_session_again(&s, rc));
    if (rc == MCR_OK)
        rc = take(&s, l, owner, err);
    mcr__fleet_session_close(&s);
    if (rc == MCR_OK && pipe(l->stop_pipe) != 0)
        rc = mcr__error_sys(err, errno, "cannot create a pipe");
    if (rc == MCR_OK) {
        fcntl(l->stop_pipe[0], F_SETFD, FD_CLOEXEC);
        fcntl(l->stop_pipe[1], F_SETFD, FD_CLOEXEC);
        int e = pthread_create(&l->thread, NULL, lock_thread, l);
        if (e != 0)
            rc = mcr__error_sys(err, e, "cannot start the lock's keepalive thread");
        else
            l->thread_started = 1;
    }
    if (rc != MCR_OK) {
        sigset_t old;
        mcr__fleet_sigpipe_block(&old);
        lock_free(l); /* revokes the lease: the key, if written, goes */
        mcr__fleet_sigpipe_restore(&old);
        return rc;
    }
    *out = l;
    return MCR_OK;
}

void mcr_fleet_migration_unlock(mcr_fleet_lock *l)
{
    if (l == NULL)
        return;
    if (l->thread_started) {
        ssize_t w;
        do
            w = write(l->stop_pipe[1], "x", 1);
        while (w < 0 && errno == EINTR);
        pthread_join(l->thread, NULL);
    }
    sigset_t old;
    mcr__fleet_sigpipe_block(&old);
    lock_free(l);
    mcr__fleet_sigpipe_restore(&old);
}
