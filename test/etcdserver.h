/* SPDX-License-Identifier: BSD-3-Clause */
/* etcdserver.h: real etcd processes for tests (one member or a cluster on loopback), and etcdctl run against them. */
#ifndef MCR_ETCDSERVER_H
#define MCR_ETCDSERVER_H

#include <sys/types.h>

/*
 * A cluster is `members` etcd processes on 127.0.0.1, each with a client and
 * a peer port the kernel picked (rs_reserve_ports) and a fresh data dir
 * (DIR/mI) and log (DIR/mI.log, etcd's zap log, appended across restarts)
 * under one tu_tmpdir() directory DIR. Members are named m0, m1, ...; index
 * i everywhere below is 0-based. The processes are started by rs_spawn(), so
 * rs_stop_all() (at exit of the process that started them) and
 * PR_SET_PDEATHSIG (when that process, or rather the thread that called
 * es_start/es_restart, dies) kill whatever es_free() did not stop.
 *
 * etcd is $MCR_ETCD, else /usr/bin/etcd (Debian package etcd-server);
 * etcdctl is $MCR_ETCDCTL, else /usr/bin/etcdctl (etcd-client). An ETCD_*
 * variable in the environment (etcd reads its flags from those) makes
 * es_start fail naming it; ETCDCTL_* variables are removed from the
 * environment etcdctl gets.
 *
 * Timing: --heartbeat-interval ES_HEARTBEAT_MS and --election-timeout
 * ES_ELECTION_MS, both times the time scale (testutil.h), with --pre-vote:
 * a leader lost is replaced in 1-2 s, and a member stalled for a few hundred
 * ms on a loaded machine (a slow fsync) does not start an election. Every
 * wait has a deadline that grows with the time scale.
 *
 * Errors: a function that fails writes one line naming the problem (the
 * binary, the member, its log file, etcdctl's output) to stderr and keeps it
 * for es_last_error(); when a member did not come up, the last lines of its
 * log follow on stderr. Callers fail the test with it; nothing here skips.
 *
 * Not thread-safe: one thread starts, stops and queries a cluster. The
 * cluster belongs to the process that started it (Check's fork mode: the
 * test's own process); es_free it there.
 */

#define ES_MAX_MEMBERS 5
#define ES_HEARTBEAT_MS 100
#define ES_ELECTION_MS 1000
/* How long es_start / es_restart wait for every member to be healthy. */
#define ES_START_MS 30000
/* How long a member gets to exit after SIGTERM before SIGKILL. */
#define ES_STOP_MS 10000
/* etcdctl's --dial-timeout and --command-timeout; es_ctl kills it after
 * twice their sum. */
#define ES_CTL_MS 5000

typedef struct es_cluster es_cluster;

/* The etcd and etcdctl paths in use (see above). */
const char *es_etcd_path(void);
const char *es_etcdctl_path(void);

/* Start a new cluster of `members` (1..ES_MAX_MEMBERS) members, a unique
 * --initial-cluster-token each, and wait until every member's client URL
 * answers GET /health with {"health":"true"}, at most ES_START_MS (scaled).
 * `tag` ([A-Za-z0-9_-], 1-32 bytes; NULL: "etcd") names the temporary
 * directory. If another process takes a picked port first, it starts again
 * on new ports (a few times). Returns the cluster, or NULL: etcd or etcdctl
 * missing, a bad argument, a member that exited or was not healthy in time
 * (nothing is left running, the directory is removed unless MCR_TEST_KEEP=1
 * keeps it). A failure to make the temporary directory aborts the test
 * (tu_tmpdir). */
es_cluster *es_start(int members, const char *tag);

/* Stop every running member (SIGTERM, up to ES_STOP_MS scaled, then
 * SIGKILL; the followers first, then the leader, which then has no follower
 * to hand its leadership to and exits at once), reap them, remove the
 * directory (tu_tmpdir_free: MCR_TEST_KEEP=1 keeps it) and free c. NULL is a
 * no-op. */
void es_free(es_cluster *c);

/* The number of members. */
int es_size(const es_cluster *c);

/* "http://127.0.0.1:P0,http://127.0.0.1:P1,...": every member's client URL,
 * running or not. Owned by c. */
const char *es_endpoints(const es_cluster *c);

/* Member i's client URL "http://127.0.0.1:P", or NULL when i is out of
 * range. Owned by c. */
const char *es_endpoint(const es_cluster *c, int i);

/* Member i's process id, 0 when it is stopped (or i is out of range). */
pid_t es_pid(const es_cluster *c, int i);

/* Member i's log file. Owned by c; NULL when i is out of range. */
const char *es_log(const es_cluster *c, int i);

/* The index of the leader: asks every running member for its status (POST
 * /v3/maintenance/status) until one reports itself leader and every member
 * that answers names it, at most timeout_ms (not scaled: pass
 * mcr_test_ms(...)). -1 when none is found in time (or none is running). */
int es_leader(es_cluster *c, int timeout_ms);

/* SIGKILL member i and reap it. 0, or -1 (i out of range or not running). */
int es_kill(es_cluster *c, int i);

/* SIGTERM member i (and SIGCONT, in case it was SIGSTOPped), up to
 * ES_STOP_MS (scaled) for it to exit, then SIGKILL; reaped. A leader hands
 * its leadership to a follower first. 0, or -1 (i out of range or not
 * running). */
int es_stop_member(es_cluster *c, int i);

/* Start stopped member i again with the same flags, ports and data dir (etcd
 * 3.4 restarts from its WAL and ignores --initial-cluster*), and wait until
 * it is healthy, at most ES_START_MS (scaled). 0, or -1 (i out of range or
 * running; it exited or was not healthy in time: then it is stopped). */
int es_restart(es_cluster *c, int i);

/* Run etcdctl (ETCDCTL_API=3, --endpoints=es_endpoints(c), dial and command
 * timeouts ES_CTL_MS scaled) with the NULL-terminated arguments that follow
 * `arg` (at most 32). Its stdout and stderr, interleaved, go to *out
 * (malloc'd, NUL-terminated, the caller frees it; NULL when out is NULL or
 * memory ran out). Returns etcdctl's exit status (0..255), or -1: it could
 * not be started (missing: *out says so), was killed by a signal, or ran past
 * its deadline (killed; *out ends with a line saying so). */
int es_ctl(const es_cluster *c, char **out, const char *arg, ...);

/* The same with --endpoints=es_endpoint(c, i) alone: member i answers (its
 * own store with --consistency=s). -1 with *out set when i is out of range. */
int es_ctl_at(const es_cluster *c, int i, char **out, const char *arg, ...);

/* etcdctl put -- key value: 0 when etcdctl said OK, else -1. */
int es_put(const es_cluster *c, const char *key, const char *value);

/* The value of key (etcdctl get -w json, base64 decoded, NUL-terminated;
 * malloc'd, the caller frees it), or NULL: no such key (es_last_error()
 * says so), or etcdctl failed. A value with a NUL byte is cut there. */
char *es_get(const es_cluster *c, const char *key);

/* The same through member i alone (a linearizable read: it needs a leader). */
char *es_get_at(const es_cluster *c, int i, const char *key);

/* The cluster's current revision (the header of a range request), or -1. */
long long es_revision(const es_cluster *c);

/* The last failure's message (a static buffer; "" before any). */
const char *es_last_error(void);

#endif
