/* SPDX-License-Identifier: BSD-3-Clause */
/* etcd.h: the fleet's etcd client (v3 JSON gateway over HTTP): transport (etcd_http.c) and the key-value, lease and watch messages (etcd_kv.c); never installed. */
#ifndef MCR_FLEET_ETCD_H
#define MCR_FLEET_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>
#include <jansson.h>

#include "placement/placement_internal.h"
#include "mcroute.h"

/* ---- transport (etcd_http.c) */

#define MCR__ETCD_MAX_ENDPOINTS 16

typedef struct mcr__etcd_endpoint {
    char host[256];
    int port;
    char url[300];                    /* "http://host:port", for messages */
    struct evhttp_connection *conn;   /* kept alive between requests, or NULL */
} mcr__etcd_endpoint;

/* A client of one etcd cluster: its endpoints and a private event_base on
 * which requests are run to completion (one at a time). Owned by one
 * thread. */
typedef struct mcr__etcd {
    struct event_base *base;          /* owned */
    mcr__etcd_endpoint ep[MCR__ETCD_MAX_ENDPOINTS];
    size_t nep;
    size_t cur;                       /* the endpoint tried first */
    unsigned timeout_ms;              /* one request to one endpoint */
    uint64_t requests;                /* HTTP requests sent */
    uint64_t failures;                /* requests that failed on an endpoint */
} mcr__etcd;

/* Parse "URL[,URL...]" (http://host:port, or host:port; https refused)
 * into e's endpoints and create its event_base. MCR_ERR_INVALID naming the
 * bad endpoint, MCR_ERR_NOMEM. */
int mcr__etcd_init(mcr__etcd *e, const char *endpoints, unsigned timeout_ms, mcr_error *err);
void mcr__etcd_cleanup(mcr__etcd *e);

/* POST `body` (JSON text) to `path` ("/v3/kv/range") and wait for the
 * reply, trying each endpoint once from the current one: a transport
 * failure (refused, reset, timeout) or an HTTP 5xx moves to the next. On
 * success *reply is the parsed JSON object (the caller json_decref()s it)
 * and the endpoint that answered becomes the current one. Errors:
 * MCR_ERR_CONNECT (every endpoint failed; the message names them and the
 * last error), MCR_ERR_PROTOCOL (an HTTP 4xx, or a reply that is not a JSON
 * object; the message quotes it), MCR_ERR_NOMEM. */
int mcr__etcd_post(mcr__etcd *e, const char *path, const char *body, json_t **reply,
                   mcr_error *err);

/* A watch: one streaming POST /v3/watch on its own connection, on the
 * caller's event_base. Each JSON line of the reply is handed to on_line;
 * on_end is called once when the stream ends (status MCR_OK: the server
 * closed it; else why), after which the watch is inert until freed. */
typedef struct mcr__etcd_watch mcr__etcd_watch;
typedef void (*mcr__etcd_line_fn)(json_t *line, void *arg);
typedef void (*mcr__etcd_end_fn)(int status, const char *why, void *arg);

/* Start watching on endpoint `ep` of e (its host and port only: the watch
 * has its own connection on `base`), with the create request `body`.
 * idle_ms: the stream is ended (status MCR_ERR_TIMEOUT) when nothing
 * arrives for that long. NULL on allocation or connection failure. */
mcr__etcd_watch *mcr__etcd_watch_start(const mcr__etcd_endpoint *ep, struct event_base *base,
                                       const char *body, unsigned idle_ms,
                                       mcr__etcd_line_fn on_line, mcr__etcd_end_fn on_end,
                                       void *arg);
/* Cancel (no callback after this) and free. NULL is a no-op. */
void mcr__etcd_watch_free(mcr__etcd_watch *w);

/* json_loadb() that tells memory from syntax where jansson does: MCR_OK and
 * *out; MCR_ERR_NOMEM when jansson says json_error_out_of_memory; else
 * MCR_ERR_PROTOCOL with *je (*out NULL). (jansson 2.14 does not fail every
 * allocation that way: some make a syntax error, or an object without the
 * member it could not allocate, which the callers' checks then refuse.) */
int mcr__json_loadb(const char *text, size_t len, size_t flags, json_t **out, json_error_t *je);

/* ---- messages (etcd_kv.c) */

/* base64 (RFC 4648, with padding) of n bytes, malloc'ed and NUL-terminated;
 * NULL when out of memory. */
char *mcr__b64_encode(const void *data, size_t n);
/* Decode base64 text; *out malloc'ed (NUL-terminated), *n its length.
 * MCR_OK, MCR_ERR_PROTOCOL when the text is not base64, MCR_ERR_NOMEM
 * (*out NULL either way). */
int mcr__b64_decode(const char *s, unsigned char **out, size_t *n);

/* An int64 of a reply: etcd's gateway writes them as strings ("12"), and
 * leaves out zeros. Missing: 0. false when present but not a number. */
bool mcr__json_u64(const json_t *obj, const char *name, uint64_t *out);

/* One key-value of a reply, decoded. */
typedef struct mcr__etcd_kv {
    unsigned char *key;
    size_t key_len;
    unsigned char *value;
    size_t value_len;
    uint64_t mod_revision;
    uint64_t create_revision;
    uint64_t lease;
} mcr__etcd_kv;

void mcr__etcd_kv_clear(mcr__etcd_kv *kv);
/* Decode {"key":..,"value":..,"mod_revision":..}. MCR_ERR_PROTOCOL when malformed. */
int mcr__etcd_kv_parse(const json_t *o, mcr__etcd_kv *kv, mcr_error *err);

/* The header revision of a reply (0 when absent). */
uint64_t mcr__etcd_revision(const json_t *reply);

/* Range of one key: *found, and *kv when found. MCR_ERR_CONNECT,
 * MCR_ERR_PROTOCOL. *revision is the reply header's revision. */
int mcr__etcd_get(mcr__etcd *e, const char *key, bool *found, mcr__etcd_kv *kv,
                  uint64_t *revision, mcr_error *err);
/* The same as of revision `at` (0: the current one), without the value when
 * keys_only. A revision compacted away is MCR_ERR_PROTOCOL (etcd's HTTP 400). */
int mcr__etcd_get_at(mcr__etcd *e, const char *key, uint64_t at, bool keys_only, bool *found,
                     mcr__etcd_kv *kv, uint64_t *revision, mcr_error *err);

/* Every key under `prefix`, as an array of *n kvs (free each, then the
 * array). */
int mcr__etcd_get_prefix(mcr__etcd *e, const char *prefix, mcr__etcd_kv **out, size_t *n,
                         mcr_error *err);

/* Put `value` at `key` only if its mod_revision is `mod_revision` (0: only
 * if the key does not exist). *succeeded says whether it was written;
 * *revision (not NULL) is the revision of the write, or of the read. */
int mcr__etcd_cas(mcr__etcd *e, const char *key, const char *value, size_t len,
                  uint64_t mod_revision, bool *succeeded, uint64_t *revision, mcr_error *err);

/* One put of a transaction, done only if the key's mod_revision is
 * mod_revision (0: only if the key does not exist), with `lease` (0: none). */
typedef struct mcr__etcd_put_if {
    const char *key;
    const char *value;
    size_t len;
    uint64_t mod_revision;
    uint64_t lease;
} mcr__etcd_put_if;

/* One transaction of n (1 to 8) puts, all or none: *succeeded says whether
 * every compare held and so every put was made; *revision (not NULL) is
 * the revision of the write, or of the read. */
int mcr__etcd_cas_many(mcr__etcd *e, const mcr__etcd_put_if *ops, size_t n, bool *succeeded,
                       uint64_t *revision, mcr_error *err);

/* Put unconditionally, with `lease` (0: none). */
int mcr__etcd_put(mcr__etcd *e, const char *key, const char *value, size_t len, uint64_t lease,
                  mcr_error *err);

/* Delete one key. */
int mcr__etcd_delete(mcr__etcd *e, const char *key, mcr_error *err);

/* Grant a lease of ttl seconds: *id. */
int mcr__etcd_lease_grant(mcr__etcd *e, unsigned ttl, uint64_t *id, mcr_error *err);
/* Keep it alive once: *alive 0 when etcd no longer knows it (expired). */
int mcr__etcd_lease_keepalive(mcr__etcd *e, uint64_t id, bool *alive, mcr_error *err);
/* Revoke it (its keys go). */
int mcr__etcd_lease_revoke(mcr__etcd *e, uint64_t id, mcr_error *err);

/* A small request that only tells whether a member answers (its status). */
int mcr__etcd_ping(mcr__etcd *e, mcr_error *err);

/* The body of a watch create request on one key from `start_revision`. */
char *mcr__etcd_watch_body(const char *key, uint64_t start_revision);
/* The same on every key from `first` to `last`, both included. */
char *mcr__etcd_watch_range_body(const char *first, const char *last, uint64_t start_revision);

/* The key one past every key that starts with `prefix` (etcd's range_end
 * of a prefix), base64. */
char *mcr__etcd_prefix_end_b64(const char *prefix);

#endif
