// MCP 2026-07-28 (stateless) over Streamable HTTP on `kiln serve --mcp`: the official SDK v2 client
// (`@modelcontextprotocol/client`, pinned to 2026-07-28 and in 'auto' mode) with workspace tools,
// a sandbox run, subscriptions/listen and cancellation by AbortSignal; raw fetch for every request
// metadata header rule (-32020 HeaderMismatch, -32022, 404 -32601, 202, initialize refused, probe
// discover); a closed response stream cancelling its sandbox run; the tasks extension (verify as a
// task, tasks/cancel killing the work, tasks per principal); and a modern and a legacy (SDK v1)
// client on one server at once. Sandbox tests are skipped with kiln's reason where no sandbox can
// start (failed with it under KILN_REQUIRE_SANDBOX=1).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';

import { errorText, sleep, structured, tempDir } from '../lib/kiln.mjs';
import {
  MODERN, SseReader, TASKS_CAPABILITIES, base64Sentinel, httpClient, initializeBody, mcpFetch, modernBody,
  modernCall, modernFetch, modernHttpClient, startServe,
} from '../lib/mcp_http.mjs';
import { hostProcs, sandboxGate, uniqueSleep } from '../lib/sandbox_probe.mjs';

const SUPPORTED = ['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26'];
const HEADER_MISMATCH = -32020;
const UNSUPPORTED_VERSION = -32022;

const servers = [];
async function serve(opts) {
  const s = await startServe(opts);
  servers.push(s);
  return s;
}
after(async () => {
  for (const s of servers) await s.stop();
});

let ids = 100;
const nextId = () => ids++;

// A tools/call over raw modern HTTP; resolves the JSON-RPC response.
async function rawTool(url, name, args, { capabilities, headers } = {}) {
  return (await modernCall(url, modernBody(nextId(), 'tools/call', { name, arguments: args }, { capabilities }), { headers })).response;
}
// Its structuredContent, failing loudly on a JSON-RPC error or a tool error.
async function rawOk(url, name, args, opts) {
  const r = await rawTool(url, name, args, opts);
  assert.ok(r.result, `${name}: ${JSON.stringify(r)}`);
  return structured(r.result);
}
// A workspace folder of `files`, opened by a modern request: resolves { dir, id, name }.
async function openWorkspace(url, files = {}, opts) {
  const dir = tempDir('kiln-modern-http-ws-');
  for (const [rel, content] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  }
  const ws = await rawOk(url, 'workspace_open', { path: dir }, opts);
  return { dir, id: ws.id, name: ws.name };
}

async function until(what, fn, timeoutMs = 30000, everyMs = 50) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}

const srv = await serve();

// Can the sandbox run here? Probed with a modern sandbox_exec of `true`.
const gate = await (async () => {
  const ws = await openWorkspace(srv.url);
  const r = await rawTool(srv.url, 'sandbox_exec', { workspace: ws.id, command: 'true' });
  const why = r.error ? JSON.stringify(r.error) : (r.result.isError ? errorText(r.result) : null);
  return sandboxGate('modern HTTP e2e', why);
})();

function assertStateless(exchanges) {
  const posts = exchanges.filter((e) => e.method === 'POST');
  assert.ok(posts.length > 0);
  assert.equal(exchanges.filter((e) => e.method !== 'POST').length, 0, 'no GET stream, no DELETE in the modern era');
  for (const e of posts) {
    assert.notEqual(e.body?.method, 'initialize', 'no initialize');
    assert.equal(e.headers['mcp-session-id'], undefined, `no session id sent: ${JSON.stringify(e.headers)}`);
    assert.equal(e.responseHeaders?.['mcp-session-id'], undefined, `no session id returned for ${e.body?.method}`);
    if (e.body && 'id' in e.body) {
      assert.equal(e.headers['mcp-protocol-version'], MODERN, e.body.method);
      assert.equal(e.headers['mcp-method'], e.body.method);
    }
  }
}

for (const [label, mode] of [['pinned to 2026-07-28', { pin: MODERN }], ['auto', 'auto']]) {
  describe(`the SDK v2 client (${label}) over Streamable HTTP`, () => {
    test('connects in the modern era without a session; tools; workspace files by explicit workspace', async () => {
      const c = await modernHttpClient(srv.url, { mode });
      try {
        assert.equal(c.client.getProtocolEra(), 'modern');
        assert.equal(c.client.getNegotiatedProtocolVersion(), MODERN);
        assert.equal(c.exchanges[0].body.method, 'server/discover', 'connect probes with server/discover');
        const { tools } = await c.client.listTools();
        for (const name of ['workspace_open', 'workspace_list', 'file_write', 'file_read', 'sandbox_exec', 'verify']) {
          assert.ok(tools.some((t) => t.name === name), name);
        }
        const dir = tempDir('kiln-modern-http-ws-');
        const ws = structured(await c.client.callTool({ name: 'workspace_open', arguments: { path: dir } }));
        assert.match(ws.id, /^ws_/);
        const w = structured(await c.client.callTool({ name: 'file_write', arguments: { workspace: ws.id, path: 'notes/a.txt', content: 'written by v2\n', create_dirs: true } }));
        assert.equal(w.path, 'notes/a.txt');
        assert.equal(fs.readFileSync(path.join(dir, 'notes/a.txt'), 'utf8'), 'written by v2\n');
        const r = structured(await c.client.callTool({ name: 'file_read', arguments: { workspace: ws.id, path: 'notes/a.txt' } }));
        assert.equal(r.content, 'written by v2\n');
        const byName = structured(await c.client.callTool({ name: 'file_read', arguments: { workspace: ws.name, path: 'notes/a.txt' } }));
        assert.equal(byName.content, 'written by v2\n', 'a workspace name from workspace_open works too');
        // No current workspace in the stateless era, even right after workspace_open.
        const none = await c.client.callTool({ name: 'file_read', arguments: { path: 'notes/a.txt' } });
        assert.equal(none.isError, true);
        assert.match(errorText(none), /pass "workspace"/);
        // A resource URI that is not header-safe travels in Mcp-Name as =?base64?...?=.
        fs.writeFileSync(path.join(dir, 'héllo wörld.txt'), 'unicode\n');
        const uri = `file://${dir}/héllo wörld.txt`;
        const read = await c.client.readResource({ uri });
        assert.equal(read.contents[0].text, 'unicode\n');
        assert.equal(c.exchanges.at(-1).headers['mcp-name'], base64Sentinel(uri));
        assertStateless(c.exchanges);
      } finally {
        await c.close();
      }
    });

    gate.test('a sandbox_exec run in an explicit workspace', async () => {
      const c = await modernHttpClient(srv.url, { mode });
      try {
        const dir = tempDir('kiln-modern-http-ws-');
        const ws = structured(await c.client.callTool({ name: 'workspace_open', arguments: { path: dir } }));
        const run = structured(await c.client.callTool(
          { name: 'sandbox_exec', arguments: { workspace: ws.id, command: 'echo $((6 * 7)); echo made > made.txt; echo oops >&2; exit 3' } },
          { timeout: 60000 }));
        assert.equal(run.exit_code, 3);
        assert.equal(run.stop_reason, 'exit');
        assert.equal(run.stdout, '42\n');
        assert.equal(run.stderr, 'oops\n');
        assert.equal(run.fresh_sandbox, true);
        assert.match(run.trace_uri, /^kiln:\/\/trace\/tr_[0-9a-f]+$/);
        assert.equal(fs.readFileSync(path.join(dir, 'made.txt'), 'utf8'), 'made\n', 'the run wrote into the workspace');
        const noWs = await c.client.callTool({ name: 'sandbox_exec', arguments: { command: 'true' } });
        assert.equal(noWs.isError, true);
        assert.match(errorText(noWs), /pass "workspace"/);
        assertStateless(c.exchanges);
      } finally {
        await c.close();
      }
    });

    test('listen() on a file URI: file_write brings notifications/resources/updated on the listen stream', async () => {
      const c = await modernHttpClient(srv.url, { mode });
      try {
        const dir = tempDir('kiln-modern-http-ws-');
        const ws = structured(await c.client.callTool({ name: 'workspace_open', arguments: { path: dir } }));
        const uri = `file://${dir}/watched.txt`;
        const updates = [];
        c.client.setNotificationHandler('notifications/resources/updated', (n) => { updates.push(n.params); });
        const sub = await c.client.listen({ resourceSubscriptions: [uri] });
        assert.deepEqual(sub.honoredFilter.resourceSubscriptions, [uri]);
        const listenPost = c.exchanges.find((e) => e.body?.method === 'subscriptions/listen');
        assert.ok(listenPost, 'listen is a POST of its own');
        assert.match(listenPost.responseHeaders['content-type'], /^text\/event-stream/);
        // A file nobody listens to first, then the watched one: only the watched one is reported.
        structured(await c.client.callTool({ name: 'file_write', arguments: { workspace: ws.id, path: 'other.txt', content: 'x\n' } }));
        structured(await c.client.callTool({ name: 'file_write', arguments: { workspace: ws.id, path: 'watched.txt', content: 'v1\n' } }));
        await until('resources/updated for watched.txt', () => updates.some((u) => u.uri === uri));
        assert.deepEqual(updates.map((u) => u.uri), [uri], 'only the subscribed URI');
        assert.equal(updates[0]._meta['io.modelcontextprotocol/subscriptionId'], listenPost.body.id,
          'the subscription id is the listen request\'s id');
        await sub.close();
        assert.equal(await sub.closed, 'local');
        assertStateless(c.exchanges);
      } finally {
        await c.close();
      }
    });

    gate.test('cancelling a long sandbox_exec through an AbortSignal kills it; the server stays up', async () => {
      const c = await modernHttpClient(srv.url, { mode });
      try {
        const dir = tempDir('kiln-modern-http-ws-');
        const ws = structured(await c.client.callTool({ name: 'workspace_open', arguments: { path: dir } }));
        const marker = uniqueSleep();
        const ac = new AbortController();
        const p = c.client.callTool({
          name: 'sandbox_exec',
          arguments: { workspace: ws.id, command: `echo started > started.txt; setsid sh -c "sleep ${marker}" & sleep ${marker}; echo finished > finished.txt` },
        }, { signal: ac.signal, timeout: 120000 });
        p.catch(() => {});
        await until('the run to start', () => hostProcs(marker).length >= 2 && fs.existsSync(path.join(dir, 'started.txt')));
        ac.abort('the test cancels');
        await assert.rejects(p);
        await until('the tree to be gone', () => hostProcs(marker).length === 0);
        assert.equal(fs.existsSync(path.join(dir, 'finished.txt')), false, 'the command did not run on');
        assert.equal(srv.proc.exitCode, null, 'kiln serve is still running');
        const again = structured(await c.client.callTool({ name: 'sandbox_exec', arguments: { workspace: ws.id, command: 'echo still-here' } }, { timeout: 60000 }));
        assert.equal(again.stdout, 'still-here\n');
        const cancelled = await until('the trace to end', async () => {
          const { traces } = structured(await c.client.callTool({ name: 'trace_list', arguments: { workspace: ws.id, kind: 'exec' } }));
          const tr = traces.find((x) => x.command.includes(marker));
          return tr && tr.status !== 'running' ? tr : null;
        });
        assert.equal(cancelled.stop_reason, 'cancelled');
      } finally {
        await c.close();
      }
    });
  });
}

describe('raw modern requests: request metadata headers', () => {
  const listTools = (id) => modernBody(id, 'tools/list');
  const workspaceList = (id) => modernBody(id, 'tools/call', { name: 'workspace_list', arguments: {} });

  async function refused(r, status, code, id) {
    assert.equal(r.status, status);
    assert.match(r.headers.get('content-type'), /^application\/json/);
    assert.equal(r.headers.get('mcp-session-id'), null);
    const body = await r.json();
    assert.equal(body.jsonrpc, '2.0');
    assert.equal(body.id, id, 'the error carries the request id');
    assert.equal(body.error.code, code, JSON.stringify(body));
    return body.error;
  }

  test('a modern tools/call is answered on an SSE stream, without Mcp-Session-Id, resultType complete', async () => {
    const id = nextId();
    const r = await modernCall(srv.url, workspaceList(id));
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type'), /^text\/event-stream/);
    assert.equal(r.headers.get('mcp-session-id'), null);
    assert.equal(r.response.id, id);
    assert.equal(r.response.result.resultType, 'complete');
    assert.equal(r.response.result._meta['io.modelcontextprotocol/serverInfo'].name, 'kiln');
    assert.ok(Array.isArray(r.response.result.structuredContent.workspaces));
    for (const m of r.messages.slice(0, -1)) assert.ok('method' in m && !('id' in m), `only notifications before the response: ${JSON.stringify(m)}`);
  });

  // 2026-07-28 Streamable HTTP: "Resumable SSE streams via Last-Event-ID are not supported." An
  // event id (or the priming event that carries one) tells a client it may resume: the SDK v2
  // transport then answers a dropped stream with GET + Last-Event-ID, a legacy mechanism.
  test('a modern response stream offers no resumption: no event ids, no priming event', async () => {
    const r = await modernCall(srv.url, workspaceList(nextId()));
    assert.equal(r.status, 200);
    const withId = r.events.filter((e) => e.id !== undefined || e.retry !== undefined);
    assert.deepEqual(withId.map((e) => ({ id: e.id, retry: e.retry, data: e.data.slice(0, 60) })), [],
      'modern SSE events carry no id: and no retry:');
    assert.ok(r.events.every((e) => e.message), 'every event is a message (no empty priming event)');
  });

  test('missing MCP-Protocol-Version: 400 HeaderMismatch with the request id', async () => {
    const id = nextId();
    const err = await refused(await modernFetch(srv.url, listTools(id), { headers: { 'mcp-protocol-version': null } }), 400, HEADER_MISMATCH, id);
    assert.match(err.message, /MCP-Protocol-Version/);
  });

  test('MCP-Protocol-Version differing from _meta: 400 HeaderMismatch', async () => {
    const id = nextId();
    const err = await refused(await modernFetch(srv.url, listTools(id), { headers: { 'mcp-protocol-version': '2025-11-25' } }), 400, HEADER_MISMATCH, id);
    assert.match(err.message, /2025-11-25/);
  });

  test('Mcp-Method missing or differing from the method: 400 HeaderMismatch', async () => {
    let id = nextId();
    await refused(await modernFetch(srv.url, listTools(id), { headers: { 'mcp-method': 'prompts/list' } }), 400, HEADER_MISMATCH, id);
    id = nextId();
    await refused(await modernFetch(srv.url, listTools(id), { headers: { 'mcp-method': null } }), 400, HEADER_MISMATCH, id);
    id = nextId();
    // Header values are case-sensitive.
    await refused(await modernFetch(srv.url, listTools(id), { headers: { 'mcp-method': 'TOOLS/LIST' } }), 400, HEADER_MISMATCH, id);
  });

  test('Mcp-Name for tools/call: missing or differing (plain or base64) is 400 HeaderMismatch', async () => {
    let id = nextId();
    await refused(await modernFetch(srv.url, workspaceList(id), { headers: { 'mcp-name': null } }), 400, HEADER_MISMATCH, id);
    id = nextId();
    await refused(await modernFetch(srv.url, workspaceList(id), { headers: { 'mcp-name': 'workspace_open' } }), 400, HEADER_MISMATCH, id);
    id = nextId();
    await refused(await modernFetch(srv.url, workspaceList(id), { headers: { 'mcp-name': base64Sentinel('workspace_open') } }), 400, HEADER_MISMATCH, id);
    id = nextId();
    // A router that read the header would route to one tool while the body calls another.
    await refused(await modernFetch(srv.url, modernBody(id, 'tools/call', { name: 'file_delete', arguments: { path: 'x' } }),
      { headers: { 'mcp-name': 'file_read' } }), 400, HEADER_MISMATCH, id);
  });

  test('Mcp-Name in the =?base64?...?= form that matches is accepted', async () => {
    const id = nextId();
    const r = await modernCall(srv.url, workspaceList(id), { headers: { 'mcp-name': base64Sentinel('workspace_list') } });
    assert.equal(r.status, 200);
    assert.equal(r.response.id, id);
    assert.ok(Array.isArray(structured(r.response.result).workspaces));
    // And for resources/read, whose URI has characters a header cannot carry.
    const ws = await openWorkspace(srv.url, { 'ünï cödé.txt': 'wide\n' });
    const uri = `file://${ws.dir}/ünï cödé.txt`;
    const read = await modernCall(srv.url, modernBody(nextId(), 'resources/read', { uri }), { headers: { 'mcp-name': base64Sentinel(uri) } });
    assert.equal(read.status, 200);
    assert.equal(read.response.result.contents[0].text, 'wide\n');
    const wrong = nextId();
    await refused(await modernFetch(srv.url, modernBody(wrong, 'resources/read', { uri }), { headers: { 'mcp-name': base64Sentinel(`${uri}x`) } }),
      400, HEADER_MISMATCH, wrong);
  });

  test('an unsupported version in _meta (and in the header): 400 UnsupportedProtocolVersion with data.supported', async () => {
    const id = nextId();
    const body = modernBody(id, 'tools/list', {}, { version: '2099-01-01' });
    const err = await refused(await modernFetch(srv.url, body), 400, UNSUPPORTED_VERSION, id);
    assert.deepEqual(err.data.supported, SUPPORTED);
    assert.equal(err.data.requested, '2099-01-01');
  });

  test('an unknown method is 404 with -32601; so is a method 2026-07-28 does not have', async () => {
    let id = nextId();
    const err = await refused(await modernFetch(srv.url, modernBody(id, 'no/such/method')), 404, -32601, id);
    assert.match(err.message, /no\/such\/method/);
    id = nextId();
    await refused(await modernFetch(srv.url, modernBody(id, 'resources/subscribe', { uri: 'file:///tmp/x' })), 404, -32601, id);
    id = nextId();
    await refused(await modernFetch(srv.url, modernBody(id, 'logging/setLevel', { level: 'debug' })), 404, -32601, id);
  });

  test('a modern notification POST is accepted with 202 and no body', async () => {
    const note = modernBody(null, 'notifications/cancelled', { requestId: 424242, reason: 'nothing in flight' });
    const r = await modernFetch(srv.url, note);
    assert.equal(r.status, 202);
    assert.equal(await r.text(), '');
    assert.equal(r.headers.get('mcp-session-id'), null);
  });

  test('initialize with MCP-Protocol-Version: 2026-07-28 is 400 HeaderMismatch and makes no session', async () => {
    const r = await mcpFetch(srv.url, { body: initializeBody(77), headers: { 'mcp-protocol-version': MODERN } });
    await refused(r, 400, HEADER_MISMATCH, 77);
  });

  test('server/discover without a session or _meta: 200 with supportedVersions, no session made', async () => {
    const r = await modernCall(srv.url, { jsonrpc: '2.0', id: 5, method: 'server/discover' }, { headers: { 'mcp-protocol-version': null, 'mcp-method': null } });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('mcp-session-id'), null);
    assert.equal(r.response.id, 5);
    assert.deepEqual(r.response.result.supportedVersions, SUPPORTED);
    assert.ok(r.response.result.capabilities.tools);
    assert.equal(r.response.result._meta['io.modelcontextprotocol/serverInfo'].name, 'kiln');
    // With the envelope it answers the same versions.
    const m = await modernCall(srv.url, modernBody(6, 'server/discover'));
    assert.equal(m.status, 200);
    assert.deepEqual(m.response.result.supportedVersions, SUPPORTED);
  });
});

describe('closing a modern response stream', () => {
  gate.test('cancels its sandbox_exec: the process is gone afterwards, the server goes on', async () => {
    const ws = await openWorkspace(srv.url);
    const marker = uniqueSleep();
    const ac = new AbortController();
    const body = modernBody(nextId(), 'tools/call', {
      name: 'sandbox_exec',
      arguments: { workspace: ws.id, command: `setsid sh -c "sleep ${marker}" & sleep ${marker}; echo finished > finished.txt` },
    });
    const r = await modernFetch(srv.url, body, { signal: ac.signal });
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type'), /^text\/event-stream/);
    await until('the run to start', () => hostProcs(marker).length >= 2);
    ac.abort();  // the only cancellation signal on Streamable HTTP in 2026-07-28
    await until('the tree to be gone', () => hostProcs(marker).length === 0);
    assert.equal(fs.existsSync(path.join(ws.dir, 'finished.txt')), false);
    const traces = await until('the trace to end', async () => {
      const t = (await rawOk(srv.url, 'trace_list', { workspace: ws.id, kind: 'exec' })).traces.find((x) => x.command.includes(marker));
      return t && t.status !== 'running' ? t : null;
    });
    assert.equal(traces.stop_reason, 'cancelled');
    assert.equal(srv.proc.exitCode, null);
    assert.equal((await rawOk(srv.url, 'sandbox_exec', { workspace: ws.id, command: 'echo on' })).stdout, 'on\n');
  });
});

describe('modern requests are independent of each other', () => {
  gate.test('two in flight with the same JSON-RPC id: closing one stream cancels that one only', async () => {
    const ws = await openWorkspace(srv.url);
    const a = uniqueSleep(), b = uniqueSleep();
    const id = 'same-id';
    const acA = new AbortController();
    const rA = await modernFetch(srv.url, modernBody(id, 'tools/call', { name: 'sandbox_exec', arguments: { workspace: ws.id, command: `sleep ${a}` } }), { signal: acA.signal });
    const pB = modernCall(srv.url, modernBody(id, 'tools/call', {
      name: 'sandbox_exec',
      arguments: { workspace: ws.id, command: `m=${b}; while [ ! -f release-$m ]; do sleep 0.05; done; echo released` },
    }));
    assert.equal(rA.status, 200);
    await until('both runs to start', () => hostProcs(a).length >= 1 && hostProcs(b).length >= 1);
    acA.abort();
    await until('the first run to be gone', () => hostProcs(a).length === 0);
    assert.ok(hostProcs(b).length >= 1, 'the second run, with the same id, goes on');
    fs.writeFileSync(path.join(ws.dir, `release-${b}`), '');
    const B = await pB;
    assert.equal(B.response.id, id);
    assert.equal(structured(B.response.result).stdout, 'released\n');
  });
});

describe('kiln serve shutting down', () => {
  // subscriptions: "When the server ends a subscription on its own initiative (for example, during
  // shutdown), it SHOULD respond to the original subscriptions/listen request with a completion
  // result before closing the stream."
  test('ends each listen stream gracefully: the listen response, then the end; the SDK v2 sees "graceful"', async (t) => {
    const s = await serve();
    const ws = await openWorkspace(s.url);
    const uri = `file://${ws.dir}/w.txt`;
    const raw = await modernFetch(s.url, modernBody('listen-raw', 'subscriptions/listen', { notifications: { resourceSubscriptions: [uri] } }));
    assert.equal(raw.status, 200);
    const reader = new SseReader(raw);
    const [ack] = (await reader.until((m) => m.method === 'notifications/subscriptions/acknowledged')).slice(-1).map((e) => e.message);
    assert.equal(ack.params._meta['io.modelcontextprotocol/subscriptionId'], 'listen-raw');
    const c = await modernHttpClient(s.url);
    t.after(() => c.close().catch(() => {}));
    const sub = await c.client.listen({ resourceSubscriptions: [uri] });
    await s.stop();
    const rest = [];
    let cut = null;
    try {
      for (let ev = await reader.next(15000); ev; ev = await reader.next(15000)) rest.push(ev);
    } catch (e) {
      cut = e;
    }
    const last = rest.filter((e) => e.message).at(-1)?.message;
    assert.ok(last && last.id === 'listen-raw' && last.result?.resultType === 'complete' &&
      last.result._meta?.['io.modelcontextprotocol/subscriptionId'] === 'listen-raw' && !('error' in last),
      `the listen stream ended ${cut ? `abruptly (${cut.message})` : 'without the listen response'}: ${JSON.stringify(rest.map((e) => e.data))}`);
    assert.equal(cut, null, 'the stream ends normally after the response');
    assert.equal(await sub.closed, 'graceful');
    assert.deepEqual(c.exchanges.filter((e) => e.method !== 'POST').map((e) => [e.method, e.headers['last-event-id']]), [],
      'no GET resumption attempts');
  });
});

describe('tasks over Streamable HTTP (raw)', () => {
  const taskCall = (url, method, taskId, { headers, capabilities = TASKS_CAPABILITIES } = {}) =>
    modernCall(url, modernBody(nextId(), method, { taskId }, { capabilities }), { headers });

  async function pollTask(url, taskId, done, opts) {
    return until(`task ${taskId}`, async () => {
      const r = await taskCall(url, 'tasks/get', taskId, opts);
      assert.ok(r.response.result, JSON.stringify(r.response));
      return done(r.response.result) ? r.response.result : null;
    }, 60000, 100);
  }

  gate.test('verify as a task: a handle at once, tasks/get polled (Mcp-Name = taskId) until completed with the result', async () => {
    const ws = await openWorkspace(srv.url, {
      'kiln.json': { verify: [{ name: 'quick', run: 'test -f kiln.json && echo verified > verified.txt' }] },
    });
    // Without the extension the result comes inline: no task for a client that did not declare it.
    const inline = await rawTool(srv.url, 'verify', { workspace: ws.id });
    assert.equal(inline.result.resultType, 'complete');
    assert.equal(inline.result.taskId, undefined);
    assert.equal(structured(inline.result).status, 'pass');

    const created = await rawTool(srv.url, 'verify', { workspace: ws.id }, { capabilities: TASKS_CAPABILITIES });
    const t = created.result;
    assert.equal(t.resultType, 'task', JSON.stringify(created));
    assert.match(t.taskId, /\S/);
    assert.equal(t.status, 'working');
    for (const k of ['ttlMs', 'pollIntervalMs']) assert.equal(typeof t[k], 'number', k);
    for (const k of ['createdAt', 'lastUpdatedAt']) assert.ok(!Number.isNaN(Date.parse(t[k])), k);

    // The routing header is checked for tasks/* too.
    const noName = await taskCall(srv.url, 'tasks/get', t.taskId, { headers: { 'mcp-name': null } });
    assert.equal(noName.status, 400);
    assert.equal(noName.response.error.code, HEADER_MISMATCH);
    const otherName = await taskCall(srv.url, 'tasks/get', t.taskId, { headers: { 'mcp-name': 'task-0' } });
    assert.equal(otherName.status, 400);
    assert.equal(otherName.response.error.code, HEADER_MISMATCH);

    const done = await pollTask(srv.url, t.taskId, (x) => x.status !== 'working');
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.equal(done.resultType, 'complete');
    assert.equal(done.taskId, t.taskId);
    const v = structured(done.result);
    assert.equal(v.status, 'pass');
    assert.deepEqual(v.checks.map((c) => [c.name, c.status]), [['quick', 'pass']]);
    assert.equal(fs.readFileSync(path.join(ws.dir, 'verified.txt'), 'utf8'), 'verified\n');
    // Kept for its TTL: asked again, the same answer.
    const again = await taskCall(srv.url, 'tasks/get', t.taskId);
    assert.equal(again.response.result.status, 'completed');
    const unknown = await taskCall(srv.url, 'tasks/get', 'task-does-not-exist');
    assert.equal(unknown.response.error.code, -32602);
  });

  gate.test('tasks/cancel of a long sandbox_exec: acknowledged, the process is killed, status cancelled', async () => {
    const ws = await openWorkspace(srv.url);
    const marker = uniqueSleep();
    const created = await rawTool(srv.url, 'sandbox_exec',
      { workspace: ws.id, command: `setsid sh -c "sleep ${marker}" & sleep ${marker}; echo finished > finished.txt` },
      { capabilities: TASKS_CAPABILITIES });
    const t = created.result;
    assert.equal(t.resultType, 'task', JSON.stringify(created));
    await until('the run to start', () => hostProcs(marker).length >= 2);
    assert.equal((await taskCall(srv.url, 'tasks/get', t.taskId)).response.result.status, 'working');
    const ack = await taskCall(srv.url, 'tasks/cancel', t.taskId);
    assert.equal(ack.status, 200);
    assert.ok(ack.response.result, JSON.stringify(ack.response));
    assert.equal(ack.response.result.resultType, 'complete');
    await until('the tree to be gone', () => hostProcs(marker).length === 0);
    const end = await pollTask(srv.url, t.taskId, (x) => x.status !== 'working');
    assert.equal(end.status, 'cancelled', JSON.stringify(end));
    assert.equal(fs.existsSync(path.join(ws.dir, 'finished.txt')), false);
  });

  gate.test('tasks belong to a principal: another token cannot tasks/get or tasks/cancel them (-32602)', async () => {
    const dir = tempDir('kiln-modern-http-token-');
    const f = path.join(dir, 'tokens');
    const alice = 'a'.repeat(40), bob = 'b'.repeat(40);
    fs.writeFileSync(f, `alice ${alice}\nbob ${bob}\n`, { mode: 0o600 });
    const s = await serve({ args: ['--token-file', f] });
    const asAlice = { authorization: `Bearer ${alice}` }, asBob = { authorization: `Bearer ${bob}` };
    const ws = await openWorkspace(s.url, {}, { headers: asAlice });
    const marker = uniqueSleep();
    const created = await rawTool(s.url, 'sandbox_exec', { workspace: ws.id, command: `sleep ${marker}` },
      { capabilities: TASKS_CAPABILITIES, headers: asAlice });
    const { taskId } = created.result;
    assert.equal(created.result.resultType, 'task', JSON.stringify(created));
    await until('the run to start', () => hostProcs(marker).length >= 1);
    const get = await taskCall(s.url, 'tasks/get', taskId, { headers: asBob });
    assert.equal(get.response.error?.code, -32602, JSON.stringify(get.response));
    const never = await taskCall(s.url, 'tasks/get', `${taskId}0`, { headers: asBob });
    assert.equal(get.response.error.message.replace(taskId, 'ID'), never.response.error.message.replace(`${taskId}0`, 'ID'),
      'someone else\'s task reads like one that never existed');
    const cancel = await taskCall(s.url, 'tasks/cancel', taskId, { headers: asBob });
    assert.equal(cancel.response.error?.code, -32602, JSON.stringify(cancel.response));
    // Alice's task is untouched by Bob's attempts.
    assert.equal((await taskCall(s.url, 'tasks/get', taskId, { headers: asAlice })).response.result.status, 'working');
    assert.ok(hostProcs(marker).length >= 1, 'the run goes on');
    assert.ok((await taskCall(s.url, 'tasks/cancel', taskId, { headers: asAlice })).response.result);
    await until('the run to end', () => hostProcs(marker).length === 0);
  });
});

describe('a modern and a legacy client on one kiln serve --mcp', () => {
  test('interleaved: both list and call tools; legacy keeps its session and current workspace, modern passes ids; legacy subscribe + GET stream still gets updates', async () => {
    const wsL = tempDir('kiln-modern-http-legacy-');
    const wsM = tempDir('kiln-modern-http-modern-');
    fs.writeFileSync(path.join(wsL, 'only-legacy.txt'), 'L\n');
    fs.writeFileSync(path.join(wsM, 'only-modern.txt'), 'M\n');
    const legacy = await httpClient(srv.url, { name: 'legacy-v1' });
    const modern = await modernHttpClient(srv.url, { mode: { pin: MODERN }, name: 'modern-v2' });
    const sessionId = legacy.sessionId;
    try {
      assert.match(sessionId, /^[0-9a-f]{64}$/);
      const [toolsL, toolsM] = await Promise.all([legacy.client.listTools(), modern.client.listTools()]);
      assert.deepEqual(toolsM.tools.map((t) => t.name), toolsL.tools.map((t) => t.name), 'one tool list, in the same order, for both eras');
      const [openL, openM] = await Promise.all([
        legacy.client.callTool({ name: 'workspace_open', arguments: { path: wsL } }),
        modern.client.callTool({ name: 'workspace_open', arguments: { path: wsM } }),
      ]);
      const idL = structured(openL).id, idM = structured(openM).id;
      assert.notEqual(idL, idM);

      // The legacy session subscribes and listens on its GET stream; the modern client listens too.
      const uriL = `file://${wsL}/shared.txt`;
      await legacy.client.subscribeResource({ uri: uriL });
      const modernUpdates = [];
      modern.client.setNotificationHandler('notifications/resources/updated', (n) => { modernUpdates.push(n.params.uri); });
      const sub = await modern.client.listen({ resourceSubscriptions: [uriL] });

      for (let round = 0; round < 4; round++) {
        const [listL, infoL, listM, infoM, noWs] = await Promise.all([
          legacy.client.callTool({ name: 'file_list', arguments: {} }),
          legacy.client.callTool({ name: 'workspace_info', arguments: {} }),
          modern.client.callTool({ name: 'file_list', arguments: { workspace: idM } }),
          modern.client.callTool({ name: 'workspace_info', arguments: { workspace: idM } }),
          modern.client.callTool({ name: 'file_list', arguments: {} }),
        ]);
        assert.ok(structured(listL).entries.some((e) => e.path === 'only-legacy.txt'), `round ${round}: legacy current workspace`);
        assert.ok(!structured(listL).entries.some((e) => e.path === 'only-modern.txt'));
        assert.equal(structured(infoL).root, wsL);
        assert.ok(structured(listM).entries.some((e) => e.path === 'only-modern.txt'), `round ${round}: modern explicit workspace`);
        assert.equal(structured(infoM).root, wsM);
        assert.equal(noWs.isError, true, 'the legacy session\'s current workspace is not the modern client\'s');
        assert.match(errorText(noWs), /pass "workspace"/);
      }

      // The modern client writes into the legacy client's workspace: both listeners hear it.
      structured(await modern.client.callTool({ name: 'file_write', arguments: { workspace: idL, path: 'shared.txt', content: 'from modern\n' } }));
      const updated = (m) => m.method === 'notifications/resources/updated' && m.params?.uri === uriL;
      await until('the legacy session\'s resources/updated', () => legacy.wire.some(updated));
      await until('the modern listener\'s resources/updated', () => modernUpdates.includes(uriL));
      // And the other way round: the legacy client writes, both hear it again.
      const before = legacy.wire.filter(updated).length;
      structured(await legacy.client.callTool({ name: 'file_write', arguments: { path: 'shared.txt', content: 'from legacy\n' } }));
      await until('a second legacy update', () => legacy.wire.filter(updated).length > before);
      await until('a second modern update', () => modernUpdates.filter((u) => u === uriL).length >= 2);
      assert.equal(fs.readFileSync(path.join(wsL, 'shared.txt'), 'utf8'), 'from legacy\n');

      assert.equal(legacy.sessionId, sessionId, 'the legacy session is the same throughout');
      const still = structured(await legacy.client.callTool({ name: 'workspace_info', arguments: {} }));
      assert.equal(still.root, wsL);
      assertStateless(modern.exchanges);
      await sub.close();
    } finally {
      await modern.close().catch(() => {});
      await legacy.terminate().catch(() => {});
    }
    // The legacy session ended with DELETE; a modern request still works on the same server.
    assert.equal((await mcpFetch(srv.url, { body: { jsonrpc: '2.0', id: 1, method: 'ping' }, session: sessionId })).status, 404);
    assert.ok(Array.isArray((await rawOk(srv.url, 'workspace_list', {})).workspaces));
  });
});
