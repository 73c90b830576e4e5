/* mcroute.c: the mcroute command line: where keys go (locate), the continuum (dump), key hashes (hash). */
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcroute.h"
#include "mcroute_ketama.h"
#include "mcroute_libmemcached.h"
#include "mcroute_twemproxy.h"

#define EXIT_USAGE 2 /* bad input of any kind: nothing was printed on stdout */

static const char *progname = "mcroute";

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", progname);
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
    "and libketama.\n"
    "\n"
    "Commands:\n"
    "  locate SOURCE [KEY...]      print KEY<TAB>HOST:PORT for each key\n"
    "  dump SOURCE                 print the continuum, VALUE<TAB>HOST:PORT per point\n"
    "  hash --hash NAME [KEY...]   print KEY<TAB>VALUE (decimal uint32) for each key\n"
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
    "  -m, --mode MODE             with -s/-f: ketama (default, libketama), consistent,\n"
    "                              weighted, spy, spy-weighted, modula,\n"
    "                              twemproxy-ketama, twemproxy-modula\n"
    "      --hash NAME             with -s/-f: key hash (default md5 for ketama,\n"
    "                              weighted, spy-weighted; fnv1a_64 for twemproxy-*;\n"
    "                              'default' otherwise)\n"
    "\n"
    "Hashes: default md5 crc fnv1_64 fnv1a_64 fnv1_32 fnv1a_32 hsieh murmur jenkins murmur3\n"
    "        crc16 crc32a\n"
    "\n"
    "With no KEY, keys are read from standard input, one per line (the line without\n"
    "its newline; every other byte is kept). Bad input prints a message on stderr,\n"
    "nothing on stdout, and exits with status 2.\n"
    "\n"
    "Options: -h, --help (also after a command), -V, --version.\n";

static const char usage_locate[] =
    "Usage: mcroute locate SOURCE [KEY...]\n"
    "Print KEY<TAB>HOST:PORT for every key: the server that owns it, as it was\n"
    "configured. With no KEY, reads keys from standard input, one per line.\n"
    "SOURCE: -s LIST | -f FILE [--mode MODE] [--hash NAME]\n"
    "        | -l 'OPTION STRING' [-b NAME=VALUE]...\n"
    "        | -t FILE [-p POOL] | -k FILE            (see mcroute --help)\n";

static const char usage_dump[] =
    "Usage: mcroute dump SOURCE\n"
    "Print the continuum, one point per line: VALUE<TAB>HOST:PORT, ascending,\n"
    "VALUE in decimal. Modula placement has no continuum and is refused.\n"
    "SOURCE: -s LIST | -f FILE [--mode MODE] [--hash NAME]\n"
    "        | -l 'OPTION STRING' [-b NAME=VALUE]...\n"
    "        | -t FILE [-p POOL] | -k FILE            (see mcroute --help)\n";

static const char usage_hash[] =
    "Usage: mcroute hash --hash NAME [KEY...]\n"
    "Print KEY<TAB>VALUE for every key, VALUE the decimal 32-bit hash.\n"
    "With no KEY, reads keys from standard input, one per line.\n"
    "NAME: default md5 crc fnv1_64 fnv1a_64 fnv1_32 fnv1a_32 hsieh murmur jenkins murmur3\n"
    "      crc16 crc32a\n";

enum { OPT_HASH = 256 };

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
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* The source options, collected before anything is built so their order and
 * combinations can be checked. */
typedef struct source {
    const char *servers, *server_file, *libmemcached, *mode, *hash;
    const char *twemproxy, *pool, *ketama_file;
    const char **behaviors;
    size_t nbehaviors;
} source;

/* Flush stdout and fail if anything could not be written (a full disk, a
 * closed pipe): output that silently lost lines is worse than an error. */
static int finish_output(void)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "%s: error writing standard output\n", progname);
        return 1;
    }
    return EXIT_SUCCESS;
}

static void print_usage_and_exit(const char *usage)
{
    fputs(usage, stdout);
    exit(finish_output());
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
    case OPT_HASH: return "--hash";
    default: return "?";
    }
}

/* Parse argv with getopt_long; returns the index of the first non-option. */
static int parse_options(int argc, char **argv, source *src, const char *usage, bool allow_source)
{
    int c;

    memset(src, 0, sizeof(*src));
    src->behaviors = calloc((size_t)argc, sizeof(char *));
    if (src->behaviors == NULL)
        die("out of memory");
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "+:s:f:l:b:m:t:p:k:h", source_opts, NULL)) != -1) {
        if (!allow_source && c != OPT_HASH && c != 'h' && c != ':' && c != '?')
            die("%s: option '%s' is not valid here (see --help)", argv[0], opt_name(c));
        switch (c) {
        case 's':
            if (src->servers)
                die("-s given twice");
            src->servers = optarg;
            break;
        case 'f':
            if (src->server_file)
                die("--server-file given twice");
            src->server_file = optarg;
            break;
        case 'l':
            if (src->libmemcached)
                die("--libmemcached given twice");
            src->libmemcached = optarg;
            break;
        case 't':
            if (src->twemproxy)
                die("--twemproxy given twice");
            src->twemproxy = optarg;
            break;
        case 'p':
            if (src->pool)
                die("--pool given twice");
            src->pool = optarg;
            break;
        case 'k':
            if (src->ketama_file)
                die("--ketama-file given twice");
            src->ketama_file = optarg;
            break;
        case 'b': src->behaviors[src->nbehaviors++] = optarg; break;
        case 'm':
            if (src->mode)
                die("--mode given twice");
            src->mode = optarg;
            break;
        case OPT_HASH:
            if (src->hash)
                die("--hash given twice");
            src->hash = optarg;
            break;
        case 'h': print_usage_and_exit(usage); break;
        case ':': /* the option was the last argument */
            die("%s: option '%s' needs a value", argv[0], argv[optind - 1]);
        default:
            if (optopt != 0)
                die("%s: unknown option '-%c' (see --help)", argv[0], optopt);
            die("%s: unknown or ambiguous option '%s' (see --help)", argv[0], argv[optind - 1]);
        }
    }
    return optind;
}

static mcr_hash parse_hash(const char *name)
{
    mcr_hash h;
    if (mcr_hash_from_name(name, &h) != MCR_OK)
        die("unknown hash '%s' (known: default md5 crc fnv1_64 fnv1a_64 fnv1_32 fnv1a_32 "
            "hsieh murmur jenkins murmur3)",
            name);
    return h;
}

/* A ring and the name to print for each of its servers. */
typedef struct placement {
    mcr_ring *ring;
    char **names; /* NULL: mcr_ring_server_name() */
} placement;

static const char *server_label(const placement *pl, uint32_t s)
{
    return pl->names ? pl->names[s] : mcr_ring_server_name(pl->ring, s);
}

static void placement_free(placement *pl)
{
    if (pl->names != NULL)
        for (size_t i = 0; i < mcr_ring_server_count(pl->ring); i++)
            free(pl->names[i]);
    free(pl->names);
    mcr_ring_free(pl->ring);
}

static mcr_ring *build_from_lmc(const source *src)
{
    mcr_error err;
    mcr_ring *ring = NULL;
    mcr_lmc *lmc = mcr_lmc_new();

    if (lmc == NULL)
        die("out of memory");
    if (mcr_lmc_parse_options(lmc, src->libmemcached, &err) != MCR_OK) {
        mcr_lmc_free(lmc);
        die("libmemcached options: %s", err.message);
    }
    for (size_t i = 0; i < src->nbehaviors; i++) {
        const char *b = src->behaviors[i];
        const char *eq = strchr(b, '=');
        if (eq == NULL || eq == b) {
            mcr_lmc_free(lmc);
            die("--behavior '%s': expected NAME=VALUE", b);
        }
        char name[128];
        size_t nl = (size_t)(eq - b);
        if (nl >= sizeof(name)) {
            mcr_lmc_free(lmc);
            die("--behavior '%.40s...': unknown behavior name", b);
        }
        memcpy(name, b, nl);
        name[nl] = '\0';
        if (mcr_lmc_set_behavior_name(lmc, name, eq + 1, &err) != MCR_OK) {
            mcr_lmc_free(lmc);
            die("--behavior %s: %s", b, err.message);
        }
    }
    int rc = mcr_lmc_ring(lmc, &ring, &err);
    mcr_lmc_free(lmc);
    if (rc != MCR_OK)
        die("%s", err.message);
    return ring;
}

/* Key hash that a user of each mode expects when none is given: the one of
 * the client the mode comes from. */
static mcr_hash default_hash_for(mcr_mode m)
{
    switch (m) {
    case MCR_MODE_KETAMA:
    case MCR_MODE_WEIGHTED:
    case MCR_MODE_SPY_WEIGHTED: return MCR_HASH_MD5;
    case MCR_MODE_TWEMPROXY_KETAMA:
    case MCR_MODE_TWEMPROXY_MODULA: return MCR_HASH_FNV1A_64; /* nutcracker's default */
    default: return MCR_HASH_DEFAULT;
    }
}

static mcr_ring *build_from_twemproxy(const source *src)
{
    mcr_error err;
    mcr_twem *tw = NULL;
    mcr_ring *ring = NULL;
    size_t pool = 0;

    if (mcr_twem_load(src->twemproxy, &tw, &err) != MCR_OK)
        die("%s", err.message);
    int rc = MCR_OK;
    if (src->pool != NULL)
        rc = mcr_twem_pool_index(tw, src->pool, &pool, &err);
    if (rc == MCR_OK)
        rc = mcr_twem_ring(tw, pool, &ring, &err);
    mcr_twem_free(tw);
    if (rc != MCR_OK)
        die("%s", err.message);
    return ring;
}

/* A libketama file: its servers print as their addresses are written. */
static placement build_from_ketama_file(const source *src)
{
    mcr_error err;
    placement pl = {NULL, NULL};
    mcr_config *cfg = mcr_config_new();

    if (cfg == NULL)
        die("out of memory");
    int rc = mcr_config_load_ketama_file(cfg, src->ketama_file, &err);
    if (rc == MCR_OK)
        rc = mcr_ring_new(cfg, &pl.ring, &err);
    if (rc != MCR_OK) {
        mcr_config_free(cfg);
        die("%s", err.message);
    }
    size_t n = mcr_ring_server_count(pl.ring);
    pl.names = calloc(n, sizeof(*pl.names));
    if (pl.names == NULL)
        die("out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *a = mcr_config_ketama_address(cfg, i);
        pl.names[i] = strdup(a ? a : mcr_ring_server_name(pl.ring, i));
        if (pl.names[i] == NULL)
            die("out of memory");
    }
    mcr_config_free(cfg);
    return pl;
}

static placement build_placement(const source *src)
{
    int nsrc = (src->servers != NULL) + (src->server_file != NULL) +
               (src->libmemcached != NULL) + (src->twemproxy != NULL) +
               (src->ketama_file != NULL);
    mcr_error err;
    placement pl = {NULL, NULL};
    mcr_mode mode = MCR_MODE_KETAMA;

    if (nsrc == 0)
        die("no servers: give -s LIST, --server-file FILE, --libmemcached OPTIONS, "
            "--twemproxy FILE or --ketama-file FILE");
    if (nsrc > 1)
        die("give only one of -s, --server-file, --libmemcached, --twemproxy and "
            "--ketama-file");
    if (src->pool != NULL && src->twemproxy == NULL)
        die("--pool applies only to --twemproxy");
    if (src->nbehaviors > 0 && src->libmemcached == NULL)
        die("--behavior applies only to --libmemcached");
    if ((src->mode != NULL || src->hash != NULL) && src->servers == NULL &&
        src->server_file == NULL)
        die("--mode and --hash apply only to -s and --server-file; %s",
            src->libmemcached ? "use --behavior DISTRIBUTION=... or HASH=..."
                              : "the file sets the placement");
    if (src->libmemcached != NULL) {
        pl.ring = build_from_lmc(src);
        return pl;
    }
    if (src->twemproxy != NULL) {
        pl.ring = build_from_twemproxy(src);
        return pl;
    }
    if (src->ketama_file != NULL)
        return build_from_ketama_file(src);
    if (src->mode != NULL && mcr_mode_from_name(src->mode, &mode) != MCR_OK)
        die("unknown mode '%s' (known: ketama consistent weighted spy spy-weighted modula "
            "twemproxy-ketama twemproxy-modula)",
            src->mode);

    mcr_hash hash = src->hash ? parse_hash(src->hash) : default_hash_for(mode);
    mcr_config *cfg = mcr_config_new();
    if (cfg == NULL)
        die("out of memory");
    mcr_config_set_mode(cfg, mode);
    mcr_config_set_hash(cfg, hash);
    int rc = src->servers ? mcr_config_add_servers(cfg, src->servers, &err)
                          : mcr_config_load_server_file(cfg, src->server_file, &err);
    if (rc == MCR_OK)
        rc = mcr_ring_new(cfg, &pl.ring, &err);
    mcr_config_free(cfg);
    if (rc != MCR_OK)
        die("%s", err.message);
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
        die("error reading standard input");
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

static int cmd_locate(int argc, char **argv)
{
    source src;
    int first = parse_options(argc, argv, &src, usage_locate, true);
    placement pl = build_placement(&src);
    for_each_key(argc - first, argv + first, locate_one, &pl);
    placement_free(&pl);
    free(src.behaviors);
    return finish_output();
}

static int cmd_dump(int argc, char **argv)
{
    source src;
    int first = parse_options(argc, argv, &src, usage_dump, true);
    if (first < argc)
        die("dump: unexpected argument '%s'", argv[first]);
    placement pl = build_placement(&src);
    mcr_mode m = mcr_ring_mode(pl.ring);
    if (m == MCR_MODE_MODULA || m == MCR_MODE_TWEMPROXY_MODULA) {
        placement_free(&pl);
        free(src.behaviors);
        die("dump: modula placement has no continuum (server = hash %% %s)",
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
    return finish_output();
}

static void hash_one(const char *key, size_t len, void *ctx)
{
    mcr_hash h = *(const mcr_hash *)ctx;
    fwrite(key, 1, len, stdout);
    printf("\t%u\n", (unsigned)mcr_hash_key(h, key, len));
}

static int cmd_hash(int argc, char **argv)
{
    source src;
    int first = parse_options(argc, argv, &src, usage_hash, false);
    if (src.hash == NULL)
        die("hash: --hash NAME is required");
    mcr_hash h = parse_hash(src.hash);
    for_each_key(argc - first, argv + first, hash_one, &h);
    free(src.behaviors);
    return finish_output();
}

int main(int argc, char **argv)
{
    if (argc < 2)
        die("no command given (see mcroute --help)");
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0)
        print_usage_and_exit(usage_main);
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        printf("mcroute %s\n", mcr_version_string());
        return finish_output();
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
        die("help: unknown command '%s' (commands: locate dump hash)", c);
    }
    progname = "mcroute";
    if (strcmp(cmd, "locate") == 0)
        return cmd_locate(argc - 1, argv + 1);
    if (strcmp(cmd, "dump") == 0)
        return cmd_dump(argc - 1, argv + 1);
    if (strcmp(cmd, "hash") == 0)
        return cmd_hash(argc - 1, argv + 1);
    die("unknown command '%s' (see mcroute --help)", cmd);
}
