// The app side of the MCP tools (issue 17) through the official SDK client: the four app tools and
// the new publish/unpublish arguments in tools/list, the tool errors an agent gets for the wrong
// input (no kiln.json app section, a file as an app, a static artifact given to an app tool,
// delete_data with one version), the control calls each tool makes against a stand-in kiln serve
// (and what a failing one leaves), app_export's copy, and, with kiln serve's supervisor, an app's whole round: publish
// with app: true answers at its URL, app_status, app_restart, schedule_run, app_export into the
// workspace, a static version on top stops it, unpublish keeps its data unless asked.
// Every test has its own KILN_HOME and stops the kiln serve it started when it ends.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import http from 'node:http';
import { test } from 'node:test';

import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';

import { connectClient, errorText, kilnBin, kilnEnv, tempDir } from '../lib/kiln.mjs';
import { readServeInfo, stopProcess } from '../lib/http.mjs';

const APP_TOOLS = ['app_status', 'app_restart', 'schedule_run', 'app_export'];
const validator = new AjvJsonSchemaValidator();

function writeFiles(root, files) {
  for (const [rel, content] of Object.entries(files)) {
    const p = path.join(root, rel);
    fs.mkdirSync(path.dirname(p), { recursive: true });
    fs.writeFileSync(p, content);
  }
}

// `kiln mcp --workspace WS` on a workspace holding `files`, with ok/err helpers that check results
// against the listed outputSchema; every kiln serve seen for the state directory is stopped after.
async function startKiln(t, files, { home = tempDir('kiln-apps-home-') } = {}) {
  const ws = tempDir('kiln-apps-ws-');
  writeFiles(ws, files);
  const s = await connectClient({ args: ['--workspace', ws], home, env: { KILN_SERVE_LISTEN: '127.0.0.1:0' },
    name: 'kiln-apps-e2e' });
  const tools = Object.fromEntries((await s.client.listTools()).tools.map((x) => [x.name, x]));
  const daemons = new Set();
  const call = async (name, args) => {
    const r = await s.client.callTool({ name, arguments: args }, undefined, { timeout: 300000 });
    const info = readServeInfo(home);
    if (info?.pid) daemons.add(info.pid);
    return r;
  };
  const k = {
    home, ws, tools, call,
    async ok(name, args) {
      const r = await call(name, args);
      if (r.isError) assert.fail(`${name} ${JSON.stringify(args)} failed: ${errorText(r)}`);
      const v = validator.getValidator(tools[name].outputSchema)(r.structuredContent);
      assert.ok(v.valid, `${name}: structuredContent does not match the outputSchema: ${v.errorMessage}`);
      return r.structuredContent;
    },
    async err(name, args) {
      const r = await call(name, args);
      assert.equal(r.isError, true, `${name} ${JSON.stringify(args)} should be a tool error, got ${JSON.stringify(r.structuredContent)}`);
      return errorText(r);
    },
  };
  t.after(async () => {
    await s.close().catch(() => {});
    const info = readServeInfo(home);
    if (info?.pid) daemons.add(info.pid);
    daemons.delete(process.pid);  // a stand-in kiln serve (fakeServe) is this very process
    for (const pid of daemons) await stopProcess(pid);
  });
  return k;
}

const SITE = { 'site/index.html': '<h1>static</h1>\n', 'notes.txt': 'a file\n' };

test('tools/list: the app tools and the new publish and unpublish arguments', async (t) => {
  const k = await startKiln(t, SITE);
  const want = { app_status: ['artifact'], app_restart: ['artifact'], schedule_run: ['artifact', 'name'],
    app_export: ['artifact', 'path'] };
  for (const name of APP_TOOLS) {
    const tool = k.tools[name];
    assert.ok(tool, `${name} listed`);
    assert.deepEqual([...tool.inputSchema.required].sort(), [...want[name]].sort(), `${name} required`);
    assert.equal(tool.inputSchema.additionalProperties, false, name);
    assert.equal(tool.outputSchema?.type, 'object', name);
    assert.ok(tool.description.length > 80, `${name}: a description an agent can act on`);
    for (const a of ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'])
      assert.equal(typeof tool.annotations?.[a], 'boolean', `${name}: ${a}`);
  }
  assert.equal(k.tools.app_status.annotations.readOnlyHint, true, 'app_status only reads');
  assert.equal(k.tools.app_restart.annotations.readOnlyHint, false);
  assert.equal(k.tools.publish.inputSchema.properties.app?.type, 'boolean', 'publish takes app');
  assert.equal(k.tools.unpublish.inputSchema.properties.delete_data?.type, 'boolean', 'unpublish takes delete_data');
  assert.ok(k.tools.publish.outputSchema.properties.app, 'publish returns the app state');
  assert.ok(k.tools.publish_list.outputSchema.properties.artifacts.items.properties.app, 'publish_list shows app state');
  assert.match(k.tools.unpublish.description, /delete_data/);
});

test('publish app: true needs kiln.json\'s app section, and only a folder can be an app', async (t) => {
  const k = await startKiln(t, SITE);
  let text = await k.err('publish', { path: 'site', app: true });
  assert.match(text, /"app": \{"run": "node server\.js"\}/, 'says what to add');
  assert.match(text, /kiln\.json/);

  writeFiles(k.ws, { 'kiln.json': JSON.stringify({ verify: [] }) });
  text = await k.err('publish', { path: 'site', app: true });
  assert.match(text, /"app": \{"run": "node server\.js"\}/);

  writeFiles(k.ws, { 'kiln.json': JSON.stringify({ app: { run: 'node server.js', services: ['db'] } }) });
  text = await k.err('publish', { path: 'site', app: true });
  assert.match(text, /no service named "db"/, 'a broken kiln.json is named, not skipped');

  writeFiles(k.ws, { 'kiln.json': JSON.stringify({ app: { run: 'node server.js' } }) });
  text = await k.err('publish', { path: 'notes.txt', app: true });
  assert.match(text, /only a folder can be published as an app/);

  const list = await k.ok('publish_list', {});
  assert.deepEqual(list.artifacts, [], 'nothing was published');
});

test('app tools refuse a static artifact and say how to make it an app; delete_data needs the whole artifact', async (t) => {
  const k = await startKiln(t, SITE);
  await k.ok('publish', { path: 'site', name: 'plain' });
  for (const [name, args] of [['app_status', {}], ['app_restart', {}], ['schedule_run', { name: 'digest' }],
    ['app_export', { path: 'export' }]]) {
    const text = await k.err(name, { artifact: 'plain', ...args });
    assert.match(text, /plain is not an app/, name);
    assert.match(text, /publish it with app: true/, name);
  }
  assert.equal(fs.existsSync(path.join(k.ws, 'export')), false, 'app_export wrote nothing');
  const missing = await k.err('app_status', { artifact: 'nosuch' });
  assert.match(missing, /no artifact named nosuch/);

  // A static artifact's listing has no app state, and removing it says nothing about data.
  const list = await k.ok('publish_list', {});
  assert.equal(list.artifacts[0].app, undefined);
  const text = await k.err('unpublish', { artifact: 'plain', version: 1, delete_data: true });
  assert.match(text, /leave out version/);
  const removed = await k.ok('unpublish', { artifact: 'plain' });
  assert.deepEqual(removed.removed, [1]);
  assert.equal(removed.app, undefined);
});

test('kiln publish --app and kiln artifacts rm --delete-data refuse what the tools refuse', async () => {
  const home = tempDir('kiln-apps-cli-home-');
  const ws = tempDir('kiln-apps-cli-ws-');
  writeFiles(ws, SITE);
  const kiln = (...args) => spawnSync(kilnBin(), args, { cwd: ws, env: kilnEnv(home, { KILN_SERVE_LISTEN: '127.0.0.1:0' }),
    encoding: 'utf8' });
  // A wrong argument exits 2 (usage), as every invalid_argument of the CLI does.
  let r = kiln('publish', 'site', '--app');
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /"app": \{"run": "node server\.js"\}/);
  r = kiln('publish', 'site', '--name', 'plain', '--json');
  assert.equal(r.status, 0, r.stderr);
  try {
    assert.equal(JSON.parse(r.stdout).app, undefined, 'a static publish has no app state');
    r = kiln('artifacts', 'rm', 'plain', '--version', '1', '--delete-data');
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /leave out version/);
    r = kiln('artifacts', 'rm', 'plain');
    assert.equal(r.status, 0, r.stderr);
  } finally {
    const pid = readServeInfo(home)?.pid;
    if (pid) await stopProcess(pid);
  }
});

// Stands in for kiln serve in `home`: answers /healthz as the state directory's server (serve.json
// names this process) and POST /_kiln/apps with `answer(request)` -> [status, body], recording
// each control request with the bearer token it came with.
async function fakeServe(t, home, answer) {
  const calls = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      const reply = (status, json) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(json));
      };
      if (req.url === '/healthz') return reply(200, { service: 'kiln-serve', state_dir: home });
      if (req.method !== 'POST' || req.url !== '/_kiln/apps') return reply(404, { error: 'not here' });
      const request = JSON.parse(body);
      calls.push({ request, auth: req.headers.authorization, type: req.headers['content-type'] });
      const [status, json] = answer(request);
      reply(status, json);
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${server.address().port}`;
  fs.writeFileSync(path.join(home, 'serve.json'), JSON.stringify({ pid: process.pid, url, listen: url.slice(7),
    started_at: new Date().toISOString(), state_dir: home }));
  t.after(() => new Promise((r) => server.close(r)));
  return { calls, url, ops: () => calls.map((c) => c.request.op) };
}

const running = (artifact, version = 1) => ({ artifact, state: 'running', version, url: `/a/${artifact}/`,
  started_at: '2026-12-02T05:00:00Z', last_request_at: null, restarts: 0,
  schedules: [{ name: 'digest', cron: '0 8 * * *', next_run_at: '2026-12-03T08:00:00Z', last_run: null }] });

const APP_WS = {
  'app/server.js': 'require("http").createServer((q, s) => s.end("hi")).listen(process.env.PORT);\n',
  'kiln.json': JSON.stringify({ services: { db: { kind: 'postgres' } },
    app: { run: 'node server.js', services: ['db'], schedules: [{ name: 'digest', cron: '0 8 * * *', run: 'node j.js' }] } }),
};

test('against a stand-in kiln serve: deploy, status, list, restart, schedules and unpublish make the calls the contract says', async (t) => {
  const home = tempDir('kiln-apps-home-');
  let deploy = (req) => [200, running(req.artifact)];
  let list = () => [200, { apps: [running('tracker')] }];
  const fake = await fakeServe(t, home, (req) => {
    if (req.op === 'deploy') return deploy(req);
    if (req.op === 'list') return list();
    if (req.op === 'status' || req.op === 'restart') return [200, running(req.artifact)];
    if (req.op === 'schedule_run') return [200, { trace_id: 'tr_1', status: 'pass', exit_code: 0, duration_ms: 12, at: 'now' }];
    if (req.op === 'stop') return [200, { stopped: true, data_deleted: req.delete_data, data_dir: req.delete_data ? null : '/d' }];
    return [400, { error: `unknown op ${req.op}` }];
  });
  const k = await startKiln(t, APP_WS, { home });
  const pub = await k.ok('publish', { path: 'app', name: 'tracker', app: true });
  assert.equal(pub.app.state, 'running');
  assert.deepEqual(fake.calls[0].request, { op: 'deploy', artifact: 'tracker' });
  const token = fs.readFileSync(path.join(home, 'mcp-token'), 'utf8').trim();
  assert.equal(fake.calls[0].auth, `Bearer ${token}`, 'the state directory\'s own token');
  assert.equal(fake.calls[0].type, 'application/json');

  // A failed start is data: the version exists, the state and error are in the result.
  deploy = (req) => [200, { ...running(req.artifact, 2), state: 'crashed', last_error: 'exited with status 1' }];
  const v2 = await k.ok('publish', { path: 'app', name: 'tracker', app: true });
  assert.equal(v2.version, 2);
  assert.equal(v2.app.state, 'crashed');
  assert.equal(v2.app.last_error, 'exited with status 1');
  deploy = () => [500, { error: 'supervisor is down' }];
  const v3 = await k.ok('publish', { path: 'app', name: 'tracker', app: true });
  assert.equal(v3.version, 3);
  assert.deepEqual(v3.app, { state: 'unknown', error: 'supervisor is down' });
  deploy = (req) => [200, running(req.artifact)];

  assert.equal((await k.ok('app_status', { artifact: 'tracker' })).state, 'running');
  assert.equal((await k.ok('app_restart', { artifact: 'tracker' })).state, 'running');
  const run = await k.ok('schedule_run', { artifact: 'tracker', name: 'digest' });
  assert.equal(run.status, 'pass');
  assert.deepEqual(fake.calls.at(-1).request, { op: 'schedule_run', artifact: 'tracker', name: 'digest' });
  const before = fake.calls.length;
  assert.match(await k.err('schedule_run', { artifact: 'tracker', name: 'nightly' }), /no schedule nightly; its schedules: digest/);
  assert.equal(fake.calls.length, before, 'an unknown schedule is refused before asking kiln serve');

  let listed = await k.ok('publish_list', {});
  assert.equal(listed.artifacts[0].app.state, 'running');
  assert.equal((await k.ok('workspace_info', {})).artifacts[0].app.state, 'running');
  list = () => [500, { error: 'busy' }];
  listed = await k.ok('publish_list', {});
  assert.deepEqual(listed.artifacts[0].app, { state: 'unknown', error: 'busy' }, 'the listing stands, the state is unknown');

  // The version the app runs goes: stop, remove, deploy on the latest left; data never deleted.
  fake.calls.length = 0;
  const one = await k.ok('unpublish', { artifact: 'tracker', version: 3 });
  assert.deepEqual(fake.ops(), ['stop', 'deploy']);
  assert.equal(fake.calls[0].request.delete_data, false);
  assert.equal(one.app.data_kept, true);
  assert.equal(one.app.state, 'running');
  // An older version goes without stopping anything.
  fake.calls.length = 0;
  await k.ok('unpublish', { artifact: 'tracker', version: 1 });
  assert.deepEqual(fake.ops(), ['deploy']);
  // A static version on top stops the app, keeping its data.
  fake.calls.length = 0;
  fs.writeFileSync(path.join(k.ws, 'app/index.html'), '<p>static</p>');
  const stat = await k.ok('publish', { path: 'app', name: 'tracker' });
  assert.deepEqual(fake.ops(), ['stop']);
  assert.equal(stat.app.state, 'stopped');
  assert.equal(fake.calls[0].request.delete_data, false);
  assert.match(await k.err('app_status', { artifact: 'tracker' }), /not an app/);
  // The whole artifact with its data.
  fake.calls.length = 0;
  const gone = await k.ok('unpublish', { artifact: 'tracker', delete_data: true });
  assert.deepEqual(fake.calls.map((c) => c.request), [{ op: 'stop', artifact: 'tracker', delete_data: true }]);
  assert.equal(gone.app.data_deleted, true);
  assert.equal(gone.app.data_kept, false);
  assert.equal(gone.artifact_removed, true);
});

test('against a stand-in kiln serve: the server\'s errors reach the agent, and a failed stop keeps everything', async (t) => {
  const home = tempDir('kiln-apps-home-');
  const stop = () => [500, { error: 'cannot stop' }];
  await fakeServe(t, home, (req) => {
    if (req.op === 'deploy') return [200, running(req.artifact)];
    if (req.op === 'status') return [404, { error: `artifact ${req.artifact} is not an app; publish it with app: true` }];
    if (req.op === 'stop') return stop();
    return [400, { error: 'bad op' }];
  });
  const k = await startKiln(t, APP_WS, { home });
  await k.ok('publish', { path: 'app', name: 'tracker', app: true });
  assert.match(await k.err('app_status', { artifact: 'tracker' }), /tracker is not an app; publish it with app: true/);
  assert.match(await k.err('app_restart', { artifact: 'tracker' }), /bad op/);
  // Data deletion that kiln serve could not do removes nothing.
  assert.match(await k.err('unpublish', { artifact: 'tracker', delete_data: true }), /nothing was removed.*cannot stop/);
  assert.equal((await k.ok('publish_list', {})).artifacts.length, 1);
  // Without delete_data the artifact goes; the result says the stop failed and the data is kept.
  const gone = await k.ok('unpublish', { artifact: 'tracker' });
  assert.equal(gone.artifact_removed, true);
  assert.equal(gone.app.data_kept, true);
  assert.equal(gone.app.error, 'cannot stop');
});

test('app_export writes the dumps and a copy of the data folder, skipping symlinks, and never overwrites unasked', async (t) => {
  const home = tempDir('kiln-apps-home-');
  const src = tempDir('kiln-apps-export-src-');
  writeFiles(src, { 'db.sql': 'CREATE TABLE t();\n', 'data/a.txt': 'A', 'data/sub/b.bin': Buffer.from([0, 1, 2]) });
  fs.mkdirSync(path.join(src, 'data/empty'));
  fs.symlinkSync('/etc/passwd', path.join(src, 'data/passwd'));
  fs.symlinkSync('/etc', path.join(src, 'data/sub/etc'));
  await fakeServe(t, home, (req) => {
    if (req.op === 'deploy') return [200, running(req.artifact)];
    if (req.op === 'export') return [200, { files: [{ name: 'db.sql', path: path.join(src, 'db.sql') }], data_dir: path.join(src, 'data') }];
    return [400, { error: 'bad op' }];
  });
  const k = await startKiln(t, APP_WS, { home });
  await k.ok('publish', { path: 'app', name: 'tracker', app: true });
  const out = await k.ok('app_export', { artifact: 'tracker', path: 'exports/today' });
  assert.equal(out.path, 'exports/today');
  assert.deepEqual(out.files, [{ name: 'db.sql', path: 'exports/today/db.sql', bytes: 18 }]);
  assert.equal(out.data.files, 2);
  assert.equal(out.data.skipped_symlinks, 2);
  const dest = path.join(k.ws, 'exports/today');
  assert.equal(fs.readFileSync(path.join(dest, 'db.sql'), 'utf8'), 'CREATE TABLE t();\n');
  assert.equal(fs.readFileSync(path.join(dest, 'data/a.txt'), 'utf8'), 'A');
  assert.deepEqual([...fs.readFileSync(path.join(dest, 'data/sub/b.bin'))], [0, 1, 2]);
  assert.ok(fs.statSync(path.join(dest, 'data/empty')).isDirectory());
  assert.equal(fs.existsSync(path.join(dest, 'data/passwd')), false, 'a link is never followed nor copied');
  assert.equal(fs.existsSync(path.join(dest, 'data/sub/etc')), false);

  fs.writeFileSync(path.join(dest, 'db.sql'), 'mine');
  assert.match(await k.err('app_export', { artifact: 'tracker', path: 'exports/today' }), /nothing was written.*overwrite: true/);
  assert.equal(fs.readFileSync(path.join(dest, 'db.sql'), 'utf8'), 'mine');
  await k.ok('app_export', { artifact: 'tracker', path: 'exports/today', overwrite: true });
  assert.equal(fs.readFileSync(path.join(dest, 'db.sql'), 'utf8'), 'CREATE TABLE t();\n');

  // Confined to the workspace: a path out of it, and a link in it that leads out, are refused.
  assert.match(await k.err('app_export', { artifact: 'tracker', path: '../out' }), /\.\.\/out|outside|leaves/);
  const outside = tempDir('kiln-apps-outside-');
  fs.symlinkSync(outside, path.join(k.ws, 'escape'));
  await k.err('app_export', { artifact: 'tracker', path: 'escape/x' });
  assert.deepEqual(fs.readdirSync(outside), [], 'nothing was written through the link');
});

// Needs kiln serve's app supervisor and its control API (POST /_kiln/apps).
test('an app: publish runs it at its URL, the app tools drive it, unpublish keeps its data', async (t) => {
  const server = `
const http = require('http'); const fs = require('fs'); const path = require('path');
const file = path.join(process.env.KILN_DATA_DIR, 'hits.txt');
http.createServer((req, res) => {
  fs.appendFileSync(file, req.url + '\\n');
  res.setHeader('content-type', 'text/plain');
  res.end('app v' + require('./version.json').v + ' ' + (req.headers['x-kiln-user'] || '-'));
}).listen(Number(process.env.PORT), '127.0.0.1');
`;
  const k = await startKiln(t, {
    'app/server.js': server,
    'app/version.json': '{"v": 1}',
    'app/job.js': "require('fs').writeFileSync(require('path').join(process.env.KILN_DATA_DIR, 'digest.txt'), 'digest');",
    'kiln.json': JSON.stringify({ app: { run: 'node server.js', idle_s: 0,
      schedules: [{ name: 'digest', cron: '0 8 * * *', run: 'node job.js' }] } }),
  });
  const pub = await k.ok('publish', { path: 'app', name: 'tracker', app: true });
  assert.equal(pub.app?.state, 'running', `deployed: ${JSON.stringify(pub.app)}`);
  assert.equal(pub.app.version, 1);
  let res = await fetch(pub.url);
  assert.equal(res.status, 200);
  assert.equal(await res.text(), 'app v1 public');

  const status = await k.ok('app_status', { artifact: 'tracker' });
  assert.equal(status.state, 'running');
  assert.equal(status.schedules[0].name, 'digest');
  const listed = await k.ok('publish_list', {});
  assert.equal(listed.artifacts[0].app.state, 'running');
  const info = await k.ok('workspace_info', {});
  assert.equal(info.artifacts[0].app.state, 'running');

  const restarted = await k.ok('app_restart', { artifact: 'tracker' });
  assert.equal(restarted.state, 'running');
  const run = await k.ok('schedule_run', { artifact: 'tracker', name: 'digest' });
  assert.equal(run.status, 'pass', JSON.stringify(run));
  assert.match(await k.err('schedule_run', { artifact: 'tracker', name: 'nightly' }), /its schedules: digest/);

  // A new version runs on the new files with the same data.
  writeFiles(k.ws, { 'app/version.json': '{"v": 2}' });
  const v2 = await k.ok('publish', { path: 'app', name: 'tracker', app: true });
  assert.equal(v2.app.state, 'running');
  res = await fetch(v2.url);
  assert.equal(await res.text(), 'app v2 public');

  const exported = await k.ok('app_export', { artifact: 'tracker', path: 'export' });
  assert.equal(exported.path, 'export');
  assert.equal(fs.readFileSync(path.join(k.ws, 'export/data/digest.txt'), 'utf8'), 'digest');
  assert.match(fs.readFileSync(path.join(k.ws, 'export/data/hits.txt'), 'utf8'), /^\//m, 'requests of v1 and v2 in one data folder');
  assert.match(await k.err('app_export', { artifact: 'tracker', path: 'export' }), /overwrite: true/);
  await k.ok('app_export', { artifact: 'tracker', path: 'export', overwrite: true });

  // Removing the running version puts the app back on version 1.
  const one = await k.ok('unpublish', { artifact: 'tracker', version: 2 });
  assert.equal(one.app.data_kept, true);
  assert.equal(one.app.state, 'running');
  res = await fetch(pub.url);
  assert.equal(await res.text(), 'app v1 public');

  const gone = await k.ok('unpublish', { artifact: 'tracker' });
  assert.equal(gone.app.data_kept, true);
  assert.equal(gone.app.data_deleted, false);
  assert.ok(gone.app.data_dir && fs.existsSync(path.join(gone.app.data_dir, 'digest.txt')), 'the data is still there');
  res = await fetch(pub.url);
  assert.equal(res.status, 404);
});
