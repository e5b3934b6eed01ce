// Cases 17-23 of shared/SANDBOX_CASES.md: resources, with limits enforced from outside the
// workload. The bombs are bounded by construction (a capped number of forks, a capped allocation,
// wall timeouts), so a host where a limit is not enforced is not taken down by the test.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import {
  callTool, compileProbe, createSandbox, destroySandbox, errorText, exec, isRoot, ok, readAll, requireSandboxTools,
  startKiln, vmRssKb, withSandbox,
} from './lib.mjs';

let k;
before(async () => {
  k = await startKiln();
  requireSandboxTools(k);
  compileProbe(k.ws);
});
after(() => k?.close());

// A session sandbox with `limits`, or a skip (unprivileged only) when Kiln refuses them because
// this host cannot enforce them: refusing is the right (fail-closed) answer, but then the attack
// cannot be tried. As root on this machine cgroups work, so a refusal is a failure.
async function limitedSandbox(t, limits) {
  const r = await callTool(k, 'sandbox_create', { limits });
  if (r.isError) {
    const why = errorText(r);
    if (!isRoot) {
      t.skip(`Kiln refuses ${JSON.stringify(limits)} for this user (fail closed, so the attack is not run): ${why}`);
      return null;
    }
    assert.fail(`sandbox_create with ${JSON.stringify(limits)} refused as root: ${why}`);
  }
  return ok(r, 'sandbox_create');
}

const hostOk = () => {
  const r = spawnSync('/bin/sh', ['-c', 'echo host-alive'], { encoding: 'utf8' });
  assert.equal(r.stdout.trim(), 'host-alive', `the host cannot start a process: ${r.error}`);
};

test('case 17: a fork bomb stops at limits.pids; the host and the server stay fine', async (t) => {
  const sb = await limitedSandbox(t, { pids: 64 });
  if (!sb) return;
  const id = sb.sandbox_id;
  try {
    t.diagnostic(`pids enforced by: ${JSON.stringify(sb.isolation?.limits?.pids)}`);
    // Bounded first: at most 2000 waiting children.
    const r = await exec(k, ['./probe', 'forks', '2000'], { sandbox_id: id, timeout_s: 120 });
    const m = /forked (\d+) errno (\d+)/.exec(r.stdout);
    assert.ok(m, `probe output: ${r.out} (stop_reason ${r.stop_reason})`);
    assert.ok(Number(m[1]) < 64, `the sandbox forked ${m[1]} processes with limits.pids 64`);
    assert.equal(Number(m[2]), 11, `fork failed with errno ${m[2]}, expected EAGAIN`);
    assert.ok(['exit', 'pids_limit'].includes(r.stop_reason), `stop_reason ${r.stop_reason}`);
    hostOk();
    // Only now that the limit is shown to hold: the classic unbounded bomb, ended by the timeout.
    const bomb = await exec(k, 'bomb() { bomb | bomb & }; bomb; sleep 600', { sandbox_id: id, timeout_s: 8 }, { timeout: 120000 });
    assert.ok(['timeout', 'pids_limit'].includes(bomb.stop_reason), `fork bomb: stop_reason ${bomb.stop_reason} ${bomb.out.slice(0, 500)}`);
    hostOk();
    await k.client.ping();
    const after = await exec(k, 'echo "N=$(ls -d /proc/[0-9]* | wc -l)"', { sandbox_id: id, timeout_s: 30 });
    const n = Number(/N=(\d+)/.exec(after.stdout)?.[1]);
    assert.ok(n > 0 && n < 10, `the bomb's processes outlived its exec: ${n} processes in the sandbox\n${after.out}`);
  } finally {
    const cleanup = await destroySandbox(k, id);
    assert.deepEqual(cleanup.leftovers, [], `leftovers: ${JSON.stringify(cleanup)}`);
  }
});

// The default policy (no limits asked for) must hold a fork bomb too. The probe stops at 1500
// processes, above the default limit of 1024 (see sandbox_create's schema), so reaching its cap
// means no default limit applied.
test('case 17 (defaults): a fork bomb in a sandbox with the default policy is bounded', async (t) => {
  await withSandbox(k, {}, async (id, sb) => {
    t.diagnostic(`default pids: ${JSON.stringify(sb.isolation?.limits?.pids ?? null)}; cgroups: ${JSON.stringify(sb.isolation?.cgroups ?? null)}`);
    const r = await exec(k, ['./probe', 'forks', '1500'], { sandbox_id: id, timeout_s: 120 });
    const m = /forked (\d+) errno (\d+)/.exec(r.stdout);
    assert.ok(m, `probe output: ${r.out} (stop_reason ${r.stop_reason})`);
    assert.ok(Number(m[1]) < 1500, `a default sandbox forked ${m[1]} processes (the probe's cap): no default process limit (isolation.limits.pids = ${JSON.stringify(sb.isolation?.limits?.pids ?? null)})`);
    hostOk();
  });
});

test('case 18: a memory bomb stops at limits.memory_mb (stop_reason memory_limit)', async (t) => {
  const sb = await limitedSandbox(t, { memory_mb: 64 });
  if (!sb) return;
  try {
    t.diagnostic(`memory enforced by: ${JSON.stringify(sb.isolation?.limits?.memory_mb)}`);
    const r = await exec(k, ['./probe', 'mem', '1024'], { sandbox_id: sb.sandbox_id, timeout_s: 120 });
    assert.ok(!/survived/.test(r.stdout), `1 GiB allocated with memory_mb 64 (stop_reason ${r.stop_reason})`);
    const enforcedBy = JSON.stringify(sb.isolation?.limits?.memory_mb ?? '');
    if (/cgroup/.test(enforcedBy)) {
      assert.equal(r.stop_reason, 'memory_limit', `stop_reason ${r.stop_reason} (exit ${r.exit_code}, signal ${r.signal}): ${r.out.slice(-300)}`);
      assert.ok(r.limits_hit?.includes('memory_mb') || r.limits_hit?.some((x) => /memory/.test(x)), `limits_hit: ${JSON.stringify(r.limits_hit)}`);
    } else {
      // Per-process RLIMIT_AS fallback: the allocation fails inside, cleanly.
      assert.ok(r.stop_reason === 'memory_limit' || /mmap failed/.test(r.stdout), `stop_reason ${r.stop_reason}: ${r.out.slice(-300)}`);
    }
    hostOk();
  } finally {
    await destroySandbox(k, sb.sandbox_id);
  }
});

const SPREAD = 'i=0; while [ $i -lt 16 ]; do timeout 0.5 sh -c "while :; do :; done"; i=$((i+1)); done; echo DONE';

// Default policy: the memory bomb (capped at 3 GiB, above the default 2048 MiB) must be stopped.
test('case 18 (defaults): a memory bomb in a sandbox with the default policy is bounded', async (t) => {
  await withSandbox(k, {}, async (id, sb) => {
    t.diagnostic(`default memory_mb: ${JSON.stringify(sb.isolation?.limits?.memory_mb ?? null)}`);
    const r = await exec(k, ['./probe', 'mem', '3072'], { sandbox_id: id, timeout_s: 300 });
    assert.ok(!/survived/.test(r.stdout), `a default sandbox allocated 3 GiB: no default memory limit (isolation.limits.memory_mb = ${JSON.stringify(sb.isolation?.limits?.memory_mb ?? null)})`);
    hostOk();
  });
});

test('case 19: a CPU burn past cpu_s is stopped (stop_reason cpu_limit)', async (t) => {
  const sb = await limitedSandbox(t, { cpu_s: 1 });
  if (!sb) return;
  try {
    t.diagnostic(`cpu_s enforced by: ${JSON.stringify(sb.isolation?.limits?.cpu_s)}`);
    const one = await exec(k, 'while :; do :; done', { sandbox_id: sb.sandbox_id, timeout_s: 60 });
    assert.equal(one.stop_reason, 'cpu_limit', `session sandbox: stop_reason ${one.stop_reason} (exit ${one.exit_code}, signal ${one.signal})`);
  } finally {
    await destroySandbox(k, sb.sandbox_id);
  }
  const fresh = await exec(k, 'while :; do :; done', { limits: { cpu_s: 1 }, timeout_s: 60 });
  assert.equal(fresh.stop_reason, 'cpu_limit', `fresh sandbox: stop_reason ${fresh.stop_reason} (exit ${fresh.exit_code}, signal ${fresh.signal})`);
});

// The same CPU spent by a chain of short-lived processes (each under a second), about 8 s in all
// against cpu_s 1: a per-process rlimit alone never fires. The wall timeout bounds it.
test('case 19 (spread, fresh sandbox): CPU spread over many short-lived processes stops at cpu_s', async () => {
  const r = await exec(k, SPREAD, { limits: { cpu_s: 1 }, timeout_s: 60 });
  assert.equal(r.stop_reason, 'cpu_limit',
    `ran past cpu_s 1: stop_reason ${r.stop_reason}, cpu_user_ms ${r.cpu_user_ms}, cpu_sys_ms ${r.cpu_sys_ms}`);
});

test('case 19 (spread, session sandbox): CPU spread over many short-lived processes stops at cpu_s', async (t) => {
  const sb = await limitedSandbox(t, { cpu_s: 1 });
  if (!sb) return;
  try {
    const r = await exec(k, SPREAD, { sandbox_id: sb.sandbox_id, timeout_s: 60 });
    assert.equal(r.stop_reason, 'cpu_limit',
      `ran past cpu_s 1 (limit reported as ${JSON.stringify(sb.isolation?.limits?.cpu_s)}): stop_reason ${r.stop_reason}, cpu_user_ms ${r.cpu_user_ms}, cpu_sys_ms ${r.cpu_sys_ms}`);
  } finally {
    await destroySandbox(k, sb.sandbox_id);
  }
});

test('case 20: disk fill: file_size_mb in the workspace, the size of the private /tmp', async (t) => {
  const sb = await limitedSandbox(t, { file_size_mb: 2 });
  if (!sb) return;
  try {
    const r = await exec(k, 'head -c 10485760 /dev/zero > big.bin; echo "rc=$?"; dd if=/dev/zero of=big2.bin bs=1M count=10 2>&1; echo END',
      { sandbox_id: sb.sandbox_id, timeout_s: 60 });
    assert.match(r.stdout, /END/, r.out);
    for (const f of ['big.bin', 'big2.bin']) {
      const size = fs.existsSync(path.join(k.ws, f)) ? fs.statSync(path.join(k.ws, f)).size : 0;
      assert.ok(size <= 2 * 1024 * 1024, `${f} is ${size} bytes on the host with file_size_mb 2`);
    }
  } finally {
    await destroySandbox(k, sb.sandbox_id);
  }
  // /tmp: 64 MiB files until it is full (at most 1.5 GiB are tried). It must fill up inside, at
  // its configured size, and nothing may land in the host's /tmp.
  const before = new Set(fs.readdirSync('/tmp'));
  await withSandbox(k, {}, async (id) => {
    const r = await exec(k, [
      'i=0; while [ $i -lt 24 ]; do head -c 67108864 /dev/zero > /tmp/kilnsec-fill.$i 2>/dev/null || break; i=$((i+1)); echo "WROTE $i"; done',
      'df -k /tmp | tail -1', 'du -sk /tmp', 'echo END',
    ].join('; '), { sandbox_id: id, timeout_s: 300 });
    assert.match(r.stdout, /END/, `${r.stop_reason}: ${r.out.slice(-500)}`);
    const wrote = Math.max(0, ...[...r.stdout.matchAll(/WROTE (\d+)/g)].map((m) => Number(m[1])));
    assert.ok(wrote < 24, `1.5 GiB written to /tmp without running out of space: ${r.out.slice(-400)}`);
    const df = /\S+\s+(\d+)\s+(\d+)\s+(\d+)/.exec(r.stdout.split('\n').find((l) => /\/tmp\s*$/.test(l)) ?? '');
    assert.ok(df, `df /tmp inside: ${r.stdout}`);
    assert.ok(Number(df[1]) <= 2 * 1024 * 1024, `/tmp inside is ${df[1]} KiB (not a bounded tmpfs?)`);
  });
  const leaked = fs.readdirSync('/tmp').filter((n) => !before.has(n) && n.startsWith('kilnsec-fill'));
  assert.deepEqual(leaked, [], 'the /tmp fill landed in the host /tmp');
});

// Samples the server's RSS (from /proc on the host) while `fn` runs; returns [base, peak] in KiB.
async function rssDuring(fn) {
  const pid = k.pid;
  assert.ok(pid > 0, 'the server pid is known');
  const base = vmRssKb(pid);
  let peak = base;
  const sampler = setInterval(() => { peak = Math.max(peak, vmRssKb(pid)); }, 25);
  try {
    await fn();
  } finally {
    clearInterval(sampler);
  }
  return [base, peak];
}
const MiB = 1024 * 1024;
// Memory bound of the flood cases. Under make test-asan (KILN_SANITIZED=1) freed buffers sit in
// ASan's quarantine (256 MiB by default) and every thread has fake stacks, so the bound is for the
// real build only; the flood's behaviour is still checked there.
const RSS_GROWTH_KIB = process.env.KILN_SANITIZED === '1' ? Infinity : 256 * 1024;
let floodWire = 0;
let bigRun;

test('case 21a: output flood of 1 GiB: only the tail comes back, with totals; the server\'s memory stays bounded', async () => {
  floodWire = k.wire.length;
  let big;
  const [base, peak] = await rssDuring(async () => {
    // A sandbox that keeps up to 1.5 GiB, so all of it flows (the default cap is tried in 21c).
    big = await exec(k, 'yes "$(head -c 999 /dev/zero | tr \'\\0\' x)" | head -c 1073741824',
      { limits: { output_bytes: 1536 * MiB }, timeout_s: 600 }, { timeout: 660000 });
  });
  bigRun = big.run_id;
  assert.equal(big.stop_reason, 'exit', `stop_reason ${big.stop_reason}`);
  assert.equal(big.stdout_total_bytes, 1024 * MiB, `stdout_total_bytes ${big.stdout_total_bytes}`);
  assert.equal(big.stdout_truncated, true);
  assert.equal(big.truncated, true);
  assert.ok(big.stdout.length <= 262144, `returned ${big.stdout.length} chars of stdout`);
  assert.ok(peak - base < RSS_GROWTH_KIB, `the server's RSS grew by ${Math.round((peak - base) / 1024)} MiB (from ${Math.round(base / 1024)} MiB) while 1 GiB flowed`);
});

test('case 21b: the rest of a flood pages through process_output, up to its documented maximum limit', async () => {
  assert.ok(bigRun, 'case 21a ran');
  const small = ok(await callTool(k, 'process_output', { run_id: bigRun, stream: 'stdout', offset: 512 * MiB, limit: 65536 }), 'process_output limit 65536');
  assert.equal(small.data.length, 65536);
  assert.equal(small.total_bytes, 1024 * MiB);
  assert.equal(small.next_offset, 512 * MiB + 65536);
  // 131072 is the schema's maximum for `limit`.
  const r = await callTool(k, 'process_output', { run_id: bigRun, stream: 'stdout', offset: 512 * MiB, limit: 131072 });
  const page = ok(r, 'process_output at limit 131072 (the schema maximum)');
  assert.ok(page.data.length > 0 && page.data.length <= 131072, `page of ${page.data.length}`);
});

test('case 21c: the default output cap kills an endless flood (stop_reason output_limit, totals)', async () => {
  let capped;
  const [base, peak] = await rssDuring(async () => {
    capped = await exec(k, 'yes kilnsec-flood', { timeout_s: 300 }, { timeout: 360000 });
  });
  assert.equal(capped.stop_reason, 'output_limit', `stop_reason ${capped.stop_reason}`);
  assert.equal(capped.stdout_truncated, true);
  assert.ok(capped.stdout_total_bytes >= 64 * MiB || capped.output?.stdout?.dropped_bytes > 0,
    `totals: ${JSON.stringify(capped.output)} ${capped.stdout_total_bytes}`);
  assert.ok(peak - base < RSS_GROWTH_KIB, `the server's RSS grew by ${Math.round((peak - base) / 1024)} MiB`);
});

test('case 21d: one endless line without a newline', async () => {
  const line = await exec(k, 'yes | tr -d "\\n"', { limits: { output_bytes: 8 * MiB }, timeout_s: 300 }, { timeout: 360000 });
  assert.equal(line.stop_reason, 'output_limit', `endless line: stop_reason ${line.stop_reason}`);
  assert.equal(line.stdout_truncated, true);
  assert.ok(line.stdout.length > 0 && line.stdout.length <= 262144 && /^y+$/.test(line.stdout), 'the tail is part of the line');
});

test('case 21e: binary output and terminal escapes come back as valid JSON text', async () => {
  const bin = await exec(k, 'printf "\\033[2J\\033[H\\033]0;pwned\\007\\033[31mred\\033[0m\\r\\n\\000\\377\\376\\303\\050"; head -c 262144 /dev/urandom; printf "\\nTHE-END"', { timeout_s: 60 });
  assert.equal(bin.stop_reason, 'exit');
  assert.equal(typeof bin.stdout, 'string');
  assert.match(bin.stdout, /THE-END$/);
  assert.ok(bin.stdout_total_bytes >= 262144);
  const bg = await exec(k, 'printf "\\033]0;x\\007\\000\\377"; head -c 65536 /dev/urandom', { background: true });
  const { data } = await readAll(k, bg.run_id);
  assert.ok(data.length > 0);
});

test('case 21f: after the floods the JSON-RPC stream is intact: every message parsed, none over 1 MiB', async () => {
  assert.deepEqual(k.transportErrors.map(String), [], 'transport/parse errors on the client');
  const sizes = k.wire.slice(floodWire).map((m) => Buffer.byteLength(JSON.stringify(m)));
  assert.ok(sizes.length > 0);
  assert.ok(Math.max(...sizes) <= 1024 * 1024, `a message of ${Math.max(...sizes)} bytes`);
  await k.client.ping();
});

test('case 22: file descriptor exhaustion, huge argv and environment fail cleanly', async (t) => {
  const r = await exec(k, ['./probe', 'fds'], { timeout_s: 60 });
  const m = /opened (\d+) errno (\d+)/.exec(r.stdout);
  assert.ok(m, r.out);
  assert.equal(Number(m[2]), 24, `fd exhaustion ended with errno ${m[2]} (expected EMFILE from the rlimit)`);
  assert.ok(Number(m[1]) < 1024 * 1024, `${m[1]} fds opened`);
  // argv beyond ARG_MAX from the MCP call: a clean error or a non-zero exit, never a crash.
  const argv = ['/bin/echo', ...Array(300000).fill('kilnsec-arg')];
  const big = await callTool(k, 'sandbox_exec', { command: argv, timeout_s: 60 });
  if (!big.isError) assert.notEqual(big.structuredContent.exit_code, 0, 'a 3.6 MB argv ran');
  const env = await callTool(k, 'sandbox_exec', { command: 'echo ${#KILNSEC_BIG}', env: { KILNSEC_BIG: 'x'.repeat(4 * 1024 * 1024) }, timeout_s: 60 });
  if (!env.isError) assert.notEqual(env.structuredContent.stdout.trim(), String(4 * 1024 * 1024), 'a 4 MiB environment variable was passed');
  // ... and from inside.
  const inner = await exec(k, 'big=$(head -c 3000000 /dev/zero | tr "\\0" a); /bin/true "$big"; echo "rc=$?"', { timeout_s: 60 });
  assert.match(inner.stdout, /rc=126/, inner.out);
  // A request bigger than the server accepts: refused, and the server goes on.
  const wireAt = k.wire.length;
  const huge = await callTool(k, 'sandbox_exec', { command: `echo ${'z'.repeat(17 * 1024 * 1024)}` }, { timeout: 20000 })
    .then((x) => ({ x }), (e) => ({ e }));
  assert.ok(huge.e || huge.x.isError, 'a 17 MiB request was run');
  const answer = k.wire.slice(wireAt).find((m) => m.error);
  t.diagnostic(`17 MiB request: ${huge.e ? `client gave up (${huge.e.message})` : 'tool error'}; server sent ${answer ? JSON.stringify(answer).slice(0, 300) : 'no JSON-RPC error'}`);
  await k.client.ping();
  const still = await exec(k, 'echo fine');
  assert.match(still.stdout, /fine/);
});

test('case 23: a command that blocks on stdin finishes (stdin is empty) or is timed out', async () => {
  const read = await exec(k, 'read x; echo "got:[$x] rc=$?"', { timeout_s: 30 });
  assert.equal(read.stop_reason, 'exit', `read on stdin: stop_reason ${read.stop_reason}`);
  assert.match(read.stdout, /got:\[\]/);
  const cat = await exec(k, 'cat; echo cat-done', { timeout_s: 30 });
  assert.match(cat.stdout, /cat-done/);
  const given = await exec(k, 'cat', { stdin: 'hello stdin\n', timeout_s: 30 });
  assert.equal(given.stdout, 'hello stdin\n');
  const tty = await exec(k, 'read x < /dev/tty; echo "tty rc=$?"', { timeout_s: 30 });
  assert.notEqual(tty.stop_reason, 'timeout', 'reading /dev/tty blocked');
  assert.doesNotMatch(tty.stdout, /tty rc=0/);
  // A reader that never sees end of file is stopped by the timeout.
  const forever = await exec(k, 'tail -f /dev/null', { timeout_s: 2 });
  assert.equal(forever.stop_reason, 'timeout');
  // Background: stdin stays open for process_input, and closing it ends the reader.
  const bg = await exec(k, 'cat; echo bg-done', { background: true });
  const w = ok(await callTool(k, 'process_input', { run_id: bg.run_id, data: 'via process_input\n', close: true }), 'process_input');
  assert.equal(w.written, 'via process_input\n'.length);
  const { data, last } = await readAll(k, bg.run_id);
  assert.match(data, /via process_input\nbg-done/);
  assert.equal(last.running, false);
});
