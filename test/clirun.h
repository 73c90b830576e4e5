/* SPDX-License-Identifier: BSD-3-Clause */
/* clirun.h: run the built mcroute command as a real process, with a given standard input, and collect what it printed. */
#ifndef MCR_CLIRUN_H
#define MCR_CLIRUN_H

#include <stddef.h>

typedef struct run {
    int status;   /* exit status; -1 if killed by a signal (or by the deadline) */
    char *out;    /* whole stdout, NUL-terminated (may contain NULs) */
    size_t outlen;
    char *err;    /* whole stderr, NUL-terminated */
    long ms;      /* how long it ran */
} run;

/* Run $MCR_TEST_BIN_DIR/mcroute (tu_cli_path(), testutil.h) with argv (NULL-terminated, argv[0]
 * ignored) and `inlen` bytes of `in` as standard input. */
run run_cli(const char *in, size_t inlen, const char *const *argv);

/* The same, killing it (SIGKILL, status -1) when it runs longer than
 * deadline_ms times MCR_TEST_TIME_SCALE (testutil.h). */
run run_cli_deadline(const char *in, size_t inlen, const char *const *argv, long deadline_ms);

/* Run mcroute with argv (as run_cli) and standard input from the file
 * `stdin_path`, standard error (and standard output when `stdout_too`) on
 * a pseudo-terminal: what the terminal received (malloc'd, NUL-terminated;
 * the caller frees it), the exit status in *status (-1: killed). For the
 * progress lines, drawn only on a terminal. */
char *run_cli_pty(const char *const *argv, const char *stdin_path, int stdout_too, int *status);

/* Start $MCR_TEST_BIN_DIR/mcroute with argv in the background: standard
 * input /dev/null, standard output and error appended to `log` (created
 * when missing), killed with SIGKILL when the test process dies
 * (PR_SET_PDEATHSIG). Returns its pid (the caller stops and reaps it);
 * the test fails when it cannot fork. */
int run_cli_bg(const char *log, const char *const *argv);

/* Free what a run collected (pointers set to NULL: a second call is a no-op). */
void run_free(run *r);

/* Free the buffers of every run not yet freed: from a teardown, for the
 * runs of a test whose failed assertion skipped its run_free() calls. */
void run_free_all(void);

/* Bad input: exit 2, nothing on stdout, a message containing `needle`. */
void expect_usage_error(const char *const *argv, const char *needle);

#define ARGS(...) ((const char *const[]){"mcroute", __VA_ARGS__, NULL})

#endif
