/* SPDX-License-Identifier: BSD-3-Clause */
/* proto.h: the memcached text and meta protocols: request lines written, reply lines read (internal). */
#ifndef MCR_PROTO_H
#define MCR_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "mcroute_pool.h"

/* The longest reply line accepted (without CRLF). memcached's own lines are
 * far shorter: a VALUE line is at most ~300 bytes, a STAT line ~300, an
 * error a few hundred; more means the stream is not memcached's. */
#define MCR__PROTO_MAX_LINE 2048

/* What one reply line is. */
typedef enum mcr__line_kind {
    MCR__L_BAD = 0,       /* not a line memcached sends */
    MCR__L_VALUE,         /* VALUE key flags bytes [cas] */
    MCR__L_END,
    MCR__L_STORED,
    MCR__L_NOT_STORED,
    MCR__L_EXISTS,
    MCR__L_NOT_FOUND,
    MCR__L_DELETED,
    MCR__L_TOUCHED,
    MCR__L_OK,
    MCR__L_NUMBER,        /* incr/decr result */
    MCR__L_VERSION,       /* VERSION text */
    MCR__L_STAT,          /* STAT name value */
    MCR__L_ERROR,         /* ERROR */
    MCR__L_CLIENT_ERROR,  /* CLIENT_ERROR text */
    MCR__L_SERVER_ERROR,  /* SERVER_ERROR text */
    /* meta */
    MCR__L_VA,            /* VA bytes flags* */
    MCR__L_EN,
    MCR__L_HD,
    MCR__L_NS,
    MCR__L_EX,
    MCR__L_NF,
    MCR__L_MN
} mcr__line_kind;

typedef struct mcr__line {
    mcr__line_kind kind;
    const char *key;      /* VALUE's key, meta's k flag */
    size_t key_len;
    const char *opaque;   /* meta's O flag, NULL when absent */
    size_t opaque_len;
    const char *text;     /* error text, version, "name value" of a STAT */
    size_t text_len;
    uint64_t bytes;       /* VALUE, VA: length of the data block */
    uint64_t number;      /* NUMBER */
    uint64_t cas;         /* VALUE's 5th field, meta's c flag */
    uint32_t flags;       /* VALUE's flags, meta's f flag */
    int64_t ttl;          /* meta's t flag: remaining seconds, -1 never */
    int has_cas, has_flags, has_ttl;
} mcr__line;

/* mcr__proto_parse_line: classify `line` (`len` bytes, without CRLF) into
 * *out. Numbers must be plain decimal within their type (flags 32 bits,
 * bytes up to 2^40); anything malformed is MCR__L_BAD. Cannot fail
 * otherwise. Pointers in *out point into `line`. */
void mcr__proto_parse_line(const char *line, size_t len, mcr__line *out);

struct evbuffer;

/* Framing of a reply stream. The pool decides what a line means for its
 * request; these only find where a line or a data block ends, so that
 * nothing is taken from the stream before it is complete. */

/* mcr__proto_peek_line: the next line of `in`, left in place. 1: *line
 * (contiguous) and *len (without CRLF); 0: incomplete; -1: no CRLF within
 * MCR__PROTO_MAX_LINE bytes (not memcached's stream). */
int mcr__proto_peek_line(struct evbuffer *in, const char **line, size_t *len);
/* The same, and *avail: the bytes that lie contiguous from *line on (at
 * least *len + 2), for mcr__proto_block_at(). */
int mcr__proto_peek_line_avail(struct evbuffer *in, const char **line, size_t *len,
                               size_t *avail);

/* mcr__proto_peek_block: the data block of `bytes` bytes that follows a
 * line of `line_len` bytes (without its CRLF) at the start of `in`, left
 * in place. 1: *data (contiguous); 0: incomplete; -1: the block is not
 * ended by CRLF, or memory ran out. */
int mcr__proto_peek_block(struct evbuffer *in, size_t line_len, uint64_t bytes, const char **data);
/* mcr__proto_block_at: the same for a block that may lie in the `avail`
 * contiguous bytes from `line` on (as mcr__proto_peek_line_avail() gave
 * them): 1 and *data; -1: not ended by CRLF; 0: not all there, ask
 * mcr__proto_peek_block(). */
int mcr__proto_block_at(const char *line, size_t avail, size_t line_len, uint64_t bytes,
                        const char **data);

/* A data block being discarded as it arrives: a value over the client's
 * limit, read so that the stream stays in step without holding it. */
typedef struct mcr__proto_skip {
    uint64_t left;        /* bytes still to drop, the final CRLF included; 0: none */
} mcr__proto_skip;

/* mcr__proto_skip_start: discard a block of `bytes` data bytes (and its CRLF). */
void mcr__proto_skip_start(mcr__proto_skip *s, uint64_t bytes);

/* mcr__proto_skip_run: drop what `in` holds of the block. 1: all of it was
 * dropped, its CRLF checked; 0: more to come (`in` is empty); -1: the
 * block is not ended by CRLF. */
int mcr__proto_skip_run(mcr__proto_skip *s, struct evbuffer *in);

/* A request line to write. */
typedef struct mcr__wire {
    mcr_op op;
    mcr_protocol proto;
    const char *prefix;   /* key prefix, prefix_len bytes */
    size_t prefix_len;
    const char *const *keys; /* nkeys keys (get family may have many) */
    const size_t *key_lens;
    size_t nkeys;
    const void *value;
    size_t value_len;
    uint32_t flags;
    int64_t exptime;
    uint64_t cas;
    uint64_t delta;
    uint32_t opaque;      /* meta: the first key's token; key i gets opaque + i */
} mcr__wire;

/* mcr__proto_write: append the request to `out`, formatted in place in
 * one reservation of its buffer. Keys and values were checked by the
 * caller. MCR_OK; MCR_ERR_NOMEM or MCR_ERR_INVALID (an op out of range)
 * with nothing appended. */
int mcr__proto_write(struct evbuffer *out, const mcr__wire *w);

/* mcr__proto_bound: at least the bytes the request of w takes.
 * mcr__proto_format: write it from d on (mcr__proto_bound(w) bytes of room):
 * the end of what was written, or NULL for an op out of range (nothing
 * written that counts). mcr__proto_write is these two on an evbuffer. */
size_t mcr__proto_bound(const mcr__wire *w);
char *mcr__proto_format(char *d, const mcr__wire *w);

/* mcr__proto_key_ok: 1 when `key` (len bytes) is 1..max bytes with no
 * space or control byte, else 0. */
int mcr__proto_key_ok(const void *key, size_t len, size_t max);

/* mcr__proto_opaque: parse a meta opaque token written by mcr__proto_write
 * (decimal). 1 and *out on success, 0 when it is not one of ours. */
int mcr__proto_opaque(const char *tok, size_t len, uint32_t *out);

#endif
