// `make bench`: side-by-side figures for Kiln against peers, from one run on this machine. Not a
// test: nothing here passes or fails, it prints a table and writes bench/REPORT.md.
//   - start-up to the initialize answer, and idle RSS after initialize: kiln vs
//     @modelcontextprotocol/server-filesystem (the reference Node server, from bench/node_modules)
//   - file_read / file_search call latency over one session vs its read_text_file / search_files
//   - file_search vs ripgrep on one generated 50k-file tree (kept in the build folder)
//   - sandbox start-up for /bin/true: sandbox_exec through an MCP session (official SDK client) in a
//     fresh strict sandbox and in a session sandbox, against fork/exec, `unshare -Urmnp`, two bwrap
//     setups and Anthropic's `srt` CLI (@anthropic-ai/sandbox-runtime, from bench/node_modules)
//   - static serving: `kiln serve` vs nginx under wrk, small and 1 MB files, public and protected
//     (bench/serve.mjs)
// Environment: KILN_BIN (the binary), KILN_BUILD (build folder for the tree), BENCH_QUICK=1 for
// fewer repetitions, BENCH_ONLY=sandbox or BENCH_ONLY=serve to take only those figures (no
// REPORT.md written).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { connectClient, copySample, generateTree, kilnBin, RawServer, tempDir } from '../tests/lib/kiln.mjs';
import { serveBench, serveTable, SERVE_TARGET } from './serve.mjs';

const benchDir = path.dirname(fileURLToPath(import.meta.url));
const buildDir = process.env.KILN_BUILD ?? path.join(benchDir, '..', 'build');
const quick = !!process.env.BENCH_QUICK;
const N_START = quick ? 5 : 20;
const N_CALLS = quick ? 10 : 50;
const N_SEARCH = quick ? 3 : 7;
const TREE_FILES = Number(process.env.BENCH_TREE_FILES ?? 50000);
const N_SANDBOX = quick ? 20 : 100; // rounds for kiln, fork/exec, unshare, bwrap
const N_SRT = quick ? 5 : 20; // srt is a Node CLI (~0.3-0.8 s a run): fewer rounds
const ONLY = process.env.BENCH_ONLY;
const SB_TARGETS = { fresh: 3, session: 1.5 }; // ms, median tools/call round trip

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


// ---- sandbox start-up ------------------------------------------------------------------------
const srtPkg = path.join(benchDir, 'node_modules', '@anthropic-ai', 'sandbox-runtime');
const srtBin = path.join(benchDir, 'node_modules', '.bin', 'srt');

// One external command, run as a whole process with spawnSync. Returns the time, or the reason it
// cannot run here.
function runExternal(argv, cwd) {
  const t0 = nowMs();
  const r = spawnSync(argv[0], argv.slice(1), { cwd, stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8', timeout: 30000 });
  const dt = nowMs() - t0;
  if (r.error) return { error: r.error.code === 'ENOENT' ? `${argv[0]} not installed` : String(r.error.message) };
  if (r.status !== 0) {
    const why = (r.stderr ?? '').trim().split('\n').filter(Boolean).slice(-1)[0] ?? '';
    return { error: `exit ${r.status ?? r.signal}${why ? `: ${why.slice(0, 160)}` : ''}` };
  }
  return { ms: dt };
}

function onPath(cmd) {
  return (process.env.PATH ?? '').split(':').some((d) => d && fs.existsSync(path.join(d, cmd)));
}

// The setups, in table order. `argv` is what runs; `shown` is what the report prints.
function sandboxPeers(ws, srtSettings) {
  const bwrapMin = ['bwrap', '--unshare-all', '--ro-bind', '/usr', '/usr', '--symlink', 'usr/bin', '/bin',
    '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--proc', '/proc', '--dev', '/dev',
    '--tmpfs', '/tmp', '/bin/true'];
  // tmpfs /tmp before the workspace bind: the workspace copy itself lives under /tmp.
  const bwrapRoot = ['bwrap', '--unshare-all', '--ro-bind', '/', '/', '--proc', '/proc', '--dev', '/dev',
    '--tmpfs', '/tmp', '--bind', ws, ws, '--chdir', ws, '/bin/true'];
  const peers = [
    { key: 'fork', name: 'fork/exec /bin/true (floor)', argv: ['/bin/true'], n: N_SANDBOX },
    { key: 'unshare', name: 'unshare -Urmnp --fork /bin/true', argv: ['unshare', '-Urmnp', '--fork', '/bin/true'], n: N_SANDBOX },
    { key: 'bwrap-usr', name: 'bwrap --unshare-all, ro /usr + symlinks, /proc, /dev, tmpfs /tmp', argv: bwrapMin, n: N_SANDBOX },
    { key: 'bwrap-root', name: 'bwrap --unshare-all, --ro-bind / / + rw workspace, /proc, /dev, tmpfs /tmp', argv: bwrapRoot, n: N_SANDBOX },
    { key: 'srt', name: 'srt /bin/true (@anthropic-ai/sandbox-runtime CLI)', argv: [srtBin, '-s', srtSettings, '/bin/true'], n: N_SRT },
  ];
  for (const p of peers) {
    if (p.key === 'srt') {
      if (!fs.existsSync(srtBin)) p.missing = 'not installed in bench/node_modules (npm ci in bench/ failed?)';
      else if (!onPath('bwrap') || !onPath('socat')) p.missing = `srt needs ${['bwrap', 'socat'].filter((c) => !onPath(c)).join(' and ')} on Linux, not installed`;
    } else if (p.argv[0] !== '/bin/true' && !onPath(p.argv[0])) {
      p.missing = `${p.argv[0]} not installed${p.argv[0] === 'bwrap' ? ' (Debian package bubblewrap)' : ''}`;
    }
    if (!p.missing) {
      const probe = runExternal(p.argv, ws); // also the warm-up run
      if (probe.error) p.missing = `does not run here: ${probe.error}`;
    }
    p.times = [];
  }
  return peers;
}

async function sandboxStartup(ws) {
  const srtSettings = path.join(tempDir('kiln-bench-srt-'), 'srt-settings.json');
  // srt's built-in defaults (no network, no writes) plus the workspace writable, as kiln's sandbox has it.
  fs.writeFileSync(srtSettings, JSON.stringify({
    network: { allowedDomains: [], deniedDomains: [] },
    filesystem: { denyRead: [], allowRead: [], allowWrite: [ws], denyWrite: [] },
  }));
  const tmpBefore = new Set(fs.readdirSync(os.tmpdir()));
  const peers = sandboxPeers(ws, srtSettings);

  const kiln = { fresh: { times: [] }, session: { times: [] }, floor: { times: [] } };
  const c = await connectClient({ args: ['--workspace', ws], name: 'kiln-bench' });
  const call = async (name, args) => {
    const t0 = nowMs();
    const r = await c.client.callTool({ name, arguments: args }, undefined, { timeout: 60000 });
    const dt = nowMs() - t0;
    const sc = r.structuredContent;
    if (r.isError || !sc) return { error: (r.content ?? []).map((x) => x.text).join(' ').slice(0, 200) || 'no structuredContent' };
    if (name === 'sandbox_exec' && sc.exit_code !== 0) return { error: `exit_code ${sc.exit_code}, stop_reason ${sc.stop_reason}: ${String(sc.stderr ?? '').slice(0, 160)}` };
    return { ms: dt, sc };
  };
  let sandboxId;
  try {
    const created = await call('sandbox_create', {});
    if (created.error) kiln.session.error = `sandbox_create: ${created.error}`;
    else sandboxId = created.sc.sandbox_id;
    // Warm-up: one of each (the first calls pay for page faults and lazy set-up).
    for (const [k, name, args] of [['fresh', 'sandbox_exec', { command: ['/bin/true'] }],
      ['session', 'sandbox_exec', { command: ['/bin/true'], sandbox_id: sandboxId }], ['floor', 'sandbox_list', {}]]) {
      if (kiln[k].error) continue;
      const r = await call(name, args);
      if (r.error) kiln[k].error = r.error;
    }
    // Interleaved rounds, so a noisy neighbour hits every setup alike.
    for (let i = 0; i < N_SANDBOX; i++) {
      const steps = [
        ...peers.filter((p) => !p.missing && i < p.n).map((p) => () => {
          const r = runExternal(p.argv, ws);
          if (r.error) p.missing = `failed during the run: ${r.error}`; else p.times.push(r.ms);
        }),
        async () => { if (!kiln.fresh.error) { const r = await call('sandbox_exec', { command: ['/bin/true'] }); if (r.error) kiln.fresh.error = r.error; else kiln.fresh.times.push(r.ms); } },
        async () => { if (!kiln.session.error) { const r = await call('sandbox_exec', { command: ['/bin/true'], sandbox_id: sandboxId }); if (r.error) kiln.session.error = r.error; else kiln.session.times.push(r.ms); } },
        async () => { const r = await call('sandbox_list', {}); if (!r.error) kiln.floor.times.push(r.ms); },
      ];
      const off = i % steps.length; // rotate the order round by round
      for (let j = 0; j < steps.length; j++) await steps[(j + off) % steps.length]();
    }
  } finally {
    if (sandboxId) await c.client.callTool({ name: 'sandbox_destroy', arguments: { sandbox_id: sandboxId } }).catch(() => {});
    await c.close();
    // srt leaves a /tmp/srt-mux-<pid>-0.sock (and bridge sockets) behind per run: remove ours.
    for (const f of fs.readdirSync(os.tmpdir())) {
      if (!tmpBefore.has(f) && /^(srt-mux-|claude-(http|socks)-).*\.sock$/.test(f)) fs.rmSync(path.join(os.tmpdir(), f), { force: true });
    }
  }
  for (const k of Object.keys(kiln)) kiln[k].ms = kiln[k].times.length ? median(kiln[k].times) : undefined;
  for (const p of peers) p.ms = p.times.length ? median(p.times) : undefined;
  return { kiln, peers };
}

function sandboxTable(sb) {
  const base = sb.kiln.fresh.ms;
  const rows = [
    { name: 'kiln sandbox_exec, fresh strict sandbox (MCP round trip)', ...sb.kiln.fresh, n: sb.kiln.fresh.times.length, target: `< ${SB_TARGETS.fresh} ms`, limit: SB_TARGETS.fresh },
    { name: 'kiln sandbox_exec, session sandbox (MCP round trip)', ...sb.kiln.session, n: sb.kiln.session.times.length, target: `< ${SB_TARGETS.session} ms`, limit: SB_TARGETS.session },
    { name: 'kiln tools/call floor (sandbox_list, MCP round trip)', ...sb.kiln.floor, n: sb.kiln.floor.times.length },
    ...sb.peers.map((p) => ({ name: p.name, ms: p.ms, n: p.times.length, error: p.missing, external: true })),
  ];
  // What Node's own spawn of a process costs (the fork/exec row): an external figure less that is
  // the sandbox's own share.
  const spawnFloor = sb.peers.find((p) => p.key === 'fork')?.ms;
  const header = ['/bin/true in ...', 'median', 'less spawn floor', 'runs', 'ratio to kiln fresh', 'target'];
  const table = rows.map((r) => [
    r.name,
    r.ms === undefined ? (r.error ? 'n/a (see note)' : 'n/a') : fmt(r.ms, 'ms'),
    r.external && r.ms !== undefined && spawnFloor !== undefined ? fmt(r.ms - spawnFloor, 'ms') : '',
    String(r.n ?? 0),
    r.ms === undefined || base === undefined ? '-' : `${(r.ms / base).toFixed(2)}x`,
    r.limit ? (r.ms === undefined ? `${r.target} (no figure)` : `${r.target} ${r.ms < r.limit ? 'met' : 'NOT met'}`) : '',
  ]);
  const notes = rows.filter((r) => r.error).map((r) => `${r.name}: ${r.error}`);
  return { header, table, notes };
}

function printTable(header, table) {
  const widths = header.map((h, i) => Math.max(h.length, ...table.map((row) => row[i].length)));
  const line = (cells) => cells.map((c, i) => c.padEnd(widths[i])).join('  ');
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const row of table) console.log(line(row));
}

const mdTable = (header, table) => [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`,
  ...table.map((row) => `| ${row.join(' | ')} |`)];

const fmt = (x, unit) => (x === undefined ? '-' : `${x < 10 ? x.toFixed(2) : x.toFixed(1)} ${unit}`);

async function main() {
  const bin = kilnBin();
  const ws = copySample('kiln-bench-ws-');
  const m = machine();
  const version = spawnSync(bin, ['--version'], { encoding: 'utf8' }).stdout.trim();
  console.log(`Kiln bench: ${version} vs @modelcontextprotocol/server-filesystem ${peerVersion} and ${spawnSync('rg', ['--version'], { encoding: 'utf8' }).stdout.split('\n')[0]}`);
  console.log(`machine: ${m.nproc} cores, ${m.model}, kernel ${m.kernel}, load ${m.load}\n`);

  const srtVersion = fs.existsSync(srtPkg) ? JSON.parse(fs.readFileSync(path.join(srtPkg, 'package.json'), 'utf8')).version : undefined;
  const bwrapVersion = spawnSync('bwrap', ['--version'], { encoding: 'utf8' }).stdout?.trim() || 'bwrap missing';
  console.log(`sandbox peers: ${bwrapVersion}, srt ${srtVersion ?? 'missing'}, ${spawnSync('unshare', ['--version'], { encoding: 'utf8' }).stdout?.trim() || 'unshare missing'}\n`);

  if (ONLY === 'serve') {
    const sv = serveTable(await serveBench({ quick }));
    printTable(sv.header, sv.table);
    for (const n of sv.notes) console.log(`note: ${n}`);
    return;
  }
  if (ONLY === 'sandbox') {
    const sb = sandboxTable(await sandboxStartup(ws));
    printTable(sb.header, sb.table);
    for (const n of sb.notes) console.log(`note: ${n}`);
    return;
  }

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

  const sbRaw = await sandboxStartup(ws);
  const sb = sandboxTable(sbRaw);
  const sv = serveTable(await serveBench({ quick }));

  const header = ['figure', 'kiln', 'peer', 'ratio kiln/peer', 'target'];
  const table = rows.map((r) => [
    r.figure, fmt(r.kiln, r.unit), `${fmt(r.peer, r.unit)}${r.peerName ? ` (${r.peerName})` : ''}`,
    `${(r.kiln / r.peer).toFixed(2)}x`, r.target ? `${r.target} ${r.ok ? 'met' : 'NOT met'}` : '',
  ]);
  printTable(header, table);
  for (const r of rows) if (r.note) console.log(`note: ${r.figure.split(' (')[0]}: ${r.note}`);
  console.log(`note: start-up includes the harness's own spawn + pipe round trip, ${floor.toFixed(2)} ms (spawning cat); kiln less that: ${(kStart.startMs - floor).toFixed(2)} ms`);
  console.log('\nsandbox start-up, /bin/true (interleaved rounds, medians):');
  printTable(sb.header, sb.table);
  for (const n of sb.notes) console.log(`note: ${n}`);
  console.log('\nstatic serving, kiln serve vs nginx on loopback:');
  printTable(sv.header, sv.table);
  for (const n of sv.notes) console.log(`note: ${n}`);

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
    ...mdTable(header, table),
    '',
    '## Sandbox start-up: `/bin/true`',
    '',
    `Peers: ${bwrapVersion}, \`@anthropic-ai/sandbox-runtime\` ${srtVersion ?? '(missing)'} (\`srt\`), util-linux unshare.`,
    '',
    ...mdTable(sb.header, sb.table),
    '',
    ...(sb.notes.length ? ['Missing or failing here:', ...sb.notes.map((n) => `- ${n}`), ''] : []),
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
    `- sandbox start-up: ${N_SANDBOX} interleaved rounds (order rotated each round; srt only in the first`,
    `  ${N_SRT}), one warm-up run of each first. kiln: \`tools/call\` round trips through the official MCP SDK`,
    '  client in one warm session on a copy of examples/sample-project: `sandbox_exec {command: ["/bin/true"]}`',
    '  without `sandbox_id` (a fresh strict sandbox, created and destroyed per call), and with the',
    '  `sandbox_id` of one `sandbox_create` made before the rounds; `sandbox_list` shows what a',
    '  `tools/call` costs with no sandbox work. Each exec must answer `exit_code: 0`. Peers: whole',
    '  processes timed around Node\'s `spawnSync`, cwd the workspace. Node\'s own fork/exec is far dearer',
    '  than a small C program\'s (the fork/exec row), so "less spawn floor" subtracts it from each external',
    '  figure to show what the sandbox itself adds. The second bwrap binds the workspace read-write at',
    '  its real path, as kiln does.',
    '  srt runs with a settings file equal to its built-in defaults (no network, no reads denied) plus',
    '  the workspace writable; its per-run `/tmp/srt-mux-*.sock` leftovers are removed after the run.',
    `  Targets: fresh strict sandbox < ${SB_TARGETS.fresh} ms, session-sandbox exec < ${SB_TARGETS.session} ms (median round trip).`,
    '',
    '## Static serving: `kiln serve` vs nginx',
    '',
    ...mdTable(sv.header, sv.table),
    '',
    ...sv.notes.map((n) => `- ${n}`),
    `- Files published through the MCP \`publish\` tool (which starts the daemon); nginx serves the same bytes`,
    `  from a temp web root on another loopback port. wrk shares the machine's cores with the server it drives.`,
    `  Target: kiln at least ${SERVE_TARGET}x nginx's requests per second on the public rows.`,
    '',
  ].join('\n');
  fs.writeFileSync(path.join(benchDir, 'REPORT.md'), md);
  console.log(`\nwrote ${path.relative(process.cwd(), path.join(benchDir, 'REPORT.md'))}`);
}

main().catch((e) => {
  console.error(`bench failed: ${e.stack ?? e}`);
  process.exit(1);
});
