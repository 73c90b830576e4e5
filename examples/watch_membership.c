/* SPDX-License-Identifier: BSD-3-Clause */
/* watch_membership.c: example of a membership change driven by a watched server file while a pool keeps serving requests.
 *
 * Usage: watch_membership -s HOST:PORT,HOST:PORT,HOST:PORT[,...] [-k KEYS] [-p PHASE_MS]
 *
 * What it does, in one process:
 *
 *   1. writes a server file listing every server given but the last, and
 *      watches it (mcr_watcher_new, placement "stable-ketama", the native
 *      mode for changing memberships); a router hook records each publish
 *      and what its diff says moved;
 *   2. a pool on a libevent loop stores KEYS keys (default 2000), then a
 *      timer keeps issuing gets (80%) and sets (20%) of random keys, at most
 *      a few hundred in flight; a get that misses stores the key again
 *      (cache-aside), so a server that joins empty warms up;
 *   3. after PHASE_MS (default 1000) of traffic, rewrites the file
 *      atomically (a temporary file renamed over it) with the last server
 *      added; the watcher's thread notices, publishes epoch 2, the hook
 *      runs there; the pool adopts the new snapshot at its next request;
 *   4. keeps the traffic going PHASE_MS longer, lets it drain, and reports.
 *
 * The report: requests answered before and after the change (by the epoch
 * each was routed with), errors (must be 0: nothing is lost while the
 * membership changes), misses (before: none, every key was stored; after:
 * only on the new server, for the keys that moved to it), the epoch change,
 * and the fraction of keys that moved, against mcr_diff_moved() from the
 * hook. In "stable-ketama" every key that moves goes to the new server.
 *
 * Threads: the pool and its callbacks live in the main thread (the loop's);
 * the watcher's thread publishes and runs the hook, which only writes a
 * small record under a mutex and reads the key set, which nothing modifies
 * once the watcher runs. The main thread sees the change through
 * mcr_router_epoch() (lock-free) and the results the pool reports.
 *
 * Exit status: 0 when the change happened with no error and every check
 * held, 1 otherwise, 2 on a usage error.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include <mcroute.h>
#include <mcroute_pool.h>
#include <mcroute_router.h>
#include <mcroute_snapshot.h>

#define MAX_SERVERS 16
#define ADDR_MAX 64           /* a HOST:PORT of -s, NUL included */
#define FILE_MAX (64 + MAX_SERVERS * ADDR_MAX)
#define KEY_SIZE 32
#define TICK_US 1000          /* the traffic timer's period */
#define PER_TICK 64           /* requests issued per tick at most */
#define MAX_IN_FLIGHT 256     /* requests waiting for the pool at most */
#define PUBLISH_TIMEOUT_MS 5000
#define WATCH_POLL_MS 50
#define WATCH_SETTLE_MS 100

/* What the watcher's thread records (under `lock`). */
typedef struct published {
    pthread_mutex_t lock;
    unsigned publishes;
    uint64_t old_epoch, new_epoch;
    double moved;                 /* mcr_diff_moved() of the last change */
    size_t keys_moved;            /* keys of the set whose owner changed */
    size_t moved_to_added;        /* ... to a server the change added */
    char pairs[512];              /* "from -> to fraction" of the diff */
    int load_errors;              /* reports of a file refused */
} published;

typedef struct demo {
    struct event_base *base;
    mcr_router *router;
    mcr_pool *pool;
    struct event *tick;
    const char *path;
    char tmp_path[4200];
    char added[ADDR_MAX];         /* id of the server the change adds */
    char file_after[FILE_MAX];

    size_t nkeys;
    char (*keys)[KEY_SIZE];       /* read by the hook: fixed once watched */
    size_t *lens;

    enum { RUN_BEFORE, WAIT_PUBLISH, RUN_AFTER, DRAIN, DONE } phase;
    unsigned phase_ms;
    uint64_t t_phase, t_rename, t_seen;
    uint64_t first_epoch;
    uint64_t rng;
    int failed;                   /* the change was not seen in time, or a rewrite failed */

    /* by the epoch a request was routed with: [0] first epoch, [1] later */
    uint64_t answered[2], errors[2], misses[2], wrong[2];
    uint64_t misses_added;        /* misses on the added server, after */
    uint64_t submit_errors;       /* refused at submission */
    uint64_t warm_errors;         /* stores of the warm-up that failed */
    published pub;
} demo;

/* A request in flight: which key, and whether it is a get. */
typedef struct op {
    demo *d;
    size_t key;
    int get;
} op;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t next_rand(demo *d)
{
    d->rng ^= d->rng << 13;
    d->rng ^= d->rng >> 7;
    d->rng ^= d->rng << 17;
    return d->rng;
}

static void value_of(const demo *d, size_t i, char *out, size_t cap)
{
    snprintf(out, cap, "value of %s", d->keys[i]);
}

/* ------------------------------------------------------------ server file */

/* Write `text` to path atomically: a temporary file, flushed, renamed over. */
static int write_atomically(const char *path, const char *tmp, const char *text)
{
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return -1;
    int ok = fputs(text, f) >= 0 && fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ watcher side */

static void on_publish(const mcr_snapshot *old_snap, const mcr_snapshot *new_snap,
                       const mcr_diff *diff, void *arg)
{
    demo *d = arg;
    published *p = &d->pub;
    size_t moved = 0, to_added = 0;
    char pairs[sizeof(p->pairs)] = "";
    if (diff != NULL) {
        for (size_t i = 0; i < d->nkeys; i++) {
            if (!mcr_diff_key_moved(diff, d->keys[i], d->lens[i]))
                continue;
            moved++;
            mcr_server_desc s;
            uint32_t at = mcr_snapshot_locate(new_snap, d->keys[i], d->lens[i]);
            if (mcr_snapshot_server(new_snap, at, &s) == MCR_OK &&
                mcr_snapshot_find(old_snap, s.id) == MCR_NO_SERVER)
                to_added++;
        }
        size_t used = 0;
        for (size_t i = 0; i < mcr_diff_pair_count(diff) && used < sizeof(pairs) - 1; i++) {
            mcr_diff_pair pr;
            if (mcr_diff_pair_get(diff, i, &pr) == MCR_OK)
                used += (size_t)snprintf(pairs + used, sizeof(pairs) - used, "%s%s -> %s %.4f",
                                         i ? ", " : "", pr.from, pr.to, pr.fraction);
        }
    }
    pthread_mutex_lock(&p->lock);
    p->publishes++;
    p->old_epoch = mcr_snapshot_epoch(old_snap);
    p->new_epoch = mcr_snapshot_epoch(new_snap);
    if (diff != NULL) {
        p->moved = mcr_diff_moved(diff);
        p->keys_moved = moved;
        p->moved_to_added = to_added;
        memcpy(p->pairs, pairs, sizeof(pairs));
    }
    pthread_mutex_unlock(&p->lock);
}

static void on_report(const mcr_watch_event *ev, void *arg)
{
    demo *d = arg;
    if (ev->status != MCR_OK) {
        pthread_mutex_lock(&d->pub.lock);
        d->pub.load_errors++;
        pthread_mutex_unlock(&d->pub.lock);
        fprintf(stderr, "watch_membership: %s refused: %s\n", ev->path,
                ev->err != NULL ? ev->err->message : mcr_strerror(ev->status));
    } else {
        fprintf(stderr, "watch_membership: watcher loaded %s: %s, epoch %" PRIu64 "\n", ev->path,
                ev->published ? "published" : "no change", ev->epoch);
    }
}

/* ------------------------------------------------------------ traffic */

static void issue(demo *d, size_t key, int get);

static void done(const mcr_result *res, void *arg)
{
    op *o = arg;
    demo *d = o->d;
    int after = res->epoch > d->first_epoch;
    d->answered[after]++;
    if (res->status != MCR_OK) {
        d->errors[after]++;
        if (d->errors[0] + d->errors[1] <= 10)
            fprintf(stderr, "watch_membership: %s %s: %s\n", mcr_op_name(res->op),
                    d->keys[o->key], res->message);
    } else if (o->get && res->reply == MCR_REPLY_MISS) {
        d->misses[after]++;
        if (after && strcmp(res->server, d->added) == 0)
            d->misses_added++;
        if (d->phase != DRAIN && d->phase != DONE)
            issue(d, o->key, 0); /* cache-aside: store it again */
    } else if (o->get) {
        char want[64];
        value_of(d, o->key, want, sizeof(want));
        if (res->value_len != strlen(want) || memcmp(res->value, want, res->value_len) != 0)
            d->wrong[after]++;
    }
    free(o);
}

static void issue(demo *d, size_t key, int get)
{
    op *o = malloc(sizeof(*o));
    if (o == NULL) {
        d->submit_errors++;
        return;
    }
    o->d = d;
    o->key = key;
    o->get = get;
    char v[64];
    int rc;
    if (get) {
        rc = mcr_pool_get(d->pool, d->keys[key], d->lens[key], done, o, NULL);
    } else {
        value_of(d, key, v, sizeof(v));
        rc = mcr_pool_set(d->pool, d->keys[key], d->lens[key], v, strlen(v), 0, 0, done, o, NULL);
    }
    if (rc != MCR_OK) { /* the callback will never run */
        d->submit_errors++;
        fprintf(stderr, "watch_membership: submit: %s\n", mcr_strerror(rc));
        free(o);
    }
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    demo *d = arg;
    (void)fd;
    (void)what;
    uint64_t now = now_ms();
    switch (d->phase) {
    case RUN_BEFORE:
        if (now - d->t_phase >= d->phase_ms) {
            if (write_atomically(d->path, d->tmp_path, d->file_after) != 0) {
                fprintf(stderr, "watch_membership: cannot rewrite %s: %s\n", d->path,
                        strerror(errno));
                d->failed = 1;
                d->phase = DRAIN;
                break;
            }
            d->t_rename = now;
            d->phase = WAIT_PUBLISH;
            printf("rewrote the server file after %u ms of traffic: %s joins\n", d->phase_ms,
                   d->added);
        }
        break;
    case WAIT_PUBLISH:
        if (mcr_router_epoch(d->router) > d->first_epoch) {
            d->t_seen = now;
            d->t_phase = now;
            d->phase = RUN_AFTER;
        } else if (now - d->t_rename > PUBLISH_TIMEOUT_MS) {
            fprintf(stderr, "watch_membership: no new snapshot %d ms after the rename\n",
                    PUBLISH_TIMEOUT_MS);
            d->failed = 1;
            d->phase = DRAIN;
        }
        break;
    case RUN_AFTER:
        if (now - d->t_phase >= d->phase_ms)
            d->phase = DRAIN;
        break;
    case DRAIN:
        if (mcr_pool_pending(d->pool) == 0) {
            d->phase = DONE;
            event_del(d->tick);
            event_base_loopbreak(d->base);
        }
        return;
    case DONE:
        return;
    }
    if (d->phase == DRAIN)
        return;
    for (int i = 0; i < PER_TICK && mcr_pool_pending(d->pool) < MAX_IN_FLIGHT; i++) {
        uint64_t r = next_rand(d);
        issue(d, (size_t)(r % d->nkeys), (r >> 32) % 10 < 8);
    }
}

static void warmed(const mcr_result *res, void *arg)
{
    demo *d = arg;
    if (res->status != MCR_OK || res->reply != MCR_REPLY_STORED) {
        d->warm_errors++;
        fprintf(stderr, "watch_membership: warm-up set: %s\n",
                res->status != MCR_OK ? res->message : mcr_reply_name(res->reply));
    }
}

/* ------------------------------------------------------------ main */

static void usage(void)
{
    fprintf(stderr,
            "usage: watch_membership -s HOST:PORT,HOST:PORT,HOST:PORT[,...] [-k KEYS] [-p PHASE_MS]\n");
    exit(2);
}

static unsigned long number(const char *s, unsigned long lo, unsigned long hi)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno != 0 || v < lo || v > hi)
        usage();
    return v;
}

int main(int argc, char **argv)
{
    const char *servers = NULL;
    demo d;
    memset(&d, 0, sizeof(d));
    d.nkeys = 2000;
    d.phase_ms = 1000;
    d.rng = 0x9e3779b97f4a7c15u;
    int opt;
    setvbuf(stdout, NULL, _IOLBF, 0); /* in order with stderr, also into a pipe */
    while ((opt = getopt(argc, argv, "s:k:p:")) != -1) {
        if (opt == 's')
            servers = optarg;
        else if (opt == 'k')
            d.nkeys = number(optarg, 10, 1000000);
        else if (opt == 'p')
            d.phase_ms = (unsigned)number(optarg, 100, 60000);
        else
            usage();
    }
    if (servers == NULL || optind != argc)
        usage();

    /* The file's two versions: all servers but the last, then all. */
    char before[FILE_MAX] = "# servers of watch_membership\n";
    size_t nservers = 0;
    for (const char *p = servers; *p != '\0';) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof(d.added) || nservers == MAX_SERVERS)
            usage();
        char line[ADDR_MAX + 1];
        snprintf(line, sizeof(line), "%.*s\n", (int)len, p);
        if (p[len] != '\0')
            strcat(before, line);
        else
            snprintf(d.added, sizeof(d.added), "%.*s", (int)len, p);
        nservers++;
        p += len + (p[len] == ',');
    }
    if (nservers < 2 || d.added[0] == '\0') /* also "A,B," */
        usage();
    snprintf(d.file_after, sizeof(d.file_after), "%s%s\n", before, d.added);

    int status = 1;
    char dir[4096], path[4200];
    const char *tmpdir = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/watch_membership.XXXXXX",
             tmpdir != NULL && *tmpdir != '\0' ? tmpdir : "/tmp");
    if (mkdtemp(dir) == NULL) {
        fprintf(stderr, "watch_membership: mkdtemp %s: %s\n", dir, strerror(errno));
        return 1;
    }
    snprintf(path, sizeof(path), "%s/servers", dir);
    snprintf(d.tmp_path, sizeof(d.tmp_path), "%s/servers.tmp", dir);
    d.path = path;
    pthread_mutex_init(&d.pub.lock, NULL);

    mcr_error err;
    memset(&err, 0, sizeof(err));
    mcr_config *tmpl = mcr_config_new();
    mcr_watcher *watcher = NULL;
    d.keys = calloc(d.nkeys, sizeof(*d.keys));
    d.lens = calloc(d.nkeys, sizeof(*d.lens));
    if (tmpl == NULL || d.keys == NULL || d.lens == NULL ||
        write_atomically(path, d.tmp_path, before) != 0) {
        fprintf(stderr, "watch_membership: cannot set up (%s)\n", strerror(errno));
        goto out;
    }
    for (size_t i = 0; i < d.nkeys; i++) {
        snprintf(d.keys[i], KEY_SIZE, "wm:%zu", i);
        d.lens[i] = strlen(d.keys[i]);
    }

    /* ---- router, hook, watcher: epoch 1 is published by mcr_watcher_new */
    int rc = mcr_router_new(NULL, &d.router, &err);
    if (rc == MCR_OK)
        rc = mcr_config_set_mode(tmpl, MCR_MODE_STABLE_KETAMA);
    if (rc == MCR_OK)
        rc = mcr_router_add_hook(d.router, on_publish, &d);
    mcr_watch_options wo;
    memset(&wo, 0, sizeof(wo));
    wo.poll_ms = WATCH_POLL_MS;
    wo.settle_ms = WATCH_SETTLE_MS;
    wo.report = on_report;
    wo.report_arg = &d;
    if (rc == MCR_OK)
        rc = mcr_watcher_new(d.router, path, MCR_WATCH_SERVER_FILE, tmpl, &wo, &watcher, &err);
    if (rc != MCR_OK) {
        fprintf(stderr, "watch_membership: %s\n", err.message[0] ? err.message : mcr_strerror(rc));
        goto out;
    }
    d.first_epoch = mcr_router_epoch(d.router);
    printf("watching %s (stable-ketama), epoch %" PRIu64 ": %zu servers\n", path, d.first_epoch,
           nservers - 1);

    /* ---- the pool and its loop */
    mcr_pool_options po;
    mcr_pool_options_init(&po);
    po.eager = 1; /* a server that joins is connected before its first key */
    d.base = event_base_new();
    if (d.base == NULL || (rc = mcr_pool_new(d.base, d.router, &po, &d.pool, &err)) != MCR_OK) {
        fprintf(stderr, "watch_membership: %s\n", d.base == NULL ? "no event base" : err.message);
        goto out;
    }
    for (size_t i = 0; i < d.nkeys; i++) {
        char v[64];
        value_of(&d, i, v, sizeof(v));
        if (mcr_pool_set(d.pool, d.keys[i], d.lens[i], v, strlen(v), 0, 0, warmed, &d, NULL) != MCR_OK)
            d.submit_errors++;
    }
    mcr_pool_wait(d.pool); /* not inside a callback: the loop may be run here */
    printf("stored %zu keys (%" PRIu64 " failed)\n", d.nkeys, d.warm_errors + d.submit_errors);

    d.tick = event_new(d.base, -1, EV_PERSIST, on_tick, &d);
    struct timeval tv = {0, TICK_US};
    if (d.tick == NULL || event_add(d.tick, &tv) != 0) {
        fprintf(stderr, "watch_membership: cannot start the traffic timer\n");
        goto out;
    }
    d.phase = RUN_BEFORE;
    d.t_phase = now_ms();
    event_base_dispatch(d.base);

    /* ---- report */
    uint64_t epoch = mcr_router_epoch(d.router);
    pthread_mutex_lock(&d.pub.lock);
    published pub = d.pub;
    pthread_mutex_unlock(&d.pub.lock);
    uint64_t errors = d.errors[0] + d.errors[1] + d.submit_errors + d.warm_errors;
    double key_frac = (double)pub.keys_moved / (double)d.nkeys;
    if (d.t_seen != 0)
        printf("the pool saw epoch %" PRIu64 " %" PRIu64 " ms after the rename\n", epoch,
               d.t_seen - d.t_rename);
    printf("hook: epoch %" PRIu64 " -> %" PRIu64 ", %u publishes; moved %s\n", pub.old_epoch,
           pub.new_epoch, pub.publishes, pub.pairs);
    printf("requests: before %" PRIu64 ", after %" PRIu64 "; errors %" PRIu64 ".\n",
           d.answered[0], d.answered[1], errors);
    printf("misses: before %" PRIu64 ", after %" PRIu64 " (%" PRIu64
           " on the new server, refilled); wrong values %" PRIu64 "\n",
           d.misses[0], d.misses[1], d.misses_added, d.wrong[0] + d.wrong[1]);
    printf("keys moved: %zu/%zu = %.4f (mcr_diff_moved %.4f), %zu of them to the new server\n",
           pub.keys_moved, d.nkeys, key_frac, pub.moved, pub.moved_to_added);
    for (size_t i = 0; i < mcr_pool_server_count(d.pool); i++) {
        mcr_server_stats st;
        if (mcr_pool_server_stats(d.pool, i, &st) == MCR_OK)
            printf("  %s: %" PRIu64 " requests, %" PRIu64 " hits, %" PRIu64 " misses, %" PRIu64
                   " errors, p99 %.0f us\n",
                   st.id, st.requests, st.hits, st.misses, st.errors, st.p99_us);
    }
    printf("epoch %" PRIu64 " -> %" PRIu64 "\n", d.first_epoch, epoch);

    /* What stable-ketama and a correct pool guarantee. The keys sample the
     * hash space: their fraction may differ from the exact one by a few
     * standard deviations, sqrt(p(1-p)/n) <= 0.5/sqrt(n); 5 are allowed. */
    double slack = 5 * 0.5 / sqrt((double)d.nkeys);
    int ok = !d.failed && errors == 0 && epoch > d.first_epoch && pub.new_epoch == epoch &&
             d.answered[1] > 0 && d.misses[0] == 0 && d.misses[1] == d.misses_added &&
             d.wrong[0] + d.wrong[1] == 0 && pub.keys_moved > 0 &&
             pub.moved_to_added == pub.keys_moved && pub.load_errors == 0 &&
             key_frac > pub.moved - slack && key_frac < pub.moved + slack;
    if (!ok)
        fprintf(stderr, "watch_membership: a check failed\n");
    status = ok ? 0 : 1;

out:
    mcr_watcher_free(watcher); /* before the router; stops its thread */
    if (d.tick != NULL)
        event_free(d.tick);
    mcr_pool_free(d.pool);
    if (d.base != NULL)
        event_base_free(d.base);
    mcr_router_free(d.router);
    mcr_config_free(tmpl);
    free(d.keys);
    free(d.lens);
    pthread_mutex_destroy(&d.pub.lock);
    unlink(d.tmp_path);
    unlink(path);
    rmdir(dir);
    return status;
}
