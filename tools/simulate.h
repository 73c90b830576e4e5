/* SPDX-License-Identifier: BSD-3-Clause */
/* simulate.h: what the files of mcroute simulate share: its limits, options, workload, servers, runs and sweep (simulate.c the command and its options, sim_run.c the work, sim_output.c the tables and JSON), and its SVG chart (svg.c). */
#ifndef MCR_SIMULATE_H
#define MCR_SIMULATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcroute.h"
#include "mcroute_snapshot.h"

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

/* ------------------------------------------------------------ servers and changes */

/* The servers as given, read back from a snapshot of them so that every
 * source (list, file, generated) is checked by the library alike. */
typedef struct server_list {
    size_t n;
    mcr_server_desc *d; /* strings owned by `snap` */
    bool *named;        /* an id was given (not the default host:port) */
    mcr_snapshot *snap;
} server_list;

/* ------------------------------------------------------------ per-mode runs */

typedef struct balance {
    double p2m; /* the largest share / its expected share (peak-to-mean) */
    double cv;  /* root mean square of (share / expected - 1): the coefficient
                   of variation when weights are equal */
} balance;

enum { M_KEYS, M_BYTES, M_REQS, M_COUNT };

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

/* ------------------------------------------------------------ the work (sim_run.c) */

/* The workload of the options: generated from --keys, --seed, --zipf and
 * --sizes, or read from a --workload file (exits EXIT_USAGE on a bad one). */
void sim_workload_generate(workload *w, const sim_opts *o);
void sim_workload_read(workload *w, const char *path);

/* The servers of a snapshot (which *sl then owns), and their release. */
void sim_server_list_from(server_list *sl, mcr_snapshot *snap);
void sim_server_list_free(server_list *sl);

/* The snapshot of the servers of the options, and the change to apply to
 * it in mode m (its weights as m takes them: see sim_mode_config); both
 * exit EXIT_USAGE on bad input. */
mcr_snapshot *sim_base_snapshot(const sim_opts *o);
mcr_changes *sim_make_changes(const sim_opts *o, const server_list *sl, mcr_mode m);

/* The largest weight of the servers of sl and of the options' changes. */
uint32_t sim_weight_max(const sim_opts *o, const server_list *sl);

/* The config of mode m on the servers of sl, every weight times mult
 * (active_only: the servers that are DOWN or draining left out). In
 * mcrouter-wch3, whose weights are shares of 1.0, a weight of wmax (that
 * of sim_weight_max, the changes' included) is 1.0 and the others in
 * proportion; other modes ignore wmax. */
mcr_config *sim_mode_config(mcr_mode m, const server_list *sl, uint32_t mult, bool active_only,
                            uint32_t wmax);

/* One mode's run into *r (r->mode set); own_before and own_after hold an
 * owner for every key of w. */
void sim_run_mode(const sim_opts *o, const workload *w, const server_list *before_sl,
                  const mcr_snapshot *after_base, mode_run *r, uint32_t *own_before,
                  uint32_t *own_after);

/* The points sweep of stable-ketama into *sw; owner holds one entry for
 * every key of w. */
void sim_run_sweep(const sim_opts *o, const workload *w, const server_list *after_sl,
                   sweep *sw, uint32_t *owner);

/* ------------------------------------------------------------ output (sim_output.c) */

/* The results on standard output, as tables or as one JSON document; the
 * chart to the --svg file (exits EXIT_FAILED when it cannot be written). */
void sim_print_text(const sim_opts *o, const workload *w, const server_list *before,
                    const server_list *after, const mode_run *runs, const sweep *sw);
void sim_print_json(const sim_opts *o, const workload *w, const server_list *before,
                    const server_list *after, const mode_run *runs, const sweep *sw);
void sim_write_svg(const sim_opts *o, const workload *w, const server_list *before,
                   const server_list *after, const mode_run *runs, const sweep *sw);

/* ------------------------------------------------------------ the chart (svg.c) */

/* What the chart shows of one mode: shares moved by the change against the
 * ideal, and the balance after it (peak-to-mean, relative to weight). */
typedef struct sim_chart_mode {
    const char *name;
    double moved_keys, ideal;
    double p2m_keys, p2m_bytes, p2m_requests;
} sim_chart_mode;

/* One step of the points sweep: points per unit of weight, and the
 * coefficients of variation of the exact hash-space shares and of keys. */
typedef struct sim_chart_point {
    double points, ring_cv, keys_cv;
} sim_chart_point;

typedef struct sim_chart {
    const char *title;    /* one line: servers, keys, change */
    size_t nmodes;
    const sim_chart_mode *modes;
    size_t nsweep;        /* 0: no sweep panel */
    const sim_chart_point *sweep;
    const char *sweep_mode; /* the mode swept */
    double floor_cv;      /* keys cv of a random assignment (a dashed line) */
    double knee;          /* points of diminishing returns, 0 if none */
} sim_chart;

/* Write `c` as a self-contained SVG document to `path`. 0, or -1 with a
 * message in err (the file may be left partly written). */
int sim_svg_write(const char *path, const sim_chart *c, char *err, size_t errlen);

#endif
