/* SPDX-License-Identifier: BSD-3-Clause */
/* changes_between.c: the change set that turns one snapshot's server list into another's (a server file reloaded, a pool republished). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "placement/placement_internal.h"
#include "mcroute_snapshot.h"

/* Zones compare as equal when both are absent or empty. */
static int zone_eq(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

/* Sorting a snapshot's addresses, to find the servers of the file that take
 * over an address in use. */
typedef struct addr_ref {
    const char *host;
    int port;
} addr_ref;

static int cmp_addr(const void *a, const void *b)
{
    const addr_ref *x = a, *y = b;
    int c = strcmp(x->host, y->host);
    return c ? c : (x->port > y->port) - (x->port < y->port);
}

/* What to do with one server of the file. */
enum {
    KEEP,     /* same id, address and zone: at most a weight change */
    ADD,      /* new id at a free address */
    READD     /* added after the removals: moved (same id, new address or
               * zone), or new at an address a removed server frees */
};

int mcr_changes_between(const mcr_snapshot *base, const mcr_snapshot *file, unsigned flags,
                        mcr_changes **out, size_t *count, mcr_error *err)
{
    if (base == NULL || file == NULL || out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL snapshot or output");
    if ((flags & ~(unsigned)MCR_CHANGES_STATES) != 0)
        return mcr__error(err, MCR_ERR_INVALID, "unknown flags 0x%x", flags);
    bool states = (flags & MCR_CHANGES_STATES) != 0;
    size_t nb = mcr_snapshot_server_count(base), nf = mcr_snapshot_server_count(file), nch = 0;
    unsigned char *kept = calloc(nb ? nb : 1, 1);
    unsigned char *what = calloc(nf ? nf : 1, 1);
    addr_ref *addrs = malloc((nb ? nb : 1) * sizeof *addrs);
    mcr_changes *ch = mcr_changes_new();
    mcr_server_desc d, f;
    int rc = MCR_OK;

    if (kept == NULL || what == NULL || addrs == NULL || ch == NULL) {
        rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < nb; i++) {
        mcr_snapshot_server(base, i, &d);
        addrs[i].host = d.host;
        addrs[i].port = d.port;
    }
    qsort(addrs, nb, sizeof *addrs, cmp_addr);

    for (size_t i = 0; i < nf; i++) {
        uint32_t at;
        mcr_snapshot_server(file, i, &f);
        at = mcr_snapshot_find(base, f.id);
        if (at != MCR_NO_SERVER) {
            kept[at] = 1;
            mcr_snapshot_server(base, (size_t)at, &d);
            what[i] = strcmp(d.host, f.host) == 0 && d.port == f.port && zone_eq(d.zone, f.zone)
                          ? KEEP
                          : READD;
        } else {
            addr_ref key = {f.host, f.port};
            what[i] = bsearch(&key, addrs, nb, sizeof *addrs, cmp_addr) ? READD : ADD;
        }
    }

    for (size_t i = 0; i < nf && rc == MCR_OK; i++)
        if (what[i] == ADD) {
            mcr_snapshot_server(file, i, &f);
            if (!states)
                f.state = MCR_STATE_ACTIVE;
            rc = mcr_changes_add(ch, &f, err);
            nch++;
        }
    for (size_t i = 0; i < nb && rc == MCR_OK; i++)
        if (!kept[i]) {
            mcr_snapshot_server(base, i, &d);
            rc = mcr_changes_remove(ch, d.id, err);
            nch++;
        }
    for (size_t i = 0; i < nf && rc == MCR_OK; i++)
        if (what[i] == READD) {
            uint32_t at;
            mcr_snapshot_server(file, i, &f);
            if (!states)
                f.state = MCR_STATE_ACTIVE;
            at = mcr_snapshot_find(base, f.id);
            if (at != MCR_NO_SERVER) { /* moved: it keeps its state (unless told) */
                mcr_snapshot_server(base, (size_t)at, &d);
                if (!states)
                    f.state = d.state;
                rc = mcr_changes_remove(ch, f.id, err);
                nch++;
            }
            if (rc == MCR_OK)
                rc = mcr_changes_add(ch, &f, err);
            nch++;
        }
    for (size_t i = 0; i < nf && rc == MCR_OK; i++) {
        if (what[i] != KEEP)
            continue;
        mcr_snapshot_server(file, i, &f);
        mcr_snapshot_server(base, (size_t)mcr_snapshot_find(base, f.id), &d);
        if (d.weight != f.weight) {
            rc = mcr_changes_set_weight(ch, f.id, f.weight, err);
            nch++;
        }
        if (rc == MCR_OK && states && d.state != f.state) {
            rc = mcr_changes_set_state(ch, f.id, f.state, err);
            nch++;
        }
    }
out:
    free(kept);
    free(what);
    free(addrs);
    if (rc != MCR_OK) {
        mcr_changes_free(ch);
        return rc;
    }
    *out = ch;
    if (count != NULL)
        *count = nch;
    return MCR_OK;
}
