/* SPDX-License-Identifier: BSD-3-Clause */
/* javaname.c: a server's address as Java writes it (InetSocketAddress.toString(), getHostName()), for spymemcached's ketama labels. */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "placement_internal.h"

/*
 * spymemcached labels its points with text that Java derives from the
 * server's InetSocketAddress, so the label depends on name resolution:
 *
 *  - InetAddress.getByName(host) asks getaddrinfo() (no socket type,
 *    AI_CANONNAME) and, with Java's default java.net.preferIPv6Addresses
 *    false, puts the IPv4 answers before the IPv6 ones, each group in the
 *    resolver's order; the first is the address. An IP literal is parsed,
 *    not resolved.
 *  - Inet4Address.getHostAddress() is the dotted quad; Inet6Address's is
 *    eight groups of lowercase hex without leading zeros and without "::"
 *    (and "%scope" for a scoped address, which a server list never has).
 *  - InetSocketAddress.toString() (JDK 14 and later) is
 *    "NAME/ADDRESS:port", NAME empty for a literal, the IPv6 address in
 *    brackets, and "NAME/<unresolved>:port" for a name that did not
 *    resolve.
 *  - getHostName() of a literal is a reverse lookup whose answer must
 *    resolve back to the same address, else the literal itself.
 *
 * These run where a ring or snapshot of a spymemcached mode is built: the
 * first time a server is placed, as in the client.
 */

/* The address of an AF_INET/AF_INET6 sockaddr as Java's getHostAddress(). */
static size_t java_host_address(const struct sockaddr *sa, char *out, size_t cap)
{
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        if (inet_ntop(AF_INET, &in->sin_addr, out, (socklen_t)cap) == NULL)
            return 0;
        return strlen(out);
    }
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
    const unsigned char *b = in6->sin6_addr.s6_addr;
    size_t n = 0;
    for (int g = 0; g < 8; g++)
        n += (size_t)snprintf(out + n, cap - n, g ? ":%x" : "%x",
                              (unsigned)(b[2 * g] << 8 | b[2 * g + 1]));
    return n;
}

/* Parse host as an IP literal into ss; 1 when it is one. */
static int parse_literal(const char *host, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *in = (struct sockaddr_in *)(void *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)(void *)ss;
    if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
        in->sin_family = AF_INET;
        return 1;
    }
    if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        return 1;
    }
    return 0;
}

/* InetAddress.getByName(host) for a name: the first IPv4 answer, else the
 * first IPv6 one. 1 when found, 0 when not (Java's unresolved name: any
 * failure of the lookup), -1 when the resolver ran out of memory (Java
 * throws: no label from that). */
static int resolve_name(const char *host, struct sockaddr_storage *ss)
{
    struct addrinfo hints, *res = NULL, *a;
    int found = 0;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_flags = AI_CANONNAME;
    int g = getaddrinfo(host, NULL, &hints, &res);
    if (g == EAI_MEMORY)
        return -1;
    if (g != 0)
        return 0;
    for (int pass = 0; pass < 2 && !found; pass++)
        for (a = res; a != NULL && !found; a = a->ai_next)
            if (a->ai_family == (pass == 0 ? AF_INET : AF_INET6) &&
                a->ai_addrlen <= sizeof(*ss)) {
                memcpy(ss, a->ai_addr, a->ai_addrlen);
                found = 1;
            }
    freeaddrinfo(res);
    return found;
}

static int same_address(const struct sockaddr_storage *x, const struct sockaddr *y)
{
    if (x->ss_family != y->sa_family)
        return 0;
    if (y->sa_family == AF_INET)
        return memcmp(&((const struct sockaddr_in *)(const void *)x)->sin_addr,
                      &((const struct sockaddr_in *)(const void *)y)->sin_addr,
                      sizeof(struct in_addr)) == 0;
    return memcmp(&((const struct sockaddr_in6 *)(const void *)x)->sin6_addr,
                  &((const struct sockaddr_in6 *)(const void *)y)->sin6_addr,
                  sizeof(struct in6_addr)) == 0;
}

/* getHostName() of a literal: 1 and the reverse lookup's name if it
 * resolves back to the address, else 0 (the literal stands, as in Java for
 * any failure of the lookups); -1 when a lookup ran out of memory. */
static int reverse_name(const struct sockaddr_storage *ss, char *out, size_t cap)
{
    socklen_t sl = ss->ss_family == AF_INET ? sizeof(struct sockaddr_in)
                                            : sizeof(struct sockaddr_in6);
    struct addrinfo hints, *res = NULL, *a;
    int ok = 0;

    int g = getnameinfo((const struct sockaddr *)ss, sl, out, (socklen_t)cap, NULL, 0,
                        NI_NAMEREQD);
    if (g != 0)
        return g == EAI_MEMORY ? -1 : 0;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_flags = AI_CANONNAME;
    g = getaddrinfo(out, NULL, &hints, &res);
    if (g != 0)
        return g == EAI_MEMORY ? -1 : 0;
    for (a = res; a != NULL && !ok; a = a->ai_next)
        ok = same_address(ss, a->ai_addr);
    freeaddrinfo(res);
    return ok;
}

size_t mcr__java_label_prefix(const mcr__server *s, bool libmemcached_format, char *buf)
{
    struct sockaddr_storage ss;
    char addr[INET6_ADDRSTRLEN + 48];
    int literal = parse_literal(s->host, &ss);

    if (libmemcached_format) {
        /* getHostName(), then ":port" unless it is 11211 */
        char name[1025]; /* NI_MAXHOST */
        const char *h = s->host;
        int rn = literal ? reverse_name(&ss, name, sizeof(name)) : 0;
        if (rn < 0)
            return 0;
        if (rn == 1)
            h = name;
        if (s->port == MCR_DEFAULT_PORT)
            return (size_t)snprintf(buf, MCR__NAME_BUF, "%s-", h);
        return (size_t)snprintf(buf, MCR__NAME_BUF, "%s:%d-", h, s->port);
    }
    int found = literal ? 1 : resolve_name(s->host, &ss);
    if (found < 0)
        return 0;
    if (found == 0)
        return (size_t)snprintf(buf, MCR__NAME_BUF, "%s/<unresolved>:%d-", s->host, s->port);
    size_t n = java_host_address((const struct sockaddr *)&ss, addr, sizeof(addr));
    addr[n] = '\0';
    const char *open = ss.ss_family == AF_INET6 ? "[" : "";
    const char *close = ss.ss_family == AF_INET6 ? "]" : "";
    /* "/ADDRESS:port" with the leading "/" dropped for a literal */
    if (literal)
        return (size_t)snprintf(buf, MCR__NAME_BUF, "%s%s%s:%d-", open, addr, close, s->port);
    return (size_t)snprintf(buf, MCR__NAME_BUF, "%s/%s%s%s:%d-", s->host, open, addr, close,
                            s->port);
}
