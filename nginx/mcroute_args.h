/* SPDX-License-Identifier: BSD-3-Clause */
/* mcroute_args.h: the parameters of the nginx directive `mcroute`, parsed without nginx: the module and the fuzz target (test/fuzz/fuzz_ngx_args.c) share the parser. */
#ifndef MCR_NGX_ARGS_H
#define MCR_NGX_ARGS_H

#include <stddef.h>

/* Where the servers come from. */
typedef enum mcr_ngx_source {
    MCR_NGX_NONE = 0,
    MCR_NGX_SERVERS,  /* servers=LIST */
    MCR_NGX_SNAPSHOT, /* snapshot=PATH */
    MCR_NGX_STATE     /* state=PATH */
} mcr_ngx_source;

/* Bytes of a parameter, not NUL-terminated (p NULL, len 0: not given). */
typedef struct mcr_ngx_str {
    const char *p;
    size_t len;
} mcr_ngx_str;

/* The directive's parameters; each string points into the parameters
 * given to mcr_ngx_parse_args(). */
typedef struct mcr_ngx_args {
    mcr_ngx_source src;
    mcr_ngx_str arg;          /* the list or the path: not empty */
    mcr_ngx_str mode, client; /* servers= only, not both */
    mcr_ngx_str key;          /* key=: the routing key's complex value; not given:
                                 $memcached_key */
} mcr_ngx_args;

/* mcr_ngx_parse_args: `n` parameters (name=value each) into *out. 0, or -1
 * with *out zeroed and a sentence naming the problem in err (`cap` bytes,
 * NUL-terminated; the caller prefixes "mcroute: "): a parameter that is
 * unknown, given twice or empty; no source or more than one; mode= or
 * client= without servers=, or both. Reads nothing but the parameters. */
int mcr_ngx_parse_args(const mcr_ngx_str *params, size_t n, mcr_ngx_args *out, char *err,
                       size_t cap);

#endif
