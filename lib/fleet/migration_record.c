/* SPDX-License-Identifier: BSD-3-Clause */
/* migration_record.c: a pool's migration record as JSON: its phases by name, strict decoding (every field, its type, both snapshots verified) and encoding. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet_internal.h"

/* A phase by its name (mcr_migration_phase_name(), libmcroute's). */
bool mcr__migration_phase_parse(const char *name, mcr_migration_phase *out)
{
    for (int i = MCR_MIGRATION_NONE; name != NULL && i <= MCR_MIGRATION_ABORTED; i++)
        if (strcmp(name, mcr_migration_phase_name((mcr_migration_phase)i)) == 0) {
            *out = (mcr_migration_phase)i;
            return true;
        }
    return false;
}

bool mcr__migration_id_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    return n >= 1 && n <= MCR_MIGRATION_ID_MAX && strspn(s, "0123456789abcdef") == n;
}

void mcr_migration_clear(mcr_migration *m)
{
    if (m == NULL)
        return;
    mcr_snapshot_unref(m->from);
    mcr_snapshot_unref(m->to);
    memset(m, 0, sizeof(*m));
}

/* ------------------------------------------------------------ decoding */

/* The record's fields, and those of its "progress". */
static const char *const fields[] = {"id",       "phase",       "from_epoch", "to_epoch",
                                     "from",     "to",          "warm",       "rollback",
                                     "grace_ms", "grace_until", "progress",   "updated",
                                     "message"};
static const char *const progress_fields[] = {"scanned", "moved",   "copied",    "skipped",
                                              "failed",  "backlog", "keys_per_s"};

/* A record being decoded: where it comes from, for messages. */
typedef struct reader {
    const char *key;
    uint64_t rev;
    mcr_error *err;
} reader;

static int bad(const reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int bad(const reader *r, const char *fmt, ...)
{
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return mcr__error(r->err, MCR_ERR_SYNTAX, "etcd key %s (revision %llu): %s", r->key,
                      (unsigned long long)r->rev, what);
}

/* Only the fields of `names`, each present. */
static int fields_exactly(const reader *r, const json_t *o, const char *where,
                          const char *const *names, size_t n)
{
    const char *k;
    json_t *v;
    char q[64];
    json_object_foreach((json_t *)o, k, v) {
        size_t i = 0;
        while (i < n && strcmp(k, names[i]) != 0)
            i++;
        if (i == n)
            return bad(r, "%sunknown field \"%s\"", where,
                       mcr__quote(q, sizeof(q), k, strlen(k)));
    }
    for (size_t i = 0; i < n; i++)
        if (json_object_get(o, names[i]) == NULL)
            return bad(r, "%sno field \"%s\"", where, names[i]);
    return MCR_OK;
}

/* A whole number field, 0 to INT64_MAX. */
static int get_u64(const reader *r, const json_t *o, const char *where, const char *name,
                   uint64_t *out)
{
    json_t *v = json_object_get(o, name);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return bad(r, "%sfield \"%s\": not a whole number of 0 or more", where, name);
    *out = (uint64_t)json_integer_value(v);
    return MCR_OK;
}

static int get_bool(const reader *r, const json_t *o, const char *name, int *out)
{
    json_t *v = json_object_get(o, name);
    if (!json_is_boolean(v))
        return bad(r, "field \"%s\": not true or false", name);
    *out = json_is_true(v);
    return MCR_OK;
}

/* A snapshot text field, verified, of epoch `epoch`. */
static int get_snapshot(const reader *r, const json_t *o, const char *name, uint64_t epoch,
                        mcr_snapshot **out)
{
    json_t *v = json_object_get(o, name);
    if (!json_is_string(v))
        return bad(r, "field \"%s\": not a string (a snapshot text)", name);
    char where[160];
    snprintf(where, sizeof(where), "etcd key %.80s (revision %llu) field \"%s\"", r->key,
             (unsigned long long)r->rev, name);
    int rc = mcr_snapshot_parse(json_string_value(v), json_string_length(v), where, NULL, 0, out,
                                r->err);
    if (rc != MCR_OK)
        return rc;
    if (mcr_snapshot_epoch(*out) != epoch) {
        unsigned long long got = (unsigned long long)mcr_snapshot_epoch(*out);
        mcr_snapshot_unref(*out);
        *out = NULL;
        return bad(r, "field \"%s\": a snapshot of epoch %llu, not %s_epoch %llu", name, got,
                   name, (unsigned long long)epoch);
    }
    return MCR_OK;
}

static int decode(const reader *r, const json_t *j, mcr_migration *m)
{
    char q[80];
    uint64_t from_epoch = 0, to_epoch = 0;
    if (!json_is_object(j))
        return bad(r, "not a JSON object");
    int rc = fields_exactly(r, j, "", fields, sizeof(fields) / sizeof(fields[0]));
    if (rc != MCR_OK)
        return rc;
    json_t *id = json_object_get(j, "id"), *ph = json_object_get(j, "phase");
    if (!json_is_string(id) || !mcr__migration_id_ok(json_string_value(id)))
        return bad(r, "field \"id\": not 1 to %d lower-case hex digits", MCR_MIGRATION_ID_MAX);
    snprintf(m->id, sizeof(m->id), "%s", json_string_value(id));
    if (!json_is_string(ph))
        return bad(r, "field \"phase\": not a string");
    if (!mcr__migration_phase_parse(json_string_value(ph), &m->phase) ||
        m->phase == MCR_MIGRATION_NONE)
        return bad(r,
                   "field \"phase\": \"%s\" is not planned, copying, switched, grace, closing, done or "
                   "aborted",
                   mcr__quote(q, sizeof(q), json_string_value(ph), json_string_length(ph)));
    if ((rc = get_u64(r, j, "", "from_epoch", &from_epoch)) != MCR_OK ||
        (rc = get_u64(r, j, "", "to_epoch", &to_epoch)) != MCR_OK)
        return rc;
    if (from_epoch == 0 || to_epoch <= from_epoch)
        return bad(r, "fields \"from_epoch\", \"to_epoch\": need 1 <= from_epoch < to_epoch");
    if ((rc = get_snapshot(r, j, "from", from_epoch, &m->from)) != MCR_OK ||
        (rc = get_snapshot(r, j, "to", to_epoch, &m->to)) != MCR_OK)
        return rc;
    if ((rc = get_bool(r, j, "warm", &m->warm)) != MCR_OK ||
        (rc = get_bool(r, j, "rollback", &m->rollback)) != MCR_OK ||
        (rc = get_u64(r, j, "", "grace_ms", &m->grace_ms)) != MCR_OK ||
        (rc = get_u64(r, j, "", "grace_until", &m->grace_until)) != MCR_OK ||
        (rc = get_u64(r, j, "", "updated", &m->updated)) != MCR_OK)
        return rc;
    if (m->phase == MCR_MIGRATION_GRACE && m->grace_until == 0)
        return bad(r, "field \"grace_until\": 0 in phase grace");
    json_t *msg = json_object_get(j, "message");
    if (!json_is_string(msg) || json_string_length(msg) >= sizeof(m->message) ||
        strlen(json_string_value(msg)) != json_string_length(msg))
        return bad(r, "field \"message\": not a string of at most 255 bytes");
    memcpy(m->message, json_string_value(msg), json_string_length(msg) + 1);
    json_t *p = json_object_get(j, "progress");
    if (!json_is_object(p))
        return bad(r, "field \"progress\": not an object");
    const char *in = "field \"progress\": ";
    if ((rc = fields_exactly(r, p, in, progress_fields,
                             sizeof(progress_fields) / sizeof(progress_fields[0]))) != MCR_OK ||
        (rc = get_u64(r, p, in, "scanned", &m->progress.scanned)) != MCR_OK ||
        (rc = get_u64(r, p, in, "moved", &m->progress.moved)) != MCR_OK ||
        (rc = get_u64(r, p, in, "copied", &m->progress.copied)) != MCR_OK ||
        (rc = get_u64(r, p, in, "skipped", &m->progress.skipped)) != MCR_OK ||
        (rc = get_u64(r, p, in, "failed", &m->progress.failed)) != MCR_OK ||
        (rc = get_u64(r, p, in, "backlog", &m->progress.backlog)) != MCR_OK)
        return rc;
    json_t *kps = json_object_get(p, "keys_per_s");
    if (!json_is_number(kps) || !isfinite(json_number_value(kps)) || json_number_value(kps) < 0)
        return bad(r, "%sfield \"keys_per_s\": not a number of 0 or more", in);
    m->progress.keys_per_s = json_number_value(kps);
    return MCR_OK;
}

int mcr__migration_parse(const char *key, uint64_t mod_revision, const unsigned char *value,
                         size_t len, mcr_migration *out, mcr_error *err)
{
    reader r = {key, mod_revision, err};
    json_error_t je;
    memset(out, 0, sizeof(*out));
    json_t *j = NULL;
    int jrc = mcr__json_loadb((const char *)value, len, JSON_REJECT_DUPLICATES, &j, &je);
    if (jrc == MCR_ERR_NOMEM)
        return mcr__error(err, MCR_ERR_NOMEM, "etcd key %s (revision %llu): out of memory "
                          "parsing the migration record", key, (unsigned long long)mod_revision);
    if (j == NULL) {
        return bad(&r, "not JSON (%s at byte %d)", je.text, je.position);
    }
    int rc = decode(&r, j, out);
    json_decref(j);
    if (rc != MCR_OK)
        mcr_migration_clear(out);
    else
        out->mod_revision = mod_revision;
    return rc;
}

/* ------------------------------------------------------------ encoding */

/* `in` as valid UTF-8 into out (cap >= strlen(in) + 1): a byte that does
 * not begin a complete, shortest-form sequence becomes '?' (a message cut
 * in the middle of a character, a server id in another encoding). */
static void utf8_clean(const char *in, char *out, size_t cap)
{
    const unsigned char *p = (const unsigned char *)in;
    size_t o = 0;
    while (*p != '\0' && o + 1 < cap) {
        size_t n = *p < 0x80 ? 1 : (*p & 0xe0) == 0xc0 ? 2 : (*p & 0xf0) == 0xe0 ? 3
                 : (*p & 0xf8) == 0xf0 ? 4 : 0;
        bool ok = n > 0 && !(n == 2 && *p < 0xc2) && !(n == 4 && *p > 0xf4);
        for (size_t k = 1; ok && k < n; k++)
            ok = (p[k] & 0xc0) == 0x80;
        if (ok && n == 3)
            ok = !(p[0] == 0xe0 && p[1] < 0xa0) && !(p[0] == 0xed && p[1] >= 0xa0);
        if (ok && n == 4)
            ok = !(p[0] == 0xf0 && p[1] < 0x90) && !(p[0] == 0xf4 && p[1] >= 0x90);
        if (!ok) {
            out[o++] = '?';
            p++;
            continue;
        }
        for (size_t k = 0; k < n; k++)
            out[o++] = (char)p[k];
        p += n;
    }
    out[o] = '\0';
}

static json_t *snapshot_string(const mcr_snapshot *s)
{
    char *t = NULL;
    size_t n = 0;
    if (mcr_snapshot_text(s, &t, &n, NULL) != MCR_OK)
        return NULL;
    json_t *v = json_stringn(t, n);
    free(t);
    return v;
}

int mcr__migration_format(const mcr_migration *m, char **out, size_t *len, mcr_error *err)
{
    if (m == NULL || out == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "NULL migration");
    if (!mcr__migration_id_ok(m->id))
        return mcr__error(err, MCR_ERR_INVALID, "migration id: need 1 to %d lower-case hex digits",
                          MCR_MIGRATION_ID_MAX);
    if (!mcr__zeroed(m->reserved, sizeof(m->reserved)) ||
        !mcr__zeroed(m->progress.reserved, sizeof(m->progress.reserved)))
        return mcr__error(err, MCR_ERR_INVALID,
                          "mcr_migration: the reserved area is not zero (fill the struct from "
                          "all-zero, or take it from mcr_fleet_migration_read(): mcroute.h)");
    if (m->phase <= MCR_MIGRATION_NONE || m->phase > MCR_MIGRATION_ABORTED)
        return mcr__error(err, MCR_ERR_INVALID, "migration phase %d: not a phase", (int)m->phase);
    if (m->from == NULL || m->to == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "migration: NULL from or to snapshot");
    if (mcr_snapshot_epoch(m->to) <= mcr_snapshot_epoch(m->from))
        return mcr__error(err, MCR_ERR_INVALID,
                          "migration: to's epoch %llu is not above from's epoch %llu",
                          (unsigned long long)mcr_snapshot_epoch(m->to),
                          (unsigned long long)mcr_snapshot_epoch(m->from));
    if (m->phase == MCR_MIGRATION_GRACE && m->grace_until == 0)
        return mcr__error(err, MCR_ERR_INVALID, "migration: phase grace without grace_until");
    if (memchr(m->message, '\0', sizeof(m->message)) == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "migration: message not terminated");
    if (!isfinite(m->progress.keys_per_s) || m->progress.keys_per_s < 0)
        return mcr__error(err, MCR_ERR_INVALID, "migration: keys_per_s not a number of 0 or more");
    const uint64_t lim = (uint64_t)INT64_MAX;
    if (mcr_snapshot_epoch(m->to) > lim || m->grace_ms > lim || m->grace_until > lim ||
        m->updated > lim || m->progress.scanned > lim || m->progress.moved > lim ||
        m->progress.copied > lim || m->progress.skipped > lim || m->progress.failed > lim ||
        m->progress.backlog > lim)
        return mcr__error(err, MCR_ERR_INVALID, "migration: a number above 2^63 - 1");
    const mcr_migration_progress *p = &m->progress;
    char msg[sizeof(m->message)];
    utf8_clean(m->message, msg, sizeof(msg));
    json_t *prog = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:f}", "scanned", (json_int_t)p->scanned,
                             "moved", (json_int_t)p->moved, "copied", (json_int_t)p->copied,
                             "skipped", (json_int_t)p->skipped, "failed", (json_int_t)p->failed,
                             "backlog", (json_int_t)p->backlog, "keys_per_s", p->keys_per_s);
    json_t *from = snapshot_string(m->from), *to = snapshot_string(m->to);
    json_t *j = NULL;
    if (prog != NULL && from != NULL && to != NULL)
        j = json_pack("{s:s,s:s,s:I,s:I,s:o,s:o,s:b,s:b,s:I,s:I,s:o,s:I,s:s}", "id", m->id,
                      "phase", mcr_migration_phase_name(m->phase), "from_epoch",
                      (json_int_t)mcr_snapshot_epoch(m->from), "to_epoch",
                      (json_int_t)mcr_snapshot_epoch(m->to), "from", from, "to", to, "warm",
                      m->warm != 0, "rollback", m->rollback != 0, "grace_ms",
                      (json_int_t)m->grace_ms, "grace_until", (json_int_t)m->grace_until,
                      "progress", prog, "updated", (json_int_t)m->updated, "message", msg);
    else {
        json_decref(prog);
        json_decref(from);
        json_decref(to);
    }
    char *t = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    if (t == NULL)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory");
    *out = t;
    if (len != NULL)
        *len = strlen(t);
    return MCR_OK;
}
