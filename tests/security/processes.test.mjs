// Cases 9-13 of shared/SANDBOX_CASES.md: processes and privileges. Host processes are started by
// the test (never pre-existing ones) and checked from the host after the attack.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import {
  alive, callTool, compileProbe, errorText, exec, hostSleeper, isRoot, kilnBin, kilnEnv, marker, parseProbe, pgrep, rand,
  requireSandboxTools, startKiln, tempDir, waitGone, withSandbox,
} from './lib.mjs';

let k;
let sleeper;
let tag;
before(async () => {
  k = await startKiln();
  requireSandboxTools(k);
  compileProbe(k.ws);
  tag = `kilnsec-host-${rand()}`;
  sleeper = hostSleeper(tag);
});
after(async () => {
  sleeper?.kill('SIGKILL');
  await k?.close();
});

let killMinusOne; // the raw sandbox_exec result of `kill -9 -1` (checked by "case 9 (result)")
test('case 9: host processes are invisible and kill -1 does not reach them', async () => {
  assert.ok(alive(sleeper.pid), 'control: the host process runs');
  await withSandbox(k, {}, async (id) => {
    const r = await exec(k, [
      'ps -eo pid,args 2>&1', 'cat /proc/[0-9]*/cmdline 2>/dev/null | tr "\\0" " "; echo',
      `echo "NPROC $(ls -d /proc/[0-9]* | wc -l)"`,
      `kill -9 ${sleeper.pid} 2>&1; echo "direct rc=$?"`, 'echo END',
    ].join('; '), { sandbox_id: id });
    assert.match(r.stdout, /END/, r.out);
    assert.ok(!r.out.includes(tag), `a host process is visible inside:\n${r.out}`);
    const n = Number(/NPROC (\d+)/.exec(r.stdout)?.[1]);
    assert.ok(n > 0 && n < 16, `the sandbox sees ${n} processes (host processes visible?)\n${r.out}`);
    // kill -1 signals every process the caller may signal: inside, that is the sandbox only.
    killMinusOne = await callTool(k, 'sandbox_exec', { command: 'kill -TERM -1; kill -9 -1; echo "minus1 rc=$?"', sandbox_id: id });
    // Its exit status says only whether anything was left for the second kill to signal (ESRCH when
    // the TERM had already ended the rest, a race), so any status is fine: what matters is that
    // the command survived its own kill -1 and its output came back.
    if (!killMinusOne.isError) assert.match(JSON.stringify(killMinusOne.structuredContent), /minus1 rc=[01]\b/, "the command itself survived its own kill -1 and its output came back");
    assert.ok(alive(sleeper.pid), 'kill -1 from inside killed a host process');
    // The sandbox itself survives its own kill -1 and still serves.
    const again = await exec(k, 'echo still-serving', { sandbox_id: id });
    assert.match(again.stdout, /still-serving/);
  });
  assert.ok(alive(sleeper.pid), 'the host process survived');
});

test('case 9 (result): `kill -9 -1` inside gets a result, not a tool error', () => {
  assert.ok(killMinusOne, 'case 9 ran');
  assert.ok(!killMinusOne.isError, `sandbox_exec of "kill -9 -1" returned a tool error instead of a result (TOOLS.md: a kill of the user's command is data): ${errorText(killMinusOne)}`);
});

test('case 10: ptrace and process_vm_readv against anything outside (and inside) fail', async () => {
  const r = await exec(k, [`./probe trace ${sleeper.pid}`, 'echo ---', './probe trace 1', 'echo ---',
    'sleep 30 & s=$!; ./probe trace $s; kill $s', 'echo END'].join('; '));
  assert.match(r.stdout, /END/, r.out);
  const parts = r.stdout.split('---\n').map(parseProbe);
  for (const [i, who] of [[0, `host pid ${sleeper.pid}`], [1, 'pid 1 (the sandbox init)'], [2, 'a sibling inside']]) {
    const rows = parts[i];
    for (const name of ['ptrace_attach', 'ptrace_seize', 'process_vm_readv', 'process_vm_writev']) {
      assert.ok(rows[name], `probe row ${name} missing for ${who}:\n${r.out}`);
      assert.equal(rows[name].rc, -1, `${name} on ${who} succeeded`);
    }
    assert.ok(!rows.read_proc_mem || rows.read_proc_mem.rc === -1, `/proc/<pid>/mem of ${who} was readable`);
  }
  const status = fs.readFileSync(`/proc/${sleeper.pid}/status`, 'utf8');
  assert.match(status, /TracerPid:\s+0\b/, 'the host process is being traced');
  assert.ok(alive(sleeper.pid));
});

test('case 11: setuid binaries, su and sudo give nothing: NoNewPrivs 1, every capability set empty', async () => {
  const uid = process.getuid();
  let suidProbe = '';
  if (isRoot) {
    // A setuid/setgid binary owned by another user: with no_new_privs it must not change the euid.
    suidProbe = path.join(k.ws, 'suid-probe');
    fs.copyFileSync(path.join(k.ws, 'probe'), suidProbe);
    fs.chownSync(suidProbe, 65534, 65534);
    fs.chmodSync(suidProbe, 0o6755);
  }
  const r = await exec(k, [
    'grep -E "^(NoNewPrivs|Seccomp|Cap[A-Za-z]+):" /proc/self/status',
    'id',
    isRoot ? './suid-probe ids' : 'true',
    'su -s /bin/sh nobody -c "echo ESCALATED-nobody" </dev/null 2>&1; echo "su-nobody rc=$?"',
    'su root -c "echo ESCALATED-root" </dev/null 2>&1; echo "su-root rc=$?"',
    'if command -v sudo >/dev/null; then sudo -n sh -c "echo ESCALATED-sudo" 2>&1; else echo NO-SUDO; fi',
    'mount -t tmpfs none /tmp 2>&1; echo "setuid-mount rc=$?"',
    'echo END',
  ].join('; '));
  assert.match(r.stdout, /END/, r.out);
  const st = Object.fromEntries([...r.stdout.matchAll(/^(NoNewPrivs|Seccomp|Cap\w+):\s+(\S+)$/gm)].map((m) => [m[1], m[2]]));
  assert.equal(st.NoNewPrivs, '1', `NoNewPrivs: ${JSON.stringify(st)}`);
  assert.equal(st.Seccomp, '2', `Seccomp (filter mode): ${JSON.stringify(st)}`);
  for (const c of ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb']) {
    assert.ok(st[c] !== undefined, `${c} missing from /proc/self/status`);
    assert.equal(BigInt(`0x${st[c]}`), 0n, `${c} is ${st[c]}, must be 0`);
  }
  assert.doesNotMatch(r.stdout, /^ESCALATED/m, `su/sudo ran a command as another user:\n${r.out}`);
  assert.doesNotMatch(r.stdout, /setuid-mount rc=0/, 'the setuid mount binary mounted');
  if (isRoot) {
    const m = /uid (\d+) euid (\d+) gid (\d+) egid (\d+)/.exec(r.stdout);
    assert.ok(m, `suid probe output: ${r.stdout}`);
    assert.equal(Number(m[2]), uid, `a setuid binary changed the euid to ${m[2]}`);
    assert.equal(Number(m[4]), Number(m[3]), `a setgid binary changed the egid to ${m[4]}`);
  }
});

// Injection into the caller's terminal. Over MCP the command has no terminal; `kiln run` is the
// path where a terminal exists, so it is run inside a pty that the test owns and the test reads
// what the shell that called `kiln run` receives afterwards.
test('case 12: TIOCSTI / TIOCLINUX injection fails, over MCP and into the terminal of `kiln run`', async (t) => {
  const r = await exec(k, './probe tty "echo INJECTED\n"; echo END');
  assert.match(r.stdout, /END/, r.out);
  const rows = parseProbe(r.stdout);
  assert.ok(rows.open_dev_tty, r.out);
  assert.equal(rows.open_dev_tty.rc, -1, '/dev/tty opened inside (a controlling terminal is reachable)');
  for (const [name, row] of Object.entries(rows)) {
    if (name.startsWith('tiocsti') || name.startsWith('tioclinux')) assert.equal(row.rc, -1, `${name} succeeded over MCP`);
  }

  const text = `echo INJECTED_${rand()}`;
  const py = `
import os, pty, sys, time
cmd = sys.argv[1]
pid, fd = pty.fork()
if pid == 0:
    os.execvp("bash", ["bash", "--norc", "--noprofile", "-c", cmd + '; read -t 2 line; echo "GOT:[$line]"'])
out = b""
while True:
    try:
        b = os.read(fd, 65536)
    except OSError:
        break
    if not b:
        break
    out += b
os.waitpid(pid, 0)
sys.stdout.write(out.decode("utf8", "replace"))
`;
  const probe = path.join(k.ws, 'probe');
  const pty = (cmd) => spawnSync('/usr/bin/python3', ['-c', py, cmd], {
    encoding: 'utf8', timeout: 60000, env: kilnEnv(tempDir('kiln-sec-run-state-'), { HOME: k.fake.home }),
  }).stdout ?? '';
  // Control: the same probe run directly on the host does inject into the pty (legacy_tiocsti on).
  const control = pty(`${probe} tty '${text}\n'`);
  const controlInjected = control.includes(`GOT:[${text}]`);
  if (!controlInjected) t.diagnostic(`control: TIOCSTI does not inject on this host (kernel setting), so the kiln run check is weaker: ${control.slice(0, 300)}`);
  const viaKiln = pty(`${kilnBin()} run --workspace ${k.ws} -- ${probe} tty '${text}\n'`);
  assert.match(viaKiln, /GOT:\[/, `the pty harness did not finish: ${viaKiln.slice(0, 2000)}`);
  assert.ok(!viaKiln.includes(`GOT:[${text}]`), `kiln run let the command inject into the caller's terminal:\n${viaKiln}`);
  const rows2 = parseProbe(viaKiln.replace(/\r/g, ''));
  for (const [name, row] of Object.entries(rows2)) {
    if (name.startsWith('tiocsti') || name.startsWith('tioclinux') || name === 'open_dev_tty') {
      assert.equal(row.rc, -1, `${name} succeeded under kiln run`);
    }
  }
});

test('case 13: nested user namespaces, io_uring, bpf, perf_event_open, userfaultfd, keyctl, open_by_handle_at, x32/i386 ABI', async () => {
  const r = await exec(k, './probe syscalls; unshare -U true 2>&1; echo "unshare-cmd rc=$?"; unshare -Ur id 2>&1; echo END');
  assert.match(r.stdout, /END/, r.out);
  const rows = parseProbe(r.stdout);
  const must = ['ptrace_traceme', 'unshare_user', 'unshare_mount', 'unshare_net', 'setns', 'clone_newuser', 'clone_newns',
    'clone3_newuser', 'io_uring_setup', 'bpf', 'perf_event_open', 'userfaultfd', 'keyctl', 'add_key', 'request_key',
    'open_by_handle_at', 'name_to_handle_at', 'kexec_load', 'init_module', 'personality_rie'];
  const worked = must.filter((n) => !rows[n] || rows[n].rc !== -1);
  assert.deepEqual(worked, [], `these succeeded (or did not run) inside: ${worked.map((n) => `${n}=${JSON.stringify(rows[n])}`).join(', ')}\n${r.stdout}`);
  assert.doesNotMatch(r.stdout, /unshare-cmd rc=0/, 'unshare -U worked inside');
  const x32 = await exec(k, ['./probe', 'x32']);
  assert.doesNotMatch(x32.stdout, /x32_getpid/, `an x32 syscall ran: ${x32.out}`);
  assert.equal(x32.signal, 31, `the x32 syscall must kill the process with SIGSYS; got ${JSON.stringify({ exit: x32.exit_code, signal: x32.signal, stop: x32.stop_reason })}`);
  const i386 = await exec(k, ['./probe', 'int80']);
  assert.doesNotMatch(i386.stdout, /int80_getpid/, `an i386 (int 0x80) syscall ran: ${i386.out}`);
  assert.ok([31, 11].includes(i386.signal), `int 0x80 must be killed (SIGSYS/SIGSEGV); got ${JSON.stringify({ exit: i386.exit_code, signal: i386.signal })}`);
});

// The host pids of every sandbox's pid 1 under this server: a kiln-sandbox whose parent is the
// helper's outer process (also a kiln-sandbox), a child of the server or of the server's zygote
// (`kiln-sandbox --zygote`, named kiln-zygote, which forks the helpers).
function sandboxInits(serverPid) {
  const info = new Map();
  for (const d of fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const m = /^\d+ \((.*)\) \S+ (\d+)/s.exec(stat);
      if (m) info.set(Number(d), { comm: m[1], ppid: Number(m[2]) });
    } catch { /* gone */ }
  }
  const isHelper = (p) => info.get(p)?.comm === 'kiln-sandbox';
  const underServer = (p) => p === serverPid || (info.get(p)?.comm === 'kiln-zygote' && info.get(p).ppid === serverPid);
  return [...info.keys()].filter((p) => isHelper(p) && isHelper(info.get(p).ppid) && underServer(info.get(info.get(p).ppid).ppid));
}

test('case 10 (control channel): user code cannot reach pid 1\'s control socket (the `connect` and `exec` ops)', async () => {
  const getfd = [
    'import ctypes', 'libc = ctypes.CDLL(None, use_errno=True)',
    'pfd = libc.syscall(434, 1, 0)', // pidfd_open(1)
    'got = [n for n in range(0, 64) if pfd >= 0 and libc.syscall(438, pfd, n, 0) >= 0]', // pidfd_getfd
    'print("GETFD", pfd, got)',
  ].join('\n');
  await withSandbox(k, {}, async (id) => {
    const r = await exec(k, [
      // The names may be listable (to root inside), never openable: pid 1 is not dumpable.
      'for f in /proc/1/fd/*; do (exec 9<"$f") 2>/dev/null && echo "OPENED $f"; (exec 9>>"$f") 2>/dev/null && echo "OPENED $f"; done',
      'for f in /proc/[0-9]*/fd/*; do l=$(readlink "$f" 2>/dev/null) && echo "FD $f $l"; done',
      `/usr/bin/python3 -c '${getfd}'`, 'echo END',
    ].join('; '), { sandbox_id: id });
    assert.match(r.stdout, /END/, r.out);
    assert.doesNotMatch(r.stdout, /OPENED/, `an fd of pid 1 could be opened from inside:\n${r.out}`);
    assert.match(r.stdout, /GETFD -?\d+ \[\]/, `pidfd_getfd took an fd of pid 1:\n${r.out}`);
    // Control: the loop did read fds (its own); none of what user code can see is a socket, so the
    // SEQPACKET control channel (and every connection pid 1 makes for `connect`) is out of reach.
    assert.match(r.stdout, /^FD \/proc\/\d+\/fd\/0 /m, `the fd listing read nothing:\n${r.out}`);
    const seen = r.stdout.split('\n').filter((l) => l.startsWith('FD '));
    assert.deepEqual(seen.filter((l) => / socket:\[/.test(l)), [], `user code holds a socket:\n${r.out}`);
    // Root can see pid 1's own fds from the host: its control socket is among them (the control of
    // this check) and appears in no fd table inside.
    if (isRoot) {
      const inits = sandboxInits(k.pid);
      assert.ok(inits.length > 0, 'no sandbox pid 1 found under the server');
      const sockets = new Set();
      for (const p of inits) {
        for (const f of fs.readdirSync(`/proc/${p}/fd`)) {
          try {
            const l = fs.readlinkSync(`/proc/${p}/fd/${f}`);
            if (l.startsWith('socket:')) sockets.add(l);
          } catch { /* closed meanwhile */ }
        }
      }
      assert.ok(sockets.size > 0, `pid 1 (${inits.join(', ')}) holds no socket: is this the control channel's process?`);
      for (const l of seen) assert.ok(!sockets.has(l.split(' ')[2]), `user code holds pid 1's socket: ${l}`);
    }
  });
});

// A fresh sandbox ends with its command: whatever the command left behind dies with it, whether
// it closed its output (so the result need not wait for it, and the sandbox is torn down after the
// result) or holds the output pipes open (then pid 1 is killed at once so the result can end).
for (const [what, redirect] of [['closed its output', '>/dev/null 2>&1 </dev/null'], ['holds the output pipes', '']]) {
  test(`case 9/23: a background process of a fresh sandbox that ${what} does not outlive the call`, async () => {
    const m = Number(marker());
    const t0 = Date.now();
    const r = await exec(k, `sleep ${m} ${redirect} & setsid -f sleep ${m + 1} ${redirect}; echo started`);
    assert.match(r.stdout, /started/, r.out);
    assert.ok(Date.now() - t0 < 20000, 'the fresh exec waited for its background process');
    assert.ok(await waitGone(`^sleep (${m}|${m + 1})$`), `a background process of a fresh sandbox outlived it: ${JSON.stringify(pgrep(`^sleep (${m}|${m + 1})$`))}`);
  });
}
