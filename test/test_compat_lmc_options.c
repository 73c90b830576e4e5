/* SPDX-License-Identifier: BSD-3-Clause */
/* test_compat_lmc_options.c: mcr_lmc's option language, behaviour values, connection behaviours and pool options against the real libmemcached 1.1.4, and the inputs it refuses. */
#include <libmemcached/memcached.h>
#include <stdio.h>
#include <string.h>

#include "mcroute_libmemcached.h"
/* mcr_pool_options, and the pool's ranges (includes mcroute_pool.h). */
#include "mcroute_pool.h"
#include "test_compat_lmc_util.h"
#include "testutil.h"

/* ------------------------------------------------------------------ option language */

/* The connection behaviours mcr_lmc keeps. */
static const mcr_lmc_conn_behavior conn_behaviors[] = {
    MCR_LMC_POLL_TIMEOUT,         MCR_LMC_CONNECT_TIMEOUT,       MCR_LMC_RETRY_TIMEOUT,
    MCR_LMC_BINARY_PROTOCOL,      MCR_LMC_SND_TIMEOUT,           MCR_LMC_RCV_TIMEOUT,
    MCR_LMC_SERVER_FAILURE_LIMIT, MCR_LMC_AUTO_EJECT_HOSTS,      MCR_LMC_REMOVE_FAILED_SERVERS,
    MCR_LMC_DEAD_TIMEOUT,         MCR_LMC_SERVER_TIMEOUT_LIMIT,
};
#define NCONN (sizeof(conn_behaviors) / sizeof(conn_behaviors[0]))

/* Every connection behaviour reads the same in both. */
static void compare_conn_behaviors(memcached_st *m, const mcr_lmc *l, const char *what)
{
    for (size_t i = 0; i < NCONN; i++) {
        uint64_t mine = 12345;
        ck_assert_int_eq(mcr_lmc_get_conn_behavior(l, conn_behaviors[i], &mine), MCR_OK);
        uint64_t theirs = memcached_behavior_get(m, (memcached_behavior_t)conn_behaviors[i]);
        ck_assert_msg(mine == theirs, "%s: behaviour %d: mcroute %llu, libmemcached %llu", what,
                      (int)conn_behaviors[i], (unsigned long long)mine,
                      (unsigned long long)theirs);
    }
}

/* An option string both sides see: acceptance must match, and placement
 * and connection behaviours when accepted. */
static void check_same_acceptance(tu_rng *r, const char *opts)
{
    char ebuf[1024];
    memcached_return_t chk = libmemcached_check_configuration(opts, strlen(opts), ebuf, sizeof(ebuf));
    mcr_lmc *l = mcr_lmc_new();
    mcr_error e;
    int rc = mcr_lmc_parse_options(l, opts, &e);
    ck_assert_msg((chk == MEMCACHED_SUCCESS) == (rc == MCR_OK),
                  "\"%s\": libmemcached %s (%s), mcroute %s (%s)", opts,
                  memcached_strerror(NULL, chk), ebuf, mcr_strerror(rc),
                  rc == MCR_OK ? "" : e.message);
    if (rc == MCR_OK) {
        memcached_st *m = memcached(opts, strlen(opts));
        mcr_ring *ring = NULL;
        ck_assert(m != NULL);
        compare_conn_behaviors(m, l, opts);
        if (memcached_server_count(m) == 0) {
            ck_assert_int_eq(mcr_lmc_ring(l, &ring, NULL), MCR_ERR_EMPTY);
        } else {
            ck_assert_int_eq(mcr_lmc_ring(l, &ring, &e), MCR_OK);
            compare_keys(r, m, ring, 300, true, opts);
        }
        mcr_ring_free(ring);
        memcached_free(m);
    }
    mcr_lmc_free(l);
}

START_TEST(option_language_table)
{
    static const char *const cases[] = {
        /* accepted */
        "--SERVER=abc", "--server=abc:11212/?3 --SERVER=bcd/?2", "--SERVER=12a",
        "--SERVER=a_b", "--SERVER=a..b", "--SERVER=999.999.999.999", "--SERVER=1.2.3.4.5",
        "--SERVER=consistentx", "--SERVER=abc END --FOO", "--SERVER=abc\t --SERVER=bcd",
        "--SERVER=abc \n--SERVER=bcd", "--SERVER=abc\t:11212", "# c\n --SERVER=abc",
        "--SERVER=abc/?99999", "--SERVER=1.2.3.4567", "--SERVER=abc:0", "--NAMESPACE=abc",
        "--NAMESPACE=\"a\\\"b\" --SERVER=abc --HASH-WITH-NAMESPACE",
        "--DISTRIBUTION=consistent,murmur --SERVER=abc --SERVER=def",
        "--DISTRIBUTION=modula,md5 --SERVER=abc --SERVER=def", "--HASH=Md5 --SERVER=abc --SERVER=def",
        "--SORT-HOSTS --SERVER=zzz --SERVER=aaa --SERVER=mmm", "--VERIFY-KEY --BINARY-PROTOCOL",
        "--USE-UDP --SERVER=abc --SERVER=def", "--SERVER=abc --USE-UDP", "END", "RESET",
        "--SERVER=abc RESET --SERVER=def", "--TCP-KEEPIDLE", "--REMOVE-FAILED-SERVERS=1",
        "--CONNECT-TIMEOUT=99999999999999", "--DISTRIBUTION=consistent --DISTRIBUTION=modula",
        "--SERVER=abc --SERVER=def --DISTRIBUTION=consistent --SORT-HOSTS",
        /* refused by both */
        "--SERVER=a", "--SERVER=ab", "--SERVER=123", "--SERVER=-ab", "--SERVER=consistent",
        "--SERVER=END", "--SERVER=md5", " --SERVER=abc", "--SERVER=abc ", "--SERVER=abc  --SERVER=bcd",
        "--SERVER=abc\n--SERVER=bcd", "#x", "--SERVER=abc #x", "--SERVER=abc:123456",
        "--SERVER=abc:11211/?x", "--SERVER=abc:11211:3", "--SERVER=abc/?100000",
        "--SERVER=abc:11211 /?3", "--SERVER=[::1]:11211", "--SERVER=::1", "--SERVERS=abc,def",
        "--FOO", "--REMOVE_FAILED_SERVERS", "--SERVER-FAILURE-LIMIT=3", "--POOL-MIN",
        "--TCP-KEEPIDLE=5", "--CONNECT-TIMEOUT=-1", "--CONNECT-TIMEOUT=", "--HASH=murmur3",
        "--HASH=default", "--HASH=MD5 --HASH=crc", "--HASH=md5 RESET --HASH=crc",
        "--DISTRIBUTION=ketama", "--DISTRIBUTION=consistent, md5", "--NAMESPACE=foo --NAMESPACE=bar",
        "--NAMESPACE=\"foo bar\"", "--NAMESPACE=ab", "--NAMESPACE=1.2.3.4", "--NAMESPACE=\"\"",
        "--NAMESPACE=md5", "--USE-UDP --BUFFER-REQUESTS", "--BINARY-PROTOCOL --VERIFY-KEY",
        "TRUE", "CSL_ERROR", "ERROR", "--NOREPLYX", "--SORT-HOSTSXYZ", "--", "=", ",",
        "--SERVER=abc,def", "--SERVER=\"abc\"", "SERVERS", "--SERVER=abc-",
    };
    tu_rng r;
    tu_rng_init(&r, 50);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        check_same_acceptance(&r, cases[i]);
}
END_TEST

/* Random strings of the language: valid statements joined by separators,
 * sometimes mutated byte by byte, and soups of its pieces. Acceptance must
 * be the same, and placement when accepted. Kept out on purpose: DEBUG
 * (turns on libmemcached's parser trace for the whole process), file
 * options, sockets and random, and whatever mcroute refuses on purpose
 * (ports over 65535, duplicate servers, long hostnames: see bad_inputs). */
static const char *const fuzz_statements[] = {
    "--SERVER=host-a.example", "--SERVER=host-b:11212", "--SERVER=10.0.0.1/?3",
    "--SERVER=1.2.3.4:11300/?2", "--SERVER=cache_c", "--server=mixed.Case.example:7/?0",
    "--SERVER=q\"uote", "--DISTRIBUTION=consistent", "--DISTRIBUTION=modula",
    "--DISTRIBUTION=consistent,md5", "--HASH=crc", "--HASH=fnv1a_32", "--hash=JENKINS",
    "--NAMESPACE=ns.one", "--NAMESPACE=\"quoted ns\"", "--NAMESPACE=L\"x\"",
    "--SORT-HOSTS", "--HASH-WITH-NAMESPACE", "--BINARY-PROTOCOL", "--VERIFY-KEY",
    "--TCP-NODELAY", "--CONNECT-TIMEOUT=10", "--POOL-MAX=4", "--USE-UDP", "--BUFFER-REQUESTS",
    "--NOREPLY", "RESET", "END", "#comment\n", "--USER-DATA", "--FETCH-VERSION",
};
static const char *const fuzz_pieces[] = {
    "--SERVER=", "--DISTRIBUTION=", "--HASH=", "--NAMESPACE=", "--SORT-HOSTS", "RESET", "END",
    "TRUE", "--FOO", " ", " ", " ", "\t", "\n", "=", ",", ":", ":11212", ":0", "/?", "/?3",
    "123", "7", "consistent", "modula", "md5", "murmur", "ketama", "\"", "\"q s\"", "L\"xy\"",
    "#", "-", ".", "_", "x", "1.2.3.4", "host-a.example", "host-b", "ab",
};
static const char fuzz_bytes[] = " \t\n\"#-_.:/?=,0123456789abcdeEND";

static void fuzz_string(tu_rng *r, char *s, size_t cap)
{
    size_t o = 0;
    s[0] = '\0';
    if (tu_below(r, 4) == 0) { /* a soup of pieces */
        for (int k = 1 + (int)tu_below(r, 12); k > 0; k--) {
            const char *p = fuzz_pieces[tu_below(r, sizeof(fuzz_pieces) / sizeof(fuzz_pieces[0]))];
            if (o + strlen(p) + 1 >= cap)
                break;
            o = append(s, o, p);
        }
        return;
    }
    for (int k = 1 + (int)tu_below(r, 6); k > 0; k--) {
        const char *p =
            fuzz_statements[tu_below(r, sizeof(fuzz_statements) / sizeof(fuzz_statements[0]))];
        static const char *const seps[] = {" ", " ", " ", " ", " ", " \n", "\t ", "  ", ""};
        if (o + strlen(p) + 4 >= cap)
            break;
        if (o > 0)
            o = append(s, o, seps[tu_below(r, sizeof(seps) / sizeof(seps[0]))]);
        o = append(s, o, p);
    }
    for (int m = tu_below(r, 3) == 0 ? 1 + (int)tu_below(r, 3) : 0; m > 0 && o > 0; m--) {
        size_t at = tu_below(r, (uint32_t)o);
        char c = fuzz_bytes[tu_below(r, sizeof(fuzz_bytes) - 1)];
        switch (tu_below(r, 3)) {
        case 0: /* replace */
            s[at] = c;
            break;
        case 1: /* delete */
            memmove(s + at, s + at + 1, o - at);
            o--;
            break;
        default: /* insert */
            if (o + 2 < cap) {
                memmove(s + at + 1, s + at, o - at + 1);
                s[at] = c;
                o++;
            }
        }
    }
}

START_TEST(option_language_fuzz)
{
    tu_rng r;
    tu_rng_init(&r, 51);
    size_t accepted = 0, refused = 0;
    const int n = tu_cases(20000);
    for (int i = 0; i < n; i++) {
        char s[512];
        fuzz_string(&r, s, sizeof(s));
        if (s[0] == '\0' || strstr(s, "DEBUG") != NULL)
            continue;
        mcr_lmc *l = mcr_lmc_new();
        mcr_error e;
        int rc = mcr_lmc_parse_options(l, s, &e);
        mcr_lmc_free(l);
        if (rc == MCR_ERR_UNSUPPORTED || rc == MCR_ERR_DUPLICATE || rc == MCR_ERR_TOO_LONG ||
            rc == MCR_ERR_RANGE)
            continue;
        check_same_acceptance(&r, s);
        if (rc == MCR_OK)
            accepted++;
        else
            refused++;
        g_configs++;
    }
    printf("option_language_fuzz: %zu strings accepted by both, %zu refused by both\n", accepted,
           refused);
    print_counts("option_language_fuzz");
    /* Each side at least 15% of the strings drawn (about 27% and 72%). */
    const size_t least = (size_t)n * 3 / 20;
    ck_assert_msg(accepted > least && refused > least,
                  "fuzz too one-sided: %zu / %zu accepted / refused, at least %zu each", accepted,
                  refused, least);
}
END_TEST

/* ------------------------------------------------------------------ bad inputs */

/* A fingerprint of an mcr_lmc's placement: its ring on fixed keys. */
static void fingerprint(const mcr_lmc *l, char *out, size_t cap)
{
    mcr_ring *ring = NULL;
    size_t o = 0;
    int rc = mcr_lmc_ring(l, &ring, NULL);
    o += (size_t)snprintf(out + o, cap - o, "rc=%d", rc);
    if (rc == MCR_OK) {
        o += (size_t)snprintf(out + o, cap - o, " mode=%d hash=%d n=%zu pts=%zu",
                              (int)mcr_ring_mode(ring), (int)mcr_ring_key_hash(ring),
                              mcr_ring_server_count(ring), mcr_ring_point_count(ring));
        for (size_t i = 0; i < mcr_ring_server_count(ring) && o < cap - 64; i++)
            o += (size_t)snprintf(out + o, cap - o, " %s/%u", mcr_ring_server_name(ring, i),
                                  (unsigned)mcr_ring_server_weight(ring, i));
        for (int k = 0; k < 64 && o < cap - 16; k++) {
            char key[16];
            int len = snprintf(key, sizeof(key), "key%d", k);
            o += (size_t)snprintf(out + o, cap - o, " %u",
                                  (unsigned)mcr_ring_locate(ring, key, (size_t)len));
        }
    }
    mcr_ring_free(ring);
}

static mcr_lmc *base_lmc(void)
{
    mcr_lmc *l = mcr_lmc_new();
    ck_assert_int_eq(mcr_lmc_parse_options(l, "--SERVER=host1.example --SERVER=host2.example:11212/?3 "
                                              "--DISTRIBUTION=consistent --HASH=crc --NAMESPACE=ns1 "
                                              "--HASH-WITH-NAMESPACE",
                                           NULL),
                     MCR_OK);
    ck_assert_int_eq(mcr_lmc_set_behavior(l, (mcr_lmc_behavior)MEMCACHED_BEHAVIOR_HASH, MCR_HASH_FNV1A_32, NULL), MCR_OK);
    return l;
}

static void expect_option_error(const char *opts, int code, const char *needle)
{
    mcr_lmc *l = base_lmc();
    char before[4096], after[4096];
    mcr_error e;
    memset(&e, 0, sizeof(e));
    fingerprint(l, before, sizeof(before));
    int rc = mcr_lmc_parse_options(l, opts, &e);
    ck_assert_msg(rc == code, "\"%s\": got %d (%s), want %d", opts, rc, e.message, code);
    ck_assert_int_eq(e.code, code);
    ck_assert_msg(strstr(e.message, needle) != NULL, "\"%s\": message \"%s\" lacks \"%s\"", opts,
                  e.message, needle);
    fingerprint(l, after, sizeof(after));
    ck_assert_msg(strcmp(before, after) == 0, "\"%s\" changed the state", opts);
    mcr_lmc_free(l);
}

static void expect_behavior_error(const char *name, const char *value, int code, const char *needle)
{
    mcr_lmc *l = base_lmc();
    char before[4096], after[4096];
    mcr_error e;
    fingerprint(l, before, sizeof(before));
    int rc = mcr_lmc_set_behavior_name(l, name, value, &e);
    ck_assert_msg(rc == code, "%s=%s: got %d (%s), want %d", name, value, rc,
                  rc ? e.message : "", code);
    ck_assert_msg(strstr(e.message, needle) != NULL, "%s=%s: message \"%s\" lacks \"%s\"", name,
                  value, e.message, needle);
    fingerprint(l, after, sizeof(after));
    ck_assert_str_eq(before, after);
    mcr_lmc_free(l);
}

START_TEST(bad_inputs)
{
    char longhost[400], opt[512];
    memset(longhost, 'h', 256);
    longhost[256] = '\0';

    expect_option_error("--SERVER=ok.example --FOO-BAR=1", MCR_ERR_UNKNOWN, "--FOO-BAR");
    expect_option_error("--SERVERS=a.example,b.example", MCR_ERR_UNKNOWN, "--SERVERS");
    expect_option_error("--SERVER=ok.example --HASH=sha1", MCR_ERR_UNKNOWN, "sha1");
    expect_option_error("--HASH=murmur3", MCR_ERR_UNKNOWN, "murmur3");
    expect_option_error("--DISTRIBUTION=ketama", MCR_ERR_UNKNOWN, "ketama");
    expect_option_error("--DISTRIBUTION=consistent,sha1", MCR_ERR_UNKNOWN, "sha1");
    expect_option_error("--SERVER=ok.example --SERVER=bad.example:70000", MCR_ERR_RANGE, "70000");
    expect_option_error("--SERVER=bad.example:65536", MCR_ERR_RANGE, "65536");
    expect_option_error("--SERVER=ok.example --SERVER=bad.example/?x", MCR_ERR_SYNTAX, "/?x");
    expect_option_error("--SERVER=bad.example:x1", MCR_ERR_SYNTAX, ":x1");
    expect_option_error("--SERVER=bad.example:11211:3", MCR_ERR_SYNTAX, ":3");
    expect_option_error("--SERVER=dup.example --SERVER=dup.example:11211", MCR_ERR_DUPLICATE,
                        "dup.example");
    expect_option_error("--SERVER=host1.example", MCR_ERR_DUPLICATE, "host1.example");
    expect_option_error("--SERVER=ok.example --DISTRIBUTION=random", MCR_ERR_UNSUPPORTED, "random");
    expect_option_error("--DISTRIBUTION=random,md5", MCR_ERR_UNSUPPORTED, "random");
    snprintf(opt, sizeof(opt), "--SERVER=ok.example --SERVER=%s", longhost);
    expect_option_error(opt, MCR_ERR_TOO_LONG, "255");
    expect_option_error("--SOCKET=\"/tmp/mc.sock\"", MCR_ERR_UNSUPPORTED, "socket");
    expect_option_error("--CONFIGURE-FILE=conf.txt", MCR_ERR_UNSUPPORTED, "CONFIGURE-FILE");
    expect_option_error("INCLUDE \"conf.txt\"", MCR_ERR_UNSUPPORTED, "INCLUDE");
    expect_option_error("--NAMESPACE=again", MCR_ERR_SYNTAX, "once");
    expect_option_error("--HASH=md5 --HASH=crc", MCR_ERR_SYNTAX, "once");
    expect_option_error("--SERVER=ab", MCR_ERR_SYNTAX, "hostname");
    expect_option_error("--SERVER=ok.example ", MCR_ERR_SYNTAX, "expected");
    expect_option_error("--BINARY-PROTOCOL --VERIFY-KEY", MCR_ERR_INVALID, "VERIFY-KEY");
    expect_option_error("CSL_ERROR", MCR_ERR_SYNTAX, "CSL_ERROR");
    expect_option_error("", MCR_ERR_SYNTAX, "empty");

    expect_behavior_error("NO_SUCH_BEHAVIOR", "1", MCR_ERR_UNKNOWN, "NO_SUCH_BEHAVIOR");
    expect_behavior_error("TCP_NODELAY", "1", MCR_ERR_UNKNOWN, "TCP_NODELAY");
    expect_behavior_error("DISTRIBUTION", "ring", MCR_ERR_UNKNOWN, "ring");
    expect_behavior_error("DISTRIBUTION", "random", MCR_ERR_UNSUPPORTED, "random");
    expect_behavior_error("DISTRIBUTION", "virtual_bucket", MCR_ERR_UNSUPPORTED, "bucket");
    expect_behavior_error("DISTRIBUTION", "7", MCR_ERR_RANGE, "7");
    expect_behavior_error("MEMCACHED_BEHAVIOR_HASH", "sha1", MCR_ERR_UNKNOWN, "sha1");
    expect_behavior_error("HASH", "11", MCR_ERR_RANGE, "11");
    expect_behavior_error("SORT_HOSTS", "yes please", MCR_ERR_SYNTAX, "yes please");
    expect_behavior_error("KETAMA", "99999999999999999999999", MCR_ERR_RANGE, "too large");

    /* the numeric API */
    mcr_lmc *l = base_lmc();
    mcr_error e;
    ck_assert_int_eq(mcr_lmc_set_behavior(l, (mcr_lmc_behavior)MEMCACHED_BEHAVIOR_TCP_NODELAY, 1, &e),
                     MCR_ERR_UNKNOWN);
    ck_assert_int_eq(mcr_lmc_set_behavior(l, (mcr_lmc_behavior)MEMCACHED_BEHAVIOR_DISTRIBUTION,
                                          MEMCACHED_DISTRIBUTION_RANDOM, &e),
                     MCR_ERR_UNSUPPORTED);
    ck_assert_int_eq(mcr_lmc_add_server(l, longhost, 11211, 1, &e), MCR_ERR_TOO_LONG);
    ck_assert_int_eq(mcr_lmc_add_server(l, "ok.example", 70000, 1, &e), MCR_ERR_RANGE);
    ck_assert_int_eq(mcr_lmc_add_server(l, "ok.example", 11211, MCR_WEIGHT_MAX + 1, &e), MCR_ERR_RANGE);
    ck_assert_int_eq(mcr_lmc_add_server(l, "host1.example", 0, 1, &e), MCR_ERR_DUPLICATE);
    ck_assert_int_eq(mcr_lmc_add_server(l, "bad host", 11211, 1, &e), MCR_ERR_SYNTAX);
    ck_assert_int_eq(mcr_lmc_add_server(NULL, "x", 1, 1, &e), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_lmc_parse_options(NULL, "--SERVER=abc", &e), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_lmc_parse_options(l, NULL, &e), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_lmc_ring(l, NULL, &e), MCR_ERR_INVALID);
    mcr_lmc_free(l);
    mcr_lmc_free(NULL);

    mcr_lmc *empty = mcr_lmc_new();
    mcr_ring *ring = NULL;
    mcr_config *cfg = NULL;
    ck_assert_int_eq(mcr_lmc_ring(empty, &ring, &e), MCR_ERR_EMPTY);
    ck_assert_int_eq(mcr_lmc_config(empty, &cfg, &e), MCR_ERR_EMPTY);
    ck_assert(ring == NULL && cfg == NULL);
    mcr_lmc_free(empty);
}
END_TEST

/* The value forms the man pages promise: any number for a flag (0 off), as
 * libmemcached takes it, true/false, MEMCACHED_* names, the seventh
 * behaviour HASH_WITH_NAMESPACE; each compared with libmemcached. */
START_TEST(behavior_values)
{
    static const struct {
        const char *name, *value;
        int behavior;
        uint64_t number;
    } ok[] = {
        {"SORT_HOSTS", "7", MEMCACHED_BEHAVIOR_SORT_HOSTS, 7},
        {"sort_hosts", "TRUE", MEMCACHED_BEHAVIOR_SORT_HOSTS, 1},
        {"MEMCACHED_BEHAVIOR_SORT_HOSTS", "false", MEMCACHED_BEHAVIOR_SORT_HOSTS, 0},
        {"KETAMA", "42", MEMCACHED_BEHAVIOR_KETAMA, 42},
        {"KETAMA_WEIGHTED", "True", MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1},
        {"HASH_WITH_NAMESPACE", "2", MEMCACHED_BEHAVIOR_HASH_WITH_PREFIX_KEY, 2},
        {"MEMCACHED_BEHAVIOR_HASH_WITH_PREFIX_KEY", "true",
         MEMCACHED_BEHAVIOR_HASH_WITH_PREFIX_KEY, 1},
        {"DISTRIBUTION", "MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY",
         MEMCACHED_BEHAVIOR_DISTRIBUTION, MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY},
        {"DISTRIBUTION", "consistent_weighted", MEMCACHED_BEHAVIOR_DISTRIBUTION,
         MEMCACHED_DISTRIBUTION_CONSISTENT_WEIGHTED},
        {"DISTRIBUTION", "Consistent_Ketama", MEMCACHED_BEHAVIOR_DISTRIBUTION,
         MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA},
        {"DISTRIBUTION", "1", MEMCACHED_BEHAVIOR_DISTRIBUTION, MEMCACHED_DISTRIBUTION_CONSISTENT},
        {"HASH", "MEMCACHED_HASH_FNV1A_32", MEMCACHED_BEHAVIOR_HASH, MEMCACHED_HASH_FNV1A_32},
        {"HASH", "one_at_a_time", MEMCACHED_BEHAVIOR_HASH, MEMCACHED_HASH_DEFAULT},
        {"KETAMA_HASH", "10", MEMCACHED_BEHAVIOR_KETAMA_HASH, MEMCACHED_HASH_MURMUR3},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        const char *opts = "--SERVER=a1.example --SERVER=b2.example:11300 --SERVER=a1.example:5 "
                           "--NAMESPACE=nsx --HASH=crc";
        memcached_st *m = memcached(opts, strlen(opts));
        mcr_lmc *byname = mcr_lmc_new(), *bynum = mcr_lmc_new();
        mcr_ring *r1 = NULL, *r2 = NULL;
        mcr_error e;
        tu_rng r;
        tu_rng_init(&r, 50 + i);
        ck_assert(m != NULL);
        ck_assert_int_eq(mcr_lmc_parse_options(byname, opts, NULL), MCR_OK);
        ck_assert_int_eq(mcr_lmc_parse_options(bynum, opts, NULL), MCR_OK);
        ck_assert_int_eq(memcached_behavior_set(m, (memcached_behavior_t)ok[i].behavior, ok[i].number),
                         MEMCACHED_SUCCESS);
        ck_assert_msg(mcr_lmc_set_behavior_name(byname, ok[i].name, ok[i].value, &e) == MCR_OK,
                      "%s=%s: %s", ok[i].name, ok[i].value, e.message);
        ck_assert_int_eq(mcr_lmc_set_behavior(bynum, (mcr_lmc_behavior)ok[i].behavior, ok[i].number, &e),
                         MCR_OK);
        /* a server after the setting shows the sort order and the weighting */
        memcached_server_add_with_weight(m, "0first.example", 11211, 3);
        ck_assert_int_eq(mcr_lmc_add_server(byname, "0first.example", 11211, 3, NULL), MCR_OK);
        ck_assert_int_eq(mcr_lmc_add_server(bynum, "0first.example", 11211, 3, NULL), MCR_OK);
        ck_assert_int_eq(mcr_lmc_ring(byname, &r1, NULL), MCR_OK);
        ck_assert_int_eq(mcr_lmc_ring(bynum, &r2, NULL), MCR_OK);
        compare_keys(&r, m, r1, 2000, true, ok[i].value);
        compare_keys(&r, m, r2, 2000, true, ok[i].value);
        mcr_ring_free(r1);
        mcr_ring_free(r2);
        mcr_lmc_free(byname);
        mcr_lmc_free(bynum);
        memcached_free(m);
    }
    expect_behavior_error("DISTRIBUTION", "", MCR_ERR_SYNTAX, "DISTRIBUTION");
    expect_behavior_error("HASH", "12x", MCR_ERR_UNKNOWN, "12x");
    expect_behavior_error("HASH_WITH_NAMESPACE", "", MCR_ERR_SYNTAX, "HASH_WITH_NAMESPACE");
    expect_behavior_error("SORT_HOSTS", "on", MCR_ERR_SYNTAX, "true or false");
    expect_behavior_error("KETAMA_HASH", "11", MCR_ERR_RANGE, "11");
}
END_TEST

/* mcr_lmc_config gives the same placement as mcr_lmc_ring, as a config the
 * caller owns. */
START_TEST(config_roundtrip)
{
    mcr_lmc *l = base_lmc();
    mcr_config *cfg = NULL;
    mcr_ring *a = NULL, *b = NULL;
    ck_assert_int_eq(mcr_lmc_config(l, &cfg, NULL), MCR_OK);
    ck_assert_uint_eq(mcr_config_server_count(cfg), 2);
    ck_assert_int_eq(mcr_ring_new(cfg, &a, NULL), MCR_OK);
    ck_assert_int_eq(mcr_lmc_ring(l, &b, NULL), MCR_OK);
    for (int k = 0; k < 1000; k++) {
        char key[16];
        int len = snprintf(key, sizeof(key), "k%d", k);
        ck_assert_uint_eq(mcr_ring_locate(a, key, (size_t)len), mcr_ring_locate(b, key, (size_t)len));
    }
    mcr_ring_free(a);
    mcr_ring_free(b);
    mcr_config_free(cfg);
    mcr_lmc_free(l);
}
END_TEST

/* The header promises libmemcached's numbering for its enums. */
START_TEST(header_enum_numbering)
{
    ck_assert_int_eq(MCR_LMC_HASH, MEMCACHED_BEHAVIOR_HASH);
    ck_assert_int_eq(MCR_LMC_DISTRIBUTION, MEMCACHED_BEHAVIOR_DISTRIBUTION);
    ck_assert_int_eq(MCR_LMC_SORT_HOSTS, MEMCACHED_BEHAVIOR_SORT_HOSTS);
    ck_assert_int_eq(MCR_LMC_KETAMA, MEMCACHED_BEHAVIOR_KETAMA);
    ck_assert_int_eq(MCR_LMC_KETAMA_WEIGHTED, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED);
    ck_assert_int_eq(MCR_LMC_KETAMA_HASH, MEMCACHED_BEHAVIOR_KETAMA_HASH);
    ck_assert_int_eq(MCR_LMC_DIST_MODULA, MEMCACHED_DISTRIBUTION_MODULA);
    ck_assert_int_eq(MCR_LMC_DIST_CONSISTENT, MEMCACHED_DISTRIBUTION_CONSISTENT);
    ck_assert_int_eq(MCR_LMC_DIST_CONSISTENT_KETAMA, MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA);
    ck_assert_int_eq(MCR_LMC_DIST_RANDOM, MEMCACHED_DISTRIBUTION_RANDOM);
    ck_assert_int_eq(MCR_LMC_DIST_CONSISTENT_KETAMA_SPY, MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY);
    ck_assert_int_eq(MCR_LMC_DIST_CONSISTENT_WEIGHTED, MEMCACHED_DISTRIBUTION_CONSISTENT_WEIGHTED);
    ck_assert_int_eq(MCR_LMC_DIST_VIRTUAL_BUCKET, MEMCACHED_DISTRIBUTION_VIRTUAL_BUCKET);
    ck_assert_int_eq(MCR_LMC_POLL_TIMEOUT, MEMCACHED_BEHAVIOR_POLL_TIMEOUT);
    ck_assert_int_eq(MCR_LMC_CONNECT_TIMEOUT, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT);
    ck_assert_int_eq(MCR_LMC_RETRY_TIMEOUT, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT);
    ck_assert_int_eq(MCR_LMC_BINARY_PROTOCOL, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL);
    ck_assert_int_eq(MCR_LMC_SND_TIMEOUT, MEMCACHED_BEHAVIOR_SND_TIMEOUT);
    ck_assert_int_eq(MCR_LMC_RCV_TIMEOUT, MEMCACHED_BEHAVIOR_RCV_TIMEOUT);
    ck_assert_int_eq(MCR_LMC_SERVER_FAILURE_LIMIT, MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT);
    ck_assert_int_eq(MCR_LMC_AUTO_EJECT_HOSTS, MEMCACHED_BEHAVIOR_AUTO_EJECT_HOSTS);
    ck_assert_int_eq(MCR_LMC_REMOVE_FAILED_SERVERS, MEMCACHED_BEHAVIOR_REMOVE_FAILED_SERVERS);
    ck_assert_int_eq(MCR_LMC_DEAD_TIMEOUT, MEMCACHED_BEHAVIOR_DEAD_TIMEOUT);
    ck_assert_int_eq(MCR_LMC_SERVER_TIMEOUT_LIMIT, MEMCACHED_BEHAVIOR_SERVER_TIMEOUT_LIMIT);
}
END_TEST

/* ------------------------------------------------------------------ connection behaviours */

/* Option strings that set connection behaviours, including the numbers
 * libmemcached's atoi() wraps or saturates: both sides must read the same
 * values back (check_same_acceptance compares them). */
START_TEST(conn_behaviors_option_strings)
{
    static const char *const cases[] = {
        "--SERVER=abc",
        "--CONNECT-TIMEOUT=123 --POLL-TIMEOUT=456 --RETRY-TIMEOUT=7 --RCV-TIMEOUT=789 "
        "--SND-TIMEOUT=11",
        "--REMOVE-FAILED-SERVERS=3", "--REMOVE-FAILED-SERVERS=0",
        "--REMOVE-FAILED-SERVERS=1 --REMOVE-FAILED-SERVERS=0",
        "--REMOVE-FAILED-SERVERS=4294967296", /* atoi: 0 */
        "--REMOVE-FAILED-SERVERS=4294967297", /* atoi: 1 */
        "--CONNECT-TIMEOUT=99999999999999",   /* cut to 32 bits */
        "--POLL-TIMEOUT=2147483648",          /* negative */
        "--POLL-TIMEOUT=4294967295",          /* -1 */
        "--RETRY-TIMEOUT=4294967297",         /* 1 */
        "--RETRY-TIMEOUT=99999999999999999999999", /* strtol saturates: -1 */
        "--RCV-TIMEOUT=0 --SND-TIMEOUT=000000000000000000000000000000000000000012",
        "--Poll-Timeout=10 --connect-timeout=20", "--BINARY-PROTOCOL",
        "--POLL-TIMEOUT=7 RESET --SERVER=abc", "--BINARY-PROTOCOL RESET",
        "--REMOVE-FAILED-SERVERS=1 --SERVER=abc RESET --RETRY-TIMEOUT=9",
        "--POLL-TIMEOUT=7 END --POLL-TIMEOUT=8",
        "--BINARY-PROTOCOL --NAMESPACE=\"a b\" --SERVER=abc",
    };
    tu_rng r;
    tu_rng_init(&r, 60);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        check_same_acceptance(&r, cases[i]);
}
END_TEST

/* memcached_behavior_set() and mcr_lmc_set_conn_behavior() with the same
 * random values, in the same order, on top of the same option string. */
START_TEST(conn_behaviors_set)
{
    static const uint64_t special[] = {0, 1, 2, 1000, 0x7fffffffULL, 0x80000000ULL,
                                       0xffffffffULL, 0x100000000ULL, 0x100000001ULL,
                                       0x7fffffffffffffffULL, UINT64_MAX};
    tu_rng r;
    tu_rng_init(&r, 61);
    for (int round = 0; round < 300; round++) {
        const char *opts = round % 2 ? "--SERVER=abc --POLL-TIMEOUT=77" : "--SERVER=abc";
        memcached_st *m = memcached(opts, strlen(opts));
        mcr_lmc *l = mcr_lmc_new();
        ck_assert(m != NULL && l != NULL);
        ck_assert_int_eq(mcr_lmc_parse_options(l, opts, NULL), MCR_OK);
        int nsets = 1 + (int)tu_below(&r, 12);
        for (int k = 0; k < nsets; k++) {
            mcr_lmc_conn_behavior b = conn_behaviors[tu_below(&r, NCONN)];
            uint64_t v;
            switch (tu_below(&r, 3)) {
            case 0: v = special[tu_below(&r, sizeof(special) / sizeof(special[0]))]; break;
            case 1: v = tu_below(&r, 100000); break;
            default: v = tu_rand(&r); break;
            }
            memcached_return_t mrc = memcached_behavior_set(m, (memcached_behavior_t)b, v);
            mcr_error e;
            int rc = mcr_lmc_set_conn_behavior(l, b, v, &e);
            ck_assert_msg((mrc == MEMCACHED_SUCCESS) == (rc == MCR_OK),
                          "behaviour %d = %llu: libmemcached %s, mcroute %s", (int)b,
                          (unsigned long long)v, memcached_strerror(m, mrc), mcr_strerror(rc));
            if (rc != MCR_OK) { /* only SERVER_FAILURE_LIMIT 0 */
                ck_assert_int_eq(rc, MCR_ERR_RANGE);
                ck_assert_int_eq(b, MCR_LMC_SERVER_FAILURE_LIMIT);
                ck_assert(strstr(e.message, "SERVER_FAILURE_LIMIT") != NULL);
            }
            compare_conn_behaviors(m, l, opts);
            g_configs++;
        }
        /* Placement behaviours are not connection behaviours, and back. */
        uint64_t v = 99;
        ck_assert_int_eq(mcr_lmc_set_conn_behavior(l, (mcr_lmc_conn_behavior)MCR_LMC_HASH, 1, NULL),
                         MCR_ERR_UNKNOWN);
        ck_assert_int_eq(mcr_lmc_get_conn_behavior(l, (mcr_lmc_conn_behavior)MCR_LMC_HASH, &v),
                         MCR_ERR_UNKNOWN);
        ck_assert_int_eq(mcr_lmc_set_behavior(l, (mcr_lmc_behavior)MCR_LMC_POLL_TIMEOUT, 1, NULL),
                         MCR_ERR_UNKNOWN);
        ck_assert_uint_eq(v, 99);
        mcr_lmc_free(l);
        memcached_free(m);
    }
    ck_assert_int_eq(mcr_lmc_set_conn_behavior(NULL, MCR_LMC_POLL_TIMEOUT, 1, NULL),
                     MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_lmc_get_conn_behavior(NULL, MCR_LMC_POLL_TIMEOUT, NULL), MCR_ERR_INVALID);
    print_counts("conn_behaviors_set");
}
END_TEST

/* The documented mapping, computed from what libmemcached itself reports
 * for the same configuration. */
static void expected_pool_options(memcached_st *m, mcr_pool_options *o)
{
    int32_t connect = (int32_t)memcached_behavior_get(m, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT);
    int32_t poll = (int32_t)memcached_behavior_get(m, MEMCACHED_BEHAVIOR_POLL_TIMEOUT);
    int32_t retry = (int32_t)memcached_behavior_get(m, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT);
    o->connect_timeout_ms = connect > 0 ? (unsigned)connect : 0;
    o->request_timeout_ms = poll > 0 ? (unsigned)poll : 0;
    o->retry_timeout_ms = retry > 0 ? (unsigned)retry * 1000u : 1u;
    o->server_failure_limit =
        (unsigned)memcached_behavior_get(m, MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT);
    o->policy = memcached_behavior_get(m, MEMCACHED_BEHAVIOR_REMOVE_FAILED_SERVERS)
                    ? MCR_POLICY_EJECT
                    : MCR_POLICY_FAIL_FAST;
}

/* Options with every field set to a value nothing maps to. */
static mcr_pool_options lmc_sentinel_options(void)
{
    mcr_pool_options o;
    memset(&o, 0, sizeof(o));
    o.connections = 3;
    o.eager = 1;
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

START_TEST(pool_options_match_libmemcached)
{
    static const char *const cases[] = {
        "--SERVER=abc",
        "--SERVER=abc --CONNECT-TIMEOUT=250 --POLL-TIMEOUT=1500 --RETRY-TIMEOUT=30",
        "--SERVER=abc --REMOVE-FAILED-SERVERS=1 --RETRY-TIMEOUT=0",
        "--SERVER=abc --REMOVE-FAILED-SERVERS=7 --CONNECT-TIMEOUT=4294967295",
        "--SERVER=abc --POLL-TIMEOUT=2147483648 --RETRY-TIMEOUT=4294967295",
        "--SERVER=abc --RCV-TIMEOUT=5 --SND-TIMEOUT=5 --BINARY-PROTOCOL",
        "--SERVER=abc --CONNECT-TIMEOUT=86400000 --POLL-TIMEOUT=86400000 --RETRY-TIMEOUT=86400",
        "--SERVER=abc --NAMESPACE=app1.x --HASH-WITH-NAMESPACE",
        "--SERVER=abc --NAMESPACE=app2",
        "--SERVER=abc --NAMESPACE=app3 RESET --SERVER=def",
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *opts = cases[i];
        memcached_st *m = memcached(opts, strlen(opts));
        mcr_lmc *l = mcr_lmc_new();
        mcr_error e;
        ck_assert(m != NULL && l != NULL);
        ck_assert_int_eq(mcr_lmc_parse_options(l, opts, NULL), MCR_OK);
        for (int with_limit = 0; with_limit < 2; with_limit++) {
            if (with_limit) { /* the option string cannot set it */
                ck_assert_int_eq(memcached_behavior_set(m, MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT,
                                                        17),
                                 MEMCACHED_SUCCESS);
                ck_assert_int_eq(mcr_lmc_set_conn_behavior(l, MCR_LMC_SERVER_FAILURE_LIMIT, 17,
                                                           NULL),
                                 MCR_OK);
            }
            mcr_pool_options got = lmc_sentinel_options(), want = got;
            expected_pool_options(m, &want);
            ck_assert_msg(mcr_pool_options_from_lmc(&got, l, &e) == MCR_OK, "%s: %s", opts,
                          e.message);
            ck_assert_msg(got.connect_timeout_ms == want.connect_timeout_ms &&
                              got.request_timeout_ms == want.request_timeout_ms &&
                              got.retry_timeout_ms == want.retry_timeout_ms &&
                              got.server_failure_limit == want.server_failure_limit &&
                              got.policy == want.policy,
                          "%s: got connect %u request %u retry %u limit %u policy %d, want %u %u "
                          "%u %u %d",
                          opts, got.connect_timeout_ms, got.request_timeout_ms,
                          got.retry_timeout_ms, got.server_failure_limit, (int)got.policy,
                          want.connect_timeout_ms, want.request_timeout_ms,
                          want.retry_timeout_ms, want.server_failure_limit, (int)want.policy);
            /* The namespace is libmemcached's prefix key. */
            const char *ns = memcached_callback_get(m, MEMCACHED_CALLBACK_PREFIX_KEY, NULL);
            if (ns == NULL || *ns == '\0')
                ck_assert_ptr_null(got.key_prefix);
            else
                ck_assert_str_eq(got.key_prefix, ns);
            /* Fields that nothing maps are left alone. */
            ck_assert_uint_eq(got.connections, 3);
            ck_assert_int_eq(got.eager, 1);
            ck_assert_uint_eq(got.retry_max_ms, 14);
            ck_assert_uint_eq(got.max_value_size, 15);
            ck_assert_int_eq(got.protocol, MCR_PROTO_META);
            ck_assert_uint_eq(got.max_in_flight, 16);
            ck_assert_int_eq(got.no_coalesce, 1);
        }
        mcr_lmc_free(l);
        memcached_free(m);
    }

    /* A new mcr_lmc: libmemcached's defaults. */
    mcr_lmc *l = mcr_lmc_new();
    mcr_pool_options o = lmc_sentinel_options();
    ck_assert_int_eq(mcr_pool_options_from_lmc(&o, l, NULL), MCR_OK);
    ck_assert_uint_eq(o.connect_timeout_ms, 4000);
    ck_assert_uint_eq(o.request_timeout_ms, 5000);
    ck_assert_uint_eq(o.retry_timeout_ms, 2000);
    ck_assert_uint_eq(o.server_failure_limit, 5);
    ck_assert_int_eq(o.policy, MCR_POLICY_FAIL_FAST);
    ck_assert_ptr_null(o.key_prefix);
    /* The prefix points into the mcr_lmc. */
    ck_assert_int_eq(mcr_lmc_parse_options(l, "--NAMESPACE=pfx.a", NULL), MCR_OK);
    ck_assert_int_eq(mcr_pool_options_from_lmc(&o, l, NULL), MCR_OK);
    ck_assert_str_eq(o.key_prefix, "pfx.a");
    ck_assert_int_eq(mcr_lmc_set_conn_behavior(l, MCR_LMC_AUTO_EJECT_HOSTS, 1, NULL), MCR_OK);
    ck_assert_int_eq(mcr_pool_options_from_lmc(&o, l, NULL), MCR_OK);
    ck_assert_int_eq(o.policy, MCR_POLICY_EJECT);
    ck_assert_int_eq(mcr_pool_options_from_lmc(&o, NULL, NULL), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_pool_options_from_lmc(NULL, l, NULL), MCR_ERR_INVALID);
    mcr_lmc_free(l);
}
END_TEST

/* What the pool cannot take: refused, *opts unchanged, the message naming
 * the behaviour. */
static void expect_fill_error(const char *opts, int behavior, uint64_t value, const char *needle)
{
    mcr_lmc *l = mcr_lmc_new();
    mcr_pool_options o = lmc_sentinel_options(), before = o;
    mcr_error e;
    memset(&e, 0, sizeof(e));
    ck_assert_int_eq(mcr_lmc_parse_options(l, opts, NULL), MCR_OK);
    if (behavior >= 0)
        ck_assert_int_eq(mcr_lmc_set_conn_behavior(l, (mcr_lmc_conn_behavior)behavior, value, NULL),
                         MCR_OK);
    int rc = mcr_pool_options_from_lmc(&o, l, &e);
    ck_assert_msg(rc == MCR_ERR_RANGE, "%s: got %d (%s)", opts, rc, e.message);
    ck_assert_int_eq(e.code, MCR_ERR_RANGE);
    ck_assert_msg(strstr(e.message, needle) != NULL, "%s: message \"%s\" lacks \"%s\"", opts,
                  e.message, needle);
    ck_assert(memcmp(&o, &before, sizeof(o)) == 0);
    mcr_lmc_free(l);
}

START_TEST(pool_options_refused)
{
    expect_fill_error("--POLL-TIMEOUT=0", -1, 0, "POLL_TIMEOUT is 0");
    expect_fill_error("--CONNECT-TIMEOUT=0", -1, 0, "CONNECT_TIMEOUT is 0");
    expect_fill_error("--CONNECT-TIMEOUT=86400001", -1, 0, "CONNECT_TIMEOUT 86400001");
    expect_fill_error("--POLL-TIMEOUT=2147483647", -1, 0, "POLL_TIMEOUT 2147483647");
    expect_fill_error("--RETRY-TIMEOUT=86401", -1, 0, "RETRY_TIMEOUT 86401");
    expect_fill_error("--SERVER=abc", MCR_LMC_SERVER_FAILURE_LIMIT, 1001, "SERVER_FAILURE_LIMIT 1001");
    /* libmemcached checks 64 bits and keeps 32: 2^32 is stored as 0. */
    expect_fill_error("--SERVER=abc", MCR_LMC_SERVER_FAILURE_LIMIT, 0x100000000ULL,
                      "SERVER_FAILURE_LIMIT 0");
    expect_fill_error("--BINARY-PROTOCOL --NAMESPACE=\"a b\"", -1, 0, "a b");
    expect_fill_error("--SERVER=abc", MCR_LMC_POLL_TIMEOUT, 0, "POLL_TIMEOUT");
}
END_TEST

static Suite *compat_suite(void)
{
    Suite *s = suite_create("compat_lmc_options");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, header_enum_numbering);
    tcase_add_test(t, conn_behaviors_option_strings);
    tcase_add_test(t, conn_behaviors_set);
    tcase_add_test(t, pool_options_match_libmemcached);
    tcase_add_test(t, pool_options_refused);
    tcase_add_test(t, option_language_table);
    tcase_add_test(t, option_language_fuzz);
    tcase_add_test(t, bad_inputs);
    tcase_add_test(t, behavior_values);
    tcase_add_test(t, config_roundtrip);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(compat_suite());
}
