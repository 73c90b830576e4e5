/* SPDX-License-Identifier: BSD-3-Clause */
/* test_compat_twemproxy.c: nutcracker configurations: parsing, errors, placement against a real nutcracker and memcached. */
/*
 * The live tests start, once for the "live" test case (an unchecked
 * fixture, run in the parent process, so a failing test cannot leave a
 * server behind): memcached servers on several loopback addresses at port
 * 11211 and on 127.0.0.1 at ports the kernel picks, and ONE nutcracker whose
 * generated configuration holds every pool: hundreds of random pools
 * (random subsets and orders of the servers, random weights, with and
 * without names, every hash, both distributions, with and without a hash
 * tag), fixed "vector" pools, and redis pools over sniffer sockets for the
 * empty key. Each random pool gets its own keys (prefixed by the pool's
 * name, so pools sharing a server do not collide), set through nutcracker;
 * then every memcached is asked which keys it holds, and the holder must be
 * the server mcr_ring_locate() names in the ring mcr_twem_ring() builds from
 * the same file.
 *
 * The bad-input tests run each file through `nutcracker -t` too, so what
 * mcroute refuses or accepts is checked against what nutcracker does.
 *
 * Environment: MCR_TEST_SEED changes the pools and keys; MCR_TEST_KEEP=1
 * keeps the temporary directory (configuration and logs);
 * MCR_TWEM_PRINT_VECTORS=1 prints the vector table as observed through
 * nutcracker, in C, to refresh the literals below.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mcroute_twemproxy.h"
/* mcr_pool_options, and the pool's ranges (includes mcroute_pool.h). */
#include "mcroute_pool.h"
#include "realserver.h"
#include "testutil.h"

/* ================================================================== helpers */

#define ERRBUF 512

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

static char *g_dir; /* the suite's temporary directory (tu_tmpdir), or NULL */

static void make_dir(void)
{
    if (g_dir == NULL)
        g_dir = tu_tmpdir("twem");
}

/* With MCR_TEST_KEEP=1, tu_tmpdir_free() keeps it and prints its path. */
static void remove_dir(void)
{
    tu_tmpdir_free(g_dir);
    g_dir = NULL;
}

/* nutcracker 0.5.0's "crc16" (hash_crc16 in src/hashkit/nc_crc16.c), as
 * its placement shows (test_live_hash proves it on every run): the XMODEM
 * table (polynomial 0x1021, initial value 0, MSB first), but the
 * accumulator is a uint32_t that is never cut to 16 bits, so the hash is
 * (hi(x[n-2]) << 24) | (hi(x[n-1]) << 16) | x[n] where x[i] is the 16-bit
 * CRC of the first i bytes and hi(v) = v >> 8: a 32-bit value whose low
 * half is the CRC-16. */
static uint32_t nc_crc16(const void *data, size_t len)
{
    static uint16_t table[256];
    const unsigned char *p = data;
    uint32_t crc = 0;

    if (table[1] == 0)
        for (unsigned i = 0; i < 256; i++) {
            unsigned c = i << 8;
            for (int b = 0; b < 8; b++)
                c = (c & 0x8000) ? (c << 1) ^ 0x1021 : c << 1;
            table[i] = (uint16_t)c;
        }
    for (size_t i = 0; i < len; i++)
        crc = (crc << 8) ^ table[((crc >> 8) ^ p[i]) & 0xff];
    return crc;
}

/* The hash nutcracker computes for `key` in a pool: the tag narrows it, an
 * empty key is 0 (server_pool_hash), and "crc16" is nc_crc16. */
static uint32_t nc_pool_hash(mcr_hash h, const char *tag, const char *key, size_t len)
{
    if (tag != NULL) {
        const char *open = memchr(key, tag[0], len);
        if (open != NULL) {
            const char *close =
                memchr(open + 1, tag[1], len - (size_t)(open + 1 - key));
            if (close != NULL && close - open > 1) {
                key = open + 1;
                len = (size_t)(close - open - 1);
            }
        }
    }
    if (len == 0)
        return 0;
    return h == MCR_HASH_CRC16 ? nc_crc16(key, len) : mcr_hash_key(h, key, len);
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

/* Fixed placements, observed through nutcracker 0.5.0 (test_live_vectors
 * checks them against it on every run): three named servers alpha (weight
 * 1), beta (2) and gamma (1); each pool one hash, ketama; the last pool
 * modula with fnv1a_64. */
static const char *const vec_keys[] = {"foo",       "bar",     "baz",     "qux",
                                       "user:1000", "user:1001", "session:{abc}",
                                       "mcroute",   "twemproxy", "k"};
#define NVEC_KEYS (sizeof(vec_keys) / sizeof(vec_keys[0]))
static const char *const vec_names[] = {"alpha", "beta", "gamma"};
static const uint32_t vec_weights[] = {1, 2, 1};

typedef struct vec_pool {
    const char *hash;
    const char *dist;
    const char *tag;
    const char *want[NVEC_KEYS]; /* the server name of each key */
} vec_pool;

static const vec_pool vec_pools[] = {
    {"one_at_a_time", "ketama", NULL,
     {"alpha", "beta", "gamma", "alpha", "gamma", "beta", "alpha", "beta", "beta", "beta"}},
    {"md5", "ketama", NULL,
     {"beta", "beta", "alpha", "gamma", "beta", "alpha", "beta", "alpha", "gamma", "alpha"}},
    {"crc16", "ketama", NULL,
     {"gamma", "beta", "beta", "gamma", "beta", "beta", "gamma", "gamma", "alpha", "alpha"}},
    {"crc32", "ketama", NULL,
     {"alpha", "alpha", "alpha", "alpha", "alpha", "alpha", "alpha", "alpha", "alpha", "alpha"}},
    {"crc32a", "ketama", NULL,
     {"alpha", "beta", "alpha", "alpha", "alpha", "beta", "gamma", "gamma", "beta", "gamma"}},
    {"fnv1_64", "ketama", NULL,
     {"alpha", "alpha", "alpha", "alpha", "gamma", "gamma", "beta", "gamma", "alpha", "gamma"}},
    {"fnv1a_64", "ketama", NULL,
     {"gamma", "gamma", "gamma", "gamma", "beta", "beta", "gamma", "gamma", "alpha", "gamma"}},
    {"fnv1_32", "ketama", NULL,
     {"beta", "alpha", "alpha", "beta", "alpha", "alpha", "beta", "beta", "beta", "beta"}},
    {"fnv1a_32", "ketama", NULL,
     {"beta", "gamma", "alpha", "alpha", "alpha", "gamma", "gamma", "beta", "beta", "gamma"}},
    {"hsieh", "ketama", NULL,
     {"beta", "beta", "beta", "beta", "beta", "beta", "beta", "beta", "beta", "alpha"}},
    {"murmur", "ketama", NULL,
     {"alpha", "alpha", "gamma", "beta", "gamma", "gamma", "gamma", "beta", "beta", "gamma"}},
    {"jenkins", "ketama", NULL,
     {"gamma", "gamma", "gamma", "beta", "beta", "gamma", "beta", "beta", "beta", "beta"}},
    {"fnv1a_64", "ketama", "{}",
     {"gamma", "gamma", "gamma", "gamma", "beta", "beta", "beta", "gamma", "alpha", "gamma"}},
    {"fnv1a_64", "modula", NULL,
     {"gamma", "alpha", "alpha", "beta", "beta", "alpha", "gamma", "alpha", "alpha", "alpha"}},
};

static const char *v_want(size_t pool, size_t key)
{
    return vec_pools[pool].want[key];
}
#define NVEC_POOLS (sizeof(vec_pools) / sizeof(vec_pools[0]))

/* The YAML of vector pool i, its servers at the given "host:port" texts. */
static size_t vec_pool_yaml(char *out, size_t cap, size_t i, const char *name, int listen_port,
                            const char *const hostports[3])
{
    const vec_pool *v = &vec_pools[i];
    size_t n = (size_t)snprintf(out, cap,
                                "%s:\n  listen: 127.0.0.1:%d\n  hash: %s\n  distribution: %s\n"
                                "  timeout: 5000\n",
                                name, listen_port, v->hash, v->dist);
    if (v->tag != NULL)
        n += (size_t)snprintf(out + n, cap - n, "  hash_tag: \"%s\"\n", v->tag);
    n += (size_t)snprintf(out + n, cap - n, "  servers:\n");
    for (int s = 2; s >= 0; s--) /* file order differs from nutcracker's */
        n += (size_t)snprintf(out + n, cap - n, "   - %s:%u %s\n", hostports[s],
                              (unsigned)vec_weights[s], vec_names[s]);
    return n;
}

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

/* ================================================================== live */

/* Servers: memcached on this many addresses at port 11211, and this many
 * on 127.0.0.1 at ports the kernel picks. */
#define MC_11211 6
#define MC_RANDOM 6
#define MC_MAX (MC_11211 + MC_RANDOM)
/* Random pools (a multiple of 12 hashes x 2 distributions; fewer when the
 * open-file limit is low: nutcracker holds a socket per pool and one per
 * pool and server), keys per pool. */
#define POOLS_MAX 480
#define POOLS_MIN 48
#define KEYS_PER_POOL 250
/* Sniffer sockets (fake redis servers) for the empty key. */
#define SNIFFERS 3
#define EMPTY_POOLS 24
/* Deadlines. */
#define START_MS 10000
#define IO_MS 30000

static const char *const hash_names[12] = {"one_at_a_time", "md5",     "crc16",   "crc32",
                                           "crc32a",        "fnv1_64", "fnv1a_64", "fnv1_32",
                                           "fnv1a_32",      "hsieh",   "murmur",  "jenkins"};

typedef struct gen_pool {
    char name[16];
    int hash;       /* index into hash_names */
    int modula;
    const char *tag; /* NULL, "{}" or "$$" */
    int nsrv;
    int srv[MC_MAX]; /* memcached indices, in file order */
    uint32_t weight[MC_MAX];
    char sname[MC_MAX][24]; /* "" = no name */
    int listen_port;
    int write_hash, write_dist; /* write the defaults explicitly */
} gen_pool;

static struct live {
    bool ok;
    char why[1024];
    char conf[128];
    rs_proc mc[MC_MAX];
    char hostport[MC_MAX][48];
    gen_pool pools[POOLS_MAX];
    int npools;
    int vec_port[32];
    int empty_port[EMPTY_POOLS];
    int empty_hash[EMPTY_POOLS];
    int sniff_fd[SNIFFERS];
    int sniff_port[SNIFFERS];
    char empty_names[EMPTY_POOLS][SNIFFERS][16];
    rs_proc nut;
    mcr_twem *twem;
} L;

static void live_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void live_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(L.why, sizeof(L.why), fmt, ap);
    va_end(ap);
    L.ok = false;
}

/* Start the memcached servers: MC_11211 on 127.0.0.x:11211 (x from 2 on,
 * skipping addresses where 11211 is taken), MC_RANDOM on 127.0.0.1. */
static bool start_memcached(void)
{
    int n = 0, x = 2 + (int)(getpid() % 200);
    char log[160], addr[32];

    for (int tries = 0; n < MC_11211 && tries < 253; tries++, x = x >= 254 ? 2 : x + 1) {
        snprintf(addr, sizeof(addr), "127.0.0.%d", x);
        if (rs_port_free(addr, 11211) != 1)
            continue;
        snprintf(log, sizeof(log), "%s/memcached-%d.log", g_dir, n);
        if (rs_memcached_start(&L.mc[n], addr, 11211, log, START_MS) == 0)
            n++;
    }
    if (n < MC_11211) {
        live_fail("could start memcached on port 11211 of only %d loopback addresses", n);
        return false;
    }
    for (int i = 0; i < MC_RANDOM; i++, n++) {
        snprintf(log, sizeof(log), "%s/memcached-%d.log", g_dir, n);
        if (rs_memcached_start(&L.mc[n], "127.0.0.1", 0, log, START_MS) != 0) {
            live_fail("could not start memcached on 127.0.0.1 (log %s)", log);
            return false;
        }
    }
    for (int i = 0; i < MC_MAX; i++)
        snprintf(L.hostport[i], sizeof(L.hostport[i]), "%s:%d", L.mc[i].addr, L.mc[i].port);
    return true;
}

/* A random server name of 1..12 characters, not clashing with the ketama
 * name of any server already in the pool. */
static void random_name(tu_rng *r, gen_pool *p, int upto, char *out)
{
    static const char alpha[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:";
    for (;;) {
        size_t len = 1 + tu_below(r, 12);
        for (size_t i = 0; i < len; i++)
            out[i] = alpha[tu_below(r, sizeof(alpha) - 1)];
        out[len] = '\0';
        bool clash = out[len - 1] == ':'; /* "name:" would be a YAML key */
        for (int j = 0; j < upto && !clash; j++) {
            const char *kn = p->sname[j][0] ? p->sname[j] : NULL;
            char def[48];
            if (kn == NULL) {
                int m = p->srv[j];
                if (L.mc[m].port == 11211)
                    snprintf(def, sizeof(def), "%s", L.mc[m].addr);
                else
                    snprintf(def, sizeof(def), "%s", L.hostport[m]);
                kn = def;
            }
            clash = strcmp(kn, out) == 0;
        }
        /* Nor the default name of a later server of the pool. */
        for (int j = upto; j < p->nsrv && !clash; j++)
            clash = strcmp(L.hostport[p->srv[j]], out) == 0 ||
                    strcmp(L.mc[p->srv[j]].addr, out) == 0;
        if (!clash)
            return;
    }
}

static void generate_pools(void)
{
    tu_rng r;
    tu_rng_init(&r, 0x7477656d);
    for (int i = 0; i < L.npools; i++) {
        gen_pool *p = &L.pools[i];
        memset(p, 0, sizeof(*p));
        snprintf(p->name, sizeof(p->name), "p%03d", i);
        p->hash = i % 12;
        p->modula = (i / 12) % 2;
        int variant = i / 24; /* 0..11 */
        p->tag = variant % 3 == 1 ? "{}" : variant % 6 == 2 ? "$$" : NULL;
        p->write_hash = p->hash != 6 || tu_below(&r, 2);
        p->write_dist = p->modula || tu_below(&r, 2);
        /* 1 server now and then, else 2..MC_MAX. */
        p->nsrv = variant == 0 && p->hash % 3 == 0 ? 1 : 2 + (int)tu_below(&r, MC_MAX - 1);
        int perm[MC_MAX];
        for (int k = 0; k < MC_MAX; k++)
            perm[k] = k;
        for (int k = MC_MAX - 1; k > 0; k--) {
            int j = (int)tu_below(&r, (uint32_t)k + 1), tmp = perm[k];
            perm[k] = perm[j];
            perm[j] = tmp;
        }
        int naming = (int)tu_below(&r, 3);   /* none, all, some */
        int weighting = (int)tu_below(&r, 4); /* 1, 1..5, 1..100, 1 or 1000 */
        for (int k = 0; k < p->nsrv; k++) {
            p->srv[k] = perm[k];
            switch (weighting) {
            case 0:
                p->weight[k] = 1;
                break;
            case 1:
                p->weight[k] = 1 + tu_below(&r, 5);
                break;
            case 2:
                p->weight[k] = 1 + tu_below(&r, 100);
                break;
            default:
                p->weight[k] = tu_below(&r, 4) ? 1 : 1000;
                break;
            }
        }
        for (int k = 0; k < p->nsrv; k++)
            if (naming == 1 || (naming == 2 && tu_below(&r, 2)))
                random_name(&r, p, k, p->sname[k]);
    }
}

/* The keys of pool i: its name, ':', then random bytes (printable ASCII,
 * and in some keys bytes 0x80..0xff), with a hash tag in many of them. */
static size_t pool_key(int pool, int k, char *out)
{
    tu_rng r;
    tu_rng_init(&r, (uint64_t)pool * 1000003u + (uint64_t)k);
    size_t n = (size_t)sprintf(out, "%s:", L.pools[pool].name);
    size_t len = tu_below(&r, 10) == 0 ? 100 + tu_below(&r, 140) : 1 + tu_below(&r, 40);
    bool high = tu_below(&r, 4) == 0;
    int tag = (int)tu_below(&r, 4); /* 0: none, 1: {..}, 2: $..$, 3: empty {} */
    for (size_t i = 0; i < len; i++) {
        unsigned c = 0x21 + tu_below(&r, 0x7f - 0x21);
        if (high && tu_below(&r, 3) == 0)
            c = 0x80 + tu_below(&r, 0x80);
        out[n++] = (char)c;
    }
    if (tag != 0) {
        size_t at = n > 6 ? 6 + tu_below(&r, (uint32_t)(n - 6)) : n;
        char tmp[256];
        size_t tl = tag == 3 ? 0 : 1 + tu_below(&r, 8);
        char open = tag == 2 ? '$' : '{', close = tag == 2 ? '$' : '}';
        size_t m = 0;
        tmp[m++] = open;
        for (size_t i = 0; i < tl; i++)
            tmp[m++] = (char)('a' + tu_below(&r, 26));
        tmp[m++] = close;
        memmove(out + at + m, out + at, n - at);
        memcpy(out + at, tmp, m);
        n += m;
    }
    if (n > 250)
        n = 250;
    out[n] = '\0';
    return n;
}

static bool write_conf(const int *ports, int stats_port)
{
    (void)stats_port;
    FILE *f = fopen(L.conf, "w");
    if (f == NULL) {
        live_fail("%s: %s", L.conf, strerror(errno));
        return false;
    }
    int pi = 0;
    fprintf(f, "# generated by test_compat_twemproxy (seed 0x%llx)\n",
            (unsigned long long)tu_seed());
    for (int i = 0; i < L.npools; i++) {
        gen_pool *p = &L.pools[i];
        p->listen_port = ports[pi++];
        fprintf(f, "%s:\n  listen: 127.0.0.1:%d\n", p->name, p->listen_port);
        if (p->write_hash)
            fprintf(f, "  hash: %s\n", hash_names[p->hash]);
        if (p->write_dist)
            fprintf(f, "  distribution: %s\n", p->modula ? "modula" : "ketama");
        if (p->tag != NULL)
            fprintf(f, "  hash_tag: \"%s\"\n", p->tag);
        fprintf(f, "  timeout: 5000\n  servers:\n");
        for (int k = 0; k < p->nsrv; k++)
            fprintf(f, "   - %s:%u%s%s\n", L.hostport[p->srv[k]], (unsigned)p->weight[k],
                    p->sname[k][0] ? " " : "", p->sname[k]);
    }
    for (size_t v = 0; v < NVEC_POOLS; v++) {
        char yaml[1024], name[16];
        const char *hp[3] = {L.hostport[0], L.hostport[MC_11211], L.hostport[1]};
        L.vec_port[v] = ports[pi++];
        snprintf(name, sizeof(name), "vec%02zu", v);
        vec_pool_yaml(yaml, sizeof(yaml), v, name, L.vec_port[v], hp);
        fputs(yaml, f);
    }
    /* Redis pools over the sniffers, names chosen so that the server of
     * hash 0 differs from the server of the hash of "". */
    tu_rng r;
    tu_rng_init(&r, 0x656d707479);
    for (int e = 0; e < EMPTY_POOLS; e++) {
        L.empty_port[e] = ports[pi++];
        L.empty_hash[e] = e % 12;
        for (int attempt = 0;; attempt++) {
            char yaml[1024];
            size_t n = (size_t)snprintf(yaml, sizeof(yaml),
                                        "e%02d:\n  listen: 127.0.0.1:%d\n  redis: true\n"
                                        "  hash: %s\n  distribution: %s\n  servers:\n",
                                        e, L.empty_port[e], hash_names[L.empty_hash[e]],
                                        e < 12 ? "ketama" : "modula");
            for (int s = 0; s < SNIFFERS; s++) {
                snprintf(L.empty_names[e][s], sizeof(L.empty_names[e][s]), "s%u",
                         (unsigned)tu_below(&r, 1000000));
                n += (size_t)snprintf(yaml + n, sizeof(yaml) - n, "   - 127.0.0.1:%d:%u %s\n",
                                      L.sniff_port[s], 1 + (unsigned)tu_below(&r, 3),
                                      L.empty_names[e][s]);
            }
            mcr_twem *t = NULL;
            mcr_ring *ring = NULL;
            mcr_error err;
            if (mcr_twem_load_buffer(yaml, n, "empty", &t, &err) != MCR_OK ||
                mcr_twem_ring(t, 0, &ring, &err) != MCR_OK) {
                mcr_twem_free(t);
                fclose(f);
                live_fail("empty-key pool: %s", err.message);
                return false;
            }
            mcr_hash h = mcr_ring_key_hash(ring);
            bool differs = mcr_ring_find(ring, 0) != mcr_ring_find(ring, mcr_hash_key(h, "", 0));
            mcr_ring_free(ring);
            mcr_twem_free(t);
            if (differs || attempt == 50) {
                fputs(yaml, f);
                break;
            }
        }
    }
    if (fclose(f) != 0) {
        live_fail("%s: write failed", L.conf);
        return false;
    }
    return true;
}

static int total_ports(void)
{
    return L.npools + (int)NVEC_POOLS + EMPTY_POOLS + 1;
}

static void live_setup(void)
{
    memset(&L, 0, sizeof(L));
    for (int s = 0; s < SNIFFERS; s++)
        L.sniff_fd[s] = -1;
    L.ok = true;
    if (!rs_executable(rs_memcached_path()) || !rs_executable(rs_nutcracker_path())) {
        live_fail("need %s and %s (Debian packages memcached and nutcracker)",
                  rs_memcached_path(), rs_nutcracker_path());
        return;
    }
    /* nutcracker holds a socket per pool and per pool and server. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    L.npools = POOLS_MAX;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        long fit = ((long)rl.rlim_cur - 256) / (MC_MAX + 2) / 24 * 24;
        if (fit < POOLS_MIN) {
            live_fail("RLIMIT_NOFILE %llu is too small for %d pools",
                      (unsigned long long)rl.rlim_cur, POOLS_MIN);
            return;
        }
        if (fit < L.npools) {
            L.npools = (int)fit;
            printf("live: %d pools only (RLIMIT_NOFILE %llu)\n", L.npools,
                   (unsigned long long)rl.rlim_cur);
        }
    }
    make_dir();
    snprintf(L.conf, sizeof(L.conf), "%s/nutcracker.yml", g_dir);
    if (!start_memcached())
        return;
    /* Sniffers: listening sockets of this process. */
    if (rs_reserve_ports("127.0.0.1", SNIFFERS, L.sniff_port, L.sniff_fd) != 0) {
        live_fail("could not open the sniffer sockets");
        return;
    }
    for (int s = 0; s < SNIFFERS; s++)
        listen(L.sniff_fd[s], 16);
    generate_pools();

    char log[160], pid[160];
    snprintf(log, sizeof(log), "%s/nutcracker.log", g_dir);
    snprintf(pid, sizeof(pid), "%s/nutcracker.pid", g_dir);
    int n = total_ports();
    int *ports = malloc((size_t)n * sizeof(int)), *fds = malloc((size_t)n * sizeof(int));
    bool started = false;
    for (int attempt = 0; attempt < 3 && !started && ports && fds; attempt++) {
        if (rs_reserve_ports("127.0.0.1", n, ports, fds) != 0)
            break;
        if (!write_conf(ports, ports[n - 1])) {
            rs_release_ports(n, fds);
            break;
        }
        rs_release_ports(n, fds);
        started = rs_nutcracker_start(&L.nut, L.conf, log, pid, ports[n - 1], "127.0.0.1",
                                      ports[n - 2], START_MS) == 0;
    }
    free(ports);
    free(fds);
    if (!L.ok)
        return;
    if (!started) {
        char tail[600] = "";
        FILE *f = fopen(log, "r");
        if (f != NULL) {
            if (fseek(f, -(long)(sizeof(tail) - 1), SEEK_END) != 0)
                rewind(f);
            tail[fread(tail, 1, sizeof(tail) - 1, f)] = '\0';
            fclose(f);
        }
        live_fail("nutcracker did not start with %s; the end of its log:\n%s", L.conf, tail);
        return;
    }
    mcr_error e;
    if (mcr_twem_load(L.conf, &L.twem, &e) != MCR_OK) {
        live_fail("mcr_twem_load: %s", e.message);
        return;
    }
    printf("live: %d memcached, nutcracker pid %d, %s\n", MC_MAX, (int)L.nut.pid, L.conf);
    fflush(stdout);
}

static void live_teardown(void)
{
    rs_stop(&L.nut);
    for (int i = 0; i < MC_MAX; i++)
        rs_stop(&L.mc[i]);
    rs_stop_all();
    rs_release_ports(SNIFFERS, L.sniff_fd);
    mcr_twem_free(L.twem);
    L.twem = NULL;
    remove_dir();
}

#define LIVE_READY() ck_assert_msg(L.ok, "live setup failed: %s", L.why)

/* Which memcached (index) each of n keys is on: holder[k] = index, -1 when
 * on none, -2 when on several. */
static void find_holders(char **keys, const size_t *lens, size_t n, int *holder)
{
    unsigned char *hit = malloc(n);
    char err[ERRBUF];
    ck_assert_ptr_nonnull(hit);
    for (size_t k = 0; k < n; k++)
        holder[k] = -1;
    for (int m = 0; m < MC_MAX; m++) {
        int fd = rs_connect(L.mc[m].addr, L.mc[m].port, IO_MS);
        ck_assert_msg(fd >= 0, "connect to memcached %s failed", L.hostport[m]);
        int rc = rs_mc_hits(fd, (const char *const *)keys, lens, n, hit, IO_MS, err, sizeof(err));
        close(fd);
        ck_assert_msg(rc == 0, "get from %s: %s", L.hostport[m], err);
        for (size_t k = 0; k < n; k++)
            if (hit[k])
                holder[k] = holder[k] == -1 ? m : -2;
    }
    free(hit);
}

static int mc_index(const char *hostport)
{
    for (int m = 0; m < MC_MAX; m++)
        if (strcmp(L.hostport[m], hostport) == 0)
            return m;
    return -1;
}

/* Set through nutcracker the keys of the pools with the given hash, then
 * compare where they landed with mcr_ring_locate. */
static void check_hash(int hash)
{
    int pools[POOLS_MAX], np = 0;
    for (int i = 0; i < L.npools; i++)
        if (L.pools[i].hash == hash)
            pools[np++] = i;
    size_t n = (size_t)np * KEYS_PER_POOL;
    char **keys = malloc(n * sizeof(*keys));
    size_t *lens = malloc(n * sizeof(*lens));
    int *holder = malloc(n * sizeof(*holder));
    char err[ERRBUF];
    ck_assert(keys && lens && holder);

    for (int j = 0; j < np; j++) {
        const gen_pool *p = &L.pools[pools[j]];
        char **pk = keys + (size_t)j * KEYS_PER_POOL;
        size_t *pl = lens + (size_t)j * KEYS_PER_POOL;
        for (int k = 0; k < KEYS_PER_POOL; k++) {
            char buf[300];
            pl[k] = pool_key(pools[j], k, buf);
            pk[k] = malloc(pl[k] + 1);
            ck_assert_ptr_nonnull(pk[k]);
            memcpy(pk[k], buf, pl[k] + 1);
        }
        int fd = rs_connect("127.0.0.1", p->listen_port, IO_MS);
        ck_assert_msg(fd >= 0, "connect to nutcracker pool %s (port %d) failed", p->name,
                      p->listen_port);
        int rc = rs_mc_set_many(fd, (const char *const *)pk, pl, KEYS_PER_POOL, p->name, IO_MS,
                                err, sizeof(err));
        close(fd);
        ck_assert_msg(rc == 0, "set through nutcracker pool %s: %s", p->name, err);
    }
    find_holders(keys, lens, n, holder);

    size_t bad = 0, shown = 0, ref_bad = 0;
    char report[4096];
    size_t rl = 0;
    report[0] = '\0';
    for (int j = 0; j < np; j++) {
        const gen_pool *p = &L.pools[pools[j]];
        size_t idx;
        mcr_error e;
        mcr_ring *r = NULL;
        ck_assert_int_eq(mcr_twem_pool_index(L.twem, p->name, &idx, &e), MCR_OK);
        ck_assert_msg(mcr_twem_ring(L.twem, idx, &r, &e) == MCR_OK, "%s", e.message);
        for (int k = 0; k < KEYS_PER_POOL; k++) {
            size_t at = (size_t)j * KEYS_PER_POOL + (size_t)k;
            int want = mc_index(mcr_ring_server_name(r, mcr_ring_locate(r, keys[at], lens[at])));
            /* The test's own model of nutcracker, from the hash value up. */
            uint32_t ref_i = p->nsrv == 1 ? 0
                                          : mcr_ring_find(r, nc_pool_hash(mcr_ring_key_hash(r),
                                                                          p->tag, keys[at],
                                                                          lens[at]));
            ref_bad += mc_index(mcr_ring_server_name(r, ref_i)) != holder[at];
            if (want != holder[at]) {
                bad++;
                if (shown++ < 8 && rl < sizeof(report) - 200) {
                    char qk[80];
                    size_t ql = lens[at] < 60 ? lens[at] : 60;
                    for (size_t c = 0; c < ql; c++)
                        qk[c] = (unsigned char)keys[at][c] < 0x80 ? keys[at][c] : '?';
                    qk[ql] = '\0';
                    rl += (size_t)snprintf(report + rl, sizeof(report) - rl,
                                           "  pool %s (%s %s%s%s, %d servers): key \"%s\" "
                                           "mcroute %s, nutcracker %s\n",
                                           p->name, hash_names[p->hash],
                                           p->modula ? "modula" : "ketama",
                                           p->tag ? " tag " : "", p->tag ? p->tag : "", p->nsrv,
                                           qk, want >= 0 ? L.hostport[want] : "?",
                                           holder[at] >= 0 ? L.hostport[holder[at]]
                                           : holder[at] == -1 ? "(nowhere)"
                                                              : "(several)");
                }
            }
        }
        mcr_ring_free(r);
    }
    for (size_t k = 0; k < n; k++)
        free(keys[k]);
    free(keys);
    free(lens);
    free(holder);
    printf("live %s: %d pools, %zu keys through nutcracker, %zu disagree with mcroute, %zu "
           "with the test's model\n",
           hash_names[hash], np, n, bad, ref_bad);
    fflush(stdout);
    ck_assert_msg(ref_bad == 0, "hash %s: the test's model of nutcracker is wrong for %zu keys",
                  hash_names[hash], ref_bad);
    ck_assert_msg(bad == 0, "hash %s: %zu of %zu keys placed differently (config %s):\n%s",
                  hash_names[hash], bad, n, L.conf, report);
}

START_TEST(test_live_hash)
{
    LIVE_READY();
    check_hash(_i);
}
END_TEST

/* The vector pools through nutcracker: the literals of vec_pools. */
START_TEST(test_live_vectors)
{
    const char *print = getenv("MCR_TWEM_PRINT_VECTORS");
    char err[ERRBUF];
    size_t bad = 0;

    LIVE_READY();
    for (size_t v = 0; v < NVEC_POOLS; v++) {
        char *keys[NVEC_KEYS];
        size_t lens[NVEC_KEYS];
        int holder[NVEC_KEYS];
        for (size_t k = 0; k < NVEC_KEYS; k++) {
            keys[k] = (char *)vec_keys[k];
            lens[k] = strlen(vec_keys[k]);
        }
        int fd = rs_connect("127.0.0.1", L.vec_port[v], IO_MS);
        ck_assert(fd >= 0);
        ck_assert_msg(rs_mc_set_many(fd, (const char *const *)keys, lens, NVEC_KEYS, "v", IO_MS,
                                     err, sizeof(err)) == 0,
                      "vector pool %zu: %s", v, err);
        close(fd);
        find_holders(keys, lens, NVEC_KEYS, holder);
        /* The same keys go to other servers in the next pool: delete. */
        for (int m = 0; m < MC_MAX; m++) {
            char reply[64];
            fd = rs_connect(L.mc[m].addr, L.mc[m].port, IO_MS);
            ck_assert(fd >= 0);
            ck_assert_int_eq(rs_mc_command(fd, "flush_all", reply, sizeof(reply), IO_MS), 0);
            ck_assert_str_eq(reply, "OK");
            close(fd);
        }
        if (print != NULL)
            printf("    {\"%s\", \"%s\", %s%s%s,\n     {", vec_pools[v].hash, vec_pools[v].dist,
                   vec_pools[v].tag ? "\"" : "", vec_pools[v].tag ? vec_pools[v].tag : "NULL",
                   vec_pools[v].tag ? "\"" : "");
        for (size_t k = 0; k < NVEC_KEYS; k++) {
            /* alpha is mc 0, beta mc MC_11211, gamma mc 1 (see write_conf). */
            const char *got = holder[k] == 0          ? "alpha"
                              : holder[k] == MC_11211 ? "beta"
                              : holder[k] == 1        ? "gamma"
                                                      : "?";
            if (print != NULL) {
                printf("\"%s\"%s", got, k + 1 < NVEC_KEYS ? ", " : "}},\n");
                fflush(stdout);
            }
            if (strcmp(got, v_want(v, k)) != 0) {
                bad++;
                fprintf(stderr, "vector %s %s key \"%s\": nutcracker %s, table %s\n",
                        vec_pools[v].hash, vec_pools[v].dist, vec_keys[k], got, v_want(v, k));
            }
        }
    }
    ck_assert_msg(bad == 0, "%zu vector placements differ from nutcracker's", bad);
}
END_TEST

/* Empty keys exist in redis requests only: send "GET ''" to redis pools
 * whose servers are sniffer sockets of this process, and see which one
 * nutcracker connects to and writes. */
START_TEST(test_live_empty_key)
{
    static const char req[] = "*2\r\n$3\r\nGET\r\n$0\r\n\r\n";
    size_t distinct = 0;

    LIVE_READY();
    for (int e = 0; e < EMPTY_POOLS; e++) {
        char name[16];
        size_t idx;
        mcr_error err;
        mcr_ring *r = NULL;
        snprintf(name, sizeof(name), "e%02d", e);
        ck_assert_int_eq(mcr_twem_pool_index(L.twem, name, &idx, &err), MCR_OK);
        ck_assert_int_eq(mcr_twem_ring(L.twem, idx, &r, &err), MCR_OK);
        uint32_t want = mcr_ring_locate(r, "", 0);
        mcr_hash h = mcr_ring_key_hash(r);
        distinct += mcr_ring_find(r, mcr_hash_key(h, "", 0)) != want;
        const char *want_name = mcr_ring_server_name(r, want);

        int c = rs_connect("127.0.0.1", L.empty_port[e], IO_MS);
        ck_assert(c >= 0);
        ck_assert_int_eq(send(c, req, sizeof(req) - 1, MSG_NOSIGNAL), (ssize_t)(sizeof(req) - 1));
        struct pollfd pf[SNIFFERS];
        for (int s = 0; s < SNIFFERS; s++) {
            pf[s].fd = L.sniff_fd[s];
            pf[s].events = POLLIN;
        }
        int n = poll(pf, SNIFFERS, IO_MS);
        ck_assert_msg(n > 0, "pool %s: nutcracker contacted no server", name);
        int got = -1;
        for (int s = 0; s < SNIFFERS; s++)
            if (pf[s].revents & POLLIN) {
                ck_assert_msg(got == -1, "pool %s: two servers contacted", name);
                got = s;
            }
        int a = accept(L.sniff_fd[got], NULL, NULL);
        ck_assert(a >= 0);
        char buf[256];
        size_t have = 0;
        struct pollfd ap = {a, POLLIN, 0};
        while (have < sizeof(req) - 1 && poll(&ap, 1, IO_MS) == 1) {
            ssize_t k = recv(a, buf + have, sizeof(buf) - have, 0);
            if (k <= 0)
                break;
            have += (size_t)k;
        }
        ck_assert_msg(have == sizeof(req) - 1 && memcmp(buf, req, have) == 0,
                      "pool %s: the server got %zu unexpected bytes", name, have);
        close(a);
        close(c);
        char got_name[48];
        snprintf(got_name, sizeof(got_name), "127.0.0.1:%d", L.sniff_port[got]);
        ck_assert_msg(strcmp(got_name, want_name) == 0,
                      "pool %s (%s): the empty key went to %s, mcroute says %s", name,
                      hash_names[L.empty_hash[e]], got_name, want_name);
        mcr_ring_free(r);
    }
    printf("live empty key: %d pools agree (%zu where hashing \"\" would differ)\n", EMPTY_POOLS,
           distinct);
    ck_assert_uint_ge(distinct, EMPTY_POOLS / 2);
}
END_TEST

/* The directives nutcracker uses, read back from the live file. */
START_TEST(test_live_file)
{
    LIVE_READY();
    ck_assert_uint_eq(mcr_twem_pool_count(L.twem), (size_t)L.npools + NVEC_POOLS + EMPTY_POOLS);
    for (int i = 0; i < L.npools; i++) {
        const gen_pool *p = &L.pools[i];
        int64_t v;
        ck_assert_str_eq(mcr_twem_pool_name(L.twem, (size_t)i), p->name);
        mcr_twem_pool_option(L.twem, (size_t)i, MCR_TWEM_LISTEN_PORT, &v);
        ck_assert_int_eq(v, p->listen_port);
        mcr_twem_pool_option(L.twem, (size_t)i, MCR_TWEM_TIMEOUT, &v);
        ck_assert_int_eq(v, 5000);
        ck_assert_str_eq(mcr_twem_pool_text(L.twem, (size_t)i, MCR_TWEM_HASH_NAME),
                         hash_names[p->hash]);
        ck_assert_uint_eq(mcr_twem_server_count(L.twem, (size_t)i), (size_t)p->nsrv);
    }
    /* What the random pools cover. */
    int modula = 0, tagged = 0, single = 0, weighted = 0, named = 0, servers = 0;
    for (int i = 0; i < L.npools; i++) {
        const gen_pool *p = &L.pools[i];
        bool w = false;
        modula += p->modula;
        tagged += p->tag != NULL;
        single += p->nsrv == 1;
        for (int k = 0; k < p->nsrv; k++) {
            w |= p->weight[k] > 1;
            named += p->sname[k][0] != '\0';
        }
        weighted += w;
        servers += p->nsrv;
    }
    printf("live pools: %d (%d modula, %d with a hash tag, %d with one server, %d weighted), "
           "%d servers of which %d named, %d keys each\n",
           L.npools, modula, tagged, single, weighted, servers, named, KEYS_PER_POOL);
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
    Suite *s = suite_create("compat_twemproxy");
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

    TCase *live = tcase_create("live");
    tcase_set_timeout(live, 600);
    tcase_add_unchecked_fixture(live, live_setup, live_teardown);
    tcase_add_test(live, test_live_file);
    tcase_add_loop_test(live, test_live_hash, 0, 12);
    tcase_add_test(live, test_live_vectors);
    tcase_add_test(live, test_live_empty_key);
    suite_add_tcase(s, live);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
