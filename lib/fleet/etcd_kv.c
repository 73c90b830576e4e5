/* SPDX-License-Identifier: BSD-3-Clause */
/* etcd_kv.c: the etcd v3 gateway's messages: base64 keys and values, ranges, compare-and-swap transactions, puts, deletes, leases and watch requests, as jansson objects. */
#include <stdlib.h>
#include <string.h>

#include "etcd.h"

/* ------------------------------------------------------------ base64 */

/* RFC 4648's alphabet, with '=' padding: what protobuf's JSON mapping (and
 * so etcd's gateway) uses for bytes fields. */
static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *mcr__b64_encode(const void *data, size_t n)
{
    const unsigned char *d = data;
    char *out = malloc(4 * ((n + 2) / 3) + 1), *o = out;
    if (out == NULL)
        return NULL;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8 | d[i + 2];
        *o++ = B64[v >> 18];
        *o++ = B64[(v >> 12) & 63];
        *o++ = B64[(v >> 6) & 63];
        *o++ = B64[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < n ? (uint32_t)d[i + 1] << 8 : 0);
        *o++ = B64[v >> 18];
        *o++ = B64[(v >> 12) & 63];
        *o++ = i + 1 < n ? B64[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    *o = '\0';
    return out;
}

static int b64_val(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

int mcr__b64_decode(const char *s, unsigned char **out, size_t *n)
{
    size_t len = strlen(s);
    *out = NULL;
    if (len % 4 != 0)
        return MCR_ERR_PROTOCOL;
    unsigned char *buf = malloc(len / 4 * 3 + 1);
    if (buf == NULL)
        return MCR_ERR_NOMEM;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 4) {
        int v[4];
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            unsigned char c = (unsigned char)s[i + k];
            if (c == '=' && i + 4 == len && k >= 2) {
                v[k] = 0;
                pad++;
            } else if (pad > 0 || (v[k] = b64_val(c)) < 0) {
                free(buf);
                return MCR_ERR_PROTOCOL;
            }
        }
        uint32_t x = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
                     (uint32_t)v[3];
        buf[o++] = (unsigned char)(x >> 16);
        if (pad < 2)
            buf[o++] = (unsigned char)(x >> 8);
        if (pad < 1)
            buf[o++] = (unsigned char)x;
    }
    buf[o] = '\0';
    *out = buf;
    *n = o;
    return MCR_OK;
}

/* ------------------------------------------------------------ JSON */

bool mcr__json_u64(const json_t *obj, const char *name, uint64_t *out)
{
    json_t *v = json_object_get(obj, name);
    *out = 0;
    if (v == NULL)
        return true;
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0)
            return false;
        *out = (uint64_t)json_integer_value(v);
        return true;
    }
    if (!json_is_string(v))
        return false;
    const char *s = json_string_value(v);
    uint64_t x = 0;
    if (*s == '\0')
        return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || x > (UINT64_MAX - 9) / 10)
            return false;
        x = x * 10 + (uint64_t)(*s - '0');
    }
    *out = x;
    return true;
}

uint64_t mcr__etcd_revision(const json_t *reply)
{
    uint64_t r = 0;
    json_t *h = json_object_get(reply, "header");
    if (h != NULL)
        mcr__json_u64(h, "revision", &r);
    return r;
}

void mcr__etcd_kv_clear(mcr__etcd_kv *kv)
{
    free(kv->key);
    free(kv->value);
    memset(kv, 0, sizeof(*kv));
}

int mcr__etcd_kv_parse(const json_t *o, mcr__etcd_kv *kv, mcr_error *err)
{
    memset(kv, 0, sizeof(*kv));
    json_t *k = json_object_get(o, "key"), *v = json_object_get(o, "value");
    int rc = MCR_ERR_PROTOCOL;
    if (json_is_object(o) && json_is_string(k) && (v == NULL || json_is_string(v)) &&
        mcr__json_u64(o, "mod_revision", &kv->mod_revision) &&
        mcr__json_u64(o, "create_revision", &kv->create_revision) &&
        mcr__json_u64(o, "lease", &kv->lease) &&
        (rc = mcr__b64_decode(json_string_value(k), &kv->key, &kv->key_len)) == MCR_OK)
        rc = mcr__b64_decode(v ? json_string_value(v) : "", &kv->value, &kv->value_len);
    if (rc != MCR_OK) {
        mcr__etcd_kv_clear(kv);
        return rc == MCR_ERR_NOMEM
                   ? mcr__error(err, rc, "out of memory for a key-value etcd sent")
                   : mcr__error(err, rc, "etcd sent a malformed key-value");
    }
    return MCR_OK;
}

/* json_dumps of an object we built (stolen), or NULL. */
static char *dump(json_t *o)
{
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

static json_t *b64_string(const void *data, size_t n)
{
    char *b = mcr__b64_encode(data, n);
    json_t *s = b ? json_string(b) : NULL;
    free(b);
    return s;
}

static json_t *u64_string(uint64_t v)
{
    char b[24];
    snprintf(b, sizeof(b), "%llu", (unsigned long long)v);
    return json_string(b);
}

/* POST a body built here (stolen). */
static int call(mcr__etcd *e, const char *path, json_t *body, json_t **reply, mcr_error *err)
{
    char *text = dump(body);
    if (text == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory");
    int rc = mcr__etcd_post(e, path, text, reply, err);
    free(text);
    return rc;
}

/* ------------------------------------------------------------ operations */

int mcr__etcd_get(mcr__etcd *e, const char *key, bool *found, mcr__etcd_kv *kv,
                  uint64_t *revision, mcr_error *err)
{
    return mcr__etcd_get_at(e, key, 0, false, found, kv, revision, err);
}

int mcr__etcd_get_at(mcr__etcd *e, const char *key, uint64_t at, bool keys_only, bool *found,
                     mcr__etcd_kv *kv, uint64_t *revision, mcr_error *err)
{
    json_t *reply = NULL;
    json_t *body = json_pack("{s:o}", "key", b64_string(key, strlen(key)));
    /* a member that could not be added (memory) drops the body: call()
     * says out of memory, never a range of another revision, or values */
    if (body != NULL && ((at != 0 && json_object_set_new(body, "revision", u64_string(at))) ||
                         (keys_only && json_object_set_new(body, "keys_only", json_true())))) {
        json_decref(body);
        body = NULL;
    }
    int rc = call(e, "/v3/kv/range", body, &reply, err);
    if (rc != MCR_OK)
        return rc;
    json_t *kvs = json_object_get(reply, "kvs");
    *found = false;
    if (revision != NULL)
        *revision = mcr__etcd_revision(reply);
    if (kvs != NULL && (!json_is_array(kvs) || json_array_size(kvs) > 1))
        rc = mcr__error(err, MCR_ERR_PROTOCOL, "etcd range of one key: malformed kvs");
    else if (kvs != NULL && json_array_size(kvs) == 1) {
        rc = mcr__etcd_kv_parse(json_array_get(kvs, 0), kv, err);
        if (rc == MCR_OK && (kv->key_len != strlen(key) || memcmp(kv->key, key, kv->key_len))) {
            mcr__etcd_kv_clear(kv);
            rc = mcr__error(err, MCR_ERR_PROTOCOL, "etcd answered a range of %s with another key",
                            key);
        }
        *found = rc == MCR_OK;
    }
    json_decref(reply);
    return rc;
}

char *mcr__etcd_prefix_end_b64(const char *prefix)
{
    size_t n = strlen(prefix);
    unsigned char *end = malloc(n + 1);
    if (end == NULL)
        return NULL;
    memcpy(end, prefix, n);
    /* the last byte below 0xff, incremented, the rest dropped */
    while (n > 0 && end[n - 1] == 0xff)
        n--;
    if (n == 0) {
        free(end);
        return mcr__b64_encode("\0", 1); /* every key */
    }
    end[n - 1]++;
    char *b = mcr__b64_encode(end, n);
    free(end);
    return b;
}

int mcr__etcd_get_prefix(mcr__etcd *e, const char *prefix, mcr__etcd_kv **out, size_t *n,
                         mcr_error *err)
{
    char *end = mcr__etcd_prefix_end_b64(prefix);
    if (end == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory");
    json_t *reply = NULL;
    int rc = call(e, "/v3/kv/range",
                  json_pack("{s:o,s:s}", "key", b64_string(prefix, strlen(prefix)),
                            "range_end", end),
                  &reply, err);
    free(end);
    if (rc != MCR_OK)
        return rc;
    json_t *kvs = json_object_get(reply, "kvs");
    size_t k = kvs ? json_array_size(kvs) : 0;
    *out = NULL;
    *n = 0;
    if (kvs != NULL && !json_is_array(kvs)) {
        json_decref(reply);
        return mcr__error(err, MCR_ERR_PROTOCOL, "etcd range: malformed kvs");
    }
    mcr__etcd_kv *a = k ? calloc(k, sizeof(*a)) : NULL;
    if (k && a == NULL) {
        json_decref(reply);
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < k && rc == MCR_OK; i++)
        rc = mcr__etcd_kv_parse(json_array_get(kvs, i), &a[i], err);
    json_decref(reply);
    if (rc != MCR_OK) {
        for (size_t i = 0; i < k; i++)
            mcr__etcd_kv_clear(&a[i]);
        free(a);
        return rc;
    }
    *out = a;
    *n = k;
    return MCR_OK;
}

int mcr__etcd_cas(mcr__etcd *e, const char *key, const char *value, size_t len,
                  uint64_t mod_revision, bool *succeeded, uint64_t *revision, mcr_error *err)
{
    json_t *k = b64_string(key, strlen(key));
    json_t *cmp = mod_revision == 0
                      ? json_pack("{s:O,s:s,s:s,s:s}", "key", k, "target", "CREATE", "result",
                                  "EQUAL", "create_revision", "0")
                      : json_pack("{s:O,s:s,s:s,s:o}", "key", k, "target", "MOD", "result",
                                  "EQUAL", "mod_revision", u64_string(mod_revision));
    json_t *body = json_pack("{s:[o],s:[{s:{s:O,s:o}}]}", "compare", cmp, "success",
                             "request_put", "key", k, "value", b64_string(value, len));
    json_decref(k);
    json_t *reply = NULL;
    int rc = call(e, "/v3/kv/txn", body, &reply, err);
    if (rc != MCR_OK)
        return rc;
    json_t *ok = json_object_get(reply, "succeeded");
    *succeeded = ok != NULL && json_is_true(ok);
    if (ok != NULL && !json_is_boolean(ok))
        rc = mcr__error(err, MCR_ERR_PROTOCOL, "etcd txn: \"succeeded\" is not a boolean");
    else if (!json_is_object(json_object_get(reply, "header")))
        /* a failed compare still has a header: this is no etcd txn reply */
        rc = mcr__error(err, MCR_ERR_PROTOCOL, "etcd txn: not a transaction reply (no header)");
    if (revision != NULL)
        *revision = mcr__etcd_revision(reply);
    json_decref(reply);
    return rc;
}

int mcr__etcd_cas_many(mcr__etcd *e, const mcr__etcd_put_if *ops, size_t n, bool *succeeded,
                       uint64_t *revision, mcr_error *err)
{
    if (n == 0 || n > 8)
        return mcr__error(err, MCR_ERR_INVALID, "etcd txn: 1 to 8 puts");
    json_t *cmps = json_array(), *puts = json_array();
    for (size_t i = 0; i < n && cmps != NULL && puts != NULL; i++) {
        const mcr__etcd_put_if *op = &ops[i];
        json_t *k = b64_string(op->key, strlen(op->key));
        json_t *cmp = op->mod_revision == 0
                          ? json_pack("{s:O,s:s,s:s,s:s}", "key", k, "target", "CREATE", "result",
                                      "EQUAL", "create_revision", "0")
                          : json_pack("{s:O,s:s,s:s,s:o}", "key", k, "target", "MOD", "result",
                                      "EQUAL", "mod_revision", u64_string(op->mod_revision));
        json_t *put = json_pack("{s:O,s:o}", "key", k, "value", b64_string(op->value, op->len));
        if (put != NULL && op->lease != 0 &&
            json_object_set_new(put, "lease", u64_string(op->lease)) != 0) {
            json_decref(put); /* never a put without its lease */
            put = NULL;
        }
        json_decref(k);
        /* the _new appends and "o" take their reference even when they fail
         * (jansson 2.12 and later); one of the pair missing is freed here */
        bool ok = cmp != NULL && put != NULL;
        if (!ok) {
            json_decref(cmp);
            json_decref(put);
        } else if (json_array_append_new(cmps, cmp) != 0) {
            json_decref(put);
            ok = false;
        } else if (json_array_append_new(puts, json_pack("{s:o}", "request_put", put)) != 0) {
            ok = false;
        }
        if (!ok) {
            json_decref(cmps);
            json_decref(puts);
            cmps = puts = NULL;
        }
    }
    if (cmps == NULL || puts == NULL) { /* json_array() failed, or a pair above */
        json_decref(cmps);
        json_decref(puts);
        cmps = puts = NULL;
    }
    json_t *body = cmps && puts ? json_pack("{s:o,s:o}", "compare", cmps, "success", puts) : NULL;
    if (body == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory");
    json_t *reply = NULL;
    int rc = call(e, "/v3/kv/txn", body, &reply, err);
    if (rc != MCR_OK)
        return rc;
    json_t *ok = json_object_get(reply, "succeeded");
    *succeeded = ok != NULL && json_is_true(ok);
    if (ok != NULL && !json_is_boolean(ok))
        rc = mcr__error(err, MCR_ERR_PROTOCOL, "etcd txn: \"succeeded\" is not a boolean");
    else if (!json_is_object(json_object_get(reply, "header")))
        rc = mcr__error(err, MCR_ERR_PROTOCOL, "etcd txn: not a transaction reply (no header)");
    if (revision != NULL)
        *revision = mcr__etcd_revision(reply);
    json_decref(reply);
    return rc;
}

int mcr__etcd_put(mcr__etcd *e, const char *key, const char *value, size_t len, uint64_t lease,
                  mcr_error *err)
{
    json_t *body = json_pack("{s:o,s:o}", "key", b64_string(key, strlen(key)), "value",
                             b64_string(value, len));
    if (body != NULL && lease != 0 && json_object_set_new(body, "lease", u64_string(lease)) != 0) {
        json_decref(body); /* never a put without its lease */
        body = NULL;
    }
    json_t *reply = NULL;
    int rc = call(e, "/v3/kv/put", body, &reply, err);
    json_decref(reply);
    return rc;
}

int mcr__etcd_delete(mcr__etcd *e, const char *key, mcr_error *err)
{
    json_t *reply = NULL;
    int rc = call(e, "/v3/kv/deleterange",
                  json_pack("{s:o}", "key", b64_string(key, strlen(key))), &reply, err);
    json_decref(reply);
    return rc;
}

int mcr__etcd_lease_grant(mcr__etcd *e, unsigned ttl, uint64_t *id, mcr_error *err)
{
    json_t *reply = NULL;
    int rc = call(e, "/v3/lease/grant", json_pack("{s:I}", "TTL", (json_int_t)ttl), &reply,
                  err);
    if (rc != MCR_OK)
        return rc;
    if (!mcr__json_u64(reply, "ID", id) || *id == 0) {
        json_t *m = json_object_get(reply, "error");
        rc = mcr__error(err, MCR_ERR_PROTOCOL, "etcd lease grant: no lease id (%s)",
                        json_is_string(m) ? json_string_value(m) : "no error given");
    }
    json_decref(reply);
    return rc;
}

int mcr__etcd_lease_keepalive(mcr__etcd *e, uint64_t id, bool *alive, mcr_error *err)
{
    json_t *reply = NULL;
    int rc = call(e, "/v3/lease/keepalive", json_pack("{s:o}", "ID", u64_string(id)), &reply,
                  err);
    if (rc != MCR_OK)
        return rc;
    /* A stream of one message: {"result":{"ID":..,"TTL":..}}; an expired
     * lease comes back without TTL. */
    json_t *res = json_object_get(reply, "result");
    uint64_t ttl = 0;
    if (!json_is_object(res) || !mcr__json_u64(res, "TTL", &ttl))
        rc = mcr__error(err, MCR_ERR_PROTOCOL, "etcd lease keepalive: malformed reply");
    *alive = ttl > 0;
    json_decref(reply);
    return rc;
}

int mcr__etcd_lease_revoke(mcr__etcd *e, uint64_t id, mcr_error *err)
{
    json_t *reply = NULL;
    int rc = call(e, "/v3/lease/revoke", json_pack("{s:o}", "ID", u64_string(id)), &reply, err);
    json_decref(reply);
    return rc;
}

char *mcr__etcd_watch_body(const char *key, uint64_t start_revision)
{
    return dump(json_pack("{s:{s:o,s:o}}", "create_request", "key",
                          b64_string(key, strlen(key)), "start_revision",
                          u64_string(start_revision)));
}

char *mcr__etcd_watch_range_body(const char *first, const char *last, uint64_t start_revision)
{
    /* range_end is exclusive: `last` followed by a NUL byte is the first
     * key after it */
    return dump(json_pack("{s:{s:o,s:o,s:o}}", "create_request", "key",
                          b64_string(first, strlen(first)), "range_end",
                          b64_string(last, strlen(last) + 1), "start_revision",
                          u64_string(start_revision)));
}

int mcr__etcd_ping(mcr__etcd *e, mcr_error *err)
{
    json_t *reply = NULL;
    int rc = mcr__etcd_post(e, "/v3/maintenance/status", "{}", &reply, err);
    json_decref(reply);
    return rc;
}
