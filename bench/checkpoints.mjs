// Checkpoints for `make bench` (docs/checkpoints.md): what checkpoint_create costs on generated
// trees of 10k and 100k files, the first one and an incremental one after 10 files changed,
// against `git add -A && git commit` on the same tree (the first commit, then with a warm index)
// and against archiving the tree with tar; and what the automatic checkpoints around every
// sandbox_exec add to one, in a 10k-file workspace with checkpoints.auto on against one with it off.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { connectClient, sleep, tempDir } from '../tests/lib/kiln.mjs';
import { fmt, median, nowMs, quick, ratio } from './lib.mjs';
import { ensureTree } from './scaling.mjs';

export const CHECKPOINT_TARGETS = { incremental_ms: 150, incremental_files: 100000, vs_git: 3, auto_added: 0.10 };
const SIZES = process.env.BENCH_CHECKPOINT_SIZES?.split(',').map(Number) ?? [10000, 100000];
const N_CHANGED = 10;
const firstRuns = (n) => (quick ? 1 : n <= 10000 ? 5 : 3);
const INC_RUNS = quick ? 5 : 15;
const AUTO_FILES = 10000;
const AUTO_RUNS = quick ? 5 : 20;
const TAR = 'tar -cf - --exclude=./.git . | cat > /dev/null';
const GIT_COMMIT = (msg) => `git add -A && git commit -q -m '${msg}'`;
const EDIT_MARK = '// checkpoint bench edit';
const timeoutOpts = { timeout: 600000, resetTimeoutOnProgress: true, maxTotalTimeout: 600000 };

// git as a user without any configuration of theirs (no hooks, no fsmonitor, no signing), and no
// automatic gc or maintenance inside the timed commits (the first commit leaves 100k loose objects,
// which would start `gc --auto` after every later commit).
const gitHome = () => tempDir('kiln-bench-cp-githome-');
const gitEnv = (home) => ({
  PATH: process.env.PATH, HOME: home, GIT_CONFIG_NOSYSTEM: '1', LANG: 'C',
  GIT_AUTHOR_NAME: 'bench', GIT_AUTHOR_EMAIL: 'bench@example.invalid', GIT_COMMITTER_NAME: 'bench', GIT_COMMITTER_EMAIL: 'bench@example.invalid',
});

function sh(cmd, cwd, env = process.env) {
  const t0 = nowMs();
  const r = spawnSync('/bin/sh', ['-c', cmd], { cwd, env, encoding: 'utf8', timeout: 600000, maxBuffer: 1 << 24 });
  const ms = nowMs() - t0;
  if (r.error) throw new Error(`${cmd}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`${cmd}: exit ${r.status ?? r.signal}: ${(r.stderr ?? '').trim().slice(-300)}`);
  return { ms, stdout: r.stdout };
}

// The path of generated file k (tests/lib/kiln.mjs generateTree's layout, 100 files a folder).
const fileOf = (root, k) => {
  const d = Math.floor(k / 100);
  return path.join(root, 'src', `d${String(Math.floor(d / 10)).padStart(3, '0')}`, `s${d % 10}`, `f${k % 100}.js`);
};

// Changes N_CHANGED files spread over the tree (each in another folder), a different set each
// round: the previous edit line goes and a new one is appended, so the tree does not grow run
// after run.
let editSeq = 0;
function changeFiles(root, n, round) {
  const token = `${process.pid}-${Date.now()}-${editSeq++}`;
  for (let i = 0; i < N_CHANGED; i++) {
    const k = (i * Math.floor(n / N_CHANGED) + 1 + 37 * round) % n;
    const f = fileOf(root, k);
    const body = fs.readFileSync(f, 'utf8').split('\n').filter((l) => !l.startsWith(EDIT_MARK)).join('\n');
    fs.writeFileSync(f, `${body.replace(/\n*$/, '\n')}${EDIT_MARK} ${token}\n`);
  }
}

async function kilnServer(root, name) {
  const home = tempDir('kiln-bench-cp-home-');
  const c = await connectClient({ args: ['--workspace', root], home, name });
  const call = async (tool, args) => {
    const r = await c.client.callTool({ name: tool, arguments: args }, undefined, timeoutOpts);
    if (r.isError || !r.structuredContent) throw new Error(`kiln ${tool}: ${r.content?.[0]?.text ?? JSON.stringify(r).slice(0, 300)}`);
    return r.structuredContent;
  };
  return {
    call,
    async checkpoint(label, files) {
      const t0 = nowMs();
      const sc = await call('checkpoint_create', { label });
      const wall = nowMs() - t0;
      if (files !== undefined && sc.files !== files) throw new Error(`kiln checkpoint ${label}: ${sc.files} files, expected ${files}`);
      return { wall, own: sc.duration_ms, sc };
    },
    async close() {
      await c.close();
      fs.rmSync(home, { recursive: true, force: true });
    },
  };
}

// Files Kiln and tar see: the generated ones plus the tree's .complete stamp (.git is left out
// by both).
const treeFiles = (n) => n + 1;

// One tree size: the first checkpoint (a new KILN_HOME each run) against the first commit (a new
// repository each run) and tar, then incremental ones after N_CHANGED changed files against
// git's add + commit with a warm index, in interleaved rounds with the order rotated.
async function sizeBench(treesDir, n, notes) {
  const tree = ensureTree(treesDir, n, notes, 'checkpoints');
  if (tree.skipped) return { n, skipped: true };
  const root = tree.root;
  const home = gitHome();
  const env = gitEnv(home);
  const git = { first: [], inc: [], same: [] };
  const kiln = { first: [], firstOwn: [], inc: [], incOwn: [], newBytes: [], same: [], sameOwn: [] };
  const tar = [];
  const floor = [];
  const syncfs = [];
  const freshRepo = () => {
    fs.rmSync(path.join(root, '.git'), { recursive: true, force: true });
    sh('git init -q && git config gc.auto 0 && git config maintenance.auto false', root, env);
  };
  const firstSteps = [
    async () => {
      const k = await kilnServer(root, 'kiln-bench-checkpoints');
      try {
        const c = await k.checkpoint('first', treeFiles(n));
        kiln.first.push(c.wall);
        kiln.firstOwn.push(c.own);
      } finally {
        await k.close();
      }
    },
    () => {
      freshRepo();
      git.first.push(sh(GIT_COMMIT('first'), root, env).ms);
    },
    () => { tar.push(sh(TAR, root).ms); },
  ];
  const runs = firstRuns(n);
  // One untimed tar first, so the page cache holds the tree (contents, inodes, folders) for all.
  sh(TAR, root);
  for (let round = 0; round < runs; round++) {
    for (let j = 0; j < firstSteps.length; j++) await firstSteps[(j + round) % firstSteps.length]();
  }
  // The repository of the last first commit stays, its index warm; Kiln gets one long session.
  const k = await kilnServer(root, 'kiln-bench-checkpoints');
  try {
    await k.checkpoint('base', treeFiles(n));
    const files = sh('git ls-files | wc -l', root, env).stdout.trim();
    if (Number(files) !== treeFiles(n)) throw new Error(`git tracks ${files} files, expected ${treeFiles(n)}`);
    const incSteps = [
      async (round) => {
        const c = await k.checkpoint(`incremental ${round}`, treeFiles(n));
        if (round >= 0) { kiln.inc.push(c.wall); kiln.incOwn.push(c.own); kiln.newBytes.push(c.sc.new_bytes); }
      },
      (round) => {
        const ms = sh(GIT_COMMIT(`incremental ${round}`), root, env).ms;
        if (round >= 0) git.inc.push(ms);
      },
      (round) => {
        const ms = sh('true', root, env).ms;
        if (round >= 0) floor.push(ms);
      },
      // What one syncfs of this file system costs now (Kiln makes one when a checkpoint has new
      // contents): coreutils `sync -f`, in the same rounds.
      (round) => {
        const ms = sh('sync -f .', root, env).ms;
        if (round >= 0) syncfs.push(ms);
      },
    ];
    // Warm-up round (-1), untimed, then the rounds: the same N_CHANGED changes for both.
    for (let round = -1; round < INC_RUNS; round++) {
      changeFiles(root, n, round + 1);
      for (let j = 0; j < incSteps.length; j++) await incSteps[(j + Math.max(round, 0)) % incSteps.length](round);
    }
    // Every incremental commit changed exactly N_CHANGED files (a check that git saw the edits).
    const stat = sh('git diff --name-only HEAD~1 HEAD | wc -l', root, env).stdout.trim();
    if (Number(stat) !== N_CHANGED) throw new Error(`the last commit changed ${stat} files, expected ${N_CHANGED}`);
    // Nothing changed: the walk and the bookkeeping alone (no new contents, so no syncfs either);
    // git commits the same tree again (--allow-empty). One untimed round first.
    const sameSteps = [
      async (round) => {
        const c = await k.checkpoint(`unchanged ${round}`, treeFiles(n));
        if (c.sc.new_bytes !== 0) throw new Error(`an unchanged tree's checkpoint stored ${c.sc.new_bytes} new bytes`);
        if (round >= 0) { kiln.same.push(c.wall); kiln.sameOwn.push(c.own); }
      },
      (round) => {
        const ms = sh(`git add -A && git commit -q --allow-empty -m 'unchanged ${round}'`, root, env).ms;
        if (round >= 0) git.same.push(ms);
      },
    ];
    await sleep(1100); // past the racy window of the last edits, so no round re-reads them
    for (let round = -1; round < INC_RUNS; round++) {
      for (let j = 0; j < sameSteps.length; j++) await sameSteps[(j + Math.max(round, 0)) % sameSteps.length](round);
    }
  } finally {
    await k.close();
    fs.rmSync(home, { recursive: true, force: true });
  }
  return {
    n, generatedS: tree.generatedS, firstRuns: runs, incRuns: INC_RUNS,
    kiln: { first: median(kiln.first), firstOwn: median(kiln.firstOwn), inc: median(kiln.inc), incOwn: median(kiln.incOwn), newBytes: median(kiln.newBytes) },
    git: { first: median(git.first), inc: median(git.inc), same: median(git.same) },
    kilnSame: { wall: median(kiln.same), own: median(kiln.sameOwn) },
    tar: median(tar), tarRuns: tar.length, floor: median(floor), syncfs: median(syncfs),
  };
}

// sandbox_exec in one session sandbox per workspace, two workspaces with identical 10k-file
// trees, kiln.json checkpoints.auto true in one and false in the other (a server each): a command
// that changes nothing and one that writes one file, interleaved rounds, order rotated.
async function autoBench(treesDir, notes) {
  const setups = [];
  for (const auto of [true, false]) {
    const tree = ensureTree(path.join(treesDir, auto ? 'auto-on' : 'auto-off'), AUTO_FILES, notes, 'automatic checkpoints');
    if (tree.skipped) return { skipped: true };
    fs.writeFileSync(path.join(tree.root, 'kiln.json'), `${JSON.stringify({ checkpoints: { auto } })}\n`);
    setups.push({ auto, root: tree.root, times: { none: [], one: [] } });
  }
  // Past the racy window of kiln.json (just written) and of a tree just generated: a file changed
  // within a second of being hashed is read again by the next checkpoint.
  await sleep(1100);
  try {
    for (const s of setups) {
      s.k = await kilnServer(s.root, `kiln-bench-checkpoints-auto-${s.auto ? 'on' : 'off'}`);
      s.sandbox = (await s.k.call('sandbox_create', {})).sandbox_id;
    }
    let seq = 0;
    const exec = async (s, what) => {
      const command = what === 'none' ? ['/bin/true'] : `echo ${seq++} > bench-changed.txt`;
      const t0 = nowMs();
      const r = await s.k.call('sandbox_exec', { command, sandbox_id: s.sandbox, timeout_s: 120 });
      const ms = nowMs() - t0;
      if (r.exit_code !== 0) throw new Error(`sandbox_exec ${JSON.stringify(command)}: exit ${r.exit_code}: ${String(r.stderr).slice(-200)}`);
      return { ms, trace: r.trace_id };
    };
    // Warm-up, untimed: the first automatic checkpoint reads the whole tree. Then the probe: the
    // trace of a one-file run records that change with auto on, and no changes with it off.
    for (const s of setups) {
      for (let i = 0; i < 2; i++) { await exec(s, 'none'); await exec(s, 'one'); }
      const t = await s.k.call('trace_get', { trace_id: (await exec(s, 'one')).trace });
      const ch = (t.trace ?? t).changes;
      if (s.auto && !(ch && ch.modified === 1 && ch.added === 0 && ch.deleted === 0)) throw new Error(`auto on: the trace's changes are ${JSON.stringify(ch)}, expected one file modified`);
      if (!s.auto && ch) throw new Error(`auto off: the trace has changes ${JSON.stringify(ch)}`);
    }
    const steps = [];
    for (const what of ['none', 'one']) for (const s of setups) steps.push([s, what]);
    for (let round = 0; round < AUTO_RUNS; round++) {
      for (let j = 0; j < steps.length; j++) {
        const [s, what] = steps[(j + round) % steps.length];
        s.times[what].push((await exec(s, what)).ms);
      }
    }
    // What the automatic checkpoints of the timed runs took, by their own duration_ms.
    const on = setups[0];
    const list = await on.k.call('checkpoint_list', { limit: AUTO_RUNS });
    const autos = list.checkpoints.filter((c) => c.trigger !== 'manual');
    return {
      runs: AUTO_RUNS,
      on: { none: median(on.times.none), one: median(on.times.one) },
      off: { none: median(setups[1].times.none), one: median(setups[1].times.one) },
      autoOwn: median(autos.map((c) => c.duration_ms)), autoCount: autos.length, triggers: [...new Set(autos.map((c) => c.trigger))],
    };
  } finally {
    for (const s of setups) await s.k?.close();
  }
}

export async function checkpointsBench(buildDir) {
  if (!spawnSync('git', ['--version']).stdout) return { error: 'git not installed' };
  const treesDir = path.join(buildDir, 'bench-checkpoint-trees');
  const notes = [];
  const sizes = [];
  for (const n of SIZES) sizes.push(await sizeBench(treesDir, n, notes));
  const auto = await autoBench(treesDir, notes);
  const versions = {
    git: spawnSync('git', ['--version'], { encoding: 'utf8' }).stdout.trim(),
    tar: spawnSync('tar', ['--version'], { encoding: 'utf8' }).stdout.split('\n')[0],
  };
  return { sizes, auto, notes, versions, treesDir };
}

const met = (ok, what) => `${what} ${ok === undefined ? '(no figure)' : ok ? 'met' : 'NOT met'}`;
// kiln / peer as the rest of the report has it, and what that means in words.
const vs = (kiln, other) => {
  if (!kiln || !other) return '-';
  const times = (x) => (x >= 2 ? x.toFixed(1) : x.toFixed(2));
  const words = other >= kiln ? `${times(other / kiln)}x faster` : `${times(kiln / other)}x slower`;
  return `${ratio(kiln, other)} (${words})`;
};

export function checkpointsTables(r) {
  const header = ['files', 'checkpoint', 'kiln wall (MCP call)', 'kiln duration_ms', 'git add -A && commit', 'kiln vs git', 'tar of the tree (piped)', 'kiln vs tar', 'runs (kiln, git / tar)', 'target'];
  const autoHeader = ['sandbox_exec, 10k-file workspace', 'checkpoints.auto off', 'auto on', 'added', 'on / off', 'runs', 'target'];
  if (r.error) return { create: { header, table: [], notes: [`checkpoints not measured: ${r.error}`] }, auto: { header: autoHeader, table: [], notes: [] } };
  const T = CHECKPOINT_TARGETS;
  const table = [];
  for (const s of r.sizes) {
    const files = s.n.toLocaleString('en-US');
    if (s.skipped) { table.push([files, 'not measured (see note)', '-', '-', '-', '-', '-', '-', '0', '']); continue; }
    table.push([files, 'first (new store / new repository)', fmt(s.kiln.first, 'ms'), fmt(s.kiln.firstOwn, 'ms'), fmt(s.git.first, 'ms'),
      vs(s.kiln.first, s.git.first), fmt(s.tar, 'ms'), vs(s.kiln.first, s.tar), `${s.firstRuns} / ${s.tarRuns}`, '']);
    const targeted = s.n === T.incremental_files;
    const target = targeted
      ? `${met(s.kiln.inc === undefined ? undefined : s.kiln.inc < T.incremental_ms, `< ${T.incremental_ms} ms`)}; ` +
        met(s.kiln.inc && s.git.inc ? s.git.inc / s.kiln.inc >= T.vs_git : undefined, `>= ${T.vs_git}x faster than git`)
      : '';
    table.push([files, 'nothing changed (no new contents: no syncfs)', fmt(s.kilnSame.wall, 'ms'), fmt(s.kilnSame.own, 'ms'), fmt(s.git.same, 'ms'),
      vs(s.kilnSame.wall, s.git.same), fmt(s.tar, 'ms'), vs(s.kilnSame.wall, s.tar), `${s.incRuns} / ${s.tarRuns}`, '']);
    table.push([files, `incremental, ${N_CHANGED} files changed (warm index)`, fmt(s.kiln.inc, 'ms'), fmt(s.kiln.incOwn, 'ms'), fmt(s.git.inc, 'ms'),
      vs(s.kiln.inc, s.git.inc), fmt(s.tar, 'ms'), vs(s.kiln.inc, s.tar), `${s.incRuns} / ${s.tarRuns}`, target]);
  }
  const notes = [...r.notes];
  const measured = r.sizes.filter((s) => !s.skipped);
  if (measured.length) {
    notes.push(`the target is on the wall time of the MCP call (request written to answer parsed, one warm session), the larger of the two kiln columns; ` +
      "duration_ms is checkpoint_create's own figure (scan to the checkpoint's row, before the transaction commits and the stat cache is written back).");
    notes.push(`git and tar run as \`/bin/sh -c\` processes from Node's spawnSync, whose own cost (\`sh -c true\` in the same rounds) is ` +
      `${measured.map((s) => `${fmt(s.floor, 'ms')} at ${s.n.toLocaleString('en-US')} files`).join(', ')}: it is in the git and tar figures.`);
    notes.push(`one syncfs of the trees' file system (\`sync -f\`, in the incremental rounds) took ` +
      `${measured.map((s) => `${fmt(s.syncfs, 'ms')} (${s.n.toLocaleString('en-US')}-file rounds)`).join(', ')}: Kiln makes one whenever a checkpoint ` +
      'stores new contents, before recording it, and its cost is whatever else the machine has written and not yet flushed; ' +
      'the nothing-changed row has none.');
    notes.push(`each incremental checkpoint stored ${measured.map((s) => `${Math.round(s.kiln.newBytes)} bytes`).join(' / ')} of new contents (median; the ${N_CHANGED} edited files).`);
  }
  const a = r.auto;
  const autoTable = [];
  const autoNotes = [];
  if (a.skipped) autoNotes.push('automatic checkpoints not measured (see the note above)');
  else {
    for (const [what, label] of [['none', 'a command that changes nothing (`/bin/true`)'], ['one', 'a command that writes one file']]) {
      const ratio = a.on[what] / a.off[what];
      autoTable.push([label, fmt(a.off[what], 'ms'), fmt(a.on[what], 'ms'), fmt(a.on[what] - a.off[what], 'ms'), `${ratio.toFixed(2)}x`,
        `${a.runs} each`, met(Number.isFinite(ratio) ? ratio - 1 < T.auto_added : undefined, `< ${Math.round(T.auto_added * 100)}% added`)]);
    }
    autoNotes.push(`with auto on every sandbox_exec makes a checkpoint before and one after the command; one equal to the latest is ` +
      `not recorded again, so a run that changes nothing adds none to checkpoint_list. The ${a.autoCount} recorded by these runs ` +
      `(trigger ${a.triggers.join(', ') || '-'}) took ${fmt(a.autoOwn, 'ms')} each by their own duration_ms (median).`);
  }
  return { create: { header, table, notes }, auto: { header: autoHeader, table: autoTable, notes: autoNotes } };
}

// The REPORT.md section (run.mjs puts it after the others).
export function checkpointsSection(r, t, relTrees) {
  const T = CHECKPOINT_TARGETS;
  const row = (x) => `| ${x.join(' | ')} |`;
  const md = (h, rows) => [row(h), `|${h.map(() => '---').join('|')}|`, ...rows.map(row)];
  return [
    '## Checkpoints: checkpoint_create vs git commit and tar; the automatic checkpoints around sandbox_exec',
    '',
    ...md(t.create.header, t.create.table),
    '',
    ...t.create.notes.map((n) => `- ${n}`),
    `- Trees: tests/lib/kiln.mjs generateTree (100 files of ~150 bytes a folder) under src/, made once in ${relTrees}/ and kept;`,
    '  the workspace is the tree\'s folder, and its git repository lives in it (Kiln leaves .git out, tar is told to).',
    `  Both see the same files (the generated ones plus a stamp file). ${r.versions ? `${r.versions.git}, ${r.versions.tar}.` : ''}`,
    `- First: kiln, a new \`kiln mcp\` on a new KILN_HOME (empty blob store) and one \`checkpoint_create\`; git, \`rm -rf .git && git init\``,
    '  (untimed) then `git add -A && git commit -q` (timed); tar, `tar -cf - --exclude=./.git . | cat > /dev/null` (the pipe because GNU',
    '  tar skips reading the files when the archive is /dev/null itself): no store, no index, only reading every file once, the floor',
    '  for a full copy. One untimed tar first, so the page cache holds the tree for all three (cold-cache figures are not measured).',
    `- Incremental: ${N_CHANGED} files changed each round, each in another folder and a different set each round (the edited line`,
    '  replaced, so the tree does not grow), then kiln `checkpoint_create` in one warm session and git `git add -A && git commit -q` with',
    '  the index of the previous commit: the same changes for both, order rotated per round, one untimed round first. Both re-read the',
    '  previous round\'s files too, which were changed within a second of being hashed (Kiln\'s racy stat-cache entries, git\'s racily',
    '  clean index entries). Kiln fsyncs new contents (syncfs of the state directory\'s file system) before recording them; git runs',
    '  with its defaults, no user or system configuration, and `gc.auto 0`, `maintenance.auto false` in the repository so no',
    '  `gc --auto` starts inside a timed commit.',
    '- Nothing changed: after the incremental rounds and a second\'s pause, kiln `checkpoint_create` with no file changed (it must store',
    '  no new bytes) against `git add -A && git commit -q --allow-empty` (the same tree committed again), one untimed round first: the',
    '  walk and the bookkeeping without the contents and without the syncfs.',
    `  Targets: an incremental checkpoint of ${T.incremental_files.toLocaleString('en-US')} files with ${N_CHANGED} changed under ${T.incremental_ms} ms and at least ${T.vs_git}x faster than git.`,
    '',
    ...md(t.auto.header, t.auto.table),
    '',
    ...t.auto.notes.map((n) => `- ${n}`),
    `- Two workspaces with identical ${AUTO_FILES.toLocaleString('en-US')}-file trees, kiln.json \`{"checkpoints": {"auto": true}}\` in one and`,
    '  `false` in the other, a `kiln mcp` and one `sandbox_create` (strict) each; every figure is the wall time of a `sandbox_exec` on that',
    '  session sandbox. The one-file command is `echo N > bench-changed.txt`. Two untimed runs of each first (the first automatic',
    '  checkpoint reads the whole tree), and a probe: with auto on the trace\'s `changes` must show the one file modified, with it off',
    '  the trace must have none. Then interleaved rounds, order rotated.',
    `  Target: the automatic checkpoints add under ${Math.round(T.auto_added * 100)}% to a sandbox_exec on a ${AUTO_FILES.toLocaleString('en-US')}-file workspace.`,
    '',
  ];
}
