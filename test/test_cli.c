/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cli.c: Check suite of the mcroute command line, run as a real process: output contract, stdin keys, bad input. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mcroute.h"
#include "mcroute_libmemcached.h"
#include "mcroute_snapshot.h"
#include "clirun.h"
#include "testutil.h"
#include "testutil_config.h"

START_TEST(locate_arguments)
{
    const char *list = "10.0.0.1:11211,10.0.0.2:11212:3,cache:11213,[::1]:11214";
    run r = run_cli(NULL, 0, ARGS("locate", "-s", list, "foo", "bar", "user:42"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    mcr_ring *ring = tu_ring(list, MCR_MODE_KETAMA, MCR_HASH_MD5);
    char want[1024];
    const char *keys[] = {"foo", "bar", "user:42"};
    size_t o = 0;
    for (int i = 0; i < 3; i++)
        o += (size_t)snprintf(want + o, sizeof(want) - o, "%s\t%s\n", keys[i],
                              mcr_ring_server_name(ring, mcr_ring_locate(ring, keys[i], strlen(keys[i]))));
    ck_assert_str_eq(r.out, want);
    ck_assert_str_eq(r.err, "");
    mcr_ring_free(ring);
    run_free(&r);
}
END_TEST

START_TEST(locate_stdin_bytes)
{
    /* lines keep every byte but the newline: CR, NUL, control bytes, spaces,
     * an empty line, and a last line without newline */
    static const char in[] = "a\r\n\x01 b\n\nnul\0inside\n\xff\xfe\nlast";
    size_t inlen = sizeof(in) - 1;
    const char *list = "a:1,b:2,c:3";
    run r = run_cli(in, inlen, ARGS("locate", "-s", list, "--mode", "consistent", "--hash", "fnv1a_32"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    mcr_ring *ring = tu_ring(list, MCR_MODE_CONSISTENT, MCR_HASH_FNV1A_32);
    char want[512];
    size_t o = 0, start = 0;
    for (size_t i = 0; i <= inlen; i++) {
        if (i == inlen || in[i] == '\n') {
            const char *name = mcr_ring_server_name(ring, mcr_ring_locate(ring, in + start, i - start));
            memcpy(want + o, in + start, i - start);
            o += i - start;
            o += (size_t)sprintf(want + o, "\t%s\n", name);
            start = i + 1;
        }
    }
    ck_assert_uint_eq(r.outlen, o);
    ck_assert(memcmp(r.out, want, o) == 0);
    mcr_ring_free(ring);
    run_free(&r);
}
END_TEST

START_TEST(locate_many_keys_match_library)
{
    tu_rng rng;
    tu_rng_init(&rng, 77);
    const char *list = "h1:1:5,h2:2:1,h3:3:2,h4:4:9,h5:5:1,h6:6:3";
    enum { N = 3000 };
    char *in = malloc(N * 70), *want = malloc(N * 100);
    size_t inlen = 0, wl = 0;
    mcr_ring *ring = tu_ring(list, MCR_MODE_WEIGHTED, MCR_HASH_MD5);
    for (int i = 0; i < N; i++) {
        char k[64];
        size_t kl = tu_key(&rng, k, 60);
        memcpy(in + inlen, k, kl);
        inlen += kl;
        in[inlen++] = '\n';
        wl += (size_t)sprintf(want + wl, "%s\t%s\n", k,
                              mcr_ring_server_name(ring, mcr_ring_locate(ring, k, kl)));
    }
    run r = run_cli(in, inlen, ARGS("locate", "-s", list, "-m", "weighted"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_uint_eq(r.outlen, wl);
    ck_assert(memcmp(r.out, want, wl) == 0);
    run_free(&r);
    mcr_ring_free(ring);
    free(in);
    free(want);
}
END_TEST

/* -m MODE without --hash places keys as a program that only sets the mode
 * (the library's defaults): in every mode, on random server lists and
 * keys. The CLI once had its own table of default hashes, which disagreed
 * with mcr_config_new() in 7 modes. */
START_TEST(mode_defaults_match_library)
{
    tu_rng rng;
    tu_rng_init(&rng, 4242);
    enum { TRIALS = 3, KEYS = 300 };
    char *in = malloc(KEYS * 70), *want = malloc(KEYS * 120);
    ck_assert_ptr_nonnull(in);
    ck_assert_ptr_nonnull(want);
    for (int m = 0; m < MCR_MODE_COUNT; m++) {
        const char *name = mcr_mode_name((mcr_mode)m);
        ck_assert_ptr_nonnull(name);
        EXPECT_MSG(mcr_hash_name(mcr_mode_default_hash((mcr_mode)m)) != NULL,
                   "%s: no default hash", name);
        for (int t = 0; t < TRIALS; t++) {
            /* 1..12 servers: addresses, hostnames, IPv6, weights 1..5 */
            char list[1024];
            size_t lo = 0, n = 1 + tu_below(&rng, 12);
            for (size_t i = 0; i < n; i++) {
                /* the modes without weights: 1 */
                unsigned w = m == MCR_MODE_PYMEMCACHE || m == MCR_MODE_MEMCACHED_PROXY_JUMP ||
                                     m == MCR_MODE_MCROUTER_CH3 ||
                                     m == MCR_MODE_MEMCACHED_PROXY_RING_KETAMA
                                 ? 1
                                 : 1 + tu_below(&rng, 5);
                unsigned port = 1000 + tu_below(&rng, 60000);
                char ws[16]; /* mcrouter-wch3 writes weights as decimals in [0, 1] */
                snprintf(ws, sizeof(ws), m == MCR_MODE_MCROUTER_WCH3 ? "0.%u" : "%u", w);
                /* spymemcached's labels resolve names (its default format)
                 * and look IP addresses up in reverse (LIBMEMCACHED): each
                 * is given only what it leaves alone, so that no lookup
                 * asks the DNS */
                unsigned kind = tu_below(&rng, 3);
                if (m == MCR_MODE_SPYMEMCACHED && kind == 1)
                    kind = 0;
                if (m == MCR_MODE_SPYMEMCACHED_LIBMEMCACHED)
                    kind = 1;
                switch (kind) {
                case 0:
                    lo += (size_t)snprintf(list + lo, sizeof(list) - lo, "%s10.%u.%u.%zu:%u:%s",
                                           i ? "," : "", tu_below(&rng, 256),
                                           tu_below(&rng, 256), i, port, ws);
                    break;
                case 1:
                    lo += (size_t)snprintf(list + lo, sizeof(list) - lo, "%scache-%zu-%u:%u:%s",
                                           i ? "," : "", i, tu_below(&rng, 1000), port, ws);
                    break;
                default:
                    lo += (size_t)snprintf(list + lo, sizeof(list) - lo, "%s[fd00::%zx]:%u:%s",
                                           i ? "," : "", i + 1, port, ws);
                    break;
                }
            }
            /* the library with its defaults: only the mode is set */
            mcr_config *cfg = mcr_config_new();
            mcr_ring *ring = NULL;
            mcr_error err;
            ck_assert_int_eq(mcr_config_set_mode(cfg, (mcr_mode)m), MCR_OK);
            ck_assert_int_eq(mcr_config_add_servers(cfg, list, &err), MCR_OK);
            EXPECT_MSG(mcr_ring_new(cfg, &ring, &err) == MCR_OK, "%s: %s", name, err.message);
            mcr_config_free(cfg);
            EXPECT_MSG(mcr_ring_key_hash(ring) == mcr_mode_default_hash((mcr_mode)m),
                       "%s: the config's hash is %s, the mode's default %s", name,
                       mcr_hash_name(mcr_ring_key_hash(ring)),
                       mcr_hash_name(mcr_mode_default_hash((mcr_mode)m)));
            size_t il = 0, wl = 0;
            for (int k = 0; k < KEYS; k++) {
                char key[64];
                size_t kl = tu_key(&rng, key, 60);
                memcpy(in + il, key, kl);
                il += kl;
                in[il++] = '\n';
                wl += (size_t)sprintf(want + wl, "%s\t%s\n", key,
                                      mcr_ring_server_name(ring, mcr_ring_locate(ring, key, kl)));
            }
            mcr_ring_free(ring);
            run r = run_cli(in, il, ARGS("locate", "-s", list, "-m", name));
            EXPECT_MSG(r.status == 0, "%s: status %d: %s", name, r.status, r.err);
            size_t at = 0;
            while (at < r.outlen && at < wl && r.out[at] == want[at])
                at++;
            EXPECT_MSG(r.outlen == wl && at == wl,
                       "mode %s, servers %s: the CLI places keys unlike the library's defaults "
                       "from byte %zu: \"%.60s\" vs \"%.60s\"",
                       name, list, at, r.out + (at < r.outlen ? at : r.outlen), want + at);
            run_free(&r);
        }
    }
    ck_assert_int_eq(mcr_mode_default_hash(MCR_MODE_COUNT), MCR_HASH_COUNT);
    ck_assert_int_eq(mcr_mode_default_hash((mcr_mode)-1), MCR_HASH_COUNT);
    free(in);
    free(want);
}
END_TEST

START_TEST(server_file_source)
{
    const char *text = "# pool\n10.0.0.1:11211:2\n10.0.0.2  # second\n\n[::1]:11212\n";
    char *path = tu_temp_file("cli-servers", text, strlen(text));
    run a = run_cli(NULL, 0, ARGS("locate", "--server-file", path, "k1", "k2", "k3"));
    run b = run_cli(NULL, 0, ARGS("locate", "-s", "10.0.0.1:11211:2,10.0.0.2,[::1]:11212", "k1", "k2", "k3"));
    ck_assert_msg(a.status == 0, "%s", a.err);
    ck_assert_str_eq(a.out, b.out);
    run_free(&a);
    run_free(&b);
    tu_temp_file_free(path);
}
END_TEST

START_TEST(dump_continuum)
{
    const char *list = "a:1,b:2:2,c:3";
    run r = run_cli(NULL, 0, ARGS("dump", "-s", list));
    ck_assert_msg(r.status == 0, "%s", r.err);
    mcr_ring *ring = tu_ring(list, MCR_MODE_KETAMA, MCR_HASH_MD5);
    size_t n = mcr_ring_point_count(ring), lines = 0;
    char *p = r.out;
    unsigned long prev = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t v, s;
        char want[128];
        mcr_ring_point(ring, i, &v, &s);
        int wl = snprintf(want, sizeof(want), "%u\t%s\n", (unsigned)v, mcr_ring_server_name(ring, s));
        ck_assert_msg(strncmp(p, want, (size_t)wl) == 0, "line %zu", i);
        unsigned long cur = strtoul(p, NULL, 10);
        ck_assert_uint_ge(cur, prev);
        prev = cur;
        p += wl;
        lines++;
    }
    ck_assert_uint_eq(lines, 160 * 3);
    ck_assert(*p == '\0');
    mcr_ring_free(ring);
    run_free(&r);
}
END_TEST

START_TEST(hash_command)
{
    for (int h = 0; h < MCR_HASH_COUNT; h++) {
        const char *name = mcr_hash_name((mcr_hash)h);
        run r = run_cli("stdin-key\n\n", 11, ARGS("hash", "--hash", name));
        ck_assert_msg(r.status == 0, "%s: %s", name, r.err);
        char want[128];
        snprintf(want, sizeof(want), "stdin-key\t%u\n\t%u\n",
                 (unsigned)mcr_hash_key((mcr_hash)h, "stdin-key", 9),
                 (unsigned)mcr_hash_key((mcr_hash)h, "", 0));
        ck_assert_str_eq(r.out, want);
        run_free(&r);
    }
    run r = run_cli(NULL, 0, ARGS("hash", "--hash", "md5", "hello"));
    /* MD5("hello") = 5d41402a...: first four bytes little-endian */
    ck_assert_str_eq(r.out, "hello\t708854109\n");
    run_free(&r);
}
END_TEST

START_TEST(bad_input)
{
    char longhost[300];
    memset(longhost, 'x', 256);
    longhost[256] = '\0';
    expect_usage_error(ARGS("locate", "-s", "", "k"), "empty server list");
    expect_usage_error(ARGS("locate", "-s", "a,,b", "k"), "empty");
    expect_usage_error(ARGS("locate", "-s", "a:0", "k"), "port 0");
    expect_usage_error(ARGS("locate", "-s", "a:65536", "k"), "port 65536");
    expect_usage_error(ARGS("locate", "-s", "a:1:0", "k"), "weight 0");
    expect_usage_error(ARGS("locate", "-s", "a:1:heavy", "k"), "weight \"heavy\"");
    expect_usage_error(ARGS("locate", "-s", "a,b,a", "k"), "duplicate server a:11211");
    expect_usage_error(ARGS("locate", "-s", longhost, "k"), "longer than 255");
    expect_usage_error(ARGS("locate", "-s", "a", "--mode", "ring", "k"), "unknown mode 'ring'");
    expect_usage_error(ARGS("locate", "-s", "a", "--hash", "sha1", "k"), "unknown hash 'sha1'");
    expect_usage_error(ARGS("locate", "--bogus", "k"), "option '--bogus'");
    expect_usage_error(ARGS("locate", "k"), "no servers");
    expect_usage_error(ARGS("locate", "-s", "a", "-f", "/etc/hostname", "k"), "only one");
    expect_usage_error(ARGS("locate", "-f", "/nonexistent/file", "k"), "/nonexistent/file");
    expect_usage_error(ARGS("frobnicate"), "unknown command 'frobnicate'");
    expect_usage_error(ARGS("hash", "k"), "--hash NAME is required");
    expect_usage_error(ARGS("hash", "--hash", "nope", "k"), "unknown hash 'nope'");
    expect_usage_error(ARGS("dump", "-s", "a,b", "-m", "modula"), "no continuum");
    expect_usage_error(ARGS("dump", "-s", "a,b", "extra"), "unexpected argument");
    expect_usage_error(ARGS("locate", "-l", "--SERVER=cache-a --NOPE", "k"), "--NOPE");
    expect_usage_error(ARGS("locate", "-l", "--SERVER=cache-a", "-b", "FROB=1", "k"), "FROB");
    expect_usage_error(ARGS("locate", "-l", "--SERVER=cache-a", "-b", "DISTRIBUTION=circle", "k"), "circle");
    expect_usage_error(ARGS("locate", "-l", "--SERVER=cache-a", "-b", "HASH", "k"), "NAME=VALUE");
    expect_usage_error(ARGS("locate", "-l", "--SERVER=cache-a", "-m", "ketama", "k"), "--behavior");
    expect_usage_error(ARGS("locate", "-s", "a", "-b", "KETAMA=1", "k"), "--libmemcached");
    expect_usage_error(ARGS("locate", "-s"), "option '-s' needs a value");
    expect_usage_error(ARGS("hash", "--hash"), "option '--hash' needs a value");
    expect_usage_error(ARGS("hash", "--hash", "md5", "-s", "a", "k"),
                       "option '--servers' is not valid here");
    expect_usage_error(ARGS("help", "frob"), "help: unknown command 'frob'");
    expect_usage_error(ARGS("locate", "-s", "a", "-qz", "k"), "unknown option '-q'");
    expect_usage_error(ARGS("locate", "--serv=a", "k"), "ambiguous option '--serv=a'");
    expect_usage_error(ARGS("locate", "-s", "a", "-m", "ketama", "-m", "modula", "k"),
                       "--mode given twice");
    expect_usage_error(ARGS("locate", "-s", "a", "--hash", "md5", "--hash", "crc", "k"),
                       "--hash given twice");
    expect_usage_error(ARGS("locate", "-s", "a:1\x1b[31m", "k"), "port \"1\\x1b[31m\"");
    expect_usage_error(ARGS("locate", "-f", "/tmp", "k"), "Is a directory");
    run r = run_cli(NULL, 0, ARGS("locate"));
    ck_assert_int_eq(r.status, 2);
    run_free(&r);
    r = run_cli(NULL, 0, (const char *const[]){"mcroute", NULL});
    ck_assert_int_eq(r.status, 2);
    ck_assert_uint_eq(r.outlen, 0);
    run_free(&r);
}
END_TEST

START_TEST(help_everywhere)
{
    const char *const *cases[] = {ARGS("--help"), ARGS("-h"), ARGS("help"), ARGS("help", "locate"),
                                  ARGS("locate", "--help"), ARGS("dump", "--help"),
                                  ARGS("hash", "--help")};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        run r = run_cli(NULL, 0, cases[i]);
        ck_assert_int_eq(r.status, 0);
        ck_assert_msg(strstr(r.out, "Usage: mcroute") != NULL, "case %zu: %s", i, r.out);
        run_free(&r);
    }
    run r = run_cli(NULL, 0, ARGS("--version"));
    ck_assert_int_eq(r.status, 0);
    ck_assert(strstr(r.out, mcr_version_string()) != NULL);
    run_free(&r);
}
END_TEST

START_TEST(libmemcached_source)
{
    const char *opts = "--SERVER=10.0.1.1:11211 --SERVER=10.0.1.2:11212/?3 --SERVER=cache-x";
    run r = run_cli(NULL, 0, ARGS("locate", "--libmemcached", opts, "-b", "DISTRIBUTION=consistent",
                                  "--behavior", "MEMCACHED_BEHAVIOR_HASH=fnv1a_32", "k1", "k2", "k3"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    mcr_lmc *lmc = mcr_lmc_new();
    mcr_ring *ring = NULL;
    ck_assert_int_eq(mcr_lmc_parse_options(lmc, opts, NULL), MCR_OK);
    ck_assert_int_eq(mcr_lmc_set_behavior_name(lmc, "DISTRIBUTION", "consistent", NULL), MCR_OK);
    ck_assert_int_eq(mcr_lmc_set_behavior_name(lmc, "HASH", "fnv1a_32", NULL), MCR_OK);
    ck_assert_int_eq(mcr_lmc_ring(lmc, &ring, NULL), MCR_OK);
    char want[512];
    size_t o = 0;
    const char *keys[] = {"k1", "k2", "k3"};
    for (int i = 0; i < 3; i++)
        o += (size_t)snprintf(want + o, sizeof(want) - o, "%s\t%s\n", keys[i],
                              mcr_ring_server_name(ring, mcr_ring_locate(ring, keys[i], 2)));
    ck_assert_str_eq(r.out, want);
    mcr_ring_free(ring);
    mcr_lmc_free(lmc);
    run_free(&r);
}
END_TEST

static char *temp_file(const char *text)
{
    return tu_temp_file("cli-src", text, strlen(text));
}

START_TEST(twemproxy_source)
{
    char *yml = temp_file("alpha:\n  listen: 127.0.0.1:22121\n  hash: fnv1a_64\n"
                          "  distribution: ketama\n  servers:\n"
                          "   - 127.0.0.1:11211:1 cache-a\n   - 127.0.0.1:11212:2\n"
                          "beta:\n  listen: 127.0.0.1:22122\n  hash: md5\n"
                          "  distribution: modula\n  hash_tag: \"{}\"\n  servers:\n"
                          "   - 127.0.0.2:11211:1\n   - 127.0.0.3:11211:3\n");
    /* the same placements built through the library */
    mcr_config *cfg = mcr_config_new();
    mcr_config_set_mode(cfg, MCR_MODE_TWEMPROXY_KETAMA);
    mcr_config_set_hash(cfg, MCR_HASH_FNV1A_64);
    /* nutcracker's order: by ketama name, shorter first */
    mcr_config_add_server_named(cfg, "127.0.0.1", 11211, 1, "cache-a", NULL);
    mcr_config_add_server_named(cfg, "127.0.0.1", 11212, 2, NULL, NULL);
    mcr_ring *a = NULL;
    ck_assert_int_eq(mcr_ring_new(cfg, &a, NULL), MCR_OK);
    mcr_config_free(cfg);
    cfg = mcr_config_new();
    mcr_config_set_mode(cfg, MCR_MODE_TWEMPROXY_MODULA);
    mcr_config_set_hash(cfg, MCR_HASH_MD5);
    mcr_config_set_hash_tag(cfg, "{}");
    mcr_config_add_servers(cfg, "127.0.0.2:11211:1,127.0.0.3:11211:3", NULL);
    mcr_ring *b = NULL;
    ck_assert_int_eq(mcr_ring_new(cfg, &b, NULL), MCR_OK);
    mcr_config_free(cfg);

    const char *keys[] = {"k1", "user:{7}:a", "user:{7}:b", "zz"};
    char want_a[512], want_b[512];
    size_t oa = 0, ob = 0;
    for (int i = 0; i < 4; i++) {
        size_t l = strlen(keys[i]);
        oa += (size_t)snprintf(want_a + oa, sizeof(want_a) - oa, "%s\t%s\n", keys[i],
                               mcr_ring_server_name(a, mcr_ring_locate(a, keys[i], l)));
        ob += (size_t)snprintf(want_b + ob, sizeof(want_b) - ob, "%s\t%s\n", keys[i],
                               mcr_ring_server_name(b, mcr_ring_locate(b, keys[i], l)));
    }
    run r = run_cli(NULL, 0, ARGS("locate", "--twemproxy", yml, keys[0], keys[1], keys[2], keys[3]));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.out, want_a);
    run_free(&r);
    r = run_cli(NULL, 0, ARGS("locate", "-t", yml, "--pool", "beta", keys[0], keys[1], keys[2], keys[3]));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.out, want_b);
    run_free(&r);
    r = run_cli(NULL, 0, ARGS("dump", "-t", yml));
    ck_assert_int_eq(r.status, 0);
    ck_assert_uint_gt(r.outlen, 0);
    run_free(&r);
    expect_usage_error(ARGS("locate", "-t", yml, "-p", "gamma", "k"), "gamma");
    expect_usage_error(ARGS("dump", "-t", yml, "-p", "beta"), "no continuum");
    expect_usage_error(ARGS("locate", "-t", yml, "--hash", "md5", "k"), "the file sets");
    expect_usage_error(ARGS("locate", "-s", "a", "-p", "beta", "k"), "--pool applies only");
    tu_temp_file_free(yml);

    char *bad = temp_file("alpha:\n  servers:\n   - 127.0.0.1:11211:0\n");
    expect_usage_error(ARGS("locate", "-t", bad, "k"), bad);
    tu_temp_file_free(bad);
    bad = temp_file("alpha: [unclosed\n");
    expect_usage_error(ARGS("locate", "-t", bad, "k"), bad);
    tu_temp_file_free(bad);
    mcr_ring_free(a);
    mcr_ring_free(b);
}
END_TEST

START_TEST(ketama_file_source)
{
    char *f = temp_file("# servers\n10.0.1.1:11211\t600\n10.0.1.2:11211\t300\n10.0.1.3:11211\t200\n");
    /* libketama's sample file; vectors derived in test_compat_ketama */
    run r = run_cli(NULL, 0, ARGS("locate", "--ketama-file", f, "foo", "bar", "hello"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.out, "foo\t10.0.1.2:11211\nbar\t10.0.1.1:11211\nhello\t10.0.1.3:11211\n");
    run_free(&r);
    r = run_cli(NULL, 0, ARGS("dump", "-k", f));
    ck_assert_int_eq(r.status, 0);
    size_t lines = 0;
    for (size_t i = 0; i < r.outlen; i++)
        lines += r.out[i] == '\n';
    ck_assert_uint_eq(lines, 472); /* 65 + 32 + 21 labels, 4 points each */
    run_free(&r);
    tu_temp_file_free(f);
    /* an address written without a port prints as written */
    f = temp_file("cache-a\t100\ncache-b:11212\t100\n");
    r = run_cli(NULL, 0, ARGS("dump", "-k", f));
    ck_assert_int_eq(r.status, 0);
    ck_assert(strstr(r.out, "\tcache-a\n") != NULL);
    ck_assert(strstr(r.out, "\tcache-b:11212\n") != NULL);
    run_free(&r);
    tu_temp_file_free(f);
    f = temp_file("10.0.0.1:11211\t0\n");
    expect_usage_error(ARGS("locate", "-k", f, "k"), "line 1");
    tu_temp_file_free(f);
    f = temp_file("# nothing\n");
    expect_usage_error(ARGS("locate", "-k", f, "k"), f);
    tu_temp_file_free(f);
}
END_TEST

START_TEST(snapshot_diff_replicas)
{
    char *dir = tu_tmpdir("cli-snap");
    char snap[256], keys[256];
    snprintf(snap, sizeof(snap), "%s/ring.snap", dir);
    snprintf(keys, sizeof(keys), "%s/keys", dir);

    /* snapshot -o, then --snapshot as a source places like the list */
    const char *list = "10.0.0.1:11211,10.0.0.2:11211:2,10.0.0.3:11211";
    run r = run_cli(NULL, 0, ARGS("snapshot", "-s", list, "-o", snap));
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);
    run a = run_cli(NULL, 0, ARGS("locate", "--snapshot", snap, "k1", "k2", "k3", "user:9"));
    run b = run_cli(NULL, 0, ARGS("locate", "-s", list, "k1", "k2", "k3", "user:9"));
    ck_assert_msg(a.status == 0, "%s", a.err);
    ck_assert_str_eq(a.out, b.out);
    run_free(&a);
    run_free(&b);
    a = run_cli(NULL, 0, ARGS("dump", "--snapshot", snap));
    b = run_cli(NULL, 0, ARGS("dump", "-s", list));
    ck_assert_str_eq(a.out, b.out);
    run_free(&a);
    run_free(&b);

    /* --epoch N: the file carries it, and places the same; refused for a
     * source with its own epoch, and outside 1..2^63-1 */
    char snap7[256];
    snprintf(snap7, sizeof(snap7), "%s/seven.snap", dir);
    r = run_cli(NULL, 0, ARGS("snapshot", "-s", list, "-o", snap7, "--epoch", "7"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);
    size_t len = 0;
    char *text = tu_read_file(snap7, &len);
    ck_assert_msg(strstr(text, "\nepoch 7\n") != NULL, "%s", text);
    free(text);
    a = run_cli(NULL, 0, ARGS("locate", "--snapshot", snap7, "k1", "k2", "k3", "user:9"));
    b = run_cli(NULL, 0, ARGS("locate", "-s", list, "k1", "k2", "k3", "user:9"));
    ck_assert_str_eq(a.out, b.out);
    run_free(&a);
    run_free(&b);
    expect_usage_error(ARGS("snapshot", "--snapshot", snap7, "-o", snap, "--epoch", "8"),
                       "keep their own epoch");
    expect_usage_error(ARGS("snapshot", "-s", list, "-o", snap, "--epoch", "0"), "--epoch");
    expect_usage_error(ARGS("snapshot", "-s", list, "-o", snap, "--epoch",
                            "9223372036854775808"), "--epoch");
    expect_usage_error(ARGS("snapshot", "-s", list, "-o", snap, "--epoch", "7x"), "--epoch");

    /* a corrupted snapshot file is refused */
    FILE *f = fopen(snap, "r+");
    ck_assert_ptr_nonnull(f);
    fseek(f, 30, SEEK_SET);
    int c = fgetc(f);
    fseek(f, 30, SEEK_SET);
    fputc(c == 'x' ? 'y' : 'x', f);
    fclose(f);
    expect_usage_error(ARGS("locate", "--snapshot", snap, "k"), snap);

    /* diff: adding a fourth server moves about a quarter, all to it */
    FILE *kf = fopen(keys, "w");
    for (int i = 0; i < 2000; i++)
        fprintf(kf, "key:%d\n", i);
    fclose(kf);
    r = run_cli(NULL, 0, ARGS("diff", "a:1,b:2,c:3", "a:1,b:2,c:3,d:4", "--keys", keys));
    ck_assert_msg(r.status == 0, "%s", r.err);
    double moved = -1;
    ck_assert_int_eq(sscanf(r.out, "moved\t%lf", &moved), 1);
    ck_assert(moved > 0.15 && moved < 0.35);
    ck_assert(strstr(r.out, "\td:4\t") != NULL);
    const char *last = strstr(r.out, "keys_moved\t");
    ck_assert_ptr_nonnull(last);
    unsigned long km = 0, kt = 0;
    ck_assert_int_eq(sscanf(last, "keys_moved\t%lu\t%lu", &km, &kt), 2);
    ck_assert_uint_eq(kt, 2000);
    ck_assert(km > 300 && km < 700);
    /* every pair line goes to the new server */
    for (const char *p = strchr(r.out, '\n') + 1; p < last; p = strchr(p, '\n') + 1)
        ck_assert_msg(strncmp(strchr(p, '\t') + 1, "d:4\t", 4) == 0, "%.40s", p);
    run_free(&r);
    /* identical placements: nothing moves */
    r = run_cli(NULL, 0, ARGS("diff", "a:1,b:2", "b:2,a:1", "--mode", "stable-ketama"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.out, "moved\t0.000000\n");
    run_free(&r);
    expect_usage_error(ARGS("diff", "a:1"), "expected OLD and NEW");

    /* replicas: distinct servers; more than there are is under-replicated */
    r = run_cli(NULL, 0, ARGS("locate", "-s", "a:1,b:2,c:3", "--replicas", "2", "k1"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    char s1[64], s2[64];
    ck_assert_int_eq(sscanf(r.out, "k1\t%63[^\t]\t%63[^\t\n]\n", s1, s2), 2);
    ck_assert_str_ne(s1, s2);
    ck_assert(strstr(r.out, "under-replicated") == NULL);
    run_free(&r);
    r = run_cli(NULL, 0, ARGS("locate", "-s", "a:1,b:2", "--replicas", "3", "k1"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert(strstr(r.out, "\tunder-replicated\n") != NULL);
    run_free(&r);
    expect_usage_error(ARGS("locate", "-s", "a:1", "--replicas", "0", "k"), "--replicas");

    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(write_errors_are_reported)
{
    /* stdout on a full device: the lines are lost, so the exit status says so */
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "%s locate -s a,b k1 k2 >/dev/full 2>/dev/null", tu_cli_path());
    int st = system(cmd);
    ck_assert(WIFEXITED(st));
    ck_assert_int_ne(WEXITSTATUS(st), 0);
}
END_TEST

/* ------------------------------------------------------------ clients */

/* mcroute clients: one NAME<TAB>MODE<TAB>HASH<TAB>SUMMARY line per client
 * of the library, in its order; and -m MODE --hash HASH places keys as
 * --client NAME does (servers of weight 1: the weights' rules are the
 * client's own). The message of an unknown --client names the command. */
START_TEST(clients_command)
{
    run r = run_cli(NULL, 0, ARGS("clients"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.err, "");
    char *save = NULL, *copy = strdup(r.out);
    size_t i = 0;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save), i++) {
        char name[64], mode[64], hash[64];
        int at = 0;
        int got = sscanf(line, "%63[^\t]\t%63[^\t]\t%63[^\t]\t%n", name, mode, hash, &at);
        ck_assert_msg(got == 3 && at > 0, "line %zu: %s", i, line);
        ck_assert_ptr_nonnull(mcr_client_name(i));
        ck_assert_str_eq(name, mcr_client_name(i));
        ck_assert_str_eq(line + at, mcr_client_summary(i));
        mcr_mode m;
        mcr_hash h;
        ck_assert_msg(mcr_mode_from_name(mode, &m) == MCR_OK, "%s: mode %s", name, mode);
        ck_assert_msg(mcr_hash_from_name(hash, &h) == MCR_OK, "%s: hash %s", name, hash);
        /* spymemcached's labels resolve names and look addresses up in
         * reverse (LIBMEMCACHED): each gets what it leaves alone */
        const char *list = m == MCR_MODE_SPYMEMCACHED_LIBMEMCACHED
                               ? "cache-a:11211,cache-b:11212,cache-c:11213,cache-d:11211"
                               : "10.0.0.1:11211,10.0.0.2:11211,10.0.0.3:11212,10.0.0.4:11211";
        const char *keys = "user:1\nuser:2\nsession:77\nk\n\nlonger:key:with:parts\n"
                           "a\nb\nc\nd\ne\nf\ng\nh\n";
        run a = run_cli(keys, strlen(keys), ARGS("locate", "-s", list, "--client", name));
        run b = run_cli(keys, strlen(keys), ARGS("locate", "-s", list, "-m", mode, "--hash", hash));
        ck_assert_msg(a.status == 0 && b.status == 0, "%s: %s %s", name, a.err, b.err);
        ck_assert_msg(strcmp(a.out, b.out) == 0, "%s: --client and -m %s --hash %s differ", name,
                      mode, hash);
        run_free(&a);
        run_free(&b);
    }
    ck_assert_ptr_null(mcr_client_name(i)); /* every client, none twice */
    ck_assert_uint_gt(i, 10);
    free(copy);
    run_free(&r);

    /* the unknown client's message suggests this command */
    r = run_cli(NULL, 0, ARGS("locate", "-s", "a", "--client", "nope", "k"));
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, "mcroute clients") != NULL, "%s", r.err);
    run_free(&r);
    r = run_cli(NULL, 0, ARGS("help", "clients"));
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(strncmp(r.out, "Usage: mcroute clients", 22) == 0, "%s", r.out);
    run_free(&r);
    expect_usage_error(ARGS("clients", "extra"), "clients: unexpected argument 'extra'");
    expect_usage_error(ARGS("clients", "-s", "a"), "option '--servers' is not valid here");
    expect_usage_error(ARGS("clients", "--hash", "md5"), "option '--hash' is not valid here");
}
END_TEST

/* ------------------------------------------------------------ operands */

/* OLD and NEW (diff, migrate) and --previous: what names a file that is
 * not there says so, rather than being read as a server list. */
START_TEST(operands_missing_files)
{
    char *dir = tu_tmpdir("cli-operands");
    char snap[256], list[256], here[256];
    snprintf(snap, sizeof(snap), "%s/a.snap", dir);
    snprintf(list, sizeof(list), "%s/servers", dir);
    run r = run_cli(NULL, 0, ARGS("snapshot", "-s", "a,b", "-o", snap));
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);

    expect_usage_error(ARGS("diff", snap, "/nonexistent"),
                       "diff: cannot open /nonexistent: No such file or directory");
    expect_usage_error(ARGS("diff", "/nonexistent/old.snap", snap),
                       "diff: cannot open /nonexistent/old.snap: No such file or directory");
    /* no '/', but a snapshot's name: never a host */
    expect_usage_error(ARGS("diff", snap, "missing.snap"),
                       "diff: cannot open missing.snap: No such file or directory");
    expect_usage_error(ARGS("diff", dir, snap), "diff: cannot open ");
    expect_usage_error(ARGS("diff", dir, snap), ": Is a directory");
    /* neither a file nor a server list: both said */
    expect_usage_error(ARGS("diff", snap, "a:x"),
                       "diff: cannot open a:x: No such file or directory; nor is it a server "
                       "list: server list item 1: \"a:x\": port \"x\"");
    /* (migrate and --previous, which read their operands alike: test_cli_pool) */

    /* what exists is a file; the rest a server list */
    FILE *f = fopen(list, "w");
    ck_assert_ptr_nonnull(f);
    fputs("a\nb\nc\n", f);
    fclose(f);
    r = run_cli(NULL, 0, ARGS("diff", snap, list));
    run l = run_cli(NULL, 0, ARGS("diff", "a,b", "a,b,c"));
    ck_assert_msg(r.status == 0 && l.status == 0, "%s %s", r.err, l.err);
    ck_assert_str_eq(r.out, l.out);
    run_free(&r);
    run_free(&l);
    /* "./FILE" is a file even with a name a host could have */
    int cwd = open(".", O_RDONLY | O_DIRECTORY);
    ck_assert_int_ge(cwd, 0);
    ck_assert_int_eq(chdir(dir), 0);
    snprintf(here, sizeof(here), "./servers");
    r = run_cli(NULL, 0, ARGS("diff", "a,b", here));
    ck_assert_int_eq(fchdir(cwd), 0);
    close(cwd);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "c:11211") != NULL, "%s", r.out);
    run_free(&r);
    tu_tmpdir_free(dir);
}
END_TEST

/* ------------------------------------------------------------ -b */

/* The flags of -b take 0 or 1 (or true, false): any other value is bad
 * input naming the behaviour and the value (libmemcached would take 2 as
 * on, which no one means). */
START_TEST(behavior_flags_are_0_or_1)
{
    const char *lmc = "--SERVER=cache-a --SERVER=cache-b:11212/?3 --SERVER=cache-c";
    const char *flags[] = {"KETAMA", "KETAMA_WEIGHTED", "SORT_HOSTS", "HASH_WITH_NAMESPACE",
                           "HASH_WITH_PREFIX_KEY", "MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED",
                           "sort_hosts"};
    const char *bad[] = {"2", "-1", "01", "yes", "", " 1", "18446744073709551616"};
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
        for (size_t v = 0; v < sizeof(bad) / sizeof(bad[0]); v++) {
            char b[128], want[320];
            snprintf(b, sizeof(b), "%s=%s", flags[i], bad[v]);
            snprintf(want, sizeof(want), "--behavior %s: %s is a flag: 0 or 1 (or true or false), "
                                         "not \"%s\"",
                     b, flags[i], bad[v]);
            expect_usage_error(ARGS("locate", "-l", lmc, "-b", b, "k"), want);
        }
        const char *good[][2] = {{"1", "true"}, {"0", "FALSE"}};
        for (int g = 0; g < 2; g++) {
            char b1[128], b2[128];
            snprintf(b1, sizeof(b1), "%s=%s", flags[i], good[g][0]);
            snprintf(b2, sizeof(b2), "%s=%s", flags[i], good[g][1]);
            run x = run_cli(NULL, 0, ARGS("locate", "-l", lmc, "-b", b1, "k1", "k2", "user:3"));
            run y = run_cli(NULL, 0, ARGS("locate", "-l", lmc, "-b", b2, "k1", "k2", "user:3"));
            ck_assert_msg(x.status == 0 && y.status == 0, "%s: %s %s", b1, x.err, y.err);
            ck_assert_str_eq(x.out, y.out);
            run_free(&x);
            run_free(&y);
        }
    }
    /* the other behaviours were checked already: their values are names or
     * libmemcached's numbers in range */
    expect_usage_error(ARGS("locate", "-l", lmc, "-b", "DISTRIBUTION=7", "k"), "7");
    expect_usage_error(ARGS("locate", "-l", lmc, "-b", "HASH=11", "k"), "11");
    expect_usage_error(ARGS("locate", "-l", lmc, "-b", "KETAMA_HASH=sha1", "k"), "sha1");
    expect_usage_error(ARGS("locate", "-l", lmc, "-b", "DISTRIBUTION=", "k"), "DISTRIBUTION");
}
END_TEST

/* ------------------------------------------------------------ terminals */

/* Keys written to a terminal have their control bytes as \xHH (so a key
 * cannot send the terminal an escape sequence); into a pipe or a file they
 * stay byte for byte. Messages escape what they quote. */
START_TEST(terminal_gets_escaped_keys)
{
    static const char in[] = "plain\n\x1b]0;owned\x07\n\x1b[2Jclear\n"
                             "back\\slash\nc1\xc2\x9b" "31m\nlatin\xe9\ncaf\xc3\xa9\n";
    char *keys = tu_temp_file("cli-tty", in, sizeof(in) - 1);
    int st;
    char *tty = run_cli_pty(ARGS("locate", "-s", "only:1"), keys, 1, &st);
    ck_assert_int_eq(st, 0);
    ck_assert_msg(strchr(tty, '\x1b') == NULL && strchr(tty, '\x07') == NULL, "%s", tty);
    const char *want[] = {"plain\tonly:1", "\\x1b]0;owned\\x07\tonly:1",
                          "\\x1b[2Jclear\tonly:1", "back\\x5cslash\tonly:1",
                          "c1\\xc2\\x9b31m\tonly:1", "latin\\xe9\tonly:1",
                          "caf\xc3\xa9\tonly:1"};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        ck_assert_msg(strstr(tty, want[i]) != NULL, "no '%s' in: %s", want[i], tty);
    free(tty);
    tty = run_cli_pty(ARGS("hash", "--hash", "md5"), keys, 1, &st);
    ck_assert_int_eq(st, 0);
    ck_assert_msg(strchr(tty, '\x1b') == NULL, "%s", tty);
    ck_assert_msg(strstr(tty, "\\x1b[2Jclear\t") != NULL, "%s", tty);
    free(tty);
    tty = run_cli_pty(ARGS("stats", "-s", "only:1", "--top", "10"), keys, 1, &st);
    ck_assert_int_eq(st, 0);
    ck_assert_msg(strchr(tty, '\x1b') == NULL, "%s", tty);
    ck_assert_msg(strstr(tty, "\\x1b]0;owned\\x07\t1\t") != NULL, "%s", tty);
    free(tty);
    /* a pipe: the bytes as they are */
    run r = run_cli(in, sizeof(in) - 1, ARGS("locate", "-s", "only:1"));
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "\x1b]0;owned\x07\tonly:1\n"));
    ck_assert_ptr_nonnull(strstr(r.out, "back\\slash\tonly:1\n"));
    run_free(&r);
    /* an argument quoted by a message */
    r = run_cli(NULL, 0, ARGS("\x1b[2Jcmd"));
    ck_assert_int_eq(r.status, 2);
    ck_assert_str_eq(r.err, "mcroute: unknown command '\\x1b[2Jcmd' (see mcroute --help)\n");
    run_free(&r);
    tu_temp_file_free(keys);
}
END_TEST

static Suite *cli_suite(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, locate_arguments);
    tcase_add_test(tc, locate_stdin_bytes);
    tcase_add_test(tc, locate_many_keys_match_library);
    tcase_add_test(tc, mode_defaults_match_library);
    tcase_add_test(tc, server_file_source);
    tcase_add_test(tc, dump_continuum);
    tcase_add_test(tc, hash_command);
    tcase_add_test(tc, bad_input);
    tcase_add_test(tc, help_everywhere);
    tcase_add_test(tc, libmemcached_source);
    tcase_add_test(tc, write_errors_are_reported);
    tcase_add_test(tc, twemproxy_source);
    tcase_add_test(tc, ketama_file_source);
    tcase_add_test(tc, snapshot_diff_replicas);
    tcase_add_test(tc, clients_command);
    tcase_add_test(tc, operands_missing_files);
    tcase_add_test(tc, behavior_flags_are_0_or_1);
    tcase_add_test(tc, terminal_gets_escaped_keys);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(cli_suite());
}
