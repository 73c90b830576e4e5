/* SPDX-License-Identifier: BSD-3-Clause */
/* lmc_consumer.c: a program built against the installed libmcroute_libmemcached (test_install.sh): the server of each key for a libmemcached option string. */
#include <stdio.h>
#include <string.h>

#include <mcroute_memcached_st.h>

/* Usage: lmc_consumer OPTIONS KEY...; prints "KEY<TAB>HOST:PORT" as
 * `mcroute locate -l OPTIONS KEY...` does. No server is contacted. */
int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s OPTIONS KEY...\n", argv[0]);
        return 2;
    }
    memcached_st *memc = memcached(argv[1], strlen(argv[1]));
    if (memc == NULL) {
        fprintf(stderr, "lmc_consumer: libmemcached refuses %s\n", argv[1]);
        return 1;
    }
    mcr_error err;
    mcr_ring *ring = NULL;
    if (mcr_memcached_st_ring(memc, &ring, &err) != MCR_OK) {
        fprintf(stderr, "lmc_consumer: %s\n", err.message);
        memcached_free(memc);
        return 1;
    }
    memcached_free(memc);
    for (int i = 2; i < argc; i++) {
        uint32_t s = mcr_ring_locate(ring, argv[i], strlen(argv[i]));
        printf("%s\t%s\n", argv[i], mcr_ring_server_name(ring, s));
    }
    mcr_ring_free(ring);
    return 0;
}
