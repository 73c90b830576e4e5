/* SPDX-License-Identifier: BSD-3-Clause */
/* fakeserver.h: a scripted fake memcached (a thread on 127.0.0.1) that answers gets with malformed replies, for the pool's tests. */
#ifndef MCR_FAKESERVER_H
#define MCR_FAKESERVER_H

/*
 * The fake listens on 127.0.0.1 at a port the kernel picks and serves every
 * connection from one thread. It speaks enough of memcached's text and meta
 * protocols to answer what a client sends (pipelined requests included):
 * stores are STORED / HD, deletes DELETED / HD, version "VERSION
 * 1.6.18-fake", mn MN, and every key a get asks for is a hit whose value is
 * "fake:" followed by the key, with flags 0 and cas 1.
 *
 * The script changes the replies to the get family (get, gets, gat, gats,
 * mg) on the first `bad_conns` connections it accepts (0: on all of them);
 * later connections are answered correctly, so a client that reconnects
 * can be seen to recover. Other commands are always answered correctly.
 */

typedef enum fs_script {
    FS_GOOD = 0,      /* correct replies */
    FS_GARBAGE,       /* "HELLO WORLD": a line that is no reply at all */
    FS_OTHER_KEY,     /* text: a VALUE for a key that was not asked for */
    FS_WRONG_BYTES,   /* a VALUE / VA whose byte count (3) is not the data's */
    FS_TRUNCATE,      /* "VALUE k 0 100\r\nfake" (part of the data), then close */
    FS_HUGE_LENGTH,   /* a VALUE / VA of 2^40 bytes, then nothing */
    FS_NO_END,        /* text: the VALUE without its END; meta: mn never answered */
    FS_WRONG_OPAQUE,  /* meta: the reply echoes another O token than the request's */
    FS_UNSOLICITED,   /* the correct reply, then a second one ("STALE") nobody asked for */
    FS_TRICKLE,       /* the correct reply, one byte every trickle_ms */
    FS_SILENT,        /* never answers a get */
    FS_CLOSE,         /* closes the connection on reading a get, without a reply */
    FS_DUP_VALUE,     /* each get's first key answered twice: its value, then a second
                         block "fake:dup:<key>" for the same key (text: same line;
                         meta: same O token), then the rest as usual */
    FS_BIG            /* keys starting "big" have a value of FS_BIG_BYTES bytes (others
                         as usual); the first such value stops after its line and
                         FS_BIG_HOLD bytes of data until fs_release() */
} fs_script;

#define FS_BIG_BYTES 2000000
#define FS_BIG_HOLD 65536

typedef struct fs_server fs_server;

/* Start a fake with `script` (see above) on 127.0.0.1, port picked by the
 * kernel. NULL on failure (socket, thread, memory). */
fs_server *fs_start(fs_script script, unsigned bad_conns, unsigned trickle_ms);

/* Stop the thread, close every socket, free. NULL is a no-op. */
void fs_stop(fs_server *fs);

/* Its TCP port. */
int fs_port(const fs_server *fs);

/* Counters, safe to read from any thread while it runs. */
unsigned fs_accepted(const fs_server *fs);    /* connections accepted */
unsigned fs_peer_closed(const fs_server *fs); /* connections the client closed (EOF, reset) */
unsigned fs_open(const fs_server *fs);        /* connections open now */
unsigned fs_gets(const fs_server *fs);        /* get-family commands read */
unsigned fs_bad_replies(const fs_server *fs); /* scripted (malformed) replies sent */
unsigned fs_holding(const fs_server *fs);     /* FS_BIG: 1 while a value is held back at
                                                 FS_BIG_HOLD bytes, its first part sent */

/* FS_BIG: send the rest of the value held back (and never hold again). */
void fs_release(fs_server *fs);

#endif
