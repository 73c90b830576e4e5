/* SPDX-License-Identifier: BSD-3-Clause */
/* test_nomem.c: every allocation of the placement library, snapshots, diffs and the compat parsers failing in turn: MCR_ERR_NOMEM with a message, or a right result, and nothing leaked. */
#include <check.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "mcroute.h"
#include "mcroute_ketama.h"
#include "mcroute_libmemcached.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"
#include "mcroute_twemproxy.h"
#include "nomem_wrap.h"
#include "testutil.h"

/* The allocations fail through nomem_wrap.c; nm_every_failure() (see
 * nomem_wrap.h) runs each operation once without a failure, counting its
 * allocations, then once with each of them failing in turn. */

/* The spymemcached modes look names up as Java does (lib/placement/javaname.c): the
 * resolver can run out of memory too (EAI_MEMORY), which must be an error,
 * never the label of a name that does not resolve (another placement).
 * Both calls are wrapped as allocations of their own (test/CMakeLists.txt). */
int __real_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                       struct addrinfo **res);
int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                       struct addrinfo **res);
int __real_getnameinfo(const struct sockaddr *sa, socklen_t salen, char *host, socklen_t hostlen,
                       char *serv, socklen_t servlen, int flags);
int __wrap_getnameinfo(const struct sockaddr *sa, socklen_t salen, char *host, socklen_t hostlen,
                       char *serv, socklen_t servlen, int flags);

int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                       struct addrinfo **res)
{
    return nm_fail_here() ? EAI_MEMORY : __real_getaddrinfo(node, service, hints, res);
}

int __wrap_getnameinfo(const struct sockaddr *sa, socklen_t salen, char *host, socklen_t hostlen,
                       char *serv, socklen_t servlen, int flags)
{
    return nm_fail_here() ? EAI_MEMORY
                          : __real_getnameinfo(sa, salen, host, hostlen, serv, servlen, flags);
}

/* ------------------------------------------------------------ fixtures */

#define KEYS 200

static size_t key_of(unsigned i, char *buf)
{
    return (size_t)snprintf(buf, 32, "nomem:%u:%08x", i, i * 2654435761u);
}

/* The owners of KEYS keys, by ring or snapshot. */
static void owners_ring(const mcr_ring *r, uint32_t *out)
{
    char k[32];
    for (unsigned i = 0; i < KEYS; i++)
        out[i] = mcr_ring_locate(r, k, key_of(i, k));
}

static void owners_snap(const mcr_snapshot *s, uint32_t *out)
{
    char k[32];
    for (unsigned i = 0; i < KEYS; i++)
        out[i] = mcr_snapshot_locate(s, k, key_of(i, k));
}

/* `n` servers on 127.0.0.1, ports port0 and up; with `weighted`, of weights
 * 1 to 5. Loopback: the spymemcached modes look an address's name up as
 * Java does, and 127.0.0.1's is in /etc/hosts (no query leaves the host). */
static mcr_config *config_of(mcr_mode mode, unsigned n, unsigned port0, int weighted)
{
    mcr_config *cfg = mcr_config_new();
    ck_assert_ptr_nonnull(cfg);
    ck_assert_int_eq(mcr_config_set_mode(cfg, mode), MCR_OK);
    for (unsigned i = 0; i < n; i++) {
        mcr_error err;
        int rc = mcr_config_add_server(cfg, "127.0.0.1", (int)(port0 + i),
                                       weighted ? 1 + i % 5 : 1, &err);
        ck_assert_msg(rc == MCR_OK, "%s", err.message);
    }
    return cfg;
}

/* --- a ring, a snapshot of a config */

typedef struct ring_ctx {
    mcr_config *cfg;
    mcr_ring *ring;
    mcr_snapshot *snap;
    uint32_t want[KEYS];
} ring_ctx;

static int ring_run(void *v, mcr_error *err)
{
    ring_ctx *c = v;
    return mcr_ring_new(c->cfg, &c->ring, err);
}

/* A ring built despite a failure places the KEYS keys as `want`. */
static void expect_ring(const mcr_ring *ring, const uint32_t *want)
{
    uint32_t got[KEYS];
    ck_assert_ptr_nonnull(ring);
    owners_ring(ring, got);
    ck_assert_msg(memcmp(got, want, sizeof got) == 0, "a ring built despite a failure "
                  "places keys differently");
}

static void ring_check(void *v)
{
    ring_ctx *c = v;
    expect_ring(c->ring, c->want);
}

static void ring_clean(void *v)
{
    ring_ctx *c = v;
    mcr_ring_free(c->ring);
    c->ring = NULL;
}

static int snap_run(void *v, mcr_error *err)
{
    ring_ctx *c = v;
    return mcr_snapshot_new(c->cfg, 7, &c->snap, err);
}

static void snap_check(void *v)
{
    ring_ctx *c = v;
    uint32_t got[KEYS];
    ck_assert_ptr_nonnull(c->snap);
    ck_assert_uint_eq(mcr_snapshot_epoch(c->snap), 7);
    owners_snap(c->snap, got);
    ck_assert_msg(memcmp(got, c->want, sizeof got) == 0, "a snapshot built despite a failure "
                  "places keys differently");
}

static void snap_clean(void *v)
{
    ring_ctx *c = v;
    mcr_snapshot_unref(c->snap);
    c->snap = NULL;
}

static const nm_op ring_op = {"mcr_ring_new", ring_run, ring_check, ring_clean, 0};
static const nm_op snap_op = {"mcr_snapshot_new", snap_run, snap_check, snap_clean, 0};

START_TEST(nomem_every_mode)
{
    for (int m = 0; m < MCR_MODE_COUNT; m++) {
        ring_ctx c = {0};
        mcr_error err;
        c.cfg = config_of((mcr_mode)m, 9, 11211, 0);
        mcr_snapshot *ref = NULL;
        int rc = mcr_snapshot_new(c.cfg, 7, &ref, &err);
        ck_assert_msg(rc == MCR_OK, "mode %s: %s", mcr_mode_name((mcr_mode)m), err.message);
        owners_snap(ref, c.want);
        mcr_snapshot_unref(ref);
        nm_every_failure(&snap_op, &c, 0, NULL);
        nm_every_failure(&ring_op, &c, 0, NULL);
        mcr_config_free(c.cfg);
    }
}
END_TEST

/* A continuum of 2^18 points or more (1,700 servers of 160 points) takes
 * the packed search (lib/placement/ringsearch.c): its index and its packed points
 * are the last allocations of a build. */
START_TEST(nomem_packed_search)
{
    ring_ctx c = {0};
    c.cfg = config_of(MCR_MODE_KETAMA, 1700, 11211, 1);
    mcr_ring *ref = NULL;
    ck_assert_int_eq(mcr_ring_new(c.cfg, &ref, NULL), MCR_OK);
    ck_assert_uint_ge(mcr_ring_point_count(ref), (size_t)1 << 18);
    owners_ring(ref, c.want);
    mcr_ring_free(ref);
    nm_every_failure(&ring_op, &c, 4, "packed points");
    nm_every_failure(&ring_op, &c, 4, "continuum index");
    mcr_config_free(c.cfg);
}
END_TEST

/* What a constructor's NULL (out of memory) returns to nm_every_failure(). */
static int out_of_memory(const char *what, mcr_error *err)
{
    err->code = MCR_ERR_NOMEM;
    snprintf(err->message, sizeof err->message, "%s: out of memory", what);
    return MCR_ERR_NOMEM;
}

/* --- a config from a server list */

typedef struct list_ctx {
    mcr_config *cfg;
} list_ctx;

static const char *const LIST = "10.0.0.1:11211,10.0.0.2:11212:3,[::1]:11213,cache-4.example";

static int list_run(void *v, mcr_error *err)
{
    list_ctx *c = v;
    c->cfg = mcr_config_new();
    if (c->cfg == NULL)
        return out_of_memory("mcr_config_new", err);
    return mcr_config_add_servers(c->cfg, LIST, err);
}

static void list_check(void *v)
{
    list_ctx *c = v;
    ck_assert_uint_eq(mcr_config_server_count(c->cfg), 4);
}

static void list_clean(void *v)
{
    list_ctx *c = v;
    mcr_config_free(c->cfg);
    c->cfg = NULL;
}

START_TEST(nomem_server_list)
{
    static const nm_op op = {"mcr_config_add_servers", list_run, list_check, list_clean, 0};
    list_ctx c = {0};
    nm_every_failure(&op, &c, 0, NULL);
}
END_TEST

/* --- changes applied, the changes between two snapshots, a diff */

typedef struct change_ctx {
    mcr_snapshot *old, *want_snap;
    mcr_changes *ch;
    mcr_snapshot *out;
    mcr_changes *between;
    size_t count;
    mcr_diff *diff;
    uint32_t want[KEYS];
} change_ctx;

static int apply_run(void *v, mcr_error *err)
{
    change_ctx *c = v;
    return mcr_snapshot_apply(c->old, c->ch, &c->out, err);
}

static void apply_check(void *v)
{
    change_ctx *c = v;
    uint32_t got[KEYS];
    ck_assert_ptr_nonnull(c->out);
    owners_snap(c->out, got);
    ck_assert_msg(memcmp(got, c->want, sizeof got) == 0, "applied despite a failure, the "
                  "snapshot places keys differently");
    ck_assert_str_eq(mcr_snapshot_checksum(c->out), mcr_snapshot_checksum(c->want_snap));
}

static void apply_clean(void *v)
{
    change_ctx *c = v;
    mcr_snapshot_unref(c->out);
    c->out = NULL;
}

static int between_run(void *v, mcr_error *err)
{
    change_ctx *c = v;
    return mcr_changes_between(c->old, c->want_snap, 0, &c->between, &c->count, err);
}

static void between_check(void *v)
{
    change_ctx *c = v;
    ck_assert_ptr_nonnull(c->between);
    ck_assert_uint_eq(c->count, 3);
    ck_assert_uint_eq(mcr_changes_count(c->between), 3);
}

static void between_clean(void *v)
{
    change_ctx *c = v;
    mcr_changes_free(c->between);
    c->between = NULL;
}

static int diff_run(void *v, mcr_error *err)
{
    change_ctx *c = v;
    return mcr_diff_new(c->old, c->want_snap, &c->diff, err);
}

static void diff_check(void *v)
{
    change_ctx *c = v;
    ck_assert_ptr_nonnull(c->diff);
    ck_assert(mcr_diff_moved(c->diff) > 0.0 && mcr_diff_moved(c->diff) < 1.0);
    ck_assert_uint_gt(mcr_diff_arc_count(c->diff), 0);
}

static void diff_clean(void *v)
{
    change_ctx *c = v;
    mcr_diff_free(c->diff);
    c->diff = NULL;
}

START_TEST(nomem_changes)
{
    static const nm_op apply = {"mcr_snapshot_apply", apply_run, apply_check, apply_clean, 0};
    static const nm_op between = {"mcr_changes_between", between_run, between_check,
                                  between_clean, 0};
    static const nm_op diff = {"mcr_diff_new", diff_run, diff_check, diff_clean, 0};
    change_ctx c = {0};
    mcr_error err;
    mcr_config *cfg = config_of(MCR_MODE_KETAMA, 12, 11211, 1);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &c.old, NULL), MCR_OK);
    mcr_config_free(cfg);
    c.ch = mcr_changes_new();
    ck_assert_ptr_nonnull(c.ch);
    mcr_server_desc add = {.id = "new-1", .host = "127.0.0.2", .port = 11300, .weight = 2,
                           .zone = "z1", .state = MCR_STATE_ACTIVE};
    ck_assert_int_eq(mcr_changes_add(c.ch, &add, &err), MCR_OK);
    ck_assert_int_eq(mcr_changes_remove(c.ch, "127.0.0.1:11214", &err), MCR_OK);
    ck_assert_int_eq(mcr_changes_set_weight(c.ch, "127.0.0.1:11216", 4, &err), MCR_OK);
    ck_assert_msg(mcr_snapshot_apply(c.old, c.ch, &c.want_snap, &err) == MCR_OK, "%s",
                  err.message);
    owners_snap(c.want_snap, c.want);

    nm_every_failure(&apply, &c, 0, NULL);
    nm_every_failure(&between, &c, 0, NULL);
    nm_every_failure(&diff, &c, 0, NULL);

    mcr_changes_free(c.ch);
    mcr_snapshot_unref(c.want_snap);
    mcr_snapshot_unref(c.old);
}
END_TEST

/* --- a router: made, published to, changed */

typedef struct router_ctx {
    mcr_snapshot *first, *second;
    mcr_changes *ch;
    mcr_router *router;
    uint32_t want[KEYS]; /* the owners after the changes */
} router_ctx;

static int router_run(void *v, mcr_error *err)
{
    router_ctx *c = v;
    int rc = mcr_router_new(c->first, &c->router, err);
    if (rc == MCR_OK)
        rc = mcr_router_publish(c->router, c->second, err);
    if (rc == MCR_OK)
        rc = mcr_router_apply(c->router, c->ch, 0, err);
    return rc;
}

static void router_check(void *v)
{
    router_ctx *c = v;
    ck_assert_ptr_nonnull(c->router);
    const mcr_snapshot *s = mcr_router_acquire(c->router);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(mcr_snapshot_epoch(s), mcr_snapshot_epoch(c->second) + 1);
    uint32_t got[KEYS];
    owners_snap(s, got);
    mcr_router_release(c->router, s);
    ck_assert_msg(memcmp(got, c->want, sizeof got) == 0, "a router changed despite a failure "
                  "places keys differently");
}

static void router_clean(void *v)
{
    router_ctx *c = v;
    mcr_router_free(c->router); /* waits for the snapshots it replaced to be freed */
    c->router = NULL;
}

START_TEST(nomem_router)
{
    static const nm_op op = {"router new, publish, apply", router_run, router_check,
                             router_clean, 0};
    router_ctx c = {0};
    mcr_error err;
    mcr_config *cfg = config_of(MCR_MODE_KETAMA, 8, 11211, 1);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &c.first, NULL), MCR_OK);
    mcr_config_free(cfg);
    cfg = config_of(MCR_MODE_KETAMA, 10, 11211, 1);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 2, &c.second, NULL), MCR_OK);
    mcr_config_free(cfg);
    c.ch = mcr_changes_new();
    ck_assert_ptr_nonnull(c.ch);
    ck_assert_int_eq(mcr_changes_remove(c.ch, "127.0.0.1:11213", &err), MCR_OK);
    mcr_snapshot *after = NULL;
    ck_assert_msg(mcr_snapshot_apply(c.second, c.ch, &after, &err) == MCR_OK, "%s", err.message);
    owners_snap(after, c.want);
    mcr_snapshot_unref(after);

    nm_every_failure(&op, &c, 0, NULL);

    mcr_changes_free(c.ch);
    mcr_snapshot_unref(c.second);
    mcr_snapshot_unref(c.first);
}
END_TEST

/* --- a snapshot as text and as a file, and back */

typedef struct text_ctx {
    mcr_snapshot *snap;
    const char *path;
    char *text;
    size_t len;
    mcr_snapshot *back;
} text_ctx;

static int text_run(void *v, mcr_error *err)
{
    text_ctx *c = v;
    int rc = mcr_snapshot_text(c->snap, &c->text, &c->len, err);
    return rc != MCR_OK ? rc
                        : mcr_snapshot_parse(c->text, c->len, "nomem", NULL, 0, &c->back, err);
}

static int file_run(void *v, mcr_error *err)
{
    text_ctx *c = v;
    int rc = mcr_snapshot_save(c->snap, c->path, err);
    return rc != MCR_OK ? rc : mcr_snapshot_load(c->path, NULL, 0, &c->back, err);
}

static void back_check(void *v)
{
    text_ctx *c = v;
    ck_assert_ptr_nonnull(c->back);
    ck_assert_uint_eq(mcr_snapshot_epoch(c->back), mcr_snapshot_epoch(c->snap));
    ck_assert_str_eq(mcr_snapshot_checksum(c->back), mcr_snapshot_checksum(c->snap));
}

static void back_clean(void *v)
{
    text_ctx *c = v;
    free(c->text);
    c->text = NULL;
    mcr_snapshot_unref(c->back);
    c->back = NULL;
}

START_TEST(nomem_snapshot_text)
{
    static const nm_op text = {"snapshot text and parse", text_run, back_check, back_clean, 0};
    static const nm_op file = {"snapshot save and load", file_run, back_check, back_clean, 0};
    static const mcr_mode modes[] = {MCR_MODE_KETAMA, MCR_MODE_SLOTS, MCR_MODE_MAGLEV,
                                     MCR_MODE_STABLE_KETAMA};
    char *dir = tu_tmpdir("nomem");
    char path[512];
    snprintf(path, sizeof path, "%s/snapshot", dir);
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        text_ctx c = {0};
        mcr_config *cfg = config_of(modes[m], 6, 11211, modes[m] != MCR_MODE_SLOTS);
        ck_assert_int_eq(mcr_snapshot_new(cfg, 41, &c.snap, NULL), MCR_OK);
        mcr_config_free(cfg);
        c.path = path;
        nm_every_failure(&text, &c, 0, NULL);
        nm_every_failure(&file, &c, 0, NULL);
        mcr_snapshot_unref(c.snap);
    }
    tu_tmpdir_free(dir);
}
END_TEST

/* --- libmemcached's option string, twemproxy's YAML, a libketama file */

typedef struct compat_ctx {
    const char *path;
    mcr_lmc *lmc;
    mcr_twem *twem;
    mcr_config *cfg;
    mcr_ring *ring;
    uint32_t want[KEYS];
} compat_ctx;

static int lmc_run(void *v, mcr_error *err)
{
    compat_ctx *c = v;
    c->lmc = mcr_lmc_new();
    if (c->lmc == NULL)
        return out_of_memory("mcr_lmc_new", err);
    int rc = mcr_lmc_parse_options(c->lmc,
                                   "--SERVER=10.0.0.1:11211/?3 --SERVER=10.0.0.2:11212 "
                                   "--SERVER=cache-3.example --DISTRIBUTION=consistent "
                                   "--HASH=MD5 --NAMESPACE=app",
                                   err);
    return rc != MCR_OK ? rc : mcr_lmc_ring(c->lmc, &c->ring, err);
}

static void compat_check(void *v)
{
    compat_ctx *c = v;
    expect_ring(c->ring, c->want);
}

static void compat_clean(void *v)
{
    compat_ctx *c = v;
    mcr_ring_free(c->ring);
    mcr_lmc_free(c->lmc);
    mcr_twem_free(c->twem);
    mcr_config_free(c->cfg);
    c->ring = NULL;
    c->lmc = NULL;
    c->twem = NULL;
    c->cfg = NULL;
}

static const char *const YAML =
    "alpha:\n"
    "  listen: 127.0.0.1:22121\n"
    "  hash: fnv1a_64\n"
    "  distribution: ketama\n"
    "  servers:\n"
    "   - 10.0.0.1:11211:1 one\n"
    "   - 10.0.0.2:11211:2 two\n"
    "   - 10.0.0.3:11211:1\n"
    "beta:\n"
    "  listen: 127.0.0.1:22122\n"
    "  distribution: modula\n"
    "  servers:\n"
    "   - 10.0.1.1:11211:1\n";

static int twem_run(void *v, mcr_error *err)
{
    compat_ctx *c = v;
    int rc = mcr_twem_load_buffer(YAML, strlen(YAML), "nomem.yml", &c->twem, err);
    return rc != MCR_OK ? rc : mcr_twem_ring(c->twem, 0, &c->ring, err);
}

/* A file of c->path loaded into a new config with `load`, then its ring. */
static int file_ring(compat_ctx *c, int (*load)(mcr_config *, const char *, mcr_error *),
                     mcr_error *err)
{
    c->cfg = mcr_config_new();
    if (c->cfg == NULL)
        return out_of_memory("mcr_config_new", err);
    int rc = load(c->cfg, c->path, err);
    return rc != MCR_OK ? rc : mcr_ring_new(c->cfg, &c->ring, err);
}

static int ketama_run(void *v, mcr_error *err)
{
    return file_ring(v, mcr_ketama_load_file, err);
}

static int server_file_run(void *v, mcr_error *err)
{
    return file_ring(v, mcr_config_load_server_file, err);
}

/* The owners `op` gives without a failure, as the reference. */
static void reference(const nm_op *op, compat_ctx *c)
{
    mcr_error err;
    ck_assert_msg(op->run(c, &err) == MCR_OK, "%s: %s", op->name, err.message);
    owners_ring(c->ring, c->want);
    op->clean(c);
}

START_TEST(nomem_compat)
{
    static const nm_op lmc = {"libmemcached options", lmc_run, compat_check, compat_clean, 0};
    static const nm_op twem = {"twemproxy YAML", twem_run, compat_check, compat_clean, 0};
    static const nm_op ketama = {"libketama file", ketama_run, compat_check, compat_clean, 0};
    static const nm_op server_file = {"server file", server_file_run, compat_check,
                                      compat_clean, 0};
    compat_ctx c = {0};

    reference(&lmc, &c);
    nm_every_failure(&lmc, &c, 0, NULL);
    reference(&twem, &c);
    nm_every_failure(&twem, &c, 0, NULL);

    char *dir = tu_tmpdir("nomem");
    char path[512];
    snprintf(path, sizeof path, "%s/servers", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("# a libketama server file\n10.0.0.1:11211\t600\n10.0.0.2:11211 300\n"
          "10.0.0.3:11212\t900\n",
          f);
    ck_assert_int_eq(fclose(f), 0);
    c.path = path;
    reference(&ketama, &c);
    nm_every_failure(&ketama, &c, 0, NULL);

    snprintf(path, sizeof path, "%s/list", dir);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("# servers\n10.0.0.1:11211 weight=3 zone=a\n\n10.0.0.2 id=two\n"
          "[::1]:11213:2 # the third\n",
          f);
    ck_assert_int_eq(fclose(f), 0);
    reference(&server_file, &c);
    nm_every_failure(&server_file, &c, 0, NULL);
    tu_tmpdir_free(dir);
}
END_TEST

static Suite *nomem_suite(void)
{
    Suite *s = suite_create("nomem");
    const tu_case cases[] = {
        {"every_mode", nomem_every_mode},
        {"packed_search", nomem_packed_search},
        {"server_list", nomem_server_list},
        {"changes", nomem_changes},
        {"snapshot_text", nomem_snapshot_text},
        {"router", nomem_router},
        {"compat", nomem_compat},
    };
    tu_add_cases(s, cases, sizeof cases / sizeof cases[0], 600, NULL);
    return s;
}

int main(void)
{
    return tu_run(nomem_suite());
}
