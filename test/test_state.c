/* SPDX-License-Identifier: BSD-3-Clause */
/* test_state.c: Check suite of a host's shared state (mcroute_state.h): the state file's text written and parsed back, every damage refused; routers fed from a state following each generation, their migrations, forked children and dead processes' slots, the writer's lock and restart, and readers on many threads. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mcroute.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"
#include "mcroute_state.h"
#include "state/state_internal.h"
#include "testutil.h"

/* ------------------------------------------------------------ helpers */

/* The snapshot of `n` servers 10.0.0.1.. at `epoch` (ketama, md5). */
static mcr_snapshot *snap_n(unsigned n, uint64_t epoch)
{
    mcr_config *cfg = mcr_config_new();
    mcr_error err = {0};
    ck_assert_ptr_nonnull(cfg);
    ck_assert_int_eq(mcr_config_set_mode(cfg, MCR_MODE_KETAMA), MCR_OK);
    for (unsigned i = 0; i < n; i++) {
        char host[32];
        snprintf(host, sizeof(host), "10.0.%u.%u", i / 250, i % 250 + 1);
        ck_assert_int_eq(mcr_config_add_server(cfg, host, 11211, 1, &err), MCR_OK);
    }
    mcr_snapshot *s = NULL;
    ck_assert_msg(mcr_snapshot_new(cfg, epoch, &s, &err) == MCR_OK, "%s", err.message);
    mcr_config_free(cfg);
    return s;
}

typedef struct scratch {
    char *dir;
    char path[512], shm[600];
} scratch;

static void scratch_init(scratch *s)
{
    s->dir = tu_tmpdir("state");
    snprintf(s->path, sizeof(s->path), "%s/web.state", s->dir);
    snprintf(s->shm, sizeof(s->shm), "%s.shm", s->path);
}

static void scratch_free(scratch *s)
{
    unlink(s->path);
    unlink(s->shm);
    ck_assert_uint_eq(tu_tmpdir_free(s->dir), 0);
}

static mcr_state_writer *writer_open(const scratch *s, unsigned slots)
{
    mcr_state_writer_options o = {.slots = slots, .mode = 0600};
    mcr_state_writer *w = NULL;
    mcr_error err = {0};
    ck_assert_msg(mcr_state_writer_open(s->path, &o, &w, &err) == MCR_OK, "%s", err.message);
    return w;
}

/* Write `snap` (and a migration when `phase` is not NONE). */
static uint64_t put(mcr_state_writer *w, const mcr_snapshot *snap, mcr_migration_phase phase,
                    const mcr_snapshot *from, const mcr_snapshot *to)
{
    mcr_state_content c = {.pool = "web", .snapshot = snap, .phase = phase,
                           .migration_id = phase ? "m-1" : NULL, .from = from, .to = to};
    mcr_error err = {0};
    uint64_t g = 0;
    ck_assert_msg(mcr_state_write(w, &c, &g, &err) == MCR_OK, "%s", err.message);
    return g;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    ck_assert_int_ge(n, 0);
    rewind(f);
    char *t = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(fread(t, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    t[n] = '\0';
    *len = (size_t)n;
    return t;
}

/* Replace the state file by `len` bytes and raise the generation, as a
 * broken writer would. */
static void put_raw(const scratch *s, const char *text, size_t len)
{
    char tmp[700];
    snprintf(tmp, sizeof(tmp), "%s.raw", s->path);
    FILE *f = fopen(tmp, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(text, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(rename(tmp, s->path), 0);
    mcr__shm m;
    mcr_error err = {0};
    ck_assert_int_eq(mcr__shm_open(s->shm, true, &m, &err), MCR_OK);
    atomic_fetch_add(&m.h->generation, 1);
    mcr__shm_close(&m);
}

static uint64_t epoch_of(mcr_router *r)
{
    return mcr_router_epoch(r);
}

/* The live processes, and the one of `pid` (NULL: none). */
static size_t processes(mcr_state_writer *w, uint32_t pid, mcr_state_process *one)
{
    mcr_state_process *p = NULL;
    size_t n = 0;
    mcr_error err = {0};
    ck_assert_msg(mcr_state_processes(w, &p, &n, &err) == MCR_OK, "%s", err.message);
    bool found = false;
    for (size_t i = 0; i < n; i++)
        if (p[i].pid == pid) {
            if (one != NULL)
                *one = p[i];
            found = true;
        }
    mcr_state_processes_free(p);
    if (one != NULL && !found)
        memset(one, 0, sizeof(*one));
    return n;
}

/* ------------------------------------------------------------ the text */

START_TEST(text_round_trip)
{
    scratch sc;
    scratch_init(&sc);
    mcr_state_writer *w = writer_open(&sc, 8);
    mcr_snapshot *a = snap_n(3, 7), *b = snap_n(4, 8);
    mcr_error err = {0};
    mcr_state_info info;

    ck_assert_uint_eq(put(w, a, MCR_MIGRATION_NONE, NULL, NULL), 1);
    ck_assert_int_eq(mcr_state_read(sc.path, &info, &err), MCR_OK);
    ck_assert_uint_eq(info.generation, 1);
    ck_assert_str_eq(info.pool, "web");
    ck_assert_uint_eq(mcr_snapshot_epoch(info.snapshot), 7);
    ck_assert_str_eq(mcr_snapshot_checksum(info.snapshot), mcr_snapshot_checksum(a));
    ck_assert_int_eq(info.phase, MCR_MIGRATION_NONE);
    ck_assert_ptr_null(info.from);
    ck_assert_uint_gt(info.written_ms, 1700000000000ull);
    mcr_state_info_clear(&info);

    /* Each phase: the migration line always, its snapshots while
     * processes route through it. */
    for (int ph = MCR_MIGRATION_PLANNED; ph <= MCR_MIGRATION_ABORTED; ph++) {
        uint64_t g = put(w, ph >= MCR_MIGRATION_SWITCHED ? b : a, (mcr_migration_phase)ph, a, b);
        ck_assert_int_eq(mcr_state_read(sc.path, &info, &err), MCR_OK);
        ck_assert_uint_eq(info.generation, g);
        ck_assert_int_eq(info.phase, ph);
        ck_assert_str_eq(info.migration_id, "m-1");
        ck_assert_uint_eq(info.from_epoch, 7);
        ck_assert_uint_eq(info.to_epoch, 8);
        bool routes = ph >= MCR_MIGRATION_COPYING && ph <= MCR_MIGRATION_CLOSING;
        ck_assert_int_eq(info.from != NULL, routes);
        ck_assert_int_eq(info.to != NULL, routes);
        if (routes)
            ck_assert_str_eq(mcr_snapshot_checksum(info.to), mcr_snapshot_checksum(b));
        mcr_state_info_clear(&info);
    }
    ck_assert_uint_eq(mcr_state_writer_generation(w), 8);

    /* What the writer refuses: nothing written. */
    mcr_state_content c = {.pool = "web pool", .snapshot = a};
    ck_assert_int_eq(mcr_state_write(w, &c, NULL, &err), MCR_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "pool name"));
    c = (mcr_state_content){.pool = "web", .snapshot = a, .phase = MCR_MIGRATION_COPYING,
                            .migration_id = "m", .from = b, .to = a};
    ck_assert_int_eq(mcr_state_write(w, &c, NULL, &err), MCR_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "not above"));
    c.from = NULL;
    ck_assert_int_eq(mcr_state_write(w, &c, NULL, &err), MCR_ERR_INVALID);
    c = (mcr_state_content){.pool = "web", .snapshot = a};
    c.reserved[0] = 1;
    ck_assert_int_eq(mcr_state_write(w, &c, NULL, &err), MCR_ERR_INVALID);
    ck_assert_uint_eq(mcr_state_writer_generation(w), 8);

    mcr_snapshot_unref(a);
    mcr_snapshot_unref(b);
    mcr_state_writer_free(w);
    scratch_free(&sc);
}
END_TEST

/* Every prefix of a state, and every state with one byte changed, is
 * refused with a message; a good one parses. */
START_TEST(text_damage_refused)
{
    scratch sc;
    scratch_init(&sc);
    mcr_state_writer *w = writer_open(&sc, 8);
    mcr_snapshot *a = snap_n(3, 7), *b = snap_n(4, 8);
    put(w, b, MCR_MIGRATION_SWITCHED, a, b);
    size_t len;
    char *text = slurp(sc.path, &len);
    mcr_state_info info;
    mcr_error err = {0};

    ck_assert_int_eq(mcr_state_parse(text, len, "t", &info, &err), MCR_OK);
    mcr_state_info_clear(&info);
    for (size_t n = 0; n < len; n++) {
        int rc = mcr_state_parse(text, n, "t", &info, &err);
        ck_assert_msg(rc != MCR_OK, "a prefix of %zu of %zu bytes parsed", n, len);
        ck_assert_ptr_null(info.snapshot);
        ck_assert_msg(strncmp(err.message, "t", 1) == 0, "%s", err.message);
    }
    tu_rng rng;
    tu_rng_init(&rng, 35);
    for (size_t i = 0; i < len; i++) {
        char saved = text[i];
        text[i] = (char)(saved ^ (1 + tu_below(&rng, 255)));
        int rc = mcr_state_parse(text, len, "t", &info, &err);
        ck_assert_msg(rc != MCR_OK, "byte %zu changed, and the state parsed", i);
        ck_assert_ptr_null(info.snapshot);
        text[i] = saved;
    }
    /* bytes after the checksum */
    char *more = malloc(len + 2);
    ck_assert_ptr_nonnull(more);
    memcpy(more, text, len);
    memcpy(more + len, "x\n", 2);
    ck_assert_int_eq(mcr_state_parse(more, len + 2, "t", &info, &err), MCR_ERR_SYNTAX);
    ck_assert_ptr_nonnull(strstr(err.message, "does not end with"));
    free(more);
    ck_assert_int_eq(mcr_state_parse(NULL, 1, "t", &info, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_state_parse("", 0, "t", &info, &err), MCR_ERR_SYNTAX);
    ck_assert_ptr_nonnull(strstr(err.message, "truncated"));

    /* a missing file names the agent */
    ck_assert_int_eq(mcr_state_read("/nonexistent/x.state", &info, &err), MCR_ERR_IO);
    ck_assert_ptr_nonnull(strstr(err.message, "mcroute agent"));

    free(text);
    mcr_snapshot_unref(a);
    mcr_snapshot_unref(b);
    mcr_state_writer_free(w);
    scratch_free(&sc);
}
END_TEST

/* ------------------------------------------------------------ following */

START_TEST(router_follows)
{
    scratch sc;
    scratch_init(&sc);
    mcr_error err = {0};
    mcr_router *r = NULL;

    /* no state yet: the error names the file and the agent */
    ck_assert_int_eq(mcr_router_new_from_state(sc.path, 0, &r, &err), MCR_ERR_SYSTEM);
    ck_assert_ptr_nonnull(strstr(err.message, ".shm"));
    ck_assert_ptr_nonnull(strstr(err.message, "agent"));

    mcr_state_writer *w = writer_open(&sc, 8);
    ck_assert_int_eq(mcr_router_new_from_state(sc.path, 0, &r, &err), MCR_ERR_IO);
    mcr_snapshot *s1 = snap_n(3, 1);
    put(w, s1, MCR_MIGRATION_NONE, NULL, NULL);
    ck_assert_msg(mcr_router_new_from_state(sc.path, 0, &r, &err) == MCR_OK, "%s", err.message);
    ck_assert_uint_eq(epoch_of(r), 1);
    mcr_state_status st;
    ck_assert_int_eq(mcr_router_state_status(r, &st), MCR_OK);
    ck_assert_uint_eq(st.generation, 1);
    ck_assert_int_ge(st.slot, 0);
    ck_assert_int_eq(st.last_refusal.code, MCR_OK);
    mcr_state_process p;
    ck_assert_uint_eq(processes(w, (uint32_t)getpid(), &p), 1);
    ck_assert_uint_eq(p.generation, 1);
    ck_assert_uint_eq(p.epoch, 1);
    ck_assert_str_eq(p.checksum, mcr_snapshot_checksum(s1));

    /* each generation adopted at the next call, and recorded */
    for (uint64_t e = 2; e <= 20; e++) {
        mcr_snapshot *s = snap_n(3 + (unsigned)e % 4, e);
        uint64_t g = put(w, s, MCR_MIGRATION_NONE, NULL, NULL);
        uint32_t i = mcr_router_locate_index(r, "key", 3, NULL);
        ck_assert_uint_lt(i, 3 + (unsigned)e % 4);
        ck_assert_uint_eq(epoch_of(r), e);
        processes(w, (uint32_t)getpid(), &p);
        ck_assert_uint_eq(p.generation, g);
        ck_assert_uint_eq(p.epoch, e);
        ck_assert_str_eq(p.checksum, mcr_snapshot_checksum(s));
        mcr_snapshot_unref(s);
    }
    /* one without a new epoch changes nothing, but is adopted */
    mcr_snapshot *cur = mcr_router_current(r);
    uint64_t g = put(w, cur, MCR_MIGRATION_NONE, NULL, NULL);
    ck_assert_int_eq(mcr_router_state_status(r, &st), MCR_OK);
    ck_assert_uint_eq(st.generation, g);
    mcr_snapshot_unref(cur);

    /* freeing the router frees the slot */
    mcr_router_free(r);
    ck_assert_uint_eq(processes(w, (uint32_t)getpid(), NULL), 0);
    /* an observer takes no slot */
    ck_assert_int_eq(mcr_router_new_from_state(sc.path, MCR_HOST_STATE_OBSERVE, &r, &err), MCR_OK);
    ck_assert_int_eq(mcr_router_state_status(r, &st), MCR_OK);
    ck_assert_int_eq(st.slot, -1);
    ck_assert_uint_eq(processes(w, (uint32_t)getpid(), NULL), 0);
    ck_assert_int_eq(mcr_router_new_from_state(sc.path, 8, &r, &err), MCR_ERR_INVALID);
    mcr_router_free(r);
    /* a plain router has no state */
    ck_assert_int_eq(mcr_router_new(s1, &r, &err), MCR_OK);
    ck_assert_int_eq(mcr_router_state_status(r, &st), MCR_ERR_INVALID);
    mcr_router_free(r);

    mcr_snapshot_unref(s1);
    mcr_state_writer_free(w);
    scratch_free(&sc);
}
END_TEST

/* A state that does not verify is refused: the router keeps its snapshot,
 * counts and says why, records it in its slot, and takes the next good one. */
START_TEST(router_refuses_bad_states)
{
    scratch sc;
    scratch_init(&sc);
    mcr_error err = {0};
    mcr_state_writer *w = writer_open(&sc, 8);
    mcr_snapshot *s1 = snap_n(3, 1), *s2 = snap_n(4, 2);
    put(w, s1, MCR_MIGRATION_NONE, NULL, NULL);
    mcr_router *r = NULL;
    ck_assert_msg(mcr_router_new_from_state(sc.path, 0, &r, &err) == MCR_OK, "%s", err.message);
    put(w, s2, MCR_MIGRATION_NONE, NULL, NULL);
    size_t len;
    char *good = slurp(sc.path, &len);
    put(w, s1, MCR_MIGRATION_NONE, NULL, NULL); /* back on the file: epoch 1 */
    ck_assert_uint_eq(epoch_of(r), 1);

    /* truncated, then one byte changed, then garbage */
    const struct {
        size_t len;
        int flip;
        int code;
        const char *says;
    } bad[] = {{len / 2, -1, MCR_ERR_SYNTAX, "truncated"},
               {len, 60, MCR_ERR_CORRUPT, "checksum mismatch"},
               {5, -1, MCR_ERR_SYNTAX, "truncated"}};
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        char *t = malloc(len);
        ck_assert_ptr_nonnull(t);
        memcpy(t, good, len);
        if (bad[k].flip >= 0)
            t[len - bad[k].flip] ^= 1; /* in the last snapshot's text */
        put_raw(&sc, t, bad[k].len);
        free(t);
        ck_assert_uint_eq(epoch_of(r), 1);
        mcr_state_status st;
        ck_assert_int_eq(mcr_router_state_status(r, &st), MCR_OK);
        ck_assert_uint_eq(st.refused, k + 1);
        ck_assert_int_eq(st.last_refusal.code, bad[k].code);
        ck_assert_msg(strstr(st.last_refusal.message, bad[k].says) != NULL, "%s",
                      st.last_refusal.message);
        mcr_state_process p;
        processes(w, (uint32_t)getpid(), &p);
        ck_assert_uint_eq(p.refused, k + 1);
        ck_assert_int_eq(p.last_refusal, bad[k].code);
        ck_assert_uint_eq(p.epoch, 1);
    }
    /* the agent writes again: adopted */
    put(w, s2, MCR_MIGRATION_NONE, NULL, NULL);
    ck_assert_uint_eq(epoch_of(r), 2);
    /* an older epoch is refused as stale, its migration not set either */
    mcr_snapshot *s0 = snap_n(2, 0 + 1), *s3 = snap_n(5, 3);
    put(w, s1, MCR_MIGRATION_COPYING, s1, s3);
    ck_assert_uint_eq(epoch_of(r), 2);
    mcr_state_status st;
    ck_assert_int_eq(mcr_router_state_status(r, &st), MCR_OK);
    ck_assert_int_eq(st.last_refusal.code, MCR_ERR_STALE);
    ck_assert_ptr_nonnull(strstr(st.last_refusal.message, "not adopted"));
    mcr_router_migration t;
    ck_assert_int_eq(mcr_router_get_migration(r, &t), MCR_ERR_EMPTY);
    /* the writer refuses a migration between placements */
    mcr_config *cfg = mcr_config_new();
    ck_assert_int_eq(mcr_config_set_mode(cfg, MCR_MODE_MODULA), MCR_OK);
    ck_assert_int_eq(mcr_config_add_servers(cfg, "10.9.0.1,10.9.0.2", NULL), MCR_OK);
    mcr_snapshot *m4 = NULL;
    ck_assert_int_eq(mcr_snapshot_new(cfg, 4, &m4, NULL), MCR_OK);
    mcr_config_free(cfg);
    mcr_state_content c = {.pool = "web", .snapshot = s2, .phase = MCR_MIGRATION_COPYING,
                           .migration_id = "m", .from = s3, .to = m4};
    mcr_error werr = {0};
    ck_assert_int_eq(mcr_state_write(w, &c, NULL, &werr), MCR_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(werr.message, "placement parameters"));
    mcr_snapshot_unref(m4);
    mcr_snapshot_unref(s0);
    mcr_snapshot_unref(s3);

    free(good);
    mcr_router_free(r);
    mcr_snapshot_unref(s1);
    mcr_snapshot_unref(s2);
    mcr_state_writer_free(w);
    scratch_free(&sc);
}
END_TEST


/* The follower's snapshot places as the writer's, not only by checksum
 * (which covers each server's points, not their merged order): the same
 * continuum point by point, the same table, the same server for each of
 * a few thousand keys. */
static void same_placement(const mcr_snapshot *a, const mcr_snapshot *b, const char *what)
{
    const mcr_ring *ra = mcr_snapshot_ring(a), *rb = mcr_snapshot_ring(b);
    size_t np = mcr_ring_point_count(ra);
    ck_assert_msg(np == mcr_ring_point_count(rb), "%s: %zu points against %zu", what, np,
                  mcr_ring_point_count(rb));
    /* Plain tests in the loops: each ck_assert writes to Check's pipe. */
    for (size_t i = 0; i < np; i++) {
        uint32_t va = 0, sa = 0, vb = 1, sb = 1;
        if (mcr_ring_point(ra, i, &va, &sa) != MCR_OK || mcr_ring_point(rb, i, &vb, &sb) != MCR_OK ||
            va != vb || sa != sb)
            ck_abort_msg("%s: point %zu is %u of server %u, not %u of %u", what, i, va, sa, vb,
                         sb);
    }
    size_t nt = mcr_snapshot_table_size(a);
    ck_assert_uint_eq(nt, mcr_snapshot_table_size(b));
    for (size_t i = 0; i < nt; i++)
        if (mcr_snapshot_table_entry(a, i) != mcr_snapshot_table_entry(b, i))
            ck_abort_msg("%s: table entry %zu differs", what, i);
    for (unsigned k = 0; k < 3000; k++) {
        char key[32];
        int len = snprintf(key, sizeof(key), "key:%u", k);
        if (mcr_snapshot_locate(a, key, (size_t)len) != mcr_snapshot_locate(b, key, (size_t)len))
            ck_abort_msg("%s: %s placed apart", what, key);
    }
}

/* A follower parses each state with the snapshot it holds as a basis (the
 * point caches of the servers that continue, their lines' digests): across
 * random changes in every mode (servers added with ids of their own and
 * without, IPv6 ones, removed, reweighted, drained and back), each
 * generation is adopted, never refused, and places keys as the writer's
 * snapshot does. */
START_TEST(follow_random_changes)
{
    tu_rng rng;
    tu_rng_init(&rng, 36);
    for (int m = 0; m < MCR_MODE_COUNT; m++) {
        scratch sc;
        scratch_init(&sc);
        mcr_error err = {0};
        mcr_state_writer *w = writer_open(&sc, 8);
        mcr_config *cfg = mcr_config_new();
        ck_assert_int_eq(mcr_config_set_mode(cfg, (mcr_mode)m), MCR_OK);
        /* A mode without weights (pymemcache) takes weight 1 only. */
        mcr_snapshot *s = NULL;
        mcr_config *one = mcr_config_new();
        ck_assert_int_eq(mcr_config_set_mode(one, (mcr_mode)m), MCR_OK);
        const char *w3 = m == MCR_MODE_MCROUTER_WCH3 ? "0.3" : "3"; /* wch3: decimals */
        char one_list[64];
        snprintf(one_list, sizeof(one_list), "10.2.0.2:11212:%s", w3);
        ck_assert_int_eq(mcr_config_add_servers(one, one_list, &err), MCR_OK);
        bool weights = mcr_snapshot_new(one, 1, &s, NULL) == MCR_OK;
        mcr_snapshot_unref(s);
        mcr_config_free(one);
        s = NULL;
        char list[96];
        snprintf(list, sizeof(list), "10.2.0.1,10.2.0.2:11212%s%s,10.2.0.3,10.2.0.4",
                 weights ? ":" : "", weights ? w3 : "");
        ck_assert_int_eq(mcr_config_add_servers(cfg, list, &err), MCR_OK);
        ck_assert_msg(mcr_snapshot_new(cfg, 1, &s, &err) == MCR_OK, "%s", err.message);
        mcr_config_free(cfg);
        put(w, s, MCR_MIGRATION_NONE, NULL, NULL);
        mcr_router *r = NULL;
        ck_assert_int_eq(mcr_router_new_from_state(sc.path, 0, &r, &err), MCR_OK);
        unsigned added = 0;
        for (int k = 0; k < tu_cases(24); k++) {
            mcr_changes *ch = mcr_changes_new();
            size_t n = mcr_snapshot_server_count(s);
            mcr_server_desc d;
            uint32_t pick = tu_below(&rng, (uint32_t)n);
            ck_assert_int_eq(mcr_snapshot_server(s, pick, &d), MCR_OK);
            char id[300], host[64];
            snprintf(id, sizeof(id), "%s", d.id);
            unsigned kind = tu_below(&rng, 4);
            if (!weights && kind == 2)
                kind = 3;
            switch (kind) {
            case 0: { /* a server more, every other one with an id of its own */
                char nid[32];
                if (added % 3 == 2)
                    snprintf(host, sizeof(host), "fd00::3:%x", added + 1);
                else
                    snprintf(host, sizeof(host), "10.3.%u.%u", added / 200, added % 200 + 1);
                snprintf(nid, sizeof(nid), "n%u", added);
                mcr_server_desc a = {.id = added % 2 ? nid : NULL, .host = host, .port = 11211,
                                     .weight = weights ? 1 + tu_below(&rng, 3) : 1,
                                     .state = MCR_STATE_ACTIVE};
                added++;
                ck_assert_int_eq(mcr_changes_add(ch, &a, &err), MCR_OK);
                break;
            }
            case 1: /* one fewer, not the last active */
                if (n > 3 && m != MCR_MODE_JUMP)
                    ck_assert_int_eq(mcr_changes_remove(ch, id, &err), MCR_OK);
                else
                    ck_assert_int_eq(mcr_changes_set_weight(ch, id, 2, &err), MCR_OK);
                break;
            case 2:
                ck_assert_int_eq(mcr_changes_set_weight(ch, id, 1 + tu_below(&rng, 4), &err),
                                 MCR_OK);
                break;
            default:
                ck_assert_int_eq(mcr_changes_set_state(ch, id,
                                                       d.state == MCR_STATE_ACTIVE
                                                           ? MCR_STATE_DRAINING
                                                           : MCR_STATE_ACTIVE,
                                                       &err),
                                 MCR_OK);
                break;
            }
            mcr_snapshot *t = NULL;
            int rc = mcr_snapshot_apply(s, ch, &t, &err);
            mcr_changes_free(ch);
            if (rc != MCR_OK) /* e.g. the last active server drained: skip */
                continue;
            mcr_snapshot_unref(s);
            s = t;
            uint64_t g = put(w, s, MCR_MIGRATION_NONE, NULL, NULL);
            mcr_snapshot *cur = mcr_router_current(r);
            mcr_state_status st;
            ck_assert_int_eq(mcr_router_state_status(r, &st), MCR_OK);
            ck_assert_msg(st.generation == g && st.refused == 0, "%s: generation %llu of %llu, %llu refused: %s",
                          mcr_mode_name((mcr_mode)m), (unsigned long long)st.generation,
                          (unsigned long long)g, (unsigned long long)st.refused,
                          st.last_refusal.message);
            ck_assert_str_eq(mcr_snapshot_checksum(cur), mcr_snapshot_checksum(s));
            char what[64];
            snprintf(what, sizeof(what), "%s, change %d", mcr_mode_name((mcr_mode)m), k);
            same_placement(cur, s, what);
            mcr_snapshot_unref(cur);
        }
        mcr_router_free(r);
        mcr_snapshot_unref(s);
        mcr_state_writer_free(w);
        scratch_free(&sc);
    }
}
END_TEST

/* The state's migration is the router's: set in copying (before the
 * switch's snapshot), with the closing flag in closing, ended after. */
START_TEST(router_follows_migrations)
{
    scratch sc;
    scratch_init(&sc);
    mcr_error err = {0};
    mcr_state_writer *w = writer_open(&sc, 8);
    mcr_snapshot *a = snap_n(3, 1), *b = snap_n(4, 2);
    put(w, a, MCR_MIGRATION_NONE, NULL, NULL);
    mcr_router *r = NULL;
    ck_assert_msg(mcr_router_new_from_state(sc.path, 0, &r, &err) == MCR_OK, "%s", err.message);
    mcr_router_migration t;

    put(w, a, MCR_MIGRATION_PLANNED, a, b);
    ck_assert_int_eq(mcr_router_get_migration(r, &t), MCR_ERR_EMPTY);
    put(w, a, MCR_MIGRATION_COPYING, a, b);
    ck_assert_int_eq(mcr_router_get_migration(r, &t), MCR_OK);
    ck_assert_uint_eq(mcr_snapshot_epoch(t.from), 1);
    ck_assert_uint_eq(mcr_snapshot_epoch(t.to), 2);
    ck_assert_uint_eq(t.flags, 0);
    uint64_t serial = t.serial;
    mcr_router_migration_clear(&t);
    ck_assert_int_eq(mcr_migration_phase_at(&(mcr_router_migration){.from = a, .to = b}, 1),
                     MCR_MIGRATION_COPYING);
    put(w, b, MCR_MIGRATION_SWITCHED, a, b);
    ck_assert_uint_eq(epoch_of(r), 2);
    ck_assert_int_eq(mcr_router_get_migration(r, &t), MCR_OK);
    ck_assert_uint_eq(t.serial, serial); /* the same migration, not set again */
    mcr_router_migration_clear(&t);
    put(w, b, MCR_MIGRATION_GRACE, a, b);
    put(w, b, MCR_MIGRATION_CLOSING, a, b);
    ck_assert_int_eq(mcr_router_get_migration(r, &t), MCR_OK);
    ck_assert_uint_eq(t.flags, MCR_MIGRATION_FLAG_CLOSING);
    mcr_router_migration_clear(&t);
    mcr_state_process p;
    processes(w, (uint32_t)getpid(), &p);
    ck_assert_int_eq(p.phase, MCR_MIGRATION_CLOSING);
    ck_assert_str_eq(p.migration_id, "m-1");
    ck_assert_uint_eq(p.to_epoch, 2);
    put(w, b, MCR_MIGRATION_DONE, a, b);
    ck_assert_int_eq(mcr_router_get_migration(r, &t), MCR_ERR_EMPTY);
    processes(w, (uint32_t)getpid(), &p);
    ck_assert_int_eq(p.phase, MCR_MIGRATION_DONE);

    /* a router made in the middle of one starts with it */
    put(w, b, MCR_MIGRATION_SWITCHED, a, b);
    mcr_router *r2 = NULL;
    ck_assert_int_eq(mcr_router_new_from_state(sc.path, 0, &r2, &err), MCR_OK);
    ck_assert_int_eq(mcr_router_get_migration(r2, &t), MCR_OK);
    ck_assert_uint_eq(mcr_snapshot_epoch(t.from), 1);
    mcr_router_migration_clear(&t);
    mcr_router_free(r2);

    mcr_router_free(r);
    mcr_snapshot_unref(a);
    mcr_snapshot_unref(b);
    mcr_state_writer_free(w);
    scratch_free(&sc);
}
END_TEST

/* ------------------------------------------------------------ processes */

/* Wait (bounded) until `pipe` says something: the child's report. */
static int read_report(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    while (n < cap - 1) {
        ssize_t k = read(fd, buf + n, cap - 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        n += (size_t)k;
        if (buf[n - 1] == '\n')
            break;
    }
    buf[n] = '\0';
    return (int)n;
}

/* A child forked after the router was made follows on its own, with a slot
 * of its own; a child that dies without freeing its router loses its slot
 * to the reaper. */
START_TEST(fork_follows)
{
    scratch sc;
    scratch_init(&sc);
    mcr_error err = {0};
    mcr_state_writer *w = writer_open(&sc, 8);
    mcr_snapshot *s1 = snap_n(3, 1), *s2 = snap_n(5, 2);
    put(w, s1, MCR_MIGRATION_NONE, NULL, NULL);
    mcr_router *r = NULL;
    ck_assert_msg(mcr_router_new_from_state(sc.path, 0, &r, &err) == MCR_OK, "%s", err.message);
    ck_assert_uint_eq(epoch_of(r), 1);

    int to_child[2], to_parent[2];
    ck_assert_int_eq(pipe(to_child), 0);
    ck_assert_int_eq(pipe(to_parent), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        char c, msg[128];
        uint64_t e1 = epoch_of(r); /* claims its slot */
        int n = snprintf(msg, sizeof(msg), "%llu\n", (unsigned long long)e1);
        if (write(to_parent[1], msg, (size_t)n) != n)
            _exit(2);
        if (read(to_child[0], &c, 1) != 1) /* the parent wrote epoch 2 */
            _exit(3);
        uint64_t e2 = epoch_of(r);
        n = snprintf(msg, sizeof(msg), "%llu\n", (unsigned long long)e2);
        if (write(to_parent[1], msg, (size_t)n) != n)
            _exit(4);
        if (read(to_child[0], &c, 1) != 1)
            _exit(5);
        _exit(0); /* the router is not freed: the slot stays until reaped */
    }
    char buf[64];
    ck_assert_int_gt(read_report(to_parent[0], buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "1\n");
    mcr_state_process p;
    ck_assert_uint_eq(processes(w, (uint32_t)pid, &p), 2);
    ck_assert_uint_eq(p.pid, (uint32_t)pid);
    ck_assert_uint_eq(p.generation, 1);
    mcr_state_process mine;
    processes(w, (uint32_t)getpid(), &mine);
    ck_assert_uint_ne(mine.slot, p.slot);

    put(w, s2, MCR_MIGRATION_NONE, NULL, NULL);
    ck_assert_int_eq(write(to_child[1], "x", 1), 1);
    ck_assert_int_gt(read_report(to_parent[0], buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "2\n");
    processes(w, (uint32_t)pid, &p);
    ck_assert_uint_eq(p.generation, 2);
    /* the parent has not called since: still on generation 1 */
    processes(w, (uint32_t)getpid(), &mine);
    ck_assert_uint_eq(mine.generation, 1);
    ck_assert_uint_eq(epoch_of(r), 2);
    processes(w, (uint32_t)getpid(), &mine);
    ck_assert_uint_eq(mine.generation, 2);

    ck_assert_int_eq(write(to_child[1], "x", 1), 1);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    /* dead: reaped, its slot free again */
    ck_assert_uint_eq(processes(w, (uint32_t)pid, NULL), 1);

    close(to_child[0]);
    close(to_child[1]);
    close(to_parent[0]);
    close(to_parent[1]);
    mcr_router_free(r);
    mcr_snapshot_unref(s1);
    mcr_snapshot_unref(s2);
    mcr_state_writer_free(w);
    scratch_free(&sc);
}
END_TEST

/* Slots run out: a process routes all the same, without a slot; one of a
 * dead process is taken over even with no writer to reap it. */
START_TEST(slots_run_out)
{
    scratch sc;
    scratch_init(&sc);
    mcr_error err = {0};
    mcr_state_writer *w = writer_open(&sc, 2);
    mcr_snapshot *s1 = snap_n(3, 1);
    put(w, s1, MCR_MIGRATION_NONE, NULL, NULL);
    mcr_router *r[3];
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(mcr_router_new_from_state(sc.path, 0, &r[i], &err), MCR_OK);
    mcr_state_status st;
    ck_assert_int_eq(mcr_router_state_status(r[2], &st), MCR_OK);
    ck_assert_int_eq(st.slot, -1);
    ck_assert_uint_eq(epoch_of(r[2]), 1);
    mcr_router_free(r[2]);

    /* a dead child's slot, taken over by the next claim */
    mcr_router_free(r[1]);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        mcr_router *c = NULL;
        _exit(mcr_router_new_from_state(sc.path, 0, &c, NULL) == MCR_OK ? 0 : 1);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    ck_assert_int_eq(mcr_router_new_from_state(sc.path, 0, &r[1], &err), MCR_OK);
    ck_assert_int_eq(mcr_router_state_status(r[1], &st), MCR_OK);
    ck_assert_int_ge(st.slot, 0);

    mcr_router_free(r[0]);
    mcr_router_free(r[1]);
    mcr_snapshot_unref(s1);
    mcr_state_writer_free(w);
    scratch_free(&sc);
}
END_TEST

/* One writer at a time; a writer that comes back keeps the generation and
 * the slots, and its followers follow it; a shared memory of another
 * layout is replaced and its followers move to the new one. */
START_TEST(writer_lock_and_restart)
{
    scratch sc;
    scratch_init(&sc);
    mcr_error err = {0};
    mcr_state_writer *w = writer_open(&sc, 8), *w2 = NULL;
    ck_assert_int_eq(mcr_state_writer_open(sc.path, NULL, &w2, &err), MCR_ERR_BUSY);
    ck_assert_ptr_nonnull(strstr(err.message, "another"));
    mcr_snapshot *s1 = snap_n(3, 1), *s2 = snap_n(4, 2), *s3 = snap_n(5, 3);
    put(w, s1, MCR_MIGRATION_NONE, NULL, NULL);
    mcr_router *r = NULL;
    ck_assert_msg(mcr_router_new_from_state(sc.path, 0, &r, &err) == MCR_OK, "%s", err.message);
    struct stat a, b;
    ck_assert_int_eq(stat(sc.shm, &a), 0);
    ck_assert_int_eq(a.st_mode & 0777, 0600);
    ck_assert_int_eq(stat(sc.path, &b), 0);
    ck_assert_int_eq(b.st_mode & 0777, 0600);
    mcr_state_writer_free(w);

    w = writer_open(&sc, 8);
    ck_assert_uint_eq(mcr_state_writer_generation(w), 1);
    ck_assert_uint_eq(processes(w, (uint32_t)getpid(), NULL), 1);
    put(w, s2, MCR_MIGRATION_NONE, NULL, NULL);
    ck_assert_uint_eq(epoch_of(r), 2);
    mcr_state_writer_free(w);

    /* another version of the layout: replaced, followers told */
    mcr__shm m;
    ck_assert_int_eq(mcr__shm_open(sc.shm, true, &m, &err), MCR_OK);
    m.h->version = 99;
    mcr__shm_close(&m);
    w = writer_open(&sc, 8);
    ck_assert_uint_ge(mcr_state_writer_generation(w), 2);
    put(w, s3, MCR_MIGRATION_NONE, NULL, NULL);
    ck_assert_uint_eq(epoch_of(r), 3);
    ck_assert_uint_eq(processes(w, (uint32_t)getpid(), NULL), 1);

    mcr_router_free(r);
    mcr_snapshot_unref(s1);
    mcr_snapshot_unref(s2);
    mcr_snapshot_unref(s3);
    mcr_state_writer_free(w);
    scratch_free(&sc);
}
END_TEST


/* ------------------------------------------------------------ counters */

static void counters_of(mcr_state_server_counters *c, const char *id, uint64_t requests)
{
    memset(c, 0, sizeof(*c));
    snprintf(c->id, sizeof(c->id), "%s", id);
    c->requests = requests;
    c->hits = requests / 2;
    c->latency_count = requests;
    c->latency_sum_s = (double)requests * 0.0002;
    static const double bounds[MCR_HOST_STATE_BUCKETS] = {
        50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3,
        25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1, 2.5, 5};
    for (int b = 0; b < MCR_HOST_STATE_BUCKETS; b++) {
        c->bounds_s[b] = bounds[b];
        c->buckets[b] = b >= 2 ? requests : 0;
    }
}

static uint64_t total_requests(mcr_state_writer *w, const char *id, uint64_t *le250us)
{
    mcr_state_server_counters *c = NULL;
    size_t n = 0;
    mcr_error err = {0};
    ck_assert_msg(mcr_state_counters(w, &c, &n, &err) == MCR_OK, "%s", err.message);
    uint64_t r = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(c[i].id, id) == 0) {
            r = c[i].requests;
            if (le250us != NULL)
                *le250us = c[i].buckets[2];
            ck_assert(c[i].bounds_s[2] > 249e-6 && c[i].bounds_s[2] < 251e-6);
        }
    mcr_state_counters_free(c);
    return r;
}

/* Processes publish their counters; the writer adds them up, by server
 * id; a process that leaves (frees its router, or dies) keeps its counts
 * in the totals; one writer per process. */
START_TEST(counters_add_up)
{
    scratch sc;
    scratch_init(&sc);
    mcr_error err = {0};
    mcr_state_writer *w = writer_open(&sc, 8);
    mcr_snapshot *s1 = snap_n(3, 1);
    put(w, s1, MCR_MIGRATION_NONE, NULL, NULL);
    mcr_router *r = NULL;
    ck_assert_int_eq(mcr_router_new_from_state(sc.path, 0, &r, &err), MCR_OK);
    mcr_state_server_counters c[2];
    int me, other;
    counters_of(&c[0], "10.0.0.1:11211", 100);
    counters_of(&c[1], "10.0.0.2:11211", 7);
    ck_assert_int_eq(mcr_router_state_publish(r, &me, c, 2), MCR_OK);
    ck_assert_int_eq(mcr_router_state_publish(r, &other, c, 2), MCR_ERR_BUSY);
    uint64_t le = 0;
    ck_assert_uint_eq(total_requests(w, "10.0.0.1:11211", &le), 100);
    ck_assert_uint_eq(le, 100);
    /* a later publish replaces: totals, not increments */
    counters_of(&c[0], "10.0.0.1:11211", 150);
    ck_assert_int_eq(mcr_router_state_publish(r, &me, c, 1), MCR_OK);
    ck_assert_uint_eq(total_requests(w, "10.0.0.1:11211", NULL), 150);
    /* other bounds are refused */
    c[0].bounds_s[3] = 0.001;
    ck_assert_int_eq(mcr_router_state_publish(r, &me, c, 1), MCR_ERR_INVALID);
    counters_of(&c[0], "10.0.0.1:11211", 150);

    /* a child publishes and dies without freeing: its counts stay */
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        mcr_state_server_counters cc;
        counters_of(&cc, "10.0.0.1:11211", 1000);
        (void)mcr_router_epoch(r); /* claims its slot */
        _exit(mcr_router_state_publish(r, &me, &cc, 1) == MCR_OK ? 0 : 1);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    ck_assert_uint_eq(total_requests(w, "10.0.0.1:11211", NULL), 1150);
    ck_assert_uint_eq(processes(w, (uint32_t)pid, NULL), 1); /* reaped: folded */
    ck_assert_uint_eq(total_requests(w, "10.0.0.1:11211", NULL), 1150);
    /* unpublish keeps them; another writer may take over */
    ck_assert_int_eq(mcr_router_state_unpublish(r, &other), MCR_ERR_BUSY);
    ck_assert_int_eq(mcr_router_state_unpublish(r, &me), MCR_OK);
    ck_assert_uint_eq(total_requests(w, "10.0.0.1:11211", NULL), 1150);
    counters_of(&c[0], "10.0.0.1:11211", 5);
    ck_assert_int_eq(mcr_router_state_publish(r, &other, c, 1), MCR_OK);
    ck_assert_uint_eq(total_requests(w, "10.0.0.1:11211", NULL), 1155);
    /* freeing the router keeps them too */
    mcr_router_free(r);
    ck_assert_uint_eq(total_requests(w, "10.0.0.1:11211", NULL), 1155);
    ck_assert_uint_eq(total_requests(w, "10.0.0.2:11211", NULL), 7);
    /* a plain router publishes nothing */
    ck_assert_int_eq(mcr_router_new(s1, &r, &err), MCR_OK);
    ck_assert_int_eq(mcr_router_state_publish(r, &me, c, 1), MCR_ERR_INVALID);
    mcr_router_free(r);
    mcr_snapshot_unref(s1);
    mcr_state_writer_free(w);
    scratch_free(&sc);
}
END_TEST

/* ------------------------------------------------------------ threads */

typedef struct reader_arg {
    mcr_router *r;
    atomic_int *stop;
    uint64_t last;
    int backwards;
} reader_arg;

/* The servers in the totals, and their requests summed (ids the writer
 * never wrote are named by their hash: these are summed). */
static size_t total_servers(mcr_state_writer *w, uint64_t *requests)
{
    mcr_state_server_counters *c = NULL;
    size_t n = 0;
    mcr_error err = {0};
    ck_assert_msg(mcr_state_counters(w, &c, &n, &err) == MCR_OK, "%s", err.message);
    *requests = 0;
    for (size_t i = 0; i < n; i++)
        *requests += c[i].requests;
    mcr_state_counters_free(c);
    return n;
}

static mcr_state_writer *writer_sized(const scratch *s, unsigned slots, unsigned servers)
{
    mcr_state_writer_options o = {.slots = slots, .mode = 0600, .counter_servers = servers};
    mcr_state_writer *w = NULL;
    mcr_error err = {0};
    ck_assert_msg(mcr_state_writer_open(s->path, &o, &w, &err) == MCR_OK, "%s", err.message);
    return w;
}

/* A process publishes the servers its state has room for and the others'
 * updates are counted as dropped; another room asked replaces PATH.shm
 * (its followers move to the new one), none asked keeps it; the default
 * room holds a pool of 200 servers. */
START_TEST(counters_room)
{
    scratch sc;
    scratch_init(&sc);
    mcr_error err = {0};
    mcr_state_writer *w = writer_sized(&sc, 8, 4);
    mcr_snapshot *s1 = snap_n(3, 1), *s2 = snap_n(4, 2), *s3 = snap_n(5, 3);
    put(w, s1, MCR_MIGRATION_NONE, NULL, NULL);
    mcr_router *r = NULL;
    ck_assert_int_eq(mcr_router_new_from_state(sc.path, 0, &r, &err), MCR_OK);
    enum { MANY = 300 };
    mcr_state_server_counters *c = calloc(MANY, sizeof(*c));
    ck_assert_ptr_nonnull(c);
    for (int i = 0; i < MANY; i++) {
        char id[32];
        snprintf(id, sizeof(id), "10.9.%d.%d:11211", i / 250, i % 250 + 1);
        counters_of(&c[i], id, 10 + (uint64_t)i);
    }
    int me;
    uint64_t sum = 0;
    ck_assert_int_eq(mcr_router_state_publish(r, &me, c, 6), MCR_OK);
    ck_assert_uint_eq(total_servers(w, &sum), 4);
    ck_assert_uint_eq(sum, 10 + 11 + 12 + 13); /* the first four */
    ck_assert_uint_eq(mcr_state_counters_dropped(w), 2);
    ck_assert_int_eq(mcr_router_state_publish(r, &me, c, 6), MCR_OK);
    ck_assert_uint_eq(mcr_state_counters_dropped(w), 4);
    mcr_state_writer_free(w);

    /* none asked: kept, the room and the counts with it */
    mcr_state_writer_options none = {.mode = 0600};
    ck_assert_int_eq(mcr_state_writer_open(sc.path, &none, &w, &err), MCR_OK);
    ck_assert_uint_eq(mcr_state_counters_dropped(w), 4);
    ck_assert_uint_eq(total_servers(w, &sum), 4);
    put(w, s2, MCR_MIGRATION_NONE, NULL, NULL);
    ck_assert_uint_eq(epoch_of(r), 2);
    mcr_state_writer_free(w);

    /* another room asked: a new PATH.shm, which the router moves to */
    w = writer_sized(&sc, 8, MANY);
    ck_assert_uint_eq(mcr_state_counters_dropped(w), 0);
    put(w, s3, MCR_MIGRATION_NONE, NULL, NULL);
    ck_assert_uint_eq(epoch_of(r), 3);
    ck_assert_uint_eq(processes(w, (uint32_t)getpid(), NULL), 1);
    ck_assert_int_eq(mcr_router_state_publish(r, &me, c, MANY), MCR_OK);
    ck_assert_uint_eq(total_servers(w, &sum), MANY);
    ck_assert_uint_eq(sum, 10 * MANY + MANY * (MANY - 1) / 2);
    ck_assert_uint_eq(mcr_state_counters_dropped(w), 0);
    mcr_router_free(r);
    mcr_state_writer_free(w);

    /* the default room: 256 servers (more than the 64 of before) */
    unlink(sc.shm);
    w = writer_open(&sc, 8);
    put(w, s3, MCR_MIGRATION_NONE, NULL, NULL);
    ck_assert_int_eq(mcr_router_new_from_state(sc.path, 0, &r, &err), MCR_OK);
    ck_assert_int_eq(mcr_router_state_publish(r, &me, c, 200), MCR_OK);
    ck_assert_uint_eq(total_servers(w, &sum), 200);
    ck_assert_uint_eq(mcr_state_counters_dropped(w), 0);
    mcr_router_free(r);
    mcr_state_writer_free(w);

    /* out of range */
    mcr_state_writer_options big = {.counter_servers = MCR_HOST_STATE_COUNTER_SERVERS_MAX + 1};
    ck_assert_int_eq(mcr_state_writer_open(sc.path, &big, &w, &err), MCR_ERR_INVALID);
    big.counter_servers = MCR_HOST_STATE_COUNTER_SERVERS_MAX;
    big.slots = MCR_HOST_STATE_SLOTS_MAX;
    ck_assert_int_eq(mcr_state_writer_open(sc.path, &big, &w, &err), MCR_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "GiB"));
    free(c);
    mcr_snapshot_unref(s1);
    mcr_snapshot_unref(s2);
    mcr_snapshot_unref(s3);
    scratch_free(&sc);
}
END_TEST

static void *reader(void *p)
{
    reader_arg *a = p;
    char key[16];
    unsigned i = 0;
    while (!atomic_load(a->stop)) {
        int n = snprintf(key, sizeof(key), "k%u", i++);
        uint64_t e = 0;
        uint32_t s = mcr_router_locate_index(a->r, key, (size_t)n, &e);
        if (s == MCR_NO_SERVER || e < a->last)
            a->backwards++;
        a->last = e;
        const mcr_snapshot *snap = mcr_router_acquire(a->r);
        if (snap == NULL || mcr_snapshot_epoch(snap) < a->last)
            a->backwards++;
        mcr_router_release(a->r, snap);
    }
    return NULL;
}

/* Readers on four threads while the writer writes 200 generations: every
 * reader's epochs only grow, and all end on the last. */
START_TEST(threads_follow)
{
    scratch sc;
    scratch_init(&sc);
    mcr_error err = {0};
    mcr_state_writer *w = writer_open(&sc, 8);
    mcr_snapshot *s = snap_n(3, 1);
    put(w, s, MCR_MIGRATION_NONE, NULL, NULL);
    mcr_snapshot_unref(s);
    mcr_router *r = NULL;
    ck_assert_msg(mcr_router_new_from_state(sc.path, 0, &r, &err) == MCR_OK, "%s", err.message);
    atomic_int stop = 0;
    reader_arg args[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (reader_arg){r, &stop, 0, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, reader, &args[i]), 0);
    }
    for (uint64_t e = 2; e <= 200; e++) {
        s = snap_n(2 + (unsigned)e % 5, e);
        put(w, s, MCR_MIGRATION_NONE, NULL, NULL);
        mcr_snapshot_unref(s);
    }
    /* a call while another thread loads goes on with what the router has:
     * wait (bounded) for the last one */
    int64_t deadline = mcr_test_now_ms() + mcr_test_ms(10000);
    while (epoch_of(r) != 200 && mcr_test_now_ms() < deadline)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    ck_assert_uint_eq(epoch_of(r), 200);
    atomic_store(&stop, 1);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        ck_assert_int_eq(args[i].backwards, 0);
    }
    mcr_router_free(r);
    mcr_state_writer_free(w);
    scratch_free(&sc);
}
END_TEST

static Suite *state_suite(void)
{
    Suite *s = suite_create("state");
    const tu_case cases[] = {
        {"text_round_trip", text_round_trip},
        {"text_damage_refused", text_damage_refused},
        {"router_follows", router_follows},
        {"router_refuses_bad_states", router_refuses_bad_states},
        {"follow_random_changes", follow_random_changes},
        {"router_follows_migrations", router_follows_migrations},
        {"fork_follows", fork_follows},
        {"slots_run_out", slots_run_out},
        {"writer_lock_and_restart", writer_lock_and_restart},
        {"counters_add_up", counters_add_up},
        {"counters_room", counters_room},
        {"threads", threads_follow},
    };
    tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]), 120, NULL);
    return s;
}

int main(void)
{
    return tu_run(state_suite());
}
