// The verify tool and `kiln verify` (issue 4), on workspaces built in temp folders: JUnit and TAP
// reports (node's own reporters, a hand-rolled TAP producer, ctest), failures with file and line,
// broken/missing/stale/escaping reports, on_failure, the checks filter, bad kiln.json, progress,
// cancellation, and the CLI's exit codes, --json and --junit. Every test runs its own
// `kiln mcp --workspace WS --state-dir STATE`. When the sandbox cannot run here, the tests that
// need it are skipped with the reason (failed with it under KILN_REQUIRE_SANDBOX=1).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

import { errorText, kilnBin, kilnEnv, sleep, structured, TapTransport } from '../lib/kiln.mjs';
import { probeSandbox, sandboxOrSkip } from '../lib/sandbox_probe.mjs';

function freshDir(prefix) {
  return fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), prefix)));
}

// A workspace folder with `files` ({relative path: content}; objects are written as JSON).
function makeWs(files = {}) {
  const ws = freshDir('kiln-vf-ws-');
  for (const [rel, content] of Object.entries(files)) {
    const p = path.join(ws, rel);
    fs.mkdirSync(path.dirname(p), { recursive: true });
    fs.writeFileSync(p, typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  }
  return ws;
}

// Starts `kiln mcp --workspace ws --state-dir state` on fresh temp folders (a workspace made of
// `files`); both are removed after the test.
async function startKiln(t, { files = {}, ws } = {}) {
  ws ??= makeWs(files);
  const state = freshDir('kiln-vf-state-');
  const inner = new StdioClientTransport({
    command: kilnBin(), args: ['mcp', '--workspace', ws, '--state-dir', state], env: kilnEnv(state), stderr: 'pipe',
  });
  let stderr = '';
  inner.stderr?.on('data', (c) => { stderr += c.toString(); });
  const transport = new TapTransport(inner);
  const client = new Client({ name: 'kiln-verify-e2e', version: '1.0.0' }, { capabilities: {} });
  await client.connect(transport);
  let closed = false;
  const k = {
    client, transport, ws, state,
    get stderr() { return stderr; },
    call: (name, args, opts) => client.callTool({ name, arguments: args }, undefined, { timeout: 120000, ...opts }),
    async ok(name, args, opts) { return structured(await k.call(name, args, opts)); },
    async close() {
      if (closed) return;
      closed = true;
      await client.close().catch(() => {});
    },
  };
  t.after(async () => {
    await k.close();
    fs.rmSync(ws, { recursive: true, force: true });
    fs.rmSync(state, { recursive: true, force: true });
  });
  return k;
}

// Can the sandbox run here? If not, each sandbox test is skipped with kiln's reason, or fails
// with it under KILN_REQUIRE_SANDBOX=1 (tests/lib/sandbox_probe.mjs).
let sandboxTest;
{
  const k = await startKiln({ after: () => {} });
  ({ test: sandboxTest } = await probeSandbox('verify e2e', k.call));
  await k.close();
  fs.rmSync(k.ws, { recursive: true, force: true });
  fs.rmSync(k.state, { recursive: true, force: true });
}

const JUNIT_RUN = 'mkdir -p reports && node --test --test-reporter=junit --test-reporter-destination=reports/junit.xml test/';
const junitCheck = { name: 'test', run: JUNIT_RUN, report: { format: 'junit', path: 'reports/junit.xml' } };

const PASSING_TESTS = [
  "import test from 'node:test';",
  "import assert from 'node:assert/strict';",
  "test('adds', () => { assert.equal(1 + 1, 2); });",
  "test('multiplies', () => { assert.equal(2 * 3, 6); });",
  "test('concatenates', () => { assert.equal('a' + 'b', 'ab'); });",
  '',
].join('\n');

// The failing assertion is on line 6.
const FAILING_TESTS = [
  "import test from 'node:test';",
  "import assert from 'node:assert/strict';",
  "test('adds', () => { assert.equal(1 + 1, 2); });",
  '',
  "test('breaks on purpose', () => {",
  "  assert.equal(2 + 2, 5, 'math is broken');",
  '});',
  '',
].join('\n');
const FAILING_LINE = 6;

sandboxTest('a passing node project: pass, test counts, steps as child traces', async (t) => {
  const k = await startKiln(t, { files: { 'kiln.json': { verify: [junitCheck] }, 'test/a.test.mjs': PASSING_TESTS } });
  const v = await k.ok('verify', {});
  assert.equal(v.status, 'pass', JSON.stringify(v));
  assert.match(v.trace_id, /^tr_[0-9a-f]+$/);
  assert.equal(v.checks.length, 1);
  const [c] = v.checks;
  assert.equal(c.name, 'test');
  assert.equal(c.status, 'pass');
  assert.equal(c.exit_code, 0);
  assert.equal(c.tests.passed, 3);
  assert.equal(c.tests.failed, 0);
  assert.equal(c.tests.skipped, 0);
  assert.match(c.trace_id, /^tr_[0-9a-f]+$/);
  assert.notEqual(c.trace_id, v.trace_id);

  const g = await k.ok('trace_get', { trace_id: v.trace_id });
  assert.equal(g.trace.kind, 'verify');
  assert.equal(g.trace.status, 'pass');
  assert.deepEqual(g.children.map((x) => x.trace_id), [c.trace_id]);
  for (const ch of g.children) assert.equal(ch.parent_id, v.trace_id);
  const step = (await k.ok('trace_get', { trace_id: c.trace_id })).trace;
  assert.equal(step.parent_id, v.trace_id);
  assert.equal(step.tests.passed, 3);

  const top = await k.ok('trace_list', {});
  assert.deepEqual(top.traces.map((x) => x.trace_id), [v.trace_id], 'steps are left out without parent');
  const steps = await k.ok('trace_list', { parent: v.trace_id });
  assert.deepEqual(steps.traces.map((x) => x.trace_id), [c.trace_id]);
  assert.equal(steps.traces[0].parent_id, v.trace_id);
});

sandboxTest('a failing test: name, message, workspace-relative file and the exact line', async (t) => {
  const k = await startKiln(t, { files: { 'kiln.json': { verify: [junitCheck] }, 'test/a.test.mjs': FAILING_TESTS } });
  const v = await k.ok('verify', {});
  assert.equal(v.status, 'fail');
  const [c] = v.checks;
  assert.equal(c.status, 'fail');
  assert.equal(c.tests.passed, 1);
  assert.equal(c.tests.failed, 1);
  assert.equal(c.tests.failures.length, 1);
  const [f] = c.tests.failures;
  assert.equal(f.name, 'breaks on purpose');
  assert.match(f.message, /math is broken/);
  assert.equal(f.file, 'test/a.test.mjs');
  assert.equal(f.line, FAILING_LINE);
  assert.equal(FAILING_TESTS.split('\n')[FAILING_LINE - 1].trim().startsWith('assert.equal(2 + 2, 5'), true);
});

sandboxTest('TAP: node --test-reporter=tap and a hand-rolled TAP producer', async (t) => {
  const tapTests = [
    "import test from 'node:test';",
    "test('one', () => {});",
    "test('two', () => {});",
    "test('three', () => { throw new Error('nope'); });",
    "test('four', { skip: 'not today' }, () => {});",
    '',
  ].join('\n');
  const k = await startKiln(t, {
    files: {
      'kiln.json': {
        verify: [
          {
            name: 'node-tap',
            run: 'mkdir -p reports && node --test --test-reporter=tap --test-reporter-destination=reports/node.tap test/',
            report: { format: 'tap', path: 'reports/node.tap' },
            on_failure: 'continue',
          },
          {
            name: 'hand-tap',
            run: "mkdir -p reports && printf 'TAP version 13\\n1..3\\nok 1 - a\\nnot ok 2 - b\\nok 3 - c # SKIP later\\n' > reports/hand.tap",
            report: { format: 'tap', path: 'reports/hand.tap' },
          },
        ],
      },
      'test/t.test.mjs': tapTests,
    },
  });
  const v = await k.ok('verify', {});
  const [node, hand] = v.checks;
  assert.equal(node.name, 'node-tap');
  assert.equal(node.status, 'fail');
  assert.deepEqual([node.tests.passed, node.tests.failed, node.tests.skipped], [2, 1, 1], JSON.stringify(node.tests));
  assert.equal(node.tests.failures[0].name, 'three');
  assert.equal(hand.name, 'hand-tap');
  assert.equal(hand.exit_code, 0);
  assert.equal(hand.status, 'fail', 'a failed test in the report fails the check even with exit 0');
  assert.deepEqual([hand.tests.passed, hand.tests.failed, hand.tests.skipped], [1, 1, 1], JSON.stringify(hand.tests));
  assert.equal(hand.tests.failures[0].name, 'b');
  assert.equal(v.status, 'fail');
});

const haveCmake = ['cmake', 'ctest', 'g++', 'ninja'].every((b) => spawnSync('sh', ['-c', `command -v ${b}`]).status === 0);

sandboxTest('ctest JUnit: one passing and one failing test', { skip: !haveCmake && 'cmake, ctest, g++ or ninja is not installed' }, async (t) => {
  const k = await startKiln(t, {
    files: {
      'kiln.json': {
        verify: [{
          name: 'ctest',
          run: 'cmake -S . -B build -G Ninja >/dev/null && cmake --build build >/dev/null && cd build && ctest --output-junit ../reports/ctest.xml',
          report: { format: 'junit', path: 'reports/ctest.xml' },
        }],
      },
      'CMakeLists.txt': [
        'cmake_minimum_required(VERSION 3.21)',
        'project(tiny CXX)',
        'enable_testing()',
        'add_executable(tiny tiny.cpp)',
        'add_test(NAME works COMMAND tiny 0)',
        'add_test(NAME breaks COMMAND tiny 1)',
        '',
      ].join('\n'),
      'tiny.cpp': '#include <cstdlib>\nint main(int argc, char** argv) { return argc > 1 ? std::atoi(argv[1]) : 0; }\n',
      'reports/.keep': '',
    },
  });
  // Does cmake work inside the sandbox at all (network none, /usr read-only)?
  const probe = await k.ok('sandbox_exec', { command: 'cmake -S . -B build -G Ninja && cmake --build build', tail_bytes: 2000 });
  // Where it cannot, skipped with the reason, or failed with it under KILN_REQUIRE_SANDBOX=1.
  const why = probe.exit_code === 0 ? null
    : `cmake cannot build inside the sandbox (exit ${probe.exit_code}): ${(probe.stderr || probe.stdout).trim().slice(-500)}`;
  if (sandboxOrSkip(t, why)) return;
  const v = await k.ok('verify', {});
  const [c] = v.checks;
  assert.equal(c.status, 'fail', JSON.stringify(c));
  assert.deepEqual([c.tests.passed, c.tests.failed], [1, 1], JSON.stringify(c.tests));
  assert.equal(c.tests.failures[0].name, 'breaks');
  assert.equal(v.status, 'fail');
});

sandboxTest('a broken report is an error naming the path; the server goes on', async (t) => {
  const k = await startKiln(t, {
    files: {
      'kiln.json': {
        verify: [{ name: 'broken', run: "mkdir -p reports && printf '<testsuite><testcase name=\"x\"' > reports/bad.xml", report: { format: 'junit', path: 'reports/bad.xml' } }],
      },
    },
  });
  const v = await k.ok('verify', {});
  assert.equal(v.status, 'error');
  const [c] = v.checks;
  assert.equal(c.exit_code, 0);
  assert.equal(c.status, 'error');
  assert.match(c.error, /reports\/bad\.xml/);
  assert.deepEqual(await k.client.ping(), {});
  const tr = await k.ok('trace_get', { trace_id: v.trace_id });
  assert.equal(tr.trace.status, 'error');
});

sandboxTest('a missing report and a stale report are errors', async (t) => {
  const k = await startKiln(t, {
    files: {
      'kiln.json': {
        verify: [
          { name: 'missing', run: 'true', report: { format: 'junit', path: 'reports/none.xml' }, on_failure: 'continue' },
          { name: 'stale', run: 'true', report: { format: 'junit', path: 'reports/old.xml' } },
        ],
      },
      'reports/old.xml': '<testsuite name="old" tests="1"><testcase name="from-before"/></testsuite>\n',
    },
  });
  // Left from an earlier run: written an hour before this one.
  const hourAgo = new Date(Date.now() - 3600 * 1000);
  fs.utimesSync(path.join(k.ws, 'reports/old.xml'), hourAgo, hourAgo);
  const v = await k.ok('verify', {});
  assert.equal(v.status, 'error');
  const [missing, stale] = v.checks;
  assert.equal(missing.status, 'error');
  assert.match(missing.error, /reports\/none\.xml/);
  assert.match(missing.error, /was not written/);
  assert.equal(stale.status, 'error', JSON.stringify(stale));
  assert.match(stale.error, /reports\/old\.xml/);
  assert.match(stale.error, /older than the run/);
  assert.equal(stale.tests, null, 'the old report is not counted');
});

sandboxTest('a report path that is a symlink out of the workspace is refused and not read', async (t) => {
  const outsideDir = freshDir('kiln-vf-outside-');
  t.after(() => fs.rmSync(outsideDir, { recursive: true, force: true }));
  const marker = `outside-${crypto.randomBytes(8).toString('hex')}`;
  const outside = path.join(outsideDir, 'report.xml');
  fs.writeFileSync(outside, `<testsuite name="${marker}" tests="1"><testcase name="${marker}-case"><failure message="${marker}"/></testcase></testsuite>\n`);
  // Newer than the run, so only the path confinement can refuse it.
  const later = new Date(Date.now() + 3600 * 1000);
  fs.utimesSync(outside, later, later);
  const k = await startKiln(t, {
    files: {
      'kiln.json': {
        verify: [
          { name: 'escape', run: 'true', report: { format: 'junit', path: 'reports/link.xml' }, on_failure: 'continue' },
          { name: 'hostname', run: 'true', report: { format: 'junit', path: 'reports/host.xml' } },
        ],
      },
    },
  });
  fs.mkdirSync(path.join(k.ws, 'reports'));
  fs.symlinkSync(outside, path.join(k.ws, 'reports/link.xml'));
  fs.symlinkSync('/etc/hostname', path.join(k.ws, 'reports/host.xml'));
  const r = await k.call('verify', {});
  const v = structured(r);
  assert.equal(v.status, 'error');
  assert.equal(v.checks[0].status, 'error');
  assert.match(v.checks[0].error, /reports\/link\.xml/);
  assert.equal(v.checks[0].tests, null);
  assert.equal(v.checks[1].status, 'error');
  assert.match(v.checks[1].error, /reports\/host\.xml/);
  const everything = [JSON.stringify(r)];
  for (const id of [v.trace_id, ...v.checks.map((c) => c.trace_id)]) everything.push(JSON.stringify(await k.call('trace_get', { trace_id: id })));
  assert.ok(!everything.join('\n').includes(marker), 'the outside file was read into the result or a trace');
  const hostname = fs.readFileSync('/etc/hostname', 'utf8').trim();
  if (hostname.length >= 6) {
    assert.ok(!everything.join('\n').includes(`"${hostname}`), '/etc/hostname was read into the result or a trace');
  }
});

sandboxTest('on_failure: the rest are skipped by default, run with continue', async (t) => {
  const a = { name: 'a', run: 'echo a; exit 1' };
  const b = { name: 'b', run: 'echo b-ran' };
  const k = await startKiln(t, { files: { 'kiln.json': { verify: [a, b] } } });
  const v1 = await k.ok('verify', {});
  assert.equal(v1.status, 'fail');
  assert.deepEqual(v1.checks.map((c) => [c.name, c.status]), [['a', 'fail'], ['b', 'skipped']]);
  assert.equal(v1.checks[0].exit_code, 1);

  fs.writeFileSync(path.join(k.ws, 'kiln.json'), JSON.stringify({ verify: [{ ...a, on_failure: 'continue' }, b] }));
  const v2 = await k.ok('verify', {});
  assert.equal(v2.status, 'fail');
  assert.deepEqual(v2.checks.map((c) => [c.name, c.status]), [['a', 'fail'], ['b', 'pass']]);
  const out = await k.ok('trace_output', { trace_id: v2.checks[1].trace_id });
  assert.equal(out.data, 'b-ran\n');
});

sandboxTest('checks filter: only the named ones; an unknown name lists the available ones', async (t) => {
  const k = await startKiln(t, {
    files: { 'kiln.json': { verify: [{ name: 'a', run: 'exit 1' }, { name: 'b', run: 'true' }, { name: 'c', run: 'true' }] } },
  });
  const v = await k.ok('verify', { checks: ['b'] });
  assert.equal(v.status, 'pass');
  assert.deepEqual(v.checks.map((c) => c.name), ['b']);
  const steps = await k.ok('trace_list', { parent: v.trace_id });
  assert.equal(steps.traces.length, 1);
  const bad = await k.call('verify', { checks: ['nope'] });
  assert.equal(bad.isError, true);
  const msg = errorText(bad);
  assert.match(msg, /nope/);
  for (const n of ['a', 'b', 'c']) assert.match(msg, new RegExp(`\\b${n}\\b`));
});

test('a bad kiln.json and a missing one are tool errors that say what to fix', async (t) => {
  const k = await startKiln(t, { files: { 'kiln.json': { verify: [{ name: 'x' }] } } });
  const bad = await k.call('verify', {});
  assert.equal(bad.isError, true);
  assert.ok(errorText(bad).includes('kiln.json'), errorText(bad));
  assert.ok(errorText(bad).includes('/verify/0'), errorText(bad));
  fs.rmSync(path.join(k.ws, 'kiln.json'));
  const none = await k.call('verify', {});
  assert.equal(none.isError, true);
  assert.match(errorText(none), /add/i);
  assert.match(errorText(none), /"verify"|verify list/);
  assert.deepEqual(await k.client.ping(), {});
});

sandboxTest('progress: increasing, with messages naming the checks', async (t) => {
  const k = await startKiln(t, {
    files: { 'kiln.json': { verify: [{ name: 'first-check', run: 'true' }, { name: 'second-check', run: 'true' }] } },
  });
  const seen = [];
  const v = await k.ok('verify', {}, { onprogress: (p) => seen.push(p) });
  assert.equal(v.status, 'pass');
  assert.ok(seen.length >= 2, `progress notifications (got ${seen.length})`);
  for (let i = 1; i < seen.length; i++) assert.ok(seen[i].progress > seen[i - 1].progress, JSON.stringify(seen));
  const messages = seen.map((p) => p.message ?? '').join('\n');
  assert.match(messages, /first-check/);
  assert.match(messages, /second-check/);
  for (const p of seen) if (p.total !== undefined) assert.ok(p.progress <= p.total);
});

sandboxTest('cancel: the verify stops, its trace ends and the step is cancelled', async (t) => {
  const k = await startKiln(t, { files: { 'kiln.json': { verify: [{ name: 'slow', run: 'sleep 30' }, { name: 'after', run: 'true' }] } } });
  const ac = new AbortController();
  const p = k.call('verify', {}, { signal: ac.signal });
  setTimeout(() => ac.abort('the test cancels'), 1000);
  await assert.rejects(p);
  let vt;
  for (let i = 0; i < 50; i++) {
    [vt] = (await k.ok('trace_list', { kind: 'verify' })).traces;
    if (vt && vt.status !== 'running') break;
    await sleep(100);
  }
  assert.ok(vt, 'the verify left a trace');
  assert.notEqual(vt.status, 'running');
  assert.equal(vt.stop_reason, 'cancelled');
  const steps = (await k.ok('trace_list', { parent: vt.trace_id })).traces;
  const slow = steps.find((s) => s.name === 'slow');
  assert.ok(slow, JSON.stringify(steps));
  assert.equal(slow.stop_reason, 'cancelled');
  assert.notEqual(slow.status, 'running');
  assert.ok(!steps.some((s) => s.name === 'after' && s.status === 'pass'), 'the check after it did not run');
  assert.deepEqual(await k.client.ping(), {});
});

sandboxTest('kiln verify CLI: exit codes, failing test on stderr, --json, --junit, unknown check', (t) => {
  const state = freshDir('kiln-vf-cli-state-');
  const good = makeWs({ 'kiln.json': { verify: [junitCheck, { name: 'lint', run: 'true' }] }, 'test/a.test.mjs': PASSING_TESTS });
  const bad = makeWs({ 'kiln.json': { verify: [junitCheck] }, 'test/a.test.mjs': FAILING_TESTS });
  const out = freshDir('kiln-vf-cli-out-');
  t.after(() => { for (const d of [state, good, bad, out]) fs.rmSync(d, { recursive: true, force: true }); });
  const kiln = (cwd, ...args) => {
    const r = spawnSync(kilnBin(), ['verify', '--state-dir', state, ...args], { cwd, env: kilnEnv(state), encoding: 'utf8', timeout: 60000 });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  };
  const pass = kiln(good);
  assert.equal(pass.code, 0, pass.stderr);
  const fail = kiln(bad);
  assert.equal(fail.code, 1, fail.stderr);
  assert.match(fail.stderr, /breaks on purpose/);
  const json = kiln(good, '--json');
  assert.equal(json.code, 0, json.stderr);
  const parsed = JSON.parse(json.stdout);
  assert.equal(parsed.status, 'pass');
  assert.deepEqual(parsed.checks.map((c) => c.name), ['test', 'lint']);
  const failJson = JSON.parse(kiln(bad, '--json').stdout);
  assert.equal(failJson.status, 'fail');
  const xml = path.join(out, 'out.xml');
  const junit = kiln(good, '--junit', xml);
  assert.equal(junit.code, 0, junit.stderr);
  const text = fs.readFileSync(xml, 'utf8');
  assert.match(text, /<testsuite/);
  assert.match(text, /name="test"/);
  assert.match(text, /name="lint"/);
  const unknown = kiln(good, 'no-such-check');
  assert.equal(unknown.code, 2, unknown.stderr);
  assert.match(unknown.stderr, /no-such-check/);
});
