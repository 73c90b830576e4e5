/* SPDX-License-Identifier: BSD-3-Clause */
/* ketama_consumer.c: a libketama program built against mcroute's installed libketama (test_install.sh): prints the server and point of each key. */
#include <stdio.h>

#include <ketama.h>

/* Usage: ketama_consumer SERVERFILE KEY...; prints "KEY -> ADDRESS (POINT)". */
int main(int argc, char **argv)
{
    ketama_continuum c;

    if (argc < 3) {
        fprintf(stderr, "usage: %s SERVERFILE KEY...\n", argv[0]);
        return 2;
    }
    if (!ketama_roll(&c, argv[1])) {
        fprintf(stderr, "ketama_consumer: %s\n", ketama_error());
        return 1;
    }
    for (int i = 2; i < argc; i++) {
        mcs *m = ketama_get_server(argv[i], c);
        if (m == NULL) {
            fprintf(stderr, "ketama_consumer: no server for %s\n", argv[i]);
            ketama_smoke(c);
            return 1;
        }
        printf("%s -> %s (%u)\n", argv[i], m->ip, m->point);
    }
    ketama_smoke(c);
    return 0;
}
