// The sandbox gate itself (tests/lib/sandbox_probe.mjs, check_helper.py's sandbox_unavailable,
// tests/unit/skip.h): with a kiln-sandbox that cannot start (KILN_SANDBOX_HELPER=/bin/false), the
// tests that need it are skipped with kiln's reason, and under KILN_REQUIRE_SANDBOX=1 they fail
// with it. Runs a fixture test file and the helper's own checks as children.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { after, test } from 'node:test';

import { connectClient, kilnBin, structured, tempDir, testsDir } from '../lib/kiln.mjs';
import { probeSandbox } from '../lib/sandbox_probe.mjs';

const BROKEN = { KILN_SANDBOX_HELPER: '/bin/false' };
// What kiln says when its helper exits at once (sandbox/manager: setup ended without a status).
const REASON = /the sandbox helper ended during setup/;
const fixture = path.join(testsDir, 'fixtures', 'sandbox_gate', 'needs_sandbox.mjs');

// The caller's KILN_REQUIRE_SANDBOX and helper must not leak into the children, nor node:test's
// marker (a child that sees NODE_TEST_CONTEXT refuses to run its own files).
function childEnv(extra) {
  const env = { ...process.env, KILN_BIN: kilnBin(), ...extra };
  for (const k of ['KILN_REQUIRE_SANDBOX', 'KILN_SANDBOX_HELPER']) if (!(k in extra)) delete env[k];
  delete env.NODE_TEST_CONTEXT;
  return env;
}

// node --test on the fixture; the counts from the TAP summary.
function runFixture(extra) {
  const r = spawnSync(process.execPath, ['--test', '--test-reporter=tap', fixture], {
    cwd: testsDir, env: childEnv(extra), encoding: 'utf8', timeout: 120000,
  });
  const count = (k) => Number(new RegExp(`^# ${k} (\\d+)$`, 'm').exec(r.stdout)?.[1]);
  return { code: r.status, out: r.stdout + r.stderr, pass: count('pass'), fail: count('fail'), skipped: count('skipped') };
}

test('a sandbox that cannot start: its tests are skipped with kiln\'s reason, the others run', () => {
  const r = runFixture(BROKEN);
  assert.equal(r.code, 0, r.out);
  assert.deepEqual([r.pass, r.fail, r.skipped], [2, 0, 2], r.out);
  assert.match(r.out, /# SKIP the sandbox cannot run here: .*the sandbox helper ended during setup/);
  assert.match(r.out, /only the file tools are used/);
});

test('KILN_REQUIRE_SANDBOX=1 and a sandbox that cannot start: each of those tests fails with the reason', () => {
  const r = runFixture({ ...BROKEN, KILN_REQUIRE_SANDBOX: '1' });
  assert.notEqual(r.code, 0, r.out);
  assert.deepEqual([r.pass, r.fail, r.skipped], [1, 3, 0], r.out);
  const failures = r.out.match(/KILN_REQUIRE_SANDBOX=1 makes that a failure: the sandbox helper ended during setup/g) ?? [];
  assert.ok(failures.length >= 3, r.out);
});

// The control: where the sandbox works, the same file passes whole under KILN_REQUIRE_SANDBOX=1.
const s = await connectClient();
after(() => s.close());
structured(await s.client.callTool({ name: 'workspace_open', arguments: { path: tempDir('kiln-gate-ws-') } }));
const gate = await probeSandbox('sandbox gate e2e', (name, args) => s.client.callTool({ name, arguments: args }));

gate.test('KILN_REQUIRE_SANDBOX=1 and a working sandbox: every test of the file passes', () => {
  const r = runFixture({ KILN_REQUIRE_SANDBOX: '1' });
  assert.equal(r.code, 0, r.out);
  assert.deepEqual([r.pass, r.fail, r.skipped], [4, 0, 0], r.out);
});

test('check_helper.py: a helper that cannot start is a failed check naming why, with or without the variable', () => {
  for (const extra of [{}, { KILN_REQUIRE_SANDBOX: '1' }]) {
    const r = spawnSync('python3', [path.join(testsDir, 'sandbox_helper', 'check_helper.py')], {
      env: childEnv({ KILN_SANDBOX: '/bin/false', ...extra }), encoding: 'utf8', timeout: 120000,
    });
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /^FAIL {2}kiln-sandbox builds a sandbox here {2}-- setup failed \(exit 1\)/m);
    assert.match(r.stdout, /^1 checks, 1 failed$/m);
  }
});

// The unit tests' side of the gate is tests/unit/sandbox_gate.test.mjs, run by the unit suite
// once the unit tests are built.
