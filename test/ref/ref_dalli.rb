# SPDX-License-Identifier: BSD-3-Clause
# ref_dalli.rb: where dalli 3.0.6 (Debian's ruby-dalli) puts keys, asked of its own ring.
#
# Usage: ruby ref_dalli.rb dalli < configs        (protocol: test/ref/README.md)
#
# Each config becomes a Dalli::Client over the servers "HOST:PORT:WEIGHT" (list order,
# dalli's defaults otherwise); the client's own ring (Dalli::Client#ring, built as the
# client builds it for its first request) answers ring.server_for_key(key), the key first
# passed through the client's key manager as Dalli::Client#perform does. server_for_key
# checks alive? on the server it picks, which connects to it, so real memcached servers run
# on the configured addresses: started here (for each config one memcached listening on
# all its resolved addresses and ports, one per address with REF_DALLI_VERIFY), polled
# until each address accepts a TCP connection, stopped by PID before the next config and
# before exit. The server returned is mapped back to its list index by hostname and
# port (and checked to be the list's own object).
#
# REF_DALLI_VERIFY=1 also asks the whole client: each key is stored on every server of the
# config (raw text protocol, value = that server's index, flush_all first) and read back
# with Dalli::Client#get; the value must equal the ring's answer (skipped for a config in
# which two servers share one address and port). Used by selftest_jvm.sh.
# Nothing here re-implements dalli's placement.

require 'logger'
require 'socket'
require 'dalli'

MEMCACHED = ENV.fetch('MEMCACHED', '/usr/bin/memcached')
VERIFY = ENV['REF_DALLI_VERIFY'] == '1'

class Malformed < StandardError; end

# memcached processes by "ADDR:PORT": pid, in least-recently-used order (Hash keeps order).
$servers = {}

# Stops the memcached processes of these keys by PID: KILL (memcached acts on TERM only at
# its next one-second clock tick, and nothing in these throwaway caches needs saving), then
# wait for each.
def stop_servers(keys)
  pids = keys.map { |k| $servers.delete(k) }.compact
  pids.each do |pid|
    Process.kill('KILL', pid)
  rescue Errno::ESRCH
    nil
  end
  pids.each do |pid|
    Process.wait(pid)
  rescue Errno::ECHILD
    nil
  end
end

def stop_all
  stop_servers($servers.keys)
end

def accepts?(addr, port)
  s = Socket.tcp(addr, port, connect_timeout: 0.2)
  s.close
  true
rescue SystemCallError, SocketError, IOError
  false
end

# Resolves HOST to the IPv4 address the client will connect to (names through /etc/hosts).
def resolve(host)
  ai = Addrinfo.getaddrinfo(host, nil, Socket::AF_INET, Socket::SOCK_STREAM).first
  raise SocketError, "no IPv4 address for #{host}" unless ai

  ai.ip_address
end

# One memcached for a whole config, listening on every [addr, port] of it
# (memcached's -l takes a list of ADDR:PORT): one process start instead of
# one per server, which made the test take minutes. The previous config's
# process is stopped first (addresses of different configs may collide).
def config_server(addrs)
  stop_all
  list = addrs.uniq.map { |a, p| "#{a}:#{p}" }
  # REF_DALLI_VERIFY stores each key on every server: then a store each
  groups = VERIFY ? list.map { |l| [l] } : [list]
  groups.each do |g|
    $servers[g.first] = Process.spawn(MEMCACHED, '-u', 'nobody', '-l', g.join(','), '-U', '0',
                                      '-m', '8', '-t', '1', in: File::NULL, out: File::NULL,
                                      err: $stderr)
  end
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
  pending = addrs.uniq
  until pending.empty?
    raise 'memcached exited at start' if $servers.values.any? { |pid| Process.waitpid(pid, Process::WNOHANG) }

    pending.reject! { |a, p| accepts?(a, p) }
    break if pending.empty?
    raise "memcached not accepting on #{pending.map { |a, p| "#{a}:#{p}" }.join(' ')} after 10 s" if
      Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

    sleep 0.005
  end
end

# Raw text protocol to one memcached: each command line, one reply line checked.
def raw(addr, port, lines, expect)
  Socket.tcp(addr, port, connect_timeout: 2) do |s|
    s.write(lines.join)
    lines.size.times do
      r = s.gets
      raise "memcached #{addr}:#{port}: #{r.inspect}, expected #{expect}" unless r == "#{expect}\r\n"
    end
  end
end

def read_line(what)
  line = $stdin.gets
  raise Malformed, "end of input, expected #{what}" if line.nil?

  $lineno += 1
  line.strip.split(/[ \t]+/)
end

def number(s, min, max, what)
  v = Integer(s, 10)
  raise Malformed, "line #{$lineno}: #{what} #{v} out of range" if v < min || v > max

  v
rescue ArgumentError, TypeError
  raise Malformed, "line #{$lineno}: bad #{what} #{s.inspect}"
end

def answer(id, servers, keys)
  return "config #{id} error no servers" if servers.empty?

  addrs = servers.map do |host, port, _w|
    [resolve(host), port]
  rescue SocketError => e
    return "config #{id} error cannot resolve #{host}: #{e.message}"
  end
  config_server(addrs)
  client = Dalli::Client.new(servers.map { |h, p, w| "#{h}:#{p}:#{w}" })
  begin
    ring = client.send(:ring)
    key_manager = client.instance_variable_get(:@key_manager)
    by_name = {}
    ring.servers.each_with_index { |s, i| by_name["#{s.hostname}:#{s.port}"] = i }
    idx = keys.map do |key|
      srv = ring.server_for_key(key_manager.validate_key(key))
      i = by_name["#{srv.hostname}:#{srv.port}"]
      raise "ring returned an unknown server #{srv.name}" if i.nil? || !ring.servers[i].equal?(srv)

      i
    end
    verify(client, id, addrs, keys, idx) if VERIFY
    "config #{id} ok #{idx.join(' ')}".rstrip
  rescue Dalli::DalliError, ArgumentError, FloatDomainError, ZeroDivisionError => e
    "config #{id} error #{e.class}: #{e.message.tr("\n", ' ')}"
  ensure
    client.close
  end
end

def verify(client, id, addrs, keys, idx)
  return if addrs.uniq.size != addrs.size

  addrs.each { |a, p| raw(a, p, ["flush_all\r\n"], 'OK') }
  addrs.each_with_index do |(a, p), i|
    v = i.to_s
    keys.each_slice(200) do |ks|
      raw(a, p, ks.map { |k| "set #{k.b} 0 0 #{v.bytesize}\r\n#{v}\r\n".b }, 'STORED')
    end
  end
  keys.each_with_index do |k, j|
    got = client.get(k)
    raise "verify #{id}: key #{k.unpack1('H*')}: client.get gave #{got.inspect}, ring #{idx[j]}" if got != idx[j].to_s
  end
end

def main
  unless ARGV.size == 1 && ARGV[0] == 'dalli'
    warn "usage: ruby ref_dalli.rb dalli (unknown client #{ARGV.join(' ').inspect})"
    exit 2
  end
  # dalli logs to standard output by default: that is the protocol's channel here.
  Dalli.logger = Logger.new($stderr, level: Logger::WARN)
  $stdout.sync = false
  $lineno = 0
  while (line = $stdin.gets)
    $lineno += 1
    f = line.strip.split(/[ \t]+/)
    next if f.empty?
    raise Malformed, "line #{$lineno}: expected 'config ID N'" unless f.size == 3 && f[0] == 'config'

    id = f[1]
    n = number(f[2], 0, 100_000, 'server count')
    servers = Array.new(n) do
      s = read_line("'server HOST PORT WEIGHT'")
      raise Malformed, "line #{$lineno}: expected 'server HOST PORT WEIGHT'" unless s.size == 4 && s[0] == 'server'

      [s[1], number(s[2], 1, 65_535, 'port'), number(s[3], 0, 1 << 31, 'weight')]
    end
    k = read_line("'keys M'")
    raise Malformed, "line #{$lineno}: expected 'keys M'" unless k.size == 2 && k[0] == 'keys'

    m = number(k[1], 0, 10_000_000, 'key count')
    keys = Array.new(m) do
      h = read_line('a hex key')
      raise Malformed, "line #{$lineno}: bad hex key" unless h.size == 1 && h[0] =~ /\A(?:\h\h)+\z/

      key = [h[0]].pack('H*').force_encoding(Encoding::UTF_8)
      raise Malformed, "line #{$lineno}: key is not UTF-8" unless key.valid_encoding?

      key
    end
    $stdout.write(answer(id, servers, keys), "\n")
    $stdout.flush
  end
rescue Malformed => e
  $stdout.flush
  warn "ref_dalli.rb: malformed input: #{e.message}"
  exit 2
ensure
  stop_all
end

%w[INT TERM HUP PIPE].each do |sig|
  trap(sig) do
    stop_all
    exit!(3)
  end
end
main
