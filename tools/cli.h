/* SPDX-License-Identifier: BSD-3-Clause */
/* cli.h: what the files of the mcroute command share: messages and exits, the parsed options, the placement of a SOURCE (tools/cli.c), JSON strings (tools/json.c), and the commands main runs. */
#ifndef MCR_CLI_H
#define MCR_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "mcroute.h"
#include "mcroute_fleet.h"
#include "mcroute_snapshot.h"

#define EXIT_FAILED 1 /* some operation failed, or output was lost */
#define EXIT_USAGE 2  /* bad input of any kind: nothing was done */

/* The name in messages and in the progress line: "mcroute". */
extern const char *cli_progname;

/* Print "mcroute: MESSAGE" on stderr (after erasing a progress line) and
 * exit with EXIT_USAGE. */
void cli_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* The same with EXIT_FAILED: something failed that was not bad input (out
 * of memory, a file that could not be written). */
void cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* cli_fail() when `status` (an mcr_status) is a failure that is not the
 * input's (MCR_ERR_NOMEM, MCR_ERR_IO, MCR_ERR_BUSY), else cli_die(): what
 * the etcd commands exit with. */
void cli_die_status(int status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

/* calloc() of n items (at least one, so that a count of 0 still gives a
 * pointer to free), or cli_fail("out of memory"). */
void *cli_xcalloc(size_t n, size_t size);

/* What a command takes besides --hash (unless NO_HASH) and --help (flags of
 * cli_parse_options). */
enum {
    ALLOW_SOURCE = 1,   /* -s -f -l -b -m -t -p -k --snapshot */
    ALLOW_REPLICAS = 2, /* --replicas */
    ALLOW_OUTPUT = 4,   /* -o --epoch */
    ALLOW_KEYS = 8,     /* --keys */
    MIXED_ARGS = 16,    /* options may follow the arguments (diff OLD NEW --keys F) */
    ALLOW_POOL = 32,    /* --timeout, --failure-policy */
    ALLOW_TTL = 64,     /* --ttl */
    ALLOW_JSON = 128,   /* --json */
    ALLOW_ETCD = 256,   /* --etcd --etcd-prefix --etcd-timeout -p (ALLOW_SOURCE has them) */
    ALLOW_WATCH = 512,  /* --count --client-id --timeout (watch: seconds) */
    PERMUTE = 1024,     /* options may follow the arguments (no -m, unlike MIXED_ARGS) */
    NO_HASH = 2048,     /* not even --hash (members, watch) */
    ALLOW_LIST = 4096,  /* -s -f -m --snapshot of a SOURCE only (members publish) */
    ALLOW_PREVIOUS = 8192, /* --previous OLD (pool commands: read through a migration) */
    ALLOW_MIGRATE = 16384, /* --rate --dry-run --timeout (migrate); --grace --wait
                             --abort (migrate --etcd) */
    ALLOW_CLIENTS = 32768, /* --clients (compare) */
    ALLOW_TOP = 65536,     /* --top N (stats) */
    ALLOW_AGENT = 131072   /* --state --metrics --id --group --slots --counter-servers
                              --file-mode (agent) */
};

/* The options of one command line, collected before anything is built so
 * their order and combinations can be checked. */
typedef struct cli_source {
    const char *servers, *server_file, *libmemcached, *mode, *hash;
    const char *client;        /* --client NAME (with -s, -f) */
    const char *clients;       /* compare --clients A,B,... */
    const char *twemproxy, *pool, *ketama_file, *snapshot;
    const char *state;         /* --state PATH: a host's shared state (mcroute_state.h) */
    const char *metrics;       /* agent --metrics ADDR:PORT */
    const char *id;            /* agent --id ID */
    const char *group;         /* agent --group GROUP */
    const char *slots;         /* agent --slots N, as given */
    const char *counter_servers; /* agent --counter-servers N, as given */
    const char *file_mode;     /* agent --file-mode MODE, as given */
    const char *output, *keys; /* snapshot -o, diff --keys */
    const char *epoch;         /* snapshot --epoch N, as given */
    uint64_t build_epoch;      /* the epoch cli_build_snapshot() gives a list or
                                  file source; 0: 1 */
    long replicas;             /* locate --replicas, 0 when not given */
    long top;                  /* stats --top N, 0 when not given */
    const char *timeout;       /* pool commands: --timeout, as given */
    const char *policy;        /* pool commands: --failure-policy, as given */
    const char *ttl;           /* set --ttl, as given */
    const char *etcd;          /* --etcd URL[,URL...]: the pool --pool in etcd */
    const char *etcd_prefix;   /* --etcd-prefix, or NULL (MCR_FLEET_PREFIX) */
    const char *etcd_timeout;  /* --etcd-timeout SECONDS, as given */
    const char *count;         /* watch --count, as given */
    const char *client_id;     /* watch --client-id */
    const char *rate;          /* migrate --rate, as given */
    bool dry_run;              /* migrate --dry-run */
    const char *grace;         /* migrate --etcd --grace SECONDS, as given */
    const char *wait;          /* migrate --etcd --wait SECONDS, as given */
    bool abort_migration;      /* migrate --etcd --abort */
    bool json;                 /* --json: one JSON document on stdout */
    const char *previous;      /* --previous OLD: a server list, server file or snapshot file */
    const char **behaviors;
    size_t nbehaviors;
} cli_source;

/* Parse argv with getopt_long into *src (free src->behaviors afterwards);
 * returns the index of the first argument that is not an option. Prints
 * `usage` and exits 0 on --help; exits EXIT_USAGE on an option that is
 * unknown, repeated or not in `allowed`. */
int cli_parse_options(int argc, char **argv, cli_source *src, const char *usage,
                      unsigned allowed);

/* Print `usage` on standard output and exit: 0, or EXIT_FAILED when it
 * could not be written (cli_finish_output). */
void cli_print_usage_and_exit(const char *usage) __attribute__((noreturn));

/* The hash called `name`; exits EXIT_USAGE, listing the known names, when
 * there is none. */
mcr_hash cli_parse_hash(const char *name);

/* Load the snapshot file `path`; exits EXIT_USAGE with the library's
 * message when it cannot be loaded. */
mcr_snapshot *cli_load_snapshot(const char *path);

/* The snapshot of a SOURCE: loaded from --snapshot, read from etcd
 * (--etcd, --pool: mcr_fleet_read()), or built (epoch 1) from the other
 * sources. Exits EXIT_USAGE when there is no source, more than one, or a
 * bad one (etcd unreachable within --etcd-timeout, no such pool, a value
 * that does not verify: the library's message). */
mcr_snapshot *cli_build_snapshot(const cli_source *src);

/* An operand naming a placement (diff OLD NEW, migrate OLD NEW,
 * --previous OLD): a file that can be opened is a snapshot file (starting
 * "mcroute-snapshot") or else a server file; what cannot be opened is a
 * server list, unless it looks like a path (a '/' in it, or a name ending
 * in ".snap") or exists unreadable; a directory is no file either: then
 * "CMD: cannot open ARG: REASON".
 * One that parses as a server list no more than it opens says both. Built
 * with the --mode and --hash of `opts` (never its etcd pool). Exits
 * EXIT_USAGE, naming `cmd`, as cli_build_snapshot() does. */
mcr_snapshot *cli_operand_snapshot(const char *cmd, const char *arg, const cli_source *opts);

/* The config of a SOURCE that is a server list, a server file, libmemcached
 * options, a twemproxy file or a ketama file (not --snapshot, not --etcd),
 * with --mode and --hash; the caller frees it. Exits as cli_build_snapshot. */
mcr_config *cli_build_config(const cli_source *src);

/* The fleet options of --etcd, --pool, --etcd-prefix and --etcd-timeout
 * (the strings point into src). Exits EXIT_USAGE, naming `cmd`, when --etcd
 * or --pool is missing or --etcd-timeout is bad. */
void cli_fleet_options(const char *cmd, const cli_source *src, mcr_fleet_options *o);

/* SECONDS of an option (`opt`, for the message naming `cmd`): a decimal
 * number above 0 and at most 86400, as milliseconds (at least 1). Exits
 * EXIT_USAGE otherwise. */
unsigned cli_parse_seconds(const char *cmd, const char *opt, const char *value);

/* MS of an option (`opt`, for the message naming `cmd`): a decimal number
 * from 1 to 86400000 (a day, the pool's limit). Exits EXIT_USAGE otherwise. */
unsigned cli_parse_ms(const char *cmd, const char *opt, const char *value);

/* --rate KEYS_PER_S of migrate: above 0, at most MCR_MIGRATE_RATE_MAX
 * (mcroute_migrate.h); exits EXIT_USAGE otherwise. */
double cli_parse_rate(const char *value);

/* A ring and the name to print for each of its servers (what locate, dump
 * and stats print): the ring of a snapshot, or one built from a config. */
typedef struct cli_placement {
    const mcr_ring *ring;
    mcr_ring *owned;    /* ring built here, or NULL */
    mcr_snapshot *snap; /* snapshot the ring belongs to, or NULL */
    char **names;       /* NULL: mcr_ring_server_name() */
} cli_placement;

/* The placement of a SOURCE (exits EXIT_USAGE as cli_build_snapshot). */
cli_placement cli_placement_build(const cli_source *src);
void cli_placement_free(cli_placement *pl);

/* The name of ring server s, as locate prints it. */
const char *cli_server_label(const cli_placement *pl, uint32_t s);

/* A weight as a server list of mode m writes it, into buf (at least
 * CLI_WEIGHT_BUF bytes): the number, or in mcrouter-wch3 (millionths) the
 * decimal, "0.5", "1.0", "0.125". Returns buf. */
#define CLI_WEIGHT_BUF 24
const char *cli_weight_text(mcr_mode m, uint32_t w, char *buf);

/* Keys, one a line: the line without its newline, every other byte kept. */
typedef void (*cli_key_fn)(const char *key, size_t len, void *ctx);

/* Open the key file of --keys: standard input for "-". Exits EXIT_USAGE
 * (naming `cmd`) when it cannot be opened. */
FILE *cli_open_keys(const char *cmd, const char *path);

/* Call fn for every line of `in` (then closed unless it is stdin), with a
 * progress line labelled `cmd` (see cli_progress_start; `prints_lines`:
 * fn writes to standard output). Exits EXIT_USAGE on a read error. */
void cli_for_each_line(FILE *in, const char *cmd, bool prints_lines, cli_key_fn fn, void *ctx);

/* ------------------------------------------------------------ JSON (json.c) */

/* Write `len` bytes of `s` as a JSON string, quotes included. Valid UTF-8
 * is written as it is, '"', '\\' and control bytes (0x00-0x1f, 0x7f)
 * escaped; bytes that are not valid UTF-8 become U+FFFD, one for each
 * maximal subpart (the bytes that begin a sequence without completing it,
 * or a single byte). Returns true when the string is exact (no U+FFFD
 * substituted). */
bool cli_json_string(FILE *f, const char *s, size_t len);

/* Write `"name": STRING` for a key: cli_json_string, followed by
 * `, "name_hex": "HEX"` (the exact bytes, lower-case hex) when the key is
 * not valid UTF-8, so that every key can be recovered from the document. */
void cli_json_key_member(FILE *f, const char *name, const char *key, size_t len);

/* Write `len` bytes of `s` with every byte that could act on a terminal or
 * make a line ambiguous as \xHH (lower-case hex): the control bytes 0-31
 * and 127, the C1 controls U+0080-U+009F, bytes that are not valid UTF-8,
 * and the backslash (\x5c, so the text can be decoded back). What error
 * lines and messages on standard error use for keys. */
void cli_put_escaped(FILE *f, const char *s, size_t len);

/* Write a key or a value to standard output: byte for byte into a pipe or
 * a file, cli_put_escaped() when standard output is a terminal. */
void cli_put_field(const char *s, size_t len);

/* Whether `s` is valid UTF-8 (no overlong form, surrogate or value above
 * U+10FFFF): what JSON and XML may carry as it is. */
bool cli_utf8_valid(const char *s);

/* ------------------------------------------------------------ progress (cli.c) */

/* A progress line on standard error, "mcroute CMD: DONE[/TOTAL] keys",
 * redrawn in place, for runs over many keys. Only when standard error is a
 * terminal (never in a pipe, a file or a test), and not when the command
 * `prints_lines` on standard output while it runs and that is a terminal
 * too. `total` 0 means unknown. Drawn every 65536 keys, and every second
 * once a run has lasted one; erased by cli_progress_end(), and before any
 * other message by cli_progress_clear(). */
void cli_progress_start(const char *cmd, size_t total, bool prints_lines);
void cli_progress_update(size_t done);
/* Draw `text` as the progress line now (a command that counts otherwise
 * than keys, migrate), when cli_progress_start() turned the line on. */
void cli_progress_show(const char *text);
void cli_progress_clear(void);
void cli_progress_end(void);

/* Flush stdout: EXIT_SUCCESS, or EXIT_FAILED with a message when anything
 * could not be written. */
int cli_finish_output(void);

/* The commands that place keys (tools/place_cmds.c) and their help texts. */
int cli_cmd_locate(int argc, char **argv);
int cli_cmd_dump(int argc, char **argv);
int cli_cmd_hash(int argc, char **argv);
int cli_cmd_snapshot(int argc, char **argv);
int cli_cmd_diff(int argc, char **argv);
/* compare_cmd.c: compare, and clients (the clients --client names) */
extern const char cli_usage_compare[], cli_usage_clients[];
int cli_cmd_compare(int argc, char **argv);
int cli_cmd_clients(int argc, char **argv);
extern const char cli_usage_locate[], cli_usage_dump[], cli_usage_hash[], cli_usage_snapshot[],
    cli_usage_diff[];

/* The pool-backed commands (tools/pool_cmds.c) and their help texts. */
int cli_cmd_set(int argc, char **argv);
int cli_cmd_get(int argc, char **argv);
int cli_cmd_delete(int argc, char **argv);
int cli_cmd_probe(int argc, char **argv);
extern const char cli_usage_set[], cli_usage_get[], cli_usage_delete[], cli_usage_probe[];

/* simulate (tools/simulate.c): its own options (see cli_usage_simulate),
 * exits EXIT_USAGE (2) on bad input and EXIT_FAILED (1) when output is lost. */
int cli_simulate(int argc, char **argv);
extern const char cli_usage_simulate[];

/* stats (tools/stats.c): the share of the ring and of keys of each server. */
int cli_cmd_stats(int argc, char **argv);
extern const char cli_usage_stats[];

/* members (tools/fleet_cmds.c): a pool in etcd, its servers and its clients. */
int cli_cmd_members(int argc, char **argv);
extern const char cli_usage_members[];

/* watch (tools/watch.c): follow a pool in etcd, a line per adopted epoch. */
int cli_cmd_watch(int argc, char **argv);
extern const char cli_usage_watch[];

/* agent (tools/agent.c): one per host: follow a pool in etcd into a shared
 * state that the host's processes follow. */
int cli_cmd_agent(int argc, char **argv);
extern const char cli_usage_agent[];

/* migrate (tools/migrate_cmd.c): copy the keys a placement change moves. */
int cli_cmd_migrate(int argc, char **argv);
extern const char cli_usage_migrate[];

/* migrate --etcd URLS --pool NAME [NEW] (tools/migrate_fleet.c): the
 * migration recorded in etcd, run or resumed (or aborted) step by step;
 * `src` as cli_cmd_migrate parsed it, args its operands. Returns the exit
 * status. */
int cli_migrate_fleet(const cli_source *src, int nargs, char **args);

#endif
