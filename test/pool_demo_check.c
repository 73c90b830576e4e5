/* SPDX-License-Identifier: BSD-3-Clause */
/* pool_demo_check.c: runs examples/pool_demo against memcached servers it starts, and checks what the demo reports. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "realserver.h"

#define SERVERS 4    /* N: the servers at the start; one more is added */
#define KEYS "10000"
#define RUN_MS 120000

static int failures;

static void check(int ok, const char *what)
{
    printf("pool_demo_check: %s: %s\n", ok ? "ok" : "FAILED", what);
    failures += !ok;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: pool_demo_check PATH_TO_POOL_DEMO\n");
        return 2;
    }
    if (!rs_executable(rs_memcached_path())) {
        fprintf(stderr, "pool_demo_check: need %s (Debian package memcached)\n",
                rs_memcached_path());
        return 1;
    }
    rs_proc mc[SERVERS + 1];
    char list[512] = "", added[64];
    size_t o = 0;
    for (int i = 0; i <= SERVERS; i++) {
        if (rs_memcached_start(&mc[i], "127.0.0.1", 0, NULL, 5000) != 0) {
            fprintf(stderr, "pool_demo_check: memcached %d did not start\n", i);
            return 1;
        }
        if (i < SERVERS)
            o += (size_t)snprintf(list + o, sizeof(list) - o, "%s127.0.0.1:%d", i ? "," : "",
                                  mc[i].port);
    }
    snprintf(added, sizeof(added), "127.0.0.1:%d", mc[SERVERS].port);

    char log[] = "/tmp/mcr-pool-demo-XXXXXX";
    int fd = mkstemp(log);
    if (fd < 0)
        return 1;
    close(fd);
    fflush(stdout);
    char *av[] = {argv[1], list, added, (char *)KEYS, NULL};
    char *text = NULL;
    int rc = rs_run_log(av, RUN_MS, log, &text);
    unlink(log);
    if (text == NULL)
        text = strdup("");
    fputs(text, stdout);

    check(rc == 0, "pool_demo exits with status 0");
    check(strstr(text, "set " KEYS " keys: " KEYS " stored, 0 failed\n") != NULL,
          "every key stored");
    check(strstr(text, "get " KEYS " keys: " KEYS " hits, 0 misses, 0 failed\nadded ") != NULL,
          "every key hits before the server is added");
    const char *m = strstr(text, "moved: measured ");
    double measured = -1, predicted = -1, ideal = -1;
    size_t missed = 0, total = 0;
    check(m != NULL && sscanf(m, "moved: measured %lf (%zu of %zu keys missed), predicted %lf "
                                 "(mcr_diff_moved), 1/(N+1) = %lf",
                              &measured, &missed, &total, &predicted, &ideal) == 5,
          "the moved line");
    /* 10,000 keys: the sampling error of the measured fraction is about
     * 0.004; 160 points a server keep the predicted one near 1/(N+1). */
    check(ideal > 0.1999 && ideal < 0.2001, "1/(N+1) is 0.2");
    check(predicted > 0.12 && predicted < 0.28, "predicted fraction near 1/(N+1)");
    check(measured - predicted < 0.03 && predicted - measured < 0.03,
          "measured fraction within 0.03 of the predicted one");
    check(missed > 0 && missed < total, "some keys moved, most did not");
    check(strstr(text, "misses are exactly the keys the diff says moved: yes\n") != NULL,
          "misses are the moved keys");
    check(strstr(text, "get " KEYS " keys: " KEYS " hits, 0 misses, 0 failed\n  server") != NULL,
          "every key hits after the refill");
    check(strstr(text, added) != NULL, "the new server is listed");
    for (int i = 0; i <= SERVERS; i++)
        rs_stop(&mc[i]);
    free(text);
    printf("pool_demo_check: %s\n", failures ? "FAILED" : "PASSED");
    return failures ? 1 : 0;
}
