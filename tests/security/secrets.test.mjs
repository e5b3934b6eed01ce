// Cases 28-30 of shared/SANDBOX_CASES.md: secrets and records. The server runs with debug logging
// so that "no log line" covers everything it can log.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import {
  callTool, errorText, exec, kilnBin, kilnEnv, ok, rand, readAll, requireSandboxTools, startKiln, tempDir,
} from './lib.mjs';

const TOKEN = `tok-${rand()}${rand()}`;
const STORED = `stored-${rand()}${rand()}`;
let k;
before(async () => {
  // The secret's value comes from the server's environment (the way CI passes it).
  k = await startKiln({ args: ['--log-level', 'debug'], env: { KILNSEC_TOKEN: TOKEN } });
  requireSandboxTools(k);
  // ... and one from the secret store.
  execFileSync(k.bin, ['secret', 'set', 'KILNSEC_STORED'], {
    input: STORED, env: { ...process.env, KILN_HOME: k.kilnHome, HOME: k.fake.home }, stdio: 'pipe',
  });
});
after(() => k?.close());

const sha = (s) => crypto.createHash('sha256').update(s).digest('hex');

test('case 28: a host environment variable is not visible inside unless passed on purpose', async () => {
  const r = await exec(k, 'env; echo; cat /proc/self/environ /proc/1/environ 2>/dev/null | tr "\\0" "\\n"; echo END',
    { env: { KILNSEC_PASSED: 'on-purpose' } });
  assert.match(r.stdout, /END/, r.out);
  for (const [name, value] of Object.entries(k.bait.env)) {
    assert.ok(!r.out.includes(value), `the host's ${name} value is visible inside`);
    assert.doesNotMatch(r.stdout, new RegExp(`^${name}=`, 'm'), `${name} is set inside`);
  }
  assert.ok(!r.out.includes(TOKEN), 'a secret not asked for is visible');
  assert.doesNotMatch(r.stdout, /^KILNSEC_TOKEN=/m, 'a secret not asked for is set');
  assert.match(r.stdout, /^KILNSEC_PASSED=on-purpose$/m, 'control: a variable passed on purpose is there');
  // The same for `kiln run` (whose own environment is the host's).
  const cli = spawnSync(kilnBin(), ['run', '--workspace', k.ws, '--', 'env'], {
    env: kilnEnv(tempDir('kiln-sec-run-state-'), { ...k.bait.env, HOME: k.fake.home }), encoding: 'utf8',
  });
  assert.equal(cli.status, 0, cli.stderr);
  for (const value of Object.values(k.bait.env)) assert.ok(!cli.stdout.includes(value), `kiln run passed ${value}`);
});

test('case 29: a secret passed by name is usable inside but its value appears in no result, log or error', async () => {
  const wireStart = k.wire.length;
  const secrets = ['KILNSEC_TOKEN', 'KILNSEC_STORED'];
  // Usable: the command can compute on the exact value.
  const use = await exec(k, 'printf %s "$KILNSEC_TOKEN" | sha256sum; printf %s "$KILNSEC_STORED" | sha256sum', { secrets });
  assert.match(use.stdout, new RegExp(sha(TOKEN)), `the secret from the environment is not usable inside: ${use.out}`);
  assert.match(use.stdout, new RegExp(sha(STORED)), `the stored secret is not usable inside: ${use.out}`);
  // Printed to stdout and stderr, in an error message of the shell, split across two writes.
  const leak = await exec(k, [
    'echo "out: $KILNSEC_TOKEN"', 'echo "err: $KILNSEC_TOKEN" >&2', 'echo "stored: $KILNSEC_STORED"',
    'ls "/nonexistent/$KILNSEC_TOKEN"', '"$KILNSEC_TOKEN"',
    'printf "split: %s" "${KILNSEC_TOKEN%????????}"; sleep 0.3; printf "%s\\n" "${KILNSEC_TOKEN#"${KILNSEC_TOKEN%????????}"}"',
    'exit 3',
  ].join('; '), { secrets });
  assert.equal(leak.exit_code, 3);
  assert.match(leak.stdout, /out: \[secret:KILNSEC_TOKEN\]/, `stdout not shown as [secret:NAME]: ${leak.stdout}`);
  assert.match(leak.stderr, /err: \[secret:KILNSEC_TOKEN\]/, `stderr not shown as [secret:NAME]: ${leak.stderr}`);
  assert.match(leak.stdout, /stored: \[secret:KILNSEC_STORED\]/);
  const clear = leak.out.split('\n').filter((l) => l.includes(TOKEN) || l.includes(STORED));
  assert.deepEqual(clear, [], 'lines of the result that show a secret value in clear');
  assert.ok(!JSON.stringify(leak.raw).includes(TOKEN), 'the value is somewhere else in the result');
  // Background output read through process_output.
  const bg = await exec(k, 'echo "bg: $KILNSEC_TOKEN"; echo "bg2: $KILNSEC_STORED" >&2', { secrets, background: true });
  const { data } = await readAll(k, bg.run_id);
  assert.match(data, /bg: \[secret:KILNSEC_TOKEN\]/, data);
  // A session sandbox with the secrets, and an error that involves them.
  const sb = await callTool(k, 'sandbox_create', { secrets: [...secrets, 'KILNSEC_NOT_SET'] });
  assert.equal(sb.isError, true, 'an unknown secret name must be refused');
  assert.match(errorText(sb), /KILNSEC_NOT_SET/, 'the error names the missing secret');
  // Nowhere: not in any message the server sent, not in its log (stderr, debug level), not in
  // any file of its state dir (output spools, database), not in `kiln run` output.
  const wire = JSON.stringify(k.wire.slice(wireStart));
  assert.ok(!wire.includes(TOKEN), 'the secret value is in a message the server sent');
  assert.ok(!wire.includes(STORED), 'the stored secret value is in a message the server sent');
  assert.ok(!k.stderr.includes(TOKEN) && !k.stderr.includes(STORED), 'the secret value is in the server log');
  const found = [];
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile() && !p.startsWith(path.join(k.kilnHome, 'secrets'))) {
        const buf = fs.readFileSync(p);
        if (buf.includes(TOKEN) || buf.includes(STORED)) found.push(p);
      }
    }
  };
  walk(k.kilnHome);
  assert.deepEqual(found, [], 'files in the state dir hold a secret value');
  const cli = spawnSync(kilnBin(), ['run', '--workspace', k.ws, '--secret', 'KILNSEC_TOKEN', '-v', '--',
    '/bin/sh', '-c', 'echo "cli: $KILNSEC_TOKEN"; echo "cli-err: $KILNSEC_TOKEN" >&2'], {
    env: kilnEnv(tempDir('kiln-sec-run-state-'), { KILNSEC_TOKEN: TOKEN }), encoding: 'utf8',
  });
  assert.equal(cli.status, 0, cli.stderr);
  assert.match(cli.stdout, /cli: \[secret:KILNSEC_TOKEN\]/, cli.stdout);
  assert.ok(!cli.stdout.includes(TOKEN) && !cli.stderr.includes(TOKEN), `kiln run printed the value:\n${cli.stdout}${cli.stderr}`);
});

test('case 30: every run leaves one trace record (argv, policy, limits hit, stop reason, cleanup)', async () => {
  const before = ok(await callTool(k, 'trace_list', { kind: 'exec', limit: 1000 }), 'trace_list');
  const count = (x) => { assert.ok(Array.isArray(x.traces), `trace_list answers traces: ${JSON.stringify(x).slice(0, 500)}`); return x.traces.length; };
  const tag = rand();
  const r = await exec(k, `echo trace-${tag}; echo "$KILNSEC_TOKEN"; exit 4`, { secrets: ['KILNSEC_TOKEN'], limits: { wall_s: 30 } });
  const afterList = ok(await callTool(k, 'trace_list', { kind: 'exec', limit: 1000 }), 'trace_list');
  assert.equal(count(afterList), count(before) + 1, 'exactly one new trace for one run');
  assert.match(r.trace_id ?? '', /^tr_/, `sandbox_exec names its trace: ${JSON.stringify(r).slice(0, 500)}`);
  const id = r.trace_id;
  const tr = ok(await callTool(k, 'trace_get', { trace_id: id }), 'trace_get');
  const text = JSON.stringify(tr);
  for (const want of [`trace-${tag}`, 'wall_s', 'KILNSEC_TOKEN', 'exit', 'cleanup']) {
    assert.ok(text.includes(want), `the trace does not record ${want}: ${text.slice(0, 2000)}`);
  }
  assert.match(text, /"stop_reason":"exit"/);
  assert.ok(!text.includes(TOKEN), 'the trace holds the secret value');
});
