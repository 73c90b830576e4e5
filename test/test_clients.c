/* SPDX-License-Identifier: BSD-3-Clause */
/* test_clients.c: every --client against the real client (test/ref's programs): random server lists and keys, zero disagreements. */
#define _GNU_SOURCE /* syscall (pidfd_open) */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mcroute.h"
#include "mcroute_snapshot.h"
#include "testutil.h"

/*
 * `test_clients CLIENT` asks the real client, through its reference program
 * in test/ref (see test/ref/README.md for the protocol), where each key of
 * many random configurations goes, and compares every answer with mcroute's
 * ring and snapshot for mcr_config_set_client(CLIENT).
 *
 * Host names resolve through a hosts file of the test's own, and through
 * nothing else: no mount namespace and no /etc/hosts (a chroot, where
 * packages are built, may allow neither). The resolver shim of
 * test/ref/hosts_shim.c answers getaddrinfo, getnameinfo and gethostby*()
 * from the file named by MCR_TEST_HOSTS only; it is linked into this program
 * (mcroute's own lookups: spymemcached's labels) and LD_PRELOADed into each
 * reference program, which runs under test/ref/netns.sh: a private network
 * namespace (as root) where only `lo` exists, so the live memcached servers
 * listen on the configs' own loopback addresses and ports and nothing leaves
 * the machine. A client that resolved a name some other way would find no
 * address for it (the names are under .test, the namespace reaches no DNS
 * server) and fail its test.
 *
 *   mc-K.test    127.0.1.(K+1)  names, K < NAMES
 *   127.0.2.L    IP literals, L = 1..LITERALS; even L has a reverse entry,
 *                lit-L.test (spymemcached's LIBMEMCACHED format looks it up)
 */
#define NAMES 200
#define LITERALS 200
#define MAX_SERVERS 50
#define MAX_KEYS 400
#define KEY_MAX 250
/* How long a reference program may take (seconds, times the time scale):
 * each takes 1-10 s here; one that hangs fails its test by name long before
 * ctest's timeout would. */
#define REF_DEADLINE_S 300

typedef struct client_ref {
    const char *client;
    const char *argv[4]; /* program and arguments before CLIENT; "@" = test/ref/ */
    int weights;         /* the client takes weights */
    int live;            /* the program runs real servers: fewer configs */
} client_ref;

static const client_ref refs[] = {
    {"pymemcache", {"/usr/bin/python3", "@ref_python.py"}, 0, 0},
    {"python-memcached", {"/usr/bin/python3", "@ref_python.py"}, 1, 1},
    {"pylibmc", {"/usr/bin/python3", "@ref_python.py"}, 1, 1},
    {"pylibmc-ketama", {"/usr/bin/python3", "@ref_python.py"}, 1, 1},
    {"spymemcached", {"/bin/sh", "@ref_spy.sh"}, 1, 0},
    {"spymemcached-libmemcached", {"/bin/sh", "@ref_spy.sh"}, 1, 0},
    {"spymemcached-arraymod", {"/bin/sh", "@ref_spy.sh"}, 0, 0},
    {"dalli", {"/usr/bin/ruby", "@ref_dalli.rb"}, 1, 1},
    {"gomemcache", {"/bin/sh", "@ref_gomemcache.sh"}, 0, 0},
    {"node-memcached", {"/usr/bin/node", "@ref_node.js"}, 1, 0},
    {"memjs", {"/usr/bin/node", "@ref_node.js"}, 0, 0},
    {"nginx", {"/usr/bin/python3", "@ref_nginx.py"}, 1, 0},
    {"nginx-consistent", {"/usr/bin/python3", "@ref_nginx.py"}, 1, 0},
    {"php-memcached", {"/usr/bin/php", "@ref_php.php"}, 1, 0},
    {"php-memcached-ketama", {"/usr/bin/php", "@ref_php.php"}, 1, 0},
    {"php-memcache", {"/usr/bin/php", "@ref_php.php"}, 1, 0},
};
#define NREFS (sizeof(refs) / sizeof(refs[0]))

static const client_ref *ref;   /* the client under test */
static char hosts_path[1100];   /* the hosts file (MCR_TEST_HOSTS) */

/* ------------------------------------------------------------ configs */

typedef struct server {
    char host[32];
    int port;
    uint32_t weight;
} server;

typedef struct config {
    server s[MAX_SERVERS];
    size_t n;
    char *key[MAX_KEYS];
    size_t klen[MAX_KEYS];
    size_t nkeys;
    int want_error; /* a weight given to a client without weights */
} config;

/* Append code point cp as UTF-8; returns the bytes written. */
static size_t put_utf8(unsigned char *p, uint32_t cp)
{
    if (cp < 0x80) {
        p[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        p[0] = (unsigned char)(0xc0 | cp >> 6);
        p[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        p[0] = (unsigned char)(0xe0 | cp >> 12);
        p[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        p[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    p[0] = (unsigned char)(0xf0 | cp >> 18);
    p[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
    p[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    p[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

/* A legal memcached key: 1..250 bytes, no space or control byte, printable
 * ASCII mostly, and in about a third of the keys characters of every UTF-8
 * length. */
static size_t random_key(tu_rng *r, unsigned char *buf)
{
    uint32_t pick = tu_below(r, 100);
    size_t want = pick < 70 ? 1 + tu_below(r, 40) : pick < 95 ? 41 + tu_below(r, 160) : KEY_MAX;
    int wide = tu_below(r, 3) == 0;
    size_t n = 0;

    while (n < want) {
        uint32_t cp, kind = wide ? tu_below(r, 8) : 0;
        if (kind < 5)
            cp = 0x21 + tu_below(r, 0x7f - 0x21);
        else if (kind == 5)
            cp = 0xa0 + tu_below(r, 0x800 - 0xa0);
        else if (kind == 6) {
            cp = 0x800 + tu_below(r, 0x10000 - 0x800);
            if (cp >= 0xd800 && cp <= 0xdfff)
                cp -= 0x1000;
            if (cp >= 0xfdd0 && cp <= 0xfdef) /* noncharacters: keep them out */
                cp = 0x4e00;
        } else
            cp = 0x10000 + tu_below(r, 0x100000);
        unsigned char tmp[4];
        size_t k = put_utf8(tmp, cp);
        if (n + k > want)
            break;
        memcpy(buf + n, tmp, k);
        n += k;
    }
    if (n == 0)
        buf[n++] = 'k';
    return n;
}

static void random_config(tu_rng *r, config *c, size_t index)
{
    int used_name[NAMES] = {0}, used_lit[LITERALS + 1] = {0};

    memset(c, 0, sizeof(*c));
    /* the first configurations: one server, two, the most */
    c->n = index == 0 ? 1 : index == 1 ? 2 : index == 2 ? MAX_SERVERS : 1 + tu_below(r, MAX_SERVERS);
    int weighted = ref->weights && tu_below(r, 2) == 0;
    for (size_t i = 0; i < c->n; i++) {
        server *s = &c->s[i];
        if (tu_below(r, 2) == 0) {
            uint32_t k;
            do
                k = tu_below(r, NAMES);
            while (used_name[k]);
            used_name[k] = 1;
            snprintf(s->host, sizeof(s->host), "mc-%u.test", (unsigned)k);
        } else {
            uint32_t l;
            do
                l = 1 + tu_below(r, LITERALS);
            while (used_lit[l]);
            used_lit[l] = 1;
            snprintf(s->host, sizeof(s->host), "127.0.2.%u", (unsigned)l);
        }
        s->port = tu_below(r, 2) == 0 ? 11211 : 20000 + (int)tu_below(r, 20000);
        s->weight = weighted ? 1 + tu_below(r, 4) : 1;
    }
    /* a client without weights is given one now and then: both refuse it */
    if (!ref->weights && index % 25 == 7 && c->n > 1) {
        c->s[c->n - 1].weight = 2;
        c->want_error = 1;
    }
    c->nkeys = c->want_error ? 1 : 1 + tu_below(r, MAX_KEYS);
    for (size_t k = 0; k < c->nkeys; k++) {
        unsigned char buf[KEY_MAX];
        c->klen[k] = random_key(r, buf);
        c->key[k] = malloc(c->klen[k]);
        ck_assert_ptr_nonnull(c->key[k]);
        memcpy(c->key[k], buf, c->klen[k]);
    }
}

static void config_release(config *c)
{
    for (size_t k = 0; k < c->nkeys; k++)
        free(c->key[k]);
}

static void write_config(FILE *f, const config *c, size_t id)
{
    fprintf(f, "config %zu %zu\n", id, c->n);
    for (size_t i = 0; i < c->n; i++)
        fprintf(f, "server %s %d %u\n", c->s[i].host, c->s[i].port, (unsigned)c->s[i].weight);
    fprintf(f, "keys %zu\n", c->nkeys);
    for (size_t k = 0; k < c->nkeys; k++) {
        for (size_t b = 0; b < c->klen[k]; b++)
            fprintf(f, "%02x", (unsigned char)c->key[k][b]);
        fputc('\n', f);
    }
}

/* ------------------------------------------------------------ mcroute */

/* mcroute's answers for c: 0 and out[k] for each key, or -1 (a refusal). */
static int mcroute_answers(const config *c, uint32_t *out, char *why, size_t cap)
{
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    ck_assert_ptr_nonnull(cfg);
    ck_assert_int_eq(mcr_config_set_client(cfg, ref->client, &err), MCR_OK);
    ck_assert_str_eq(mcr_config_client(cfg), ref->client);
    for (size_t i = 0; i < c->n; i++) {
        char item[64];
        snprintf(item, sizeof(item), "%s:%d:%u", c->s[i].host, c->s[i].port,
                 (unsigned)c->s[i].weight);
        ck_assert_msg(mcr_config_add_servers(cfg, item, &err) == MCR_OK, "%s: %s", item,
                      err.message);
    }
    mcr_ring *ring = NULL;
    mcr_snapshot *snap = NULL;
    int rc = mcr_ring_new(cfg, &ring, &err);
    if (rc != MCR_OK) {
        snprintf(why, cap, "%s", err.message);
        ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &snap, &err), rc);
        mcr_config_free(cfg);
        return -1;
    }
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &snap, &err), MCR_OK);
    const void *keys[MAX_KEYS];
    uint32_t many[MAX_KEYS];
    for (size_t k = 0; k < c->nkeys; k++) {
        out[k] = mcr_ring_locate(ring, c->key[k], c->klen[k]);
        keys[k] = c->key[k];
        /* the snapshot places every key where the ring does */
        ck_assert_uint_eq(mcr_snapshot_locate(snap, c->key[k], c->klen[k]), out[k]);
    }
    mcr_ring_locate_many(ring, keys, c->klen, c->nkeys, many);
    for (size_t k = 0; k < c->nkeys; k++)
        ck_assert_uint_eq(many[k], out[k]);
    mcr_snapshot_unref(snap);
    mcr_ring_free(ring);
    mcr_config_free(cfg);
    return 0;
}

/* ------------------------------------------------------------ the reference */

/* Run the reference program with `input` on its stdin; its stdout into a
 * malloc'ed string. Its stderr passes through. Fails the test when it
 * cannot run or exits non-zero. */
static char *run_reference(const char *input)
{
    const char *src = tu_src_dir();
    char prog[4][1024], netns[1024];
    const char *argv[10];
    size_t a = 0, first;

    /* netns.sh HOSTS PROGRAM ARGS... CLIENT */
    snprintf(netns, sizeof(netns), "%s/test/ref/netns.sh", src);
    argv[a++] = "/bin/sh";
    argv[a++] = netns;
    argv[a++] = hosts_path;
    first = a;
    for (int i = 0; i < 4 && ref->argv[i] != NULL; i++) {
        if (ref->argv[i][0] == '@') {
            snprintf(prog[i], sizeof(prog[i]), "%s/test/ref/%s", src, ref->argv[i] + 1);
            argv[a++] = prog[i];
        } else {
            argv[a++] = ref->argv[i];
        }
    }
    argv[a++] = ref->client;
    argv[a] = NULL;
    ck_assert_msg(access(argv[first], X_OK) == 0,
                  "%s: %s is missing (scripts/deps.sh installs the reference clients)",
                  ref->client, argv[first]);
    char outpath[1200];
    snprintf(outpath, sizeof(outpath), "%s.out", input);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* its own process group: on the deadline, its helpers (workers, a
         * JVM, servers) are killed with it */
        if (setpgid(0, 0) != 0 || freopen(input, "r", stdin) == NULL ||
            freopen(outpath, "w", stdout) == NULL)
            _exit(126);
        execv(argv[0], (char *const *)argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    (void)setpgid(pid, pid); /* whichever of the two runs first */
    /* Wait for its exit or the deadline, whichever comes first: poll on a
     * pidfd (Linux 5.3), readable when the process exits. Where the kernel
     * or a sandbox refuses pidfds, the wait is ctest's timeout alone (said
     * on stderr). */
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    int deadline = mcr_test_ms(REF_DEADLINE_S * 1000);
    int64_t end = mcr_test_now_ms() + deadline;
    struct pollfd p = {.fd = pfd, .events = POLLIN};
    int pr = 1;
    if (pfd < 0)
        fprintf(stderr, "%s: pidfd_open: %s; waiting without a deadline of our own\n",
                ref->client, strerror(errno));
    while (pfd >= 0) {
        int64_t left = end - mcr_test_now_ms();
        pr = poll(&p, 1, left > 0 ? (int)(left < INT32_MAX ? left : INT32_MAX) : 0);
        if (pr >= 0 || errno != EINTR)
            break;
    }
    if (pfd >= 0)
        close(pfd);
    int st;
    if (pr == 0) {
        kill(-pid, SIGKILL);
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        ck_abort_msg("%s: the reference program (%s %s) did not finish in %d ms: killed "
                     "(its process group)", ref->client, argv[first],
                     argv[first + 1] ? argv[first + 1] : "", deadline);
    }
    ck_assert_msg(pr == 1, "poll on the reference's pidfd: %s", strerror(errno));
    while (waitpid(pid, &st, 0) < 0)
        ck_assert_int_eq(errno, EINTR);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "%s: the reference program (%s %s) failed: status 0x%x", ref->client,
                  argv[first], argv[first + 1] ? argv[first + 1] : "", (unsigned)st);
    size_t len;
    char *out = tu_read_file(outpath, &len);
    ck_assert_ptr_nonnull(out);
    return out;
}

START_TEST(matches_the_client)
{
    tu_rng r;
    tu_rng_init(&r, 0x636c69656e74ULL ^ (uint64_t)(ref - refs) * 0x9e3779b97f4a7c15ULL);
    const char *env = getenv("MCR_TEST_CLIENT_CONFIGS");
    /* live programs pay for servers and round trips: fewer, still
     * thousands of keys */
    size_t nconf = env != NULL ? (size_t)strtoul(env, NULL, 10) : ref->live ? 40 : 150;
    nconf = (size_t)tu_cases((int)nconf);
    if (nconf < 3)
        nconf = 3;
    config *c = calloc(nconf, sizeof(*c));
    ck_assert_ptr_nonnull(c);
    char *dir = tu_tmpdir("clients");
    char input[1100];
    snprintf(input, sizeof(input), "%s/input", dir);
    FILE *f = fopen(input, "w");
    ck_assert_ptr_nonnull(f);
    size_t total = 0;
    for (size_t i = 0; i < nconf; i++) {
        random_config(&r, &c[i], i);
        write_config(f, &c[i], i);
        total += c[i].nkeys;
    }
    ck_assert_int_eq(fclose(f), 0);
    char *out = run_reference(input);

    size_t bad = 0, shown = 0, errors = 0;
    char *line = out, *next;
    for (size_t i = 0; i < nconf; i++, line = next) {
        ck_assert_msg(line != NULL && *line != '\0', "%s: no answer for config %zu of %zu",
                      ref->client, i, nconf);
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        char head[64];
        int hl = snprintf(head, sizeof(head), "config %zu ", i);
        ck_assert_msg(strncmp(line, head, (size_t)hl) == 0, "%s: expected '%s...', got '%.80s'",
                      ref->client, head, line);
        const char *ans = line + hl;
        uint32_t mine[MAX_KEYS];
        char why[256];
        int rc = mcroute_answers(&c[i], mine, why, sizeof(why));
        if (strncmp(ans, "error", 5) == 0) {
            errors++;
            ck_assert_msg(rc != 0, "%s: config %zu: the client refused it (%s), mcroute did not",
                          ref->client, i, ans);
            continue;
        }
        ck_assert_msg(strncmp(ans, "ok", 2) == 0, "%s: config %zu: '%.80s'", ref->client, i, ans);
        ck_assert_msg(rc == 0, "%s: config %zu: mcroute refused it (%s), the client did not",
                      ref->client, i, why);
        ck_assert_msg(!c[i].want_error, "%s: config %zu has a weight, yet the client took it",
                      ref->client, i);
        const char *p = ans + 2;
        for (size_t k = 0; k < c[i].nkeys; k++) {
            char *end;
            unsigned long v = strtoul(p, &end, 10);
            ck_assert_msg(end != p && v < c[i].n, "%s: config %zu key %zu: bad index in '%.60s'",
                          ref->client, i, k, p);
            p = end;
            if (v != mine[k]) {
                bad++;
                if (shown++ < 10) {
                    fprintf(stderr, "%s: config %zu (%zu servers) key %zu '", ref->client, i,
                            c[i].n, k);
                    fwrite(c[i].key[k], 1, c[i].klen[k], stderr);
                    fprintf(stderr, "': client %s:%d, mcroute %s:%d\n", c[i].s[v].host,
                            c[i].s[v].port, c[i].s[mine[k]].host, c[i].s[mine[k]].port);
                }
            }
        }
        ck_assert_msg(*p == '\0', "%s: config %zu: extra answers '%.40s'", ref->client, i, p);
    }
    printf("%s: %zu configs, %zu keys, %zu refused by both, %zu disagreements\n", ref->client,
           nconf, total, errors, bad);
    ck_assert_msg(bad == 0, "%s: %zu of %zu keys placed elsewhere than the client does",
                  ref->client, bad, total);
    for (size_t i = 0; i < nconf; i++)
        config_release(&c[i]);
    free(c);
    free(out);
    tu_tmpdir_free(dir);
}
END_TEST

/* ------------------------------------------------------------ the names */

static int write_hosts(const char *path)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fprintf(f, "127.0.0.1 localhost\n::1 localhost\n");
    for (int k = 0; k < NAMES; k++)
        fprintf(f, "127.0.1.%d mc-%d.test\n", k + 1, k);
    for (int l = 2; l <= LITERALS; l += 2)
        fprintf(f, "127.0.2.%d lit-%d.test\n", l, l);
    return fclose(f);
}

/* getaddrinfo(name) as mcroute asks it (lib/placement/javaname.c): the IPv4 address
 * as text and the canonical name; 0, or the EAI_ code. */
static int lookup(const char *name, char *addr, size_t cap, char *canon, size_t ccap)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_flags = AI_CANONNAME;
    int g = getaddrinfo(name, NULL, &hints, &res);
    if (g != 0)
        return g;
    snprintf(canon, ccap, "%s", res->ai_canonname != NULL ? res->ai_canonname : "");
    if (res->ai_family != AF_INET ||
        inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)res->ai_addr)->sin_addr, addr,
                  (socklen_t)cap) == NULL)
        snprintf(addr, cap, "(family %d)", res->ai_family);
    freeaddrinfo(res);
    return 0;
}

/* getnameinfo(127.0.2.L, NI_NAMEREQD): 0 and the name, or the EAI_ code. */
static int reverse(int l, char *name, size_t cap)
{
    struct sockaddr_in in;
    memset(&in, 0, sizeof(in));
    in.sin_family = AF_INET;
    in.sin_addr.s_addr = htonl(0x7f000200u | (uint32_t)l);
    return getnameinfo((struct sockaddr *)&in, sizeof(in), name, (socklen_t)cap, NULL, 0,
                       NI_NAMEREQD);
}

/* The shim linked into this program answers mcroute's lookups from the
 * test's file (test/ref/hosts_shim.c), and only from it: 0, or -1 said on
 * stderr. */
static int check_resolver(void)
{
    char addr[64], canon[256], want[64], name[256];
    for (int k = 0; k < NAMES; k += 67) {
        char host[32];
        snprintf(host, sizeof(host), "mc-%d.test", k);
        snprintf(want, sizeof(want), "127.0.1.%d", k + 1);
        int g = lookup(host, addr, sizeof(addr), canon, sizeof(canon));
        if (g != 0 || strcmp(addr, want) != 0 || strcmp(canon, host) != 0) {
            fprintf(stderr, "test_clients: %s resolved to %s (%s, canonical name '%s'), not %s\n",
                    host, g == 0 ? addr : "nothing", g == 0 ? "ok" : gai_strerror(g),
                    g == 0 ? canon : "", want);
            return -1;
        }
    }
    snprintf(name, sizeof(name), "mc-%d.test", NAMES); /* one past the file's names */
    int g = lookup(name, addr, sizeof(addr), canon, sizeof(canon));
    if (g != EAI_NONAME) {
        fprintf(stderr, "test_clients: a name not in the hosts file: %s, not EAI_NONAME\n",
                g == 0 ? addr : gai_strerror(g));
        return -1;
    }
    g = reverse(2, name, sizeof(name));
    if (g != 0 || strcmp(name, "lit-2.test") != 0) {
        fprintf(stderr, "test_clients: 127.0.2.2 is named %s, not lit-2.test\n",
                g == 0 ? name : gai_strerror(g));
        return -1;
    }
    g = reverse(1, name, sizeof(name));
    if (g != EAI_NONAME) {
        fprintf(stderr, "test_clients: 127.0.2.1 (no name in the file): %s, not EAI_NONAME\n",
                g == 0 ? name : gai_strerror(g));
        return -1;
    }
    return 0;
}

/* The shim the reference programs preload: $MCR_TEST_HOSTS_SHIM (ctest
 * sets it), else the build's, beside this program. */
static int find_shim(char *out, size_t cap)
{
    const char *env = getenv("MCR_TEST_HOSTS_SHIM");
    if (env != NULL && *env != '\0') {
        if ((size_t)snprintf(out, cap, "%s", env) >= cap)
            return -1;
    } else {
        char exe[1024];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (n <= 0)
            return -1;
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash != NULL)
            *slash = '\0';
        if ((size_t)snprintf(out, cap, "%s/libmcr_test_hosts_shim.so", exe) >= cap)
            return -1;
    }
    if (out[0] != '/' || access(out, R_OK) != 0) {
        fprintf(stderr, "test_clients: the resolver shim %s: %s (build the target "
                        "mcr_test_hosts_shim; MCR_TEST_HOSTS_SHIM names another)\n",
                out, out[0] != '/' ? "not an absolute path" : strerror(errno));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_clients CLIENT (one of the names of mcr_client(3))\n");
        return 2;
    }
    for (size_t i = 0; i < NREFS; i++)
        if (strcmp(refs[i].client, argv[1]) == 0)
            ref = &refs[i];
    if (ref == NULL) {
        fprintf(stderr, "test_clients: no reference program for client '%s'\n", argv[1]);
        return 2;
    }
    /* every client of the library has its reference here, but the proxies,
     * which are not installed: test_proxies checks them against the
     * projects' own test vectors */
    static const char *const proxies[] = {"mcrouter-ch3", "memcached-proxy-jump", "envoy-maglev",
                                          "envoy-ring-hash", "memcached-proxy-ring-ketama",
                                          "mcrouter-wch3"};
    for (size_t i = 0; mcr_client_name(i) != NULL; i++) {
        int found = 0;
        for (size_t j = 0; j < sizeof(proxies) / sizeof(proxies[0]); j++)
            found |= strcmp(proxies[j], mcr_client_name(i)) == 0;
        for (size_t j = 0; j < NREFS; j++)
            found |= strcmp(refs[j].client, mcr_client_name(i)) == 0;
        if (!found) {
            fprintf(stderr, "test_clients: client %s has no reference program\n",
                    mcr_client_name(i));
            return 1;
        }
    }
    if (geteuid() != 0) {
        fprintf(stderr, "test_clients: must run as root (test/ref/netns.sh runs the reference "
                        "programs in a private network namespace)\n");
        return 1;
    }
    char shim[1024];
    if (find_shim(shim, sizeof(shim)) != 0)
        return 1;
    char *dir = tu_tmpdir("clients-hosts");
    snprintf(hosts_path, sizeof(hosts_path), "%s/hosts", dir);
    if (write_hosts(hosts_path) != 0) {
        fprintf(stderr, "test_clients: cannot write %s: %s\n", hosts_path, strerror(errno));
        return 1;
    }
    /* this program's lookups (the linked shim) and netns.sh's */
    setenv("MCR_TEST_HOSTS", hosts_path, 1);
    setenv("MCR_TEST_HOSTS_SHIM", shim, 1);
    if (check_resolver() != 0)
        return 1;
    signal(SIGPIPE, SIG_IGN);
    Suite *s = suite_create("clients");
    TCase *tc = tcase_create(ref->client);
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, matches_the_client);
    suite_add_tcase(s, tc);
    int rc = tu_run(s);
    tu_tmpdir_free(dir);
    return rc;
}
