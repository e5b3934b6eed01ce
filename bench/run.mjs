// `make bench`: side-by-side figures for Kiln against peers, from one run on this machine. Not a
// test: nothing here passes or fails, it prints a table and writes bench/REPORT.md.
//   - start-up to the initialize answer, and idle RSS after initialize: kiln vs
//     @modelcontextprotocol/server-filesystem (the reference Node server, from bench/node_modules)
//   - file_read / file_search call latency over one session vs its read_text_file / search_files
//   - file_search vs ripgrep on one generated 50k-file tree (kept in the build folder)
// Environment: KILN_BIN (the binary), KILN_BUILD (build folder for the tree), BENCH_QUICK=1 for
// fewer repetitions.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { copySample, generateTree, kilnBin, RawServer, tempDir } from '../tests/lib/kiln.mjs';

const benchDir = path.dirname(fileURLToPath(import.meta.url));
const buildDir = process.env.KILN_BUILD ?? path.join(benchDir, '..', 'build');
const quick = !!process.env.BENCH_QUICK;
const N_START = quick ? 5 : 20;
const N_CALLS = quick ? 10 : 50;
const N_SEARCH = quick ? 3 : 7;
const TREE_FILES = Number(process.env.BENCH_TREE_FILES ?? 50000);

const peerPkg = path.join(benchDir, 'node_modules', '@modelcontextprotocol', 'server-filesystem');
const peerMain = path.join(peerPkg, 'dist', 'index.js');
const peerVersion = JSON.parse(fs.readFileSync(path.join(peerPkg, 'package.json'), 'utf8')).version;

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

// `home`: the kiln state dir; start-up runs share one, as a returning user's sessions do.
function spawnServer(kind, ws, home) {
  if (kind === 'kiln') return new RawServer({ args: ws ? ['--workspace', ws] : [], ...(home ? { home } : {}) });
  return new RawServer({ bin: process.execPath, argv: [peerMain, ws ?? os.tmpdir()] });
}

async function initialize(srv) {
  return srv.request('init', 'initialize', {
    protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'kiln-bench', version: '0' },
  }, 30000);
}

function rssKb(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)[1]);
}

async function startup(kind, ws) {
  const times = [];
  const rss = [];
  const home = tempDir('kiln-bench-home-');
  for (let i = 0; i < N_START; i++) {
    const t0 = nowMs();
    const srv = spawnServer(kind, ws, home);
    const r = await initialize(srv);
    times.push(nowMs() - t0);
    if (r.error) throw new Error(`${kind} initialize: ${JSON.stringify(r.error)}`);
    srv.notify('notifications/initialized');
    await new Promise((res) => setTimeout(res, 150));
    rss.push(rssKb(srv.child.pid));
    await srv.close();
  }
  return { startMs: median(times), rssMb: median(rss) / 1024 };
}

async function callLatency(kind, ws, name, args) {
  const srv = spawnServer(kind, ws);
  await initialize(srv);
  srv.notify('notifications/initialized');
  if (kind === 'kiln') {
    const r = await srv.request('open', 'tools/call', { name: 'workspace_open', arguments: { path: ws } });
    if (r.result?.isError) throw new Error(JSON.stringify(r.result));
  }
  const times = [];
  for (let i = 0; i < N_CALLS + 3; i++) {
    const t0 = nowMs();
    const r = await srv.request(`c${i}`, 'tools/call', { name, arguments: args }, 60000);
    const dt = nowMs() - t0;
    if (r.error || r.result?.isError) throw new Error(`${kind} ${name}: ${JSON.stringify(r.error ?? r.result)}`);
    if (i >= 3) times.push(dt); // the first calls warm caches
  }
  await srv.close();
  return median(times);
}

// What the harness itself costs: spawn `cat`, write one line, read it back.
async function harnessFloor() {
  const times = [];
  for (let i = 0; i < N_START; i++) {
    const t0 = nowMs();
    const srv = new RawServer({ bin: 'cat', argv: [] });
    srv.send({ jsonrpc: '2.0', id: 1, result: {} });
    await srv.next();
    times.push(nowMs() - t0);
    await srv.close();
  }
  return median(times);
}

function ensureTree() {
  const root = path.join(buildDir, 'bench-tree');
  const stamp = path.join(root, '.complete');
  if (fs.existsSync(stamp) && fs.readFileSync(stamp, 'utf8') === String(TREE_FILES)) return root;
  fs.rmSync(root, { recursive: true, force: true });
  process.stdout.write(`generating a ${TREE_FILES}-file tree in ${root} (once) ... `);
  generateTree(path.join(root, 'src'), TREE_FILES, { needleEvery: 500 });
  fs.writeFileSync(stamp, String(TREE_FILES));
  console.log('done');
  return root;
}

async function searchVsRg(tree) {
  const pattern = 'needle_marker';
  const expected = Math.ceil(TREE_FILES / 500);
  // ripgrep: the whole process, as an agent would run it.
  const rg = [];
  for (let i = 0; i < N_SEARCH + 1; i++) {
    const t0 = nowMs();
    const r = spawnSync('rg', ['-n', '--no-heading', pattern, 'src'], { cwd: tree, encoding: 'utf8', maxBuffer: 1 << 26 });
    const dt = nowMs() - t0;
    if (r.status !== 0) throw new Error(`rg failed: ${r.stderr}`);
    const n = r.stdout.trim().split('\n').length;
    if (n !== expected) throw new Error(`rg found ${n} lines, expected ${expected}`);
    if (i > 0) rg.push(dt);
  }
  // kiln: one file_search call in a warm session.
  const srv = spawnServer('kiln', tree);
  await initialize(srv);
  srv.notify('notifications/initialized');
  await srv.request('open', 'tools/call', { name: 'workspace_open', arguments: { path: tree } });
  const kiln = [];
  for (let i = 0; i < N_SEARCH + 1; i++) {
    const t0 = nowMs();
    const r = await srv.request(`s${i}`, 'tools/call', { name: 'file_search', arguments: { pattern, path: 'src', max_results: expected * 2 } }, 120000);
    const dt = nowMs() - t0;
    const sc = r.result?.structuredContent;
    if (!sc || r.result.isError) throw new Error(`kiln file_search: ${JSON.stringify(r.error ?? r.result).slice(0, 500)}`);
    if (sc.matches.length !== expected) throw new Error(`kiln found ${sc.matches.length}, expected ${expected}`);
    if (i > 0) kiln.push(dt);
  }
  await srv.close();
  return { kiln: median(kiln), rg: median(rg) };
}

function machine() {
  const cpuinfo = fs.readFileSync('/proc/cpuinfo', 'utf8');
  const model = /model name\s*:\s*(.*)/.exec(cpuinfo)?.[1] ?? 'unknown';
  const kernel = fs.readFileSync('/proc/sys/kernel/osrelease', 'utf8').trim();
  const nproc = spawnSync('nproc', { encoding: 'utf8' }).stdout.trim();
  const load = os.loadavg().map((x) => x.toFixed(2)).join(' ');
  return { model, kernel, nproc, load, node: process.version };
}

const fmt = (x, unit) => (x === undefined ? '-' : `${x < 10 ? x.toFixed(2) : x.toFixed(1)} ${unit}`);

async function main() {
  const bin = kilnBin();
  const ws = copySample('kiln-bench-ws-');
  const m = machine();
  const version = spawnSync(bin, ['--version'], { encoding: 'utf8' }).stdout.trim();
  console.log(`Kiln bench: ${version} vs @modelcontextprotocol/server-filesystem ${peerVersion} and ${spawnSync('rg', ['--version'], { encoding: 'utf8' }).stdout.split('\n')[0]}`);
  console.log(`machine: ${m.nproc} cores, ${m.model}, kernel ${m.kernel}, load ${m.load}\n`);

  const rows = [];
  const floor = await harnessFloor();
  const kStart = await startup('kiln', ws);
  const pStart = await startup('peer', ws);
  rows.push({ figure: `start-up to initialize answer (median of ${N_START})`, kiln: kStart.startMs, peer: pStart.startMs, unit: 'ms', target: '< 5 ms', ok: kStart.startMs < 5 });
  rows.push({ figure: 'idle RSS after initialize', kiln: kStart.rssMb, peer: pStart.rssMb, unit: 'MB', target: '< 10 MB', ok: kStart.rssMb < 10 });

  const kRead = await callLatency('kiln', ws, 'file_read', { path: 'src/slugify.js' });
  const pRead = await callLatency('peer', ws, 'read_text_file', { path: path.join(ws, 'src/slugify.js') });
  rows.push({ figure: `file_read vs read_text_file (median of ${N_CALLS})`, kiln: kRead, peer: pRead, unit: 'ms' });

  const kSearch = await callLatency('kiln', ws, 'file_search', { pattern: 'export function' });
  const pSearch = await callLatency('peer', ws, 'search_files', { path: ws, pattern: '**/*.js' });
  rows.push({ figure: `file_search vs search_files (median of ${N_CALLS})`, kiln: kSearch, peer: pSearch, unit: 'ms', note: 'search_files matches names only; file_search reads contents' });

  const tree = ensureTree();
  const s = await searchVsRg(tree);
  rows.push({ figure: `file_search vs rg, ${TREE_FILES} files (median of ${N_SEARCH})`, kiln: s.kiln, peer: s.rg, unit: 'ms', target: '<= 1.5x rg', ok: s.kiln <= 1.5 * s.rg, peerName: 'rg' });

  const header = ['figure', 'kiln', 'peer', 'ratio kiln/peer', 'target'];
  const table = rows.map((r) => [
    r.figure, fmt(r.kiln, r.unit), `${fmt(r.peer, r.unit)}${r.peerName ? ` (${r.peerName})` : ''}`,
    `${(r.kiln / r.peer).toFixed(2)}x`, r.target ? `${r.target} ${r.ok ? 'met' : 'NOT met'}` : '',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...table.map((row) => row[i].length)));
  const line = (cells) => cells.map((c, i) => c.padEnd(widths[i])).join('  ');
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const row of table) console.log(line(row));
  for (const r of rows) if (r.note) console.log(`note: ${r.figure.split(' (')[0]}: ${r.note}`);
  console.log(`note: start-up includes the harness's own spawn + pipe round trip, ${floor.toFixed(2)} ms (spawning cat); kiln less that: ${(kStart.startMs - floor).toFixed(2)} ms`);

  const md = [
    '# Kiln benchmark report',
    '',
    `Generated by \`make bench\` (bench/run.mjs) on ${new Date().toISOString().slice(0, 10)}; one run, on one machine, so read`,
    'the ratios rather than the absolute numbers. Peers: `@modelcontextprotocol/server-filesystem`',
    `${peerVersion} (Node ${m.node}) and ripgrep. Benchmarks are not tests: nothing here fails a build.`,
    '',
    `- kiln: ${version}`,
    `- machine: ${m.nproc} cores (nproc), ${m.model}, kernel ${m.kernel}, load average at start ${m.load}`,
    '',
    `| ${header.join(' | ')} |`,
    `|${header.map(() => '---').join('|')}|`,
    ...table.map((row) => `| ${row.join(' | ')} |`),
    '',
    'How each figure is taken:',
    `- start-up: spawn to the \`initialize\` response on stdout (median of ${N_START} fresh processes, kiln's`,
    `  sharing one KILN_HOME as a returning user's do); the harness alone (spawn \`cat\`, one line there and`,
    `  back) takes ${floor.toFixed(2)} ms of that, so kiln's own start-up is about ${(kStart.startMs - floor).toFixed(1)} ms.`,
    '  RSS: VmRSS from /proc/PID/status 150 ms after `notifications/initialized`.',
    `- call latency: median of ${N_CALLS} sequential \`tools/call\` round trips in one warm session (3 warm-up calls`,
    '  dropped), on a copy of examples/sample-project. `search_files` matches file names with a glob',
    '  (`**/*.js`), `file_search` greps file contents (`export function`).',
    `- file_search vs rg: the same ${TREE_FILES}-file generated tree (kept in the build folder), pattern`,
    '  `needle_marker`; rg is timed as a whole process (`rg -n needle_marker src`), kiln as one',
    `  \`file_search\` call in a warm session; median of ${N_SEARCH} after one warm-up run each.`,
    '',
  ].join('\n');
  fs.writeFileSync(path.join(benchDir, 'REPORT.md'), md);
  console.log(`\nwrote ${path.relative(process.cwd(), path.join(benchDir, 'REPORT.md'))}`);
}

main().catch((e) => {
  console.error(`bench failed: ${e.stack ?? e}`);
  process.exit(1);
});
