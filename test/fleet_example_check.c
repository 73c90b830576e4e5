/* SPDX-License-Identifier: BSD-3-Clause */
/* fleet_example_check.c: runs examples/fleet_follow against a real etcd member and three real memcached servers, and checks what it reports. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "etcdserver.h"
#include "realserver.h"
#include "testutil.h"

#define SERVERS 3
#define RUN_MS 60000 /* times the time scale */

static int failures;

static void check(int ok, const char *what)
{
    printf("fleet_example_check: %s: %s\n", ok ? "ok" : "FAILED", what);
    failures += !ok;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fleet_example_check PATH_TO_FLEET_FOLLOW\n");
        return 2;
    }
    es_cluster *etcd = es_start(1, "example");
    if (etcd == NULL) {
        fprintf(stderr, "fleet_example_check: etcd did not start: %s\n", es_last_error());
        return 1;
    }
    rs_proc mc[SERVERS];
    char list[512] = "";
    size_t o = 0;
    for (int i = 0; i < SERVERS; i++) {
        if (rs_memcached_start(&mc[i], "127.0.0.1", 0, NULL, mcr_test_ms(5000)) != 0) {
            fprintf(stderr, "fleet_example_check: memcached %d did not start (%s)\n", i,
                    rs_memcached_path());
            return 1;
        }
        o += (size_t)snprintf(list + o, sizeof(list) - o, "%s127.0.0.1:%d", i ? "," : "",
                              mc[i].port);
    }
    char log[] = "/tmp/mcr-fleet-example-XXXXXX";
    int fd = mkstemp(log);
    if (fd < 0)
        return 1;
    close(fd);
    fflush(stdout);
    char *av[] = {argv[1], "--etcd", (char *)es_endpoints(etcd), "--pool", "example", "-s", list, NULL};
    char *text = NULL;
    int rc = rs_run_log(av, mcr_test_ms(RUN_MS), log, &text);
    unlink(log);
    if (text == NULL)
        text = strdup("");
    fputs(text, stdout);

    check(rc == 0, "fleet_follow exits with status 0");
    check(strstr(text, "pool example at epoch 1\n") != NULL, "the first epoch published");
    check(strstr(text, "epoch 1 -> 2\n") != NULL, "the change reached the router");
    check(strstr(text, ", errors 0.\n") != NULL, "no request failed");
    check(strstr(text, "all checks passed\n") != NULL, "its own checks hold");
    /* It unregistered on its way out. */
    char *clients = NULL;
    es_ctl(etcd, &clients, "get", "--prefix", "/mcroute/pools/example/clients/", NULL);
    check(clients != NULL && strstr(clients, "/clients/") == NULL,
          "no client key left behind");
    free(clients);
    for (int i = 0; i < SERVERS; i++)
        rs_stop(&mc[i]);
    es_free(etcd);
    free(text);
    printf("fleet_example_check: %s\n", failures ? "FAILED" : "PASSED");
    return failures ? 1 : 0;
}
