// The sandbox gate in the unit tests (tests/unit/skip.h): with a kiln-sandbox that cannot start
// (KILN_SANDBOX_HELPER=/bin/false) the sandbox unit tests skip with doctest::skip and name why, and
// under KILN_REQUIRE_SANDBOX=1 they fail with the reason. Run by the unit suite after ctest, when
// the unit tests are built (tests/e2e/sandbox_gate.test.mjs covers the node and helper sides).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { kilnBin, repoRoot } from '../lib/kiln.mjs';

const BROKEN = { KILN_SANDBOX_HELPER: '/bin/false' };
const REASON = /the sandbox helper ended during setup/;

function childEnv(extra) {
  const env = { ...process.env, KILN_BIN: kilnBin(), ...extra };
  for (const k of ['KILN_REQUIRE_SANDBOX', 'KILN_SANDBOX_HELPER']) if (!(k in extra)) delete env[k];
  delete env.NODE_TEST_CONTEXT;
  return env;
}

// The sandbox unit tests (only manager_test.cpp's cases, the ones that start sandboxes; doctest's
// summary counts the filtered-out cases as skipped, so the skips are counted by name).
const unitBin = path.join(path.dirname(kilnBin()), 'tests', 'unit', 'sandbox', 'kiln_sandbox_tests');
const noUnit = !fs.existsSync(unitBin) && `${path.relative(repoRoot, unitBin)} is not built (cmake --build build)`;
const runUnit = (extra) => spawnSync(unitBin, ['-sf=*manager_test.cpp'], { env: childEnv(extra), encoding: 'utf8', timeout: 120000 });

test('unit: a sandbox that cannot start skips the cases with doctest::skip, and names them', { skip: noUnit }, () => {
  const r = runUnit(BROKEN);
  const out = r.stdout + r.stderr;
  assert.equal(r.status, 0, out);
  assert.match(out, /\| 0 failed \|/);
  // doctest names every skipped case of the binary, also those of other files the filter leaves out.
  assert.equal(out.match(/^\[doctest\] SKIPPED: .*manager_test\.cpp:\d+\)$/gm)?.length, 7, out);
  assert.match(out, /^\[kiln\] SKIP unit\.sandbox .*the sandbox helper ended during setup/m);
});

test('unit: KILN_REQUIRE_SANDBOX=1 and a sandbox that cannot start fails those cases with the reason', { skip: noUnit }, () => {
  const r = runUnit({ ...BROKEN, KILN_REQUIRE_SANDBOX: '1' });
  const out = r.stdout + r.stderr;
  assert.notEqual(r.status, 0, out);
  assert.match(out, /\| 7 failed \|/);
  assert.doesNotMatch(out, /^\[doctest\] SKIPPED: /m);
  assert.match(out, /logged: the sandbox helper cannot run here: the sandbox helper ended during setup/);
  assert.match(out, REASON);
});
