// Issue 20 attacked: MCP 2026-07-28 ("modern", stateless) beside 2025-11-25 on one server, as an
// outsider would try it. Two principals of one `kiln serve --mcp` (a --token-file of alice and
// bob) and each other's tasks, traces and streams; one hostile client holding modern requests,
// listen streams and tasks open while another must still be served; the envelope and header
// checks (duplicate keys, odd Mcp-Name encodings, eras mixed on one session); stdio races between
// a task's end and its cancellation; closing a stream or cancelling a task must kill the whole
// sandboxed process tree; secrets asked of the person (the page must say who asks, one client
// must not void another's page, the page token and the value stay out of what the model reads).
// No timing is asserted: deadlines only bound how long a failure takes to show.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, describe, test } from 'node:test';

import { RawServer } from '../lib/kiln.mjs';
import { filesHolding } from '../lib/leak_scan.mjs';
import {
  MODERN, SseReader, TASKS_CAPABILITIES, base64Sentinel, mcpFetch, modernBody, modernCall, modernFetch, modernHeaders,
  rawSession, startServe,
} from '../lib/mcp_http.mjs';
import { marker, pgrep, rand, sleep, tempDir, waitFor, waitGone } from './lib.mjs';

const servers = [];
after(async () => { for (const s of servers) await s.stop().catch(() => {}); });

async function serve(opts = {}) {
  const s = await startServe(opts);
  servers.push(s);
  return s;
}

// A server with two named principals; `as(who)` is the Authorization header of each.
async function serveTwo(opts = {}) {
  const dir = tempDir('kiln-sec-modern-tokens-');
  const tok = { alice: `alice-${rand()}${rand()}${rand()}`, bob: `bob-${rand()}${rand()}${rand()}` };
  fs.writeFileSync(path.join(dir, 'tokens'), `alice ${tok.alice}\nbob ${tok.bob}\n`, { mode: 0o600 });
  const s = await serve({ ...opts, args: ['--token-file', path.join(dir, 'tokens'), ...(opts.args ?? [])] });
  s.as = (who) => ({ authorization: `Bearer ${tok[who]}` });
  return s;
}

// One modern request as `who`, answered in full (the JSON-RPC response in .response).
function mcall(s, who, id, method, params = {}, { capabilities = TASKS_CAPABILITIES, headers = {}, timeoutMs } = {}) {
  return modernCall(s.url, modernBody(id, method, params, { capabilities }), { headers: { ...s.as(who), ...headers }, timeoutMs });
}

function resultOf(r, what) {
  assert.ok(r.response?.result, `${what}: no result: HTTP ${r.status} ${JSON.stringify(r.response).slice(0, 600)}`);
  return r.response.result;
}
function toolOk(r, what) {
  const res = resultOf(r, what);
  assert.ok(!res.isError, `${what}: tool error: ${JSON.stringify(res.content).slice(0, 600)}`);
  return res.structuredContent;
}

async function openWorkspace(s, who, ws = tempDir('kiln-sec-modern-ws-')) {
  const info = toolOk(await mcall(s, who, 'open', 'tools/call', { name: 'workspace_open', arguments: { path: ws } }), 'workspace_open');
  assert.ok(info.id, JSON.stringify(info));
  return { ws, id: info.id };
}

// A legacy request on a session, answered as JSON or as an SSE stream whose last message is the reply.
async function legacyCall(s, session, who, body) {
  const r = await mcpFetch(s.url, { body, session, headers: s.as(who) });
  const type = r.headers.get('content-type') ?? '';
  if (type.startsWith('text/event-stream')) {
    const msgs = (await new SseReader(r).rest(60000)).filter((e) => e.message).map((e) => e.message);
    return { status: r.status, response: msgs.find((m) => m.id === body.id) };
  }
  const text = await r.text();
  return { status: r.status, response: text ? JSON.parse(text) : undefined };
}

const ghost = (id) => id.replace(/[0-9a-f]/g, (c) => (c === '0' ? '1' : '0'));
// An error with `id` written as ID, so a refusal of someone else's id can be compared to the
// refusal of an id that never existed.
const shapeOf = (r, id) => JSON.stringify({ status: r.status, error: r.response?.error, result: r.response?.result }).split(id).join('ID');

// ---- 1. principals -----------------------------------------------------------------------------

describe('modern era: two principals of one kiln serve --mcp', () => {
  test('bob cannot get, cancel, wait on, list or listen to alice\'s task and its trace; refusals match an id that never existed', { timeout: 240000 }, async () => {
    const s = await serveTwo();
    const mark = marker();
    const { id: ws } = await openWorkspace(s, 'alice');
    const started = resultOf(await mcall(s, 'alice', 1, 'tools/call',
      { name: 'sandbox_exec', arguments: { workspace: ws, command: `echo alice-task-output; sleep ${mark}` } }), 'task start');
    assert.equal(started.resultType, 'task', JSON.stringify(started));
    const tid = started.taskId;
    assert.match(tid, /^task-[0-9a-f]{32}$/, 'a task id carries 128 random bits');
    await waitFor(() => pgrep(`sleep ${mark}`).length > 0, 60000);

    // Modern: tasks/get, tasks/cancel, tasks/update by bob.
    for (const [method, extra] of [['tasks/get', {}], ['tasks/cancel', {}], ['tasks/update', { inputResponses: {} }]]) {
      const theirs = await mcall(s, 'bob', 2, method, { taskId: tid, ...extra });
      const missing = await mcall(s, 'bob', 2, method, { taskId: ghost(tid), ...extra });
      assert.ok(theirs.response?.error, `${method} of alice's task answered bob: ${JSON.stringify(theirs.response).slice(0, 400)}`);
      assert.equal(shapeOf(theirs, tid), shapeOf(missing, ghost(tid)), `${method}: the refusal tells alice's task from a missing one`);
      assert.ok(!JSON.stringify(theirs.response).includes('alice-task-output'));
    }

    // Legacy: bob's own session with tasks, alice's id.
    const { session } = await rawSession(s.url, { capabilities: { tasks: {} }, headers: s.as('bob') });
    for (const method of ['tasks/get', 'tasks/result', 'tasks/cancel']) {
      const theirs = await legacyCall(s, session, 'bob', { jsonrpc: '2.0', id: 3, method, params: { taskId: tid } });
      const missing = await legacyCall(s, session, 'bob', { jsonrpc: '2.0', id: 3, method, params: { taskId: ghost(tid) } });
      assert.ok(theirs.response?.error, `legacy ${method} of alice's task answered bob: ${JSON.stringify(theirs.response).slice(0, 400)}`);
      assert.equal(shapeOf(theirs, tid), shapeOf(missing, ghost(tid)), `legacy ${method}: the refusal tells the ids apart`);
    }
    const listed = await legacyCall(s, session, 'bob', { jsonrpc: '2.0', id: 4, method: 'tasks/list', params: {} });
    assert.deepEqual(listed.response?.result?.tasks, [], `bob's tasks/list: ${JSON.stringify(listed.response)}`);

    // Alice's running trace: bob can neither read it nor listen to it (modern listen, legacy subscribe).
    const traces = toolOk(await mcall(s, 'alice', 5, 'tools/call', { name: 'trace_list', arguments: { workspace: ws } }), 'trace_list').traces;
    const trace = traces.find((t) => t.status === 'running' || !t.ended_at)?.trace_id ?? traces[0]?.trace_id;
    assert.ok(trace, `alice has a trace: ${JSON.stringify(traces)}`);
    const uri = `kiln://trace/${trace}`, fake = `kiln://trace/${ghost(trace)}`;
    const readTheirs = await mcall(s, 'bob', 6, 'resources/read', { uri });
    const readMissing = await mcall(s, 'bob', 6, 'resources/read', { uri: fake });
    assert.ok(readTheirs.response?.error, `bob read alice's trace: ${JSON.stringify(readTheirs.response).slice(0, 300)}`);
    assert.equal(shapeOf(readTheirs, trace), shapeOf(readMissing, ghost(trace)));
    const listen = async (u) => {
      const r = await modernFetch(s.url, modernBody(7, 'subscriptions/listen', { notifications: { resourceSubscriptions: [u] } }), { headers: s.as('bob') });
      const first = await new SseReader(r).next(30000);
      return { status: r.status, response: first?.message };
    };
    const lTheirs = await listen(uri), lMissing = await listen(fake);
    assert.ok(lTheirs.response?.error, `bob listens to alice's trace: ${JSON.stringify(lTheirs.response)}`);
    assert.equal(shapeOf(lTheirs, trace), shapeOf(lMissing, ghost(trace)));
    const sub = await legacyCall(s, session, 'bob', { jsonrpc: '2.0', id: 8, method: 'resources/subscribe', params: { uri } });
    assert.ok(sub.response?.error, `bob subscribed to alice's trace: ${JSON.stringify(sub.response)}`);

    // Untouched: alice's task still works and is hers to cancel; cancel kills the run.
    const mine = resultOf(await mcall(s, 'alice', 9, 'tasks/get', { taskId: tid }), 'alice tasks/get');
    assert.equal(mine.status, 'working', JSON.stringify(mine));
    assert.ok(pgrep(`sleep ${mark}`).length > 0, 'bob\'s attempts killed alice\'s run');
    resultOf(await mcall(s, 'alice', 10, 'tasks/cancel', { taskId: tid }), 'alice tasks/cancel');
    assert.ok(await waitGone(`sleep ${mark}`, 30000), 'tasks/cancel left the sandboxed process running');
  });

  test('task ids are 128-bit random and never repeat; a tasks/get of a guessed neighbour finds nothing', { timeout: 120000 }, async () => {
    const s = await serveTwo();
    const { id: ws } = await openWorkspace(s, 'alice');
    const ids = [];
    for (let i = 0; i < 8; i++) {
      const t = resultOf(await mcall(s, 'alice', i, 'tools/call', { name: 'sandbox_exec', arguments: { workspace: ws, command: 'true' } }), 'task');
      ids.push(t.taskId);
    }
    assert.equal(new Set(ids).size, ids.length);
    for (const id of ids) assert.match(id, /^task-[0-9a-f]{32}$/);
    // Neighbours by value: a counter or a timestamp would make these hit.
    for (const id of ids) {
      const n = BigInt(`0x${id.slice(5)}`);
      for (const d of [1n, -1n]) {
        const near = `task-${(n + d).toString(16).padStart(32, '0')}`;
        if (ids.includes(near)) assert.fail(`task ids are sequential: ${near}`);
        assert.ok((await mcall(s, 'alice', 99, 'tasks/get', { taskId: near })).response?.error);
      }
    }
  });

  test('bob holding 1,100 subscriptions/listen streams open does not lock alice out (modern and legacy)', { timeout: 300000 }, async () => {
    const s = await serveTwo();
    const held = [];
    const refused = {};
    let fetchErrors = 0;
    const openOne = async (i) => {
      try {
        const r = await modernFetch(s.url, modernBody(`l${i}`, 'subscriptions/listen', { notifications: {} }), { headers: s.as('bob') });
        if (r.status !== 200) { refused[r.status] = (refused[r.status] ?? 0) + 1; await r.text().catch(() => {}); return; }
        const reader = new SseReader(r);
        await reader.next(60000);  // the acknowledgement: the stream is held by the server
        held.push(reader);
      } catch { fetchErrors += 1; }
    };
    try {
      for (let i = 0; i < 1100; i += 50) await Promise.all(Array.from({ length: 50 }, (_, j) => openOne(i + j)));
      // Alice, a different principal, on the same server.
      const discover = await Promise.race([
        mcall(s, 'alice', 'a1', 'tools/list', {}, { capabilities: {} }).catch((e) => ({ status: `fetch failed: ${e.cause?.message ?? e.message}` })),
        sleep(30000).then(() => ({ status: 'no answer in 30 s' })),
      ]);
      assert.equal(discover.status, 200,
        `alice's modern tools/list while bob holds ${held.length} listen streams (bob refused: ${JSON.stringify(refused)}, ` +
        `fetch errors ${fetchErrors}): HTTP ${discover.status} ${String(JSON.stringify(discover.response)).slice(0, 300)}`);
      assert.ok(resultOf(discover, 'tools/list').tools.length > 0);
      const init = await mcpFetch(s.url, {
        body: { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'alice', version: '0' } } },
        headers: s.as('alice'),
      });
      assert.equal(init.status, 200, `alice's legacy initialize while bob holds ${held.length} listen streams: ${await init.text()}`);
    } finally {
      for (const r of held) await r.cancel();
    }
  });

  test('bob\'s 8 running tasks hit bob\'s cap (TaskRegistry::kMaxRunningPerPrincipal), not alice\'s; cancelling them kills every run', { timeout: 300000 }, async () => {
    const s = await serveTwo();
    const mark = marker();
    const { id: ws } = await openWorkspace(s, 'bob');
    const { id: wsA } = await openWorkspace(s, 'alice');
    const tasks = [];
    let refusal = null;
    for (let i = 0; i < 20 && !refusal; i++) {
      const r = await mcall(s, 'bob', i, 'tools/call', { name: 'sandbox_exec', arguments: { workspace: ws, command: `sleep ${mark}` } });
      if (r.response?.result?.resultType === 'task') tasks.push(r.response.result.taskId);
      else refusal = r;
    }
    try {
      assert.equal(tasks.length, 8, `bob started ${tasks.length} tasks before a refusal`);
      assert.ok(refusal?.response?.error || refusal?.response?.result?.isError, `the 9th: ${JSON.stringify(refusal?.response).slice(0, 300)}`);
      const a = resultOf(await mcall(s, 'alice', 'a', 'tools/call', { name: 'sandbox_exec', arguments: { workspace: wsA, command: 'echo alice-ok' } }), 'alice task');
      assert.equal(a.resultType, 'task', `alice is refused because of bob's tasks: ${JSON.stringify(a)}`);
      await waitFor(async () => resultOf(await mcall(s, 'alice', 'g', 'tasks/get', { taskId: a.taskId }), 'get').status !== 'working', 60000, 300);
      const done = resultOf(await mcall(s, 'alice', 'g', 'tasks/get', { taskId: a.taskId }), 'get');
      assert.equal(done.status, 'completed', `alice's task while ${pgrep(`sleep ${mark}`).length} of bob's ${tasks.length} runs are live: ${JSON.stringify(done)}`);
      assert.match(JSON.stringify(done.result), /alice-ok/);
    } finally {
      var unanswered = [];  // checked below, so a failure above is the one reported
      for (const t of tasks) {
        const c = await mcall(s, 'bob', 'c', 'tasks/cancel', { taskId: t });
        if (!c.response?.result) unanswered.push(`${t}: HTTP ${c.status} ${JSON.stringify(c.response ?? c.events).slice(0, 200)}`);
      }
    }
    assert.deepEqual(unanswered, [], 'tasks/cancel answered every task');
    assert.ok(await waitGone(`sleep ${mark}`, 60000), `runs left after cancelling bob's tasks: ${pgrep(`sleep ${mark}`).length}`);
    for (const t of tasks) {
      assert.equal(resultOf(await mcall(s, 'bob', 'g', 'tasks/get', { taskId: t }), 'get').status, 'cancelled');
    }
  });
});

// ---- 2. the envelope and the headers -----------------------------------------------------------

describe('modern era: envelope, header and era games on HTTP', () => {
  const alive = async (s) => {
    const r = await modernCall(s.url, modernBody('alive', 'tools/list', {}));
    assert.equal(r.status, 200, `the server stopped answering: ${String(JSON.stringify(r.response)).slice(0, 300)}`);
    assert.ok(r.response.result.tools.length > 0);
  };

  test('a body with "method" twice is refused whichever one Mcp-Method names, and neither method runs', async () => {
    const s = await serve();
    const ws = tempDir('kiln-sec-modern-dup-');
    const open = await modernCall(s.url, modernBody(1, 'tools/call', { name: 'workspace_open', arguments: { path: ws } }));
    const wsid = resultOf(open, 'open').structuredContent.id;
    const pwned = path.join(ws, 'pwned');
    const meta = JSON.stringify(modernBody(0, 'x', {}).params._meta);
    const body = `{"jsonrpc":"2.0","id":2,"method":"tools/list","method":"tools/call","params":{"name":"sandbox_exec",`
      + `"arguments":{"workspace":"${wsid}","command":"touch ${pwned}"},"_meta":${meta}}}`;
    for (const m of ['tools/list', 'tools/call']) {
      const r = await mcpFetch(s.url, { body, headers: { 'mcp-protocol-version': MODERN, 'mcp-method': m, 'mcp-name': 'sandbox_exec' } });
      const text = await r.text();
      assert.equal(r.status, 400, `Mcp-Method ${m}: HTTP ${r.status} ${text.slice(0, 300)}`);
      assert.match(text, /duplicate/i);
    }
    // "name" twice: the header names one, the body executes the other?
    const twice = `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"file_read","name":"sandbox_exec",`
      + `"arguments":{"workspace":"${wsid}","path":"x","command":"touch ${pwned}"},"_meta":${meta}}}`;
    for (const n of ['file_read', 'sandbox_exec']) {
      const r = await mcpFetch(s.url, { body: twice, headers: { 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': n } });
      assert.equal(r.status, 400, `Mcp-Name ${n}: ${(await r.text()).slice(0, 300)}`);
    }
    await sleep(500);
    assert.ok(!fs.existsSync(pwned), 'a duplicated key ran sandbox_exec');
    await alive(s);
  });

  test('Mcp-Name in odd encodings: invalid base64, a sentinel of another name, raw non-ASCII bytes: 400 -32020 and nothing runs', async () => {
    const s = await serve();
    const ws = tempDir('kiln-sec-modern-name-');
    const wsid = resultOf(await modernCall(s.url, modernBody(1, 'tools/call', { name: 'workspace_open', arguments: { path: ws } })), 'open').structuredContent.id;
    const pwned = path.join(ws, 'pwned');
    const body = modernBody(2, 'tools/call', { name: 'sandbox_exec', arguments: { workspace: wsid, command: `touch ${pwned}` } });
    for (const name of ['=?base64?***?=', '=?base64?' + 'c2FuZGJveF9leGVj' + '=?=', base64Sentinel('file_read'), base64Sentinel('sandbox_exec\0'),
      base64Sentinel(' sandbox_exec'), base64Sentinel('sandbox_exec\n'), '=?base64??=', '=?base64?c2FuZGJveF9leGVj']) {
      // (Trailing spaces are not tried: HTTP strips a field value's surrounding whitespace.)
      const r = await modernCall(s.url, body, { headers: { 'mcp-name': name } });
      assert.equal(r.status, 400, `Mcp-Name ${JSON.stringify(name)}: HTTP ${r.status} ${String(JSON.stringify(r.response)).slice(0, 300)}`);
      assert.equal(r.response?.error?.code, -32020, `Mcp-Name ${JSON.stringify(name)}: ${JSON.stringify(r.response)}`);
      assert.equal(r.response.id, 2);
    }
    // Raw bytes a fetch client would not send: Latin-1 0xff, a bare CR inside the value.
    const port = Number(new URL(s.base).port);
    const json = JSON.stringify(body);
    for (const bad of [Buffer.from([0x73, 0xff, 0x62]), Buffer.from('sandbox_exec\rX-Injected: 1', 'latin1')]) {
      const head = Buffer.concat([Buffer.from(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${s.token}\r\n`
        + `Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: ${MODERN}\r\n`
        + `Mcp-Method: tools/call\r\nMcp-Name: `), bad, Buffer.from(`\r\nContent-Length: ${Buffer.byteLength(json)}\r\nConnection: close\r\n\r\n${json}`)]);
      const answer = await new Promise((resolve) => {
        const sock = net.connect(port, '127.0.0.1', () => sock.write(head));
        let got = '';
        sock.on('data', (d) => { got += d.toString('latin1'); });
        sock.on('close', () => resolve(got));
        sock.on('error', () => resolve(got));
        setTimeout(() => sock.destroy(), 20000);
      });
      assert.match(answer, /^HTTP\/1\.1 4\d\d/, `raw Mcp-Name ${bad.toString('hex')}: ${answer.slice(0, 300)}`);
    }
    await sleep(500);
    assert.ok(!fs.existsSync(pwned), 'a mismatched Mcp-Name ran sandbox_exec');
    await alive(s);
  });

  test('hostile _meta: 200,000 levels deep, 6 MiB of it, 1,001 listen URIs, a deep progressToken: refused, and the server answers after', { timeout: 120000 }, async () => {
    const s = await serve();
    const send = (text, method = 'tools/list') => mcpFetch(s.url, { body: text, headers: { 'mcp-protocol-version': MODERN, 'mcp-method': method } });
    const meta = modernBody(0, 'x', {}).params._meta;
    const deep = '['.repeat(200000) + ']'.repeat(200000);
    const metaText = JSON.stringify(meta).slice(0, -1);
    for (const [what, text] of [
      ['deep _meta value', `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":${metaText},"x":${deep}}}}`],
      ['deep progressToken', `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":${metaText},"progressToken":${deep}}}}`],
      ['deep id', `{"jsonrpc":"2.0","id":${deep},"method":"tools/list","params":{"_meta":${metaText}}}}`],
    ]) {
      const r = await send(text);
      assert.ok(r.status >= 400 && r.status < 500, `${what}: HTTP ${r.status}`);
      await r.text();
      await alive(s);
    }
    // A deep but allowed progressToken (an array is no valid token) and megabytes of _meta.
    const tok = await modernCall(s.url, modernBody(3, 'tools/list', { _meta: { progressToken: JSON.parse('['.repeat(60) + ']'.repeat(60)) } }));
    assert.ok([200, 400].includes(tok.status));
    const big = await modernCall(s.url, modernBody(4, 'tools/list', { _meta: { junk: 'x'.repeat(6 << 20) } }));
    assert.ok(big.status === 200 || big.status === 413 || big.status === 400, `6 MiB _meta: HTTP ${big.status}`);
    await alive(s);
    const many = await modernFetch(s.url, modernBody(5, 'subscriptions/listen', { notifications: { resourceSubscriptions: Array.from({ length: 1001 }, (_, i) => `file:///x${i}`) } }));
    const first = await new SseReader(many).next(30000).catch(() => null);
    const err = first?.message?.error ?? (many.headers.get('content-type')?.startsWith('application/json') ? null : null);
    assert.ok(many.status === 400 || err, `1,001 listen URIs accepted: HTTP ${many.status} ${JSON.stringify(first?.message)}`);
    await alive(s);
  });

  test('a modern request carrying a legacy session id gets none of that session\'s state, and bob\'s with alice\'s session id neither', async () => {
    const s = await serveTwo();
    const ws = tempDir('kiln-sec-modern-mix-');
    fs.writeFileSync(path.join(ws, 'alice-only.txt'), 'alice-session-file\n');
    const { session } = await rawSession(s.url, { headers: s.as('alice') });
    const opened = await legacyCall(s, session, 'alice', { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'workspace_open', arguments: { path: ws } } });
    assert.ok(opened.response?.result && !opened.response.result.isError, JSON.stringify(opened.response).slice(0, 300));
    for (const who of ['alice', 'bob']) {
      const r = await mcall(s, who, 2, 'tools/call', { name: 'file_read', arguments: { path: 'alice-only.txt' } }, { headers: { 'mcp-session-id': session } });
      assert.ok(!JSON.stringify(r.response).includes('alice-session-file'), `${who}'s modern request read through alice's session: ${JSON.stringify(r.response).slice(0, 300)}`);
      assert.equal(r.headers.get('mcp-session-id'), null, `${who}: a modern answer carries a session id`);
    }
    // A session request whose version header says 2026-07-28 but whose body has no envelope.
    const r = await mcpFetch(s.url, { body: { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'file_read', arguments: { path: 'alice-only.txt' } } },
      session, headers: { ...s.as('bob'), 'mcp-protocol-version': MODERN } });
    const text = await r.text();
    assert.ok(!text.includes('alice-session-file'), `bob read alice's file via her session id: ${text.slice(0, 300)}`);
    // Version header and body disagree.
    const mism = await modernCall(s.url, modernBody(4, 'tools/list', {}), { headers: { ...s.as('alice'), 'mcp-protocol-version': '2025-11-25' } });
    assert.equal(mism.status, 400);
    assert.equal(mism.response?.error?.code, -32020, JSON.stringify(mism.response));
  });
});

// ---- 3. cancellation must kill the process tree ------------------------------------------------

// A tree that tries to outlive its parent: its own session, a double fork, TERM ignored.
const tree = (m) => `trap '' TERM; setsid sh -c "trap '' TERM; sleep ${m}1" & (sh -c "sleep ${m}2" &) ; sleep ${m}3`;
const treeGone = (m) => waitFor(() => [1, 2, 3].every((i) => pgrep(`sleep ${m}${i}`).length === 0), 30000);
const treeUp = (m) => waitFor(() => [1, 2, 3].every((i) => pgrep(`sleep ${m}${i}`).length > 0), 60000);

describe('modern era: cancellation', () => {
  test('closing a modern tools/call stream kills the whole sandboxed tree', { timeout: 120000 }, async () => {
    const s = await serve();
    const m = marker().slice(0, 6);
    const wsid = resultOf(await modernCall(s.url, modernBody(1, 'tools/call', { name: 'workspace_open', arguments: { path: tempDir('kiln-sec-modern-c-') } })), 'open').structuredContent.id;
    const ctl = new AbortController();
    const r = await modernFetch(s.url, modernBody(2, 'tools/call', { name: 'sandbox_exec', arguments: { workspace: wsid, command: tree(m) } }), { signal: ctl.signal });
    assert.equal(r.status, 200);
    try {
      assert.ok(await treeUp(m), 'the tree started');
      ctl.abort();
    } finally { ctl.abort(); }
    assert.ok(await treeGone(m), `left running after the stream closed: ${[1, 2, 3].map((i) => pgrep(`sleep ${m}${i}`).length)}`);
  });

  test('tasks/cancel kills the whole tree, and a cancelled task never turns completed or failed', { timeout: 120000 }, async () => {
    const s = await serve();
    const m = marker().slice(0, 6);
    const call = (id, method, params) => modernCall(s.url, modernBody(id, method, params, { capabilities: TASKS_CAPABILITIES }));
    const wsid = resultOf(await call(1, 'tools/call', { name: 'workspace_open', arguments: { path: tempDir('kiln-sec-modern-c-') } }), 'open').structuredContent.id;
    const t = resultOf(await call(2, 'tools/call', { name: 'sandbox_exec', arguments: { workspace: wsid, command: tree(m) } }), 'task');
    assert.equal(t.resultType, 'task');
    assert.ok(await treeUp(m), 'the tree started');
    assert.deepEqual(Object.keys(resultOf(await call(3, 'tasks/cancel', { taskId: t.taskId }), 'cancel')).filter((k) => !['_meta', 'resultType'].includes(k)), []);
    assert.ok(await treeGone(m), `left running after tasks/cancel: ${[1, 2, 3].map((i) => pgrep(`sleep ${m}${i}`).length)}`);
    for (let i = 0; i < 6; i++) {
      const g = resultOf(await call(4, 'tasks/get', { taskId: t.taskId }), 'get');
      assert.equal(g.status, 'cancelled', `poll ${i}: ${JSON.stringify(g).slice(0, 400)}`);
      assert.equal(g.result, undefined);
      await sleep(300);
    }
  });
});

// ---- 4. stdio: eras, races, EOF ----------------------------------------------------------------

const stdioMeta = (caps = {}) => modernBody(0, 'x', {}, { capabilities: caps }).params._meta;

describe('modern era on stdio: races and era mixing', () => {
  test('tasks/cancel racing a task\'s end: the ack is {} and the first terminal status never changes', { timeout: 180000 }, async () => {
    const ws = tempDir('kiln-sec-modern-race-');
    const raw = new RawServer({ args: ['--workspace', ws] });
    try {
      const meta = stdioMeta(TASKS_CAPABILITIES);
      const seen = {};
      for (let i = 0; i < 12; i++) {
        const t = await raw.request(`t${i}`, 'tools/call', { name: 'sandbox_exec', arguments: { command: i % 2 ? 'true' : 'echo x' }, _meta: meta }, 60000);
        assert.equal(t.result?.resultType, 'task', JSON.stringify(t));
        if (i % 3) await sleep(i * 40);
        const c = await raw.request(`c${i}`, 'tasks/cancel', { taskId: t.result.taskId, _meta: meta }, 30000);
        assert.ok(c.result, `tasks/cancel: ${JSON.stringify(c)}`);
        let first = null;
        for (let p = 0; p < 5; p++) {
          const g = await raw.request(`g${i}-${p}`, 'tasks/get', { taskId: t.result.taskId, _meta: meta }, 30000);
          const st = g.result?.status;
          assert.ok(st, JSON.stringify(g));
          if (st !== 'working') {
            if (first === null) first = st;
            assert.equal(st, first, `task ${i} went from ${first} to ${st}`);
          }
          await sleep(150);
        }
        seen[first] = (seen[first] ?? 0) + 1;
      }
      assert.ok(!seen.working, JSON.stringify(seen));
    } finally {
      raw.kill();
    }
  });

  test('modern before and after initialize, one id in both eras at once, then a listen and EOF: every request answered, no run left', { timeout: 120000 }, async () => {
    const ws = tempDir('kiln-sec-modern-eof-');
    const m = marker();
    const raw = new RawServer({ args: ['--workspace', ws] });
    try {
      const before = await raw.request(1, 'tools/list', { _meta: stdioMeta() }, 30000);
      assert.ok(before.result?.tools?.length, JSON.stringify(before).slice(0, 200));
      await raw.initialize({ id: 'init', capabilities: {} });
      // id 7 in both eras at once: a legacy long call and a modern quick one.
      raw.send({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'sandbox_exec', arguments: { command: 'sleep 1; echo legacy-done' } } });
      raw.send({ jsonrpc: '2.0', id: 7, method: 'tools/list', params: { _meta: stdioMeta() } });
      const a = await raw.reply(7, 60000);
      const b = await raw.reply(7, 60000);
      // The modern one is served, or refused for its id in use; the legacy call is answered, once, with its output.
      const kinds = [a, b].map((r) => (r.result?.tools ? 'list' : JSON.stringify(r).includes('legacy-done') ? 'exec'
        : r.error?.code === -32600 && /already in use/.test(r.error.message) ? 'list' : JSON.stringify(r).slice(0, 200)));
      assert.deepEqual(kinds.sort(), ['exec', 'list']);
      assert.ok(await raw.quiet(500), `a third answer: ${JSON.stringify(raw.messages).slice(0, 300)}`);
      // A modern task running, a listen open, then stdin closes.
      const t = await raw.request(8, 'tools/call', { name: 'sandbox_exec', arguments: { command: `sleep ${m}` }, _meta: stdioMeta(TASKS_CAPABILITIES) }, 60000);
      assert.equal(t.result?.resultType, 'task', JSON.stringify(t));
      raw.send({ jsonrpc: '2.0', id: 9, method: 'subscriptions/listen', params: { notifications: { resourceSubscriptions: [] }, _meta: stdioMeta() } });
      await raw.next({ timeoutMs: 30000, pred: (x) => x.method === 'notifications/subscriptions/acknowledged' });
      assert.ok(await waitFor(() => pgrep(`sleep ${m}`).length > 0, 60000));
      const closed = await raw.close(60000);
      assert.equal(closed.signal, null, `kiln mcp had to be killed after EOF: ${raw.stderr.slice(-500)}`);
      assert.ok(await waitGone(`sleep ${m}`, 30000), 'a task\'s run outlived kiln mcp');
    } finally {
      raw.kill();
    }
  });
});

// ---- 5. secrets asked of the person ------------------------------------------------------------

describe('modern era: secrets asked of the person', () => {
  const ELICIT = { elicitation: { url: {} } };
  // A repository whose kiln.json names a secret the person is likely to hold (here with a
  // random prefix, so it is never in the test's own environment or store).
  async function hostileRepo(s, name) {
    const ws = tempDir('kiln-sec-evil-repo-');
    fs.writeFileSync(path.join(ws, 'kiln.json'), JSON.stringify({ sandbox: { secrets: [name], network: 'none' } }));
    const wsid = resultOf(await modernCall(s.url, modernBody(1, 'tools/call', { name: 'workspace_open', arguments: { path: ws } })), 'open').structuredContent.id;
    return { ws, wsid };
  }
  const ask = (s, wsid, id, extra = {}) => modernCall(s.url, modernBody(id, 'tools/call',
    { name: 'sandbox_exec', arguments: { workspace: wsid, command: 'echo hi' }, ...extra,
      _meta: { 'io.modelcontextprotocol/logLevel': 'debug', ...(extra._meta ?? {}) } }, { capabilities: ELICIT }));
  const pageOf = (r, name) => {
    const res = resultOf(r, 'ask');
    assert.equal(res.resultType, 'input_required', JSON.stringify(res).slice(0, 400));
    const req = res.inputRequests?.[`kiln_secret_${name}`];
    assert.ok(req?.params?.url, JSON.stringify(res).slice(0, 400));
    return req.params;
  };

  test('a repository\'s kiln.json asking for AWS_SECRET_ACCESS_KEY: the ask and the page say which workspace asks', { timeout: 60000 }, async () => {
    const s = await serve();
    const name = `AWS_SECRET_ACCESS_KEY_${rand().toUpperCase()}`;
    const { ws, wsid } = await hostileRepo(s, name);
    const p = pageOf(await ask(s, wsid, 2), name);
    const wsName = path.basename(ws);
    const page = await fetch(p.url);
    const html = await page.text();
    assert.equal(page.status, 200);
    const names = (text) => text.includes(ws) || text.includes(wsName);
    assert.ok(names(p.message), `the elicitation does not say which workspace asks for ${name}: ${p.message}`);
    assert.ok(names(html), `the secret page does not say which workspace asks for ${name}`);
  });

  test('the page token is in no other message of the stream, no file of the state dir, no trace; a declined retry ends the call', { timeout: 60000 }, async () => {
    const s = await serve();
    const name = `KILN_SEC_T_${rand().toUpperCase()}`;
    const { wsid } = await hostileRepo(s, name);
    const r = await ask(s, wsid, 2);
    const p = pageOf(r, name);
    const token = p.url.split('/').pop();
    assert.match(token, /^[0-9a-f]{64}$/);
    const others = r.messages.slice(0, -1);
    assert.ok(!JSON.stringify(others).includes(token), `a notification carries the page token: ${JSON.stringify(others).slice(0, 400)}`);
    const declined = await ask(s, wsid, 3, { inputResponses: { [`kiln_secret_${name}`]: { action: 'decline' } } });
    const res = resultOf(declined, 'declined retry');
    assert.notEqual(res.resultType, 'input_required', `a declined retry asks again: ${JSON.stringify(res).slice(0, 300)}`);
    assert.ok(res.isError, JSON.stringify(res).slice(0, 300));
    assert.match(JSON.stringify(res.content), /declined/);
    assert.ok(!JSON.stringify(declined.messages).includes(token));
    const cancelled = resultOf(await ask(s, wsid, 4, { inputResponses: { [`kiln_secret_${name}`]: { action: 'cancel' } } }), 'cancelled retry');
    assert.ok(cancelled.isError && cancelled.resultType !== 'input_required', JSON.stringify(cancelled).slice(0, 300));
    const traces = toolOk(await modernCall(s.url, modernBody(5, 'tools/call', { name: 'trace_list', arguments: { workspace: wsid } })), 'trace_list');
    assert.ok(!JSON.stringify(traces).includes(token));
    await s.stop();
    assert.deepEqual(filesHolding(s.home, token), [], 'the page token is written to the state dir');
  });

  test('one client asking again and again cannot void the page the person already has open', { timeout: 120000 }, async () => {
    const s = await serve();
    const name = `KILN_SEC_F_${rand().toUpperCase()}`;
    const { wsid } = await hostileRepo(s, name);
    const first = pageOf(await ask(s, wsid, 'first'), name).url;
    assert.equal((await fetch(first)).status, 200);
    const urls = new Set([first]);
    for (let i = 0; i < 70; i++) {
      const r = await ask(s, wsid, `again-${i}`);
      urls.add(pageOf(r, name).url);
    }
    const live = (await Promise.all([...urls].map(async (u) => (await fetch(u)).status))).filter((x) => x === 200).length;
    assert.ok(live <= 64, `${live} pages are live at once`);
    assert.equal((await fetch(first)).status, 200,
      `the person's page was voided by later asks: ${urls.size} distinct pages issued for one secret, ${live} still open`);
  });

  test('a secret printed by a task run: absent from tasks/get, the trace and the state dir', { timeout: 120000 }, async () => {
    const name = `KILN_SEC_V_${rand().toUpperCase()}`;
    const value = `KILNSEC-${rand()}${rand()}`;
    const s = await serve({ env: { [name]: value } });
    const ws = tempDir('kiln-sec-modern-v-');
    fs.writeFileSync(path.join(ws, 'kiln.json'), JSON.stringify({ sandbox: { secrets: [name] } }));
    const call = (id, method, params) => modernCall(s.url, modernBody(id, method, params, { capabilities: TASKS_CAPABILITIES }));
    const wsid = resultOf(await call(1, 'tools/call', { name: 'workspace_open', arguments: { path: ws } }), 'open').structuredContent.id;
    const t = resultOf(await call(2, 'tools/call', { name: 'sandbox_exec', arguments: { workspace: wsid, command: `echo "v=$${name}"; echo "e=$${name}" >&2; test -n "$${name}" && echo has-it` } }), 'task');
    assert.equal(t.resultType, 'task', JSON.stringify(t));
    let g;
    await waitFor(async () => (g = resultOf(await call(3, 'tasks/get', { taskId: t.taskId }), 'get')).status !== 'working', 60000, 300);
    assert.equal(g.status, 'completed', JSON.stringify(g).slice(0, 400));
    assert.match(JSON.stringify(g.result), /has-it/, 'the run saw the secret');
    assert.ok(!JSON.stringify(g).includes(value), `tasks/get carries the value: ${JSON.stringify(g).slice(0, 600)}`);
    const traceId = g.result.structuredContent?.trace_id;
    assert.ok(traceId, JSON.stringify(g.result.structuredContent).slice(0, 300));
    for (const stream of ['stdout', 'stderr']) {
      const out = await call(4, 'tools/call', { name: 'trace_output', arguments: { trace_id: traceId, stream } });
      assert.ok(!JSON.stringify(out.response).includes(value), `trace_output ${stream} carries the value`);
    }
    const rd = await call(5, 'resources/read', { uri: `kiln://trace/${traceId}` });
    assert.ok(!JSON.stringify(rd.response).includes(value));
    await s.stop();
    assert.deepEqual(filesHolding(s.home, value), [], 'a file of the state dir holds the value');
  });
});
