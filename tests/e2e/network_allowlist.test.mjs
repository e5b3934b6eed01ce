// The network allowlist through MCP (TOOLS.md "Network allowlist"): a sandbox whose network is an
// allowlist reaches local HTTP and HTTPS upstreams (names mapped by KILN_EGRESS_HOSTS) through
// Kiln's proxy only; denied, unlisted, IP-literal and private destinations get a 403 naming the
// rule, direct connections fail, and every decision is in the run's trace as network_log.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { after, test } from 'node:test';

import { connectClient, structured, tempDir } from '../lib/kiln.mjs';
import { probeSandbox } from '../lib/sandbox_probe.mjs';

const ws = tempDir('kiln-egress-ws-');
const dir = tempDir('kiln-egress-up-');
const hostsFile = path.join(dir, 'hosts');
fs.writeFileSync(hostsFile, '127.0.0.1 up.test other.test\n127.0.0.2 private.test\n');

// A self-signed certificate for up.test (and a name the client will claim instead).
execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=up.test',
  '-addext', 'subjectAltName=DNS:up.test,DNS:other.test', '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem')],
{ stdio: 'ignore' });
fs.copyFileSync(path.join(dir, 'cert.pem'), path.join(ws, 'ca.pem'));

let hits = 0;
const handler = (req, res) => { hits++; res.end(`hello from ${req.headers.host} ${req.url}\n`); };
const plain = http.createServer(handler);
const tls = https.createServer({ key: fs.readFileSync(path.join(dir, 'key.pem')), cert: fs.readFileSync(path.join(dir, 'cert.pem')) }, handler);
await new Promise((r) => plain.listen(0, '127.0.0.1', r));
await new Promise((r) => tls.listen(0, '127.0.0.1', r));
const HP = plain.address().port;
const TP = tls.address().port;

const s = await connectClient({ env: { KILN_EGRESS_HOSTS: hostsFile } });
after(async () => { await s.close(); plain.close(); tls.close(); });
structured(await s.client.callTool({ name: 'workspace_open', arguments: { path: ws } }));
const call = (name, args) => s.client.callTool({ name, arguments: args }, undefined, { timeout: 60000 });
const exec = async (args) => structured(await call('sandbox_exec', args));
const { test: sandboxTest } = await probeSandbox('network allowlist e2e', call);

const network = { allow: [`up.test:${HP}`, `up.test:${TP}`, `other.test:${TP}`], deny: ['other.test'], allow_private: true };

async function traceOf(r) {
  const t = structured(await call('trace_get', { trace_id: r.trace_id }));
  return t.trace ?? t;
}

sandboxTest('an allowed name works over HTTP and HTTPS, and the trace logs it with bytes', async () => {
  const before = hits;
  const r = await exec({ command: `curl -sS http://up.test:${HP}/a && curl -sS --cacert ca.pem https://up.test:${TP}/b`, network });
  assert.equal(r.exit_code, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`hello from up.test:${HP} /a`));
  assert.match(r.stdout, new RegExp(`hello from up.test:${TP} /b`));
  assert.equal(hits - before, 2);
  assert.equal(r.isolation.egress.allow_private, true);
  const t = await traceOf(r);
  const log = t.network_log;
  assert.ok(Array.isArray(log), JSON.stringify(t).slice(0, 500));
  assert.equal(log.length, 2);
  for (const e of log) {
    assert.equal(e.decision, 'allowed');
    assert.equal(e.host, 'up.test');
    assert.ok(e.bytes_up > 0 && e.bytes_down > 0, JSON.stringify(e));
    assert.ok(e.at);
  }
  assert.deepEqual(log.map((e) => e.kind).sort(), ['connect', 'http']);
});

sandboxTest('denied, unlisted, IP literal and private destinations get 403 naming the rule', async () => {
  const before = hits;
  const r = await exec({
    command: [
      `curl -s http://other.test:${HP}/; echo`,
      'curl -s http://unlisted.test/; echo',
      'curl -s http://203.0.113.7/; echo',
      `curl -s -o /dev/null -w '%{http_code}\\n' http://private.test:${HP}/`,
    ].join('; '),
    network: { allow: [`up.test:${HP}`, `private.test:${HP}`, 'other.test:*'], deny: ['other.test'] },
  });
  assert.equal(hits, before, 'no request reached the upstream');
  assert.match(r.stdout, /refused other\.test:\d+: deny other\.test/);
  assert.match(r.stdout, /refused unlisted\.test:80: no allow entry matches/);
  assert.match(r.stdout, /To allow it, add "unlisted.test"/);
  assert.match(r.stdout, /refused 203\.0\.113\.7:80: an IP address is refused unless an allow entry lists it/);
  assert.match(r.stdout, /403/);
  const log = (await traceOf(r)).network_log;
  assert.equal(log.length, 4);
  assert.ok(log.every((e) => e.decision === 'denied'), JSON.stringify(log));
  assert.match(log[3].reason, /private\.test resolves to 127\.0\.0\.2, loopback/);
});

sandboxTest('a TLS server name other than the CONNECT host is refused', async () => {
  const before = hits;
  // curl --connect-to keeps SNI other.test while the proxy is asked for up.test.
  const r = await exec({
    command: `curl -sS --cacert ca.pem --proxy "$HTTPS_PROXY" --connect-to other.test:${TP}:up.test:${TP} https://other.test:${TP}/`,
    network: { allow: [`up.test:${TP}`, `other.test:${TP}`], allow_private: true },
  });
  assert.notEqual(r.exit_code, 0);
  assert.equal(hits, before);
  const log = (await traceOf(r)).network_log;
  assert.equal(log.length, 1, JSON.stringify(log));
  assert.equal(log[0].decision, 'denied');
  assert.match(log[0].reason, /TLS server name other\.test differs from the CONNECT host up\.test/);
});

sandboxTest('nothing leaves directly: --noproxy, raw TCP and UDP fail', async () => {
  const before = hits;
  const r = await exec({
    command: [
      `curl -sS --max-time 5 --noproxy '*' http://127.0.0.1:${HP}/ && echo LEAK1`,
      `(exec 3<>/dev/tcp/10.255.255.53/53) 2>/dev/null && echo LEAK2`,
      `(echo x > /dev/udp/10.255.255.53/53) 2>/dev/null && echo LEAK3`,
      `getent hosts example.org && echo LEAK4`,
      'echo done',
    ].join('; '),
    network: { allow: [`up.test:${HP}`], allow_private: true },
  });
  assert.equal(hits, before);
  assert.doesNotMatch(r.stdout, /LEAK/);
  assert.match(r.stdout, /done/);
});

test('bad allowlists are refused with the field named', async () => {
  const r = await call('sandbox_exec', { command: 'true', network: { allow: ['exa mple.com'] } });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /network\.allow\[0\]/);
});

sandboxTest('the server ceiling (--network-allow) narrows a request and refuses network host', async () => {
  const ceiling = path.join(dir, 'ceiling.json');
  fs.writeFileSync(ceiling, JSON.stringify({ allow: [`up.test:${HP}`], allow_private: true }));
  const c = await connectClient({ args: ['--network-allow', ceiling], env: { KILN_EGRESS_HOSTS: hostsFile } });
  try {
    structured(await c.client.callTool({ name: 'workspace_open', arguments: { path: ws } }));
    const cc = (args) => c.client.callTool({ name: 'sandbox_exec', arguments: args }, undefined, { timeout: 60000 });
    const before = hits;
    const r = structured(await cc({
      command: `curl -sS http://up.test:${HP}/in; echo; curl -s http://other.test:${HP}/out`,
      network: { allow: ['*:*'], allow_private: true },
    }));
    assert.match(r.stdout, /hello from up\.test:\d+ \/in/);
    assert.match(r.stdout, /the server's ceiling \(--network-allow\): no allow entry matches/);
    assert.equal(hits - before, 1);
    const h = await cc({ command: 'true', network: 'host' });
    assert.equal(h.isError, true);
    assert.match(h.content[0].text, /--network-allow/);
  } finally {
    await c.close();
  }
});

sandboxTest('200 concurrent connections through one sandbox all get through', async () => {
  const before = hits;
  const r = await exec({
    command: `for i in $(seq 200); do curl -s -o /dev/null -w '%{http_code}\\n' http://up.test:${HP}/c$i & done; wait`,
    network: { allow: [`up.test:${HP}`], allow_private: true },
    timeout_s: 120,
  });
  const codes = r.stdout.trim().split('\n');
  assert.equal(codes.length, 200);
  assert.ok(codes.every((c) => c === '200'), r.stdout.slice(0, 400));
  assert.equal(hits - before, 200);
  const t = await traceOf(r);
  assert.equal(t.network_log.length, 200);
  assert.equal(t.result.network.allowed, 200);
});
