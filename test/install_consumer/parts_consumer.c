/* SPDX-License-Identifier: BSD-3-Clause */
/* parts_consumer.c: a program built against the installed libmcroute_pool and libmcroute_twemproxy (test_install.sh): the pool refuses a NULL event_base, then the server of each key in a nutcracker YAML file. */
#include <stdio.h>
#include <string.h>

#include <mcroute.h>
#include <mcroute_pool.h>
#include <mcroute_twemproxy.h>

/* Usage: parts_consumer YAML KEY...
 * Prints "pool: CODE-NAME" (mcr_pool_new() with no event_base must refuse:
 * the call proves libmcroute_pool is linked without the program linking
 * libevent), then "KEY<TAB>HOST:PORT" for every key in the first pool of
 * YAML, as `mcroute locate -t YAML KEY...` does. Exits 1 on any error. */
int main(int argc, char **argv)
{
    mcr_pool_options o;
    mcr_pool *pool = NULL;
    mcr_twem *tw = NULL;
    mcr_ring *ring = NULL;
    mcr_error err;
    int rc;

    if (argc < 3) {
        fprintf(stderr, "usage: %s YAML KEY...\n", argv[0]);
        return 2;
    }
    mcr_pool_options_init(&o);
    rc = mcr_pool_new(NULL, NULL, &o, &pool, &err);
    printf("pool: %s\n", rc == MCR_ERR_INVALID ? "invalid" : mcr_strerror(rc));
    if (rc == MCR_OK)
        return 1;
    rc = mcr_twem_load(argv[1], &tw, &err);
    if (rc == MCR_OK)
        rc = mcr_twem_ring(tw, 0, &ring, &err);
    mcr_twem_free(tw);
    if (rc != MCR_OK) {
        fprintf(stderr, "parts_consumer: %s\n", err.message);
        return 1;
    }
    for (int i = 2; i < argc; i++) {
        uint32_t s = mcr_ring_locate(ring, argv[i], strlen(argv[i]));
        printf("%s\t%s:%d\n", argv[i], mcr_ring_server_host(ring, s),
               mcr_ring_server_port(ring, s));
    }
    mcr_ring_free(ring);
    return 0;
}
