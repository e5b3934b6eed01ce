// kiln.json app.network (docs/network.md, "Apps and schedules"): a published app's request handler
// and its schedules reach an upstream its allowlist names through Kiln's proxy, an unlisted one
// gets the proxy's 403 and never sees the request, the decisions land in the app's and the
// schedule's traces, app_status reports the network, and kiln serve --network-allow narrows it.
// The upstreams are local HTTP servers named through KILN_EGRESS_HOSTS (so allow_private: true).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, test } from 'node:test';

import { publishApp, startAppKiln, waitForState } from '../lib/apps.mjs';
import { request, stopProcess, waitForServeInfo } from '../lib/http.mjs';
import { connectClient, kilnBin, kilnEnv, tempDir } from '../lib/kiln.mjs';
import { probeSandbox } from '../lib/sandbox_probe.mjs';

const dir = tempDir('kiln-appnet-up-');
const hostsFile = path.join(dir, 'hosts');
fs.writeFileSync(hostsFile, '127.0.0.1 up.test other.test\n');

// Two upstreams, so "nothing reached the unlisted one" is a count of its own.
const hits = { up: [], other: [] };
const upstream = (which) => http.createServer((req, res) => {
  hits[which].push(req.url);
  res.end(`hello from ${which} ${req.headers.host} ${req.url}\n`);
});
const up = upstream('up');
const other = upstream('other');
await new Promise((r) => up.listen(0, '127.0.0.1', r));
await new Promise((r) => other.listen(0, '127.0.0.1', r));
const UP = up.address().port;
const OTHER = other.address().port;
after(() => { up.close(); other.close(); });

// The app: /fetch?url=U asks Kiln's proxy ($HTTP_PROXY) for U in absolute form, as any HTTP
// client honouring the proxy variables does, and answers the upstream's status and body.
const SERVER = `
const http = require('node:http');
http.createServer((req, res) => {
  const u = new URL(req.url, 'http://x');
  if (u.pathname === '/health') return res.end('ok');
  if (u.pathname === '/env') return res.end(JSON.stringify({ proxy: process.env.HTTP_PROXY || null, no_proxy: process.env.NO_PROXY || null }));
  if (u.pathname !== '/fetch') { res.statusCode = 404; return res.end(); }
  const target = u.searchParams.get('url');
  const proxy = new URL(process.env.HTTP_PROXY);
  const out = http.request({ host: proxy.hostname, port: proxy.port, path: target, headers: { host: new URL(target).host } }, (r) => {
    let body = '';
    r.on('data', (c) => { body += c; });
    r.on('end', () => res.end(JSON.stringify({ status: r.statusCode, body })));
  });
  out.on('error', (e) => res.end(JSON.stringify({ error: String(e) })));
  out.end();
}).listen(Number(process.env.PORT), '127.0.0.1');
`;

const SCHEDULE = [
  `curl -s -o /dev/null -w 'up %{http_code}\\n' http://up.test:${UP}/from-schedule`,
  `curl -s http://other.test:${OTHER}/from-schedule`,
].join('; ');

function workspace(network) {
  const ws = path.join(tempDir('kiln-appnet-ws-'), 'ws');
  fs.mkdirSync(ws, { recursive: true });
  fs.chmodSync(path.dirname(ws), 0o755);
  fs.chmodSync(ws, 0o755);
  fs.writeFileSync(path.join(ws, 'server.js'), SERVER);
  fs.writeFileSync(path.join(ws, 'kiln.json'), JSON.stringify({
    app: { run: 'node server.js', ready: '/health', idle_s: 0, network, schedules: [{ name: 'fetch', cron: '0 0 1 1 *', run: SCHEDULE }] },
  }, null, 2));
  return ws;
}

let sandboxTest;
{
  const s = await connectClient({ args: ['--workspace', workspace('none')] });
  ({ test: sandboxTest } = await probeSandbox('app network e2e', (name, args) => s.client.callTool({ name, arguments: args })));
  await s.close();
}

async function fetchVia(pub, url) {
  const r = await request(pub.base, `${pub.prefix}fetch?url=${encodeURIComponent(url)}`);
  assert.equal(r.status, 200, r.text);
  return JSON.parse(r.text);
}

async function networkLog(k, traceId) {
  const t = await k.ok('trace_get', { trace_id: traceId });
  return (t.trace ?? t).network_log ?? [];
}

sandboxTest('an app and its schedule reach what app.network allows, and only that', async (t) => {
  const k = await startAppKiln({ ws: workspace({ allow: [`up.test:${UP}`], allow_private: true }), env: { KILN_EGRESS_HOSTS: hostsFile } });
  t.after(() => k.stop());
  const pub = await publishApp(k, { name: 'netapp' });
  assert.equal(pub.app?.state, 'running', JSON.stringify(pub.app));

  const status = await k.ok('app_status', { artifact: 'netapp' });
  assert.equal(status.network?.mode, 'allowlist', JSON.stringify(status.network));
  assert.deepEqual(status.network.allow, [`up.test:${UP}`]);
  assert.equal(status.network.allow_private, true);

  // The app's own port still forwards (the request got here), and the proxy is in its environment.
  const env = JSON.parse((await request(pub.base, `${pub.prefix}env`)).text);
  assert.match(env.proxy ?? '', /^http:\/\/127\.0\.0\.1:\d+$/);
  assert.match(env.no_proxy ?? '', /127\.0\.0\.1/);

  const before = { up: hits.up.length, other: hits.other.length };
  const ok = await fetchVia(pub, `http://up.test:${UP}/from-app`);
  assert.equal(ok.status, 200, JSON.stringify(ok));
  assert.match(ok.body, new RegExp(`hello from up up.test:${UP} /from-app`));
  const refused = await fetchVia(pub, `http://other.test:${OTHER}/from-app`);
  assert.equal(refused.status, 403, JSON.stringify(refused));
  assert.match(refused.body, /refused other\.test:\d+: no allow entry matches/);
  assert.deepEqual(hits.up.slice(before.up), ['/from-app']);
  assert.equal(hits.other.length, before.other, 'nothing reached the unlisted upstream');

  const run = await k.ok('schedule_run', { artifact: 'netapp', name: 'fetch' });
  assert.equal(run.status, 'pass', JSON.stringify(run));
  assert.match(run.stdout_tail, /up 200/);
  assert.match(run.stdout_tail, /refused other\.test:\d+: no allow entry matches/);
  assert.deepEqual(hits.up.slice(before.up), ['/from-app', '/from-schedule']);
  assert.equal(hits.other.length, before.other, 'nothing reached the unlisted upstream');
  const slog = await networkLog(k, run.trace_id);
  assert.deepEqual(slog.map((e) => `${e.host} ${e.decision}`), ['up.test allowed', 'other.test denied'], JSON.stringify(slog));
  const strace = await k.ok('trace_get', { trace_id: run.trace_id });
  assert.equal((strace.trace ?? strace).policy?.network?.mode, 'allowlist');

  // The web process's decisions are in the app's trace once that process ends (here: a restart).
  const webTrace = status.trace_id;
  assert.ok(webTrace, JSON.stringify(status));
  await k.ok('app_restart', { artifact: 'netapp' });
  await waitForState(k, 'netapp');
  let wlog = [];
  for (let i = 0; i < 50 && wlog.length < 2; i++) {
    wlog = await networkLog(k, webTrace);
    if (wlog.length < 2) await new Promise((r) => setTimeout(r, 100));
  }
  assert.deepEqual(wlog.map((e) => `${e.host} ${e.decision}`), ['up.test allowed', 'other.test denied'], JSON.stringify(wlog));
  assert.ok(wlog[0].bytes_down > 0, JSON.stringify(wlog[0]));
});

sandboxTest('an app with network none gets no proxy and reaches nothing', async (t) => {
  const k = await startAppKiln({ ws: workspace(undefined), env: { KILN_EGRESS_HOSTS: hostsFile } });
  t.after(() => k.stop());
  const pub = await publishApp(k, { name: 'offline' });
  const env = JSON.parse((await request(pub.base, `${pub.prefix}env`)).text);
  assert.equal(env.proxy, null);
  assert.equal((await k.ok('app_status', { artifact: 'offline' })).network?.mode, 'none');
  const before = hits.up.length;
  const run = await k.ok('schedule_run', { artifact: 'offline', name: 'fetch' });
  assert.match(run.stdout_tail, /up 000/);
  assert.equal(hits.up.length, before);
});

sandboxTest('kiln serve --network-allow narrows an app that asks for more', async (t) => {
  const home = tempDir('kiln-appnet-home-');
  const ceiling = path.join(dir, 'ceiling.json');
  fs.writeFileSync(ceiling, JSON.stringify({ allow: [`up.test:${UP}`], allow_private: true }));
  // This kiln serve is the state directory's server: the session's publish finds it running.
  const serve = spawn(kilnBin(), ['serve', '--state-dir', home, '--listen', '127.0.0.1:0', '--network-allow', ceiling],
    { env: kilnEnv(home, { KILN_EGRESS_HOSTS: hostsFile }), stdio: ['ignore', 'ignore', 'pipe'] });
  let serveErr = '';
  serve.stderr.on('data', (c) => { serveErr += c; });
  t.after(() => stopProcess(serve.pid));
  await waitForServeInfo(home, { pid: serve.pid, timeoutMs: 15000 });

  const k = await startAppKiln({ ws: workspace({ allow: [`up.test:${UP}`, `other.test:${OTHER}`], allow_private: true }), home });
  t.after(() => k.stop());
  const pub = await publishApp(k, { name: 'narrowed' });
  assert.equal(pub.app?.state, 'running', JSON.stringify(pub.app) + serveErr.slice(-2000));
  const status = await k.ok('app_status', { artifact: 'narrowed' });
  assert.deepEqual(status.network?.ceiling?.allow, [`up.test:${UP}`], JSON.stringify(status.network));

  const before = { up: hits.up.length, other: hits.other.length };
  assert.equal((await fetchVia(pub, `http://up.test:${UP}/narrow`)).status, 200);
  const refused = await fetchVia(pub, `http://other.test:${OTHER}/narrow`);
  assert.equal(refused.status, 403, JSON.stringify(refused));
  assert.match(refused.body, /ceiling/);
  const run = await k.ok('schedule_run', { artifact: 'narrowed', name: 'fetch' });
  assert.match(run.stdout_tail, /up 200/);
  assert.match(run.stdout_tail, /ceiling/);
  assert.equal(hits.up.length - before.up, 2);
  assert.equal(hits.other.length, before.other, 'nothing passed the ceiling');
});

// The gap a red team would go for: a session under --network-allow publishes an app that asks for
// more, and the kiln serve that runs it has no ceiling of its own. The session's ceiling is kept
// with the version, so the app stays inside it.
sandboxTest("an app published by a session under --network-allow keeps that session's ceiling", async (t) => {
  const ceiling = path.join(dir, 'session-ceiling.json');
  fs.writeFileSync(ceiling, JSON.stringify({ allow: [`up.test:${UP}`], allow_private: true }));
  const k = await startAppKiln({
    ws: workspace({ allow: [`up.test:${UP}`, `other.test:${OTHER}`], allow_private: true }),
    args: ['--network-allow', ceiling], env: { KILN_EGRESS_HOSTS: hostsFile },
  });
  t.after(() => k.stop());
  const pub = await publishApp(k, { name: 'inherits' });
  assert.equal(pub.app?.state, 'running', JSON.stringify(pub.app));
  const status = await k.ok('app_status', { artifact: 'inherits' });
  assert.deepEqual(status.network?.publisher_ceiling?.allow, [`up.test:${UP}`], JSON.stringify(status.network));
  const before = { up: hits.up.length, other: hits.other.length };
  assert.equal((await fetchVia(pub, `http://up.test:${UP}/inherit`)).status, 200);
  const refused = await fetchVia(pub, `http://other.test:${OTHER}/inherit`);
  assert.equal(refused.status, 403, JSON.stringify(refused));
  assert.match(refused.body, /the ceiling of the session that published the app/);
  const run = await k.ok('schedule_run', { artifact: 'inherits', name: 'fetch' });
  assert.match(run.stdout_tail, /up 200/);
  assert.match(run.stdout_tail, /the ceiling of the session that published the app/);
  assert.equal(hits.up.length - before.up, 2);
  assert.equal(hits.other.length, before.other, 'nothing passed the session ceiling');
});

test('publish refuses app.network host and a bad entry, naming the field', async (t) => {
  for (const [network, want] of [['host', /\/app\/network: network "host" is refused for an app/],
    [{ allow: ['exa mple.com'] }, /\/app\/network\/allow\/0: "exa mple\.com" is not a host name/]]) {
    const k = await startAppKiln({ ws: workspace(network) });
    t.after(() => k.stop());
    const r = await k.call('publish', { path: '.', name: 'bad', app: true });
    assert.equal(r.isError, true);
    assert.match(r.content.map((c) => c.text).join('\n'), want);
  }
});
