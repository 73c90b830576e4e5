/* cli.h: what the files of the mcroute command share: messages and exits, the parsed options, the placement of a SOURCE. */
#ifndef MCR_CLI_H
#define MCR_CLI_H

#include <stddef.h>

#include "mcroute.h"
#include "mcroute_snapshot.h"

#define EXIT_FAILED 1 /* some operation failed, or output was lost */
#define EXIT_USAGE 2  /* bad input of any kind: nothing was done */

extern const char *cli_progname;

/* Print "mcroute: MESSAGE" on stderr and exit with EXIT_USAGE. */
void cli_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* What a command takes besides --hash and --help (flags of cli_parse_options). */
enum {
    ALLOW_SOURCE = 1,   /* -s -f -l -b -m -t -p -k --snapshot */
    ALLOW_REPLICAS = 2, /* --replicas */
    ALLOW_OUTPUT = 4,   /* -o */
    ALLOW_KEYS = 8,     /* --keys */
    MIXED_ARGS = 16,    /* options may follow the arguments (diff OLD NEW --keys F) */
    ALLOW_POOL = 32,    /* --timeout, --failure-policy */
    ALLOW_TTL = 64      /* --ttl */
};

/* The options of one command line, collected before anything is built so
 * their order and combinations can be checked. */
typedef struct cli_source {
    const char *servers, *server_file, *libmemcached, *mode, *hash;
    const char *twemproxy, *pool, *ketama_file, *snapshot;
    const char *output, *keys; /* snapshot -o, diff --keys */
    long replicas;             /* locate --replicas, 0 when not given */
    const char *timeout;       /* pool commands: --timeout, as given */
    const char *policy;        /* pool commands: --failure-policy, as given */
    const char *ttl;           /* set --ttl, as given */
    const char **behaviors;
    size_t nbehaviors;
} cli_source;

/* Parse argv with getopt_long into *src (free src->behaviors afterwards);
 * returns the index of the first argument that is not an option. Prints
 * `usage` and exits 0 on --help; exits EXIT_USAGE on an option that is
 * unknown, repeated or not in `allowed`. */
int cli_parse_options(int argc, char **argv, cli_source *src, const char *usage,
                      unsigned allowed);

/* The snapshot of a SOURCE: loaded from --snapshot, or built (epoch 1) from
 * the other sources. Exits EXIT_USAGE when there is no source, more than
 * one, or a bad one. */
mcr_snapshot *cli_build_snapshot(const cli_source *src);

/* Flush stdout: EXIT_SUCCESS, or EXIT_FAILED with a message when anything
 * could not be written. */
int cli_finish_output(void);

/* The pool-backed commands (tools/pool_cmds.c) and their help texts. */
int cli_cmd_set(int argc, char **argv);
int cli_cmd_get(int argc, char **argv);
int cli_cmd_delete(int argc, char **argv);
int cli_cmd_probe(int argc, char **argv);
extern const char cli_usage_set[], cli_usage_get[], cli_usage_delete[], cli_usage_probe[];

#endif
