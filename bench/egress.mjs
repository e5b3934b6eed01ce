// Egress for `make bench` (docs/network.md): what Kiln's allowlist proxy costs a sandboxed client,
// against curl straight to the upstream on loopback (the floor) and srt's proxy with the same
// destination allowed: a 100 MiB download (HTTP forward and CONNECT tunnel) and 1,000 small
// requests on a new connection each, timed by curl inside the sandbox so start-up is excluded.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { connectClient, sleep, tempDir } from '../tests/lib/kiln.mjs';
import { freePort } from '../tests/lib/pg_cluster.mjs';
import { fmt, median, onPath, quick } from './lib.mjs';
import { removeSrtLeftovers, srtBin } from './sandbox_start.mjs';

const BIG = 100 * 2 ** 20;
const SMALL = 1024;
const N_SMALL = 1000;
const ROUNDS = quick ? 3 : 10;
export const EGRESS_TARGETS = { throughput_vs_floor: 0.8, added_ms: 1 };

// A process of its own, not a server in this one: the direct and srt runs are spawnSync, which
// would stall this process's event loop and so an upstream living in it.
const UPSTREAM = `// The upstream of bench/egress.mjs: GET /big streams ${BIG} bytes, anything else is ${SMALL} bytes.
const http = require('node:http');
const chunk = Buffer.alloc(1 << 20, 'x');
const small = Buffer.alloc(${SMALL}, 's');
const server = http.createServer((req, res) => {
  if (req.url !== '/big') {
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': small.length });
    return res.end(small);
  }
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': ${BIG} });
  let sent = 0;
  const more = () => {
    while (sent < ${BIG / 2 ** 20}) { sent++; if (!res.write(chunk)) return res.once('drain', more); }
    res.end();
  };
  more();
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
`;

async function startUpstream(dir) {
  const script = path.join(dir, 'upstream.cjs');
  fs.writeFileSync(script, UPSTREAM);
  const child = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise((resolve, reject) => {
    child.stdout.once('data', (d) => resolve(Number(String(d).trim())));
    child.once('exit', (code) => reject(new Error(`the upstream exited (${code}) before listening`)));
  });
  return { port, stop: () => child.kill('SIGKILL') };
}

const W = "-w '%{time_total} %{size_download} %{num_connects} %{http_code}\\n'";

// The curl command lines every setup runs, for `host` (the name that setup is allowed to reach).
// Every small request says Connection: close, so each is a new connection in every setup, as Kiln's
// HTTP forwarding makes it (curl's num_connects checks it). curl's figures go to a file in the
// workspace, read from outside: a tool answer carries only the tails of a long stdout.
function commands(curl, host, port, ws, key) {
  const cfg = `reqs-${host}-${port}.cfg`;
  if (!fs.existsSync(path.join(ws, cfg))) {
    const lines = Array.from({ length: N_SMALL }, (_, i) => `url = "http://${host}:${port}/s${i}"\noutput = "/dev/null"\n`);
    fs.writeFileSync(path.join(ws, cfg), lines.join(''));
  }
  const out = `> figures-${key}.txt`;
  return {
    http: `${curl} -sS -o /dev/null ${W} http://${host}:${port}/big ${out}`,
    tunnel: `${curl} -sS -p -o /dev/null ${W} http://${host}:${port}/big ${out}`,
    small: `${curl} -sS -H 'Connection: close' -K ${cfg} ${W} ${out}`,
    figures: path.join(ws, `figures-${key}.txt`),
  };
}

// curl's -w lines -> seconds each, or an error naming what is off (a short body, an error
// status, a reused connection).
function parseTransfers(stdout, bytes, count) {
  const lines = stdout.trim().split('\n').filter(Boolean);
  if (lines.length !== count) return { error: `${lines.length} transfers, expected ${count}: ${stdout.slice(0, 200)}` };
  const secs = [];
  for (const l of lines) {
    const [t, size, conns, code] = l.split(' ');
    if (code !== '200' || Number(size) !== bytes || conns !== '1') return { error: `transfer "${l}": expected 200, ${bytes} bytes, 1 new connection` };
    secs.push(Number(t));
  }
  return { secs };
}

function shell(argv, ws, env) {
  const r = spawnSync(argv[0], argv.slice(1), { cwd: ws, env, encoding: 'utf8', timeout: 120000, maxBuffer: 1 << 24 });
  if (r.error) return { error: String(r.error.message) };
  if (r.status !== 0) return { error: `exit ${r.status ?? r.signal}: ${(r.stderr ?? '').trim().slice(-200)}` };
  return {};
}

function directSetup(port, ws) {
  // No proxy variables: curl dials the upstream itself, the name pinned like the hosts file does.
  const env = { PATH: process.env.PATH, HOME: process.env.HOME ?? '/' };
  return { key: 'direct', measures: ['http', 'small'], cmds: commands(`curl --resolve up.test:${port}:127.0.0.1`, 'up.test', port, ws, 'direct'), run: (c) => shell(['/bin/sh', '-c', c], ws, env) };
}

// What any user-space relay costs here, for scale: socat between two loopback ports on the host,
// no sandbox and no policy, with a 64 KiB buffer as Kiln's relay has.
async function relaySetup(port, ws) {
  const s = { key: 'relay', measures: ['http'] };
  if (!onPath('socat')) return { ...s, missing: 'socat not installed' };
  const rp = await freePort();
  const child = spawn('socat', ['-b', '65536', `TCP-LISTEN:${rp},bind=127.0.0.1,fork,reuseaddr`, `TCP:127.0.0.1:${port}`], { stdio: 'ignore' });
  for (let i = 0; i < 100 && shell(['curl', '-s', '-o', '/dev/null', `http://127.0.0.1:${rp}/s`], ws, process.env).error; i++) await sleep(20);
  const direct = directSetup(rp, ws);
  return { ...s, cmds: direct.cmds, run: direct.run, close: () => child.kill('SIGKILL') };
}

// CPU time of every thread of `pid` so far (schedstat: ns on CPU), in ms.
function cpuMs(pid) {
  let ns = 0;
  for (const t of fs.readdirSync(`/proc/${pid}/task`)) ns += Number(fs.readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'utf8').split(' ')[0]);
  return ns / 1e6;
}

async function kilnSetup(port, ws, hostsFile) {
  const k = await connectClient({ name: 'kiln-bench-egress', env: { KILN_EGRESS_HOSTS: hostsFile } });
  const call = async (name, args) => {
    const r = await k.client.callTool({ name, arguments: args }, undefined, { timeout: 180000 });
    if (r.isError) throw new Error(`${name}: ${r.content?.[0]?.text}`);
    return r.structuredContent;
  };
  const s = { key: 'kiln', measures: Object.keys(MEASURES), cmds: commands('curl', 'up.test', port, ws, 'kiln'), close: () => k.close(), call, cpuMs: () => cpuMs(k.transport.inner.pid) };
  try {
    await call('workspace_open', { path: ws });
    const sb = await call('sandbox_create', { network: { allow: [`up.test:${port}`], allow_private: true } });
    s.run = async (c) => {
      const r = await call('sandbox_exec', { command: c, sandbox_id: sb.sandbox_id, timeout_s: 120 });
      return r.exit_code === 0 ? { trace: r.trace_id } : { error: `exit ${r.exit_code}: ${String(r.stderr).slice(-200)}` };
    };
  } catch (e) {
    s.missing = e.message;
  }
  return s;
}

function srtSetup(port, ws) {
  const settings = path.join(ws, '..', 'srt-settings.json');
  // srt refuses an allowed name that resolves to loopback unless the name is localhost, and reads
  // no hosts file: localhost:PORT is its way of naming the same upstream.
  fs.writeFileSync(settings, JSON.stringify({
    network: { allowedDomains: [`localhost:${port}`], deniedDomains: [] },
    filesystem: { denyRead: [], allowRead: [], allowWrite: [ws], denyWrite: [] },
  }));
  // srt's NO_PROXY lists localhost (a direct dial, which its sandbox has no route for): unset it
  // so curl goes through srt's proxy.
  const s = { key: 'srt', measures: Object.keys(MEASURES), cmds: commands('env -u NO_PROXY -u no_proxy curl', 'localhost', port, ws, 'srt'), run: (c) => shell([srtBin, '-s', settings, '-c', c], ws, process.env) };
  if (!fs.existsSync(srtBin)) s.missing = 'not installed in bench/node_modules (npm ci in bench/ failed?)';
  else if (!onPath('bwrap') || !onPath('socat')) s.missing = `srt needs ${['bwrap', 'socat'].filter((c) => !onPath(c)).join(' and ')} on Linux, not installed`;
  return s;
}

const MEASURES = { http: { bytes: BIG, count: 1 }, tunnel: { bytes: BIG, count: 1 }, small: { bytes: SMALL, count: N_SMALL } };

// One measurement: seconds per transfer, stored under s.runs[measure]; the first failure stops
// the setup for the rest of the bench.
async function measure(s, m) {
  if (s.missing) return;
  fs.rmSync(s.cmds.figures, { force: true });
  const cpu0 = s.cpuMs?.();
  const out = await s.run(s.cmds[m]);
  if (cpu0 !== undefined && !out.error) (s.cpu[m] ??= []).push(s.cpuMs() - cpu0);
  const figures = out.error ? '' : fs.readFileSync(s.cmds.figures, 'utf8');
  const p = out.error ? out : parseTransfers(figures, MEASURES[m].bytes, MEASURES[m].count);
  if (p.error) { s.missing = `${m}: ${p.error}`; return; }
  (s.runs[m] ??= []).push(m === 'small' ? p.secs.reduce((a, b) => a + b, 0) / p.secs.length : p.secs[0]);
  return out;
}

// That the download went through Kiln's proxy: the run's trace counts its bytes.
async function checkKilnCounted(kiln, trace) {
  const t = await kiln.call('trace_get', { trace_id: trace });
  const down = (t.trace ?? t).result?.network?.bytes_down ?? 0;
  if (down < BIG) kiln.missing = `the trace counts ${down} bytes down through the proxy, expected at least ${BIG}`;
}

export async function egressBench() {
  if (!onPath('curl')) return { error: 'curl not installed' };
  const dir = tempDir('kiln-bench-egress-');
  const ws = path.join(dir, 'ws');
  fs.mkdirSync(ws, { mode: 0o755 });
  const hostsFile = path.join(dir, 'hosts');
  fs.writeFileSync(hostsFile, '127.0.0.1 up.test\n');
  const tmpBefore = new Set(fs.readdirSync(os.tmpdir()));
  const up = await startUpstream(dir);
  const setups = [];
  try {
    setups.push(directSetup(up.port, ws), await kilnSetup(up.port, ws, hostsFile), srtSetup(up.port, ws), await relaySetup(up.port, ws));
    for (const s of setups) { s.runs = {}; s.cpu = {}; }
    const steps = [];
    for (const s of setups) for (const m of s.measures) steps.push([s, m]);
    // Warm-up: one of each, untimed (and the probe: a setup that fails here is reported, not run).
    for (const [s, m] of steps) {
      const out = await measure(s, m);
      if (out && s.key === 'kiln' && m === 'http') await checkKilnCounted(s, out.trace);
    }
    for (const s of setups) { s.runs = {}; s.cpu = {}; }
    // Interleaved rounds, the order rotated, so a noisy neighbour hits every setup alike.
    for (let round = 0; round < ROUNDS; round++) {
      for (let j = 0; j < steps.length; j++) await measure(...steps[(j + round) % steps.length]);
    }
  } finally {
    for (const s of setups) await s.close?.();
    up.stop();
    removeSrtLeftovers(tmpBefore);
  }
  return { setups: Object.fromEntries(setups.map((s) => [s.key, s])) };
}

export function egressTable(r) {
  const header = ['figure', 'curl direct (floor)', 'kiln proxy', 'kiln vs floor', 'srt proxy', 'srt vs floor', 'runs', 'target'];
  if (r.error) return { header, table: [], notes: [`egress not measured: ${r.error}`] };
  const { direct, kiln, srt, relay } = r.setups;
  const med = (s, m) => median(s.runs[m] ?? []);
  const mibs = (s, m) => (med(s, m) ? BIG / 2 ** 20 / med(s, m) : undefined);
  const fmtMibs = (x) => (x === undefined ? 'n/a' : `${Math.round(x).toLocaleString('en-US')} MiB/s`);
  const times = (a, b) => (a === undefined || b === undefined ? '-' : `${(a / b).toFixed(2)}x`);
  const runs = (m) => [direct, kiln, srt].map((s) => String(s.runs[m]?.length ?? 0)).join(' / ');
  const floor = mibs(direct, 'http');
  const tputRow = (label, m) => {
    const k = mibs(kiln, m);
    const ok = k !== undefined && floor !== undefined && k / floor >= EGRESS_TARGETS.throughput_vs_floor;
    return [label, fmtMibs(floor), fmtMibs(k), times(k, floor), fmtMibs(mibs(srt, m)), times(mibs(srt, m), floor),
      m === 'tunnel' ? runs(m).replace(/^\d+/, String(direct.runs.http?.length ?? 0)) : runs(m),
      `>= ${EGRESS_TARGETS.throughput_vs_floor}x floor${k === undefined ? ' (no figure)' : ok ? ' met' : ' NOT met'}`];
  };
  const ms = (s) => (med(s, 'small') === undefined ? undefined : med(s, 'small') * 1000);
  const added = (s) => (ms(s) === undefined || ms(direct) === undefined ? undefined : ms(s) - ms(direct));
  const addedK = added(kiln);
  const table = [
    tputRow('100 MiB GET, HTTP forward: throughput', 'http'),
    tputRow('100 MiB GET, CONNECT tunnel (curl -p): throughput', 'tunnel'),
    [`${N_SMALL.toLocaleString('en-US')} x 1 KiB GET, new connection each: time per request`, fmt(ms(direct), 'ms'), fmt(ms(kiln), 'ms'),
      times(ms(kiln), ms(direct)), fmt(ms(srt), 'ms'), times(ms(srt), ms(direct)), runs('small'), ''],
    ['added per request vs direct', '-', fmt(addedK, 'ms'), '', fmt(added(srt), 'ms'), '', runs('small'),
      `< ${EGRESS_TARGETS.added_ms} ms${addedK === undefined ? ' (no figure)' : addedK < EGRESS_TARGETS.added_ms ? ' met' : ' NOT met'}`],
  ];
  const cpu = (m) => median(kiln.cpu?.[m] ?? []);
  table.push(['kiln process CPU per 100 MiB (all threads): HTTP forward / tunnel', '-', `${fmt(cpu('http'), 'ms')} / ${fmt(cpu('tunnel'), 'ms')}`,
    '', '-', '', String(kiln.cpu?.http?.length ?? 0), '']);
  const notes = [direct, kiln, srt, relay].filter((s) => s.missing).map((s) => `${s.key} not measured (or stopped): ${s.missing}`);
  if (mibs(relay, 'http') !== undefined) {
    notes.push(`for scale, a bare user-space TCP relay on the host (socat -b 65536 between two loopback ports, no sandbox, no policy) ` +
      `moved the 100 MiB at ${fmtMibs(mibs(relay, 'http'))} (${times(mibs(relay, 'http'), floor)} the floor) in the same rounds: ` +
      'the extra hop, which every relay pays, is most of the cost.');
  }
  notes.push(`medians of ${ROUNDS} interleaved rounds (one untimed warm-up of each first); every time is curl's own ` +
    '%{time_total} inside the sandbox, so sandbox start-up is excluded. A small-request run is the mean of its ' +
    `${N_SMALL} requests; runs are direct / kiln / srt. Kiln's CPU is its process's schedstat over the whole sandbox_exec ` +
    '(the proxy, the MCP call and starting the exec), so it is what the relay costs the machine, start-up included.');
  return { header, table, notes };
}
