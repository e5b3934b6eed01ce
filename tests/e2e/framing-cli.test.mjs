// LSP-style Content-Length framing through vscode-jsonrpc (what an LSP-ish client such as
// Neovim's vim.lsp.rpc speaks), and the command line: --version, exit on stdin EOF.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { copySample, kilnBin, kilnEnv, RawServer, tempDir } from '../lib/kiln.mjs';

test('Content-Length framing through vscode-jsonrpc', async () => {
  const mod = await import('vscode-jsonrpc/node');
  const rpc = mod.default ?? mod;
  const ws = copySample();
  const child = spawn(kilnBin(), ['mcp'], { env: kilnEnv(tempDir('kiln-home-')), stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (c) => { stderr += c; });
  const conn = rpc.createMessageConnection(new rpc.StreamMessageReader(child.stdout), new rpc.StreamMessageWriter(child.stdin));
  const errors = [];
  conn.onError((e) => errors.push(e));
  conn.listen();
  try {
    const init = await conn.sendRequest('initialize', {
      protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'vscode-jsonrpc-test', version: '0' },
    });
    assert.equal(init.protocolVersion, '2025-11-25');
    assert.equal(init.serverInfo.name, 'kiln');
    await conn.sendNotification('notifications/initialized');
    assert.deepEqual(await conn.sendRequest('ping', {}), {});
    const tools = await conn.sendRequest('tools/list', {});
    assert.ok(tools.tools.some((t) => t.name === 'file_read'));
    const opened = await conn.sendRequest('tools/call', { name: 'workspace_open', arguments: { path: ws } });
    assert.equal(opened.isError, false, JSON.stringify(opened));
    const read = await conn.sendRequest('tools/call', { name: 'file_read', arguments: { path: 'src/case.js' } });
    assert.match(read.structuredContent.content, /camelCase/);
    // Unicode counts in bytes, not characters.
    await conn.sendRequest('tools/call', { name: 'file_write', arguments: { path: 'u.txt', content: 'héllo wörld ✓ 😀\n' } });
    const u = await conn.sendRequest('tools/call', { name: 'file_read', arguments: { path: 'u.txt' } });
    assert.equal(u.structuredContent.content, 'héllo wörld ✓ 😀\n');
    await assert.rejects(conn.sendRequest('no/such/method', {}), (e) => e.code === -32601);
    assert.deepEqual(errors, []);
  } finally {
    conn.dispose();
    child.stdin.end();
    const code = await new Promise((r) => child.on('exit', r));
    assert.equal(code, 0, stderr);
  }
});

test('kiln --version prints the version', () => {
  const out = execFileSync(kilnBin(), ['--version'], { encoding: 'utf8' });
  assert.match(out.trim(), /^kiln \d+\.\d+\.\d+/);
});

test('kiln mcp exits promptly with status 0 on stdin EOF, mid-session and with work in flight', async () => {
  const ws = copySample();
  const srv = new RawServer({ args: ['--workspace', ws] });
  await srv.initialize();
  srv.send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'file_list', arguments: {} } });
  const r = await srv.close(5000);
  assert.equal(r.signal, null, 'not killed');
  assert.equal(r.code, 0);
  assert.ok(r.ms < 2500, `exit took ${r.ms} ms`);
  assert.deepEqual(srv.garbage, [], 'stdout carried only protocol messages');
});

test('kiln mcp exits with status 0 on SIGTERM', async () => {
  const srv = new RawServer();
  await srv.initialize();
  srv.child.kill('SIGTERM');
  const r = await srv.exited;
  assert.equal(r.code, 0);
});

test('the SDK client closes the session cleanly', async () => {
  const { connectClient } = await import('../lib/kiln.mjs');
  const s = await connectClient();
  const pid = s.transport.pid;
  const t0 = Date.now();
  await s.close();
  assert.ok(Date.now() - t0 < 2000, 'closed before the SDK had to send SIGTERM');
  assert.throws(() => process.kill(pid, 0), { code: 'ESRCH' });
});

// kiln mcp answers a leading `initialize` before its stores open (cli/mcp_runtime.h); the rest waits
// for them. A state whose database cannot be opened still ends the process with 1 and the reason,
// and nothing but that `initialize` is answered.
test('kiln mcp whose state database cannot be opened: exit 1, the reason on stderr, nothing served after initialize', async () => {
  const home = tempDir('kiln-home-');
  fs.mkdirSync(path.join(home, 'kiln.db')); // a folder where the state database should be
  const srv = new RawServer({ home });
  srv.write([
    { jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '0' } } },
    { jsonrpc: '2.0', method: 'notifications/initialized' },
    { jsonrpc: '2.0', id: 1, method: 'tools/list' },
    { jsonrpc: '2.0', id: 2, method: 'ping' },
  ].map((m) => JSON.stringify(m) + '\n').join(''));
  const r = await srv.exited;
  assert.equal(r.code, 1, srv.stderr);
  assert.match(srv.stderr, /^kiln: cannot open state database .*kiln\.db/m);
  assert.deepEqual(srv.all.filter((m) => m.id !== 'init'), [], 'only the leading initialize was answered');
  assert.deepEqual(srv.garbage, []);
});

test('kiln mcp serves in order what arrives with initialize, before its stores are open', async () => {
  const srv = new RawServer({ args: ['--workspace', copySample()] });
  srv.write([
    { jsonrpc: '2.0', id: 0, method: 'ping' }, // before initialize: waits for the stores too
    { jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '0' } } },
    { jsonrpc: '2.0', method: 'notifications/initialized' },
    { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'file_read', arguments: { path: 'src/case.js' } } },
    { jsonrpc: '2.0', id: 2, method: 'ping' },
  ].map((m) => JSON.stringify(m) + '\n').join(''));
  const got = [];
  for (let i = 0; i < 4; i++) got.push(await srv.next({ timeoutMs: 15000 }));
  // ping and initialize are answered inline, in order; the tool call runs on a worker.
  assert.deepEqual(got.slice(0, 2).map((m) => m.id), [0, 'init']);
  assert.equal(got.find((m) => m.id === 'init').result.serverInfo.name, 'kiln');
  const read = got.find((m) => m.id === 1);
  assert.equal(read.result?.isError, false, JSON.stringify(read));
  assert.match(read.result.structuredContent.content, /camelCase/);
  assert.deepEqual(got.find((m) => m.id === 2).result, {});
  const r = await srv.close();
  assert.equal(r.code, 0, srv.stderr);
});
