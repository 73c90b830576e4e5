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

/* A reply stream as the pool reads it: one linear buffer per connection,
 * read(2) straight into its free tail and parsed in place. data[off, len)
 * is what arrived and is not parsed yet; what was parsed is consumed by
 * moving off (mcr__inbuf_drain()). Bytes move only when room is made for a
 * read (mcr__inbuf_room()), never while a parse holds pointers into them:
 * a line's pointers stay valid while its data block is looked at. */
typedef struct mcr__inbuf {
    char *data;
    size_t off, len, cap;
    size_t need;          /* the bytes from off that the item being read is
                             known to take (a line and its data block, when
                             the block is not all there): how far room grows;
                             0: not known */
} mcr__inbuf;

/* The bytes not parsed yet. */
static inline size_t mcr__inbuf_length(const mcr__inbuf *in)
{
    return in->len - in->off;
}

/* The first n bytes consumed (n <= mcr__inbuf_length()); an empty buffer
 * starts again at its front, so the next read needs no move. */
static inline void mcr__inbuf_drain(mcr__inbuf *in, size_t n)
{
    in->off += n;
    in->need = 0;
    if (in->off == in->len)
        in->off = in->len = 0;
}

/* mcr__inbuf_room: free bytes at the tail for one read of at most `step`
 * bytes: *room (0 < *room <= step) from the returned pointer on; the caller
 * adds what it wrote to in->len. The bytes not parsed are moved to the front
 * when the tail has less than `step` free; the buffer grows only when that
 * leaves less than step / 4 (or less than the rest of a block known to be
 * coming, in->need), to fit that block or one step. NULL: out of memory
 * (nothing changed). Pointers into the buffer are invalid afterwards. */
char *mcr__inbuf_room(mcr__inbuf *in, size_t step, size_t *room);
/* mcr__inbuf_trim: a buffer over `keep` bytes of capacity is given back when
 * it holds little (nothing, or at most keep / 4 bytes, which are moved to a
 * smaller one): a large value grows it for a while only. Cannot fail (when
 * the smaller one cannot be had, the large one is kept). */
void mcr__inbuf_trim(mcr__inbuf *in, size_t keep);
/* The buffer's memory given back; *in is empty and usable again. */
void mcr__inbuf_free(mcr__inbuf *in);

/* Framing of a reply stream. The pool decides what a line means for its
 * request; these only find where a line or a data block ends, so that
 * nothing is taken from the stream before it is complete. */

/* mcr__proto_peek_line: the next line of `in`, left in place. 1: *line
 * (pointing into in) and *len (without CRLF); 0: incomplete; -1: no CRLF
 * within MCR__PROTO_MAX_LINE + 2 bytes (not memcached's stream). A bare LF
 * ends no line. */
int mcr__proto_peek_line(const mcr__inbuf *in, const char **line, size_t *len);

/* mcr__proto_peek_value: the next line of `in`, left in place, when it is
 * a plain VALUE line (one space between fields, numbers of at most 19
 * digits) ended by CRLF within the bytes received: 1, *line (pointing into
 * in), *len (without CRLF) and *out, exactly what mcr__proto_peek_line()
 * and mcr__proto_parse_line() give for it, in one pass over the bytes. 0
 * for anything else (another line, a VALUE line not all there yet or less
 * plain; nothing set): those two decide. */
int mcr__proto_peek_value(const mcr__inbuf *in, const char **line, size_t *len, mcr__line *out);

/* mcr__proto_peek_block: the data block of `bytes` bytes that follows the
 * line of `line_len` bytes (without its CRLF) at the start of `in`, left in
 * place. 1: *data (pointing into in; the line's pointers stay valid);
 * 0: incomplete (in->need set to what the line and block take); -1: the
 * block is not ended by CRLF, or is over 2^40 bytes. */
int mcr__proto_peek_block(mcr__inbuf *in, size_t line_len, uint64_t bytes, const char **data);

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
int mcr__proto_skip_run(mcr__proto_skip *s, mcr__inbuf *in);

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

struct evbuffer;

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
