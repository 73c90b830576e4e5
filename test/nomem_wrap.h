/* SPDX-License-Identifier: BSD-3-Clause */
/* nomem_wrap.h: allocation failures on demand, and an operation run with each of its allocations failing in turn, for the suites linked with nomem_wrap.c and its -Wl,--wrap options. */
#ifndef MCR_NOMEM_WRAP_H
#define MCR_NOMEM_WRAP_H

#include "mcroute.h"
/*
 * A suite linked with nomem_wrap.c and -Wl,--wrap for malloc, calloc,
 * realloc, posix_memalign, strdup, strndup, free and getline
 * (test/CMakeLists.txt: mcr_suite_nomem()) has every such call of its statically linked objects
 * (the library's, its own) pass through here first; calls made inside
 * shared libraries (libc's own, libevent's, libyaml's, liburcu's) do not.
 *
 * Armed with k on a thread, the wrappers let that thread's next k
 * allocations through and fail the one after (NULL, ENOMEM from
 * posix_memalign, -1 with ENOMEM from a getline that has to make its
 * buffer); those after it succeed again, so a run tests one failure and the
 * code's way out of it. Other threads' allocations are never failed nor
 * counted as seen. The blocks alive are counted over all threads, so that a
 * leak on a way out fails a plain build too. With NM_BACKTRACE set in the
 * environment, each failure prints its stack (glibc's backtrace) to stderr.
 */

/* Fail the calling thread's allocation number k + 1 from now (0: the next);
 * k < 0: none. Resets the count of allocations seen. */
void nm_arm(long k);

/* Disarm; 1 when the armed failure came. */
int nm_disarm(void);

/* Allocations the arming thread made since nm_arm(). */
long nm_seen(void);

/* Blocks allocated through the wrappers and not freed yet (all threads). */
long nm_live(void);

/* For a suite's own wrapper of a shared library's call that returns a block
 * the statically linked code frees with free() (jansson's json_dumps(), say):
 * nm_fail_here() says whether this call is the one to fail (it counts as
 * an allocation), nm_counted() counts the block it made (NULL: none) and
 * returns it. */
int nm_fail_here(void);
void *nm_counted(void *p);

/* An operation for nm_every_failure(). */
typedef struct nm_op {
    const char *name;
    int (*run)(void *ctx, mcr_error *err); /* the operation, armed */
    void (*check)(void *ctx);              /* after MCR_OK: its result is right */
    void (*clean)(void *ctx);              /* frees what run made, either way */
    int varies; /* 1: a run may make fewer allocations than the first (network
                   reads): from the half on, a run that makes fewer than k + 1
                   ends the loop; 0: that run fails the test */
} nm_op;

/* Runs `op` once without a failure (it must succeed, pass `check` and
 * leak nothing), counting its allocations, then once with each of them
 * failing in turn (with `sample` > 0, the first and the last `sample` of
 * them only). Each failing run must return MCR_ERR_NOMEM with err.code set
 * and a message, or MCR_OK and pass `check` (the failure was absorbed);
 * after `clean`, no block may stay allocated. `want` (NULL: none) must be
 * part of the message of at least one failure. Check assertions; returns
 * how many allocations a whole run makes. On the calling thread. */
long nm_every_failure(const nm_op *op, void *ctx, long sample, const char *want);

#endif
