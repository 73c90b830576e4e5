/* SPDX-License-Identifier: BSD-3-Clause */
/* metadump.c: one line of memcached's `lru_crawler metadump` parsed, its key URL-decoded, strictly (a leaf: libc only). */
#include <stdio.h>
#include <string.h>

#include "migrate/migrate_internal.h"

/*
 * The format is memcached's (1.6, crawler.c): one item a line,
 *   key=%s exp=%ld la=%llu cas=%llu fetch=%s cls=%u size=%lu
 * the key URL-encoded (every byte outside A-Z a-z 0-9 - . _ ~ as %XX),
 * exp -1 for "never" and otherwise, like la, a Unix time. Nothing here
 * guesses: a field missing, out of order, doubled, a number with a sign,
 * leading zeros or too many digits, a bad escape, all fail with a reason.
 */

static int why_is(char *why, size_t cap, const char *fmt, const char *a)
{
    if (why != NULL && cap > 0)
        snprintf(why, cap, fmt, a);
    return -1;
}

/* Plain decimal, no sign, no leading zero (but "0"), at most `max`. */
static int parse_u64(const char *s, size_t n, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0 || (n > 1 && s[0] == '0'))
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (max - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* URL-decode n bytes of s into out (MCR_KEY_MAX bytes at most). */
static int decode_key(const char *s, size_t n, mcr__md_item *out, char *why, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '%') {
            int hi = i + 2 < n ? hexval(s[i + 1]) : -1;
            int lo = i + 2 < n ? hexval(s[i + 2]) : -1;
            if (hi < 0 || lo < 0)
                return why_is(why, cap, "%s", "a '%' in the key not followed by two hex digits");
            c = (unsigned char)(hi << 4 | lo);
            i += 2;
        } else if (c <= 0x20 || c == 0x7f) {
            return why_is(why, cap, "%s", "a space or control byte in the encoded key");
        }
        if (k == MCR_KEY_MAX)
            return why_is(why, cap, "%s", "the key is longer than 250 bytes once decoded");
        out->key[k++] = (char)c;
    }
    if (k == 0)
        return why_is(why, cap, "%s", "the key is empty");
    out->key[k] = '\0';
    out->key_len = k;
    return 0;
}

int mcr__md_parse(const char *line, size_t len, mcr__md_item *out, char *why, size_t cap)
{
    static const char *const names[] = {"key", "exp", "la", "cas", "fetch", "cls", "size"};
    enum { NFIELDS = sizeof(names) / sizeof(names[0]) };
    mcr__md_item it;
    size_t pos = 0;
    int field = 0;

    memset(&it, 0, sizeof(it));
    if (len == 0)
        return why_is(why, cap, "%s", "an empty line");
    if (len > MCR__MD_LINE_MAX)
        return why_is(why, cap, "%s", "the line is too long");
    while (pos <= len) {
        const char *tok = line + pos;
        const char *sp = memchr(tok, ' ', len - pos);
        size_t tlen = sp ? (size_t)(sp - tok) : len - pos;
        const char *eq = memchr(tok, '=', tlen);
        if (tlen == 0)
            return why_is(why, cap, "%s", "two spaces in a row, or a space at an end");
        if (eq == NULL || eq == tok)
            return why_is(why, cap, "%s", "a field that is not NAME=VALUE");
        size_t nlen = (size_t)(eq - tok);
        const char *v = eq + 1;
        size_t vlen = tlen - nlen - 1;
        if (field < NFIELDS) {
            const char *want = names[field];
            if (nlen != strlen(want) || memcmp(tok, want, nlen) != 0)
                return why_is(why, cap, "expected the field %s= here", want);
            uint64_t u = 0;
            switch (field) {
            case 0:
                if (decode_key(v, vlen, &it, why, cap) != 0)
                    return -1;
                break;
            case 1:
                if (vlen == 2 && v[0] == '-' && v[1] == '1') {
                    it.exp = -1;
                } else if (parse_u64(v, vlen, INT64_MAX, &u) == 0 && u > 0) {
                    it.exp = (int64_t)u;
                } else {
                    return why_is(why, cap, "%s", "exp is neither -1 nor a Unix time");
                }
                break;
            case 2:
                if (parse_u64(v, vlen, UINT64_MAX, &it.la) != 0)
                    return why_is(why, cap, "%s", "la is not a decimal number");
                break;
            case 3:
                if (parse_u64(v, vlen, UINT64_MAX, &it.cas) != 0)
                    return why_is(why, cap, "%s", "cas is not a decimal number");
                break;
            case 4:
                if (vlen == 3 && memcmp(v, "yes", 3) == 0)
                    it.fetched = 1;
                else if (!(vlen == 2 && memcmp(v, "no", 2) == 0))
                    return why_is(why, cap, "%s", "fetch is neither yes nor no");
                break;
            case 5:
                if (parse_u64(v, vlen, UINT32_MAX, &u) != 0)
                    return why_is(why, cap, "%s", "cls is not a decimal number");
                it.cls = (uint32_t)u;
                break;
            default:
                if (parse_u64(v, vlen, UINT64_MAX, &it.size) != 0)
                    return why_is(why, cap, "%s", "size is not a decimal number");
                break;
            }
        } else {
            /* A later field: only checked to be NAME=VALUE, and not one
             * of the seven again. */
            for (int i = 0; i < NFIELDS; i++)
                if (nlen == strlen(names[i]) && memcmp(tok, names[i], nlen) == 0)
                    return why_is(why, cap, "the field %s= given twice", names[i]);
        }
        field++;
        if (sp == NULL)
            break;
        pos += tlen + 1;
    }
    if (field < NFIELDS)
        return why_is(why, cap, "the field %s= is missing", names[field]);
    *out = it;
    return 0;
}
