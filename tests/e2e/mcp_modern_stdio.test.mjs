// MCP 2026-07-28 ("modern", stateless) over stdio, against `kiln mcp` (issue 20): the official
// SDK v2 client (@modelcontextprotocol/client, pinned to 2026-07-28 and in 'auto' mode) for
// discovery, tools, the stateless workspace, a sandbox run, cancellation, resources and
// subscriptions; raw JSON-RPC for what SDK v2 does not drive (the tasks extension) and for the
// error envelope; and the v1 SDK (@modelcontextprotocol/sdk, 2025-11-25) against the same binary,
// with its experimental tasks. Every test starts its own `kiln mcp` on its own state dir and
// workspace. Sandbox tests are skipped with kiln's reason where the sandbox cannot run (failed
// with it under KILN_REQUIRE_SANDBOX=1).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

import {
  connectClient, errorText, kilnBin, kilnEnv, RawServer, structured, TapTransport, tempDir, waitUntil,
} from '../lib/kiln.mjs';
import { hostProcs, probeSandbox, uniqueSleep } from '../lib/sandbox_probe.mjs';

const MODERN = '2026-07-28';
const LEGACY = '2025-11-25';
const TASKS = 'io.modelcontextprotocol/tasks';
const K = {
  version: 'io.modelcontextprotocol/protocolVersion',
  caps: 'io.modelcontextprotocol/clientCapabilities',
  info: 'io.modelcontextprotocol/clientInfo',
  serverInfo: 'io.modelcontextprotocol/serverInfo',
  subscription: 'io.modelcontextprotocol/subscriptionId',
  relatedTask: 'io.modelcontextprotocol/related-task',
};
// Deadlines only: nothing here waits a fixed time.
const LONG = { timeoutMs: 60000 };

// The per-request envelope of a modern request; `tasks` declares the tasks extension.
function envelope({ tasks = false } = {}) {
  return {
    [K.version]: MODERN,
    [K.caps]: tasks ? { extensions: { [TASKS]: {} } } : {},
    [K.info]: { name: 'kiln-modern-raw', version: '0' },
  };
}

// A workspace folder with `files` ({relative path: content}; objects are written as JSON).
function makeWs(files = {}) {
  const ws = tempDir('kiln-modern-ws-');
  for (const [rel, content] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(ws, rel)), { recursive: true });
    fs.writeFileSync(path.join(ws, rel), typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  }
  return ws;
}

function serverArgs(home, workspace) {
  return ['--state-dir', home, ...(workspace ? ['--workspace', workspace] : [])];
}

// An SDK v2 client on a fresh `kiln mcp`. With `tap` the transport is wrapped so the test sees
// every message (the SDK then probes server/discover in place); without it the plain
// StdioClientTransport is used, whose negotiated connect probes on a short-lived sibling process.
async function modernClient(t, { mode = { pin: MODERN }, workspace, tap = true } = {}) {
  const home = tempDir('kiln-modern-home-');
  const inner = new StdioClientTransport({
    command: kilnBin(), args: ['mcp', ...serverArgs(home, workspace)], env: kilnEnv(home), stderr: 'pipe',
  });
  let stderr = '';
  inner.stderr?.on('data', (c) => { stderr += c.toString(); });
  const transport = tap ? new TapTransport(inner) : inner;
  const client = new Client({ name: 'kiln-modern-e2e', version: '0.0.0' }, { versionNegotiation: { mode } });
  await client.connect(transport);
  const k = {
    client, transport, home,
    get stderr() { return stderr; },
    sent: tap ? transport.sent : undefined,
    wire: tap ? transport.received : undefined,
    call: (name, args, opts) => client.callTool({ name, arguments: args }, { timeout: 120000, ...opts }),
    async ok(name, args, opts) { return structured(await k.call(name, args, opts)); },
    responseTo: (id) => transport.received?.find((m) => m.id === id && ('result' in m || 'error' in m)),
  };
  t?.after(() => client.close().catch(() => {}));
  return k;
}

// A raw peer on a fresh `kiln mcp`; `s.modern(method, params, {tasks})` sends a modern request.
function rawModern(t, { workspace, home = tempDir('kiln-modern-home-') } = {}) {
  const s = new RawServer({ home, args: serverArgs(home, workspace) });
  t.after(() => s.close());
  let n = 0;
  s.modern = (method, params = {}, { tasks = false, timeoutMs = 15000 } = {}) =>
    s.request(`m${++n}`, method, { ...params, _meta: envelope({ tasks }) }, timeoutMs);
  return s;
}

// The result of a raw reply, failing with the whole reply when it is an error.
function resultOf(reply) {
  assert.ok(reply.result, `expected a result, got ${JSON.stringify(reply)}`);
  return reply.result;
}

async function openWorkspace(s, dir) {
  const r = resultOf(await s.modern('tools/call', { name: 'workspace_open', arguments: { path: dir } }));
  assert.equal(r.isError, false, JSON.stringify(r));
  return r.structuredContent.id;
}

// Polls tasks/get (at the task's pollIntervalMs) until the task leaves `working`.
async function settledTask(s, task) {
  return waitUntil(async () => {
    const r = resultOf(await s.modern('tasks/get', { taskId: task.taskId }, { tasks: true }));
    assert.equal(r.resultType, 'complete');
    assert.equal(r.taskId, task.taskId);
    return r.status !== 'working' && r;
  }, { ...LONG, intervalMs: Math.min(task.pollIntervalMs ?? 200, 1000), what: `task ${task.taskId} to settle` });
}

const isIsoTime = (s) => typeof s === 'string' && !Number.isNaN(Date.parse(s)) && /T/.test(s);

// A check that waits for the test to create `go` in the workspace (so the task is provably still
// working when the test looks), bounded so a lost test cannot leave it running for long.
const GATED_RUN = 'i=0; while [ ! -f go ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; test -f go && echo checked';

// Can the sandbox run here? Probed once on a server with --workspace (modern requests carry no
// current workspace).
let sandboxTest;
{
  const k = await modernClient(null, { workspace: tempDir('kiln-modern-probe-') });
  ({ test: sandboxTest } = await probeSandbox('modern stdio e2e', k.call));
  await k.client.close();
}

// ---------------------------------------------------------------------------------------------
// 1. Discovery and tools

test('SDK v2 pinned to 2026-07-28: modern era, discover result, a stable tool list without execution', async (t) => {
  const k = await modernClient(t);
  assert.equal(k.client.getProtocolEra(), 'modern');
  assert.equal(k.client.getNegotiatedProtocolVersion(), MODERN);
  assert.ok(!k.sent.some((m) => m.method === 'initialize'), 'no initialize in the modern era');

  const d = k.client.getDiscoverResult();
  assert.ok(d, 'the connect-time server/discover result is kept');
  assert.ok(d.supportedVersions.includes(MODERN), JSON.stringify(d.supportedVersions));
  assert.ok(d.supportedVersions.includes(LEGACY), JSON.stringify(d.supportedVersions));
  assert.equal(d._meta[K.serverInfo].name, 'kiln');
  assert.equal(k.client.getServerVersion()?.name, 'kiln');
  assert.deepEqual(d.capabilities.extensions?.[TASKS], {});
  assert.ok(d.capabilities.tools, 'tools capability');
  // On the wire: resultType, and discover is cacheable.
  const probe = k.sent.find((m) => m.method === 'server/discover');
  const discovered = k.responseTo(probe.id).result;
  assert.equal(discovered.resultType, 'complete');
  assert.equal(typeof discovered.ttlMs, 'number');
  assert.equal(discovered.cacheScope, 'private');

  const listed = [];
  for (let i = 0; i < 2; i++) listed.push((await k.client.listTools(undefined, { cacheMode: 'refresh' })).tools);
  const lists = k.wire.filter((m) => m.result?.tools);
  assert.equal(lists.length, 2, 'each listTools went to the server');
  for (const m of lists) {
    assert.equal(m.result.resultType, 'complete');
    assert.equal(typeof m.result.ttlMs, 'number');
    assert.equal(m.result.cacheScope, 'private');
    assert.equal(m.result._meta[K.serverInfo].name, 'kiln');
    assert.equal(m.result.nextCursor, undefined, 'one page');
    for (const tool of m.result.tools) assert.equal(tool.execution, undefined, `${tool.name} has no execution field in 2026-07-28`);
  }
  const [a, b] = listed.map((tools) => tools.map((x) => x.name));
  assert.ok(a.length >= 30 && a.length <= 45, `about 35 tools, got ${a.length}`);
  assert.deepEqual(b, a, 'the same tools in the same order');
  assert.equal(new Set(a).size, a.length, 'no duplicates');
  for (const name of ['workspace_open', 'file_read', 'file_write', 'sandbox_exec', 'verify']) assert.ok(a.includes(name), name);
  for (const tool of listed[0]) assert.equal(tool.execution, undefined, tool.name);
});

test('SDK v2 in auto mode (plain stdio transport, probed on a sibling process): modern, same tools in the same order', async (t) => {
  const k = await modernClient(t, { mode: 'auto', tap: false });
  assert.equal(k.client.getProtocolEra(), 'modern');
  assert.equal(k.client.getNegotiatedProtocolVersion(), MODERN);
  const d = k.client.getDiscoverResult();
  assert.ok(d.supportedVersions.includes(MODERN) && d.supportedVersions.includes(LEGACY), JSON.stringify(d.supportedVersions));
  assert.equal(d._meta[K.serverInfo].name, 'kiln');
  assert.ok(d.capabilities.extensions?.[TASKS]);
  const names = (await k.client.listTools()).tools.map((x) => x.name);

  // Another process lists the same tools in the same order (a fixed order, not a per-process one).
  const s = rawModern(t);
  const other = resultOf(await s.modern('tools/list')).tools.map((x) => x.name);
  assert.deepEqual(names, other);
  // A tool call works in this era.
  const listedWs = await k.ok('workspace_list', {});
  assert.ok(Array.isArray(listedWs.workspaces), JSON.stringify(listedWs));
});

// ---------------------------------------------------------------------------------------------
// 2. The stateless workspace

test('stateless workspace: workspace_open {create}, file tools by id or name; without "workspace" the error says to pass it', async (t) => {
  const k = await modernClient(t);
  const dir = path.join(tempDir('kiln-modern-parent-'), 'made-by-open');
  const opened = await k.ok('workspace_open', { path: dir, create: true });
  assert.match(opened.id, /^ws_/);
  assert.equal(opened.root, dir);
  assert.ok(fs.statSync(dir).isDirectory(), 'create made the folder');

  const w = await k.ok('file_write', { workspace: opened.id, path: 'notes/a.txt', content: 'stateless\n', create_dirs: true });
  assert.equal(w.created, true);
  assert.equal(fs.readFileSync(path.join(dir, 'notes/a.txt'), 'utf8'), 'stateless\n');
  const r = await k.ok('file_read', { workspace: opened.id, path: 'notes/a.txt' });
  assert.equal(r.content, 'stateless\n');
  const byName = await k.ok('file_read', { workspace: opened.name, path: 'notes/a.txt' });
  assert.equal(byName.content, 'stateless\n');

  // workspace_open selected nothing: the next request still has no workspace.
  for (const [name, args] of [['file_read', { path: 'notes/a.txt' }], ['file_list', {}], ['file_write', { path: 'b.txt', content: 'x' }]]) {
    const bad = await k.call(name, args);
    assert.equal(bad.isError, true, `${name} without workspace`);
    assert.match(errorText(bad), /pass "workspace"/, name);
  }
  assert.ok(!fs.existsSync(path.join(dir, 'b.txt')), 'the refused write wrote nothing');
});

test('kiln mcp --workspace DIR: modern file tools work without the "workspace" argument', async (t) => {
  const ws = makeWs({ 'seed.txt': 'seeded\n' });
  const k = await modernClient(t, { workspace: ws });
  assert.equal((await k.ok('file_read', { path: 'seed.txt' })).content, 'seeded\n');
  await k.ok('file_write', { path: 'out.txt', content: 'from the server flag\n' });
  assert.equal(fs.readFileSync(path.join(ws, 'out.txt'), 'utf8'), 'from the server flag\n');
  const list = await k.ok('file_list', {});
  assert.deepEqual(list.entries.map((e) => e.path).sort(), ['out.txt', 'seed.txt']);
});

// ---------------------------------------------------------------------------------------------
// 3. A sandbox run, 4. cancellation

sandboxTest('sandbox_exec {workspace, command}: exit_code 3 and stdout hello, as data', async (t) => {
  const ws = makeWs();
  const k = await modernClient(t);
  const id = (await k.ok('workspace_open', { path: ws })).id;
  const r = await k.call('sandbox_exec', { workspace: id, command: 'echo hello; exit 3' });
  assert.equal(r.isError, false, errorText(r));
  const o = r.structuredContent;
  assert.equal(o.exit_code, 3);
  assert.equal(o.stop_reason, 'exit');
  assert.equal(o.stdout, 'hello\n');
  assert.equal(o.stderr, '');
  assert.equal(o.fresh_sandbox, true);
  assert.equal(o.background, false);
  assert.equal(o.isolation.level, 'strict');
  assert.equal(o.cwd, ws);
  assert.match(o.trace_id, /^tr_[0-9a-f]+$/);
  const call = k.sent.findLast((m) => m.method === 'tools/call');
  assert.equal(k.responseTo(call.id).result.resultType, 'complete', 'answered directly (no tasks extension declared)');
});

sandboxTest('cancelling a modern sandbox_exec through the AbortSignal kills its tree; the server goes on', async (t) => {
  const ws = makeWs();
  const k = await modernClient(t);
  const id = (await k.ok('workspace_open', { path: ws })).id;
  const marker = uniqueSleep();
  const ac = new AbortController();
  const call = k.call('sandbox_exec', { workspace: id, command: `echo started > started.txt; sleep ${marker}; echo after > after.txt` },
    { signal: ac.signal });
  call.catch(() => {});
  await waitUntil(() => fs.existsSync(path.join(ws, 'started.txt')) && hostProcs(marker).length > 0, { what: 'the command to start' });
  const reqId = k.sent.findLast((m) => m.method === 'tools/call').id;
  ac.abort('the test cancels');
  await assert.rejects(call);
  assert.ok(k.sent.some((m) => m.method === 'notifications/cancelled' && m.params.requestId === reqId), 'the SDK sent notifications/cancelled');

  await waitUntil(() => hostProcs(marker).length === 0, { what: `the sandboxed tree (sleep ${marker}) to be gone` });
  assert.ok(!fs.existsSync(path.join(ws, 'after.txt')), 'the shell was killed too: it never wrote after.txt');

  // The server answers the next request, and runs sandboxes still.
  const again = await k.ok('sandbox_exec', { workspace: id, command: 'echo again' });
  assert.equal(again.stdout, 'again\n');
  assert.equal(again.exit_code, 0);
  assert.equal(k.responseTo(reqId), undefined, 'no response to the cancelled request');
});

// ---------------------------------------------------------------------------------------------
// 5. The tasks extension (raw JSON-RPC: SDK v2 does not implement it)

sandboxTest('verify as a task: resultType task, tasks/get working then completed with the CallToolResult', async (t) => {
  const ws = makeWs({ 'kiln.json': { verify: [{ name: 'gated', run: GATED_RUN }] } });
  const s = rawModern(t);
  const id = await openWorkspace(s, ws);
  const created = resultOf(await s.modern('tools/call', { name: 'verify', arguments: { workspace: id } }, { tasks: true }));
  assert.equal(created.resultType, 'task', JSON.stringify(created));
  assert.equal(created.status, 'working');
  assert.equal(typeof created.taskId, 'string');
  assert.ok(created.taskId.length >= 16, 'an unguessable id');
  assert.ok(isIsoTime(created.createdAt) && isIsoTime(created.lastUpdatedAt), JSON.stringify(created));
  assert.ok(created.ttlMs === null || (Number.isInteger(created.ttlMs) && created.ttlMs > 0));
  assert.ok(Number.isInteger(created.pollIntervalMs) && created.pollIntervalMs > 0);
  assert.equal(created.content, undefined, 'a task handle, not a tool result');
  assert.equal(created._meta[K.serverInfo].name, 'kiln');

  // The check waits for `go`, so the task is working now, by construction.
  const working = resultOf(await s.modern('tasks/get', { taskId: created.taskId }, { tasks: true }));
  assert.equal(working.resultType, 'complete');
  assert.equal(working.status, 'working');
  assert.equal(working.taskId, created.taskId);
  assert.equal(working.createdAt, created.createdAt);
  assert.equal(working.result, undefined);

  fs.writeFileSync(path.join(ws, 'go'), '');
  const done = await settledTask(s, created);
  assert.equal(done.status, 'completed', JSON.stringify(done));
  assert.ok(isIsoTime(done.lastUpdatedAt));
  const r = done.result;
  assert.ok(r, 'a completed task carries its result');
  assert.equal(r.isError, false);
  assert.equal(r.structuredContent.status, 'pass', JSON.stringify(r.structuredContent));
  assert.deepEqual(r.structuredContent.checks.map((c) => [c.name, c.status]), [['gated', 'pass']]);
  assert.equal(r.structuredContent.workspace, id);
  assert.ok(r.content.some((c) => c.type === 'text'), 'the CallToolResult has its text content');
  assert.notEqual(r.resultType, 'task');
  assert.ok(!s.all.some((m) => m.method === 'notifications/message'), 'no log messages for requests without a logLevel');
});

sandboxTest('tasks/cancel of a long verify: ack, status cancelled, its process gone; the server goes on', async (t) => {
  const marker = uniqueSleep();
  const ws = makeWs({ 'kiln.json': { verify: [{ name: 'long', run: `echo started > started.txt; sleep ${marker}; echo after > after.txt` }] } });
  const s = rawModern(t);
  const id = await openWorkspace(s, ws);
  const created = resultOf(await s.modern('tools/call', { name: 'verify', arguments: { workspace: id } }, { tasks: true }));
  assert.equal(created.resultType, 'task', JSON.stringify(created));
  await waitUntil(() => fs.existsSync(path.join(ws, 'started.txt')) && hostProcs(marker).length > 0, { what: 'the check to start' });

  const ack = resultOf(await s.modern('tasks/cancel', { taskId: created.taskId }, { tasks: true }));
  assert.equal(ack.resultType, 'complete');
  assert.equal(ack.status, undefined, 'an empty acknowledgement');
  const settled = await settledTask(s, created);
  assert.equal(settled.status, 'cancelled', JSON.stringify(settled));
  assert.equal(settled.result, undefined);
  await waitUntil(() => hostProcs(marker).length === 0, { what: `the check's tree (sleep ${marker}) to be gone` });
  assert.ok(!fs.existsSync(path.join(ws, 'after.txt')), 'the check was killed: it never wrote after.txt');
  // Still cancelled later, and the server answers.
  assert.equal(resultOf(await s.modern('tasks/get', { taskId: created.taskId }, { tasks: true })).status, 'cancelled');
  assert.ok(resultOf(await s.modern('tools/list')).tools.length > 0);
});

sandboxTest('tasks still working when the client closes stdin are cancelled: their runs end cancelled, not interrupted (read after a restart)', async (t) => {
  const marker = uniqueSleep();
  const ws = makeWs();
  const home = tempDir('kiln-modern-home-');
  const a = rawModern(t, { home });
  const id = await openWorkspace(a, ws);
  for (let i = 0; i < 2; i++) {
    const c = resultOf(await a.modern('tools/call', {
      name: 'sandbox_exec', arguments: { workspace: id, command: `echo ${i} > t${i}.txt; sleep ${marker}` },
    }, { tasks: true }));
    assert.equal(c.resultType, 'task', JSON.stringify(c));
  }
  await waitUntil(() => ['t0.txt', 't1.txt'].every((f) => fs.existsSync(path.join(ws, f))) && hostProcs(marker).length > 0,
    { what: `both runs (sleep ${marker}) to start` });
  const closed = await a.close(30000);
  assert.equal(closed.code, 0, `kiln mcp exited with ${closed.code} (signal ${closed.signal}) after ${closed.ms} ms`);
  assert.deepEqual(hostProcs(marker), [], 'no run outlives the server');

  const b = rawModern(t, { home });
  await openWorkspace(b, ws);
  const listed = resultOf(await b.modern('tools/call', { name: 'trace_list', arguments: { workspace: id, kind: 'exec' } }));
  const traces = listed.structuredContent.traces;
  assert.equal(traces.length, 2, JSON.stringify(listed.structuredContent));
  for (const tr of traces) assert.deepEqual([tr.status, tr.stop_reason], ['fail', 'cancelled'], JSON.stringify(tr));
});

sandboxTest('sandbox_exec as a task: polled to completed, the result has exit_code and stdout', async (t) => {
  const ws = makeWs();
  const s = rawModern(t);
  const id = await openWorkspace(s, ws);
  const created = resultOf(await s.modern('tools/call', {
    name: 'sandbox_exec', arguments: { workspace: id, command: 'i=0; while [ ! -f go ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; echo tasked; exit 5' },
  }, { tasks: true }));
  assert.equal(created.resultType, 'task', JSON.stringify(created));
  assert.equal(resultOf(await s.modern('tasks/get', { taskId: created.taskId }, { tasks: true })).status, 'working');
  fs.writeFileSync(path.join(ws, 'go'), '');
  const done = await settledTask(s, created);
  assert.equal(done.status, 'completed', JSON.stringify(done));
  assert.equal(done.result.isError, false);
  assert.equal(done.result.structuredContent.exit_code, 5);
  assert.equal(done.result.structuredContent.stdout, 'tasked\n');
});

test('tasks/get and tasks/cancel of an unknown task id: -32602', async (t) => {
  const s = rawModern(t);
  for (const method of ['tasks/get', 'tasks/cancel']) {
    const r = await s.modern(method, { taskId: 'task-00000000000000000000000000000000' }, { tasks: true });
    assert.equal(r.error?.code, -32602, `${method}: ${JSON.stringify(r)}`);
  }
  const missing = await s.modern('tasks/get', {}, { tasks: true });
  assert.equal(missing.error?.code, -32602, JSON.stringify(missing));
});

sandboxTest('without the tasks extension the same verify answers directly: resultType complete', async (t) => {
  const ws = makeWs({ 'kiln.json': { verify: [{ name: 'quick', run: 'echo quick' }] } });
  const s = rawModern(t);
  const id = await openWorkspace(s, ws);
  const r = resultOf(await s.modern('tools/call', { name: 'verify', arguments: { workspace: id } }, { timeoutMs: 60000 }));
  assert.equal(r.resultType, 'complete', JSON.stringify(r));
  assert.equal(r.taskId, undefined);
  assert.equal(r.isError, false);
  assert.equal(r.structuredContent.status, 'pass');
  assert.deepEqual(r.structuredContent.checks.map((c) => c.name), ['quick']);
});

// ---------------------------------------------------------------------------------------------
// 6. Resources and subscriptions

test('SDK v2 listen({resourceSubscriptions}): acknowledged, updates carry the subscription id, none after close; resources/read', async (t) => {
  const ws = makeWs({ 'w.txt': 'zero\n', 'other.txt': 'unwatched\n' });
  const k = await modernClient(t);
  const id = (await k.ok('workspace_open', { path: ws })).id;
  const uri = `file://${ws}/w.txt`;
  const updates = [];
  k.client.setNotificationHandler('notifications/resources/updated', (n) => updates.push(n.params));

  const sub = await k.client.listen({ resourceSubscriptions: [uri] });
  assert.deepEqual(sub.honoredFilter.resourceSubscriptions, [uri]);
  const listenReq = k.sent.find((m) => m.method === 'subscriptions/listen');
  const ack = k.wire.find((m) => m.method === 'notifications/subscriptions/acknowledged');
  assert.equal(ack.params._meta[K.subscription], listenReq.id, 'the ack carries the listen request id');
  assert.deepEqual(ack.params.notifications, { resourceSubscriptions: [uri] });

  // A write to another file sends nothing; a write to the watched one sends its update.
  await k.ok('file_write', { workspace: id, path: 'other.txt', content: 'changed\n' });
  await k.ok('file_write', { workspace: id, path: 'w.txt', content: 'one\n' });
  await waitUntil(() => updates.length > 0, { what: 'notifications/resources/updated' });
  assert.deepEqual(updates, [{ uri, _meta: { [K.subscription]: listenReq.id } }]);

  await sub.close();
  assert.equal(await sub.closed, 'local');
  assert.ok(k.sent.some((m) => m.method === 'notifications/cancelled' && m.params.requestId === listenReq.id));
  await k.ok('file_write', { workspace: id, path: 'w.txt', content: 'two\n' });
  // A barrier: a second subscription sees the next write; by then an update for the write after
  // close would have arrived on the first.
  const sub2 = await k.client.listen({ resourceSubscriptions: [uri] });
  const listen2 = k.sent.findLast((m) => m.method === 'subscriptions/listen');
  await k.ok('file_write', { workspace: id, path: 'w.txt', content: 'three\n' });
  await waitUntil(() => updates.some((u) => u._meta[K.subscription] === listen2.id), { what: 'the second subscription\'s update' });
  assert.equal(updates.filter((u) => u._meta[K.subscription] === listenReq.id).length, 1, 'nothing on the closed subscription');
  assert.ok(!k.wire.some((m) => m.method === 'notifications/resources/updated' && m.params.uri !== uri), 'no update for an unwatched file');
  await sub2.close();
  assert.equal(k.responseTo(listenReq.id), undefined, 'a cancelled listen gets no response');

  const read = await k.client.readResource({ uri }, { cacheMode: 'bypass' });
  assert.deepEqual(read.contents.map((c) => [c.uri, c.text]), [[uri, 'three\n']]);
  const readReply = k.wire.findLast((m) => m.result?.contents);
  assert.equal(readReply.result.resultType, 'complete');
  assert.equal(typeof readReply.result.ttlMs, 'number');
  assert.ok(['private', 'public'].includes(readReply.result.cacheScope));
  assert.equal(readReply.result.cacheScope, 'private', 'workspace files are private');
});

test('raw subscriptions/listen: numeric id echoed, cancel ends it without a reply, shutdown answers it gracefully', async (t) => {
  const ws = makeWs({ 'a.txt': 'a\n' });
  const s = rawModern(t);
  const id = await openWorkspace(s, ws);
  const uri = `file://${ws}/a.txt`;
  const listen = (reqId) => s.send({ jsonrpc: '2.0', id: reqId, method: 'subscriptions/listen', params: { _meta: envelope(), notifications: { resourceSubscriptions: [uri] } } });
  const forSub = (reqId) => (m) => m.params?._meta?.[K.subscription] === reqId;

  listen(41);
  const ack = await s.next({ pred: (m) => m.method === 'notifications/subscriptions/acknowledged' && forSub(41)(m) });
  assert.deepEqual(ack.params.notifications.resourceSubscriptions, [uri]);
  resultOf(await s.modern('tools/call', { name: 'file_edit', arguments: { workspace: id, path: 'a.txt', edits: [{ old_text: 'a', new_text: 'b' }] } }));
  const upd = await s.next({ pred: (m) => m.method === 'notifications/resources/updated' });
  assert.deepEqual(upd.params, { uri, _meta: { [K.subscription]: 41 } });

  s.notify('notifications/cancelled', { requestId: 41, _meta: envelope() });
  listen(42);
  await s.next({ pred: (m) => m.method === 'notifications/subscriptions/acknowledged' && forSub(42)(m) });
  resultOf(await s.modern('tools/call', { name: 'file_write', arguments: { workspace: id, path: 'a.txt', content: 'c\n' } }));
  await s.next({ pred: (m) => m.method === 'notifications/resources/updated' && forSub(42)(m) });
  assert.ok(!s.all.some((m) => m.id === 41), 'no response to the cancelled listen');
  assert.equal(s.all.filter((m) => m.method === 'notifications/resources/updated' && forSub(41)(m)).length, 1);

  await s.close();
  const bye = s.all.find((m) => m.id === 42 && !('method' in m));
  assert.ok(bye, 'shutdown answers the open listen');
  assert.equal(bye.result.resultType, 'complete', JSON.stringify(bye));
  assert.equal(bye.result._meta[K.subscription], 42, JSON.stringify(bye));
  assert.deepEqual(Object.keys(bye.result).sort(), ['_meta', 'resultType'], 'no method-specific data');
});

test('resources/read of a workspace file without --workspace: text, ttlMs, cacheScope; outside every workspace: -32602', async (t) => {
  const ws = makeWs({ 'r.md': '# read me\n' });
  const s = rawModern(t);
  await openWorkspace(s, ws);
  const uri = `file://${ws}/r.md`;
  const r = resultOf(await s.modern('resources/read', { uri }));
  assert.equal(r.resultType, 'complete');
  assert.deepEqual(r.contents.map((c) => [c.uri, c.text]), [[uri, '# read me\n']]);
  assert.equal(typeof r.ttlMs, 'number');
  assert.equal(r.cacheScope, 'private');
  const outside = await s.modern('resources/read', { uri: `file://${tempDir('kiln-modern-elsewhere-')}/x.txt` });
  assert.equal(outside.error?.code, -32602, `2026-07-28 answers an unknown resource with -32602: ${JSON.stringify(outside)}`);
});

// ---------------------------------------------------------------------------------------------
// 7. Errors

test('envelope errors: unsupported version -32022 with supported/requested, missing clientCapabilities -32602, removed methods -32601', async (t) => {
  const s = rawModern(t);
  const unsupported = await s.request('v', 'tools/list', { _meta: { [K.version]: '2099-01-01', [K.caps]: {} } });
  assert.equal(unsupported.error?.code, -32022, JSON.stringify(unsupported));
  assert.equal(unsupported.error.data.requested, '2099-01-01');
  assert.ok(Array.isArray(unsupported.error.data.supported));
  for (const v of [MODERN, LEGACY]) assert.ok(unsupported.error.data.supported.includes(v), v);

  const noCaps = await s.request('c', 'tools/list', { _meta: { [K.version]: MODERN } });
  assert.equal(noCaps.error?.code, -32602, JSON.stringify(noCaps));
  const badCaps = await s.request('c2', 'tools/call', { name: 'workspace_list', arguments: {}, _meta: { [K.version]: MODERN, [K.caps]: 'none' } });
  assert.equal(badCaps.error?.code, -32602, JSON.stringify(badCaps));

  // Removed in 2026-07-28 (changelog: logging/setLevel; resources/subscribe; tasks/result and
  // tasks/list moved out; no initialize).
  for (const [method, params] of [
    ['logging/setLevel', { level: 'debug' }],
    ['resources/subscribe', { uri: 'file:///tmp/x' }],
    ['tasks/result', { taskId: 'x' }],
    ['tasks/list', {}],
    ['initialize', { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'x', version: '0' } }],
  ]) {
    const r = await s.modern(method, params);
    assert.equal(r.error?.code, -32601, `${method} in a modern request: ${JSON.stringify(r)}`);
  }
  // Modern-only methods without the envelope.
  for (const method of ['subscriptions/listen', 'tasks/update']) {
    const r = await s.request(`plain-${method}`, method, { notifications: {}, taskId: 'x' });
    assert.equal(r.error?.code, -32601, `${method} without _meta: ${JSON.stringify(r)}`);
  }
  // None of that hurt the process.
  assert.ok(resultOf(await s.modern('tools/list')).tools.length > 0);
  assert.deepEqual(s.garbage, []);
});

// The 2026-07-28 changelog (Major changes, 5): "Remove `ping`, `logging/setLevel`, and
// `notifications/roots/list_changed`"; schema.ts has no PingRequest, and SDK v2 refuses to send
// ping in that era. A removed method is an unknown method: -32601.
test('ping in a modern request: -32601 (removed in 2026-07-28); legacy ping still answers', async (t) => {
  const s = rawModern(t);
  const r = await s.modern('ping');
  assert.equal(r.error?.code, -32601, `ping in a modern request: ${JSON.stringify(r)}`);
  await s.initialize();
  assert.deepEqual(resultOf(await s.request('legacy-ping', 'ping', {})), {});
});

// ---------------------------------------------------------------------------------------------
// 8. The legacy era on the same binary

test('v1 SDK (2025-11-25) against the same binary: initialize, listTools with taskSupport, callTool with a current workspace', async (t) => {
  const home = tempDir('kiln-legacy-home-');
  const s = await connectClient({ args: ['--state-dir', home], home });
  t.after(() => s.close());
  assert.equal(s.client.getServerVersion().name, 'kiln');
  assert.ok(s.client.getServerCapabilities().tasks?.requests?.tools?.call, JSON.stringify(s.client.getServerCapabilities()));
  assert.equal(s.transport.sent[0].method, 'initialize');
  const init = s.wire.find((m) => m.result?.protocolVersion);
  assert.equal(init.result.protocolVersion, LEGACY);
  assert.equal(init.result.resultType, undefined, 'legacy results carry no resultType');

  const { tools } = await s.client.listTools();
  assert.ok(tools.length >= 30);
  assert.equal(tools.find((x) => x.name === 'verify').execution?.taskSupport, 'optional');
  assert.equal(tools.find((x) => x.name === 'sandbox_exec').execution?.taskSupport, 'optional');
  assert.equal(tools.find((x) => x.name === 'file_read').execution, undefined);

  const ws = makeWs({ 'l.txt': 'legacy\n' });
  structured(await s.client.callTool({ name: 'workspace_open', arguments: { path: ws } }));
  // The legacy era keeps a current workspace: no "workspace" argument needed.
  assert.equal(structured(await s.client.callTool({ name: 'file_read', arguments: { path: 'l.txt' } })).content, 'legacy\n');
  assert.ok(!s.wire.some((m) => m.result?.resultType !== undefined), 'no resultType anywhere in the legacy era');
});

sandboxTest('legacy tasks: tools/call verify with params.task {ttl} → {task}, tasks/get working, tasks/result the CallToolResult', async (t) => {
  const ws = makeWs({ 'kiln.json': { verify: [{ name: 'gated', run: GATED_RUN }] } });
  const home = tempDir('kiln-legacy-home-');
  const s = new RawServer({ home, args: ['--state-dir', home] });
  t.after(() => s.close());
  const init = await s.initialize();
  assert.deepEqual(init.capabilities.tasks?.requests?.tools?.call, {});
  assert.ok(init.capabilities.tasks.cancel && init.capabilities.tasks.list);
  const open = await s.request(1, 'tools/call', { name: 'workspace_open', arguments: { path: ws } });
  assert.equal(open.result.isError, false);

  const c = await s.request(2, 'tools/call', { name: 'verify', arguments: {}, task: { ttl: 60000 } });
  const task = resultOf(c).task;
  assert.ok(task, JSON.stringify(c));
  assert.equal(c.result.content, undefined, 'a CreateTaskResult, not the tool result');
  assert.equal(typeof task.taskId, 'string');
  assert.equal(task.status, 'working');
  assert.equal(task.ttl, 60000);
  assert.ok(Number.isInteger(task.pollInterval));
  assert.ok(isIsoTime(task.createdAt));

  const g = resultOf(await s.request(3, 'tasks/get', { taskId: task.taskId }));
  assert.equal(g.taskId, task.taskId);
  assert.equal(g.status, 'working', 'the check waits for go');
  const listed = resultOf(await s.request(4, 'tasks/list', {}));
  assert.ok(listed.tasks.some((x) => x.taskId === task.taskId));

  s.send({ jsonrpc: '2.0', id: 5, method: 'tasks/result', params: { taskId: task.taskId } });
  fs.writeFileSync(path.join(ws, 'go'), '');
  const r = resultOf(await s.reply(5, 60000));
  assert.equal(r.isError, false);
  assert.equal(r.structuredContent.status, 'pass', JSON.stringify(r.structuredContent));
  assert.deepEqual(r._meta?.[K.relatedTask], { taskId: task.taskId });
  assert.equal(r.resultType, undefined);
  assert.equal(resultOf(await s.request(6, 'tasks/get', { taskId: task.taskId })).status, 'completed');
  // A terminal task cannot be cancelled.
  assert.equal((await s.request(7, 'tasks/cancel', { taskId: task.taskId })).error?.code, -32602);
});

test('one process serves both eras: after initialize, a request with the modern _meta is still served statelessly', async (t) => {
  const home = tempDir('kiln-both-home-');
  const s = new RawServer({ home, args: ['--state-dir', home] });
  t.after(() => s.close());
  await s.initialize();
  const ws = makeWs({ 'x.txt': 'x\n' });
  resultOf(await s.request(1, 'tools/call', { name: 'workspace_open', arguments: { path: ws } }));
  // Legacy: the current workspace applies, tools list execution, no resultType.
  const legacyRead = resultOf(await s.request(2, 'tools/call', { name: 'file_read', arguments: { path: 'x.txt' } }));
  assert.equal(legacyRead.structuredContent.content, 'x\n');
  assert.equal(legacyRead.resultType, undefined);
  const legacyTools = resultOf(await s.request(3, 'tools/list', {})).tools;
  assert.ok(legacyTools.some((x) => x.execution));
  // Modern on the same pipe: no current workspace, no execution, resultType.
  const modernRead = resultOf(await s.request(4, 'tools/call', { name: 'file_read', arguments: { path: 'x.txt' }, _meta: envelope() }));
  assert.equal(modernRead.resultType, 'complete');
  assert.equal(modernRead.isError, true);
  assert.match(errorText(modernRead), /pass "workspace"/);
  const modernTools = resultOf(await s.request(5, 'tools/list', { _meta: envelope() }));
  assert.equal(modernTools.resultType, 'complete');
  assert.ok(!modernTools.tools.some((x) => x.execution));
  assert.deepEqual(modernTools.tools.map((x) => x.name), legacyTools.map((x) => x.name), 'the same tools in the same order');
});
