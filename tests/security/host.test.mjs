// Cases 31, 36 and 20 of shared/SANDBOX_CASES.md: the host itself. 31: /proc and /sys entries that
// steer the whole host (with Kiln run as root the sandbox's uid 0 is the host's, and the kernel
// guards /proc/sys by uid and mode only). 36: many sandboxes at once stay within the server's
// ceilings. 20: a run that fills the disk is stopped from outside.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import {
  callTool, createSandbox, destroySandbox, errorText, exec, here, isRoot, ok, requireSandboxTools, startKiln, waitFor,
} from './lib.mjs';

let k;
before(async () => {
  k = await startKiln();
  requireSandboxTools(k);
  fs.copyFileSync(path.join(here, 'probes', 'proc_write_walk.py'), path.join(k.ws, 'walk.py'));
});
after(() => k?.close());

const corePattern = '/proc/sys/kernel/core_pattern';

test('case 31: no /proc or /sys entry opens for writing inside a default sandbox', async () => {
  const r = await exec(k, ['python3', 'walk.py', '/proc', '/sys'], { timeout_s: 120 });
  assert.equal(r.exit_code, 0, `the walk failed: ${r.out.slice(0, 2000)}`);
  const report = JSON.parse(r.stdout);
  // A walk that saw almost nothing proves nothing: /proc/sys alone has hundreds of files.
  assert.ok(report.checked > 300, `only ${report.checked} files were tried: ${r.stdout.slice(0, 500)}`);
  assert.equal(report.writable_count, 0, `${report.writable_count} entries writable inside the sandbox (as ${isRoot ? 'root' : 'a plain user'}): ${report.writable.join(', ')}`);
});

test('case 31: the same holds in a session sandbox, and its isolation report says /proc is read-only', async () => {
  const sb = await createSandbox(k);
  try {
    assert.equal(sb.isolation?.proc?.read_only, true, `isolation.proc: ${JSON.stringify(sb.isolation?.proc)}`);
    assert.ok(Array.isArray(sb.isolation.proc.masked), 'isolation.proc.masked lists what is hidden');
    const r = await exec(k, ['python3', 'walk.py', '/proc', '/sys'], { sandbox_id: sb.sandbox_id, timeout_s: 120 });
    const report = JSON.parse(r.stdout);
    assert.ok(report.checked > 300, `only ${report.checked} files were tried`);
    assert.equal(report.writable_count, 0, `${report.writable_count} writable: ${report.writable.join(', ')}`);
    // Readable still: toolchains and servers read /proc/sys and /proc/meminfo.
    const rd = await exec(k, 'cat /proc/sys/vm/overcommit_memory /proc/sys/kernel/pid_max >/dev/null && head -1 /proc/meminfo && echo > /dev/stdout && echo wrote-stdout',
      { sandbox_id: sb.sandbox_id });
    assert.equal(rd.exit_code, 0, rd.out);
    assert.match(rd.stdout, /MemTotal/);
    assert.match(rd.stdout, /wrote-stdout/, 'writing through /dev/stdout (a /proc/self/fd link) still works');
    // Host-wide state hidden: sched_debug and timer_list name the host's processes.
    const hidden = await exec(k, 'for f in /proc/sched_debug /proc/timer_list /proc/kcore /proc/keys /proc/sysrq-trigger; do [ -e $f ] && printf "%s:%s\\n" $f "$(head -c 64 $f 2>/dev/null | wc -c)"; done; true',
      { sandbox_id: sb.sandbox_id });
    for (const line of hidden.stdout.trim().split('\n').filter(Boolean)) {
      assert.match(line, /:0$/, `a host-wide /proc entry can be read: ${line}`);
    }
  } finally {
    await destroySandbox(k, sb.sandbox_id);
  }
});

test('case 31: the core_pattern attack for real: no write to kernel/core_pattern, no crash handler runs on the host', async (t) => {
  const before = fs.readFileSync(corePattern, 'utf8');
  const proof = path.join(k.ws, `pwned-${process.pid}`);
  fs.writeFileSync(path.join(k.ws, 'pwn'), `#!/bin/sh\nid > ${proof}\n`, { mode: 0o755 });
  try {
    const r = await exec(k, `printf '|${k.ws}/pwn' | dd of=${corePattern} conv=notrunc 2>&1; echo dd=$?; `
      + 'for f in /proc/sys/kernel/pid_max /proc/sys/kernel/randomize_va_space /proc/sys/vm/drop_caches /proc/sysrq-trigger; do '
      + '( : > /dev/null; exec 3>>"$f" ) 2>/dev/null && echo "OPEN $f"; done; '
      + "ulimit -c unlimited 2>/dev/null; sh -c 'kill -SEGV $$'; echo crashed=$?", { timeout_s: 60 });
    t.diagnostic(r.out.slice(0, 400));
    assert.match(r.stdout, /dd=[1-9]/, `dd to core_pattern succeeded inside the sandbox: ${r.out}`);
    assert.doesNotMatch(r.stdout, /OPEN /, `a host kernel setting opened for writing: ${r.out}`);
    // Give a (wrongly) installed crash handler the time to run before looking for its proof.
    await waitFor(() => fs.existsSync(proof), 2000);
    assert.equal(fs.readFileSync(corePattern, 'utf8'), before, 'the host core_pattern changed');
    assert.ok(!fs.existsSync(proof), `a crash handler ran on the host: ${fs.existsSync(proof) ? fs.readFileSync(proof, 'utf8') : ''}`);
  } finally {
    // Never leave the host with a core_pattern pointing into a temp folder, even when the test fails.
    if (isRoot && fs.readFileSync(corePattern, 'utf8') !== before) fs.writeFileSync(corePattern, before);
  }
});

test('case 36: session sandboxes beyond --max-sandboxes are refused with what to do, and room comes back', async () => {
  const s = await startKiln({ args: ['--max-sandboxes', '3'] });
  try {
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await createSandbox(s)).sandbox_id);
    const r = await callTool(s, 'sandbox_create', {});
    assert.ok(r.isError, `a 4th sandbox was created past --max-sandboxes 3: ${JSON.stringify(r.structuredContent)}`);
    assert.match(errorText(r), /no room for another sandbox/);
    assert.match(errorText(r), /sandbox_destroy|--max-sandboxes/);
    // A fresh exec waits for room rather than failing: here it runs once a sandbox is destroyed.
    const pending = exec(s, 'echo waited-for-room', { limits: { wall_s: 120 } });
    await destroySandbox(s, ids.pop());
    const e = await pending;
    assert.equal(e.stdout, 'waited-for-room\n', e.out);
    // A fresh exec that cannot get room within its wall time says so.
    ids.push((await createSandbox(s)).sandbox_id);
    const late = await callTool(s, 'sandbox_exec', { command: 'true', limits: { wall_s: 1 } });
    assert.ok(late.isError, 'a fresh exec ran although no room was free');
    assert.match(errorText(late), /no room for another sandbox/);
    for (const id of ids) await destroySandbox(s, id);
  } finally {
    await s.close();
  }
});

test('case 36: the sum of live sandboxes\' memory limits stays within the ceiling (default: the machine\'s RAM)', async () => {
  const s = await startKiln({ args: ['--max-sandbox-memory-mb', '3000'] });
  const ids = [];
  try {
    const a = await callTool(s, 'sandbox_create', { limits: { memory_mb: 1500 } });
    if (a.isError && !isRoot && /cannot be enforced|cannot enforce/.test(errorText(a))) {
      // Without a memory cgroup a plain user's memory_mb is metered by pid 1; refusal would be a bug.
      assert.fail(`memory_mb refused for a plain user: ${errorText(a)}`);
    }
    ids.push(ok(a, 'sandbox_create 1500').sandbox_id);
    ids.push(ok(await callTool(s, 'sandbox_create', { limits: { memory_mb: 1500 } }), 'sandbox_create 1500').sandbox_id);
    const c = await callTool(s, 'sandbox_create', { limits: { memory_mb: 100 } });
    assert.ok(c.isError, 'a third sandbox was admitted past the 3000 MiB ceiling');
    assert.match(errorText(c), /3000 MiB/);
    // A claim bigger than the whole ceiling never waits.
    const huge = await callTool(s, 'sandbox_exec', { command: 'true', limits: { memory_mb: 4000 } });
    assert.ok(huge.isError, 'a fresh sandbox bigger than the ceiling was admitted');
  } finally {
    for (const id of ids) await destroySandbox(s, id);
    await s.close();
  }
  // The attack as reported: default sandboxes (2 GiB each) until the server says no. It must say
  // no before their limits add up to more than the machine's memory.
  const memMb = Number(/MemTotal:\s+(\d+)/.exec(fs.readFileSync('/proc/meminfo', 'utf8'))[1]) / 1024;
  const d = await startKiln();
  const made = [];
  try {
    for (let i = 0; i < 200; i++) {
      const r = await callTool(d, 'sandbox_create', {});
      if (r.isError) {
        assert.match(errorText(r), /no room for another sandbox/);
        break;
      }
      made.push(r.structuredContent.sandbox_id);
    }
    assert.ok(made.length * 2048 <= memMb, `${made.length} default sandboxes (2048 MiB each) on a ${Math.round(memMb)} MiB host`);
    assert.ok(made.length >= 1, 'not even one default sandbox was admitted');
  } finally {
    for (const id of made) await destroySandbox(d, id);
    await d.close();
  }
});

test('case 20: a run that fills the workspace past limits.disk_mb is stopped from outside', async () => {
  const file = path.join(k.ws, `fill-${process.pid}`);
  try {
    // 3 GB asked, 64 MiB allowed: the tree is killed long before dd ends.
    const r = await exec(k, `dd if=/dev/zero of=${path.basename(file)} bs=1M count=3000 2>&1; echo dd=$?`,
      { limits: { disk_mb: 64 }, timeout_s: 300 }, { timeout: 320000 });
    const size = fs.existsSync(file) ? fs.statSync(file).size : 0;
    assert.equal(r.stop_reason, 'disk_limit', `stop_reason ${r.stop_reason}, file ${size} bytes: ${r.out.slice(-300)}`);
    assert.ok(r.limits_hit?.includes('disk_mb'), `limits_hit ${JSON.stringify(r.limits_hit)}`);
    assert.ok(size < 3000 * 2 ** 20, `dd wrote all ${size} bytes`);
  } finally {
    fs.rmSync(file, { force: true });
  }
});

test('case 20/36: below the free-space reserve no run starts, and the error says what to do', async () => {
  const free = Number(fs.statfsSync(k.ws).bavail) * Number(fs.statfsSync(k.ws).bsize);
  const reserve = Math.ceil(free / 2 ** 20) + 1024;
  const s = await startKiln({ args: ['--disk-reserve-mb', String(reserve)] });
  try {
    const r = await callTool(s, 'sandbox_exec', { command: 'echo should-not-run' });
    assert.ok(r.isError, `a run started below the reserve: ${JSON.stringify(r.structuredContent)}`);
    assert.match(errorText(r), /MiB free, below the \d+ MiB/);
    assert.match(errorText(r), /--disk-reserve-mb/);
  } finally {
    await s.close();
  }
});

test('case 31: no set-id file can be made in the workspace (as root it would be a setuid-root program on the host)', async () => {
  const script = [
    'cp /bin/true t1; chmod 4755 t1; chmod u+s t1; chmod 2755 t1; chmod g+s t1',
    'install -m 4755 /bin/true t2',
    'mkdir d1; chmod 2775 d1',
    `python3 -c "import os,stat
for name, f in (('p1', lambda: os.close(os.open('p1', os.O_CREAT | os.O_WRONLY, 0o4755))),
                ('p2', lambda: os.mknod('p2', stat.S_IFREG | 0o6755)),
                ('p3', lambda: (open('p3', 'w').close(), os.chmod('p3', 0o4755))),
                ('p4', lambda: (open('p4', 'w').close(), os.chmod(os.open('p4', os.O_RDONLY), 0o2755)))):
    try: f()
    except OSError as e: print(name, e.errno)"`,
    'true',
  ].join('; ');
  const r = await exec(k, script, { timeout_s: 60 });
  const found = [];
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      const st = fs.lstatSync(p);
      if (st.mode & 0o6000) found.push(`${p} ${(st.mode & 0o7777).toString(8)}`);
      if (e.isDirectory()) walk(p);
    }
  };
  walk(k.ws);
  assert.deepEqual(found, [], `set-id files on the host after ${r.out.slice(0, 600)}`);
});

test('case 31: swapping the workspace folder for a link while the sandbox is built never mounts the link\'s target', async (t) => {
  if (!isRoot) return t.skip('needs root: the victim folder is one only root can write, the attacker the plain user kilntest');
  const { execFileSync, spawn } = await import('node:child_process');
  const base = fs.mkdtempSync('/tmp/kiln-swap-');
  const victim = fs.mkdtempSync('/var/tmp/kiln-victim-');
  fs.chmodSync(victim, 0o700);
  const flip = path.join(base, 'flip');
  fs.writeFileSync(`${flip}.c`, `#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <time.h>
int main(int c, char** v) { time_t end = time(0) + 30; while (time(0) < end) renameat2(AT_FDCWD, v[1], AT_FDCWD, v[2], RENAME_EXCHANGE); return 0; }
`);
  execFileSync('cc', ['-O1', '-o', flip, `${flip}.c`]);
  fs.chmodSync(base, 0o755);
  fs.chmodSync(flip, 0o755);
  const shared = path.join(base, 'shared');
  fs.mkdirSync(shared);
  fs.mkdirSync(path.join(shared, 'proj'));
  fs.symlinkSync(path.relative(shared, victim), path.join(shared, 'alt'));
  execFileSync('chown', ['-R', 'kilntest:kilntest', shared]);
  const flipper = spawn('runuser', ['-u', 'kilntest', '--', flip, path.join(shared, 'proj'), path.join(shared, 'alt')], { stdio: 'ignore' });
  try {
    const state = fs.mkdtempSync('/tmp/kiln-swap-state-');
    let ran = 0;
    for (let i = 0; i < 60; i++) {
      const r = spawnSyncKiln(['--state-dir', state, 'run', '--workspace', path.join(shared, 'proj'), '--', 'sh', '-c', `touch ESCAPED_${i}`]);
      if (r.status === 0) ran++;
    }
    t.diagnostic(`${ran} of 60 runs got a sandbox while the folder was being swapped`);
    const escaped = fs.readdirSync(victim);
    assert.deepEqual(escaped, [], `runs wrote into the root-only folder the link points to: ${escaped.join(', ')}`);
    fs.rmSync(state, { recursive: true, force: true });
  } finally {
    if (flipper.exitCode === null && flipper.signalCode === null) {
      const gone = new Promise((resolve) => flipper.once('exit', resolve));
      flipper.kill('SIGKILL');
      await gone;
    }
    // runuser does not pass SIGKILL on to the flipper it started (which stops by itself in 30 s).
    spawnSync('pkill', ['-KILL', '-f', flip]);
    fs.rmSync(base, { recursive: true, force: true });
    fs.rmSync(victim, { recursive: true, force: true });
  }
});

function spawnSyncKiln(args) {
  return spawnSync(k.bin, args, { encoding: 'utf8', timeout: 60000 });
}
