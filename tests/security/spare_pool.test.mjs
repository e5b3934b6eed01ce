// Issue 21's pool of warm spares: every fresh exec that finishes asks for one spare of its policy,
// so a burst of N fresh execs leaves N spares for the next burst. A spare must be exactly as
// isolated as a cold sandbox and never carry state from an earlier run: each is used once, starts
// with an empty /tmp, and is confined and mounted like the cold one. Judged from inside (what a
// command sees) and from the host (the mount namespaces of the server's idle sandboxes).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { callTool, errorText, kilnCgroupDirs, ok, requireSandboxTools, startKiln, waitFor } from './lib.mjs';

const N = 6;
const LIMITS = { memory_mb: 64, pids: 64 };
// Which sandbox ran it (its mount namespace, which tells apart sandboxes alive at once, and the
// start time of its pid 1, since the kernel gives a namespace's number again once it is gone), whether an earlier run's file is in /tmp or /dev/shm, a file left behind, its confinement and its mounts
// (mount point, options, file system: what a cold and a warm sandbox must share).
const PROBE = [
  'echo "$(readlink /proc/self/ns/mnt) $(awk \'{print $22}\' /proc/1/stat)"',
  'if [ -e /tmp/left-behind ] || [ -e /dev/shm/left-behind ]; then echo "tmp dirty"; else echo "tmp clean"; fi',
  'echo left > /tmp/left-behind; echo left > /dev/shm/left-behind 2>/dev/null',
  'grep -E "^(NoNewPrivs|Seccomp|Seccomp_filters|Cap(Inh|Prm|Eff|Bnd|Amb)):" /proc/self/status',
  'sed -E "s/^[0-9]+ [0-9]+ [0-9]+:[0-9]+ (\\S+) (\\S+) (\\S+).* - (\\S+) .*/mount \\2 \\3 \\4/" /proc/self/mountinfo | sort',
  'sleep 0.5', // the burst's execs overlap, as parallel test shards would
].join('; ');

let k;
before(async () => {
  k = await startKiln();
  requireSandboxTools(k);
});
after(async () => {
  await k?.close();
});

async function probe(kiln = k) {
  const r = ok(await callTool(kiln, 'sandbox_exec', { command: PROBE, limits: LIMITS }), 'sandbox_exec');
  assert.equal(r.exit_code, 0, `probe failed: ${r.stdout}${r.stderr}`);
  const lines = r.stdout.trim().split('\n');
  return {
    ns: lines[0],
    tmp: lines.find((l) => l.startsWith('tmp ')),
    shape: lines.slice(2).join('\n'),
  };
}

// The sandboxes of the server that run nothing (its spares), each named by the start time of its
// pid 1 (the process that is 1 in its own pid namespace): a name the host and, in /proc/1/stat,
// a command inside both read, as root or as a plain user. Spares built within one clock tick share
// it, so this is a list, one entry per sandbox.
function idleSandboxes(kilnPid) {
  return idlePid1s(kilnPid, true);
}

// The host pids of those sandboxes' pid 1 (or, with `starts`, their start times).
function idlePid1s(kilnPid, starts = false) {
  const parent = new Map();
  const start = new Map();
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      parent.set(Number(d), Number(fields[1]));
      start.set(Number(d), fields[19]); // starttime, field 22 of /proc/PID/stat
    } catch { /* gone */ }
  }
  const under = (pid) => { for (let p = parent.get(pid); p; p = parent.get(p)) if (p === kilnPid) return true; return false; };
  const found = [];
  for (const [pid, t] of start) {
    if (!under(pid)) continue;
    try {
      const nspid = /^NSpid:\s+(.*)$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1].trim().split(/\s+/);
      if (nspid?.length > 1 && nspid.at(-1) === '1') found.push(starts ? t : pid);
    } catch { /* gone */ }
  }
  return found;
}

// Once the sandboxes that ran `seen` are cleaned up (a used one kept as a spare never would be),
// the N new idle sandboxes a burst of N asked for.
async function sparesAfter(kilnPid, seen) {
  const ran = new Set([...seen].map((id) => id.split(' ')[1]));
  let last;
  const got = await waitFor(() => {
    last = idleSandboxes(kilnPid);
    return last.some((t) => ran.has(t)) || last.length < N ? null : last;
  }, 60000, 200);
  const used = last.filter((t) => ran.has(t));
  assert.deepEqual(used, [], 'a sandbox that already ran a command is kept (a spare must never be reused)');
  assert.ok(got, `after a burst of ${N} the server keeps ${last.length} idle sandboxes, not ${N}`);
  return got;
}

// A server of the test's own (its own spares and ceilings), closed whatever happens.
async function withOwnKiln(options, fn) {
  const ks = await startKiln(options);
  try {
    requireSandboxTools(ks);
    return await fn(ks);
  } finally {
    await ks.close();
  }
}

test(`a burst of ${N} fresh execs leaves ${N} spares; the next burst runs in them, each once, each without an earlier run's files and confined and mounted like a cold sandbox`, { timeout: 180000 }, async () => {
  const cold = await probe(); // the server's first sandbox: nothing was warm yet
  assert.equal(cold.tmp, 'tmp clean');
  const seen = new Set([cold.ns]);
  const first = await Promise.all(Array.from({ length: N }, probe));
  for (const r of first) {
    assert.equal(r.tmp, 'tmp clean', 'a fresh sandbox holds a file an earlier run left');
    assert.equal(r.shape, cold.shape, 'a sandbox (warm or cold) differs from the cold one');
    assert.ok(!seen.has(r.ns), `mount namespace ${r.ns} served two execs`);
    seen.add(r.ns);
  }
  // The burst asked for N spares; they are built while nobody waits.
  const spares = await sparesAfter(k.pid, seen);

  const second = await Promise.all(Array.from({ length: N }, probe));
  for (const r of second) {
    assert.ok(spares.includes(r.ns.split(' ')[1]), `an exec of the second burst ran in ${r.ns}, not in one of the ${N} spares (${spares})`);
    assert.ok(!seen.has(r.ns), `mount namespace ${r.ns} served two execs`);
    seen.add(r.ns);
    assert.equal(r.tmp, 'tmp clean', 'a spare carries a file of an earlier run');
    assert.equal(r.shape, cold.shape, 'a spare is confined or mounted unlike a cold sandbox');
  }
  // The used spares are gone, never handed out again: the next ones are new sandboxes.
  await sparesAfter(k.pid, seen);
});

test('spares never take more than three quarters of --max-sandboxes', { timeout: 120000 }, async () => {
  await withOwnKiln({ args: ['--max-sandboxes', '4'] }, async (ks) => {
    const run = async () => ok(await callTool(ks, 'sandbox_exec', { command: 'sleep 0.5', limits: LIMITS }), 'sandbox_exec');
    await run();
    await Promise.all(Array.from({ length: 4 }, run)); // four finish: four ask for a spare
    const three = await waitFor(() => idleSandboxes(ks.pid).length === 3, 30000, 200);
    assert.ok(three, `idle sandboxes: ${idleSandboxes(ks.pid).length}, expected 3 (3/4 of 4)`);
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(idleSandboxes(ks.pid).length, 3, 'a fourth spare was built past the cap');
    // The room the spares leave is enough for a session sandbox of another policy, at once.
    const created = ok(await callTool(ks, 'sandbox_create', { limits: LIMITS }), 'sandbox_create');
    assert.ok(created.sandbox_id);
  });
});

// The red team's findings on the pool, each a test.

test('an idle spare cannot be addressed by its id: sandbox_exec and sandbox_destroy answer as for an unknown id, and the next fresh exec starts clean', { timeout: 120000 }, async (t) => {
  await withOwnKiln({}, async (ks) => {
    await probe(ks);
    await waitFor(() => idleSandboxes(ks.pid).length >= 1, 30000, 100);
    // The only place a spare's id shows: its cgroup folder's name (when Kiln has cgroups here).
    const ids = [...new Set(kilnCgroupDirs(`.o${ks.pid}-`).map((d) => /\/(sb_[0-9a-f]+)\.o/.exec(d)?.[1]).filter(Boolean))];
    if (!ids.length) return t.skip('no cgroup folders of this kiln: a spare\'s id cannot be learnt here, so there is nothing to address');
    for (const id of ids) {
      const r = await callTool(ks, 'sandbox_exec', { sandbox_id: id, command: 'echo planted > /tmp/planted; sleep 30', background: true });
      assert.ok(r.isError, `sandbox_exec with an idle spare's id ${id} was accepted: ${JSON.stringify(r.structuredContent)}`);
      assert.match(errorText(r), /no live sandbox/);
      const d = await callTool(ks, 'sandbox_destroy', { sandbox_id: id });
      assert.ok(d.isError, `sandbox_destroy of an idle spare ${id} was accepted`);
    }
    const next = await probe(ks);
    assert.equal(next.tmp, 'tmp clean');
  });
});

test('spares built before the workspace folder was replaced are not used: a fresh exec runs in the folder now at the path', { timeout: 120000 }, async () => {
  await withOwnKiln({}, async (ks) => {
    fs.writeFileSync(path.join(ks.ws, 'which'), 'OLD\n');
    ok(await callTool(ks, 'sandbox_exec', { command: 'true', limits: LIMITS }), 'sandbox_exec');
    await waitFor(() => idleSandboxes(ks.pid).length >= 1, 30000, 100);
    fs.renameSync(ks.ws, `${ks.ws}.old`);
    fs.mkdirSync(ks.ws);
    fs.writeFileSync(path.join(ks.ws, 'which'), 'NEW\n');
    const r = ok(await callTool(ks, 'sandbox_exec', { command: 'cat which; echo out > out.txt', limits: LIMITS }), 'sandbox_exec');
    assert.equal(r.exit_code, 0, r.stderr);
    assert.equal(r.stdout.trim(), 'NEW', 'the exec ran in the folder that was moved away');
    assert.ok(fs.existsSync(path.join(ks.ws, 'out.txt')), 'the file went elsewhere than the workspace');
    assert.ok(!fs.existsSync(path.join(`${ks.ws}.old`, 'out.txt')), 'the exec wrote into the moved-away folder');
  });
});

test('a spare whose pid 1 was killed a moment before it is taken: the fresh exec runs in a new sandbox instead of failing', { timeout: 120000 }, async () => {
  await withOwnKiln({}, async (ks) => {
    const run = async () => ok(await callTool(ks, 'sandbox_exec', { command: 'echo ran', limits: LIMITS }), 'sandbox_exec');
    await Promise.all(Array.from({ length: 4 }, run));
    await waitFor(() => idleSandboxes(ks.pid).length >= 4, 30000, 100);
    const pids = idlePid1s(ks.pid);
    for (const pid of pids) try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
    // Dead (its sockets closed), whether or not Kiln has noticed yet. An exec request written in the
    // instant before the socket closes is lost with the process: that run ends killed, not retried.
    const dead = (pid) => {
      try {
        const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
        return /^[ZX]/.test(stat.slice(stat.lastIndexOf(')') + 2));
      } catch { return true; }
    };
    await waitFor(() => pids.every(dead), 5000, 5);
    const results = await Promise.all(Array.from({ length: 4 }, run));
    for (const r of results) assert.equal(r.stdout.trim(), 'ran', `${r.stdout}${r.stderr}`);
  });
});
