/* SPDX-License-Identifier: BSD-3-Clause */
/* snaptext.c: the canonical text of a snapshot (what a snapshot file holds) and its checksum. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/decimal.h"
#include "snapshot.h"

/*
 * The text (see mcroute_snapshot.h for an example):
 *
 *   header  "mcroute-snapshot F", "algorithm A", "epoch E", "mode M",
 *           "hash H", "point-hash P", "hash-tag off|value=T",
 *           "key-prefix off|value=K", ["table T",] "servers N"
 *   N lines "server id= host= port= weight= zone= state= named= points=
 *           digest=[ map=]", in snapshot order
 *   last    "checksum C"
 *
 * Format 1 is that of the modes up to "stable-ketama", unchanged so that
 * their files and checksums stay what they were. Format 2 is that of the
 * native table modes ("jump" and after): a "table" line (the maglev table
 * size or the slot count, else 0) and a "map" field (the buckets or slots
 * a server owns, as ascending maximal ranges "a-b" or "a" joined by ',';
 * empty in the modes without a map). The reader takes both.
 *
 * C = MD5(header || MD5(server line 1) || ... || MD5(server line N)), each
 * line with its '\n'. Hashing each server line apart lets a new snapshot
 * reuse the digests of the servers a change did not touch, so publishing
 * costs 16 bytes of MD5 input per server instead of a whole text.
 *
 * The checksum is verified on the text before anything is parsed or built,
 * but it only tells corruption apart: whoever writes a file can compute
 * it. So every size a file declares is bounded by what the file itself
 * justifies, before anything of that size is allocated: a jump map is at
 * most MCR_STABLE_WEIGHT_MAX buckets a server line, a slot map at most
 * MCR_SLOTS_MAX, and a maglev table (which is not in the file: it is
 * rebuilt, at O(M log M)) at most max(MCR_MAGLEV_SIZE_FREE,
 * MCR_MAGLEV_SIZE_PER_N2 x N^2) for N server lines, the rule every build
 * of a table follows (mcr__maglev_check_limit).
 */

#define FORMAT_VERSION MCR__SNAP_FORMAT
#define FORMAT_VERSION_TABLES MCR__SNAP_FORMAT_TABLES
#define MAGIC MCR__SNAP_MAGIC
/* A server line: three fields of up to 255 bytes, each byte possibly
 * written as %XX, and the fixed parts; plus, in format 2, its map. */
#define LINE_BUF (3 * 3 * MCR_HOSTNAME_MAX + 256)
/* Bytes of one range of a map: "16777215-16777215,". */
#define RANGE_BUF 18
/* The header: the key prefix (255 bytes as %XX) and fixed parts. */
#define HEADER_BUF (3 * 256 + 512)

static const char hexdigits[] = "0123456789abcdef";

/* Percent-encode n bytes of s at p (bytes outside 0x21..0x7e, and '%'). */
static char *put_pct(char *p, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c >= 0x7f || c == '%') {
            *p++ = '%';
            *p++ = hexdigits[c >> 4];
            *p++ = hexdigits[c & 15];
        } else {
            *p++ = (char)c;
        }
    }
    return p;
}

static char *put_str(char *p, const char *s)
{
    size_t n = strlen(s);
    memcpy(p, s, n);
    return p + n;
}


static char *put_hex64(char *p, uint64_t v)
{
    for (int sh = 60; sh >= 0; sh -= 4)
        *p++ = hexdigits[(v >> sh) & 15];
    return p;
}

int mcr__snapshot_format(mcr_mode m)
{
    return m >= MCR_MODE_JUMP ? FORMAT_VERSION_TABLES : FORMAT_VERSION;
}

/* The header lines of s into buf (HEADER_BUF bytes); returns the length. */
static size_t header_text(const mcr_snapshot *s, char *buf)
{
    const mcr__params *p = &s->params;
    int format = mcr__snapshot_format(p->mode);
    char *o = buf;

    o = put_str(o, MAGIC " ");
    o = mcr__put_u64(o, (uint64_t)format);
    o = put_str(o, "\nalgorithm ");
    o = mcr__put_u64(o, MCR_SNAPSHOT_ALGORITHM);
    o = put_str(o, "\nepoch ");
    o = mcr__put_u64(o, s->epoch);
    o = put_str(o, "\nmode ");
    o = put_str(o, mcr_mode_name(p->mode));
    o = put_str(o, "\nhash ");
    o = put_str(o, mcr_hash_name(p->key_hash));
    o = put_str(o, "\npoint-hash ");
    o = put_str(o, mcr_hash_name(p->point_hash));
    o = put_str(o, "\nhash-tag ");
    if (p->tag_on) {
        o = put_str(o, "value=");
        o = put_pct(o, p->tag, 2);
    } else {
        o = put_str(o, "off");
    }
    o = put_str(o, "\nkey-prefix ");
    if (p->prefix_on) {
        o = put_str(o, "value=");
        o = put_pct(o, (const char *)p->prefix, p->prefix_len);
    } else {
        o = put_str(o, "off");
    }
    if (format == FORMAT_VERSION_TABLES) {
        o = put_str(o, "\ntable ");
        o = mcr__put_u64(o, p->table_size);
    }
    o = put_str(o, "\nservers ");
    o = mcr__put_u64(o, s->nservers);
    *o++ = '\n';
    return (size_t)(o - buf);
}

/* The room the line of server e of s needs. */
static size_t line_cap(const mcr_snapshot *s, const mcr__entry *e)
{
    return LINE_BUF + (s->map != NULL ? (size_t)e->owned * RANGE_BUF : 0);
}

/* The line of server e of s into buf (line_cap() bytes); returns its
 * length. */
static size_t server_line(const mcr_snapshot *s, const mcr__entry *e, char *buf)
{
    char *o = buf;
    uint64_t points = mcr__mode_has_points(s->params.mode)
                          ? (uint64_t)e->labels * s->per_label
                          : e->owned;

    o = put_str(o, "server id=");
    o = put_pct(o, e->id, strlen(e->id));
    o = put_str(o, " host=");
    o = put_pct(o, e->host, e->host_len);
    o = put_str(o, " port=");
    o = mcr__put_u64(o, (uint64_t)e->port);
    o = put_str(o, " weight=");
    o = mcr__put_u64(o, e->weight);
    o = put_str(o, " zone=");
    if (e->zone != NULL)
        o = put_pct(o, e->zone, strlen(e->zone));
    o = put_str(o, " state=");
    o = put_str(o, mcr__state_name(e->state));
    o = put_str(o, e->named ? " named=1 points=" : " named=0 points=");
    o = mcr__put_u64(o, points);
    o = put_str(o, " digest=");
    o = put_hex64(o, e->pdigest);
    if (mcr__snapshot_format(s->params.mode) == FORMAT_VERSION_TABLES) {
        o = put_str(o, " map=");
        if (s->map != NULL) {
            size_t i = (size_t)(e - s->servers);
            const uint32_t *v = s->owned_list + s->owned_start[i];
            for (uint32_t k = 0; k < e->owned;) {
                uint32_t j = k;
                while (j + 1 < e->owned && v[j + 1] == v[j] + 1)
                    j++;
                if (k > 0)
                    *o++ = ',';
                o = mcr__put_u64(o, v[k]);
                if (j > k) {
                    *o++ = '-';
                    o = mcr__put_u64(o, v[j]);
                }
                k = j + 1;
            }
        }
    }
    *o++ = '\n';
    return (size_t)(o - buf);
}

void mcr__checksum_hex(const unsigned char d[16], char out[MCR_SNAPSHOT_CHECKSUM_LEN + 1])
{
    for (int i = 0; i < 16; i++) {
        out[2 * i] = hexdigits[d[i] >> 4];
        out[2 * i + 1] = hexdigits[d[i] & 15];
    }
    out[MCR_SNAPSHOT_CHECKSUM_LEN] = '\0';
}

int mcr__snapshot_digest(mcr_snapshot *s, const mcr_snapshot *old, const long *from,
                         mcr_error *err)
{
    char header[HEADER_BUF], small[LINE_BUF], *line = small;
    size_t hlen = header_text(s, header), cap = LINE_BUF;
    unsigned char *buf = malloc(hlen + s->nservers * 16);

    if (buf == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory for the checksum");
    unsigned char *digests = buf + hlen;
    for (size_t i = 0; i < s->nservers; i++) {
        mcr__entry *e = &s->servers[i];
        const mcr__entry *o = old != NULL && from[i] >= 0 ? &old->servers[from[i]] : NULL;
        /* Same server (same id, address, zone), same variable fields: same
         * line. The entry was copied from o, digest included. */
        if (o == NULL || o->weight != e->weight || o->state != e->state ||
            o->labels != e->labels || o->owned != e->owned || o->pdigest != e->pdigest) {
            if (line_cap(s, e) > cap) {
                char *big = malloc(line_cap(s, e));
                if (big == NULL) {
                    if (line != small)
                        free(line);
                    free(buf);
                    return mcr__error(err, MCR_ERR_NOMEM, "out of memory for the checksum");
                }
                if (line != small)
                    free(line);
                line = big;
                cap = line_cap(s, e);
            }
            mcr_md5(line, server_line(s, e, line), e->ldigest);
        }
        memcpy(digests + 16 * i, e->ldigest, 16);
    }
    if (line != small)
        free(line);
    memcpy(buf, header, hlen);
    unsigned char d[16];
    mcr_md5(buf, hlen + s->nservers * 16, d);
    mcr__checksum_hex(d, s->checksum);
    free(buf);
    return MCR_OK;
}

int mcr__snapshot_text(const mcr_snapshot *s, char **out, size_t *len, mcr_error *err)
{
    size_t cap = HEADER_BUF + 64, n;
    for (size_t i = 0; i < s->nservers; i++) {
        const mcr__entry *e = &s->servers[i];
        cap += 3 * (strlen(e->id) + e->host_len + (e->zone ? strlen(e->zone) : 0)) + 170 +
               (s->map != NULL ? (size_t)e->owned * RANGE_BUF : 0);
    }
    char *t = malloc(cap);
    if (t == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory writing a snapshot");
    n = header_text(s, t);
    for (size_t i = 0; i < s->nservers; i++)
        n += server_line(s, &s->servers[i], t + n);
    n += (size_t)sprintf(t + n, "checksum %s\n", s->checksum);
    *out = t;
    *len = n;
    return MCR_OK;
}

/* ------------------------------------------------------------ states */

static const char *const state_names[] = {"active", "draining", "down"};

bool mcr__state_valid(mcr_server_state st)
{
    return st == MCR_STATE_ACTIVE || st == MCR_STATE_DRAINING || st == MCR_STATE_DOWN;
}

const char *mcr__state_name(mcr_server_state st)
{
    return mcr__state_valid(st) ? state_names[st] : NULL;
}
