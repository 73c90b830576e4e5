/* SPDX-License-Identifier: BSD-3-Clause */
/* delayproxy.h: a TCP proxy for tests that holds the reply to a read of one key until the test releases it, to make a race happen every time. */
#ifndef MCR_DELAYPROXY_H
#define MCR_DELAYPROXY_H

/*
 * The proxy listens on 127.0.0.1 (a port the kernel picks) and forwards
 * every connection to 127.0.0.1:upstream, both ways, in a thread of its
 * own. dp_hold(KEY) arms it once: the first connection that sends a read
 * of KEY ("get KEY", "gets KEY" or "mg KEY ..." at the start of a line)
 * has everything the server sends it from then on kept back, until
 * dp_release(); other connections, and that connection's requests, flow
 * as usual. So a test can stop a reply in flight (the read was answered
 * by the server, the client has not seen it), act meanwhile, then let it
 * go.
 */

typedef struct dp_proxy dp_proxy;

/* A proxy in front of 127.0.0.1:upstream_port; NULL on failure. */
dp_proxy *dp_start(int upstream_port);

/* Its port on 127.0.0.1. */
int dp_port(const dp_proxy *p);

/* Hold the replies of the first connection that reads `key` (see above). */
void dp_hold(dp_proxy *p, const char *key);

/* Wait until a held connection has received bytes of its server that it
 * keeps back: 0, or -1 after timeout_ms. */
int dp_wait_held(dp_proxy *p, int timeout_ms);

/* Send what was held and stop holding. */
void dp_release(dp_proxy *p);

/* Stop the thread, close every connection, free. NULL is a no-op. */
void dp_stop(dp_proxy *p);

#endif
