/* SPDX-License-Identifier: BSD-3-Clause */
/* simulate.c: mcroute simulate: placement modes compared on one workload and one membership change (moved shares against the ideal, balance, lookup cost, build time, memory, a points sweep), as tables, JSON or an SVG chart: the command and its options (the work in sim_run.c, the output in sim_output.c). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcroute.h"
#include "mcroute_snapshot.h"

#include "cli.h"
#include "simulate.h"

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
    "                            jump,rendezvous,maglev,slots,bounded; all: every mode\n"
    "                            up to bounded; the modes of other clients by name)\n"
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

static char *xstrdup(const char *s)
{
    char *d = strdup(s);
    if (d == NULL)
        cli_fail("simulate: out of memory");
    return d;
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
        /* the modes of other clients (--client) are named one by one:
         * some refuse weights, some resolve names */
        for (int m = 0; m < MCR_MODE_PYMEMCACHE; m++)
            o->modes[o->nmodes++] = (mcr_mode)m;
        return;
    }
    char *copy = xstrdup(list), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        mcr_mode m;
        if (mcr_mode_from_name(t, &m) != MCR_OK)
            cli_die("simulate: --modes: unknown mode '%s' (known: ketama stable-ketama jump "
                    "rendezvous maglev slots bounded consistent weighted spy spy-weighted "
                    "modula twemproxy-ketama twemproxy-modula, the modes of --client such "
                    "as dalli, or all)",
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
    sim_server_list_from(&before, sim_base_snapshot(&o));
    mcr_changes *ch = sim_make_changes(&o, &before, MCR_MODE_KETAMA); /* the base's */
    mcr_snapshot *after_snap = NULL;
    if (mcr_snapshot_apply(before.snap, ch, &after_snap, &err) != MCR_OK) {
        if (err.code == MCR_ERR_EMPTY)
            cli_die("simulate: the change leaves no active server");
        cli_die("simulate: %s", err.message);
    }
    mcr_changes_free(ch);
    sim_server_list_from(&after, after_snap);

    memset(&w, 0, sizeof(w));
    if (o.workload_file)
        sim_workload_read(&w, o.workload_file);
    else
        sim_workload_generate(&w, &o);

    /* One snapshot built and dropped first: the library's and the
     * allocator's one-time allocations (7 KiB or so) are then not counted in
     * the memory of whichever mode comes first. */
    mcr_config *warm_cfg = sim_mode_config(o.modes[0], &before, 1, false,
                                           sim_weight_max(&o, &before));
    mcr_snapshot *warm = NULL;
    if (mcr_snapshot_new(warm_cfg, 1, &warm, &err) != MCR_OK)
        cli_die("simulate: %s: %s (leave the mode out with --modes)", mcr_mode_name(o.modes[0]),
                err.message);
    mcr_snapshot_unref(warm);
    mcr_config_free(warm_cfg);

    uint32_t *own_before = cli_xcalloc(w.n, sizeof(uint32_t));
    uint32_t *own_after = cli_xcalloc(w.n, sizeof(uint32_t));
    mode_run *runs = cli_xcalloc(o.nmodes, sizeof(*runs));
    for (size_t i = 0; i < o.nmodes; i++) {
        runs[i].mode = o.modes[i];
        sim_run_mode(&o, &w, &before, after.snap, &runs[i], own_before, own_after);
    }
    memset(&sw, 0, sizeof(sw));
    sw.knee = -1;
    if (o.sweep_max > 0)
        sim_run_sweep(&o, &w, &after, &sw, own_after);

    if (o.json)
        sim_print_json(&o, &w, &before, &after, runs, &sw);
    else
        sim_print_text(&o, &w, &before, &after, runs, &sw);
    if (o.svg)
        sim_write_svg(&o, &w, &before, &after, runs, &sw);

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
    sim_server_list_free(&before);
    sim_server_list_free(&after);
    return cli_finish_output();
}
