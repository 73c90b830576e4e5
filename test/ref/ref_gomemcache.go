// SPDX-License-Identifier: BSD-3-Clause
// ref_gomemcache.go: where gomemcache puts keys, asked of its own ServerList (SetServers, PickServer); protocol in test/ref/README.md.
package main

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/bradfitz/gomemcache/memcache"
)

func die(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "ref_gomemcache: "+format+"\n", a...)
	os.Exit(2)
}

func main() {
	if len(os.Args) != 2 || os.Args[1] != "gomemcache" {
		die("usage: ref_gomemcache gomemcache < configs")
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<16), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	next := func() []string {
		if !in.Scan() {
			return nil
		}
		return strings.Fields(in.Text())
	}
	for {
		f := next()
		if f == nil {
			break
		}
		if len(f) != 3 || f[0] != "config" {
			die("expected 'config ID N', got %q", strings.Join(f, " "))
		}
		id := f[1]
		n, err := strconv.Atoi(f[2])
		if err != nil || n < 1 {
			die("config %s: bad server count %q", id, f[2])
		}
		specs := make([]string, n)
		weighted := false
		for i := 0; i < n; i++ {
			s := next()
			if len(s) != 4 || s[0] != "server" {
				die("config %s: expected 'server HOST PORT WEIGHT'", id)
			}
			specs[i] = net.JoinHostPort(s[1], s[2])
			weighted = weighted || s[3] != "1"
		}
		k := next()
		if len(k) != 2 || k[0] != "keys" {
			die("config %s: expected 'keys M'", id)
		}
		m, err := strconv.Atoi(k[1])
		if err != nil || m < 0 {
			die("config %s: bad key count", id)
		}
		keys := make([]string, m)
		for j := 0; j < m; j++ {
			if !in.Scan() {
				die("config %s: %d keys missing", id, m-j)
			}
			b, err := hex.DecodeString(strings.TrimSpace(in.Text()))
			if err != nil {
				die("config %s key %d: bad hex", id, j)
			}
			keys[j] = string(b)
		}
		if weighted {
			fmt.Fprintf(out, "config %s error gomemcache has no weights\n", id)
			out.Flush()
			continue
		}
		var ss memcache.ServerList
		if err := ss.SetServers(specs...); err != nil {
			fmt.Fprintf(out, "config %s error %s\n", id, err)
			out.Flush()
			continue
		}
		// the list index of each address SetServers resolved, in its order;
		// PickServer answers an address, so two entries of one address
		// cannot be told apart (the tests keep endpoints distinct)
		index := map[string]int{}
		i := 0
		dup := ""
		ss.Each(func(a net.Addr) error {
			if j, seen := index[a.String()]; seen && dup == "" {
				dup = fmt.Sprintf("servers %d and %d both resolve to %s", j, i, a)
			}
			index[a.String()] = i
			i++
			return nil
		})
		if dup != "" {
			fmt.Fprintf(out, "config %s error %s\n", id, dup)
			out.Flush()
			continue
		}
		fmt.Fprintf(out, "config %s ok", id)
		for _, key := range keys {
			a, err := ss.PickServer(key)
			if err != nil {
				die("config %s: PickServer: %s", id, err)
			}
			fmt.Fprintf(out, " %d", index[a.String()])
		}
		fmt.Fprintln(out)
		out.Flush()
	}
	if err := in.Err(); err != nil {
		die("reading: %s", err)
	}
}
