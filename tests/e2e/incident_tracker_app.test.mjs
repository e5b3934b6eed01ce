// examples/incident-tracker (the worked example of a Kiln app, TOOLS.md "Apps") on its own, without
// Kiln: a throwaway PostgreSQL cluster, the migration, the web process under a base path and the
// digest job, given the environment Kiln gives an app (DATABASE_URL, PORT, KILN_BASE_PATH,
// KILN_DATA_DIR, X-Kiln-User). Without PostgreSQL's binaries the tests say so and count as not run
// (failed under KILN_REQUIRE_SANDBOX=1, like the services tests).
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { request } from '../lib/http.mjs';
import { repoRoot, sleep, tempDir } from '../lib/kiln.mjs';
import { freePort, postgresBindir, startCluster } from '../lib/pg_cluster.mjs';
import { sandboxRequired } from '../lib/sandbox_probe.mjs';

const app = path.join(repoRoot, 'examples', 'incident-tracker');
const BASE = '/a/incidents/';
const bindir = postgresBindir();
const missing = bindir ? null : 'postgres not installed (Debian package postgresql; make test installs it)';
if (missing) console.log(`# ${sandboxRequired ? 'FAIL' : 'SKIP'} incident tracker app: ${missing}`);

// node:test's test(), or one that is skipped (or, when required, fails) with the reason.
function pgTest(name, fn) {
  if (!missing) return test(name, fn);
  if (sandboxRequired) return test(name, () => assert.fail(missing));
  return test(name, { skip: missing }, () => {});
}

let cluster, env, server, serverLog = '';
const node = (script, extra = {}) => spawnSync(process.execPath, [script], { cwd: app, env: { ...env, ...extra }, encoding: 'utf8' });
const get = (target, headers = {}) => request(`http://127.0.0.1:${env.PORT}`, target, { headers });
const post = (target, body, type, headers = {}) => request(`http://127.0.0.1:${env.PORT}`, target,
  { method: 'POST', body, headers: { 'content-type': type, ...headers } });

before(async () => {
  if (missing) return;
  const deps = spawnSync(path.join(repoRoot, 'scripts', 'npm-deps.sh'), [app], { encoding: 'utf8' });
  assert.equal(deps.status, 0, `npm-deps.sh ${app}: ${deps.stdout}${deps.stderr}`);
  const dir = tempDir('kiln-incidents-');
  cluster = await startCluster(bindir, dir);
  env = {
    PATH: process.env.PATH,
    DATABASE_URL: cluster.url,
    PORT: String(await freePort()),
    KILN_BASE_PATH: BASE,
    KILN_DATA_DIR: path.join(dir, 'data'),
  };
});

after(async () => {
  if (server) {
    server.kill('SIGTERM');
    await new Promise((r) => (server.exitCode !== null ? r() : server.on('exit', r)));
  }
  cluster?.stop();
});

pgTest('the migration makes both tables and may run again', () => {
  for (let i = 0; i < 2; i++) {
    const r = node('migrate.js');
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /tables incidents and digests/);
  }
});

pgTest('the server answers /health on 127.0.0.1:$PORT, and its page builds links from KILN_BASE_PATH', async () => {
  server = spawn(process.execPath, ['server.js'], { cwd: app, env, stdio: ['ignore', 'pipe', 'pipe'] });
  server.stdout.on('data', (c) => { serverLog += c; });
  server.stderr.on('data', (c) => { serverLog += c; });
  let health;
  for (let i = 0; i < 200 && health?.status !== 200; i++) {
    health = await get('/health').catch(() => undefined);
    if (health?.status !== 200) await sleep(50);
  }
  assert.equal(health?.status, 200, `no /health: ${serverLog}`);
  const page = await get('/', { 'x-kiln-user': 'alice' });
  assert.equal(page.status, 200);
  assert.match(page.headers['content-type'], /^text\/html/);
  assert.match(page.text, /<form method="post" action="\/a\/incidents\/incidents">/);
  assert.match(page.text, /href="\/a\/incidents\/api\/incidents"/);
  assert.match(page.text, /No incidents yet/);
});

const NASTY = '<script>alert("x")</script> & db down';

pgTest('a form post is reported by X-Kiln-User, redirects to the base path, and is listed escaped', async () => {
  const r = await post('/incidents', new URLSearchParams({ title: NASTY, severity: 'high' }).toString(),
    'application/x-www-form-urlencoded', { 'x-kiln-user': 'alice' });
  assert.equal(r.status, 303, r.text);
  assert.equal(r.headers.location, BASE);
  const page = await get('/', { 'x-kiln-user': 'alice' });
  assert.ok(!page.text.includes('<script>'), 'the title is not markup');
  assert.ok(page.text.includes('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; db down'), page.text);
  assert.match(page.text, /<td class="sev-high">high<\/td><td>alice<\/td>/);
});

pgTest('JSON: create, list, and bad input answered with 400', async () => {
  const made = await post('/incidents', JSON.stringify({ title: 'disk full', severity: 'critical' }), 'application/json', { 'x-kiln-user': 'bob' });
  assert.equal(made.status, 201, made.text);
  assert.deepEqual((({ title, severity, reported_by }) => ({ title, severity, reported_by }))(JSON.parse(made.text)),
    { title: 'disk full', severity: 'critical', reported_by: 'bob' });
  const bad = await post('/incidents', JSON.stringify({ title: 'x', severity: 'apocalyptic' }), 'application/json');
  assert.equal(bad.status, 400);
  assert.match(JSON.parse(bad.text).error, /severity must be one of/);
  assert.equal((await post('/incidents', '{', 'application/json')).status, 400);
  assert.equal((await post('/incidents', 'title=', 'application/x-www-form-urlencoded')).status, 400);
  const list = JSON.parse((await get('/api/incidents')).text);
  assert.deepEqual(list.map((i) => [i.title, i.reported_by]), [['disk full', 'bob'], [NASTY, 'alice']]);
  assert.equal((await get('/nowhere')).status, 404);
});

pgTest('the digest job writes the last 24 h into the digests table and $KILN_DATA_DIR/digests/<date>.txt', async () => {
  const r = node('jobs/digest.js');
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stdout.trim().split('\n');
  assert.equal(lines.length, 1, r.stdout);
  const day = lines[0].match(/^digest (\d{4}-\d\d-\d\d): 2 incident\(s\) in the last 24 h/)?.[1];
  assert.ok(day, lines[0]);
  const text = fs.readFileSync(path.join(env.KILN_DATA_DIR, 'digests', `${day}.txt`), 'utf8');
  assert.match(text, /: 2\n- \[high\] <script>.*\n- \[critical\] disk full\n$/);
  const digests = JSON.parse((await get('/api/digests')).text);
  assert.equal(digests.length, 1);
  assert.equal(digests[0].day, day);
  assert.equal(digests[0].count, 2);
  assert.deepEqual(digests[0].titles, [NASTY, 'disk full']);
});
