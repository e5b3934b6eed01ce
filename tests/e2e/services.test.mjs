// Services inside the sandbox (issue 16, TOOLS.md "Services inside the sandbox"), through the MCP
// SDK: a real Debian PostgreSQL and Redis, and a project's own HTTP server, started by
// sandbox_create {services}, reached on the sandbox's loopback, their data kept across sandboxes,
// a fresh database per verify run, setup once, failures that name the service and quote its log,
// and nothing left running after destroy or kill -9 of the server. When the sandbox cannot run
// here these tests are skipped with the reason (failed under KILN_REQUIRE_SANDBOX=1); when
// postgres or redis-server is not installed, the tests that need it say so and count as not run.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

import { errorText, kilnBin, kilnEnv, sleep, structured } from '../lib/kiln.mjs';
import { probeSandbox, sandboxRequired } from '../lib/sandbox_probe.mjs';

function freshDir(prefix) {
  return fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), prefix)));
}

function makeWs(files = {}) {
  const ws = freshDir('kiln-svc-ws-');
  fs.chmodSync(ws, 0o755);
  for (const [rel, content] of Object.entries(files)) {
    const p = path.join(ws, rel);
    fs.mkdirSync(path.dirname(p), { recursive: true });
    fs.writeFileSync(p, typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  }
  return ws;
}

// `kiln mcp --workspace ws --state-dir state`; `state` may be shared between servers (the data
// of a workspace's services lives there). Both folders go when the test ends, unless kept.
async function startKiln(t, { files = {}, ws, state, env = {}, keep = false, args = [] } = {}) {
  ws ??= makeWs(files);
  state ??= freshDir('kiln-svc-state-');
  const transport = new StdioClientTransport({
    command: kilnBin(), args: ['mcp', '--workspace', ws, '--state-dir', state, ...args], env: kilnEnv(state, env), stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (c) => { stderr += c.toString(); });
  const client = new Client({ name: 'kiln-services-e2e', version: '1.0.0' }, { capabilities: {} });
  await client.connect(transport);
  let closed = false;
  const k = {
    client, transport, ws, state,
    get pid() { return transport.pid; },
    get stderr() { return stderr; },
    call: (name, args, opts) => client.callTool({ name, arguments: args }, undefined, { timeout: 180000, ...opts }),
    async ok(name, args, opts) {
      const r = await k.call(name, args, opts);
      assert.ok(!r.isError, `${name} failed: ${errorText(r)}`);
      return structured(r);
    },
    async sh(sandbox_id, command, extra = {}) { return k.ok('sandbox_exec', { sandbox_id, command, ...extra }); },
    async close() {
      if (closed) return;
      closed = true;
      await client.close().catch(() => {});
    },
  };
  t.after(async () => {
    await k.close();
    if (!keep) {
      fs.rmSync(ws, { recursive: true, force: true });
      fs.rmSync(state, { recursive: true, force: true });
    }
  });
  return k;
}

let sandboxTest;
{
  const k = await startKiln({ after: () => {} });
  ({ test: sandboxTest } = await probeSandbox('services e2e', k.call));
  await k.close();
  fs.rmSync(k.ws, { recursive: true, force: true });
  fs.rmSync(k.state, { recursive: true, force: true });
}

function installed(check) {
  return spawnSync('sh', ['-c', check]).status === 0;
}
const havePostgres = installed('ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1');
const haveRedis = installed('command -v redis-server >/dev/null 2>&1');

// A test that needs a server binary: without it, not run (and said why), never a pass.
function serverTest(name, needs, fn) {
  const missing = needs.filter((n) => (n === 'postgres' ? !havePostgres : !haveRedis));
  if (missing.length) {
    const why = `${missing.join(' and ')} not installed (Debian packages postgresql, redis-server; make test installs them)`;
    if (sandboxRequired) return test(name, () => assert.fail(why));
    return test(name, { skip: why }, () => {});
  }
  return sandboxTest(name, fn);
}

const PG = { services: { db: { kind: 'postgres' } } };

serverTest('postgres: ready on create, reachable by psql, rows survive destroy and a new sandbox', ['postgres'], async (t) => {
  const k = await startKiln(t, { files: { 'kiln.json': PG } });
  const info = await k.ok('workspace_info', {});
  assert.deepEqual(info.services, [{ name: 'db', kind: 'postgres', port: 5432 }]);
  const a = await k.ok('sandbox_create', { services: ['db'] });
  assert.equal(a.services.length, 1);
  assert.equal(a.services[0].name, 'db');
  assert.equal(a.services[0].state, 'ready');
  assert.match(a.services[0].url, /^postgres:\/\/postgres@127\.0\.0\.1:5432\/app$/);
  const env = await k.sh(a.sandbox_id, 'echo "$DATABASE_URL|$PGHOST|$PGPORT|$PGUSER|$PGDATABASE|$KILN_SERVICE_DB_URL"');
  assert.equal(env.stdout.trim(), `${a.services[0].url}|127.0.0.1|5432|postgres|app|${a.services[0].url}`);
  const made = await k.sh(a.sandbox_id, "psql -v ON_ERROR_STOP=1 -c 'CREATE TABLE notes (body text)' -c \"INSERT INTO notes VALUES ('kept')\"");
  assert.equal(made.exit_code, 0, made.stderr);
  const listed = await k.ok('service_list', { sandbox_id: a.sandbox_id });
  assert.equal(listed.services[0].state, 'ready');
  assert.match(listed.services[0].trace_id, /^tr_/);
  const trace = await k.ok('trace_get', { trace_id: listed.services[0].trace_id });
  assert.equal(trace.trace.kind, 'service');
  await k.ok('sandbox_destroy', { sandbox_id: a.sandbox_id });

  const b = await k.ok('sandbox_create', { services: true });
  const read = await k.sh(b.sandbox_id, "psql -tA -c 'SELECT body FROM notes'");
  assert.equal(read.stdout.trim(), 'kept', read.stderr);
});

serverTest('postgres: setup runs once, verify runs get fresh clones that never see each other', ['postgres'], async (t) => {
  const files = {
    'kiln.json': {
      services: { db: { kind: 'postgres', setup: 'echo ran >> setup-runs.txt && psql -v ON_ERROR_STOP=1 -c "CREATE TABLE t (n int)" -c "INSERT INTO t VALUES (1)"' } },
      verify: [{ name: 'rows', services: ['db'], run: 'psql -v ON_ERROR_STOP=1 -c "INSERT INTO t VALUES (2)" && test "$(psql -tA -c "SELECT count(*) FROM t")" = 2' }],
    },
  };
  const k = await startKiln(t, { files });
  const a = await k.ok('sandbox_create', { services: ['db'] });
  await k.ok('sandbox_destroy', { sandbox_id: a.sandbox_id });
  const b = await k.ok('sandbox_create', { services: ['db'] });
  const count = await k.sh(b.sandbox_id, "psql -tA -c 'SELECT count(*) FROM t'");
  assert.equal(count.stdout.trim(), '1');
  await k.ok('sandbox_destroy', { sandbox_id: b.sandbox_id });
  assert.equal(fs.readFileSync(path.join(k.ws, 'setup-runs.txt'), 'utf8').trim().split('\n').length, 1,
    'setup ran again for the same development database');

  const v1 = await k.ok('verify', {});
  assert.equal(v1.status, 'pass', JSON.stringify(v1));
  assert.equal(v1.services[0].name, 'db');
  assert.match(v1.services[0].database, /^verify_[0-9a-f]{8}$/);
  const v2 = await k.ok('verify', {});
  assert.equal(v2.status, 'pass', 'the second verify saw the first one\'s row: ' + JSON.stringify(v2));
  assert.notEqual(v1.services[0].database, v2.services[0].database);
  // The development database never saw verify's rows.
  const c = await k.ok('sandbox_create', { services: ['db'] });
  const dev = await k.sh(c.sandbox_id, "psql -tA -c 'SELECT count(*) FROM t'");
  assert.equal(dev.stdout.trim(), '1');
});

serverTest('redis and a command service: ready, reachable from execs, listed, restarted', ['redis'], async (t) => {
  const server = [
    "const http = require('node:http');",
    "let n = 0;",
    "http.createServer((q, s) => { if (q.url === '/health') { s.end('ok'); return; } s.end('hello ' + (++n)); }).listen(3000, '127.0.0.1');",
  ].join('\n');
  const k = await startKiln(t, {
    files: {
      'kiln.json': { services: { cache: { kind: 'redis' }, api: { run: 'node server.js', port: 3000, ready: '/health' } } },
      'server.js': server,
    },
  });
  const sb = await k.ok('sandbox_create', { services: true });
  assert.deepEqual(sb.services.map((s) => [s.name, s.state]).sort(), [['api', 'ready'], ['cache', 'ready']]);
  const r = await k.sh(sb.sandbox_id, 'redis-cli -u "$REDIS_URL" set k v >/dev/null && redis-cli -u "$REDIS_URL" get k');
  assert.equal(r.stdout.trim(), 'v', r.stderr);
  // The service's own output is its trace's, readable while it runs.
  const cache = sb.services.find((s) => s.name === 'cache');
  const log = await k.ok('trace_output', { trace_id: cache.trace_id, stream: 'stdout' });
  assert.match(log.data, /Ready to accept connections/);
  const listed = await k.ok('trace_list', { kind: 'service' });
  assert.ok(listed.traces.some((t) => t.trace_id === cache.trace_id || t.id === cache.trace_id), JSON.stringify(listed.traces[0]));
  const h = await k.sh(sb.sandbox_id, `node -e "fetch(process.env.KILN_SERVICE_API_URL + '/x').then(r => r.text()).then(console.log)"`);
  assert.equal(h.stdout.trim(), 'hello 1', h.stderr);
  assert.ok(h.services.some((s) => s.name === 'api' && s.state === 'ready'));
  const restarted = await k.ok('service_restart', { sandbox_id: sb.sandbox_id, name: 'api' });
  assert.equal(restarted.service.state, 'ready');
  assert.equal(restarted.service.restarts, 1);
  const h2 = await k.sh(sb.sandbox_id, `node -e "fetch(process.env.KILN_SERVICE_API_URL + '/x').then(r => r.text()).then(console.log)"`);
  assert.equal(h2.stdout.trim(), 'hello 1', 'a restarted server starts over');
});

sandboxTest('a service that exits at once is a tool error naming it with its last log lines', async (t) => {
  const k = await startKiln(t, {
    files: { 'kiln.json': { services: { api: { run: 'echo "listening failed: EADDRNOTAVAIL" >&2; exit 7', port: 3000 } } } },
  });
  const r = await k.call('sandbox_create', { services: ['api'] });
  assert.equal(r.isError, true);
  const text = errorText(r);
  assert.match(text, /service api/);
  assert.match(text, /exited with code 7/);
  assert.match(text, /listening failed: EADDRNOTAVAIL/);
  const list = await k.ok('sandbox_list', {});
  assert.equal(list.sandboxes.length, 0, 'the half-started sandbox was left behind');
});

sandboxTest('a service that never becomes ready times out with a clear error', async (t) => {
  const k = await startKiln(t, {
    files: { 'kiln.json': { services: { api: { run: 'echo started; sleep 600', port: 3999, ready_timeout_s: 1.5 } } } },
  });
  const r = await k.call('sandbox_create', { services: ['api'] });
  assert.equal(r.isError, true);
  assert.match(errorText(r), /service api .*did not become ready within 1\.5 s/s);
  assert.match(errorText(r), /started/);
});

sandboxTest('a service that dies later shows failed in service_list and in the next exec', async (t) => {
  const k = await startKiln(t, {
    files: {
      'kiln.json': { services: { api: { run: "node -e \"require('net').createServer().listen(3100, '127.0.0.1')\"", port: 3100 } } },
    },
  });
  const sb = await k.ok('sandbox_create', { services: ['api'] });
  const pid = sb.services[0].pid;
  await k.sh(sb.sandbox_id, `pkill -f 'listen\\(3100' || kill ${pid}`);
  let state;
  for (let i = 0; i < 50 && state !== 'failed'; i++) {
    state = (await k.ok('service_list', { sandbox_id: sb.sandbox_id })).services[0].state;
    if (state !== 'failed') await sleep(100);
  }
  assert.equal(state, 'failed');
  const next = await k.sh(sb.sandbox_id, 'true');
  assert.equal(next.services[0].state, 'failed');
  assert.match(next.services_warning, /service api has failed/);
});

sandboxTest('unknown services, a kiln.json without them, and bad service configs are clear errors', async (t) => {
  const k = await startKiln(t, { files: { 'kiln.json': { services: { db: { kind: 'postgres' } } } } });
  const r = await k.call('sandbox_create', { services: ['nope'] });
  assert.equal(r.isError, true);
  assert.match(errorText(r), /no service named 'nope'.*db/);
  fs.writeFileSync(path.join(k.ws, 'kiln.json'), JSON.stringify({ services: { api: { run: 'x' } } }));
  const bad = await k.call('sandbox_create', { services: true });
  assert.equal(bad.isError, true);
  assert.match(errorText(bad), /\/services\/api.*port/);
  fs.writeFileSync(path.join(k.ws, 'kiln.json'), JSON.stringify({ services: { Bad: { kind: 'redis' } } }));
  const name = await k.call('sandbox_create', { services: true });
  assert.match(errorText(name), /\/services\/Bad.*lower-case/);
  fs.writeFileSync(path.join(k.ws, 'kiln.json'), JSON.stringify({ verify: [{ name: 'x', run: 'true', services: ['db'] }] }));
  const undeclared = await k.call('verify', {});
  assert.match(errorText(undeclared), /\/verify\/0\/services\/0.*no service named "db"/);
});

sandboxTest('a missing server binary says which Debian package to install', async (t) => {
  const k = await startKiln(t, {
    files: { 'kiln.json': { services: { db: { kind: 'postgres' }, cache: { kind: 'redis' } } } },
    env: { KILN_POSTGRES_BINDIR: '/usr/lib/no-such-postgres/bin', KILN_REDIS_SERVER: '/usr/bin/no-such-redis-server' },
  });
  const pg = await k.call('sandbox_create', { services: ['db'] });
  assert.equal(pg.isError, true);
  assert.match(errorText(pg), /service db: .*apt-get install postgresql/);
  const rd = await k.call('sandbox_create', { services: ['cache'] });
  assert.match(errorText(rd), /service cache: .*apt-get install redis-server/);
});

serverTest('a service is unreachable from the host and from another workspace\'s sandbox', ['redis'], async (t) => {
  const k = await startKiln(t, { files: { 'kiln.json': { services: { cache: { kind: 'redis', port: 16399 } } } } });
  const sb = await k.ok('sandbox_create', { services: true });
  const fromHost = spawnSync('bash', ['-c', 'exec 3<>/dev/tcp/127.0.0.1/16399'], { encoding: 'utf8' });
  assert.notEqual(fromHost.status, 0, 'the host reached the sandbox\'s redis');
  const other = await startKiln(t, { files: {} });
  const osb = await other.ok('sandbox_create', { network: 'loopback' });
  const r = await other.sh(osb.sandbox_id, 'bash -c "exec 3<>/dev/tcp/127.0.0.1/16399" 2>&1; echo rc=$?');
  assert.match(r.stdout, /rc=1/);
  const own = await k.sh(sb.sandbox_id, 'redis-cli -p 16399 ping');
  assert.equal(own.stdout.trim(), 'PONG');
});

serverTest('kill -9 of kiln mcp leaves no postgres or redis process, and the next start is clean', ['postgres', 'redis'], async (t) => {
  const files = { 'kiln.json': { services: { db: { kind: 'postgres' }, cache: { kind: 'redis' } } } };
  const k = await startKiln(t, { files, keep: true });
  let k2;
  // Hooks run in the order they were added: this one first closes the second server (it may still
  // be writing, e.g. the checkpoint after its last run), then removes what both shared.
  t.after(async () => {
    await k2?.close();
    fs.rmSync(k.ws, { recursive: true, force: true });
    fs.rmSync(k.state, { recursive: true, force: true });
  });
  const sb = await k.ok('sandbox_create', { services: true });
  await k.sh(sb.sandbox_id, "psql -c 'CREATE TABLE survived (x int)'");
  // Every host process below this kiln mcp (helpers, sandboxes, their services), found by parent links.
  const ps = spawnSync('ps', ['-eo', 'pid=,ppid=,args='], { encoding: 'utf8' }).stdout.split('\n')
    .map((l) => l.trim().match(/^(\d+)\s+(\d+)\s+(.*)$/)).filter(Boolean);
  const below = new Set([String(k.pid)]);
  for (let grew = true; grew;) {
    grew = false;
    for (const m of ps) if (below.has(m[2]) && !below.has(m[1])) { below.add(m[1]); grew = true; }
  }
  below.delete(String(k.pid));
  const mine = ps.filter((m) => below.has(m[1]));
  assert.ok(mine.some((m) => m[3].includes('/var/lib/kiln/services/db/pgdata')), 'no postmaster below the server');
  assert.ok(mine.some((m) => /^postgres: /.test(m[3])), 'no postgres backend processes below the server');
  assert.ok(mine.some((m) => /redis-server 127\.0\.0\.1:6379/.test(m[3])), 'no redis-server below the server');
  // A process is named by its pid and its start time (a pid can be reused), and one that has
  // exited counts as gone even while it waits to be reaped by whoever adopted it (a zombie holds
  // no memory, file, socket or lock).
  const stat = (pid) => {
    try {
      const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
      return { state: f[0], ppid: f[1], start: f[19] };
    } catch { return null; }
  };
  const procs = mine.map((m) => ({ pid: m[1], args: m[3], start: stat(m[1])?.start }));
  const alive = (p) => { const s = stat(p.pid); return s !== null && s.start === p.start && s.state !== 'Z'; };
  process.kill(k.pid, 'SIGKILL');
  // The kernel kills the tree at once (death signals, then the pid namespace's end); the bound is
  // only there so a leak fails instead of hanging.
  let left = procs;
  const killed = Date.now();
  for (let i = 0; i < 300 && left.length; i++) {
    left = procs.filter(alive);
    if (left.length) await sleep(100);
  }
  t.diagnostic(`${procs.length} processes below the server; ${left.length} left after ${Date.now() - killed} ms`);
  const describe = (p) => {
    const s = stat(p.pid);
    let wchan = '';
    try { wchan = fs.readFileSync(`/proc/${p.pid}/wchan`, 'utf8'); } catch {}
    return `${p.pid} state=${s?.state} ppid=${s?.ppid} wchan=${wchan} ${p.args}`;
  };
  assert.deepEqual(left.map(describe), [], 'service processes outlived the server');
  // The killed server itself holds the data folder's lock until its exit has closed its files
  // (tearing down its memory comes first); its children can be gone before that. A zombie has
  // closed them.
  for (let i = 0; i < 300; i++) {
    const s = stat(k.pid);
    if (s === null || s.state === 'Z') break;
    await sleep(20);
  }
  // A stale postmaster.pid does not stop the next start, and the data is there.
  k2 = await startKiln(t, { ws: k.ws, state: k.state, keep: true });
  const sb2 = await k2.ok('sandbox_create', { services: ['db'] });
  const r = await k2.sh(sb2.sandbox_id, "psql -tA -c \"SELECT count(*) FROM pg_tables WHERE tablename = 'survived'\"");
  assert.equal(r.stdout.trim(), '1');
});

serverTest('a second development sandbox of the same workspace is refused while the first runs the database', ['postgres'], async (t) => {
  const k = await startKiln(t, { files: { 'kiln.json': PG } });
  const a = await k.ok('sandbox_create', { services: ['db'] });
  const b = await k.call('sandbox_create', { services: ['db'] });
  assert.equal(b.isError, true);
  assert.match(errorText(b), new RegExp(`already runs in sandbox ${a.sandbox_id}`));
  await k.ok('sandbox_destroy', { sandbox_id: a.sandbox_id });
  await k.ok('sandbox_create', { services: ['db'] });
});

sandboxTest('limits apply to services: a memory-hungry service is stopped with memory_limit', async (t) => {
  // Listens, then fills memory page by page (touched, so it is resident) until something stops it.
  const hog = "python3 -c \"import socket, time\ns = socket.socket(); s.bind(('127.0.0.1', 3200)); s.listen()\na = []\nwhile True:\n  a.append(b'x' * (16 << 20)); time.sleep(0.01)\"";
  const k = await startKiln(t, { files: { 'kiln.json': { services: { hog: { run: hog, port: 3200 } } } } });
  const sb = await k.call('sandbox_create', { services: ['hog'], limits: { memory_mb: 256 } });
  let state, error;
  if (sb.isError) {
    ({ state, error } = { state: 'failed', error: errorText(sb) });
  } else {
    const id = structured(sb).sandbox_id;
    for (let i = 0; i < 100 && state !== 'failed'; i++) {
      const s = (await k.ok('service_list', { sandbox_id: id })).services[0];
      ({ state, error } = s);
      if (state !== 'failed') await sleep(100);
    }
  }
  assert.equal(state, 'failed');
  // A cgroup stops the whole tree (memory_limit); without one (a plain user here) memory_mb is
  // RLIMIT_AS per process, so the allocation fails and the service exits.
  const by = sb.isError ? '' : structured(sb).isolation.limits.memory_mb.enforced_by;
  if (/cgroup/.test(by)) assert.match(error, /memory_limit/);
  else assert.match(error, /memory_limit|exited with code 1/, `enforced by ${by}`);
});

serverTest("a project's server whose ready path needs the database is waited for after postgres and its setup", ['postgres'], async (t) => {
  // "api" sorts before "db": the server is started first, and its /health answers 200 only once
  // the table `setup` makes is there, so it can only become ready after db's setup ran.
  const server = [
    'import http.server, subprocess',
    'class H(http.server.BaseHTTPRequestHandler):',
    '    def do_GET(self):',
    '        ok = subprocess.run(["psql", "-tA", "-c", "SELECT n FROM t"], capture_output=True).returncode == 0',
    '        self.send_response(200 if ok else 503); self.end_headers()',
    "http.server.HTTPServer(('127.0.0.1', 3300), H).serve_forever()",
  ].join('\n');
  const k = await startKiln(t, {
    files: {
      'server.py': server,
      'kiln.json': {
        services: {
          api: { run: 'python3 server.py', port: 3300, ready: '/health', ready_timeout_s: 20 },
          db: { kind: 'postgres', setup: 'psql -v ON_ERROR_STOP=1 -c "CREATE TABLE t (n int)"' },
        },
      },
    },
  });
  const sb = await k.ok('sandbox_create', { services: true });
  assert.deepEqual(sb.services.map((s) => [s.name, s.state]).sort(), [['api', 'ready'], ['db', 'ready']]);
});

sandboxTest('a chatty service is not killed at output_bytes: the rest of its output is dropped and counted', async (t) => {
  const run = "head -c 300000 /dev/zero | tr '\\0' x; exec python3 -m http.server 3300 --bind 127.0.0.1";
  const k = await startKiln(t, { files: { 'kiln.json': { services: { chatty: { run, port: 3300 } } } } });
  const sb = await k.ok('sandbox_create', { services: ['chatty'], limits: { output_bytes: 100000 } });
  assert.equal(sb.services[0].state, 'ready');
  await sleep(300);
  const listed = await k.ok('service_list', { sandbox_id: sb.sandbox_id });
  assert.equal(listed.services[0].state, 'ready', JSON.stringify(listed.services[0]));
  const page = await k.ok('process_output', { run_id: listed.services[0].run_id, stream: 'stdout', offset: 0, limit: 1000 });
  assert.equal(page.total_bytes, 100000, 'the first output_bytes are kept');
  assert.equal(page.running, true);
});

serverTest('idle reaping takes the services with the sandbox and lets their data go', ['postgres'], async (t) => {
  // A sandbox whose only activity is its services is reaped after twice the idle time.
  const state = freshDir('kiln-svc-state-');
  const ws = makeWs({ 'kiln.json': PG });
  const k = await startKiln(t, { ws, state, args: ['--sandbox-idle-s', '3'] });
  const sb = await k.ok('sandbox_create', { services: ['db'] });
  const pid = (await k.ok('service_list', { sandbox_id: sb.sandbox_id })).services[0].pid;
  assert.ok(pid > 0);
  let live = true;
  for (let i = 0; i < 100 && live; i++) {
    await sleep(200);
    live = (await k.ok('sandbox_list', {})).sandboxes.some((s) => s.sandbox_id === sb.sandbox_id);
  }
  assert.equal(live, false, 'the idle sandbox was not reaped');
  const list = await k.call('service_list', { sandbox_id: sb.sandbox_id });
  assert.equal(list.isError, true);
  // Its cluster is free again: a new sandbox gets the development database.
  const again = await k.ok('sandbox_create', { services: ['db'] });
  assert.equal(again.services[0].state, 'ready');
});
