/* SPDX-License-Identifier: BSD-3-Clause */
/* text.c: the internal helpers every library of mcroute uses: error reports, quoting for messages, ASCII case-insensitive comparison, the end of a line-by-line read. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base_internal.h"

/*
 * Compiled into each shared library (libmcroute, libmcroute_pool,
 * libmcroute_twemproxy) as a private copy: symbols are hidden, so one
 * library cannot call another's internals, and these are too small to be
 * worth an exported, versioned internal API. The static libraries hold it
 * once, in libmcroute.a.
 */

int mcr__error(mcr_error *err, int code, const char *fmt, ...)
{
    if (err != NULL) {
        va_list ap;
        err->code = code;
        err->sys_errno = 0;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof(err->message), fmt, ap);
        va_end(ap);
    }
    return code;
}

int mcr__error_sys(mcr_error *err, int e, const char *fmt, ...)
{
    int code = e == ENOMEM ? MCR_ERR_NOMEM : MCR_ERR_SYSTEM;
    if (err != NULL) {
        va_list ap;
        err->code = code;
        err->sys_errno = e;
        va_start(ap, fmt);
        int n = vsnprintf(err->message, sizeof(err->message), fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < sizeof(err->message))
            snprintf(err->message + n, sizeof(err->message) - (size_t)n, ": %s",
                     e != 0 ? strerror(e) : "no errno given");
    }
    return code;
}

int mcr__zeroed(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != 0)
            return 0;
    return 1;
}

const char *mcr__quote(char *out, size_t cap, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;

    if (cap == 0)
        return out;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        size_t need = (c >= 0x20 && c < 0x7f && c != '\\') ? 1 : 4;
        if (o + need + 4 > cap) {          /* keep room for "..." and NUL */
            if (o + 4 <= cap) {
                out[o++] = '.'; out[o++] = '.'; out[o++] = '.';
            }
            break;
        }
        if (need == 1) {
            out[o++] = (char)c;
        } else {
            out[o++] = '\\'; out[o++] = 'x';
            out[o++] = hex[c >> 4]; out[o++] = hex[c & 15];
        }
    }
    out[o] = '\0';
    return out;
}

int mcr__ascii_caseeq(const char *a, const char *b)
{
    for (;; a++, b++) {
        unsigned char x = (unsigned char)*a, y = (unsigned char)*b;
        if (x >= 'A' && x <= 'Z')
            x = (unsigned char)(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z')
            y = (unsigned char)(y - 'A' + 'a');
        if (x != y)
            return 0;
        if (x == '\0')
            return 1;
    }
}

int mcr__read_end(FILE *f, const char *what, const char *path, mcr_error *err)
{
    int e = errno;
    if (feof(f) && !ferror(f))
        return MCR_OK;
    if (!feof(f) && e == ENOMEM)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory reading %s %s", what, path);
    return mcr__error(err, MCR_ERR_IO, "error reading %s %s: %s", what, path,
                      strerror(e != 0 ? e : EIO));
}
