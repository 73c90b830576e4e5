/* SPDX-License-Identifier: BSD-3-Clause */
/* changes.c: membership change sets, and the next snapshot built from an old one and a change set; slot plans. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement/placement_internal.h"
#include "mcroute_snapshot.h"
#include "snapshot.h"

/* ------------------------------------------------------------ changes */

typedef enum ch_kind { CH_ADD, CH_REMOVE, CH_WEIGHT, CH_STATE, CH_SLOTS } ch_kind;

typedef struct change {
    ch_kind kind;
    char *id;            /* always set: given, or the default for an add */
    bool named;          /* add: the id was given */
    char *host;          /* add */
    size_t host_len;
    int port;
    uint32_t weight;     /* add, set weight */
    char *zone;          /* add: NULL for none */
    mcr_server_state state; /* add, set state */
    uint32_t first, last;   /* move slots: the range, to server `id` */
} change;

struct mcr_changes {
    change *v;
    size_t n, cap;
};

mcr_changes *mcr_changes_new(void)
{
    return calloc(1, sizeof(mcr_changes));
}

static void change_free(change *c)
{
    free(c->id);
    free(c->host);
    free(c->zone);
}

void mcr_changes_reset(mcr_changes *ch)
{
    if (ch == NULL)
        return;
    for (size_t i = 0; i < ch->n; i++)
        change_free(&ch->v[i]);
    ch->n = 0;
}

void mcr_changes_free(mcr_changes *ch)
{
    if (ch == NULL)
        return;
    mcr_changes_reset(ch);
    free(ch->v);
    free(ch);
}

size_t mcr_changes_count(const mcr_changes *ch)
{
    return ch == NULL ? 0 : ch->n;
}

static int push_change(mcr_changes *ch, change *c, mcr_error *err)
{
    if (ch->n == ch->cap) {
        size_t cap = ch->cap ? 2 * ch->cap : 8;
        change *v = realloc(ch->v, cap * sizeof(*v));
        if (v == NULL) {
            change_free(c);
            return mcr__error(err, MCR_ERR_NOMEM, "out of memory recording a change");
        }
        ch->v = v;
        ch->cap = cap;
    }
    ch->v[ch->n++] = *c;
    return MCR_OK;
}

int mcr_changes_add(mcr_changes *ch, const mcr_server_desc *d, mcr_error *err)
{
    char q[80], buf[MCR__NAME_BUF];
    int rc;

    if (ch == NULL || d == NULL || d->host == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL changes, description or host");
    if (!mcr__zeroed(d->reserved, sizeof(d->reserved)))
        return mcr__error(err, MCR_ERR_INVALID,
                          "mcr_server_desc: the reserved area is not zero (fill the "
                          "struct from all-zero: mcroute.h)");
    size_t hl = strlen(d->host);
    if ((rc = mcr__check_host(d->host, hl, err)) != MCR_OK)
        return rc;
    if (d->port < 1 || d->port > 65535)
        return mcr__error(err, MCR_ERR_RANGE, "port %d of \"%s\" is outside 1..65535", d->port,
                          mcr__quote(q, sizeof(q), d->host, hl));
    if (d->weight > MCR_WEIGHT_MAX) /* 0: the mode says, when the change applies */
        return mcr__error(err, MCR_ERR_RANGE, "weight %u of \"%s\" is outside 0..%u",
                          (unsigned)d->weight, mcr__quote(q, sizeof(q), d->host, hl),
                          (unsigned)MCR_WEIGHT_MAX);
    const char *id;
    if ((rc = mcr__desc_id(d, &id, err)) != MCR_OK)
        return rc;
    if (id != NULL && (rc = mcr__check_name("id", id, err)) != MCR_OK)
        return rc;
    const char *zone = d->zone != NULL && d->zone[0] != '\0' ? d->zone : NULL;
    if (zone != NULL && (rc = mcr__check_name("zone", zone, err)) != MCR_OK)
        return rc;
    if (!mcr__state_valid(d->state))
        return mcr__error(err, MCR_ERR_INVALID, "unknown server state %d", (int)d->state);
    if (id == NULL)
        mcr__default_id(d->host, d->port, buf);
    change c = {.kind = CH_ADD,
                .id = strdup(id != NULL ? id : buf),
                .named = id != NULL,
                .host = strdup(d->host),
                .host_len = hl,
                .port = d->port,
                .weight = d->weight,
                .zone = zone != NULL ? strdup(zone) : NULL,
                .state = d->state};
    if (c.id == NULL || c.host == NULL || (zone != NULL && c.zone == NULL)) {
        change_free(&c);
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory recording a change");
    }
    return push_change(ch, &c, err);
}

static int record_id_change(mcr_changes *ch, ch_kind kind, const char *id, uint32_t weight,
                            mcr_server_state state, mcr_error *err)
{
    int rc;

    if (ch == NULL || id == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL changes or id");
    if ((rc = mcr__check_name("id", id, err)) != MCR_OK)
        return rc;
    change c = {.kind = kind, .id = strdup(id), .weight = weight, .state = state};
    if (c.id == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory recording a change");
    return push_change(ch, &c, err);
}

int mcr_changes_remove(mcr_changes *ch, const char *id, mcr_error *err)
{
    return record_id_change(ch, CH_REMOVE, id, 0, MCR_STATE_ACTIVE, err);
}

int mcr_changes_set_weight(mcr_changes *ch, const char *id, uint32_t weight, mcr_error *err)
{
    if (ch != NULL && id != NULL && weight > MCR_WEIGHT_MAX) /* 0: as the mode says */
        return mcr__error(err, MCR_ERR_RANGE, "weight %u is outside 0..%u", (unsigned)weight,
                          (unsigned)MCR_WEIGHT_MAX);
    return record_id_change(ch, CH_WEIGHT, id, weight, MCR_STATE_ACTIVE, err);
}

int mcr_changes_set_state(mcr_changes *ch, const char *id, mcr_server_state state,
                          mcr_error *err)
{
    if (ch != NULL && id != NULL && !mcr__state_valid(state))
        return mcr__error(err, MCR_ERR_INVALID, "unknown server state %d", (int)state);
    return record_id_change(ch, CH_STATE, id, 0, state, err);
}

int mcr_changes_move_slots(mcr_changes *ch, uint32_t first, uint32_t last, const char *id,
                           mcr_error *err)
{
    if (ch != NULL && id != NULL && (first > last || last >= MCR_SLOTS_MAX))
        return mcr__error(err, MCR_ERR_RANGE, "slots %u-%u: not a range within 0..%u",
                          (unsigned)first, (unsigned)last, (unsigned)MCR_SLOTS_MAX - 1);
    int rc = record_id_change(ch, CH_SLOTS, id, 0, MCR_STATE_ACTIVE, err);
    if (rc == MCR_OK) {
        ch->v[ch->n - 1].first = first;
        ch->v[ch->n - 1].last = last;
    }
    return rc;
}

/* The working list of an apply: entries (live or gone) and two hash sets
 * over them, of ids and of addresses; a gone entry stays in the sets and is
 * skipped by lookups. */
typedef struct work {
    mcr__entry *e;
    long *from;
    bool *gone;
    size_t n;
    uint32_t *ids, *addrs; /* index + 1, 0 = empty */
    size_t mask;
    /* The map modes: the map in work indexes. A removed server keeps its
     * entries until the end of the batch (work_finish_map): a server
     * re-added under its id takes them back. */
    uint32_t *map;
    size_t nmap, map_cap;
    uint32_t *cnt;         /* jump: buckets of each work index in map */
    uint32_t *drop;        /* jump: how many of its highest buckets to free
                              at the end (a lower weight) */
    bool orphans_ok;       /* slots (the planner): slots left by a removed
                              server become MCR__HOLE instead of an error */
} work;

static long work_find_id(const work *w, const char *id)
{
    for (size_t j = (size_t)mcr__str_hash(id, strlen(id), MCR__FNV_OFFSET) & w->mask;;
         j = (j + 1) & w->mask) {
        uint32_t x = w->ids[j];
        if (x == 0)
            return -1;
        if (!w->gone[x - 1] && strcmp(w->e[x - 1].id, id) == 0)
            return (long)x - 1;
    }
}

/* The removed entry with id `id` that still holds buckets, or -1. There is
 * at most one: re-adding an id takes its buckets. */
static long work_find_gone(const work *w, const char *id)
{
    for (size_t j = (size_t)mcr__str_hash(id, strlen(id), MCR__FNV_OFFSET) & w->mask;;
         j = (j + 1) & w->mask) {
        uint32_t x = w->ids[j];
        if (x == 0)
            return -1;
        if (w->gone[x - 1] && w->cnt[x - 1] > 0 && strcmp(w->e[x - 1].id, id) == 0)
            return (long)x - 1;
    }
}

static long work_find_addr(const work *w, const char *host, size_t hl, int port)
{
    for (size_t j = (size_t)mcr__str_hash(host, hl, MCR__FNV_OFFSET ^ (uint64_t)port) & w->mask;;
         j = (j + 1) & w->mask) {
        uint32_t x = w->addrs[j];
        if (x == 0)
            return -1;
        const mcr__entry *o = &w->e[x - 1];
        if (!w->gone[x - 1] && o->port == port && o->host_len == hl &&
            memcmp(o->host, host, hl) == 0)
            return (long)x - 1;
    }
}

static void work_insert(work *w, size_t i)
{
    const mcr__entry *x = &w->e[i];
    size_t j = (size_t)mcr__str_hash(x->id, strlen(x->id), MCR__FNV_OFFSET) & w->mask;
    while (w->ids[j] != 0)
        j = (j + 1) & w->mask;
    w->ids[j] = (uint32_t)i + 1;
    j = (size_t)mcr__str_hash(x->host, x->host_len, MCR__FNV_OFFSET ^ (uint64_t)x->port) & w->mask;
    while (w->addrs[j] != 0)
        j = (j + 1) & w->mask;
    w->addrs[j] = (uint32_t)i + 1;
}

/* jump: give work index i `target` buckets: cancel pending frees, append
 * new buckets at the end, or free its highest ones at the end. */
static int jump_set_weight(work *w, size_t i, uint32_t target, size_t k, const char *qid,
                           mcr_error *err)
{
    uint32_t eff = w->cnt[i] - w->drop[i];
    if (target <= eff) {
        w->drop[i] += eff - target;
        return MCR_OK;
    }
    uint32_t more = target - eff, back = more < w->drop[i] ? more : w->drop[i];
    w->drop[i] -= back;
    more -= back;
    if (w->nmap + more > MCR__JUMP_BUCKETS_MAX)
        return mcr__error(err, MCR_ERR_RANGE,
                          "change %zu: \"%s\": jump would have more than %u buckets", k, qid,
                          (unsigned)MCR__JUMP_BUCKETS_MAX);
    if (w->nmap + more > w->map_cap) {
        size_t cap = w->map_cap ? w->map_cap : 64;
        while (cap < w->nmap + more)
            cap *= 2;
        uint32_t *m = realloc(w->map, cap * sizeof(*m));
        if (m == NULL)
            return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %zu buckets", cap);
        w->map = m;
        w->map_cap = cap;
    }
    for (uint32_t j = 0; j < more; j++)
        w->map[w->nmap++] = (uint32_t)i;
    w->cnt[i] += more;
    return MCR_OK;
}

/* Apply change c (number k, 1-based, for messages) to the working list. */
static int work_apply(work *w, const mcr_snapshot *old, const change *c, size_t k,
                      mcr_error *err)
{
    char q[80];
    const char *qid = mcr__quote(q, sizeof(q), c->id, strlen(c->id));

    if (c->kind == CH_ADD) {
        if (work_find_id(w, c->id) >= 0)
            return mcr__error(err, MCR_ERR_DUPLICATE, "change %zu: add \"%s\": id already present",
                              k, qid);
        if (work_find_addr(w, c->host, c->host_len, c->port) >= 0)
            return mcr__error(err, MCR_ERR_DUPLICATE,
                              "change %zu: add \"%s\": address %s%s%s:%d already present", k, qid,
                              memchr(c->host, ':', c->host_len) ? "[" : "", c->host,
                              memchr(c->host, ':', c->host_len) ? "]" : "", c->port);
        if (c->weight > mcr__weight_max(old->params.mode) ||
            c->weight < mcr__weight_min(old->params.mode))
            return mcr__error(err, MCR_ERR_RANGE,
                              "change %zu: add \"%s\": weight %u is outside %u..%u, the "
                              "weights of %s",
                              k, qid, (unsigned)c->weight,
                              (unsigned)mcr__weight_min(old->params.mode),
                              (unsigned)mcr__weight_max(old->params.mode),
                              mcr_mode_name(old->params.mode));
        mcr__entry *x = &w->e[w->n];
        memset(x, 0, sizeof(*x));
        x->id = c->id;
        x->named = c->named;
        x->host = c->host;
        x->host_len = c->host_len;
        x->ipv6 = memchr(c->host, ':', c->host_len) != NULL;
        x->port = c->port;
        x->weight = c->weight;
        x->zone = c->zone;
        x->state = c->state;
        w->from[w->n] = -1;
        w->gone[w->n] = false;
        size_t xi = w->n++;
        work_insert(w, xi);
        if (old->params.mode != MCR_MODE_JUMP)
            return MCR_OK;
        w->cnt[xi] = w->drop[xi] = 0;
        long g = work_find_gone(w, c->id);
        if (g >= 0) { /* back under its id (a new address): its buckets */
            for (size_t b = 0; b < w->nmap; b++)
                if (w->map[b] == (uint32_t)g)
                    w->map[b] = (uint32_t)xi;
            w->cnt[xi] = w->cnt[g];
            w->drop[xi] = w->drop[g];
            w->cnt[g] = w->drop[g] = 0;
        }
        return jump_set_weight(w, xi, c->weight, k, qid, err);
    }
    long i = work_find_id(w, c->id);
    static const char *const verbs[] = {"add", "remove", "set weight of", "set state of",
                                        "move slots to"};
    if (i < 0)
        return mcr__error(err, MCR_ERR_UNKNOWN, "change %zu: %s \"%s\": no server has this id", k,
                          verbs[c->kind], qid);
    switch (c->kind) {
    case CH_REMOVE:
        w->gone[i] = true;
        break;
    case CH_WEIGHT:
        if (c->weight > mcr__weight_max(old->params.mode) ||
            c->weight < mcr__weight_min(old->params.mode))
            return mcr__error(err, MCR_ERR_RANGE,
                              "change %zu: set weight of \"%s\": %u is outside %u..%u, the "
                              "weights of %s",
                              k, qid, (unsigned)c->weight,
                              (unsigned)mcr__weight_min(old->params.mode),
                              (unsigned)mcr__weight_max(old->params.mode),
                              mcr_mode_name(old->params.mode));
        w->e[i].weight = c->weight;
        if (old->params.mode == MCR_MODE_JUMP)
            return jump_set_weight(w, (size_t)i, c->weight, k, qid, err);
        break;
    case CH_SLOTS:
        if (old->params.mode != MCR_MODE_SLOTS)
            return mcr__error(err, MCR_ERR_INVALID,
                              "change %zu: move slots to \"%s\": the mode is %s, not slots", k,
                              qid, mcr_mode_name(old->params.mode));
        if (c->last >= w->nmap)
            return mcr__error(err, MCR_ERR_RANGE,
                              "change %zu: move slots %u-%u to \"%s\": there are %zu slots", k,
                              (unsigned)c->first, (unsigned)c->last, qid, w->nmap);
        for (uint32_t sl = c->first; sl <= c->last; sl++)
            w->map[sl] = (uint32_t)i;
        break;
    default:
        w->e[i].state = c->state;
        break;
    }
    return MCR_OK;
}

/* The end of a batch for the map modes. jump: the buckets of removed
 * servers and those a lower weight drops are freed, highest first, each by
 * moving the last bucket's server into it and dropping the last bucket.
 * slots: a slot of a removed server goes to the server re-added under its
 * id, or is an error (a hole for the planner). */
static int work_finish_map(work *w, const mcr_snapshot *old, mcr_error *err)
{
    char q[80];

    if (old->params.mode == MCR_MODE_JUMP) {
        for (size_t i = 0; i < w->n; i++)
            if (w->gone[i])
                w->drop[i] = w->cnt[i];
        bool *freed = calloc(w->nmap ? w->nmap : 1, sizeof(*freed));
        if (freed == NULL)
            return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %zu buckets", w->nmap);
        for (size_t b = w->nmap; b-- > 0;) {
            uint32_t i = w->map[b];
            if (w->drop[i] > 0) {
                freed[b] = true;
                w->drop[i]--;
            }
        }
        /* Descending: every freed bucket above b is gone or refilled
         * already, so the last bucket, when above b, is one to keep. */
        size_t n = w->nmap;
        for (size_t b = w->nmap; b-- > 0;) {
            if (!freed[b])
                continue;
            if (b != n - 1)
                w->map[b] = w->map[n - 1];
            n--;
        }
        w->nmap = n;
        free(freed);
        return MCR_OK;
    }
    if (old->params.mode != MCR_MODE_SLOTS)
        return MCR_OK;
    long *heir = malloc((w->n ? w->n : 1) * sizeof(*heir));
    if (heir == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for %zu servers", w->n);
    for (size_t i = 0; i < w->n; i++)
        heir[i] = w->gone[i] ? work_find_id(w, w->e[i].id) : (long)i;
    int rc = MCR_OK;
    for (size_t sl = 0; sl < w->nmap && rc == MCR_OK; sl++) {
        uint32_t i = w->map[sl];
        if (i == MCR__HOLE || heir[i] >= 0) {
            if (i != MCR__HOLE)
                w->map[sl] = (uint32_t)heir[i];
            continue;
        }
        if (w->orphans_ok) {
            w->map[sl] = MCR__HOLE;
            continue;
        }
        size_t end = sl;
        while (end + 1 < w->nmap && w->map[end + 1] == i)
            end++;
        rc = mcr__error(err, MCR_ERR_INVALID,
                        "slots %zu-%zu belong to \"%s\", which the changes remove: move its "
                        "slots to other servers first (mcr_changes_move_slots, mcr_slots_plan)",
                        sl, end, mcr__quote(q, sizeof(q), w->e[i].id, strlen(w->e[i].id)));
    }
    free(heir);
    return rc;
}

static void work_release(work *w)
{
    free(w->e);
    free(w->from);
    free(w->gone);
    free(w->ids);
    free(w->addrs);
    free(w->map);
    free(w->cnt);
    free(w->drop);
    memset(w, 0, sizeof(*w));
}

/* The working list of `old` with the changes of `ch` applied (entries not
 * compacted: removed ones are marked gone). */
static int work_run(const mcr_snapshot *old, const mcr_changes *ch, bool orphans_ok, work *w,
                    mcr_error *err)
{
    size_t adds = 0, cap;
    int rc = MCR_OK;

    memset(w, 0, sizeof(*w));
    w->orphans_ok = orphans_ok;
    for (size_t k = 0; k < ch->n; k++)
        adds += ch->v[k].kind == CH_ADD;
    cap = old->nservers + adds;
    w->e = malloc((cap > 0 ? cap : 1) * sizeof(*w->e));
    w->from = malloc((cap > 0 ? cap : 1) * sizeof(*w->from));
    w->gone = malloc((cap > 0 ? cap : 1) * sizeof(*w->gone));
    w->mask = mcr__map_cap(cap) - 1;
    w->ids = calloc(w->mask + 1, sizeof(*w->ids));
    w->addrs = calloc(w->mask + 1, sizeof(*w->addrs));
    bool has_map = mcr__mode_has_map(old->params.mode);
    if (has_map) {
        w->map_cap = old->nmap;
        w->map = malloc((old->nmap ? old->nmap : 1) * sizeof(*w->map));
        w->cnt = calloc(cap > 0 ? cap : 1, sizeof(*w->cnt));
        w->drop = calloc(cap > 0 ? cap : 1, sizeof(*w->drop));
    }
    if (w->e == NULL || w->from == NULL || w->gone == NULL || w->ids == NULL ||
        w->addrs == NULL || (has_map && (w->map == NULL || w->cnt == NULL || w->drop == NULL)))
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory applying changes");
    memcpy(w->e, old->servers, old->nservers * sizeof(*w->e));
    for (size_t i = 0; i < old->nservers; i++) {
        w->from[i] = (long)i;
        w->gone[i] = false;
        work_insert(w, i);
        if (has_map)
            w->cnt[i] = old->servers[i].owned;
    }
    w->n = old->nservers;
    if (has_map) {
        memcpy(w->map, old->map, old->nmap * sizeof(*w->map));
        w->nmap = old->nmap;
    }
    for (size_t k = 0; k < ch->n && rc == MCR_OK; k++)
        rc = work_apply(w, old, &ch->v[k], k + 1, err);
    if (rc == MCR_OK && has_map)
        rc = work_finish_map(w, old, err);
    return rc;
}

int mcr_snapshot_apply(const mcr_snapshot *old, const mcr_changes *ch, mcr_snapshot **out,
                       mcr_error *err)
{
    if (old == NULL || ch == NULL || out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL snapshot, changes or output");
    if (old->epoch == UINT64_MAX)
        return mcr__error(err, MCR_ERR_RANGE, "epoch %llu cannot grow",
                          (unsigned long long)old->epoch);
    return mcr__snapshot_apply_at(old, ch, old->epoch + 1, out, err);
}

int mcr__snapshot_apply_at(const mcr_snapshot *old, const mcr_changes *ch, uint64_t epoch,
                           mcr_snapshot **out, mcr_error *err)
{
    work w;
    int rc;

    if (old == NULL || ch == NULL || out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL snapshot, changes or output");
    rc = work_run(old, ch, false, &w, err);
    if (rc != MCR_OK)
        goto out;

    /* Compact: the build takes the entries (and a reference to each cache)
     * and the map, renumbered. */
    uint32_t *newidx = w.map != NULL ? malloc((w.n ? w.n : 1) * sizeof(*newidx)) : NULL;
    if (w.map != NULL && newidx == NULL) {
        rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory applying changes");
        goto out;
    }
    size_t n = 0;
    for (size_t i = 0; i < w.n; i++) {
        if (w.gone[i])
            continue;
        if (newidx != NULL)
            newidx[i] = (uint32_t)n;
        w.e[n] = w.e[i];
        w.from[n] = w.from[i];
        mcr__pcache_ref(w.e[n].pc);
        n++;
    }
    for (size_t b = 0; b < w.nmap; b++)
        w.map[b] = newidx[w.map[b]];
    free(newidx);
    rc = mcr__snapshot_build(&old->params, w.e, n, w.from, old, epoch, false, w.map,
                             w.nmap, out, err);
    w.e = NULL; /* taken over */
    w.map = NULL;
out:
    work_release(&w);
    return rc;
}

/* ------------------------------------------------------------ slot plans */

int mcr_slots_plan(const mcr_snapshot *snap, mcr_changes *ch, size_t *moved, mcr_error *err)
{
    work w;
    uint32_t *weight = NULL, *quota = NULL, *have = NULL, *give = NULL;
    size_t nmoved = 0, recorded;
    int rc;

    if (snap == NULL || ch == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL snapshot or changes");
    recorded = ch->n;
    if (snap->params.mode != MCR_MODE_SLOTS)
        return mcr__error(err, MCR_ERR_INVALID, "the snapshot's mode is %s, not slots",
                          mcr_mode_name(snap->params.mode));
    rc = work_run(snap, ch, true, &w, err);
    if (rc != MCR_OK)
        goto out;
    size_t n = w.n ? w.n : 1;
    weight = calloc(n, sizeof(*weight));
    quota = calloc(n, sizeof(*quota));
    have = calloc(n, sizeof(*have));
    give = malloc(w.nmap * sizeof(*give));
    if (weight == NULL || quota == NULL || have == NULL || give == NULL) {
        rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory planning slot moves");
        goto out;
    }
    /* Quotas by weight among the servers that stay and are not draining
     * (a DOWN server keeps its share: the fallback serves it meanwhile). */
    size_t eligible = 0;
    for (size_t i = 0; i < w.n; i++)
        if (!w.gone[i] && w.e[i].state != MCR_STATE_DRAINING) {
            weight[i] = w.e[i].weight;
            eligible++;
        }
    if (eligible == 0) {
        rc = mcr__error(err, MCR_ERR_EMPTY, "no server left to own the slots");
        goto out;
    }
    if (mcr__quotas(weight, w.n, (uint32_t)w.nmap, quota) != MCR_OK) {
        rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory planning slot moves");
        goto out;
    }
    for (size_t sl = 0; sl < w.nmap; sl++)
        if (w.map[sl] != MCR__HOLE)
            have[w.map[sl]]++;
    /* Donors give their highest slots beyond their quota; slots without an
     * owner go too. give[sl]: MCR__HOLE for a slot that stays. */
    for (size_t sl = w.nmap; sl-- > 0;) {
        uint32_t i = w.map[sl];
        give[sl] = MCR__HOLE;
        if (i == MCR__HOLE || have[i] > quota[i]) {
            give[sl] = 0;
            if (i != MCR__HOLE)
                have[i]--;
        }
    }
    /* Receivers, in snapshot order, take the donated slots in ascending
     * order until their quota: consecutive slots to one server, one move. */
    size_t r = 0;
    for (size_t sl = 0; sl < w.nmap; sl++) {
        if (give[sl] == MCR__HOLE)
            continue;
        while (r < w.n && have[r] >= quota[r])
            r++;
        if (r == w.n) { /* cannot happen: quotas add up to the slot count */
            rc = mcr__error(err, MCR_ERR_INVALID, "internal error: slot %zu has no taker", sl);
            goto out;
        }
        give[sl] = (uint32_t)r;
        have[r]++;
        nmoved++;
    }
    for (size_t sl = 0; sl < w.nmap && rc == MCR_OK; sl++) {
        if (give[sl] == MCR__HOLE)
            continue;
        size_t end = sl;
        while (end + 1 < w.nmap && give[end + 1] == give[sl])
            end++;
        rc = mcr_changes_move_slots(ch, (uint32_t)sl, (uint32_t)end, w.e[give[sl]].id, err);
        sl = end;
    }
    if (rc == MCR_OK && moved != NULL)
        *moved = nmoved;
    while (rc != MCR_OK && ch->n > recorded) /* nothing half done */
        change_free(&ch->v[--ch->n]);
out:
    free(weight);
    free(quota);
    free(have);
    free(give);
    work_release(&w);
    return rc;
}
