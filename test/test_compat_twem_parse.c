/* SPDX-License-Identifier: BSD-3-Clause */
/* test_compat_twem_parse.c: nutcracker configurations without a server: parsing, errors and refusals (checked with `nutcracker -t`), key rules, crc16, the fixed vectors and pool options. */
/*
 * The bad-input tests run each file through `nutcracker -t` too, so what
 * mcroute refuses or accepts is checked against what nutcracker does
 * (`nutcracker -t` checks the file and exits: no server is started). The
 * placement against a running nutcracker and memcached is
 * test_compat_twemproxy.c's.
 *
 * Environment: MCR_TEST_KEEP=1 keeps the temporary directory (the files
 * given to `nutcracker -t`).
 */
#include <stdio.h>
#include <string.h>

#include "mcroute_twemproxy.h"
/* mcr_pool_options, and the pool's ranges (includes mcroute_pool.h). */
#include "mcroute_pool.h"
#include "realserver.h"
#include "test_compat_twem_util.h"
#include "testutil.h"

/* ================================================================== helpers */

static bool contains(const char *hay, const char *needle)
{
    return hay != NULL && strstr(hay, needle) != NULL;
}

static mcr_twem *load_ok(const char *yaml)
{
    mcr_twem *t = NULL;
    mcr_error e;
    int rc = mcr_twem_load_buffer(yaml, strlen(yaml), "t.yml", &t, &e);
    ck_assert_msg(rc == MCR_OK, "load failed (%d): %s\n--- yaml:\n%s", rc, e.message, yaml);
    return t;
}

static int write_file(const char *path, const char *text)
{
    tu_write_file(path, text, strlen(text));
    return 0;
}

/* `nutcracker -t -c path`: 0 when it accepts the file, 1 when it refuses. */
static int nutcracker_test_conf(const char *path)
{
    char *argv[] = {(char *)rs_nutcracker_path(), "-t", "-c", (char *)path, NULL};
    return rs_run(argv, 10000);
}

/* ================================================================== parsing */

/* The example of nutcracker's README (conf/nutcracker.yml), with omega's
 * socket and a named beta. */
static const char *const readme_yaml =
    "alpha:\n"
    "  listen: 127.0.0.1:22121\n"
    "  hash: fnv1a_64\n"
    "  distribution: ketama\n"
    "  auto_eject_hosts: true\n"
    "  redis: true\n"
    "  server_retry_timeout: 2000\n"
    "  server_failure_limit: 1\n"
    "  servers:\n"
    "   - 127.0.0.1:6379:1\n"
    "\n"
    "beta:\n"
    "  listen: 127.0.0.1:22122\n"
    "  hash: fnv1a_64\n"
    "  hash_tag: \"{}\"\n"
    "  distribution: ketama\n"
    "  auto_eject_hosts: false\n"
    "  timeout: 400\n"
    "  redis: true\n"
    "  servers:\n"
    "   - 127.0.0.1:6380:1 server1\n"
    "   - 127.0.0.1:6381:1 server2\n"
    "   - 127.0.0.1:6382:1 server3\n"
    "   - 127.0.0.1:6383:1 server4\n"
    "\n"
    "gamma:\n"
    "  listen: 127.0.0.1:22123\n"
    "  hash: fnv1a_64\n"
    "  distribution: ketama\n"
    "  timeout: 400\n"
    "  backlog: 1024\n"
    "  preconnect: true\n"
    "  auto_eject_hosts: true\n"
    "  server_retry_timeout: 2000\n"
    "  server_failure_limit: 3\n"
    "  servers:\n"
    "   - 127.0.0.1:11212:1\n"
    "   - 127.0.0.1:11213:1\n"
    "\n"
    "omega:\n"
    "  listen: /tmp/gamma 0666\n"
    "  hash: hsieh\n"
    "  distribution: ketama\n"
    "  auto_eject_hosts: false\n"
    "  servers:\n"
    "   - 127.0.0.1:11214:100000\n"
    "   - 127.0.0.1:11215:1\n";

START_TEST(test_readme_example)
{
    mcr_twem *t = load_ok(readme_yaml);
    int64_t v;
    size_t idx;
    mcr_error e;

    ck_assert_uint_eq(mcr_twem_pool_count(t), 4);
    ck_assert_str_eq(mcr_twem_source(t), "t.yml");
    ck_assert_str_eq(mcr_twem_pool_name(t, 0), "alpha");
    ck_assert_str_eq(mcr_twem_pool_name(t, 3), "omega");
    ck_assert_ptr_null(mcr_twem_pool_name(t, 4));
    ck_assert_int_eq(mcr_twem_pool_index(t, "gamma", &idx, &e), MCR_OK);
    ck_assert_uint_eq(idx, 2);

    /* alpha: written values, and defaults. */
    ck_assert_int_eq(mcr_twem_pool_option(t, 0, MCR_TWEM_SERVER_RETRY_TIMEOUT, &v), MCR_OK);
    ck_assert_int_eq(v, 2000);
    ck_assert_int_eq(mcr_twem_pool_is_set(t, 0, MCR_TWEM_SERVER_RETRY_TIMEOUT), 1);
    mcr_twem_pool_option(t, 0, MCR_TWEM_REDIS, &v);
    ck_assert_int_eq(v, 1);
    mcr_twem_pool_option(t, 0, MCR_TWEM_AUTO_EJECT_HOSTS, &v);
    ck_assert_int_eq(v, 1);
    mcr_twem_pool_option(t, 0, MCR_TWEM_TIMEOUT, &v);
    ck_assert_int_eq(v, -1);
    ck_assert_int_eq(mcr_twem_pool_is_set(t, 0, MCR_TWEM_TIMEOUT), 0);
    mcr_twem_pool_option(t, 0, MCR_TWEM_BACKLOG, &v);
    ck_assert_int_eq(v, 512);
    mcr_twem_pool_option(t, 0, MCR_TWEM_SERVER_CONNECTIONS, &v);
    ck_assert_int_eq(v, 1);
    mcr_twem_pool_option(t, 0, MCR_TWEM_LISTEN_PORT, &v);
    ck_assert_int_eq(v, 22121);
    mcr_twem_pool_option(t, 0, MCR_TWEM_LISTEN_PERM, &v);
    ck_assert_int_eq(v, -1);
    mcr_twem_pool_option(t, 0, MCR_TWEM_HASH, &v);
    ck_assert_int_eq(v, MCR_HASH_FNV1A_64);
    ck_assert_str_eq(mcr_twem_pool_text(t, 0, MCR_TWEM_LISTEN), "127.0.0.1:22121");
    ck_assert_str_eq(mcr_twem_pool_text(t, 0, MCR_TWEM_LISTEN_HOST), "127.0.0.1");
    ck_assert_ptr_null(mcr_twem_pool_text(t, 0, MCR_TWEM_HASH_TAG));

    /* beta: tag, timeout, names. */
    ck_assert_str_eq(mcr_twem_pool_text(t, 1, MCR_TWEM_HASH_TAG), "{}");
    mcr_twem_pool_option(t, 1, MCR_TWEM_TIMEOUT, &v);
    ck_assert_int_eq(v, 400);
    ck_assert_uint_eq(mcr_twem_server_count(t, 1), 4);
    mcr_twem_server s;
    ck_assert_int_eq(mcr_twem_server_get(t, 1, 2, &s), MCR_OK);
    ck_assert_str_eq(s.host, "127.0.0.1");
    ck_assert_int_eq(s.port, 6382);
    ck_assert_str_eq(s.name, "server3");
    ck_assert_str_eq(s.ketama_name, "server3");
    ck_assert_uint_eq(s.line, 23);

    /* omega: a unix listen socket with permissions, hsieh, big weight. */
    ck_assert_str_eq(mcr_twem_pool_text(t, 3, MCR_TWEM_LISTEN), "/tmp/gamma 0666");
    ck_assert_str_eq(mcr_twem_pool_text(t, 3, MCR_TWEM_LISTEN_HOST), "/tmp/gamma");
    mcr_twem_pool_option(t, 3, MCR_TWEM_LISTEN_PORT, &v);
    ck_assert_int_eq(v, 0);
    mcr_twem_pool_option(t, 3, MCR_TWEM_LISTEN_PERM, &v);
    ck_assert_int_eq(v, 0666);
    ck_assert_str_eq(mcr_twem_pool_text(t, 3, MCR_TWEM_HASH_NAME), "hsieh");
    ck_assert_int_eq(mcr_twem_server_get(t, 3, 0, &s), MCR_OK);
    ck_assert_uint_eq(s.weight, 100000);
    ck_assert_ptr_null(s.name);
    ck_assert_str_eq(s.ketama_name, "127.0.0.1:11214");

    /* Every pool builds a ring, with the ring's names as configured. */
    for (size_t p = 0; p < 4; p++) {
        mcr_ring *r = NULL;
        ck_assert_int_eq(mcr_twem_ring(t, p, &r, &e), MCR_OK);
        ck_assert_uint_eq(mcr_ring_server_count(r), mcr_twem_server_count(t, p));
        ck_assert_int_eq(mcr_ring_mode(r), MCR_MODE_TWEMPROXY_KETAMA);
        mcr_ring_free(r);
    }
    mcr_ring *r = NULL;
    mcr_twem_ring(t, 1, &r, &e);
    ck_assert_str_eq(mcr_ring_server_name(r, 0), "127.0.0.1:6380");
    ck_assert_int_eq(mcr_ring_key_hash(r), MCR_HASH_FNV1A_64);
    mcr_ring_free(r);
    mcr_twem_free(t);
}
END_TEST

START_TEST(test_defaults_and_options)
{
    mcr_twem *t = load_ok("p:\n"
                          "  listen: 0.0.0.0:22121\n"
                          "  servers:\n"
                          "   - 10.0.0.1:11211:1\n"
                          "q:\n"
                          "  listen: \"[::]:1\"\n"
                          "  hash: one_at_a_time\n"
                          "  distribution: modula\n"
                          "  timeout: '0400'\n"
                          "  backlog: 0\n"
                          "  client_connections: 7\n"
                          "  redis: true\n"
                          "  redis_auth: ~\n"
                          "  redis_db: 3\n"
                          "  preconnect: false\n"
                          "  auto_eject_hosts: true\n"
                          "  server_connections: 2\n"
                          "  server_retry_timeout: 5\n"
                          "  server_failure_limit: 0\n"
                          "  tcpkeepalive: true\n"
                          "  hash_tag: $$\n"
                          "  servers:\n"
                          "   - ::1:11211:3\n");
    static const int64_t want_p[MCR_TWEM_OPTION_COUNT] = {
        MCR_HASH_FNV1A_64, MCR_TWEM_DIST_KETAMA, -1, 512, 0, 0, 0, 0, 0, 1, 30000, 2, 0,
        22121, -1};
    static const int64_t want_q[MCR_TWEM_OPTION_COUNT] = {
        MCR_HASH_DEFAULT, MCR_TWEM_DIST_MODULA, 400, 0, 7, 1, 3, 0, 1, 2, 5, 0, 1, 1, -1};
    for (int o = 0; o < MCR_TWEM_OPTION_COUNT; o++) {
        int64_t v = 12345;
        ck_assert_int_eq(mcr_twem_pool_option(t, 0, (mcr_twem_option)o, &v), MCR_OK);
        ck_assert_msg(v == want_p[o], "p option %d: %lld", o, (long long)v);
        ck_assert_int_eq(mcr_twem_pool_is_set(t, 0, (mcr_twem_option)o),
                         o == MCR_TWEM_LISTEN_PORT);
        ck_assert_int_eq(mcr_twem_pool_option(t, 1, (mcr_twem_option)o, &v), MCR_OK);
        ck_assert_msg(v == want_q[o], "q option %d: %lld", o, (long long)v);
        ck_assert_int_eq(mcr_twem_pool_is_set(t, 1, (mcr_twem_option)o),
                         o != MCR_TWEM_LISTEN_PERM);
    }
    ck_assert_str_eq(mcr_twem_pool_text(t, 0, MCR_TWEM_HASH_NAME), "fnv1a_64");
    ck_assert_str_eq(mcr_twem_pool_text(t, 0, MCR_TWEM_DISTRIBUTION_NAME), "ketama");
    ck_assert_ptr_null(mcr_twem_pool_text(t, 0, MCR_TWEM_REDIS_AUTH));
    ck_assert_str_eq(mcr_twem_pool_text(t, 1, MCR_TWEM_REDIS_AUTH), "~"); /* raw text */
    ck_assert_str_eq(mcr_twem_pool_text(t, 1, MCR_TWEM_HASH_TAG), "$$");
    ck_assert_str_eq(mcr_twem_pool_text(t, 1, MCR_TWEM_LISTEN_HOST), "[::]");
    ck_assert_str_eq(mcr_twem_pool_text(t, 1, MCR_TWEM_DISTRIBUTION_NAME), "modula");

    /* IPv6 server split from the end; its ketama name has no brackets. */
    mcr_twem_server s;
    ck_assert_int_eq(mcr_twem_server_get(t, 1, 0, &s), MCR_OK);
    ck_assert_str_eq(s.host, "::1");
    ck_assert_int_eq(s.port, 11211);
    ck_assert_uint_eq(s.weight, 3);
    ck_assert_str_eq(s.ketama_name, "::1");
    mcr_ring *r = NULL;
    mcr_error e;
    ck_assert_int_eq(mcr_twem_ring(t, 1, &r, &e), MCR_OK);
    ck_assert_str_eq(mcr_ring_server_name(r, 0), "[::1]:11211");
    ck_assert_int_eq(mcr_ring_mode(r), MCR_MODE_TWEMPROXY_MODULA);
    mcr_ring_free(r);

    /* Out of range and NULL. */
    int64_t v = 99;
    ck_assert_int_eq(mcr_twem_pool_option(t, 2, MCR_TWEM_TIMEOUT, &v), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_twem_pool_option(t, 0, MCR_TWEM_OPTION_COUNT, &v), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_twem_pool_option(NULL, 0, MCR_TWEM_TIMEOUT, &v), MCR_ERR_INVALID);
    ck_assert_int_eq(v, 99);
    ck_assert_ptr_null(mcr_twem_pool_text(t, 0, MCR_TWEM_TEXT_COUNT));
    ck_assert_ptr_null(mcr_twem_pool_text(NULL, 0, MCR_TWEM_LISTEN));
    ck_assert_uint_eq(mcr_twem_server_count(t, 9), 0);
    ck_assert_int_eq(mcr_twem_server_get(t, 0, 1, &s), MCR_ERR_INVALID);
    ck_assert_uint_eq(mcr_twem_pool_count(NULL), 0);
    ck_assert_ptr_null(mcr_twem_source(NULL));
    mcr_twem_free(t);
    mcr_twem_free(NULL);
}
END_TEST

/* nutcracker's order: by ketama name, shorter first, then bytes. */
START_TEST(test_server_order)
{
    mcr_twem *t = load_ok("p:\n"
                          "  listen: 127.0.0.1:22121\n"
                          "  distribution: modula\n"
                          "  servers:\n"
                          "   - 10.0.0.10:11211:1\n"          /* 10.0.0.10 (9) */
                          "   - 10.0.0.2:11212:1\n"           /* 10.0.0.2:11212 (14) */
                          "   - 10.0.0.9:11211:2\n"           /* 10.0.0.9 (8) */
                          "   - 10.0.0.3:11211:1 zz\n"        /* zz (2) */
                          "   - 10.0.0.4:11211:1 b\n"         /* b (1) */
                          "   - 10.0.0.5:11211:1 Zz\n"        /* Zz (2), 'Z' < 'z' */
                          "   - 10.0.0.11:11211:1\n");        /* 10.0.0.11 (9) */
    static const char *const want[] = {"10.0.0.4:11211",  "10.0.0.5:11211",  "10.0.0.3:11211",
                                       "10.0.0.9:11211",  "10.0.0.10:11211", "10.0.0.11:11211",
                                       "10.0.0.2:11212"};
    mcr_ring *r = NULL;
    mcr_error e;
    ck_assert_int_eq(mcr_twem_ring(t, 0, &r, &e), MCR_OK);
    ck_assert_uint_eq(mcr_ring_server_count(r), 7);
    for (size_t i = 0; i < 7; i++) {
        ck_assert_str_eq(mcr_ring_server_name(r, i), want[i]);
        mcr_twem_server s;
        mcr_twem_server_get(t, 0, i, &s);
        char hp[64];
        snprintf(hp, sizeof(hp), "%s:%d", s.host, s.port);
        ck_assert_str_eq(hp, want[i]);
    }
    ck_assert_uint_eq(mcr_ring_server_weight(r, 3), 2);
    /* modula: 8 entries, entry 4 is the second copy of 10.0.0.9. */
    ck_assert_uint_eq(mcr_ring_find(r, 4), 3);
    ck_assert_uint_eq(mcr_ring_find(r, 5), 4);
    ck_assert_uint_eq(mcr_ring_find(r, 8 + 7), 6);
    mcr_ring_free(r);

    /* The config: the same order, the name as the label. */
    mcr_config *cfg = NULL;
    ck_assert_int_eq(mcr_twem_config(t, 0, &cfg, &e), MCR_OK);
    ck_assert_uint_eq(mcr_config_server_count(cfg), 7);
    mcr_config_free(cfg);
    mcr_twem_free(t);
}
END_TEST

/* Files that nutcracker refuses (nut = 1) or accepts (nut = 0), and what
 * mcr_twem_load_buffer says: the code, "t.yml:LINE:COL: " (line 0: no
 * position) and a part of the problem. */
typedef struct bad_case {
    const char *yaml;
    int nut;
    int code;
    int line, col;
    const char *says;
} bad_case;

#define POOL_HEAD "a:\n  listen: 127.0.0.1:22121\n"
#define ONE_SERVER "  servers:\n   - 127.0.0.1:11211:1\n"

static const bad_case bad_cases[] = {
    /* Not YAML. */
    {POOL_HEAD " servers: [\n", 1, MCR_ERR_SYNTAX, 3, 2, "not YAML"},
    {"a:\n  listen: \"127.0.0.1:22121\n", 1, MCR_ERR_SYNTAX, 3, 1, "not YAML"},
    {"a:\n\tlisten: 1\n", 1, MCR_ERR_SYNTAX, 2, 1, "not YAML"},
    /* Server lines. */
    {POOL_HEAD "  servers:\n   - 127.0.0.1:11211\n", 1, MCR_ERR_SYNTAX, 4, 6,
     "server \"127.0.0.1:11211\" is not \"host:port:weight [name]\""},
    {POOL_HEAD "  servers:\n   - 127.0.0.1\n", 1, MCR_ERR_SYNTAX, 4, 6, "is not \"host:port"},
    {POOL_HEAD "  servers:\n   - 127.0.0.1:11211:1\n   - 127.0.0.2:11211:0\n", 1, MCR_ERR_RANGE,
     5, 6, "server \"127.0.0.2:11211:0\": a weight of 0"},
    {POOL_HEAD "  servers:\n   - 127.0.0.1:11211:x\n", 1, MCR_ERR_SYNTAX, 4, 6,
     "the weight is not a number"},
    {POOL_HEAD "  servers:\n   - 127.0.0.1:11211:+1\n", 1, MCR_ERR_SYNTAX, 4, 6,
     "the weight is not a number"},
    {POOL_HEAD "  servers:\n   - '127.0.0.1:11211:'\n", 1, MCR_ERR_SYNTAX, 4, 6,
     "the weight is not a number"},
    {POOL_HEAD "  servers:\n   - 127.0.0.1:11211:1  two-spaces\n", 1, MCR_ERR_SYNTAX, 4, 6,
     "the weight is not a number (the name is what follows the last space)"},
    {POOL_HEAD "  servers:\n   - 127.0.0.1:11211:1 a name\n", 1, MCR_ERR_SYNTAX, 4, 6,
     "the weight is not a number"},
    {POOL_HEAD "  servers:\n   - 127.0.0.1:0:1\n", 1, MCR_ERR_RANGE, 4, 6,
     "the port is not in 1..65535"},
    {POOL_HEAD "  servers:\n   - 127.0.0.1:70000:1\n", 1, MCR_ERR_RANGE, 4, 6,
     "the port is not in 1..65535"},
    {POOL_HEAD "  servers:\n   - 127.0.0.1::1\n", 1, MCR_ERR_SYNTAX, 4, 6,
     "the port is not a number"},
    {POOL_HEAD "  servers:\n   - 127.0.0.1:-5:1\n", 1, MCR_ERR_SYNTAX, 4, 6,
     "the port is not a number"},
    {POOL_HEAD "  servers:\n   - /tmp/a:b:1\n", 1, MCR_ERR_SYNTAX, 4, 6,
     "nor \"/path:weight [name]\""},
    {POOL_HEAD "  servers:\n   - 5\n", 1, MCR_ERR_SYNTAX, 4, 6, "server \"5\" is not"},
    {POOL_HEAD "  servers:\n   - 127.0.0.1:11211:99999999999\n", 0, MCR_ERR_RANGE, 4, 6,
     "the weight is above 2147483647"},
    /* Hash, distribution, tag, values. */
    {POOL_HEAD "  hash: FNV1A_64\n" ONE_SERVER, 1, MCR_ERR_UNKNOWN, 3, 9,
     "unknown hash \"FNV1A_64\""},
    {POOL_HEAD "  hash: crc\n" ONE_SERVER, 1, MCR_ERR_UNKNOWN, 3, 9, "unknown hash \"crc\""},
    {POOL_HEAD "  hash: murmur3\n" ONE_SERVER, 1, MCR_ERR_UNKNOWN, 3, 9, "unknown hash"},
    {POOL_HEAD "  distribution: consistent\n" ONE_SERVER, 1, MCR_ERR_UNKNOWN, 3, 17,
     "unknown distribution \"consistent\""},
    {POOL_HEAD "  hash_tag: \"{}}\"\n" ONE_SERVER, 1, MCR_ERR_SYNTAX, 3, 13,
     "hash_tag \"{}}\" is not two characters"},
    {POOL_HEAD "  hash_tag: \"{\"\n" ONE_SERVER, 1, MCR_ERR_SYNTAX, 3, 13, "not two characters"},
    {POOL_HEAD "  preconnect: yes\n" ONE_SERVER, 1, MCR_ERR_SYNTAX, 3, 15,
     "preconnect \"yes\" is not \"true\" or \"false\""},
    {POOL_HEAD "  redis: True\n" ONE_SERVER, 1, MCR_ERR_SYNTAX, 3, 10, "is not \"true\""},
    {POOL_HEAD "  timeout: -1\n" ONE_SERVER, 1, MCR_ERR_SYNTAX, 3, 12,
     "timeout \"-1\" is not a number"},
    {POOL_HEAD "  timeout: 1e3\n" ONE_SERVER, 1, MCR_ERR_SYNTAX, 3, 12, "is not a number"},
    {POOL_HEAD "  timeout: 4294967297\n" ONE_SERVER, 0, MCR_ERR_RANGE, 3, 12,
     "timeout \"4294967297\" is above 2147483647"},
    {POOL_HEAD "  hash:\n" ONE_SERVER, 1, MCR_ERR_SYNTAX, 3, 8, "an empty value"},
    {POOL_HEAD "  hash: ''\n" ONE_SERVER, 1, MCR_ERR_SYNTAX, 3, 9, "an empty value"},
    {"'':\n  listen: 127.0.0.1:22121\n" ONE_SERVER, 1, MCR_ERR_SYNTAX, 1, 1, "an empty value"},
    {POOL_HEAD "  server_connections: 0\n" ONE_SERVER, 1, MCR_ERR_RANGE, 3, 23,
     "server_connections cannot be 0"},
    {POOL_HEAD "  redis_auth: secret\n" ONE_SERVER, 1, MCR_ERR_INVALID, 3, 15,
     "redis_auth is only valid in a pool with \"redis: true\""},
    /* Directives. */
    {POOL_HEAD "  foo: 1\n" ONE_SERVER, 1, MCR_ERR_UNKNOWN, 3, 3,
     "pool \"a\": unknown directive \"foo\""},
    {POOL_HEAD "  Hash: md5\n" ONE_SERVER, 1, MCR_ERR_UNKNOWN, 3, 3, "unknown directive \"Hash\""},
    {POOL_HEAD "  reuseport: true\n" ONE_SERVER, 1, MCR_ERR_UNKNOWN, 3, 3,
     "unknown directive \"reuseport\""},
    {POOL_HEAD "  hash: md5\n  hash: md5\n" ONE_SERVER, 1, MCR_ERR_DUPLICATE, 4, 3,
     "directive \"hash\" given twice"},
    {POOL_HEAD "  listen: 127.0.0.1:22122\n" ONE_SERVER, 1, MCR_ERR_DUPLICATE, 3, 3,
     "directive \"listen\" given twice"},
    {"a:\n" ONE_SERVER, 1, MCR_ERR_SYNTAX, 1, 1, "pool \"a\" has no \"listen\" directive"},
    {POOL_HEAD, 1, MCR_ERR_EMPTY, 1, 1, "pool \"a\" has no \"servers\" sequence"},
    {POOL_HEAD "  servers: 127.0.0.1:11211:1\n", 1, MCR_ERR_SYNTAX, 3, 12,
     "\"servers\" must be a sequence"},
    {POOL_HEAD ONE_SERVER "  hash:\n   - md5\n", 1, MCR_ERR_SYNTAX, 6, 4,
     "directive \"hash\" has a sequence"},
    {"a:\n  listen:\n   - 127.0.0.1:22121\n  servers: 127.0.0.1:11211:1\n", 0, MCR_ERR_SYNTAX,
     3, 4, "directive \"listen\" has a sequence"},
    {POOL_HEAD "  x:\n    y: 1\n" ONE_SERVER, 1, MCR_ERR_UNKNOWN, 3, 3,
     "unknown directive \"x\""},
    {POOL_HEAD "  hash:\n    y: 1\n" ONE_SERVER, 1, MCR_ERR_SYNTAX, 4, 5,
     "directive \"hash\" has a mapping"},
    {POOL_HEAD "  servers:\n   - a: 1\n", 1, MCR_ERR_SYNTAX, 4, 6,
     "a mapping in \"servers\""},
    /* Listen. */
    {"a:\n  listen: 127.0.0.1\n" ONE_SERVER, 1, MCR_ERR_SYNTAX, 2, 11,
     "listen \"127.0.0.1\" is not \"host:port\""},
    {"a:\n  listen: 127.0.0.1:0\n" ONE_SERVER, 1, MCR_ERR_RANGE, 2, 11,
     "the port is not in 1..65535"},
    {"a:\n  listen: :22121\n" ONE_SERVER, 1, MCR_ERR_SYNTAX, 2, 11, "empty host"},
    {"a:\n  listen: /tmp/s -1\n" ONE_SERVER, 1, MCR_ERR_RANGE, 2, 11,
     "the permissions are not an octal mode"},
    /* Names and pools. */
    {POOL_HEAD "  servers:\n   - 127.0.0.1:11211:1 x\n   - 127.0.0.2:11212:1 x\n", 1,
     MCR_ERR_DUPLICATE, 5, 6, "a second server named \"x\" (line 4 has it)"},
    {POOL_HEAD "  servers:\n   - 127.0.0.1:11211:1\n   - 127.0.0.1:11211:2\n", 1,
     MCR_ERR_DUPLICATE, 5, 6, "a second server named \"127.0.0.1\""},
    {POOL_HEAD "  servers:\n   - 127.0.0.1:11211:1 10.0.0.1\n   - 10.0.0.1:11211:2\n", 1,
     MCR_ERR_DUPLICATE, 5, 6, "a second server named \"10.0.0.1\""},
    {POOL_HEAD ONE_SERVER "a:\n  listen: 127.0.0.1:22122\n" ONE_SERVER, 1, MCR_ERR_DUPLICATE,
     5, 1, "a second pool named \"a\" (line 1 has it)"},
    {POOL_HEAD ONE_SERVER "b:\n  listen: 127.0.0.1:22121\n" ONE_SERVER, 1, MCR_ERR_DUPLICATE,
     5, 1, "pool \"b\" listens on \"127.0.0.1:22121\" as pool \"a\" (line 1) does"},
    /* YAML features nutcracker refuses, and the document's shape. */
    {"---\n" POOL_HEAD ONE_SERVER, 1, MCR_ERR_SYNTAX, 1, 1, "a document start marker (---)"},
    {POOL_HEAD ONE_SERVER "...\n", 1, MCR_ERR_SYNTAX, 5, 1, "a document end marker (...)"},
    {"%YAML 1.1\n---\n" POOL_HEAD ONE_SERVER, 1, MCR_ERR_SYNTAX, 1, 1, "a YAML directive"},
    {"a:\n  listen: &l 127.0.0.1:22121\n" ONE_SERVER, 1, MCR_ERR_SYNTAX, 2, 11,
     "an anchor (&name)"},
    {"a: &p\n  listen: 127.0.0.1:22121\n" ONE_SERVER "b: *p\n", 1, MCR_ERR_SYNTAX, 1, 4,
     "an anchor"},
    {"a:\n  listen: !!str 127.0.0.1:22121\n" ONE_SERVER, 1, MCR_ERR_SYNTAX, 2, 11,
     "a tag (!name)"},
    {"a: {listen: 127.0.0.1:22121}\n", 1, MCR_ERR_SYNTAX, 1, 4, "a flow mapping ({...})"},
    {POOL_HEAD "  servers: [127.0.0.1:11211:1]\n", 1, MCR_ERR_SYNTAX, 3, 12,
     "a flow sequence ([...])"},
    {POOL_HEAD ONE_SERVER "---\nb: 1\n", 1, MCR_ERR_SYNTAX, 5, 1,
     "a document start marker"},
    {"", 1, MCR_ERR_EMPTY, 0, 0, "t.yml: no pool in the file"},
    {"# nothing but a comment\n", 1, MCR_ERR_EMPTY, 0, 0, "no pool in the file"},
    {"hello\n", 1, MCR_ERR_SYNTAX, 1, 1, "a value where the mapping of pools belongs"},
    {"- a\n", 1, MCR_ERR_SYNTAX, 1, 1, "a sequence where the mapping of pools belongs"},
    {"a: 5\n", 1, MCR_ERR_SYNTAX, 1, 4, "pool \"a\" has a value where its directives"},
    {"a:\n  - x\n", 1, MCR_ERR_SYNTAX, 2, 3, "pool \"a\" has a sequence where"},
    {"? [a]\n: 1\n", 1, MCR_ERR_SYNTAX, 1, 3, "a flow sequence"},
    {POOL_HEAD "  servers:\n   - \"127.0.0.1:11211:1 a\\0b\"\n", 0, MCR_ERR_SYNTAX, 4, 6,
     "a value with a NUL byte"},
};
#define NBAD (sizeof(bad_cases) / sizeof(bad_cases[0]))

START_TEST(test_bad_input)
{
    char path[128];
    int ran_nutcracker = rs_executable(rs_nutcracker_path());

    make_dir();
    snprintf(path, sizeof(path), "%s/t.yml", g_dir);
    ck_assert_msg(ran_nutcracker, "%s not found (Debian package nutcracker)", rs_nutcracker_path());
    for (size_t i = 0; i < NBAD; i++) {
        const bad_case *c = &bad_cases[i];
        mcr_twem *sentinel = (mcr_twem *)&path, *t = sentinel;
        mcr_error e;
        char want[96];

        memset(&e, 0, sizeof(e));
        int rc = mcr_twem_load_buffer(c->yaml, strlen(c->yaml), "t.yml", &t, &e);
        ck_assert_msg(rc == c->code, "case %zu: code %d (%s), want %d\n--- yaml:\n%s", i, rc,
                      e.message, c->code, c->yaml);
        ck_assert_msg(t == sentinel, "case %zu: *out changed on error", i);
        ck_assert_int_eq(e.code, rc);
        if (c->line > 0)
            snprintf(want, sizeof(want), "t.yml:%d:%d: ", c->line, c->col);
        else
            snprintf(want, sizeof(want), "t.yml: ");
        ck_assert_msg(strncmp(e.message, want, strlen(want)) == 0,
                      "case %zu: message \"%s\" does not start with \"%s\"", i, e.message, want);
        ck_assert_msg(contains(e.message, c->says), "case %zu: message \"%s\" lacks \"%s\"", i,
                      e.message, c->says);

        /* The same bytes as a file: same answer; and nutcracker's verdict. */
        ck_assert_int_eq(write_file(path, c->yaml), 0);
        mcr_error e2;
        t = sentinel;
        ck_assert_int_eq(mcr_twem_load(path, &t, &e2), c->code);
        ck_assert_ptr_eq(t, sentinel);
        ck_assert_msg(contains(e2.message, c->says), "case %zu from a file: \"%s\"", i,
                      e2.message);
        int nut = nutcracker_test_conf(path);
        ck_assert_msg(nut == c->nut, "case %zu: nutcracker -t exits %d, the table says %d\n%s", i,
                      nut, c->nut, c->yaml);
    }
    remove_dir();
    printf("bad input: %zu files, each checked with nutcracker -t\n", NBAD);
}
END_TEST

/* Pools nutcracker accepts whose placement mcroute refuses to make up. */
typedef struct cfg_case {
    const char *yaml;
    int code;
    int line;
    const char *says;
} cfg_case;

static const cfg_case cfg_cases[] = {
    {POOL_HEAD "  distribution: random\n" ONE_SERVER, MCR_ERR_UNSUPPORTED, 3,
     "distribution random picks a server at random"},
    {POOL_HEAD "  servers:\n   - 127.0.0.1:11211:1\n   - /tmp/mc.sock:1 s\n", MCR_ERR_UNSUPPORTED,
     5, "server \"/tmp/mc.sock:1 s\" is a unix socket"},
    {POOL_HEAD "  servers:\n   - /tmp/mc.sock:2\n", MCR_ERR_UNSUPPORTED, 4, "is a unix socket"},
    {POOL_HEAD "  servers:\n   - 127.0.0.1:11211:1 a\n   - 127.0.0.1:11211:1 b\n",
     MCR_ERR_DUPLICATE, 5, "has the address of another server of the pool under another name"},
    {POOL_HEAD "  servers:\n   - 127.0.0.1:11211:2000000\n", MCR_ERR_RANGE, 4,
     "weight 2000000"},
    {POOL_HEAD "  servers:\n   - '127.0.0.1:11211:1 '\n", MCR_ERR_UNSUPPORTED, 4,
     "ends with a space, so nutcracker names it \"\""},
    {POOL_HEAD "  servers:\n   - '[::1]:11211:1'\n", MCR_ERR_SYNTAX, 4, "forbidden byte"},
    {POOL_HEAD "  servers:\n   - :11211:1\n", MCR_ERR_SYNTAX, 4, "empty hostname"},
};
#define NCFG (sizeof(cfg_cases) / sizeof(cfg_cases[0]))

START_TEST(test_placement_refused)
{
    char path[128];

    make_dir();
    snprintf(path, sizeof(path), "%s/t.yml", g_dir);
    for (size_t i = 0; i < NCFG; i++) {
        const cfg_case *c = &cfg_cases[i];
        mcr_twem *t = load_ok(c->yaml);
        mcr_config *sentinel = (mcr_config *)&path, *cfg = sentinel;
        mcr_ring *rs = (mcr_ring *)&path, *r = rs;
        mcr_error e;
        char want[32];

        ck_assert_int_eq(mcr_twem_config(t, 0, &cfg, &e), c->code);
        ck_assert_ptr_eq(cfg, sentinel);
        snprintf(want, sizeof(want), "t.yml:%d:", c->line);
        ck_assert_msg(strncmp(e.message, want, strlen(want)) == 0 && contains(e.message, c->says),
                      "case %zu: \"%s\" (want \"%s...%s\")", i, e.message, want, c->says);
        ck_assert_int_eq(mcr_twem_ring(t, 0, &r, &e), c->code);
        ck_assert_ptr_eq(r, rs);
        /* Its directives can still be read. */
        ck_assert_str_eq(mcr_twem_pool_text(t, 0, MCR_TWEM_LISTEN), "127.0.0.1:22121");
        mcr_twem_free(t);
        /* nutcracker accepts every one of these files. */
        ck_assert_int_eq(write_file(path, c->yaml), 0);
        ck_assert_msg(nutcracker_test_conf(path) == 0, "case %zu: nutcracker refuses it", i);
    }
    remove_dir();
}
END_TEST

START_TEST(test_pool_lookup_and_io)
{
    mcr_twem *t = load_ok(readme_yaml), *sentinel = (mcr_twem *)&t, *u = sentinel;
    size_t idx = 77;
    mcr_error e;

    ck_assert_int_eq(mcr_twem_pool_index(t, "delta", &idx, &e), MCR_ERR_UNKNOWN);
    ck_assert_uint_eq(idx, 77);
    ck_assert_str_eq(e.message, "no pool \"delta\" in t.yml; its pools: alpha, beta, gamma, omega");
    ck_assert_int_eq(mcr_twem_pool_index(t, "Alpha", &idx, &e), MCR_ERR_UNKNOWN);
    ck_assert_int_eq(mcr_twem_pool_index(t, NULL, &idx, &e), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_twem_config(t, 4, NULL, &e), MCR_ERR_INVALID);
    mcr_config *cfg = NULL;
    ck_assert_int_eq(mcr_twem_config(t, 4, &cfg, &e), MCR_ERR_INVALID);
    ck_assert(contains(e.message, "pool 4 does not exist"));
    ck_assert_int_eq(mcr_twem_config(NULL, 0, &cfg, &e), MCR_ERR_INVALID);
    ck_assert_ptr_null(cfg);
    mcr_twem_free(t);

    /* Many pools: the list is cut. */
    char yaml[16384];
    size_t n = 0;
    for (int i = 0; i < 40; i++)
        n += (size_t)snprintf(yaml + n, sizeof(yaml) - n,
                              "pool_number_%02d:\n  listen: 127.0.0.1:%d\n" ONE_SERVER, i,
                              30000 + i);
    t = load_ok(yaml);
    ck_assert_uint_eq(mcr_twem_pool_count(t), 40);
    ck_assert_int_eq(mcr_twem_pool_index(t, "x", &idx, &e), MCR_ERR_UNKNOWN);
    ck_assert(contains(e.message, "pool_number_00, pool_number_01"));
    ck_assert(contains(e.message, ", ..."));
    ck_assert_int_eq(mcr_twem_pool_index(t, "pool_number_39", &idx, &e), MCR_OK);
    ck_assert_uint_eq(idx, 39);
    mcr_twem_free(t);

    /* Files. */
    ck_assert_int_eq(mcr_twem_load("/nonexistent/nutcracker.yml", &u, &e), MCR_ERR_IO);
    ck_assert_ptr_eq(u, sentinel);
    ck_assert(contains(e.message, "/nonexistent/nutcracker.yml: No such file"));
    ck_assert_int_eq(mcr_twem_load("/", &u, &e), MCR_ERR_IO);
    ck_assert_int_eq(mcr_twem_load(NULL, &u, &e), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_twem_load_buffer(NULL, 3, NULL, &u, &e), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_twem_load_buffer("", 0, NULL, &u, &e), MCR_ERR_EMPTY);
    ck_assert_str_eq(e.message, "<buffer>: no pool in the file");
    ck_assert_ptr_eq(u, sentinel);
    ck_assert_int_eq(mcr_twem_load("/dev/null", &u, &e), MCR_ERR_EMPTY);
    ck_assert_str_eq(e.message, "/dev/null: no pool in the file");

    /* A buffer need not be NUL-terminated. */
    char raw[256];
    const char *small = POOL_HEAD ONE_SERVER;
    size_t len = strlen(small);
    memcpy(raw, small, len);
    memset(raw + len, 'X', sizeof(raw) - len);
    ck_assert_int_eq(mcr_twem_load_buffer(raw, len, "raw", &u, &e), MCR_OK);
    ck_assert_str_eq(mcr_twem_source(u), "raw");
    mcr_twem_free(u);
}
END_TEST

/* A pool with one server takes every key without hashing; an empty key
 * hashes to 0 (checked against nutcracker in test_live_empty_key); the
 * hash tag narrows the key only when the tag holds something. */
START_TEST(test_key_rules)
{
    mcr_twem *t = load_ok("one:\n  listen: 127.0.0.1:1\n" ONE_SERVER
                          "tag:\n  listen: 127.0.0.1:2\n  hash_tag: \"{}\"\n  hash: md5\n"
                          "  servers:\n   - 10.0.0.1:11211:1\n   - 10.0.0.2:11211:1\n"
                          "   - 10.0.0.3:11211:1\n   - 10.0.0.4:11211:1\n");
    mcr_ring *one = NULL, *tag = NULL;
    mcr_error e;

    ck_assert_int_eq(mcr_twem_ring(t, 0, &one, &e), MCR_OK);
    ck_assert_int_eq(mcr_twem_ring(t, 1, &tag, &e), MCR_OK);
    ck_assert_uint_eq(mcr_ring_locate(one, "anything", 8), 0);
    ck_assert_uint_eq(mcr_ring_hash(tag, "", 0), 0);
    ck_assert_uint_eq(mcr_ring_locate(tag, "", 0), mcr_ring_find(tag, 0));
    ck_assert_uint_eq(mcr_ring_hash(tag, "user:{42}:name", 14),
                      mcr_hash_key(MCR_HASH_MD5, "42", 2));
    ck_assert_uint_eq(mcr_ring_hash(tag, "a{}b", 4), mcr_hash_key(MCR_HASH_MD5, "a{}b", 4));
    ck_assert_uint_eq(mcr_ring_hash(tag, "a{b", 3), mcr_hash_key(MCR_HASH_MD5, "a{b", 3));
    ck_assert_uint_eq(mcr_ring_hash(tag, "}a{b}{c}", 8), mcr_hash_key(MCR_HASH_MD5, "b", 1));
    mcr_ring_free(one);
    mcr_ring_free(tag);
    mcr_twem_free(t);
}
END_TEST

/* mcroute's "crc16" must be nutcracker's (nc_crc16, whose values below
 * nutcracker's placement confirms in test_live_hash): the 16-bit CRC in the
 * low half, the two previous high bytes above it. */
START_TEST(test_crc16_is_nutcrackers)
{
    static const struct {
        const char *key;
        uint32_t hash;
    } v[] = {{"", 0},
             {"a", 0x00007c87},
             {"ab", 0x007c74ff},
             {"123456789", 0x869031c3}, /* low half: XMODEM's check value 0x31c3 */
             {"foo", 0x0c3caf96},
             {"hello world", 0xf2063be4},
             {"\xff\x80", 0x001e9277}};
    size_t bad = 0;
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        size_t len = strlen(v[i].key);
        ck_assert_uint_eq(nc_crc16(v[i].key, len), v[i].hash);
        if (mcr_hash_key(MCR_HASH_CRC16, v[i].key, len) != v[i].hash) {
            bad++;
            fprintf(stderr, "crc16 \"%s\": mcroute 0x%08x, nutcracker 0x%08x\n", v[i].key,
                    (unsigned)mcr_hash_key(MCR_HASH_CRC16, v[i].key, len), (unsigned)v[i].hash);
        }
    }
    ck_assert_msg(bad == 0, "mcroute's crc16 differs from nutcracker's on %zu of %zu keys", bad,
                  sizeof(v) / sizeof(v[0]));
}
END_TEST

/* ================================================================== vectors */

/* The fixed vector pools (test_compat_twem_util.c) placed by mcroute. */
START_TEST(test_vectors)
{
    static const char *const hp[3] = {"192.0.2.1:11211", "192.0.2.2:11211", "192.0.2.3:11300"};
    char yaml[1024];
    size_t bad = 0;

    ck_assert_uint_ge(NVEC_POOLS, 14);
    for (size_t i = 0; i < NVEC_POOLS; i++) {
        vec_pool_yaml(yaml, sizeof(yaml), i, "vec", 22121, hp);
        mcr_twem *t = load_ok(yaml);
        mcr_ring *r = NULL;
        mcr_error e;
        ck_assert_int_eq(mcr_twem_ring(t, 0, &r, &e), MCR_OK);
        for (size_t k = 0; k < NVEC_KEYS; k++) {
            uint32_t s = mcr_ring_locate(r, vec_keys[k], strlen(vec_keys[k]));
            mcr_twem_server srv;
            ck_assert_int_eq(mcr_twem_server_get(t, 0, s, &srv), MCR_OK);
            if (strcmp(srv.name, v_want(i, k)) != 0) {
                bad++;
                fprintf(stderr, "vector %s %s%s: key \"%s\" on %s, nutcracker puts it on %s\n",
                        vec_pools[i].hash, vec_pools[i].dist, vec_pools[i].tag ? " tag" : "",
                        vec_keys[k], srv.name, v_want(i, k));
            }
        }
        mcr_ring_free(r);
        mcr_twem_free(t);
    }
    ck_assert_msg(bad == 0, "%zu of %zu vector placements differ from nutcracker's", bad,
                  NVEC_POOLS * NVEC_KEYS);
}
END_TEST

/* ================================================================== pool options */

/* Options with every field set to a value no directive gives, to see which
 * fields mcr_twem_fill_pool_options() writes and which it leaves. */
static mcr_pool_options sentinel_options(void)
{
    mcr_pool_options o;
    memset(&o, 0, sizeof(o));
    o.connections = 63;
    o.eager = 7;
    o.connect_timeout_ms = 11;
    o.request_timeout_ms = 12;
    o.policy = MCR_POLICY_FAILOVER;
    o.server_failure_limit = 999;
    o.retry_timeout_ms = 13;
    o.retry_max_ms = 14;
    o.max_value_size = 15;
    o.key_prefix = "keep:";
    o.protocol = MCR_PROTO_META;
    o.max_in_flight = 16;
    o.no_coalesce = 1;
    return o;
}

/* The fields the function must not touch kept their sentinel values. */
static void assert_untouched_fields(const mcr_pool_options *o)
{
    ck_assert_uint_eq(o->retry_max_ms, 14);
    ck_assert_uint_eq(o->max_value_size, 15);
    ck_assert_str_eq(o->key_prefix, "keep:");
    ck_assert_int_eq(o->protocol, MCR_PROTO_META);
    ck_assert_uint_eq(o->max_in_flight, 16);
    ck_assert_int_eq(o->no_coalesce, 1);
}

/* Without directives: nutcracker's defaults, mapped. */
START_TEST(test_pool_options_defaults)
{
    mcr_twem *t = load_ok("p:\n"
                          "  listen: 127.0.0.1:22121\n"
                          "  servers:\n"
                          "   - 10.0.0.1:11211:1\n");
    mcr_pool_options o = sentinel_options();
    mcr_error e;
    ck_assert_int_eq(mcr_twem_fill_pool_options(t, 0, &o, &e), MCR_OK);
    ck_assert_uint_eq(o.connections, 1);      /* server_connections: 1 */
    ck_assert_int_eq(o.eager, 0);             /* preconnect: false */
    ck_assert_uint_eq(o.connect_timeout_ms, 0); /* timeout: forever -> the pool's default */
    ck_assert_uint_eq(o.request_timeout_ms, 0);
    ck_assert_int_eq(o.policy, MCR_POLICY_FAIL_FAST); /* auto_eject_hosts: false */
    ck_assert_uint_eq(o.server_failure_limit, 2);
    ck_assert_uint_eq(o.retry_timeout_ms, 30000);
    assert_untouched_fields(&o);
    mcr_twem_free(t);
}
END_TEST

/* Every mapped directive written, and the values the pool cannot take as
 * they are (0 means "default" to a pool). */
START_TEST(test_pool_options_written)
{
    mcr_twem *t = load_ok("gamma:\n"
                          "  listen: 127.0.0.1:22123\n"
                          "  timeout: 400\n"
                          "  preconnect: true\n"
                          "  auto_eject_hosts: true\n"
                          "  server_connections: 4\n"
                          "  server_retry_timeout: 2000\n"
                          "  server_failure_limit: 3\n"
                          "  tcpkeepalive: true\n"
                          "  servers:\n"
                          "   - 127.0.0.1:11212:1\n"
                          "zero:\n"
                          "  listen: 127.0.0.1:22124\n"
                          "  timeout: 0\n"
                          "  server_retry_timeout: 0\n"
                          "  server_failure_limit: 0\n"
                          "  auto_eject_hosts: false\n"
                          "  preconnect: false\n"
                          "  servers:\n"
                          "   - 127.0.0.1:11212:1\n"
                          "edge:\n"
                          "  listen: 127.0.0.1:22125\n"
                          "  timeout: 86400000\n"
                          "  server_retry_timeout: 86400000\n"
                          "  server_failure_limit: 1000\n"
                          "  server_connections: 64\n"
                          "  servers:\n"
                          "   - 127.0.0.1:11212:1\n");
    mcr_pool_options o = sentinel_options();
    mcr_error e;

    ck_assert_int_eq(mcr_twem_fill_pool_options(t, 0, &o, &e), MCR_OK);
    ck_assert_uint_eq(o.connections, 4);
    ck_assert_int_eq(o.eager, 1);
    ck_assert_uint_eq(o.connect_timeout_ms, 400);
    ck_assert_uint_eq(o.request_timeout_ms, 400);
    ck_assert_int_eq(o.policy, MCR_POLICY_EJECT);
    ck_assert_uint_eq(o.server_failure_limit, 3);
    ck_assert_uint_eq(o.retry_timeout_ms, 2000);
    assert_untouched_fields(&o);

    /* 0: forever (timeout), retry at once (1 ms), eject at the first
     * failure (1); written "false" is the same as the default. */
    o = sentinel_options();
    ck_assert_int_eq(mcr_twem_fill_pool_options(t, 1, &o, &e), MCR_OK);
    ck_assert_uint_eq(o.connections, 1);
    ck_assert_int_eq(o.eager, 0);
    ck_assert_uint_eq(o.connect_timeout_ms, 0);
    ck_assert_uint_eq(o.request_timeout_ms, 0);
    ck_assert_int_eq(o.policy, MCR_POLICY_FAIL_FAST);
    ck_assert_uint_eq(o.server_failure_limit, 1);
    ck_assert_uint_eq(o.retry_timeout_ms, 1);
    assert_untouched_fields(&o);

    /* The largest values the pool takes. */
    o = sentinel_options();
    ck_assert_int_eq(mcr_twem_fill_pool_options(t, 2, &o, &e), MCR_OK);
    ck_assert_uint_eq(o.connections, MCR_POOL_CONNECTIONS_MAX);
    ck_assert_uint_eq(o.connect_timeout_ms, MCR_POOL_TIMEOUT_MAX_MS);
    ck_assert_uint_eq(o.request_timeout_ms, MCR_POOL_TIMEOUT_MAX_MS);
    ck_assert_uint_eq(o.retry_timeout_ms, MCR_POOL_TIMEOUT_MAX_MS);
    ck_assert_uint_eq(o.server_failure_limit, MCR_POOL_FAILURE_LIMIT_MAX);
    mcr_twem_free(t);
}
END_TEST

/* Refusals leave *opts as it was, and the message names the place. */
static void expect_pool_options_error(const char *yaml, int code, const char *needle1,
                                      const char *needle2)
{
    mcr_twem *t = load_ok(yaml);
    mcr_pool_options o = sentinel_options(), before = o;
    mcr_error e;
    memset(&e, 0, sizeof(e));
    int rc = mcr_twem_fill_pool_options(t, 0, &o, &e);
    ck_assert_msg(rc == code, "got %d (%s), want %d\n--- yaml:\n%s", rc, e.message, code, yaml);
    ck_assert_int_eq(e.code, code);
    ck_assert_msg(contains(e.message, needle1) && contains(e.message, needle2),
                  "message \"%s\" lacks \"%s\" or \"%s\"", e.message, needle1, needle2);
    ck_assert(memcmp(&o, &before, sizeof(o)) == 0);
    mcr_twem_free(t);
}

START_TEST(test_pool_options_refused)
{
    expect_pool_options_error("big:\n  listen: 127.0.0.1:1\n  server_connections: 65\n"
                              "  servers:\n   - a:1:1\n",
                              MCR_ERR_RANGE, "t.yml:3:", "server_connections 65");
    expect_pool_options_error("big:\n  listen: 127.0.0.1:1\n  timeout: 86400001\n"
                              "  servers:\n   - a:1:1\n",
                              MCR_ERR_RANGE, "t.yml:3:", "timeout 86400001");
    expect_pool_options_error("big:\n  listen: 127.0.0.1:1\n  servers:\n   - a:1:1\n"
                              "  server_retry_timeout: 2147483647\n",
                              MCR_ERR_RANGE, "t.yml:5:", "server_retry_timeout 2147483647");
    expect_pool_options_error("big:\n  listen: 127.0.0.1:1\n  server_failure_limit: 1001\n"
                              "  servers:\n   - a:1:1\n",
                              MCR_ERR_RANGE, "pool \"big\"", "server_failure_limit 1001");
    expect_pool_options_error("r:\n  listen: 127.0.0.1:1\n  redis: true\n"
                              "  servers:\n   - a:6379:1\n",
                              MCR_ERR_UNSUPPORTED, "t.yml:3:", "redis");

    /* Arguments. */
    mcr_twem *t = load_ok("p:\n  listen: 127.0.0.1:1\n  servers:\n   - a:1:1\n");
    mcr_pool_options o = sentinel_options(), before = o;
    mcr_error e;
    ck_assert_int_eq(mcr_twem_fill_pool_options(t, 1, &o, &e), MCR_ERR_INVALID);
    ck_assert(contains(e.message, "pool 1"));
    ck_assert_int_eq(mcr_twem_fill_pool_options(NULL, 0, &o, NULL), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_twem_fill_pool_options(t, 0, NULL, NULL), MCR_ERR_INVALID);
    ck_assert(memcmp(&o, &before, sizeof(o)) == 0);
    /* The same mcr_twem still fills options after the refusals. */
    ck_assert_int_eq(mcr_twem_fill_pool_options(t, 0, &o, NULL), MCR_OK);
    mcr_twem_free(t);
}
END_TEST

/* ================================================================== suite */

static Suite *suite(void)
{
    Suite *s = suite_create("compat_twem_parse");
    TCase *tc = tcase_create("parse");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_readme_example);
    tcase_add_test(tc, test_defaults_and_options);
    tcase_add_test(tc, test_server_order);
    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_placement_refused);
    tcase_add_test(tc, test_pool_lookup_and_io);
    tcase_add_test(tc, test_key_rules);
    tcase_add_test(tc, test_crc16_is_nutcrackers);
    tcase_add_test(tc, test_vectors);
    tcase_add_test(tc, test_pool_options_defaults);
    tcase_add_test(tc, test_pool_options_written);
    tcase_add_test(tc, test_pool_options_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
