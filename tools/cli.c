/* SPDX-License-Identifier: BSD-3-Clause */
/* cli.c: what the commands of mcroute share: messages and exits, the progress line, option parsing, the snapshot or placement of a SOURCE, key input, output finishing. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mcroute.h"
#include "mcroute_fleet.h"
#include "mcroute_ketama.h"
#include "mcroute_libmemcached.h"
#include "mcroute_migrate.h"
#include "mcroute_snapshot.h"
#include "mcroute_state.h"
#include "mcroute_twemproxy.h"

#include "cli.h"

const char *cli_progname = "mcroute";

/* "mcroute: MESSAGE" on one line of stderr. A message quotes what it was
 * given (an argument, a file's line), so its control bytes are written as
 * \xHH: an argument with an ESC cannot drive the terminal, nor a newline
 * forge a second message. */
static void vmessage(const char *fmt, va_list ap)
{
    char small[1024], *text = small;
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    if (n >= (int)sizeof(small)) {
        char *big = malloc((size_t)n + 1);
        if (big != NULL) { /* else, out of memory, the message is cut short */
            vsnprintf(big, (size_t)n + 1, fmt, again);
            text = big;
        }
    }
    va_end(again);
    cli_progress_clear();
    fprintf(stderr, "%s: ", cli_progname);
    for (const unsigned char *p = (const unsigned char *)text; *p != '\0'; p++) {
        if (*p < 0x20 || *p == 0x7f)
            fprintf(stderr, "\\x%02x", *p);
        else
            fputc(*p, stderr);
    }
    fputc('\n', stderr);
    if (text != small)
        free(text);
}

void cli_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(fmt, ap);
    va_end(ap);
    exit(EXIT_USAGE);
}

void cli_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(fmt, ap);
    va_end(ap);
    exit(EXIT_FAILED);
}

void cli_die_status(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(fmt, ap);
    va_end(ap);
    exit(status == MCR_ERR_NOMEM || status == MCR_ERR_IO || status == MCR_ERR_BUSY
             ? EXIT_FAILED
             : EXIT_USAGE);
}

void *cli_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n == 0 ? 1 : n, size == 0 ? 1 : size);
    if (p == NULL)
        cli_fail("out of memory");
    return p;
}

/* ------------------------------------------------------------ the progress line */

/* Drawn at every multiple of PROGRESS_STEP items, and at least once a
 * second once a run has lasted a second: fast runs over a few keys print
 * nothing, slow ones (a pool command against far servers) still move. */
#define PROGRESS_STEP 65536
/* Updates between two looks at the clock (reading it for every key of a
 * locate would cost more than the lookup). */
#define PROGRESS_CLOCK_EVERY 1024

static struct {
    int on;              /* standard error is a terminal, a run is going on */
    const char *cmd;
    size_t total;        /* 0: unknown */
    size_t next_count;   /* draw when done reaches it */
    size_t calls;        /* updates since the last look at the clock */
    double start, last;  /* seconds: run start, last drawing */
    size_t width;        /* characters of the line on screen, 0 when none */
} pg;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void cli_progress_start(const char *cmd, size_t total, bool prints_lines)
{
    memset(&pg, 0, sizeof(pg));
    /* A line redrawn in place between the lines of standard output, on the
     * same screen, would garble them. */
    if (!isatty(STDERR_FILENO) || (prints_lines && isatty(STDOUT_FILENO)))
        return;
    pg.on = 1;
    pg.cmd = cmd;
    pg.total = total;
    pg.next_count = PROGRESS_STEP;
    pg.start = pg.last = now();
}

static void draw_text(const char *line, size_t len)
{
    fputc('\r', stderr);
    fwrite(line, 1, len, stderr);
    for (size_t i = len; i < pg.width; i++) /* what a longer line left */
        fputc(' ', stderr);
    fflush(stderr);
    if (len > pg.width)
        pg.width = len;
}

static void draw(size_t done)
{
    char line[160];
    int n = pg.total > 0 ? snprintf(line, sizeof(line), "%s %s: %zu/%zu keys", cli_progname,
                                    pg.cmd, done, pg.total)
                         : snprintf(line, sizeof(line), "%s %s: %zu keys", cli_progname,
                                    pg.cmd, done);
    draw_text(line, n < 0 ? 0 : (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

void cli_progress_show(const char *text)
{
    if (pg.on)
        draw_text(text, strlen(text));
}

void cli_progress_update(size_t done)
{
    if (!pg.on)
        return;
    int due = 0;
    if (done >= pg.next_count) {
        due = 1;
        pg.next_count = (done / PROGRESS_STEP + 1) * PROGRESS_STEP;
    }
    if (++pg.calls >= PROGRESS_CLOCK_EVERY) {
        pg.calls = 0;
        double t = now();
        if (t - pg.start >= 1.0 && t - pg.last >= 1.0)
            due = 1;
    }
    if (due) {
        pg.last = now();
        draw(done);
    }
}

void cli_progress_clear(void)
{
    if (pg.width == 0)
        return;
    fputc('\r', stderr);
    for (size_t i = 0; i < pg.width; i++)
        fputc(' ', stderr);
    fputc('\r', stderr);
    fflush(stderr);
    pg.width = 0;
}

void cli_progress_end(void)
{
    cli_progress_clear();
    pg.on = 0;
}

/* ------------------------------------------------------------ options */

enum { OPT_HASH = 256, OPT_SNAPSHOT, OPT_REPLICAS, OPT_KEYS, OPT_TIMEOUT, OPT_POLICY, OPT_TTL,
       OPT_JSON, OPT_ETCD, OPT_ETCD_PREFIX, OPT_ETCD_TIMEOUT, OPT_COUNT, OPT_CLIENT_ID,
       OPT_RATE, OPT_DRY_RUN, OPT_GRACE, OPT_WAIT, OPT_ABORT, OPT_CLIENT,
       OPT_CLIENTS, OPT_TOP, OPT_STATE, OPT_METRICS, OPT_ID, OPT_GROUP, OPT_SLOTS, OPT_COUNTER_SERVERS,
       OPT_FILE_MODE, OPT_EPOCH, OPT_PREVIOUS = 400 };

static const struct option source_opts[] = {
    {"servers", required_argument, NULL, 's'},
    {"server-file", required_argument, NULL, 'f'},
    {"libmemcached", required_argument, NULL, 'l'},
    {"behavior", required_argument, NULL, 'b'},
    {"behaviour", required_argument, NULL, 'b'},
    {"mode", required_argument, NULL, 'm'},
    {"twemproxy", required_argument, NULL, 't'},
    {"pool", required_argument, NULL, 'p'},
    {"ketama-file", required_argument, NULL, 'k'},
    {"hash", required_argument, NULL, OPT_HASH},
    {"client", required_argument, NULL, OPT_CLIENT},
    {"clients", required_argument, NULL, OPT_CLIENTS},
    {"snapshot", required_argument, NULL, OPT_SNAPSHOT},
    {"state", required_argument, NULL, OPT_STATE},
    {"metrics", required_argument, NULL, OPT_METRICS},
    {"id", required_argument, NULL, OPT_ID},
    {"group", required_argument, NULL, OPT_GROUP},
    {"slots", required_argument, NULL, OPT_SLOTS},
    {"counter-servers", required_argument, NULL, OPT_COUNTER_SERVERS},
    {"file-mode", required_argument, NULL, OPT_FILE_MODE},
    {"replicas", required_argument, NULL, OPT_REPLICAS},
    {"top", required_argument, NULL, OPT_TOP},
    {"keys", required_argument, NULL, OPT_KEYS},
    {"output", required_argument, NULL, 'o'},
    {"epoch", required_argument, NULL, OPT_EPOCH},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"failure-policy", required_argument, NULL, OPT_POLICY},
    {"ttl", required_argument, NULL, OPT_TTL},
    {"json", no_argument, NULL, OPT_JSON},
    {"etcd", required_argument, NULL, OPT_ETCD},
    {"etcd-prefix", required_argument, NULL, OPT_ETCD_PREFIX},
    {"etcd-timeout", required_argument, NULL, OPT_ETCD_TIMEOUT},
    {"count", required_argument, NULL, OPT_COUNT},
    {"client-id", required_argument, NULL, OPT_CLIENT_ID},
    {"rate", required_argument, NULL, OPT_RATE},
    {"dry-run", no_argument, NULL, OPT_DRY_RUN},
    {"grace", required_argument, NULL, OPT_GRACE},
    {"wait", required_argument, NULL, OPT_WAIT},
    {"abort", no_argument, NULL, OPT_ABORT},
    {"previous", required_argument, NULL, OPT_PREVIOUS},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Flush stdout and fail if anything could not be written (a full disk, a
 * closed pipe): output that silently lost lines is worse than an error. */
int cli_finish_output(void)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "%s: error writing standard output\n", cli_progname);
        return EXIT_FAILED;
    }
    return EXIT_SUCCESS;
}

void cli_print_usage_and_exit(const char *usage)
{
    fputs(usage, stdout);
    exit(cli_finish_output());
}

/* The spelling of option `c` for messages. */
static const char *opt_name(int c)
{
    switch (c) {
    case 's': return "--servers";
    case 'f': return "--server-file";
    case 'l': return "--libmemcached";
    case 'b': return "--behavior";
    case 'm': return "--mode";
    case 't': return "--twemproxy";
    case 'p': return "--pool";
    case 'k': return "--ketama-file";
    case 'o': return "--output";
    case OPT_EPOCH: return "--epoch";
    case OPT_SNAPSHOT: return "--snapshot";
    case OPT_STATE: return "--state";
    case OPT_METRICS: return "--metrics";
    case OPT_ID: return "--id";
    case OPT_GROUP: return "--group";
    case OPT_SLOTS: return "--slots";
    case OPT_COUNTER_SERVERS: return "--counter-servers";
    case OPT_FILE_MODE: return "--file-mode";
    case OPT_REPLICAS: return "--replicas";
    case OPT_TOP: return "--top";
    case OPT_KEYS: return "--keys";
    case OPT_HASH: return "--hash";
    case OPT_CLIENT: return "--client";
    case OPT_CLIENTS: return "--clients";
    case OPT_TIMEOUT: return "--timeout";
    case OPT_POLICY: return "--failure-policy";
    case OPT_TTL: return "--ttl";
    case OPT_JSON: return "--json";
    case OPT_PREVIOUS: return "--previous";
    case OPT_ETCD: return "--etcd";
    case OPT_ETCD_PREFIX: return "--etcd-prefix";
    case OPT_ETCD_TIMEOUT: return "--etcd-timeout";
    case OPT_COUNT: return "--count";
    case OPT_CLIENT_ID: return "--client-id";
    case OPT_RATE: return "--rate";
    case OPT_DRY_RUN: return "--dry-run";
    case OPT_GRACE: return "--grace";
    case OPT_WAIT: return "--wait";
    case OPT_ABORT: return "--abort";
    case 'h': return "--help";
    default: return "?";
    }
}

static bool option_allowed(int c, unsigned allowed)
{
    switch (c) {
    case 'h': case ':': case '?': return true;
    case OPT_HASH: return (allowed & NO_HASH) == 0;
    case 'm': case OPT_CLIENT: return (allowed & (ALLOW_SOURCE | MIXED_ARGS | ALLOW_LIST)) != 0;
    case OPT_CLIENTS: return (allowed & ALLOW_CLIENTS) != 0;
    case 's': case 'f': case OPT_SNAPSHOT: return (allowed & (ALLOW_SOURCE | ALLOW_LIST)) != 0;
    case OPT_REPLICAS: return (allowed & ALLOW_REPLICAS) != 0;
    case OPT_TOP: return (allowed & ALLOW_TOP) != 0;
    case 'o': case OPT_EPOCH: return (allowed & ALLOW_OUTPUT) != 0;
    case OPT_KEYS: return (allowed & ALLOW_KEYS) != 0;
    case OPT_TIMEOUT: return (allowed & (ALLOW_POOL | ALLOW_WATCH | ALLOW_MIGRATE)) != 0;
    case OPT_RATE: case OPT_DRY_RUN: case OPT_GRACE: case OPT_WAIT: case OPT_ABORT:
        return (allowed & ALLOW_MIGRATE) != 0;
    case OPT_POLICY: return (allowed & ALLOW_POOL) != 0;
    case OPT_TTL: return (allowed & ALLOW_TTL) != 0;
    case OPT_JSON: return (allowed & ALLOW_JSON) != 0;
    case OPT_ETCD: case OPT_ETCD_PREFIX: case OPT_ETCD_TIMEOUT: case 'p':
        return (allowed & (ALLOW_SOURCE | ALLOW_ETCD | ALLOW_LIST)) != 0;
    case OPT_COUNT: case OPT_CLIENT_ID: return (allowed & ALLOW_WATCH) != 0;
    case OPT_PREVIOUS: return (allowed & ALLOW_PREVIOUS) != 0;
    case OPT_STATE: return (allowed & (ALLOW_SOURCE | ALLOW_WATCH | ALLOW_AGENT)) != 0;
    case OPT_METRICS: case OPT_ID: case OPT_GROUP: case OPT_SLOTS: case OPT_COUNTER_SERVERS:
    case OPT_FILE_MODE:
        return (allowed & ALLOW_AGENT) != 0;
    default: return (allowed & ALLOW_SOURCE) != 0;
    }
}

/* Where an option that takes a string and may be given once keeps it; NULL
 * for the other options. */
static const char **once_field(cli_source *src, int c)
{
    switch (c) {
    case 's': return &src->servers;
    case 'f': return &src->server_file;
    case 'l': return &src->libmemcached;
    case 'm': return &src->mode;
    case 't': return &src->twemproxy;
    case 'p': return &src->pool;
    case 'k': return &src->ketama_file;
    case 'o': return &src->output;
    case OPT_EPOCH: return &src->epoch;
    case OPT_SNAPSHOT: return &src->snapshot;
    case OPT_STATE: return &src->state;
    case OPT_METRICS: return &src->metrics;
    case OPT_ID: return &src->id;
    case OPT_GROUP: return &src->group;
    case OPT_SLOTS: return &src->slots;
    case OPT_COUNTER_SERVERS: return &src->counter_servers;
    case OPT_FILE_MODE: return &src->file_mode;
    case OPT_KEYS: return &src->keys;
    case OPT_HASH: return &src->hash;
    case OPT_CLIENT: return &src->client;
    case OPT_CLIENTS: return &src->clients;
    case OPT_TIMEOUT: return &src->timeout;
    case OPT_POLICY: return &src->policy;
    case OPT_TTL: return &src->ttl;
    case OPT_PREVIOUS: return &src->previous;
    case OPT_ETCD: return &src->etcd;
    case OPT_ETCD_PREFIX: return &src->etcd_prefix;
    case OPT_ETCD_TIMEOUT: return &src->etcd_timeout;
    case OPT_COUNT: return &src->count;
    case OPT_CLIENT_ID: return &src->client_id;
    case OPT_RATE: return &src->rate;
    case OPT_GRACE: return &src->grace;
    case OPT_WAIT: return &src->wait;
    default: return NULL;
    }
}

/* --replicas N: 1 to 1000 (given again, the last counts). */
static long parse_replicas(const char *arg)
{
    char *end;
    long n = strtol(arg, &end, 10);
    if (*arg == '\0' || *end != '\0' || n < 1 || n > 1000)
        cli_die("--replicas '%s': expected a number from 1 to 1000", arg);
    return n;
}

/* --top N: 1 to 1000000, digits only. */
static long parse_top(const char *arg)
{
    char *end;
    errno = 0;
    long n = strtol(arg, &end, 10);
    if (*arg < '0' || *arg > '9' || *end != '\0' || errno != 0 || n < 1 || n > 1000000)
        cli_die("--top '%s': expected a number of keys from 1 to 1000000", arg);
    return n;
}

/* What getopt_long() returned for an option it could not take (c): a
 * missing value, a value given to a flag, an unknown or ambiguous name. */
static void die_bad_option(int c, char **argv) __attribute__((noreturn));
static void die_bad_option(int c, char **argv)
{
    if (c == ':') /* the option was the last argument */
        cli_die("%s: option '%s' needs a value", argv[0], argv[optind - 1]);
    if (optopt == 'h' || optopt == OPT_JSON || optopt == OPT_DRY_RUN ||
        optopt == OPT_ABORT) /* --json=X, ... */
        cli_die("%s: option '%s' takes no value", argv[0], opt_name(optopt));
    if (optopt != 0)
        cli_die("%s: unknown option '-%c' (see --help)", argv[0], optopt);
    cli_die("%s: unknown or ambiguous option '%s' (see --help)", argv[0], argv[optind - 1]);
}

int cli_parse_options(int argc, char **argv, cli_source *src, const char *usage, unsigned allowed)
{
    int c;

    memset(src, 0, sizeof(*src));
    src->behaviors = calloc((size_t)argc, sizeof(char *));
    if (src->behaviors == NULL)
        cli_fail("out of memory");
    opterr = 0;
    optind = 1;
    const char *optstring = (allowed & (MIXED_ARGS | PERMUTE)) ? ":s:f:l:b:m:t:p:k:o:h"
                                                              : "+:s:f:l:b:m:t:p:k:o:h";
    while ((c = getopt_long(argc, argv, optstring, source_opts, NULL)) != -1) {
        if (!option_allowed(c, allowed))
            cli_die("%s: option '%s' is not valid here (see --help)", argv[0], opt_name(c));
        const char **field = once_field(src, c);
        if (field != NULL) {
            if (*field != NULL)
                cli_die("%s given twice", c == 's' ? "-s" : opt_name(c)); /* as ever */
            *field = optarg;
            continue;
        }
        switch (c) {
        case OPT_REPLICAS: src->replicas = parse_replicas(optarg); break;
        case OPT_TOP:
            if (src->top)
                cli_die("--top given twice");
            src->top = parse_top(optarg);
            break;
        case OPT_JSON: src->json = true; break;
        case OPT_DRY_RUN: src->dry_run = true; break;
        case OPT_ABORT: src->abort_migration = true; break;
        case 'b': src->behaviors[src->nbehaviors++] = optarg; break;
        case 'h': cli_print_usage_and_exit(usage);
        default: die_bad_option(c, argv);
        }
    }
    return optind;
}

/* ------------------------------------------------------------ sources */

mcr_hash cli_parse_hash(const char *name)
{
    mcr_hash h;
    if (mcr_hash_from_name(name, &h) != MCR_OK)
        cli_die("unknown hash '%s' (known: default md5 crc fnv1_64 fnv1a_64 fnv1_32 fnv1a_32 "
            "hsieh murmur jenkins murmur3 crc16 crc32a cmemcache hashcode hashcode_abs)",
            name);
    return h;
}

const char *cli_server_label(const cli_placement *pl, uint32_t s)
{
    return pl->names ? pl->names[s] : mcr_ring_server_name(pl->ring, s);
}

const char *cli_weight_text(mcr_mode m, uint32_t w, char *buf)
{
    if (m != MCR_MODE_MCROUTER_WCH3) {
        snprintf(buf, CLI_WEIGHT_BUF, "%u", (unsigned)w);
        return buf;
    }
    int n = snprintf(buf, CLI_WEIGHT_BUF, "%u.%06u", (unsigned)(w / MCR_WCH3_WEIGHT_ONE),
                     (unsigned)(w % MCR_WCH3_WEIGHT_ONE));
    while (n > 0 && buf[n - 1] == '0' && buf[n - 2] != '.') /* "0.5", "1.0" */
        buf[--n] = '\0';
    return buf;
}

static void free_names(char **names, size_t n)
{
    if (names != NULL)
        for (size_t i = 0; i < n; i++)
            free(names[i]);
    free(names);
}

void cli_placement_free(cli_placement *pl)
{
    free_names(pl->names, mcr_ring_server_count(pl->ring));
    mcr_ring_free(pl->owned);
    mcr_snapshot_unref(pl->snap);
}

/* Whether behaviour `name` (with or without MEMCACHED_BEHAVIOR_, in any
 * case) is one of libmemcached's flags. */
static bool lmc_flag(const char *name)
{
    static const char *const flags[] = {"KETAMA", "KETAMA_WEIGHTED", "SORT_HOSTS",
                                        "HASH_WITH_NAMESPACE", "HASH_WITH_PREFIX_KEY"};
    if (strncasecmp(name, "MEMCACHED_BEHAVIOR_", 19) == 0)
        name += 19;
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
        if (strcasecmp(name, flags[i]) == 0)
            return true;
    return false;
}

static mcr_config *config_from_lmc(const cli_source *src)
{
    mcr_error err;
    mcr_config *cfg = NULL;
    mcr_lmc *lmc = mcr_lmc_new();

    if (lmc == NULL)
        cli_fail("out of memory");
    if (mcr_lmc_parse_options(lmc, src->libmemcached, &err) != MCR_OK) {
        mcr_lmc_free(lmc);
        cli_die("libmemcached options: %s", err.message);
    }
    for (size_t i = 0; i < src->nbehaviors; i++) {
        const char *b = src->behaviors[i];
        const char *eq = strchr(b, '=');
        if (eq == NULL || eq == b) {
            mcr_lmc_free(lmc);
            cli_die("--behavior '%s': expected NAME=VALUE", b);
        }
        char name[128];
        size_t nl = (size_t)(eq - b);
        if (nl >= sizeof(name)) {
            mcr_lmc_free(lmc);
            cli_die("--behavior '%.40s...': unknown behavior name", b);
        }
        memcpy(name, b, nl);
        name[nl] = '\0';
        /* libmemcached, and mcr_lmc_set_behavior_name() which mirrors it,
         * take any number for a flag (not 0 is on): on the command line,
         * KETAMA_WEIGHTED=2 is a mistake (there is no weight to give), so
         * a flag takes 0, 1, true or false only. */
        const char *v = eq + 1;
        if (lmc_flag(name) && strcmp(v, "0") != 0 && strcmp(v, "1") != 0 &&
            strcasecmp(v, "true") != 0 && strcasecmp(v, "false") != 0) {
            mcr_lmc_free(lmc);
            cli_die("--behavior %s: %s is a flag: 0 or 1 (or true or false), not \"%s\"", b,
                    name, v);
        }
        if (mcr_lmc_set_behavior_name(lmc, name, eq + 1, &err) != MCR_OK) {
            mcr_lmc_free(lmc);
            cli_die("--behavior %s: %s", b, err.message);
        }
    }
    int rc = mcr_lmc_config(lmc, &cfg, &err);
    mcr_lmc_free(lmc);
    if (rc != MCR_OK)
        cli_die("%s", err.message);
    return cfg;
}

static mcr_config *config_from_twemproxy(const cli_source *src)
{
    mcr_error err;
    mcr_twem *tw = NULL;
    mcr_config *cfg = NULL;
    size_t pool = 0;

    if (mcr_twem_load(src->twemproxy, &tw, &err) != MCR_OK)
        cli_die("%s", err.message);
    int rc = MCR_OK;
    if (src->pool != NULL)
        rc = mcr_twem_pool_index(tw, src->pool, &pool, &err);
    if (rc == MCR_OK)
        rc = mcr_twem_config(tw, pool, &cfg, &err);
    mcr_twem_free(tw);
    if (rc != MCR_OK)
        cli_die("%s", err.message);
    return cfg;
}

/* A libketama file: its servers print as their addresses are written, so
 * *names gets them, in config order. */
static mcr_config *config_from_ketama_file(const cli_source *src, char ***names)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();

    if (cfg == NULL)
        cli_fail("out of memory");
    if (mcr_ketama_load_file(cfg, src->ketama_file, &err) != MCR_OK) {
        mcr_config_free(cfg);
        cli_die("%s", err.message);
    }
    size_t n = mcr_config_server_count(cfg);
    *names = calloc(n, sizeof(**names));
    if (*names == NULL)
        cli_fail("out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *a = mcr_ketama_address(cfg, i);
        (*names)[i] = a ? strdup(a) : NULL;
    }
    return cfg;
}

/* A server list or server file with --mode and --hash. */
static mcr_config *config_from_list(const char *list, const char *file, const cli_source *src)
{
    mcr_error err;
    mcr_mode mode = MCR_MODE_KETAMA;

    if (src->mode != NULL && mcr_mode_from_name(src->mode, &mode) != MCR_OK)
        cli_die("unknown mode '%s' (known: ketama stable-ketama consistent weighted spy "
            "spy-weighted modula twemproxy-ketama twemproxy-modula jump rendezvous maglev "
            "slots bounded pymemcache buckets spymemcached spymemcached-libmemcached dalli "
            "hashring nginx-consistent php-memcache memcached-proxy-jump mcrouter-ch3 envoy-maglev "
            "envoy-ring-hash memcached-proxy-ring-ketama mcrouter-wch3)",
            src->mode);
    mcr_config *cfg = mcr_config_new();
    if (cfg == NULL)
        cli_fail("out of memory");
    /* Without --hash, the mode's own (mcr_mode_default_hash), as the
     * library gives it: the config follows the mode until a hash is set. */
    mcr_config_set_mode(cfg, mode);
    if (src->hash != NULL)
        mcr_config_set_hash(cfg, cli_parse_hash(src->hash));
    if (src->client != NULL && mcr_config_set_client(cfg, src->client, &err) != MCR_OK) {
        mcr_config_free(cfg);
        cli_die("--client: %s", err.message);
    }
    int rc = list ? mcr_config_add_servers(cfg, list, &err)
                  : mcr_config_load_server_file(cfg, file, &err);
    if (rc != MCR_OK) {
        mcr_config_free(cfg);
        cli_die("%s", err.message);
    }
    return cfg;
}

/* What check_source() found. */
enum { SOURCE_CONFIG, SOURCE_SNAPSHOT, SOURCE_ETCD, SOURCE_STATE };

/* Check the combination of source options; returns its kind. */
static int check_source(const cli_source *src)
{
    int nsrc = (src->servers != NULL) + (src->server_file != NULL) +
               (src->libmemcached != NULL) + (src->twemproxy != NULL) +
               (src->ketama_file != NULL) + (src->snapshot != NULL) + (src->etcd != NULL) +
               (src->state != NULL);

    if (nsrc == 0)
        cli_die("no servers: give -s LIST, --server-file FILE, --libmemcached OPTIONS, "
            "--twemproxy FILE, --ketama-file FILE, --snapshot FILE, --state PATH or --etcd "
            "URLS --pool NAME");
    if (nsrc > 1)
        cli_die("give only one of -s, --server-file, --libmemcached, --twemproxy, "
            "--ketama-file, --snapshot, --state and --etcd");
    if ((src->etcd_prefix != NULL || src->etcd_timeout != NULL) && src->etcd == NULL)
        cli_die("--etcd-prefix and --etcd-timeout apply only to --etcd");
    if (src->etcd != NULL) {
        if (src->pool == NULL)
            cli_die("--etcd needs --pool NAME (the pool's name in etcd)");
        if (src->mode != NULL || src->hash != NULL || src->client != NULL ||
            src->nbehaviors > 0)
            cli_die("--mode, --hash, --client and --behavior do not apply to --etcd: the "
                    "pool sets the placement");
        return SOURCE_ETCD;
    }
    if (src->state != NULL) {
        if (src->mode != NULL || src->hash != NULL || src->client != NULL ||
            src->nbehaviors > 0 || src->pool != NULL)
            cli_die("--mode, --hash, --client, --behavior and --pool do not apply to --state: "
                    "the state sets the placement");
        return SOURCE_STATE;
    }
    if (src->pool != NULL && src->twemproxy == NULL)
        cli_die("--pool applies only to --twemproxy and --etcd");
    if (src->nbehaviors > 0 && src->libmemcached == NULL)
        cli_die("--behavior applies only to --libmemcached");
    if (src->client != NULL && (src->mode != NULL || src->hash != NULL))
        cli_die("--client sets the mode and hash: give it without --mode and --hash");
    if (src->client != NULL && src->servers == NULL && src->server_file == NULL)
        cli_die("--client applies only to -s and --server-file");
    if ((src->mode != NULL || src->hash != NULL) && src->servers == NULL &&
        src->server_file == NULL)
        cli_die("--mode and --hash apply only to -s and --server-file; %s",
            src->libmemcached ? "use --behavior DISTRIBUTION=... or HASH=..."
                              : "the file sets the placement");
    return src->snapshot != NULL ? SOURCE_SNAPSHOT : SOURCE_CONFIG;
}

unsigned cli_parse_seconds(const char *cmd, const char *opt, const char *value)
{
    char *end;
    errno = 0;
    double v = strtod(value, &end);
    /* digits and a '.', no sign, exponent, "inf" or "nan" */
    if (strspn(value, "0123456789.") != strlen(value) || *value == '\0' || *end != '\0' ||
        errno != 0 || !(v > 0) || v > 86400)
        cli_die("%s: %s '%s': expected seconds, above 0 and at most 86400", cmd, opt, value);
    double ms = ceil(v * 1000.0);
    return ms < 1 ? 1u : (unsigned)ms;
}

unsigned cli_parse_ms(const char *cmd, const char *opt, const char *value)
{
    char *end;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (*value < '0' || *value > '9' || *end != '\0' || errno != 0 || v < 1 || v > 86400000L)
        cli_die("%s: %s '%s': expected milliseconds, 1 to 86400000", cmd, opt, value);
    return (unsigned)v;
}

double cli_parse_rate(const char *value)
{
    char *end;
    errno = 0;
    double v = strtod(value, &end);
    if (strspn(value, "0123456789.") != strlen(value) || *value == '\0' || *end != '\0' ||
        errno != 0 || !(v > 0) || v > MCR_MIGRATE_RATE_MAX)
        cli_die("migrate: --rate '%s': expected keys per second, above 0 and at most 1000000000",
                value);
    return v;
}

void cli_fleet_options(const char *cmd, const cli_source *src, mcr_fleet_options *o)
{
    mcr_fleet_options_init(o);
    if (src->etcd == NULL)
        cli_die("%s: --etcd URL[,URL...] is required", cmd);
    if (src->pool == NULL)
        cli_die("%s: --pool NAME is required (the pool's name in etcd)", cmd);
    o->endpoints = src->etcd;
    o->pool = src->pool;
    if (src->etcd_prefix != NULL)
        o->prefix = src->etcd_prefix;
    if (src->etcd_timeout != NULL) {
        o->wait_ms = cli_parse_seconds(cmd, "--etcd-timeout", src->etcd_timeout);
        /* One request must not outlast the whole wait either. */
        if (o->wait_ms < o->request_timeout_ms)
            o->request_timeout_ms = o->wait_ms;
    }
}

/* The snapshot of a host's shared state (mcroute_state.h). */
static mcr_snapshot *snapshot_from_state(const char *path)
{
    mcr_state_info info;
    mcr_error err;
    if (mcr_state_read(path, &info, &err) != MCR_OK) /* bad input, as a --snapshot */
        cli_die("--state: %s", err.message);
    mcr_snapshot *snap = mcr_snapshot_ref(info.snapshot);
    mcr_state_info_clear(&info);
    return snap;
}

/* The pool's current snapshot, read from etcd. */
static mcr_snapshot *snapshot_from_etcd(const cli_source *src)
{
    mcr_fleet_options o;
    mcr_error err;
    mcr_snapshot *snap = NULL;
    cli_fleet_options("--etcd", src, &o);
    int rc = mcr_fleet_read(&o, &snap, NULL, &err);
    if (rc != MCR_OK)
        cli_die_status(rc, "%s", err.message);
    return snap;
}

/* The config a SOURCE other than --snapshot describes. */
static mcr_config *build_config(const cli_source *src, char ***names)
{
    *names = NULL;
    if (src->libmemcached != NULL)
        return config_from_lmc(src);
    if (src->twemproxy != NULL)
        return config_from_twemproxy(src);
    if (src->ketama_file != NULL)
        return config_from_ketama_file(src, names);
    return config_from_list(src->servers, src->server_file, src);
}

mcr_snapshot *cli_load_snapshot(const char *path)
{
    mcr_error err;
    mcr_snapshot *snap = NULL;
    if (mcr_snapshot_load(path, NULL, 0, &snap, &err) != MCR_OK)
        cli_die("%s", err.message);
    return snap;
}

mcr_config *cli_build_config(const cli_source *src)
{
    char **names;
    if (check_source(src) != SOURCE_CONFIG)
        cli_die("%s is not a server list here",
                src->etcd ? "--etcd" : src->state ? "--state" : "--snapshot");
    mcr_config *cfg = build_config(src, &names);
    free_names(names, mcr_config_server_count(cfg));
    return cfg;
}

/* The snapshot of a SOURCE: loaded, read, or built (epoch 1) from its config. */
mcr_snapshot *cli_build_snapshot(const cli_source *src)
{
    mcr_error err;
    mcr_snapshot *snap = NULL;
    char **names;

    switch (check_source(src)) {
    case SOURCE_SNAPSHOT: return cli_load_snapshot(src->snapshot);
    case SOURCE_ETCD: return snapshot_from_etcd(src);
    case SOURCE_STATE: return snapshot_from_state(src->state);
    default: break;
    }
    mcr_config *cfg = build_config(src, &names);
    size_t n = mcr_config_server_count(cfg);
    int rc = mcr_snapshot_new(cfg, src->build_epoch != 0 ? src->build_epoch : 1, &snap, &err);
    mcr_config_free(cfg);
    free_names(names, n);
    if (rc != MCR_OK)
        cli_die("%s", err.message);
    return snap;
}

/* Whether an operand that is no file was meant as one: it has a '/' or
 * ends in ".snap" (a server list has neither: a hostname holds no '/', and
 * no host is named *.snap). */
static bool looks_like_path(const char *arg)
{
    size_t n = strlen(arg);
    return strchr(arg, '/') != NULL || (n >= 5 && strcmp(arg + n - 5, ".snap") == 0);
}

mcr_snapshot *cli_operand_snapshot(const char *cmd, const char *arg, const cli_source *opts)
{
    FILE *f = fopen(arg, "r");
    int open_errno = errno;
    bool is_file = f != NULL;
    struct stat st;
    if (is_file && fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        cli_die("%s: cannot open %s: %s", cmd, arg, strerror(EISDIR));
    }
    if (is_file) {
        char head[32] = "";
        size_t n = fread(head, 1, sizeof(head) - 1, f);
        fclose(f);
        head[n] = '\0';
        if (strncmp(head, "mcroute-snapshot", 16) == 0) {
            if (opts->mode != NULL || opts->hash != NULL)
                cli_die("%s: %s is a snapshot file, which sets its own mode and hash", cmd, arg);
            return cli_load_snapshot(arg);
        }
        if (strncmp(head, "mcroute-state ", 14) == 0) { /* a host's state: its snapshot */
            if (opts->mode != NULL || opts->hash != NULL)
                cli_die("%s: %s is a host's state, whose snapshot sets its own mode and hash",
                        cmd, arg);
            return snapshot_from_state(arg);
        }
    } else {
        /* Not a file: a server list, unless it was meant as a file (a
         * path, or a file that is there but cannot be read), or does not
         * parse as a list either; then the file may be what is missing.
         * (A long server list is too long a file name: only the list's
         * error is said then, by cli_build_snapshot().) */
        if (looks_like_path(arg) || open_errno == EACCES)
            cli_die("%s: cannot open %s: %s", cmd, arg, strerror(open_errno));
        mcr_error err;
        mcr_config *list = mcr_config_new();
        if (list == NULL)
            cli_fail("out of memory");
        /* read as the options' mode reads weights (mcrouter-wch3: decimals) */
        mcr_mode pm;
        if (opts->mode != NULL && mcr_mode_from_name(opts->mode, &pm) == MCR_OK)
            mcr_config_set_mode(list, pm);
        if (opts->client != NULL)
            mcr_config_set_client(list, opts->client, NULL);
        int rc = mcr_config_add_servers(list, arg, &err);
        mcr_config_free(list);
        if (rc == MCR_ERR_NOMEM)
            cli_fail("out of memory");
        if (rc != MCR_OK && open_errno == ENOENT)
            cli_die("%s: cannot open %s: %s; nor is it a server list: %s", cmd, arg,
                    strerror(open_errno), err.message);
    }
    cli_source one = *opts;
    one.etcd = one.pool = one.etcd_prefix = one.etcd_timeout = NULL; /* an operand is never the pool */
    if (is_file)
        one.server_file = arg;
    else
        one.servers = arg;
    return cli_build_snapshot(&one);
}

cli_placement cli_placement_build(const cli_source *src)
{
    mcr_error err;
    cli_placement pl = {NULL, NULL, NULL, NULL};
    char **names;

    int kind = check_source(src);
    if (kind != SOURCE_CONFIG) {
        pl.snap = kind == SOURCE_ETCD    ? snapshot_from_etcd(src)
                  : kind == SOURCE_STATE ? snapshot_from_state(src->state)
                                         : cli_load_snapshot(src->snapshot);
        pl.ring = mcr_snapshot_ring(pl.snap);
        return pl;
    }
    mcr_config *cfg = build_config(src, &names);
    size_t n = mcr_config_server_count(cfg);
    int rc = mcr_ring_new(cfg, &pl.owned, &err);
    mcr_config_free(cfg);
    if (rc != MCR_OK) {
        free_names(names, n);
        cli_die("%s", err.message);
    }
    pl.ring = pl.owned;
    if (names != NULL) /* ketama file: NULL entries fall back to the ring's name */
        for (size_t i = 0; i < n; i++)
            if (names[i] == NULL && (names[i] = strdup(mcr_ring_server_name(pl.ring, i))) == NULL)
                cli_fail("out of memory");
    pl.names = names;
    return pl;
}

/* ------------------------------------------------------------ key input */

FILE *cli_open_keys(const char *cmd, const char *path)
{
    if (strcmp(path, "-") == 0)
        return stdin;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        cli_die("%s: cannot open %s: %s", cmd, path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        cli_die("%s: %s: %s", cmd, path, strerror(EISDIR));
    }
    return f;
}

void cli_for_each_line(FILE *in, const char *cmd, bool prints_lines, cli_key_fn fn, void *ctx)
{
    char *line = NULL;
    size_t cap = 0, count = 0;
    ssize_t n;

    cli_progress_start(cmd, 0, prints_lines);
    while ((n = getline(&line, &cap, in)) >= 0) {
        if (n > 0 && line[n - 1] == '\n')
            n--;
        fn(line, (size_t)n, ctx);
        cli_progress_update(++count);
        if (ferror(stdout))
            break; /* output is lost: cli_finish_output() says so */
    }
    int read_errno = errno; /* of the getline() that ended the loop */
    cli_progress_end();
    free(line);
    bool is_stdin = in == stdin, bad = ferror(in) != 0;
    if (!is_stdin)
        fclose(in);
    if (bad)
        cli_die("%s: error reading %s: %s", cmd, is_stdin ? "standard input" : "the key file",
                strerror(read_errno));
}
