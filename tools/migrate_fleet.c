/* SPDX-License-Identifier: BSD-3-Clause */
/* migrate_fleet.c: mcroute migrate --etcd URLS --pool NAME NEW: a migration recorded in etcd, run step by step (planned, copying, switched, grace, closing, done), each step waiting for every registered client; resumed by running it again; --abort rolls back. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mcroute.h"
#include "mcroute_fleet.h"
#include "mcroute_migrate.h"
#include "mcroute_snapshot.h"

#include "cli.h"

/* Defaults of --grace and --wait, ms. */
#define GRACE_MS 60000u
#define WAIT_MS 30000u
/* The migration lock's lease, s: a run that dies frees the lock that
 * long after (a run that finds it held waits that long, and 2 s more). */
#define LOCK_TTL_S 3u
/* The most often the progress is written to the record, ms. */
#define PROGRESS_MS 1000u
/* How often the clients are looked at while a step waits, ms. */
#define POLL_MS 100

/* Set from the signal handlers: the copy's stop flag, and the waits'. */
static volatile sig_atomic_t g_stop;
_Static_assert(sizeof(sig_atomic_t) == sizeof(int), "the stop flag is read as an int");

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

/* The lock held, released at exit whatever the path (cli_die included). */
static mcr_fleet_lock *g_lock;

static void release_lock(void)
{
    mcr_fleet_migration_unlock(g_lock);
    g_lock = NULL;
}

/* A client that had not adopted a step in time. */
typedef struct laggard {
    char id[MCR_FLEET_NAME_MAX + 1];
    char host[800]; /* an agent names the processes behind it there */
    mcr_migration_phase phase;
    uint64_t epoch;
} laggard;

#define MAX_STEPS 8
#define MAX_LAGGARDS 64

/* One run. */
typedef struct ctx {
    mcr_fleet_options o;
    mcr_migration m;
    bool json;
    unsigned wait_ms;
    /* what happened, for the summary */
    bool resumed;
    mcr_migration_phase resumed_at;
    struct step {
        mcr_migration_phase phase;
        size_t clients;
        double seconds;
    } steps[MAX_STEPS];
    size_t nsteps;
    bool copied;
    mcr_migrate_report rep;
    laggard lag[MAX_LAGGARDS];
    size_t nlag, nlag_total, nclients;
    /* the copy's progress writes */
    uint64_t last_write_ms;
    int progress_rc;
    mcr_error progress_err;
} ctx;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void nap(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !g_stop)
        ;
}

/* A line of the step-by-step output (not with --json). */
static void say(const ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(const ctx *c, const char *fmt, ...)
{
    if (c->json)
        return;
    va_list ap;
    va_start(ap, fmt);
    cli_progress_clear();
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

/* ------------------------------------------------------------ the summary */

static void json_str(const char *s)
{
    cli_json_string(stdout, s, strlen(s));
}

/* The --json object (every exit after the lock), with `result` "done",
 * "aborted" or "failed" and the message. */
static void print_json(const ctx *c, const char *result, const char *message)
{
    const mcr_migration *m = &c->m;
    fputs("{\"pool\": ", stdout);
    json_str(c->o.pool);
    fputs(", \"id\": ", stdout);
    json_str(m->id);
    fputs(", \"result\": ", stdout);
    json_str(result);
    printf(", \"phase\": \"%s\", \"rollback\": %s, \"from_epoch\": %llu, \"to_epoch\": %llu, "
           "\"warm\": %s, \"grace_ms\": %llu, \"resumed\": %s",
           mcr_migration_phase_name(m->phase), m->rollback ? "true" : "false",
           (unsigned long long)(m->from ? mcr_snapshot_epoch(m->from) : 0),
           (unsigned long long)(m->to ? mcr_snapshot_epoch(m->to) : 0),
           m->warm ? "true" : "false", (unsigned long long)m->grace_ms,
           c->resumed ? "true" : "false");
    if (c->resumed)
        printf(", \"resumed_at\": \"%s\"", mcr_migration_phase_name(c->resumed_at));
    fputs(", \"steps\": [", stdout);
    for (size_t i = 0; i < c->nsteps; i++)
        printf("%s{\"phase\": \"%s\", \"clients\": %zu, \"seconds\": %.3f}", i ? ", " : "",
               mcr_migration_phase_name(c->steps[i].phase), c->steps[i].clients,
               c->steps[i].seconds);
    fputs("], \"copy\": ", stdout);
    if (c->copied) {
        const mcr_migrate_report *r = &c->rep;
        printf("{\"scanned\": %llu, \"moved\": %llu, \"copied\": %llu, \"skipped\": "
               "{\"present\": %llu, \"expired\": %llu, \"gone\": %llu}, \"failed\": %llu, "
               "\"refused\": %llu, \"evicted\": %llu, \"destinations\": %zu, "
               "\"undone\": %llu, \"verified\": %llu, \"removed\": %llu, "
               "\"seconds\": %.3f, \"keys_per_s\": %.1f}",
               (unsigned long long)r->scanned, (unsigned long long)r->moved,
               (unsigned long long)r->copied, (unsigned long long)r->skipped_present,
               (unsigned long long)r->skipped_expired, (unsigned long long)r->skipped_gone,
               (unsigned long long)r->failed, (unsigned long long)r->refused,
               (unsigned long long)r->evicted, r->ndestinations,
               (unsigned long long)r->undone, (unsigned long long)r->verified,
               (unsigned long long)r->removed, r->seconds,
               r->seconds > 0 ? (double)r->copied / r->seconds : 0.0);
    } else {
        fputs("null", stdout);
    }
    printf(", \"backlog\": %llu, \"keys_per_s\": %.1f, \"clients\": %zu, \"laggards\": [",
           (unsigned long long)m->progress.backlog, m->progress.keys_per_s, c->nclients);
    for (size_t i = 0; i < c->nlag; i++) {
        fputs(i ? ", {\"id\": " : "{\"id\": ", stdout);
        json_str(c->lag[i].id);
        fputs(", \"host\": ", stdout);
        json_str(c->lag[i].host);
        printf(", \"phase\": \"%s\", \"epoch\": %llu}", mcr_migration_phase_name(c->lag[i].phase),
               (unsigned long long)c->lag[i].epoch);
    }
    printf("], \"laggards_total\": %zu, \"message\": ", c->nlag_total);
    json_str(message);
    fputs("}\n", stdout);
}

/* Stop here: the record stays as it is (a later run resumes), the reason
 * on stderr (and in --json), exit 1. */
static int give_up(ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int give_up(ctx *c, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    cli_progress_end();
    if (c->json)
        print_json(c, "failed", msg);
    int status = cli_finish_output();
    fprintf(stderr, "%s: migrate: %s\n", cli_progname, msg);
    (void)status;
    release_lock();
    mcr_migration_clear(&c->m);
    mcr_migrate_report_clear(&c->rep);
    return EXIT_FAILED;
}

/* ------------------------------------------------------------ steps */

/* Write the record (compare-and-swap): EXIT_SUCCESS, or give_up()'s status. */
static int write_record(ctx *c, mcr_migration_phase phase, const char *message)
{
    mcr_error err;
    c->m.phase = phase;
    snprintf(c->m.message, sizeof(c->m.message), "%s", message);
    int rc = mcr_fleet_migration_write(&c->o, &c->m, &err);
    if (rc != MCR_OK)
        return give_up(c, "writing the migration record (phase %s): %s",
                       mcr_migration_phase_name(phase), err.message);
    return EXIT_SUCCESS;
}

/* Whether client `cl` has adopted `phase` of the migration (and, when
 * epoch is not 0, that epoch). */
static bool adopted(const ctx *c, const mcr_fleet_client *cl, mcr_migration_phase phase,
                    uint64_t epoch)
{
    return strcmp(cl->migration_id, c->m.id) == 0 && cl->migration_phase == phase &&
           cl->migration_to_epoch == mcr_snapshot_epoch(c->m.to) && cl->epoch >= epoch;
}

/* Wait until every registered client has adopted `phase` (and `epoch`),
 * at most --wait; then report the step, or give up naming the laggards. */
static int wait_step(ctx *c, mcr_migration_phase phase, uint64_t epoch)
{
    uint64_t start = now_ms(), deadline = start + c->wait_ms;
    for (;;) {
        mcr_fleet_client *cl = NULL;
        size_t n = 0, late = 0;
        mcr_error err;
        int rc = mcr_fleet_clients(&c->o, &cl, &n, &err);
        if (rc != MCR_OK)
            return give_up(c, "step %s: reading the clients: %s", mcr_migration_phase_name(phase),
                           err.message);
        for (size_t i = 0; i < n; i++)
            late += !adopted(c, &cl[i], phase, epoch);
        c->nclients = n;
        if (late == 0) {
            mcr_fleet_clients_free(cl, n);
            if (c->nsteps < MAX_STEPS) {
                struct step *s = &c->steps[c->nsteps++];
                s->phase = phase;
                s->clients = n;
                s->seconds = (double)(now_ms() - start) / 1000.0;
            }
            if (epoch != 0)
                say(c, "%s: epoch %llu, adopted by %zu clients", mcr_migration_phase_name(phase),
                    (unsigned long long)epoch, n);
            else
                say(c, "%s: adopted by %zu clients", mcr_migration_phase_name(phase), n);
            return EXIT_SUCCESS;
        }
        if (now_ms() >= deadline || g_stop) {
            char list[600] = "";
            size_t used = 0;
            c->nlag = 0;
            c->nlag_total = late;
            for (size_t i = 0; i < n; i++) {
                if (adopted(c, &cl[i], phase, epoch))
                    continue;
                if (c->nlag < MAX_LAGGARDS) {
                    laggard *l = &c->lag[c->nlag++];
                    snprintf(l->id, sizeof(l->id), "%s", cl[i].id);
                    snprintf(l->host, sizeof(l->host), "%s", cl[i].host);
                    l->phase = strcmp(cl[i].migration_id, c->m.id) == 0 ? cl[i].migration_phase
                                                                       : MCR_MIGRATION_NONE;
                    l->epoch = cl[i].epoch;
                }
                if (used < sizeof(list) - 1)
                    used += (size_t)snprintf(list + used, sizeof(list) - used,
                                             "%s%s (%s: %s, epoch %llu)", used ? ", " : "",
                                             cl[i].id, cl[i].host,
                                             strcmp(cl[i].migration_id, c->m.id) == 0
                                                 ? mcr_migration_phase_name(cl[i].migration_phase)
                                                 : "not this migration",
                                             (unsigned long long)cl[i].epoch);
            }
            mcr_fleet_clients_free(cl, n);
            if (g_stop)
                return give_up(c, "interrupted in step %s (%zu of %zu clients not there yet)",
                               mcr_migration_phase_name(phase), late, n);
            return give_up(c,
                           "step %s: %zu of %zu clients have not adopted it within %.1f s: %s; "
                           "the migration stays in phase %s (run the command again to resume, "
                           "or --abort)",
                           mcr_migration_phase_name(phase), late, n, c->wait_ms / 1000.0, list,
                           mcr_migration_phase_name(c->m.phase));
        }
        mcr_fleet_clients_free(cl, n);
        nap(POLL_MS);
    }
}

/* Write `phase` and wait for the clients to adopt it. */
static int step(ctx *c, mcr_migration_phase phase, const char *message)
{
    int rc = write_record(c, phase, message);
    return rc != EXIT_SUCCESS ? rc : wait_step(c, phase, 0);
}

static void record_progress(ctx *c, uint64_t scanned, uint64_t moved, uint64_t copied,
                            uint64_t skipped, uint64_t failed, double kps)
{
    mcr_migration_progress *p = &c->m.progress;
    p->scanned = scanned;
    p->moved = moved;
    p->copied = copied;
    p->skipped = skipped;
    p->failed = failed;
    uint64_t done = copied + skipped + failed;
    p->backlog = moved > done ? moved - done : 0;
    p->keys_per_s = kps >= 0 ? kps : 0;
}

/* The copy's progress: a terminal line, and the record at most once a
 * second (a conflict, another writer, stops the copy). */
static void on_progress(const mcr_migrate_progress *p, void *arg)
{
    ctx *c = arg;
    char line[200];
    snprintf(line, sizeof(line),
             "%s migrate: %zu/%zu %.40s: moved %llu, copied %llu, skipped %llu, failed %llu "
             "(%.0f keys/s)",
             cli_progname, p->source, p->nsources, p->server ? p->server : "",
             (unsigned long long)p->moved, (unsigned long long)p->copied,
             (unsigned long long)p->skipped, (unsigned long long)p->failed, p->keys_per_s);
    if (!c->json)
        cli_progress_show(line);
    uint64_t now = now_ms();
    if (c->last_write_ms != 0 && now - c->last_write_ms < PROGRESS_MS)
        return;
    c->last_write_ms = now;
    record_progress(c, p->scanned, p->moved, p->copied, p->skipped, p->failed, p->keys_per_s);
    snprintf(c->m.message, sizeof(c->m.message), "copying: %.100s", p->server ? p->server : "");
    mcr_error err;
    int rc = mcr_fleet_migration_write(&c->o, &c->m, &err);
    if (rc == MCR_ERR_STALE) {
        c->progress_rc = rc;
        c->progress_err = err;
        g_stop = 1;
    }
}

/* The copy, from the record's `from` to its `to`. */
static int copy(ctx *c, double rate, unsigned timeout_ms)
{
    mcr_migrate_options mo;
    mcr_error err;
    mcr_migrate_options_init(&mo);
    mo.rate = rate;
    if (timeout_ms != 0)
        mo.timeout_ms = timeout_ms;
    mo.progress = on_progress;
    mo.progress_arg = c;
    mo.stop = (const volatile int *)&g_stop;
    if (!c->json)
        cli_progress_start("migrate", 0, false);
    int rc = mcr_migrate_run(c->m.from, c->m.to, &mo, &c->rep, &err);
    cli_progress_end();
    c->copied = true;
    const mcr_migrate_report *r = &c->rep;
    uint64_t skipped = r->skipped_present + r->skipped_expired + r->skipped_gone;
    double kps = r->seconds > 0 ? (double)r->copied / r->seconds : 0.0;
    record_progress(c, r->scanned, r->moved, r->copied, skipped, r->failed, kps);
    if (c->progress_rc != MCR_OK)
        return give_up(c, "the copy was stopped: %s", c->progress_err.message);
    char msg[256];
    if (rc != MCR_OK) {
        for (size_t i = 0; i < r->nsources; i++)
            if (r->sources[i].status != MCR_OK)
                fprintf(stderr, "%s: migrate: %s\n", cli_progname, r->sources[i].message);
        /* the destinations lacking room is the copy's failure (keys copied
         * may be gone): not switched either */
        bool room = r->room_message[0] != '\0' && strstr(err.message, r->room_message) != NULL;
        snprintf(c->m.message, sizeof(c->m.message), "copy failed: %.240s",
                 room ? r->room_message : err.message);
        mcr_error e2;
        (void)mcr_fleet_migration_write(&c->o, &c->m, &e2); /* the counts, the reason */
        if (room)
            return give_up(c, "%s; the migration stays in phase copying, not switched (run the "
                              "command again once they have room: the copy never overwrites; "
                              "or --abort)",
                           r->room_message);
        if (r->room_message[0] != '\0')
            fprintf(stderr, "%s: migrate: %s\n", cli_progname, r->room_message);
        return give_up(c, "%s; %llu of %llu moved keys failed; the migration stays in phase "
                          "copying (run the command again to resume: the copy never overwrites)",
                       err.message, (unsigned long long)r->failed, (unsigned long long)r->moved);
    }
    say(c,
        "copy: scanned %llu, moved %llu, copied %llu, skipped %llu (present %llu, expired %llu, "
        "gone %llu), failed %llu in %.1f s",
        (unsigned long long)r->scanned, (unsigned long long)r->moved,
        (unsigned long long)r->copied, (unsigned long long)skipped,
        (unsigned long long)r->skipped_present, (unsigned long long)r->skipped_expired,
        (unsigned long long)r->skipped_gone, (unsigned long long)r->failed, r->seconds);
    say(c, "checked first: %llu keys at the new owners kept (equal to the old owner's), "
           "%llu removed (older); %llu copies undone (written meanwhile)",
        (unsigned long long)r->verified, (unsigned long long)r->removed,
        (unsigned long long)r->undone);
    snprintf(msg, sizeof(msg), "copied %llu of %llu moved keys", (unsigned long long)r->copied,
             (unsigned long long)r->moved);
    return write_record(c, MCR_MIGRATION_COPYING, msg);
}

/* The switch, and the wait for every client at the new epoch. */
static int do_switch(ctx *c)
{
    mcr_error err;
    snprintf(c->m.message, sizeof(c->m.message), "switched to epoch %llu",
             (unsigned long long)mcr_snapshot_epoch(c->m.to));
    int rc = mcr_fleet_migration_switch(&c->o, &c->m, &err);
    if (rc != MCR_OK)
        return give_up(c, "the switch: %s", err.message);
    return wait_step(c, MCR_MIGRATION_SWITCHED, mcr_snapshot_epoch(c->m.to));
}

/* ------------------------------------------------------------ the run */

/* Take the lock; a crashed run's lock lapses with its lease, so a busy
 * lock is tried again for that long before the run is refused. */
static void take_lock(const mcr_fleet_options *o)
{
    char owner[200], hn[100] = "unknown";
    gethostname(hn, sizeof(hn) - 1);
    snprintf(owner, sizeof(owner), "%s pid %ld: mcroute migrate", hn, (long)getpid());
    uint64_t deadline = now_ms() + (LOCK_TTL_S + 2u) * 1000u;
    bool said = false;
    for (;;) {
        mcr_error err;
        int rc = mcr_fleet_migration_lock(o, owner, LOCK_TTL_S, &g_lock, &err);
        if (rc == MCR_OK)
            break;
        if (rc != MCR_ERR_BUSY)
            cli_die_status(rc, "migrate: %s", err.message);
        if (now_ms() >= deadline || g_stop) {
            fprintf(stderr, "%s: migrate: %s: refused (a run that died frees it within %u s)\n",
                    cli_progname, err.message, LOCK_TTL_S);
            exit(EXIT_FAILED);
        }
        if (!said)
            fprintf(stderr, "%s: migrate: %s; waiting up to %u s for it (a run that died)\n",
                    cli_progname, err.message, LOCK_TTL_S + 2u);
        said = true;
        nap(250);
    }
    atexit(release_lock);
}

/* NEW as a snapshot, and whether its states count (a snapshot file). */
static mcr_snapshot *target_of(const char *arg, const cli_source *src, unsigned *flags)
{
    FILE *f = fopen(arg, "r");
    *flags = 0;
    if (f != NULL) {
        char head[20] = "";
        size_t n = fread(head, 1, sizeof(head) - 1, f);
        fclose(f);
        head[n] = '\0';
        if (strncmp(head, "mcroute-snapshot", 16) == 0 || strncmp(head, "mcroute-state ", 14) == 0)
            *flags = MCR_CHANGES_STATES;
    }
    return cli_operand_snapshot("migrate", arg, src);
}

/* Whether the servers of `target` are those of the record's `to`. */
static bool same_servers(const mcr_snapshot *to, const mcr_snapshot *target, unsigned flags)
{
    mcr_changes *ch = NULL;
    size_t n = 1;
    mcr_error err;
    if (mcr_changes_between(to, target, flags, &ch, &n, &err) != MCR_OK)
        return false;
    mcr_changes_free(ch);
    return n == 0;
}

/* The rollback of a migration after its switch: from the pool (its `to`)
 * to its `from` servers as the next epoch, the same id. */
static int plan_rollback(ctx *c)
{
    mcr_migration back;
    mcr_error err;
    int rc = mcr_fleet_migration_plan(&c->o, c->m.from, MCR_CHANGES_STATES, &back, &err);
    if (rc != MCR_OK)
        return give_up(c, "planning the way back: %s", err.message);
    if (mcr_snapshot_epoch(back.from) != mcr_snapshot_epoch(c->m.to) ||
        strcmp(mcr_snapshot_checksum(back.from), mcr_snapshot_checksum(c->m.to)) != 0) {
        uint64_t e = mcr_snapshot_epoch(back.from);
        mcr_migration_clear(&back);
        return give_up(c,
                       "the pool is at epoch %llu, not at the migration's epoch %llu: it was "
                       "changed after the switch; publish the old servers by hand",
                       (unsigned long long)e, (unsigned long long)mcr_snapshot_epoch(c->m.to));
    }
    memcpy(back.id, c->m.id, sizeof(back.id));
    back.rollback = 1;
    back.warm = c->m.warm;
    back.mod_revision = c->m.mod_revision;
    back.progress = (mcr_migration_progress){0};
    mcr_migration_clear(&c->m);
    c->m = back;
    say(c, "rollback: epoch %llu -> %llu (the servers of epoch before the switch)",
        (unsigned long long)mcr_snapshot_epoch(c->m.from),
        (unsigned long long)mcr_snapshot_epoch(c->m.to));
    return write_record(c, MCR_MIGRATION_COPYING, "aborted after the switch: rolling back");
}

/* The last step: done, or aborted for a rollback. */
static int the_end(ctx *c)
{
    return step(c, c->m.rollback ? MCR_MIGRATION_ABORTED : MCR_MIGRATION_DONE,
                c->m.rollback ? "aborted: rolled back" : "done");
}

/* The end, after the switch (and the grace, going forward): closing, so
 * that no client reads an old owner any more, then done (aborted for a
 * rollback), so that they stop writing there. Ending at once would let a
 * client that ended delete a key at its new owner only while another,
 * still reading misses at the old owners, finds the old copy there. */
static int finish(ctx *c)
{
    int rc = step(c, MCR_MIGRATION_CLOSING, "closing");
    return rc != EXIT_SUCCESS ? rc : the_end(c);
}

/* The way forward from the record's phase. */
static int run_forward(ctx *c, double rate, unsigned timeout_ms)
{
    int rc = EXIT_SUCCESS;
    switch (c->m.phase) {
    case MCR_MIGRATION_PLANNED:
        if ((rc = wait_step(c, MCR_MIGRATION_PLANNED, 0)) != EXIT_SUCCESS)
            return rc;
        if ((rc = step(c, MCR_MIGRATION_COPYING, "copying")) != EXIT_SUCCESS)
            return rc;
        /* fall through */
    case MCR_MIGRATION_COPYING:
        if (c->nsteps == 0 && (rc = wait_step(c, MCR_MIGRATION_COPYING, 0)) != EXIT_SUCCESS)
            return rc;
        if ((rc = copy(c, rate, timeout_ms)) != EXIT_SUCCESS)
            return rc;
        if ((rc = do_switch(c)) != EXIT_SUCCESS)
            return rc;
        /* fall through */
    case MCR_MIGRATION_SWITCHED:
        if (c->nsteps == 0 &&
            (rc = wait_step(c, MCR_MIGRATION_SWITCHED, mcr_snapshot_epoch(c->m.to))) !=
                EXIT_SUCCESS)
            return rc;
        if (c->m.rollback)
            return finish(c);
        c->m.grace_until = unix_ms() + c->m.grace_ms;
        if ((rc = step(c, MCR_MIGRATION_GRACE, "grace")) != EXIT_SUCCESS)
            return rc;
        /* fall through */
    case MCR_MIGRATION_GRACE:
        if (c->nsteps == 0 && (rc = wait_step(c, MCR_MIGRATION_GRACE, 0)) != EXIT_SUCCESS)
            return rc;
        for (uint64_t now = unix_ms(); now < c->m.grace_until && !g_stop; now = unix_ms()) {
            uint64_t left = c->m.grace_until - now;
            nap(left > 500 ? 500u : (unsigned)left);
        }
        if (g_stop)
            return give_up(c, "interrupted in the grace period (run the command again to "
                              "finish it)");
        return finish(c);
    case MCR_MIGRATION_CLOSING:
        if (c->nsteps == 0 && (rc = wait_step(c, MCR_MIGRATION_CLOSING, 0)) != EXIT_SUCCESS)
            return rc;
        return the_end(c);
    default:
        return give_up(c, "the migration is %s already", mcr_migration_phase_name(c->m.phase));
    }
}

int cli_migrate_fleet(const cli_source *src, int nargs, char **args)
{
    ctx c;
    mcr_error err;
    memset(&c, 0, sizeof(c));
    if (src->etcd == NULL)
        cli_die("migrate: --pool, --etcd-prefix and --etcd-timeout apply only to --etcd");
    if (src->dry_run)
        cli_die("migrate: --dry-run is not for --etcd (mcroute diff --etcd shows what moves, "
                "mcroute migrate OLD NEW --dry-run counts the keys)");
    if (src->abort_migration && nargs != 0)
        cli_die("migrate: --abort takes no NEW: the migration in etcd says what to abort");
    if (!src->abort_migration && nargs != 1)
        cli_die("migrate: with --etcd, expected NEW only (a server list, a server file or a "
                "snapshot file): the migration goes from the pool's current servers to NEW");
    cli_fleet_options("migrate", src, &c.o);
    c.json = src->json;
    c.wait_ms = src->wait ? cli_parse_seconds("migrate", "--wait", src->wait) : WAIT_MS;
    uint64_t grace = GRACE_MS;
    if (src->grace != NULL)
        grace = strcmp(src->grace, "0") == 0 ? 0
                                             : cli_parse_seconds("migrate", "--grace", src->grace);
    double rate = src->rate ? cli_parse_rate(src->rate) : 0;
    unsigned timeout_ms = src->timeout ? cli_parse_ms("migrate", "--timeout", src->timeout) : 0;
    unsigned flags = 0;
    mcr_snapshot *target = nargs == 1 ? target_of(args[0], src, &flags) : NULL;
    free(src->behaviors);

    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    take_lock(&c.o);
    int rc = mcr_fleet_migration_read(&c.o, &c.m, &err);
    if (rc != MCR_OK && rc != MCR_ERR_EMPTY) {
        mcr_snapshot_unref(target);
        cli_die_status(rc, "migrate: %s", err.message);
    }
    bool active = rc == MCR_OK && c.m.phase != MCR_MIGRATION_DONE &&
                  c.m.phase != MCR_MIGRATION_ABORTED;
    if (src->abort_migration) {
        if (!active)
            cli_die("migrate --abort: no migration in progress in pool \"%s\"%s%s", c.o.pool,
                    rc == MCR_OK ? ": the last one is " : "",
                    rc == MCR_OK ? mcr_migration_phase_name(c.m.phase) : "");
        c.resumed = true;
        c.resumed_at = c.m.phase;
        say(&c, "migration %s: abort in phase %s%s", c.m.id, mcr_migration_phase_name(c.m.phase),
            c.m.rollback ? " (rolling back already)" : "");
        if (c.m.rollback) {
            rc = run_forward(&c, rate, timeout_ms); /* the way back, resumed */
        } else if (c.m.phase == MCR_MIGRATION_PLANNED || c.m.phase == MCR_MIGRATION_COPYING) {
            rc = step(&c, MCR_MIGRATION_ABORTED, "aborted");
        } else {
            rc = plan_rollback(&c);
            if (rc == EXIT_SUCCESS)
                rc = run_forward(&c, rate, timeout_ms);
        }
        if (rc != EXIT_SUCCESS)
            return rc;
    } else if (active) {
        if (c.m.rollback || !same_servers(c.m.to, target, flags)) {
            char msg[400];
            snprintf(msg, sizeof(msg),
                     "pool \"%s\" has migration %s in phase %s%s, to epoch %llu with other "
                     "servers than NEW: run it with its own target to finish it, or --abort",
                     c.o.pool, c.m.id, mcr_migration_phase_name(c.m.phase),
                     c.m.rollback ? " (rolling back an abort: finish it with --abort)" : "",
                     (unsigned long long)mcr_snapshot_epoch(c.m.to));
            mcr_snapshot_unref(target);
            mcr_migration_clear(&c.m);
            cli_die("migrate: %s", msg);
        }
        mcr_snapshot_unref(target);
        c.resumed = true;
        c.resumed_at = c.m.phase;
        if (src->grace != NULL)
            c.m.grace_ms = grace;
        say(&c, "migration %s: epoch %llu -> %llu, resumed in phase %s", c.m.id,
            (unsigned long long)mcr_snapshot_epoch(c.m.from),
            (unsigned long long)mcr_snapshot_epoch(c.m.to), mcr_migration_phase_name(c.m.phase));
        /* in control from here: a write of the run that died fails now */
        if ((rc = write_record(&c, c.m.phase, "resumed")) != EXIT_SUCCESS)
            return rc;
        if ((rc = run_forward(&c, rate, timeout_ms)) != EXIT_SUCCESS)
            return rc;
    } else {
        uint64_t over = rc == MCR_OK ? c.m.mod_revision : 0; /* a finished one */
        mcr_migration_clear(&c.m);
        rc = mcr_fleet_migration_plan(&c.o, target, flags, &c.m, &err);
        mcr_snapshot_unref(target);
        if (rc != MCR_OK)
            cli_die_status(rc == MCR_ERR_EMPTY ? MCR_ERR_INVALID : rc, "migrate: %s",
                           err.message);
        c.m.mod_revision = over;
        c.m.warm = 1; /* as before; the record's "warm" has no effect any more */
        c.m.grace_ms = grace;
        say(&c, "migration %s: epoch %llu -> %llu", c.m.id,
            (unsigned long long)mcr_snapshot_epoch(c.m.from),
            (unsigned long long)mcr_snapshot_epoch(c.m.to));
        if ((rc = write_record(&c, MCR_MIGRATION_PLANNED, "planned")) != EXIT_SUCCESS)
            return rc;
        if ((rc = run_forward(&c, rate, timeout_ms)) != EXIT_SUCCESS)
            return rc;
    }
    const char *result = c.m.phase == MCR_MIGRATION_ABORTED ? "aborted" : "done";
    if (c.json)
        print_json(&c, result, "");
    else
        say(&c, "migration %s %s", c.m.id, result);
    release_lock();
    mcr_migration_clear(&c.m);
    mcr_migrate_report_clear(&c.rep);
    return cli_finish_output();
}
