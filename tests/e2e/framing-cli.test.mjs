// LSP-style Content-Length framing through vscode-jsonrpc (what an LSP-ish client such as
// Neovim's vim.lsp.rpc speaks), and the command line: --version, exit on stdin EOF.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
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
