/* SPDX-License-Identifier: BSD-3-Clause */
/* error.c: status names, error reports, the version functions and small text helpers. */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

unsigned mcr_version(void)
{
    return MCR_VERSION_HEX;
}

const char *mcr_version_string(void)
{
    return MCR_VERSION_STRING;
}

const char *mcr_strerror(int status)
{
    switch (status) {
    case MCR_OK: return "success";
    case MCR_ERR_INVALID: return "invalid argument";
    case MCR_ERR_NOMEM: return "out of memory";
    case MCR_ERR_SYNTAX: return "syntax error";
    case MCR_ERR_RANGE: return "value out of range";
    case MCR_ERR_DUPLICATE: return "duplicate server";
    case MCR_ERR_UNKNOWN: return "unknown name";
    case MCR_ERR_EMPTY: return "no servers";
    case MCR_ERR_IO: return "input/output error";
    case MCR_ERR_TOO_LONG: return "too long";
    case MCR_ERR_UNSUPPORTED: return "not supported";
    case MCR_ERR_KEY: return "invalid key";
    case MCR_ERR_TOO_BIG: return "value too big";
    case MCR_ERR_TIMEOUT: return "timed out";
    case MCR_ERR_CONNECT: return "connection failed";
    case MCR_ERR_DOWN: return "server down";
    case MCR_ERR_PROTOCOL: return "protocol error";
    case MCR_ERR_SERVER: return "server error";
    case MCR_ERR_CANCELLED: return "cancelled";
    default: return "unknown error";
    }
}

int mcr__error(mcr_error *err, int code, const char *fmt, ...)
{
    if (err != NULL) {
        va_list ap;
        err->code = code;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof(err->message), fmt, ap);
        va_end(ap);
    }
    return code;
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
