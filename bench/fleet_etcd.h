/* SPDX-License-Identifier: BSD-3-Clause */
/* fleet_etcd.h: bench_fleet's etcd (fleet_etcd.c): start and stop one member, HTTP calls to it, its call counts and CPU time. */
#ifndef MCR_BENCH_FLEET_ETCD_H
#define MCR_BENCH_FLEET_ETCD_H

#include <stdbool.h>

#include "realserver.h"

#define FE_ADDR "127.0.0.1"

typedef struct fe_etcd {
    char dir[256], log[300], endpoint[64]; /* its directory, log, client URL */
    rs_proc proc;
    int client_port;
    int *failures; /* the bench's count of FAIL lines, raised here too */
} fe_etcd;

/* Start etcd ($MCR_ETCD, else /usr/bin/etcd) in a fresh temporary directory
 * on two ports the kernel picked (new ones, up to 3 times, if another
 * process takes one first) and wait until /health answers true. Exits 77
 * when etcd is not installed; refuses ETCD_* variables in the environment.
 * false after a FAIL line (counted in *failures). */
bool fe_start(fe_etcd *e, int *failures);

/* Stop it by its pid; remove the directory unless `keep` or a failure was
 * counted (then an INFO line names it). */
void fe_stop(fe_etcd *e, bool keep);

/* A blocking socket connected to its client port, or -1. */
int fe_connect(const fe_etcd *e);

/* One HTTP/1.0 exchange read to the end (each read waits at most 5 s): the
 * status (0: no reply), the body in *out (malloc'd, the caller frees). */
int fe_http(const fe_etcd *e, const char *method, const char *path, char **out);

/* etcd's count of the gRPC calls it started (grpc_server_started_total in
 * /metrics: one per gateway request; a watch or a keepalive is one stream). */
enum {
    FE_M_RANGE,
    FE_M_TXN,
    FE_M_PUT,
    FE_M_DELETE,
    FE_M_WATCH,
    FE_M_GRANT,
    FE_M_KEEPALIVE,
    FE_M_REVOKE,
    FE_M_OTHER,
    FE_M_N
};
extern const char *const fe_call_names[FE_M_N];
typedef struct fe_call_counts {
    double n[FE_M_N], total;
} fe_call_counts;
/* false after a FAIL line. */
bool fe_calls(const fe_etcd *e, fe_call_counts *c);

/* CPU time so far (ms): etcd's (/proc/PID/stat) in out[0], this process's
 * (getrusage) in out[1]. */
void fe_cpu_marks(const fe_etcd *e, double out[2]);

#endif /* MCR_BENCH_FLEET_ETCD_H */
