/* SPDX-License-Identifier: BSD-3-Clause */
/* test_snapshot_files.c: snapshot files and texts: round trips, corrupted, truncated, stale and forged files refused, the maglev table bound, epochs, and server files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "mcroute.h"
#include "mcroute_snapshot.h"
#include "test_snapshot_util.h"
#include "testutil.h"

/* ------------------------------------------------------------ files */

START_TEST(save_load_round_trip)
{
    tu_rng r;
    tu_rng_init(&r, 8);
    for (size_t mi = 0; mi < NMODES; mi++) {
        mcr_mode m = all_modes[mi];
        mcr_config *cfg = random_config(&r, m, 1 + tu_below(&r, 25), 0, 4);
        mcr_error err;
        /* Odd bytes everywhere the format allows them. */
        mcr_server_desc odd = {.id = "odd id %41=\xc3\xa9", .host = "h%ost=x", .port = 80,
                               .weight = 2, .zone = "zone with space",
                               .state = MCR_STATE_ACTIVE, .id_is_default = 0};
        ck_assert_int_eq(mcr_config_add_server_desc(cfg, &odd, &err), MCR_OK);
        if (mi % 3 == 0)
            mcr_config_set_key_prefix(cfg, "n s\x01%", 5);
        if (mi % 3 == 1)
            mcr_config_set_hash_tag(cfg, "%=");
        mcr_snapshot *s = snap_of(cfg, 41 + mi);
        mcr_changes *ch = mcr_changes_new();
        mcr_server_desc d;
        mcr_snapshot_server(s, 0, &d);
        if (mcr_snapshot_server_count(s) > 1)
            mcr_changes_set_state(ch, d.id, MCR_STATE_DOWN, &err);
        mcr_snapshot *s1 = apply_ok(s, ch);
        const char *path = tmp_path("rt.snap");
        ck_assert_int_eq(mcr_snapshot_save(s1, path, &err), MCR_OK);
        mcr_snapshot *l = NULL;
        int rc = mcr_snapshot_load(path, s, 0, &l, &err);
        ck_assert_msg(rc == MCR_OK, "%s", err.message);
        ck_assert_str_eq(mcr_snapshot_checksum(l), mcr_snapshot_checksum(s1));
        ck_assert_uint_eq(mcr_snapshot_epoch(l), mcr_snapshot_epoch(s1));
        ck_assert_uint_eq(mcr_snapshot_server_count(l), mcr_snapshot_server_count(s1));
        for (size_t i = 0; i < mcr_snapshot_server_count(l); i++) {
            mcr_server_desc x, y;
            mcr_snapshot_server(l, i, &x);
            mcr_snapshot_server(s1, i, &y);
            ck_assert_str_eq(x.id, y.id);
            ck_assert_str_eq(x.host, y.host);
            ck_assert_int_eq(x.port, y.port);
            ck_assert_uint_eq(x.weight, y.weight);
            ck_assert_int_eq(x.state, y.state);
            ck_assert_int_eq(x.zone == NULL, y.zone == NULL);
            if (x.zone != NULL)
                ck_assert_str_eq(x.zone, y.zone);
            ck_assert_uint_eq(mcr_snapshot_server_zone(l, i), mcr_snapshot_server_zone(s1, i));
        }
        assert_same_points(l, s1);
        for (int k = 0; k < NKEYS; k++)
            FAST_UINT_EQ(mcr_snapshot_locate(l, keys[k], key_len[k]),
                         mcr_snapshot_locate(s1, keys[k], key_len[k]));
        /* Saving the loaded snapshot gives the same bytes. */
        size_t n1, n2;
        char *t1 = tu_read_file(path, &n1);
        ck_assert_int_eq(mcr_snapshot_save(l, tmp_path("rt2.snap"), &err), MCR_OK);
        char *t2 = tu_read_file(tmp_path("rt2.snap"), &n2);
        ck_assert_uint_eq(n1, n2);
        ck_assert(memcmp(t1, t2, n1) == 0);
        free(t1);
        free(t2);
        mcr_snapshot_unref(l);
        mcr_snapshot_unref(s1);
        mcr_snapshot_unref(s);
        mcr_changes_free(ch);
        mcr_config_free(cfg);
    }
}
END_TEST


/* The text in memory is the file's, byte for byte, and parses back with
 * the same checks (a flipped byte, a stale epoch, the name in messages). */
START_TEST(text_parse_in_memory)
{
    mcr_snapshot *s = small_snapshot(10), *cur = small_snapshot(5);
    mcr_error err;
    const char *path = tmp_path("t.snap");
    ck_assert_int_eq(mcr_snapshot_save(s, path, &err), MCR_OK);
    size_t flen, len = 0;
    char *file = tu_read_file(path, &flen);
    char *text = NULL;
    ck_assert_int_eq(mcr_snapshot_text(s, &text, &len, &err), MCR_OK);
    ck_assert_uint_eq(len, flen);
    ck_assert(memcmp(text, file, len) == 0);
    ck_assert_uint_eq(strlen(text), len);
    /* Not NUL-terminated: parse reads len bytes only. */
    char *copy = malloc(len + 8);
    memcpy(copy, text, len);
    memset(copy + len, 'x', 8);
    mcr_snapshot *out = NULL;
    ck_assert_int_eq(mcr_snapshot_parse(copy, len, "etcd key /k", cur, 0, &out, &err), MCR_OK);
    ck_assert_str_eq(mcr_snapshot_checksum(out), mcr_snapshot_checksum(s));
    ck_assert_uint_eq(mcr_snapshot_epoch(out), 10);
    mcr_snapshot_unref(out);
    /* Stale unless forced; the name is in the message. */
    mcr_snapshot *sentinel = (mcr_snapshot *)&err;
    out = sentinel;
    ck_assert_int_eq(mcr_snapshot_parse(text, len, "etcd key /k", s, 0, &out, &err),
                     MCR_ERR_STALE);
    ck_assert_ptr_nonnull(strstr(err.message, "etcd key /k"));
    ck_assert_ptr_eq(out, sentinel);
    ck_assert_int_eq(mcr_snapshot_parse(text, len, NULL, s, MCR_SNAPSHOT_FORCE, &out, &err),
                     MCR_OK);
    mcr_snapshot_unref(out);
    /* A changed byte; the default name. */
    copy[strstr(copy, "zone=z1") - copy + 6] = '2';
    out = sentinel;
    ck_assert_int_eq(mcr_snapshot_parse(copy, len, NULL, cur, 0, &out, &err), MCR_ERR_CORRUPT);
    ck_assert_ptr_nonnull(strstr(err.message, "snapshot text"));
    ck_assert_ptr_eq(out, sentinel);
    /* Empty, NULL, unknown flags. */
    ck_assert_int_eq(mcr_snapshot_parse(NULL, 0, NULL, NULL, 0, &out, &err), MCR_ERR_SYNTAX);
    ck_assert_int_eq(mcr_snapshot_parse(NULL, 3, NULL, NULL, 0, &out, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_snapshot_parse(text, len, NULL, NULL, 2u, &out, &err),
                     MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_snapshot_parse(text, len, NULL, NULL, 0, NULL, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_snapshot_text(NULL, &text, &len, &err), MCR_ERR_INVALID);
    ck_assert_ptr_eq(out, sentinel);
    free(copy);
    free(text);
    free(file);
    mcr_snapshot_unref(s);
    mcr_snapshot_unref(cur);
}
END_TEST

START_TEST(corrupted_truncated_stale_refused)
{
    mcr_snapshot *s = small_snapshot(10), *cur = small_snapshot(5);
    mcr_error err;
    const char *path = tmp_path("c.snap");
    ck_assert_int_eq(mcr_snapshot_save(s, path, &err), MCR_OK);
    size_t len;
    char *good = tu_read_file(path, &len);
    char *bad = malloc(len + 1);
    mcr_snapshot *sentinel = (mcr_snapshot *)&err, *out;
    const char *bad_path = tmp_path("bad.snap");

    /* Every single changed byte is refused; the current snapshot stays. */
    for (size_t i = 0; i < len; i++) {
        for (int flip = 0; flip < 2; flip++) {
            memcpy(bad, good, len);
            bad[i] = flip ? (char)(bad[i] ^ 0x01) : (bad[i] == '1' ? '2' : '1');
            if (bad[i] == good[i])
                continue;
            tu_write_file(bad_path, bad, len);
            out = sentinel;
            int rc = mcr_snapshot_load(bad_path, cur, 0, &out, &err);
            ck_assert_msg(rc != MCR_OK, "byte %zu changed: accepted", i);
            ck_assert_ptr_eq(out, sentinel);
            ck_assert_ptr_nonnull(strstr(err.message, bad_path));
        }
    }
    /* Every truncation. */
    for (size_t n = 0; n < len; n++) {
        tu_write_file(bad_path, good, n);
        out = sentinel;
        ck_assert_msg(mcr_snapshot_load(bad_path, cur, 0, &out, &err) != MCR_OK,
                      "truncated to %zu bytes: accepted", n);
        ck_assert_ptr_eq(out, sentinel);
    }
    tu_write_file(bad_path, good, len - 1);
    ck_assert_int_eq(mcr_snapshot_load(bad_path, cur, 0, &out, &err), MCR_ERR_SYNTAX);
    ck_assert_ptr_nonnull(strstr(err.message, "truncated"));
    /* A byte changed in the middle: a checksum mismatch. */
    memcpy(bad, good, len);
    char *z = strstr(bad, "zone=z1");
    z[6] = '2';
    tu_write_file(bad_path, bad, len);
    ck_assert_int_eq(mcr_snapshot_load(bad_path, cur, 0, &out, &err), MCR_ERR_CORRUPT);
    ck_assert_ptr_nonnull(strstr(err.message, "checksum mismatch"));

    /* Stale: an epoch not above the current one, unless forced. */
    ck_assert_int_eq(mcr_snapshot_load(path, s, 0, &out, &err), MCR_ERR_STALE);
    ck_assert_ptr_nonnull(strstr(err.message, "stale"));
    ck_assert_ptr_eq(out, sentinel);
    mcr_snapshot *newer = small_snapshot(11);
    ck_assert_int_eq(mcr_snapshot_load(path, newer, 0, &out, &err), MCR_ERR_STALE);
    ck_assert_int_eq(mcr_snapshot_load(path, newer, 1, &out, &err), MCR_OK);
    ck_assert_str_eq(mcr_snapshot_checksum(out), mcr_snapshot_checksum(s));
    mcr_snapshot_unref(out);
    ck_assert_int_eq(mcr_snapshot_load(path, cur, 0, &out, &err), MCR_OK);
    ck_assert_uint_eq(mcr_snapshot_epoch(out), 10);
    mcr_snapshot_unref(out);
    ck_assert_int_eq(mcr_snapshot_load(path, NULL, 0, &out, &err), MCR_OK);
    mcr_snapshot_unref(out);

    /* Missing file, NULL arguments, a directory. */
    out = sentinel;
    ck_assert_int_eq(mcr_snapshot_load(tmp_path("missing"), NULL, 0, &out, &err), MCR_ERR_IO);
    ck_assert_int_eq(mcr_snapshot_load(NULL, NULL, 0, &out, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_snapshot_load(path, NULL, 0, NULL, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_snapshot_save(NULL, path, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_snapshot_save(s, NULL, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_snapshot_save(s, tmp_path("no/such/dir/x.snap"), &err), MCR_ERR_IO);
    ck_assert_ptr_eq(out, sentinel);
    /* The failed save left the old file as it was. */
    size_t len2;
    char *again = tu_read_file(path, &len2);
    ck_assert_uint_eq(len2, len);
    ck_assert(memcmp(again, good, len) == 0);
    free(again);

    mcr_snapshot_unref(newer);
    mcr_snapshot_unref(cur);
    mcr_snapshot_unref(s);
    free(good);
    free(bad);
}
END_TEST

/* The checksum as the format defines it, to forge files whose checksum
 * matches but whose content is not what the rebuild gives. */
static void fix_checksum(char *text, size_t *len)
{
    char *cs = strstr(text, "checksum ");
    char *first = strstr(text, "\nserver ") + 1;
    size_t hlen = (size_t)(first - text);
    unsigned char buf[1 << 16], d[16];
    memcpy(buf, text, hlen);
    size_t n = hlen;
    for (char *p = first; p < cs;) {
        char *nl = strchr(p, '\n');
        mcr_md5(p, (size_t)(nl + 1 - p), buf + n);
        n += 16;
        p = nl + 1;
    }
    mcr_md5(buf, n, d);
    char *o = cs + 9;
    for (int i = 0; i < 16; i++)
        o += sprintf(o, "%02x", d[i]);
    *o++ = '\n';
    *len = (size_t)(o - text);
}

/* A server of a 255-byte host and no id has the derived id "host:port",
 * over the 255 bytes a given id may have: its snapshot file still loads
 * (found by the server_list fuzz target), and a file that gives a named
 * id over 255 bytes is still refused. */
START_TEST(long_host_derived_id_round_trip)
{
    char host[MCR_HOSTNAME_MAX + 1], v6[64];
    memset(host, 'h', MCR_HOSTNAME_MAX);
    host[MCR_HOSTNAME_MAX] = '\0';
    for (size_t i = 60; i < MCR_HOSTNAME_MAX; i += 63)
        host[i] = '.';
    snprintf(v6, sizeof(v6), "fd00::%x", 0xbeefu);
    mcr_config *cfg = mcr_config_new();
    mcr_error err;
    ck_assert_int_eq(mcr_config_add_server(cfg, host, 65535, 1, &err), MCR_OK);
    ck_assert_int_eq(mcr_config_add_server(cfg, v6, 11211, 1, &err), MCR_OK);
    mcr_snapshot *s = snap_of(cfg, 7);
    mcr_server_desc d;
    mcr_snapshot_server(s, 0, &d);
    ck_assert_uint_gt(strlen(d.id), MCR_HOSTNAME_MAX);
    const char *path = tmp_path("longhost.snap");
    ck_assert_int_eq(mcr_snapshot_save(s, path, &err), MCR_OK);
    mcr_snapshot *l = NULL;
    int rc = mcr_snapshot_load(path, NULL, 0, &l, &err);
    ck_assert_msg(rc == MCR_OK, "load: %s", err.message);
    ck_assert_str_eq(mcr_snapshot_checksum(l), mcr_snapshot_checksum(s));
    mcr_snapshot_unref(l);

    /* The same line marked named=1, the checksum recomputed: a given id of
     * 261 bytes is refused, by name. */
    size_t n;
    char *t = tu_read_file(path, &n);
    char *named = strstr(t, " named=0");
    ck_assert_ptr_nonnull(named);
    named[7] = '1';
    fix_checksum(t, &n);
    tu_write_file(path, t, n);
    rc = mcr_snapshot_load(path, NULL, 0, &l, &err);
    ck_assert_int_eq(rc, MCR_ERR_SYNTAX);
    ck_assert_msg(strstr(err.message, "an id is 1..255 bytes") != NULL, "%s", err.message);
    free(t);
    mcr_snapshot_unref(s);
    mcr_config_free(cfg);
}
END_TEST

START_TEST(forged_files_refused)
{
    mcr_snapshot *s = small_snapshot(3);
    mcr_error err;
    const char *path = tmp_path("f.snap");
    ck_assert_int_eq(mcr_snapshot_save(s, path, &err), MCR_OK);
    size_t len;
    char *good = tu_read_file(path, &len);
    char *t = malloc(len + 256);
    mcr_snapshot *out = NULL;

    /* fix_checksum reproduces the writer's checksum. */
    memcpy(t, good, len);
    t[len] = '\0';
    size_t n = len;
    fix_checksum(t, &n);
    ck_assert_uint_eq(n, len);
    ck_assert(memcmp(t, good, len) == 0);

    /* A weight changed and the checksum recomputed: the points differ. */
    struct {
        const char *from, *to;
        int code;
        const char *msg;
    } cases[] = {
        {"weight=2", "weight=3", MCR_ERR_CORRUPT, "line 11: differs"},
        {"named=1", "named=0", MCR_ERR_CORRUPT, "line 10: differs"},
        {"algorithm 1", "algorithm 2", MCR_ERR_UNSUPPORTED, "algorithm 2"},
        {"mcroute-snapshot 1", "mcroute-snapshot 9", MCR_ERR_UNSUPPORTED, "format 9"},
        {"mode stable-ketama", "mode stable-ketamo", MCR_ERR_UNKNOWN, "line 4"},
        {"state=active", "state=asleep", MCR_ERR_UNKNOWN, "line 10"},
        {"servers 2", "servers 3", MCR_ERR_SYNTAX, "3 servers announced"},
        {"port=11211", "port=70000", MCR_ERR_RANGE, "line 10"},
        {"epoch 3", "epoch 03", MCR_ERR_SYNTAX, "line 3"},
        {"zone=z1", "zone=z%2", MCR_ERR_SYNTAX, "escape"},
        {"zone=z1", "zone=Z1", MCR_OK, NULL}, /* a zone is free text: valid */
        {"hash md5", "hash nope", MCR_ERR_UNKNOWN, "unknown hash"},
        {"id=a ", "id=b ", MCR_ERR_CORRUPT, "line 10: differs"}, /* b's points */
        {" digest=", " digist=", MCR_ERR_SYNTAX, "digest="},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        memcpy(t, good, len);
        t[len] = '\0';
        char *p = strstr(t, cases[c].from);
        ck_assert_ptr_nonnull(p);
        size_t fl = strlen(cases[c].from), tl = strlen(cases[c].to);
        memmove(p + tl, p + fl, len - (size_t)(p - t) - fl + 1);
        memcpy(p, cases[c].to, tl);
        n = len - fl + tl;
        fix_checksum(t, &n);
        tu_write_file(tmp_path("forged.snap"), t, n);
        out = NULL;
        int rc = mcr_snapshot_load(tmp_path("forged.snap"), NULL, 0, &out, &err);
        ck_assert_msg(rc == cases[c].code, "case %zu: %d, %s", c, rc, rc ? err.message : "ok");
        if (rc == MCR_OK) {
            mcr_snapshot_unref(out);
            continue;
        }
        ck_assert_ptr_null(out);
        ck_assert_msg(strstr(err.message, cases[c].msg) != NULL, "case %zu: %s", c, err.message);
    }
    free(t);
    free(good);
    mcr_snapshot_unref(s);
}
END_TEST

static long max_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* A 300-byte file with a valid checksum that declares the largest maglev
 * table for one server: refused at its header, in milliseconds, without
 * building (or allocating) the table. It once took 90 s and 600 MB to be
 * refused (the table of 67 million entries was built first). */
START_TEST(forged_huge_table_refused_fast)
{
    static const char head[] = "mcroute-snapshot 2\nalgorithm 1\nepoch 1\nmode maglev\nhash md5\n"
                               "point-hash md5\nhash-tag off\nkey-prefix off\ntable %u\n"
                               "servers 1\nserver id=h0:11211 host=h0 port=11211 weight=1 zone= "
                               "state=active named=0 points=%u digest=0000000000000000 map=\n"
                               "checksum 00000000000000000000000000000000\n";
    char t[1024];
    size_t n = (size_t)snprintf(t, sizeof(t), head, (unsigned)MCR_MAGLEV_SIZE_MAX,
                                (unsigned)MCR_MAGLEV_SIZE_MAX);
    fix_checksum(t, &n);
    ck_assert_uint_lt(n, 400);
    const char *path = tmp_path("huge.snap");
    tu_write_file(path, t, n);
    mcr_snapshot *out = NULL;
    mcr_error err;
    long rss0 = max_rss_kb();
    int64_t t0 = mcr_test_now_ms();
    int rc = mcr_snapshot_load(path, NULL, 0, &out, &err);
    long long ms = mcr_test_now_ms() - t0;
    long grown_kb = max_rss_kb() - rss0;
    ck_assert_msg(rc == MCR_ERR_RANGE, "%d: %s", rc, rc ? err.message : "loaded");
    ck_assert_ptr_null(out);
    ck_assert_msg(strstr(err.message, "line 9: maglev: a table of 67108859 entries for 1 server "
                                      "is above the limit of 1048576") != NULL,
                  "%s", err.message);
    ck_assert_msg(ms < mcr_test_ms(2000), "refused after %lld ms", ms);
    /* the table alone would be 268 MB (4 bytes an entry) */
    ck_assert_msg(grown_kb < 32 * 1024, "peak memory grew by %ld kB", grown_kb);

    /* The same forgery with a size one server justifies passes the header
     * and the checksum (fix_checksum is right), and is refused by the
     * rebuild: its points and digest are not the table's. */
    n = (size_t)snprintf(t, sizeof(t), head, 65537u, (unsigned)MCR_MAGLEV_SIZE_MAX);
    fix_checksum(t, &n);
    tu_write_file(path, t, n);
    rc = mcr_snapshot_load(path, NULL, 0, &out, &err);
    ck_assert_msg(rc == MCR_ERR_CORRUPT, "%d: %s", rc, rc ? err.message : "loaded");
    ck_assert_msg(strstr(err.message, "line 11: differs") != NULL, "%s", err.message);
    ck_assert_ptr_null(out);
}
END_TEST

/* The bound on maglev tables holds everywhere a table is built, so that
 * every snapshot the library makes can be loaded from its file. */
START_TEST(maglev_table_bound)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    mcr_snapshot *s = NULL;
    mcr_ring *ring = NULL;
    ck_assert_int_eq(mcr_config_set_mode(cfg, MCR_MODE_MAGLEV), MCR_OK);
    ck_assert_int_eq(mcr_config_add_servers(cfg, "a:1,b:2", NULL), MCR_OK);
    ck_assert_int_eq(mcr_config_set_table_size(cfg, MCR_MAGLEV_SIZE_MAX), MCR_OK);
    int64_t t0 = mcr_test_now_ms();
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &s, &err), MCR_ERR_RANGE);
    ck_assert_msg(strstr(err.message, "above the limit of 1048576") != NULL, "%s", err.message);
    ck_assert_int_eq(mcr_ring_new(cfg, &ring, &err), MCR_ERR_RANGE);
    ck_assert_msg(strstr(err.message, "for 2 servers") != NULL, "%s", err.message);
    ck_assert_msg(mcr_test_now_ms() - t0 < mcr_test_ms(2000), "refused after %lld ms",
                  (long long)(mcr_test_now_ms() - t0));
    ck_assert_ptr_null(s);
    ck_assert_ptr_null(ring);
    mcr_config_free(cfg);

    /* 60 servers justify 400 x 60^2 = 1,440,000 entries (1439989 is the
     * largest prime below); 50 justify max(1048576, 1,000,000), less than
     * the table: removing 10 is refused (marking them DOWN, which keeps
     * them listed, is not) */
    cfg = mcr_config_new();
    ck_assert_int_eq(mcr_config_set_mode(cfg, MCR_MODE_MAGLEV), MCR_OK);
    for (int i = 0; i < 60; i++) {
        char h[32];
        snprintf(h, sizeof(h), "10.0.0.%d", i + 1);
        ck_assert_int_eq(mcr_config_add_server(cfg, h, 11211, 1, NULL), MCR_OK);
    }
    ck_assert_int_eq(mcr_config_set_table_size(cfg, 1439989), MCR_OK);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &s, &err), MCR_OK);
    mcr_config_free(cfg);
    const char *path = tmp_path("bound.snap");
    ck_assert_int_eq(mcr_snapshot_save(s, path, &err), MCR_OK);
    mcr_snapshot *back = NULL;
    ck_assert_int_eq(mcr_snapshot_load(path, NULL, 0, &back, &err), MCR_OK);
    mcr_snapshot_unref(back);
    mcr_changes *ch = mcr_changes_new(), *down = mcr_changes_new();
    for (int i = 0; i < 10; i++) {
        char id[32];
        snprintf(id, sizeof(id), "10.0.0.%d:11211", i + 1);
        ck_assert_int_eq(mcr_changes_remove(ch, id, NULL), MCR_OK);
        ck_assert_int_eq(mcr_changes_set_state(down, id, MCR_STATE_DOWN, NULL), MCR_OK);
    }
    mcr_snapshot *next = NULL;
    ck_assert_int_eq(mcr_snapshot_apply(s, ch, &next, &err), MCR_ERR_RANGE);
    ck_assert_msg(strstr(err.message, "for 50 servers is above the limit") != NULL, "%s",
                  err.message);
    ck_assert_ptr_null(next);
    ck_assert_int_eq(mcr_snapshot_apply(s, down, &next, &err), MCR_OK);
    mcr_snapshot_unref(next);
    mcr_changes_free(ch);
    mcr_changes_free(down);
    mcr_snapshot_unref(s);
}
END_TEST

START_TEST(epoch_monotonic)
{
    mcr_snapshot *s = small_snapshot(1);
    mcr_changes *ch = mcr_changes_new();
    mcr_error err;
    char id[32];
    for (int i = 0; i < 50; i++) {
        mcr_changes_reset(ch);
        snprintf(id, sizeof(id), "n%d", i);
        mcr_server_desc d = {.id = id, .host = "10.7.7.7", .port = 1000 + i, .weight = 1,
                             .state = MCR_STATE_ACTIVE};
        ck_assert_int_eq(mcr_changes_add(ch, &d, &err), MCR_OK);
        if (i > 0) {
            snprintf(id, sizeof(id), "n%d", i - 1);
            ck_assert_int_eq(mcr_changes_set_weight(ch, id, 2, &err), MCR_OK);
        }
        mcr_snapshot *n = apply_ok(s, ch);
        ck_assert_uint_eq(mcr_snapshot_epoch(n), (uint64_t)i + 2);
        mcr_snapshot_unref(s);
        s = n;
    }
    ck_assert_uint_eq(mcr_snapshot_server_count(s), 52);
    mcr_changes_free(ch);
    mcr_snapshot_unref(s);
}
END_TEST

/* ------------------------------------------------------------ configs */

START_TEST(config_desc_and_server_file)
{
    mcr_config *cfg = mcr_config_new();
    mcr_error err;
    mcr_server_desc d = {.id = "x", .host = "10.0.0.1", .port = 11211, .weight = 1, .zone = "",
                         .state = MCR_STATE_ACTIVE};
    ck_assert_int_eq(mcr_config_add_server_desc(cfg, &d, &err), MCR_OK);
    d.host = "10.0.0.2";
    ck_assert_int_eq(mcr_config_add_server_desc(cfg, &d, &err), MCR_ERR_DUPLICATE);
    ck_assert_ptr_nonnull(strstr(err.message, "\"x\""));
    d.id = "10.0.0.3:11211"; /* the default id of a later server */
    ck_assert_int_eq(mcr_config_add_server_desc(cfg, &d, &err), MCR_OK);
    d = (mcr_server_desc){.host = "10.0.0.3", .port = 11211, .weight = 1,
                          .state = MCR_STATE_ACTIVE};
    ck_assert_int_eq(mcr_config_add_server_desc(cfg, &d, &err), MCR_ERR_DUPLICATE);
    d.state = MCR_STATE_DOWN;
    ck_assert_int_eq(mcr_config_add_server_desc(cfg, &d, &err), MCR_ERR_INVALID);
    d.state = MCR_STATE_ACTIVE;
    d.host = "10.0.0.4";
    d.zone = "a\x7f";
    ck_assert_int_eq(mcr_config_add_server_desc(cfg, &d, &err), MCR_ERR_SYNTAX);
    d.zone = NULL;
    d.id = "";
    ck_assert_int_eq(mcr_config_add_server_desc(cfg, &d, &err), MCR_ERR_SYNTAX);
    ck_assert_int_eq(mcr_config_add_server_desc(NULL, &d, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_config_add_server_desc(cfg, NULL, &err), MCR_ERR_INVALID);
    ck_assert_uint_eq(mcr_config_server_count(cfg), 2);

    /* Server files: both syntaxes, attributes in any order. */
    const char *path = tmp_path("servers.txt");
    const char *text = "# pool\n"
                       "10.1.0.1:11211:3\n"
                       "10.1.0.2 weight=2 zone=rack-a id=beta\n"
                       "  10.1.0.3:11300   id=gamma zone=rack-b   # comment\n"
                       "[::1]:11211 zone=rack-a\n"
                       "10.1.0.5\n";
    tu_write_file(path, text, strlen(text));
    mcr_config_free(cfg);
    cfg = mcr_config_new();
    int rc = mcr_config_load_server_file(cfg, path, &err);
    ck_assert_msg(rc == MCR_OK, "%s", err.message);
    ck_assert_uint_eq(mcr_config_server_count(cfg), 5);
    mcr_snapshot *s = snap_of(cfg, 1);
    ck_assert_int_eq(mcr_snapshot_server(s, 0, &d), MCR_OK);
    ck_assert_str_eq(d.id, "10.1.0.1:11211");
    ck_assert_uint_eq(d.weight, 3);
    ck_assert_ptr_null(d.zone);
    ck_assert_int_eq(mcr_snapshot_server(s, 1, &d), MCR_OK);
    ck_assert_str_eq(d.id, "beta");
    ck_assert_uint_eq(d.weight, 2);
    ck_assert_str_eq(d.zone, "rack-a");
    ck_assert_int_eq(mcr_snapshot_server(s, 2, &d), MCR_OK);
    ck_assert_str_eq(d.id, "gamma");
    ck_assert_int_eq(d.port, 11300);
    ck_assert_str_eq(d.zone, "rack-b");
    ck_assert_int_eq(mcr_snapshot_server(s, 3, &d), MCR_OK);
    ck_assert_str_eq(d.id, "[::1]:11211");
    ck_assert_uint_eq(mcr_snapshot_server_zone(s, 3), mcr_snapshot_server_zone(s, 1));
    ck_assert_uint_eq(mcr_snapshot_zone_count(s), 2);
    mcr_snapshot_unref(s);

    /* Errors name the file, the line and the problem; nothing is added. */
    struct {
        const char *line;
        int code;
        const char *msg;
    } bad[] = {
        {"10.2.0.1 colour=red\n", MCR_ERR_SYNTAX, "unknown attribute \"colour\""},
        {"10.2.0.1:11211:2 weight=3\n", MCR_ERR_SYNTAX, "weight given twice"},
        {"10.2.0.1 weight=2 weight=3\n", MCR_ERR_SYNTAX, "weight given twice"},
        {"10.2.0.1 zone=a zone=b\n", MCR_ERR_SYNTAX, "zone given twice"},
        {"10.2.0.1 id=a id=b\n", MCR_ERR_SYNTAX, "id given twice"},
        {"10.2.0.1 weight=x\n", MCR_ERR_SYNTAX, "not a number"},
        {"10.2.0.1 weight=0\n", MCR_ERR_RANGE, "outside"},
        {"10.2.0.1 weight=\n", MCR_ERR_SYNTAX, "not a number"},
        {"10.2.0.1 zone=\n", MCR_ERR_SYNTAX, "empty zone"},
        {"10.2.0.1 id=\n", MCR_ERR_SYNTAX, "empty id"},
        {"10.2.0.1 extra\n", MCR_ERR_SYNTAX, "not an attribute"},
        {"10.2.0.1 id=beta\n", MCR_ERR_DUPLICATE, "beta"},
        {"10.2.0.1 id=10.1.0.5:11211\n", MCR_ERR_DUPLICATE, "10.1.0.5:11211"},
        {"10.1.0.1:11211 zone=q\n", MCR_ERR_DUPLICATE, "duplicate server"},
        {"10.2.0.1:0\n", MCR_ERR_RANGE, "port"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char buf[256];
        snprintf(buf, sizeof(buf), "10.2.0.9\n%s", bad[i].line);
        tu_write_file(tmp_path("bad.txt"), buf, strlen(buf));
        rc = mcr_config_load_server_file(cfg, tmp_path("bad.txt"), &err);
        ck_assert_msg(rc == bad[i].code, "%s: %d %s", bad[i].line, rc, err.message);
        ck_assert_msg(strstr(err.message, bad[i].msg) != NULL, "%s: %s", bad[i].line,
                      err.message);
        ck_assert_msg(strstr(err.message, "bad.txt line 2") != NULL, "%s", err.message);
        ck_assert_uint_eq(mcr_config_server_count(cfg), 5);
    }
    mcr_config_free(cfg);
}
END_TEST

static Suite *snapshot_files_suite(void)
{
    Suite *s = suite_create("snapshot_files");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, save_load_round_trip);
    tcase_add_test(tc, long_host_derived_id_round_trip);
    tcase_add_test(tc, text_parse_in_memory);
    tcase_add_test(tc, corrupted_truncated_stale_refused);
    tcase_add_test(tc, forged_files_refused);
    tcase_add_test(tc, forged_huge_table_refused_fast);
    tcase_add_test(tc, maglev_table_bound);
    tcase_add_test(tc, epoch_monotonic);
    tcase_add_test(tc, config_desc_and_server_file);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    make_keys();
    tmpdir = tu_tmpdir("snapshot-files-test");
    int rc = tu_run(snapshot_files_suite());
    tu_tmpdir_free(tmpdir);
    return rc;
}
