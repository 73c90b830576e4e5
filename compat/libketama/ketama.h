/* SPDX-License-Identifier: BSD-3-Clause */
/* ketama.h: libketama's C API (last.fm's consistent hashing library), provided by mcroute's libketama.
 *
 * INTRODUCTION
 *
 * A program written for the original libketama builds against this header
 * and links against mcroute's libketama by changing only its include and
 * library paths:
 *
 *     cc -I/usr/include/mcroute-ketama prog.c -lketama
 *     (or: cc $(pkg-config --cflags --libs mcroute-ketama) prog.c)
 *
 * and gets the same server and the same point for every key: the continuum
 * is libketama's (labels "address-k" with the address as written in the
 * server file, floorf(pct * 40.0 * numservers) labels per server, four
 * points per MD5 digest, the successor rule), computed by libmcroute.
 *
 * The server file is read by mcr_ketama_load_file() (see
 * <mcroute_ketama.h>): `address memory` a line, '#' comments. It reads some
 * files that the original misreads (the last line without a newline, blanks
 * after the memory field, addresses over 21 bytes, lines over 126
 * bytes): there the two libraries differ, and mcroute is the one that reads
 * what the file says. <mcroute_ketama.h> lists every case.
 *
 * DIFFERENCES FROM THE ORIGINAL
 *
 *   - Source compatible, not binary compatible: `mcs.ip` is larger (below),
 *     and the continuum lives in the process, not in System V shared memory.
 *     The SONAME is libketama.so.2, so that programs linked against the
 *     original's libketama.so.1 never load this one by mistake: rebuild them.
 *   - No shared memory, semaphores or ftok(): each ketama_roll() reads the
 *     file into a continuum of its own. ketama_get_server() stat()s the file
 *     on every call and rebuilds the continuum when the file changed, as the
 *     original promised (it only noticed a change in ketama_roll()).
 *   - ketama_smoke() frees the continuum it is given, and only that one (the
 *     original removed every shared memory segment and semaphore the process
 *     had created, so one call ended every continuum).
 *   - A failing ketama_roll() sets *contptr to NULL (the original left an
 *     empty continuum whose lookups crash).
 *   - NULL arguments are checked where the original crashed (each function
 *     says what it does).
 *   - ketama_error() is per thread.
 *   - The header no longer includes <sys/sem.h> nor defines `union semun`
 *     and MC_SHMSIZE, which belonged to the shared memory implementation.
 *     It includes <sys/types.h> (for time_t, which `modtime` points to).
 *
 * THREADS
 *
 * A continuum belongs to one thread at a time: ketama_get_server() may
 * rebuild it. Different continua (from separate ketama_roll() calls, even of
 * the same file) may be used by different threads at the same time without
 * locking. ketama_hashi(), ketama_md5_digest() and ketama_compare() are
 * thread-safe. ketama_error() reports the last error of the calling thread.
 * (The original was safe in none of these cases: its state was global.)
 */
#ifndef MCROUTE_COMPAT_KETAMA_H
#define MCROUTE_COMPAT_KETAMA_H

#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(KETAMA_BUILDING_LIBRARY) && defined(__GNUC__)
#define KETAMA_EXTERN __attribute__((visibility("default")))
#else
#define KETAMA_EXTERN
#endif

/* Defined by mcroute's ketama.h only: a program may test it to know which
 * library it was built against. Its value is the major number of the
 * SONAME. */
#define KETAMA_MCROUTE 2

/* Size of mcs.ip and serverinfo.addr. The original's was 22 bytes, which cut
 * longer addresses (a hostname, an IPv6 address). 256 holds every address
 * the server file may contain (255 bytes and the terminating NUL), so `ip`
 * is always the whole address as written and always NUL-terminated. */
#define KETAMA_IP_SIZE 256

/* The qsort() comparison type that ketama_compare() is cast to. */
typedef int (*compfn)(const void *, const void *);

/* A point of the continuum. */
typedef struct {
    unsigned int point;      /* its value on the circle, 0 .. 2^32-1 */
    char ip[KETAMA_IP_SIZE]; /* the owning server's address as written in the
                                file ("10.0.1.1:11211"), NUL-terminated */
} mcs;

/* A server line of the file, as the original declared it. No function of
 * this API takes or returns one; kept for programs that use the type. */
typedef struct {
    char addr[KETAMA_IP_SIZE]; /* address as written */
    unsigned long memory;      /* its memory field: the weight */
} serverinfo;

/* A continuum, as ketama_roll() returns it. Programs may read the fields
 * (the bindings of the original read `array` to list the points); they
 * must not change them. */
typedef struct {
    int numpoints;  /* number of points in `array` */
    void *modtime;  /* points to a time_t: the modification time (seconds
                       since the epoch) of the file the points were built
                       from (the original stored mktime(gmtime(mtime)),
                       off by the local UTC offset) */
    void *array;    /* mcs[numpoints], ascending by point; equal points in
                       file order of their servers */
} continuum;

/* The handle every function takes: a pointer to a continuum. */
typedef continuum *ketama_continuum;

/* ketama_roll: read the server file `filename` and build its continuum into
 * a new handle stored in *contptr. The file is read on every call (nothing
 * is cached between calls or shared between processes); the string is only
 * read, and copied to find the file again when it changes.
 *
 * Returns 1 on success (ketama_error() is then ""), or 0 with *contptr set
 * to NULL (when contptr is not NULL) and ketama_error() telling why: the
 * file cannot be read, a line is malformed (the message names the file, the
 * line and the problem), the file has no server, memory ran out. Free the
 * handle with ketama_smoke(). */
KETAMA_EXTERN int ketama_roll(ketama_continuum *contptr, char *filename);

/* ketama_smoke: free a continuum and everything it owns. NULL is a no-op.
 * Pointers returned by ketama_get_server() for it become invalid. Other
 * continua are not affected. */
KETAMA_EXTERN void ketama_smoke(ketama_continuum contptr);

/* ketama_get_server: the point owning `key` (a NUL-terminated string): the
 * first point whose value is >= the key's hash (ketama_hashi), wrapping past
 * the last point to the first. Its `point` is that point's value, its `ip`
 * the server's address as written in the file.
 *
 * Before the lookup, the file is stat()ed (one system call per lookup): if
 * its modification time changed since the continuum was built, or its
 * status-change time, size or inode (which also catch a file replaced by a
 * rename, or rewritten by a tool that restores the modification time), the
 * continuum is rebuilt from it first. The path is the one given to
 * ketama_roll(): a relative one is resolved against the current directory
 * of each call. If the new file cannot be
 * read or is malformed, the old continuum stays in use and ketama_error()
 * says why; the file is read again only once it changes again. A file that
 * has disappeared keeps the old continuum as well.
 *
 * The pointer points into the continuum's array: valid until the continuum
 * is rebuilt (by a later ketama_get_server() call that sees a changed file)
 * or smoked; copy `ip` to keep it longer. Returns NULL when `cont` is NULL;
 * a NULL key is looked up as "". */
KETAMA_EXTERN mcs *ketama_get_server(char *key, ketama_continuum cont);

/* ketama_print_continuum: print the continuum to stdout in the original's
 * format: "Numpoints in continuum: N", then one "ip (point)" line per point
 * in ascending order ("Continuum empty" instead for a NULL handle, N being
 * 0). Does not check the file for changes. */
KETAMA_EXTERN void ketama_print_continuum(ketama_continuum c);

/* ketama_compare: -1, 0 or 1 as a's point is below, equal to or above b's:
 * the order of the continuum, for qsort() through compfn. Thread-safe. */
KETAMA_EXTERN int ketama_compare(mcs *a, mcs *b);

/* ketama_hashi: the key hash: the first four bytes of the MD5 digest of the
 * string `inString` (without its NUL), read little-endian. NULL hashes as
 * "". Thread-safe. */
KETAMA_EXTERN unsigned int ketama_hashi(char *inString);

/* ketama_md5_digest: the 16-byte MD5 digest of the string `inString`
 * (without its NUL) into md5pword. NULL digests as "". Thread-safe. */
KETAMA_EXTERN void ketama_md5_digest(char *inString, unsigned char md5pword[16]);

/* ketama_error: the last error of the calling thread, "" after a successful
 * ketama_roll(). A static per-thread buffer, overwritten by the thread's
 * next failing call; never NULL. */
KETAMA_EXTERN char *ketama_error(void);

#ifdef __cplusplus
}
#endif

#endif /* MCROUTE_COMPAT_KETAMA_H */
