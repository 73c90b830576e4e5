/* SPDX-License-Identifier: BSD-3-Clause */
/* sim_output.c: what mcroute simulate reports: the tables, the JSON document, and the chart handed to svg.c. */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "mcroute.h"
#include "mcroute_snapshot.h"

#include "cli.h"
#include "simulate.h"

static const char *const measure_name[M_COUNT] = {"keys", "bytes", "requests"};

/* ------------------------------------------------------------ text output */

static const char *state_name(mcr_server_state s)
{
    return s == MCR_STATE_ACTIVE ? "active" : s == MCR_STATE_DOWN ? "down" : "draining";
}

static const char *op_name(change_op op)
{
    static const char *const names[] = {"add", "remove", "reweight", "fail", "fail-zone"};
    return names[op];
}

static void describe_workload(FILE *f, const sim_opts *o, const workload *w)
{
    if (o->workload_file)
        fprintf(f, "%zu keys from %s", w->n, o->workload_file);
    else
        fprintf(f, "%zu keys (seed %" PRIu64 ", zipf %g, sizes %s)", w->n, o->seed, o->zipf,
                o->sizes_text);
}

void sim_print_text(const sim_opts *o, const workload *w, const server_list *before,
                    const server_list *after, const mode_run *runs, const sweep *sw)
{
    size_t act_b = mcr_snapshot_active_count(before->snap);
    size_t act_a = mcr_snapshot_active_count(after->snap);
    printf("servers: %zu active before, %zu after; workload: ", act_b, act_a);
    describe_workload(stdout, o, w);
    printf(", %.1f MiB of values\nchange:", w->total_bytes / 1048576.0);
    for (size_t i = 0; i < o->nchanges; i++)
        printf(" --%s '%s'", op_name(o->changes[i].op), o->changes[i].arg);
    printf("\n\n");

    printf("Moved by the change (shares of keys, bytes and requests whose server changed; "
           "stray: keys moved\nbetween servers a minimal placement would leave alone)\n");
    printf("%-17s %9s %9s %9s %9s %10s %9s\n", "mode", "keys", "bytes", "requests", "ideal",
           "keys/ideal", "stray");
    for (size_t i = 0; i < o->nmodes; i++) {
        const mode_run *r = &runs[i];
        printf("%-17s %9.6f %9.6f %9.6f %9.6f ", mcr_mode_name(r->mode), r->moved[M_KEYS],
               r->moved[M_BYTES], r->moved[M_REQS], r->ideal);
        if (r->ideal > 0)
            printf("%10.3f", r->moved[M_KEYS] / r->ideal);
        else
            printf("%10s", "-");
        printf(" %9.6f\n", r->stray);
    }

    printf("\nBalance after the change (peak-to-mean and cv per server, relative to weight)\n");
    printf("%-17s %9s %9s %9s %9s %9s %9s\n", "mode", "keys p2m", "keys cv", "bytes p2m",
           "bytes cv", "req p2m", "req cv");
    for (size_t i = 0; i < o->nmodes; i++) {
        const mode_run *r = &runs[i];
        printf("%-17s %9.4f %9.4f %9.4f %9.4f %9.4f %9.4f\n", mcr_mode_name(r->mode),
               r->after[M_KEYS].p2m, r->after[M_KEYS].cv, r->after[M_BYTES].p2m,
               r->after[M_BYTES].cv, r->after[M_REQS].p2m, r->after[M_REQS].cv);
    }

    printf("\nCost (lookup: mcr_snapshot_locate over the keys; build: mcr_snapshot_new; "
           "memory: heap growth)\n");
    printf("%-17s %9s %10s %10s %11s %9s\n", "mode", "lookup ns", "build us", "apply us",
           "memory KiB", "entries");
    for (size_t i = 0; i < o->nmodes; i++) {
        const mode_run *r = &runs[i];
        printf("%-17s %9.1f %10.1f %10.1f %11.1f %9zu\n", mcr_mode_name(r->mode), r->lookup_ns,
               r->build_us, r->apply_us, (double)r->memory / 1024.0, r->table);
    }

    for (size_t i = 0; i < o->nmodes; i++) {
        const mode_run *r = &runs[i];
        if (r->mode == MCR_MODE_SLOTS)
            printf("\nslots: the plan moved %zu of %zu slots (%.6f)", r->slots_moved,
                   r->slot_count, r->slot_count ? (double)r->slots_moved / (double)r->slot_count : 0);
        if (r->bounded) {
            printf("\nbounded: %zu requests drawn by rate, epsilon %g, load = ", o->requests,
                   o->epsilon);
            if (o->inflight)
                printf("the last %zu requests in flight", o->inflight);
            else
                printf("running totals");
            printf(": %.4f of requests served off their owner; requests p2m %.4f (owner "
                   "only: %.4f); %.1f ns per bounded lookup",
                   r->off_owner, r->after[M_REQS].p2m, r->owner_requests.p2m, r->bounded_ns);
        }
    }
    printf("\n");

    if (sw->n > 0) {
        printf("\nstable-ketama points sweep (the active servers after the change; ring: exact "
               "shares of the hash space)\n");
        printf("%9s %9s %9s %9s %9s %9s %9s %9s %10s %11s\n", "points/w", "ring p2m", "ring cv",
               "keys p2m", "keys cv", "bytes cv", "req p2m", "lookup ns", "build us",
               "memory KiB");
        for (size_t i = 0; i < sw->n; i++) {
            const sweep_point *p = &sw->p[i];
            printf("%9u %9.4f %9.4f %9.4f %9.4f %9.4f %9.4f %9.1f %10.1f %11.1f\n", p->points,
                   p->ring.p2m, p->ring.cv, p->m[M_KEYS].p2m, p->m[M_KEYS].cv, p->m[M_BYTES].cv,
                   p->m[M_REQS].p2m, p->lookup_ns, p->build_us, (double)p->memory / 1024.0);
        }
        printf("diminishing returns (a doubling of points improves the keys' cv by less than "
               "%g%%; model: hash-space cv %.3f / sqrt(points), keys add a random-assignment "
               "cv of %.4f): ",
               o->threshold * 100, sw->fit_c, sw->floor_cv);
        if (!isfinite(sw->knee_points))
            printf("never");
        else if (sw->knee >= 0)
            printf("%u points per unit of weight (model: %.0f)", sw->p[sw->knee].points,
                   sw->knee_points);
        else
            printf("beyond the sweep, about %.0f points per unit of weight%s", sw->knee_points,
                   sw->knee_points > sw->limit ? ", more than the weights allow" : "");
        if (sw->capped)
            printf(" (sweep stopped at %.0f points in all)", SIM_SWEEP_POINTS_MAX);
        putchar('\n');
    }
}

/* ------------------------------------------------------------ JSON output */

/* A JSON string (tools/json.c's rules). */
static void js_str(const char *s)
{
    cli_json_string(stdout, s, strlen(s));
}

static void js_num(double x)
{
    if (isfinite(x))
        printf("%.9g", x);
    else
        fputs("null", stdout);
}

static void js_balance(const char *name, const balance *b)
{
    printf("\"%s\": {\"peak_to_mean\": ", name);
    js_num(b->p2m);
    fputs(", \"cv\": ", stdout);
    js_num(b->cv);
    putchar('}');
}

static void js_balances(const char *name, const balance b[M_COUNT])
{
    printf("\"%s\": {", name);
    for (int m = 0; m < M_COUNT; m++) {
        js_balance(measure_name[m], &b[m]);
        if (m + 1 < M_COUNT)
            fputs(", ", stdout);
    }
    putchar('}');
}

void sim_print_json(const sim_opts *o, const workload *w, const server_list *before,
                    const server_list *after, const mode_run *runs, const sweep *sw)
{
    printf("{\n \"servers\": {\"before\": %zu, \"active_before\": %zu, \"after\": [",
           before->n, mcr_snapshot_active_count(before->snap));
    for (size_t i = 0; i < after->n; i++) {
        const mcr_server_desc *d = &after->d[i];
        fputs(i ? ",\n   " : "\n   ", stdout);
        fputs("{\"id\": ", stdout);
        js_str(d->id);
        printf(", \"weight\": %u, \"zone\": ", d->weight);
        if (d->zone)
            js_str(d->zone);
        else
            fputs("null", stdout);
        printf(", \"state\": \"%s\"}", state_name(d->state));
    }
    printf("]},\n \"workload\": {\"source\": ");
    if (o->workload_file) {
        js_str(o->workload_file);
        fputs(", \"seed\": null, \"zipf\": null, \"sizes\": null", stdout);
    } else {
        printf("\"generated\", \"seed\": %" PRIu64 ", \"zipf\": ", o->seed);
        js_num(o->zipf);
        fputs(", \"sizes\": ", stdout);
        js_str(o->sizes_text);
    }
    printf(", \"keys\": %zu, \"bytes\": ", w->n);
    js_num(w->total_bytes);
    fputs(", \"qps\": ", stdout);
    js_num(w->total_qps);
    fputs("},\n \"change\": [", stdout);
    for (size_t i = 0; i < o->nchanges; i++) {
        printf("%s{\"op\": \"%s\", \"arg\": ", i ? ", " : "", op_name(o->changes[i].op));
        js_str(o->changes[i].arg);
        putchar('}');
    }
    fputs("],\n \"modes\": [", stdout);
    for (size_t i = 0; i < o->nmodes; i++) {
        const mode_run *r = &runs[i];
        printf("%s\n  {\"mode\": \"%s\", \"hash\": \"%s\",\n   \"moved\": {", i ? "," : "",
               mcr_mode_name(r->mode), r->mode == MCR_MODE_SLOTS ? "crc16" : mcr_hash_name(r->hash));
        for (int m = 0; m < M_COUNT; m++) {
            printf("\"%s\": ", measure_name[m]);
            js_num(r->moved[m]);
            fputs(", ", stdout);
        }
        fputs("\"ideal\": ", stdout);
        js_num(r->ideal);
        fputs(", \"keys_to_ideal\": ", stdout);
        js_num(r->ideal > 0 ? r->moved[M_KEYS] / r->ideal : NAN);
        fputs(", \"stray_keys\": ", stdout);
        js_num(r->stray);
        fputs("},\n   ", stdout);
        js_balances("balance_before", r->before);
        fputs(",\n   ", stdout);
        js_balances("balance_after", r->after);
        fputs(",\n   \"per_server_after\": [", stdout);
        for (size_t s = 0; s < r->nafter; s++) {
            fputs(s ? ", " : "", stdout);
            fputs("{\"id\": ", stdout);
            js_str(after->d[s].id);
            for (int m = 0; m < M_COUNT; m++) {
                printf(", \"%s\": ", measure_name[m]);
                js_num(r->per_server[m][s]);
            }
            putchar('}');
        }
        fputs("],\n   \"lookup_ns\": ", stdout);
        js_num(r->lookup_ns);
        fputs(", \"build_us\": ", stdout);
        js_num(r->build_us);
        fputs(", \"apply_us\": ", stdout);
        js_num(r->apply_us);
        printf(", \"memory_bytes\": %zu, \"entries\": %zu", r->memory, r->table);
        if (r->mode == MCR_MODE_SLOTS)
            printf(",\n   \"slots\": {\"count\": %zu, \"moved_by_plan\": %zu}", r->slot_count,
                   r->slots_moved);
        if (r->bounded) {
            fputs(",\n   \"bounded\": {\"epsilon\": ", stdout);
            js_num(o->epsilon);
            printf(", \"requests\": %zu, \"inflight\": %zu, \"off_owner\": ", o->requests,
                   o->inflight);
            js_num(r->off_owner);
            fputs(", \"lookup_ns\": ", stdout);
            js_num(r->bounded_ns);
            fputs(", ", stdout);
            js_balance("requests_owner_only", &r->owner_requests);
            putchar('}');
        }
        putchar('}');
    }
    fputs("\n ],\n \"sweep\": ", stdout);
    if (sw->n == 0)
        fputs("null", stdout);
    else {
        fputs("{\"mode\": \"stable-ketama\", \"threshold\": ", stdout);
        js_num(o->threshold);
        fputs(", \"random_assignment_keys_cv\": ", stdout);
        js_num(sw->floor_cv);
        fputs(", \"fit_c\": ", stdout);
        js_num(sw->fit_c);
        fputs(", \"diminishing_returns_model\": ", stdout);
        js_num(sw->knee_points);
        fputs(", \"diminishing_returns_at\": ", stdout);
        if (sw->knee >= 0)
            printf("%u", sw->p[sw->knee].points);
        else
            fputs("null", stdout);
        printf(", \"capped\": %s", sw->capped ? "true" : "false");
        printf(", \"points_limit\": %u,\n  \"points\": [", sw->limit);
        for (size_t i = 0; i < sw->n; i++) {
            const sweep_point *p = &sw->p[i];
            printf("%s\n   {\"points_per_weight\": %u, ", i ? "," : "", p->points);
            js_balance("ring", &p->ring);
            for (int m = 0; m < M_COUNT; m++) {
                fputs(", ", stdout);
                js_balance(measure_name[m], &p->m[m]);
            }
            fputs(", \"lookup_ns\": ", stdout);
            js_num(p->lookup_ns);
            fputs(", \"build_us\": ", stdout);
            js_num(p->build_us);
            printf(", \"memory_bytes\": %zu}", p->memory);
        }
        fputs("]}", stdout);
    }
    fputs("\n}\n", stdout);
}

/* ------------------------------------------------------------ SVG */

void sim_write_svg(const sim_opts *o, const workload *w, const server_list *before,
                   const server_list *after, const mode_run *runs, const sweep *sw)
{
    sim_chart_mode cm[MCR_MODE_COUNT];
    sim_chart_point cp[sizeof(sw->p) / sizeof(sw->p[0])];
    char title[512], err[256];
    int n = snprintf(title, sizeof(title), "%zu -> %zu active servers, ",
                     mcr_snapshot_active_count(before->snap),
                     mcr_snapshot_active_count(after->snap));
    if (o->workload_file)
        n += snprintf(title + n, sizeof(title) - (size_t)n, "%zu keys from a file", w->n);
    else
        n += snprintf(title + n, sizeof(title) - (size_t)n, "%zu keys, zipf %g, seed %" PRIu64,
                      w->n, o->zipf, o->seed);
    for (size_t i = 0; i < o->nchanges && (size_t)n < sizeof(title); i++)
        n += snprintf(title + n, sizeof(title) - (size_t)n, "%s%s %s", i ? ", " : "; ",
                      op_name(o->changes[i].op), o->changes[i].arg);
    for (size_t i = 0; i < o->nmodes; i++)
        cm[i] = (sim_chart_mode){mcr_mode_name(runs[i].mode), runs[i].moved[M_KEYS],
                                 runs[i].ideal, runs[i].after[M_KEYS].p2m,
                                 runs[i].after[M_BYTES].p2m, runs[i].after[M_REQS].p2m};
    for (size_t i = 0; i < sw->n; i++)
        cp[i] = (sim_chart_point){sw->p[i].points, sw->p[i].ring.cv, sw->p[i].m[M_KEYS].cv};
    sim_chart c = {title, o->nmodes, cm, sw->n, cp, "stable-ketama", sw->floor_cv,
                   sw->knee >= 0 ? sw->p[sw->knee].points : 0};
    if (sim_svg_write(o->svg, &c, err, sizeof(err)) != 0)
        cli_fail("simulate: %s", err);
}
