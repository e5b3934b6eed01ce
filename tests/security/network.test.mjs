// Cases 14-16 of shared/SANDBOX_CASES.md: the network (default policy "none"). The only addresses
// ever targeted are loopback (listeners this test starts on the host) and 169.254.169.254, and
// that one only from inside a sandbox, as an egress attempt that must fail.
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { exec, rand, requireSandboxTools, startKiln, tempDir } from './lib.mjs';

const PROBE = String.raw`
import os, socket, struct, sys, subprocess

def attempt(name, fn):
    try:
        r = fn()
        print(f"{name} CONNECTED {r if r is not None else ''}", flush=True)
    except OSError as e:
        print(f"{name} FAILED {e.errno} {e.strerror}", flush=True)

def tcp(host, port, fam=socket.AF_INET):
    def go():
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(3)
        s.connect((host, port))
        s.sendall(b"kilnsec hello\n")
        s.close()
    return go

def udp(host, port, fam=socket.AF_INET, payload=b"kilnsec datagram", want_reply=False):
    def go():
        s = socket.socket(fam, socket.SOCK_DGRAM)
        s.settimeout(3)
        s.connect((host, port))
        s.send(payload)
        if want_reply:
            return s.recv(512)[:8]
    return go

def dns_query():
    q = struct.pack(">HHHHHH", 0x4b53, 0x0100, 1, 0, 0, 0)
    for label in b"kilnsec.example".split(b"."):
        q += bytes([len(label)]) + label
    return q + b"\x00" + struct.pack(">HH", 1, 1)

def icmp(host):
    def go():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
        s.settimeout(3)
        s.sendto(struct.pack(">BBHHH", 8, 0, 0, 0x4b53, 1) + b"kilnsec", (host, 0))
        return s.recv(64)[:4]
    return go

def raw():
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)

def packet():
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)

def unix(addr):
    def go():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(3)
        s.connect(addr)
        s.sendall(b"kilnsec hello\n")
    return go

mode = sys.argv[1]
if mode == "egress":
    attempt("tcp4_metadata", tcp("169.254.169.254", 80))
    attempt("udp4_metadata", udp("169.254.169.254", 80))
    attempt("dns_metadata", udp("169.254.169.254", 53, payload=dns_query(), want_reply=True))
    attempt("icmp_metadata", icmp("169.254.169.254"))
    attempt("raw_socket", raw)
    attempt("packet_socket", packet)
    attempt("tcp6_metadata", tcp("::ffff:169.254.169.254", 80, socket.AF_INET6))
    attempt("udp6_metadata", udp("::ffff:169.254.169.254", 53, socket.AF_INET6))
    with open("/proc/net/dev") as f:
        print("IFACES " + " ".join(l.split(":")[0].strip() for l in f.readlines()[2:]))
    try:
        with open("/proc/net/if_inet6") as f:
            print("IF6 " + " ".join(l.split()[-1] for l in f))
    except OSError:
        print("IF6 ")
    r = subprocess.run(["bash", "-c", "exec 3<>/dev/tcp/169.254.169.254/80 && echo dev_tcp CONNECTED || echo dev_tcp FAILED"],
                       capture_output=True, text=True, timeout=20)
    print(r.stdout.strip())
elif mode == "loopback":
    p4, p6, pu = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    attempt("tcp4_host_loopback", tcp("127.0.0.1", p4))
    attempt("tcp6_host_loopback", tcp("::1", p6, socket.AF_INET6))
    attempt("udp4_host_loopback", udp("127.0.0.1", pu, want_reply=True))
    # The metadata address only with network none (argv[5] == "metadata"), never from a sandbox
    # that has the host's network.
    if len(sys.argv) > 5 and sys.argv[5] == "metadata":
        attempt("tcp4_metadata", tcp("169.254.169.254", 80))
elif mode == "unix":
    for i, a in enumerate(sys.argv[2:]):
        attempt(f"unix{i}", unix(a.replace("@", "\0", 1) if a.startswith("@") else a))
`;

let k;
let hits = []; // what the host listeners received
const servers = [];
let p4;
let p6;
let pu;
let udpServer;
let abstractName;
let pathSock;

function listen(server, ...args) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(...args, () => resolve(server.address()));
  });
}

before(async () => {
  k = await startKiln();
  requireSandboxTools(k);
  fs.writeFileSync(path.join(k.ws, 'netprobe.py'), PROBE);
  const mk = (label) => net.createServer((c) => { hits.push(label); c.on('data', () => {}); c.on('error', () => {}); c.end(); });
  const s4 = mk('tcp4');
  p4 = (await listen(s4, 0, '127.0.0.1')).port;
  const s6 = mk('tcp6');
  p6 = (await listen(s6, 0, '::1')).port;
  udpServer = dgram.createSocket('udp4');
  udpServer.on('message', (m, rinfo) => { hits.push('udp4'); udpServer.send('pong', rinfo.port, rinfo.address); });
  await new Promise((r) => udpServer.bind(0, '127.0.0.1', r));
  pu = udpServer.address().port;
  abstractName = `kilnsec-abstract-${rand()}`;
  const sa = mk('abstract');
  await listen(sa, `\0${abstractName}`);
  pathSock = path.join(tempDir('kiln-sec-sock-'), 'host.sock');
  const sp = mk('path');
  await listen(sp, pathSock);
  // The bait SSH agent socket named in the server's environment.
  const agent = mk('ssh-agent');
  await listen(agent, k.bait.env.SSH_AUTH_SOCK);
  servers.push(s4, s6, sa, sp, agent);
});
after(async () => {
  for (const s of servers) s.close();
  udpServer?.close();
  fs.rmSync(k?.bait.env.SSH_AUTH_SOCK ?? '/nonexistent', { force: true });
  await k?.close();
});

const lines = (text) => Object.fromEntries([...text.matchAll(/^(\w+) (CONNECTED|FAILED)(.*)$/gm)].map((m) => [m[1], `${m[2]}${m[3]}`]));

test('case 14: no egress with network none: TCP, UDP, DNS, ICMP, raw/packet sockets, IPv6, /dev/tcp', async () => {
  const r = await exec(k, 'python3 netprobe.py egress', { timeout_s: 120 });
  const got = lines(r.stdout);
  for (const n of ['tcp4_metadata', 'udp4_metadata', 'dns_metadata', 'icmp_metadata', 'raw_socket', 'packet_socket',
    'tcp6_metadata', 'udp6_metadata', 'dev_tcp']) {
    assert.ok(got[n], `probe line ${n} missing:\n${r.out}`);
    assert.match(got[n], /^FAILED/, `${n} got out: ${got[n]}\n${r.out}`);
  }
  const ifaces = (/^IFACES (.*)$/m.exec(r.stdout)?.[1] ?? '').split(/\s+/).filter(Boolean);
  assert.deepEqual(ifaces.filter((i) => i !== 'lo'), [], `network interfaces inside: ${ifaces}`);
  const if6 = (/^IF6 (.*)$/m.exec(r.stdout)?.[1] ?? '').split(/\s+/).filter(Boolean);
  assert.deepEqual(if6.filter((i) => i !== 'lo'), [], `IPv6 interfaces inside: ${if6}`);
});

test('case 15: the host\'s loopback services (127.0.0.1, ::1, UDP) and 169.254.169.254 are unreachable', async (t) => {
  // Control: the listeners answer on the host.
  await new Promise((resolve, reject) => { const c = net.connect(p4, '127.0.0.1', () => { c.end(); resolve(); }); c.on('error', reject); });
  await new Promise((resolve, reject) => { const c = net.connect(p6, '::1', () => { c.end(); resolve(); }); c.on('error', reject); });
  await new Promise((r) => setTimeout(r, 200));
  hits = [];
  for (const network of ['none', 'loopback']) {
    const meta = network === 'none';
    const r = await exec(k, `python3 netprobe.py loopback ${p4} ${p6} ${pu}${meta ? ' metadata' : ''}`, { network, timeout_s: 120 });
    const got = lines(r.stdout);
    for (const n of ['tcp4_host_loopback', 'tcp6_host_loopback', 'udp4_host_loopback', ...(meta ? ['tcp4_metadata'] : [])]) {
      assert.ok(got[n], `network ${network}: probe line ${n} missing:\n${r.out}`);
      assert.match(got[n], /^FAILED/, `network ${network}: ${n} reached the host: ${got[n]}`);
    }
  }
  await new Promise((r) => setTimeout(r, 300));
  assert.deepEqual(hits, [], `the host listeners were reached from inside: ${hits}`);
  // Control for the probe itself: with network "host" (asked for on purpose) the same probe does
  // reach the host's loopback listener, so the failures above are the sandbox's doing.
  const ctl = await k.call('sandbox_exec', { command: `python3 netprobe.py loopback ${p4} ${p6} ${pu}`, network: 'host', timeout_s: 120 });
  if (ctl.isError) {
    t.diagnostic(`network host refused, probe control not run: ${JSON.stringify(ctl.content)}`);
  } else {
    assert.match(lines(ctl.structuredContent.stdout).tcp4_host_loopback ?? '', /^CONNECTED/,
      `control: network host should reach the host listener: ${ctl.structuredContent.stdout}`);
  }
  hits = [];
});

test('case 16: host Unix sockets (abstract, pathname, ssh-agent) and /run are unreachable', async () => {
  const targets = [`@${abstractName}`, pathSock, k.bait.env.SSH_AUTH_SOCK, '/run/dbus/system_bus_socket',
    '/var/run/docker.sock', '/tmp/.X11-unix/X0'];
  hits = [];
  for (const network of ['none', 'loopback']) {
    const r = await exec(k, [
      `python3 netprobe.py unix ${targets.map((x) => `'${x}'`).join(' ')}`,
      'echo "RUN:$( (ls -A /run; ls -A /var/run) 2>/dev/null | tr \'\\n\' \' \')"',
      'echo "AGENT:${SSH_AUTH_SOCK:-unset}"', 'echo END',
    ].join('; '), { network, timeout_s: 120 });
    assert.match(r.stdout, /END/, r.out);
    const got = lines(r.stdout);
    targets.forEach((x, i) => {
      assert.ok(got[`unix${i}`], `probe line for ${x} missing:\n${r.out}`);
      assert.match(got[`unix${i}`], /^FAILED/, `network ${network}: connected to host socket ${x}`);
    });
    assert.match(r.stdout, /^RUN:\s*$/m, `network ${network}: /run is visible inside: ${r.stdout}`);
    assert.match(r.stdout, /^AGENT:unset$/m, 'SSH_AUTH_SOCK passed into the sandbox');
  }
  await new Promise((r) => setTimeout(r, 300));
  assert.deepEqual(hits, [], `host Unix sockets were reached from inside: ${hits}`);
});

// Issue 18: a network allowlist keeps every direct path closed, and the proxy refuses the host's
// own loopback and the metadata address however they are named; the relay cannot be replaced.
test('allowlist: direct egress still fails, the proxy refuses host loopback and metadata, the relay cannot be taken over', async () => {
  const hosts = path.join(tempDir('kiln-sec-hosts-'), 'hosts');
  fs.writeFileSync(hosts, `127.0.0.1 hostlo.test\n169.254.169.254 meta.test\n::ffff:127.0.0.1 mapped.test\n`);
  const e = await startKiln({ env: { KILN_EGRESS_HOSTS: hosts } });
  try {
    fs.writeFileSync(path.join(e.ws, 'netprobe.py'), PROBE);
    const before = hits.length;
    const network = { allow: ['*:*', '127.0.0.1:*'] };
    const r = await exec(e, 'python3 netprobe.py egress', { timeout_s: 120, network });
    const got = lines(r.stdout);
    for (const n of ['tcp4_metadata', 'udp4_metadata', 'dns_metadata', 'icmp_metadata', 'raw_socket', 'packet_socket',
      'tcp6_metadata', 'udp6_metadata', 'dev_tcp']) {
      assert.ok(got[n], `probe line ${n} missing:\n${r.out}`);
      assert.match(got[n], /^FAILED/, `${n} got out: ${got[n]}\n${r.out}`);
    }
    const via = await exec(e, [
      `curl -s --noproxy '' http://127.0.0.1:${p4}/; echo`,
      `curl -s http://hostlo.test:${p4}/; echo`,
      `curl -s http://mapped.test:${p4}/; echo`,
      `curl -s http://meta.test/latest/meta-data/; echo`,
      `curl -s --noproxy '' http://169.254.169.254/; echo`,
    ].join('; '), { network });
    assert.match(via.stdout, /127\.0\.0\.1 is loopback/);
    assert.match(via.stdout, /hostlo\.test resolves to 127\.0\.0\.1, loopback/);
    assert.match(via.stdout, /mapped\.test resolves to ::ffff:127\.0\.0\.1, loopback/);
    assert.match(via.stdout, /meta\.test resolves to 169\.254\.169\.254, a cloud metadata address/);
    assert.match(via.stdout, /169\.254\.169\.254:80: an IP address is refused unless an allow entry lists it/);
    // Even allow_private does not open the metadata address to a name.
    const meta = await exec(e, 'curl -s http://meta.test/; echo', { network: { allow: ['*'], allow_private: true } });
    assert.match(meta.stdout, /a cloud metadata address/);
    // The relay: its port cannot be bound by the command, pid 1's descriptors cannot be read, and
    // there is no socket file anywhere in the sandbox to reach Kiln by.
    const relay = await exec(e, [
      `python3 -c "import os,socket; s=socket.socket(); p=int(os.environ['HTTP_PROXY'].rsplit(':',1)[1]); s.bind(('127.0.0.1',p)); print('BOUND')" 2>&1 | tail -1`,
      `python3 -c "import os,glob
n=0
for f in glob.glob('/proc/1/fd/*'):
    try:
        os.open(f, os.O_RDONLY); n+=1
    except OSError: pass
print('OPENED', n)"`,
      'find / -xdev -type s 2>/dev/null | head -3; echo END',
    ].join('; '), { network });
    assert.doesNotMatch(relay.stdout, /BOUND/);
    assert.match(relay.stdout, /Address already in use/);
    assert.match(relay.stdout, /^OPENED 0$/m);
    assert.match(relay.stdout, /^END$/m);
    assert.equal(relay.stdout.split('\n').filter((l) => l.startsWith('/')).length, 0, relay.stdout);
    assert.equal(hits.length, before, `host listeners were reached: ${hits.slice(before)}`);
  } finally {
    await e.close();
  }
});

// The relayed-CONNECT and smuggling bypasses reported against other proxies: a second request
// pipelined behind an allowed one, a CONNECT sent inside an approved tunnel, and a head too large
// to parse. Each stays on the connection's first approved destination or is refused.
test('allowlist: one proxy connection cannot be steered elsewhere (pipelining, CONNECT in a tunnel, huge heads)', async () => {
  const seen = [];
  const up = http.createServer((req, res) => { seen.push(req.url); res.end('up\n'); });
  up.on('connect', (req, sock) => { seen.push(`CONNECT ${req.url}`); sock.end('HTTP/1.1 405 No\r\n\r\n'); });
  const upPort = (await listen(up, 0, '127.0.0.2')).port;
  const hosts = path.join(tempDir('kiln-sec-hosts-'), 'hosts');
  fs.writeFileSync(hosts, '127.0.0.2 up.test\n127.0.0.1 hostlo.test\n');
  const e = await startKiln({ env: { KILN_EGRESS_HOSTS: hosts } });
  try {
    const script = String.raw`
import os, socket, sys
host, port = os.environ['HTTP_PROXY'][len('http://'):].rsplit(':', 1)
def talk(payload):
    s = socket.create_connection((host, int(port)))
    s.settimeout(5)
    s.sendall(payload)
    data = b''
    try:
        while True:
            d = s.recv(65536)
            if not d: break
            data += d
    except OSError:
        pass
    s.close()
    return data.decode(errors='replace').replace('\r', '')
UP, P4 = sys.argv[1], sys.argv[2]
print('PIPELINED', talk(f'GET http://up.test:{UP}/first HTTP/1.1\r\nHost: up.test:{UP}\r\n\r\nGET http://hostlo.test:{P4}/steal HTTP/1.1\r\nHost: hostlo.test:{P4}\r\n\r\n'.encode()).split('\n')[0])
print('NESTED', talk(f'CONNECT up.test:{UP} HTTP/1.1\r\nHost: up.test:{UP}\r\n\r\nCONNECT hostlo.test:{P4} HTTP/1.1\r\nHost: hostlo.test:{P4}\r\n\r\n'.encode()).split('\n')[0])
print('HUGE', talk(f'GET http://up.test:{UP}/big HTTP/1.1\r\nHost: up.test:{UP}\r\nX-Pad: {"a" * 40000}\r\n\r\n'.encode()).split('\n')[0])
print('DIRECT', talk(f'GET http://hostlo.test:{P4}/ HTTP/1.1\r\nHost: hostlo.test:{P4}\r\n\r\n'.encode()).split('\n')[0])
`;
    fs.writeFileSync(path.join(e.ws, 'steer.py'), script);
    const before = hits.length;
    const r = await exec(e, `python3 steer.py ${upPort} ${p4}`, { network: { allow: [`up.test:${upPort}`], allow_private: true } });
    assert.match(r.stdout, /^PIPELINED HTTP\/1\.1 200/m, r.out);
    assert.match(r.stdout, /^NESTED HTTP\/1\.1 200/m, r.out);
    assert.match(r.stdout, /^HUGE HTTP\/1\.1 431/m, r.out);
    assert.match(r.stdout, /^DIRECT HTTP\/1\.1 403/m, r.out);
    assert.equal(hits.length, before, `the host listener was reached: ${hits.slice(before)}`);
    assert.ok(seen.includes('/first'), JSON.stringify(seen));
    assert.ok(!seen.includes('/big'), 'the oversized head was not forwarded');
    // Whatever followed the first request went to up.test, the connection's approved destination.
    assert.ok(seen.every((u) => u === '/first' || u.includes('hostlo.test')), JSON.stringify(seen));
  } finally {
    up.close();
    await e.close();
  }
});
