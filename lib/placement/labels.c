/* SPDX-License-Identifier: BSD-3-Clause */
/* labels.c: the labels of a server's continuum points in each mode (how many, their text, their values), as each reference computes them. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/decimal.h"
#include "placement_internal.h"

/* libmemcached: MEMCACHED_POINTS_PER_SERVER (unweighted consistent modes). */
#define LMC_POINTS_PER_SERVER 100
/* libmemcached and twemproxy: points per server at average weight, weighted. */
#define KETAMA_POINTS_PER_SERVER 160
/* Points drawn from one MD5 digest: four little-endian 32-bit words. */
#define POINTS_PER_DIGEST MCR__POINTS_PER_DIGEST
/* stable-ketama: labels per unit of weight (160 points, as a libmemcached
 * server of average weight). */
#define STABLE_LABELS_PER_WEIGHT 40
/* libketama: labels per server at average weight (160 points / 4 per digest). */
#define LIBKETAMA_LABELS_PER_SERVER 40.0
/* memcached's proxy_ring_hash.c, omode "ketama": obuckets (DEFAULT_BUCKET_SIZE
 * 160) / 4 labels per server, k = 0..39, whatever the number of servers. */
#define PROXY_RING_KETAMA_LABELS 40

uint32_t mcr__labels_for(mcr_mode mode, uint32_t weight, uint64_t total_weight, uint32_t n,
                         uint32_t *per_label)
{
    float pct = (float)weight / (float)total_weight;

    switch (mode) {
    case MCR_MODE_KETAMA:
        /* libketama: floorf(pct * 40.0 * (float)numservers); the product is
         * a double, converted to float by floorf's parameter. */
        *per_label = POINTS_PER_DIGEST;
        return (uint32_t)floorf((float)(pct * LIBKETAMA_LABELS_PER_SERVER * (float)n));
    case MCR_MODE_MEMCACHED_PROXY_RING_KETAMA:
        /* no weights: the ring refuses any but 1 (ring_points.c) */
        *per_label = POINTS_PER_DIGEST;
        return weight == 0 ? 0 : PROXY_RING_KETAMA_LABELS;
    case MCR_MODE_WEIGHTED:
    case MCR_MODE_SPY_WEIGHTED: {
        /* libmemcached: floorf((float)(pct * 160 / 4 * live + 1e-10F)) * 4
         * points, all in float arithmetic. */
        float f = pct * (float)KETAMA_POINTS_PER_SERVER / (float)POINTS_PER_DIGEST * (float)n +
                  0.0000000001F;
        *per_label = POINTS_PER_DIGEST;
        return (uint32_t)floorf(f);
    }
    case MCR_MODE_TWEMPROXY_KETAMA: {
        /* nutcracker: floorf((float)(pct * 160 / 4 * live + 0.0000000001)) * 4
         * points: float products, the epsilon added in double. */
        float f = pct * (float)KETAMA_POINTS_PER_SERVER / (float)POINTS_PER_DIGEST * (float)n;
        *per_label = POINTS_PER_DIGEST;
        return (uint32_t)floorf((float)((double)f + 0.0000000001));
    }
    case MCR_MODE_CONSISTENT:
    case MCR_MODE_SPY:
        *per_label = 1;
        return LMC_POINTS_PER_SERVER;
    case MCR_MODE_STABLE_KETAMA: /* its own weight only: nobody else's count moves */
    case MCR_MODE_BOUNDED:
        *per_label = POINTS_PER_DIGEST;
        return STABLE_LABELS_PER_WEIGHT * weight;
    case MCR_MODE_SPYMEMCACHED:
    case MCR_MODE_SPYMEMCACHED_LIBMEMCACHED: {
        /* KetamaNodeLocator: 160 points (40 digests) per server; with a
         * weights map, libmemcached's float formula (see mcr_mode(3)). */
        *per_label = POINTS_PER_DIGEST;
        if (total_weight == n)
            return KETAMA_POINTS_PER_SERVER / POINTS_PER_DIGEST;
        float f = pct * (float)KETAMA_POINTS_PER_SERVER / (float)POINTS_PER_DIGEST * (float)n +
                  0.0000000001F;
        return (uint32_t)floorf(f);
    }
    case MCR_MODE_HASHRING:
        /* hashring: Math.floor(weight / total * 40 * servers), in double */
        *per_label = POINTS_PER_DIGEST;
        return (uint32_t)floor((double)weight / (double)total_weight *
                               LIBKETAMA_LABELS_PER_SERVER * (double)n);
    case MCR_MODE_DALLI:
        /* dalli: ((servers * 160 * weight) / Float(total_weight)).floor */
        *per_label = 1;
        return (uint32_t)floor((double)((uint64_t)n * KETAMA_POINTS_PER_SERVER * weight) /
                               (double)total_weight);
    case MCR_MODE_NGINX_CONSISTENT: /* nginx, pecl memcache: 160 per unit of weight */
    case MCR_MODE_PHP_MEMCACHE:
        *per_label = 1;
        return KETAMA_POINTS_PER_SERVER * weight;
    default:
        *per_label = 0;
        return 0;
    }
}

size_t mcr__label_prefix(mcr_mode mode, const mcr__server *s, char *buf)
{
    if (s->label != NULL && (mode == MCR_MODE_KETAMA || mode == MCR_MODE_TWEMPROXY_KETAMA ||
                             mode == MCR_MODE_STABLE_KETAMA || mode == MCR_MODE_BOUNDED))
        return (size_t)sprintf(buf, "%s-", s->label);
    switch (mode) {
    case MCR_MODE_KETAMA: /* libketama: the address as written, "host:port-" */
    case MCR_MODE_STABLE_KETAMA: /* the default id, "host:port-" */
    case MCR_MODE_BOUNDED:
        if (s->ipv6)
            return (size_t)sprintf(buf, "[%s]:%d-", s->host, s->port);
        return (size_t)sprintf(buf, "%s:%d-", s->host, s->port);
    case MCR_MODE_SPY:
    case MCR_MODE_SPY_WEIGHTED: /* spymemcached's "/host:port-" */
        return (size_t)sprintf(buf, "/%s:%d-", s->host, s->port);
    case MCR_MODE_SPYMEMCACHED:
    case MCR_MODE_SPYMEMCACHED_LIBMEMCACHED:
        return mcr__java_label_prefix(s, mode == MCR_MODE_SPYMEMCACHED_LIBMEMCACHED, buf);
    case MCR_MODE_MEMCACHED_PROXY_RING_KETAMA:
        /* "%s:%s-%d" of the backend's host and port as configured: the
         * host is the proxy's string, an IPv6 address without brackets */
        return (size_t)sprintf(buf, "%s:%d-", s->host, s->port);
    case MCR_MODE_DALLI: /* "host:port:i" */
        if (s->ipv6)
            return (size_t)sprintf(buf, "[%s]:%d:", s->host, s->port);
        return (size_t)sprintf(buf, "%s:%d:", s->host, s->port);
    case MCR_MODE_PHP_MEMCACHE: /* "host:port-i" */
        if (s->ipv6)
            return (size_t)sprintf(buf, "[%s]:%d-", s->host, s->port);
        return (size_t)sprintf(buf, "%s:%d-", s->host, s->port);
    case MCR_MODE_NGINX_CONSISTENT: { /* the CRC base: host, a zero byte, port */
        size_t n = s->ipv6 ? (size_t)sprintf(buf, "[%s]", s->host)
                           : (size_t)sprintf(buf, "%s", s->host);
        buf[n++] = '\0';
        return n + (size_t)sprintf(buf + n, "%d", s->port);
    }
    default: /* libmemcached drops the default port */
        if (s->port == MCR_DEFAULT_PORT)
            return (size_t)sprintf(buf, "%s-", s->host);
        return (size_t)sprintf(buf, "%s:%d-", s->host, s->port);
    }
}

size_t mcr__put_uint(char *p, uint32_t v)
{
    return (size_t)(mcr__put_u64(p, v) - p);
}

/* nginx: point j is the CRC-32 of the base (host, "\0", port) followed by
 * point j-1 as 4 little-endian bytes (0 before the first). */
static void nginx_chain(const char *base, size_t blen, uint32_t from, uint32_t to,
                        uint32_t *out)
{
    uint32_t state = mcr__crc32_update(0xffffffffu, base, blen), prev = 0;
    for (uint32_t j = 0; j < to; j++) {
        unsigned char b[4] = {(unsigned char)prev, (unsigned char)(prev >> 8),
                              (unsigned char)(prev >> 16), (unsigned char)(prev >> 24)};
        prev = ~mcr__crc32_update(state, b, 4);
        if (j >= from)
            *out++ = prev;
    }
}

void mcr__label_values(mcr_mode mode, char *prefix, size_t plen, uint32_t per_label,
                       mcr_hash point_hash, uint32_t from, uint32_t to, uint32_t *out)
{
    if (mode == MCR_MODE_NGINX_CONSISTENT) {
        nginx_chain(prefix, plen, from, to, out);
        return;
    }
    for (uint32_t j = from; j < to; j++) {
        size_t len = plen + mcr__put_uint(prefix + plen, j);
        if (per_label == POINTS_PER_DIGEST) {
            mcr__md5_words(prefix, len, out);
            out += POINTS_PER_DIGEST;
        } else if (mode == MCR_MODE_DALLI) {
            *out++ = mcr__sha1_u32be(prefix, len);
        } else {
            *out++ = mcr__hash_key(point_hash, prefix, len);
        }
    }
}
