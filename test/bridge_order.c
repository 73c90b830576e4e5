/* SPDX-License-Identifier: BSD-3-Clause */
/* bridge_order.c: a program linked with libmemcached before libmcroute_libmemcached, run by test_bridge: mcr_memcached_attach() must refuse it (MCR_ERR_UNSUPPORTED, saying why), since the bridge would not see its calls. Exit 0 when refused so, 1 otherwise. */
#include <stdio.h>
#include <string.h>

#include "mcroute_memcached_attach.h"

int main(void)
{
    mcr_router *r = NULL;
    mcr_error err = {0};
    memcached_st *m = memcached_create(NULL);
    if (m == NULL || mcr_router_new(NULL, &r, &err) != MCR_OK)
        return 1;
    int rc = mcr_memcached_attach(m, r, 0, &err);
    printf("%d %s\n", rc, err.message);
    memcached_free(m);
    mcr_router_free(r);
    return rc == MCR_ERR_UNSUPPORTED && strstr(err.message, "search order") != NULL ? 0 : 1;
}
