#!/usr/bin/env node
// Runs the security suite (tests/security/*.test.mjs) as the current user and, when that is root,
// a second time as the unprivileged user `kilntest` (created with useradd if absent), then prints
// one line per case and user: pass, FAIL or skip (with the reason).
//
//   KILN_BIN=build/kiln node tests/security/run.mjs [--only root|user] [FILE...]
//
// Exit status: 1 if any test failed for either user, else 0. When the suite cannot run as
// kilntest (a path it cannot read, no runuser), that run is reported as skipped with the reason.
import { spawnSync } from 'node:child_process';
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

// node --test with the spec reporter on our stdout and TAP into a file we parse.
function runSuite(label, { wrap = [], env }) {
  const tapDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-sec-tap-'));
  fs.chmodSync(tapDir, 0o777);
  const tapFile = path.join(tapDir, 'results.tap');
  const nodeArgs = ['--test', '--test-concurrency=1', '--test-reporter=spec', '--test-reporter-destination=stdout',
    '--test-reporter=tap', `--test-reporter-destination=${tapFile}`, ...suite];
  console.log(`\n===== security suite as ${label} (KILN_BIN=${kilnBin}) =====`);
  const argv = [...wrap, process.execPath, ...nodeArgs];
  const r = spawnSync(argv[0], argv.slice(1), { cwd: testsDir, env, stdio: ['ignore', 'inherit', 'inherit'] });
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

// Why `user` cannot run the suite from here, or null when it can.
function whyNotAsUser(user) {
  const which = spawnSync('sh', ['-c', 'command -v runuser'], { encoding: 'utf8' });
  if (which.status !== 0) return 'runuser is not installed';
  const need = [[kilnBin, 'x'], [path.join(path.dirname(kilnBin), 'kiln-sandbox'), 'x'], [process.execPath, 'x'],
    [path.join(here, 'lib.mjs'), 'r'], [path.join(here, 'probes', 'probe.c'), 'r'],
    [path.join(testsDir, 'lib', 'kiln.mjs'), 'r'], [path.join(testsDir, 'node_modules', '@modelcontextprotocol', 'sdk', 'package.json'), 'r'],
    ...suite.map((f) => [f, 'r'])];
  const problems = [];
  for (const [p, mode] of need) {
    if (!fs.existsSync(p)) {
      if (!p.endsWith('kiln-sandbox')) problems.push(`${p} does not exist`);
      continue;
    }
    const t = spawnSync('runuser', ['-u', user, '--', 'test', `-${mode}`, p]);
    if (t.status !== 0) {
      // Name the first folder on the way that the user cannot enter.
      let blocker = '';
      for (let d = path.dirname(p); d !== '/'; d = path.dirname(d)) {
        if (spawnSync('runuser', ['-u', user, '--', 'test', '-x', d]).status !== 0) blocker = d;
      }
      problems.push(`${user} cannot ${mode === 'x' ? 'execute' : 'read'} ${p}${blocker ? ` (no search permission on ${blocker}: needs o+x)` : ''}`);
    }
  }
  if (spawnSync('runuser', ['-u', user, '--', 'cc', '--version']).status !== 0) problems.push(`${user} cannot run cc (the probes are compiled at test time)`);
  return problems.length ? problems.join('; ') : null;
}

function ensureUser(user) {
  if (spawnSync('id', ['-u', user]).status === 0) return null;
  const r = spawnSync('useradd', ['--no-create-home', '--home-dir', '/nonexistent', '--shell', '/usr/sbin/nologin', '--user-group', user], { encoding: 'utf8' });
  return r.status === 0 ? null : `useradd ${user} failed: ${r.stderr.trim()}`;
}

const runs = [];
const isRoot = process.getuid() === 0;
const baseEnv = { ...process.env, KILN_BIN: kilnBin };
if (only !== 'user') runs.push(runSuite(isRoot ? 'root' : os.userInfo().username, { env: baseEnv }));
if (only !== 'root') {
  if (!isRoot) {
    runs.push({ label: USER, skipped: 'the runner is not root, so it cannot switch to the unprivileged user' });
  } else {
    const why = ensureUser(USER) ?? whyNotAsUser(USER);
    if (why) {
      console.log(`\n===== security suite as ${USER}: SKIPPED: ${why}`);
      runs.push({ label: USER, skipped: why });
    } else {
      const home = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-sec-kilntest-home-'));
      const uid = Number(spawnSync('id', ['-u', USER], { encoding: 'utf8' }).stdout);
      const gid = Number(spawnSync('id', ['-g', USER], { encoding: 'utf8' }).stdout);
      fs.chownSync(home, uid, gid);
      const env = {
        HOME: home, USER, LOGNAME: USER, PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
        LANG: process.env.LANG ?? 'C.UTF-8', KILN_BIN: kilnBin,
        ...(process.env.KILN_REQUIRE_SANDBOX ? { KILN_REQUIRE_SANDBOX: process.env.KILN_REQUIRE_SANDBOX } : {}),
      };
      // Sanitizer builds (make test-asan): kilntest's kiln processes report where root's do.
      for (const v of ['ASAN_OPTIONS', 'UBSAN_OPTIONS', 'LSAN_OPTIONS', 'KILN_SANITIZED']) {
        if (process.env[v]) env[v] = process.env[v];
      }
      runs.push(runSuite(USER, { wrap: ['runuser', '-u', USER, '--'], env }));
      fs.rmSync(home, { recursive: true, force: true });
    }
  }
}

console.log('\n===== security suite summary =====');
let failed = 0;
for (const run of runs) {
  if (run.skipped) {
    console.log(`\n[${run.label}] SKIPPED: ${run.skipped}`);
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
