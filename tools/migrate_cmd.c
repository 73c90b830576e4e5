/* SPDX-License-Identifier: BSD-3-Clause */
/* migrate_cmd.c: mcroute migrate OLD NEW: copy every key the change from OLD to NEW moves to its new owner (libmcroute_migrate), with a progress line, a table or JSON. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcroute.h"
#include "mcroute_migrate.h"
#include "mcroute_snapshot.h"

#include "cli.h"

const char cli_usage_migrate[] =
    "Usage: mcroute migrate OLD NEW [--rate KEYS_PER_S] [--dry-run] [--json]\n"
    "                       [--timeout MS] [--mode MODE] [--hash NAME]\n"
    "       mcroute migrate --etcd URLS --pool NAME NEW [--grace SECONDS]\n"
    "                       [--wait SECONDS] [--rate KEYS_PER_S] [--json]\n"
    "       mcroute migrate --etcd URLS --pool NAME --abort [--wait SECONDS] [--json]\n"
    "Copy every key that changing the placement from OLD to NEW moves to its new\n"
    "owner, before NEW takes traffic. OLD and NEW are each a server list, a server\n"
    "file, a snapshot file or a host's state, as for diff. Every server of OLD that\n"
    "loses keys is listed with memcached's 'lru_crawler metadump hash'; each key it\n"
    "owns in OLD that NEW places elsewhere is read from it and added to its new\n"
    "owner with its flags and expiry. A value already there is never overwritten,\n"
    "so running it again after a failure or an interruption copies what is missing.\n"
    "  --rate KEYS_PER_S  at most this many moved keys a second (default: no limit)\n"
    "  --dry-run          list and count the moved keys, copy nothing\n"
    "  --timeout MS       connect, request and dump stall timeout (default 5000)\n"
    "  --json             one JSON object instead of the table\n"
    "Prints a table, a row per server that loses keys and a total: SCANNED (keys\n"
    "it holds), MOVED, COPIED, PRESENT (already at the new owner: skipped),\n"
    "EXPIRED (skipped), GONE (no longer there when read: skipped), FAILED, and the\n"
    "server's status. With --json: {\"scanned\": N, \"stray\": N, \"moved\": N,\n"
    "\"copied\": N, \"skipped\": {\"present\": N, \"expired\": N, \"gone\": N},\n"
    "\"failed\": N, \"refused\": N, \"evicted\": N, \"destinations\": N,\n"
    "\"seconds\": F, \"keys_per_s\": F, \"dry_run\": B, \"status\": S, \"message\": M,\n"
    "\"sources\": [{\"id\": ID, \"address\": A, \"status\": S, \"message\": M, and\n"
    "the counts from scanned to refused}, ...]} (STRAY: keys a server holds that\n"
    "OLD places elsewhere, never copied; REFUSED: adds a full new owner refused,\n"
    "failed too; EVICTED: items the DESTINATIONS, the servers that gain keys,\n"
    "evicted during the run, anyone's, from their stats). A progress line is\n"
    "drawn on standard error when it is a terminal (not with --json). SIGINT or\n"
    "SIGTERM stops starting copies, lets those in flight finish and reports.\n"
    "With --etcd (a pool kept in etcd, see mcroute help members), the migration\n"
    "from the pool's servers to NEW is recorded in etcd and every process that\n"
    "follows the pool goes through it: planned, copying (writes of moving keys\n"
    "reach both owners; the keys are copied), switched (NEW is the pool's next\n"
    "epoch; a miss at a new owner is read from the old one), grace, closing (no\n"
    "more reads at the old owners; writes still reach them), done. Each\n"
    "step waits until every registered client has adopted it.\n"
    "  --grace SECONDS    how long the old owners are read after the switch\n"
    "                     (default 60; 0: none)\n"
    "  --wait SECONDS     how long a step waits for the clients (default 30);\n"
    "                     then the laggards are named and the run stops, exit 1,\n"
    "                     the migration left where it is\n"
    "  --abort            give up the pool's migration: before the switch the\n"
    "                     migration ends; after it the old servers are published\n"
    "                     as the next epoch with a migration back\n"
    "A run that stopped or died is resumed by running it again (same NEW). One run\n"
    "at a time per pool: another is refused. Prints a line per step; --json: one\n"
    "object {\"id\", \"result\" (done, aborted, failed), \"phase\", \"steps\",\n"
    "\"copy\", \"backlog\", \"laggards\", \"message\", ...}.\n"
    "Exit status: 0 when every moved key was copied or skipped for a stated reason\n"
    "and the servers that gain keys had room; 1 when a server could not be listed\n"
    "(unreachable, metadump disabled with memcached -X, a malformed line) or a key\n"
    "failed, each reported on stderr, or when the destinations lack room: they\n"
    "evicted or refused items during the copy (\"the destinations lack room:\n"
    "HOST:PORT evicted N items and refused M during the copy ...\" on stderr: give\n"
    "them more memory first); 2 on bad usage. With --etcd also 1 when a step was\n"
    "not adopted in time, the copy failed (the destinations lacking room too: the\n"
    "migration is not switched), another run holds the pool, or etcd failed; 2\n"
    "for bad input: no such pool, a record that does not verify, NEW the pool's\n"
    "servers already, or another migration in progress.\n";

/* Set from the signal handlers: the library's stop flag. */
static volatile sig_atomic_t g_stop;
_Static_assert(sizeof(sig_atomic_t) == sizeof(int), "the stop flag is read as an int");

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

/* SIGINT and SIGTERM stop the run gracefully, once: a second one acts as
 * usual (SA_RESETHAND). */
static void catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static void on_progress(const mcr_migrate_progress *p, void *arg)
{
    (void)arg;
    char line[200];
    snprintf(line, sizeof(line),
             "%s migrate: %zu/%zu %.40s %s: scanned %llu, moved %llu, copied %llu, "
             "skipped %llu, failed %llu (%.0f keys/s)",
             cli_progname, p->source, p->nsources, p->server,
             p->copying ? "copying" : "listing", (unsigned long long)p->scanned,
             (unsigned long long)p->moved, (unsigned long long)p->copied,
             (unsigned long long)p->skipped, (unsigned long long)p->failed, p->keys_per_s);
    cli_progress_show(line);
}

static const char *status_word(int status)
{
    return status == MCR_OK ? "ok" : mcr_strerror(status);
}

static void json_counts(const mcr_migrate_source *s)
{
    printf("\"scanned\": %llu, \"stray\": %llu, \"moved\": %llu, \"copied\": %llu, "
           "\"skipped\": {\"present\": %llu, \"expired\": %llu, \"gone\": %llu}, "
           "\"failed\": %llu, \"refused\": %llu, \"undone\": %llu",
           (unsigned long long)s->scanned, (unsigned long long)s->stray,
           (unsigned long long)s->moved, (unsigned long long)s->copied,
           (unsigned long long)s->skipped_present, (unsigned long long)s->skipped_expired,
           (unsigned long long)s->skipped_gone, (unsigned long long)s->failed,
           (unsigned long long)s->refused, (unsigned long long)s->undone);
}

static void print_json(const mcr_migrate_report *r, int rc, const mcr_error *err, bool dry_run)
{
    mcr_migrate_source total;
    memset(&total, 0, sizeof(total));
    total.scanned = r->scanned;
    total.stray = r->stray;
    total.moved = r->moved;
    total.copied = r->copied;
    total.skipped_present = r->skipped_present;
    total.skipped_expired = r->skipped_expired;
    total.skipped_gone = r->skipped_gone;
    total.failed = r->failed;
    total.refused = r->refused;
    total.undone = r->undone;
    const char *msg = rc == MCR_OK ? "" : err->message;
    fputs("{", stdout);
    json_counts(&total);
    printf(", \"evicted\": %llu, \"destinations\": %zu", (unsigned long long)r->evicted,
           r->ndestinations);
    printf(", \"verified\": %llu, \"removed\": %llu", (unsigned long long)r->verified,
           (unsigned long long)r->removed);
    printf(", \"seconds\": %.3f, \"keys_per_s\": %.1f, \"dry_run\": %s, \"status\": ", r->seconds,
           r->seconds > 0 ? (double)r->copied / r->seconds : 0.0, dry_run ? "true" : "false");
    cli_json_string(stdout, status_word(rc), strlen(status_word(rc)));
    fputs(", \"message\": ", stdout);
    cli_json_string(stdout, msg, strlen(msg));
    fputs(", \"sources\": [", stdout);
    for (size_t i = 0; i < r->nsources; i++) {
        const mcr_migrate_source *s = &r->sources[i];
        fputs(i ? ",\n  {\"id\": " : "\n  {\"id\": ", stdout);
        cli_json_string(stdout, s->id, strlen(s->id));
        fputs(", \"address\": ", stdout);
        cli_json_string(stdout, s->address, strlen(s->address));
        fputs(", \"status\": ", stdout);
        cli_json_string(stdout, status_word(s->status), strlen(status_word(s->status)));
        fputs(", \"message\": ", stdout);
        cli_json_string(stdout, s->message, strlen(s->message));
        fputs(", ", stdout);
        json_counts(s);
        putchar('}');
    }
    fputs(r->nsources ? "\n]}\n" : "]}\n", stdout);
}

static void table_row(int w, const char *id, const char *addr, const mcr_migrate_source *s,
                      const char *status)
{
    printf("%-*s  %-21s %9llu %9llu %9llu %8llu %8llu %6llu %7llu  %s\n", w, id, addr,
           (unsigned long long)s->scanned, (unsigned long long)s->moved,
           (unsigned long long)s->copied, (unsigned long long)s->skipped_present,
           (unsigned long long)s->skipped_expired, (unsigned long long)s->skipped_gone,
           (unsigned long long)s->failed, status);
}

static void print_table(const mcr_migrate_report *r, int rc, bool dry_run)
{
    int w = 6;
    for (size_t i = 0; i < r->nsources; i++) {
        int n = (int)strlen(r->sources[i].id);
        if (n > w)
            w = n < 60 ? n : 60;
    }
    printf("%-*s  %-21s %9s %9s %9s %8s %8s %6s %7s  %s\n", w, "SERVER", "ADDRESS", "SCANNED",
           "MOVED", "COPIED", "PRESENT", "EXPIRED", "GONE", "FAILED", "STATUS");
    for (size_t i = 0; i < r->nsources; i++)
        table_row(w, r->sources[i].id, r->sources[i].address, &r->sources[i],
                  status_word(r->sources[i].status));
    mcr_migrate_source total;
    memset(&total, 0, sizeof(total));
    total.scanned = r->scanned;
    total.moved = r->moved;
    total.copied = r->copied;
    total.skipped_present = r->skipped_present;
    total.skipped_expired = r->skipped_expired;
    total.skipped_gone = r->skipped_gone;
    total.failed = r->failed;
    table_row(w, "total", "", &total, status_word(rc));
    const char *stray = r->stray ? "; stray keys (held, placed elsewhere by OLD) not copied" : "";
    if (dry_run)
        printf("dry run: %llu keys move, nothing copied (%.1f s)%s\n",
               (unsigned long long)r->moved, r->seconds, stray);
    else
        printf("copied %llu of %llu moved keys in %.1f s (%.0f keys/s)%s\n"
               "checked first: %llu keys at the new owners kept (equal to the old "
               "owner's), %llu removed (older); %llu copies undone (written meanwhile)\n",
               (unsigned long long)r->copied, (unsigned long long)r->moved, r->seconds,
               r->seconds > 0 ? (double)r->copied / r->seconds : 0.0, stray,
               (unsigned long long)r->verified, (unsigned long long)r->removed,
               (unsigned long long)r->undone);
}

int cli_cmd_migrate(int argc, char **argv)
{
    cli_source src;
    mcr_error err;
    int first = cli_parse_options(argc, argv, &src, cli_usage_migrate,
                                  ALLOW_MIGRATE | MIXED_ARGS | ALLOW_JSON | ALLOW_ETCD);
    if (src.etcd != NULL || src.pool != NULL || src.etcd_prefix != NULL ||
        src.etcd_timeout != NULL)
        return cli_migrate_fleet(&src, argc - first, argv + first); /* migrate_fleet.c */
    if (src.grace != NULL || src.wait != NULL || src.abort_migration)
        cli_die("migrate: --grace, --wait and --abort apply only with --etcd");
    if (argc - first != 2)
        cli_die("migrate: expected OLD and NEW (a server list, a server file or a snapshot file)");
    mcr_migrate_options o;
    mcr_migrate_options_init(&o);
    if (src.rate != NULL)
        o.rate = cli_parse_rate(src.rate);
    if (src.timeout != NULL)
        o.timeout_ms = cli_parse_ms("migrate", "--timeout", src.timeout);
    o.dry_run = src.dry_run;
    mcr_snapshot *from = cli_operand_snapshot("migrate", argv[first], &src);
    mcr_snapshot *to = cli_operand_snapshot("migrate", argv[first + 1], &src);
    free(src.behaviors);

    if (!src.json) {
        cli_progress_start("migrate", 0, false);
        o.progress = on_progress;
    }
    g_stop = 0;
    o.stop = (const volatile int *)&g_stop;
    catch_signals();
    mcr_migrate_report r;
    int rc = mcr_migrate_run(from, to, &o, &r, &err);
    cli_progress_end();
    mcr_snapshot_unref(from);
    mcr_snapshot_unref(to);
    if (rc == MCR_ERR_RANGE || rc == MCR_ERR_UNSUPPORTED || rc == MCR_ERR_INVALID) {
        mcr_migrate_report_clear(&r);
        cli_die("%s", err.message);
    }
    if (src.json)
        print_json(&r, rc, &err, src.dry_run);
    else
        print_table(&r, rc, src.dry_run);
    int status = cli_finish_output();
    if (rc != MCR_OK) {
        for (size_t i = 0; i < r.nsources; i++)
            if (r.sources[i].status != MCR_OK)
                fprintf(stderr, "%s: migrate: %s\n", cli_progname, r.sources[i].message);
        /* lacking room is the run's error, unless a stop or memory came first */
        if (r.room_message[0] != '\0' && strstr(err.message, r.room_message) == NULL)
            fprintf(stderr, "%s: migrate: %s\n", cli_progname, r.room_message);
        fprintf(stderr, "%s: %s\n", cli_progname, err.message);
        status = EXIT_FAILED;
    }
    mcr_migrate_report_clear(&r);
    return status;
}
