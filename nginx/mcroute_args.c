/* SPDX-License-Identifier: BSD-3-Clause */
/* mcroute_args.c: the parameters of the nginx directive `mcroute` (snapshot=, state=, servers=, mode=, client=, key=) checked and split, with the reason for a refusal. */
#include <stdio.h>
#include <string.h>

#include "mcroute_args.h"

/* The parameters, by name (with its '='). */
static const struct {
    const char *name;
    mcr_ngx_source src; /* a source, or MCR_NGX_NONE */
} params_known[] = {
    {"snapshot=", MCR_NGX_SNAPSHOT}, {"state=", MCR_NGX_STATE}, {"servers=", MCR_NGX_SERVERS},
    {"mode=", MCR_NGX_NONE},         {"client=", MCR_NGX_NONE}, {"key=", MCR_NGX_NONE},
};

static int refuse(mcr_ngx_args *out, char *err, size_t cap, const char *fmt, int len,
                  const char *p)
{
    memset(out, 0, sizeof(*out));
    snprintf(err, cap, fmt, len, p);
    return -1;
}

/* The field of out that parameter k fills. */
static mcr_ngx_str *field(mcr_ngx_args *out, size_t k)
{
    switch (k) {
    case 3: return &out->mode;
    case 4: return &out->client;
    case 5: return &out->key;
    default: return &out->arg;
    }
}

int mcr_ngx_parse_args(const mcr_ngx_str *params, size_t n, mcr_ngx_args *out, char *err,
                       size_t cap)
{
    memset(out, 0, sizeof(*out));
    const size_t nknown = sizeof(params_known) / sizeof(params_known[0]);
    for (size_t i = 0; i < n; i++) {
        const mcr_ngx_str *v = &params[i];
        int shown = v->len > 200 ? 200 : (int)v->len; /* a message stays short */
        size_t k = 0, nl = 0;
        for (; k < nknown; k++) {
            nl = strlen(params_known[k].name);
            if (v->len >= nl && memcmp(v->p, params_known[k].name, nl) == 0)
                break;
        }
        if (k == nknown)
            return refuse(out, err, cap,
                          "unknown parameter \"%.*s\" (snapshot=PATH, state=PATH, "
                          "servers=LIST, mode=MODE, client=NAME, key=$VARIABLE)",
                          shown, v->p);
        if (v->len == nl)
            return refuse(out, err, cap, "\"%.*s\" is empty", shown, v->p);
        mcr_ngx_str *f = field(out, k);
        if (params_known[k].src != MCR_NGX_NONE && out->src != MCR_NGX_NONE)
            return refuse(out, err, cap,
                          "give only one of snapshot=, state= and servers= (\"%.*s\" is a "
                          "second)",
                          shown, v->p);
        if (params_known[k].src == MCR_NGX_NONE && f->p != NULL)
            return refuse(out, err, cap, "\"%.*s\" is given twice", (int)(nl - 1),
                          params_known[k].name);
        if (params_known[k].src != MCR_NGX_NONE)
            out->src = params_known[k].src;
        f->p = v->p + nl;
        f->len = v->len - nl;
    }
    mcr_ngx_args got = *out;
    if (got.src == MCR_NGX_NONE)
        return refuse(out, err, cap,
                      "no servers: give snapshot=PATH, state=PATH or servers=LIST%.*s", 0, "");
    if ((got.mode.p != NULL || got.client.p != NULL) && got.src != MCR_NGX_SERVERS)
        return refuse(out, err, cap,
                      "mode= and client= apply to servers= only: a snapshot and a state "
                      "carry their placement%.*s",
                      0, "");
    if (got.mode.p != NULL && got.client.p != NULL)
        return refuse(out, err, cap, "client= sets the mode: give mode= or client=, not both%.*s",
                      0, "");
    return 0;
}
