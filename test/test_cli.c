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
                unsigned w = m == MCR_MODE_PYMEMCACHE ? 1 : 1 + tu_below(&rng, 5);
                unsigned port = 1000 + tu_below(&rng, 60000);
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
                    lo += (size_t)snprintf(list + lo, sizeof(list) - lo, "%s10.%u.%u.%zu:%u:%u",
                                           i ? "," : "", tu_below(&rng, 256),
                                           tu_below(&rng, 256), i, port, w);
                    break;
                case 1:
                    lo += (size_t)snprintf(list + lo, sizeof(list) - lo, "%scache-%zu-%u:%u:%u",
                                           i ? "," : "", i, tu_below(&rng, 1000), port, w);
                    break;
                default:
                    lo += (size_t)snprintf(list + lo, sizeof(list) - lo, "%s[fd00::%zx]:%u:%u",
                                           i ? "," : "", i + 1, port, w);
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
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(cli_suite());
}
