/* SPDX-License-Identifier: BSD-3-Clause */
/* twem_internal.h: a nutcracker configuration as read (pools, their options and servers), shared by the reader (twem_read.c) and the accessors (twemproxy.c). */
#ifndef MCROUTE_TWEM_INTERNAL_H
#define MCROUTE_TWEM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "placement/placement_internal.h"
#include "mcroute_twemproxy.h"

/* Longest user text quoted in a message. */
#define QUOTE_MAX 64

/* A 1-based position in the file, for messages. */
typedef struct twem_pos {
    size_t line;
    size_t col;
} twem_pos;

typedef struct twem_server {
    char *text;     /* the line as written, for messages */
    char *host;     /* host, or the socket path */
    int port;       /* 0 for a unix socket */
    uint32_t weight;
    char *name;     /* written name (possibly empty), or NULL */
    char *kname;    /* ketama name: the sort key and the label base */
    size_t kname_len;
    twem_pos pos;
} twem_server;

typedef struct twem_pool {
    char *name;
    twem_pos pos;                       /* of the pool's name */
    int64_t opt[MCR_TWEM_OPTION_COUNT]; /* effective values */
    twem_pos opt_pos[MCR_TWEM_OPTION_COUNT];
    bool opt_set[MCR_TWEM_OPTION_COUNT];
    char *text[MCR_TWEM_TEXT_COUNT];    /* owned strings, NULL when unset;
                                           not the two names below */
    const char *hash_name;              /* static: nutcracker's name */
    const char *dist_name;              /* static */
    bool tag_set, auth_set, servers_set;
    twem_pos auth_pos;                  /* of redis_auth, for its message */
    twem_server *servers;               /* nutcracker's order once validated */
    size_t nservers;
    size_t cap;
} twem_pool;

struct mcr_twem {
    char *source; /* path or buffer name, for messages */
    twem_pool *pools;
    size_t npools;
    size_t cap;
};

/* Fill err with "SOURCE:LINE:COL: " and a formatted message; returns code.
 * A zero line leaves the position out. */
int mcr__twem_error(mcr_error *err, const char *src, twem_pos pos, int code, const char *fmt,
                    ...) MCR__PRINTF(5, 6);

/* Frees what a server owns (not s itself). */
void mcr__twem_server_free(twem_server *s);

/* s[0..len) quoted for a message into buf (mcr__quote). */
static inline const char *twem_q(char *buf, size_t cap, const char *s, size_t len)
{
    return mcr__quote(buf, cap, s, len);
}

#endif /* MCROUTE_TWEM_INTERNAL_H */
