/* SPDX-License-Identifier: BSD-3-Clause */
/* realserver.h: real memcached and nutcracker processes for tests, and a tiny memcached client. */
#ifndef MCR_REALSERVER_H
#define MCR_REALSERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * Processes. Every process started here is registered; rs_stop_all() kills
 * and reaps them. It runs at exit of the process that started them (never
 * in a forked child, such as a Check test), and on Linux each one also gets
 * SIGKILL when its parent dies (PR_SET_PDEATHSIG), so a test binary killed
 * by a timeout leaves nothing behind. Processes never daemonize.
 *
 * Only loopback is used: callers pass addresses in 127.0.0.0/8.
 *
 * Not thread-safe: one thread starts and stops processes.
 */

/* The most processes running at once. */
#define RS_MAX_PROCS 64

typedef struct rs_proc {
    pid_t pid;      /* > 0 while running */
    char addr[64];  /* the address it listens on */
    int port;       /* its TCP port */
} rs_proc;

/* The memcached and nutcracker binaries: $MCR_MEMCACHED / $MCR_NUTCRACKER,
 * else /usr/bin/memcached and /usr/sbin/nutcracker. */
const char *rs_memcached_path(void);
const char *rs_nutcracker_path(void);

/* true when `path` is an executable file. */
bool rs_executable(const char *path);

/* 1 when a TCP listener can bind addr:port right now (nothing listens
 * there), 0 when not, -1 when addr is not an IPv4 address. */
int rs_port_free(const char *addr, int port);

/* Reserve `n` distinct free ports on addr (bound to port 0, so the kernel
 * picks them): ports[i] receives them and fds[i] the sockets holding them.
 * Close the sockets (rs_release_ports) just before a server binds them.
 * Returns 0, or -1 (nothing held) on failure. */
int rs_reserve_ports(const char *addr, int n, int *ports, int *fds);
void rs_release_ports(int n, int *fds);

/* Close every descriptor from `first` up: for a forked child before its
 * exec (async-signal-safe). */
void rs_close_fds_from(int first);

/* Start `argv` (argv[0] a path) with stdin from /dev/null and stdout and
 * stderr appended to `log` (NULL: /dev/null), registered for rs_stop_all.
 * Returns the pid, or -1 (too many processes, fork failure). */
pid_t rs_spawn(char *const argv[], const char *log);

/* Wait until a TCP connect to addr:port succeeds: 0; -1 when `pid` (if > 0)
 * exits first (it is then reaped and unregistered) or timeout_ms passes. */
int rs_wait_port(const char *addr, int port, pid_t pid, int timeout_ms);

/* Start memcached on addr:port (-t 1, -U 0, -c 1024, -m 64, -u the current
 * user when root) and wait for it to accept connections, at most timeout_ms. With
 * port 0 a free port is picked, several times if another process takes it
 * first. Returns 0 and fills *p, or -1 (*p cleared, nothing left running). */
int rs_memcached_start(rs_proc *p, const char *addr, int port, const char *log,
                       int timeout_ms);

/* rs_memcached_start() with more options: the NULL-terminated `extra`
 * arguments (at most 15, e.g. {"-X", NULL}: dumping disabled) after the
 * usual ones; NULL: none. */
int rs_memcached_start_opts(rs_proc *p, const char *addr, int port, const char *const *extra,
                            const char *log, int timeout_ms);

/* Start nutcracker with `conf`, its log (-o), pid file (-p) and stats port
 * (-s, on 127.0.0.1) as given, and wait until `addr`:`port` (one of its
 * pools' listen addresses) accepts connections, at most timeout_ms.
 * Returns 0 and fills *p (addr/port as given), or -1 (nothing left running:
 * read the log for nutcracker's reason). */
int rs_nutcracker_start(rs_proc *p, const char *conf, const char *log, const char *pidfile,
                        int stats_port, const char *addr, int port, int timeout_ms);

/* SIGKILL (a stopped one too), reaped and unregistered. NULL or a process
 * already stopped by rs_stop (pid 0) is a no-op. */
void rs_stop(rs_proc *p);

/* Stop every process this process started and has not stopped yet (a
 * no-op in a forked child that started none): for a test's teardown, which
 * runs even when a failed assertion skipped the test's own rs_stop calls. */
void rs_stop_all(void);

/* Run `argv` to completion with output discarded, at most timeout_ms (then
 * killed). Returns its exit status (0..255), or -1. */
int rs_run(char *const argv[], int timeout_ms);

/* rs_run() with stdout and stderr appended to `log` (NULL: discarded), and
 * the output returned: *out (when not NULL) the log's whole text, malloc'd
 * and NUL-terminated (NULL when it cannot be read). */
int rs_run_log(char *const argv[], int timeout_ms, const char *log, char **out);

/*
 * Client. Blocking calls with deadlines: each returns within its timeout.
 * Requests are pipelined (written while replies are read), so thousands of
 * keys cost a few round trips. On failure they return -1 and write a reason
 * into err (cap bytes, may be NULL).
 */

/* A TCP connection to addr:port (IPv4), close-on-exec, or -1. */
int rs_connect(const char *addr, int port, int timeout_ms);

/* "set key 0 0 len\r\nvalue\r\n" for each of the n keys (keys[i], lens[i]
 * bytes, no space or control byte), each answered STORED. */
int rs_mc_set_many(int fd, const char *const *keys, const size_t *lens, size_t n,
                   const char *value, int timeout_ms, char *err, size_t cap);

/* Which of the n keys the server holds: hit[i] = 1 or 0. Multi-key gets of
 * a few dozen keys each. */
int rs_mc_hits(int fd, const char *const *keys, const size_t *lens, size_t n,
               unsigned char *hit, int timeout_ms, char *err, size_t cap);

/* Send one command line (without "\r\n") and read one reply line into
 * reply (NUL-terminated, without "\r\n"). */
int rs_mc_command(int fd, const char *line, char *reply, size_t cap, int timeout_ms);

/*
 * The raw client of the pool suites (test_pool_*): one request, then its
 * whole reply, read within timeout_ms. On failure they return -1.
 */

/* get key: 1 (value in val), 0 (miss), -1 (error). */
int rs_mc_get(int fd, const char *key, char *val, size_t cap, int timeout_ms);

/* A `stats` number (`group` NULL: the general stats), or -1. */
long long rs_mc_stat(int fd, const char *group, const char *name, int timeout_ms);

/* set key value on one server: 0 when STORED. */
int rs_mc_set(int fd, const char *key, const char *value, int timeout_ms);

/* One reply line (its "\r\n" kept) to one command line (given without it). */
int rs_mc_line(int fd, const char *line, char *out, size_t cap, int timeout_ms);

#endif
