/* SPDX-License-Identifier: BSD-3-Clause */
/* test_compat_twemproxy.c: nutcracker configurations placed against a real nutcracker and memcached: random pools, the fixed vectors and the empty key. */
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
 * Parsing, errors, refusals (with `nutcracker -t`) and the placement of the
 * fixed vectors without a server are test_compat_twem_parse.c's.
 *
 * Environment: MCR_TEST_SEED changes the pools and keys; MCR_TEST_KEEP=1
 * keeps the temporary directory (configuration and logs);
 * MCR_TWEM_PRINT_VECTORS=1 prints the vector table as observed through
 * nutcracker, in C, to refresh the literals of test_compat_twem_util.c.
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
#include "realserver.h"
#include "test_compat_twem_util.h"
#include "testutil.h"

/* ================================================================== helpers */

#define ERRBUF 512

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

/* ================================================================== suite */

static Suite *suite(void)
{
    Suite *s = suite_create("compat_twemproxy");
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
