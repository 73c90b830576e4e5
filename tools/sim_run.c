/* SPDX-License-Identifier: BSD-3-Clause */
/* sim_run.c: the work of mcroute simulate: the workload (generated or read), the servers and the change, each mode's run (moved shares, balance, lookup cost, build time, memory) and the points sweep. */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mcroute.h"
#include "mcroute_snapshot.h"

#include "cli.h"
#include "simulate.h"

/* ------------------------------------------------------------ small helpers */

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Bytes the heap holds: the memory a snapshot takes is the growth of this
 * across its build, while it is alive. glibc's counters; under ASan or TSan,
 * whose allocators glibc does not see, the sanitizer runtime's own (declared
 * here: GCC ships no header for it). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
size_t __sanitizer_get_current_allocated_bytes(void);

static size_t heap_in_use(void)
{
    return __sanitizer_get_current_allocated_bytes();
}
#else
static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}
#endif

/* SplitMix64 (Steele, Lea and Flood): a fixed sequence for a seed, so a
 * workload is the same on every machine. */
static uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double rng_unit(uint64_t *state)
{
    return (double)(rng_next(state) >> 11) * 0x1.0p-53;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

/* ------------------------------------------------------------ workload */

static const char *key_at(const workload *w, size_t i, size_t *len)
{
    *len = w->off[i + 1] - w->off[i];
    return w->bytes + w->off[i];
}

/* One value size of the distribution. Lognormal: exp(mu + sigma Z),
 * median e^mu, Z standard normal by Box-Muller; rounded, 1 to 1 MiB. */
static double draw_size(const size_dist *d, uint64_t *rng)
{
    switch (d->kind) {
    case SIZE_FIXED: return d->a;
    case SIZE_UNIFORM: return d->a + floor(rng_unit(rng) * (d->b - d->a + 1));
    case SIZE_LOGNORMAL:
    default: {
        double u1 = 1.0 - rng_unit(rng), u2 = rng_unit(rng); /* u1 in (0, 1] */
        double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
        double v = floor(d->a * exp(d->b * z) + 0.5);
        return v < 1 ? 1 : v > SIM_GEN_VALUE_MAX ? SIM_GEN_VALUE_MAX : v;
    }
    }
}

static void workload_finish(workload *w)
{
    w->cum = cli_xcalloc(w->n, sizeof(*w->cum));
    double c = 0, b = 0;
    for (size_t i = 0; i < w->n; i++) {
        c += w->qps[i];
        w->cum[i] = c;
        b += w->size[i];
    }
    w->total_qps = c;
    w->total_bytes = b;
}

/* Keys "obj:" + 16 hex digits of the sequence; sizes from `sizes`; the
 * rate of the key of rank r (1 = hottest) is 1 / r^s, ranks given by a
 * random permutation so that hot keys have nothing to do with key order. */
void sim_workload_generate(workload *w, const sim_opts *o)
{
    uint64_t rng = o->seed;
    const size_t klen = 20;
    w->n = o->keys;
    w->bytes = cli_xcalloc(w->n, klen + 1);
    w->off = cli_xcalloc(w->n + 1, sizeof(*w->off));
    w->size = cli_xcalloc(w->n, sizeof(*w->size));
    w->qps = cli_xcalloc(w->n, sizeof(*w->qps));
    for (size_t i = 0; i < w->n; i++) {
        char buf[32];
        snprintf(buf, sizeof(buf), "obj:%016" PRIx64, rng_next(&rng));
        memcpy(w->bytes + i * klen, buf, klen);
        w->off[i] = i * klen;
    }
    w->off[w->n] = w->n * klen;
    for (size_t i = 0; i < w->n; i++)
        w->size[i] = draw_size(&o->sizes, &rng);
    uint32_t *rank = cli_xcalloc(w->n, sizeof(*rank));
    for (size_t i = 0; i < w->n; i++)
        rank[i] = (uint32_t)i;
    for (size_t i = w->n - 1; i > 0; i--) { /* Fisher-Yates */
        size_t j = (size_t)(rng_next(&rng) % (i + 1));
        uint32_t t = rank[i];
        rank[i] = rank[j];
        rank[j] = t;
    }
    for (size_t i = 0; i < w->n; i++)
        w->qps[i] = o->zipf == 0 ? 1.0 : pow((double)rank[i] + 1.0, -o->zipf);
    free(rank);
    workload_finish(w);
}

void sim_workload_read(workload *w, const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        cli_die("simulate: cannot open %s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0, lineno = 0, kcap = 0, kused = 0, ncap = 0;
    ssize_t len;
    w->n = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (len > 0 && line[len - 1] == '\n')
            line[--len] = '\0';
        if (len > 0 && line[len - 1] == '\r')
            line[--len] = '\0';
        if (len == 0 || line[0] == '#')
            continue;
        if ((size_t)len != strlen(line))
            cli_die("simulate: %s line %zu: a NUL byte", path, lineno);
        char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (t1 == NULL || t2 == NULL || t1 == line)
            cli_die("simulate: %s line %zu: expected KEY<TAB>BYTES<TAB>QPS", path, lineno);
        *t1 = *t2 = '\0';
        char *end;
        errno = 0;
        double bytes = strtod(t1 + 1, &end);
        if (t1[1] < '0' || t1[1] > '9' || *end != '\0' || errno != 0 || bytes != floor(bytes) ||
            bytes > SIM_VALUE_MAX)
            cli_die("simulate: %s line %zu: BYTES '%s': expected a whole number from 0 to "
                    "1073741824",
                    path, lineno, t1 + 1);
        errno = 0;
        double qps = strtod(t2 + 1, &end);
        if (t2[1] == '\0' || *end != '\0' || errno != 0 || !isfinite(qps) || qps < 0)
            cli_die("simulate: %s line %zu: QPS '%s': expected a number >= 0", path, lineno,
                    t2 + 1);
        if (w->n == SIM_KEYS_MAX)
            cli_die("simulate: %s: more than %u keys", path, SIM_KEYS_MAX);
        size_t kl = (size_t)(t1 - line);
        if (w->n + 2 > ncap) {
            ncap = ncap ? ncap * 2 : 1024;
            w->off = realloc(w->off, ncap * sizeof(*w->off));
            w->size = realloc(w->size, ncap * sizeof(*w->size));
            w->qps = realloc(w->qps, ncap * sizeof(*w->qps));
            if (!w->off || !w->size || !w->qps)
                cli_fail("simulate: out of memory");
        }
        if (kused + kl > kcap) {
            kcap = (kcap + kl) * 2;
            if ((w->bytes = realloc(w->bytes, kcap)) == NULL)
                cli_fail("simulate: out of memory");
        }
        memcpy(w->bytes + kused, line, kl);
        w->off[w->n] = kused;
        kused += kl;
        w->size[w->n] = bytes;
        w->qps[w->n] = qps;
        w->n++;
    }
    bool bad = ferror(f) != 0;
    free(line);
    fclose(f);
    if (bad)
        cli_die("simulate: error reading %s", path);
    if (w->n == 0)
        cli_die("simulate: %s: no KEY<TAB>BYTES<TAB>QPS line", path);
    w->off[w->n] = kused;
    workload_finish(w);
    if (!(w->total_qps > 0))
        cli_die("simulate: %s: every QPS is 0", path);
}

/* The key of one request, drawn in proportion to the rates. */
static size_t draw_key(const workload *w, uint64_t *rng)
{
    double u = rng_unit(rng) * w->total_qps;
    size_t lo = 0, hi = w->n - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (w->cum[mid] > u)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* ------------------------------------------------------------ servers and changes */

void sim_server_list_from(server_list *sl, mcr_snapshot *snap)
{
    sl->snap = snap;
    sl->n = mcr_snapshot_server_count(snap);
    sl->d = cli_xcalloc(sl->n, sizeof(*sl->d));
    sl->named = cli_xcalloc(sl->n, sizeof(*sl->named));
    for (size_t i = 0; i < sl->n; i++) {
        char def[300];
        mcr_snapshot_server(snap, i, &sl->d[i]);
        snprintf(def, sizeof(def), strchr(sl->d[i].host, ':') ? "[%s]:%d" : "%s:%d",
                 sl->d[i].host, sl->d[i].port);
        sl->named[i] = strcmp(def, sl->d[i].id) != 0;
    }
}

void sim_server_list_free(server_list *sl)
{
    free(sl->d);
    free(sl->named);
    mcr_snapshot_unref(sl->snap);
}

/* Mode "ketama" accepts every weight: the snapshot that checks the input. */
mcr_snapshot *sim_base_snapshot(const sim_opts *o)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    mcr_snapshot *snap = NULL;
    int rc = MCR_OK;
    if (cfg == NULL)
        cli_fail("simulate: out of memory");
    if (o->servers)
        rc = mcr_config_add_servers(cfg, o->servers, &err);
    else if (o->server_file)
        rc = mcr_config_load_server_file(cfg, o->server_file, &err);
    else
        for (unsigned long i = 1; i <= o->server_count && rc == MCR_OK; i++) {
            char host[32];
            snprintf(host, sizeof(host), "10.%lu.%lu.%lu", (i >> 16) & 255, (i >> 8) & 255,
                     i & 255);
            rc = mcr_config_add_server(cfg, host, MCR_DEFAULT_PORT, 1, &err);
        }
    if (rc == MCR_OK)
        rc = mcr_snapshot_new(cfg, 1, &snap, &err);
    mcr_config_free(cfg);
    if (rc != MCR_OK)
        cli_die("simulate: %s", err.message);
    return snap;
}

/* The change list of the options, for a snapshot whose servers are `sl`
 * (the same ids in every mode). */
uint32_t sim_weight_max(const sim_opts *o, const server_list *sl)
{
    uint32_t wmax = 1;
    for (size_t i = 0; i < sl->n; i++)
        wmax = sl->d[i].weight > wmax ? sl->d[i].weight : wmax;
    for (size_t i = 0; i < o->nchanges; i++)
        if (o->changes[i].op == CH_ADD || o->changes[i].op == CH_REWEIGHT)
            wmax = o->changes[i].weight > wmax ? o->changes[i].weight : wmax;
    return wmax;
}

/* The weight of mode m for a weight w of the options, the largest being
 * wmax: the same, but in mcrouter-wch3, whose weights are shares of 1.0
 * (millionths): the largest weight is 1.0, the others in proportion. */
static uint32_t mode_weight(mcr_mode m, uint32_t w, uint32_t wmax)
{
    if (m != MCR_MODE_MCROUTER_WCH3)
        return w;
    return (uint32_t)((uint64_t)w * MCR_WCH3_WEIGHT_ONE / wmax);
}

mcr_changes *sim_make_changes(const sim_opts *o, const server_list *sl, mcr_mode m)
{
    mcr_error err;
    uint32_t wmax = sim_weight_max(o, sl);
    mcr_changes *ch = mcr_changes_new();
    if (ch == NULL)
        cli_fail("simulate: out of memory");
    for (size_t i = 0; i < o->nchanges; i++) {
        const change_spec *c = &o->changes[i];
        int rc = MCR_OK;
        switch (c->op) {
        case CH_ADD: {
            mcr_server_desc d = {.id = c->id, .host = c->host, .port = c->port,
                                 .weight = mode_weight(m, c->weight, wmax), .zone = c->zone,
                                 .state = MCR_STATE_ACTIVE};
            rc = mcr_changes_add(ch, &d, &err);
            break;
        }
        case CH_REMOVE: rc = mcr_changes_remove(ch, c->id, &err); break;
        case CH_REWEIGHT:
            rc = mcr_changes_set_weight(ch, c->id, mode_weight(m, c->weight, wmax), &err);
            break;
        case CH_FAIL: rc = mcr_changes_set_state(ch, c->id, MCR_STATE_DOWN, &err); break;
        case CH_FAIL_ZONE: {
            /* the servers of the zone among the listed ones and those added before */
            size_t hits = 0;
            for (size_t s = 0; s < sl->n && rc == MCR_OK; s++)
                if (sl->d[s].zone && strcmp(sl->d[s].zone, c->zone) == 0) {
                    rc = mcr_changes_set_state(ch, sl->d[s].id, MCR_STATE_DOWN, &err);
                    hits++;
                }
            for (size_t a = 0; a < i && rc == MCR_OK; a++) {
                const change_spec *p = &o->changes[a];
                if (p->op == CH_ADD && p->zone && strcmp(p->zone, c->zone) == 0) {
                    char def[300];
                    snprintf(def, sizeof(def), strchr(p->host, ':') ? "[%s]:%d" : "%s:%d",
                             p->host, p->port);
                    rc = mcr_changes_set_state(ch, p->id ? p->id : def, MCR_STATE_DOWN, &err);
                    hits++;
                }
            }
            if (rc == MCR_OK && hits == 0)
                cli_die("simulate: --fail-zone '%s': no server in that zone", c->zone);
            break;
        }
        }
        if (rc != MCR_OK)
            cli_die("simulate: %s: %s", c->arg, err.message);
    }
    return ch;
}

/* ------------------------------------------------------------ per-mode runs */

static bool mode_ignores_weights(mcr_mode m)
{
    return m == MCR_MODE_CONSISTENT || m == MCR_MODE_SPY || m == MCR_MODE_MODULA;
}

/* Each server's expected share in a snapshot (0 when not active). */
static void expected_shares(const mcr_snapshot *snap, mcr_mode m, double *e)
{
    size_t n = mcr_snapshot_server_count(snap);
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        mcr_server_desc d;
        mcr_snapshot_server(snap, i, &d);
        e[i] = d.state != MCR_STATE_ACTIVE ? 0 : mode_ignores_weights(m) ? 1.0 : (double)d.weight;
        total += e[i];
    }
    for (size_t i = 0; i < n; i++)
        e[i] /= total;
}

static balance balance_of(const double *x, const double *expected, size_t n)
{
    balance b = {0, 0};
    double sum = 0;
    size_t active = 0;
    for (size_t i = 0; i < n; i++)
        if (expected[i] > 0) {
            sum += x[i];
            active++;
        }
    if (sum <= 0 || active == 0)
        return b;
    double sq = 0;
    for (size_t i = 0; i < n; i++) {
        if (expected[i] <= 0)
            continue;
        double r = x[i] / sum / expected[i];
        if (r > b.p2m)
            b.p2m = r;
        sq += (r - 1) * (r - 1);
    }
    b.cv = sqrt(sq / (double)active);
    return b;
}

/* Keys, bytes and requests of each server when every key goes to `owner`. */
static void sums_by_owner(const workload *w, const uint32_t *owner, size_t nservers,
                          double *out[M_COUNT])
{
    for (int m = 0; m < M_COUNT; m++)
        memset(out[m], 0, nservers * sizeof(double));
    for (size_t i = 0; i < w->n; i++) {
        out[M_KEYS][owner[i]] += 1;
        out[M_BYTES][owner[i]] += w->size[i];
        out[M_REQS][owner[i]] += w->qps[i];
    }
}

static void locate_all(const mcr_snapshot *snap, const workload *w, uint32_t *owner)
{
    for (size_t i = 0; i < w->n; i++) {
        size_t len;
        const char *k = key_at(w, i, &len);
        owner[i] = mcr_snapshot_locate(snap, k, len);
    }
}

static volatile uint32_t lookup_sink; /* every timed result ends here */

/* ns per mcr_snapshot_locate (or, with `load`, per
 * mcr_snapshot_locate_bounded) over the workload's keys: the median of
 * SIM_PASSES passes, each over as many keys as fit in its time budget. */
static double time_lookups(const mcr_snapshot *snap, const workload *w, const uint32_t *load,
                           uint64_t total, double epsilon)
{
    double v[SIM_PASSES];
    size_t n = w->n < 1000 ? w->n : 1000, len;
    uint32_t acc = 0;
    for (int p = -1; p < SIM_PASSES; p++) { /* pass -1: warm-up and calibration */
        double t0 = now_ns();
        for (size_t i = 0; i < n; i++) {
            const char *k = key_at(w, i, &len);
            acc += load ? mcr_snapshot_locate_bounded(snap, k, len, load, total, epsilon)
                        : mcr_snapshot_locate(snap, k, len);
        }
        double ns = (now_ns() - t0) / (double)n;
        if (p < 0) {
            double fit = SIM_PASS_BUDGET_NS / (ns > 0.5 ? ns : 0.5);
            n = fit >= (double)w->n ? w->n : fit < 1000 ? (w->n < 1000 ? w->n : 1000) : (size_t)fit;
        } else
            v[p] = ns;
    }
    lookup_sink += acc;
    return median(v, SIM_PASSES);
}

/* Requests drawn from the rates, each sent by mcr_snapshot_locate_bounded
 * with the load of every server: its requests in flight (the last
 * `inflight` ones, each completing `inflight` requests after it was sent),
 * or with inflight 0 every request so far (running totals). Fills
 * requests[] (per snapshot index) and returns the share of requests that
 * went to a server other than the key's owner; *load_out receives the
 * final loads (caller frees) and *total_out their sum. */
static double bounded_stream(const sim_opts *o, const workload *w, const mcr_snapshot *snap,
                             const uint32_t *owner, double *requests, uint32_t **load_out,
                             uint64_t *total_out)
{
    size_t ns = mcr_snapshot_server_count(snap);
    uint32_t *load = cli_xcalloc(ns, sizeof(*load));
    uint32_t *ring = o->inflight ? cli_xcalloc(o->inflight, sizeof(*ring)) : NULL;
    uint64_t rng = o->seed ^ 0x626f756e64656421ull, total = 0, off = 0;
    size_t head = 0;
    memset(requests, 0, ns * sizeof(*requests));
    for (size_t r = 0; r < o->requests; r++) {
        size_t key = draw_key(w, &rng), len;
        const char *k = key_at(w, key, &len);
        uint32_t s = mcr_snapshot_locate_bounded(snap, k, len, load, total, o->epsilon);
        requests[s] += 1;
        off += s != owner[key];
        load[s]++;
        total++;
        if (ring) {
            if (total > o->inflight) { /* the oldest completes */
                load[ring[head]]--;
                total--;
            }
            ring[head] = s;
            head = (head + 1) % o->inflight;
        }
    }
    free(ring);
    *load_out = load;
    *total_out = total;
    return (double)off / (double)o->requests;
}

mcr_config *sim_mode_config(mcr_mode m, const server_list *sl, uint32_t mult, bool active_only,
                            uint32_t wmax)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    if (cfg == NULL)
        cli_fail("simulate: out of memory");
    mcr_config_set_mode(cfg, m); /* and its key hash, mcr_mode_default_hash() */
    for (size_t i = 0; i < sl->n; i++) {
        if (active_only && sl->d[i].state != MCR_STATE_ACTIVE)
            continue;
        mcr_server_desc d = sl->d[i];
        d.id = sl->named[i] ? d.id : NULL;
        d.state = MCR_STATE_ACTIVE;
        if ((uint64_t)d.weight * mult > MCR_WEIGHT_MAX)
            cli_die("simulate: weight %u x %u is over %u", d.weight, mult, MCR_WEIGHT_MAX);
        d.weight = mode_weight(m, d.weight * mult, wmax * mult);
        if (mcr_config_add_server_desc(cfg, &d, &err) != MCR_OK)
            cli_die("simulate: %s: %s", mcr_mode_name(m), err.message);
    }
    return cfg;
}

/* Build, change, locate and time one mode. */
void sim_run_mode(const sim_opts *o, const workload *w, const server_list *before_sl,
                  const mcr_snapshot *after_base, mode_run *r, uint32_t *own_before,
                  uint32_t *own_after)
{
    mcr_error err;
    const char *name = mcr_mode_name(r->mode);
    r->hash = mcr_mode_default_hash(r->mode);

    /* Build: memory of the first snapshot while it lives; median time. */
    mcr_config *cfg = sim_mode_config(r->mode, before_sl, 1, false, sim_weight_max(o, before_sl));
    mcr_snapshot *before = NULL;
    double t[SIM_BUILDS];
    for (int b = 0; b < SIM_BUILDS; b++) {
        mcr_snapshot *s = NULL;
        size_t h0 = heap_in_use();
        double t0 = now_ns();
        int rc = mcr_snapshot_new(cfg, 1, &s, &err);
        t[b] = (now_ns() - t0) / 1e3;
        if (rc != MCR_OK)
            cli_die("simulate: %s: %s (leave the mode out with --modes)", name, err.message);
        if (b == 0) {
            size_t h1 = heap_in_use();
            r->memory = h1 > h0 ? h1 - h0 : 0;
            before = s;
        } else
            mcr_snapshot_unref(s);
    }
    mcr_config_free(cfg);
    r->build_us = median(t, SIM_BUILDS);

    /* The change (slots: and the plan that balances the map again). */
    mcr_changes *ch = sim_make_changes(o, before_sl, r->mode);
    if (r->mode == MCR_MODE_SLOTS) {
        if (mcr_slots_plan(before, ch, &r->slots_moved, &err) != MCR_OK)
            cli_die("simulate: slots: the plan: %s", err.message);
        r->slot_count = mcr_snapshot_table_size(before);
    }
    mcr_snapshot *after = NULL;
    double t0 = now_ns();
    if (mcr_snapshot_apply(before, ch, &after, &err) != MCR_OK)
        cli_die("simulate: %s: %s", name, err.message);
    r->apply_us = (now_ns() - t0) / 1e3;
    mcr_changes_free(ch);
    r->table = mcr_snapshot_table_size(after);
    if (r->table == 0)
        r->table = mcr_ring_point_count(mcr_snapshot_ring(after));

    /* Owners, and what moved: servers compared by id. */
    size_t nb = mcr_snapshot_server_count(before), na = mcr_snapshot_server_count(after);
    if (na != mcr_snapshot_server_count(after_base))
        cli_fail("simulate: %s: %zu servers after the change, expected %zu", name, na,
                 mcr_snapshot_server_count(after_base));
    locate_all(before, w, own_before);
    locate_all(after, w, own_after);
    uint32_t *map = cli_xcalloc(nb, sizeof(*map));
    for (size_t i = 0; i < nb; i++) {
        mcr_server_desc d;
        mcr_snapshot_server(before, i, &d);
        map[i] = mcr_snapshot_find(after, d.id);
    }
    /* The ideal: the expected shares that change, matched by id. A minimal
     * placement moves keys only from servers whose share falls to servers
     * whose share rises; any other move is stray. */
    double *eb = cli_xcalloc(nb, sizeof(*eb)), *ea = cli_xcalloc(na, sizeof(*ea));
    expected_shares(before, r->mode, eb);
    expected_shares(after, r->mode, ea);
    bool *falls = cli_xcalloc(nb, sizeof(*falls)), *rises = cli_xcalloc(na, sizeof(*rises));
    double ideal = 0;
    for (size_t j = 0; j < na; j++)
        rises[j] = ea[j] > 0; /* a server new to the list rises from 0 */
    for (size_t i = 0; i < nb; i++) {
        double later = map[i] != MCR_NO_SERVER ? ea[map[i]] : 0;
        falls[i] = eb[i] > later;
        if (falls[i])
            ideal += eb[i] - later;
        if (map[i] != MCR_NO_SERVER)
            rises[map[i]] = later > eb[i];
    }
    r->ideal = ideal;

    double mk = 0, mb = 0, mr = 0, stray = 0;
    for (size_t i = 0; i < w->n; i++)
        if (map[own_before[i]] != own_after[i]) {
            mk += 1;
            mb += w->size[i];
            mr += w->qps[i];
            stray += !(falls[own_before[i]] && rises[own_after[i]]);
        }
    r->moved[M_KEYS] = mk / (double)w->n;
    r->moved[M_BYTES] = w->total_bytes > 0 ? mb / w->total_bytes : 0;
    r->moved[M_REQS] = mr / w->total_qps;
    r->stray = stray / (double)w->n;
    free(falls);
    free(rises);

    /* Balance before and after. */
    double *sb[M_COUNT];
    r->nafter = na;
    for (int m = 0; m < M_COUNT; m++) {
        sb[m] = cli_xcalloc(nb, sizeof(double));
        r->per_server[m] = cli_xcalloc(na, sizeof(double));
    }
    sums_by_owner(w, own_before, nb, sb);
    sums_by_owner(w, own_after, na, r->per_server);
    for (int m = 0; m < M_COUNT; m++) {
        r->before[m] = balance_of(sb[m], eb, nb);
        r->after[m] = balance_of(r->per_server[m], ea, na);
    }

    /* Bounded loads: requests as the stream places them. */
    if (r->mode == MCR_MODE_BOUNDED) {
        uint32_t *load;
        uint64_t total;
        r->bounded = true;
        r->owner_requests = r->after[M_REQS];
        bounded_stream(o, w, before, own_before, sb[M_REQS], &load, &total);
        free(load);
        r->before[M_REQS] = balance_of(sb[M_REQS], eb, nb);
        r->off_owner = bounded_stream(o, w, after, own_after, r->per_server[M_REQS], &load,
                                      &total);
        r->after[M_REQS] = balance_of(r->per_server[M_REQS], ea, na);
        r->bounded_ns = time_lookups(after, w, load, total, o->epsilon);
        free(load);
    }

    r->lookup_ns = time_lookups(after, w, NULL, 0, 0);
    for (int m = 0; m < M_COUNT; m++)
        free(sb[m]);
    free(eb);
    free(ea);
    free(map);
    mcr_snapshot_unref(before);
    mcr_snapshot_unref(after);
}

/* ------------------------------------------------------------ points sweep */

/* The share of the 2^32 hash values each ring server owns, exactly: a
 * point owns the values above the previous point up to its own; the first
 * also those above the last. */
static void ring_shares(const mcr_ring *ring, double *share)
{
    size_t np = mcr_ring_point_count(ring), ns = mcr_ring_server_count(ring);
    uint64_t *own = cli_xcalloc(ns, sizeof(*own));
    uint32_t last = 0, prev, v, s;
    mcr_ring_point(ring, np - 1, &last, NULL);
    prev = last;
    for (size_t i = 0; i < np; i++) {
        mcr_ring_point(ring, i, &v, &s);
        own[s] += i == 0 ? (uint64_t)v + ((uint64_t)1 << 32) - last : (uint64_t)(v - prev);
        prev = v;
    }
    for (size_t i = 0; i < ns; i++)
        share[i] = (double)own[i] / 4294967296.0;
    free(own);
}

/* The point of diminishing returns, from a model rather than from the
 * measured points one by one: every continuum is one random draw, and two
 * neighbours of the sweep can differ by chance more than a doubling of
 * points improves them. The hash-space cv of a continuum falls as
 * c / sqrt(points) (fitted: c is the geometric mean of cv x sqrt(points)
 * over the sweep); the keys add their own randomness, the cv f of a random
 * assignment, independently: keys cv = sqrt(c^2 / p + f^2). A doubling
 * improves that by less than T once
 *     (c^2 / 2p + f^2) / (c^2 / p + f^2) > (1 - T)^2 = q,
 * that is p > c^2 (q - 1/2) / (f^2 (1 - q)): beyond it the continuum is
 * no longer what unbalances the keys. */
static void sweep_knee(sweep *sw, double threshold)
{
    double logsum = 0;
    size_t used = 0;
    for (size_t i = 0; i < sw->n; i++)
        if (sw->p[i].ring.cv > 0) {
            logsum += log(sw->p[i].ring.cv * sqrt((double)sw->p[i].points));
            used++;
        }
    sw->fit_c = used ? exp(logsum / (double)used) : 0;
    double q = (1 - threshold) * (1 - threshold), c2 = sw->fit_c * sw->fit_c;
    double f2 = sw->floor_cv * sw->floor_cv;
    if (c2 == 0 || q <= 0.5)
        sw->knee_points = sw->n ? sw->p[0].points : 0; /* nothing left to gain */
    else if (f2 == 0 || q >= 1)
        sw->knee_points = INFINITY; /* every doubling keeps paying */
    else
        sw->knee_points = c2 * (q - 0.5) / (f2 * (1 - q));
    sw->knee = -1;
    for (size_t i = 0; i < sw->n; i++)
        if ((double)sw->p[i].points >= sw->knee_points) {
            sw->knee = (long)i;
            break;
        }
}

/* stable-ketama on the active servers after the change, every weight
 * multiplied by 1, 2, 4, ...: 160, 320, 640, ... points per unit of weight
 * (its smallest count is 160: the library has no smaller one). */
void sim_run_sweep(const sim_opts *o, const workload *w, const server_list *after_sl,
                   sweep *sw, uint32_t *owner)
{
    uint32_t maxw = 1;
    size_t na = 0;
    double wsum = 0;
    for (size_t i = 0; i < after_sl->n; i++)
        if (after_sl->d[i].state == MCR_STATE_ACTIVE) {
            na++;
            wsum += after_sl->d[i].weight;
            if (after_sl->d[i].weight > maxw)
                maxw = after_sl->d[i].weight;
        }
    sw->n = 0;
    sw->knee = -1;
    sw->limit = (MCR_STABLE_WEIGHT_MAX / maxw) * SIM_POINTS_PER_WEIGHT;
    double *e = cli_xcalloc(na, sizeof(*e)), *x[M_COUNT], *share = cli_xcalloc(na, sizeof(*share));
    for (int m = 0; m < M_COUNT; m++)
        x[m] = cli_xcalloc(na, sizeof(double));
    double fsum = 0;
    for (uint32_t mult = 1; mult * SIM_POINTS_PER_WEIGHT <= o->sweep_max &&
                            (uint64_t)mult * maxw <= MCR_STABLE_WEIGHT_MAX &&
                            sw->n < sizeof(sw->p) / sizeof(sw->p[0]);
         mult *= 2) {
        mcr_error err;
        if (sw->n > 0 && (double)mult * SIM_POINTS_PER_WEIGHT * wsum > SIM_SWEEP_POINTS_MAX) {
            sw->capped = true;
            break;
        }
        sweep_point *p = &sw->p[sw->n++];
        mcr_config *cfg = sim_mode_config(MCR_MODE_STABLE_KETAMA, after_sl, mult, true, 1);
        mcr_snapshot *snap = NULL;
        size_t h0 = heap_in_use();
        double t0 = now_ns();
        if (mcr_snapshot_new(cfg, 1, &snap, &err) != MCR_OK)
            cli_die("simulate: sweep: %s", err.message);
        p->build_us = (now_ns() - t0) / 1e3;
        size_t h1 = heap_in_use();
        p->memory = h1 > h0 ? h1 - h0 : 0;
        mcr_config_free(cfg);
        p->points = mult * SIM_POINTS_PER_WEIGHT;
        expected_shares(snap, MCR_MODE_STABLE_KETAMA, e);
        ring_shares(mcr_snapshot_ring(snap), share);
        p->ring = balance_of(share, e, na);
        locate_all(snap, w, owner);
        sums_by_owner(w, owner, na, x);
        for (int m = 0; m < M_COUNT; m++)
            p->m[m] = balance_of(x[m], e, na);
        p->lookup_ns = time_lookups(snap, w, NULL, 0, 0);
        mcr_snapshot_unref(snap);
        if (sw->n == 1)
            for (size_t i = 0; i < na; i++)
                fsum += (1 - e[i]) / (e[i] * (double)w->n);
    }
    sw->floor_cv = sqrt(fsum / (double)na);
    sweep_knee(sw, o->threshold);
    for (int m = 0; m < M_COUNT; m++)
        free(x[m]);
    free(e);
    free(share);
}
