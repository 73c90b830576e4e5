/* SPDX-License-Identifier: BSD-3-Clause */
/* svg.c: the chart of mcroute simulate as a self-contained SVG document: keys moved against the ideal, peak-to-mean per mode, and the points sweep. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "simulate.h"

#define W 860.0           /* document width */
#define LEFT 70.0         /* plot area: left margin (axis labels) */
#define RIGHT 190.0       /* right margin (legend) */
#define PANEL_H 230.0     /* plot height of a panel */
#define PANEL_GAP 95.0    /* title and x labels of a panel */

static const char *const color_keys = "#3b6ea8";
static const char *const color_bytes = "#e1812c";
static const char *const color_reqs = "#3a923a";
static const char *const color_ideal = "#c03d3e";
static const char *const color_ring = "#8c61b8";

/* Text content or attribute value: markup characters escaped; control
 * bytes, and bytes above 0x7f when the text is not valid UTF-8, as '?'. */
static void put_text(FILE *f, const char *s)
{
    int raw = cli_utf8_valid(s);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default:
            if (*p < 0x20 || *p == 0x7f || (*p >= 0x80 && !raw))
                putc('?', f);
            else
                putc(*p, f);
        }
    }
}

static void text(FILE *f, double x, double y, const char *anchor, const char *extra,
                 const char *s)
{
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\"%s%s>", x, y, anchor,
            extra ? " " : "", extra ? extra : "");
    put_text(f, s);
    fputs("</text>\n", f);
}

/* A "nice" axis maximum above v: 1, 2 or 5 times a power of ten. */
static double nice_max(double v)
{
    if (!(v > 0))
        return 1;
    static const double steps[] = {1, 1.5, 2, 2.5, 3, 4, 5, 6, 8};
    double p = pow(10, floor(log10(v)));
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
        if (steps[i] * p >= v)
            return steps[i] * p;
    return 10 * p;
}

/* Frame, horizontal grid lines with labels from 0 to ymax, the panel title. */
static void axes(FILE *f, double top, double ymax, const char *title, const char *ylabel)
{
    double x0 = LEFT, x1 = W - RIGHT, y1 = top + PANEL_H;
    text(f, LEFT, top - 14, "start", "font-weight=\"bold\"", title);
    for (int i = 0; i <= 5; i++) {
        double v = ymax * i / 5, y = y1 - PANEL_H * i / 5;
        char lab[32];
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x0,
                y, x1, y);
        snprintf(lab, sizeof(lab), "%.3g", v);
        text(f, x0 - 6, y + 4, "end", NULL, lab);
    }
    fprintf(f,
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
            "stroke=\"#888\"/>\n",
            x0, top, x1 - x0, PANEL_H);
    fprintf(f,
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
            "transform=\"rotate(-90 %.1f %.1f)\">",
            LEFT - 48, top + PANEL_H / 2, LEFT - 48, top + PANEL_H / 2);
    put_text(f, ylabel);
    fputs("</text>\n", f);
}

static void legend(FILE *f, double top, int row, const char *color, const char *label, int dashed)
{
    double x = W - RIGHT + 16, y = top + 10 + row * 20;
    if (dashed)
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                "stroke-width=\"2\" stroke-dasharray=\"5,3\"/>\n",
                x, y, x + 18, y, color);
    else
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"18\" height=\"10\" fill=\"%s\"/>\n", x,
                y - 5, color);
    text(f, x + 24, y + 4, "start", NULL, label);
}

static void mode_label(FILE *f, double x, double y, const char *name)
{
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" transform=\"rotate(-30 %.1f %.1f)\">",
            x, y, x, y);
    put_text(f, name);
    fputs("</text>\n", f);
}

/* Panel 1: share of keys moved by each mode, its ideal as a dashed mark. */
static void panel_moved(FILE *f, const sim_chart *c, double top)
{
    double ymax = 0;
    for (size_t i = 0; i < c->nmodes; i++) {
        if (c->modes[i].moved_keys > ymax)
            ymax = c->modes[i].moved_keys;
        if (c->modes[i].ideal > ymax)
            ymax = c->modes[i].ideal;
    }
    ymax = nice_max(ymax * 1.1);
    axes(f, top, ymax, "Share of keys moved by the change, against the ideal", "share of keys");
    double slot = (W - RIGHT - LEFT) / (double)c->nmodes, y1 = top + PANEL_H;
    for (size_t i = 0; i < c->nmodes; i++) {
        const sim_chart_mode *m = &c->modes[i];
        double x = LEFT + slot * (double)i, bw = slot * 0.5, bx = x + (slot - bw) / 2;
        double h = PANEL_H * m->moved_keys / ymax, yi = y1 - PANEL_H * m->ideal / ymax;
        char lab[32];
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n", bx,
                y1 - h, bw, h, color_keys);
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                "stroke-width=\"2\" stroke-dasharray=\"5,3\"/>\n",
                x + slot * 0.1, yi, x + slot * 0.9, yi, color_ideal);
        snprintf(lab, sizeof(lab), "%.4f", m->moved_keys);
        text(f, bx + bw / 2, y1 - h - 4, "middle", "font-size=\"10\"", lab);
        mode_label(f, x + slot / 2 + 4, y1 + 14, m->name);
    }
    legend(f, top, 0, color_keys, "keys moved", 0);
    legend(f, top, 1, color_ideal, "ideal", 1);
}

/* Panel 2: peak-to-mean of keys, bytes and requests after the change. */
static void panel_balance(FILE *f, const sim_chart *c, double top)
{
    double ymax = 1;
    for (size_t i = 0; i < c->nmodes; i++) {
        const sim_chart_mode *m = &c->modes[i];
        double v[3] = {m->p2m_keys, m->p2m_bytes, m->p2m_requests};
        for (int k = 0; k < 3; k++)
            if (v[k] > ymax)
                ymax = v[k];
    }
    ymax = nice_max(ymax * 1.05);
    axes(f, top, ymax, "Peak-to-mean per server after the change (1 = even, relative to weight)",
         "peak / mean");
    double slot = (W - RIGHT - LEFT) / (double)c->nmodes, y1 = top + PANEL_H;
    const char *colors[3] = {color_keys, color_bytes, color_reqs};
    for (size_t i = 0; i < c->nmodes; i++) {
        const sim_chart_mode *m = &c->modes[i];
        double v[3] = {m->p2m_keys, m->p2m_bytes, m->p2m_requests};
        double x = LEFT + slot * (double)i, bw = slot * 0.8 / 3;
        for (int k = 0; k < 3; k++) {
            double h = PANEL_H * v[k] / ymax;
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n",
                    x + slot * 0.1 + bw * k, y1 - h, bw * 0.92, h, colors[k]);
        }
        mode_label(f, x + slot / 2 + 4, y1 + 14, m->name);
    }
    double y = y1 - PANEL_H / ymax;
    fprintf(f,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\" "
            "stroke-dasharray=\"2,2\"/>\n",
            LEFT, y, W - RIGHT, y);
    legend(f, top, 0, color_keys, "keys", 0);
    legend(f, top, 1, color_bytes, "bytes", 0);
    legend(f, top, 2, color_reqs, "requests", 0);
}

/* Panel 3: cv against points per unit of weight, log2 scale. */
static void panel_sweep(FILE *f, const sim_chart *c, double top)
{
    char title[160], lab[32];
    double ymax = c->floor_cv;
    for (size_t i = 0; i < c->nsweep; i++) {
        if (c->sweep[i].ring_cv > ymax)
            ymax = c->sweep[i].ring_cv;
        if (c->sweep[i].keys_cv > ymax)
            ymax = c->sweep[i].keys_cv;
    }
    ymax = nice_max(ymax * 1.05);
    snprintf(title, sizeof(title), "%s: balance against points per unit of weight",
             c->sweep_mode);
    axes(f, top, ymax, title, "coefficient of variation");
    double lo = log2(c->sweep[0].points), hi = log2(c->sweep[c->nsweep - 1].points);
    double span = hi > lo ? hi - lo : 1, y1 = top + PANEL_H, pw = W - RIGHT - LEFT - 40;
#define PX(p) (LEFT + 20 + pw * (log2(p) - lo) / span)
#define PY(v) (y1 - PANEL_H * (v) / ymax)
    for (size_t i = 0; i < c->nsweep; i++) {
        snprintf(lab, sizeof(lab), "%.0f", c->sweep[i].points);
        text(f, PX(c->sweep[i].points), y1 + 16, "middle", NULL, lab);
    }
    text(f, LEFT + (W - RIGHT - LEFT) / 2, y1 + 34, "middle", NULL, "points per unit of weight");
    if (c->knee > 0) {
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\" "
                "stroke-dasharray=\"4,4\"/>\n",
                PX(c->knee), top, PX(c->knee), y1);
        /* the label on the side of the line that has room */
        bool right_half = PX(c->knee) > LEFT + (W - RIGHT - LEFT) / 2;
        text(f, PX(c->knee) + (right_half ? -4 : 4), top + 14, right_half ? "end" : "start",
             "font-size=\"11\"", "diminishing returns");
    }
    fprintf(f,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
            "stroke-width=\"2\" stroke-dasharray=\"5,3\"/>\n",
            LEFT, PY(c->floor_cv), W - RIGHT, PY(c->floor_cv), color_ideal);
    const char *colors[2] = {color_keys, color_ring};
    for (int s = 0; s < 2; s++) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", colors[s]);
        for (size_t i = 0; i < c->nsweep; i++) {
            double v = s == 0 ? c->sweep[i].keys_cv : c->sweep[i].ring_cv;
            fprintf(f, "%s%.1f,%.1f", i ? " " : "", PX(c->sweep[i].points), PY(v));
        }
        fputs("\"/>\n", f);
        for (size_t i = 0; i < c->nsweep; i++) {
            double v = s == 0 ? c->sweep[i].keys_cv : c->sweep[i].ring_cv;
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n",
                    PX(c->sweep[i].points), PY(v), colors[s]);
        }
    }
#undef PX
#undef PY
    legend(f, top, 0, color_keys, "keys cv", 0);
    legend(f, top, 1, color_ring, "hash space cv", 0);
    legend(f, top, 2, color_ideal, "random assignment", 1);
}

int sim_svg_write(const char *path, const sim_chart *c, char *err, size_t errlen)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    int panels = 2 + (c->nsweep > 0);
    double h = 60 + panels * (PANEL_H + PANEL_GAP);
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%.0f\" "
            "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" "
            "font-size=\"12\">\n",
            W, h, W, h);
    fputs("<title>mcroute simulate</title>\n", f);
    fprintf(f, "<rect width=\"%.0f\" height=\"%.0f\" fill=\"#fff\"/>\n", W, h);
    text(f, W / 2, 24, "middle", "font-size=\"15\" font-weight=\"bold\"",
         "mcroute simulate: placements compared");
    text(f, W / 2, 44, "middle", "font-size=\"11\"", c->title);
    double top = 60 + 30;
    if (c->nmodes > 0) {
        panel_moved(f, c, top);
        top += PANEL_H + PANEL_GAP;
        panel_balance(f, c, top);
        top += PANEL_H + PANEL_GAP;
    }
    if (c->nsweep > 0)
        panel_sweep(f, c, top);
    fputs("</svg>\n", f);
    int bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad) {
        snprintf(err, errlen, "error writing %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}
