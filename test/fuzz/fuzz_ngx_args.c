/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_ngx_args.c: fuzz target of the nginx directive's parameters (nginx/mcroute_args.c): the input's words as the directive's parameters; a refusal says why, an acceptance holds one source and strings inside the input. */
#include <string.h>

#include "fuzz.h"
#include "mcroute_args.h"

#define MAX_PARAMS 64

/* s lies inside [base, base + size). */
static int inside(const mcr_ngx_str *s, const char *base, size_t size)
{
    if (s->p == NULL)
        return s->len == 0;
    return s->p >= base && (size_t)(s->p - base) <= size && s->len <= size - (size_t)(s->p - base);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    mcr_ngx_str params[MAX_PARAMS];
    size_t n = 0, i = 0;
    /* words split at spaces, tabs and newlines, as nginx splits a directive */
    while (i < size && n < MAX_PARAMS) {
        while (i < size && (in[i] == ' ' || in[i] == '\t' || in[i] == '\n'))
            i++;
        size_t start = i;
        while (i < size && in[i] != ' ' && in[i] != '\t' && in[i] != '\n')
            i++;
        if (i > start) {
            params[n].p = in + start;
            params[n].len = i - start;
            n++;
        }
    }
    mcr_ngx_args a;
    char err[256];
    memset(err, 'x', sizeof(err));
    int rc = mcr_ngx_parse_args(params, n, &a, err, sizeof(err));
    FUZZ_CHECK(rc == 0 || rc == -1, "rc %d", rc);
    if (rc != 0) {
        FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL && err[0] != '\0',
                   "a refusal without a reason");
        FUZZ_CHECK(a.src == MCR_NGX_NONE && a.arg.p == NULL && a.key.p == NULL,
                   "a refusal left a result");
        return 0;
    }
    FUZZ_CHECK(a.src == MCR_NGX_SERVERS || a.src == MCR_NGX_SNAPSHOT || a.src == MCR_NGX_STATE,
               "source %d", (int)a.src);
    FUZZ_CHECK(a.arg.p != NULL && a.arg.len > 0, "an empty source");
    FUZZ_CHECK(inside(&a.arg, in, size) && inside(&a.mode, in, size) &&
                   inside(&a.client, in, size) && inside(&a.key, in, size),
               "a string outside the input");
    FUZZ_CHECK(!(a.mode.p != NULL && a.client.p != NULL), "mode and client both");
    FUZZ_CHECK(a.src == MCR_NGX_SERVERS || (a.mode.p == NULL && a.client.p == NULL),
               "mode or client without servers=");
    /* the words were all accepted: each is a known name=value */
    size_t sources = 0;
    for (size_t k = 0; k < n; k++)
        sources += (params[k].len > 9 && memcmp(params[k].p, "snapshot=", 9) == 0) ||
                   (params[k].len > 6 && memcmp(params[k].p, "state=", 6) == 0) ||
                   (params[k].len > 8 && memcmp(params[k].p, "servers=", 8) == 0);
    FUZZ_CHECK(sources == 1, "%zu sources accepted", sources);
    return 0;
}
