// Fault tests (issue 8): `kill -9` of `kiln mcp` at random points of an exec (fresh and session
// sandbox), a verify and a publish, and of `kiln serve` during a publish and while it serves; then a
// restart on the same state directory. After each: every SQLite database passes integrity_check,
// the killed runs say `interrupted`, no process, mount, cgroup or temp file of the killed server is
// left, no half-written version is ever served, and the workspace still works. A full disk (a small
// tmpfs as the state directory, mounted in a private mount namespace so nothing reaches the host)
// while a trace or an artifact is written must give a clear tool error and corrupt nothing.
// The kill points come from a seeded generator: the seed is printed, KILN_FAULT_SEED repeats it;
// KILN_FAULT_ITERATIONS (default 3) sets the kills per case.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';

import { RawServer, errorText, kilnBin, sleep, tempDir } from '../lib/kiln.mjs';
import { alive, readServeInfo, stopProcess } from '../lib/http.mjs';
import { probeSandbox } from '../lib/sandbox_probe.mjs';

const isRoot = process.getuid() === 0;
const SQLITE = ['/usr/bin/sqlite3', '/usr/local/bin/sqlite3'].find((p) => fs.existsSync(p));

// --- kill points ---------------------------------------------------------------------------------

const SEED = Number(process.env.KILN_FAULT_SEED) || crypto.randomInt(1, 2 ** 31 - 1);
console.log(`# faults: seed ${SEED} (KILN_FAULT_SEED=${SEED} repeats these kill points)`);
let rngState = SEED >>> 0;
function random() {  // mulberry32
  rngState = (rngState + 0x6d2b79f5) >>> 0;
  let t = rngState;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const randInt = (lo, hi) => lo + Math.floor(random() * (hi - lo + 1));

// --- processes, mounts, cgroups -------------------------------------------------------------------

function readProc(pid, file) {
  try {
    return fs.readFileSync(`/proc/${pid}/${file}`);
  } catch {
    return null;
  }
}

function pidNs(pid) {
  try {
    return fs.readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return null;
  }
}

// Live (not zombie) processes with parent and start time (pid + start time names one process).
function procTable() {
  const out = [];
  for (const n of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(n)) continue;
    const stat = readProc(n, 'stat')?.toString();
    if (!stat) continue;
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (f[0] === 'Z' || f[0] === 'X') continue;
    out.push({ pid: Number(n), ppid: Number(f[1]), start: f[19] });
  }
  return out;
}

// Everything below `pid` right now, and the pid namespaces they live in other than ours (the
// sandboxes'): after the kill nothing may be left in either.
function treeOf(pid) {
  const table = procTable();
  const kids = new Map();
  for (const p of table) {
    if (!kids.has(p.ppid)) kids.set(p.ppid, []);
    kids.get(p.ppid).push(p);
  }
  const found = [];
  const queue = [...(kids.get(pid) ?? [])];
  while (queue.length) {
    const p = queue.shift();
    found.push(p);
    queue.push(...(kids.get(p.pid) ?? []));
  }
  const own = pidNs('self');
  const namespaces = new Set(found.map((p) => pidNs(p.pid)).filter((ns) => ns && ns !== own));
  return { procs: found, namespaces };
}

// `kiln serve --state-dir HOME ... --daemon` is meant to outlive `kiln mcp`.
function isServeDaemon(pid, home) {
  const argv = (readProc(pid, 'cmdline')?.toString() ?? '').split('\0');
  const i = argv.indexOf('--state-dir');
  return argv[1] === 'serve' && i > 0 && argv[i + 1] === home && argv.includes('--daemon');
}

// Processes the killed server left: its former descendants, anything in its sandboxes' pid
// namespaces, and anything whose command line or environment names the test's folders or marker.
function leftProcesses(snap, { home, needles }) {
  const tracked = new Set(snap.procs.map((p) => `${p.pid}:${p.start}`));
  return procTable().filter((p) => {
    if (p.pid === process.pid || isServeDaemon(p.pid, home)) return false;
    if (tracked.has(`${p.pid}:${p.start}`)) return true;
    const ns = pidNs(p.pid);
    if (ns && snap.namespaces.has(ns)) return true;
    const cmd = readProc(p.pid, 'cmdline')?.toString() ?? '';
    if (needles.some((n) => cmd.includes(n))) return true;
    return (readProc(p.pid, 'environ')?.toString() ?? '').includes(`KILN_HOME=${home}`);
  }).map((p) => `${p.pid} ${(readProc(p.pid, 'cmdline')?.toString() ?? '?').replaceAll('\0', ' ').trim()}`);
}

// The host's mount table lines that name one of `paths` (sandboxes mount in their own namespace;
// nothing of a test may ever show here).
function mountsNaming(paths) {
  return fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter((l) => paths.some((p) => l.includes(p)));
}

// Cgroup folders of the sandboxes of server `pid`: kiln names each sandbox group
// sb_<id>.o<server pid>-<server start time> under <own group>/kiln, per v1 controller or on v2.
function cgroupsOf(pid) {
  const found = [];
  const re = new RegExp(`^sb_[0-9a-z]+\\.o${pid}-\\d+$`);
  const walk = (dir, depth) => {
    let entries;
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      if (!e.isDirectory()) continue;
      const p = path.join(dir, e.name);
      if (re.test(e.name)) found.push(p);
      else if (depth < 7) walk(p, depth + 1);
    }
  };
  walk('/sys/fs/cgroup', 0);
  return found;
}

async function waitFor(pred, ms = 10000, step = 50) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await pred();
    if (v || Date.now() > deadline) return v;
    await sleep(step);
  }
}

// --- state directory ------------------------------------------------------------------------------

function sqlite(db, sql) {
  const r = spawnSync(SQLITE, ['-batch', db, sql], { encoding: 'utf8', timeout: 60000 });
  if (r.status !== 0) throw new Error(`sqlite3 ${db} "${sql}": exit ${r.status}: ${r.stderr}`);
  return r.stdout;
}

// PRAGMA integrity_check of every database of the state directory (blobs and run output hold none).
function checkIntegrity(dir, where) {
  const dbs = [];
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory() && !['blobs', 'traces'].includes(e.name)) walk(path.join(d, e.name));
      else if (e.isFile() && e.name.endsWith('.db')) dbs.push(path.join(d, e.name));
    }
  };
  walk(dir);
  assert.ok(dbs.length >= 2, `${where}: the state directory holds its databases (found ${dbs.join(', ') || 'none'})`);
  for (const db of dbs) assert.equal(sqlite(db, 'PRAGMA integrity_check;').trim(), 'ok', `${where}: integrity_check of ${db}`);
  return dbs.length;
}

function runningTraces(dir) {
  // A kill in the first milliseconds can land after traces.db was created and before its tables
  // were: then no trace was written, so none was running.
  const db = path.join(dir, 'traces.db');
  if (sqlite(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'traces';").trim() === '0') return [];
  const out = sqlite(db, "SELECT id || ' ' || kind FROM traces WHERE status = 'running';");
  return out.split('\n').filter(Boolean).map((l) => ({ id: l.split(' ')[0], kind: l.split(' ')[1] }));
}

// Temp files Kiln keeps in the state directory while it works (blob copies, files being renamed
// into place, run folders): after a restart none of a dead server may remain.
function tempLeftovers(dir) {
  const left = [];
  const list = (sub) => {
    try {
      return fs.readdirSync(path.join(dir, sub)).map((n) => path.join(sub, n));
    } catch {
      return [];
    }
  };
  left.push(...list('blobs/tmp'), ...list('blobs/trash'), ...list('runs'));
  left.push(...list('.').filter((n) => /\.tmp/.test(n)));
  return left;
}

// Every trace folder belongs to a trace row (output of a run that was never recorded is garbage).
function strayTraceDirs(dir) {
  const ids = new Set(sqlite(path.join(dir, 'traces.db'), 'SELECT id FROM traces;').split('\n').filter(Boolean));
  let names = [];
  try {
    names = fs.readdirSync(path.join(dir, 'traces'));
  } catch {
    return [];
  }
  return names.filter((n) => !ids.has(n));
}

// --- a kiln mcp on raw stdio ----------------------------------------------------------------------

const daemonsOf = new Set();  // state dirs whose `kiln serve` daemons are stopped at the end
const holders = new Set();    // mount-namespace holders of the disk-full tests
after(async () => {
  for (const home of daemonsOf) {
    for (const p of procTable()) if (isServeDaemon(p.pid, home)) await stopProcess(p.pid, 3000);
  }
  for (const h of holders) h.kill('SIGKILL');
});

class Mcp {
  constructor({ home, ws, env = {}, bin, argv }) {
    this.home = home;
    daemonsOf.add(home);
    const args = ['--workspace', ws];
    this.raw = new RawServer({ home, args, env: { KILN_SERVE_LISTEN: '127.0.0.1:0', ...env }, bin, argv: argv && [...argv, 'mcp', ...args] });
    this.pid = this.raw.child.pid;
    this.id = 0;
  }

  static async start(opts) {
    const m = new Mcp(opts);
    await m.raw.initialize();
    return m;
  }

  // Sends a tools/call and returns its request id (the reply is `reply(id)`).
  send(name, args, { progress = false } = {}) {
    const id = ++this.id;
    const params = { name, arguments: args };
    if (progress) params._meta = { progressToken: `p${id}` };
    this.raw.send({ jsonrpc: '2.0', id, method: 'tools/call', params });
    return id;
  }

  async reply(id, timeoutMs = 120000) {
    const r = await this.raw.reply(id, timeoutMs);
    if (r.error) throw new Error(`JSON-RPC error: ${JSON.stringify(r.error)}`);
    return r.result;
  }

  call(name, args, timeoutMs) {
    return this.reply(this.send(name, args), timeoutMs);
  }

  async ok(name, args, timeoutMs) {
    const r = await this.call(name, args, timeoutMs);
    if (r.isError) assert.fail(`${name} ${JSON.stringify(args).slice(0, 200)} failed: ${errorText(r)}`);
    return r.structuredContent;
  }

  progressed(id, timeoutMs = 20000) {
    return this.raw.next({ timeoutMs, pred: (m) => m.method === 'notifications/progress' && m.params?.progressToken === `p${id}` });
  }

  async kill9() {
    process.kill(this.pid, 'SIGKILL');
    await this.raw.exited;
  }

  close() {
    return this.raw.close();
  }
}

// --- can this machine run the cases? ------------------------------------------------------------

// Where the sandbox cannot run, every case is skipped with kiln's reason, or fails with it under
// KILN_REQUIRE_SANDBOX=1 (tests/lib/sandbox_probe.mjs).
let sandboxTest;
{
  const home = tempDir('kiln-faults-probe-');
  const ws = tempDir('kiln-faults-probe-ws-');
  const m = await Mcp.start({ home, ws });
  ({ test: sandboxTest } = await probeSandbox('faults', (name, args) => m.call(name, args)));
  await m.close();
}
if (!SQLITE) throw new Error('sqlite3 (the CLI) is missing: scripts/install-deps.sh installs it');

// --- the kill -9 of kiln mcp ----------------------------------------------------------------------

// One iteration: a fresh state dir, `action(m)` starts the work and resolves once it should be
// killed; then kill -9, the checks on the dead state, a restart, the checks after it, and
// `afterRestart(m2)` shows the workspace still works.
async function killMcpDuring(t, { ws, marker, action, afterRestart, expectKind }) {
  const home = tempDir('kiln-faults-home-');
  const tmp = tempDir('kiln-faults-tmp-');
  const watched = [home, ws, tmp];
  const mountsBefore = mountsNaming(watched);
  const m = await Mcp.start({ home, ws, env: { TMPDIR: tmp } });
  const killedPid = m.pid;
  const info = await action(m);
  const snap = treeOf(killedPid);
  const cgBefore = cgroupsOf(killedPid);
  await m.kill9();

  // Dead: the sandboxes die with their server (parent-death signal, pid namespaces).
  const needles = [home, ws, marker];
  let left = [];
  await waitFor(() => (left = leftProcesses(snap, { home, needles })).length === 0, 10000);
  assert.deepEqual(left, [], 'processes left after kill -9 of kiln mcp');
  assert.deepEqual(mountsNaming(watched), mountsBefore, 'the host mount table changed');
  checkIntegrity(home, 'after kill -9');
  const running = runningTraces(home);
  const tempsAtKill = tempLeftovers(home).length;

  // Restarted: orphans marked interrupted, leftovers reclaimed.
  const m2 = await Mcp.start({ home, ws, env: { TMPDIR: tmp } });
  try {
    for (const tr of running) {
      const g = await m2.ok('trace_get', { trace_id: tr.id });
      const rec = g.trace ?? g;
      assert.equal(rec.status, 'interrupted', `trace ${tr.id} (${tr.kind}) of the killed server: ${JSON.stringify(rec).slice(0, 400)}`);
      assert.equal(rec.stop_reason, 'interrupted', `trace ${tr.id} stop_reason`);
    }
    const still = await m2.ok('trace_list', { status: 'running' });
    assert.deepEqual(still.traces, [], 'no trace of the killed server still says running');
    const cgLeft = await waitFor(() => cgroupsOf(killedPid).length === 0 || cgroupsOf(killedPid), 5000);
    assert.equal(cgLeft, true, `cgroup folders of the killed server after the restart: ${JSON.stringify(cgLeft)}`);
    assert.deepEqual(tempLeftovers(home), [], 'temp files of the killed server in the state directory after the restart');
    assert.deepEqual(fs.readdirSync(tmp), [], `files left in the server's TMPDIR ${tmp}`);
    assert.deepEqual(strayTraceDirs(home), [], 'trace output folders without a trace');
    await afterRestart(m2, info);
    checkIntegrity(home, 'after the restart');
  } finally {
    await m2.close();
  }
  assert.deepEqual(mountsNaming(watched), mountsBefore, 'the host mount table changed');
  return { interrupted: running.filter((r) => !expectKind || r.kind === expectKind).length, cgroups: cgBefore.length, temps: tempsAtKill };
}

async function execStillWorks(m2) {
  const r = await m2.ok('sandbox_exec', { command: 'echo still-works' });
  assert.equal(r.exit_code, 0, JSON.stringify(r));
  assert.match(r.stdout, /still-works/);
}

// A command that streams output and keeps a small process tree busy until it is killed.
const streamer = (marker) => `i=0; while [ $i -lt 100000 ]; do echo "line $i ${marker}"; i=$((i+1)); ` +
  `[ $((i % 200)) -eq 0 ] && sleep 0.02; done; sleep 60`;

// How a case spreads its kill points: iteration 0 always waits until the work is under way, the
// others are a coin toss between "under way + random" and "random after the call was sent".
async function killPoint(i, underWay, maxMs) {
  // Iteration 0 kills the moment the work is seen under way: summarise() requires that kill to
  // interrupt a running trace, and a random wait after it could outlast a fast run (a publish of
  // this tree takes ~200 ms).
  if (i === 0) return underWay();
  if (random() < 0.5) await underWay();
  await sleep(randInt(0, maxMs));
}

function summarise(t, name, results) {
  const interrupted = results.reduce((a, r) => a + r.interrupted, 0);
  t.diagnostic(`${name}: ${results.length} kills, ${interrupted} running traces marked interrupted, ` +
    `${results.map((r) => r.cgroups).join('/')} cgroup folders and ${results.map((r) => r.temps).join('/')} temp files ` +
    'left at the kills (all gone after the restart)');
  // The first iteration kills while the run is under way: its trace must have been interrupted.
  assert.ok(results[0].interrupted > 0, `${name}: the kill while the run was under way interrupted no trace`);
}

const ITERATIONS = Number(process.env.KILN_FAULT_ITERATIONS) || 3;

// ITERATIONS kills of kiln mcp on one workspace, each with its own marker: `round(i, ws, marker)`
// prepares the workspace and gives killMcpDuring's action and afterRestart; `check(result, i)`
// asserts on what each kill left.
async function killRounds(t, name, expectKind, round, check = () => {}) {
  const ws = tempDir('kiln-faults-ws-');
  const results = [];
  for (let i = 0; i < ITERATIONS; i++) {
    const marker = `kfault${crypto.randomBytes(5).toString('hex')}`;
    results.push(await killMcpDuring(t, { ws, marker, expectKind, ...round(i, ws, marker) }));
    check(results[i], i);
  }
  summarise(t, name, results);
}

sandboxTest('kill -9 of kiln mcp during sandbox_exec in a fresh sandbox', async (t) => {
  await killRounds(t, 'fresh sandbox exec', 'exec', (i, ws, marker) => ({
    action: async (m) => {
      const id = m.send('sandbox_exec', { command: streamer(marker), timeout_s: 120 }, { progress: true });
      await killPoint(i, () => m.progressed(id), 600);
    },
    afterRestart: execStillWorks,
  }), (r, i) => {
    if (isRoot && i === 0) assert.ok(r.cgroups > 0, 'control: as root a sandbox has cgroup folders to leave behind');
  });
});

sandboxTest('kill -9 of kiln mcp during sandbox_exec in a session sandbox', async (t) => {
  await killRounds(t, 'session sandbox exec', 'exec', (i, ws, marker) => ({
    action: async (m) => {
      const sb = await m.ok('sandbox_create', {});
      // A background process too: the session's whole tree must go with the server.
      await m.ok('sandbox_exec', { sandbox_id: sb.sandbox_id, command: `sleep 300 # ${marker}`, background: true });
      const id = m.send('sandbox_exec', { sandbox_id: sb.sandbox_id, command: streamer(marker), timeout_s: 120 }, { progress: true });
      await killPoint(i, () => m.progressed(id), 600);
    },
    afterRestart: async (m2) => {
      await execStillWorks(m2);
      const sb = await m2.ok('sandbox_create', {});
      const r = await m2.ok('sandbox_exec', { sandbox_id: sb.sandbox_id, command: 'echo session-works' });
      assert.match(r.stdout, /session-works/);
      await m2.ok('sandbox_destroy', { sandbox_id: sb.sandbox_id });
    },
  }), (r) => {
    if (isRoot) assert.ok(r.cgroups > 0, 'control: as root a session sandbox has cgroup folders to leave behind');
  });
});

sandboxTest('kill -9 of kiln mcp during verify', async (t) => {
  await killRounds(t, 'verify', 'verify', (i, ws, marker) => {
    fs.writeFileSync(path.join(ws, 'kiln.json'), JSON.stringify({
      verify: [
        { name: 'slow', run: `for i in $(seq 1 60); do echo "step $i ${marker}"; sleep 0.05; done` },
        { name: 'quick', run: 'echo quick-check' },
      ],
    }));
    return {
      action: async (m) => {
        const id = m.send('verify', {}, { progress: true });
        await killPoint(i, () => m.progressed(id), 1500);
      },
      afterRestart: async (m2) => {
        const v = await m2.ok('verify', { checks: ['quick'] });
        assert.equal(v.status, 'pass', JSON.stringify(v));
      },
    };
  });
});

// A folder with many small files and a few large ones, with the bytes of every file.
function makePublishTree(root, { small = 1500, large = 3, largeBytes = 6 << 20 } = {}) {
  const files = new Map();
  for (let i = 0; i < small; i++) {
    const rel = `site/d${i % 30}/f${i}.txt`;
    const body = Buffer.from(`file ${i} ${crypto.randomBytes(24).toString('hex')}\n`.repeat(8));
    fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
    fs.writeFileSync(path.join(root, rel), body);
    files.set(rel.slice('site/'.length), body);
  }
  for (let i = 0; i < large; i++) {
    const rel = `site/big/blob${i}.bin`;
    const body = crypto.randomBytes(largeBytes);
    fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
    fs.writeFileSync(path.join(root, rel), body);
    files.set(rel.slice('site/'.length), body);
  }
  return files;
}

async function fetchBytes(url) {
  try {
    const r = await fetch(url);
    return { status: r.status, body: Buffer.from(await r.arrayBuffer()) };
  } catch (e) {
    return { status: 0, error: String(e.cause?.code ?? e.message) };
  }
}

// Every listed version serves the complete bytes of what it published; version numbers that were
// never completed answer 404. `versions` maps a version number to its files (path -> Buffer).
async function checkServed(base, name, versions, maxNumber, sample = 25) {
  for (let n = 1; n <= maxNumber; n++) {
    const files = versions.get(n);
    const paths = files ? pick([...files.keys()], sample) : ['index.html', 'big/blob0.bin'];
    for (const p of paths) {
      const r = await fetchBytes(`${base}/a/${name}/v/${n}/${p}`);
      if (!files) {
        assert.equal(r.status, 404, `version ${n} was never completed but ${p} answers ${r.status}`);
        continue;
      }
      assert.equal(r.status, 200, `version ${n}: ${p} answers ${r.status} ${r.error ?? ''}`);
      assert.ok(r.body.equals(files.get(p)), `version ${n}: ${p} is not the published bytes (${r.body.length} of ${files.get(p).length})`);
    }
  }
}

// The large files and a random sample of the rest.
function pick(paths, n) {
  const big = paths.filter((p) => p.startsWith('big/'));
  const rest = paths.filter((p) => !p.startsWith('big/'));
  const out = [...big];
  for (let i = 0; i < n && rest.length; i++) out.push(rest.splice(randInt(0, rest.length - 1), 1)[0]);
  return out;
}

function baseOf(url) {
  return new URL(url).origin;
}

sandboxTest('kill -9 of kiln mcp during publish of many and large files', async (t) => {
  const ws = tempDir('kiln-faults-pubws-');
  const files = makePublishTree(ws);
  // Automatic checkpoints would store these files first, and the publish would then copy nothing
  // (one blob store): the kill must land while the publish itself copies.
  fs.writeFileSync(path.join(ws, 'kiln.json'), JSON.stringify({ checkpoints: { auto: false } }));
  const results = [];
  for (let i = 0; i < ITERATIONS; i++) {
    let home;
    results.push(await killMcpDuring(t, {
      ws, marker: 'kiln-faults-no-marker', expectKind: 'publish',
      action: async (m) => {
        home = m.home;
        // Blobs already there (automatic checkpoints share the store) do not count.
        const blobs = () => {
          try {
            return fs.readdirSync(path.join(home, 'blobs', 'sha256'), { recursive: true }).length;
          } catch {
            return 0;
          }
        };
        const before = blobs();
        m.send('publish', { path: 'site', name: 'bulk' });
        // Under way: the publish has copied blobs of its own into the store.
        const underWay = () => waitFor(() => blobs() > before, 20000, 5);
        await killPoint(i, underWay, 400);
      },
      afterRestart: async (m2) => {
        const before = await m2.ok('publish_list', {});
        const listed = before.artifacts.find((a) => a.name === 'bulk');
        const p = await m2.ok('publish', { path: 'site', name: 'bulk' });
        const versions = new Map();
        for (const v of listed?.versions ?? []) versions.set(v.number, files);
        versions.set(p.version, files);
        const maxNumber = Math.max(...versions.keys());
        await checkServed(baseOf(p.url), 'bulk', versions, maxNumber, 10);
        for (const pid of procTable().filter((x) => isServeDaemon(x.pid, home)).map((x) => x.pid)) await stopProcess(pid, 3000);
      },
    }));
  }
  summarise(t, 'publish', results);
});

// --- the kill -9 of kiln serve --------------------------------------------------------------------

// A small site plus one large file, with new bytes at every call.
function writeSite(ws, tag) {
  const files = new Map([
    ['index.html', Buffer.from(`<!doctype html><title>${tag}</title><h1>${tag}</h1>\n`)],
    ['style.css', Buffer.from(`h1 { content: "${tag}" }\n`)],
    ['big/blob0.bin', crypto.randomBytes(4 << 20)],
  ]);
  for (let i = 0; i < 40; i++) files.set(`pages/p${i}.txt`, Buffer.from(`${tag} page ${i} ${crypto.randomBytes(16).toString('hex')}\n`));
  fs.rmSync(path.join(ws, 'site'), { recursive: true, force: true });
  for (const [rel, body] of files) {
    fs.mkdirSync(path.dirname(path.join(ws, 'site', rel)), { recursive: true });
    fs.writeFileSync(path.join(ws, 'site', rel), body);
  }
  return files;
}

const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');

// Fetches the latest version's files over and over until stopped; every 200 is kept (path, hash)
// to be matched against the versions that completed.
function startReader(getBase, name, paths) {
  const seen = [];
  let stop = false;
  const done = (async () => {
    while (!stop) {
      const p = paths[randInt(0, paths.length - 1)];
      const r = await fetchBytes(`${getBase()}/a/${name}/${p}`);
      if (r.status === 200) seen.push({ p, hash: sha(r.body), bytes: r.body.length });
      else if (r.status !== 0 && r.status !== 404) seen.push({ p, status: r.status });
      if (r.status === 0) await sleep(10);
    }
  })();
  return { seen, async stop() { stop = true; await done; } };
}

function checkSeen(seen, versions) {
  const known = new Set();
  for (const files of versions.values()) for (const [p, body] of files) known.add(`${p} ${sha(body)}`);
  for (const s of seen) {
    assert.ok(s.hash, `the artifact server answered ${s.status} for ${s.p}`);
    assert.ok(known.has(`${s.p} ${s.hash}`), `${s.p} was served with ${s.bytes} bytes that are no complete version's`);
  }
}

// serve.json names a live `kiln serve` for this state dir, other than `notPid`, that answers.
async function checkServeJson(home, notPid) {
  const info = readServeInfo(home);
  assert.ok(info, 'serve.json exists');
  assert.notEqual(info.pid, notPid, 'serve.json still names the killed daemon');
  assert.ok(alive(info.pid) && isServeDaemon(info.pid, home), `serve.json names pid ${info.pid}, which is no kiln serve of ${home}`);
  assert.equal(fs.realpathSync(info.state_dir), fs.realpathSync(home), 'serve.json state_dir');
  const h = await fetchBytes(`${info.url}/healthz`);
  assert.equal(h.status, 200, `${info.url}/healthz`);
  assert.equal(JSON.parse(h.body.toString()).service, 'kiln-serve');
  return info;
}

sandboxTest('kill -9 of kiln serve during publishes and while serving', async (t) => {
  const home = tempDir('kiln-faults-serve-');
  const ws = tempDir('kiln-faults-servews-');
  const versions = new Map();
  let files = writeSite(ws, 'v-first');
  const m = await Mcp.start({ home, ws });
  try {
    let p = await m.ok('publish', { path: 'site', name: 'live' });
    versions.set(p.version, files);
    let base = baseOf(p.url);
    const paths = [...files.keys()];

    // During a publish: the daemon dies at a random point of the copy; the publish must still
    // answer with a URL that works (a new daemon), and nothing half-written is ever served.
    let landed = 0;
    for (let i = 0; i < ITERATIONS; i++) {
      files = writeSite(ws, `v-${i}-${crypto.randomBytes(4).toString('hex')}`);
      const daemon = readServeInfo(home).pid;
      const reader = startReader(() => base, 'live', paths);
      try {
        await sleep(randInt(0, 100));
        const id = m.send('publish', { path: 'site', name: 'live' });
        await sleep(randInt(0, 250));
        process.kill(daemon, 'SIGKILL');
        const r = await m.reply(id);
        assert.ok(!r.isError, `publish while its server was killed: ${errorText(r)}`);
        p = r.structuredContent;
        versions.set(p.version, files);
        await waitFor(() => !alive(daemon), 5000);
        assert.ok(!alive(daemon), 'the killed daemon is gone');
        if (readServeInfo(home)?.pid === daemon) {
          // The publish had found its server alive before the kill landed: the next one starts
          // a new server.
          files = writeSite(ws, `v-${i}-again`);
          p = await m.ok('publish', { path: 'site', name: 'live' });
          versions.set(p.version, files);
        } else {
          landed++;
        }
        const info = await checkServeJson(home, daemon);
        assert.equal(baseOf(p.url), info.url, 'the publish answers with the new daemon\'s URL');
        base = info.url;
        await sleep(100);
      } finally {
        await reader.stop();
      }
      checkSeen(reader.seen, versions);
      checkIntegrity(home, `after killing kiln serve during publish ${i + 1}`);
      await checkServed(base, 'live', versions, p.version, 10);
    }

    // While serving: the daemon dies in the middle of a large response. The client sees a broken
    // response (never a complete-looking wrong one); the next publish starts a new daemon.
    const daemon = readServeInfo(home).pid;
    const big = await fetch(`${base}/a/live/big/blob0.bin`);
    assert.equal(big.status, 200);
    const reader = big.body.getReader();
    const first = await reader.read();
    assert.ok(!first.done && first.value.length > 0, 'a first chunk of the large file');
    process.kill(daemon, 'SIGKILL');
    let got = first.value.length;
    let broken = false;
    try {
      for (;;) {
        const c = await reader.read();
        if (c.done) break;
        got += c.value.length;
      }
    } catch {
      broken = true;
    }
    const whole = files.get('big/blob0.bin').length;
    assert.ok(broken || got === whole, `a response cut by the kill ended as if complete (${got} of ${whole} bytes)`);
    await waitFor(() => !alive(daemon), 5000);
    const listed = await m.ok('publish_list', {});
    assert.ok(listed.artifacts.some((a) => a.name === 'live'), 'publish_list still lists the artifact');
    files = writeSite(ws, 'v-after-serving-kill');
    p = await m.ok('publish', { path: 'site', name: 'live' });
    versions.set(p.version, files);
    const info = await checkServeJson(home, daemon);
    await checkServed(info.url, 'live', versions, p.version, 10);
    checkIntegrity(home, 'after killing kiln serve while serving');
    t.diagnostic(`${ITERATIONS + 1} daemons killed (${landed} while a publish copied), ${versions.size} versions all served whole`);
  } finally {
    await m.close();
  }
});

// --- a full disk -----------------------------------------------------------------------------------

// A tmpfs of `sizeMb` as the state directory, mounted in a private mount namespace held by a
// `sleep` (so a test that dies leaves no mount on the host); kiln runs in that namespace through
// nsenter, and the test reaches the files through /proc/<holder>/root.
async function tinyStateDir(t, sizeMb) {
  const home = tempDir('kiln-faults-full-');
  const holder = spawn('unshare', ['-m', '--propagation', 'private', '/bin/sh', '-c',
    `mount -t tmpfs -o size=${sizeMb}m,mode=0700 kiln-faults-full "$0" && echo ready && exec sleep 600`, home],
  { stdio: ['ignore', 'pipe', 'pipe'] });
  holders.add(holder);
  let out = '';
  holder.stdout.on('data', (c) => { out += c; });
  holder.stderr.on('data', (c) => { out += c; });
  const ok = await waitFor(() => out.includes('ready') || holder.exitCode !== null, 10000);
  if (!ok || !out.includes('ready')) throw new Error(`could not mount a tmpfs in a private namespace: ${out}`);
  t.after(() => holder.kill('SIGKILL'));
  const view = `/proc/${holder.pid}/root${home}`;
  const start = (ws) => Mcp.start({ home, ws, bin: '/usr/bin/nsenter', argv: ['-t', String(holder.pid), '-m', '--', kilnBin()] });
  return { home, view, start, holder };
}

const FULL_TEXT = /full|no space/i;
const WHAT_TO_DO = /free|KILN_HOME|larger|delete|remove/i;

sandboxTest('a full state directory while a run\'s output is written', { skip: !isRoot && 'needs root to mount a tmpfs in a private mount namespace' }, async (t) => {
  const { view, start } = await tinyStateDir(t, 8);
  const ws = tempDir('kiln-faults-fullws-');
  const m = await start(ws);
  try {
    await execStillWorks(m);
    fs.writeFileSync(path.join(view, 'ballast'), Buffer.alloc(2 << 20, 1));
    const r = await m.call('sandbox_exec', { command: "head -c 30000000 /dev/zero | tr '\\0' y; echo done-writing >&2" });
    const text = errorText(r);
    assert.equal(r.isError, true, `a run whose output filled the state directory is a tool error, got: ${text.slice(0, 400)}`);
    assert.match(text, FULL_TEXT, 'the error says the state directory is full');
    assert.match(text, WHAT_TO_DO, 'the error says what to do');
    t.diagnostic(`the error: ${text.slice(0, 300)}`);
    assert.equal(m.raw.exitCode, undefined, 'kiln mcp is still running');
    fs.rmSync(path.join(view, 'ballast'));
    await execStillWorks(m);
    const list = await m.ok('trace_list', { kind: 'exec' });
    assert.deepEqual(list.traces.filter((x) => x.status === 'running'), [], 'no trace is left running');
    checkIntegrity(view, 'after the disk filled');
  } finally {
    await m.close();
  }
  checkIntegrity(view, 'after the server stopped');
});

sandboxTest('a full state directory while an artifact is written', { skip: !isRoot && 'needs root to mount a tmpfs in a private mount namespace' }, async (t) => {
  const { home, view, start } = await tinyStateDir(t, 8);
  daemonsOf.add(home);
  const ws = tempDir('kiln-faults-fullws-');
  const site = writeSite(ws, 'v-before-full');
  site.delete('big/blob0.bin');
  fs.rmSync(path.join(ws, 'site', 'big'), { recursive: true });
  for (let i = 0; i < 3; i++) {
    fs.mkdirSync(path.join(ws, 'huge'), { recursive: true });
    fs.writeFileSync(path.join(ws, 'huge', `part${i}.bin`), crypto.randomBytes(4 << 20));
  }
  const m = await start(ws);
  try {
    const v1 = await m.ok('publish', { path: 'site', name: 'kept' });
    const r = await m.call('publish', { path: 'huge', name: 'huge' });
    const text = errorText(r);
    assert.equal(r.isError, true, `a publish bigger than the free space is a tool error, got: ${text.slice(0, 400)}`);
    assert.match(text, FULL_TEXT, 'the error says the state directory is full');
    assert.match(text, WHAT_TO_DO, 'the error says what to do');
    t.diagnostic(`the error: ${text.slice(0, 300)}`);
    assert.equal(m.raw.exitCode, undefined, 'kiln mcp is still running');
    assert.deepEqual(tempLeftovers(view), [], 'temp files of the failed publish');
    const list = await m.ok('publish_list', {});
    const huge = list.artifacts.find((a) => a.name === 'huge');
    assert.ok(!huge || huge.versions.length === 0, `the failed publish left a version: ${JSON.stringify(huge)}`);
    const base = baseOf(v1.url);
    assert.equal((await fetchBytes(`${base}/a/huge/v/1/part0.bin`)).status, 404, 'no version of the failed publish is served');
    await checkServed(base, 'kept', new Map([[v1.version, site]]), v1.version, 50);
    const traces = await m.ok('trace_list', { kind: 'publish' });
    assert.deepEqual(traces.traces.filter((x) => x.status === 'running'), [], 'no publish trace is left running');
    // The failed copy gave its space back: a second version of the small site fits.
    const site2 = writeSite(ws, 'v-after-full');
    site2.delete('big/blob0.bin');
    fs.rmSync(path.join(ws, 'site', 'big'), { recursive: true });
    const v2 = await m.ok('publish', { path: 'site', name: 'kept' });
    await checkServed(base, 'kept', new Map([[v1.version, site], [v2.version, site2]]), v2.version, 50);
    checkIntegrity(view, 'after the disk filled');
  } finally {
    await m.close();
    const info = readServeInfo(view);
    if (info?.pid) await stopProcess(info.pid, 3000);
  }
});
