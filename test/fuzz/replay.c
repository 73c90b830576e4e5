/* SPDX-License-Identifier: BSD-3-Clause */
/* replay.c: main() of a fuzz target in the ordinary build: every file of the given files and directories through LLVMFuzzerTestOneInput once. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One input file: 0, or 1 when it cannot be read (the target itself
 * traps on a broken invariant, which ends the process). */
static int replay_file(const char *path)
{
    size_t len;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "replay: cannot open %s: %s\n", path, strerror(errno));
        return 1;
    }
    fclose(f);
    char *buf = fuzz_read_file(path, &len);
    /* An exact-size copy, so that ASan sees a read past the input. */
    uint8_t *in = malloc(len > 0 ? len : 1);
    if (in == NULL) {
        fprintf(stderr, "replay: out of memory for %s\n", path);
        free(buf);
        return 1;
    }
    memcpy(in, buf, len);
    free(buf);
    if (getenv("MCR_FUZZ_VERBOSE") != NULL)
        fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
    LLVMFuzzerTestOneInput(in, len);
    free(in);
    return 0;
}

int main(int argc, char **argv)
{
    size_t files = 0;
    int bad = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE-OR-DIRECTORY...\n", argv[0]);
        return 2;
    }
    for (int a = 1; a < argc; a++) {
        struct stat st;
        if (stat(argv[a], &st) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[a], strerror(errno));
            bad = 1;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            bad |= replay_file(argv[a]);
            files++;
            continue;
        }
        DIR *d = opendir(argv[a]);
        if (d == NULL) {
            fprintf(stderr, "replay: cannot open directory %s: %s\n", argv[a], strerror(errno));
            bad = 1;
            continue;
        }
        char **names = NULL;
        size_t n = 0, cap = 0;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 64;
                char **t = realloc(names, cap * sizeof(*names));
                if (t == NULL) {
                    fprintf(stderr, "replay: out of memory\n");
                    return 1;
                }
                names = t;
            }
            size_t l = strlen(argv[a]) + strlen(e->d_name) + 2;
            names[n] = malloc(l);
            if (names[n] == NULL) {
                fprintf(stderr, "replay: out of memory\n");
                return 1;
            }
            snprintf(names[n], l, "%s/%s", argv[a], e->d_name);
            n++;
        }
        closedir(d);
        qsort(names, n, sizeof(*names), cmp_names);
        for (size_t i = 0; i < n; i++) {
            if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
                bad |= replay_file(names[i]);
                files++;
            }
            free(names[i]);
        }
        free(names);
    }
    if (files == 0) {
        fprintf(stderr, "replay: no input file in the arguments\n");
        return 1;
    }
    printf("%s: %zu files replayed%s\n", argv[0], files, bad ? ", some unreadable" : "");
    return bad;
}
