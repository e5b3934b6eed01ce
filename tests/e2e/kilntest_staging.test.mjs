// tests/security/run.mjs from a checkout the unprivileged user kilntest cannot enter (a CI clone under
// /root, mode 0700): its kilntest pass runs from a copy staged in the temp folder (scripts/
// stage-for-user.sh) and leaves nothing there; where even staging cannot help, KILN_REQUIRE_SANDBOX=1
// makes "not run as kilntest" a failure. Needs root (to switch users), like the pass it checks.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { kilnBin, repoRoot, tempDir, testsDir } from '../lib/kiln.mjs';

const why = process.getuid() !== 0 ? 'not root: run.mjs cannot switch to kilntest'
  : spawnSync('sh', ['-c', 'command -v runuser']).status !== 0 ? 'runuser is not installed' : null;
const fixture = path.join(testsDir, 'fixtures', 'kilntest_staging', 'staged.test.mjs');

// The parts of a checkout run.mjs needs, under a mode-0700 folder; binaries and npm modules by link.
function lockedCheckout() {
  const locked = tempDir('kiln-e2e-0700-');
  fs.chmodSync(locked, 0o700);
  const repo = path.join(locked, 'repo');
  for (const p of ['scripts/stage-for-user.sh', 'tests/package.json', 'tests/lib', 'tests/security/run.mjs',
    'tests/security/lib.mjs', 'tests/security/probes']) {
    fs.cpSync(path.join(repoRoot, p), path.join(repo, p), { recursive: true });
  }
  fs.symlinkSync(path.join(testsDir, 'node_modules'), path.join(repo, 'tests', 'node_modules'));
  const bin = kilnBin();
  fs.mkdirSync(path.join(repo, 'build'));
  for (const b of ['kiln', 'kiln-sandbox']) fs.symlinkSync(path.join(path.dirname(bin), b), path.join(repo, 'build', b));
  return repo;
}

// run.mjs --only user on FILE, with TMPDIR a fresh folder so what the run leaves there is visible.
function runAsUser(repo, file, extra = {}) {
  const tmp = tempDir('kiln-e2e-stagebase-');
  fs.chmodSync(tmp, 0o755);
  const env = { ...process.env, KILN_BIN: path.join(repo, 'build', 'kiln'), TMPDIR: tmp, ...extra };
  delete env.NODE_TEST_CONTEXT;
  if (!('KILN_REQUIRE_SANDBOX' in extra)) delete env.KILN_REQUIRE_SANDBOX;
  const r = spawnSync(process.execPath, [path.join(repo, 'tests', 'security', 'run.mjs'), '--only', 'user', file],
    { env, encoding: 'utf8', timeout: 120000 });
  return { code: r.status, out: `${r.stdout}${r.stderr}`, left: fs.readdirSync(tmp) };
}

test('kilntest cannot enter the checkout: its pass runs from a staged copy, which is removed', { skip: why ?? false }, () => {
  const repo = lockedCheckout();
  const file = path.join(repo, 'tests', 'security', 'staged.test.mjs');
  fs.copyFileSync(fixture, file);
  const r = runAsUser(repo, file, { KILN_REQUIRE_SANDBOX: '1' });
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /no search permission on .*kiln-e2e-0700-.*: staging a copy for kilntest/, r.out);
  assert.match(r.out, /\[kilntest, from a staged copy\]\n {2}pass {2}run by kilntest from a copy it can read\n {2}=> 1 pass, 0 fail/, r.out);
  assert.deepEqual(r.left, [], 'the staged copy, the TAP folder and the home are gone');
});

test('kilntest cannot enter the checkout and it cannot be staged: a skip, or a failure under KILN_REQUIRE_SANDBOX=1', { skip: why ?? false }, () => {
  const repo = lockedCheckout();
  // run.mjs stages tests/security only, so a test file elsewhere cannot reach kilntest.
  const file = path.join(repo, 'tests', 'elsewhere.test.mjs');
  fs.copyFileSync(fixture, file);
  const plain = runAsUser(repo, file, {});
  assert.equal(plain.code, 0, plain.out);
  assert.match(plain.out, /\[kilntest\] SKIPPED \(not run\): .*is not in tests\/security, so it cannot be staged/, plain.out);
  const ci = runAsUser(repo, file, { KILN_REQUIRE_SANDBOX: '1' });
  assert.equal(ci.code, 1, ci.out);
  assert.match(ci.out, /\[kilntest\] FAIL: not run as kilntest, and KILN_REQUIRE_SANDBOX=1 makes that a failure: .*cannot be staged/, ci.out);
  assert.match(ci.out, /=> 0 pass, 1 fail/, ci.out);
  assert.deepEqual([...plain.left, ...ci.left], []);
});
