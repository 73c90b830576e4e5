/* SPDX-License-Identifier: BSD-3-Clause */
/* test_simulate.c: Check suite of mcroute simulate, run as a real process: its numbers against what the modes guarantee, determinism by seed, JSON and SVG that parse (python3), bad input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clirun.h"
#include "testutil.h"

/* Small runs: every test stays well under a few seconds. */
#define KEYS "20000"
#define REQS "50000"

/* The line of `mode` in the section whose title starts with `section`
 * (up to the next empty line), its numbers after the name into v[];
 * returns how many were read. */
static int table_row(const char *out, const char *section, const char *mode, double *v, int max)
{
    const char *s = strstr(out, section);
    ck_assert_msg(s != NULL, "no section '%s' in:\n%s", section, out);
    const char *end = strstr(s, "\n\n");
    size_t ml = strlen(mode);
    for (const char *line = strchr(s, '\n') + 1; line && (!end || line < end);
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, mode, ml) == 0 && line[ml] == ' ') {
            const char *p = line + ml;
            int n = 0;
            char *e;
            while (n < max) {
                double x = strtod(p, &e);
                if (e == p)
                    break;
                v[n++] = x;
                p = e;
            }
            return n;
        }
    }
    ck_abort_msg("no row '%s' in section '%s' of:\n%s", mode, section, out);
    return 0;
}

/* Moved table: keys, bytes, requests, ideal, keys/ideal, stray. */
static void moved(const char *out, const char *mode, double v[6])
{
    ck_assert_int_eq(table_row(out, "Moved by the change", mode, v, 6), 6);
}

static run simulate_ok(const char *const *argv)
{
    run r = run_cli(NULL, 0, argv);
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    ck_assert_str_eq(r.err, "");
    return r;
}

static char *temp_file(const char *content, size_t len)
{
    return tu_temp_file("sim", content, len);
}

/* Run python3 SCRIPT FILE: exit status 0 means the check passed; its
 * output says why not. */
static void python_check(const char *script, const char *file)
{
    char *sp = temp_file(script, strlen(script));
    char cmd[512];
    snprintf(cmd, sizeof(cmd), TU_PYTHON3 " %s %s 2>&1", sp, file);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof(buf) - 1, p);
    buf[n] = '\0';
    int st = pclose(p);
    tu_temp_file_free(sp);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "python3 check failed (%d): %s", st, buf);
}

START_TEST(add_one_server)
{
    /* One server added to ten: the ideal is 1/11 for every mode. */
    run r = simulate_ok(ARGS("simulate", "-n", "10", "--add", "10.0.0.11:11211", "--keys", KEYS,
                             "--requests", REQS, "--sweep", "0"));
    double v[6];
    const double ideal = 1.0 / 11;
    const char *modes[] = {"ketama", "stable-ketama", "jump", "rendezvous", "maglev", "slots",
                           "bounded"};
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        moved(r.out, modes[i], v);
        ck_assert_msg(v[3] > ideal - 1e-6 && v[3] < ideal + 1e-6, "%s: ideal %f", modes[i], v[3]);
        /* a continuum's new server gets its share within its point noise */
        ck_assert_msg(v[0] > 0.7 * ideal && v[0] < 1.3 * ideal, "%s moved %f", modes[i], v[0]);
    }
    /* jump, rendezvous and slots (after the plan) move the ideal, up to the
     * sampling noise of 20,000 keys (sd 0.002) */
    moved(r.out, "jump", v);
    ck_assert_msg(v[0] > ideal - 0.01 && v[0] < ideal + 0.01, "jump moved %f", v[0]);
    moved(r.out, "rendezvous", v);
    ck_assert_msg(v[0] > ideal - 0.01 && v[0] < ideal + 0.01, "rendezvous moved %f", v[0]);
    moved(r.out, "slots", v);
    ck_assert_msg(v[0] > ideal - 0.01 && v[0] < ideal + 0.01, "slots moved %f", v[0]);
    /* keys only go to the new server, except maglev's few */
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        moved(r.out, modes[i], v);
        ck_assert_msg(strcmp(modes[i], "maglev") == 0 ? v[5] < 0.01 : v[5] == 0, "%s stray %f",
                      modes[i], v[5]);
    }
    /* maglev: near, a few percent above at most */
    moved(r.out, "maglev", v);
    ck_assert_msg(v[0] > ideal - 0.01 && v[0] < 1.15 * ideal + 0.01, "maglev moved %f", v[0]);
    /* the plan moves the new server's quota of the 16384 slots: 1489 or 1490 */
    ck_assert_msg(strstr(r.out, "slots: the plan moved 1489 of 16384 slots") ||
                      strstr(r.out, "slots: the plan moved 1490 of 16384 slots"),
                  "%s", r.out);
    /* ketama and stable-ketama label servers alike with equal weights */
    double k[6], s[6];
    moved(r.out, "ketama", k);
    moved(r.out, "stable-ketama", s);
    ck_assert(k[0] == s[0]);
    /* balance: peak-to-mean >= 1, cv >= 0; the plan leaves slots balanced */
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        ck_assert_int_eq(table_row(r.out, "Balance after the change", modes[i], v, 6), 6);
        for (int c = 0; c < 6; c += 2)
            ck_assert_msg(v[c] >= 1 && v[c + 1] >= 0, "%s: %f %f", modes[i], v[c], v[c + 1]);
    }
    ck_assert_int_eq(table_row(r.out, "Balance after the change", "slots", v, 6), 6);
    ck_assert_msg(v[0] < 1.06, "slots keys p2m %f", v[0]);
    ck_assert_int_eq(table_row(r.out, "Cost", "maglev", v, 5), 5);
    ck_assert_msg(v[4] == 65537, "maglev entries %f", v[4]);
    run_free(&r);
}
END_TEST

START_TEST(remove_and_weights)
{
    /* Removing a server in the middle: jump moves about twice the ideal
     * (its documented limit), rendezvous the ideal. */
    run r = simulate_ok(ARGS("simulate", "-n", "10", "--remove", "10.0.0.3:11211", "--keys",
                             KEYS, "--modes", "jump,rendezvous,slots,stable-ketama", "--sweep",
                             "0"));
    double v[6];
    moved(r.out, "jump", v);
    ck_assert_msg(v[4] > 1.5 && v[4] < 2.3, "jump keys/ideal %f", v[4]);
    /* the keys of the dropped last bucket: about 1/10, between servers that stay */
    ck_assert_msg(v[5] > 0.05 && v[5] < 0.15, "jump stray %f", v[5]);
    moved(r.out, "rendezvous", v);
    ck_assert_msg(v[4] > 0.9 && v[4] < 1.1 && v[5] == 0, "rendezvous %f %f", v[4], v[5]);
    moved(r.out, "slots", v);
    ck_assert_msg(v[3] > 0.1 - 1e-6 && v[3] < 0.1 + 1e-6 && v[0] > 0.09 && v[0] < 0.11,
                  "slots %f %f", v[0], v[3]);
    run_free(&r);

    /* Doubling one weight: its share goes from 1/10 to 2/11; ketama
     * renormalises every server's points and moves more than the ideal. */
    r = simulate_ok(ARGS("simulate", "-n", "10", "--reweight", "10.0.0.2:11211=2", "--keys",
                         KEYS, "--modes", "ketama,stable-ketama,rendezvous", "--sweep", "0"));
    moved(r.out, "stable-ketama", v);
    ck_assert_msg(v[3] > 0.0818 && v[3] < 0.0819, "ideal %f", v[3]);
    ck_assert_msg(v[4] > 0.8 && v[4] < 1.2, "stable-ketama keys/ideal %f", v[4]);
    ck_assert_msg(v[5] == 0, "stable-ketama stray %f", v[5]);
    moved(r.out, "ketama", v);
    ck_assert_msg(v[4] > 1.2 && v[5] > 0.02, "ketama keys/ideal %f, stray %f", v[4], v[5]);
    run_free(&r);

    /* A failed server: its share, and jump keeps the others' keys. */
    r = simulate_ok(ARGS("simulate", "-n", "8", "--fail", "10.0.0.5:11211", "--keys", KEYS,
                         "--modes", "jump,maglev", "--sweep", "0"));
    moved(r.out, "jump", v);
    ck_assert_msg(v[3] > 0.125 - 1e-6 && v[3] < 0.125 + 1e-6 && v[4] > 0.9 && v[4] < 1.1 &&
                      v[5] == 0,
                  "jump %f %f %f", v[3], v[4], v[5]);
    run_free(&r);
}
END_TEST

/* Per-server sums, bounded's stream and cap, the sweep: from the JSON. */
static const char json_sums[] =
    "import json, sys\n"
    "d = json.load(open(sys.argv[1]))\n"
    "w = d['workload']\n"
    "assert w['keys'] == 20000, w\n"
    "for m in d['modes']:\n"
    "    ps = m['per_server_after']\n"
    "    assert len(ps) == len(d['servers']['after']), m['mode']\n"
    "    assert sum(s['keys'] for s in ps) == 20000, m['mode']\n"
    "    assert abs(sum(s['bytes'] for s in ps) - w['bytes']) < 1e-6 * w['bytes'], m['mode']\n"
    "    if m['mode'] == 'bounded':\n"
    "        b = m['bounded']\n"
    "        assert sum(s['requests'] for s in ps) == b['requests'] == 50000, b\n"
    "        p2m = m['balance_after']['requests']['peak_to_mean']\n"
    "        assert p2m <= 1 + b['epsilon'] + 0.01, p2m\n"
    "        assert b['requests_owner_only']['peak_to_mean'] > p2m, b\n"
    "        assert 0 < b['off_owner'] < 0.5, b\n"
    "    else:\n"
    "        assert abs(sum(s['requests'] for s in ps) - w['qps']) < 1e-6 * w['qps'], m['mode']\n"
    "    for k in ('lookup_ns', 'build_us', 'apply_us'):\n"
    "        assert m[k] > 0, (m['mode'], k)\n"
    "    assert m['memory_bytes'] > 0, m['mode']\n"
    "s = d['sweep']\n"
    "pts = [p['points_per_weight'] for p in s['points']]\n"
    "assert pts == [160, 320, 640, 1280, 2560], pts\n"
    "assert s['points'][-1]['ring']['cv'] < s['points'][0]['ring']['cv'], s\n"
    "assert s['points'][-1]['memory_bytes'] > s['points'][0]['memory_bytes'], s\n"
    "assert s['random_assignment_keys_cv'] > 0 and s['fit_c'] > 0, s\n";

START_TEST(json_sums_and_bounded)
{
    /* zipf 1.2: the hottest key alone is a large share, which bounded spreads */
    run r = simulate_ok(ARGS("simulate", "-n", "10", "--add", "10.0.0.11:11211", "--keys", KEYS,
                             "--requests", REQS, "--zipf", "1.2", "--sweep", "2560", "--json"));
    char *path = temp_file(r.out, r.outlen);
    python_check(json_sums, path);
    tu_temp_file_free(path);
    run_free(&r);
}
END_TEST

/* Everything but the cost section and the timing columns depends only on
 * the input and the seed. */
static char *without_timings(const char *out)
{
    char *copy = strdup(out);
    char *cost = strstr(copy, "\nCost");
    ck_assert_ptr_nonnull(cost);
    *cost = '\0';
    return copy;
}

START_TEST(determinism)
{
    const char *const a[] = {"mcroute", "simulate", "-n", "7", "--add", "10.0.0.8", "--keys",
                             "5000", "--requests", "10000", "--seed", "42", "--sweep", "0", NULL};
    run r1 = simulate_ok(a), r2 = simulate_ok(a);
    char *t1 = without_timings(r1.out), *t2 = without_timings(r2.out);
    ck_assert_str_eq(t1, t2);
    const char *const b[] = {"mcroute", "simulate", "-n", "7", "--add", "10.0.0.8", "--keys",
                             "5000", "--requests", "10000", "--seed", "43", "--sweep", "0", NULL};
    run r3 = simulate_ok(b);
    char *t3 = without_timings(r3.out);
    ck_assert_str_ne(t1, t3);
    free(t1);
    free(t2);
    free(t3);
    run_free(&r1);
    run_free(&r2);
    run_free(&r3);
}
END_TEST

/* Ids with quotes, backslashes, UTF-8 and a byte that is not UTF-8;
 * zones; every mode. */
static const char servers_file[] =
    "# zones and awkward ids\n"
    "10.1.0.1:11211 zone=a id=q\"uote\n"
    "10.1.0.2:11211 zone=a id=back\\slash weight=2\n"
    "10.1.0.3:11211 zone=b id=caf\xc3\xa9\n"
    "10.1.0.4:11211 zone=b id=raw\xff<&>\n"
    "10.1.0.5:11211 zone=c\n";

static const char json_all_modes[] =
    "import json, sys\n"
    "d = json.load(open(sys.argv[1]))\n"
    "ids = [s['id'] for s in d['servers']['after']]\n"
    "assert 'q\"uote' in ids and 'back\\\\slash' in ids and 'caf\\u00e9' in ids, ids\n"
    "assert 'raw\\ufffd<&>' in ids, ids\n"
    "states = {s['id']: s['state'] for s in d['servers']['after']}\n"
    "assert states['caf\\u00e9'] == 'down' and states['raw\\ufffd<&>'] == 'down', states\n"
    "assert len(d['modes']) == 14, len(d['modes'])\n"
    /* zone b (weights 1 and 1 of 6) fails: 1/3 of the weight; 2 of 5
     * servers where weights are ignored */
    "for m in d['modes']:\n"
    "    want = 0.4 if m['mode'] in ('consistent', 'spy', 'modula') else 1 / 3\n"
    "    assert abs(m['moved']['ideal'] - want) < 1e-9, (m['mode'], m['moved'])\n";

static const char svg_check[] =
    "import sys, xml.etree.ElementTree as ET\n"
    "root = ET.parse(sys.argv[1]).getroot()\n"
    "ns = '{http://www.w3.org/2000/svg}'\n"
    "assert root.tag == ns + 'svg', root.tag\n"
    "texts = [t.text for t in root.iter(ns + 'text')]\n"
    "for m in sys.argv[2:]:\n"
    "    assert m in texts, (m, texts)\n"
    "assert len(list(root.iter(ns + 'rect'))) > 20\n"
    "assert len(list(root.iter(ns + 'polyline'))) == 2\n";

START_TEST(json_and_svg_parse)
{
    char *sf = temp_file(servers_file, sizeof(servers_file) - 1);
    char *svg = tu_temp_file("sim-svg", NULL, 0);
    run r = simulate_ok(ARGS("simulate", "-f", sf, "--add", "10.1.0.6 zone=c id=new<\"&\">",
                             "--fail-zone", "b", "--keys", "3000", "--requests", "5000", "--modes",
                             "all", "--sweep", "640", "--json", "--svg", svg));
    char *path = temp_file(r.out, r.outlen);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), TU_PYTHON3 " -m json.tool %s > /dev/null", path);
    ck_assert_int_eq(system(cmd), 0);
    python_check(json_all_modes, path);

    /* the SVG: valid XML, with every mode named */
    char args[512];
    snprintf(args, sizeof(args), "%s ketama jump rendezvous maglev slots bounded twemproxy-modula",
             svg);
    python_check(svg_check, args);
    FILE *f = fopen(svg, "r");
    ck_assert_ptr_nonnull(f);
    char head[64] = "";
    ck_assert_ptr_nonnull(fgets(head, sizeof(head), f));
    fclose(f);
    ck_assert_str_eq(head, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");

    /* the text output of the same run names all 14 modes too */
    run t = simulate_ok(ARGS("simulate", "-f", sf, "--fail-zone", "b", "--keys", "2000",
                             "--requests", "2000", "--modes", "all", "--sweep", "0"));
    double v[6];
    moved(t.out, "twemproxy-modula", v);
    moved(t.out, "consistent", v);
    ck_assert_msg(v[3] > 0.4 - 1e-6 && v[3] < 0.4 + 1e-6, "consistent ideal %f", v[3]);
    moved(t.out, "rendezvous", v);
    /* weights 1 2 1 1 1, zone b (1 + 1) down: 2/6 of the weight */
    ck_assert_msg(v[3] > 2.0 / 6 - 1e-6 && v[3] < 2.0 / 6 + 1e-6, "rendezvous ideal %f", v[3]);
    run_free(&t);

    tu_temp_file_free(svg);
    tu_temp_file_free(path);
    tu_temp_file_free(sf);
    run_free(&r);
}
END_TEST

START_TEST(workload_file)
{
    static const char wl[] = "# key, bytes, qps\n"
                             "user:1\t100\t50\n"
                             "user:2\t2000\t1.5\r\n"
                             "\n"
                             "user:3\t0\t0\n"
                             "hot\t10\t1000\n";
    char *path = temp_file(wl, sizeof(wl) - 1);
    run r = simulate_ok(ARGS("simulate", "-n", "3", "--add", "10.0.0.4", "--workload", path,
                             "--requests", "1000", "--sweep", "0", "--json"));
    char *jp = temp_file(r.out, r.outlen);
    python_check("import json, sys\n"
                 "d = json.load(open(sys.argv[1]))\n"
                 "w = d['workload']\n"
                 "assert (w['keys'], w['bytes'], w['qps']) == (4, 2110, 1051.5), w\n"
                 "for m in d['modes']:\n"
                 "    assert sum(s['keys'] for s in m['per_server_after']) == 4\n"
                 "    assert m['moved']['keys'] in (0, 0.25, 0.5, 0.75, 1), m\n",
                 jp);
    tu_temp_file_free(jp);
    run_free(&r);

    static const char bad[] = "a\t1\t1\nb\t12x\t1\n";
    char *bp = temp_file(bad, sizeof(bad) - 1);
    expect_usage_error(ARGS("simulate", "-n", "3", "--add", "x", "--workload", bp),
                       "line 2: BYTES '12x'");
    static const char zero[] = "a\t1\t0\n";
    char *zp = temp_file(zero, sizeof(zero) - 1);
    expect_usage_error(ARGS("simulate", "-n", "3", "--add", "x", "--workload", zp),
                       "every QPS is 0");
    expect_usage_error(ARGS("simulate", "-n", "3", "--add", "x", "--workload", path, "--keys", "5"),
                       "--workload FILE replaces");
    tu_temp_file_free(path);
    tu_temp_file_free(bp);
    tu_temp_file_free(zp);
}
END_TEST

START_TEST(bad_input)
{
    expect_usage_error(ARGS("simulate", "--add", "x"), "give exactly one of -s");
    expect_usage_error(ARGS("simulate", "-n", "3"), "no change");
    expect_usage_error(ARGS("simulate", "-n", "3", "--add", "x", "--zipf", "-1"), "--zipf '-1'");
    expect_usage_error(ARGS("simulate", "-n", "3", "--add", "x", "--keys", "0"), "--keys '0'");
    expect_usage_error(ARGS("simulate", "-n", "3", "--add", "x", "--modes", "jump,nope"),
                       "unknown mode 'nope'");
    expect_usage_error(ARGS("simulate", "-n", "3", "--add", "x", "--modes", "jump,jump"),
                       "'jump' given twice");
    expect_usage_error(ARGS("simulate", "-n", "3", "--remove", "nope"), "nope");
    expect_usage_error(ARGS("simulate", "-n", "3", "--reweight", "10.0.0.1:11211"),
                       "expected ID=WEIGHT");
    expect_usage_error(ARGS("simulate", "-n", "3", "--fail-zone", "z"), "no server in that zone");
    expect_usage_error(ARGS("simulate", "-s", "a,b", "--remove", "a:11211", "--remove", "b:11211"),
                       "leaves no active server");
    expect_usage_error(ARGS("simulate", "-n", "3", "--add", "x y"), "'y' is not weight=W");
    expect_usage_error(ARGS("simulate", "-n", "3", "--add", "a:99999"), "--add 'a:99999'");
    expect_usage_error(ARGS("simulate", "-n", "3", "--add", "x", "--sizes", "pareto:1"),
                       "--sizes 'pareto:1'");
    expect_usage_error(ARGS("simulate", "-n", "3", "--add", "x", "--sweep", "100"),
                       "at least 160 points");
    expect_usage_error(ARGS("simulate", "-s", "a:1:2000", "--add", "b"),
                       "leave the mode out with --modes");
    expect_usage_error(ARGS("simulate", "-n", "3", "--add", "x", "--bogus"), "'--bogus'");
    expect_usage_error(ARGS("simulate", "-n", "3", "--add", "x", "--json=yes"),
                       "option '--json' takes no value");
    expect_usage_error(ARGS("simulate", "-n", "3", "--add", "x", "-Z"), "unknown option '-Z'");
    expect_usage_error(ARGS("simulate", "-n", "3", "--add"), "option '--add' needs a value");
    expect_usage_error(ARGS("simulate", "-n", "3", "--add", "x", "--s=a"), "ambiguous");
    expect_usage_error(ARGS("simulate", "-s", "a", "-s", "b", "--add", "x"), "-s given twice");
    expect_usage_error(ARGS("simulate", "-n", "3", "--add", "x", "stray"),
                       "unexpected argument 'stray'");
    expect_usage_error(ARGS("simulate", "-f", "/nonexistent/servers", "--add", "x"),
                       "/nonexistent/servers");

    /* an SVG that cannot be written: exit 1 */
    run r = run_cli(NULL, 0,
                    ARGS("simulate", "-n", "2", "--add", "x", "--keys", "100", "--requests", "100",
                         "--sweep", "0", "--svg", "/nonexistent/dir/out.svg"));
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "/nonexistent/dir/out.svg"));
    run_free(&r);
}
END_TEST

START_TEST(help)
{
    run a = simulate_ok(ARGS("help", "simulate"));
    run b = simulate_ok(ARGS("simulate", "--help"));
    ck_assert_str_eq(a.out, b.out);
    ck_assert_ptr_nonnull(strstr(a.out, "Usage: mcroute simulate"));
    run c = simulate_ok(ARGS("--help"));
    ck_assert_ptr_nonnull(strstr(c.out, "  simulate SERVERS CHANGE..."));
    run_free(&a);
    run_free(&b);
    run_free(&c);
}
END_TEST

static Suite *simulate_suite(void)
{
    Suite *s = suite_create("simulate");
    TCase *tc = tcase_create("simulate");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, add_one_server);
    tcase_add_test(tc, remove_and_weights);
    tcase_add_test(tc, json_sums_and_bounded);
    tcase_add_test(tc, determinism);
    tcase_add_test(tc, json_and_svg_parse);
    tcase_add_test(tc, workload_file);
    tcase_add_test(tc, bad_input);
    tcase_add_test(tc, help);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(simulate_suite());
}
