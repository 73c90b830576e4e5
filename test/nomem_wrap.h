/* SPDX-License-Identifier: BSD-3-Clause */
/* nomem_wrap.h: allocation failures on demand, for the suites linked with nomem_wrap.c and its -Wl,--wrap options. */
#ifndef MCR_NOMEM_WRAP_H
#define MCR_NOMEM_WRAP_H
/*
 * A suite linked with nomem_wrap.c and -Wl,--wrap for malloc, calloc,
 * realloc, posix_memalign, strdup, free and getline (test/CMakeLists.txt:
 * mcr_suite_nomem()) has every such call of its statically linked objects
 * (the library's, its own) pass through here first; calls made inside
 * shared libraries (libc's own, libevent's, libyaml's, liburcu's) do not.
 *
 * Armed with k on a thread, the wrappers let that thread's next k
 * allocations through and fail the one after (NULL, ENOMEM from
 * posix_memalign, -1 with ENOMEM from a getline that has to make its
 * buffer); those after it succeed again, so a run tests one failure and the
 * code's way out of it. Other threads' allocations are never failed nor
 * counted as seen. The blocks alive are counted over all threads, so that a
 * leak on a way out fails a plain build too.
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

#endif
