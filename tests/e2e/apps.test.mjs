// Apps (issue 17, TOOLS.md "Apps"): publish {app: true} through the MCP SDK, then plain HTTP at
// the app's URL. The lifecycle: the app's data survives a new version and a restart of kiln serve;
// it sleeps when idle and a request wakes it; a crash loop answers 502 and backs off; schedules
// run by schedule_run and by their cron (catching up once after downtime, never overlapping); and
// unpublish stops it but keeps its data unless asked. Needs the sandbox (skipped with the reason
// when it cannot run here, failed under KILN_REQUIRE_SANDBOX=1).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

import { request, stopServeOf } from '../lib/http.mjs';
import { errorText, kilnBin, kilnEnv, sleep, structured, tempDir } from '../lib/kiln.mjs';
import { probeSandbox } from '../lib/sandbox_probe.mjs';

// A tiny app: GET / says who and which version; POST /count adds one to a file in KILN_DATA_DIR
// and answers the total; /env shows what it was given; /crash exits.
const SERVER = `
const http = require('node:http');
const fs = require('node:fs');
const path = require('node:path');
const data = process.env.KILN_DATA_DIR;
const counter = path.join(data, 'count');
const version = fs.readFileSync(path.join(__dirname, 'version.txt'), 'utf8').trim();
http.createServer((req, res) => {
  if (req.url === '/count' && req.method === 'POST') {
    const n = (fs.existsSync(counter) ? Number(fs.readFileSync(counter, 'utf8')) : 0) + 1;
    fs.writeFileSync(counter, String(n));
    res.end(String(n));
  } else if (req.url === '/env') {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ PORT: process.env.PORT, KILN_BASE_PATH: process.env.KILN_BASE_PATH,
      KILN_DATA_DIR: data, user: req.headers['x-kiln-user'] }));
  } else if (req.url === '/crash') {
    res.end('bye');
    setTimeout(() => process.exit(3), 10);
  } else {
    res.end('version ' + version + ' for ' + req.headers['x-kiln-user'] + ' at ' + req.url);
  }
}).listen(Number(process.env.PORT), '127.0.0.1');
`;

function makeWs(files) {
  const ws = tempDir('kiln-app-ws-');
  fs.chmodSync(ws, 0o755);
  for (const [rel, content] of Object.entries(files)) {
    const p = path.join(ws, rel);
    fs.mkdirSync(path.dirname(p), { recursive: true });
    fs.writeFileSync(p, typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  }
  return ws;
}

function appWs(app = {}, extra = {}) {
  return makeWs({
    'kiln.json': { app: { run: 'node server.js', idle_s: 0, ...app } },
    'server.js': SERVER,
    'version.txt': '1',
    ...extra,
  });
}

async function startKiln(t, { ws, state } = {}) {
  state ??= tempDir('kiln-app-state-');
  const transport = new StdioClientTransport({
    command: kilnBin(), args: ['mcp', '--workspace', ws, '--state-dir', state],
    env: kilnEnv(state, { KILN_SERVE_LISTEN: '127.0.0.1:0' }), stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (c) => { stderr += c.toString(); });
  const client = new Client({ name: 'kiln-apps-e2e', version: '1.0.0' }, { capabilities: {} });
  await client.connect(transport);
  const k = {
    client, ws, state,
    get stderr() { return stderr; },
    call: (name, args) => client.callTool({ name, arguments: args }, undefined, { timeout: 180000 }),
    async ok(name, args) {
      const r = await k.call(name, args);
      assert.ok(!r.isError, `${name} failed: ${errorText(r)}\n${stderr.slice(-2000)}`);
      return structured(r);
    },
    serveLog() {
      try { return fs.readFileSync(path.join(state, 'serve.log'), 'utf8').slice(-3000); } catch { return ''; }
    },
    stopServe: () => stopServeOf(state),
  };
  t.after(async () => {
    await client.close().catch(() => {});
    await k.stopServe();
  });
  return k;
}

// Polls app_status until `pred` holds (or fails after `ms`).
async function waitStatus(k, artifact, pred, ms = 60000) {
  const deadline = Date.now() + ms;
  let last;
  while (Date.now() < deadline) {
    last = await k.ok('app_status', { artifact });
    if (pred(last)) return last;
    await sleep(250);
  }
  assert.fail(`app_status of ${artifact} never matched; last: ${JSON.stringify(last)}\n${k.serveLog()}`);
}

let sandboxTest, sandboxWhy;
{
  const ws = appWs();
  const state = tempDir('kiln-app-probe-');
  const transport = new StdioClientTransport({ command: kilnBin(), args: ['mcp', '--workspace', ws], env: kilnEnv(state) });
  const client = new Client({ name: 'probe', version: '1' }, { capabilities: {} });
  await client.connect(transport);
  ({ test: sandboxTest, why: sandboxWhy } = await probeSandbox('apps e2e', (name, args) => client.callTool({ name, arguments: args })));
  await client.close();
}

// The per-minute schedule waits for the next whole minute: it is published before the other
// tests run, so that wait overlaps them, and checked by the last test.
const haveSqlite = spawnSync('sqlite3', ['-version']).status === 0;
let ticker;
if (!sandboxWhy && haveSqlite) {
  const cleanups = [];
  after(async () => { for (const c of cleanups) await c(); });
  const ws = appWs({ idle_s: 1, schedules: [{ name: 'tick', cron: '* * * * *', run: 'date +%s >> "$KILN_DATA_DIR/ticks"' }] });
  ticker = startKiln({ after: (c) => cleanups.push(c) }, { ws }).then(async (k) => {
    await k.ok('publish', { path: '.', name: 'ticker', app: true });
    return k;
  });
  ticker.catch(() => {});  // reported by the test that awaits it
}

sandboxTest('publish app:true runs the app behind its URL with PORT, KILN_BASE_PATH and KILN_DATA_DIR', async (t) => {
  const k = await startKiln(t, { ws: appWs() });
  const pub = await k.ok('publish', { path: '.', name: 'hello', app: true });
  assert.equal(pub.app?.state, 'running', JSON.stringify(pub.app) + k.serveLog());
  const base = pub.url.replace(/\/a\/hello\/$/, '');
  const home = await request(base, '/a/hello/some/page?x=1');
  assert.equal(home.status, 200, home.text);
  assert.equal(home.text, 'version 1 for public at /some/page?x=1');
  const env = JSON.parse((await request(base, '/a/hello/env')).text);
  assert.equal(env.KILN_BASE_PATH, '/a/hello/');
  assert.equal(env.KILN_DATA_DIR, '/var/lib/kiln/data');
  assert.match(env.PORT, /^\d+$/);
  const status = await k.ok('app_status', { artifact: 'hello' });
  assert.equal(status.state, 'running');
  assert.equal(status.version, 1);
  assert.equal(status.url, pub.url);
  const list = await k.ok('publish_list', {});
  const entry = list.artifacts.find((a) => a.name === 'hello');
  assert.equal(entry?.app?.state, 'running', JSON.stringify(entry));
  const traces = await k.ok('trace_list', { kind: 'app' });
  assert.ok(traces.traces.length >= 1, 'the app start is a trace of kind app');
});

sandboxTest('a new version runs on the new files with the same data; kiln serve restarts bring it back', async (t) => {
  const k = await startKiln(t, { ws: appWs() });
  const pub = await k.ok('publish', { path: '.', name: 'counter', app: true });
  const base = pub.url.replace(/\/a\/counter\/$/, '');
  assert.equal((await request(base, '/a/counter/count', { method: 'POST' })).text, '1');
  assert.equal((await request(base, '/a/counter/count', { method: 'POST' })).text, '2');
  fs.writeFileSync(path.join(k.ws, 'version.txt'), '2');
  const v2 = await k.ok('publish', { path: '.', name: 'counter', app: true });
  assert.equal(v2.version, 2);
  assert.match((await request(base, '/a/counter/')).text, /^version 2 /);
  assert.equal((await request(base, '/a/counter/count', { method: 'POST' })).text, '3');
  // The app's files are the published copy: changing the workspace changes nothing.
  fs.writeFileSync(path.join(k.ws, 'version.txt'), '3');
  assert.match((await request(base, '/a/counter/')).text, /^version 2 /);

  await k.stopServe();
  const again = await waitStatus(k, 'counter', (s) => s.state === 'running');
  assert.equal(again.version, 2);
  const base2 = again.url.replace(/\/a\/counter\/$/, '');
  assert.equal((await request(base2, '/a/counter/count', { method: 'POST' })).text, '4', k.serveLog());
});

sandboxTest('an idle app sleeps and the next request wakes it with its data', async (t) => {
  const k = await startKiln(t, { ws: appWs({ idle_s: 2 }) });
  const pub = await k.ok('publish', { path: '.', name: 'sleepy', app: true });
  const base = pub.url.replace(/\/a\/sleepy\/$/, '');
  assert.equal((await request(base, '/a/sleepy/count', { method: 'POST' })).text, '1');
  await waitStatus(k, 'sleepy', (s) => s.state === 'sleeping', 30000);
  const woke = await request(base, '/a/sleepy/count', { method: 'POST' });
  assert.equal(woke.status, 200, woke.text);
  assert.equal(woke.text, '2');
  assert.equal((await k.ok('app_status', { artifact: 'sleepy' })).state, 'running');
});

sandboxTest('a crashing app answers 502 and is restarted with backoff, not in a busy loop', async (t) => {
  const k = await startKiln(t, { ws: appWs() });
  const pub = await k.ok('publish', { path: '.', name: 'crashy', app: true });
  const base = pub.url.replace(/\/a\/crashy\/$/, '');
  assert.equal((await request(base, '/a/crashy/crash')).text, 'bye');
  const crashed = await waitStatus(k, 'crashy', (s) => s.state === 'crashed' || s.restarts >= 1, 10000);
  assert.ok(crashed.restarts >= 1, JSON.stringify(crashed));
  // It comes back by itself (the first backoff is a second).
  await waitStatus(k, 'crashy', (s) => s.state === 'running', 30000);

  // An app that never starts: 502 meanwhile, and few restarts over several seconds.
  fs.writeFileSync(path.join(k.ws, 'kiln.json'), JSON.stringify({ app: { run: 'exit 7', idle_s: 0, start_timeout_s: 5 } }));
  const bad = await k.ok('publish', { path: '.', name: 'broken', app: true });
  assert.equal(bad.app?.state, 'crashed', JSON.stringify(bad.app));
  assert.match(bad.app.last_error ?? '', /exit/);
  const page = await request(base, '/a/broken/');
  assert.equal(page.status, 502, page.text);
  await sleep(6000);
  const later = await k.ok('app_status', { artifact: 'broken' });
  assert.ok(later.restarts <= 6, `restarts ${later.restarts} in ~6 s: backoff must slow a crash loop down`);
  assert.ok(later.restarts >= 2, `restarts ${later.restarts}: a crashed app is retried`);
});

sandboxTest('schedule_run runs a job in the app environment, traced, and never overlaps itself', async (t) => {
  const ws = appWs({
    idle_s: 0,
    schedules: [
      { name: 'digest', cron: '0 8 * * *', run: 'echo digest >> "$KILN_DATA_DIR/digests"; echo wrote' },
      { name: 'slow', cron: '0 9 * * *', run: 'sleep 4; echo slow' },
    ],
  });
  const k = await startKiln(t, { ws });
  const pub = await k.ok('publish', { path: '.', name: 'jobs', app: true });
  const run = await k.ok('schedule_run', { artifact: 'jobs', name: 'digest' });
  assert.equal(run.status, 'pass', JSON.stringify(run));
  const trace = await k.ok('trace_get', { trace_id: run.trace_id });
  assert.equal(trace.trace.kind, 'schedule');
  const out = await k.ok('trace_output', { trace_id: run.trace_id, stream: 'stdout', offset: 0 });
  assert.match(out.data, /wrote/);
  const status = await k.ok('app_status', { artifact: 'jobs' });
  const digest = status.schedules.find((s) => s.name === 'digest');
  assert.equal(digest.last_run?.trace_id, run.trace_id);
  assert.ok(digest.next_run_at, 'a cron schedule has a next run');

  const [a, b] = await Promise.all([
    k.ok('schedule_run', { artifact: 'jobs', name: 'slow' }),
    sleep(800).then(() => k.ok('schedule_run', { artifact: 'jobs', name: 'slow' })),
  ]);
  assert.deepEqual([a.status, b.status].sort(), ['pass', 'skipped'], JSON.stringify([a, b]));

  const missing = await k.call('schedule_run', { artifact: 'jobs', name: 'nope' });
  assert.ok(missing.isError);
  assert.match(errorText(missing), /digest/);
  void pub;
});

sandboxTest('unpublish stops the app and keeps its data unless delete_data', async (t) => {
  const k = await startKiln(t, { ws: appWs() });
  const pub = await k.ok('publish', { path: '.', name: 'keeper', app: true });
  const base = pub.url.replace(/\/a\/keeper\/$/, '');
  assert.equal((await request(base, '/a/keeper/count', { method: 'POST' })).text, '1');
  await k.ok('unpublish', { artifact: 'keeper' });
  assert.equal((await request(base, '/a/keeper/')).status, 404);
  await k.ok('publish', { path: '.', name: 'keeper', app: true });
  assert.equal((await request(base, '/a/keeper/count', { method: 'POST' })).text, '2', 'the data was kept');
  const gone = await k.ok('unpublish', { artifact: 'keeper', delete_data: true });
  void gone;
  await k.ok('publish', { path: '.', name: 'keeper', app: true });
  assert.equal((await request(base, '/a/keeper/count', { method: 'POST' })).text, '1', 'delete_data removed it');
  const notApp = await k.call('app_status', { artifact: 'nothing-here' });
  assert.ok(notApp.isError);
});

sandboxTest('a per-minute schedule fires by itself, and a run missed while kiln serve was down runs once', async (t) => {
  if (!haveSqlite) return t.skip('sqlite3 (Debian package sqlite3) is not installed');
  const k = await ticker;
  // Fires on the next minute even though the web process went to sleep (idle_s 1).
  const fired = await waitStatus(k, 'ticker', (s) => s.schedules[0]?.last_run?.status === 'pass', 75000);
  assert.equal(fired.schedules[0].last_run.status, 'pass');

  // Down for what counts as hours: one catch-up run, not one per missed minute.
  await k.stopServe();
  const before = await k.ok('trace_list', { kind: 'schedule' });
  const db = path.join(k.state, 'apps.db');
  const upd = spawnSync('sqlite3', [db, "UPDATE schedules SET checked_at = checked_at - 7200 WHERE app = 'ticker'"]);
  assert.equal(upd.status, 0, upd.stderr?.toString());
  await k.ok('app_status', { artifact: 'ticker' });  // starts kiln serve again
  await sleep(8000);
  const after = await k.ok('trace_list', { kind: 'schedule' });
  const added = after.traces.length - before.traces.length;
  assert.ok(added >= 1 && added <= 2, `${added} schedule runs after 2 h of downtime: one catch-up (plus at most the minute's own)`);
});
