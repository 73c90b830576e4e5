/* SPDX-License-Identifier: BSD-3-Clause */
/* ketama.c: libketama's C API over libmcroute: continua built from server files, rebuilt when their file changes. */
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "ketama.h"
#include "mcroute.h"
#include "mcroute_ketama.h"

/* An mcr_error message and room for a prefix naming the function. */
#define KETAMA_ERROR_SIZE (MCR_ERROR_MESSAGE_SIZE + 64)

/* Per thread: the original's single global buffer made concurrent
 * ketama_roll() calls overwrite each other's reasons. */
static _Thread_local char k_error[KETAMA_ERROR_SIZE];

/* One version of the server file. A rewrite in place changes the
 * modification and status-change times (the latter even when a tool such
 * as `cp -p` restores the former), a rename over the file the inode. */
typedef struct file_id {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    struct timespec ctime;
} file_id;

/* What a ketama_continuum points to: the public struct first, so the
 * handle converts back to the whole state. */
typedef struct ketama_state {
    continuum pub;
    time_t modtime;  /* *pub.modtime */
    char *path;      /* the file as given to ketama_roll(), stat()ed on
                        every lookup */
    mcr_ring *ring;  /* the key hash and the owning point of a hash */
    mcs *array;      /* pub.array: the ring's points with their addresses,
                        what ketama_get_server() returns pointers into */
    file_id built;   /* the version the continuum was built from */
    file_id failed;  /* a version that did not build: not read again */
    bool has_failed;
} ketama_state;

static void set_error(const char *msg)
{
    snprintf(k_error, sizeof(k_error), "%s", msg);
}

static bool stat_file(const char *path, file_id *id)
{
    struct stat sb;

    if (stat(path, &sb) != 0)
        return false;
    memset(id, 0, sizeof(*id));
    id->dev = sb.st_dev;
    id->ino = sb.st_ino;
    id->size = sb.st_size;
    id->mtime = sb.st_mtim;
    id->ctime = sb.st_ctim;
    return true;
}

static bool same_file(const file_id *a, const file_id *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
           a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}

/* Read the server file into a new ring and its mcs array. Returns 1, or 0
 * with k_error set and nothing allocated. */
static int build(const char *path, mcr_ring **ring_out, mcs **array_out, int *numpoints)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    mcr_ring *ring = NULL;
    mcs *array;
    size_t np;

    if (cfg == NULL) {
        set_error("out of memory");
        return 0;
    }
    /* A new config is already libketama's placement: mode "ketama", md5. */
    if (mcr_ketama_load_file(cfg, path, &err) != MCR_OK ||
        mcr_ring_new(cfg, &ring, &err) != MCR_OK) {
        set_error(err.message);
        mcr_config_free(cfg);
        return 0;
    }
    np = mcr_ring_point_count(ring);
    if (np > INT_MAX) { /* numpoints is an int in the original's struct */
        snprintf(k_error, sizeof(k_error), "%s: %zu points do not fit libketama's int count",
                 path, np);
        mcr_ring_free(ring);
        mcr_config_free(cfg);
        return 0;
    }
    /* calloc: every ip is NUL-padded, so copying an mcs copies no garbage. */
    array = calloc(np > 0 ? np : 1, sizeof(*array));
    if (array == NULL) {
        set_error("out of memory for the continuum");
        mcr_ring_free(ring);
        mcr_config_free(cfg);
        return 0;
    }
    for (size_t i = 0; i < np; i++) {
        uint32_t value, server;
        mcr_ring_point(ring, i, &value, &server);
        /* Every server of the file has its address as label, of at most
         * MCR_HOSTNAME_MAX (< KETAMA_IP_SIZE) bytes. */
        const char *addr = mcr_ketama_address(cfg, server);
        array[i].point = value;
        memcpy(array[i].ip, addr, strlen(addr));
    }
    mcr_config_free(cfg);
    *ring_out = ring;
    *array_out = array;
    *numpoints = (int)np;
    return 1;
}

/* Install a freshly built continuum in st, freeing the previous one. */
static void install(ketama_state *st, mcr_ring *ring, mcs *array, int numpoints,
                    const file_id *id)
{
    mcr_ring_free(st->ring);
    free(st->array);
    st->ring = ring;
    st->array = array;
    st->built = *id;
    st->has_failed = false;
    st->modtime = id->mtime.tv_sec;
    st->pub.numpoints = numpoints;
    st->pub.array = array;
    st->pub.modtime = &st->modtime;
}

/* Rebuild st when its file is not the version it was built from (nor one
 * that already failed). A file that cannot be stat()ed keeps the old
 * continuum: an editor or a deployment may be replacing it. */
static void refresh(ketama_state *st)
{
    file_id now;
    mcr_ring *ring;
    mcs *array;
    int np;

    if (!stat_file(st->path, &now) || same_file(&now, &st->built) ||
        (st->has_failed && same_file(&now, &st->failed)))
        return;
    /* `now` was taken before reading: if the file changes during the read,
     * the next lookup sees a version other than `built` and reads it again. */
    if (build(st->path, &ring, &array, &np)) {
        install(st, ring, array, np, &now);
    } else {
        st->failed = now;
        st->has_failed = true;
    }
}

int ketama_roll(ketama_continuum *contptr, char *filename)
{
    ketama_state *st;
    file_id id;
    mcr_ring *ring;
    mcs *array;
    int np;

    k_error[0] = '\0';
    if (contptr == NULL || filename == NULL) {
        set_error(contptr == NULL ? "ketama_roll: NULL continuum pointer"
                                  : "ketama_roll: NULL file name");
        if (contptr != NULL)
            *contptr = NULL;
        return 0;
    }
    *contptr = NULL;
    st = calloc(1, sizeof(*st));
    if (st == NULL || (st->path = strdup(filename)) == NULL) {
        free(st);
        set_error("out of memory");
        return 0;
    }
    /* Without a stat() the file cannot be opened either: build() says why. */
    if (!stat_file(filename, &id))
        memset(&id, 0, sizeof(id));
    if (!build(filename, &ring, &array, &np)) {
        free(st->path);
        free(st);
        return 0;
    }
    install(st, ring, array, np, &id);
    *contptr = &st->pub;
    return 1;
}

void ketama_smoke(ketama_continuum contptr)
{
    ketama_state *st = (ketama_state *)contptr;

    if (st == NULL)
        return;
    mcr_ring_free(st->ring);
    free(st->array);
    free(st->path);
    free(st);
}

mcs *ketama_get_server(char *key, ketama_continuum cont)
{
    ketama_state *st = (ketama_state *)cont;
    const char *k = key != NULL ? key : "";

    if (st == NULL)
        return NULL;
    refresh(st);
    if (st->pub.numpoints == 0)
        return NULL;
    return &st->array[mcr_ring_find_point(st->ring, mcr_ring_hash(st->ring, k, strlen(k)))];
}

void ketama_print_continuum(ketama_continuum c)
{
    const mcs *a = c != NULL ? c->array : NULL;

    printf("Numpoints in continuum: %d\n", c != NULL ? c->numpoints : 0);
    if (a == NULL) {
        printf("Continuum empty\n");
        return;
    }
    for (int i = 0; i < c->numpoints; i++)
        printf("%s (%u)\n", a[i].ip, a[i].point);
}

int ketama_compare(mcs *a, mcs *b)
{
    return (a->point > b->point) - (a->point < b->point);
}

unsigned int ketama_hashi(char *inString)
{
    const char *s = inString != NULL ? inString : "";
    return (unsigned int)mcr_hash_key(MCR_HASH_MD5, s, strlen(s));
}

void ketama_md5_digest(char *inString, unsigned char md5pword[16])
{
    const char *s = inString != NULL ? inString : "";
    mcr_md5(s, strlen(s), md5pword);
}

char *ketama_error(void)
{
    return k_error;
}
