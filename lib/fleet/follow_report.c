/* SPDX-License-Identifier: BSD-3-Clause */
/* follow_report.c: the follower's events to its callback (those of the start held for its thread) and its counters. */
#include <stdio.h>
#include <string.h>

#include "follow_internal.h"

void mcr__follow_stat_add(mcr_fleet *f, uint64_t *field, uint64_t n)
{
    pthread_mutex_lock(&f->lock);
    *field += n;
    pthread_mutex_unlock(&f->lock);
}

void mcr__follow_sync_stats(mcr_fleet *f)
{
    pthread_mutex_lock(&f->lock);
    f->st.requests = f->e.requests;
    f->st.revision = f->revision;
    f->st.epoch = f->cur ? mcr_snapshot_epoch(f->cur) : 0;
    f->st.registered = f->lease != 0;
    f->st.connected = f->watch != NULL && f->st.connected;
    f->st.migration_phase = f->mig_phase;
    memcpy(f->st.migration_id, f->mig_id, sizeof(f->st.migration_id));
    f->st.migration_from_epoch = f->mig_phase != MCR_MIGRATION_NONE ? f->mig_from_epoch : 0;
    f->st.migration_to_epoch = f->mig_phase != MCR_MIGRATION_NONE ? f->mig_to_epoch : 0;
    f->st.migration_copied = f->mig_progress.copied;
    f->st.migration_backlog = f->mig_progress.backlog;
    f->st.migration_keys_per_s = f->mig_progress.keys_per_s;
    pthread_mutex_unlock(&f->lock);
}

void mcr__follow_report(mcr_fleet *f, mcr_fleet_event_kind kind, int status, const mcr_error *err,
                        uint64_t revision, const char *endpoint)
{
    mcr__follow_sync_stats(f);
    if (f->fn == NULL)
        return;
    if (f->starting) {
        /* Events are the follower thread's: this one is delivered when it
         * starts. Reporting here, or once the thread was created, from the
         * caller's thread as CACHED was, called the callback on another
         * thread than the header says, and CACHED read f->cur and the
         * counters while the new thread changed them (a data race that
         * ThreadSanitizer found in test_fleet_follow start_from_cache). */
        if (f->nheld < sizeof(f->held) / sizeof(f->held[0])) {
            struct held_event *h = &f->held[f->nheld++];
            h->kind = kind;
            h->status = status;
            if (err != NULL)
                h->err = *err;
            else
                memset(&h->err, 0, sizeof(h->err));
            h->revision = revision;
            h->has_endpoint = endpoint != NULL;
            snprintf(h->endpoint, sizeof(h->endpoint), "%s", endpoint ? endpoint : "");
        }
        return;
    }
    mcr_fleet_event ev = {kind, status, status != MCR_OK || kind == MCR_FLEET_CACHED ? err : NULL,
                          f->cur ? mcr_snapshot_epoch(f->cur) : 0, revision, endpoint};
    f->fn(&ev, f->arg);
}
