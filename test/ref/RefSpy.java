// SPDX-License-Identifier: BSD-3-Clause
// RefSpy: where spymemcached 2.12.3 (Debian's jar) puts keys, asked of its own locators.
//
// Usage: java -cp spymemcached.jar:DIR RefSpy CLIENT < configs   (test/ref/ref_spy.sh runs it)
// CLIENT: spymemcached (KetamaNodeLocator, KETAMA_HASH, key format SPYMEMCACHED),
//         spymemcached-libmemcached (the same with key format LIBMEMCACHED),
//         spymemcached-arraymod (ArrayModNodeLocator, NATIVE_HASH, no weights).
// Protocol: test/ref/README.md. Nothing is re-implemented here: each server is a
// MemcachedNode (a java.lang.reflect.Proxy whose getSocketAddress() is
// new InetSocketAddress(HOST, PORT), as AddrUtil builds them, so names resolve as the
// client resolves them), the client's locator is built over the list in order, and
// getPrimary(key) answers; the node it returns is mapped back to its list index.
// Weights: if every WEIGHT is 1 the locator gets no weights (an empty map: the client's
// default, unweighted ketama); otherwise the weights constructor gets a map
// InetSocketAddress -> WEIGHT for every server (spymemcached's only way to weigh servers).

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.FileOutputStream;
import java.io.FileDescriptor;
import java.io.BufferedOutputStream;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.Proxy;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

import net.spy.memcached.ArrayModNodeLocator;
import net.spy.memcached.DefaultHashAlgorithm;
import net.spy.memcached.KetamaNodeKeyFormatter;
import net.spy.memcached.KetamaNodeLocator;
import net.spy.memcached.MemcachedNode;
import net.spy.memcached.NodeLocator;

public final class RefSpy {
    private RefSpy() {
    }

    /** Malformed input: the program stops with a non-zero status. */
    private static final class Malformed extends Exception {
        private static final long serialVersionUID = 1L;

        Malformed(int line, String msg) {
            super("line " + line + ": " + msg);
        }
    }

    private static BufferedReader in;
    private static int lineNo;

    private static String[] next(String what) throws IOException, Malformed {
        String line = in.readLine();
        if (line == null) {
            throw new Malformed(lineNo + 1, "end of input, expected " + what);
        }
        lineNo++;
        if (line.endsWith("\r")) {
            line = line.substring(0, line.length() - 1);
        }
        return line.trim().split("[ \t]+");
    }

    private static int number(String s, int min, int max, String what) throws Malformed {
        int v;
        try {
            v = Integer.parseInt(s);
        } catch (NumberFormatException e) {
            throw new Malformed(lineNo, "bad " + what + " '" + s + "'");
        }
        if (v < min || v > max) {
            throw new Malformed(lineNo, what + " " + v + " out of range " + min + ".." + max);
        }
        return v;
    }

    private static String key(String hex) throws Malformed {
        if (hex.isEmpty() || hex.length() % 2 != 0) {
            throw new Malformed(lineNo, "bad hex key '" + hex + "'");
        }
        byte[] b = new byte[hex.length() / 2];
        for (int i = 0; i < b.length; i++) {
            int hi = Character.digit(hex.charAt(2 * i), 16);
            int lo = Character.digit(hex.charAt(2 * i + 1), 16);
            if (hi < 0 || lo < 0) {
                throw new Malformed(lineNo, "bad hex key '" + hex + "'");
            }
            b[i] = (byte) (hi << 4 | lo);
        }
        try {
            return StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT)
                .decode(ByteBuffer.wrap(b)).toString();
        } catch (CharacterCodingException e) {
            throw new Malformed(lineNo, "key is not UTF-8: " + hex);
        }
    }

    /** A MemcachedNode that only knows its address; identity equals/hashCode, like TCPMemcachedNodeImpl. */
    private static MemcachedNode node(InetSocketAddress sa, String label) {
        InvocationHandler h = (proxy, m, args) -> {
            switch (m.getName()) {
            case "getSocketAddress":
                return sa;
            case "toString":
                return "{RefSpy node " + label + " sa=" + sa + "}";
            case "hashCode":
                return System.identityHashCode(proxy);
            case "equals":
                return proxy == args[0];
            default:
                throw new UnsupportedOperationException("RefSpy node: " + m.getName());
            }
        };
        return (MemcachedNode) Proxy.newProxyInstance(MemcachedNode.class.getClassLoader(),
            new Class<?>[] {MemcachedNode.class}, h);
    }

    public static void main(String[] argv) throws IOException {
        if (argv.length != 1) {
            System.err.println("usage: RefSpy spymemcached|spymemcached-libmemcached|spymemcached-arraymod");
            System.exit(2);
        }
        final String client = argv[0];
        final boolean ketama;
        final KetamaNodeKeyFormatter.Format format;
        switch (client) {
        case "spymemcached":
            ketama = true;
            format = KetamaNodeKeyFormatter.Format.SPYMEMCACHED;
            break;
        case "spymemcached-libmemcached":
            ketama = true;
            format = KetamaNodeKeyFormatter.Format.LIBMEMCACHED;
            break;
        case "spymemcached-arraymod":
            ketama = false;
            format = null;
            break;
        default:
            System.err.println("RefSpy: unknown client '" + client + "'");
            System.exit(2);
            return;
        }
        in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII), 1 << 16);
        PrintStream out = new PrintStream(new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16),
            false, "US-ASCII");
        try {
            String first;
            while ((first = in.readLine()) != null) {
                lineNo++;
                if (first.trim().isEmpty()) {
                    continue;
                }
                String[] f = first.trim().split("[ \t]+");
                if (f.length != 3 || !f[0].equals("config")) {
                    throw new Malformed(lineNo, "expected 'config ID N'");
                }
                String id = f[1];
                int n = number(f[2], 0, 100000, "server count");
                String[] hosts = new String[n];
                int[] ports = new int[n];
                int[] weights = new int[n];
                for (int i = 0; i < n; i++) {
                    String[] s = next("'server HOST PORT WEIGHT'");
                    if (s.length != 4 || !s[0].equals("server")) {
                        throw new Malformed(lineNo, "expected 'server HOST PORT WEIGHT'");
                    }
                    hosts[i] = s[1];
                    ports[i] = number(s[2], 1, 65535, "port");
                    weights[i] = number(s[3], 0, Integer.MAX_VALUE, "weight");
                }
                String[] k = next("'keys M'");
                if (k.length != 2 || !k[0].equals("keys")) {
                    throw new Malformed(lineNo, "expected 'keys M'");
                }
                int m = number(k[1], 0, 10000000, "key count");
                String[] keys = new String[m];
                for (int i = 0; i < m; i++) {
                    String[] h = next("a hex key");
                    if (h.length != 1) {
                        throw new Malformed(lineNo, "expected one hex key");
                    }
                    keys[i] = key(h[0]);
                }
                out.print(answer(id, ketama, format, hosts, ports, weights, keys));
                out.flush();
            }
        } catch (Malformed e) {
            out.flush();
            System.err.println("RefSpy: malformed input: " + e.getMessage());
            System.exit(2);
        }
        out.flush();
        if (out.checkError()) {
            System.err.println("RefSpy: error writing standard output");
            System.exit(1);
        }
    }

    private static String answer(String id, boolean ketama, KetamaNodeKeyFormatter.Format format,
        String[] hosts, int[] ports, int[] weights, String[] keys) {
        int n = hosts.length;
        if (n == 0) {
            return "config " + id + " error no servers\n";
        }
        boolean weighted = false;
        for (int w : weights) {
            if (w != 1) {
                weighted = true;
            }
        }
        if (weighted && !ketama) {
            return "config " + id + " error spymemcached-arraymod has no weights\n";
        }
        List<MemcachedNode> nodes = new ArrayList<>(n);
        IdentityHashMap<MemcachedNode, Integer> index = new IdentityHashMap<>();
        Map<InetSocketAddress, Integer> wmap = new HashMap<>();
        for (int i = 0; i < n; i++) {
            InetSocketAddress sa = new InetSocketAddress(hosts[i], ports[i]);
            if (sa.isUnresolved()) {
                return "config " + id + " error cannot resolve " + hosts[i] + "\n";
            }
            MemcachedNode nd = node(sa, hosts[i] + ":" + ports[i]);
            nodes.add(nd);
            index.put(nd, i);
            if (weighted) {
                wmap.put(sa, weights[i]);
            }
        }
        StringBuilder sb = new StringBuilder(32 + 4 * keys.length);
        sb.append("config ").append(id);
        try {
            NodeLocator loc = ketama
                ? new KetamaNodeLocator(nodes, DefaultHashAlgorithm.KETAMA_HASH, format, wmap)
                : new ArrayModNodeLocator(nodes, DefaultHashAlgorithm.NATIVE_HASH);
            sb.append(" ok");
            for (String key : keys) {
                MemcachedNode nd = loc.getPrimary(key);
                Integer i = nd == null ? null : index.get(nd);
                if (i == null) {
                    return "config " + id + " error the locator returned no known node for a key\n";
                }
                sb.append(' ').append(i.intValue());
            }
        } catch (RuntimeException e) {
            return "config " + id + " error " + String.valueOf(e).replace('\n', ' ') + "\n";
        }
        return sb.append('\n').toString();
    }
}
