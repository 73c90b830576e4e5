/* SPDX-License-Identifier: BSD-3-Clause */
/* overlay.c: a router's local overlay: state overrides by server id on the published snapshot, which of them apply, and the effective snapshot they give. */

/*
 * Why an overlay. A router may be fed by a fleet-wide sequence of epochs
 * (an operator, a watcher, a membership store): epoch N is the same
 * snapshot in every process. A health decision one process makes (a pool
 * that stops reaching a server) must not take an epoch of that sequence,
 * or the fleet's next epoch would be refused as stale there. So such
 * decisions are overrides on the published snapshot: the router's readers
 * get the published snapshot with the overrides applied, under the
 * published epoch, and every publish re-applies them to the new one.
 *
 * The rule for overrides that cannot all apply. A snapshot needs an ACTIVE
 * server. An override that does not take an ACTIVE server of the published
 * snapshot out never threatens that and always applies; those that do are
 * applied in the order they were set while one ACTIVE server remains, and
 * the later ones are held: kept, not in force, tried again at every change
 * of the published snapshot or of the overlay. Setting one that would be
 * held is refused (router.c), so only a publish can hold one. The order is
 * that of the first setting of an id: changing an override's state keeps
 * its place.
 */
#include <stdlib.h>
#include <string.h>

#include "overlay.h"
#include "snapshot.h"

static void override_free(mcr__override *o)
{
    free(o->id);
    free(o->host);
}

void mcr__overlay_free(mcr__overlay *ov)
{
    if (ov == NULL)
        return;
    for (size_t i = 0; i < ov->n; i++)
        override_free(&ov->v[i]);
    free(ov->v);
    free(ov);
}

int mcr__overlay_copy(const mcr__overlay *in, mcr__overlay **out, mcr_error *err)
{
    mcr__overlay *ov = calloc(1, sizeof(*ov));
    size_t n = in != NULL ? in->n : 0;

    if (ov == NULL || (n > 0 && (ov->v = calloc(n, sizeof(*ov->v))) == NULL)) {
        free(ov);
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory copying the local overlay");
    }
    for (size_t i = 0; i < n; i++) {
        mcr__override *o = &ov->v[i];
        *o = in->v[i];
        o->id = strdup(in->v[i].id);
        o->host = strdup(in->v[i].host);
        ov->n = i + 1;
        if (o->id == NULL || o->host == NULL) {
            mcr__overlay_free(ov);
            return mcr__error(err, MCR_ERR_NOMEM, "out of memory copying the local overlay");
        }
    }
    *out = ov;
    return MCR_OK;
}

bool mcr__overlay_equal(const mcr__overlay *a, const mcr__overlay *b)
{
    size_t na = a != NULL ? a->n : 0, nb = b != NULL ? b->n : 0;

    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++) {
        const mcr__override *x = &a->v[i], *y = &b->v[i];
        if (x->state != y->state || x->applied != y->applied || x->port != y->port ||
            strcmp(x->id, y->id) != 0 || strcmp(x->host, y->host) != 0)
            return false;
    }
    return true;
}

long mcr__overlay_find(const mcr__overlay *ov, const char *id)
{
    if (ov == NULL || id == NULL)
        return -1;
    for (size_t i = 0; i < ov->n; i++)
        if (strcmp(ov->v[i].id, id) == 0)
            return (long)i;
    return -1;
}

static bool same_address(const mcr__entry *e, const mcr__override *o)
{
    return e->port == o->port && strlen(o->host) == e->host_len &&
           memcmp(e->host, o->host, e->host_len) == 0;
}

int mcr__overlay_set(mcr__overlay *ov, const mcr_snapshot *base, const char *id,
                     mcr_server_state st, mcr_error *err)
{
    char q[80];
    uint32_t bi = mcr_snapshot_find(base, id);
    long k;

    if (!mcr__state_valid(st))
        return mcr__error(err, MCR_ERR_INVALID, "local state of \"%s\": %d is not a server state",
                          mcr__quote(q, sizeof(q), id, strlen(id)), (int)st);
    if (bi == MCR_NO_SERVER)
        return mcr__error(err, MCR_ERR_UNKNOWN,
                          "local state of \"%s\": the published snapshot (epoch %llu) has no "
                          "server with this id",
                          mcr__quote(q, sizeof(q), id, strlen(id)),
                          (unsigned long long)base->epoch);
    const mcr__entry *e = &base->servers[bi];
    k = mcr__overlay_find(ov, id);
    if (k >= 0) {
        ov->v[k].state = st; /* resolved against `base`: the same address */
        return MCR_OK;
    }
    mcr__override *v = realloc(ov->v, (ov->n + 1) * sizeof(*v));
    if (v == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for a local state");
    ov->v = v;
    mcr__override *o = &v[ov->n];
    memset(o, 0, sizeof(*o));
    o->id = strdup(id);
    o->host = malloc(e->host_len + 1);
    if (o->id == NULL || o->host == NULL) {
        override_free(o);
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for a local state");
    }
    memcpy(o->host, e->host, e->host_len);
    o->host[e->host_len] = '\0';
    o->port = e->port;
    o->state = st;
    ov->n++;
    return MCR_OK;
}

int mcr__overlay_clear(mcr__overlay *ov, const char *id, mcr_error *err)
{
    char q[80];
    long k = mcr__overlay_find(ov, id);

    if (k < 0)
        return mcr__error(err, MCR_ERR_UNKNOWN, "no local state is set for \"%s\"",
                          mcr__quote(q, sizeof(q), id, strlen(id)));
    override_free(&ov->v[k]);
    memmove(&ov->v[k], &ov->v[k + 1], (ov->n - (size_t)k - 1) * sizeof(ov->v[0]));
    ov->n--;
    return MCR_OK;
}

void mcr__overlay_resolve(mcr__overlay *ov, const mcr_snapshot *base)
{
    size_t keep = 0, active;

    if (ov == NULL)
        return;
    for (size_t i = 0; i < ov->n; i++) {
        uint32_t bi = mcr_snapshot_find(base, ov->v[i].id);
        if (bi == MCR_NO_SERVER || !same_address(&base->servers[bi], &ov->v[i])) {
            override_free(&ov->v[i]);
            continue;
        }
        ov->v[keep++] = ov->v[i];
    }
    ov->n = keep;
    /* Each server has one override at most, so what an override does to
     * the count of ACTIVE servers depends on its server's state in `base`
     * alone. First those that add or keep; then those that take out. */
    active = base->nactive;
    for (size_t i = 0; i < ov->n; i++) {
        mcr__override *o = &ov->v[i];
        bool was = base->servers[mcr_snapshot_find(base, o->id)].state == MCR_STATE_ACTIVE;
        bool takes_out = was && o->state != MCR_STATE_ACTIVE;
        o->applied = !takes_out;
        if (!was && o->state == MCR_STATE_ACTIVE)
            active++;
    }
    for (size_t i = 0; i < ov->n; i++) {
        mcr__override *o = &ov->v[i];
        if (o->applied)
            continue;
        if (active > 1) {
            o->applied = true;
            active--;
        }
    }
}

/* The state `ov` gives server bi of `base`. */
static mcr_server_state state_under(const mcr__overlay *ov, const mcr_snapshot *base, size_t bi)
{
    long k = mcr__overlay_find(ov, base->servers[bi].id);
    if (k >= 0 && ov->v[k].applied)
        return ov->v[k].state;
    return base->servers[bi].state;
}

bool mcr__overlay_same_effect(const mcr__overlay *a, const mcr__overlay *b,
                              const mcr_snapshot *base)
{
    /* Only servers with an override in either can differ. */
    const mcr__overlay *both[2] = {a, b};
    for (int side = 0; side < 2; side++) {
        const mcr__overlay *ov = both[side];
        for (size_t i = 0; ov != NULL && i < ov->n; i++) {
            uint32_t bi = mcr_snapshot_find(base, ov->v[i].id);
            if (bi == MCR_NO_SERVER)
                return false; /* not resolved against base: cannot say */
            if (state_under(a, base, (size_t)bi) != state_under(b, base, (size_t)bi))
                return false;
        }
    }
    return true;
}

int mcr__overlay_effective(const mcr__overlay *ov, const mcr_snapshot *base, mcr_snapshot **out,
                           mcr_error *err)
{
    mcr_changes *ch = NULL;
    int rc = MCR_OK;

    for (size_t i = 0; ov != NULL && i < ov->n && rc == MCR_OK; i++) {
        const mcr__override *o = &ov->v[i];
        uint32_t bi = mcr_snapshot_find(base, o->id);
        if (!o->applied || bi == MCR_NO_SERVER || base->servers[bi].state == o->state)
            continue;
        if (ch == NULL && (ch = mcr_changes_new()) == NULL)
            return mcr__error(err, MCR_ERR_NOMEM, "out of memory applying the local overlay");
        rc = mcr_changes_set_state(ch, o->id, o->state, err);
    }
    if (rc == MCR_OK && ch == NULL) {
        *out = mcr_snapshot_ref(base);
        return MCR_OK;
    }
    if (rc == MCR_OK)
        rc = mcr__snapshot_apply_at(base, ch, base->epoch, out, err);
    mcr_changes_free(ch);
    return rc;
}
