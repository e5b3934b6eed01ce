// `kiln serve --mcp` over real HTTP: every header and status rule of the Streamable HTTP transport
// (raw fetch and node:http, so each header is exactly what the test says), the official SDK client
// on the same endpoint, two concurrent sessions that see nothing of each other, dropped SSE
// streams (a request's and the GET stream) resumed with Last-Event-ID without losing a message,
// session end and expiry, and the bearer token every bind requires (its own, or --token-file's).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { rawExchange, request, statusesOf } from '../lib/http.mjs';
import { kilnBin, sleep, structured, tempDir } from '../lib/kiln.mjs';
import {
  ACCEPT_BOTH, PROTOCOL, SseReader, httpClient, initializeBody, mcpFetch, rawSession, serveRefusal, startServe,
} from '../lib/mcp_http.mjs';

const servers = [];
let srv;  // the default loopback server, with the state directory's own token
let ws;

async function serve(opts) {
  const s = await startServe(opts);
  servers.push(s);
  return s;
}

before(async () => {
  ws = tempDir('kiln-mcp-http-ws-');
  fs.writeFileSync(path.join(ws, 'hello.txt'), 'hello over http\n');
  srv = await serve();
});

after(async () => {
  for (const s of servers) await s.stop();
});

const ping = (id = 1) => ({ jsonrpc: '2.0', id, method: 'ping' });
const errorOf = async (r) => (await r.json()).error;

describe('POST', () => {
  test('initialize is answered as JSON with a fresh random Mcp-Session-Id', async () => {
    const r = await mcpFetch(srv.url, { body: initializeBody() });
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type'), /^application\/json/);
    const sid = r.headers.get('mcp-session-id');
    assert.match(sid, /^[0-9a-f]{64}$/, 'a 256-bit random id in visible ASCII');
    const body = await r.json();
    assert.equal(body.id, 0);
    assert.equal(body.result.protocolVersion, PROTOCOL);
    assert.equal(body.result.serverInfo.name, 'kiln');
    const again = await mcpFetch(srv.url, { body: initializeBody() });
    assert.notEqual(again.headers.get('mcp-session-id'), sid, 'every initialize starts its own session');
  });

  test('a request is answered on an SSE stream: priming event first, then the response, then the end', async () => {
    const { session } = await rawSession(srv.url);
    const r = await mcpFetch(srv.url, { body: ping(7), session });
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type'), /^text\/event-stream/);
    assert.match(r.headers.get('cache-control'), /no-cache/);
    const events = await new SseReader(r).rest();
    assert.ok(events.length >= 2, JSON.stringify(events));
    assert.match(events[0].id, /^\d+-0$/);
    assert.equal(events[0].data, '');
    assert.equal(events[0].retry, 1000);
    const last = events.at(-1);
    assert.deepEqual(last.message, { jsonrpc: '2.0', id: 7, result: {} });
    assert.match(last.id, /^\d+-\d+$/);
    assert.notEqual(last.id, events[0].id);
  });

  test('notifications and responses are accepted with 202 and no body', async () => {
    const { session } = await rawSession(srv.url);
    const r = await mcpFetch(srv.url, { body: { jsonrpc: '2.0', method: 'notifications/roots/list_changed' }, session });
    assert.equal(r.status, 202);
    assert.equal(await r.text(), '');
    const reply = await mcpFetch(srv.url, { body: { jsonrpc: '2.0', id: 12345, result: {} }, session });
    assert.equal(reply.status, 202);
  });

  test('Accept must list both application/json and text/event-stream (406)', async () => {
    const { session } = await rawSession(srv.url);
    for (const accept of ['application/json', 'text/event-stream', '*/*', 'application/*, text/*', null]) {
      const r = await mcpFetch(srv.url, { body: ping(), session, headers: { accept } });
      assert.equal(r.status, 406, `Accept: ${accept}`);
      assert.match((await errorOf(r)).message, /Accept/);
    }
    const init = await mcpFetch(srv.url, { body: initializeBody(), headers: { accept: 'application/json' } });
    assert.equal(init.status, 406, 'initialize too');
  });

  test('Content-Type must be application/json (415)', async () => {
    const { session } = await rawSession(srv.url);
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/json; charset=latin1', null]) {
      const r = await mcpFetch(srv.url, { body: JSON.stringify(ping()), session, headers: { 'content-type': type } });
      assert.equal(r.status, 415, `Content-Type: ${type}`);
    }
    const ok = await mcpFetch(srv.url, { body: ping(), session, headers: { 'content-type': 'application/json; charset=utf-8' } });
    assert.equal(ok.status, 200);
    await ok.body.cancel();
  });

  test('bodies that are not one JSON-RPC message: 400 with the JSON-RPC error (batches included)', async () => {
    const { session } = await rawSession(srv.url);
    const parse = await mcpFetch(srv.url, { body: '{"jsonrpc":', session });
    assert.equal(parse.status, 400);
    assert.equal((await errorOf(parse)).code, -32700);
    const batch = await mcpFetch(srv.url, { body: [ping(1), ping(2)], session });
    assert.equal(batch.status, 400);
    assert.equal((await errorOf(batch)).code, -32600);
    const noVersion = await mcpFetch(srv.url, { body: { id: 1, method: 'ping' }, session });
    assert.equal(noVersion.status, 400);
    const empty = await mcpFetch(srv.url, { body: '', session });
    assert.equal(empty.status, 400);
  });

  test('Mcp-Session-Id: missing on a non-initialize request 400, unknown 404, on initialize 400', async () => {
    const missing = await mcpFetch(srv.url, { body: ping(), headers: { 'mcp-protocol-version': PROTOCOL } });
    assert.equal(missing.status, 400);
    assert.match((await errorOf(missing)).message, /Mcp-Session-Id/);
    const unknown = await mcpFetch(srv.url, { body: ping(), session: 'f'.repeat(64) });
    assert.equal(unknown.status, 404);
    const { session } = await rawSession(srv.url);
    const reinit = await mcpFetch(srv.url, { body: initializeBody(), session });
    assert.equal(reinit.status, 400);
    assert.match((await errorOf(reinit)).message, /new session/);
  });

  test('MCP-Protocol-Version: unsupported 400, missing 400 (negotiated 2025-11-25), every supported one accepted', async () => {
    const { session } = await rawSession(srv.url);
    for (const v of ['1999-01-01', '2024-11-05', '', 'latest']) {
      const r = await mcpFetch(srv.url, { body: ping(), session, headers: { 'mcp-protocol-version': v } });
      assert.equal(r.status, 400, `version '${v}'`);
      assert.match((await errorOf(r)).message, /MCP-Protocol-Version/);
    }
    const missing = await mcpFetch(srv.url, { body: ping(), session, headers: { 'mcp-protocol-version': null } });
    assert.equal(missing.status, 400);
    for (const v of ['2025-11-25', '2025-06-18', '2025-03-26']) {
      const r = await mcpFetch(srv.url, { body: ping(), session, headers: { 'mcp-protocol-version': v } });
      assert.equal(r.status, 200, `version ${v}`);
      await r.body.cancel();
    }
    const badInit = await mcpFetch(srv.url, { body: initializeBody(), headers: { 'mcp-protocol-version': '1999-01-01' } });
    assert.equal(badInit.status, 400);
  });

  test('a session negotiated at 2025-03-26 needs no MCP-Protocol-Version header (it predates it)', async () => {
    const r = await mcpFetch(srv.url, { body: { ...initializeBody(), params: { ...initializeBody().params, protocolVersion: '2025-03-26' } } });
    const session = r.headers.get('mcp-session-id');
    assert.equal((await r.json()).result.protocolVersion, '2025-03-26');
    const p = await mcpFetch(srv.url, { body: ping(), headers: { 'mcp-session-id': session } });
    assert.equal(p.status, 200);
    await p.body.cancel();
  });

  test('a failed initialize makes no session', async () => {
    const r = await mcpFetch(srv.url, { body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: { capabilities: {} } } });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('mcp-session-id'), null);
    assert.equal((await r.json()).error.code, -32602);
  });

  test('a request id still in progress cannot be reused (400); the first request is unaffected', async () => {
    // Declaring roots without answering roots/list holds workspace tools for up to 5 s.
    const { session } = await rawSession(srv.url, { capabilities: { roots: {} } });
    const call = { jsonrpc: '2.0', id: 'dup', method: 'tools/call', params: { name: 'file_list', arguments: {} } };
    const first = await mcpFetch(srv.url, { body: call, session });
    assert.equal(first.status, 200);
    const second = await mcpFetch(srv.url, { body: call, session });
    assert.equal(second.status, 400);
    assert.equal((await second.json()).error.code, -32600);
    const events = await new SseReader(first).rest(15000);
    assert.equal(events.at(-1).message.id, 'dup', 'the first request still gets its own answer');
  });

  test('bodies up to 16 MiB are read; larger ones get 413', async () => {
    const { session } = await rawSession(srv.url);
    const big = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'none', reason: 'x'.repeat(15 << 20) } };
    const ok = await mcpFetch(srv.url, { body: big, session });
    assert.equal(ok.status, 202);
    big.params.reason = 'x'.repeat(17 << 20);
    const tooBig = await mcpFetch(srv.url, { body: big, session }).catch((e) => e);
    // The server answers 413 and closes; a client still sending may see the reset instead.
    if (!(tooBig instanceof Error)) assert.equal(tooBig.status, 413);
  });
});

describe('Host and Origin (DNS rebinding)', () => {
  const port = () => new URL(srv.base).port;
  const raw = (headers) => request(srv.base, '/mcp', {
    method: 'POST', headers: { 'content-type': 'application/json', accept: ACCEPT_BOTH, ...srv.auth, ...headers },
    body: JSON.stringify(initializeBody()),
  });

  test('a Host other than this loopback server is refused with 403', async () => {
    for (const host of ['evil.example.com', `evil.example.com:${port()}`, `localhost.evil.example.com:${port()}`,
      `127.0.0.1:${Number(port()) + 1}`, `192.168.1.10:${port()}`]) {
      const r = await raw({ host });
      assert.equal(r.status, 403, `Host: ${host}`);
      assert.match(JSON.parse(r.text).error.message, /Host/);
    }
    for (const host of [`127.0.0.1:${port()}`, `localhost:${port()}`, 'localhost', '127.0.0.1']) {
      const r = await raw({ host });
      assert.equal(r.status, 200, `Host: ${host}`);
    }
  });

  test('an Origin that is not a loopback page is refused with 403; loopback pages are served', async () => {
    for (const origin of ['http://evil.example.com', 'https://localhost.evil.example.com', 'null', 'file://']) {
      const r = await raw({ host: `127.0.0.1:${port()}`, origin });
      assert.equal(r.status, 403, `Origin: ${origin}`);
      assert.match(JSON.parse(r.text).error.message, /origin/i);
    }
    for (const origin of [`http://127.0.0.1:${port()}`, 'http://localhost:6274', 'http://[::1]:3000']) {
      const r = await raw({ host: `127.0.0.1:${port()}`, origin });
      assert.equal(r.status, 200, `Origin: ${origin}`);
    }
  });

  test('the rules hold for GET and DELETE too', async () => {
    const { session } = await rawSession(srv.url);
    const headers = { 'mcp-session-id': session, 'mcp-protocol-version': PROTOCOL, accept: 'text/event-stream', ...srv.auth };
    const g = await request(srv.base, '/mcp', { method: 'GET', headers: { ...headers, origin: 'http://evil.example.com' } });
    assert.equal(g.status, 403);
    const d = await request(srv.base, '/mcp', { method: 'DELETE', headers: { ...headers, host: 'evil.example.com' } });
    assert.equal(d.status, 403);
  });
});

describe('GET and DELETE', () => {
  test('GET opens the session stream (priming event); a second one is 409; Accept must allow SSE (406)', async () => {
    const { session } = await rawSession(srv.url);
    const bad = await mcpFetch(srv.url, { method: 'GET', session, headers: { accept: 'application/json' } });
    assert.equal(bad.status, 406);
    const ctl = new AbortController();
    const g = await mcpFetch(srv.url, { method: 'GET', session, headers: { accept: 'text/event-stream' }, signal: ctl.signal });
    assert.equal(g.status, 200);
    assert.match(g.headers.get('content-type'), /^text\/event-stream/);
    const first = await new SseReader(g).next();
    assert.equal(first.id, '0-0');
    assert.equal(first.data, '');
    const second = await mcpFetch(srv.url, { method: 'GET', session, headers: { accept: 'text/event-stream' } });
    assert.equal(second.status, 409);
    ctl.abort();
  });

  test('GET and DELETE need a session (400 missing, 404 unknown) and a supported version (400)', async () => {
    const g = await mcpFetch(srv.url, { method: 'GET', headers: { accept: 'text/event-stream', 'mcp-protocol-version': PROTOCOL } });
    assert.equal(g.status, 400);
    const g404 = await mcpFetch(srv.url, { method: 'GET', session: 'a'.repeat(64), headers: { accept: 'text/event-stream' } });
    assert.equal(g404.status, 404);
    const d = await mcpFetch(srv.url, { method: 'DELETE', headers: { 'mcp-protocol-version': PROTOCOL } });
    assert.equal(d.status, 400);
    const { session } = await rawSession(srv.url);
    const v = await mcpFetch(srv.url, { method: 'GET', session, headers: { accept: 'text/event-stream', 'mcp-protocol-version': '2020-01-01' } });
    assert.equal(v.status, 400);
    const dv = await mcpFetch(srv.url, { method: 'DELETE', session, headers: { 'mcp-protocol-version': '2020-01-01' } });
    assert.equal(dv.status, 400);
  });

  test('a Last-Event-ID that names nothing resumable is 400', async () => {
    const { session } = await rawSession(srv.url);
    for (const id of ['garbage', '999-1', '0-999', '-1']) {
      const r = await mcpFetch(srv.url, { method: 'GET', session, headers: { accept: 'text/event-stream', 'last-event-id': id } });
      assert.equal(r.status, 400, `Last-Event-ID ${id}`);
    }
  });

  test('DELETE ends the session (204): its open stream closes, later requests get 404', async () => {
    const { session } = await rawSession(srv.url);
    const g = await mcpFetch(srv.url, { method: 'GET', session, headers: { accept: 'text/event-stream' } });
    const reader = new SseReader(g);
    await reader.next();
    const d = await mcpFetch(srv.url, { method: 'DELETE', session });
    assert.equal(d.status, 204);
    assert.equal(await reader.next(5000), null, 'the GET stream ended with the session');
    for (const method of ['POST', 'GET', 'DELETE']) {
      const r = await mcpFetch(srv.url, { method, session, body: method === 'POST' ? ping() : undefined, headers: method === 'GET' ? { accept: 'text/event-stream' } : {} });
      assert.equal(r.status, 404, method);
    }
  });

  test('other methods are 405 with Allow (HEAD without a body, OPTIONS: no CORS)', async () => {
    for (const method of ['PUT', 'PATCH', 'OPTIONS', 'HEAD']) {
      const r = await mcpFetch(srv.url, { method, body: ['OPTIONS', 'HEAD'].includes(method) ? undefined : '{}' });
      assert.equal(r.status, 405, method);
      assert.equal(r.headers.get('allow'), 'GET, POST, DELETE');
      assert.equal(r.headers.get('access-control-allow-origin'), null);
    }
    // HEAD on a kept-alive connection: a body would be read as the next response.
    const bearer = `Authorization: Bearer ${srv.token}\r\n`;
    const raw = await rawExchange(srv.base, `HEAD /mcp HTTP/1.1\r\nHost: 127.0.0.1:${new URL(srv.base).port}\r\n${bearer}\r\n`
      + `HEAD /mcp HTTP/1.1\r\nHost: 127.0.0.1:${new URL(srv.base).port}\r\n${bearer}Connection: close\r\n\r\n`);
    assert.deepEqual(statusesOf(raw), [405, 405]);
  });

  test('an idle session expires (404 afterwards) and a too-large body is refused at its own limit', async () => {
    const short = await serve({ args: ['--session-idle-s', '1', '--max-message-bytes', '2048'] });
    const { session } = await rawSession(short.url);
    const big = await mcpFetch(short.url, { body: { jsonrpc: '2.0', method: 'notifications/x', params: { pad: 'x'.repeat(4096) } }, session });
    assert.equal(big.status, 413);
    const kept = await rawSession(short.url);
    for (let i = 0; i < 6; i++) {  // requests keep a session alive...
      await sleep(400);
      const p = await mcpFetch(short.url, { body: ping(), session: kept.session });
      assert.equal(p.status, 200);
      await p.body.cancel();
    }
    // ...and without any, it expires after the idle time (the sweep runs twice a second).
    assert.equal((await mcpFetch(short.url, { body: ping(), session })).status, 404, 'expired after 1 s idle');
    assert.match(short.stderr, /expired/);
  });
});

describe('the official SDK client over Streamable HTTP', () => {
  test('connects, lists tools, calls them, reads a resource, closes with DELETE', async () => {
    const c = await httpClient(srv.url);
    let sessionId;
    try {
      sessionId = c.sessionId;
      assert.match(sessionId, /^[0-9a-f]{64}$/);
      const { tools } = await c.client.listTools();
      assert.ok(tools.some((t) => t.name === 'workspace_list'));
      assert.ok(tools.length >= 20);
      structured(await c.client.callTool({ name: 'workspace_open', arguments: { path: ws } }));
      const list = structured(await c.client.callTool({ name: 'file_list', arguments: {} }));
      assert.ok(list.entries.some((e) => e.path === 'hello.txt'));
      const read = await c.client.readResource({ uri: `file://${ws}/hello.txt` });
      assert.equal(read.contents[0].text, 'hello over http\n');
      await c.client.setLoggingLevel('debug');
      assert.deepEqual(await c.client.ping(), {});
    } finally {
      await c.terminate();
    }
    const after = await mcpFetch(srv.url, { body: ping(), session: sessionId });
    assert.equal(after.status, 404, 'terminateSession sent DELETE');
  });

  test('progress notifications arrive on the request stream, before the response', async () => {
    const tree = tempDir('kiln-mcp-http-tree-');
    for (let i = 0; i < 300; i++) fs.writeFileSync(path.join(tree, `f${i}.txt`), `line ${i}\n`);
    const { session } = await rawSession(srv.url);
    const open = await mcpFetch(srv.url, { body: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'workspace_open', arguments: { path: tree } } }, session });
    await new SseReader(open).rest();
    const r = await mcpFetch(srv.url, {
      session,
      body: { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'file_search', arguments: { pattern: 'line' }, _meta: { progressToken: 'p-1' } } },
    });
    const events = await new SseReader(r).rest(30000);
    const messages = events.filter((e) => e.message).map((e) => e.message);
    assert.equal(messages.at(-1).id, 2, 'the response ends the stream');
    for (const m of messages.slice(0, -1)) {
      assert.equal(m.method, 'notifications/progress', 'only this request\'s own messages on its stream');
      assert.equal(m.params.progressToken, 'p-1');
    }
  });
});

describe('two concurrent sessions', () => {
  test('are isolated: own workspace, own messages, ending one leaves the other alone', async () => {
    const wsA = tempDir('kiln-mcp-http-a-');
    const wsB = tempDir('kiln-mcp-http-b-');
    fs.writeFileSync(path.join(wsA, 'only-a.txt'), 'a\n');
    fs.writeFileSync(path.join(wsB, 'only-b.txt'), 'b\n');
    // B asks for every log line first; then A starts, which the server logs ("session
    // initialized by client-a"): in one process shared by many clients, B must not hear that.
    const b = await httpClient(srv.url, { name: 'client-b' });
    await b.client.setLoggingLevel('debug');
    const a = await httpClient(srv.url, { name: 'client-a' });
    try {
      assert.notEqual(a.sessionId, b.sessionId);
      await Promise.all([
        a.client.callTool({ name: 'workspace_open', arguments: { path: wsA, name: 'ws-a' } }),
        b.client.callTool({ name: 'workspace_open', arguments: { path: wsB, name: 'ws-b' } }),
      ]);
      await a.client.setLoggingLevel('debug');
      const rounds = await Promise.all([0, 1, 2, 3].map((i) => Promise.all([
        a.client.callTool({ name: 'file_list', arguments: {} }),
        b.client.callTool({ name: 'file_list', arguments: {} }),
        a.client.callTool({ name: 'workspace_info', arguments: {} }),
        b.client.callTool({ name: 'workspace_info', arguments: {} }),
      ]).then((r) => ({ i, r }))));
      for (const { r: [listA, listB, infoA, infoB] } of rounds) {
        const pathsA = structured(listA).entries.map((e) => e.path);
        const pathsB = structured(listB).entries.map((e) => e.path);
        assert.deepEqual(pathsA, ['only-a.txt']);
        assert.deepEqual(pathsB, ['only-b.txt']);
        assert.equal(structured(infoA).root, wsA);
        assert.equal(structured(infoB).root, wsB);
      }
      // Nothing one session said reached the other: every message B received answers B's own
      // requests, and none of it mentions A.
      const sentIdsB = new Set(b.transport.sent.filter((m) => 'id' in m).map((m) => JSON.stringify(m.id)));
      for (const m of b.wire) {
        if ('id' in m && !('method' in m)) assert.ok(sentIdsB.has(JSON.stringify(m.id)), `B received a reply it never asked for: ${JSON.stringify(m)}`);
      }
      const textB = JSON.stringify(b.wire);
      assert.ok(!textB.includes('client-a') && !textB.includes('only-a.txt') && !textB.includes(wsA), `B saw something of A: ${textB.slice(0, 2000)}`);
      const textA = JSON.stringify(a.wire);
      assert.ok(!textA.includes('client-b') && !textA.includes('only-b.txt') && !textA.includes(wsB), 'A saw nothing of B');
      // A session id is the whole credential of a session: B's id is not A's.
      const crossed = await mcpFetch(srv.url, { body: { jsonrpc: '2.0', id: 99, method: 'tools/call', params: { name: 'workspace_info', arguments: {} } }, session: b.sessionId });
      const last = (await new SseReader(crossed).rest()).at(-1).message;
      assert.equal(JSON.parse(last.result.content[0].text).root, wsB);
      await a.terminate();
      const still = structured(await b.client.callTool({ name: 'file_list', arguments: {} }));
      assert.deepEqual(still.entries.map((e) => e.path), ['only-b.txt'], 'B outlives A');
    } finally {
      await b.terminate().catch(() => {});
      await a.close().catch(() => {});
    }
  });
});

describe('resumability (Last-Event-ID)', () => {
  test('a request stream dropped before its response: the response is replayed on GET, nothing lost', async () => {
    const { session } = await rawSession(srv.url, { capabilities: { roots: {} } });
    // The session asks for roots on the GET stream; file_list waits (up to 5 s) for that answer.
    const ctl = new AbortController();
    const r = await mcpFetch(srv.url, {
      session, signal: ctl.signal,
      body: { jsonrpc: '2.0', id: 'list', method: 'tools/call', params: { name: 'file_list', arguments: {} } },
    });
    const reader = new SseReader(r);
    const priming = await reader.next();
    assert.match(priming.id, /^[1-9]\d*-0$/);
    ctl.abort();  // the connection drops; the request goes on (disconnecting is not cancelling)

    const g = await mcpFetch(srv.url, { method: 'GET', session, headers: { accept: 'text/event-stream' } });
    const getStream = new SseReader(g);
    const [, rootsReq] = await getStream.until((m) => m.method === 'roots/list');
    const answer = await mcpFetch(srv.url, { session, body: { jsonrpc: '2.0', id: rootsReq.message.id, result: { roots: [{ uri: `file://${ws}`, name: 'ws' }] } } });
    assert.equal(answer.status, 202);
    await sleep(500);  // the response is produced while nobody listens on its stream

    const resumed = await mcpFetch(srv.url, { method: 'GET', session, headers: { accept: 'text/event-stream', 'last-event-id': priming.id } });
    assert.equal(resumed.status, 200);
    const events = await new SseReader(resumed).rest(15000);
    assert.equal(events[0].id, priming.id, 'the priming event restates where the replay starts');
    const response = events.at(-1).message;
    assert.equal(response.id, 'list');
    const listing = JSON.parse(response.result.content[0].text);
    assert.ok(listing.entries.some((e) => e.path === 'hello.txt'), 'the tool ran in the workspace from roots');
    getStream.cancel();
  });

  test('the GET stream dropped and resumed: a server request sent meanwhile is replayed, once', async () => {
    const { session } = await rawSession(srv.url, { capabilities: { roots: { listChanged: true } } });
    const ctl = new AbortController();
    const g = await mcpFetch(srv.url, { method: 'GET', session, headers: { accept: 'text/event-stream' }, signal: ctl.signal });
    const reader = new SseReader(g);
    const seen = await reader.until((m) => m.method === 'roots/list');
    const lastId = seen.at(-1).id;
    ctl.abort();
    await sleep(200);
    // While no GET stream is open, the server asks for roots again.
    const n = await mcpFetch(srv.url, { session, body: { jsonrpc: '2.0', method: 'notifications/roots/list_changed' } });
    assert.equal(n.status, 202);
    await sleep(300);
    const resumed = await mcpFetch(srv.url, { method: 'GET', session, headers: { accept: 'text/event-stream', 'last-event-id': lastId } });
    assert.equal(resumed.status, 200);
    const r2 = new SseReader(resumed);
    const replay = await r2.until((m) => m.method === 'roots/list');
    const requests = replay.filter((e) => e.message?.method === 'roots/list');
    assert.equal(requests.length, 1, 'exactly the missed message, not the one seen before the drop');
    assert.notEqual(requests[0].message.id, seen.at(-1).message.id);
    const seq = (id) => Number(id.split('-')[1]);
    assert.equal(replay[0].id, lastId, 'the priming event restates the resume position');
    assert.ok(seq(requests[0].id) > seq(lastId), 'event ids keep increasing');
    r2.cancel();
  });

  test('the SDK client resumes its GET stream by itself after the server cuts it', async () => {
    // Another connection resuming the same stream makes the server end the SDK's connection (a
    // stream has one connection at a time); the SDK then reconnects with its Last-Event-ID.
    const roots = [];
    const c = await httpClient(srv.url, { capabilities: { roots: { listChanged: true } }, onRoots: async () => { roots.push(Date.now()); return [{ uri: `file://${ws}` }]; } });
    try {
      for (let i = 0; i < 40 && roots.length < 1; i++) await sleep(50);
      assert.equal(roots.length, 1, 'roots/list arrived on the SDK\'s GET stream');
      const g = await mcpFetch(srv.url, { method: 'GET', session: c.sessionId, headers: { accept: 'text/event-stream', 'last-event-id': '0-0' } });
      const stolen = new SseReader(g);
      await stolen.next();
      stolen.cancel();  // now nobody listens; the SDK reconnects with its Last-Event-ID
      await sleep(1800);
      await c.client.sendRootsListChanged();
      for (let i = 0; i < 100 && roots.length < 2; i++) await sleep(50);
      assert.equal(roots.length, 2, 'the request sent after the cut reached the SDK');
    } finally {
      await c.terminate().catch(() => {});
    }
  });
});

describe('bearer token', () => {
  const token = 'k'.repeat(20) + 'A1b2C3d4E5f6G7h8I9j0';
  const tokenFile = (mode = 0o600) => {
    const dir = tempDir('kiln-mcp-token-');
    const f = path.join(dir, 'tokens');
    fs.writeFileSync(f, `# kiln tokens\n${token}\n`, { mode });
    fs.chmodSync(f, mode);
    return f;
  };

  test('a non-loopback bind without --token-file refuses to start, and says what to do', async () => {
    const r = await serveRefusal({ listen: '0.0.0.0:0' });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /--token-file/);
    assert.match(r.stderr, /127\.0\.0\.1/);
  });

  test('a token file others can read, or with a short token, refuses to start', async () => {
    const open = await serveRefusal({ listen: '0.0.0.0:0', args: ['--token-file', tokenFile(0o644)] });
    assert.equal(open.code, 1);
    assert.match(open.stderr, /chmod 600/);
    const dir = tempDir('kiln-mcp-token-');
    fs.writeFileSync(path.join(dir, 't'), 'short\n', { mode: 0o600 });
    const short = await serveRefusal({ listen: '0.0.0.0:0', args: ['--token-file', path.join(dir, 't')] });
    assert.equal(short.code, 1);
    assert.match(short.stderr, /32 characters/);
  });

  test('on 0.0.0.0 every /mcp request needs the token (401 with WWW-Authenticate); the SDK works with it', async () => {
    const s = await serve({ listen: '0.0.0.0:0', args: ['--token-file', tokenFile()] });
    const url = s.url;  // http://127.0.0.1:PORT/mcp: the test only ever talks to loopback
    const none = await mcpFetch(url, { body: initializeBody(), headers: { authorization: null } });
    assert.equal(none.status, 401);
    assert.equal(none.headers.get('www-authenticate'), 'Bearer realm="kiln"');
    const wrong = await mcpFetch(url, { body: initializeBody(), headers: { authorization: `Bearer ${token}x` } });
    assert.equal(wrong.status, 401);
    assert.match(wrong.headers.get('www-authenticate'), /error="invalid_token"/);
    const basic = await mcpFetch(url, { body: initializeBody(), headers: { authorization: `Basic ${Buffer.from(`u:${token}`).toString('base64')}` } });
    assert.equal(basic.status, 401);

    const auth = { authorization: `Bearer ${token}` };
    const { session } = await rawSession(url, { headers: auth });
    // Checked on every request, not only at initialize.
    const p = await mcpFetch(url, { body: ping(), session, headers: { authorization: null } });
    assert.equal(p.status, 401);
    const g = await mcpFetch(url, { method: 'GET', session, headers: { accept: 'text/event-stream', authorization: null } });
    assert.equal(g.status, 401);
    const d = await mcpFetch(url, { method: 'DELETE', session, headers: { authorization: null } });
    assert.equal(d.status, 401);
    const ok = await mcpFetch(url, { body: ping(), session, headers: auth });
    assert.equal(ok.status, 200);
    await ok.body.cancel();
    // Beyond loopback the Host may be any name; an Origin must be the server's own.
    const cross = await mcpFetch(url, { body: ping(), session, headers: { ...auth, origin: 'http://evil.example.com' } });
    assert.equal(cross.status, 403);

    const c = await httpClient(url, { headers: auth });
    try {
      const { tools } = await c.client.listTools();
      assert.ok(tools.some((t) => t.name === 'workspace_list'));
      const listed = structured(await c.client.callTool({ name: 'workspace_list', arguments: {} }));
      assert.ok(Array.isArray(listed.workspaces));
    } finally {
      await c.terminate();
    }
    // The artifact side stays public: the token guards /mcp only.
    const health = await fetch(`${s.base}/healthz`);
    assert.equal(health.status, 200);
  });

  test('a loopback bind with --token-file enforces it too', async () => {
    const s = await serve({ args: ['--token-file', tokenFile()] });
    assert.equal((await mcpFetch(s.url, { body: initializeBody(), headers: { authorization: null } })).status, 401);
    const ok = await mcpFetch(s.url, { body: initializeBody(), headers: { authorization: `Bearer ${token}` } });
    assert.equal(ok.status, 200);
  });

  // Case 32 of SANDBOX_CASES.md: no bind, loopback included, serves /mcp without a credential.
  test('without --token-file a loopback bind makes its own token (0600 in the state dir), requires it, and keeps it', async () => {
    const s = await serve();
    const file = path.join(s.home, 'mcp-token');
    const st = fs.statSync(file);
    assert.equal(st.mode & 0o777, 0o600, 'the token file is for its owner only');
    assert.equal(fs.statSync(s.home).mode & 0o777, 0o700, 'and so is the state directory');
    assert.match(s.token, /^[0-9a-f]{64}$/);
    const none = await mcpFetch(s.url, { body: initializeBody(), headers: { authorization: null } });
    assert.equal(none.status, 401);
    assert.equal(none.headers.get('www-authenticate'), 'Bearer realm="kiln"');
    const wrong = await mcpFetch(s.url, { body: initializeBody(), headers: { authorization: `Bearer ${'0'.repeat(64)}` } });
    assert.equal(wrong.status, 401);
    assert.equal((await mcpFetch(s.url, { body: initializeBody() })).status, 200);
    // Where the token is goes to stderr; the token itself never does.
    assert.ok(s.stderr.includes(file), s.stderr);
    assert.ok(!s.stderr.includes(s.token), 'the token is not printed');
    // `kiln serve --print-token` shows the same token, and a restart keeps it.
    const printed = spawnSync(kilnBin(), ['serve', '--print-token', '--state-dir', s.home], { encoding: 'utf8' });
    assert.equal(printed.status, 0, printed.stderr);
    assert.equal(printed.stdout.trim(), s.token);
    await s.stop();
    const again = await serve({ home: s.home });
    assert.equal(again.token, s.token);
    assert.equal((await mcpFetch(again.url, { body: initializeBody() })).status, 200);
  });

  test('a token file with names: each name is a principal, and a session answers only to its own', async () => {
    const dir = tempDir('kiln-mcp-token-');
    const f = path.join(dir, 'tokens');
    const alice = 'a'.repeat(40), bob = 'b'.repeat(40);
    fs.writeFileSync(f, `alice ${alice}\nbob ${bob}\n`, { mode: 0o600 });
    const s = await serve({ args: ['--token-file', f] });
    const { session } = await rawSession(s.url, { headers: { authorization: `Bearer ${alice}` } });
    const mine = await mcpFetch(s.url, { body: ping(), session, headers: { authorization: `Bearer ${alice}` } });
    assert.equal(mine.status, 200);
    await mine.body.cancel();
    // Bob holding Alice's session id gets what an unknown id gets, word for word.
    const theirs = await mcpFetch(s.url, { body: ping(), session, headers: { authorization: `Bearer ${bob}` } });
    const unknown = await mcpFetch(s.url, { body: ping(), session: 'f'.repeat(64), headers: { authorization: `Bearer ${bob}` } });
    assert.equal(theirs.status, 404);
    assert.equal(await theirs.text(), await unknown.text());
    const bad = tempDir('kiln-mcp-token-');
    fs.writeFileSync(path.join(bad, 't'), `bad/name ${alice}\n`, { mode: 0o600 });
    const refused = await serveRefusal({ listen: '127.0.0.1:0', args: ['--token-file', path.join(bad, 't')] });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /name/);
  });
});
