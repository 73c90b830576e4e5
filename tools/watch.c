/* SPDX-License-Identifier: BSD-3-Clause */
/* watch.c: mcroute watch: follow a pool in etcd as any client does, and print a line for every snapshot adopted. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mcroute.h"
#include "mcroute_fleet.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"
#include "mcroute_state.h"

#include "cli.h"

const char cli_usage_watch[] =
    "Usage: mcroute watch --etcd URLS --pool NAME [--count N] [--timeout SECONDS]\n"
    "                     [--client-id ID] [--etcd-prefix PREFIX]\n"
    "                     [--etcd-timeout SECONDS]\n"
    "       mcroute watch --state PATH [--count N] [--timeout SECONDS]\n"
    "Follow the pool as its clients do, and print EPOCH<TAB>CHECKSUM<TAB>SERVERS\n"
    "(SERVERS: how many servers it lists, in every state) for its current snapshot,\n"
    "then for every newer one adopted, a line each, written at once.\n"
    "The watch registers as a client of the pool (as ID; default HOSTNAME-PID),\n"
    "which 'mcroute members status' counts, and unregisters when it ends.\n"
    "A stored value that does not verify is refused: the watch keeps its snapshot,\n"
    "says why on stderr and goes on watching; so it does while etcd is unreachable.\n"
    "It ends after N lines (--count N; exit 0), after SECONDS (--timeout; exit 0,\n"
    "or 1 when --count was given and fewer than N lines came), or on SIGINT or\n"
    "SIGTERM (exit 0). --etcd-timeout bounds the first read (default 10 seconds):\n"
    "etcd unreachable then, no such pool, or a value that does not verify exit 2.\n"
    "With --state, follow a host's shared state (mcroute agent) as its processes\n"
    "do, but without a slot (the agent does not wait for the watch); a state that\n"
    "does not verify is refused and said on stderr; no state yet exits 2.\n";

/* How often a watch of a state looks at its generation, ms. */
#define STATE_POLL_MS 10

/* What the router's hook (the follower's thread, and the main thread for
 * the first snapshot) and the main thread share. */
static struct {
    pthread_mutex_t lock;
    unsigned long printed; /* lines written */
    unsigned long want;    /* --count; 0: no limit */
    int lost;              /* standard output failed */
    int disconnected;      /* a DISCONNECTED not yet followed by CONNECTED */
    int wake[2];           /* the main thread waits on wake[0] */
} w = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, {-1, -1}};

static volatile sig_atomic_t g_signal;

static void wake_main(void)
{
    ssize_t r;
    do
        r = write(w.wake[1], "x", 1);
    while (r < 0 && errno == EINTR);
}

static void on_signal(int sig)
{
    int saved = errno;
    g_signal = sig;
    wake_main();
    errno = saved;
}

/* Every publish to the router: a line, until --count lines are out. */
static void adopted(const mcr_snapshot *old_snap, const mcr_snapshot *snap, const mcr_diff *diff,
                    void *arg)
{
    (void)old_snap;
    (void)diff;
    (void)arg;
    pthread_mutex_lock(&w.lock);
    if (!w.lost && (w.want == 0 || w.printed < w.want)) {
        printf("%llu\t%s\t%zu\n", (unsigned long long)mcr_snapshot_epoch(snap),
               mcr_snapshot_checksum(snap), mcr_snapshot_server_count(snap));
        w.printed++;
        if (fflush(stdout) != 0 || ferror(stdout))
            w.lost = 1;
        if (w.lost || (w.want > 0 && w.printed >= w.want))
            wake_main();
    }
    pthread_mutex_unlock(&w.lock);
}

/* What the follower reports that a watcher should know: on stderr. */
static void on_event(const mcr_fleet_event *ev, void *arg)
{
    (void)arg;
    const char *m = ev->err != NULL ? ev->err->message : mcr_strerror(ev->status);
    switch (ev->kind) {
    case MCR_FLEET_REFUSED:
        fprintf(stderr, "%s: watch: refused: %s (kept epoch %llu)\n", cli_progname, m,
                (unsigned long long)ev->epoch);
        break;
    case MCR_FLEET_DISCONNECTED:
        w.disconnected = 1;
        fprintf(stderr, "%s: watch: etcd%s%s: %s (trying again)\n", cli_progname,
                ev->endpoint ? " " : "", ev->endpoint ? ev->endpoint : "", m);
        break;
    case MCR_FLEET_CONNECTED:
        if (w.disconnected)
            fprintf(stderr, "%s: watch: watching again%s%s\n", cli_progname,
                    ev->endpoint ? " on " : "", ev->endpoint ? ev->endpoint : "");
        w.disconnected = 0;
        break;
    case MCR_FLEET_RESYNC:
        fprintf(stderr, "%s: watch: etcd compacted the revision watched: reading the pool "
                        "again\n",
                cli_progname);
        break;
    case MCR_FLEET_REGISTER:
        fprintf(stderr, "%s: watch: cannot register as a client: %s\n", cli_progname, m);
        break;
    default: break;
    }
    fflush(stderr);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static unsigned long parse_count(const char *v)
{
    char *end;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    if (*v < '0' || *v > '9' || *end != '\0' || errno != 0 || n < 1 || n > 1000000000ul)
        cli_die("watch: --count '%s': expected a number from 1 to 1000000000", v);
    return n;
}

/* Wait for --count lines, the timeout (from `start`), a signal or lost
 * output; with a state's router, look at the state every STATE_POLL_MS
 * and say each refusal. Returns 1 when the timeout ended it. */
static int wait_lines(mcr_router *state_router, int64_t start, unsigned timeout_ms)
{
    uint64_t refused = 0;
    for (;;) {
        if (state_router != NULL) {
            (void)mcr_router_generation(state_router); /* adopts: the hook prints */
            mcr_state_status st;
            if (mcr_router_state_status(state_router, &st) == MCR_OK && st.refused > refused) {
                refused = st.refused;
                fprintf(stderr, "%s: watch: refused: %s (kept epoch %llu)\n", cli_progname,
                        st.last_refusal.message,
                        (unsigned long long)mcr_router_epoch(state_router));
                fflush(stderr);
            }
        }
        pthread_mutex_lock(&w.lock);
        int done = w.lost || (w.want > 0 && w.printed >= w.want);
        pthread_mutex_unlock(&w.lock);
        if (done || g_signal)
            return 0;
        int wait = state_router != NULL ? STATE_POLL_MS : -1;
        if (timeout_ms > 0) {
            int64_t left = start + (int64_t)timeout_ms - now_ms();
            if (left <= 0)
                return 1;
            if (wait < 0 || left < wait)
                wait = (int)left;
        }
        struct pollfd p = {w.wake[0], POLLIN, 0};
        if (poll(&p, 1, wait) > 0) {
            char buf[64];
            (void)!read(w.wake[0], buf, sizeof(buf));
        }
    }
}

static void on_stop_signal(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* The end of a watch: its exit status. */
static int watch_end(const cli_source *src, int timed_out)
{
    close(w.wake[0]);
    close(w.wake[1]);
    if (w.lost)
        return cli_finish_output();
    if (timed_out && w.want > 0 && w.printed < w.want) {
        fprintf(stderr, "%s: watch: --timeout %s: %lu of %lu lines\n", cli_progname,
                src->timeout, w.printed, w.want);
        return EXIT_FAILED;
    }
    return cli_finish_output();
}

/* watch --state PATH: a router fed from the state, without a slot. */
static int watch_state(const cli_source *src, unsigned timeout_ms)
{
    mcr_error err;
    if (src->etcd || src->pool || src->etcd_prefix || src->etcd_timeout || src->client_id)
        cli_die("watch: --state takes none of --etcd, --pool, --etcd-prefix, --etcd-timeout "
                "and --client-id");
    mcr_router *router = NULL;
    int rc = mcr_router_new_from_state(src->state, MCR_HOST_STATE_OBSERVE, &router, &err);
    if (rc != MCR_OK)
        cli_die_status(rc, "watch: %s", err.message);
    if (mcr_router_add_hook(router, adopted, NULL) != MCR_OK)
        cli_fail("watch: cannot add the router hook");
    on_stop_signal();
    int64_t start = now_ms();
    mcr_snapshot *cur = mcr_router_current(router);
    adopted(NULL, cur, NULL, NULL);
    mcr_snapshot_unref(cur);
    int timed_out = wait_lines(router, start, timeout_ms);
    mcr_router_free(router);
    return watch_end(src, timed_out);
}

int cli_cmd_watch(int argc, char **argv)
{
    cli_source src;
    mcr_fleet_options o;
    mcr_error err;
    int first = cli_parse_options(argc, argv, &src, cli_usage_watch,
                                  ALLOW_ETCD | ALLOW_WATCH | PERMUTE | NO_HASH);
    if (first < argc)
        cli_die("watch: unexpected argument '%s'", argv[first]);
    w.want = src.count ? parse_count(src.count) : 0;
    unsigned timeout_ms = src.timeout ? cli_parse_seconds("watch", "--timeout", src.timeout) : 0;
    if (pipe(w.wake) != 0)
        cli_fail("watch: pipe: %s", strerror(errno));
    if (src.state != NULL) {
        int st = watch_state(&src, timeout_ms);
        free(src.behaviors);
        return st;
    }
    cli_fleet_options("watch", &src, &o);

    mcr_router *router = NULL;
    if (mcr_router_new(NULL, &router, &err) != MCR_OK)
        cli_fail("watch: %s", err.message);
    int hrc = mcr_router_add_hook(router, adopted, NULL);
    if (hrc != MCR_OK)
        cli_fail("watch: cannot add the router hook: %s", mcr_strerror(hrc));

    /* SIGINT and SIGTERM wake the main thread; the follower's thread,
     * started with them blocked, never sees them. */
    on_stop_signal();
    sigset_t stop, old;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, &old);

    mcr_fleet_follow_options fo;
    memset(&fo, 0, sizeof(fo));
    fo.client_id = src.client_id;
    fo.on_event = on_event;
    mcr_fleet *f = NULL;
    int64_t start = now_ms();
    int rc = mcr_fleet_follow(&o, &fo, router, &f, &err);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != MCR_OK) {
        mcr_router_free(router);
        cli_die_status(rc, "watch: %s", err.message);
    }
    int timed_out = wait_lines(NULL, start, timeout_ms);
    mcr_fleet_free(f); /* stops the thread (no line after this), unregisters */
    mcr_router_free(router);
    free(src.behaviors);
    return watch_end(&src, timed_out);
}
