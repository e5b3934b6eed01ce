// `make bench`: every benchmark in one run, side by side with the peers, written to bench/REPORT.md
// and bench/scaling.png. Not a test: nothing here passes or fails on a figure; the run fails only
// when a measurement itself cannot be taken (a tool errors, a count is wrong).
//   - MCP servers (peers.mjs): start-up to the initialize answer, idle RSS, the file tools and
//     running a command: kiln vs @modelcontextprotocol/server-filesystem and
//     @wonderwhy-er/desktop-commander (both from bench/node_modules)
//   - sandbox start-up (sandbox_start.mjs): /bin/true vs fork/exec, unshare, bwrap, srt
//   - scaling (scaling.mjs, plot.mjs): search on 10k/100k/1M files vs rg, 1/10/100 concurrent
//     sandboxes vs bwrap, 1 MB/100 MB/1 GB of output vs bwrap; tables and scaling.png
//   - static serving (serve.mjs): `kiln serve` vs nginx under wrk
//   - services (services.mjs): postgres in a sandbox to the first query vs pg_ctl start; a verify clone
//   - apps (apps.mjs): a tiny Node app behind kiln serve vs nginx proxy_pass; waking a sleeping app
//   - egress (egress.mjs): the network allowlist proxy: a 100 MiB download and 1,000 small requests
//     through it vs curl direct on loopback and srt's proxy
//   - checkpoints (checkpoints.mjs): checkpoint_create on 10k/100k files, first and after 10 files
//     changed, vs git add -A && git commit (warm index) and tar; what checkpoints.auto adds to a
//     sandbox_exec in a 10k-file workspace
// Environment: KILN_BIN (the binary), KILN_BUILD (build folder, holds the generated search trees),
// BENCH_QUICK=1 (fewer runs, no 1M-file tree: minutes, for development), BENCH_ONLY=peers|sandbox|
// conc|scaling|serve|services|apps|egress|checkpoints (print those figures only; REPORT.md is not written; checkpoints
// also writes its REPORT.md section to KILN_BUILD/bench-checkpoints.md), BENCH_SEARCH_SIZES=10000,100000
// (override the search tree sizes), BENCH_CHECKPOINT_SIZES=10000,100000 (the checkpoint tree sizes).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { copySample, kilnBin } from '../tests/lib/kiln.mjs';
import { benchDir, fmt, loadAvg, machine, mdTable, nowMs, printTable, quick, ratio } from './lib.mjs';
import { DC, DC_ENV_NOTE, fileTools, OPS, peerVersions, runCommand, SF, startup, startupTarget } from './peers.mjs';
import { plotScaling } from './plot.mjs';
import { N_SANDBOX, N_SRT, sandboxStartup, sandboxTable, SB_TARGETS, srtPkg } from './sandbox_start.mjs';
import { CONC_MEMORY_MB, CONC_PIDS, concurrency, fmtBytes, outputScaling, searchScaling } from './scaling.mjs';
import { serveBench, serveTable, SERVE_TARGETS } from './serve.mjs';
import { servicesBench, servicesTable, SERVICE_TARGETS } from './services.mjs';
import { appsBench, appsTable, APPS_TARGETS } from './apps.mjs';
import { egressBench, egressTable, EGRESS_TARGETS } from './egress.mjs';
import { checkpointsBench, checkpointsSection, checkpointsTables } from './checkpoints.mjs';

const buildDir = process.env.KILN_BUILD ?? path.join(benchDir, '..', 'build');
const ONLY = process.env.BENCH_ONLY;
const N_START = quick ? 5 : 20;
const N_START_DC = quick ? 3 : 7; // desktop-commander takes seconds to start
const N_CALLS = quick ? 5 : 20;
const SEARCH_SIZES = process.env.BENCH_SEARCH_SIZES?.split(',').map(Number) ?? (quick ? [10000, 100000] : [10000, 100000, 1000000]);
const searchRuns = (n) => (n <= 10000 ? (quick ? 3 : 5) : quick ? 1 : 3);
const CONC = [1, 10, 100];
const concRuns = (n) => (n < 100 ? (quick ? 3 : 5) : quick ? 1 : 3);
const OUTPUT_SIZES = [2 ** 20, 100 * 2 ** 20, 2 ** 30];
const outputRuns = (b) => (b <= 2 ** 20 ? (quick ? 3 : 5) : quick ? 1 : 3);
// Issue 21: 100 fresh sandboxes at once in at most 0.8x the wall time of 100 bwrap; 1 GB of output
// within 1.1x of `bwrap > file`.
const CONC_TARGET = 0.8;
const OUTPUT_TARGET = 1.1;

async function peersPart() {
  const ws = copySample('kiln-bench-ws-');
  const st = { kiln: await startup('kiln', ws, N_START), sf: await startup('sf', ws, N_START), dc: await startup('dc', ws, N_START_DC) };
  const floor = st.kiln.floorMs; // sampled between kiln's start-up runs
  const ft = await fileTools(N_CALLS);
  const cmd = await runCommand(N_CALLS);
  const rows = [
    { figure: 'start-up to initialize answer', kiln: st.kiln.startMs, sf: st.sf.startMs, dc: st.dc.startMs, unit: 'ms', runs: `${N_START} / ${N_START} / ${N_START_DC}`, target: startupTarget(st.kiln.startMs, floor) },
    { figure: 'idle RSS after initialize', kiln: st.kiln.rssMb, sf: st.sf.rssMb, dc: st.dc.rssMb, unit: 'MB', runs: `${N_START} / ${N_START} / ${N_START_DC}`, target: ['< 10 MB', st.kiln.rssMb < 10] },
    ...OPS.map((op) => ({ figure: op.figure, ...ft[op.key], unit: 'ms', runs: `${N_CALLS} each` })),
    { figure: 'run `echo hello`: kiln fresh strict sandbox', kiln: cmd.fresh, dc: cmd.dc, unit: 'ms', runs: `${N_CALLS} each` },
    { figure: 'run `echo hello`: kiln session strict sandbox', kiln: cmd.session, dc: cmd.dc, unit: 'ms', runs: `${N_CALLS} each` },
    { figure: 'run `echo hello`: kiln isolation none (unsandboxed, as DC)', kiln: cmd.none, dc: cmd.dc, unit: 'ms', runs: `${N_CALLS} each` },
  ];
  const header = ['figure', 'kiln', 'server-filesystem', 'kiln/SF', 'desktop-commander', 'kiln/DC', 'runs (kiln / SF / DC)', 'target'];
  const table = rows.map((r) => [
    r.figure, fmt(r.kiln, r.unit), r.sf === undefined ? 'no such tool' : fmt(r.sf, r.unit), ratio(r.kiln, r.sf),
    fmt(r.dc, r.unit), ratio(r.kiln, r.dc), r.runs, r.target ? `${r.target[0]} ${r.target[1] ? 'met' : 'NOT met'}` : '',
  ]);
  return { header, table, floor, kilnStart: st.kiln.startMs };
}

function searchTable(s) {
  const header = ['files', 'kiln file_search', 'rg', 'ratio kiln/rg', 'matches', 'runs', 'target'];
  const table = s.rows.map((r) => (r.skipped
    ? [r.n.toLocaleString('en-US'), 'not measured (see note)', '-', '-', '-', '0', '']
    : [r.n.toLocaleString('en-US'), fmt(r.kiln, 'ms'), fmt(r.rg, 'ms'), ratio(r.kiln, r.rg), String(r.matches), String(r.runs),
      `<= 1.5x rg ${r.kiln <= 1.5 * r.rg ? 'met' : 'NOT met'}`]));
  return { header, table };
}

// "met" / "NOT met" for a kiln/peer ratio that must stay at or below `limit`.
const ratioTarget = (kiln, peer, limit, what) => (kiln === undefined || peer === undefined
  ? `<= ${limit}x ${what} (no figure)` : `<= ${limit}x ${what} ${kiln / peer <= limit ? 'met' : 'NOT met'}`);

function concTable(c) {
  const header = ['sandboxes at once', 'kiln wall', 'kiln per sandbox', 'bwrap wall', 'bwrap per sandbox', 'ratio kiln/bwrap',
    'kiln cold (first burst)', 'ratio cold/bwrap', 'fork/exec wall', 'runs', 'target'];
  const table = c.rows.map((r) => [String(r.n), fmt(r.kiln, 'ms'), fmt(r.kiln / r.n, 'ms'), fmt(r.bwrap, 'ms'),
    r.bwrap === undefined ? '-' : fmt(r.bwrap / r.n, 'ms'), ratio(r.kiln, r.bwrap), fmt(r.cold, 'ms'), ratio(r.cold, r.bwrap),
    fmt(r.fork, 'ms'), String(r.runs),
    r.n === 100 ? ratioTarget(r.kiln, r.bwrap, CONC_TARGET, 'bwrap') : '']);
  const row = c.rows.find((r) => r.n === 100);
  return { header, table, targets: row ? [{ what: '100 fresh sandboxes at once vs 100 bwrap', text: ratioTarget(row.kiln, row.bwrap, CONC_TARGET, 'bwrap') }] : [] };
}

function outputTable(o) {
  const header = ['stdout', 'kiln sandbox_exec', 'kiln MB/s', 'kiln peak RSS (VmHWM)', 'bwrap > file', 'ratio kiln/bwrap', 'bwrap > /dev/null', 'runs', 'target'];
  const table = o.rows.map((r) => [fmtBytes(r.bytes), fmt(r.kiln, 'ms'), (r.bytes / 2 ** 20 / (r.kiln / 1000)).toFixed(0),
    `${fmt(r.hwmKb / 1024, 'MB')} (idle ${fmt(r.rssBaseKb / 1024, 'MB')})`, fmt(r.bwrapFile, 'ms'), ratio(r.kiln, r.bwrapFile), fmt(r.bwrapNull, 'ms'), String(r.runs),
    r.bytes === 2 ** 30 ? ratioTarget(r.kiln, r.bwrapFile, OUTPUT_TARGET, 'bwrap > file') : '']);
  const row = o.rows.find((r) => r.bytes === 2 ** 30);
  return { header, table, targets: row ? [{ what: '1 GB of stdout through sandbox_exec vs bwrap > file', text: ratioTarget(row.kiln, row.bwrapFile, OUTPUT_TARGET, 'bwrap > file') }] : [] };
}

async function scalingPart() {
  const search = await searchScaling(path.join(buildDir, 'bench-trees'), SEARCH_SIZES, searchRuns);
  const conc = await concurrency(CONC, concRuns);
  const output = await outputScaling(OUTPUT_SIZES, outputRuns);
  const plot = plotScaling(path.join(benchDir, 'scaling.png'), { search, conc, output });
  return { search, conc, output, plot };
}

// The rows of each table that carry a verdict in their "target" column: [section, row, target].
function targetRows(sections) {
  const rows = [];
  for (const [section, t] of sections) {
    const col = t?.header?.findIndex((h) => /^target/i.test(h)) ?? -1;
    if (col < 0) continue;
    for (const r of t.table ?? []) {
      const cell = String(r[col] ?? '');
      if (/\bmet\b/.test(cell)) rows.push([section, String(r[0]), cell]);
    }
  }
  return rows;
}

function show(title, t, notes = []) {
  console.log(`\n${title}`);
  printTable(t.header, t.table);
  for (const n of notes) if (n) console.log(`note: ${n}`);
}

async function main() {
  const started = nowMs();
  const bin = kilnBin();
  const m = machine();
  const loadStart = loadAvg();
  const version = spawnSync(bin, ['--version'], { encoding: 'utf8' }).stdout.trim();
  const pv = peerVersions();
  const rgVersion = spawnSync('rg', ['--version'], { encoding: 'utf8' }).stdout?.split('\n')[0] ?? 'rg missing';
  const srtVersion = fs.existsSync(srtPkg) ? JSON.parse(fs.readFileSync(path.join(srtPkg, 'package.json'), 'utf8')).version : undefined;
  const bwrapVersion = spawnSync('bwrap', ['--version'], { encoding: 'utf8' }).stdout?.trim() || 'bwrap missing';
  const unshareVersion = spawnSync('unshare', ['--version'], { encoding: 'utf8' }).stdout?.trim() || 'unshare missing';
  console.log(`Kiln bench: ${version} vs ${SF} ${pv.sf ?? 'missing'}, ${DC} ${pv.dc ?? 'missing'}, ${rgVersion}`);
  console.log(`machine: ${m.nproc} cores, ${m.model}, kernel ${m.kernel}, ${m.ramGb} GB RAM, load ${loadStart}${quick ? ' (BENCH_QUICK)' : ''}`);

  if (ONLY) {
    if (ONLY === 'peers') { const p = await peersPart(); show('MCP servers:', p); }
    if (ONLY === 'sandbox') { const sb = sandboxTable(await sandboxStartup(copySample('kiln-bench-ws-'))); show('sandbox start-up:', sb, sb.notes); }
    if (ONLY === 'conc') { const c = await concurrency(CONC, concRuns); show('concurrent sandboxes:', concTable(c), c.notes); }
    if (ONLY === 'scaling') {
      const s = await scalingPart();
      show('search:', searchTable(s.search), s.search.notes);
      show('concurrent sandboxes:', concTable(s.conc), s.conc.notes);
      show('output:', outputTable(s.output), [...s.output.notes, s.plot.note]);
    }
    if (ONLY === 'serve') { const sv = serveTable(await serveBench({ quick })); show('static serving:', sv, sv.notes); }
    if (ONLY === 'services') { const sc = servicesTable(await servicesBench()); show('services:', sc, sc.notes); }
    if (ONLY === 'apps') { const ap = appsTable(await appsBench()); show('apps:', ap, ap.notes); }
    if (ONLY === 'egress') { const eg = egressTable(await egressBench()); show('egress:', eg, eg.notes); }
    if (ONLY === 'checkpoints') {
      const r = await checkpointsBench(buildDir);
      const cp = checkpointsTables(r);
      show('checkpoints: checkpoint_create vs git commit and tar:', cp.create, cp.create.notes);
      show('automatic checkpoints around sandbox_exec:', cp.auto, cp.auto.notes);
      // The section alone, for splicing into REPORT.md by hand: it says when and how it was measured.
      const file = path.join(buildDir, 'bench-checkpoints.md');
      const [title, ...rest] = checkpointsSection(r, cp, path.relative(path.join(benchDir, '..'), r.treesDir ?? buildDir));
      fs.writeFileSync(file, [title, '', `Measured on its own (\`BENCH_ONLY=checkpoints\`${quick ? ', BENCH_QUICK=1' : ''}) on ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, ` +
        `not in the same run as the sections above: ${version}, load ${loadStart} at start, ${loadAvg()} at the end, ${((nowMs() - started) / 60000).toFixed(1)} min.`, ...rest].join('\n'));
      console.log(`\nwrote ${file} (the REPORT.md section; bench/REPORT.md is not written)`);
    }
    return;
  }

  const p = await peersPart();
  show('MCP servers (medians):', p);
  const sb = sandboxTable(await sandboxStartup(copySample('kiln-bench-ws-')));
  show('sandbox start-up, /bin/true (interleaved rounds, medians):', sb, sb.notes);
  const s = await scalingPart();
  const st = searchTable(s.search);
  const ct = concTable(s.conc);
  const ot = outputTable(s.output);
  show('search scaling:', st, s.search.notes);
  show('concurrent sandboxes:', ct, s.conc.notes);
  show('output size:', ot, [...s.output.notes, s.plot.note]);
  const sv = serveTable(await serveBench({ quick }));
  show('static serving, kiln serve vs nginx on loopback:', sv, sv.notes);
  const sc = servicesTable(await servicesBench());
  show('services: postgres in a sandbox to the first query:', sc, sc.notes);
  const ap = appsTable(await appsBench());
  show('apps: kiln serve vs nginx proxy_pass; waking a sleeping app:', ap, ap.notes);
  const eg = egressTable(await egressBench());
  show('egress: the network allowlist proxy vs curl direct and srt (interleaved rounds, medians):', eg, eg.notes);
  const cpr = await checkpointsBench(buildDir);
  const cp = checkpointsTables(cpr);
  show('checkpoints: checkpoint_create vs git commit and tar (interleaved rounds, medians):', cp.create, cp.create.notes);
  show('automatic checkpoints around sandbox_exec (interleaved rounds, medians):', cp.auto, cp.auto.notes);
  const loadEnd = loadAvg();
  const minutes = ((nowMs() - started) / 60000).toFixed(1);

  const md = [
    '# Kiln benchmark report',
    '',
    `Generated by \`make bench\` (bench/run.mjs) on ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC in ${minutes} min${quick ? ' with BENCH_QUICK=1 (fewer runs, no 1M-file tree)' : ''}.`,
    'Every figure is a median of several runs (the count is in each table); one run of the whole',
    'report, on one machine, so read the ratios rather than the absolute numbers, and mind the load',
    'average: other work on the machine slows every column alike only roughly. Benchmarks are not',
    'tests: nothing here fails a build. Ratios are kiln / peer (below 1: kiln is faster or smaller).',
    '',
    `- kiln: ${version} (${bin})`,
    `- machine: ${m.nproc} cores (nproc), ${m.model}, ${m.ramGb} GB RAM, kernel ${m.kernel}, Node ${m.node}`,
    `- load average (1/5/15 min): ${loadStart} at start, ${loadEnd} at the end${Number(loadStart.split(' ')[0]) > Number(m.nproc) ? ' (above the core count: other work shared the machine, so absolute figures are inflated and ratios noisier; rerun on a quiet machine for release figures)' : ''}`,
    `- peers: \`${SF}\` ${pv.sf ?? '(missing)'}, \`${DC}\` ${pv.dc ?? '(missing)'}, ${rgVersion}, ${bwrapVersion}, \`@anthropic-ai/sandbox-runtime\` ${srtVersion ?? '(missing)'} (\`srt\`), ${unshareVersion}, nginx and wrk (versions under static serving)`,
    '',
    '## Targets at a glance',
    '',
    'Every row of the tables below that carries a target, with its verdict in this run (the tables',
    'and their notes say how each was measured).',
    '',
    ...mdTable(['section', 'row', 'target'], targetRows([
      ['MCP servers', p], ['sandbox start-up', sb], ['search', st], ['concurrent sandboxes', ct], ['output', ot],
      ['static serving', sv], ['services', sc], ['apps', ap], ['egress', eg],
      ['checkpoints', cp.create], ['automatic checkpoints', cp.auto],
    ])),
    '',
    '## MCP servers: start-up, memory, file tools, running a command',
    '',
    ...mdTable(p.header, p.table),
    '',
    `- start-up: spawn to the \`initialize\` answer on stdout, fresh process each run (kiln's share one`,
    `  KILN_HOME, desktop-commander's one HOME, as a returning user's do). The harness alone (spawn`,
    `  \`cat\`, one line there and back; one sample before each of kiln's runs, median) takes ${p.floor.toFixed(2)} ms of it,`,
    `  so kiln's own start-up is about ${(p.kilnStart - p.floor).toFixed(1)} ms. The target is issue 21's: the answer within 2 ms of that floor.`,
    '  RSS: VmRSS from /proc/PID/status 150 ms after `notifications/initialized` (the Node servers: the',
    '  node process).',
    '- tool calls: sequential `tools/call` round trips over stdio in one warm session per server (3',
    '  warm-up calls dropped), each server on its own copy of examples/sample-project. Tools compared',
    '  (kiln / server-filesystem / desktop-commander):',
    ...OPS.map((op) => `  - ${op.figure}: ${op.tools}`),
    '  - run `echo hello`: kiln `sandbox_exec {command: "echo hello"}` / (none) / `start_process',
    '    {command: "cd WS && echo hello"}`; each answer must contain `hello`.',
    '- search file contents: desktop-commander answers `start_search` after ~40 ms with what its rg has',
    '  found so far; the time runs until `get_more_search_results` (polled back to back) reports',
    '  COMPLETED. Find files by name: kiln `file_list {glob: "**/*.js"}`, server-filesystem',
    '  `search_files {pattern: "**/*.js"}`, desktop-commander `start_search {searchType: files, pattern: "*.js"}`.',
    '- running a command: **kiln sandboxes it, desktop-commander does not** (its `start_process` runs',
    '  `/bin/sh -c` as the server\'s own user with the whole machine visible). The fresh strict sandbox is',
    '  made and torn down per call; the session sandbox is one `sandbox_create` reused; "isolation none"',
    '  (a server started with `--allow-unsandboxed`) runs it unsandboxed, the like-for-like row.',
    `- desktop-commander is run offline and without telemetry: ${DC_ENV_NOTE}. Checked while writing`,
    '  this bench: `strace -f -e trace=socket,connect,sendto` over a desktop-commander session of',
    '  start-up and every tool above saw no socket opened. It also updates usage statistics in its',
    '  config.json (under a file lock) on every tool call, part of its per-call time here.',
    '',
    '## Sandbox start-up: `/bin/true`',
    '',
    ...mdTable(sb.header, sb.table),
    '',
    ...(sb.notes.length ? ['Missing or failing here:', ...sb.notes.map((n) => `- ${n}`), ''] : []),
    `- ${N_SANDBOX} interleaved rounds (a new, fixed-seed random order each round; srt only in the first ${N_SRT}), one`,
    '  warm-up run of each first. kiln: `tools/call` round trips through the official MCP SDK client in',
    '  one warm session on a copy of examples/sample-project: `sandbox_exec {command: ["/bin/true"]}`',
    '  without `sandbox_id` (a fresh strict sandbox, created and destroyed per call), and with the',
    '  `sandbox_id` of one `sandbox_create` made before the rounds; `sandbox_list` shows what a',
    '  `tools/call` costs with no sandbox work. Each exec must answer `exit_code: 0`. Peers: whole',
    "  processes timed around Node's `spawnSync`, cwd the workspace. Node's own fork/exec is far dearer",
    "  than a small C program's (the fork/exec row), so \"less spawn floor\" subtracts it from each",
    '  external figure to show what the sandbox itself adds. The second bwrap binds the workspace',
    '  read-write at its real path, as kiln does. srt runs with a settings file equal to its built-in',
    '  defaults (no network, no reads denied) plus the workspace writable; its per-run',
    '  `/tmp/srt-mux-*.sock` leftovers are removed after the run.',
    `  Targets (issue 21, same run, medians): a fresh strict sandbox at most ${SB_TARGETS.freshVsBwrap}x the faster bwrap row; a session-sandbox exec at most ${SB_TARGETS.sessionVsFork}x the fork/exec row and faster than a fresh one.`,
    '',
    '## Scaling',
    '',
    s.plot.note ? `(${s.plot.note})` : '![scaling: search, concurrent sandboxes, output size](scaling.png)',
    '',
    '### Search: kiln `file_search` vs rg by tree size',
    '',
    ...mdTable(st.header, st.table),
    '',
    ...s.search.notes.map((n) => `- ${n}`),
    `- Generated trees (tests/lib/kiln.mjs generateTree: 100 files of ~150 bytes a folder, one file in`,
    `  ${500} holds \`needle_marker\`), kept in ${path.relative(path.join(benchDir, '..'), path.join(buildDir, 'bench-trees'))}/ between runs. rg is timed as a`,
    '  whole process (`rg -n --no-heading needle_marker src`), kiln as one `file_search` call in a warm',
    '  session (`max_results` twice the match count); both must find every match. One warm-up run each',
    '  first, so the page cache holds the tree for both.',
    '',
    '### Concurrent sandboxes: N `/bin/true` at once',
    '',
    ...mdTable(ct.header, ct.table),
    '',
    ...s.conc.notes.map((n) => `- ${n}`),
    `- kiln: N \`sandbox_exec {command: ["/bin/true"], limits: {memory_mb: ${CONC_MEMORY_MB}, pids: ${CONC_PIDS}}}\` calls in flight at once`,
    '  on one MCP session (SDK client), each a fresh strict sandbox; wall time from the first request to the last answer.',
    `  ${CONC_MEMORY_MB} MiB and ${CONC_PIDS} processes each, because the server admits sandboxes while the sums of their limits fit`,
    "  its ceilings (the machine's RAM, half the kernel's pid limit): with the defaults (2 GiB, 1024) only a dozen or so run at",
    '  once and the rest queue.',
    '  bwrap: N `bwrap --unshare-all --die-with-parent --ro-bind / / --proc /proc --dev /dev --tmpfs /tmp',
    '  --bind WS WS /bin/true` spawned at once; fork/exec: N plain `/bin/true`. Interleaved per run, one',
    '  kiln warm-up exec first. "per sandbox" is wall / N.',
    '- Warm spares: every fresh exec that finishes asks for one spare sandbox of its policy, built in the background, so a',
    '  burst of N leaves N spares (at most 3/4 of `--max-sandboxes`, 96 by default) for the next burst of the same policy.',
    '  For each N the first burst, "kiln cold", is kept out of the median: it finds only the spares of the smaller bursts',
    '  before it; "kiln wall" is the median of the bursts after it. Before every timed burst, of every side,',
    '  the bench waits for the machine to be idle (85% idle over 100 ms), so no side pays for the spares kiln builds.',
    '',
    '### Command output: 1 MB, 100 MB, 1 GB on stdout',
    '',
    ...mdTable(ot.header, ot.table),
    '',
    ...s.output.notes.map((n) => `- ${n}`),
    "- The command: `/bin/sh -c \"yes 'kiln bench output line: 0123456789 abcdefghij' | head -c N\"`. kiln:",
    '  a fresh `kiln mcp` per size with one session sandbox (`limits.output_bytes` 2 GiB), one 1 MB',
    '  warm-up exec, then the timed execs; kiln keeps the whole output (trace spool on disk) and answers',
    '  with the tails. Peak RSS is VmHWM of the `kiln mcp` process after the runs (its lifetime peak,',
    '  start-up included; "idle" is VmRSS before the first exec): it must stay flat as output grows.',
    '  bwrap: the same command in the bwrap setup above, stdout to a file (kept, as kiln keeps it)',
    '  and to /dev/null.',
    '',
    '## Static serving: `kiln serve` vs nginx',
    '',
    ...mdTable(sv.header, sv.table),
    '',
    ...sv.notes.map((n) => `- ${n}`),
    '- Files published through the MCP `publish` tool (which starts the daemon); nginx serves the same bytes',
    "  from a temp web root on another loopback port. wrk shares the machine's cores with the server it drives.",
    `  Targets (issue 21), kiln's requests per second over nginx's: public small pages at least ${SERVE_TARGETS.public_small}x,`,
    `  password- or invite-protected small pages at least ${SERVE_TARGETS.protected_small}x, 1 MB files at least ${SERVE_TARGETS.big}x.`,
    '',
    '## Services: PostgreSQL inside a sandbox to the first query',
    '',
    ...mdTable(sc.header, sc.table),
    '',
    ...sc.notes.map((n) => `- ${n}`),
    '- kiln: one `kiln mcp` session; `sandbox_create {services: ["db"]}` then `sandbox_exec {command: "psql -tAc \'SELECT 1\'"}`,',
    '  timed together (the sandbox is destroyed after, untimed). Warm: the workspace\'s cluster exists (made',
    '  by one untimed first round); cold: a new state directory each round, so `initdb` and `setup` run.',
    '- floors: the same cluster settings (fsync off, TCP on 127.0.0.1) outside any sandbox, as the postgres',
    '  user when run as root: `pg_ctl -w start` then `psql` (pg_ctl waits in 100 ms steps), and `postgres &`',
    '  polled with `pg_isready` every 10 ms then `psql`.',
    `  Targets: warm within ${SERVICE_TARGETS.warm_vs_floor}x of the pg_ctl floor; a verify's fresh database under ${SERVICE_TARGETS.clone_ms} ms.`,
    '',
    '## Apps: a published app behind `kiln serve` vs nginx `proxy_pass`; waking a sleeping app',
    '',
    ...mdTable(ap.header, ap.table),
    '',
    ...ap.notes.map((n) => `- ${n}`),
    '- The tiny app (bench/apps.mjs) answers every GET with 1 KiB; kiln runs it published with `publish {app: true, share: public}`',
    '  through MCP (in its strict sandbox), nginx proxies to the same app started directly; the incident tracker is examples/incident-tracker.',
    `  Targets: kiln at least ${APPS_TARGETS.rps_vs_nginx}x nginx's requests per second; a wake under the app's own start + ${APPS_TARGETS.wake_over_start_ms} ms.`,
    '',
    '## Egress: the network allowlist proxy',
    '',
    ...mdTable(eg.header, eg.table),
    '',
    ...eg.notes.map((n) => `- ${n}`),
    '- The upstream is a Node HTTP server on 127.0.0.1 in its own process (GET /big streams 100 MiB from a 1 MiB buffer,',
    '  anything else answers 1 KiB). Direct: curl on the host, `--resolve up.test:PORT:127.0.0.1`, no proxy. kiln: one',
    '  `sandbox_create {network: {allow: ["up.test:PORT"], allow_private: true}}` with `KILN_EGRESS_HOSTS` mapping up.test',
    '  to 127.0.0.1, each run a `sandbox_exec` of curl in it (the proxy variables are the sandbox\'s own). srt: `srt -s',
    '  SETTINGS -c ...` with `allowedDomains: ["localhost:PORT"]` (srt lets only localhost name a loopback address and reads',
    '  no hosts file) and NO_PROXY unset for curl, which srt sets to include localhost. HTTP forward: `curl -o /dev/null',
    '  http://HOST:PORT/big`; tunnel: the same with `-p` (CONNECT; Kiln allows a non-TLS tunnel because the entry names',
    '  the port). Small requests: one curl with a config of 1,000 URLs and `-H "Connection: close"`, so every request is',
    '  a new connection everywhere (Kiln forwards HTTP with Connection: close; curl\'s num_connects is checked to be 1 each).',
    '  The warm-up\'s trace must count the 100 MiB in `result.network.bytes_down`.',
    '  Kiln\'s relay copies through a 64 KiB buffer per direction; splice(2) between the sockets was tried and measured',
    '  no faster on this machine (docs/network.md, "Performance").',
    `  Targets: at least ${EGRESS_TARGETS.throughput_vs_floor}x the floor's throughput; under ${EGRESS_TARGETS.added_ms} ms added per request.`,
    '',
    ...checkpointsSection(cpr, cp, path.relative(path.join(benchDir, '..'), cpr.treesDir ?? buildDir)),
    '',
    // Measured by hand (strace, perf): kept in its own file so a run of the bench does not lose it.
    fs.readFileSync(path.join(benchDir, 'BREAKDOWN.md'), 'utf8').trimEnd(),
  ].join('\n');
  fs.writeFileSync(path.join(benchDir, 'REPORT.md'), md);
  console.log(`\nwrote bench/REPORT.md${s.plot.note ? '' : ' and bench/scaling.png'} (${minutes} min; load ${loadStart} -> ${loadEnd})`);
}

main().catch((e) => {
  console.error(`bench failed: ${e.stack ?? e}`);
  process.exit(1);
});
