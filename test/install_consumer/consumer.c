/* SPDX-License-Identifier: BSD-3-Clause */
/* consumer.c: a program built against an installed libmcroute (test_install.sh): prints the versions, then the server of each key. */
#include <stdio.h>
#include <string.h>

#include <mcroute.h>

/* version_only.c: compiled with <mcroute_version.h> alone. */
const char *consumer_header_version(void);

/* Usage: consumer SERVERS KEY...
 * Prints "header VERSION", "library VERSION", then "KEY<TAB>HOST:PORT" for
 * every key, as `mcroute locate -s SERVERS KEY...` does. Exits 1 when the
 * header and the library loaded disagree, or on bad input. */
int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s SERVERS KEY...\n", argv[0]);
        return 2;
    }
    printf("header %s\n", consumer_header_version());
    printf("library %s\n", mcr_version_string());
    if (mcr_version() != MCR_VERSION_HEX ||
        strcmp(mcr_version_string(), MCR_VERSION_STRING) != 0) {
        fprintf(stderr, "consumer: compiled against %s (0x%06x), runs with %s (0x%06x)\n",
                MCR_VERSION_STRING, (unsigned)MCR_VERSION_HEX, mcr_version_string(),
                mcr_version());
        return 1;
    }

    mcr_error err;
    mcr_ring *ring = NULL;
    mcr_config *cfg = mcr_config_new();
    if (cfg == NULL) {
        fprintf(stderr, "consumer: out of memory\n");
        return 1;
    }
    if (mcr_config_add_servers(cfg, argv[1], &err) != MCR_OK ||
        mcr_ring_new(cfg, &ring, &err) != MCR_OK) {
        fprintf(stderr, "consumer: %s\n", err.message);
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
