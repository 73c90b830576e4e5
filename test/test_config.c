/* SPDX-License-Identifier: BSD-3-Clause */
/* test_config.c: Check suite of the config: server list and file parsing, bad input, sorting, names. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "placement/placement_internal.h"
#include "mcroute.h"
#include "mcroute_ketama.h"
#include "mcroute_fleet.h"
#include "mcroute_migrate.h"
#include "mcroute_pool.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"
#include "mcroute_twemproxy.h"
#include "testutil.h"

/* Expect `list` to fail with `code` and a message containing `needle`, and
 * leave the config as it was. */
static void expect_bad(const char *list, int code, const char *needle)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    ck_assert_int_eq(mcr_config_add_servers(cfg, "keep:1", NULL), MCR_OK);
    memset(&err, 0, sizeof(err));
    int rc = mcr_config_add_servers(cfg, list, &err);
    ck_assert_msg(rc == code, "list \"%.60s\": got %d (%s), want %d", list, rc, err.message, code);
    ck_assert_int_eq(err.code, code);
    ck_assert_msg(strstr(err.message, needle) != NULL, "list \"%.60s\": message \"%s\" lacks \"%s\"",
                  list, err.message, needle);
    ck_assert_uint_eq(mcr_config_server_count(cfg), 1);
    mcr_config_free(cfg);
}

START_TEST(parse_good_lists)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    int rc = mcr_config_add_servers(
        cfg, "a, b:1, c:2:3 ,10.0.0.1:65535:1000000,[::1],[fe80::1]:11212,[::2]:5:6", &err);
    ck_assert_msg(rc == MCR_OK, "%s", err.message);
    ck_assert_uint_eq(mcr_config_server_count(cfg), 7);
    const struct { const char *host; int port; uint32_t w; } want[] = {
        {"a", 11211, 1}, {"b", 1, 1}, {"c", 2, 3}, {"10.0.0.1", 65535, 1000000},
        {"::1", 11211, 1}, {"fe80::1", 11212, 1}, {"::2", 5, 6}};
    mcr_ring *ring = NULL;
    ck_assert_int_eq(mcr_ring_new(cfg, &ring, NULL), MCR_OK);
    for (int i = 0; i < 7; i++) {
        ck_assert_str_eq(mcr_ring_server_host(ring, (size_t)i), want[i].host);
        ck_assert_int_eq(mcr_ring_server_port(ring, (size_t)i), want[i].port);
        ck_assert_uint_eq(mcr_ring_server_weight(ring, (size_t)i), want[i].w);
    }
    ck_assert_str_eq(mcr_ring_server_name(ring, 0), "a:11211");
    ck_assert_str_eq(mcr_ring_server_name(ring, 5), "[fe80::1]:11212");
    mcr_ring_free(ring);
    /* the same host on another port is a different server */
    ck_assert_int_eq(mcr_config_add_servers(cfg, "a:11212", NULL), MCR_OK);
    mcr_config_free(cfg);
}
END_TEST

START_TEST(parse_bad_lists)
{
    char longhost[300];
    memset(longhost, 'h', 256);
    longhost[256] = '\0';
    expect_bad("", MCR_ERR_EMPTY, "empty server list");
    expect_bad("a,,b", MCR_ERR_SYNTAX, "item 2 is empty");
    expect_bad("a,", MCR_ERR_SYNTAX, "empty");
    expect_bad(" ", MCR_ERR_SYNTAX, "empty");
    expect_bad("a:0", MCR_ERR_RANGE, "port 0");
    expect_bad("a:65536", MCR_ERR_RANGE, "port 65536");
    expect_bad("a:99999999999999999999", MCR_ERR_RANGE, "port");
    expect_bad("a:http", MCR_ERR_SYNTAX, "port \"http\" is not a number");
    expect_bad("a:", MCR_ERR_SYNTAX, "port");
    expect_bad("a:-1", MCR_ERR_SYNTAX, "port");
    expect_bad("a:1:0", MCR_ERR_RANGE, "weight 0");
    expect_bad("a:1:x", MCR_ERR_SYNTAX, "weight \"x\" is not a number");
    expect_bad("a:1:1.5", MCR_ERR_SYNTAX, "weight");
    expect_bad("a:1:", MCR_ERR_SYNTAX, "weight");
    expect_bad("a:1:2000000", MCR_ERR_RANGE, "weight 2000000");
    expect_bad("x,y,x", MCR_ERR_DUPLICATE, "duplicate server x:11211");
    expect_bad("keep:1", MCR_ERR_DUPLICATE, "keep:1");
    expect_bad("[::1]:5,[::1]:5", MCR_ERR_DUPLICATE, "[::1]:5");
    expect_bad(longhost, MCR_ERR_TOO_LONG, "longer than 255");
    expect_bad("::1", MCR_ERR_SYNTAX, "IPv6");
    expect_bad("[::1", MCR_ERR_SYNTAX, "without ']'");
    expect_bad("[::1]x", MCR_ERR_SYNTAX, "after ']'");
    expect_bad("[]:1", MCR_ERR_SYNTAX, "empty hostname");
    expect_bad(":11211", MCR_ERR_SYNTAX, "empty hostname");
    expect_bad("a b", MCR_ERR_SYNTAX, "forbidden byte");
    expect_bad("a\x01", MCR_ERR_SYNTAX, "\\x01");
    /* all or nothing: a good item before a bad one is not kept */
    expect_bad("good1,good2,bad:0", MCR_ERR_RANGE, "item 3");
    memset(longhost, 'h', 255);
    longhost[255] = '\0';
    mcr_config *cfg = mcr_config_new();
    ck_assert_int_eq(mcr_config_add_servers(cfg, longhost, NULL), MCR_OK);
    mcr_config_free(cfg);
}
END_TEST

START_TEST(add_server_checks)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    ck_assert_int_eq(mcr_config_add_server(cfg, "h", 11211, 1, &err), MCR_OK);
    ck_assert_int_eq(mcr_config_add_server(cfg, "h", 11211, 1, &err), MCR_ERR_DUPLICATE);
    ck_assert_int_eq(mcr_config_add_server(cfg, "h", 0, 1, &err), MCR_ERR_RANGE);
    ck_assert_int_eq(mcr_config_add_server(cfg, "h", 70000, 1, &err), MCR_ERR_RANGE);
    ck_assert_int_eq(mcr_config_add_server(cfg, "h", 1, 0, &err), MCR_ERR_RANGE);
    ck_assert_int_eq(mcr_config_add_server(cfg, "", 1, 1, &err), MCR_ERR_SYNTAX);
    ck_assert_int_eq(mcr_config_add_server(cfg, NULL, 1, 1, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_config_add_server(NULL, "h", 1, 1, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_config_add_server(cfg, "fe80::2", 1, 1, &err), MCR_OK);
    ck_assert_uint_eq(mcr_config_server_count(cfg), 2);
    ck_assert_int_eq(mcr_config_set_mode(cfg, MCR_MODE_COUNT), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_config_set_hash(cfg, MCR_HASH_COUNT), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_config_set_point_hash(cfg, (mcr_hash)-1), MCR_ERR_INVALID);
    mcr_config_free(cfg);
    mcr_config_free(NULL);
}
END_TEST

/* Structs that grow (mcroute.h): a reserved area that is not zero is
 * refused where a caller fills the struct; the library zeroes it where it
 * fills one. */
/* Structs that grow (mcroute.h): each ends with its reserved area, and
 * none changes size (the amd64 sizes of 0.4: a new field must come out of
 * the reserved area; changing a size here is an ABI break). */
#define END(t) (offsetof(t, reserved) + sizeof(((t *)0)->reserved))
START_TEST(struct_sizes)
{
    static const struct {
        const char *name;
        size_t size, amd64;
        size_t end; /* where the reserved area ends */
    } t[] = {
        {"mcr_server_desc", sizeof(mcr_server_desc), 72, END(mcr_server_desc)},
        {"mcr_route", sizeof(mcr_route), 304, END(mcr_route)},
        {"mcr_local_state", sizeof(mcr_local_state), 64, END(mcr_local_state)},
        {"mcr_router_migration", sizeof(mcr_router_migration), 72, END(mcr_router_migration)},
        {"mcr_watch_options", sizeof(mcr_watch_options), 88, END(mcr_watch_options)},
        {"mcr_diff_arc", sizeof(mcr_diff_arc), 56, END(mcr_diff_arc)},
        {"mcr_diff_pair", sizeof(mcr_diff_pair), 56, END(mcr_diff_pair)},
        {"mcr_pool_options", sizeof(mcr_pool_options), 144, END(mcr_pool_options)},
        {"mcr_request", sizeof(mcr_request), 112, END(mcr_request)},
        {"mcr_owned_result", sizeof(mcr_owned_result), 600, END(mcr_owned_result)},
        {"mcr_server_stats", sizeof(mcr_server_stats), 776, END(mcr_server_stats)},
        {"mcr_fleet_options", sizeof(mcr_fleet_options), 104, END(mcr_fleet_options)},
        {"mcr_fleet_follow_options", sizeof(mcr_fleet_follow_options), 120,
         END(mcr_fleet_follow_options)},
        {"mcr_fleet_client", sizeof(mcr_fleet_client), 144, END(mcr_fleet_client)},
        {"mcr_fleet_stats", sizeof(mcr_fleet_stats), 192, END(mcr_fleet_stats)},
        {"mcr_migration", sizeof(mcr_migration), 504, END(mcr_migration)},
        {"mcr_migration_progress", sizeof(mcr_migration_progress), 88,
         END(mcr_migration_progress)},
        {"mcr_migrate_options", sizeof(mcr_migrate_options), 128, END(mcr_migrate_options)},
        {"mcr_migrate_source", sizeof(mcr_migrate_source), 904, END(mcr_migrate_source)},
        {"mcr_migrate_report", sizeof(mcr_migrate_report), 464, END(mcr_migrate_report)},
        {"mcr_twem_server", sizeof(mcr_twem_server), 72, END(mcr_twem_server)},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        ck_assert_msg(t[i].end == t[i].size, "%s: the reserved area is not at its end",
                      t[i].name);
#if defined(__x86_64__) && defined(__LP64__)
        ck_assert_msg(t[i].size == t[i].amd64, "%s: %zu bytes, not %zu (an ABI break)",
                      t[i].name, t[i].size, t[i].amd64);
#endif
    }
}
END_TEST

START_TEST(reserved_areas)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    mcr_server_desc d = {.host = "10.0.0.1", .port = 11211, .weight = 1,
                         .state = MCR_STATE_ACTIVE};
    d.reserved[3] = 1;
    ck_assert_int_eq(mcr_config_add_server_desc(cfg, &d, &err), MCR_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "mcr_server_desc: the reserved area is not zero"));
    mcr_changes *ch = mcr_changes_new();
    ck_assert_int_eq(mcr_changes_add(ch, &d, &err), MCR_ERR_INVALID);
    ck_assert_uint_eq(mcr_changes_count(ch), 0);
    d.reserved[3] = 0;
    ck_assert_int_eq(mcr_config_add_server_desc(cfg, &d, &err), MCR_OK);
    ck_assert_int_eq(mcr_config_add_server(cfg, "10.0.0.2", 11211, 1, &err), MCR_OK);
    mcr_snapshot *a = NULL, *b = NULL;
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &a, &err), MCR_OK);
    mcr_server_desc out;
    memset(&out, 0xa5, sizeof(out));
    ck_assert_int_eq(mcr_snapshot_server(a, 0, &out), MCR_OK);
    ck_assert(mcr_test_zeroed(out.reserved, sizeof(out.reserved)));
    /* a description read from a snapshot goes back in as it is */
    ck_assert_int_eq(mcr_changes_add(ch, &(mcr_server_desc){.host = "10.0.0.3", .port = 1,
                                                           .weight = 1,
                                                           .state = MCR_STATE_ACTIVE},
                                     &err),
                     MCR_OK);
    ck_assert_int_eq(mcr_snapshot_apply(a, ch, &b, &err), MCR_OK);
    mcr_diff *df = NULL;
    ck_assert_int_eq(mcr_diff_new(a, b, &df, &err), MCR_OK);
    ck_assert_uint_gt(mcr_diff_arc_count(df), 0);
    mcr_diff_arc arc;
    mcr_diff_pair pair;
    memset(&arc, 0xa5, sizeof(arc));
    memset(&pair, 0xa5, sizeof(pair));
    ck_assert_int_eq(mcr_diff_arc_get(df, 0, &arc), MCR_OK);
    ck_assert_int_eq(mcr_diff_pair_get(df, 0, &pair), MCR_OK);
    ck_assert(mcr_test_zeroed(arc.reserved, sizeof(arc.reserved)));
    ck_assert(mcr_test_zeroed(pair.reserved, sizeof(pair.reserved)));
    mcr_diff_free(df);
    mcr_snapshot_unref(a);
    mcr_snapshot_unref(b);
    mcr_changes_free(ch);
    mcr_config_free(cfg);
}
END_TEST

static char *write_file(const char *text)
{
    return tu_temp_file("test-servers", text, strlen(text));
}

START_TEST(server_files)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    char *p = write_file("# cache tier\n\n  a:1:2  \nb # trailing comment\r\n\t[::1]:3\n");
    ck_assert_int_eq(mcr_config_load_server_file(cfg, p, &err), MCR_OK);
    ck_assert_uint_eq(mcr_config_server_count(cfg), 3);
    tu_temp_file_free(p);

    p = write_file("d:1\ne:2\nf:0\n");
    ck_assert_int_eq(mcr_config_load_server_file(cfg, p, &err), MCR_ERR_RANGE);
    ck_assert_msg(strstr(err.message, "line 3") != NULL, "%s", err.message);
    ck_assert_uint_eq(mcr_config_server_count(cfg), 3); /* all or nothing */
    tu_temp_file_free(p);

    p = write_file("# nothing\n\n");
    ck_assert_int_eq(mcr_config_load_server_file(cfg, p, &err), MCR_ERR_EMPTY);
    tu_temp_file_free(p);

    p = write_file("x\ny\nx\n");
    ck_assert_int_eq(mcr_config_load_server_file(cfg, p, &err), MCR_ERR_DUPLICATE);
    ck_assert_msg(strstr(err.message, "line 3") != NULL, "%s", err.message);
    tu_temp_file_free(p);

    ck_assert_int_eq(mcr_config_load_server_file(cfg, "/nonexistent/servers", &err), MCR_ERR_IO);
    ck_assert(strstr(err.message, "/nonexistent/servers") != NULL);
    ck_assert_uint_eq(mcr_config_server_count(cfg), 3);
    mcr_config_free(cfg);
}
END_TEST

/* mcr_config_add_server_line: one line of a server file, its grammar and
 * messages; the server it adds is the one the file gives. */
START_TEST(server_lines)
{
    static const char *const lines[] = {
        "10.0.0.7:11211 weight=2 zone=b id=cache7", "  a:1:3  # a comment", "[::1]:5 id=six",
        "b zone=z", "c\tweight=4\r",
    };
    mcr_error err;
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        mcr_config *a = mcr_config_new(), *b = mcr_config_new();
        mcr_snapshot *sa = NULL, *sb = NULL;
        char *p = write_file(lines[i]);
        ck_assert_msg(mcr_config_add_server_line(a, lines[i], &err) == MCR_OK, "\"%s\": %s",
                      lines[i], err.message);
        ck_assert_int_eq(mcr_config_load_server_file(b, p, &err), MCR_OK);
        tu_temp_file_free(p);
        ck_assert_uint_eq(mcr_config_server_count(a), 1);
        ck_assert_int_eq(mcr_snapshot_new(a, 1, &sa, NULL), MCR_OK);
        ck_assert_int_eq(mcr_snapshot_new(b, 1, &sb, NULL), MCR_OK);
        ck_assert_msg(strcmp(mcr_snapshot_checksum(sa), mcr_snapshot_checksum(sb)) == 0,
                      "\"%s\" is not the server the file line gives", lines[i]);
        mcr_snapshot_unref(sa);
        mcr_snapshot_unref(sb);
        mcr_config_free(a);
        mcr_config_free(b);
    }
    static const struct {
        const char *line;
        int code;
        const char *needle;
    } bad[] = {
        {"", MCR_ERR_EMPTY, "server line: no server"},
        {"  # only a comment", MCR_ERR_EMPTY, "no server"},
        {"a\nb", MCR_ERR_SYNTAX, "newline"},
        {"d weight=0", MCR_ERR_RANGE, "server line: weight 0"},
        {"d:1:2 weight=3", MCR_ERR_SYNTAX, "server line: weight given twice"},
        {"d up=1", MCR_ERR_SYNTAX, "unknown attribute \"up\""},
        {"d zone", MCR_ERR_SYNTAX, "is not an attribute"},
        {"keep:1", MCR_ERR_DUPLICATE, "duplicate server"},
        {"e id=k", MCR_ERR_DUPLICATE, "duplicate server id"},
        {"::1", MCR_ERR_SYNTAX, "server line"},
    };
    mcr_config *cfg = mcr_config_new();
    ck_assert_int_eq(mcr_config_add_server_line(cfg, "keep:1 id=k", NULL), MCR_OK);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&err, 0, sizeof(err));
        int rc = mcr_config_add_server_line(cfg, bad[i].line, &err);
        ck_assert_msg(rc == bad[i].code, "\"%s\": %d (%s), want %d", bad[i].line, rc,
                      err.message, bad[i].code);
        ck_assert_msg(strstr(err.message, bad[i].needle) != NULL, "\"%s\": \"%s\" lacks \"%s\"",
                      bad[i].line, err.message, bad[i].needle);
        ck_assert_uint_eq(mcr_config_server_count(cfg), 1);
    }
    ck_assert_int_eq(mcr_config_add_server_line(NULL, "a", &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_config_add_server_line(cfg, NULL, NULL), MCR_ERR_INVALID);
    mcr_config_free(cfg);
}
END_TEST

START_TEST(duplicate_set_survives_rollback_and_sort)
{
    mcr_config *cfg = mcr_config_new();
    char host[32];
    for (int i = 0; i < 3000; i++) { /* many servers: the set grows */
        snprintf(host, sizeof(host), "h%d", i);
        ck_assert_int_eq(mcr_config_add_server(cfg, host, 11211, 1, NULL), MCR_OK);
    }
    /* a failed list leaves no trace: its good items can be added afterwards */
    ck_assert_int_eq(mcr_config_add_servers(cfg, "new1,new2,h7", NULL), MCR_ERR_DUPLICATE);
    ck_assert_int_eq(mcr_config_add_servers(cfg, "new1,new2", NULL), MCR_OK);
    ck_assert_int_eq(mcr_config_sort_servers(cfg), MCR_OK);
    for (int i = 0; i < 3000; i += 7) {
        snprintf(host, sizeof(host), "h%d", i);
        ck_assert_int_eq(mcr_config_add_server(cfg, host, 11211, 1, NULL), MCR_ERR_DUPLICATE);
        ck_assert_int_eq(mcr_config_add_server(cfg, host, 11212 + i, 1, NULL), MCR_OK);
    }
    ck_assert_int_eq(mcr_config_add_server(cfg, "new2", 11211, 1, NULL), MCR_ERR_DUPLICATE);
    mcr_config_free(cfg);
}
END_TEST

START_TEST(ids_after_ketama_file)
{
    /* the id set follows servers read from a libketama file (it once kept
     * the list from before the load, so their ids escaped the check) */
    char *p = write_file("10.0.0.1:11211\t100\ncache-b\t100\n");
    mcr_config *cfg = mcr_config_new();
    mcr_error err;
    ck_assert_int_eq(mcr_config_add_servers(cfg, "first:1", NULL), MCR_OK);
    ck_assert_int_eq(mcr_ketama_load_file(cfg, p, &err), MCR_OK);
    mcr_server_desc d = {.id = "cache-b", .host = "10.9.9.9", .port = 1, .weight = 1};
    ck_assert_int_eq(mcr_config_add_server_desc(cfg, &d, &err), MCR_ERR_DUPLICATE);
    d.id = "10.0.0.1:11211";
    ck_assert_int_eq(mcr_config_add_server_desc(cfg, &d, &err), MCR_ERR_DUPLICATE);
    d.id = "first:1";
    ck_assert_int_eq(mcr_config_add_server_desc(cfg, &d, &err), MCR_ERR_DUPLICATE);
    d.id = "fresh";
    ck_assert_int_eq(mcr_config_add_server_desc(cfg, &d, &err), MCR_OK);
    ck_assert_uint_eq(mcr_config_server_count(cfg), 4);
    mcr_config_free(cfg);
    tu_temp_file_free(p);
}
END_TEST

/* Loading a ketama file keeps what the servers already in the config have:
 * ids, zones, and so replicas over zones (the load once re-added them
 * without their zones). */
START_TEST(zones_after_ketama_file)
{
    char *p = write_file("10.0.0.1:11211\t100\ncache-b\t100\n");
    mcr_config *cfg = mcr_config_new();
    mcr_error err;
    const char *zones[] = {"rack-a", "rack-a", "rack-b"};
    for (int i = 0; i < 3; i++) {
        char id[16], host[16];
        snprintf(id, sizeof(id), "z%d", i);
        snprintf(host, sizeof(host), "10.1.0.%d", i + 1);
        mcr_server_desc d = {.id = id, .host = host, .port = 11211, .weight = 1 + i,
                             .zone = zones[i]};
        ck_assert_int_eq(mcr_config_add_server_desc(cfg, &d, &err), MCR_OK);
    }
    ck_assert_int_eq(mcr_ketama_load_file(cfg, p, &err), MCR_OK);
    ck_assert_uint_eq(mcr_config_server_count(cfg), 5);
    mcr_snapshot *snap = NULL;
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &snap, &err), MCR_OK);
    for (int i = 0; i < 3; i++) {
        mcr_server_desc d;
        char host[16];
        snprintf(host, sizeof(host), "10.1.0.%d", i + 1);
        ck_assert_int_eq(mcr_snapshot_server(snap, (size_t)i, &d), MCR_OK);
        ck_assert_ptr_nonnull(d.zone);
        ck_assert_str_eq(d.zone, zones[i]);
        ck_assert_str_eq(d.host, host);
        ck_assert_uint_eq(d.weight, (unsigned)(1 + i));
        ck_assert_int_eq(d.state, MCR_STATE_ACTIVE);
        char id[16];
        snprintf(id, sizeof(id), "z%d", i);
        ck_assert_str_eq(d.id, id);
    }
    for (size_t i = 3; i < 5; i++) {
        mcr_server_desc d;
        ck_assert_int_eq(mcr_snapshot_server(snap, i, &d), MCR_OK);
        ck_assert_msg(d.zone == NULL || d.zone[0] == '\0', "server %zu: zone %s", i, d.zone);
    }
    /* the failure domains replicas are spread over */
    ck_assert_uint_eq(mcr_snapshot_zone_count(snap), 2);
    mcr_snapshot_unref(snap);
    mcr_config_free(cfg);
    tu_temp_file_free(p);
}
END_TEST

START_TEST(sort_hosts_order)
{
    mcr_config *cfg = mcr_config_new();
    ck_assert_int_eq(mcr_config_add_servers(cfg, "b:2,a:9,b:1,A:5,ab:1", NULL), MCR_OK);
    ck_assert_int_eq(mcr_config_sort_servers(cfg), MCR_OK);
    mcr_ring *ring = NULL;
    ck_assert_int_eq(mcr_ring_new(cfg, &ring, NULL), MCR_OK);
    const char *want[] = {"A:5", "a:9", "ab:1", "b:1", "b:2"};
    for (size_t i = 0; i < 5; i++)
        ck_assert_str_eq(mcr_ring_server_name(ring, i), want[i]);
    mcr_ring_free(ring);
    mcr_config_free(cfg);
}
END_TEST

START_TEST(mode_names)
{
    for (int m = 0; m < MCR_MODE_COUNT; m++) {
        mcr_mode out;
        const char *n = mcr_mode_name((mcr_mode)m);
        ck_assert_ptr_nonnull(n);
        ck_assert_int_eq(mcr_mode_from_name(n, &out), MCR_OK);
        ck_assert_int_eq(out, m);
    }
    mcr_mode out = MCR_MODE_MODULA;
    ck_assert_int_eq(mcr_mode_from_name("KETAMA", &out), MCR_OK);
    ck_assert_int_eq(out, MCR_MODE_KETAMA);
    ck_assert_int_eq(mcr_mode_from_name("ring", &out), MCR_ERR_UNKNOWN);
    ck_assert_int_eq(mcr_mode_from_name(NULL, &out), MCR_ERR_INVALID);
    ck_assert_ptr_null(mcr_mode_name(MCR_MODE_COUNT));
    ck_assert_str_eq(mcr_strerror(MCR_ERR_DUPLICATE), "duplicate server");
    ck_assert_str_eq(mcr_strerror(12345), "unknown error");
    /* Every code has its own name: MCR_ERR_SYSTEM is the last. */
    for (int c = MCR_OK; c >= MCR_ERR_SYSTEM; c--) {
        ck_assert_str_ne(mcr_strerror(c), "unknown error");
        for (int d = c - 1; d >= MCR_ERR_SYSTEM; d--)
            ck_assert_str_ne(mcr_strerror(c), mcr_strerror(d));
    }
    ck_assert_str_eq(mcr_strerror(MCR_ERR_SYSTEM - 1), "unknown error");
    ck_assert_str_eq(mcr_strerror(MCR_ERR_SYSTEM), "system error");
    ck_assert_str_eq(mcr_strerror(MCR_ERR_CORRUPT), "corrupt snapshot file");
}
END_TEST

/* Each mode's default key hash, the client's (mcroute.h says why), and a
 * config that follows its mode until a hash is set. */
START_TEST(mode_default_hashes)
{
    static const mcr_hash want[MCR_MODE_COUNT] = {
        [MCR_MODE_KETAMA] = MCR_HASH_MD5,
        [MCR_MODE_CONSISTENT] = MCR_HASH_DEFAULT,
        [MCR_MODE_WEIGHTED] = MCR_HASH_MD5,
        [MCR_MODE_SPY] = MCR_HASH_DEFAULT,
        [MCR_MODE_SPY_WEIGHTED] = MCR_HASH_MD5,
        [MCR_MODE_MODULA] = MCR_HASH_DEFAULT,
        [MCR_MODE_TWEMPROXY_KETAMA] = MCR_HASH_FNV1A_64,
        [MCR_MODE_TWEMPROXY_MODULA] = MCR_HASH_FNV1A_64,
        [MCR_MODE_STABLE_KETAMA] = MCR_HASH_MD5,
        [MCR_MODE_JUMP] = MCR_HASH_MD5,
        [MCR_MODE_RENDEZVOUS] = MCR_HASH_MD5,
        [MCR_MODE_MAGLEV] = MCR_HASH_MD5,
        [MCR_MODE_SLOTS] = MCR_HASH_MD5,
        [MCR_MODE_BOUNDED] = MCR_HASH_MD5,
        [MCR_MODE_PYMEMCACHE] = MCR_HASH_MD5, /* unused */
        [MCR_MODE_BUCKETS] = MCR_HASH_CRC,
        [MCR_MODE_SPYMEMCACHED] = MCR_HASH_MD5,
        [MCR_MODE_SPYMEMCACHED_LIBMEMCACHED] = MCR_HASH_MD5,
        [MCR_MODE_DALLI] = MCR_HASH_CRC32A,
        [MCR_MODE_HASHRING] = MCR_HASH_MD5,
        [MCR_MODE_NGINX_CONSISTENT] = MCR_HASH_CRC32A,
        [MCR_MODE_PHP_MEMCACHE] = MCR_HASH_CRC32A,
        [MCR_MODE_MEMCACHED_PROXY_JUMP] = MCR_HASH_MD5, /* unused */
        [MCR_MODE_MCROUTER_CH3] = MCR_HASH_MD5,         /* unused */
        [MCR_MODE_ENVOY_MAGLEV] = MCR_HASH_MD5,         /* unused */
        [MCR_MODE_ENVOY_RING_HASH] = MCR_HASH_MD5,      /* unused */
        [MCR_MODE_MEMCACHED_PROXY_RING_KETAMA] = MCR_HASH_MD5,
        [MCR_MODE_MCROUTER_WCH3] = MCR_HASH_MD5,        /* unused */
    };
    for (int m = 0; m < MCR_MODE_COUNT; m++) {
        ck_assert_int_eq(mcr_mode_default_hash((mcr_mode)m), want[m]);
        mcr_config *cfg = mcr_config_new();
        ck_assert_int_eq(cfg->key_hash, MCR_HASH_MD5); /* ketama's */
        ck_assert_int_eq(mcr_config_set_mode(cfg, (mcr_mode)m), MCR_OK);
        ck_assert_int_eq(cfg->key_hash, want[m]);
        ck_assert_int_eq(cfg->point_hash, want[m]);
        /* a hash set is kept, before or after the mode */
        ck_assert_int_eq(mcr_config_set_hash(cfg, MCR_HASH_CRC), MCR_OK);
        ck_assert_int_eq(mcr_config_set_mode(cfg, MCR_MODE_TWEMPROXY_KETAMA), MCR_OK);
        ck_assert_int_eq(mcr_config_set_mode(cfg, (mcr_mode)m), MCR_OK);
        ck_assert_int_eq(cfg->key_hash, MCR_HASH_CRC);
        mcr_config_free(cfg);
    }
    /* a point hash set apart is not moved by the mode */
    mcr_config *cfg = mcr_config_new();
    ck_assert_int_eq(mcr_config_set_point_hash(cfg, MCR_HASH_HSIEH), MCR_OK);
    ck_assert_int_eq(mcr_config_set_mode(cfg, MCR_MODE_CONSISTENT), MCR_OK);
    ck_assert_int_eq(cfg->key_hash, MCR_HASH_DEFAULT);
    ck_assert_int_eq(cfg->point_hash, MCR_HASH_HSIEH);
    mcr_config_free(cfg);
    ck_assert_int_eq(mcr_mode_default_hash(MCR_MODE_COUNT), MCR_HASH_COUNT);
    ck_assert_int_eq(mcr_mode_default_hash((mcr_mode)-1), MCR_HASH_COUNT);
}
END_TEST

/* The generated <mcroute_version.h> agrees with itself and with the library:
 * the hex number and the string are the three numbers, and the functions
 * return what the macros say (this suite links the library it was built
 * with). */
START_TEST(version_numbers)
{
    char buf[64];
    snprintf(buf, sizeof(buf), "%d.%d.%d", MCR_VERSION_MAJOR, MCR_VERSION_MINOR,
             MCR_VERSION_PATCH);
    ck_assert_str_eq(buf, MCR_VERSION_STRING);
    ck_assert_uint_eq((unsigned)MCR_VERSION_HEX,
                      ((unsigned)MCR_VERSION_MAJOR << 16) |
                          ((unsigned)MCR_VERSION_MINOR << 8) | (unsigned)MCR_VERSION_PATCH);
    ck_assert_uint_le(MCR_VERSION_MINOR, 255);
    ck_assert_uint_le(MCR_VERSION_PATCH, 255);
    ck_assert_uint_eq(mcr_version(), MCR_VERSION_HEX);
    ck_assert_str_eq(mcr_version_string(), MCR_VERSION_STRING);
    ck_assert_ptr_eq(mcr_version_string(), mcr_version_string());
}
END_TEST

static Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, parse_good_lists);
    tcase_add_test(tc, parse_bad_lists);
    tcase_add_test(tc, add_server_checks);
    tcase_add_test(tc, reserved_areas);
    tcase_add_test(tc, struct_sizes);
    tcase_add_test(tc, server_files);
    tcase_add_test(tc, server_lines);
    tcase_add_test(tc, duplicate_set_survives_rollback_and_sort);
    tcase_add_test(tc, ids_after_ketama_file);
    tcase_add_test(tc, zones_after_ketama_file);
    tcase_add_test(tc, sort_hosts_order);
    tcase_add_test(tc, mode_names);
    tcase_add_test(tc, mode_default_hashes);
    tcase_add_test(tc, version_numbers);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(config_suite());
}
