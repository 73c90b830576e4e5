/* SPDX-License-Identifier: BSD-3-Clause */
/* watcher.c: reloads a server file or snapshot file when it changes (polled, debounced) and publishes it through a router. */

/*
 * Why polling. inotify would wake us sooner, but it is Linux-only, misses
 * changes on NFS and other network filesystems (where server lists often
 * live), and needs the directory watched to follow renames. A stat() every
 * few hundred milliseconds costs nothing and sees every kind of
 * replacement: a rename over the file (inode), a rewrite in place (size,
 * mtime, ctime), a touch.
 *
 * Debounce. A change is acted on only once the file's identity has stayed
 * the same for the settle time, so a file being written by a slow editor or
 * copied over the network is read once, complete. The identity is checked
 * again around the read: a file that changed while being read is read again
 * later. Nothing it holds can replace the current snapshot unless the whole
 * file parses (server file) or its checksum matches (snapshot file).
 *
 * Limit: file times have the kernel's clock-tick granularity, so a rewrite
 * in place that keeps the size, within one tick of the version last read,
 * goes unnoticed until the next change. A replacement by rename() always
 * shows (a new inode), which is one more reason to replace files that way.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "placement/placement_internal.h"
#include "mcroute_router.h"

/* A publish that lost a race with another writer is redone against the new
 * current snapshot this many times before the file is reported. */
#define PUBLISH_RETRIES 3
/* Reads of a file that keeps changing while mcr_watcher_new() reads it. */
#define INITIAL_READ_TRIES 5

/* What identifies one version of the file. */
typedef struct file_sig {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
} file_sig;

struct mcr_watcher {
    mcr_router *router;
    char *path;
    mcr_watch_format format;
    mcr_watch_options opt;

    pthread_t thread;
    pthread_mutex_t mu; /* guards stop, free_on_exit; with cv, wakes the thread */
    pthread_cond_t cv;
    int stop;
    int free_on_exit; /* freed from its own report callback: the thread frees */

    /* Thread-only state. */
    file_sig done;        /* the version last loaded or refused */
    int have_done;
    file_sig pending;     /* a new version seen, waiting to settle */
    int have_pending;
    uint64_t pending_since_ms;
    int stat_errno;       /* errno of the last stat() failure reported, 0: none */
};

/* ------------------------------------------------------------ small helpers */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sig_of(const struct stat *st, file_sig *s)
{
    memset(s, 0, sizeof *s);
    s->dev = st->st_dev;
    s->ino = st->st_ino;
    s->size = st->st_size;
    s->mtime = st->st_mtim;
    s->ctime = st->st_ctim;
}

static int sig_eq(const file_sig *a, const file_sig *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
           a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}

static char *dup_n(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p != NULL) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

/* ------------------------------------------------------------ server files */

/* The servers of a server file are read by mcr_config_load_server_file(),
 * the parser of the CLI, so that the watcher accepts exactly the files the
 * rest of mcroute accepts, with its messages (file, line, problem). To read
 * the servers back, the config is turned into a snapshot in "modula" mode
 * (no continuum to build): its server descriptions are the file's. */
static int parse_server_file(const char *path, mcr_snapshot **out, mcr_error *err)
{
    mcr_config *cfg = mcr_config_new();
    int rc;

    if (cfg == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "%s: out of memory", path);
    rc = mcr_config_set_mode(cfg, MCR_MODE_MODULA);
    if (rc == MCR_OK)
        rc = mcr_config_load_server_file(cfg, path, err);
    if (rc == MCR_OK)
        rc = mcr_snapshot_new(cfg, 0, out, err);
    mcr_config_free(cfg);
    return rc;
}

/* The first snapshot of an empty router: the template's parameters, the
 * file's servers (ids and zones included), epoch 1. */
static int bootstrap(const mcr_config *tmpl, const mcr_snapshot *file, mcr_snapshot **out,
                     mcr_error *err)
{
    size_t n = mcr_snapshot_server_count(file);
    mcr_config *cfg = mcr__config_copy_params(tmpl); /* the caller's stays as it is */
    mcr_server_desc f;
    int rc = MCR_OK;

    if (cfg == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "mcr_watcher_new: out of memory");
    for (size_t i = 0; i < n && rc == MCR_OK; i++) {
        mcr_snapshot_server(file, i, &f);
        f.state = MCR_STATE_ACTIVE;
        rc = mcr_config_add_server_desc(cfg, &f, err);
    }
    if (rc == MCR_OK)
        rc = mcr_snapshot_new(cfg, 1, out, err);
    mcr_config_free(cfg);
    return rc;
}

/* ------------------------------------------------------------ loading */

/* Outcome of one load. */
typedef enum load_result {
    LOAD_DONE,    /* loaded (published or no change) or refused: wait for a change */
    LOAD_CHANGED  /* the file changed while being read: try again after it settles */
} load_result;

/* Is the file still the version `sig` describes? */
static int unchanged(const char *path, const file_sig *sig)
{
    struct stat st;
    file_sig now;

    if (stat(path, &st) != 0)
        return 0;
    sig_of(&st, &now);
    return sig_eq(&now, sig);
}

/* Load the file (whose identity was `sig` when it settled) and publish what
 * it holds. *published tells whether a snapshot was published. */
static int load_server_file(mcr_watcher *w, const mcr_config *tmpl, const file_sig *sig,
                            load_result *res, int *published, mcr_error *err)
{
    mcr_snapshot *file = NULL;
    int rc;

    *res = LOAD_DONE;
    rc = parse_server_file(w->path, &file, err);
    if (!unchanged(w->path, sig)) {
        mcr_snapshot_unref(file);
        *res = LOAD_CHANGED;
        return MCR_OK;
    }
    if (rc != MCR_OK)
        return rc;

    for (int attempt = 0;; attempt++) {
        /* The published snapshot: a local state is no file's business,
         * and the router re-applies it to what is published. */
        mcr_snapshot *base = mcr_router_published(w->router), *next = NULL;
        mcr_changes *ch = NULL;
        size_t n = 0;

        if (base == NULL) {
            if (tmpl == NULL || mcr_config_server_count(tmpl) != 0)
                rc = mcr__error(err, MCR_ERR_INVALID,
                                "%s: the router holds no snapshot, and no template config "
                                "without servers was given to build the first one",
                                w->path);
            else
                rc = bootstrap(tmpl, file, &next, err);
            tmpl = NULL; /* used once */
        } else {
            rc = mcr_changes_between(base, file, 0, &ch, &n, err);
            if (rc == MCR_OK && n > 0)
                rc = mcr_snapshot_apply(base, ch, &next, err);
            mcr_changes_free(ch);
        }
        if (rc == MCR_OK && next != NULL) {
            /* Built above, outside the router's writer mutex; the publish
             * holds it only for the swap, the diff and the hooks, and does
             * not wait for a grace period, so a pool ejecting meanwhile
             * (mcr_router_set_local_state() with MCR_ROUTER_NOWAIT) is not held up. */
            rc = mcr_router_publish(w->router, next, err);
            *published = rc == MCR_OK;
        }
        mcr_snapshot_unref(next);
        mcr_snapshot_unref(base);
        /* Another writer published since `base` was taken: redo against
         * the new current snapshot. */
        if (rc == MCR_ERR_STALE && base != NULL && attempt < PUBLISH_RETRIES)
            continue;
        break;
    }
    mcr_snapshot_unref(file);
    return rc;
}

static int load_snapshot_file(mcr_watcher *w, const file_sig *sig, load_result *res,
                              int *published, mcr_error *err)
{
    mcr_snapshot *snap = NULL, *cur;
    int rc;

    *res = LOAD_DONE;
    /* The current snapshot is compared below rather than by the loader, so
     * that the file of the snapshot in force counts as "no change". */
    rc = mcr_snapshot_load(w->path, NULL, 0, &snap, err);
    if (!unchanged(w->path, sig)) {
        mcr_snapshot_unref(snap);
        *res = LOAD_CHANGED;
        return MCR_OK;
    }
    if (rc != MCR_OK)
        return rc;
    cur = mcr_router_published(w->router); /* not the local states' checksum */
    if (cur != NULL && mcr_snapshot_epoch(snap) == mcr_snapshot_epoch(cur) &&
        strcmp(mcr_snapshot_checksum(snap), mcr_snapshot_checksum(cur)) == 0) {
        rc = MCR_OK; /* the snapshot in force */
    } else if (cur != NULL && mcr_snapshot_epoch(snap) <= mcr_snapshot_epoch(cur)) {
        rc = mcr__error(err, MCR_ERR_STALE,
                        "%s: stale snapshot: epoch %llu is not above the current epoch %llu",
                        w->path, (unsigned long long)mcr_snapshot_epoch(snap),
                        (unsigned long long)mcr_snapshot_epoch(cur));
    } else {
        rc = mcr_router_publish(w->router, snap, err);
        *published = rc == MCR_OK;
    }
    mcr_snapshot_unref(cur);
    mcr_snapshot_unref(snap);
    return rc;
}

static int load(mcr_watcher *w, const mcr_config *tmpl, const file_sig *sig, load_result *res,
                int *published, mcr_error *err)
{
    *published = 0;
    if (w->format == MCR_WATCH_SERVER_FILE)
        return load_server_file(w, tmpl, sig, res, published, err);
    return load_snapshot_file(w, sig, res, published, err);
}

/* ------------------------------------------------------------ the thread */

/* The watcher whose thread this is (NULL in other threads): how
 * mcr_watcher_free() knows it was called from a report callback. */
static _Thread_local mcr_watcher *tls_watcher;

static void report(mcr_watcher *w, int status, const mcr_error *err, int published)
{
    mcr_watch_event ev;

    if (w->opt.report == NULL)
        return;
    ev.path = w->path;
    ev.status = status;
    ev.err = status == MCR_OK ? NULL : err;
    ev.published = published;
    ev.epoch = mcr_router_epoch(w->router);
    w->opt.report(&ev, w->opt.report_arg);
}

/* One poll: notice a new version, wait for it to settle, load it. */
static void tick(mcr_watcher *w)
{
    struct stat st;
    file_sig s;
    mcr_error err = {0};
    uint64_t now = now_ms();

    if (stat(w->path, &st) != 0) {
        int e = errno;
        w->have_pending = 0;
        if (e != w->stat_errno) { /* once per kind of failure, not every poll */
            w->stat_errno = e;
            mcr__error(&err, MCR_ERR_IO, "%s: cannot stat: %s", w->path, strerror(e));
            report(w, MCR_ERR_IO, &err, 0);
        }
        return;
    }
    w->stat_errno = 0;
    sig_of(&st, &s);
    if (w->have_done && sig_eq(&s, &w->done)) {
        w->have_pending = 0;
        return;
    }
    if (!w->have_pending || !sig_eq(&s, &w->pending)) {
        w->pending = s;
        w->have_pending = 1;
        w->pending_since_ms = now;
        return;
    }
    if (now - w->pending_since_ms < w->opt.settle_ms)
        return;

    load_result res;
    int published;
    int rc = load(w, NULL, &s, &res, &published, &err);
    if (rc == MCR_OK && res == LOAD_CHANGED) {
        w->have_pending = 0; /* wait for the new version to settle */
        return;
    }
    w->have_pending = 0;
    w->done = s;
    w->have_done = 1;
    report(w, rc, &err, published);
}

static void *watch_thread(void *arg)
{
    mcr_watcher *w = arg;
    int free_self;

    tls_watcher = w;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        struct timespec deadline;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += w->opt.poll_ms / 1000;
        deadline.tv_nsec += (long)(w->opt.poll_ms % 1000) * 1000000L;
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
        while (!w->stop && pthread_cond_timedwait(&w->cv, &w->mu, &deadline) != ETIMEDOUT)
            ;
        if (w->stop)
            break;
        pthread_mutex_unlock(&w->mu);
        tick(w);
        pthread_mutex_lock(&w->mu);
    }
    free_self = w->free_on_exit;
    pthread_mutex_unlock(&w->mu);
    if (free_self) {
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        free(w->path);
        free(w);
    }
    return NULL;
}

/* ------------------------------------------------------------ public */

int mcr_watcher_new(mcr_router *router, const char *path, mcr_watch_format format,
                    const mcr_config *tmpl, const mcr_watch_options *opts, mcr_watcher **out,
                    mcr_error *err)
{
    mcr_watcher *w;
    pthread_condattr_t ca;
    int rc = MCR_OK;

    if (router == NULL || path == NULL || out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "mcr_watcher_new: NULL argument");
    if (format != MCR_WATCH_SERVER_FILE && format != MCR_WATCH_SNAPSHOT_FILE)
        return mcr__error(err, MCR_ERR_INVALID, "mcr_watcher_new: unknown format %d",
                          (int)format);
    if (opts != NULL && !mcr__zeroed(opts->reserved, sizeof(opts->reserved)))
        return mcr__error(err, MCR_ERR_INVALID,
                          "mcr_watch_options: the reserved area is not zero (fill the "
                          "struct from all-zero: mcroute.h)");
    w = calloc(1, sizeof *w);
    if (w == NULL || (w->path = dup_n(path, strlen(path))) == NULL) {
        free(w);
        return mcr__error(err, MCR_ERR_NOMEM, "mcr_watcher_new: out of memory");
    }
    w->router = router;
    w->format = format;
    if (opts != NULL)
        w->opt = *opts;
    if (w->opt.poll_ms == 0)
        w->opt.poll_ms = MCR_WATCH_POLL_MS;
    if (w->opt.settle_ms == 0)
        w->opt.settle_ms = MCR_WATCH_SETTLE_MS;

    /* The first load, here, so the caller learns at once whether the file
     * is usable. */
    for (int tries = 0;; tries++) {
        struct stat st;
        file_sig s;
        load_result res;
        int published;

        if (stat(path, &st) != 0) {
            rc = mcr__error(err, MCR_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
            break;
        }
        sig_of(&st, &s);
        rc = load(w, tmpl, &s, &res, &published, err);
        if (rc == MCR_OK && res == LOAD_CHANGED) {
            if (tries + 1 < INITIAL_READ_TRIES) {
                struct timespec nap = {0, 20 * 1000000L};
                nanosleep(&nap, NULL);
                continue;
            }
            rc = mcr__error(err, MCR_ERR_IO, "%s: keeps changing while being read", path);
        }
        if (rc == MCR_OK) {
            w->done = s;
            w->have_done = 1;
        }
        break;
    }
    if (rc == MCR_OK) {
        int e;
        if ((e = pthread_mutex_init(&w->mu, NULL)) != 0) {
            rc = mcr__error_sys(err, e, "mcr_watcher_new: cannot create a mutex");
        } else if ((e = pthread_condattr_init(&ca)) != 0) {
            pthread_mutex_destroy(&w->mu);
            rc = mcr__error_sys(err, e, "mcr_watcher_new: cannot create a condition");
        } else {
            e = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
            if (e == 0)
                e = pthread_cond_init(&w->cv, &ca);
            pthread_condattr_destroy(&ca);
            if (e == 0 && (e = pthread_create(&w->thread, NULL, watch_thread, w)) != 0)
                pthread_cond_destroy(&w->cv);
            if (e != 0) {
                pthread_mutex_destroy(&w->mu);
                rc = mcr__error_sys(err, e, "mcr_watcher_new: cannot start a thread");
            }
        }
    }
    if (rc != MCR_OK) {
        free(w->path);
        free(w);
        return rc;
    }
    *out = w;
    return MCR_OK;
}

void mcr_watcher_free(mcr_watcher *watcher)
{
    if (watcher == NULL)
        return;
    pthread_mutex_lock(&watcher->mu);
    watcher->stop = 1;
    if (tls_watcher == watcher) {
        /* From its own report callback (against the contract): joining
         * would wait for ourselves. The thread frees the watcher as it
         * leaves its loop. */
        watcher->free_on_exit = 1;
        pthread_mutex_unlock(&watcher->mu);
        pthread_detach(pthread_self());
        return;
    }
    pthread_cond_signal(&watcher->cv);
    pthread_mutex_unlock(&watcher->mu);
    pthread_join(watcher->thread, NULL);
    pthread_mutex_destroy(&watcher->mu);
    pthread_cond_destroy(&watcher->cv);
    free(watcher->path);
    free(watcher);
}
