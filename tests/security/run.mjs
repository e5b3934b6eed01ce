#!/usr/bin/env node
// Runs the security suite (tests/security/*.test.mjs) as the current user and, when that is root,
// a second time as the unprivileged user `kilntest` (created with useradd if absent), then prints
// one line per case and user: pass, FAIL or skip (with the reason).
//
//   KILN_BIN=build/kiln node tests/security/run.mjs [--only root|user] [FILE...]
//
// Exit status: 1 if any test failed for either user, else 0. When kilntest cannot reach the
// checkout (a CI clone under /root, mode 0700), its run uses a copy staged by
// scripts/stage-for-user.sh in /tmp. When it cannot run even so (no runuser, no cc, nowhere to
// stage), that run is reported as not run with the reason: a skip, or a failure under
// KILN_REQUIRE_SANDBOX=1 (CI), where the plain-user half of SANDBOX_CASES must run.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const testsDir = path.resolve(here, '..');
const repoRoot = path.resolve(testsDir, '..');
const USER = 'kilntest';

const args = process.argv.slice(2);
let only = null;
const files = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--only') only = args[++i];
  else files.push(path.resolve(args[i]));
}
const suite = files.length ? files
  : fs.readdirSync(here).filter((f) => f.endsWith('.test.mjs')).sort().map((f) => path.join(here, f));

const kilnBin = path.resolve(process.env.KILN_BIN ?? path.join(repoRoot, 'build', 'kiln'));
if (!fs.existsSync(kilnBin)) {
  console.error(`kiln binary not found at ${kilnBin}: build it or set KILN_BIN`);
  process.exit(2);
}
const requireAll = process.env.KILN_REQUIRE_SANDBOX === '1';

// Folders to remove however the run ends; a signal is passed on to the running suite, whose end
// lets the cleanup below run before this process exits.
const cleanup = [];
const removeAll = () => { for (const d of cleanup.splice(0)) fs.rmSync(d, { recursive: true, force: true }); };
process.on('exit', removeAll);
let child = null;
let interrupted = null;
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => { interrupted ??= sig; child?.kill(sig); });
}

// node --test with the spec reporter on our stdout and TAP into a file we parse.
async function runSuite(label, { wrap = [], env, cwd = testsDir, bin = kilnBin, files = suite }) {
  const tapDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-sec-tap-'));
  fs.chmodSync(tapDir, 0o777);
  const tapFile = path.join(tapDir, 'results.tap');
  const nodeArgs = ['--test', '--test-concurrency=1', '--test-reporter=spec', '--test-reporter-destination=stdout',
    '--test-reporter=tap', `--test-reporter-destination=${tapFile}`, ...files];
  console.log(`\n===== security suite as ${label} (KILN_BIN=${bin}) =====`);
  const argv = [...wrap, process.execPath, ...nodeArgs];
  const r = await new Promise((resolve) => {
    child = spawn(argv[0], argv.slice(1), { cwd, env, stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('error', (error) => resolve({ status: null, error }));
    child.on('close', (status) => resolve({ status }));
  });
  child = null;
  let tap = '';
  try { tap = fs.readFileSync(tapFile, 'utf8'); } catch { /* the run died before writing */ }
  fs.rmSync(tapDir, { recursive: true, force: true });
  return { label, status: r.status, results: parseTap(tap), error: r.error };
}

// Top-level "ok/not ok" lines (tests are not nested in this suite).
function parseTap(tap) {
  const out = [];
  for (const line of tap.split('\n')) {
    const m = /^(not ok|ok) \d+ - (.*?)(?: # (SKIP|TODO)\b ?(.*))?$/.exec(line);
    if (!m) continue;
    // A TODO test is a known open finding: reported, never counted as a pass or a failure.
    const status = m[3] === 'SKIP' ? 'skip' : m[3] === 'TODO' ? 'todo' : m[1] === 'ok' ? 'pass' : 'FAIL';
    out.push({ name: m[2], status, reason: m[4] ?? '' });
  }
  return out;
}

const asUser = (user, ...argv) => spawnSync('runuser', ['-u', user, '--', ...argv], { encoding: 'utf8' });

// What the kilntest run reads and runs, under `tests` (tests/ or its staged copy) and `bin` (kiln).
function needs({ tests, bin, files }) {
  return [[bin, 'x'], [path.join(path.dirname(bin), 'kiln-sandbox'), 'x'], [process.execPath, 'x'],
    [path.join(tests, 'security', 'lib.mjs'), 'r'], [path.join(tests, 'security', 'probes', 'probe.c'), 'r'],
    [path.join(tests, 'lib', 'kiln.mjs'), 'r'], [path.join(tests, 'node_modules', '@modelcontextprotocol', 'sdk', 'package.json'), 'r'],
    ...files.map((f) => [f, 'r'])];
}

// Why `user` cannot reach those paths (the first reason and how many more), or null when it can.
// One runuser for all of them; for each path it cannot reach, the outermost folder it cannot enter.
const REACH = `for s; do m=\${s%%:*}; p=\${s#*:}; test -$m "$p" && continue; b=; d=$(dirname "$p")
  while [ "$d" != / ]; do test -x "$d" || b=$d; d=$(dirname "$d"); done; printf '%s\\t%s\\t%s\\n' "$m" "$p" "$b"; done`;
function unreachable(user, need) {
  const problems = [];
  const present = [];
  for (const [p, mode] of need) {
    if (fs.existsSync(p)) present.push([p, mode]);
    else if (!p.endsWith('kiln-sandbox')) problems.push(`${p} does not exist`);
  }
  const r = asUser(user, 'sh', '-c', REACH, 'sh', ...present.map(([p, mode]) => `${mode}:${p}`));
  if (r.status !== 0) problems.push(`runuser -u ${user} failed: ${r.stderr.trim()}`);
  for (const line of r.stdout.split('\n').filter(Boolean)) {
    const [mode, p, blocker] = line.split('\t');
    problems.push(`${user} cannot ${mode === 'x' ? 'execute' : 'read'} ${p}${blocker ? ` (no search permission on ${blocker}: needs o+x)` : ''}`);
  }
  if (!problems.length) return null;
  return problems.length === 1 ? problems[0] : `${problems[0]} (and ${problems.length - 1} more)`;
}

function ensureUser(user) {
  if (spawnSync('id', ['-u', user]).status === 0) return null;
  const r = spawnSync('useradd', ['--no-create-home', '--home-dir', '/nonexistent', '--shell', '/usr/sbin/nologin', '--user-group', user], { encoding: 'utf8' });
  return r.status === 0 ? null : `useradd ${user} failed: ${r.stderr.trim()}`;
}

// A copy of what the run needs in /tmp (scripts/stage-for-user.sh): { dir } or { error }.
function stage(user) {
  const outside = suite.filter((f) => path.relative(here, f).startsWith('..'));
  if (outside.length) return { error: `${outside.join(', ')} is not in tests/security, so it cannot be staged` };
  const r = spawnSync(path.join(repoRoot, 'scripts', 'stage-for-user.sh'),
    [user, path.dirname(kilnBin), 'tests/package.json', 'tests/lib', 'tests/security', 'tests/node_modules'],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const dir = r.stdout.trim();
  if (r.status !== 0 || !dir) return { error: r.stderr.trim() || `stage-for-user.sh exited with ${r.status ?? r.signal}` };
  cleanup.push(dir);
  return { dir };
}

// Where kilntest runs the suite from: the checkout when it can reach it, else a staged copy.
function userLayout(user) {
  if (spawnSync('sh', ['-c', 'command -v runuser']).status !== 0) return { why: 'runuser is not installed' };
  const noUser = ensureUser(user);
  if (noUser) return { why: noUser };
  if (asUser(user, 'cc', '--version').status !== 0) return { why: `${user} cannot run cc (the probes are compiled at test time)` };
  const inPlace = { tests: testsDir, bin: kilnBin, files: suite };
  const blocked = unreachable(user, needs(inPlace));
  if (!blocked) return inPlace;
  console.log(`\n${blocked}: staging a copy for ${user}`);
  const s = stage(user);
  if (s.error) return { why: `${blocked}; and staging a copy failed: ${s.error}` };
  const staged = {
    tests: path.join(s.dir, 'tests'), bin: path.join(s.dir, 'build', 'kiln'),
    files: suite.map((f) => path.join(s.dir, 'tests', 'security', path.relative(here, f))), staged: true,
  };
  const still = unreachable(user, needs(staged));
  return still ? { why: `${blocked}; and in the staged copy: ${still}` } : staged;
}

async function runAsUser(user) {
  const where = userLayout(user);
  if (where.why) {
    console.log(`\n===== security suite as ${user}: NOT RUN: ${where.why}`);
    return { label: user, notRun: where.why };
  }
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-sec-kilntest-home-'));
  cleanup.push(home);
  const uid = Number(spawnSync('id', ['-u', user], { encoding: 'utf8' }).stdout);
  const gid = Number(spawnSync('id', ['-g', user], { encoding: 'utf8' }).stdout);
  fs.chownSync(home, uid, gid);
  const env = {
    HOME: home, USER: user, LOGNAME: user, PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    LANG: process.env.LANG ?? 'C.UTF-8', KILN_BIN: where.bin,
    ...(process.env.KILN_REQUIRE_SANDBOX ? { KILN_REQUIRE_SANDBOX: process.env.KILN_REQUIRE_SANDBOX } : {}),
  };
  // Sanitizer builds (make test-asan): kilntest's kiln processes report where root's do.
  for (const v of ['ASAN_OPTIONS', 'UBSAN_OPTIONS', 'LSAN_OPTIONS', 'KILN_SANITIZED']) {
    if (process.env[v]) env[v] = process.env[v];
  }
  const label = where.staged ? `${user} (from a copy staged in ${path.dirname(where.tests)})` : user;
  const run = await runSuite(label, { wrap: ['runuser', '-u', user, '--'], env, cwd: where.tests, bin: where.bin, files: where.files });
  removeAll();
  return { ...run, label: where.staged ? `${user}, from a staged copy` : user };
}

const runs = [];
const isRoot = process.getuid() === 0;
const baseEnv = { ...process.env, KILN_BIN: kilnBin };
if (only !== 'user') runs.push(await runSuite(isRoot ? 'root' : os.userInfo().username, { env: baseEnv }));
if (only !== 'root' && !interrupted) {
  // Not root: the current user is itself the plain user, so that half of SANDBOX_CASES ran above.
  if (!isRoot) runs.push({ label: USER, skipped: 'the runner is not root, so it cannot switch to the unprivileged user' });
  else runs.push(await runAsUser(USER));
}
removeAll();
if (interrupted) {
  console.log(`\nsecurity suite: interrupted by ${interrupted}`);
  process.exit(128 + os.constants.signals[interrupted]);
}

console.log('\n===== security suite summary =====');
let failed = 0;
for (const run of runs) {
  if (run.skipped) {
    console.log(`\n[${run.label}] SKIPPED: ${run.skipped}`);
    continue;
  }
  if (run.notRun) {
    // CI can run the suite as kilntest, so there a run that did not happen is a failure.
    if (!requireAll) {
      console.log(`\n[${run.label}] SKIPPED (not run): ${run.notRun}`);
      continue;
    }
    console.log(`\n[${run.label}] FAIL: not run as ${run.label}, and KILN_REQUIRE_SANDBOX=1 makes that a failure: ${run.notRun}`);
    console.log('  => 0 pass, 1 fail, 0 skipped, 0 open findings (todo)');
    failed++;
    continue;
  }
  const c = { pass: 0, FAIL: 0, skip: 0, todo: 0 };
  console.log(`\n[${run.label}]`);
  for (const t of run.results) {
    c[t.status]++;
    console.log(`  ${t.status.padEnd(4)}  ${t.name}${t.reason ? `  -- ${t.reason}` : ''}`);
  }
  if (!run.results.length) console.log(`  (no results: node exited with ${run.status}${run.error ? `, ${run.error.message}` : ''})`);
  console.log(`  => ${c.pass} pass, ${c.FAIL} fail, ${c.skip} skipped, ${c.todo} open findings (todo)`);
  failed += c.FAIL + (run.results.length ? 0 : 1);
}
process.exit(failed ? 1 : 0);
