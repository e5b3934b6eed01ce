// Draws bench/scaling.png from the scaling figures with gnuplot (Debian gnuplot-nox): three
// log-log panels, search time by file count, concurrent sandboxes, command output size.
// Returns a note instead when gnuplot is missing or fails; the report is written either way.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { tempDir } from '../tests/lib/kiln.mjs';
import { onPath } from './lib.mjs';

const dat = (rows, cols) => rows.map((r) => cols.map((c) => (r[c] === undefined ? 'NaN' : String(r[c]))).join(' ')).join('\n') + '\n';

export function plotScaling(out, { search, conc, output }) {
  if (!onPath('gnuplot')) return { note: 'scaling.png not drawn: gnuplot is not installed (Debian package gnuplot-nox; make bench installs it)' };
  const dir = tempDir('kiln-bench-plot-');
  const f = (name) => path.join(dir, name);
  fs.writeFileSync(f('search.dat'), dat(search.rows.filter((r) => !r.skipped), ['n', 'kiln', 'rg']));
  fs.writeFileSync(f('conc.dat'), dat(conc.rows, ['n', 'kiln', 'bwrap', 'fork']));
  fs.writeFileSync(f('output.dat'), dat(output.rows.map((r) => ({ ...r, mb: r.bytes / 2 ** 20, hwm: r.hwmKb / 1024 })), ['mb', 'kiln', 'bwrapFile', 'hwm']));
  const script = `
set terminal pngcairo noenhanced size 1650,520 font "DejaVu Sans,10"
set output "${out}"
set multiplot layout 1,3 title "Kiln scaling (medians; log-log)"
set logscale xy
set grid
set key top left
set pointsize 1.2
set title "search: kiln file_search vs rg"
set xlabel "files in the tree"
set ylabel "time (ms)"
plot "${f('search.dat')}" using 1:2 with linespoints lw 2 title "kiln file_search", \\
     "" using 1:3 with linespoints lw 2 title "rg (whole process)"
set title "concurrent sandboxes running /bin/true"
set xlabel "sandboxes started at once"
set ylabel "wall time for all (ms)"
plot "${f('conc.dat')}" using 1:2 with linespoints lw 2 title "kiln sandbox_exec (fresh strict)", \\
     "" using 1:3 with linespoints lw 2 title "bwrap", \\
     "" using 1:4 with linespoints lw 2 dt 2 title "fork/exec, no sandbox"
set title "command output (yes | head -c N)"
set xlabel "stdout (MB)"
set ylabel "time to completion (ms)"
set y2label "kiln peak RSS (MB)"
set y2tics
set logscale y2
set y2range [1:1000]
set xrange [0.5:2000]
set key bottom right
plot "${f('output.dat')}" using 1:2 with linespoints lw 2 title "kiln sandbox_exec", \\
     "" using 1:3 with linespoints lw 2 title "bwrap > file", \\
     "" using 1:4 axes x1y2 with linespoints lw 2 dt 3 title "kiln peak RSS (right axis)"
unset multiplot
`;
  fs.writeFileSync(f('scaling.gp'), script);
  const r = spawnSync('gnuplot', [f('scaling.gp')], { encoding: 'utf8' });
  if (r.status !== 0) return { note: `scaling.png not drawn: gnuplot failed: ${(r.stderr || '').trim().slice(0, 300)}` };
  return { note: undefined };
}
