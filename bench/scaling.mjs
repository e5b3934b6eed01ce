// How kiln's cost grows with the work, for `make bench`: file_search against rg on 10k/100k/1M
// generated files, 1/10/100 concurrent sandbox_exec against as many concurrent bwrap, and 1 MB /
// 100 MB / 1 GB of command output (time and kiln's peak RSS) against bwrap writing to a file.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { connectClient, copySample, generateTree, tempDir } from '../tests/lib/kiln.mjs';
import { bwrapArgv, median, nowMs, onPath, rssKb, runExternal, settle } from './lib.mjs';

const NEEDLE_EVERY = 500;
const timeoutOpts = (ms) => ({ timeout: ms, resetTimeoutOnProgress: true, maxTotalTimeout: ms });

// Free bytes and inodes of the file system holding `dir` (df, POSIX output).
function dfFree(dir) {
  const col = (args) => Number(spawnSync('df', [...args, dir], { encoding: 'utf8' }).stdout.trim().split('\n')[1]?.split(/\s+/)[3]);
  return { bytes: col(['-Pk']) * 1024, inodes: col(['-Pi']) };
}

// A deterministic tree of `n` small files (≈150 bytes, one 4 KB block each) under root/src, made
// once and kept (a stamp file says it is complete).
export function ensureTree(treesDir, n, notes, what = 'search') {
  const root = path.join(treesDir, String(n));
  const stamp = path.join(root, '.complete');
  if (fs.existsSync(stamp)) return { root };
  fs.rmSync(root, { recursive: true, force: true });
  fs.mkdirSync(treesDir, { recursive: true });
  const free = dfFree(treesDir);
  const needBytes = n * 4096 * 1.2 + 4 * 2 ** 30; // blocks + dirs, and 4 GB left for everyone else
  const needInodes = n * 1.05 + 100000;
  if (!(free.bytes > needBytes) || !(free.inodes > needInodes)) {
    notes.push(`${what} on ${n.toLocaleString('en-US')} files not measured: needs ~${(needBytes / 2 ** 30).toFixed(1)} GB and ${Math.round(needInodes).toLocaleString('en-US')} inodes free on ${treesDir}, has ${(free.bytes / 2 ** 30).toFixed(1)} GB and ${free.inodes.toLocaleString('en-US')} inodes`);
    return { skipped: true };
  }
  process.stdout.write(`generating a ${n.toLocaleString('en-US')}-file tree in ${root} (once) ... `);
  const t0 = nowMs();
  generateTree(path.join(root, 'src'), n, { needleEvery: NEEDLE_EVERY });
  fs.writeFileSync(stamp, String(n));
  const s = ((nowMs() - t0) / 1000).toFixed(1);
  console.log(`${s} s`);
  return { root, generatedS: Number(s) };
}

// rg as a whole process and kiln's file_search as one call in a warm session, on the same tree;
// one warm-up run each (the page cache then holds the tree for both), then `runs` timed.
async function searchOne(root, n, runs) {
  const pattern = 'needle_marker';
  const expected = Math.ceil(n / NEEDLE_EVERY);
  const rg = [];
  for (let i = 0; i < runs + 1; i++) {
    const t0 = nowMs();
    const r = spawnSync('rg', ['-n', '--no-heading', pattern, 'src'], { cwd: root, encoding: 'utf8', maxBuffer: 1 << 28 });
    const dt = nowMs() - t0;
    if (r.status !== 0) throw new Error(`rg failed: ${r.stderr}`);
    const got = r.stdout.trim().split('\n').length;
    if (got !== expected) throw new Error(`rg found ${got} lines, expected ${expected}`);
    if (i > 0) rg.push(dt);
  }
  const c = await connectClient({ args: ['--workspace', root], name: 'kiln-bench' });
  const kiln = [];
  try {
    for (let i = 0; i < runs + 1; i++) {
      const t0 = nowMs();
      const r = await c.client.callTool({ name: 'file_search', arguments: { pattern, path: 'src', max_results: expected * 2 } }, undefined, timeoutOpts(600000));
      const dt = nowMs() - t0;
      const sc = r.structuredContent;
      if (r.isError || !sc) throw new Error(`kiln file_search: ${JSON.stringify(r).slice(0, 400)}`);
      if (sc.matches.length !== expected) throw new Error(`kiln found ${sc.matches.length}, expected ${expected} (truncated ${sc.truncated})`);
      if (i > 0) kiln.push(dt);
    }
  } finally {
    await c.close();
  }
  return { kiln: median(kiln), rg: median(rg), runs, matches: expected };
}

export async function searchScaling(treesDir, sizes, runsFor) {
  const rows = [];
  const notes = [];
  for (const n of sizes) {
    const t = ensureTree(treesDir, n, notes);
    if (t.skipped) { rows.push({ n, skipped: true }); continue; }
    if (t.generatedS) notes.push(`the ${n.toLocaleString('en-US')}-file tree was generated in this run (${t.generatedS} s, not timed in the figures)`);
    rows.push({ n, ...(await searchOne(t.root, n, runsFor(n))) });
  }
  return { rows, notes };
}

// N children at once, resolved when all have exited (each must exit 0).
function spawnMany(argv, n, cwd) {
  return Promise.all(Array.from({ length: n }, () => new Promise((resolve, reject) => {
    const ch = spawn(argv[0], argv.slice(1), { cwd, stdio: 'ignore' });
    ch.on('error', reject);
    ch.on('exit', (code, sig) => (code === 0 ? resolve() : reject(new Error(`${argv[0]} exit ${code ?? sig}`))));
  })));
}

// N sandbox_exec of /bin/true in flight at once on one kiln session (each a fresh strict
// sandbox), against N bwrap and N plain /bin/true started at once.
//
// kiln keeps warm spares: every fresh exec that finishes asks for one sandbox of its policy, built
// in the background, so a burst of N leaves N spares (up to 3/4 of --max-sandboxes) for the next
// burst. For each N one untimed burst comes first; the first timed burst after the previous size
// is shown apart as "kiln cold" (it finds only the spares the smaller bursts left). Before every
// timed burst, of every side, the machine is left to settle (settle() below), so no side pays for
// the spares kiln builds after its own burst.
export const CONC_MEMORY_MB = 128;
export const CONC_PIDS = 64;
export async function concurrency(Ns, runsFor) {
  const ws = copySample('kiln-bench-conc-ws-');
  const rows = Ns.map((n) => ({ n, kiln: [], cold: undefined, bwrap: [], fork: [], runs: runsFor(n) }));
  const haveBwrap = onPath('bwrap') && !runExternal(bwrapArgv(ws, ['/bin/true']), ws).error;
  const c = await connectClient({ args: ['--workspace', ws], name: 'kiln-bench' });
  try {
    // 128 MiB and 64 processes each: with the defaults (2 GiB, 1024) the server's ceilings (the
    // machine's RAM, half the kernel's pid limit, the sums of live sandboxes' limits: SANDBOX_CASES
    // 36) would admit only a dozen at once, and the row would measure that queue rather than 100
    // sandboxes side by side.
    const exec = async () => {
      const r = await c.client.callTool({ name: 'sandbox_exec', arguments: { command: ['/bin/true'], limits: { memory_mb: CONC_MEMORY_MB, pids: CONC_PIDS } } }, undefined, timeoutOpts(300000));
      const sc = r.structuredContent;
      if (r.isError || sc?.exit_code !== 0) throw new Error(`sandbox_exec: ${JSON.stringify(r).slice(0, 400)}`);
    };
    const burst = async (n) => {
      await settle();
      const t0 = nowMs();
      await Promise.all(Array.from({ length: n }, exec));
      return nowMs() - t0;
    };
    await exec(); // warm-up
    for (const row of rows) {
      row.cold = await burst(row.n);
      for (let i = 0; i < row.runs; i++) {
        // Interleaved, so a noisy neighbour hits each setup alike.
        row.kiln.push(await burst(row.n));
        if (haveBwrap) {
          await settle();
          const t0 = nowMs();
          await spawnMany(bwrapArgv(ws, ['/bin/true']), row.n, ws);
          row.bwrap.push(nowMs() - t0);
        }
        await settle();
        const t0 = nowMs();
        await spawnMany(['/bin/true'], row.n, ws);
        row.fork.push(nowMs() - t0);
      }
    }
  } finally {
    await c.close();
  }
  for (const row of rows) for (const k of ['kiln', 'bwrap', 'fork']) row[k] = median(row[k]);
  return { rows, notes: haveBwrap ? [] : ['bwrap missing or not runnable here: no bwrap column'] };
}

// `bytes` of text on stdout: yes | head -c, through /bin/sh.
const outputCommand = (bytes) => `yes 'kiln bench output line: 0123456789 abcdefghij' | head -c ${bytes}`;

// For each size: a fresh kiln (so VmHWM is this size's peak), a session sandbox whose output_bytes
// limit is above the size, one warm-up exec of 1 MB, then `runs` execs of the size; VmRSS of the
// kiln process is sampled every 10 ms during them. The peer is the same command under bwrap,
// stdout to a file (kiln keeps the whole output too) and to /dev/null.
export async function outputScaling(sizes, runsFor) {
  const rows = [];
  const notes = [];
  const haveBwrap = onPath('bwrap');
  for (const bytes of sizes) {
    const runs = runsFor(bytes);
    const ws = copySample('kiln-bench-out-ws-');
    const home = tempDir('kiln-bench-out-home-');
    const row = { bytes, runs, kiln: [], rssMaxKb: 0, bwrapFile: [], bwrapNull: [] };
    const c = await connectClient({ args: ['--workspace', ws], home, name: 'kiln-bench' });
    const pid = c.transport.pid;
    try {
      const created = await c.client.callTool({ name: 'sandbox_create', arguments: { limits: { output_bytes: 2 ** 31, wall_s: 600 } } });
      if (created.isError) throw new Error(`sandbox_create: ${JSON.stringify(created).slice(0, 300)}`);
      const id = created.structuredContent.sandbox_id;
      const exec = async (n) => {
        const r = await c.client.callTool({ name: 'sandbox_exec', arguments: { command: outputCommand(n), sandbox_id: id } }, undefined, timeoutOpts(600000));
        const sc = r.structuredContent;
        if (r.isError || sc?.exit_code !== 0) throw new Error(`sandbox_exec ${n} bytes: ${JSON.stringify(r).slice(0, 400)}`);
        if (sc.stdout_total_bytes !== n) throw new Error(`sandbox_exec: ${sc.stdout_total_bytes} bytes of stdout, expected ${n}`);
      };
      row.rssBaseKb = rssKb(pid);
      await exec(1 << 20);
      for (let i = 0; i < runs; i++) {
        const sampler = setInterval(() => { row.rssMaxKb = Math.max(row.rssMaxKb, rssKb(pid) ?? 0); }, 10);
        const t0 = nowMs();
        try { await exec(bytes); } finally { clearInterval(sampler); }
        row.kiln.push(nowMs() - t0);
        if (haveBwrap) {
          const outFile = path.join(tempDir('kiln-bench-out-file-'), 'out');
          const fd = fs.openSync(outFile, 'w');
          let r;
          try { r = runExternal(bwrapArgv(ws, ['/bin/sh', '-c', outputCommand(bytes)]), ws, { stdout: fd, timeout: 600000 }); } finally { fs.closeSync(fd); }
          const size = fs.statSync(outFile).size;
          fs.rmSync(path.dirname(outFile), { recursive: true, force: true });
          if (r.error || size !== bytes) throw new Error(`bwrap output ${bytes}: ${r.error ?? `${size} bytes`}`);
          row.bwrapFile.push(r.ms);
          const n = runExternal(bwrapArgv(ws, ['/bin/sh', '-c', outputCommand(bytes)]), ws, { timeout: 600000 });
          if (n.error) throw new Error(`bwrap output ${bytes} to /dev/null: ${n.error}`);
          row.bwrapNull.push(n.ms);
        }
      }
      row.hwmKb = rssKb(pid, 'VmHWM');
      await c.client.callTool({ name: 'sandbox_destroy', arguments: { sandbox_id: id } });
    } finally {
      await c.close();
      fs.rmSync(home, { recursive: true, force: true }); // the kept output: up to runs+1 GB
    }
    for (const k of ['kiln', 'bwrapFile', 'bwrapNull']) row[k] = median(row[k]);
    rows.push(row);
  }
  if (!haveBwrap) notes.push('bwrap not installed: no peer column');
  return { rows, notes };
}

export const fmtBytes = (b) => (b >= 2 ** 30 ? `${b / 2 ** 30} GB` : b >= 2 ** 20 ? `${b / 2 ** 20} MB` : `${b / 1024} KB`);
export const cpus = () => os.cpus().length;
