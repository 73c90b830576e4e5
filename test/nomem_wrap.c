/* SPDX-License-Identifier: BSD-3-Clause */
/* nomem_wrap.c: the -Wl,--wrap allocation wrappers behind nomem_wrap.h (one failure on demand, blocks alive counted) and the driver that fails an operation's allocations in turn. */
#define _GNU_SOURCE /* getline's prototype for its wrapper */
#include "nomem_wrap.h"

#include <check.h>
#include <errno.h>
#include <execinfo.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
int __real_posix_memalign(void **out, size_t align, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void __real_free(void *p);
ssize_t __real_getline(char **line, size_t *cap, FILE *f);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
int __wrap_posix_memalign(void **out, size_t align, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);
void __wrap_free(void *p);
ssize_t __wrap_getline(char **line, size_t *cap, FILE *f);

static _Thread_local int armed;     /* this thread armed nm_arm() */
static _Thread_local long countdown; /* allocations to let through */
static _Thread_local int injected;  /* the armed failure came */
static _Thread_local long seen;     /* allocations since nm_arm() */
static atomic_long live;            /* blocks allocated here and not freed */

static int fail_now(void)
{
    if (!armed)
        return 0;
    seen++;
    if (countdown < 0)
        return 0;
    if (countdown-- > 0)
        return 0;
    injected = 1; /* countdown is -1 now: the rest succeed */
    if (getenv("NM_BACKTRACE") != NULL) { /* where the failure is: for debugging */
        void *bt[24];
        backtrace_symbols_fd(bt, backtrace(bt, 24), 2);
        fputs("-- (the allocation failed above)\n", stderr);
    }
    return 1;
}

static void *counted(void *p)
{
    if (p != NULL)
        atomic_fetch_add_explicit(&live, 1, memory_order_relaxed);
    return p;
}

void *__wrap_malloc(size_t n)
{
    return fail_now() ? NULL : counted(__real_malloc(n));
}

void *__wrap_calloc(size_t n, size_t size)
{
    return fail_now() ? NULL : counted(__real_calloc(n, size));
}

void *__wrap_realloc(void *p, size_t n)
{
    if (fail_now())
        return NULL; /* p stays the caller's */
    void *q = __real_realloc(p, n);
    return p == NULL ? counted(q) : q;
}

int __wrap_posix_memalign(void **out, size_t align, size_t n)
{
    if (fail_now())
        return ENOMEM;
    int rc = __real_posix_memalign(out, align, n);
    if (rc == 0)
        counted(*out);
    return rc;
}

char *__wrap_strdup(const char *s)
{
    return fail_now() ? NULL : counted(__real_strdup(s));
}

char *__wrap_strndup(const char *s, size_t n)
{
    return fail_now() ? NULL : counted(__real_strndup(s, n));
}

void __wrap_free(void *p)
{
    if (p != NULL)
        atomic_fetch_sub_explicit(&live, 1, memory_order_relaxed);
    __real_free(p);
}

/* An allocation when it has to make the buffer: a call with none. */
ssize_t __wrap_getline(char **line, size_t *cap, FILE *f)
{
    int fresh = *line == NULL;
    if (fresh && fail_now()) {
        errno = ENOMEM;
        return -1;
    }
    ssize_t n = __real_getline(line, cap, f);
    if (fresh)
        counted(*line);
    return n;
}

void nm_arm(long k)
{
    armed = 1;
    seen = 0;
    injected = 0;
    countdown = k;
}

int nm_disarm(void)
{
    armed = 0;
    countdown = -1;
    return injected;
}

long nm_seen(void)
{
    return seen;
}

int nm_fail_here(void)
{
    return fail_now();
}

void *nm_counted(void *p)
{
    return counted(p);
}

long nm_live(void)
{
    return atomic_load_explicit(&live, memory_order_relaxed);
}

/* ------------------------------------------------------------ the driver */

long nm_every_failure(const nm_op *op, void *ctx, long sample, const char *want)
{
    mcr_error err;
    long live0 = nm_live();

    nm_arm(-1);
    int rc = op->run(ctx, &err);
    long total = nm_seen();
    nm_disarm();
    ck_assert_msg(rc == MCR_OK, "%s without a failure: %d: %s", op->name, rc, err.message);
    op->check(ctx);
    op->clean(ctx);
    ck_assert_msg(nm_live() == live0, "%s leaks %ld blocks without a failure", op->name,
                  nm_live() - live0);
    ck_assert_msg(total > 0, "%s allocates nothing: the wrappers are not linked in", op->name);

    int wanted = want == NULL;
    long nomem = 0;
    for (long k = 0; k < total; k++) {
        if (sample > 0 && k >= sample && k < total - sample)
            continue;
        memset(&err, 0, sizeof(err));
        nm_arm(k);
        rc = op->run(ctx, &err);
        int hit = nm_disarm();
        if (!hit && op->varies && k >= total / 2) {
            /* a run with fewer allocations than the first: the ones after
             * are not there to fail (what was run stays checked) */
            if (rc == MCR_OK)
                op->check(ctx);
            op->clean(ctx);
            ck_assert_msg(nm_live() == live0, "%s, run %ld: %ld blocks leaked", op->name, k + 1,
                          nm_live() - live0);
            break;
        }
        ck_assert_msg(hit, "%s: allocation %ld of %ld never came (the run is not the same "
                      "each time)", op->name, k + 1, total);
        if (rc == MCR_OK) {
            op->check(ctx); /* the failure was absorbed: the result must still be right */
        } else {
            ck_assert_msg(rc == MCR_ERR_NOMEM, "%s, allocation %ld of %ld failed: %s (%d), "
                          "not MCR_ERR_NOMEM: %s", op->name, k + 1, total, mcr_strerror(rc),
                          rc, err.message);
            ck_assert_msg(err.code == rc, "%s, allocation %ld: err.code %d, returned %d",
                          op->name, k + 1, err.code, rc);
            ck_assert_msg(err.message[0] != '\0', "%s, allocation %ld: no message", op->name,
                          k + 1);
            if (want != NULL && strstr(err.message, want) != NULL)
                wanted = 1;
            nomem++;
        }
        op->clean(ctx);
        ck_assert_msg(nm_live() == live0, "%s, allocation %ld of %ld failed: %ld blocks leaked",
                      op->name, k + 1, total, nm_live() - live0);
    }
    ck_assert_msg(nomem > 0, "%s: no failure was reported", op->name);
    ck_assert_msg(wanted, "%s: no failure said \"%s\"", op->name, want);
    return total;
}
