/* SPDX-License-Identifier: BSD-3-Clause */
/* test_etcd_env.c: the etcd test harness (etcdserver.c) against real etcd: one member, a three-member cluster losing and regaining its leader, and the failures it must report. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "etcdserver.h"
#include "realserver.h"
#include "testutil.h"

/* How long a cluster gets to elect a leader. */
#define LEADER_MS mcr_test_ms(15000)

static void teardown(void)
{
    rs_stop_all();
}

/* The process `pid` (started and reaped by the harness) is gone: not a
 * zombie of ours, and no process of that id, or one that is not etcd. */
static void assert_gone(pid_t pid)
{
    int st;
    char path[64], comm[64] = "";
    FILE *f;

    ck_assert_msg(pid > 0, "no pid to check");
    ck_assert_msg(waitpid(pid, &st, WNOHANG) < 0 && errno == ECHILD,
                  "pid %ld is still a child of the test (not reaped)", (long)pid);
    if (kill(pid, 0) != 0) {
        ck_assert_msg(errno == ESRCH, "kill(%ld, 0): %s", (long)pid, strerror(errno));
        return;
    }
    /* The id was reused since: fine, unless by an etcd. */
    snprintf(path, sizeof(path), "/proc/%ld/comm", (long)pid);
    f = fopen(path, "r");
    if (f != NULL) {
        if (fgets(comm, sizeof(comm), f) == NULL)
            comm[0] = '\0';
        fclose(f);
    }
    ck_assert_msg(strncmp(comm, "etcd", 4) != 0, "pid %ld is still running %s", (long)pid, comm);
}

static void assert_value(char *got, const char *want, const char *what)
{
    ck_assert_msg(got != NULL, "%s: no value: %s", what, es_last_error());
    ck_assert_msg(strcmp(got, want) == 0, "%s: \"%s\", not \"%s\"", what, got, want);
    free(got);
}

/* Run es_start with stderr going to a file; what it wrote, malloc'd. */
static char *start_capturing_stderr(int members, const char *tag, es_cluster **c)
{
    char *file = tu_temp_file("etcd-stderr", "", 0);
    int saved, fd;
    char *text;

    fflush(stderr);
    saved = dup(2);
    fd = open(file, O_WRONLY | O_APPEND);
    ck_assert_msg(saved >= 0 && fd >= 0, "redirecting stderr: %s", strerror(errno));
    dup2(fd, 2);
    close(fd);
    *c = es_start(members, tag);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    text = tu_read_file(file, NULL);
    tu_temp_file_free(file);
    return text;
}

/* One member: writes and reads, revisions, nothing left after es_free. */
START_TEST(test_one_member)
{
    /* Bytes a shell or a flag parser could take for something else. */
    const char *value = "-v with spaces, \"quotes\", {json}, tab\tand = sign";
    es_cluster *c = es_start(1, "one");
    char *dir, *slash;
    struct stat sb;
    long long r0, r1, r2;
    pid_t pid;

    ck_assert_msg(c != NULL, "es_start(1): %s", es_last_error());
    ck_assert_int_eq(es_size(c), 1);
    ck_assert_str_eq(es_endpoints(c), es_endpoint(c, 0));
    ck_assert_msg(strncmp(es_endpoint(c, 0), "http://127.0.0.1:", 17) == 0, "%s",
                  es_endpoint(c, 0));
    ck_assert_ptr_null(es_endpoint(c, 1));
    pid = es_pid(c, 0);
    ck_assert_msg(pid > 0 && kill(pid, 0) == 0, "member 0 is not running (pid %ld)", (long)pid);
    ck_assert_int_eq(es_leader(c, LEADER_MS), 0);

    r0 = es_revision(c);
    ck_assert_msg(r0 >= 1, "revision %lld: %s", r0, es_last_error());
    ck_assert_msg(es_put(c, "-k/one", value) == 0, "%s", es_last_error());
    assert_value(es_get(c, "-k/one"), value, "get -k/one");
    r1 = es_revision(c);
    ck_assert_msg(r1 == r0 + 1, "revision %lld after one put from %lld", r1, r0);
    ck_assert_msg(es_put(c, "k/empty", "") == 0, "%s", es_last_error());
    assert_value(es_get(c, "k/empty"), "", "get k/empty");
    r2 = es_revision(c);
    ck_assert_msg(r2 == r1 + 1, "revision %lld after one put from %lld", r2, r1);

    /* A missing key is NULL and says so; a key is not a prefix. */
    ck_assert_ptr_null(es_get(c, "k/none"));
    ck_assert_msg(strstr(es_last_error(), "no such key") != NULL, "%s", es_last_error());
    ck_assert_ptr_null(es_get(c, "-k"));

    /* es_ctl: raw etcdctl, exit status and output. */
    char *out = NULL;
    ck_assert_int_eq(es_ctl(c, &out, "get", "--print-value-only", "--", "-k/one", NULL), 0);
    ck_assert_msg(out != NULL && strncmp(out, value, strlen(value)) == 0, "%s", out);
    free(out);
    ck_assert_int_ne(es_ctl(c, &out, "no-such-command", NULL), 0);
    ck_assert_msg(out != NULL && out[0] != '\0', "no output from a failing etcdctl");
    free(out);
    ck_assert_int_eq(es_ctl(c, NULL, "compaction", "2", NULL), 0);

    dir = strdup(es_log(c, 0));
    slash = strrchr(dir, '/');
    *slash = '\0';
    es_free(c);
    assert_gone(pid);
    if (getenv("MCR_TEST_KEEP") == NULL || strcmp(getenv("MCR_TEST_KEEP"), "1") != 0)
        ck_assert_msg(stat(dir, &sb) != 0 && errno == ENOENT, "%s is still there", dir);
    free(dir);
}
END_TEST

/* Three members: the leader killed, a new one elected, writes go on; the
 * old leader restarted catches up; a follower stopped by SIGTERM. */
START_TEST(test_three_members)
{
    int64_t t0 = mcr_test_now_ms(), t_start, t_failover, t_restart, t_stop, t_free;
    es_cluster *c = es_start(3, "three");
    int lead, next, follower;
    pid_t old;
    char *out = NULL;

    ck_assert_msg(c != NULL, "es_start(3): %s", es_last_error());
    t_start = mcr_test_now_ms() - t0;
    ck_assert_int_eq(es_size(c), 3);
    {
        char want[200];
        snprintf(want, sizeof(want), "%s,%s,%s", es_endpoint(c, 0), es_endpoint(c, 1),
                 es_endpoint(c, 2));
        ck_assert_str_eq(es_endpoints(c), want);
    }
    lead = es_leader(c, LEADER_MS);
    ck_assert_msg(lead >= 0 && lead < 3, "no leader: %s", es_last_error());
    ck_assert_msg(es_put(c, "k/before", "v-before") == 0, "%s", es_last_error());

    old = es_pid(c, lead);
    ck_assert_int_eq(es_kill(c, lead), 0);
    ck_assert_int_eq(es_pid(c, lead), 0);
    assert_gone(old);
    ck_assert_int_eq(es_kill(c, lead), -1); /* not running */
    t0 = mcr_test_now_ms();
    next = es_leader(c, LEADER_MS);
    ck_assert_msg(next >= 0, "no new leader after killing m%d: %s", lead, es_last_error());
    ck_assert_msg(next != lead, "the killed m%d is leader", lead);
    t_failover = mcr_test_now_ms() - t0;
    ck_assert_msg(es_put(c, "k/during", "v-during") == 0, "%s", es_last_error());
    assert_value(es_get(c, "k/before"), "v-before", "get k/before with the leader down");

    t0 = mcr_test_now_ms();
    ck_assert_msg(es_restart(c, lead) == 0, "restarting m%d: %s", lead, es_last_error());
    t_restart = mcr_test_now_ms() - t0;
    ck_assert_int_eq(es_restart(c, lead), -1); /* running */
    ck_assert_msg(es_pid(c, lead) > 0 && es_pid(c, lead) != old, "pid %ld after restart",
                  (long)es_pid(c, lead));
    /* Through its own endpoint: a linearizable read, then its own store. */
    assert_value(es_get_at(c, lead, "k/during"), "v-during", "get k/during at the old leader");
    ck_assert_int_eq(es_ctl_at(c, lead, &out, "get", "--consistency=s", "--print-value-only",
                               "--", "k/during", NULL),
                     0);
    ck_assert_msg(strcmp(out, "v-during\n") == 0, "serializable get at m%d: \"%s\"", lead, out);
    free(out);
    ck_assert_int_ge(es_leader(c, LEADER_MS), 0);

    /* SIGTERM on a follower: two of three still serve writes. */
    follower = 0;
    while (follower == next)
        follower++;
    old = es_pid(c, follower);
    t0 = mcr_test_now_ms();
    ck_assert_int_eq(es_stop_member(c, follower), 0);
    t_stop = mcr_test_now_ms() - t0;
    assert_gone(old);
    ck_assert_msg(es_put(c, "k/two-left", "v") == 0, "%s", es_last_error());
    assert_value(es_get(c, "k/two-left"), "v", "get k/two-left");

    pid_t pids[3];
    for (int i = 0; i < 3; i++)
        pids[i] = es_pid(c, i);
    t0 = mcr_test_now_ms();
    es_free(c);
    t_free = mcr_test_now_ms() - t0;
    for (int i = 0; i < 3; i++)
        if (pids[i] > 0)
            assert_gone(pids[i]);
    printf("three_members: healthy in %lld ms; m%d killed, m%d leader %lld ms later; m%d "
           "healthy again in %lld ms; m%d stopped in %lld ms; es_free %lld ms\n",
           (long long)t_start, lead, next, (long long)t_failover, lead, (long long)t_restart,
           follower, (long long)t_stop, (long long)t_free);
}
END_TEST

/* A missing etcd: NULL, and stderr names the path and the variable. */
START_TEST(test_missing_binary)
{
    es_cluster *c = NULL;
    char *text;

    setenv("MCR_ETCD", "/nonexistent", 1);
    text = start_capturing_stderr(1, "missing", &c);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(text, "/nonexistent") != NULL && strstr(text, "MCR_ETCD") != NULL,
                  "stderr: %s", text);
    ck_assert_msg(strstr(es_last_error(), "/nonexistent") != NULL, "%s", es_last_error());
    free(text);

    unsetenv("MCR_ETCD");
    setenv("MCR_ETCDCTL", "/nonexistent/etcdctl", 1);
    text = start_capturing_stderr(1, "missing", &c);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(text, "/nonexistent/etcdctl") != NULL, "stderr: %s", text);
    free(text);
}
END_TEST

/* A binary that exits at once: NULL, naming it and the member's log. */
START_TEST(test_member_exits)
{
    es_cluster *c = NULL;
    char *text;

    setenv("MCR_ETCD", "/bin/false", 1);
    text = start_capturing_stderr(3, "exits", &c);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(text, "/bin/false") != NULL && strstr(text, "exited") != NULL &&
                      strstr(text, "/m0.log") != NULL,
                  "stderr: %s", text);
    free(text);
}
END_TEST

/* Bad arguments and environments are refused, naming the problem. */
START_TEST(test_bad_arguments)
{
    ck_assert_ptr_null(es_start(0, "x"));
    ck_assert_msg(strstr(es_last_error(), "0 members") != NULL, "%s", es_last_error());
    ck_assert_ptr_null(es_start(ES_MAX_MEMBERS + 1, "x"));
    ck_assert_ptr_null(es_start(1, "a/b"));
    ck_assert_msg(strstr(es_last_error(), "bad tag") != NULL, "%s", es_last_error());
    ck_assert_ptr_null(es_start(1, ""));
    setenv("ETCD_QUOTA_BACKEND_BYTES", "1", 1);
    ck_assert_ptr_null(es_start(1, "env"));
    ck_assert_msg(strstr(es_last_error(), "ETCD_QUOTA_BACKEND_BYTES") != NULL, "%s",
                  es_last_error());
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("etcd_env");
    const tu_case cases[] = {
        {"one_member", test_one_member},
        {"three_members", test_three_members},
        {"missing_binary", test_missing_binary},
        {"member_exits", test_member_exits},
        {"bad_arguments", test_bad_arguments},
    };
    tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]), 60, teardown);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
