// A throwaway PostgreSQL cluster from the host's Debian binaries, outside Kiln, for what runs an app
// against a real database without a sandbox (the incident tracker's e2e test, bench/apps.mjs).
// postgres refuses to run as root, so as root the cluster belongs to kilntest (or nobody).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

// The newest installed server's bin folder (KILN_POSTGRES_BINDIR first, as Kiln reads it), or null.
export function postgresBindir() {
  const dir = process.env.KILN_POSTGRES_BINDIR
    || spawnSync('sh', ['-c', 'ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1']).stdout.toString().trim();
  return dir && fs.existsSync(path.join(dir, 'postgres')) ? dir : null;
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

const runAs = process.getuid() === 0 ? (spawnSync('id', ['kilntest']).status === 0 ? 'kilntest' : 'nobody') : null;

// initdb and pg_ctl start in `dir` (made accessible to the cluster's user); resolves
// { url (DATABASE_URL), stop() }. Throws with the tool's output when a step fails.
export async function startCluster(bindir, dir) {
  const run = (tool, args) => {
    const [cmd, argv] = runAs ? ['runuser', ['-u', runAs, '--', path.join(bindir, tool), ...args]] : [path.join(bindir, tool), args];
    const r = spawnSync(cmd, argv, { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`${tool} ${args.join(' ')}: exit ${r.status}: ${r.stdout}${r.stderr}`);
  };
  const data = path.join(dir, 'pg');
  fs.mkdirSync(data, { mode: 0o700 });
  if (runAs) spawnSync('chown', ['-R', runAs, dir]);
  const port = await freePort();
  run('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
  run('pg_ctl', ['-D', data, '-l', path.join(data, 'log'), '-w', '-o', `-p ${port} -k ${data} -c listen_addresses=127.0.0.1 -c fsync=off`, 'start']);
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    stop: () => run('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']),
  };
}
