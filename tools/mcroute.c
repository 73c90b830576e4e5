/* mcroute.c: the mcroute command line: its options and sources, and the commands that place keys (locate, dump, hash, snapshot, diff). */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcroute.h"
#include "mcroute_ketama.h"
#include "mcroute_libmemcached.h"
#include "mcroute_snapshot.h"
#include "mcroute_twemproxy.h"

#include "cli.h"
#include "simulate.h"

const char *cli_progname = "mcroute";

void cli_die(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", cli_progname);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(EXIT_USAGE);
}

static const char usage_main[] =
    "Usage: mcroute COMMAND [OPTIONS] [ARGS]\n"
    "\n"
    "Client-side memcached key placement, bit-exact with libmemcached, twemproxy\n"
    "and libketama, and a client that routes through it.\n"
    "\n"
    "Commands:\n"
    "  locate SOURCE [KEY...]      print KEY<TAB>HOST:PORT for each key\n"
    "  dump SOURCE                 print the continuum, VALUE<TAB>HOST:PORT per point\n"
    "  hash --hash NAME [KEY...]   print KEY<TAB>VALUE (decimal uint32) for each key\n"
    "  snapshot SOURCE -o FILE     save the placement as a snapshot file\n"
    "  diff OLD NEW [--keys FILE]  what moves between two placements\n"
    "  set SOURCE [--ttl SECONDS]  store the KEY<TAB>VALUE lines of standard input\n"
    "  get SOURCE [KEY...]         print KEY<TAB>VALUE for each key found\n"
    "  delete SOURCE [KEY...]      delete keys from the servers that own them\n"
    "  probe SOURCE KEY...         print KEY<TAB>OWNER<TAB>HOLDERS for each key\n"
    "  simulate SERVERS CHANGE...  compare placement modes on a workload and a change\n"
    "  help [COMMAND]              show help\n"
    "\n"
    "SOURCE (exactly one):\n"
    "  -s, --servers LIST          comma-separated host[:port[:weight]], [v6addr]:port\n"
    "                              for IPv6; default port 11211, weight 1\n"
    "  -f, --server-file FILE      one host[:port[:weight]] per line, '#' comments\n"
    "  -l, --libmemcached OPTIONS  a libmemcached option string (--SERVER=h:p/?w ...),\n"
    "                              followed by any number of:\n"
    "  -b, --behavior NAME=VALUE   DISTRIBUTION (modula consistent ketama spy weighted),\n"
    "                              HASH, KETAMA_HASH (hash names), KETAMA,\n"
    "                              KETAMA_WEIGHTED, SORT_HOSTS, HASH_WITH_NAMESPACE\n"
    "                              (0 or 1); applied in order\n"
    "  -t, --twemproxy FILE        a nutcracker (twemproxy) YAML configuration;\n"
    "  -p, --pool NAME             with -t: the pool to use (default: the first)\n"
    "  -k, --ketama-file FILE      a libketama server file: 'address<TAB>memory' lines\n"
    "      --snapshot FILE         a snapshot file (see mcroute snapshot)\n"
    "      --replicas N            locate: KEY<TAB>PRIMARY<TAB>REPLICA..., distinct\n"
    "                              servers (and zones first), '<TAB>under-replicated'\n"
    "                              when fewer than N could be found\n"
    "  -o, --output FILE           snapshot: the file to write\n"
    "      --keys FILE             diff: count the keys of FILE that move\n"
    "  -m, --mode MODE             with -s/-f: ketama (default, libketama), stable-ketama,\n"
    "                              consistent,\n"
    "                              weighted, spy, spy-weighted, modula,\n"
    "                              twemproxy-ketama, twemproxy-modula\n"
    "      --hash NAME             with -s/-f: key hash (default md5 for ketama,\n"
    "                              weighted, spy-weighted; fnv1a_64 for twemproxy-*;\n"
    "                              'default' otherwise)\n"
    "\n"
    "set, get, delete and probe connect to the servers of SOURCE; also:\n"
    "      --timeout MS            connect and request timeout, 1 to 86400000 ms\n"
    "                              (default 1000)\n"
    "      --failure-policy NAME   what a server that keeps failing costs: fail-fast\n"
    "                              (default: its keys fail), eject (its keys move to\n"
    "                              the others), failover (reads go to a replica)\n"
    "      --ttl SECONDS           set: expiry, 0 (default: never) to 2147483647;\n"
    "                              above 30 days it is a Unix time\n"
    "\n"
    "Hashes: default md5 crc fnv1_64 fnv1a_64 fnv1_32 fnv1a_32 hsieh murmur jenkins murmur3\n"
    "        crc16 crc32a\n"
    "\n"
    "With no KEY, keys are read from standard input, one per line (the line without\n"
    "its newline; every other byte is kept). Bad input prints a message on stderr,\n"
    "nothing on stdout, and exits with status 2; set, get, delete and probe check\n"
    "all of their input before they send anything. A key that fails on the servers\n"
    "prints KEY<TAB>error<TAB>REASON on stderr, and the exit status is then 1.\n"
    "\n"
    "Options: -h, --help (also after a command), -V, --version.\n";

static const char usage_locate[] =
    "Usage: mcroute locate SOURCE [KEY...]\n"
    "Print KEY<TAB>HOST:PORT for every key: the server that owns it, as it was\n"
    "configured. With no KEY, reads keys from standard input, one per line.\n"
    "SOURCE: -s LIST | -f FILE [--mode MODE] [--hash NAME]\n"
    "        | -l 'OPTION STRING' [-b NAME=VALUE]...\n"
    "        | -t FILE [-p POOL] | -k FILE | --snapshot FILE  (see mcroute --help)\n"
    "With --replicas N: KEY<TAB>PRIMARY<TAB>REPLICA..., '<TAB>under-replicated' last\n"
    "when fewer than N distinct servers (or zones) could be found.\n";

static const char usage_dump[] =
    "Usage: mcroute dump SOURCE\n"
    "Print the continuum, one point per line: VALUE<TAB>HOST:PORT, ascending,\n"
    "VALUE in decimal. Modula placement has no continuum and is refused.\n"
    "SOURCE: -s LIST | -f FILE [--mode MODE] [--hash NAME]\n"
    "        | -l 'OPTION STRING' [-b NAME=VALUE]...\n"
    "        | -t FILE [-p POOL] | -k FILE | --snapshot FILE  (see mcroute --help)\n";

static const char usage_hash[] =
    "Usage: mcroute hash --hash NAME [KEY...]\n"
    "Print KEY<TAB>VALUE for every key, VALUE the decimal 32-bit hash.\n"
    "With no KEY, reads keys from standard input, one per line.\n"
    "NAME: default md5 crc fnv1_64 fnv1a_64 fnv1_32 fnv1a_32 hsieh murmur jenkins murmur3\n"
    "      crc16 crc32a\n";

static const char usage_snapshot[] =
    "Usage: mcroute snapshot SOURCE -o FILE\n"
    "Save the placement of SOURCE as a snapshot file (epoch 1 unless SOURCE is a\n"
    "snapshot): canonical text with its epoch and checksum, written atomically.\n"
    "SOURCE: as for locate (see mcroute --help)\n";

static const char usage_diff[] =
    "Usage: mcroute diff OLD NEW [--keys FILE] [--mode MODE] [--hash NAME]\n"
    "Compare two placements. OLD and NEW are each a server list, a server file or\n"
    "a snapshot file; --mode and --hash apply to lists and server files. Prints\n"
    "moved<TAB>FRACTION (share of the hash space whose owner changed, 6 decimals),\n"
    "then FROM<TAB>TO<TAB>FRACTION per pair of server ids, largest first; with\n"
    "--keys, a last line keys_moved<TAB>N<TAB>TOTAL for the keys of FILE.\n";

enum { OPT_HASH = 256, OPT_SNAPSHOT, OPT_REPLICAS, OPT_KEYS, OPT_TIMEOUT, OPT_POLICY, OPT_TTL };

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
    {"snapshot", required_argument, NULL, OPT_SNAPSHOT},
    {"replicas", required_argument, NULL, OPT_REPLICAS},
    {"keys", required_argument, NULL, OPT_KEYS},
    {"output", required_argument, NULL, 'o'},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"failure-policy", required_argument, NULL, OPT_POLICY},
    {"ttl", required_argument, NULL, OPT_TTL},
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

static void print_usage_and_exit(const char *usage)
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
    case OPT_SNAPSHOT: return "--snapshot";
    case OPT_REPLICAS: return "--replicas";
    case OPT_KEYS: return "--keys";
    case OPT_HASH: return "--hash";
    case OPT_TIMEOUT: return "--timeout";
    case OPT_POLICY: return "--failure-policy";
    case OPT_TTL: return "--ttl";
    default: return "?";
    }
}

static bool option_allowed(int c, unsigned allowed)
{
    switch (c) {
    case OPT_HASH: case 'h': case ':': case '?': return true;
    case 'm': return (allowed & (ALLOW_SOURCE | MIXED_ARGS)) != 0;
    case OPT_REPLICAS: return (allowed & ALLOW_REPLICAS) != 0;
    case 'o': return (allowed & ALLOW_OUTPUT) != 0;
    case OPT_KEYS: return (allowed & ALLOW_KEYS) != 0;
    case OPT_TIMEOUT: case OPT_POLICY: return (allowed & ALLOW_POOL) != 0;
    case OPT_TTL: return (allowed & ALLOW_TTL) != 0;
    default: return (allowed & ALLOW_SOURCE) != 0;
    }
}

int cli_parse_options(int argc, char **argv, cli_source *src, const char *usage, unsigned allowed)
{
    int c;

    memset(src, 0, sizeof(*src));
    src->behaviors = calloc((size_t)argc, sizeof(char *));
    if (src->behaviors == NULL)
        cli_die("out of memory");
    opterr = 0;
    optind = 1;
    const char *optstring = (allowed & MIXED_ARGS) ? ":s:f:l:b:m:t:p:k:o:h"
                                                   : "+:s:f:l:b:m:t:p:k:o:h";
    while ((c = getopt_long(argc, argv, optstring, source_opts, NULL)) != -1) {
        if (!option_allowed(c, allowed))
            cli_die("%s: option '%s' is not valid here (see --help)", argv[0], opt_name(c));
        switch (c) {
        case OPT_SNAPSHOT:
            if (src->snapshot)
                cli_die("--snapshot given twice");
            src->snapshot = optarg;
            break;
        case OPT_REPLICAS: {
            char *end;
            long n = strtol(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || n < 1 || n > 1000)
                cli_die("--replicas '%s': expected a number from 1 to 1000", optarg);
            src->replicas = n;
            break;
        }
        case 'o':
            if (src->output)
                cli_die("--output given twice");
            src->output = optarg;
            break;
        case OPT_KEYS:
            if (src->keys)
                cli_die("--keys given twice");
            src->keys = optarg;
            break;
        case OPT_TIMEOUT:
            if (src->timeout)
                cli_die("--timeout given twice");
            src->timeout = optarg;
            break;
        case OPT_POLICY:
            if (src->policy)
                cli_die("--failure-policy given twice");
            src->policy = optarg;
            break;
        case OPT_TTL:
            if (src->ttl)
                cli_die("--ttl given twice");
            src->ttl = optarg;
            break;
        case 's':
            if (src->servers)
                cli_die("-s given twice");
            src->servers = optarg;
            break;
        case 'f':
            if (src->server_file)
                cli_die("--server-file given twice");
            src->server_file = optarg;
            break;
        case 'l':
            if (src->libmemcached)
                cli_die("--libmemcached given twice");
            src->libmemcached = optarg;
            break;
        case 't':
            if (src->twemproxy)
                cli_die("--twemproxy given twice");
            src->twemproxy = optarg;
            break;
        case 'p':
            if (src->pool)
                cli_die("--pool given twice");
            src->pool = optarg;
            break;
        case 'k':
            if (src->ketama_file)
                cli_die("--ketama-file given twice");
            src->ketama_file = optarg;
            break;
        case 'b': src->behaviors[src->nbehaviors++] = optarg; break;
        case 'm':
            if (src->mode)
                cli_die("--mode given twice");
            src->mode = optarg;
            break;
        case OPT_HASH:
            if (src->hash)
                cli_die("--hash given twice");
            src->hash = optarg;
            break;
        case 'h': print_usage_and_exit(usage); break;
        case ':': /* the option was the last argument */
            cli_die("%s: option '%s' needs a value", argv[0], argv[optind - 1]);
        default:
            if (optopt != 0)
                cli_die("%s: unknown option '-%c' (see --help)", argv[0], optopt);
            cli_die("%s: unknown or ambiguous option '%s' (see --help)", argv[0], argv[optind - 1]);
        }
    }
    return optind;
}

static mcr_hash parse_hash(const char *name)
{
    mcr_hash h;
    if (mcr_hash_from_name(name, &h) != MCR_OK)
        cli_die("unknown hash '%s' (known: default md5 crc fnv1_64 fnv1a_64 fnv1_32 fnv1a_32 "
            "hsieh murmur jenkins murmur3)",
            name);
    return h;
}

/* A ring and the name to print for each of its servers. */
typedef struct placement {
    const mcr_ring *ring;
    mcr_ring *owned;    /* ring built here, or NULL */
    mcr_snapshot *snap; /* snapshot the ring belongs to, or NULL */
    char **names;       /* NULL: mcr_ring_server_name() */
} placement;

static const char *server_label(const placement *pl, uint32_t s)
{
    return pl->names ? pl->names[s] : mcr_ring_server_name(pl->ring, s);
}

static void free_names(char **names, size_t n)
{
    if (names != NULL)
        for (size_t i = 0; i < n; i++)
            free(names[i]);
    free(names);
}

static void placement_free(placement *pl)
{
    free_names(pl->names, mcr_ring_server_count(pl->ring));
    mcr_ring_free(pl->owned);
    mcr_snapshot_unref(pl->snap);
}

static mcr_config *config_from_lmc(const cli_source *src)
{
    mcr_error err;
    mcr_config *cfg = NULL;
    mcr_lmc *lmc = mcr_lmc_new();

    if (lmc == NULL)
        cli_die("out of memory");
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

/* Key hash that a user of each mode expects when none is given: the one of
 * the client the mode comes from. */
static mcr_hash default_hash_for(mcr_mode m)
{
    switch (m) {
    case MCR_MODE_KETAMA:
    case MCR_MODE_STABLE_KETAMA:
    case MCR_MODE_WEIGHTED:
    case MCR_MODE_SPY_WEIGHTED: return MCR_HASH_MD5;
    case MCR_MODE_TWEMPROXY_KETAMA:
    case MCR_MODE_TWEMPROXY_MODULA: return MCR_HASH_FNV1A_64; /* nutcracker's default */
    default: return MCR_HASH_DEFAULT;
    }
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
        cli_die("out of memory");
    if (mcr_config_load_ketama_file(cfg, src->ketama_file, &err) != MCR_OK) {
        mcr_config_free(cfg);
        cli_die("%s", err.message);
    }
    size_t n = mcr_config_server_count(cfg);
    *names = calloc(n, sizeof(**names));
    if (*names == NULL)
        cli_die("out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *a = mcr_config_ketama_address(cfg, i);
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
            "spy-weighted modula twemproxy-ketama twemproxy-modula)",
            src->mode);
    mcr_hash hash = src->hash ? parse_hash(src->hash) : default_hash_for(mode);
    mcr_config *cfg = mcr_config_new();
    if (cfg == NULL)
        cli_die("out of memory");
    mcr_config_set_mode(cfg, mode);
    mcr_config_set_hash(cfg, hash);
    int rc = list ? mcr_config_add_servers(cfg, list, &err)
                  : mcr_config_load_server_file(cfg, file, &err);
    if (rc != MCR_OK) {
        mcr_config_free(cfg);
        cli_die("%s", err.message);
    }
    return cfg;
}

/* Check the combination of source options; returns 1 for a snapshot file. */
static int check_source(const cli_source *src)
{
    int nsrc = (src->servers != NULL) + (src->server_file != NULL) +
               (src->libmemcached != NULL) + (src->twemproxy != NULL) +
               (src->ketama_file != NULL) + (src->snapshot != NULL);

    if (nsrc == 0)
        cli_die("no servers: give -s LIST, --server-file FILE, --libmemcached OPTIONS, "
            "--twemproxy FILE, --ketama-file FILE or --snapshot FILE");
    if (nsrc > 1)
        cli_die("give only one of -s, --server-file, --libmemcached, --twemproxy, "
            "--ketama-file and --snapshot");
    if (src->pool != NULL && src->twemproxy == NULL)
        cli_die("--pool applies only to --twemproxy");
    if (src->nbehaviors > 0 && src->libmemcached == NULL)
        cli_die("--behavior applies only to --libmemcached");
    if ((src->mode != NULL || src->hash != NULL) && src->servers == NULL &&
        src->server_file == NULL)
        cli_die("--mode and --hash apply only to -s and --server-file; %s",
            src->libmemcached ? "use --behavior DISTRIBUTION=... or HASH=..."
                              : "the file sets the placement");
    return src->snapshot != NULL;
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

static mcr_snapshot *load_snapshot(const char *path)
{
    mcr_error err;
    mcr_snapshot *snap = NULL;
    if (mcr_snapshot_load(path, NULL, 0, &snap, &err) != MCR_OK)
        cli_die("%s", err.message);
    return snap;
}

/* The snapshot of a SOURCE: loaded, or built (epoch 1) from its config. */
mcr_snapshot *cli_build_snapshot(const cli_source *src)
{
    mcr_error err;
    mcr_snapshot *snap = NULL;
    char **names;

    if (check_source(src))
        return load_snapshot(src->snapshot);
    mcr_config *cfg = build_config(src, &names);
    size_t n = mcr_config_server_count(cfg);
    int rc = mcr_snapshot_new(cfg, 1, &snap, &err);
    mcr_config_free(cfg);
    free_names(names, n);
    if (rc != MCR_OK)
        cli_die("%s", err.message);
    return snap;
}

static placement build_placement(const cli_source *src)
{
    mcr_error err;
    placement pl = {NULL, NULL, NULL, NULL};
    char **names;

    if (check_source(src)) {
        pl.snap = load_snapshot(src->snapshot);
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
                cli_die("out of memory");
    pl.names = names;
    return pl;
}

/* Call fn for every key: the arguments, or the lines of standard input. */
typedef void (*key_fn)(const char *key, size_t len, void *ctx);

static void for_each_key(int argc, char **argv, key_fn fn, void *ctx)
{
    if (argc > 0) {
        for (int i = 0; i < argc; i++)
            fn(argv[i], strlen(argv[i]), ctx);
        return;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, stdin)) >= 0) {
        if (n > 0 && line[n - 1] == '\n')
            n--;
        fn(line, (size_t)n, ctx);
    }
    if (ferror(stdin))
        cli_die("error reading standard input");
    free(line);
}

static void locate_one(const char *key, size_t len, void *ctx)
{
    const placement *pl = ctx;
    uint32_t s = mcr_ring_locate(pl->ring, key, len);
    fwrite(key, 1, len, stdout);
    putchar('\t');
    fputs(server_label(pl, s), stdout);
    putchar('\n');
}

/* "host:port" of snapshot server i, brackets for IPv6, into buf. */
static const char *snapshot_address(const mcr_snapshot *snap, uint32_t i, char *buf, size_t cap)
{
    mcr_server_desc d;
    if (mcr_snapshot_server(snap, i, &d) != MCR_OK)
        return "?";
    snprintf(buf, cap, strchr(d.host, ':') ? "[%s]:%d" : "%s:%d", d.host, d.port);
    return buf;
}

typedef struct replica_ctx {
    const mcr_snapshot *snap;
    size_t n;
    uint32_t *out;
} replica_ctx;

static void locate_replicas_one(const char *key, size_t len, void *ctx)
{
    const replica_ctx *rc = ctx;
    char buf[300];
    int under = 0;
    size_t got = mcr_snapshot_replicas(rc->snap, key, len, rc->n, rc->out, &under);
    fwrite(key, 1, len, stdout);
    for (size_t i = 0; i < got; i++) {
        putchar('\t');
        fputs(snapshot_address(rc->snap, rc->out[i], buf, sizeof(buf)), stdout);
    }
    if (under)
        fputs("\tunder-replicated", stdout);
    putchar('\n');
}

static int cmd_locate(int argc, char **argv)
{
    cli_source src;
    int first = cli_parse_options(argc, argv, &src, usage_locate, ALLOW_SOURCE | ALLOW_REPLICAS);
    if (src.replicas > 0) {
        replica_ctx rc = {cli_build_snapshot(&src), (size_t)src.replicas, NULL};
        rc.out = calloc(rc.n, sizeof(*rc.out));
        if (rc.out == NULL)
            cli_die("out of memory");
        for_each_key(argc - first, argv + first, locate_replicas_one, &rc);
        free(rc.out);
        mcr_snapshot_unref((mcr_snapshot *)rc.snap);
    } else {
        placement pl = build_placement(&src);
        for_each_key(argc - first, argv + first, locate_one, &pl);
        placement_free(&pl);
    }
    free(src.behaviors);
    return cli_finish_output();
}

static int cmd_snapshot(int argc, char **argv)
{
    cli_source src;
    mcr_error err;
    int first = cli_parse_options(argc, argv, &src, usage_snapshot, ALLOW_SOURCE | ALLOW_OUTPUT);
    if (first < argc)
        cli_die("snapshot: unexpected argument '%s'", argv[first]);
    if (src.output == NULL)
        cli_die("snapshot: -o FILE is required");
    mcr_snapshot *snap = cli_build_snapshot(&src);
    int rc = mcr_snapshot_save(snap, src.output, &err);
    mcr_snapshot_unref(snap);
    free(src.behaviors);
    if (rc != MCR_OK)
        cli_die("%s", err.message);
    return cli_finish_output();
}

/* One operand of diff: a snapshot file, a server file or a server list. */
static mcr_snapshot *diff_operand(const char *arg, const cli_source *opts)
{
    FILE *f = fopen(arg, "r");
    if (f != NULL) {
        char head[32] = "";
        size_t n = fread(head, 1, sizeof(head) - 1, f);
        fclose(f);
        head[n] = '\0';
        if (strncmp(head, "mcroute-snapshot", 16) == 0) {
            if (opts->mode != NULL || opts->hash != NULL)
                cli_die("diff: %s is a snapshot file, which sets its own mode and hash", arg);
            return load_snapshot(arg);
        }
    }
    cli_source one = *opts;
    if (f != NULL)
        one.server_file = arg;
    else
        one.servers = arg;
    return cli_build_snapshot(&one);
}

static int cmd_diff(int argc, char **argv)
{
    cli_source src;
    mcr_error err;
    int first = cli_parse_options(argc, argv, &src, usage_diff, ALLOW_KEYS | MIXED_ARGS);
    if (argc - first != 2)
        cli_die("diff: expected OLD and NEW (a server list, a server file or a snapshot file)");
    mcr_snapshot *a = diff_operand(argv[first], &src);
    mcr_snapshot *b = diff_operand(argv[first + 1], &src);
    mcr_diff *d = NULL;
    if (mcr_diff_new(a, b, &d, &err) != MCR_OK) {
        mcr_snapshot_unref(a);
        mcr_snapshot_unref(b);
        cli_die("diff: %s", err.message);
    }
    printf("moved\t%.6f\n", mcr_diff_moved(d));
    size_t np = mcr_diff_pair_count(d);
    for (size_t i = 0; i < np; i++) {
        mcr_diff_pair pr;
        if (mcr_diff_pair_get(d, i, &pr) == MCR_OK)
            printf("%s\t%s\t%.6f\n", pr.from, pr.to, pr.fraction);
    }
    if (src.keys != NULL) {
        FILE *kf = fopen(src.keys, "r");
        if (kf == NULL) {
            mcr_diff_free(d);
            mcr_snapshot_unref(a);
            mcr_snapshot_unref(b);
            cli_die("diff: cannot open %s: %s", src.keys, strerror(errno));
        }
        char *line = NULL;
        size_t cap = 0, moved = 0, total = 0;
        ssize_t n;
        while ((n = getline(&line, &cap, kf)) >= 0) {
            if (n > 0 && line[n - 1] == '\n')
                n--;
            moved += mcr_diff_key_moved(d, line, (size_t)n) != 0;
            total++;
        }
        free(line);
        fclose(kf);
        printf("keys_moved\t%zu\t%zu\n", moved, total);
    }
    mcr_diff_free(d);
    mcr_snapshot_unref(a);
    mcr_snapshot_unref(b);
    free(src.behaviors);
    return cli_finish_output();
}

static int cmd_dump(int argc, char **argv)
{
    cli_source src;
    int first = cli_parse_options(argc, argv, &src, usage_dump, ALLOW_SOURCE);
    if (first < argc)
        cli_die("dump: unexpected argument '%s'", argv[first]);
    placement pl = build_placement(&src);
    mcr_mode m = mcr_ring_mode(pl.ring);
    if (m == MCR_MODE_MODULA || m == MCR_MODE_TWEMPROXY_MODULA) {
        placement_free(&pl);
        free(src.behaviors);
        cli_die("dump: modula placement has no continuum (server = hash %% %s)",
            m == MCR_MODE_MODULA ? "server count" : "total weight");
    }
    size_t n = mcr_ring_point_count(pl.ring);
    for (size_t i = 0; i < n; i++) {
        uint32_t v, s;
        mcr_ring_point(pl.ring, i, &v, &s);
        printf("%u\t%s\n", (unsigned)v, server_label(&pl, s));
    }
    placement_free(&pl);
    free(src.behaviors);
    return cli_finish_output();
}

static void hash_one(const char *key, size_t len, void *ctx)
{
    mcr_hash h = *(const mcr_hash *)ctx;
    fwrite(key, 1, len, stdout);
    printf("\t%u\n", (unsigned)mcr_hash_key(h, key, len));
}

static int cmd_hash(int argc, char **argv)
{
    cli_source src;
    int first = cli_parse_options(argc, argv, &src, usage_hash, 0);
    if (src.hash == NULL)
        cli_die("hash: --hash NAME is required");
    mcr_hash h = parse_hash(src.hash);
    for_each_key(argc - first, argv + first, hash_one, &h);
    free(src.behaviors);
    return cli_finish_output();
}

int main(int argc, char **argv)
{
    if (argc < 2)
        cli_die("no command given (see mcroute --help)");
    /* simulate (tools/simulate.c): its own options and help. */
    if (strcmp(argv[1], "simulate") == 0)
        return cli_simulate(argc - 1, argv + 1);
    if (argc == 3 && strcmp(argv[1], "help") == 0 && strcmp(argv[2], "simulate") == 0) {
        fputs(cli_usage_simulate, stdout);
        return cli_finish_output();
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0)
        print_usage_and_exit(usage_main);
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        printf("mcroute %s\n", mcr_version_string());
        return cli_finish_output();
    }
    if (strcmp(cmd, "help") == 0) {
        if (argc <= 2)
            print_usage_and_exit(usage_main);
        const char *c = argv[2];
        if (strcmp(c, "locate") == 0)
            print_usage_and_exit(usage_locate);
        if (strcmp(c, "dump") == 0)
            print_usage_and_exit(usage_dump);
        if (strcmp(c, "hash") == 0)
            print_usage_and_exit(usage_hash);
        if (strcmp(c, "snapshot") == 0)
            print_usage_and_exit(usage_snapshot);
        if (strcmp(c, "diff") == 0)
            print_usage_and_exit(usage_diff);
        if (strcmp(c, "set") == 0)
            print_usage_and_exit(cli_usage_set);
        if (strcmp(c, "get") == 0)
            print_usage_and_exit(cli_usage_get);
        if (strcmp(c, "delete") == 0)
            print_usage_and_exit(cli_usage_delete);
        if (strcmp(c, "probe") == 0)
            print_usage_and_exit(cli_usage_probe);
        cli_die("help: unknown command '%s' (commands: locate dump hash snapshot diff set get "
                "delete probe)",
                c);
    }
    cli_progname = "mcroute";
    if (strcmp(cmd, "locate") == 0)
        return cmd_locate(argc - 1, argv + 1);
    if (strcmp(cmd, "dump") == 0)
        return cmd_dump(argc - 1, argv + 1);
    if (strcmp(cmd, "hash") == 0)
        return cmd_hash(argc - 1, argv + 1);
    if (strcmp(cmd, "snapshot") == 0)
        return cmd_snapshot(argc - 1, argv + 1);
    if (strcmp(cmd, "diff") == 0)
        return cmd_diff(argc - 1, argv + 1);
    if (strcmp(cmd, "set") == 0)
        return cli_cmd_set(argc - 1, argv + 1);
    if (strcmp(cmd, "get") == 0)
        return cli_cmd_get(argc - 1, argv + 1);
    if (strcmp(cmd, "delete") == 0)
        return cli_cmd_delete(argc - 1, argv + 1);
    if (strcmp(cmd, "probe") == 0)
        return cli_cmd_probe(argc - 1, argv + 1);
    cli_die("unknown command '%s' (see mcroute --help)", cmd);
}
