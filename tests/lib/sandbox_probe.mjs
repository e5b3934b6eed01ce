// The one rule for tests that need a sandbox: where none can start they are skipped with the reason
// kiln gave, except under KILN_REQUIRE_SANDBOX=1 (CI, set by .ci/run), where that reason fails them.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';

import { errorText } from './kiln.mjs';

export const sandboxRequired = process.env.KILN_REQUIRE_SANDBOX === '1';

const CANNOT = 'the sandbox cannot run here';

function requiredFailure(why) {
  return `${CANNOT}, and KILN_REQUIRE_SANDBOX=1 makes that a failure: ${why}`;
}

// Inside a test, once a probe said `why` (null: the sandbox ran). Returns true when the test was
// marked skipped and should return; throws (fails the test) when the sandbox is required.
export function sandboxOrSkip(t, why) {
  if (!why) return false;
  if (sandboxRequired) assert.fail(requiredFailure(why));
  t.skip(`${CANNOT}: ${why}`);
  return true;
}

// For a test that can go on without the sandbox (a load mix of file tools only): a diagnostic
// naming the fallback, or a failure when the sandbox is required. Returns true when degraded.
export function sandboxOrDegrade(t, why, fallback) {
  if (!why) return false;
  if (sandboxRequired) assert.fail(requiredFailure(why));
  t.diagnostic(`${CANNOT} (${why}); ${fallback}`);
  return true;
}

// The reason a `sandbox_exec` of `true` failed, or null when it ran. `call(name, args)` is the
// file's own tools/call (each file starts kiln its own way).
export async function probeExec(call) {
  const r = await call('sandbox_exec', { command: 'true' });
  return r.isError ? errorText(r) : null;
}

// A file's gate for its sandbox tests, from a probe's reason (`label` names the file in the note).
// `gate.test(name, [options], fn)` is node:test's test(): as given when the sandbox ran; else
// skipped with the reason, or, when the sandbox is required, a test that fails with the reason.
export function sandboxGate(label, why) {
  if (why) console.log(`# ${sandboxRequired ? 'FAIL' : 'SKIP'} ${label}: ${CANNOT}: ${why}`);
  return {
    why,
    test(name, options, fn) {
      if (typeof options === 'function') [options, fn] = [{}, options];
      if (!why) return test(name, options, fn);
      if (sandboxRequired) return test(name, { ...options, skip: false, todo: false }, () => assert.fail(requiredFailure(why)));
      return test(name, { ...options, skip: `${CANNOT}: ${why}` }, fn);
    },
  };
}

// probeExec then sandboxGate.
export async function probeSandbox(label, call) {
  return sandboxGate(label, await probeExec(call));
}

// A sleep duration no other process uses, so `ps` finds exactly the tree under test.
let sleeps = 0;
export const uniqueSleep = () => `${3000 + (process.pid % 1000)}.${Date.now() % 100000}${sleeps++}`;

// Host processes whose command line carries `marker` (to prove a tree is gone).
export function hostProcs(marker) {
  const out = execFileSync('ps', ['-eo', 'pid,args'], { encoding: 'utf8' });
  return out.split('\n').filter((l) => l.includes(marker) && !l.includes('ps -eo'));
}
