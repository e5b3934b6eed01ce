// Cases 1-8 of shared/SANDBOX_CASES.md: reading and writing where a sandbox must not. Every attack
// runs inside a Kiln sandbox through sandbox_exec (or `kiln run`) and is judged on the host.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import {
  callTool, compileProbe, errorText, exec, isRoot, kilnRun, ok, parseProbe, rand, readAll, requireSandboxTools,
  sleep, startKiln, tempDir, withSandbox,
} from './lib.mjs';

let k;
let outside;       // a host folder next to the workspace
let outsideSecret; // a host file in it
let probe;
before(async () => {
  k = await startKiln();
  requireSandboxTools(k);
  outside = path.join(path.dirname(k.ws), 'outside');
  fs.mkdirSync(outside);
  outsideSecret = path.join(outside, 'secret.txt');
  fs.writeFileSync(outsideSecret, `${k.fake.mark}-outside\n`);
  probe = compileProbe(k.ws);
});
after(() => k?.close());

const sha = (p) => crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex');
const q = (s) => `'${s.replaceAll("'", "'\\''")}'`;
// A shell snippet that prints "READABLE <path>" for each path it can read.
const readable = (paths) => paths.map((p) => `cat ${q(p)} >/dev/null 2>&1 && echo "READABLE ${p}"`).join('; ');

test('case 1: secrets of the user running Kiln and /root are not readable', async () => {
  const realHome = os.userInfo().homedir;
  const targets = [...k.fake.files, outsideSecret, '/root/.bashrc', '/root/.profile', '/root/.ssh/id_rsa',
    `${realHome}/.ssh/id_rsa`, `${realHome}/.bashrc`, '/etc/shadow', '/etc/gshadow'];
  const r = await exec(k, [
    readable(targets),
    `echo "ROOT:$(ls -A /root 2>/dev/null | tr '\\n' ' ')"`,
    `echo "HOME:$(ls -A ${q(k.fake.home)} 2>/dev/null | tr '\\n' ' ')"`,
    `echo "HOMES:$(ls -A /home 2>/dev/null | tr '\\n' ' ')"`,
    `grep -rs -D skip ${q(k.fake.mark)} /etc /tmp /home /root /var /run /opt /srv /mnt ${q(path.dirname(k.fake.home))} | head -5`,
    'echo END',
  ].join('; '));
  assert.match(r.stdout, /END/, `the probe ran: ${r.out}`);
  assert.doesNotMatch(r.stdout, /READABLE/, `readable from inside:\n${r.stdout}`);
  assert.ok(!resultHas(r, k.fake.mark), `a planted secret reached the result:\n${r.out}`);
  assert.match(r.stdout, /^ROOT:$/m, `/root lists something inside: ${r.stdout}`);
  assert.match(r.stdout, /^HOME:$/m, `the server's HOME lists something inside: ${r.stdout}`);
  assert.match(r.stdout, /^HOMES:$/m, `/home lists something inside: ${r.stdout}`);
  if (isRoot) assert.ok(fs.readdirSync('/root').length > 0, 'host /root is not empty (the check above meant something)');
  // The same through `kiln run` (the CLI path), with the fake HOME as its HOME.
  const cli = kilnRun(['--workspace', k.ws, '--', '/bin/sh', '-c', `${readable(k.fake.files)}; echo END`],
    { cwd: k.ws, env: { HOME: k.fake.home } });
  assert.equal(cli.code, 0, `kiln run failed: ${cli.stderr}`);
  assert.match(cli.stdout, /END/);
  assert.doesNotMatch(cli.stdout + cli.stderr, /READABLE|KILNSEC-/, `kiln run: ${cli.stdout}${cli.stderr}`);
});

function resultHas(r, needle) {
  return JSON.stringify(r.raw).includes(needle);
}

test('case 2: writes outside the workspace do not reach the host', async () => {
  const tag = `kilnsec-${rand()}`;
  const passwdBefore = sha('/etc/passwd');
  const targets = [
    path.join(k.fake.home, tag), path.join(k.fake.home, '.ssh', 'authorized_keys'), path.join(outside, tag),
    path.join(path.dirname(k.ws), tag), `/etc/${tag}`, `/usr/${tag}`, `/usr/bin/${tag}`, `/${tag}`,
    `/var/tmp/${tag}`, `/tmp/${tag}`, `/dev/shm/${tag}`, `/root/${tag}`, `/proc/self/root/etc/${tag}`,
    `${k.ws}/../${tag}-dotdot`, `/home/${tag}`, `/opt/${tag}`,
  ];
  const script = [
    ...targets.map((p) => `echo pwned > ${q(p)} 2>/dev/null && echo "WROTE ${p}"`),
    `echo pwned >> /etc/passwd 2>/dev/null && echo "WROTE /etc/passwd"`,
    `mkdir -p ${q(outside)}/${tag}-dir 2>/dev/null`,
    `echo inside > ${q(k.ws)}/inside-${tag}`,
    'echo END',
  ].join('; ');
  const r = await exec(k, script);
  assert.match(r.stdout, /END/, r.out);
  // Checked on the host: a private tmpfs may have made some writes "succeed" inside.
  const landed = [...targets, `${k.ws}/../${tag}-dotdot`].map((p) => path.resolve(p.replace('/proc/self/root', '')))
    .filter((p) => fs.existsSync(p));
  assert.deepEqual(landed, [], `written on the host: ${landed.join(', ')}`);
  assert.ok(!fs.existsSync(path.join(outside, `${tag}-dir`)), 'mkdir outside reached the host');
  assert.equal(sha('/etc/passwd'), passwdBefore, '/etc/passwd changed on the host');
  assert.deepEqual(fs.readdirSync(outside).sort(), ['secret.txt']);
  assert.ok(fs.existsSync(path.join(k.ws, `inside-${tag}`)), 'control: a workspace write lands on the host');
});

test('case 3a: a link planted in the workspace pointing out is not followed', async () => {
  fs.symlinkSync(k.fake.files[0], path.join(k.ws, 'planted-file'));
  fs.symlinkSync(outside, path.join(k.ws, 'planted-dir'));
  fs.symlinkSync('../outside/secret.txt', path.join(k.ws, 'planted-rel'));
  fs.symlinkSync('/', path.join(k.ws, 'planted-root'));
  const r = await exec(k, [
    'cat planted-file planted-rel planted-dir/secret.txt 2>&1',
    `cat planted-root${q(outsideSecret)} 2>&1`,
    'echo pwned > planted-dir/new.txt 2>&1',
    'echo pwned > planted-rel 2>&1',
    'ls planted-dir 2>&1',
    'echo END',
  ].join('; '));
  assert.match(r.stdout, /END/, r.out);
  assert.ok(!resultHas(r, k.fake.mark), `a secret was read through a planted link:\n${r.out}`);
  assert.deepEqual(fs.readdirSync(outside).sort(), ['secret.txt'], 'a write through a planted link reached the host');
  assert.equal(fs.readFileSync(outsideSecret, 'utf8'), `${k.fake.mark}-outside\n`);
});

test('case 3b: a link created inside the sandbox does not reach the host', async () => {
  const r = await exec(k, [
    `ln -sfn ${q(outsideSecret)} made-file`, `ln -sfn ${q(outside)} made-dir`, 'ln -sfn / made-root',
    'cat made-file made-dir/secret.txt 2>&1', `cat made-root${q(outsideSecret)} 2>&1`,
    'echo pwned > made-dir/new.txt 2>&1', 'echo pwned > made-file 2>&1', 'echo END',
  ].join('; '));
  assert.match(r.stdout, /END/, r.out);
  assert.ok(!resultHas(r, k.fake.mark), `a secret was read through a link made inside:\n${r.out}`);
  assert.deepEqual(fs.readdirSync(outside).sort(), ['secret.txt']);
  assert.equal(fs.readFileSync(outsideSecret, 'utf8'), `${k.fake.mark}-outside\n`);
  // The links are now in the workspace on the host: Kiln's own file tools must refuse them too.
  for (const p of ['made-file', 'made-dir/secret.txt', `made-root${outsideSecret}`]) {
    const fr = await callTool(k, 'file_read', { path: p });
    assert.equal(fr.isError, true, `file_read ${p} followed a link made inside the sandbox: ${JSON.stringify(fr.structuredContent)}`);
    assert.ok(!JSON.stringify(fr).includes(k.fake.mark));
  }
  const fw = await callTool(k, 'file_write', { path: 'made-dir/new.txt', content: 'pwned' });
  assert.equal(fw.isError, true, 'file_write through a link made inside must be refused');
  assert.deepEqual(fs.readdirSync(outside).sort(), ['secret.txt']);
});

// The static link cases of the file tools are in tests/e2e/path-escape.test.mjs; here the link is
// swapped by a process in the sandbox while Kiln's file tools use the path (check vs use).
test('case 3c: a link swapped between check and use does not lead Kiln\'s file tools out', async (t) => {
  fs.mkdirSync(path.join(k.ws, 'realdir'), { recursive: true });
  fs.writeFileSync(path.join(k.ws, 'realdir', 'secret.txt'), 'harmless\n');
  fs.writeFileSync(path.join(k.ws, 'plain'), 'harmless\n');
  await withSandbox(k, {}, async (id) => {
    const loop = [
      'i=0; while [ $i -lt 2000000 ]; do i=$((i+1))',
      `ln -sfn ${q(outsideSecret)} swap.tmp && mv -Tf swap.tmp swap`,
      'cp plain swap.tmp2 && mv -Tf swap.tmp2 swap',
      `ln -sfn ${q(outside)} swapdir.tmp && mv -Tf swapdir.tmp swapdir`,
      'ln -sfn realdir swapdir.tmp && mv -Tf swapdir.tmp swapdir',
      'done',
    ].join('; ');
    const bg = await exec(k, loop, { sandbox_id: id, background: true });
    try {
      let harmless = 0;
      let refused = 0;
      for (let i = 0; i < 150; i++) {
        for (const p of ['swap', 'swapdir/secret.txt']) {
          const r = await callTool(k, 'file_read', { path: p });
          const text = JSON.stringify(r);
          assert.ok(!text.includes(k.fake.mark), `file_read ${p} returned the outside secret (race won) on try ${i}`);
          if (r.isError) refused++; else harmless++;
        }
        const w = await callTool(k, 'file_write', { path: 'swapdir/new.txt', content: 'pwned\n' });
        const w2 = await callTool(k, 'file_write', { path: 'swap', content: 'pwned\n' });
        void w; void w2;
        const e = await callTool(k, 'file_edit', { path: 'swapdir/secret.txt', edits: [{ old_text: k.fake.mark, new_text: 'pwned' }] });
        void e;
      }
      assert.deepEqual(fs.readdirSync(outside).sort(), ['secret.txt'], 'a file tool wrote outside through a swapped link');
      assert.equal(fs.readFileSync(outsideSecret, 'utf8'), `${k.fake.mark}-outside\n`, 'the outside secret changed');
      assert.ok(harmless + refused === 300, 'every read answered');
      t.diagnostic(`reads during the swap: ${harmless} answered, ${refused} refused (both > 0 means the race was hit)`);
      // The race was really exercised: the swapping loop was running the whole time.
      const st = ok(await callTool(k, 'process_output', { run_id: bg.run_id }), 'process_output');
      assert.equal(st.running, true, `the swapping loop ended early: ${JSON.stringify(st)}`);
    } finally {
      await callTool(k, 'process_kill', { run_id: bg.run_id });
    }
  });
});

test('case 4: "..", absolute paths, NUL and newline in file-tool paths', async () => {
  const bad = ['../outside/secret.txt', 'a/../../outside/secret.txt', outsideSecret, '/etc/passwd',
    'ok\u0000/../../outside/secret.txt', 'plain\u0000', '\u0000', 'x\n../../outside/secret.txt',
    '../outside/secret.txt\n', `${k.ws}/../outside/secret.txt`, `/proc/self/root${outsideSecret}`];
  for (const p of bad) {
    const r = await callTool(k, 'file_read', { path: p });
    assert.equal(r.isError, true, `file_read ${JSON.stringify(p)} must be refused: ${JSON.stringify(r.structuredContent)}`);
    assert.ok(!JSON.stringify(r).includes(k.fake.mark), `file_read ${JSON.stringify(p)} leaked the secret`);
    const wp = p === '/etc/passwd' ? `/etc/kilnsec-${rand()}` : p.replace('secret.txt', 'new.txt');
    const w = await callTool(k, 'file_write', { path: wp, content: 'pwned', create_dirs: true });
    if (wp.startsWith('/etc/')) assert.ok(!fs.existsSync(wp), `file_write created ${wp} on the host`);
    assert.equal(w.isError, true, `file_write ${JSON.stringify(p)} must be refused`);
  }
  assert.deepEqual(fs.readdirSync(outside).sort(), ['secret.txt']);
  assert.ok(!fs.readdirSync(k.ws).some((n) => /\u0000|\n/.test(n)), 'no file with NUL/newline in its name was created');
});

test('case 4 (cwd): sandbox_exec cwd outside the workspace shows nothing of the host and is refused', async () => {
  // Security first: whatever happens, no host content is reachable through cwd.
  const accepted = [];
  for (const cwd of ['..', '../outside', outside, '/etc', 'realdir/../..', 'ok\u0000', 'x\n..', '/proc/self/root/etc']) {
    const r = await callTool(k, 'sandbox_exec', { command: 'pwd; ls -A; cat secret.txt 2>/dev/null', cwd });
    if (r.isError) {
      assert.ok(errorText(r).length > 0, 'the error says why');
      continue;
    }
    const out = String(r.structuredContent.stdout);
    assert.ok(!out.includes('secret.txt') && !out.includes(k.fake.mark), `cwd ${JSON.stringify(cwd)} reached the host folder: ${out}`);
    accepted.push(`${JSON.stringify(cwd)} (pwd ${out.split('\n')[0]})`);
  }
  // TOOLS.md: anything that resolves outside the root is refused with a tool error naming it.
  assert.deepEqual(accepted, [], `cwd values outside the workspace were accepted instead of refused: ${accepted.join('; ')}`);
});

test('case 5: /proc/<pid>/root, /proc/self/fd and fds leaked from the server', async () => {
  const hostRootNames = ['home', 'root', 'var', 'boot', 'work', 'srv', 'opt', 'mnt'].filter((n) => fs.existsSync(`/${n}`));
  const script = [
    `sleep 30 & bg=$!`,
    'for p in /proc/[0-9]*; do echo "ROOT ${p#/proc/} $(ls -A $p/root/ 2>/dev/null | tr \'\\n\' \' \')"; done',
    `for p in /proc/[0-9]*; do cat $p/root${q(outsideSecret)} $p/root${q(k.fake.files[0])} $p/cwd/../outside/secret.txt 2>/dev/null; done`,
    'cat /proc/1/environ /proc/2/environ /proc/1/cmdline 2>/dev/null | tr "\\0" " "; echo',
    'for f in /proc/1/fd/* /proc/2/fd/*; do readlink $f; done 2>/dev/null',
    'ls /proc/1/root/ /proc/1/cwd/ 2>&1 | head -3',
    // The fds of the background sleep, forked before any pipeline: the shell's own list would race
    // with the pipe it opens for `ls | sed` (its fd 3 until it closes it after forking sed), and a
    // glob in the shell itself would show its directory fd.
    'ls -l /proc/$bg/fd/ | sed -n "s/.* \\([0-9][0-9]*\\) -> \\(.*\\)$/FD \\1 \\2/p"',
    'kill $bg; echo END',
  ].join('; ');
  const r = await exec(k, script);
  assert.match(r.stdout, /END/, r.out);
  assert.ok(!resultHas(r, k.fake.mark), `a secret was read through /proc:\n${r.out}`);
  assert.ok(!r.stdout.includes('KILNSEC-ENV'), `the server's environment is readable through /proc:\n${r.out}`);
  for (const m of r.stdout.matchAll(/^ROOT (\d+) (.*)$/gm)) {
    const names = m[2].trim().split(/\s+/).filter(Boolean);
    const hostOnly = names.filter((n) => hostRootNames.includes(n));
    assert.deepEqual(hostOnly, [], `/proc/${m[1]}/root shows host folders: ${m[2]}`);
  }
  const fds = [...r.stdout.matchAll(/^FD (\d+) (.*)$/gm)].map((m) => ({ fd: Number(m[1]), target: m[2] }));
  assert.deepEqual(fds.map((f) => f.fd).sort((a, b) => a - b), [0, 1, 2], `fds of the sandboxed shell: ${JSON.stringify(fds)}`);
  // None of them is the server's own stdio (the MCP stream) or its state.
  const serverStdio = [0, 1, 2].map((n) => { try { return fs.readlinkSync(`/proc/${k.pid}/fd/${n}`); } catch { return null; } });
  for (const f of fds) {
    assert.ok(!serverStdio.includes(f.target) || f.target === '/dev/null', `fd ${f.fd} inside is the server's stdio (${f.target})`);
    assert.ok(!f.target.includes(k.kilnHome), `fd ${f.fd} points into Kiln's state dir: ${f.target}`);
  }
  // A background run and a run in a session sandbox get no more.
  await withSandbox(k, {}, async (id) => {
    // Looked at once `sleep` has settled: just after its exec the loader holds a library open as
    // fd 3 for a moment. An inherited fd never closes, so 5 s of looking still finds a leak.
    const settle = 'i=0; while [ $i -lt 100 ] && ls /proc/$p/fd/ | grep -qvxE "[012]"; do sleep 0.05; i=$((i+1)); done';
    const bg = await exec(k, `sleep 30 & p=$!; ${settle}; ls -l /proc/$p/fd/ | sed -n "s/.* \\([0-9][0-9]*\\) -> .*/FD \\1/p"; kill $p`, { sandbox_id: id, background: true });
    const { data } = await readAll(k, bg.run_id);
    const got = [...data.matchAll(/^FD (\d+)$/gm)].map((m) => Number(m[1])).sort((a, b) => a - b);
    assert.deepEqual(got, [0, 1, 2], `fds of a background run: ${data}`);
  });
});

test('case 6: hard link to an outside file, mknod, mount, remount, pivot_root', async () => {
  const tag = `kilnsec-${rand()}`;
  const r = await exec(k, [
    `ln /etc/passwd hl-passwd 2>&1; ln /usr/bin/su hl-su 2>&1; ln ${q(outsideSecret)} hl-outside 2>&1`,
    'mknod dev-null c 1 3 2>&1; mknod dev-sda b 8 0 2>&1; mknod /tmp/dev-mem c 1 1 2>&1',
    'mount -t tmpfs none /tmp 2>&1; echo "mount rc=$?"',
    'mount -o remount,rw /usr 2>&1; echo "remount rc=$?"',
    `mount --bind / /tmp 2>&1; echo "bind rc=$?"`,
    `touch /usr/${tag} 2>&1`,
    'mkdir -p /tmp/old; pivot_root /tmp /tmp/old 2>&1; echo "pivot rc=$?"',
    `unshare -Urm sh -c 'mount -o remount,rw /usr && touch /usr/${tag}' 2>&1; echo "unshare rc=$?"`,
    './probe syscalls',
    'echo END',
  ].join('; '));
  assert.match(r.stdout, /END/, r.out);
  for (const n of ['hl-passwd', 'hl-su', 'hl-outside', 'dev-null', 'dev-sda']) {
    let st = null;
    try { st = fs.lstatSync(path.join(k.ws, n)); } catch { /* absent: good */ }
    assert.ok(!st || (!st.isCharacterDevice() && !st.isBlockDevice() && st.nlink === 1),
      `${n} exists on the host as ${st && (st.isCharacterDevice() ? 'a char device' : st.isBlockDevice() ? 'a block device' : `a file with ${st.nlink} links`)}`);
  }
  for (const n of ['probe_chr', 'probe_blk']) assert.ok(!fs.existsSync(path.join(k.ws, n)), `${n} (mknod) exists on the host`);
  assert.ok(!fs.existsSync(`/usr/${tag}`), 'a remount made /usr writable on the host');
  for (const w of ['mount', 'remount', 'bind', 'pivot', 'unshare']) {
    assert.doesNotMatch(r.stdout, new RegExp(`${w} rc=0`), `${w} succeeded inside:\n${r.out}`);
  }
  const rows = parseProbe(r.stdout);
  for (const name of ['mount_tmpfs', 'mount_remount_rw_usr', 'mount_bind_root', 'umount2', 'pivot_root', 'chroot',
    'open_tree', 'fsopen', 'move_mount', 'mknod_char', 'mknodat_block']) {
    assert.ok(rows[name], `probe row ${name} missing:\n${r.stdout}`);
    assert.equal(rows[name].rc, -1, `${name} succeeded inside the sandbox`);
  }
});

test('case 7: /tmp and /dev/shm are not shared with the host or another sandbox', async () => {
  const tag = `kilnsec-${rand()}`;
  fs.writeFileSync(`/tmp/${tag}-host`, 'host\n');
  let shmHost = false;
  try { fs.writeFileSync(`/dev/shm/${tag}-host`, 'host\n'); shmHost = true; } catch { /* no /dev/shm */ }
  // A SysV shared memory segment on the host (the ipc namespace must hide it).
  const key = 0x4b000000 + crypto.randomInt(0, 0xffffff);
  const shmid = execFileSync('/usr/bin/python3', ['-c',
    `import ctypes; l=ctypes.CDLL(None); print(l.shmget(${key}, 4096, 0o1000|0o666))`], { encoding: 'utf8' }).trim();
  try {
    const r = await exec(k, [
      `ls -A /tmp /dev/shm 2>&1`, `cat /tmp/${tag}-host /dev/shm/${tag}-host 2>/dev/null`,
      `echo in > /tmp/${tag}-in; echo in > /dev/shm/${tag}-in`,
      `ipcs -m 2>&1`, 'echo END',
    ].join('; '));
    assert.match(r.stdout, /END/, r.out);
    assert.ok(!r.stdout.includes(`${tag}-host`) && !/^host$/m.test(r.stdout), `host /tmp or /dev/shm visible inside:\n${r.out}`);
    assert.ok(!fs.existsSync(`/tmp/${tag}-in`), 'a /tmp write inside landed in the host /tmp');
    assert.ok(!fs.existsSync(`/dev/shm/${tag}-in`), 'a /dev/shm write inside landed in the host /dev/shm');
    assert.ok(Number(shmid) >= 0, 'control: the host segment exists');
    assert.ok(!r.stdout.toLowerCase().includes(`0x${key.toString(16)}`), `the host's SysV segment is visible:\n${r.stdout}`);
  } finally {
    fs.rmSync(`/tmp/${tag}-host`, { force: true });
    if (shmHost) fs.rmSync(`/dev/shm/${tag}-host`, { force: true });
    execFileSync('/usr/bin/python3', ['-c', `import ctypes; l=ctypes.CDLL(None); l.shmctl(${shmid}, 0, None)`]);
  }
  // Two session sandboxes at once (also case 26).
  await withSandbox(k, {}, async (a) => {
    await withSandbox(k, {}, async (b) => {
      const wa = await exec(k, `echo a > /tmp/${tag}-a; echo a > /dev/shm/${tag}-a; echo END`, { sandbox_id: a });
      assert.match(wa.stdout, /END/);
      const rb = await exec(k, `ls -A /tmp /dev/shm; cat /tmp/${tag}-a /dev/shm/${tag}-a 2>/dev/null; echo b > /tmp/${tag}-b; echo END`, { sandbox_id: b });
      assert.match(rb.stdout, /END/);
      assert.ok(!rb.stdout.includes(`${tag}-a`) && !/^a$/m.test(rb.stdout), `sandbox B sees A's /tmp or /dev/shm:\n${rb.out}`);
      const ra = await exec(k, `ls -A /tmp; cat /tmp/${tag}-a; echo END`, { sandbox_id: a });
      assert.ok(!ra.stdout.includes(`${tag}-b`), `sandbox A sees B's /tmp:\n${ra.out}`);
      assert.match(ra.stdout, /^a$/m, 'control: A keeps its own /tmp between execs');
    });
  });
});

test('case 8: Kiln\'s state directory (traces, runs, secrets, database) is not visible inside', async () => {
  // Make sure the state dir has something in it: a run's output and a stored secret.
  await exec(k, 'echo state-probe');
  const set = execFileSync(k.bin, ['secret', 'set', 'KILNSEC_STORED'], {
    input: `${k.fake.mark}-stored`, env: { ...process.env, KILN_HOME: k.kilnHome, HOME: k.fake.home }, stdio: 'pipe',
  });
  void set;
  const entries = fs.readdirSync(k.kilnHome);
  assert.ok(entries.length > 0, `control: the state dir ${k.kilnHome} has entries`);
  const paths = [k.kilnHome, ...entries.map((e) => path.join(k.kilnHome, e)), path.join(k.kilnHome, 'secrets', 'KILNSEC_STORED')];
  const r = await exec(k, [
    ...paths.map((p) => `test -e ${q(p)} && echo "VISIBLE ${p}"`),
    readable(paths),
    `ls -A ${q(k.kilnHome)} 2>&1`,
    `ls -A ${q(path.join(k.fake.home, '.local', 'state'))} 2>&1`,
    `grep -rls -D skip ${q(k.fake.mark)} / --exclude-dir=proc --exclude-dir=usr --exclude-dir=sys 2>/dev/null | head`,
    'echo END',
  ].join('; '));
  assert.match(r.stdout, /END/, r.out);
  assert.doesNotMatch(r.stdout, /VISIBLE|READABLE/, `Kiln's state is visible inside:\n${r.stdout}`);
  assert.ok(!resultHas(r, `${k.fake.mark}-stored`), 'a stored secret value was readable');
  // Another workspace of the same server is not visible either.
  const ws2 = path.join(tempDir('kiln-sec-ws2-'), 'ws2');
  fs.mkdirSync(ws2);
  fs.writeFileSync(path.join(ws2, 'other.txt'), `${k.fake.mark}-ws2\n`);
  ok(await callTool(k, 'workspace_open', { path: ws2 }), 'workspace_open ws2');
  ok(await callTool(k, 'workspace_open', { path: k.ws }), 'workspace_open ws (back)');
  const r2 = await exec(k, `cat ${q(path.join(ws2, 'other.txt'))} 2>&1; ls ${q(ws2)} 2>&1; echo END`);
  assert.ok(!resultHas(r2, `${k.fake.mark}-ws2`), `another workspace is readable:\n${r2.out}`);
  await sleep(0);
});
