/* SPDX-License-Identifier: BSD-3-Clause */
/* stats.c: the pool's counters: latency histograms and what mcr_pool_server_stats() reports. */
#include "pool_internal.h"

void mcr__hist_add(mcr__pool_server *s, uint64_t ns)
{
    uint64_t us = ns / 1000;
    size_t idx;
    if (us < MCR__HIST_SUB) {
        idx = (size_t)us;
    } else {
        int msb = 63 - __builtin_clzll(us);
        idx = (size_t)(msb - 3) * MCR__HIST_SUB + (size_t)((us >> (msb - 4)) & (MCR__HIST_SUB - 1));
    }
    s->hist[idx]++;
    s->lat_count++;
    s->lat_sum += us;
    if (us > s->lat_max)
        s->lat_max = us;
}

uint64_t mcr__hist_upper(size_t idx)
{
    if (idx < MCR__HIST_SUB)
        return (uint64_t)idx + 1;
    int msb = (int)(idx / MCR__HIST_SUB) + 3;
    uint64_t sub = idx % MCR__HIST_SUB;
    return ((MCR__HIST_SUB | sub) << (msb - 4)) + (1ull << (msb - 4));
}

static double hist_value(size_t idx)
{
    if (idx < MCR__HIST_SUB)
        return (double)idx + 0.5;
    int msb = (int)(idx / MCR__HIST_SUB) + 3;
    uint64_t sub = idx % MCR__HIST_SUB;
    double lo = (double)((MCR__HIST_SUB | sub) << (msb - 4));
    double width = (double)(1ull << (msb - 4));
    return lo + width / 2;
}

static double hist_pct(const mcr__pool_server *s, double q)
{
    if (s->lat_count == 0)
        return 0;
    uint64_t rank = (uint64_t)(q * (double)s->lat_count);
    if (rank >= s->lat_count)
        rank = s->lat_count - 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < MCR__HIST_BUCKETS; i++) {
        seen += s->hist[i];
        if (seen > rank) {
            double v = hist_value(i);
            return v > (double)s->lat_max ? (double)s->lat_max : v;
        }
    }
    return (double)s->lat_max;
}

/* ------------------------------------------------------------ observability */

size_t mcr__pool_read_peak(const mcr_pool *p)
{
    return p == NULL ? 0 : p->read_peak;
}

size_t mcr_pool_server_count(const mcr_pool *p)
{
    return p == NULL ? 0 : p->nservers;
}

int mcr_pool_server_stats(const mcr_pool *p, size_t i, mcr_server_stats *out)
{
    if (p == NULL || out == NULL || i >= p->nservers)
        return MCR_ERR_INVALID;
    const mcr__pool_server *s = p->servers[i];
    memset(out, 0, sizeof(*out));
    snprintf(out->id, sizeof(out->id), "%s", s->id);
    snprintf(out->host, sizeof(out->host), "%s", s->host);
    out->port = s->port;
    out->health = s->inactive && s->health == MCR_HEALTH_UP ? MCR_HEALTH_DRAINING : s->health;
    out->requests = s->requests;
    out->hits = s->hits;
    out->misses = s->misses;
    out->errors = s->errors;
    out->timeouts = s->timeouts;
    out->refusals = s->refusals;
    out->ejections = s->ejections;
    out->coalesced = s->coalesced;
    out->writes = s->writes;
    out->bytes_sent = s->bytes_sent;
    out->reads = s->reads;
    out->bytes_received = s->bytes_received;
    out->fallback_reads = s->fallback_reads;
    out->fallback_hits = s->fallback_hits;
    out->dual_writes = s->dual_writes;
    out->migration_only = s->idx == SIZE_MAX && !s->retired;
    out->consecutive_failures = s->consecutive;
    for (unsigned k = 0; k < p->o.connections; k++)
        out->connections += s->conns[k] != NULL && s->conns[k]->state == MCR__CONN_READY;
    out->in_flight = s->inflight;
    out->latency_count = s->lat_count;
    out->p50_us = hist_pct(s, 0.50);
    out->p90_us = hist_pct(s, 0.90);
    out->p99_us = hist_pct(s, 0.99);
    out->p999_us = hist_pct(s, 0.999);
    out->max_us = (double)s->lat_max;
    return MCR_OK;
}
