/* SPDX-License-Identifier: BSD-3-Clause */
/* simulate.h: mcroute simulate (tools/simulate.c), placements compared on a workload and a membership change, and its SVG chart (tools/svg.c). */
#ifndef MCR_SIMULATE_H
#define MCR_SIMULATE_H

#include <stdbool.h>
#include <stddef.h>

/* The command: its own options (see cli_usage_simulate), exits
 * EXIT_USAGE (2) on bad input and EXIT_FAILED (1) when output is lost. */
int cli_simulate(int argc, char **argv);
extern const char cli_usage_simulate[];

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

/* Whether `s` is valid UTF-8 (no overlong form, surrogate or value above
 * U+10FFFF): what JSON and XML may carry as it is. */
bool sim_utf8_valid(const char *s);

/* Write `c` as a self-contained SVG document to `path`. 0, or -1 with a
 * message in err (the file may be left partly written). */
int sim_svg_write(const char *path, const sim_chart *c, char *err, size_t errlen);

#endif
