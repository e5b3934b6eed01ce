// Sandbox start-up for `make bench`: /bin/true through kiln's sandbox_exec (fresh strict sandbox,
// session sandbox, and the bare tools/call floor) against fork/exec, unshare, two bwrap setups and
// Anthropic's srt CLI, in interleaved rounds so a noisy neighbour hits every setup alike.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { connectClient, tempDir } from '../tests/lib/kiln.mjs';
import { benchDir, fmt, median, nowMs, onPath, quick, runExternal } from './lib.mjs';

export const N_SANDBOX = quick ? 20 : 100; // rounds for kiln, fork/exec, unshare, bwrap
export const N_SRT = quick ? 5 : 20; // srt is a Node CLI (~0.3-0.8 s a run): fewer rounds
// Issue 21's targets, as ratios to peers measured in the same run (medians): a fresh strict sandbox
// at most half of bwrap's time (the faster of the two bwrap setups), a session-sandbox exec at most
// twice a plain fork/exec and faster than a fresh sandbox.
export const SB_TARGETS = { freshVsBwrap: 0.5, sessionVsFork: 2 };

export const srtPkg = path.join(benchDir, 'node_modules', '@anthropic-ai', 'sandbox-runtime');
export const srtBin = path.join(benchDir, 'node_modules', '.bin', 'srt');

// srt leaves a /tmp/srt-mux-<pid>-0.sock (and bridge sockets) behind per run: remove those that
// were not in /tmp before (`before`: a Set of names).
export function removeSrtLeftovers(before) {
  for (const f of fs.readdirSync(os.tmpdir())) {
    if (!before.has(f) && /^(srt-mux-|claude-(http|socks)-).*\.sock$/.test(f)) fs.rmSync(path.join(os.tmpdir(), f), { force: true });
  }
}

// The setups, in table order. `argv` is what runs; `shown` is what the report prints.
function sandboxPeers(ws, srtSettings) {
  const bwrapMin = ['bwrap', '--unshare-all', '--ro-bind', '/usr', '/usr', '--symlink', 'usr/bin', '/bin',
    '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--proc', '/proc', '--dev', '/dev',
    '--tmpfs', '/tmp', '/bin/true'];
  // tmpfs /tmp before the workspace bind: the workspace copy itself lives under /tmp.
  const bwrapRoot = ['bwrap', '--unshare-all', '--ro-bind', '/', '/', '--proc', '/proc', '--dev', '/dev',
    '--tmpfs', '/tmp', '--bind', ws, ws, '--chdir', ws, '/bin/true'];
  const peers = [
    { key: 'fork', name: 'fork/exec /bin/true (floor)', argv: ['/bin/true'], n: N_SANDBOX },
    { key: 'unshare', name: 'unshare -Urmnp --fork /bin/true', argv: ['unshare', '-Urmnp', '--fork', '/bin/true'], n: N_SANDBOX },
    { key: 'bwrap-usr', name: 'bwrap --unshare-all, ro /usr + symlinks, /proc, /dev, tmpfs /tmp', argv: bwrapMin, n: N_SANDBOX },
    { key: 'bwrap-root', name: 'bwrap --unshare-all, --ro-bind / / + rw workspace, /proc, /dev, tmpfs /tmp', argv: bwrapRoot, n: N_SANDBOX },
    { key: 'srt', name: 'srt /bin/true (@anthropic-ai/sandbox-runtime CLI)', argv: [srtBin, '-s', srtSettings, '/bin/true'], n: N_SRT },
  ];
  for (const p of peers) {
    if (p.key === 'srt') {
      if (!fs.existsSync(srtBin)) p.missing = 'not installed in bench/node_modules (npm ci in bench/ failed?)';
      else if (!onPath('bwrap') || !onPath('socat')) p.missing = `srt needs ${['bwrap', 'socat'].filter((c) => !onPath(c)).join(' and ')} on Linux, not installed`;
    } else if (p.argv[0] !== '/bin/true' && !onPath(p.argv[0])) {
      p.missing = `${p.argv[0]} not installed${p.argv[0] === 'bwrap' ? ' (Debian package bubblewrap)' : ''}`;
    }
    if (!p.missing) {
      const probe = runExternal(p.argv, ws); // also the warm-up run
      if (probe.error) p.missing = `does not run here: ${probe.error}`;
    }
    p.times = [];
  }
  return peers;
}

// mulberry32: a small fixed-seed generator, so the bench's order is random but repeatable.
function seededRandom(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// 0..n-1 in a random order (Fisher-Yates).
function shuffled(n, rng) {
  const order = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  return order;
}

export async function sandboxStartup(ws) {
  const srtSettings = path.join(tempDir('kiln-bench-srt-'), 'srt-settings.json');
  // srt's built-in defaults (no network, no writes) plus the workspace writable, as kiln's sandbox has it.
  fs.writeFileSync(srtSettings, JSON.stringify({
    network: { allowedDomains: [], deniedDomains: [] },
    filesystem: { denyRead: [], allowRead: [], allowWrite: [ws], denyWrite: [] },
  }));
  const tmpBefore = new Set(fs.readdirSync(os.tmpdir()));
  const peers = sandboxPeers(ws, srtSettings);

  const kiln = { fresh: { times: [] }, session: { times: [] }, floor: { times: [] } };
  const c = await connectClient({ args: ['--workspace', ws], name: 'kiln-bench' });
  const call = async (name, args) => {
    const t0 = nowMs();
    const r = await c.client.callTool({ name, arguments: args }, undefined, { timeout: 60000 });
    const dt = nowMs() - t0;
    const sc = r.structuredContent;
    if (r.isError || !sc) return { error: (r.content ?? []).map((x) => x.text).join(' ').slice(0, 200) || 'no structuredContent' };
    if (name === 'sandbox_exec' && sc.exit_code !== 0) return { error: `exit_code ${sc.exit_code}, stop_reason ${sc.stop_reason}: ${String(sc.stderr ?? '').slice(0, 160)}` };
    return { ms: dt, sc };
  };
  let sandboxId;
  const rng = seededRandom(21);
  try {
    const created = await call('sandbox_create', {});
    if (created.error) kiln.session.error = `sandbox_create: ${created.error}`;
    else sandboxId = created.sc.sandbox_id;
    // Warm-up: one of each (the first calls pay for page faults and lazy set-up).
    for (const [k, name, args] of [['fresh', 'sandbox_exec', { command: ['/bin/true'] }],
      ['session', 'sandbox_exec', { command: ['/bin/true'], sandbox_id: sandboxId }], ['floor', 'sandbox_list', {}]]) {
      if (kiln[k].error) continue;
      const r = await call(name, args);
      if (r.error) kiln[k].error = r.error;
    }
    // Interleaved rounds, so a noisy neighbour hits every setup alike.
    for (let i = 0; i < N_SANDBOX; i++) {
      const steps = [
        ...peers.filter((p) => !p.missing && i < p.n).map((p) => () => {
          const r = runExternal(p.argv, ws);
          if (r.error) p.missing = `failed during the run: ${r.error}`; else p.times.push(r.ms);
        }),
        async () => { if (!kiln.fresh.error) { const r = await call('sandbox_exec', { command: ['/bin/true'] }); if (r.error) kiln.fresh.error = r.error; else kiln.fresh.times.push(r.ms); } },
        async () => { if (!kiln.session.error) { const r = await call('sandbox_exec', { command: ['/bin/true'], sandbox_id: sandboxId }); if (r.error) kiln.session.error = r.error; else kiln.session.times.push(r.ms); } },
        async () => { const r = await call('sandbox_list', {}); if (!r.error) kiln.floor.times.push(r.ms); },
      ];
      // A new order every round (a fixed-seed shuffle, the same on every run of the bench): a
      // rotation kept each step behind the same neighbour, and a fresh sandbox leaves work behind
      // (its clean-up, the next spare), so whatever always followed it paid for that.
      for (const j of shuffled(steps.length, rng)) await steps[j]();
    }
  } finally {
    if (sandboxId) await c.client.callTool({ name: 'sandbox_destroy', arguments: { sandbox_id: sandboxId } }).catch(() => {});
    await c.close();
    removeSrtLeftovers(tmpBefore);
  }
  for (const k of Object.keys(kiln)) kiln[k].ms = kiln[k].times.length ? median(kiln[k].times) : undefined;
  for (const p of peers) p.ms = p.times.length ? median(p.times) : undefined;
  return { kiln, peers };
}

export function sandboxTable(sb) {
  const base = sb.kiln.fresh.ms;
  const peer = (key) => sb.peers.find((p) => p.key === key)?.ms;
  const fork = peer('fork');
  const bwraps = ['bwrap-usr', 'bwrap-root'].map(peer).filter((x) => x !== undefined);
  const bwrap = bwraps.length ? Math.min(...bwraps) : undefined;
  const verdict = (text, ok) => (ok === undefined ? `${text} (no figure)` : `${text} ${ok ? 'met' : 'NOT met'}`);
  const fresh = sb.kiln.fresh.ms;
  const session = sb.kiln.session.ms;
  const freshTarget = verdict(`<= ${SB_TARGETS.freshVsBwrap}x bwrap${fresh !== undefined && bwrap !== undefined ? ` (${(fresh / bwrap).toFixed(2)}x)` : ''}`,
    fresh === undefined || bwrap === undefined ? undefined : fresh <= SB_TARGETS.freshVsBwrap * bwrap);
  const sessionTarget = verdict(`<= ${SB_TARGETS.sessionVsFork}x fork/exec${session !== undefined && fork !== undefined ? ` (${(session / fork).toFixed(2)}x)` : ''} and < fresh`,
    session === undefined || fork === undefined || fresh === undefined ? undefined : session <= SB_TARGETS.sessionVsFork * fork && session < fresh);
  const rows = [
    { name: 'kiln sandbox_exec, fresh strict sandbox (MCP round trip)', ...sb.kiln.fresh, n: sb.kiln.fresh.times.length, target: freshTarget },
    { name: 'kiln sandbox_exec, session sandbox (MCP round trip)', ...sb.kiln.session, n: sb.kiln.session.times.length, target: sessionTarget },
    { name: 'kiln tools/call floor (sandbox_list, MCP round trip)', ...sb.kiln.floor, n: sb.kiln.floor.times.length },
    ...sb.peers.map((p) => ({ name: p.name, ms: p.ms, n: p.times.length, error: p.missing, external: true })),
  ];
  // What Node's own spawn of a process costs (the fork/exec row): an external figure less that is
  // the sandbox's own share.
  const spawnFloor = fork;
  const header = ['/bin/true in ...', 'median', 'less spawn floor', 'runs', 'ratio to kiln fresh', 'target'];
  const table = rows.map((r) => [
    r.name,
    r.ms === undefined ? (r.error ? 'n/a (see note)' : 'n/a') : fmt(r.ms, 'ms'),
    r.external && r.ms !== undefined && spawnFloor !== undefined ? fmt(r.ms - spawnFloor, 'ms') : '',
    String(r.n ?? 0),
    r.ms === undefined || base === undefined ? '-' : `${(r.ms / base).toFixed(2)}x`,
    r.target ?? '',
  ]);
  const notes = rows.filter((r) => r.error).map((r) => `${r.name}: ${r.error}`);
  const targets = [
    { what: 'sandbox_exec, fresh strict sandbox vs bwrap', text: freshTarget },
    { what: 'sandbox_exec, session sandbox vs fork/exec', text: sessionTarget },
  ];
  return { header, table, notes, targets };
}
