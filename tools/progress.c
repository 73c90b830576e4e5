/* SPDX-License-Identifier: BSD-3-Clause */
/* progress.c: the progress line of long runs, drawn on standard error only when it is a terminal. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

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

static void draw(size_t done)
{
    char line[160];
    int n = pg.total > 0 ? snprintf(line, sizeof(line), "%s %s: %zu/%zu keys", cli_progname,
                                    pg.cmd, done, pg.total)
                         : snprintf(line, sizeof(line), "%s %s: %zu keys", cli_progname,
                                    pg.cmd, done);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1;
    fputc('\r', stderr);
    fwrite(line, 1, len, stderr);
    for (size_t i = len; i < pg.width; i++) /* what a longer line left */
        fputc(' ', stderr);
    fflush(stderr);
    if (len > pg.width)
        pg.width = len;
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
