/* SPDX-License-Identifier: BSD-3-Clause */
/* agent_metrics.c: mcroute agent's metrics: the pool, the state and the processes that follow it in the Prometheus text format, served at /metrics by libevent's evhttp (already the fleet's HTTP client library). */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "agent.h"
#include "cli.h"

typedef struct out {
    char *p;
    size_t len, cap;
    int nomem;
} out;

static void outf(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void outf(out *o, const char *fmt, ...)
{
    for (;;) {
        if (o->nomem)
            return;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->p ? o->p + o->len : NULL, o->p ? o->cap - o->len : 0, fmt, ap);
        va_end(ap);
        if (n >= 0 && o->p != NULL && (size_t)n < o->cap - o->len) {
            o->len += (size_t)n;
            return;
        }
        size_t cap = o->cap ? o->cap * 2 : 8192;
        while (n >= 0 && cap < o->len + (size_t)n + 1)
            cap *= 2;
        char *p = realloc(o->p, cap);
        if (p == NULL) {
            o->nomem = 1;
            return;
        }
        o->p = p;
        o->cap = cap;
    }
}

/* A metric's HELP and TYPE lines. */
static void head(out *o, const char *name, const char *type, const char *help)
{
    outf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
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

static void server_labels(out *o, const agent *a, const mcr_state_server_counters *c,
                          const char *le)
{
    outf(o, "{pool=\"%s\",server=\"", a->pool);
    put_value(o, c->id);
    outf(o, "\"");
    if (le != NULL)
        outf(o, ",le=\"%s\"", le);
    outf(o, "}");
}

/* The host's totals per server: what the processes' pools published into
 * the state, those of processes gone included. */
static void host_servers(out *o, const agent *a)
{
    mcr_state_server_counters *c = NULL;
    size_t n = 0;
    mcr_error err;
    if (mcr_state_counters(a->writer, &c, &n, &err) != MCR_OK) {
        o->nomem = 1;
        return;
    }
    static const struct {
        const char *name, *help;
        size_t off;
    } ctr[] = {
#define F(f) offsetof(mcr_state_server_counters, f)
        {"requests", "Requests the host's processes sent to the server.", F(requests)},
        {"hits", "Gets answered with a value.", F(hits)},
        {"misses", "Gets answered without a value.", F(misses)},
        {"errors", "Requests that ended with an error.", F(errors)},
        {"timeouts", "Timeout failures.", F(timeouts)},
        {"connect_failures", "Connections refused, reset or closed.", F(connect_failures)},
        {"ejections", "Times a process's pool ejected the server.", F(ejections)},
        {"fallback_reads", "Reads sent as a moved key's previous owner.", F(fallback_reads)},
        {"fallback_hits", "Fallback reads answered with a value.", F(fallback_hits)},
#undef F
    };
    for (size_t k = 0; k < sizeof(ctr) / sizeof(ctr[0]); k++) {
        outf(o, "# HELP mcroute_host_server_%s_total %s\n# TYPE mcroute_host_server_%s_total "
                "counter\n",
             ctr[k].name, ctr[k].help, ctr[k].name);
        for (size_t i = 0; i < n; i++) {
            uint64_t v;
            memcpy(&v, (const char *)&c[i] + ctr[k].off, sizeof(v));
            outf(o, "mcroute_host_server_%s_total", ctr[k].name);
            server_labels(o, a, &c[i], NULL);
            outf(o, " %llu\n", (unsigned long long)v);
        }
    }
    const char *h = "mcroute_host_server_request_duration_seconds";
    head(o, h, "histogram", "Time from send to reply of the host's processes' requests.");
    for (size_t i = 0; i < n; i++) {
        for (int b = 0; b < MCR_HOST_STATE_BUCKETS; b++) {
            char le[32];
            snprintf(le, sizeof(le), "%g", c[i].bounds_s[b]);
            outf(o, "%s_bucket", h);
            server_labels(o, a, &c[i], le);
            outf(o, " %llu\n", (unsigned long long)c[i].buckets[b]);
        }
        outf(o, "%s_bucket", h);
        server_labels(o, a, &c[i], "+Inf");
        outf(o, " %llu\n%s_sum", (unsigned long long)c[i].latency_count, h);
        server_labels(o, a, &c[i], NULL);
        outf(o, " %.6f\n%s_count", c[i].latency_sum_s, h);
        server_labels(o, a, &c[i], NULL);
        outf(o, " %llu\n", (unsigned long long)c[i].latency_count);
    }
    mcr_state_counters_free(c);
    head(o, "mcroute_host_counter_drops_total", "counter",
         "Server counter updates PATH.shm had no room for (a pool of more servers than "
         "--counter-servers): the totals above miss them.");
    outf(o, "mcroute_host_counter_drops_total{pool=\"%s\"} %llu\n", a->pool,
         (unsigned long long)mcr_state_counters_dropped(a->writer));
}

/* Pool names and migration ids are of [A-Za-z0-9._:-]: no escaping. */
char *agent_metrics_text(const agent *a)
{
    out o = {NULL, 0, 0, 0};
    mcr_fleet_stats st;
    mcr_fleet_get_stats(a->fleet, &st);
    const char *pool = a->pool;

    head(&o, "mcroute_epoch", "gauge", "Epoch of the pool's snapshot the agent adopted.");
    outf(&o, "mcroute_epoch{pool=\"%s\"} %llu\n", pool, (unsigned long long)st.epoch);
    head(&o, "mcroute_state_generation", "gauge", "Generation of the state written last.");
    outf(&o, "mcroute_state_generation{pool=\"%s\"} %llu\n", pool,
         (unsigned long long)a->last.generation);
    head(&o, "mcroute_state_epoch", "gauge", "Epoch of the snapshot in the state written last.");
    outf(&o, "mcroute_state_epoch{pool=\"%s\"} %llu\n", pool, (unsigned long long)a->last.epoch);
    head(&o, "mcroute_last_change_timestamp_seconds", "gauge",
         "When the agent last wrote a state, Unix time.");
    outf(&o, "mcroute_last_change_timestamp_seconds{pool=\"%s\"} %.3f\n", pool,
         (double)a->last.at_ms / 1000.0);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double now = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    head(&o, "mcroute_seconds_since_change", "gauge", "Seconds since the agent last wrote a state.");
    outf(&o, "mcroute_seconds_since_change{pool=\"%s\"} %.3f\n", pool,
         a->written ? now - (double)a->last.at_ms / 1000.0 : 0.0);

    /* the processes, by the epoch and phase they adopted */
    head(&o, "mcroute_processes", "gauge",
         "Processes following the state, by the epoch and migration phase they adopted.");
    size_t counted = 0;
    uint64_t refused = 0;
    for (size_t i = 0; i < a->nprocs; i++) {
        const mcr_state_process *p = &a->procs[i];
        if (p->generation == 0)
            continue; /* claimed a moment ago: says nothing yet */
        refused += p->refused;
        bool seen = false; /* one line per (epoch, phase): the first of each */
        for (size_t j = 0; j < i && !seen; j++)
            seen = a->procs[j].generation != 0 && a->procs[j].epoch == p->epoch &&
                   a->procs[j].phase == p->phase;
        if (seen)
            continue;
        size_t n = 0;
        for (size_t j = i; j < a->nprocs; j++)
            n += a->procs[j].generation != 0 && a->procs[j].epoch == p->epoch &&
                 a->procs[j].phase == p->phase;
        counted += n;
        outf(&o, "mcroute_processes{pool=\"%s\",epoch=\"%llu\",phase=\"%s\"} %zu\n", pool,
             (unsigned long long)p->epoch, mcr_migration_phase_name(p->phase), n);
    }
    head(&o, "mcroute_following_processes", "gauge", "Processes following the state.");
    outf(&o, "mcroute_following_processes{pool=\"%s\"} %zu\n", pool, counted);
    head(&o, "mcroute_processes_behind", "gauge",
         "Processes on an older state than the one written last.");
    outf(&o, "mcroute_processes_behind{pool=\"%s\"} %zu\n", pool, a->behind);
    head(&o, "mcroute_state_refusals", "gauge",
         "States the live processes refused (did not verify), summed over their slots.");
    outf(&o, "mcroute_state_refusals{pool=\"%s\"} %llu\n", pool, (unsigned long long)refused);
    head(&o, "mcroute_state_write_errors_total", "counter", "States the agent could not write.");
    outf(&o, "mcroute_state_write_errors_total{pool=\"%s\"} %llu\n", pool,
         (unsigned long long)a->write_errors);

    /* the migration */
    head(&o, "mcroute_migration_phase", "gauge",
         "The pool's migration: 1 for its id and phase (none: no migration).");
    outf(&o, "mcroute_migration_phase{pool=\"%s\",migration=\"%s\",phase=\"%s\"} 1\n", pool,
         st.migration_id, mcr_migration_phase_name(st.migration_phase));
    head(&o, "mcroute_migration_keys_copied", "gauge", "Keys the migration's copy has copied.");
    outf(&o, "mcroute_migration_keys_copied{pool=\"%s\"} %llu\n", pool,
         (unsigned long long)st.migration_copied);
    head(&o, "mcroute_migration_backlog_keys", "gauge", "Moving keys the copy has yet to handle.");
    outf(&o, "mcroute_migration_backlog_keys{pool=\"%s\"} %llu\n", pool,
         (unsigned long long)st.migration_backlog);
    head(&o, "mcroute_migration_keys_per_second", "gauge", "The copy's speed.");
    outf(&o, "mcroute_migration_keys_per_second{pool=\"%s\"} %.1f\n", pool,
         st.migration_keys_per_s);

    /* etcd */
    head(&o, "mcroute_etcd_requests_total", "counter", "HTTP requests the agent sent to etcd.");
    outf(&o, "mcroute_etcd_requests_total{pool=\"%s\"} %llu\n", pool,
         (unsigned long long)st.requests);
    head(&o, "mcroute_etcd_errors_total", "counter", "Failed watches and requests to etcd.");
    outf(&o, "mcroute_etcd_errors_total{pool=\"%s\"} %llu\n", pool,
         (unsigned long long)st.disconnects);
    head(&o, "mcroute_etcd_refused_total", "counter",
         "Values read from etcd that were refused (did not verify, older, ...).");
    outf(&o, "mcroute_etcd_refused_total{pool=\"%s\"} %llu\n", pool,
         (unsigned long long)st.refused);
    head(&o, "mcroute_etcd_connected", "gauge", "1 while the agent's watch is established.");
    outf(&o, "mcroute_etcd_connected{pool=\"%s\"} %d\n", pool, st.connected);
    host_servers(&o, a);
    if (o.nomem) {
        free(o.p);
        return NULL;
    }
    return o.p;
}

static void metrics_cb(struct evhttp_request *req, void *arg)
{
    agent *a = arg;
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
        evhttp_send_error(req, 405, "only GET and HEAD");
        return;
    }
    char *text = agent_metrics_text(a);
    struct evbuffer *b = evbuffer_new();
    if (text == NULL || b == NULL) {
        free(text);
        if (b != NULL)
            evbuffer_free(b);
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    evbuffer_add(b, text, strlen(text));
    free(text);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "text/plain; version=0.0.4; charset=utf-8");
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

static void other_cb(struct evhttp_request *req, void *arg)
{
    (void)arg;
    evhttp_send_error(req, 404, "see /metrics");
}

void agent_metrics_start(agent *a, const char *addr)
{
    char host[300];
    const char *colon = strrchr(addr, ':');
    if (colon == NULL || colon == addr || (size_t)(colon - addr) >= sizeof(host))
        cli_die("agent: --metrics '%s': expected ADDR:PORT", addr);
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    if (host[0] == '[') { /* [v6]:port */
        size_t n = strlen(host);
        if (n < 3 || host[n - 1] != ']')
            cli_die("agent: --metrics '%s': expected [ADDR]:PORT for IPv6", addr);
        memmove(host, host + 1, n - 2);
        host[n - 2] = '\0';
    }
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (colon[1] < '0' || colon[1] > '9' || *end != '\0' || port < 0 || port > 65535)
        cli_die("agent: --metrics '%s': the port must be 0 to 65535", addr);
    a->http = evhttp_new(a->base);
    if (a->http == NULL)
        cli_fail("agent: cannot start the metrics server");
    struct evhttp_bound_socket *s = evhttp_bind_socket_with_handle(a->http, host, (uint16_t)port);
    if (s == NULL)
        cli_fail("agent: --metrics %s: cannot listen there", addr);
    evhttp_set_allowed_methods(a->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD);
    evhttp_set_cb(a->http, "/metrics", metrics_cb, a);
    evhttp_set_gencb(a->http, other_cb, a);
    /* the port bound (port 0 picks one) */
    struct sockaddr_storage ss;
    ev_socklen_t len = sizeof(ss);
    int bound = (int)port;
    if (getsockname(evhttp_bound_socket_get_fd(s), (struct sockaddr *)&ss, &len) == 0)
        bound = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                          : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    printf("metrics http://%s%s%s:%d/metrics\n", strchr(host, ':') ? "[" : "", host,
           strchr(host, ':') ? "]" : "", bound);
    fflush(stdout);
}
