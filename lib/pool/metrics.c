/* SPDX-License-Identifier: BSD-3-Clause */
/* metrics.c: the pool's per-server counters and latency histograms in the Prometheus text exposition format (mcr_pool_metrics()). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool_internal.h"
#include "mcroute_state.h"

/* The histogram's bounds, µs, as Prometheus's defaults are spaced, from
 * 50 µs (a request on loopback) to 5 s: a host's state adds the counts up
 * at the same bounds (mcroute_state.h lists them). */
static const uint64_t bounds_us[MCR_HOST_STATE_BUCKETS] = {
    50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
    1000000, 2500000, 5000000};
#define NBOUNDS MCR_HOST_STATE_BUCKETS

/* The replies of s within each bound: the histogram's cells wholly below
 * it. */
static void cumulative(const mcr__pool_server *s, uint64_t out[NBOUNDS])
{
    uint64_t cum = 0;
    size_t idx = 0;
    for (size_t b = 0; b < NBOUNDS; b++) {
        while (idx < MCR__HIST_BUCKETS && mcr__hist_upper(idx) <= bounds_us[b])
            cum += s->hist[idx++];
        out[b] = cum;
    }
}

typedef struct out {
    char *p;
    size_t len, cap;
    bool nomem;
} out;

static void outf(out *o, const char *fmt, ...) MCR__PRINTF(2, 3);
static void outf(out *o, const char *fmt, ...)
{
    while (!o->nomem) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = o->cap - o->len;
        int n = vsnprintf(o->p != NULL ? o->p + o->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            o->nomem = true;
            return;
        }
        if ((size_t)n < room) {
            o->len += (size_t)n;
            return;
        }
        size_t cap = o->cap ? o->cap * 2 : 16384;
        while (cap < o->len + (size_t)n + 1)
            cap *= 2;
        char *p = realloc(o->p, cap);
        if (p == NULL) {
            o->nomem = true;
            return;
        }
        o->p = p;
        o->cap = cap;
    }
}

/* A label value escaped as the format wants: \\, \" and \n. */
static void put_value(out *o, const char *v)
{
    for (; *v != '\0'; v++) {
        if (*v == '\\' || *v == '"')
            outf(o, "\\%c", *v);
        else if (*v == '\n')
            outf(o, "\\n");
        else
            outf(o, "%c", *v);
    }
}

static bool label_name_ok(const char *n)
{
    if (n == NULL || !((n[0] >= 'a' && n[0] <= 'z') || (n[0] >= 'A' && n[0] <= 'Z') || n[0] == '_'))
        return false;
    for (const char *p = n; *p != '\0'; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_'))
            return false;
    return strncmp(n, "__", 2) != 0 && strcmp(n, "server") != 0 && strcmp(n, "address") != 0 &&
           strcmp(n, "le") != 0;
}

/* {server="ID",address="HOST:PORT",LABELS (and le="B")} */
static void put_labels(out *o, const mcr__pool_server *s, const char *const *labels,
                       const char *le)
{
    outf(o, "{server=\"");
    put_value(o, s->id);
    outf(o, "\",address=\"%s%s%s:%d\"", strchr(s->host, ':') ? "[" : "", s->host,
         strchr(s->host, ':') ? "]" : "", s->port);
    for (size_t i = 0; labels != NULL && labels[i] != NULL; i += 2) {
        outf(o, ",%s=\"", labels[i]);
        put_value(o, labels[i + 1]);
        outf(o, "\"");
    }
    if (le != NULL)
        outf(o, ",le=\"%s\"", le);
    outf(o, "}");
}

typedef struct counter {
    const char *name, *type, *help;
    size_t off; /* of the uint64_t in mcr__pool_server, or SIZE_MAX: computed */
} counter;

#define C(field) offsetof(mcr__pool_server, field)
static const counter counters[] = {
    {"mcroute_server_requests_total", "counter", "Requests sent (one per key of a multi-get).",
     C(requests)},
    {"mcroute_server_hits_total", "counter", "Gets answered with a value.", C(hits)},
    {"mcroute_server_misses_total", "counter", "Gets answered without a value.", C(misses)},
    {"mcroute_server_errors_total", "counter", "Requests that ended with an error.", C(errors)},
    {"mcroute_server_timeouts_total", "counter", "Timeout failures.", C(timeouts)},
    {"mcroute_server_connect_failures_total", "counter",
     "Connections refused, reset or closed.", C(refusals)},
    {"mcroute_server_ejections_total", "counter", "Times the pool ejected the server.",
     C(ejections)},
    {"mcroute_server_fallback_reads_total", "counter",
     "Reads sent to the server as a moved key's previous owner (a migration).",
     C(fallback_reads)},
    {"mcroute_server_fallback_hits_total", "counter",
     "Fallback reads the server answered with a value.", C(fallback_hits)},
    {"mcroute_server_sent_bytes_total", "counter", "Bytes written to the server.",
     C(bytes_sent)},
    {"mcroute_server_received_bytes_total", "counter", "Bytes read from the server.",
     C(bytes_received)},
};
#undef C

static void put_histogram(out *o, const mcr__pool_server *s, const char *const *labels)
{
    const char *name = "mcroute_server_request_duration_seconds";
    uint64_t within[NBOUNDS];
    cumulative(s, within);
    for (size_t b = 0; b < NBOUNDS; b++) {
        uint64_t cum = within[b];
        char le[32];
        snprintf(le, sizeof(le), "%g", (double)bounds_us[b] / 1e6);
        outf(o, "%s_bucket", name);
        put_labels(o, s, labels, le);
        outf(o, " %llu\n", (unsigned long long)cum);
    }
    outf(o, "%s_bucket", name);
    put_labels(o, s, labels, "+Inf");
    outf(o, " %llu\n%s_sum", (unsigned long long)s->lat_count, name);
    put_labels(o, s, labels, NULL);
    outf(o, " %.6f\n%s_count", (double)s->lat_sum / 1e6, name);
    put_labels(o, s, labels, NULL);
    outf(o, " %llu\n", (unsigned long long)s->lat_count);
}

int mcr_pool_metrics(const mcr_pool *p, const char *const *labels, char **text, size_t *len,
                     mcr_error *err)
{
    if (p == NULL || text == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "mcr_pool_metrics: NULL argument");
    for (size_t i = 0; labels != NULL && labels[i] != NULL; i += 2) {
        if (!label_name_ok(labels[i]))
            return mcr__error(err, MCR_ERR_INVALID,
                              "mcr_pool_metrics: label name \"%s\" is not [a-zA-Z_][a-zA-Z0-9_]*, "
                              "or is reserved (server, address, le, __*)",
                              labels[i]);
        if (labels[i + 1] == NULL)
            return mcr__error(err, MCR_ERR_INVALID, "mcr_pool_metrics: label %s has no value",
                              labels[i]);
    }
    out o = {NULL, 0, 0, false};
    outf(&o, "%s", "");
    for (size_t c = 0; c < sizeof(counters) / sizeof(counters[0]); c++) {
        outf(&o, "# HELP %s %s\n# TYPE %s %s\n", counters[c].name, counters[c].help,
             counters[c].name, counters[c].type);
        for (size_t i = 0; i < p->nservers; i++) {
            const mcr__pool_server *s = p->servers[i];
            uint64_t v;
            memcpy(&v, (const char *)s + counters[c].off, sizeof(v));
            outf(&o, "%s", counters[c].name);
            put_labels(&o, s, labels, NULL);
            outf(&o, " %llu\n", (unsigned long long)v);
        }
    }
    outf(&o, "# HELP mcroute_server_in_flight Requests sent and not answered yet.\n"
             "# TYPE mcroute_server_in_flight gauge\n");
    for (size_t i = 0; i < p->nservers; i++) {
        outf(&o, "mcroute_server_in_flight");
        put_labels(&o, p->servers[i], labels, NULL);
        outf(&o, " %zu\n", p->servers[i]->inflight);
    }
    outf(&o, "# HELP mcroute_server_up 1 while the pool uses the server (not down, ejected or "
             "draining).\n# TYPE mcroute_server_up gauge\n");
    for (size_t i = 0; i < p->nservers; i++) {
        const mcr__pool_server *s = p->servers[i];
        outf(&o, "mcroute_server_up");
        put_labels(&o, s, labels, NULL);
        outf(&o, " %d\n", s->health == MCR_HEALTH_UP && !s->inactive);
    }
    outf(&o, "# HELP mcroute_server_request_duration_seconds Time from a request's send to its "
             "reply.\n# TYPE mcroute_server_request_duration_seconds histogram\n");
    for (size_t i = 0; i < p->nservers; i++)
        put_histogram(&o, p->servers[i], labels);
    if (o.nomem) {
        free(o.p);
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory writing the pool's metrics");
    }
    *text = o.p;
    if (len != NULL)
        *len = o.len;
    return MCR_OK;
}

void mcr__pool_publish_counters(mcr_pool *p)
{
    mcr_state_server_counters *c = calloc(p->nservers ? p->nservers : 1, sizeof(*c));
    if (c == NULL)
        return; /* the next tick tries again */
    for (size_t i = 0; i < p->nservers; i++) {
        const mcr__pool_server *s = p->servers[i];
        snprintf(c[i].id, sizeof(c[i].id), "%s", s->id);
        c[i].requests = s->requests;
        c[i].hits = s->hits;
        c[i].misses = s->misses;
        c[i].errors = s->errors;
        c[i].timeouts = s->timeouts;
        c[i].connect_failures = s->refusals;
        c[i].ejections = s->ejections;
        c[i].fallback_reads = s->fallback_reads;
        c[i].fallback_hits = s->fallback_hits;
        c[i].latency_count = s->lat_count;
        c[i].latency_sum_s = (double)s->lat_sum / 1e6;
        cumulative(s, c[i].buckets);
        for (size_t b = 0; b < NBOUNDS; b++)
            c[i].bounds_s[b] = (double)bounds_us[b] / 1e6;
    }
    (void)mcr_router_state_publish(p->router, p, c, p->nservers);
    free(c);
}
