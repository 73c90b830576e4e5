/* SPDX-License-Identifier: BSD-3-Clause */
/* json.c: how mcroute writes bytes it did not make: JSON strings of --json (any byte string gives a valid document), keys and values escaped for a terminal or a message, and the UTF-8 check of the text that simulate writes into JSON and SVG as it is. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0 when there
 * is none: no overlong form, no surrogate (U+D800 to U+DFFF), nothing above
 * U+10FFFF (RFC 3629). Then *bad is the length of the maximal subpart, the
 * bytes that begin a valid sequence but do not complete it (at least 1),
 * which one U+FFFD replaces (Unicode 15, section 3.9; what Python and the
 * WHATWG decoder do). */
static size_t utf8_sequence(const unsigned char *s, size_t n, size_t *bad)
{
    unsigned char c = s[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf; /* the range of the second byte */

    *bad = 1;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0; /* overlong below U+0800 */
        else if (c == 0xed)
            hi = 0x9f; /* surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90; /* overlong below U+10000 */
        else if (c == 0xf4)
            hi = 0x8f; /* above U+10FFFF */
    } else
        return 0;
    if (n < 2 || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (i >= n || s[i] < 0x80 || s[i] > 0xbf) {
            *bad = i;
            return 0;
        }
    return len;
}

bool cli_json_string(FILE *f, const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *)str;
    bool exact = true;

    putc('"', f);
    for (size_t i = 0; i < len;) {
        unsigned char c = s[i];
        if (c >= 0x80) {
            size_t bad, n = utf8_sequence(s + i, len - i, &bad);
            if (n == 0) {
                fputs("\\ufffd", f);
                exact = false;
                i += bad;
            } else {
                fwrite(s + i, 1, n, f);
                i += n;
            }
            continue;
        }
        switch (c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        case '\b': fputs("\\b", f); break;
        case '\f': fputs("\\f", f); break;
        default:
            if (c < 0x20 || c == 0x7f)
                fprintf(f, "\\u%04x", c);
            else
                putc(c, f);
        }
        i++;
    }
    putc('"', f);
    return exact;
}

void cli_json_key_member(FILE *f, const char *name, const char *key, size_t len)
{
    fprintf(f, "\"%s\": ", name);
    if (cli_json_string(f, key, len))
        return;
    fprintf(f, ", \"%s_hex\": \"", name);
    for (size_t i = 0; i < len; i++)
        fprintf(f, "%02x", (unsigned char)key[i]);
    putc('"', f);
}

bool cli_utf8_valid(const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str), bad;
    for (size_t i = 0; i < n;) {
        size_t len = utf8_sequence(s + i, n - i, &bad);
        if (len == 0)
            return false;
        i += len;
    }
    return true;
}

/* Bytes that reach a terminal or a message as \xHH: the C0 controls and
 * DEL (an ESC would start a terminal sequence, a CR or a newline would
 * forge a line), the C1 controls U+0080 to U+009F (which some terminals
 * obey as ESC sequences), bytes that are not valid UTF-8 (a lone 0x9b is a
 * CSI to an 8-bit terminal), and the backslash itself, so that the escaped
 * text says exactly which bytes there were. The form is the library's in
 * its messages (mcr_error: "port \"1\x1b[31m\""). */
void cli_put_escaped(FILE *f, const char *str, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)str;

    for (size_t i = 0; i < len;) {
        unsigned char c = s[i];
        size_t n = 1, bad = 1;
        if (c >= 0x80)
            n = utf8_sequence(s + i, len - i, &bad);
        bool plain = c >= 0x80 ? n > 0 && !(c == 0xc2 && s[i + 1] < 0xa0)
                               : c >= 0x20 && c != 0x7f && c != '\\';
        if (plain) {
            fwrite(s + i, 1, n, f);
            i += n;
            continue;
        }
        size_t count = n > 0 ? n : bad;
        for (size_t k = 0; k < count; k++) {
            putc('\\', f);
            putc('x', f);
            putc(hex[s[i + k] >> 4], f);
            putc(hex[s[i + k] & 15], f);
        }
        i += count;
    }
}

void cli_put_field(const char *s, size_t len)
{
    static int tty = -1; /* whether standard output is a terminal; asked once */
    if (tty < 0)
        tty = isatty(STDOUT_FILENO);
    if (tty)
        cli_put_escaped(stdout, s, len);
    else
        fwrite(s, 1, len, stdout);
}
