// Cases 24-27 of shared/SANDBOX_CASES.md: lifecycle. Each process tree carries a unique number
// (`sleep 7xxxxxxN`), so the host's pgrep finds exactly what a test started, wherever it ended up
// (setsid, double fork, SIGTERM ignored).
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import {
  alive, callTool, compileProbe, createSandbox, destroySandbox, errorText, exec, isRoot, kilnBin, kilnCgroupDirs, kilnEnv,
  marker, mountLines, ok, pgrep, rand, requireSandboxTools, sleep, startKiln, tempDir, waitFor, waitGone, withSandbox,
} from './lib.mjs';

let k;
let nofeature;
before(async () => {
  k = await startKiln();
  requireSandboxTools(k);
  nofeature = compileProbe(tempDir('kiln-sec-bin-'), 'nofeature');
  fs.chmodSync(path.dirname(nofeature), 0o755);
});
after(() => k?.close());

// A tree that resists: the shell ignores SIGTERM, a setsid'd session, a double-forked orphan,
// `setsid -f`, all with SIGTERM ignored (ignored dispositions survive exec).
const tree = (m) => [
  "trap '' TERM HUP INT",
  `setsid sh -c 'sleep ${m}1 & exec sleep ${m}2' &`,
  `( sh -c 'exec sleep ${m}3' & )`,
  `setsid -f sleep ${m}4`,
  `sleep ${m}5`,
].join('\n');
const sleeps = (m) => pgrep(`^sleep ${m}`);
const started = (m) => waitFor(() => sleeps(m).length >= 5, 15000);

test('case 24: a timeout kills the whole tree (setsid, double fork, SIGTERM ignored)', async () => {
  const m = marker();
  const call = exec(k, tree(m), { timeout_s: 3 });
  assert.ok(await started(m), `the tree did not start: ${sleeps(m)}`);
  const r = await call;
  assert.equal(r.stop_reason, 'timeout', `stop_reason ${r.stop_reason}`);
  assert.ok(await waitGone(`^sleep ${m}`), `left running after the timeout: ${JSON.stringify(pgrep(`sleep ${m}`))}`);
});

test('case 24: cancelling the call (AbortSignal -> notifications/cancelled) kills the whole tree', async () => {
  const m = marker();
  const ac = new AbortController();
  const call = callTool(k, 'sandbox_exec', { command: tree(m), timeout_s: 120 }, { signal: ac.signal });
  assert.ok(await started(m), 'the tree did not start');
  ac.abort('security test cancels');
  await assert.rejects(call);
  assert.ok(await waitGone(`^sleep ${m}`), `left running after cancel: ${JSON.stringify(pgrep(`sleep ${m}`))}`);
  await k.client.ping();
});

test('case 24: process_kill of a background run and sandbox_destroy kill the whole tree', async () => {
  await withSandbox(k, {}, async (id) => {
    const m = marker();
    const bg = await exec(k, tree(m), { sandbox_id: id, background: true });
    assert.ok(await started(m), 'the background tree did not start');
    const killed = ok(await callTool(k, 'process_kill', { run_id: bg.run_id }), 'process_kill');
    assert.ok(await waitGone(`^sleep ${m}`), `left running after process_kill: ${JSON.stringify(pgrep(`sleep ${m}`))} (${JSON.stringify(killed)})`);
    const m2 = marker();
    await exec(k, tree(m2), { sandbox_id: id, background: true });
    assert.ok(await started(m2), 'the second tree did not start');
    const cleanup = await destroySandbox(k, id);
    assert.ok(await waitGone(`^sleep ${m2}`), `left running after sandbox_destroy: ${JSON.stringify(pgrep(`sleep ${m2}`))}`);
    assert.deepEqual(cleanup.leftovers, [], JSON.stringify(cleanup));
  });
});

test('case 24: `kiln run --timeout` kills the whole tree and exits 124', async () => {
  const m = marker();
  const ws = path.join(tempDir('kiln-sec-run-'), 'ws');
  fs.mkdirSync(ws);
  const r = spawnSync(kilnBin(), ['run', '--workspace', ws, '--timeout', '3', '--', '/bin/sh', '-c', tree(m)], {
    env: kilnEnv(tempDir('kiln-sec-run-state-')), encoding: 'utf8', timeout: 120000,
  });
  assert.equal(r.status, 124, `exit ${r.status} ${r.signal}: ${r.stderr}`);
  assert.ok(await waitGone(`^sleep ${m}`), `left running after kiln run --timeout: ${JSON.stringify(pgrep(`sleep ${m}`))}`);
});

// kill -9 of the server while a foreground exec and a background tree run.
let crash; // what case 25's restart part needs
test('case 25: kill -9 of the Kiln server mid-run leaves no process, mount, cgroup or temp dir', async () => {
  const home = tempDir('kiln-sec-state-');
  const mountsBefore = mountLines((l) => /kiln/.test(l)).length;
  const k2 = await startKiln({ home });
  try {
    await crashRun(k2, home, mountsBefore);
  } finally {
    if (alive(k2.pid)) process.kill(k2.pid, 'SIGKILL');
  }
});

async function crashRun(k2, home, mountsBefore) {
  const m = marker();
  const sb = await createSandbox(k2, {});
  await exec(k2, tree(m), { sandbox_id: sb.sandbox_id, background: true });
  const fg = callTool(k2, 'sandbox_exec', { command: `sleep ${m}9`, sandbox_id: sb.sandbox_id, timeout_s: 600 }).catch((e) => e);
  const fresh = callTool(k2, 'sandbox_exec', { command: `sleep ${m}8`, timeout_s: 600 }).catch((e) => e);
  assert.ok(await waitFor(() => sleeps(m).length >= 7, 15000), `not all started: ${sleeps(m)}`);
  // The server's children and theirs: the helpers, exec'd by the server or forked by its zygote.
  const parentOf = (p) => { try { return fs.readFileSync(`/proc/${p}/stat`, 'utf8').split(') ')[1].split(' ')[1]; } catch { return undefined; } };
  const pids = fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p));
  const children = pids.filter((p) => parentOf(p) === String(k2.pid));
  const helpers = [...children, ...pids.filter((p) => children.includes(parentOf(p)))].map(Number);
  assert.ok(helpers.length >= 2, `the server's children and grandchildren (zygote, helpers): ${helpers}`);
  const cgBefore = kilnCgroupDirs(sb.sandbox_id);
  if (isRoot) assert.ok(cgBefore.length > 0, 'control: the sandbox has cgroup folders');
  const runs = fs.existsSync(path.join(home, 'runs')) ? fs.readdirSync(path.join(home, 'runs')) : [];
  process.kill(k2.pid, 'SIGKILL');
  await Promise.all([fg, fresh]);
  assert.ok(await waitGone(`^sleep ${m}`), `processes left after kill -9 of the server: ${JSON.stringify(pgrep(`sleep ${m}`))}`);
  assert.ok(await waitFor(() => helpers.every((p) => !alive(p))), `helpers left: ${helpers.filter(alive)}`);
  assert.equal(mountLines((l) => /kiln/.test(l)).length, mountsBefore, 'host mount table changed');
  crash = { home, ws: k2.ws, sb: sb.sandbox_id, runs, cgBefore, m, killedAt: Date.now() };
}

test('case 25: after a restart no cgroup or temp dir of the killed server is left', async (t) => {
  assert.ok(crash, 'the kill -9 part ran');
  const k3 = await startKiln({ home: crash.home });
  try {
    await exec(k3, 'true'); // a first sandbox: stale leftovers are cleaned at start at the latest
    if (isRoot) {
      const gone = await waitFor(() => kilnCgroupDirs(crash.sb).length === 0, 5000);
      if (!gone) {
        const left = kilnCgroupDirs(crash.sb);
        // Tell the lead whether a server started later cleans them (stale cleanup has an age
        // threshold) or whether they stay for good.
        await sleep(Math.max(0, crash.killedAt + 31000 - Date.now()));
        const k4 = await startKiln({ home: crash.home });
        await exec(k4, 'true').catch(() => {});
        await k4.close();
        const later = kilnCgroupDirs(crash.sb);
        assert.fail(`cgroup folders of the killed server's sandbox remain after a restart: ${left.join(', ')}; ` +
          (later.length ? `still there after another restart 31 s after the kill: ${later.join(', ')}` :
            'a server started 31 s after the kill did remove them (stale cleanup only takes folders older than 30 s)'));
      }
    } else {
      t.diagnostic(`not root: Kiln had no cgroups here (${crash.cgBefore.length} folders), nothing to leave`);
    }
    const tmpLeft = ['/tmp', '/dev/shm', crash.home].flatMap((d) => {
      try { return fs.readdirSync(d).filter((n) => n.includes(crash.sb)).map((n) => path.join(d, n)); } catch { return []; }
    });
    assert.deepEqual(tmpLeft, [], 'temp dirs of the killed sandbox remain');
  } finally {
    await k3.close();
  }
});

test('case 25: after a restart the trace of the interrupted run says "interrupted"', async () => {
  assert.ok(crash, 'the kill -9 part ran');
  // The same state directory and the same workspace: trace_list lists the current workspace's runs.
  const k3 = await startKiln({ home: crash.home, workspace: crash.ws });
  try {
    const list = ok(await callTool(k3, 'trace_list', { kind: 'exec', limit: 50 }), 'trace_list');
    const { traces } = list;
    assert.ok(Array.isArray(traces), `trace_list answers traces: ${JSON.stringify(list).slice(0, 500)}`);
    const mine = traces.filter((x) => JSON.stringify(x).includes(`${crash.m}9`) || JSON.stringify(x).includes(`${crash.m}8`));
    assert.ok(mine.length >= 2, `traces of the two runs killed with the server: ${JSON.stringify(traces).slice(0, 2000)}`);
    for (const x of mine) assert.match(JSON.stringify(x), /"interrupted"/, `trace not marked interrupted: ${JSON.stringify(x)}`);
  } finally {
    await k3.close();
  }
});

test('case 26: two sandboxes at once cannot see each other\'s files, processes or /tmp', async () => {
  const ws2 = path.join(tempDir('kiln-sec-ws2-'), 'ws2');
  fs.mkdirSync(ws2);
  const tag = rand();
  fs.writeFileSync(path.join(k.ws, `only-ws1-${tag}`), 'ws1\n');
  fs.writeFileSync(path.join(ws2, `only-ws2-${tag}`), 'ws2\n');
  const w2 = ok(await callTool(k, 'workspace_open', { path: ws2 }), 'workspace_open ws2');
  ok(await callTool(k, 'workspace_open', { path: k.ws }), 'workspace_open ws1');
  const a = await createSandbox(k, {});
  const b = await createSandbox(k, { workspace: w2.id });
  const b2 = await createSandbox(k, {}); // same workspace as A
  try {
    const ma = marker();
    await exec(k, `echo a > /tmp/a-${tag}`, { sandbox_id: a.sandbox_id });
    await exec(k, `exec sleep ${ma}1`, { sandbox_id: a.sandbox_id, background: true });
    assert.ok(await waitFor(() => pgrep(`^sleep ${ma}`).length === 1), 'A\'s process runs');
    for (const [other, label] of [[b, 'B (other workspace)'], [b2, 'B2 (same workspace)']]) {
      const r = await exec(k, [
        // ("SAW""-X" so the markers are not in the shell's own command line, which is listed below)
        `cat ${k.ws}/only-ws1-${tag} 2>/dev/null && echo SAW""-WS1-FILE`,
        `ls -A /tmp; cat /tmp/a-${tag} 2>/dev/null && echo SAW""-A-TMP`,
        'cat /proc/[0-9]*/cmdline 2>/dev/null | tr "\\0" " "; echo', 'echo END',
      ].join('; '), { sandbox_id: other.sandbox_id });
      assert.match(r.stdout, /END/, r.out);
      assert.doesNotMatch(r.stdout, /SAW-A-TMP/, `${label} reads A's /tmp`);
      assert.ok(!r.stdout.includes(`${ma}1`), `${label} sees A's processes:\n${r.stdout}`);
      if (other === b) {
        assert.doesNotMatch(r.stdout, /SAW-WS1-FILE/, 'B reads the other workspace');
        const r2 = await exec(k, `cat ${ws2}/only-ws2-${tag}`, { sandbox_id: b.sandbox_id });
        assert.equal(r2.stdout, 'ws2\n', 'control: B sees its own workspace');
      }
      // kill -1 in the other sandbox does not reach A's process.
      await callTool(k, 'sandbox_exec', { command: 'kill -9 -1', sandbox_id: other.sandbox_id });
      await sleep(300);
      assert.equal(pgrep(`^sleep ${ma}`).length, 1, `kill -1 in ${label} killed A's process`);
    }
    const ra = await exec(k, `ls -A /tmp; cat ${ws2}/only-ws2-${tag} 2>/dev/null && echo SAW""-WS2-FILE; echo END`, { sandbox_id: a.sandbox_id });
    assert.doesNotMatch(ra.stdout, /SAW-WS2-FILE/, 'A reads the other workspace');
  } finally {
    for (const s of [a, b, b2]) await callTool(k, 'sandbox_destroy', { sandbox_id: s.sandbox_id }).catch(() => {});
  }
});

test('case 27: isolation "none" is refused unless the server has --allow-unsandboxed, and then says so loudly', async () => {
  for (const [tool, args] of [['sandbox_create', { isolation: 'none' }], ['sandbox_exec', { command: 'id', isolation: 'none' }]]) {
    const r = await callTool(k, tool, args);
    assert.equal(r.isError, true, `${tool} isolation none accepted without --allow-unsandboxed: ${JSON.stringify(r.structuredContent)}`);
    assert.match(errorText(r), /--allow-unsandboxed/, errorText(r));
  }
  const cli = spawnSync(kilnBin(), ['run', '--workspace', k.ws, '--isolation', 'none', '--', 'true'], { env: kilnEnv(tempDir('kiln-sec-run-state-')), encoding: 'utf8' });
  assert.notEqual(cli.status, 0, 'kiln run --isolation none ran without --allow-unsandboxed');
  assert.match(cli.stderr, /allow-unsandboxed/, cli.stderr);
  const k2 = await startKiln({ args: ['--allow-unsandboxed'] });
  try {
    const r = await exec(k2, 'echo ran', { isolation: 'none' });
    assert.match(r.stdout, /ran/);
    assert.match(String(r.warning ?? ''), /unsandboxed/i, `no loud warning: ${JSON.stringify(r.warning)}`);
    assert.equal(r.isolation?.level, 'none');
    // Strict stays the default even on such a server.
    const s = await exec(k2, 'grep NoNewPrivs /proc/self/status');
    assert.match(s.stdout, /NoNewPrivs:\s+1/);
  } finally {
    await k2.close();
  }
});

// A kernel without user namespaces / seccomp / Landlock, simulated by a seccomp filter on the
// server process (tests/security/probes/nofeature.c) so nothing on the host changes.
async function missingFeature(t, flag, re) {
  const k2 = await startKiln({ wrapper: [nofeature, flag, '--'] });
  try {
    const r = await callTool(k2, 'sandbox_exec', { command: 'echo SHOULD-NOT-RUN' });
    const text = r.isError ? errorText(r) : JSON.stringify(r.structuredContent);
    assert.ok(r.isError || r.structuredContent?.stop_reason === 'setup_failed',
      `Kiln ran a command without ${flag.slice(5)}: ${text.slice(0, 500)}`);
    assert.doesNotMatch(text, /SHOULD-NOT-RUN/);
    assert.match(text, re, `the error does not name what is missing: ${text}`);
  } finally {
    await k2.close();
  }
  const cli = spawnSync(nofeature, [flag, '--', kilnBin(), 'run', '--workspace', k.ws, '--', 'echo', 'SHOULD-NOT-RUN'],
    { env: kilnEnv(tempDir('kiln-sec-run-state-')), encoding: 'utf8', timeout: 60000 });
  assert.equal(cli.status, 125, `kiln run without ${flag.slice(5)}: exit ${cli.status}\n${cli.stdout}${cli.stderr}`);
  assert.doesNotMatch(cli.stdout, /SHOULD-NOT-RUN/);
  assert.match(cli.stderr, re, `kiln run's error does not name what is missing: ${cli.stderr}`);
}

test('case 27: without user namespaces Kiln refuses, naming them', async (t) => {
  await missingFeature(t, '--no-userns', /user.?namespace|userns/i);
});

test('case 27: without seccomp Kiln refuses, naming it', async (t) => {
  await missingFeature(t, '--no-seccomp', /seccomp/i);
});

test('case 27: without Landlock Kiln refuses or reports landlock as not enforced', async () => {
  const k2 = await startKiln({ wrapper: [nofeature, '--no-landlock', '--'] });
  try {
    const r = await callTool(k2, 'sandbox_exec', { command: 'echo ran' });
    if (r.isError) {
      assert.match(errorText(r), /landlock/i, errorText(r));
    } else {
      const iso = r.structuredContent.isolation;
      assert.equal(iso?.landlock, false, `landlock reported as ${JSON.stringify(iso?.landlock)} on a kernel without it`);
    }
  } finally {
    await k2.close();
  }
});

test('case 27: without usable cgroups an explicit limit is refused (naming cgroups) and the report says what is missing', async (t) => {
  let wrapper = [];
  if (isRoot) {
    // Hide every cgroup hierarchy from the server in a private mount namespace.
    wrapper = ['unshare', '-m', '--propagation', 'private', '/bin/sh', '-c', 'mount -t tmpfs kilnsec /sys/fs/cgroup && exec "$@"', 'sh'];
  } else if (kilnCgroupDirs().length === 0 && fs.statSync('/sys/fs/cgroup/memory', { throwIfNoEntry: false })?.uid === 0) {
    t.diagnostic('unprivileged: the cgroup hierarchies here are root-owned, so cgroups are really missing for this user');
  }
  const k2 = await startKiln({ wrapper });
  try {
    for (const limits of [{ memory_mb: 256 }, { pids: 64 }]) {
      const r = await callTool(k2, 'sandbox_create', { limits });
      if (!r.isError) {
        // Accepted: then only with a weaker mechanism that the report names honestly (memory_mb
        // -> RLIMIT_AS per process, pids -> RLIMIT_NPROC per user), never claiming a cgroup.
        const name = Object.keys(limits)[0];
        const how = JSON.stringify(r.structuredContent.isolation?.limits?.[name] ?? null);
        assert.match(how, /rlimit/i, `${JSON.stringify(limits)} accepted without cgroups, enforced by: ${how}`);
        assert.doesNotMatch(how, /cgroup/i, `${JSON.stringify(limits)} claims a cgroup without cgroups: ${how}`);
        t.diagnostic(`${JSON.stringify(limits)} accepted without cgroups, enforced by ${how}`);
        await callTool(k2, 'sandbox_destroy', { sandbox_id: r.structuredContent.sandbox_id });
        continue;
      }
      assert.match(errorText(r), /cgroup/i, `the refusal does not name cgroups: ${errorText(r)}`);
    }
    // No explicit limits: if it runs, the isolation report must say cgroups are missing.
    const d = await callTool(k2, 'sandbox_exec', { command: 'echo ran' });
    if (d.isError) {
      assert.match(errorText(d), /cgroup/i, errorText(d));
    } else {
      const iso = JSON.stringify(d.structuredContent.isolation);
      assert.match(iso, /cgroup/i, `the isolation report does not say cgroups are missing: ${iso}`);
      assert.ok(!/"pids":\{[^}]*cgroup/.test(iso), `pids reported as cgroup-enforced without cgroups: ${iso}`);
    }
  } finally {
    await k2.close();
  }
  void execFileSync;
});
