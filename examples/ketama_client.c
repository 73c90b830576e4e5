/* SPDX-License-Identifier: BSD-3-Clause */
/* ketama_client.c: example libketama program (ketama.h API only): prints the server of each key of a server file's continuum.
 *
 * Usage: ketama_client SERVERFILE [KEY...]
 *
 *        ketama_client -p SERVERFILE
 *
 * With no KEY arguments, keys are read from standard input, one a line.
 * Each key is printed as "KEY -> ADDRESS (POINT)". With -p the continuum
 * is printed instead, one "ADDRESS (POINT)" line per point.
 *
 * Written as a program for the original libketama would be; it builds
 * unchanged against either library:
 *
 *     cc -I/usr/include/mcroute-ketama ketama_client.c -lketama
 *
 * Exit status: 0, 1 when the server file cannot be used, 2 on a usage error.
 */
#include <stdio.h>
#include <string.h>

#include <ketama.h>

static void print_server(ketama_continuum c, char *key)
{
    /* The continuum is rebuilt here when the file has changed, so a long
     * running client follows edits of the server file. */
    mcs *m = ketama_get_server(key, c);
    if (m == NULL) /* mcroute's libketama: a continuum without points */
        printf("%s -> (none)\n", key);
    else
        printf("%s -> %s (%u)\n", key, m->ip, m->point);
}

int main(int argc, char **argv)
{
    ketama_continuum c;
    int print_only = 0, first = 1;

    if (argc > 1 && strcmp(argv[1], "-p") == 0) {
        print_only = 1;
        first = 2;
    }
    if (argc <= first) {
        fprintf(stderr, "usage: %s [-p] SERVERFILE [KEY...]\n", argv[0]);
        return 2;
    }
    if (!ketama_roll(&c, argv[first])) {
        fprintf(stderr, "%s: %s\n", argv[0], ketama_error());
        return 1;
    }
    if (print_only) {
        ketama_print_continuum(c);
    } else if (argc > first + 1) {
        for (int i = first + 1; i < argc; i++)
            print_server(c, argv[i]);
    } else {
        char line[4096];
        while (fgets(line, sizeof(line), stdin) != NULL) {
            line[strcspn(line, "\r\n")] = '\0';
            print_server(c, line);
        }
    }
    ketama_smoke(c);
    return 0;
}
