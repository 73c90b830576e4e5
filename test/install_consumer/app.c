/* SPDX-License-Identifier: BSD-3-Clause */
/* app.c: the program of README.md's CMake consumer block (add_executable(app app.c)), built by test_install.sh against an installed mcroute: the server of each key. */
#include <stdio.h>
#include <string.h>

#include <mcroute.h>

/* Usage: app SERVERS KEY...; prints "KEY<TAB>HOST:PORT" for every key, as
 * `mcroute locate -s SERVERS KEY...` does. Exits 1 on bad input. */
int main(int argc, char **argv)
{
    mcr_error err;
    mcr_config *cfg;
    mcr_ring *ring = NULL;

    if (argc < 3) {
        fprintf(stderr, "usage: %s SERVERS KEY...\n", argv[0]);
        return 2;
    }
    cfg = mcr_config_new();
    if (cfg == NULL) {
        fprintf(stderr, "app: out of memory\n");
        return 1;
    }
    if (mcr_config_add_servers(cfg, argv[1], &err) != MCR_OK ||
        mcr_ring_new(cfg, &ring, &err) != MCR_OK) {
        fprintf(stderr, "app: %s\n", err.message);
        mcr_config_free(cfg);
        return 1;
    }
    mcr_config_free(cfg);
    for (int i = 2; i < argc; i++) {
        uint32_t s = mcr_ring_locate(ring, argv[i], strlen(argv[i]));
        printf("%s\t%s\n", argv[i], mcr_ring_server_name(ring, s));
    }
    mcr_ring_free(ring);
    return 0;
}
