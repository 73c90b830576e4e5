/* SPDX-License-Identifier: BSD-3-Clause */
/* simulate.c: mcroute simulate: placement modes compared on one workload and one membership change (moved shares against the ideal, balance, lookup cost, build time, memory, a points sweep), as tables, JSON or an SVG chart. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mcroute.h"
#include "mcroute_snapshot.h"

#include "cli.h"
#include "simulate.h"

/* ------------------------------------------------------------ limits and defaults */

#define SIM_KEYS_DEFAULT 100000u
#define SIM_KEYS_MAX 10000000u
#define SIM_SERVERS_MAX 100000u       /* --server-count */
#define SIM_REQUESTS_DEFAULT 1000000u
#define SIM_REQUESTS_MAX 100000000u   /* running totals stay within uint32 */
#define SIM_INFLIGHT_MAX 10000000u
#define SIM_VALUE_MAX 1073741824.0    /* a workload file's BYTES */
#define SIM_GEN_VALUE_MAX 1048576.0   /* generated sizes: memcached's default item limit */
#define SIM_SWEEP_DEFAULT 40960u      /* points per unit of weight */
/* The sweep stops before a continuum of more points than this (64 MiB). */
#define SIM_SWEEP_POINTS_MAX 8388608.0
#define SIM_THRESHOLD_DEFAULT 0.10
#define SIM_EPSILON_DEFAULT 0.25      /* Mirrokni et al. suggest 0.25 */
/* stable-ketama: 40 labels of 4 points per unit of weight. */
#define SIM_POINTS_PER_WEIGHT 160u
/* Lookup timing: passes over the keys (median), each at most this long:
 * a slow mode (rendezvous over thousands of servers) times a prefix of the
 * keys rather than all of them. */
#define SIM_PASSES 5
#define SIM_PASS_BUDGET_NS 40000000.0
#define SIM_BUILDS 3                  /* builds timed per mode (median) */
#define SIM_DEFAULT_MODES "ketama,stable-ketama,jump,rendezvous,maglev,slots,bounded"

const char cli_usage_simulate[] =
    "Usage: mcroute simulate SERVERS CHANGE... [WORKLOAD] [OPTIONS]\n"
    "Compare placement modes on one workload and one change of membership: the\n"
    "shares of keys, bytes and requests that move (against the ideal), the balance\n"
    "of keys, bytes and requests per server after the change (peak-to-mean and\n"
    "coefficient of variation, relative to weight), lookup cost, build time and\n"
    "memory; then how the balance of stable-ketama improves with points per server.\n"
    "SERVERS (one of):\n"
    "  -s, --servers LIST        host[:port[:weight]],... as for locate\n"
    "  -f, --server-file FILE    lines host[:port] [weight=W] [zone=Z] [id=NAME]\n"
    "  -n, --server-count N      N servers 10.0.0.1:11211, 10.0.0.2:11211, ...\n"
    "CHANGE (at least one; several are applied in order, as one batch):\n"
    "      --add SERVER          'host[:port[:weight]] [weight=W] [zone=Z] [id=NAME]'\n"
    "      --remove ID           remove the server with this id (default host:port)\n"
    "      --reweight ID=W       give a server weight W\n"
    "      --fail ID             set a server DOWN (listed, owns no keys)\n"
    "      --fail-zone ZONE      set every server of ZONE DOWN\n"
    "WORKLOAD (generated, the same for the same seed; or read from a file):\n"
    "      --keys N              number of keys (default 100000, at most 10000000)\n"
    "      --seed S              seed of keys, sizes and rates (default 1)\n"
    "      --zipf S              request rates Zipf(S) over the keys in a random\n"
    "                            order (default 1; 0: all keys alike)\n"
    "      --sizes DIST          value sizes: lognormal:MEDIAN:SIGMA (default\n"
    "                            lognormal:500:1), fixed:BYTES or uniform:MIN:MAX\n"
    "      --workload FILE       KEY<TAB>BYTES<TAB>QPS lines instead\n"
    "Options:\n"
    "      --modes LIST          modes to compare (default ketama,stable-ketama,\n"
    "                            jump,rendezvous,maglev,slots,bounded; all: every mode)\n"
    "      --epsilon E           bounded: a server takes at most (1+E) times the\n"
    "                            mean load (default 0.25)\n"
    "      --requests R          bounded: requests simulated (default 1000000)\n"
    "      --inflight C          bounded: requests in flight, each completing C\n"
    "                            requests later (default 0: the running totals)\n"
    "      --sweep POINTS        stable-ketama from 160 to POINTS points per unit of\n"
    "                            weight, doubling (default 10240; 0: no sweep)\n"
    "      --threshold T         diminishing returns: a doubling of points improves\n"
    "                            the keys' cv by less than T (default 0.1: 10%)\n"
    "      --json                one JSON document instead of the tables\n"
    "      --svg FILE            also write an SVG chart to FILE\n"
    "Ideal moved share: the weight-share difference between the placements before\n"
    "and after (1/(N+1) for one server added to N equal ones); the modes that ignore\n"
    "weights (consistent, spy, modula) are held to equal shares. slots: the change\n"
    "is followed by the slot plan (mcr_slots_plan). See mcroute(1).\n";

/* ------------------------------------------------------------ small helpers */

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL)
        cli_fail("simulate: out of memory");
    return p;
}

static char *xstrdup(const char *s)
{
    char *d = strdup(s);
    if (d == NULL)
        cli_fail("simulate: out of memory");
    return d;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Bytes the heap holds: the memory a snapshot takes is the growth of this
 * across its build, while it is alive. glibc's counters; under ASan or TSan,
 * whose allocators glibc does not see, the sanitizer runtime's own (declared
 * here: GCC ships no header for it). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
size_t __sanitizer_get_current_allocated_bytes(void);

static size_t heap_in_use(void)
{
    return __sanitizer_get_current_allocated_bytes();
}
#else
static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}
#endif

/* SplitMix64 (Steele, Lea and Flood): a fixed sequence for a seed, so a
 * workload is the same on every machine. */
static uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double rng_unit(uint64_t *state)
{
    return (double)(rng_next(state) >> 11) * 0x1.0p-53;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

static unsigned long long parse_count(const char *opt, const char *s, unsigned long long min,
                                      unsigned long long max)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*s < '0' || *s > '9' || *end != '\0' || errno != 0 || v < min || v > max)
        cli_die("simulate: %s '%s': expected a whole number from %llu to %llu", opt, s, min, max);
    return v;
}

static double parse_real(const char *opt, const char *s, double min, double max)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*s == '\0' || *end != '\0' || errno != 0 || !isfinite(v) || v < min || v > max)
        cli_die("simulate: %s '%s': expected a number from %g to %g", opt, s, min, max);
    return v;
}

/* ------------------------------------------------------------ options */

typedef enum change_op { CH_ADD, CH_REMOVE, CH_REWEIGHT, CH_FAIL, CH_FAIL_ZONE } change_op;

typedef struct change_spec {
    change_op op;
    const char *arg;    /* as given, for messages and output */
    char *id;           /* remove, reweight, fail; add: the id given, or NULL */
    char *zone;         /* add: its zone or NULL; fail-zone: the zone */
    char *host;         /* add */
    int port;           /* add */
    uint32_t weight;    /* add, reweight */
} change_spec;

typedef enum size_kind { SIZE_LOGNORMAL, SIZE_FIXED, SIZE_UNIFORM } size_kind;

typedef struct size_dist {
    size_kind kind;
    double a, b; /* lognormal: median, sigma; fixed: bytes; uniform: min, max */
} size_dist;

typedef struct sim_opts {
    const char *servers, *server_file;
    unsigned long server_count;
    change_spec *changes;
    size_t nchanges;
    size_t keys;
    uint64_t seed;
    double zipf;
    const char *sizes_text;
    size_dist sizes;
    const char *workload_file;
    bool generated_given; /* --keys, --seed, --zipf or --sizes */
    mcr_mode modes[MCR_MODE_COUNT];
    size_t nmodes;
    double epsilon;
    size_t requests, inflight;
    unsigned sweep_max;
    double threshold;
    bool json;
    const char *svg;
} sim_opts;

enum {
    OPT_ADD = 256, OPT_REMOVE, OPT_REWEIGHT, OPT_FAIL, OPT_FAIL_ZONE, OPT_KEYS, OPT_SEED,
    OPT_ZIPF, OPT_SIZES, OPT_WORKLOAD, OPT_MODES, OPT_EPSILON, OPT_REQUESTS, OPT_INFLIGHT,
    OPT_SWEEP, OPT_THRESHOLD, OPT_JSON, OPT_SVG
};

static const struct option sim_long_opts[] = {
    {"servers", required_argument, NULL, 's'},
    {"server-file", required_argument, NULL, 'f'},
    {"server-count", required_argument, NULL, 'n'},
    {"add", required_argument, NULL, OPT_ADD},
    {"remove", required_argument, NULL, OPT_REMOVE},
    {"reweight", required_argument, NULL, OPT_REWEIGHT},
    {"fail", required_argument, NULL, OPT_FAIL},
    {"fail-zone", required_argument, NULL, OPT_FAIL_ZONE},
    {"keys", required_argument, NULL, OPT_KEYS},
    {"seed", required_argument, NULL, OPT_SEED},
    {"zipf", required_argument, NULL, OPT_ZIPF},
    {"sizes", required_argument, NULL, OPT_SIZES},
    {"workload", required_argument, NULL, OPT_WORKLOAD},
    {"modes", required_argument, NULL, OPT_MODES},
    {"epsilon", required_argument, NULL, OPT_EPSILON},
    {"requests", required_argument, NULL, OPT_REQUESTS},
    {"inflight", required_argument, NULL, OPT_INFLIGHT},
    {"sweep", required_argument, NULL, OPT_SWEEP},
    {"threshold", required_argument, NULL, OPT_THRESHOLD},
    {"json", no_argument, NULL, OPT_JSON},
    {"svg", required_argument, NULL, OPT_SVG},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static void parse_sizes(sim_opts *o, const char *s)
{
    char kind[16];
    double a = 0, b = 0;
    char extra;
    const char *colon = strchr(s, ':');
    size_t kl = colon ? (size_t)(colon - s) : strlen(s);
    if (kl >= sizeof(kind))
        kl = sizeof(kind) - 1;
    memcpy(kind, s, kl);
    kind[kl] = '\0';
    if (strcmp(kind, "lognormal") == 0 && sscanf(s, "lognormal:%lf:%lf%c", &a, &b, &extra) == 2 &&
        a >= 1 && a <= SIM_GEN_VALUE_MAX && b >= 0 && b <= 10)
        o->sizes = (size_dist){SIZE_LOGNORMAL, a, b};
    else if (strcmp(kind, "fixed") == 0 && sscanf(s, "fixed:%lf%c", &a, &extra) == 1 && a >= 0 &&
             a <= SIM_GEN_VALUE_MAX && a == floor(a))
        o->sizes = (size_dist){SIZE_FIXED, a, a};
    else if (strcmp(kind, "uniform") == 0 &&
             sscanf(s, "uniform:%lf:%lf%c", &a, &b, &extra) == 2 && a >= 0 && a <= b &&
             b <= SIM_GEN_VALUE_MAX && a == floor(a) && b == floor(b))
        o->sizes = (size_dist){SIZE_UNIFORM, a, b};
    else
        cli_die("simulate: --sizes '%s': expected lognormal:MEDIAN:SIGMA (MEDIAN 1 to "
                "1048576, SIGMA 0 to 10), fixed:BYTES or uniform:MIN:MAX (bytes, at most "
                "1048576)",
                s);
    o->sizes_text = s;
}

static void parse_modes(sim_opts *o, const char *list)
{
    o->nmodes = 0;
    if (strcmp(list, "all") == 0) {
        for (int m = 0; m < MCR_MODE_COUNT; m++)
            o->modes[o->nmodes++] = (mcr_mode)m;
        return;
    }
    char *copy = xstrdup(list), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        mcr_mode m;
        if (mcr_mode_from_name(t, &m) != MCR_OK)
            cli_die("simulate: --modes: unknown mode '%s' (known: ketama stable-ketama jump "
                    "rendezvous maglev slots bounded consistent weighted spy spy-weighted "
                    "modula twemproxy-ketama twemproxy-modula, or all)",
                    t);
        for (size_t i = 0; i < o->nmodes; i++)
            if (o->modes[i] == m)
                cli_die("simulate: --modes: '%s' given twice", t);
        o->modes[o->nmodes++] = m;
    }
    free(copy);
    if (o->nmodes == 0)
        cli_die("simulate: --modes '%s': no mode", list);
}

/* --add 'host[:port[:weight]] [weight=W] [zone=Z] [id=NAME]': the item is
 * checked by the library (a config of its own), the attributes here. */
static void parse_add(change_spec *c, const char *arg)
{
    mcr_error err;
    char *copy = xstrdup(arg), *save = NULL;
    char *item = strtok_r(copy, " \t", &save);
    bool weight_given = false;
    if (item == NULL)
        cli_die("simulate: --add '%s': expected host[:port[:weight]] [weight=W] [zone=Z] "
                "[id=NAME]",
                arg);
    for (char *t = strtok_r(NULL, " \t", &save); t != NULL; t = strtok_r(NULL, " \t", &save)) {
        if (strncmp(t, "weight=", 7) == 0 && !weight_given) {
            c->weight = (uint32_t)parse_count("--add weight", t + 7, 1, MCR_WEIGHT_MAX);
            weight_given = true;
        } else if (strncmp(t, "zone=", 5) == 0 && c->zone == NULL && t[5] != '\0')
            c->zone = xstrdup(t + 5);
        else if (strncmp(t, "id=", 3) == 0 && c->id == NULL && t[3] != '\0')
            c->id = xstrdup(t + 3);
        else
            cli_die("simulate: --add '%s': '%s' is not weight=W, zone=Z or id=NAME (each at "
                    "most once)",
                    arg, t);
    }
    mcr_config *cfg = mcr_config_new();
    mcr_snapshot *one = NULL;
    if (cfg == NULL)
        cli_fail("simulate: out of memory");
    if (mcr_config_add_servers(cfg, item, &err) != MCR_OK ||
        mcr_snapshot_new(cfg, 1, &one, &err) != MCR_OK)
        cli_die("simulate: --add '%s': %s", arg, err.message);
    mcr_server_desc d;
    mcr_snapshot_server(one, 0, &d);
    if (weight_given && d.weight != 1)
        cli_die("simulate: --add '%s': weight given twice", arg);
    c->host = xstrdup(d.host);
    c->port = d.port;
    if (!weight_given)
        c->weight = d.weight;
    mcr_snapshot_unref(one);
    mcr_config_free(cfg);
    free(copy);
}

static change_spec *new_change(sim_opts *o, change_op op, const char *arg)
{
    change_spec *grown = realloc(o->changes, (o->nchanges + 1) * sizeof(*grown));
    if (grown == NULL)
        cli_fail("simulate: out of memory");
    o->changes = grown;
    change_spec *c = &o->changes[o->nchanges++];
    memset(c, 0, sizeof(*c));
    c->op = op;
    c->arg = arg;
    return c;
}

static void parse_options(int argc, char **argv, sim_opts *o)
{
    int c;
    memset(o, 0, sizeof(*o));
    o->keys = SIM_KEYS_DEFAULT;
    o->seed = 1;
    o->zipf = 1.0;
    o->sizes = (size_dist){SIZE_LOGNORMAL, 500, 1.0};
    o->sizes_text = "lognormal:500:1";
    o->epsilon = SIM_EPSILON_DEFAULT;
    o->requests = SIM_REQUESTS_DEFAULT;
    o->sweep_max = SIM_SWEEP_DEFAULT;
    o->threshold = SIM_THRESHOLD_DEFAULT;
    parse_modes(o, SIM_DEFAULT_MODES);
    bool modes_given = false, sweep_given = false;

    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "+:s:f:n:h", sim_long_opts, NULL)) != -1) {
        switch (c) {
        case 's':
            if (o->servers)
                cli_die("simulate: -s given twice");
            o->servers = optarg;
            break;
        case 'f':
            if (o->server_file)
                cli_die("simulate: --server-file given twice");
            o->server_file = optarg;
            break;
        case 'n':
            if (o->server_count)
                cli_die("simulate: --server-count given twice");
            o->server_count = (unsigned long)parse_count("--server-count", optarg, 1,
                                                         SIM_SERVERS_MAX);
            break;
        case OPT_ADD: parse_add(new_change(o, CH_ADD, optarg), optarg); break;
        case OPT_REMOVE: new_change(o, CH_REMOVE, optarg)->id = xstrdup(optarg); break;
        case OPT_FAIL: new_change(o, CH_FAIL, optarg)->id = xstrdup(optarg); break;
        case OPT_FAIL_ZONE: new_change(o, CH_FAIL_ZONE, optarg)->zone = xstrdup(optarg); break;
        case OPT_REWEIGHT: {
            const char *eq = strrchr(optarg, '=');
            if (eq == NULL || eq == optarg)
                cli_die("simulate: --reweight '%s': expected ID=WEIGHT", optarg);
            change_spec *ch = new_change(o, CH_REWEIGHT, optarg);
            ch->weight = (uint32_t)parse_count("--reweight", eq + 1, 1, MCR_WEIGHT_MAX);
            ch->id = xstrdup(optarg);
            ch->id[eq - optarg] = '\0';
            break;
        }
        case OPT_KEYS:
            o->keys = (size_t)parse_count("--keys", optarg, 1, SIM_KEYS_MAX);
            o->generated_given = true;
            break;
        case OPT_SEED:
            o->seed = (uint64_t)parse_count("--seed", optarg, 0, UINT64_MAX);
            o->generated_given = true;
            break;
        case OPT_ZIPF:
            o->zipf = parse_real("--zipf", optarg, 0, 10);
            o->generated_given = true;
            break;
        case OPT_SIZES:
            parse_sizes(o, optarg);
            o->generated_given = true;
            break;
        case OPT_WORKLOAD:
            if (o->workload_file)
                cli_die("simulate: --workload given twice");
            o->workload_file = optarg;
            break;
        case OPT_MODES:
            if (modes_given)
                cli_die("simulate: --modes given twice");
            modes_given = true;
            parse_modes(o, optarg);
            break;
        case OPT_EPSILON: o->epsilon = parse_real("--epsilon", optarg, 0, 100); break;
        case OPT_REQUESTS:
            o->requests = (size_t)parse_count("--requests", optarg, 1, SIM_REQUESTS_MAX);
            break;
        case OPT_INFLIGHT:
            o->inflight = (size_t)parse_count("--inflight", optarg, 0, SIM_INFLIGHT_MAX);
            break;
        case OPT_SWEEP:
            if (sweep_given)
                cli_die("simulate: --sweep given twice");
            sweep_given = true;
            o->sweep_max = (unsigned)parse_count("--sweep", optarg, 0,
                                                 (unsigned long long)SIM_POINTS_PER_WEIGHT *
                                                     MCR_STABLE_WEIGHT_MAX);
            if (o->sweep_max != 0 && o->sweep_max < SIM_POINTS_PER_WEIGHT)
                cli_die("simulate: --sweep %s: stable-ketama has at least %u points per unit "
                        "of weight (0 turns the sweep off)",
                        optarg, SIM_POINTS_PER_WEIGHT);
            break;
        case OPT_THRESHOLD: o->threshold = parse_real("--threshold", optarg, 0, 1); break;
        case OPT_JSON: o->json = true; break;
        case OPT_SVG:
            if (o->svg)
                cli_die("simulate: --svg given twice");
            o->svg = optarg;
            break;
        case 'h':
            fputs(cli_usage_simulate, stdout);
            exit(cli_finish_output());
        case ':': cli_die("simulate: option '%s' needs a value", argv[optind - 1]);
        default:
            if (optopt != 0 && strncmp(argv[optind - 1], "--", 2) == 0) {
                /* a long option that takes no value, given one: --json=yes */
                const char *arg = argv[optind - 1], *eq = strchr(arg, '=');
                cli_die("simulate: option '%.*s' takes no value",
                        (int)(eq ? (size_t)(eq - arg) : strlen(arg)), arg);
            }
            if (optopt != 0)
                cli_die("simulate: unknown option '-%c' (see mcroute help simulate)", optopt);
            cli_die("simulate: unknown or ambiguous option '%s' (see mcroute help simulate)",
                    argv[optind - 1]);
        }
    }
    if (optind < argc)
        cli_die("simulate: unexpected argument '%s'", argv[optind]);
    int nsrc = (o->servers != NULL) + (o->server_file != NULL) + (o->server_count != 0);
    if (nsrc != 1)
        cli_die("simulate: give exactly one of -s LIST, --server-file FILE and "
                "--server-count N");
    if (o->nchanges == 0)
        cli_die("simulate: no change: give --add, --remove, --reweight, --fail or --fail-zone");
    if (o->workload_file && o->generated_given)
        cli_die("simulate: --workload FILE replaces --keys, --seed, --zipf and --sizes");
}

/* ------------------------------------------------------------ workload */

typedef struct workload {
    size_t n;
    char *bytes;       /* the keys back to back */
    size_t *off;       /* key i: bytes[off[i] .. off[i + 1]) */
    double *size;      /* value bytes */
    double *qps;       /* request rate (any unit) */
    double *cum;       /* cum[i] = qps[0] + ... + qps[i]: sampling requests */
    double total_bytes, total_qps;
} workload;

static const char *key_at(const workload *w, size_t i, size_t *len)
{
    *len = w->off[i + 1] - w->off[i];
    return w->bytes + w->off[i];
}

/* One value size of the distribution. Lognormal: exp(mu + sigma Z),
 * median e^mu, Z standard normal by Box-Muller; rounded, 1 to 1 MiB. */
static double draw_size(const size_dist *d, uint64_t *rng)
{
    switch (d->kind) {
    case SIZE_FIXED: return d->a;
    case SIZE_UNIFORM: return d->a + floor(rng_unit(rng) * (d->b - d->a + 1));
    case SIZE_LOGNORMAL:
    default: {
        double u1 = 1.0 - rng_unit(rng), u2 = rng_unit(rng); /* u1 in (0, 1] */
        double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
        double v = floor(d->a * exp(d->b * z) + 0.5);
        return v < 1 ? 1 : v > SIM_GEN_VALUE_MAX ? SIM_GEN_VALUE_MAX : v;
    }
    }
}

static void workload_finish(workload *w)
{
    w->cum = xcalloc(w->n, sizeof(*w->cum));
    double c = 0, b = 0;
    for (size_t i = 0; i < w->n; i++) {
        c += w->qps[i];
        w->cum[i] = c;
        b += w->size[i];
    }
    w->total_qps = c;
    w->total_bytes = b;
}

/* Keys "obj:" + 16 hex digits of the sequence; sizes from `sizes`; the
 * rate of the key of rank r (1 = hottest) is 1 / r^s, ranks given by a
 * random permutation so that hot keys have nothing to do with key order. */
static void workload_generate(workload *w, const sim_opts *o)
{
    uint64_t rng = o->seed;
    const size_t klen = 20;
    w->n = o->keys;
    w->bytes = xcalloc(w->n, klen + 1);
    w->off = xcalloc(w->n + 1, sizeof(*w->off));
    w->size = xcalloc(w->n, sizeof(*w->size));
    w->qps = xcalloc(w->n, sizeof(*w->qps));
    for (size_t i = 0; i < w->n; i++) {
        char buf[32];
        snprintf(buf, sizeof(buf), "obj:%016" PRIx64, rng_next(&rng));
        memcpy(w->bytes + i * klen, buf, klen);
        w->off[i] = i * klen;
    }
    w->off[w->n] = w->n * klen;
    for (size_t i = 0; i < w->n; i++)
        w->size[i] = draw_size(&o->sizes, &rng);
    uint32_t *rank = xcalloc(w->n, sizeof(*rank));
    for (size_t i = 0; i < w->n; i++)
        rank[i] = (uint32_t)i;
    for (size_t i = w->n - 1; i > 0; i--) { /* Fisher-Yates */
        size_t j = (size_t)(rng_next(&rng) % (i + 1));
        uint32_t t = rank[i];
        rank[i] = rank[j];
        rank[j] = t;
    }
    for (size_t i = 0; i < w->n; i++)
        w->qps[i] = o->zipf == 0 ? 1.0 : pow((double)rank[i] + 1.0, -o->zipf);
    free(rank);
    workload_finish(w);
}

static void workload_read(workload *w, const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        cli_die("simulate: cannot open %s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0, lineno = 0, kcap = 0, kused = 0, ncap = 0;
    ssize_t len;
    w->n = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (len > 0 && line[len - 1] == '\n')
            line[--len] = '\0';
        if (len > 0 && line[len - 1] == '\r')
            line[--len] = '\0';
        if (len == 0 || line[0] == '#')
            continue;
        if ((size_t)len != strlen(line))
            cli_die("simulate: %s line %zu: a NUL byte", path, lineno);
        char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (t1 == NULL || t2 == NULL || t1 == line)
            cli_die("simulate: %s line %zu: expected KEY<TAB>BYTES<TAB>QPS", path, lineno);
        *t1 = *t2 = '\0';
        char *end;
        errno = 0;
        double bytes = strtod(t1 + 1, &end);
        if (t1[1] < '0' || t1[1] > '9' || *end != '\0' || errno != 0 || bytes != floor(bytes) ||
            bytes > SIM_VALUE_MAX)
            cli_die("simulate: %s line %zu: BYTES '%s': expected a whole number from 0 to "
                    "1073741824",
                    path, lineno, t1 + 1);
        errno = 0;
        double qps = strtod(t2 + 1, &end);
        if (t2[1] == '\0' || *end != '\0' || errno != 0 || !isfinite(qps) || qps < 0)
            cli_die("simulate: %s line %zu: QPS '%s': expected a number >= 0", path, lineno,
                    t2 + 1);
        if (w->n == SIM_KEYS_MAX)
            cli_die("simulate: %s: more than %u keys", path, SIM_KEYS_MAX);
        size_t kl = (size_t)(t1 - line);
        if (w->n + 2 > ncap) {
            ncap = ncap ? ncap * 2 : 1024;
            w->off = realloc(w->off, ncap * sizeof(*w->off));
            w->size = realloc(w->size, ncap * sizeof(*w->size));
            w->qps = realloc(w->qps, ncap * sizeof(*w->qps));
            if (!w->off || !w->size || !w->qps)
                cli_fail("simulate: out of memory");
        }
        if (kused + kl > kcap) {
            kcap = (kcap + kl) * 2;
            if ((w->bytes = realloc(w->bytes, kcap)) == NULL)
                cli_fail("simulate: out of memory");
        }
        memcpy(w->bytes + kused, line, kl);
        w->off[w->n] = kused;
        kused += kl;
        w->size[w->n] = bytes;
        w->qps[w->n] = qps;
        w->n++;
    }
    bool bad = ferror(f) != 0;
    free(line);
    fclose(f);
    if (bad)
        cli_die("simulate: error reading %s", path);
    if (w->n == 0)
        cli_die("simulate: %s: no KEY<TAB>BYTES<TAB>QPS line", path);
    w->off[w->n] = kused;
    workload_finish(w);
    if (!(w->total_qps > 0))
        cli_die("simulate: %s: every QPS is 0", path);
}

/* The key of one request, drawn in proportion to the rates. */
static size_t draw_key(const workload *w, uint64_t *rng)
{
    double u = rng_unit(rng) * w->total_qps;
    size_t lo = 0, hi = w->n - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (w->cum[mid] > u)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* ------------------------------------------------------------ servers and changes */

/* The servers as given, read back from a snapshot of them so that every
 * source (list, file, generated) is checked by the library alike. */
typedef struct server_list {
    size_t n;
    mcr_server_desc *d; /* strings owned by `snap` */
    bool *named;        /* an id was given (not the default host:port) */
    mcr_snapshot *snap;
} server_list;

static void server_list_from(server_list *sl, mcr_snapshot *snap)
{
    sl->snap = snap;
    sl->n = mcr_snapshot_server_count(snap);
    sl->d = xcalloc(sl->n, sizeof(*sl->d));
    sl->named = xcalloc(sl->n, sizeof(*sl->named));
    for (size_t i = 0; i < sl->n; i++) {
        char def[300];
        mcr_snapshot_server(snap, i, &sl->d[i]);
        snprintf(def, sizeof(def), strchr(sl->d[i].host, ':') ? "[%s]:%d" : "%s:%d",
                 sl->d[i].host, sl->d[i].port);
        sl->named[i] = strcmp(def, sl->d[i].id) != 0;
    }
}

static void server_list_free(server_list *sl)
{
    free(sl->d);
    free(sl->named);
    mcr_snapshot_unref(sl->snap);
}

/* Mode "ketama" accepts every weight: the snapshot that checks the input. */
static mcr_snapshot *base_snapshot(const sim_opts *o)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    mcr_snapshot *snap = NULL;
    int rc = MCR_OK;
    if (cfg == NULL)
        cli_fail("simulate: out of memory");
    if (o->servers)
        rc = mcr_config_add_servers(cfg, o->servers, &err);
    else if (o->server_file)
        rc = mcr_config_load_server_file(cfg, o->server_file, &err);
    else
        for (unsigned long i = 1; i <= o->server_count && rc == MCR_OK; i++) {
            char host[32];
            snprintf(host, sizeof(host), "10.%lu.%lu.%lu", (i >> 16) & 255, (i >> 8) & 255,
                     i & 255);
            rc = mcr_config_add_server(cfg, host, MCR_DEFAULT_PORT, 1, &err);
        }
    if (rc == MCR_OK)
        rc = mcr_snapshot_new(cfg, 1, &snap, &err);
    mcr_config_free(cfg);
    if (rc != MCR_OK)
        cli_die("simulate: %s", err.message);
    return snap;
}

/* The change list of the options, for a snapshot whose servers are `sl`
 * (the same ids in every mode). */
static mcr_changes *make_changes(const sim_opts *o, const server_list *sl)
{
    mcr_error err;
    mcr_changes *ch = mcr_changes_new();
    if (ch == NULL)
        cli_fail("simulate: out of memory");
    for (size_t i = 0; i < o->nchanges; i++) {
        const change_spec *c = &o->changes[i];
        int rc = MCR_OK;
        switch (c->op) {
        case CH_ADD: {
            mcr_server_desc d = {c->id, c->host, c->port, c->weight, c->zone, MCR_STATE_ACTIVE};
            rc = mcr_changes_add(ch, &d, &err);
            break;
        }
        case CH_REMOVE: rc = mcr_changes_remove(ch, c->id, &err); break;
        case CH_REWEIGHT: rc = mcr_changes_set_weight(ch, c->id, c->weight, &err); break;
        case CH_FAIL: rc = mcr_changes_set_state(ch, c->id, MCR_STATE_DOWN, &err); break;
        case CH_FAIL_ZONE: {
            /* the servers of the zone among the listed ones and those added before */
            size_t hits = 0;
            for (size_t s = 0; s < sl->n && rc == MCR_OK; s++)
                if (sl->d[s].zone && strcmp(sl->d[s].zone, c->zone) == 0) {
                    rc = mcr_changes_set_state(ch, sl->d[s].id, MCR_STATE_DOWN, &err);
                    hits++;
                }
            for (size_t a = 0; a < i && rc == MCR_OK; a++) {
                const change_spec *p = &o->changes[a];
                if (p->op == CH_ADD && p->zone && strcmp(p->zone, c->zone) == 0) {
                    char def[300];
                    snprintf(def, sizeof(def), strchr(p->host, ':') ? "[%s]:%d" : "%s:%d",
                             p->host, p->port);
                    rc = mcr_changes_set_state(ch, p->id ? p->id : def, MCR_STATE_DOWN, &err);
                    hits++;
                }
            }
            if (rc == MCR_OK && hits == 0)
                cli_die("simulate: --fail-zone '%s': no server in that zone", c->zone);
            break;
        }
        }
        if (rc != MCR_OK)
            cli_die("simulate: %s: %s", c->arg, err.message);
    }
    return ch;
}

/* ------------------------------------------------------------ per-mode runs */

typedef struct balance {
    double p2m; /* the largest share / its expected share (peak-to-mean) */
    double cv;  /* root mean square of (share / expected - 1): the coefficient
                   of variation when weights are equal */
} balance;

enum { M_KEYS, M_BYTES, M_REQS, M_COUNT };
static const char *const measure_name[M_COUNT] = {"keys", "bytes", "requests"};

typedef struct mode_run {
    mcr_mode mode;
    mcr_hash hash;
    double ideal;                      /* share that must move */
    double moved[M_COUNT];             /* share that moved */
    double stray;                      /* share of keys moved where no minimal
                                          placement moves any (see run_mode) */
    size_t slots_moved, slot_count;    /* slots: what the plan moved */
    balance before[M_COUNT], after[M_COUNT];
    size_t nafter;                     /* servers listed after the change */
    double *per_server[M_COUNT];       /* after, by snapshot index */
    double lookup_ns, build_us, apply_us;
    size_t memory;                     /* heap held by the first snapshot */
    size_t table;                      /* mcr_snapshot_table_size, points otherwise */
    /* bounded: the request stream */
    bool bounded;
    double off_owner;                  /* share of requests not served by the owner */
    double bounded_ns;                 /* mcr_snapshot_locate_bounded with the final loads */
    balance owner_requests;            /* requests balance if every one went to the owner */
} mode_run;

static bool mode_ignores_weights(mcr_mode m)
{
    return m == MCR_MODE_CONSISTENT || m == MCR_MODE_SPY || m == MCR_MODE_MODULA;
}

/* Each server's expected share in a snapshot (0 when not active). */
static void expected_shares(const mcr_snapshot *snap, mcr_mode m, double *e)
{
    size_t n = mcr_snapshot_server_count(snap);
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        mcr_server_desc d;
        mcr_snapshot_server(snap, i, &d);
        e[i] = d.state != MCR_STATE_ACTIVE ? 0 : mode_ignores_weights(m) ? 1.0 : (double)d.weight;
        total += e[i];
    }
    for (size_t i = 0; i < n; i++)
        e[i] /= total;
}

static balance balance_of(const double *x, const double *expected, size_t n)
{
    balance b = {0, 0};
    double sum = 0;
    size_t active = 0;
    for (size_t i = 0; i < n; i++)
        if (expected[i] > 0) {
            sum += x[i];
            active++;
        }
    if (sum <= 0 || active == 0)
        return b;
    double sq = 0;
    for (size_t i = 0; i < n; i++) {
        if (expected[i] <= 0)
            continue;
        double r = x[i] / sum / expected[i];
        if (r > b.p2m)
            b.p2m = r;
        sq += (r - 1) * (r - 1);
    }
    b.cv = sqrt(sq / (double)active);
    return b;
}

/* Keys, bytes and requests of each server when every key goes to `owner`. */
static void sums_by_owner(const workload *w, const uint32_t *owner, size_t nservers,
                          double *out[M_COUNT])
{
    for (int m = 0; m < M_COUNT; m++)
        memset(out[m], 0, nservers * sizeof(double));
    for (size_t i = 0; i < w->n; i++) {
        out[M_KEYS][owner[i]] += 1;
        out[M_BYTES][owner[i]] += w->size[i];
        out[M_REQS][owner[i]] += w->qps[i];
    }
}

static void locate_all(const mcr_snapshot *snap, const workload *w, uint32_t *owner)
{
    for (size_t i = 0; i < w->n; i++) {
        size_t len;
        const char *k = key_at(w, i, &len);
        owner[i] = mcr_snapshot_locate(snap, k, len);
    }
}

static volatile uint32_t lookup_sink; /* every timed result ends here */

/* ns per mcr_snapshot_locate (or, with `load`, per
 * mcr_snapshot_locate_bounded) over the workload's keys: the median of
 * SIM_PASSES passes, each over as many keys as fit in its time budget. */
static double time_lookups(const mcr_snapshot *snap, const workload *w, const uint32_t *load,
                           uint64_t total, double epsilon)
{
    double v[SIM_PASSES];
    size_t n = w->n < 1000 ? w->n : 1000, len;
    uint32_t acc = 0;
    for (int p = -1; p < SIM_PASSES; p++) { /* pass -1: warm-up and calibration */
        double t0 = now_ns();
        for (size_t i = 0; i < n; i++) {
            const char *k = key_at(w, i, &len);
            acc += load ? mcr_snapshot_locate_bounded(snap, k, len, load, total, epsilon)
                        : mcr_snapshot_locate(snap, k, len);
        }
        double ns = (now_ns() - t0) / (double)n;
        if (p < 0) {
            double fit = SIM_PASS_BUDGET_NS / (ns > 0.5 ? ns : 0.5);
            n = fit >= (double)w->n ? w->n : fit < 1000 ? (w->n < 1000 ? w->n : 1000) : (size_t)fit;
        } else
            v[p] = ns;
    }
    lookup_sink += acc;
    return median(v, SIM_PASSES);
}

/* Requests drawn from the rates, each sent by mcr_snapshot_locate_bounded
 * with the load of every server: its requests in flight (the last
 * `inflight` ones, each completing `inflight` requests after it was sent),
 * or with inflight 0 every request so far (running totals). Fills
 * requests[] (per snapshot index) and returns the share of requests that
 * went to a server other than the key's owner; *load_out receives the
 * final loads (caller frees) and *total_out their sum. */
static double bounded_stream(const sim_opts *o, const workload *w, const mcr_snapshot *snap,
                             const uint32_t *owner, double *requests, uint32_t **load_out,
                             uint64_t *total_out)
{
    size_t ns = mcr_snapshot_server_count(snap);
    uint32_t *load = xcalloc(ns, sizeof(*load));
    uint32_t *ring = o->inflight ? xcalloc(o->inflight, sizeof(*ring)) : NULL;
    uint64_t rng = o->seed ^ 0x626f756e64656421ull, total = 0, off = 0;
    size_t head = 0;
    memset(requests, 0, ns * sizeof(*requests));
    for (size_t r = 0; r < o->requests; r++) {
        size_t key = draw_key(w, &rng), len;
        const char *k = key_at(w, key, &len);
        uint32_t s = mcr_snapshot_locate_bounded(snap, k, len, load, total, o->epsilon);
        requests[s] += 1;
        off += s != owner[key];
        load[s]++;
        total++;
        if (ring) {
            if (total > o->inflight) { /* the oldest completes */
                load[ring[head]]--;
                total--;
            }
            ring[head] = s;
            head = (head + 1) % o->inflight;
        }
    }
    free(ring);
    *load_out = load;
    *total_out = total;
    return (double)off / (double)o->requests;
}

static mcr_config *mode_config(mcr_mode m, const server_list *sl, uint32_t mult, bool active_only)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    if (cfg == NULL)
        cli_fail("simulate: out of memory");
    mcr_config_set_mode(cfg, m); /* and its key hash, mcr_mode_default_hash() */
    for (size_t i = 0; i < sl->n; i++) {
        if (active_only && sl->d[i].state != MCR_STATE_ACTIVE)
            continue;
        mcr_server_desc d = sl->d[i];
        d.id = sl->named[i] ? d.id : NULL;
        d.state = MCR_STATE_ACTIVE;
        if ((uint64_t)d.weight * mult > MCR_WEIGHT_MAX)
            cli_die("simulate: weight %u x %u is over %u", d.weight, mult, MCR_WEIGHT_MAX);
        d.weight *= mult;
        if (mcr_config_add_server_desc(cfg, &d, &err) != MCR_OK)
            cli_die("simulate: %s: %s", mcr_mode_name(m), err.message);
    }
    return cfg;
}

/* Build, change, locate and time one mode. */
static void run_mode(const sim_opts *o, const workload *w, const server_list *before_sl,
                     const mcr_snapshot *after_base, mode_run *r, uint32_t *own_before,
                     uint32_t *own_after)
{
    mcr_error err;
    const char *name = mcr_mode_name(r->mode);
    r->hash = mcr_mode_default_hash(r->mode);

    /* Build: memory of the first snapshot while it lives; median time. */
    mcr_config *cfg = mode_config(r->mode, before_sl, 1, false);
    mcr_snapshot *before = NULL;
    double t[SIM_BUILDS];
    for (int b = 0; b < SIM_BUILDS; b++) {
        mcr_snapshot *s = NULL;
        size_t h0 = heap_in_use();
        double t0 = now_ns();
        int rc = mcr_snapshot_new(cfg, 1, &s, &err);
        t[b] = (now_ns() - t0) / 1e3;
        if (rc != MCR_OK)
            cli_die("simulate: %s: %s (leave the mode out with --modes)", name, err.message);
        if (b == 0) {
            size_t h1 = heap_in_use();
            r->memory = h1 > h0 ? h1 - h0 : 0;
            before = s;
        } else
            mcr_snapshot_unref(s);
    }
    mcr_config_free(cfg);
    r->build_us = median(t, SIM_BUILDS);

    /* The change (slots: and the plan that balances the map again). */
    mcr_changes *ch = make_changes(o, before_sl);
    if (r->mode == MCR_MODE_SLOTS) {
        if (mcr_slots_plan(before, ch, &r->slots_moved, &err) != MCR_OK)
            cli_die("simulate: slots: the plan: %s", err.message);
        r->slot_count = mcr_snapshot_table_size(before);
    }
    mcr_snapshot *after = NULL;
    double t0 = now_ns();
    if (mcr_snapshot_apply(before, ch, &after, &err) != MCR_OK)
        cli_die("simulate: %s: %s", name, err.message);
    r->apply_us = (now_ns() - t0) / 1e3;
    mcr_changes_free(ch);
    r->table = mcr_snapshot_table_size(after);
    if (r->table == 0)
        r->table = mcr_ring_point_count(mcr_snapshot_ring(after));

    /* Owners, and what moved: servers compared by id. */
    size_t nb = mcr_snapshot_server_count(before), na = mcr_snapshot_server_count(after);
    if (na != mcr_snapshot_server_count(after_base))
        cli_fail("simulate: %s: %zu servers after the change, expected %zu", name, na,
                 mcr_snapshot_server_count(after_base));
    locate_all(before, w, own_before);
    locate_all(after, w, own_after);
    long *map = xcalloc(nb, sizeof(*map));
    for (size_t i = 0; i < nb; i++) {
        mcr_server_desc d;
        mcr_snapshot_server(before, i, &d);
        map[i] = mcr_snapshot_find(after, d.id);
    }
    /* The ideal: the expected shares that change, matched by id. A minimal
     * placement moves keys only from servers whose share falls to servers
     * whose share rises; any other move is stray. */
    double *eb = xcalloc(nb, sizeof(*eb)), *ea = xcalloc(na, sizeof(*ea));
    expected_shares(before, r->mode, eb);
    expected_shares(after, r->mode, ea);
    bool *falls = xcalloc(nb, sizeof(*falls)), *rises = xcalloc(na, sizeof(*rises));
    double ideal = 0;
    for (size_t j = 0; j < na; j++)
        rises[j] = ea[j] > 0; /* a server new to the list rises from 0 */
    for (size_t i = 0; i < nb; i++) {
        double later = map[i] >= 0 ? ea[map[i]] : 0;
        falls[i] = eb[i] > later;
        if (falls[i])
            ideal += eb[i] - later;
        if (map[i] >= 0)
            rises[map[i]] = later > eb[i];
    }
    r->ideal = ideal;

    double mk = 0, mb = 0, mr = 0, stray = 0;
    for (size_t i = 0; i < w->n; i++)
        if (map[own_before[i]] != (long)own_after[i]) {
            mk += 1;
            mb += w->size[i];
            mr += w->qps[i];
            stray += !(falls[own_before[i]] && rises[own_after[i]]);
        }
    r->moved[M_KEYS] = mk / (double)w->n;
    r->moved[M_BYTES] = w->total_bytes > 0 ? mb / w->total_bytes : 0;
    r->moved[M_REQS] = mr / w->total_qps;
    r->stray = stray / (double)w->n;
    free(falls);
    free(rises);

    /* Balance before and after. */
    double *sb[M_COUNT];
    r->nafter = na;
    for (int m = 0; m < M_COUNT; m++) {
        sb[m] = xcalloc(nb, sizeof(double));
        r->per_server[m] = xcalloc(na, sizeof(double));
    }
    sums_by_owner(w, own_before, nb, sb);
    sums_by_owner(w, own_after, na, r->per_server);
    for (int m = 0; m < M_COUNT; m++) {
        r->before[m] = balance_of(sb[m], eb, nb);
        r->after[m] = balance_of(r->per_server[m], ea, na);
    }

    /* Bounded loads: requests as the stream places them. */
    if (r->mode == MCR_MODE_BOUNDED) {
        uint32_t *load;
        uint64_t total;
        r->bounded = true;
        r->owner_requests = r->after[M_REQS];
        bounded_stream(o, w, before, own_before, sb[M_REQS], &load, &total);
        free(load);
        r->before[M_REQS] = balance_of(sb[M_REQS], eb, nb);
        r->off_owner = bounded_stream(o, w, after, own_after, r->per_server[M_REQS], &load,
                                      &total);
        r->after[M_REQS] = balance_of(r->per_server[M_REQS], ea, na);
        r->bounded_ns = time_lookups(after, w, load, total, o->epsilon);
        free(load);
    }

    r->lookup_ns = time_lookups(after, w, NULL, 0, 0);
    for (int m = 0; m < M_COUNT; m++)
        free(sb[m]);
    free(eb);
    free(ea);
    free(map);
    mcr_snapshot_unref(before);
    mcr_snapshot_unref(after);
}

/* ------------------------------------------------------------ points sweep */

typedef struct sweep_point {
    unsigned points;   /* per unit of weight */
    balance ring;      /* exact shares of the hash space */
    balance m[M_COUNT];
    double build_us, lookup_ns;
    size_t memory;
} sweep_point;

typedef struct sweep {
    size_t n;
    sweep_point p[16];
    double floor_cv;     /* keys cv of a random assignment of these keys */
    double fit_c;        /* hash-space cv fitted as fit_c / sqrt(points) */
    double knee_points;  /* the model's point of diminishing returns */
    long knee;           /* the first sweep point at or past it, -1: beyond */
    unsigned limit;      /* the most points per unit of weight the weights allow */
    bool capped;         /* stopped at SIM_SWEEP_POINTS_MAX points in all */
} sweep;

/* The share of the 2^32 hash values each ring server owns, exactly: a
 * point owns the values above the previous point up to its own; the first
 * also those above the last. */
static void ring_shares(const mcr_ring *ring, double *share)
{
    size_t np = mcr_ring_point_count(ring), ns = mcr_ring_server_count(ring);
    uint64_t *own = xcalloc(ns, sizeof(*own));
    uint32_t last = 0, prev, v, s;
    mcr_ring_point(ring, np - 1, &last, NULL);
    prev = last;
    for (size_t i = 0; i < np; i++) {
        mcr_ring_point(ring, i, &v, &s);
        own[s] += i == 0 ? (uint64_t)v + ((uint64_t)1 << 32) - last : (uint64_t)(v - prev);
        prev = v;
    }
    for (size_t i = 0; i < ns; i++)
        share[i] = (double)own[i] / 4294967296.0;
    free(own);
}

/* The point of diminishing returns, from a model rather than from the
 * measured points one by one: every continuum is one random draw, and two
 * neighbours of the sweep can differ by chance more than a doubling of
 * points improves them. The hash-space cv of a continuum falls as
 * c / sqrt(points) (fitted: c is the geometric mean of cv x sqrt(points)
 * over the sweep); the keys add their own randomness, the cv f of a random
 * assignment, independently: keys cv = sqrt(c^2 / p + f^2). A doubling
 * improves that by less than T once
 *     (c^2 / 2p + f^2) / (c^2 / p + f^2) > (1 - T)^2 = q,
 * that is p > c^2 (q - 1/2) / (f^2 (1 - q)): beyond it the continuum is
 * no longer what unbalances the keys. */
static void sweep_knee(sweep *sw, double threshold)
{
    double logsum = 0;
    size_t used = 0;
    for (size_t i = 0; i < sw->n; i++)
        if (sw->p[i].ring.cv > 0) {
            logsum += log(sw->p[i].ring.cv * sqrt((double)sw->p[i].points));
            used++;
        }
    sw->fit_c = used ? exp(logsum / (double)used) : 0;
    double q = (1 - threshold) * (1 - threshold), c2 = sw->fit_c * sw->fit_c;
    double f2 = sw->floor_cv * sw->floor_cv;
    if (c2 == 0 || q <= 0.5)
        sw->knee_points = sw->n ? sw->p[0].points : 0; /* nothing left to gain */
    else if (f2 == 0 || q >= 1)
        sw->knee_points = INFINITY; /* every doubling keeps paying */
    else
        sw->knee_points = c2 * (q - 0.5) / (f2 * (1 - q));
    sw->knee = -1;
    for (size_t i = 0; i < sw->n; i++)
        if ((double)sw->p[i].points >= sw->knee_points) {
            sw->knee = (long)i;
            break;
        }
}

/* stable-ketama on the active servers after the change, every weight
 * multiplied by 1, 2, 4, ...: 160, 320, 640, ... points per unit of weight
 * (its smallest count is 160: the library has no smaller one). */
static void run_sweep(const sim_opts *o, const workload *w, const server_list *after_sl,
                      sweep *sw, uint32_t *owner)
{
    uint32_t maxw = 1;
    size_t na = 0;
    double wsum = 0;
    for (size_t i = 0; i < after_sl->n; i++)
        if (after_sl->d[i].state == MCR_STATE_ACTIVE) {
            na++;
            wsum += after_sl->d[i].weight;
            if (after_sl->d[i].weight > maxw)
                maxw = after_sl->d[i].weight;
        }
    sw->n = 0;
    sw->knee = -1;
    sw->limit = (MCR_STABLE_WEIGHT_MAX / maxw) * SIM_POINTS_PER_WEIGHT;
    double *e = xcalloc(na, sizeof(*e)), *x[M_COUNT], *share = xcalloc(na, sizeof(*share));
    for (int m = 0; m < M_COUNT; m++)
        x[m] = xcalloc(na, sizeof(double));
    double fsum = 0;
    for (uint32_t mult = 1; mult * SIM_POINTS_PER_WEIGHT <= o->sweep_max &&
                            (uint64_t)mult * maxw <= MCR_STABLE_WEIGHT_MAX &&
                            sw->n < sizeof(sw->p) / sizeof(sw->p[0]);
         mult *= 2) {
        mcr_error err;
        if (sw->n > 0 && (double)mult * SIM_POINTS_PER_WEIGHT * wsum > SIM_SWEEP_POINTS_MAX) {
            sw->capped = true;
            break;
        }
        sweep_point *p = &sw->p[sw->n++];
        mcr_config *cfg = mode_config(MCR_MODE_STABLE_KETAMA, after_sl, mult, true);
        mcr_snapshot *snap = NULL;
        size_t h0 = heap_in_use();
        double t0 = now_ns();
        if (mcr_snapshot_new(cfg, 1, &snap, &err) != MCR_OK)
            cli_die("simulate: sweep: %s", err.message);
        p->build_us = (now_ns() - t0) / 1e3;
        size_t h1 = heap_in_use();
        p->memory = h1 > h0 ? h1 - h0 : 0;
        mcr_config_free(cfg);
        p->points = mult * SIM_POINTS_PER_WEIGHT;
        expected_shares(snap, MCR_MODE_STABLE_KETAMA, e);
        ring_shares(mcr_snapshot_ring(snap), share);
        p->ring = balance_of(share, e, na);
        locate_all(snap, w, owner);
        sums_by_owner(w, owner, na, x);
        for (int m = 0; m < M_COUNT; m++)
            p->m[m] = balance_of(x[m], e, na);
        p->lookup_ns = time_lookups(snap, w, NULL, 0, 0);
        mcr_snapshot_unref(snap);
        if (sw->n == 1)
            for (size_t i = 0; i < na; i++)
                fsum += (1 - e[i]) / (e[i] * (double)w->n);
    }
    sw->floor_cv = sqrt(fsum / (double)na);
    sweep_knee(sw, o->threshold);
    for (int m = 0; m < M_COUNT; m++)
        free(x[m]);
    free(e);
    free(share);
}

/* ------------------------------------------------------------ text output */

static const char *state_name(mcr_server_state s)
{
    return s == MCR_STATE_ACTIVE ? "active" : s == MCR_STATE_DOWN ? "down" : "draining";
}

static const char *op_name(change_op op)
{
    static const char *const names[] = {"add", "remove", "reweight", "fail", "fail-zone"};
    return names[op];
}

static void describe_workload(FILE *f, const sim_opts *o, const workload *w)
{
    if (o->workload_file)
        fprintf(f, "%zu keys from %s", w->n, o->workload_file);
    else
        fprintf(f, "%zu keys (seed %" PRIu64 ", zipf %g, sizes %s)", w->n, o->seed, o->zipf,
                o->sizes_text);
}

static void print_text(const sim_opts *o, const workload *w, const server_list *before,
                       const server_list *after, const mode_run *runs, const sweep *sw)
{
    size_t act_b = mcr_snapshot_active_count(before->snap);
    size_t act_a = mcr_snapshot_active_count(after->snap);
    printf("servers: %zu active before, %zu after; workload: ", act_b, act_a);
    describe_workload(stdout, o, w);
    printf(", %.1f MiB of values\nchange:", w->total_bytes / 1048576.0);
    for (size_t i = 0; i < o->nchanges; i++)
        printf(" --%s '%s'", op_name(o->changes[i].op), o->changes[i].arg);
    printf("\n\n");

    printf("Moved by the change (shares of keys, bytes and requests whose server changed; "
           "stray: keys moved\nbetween servers a minimal placement would leave alone)\n");
    printf("%-17s %9s %9s %9s %9s %10s %9s\n", "mode", "keys", "bytes", "requests", "ideal",
           "keys/ideal", "stray");
    for (size_t i = 0; i < o->nmodes; i++) {
        const mode_run *r = &runs[i];
        printf("%-17s %9.6f %9.6f %9.6f %9.6f ", mcr_mode_name(r->mode), r->moved[M_KEYS],
               r->moved[M_BYTES], r->moved[M_REQS], r->ideal);
        if (r->ideal > 0)
            printf("%10.3f", r->moved[M_KEYS] / r->ideal);
        else
            printf("%10s", "-");
        printf(" %9.6f\n", r->stray);
    }

    printf("\nBalance after the change (peak-to-mean and cv per server, relative to weight)\n");
    printf("%-17s %9s %9s %9s %9s %9s %9s\n", "mode", "keys p2m", "keys cv", "bytes p2m",
           "bytes cv", "req p2m", "req cv");
    for (size_t i = 0; i < o->nmodes; i++) {
        const mode_run *r = &runs[i];
        printf("%-17s %9.4f %9.4f %9.4f %9.4f %9.4f %9.4f\n", mcr_mode_name(r->mode),
               r->after[M_KEYS].p2m, r->after[M_KEYS].cv, r->after[M_BYTES].p2m,
               r->after[M_BYTES].cv, r->after[M_REQS].p2m, r->after[M_REQS].cv);
    }

    printf("\nCost (lookup: mcr_snapshot_locate over the keys; build: mcr_snapshot_new; "
           "memory: heap growth)\n");
    printf("%-17s %9s %10s %10s %11s %9s\n", "mode", "lookup ns", "build us", "apply us",
           "memory KiB", "entries");
    for (size_t i = 0; i < o->nmodes; i++) {
        const mode_run *r = &runs[i];
        printf("%-17s %9.1f %10.1f %10.1f %11.1f %9zu\n", mcr_mode_name(r->mode), r->lookup_ns,
               r->build_us, r->apply_us, (double)r->memory / 1024.0, r->table);
    }

    for (size_t i = 0; i < o->nmodes; i++) {
        const mode_run *r = &runs[i];
        if (r->mode == MCR_MODE_SLOTS)
            printf("\nslots: the plan moved %zu of %zu slots (%.6f)", r->slots_moved,
                   r->slot_count, r->slot_count ? (double)r->slots_moved / (double)r->slot_count : 0);
        if (r->bounded) {
            printf("\nbounded: %zu requests drawn by rate, epsilon %g, load = ", o->requests,
                   o->epsilon);
            if (o->inflight)
                printf("the last %zu requests in flight", o->inflight);
            else
                printf("running totals");
            printf(": %.4f of requests served off their owner; requests p2m %.4f (owner "
                   "only: %.4f); %.1f ns per bounded lookup",
                   r->off_owner, r->after[M_REQS].p2m, r->owner_requests.p2m, r->bounded_ns);
        }
    }
    printf("\n");

    if (sw->n > 0) {
        printf("\nstable-ketama points sweep (the active servers after the change; ring: exact "
               "shares of the hash space)\n");
        printf("%9s %9s %9s %9s %9s %9s %9s %9s %10s %11s\n", "points/w", "ring p2m", "ring cv",
               "keys p2m", "keys cv", "bytes cv", "req p2m", "lookup ns", "build us",
               "memory KiB");
        for (size_t i = 0; i < sw->n; i++) {
            const sweep_point *p = &sw->p[i];
            printf("%9u %9.4f %9.4f %9.4f %9.4f %9.4f %9.4f %9.1f %10.1f %11.1f\n", p->points,
                   p->ring.p2m, p->ring.cv, p->m[M_KEYS].p2m, p->m[M_KEYS].cv, p->m[M_BYTES].cv,
                   p->m[M_REQS].p2m, p->lookup_ns, p->build_us, (double)p->memory / 1024.0);
        }
        printf("diminishing returns (a doubling of points improves the keys' cv by less than "
               "%g%%; model: hash-space cv %.3f / sqrt(points), keys add a random-assignment "
               "cv of %.4f): ",
               o->threshold * 100, sw->fit_c, sw->floor_cv);
        if (!isfinite(sw->knee_points))
            printf("never");
        else if (sw->knee >= 0)
            printf("%u points per unit of weight (model: %.0f)", sw->p[sw->knee].points,
                   sw->knee_points);
        else
            printf("beyond the sweep, about %.0f points per unit of weight%s", sw->knee_points,
                   sw->knee_points > sw->limit ? ", more than the weights allow" : "");
        if (sw->capped)
            printf(" (sweep stopped at %.0f points in all)", SIM_SWEEP_POINTS_MAX);
        putchar('\n');
    }
}

/* ------------------------------------------------------------ JSON output */

bool sim_utf8_valid(const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    while (*s) {
        unsigned c = *s;
        size_t len;
        uint32_t cp;
        if (c < 0x80) {
            s++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf)
            len = 2, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef)
            len = 3, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4)
            len = 4, cp = c & 0x07;
        else
            return false;
        for (size_t i = 1; i < len; i++) {
            if ((s[i] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (s[i] & 0x3f);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        s += len;
    }
    return true;
}

/* A JSON string (tools/json.c's rules). */
static void js_str(const char *s)
{
    cli_json_string(stdout, s, strlen(s));
}

static void js_num(double x)
{
    if (isfinite(x))
        printf("%.9g", x);
    else
        fputs("null", stdout);
}

static void js_balance(const char *name, const balance *b)
{
    printf("\"%s\": {\"peak_to_mean\": ", name);
    js_num(b->p2m);
    fputs(", \"cv\": ", stdout);
    js_num(b->cv);
    putchar('}');
}

static void js_balances(const char *name, const balance b[M_COUNT])
{
    printf("\"%s\": {", name);
    for (int m = 0; m < M_COUNT; m++) {
        js_balance(measure_name[m], &b[m]);
        if (m + 1 < M_COUNT)
            fputs(", ", stdout);
    }
    putchar('}');
}

static void print_json(const sim_opts *o, const workload *w, const server_list *before,
                       const server_list *after, const mode_run *runs, const sweep *sw)
{
    printf("{\n \"servers\": {\"before\": %zu, \"active_before\": %zu, \"after\": [",
           before->n, mcr_snapshot_active_count(before->snap));
    for (size_t i = 0; i < after->n; i++) {
        const mcr_server_desc *d = &after->d[i];
        fputs(i ? ",\n   " : "\n   ", stdout);
        fputs("{\"id\": ", stdout);
        js_str(d->id);
        printf(", \"weight\": %u, \"zone\": ", d->weight);
        if (d->zone)
            js_str(d->zone);
        else
            fputs("null", stdout);
        printf(", \"state\": \"%s\"}", state_name(d->state));
    }
    printf("]},\n \"workload\": {\"source\": ");
    if (o->workload_file) {
        js_str(o->workload_file);
        fputs(", \"seed\": null, \"zipf\": null, \"sizes\": null", stdout);
    } else {
        printf("\"generated\", \"seed\": %" PRIu64 ", \"zipf\": ", o->seed);
        js_num(o->zipf);
        fputs(", \"sizes\": ", stdout);
        js_str(o->sizes_text);
    }
    printf(", \"keys\": %zu, \"bytes\": ", w->n);
    js_num(w->total_bytes);
    fputs(", \"qps\": ", stdout);
    js_num(w->total_qps);
    fputs("},\n \"change\": [", stdout);
    for (size_t i = 0; i < o->nchanges; i++) {
        printf("%s{\"op\": \"%s\", \"arg\": ", i ? ", " : "", op_name(o->changes[i].op));
        js_str(o->changes[i].arg);
        putchar('}');
    }
    fputs("],\n \"modes\": [", stdout);
    for (size_t i = 0; i < o->nmodes; i++) {
        const mode_run *r = &runs[i];
        printf("%s\n  {\"mode\": \"%s\", \"hash\": \"%s\",\n   \"moved\": {", i ? "," : "",
               mcr_mode_name(r->mode), r->mode == MCR_MODE_SLOTS ? "crc16" : mcr_hash_name(r->hash));
        for (int m = 0; m < M_COUNT; m++) {
            printf("\"%s\": ", measure_name[m]);
            js_num(r->moved[m]);
            fputs(", ", stdout);
        }
        fputs("\"ideal\": ", stdout);
        js_num(r->ideal);
        fputs(", \"keys_to_ideal\": ", stdout);
        js_num(r->ideal > 0 ? r->moved[M_KEYS] / r->ideal : NAN);
        fputs(", \"stray_keys\": ", stdout);
        js_num(r->stray);
        fputs("},\n   ", stdout);
        js_balances("balance_before", r->before);
        fputs(",\n   ", stdout);
        js_balances("balance_after", r->after);
        fputs(",\n   \"per_server_after\": [", stdout);
        for (size_t s = 0; s < r->nafter; s++) {
            fputs(s ? ", " : "", stdout);
            fputs("{\"id\": ", stdout);
            js_str(after->d[s].id);
            for (int m = 0; m < M_COUNT; m++) {
                printf(", \"%s\": ", measure_name[m]);
                js_num(r->per_server[m][s]);
            }
            putchar('}');
        }
        fputs("],\n   \"lookup_ns\": ", stdout);
        js_num(r->lookup_ns);
        fputs(", \"build_us\": ", stdout);
        js_num(r->build_us);
        fputs(", \"apply_us\": ", stdout);
        js_num(r->apply_us);
        printf(", \"memory_bytes\": %zu, \"entries\": %zu", r->memory, r->table);
        if (r->mode == MCR_MODE_SLOTS)
            printf(",\n   \"slots\": {\"count\": %zu, \"moved_by_plan\": %zu}", r->slot_count,
                   r->slots_moved);
        if (r->bounded) {
            fputs(",\n   \"bounded\": {\"epsilon\": ", stdout);
            js_num(o->epsilon);
            printf(", \"requests\": %zu, \"inflight\": %zu, \"off_owner\": ", o->requests,
                   o->inflight);
            js_num(r->off_owner);
            fputs(", \"lookup_ns\": ", stdout);
            js_num(r->bounded_ns);
            fputs(", ", stdout);
            js_balance("requests_owner_only", &r->owner_requests);
            putchar('}');
        }
        putchar('}');
    }
    fputs("\n ],\n \"sweep\": ", stdout);
    if (sw->n == 0)
        fputs("null", stdout);
    else {
        fputs("{\"mode\": \"stable-ketama\", \"threshold\": ", stdout);
        js_num(o->threshold);
        fputs(", \"random_assignment_keys_cv\": ", stdout);
        js_num(sw->floor_cv);
        fputs(", \"fit_c\": ", stdout);
        js_num(sw->fit_c);
        fputs(", \"diminishing_returns_model\": ", stdout);
        js_num(sw->knee_points);
        fputs(", \"diminishing_returns_at\": ", stdout);
        if (sw->knee >= 0)
            printf("%u", sw->p[sw->knee].points);
        else
            fputs("null", stdout);
        printf(", \"capped\": %s", sw->capped ? "true" : "false");
        printf(", \"points_limit\": %u,\n  \"points\": [", sw->limit);
        for (size_t i = 0; i < sw->n; i++) {
            const sweep_point *p = &sw->p[i];
            printf("%s\n   {\"points_per_weight\": %u, ", i ? "," : "", p->points);
            js_balance("ring", &p->ring);
            for (int m = 0; m < M_COUNT; m++) {
                fputs(", ", stdout);
                js_balance(measure_name[m], &p->m[m]);
            }
            fputs(", \"lookup_ns\": ", stdout);
            js_num(p->lookup_ns);
            fputs(", \"build_us\": ", stdout);
            js_num(p->build_us);
            printf(", \"memory_bytes\": %zu}", p->memory);
        }
        fputs("]}", stdout);
    }
    fputs("\n}\n", stdout);
}

/* ------------------------------------------------------------ SVG */

static void write_svg(const sim_opts *o, const workload *w, const server_list *before,
                      const server_list *after, const mode_run *runs, const sweep *sw)
{
    sim_chart_mode cm[MCR_MODE_COUNT];
    sim_chart_point cp[sizeof(sw->p) / sizeof(sw->p[0])];
    char title[512], err[256];
    int n = snprintf(title, sizeof(title), "%zu -> %zu active servers, ",
                     mcr_snapshot_active_count(before->snap),
                     mcr_snapshot_active_count(after->snap));
    if (o->workload_file)
        n += snprintf(title + n, sizeof(title) - (size_t)n, "%zu keys from a file", w->n);
    else
        n += snprintf(title + n, sizeof(title) - (size_t)n, "%zu keys, zipf %g, seed %" PRIu64,
                      w->n, o->zipf, o->seed);
    for (size_t i = 0; i < o->nchanges && (size_t)n < sizeof(title); i++)
        n += snprintf(title + n, sizeof(title) - (size_t)n, "%s%s %s", i ? ", " : "; ",
                      op_name(o->changes[i].op), o->changes[i].arg);
    for (size_t i = 0; i < o->nmodes; i++)
        cm[i] = (sim_chart_mode){mcr_mode_name(runs[i].mode), runs[i].moved[M_KEYS],
                                 runs[i].ideal, runs[i].after[M_KEYS].p2m,
                                 runs[i].after[M_BYTES].p2m, runs[i].after[M_REQS].p2m};
    for (size_t i = 0; i < sw->n; i++)
        cp[i] = (sim_chart_point){sw->p[i].points, sw->p[i].ring.cv, sw->p[i].m[M_KEYS].cv};
    sim_chart c = {title, o->nmodes, cm, sw->n, cp, "stable-ketama", sw->floor_cv,
                   sw->knee >= 0 ? sw->p[sw->knee].points : 0};
    if (sim_svg_write(o->svg, &c, err, sizeof(err)) != 0)
        cli_fail("simulate: %s", err);
}

/* ------------------------------------------------------------ the command */

int cli_simulate(int argc, char **argv)
{
    sim_opts o;
    workload w;
    server_list before, after;
    sweep sw;
    mcr_error err;

    parse_options(argc, argv, &o);
    /* Servers and the change first: bad input is reported before any work. */
    server_list_from(&before, base_snapshot(&o));
    mcr_changes *ch = make_changes(&o, &before);
    mcr_snapshot *after_snap = NULL;
    if (mcr_snapshot_apply(before.snap, ch, &after_snap, &err) != MCR_OK) {
        if (err.code == MCR_ERR_EMPTY)
            cli_die("simulate: the change leaves no active server");
        cli_die("simulate: %s", err.message);
    }
    mcr_changes_free(ch);
    server_list_from(&after, after_snap);

    memset(&w, 0, sizeof(w));
    if (o.workload_file)
        workload_read(&w, o.workload_file);
    else
        workload_generate(&w, &o);

    /* One snapshot built and dropped first: the library's and the
     * allocator's one-time allocations (7 KiB or so) are then not counted in
     * the memory of whichever mode comes first. */
    mcr_config *warm_cfg = mode_config(o.modes[0], &before, 1, false);
    mcr_snapshot *warm = NULL;
    if (mcr_snapshot_new(warm_cfg, 1, &warm, &err) != MCR_OK)
        cli_die("simulate: %s: %s (leave the mode out with --modes)", mcr_mode_name(o.modes[0]),
                err.message);
    mcr_snapshot_unref(warm);
    mcr_config_free(warm_cfg);

    uint32_t *own_before = xcalloc(w.n, sizeof(uint32_t));
    uint32_t *own_after = xcalloc(w.n, sizeof(uint32_t));
    mode_run *runs = xcalloc(o.nmodes, sizeof(*runs));
    for (size_t i = 0; i < o.nmodes; i++) {
        runs[i].mode = o.modes[i];
        run_mode(&o, &w, &before, after.snap, &runs[i], own_before, own_after);
    }
    memset(&sw, 0, sizeof(sw));
    sw.knee = -1;
    if (o.sweep_max > 0)
        run_sweep(&o, &w, &after, &sw, own_after);

    if (o.json)
        print_json(&o, &w, &before, &after, runs, &sw);
    else
        print_text(&o, &w, &before, &after, runs, &sw);
    if (o.svg)
        write_svg(&o, &w, &before, &after, runs, &sw);

    for (size_t i = 0; i < o.nmodes; i++)
        for (int m = 0; m < M_COUNT; m++)
            free(runs[i].per_server[m]);
    free(runs);
    free(own_before);
    free(own_after);
    free(w.bytes);
    free(w.off);
    free(w.size);
    free(w.qps);
    free(w.cum);
    for (size_t i = 0; i < o.nchanges; i++) {
        free(o.changes[i].id);
        free(o.changes[i].zone);
        free(o.changes[i].host);
    }
    free(o.changes);
    server_list_free(&before);
    server_list_free(&after);
    return cli_finish_output();
}
