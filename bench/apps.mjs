// Apps for `make bench` (TOOLS.md "Apps"): requests per second of a tiny Node app (a 1 KiB GET)
// behind `kiln serve` at /a/NAME/ against the same app behind nginx `proxy_pass`, driven by wrk
// with keep-alive connections (interleaved runs, medians); and wake from sleep to the first byte,
// for that app and for examples/incident-tracker, against each app's own start.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

import { readServeInfo, stopProcess } from '../tests/lib/http.mjs';
import { connectClient, repoRoot, sleep, tempDir } from '../tests/lib/kiln.mjs';
import { freePort, postgresBindir, startCluster } from '../tests/lib/pg_cluster.mjs';
import { fmt, median, nginxConf, nowMs, onPath, quick } from './lib.mjs';

const CONNS = 32;
const SECS = quick ? 2 : 4;
const ROUNDS = quick ? 2 : 5;
const N_WAKE = quick ? 2 : 5;
const IDLE_S = 2;
export const APPS_TARGETS = { rps_vs_nginx: 0.8, wake_over_start_ms: 300 };

const TINY = `// 1 KiB for every request: the app of bench/apps.mjs.
const http = require('node:http');
const body = Buffer.alloc(1024, 'k');
http.createServer((req, res) => {
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': body.length });
  res.end(body);
}).listen(Number(process.env.PORT), '127.0.0.1');
`;
const tracker = path.join(repoRoot, 'examples', 'incident-tracker');

// One GET; resolves { status, ms to the response head, bytes } (the body is read to its end).
function get(url, agent = false, headers = {}) {
  return new Promise((resolve, reject) => {
    const t0 = nowMs();
    const req = http.get(url, { agent, headers }, (res) => {
      const ms = nowMs() - t0;
      let bytes = 0;
      res.on('data', (c) => { bytes += c.length; });
      res.on('end', () => resolve({ status: res.statusCode, ms, bytes }));
    });
    req.on('error', reject);
    req.setTimeout(60000, () => req.destroy(new Error(`timeout: GET ${url}`)));
  });
}

// wrk with CONNS keep-alive connections on 2 threads for SECS seconds (a C load generator: a Node
// one in this process was the ceiling of every side, so the proxies' own cost hardly showed);
// requests/s, or an error when an answer was not a 2xx or a socket failed. The body's size is
// checked once per side before the runs (probe below): wrk cannot check it.
function load(url) {
  return new Promise((resolve) => {
    const child = spawn('wrk', ['-t2', `-c${CONNS}`, `-d${SECS}s`, url], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c) => { out += c; });
    child.stderr.on('data', (c) => { out += c; });
    child.on('error', (e) => resolve({ error: `wrk: ${e.message}` }));
    child.on('close', (code) => {
      const rps = /Requests\/sec:\s+([\d.]+)/.exec(out);
      const bad = /Non-2xx or 3xx responses:\s+(\d+)/.exec(out);
      const errs = /Socket errors:(.*)/.exec(out);
      if (code !== 0 || !rps) return resolve({ error: `wrk exit ${code}: ${out.trim().slice(0, 200)}` });
      if (bad) return resolve({ error: `${bad[1]} answers were not 2xx` });
      if (errs) return resolve({ error: `socket errors:${errs[1]}` });
      resolve({ rps: Number(rps[1]) });
    });
  });
}

// One GET per side before the runs: a 200 of exactly 1 KiB, or the reason it is not.
async function probe(url) {
  const r = await get(url).catch((e) => ({ status: e.message }));
  return r.status === 200 && r.bytes === 1024 ? undefined : `the probe answered ${r.status} with ${r.bytes ?? 0} bytes, not a 200 of 1 KiB`;
}

// Polls `url` every 5 ms until it answers 200; ms from `t0`.
async function firstAnswer(url, t0, child) {
  for (;;) {
    const r = await get(url).catch(() => undefined);
    if (r?.status === 200) return nowMs() - t0;
    if (child.exitCode !== null) throw new Error(`the app exited (${child.exitCode}) before answering ${url}`);
    if (nowMs() - t0 > 30000) throw new Error(`no answer from ${url} in 30 s`);
    await sleep(5);
  }
}

function startApp(dir, script, env) {
  return spawn(process.execPath, [script], { cwd: dir, env: { PATH: process.env.PATH, ...env }, stdio: 'ignore' });
}
async function stopApp(child) {
  if (child.exitCode === null) child.kill('SIGTERM');
  await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r() : child.on('exit', r)));
}

// nginx as a reverse proxy at /a/tiny/ (prefix removed, as kiln serve does) with keep-alive to the app.
async function startNginx(appPort) {
  const port = await freePort();
  const prefix = tempDir('kiln-bench-apps-nginx-');
  const tmp = (n) => path.join(prefix, n);
  fs.writeFileSync(tmp('nginx.conf'), nginxConf(prefix, `  upstream app { server 127.0.0.1:${appPort}; keepalive ${CONNS}; }
  server {
    listen 127.0.0.1:${port};
    location /a/tiny/ {
      proxy_pass http://app/;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-Prefix /a/tiny;
      proxy_set_header X-Forwarded-Host $host;
      proxy_set_header X-Forwarded-Proto $scheme;
    }
  }
`));
  const nginx = onPath('nginx') ? 'nginx' : '/usr/sbin/nginx';
  const child = spawn(nginx, ['-e', tmp('error.log'), '-p', prefix, '-c', tmp('nginx.conf')], { stdio: 'ignore', detached: true });
  const url = `http://127.0.0.1:${port}/a/tiny/`;
  try {
    await firstAnswer(url, nowMs(), child);
  } catch (e) {
    try { process.kill(-child.pid, 'SIGKILL'); } catch { /* gone */ }
    throw new Error(`nginx did not start: ${e.message}; ${fs.readFileSync(tmp('error.log'), 'utf8').slice(-300)}`);
  }
  const version = spawnSync(nginx, ['-v'], { encoding: 'utf8' }).stderr.trim().replace('nginx version: ', '');
  const stop = async () => {
    try { process.kill(-child.pid, 'SIGQUIT'); } catch { return; }
    await new Promise((r) => (child.exitCode !== null ? r() : child.on('exit', r)));
  };
  return { url, version, stop };
}

function tinyWorkspace(idle_s) {
  const ws = tempDir('kiln-bench-apps-ws-');
  fs.chmodSync(ws, 0o755);
  fs.writeFileSync(path.join(ws, 'server.js'), TINY);
  fs.writeFileSync(path.join(ws, 'kiln.json'), JSON.stringify({ app: { run: 'node server.js', idle_s } }));
  return ws;
}

// The kiln side: the tiny app published twice (always on, for throughput; asleep after IDLE_S,
// for waking) and the incident tracker asleep after IDLE_S, all public, through MCP.
async function publishApps(k) {
  const call = async (name, args) => {
    const r = await k.client.callTool({ name, arguments: args }, undefined, { timeout: 300000 });
    if (r.isError) throw new Error(`${name}: ${r.content?.[0]?.text}`);
    return r.structuredContent;
  };
  const trackerWs = path.join(tempDir('kiln-bench-apps-tracker-'), 'incident-tracker');
  fs.cpSync(tracker, trackerWs, { recursive: true });
  const cfg = JSON.parse(fs.readFileSync(path.join(trackerWs, 'kiln.json'), 'utf8'));
  cfg.app.idle_s = IDLE_S;
  fs.writeFileSync(path.join(trackerWs, 'kiln.json'), JSON.stringify(cfg));
  const urls = {}, workspaces = {};
  for (const [name, ws] of [['tiny', tinyWorkspace(0)], ['tiny-sleepy', tinyWorkspace(IDLE_S)], ['incident-tracker', trackerWs]]) {
    // An app is reached through the workspace it was published from.
    workspaces[name] = (await call('workspace_open', { path: ws })).id;
    urls[name] = (await call('publish', { path: '.', name, app: true, share: 'public', workspace: workspaces[name] })).url;
  }
  return { urls, status: (artifact) => call('app_status', { artifact, workspace: workspaces[artifact] }) };
}

// Waits for the app to be asleep, then times one request to its first byte.
async function wakeRuns(kiln, name, url) {
  const out = [];
  for (let i = 0; i < N_WAKE; i++) {
    const deadline = nowMs() + (IDLE_S + 60) * 1000;
    while ((await kiln.status(name)).state !== 'sleeping') {
      if (nowMs() > deadline) throw new Error(`${name} did not go to sleep within ${IDLE_S + 60} s`);
      await sleep(200);
    }
    const r = await get(url);
    if (r.status !== 200) throw new Error(`${name}: the waking request answered ${r.status}`);
    out.push(r.ms);
  }
  return out;
}

// Each app's own start outside Kiln: spawn to its first 200 (the tracker against a running postgres).
async function ownStarts(tinyDir) {
  const out = { tiny: [], tracker: [] };
  for (let i = 0; i < N_WAKE; i++) {
    const PORT = String(await freePort());
    const t0 = nowMs();
    const child = startApp(tinyDir, 'server.js', { PORT });
    out.tiny.push(await firstAnswer(`http://127.0.0.1:${PORT}/`, t0, child));
    await stopApp(child);
  }
  const bindir = postgresBindir();
  if (!bindir) return { ...out, trackerError: 'PostgreSQL is not installed' };
  const cluster = await startCluster(bindir, tempDir('kiln-bench-apps-pg-'));
  try {
    const env = { DATABASE_URL: cluster.url };
    if (spawnSync(process.execPath, ['migrate.js'], { cwd: tracker, env: { ...process.env, ...env } }).status !== 0) throw new Error('migrate.js failed');
    for (let i = 0; i < N_WAKE; i++) {
      const PORT = String(await freePort());
      const t0 = nowMs();
      const child = startApp(tracker, 'server.js', { ...env, PORT });
      out.tracker.push(await firstAnswer(`http://127.0.0.1:${PORT}/health`, t0, child));
      await stopApp(child);
    }
  } finally {
    cluster.stop();
  }
  return out;
}

export async function appsBench() {
  if (!onPath('nginx') && !fs.existsSync('/usr/sbin/nginx')) return { error: 'nginx not installed (Debian package; make bench installs it)' };
  if (!onPath('wrk')) return { error: 'wrk not installed (Debian package; make bench installs it)' };
  // The tracker's `pg` goes into its node_modules, published with it (the app's sandbox has no network).
  const deps = spawnSync(path.join(repoRoot, 'scripts', 'npm-deps.sh'), [tracker], { encoding: 'utf8' });
  if (deps.status !== 0) return { error: `npm ci in examples/incident-tracker failed: ${deps.stdout}${deps.stderr}` };
  const tinyDir = tinyWorkspace(0);
  const appPort = await freePort();
  const app = startApp(tinyDir, 'server.js', { PORT: String(appPort) });
  const direct = `http://127.0.0.1:${appPort}/`;
  const res = { runs: { direct: [], nginx: [], kiln: [] }, errors: {}, wake: {} };
  const home = tempDir('kiln-bench-apps-home-');
  let nginx, k;
  try {
    await firstAnswer(direct, nowMs(), app);
    nginx = await startNginx(appPort);
    res.nginxVersion = nginx.version;
    const urls = { direct, nginx: nginx.url };
    k = await connectClient({ home, name: 'kiln-bench-apps', env: { KILN_SERVE_LISTEN: '127.0.0.1:0' } });
    let kiln;
    try {
      kiln = await publishApps(k);
      urls.kiln = kiln.urls.tiny;
    } catch (e) {
      res.errors.kiln = e.message;
    }
    for (const side of Object.keys(urls)) {
      const why = res.errors[side] ? undefined : await probe(urls[side]);
      if (why) res.errors[side] = why;
    }
    // Interleaved: every round runs each side once, the order rotated.
    const sides = Object.keys(urls);
    for (let round = 0; round < ROUNDS; round++) {
      for (let j = 0; j < sides.length; j++) {
        const side = sides[(round + j) % sides.length];
        if (res.errors[side]) continue;
        const r = await load(urls[side]);
        if (r.error) res.errors[side] = r.error; else res.runs[side].push(r.rps);
      }
    }
    res.own = await ownStarts(tinyDir).catch((e) => ({ tiny: [], tracker: [], trackerError: e.message }));
    if (kiln) {
      for (const [label, name] of [['tiny', 'tiny-sleepy'], ['tracker', 'incident-tracker']]) {
        res.wake[label] = await wakeRuns(kiln, name, kiln.urls[name]).catch((e) => ({ error: e.message }));
      }
    }
  } finally {
    await k?.close();
    await nginx?.stop();
    await stopApp(app);
    const info = readServeInfo(home);
    if (info) await stopProcess(info.pid, 15000);
  }
  return res;
}

export function appsTable(r) {
  const header = [`app (1 KiB GET, wrk -t2 -c${CONNS})`, 'median', 'runs', 'vs nginx', 'target'];
  if (r.error) return { header, table: [], notes: [`apps not measured: ${r.error}`] };
  const rps = (side) => median(r.runs[side]);
  const fmtRps = (x) => (x === undefined ? 'n/a' : `${Math.round(x).toLocaleString('en-US')} req/s`);
  const vs = rps('kiln') && rps('nginx') ? rps('kiln') / rps('nginx') : undefined;
  // Each round ran both once: their own ratios show how far apart the rounds were.
  const rounds = Math.min(r.runs.kiln.length, r.runs.nginx.length);
  const perRound = Array.from({ length: rounds }, (_, i) => r.runs.kiln[i] / r.runs.nginx[i]);
  const spread = rounds > 1 ? ` (rounds ${Math.min(...perRound).toFixed(2)}-${Math.max(...perRound).toFixed(2)}x)` : '';
  const table = [
    ['the app alone, no proxy (the ceiling)', fmtRps(rps('direct')), String(r.runs.direct.length), '-', ''],
    [`nginx proxy_pass`, fmtRps(rps('nginx')), String(r.runs.nginx.length), '1.00x', ''],
    ['kiln serve /a/tiny/', fmtRps(rps('kiln')), String(r.runs.kiln.length), vs ? `${vs.toFixed(2)}x${spread}` : '-',
      `>= ${APPS_TARGETS.rps_vs_nginx}x${vs === undefined ? ' (no figure)' : vs >= APPS_TARGETS.rps_vs_nginx ? ' met' : ' NOT met'}`],
  ];
  const wakeRow = (label, wake, own) => {
    if (!wake) return [label, 'n/a', '0', '-', ''];
    if (wake.error) return [label, 'n/a', '0', '-', wake.error];
    const over = own?.length ? median(wake) - median(own) : undefined;
    return [label, fmt(median(wake), 'ms'), String(wake.length), '-',
      over === undefined ? `own start + ${APPS_TARGETS.wake_over_start_ms} ms (no own start)` :
        `${fmt(over, 'ms')} over its own start (${fmt(median(own), 'ms')}): < ${APPS_TARGETS.wake_over_start_ms} ms ${over < APPS_TARGETS.wake_over_start_ms ? 'met' : 'NOT met'}`];
  };
  table.push(wakeRow('wake from sleep to the first byte: tiny app', r.wake.tiny, r.own?.tiny));
  table.push(wakeRow('wake from sleep to the first byte: incident tracker', r.wake.tracker, r.own?.tracker));
  for (const [label, xs] of [['own start outside Kiln: tiny app', r.own?.tiny], ['own start outside Kiln: incident tracker', r.own?.tracker]]) {
    table.push([label, xs?.length ? fmt(median(xs), 'ms') : 'n/a', String(xs?.length ?? 0), '-', '']);
  }
  const notes = Object.entries(r.errors).map(([side, e]) => `${side}: ${e}`);
  if (r.own?.trackerError) notes.push(`incident tracker's own start not measured: ${r.own.trackerError}`);
  notes.push(`medians of ${ROUNDS} interleaved ${SECS} s runs of wrk (2 threads, ${CONNS} keep-alive connections, one request in ` +
    `flight on each), which shares the cores with the app (one Node process) and the proxy; each side is probed once first for ` +
    `a 200 of 1 KiB. nginx ${r.nginxVersion ?? '?'}: ` +
    `2 workers, access_log off, HTTP/1.1 keep-alive to the app (upstream keepalive ${CONNS}). Wake: idle_s ${IDLE_S}, app_status ` +
    'polled until sleeping, then one GET timed to its response head; own start: `node server.js` spawned outside Kiln until its first ' +
    '200 (the tracker: /health, against a postgres already running).');
  return { header, table, notes };
}
