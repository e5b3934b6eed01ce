// Services for `make bench`: from `sandbox_create {services: ["db"]}` to the first query answered,
// cold (a new cluster: initdb) and warm (the workspace's cluster exists), against starting the
// same kind of cluster outside any sandbox (`pg_ctl start -w`, the floor the issue names, and
// `postgres` polled with pg_isready every 10 ms, the tighter floor), plus how long a verify's fresh
// database takes to clone (CREATE DATABASE ... TEMPLATE ... STRATEGY FILE_COPY, timed by psql).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { connectClient, tempDir } from '../tests/lib/kiln.mjs';
import { fmt, median, nowMs, quick } from './lib.mjs';

const N_COLD = quick ? 2 : 5;
const N_WARM = quick ? 5 : 20;
const N_CLONE = quick ? 5 : 20;
export const SERVICE_TARGETS = { warm_vs_floor: 1.5, clone_ms: 100 };

function pgBindir() {
  const root = '/usr/lib/postgresql';
  if (!fs.existsSync(root)) return undefined;
  const v = fs.readdirSync(root).filter((d) => fs.existsSync(path.join(root, d, 'bin', 'postgres')))
    .sort((a, b) => Number(b) - Number(a))[0];
  return v && path.join(root, v, 'bin');
}

const structured = (r) => {
  if (r.isError) throw new Error(r.content?.[0]?.text ?? 'tool error');
  return r.structuredContent;
};

function workspace() {
  const ws = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-bench-svc-')));
  fs.chmodSync(ws, 0o755);
  fs.writeFileSync(path.join(ws, 'kiln.json'), JSON.stringify({
    services: { db: { kind: 'postgres', setup: "psql -q -c 'CREATE TABLE t (n int)'" } },
  }));
  return ws;
}

// create -> `psql -c 'SELECT 1'` answered, in ms; the sandbox is destroyed untimed.
async function createAndQuery(k, ws) {
  const t0 = nowMs();
  const sb = structured(await k.client.callTool({ name: 'sandbox_create', arguments: { services: ['db'] } },
    undefined, { timeout: 120000 }));
  const q = structured(await k.client.callTool({ name: 'sandbox_exec', arguments: { sandbox_id: sb.sandbox_id, command: "psql -tAc 'SELECT 1'" } }));
  const ms = nowMs() - t0;
  if (q.stdout.trim() !== '1') throw new Error(`the first query answered ${JSON.stringify(q.stdout)}: ${q.stderr}`);
  return { ms, sb };
}

async function kilnRounds(bindir) {
  const out = { cold: [], warm: [], clone: [] };
  for (let i = 0; i < N_COLD; i++) {
    const home = tempDir('kiln-bench-svc-home-');
    const ws = workspace();
    const k = await connectClient({ home, args: ['--workspace', ws] });
    const { ms, sb } = await createAndQuery(k, ws);
    out.cold.push(ms);
    await k.client.callTool({ name: 'sandbox_destroy', arguments: { sandbox_id: sb.sandbox_id } });
    await k.close();
    fs.rmSync(ws, { recursive: true, force: true });
    fs.rmSync(home, { recursive: true, force: true });
  }
  const home = tempDir('kiln-bench-svc-home-');
  const ws = workspace();
  const k = await connectClient({ home, args: ['--workspace', ws] });
  const first = await createAndQuery(k, ws);  // makes the cluster: not a warm figure
  await k.client.callTool({ name: 'sandbox_destroy', arguments: { sandbox_id: first.sb.sandbox_id } });
  for (let i = 0; i < N_WARM; i++) {
    const { ms, sb } = await createAndQuery(k, ws);
    out.warm.push(ms);
    if (i === N_WARM - 1) {
      // A verify's fresh database is this clone; psql's \timing measures it inside the sandbox.
      for (let j = 0; j < N_CLONE; j++) {
        const r = structured(await k.client.callTool({ name: 'sandbox_exec', arguments: {
          sandbox_id: sb.sandbox_id,
          command: `psql -X -c '\\timing on' -c 'CREATE DATABASE c${j} TEMPLATE app STRATEGY FILE_COPY' | sed -n 's/^Time: \\([0-9.]*\\) ms.*/\\1/p'`,
        } }));
        const t = Number(r.stdout.trim());
        if (!Number.isFinite(t) || !r.stdout.trim()) throw new Error(`clone timing not found: ${r.stdout} ${r.stderr}`);
        out.clone.push(t);
      }
    }
    await k.client.callTool({ name: 'sandbox_destroy', arguments: { sandbox_id: sb.sandbox_id } });
  }
  await k.close();
  fs.rmSync(ws, { recursive: true, force: true });
  fs.rmSync(home, { recursive: true, force: true });
  return out;
}

// The floors: the same settings Kiln uses, outside any sandbox. postgres refuses root, so as root
// they run as the postgres user Debian's package made.
function floorRounds(bindir) {
  const asUser = process.getuid() === 0 ? ['setpriv', '--reuid', 'postgres', '--regid', 'postgres', '--clear-groups', '--'] : [];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-bench-pg-'));
  fs.chmodSync(dir, 0o755);
  const data = path.join(dir, 'pgdata');
  if (asUser.length) spawnSync('chown', ['postgres:postgres', dir]);
  const run = (argv, opts = {}) => spawnSync(asUser[0] ?? argv[0], asUser.length ? [...asUser.slice(1), ...argv] : argv.slice(1),
    { encoding: 'utf8', cwd: '/tmp', ...opts });
  const init = run([path.join(bindir, 'initdb'), '-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-locale', '--no-sync']);
  if (init.status !== 0) return { error: `initdb failed: ${init.stderr}` };
  const port = String(25432 + (process.pid % 1000));
  const opts = `-h 127.0.0.1 -p ${port} -k /tmp -c fsync=off -c full_page_writes=off -c wal_level=minimal -c max_wal_senders=0 -c max_connections=40 -c shared_buffers=32MB`;
  const query = () => run([path.join(bindir, 'psql'), '-X', '-tA', '-h', '127.0.0.1', '-p', port, '-U', 'postgres', '-d', 'postgres', '-c', 'SELECT 1']);
  const stop = () => run([path.join(bindir, 'pg_ctl'), '-D', data, '-m', 'fast', '-w', 'stop']);
  const out = { pgctl: [], poll: [] };
  for (let i = 0; i < N_WARM; i++) {
    let t0 = nowMs();
    const s = run([path.join(bindir, 'pg_ctl'), '-D', data, '-o', opts, '-l', path.join(dir, 'log'), '-w', 'start']);
    if (s.status !== 0) return { error: `pg_ctl start failed: ${s.stderr}` };
    const q = query();
    out.pgctl.push(nowMs() - t0);
    if (q.stdout.trim() !== '1') return { error: `psql after pg_ctl answered ${q.stdout} ${q.stderr}` };
    stop();
    // postgres itself, polled like Kiln polls (but every 10 ms): a tighter floor than pg_ctl's.
    t0 = nowMs();
    const sh = `"${bindir}/postgres" -D "${data}" ${opts} >"${dir}/log2" 2>&1 & until "${bindir}/pg_isready" -q -h 127.0.0.1 -p ${port}; do sleep 0.01; done; "${bindir}/psql" -X -tA -h 127.0.0.1 -p ${port} -U postgres -d postgres -c 'SELECT 1'`;
    const p = run(['/bin/sh', '-c', sh]);
    out.poll.push(nowMs() - t0);
    if (p.stdout.trim() !== '1') return { error: `postgres + pg_isready answered ${p.stdout} ${p.stderr}` };
    stop();
  }
  fs.rmSync(dir, { recursive: true, force: true });
  return out;
}

export async function servicesBench() {
  const bindir = pgBindir();
  if (!bindir) return { missing: 'PostgreSQL is not installed (Debian package postgresql)' };
  const floor = floorRounds(bindir);
  const kiln = await kilnRounds(bindir);
  return { kiln, floor };
}

export function servicesTable(r) {
  const header = ['path', 'median', 'runs', 'vs pg_ctl start', 'vs postgres + 10 ms poll'];
  const notes = [];
  if (r.missing) return { header, table: [], notes: [r.missing] };
  if (r.floor.error) notes.push(`floor not measured: ${r.floor.error}`);
  const pgctl = r.floor.pgctl ? median(r.floor.pgctl) : undefined;
  const poll = r.floor.poll ? median(r.floor.poll) : undefined;
  const rel = (x, f) => (f ? `${(x / f).toFixed(2)}x` : '-');
  const row = (name, xs) => [name, fmt(median(xs), 'ms'), String(xs.length), rel(median(xs), pgctl), rel(median(xs), poll)];
  const table = [
    row('kiln: sandbox_create {services: [db]} -> first query, warm cluster', r.kiln.warm),
    row('kiln: the same, cold (initdb, setup)', r.kiln.cold),
  ];
  if (pgctl) table.push(row('pg_ctl -w start -> first query (floor)', r.floor.pgctl));
  if (poll) table.push(row('postgres, pg_isready every 10 ms -> first query', r.floor.poll));
  table.push(['kiln: a verify\'s fresh database (CREATE DATABASE ... TEMPLATE, psql \\timing)', fmt(median(r.kiln.clone), 'ms'),
    String(r.kiln.clone.length), '-', '-']);
  return { header, table, notes };
}
