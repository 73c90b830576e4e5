/* SPDX-License-Identifier: BSD-3-Clause */
/* hosts_shim.c: test-only resolver: getaddrinfo, getnameinfo, gethostbyname* and gethostbyaddr* answer host names from the hosts file named by MCR_TEST_HOSTS, and nothing else. */
#define _GNU_SOURCE /* RTLD_NEXT, gethostbyname2, the *_r lookups */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

/*
 * test_clients (test/test_clients.c) asks real memcached clients where keys
 * go, with host names (mc-17.test) that must resolve to the test's own
 * 127.0.0.0/8 addresses. No mount namespace, no /etc/hosts: test/ref/netns.sh
 * LD_PRELOADs this library into the reference programs (libc's resolver, and
 * so Python, Ruby, the JVM, Go's cgo resolver, nginx, libmemcached), and
 * test_clients links it for mcroute's own lookups. With MCR_TEST_HOSTS set:
 *
 *  - a name is looked up in that file only (hosts(5) format; names compared
 *    without case; every address of the name, in file order): found, each
 *    address is handed to libc's lookup as a numeric host with the caller's
 *    hints (so socket types, services, AI_V4MAPPED and AI_ADDRCONFIG behave
 *    as libc's own), the canonical name being the line's first name; not
 *    found, the name does not resolve (EAI_NONAME, HOST_NOT_FOUND): no
 *    /etc/hosts, no DNS, so a name never silently gets another address;
 *  - an address (reverse lookup) is named by the first line that has it,
 *    else it has no name (EAI_NONAME under NI_NAMEREQD, else numeric);
 *  - an IP literal, a null host and NI_NUMERICHOST go to libc unchanged;
 *  - an unreadable file fails every lookup of a name, saying so on stderr.
 *
 * Without MCR_TEST_HOSTS every call goes to libc unchanged. Not covered:
 * getaddrinfo_a, res_query and gethostent (none of the clients uses them for
 * a server's name), NI_NOFQDN (ignored). The non-reentrant gethostby*()
 * share one static buffer, as libc's do. No state is kept between calls:
 * the file is read by each lookup (a few hundred lines), so that threads
 * need no lock.
 */

/* exported whatever the build's default (the project's is hidden) */
#pragma GCC visibility push(default)

#define HOSTS_ENV "MCR_TEST_HOSTS"
#define LINE_MAX_LEN 4096
#define MAX_ADDRS 64   /* addresses of one name */
#define MAX_ALIASES 32 /* names of one line */

typedef struct haddr {
    int family; /* AF_INET, AF_INET6 */
    union {
        struct in_addr v4;
        struct in6_addr v6;
    } a;
} haddr;

/* What a lookup found: the addresses of a name (or the one address of a
 * reverse lookup) and the names of the first matching line. */
typedef struct hfound {
    haddr addr[MAX_ADDRS];
    size_t naddr;
    char names[LINE_MAX_LEN]; /* the first matching line's names, NUL-separated */
    size_t nnames;
} hfound;

/* ------------------------------------------------------------ libc's own */

/* The next definition of a function after this one (libc's, or a
 * sanitizer's interceptor that calls libc's). */
static void *next_fn(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (f == NULL) {
        fprintf(stderr, "hosts_shim: dlsym(RTLD_NEXT, %s) found nothing\n", name);
        abort();
    }
    return f;
}

typedef int (*getaddrinfo_fn)(const char *, const char *, const struct addrinfo *,
                              struct addrinfo **);
typedef int (*getnameinfo_fn)(const struct sockaddr *, socklen_t, char *, socklen_t, char *,
                              socklen_t, int);
typedef int (*gethostbyname2_r_fn)(const char *, int, struct hostent *, char *, size_t,
                                   struct hostent **, int *);
typedef int (*gethostbyaddr_r_fn)(const void *, socklen_t, int, struct hostent *, char *, size_t,
                                  struct hostent **, int *);

/* ------------------------------------------------------------ the file */

/* The file's path, or NULL when the shim is off. */
static const char *hosts_path(void)
{
    const char *p = getenv(HOSTS_ENV);
    return p != NULL && *p != '\0' ? p : NULL;
}

static int parse_addr(const char *s, haddr *out)
{
    memset(out, 0, sizeof(*out));
    if (inet_pton(AF_INET, s, &out->a.v4) == 1) {
        out->family = AF_INET;
        return 1;
    }
    if (inet_pton(AF_INET6, s, &out->a.v6) == 1) {
        out->family = AF_INET6;
        return 1;
    }
    return 0;
}

static int same_addr(const haddr *x, const haddr *y)
{
    if (x->family != y->family)
        return 0;
    if (x->family == AF_INET)
        return memcmp(&x->a.v4, &y->a.v4, sizeof(x->a.v4)) == 0;
    return memcmp(&x->a.v6, &y->a.v6, sizeof(x->a.v6)) == 0;
}

/* Read the file: with name != NULL, every address of that name (and the
 * names of its first line); else the first line with address *rev. 1 when
 * found, 0 when not, -1 when the file cannot be read (said on stderr). */
static int hosts_lookup(const char *name, const haddr *rev, hfound *out)
{
    const char *path = hosts_path();
    FILE *f = fopen(path, "re");
    char line[LINE_MAX_LEN];

    out->naddr = 0;
    out->nnames = 0;
    if (f == NULL) {
        fprintf(stderr, "hosts_shim: cannot read %s=%s: %s\n", HOSTS_ENV, path, strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        char *save = NULL, *tok, *hash = strchr(line, '#');
        if (hash != NULL)
            *hash = '\0';
        tok = strtok_r(line, " \t\r\n", &save);
        haddr a;
        if (tok == NULL || !parse_addr(tok, &a))
            continue;
        char *names[MAX_ALIASES];
        size_t n = 0;
        int match = rev != NULL && same_addr(&a, rev);
        while ((tok = strtok_r(NULL, " \t\r\n", &save)) != NULL && n < MAX_ALIASES) {
            names[n++] = tok;
            if (name != NULL && strcasecmp(tok, name) == 0)
                match = 1;
        }
        if (!match || n == 0)
            continue;
        if (out->nnames == 0) {
            size_t used = 0;
            for (size_t i = 0; i < n; i++) {
                size_t len = strlen(names[i]) + 1;
                memcpy(out->names + used, names[i], len);
                used += len;
            }
            out->nnames = n;
        }
        if (out->naddr < MAX_ADDRS)
            out->addr[out->naddr++] = a;
        if (rev != NULL)
            break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        fprintf(stderr, "hosts_shim: error reading %s\n", path);
        return -1;
    }
    return out->nnames > 0;
}

/* ------------------------------------------------------------ getaddrinfo */

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res)
{
    getaddrinfo_fn real = (getaddrinfo_fn)next_fn("getaddrinfo");
    if (hosts_path() == NULL || node == NULL)
        return real(node, service, hints, res);
    /* libc's defaults without hints */
    struct addrinfo h = {.ai_flags = AI_V4MAPPED | AI_ADDRCONFIG, .ai_family = AF_UNSPEC};
    if (hints != NULL)
        h = *hints;
    int caller_flags = h.ai_flags;
    h.ai_flags |= AI_NUMERICHOST;
    /* an IP literal (or an error of the service or the hints) is libc's */
    int rc = real(node, service, &h, res);
    if (rc != EAI_NONAME || (caller_flags & AI_NUMERICHOST))
        return rc;

    hfound found;
    int got = hosts_lookup(node, NULL, &found);
    if (got < 0)
        return EAI_FAIL;
    if (got == 0)
        return EAI_NONAME;
    struct addrinfo *head = NULL, **tail = &head;
    rc = EAI_NONAME;
    for (size_t i = 0; i < found.naddr; i++) {
        char text[INET6_ADDRSTRLEN];
        struct addrinfo *part = NULL;
        inet_ntop(found.addr[i].family, &found.addr[i].a, text, sizeof(text));
        /* the canonical name on the first answer only, as libc does */
        if (head != NULL)
            h.ai_flags &= ~AI_CANONNAME;
        int r = real(text, service, &h, &part);
        if (r != 0) {
            if (head == NULL && (r == EAI_MEMORY || r == EAI_SERVICE || r == EAI_SOCKTYPE))
                rc = r;
            continue;
        }
        if (head == NULL && (h.ai_flags & AI_CANONNAME)) {
            char *canon = strdup(found.names); /* the line's first name */
            if (canon == NULL) {
                freeaddrinfo(part);
                return EAI_MEMORY;
            }
            free(part->ai_canonname);
            part->ai_canonname = canon;
        }
        *tail = part;
        while (*tail != NULL)
            tail = &(*tail)->ai_next;
    }
    if (head == NULL)
        return rc;
    *res = head;
    return 0;
}

/* ------------------------------------------------------------ getnameinfo */

int getnameinfo(const struct sockaddr *sa, socklen_t salen, char *host, socklen_t hostlen,
                char *serv, socklen_t servlen, int flags)
{
    getnameinfo_fn real = (getnameinfo_fn)next_fn("getnameinfo");
    haddr a;

    if (hosts_path() == NULL || sa == NULL || host == NULL || hostlen == 0 ||
        (flags & NI_NUMERICHOST))
        return real(sa, salen, host, hostlen, serv, servlen, flags);
    memset(&a, 0, sizeof(a));
    if (sa->sa_family == AF_INET && salen >= (socklen_t)sizeof(struct sockaddr_in)) {
        a.family = AF_INET;
        a.a.v4 = ((const struct sockaddr_in *)(const void *)sa)->sin_addr;
    } else if (sa->sa_family == AF_INET6 && salen >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const struct in6_addr *v6 = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(v6)) { /* named as the IPv4 address, as libc does */
            a.family = AF_INET;
            memcpy(&a.a.v4, &v6->s6_addr[12], sizeof(a.a.v4));
        } else {
            a.family = AF_INET6;
            a.a.v6 = *v6;
        }
    } else {
        return real(sa, salen, host, hostlen, serv, servlen, flags);
    }
    hfound found;
    int got = hosts_lookup(NULL, &a, &found);
    if (got < 0)
        return EAI_FAIL;
    if (got == 0) {
        if (flags & NI_NAMEREQD)
            return EAI_NONAME;
        return real(sa, salen, host, hostlen, serv, servlen, flags | NI_NUMERICHOST);
    }
    size_t len = strlen(found.names);
    if (len >= (size_t)hostlen)
        return EAI_OVERFLOW;
    memcpy(host, found.names, len + 1);
    if (serv != NULL && servlen > 0)
        return real(sa, salen, NULL, 0, serv, servlen, flags);
    return 0;
}

/* ------------------------------------------------------------ gethostby* */

/* A hostent in buf (the *_r functions' contract): the found names (the
 * first is h_name) and the addresses of family af. 0, or ERANGE. */
static int fill_hostent(const hfound *found, int af, struct hostent *ret, char *buf,
                        size_t buflen)
{
    size_t alen = af == AF_INET ? sizeof(struct in_addr) : sizeof(struct in6_addr);
    size_t naddr = 0, textlen = 0;
    for (size_t i = 0; i < found->naddr; i++)
        naddr += found->addr[i].family == af;
    for (size_t i = 0; i < found->nnames; i++)
        textlen += strlen(found->names + textlen) + 1;
    /* pointer arrays first (aligned), then the addresses, then the names */
    uintptr_t start = (uintptr_t)buf, align = sizeof(char *);
    uintptr_t p = (start + align - 1) & ~(align - 1);
    size_t need = (size_t)(p - start) + (found->nnames + naddr + 1) * sizeof(char *) +
                  naddr * alen + textlen;
    if (need > buflen)
        return ERANGE;
    char **aliases = (char **)(void *)p;
    char **addrs = aliases + found->nnames; /* nnames - 1 aliases and a NULL */
    char *data = (char *)(addrs + naddr + 1);
    size_t k = 0;
    for (size_t i = 0; i < found->naddr; i++) {
        if (found->addr[i].family != af)
            continue;
        memcpy(data, &found->addr[i].a, alen);
        addrs[k++] = data;
        data += alen;
    }
    addrs[k] = NULL;
    memcpy(data, found->names, textlen);
    ret->h_name = data;
    data += strlen(data) + 1;
    for (size_t i = 1; i < found->nnames; i++) {
        aliases[i - 1] = data;
        data += strlen(data) + 1;
    }
    aliases[found->nnames - 1] = NULL;
    ret->h_aliases = aliases;
    ret->h_addrtype = af;
    ret->h_length = (int)alen;
    ret->h_addr_list = addrs;
    return 0;
}

/* An IP literal (as libc's gethostbyname parses one: inet_aton's forms too). */
static int is_literal(const char *name)
{
    struct in_addr v4;
    struct in6_addr v6;
    return inet_aton(name, &v4) != 0 || inet_pton(AF_INET6, name, &v6) == 1;
}

int gethostbyname2_r(const char *name, int af, struct hostent *ret, char *buf, size_t buflen,
                     struct hostent **result, int *h_errnop)
{
    gethostbyname2_r_fn real = (gethostbyname2_r_fn)next_fn("gethostbyname2_r");
    if (hosts_path() == NULL || name == NULL || is_literal(name) ||
        (af != AF_INET && af != AF_INET6))
        return real(name, af, ret, buf, buflen, result, h_errnop);
    hfound found;
    int got = hosts_lookup(name, NULL, &found);
    size_t naddr = 0;
    for (size_t i = 0; got > 0 && i < found.naddr; i++)
        naddr += found.addr[i].family == af;
    *result = NULL;
    if (got < 0) {
        *h_errnop = NO_RECOVERY;
        return EIO;
    }
    if (got == 0 || naddr == 0) {
        *h_errnop = got == 0 ? HOST_NOT_FOUND : NO_DATA;
        return 0;
    }
    int rc = fill_hostent(&found, af, ret, buf, buflen);
    if (rc != 0) {
        *h_errnop = NETDB_INTERNAL;
        errno = rc;
        return rc;
    }
    *result = ret;
    return 0;
}

int gethostbyname_r(const char *name, struct hostent *ret, char *buf, size_t buflen,
                    struct hostent **result, int *h_errnop)
{
    if (hosts_path() == NULL) {
        typedef int (*fn)(const char *, struct hostent *, char *, size_t, struct hostent **,
                          int *);
        return ((fn)next_fn("gethostbyname_r"))(name, ret, buf, buflen, result, h_errnop);
    }
    return gethostbyname2_r(name, AF_INET, ret, buf, buflen, result, h_errnop);
}

int gethostbyaddr_r(const void *addr, socklen_t len, int type, struct hostent *ret, char *buf,
                    size_t buflen, struct hostent **result, int *h_errnop)
{
    gethostbyaddr_r_fn real = (gethostbyaddr_r_fn)next_fn("gethostbyaddr_r");
    haddr a;
    memset(&a, 0, sizeof(a));
    if (hosts_path() == NULL || addr == NULL ||
        !((type == AF_INET && len == sizeof(struct in_addr)) ||
          (type == AF_INET6 && len == sizeof(struct in6_addr))))
        return real(addr, len, type, ret, buf, buflen, result, h_errnop);
    a.family = type;
    memcpy(&a.a, addr, len);
    hfound found;
    int got = hosts_lookup(NULL, &a, &found);
    *result = NULL;
    if (got <= 0) {
        *h_errnop = got < 0 ? NO_RECOVERY : HOST_NOT_FOUND;
        return got < 0 ? EIO : 0;
    }
    int rc = fill_hostent(&found, type, ret, buf, buflen);
    if (rc != 0) {
        *h_errnop = NETDB_INTERNAL;
        errno = rc;
        return rc;
    }
    *result = ret;
    return 0;
}

/* The non-reentrant ones: one static hostent and buffer, as libc's. */
static struct hostent static_ent;
static char static_buf[LINE_MAX_LEN + MAX_ADDRS * (sizeof(struct in6_addr) + sizeof(char *)) +
                       (MAX_ALIASES + 3) * sizeof(char *)]; /* + alignment */

static struct hostent *static_result(int rc, struct hostent *result, int herr)
{
    h_errno = herr;
    if (rc != 0 || result == NULL)
        return NULL;
    return result;
}

struct hostent *gethostbyname2(const char *name, int af)
{
    if (hosts_path() == NULL) {
        typedef struct hostent *(*fn)(const char *, int);
        return ((fn)next_fn("gethostbyname2"))(name, af);
    }
    struct hostent *result = NULL;
    int herr = 0;
    int rc = gethostbyname2_r(name, af, &static_ent, static_buf, sizeof(static_buf), &result,
                              &herr);
    return static_result(rc, result, herr);
}

struct hostent *gethostbyname(const char *name)
{
    if (hosts_path() == NULL) {
        typedef struct hostent *(*fn)(const char *);
        return ((fn)next_fn("gethostbyname"))(name);
    }
    return gethostbyname2(name, AF_INET);
}

struct hostent *gethostbyaddr(const void *addr, socklen_t len, int type)
{
    if (hosts_path() == NULL) {
        typedef struct hostent *(*fn)(const void *, socklen_t, int);
        return ((fn)next_fn("gethostbyaddr"))(addr, len, type);
    }
    struct hostent *result = NULL;
    int herr = 0;
    int rc = gethostbyaddr_r(addr, len, type, &static_ent, static_buf, sizeof(static_buf),
                             &result, &herr);
    return static_result(rc, result, herr);
}
