/* SPDX-License-Identifier: BSD-3-Clause */
/* agent.c: mcroute agent: one per host, it follows a pool in etcd, writes each snapshot and migration adopted into the host's shared state, and registers in etcd the adoption of the slowest process that follows the state. */
#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "cli.h"

const char cli_usage_agent[] =
    "Usage: mcroute agent --etcd URLS --pool NAME --state PATH [--metrics ADDR:PORT]\n"
    "                     [--id ID] [--group GROUP] [--file-mode MODE] [--slots N]\n"
    "                     [--counter-servers N]\n"
    "                     [--etcd-prefix PREFIX] [--etcd-timeout SECONDS]\n"
    "One per host. Follow the pool in etcd as its clients do, and write every\n"
    "snapshot adopted, with the pool's migration, into the shared state at PATH\n"
    "(and PATH.shm), which the host's processes follow with no thread of their own\n"
    "(mcr_router_new_from_state(3); any command takes --state PATH as its SOURCE).\n"
    "The agent registers in etcd as one client (ID, default HOSTNAME-agent): the\n"
    "epoch and migration phase it registers are those of the slowest live process\n"
    "that follows the state (its own when none does), so that mcroute migrate\n"
    "--etcd waits for every process; the processes behind are named there. While\n"
    "etcd is unreachable, or a value does not verify, the state keeps the last\n"
    "good snapshot. A line on stdout for every state written.\n"
    "  --metrics ADDR:PORT  serve the Prometheus text format at /metrics (port 0:\n"
    "                       any free one; the URL is printed)\n"
    "  --group GROUP        both files get this group: the processes' users must be\n"
    "                       in it (they write their slot in PATH.shm)\n"
    "  --file-mode MODE     the files' mode, octal (default 0660; PATH gets no write\n"
    "                       bit but the owner's)\n"
    "  --slots N            the most processes at once (default 4096), used when\n"
    "                       PATH.shm is created\n"
    "  --counter-servers N  the servers whose counters each process publishes into\n"
    "                       PATH.shm (default 256; more are dropped, and counted\n"
    "                       in mcroute_host_counter_drops_total), used when\n"
    "                       PATH.shm is created\n"
    "Runs until SIGINT or SIGTERM (exit 0). Exit 2: bad options, no such pool; 1:\n"
    "etcd unreachable at the start (--etcd-timeout, default 10 seconds), the state\n"
    "cannot be created, or another agent holds it.\n";

/* How often the agent looks at the processes' slots (and at what the
 * follower adopted), ms: often while a process is behind or a state is
 * not written yet, else at the slow pace. */
#define TICK_FAST_MS 2
#define TICK_SLOW_MS 100
/* The processes named in the registration as behind, at most. */
#define NAMED_BEHIND 5
/* A registration that would change only its note (who is behind) waits
 * this long after the last one, ms: processes adopt within milliseconds,
 * and naming each step of that would cost etcd a write per tick; one that
 * stays behind is named within this time. */
#define NOTE_EVERY_MS 1000

static int64_t monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A warning on stderr, unless it says what the last one said less than
 * WARN_EVERY_MS ago (a state that cannot be written, tried again at every
 * tick, is said once, then every so often). */
#define WARN_EVERY_MS 10000
static void warn(agent *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(agent *a, const char *fmt, ...)
{
    char msg[sizeof(a->warned)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    int64_t now = monotonic_ms();
    if (strcmp(msg, a->warned) == 0 && now - a->warned_ms < WARN_EVERY_MS)
        return;
    snprintf(a->warned, sizeof(a->warned), "%s", msg);
    a->warned_ms = now;
    fprintf(stderr, "%s: agent: %s\n", cli_progname, msg);
    fflush(stderr);
}

static int64_t realtime_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------ the state */

/* What the follower holds now, as a content; 0 when it is caught between
 * two steps (the migration's snapshots not yet those of its record), or
 * holds nothing yet. The references are the caller's to drop. */
static int desired(agent *a, mcr_state_content *c, mcr_snapshot **snap,
                   mcr_router_migration *t, mcr_fleet_stats *st)
{
    memset(c, 0, sizeof(*c));
    memset(t, 0, sizeof(*t));
    mcr_fleet_get_stats(a->fleet, st);
    *snap = mcr_router_published(a->router);
    if (*snap == NULL)
        return 0;
    c->pool = a->pool;
    c->snapshot = *snap;
    c->phase = st->migration_phase;
    if (c->phase == MCR_MIGRATION_NONE)
        return 1;
    c->migration_id = st->migration_id;
    c->from_epoch = st->migration_from_epoch;
    c->to_epoch = st->migration_to_epoch;
    if (c->phase < MCR_MIGRATION_COPYING || c->phase > MCR_MIGRATION_CLOSING)
        return 1;
    /* the phases that route through the migration: the router's */
    if (mcr_router_get_migration(a->router, t) != MCR_OK ||
        mcr_snapshot_epoch(t->from) != c->from_epoch || mcr_snapshot_epoch(t->to) != c->to_epoch ||
        ((t->flags & MCR_MIGRATION_FLAG_CLOSING) != 0) != (c->phase == MCR_MIGRATION_CLOSING))
        return 0;
    c->from = t->from;
    c->to = t->to;
    return 1;
}

static bool same_as_written(const agent *a, const mcr_state_content *c)
{
    const agent_written *l = &a->last;
    return a->written && l->epoch == mcr_snapshot_epoch(c->snapshot) &&
           strcmp(l->checksum, mcr_snapshot_checksum(c->snapshot)) == 0 && l->phase == c->phase &&
           (c->phase == MCR_MIGRATION_NONE ||
            (strcmp(l->migration_id, c->migration_id) == 0 && l->from_epoch == c->from_epoch &&
             l->to_epoch == c->to_epoch));
}

/* Write the follower's snapshot and migration when they changed. */
static void write_state(agent *a)
{
    mcr_state_content c;
    mcr_snapshot *snap = NULL;
    mcr_router_migration t;
    mcr_fleet_stats st;
    if (desired(a, &c, &snap, &t, &st) && !same_as_written(a, &c)) {
        mcr_error err;
        uint64_t gen = 0;
        if (mcr_state_write(a->writer, &c, &gen, &err) != MCR_OK) {
            a->write_errors++;
            a->write_failed = 1;
            warn(a, "cannot write the state: %s", err.message);
        } else {
            a->write_failed = 0;
            agent_written *l = &a->last;
            l->generation = gen;
            l->epoch = mcr_snapshot_epoch(c.snapshot);
            snprintf(l->checksum, sizeof(l->checksum), "%s", mcr_snapshot_checksum(c.snapshot));
            l->phase = c.phase;
            snprintf(l->migration_id, sizeof(l->migration_id), "%s",
                     c.migration_id ? c.migration_id : "");
            l->from_epoch = c.from_epoch;
            l->to_epoch = c.to_epoch;
            l->at_ms = realtime_ms();
            a->written = 1;
            printf("generation %llu: epoch %llu %s%s%s\n", (unsigned long long)gen,
                   (unsigned long long)l->epoch, l->checksum,
                   c.phase ? ", migration " : "", c.phase ? mcr_migration_phase_name(c.phase) : "");
            fflush(stdout);
        }
    }
    mcr_router_migration_clear(&t);
    mcr_snapshot_unref(snap);
}

/* ------------------------------------------------------------ registration */

/* The adoption to register: the slowest process's (the oldest generation
 * a live process recorded), the agent's own when none follows; and the
 * note naming the processes behind. */
static void slowest(agent *a, mcr_fleet_adoption *out, char *note, size_t cap)
{
    const mcr_state_process *min = NULL;
    size_t counted = 0;
    a->behind = 0;
    for (size_t i = 0; i < a->nprocs; i++) {
        const mcr_state_process *p = &a->procs[i];
        if (p->generation == 0)
            continue; /* claimed a moment ago: says nothing yet */
        counted++;
        if (p->generation < a->last.generation)
            a->behind++;
        if (min == NULL || p->generation < min->generation)
            min = p;
    }
    memset(out, 0, sizeof(*out));
    if (min == NULL) {
        out->epoch = a->last.epoch;
        snprintf(out->checksum, sizeof(out->checksum), "%s", a->last.checksum);
        out->phase = a->last.phase;
        snprintf(out->migration_id, sizeof(out->migration_id), "%s", a->last.migration_id);
        out->migration_to_epoch = a->last.to_epoch;
    } else {
        out->epoch = min->epoch;
        snprintf(out->checksum, sizeof(out->checksum), "%s", min->checksum);
        out->phase = min->phase;
        snprintf(out->migration_id, sizeof(out->migration_id), "%s", min->migration_id);
        out->migration_to_epoch = min->to_epoch;
    }
    size_t o = (size_t)snprintf(note, cap, "agent for %zu processes, %zu behind", counted,
                                a->behind);
    size_t named = 0;
    for (size_t i = 0; i < a->nprocs && named < NAMED_BEHIND && o < cap; i++) {
        const mcr_state_process *p = &a->procs[i];
        if (p->generation == 0 || p->generation >= a->last.generation)
            continue;
        o += (size_t)snprintf(note + o, cap - o, "%s pid %u (epoch %llu, %s)",
                              named ? "," : ":", (unsigned)p->pid,
                              (unsigned long long)p->epoch, mcr_migration_phase_name(p->phase));
        named++;
    }
    if (named < a->behind && o < cap)
        snprintf(note + o, cap - o, ", ...");
}

static void register_slowest(agent *a)
{
    mcr_fleet_adoption r;
    char note[512];
    if (!a->written)
        return; /* the follower's own until the first state is out */
    slowest(a, &r, note, sizeof(note));
    bool same = a->reg_set && memcmp(&r, &a->reg, sizeof(r)) == 0;
    if (same && (strcmp(note, a->reg_note) == 0 || monotonic_ms() - a->reg_ms < NOTE_EVERY_MS))
        return;
    r.note = note;
    mcr_error err;
    if (mcr_fleet_set_adoption(a->fleet, &r, &err) != MCR_OK) {
        warn(a, "%s", err.message);
        return;
    }
    r.note = NULL;
    a->reg = r;
    snprintf(a->reg_note, sizeof(a->reg_note), "%s", note);
    a->reg_set = 1;
    a->reg_ms = monotonic_ms();
}

static void read_processes(agent *a)
{
    mcr_state_process *p = NULL;
    size_t n = 0;
    mcr_error err;
    if (mcr_state_processes(a->writer, &p, &n, &err) != MCR_OK)
        return; /* out of memory: the last list stands */
    mcr_state_processes_free(a->procs);
    a->procs = p;
    a->nprocs = n;
}

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    agent *a = arg;
    write_state(a);
    read_processes(a);
    register_slowest(a);
    /* fast while processes catch up or the first state is due; slow after
     * a write failed (the next tick tries again) */
    unsigned ms = (a->behind > 0 || !a->written) && !a->write_failed ? TICK_FAST_MS : TICK_SLOW_MS;
    struct timeval tv = {0, (suseconds_t)ms * 1000};
    event_add(a->tick, &tv);
}

/* ------------------------------------------------------------ follower */

static void on_event(const mcr_fleet_event *ev, void *arg)
{
    (void)arg;
    const char *m = ev->err != NULL ? ev->err->message : mcr_strerror(ev->status);
    switch (ev->kind) {
    case MCR_FLEET_REFUSED:
        fprintf(stderr, "%s: agent: refused: %s (the state keeps epoch %llu)\n", cli_progname, m,
                (unsigned long long)ev->epoch);
        break;
    case MCR_FLEET_DISCONNECTED:
        fprintf(stderr, "%s: agent: etcd%s%s: %s (trying again; the state stays)\n",
                cli_progname, ev->endpoint ? " " : "", ev->endpoint ? ev->endpoint : "", m);
        break;
    case MCR_FLEET_REGISTER:
    case MCR_FLEET_MIGRATION_SET:
        if (ev->status != MCR_OK)
            fprintf(stderr, "%s: agent: %s\n", cli_progname, m);
        break;
    default: break;
    }
    fflush(stderr);
}

static void stop_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    event_base_loopbreak(((agent *)arg)->base);
}

/* ------------------------------------------------------------ options */

/* A count option's value, 1 to max (bad input otherwise). */
static unsigned count_option(const char *opt, const char *v, unsigned max)
{
    char *end;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    if (*v < '0' || *v > '9' || *end != '\0' || errno != 0 || n < 1 || n > max)
        cli_die("agent: %s '%s': expected a number from 1 to %u", opt, v, max);
    return (unsigned)n;
}

static void writer_options(const cli_source *src, mcr_state_writer_options *wo)
{
    memset(wo, 0, sizeof(*wo));
    if (src->slots != NULL)
        wo->slots = count_option("--slots", src->slots, MCR_HOST_STATE_SLOTS_MAX);
    if (src->counter_servers != NULL)
        wo->counter_servers = count_option("--counter-servers", src->counter_servers,
                                           MCR_HOST_STATE_COUNTER_SERVERS_MAX);
    if (src->file_mode != NULL) {
        char *end;
        errno = 0;
        unsigned long m = strtoul(src->file_mode, &end, 8);
        if (*src->file_mode < '0' || *src->file_mode > '7' || *end != '\0' || errno != 0 ||
            m > 0777 || (m & 0600) != 0600)
            cli_die("agent: --file-mode '%s': expected an octal mode up to 0777 with the "
                    "owner's read and write bits (0600)",
                    src->file_mode);
        wo->mode = (unsigned)m;
    }
    if (src->group != NULL) {
        struct group *g = getgrnam(src->group);
        if (g == NULL)
            cli_die("agent: --group '%s': no such group", src->group);
        wo->set_gid = 1;
        wo->gid = (unsigned)g->gr_gid;
    }
}

static void check_options(const cli_source *src)
{
    if (src->state == NULL)
        cli_die("agent: --state PATH is required (where the host's processes read the pool)");
    if (src->etcd == NULL || src->pool == NULL)
        cli_die("agent: --etcd URLS and --pool NAME are required (the pool to follow)");
    if (strlen(src->pool) > MCR_HOST_STATE_POOL_MAX)
        cli_die("agent: --pool: a state holds pool names of at most %d bytes",
                MCR_HOST_STATE_POOL_MAX);
}

/* ------------------------------------------------------------ main */

static void start_follower(agent *a, const cli_source *src)
{
    mcr_fleet_options o;
    mcr_error err;
    char id[300], host[256] = "localhost";
    cli_fleet_options("agent", src, &o);
    if (src->id == NULL) {
        gethostname(host, sizeof(host) - 1);
        host[sizeof(host) - 1] = '\0';
        for (char *p = host; *p; p++) /* the pool-name alphabet */
            if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                  (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-'))
                *p = '_';
        snprintf(id, sizeof(id), "%.120s-agent", host);
    }
    mcr_fleet_follow_options fo;
    memset(&fo, 0, sizeof(fo));
    fo.client_id = src->id != NULL ? src->id : id;
    fo.on_event = on_event;
    if (mcr_router_new(NULL, &a->router, &err) != MCR_OK)
        cli_fail("agent: %s", err.message);
    /* SIGINT and SIGTERM for the main loop only: the follower's thread is
     * started with them blocked */
    sigset_t stop, old;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, &old);
    int rc = mcr_fleet_follow(&o, &fo, a->router, &a->fleet, &err);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == MCR_ERR_TIMEOUT || rc == MCR_ERR_CONNECT) /* not bad input: try again later */
        cli_fail("agent: %s", err.message);
    if (rc != MCR_OK)
        cli_die_status(rc, "agent: %s", err.message);
}

int cli_cmd_agent(int argc, char **argv)
{
    cli_source src;
    agent a;
    mcr_error err;
    memset(&a, 0, sizeof(a));
    int first = cli_parse_options(argc, argv, &src, cli_usage_agent,
                                  ALLOW_ETCD | ALLOW_AGENT | PERMUTE | NO_HASH);
    if (first < argc)
        cli_die("agent: unexpected argument '%s'", argv[first]);
    check_options(&src);
    mcr_state_writer_options wo;
    writer_options(&src, &wo);
    a.pool = src.pool;
    a.path = src.state;
    a.base = event_base_new();
    if (a.base == NULL)
        cli_fail("agent: cannot create an event loop");
    if (src.metrics != NULL)
        agent_metrics_start(&a, src.metrics); /* before anything is registered */
    int rc = mcr_state_writer_open(src.state, &wo, &a.writer, &err);
    if (rc != MCR_OK)
        cli_fail("agent: %s", err.message);
    start_follower(&a, &src);

    a.tick = evtimer_new(a.base, tick_cb, &a);
    a.sigint = evsignal_new(a.base, SIGINT, stop_cb, &a);
    a.sigterm = evsignal_new(a.base, SIGTERM, stop_cb, &a);
    if (a.tick == NULL || a.sigint == NULL || a.sigterm == NULL)
        cli_fail("agent: out of memory");
    event_add(a.sigint, NULL);
    event_add(a.sigterm, NULL);
    tick_cb(-1, 0, &a); /* the first state at once */
    event_base_dispatch(a.base);

    mcr_fleet_free(a.fleet); /* unregisters */
    mcr_router_free(a.router);
    mcr_state_writer_free(a.writer); /* the files stay: processes keep the last state */
    mcr_state_processes_free(a.procs);
    if (a.http != NULL)
        evhttp_free(a.http);
    event_free(a.tick);
    event_free(a.sigint);
    event_free(a.sigterm);
    event_base_free(a.base);
    free(src.behaviors);
    return cli_finish_output();
}
