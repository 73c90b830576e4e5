/* SPDX-License-Identifier: BSD-3-Clause */
/* error.c: status names and the version functions. */

#include "base_internal.h"

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
    case MCR_ERR_CORRUPT: return "corrupt snapshot file";
    case MCR_ERR_STALE: return "stale snapshot";
    case MCR_ERR_BUSY: return "busy, try again";
    case MCR_ERR_SYSTEM: return "system error";
    default: return "unknown error";
    }
}
