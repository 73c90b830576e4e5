/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cli_stats.c: Check suite of mcroute stats, --json, help and version, exit statuses of every command and the progress line, run as real processes. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mcroute.h"
#include "mcroute_snapshot.h"
#include "clirun.h"
#include "testutil.h"
#include "testutil_config.h"

#define HASH_VALUES 4294967296.0
#define MAX_LINES 4096
#define MAX_FIELDS 8

static const char *const all_commands[] = {"locate", "dump", "hash", "stats", "snapshot",
                                           "diff", "set", "get", "delete", "probe"};
#define NCOMMANDS (sizeof(all_commands) / sizeof(all_commands[0]))

/* ------------------------------------------------------------ helpers */

/* The lines of a command's output split at tabs, with the [section] each
 * line is in (NULL before any). A server may be named "[::1]:11211": a
 * header is told by having no tab, not by its bracket. */
typedef struct table {
    char *buf;
    int n;
    int nf[MAX_LINES];
    char *f[MAX_LINES][MAX_FIELDS];
    char *section[MAX_LINES];
} table;

static void table_parse(table *t, const char *out)
{
    memset(t, 0, sizeof(*t));
    t->buf = strdup(out);
    char *section = NULL, *save = NULL;
    for (char *line = strtok_r(t->buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strchr(line, '\t') == NULL) { /* a section header: the only lines without a tab */
            section = line;
            continue;
        }
        ck_assert_int_lt(t->n, MAX_LINES);
        int i = t->n++;
        t->section[i] = section;
        char *s2 = NULL;
        for (char *f = strtok_r(line, "\t", &s2); f && t->nf[i] < MAX_FIELDS;
             f = strtok_r(NULL, "\t", &s2))
            t->f[i][t->nf[i]++] = f;
    }
}

static void table_free(table *t)
{
    free(t->buf);
}

/* Line `index` of a section (its fields), or -1. */
static int table_row(const table *t, const char *section, int index)
{
    for (int i = 0; i < t->n; i++)
        if (t->section[i] && strcmp(t->section[i], section) == 0 && index-- == 0)
            return i;
    return -1;
}

static int table_rows(const table *t, const char *section)
{
    int n = 0;
    while (table_row(t, section, n) >= 0)
        n++;
    return n;
}

/* The VALUE of NAME<TAB>VALUE in a section; fails when missing. */
static const char *table_value(const table *t, const char *section, const char *name)
{
    for (int i = 0; i < t->n; i++)
        if (t->section[i] && strcmp(t->section[i], section) == 0 && t->nf[i] == 2 &&
            strcmp(t->f[i][0], name) == 0)
            return t->f[i][1];
    ck_abort_msg("no %s line in %s", name, section);
    return NULL;
}

static double table_number(const table *t, const char *section, const char *name)
{
    return strtod(table_value(t, section, name), NULL);
}

static char *temp_file(const char *text, size_t len)
{
    return tu_temp_file("cli-stats", text, len);
}

/* Bytes appended to a malloc'd buffer. */
typedef struct text_buf {
    char *p;
    size_t len, cap;
} text_buf;

static void buf_add(text_buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        ck_assert_ptr_nonnull(b->p);
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

/* Balance of x[0..n-1] as mcroute(1) defines it. */
static void balance(const double *x, const double *expected, int n, double *ptm, double *cv,
                    double *pte)
{
    double sum = 0, max = 0, rel = 0, var = 0;
    for (int i = 0; i < n; i++) {
        sum += x[i];
        max = x[i] > max ? x[i] : max;
        rel = x[i] / expected[i] > rel ? x[i] / expected[i] : rel;
    }
    double mean = sum / n;
    for (int i = 0; i < n; i++)
        var += (x[i] - mean) * (x[i] - mean);
    *ptm = max / mean;
    *cv = sqrt(var / n) / mean;
    *pte = rel;
}

#define ck_assert_near(a, b, eps)                                                              \
    ck_assert_msg(fabs((double)(a) - (double)(b)) <= (eps), "%s = %.15g, %s = %.15g (eps %g)", \
                  #a, (double)(a), #b, (double)(b), (double)(eps))

/* Printed with 12 decimals: 5e-13 of rounding, and some room for the
 * floating-point sums. */
#define PRINTED 2e-12

static mcr_ring *lib_ring(const char *list, const char *mode, const char *hash)
{
    mcr_mode m;
    mcr_hash h;
    ck_assert_int_eq(mcr_mode_from_name(mode, &m), MCR_OK);
    ck_assert_int_eq(mcr_hash_from_name(hash, &h), MCR_OK);
    return tu_ring(list, m, h);
}

/* Python's json module is the independent parser: required, never skipped
 * (under valgrind, scripts/test.sh leaves python3 untraced). */
static void python_required(void)
{
    ck_assert_msg(system(TU_PYTHON3 " -c 'import json' >/dev/null 2>&1") == 0,
                  TU_PYTHON3 " with its json module is needed (Debian package python3)");
}

/* test_cli_json.py KIND: the JSON output says what the text output says. */
static void python_agrees(const char *kind, const run *json, const run *text)
{
    python_required();
    char *jf = temp_file(json->out, json->outlen);
    char *tf = temp_file(text->out, text->outlen);
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), TU_PYTHON3 " '%s/test/test_cli_json.py' %s '%s' '%s'", tu_src_dir(),
             kind, jf, tf);
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: JSON and text disagree:\n%s\n%s",
                  kind, json->out, text->out);
    tu_temp_file_free(jf);
    tu_temp_file_free(tf);
}

/* ------------------------------------------------------------ stats: the ring */

/* The shares of the continuum modes, recomputed from `mcroute dump`: each
 * point owns the values from just above the previous point up to its own,
 * the first also the wrap-around. */
START_TEST(stats_ring_shares_match_dump)
{
    const char *list = "a:1:1,b:2:3,c:3:2,[::1]:4:1,e:5:1";
    const char *modes[] = {"ketama", "consistent", "weighted", "spy", "spy-weighted",
                           "stable-ketama", "twemproxy-ketama"};
    const char *hashes[] = {"md5", "fnv1a_32", "md5", "default", "md5", "md5", "fnv1a_64"};
    for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
        run st = run_cli(NULL, 0, ARGS("stats", "-s", list, "--mode", modes[m], "--hash", hashes[m]));
        run dp = run_cli(NULL, 0, ARGS("dump", "-s", list, "--mode", modes[m], "--hash", hashes[m]));
        ck_assert_msg(st.status == 0, "%s: %s", modes[m], st.err);
        ck_assert_msg(dp.status == 0, "%s: %s", modes[m], dp.err);
        ck_assert_str_eq(st.err, "");
        mcr_ring *ring = lib_ring(list, modes[m], hashes[m]);
        int n = (int)mcr_ring_server_count(ring);

        /* owned hash values and points per server name, from the dump */
        double owned[8] = {0};
        size_t points[8] = {0}, npoints = 0;
        unsigned long long first = 0, prev = 0;
        int first_server = -1;
        for (char *p = dp.out; *p; p = strchr(p, '\n') + 1) {
            unsigned long long v = strtoull(p, NULL, 10);
            const char *name = strchr(p, '\t') + 1;
            size_t nl = (size_t)(strchr(name, '\n') - name);
            int s = -1;
            for (int i = 0; i < n; i++)
                if (strlen(mcr_ring_server_name(ring, i)) == nl &&
                    strncmp(mcr_ring_server_name(ring, i), name, nl) == 0)
                    s = i;
            ck_assert_int_ge(s, 0);
            if (npoints == 0) {
                first = v;
                first_server = s;
            } else {
                owned[s] += (double)(v - prev);
            }
            prev = v;
            points[s]++;
            npoints++;
        }
        owned[first_server] += (double)first + 1 + (4294967295.0 - (double)prev);

        table t;
        table_parse(&t, st.out);
        ck_assert_int_eq(table_rows(&t, "[servers]"), n);
        double share[8], expected[8], sum = 0, wsum = 0;
        for (int i = 0; i < n; i++)
            wsum += mcr_ring_server_weight(ring, i);
        int weighted = strcmp(modes[m], "consistent") != 0 && strcmp(modes[m], "spy") != 0;
        for (int i = 0; i < n; i++) {
            int r = table_row(&t, "[servers]", i);
            ck_assert_int_eq(t.nf[r], 5);
            ck_assert_str_eq(t.f[r][0], mcr_ring_server_name(ring, i));
            ck_assert_uint_eq(strtoul(t.f[r][1], NULL, 10), mcr_ring_server_weight(ring, i));
            ck_assert_uint_eq(strtoul(t.f[r][2], NULL, 10), points[i]);
            share[i] = strtod(t.f[r][3], NULL);
            ck_assert_near(share[i], owned[i] / HASH_VALUES, PRINTED);
            expected[i] = strtod(t.f[r][4], NULL);
            ck_assert_near(expected[i], weighted ? mcr_ring_server_weight(ring, i) / wsum : 1.0 / n,
                           PRINTED);
            sum += share[i];
        }
        ck_assert_near(sum, 1.0, 1e-9);
        ck_assert_str_eq(table_value(&t, "[ring]", "mode"), modes[m]);
        ck_assert_str_eq(table_value(&t, "[ring]", "hash"), hashes[m]);
        ck_assert_uint_eq(strtoul(table_value(&t, "[ring]", "servers"), NULL, 10), (unsigned)n);
        ck_assert_uint_eq(strtoul(table_value(&t, "[ring]", "points"), NULL, 10), npoints);
        double ptm, cv, pte;
        balance(share, expected, n, &ptm, &cv, &pte);
        ck_assert_near(table_number(&t, "[ring]", "peak_to_mean"), ptm, 1e-9);
        ck_assert_near(table_number(&t, "[ring]", "cv"), cv, 1e-9);
        ck_assert_near(table_number(&t, "[ring]", "peak_to_expected"), pte, 1e-9);
        ck_assert_int_eq(table_rows(&t, "[keys]"), 0);
        table_free(&t);
        mcr_ring_free(ring);
        run_free(&st);
        run_free(&dp);
    }
}
END_TEST

/* Modula modes have no continuum: the owner of a hash value depends on its
 * remainder only, so one period of mcr_ring_find() (a library call, not the
 * CLI's arithmetic) says who owns what. */
START_TEST(stats_modula_shares)
{
    const char *list = "a:1:1,b:2:3,c:3:2,d:4:5";
    const char *modes[] = {"modula", "twemproxy-modula"};
    for (int m = 0; m < 2; m++) {
        mcr_ring *ring = lib_ring(list, modes[m], "md5");
        size_t n = mcr_ring_server_count(ring);
        unsigned long long period = 0;
        for (size_t i = 0; i < n; i++)
            period += m == 0 ? 1 : mcr_ring_server_weight(ring, i);
        unsigned long long full = 4294967296ULL / period, rest = 4294967296ULL % period;
        double owned[8] = {0};
        for (unsigned long long h = 0; h < period; h++)
            owned[mcr_ring_find(ring, (uint32_t)h)] += (double)full;
        for (unsigned long long h = full * period; h < 4294967296ULL; h++)
            owned[mcr_ring_find(ring, (uint32_t)h)] += 1;
        ck_assert_uint_eq(4294967296ULL - full * period, rest);

        run st = run_cli(NULL, 0, ARGS("stats", "-s", list, "-m", modes[m], "--hash", "md5"));
        ck_assert_msg(st.status == 0, "%s", st.err);
        table t;
        table_parse(&t, st.out);
        double sum = 0, wsum = 0;
        for (size_t i = 0; i < n; i++)
            wsum += mcr_ring_server_weight(ring, i);
        for (size_t i = 0; i < n; i++) {
            int r = table_row(&t, "[servers]", (int)i);
            ck_assert_str_eq(t.f[r][2], "0"); /* no point */
            ck_assert_near(strtod(t.f[r][3], NULL), owned[i] / HASH_VALUES, PRINTED);
            double want = m == 0 ? 1.0 / (double)n : mcr_ring_server_weight(ring, i) / wsum;
            ck_assert_near(strtod(t.f[r][4], NULL), want, PRINTED);
            sum += strtod(t.f[r][3], NULL);
        }
        ck_assert_near(sum, 1.0, 1e-9);
        ck_assert_str_eq(table_value(&t, "[ring]", "points"), "0");
        ck_assert_str_eq(table_value(&t, "[ring]", "mode"), modes[m]);
        table_free(&t);
        run_free(&st);
        mcr_ring_free(ring);
    }
}
END_TEST

/* Table modes: each server's table entries, counted here from the
 * snapshot the same servers make, are the points column and the share. */
START_TEST(stats_table_modes)
{
    const char *list = "a:1:1,b:2:3,c:3:2";
    const char *modes[] = {"maglev", "slots", "jump", "rendezvous"};
    for (int m = 0; m < 4; m++) {
        mcr_config *cfg = mcr_config_new();
        mcr_mode mode;
        ck_assert_int_eq(mcr_mode_from_name(modes[m], &mode), MCR_OK);
        ck_assert_int_eq(mcr_config_set_mode(cfg, mode), MCR_OK);
        ck_assert_int_eq(mcr_config_add_servers(cfg, list, NULL), MCR_OK);
        mcr_snapshot *snap = NULL;
        ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &snap, NULL), MCR_OK);
        size_t t = mcr_snapshot_table_size(snap), n = mcr_snapshot_server_count(snap);
        size_t entries[3] = {0};
        for (size_t i = 0; i < t; i++)
            entries[mcr_snapshot_table_entry(snap, i)]++;

        run st = run_cli(NULL, 0, ARGS("stats", "-s", list, "-m", modes[m]));
        ck_assert_msg(st.status == 0, "%s", st.err);
        table tb;
        table_parse(&tb, st.out);
        double sum = 0;
        for (size_t i = 0; i < n; i++) {
            int r = table_row(&tb, "[servers]", (int)i);
            double want = m == 3 ? (double)(i == 0 ? 1 : i == 1 ? 3 : 2) / 6.0
                                 : (double)entries[i] / (double)t;
            ck_assert_uint_eq(strtoull(tb.f[r][2], NULL, 10), m == 3 ? 0 : entries[i]);
            ck_assert_near(strtod(tb.f[r][3], NULL), want, PRINTED);
            sum += strtod(tb.f[r][3], NULL);
        }
        ck_assert_near(sum, 1.0, 1e-9);
        ck_assert_str_eq(table_value(&tb, "[ring]", "mode"), modes[m]);
        table_free(&tb);
        run_free(&st);
        mcr_snapshot_unref(snap);
        mcr_config_free(cfg);
    }
}
END_TEST

/* The modes whose key itself places it (the proxies' and the Python
 * clients'): each server's RING_SHARE (the placement's share of the key's
 * hash, or the model's) sums to 1 and is the share of 40,000 keys within
 * sampling error; none owns the whole ring. */
START_TEST(stats_key_placed_modes)
{
    static const struct {
        const char *client, *list;
    } cases[] = {
        {"pymemcache", "10.0.0.1:11211,10.0.0.2:11211,10.0.0.3:11211,10.0.0.4:11211"},
        {"python-memcached", "10.0.0.1:11211:2,10.0.0.2:11211,10.0.0.3:11211:3,10.0.0.4"},
        {"nginx", "10.0.0.1:11211:2,10.0.0.2:11211,10.0.0.3:11211:3,10.0.0.4"},
        {"mcrouter-ch3", "10.0.0.1:11211,10.0.0.2:11211,10.0.0.3:11211,10.0.0.4:11211"},
        {"memcached-proxy-jump", "10.0.0.1:11211,10.0.0.2:11211,10.0.0.3:11211,10.0.0.4"},
        {"envoy-maglev", "10.0.0.1:11211:2,10.0.0.2:11211,10.0.0.3:11211:3,10.0.0.4:11211"},
        {"envoy-ring-hash", "10.0.0.1:11211:2,10.0.0.2:11211,10.0.0.3:11211:3,10.0.0.4"},
        {"mcrouter-wch3", "10.0.0.1:11211:1,10.0.0.2:11211:0.5,10.0.0.3:11211:0.2,10.0.0.4"},
    };
    enum { N = 40000 };
    char *in = malloc(N * 16);
    ck_assert_ptr_nonnull(in);
    size_t inlen = 0;
    for (int i = 0; i < N; i++)
        inlen += (size_t)sprintf(in + inlen, "k%d\n", i);
    char *keys = temp_file(in, inlen);
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        run st = run_cli(NULL, 0,
                         ARGS("stats", "--client", cases[c].client, "-s", cases[c].list, "--keys",
                              keys));
        ck_assert_msg(st.status == 0, "%s: %s", cases[c].client, st.err);
        table tb;
        table_parse(&tb, st.out);
        double sum = 0;
        for (int i = 0; i < 4; i++) {
            int r = table_row(&tb, "[servers]", i);
            double ring = strtod(tb.f[r][3], NULL), key = strtod(tb.f[r][6], NULL);
            ck_assert_msg(fabs(ring - key) <= 0.015 && ring < 0.99,
                          "%s: server %d: ring share %g, keys %g", cases[c].client, i, ring, key);
            sum += ring;
        }
        ck_assert_msg(fabs(sum - 1.0) <= 1e-9, "%s: shares add up to %.12f", cases[c].client,
                      sum);
        table_free(&tb);
        run_free(&st);
    }
    tu_temp_file_free(keys);
    free(in);
}
END_TEST

/* ------------------------------------------------------------ stats: keys */

/* Key counts against `mcroute locate` over the same keys. */
START_TEST(stats_keys_match_locate)
{
    tu_rng rng;
    tu_rng_init(&rng, 31);
    enum { N = 20000 };
    char *in = malloc(N * 64 + 64);
    size_t inlen = 0;
    for (int i = 0; i < N; i++) {
        char k[64];
        size_t kl = tu_key(&rng, k, 40);
        memcpy(in + inlen, k, kl);
        inlen += kl;
        in[inlen++] = '\n';
    }
    /* bytes that stdin keys may hold, an empty key, a key twice, no last newline */
    static const char odd[] = "tab\tkey\nsp ace\r\n\n\xff\xfe\nnul\0in\nuser:1\nuser:1";
    memcpy(in + inlen, odd, sizeof(odd) - 1);
    inlen += sizeof(odd) - 1;
    char *keys = temp_file(in, inlen);
    const char *list = "10.0.0.1:11211:2,10.0.0.2:11211,10.0.0.3:11212:3";

    run st = run_cli(NULL, 0, ARGS("stats", "-s", list, "--keys", keys));
    run st2 = run_cli(in, inlen, ARGS("stats", "--keys=-", "-s", list));
    run lo = run_cli(in, inlen, ARGS("locate", "-s", list));
    ck_assert_msg(st.status == 0, "%s", st.err);
    ck_assert_msg(lo.status == 0, "%s", lo.err);
    ck_assert_str_eq(st.out, st2.out); /* a file and standard input alike */

    mcr_ring *ring = lib_ring(list, "ketama", "md5");
    int n = (int)mcr_ring_server_count(ring);
    /* count locate's lines per server: the server is after the last tab */
    size_t count[8] = {0}, total = 0;
    for (size_t o = 0; o < lo.outlen;) {
        const char *nl = memchr(lo.out + o, '\n', lo.outlen - o);
        const char *tab = nl;
        while (*tab != '\t')
            tab--;
        for (int i = 0; i < n; i++)
            if (strncmp(tab + 1, mcr_ring_server_name(ring, i), (size_t)(nl - tab - 1)) == 0 &&
                strlen(mcr_ring_server_name(ring, i)) == (size_t)(nl - tab - 1))
                count[i]++;
        total++;
        o = (size_t)(nl - lo.out) + 1;
    }
    ck_assert_uint_eq(total, N + 7);

    table t;
    table_parse(&t, st.out);
    double ks[8], expected[8];
    size_t sum = 0;
    for (int i = 0; i < n; i++) {
        int r = table_row(&t, "[servers]", i);
        ck_assert_int_eq(t.nf[r], 7);
        ck_assert_uint_eq(strtoul(t.f[r][5], NULL, 10), count[i]);
        ks[i] = strtod(t.f[r][6], NULL);
        ck_assert_near(ks[i], (double)count[i] / (double)total, PRINTED);
        expected[i] = strtod(t.f[r][4], NULL);
        sum += count[i];
    }
    ck_assert_uint_eq(sum, total);
    ck_assert_uint_eq(strtoul(table_value(&t, "[keys]", "total"), NULL, 10), total);
    double c[8];
    for (int i = 0; i < n; i++)
        c[i] = (double)count[i];
    double ptm, cv, pte;
    balance(c, expected, n, &ptm, &cv, &pte); /* of the counts: ptm and cv alike */
    ck_assert_near(table_number(&t, "[keys]", "peak_to_mean"), ptm, 1e-9);
    ck_assert_near(table_number(&t, "[keys]", "cv"), cv, 1e-9);
    balance(ks, expected, n, &ptm, &cv, &pte);
    ck_assert_near(table_number(&t, "[keys]", "peak_to_expected"), pte, 1e-9);
    /* the literal lines of the issue: peak_to_mean<TAB>X and cv<TAB>X, for
     * the ring (after [ring]) and for the keys (after [keys]) */
    const char *ring_sec = strstr(st.out, "\n[ring]\n"), *keys_sec = strstr(st.out, "\n[keys]\n");
    ck_assert_ptr_nonnull(ring_sec);
    ck_assert_ptr_nonnull(keys_sec);
    const char *a = strstr(ring_sec, "\npeak_to_mean\t"), *b = strstr(ring_sec, "\ncv\t");
    ck_assert(a != NULL && a < keys_sec && b != NULL && b < keys_sec);
    ck_assert_ptr_nonnull(strstr(keys_sec, "\npeak_to_mean\t"));
    ck_assert_ptr_nonnull(strstr(keys_sec, "\ncv\t"));

    run js = run_cli(NULL, 0, ARGS("stats", "-s", list, "--keys", keys, "--json"));
    ck_assert_msg(js.status == 0, "%s", js.err);
    python_agrees("stats", &js, &st);
    run_free(&js);

    table_free(&t);
    mcr_ring_free(ring);
    run_free(&st);
    run_free(&st2);
    run_free(&lo);
    tu_temp_file_free(keys);
    free(in);
}
END_TEST

START_TEST(stats_edge_cases)
{
    /* one server owns everything */
    run r = run_cli(NULL, 0, ARGS("stats", "-s", "only:1"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    static const char one[] = "[servers]\nonly:1\t1\t160\t1.000000000000\t1.000000000000\n";
    ck_assert_msg(strncmp(r.out, one, strlen(one)) == 0, "%s", r.out);
    ck_assert_ptr_nonnull(strstr(r.out, "\npeak_to_mean\t1.000000000000\ncv\t0.000000000000\n"));
    run_free(&r);

    /* no key: counts 0, the rest undefined: '-' and null */
    char *empty = temp_file("", 0);
    r = run_cli(NULL, 0, ARGS("stats", "-s", "a:1,b:2", "--keys", empty));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "\t0\t-\n"));
    ck_assert_ptr_nonnull(
        strstr(r.out, "[keys]\ntotal\t0\npeak_to_mean\t-\ncv\t-\npeak_to_expected\t-\n"));
    run js = run_cli(NULL, 0, ARGS("stats", "-s", "a:1,b:2", "--keys", empty, "--json"));
    ck_assert_msg(js.status == 0, "%s", js.err);
    ck_assert_ptr_nonnull(strstr(js.out, "\"keys\": 0, \"key_share\": null}"));
    ck_assert_ptr_nonnull(strstr(
        js.out, "\"keys\": {\"total\": 0,\n  \"peak_to_mean\": null, \"cv\": null, "
                "\"peak_to_expected\": null}}\n"));
    python_agrees("stats", &js, &r);
    run_free(&js);
    run_free(&r);
    tu_temp_file_free(empty);

    /* a snapshot places like its list; libmemcached consistent ignores weights */
    char *dir = tu_tmpdir("cli-stats-dir");
    char snap[256];
    snprintf(snap, sizeof(snap), "%s/s.snap", dir);
    r = run_cli(NULL, 0, ARGS("snapshot", "-s", "a:1:2,b:2,c:3", "-o", snap));
    ck_assert_int_eq(r.status, 0);
    run_free(&r);
    run a = run_cli(NULL, 0, ARGS("stats", "--snapshot", snap));
    run b = run_cli(NULL, 0, ARGS("stats", "-s", "a:1:2,b:2,c:3"));
    ck_assert_int_eq(a.status, 0);
    ck_assert_str_eq(a.out, b.out);
    run_free(&a);
    run_free(&b);
    tu_tmpdir_free(dir);
    r = run_cli(NULL, 0,
                ARGS("stats", "-l", "--SERVER=cache1:11211/?3 --SERVER=cache2:11211",
                     "-b", "DISTRIBUTION=consistent"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "cache1:11211\t3\t100\t"));
    ck_assert_ptr_nonnull(strstr(r.out, "\t0.500000000000\n"));
    ck_assert_ptr_nonnull(strstr(r.out, "[ring]\nmode\tconsistent\n"));
    run_free(&r);

    expect_usage_error(ARGS("stats", "-s", "a", "k1"), "stats: unexpected argument 'k1'");
    expect_usage_error(ARGS("stats", "-s", "a", "--keys", "/nonexistent/keys"),
                       "/nonexistent/keys");
    expect_usage_error(ARGS("stats", "--keys", "-"), "no servers");
    expect_usage_error(ARGS("stats", "-s", "a", "--keys", "/tmp"), "/tmp: Is a directory");
    expect_usage_error(ARGS("diff", "a", "b", "--keys", "/tmp"), "/tmp: Is a directory");
    expect_usage_error(ARGS("stats", "-s", "a", "--replicas", "2"), "not valid here");
    expect_usage_error(ARGS("stats", "-s", "a", "--keys", "x", "--keys", "y"), "--keys given twice");
}
END_TEST

/* --top N: the N most frequent keys, counted here, with their owners and
 * shares; from --keys FILE or standard input; the same in JSON. */
START_TEST(stats_top_keys)
{
    /* counts: hot:1 50, hot:2 30, then a tie of 10 between the empty key,
     * warm:a and warm:b (byte order), a key with a tab 5, 200 keys once */
    text_buf in = {0};
    for (int i = 0; i < 200; i++) {
        if (i < 50)
            buf_add(&in, "hot:1\n", 6);
        if (i < 30)
            buf_add(&in, "hot:2\n", 6);
        if (i < 10) {
            buf_add(&in, "warm:b\n\nwarm:a\n", 15);
        }
        if (i < 5)
            buf_add(&in, "tab\tkey\n", 8);
        char k[32];
        int n = snprintf(k, sizeof(k), "cold:%d\n", i);
        buf_add(&in, k, (size_t)n);
    }
    const size_t total = 50 + 30 + 30 + 5 + 200;
    char *keys = temp_file(in.p, in.len);
    const char *list = "10.0.0.1:11211:2,10.0.0.2:11211,10.0.0.3:11212";
    mcr_ring *ring = lib_ring(list, "ketama", "md5");

    run r = run_cli(NULL, 0, ARGS("stats", "-s", list, "--keys", keys, "--top", "5"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    const char *want_keys[] = {"hot:1", "hot:2", "", "warm:a", "warm:b"};
    const size_t want_counts[] = {50, 30, 10, 10, 10};
    char want[1024];
    size_t o = (size_t)snprintf(want, sizeof(want), "[top]\n");
    for (int i = 0; i < 5; i++) {
        const char *k = want_keys[i];
        o += (size_t)snprintf(want + o, sizeof(want) - o, "%s\t%zu\t%.12f\t%s\n", k,
                              want_counts[i], (double)want_counts[i] / (double)total,
                              mcr_ring_server_name(ring, mcr_ring_locate(ring, k, strlen(k))));
    }
    const char *top = strstr(r.out, "\n[top]\n");
    ck_assert_msg(top != NULL, "%s", r.out);
    ck_assert_str_eq(top + 1, want); /* the last section */
    /* the sections before it are those of --keys */
    run k = run_cli(NULL, 0, ARGS("stats", "-s", list, "--keys", keys));
    ck_assert_uint_eq((size_t)(top + 1 - r.out), k.outlen);
    ck_assert(strncmp(r.out, k.out, k.outlen) == 0);
    run_free(&k);

    /* without --keys, standard input */
    run s = run_cli(in.p, in.len, ARGS("stats", "-s", list, "--top", "5"));
    ck_assert_msg(s.status == 0, "%s", s.err);
    ck_assert_str_eq(s.out, r.out);
    run_free(&s);
    run_free(&r);

    /* more than there are: every distinct key once, counts adding up */
    r = run_cli(NULL, 0, ARGS("stats", "-s", list, "--keys", keys, "--top=1000"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    top = strstr(r.out, "\n[top]\n") + 7;
    size_t lines = 0, sum = 0;
    for (const char *p = top; *p; p = strchr(p, '\n') + 1) {
        /* COUNT follows the third tab from the end (a key may hold tabs) */
        const char *t = strchr(p, '\n');
        for (int tabs = 0; t > p && tabs < 3;)
            tabs += *--t == '\t';
        sum += strtoul(t + 1, NULL, 10);
        lines++;
    }
    ck_assert_uint_eq(lines, 5 + 1 + 200);
    ck_assert_uint_eq(sum, total);
    ck_assert_ptr_nonnull(strstr(top, "\ntab\tkey\t5\t"));
    run_free(&r);

    /* JSON: the same list */
    run j = run_cli(NULL, 0, ARGS("stats", "-s", list, "--keys", keys, "--top", "8", "--json"));
    run t = run_cli(NULL, 0, ARGS("stats", "-s", list, "--keys", keys, "--top", "8"));
    ck_assert_msg(j.status == 0, "%s", j.err);
    ck_assert_ptr_nonnull(strstr(j.out, ",\n \"top\": [\n  {\"key\": \"hot:1\", \"count\": 50, "));
    ck_assert_ptr_nonnull(strstr(j.out, "{\"key\": \"tab\\tkey\", \"count\": 5, "));
    python_agrees("stats", &j, &t);
    run_free(&j);
    run_free(&t);
    /* no key: an empty list */
    j = run_cli("", 0, ARGS("stats", "-s", list, "--top", "3", "--json"));
    ck_assert_msg(j.status == 0, "%s", j.err);
    ck_assert_ptr_nonnull(strstr(j.out, ",\n \"top\": []}\n"));
    run_free(&j);

    expect_usage_error(ARGS("stats", "-s", list, "--top", "0"), "--top '0'");
    expect_usage_error(ARGS("stats", "-s", list, "--top", "-3"), "--top '-3'");
    expect_usage_error(ARGS("stats", "-s", list, "--top", "ten"), "--top 'ten'");
    expect_usage_error(ARGS("stats", "-s", list, "--top", "1000001"), "--top '1000001'");
    expect_usage_error(ARGS("stats", "-s", list, "--top", "1", "--top", "2"), "--top given twice");
    expect_usage_error(ARGS("locate", "-s", list, "--top", "1", "k"),
                       "option '--top' is not valid here");
    mcr_ring_free(ring);
    tu_temp_file_free(keys);
    free(in.p);
}
END_TEST

/* mcroute clients --json: the lines, as an array. */
START_TEST(json_clients_match_text)
{
    run j = run_cli(NULL, 0, ARGS("clients", "--json"));
    run t = run_cli(NULL, 0, ARGS("clients"));
    ck_assert_msg(j.status == 0 && t.status == 0, "%s %s", j.err, t.err);
    ck_assert_msg(strncmp(j.out, "[\n  {\"name\": \"pymemcache\", \"mode\": ", 35) == 0, "%s",
                  j.out);
    python_agrees("clients", &j, &t);
    run_free(&j);
    run_free(&t);
}
END_TEST

/* ------------------------------------------------------------ JSON */

START_TEST(json_strings_escaped)
{
    /* quote, backslash, control bytes, DEL, valid UTF-8 of 2, 3 and 4
     * bytes, and what is not UTF-8: a stray byte, an overlong '/', a
     * surrogate, a sequence cut short, a code point over U+10FFFF */
    static const char in[] = "q\"b\\s\n\x01\x1f\x7f\tx\r\n"
                             "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\n"
                             "\xff\n\xc0\xaf\n\xed\xa0\x80\n\xe2\x82\n\xf4\x90\x80\x80\n"
                             "nul\0x\n";
    run r = run_cli(in, sizeof(in) - 1, ARGS("locate", "-s", "only:1", "--json"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.out,
                     "{\"keys\": [\n"
                     "  {\"key\": \"q\\\"b\\\\s\", \"server\": \"only:1\"},\n"
                     "  {\"key\": \"\\u0001\\u001f\\u007f\\tx\\r\", \"server\": \"only:1\"},\n"
                     "  {\"key\": \"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\", \"server\": \"only:1\"},\n"
                     "  {\"key\": \"\\ufffd\", \"key_hex\": \"ff\", \"server\": \"only:1\"},\n"
                     "  {\"key\": \"\\ufffd\\ufffd\", \"key_hex\": \"c0af\", \"server\": \"only:1\"},\n"
                     "  {\"key\": \"\\ufffd\\ufffd\\ufffd\", \"key_hex\": \"eda080\", \"server\": \"only:1\"},\n"
                     "  {\"key\": \"\\ufffd\", \"key_hex\": \"e282\", \"server\": \"only:1\"},\n"
                     "  {\"key\": \"\\ufffd\\ufffd\\ufffd\\ufffd\", \"key_hex\": \"f4908080\", \"server\": \"only:1\"},\n"
                     "  {\"key\": \"nul\\u0000x\", \"server\": \"only:1\"}\n"
                     "]}\n");
    run t = run_cli(in, sizeof(in) - 1, ARGS("locate", "-s", "only:1"));
    python_agrees("locate", &r, &t);
    run_free(&r);
    run_free(&t);
    /* no key at all: an empty list */
    r = run_cli("", 0, ARGS("locate", "-s", "a,b", "--json"));
    ck_assert_str_eq(r.out, "{\"keys\": []}\n");
    run_free(&r);
}
END_TEST

START_TEST(json_locate_diff_match_text)
{
    tu_rng rng;
    tu_rng_init(&rng, 5);
    char in[64 * 500];
    size_t inlen = 0;
    for (int i = 0; i < 500; i++) {
        inlen += tu_key(&rng, in + inlen, 30);
        in[inlen++] = '\n';
    }
    const char *list = "a:1,b:2:2,c:3,d:4";
    run j = run_cli(in, inlen, ARGS("locate", "-s", list, "--json"));
    run t = run_cli(in, inlen, ARGS("locate", "-s", list));
    ck_assert_msg(j.status == 0, "%s", j.err);
    /* line for line: {"key": K, "server": S} for K<TAB>S */
    const char *jp = strchr(j.out, '\n') + 1;
    for (const char *tp = t.out; *tp; tp = strchr(tp, '\n') + 1) {
        const char *tab = strchr(tp, '\t'), *nl = strchr(tp, '\n');
        char want[256];
        snprintf(want, sizeof(want), "  {\"key\": \"%.*s\", \"server\": \"%.*s\"}",
                 (int)(tab - tp), tp, (int)(nl - tab - 1), tab + 1);
        ck_assert_msg(strncmp(jp, want, strlen(want)) == 0, "%s vs %.80s", want, jp);
        jp = strchr(jp, '\n') + 1;
    }
    ck_assert_str_eq(jp, "]}\n");
    python_agrees("locate", &j, &t);
    run_free(&j);
    run_free(&t);

    j = run_cli(in, inlen, ARGS("locate", "-s", list, "--replicas=3", "--json"));
    t = run_cli(in, inlen, ARGS("locate", "-s", list, "--replicas", "3"));
    ck_assert_msg(j.status == 0, "%s", j.err);
    ck_assert_ptr_nonnull(strstr(j.out, "\"under_replicated\": false}"));
    python_agrees("locate-replicas", &j, &t);
    run_free(&j);
    run_free(&t);
    j = run_cli(NULL, 0, ARGS("locate", "-s", "a:1,b:2", "--replicas", "3", "--json", "k"));
    ck_assert_ptr_nonnull(strstr(j.out, "\"under_replicated\": true}"));
    run_free(&j);

    /* diff: the same numbers, printed alike */
    char *keys = temp_file(in, inlen);
    j = run_cli(NULL, 0, ARGS("diff", "a:1,b:2,c:3", "a:1,b:2,c:3,d:4", "--keys", keys, "--json"));
    t = run_cli(NULL, 0, ARGS("diff", "a:1,b:2,c:3", "a:1,b:2,c:3,d:4", "--keys", keys));
    ck_assert_msg(j.status == 0, "%s", j.err);
    char moved[32];
    ck_assert_int_eq(sscanf(t.out, "moved\t%31s", moved), 1);
    char want[128];
    snprintf(want, sizeof(want), "{\"moved\": %s, \"pairs\": [\n", moved);
    ck_assert(strncmp(j.out, want, strlen(want)) == 0);
    unsigned long km, kt;
    ck_assert_int_eq(sscanf(strstr(t.out, "keys_moved"), "keys_moved\t%lu\t%lu", &km, &kt), 2);
    snprintf(want, sizeof(want), "\"keys_moved\": %lu, \"keys_total\": %lu}\n", km, kt);
    ck_assert_ptr_nonnull(strstr(j.out, want));
    python_agrees("diff", &j, &t);
    run_free(&j);
    run_free(&t);
    /* --keys - reads standard input */
    j = run_cli(in, inlen, ARGS("diff", "a:1,b:2,c:3", "a:1,b:2,c:3,d:4", "--keys", "-"));
    t = run_cli(NULL, 0, ARGS("diff", "a:1,b:2,c:3", "a:1,b:2,c:3,d:4", "--keys", keys));
    ck_assert_str_eq(j.out, t.out);
    run_free(&j);
    run_free(&t);
    j = run_cli(NULL, 0, ARGS("diff", "a:1,b:2", "b:2,a:1", "-m", "stable-ketama", "--json"));
    ck_assert_str_eq(j.out, "{\"moved\": 0.000000, \"pairs\": []}\n");
    run_free(&j);
    /* a key file that cannot be read: nothing on standard output */
    expect_usage_error(ARGS("diff", "a:1", "b:2", "--keys", "/nonexistent/k"), "/nonexistent/k");
    tu_temp_file_free(keys);
}
END_TEST

/* ------------------------------------------------------------ help, version */

START_TEST(help_and_version)
{
    run main_help = run_cli(NULL, 0, ARGS("--help"));
    ck_assert_int_eq(main_help.status, 0);
    const char *forms[][2] = {{"-h", NULL}, {"help", NULL}};
    for (int i = 0; i < 2; i++) {
        run r = run_cli(NULL, 0, ARGS(forms[i][0]));
        ck_assert_int_eq(r.status, 0);
        ck_assert_str_eq(r.out, main_help.out);
        run_free(&r);
    }
    for (size_t c = 0; c < NCOMMANDS; c++) {
        const char *cmd = all_commands[c];
        char line[64];
        snprintf(line, sizeof(line), "\n  %s ", cmd);
        ck_assert_msg(strstr(main_help.out, line) != NULL, "%s not in --help", cmd);
        run a = run_cli(NULL, 0, ARGS(cmd, "--help"));
        run b = run_cli(NULL, 0, ARGS("help", cmd));
        run h = run_cli(NULL, 0, ARGS(cmd, "-h"));
        char usage[64];
        snprintf(usage, sizeof(usage), "Usage: mcroute %s", cmd);
        ck_assert_msg(a.status == 0 && b.status == 0 && h.status == 0, "%s --help", cmd);
        ck_assert_msg(strncmp(a.out, usage, strlen(usage)) == 0, "%s", a.out);
        ck_assert_str_eq(a.out, b.out);
        ck_assert_str_eq(a.out, h.out);
        ck_assert_str_eq(a.err, "");
        /* only that command's usage */
        ck_assert_ptr_null(strstr(a.out, "Commands:"));
        run_free(&a);
        run_free(&b);
        run_free(&h);
    }
    run_free(&main_help);

    char want[64];
    snprintf(want, sizeof(want), "mcroute %s\n", MCR_VERSION_STRING);
    ck_assert_str_eq(mcr_version_string(), MCR_VERSION_STRING);
    const char *vforms[] = {"--version", "-V"};
    for (int i = 0; i < 2; i++) {
        run r = run_cli(NULL, 0, ARGS(vforms[i]));
        ck_assert_int_eq(r.status, 0);
        ck_assert_str_eq(r.out, want);
        run_free(&r);
    }
    expect_usage_error(ARGS("--version", "x"), "unexpected argument 'x'");
    expect_usage_error(ARGS("help", "locate", "x"), "unexpected argument 'x'");
    expect_usage_error(ARGS("help", "frob"), "unknown command 'frob'");
    expect_usage_error(ARGS("--bogus"), "unknown option '--bogus'");
    expect_usage_error(ARGS("frob"), "unknown command 'frob'");
    run r = run_cli(NULL, 0, (const char *const[]){"mcroute", NULL});
    ck_assert_int_eq(r.status, 2);
    ck_assert_uint_eq(r.outlen, 0);
    run_free(&r);
}
END_TEST

/* ------------------------------------------------------------ exit statuses */

/* Bad options exit 2 with nothing on stdout, for every command (the pool
 * commands before they connect to anything). */
START_TEST(bad_options_every_command)
{
    const char *json_cmds = " locate stats diff probe ";
    for (size_t c = 0; c < NCOMMANDS; c++) {
        const char *cmd = all_commands[c];
        char pad[32];
        snprintf(pad, sizeof(pad), " %s ", cmd);
        int has_json = strstr(json_cmds, pad) != NULL;
        expect_usage_error(ARGS(cmd, "--bogus"), "unknown or ambiguous option '--bogus'");
        expect_usage_error(ARGS(cmd, "-Z"), "unknown option '-Z'");
        expect_usage_error(ARGS(cmd, "--help=yes"), "option '--help' takes no value");
        expect_usage_error(ARGS(cmd, "--keys"), "option '--keys' needs a value");
        expect_usage_error(ARGS(cmd, "--s=a"), "ambiguous");
        if (has_json) {
            expect_usage_error(ARGS(cmd, "--json=yes"), "option '--json' takes no value");
        } else {
            expect_usage_error(ARGS(cmd, "--json"), "option '--json' is not valid here");
        }
        if (strcmp(cmd, "hash") != 0 && strcmp(cmd, "diff") != 0)
            expect_usage_error(ARGS(cmd, "-s", "a", "-s", "b"), "-s given twice");
        /* a missing source, or for hash and diff their required parts */
        run r = run_cli("k\tv\n", 4, ARGS(cmd));
        ck_assert_msg(r.status == 2, "%s: status %d (%s)", cmd, r.status, r.err);
        ck_assert_uint_eq(r.outlen, 0);
        run_free(&r);
    }
    /* both spellings of a value: --opt=value and --opt value */
    run a = run_cli(NULL, 0, ARGS("locate", "--servers=a,b", "--mode=consistent", "--hash=crc", "k"));
    run b = run_cli(NULL, 0, ARGS("locate", "--servers", "a,b", "-m", "consistent", "--hash", "crc", "k"));
    run s = run_cli(NULL, 0, ARGS("locate", "-sa,b", "-mconsistent", "--hash", "crc", "k"));
    ck_assert_int_eq(a.status, 0);
    ck_assert_str_eq(a.out, b.out);
    ck_assert_str_eq(a.out, s.out);
    run_free(&a);
    run_free(&b);
    run_free(&s);
}
END_TEST

/* Lost output is exit status 1, for a full disk and a closed pipe alike. */
START_TEST(lost_output_is_status_1)
{
    const char *exe = tu_cli_path();
    char cmd[4400];
    const char *cases[] = {
        "stats -s a,b >/dev/full",
        "stats -s a,b --json >/dev/full",
        "locate -s a,b --json k >/dev/full",
        "diff a,b a,b,c >/dev/full",
        "--help >/dev/full",
        "help stats >/dev/full",
        "--version >/dev/full",
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(cmd, sizeof(cmd), "'%s' %s 2>/dev/null", exe, cases[i]);
        int st = system(cmd);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "%s: %d", cases[i], st);
    }
    /* a snapshot file that cannot be written: not bad input, a failed write */
    run r = run_cli(NULL, 0, ARGS("snapshot", "-s", "a,b", "-o", "/nonexistent/dir/s.snap"));
    ck_assert_int_eq(r.status, 1);
    ck_assert_uint_eq(r.outlen, 0);
    ck_assert_msg(strstr(r.err, "/nonexistent/dir") != NULL, "%s", r.err);
    run_free(&r);

    /* a reader that goes away: EPIPE, not SIGPIPE, and the command stops */
    char *big = malloc(200000 * 8);
    size_t len = 0;
    for (int i = 0; i < 200000; i++)
        len += (size_t)sprintf(big + len, "k%d\n", i);
    char *keys = temp_file(big, len);
    free(big);
    char *err = temp_file("", 0);
    snprintf(cmd, sizeof(cmd),
             "bash -c '\"$0\" locate -s a,b < \"$1\" 2>\"$2\" | head -c 1 >/dev/null; "
             "exit ${PIPESTATUS[0]}' '%s' '%s' '%s'",
             exe, keys, err);
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "closed pipe: status %d", st);
    size_t elen;
    char *etext = tu_read_file(err, &elen);
    ck_assert_msg(strstr(etext, "error writing standard output") != NULL, "%s", etext);
    free(etext);
    tu_temp_file_free(err);
    tu_temp_file_free(keys);
}
END_TEST

/* ------------------------------------------------------------ progress */

START_TEST(progress_only_on_a_terminal)
{
    enum { N = 140000 };
    char *big = malloc(N * 10);
    size_t len = 0;
    for (int i = 0; i < N; i++)
        len += (size_t)sprintf(big + len, "k%d\n", i);
    char *keys = temp_file(big, len);

    /* stderr a terminal, stdout not: progress, then the line erased */
    int st;
    char *tty = run_cli_pty(ARGS("locate", "-s", "a,b,c"), keys, 0, &st);
    ck_assert_int_eq(st, 0);
    ck_assert_msg(strstr(tty, "\rmcroute locate: 65536 keys") != NULL, "%s", tty);
    ck_assert_msg(strstr(tty, "\rmcroute locate: 131072 keys") != NULL, "%s", tty);
    size_t tl = strlen(tty);
    ck_assert(tl > 2 && tty[tl - 1] == '\r' && tty[tl - 2] == ' '); /* erased */
    free(tty);
    tty = run_cli_pty(ARGS("stats", "-s", "a,b,c", "--keys", "-"), keys, 1, &st);
    ck_assert_int_eq(st, 0);
    ck_assert_msg(strstr(tty, "\rmcroute stats: 65536 keys") != NULL, "%s", tty);
    ck_assert(strstr(tty, "[servers]") != NULL);
    free(tty);
    /* stdout on the same terminal: locate's lines are not broken */
    tty = run_cli_pty(ARGS("locate", "-s", "a,b,c"), keys, 1, &st);
    ck_assert_int_eq(st, 0);
    ck_assert_msg(strstr(tty, "mcroute locate:") == NULL, "progress between output lines");
    free(tty);
    /* stderr a file (every other test): nothing */
    run r = run_cli(big, len, ARGS("stats", "-s", "a,b,c", "--keys", "-"));
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(r.err, "");
    run_free(&r);
    tu_temp_file_free(keys);
    free(big);
}
END_TEST

static Suite *cli_stats_suite(void)
{
    Suite *s = suite_create("cli_stats");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, stats_ring_shares_match_dump);
    tcase_add_test(tc, stats_modula_shares);
    tcase_add_test(tc, stats_table_modes);
    tcase_add_test(tc, stats_key_placed_modes);
    tcase_add_test(tc, stats_keys_match_locate);
    tcase_add_test(tc, stats_edge_cases);
    tcase_add_test(tc, stats_top_keys);
    tcase_add_test(tc, json_clients_match_text);
    tcase_add_test(tc, json_strings_escaped);
    tcase_add_test(tc, json_locate_diff_match_text);
    tcase_add_test(tc, help_and_version);
    tcase_add_test(tc, bad_options_every_command);
    tcase_add_test(tc, lost_output_is_status_1);
    tcase_add_test(tc, progress_only_on_a_terminal);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(cli_stats_suite());
}
