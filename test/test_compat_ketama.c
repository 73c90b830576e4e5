/* SPDX-License-Identifier: BSD-3-Clause */
/* test_compat_ketama.c: Check suite of libketama compatibility: a libketama program's view against an independent model, vectors, reload, bad files. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ketama.h"
#include "mcroute.h"
#include "mcroute_ketama.h"
#include "testutil.h"

/* ==================================================================== */
/*  Scratch files                                                        */
/* ==================================================================== */

/* A private directory per test (tu_tmpdir); files in it are removed by scratch_done. */
typedef struct scratch {
    char *dir;
    char paths[8][300];
    int n;
} scratch;

static void scratch_init(scratch *s)
{
    s->dir = tu_tmpdir("ketama");
    s->n = 0;
}

/* The path of file `name` in the directory (remembered for removal). */
static const char *scratch_path(scratch *s, const char *name)
{
    for (int i = 0; i < s->n; i++) {
        const char *slash = strrchr(s->paths[i], '/');
        if (strcmp(slash + 1, name) == 0)
            return s->paths[i];
    }
    char p[sizeof(s->paths[0])];
    ck_assert_int_lt(s->n, 8);
    snprintf(p, sizeof(p), "%s/%s", s->dir, name);
    memcpy(s->paths[s->n], p, sizeof(p));
    return s->paths[s->n++];
}

/* The files scratch_path() named, then the directory, which must hold
 * nothing else. */
static void scratch_done(scratch *s)
{
    for (int i = 0; i < s->n; i++)
        unlink(s->paths[i]);
    ck_assert_uint_eq(tu_tmpdir_free(s->dir), 0);
    s->dir = NULL;
}

static void write_bytes(const char *path, const char *data, size_t len)
{
    tu_write_file(path, data, len);
}

static void write_text(const char *path, const char *text)
{
    write_bytes(path, text, strlen(text));
}

static void set_mtime(const char *path, time_t sec)
{
    struct timespec ts[2] = {{sec, 0}, {sec, 0}};
    ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
}

/* ==================================================================== */
/*  The model: libketama's placement from the facts, with OpenSSL's MD5  */
/* ==================================================================== */

typedef struct mserver {
    char addr[300]; /* as written in the file: the label */
    char host[260]; /* without brackets */
    int port;
    uint32_t memory;
} mserver;

typedef struct mpoint {
    uint32_t value;
    uint32_t server;
} mpoint;

typedef struct model {
    mpoint *pts;
    size_t n;
} model;

static void md5(const void *data, size_t len, unsigned char out[16])
{
    unsigned int olen = 0;
    ck_assert_int_eq(EVP_Digest(data, len, out, &olen, EVP_md5(), NULL), 1);
    ck_assert_uint_eq(olen, 16);
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t model_hash(const char *key)
{
    unsigned char d[16];
    md5(key, strlen(key), d);
    return le32(d);
}

static int cmp_mpoint(const void *a, const void *b)
{
    const mpoint *x = a, *y = b;
    if (x->value != y->value)
        return x->value < y->value ? -1 : 1;
    /* equal values: the server earlier in the file first */
    return (x->server > y->server) - (x->server < y->server);
}

/* Labels per server: floorf(pct * 40.0 * (float)n), pct a float quotient,
 * the product in double, converted to float by floorf's parameter. */
static uint32_t model_labels(const mserver *sv, size_t n, size_t i)
{
    unsigned long total = 0;
    for (size_t j = 0; j < n; j++)
        total += sv[j].memory;
    float pct = (float)sv[i].memory / (float)total;
    double product = (double)pct * 40.0 * (double)(float)n;
    return (uint32_t)floorf((float)product);
}

static void model_build(model *m, const mserver *sv, size_t n)
{
    size_t cap = 0;
    for (size_t i = 0; i < n; i++)
        cap += 4 * (size_t)model_labels(sv, n, i);
    m->pts = malloc((cap ? cap : 1) * sizeof(*m->pts));
    ck_assert_ptr_nonnull(m->pts);
    m->n = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t ks = model_labels(sv, n, i);
        for (uint32_t k = 0; k < ks; k++) {
            char label[400];
            unsigned char d[16];
            int len = snprintf(label, sizeof(label), "%s-%u", sv[i].addr, k);
            md5(label, (size_t)len, d);
            for (int h = 0; h < 4; h++) {
                m->pts[m->n].value = le32(d + 4 * h);
                m->pts[m->n].server = (uint32_t)i;
                m->n++;
            }
        }
    }
    qsort(m->pts, m->n, sizeof(*m->pts), cmp_mpoint);
}

/* The successor rule: first point >= h, past the last one the first. */
static size_t model_find(const model *m, uint32_t h)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->pts[mid].value < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == m->n ? 0 : lo;
}

/* The whole continuum of `c` is the model's: count, values, addresses. */
static void expect_continuum(ketama_continuum c, const model *m, const mserver *sv)
{
    const mcs *a = c->array;
    ck_assert_int_eq(c->numpoints, (int)m->n);
    for (size_t i = 0; i < m->n; i++) {
        ck_assert_msg(a[i].point == m->pts[i].value && strcmp(a[i].ip, sv[m->pts[i].server].addr) == 0,
                      "point %zu: got %u %s, model %u %s", i, a[i].point, a[i].ip,
                      m->pts[i].value, sv[m->pts[i].server].addr);
    }
}

/* ketama_get_server agrees with the model on `nkeys` random keys. */
static void expect_keys(ketama_continuum c, const model *m, const mserver *sv, tu_rng *r,
                        int nkeys)
{
    for (int i = 0; i < nkeys; i++) {
        char key[64];
        if (i % 4 == 0)
            snprintf(key, sizeof(key), "%d", (int)tu_below(r, 1000000));
        else
            tu_key(r, key, 40);
        uint32_t h = model_hash(key);
        ck_assert_uint_eq(ketama_hashi(key), h);
        size_t want = model_find(m, h);
        mcs *got = ketama_get_server(key, c);
        ck_assert_ptr_nonnull(got);
        ck_assert_msg(got->point == m->pts[want].value &&
                          strcmp(got->ip, sv[m->pts[want].server].addr) == 0,
                      "key \"%s\" (hash %u): got %u %s, model %u %s", key, h, got->point,
                      got->ip, m->pts[want].value, sv[m->pts[want].server].addr);
    }
}

/* ==================================================================== */
/*  Random server files                                                  */
/* ==================================================================== */

static void random_address(tu_rng *r, mserver *s)
{
    int with_port = tu_below(r, 2) == 0;
    s->port = with_port ? 1 + (int)tu_below(r, 65535) : MCR_DEFAULT_PORT;
    switch (tu_below(r, 6)) {
    case 0:
    case 1: /* IPv4 */
        snprintf(s->host, sizeof(s->host), "%u.%u.%u.%u", tu_below(r, 256), tu_below(r, 256),
                 tu_below(r, 256), tu_below(r, 256));
        break;
    case 2: /* a short hostname */
        snprintf(s->host, sizeof(s->host), "mc%u", tu_below(r, 100));
        break;
    case 3: { /* a hostname longer than the original's 22 bytes */
        size_t len = 10 + tu_below(r, tu_below(r, 20) == 0 ? 230 : 50);
        static const char alpha[] = "abcdefghijklmnopqrstuvwxyz0123456789-.";
        for (size_t i = 0; i < len; i++)
            s->host[i] = alpha[tu_below(r, sizeof(alpha) - 1)];
        s->host[0] = 'h';
        s->host[len] = '\0';
        break;
    }
    case 4: /* IPv6, always in brackets */
        snprintf(s->host, sizeof(s->host), "2001:db8::%x:%x", tu_below(r, 65536),
                 tu_below(r, 65536));
        break;
    default: /* a familiar shape */
        snprintf(s->host, sizeof(s->host), "cache-%02u.example.net", tu_below(r, 64));
        break;
    }
    const char *lb = strchr(s->host, ':') ? "[" : "", *rb = *lb ? "]" : "";
    if (with_port)
        snprintf(s->addr, sizeof(s->addr), "%s%s%s:%d", lb, s->host, rb, s->port);
    else
        snprintf(s->addr, sizeof(s->addr), "%s%s%s", lb, s->host, rb);
}

static uint32_t random_memory(tu_rng *r, int style, uint32_t same)
{
    switch (style) {
    case 0: return 1 + tu_below(r, 1000);
    case 1: return same;
    case 2: /* very unequal */
        switch (tu_below(r, 3)) {
        case 0: return 1;
        case 1: return MCR_WEIGHT_MAX;
        default: return 1 + tu_below(r, MCR_WEIGHT_MAX);
        }
    default: return 1u << tu_below(r, 20);
    }
}

static const char *blanks(tu_rng *r, int min)
{
    static const char *const choices[] = {"", " ", "\t", "  ", "\t\t", " \t", "\t ", "   "};
    if (min == 0)
        return choices[tu_below(r, 8)];
    return choices[1 + tu_below(r, 7)];
}

/* Write a random, well-formed server file; the servers into sv (file
 * order), their count into *n. Addresses differ in host and port. */
static void random_file(tu_rng *r, const char *path, mserver *sv, size_t *n)
{
    size_t want = tu_below(r, 8) == 0 ? 100 + tu_below(r, 200) : 1 + tu_below(r, 40);
    int style = (int)tu_below(r, 4);
    uint32_t same = 1 + tu_below(r, 5000);
    const char *eol = tu_below(r, 4) == 0 ? "\r\n" : "\n";
    int last_without_newline = tu_below(r, 3) == 0;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);

    *n = 0;
    while (*n < want) {
        mserver *s = &sv[*n];
        bool dup = false;
        random_address(r, s);
        for (size_t j = 0; j < *n; j++)
            dup |= sv[j].port == s->port && strcmp(sv[j].host, s->host) == 0;
        if (dup)
            continue;
        s->memory = random_memory(r, style, same);
        if (len + 1024 > cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            ck_assert_ptr_nonnull(buf);
        }
        switch (tu_below(r, 12)) {
        case 0: len += (size_t)sprintf(buf + len, "# a comment line%s", eol); break;
        case 1: len += (size_t)sprintf(buf + len, "%s", eol); break;
        case 2: len += (size_t)sprintf(buf + len, "%s#indented comment%s", blanks(r, 1), eol); break;
        case 3: len += (size_t)sprintf(buf + len, "%s%s", blanks(r, 1), eol); break;
        default: break;
        }
        len += (size_t)sprintf(buf + len, "%s%s%s%u%s", blanks(r, 0), s->addr, blanks(r, 1),
                               s->memory, blanks(r, 0));
        if (tu_below(r, 10) == 0)
            len += (size_t)sprintf(buf + len, " # memory in MB");
        (*n)++;
        if (*n < want || !last_without_newline)
            len += (size_t)sprintf(buf + len, "%s", eol);
    }
    write_bytes(path, buf, len);
    free(buf);
}

/* ==================================================================== */
/*  Tests                                                                */
/* ==================================================================== */

/* ketama_print_continuum's output, captured from stdout. */
static char *capture_print(ketama_continuum c)
{
    FILE *tmp = tmpfile();
    int saved;
    long size;
    char *out;

    ck_assert_ptr_nonnull(tmp);
    fflush(stdout);
    saved = dup(STDOUT_FILENO);
    ck_assert_int_ge(saved, 0);
    ck_assert_int_ge(dup2(fileno(tmp), STDOUT_FILENO), 0);
    ketama_print_continuum(c);
    fflush(stdout);
    ck_assert_int_ge(dup2(saved, STDOUT_FILENO), 0);
    close(saved);
    size = ftell(tmp);
    ck_assert_int_ge(size, 0);
    out = malloc((size_t)size + 1);
    ck_assert_ptr_nonnull(out);
    rewind(tmp);
    ck_assert_uint_eq(fread(out, 1, (size_t)size, tmp), (size_t)size);
    out[size] = '\0';
    fclose(tmp);
    return out;
}

static const char three_servers[] =
    "# libketama's sample: memory in MB\n"
    "10.0.1.1:11211\t600\n"
    "10.0.1.2:11211\t300\n"
    "10.0.1.3:11211\t200\n";

/* Vectors derived by hand from the facts (MD5 of "10.0.1.1:11211-0" ...,
 * floorf(pct * 40.0 * 3) = 65, 32 and 21 labels), not from mcroute. */
START_TEST(vectors_three_servers)
{
    static const struct { const char *key; uint32_t hash, point; const char *ip; } keys[] = {
        {"foo", 3675831724u, 3677104571u, "10.0.1.2:11211"},
        {"bar", 421377335u, 447304801u, "10.0.1.1:11211"},
        {"hello", 708854109u, 736160602u, "10.0.1.3:11211"},
        {"0", 2216742351u, 2217271743u, "10.0.1.1:11211"},
        {"1", 943901380u, 949130960u, "10.0.1.2:11211"},
        {"user:1234", 3891683073u, 3905751132u, "10.0.1.1:11211"},
        {"", 3649838548u, 3652979521u, "10.0.1.1:11211"},
        /* above the last point (4284233799): wraps to the first */
        {"wrap418", 4287698589u, 10171922u, "10.0.1.1:11211"},
        /* hashes exactly to a point (the first word of MD5("10.0.1.2:11211-0")):
         * that point owns it, not the next one */
        {"10.0.1.2:11211-0", 1323065946u, 1323065946u, "10.0.1.2:11211"},
    };
    scratch s;
    ketama_continuum c = NULL;
    struct stat sb;

    scratch_init(&s);
    const char *path = scratch_path(&s, "ketama.servers");
    write_text(path, three_servers);
    ck_assert_int_eq(ketama_roll(&c, (char *)path), 1);
    ck_assert_str_eq(ketama_error(), "");
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->numpoints, 472);
    const mcs *a = c->array;
    ck_assert_uint_eq(a[0].point, 10171922u);
    ck_assert_str_eq(a[0].ip, "10.0.1.1:11211");
    ck_assert_uint_eq(a[1].point, 24991403u);
    ck_assert_str_eq(a[1].ip, "10.0.1.2:11211");
    ck_assert_uint_eq(a[2].point, 26122064u);
    ck_assert_str_eq(a[2].ip, "10.0.1.2:11211");
    ck_assert_uint_eq(a[471].point, 4284233799u);
    ck_assert_str_eq(a[471].ip, "10.0.1.2:11211");
    int count[3] = {0, 0, 0};
    for (int i = 0; i < c->numpoints; i++) {
        ck_assert_int_eq(strncmp(a[i].ip, "10.0.1.", 7), 0);
        count[a[i].ip[7] - '1']++;
        if (i > 0)
            ck_assert_uint_le(a[i - 1].point, a[i].point);
    }
    ck_assert_int_eq(count[0], 65 * 4);
    ck_assert_int_eq(count[1], 32 * 4);
    ck_assert_int_eq(count[2], 21 * 4);
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        ck_assert_uint_eq(ketama_hashi((char *)keys[i].key), keys[i].hash);
        mcs *m = ketama_get_server((char *)keys[i].key, c);
        ck_assert_ptr_nonnull(m);
        ck_assert_msg(m->point == keys[i].point && strcmp(m->ip, keys[i].ip) == 0,
                      "key \"%s\": got %u %s, want %u %s", keys[i].key, m->point, m->ip,
                      keys[i].point, keys[i].ip);
    }
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_ptr_nonnull(c->modtime);
    ck_assert_int_eq((long long)*(time_t *)c->modtime, (long long)sb.st_mtime);
    ketama_smoke(c);
    scratch_done(&s);
}
END_TEST

/* memory 7 and 3: pct = 0.7f, 0.7f * 40.0 * 2 = 55.99999904 in double,
 * 56.0 once converted to float: 56 labels, not 55 (and 24 for 0.3f). */
START_TEST(vector_float_rounding)
{
    scratch s;
    ketama_continuum c = NULL;

    scratch_init(&s);
    const char *path = scratch_path(&s, "two");
    write_text(path, "a 7\nb 3\n");
    ck_assert_int_eq(ketama_roll(&c, (char *)path), 1);
    ck_assert_int_eq(c->numpoints, (56 + 24) * 4);
    int na = 0;
    for (int i = 0; i < c->numpoints; i++)
        na += strcmp(((mcs *)c->array)[i].ip, "a") == 0;
    ck_assert_int_eq(na, 56 * 4);
    ketama_smoke(c);
    scratch_done(&s);
}
END_TEST

/* What a program passes to qsort(): (compfn)ketama_compare, the original's
 * idiom, is a cast between function types that -Wextra rejects. */
static int compare_mcs(const void *a, const void *b)
{
    return ketama_compare((mcs *)a, (mcs *)b);
}

START_TEST(hash_functions)
{
    static const unsigned char empty[16] = {0xd4, 0x1d, 0x8c, 0xd9, 0x8f, 0x00, 0xb2, 0x04,
                                            0xe9, 0x80, 0x09, 0x98, 0xec, 0xf8, 0x42, 0x7e};
    static const unsigned char abc[16] = {0x90, 0x01, 0x50, 0x98, 0x3c, 0xd2, 0x4f, 0xb0,
                                          0xd6, 0x96, 0x3f, 0x7d, 0x28, 0xe1, 0x7f, 0x72};
    unsigned char d[16];

    ketama_md5_digest((char *)"", d);
    ck_assert_mem_eq(d, empty, 16);
    ketama_md5_digest((char *)"abc", d);
    ck_assert_mem_eq(d, abc, 16);
    ck_assert_uint_eq(ketama_hashi((char *)""), 0xd98c1dd4u);
    ck_assert_uint_eq(ketama_hashi((char *)"abc"), 0x98500190u);
    ck_assert_uint_eq(ketama_hashi(NULL), 0xd98c1dd4u);

    mcs x = {5, "x"}, y = {7, "y"}, z = {5, "z"};
    ck_assert_int_eq(ketama_compare(&x, &y), -1);
    ck_assert_int_eq(ketama_compare(&y, &x), 1);
    ck_assert_int_eq(ketama_compare(&x, &z), 0);
    mcs arr[3] = {y, x, {UINT32_MAX, "max"}};
    qsort(arr, 3, sizeof(mcs), compare_mcs);
    ck_assert_uint_eq(arr[0].point, 5);
    ck_assert_uint_eq(arr[2].point, UINT32_MAX);
    ck_assert_uint_ge(sizeof(((mcs *)0)->ip), 256);
}
END_TEST

/* Many random files: a program's view through ketama.h only (the whole
 * continuum and random keys) against the model, and the parsed servers
 * through mcr_ketama_load_file. */
START_TEST(random_files_match_model)
{
    enum { FILES = 150, KEYS = 400 };
    tu_rng r;
    scratch s;
    mserver *sv = malloc(400 * sizeof(*sv));
    size_t total_points = 0;

    ck_assert_ptr_nonnull(sv);
    tu_rng_init(&r, 0x6b6574616d61ULL);
    scratch_init(&s);
    const char *path = scratch_path(&s, "random.servers");
    for (int f = 0; f < FILES; f++) {
        size_t n;
        model m;
        ketama_continuum c = NULL;

        random_file(&r, path, sv, &n);
        model_build(&m, sv, n);
        ck_assert_msg(ketama_roll(&c, (char *)path) == 1, "file %d: %s", f, ketama_error());
        expect_continuum(c, &m, sv);
        expect_keys(c, &m, sv, &r, KEYS);
        total_points += m.n;
        ketama_smoke(c);

        mcr_config *cfg = mcr_config_new();
        mcr_ring *ring = NULL;
        mcr_error err;
        ck_assert_msg(mcr_ketama_load_file(cfg, path, &err) == MCR_OK, "%s", err.message);
        ck_assert_uint_eq(mcr_config_server_count(cfg), n);
        ck_assert_int_eq(mcr_ring_new(cfg, &ring, NULL), MCR_OK);
        for (size_t i = 0; i < n; i++) {
            ck_assert_str_eq(mcr_ketama_address(cfg, i), sv[i].addr);
            ck_assert_str_eq(mcr_ring_server_host(ring, i), sv[i].host);
            ck_assert_int_eq(mcr_ring_server_port(ring, i), sv[i].port);
            ck_assert_uint_eq(mcr_ring_server_weight(ring, i), sv[i].memory);
        }
        ck_assert_uint_eq(mcr_ring_point_count(ring), m.n);
        mcr_ring_free(ring);
        mcr_config_free(cfg);
        free(m.pts);
    }
    ck_assert_uint_gt(total_points, 100000);
    free(sv);
    scratch_done(&s);
}
END_TEST

START_TEST(print_continuum_format)
{
    scratch s;
    ketama_continuum c = NULL;

    scratch_init(&s);
    const char *path = scratch_path(&s, "ketama.servers");
    write_text(path, three_servers);
    ck_assert_int_eq(ketama_roll(&c, (char *)path), 1);
    char *out = capture_print(c);
    ck_assert_int_eq(strncmp(out, "Numpoints in continuum: 472\n"
                                  "10.0.1.1:11211 (10171922)\n"
                                  "10.0.1.2:11211 (24991403)\n"
                                  "10.0.1.2:11211 (26122064)\n", 106), 0);
    /* every point, one "ip (point)" line each */
    size_t cap = 64 + 40 * (size_t)c->numpoints, len;
    char *want = malloc(cap);
    ck_assert_ptr_nonnull(want);
    len = (size_t)snprintf(want, cap, "Numpoints in continuum: %d\n", c->numpoints);
    for (int i = 0; i < c->numpoints; i++) {
        const mcs *p = &((const mcs *)c->array)[i];
        len += (size_t)snprintf(want + len, cap - len, "%s (%u)\n", p->ip, p->point);
    }
    ck_assert_str_eq(out, want);
    ck_assert_int_eq(strcmp(out + strlen(out) - 28, "10.0.1.2:11211 (4284233799)\n"), 0);
    free(want);
    free(out);
    ketama_smoke(c);

    out = capture_print(NULL);
    ck_assert_str_eq(out, "Numpoints in continuum: 0\nContinuum empty\n");
    free(out);
    scratch_done(&s);
}
END_TEST

/* Each line: an address and a memory value. */
static void expect_servers(ketama_continuum c, const mserver *sv, size_t n)
{
    model m;
    tu_rng r;
    model_build(&m, sv, n);
    tu_rng_init(&r, n);
    /* lookups first: they are where a changed file is noticed */
    expect_keys(c, &m, sv, &r, 200);
    expect_continuum(c, &m, sv);
    free(m.pts);
}

START_TEST(reload_when_file_changes)
{
    static const mserver A[] = {{"10.0.0.1:11211", "", 0, 100}, {"10.0.0.2:11211", "", 0, 100}};
    static const mserver B[] = {{"10.0.9.1:11211", "", 0, 50},
                                {"10.0.9.2:11211", "", 0, 100},
                                {"10.0.9.3:11211", "", 0, 300}};
    static const mserver C[] = {{"cache-a", "", 0, 1}};
    static const mserver D[] = {{"cache-d:22122", "", 0, 7}, {"cache-e:22122", "", 0, 9}};
    const time_t t0 = 1000000000;
    scratch s;
    ketama_continuum c = NULL;

    scratch_init(&s);
    const char *path = scratch_path(&s, "servers");
    const char *next = scratch_path(&s, "servers.new");
    write_text(path, "10.0.0.1:11211\t100\n10.0.0.2:11211\t100\n");
    set_mtime(path, t0);
    ck_assert_int_eq(ketama_roll(&c, (char *)path), 1);
    ck_assert_int_eq((long long)*(time_t *)c->modtime, (long long)t0);
    expect_servers(c, A, 2);

    /* a new mtime: the next lookup reads the new servers */
    write_text(path, "10.0.9.1:11211 50\n10.0.9.2:11211 100\n10.0.9.3:11211 300\n");
    set_mtime(path, t0 + 100);
    ck_assert_ptr_nonnull(ketama_get_server((char *)"k", c));
    ck_assert_int_eq((long long)*(time_t *)c->modtime, (long long)(t0 + 100));
    expect_servers(c, B, 3);

    /* a bad file keeps the last good continuum and tells why */
    write_text(path, "10.0.9.1:11211 50\n10.0.9.2:11211 lots\n");
    set_mtime(path, t0 + 200);
    ck_assert_ptr_nonnull(ketama_get_server((char *)"k", c));
    ck_assert_ptr_nonnull(strstr(ketama_error(), path));
    ck_assert_ptr_nonnull(strstr(ketama_error(), "line 2"));
    ck_assert_ptr_nonnull(strstr(ketama_error(), "not a number"));
    ck_assert_int_eq((long long)*(time_t *)c->modtime, (long long)(t0 + 100));
    expect_servers(c, B, 3);

    /* fixed: read again */
    write_text(path, "cache-a 1\n");
    set_mtime(path, t0 + 300);
    expect_servers(c, C, 1);

    /* replaced by a rename, even with the same mtime: a new inode */
    write_text(next, "cache-d:22122 7\ncache-e:22122 9\n");
    set_mtime(next, t0 + 300);
    ck_assert_int_eq(rename(next, path), 0);
    expect_servers(c, D, 2);

    /* gone: the last continuum stays */
    ck_assert_int_eq(unlink(path), 0);
    expect_servers(c, D, 2);
    ketama_smoke(c);
    scratch_done(&s);
}
END_TEST

/* Files that libketama misreads, read as written; the odd corners of the
 * format. */
START_TEST(good_edge_files)
{
    char longaddr[300], text[1000];
    static const struct { const char *text; const char *addr[3]; uint32_t mem[3]; } cases[] = {
        /* the original reads the last memory as 60 */
        {"a 600\nb 600", {"a", "b"}, {600, 600}},
        {"a\t600\r\nb 300\r\n", {"a", "b"}, {600, 300}},
        /* blanks after the memory: the original reads 60 */
        {"a 600   \nb 300\t\n", {"a", "b"}, {600, 300}},
        {"a 600 # in MB\n", {"a"}, {600}},
        {"  # indented comment\n\t\n \n\r\na 5\n", {"a"}, {5}},
        /* a last line of one byte is skipped, as the original does */
        {"a 5\nx", {"a"}, {5}},
        {"\n\n a 007\n", {"a"}, {7}},
        {"[2001:db8::1]:11212 3\n[::1] 4\ncache.example.net 5\n",
         {"[2001:db8::1]:11212", "[::1]", "cache.example.net"},
         {3, 4, 5}},
    };
    static const struct { const char *host; int port; } hp[] = {
        {"2001:db8::1", 11212}, {"::1", 11211}, {"cache.example.net", 11211}};
    scratch s;

    scratch_init(&s);
    const char *path = scratch_path(&s, "edge");
    for (size_t t = 0; t < sizeof(cases) / sizeof(cases[0]); t++) {
        mserver sv[3];
        size_t n = 0;
        ketama_continuum c = NULL;
        for (; n < 3 && cases[t].addr[n] != NULL; n++) {
            snprintf(sv[n].addr, sizeof(sv[n].addr), "%s", cases[t].addr[n]);
            sv[n].memory = cases[t].mem[n];
        }
        write_text(path, cases[t].text);
        ck_assert_msg(ketama_roll(&c, (char *)path) == 1, "case %zu: %s", t, ketama_error());
        expect_servers(c, sv, n);
        ketama_smoke(c);

        mcr_config *cfg = mcr_config_new();
        mcr_ring *ring = NULL;
        ck_assert_int_eq(mcr_ketama_load_file(cfg, path, NULL), MCR_OK);
        ck_assert_int_eq(mcr_ring_new(cfg, &ring, NULL), MCR_OK);
        ck_assert_uint_eq(mcr_ring_server_count(ring), n);
        for (size_t i = 0; i < n; i++) {
            ck_assert_uint_eq(mcr_ring_server_weight(ring, i), sv[i].memory);
            ck_assert_str_eq(mcr_ketama_address(cfg, i), sv[i].addr);
        }
        if (t == sizeof(cases) / sizeof(cases[0]) - 1) {
            for (size_t i = 0; i < 3; i++) {
                ck_assert_str_eq(mcr_ring_server_host(ring, i), hp[i].host);
                ck_assert_int_eq(mcr_ring_server_port(ring, i), hp[i].port);
            }
        }
        mcr_ring_free(ring);
        mcr_config_free(cfg);
    }

    /* an address of 255 bytes (the original keeps 22) and a line of 1000+
     * bytes (the original reads 126 at a time) */
    memset(longaddr, 'h', 249);
    memcpy(longaddr + 249, ":11211", 7);
    snprintf(text, sizeof(text), "# %0300d\n%s\t10\nb 20\n", 0, longaddr);
    write_text(path, text);
    ketama_continuum c = NULL;
    mserver sv[2];
    snprintf(sv[0].addr, sizeof(sv[0].addr), "%s", longaddr);
    sv[0].memory = 10;
    snprintf(sv[1].addr, sizeof(sv[1].addr), "b");
    sv[1].memory = 20;
    ck_assert_int_eq(ketama_roll(&c, (char *)path), 1);
    expect_servers(c, sv, 2);
    ketama_smoke(c);
    scratch_done(&s);
}
END_TEST

typedef struct bad_case {
    const char *text;
    size_t len; /* 0: strlen(text) */
    int code;
    int line;   /* 0: no line in the message */
    const char *needle;
} bad_case;

static const bad_case bad_cases[] = {
    {"10.0.0.1:11211\tabc\n", 0, MCR_ERR_SYNTAX, 1, "not a number"},
    {"a 10\nb 0\n", 0, MCR_ERR_RANGE, 2, "memory 0"},
    {"a 10\nb\n", 0, MCR_ERR_SYNTAX, 2, "no memory field"},
    {"a 10\nb   \r\n", 0, MCR_ERR_SYNTAX, 2, "no memory field"},
    {"a:1:2 10\n", 0, MCR_ERR_SYNTAX, 1, "more than one ':'"},
    {"fe80::1 10\n", 0, MCR_ERR_SYNTAX, 1, "[addr]:port"},
    {"a:99999 10\n", 0, MCR_ERR_RANGE, 1, "port"},
    {"a:0 10\n", 0, MCR_ERR_RANGE, 1, "port"},
    {"a:x 10\n", 0, MCR_ERR_SYNTAX, 1, "port \"x\" is not a number"},
    {"a: 10\n", 0, MCR_ERR_SYNTAX, 1, "port"},
    {"[::1 10\n", 0, MCR_ERR_SYNTAX, 1, "without ']'"},
    {"[::1]x 10\n", 0, MCR_ERR_SYNTAX, 1, "expected ':'"},
    {"a,b 10\n", 0, MCR_ERR_SYNTAX, 1, "forbidden byte"},
    {"# c\na 10\nb 5\n\na 7\n", 0, MCR_ERR_DUPLICATE, 5, "same host and port as line 2"},
    {"a 10\na:11211 5\n", 0, MCR_ERR_DUPLICATE, 2, "line 1"},
    {"[::1] 1\n[::1]:11211 2\n", 0, MCR_ERR_DUPLICATE, 2, "line 1"},
    {"a 1000001\n", 0, MCR_ERR_RANGE, 1, "above 1000000"},
    {"a 99999999999999999999999999\n", 0, MCR_ERR_RANGE, 1, "above 1000000"},
    {"a 10 20\n", 0, MCR_ERR_SYNTAX, 1, "after the memory field"},
    {"a -5\n", 0, MCR_ERR_SYNTAX, 1, "not a number"},
    {"a +5\n", 0, MCR_ERR_SYNTAX, 1, "not a number"},
    {"a 5MB\n", 0, MCR_ERR_SYNTAX, 1, "\"5MB\" is not a number"},
    {"a 5#x\n", 0, MCR_ERR_SYNTAX, 1, "not a number"},
    {"a 1\nb\0 2\n", 10, MCR_ERR_SYNTAX, 2, "NUL"},
    {"", 0, MCR_ERR_EMPTY, 0, "no server"},
    {"# only comments\n\n   \n", 0, MCR_ERR_EMPTY, 0, "no server"},
};

/* A 256-byte address, written into buf. */
static const char *too_long_line(char *buf)
{
    memset(buf, 'h', 256);
    strcpy(buf + 256, " 10\n");
    return buf;
}

START_TEST(bad_files_load)
{
    scratch s;
    char buf[300];

    scratch_init(&s);
    const char *path = scratch_path(&s, "bad");
    for (size_t t = 0; t <= sizeof(bad_cases) / sizeof(bad_cases[0]); t++) {
        bad_case bc = t < sizeof(bad_cases) / sizeof(bad_cases[0])
                          ? bad_cases[t]
                          : (bad_case){too_long_line(buf), 0, MCR_ERR_TOO_LONG, 1,
                                       "longer than 255 bytes"};
        char where[400];
        mcr_error err;
        mcr_config *cfg = mcr_config_new();

        write_bytes(path, bc.text, bc.len ? bc.len : strlen(bc.text));
        ck_assert_int_eq(mcr_config_add_server(cfg, "keep", 1, 1, NULL), MCR_OK);
        memset(&err, 0, sizeof(err));
        int rc = mcr_ketama_load_file(cfg, path, &err);
        ck_assert_msg(rc == bc.code, "case %zu: got %d (%s), want %d", t, rc, err.message, bc.code);
        ck_assert_int_eq(err.code, bc.code);
        if (bc.line > 0)
            snprintf(where, sizeof(where), "%s line %d: ", path, bc.line);
        else
            snprintf(where, sizeof(where), "%s", path);
        ck_assert_msg(strstr(err.message, where) != NULL, "case %zu: \"%s\" lacks \"%s\"", t,
                      err.message, where);
        ck_assert_msg(strstr(err.message, bc.needle) != NULL, "case %zu: \"%s\" lacks \"%s\"", t,
                      err.message, bc.needle);
        /* all or nothing */
        ck_assert_uint_eq(mcr_config_server_count(cfg), 1);
        mcr_config_free(cfg);
    }

    /* a server already in the config; the config unchanged */
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    write_text(path, "b 1\na 2\n");
    ck_assert_int_eq(mcr_config_add_server(cfg, "a", 11211, 1, NULL), MCR_OK);
    ck_assert_int_eq(mcr_ketama_load_file(cfg, path, &err), MCR_ERR_DUPLICATE);
    ck_assert_ptr_nonnull(strstr(err.message, "line 2"));
    ck_assert_ptr_nonnull(strstr(err.message, "already in the config"));
    ck_assert_uint_eq(mcr_config_server_count(cfg), 1);
    ck_assert_ptr_null(mcr_ketama_address(cfg, 0));
    /* appending after it works, and the first server is still there */
    write_text(path, "b 1\nc:5 2\n");
    ck_assert_int_eq(mcr_ketama_load_file(cfg, path, &err), MCR_OK);
    ck_assert_uint_eq(mcr_config_server_count(cfg), 3);
    ck_assert_str_eq(mcr_ketama_address(cfg, 2), "c:5");
    ck_assert_ptr_null(mcr_ketama_address(cfg, 3));
    ck_assert_int_eq(mcr_config_add_server(cfg, "c", 5, 1, NULL), MCR_ERR_DUPLICATE);
    mcr_config_free(cfg);

    /* unreadable */
    cfg = mcr_config_new();
    ck_assert_int_eq(mcr_ketama_load_file(cfg, "/nonexistent/ketama.servers", &err),
                     MCR_ERR_IO);
    ck_assert_ptr_nonnull(strstr(err.message, "/nonexistent/ketama.servers"));
    ck_assert_int_eq(mcr_ketama_load_file(cfg, s.dir, &err), MCR_ERR_IO);
    ck_assert_ptr_nonnull(strstr(err.message, s.dir));
    ck_assert_int_eq(mcr_ketama_load_file(NULL, path, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_ketama_load_file(cfg, NULL, NULL), MCR_ERR_INVALID);
    ck_assert_uint_eq(mcr_config_server_count(cfg), 0);
    ck_assert_ptr_null(mcr_ketama_address(NULL, 0));
    mcr_config_free(cfg);
    scratch_done(&s);
}
END_TEST

START_TEST(bad_files_roll)
{
    scratch s;
    char buf[300];

    scratch_init(&s);
    const char *path = scratch_path(&s, "bad");
    for (size_t t = 0; t <= sizeof(bad_cases) / sizeof(bad_cases[0]); t++) {
        bad_case bc = t < sizeof(bad_cases) / sizeof(bad_cases[0])
                          ? bad_cases[t]
                          : (bad_case){too_long_line(buf), 0, MCR_ERR_TOO_LONG, 1,
                                       "longer than 255 bytes"};
        char where[400];
        ketama_continuum c = (ketama_continuum)&buf; /* must be overwritten */

        write_bytes(path, bc.text, bc.len ? bc.len : strlen(bc.text));
        ck_assert_int_eq(ketama_roll(&c, (char *)path), 0);
        ck_assert_ptr_null(c);
        if (bc.line > 0)
            snprintf(where, sizeof(where), "%s line %d: ", path, bc.line);
        else
            snprintf(where, sizeof(where), "%s", path);
        ck_assert_msg(strstr(ketama_error(), where) != NULL, "case %zu: \"%s\" lacks \"%s\"", t,
                      ketama_error(), where);
        ck_assert_msg(strstr(ketama_error(), bc.needle) != NULL, "case %zu: \"%s\" lacks \"%s\"",
                      t, ketama_error(), bc.needle);
        ketama_smoke(c); /* NULL: a no-op */
    }
    ketama_continuum c = NULL;
    ck_assert_int_eq(ketama_roll(&c, (char *)"/nonexistent/ketama.servers"), 0);
    ck_assert_ptr_nonnull(strstr(ketama_error(), "cannot open"));
    ck_assert_int_eq(ketama_roll(&c, NULL), 0);
    ck_assert_str_ne(ketama_error(), "");
    ck_assert_int_eq(ketama_roll(NULL, (char *)path), 0);
    ck_assert_ptr_null(ketama_get_server((char *)"k", NULL));
    /* success clears the error */
    write_text(path, "a 1\n");
    ck_assert_int_eq(ketama_roll(&c, (char *)path), 1);
    ck_assert_str_eq(ketama_error(), "");
    ck_assert_ptr_nonnull(ketama_get_server(NULL, c));
    ck_assert_uint_eq(ketama_get_server(NULL, c)->point, ketama_get_server((char *)"", c)->point);
    ketama_smoke(c);
    scratch_done(&s);
}
END_TEST

/* ------------------------------------------------------------ threads */

typedef struct worker {
    const char *good, *bad;
    const model *m;
    const mserver *sv;
    uint64_t salt;
    char error[512];
    int ok;
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    ketama_continuum c = NULL;
    tu_rng r;

    tu_rng_init(&r, w->salt);
    w->ok = 0;
    if (ketama_roll(&c, (char *)w->bad) != 0)
        return NULL;
    snprintf(w->error, sizeof(w->error), "%s", ketama_error());
    if (ketama_roll(&c, (char *)w->good) != 1 || strcmp(ketama_error(), "") != 0)
        return NULL;
    for (int i = 0; i < 20000; i++) {
        char key[48];
        tu_key(&r, key, 40);
        size_t want = model_find(w->m, model_hash(key));
        mcs *got = ketama_get_server(key, c);
        if (got == NULL || got->point != w->m->pts[want].value ||
            strcmp(got->ip, w->sv[w->m->pts[want].server].addr) != 0) {
            ketama_smoke(c);
            return NULL;
        }
    }
    ketama_smoke(c);
    w->ok = 1;
    return NULL;
}

/* Separate continua in separate threads, errors per thread. */
START_TEST(threads_own_continua)
{
    static const mserver sv[] = {{"10.0.1.1:11211", "", 0, 600},
                                 {"10.0.1.2:11211", "", 0, 300},
                                 {"10.0.1.3:11211", "", 0, 200}};
    enum { THREADS = 4 };
    scratch s;
    model m;
    pthread_t th[THREADS];
    worker w[THREADS];

    scratch_init(&s);
    const char *good = scratch_path(&s, "good");
    const char *bad = scratch_path(&s, "bad");
    write_text(good, three_servers);
    write_text(bad, "a 1\nb zero\n");
    model_build(&m, sv, 3);
    ketama_continuum c = NULL;
    ck_assert_int_eq(ketama_roll(&c, (char *)good), 1);
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){good, bad, &m, sv, (uint64_t)i + 1, "", 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        ck_assert_msg(w[i].ok, "thread %d failed", i);
        ck_assert_ptr_nonnull(strstr(w[i].error, "line 2"));
    }
    /* the workers' failures did not touch this thread's error */
    ck_assert_str_eq(ketama_error(), "");
    ketama_smoke(c);
    free(m.pts);
    scratch_done(&s);
}
END_TEST

static Suite *ketama_suite(void)
{
    Suite *s = suite_create("compat_ketama");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, vectors_three_servers);
    tcase_add_test(tc, vector_float_rounding);
    tcase_add_test(tc, hash_functions);
    tcase_add_test(tc, random_files_match_model);
    tcase_add_test(tc, print_continuum_format);
    tcase_add_test(tc, reload_when_file_changes);
    tcase_add_test(tc, good_edge_files);
    tcase_add_test(tc, bad_files_load);
    tcase_add_test(tc, bad_files_roll);
    suite_add_tcase(s, tc);
    /* The test with threads: the only one a TSan build runs
     * (THREADS_CASE in test/CMakeLists.txt). */
    TCase *tt = tcase_create("threads");
    tcase_set_timeout(tt, 600);
    tcase_add_test(tt, threads_own_continua);
    suite_add_tcase(s, tt);
    return s;
}

int main(void)
{
    return tu_run(ketama_suite());
}
