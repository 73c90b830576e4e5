/* SPDX-License-Identifier: BSD-3-Clause */
/* decimal.h: an unsigned number written in decimal, without printf (labels, snapshot text, request lines); never installed. */
#ifndef MCR_DECIMAL_H
#define MCR_DECIMAL_H

#include <stdint.h>

/* Write v in decimal from p on (1 to 20 bytes, no NUL): the end. */
static inline char *mcr__put_u64(char *p, uint64_t v)
{
    char tmp[20];
    unsigned n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    while (n > 0)
        *p++ = tmp[--n];
    return p;
}

#endif /* MCR_DECIMAL_H */
