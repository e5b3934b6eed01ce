// Small helpers every part of `make bench` shares (statistics, timing, tables, the machine), so
// run.mjs, peers.mjs and scaling.mjs print and measure the same way.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const benchDir = path.dirname(fileURLToPath(import.meta.url));
export const quick = !!process.env.BENCH_QUICK;

export const median = (xs) => {
  if (!xs.length) return undefined;
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
export const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

export const fmt = (x, unit) => (x === undefined ? '-' : `${x < 10 ? x.toFixed(2) : x < 10000 ? x.toFixed(1) : Math.round(x).toLocaleString('en-US')} ${unit}`);
export const ratio = (a, b) => {
  if (a === undefined || b === undefined || !b) return '-';
  const r = a / b;
  return `${r >= 0.1 ? r.toFixed(2) : r.toPrecision(2)}x`;
};

export function rssKb(pid, field = 'VmRSS') {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    return Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)[1]);
  } catch {
    return undefined;
  }
}

export function onPath(cmd) {
  return (process.env.PATH ?? '').split(':').some((d) => d && fs.existsSync(path.join(d, cmd)));
}

// One external command, run as a whole process with spawnSync. Returns the time, or the reason it
// cannot run here.
export function runExternal(argv, cwd, { stdout = 'ignore', timeout = 30000 } = {}) {
  const t0 = nowMs();
  const r = spawnSync(argv[0], argv.slice(1), { cwd, stdio: ['ignore', stdout, 'pipe'], encoding: 'utf8', timeout });
  const dt = nowMs() - t0;
  if (r.error) return { error: r.error.code === 'ENOENT' ? `${argv[0]} not installed` : String(r.error.message) };
  if (r.status !== 0) {
    const why = (r.stderr ?? '').trim().split('\n').filter(Boolean).slice(-1)[0] ?? '';
    return { error: `exit ${r.status ?? r.signal}${why ? `: ${why.slice(0, 160)}` : ''}` };
  }
  return { ms: dt };
}

export function printTable(header, table) {
  const widths = header.map((h, i) => Math.max(h.length, ...table.map((row) => row[i].length)));
  const line = (cells) => cells.map((c, i) => c.padEnd(widths[i])).join('  ');
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const row of table) console.log(line(row));
}

export const mdTable = (header, table) => [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`,
  ...table.map((row) => `| ${row.join(' | ')} |`)];

export function machine() {
  const cpuinfo = fs.readFileSync('/proc/cpuinfo', 'utf8');
  const model = /model name\s*:\s*(.*)/.exec(cpuinfo)?.[1] ?? 'unknown';
  const kernel = fs.readFileSync('/proc/sys/kernel/osrelease', 'utf8').trim();
  const nproc = spawnSync('nproc', { encoding: 'utf8' }).stdout.trim();
  const ramGb = (os.totalmem() / 2 ** 30).toFixed(1);
  return { model, kernel, nproc, ramGb, node: process.version };
}

// Waits until the machine is quiet (at least 85% of its CPU time idle over 100 ms, at most 15 s),
// so work left over from one timed section (kiln building its warm spares, a peer's exits being
// reaped) is not paid for by the next one.
function cpuTimes() {
  const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  return { idle: f[3] + (f[4] ?? 0), total: f.reduce((a, b) => a + b, 0) };
}
export async function settle({ idleShare = 0.85, stepMs = 100, maxMs = 15000 } = {}) {
  const deadline = Date.now() + maxMs;
  let prev = cpuTimes();
  while (Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, stepMs));
    const now = cpuTimes();
    const total = now.total - prev.total;
    if (total > 0 && (now.idle - prev.idle) / total >= idleShare) return;
    prev = now;
  }
}

export const loadAvg = () => os.loadavg().map((x) => x.toFixed(2)).join(' ');

// `bwrap` with the host's system folders read-only, a private /tmp, /proc and /dev, all namespaces
// unshared, cwd `ws` bound read-write at its real path: the setup closest to kiln's strict sandbox.
export function bwrapArgv(ws, command) {
  return ['bwrap', '--unshare-all', '--die-with-parent', '--ro-bind', '/', '/', '--proc', '/proc', '--dev', '/dev',
    '--tmpfs', '/tmp', '--bind', ws, ws, '--chdir', ws, ...command];
}

// An nginx.conf run from a temp prefix as the current user (`daemon off`, pid, logs and temp
// folders under `prefix`), 2 workers and no access log; `http` is the rest of the http block.
export function nginxConf(prefix, http) {
  const tmp = (n) => path.join(prefix, n);
  const temps = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((k) => `  ${k}_temp_path ${tmp(k === 'client_body' ? 'body' : k)};`);
  return `worker_processes 2;
daemon off;
pid ${tmp('nginx.pid')};
error_log ${tmp('error.log')} warn;
events { worker_connections 1024; }
http {
  access_log off;
  keepalive_requests 1000000;
${temps.join('\n')}
${http.trimEnd()}
}
`;
}
