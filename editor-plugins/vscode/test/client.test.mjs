// The extension's MCP connection, against a scripted fake server (fake-kiln.mjs): NDJSON framing,
// initialize and roots, tool results and errors, progress and cancellation (notifications/cancelled),
// logs and protocol traces into the log channel, crash restarts and giving up, graceful stop.
import assert from 'node:assert/strict';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';

import { activate, fakeServer as fake, loadModule, sleep, tempDir } from './helpers.mjs';

test('NDJSON reader: split and joined chunks, CRLF, multi-byte characters across chunks, bad lines reported', async () => {
  const { NdjsonMessageReader, NdjsonMessageWriter } = await loadModule('src/ndjson.ts');
  const input = new PassThrough();
  const reader = new NdjsonMessageReader(input);
  const got = [];
  const errors = [];
  reader.onError((e) => errors.push(e.message));
  reader.listen((m) => got.push(m));
  const snow = Buffer.from(JSON.stringify({ jsonrpc: '2.0', method: 'a', params: { s: 'snow ☃ x' } }) + '\n');
  const cut = snow.indexOf(0xe2) + 1; // inside the 3-byte snowman
  input.write(snow.subarray(0, cut));
  input.write(snow.subarray(cut));
  input.write('{"jsonrpc":"2.0","id":1,"result":{}}\r\n{"jsonrpc":"2.0","id":2,"result":1}\n\n');
  input.write('not json\n[1,2]\n{"jsonrpc":"2.0","method":"tail"}');
  input.end();
  await sleep(20);
  assert.deepEqual(got.map((m) => m.method ?? m.id), ['a', 1, 2, 'tail']);
  assert.equal(got[0].params.s, 'snow ☃ x');
  assert.equal(errors.length, 2);
  assert.match(errors[0], /not JSON: not json/);

  const out = new PassThrough();
  const writer = new NdjsonMessageWriter(out);
  let written = '';
  out.on('data', (c) => (written += c));
  await writer.write({ jsonrpc: '2.0', method: 'x', params: { text: 'two\nlines' } });
  await writer.write({ jsonrpc: '2.0', id: 7, result: {} });
  assert.equal(written.split('\n').length, 3, 'one line per message');
  assert.deepEqual(JSON.parse(written.split('\n')[0]).params.text, 'two\nlines');
});

test('start: initialize (roots capability, client info), initialized, roots/list answered with the folders, logging level', async (t) => {
  const f = fake(t);
  const { api, rec } = await activate(f, t);
  const r = await api.client.callTool('echo', { a: 1 });
  assert.deepEqual(r, { a: 1 });
  assert.equal(api.client.state, 'running');
  await rec.waitFor(() => f.received().some((m) => m.id === 'roots-1' && m.result), 5000, 'roots answer');
  const msgs = f.received();
  assert.deepEqual(msgs[0].argv, ['mcp', '--workspace', f.dir, '--log-level', 'error']);
  assert.equal(msgs[0].cwd, f.dir);
  const init = msgs.find((m) => m.method === 'initialize');
  assert.equal(init.params.protocolVersion, '2025-11-25');
  assert.deepEqual(init.params.capabilities, { roots: { listChanged: true } });
  assert.equal(init.params.clientInfo.name, 'kiln-vscode');
  assert.ok(msgs.some((m) => m.method === 'notifications/initialized'));
  const roots = msgs.find((m) => m.id === 'roots-1');
  assert.deepEqual(roots.result.roots, [{ uri: `file://${f.dir}`, name: path.basename(f.dir) }]);
  await rec.waitFor(() => f.received().some((m) => m.method === 'logging/setLevel'), 5000, 'setLevel');
  assert.equal(f.received().find((m) => m.method === 'logging/setLevel').params.level, 'info');
  const tool = msgs.find((m) => m.method === 'tools/call');
  assert.deepEqual(tool.params, { name: 'echo', arguments: { a: 1 } }, 'no progress token unless asked');
  assert.match(rec.statusItems[0].text, /flame/);
});

test('workspace folders change: notifications/roots/list_changed and the new roots', async (t) => {
  const f = fake(t);
  const { api, rec } = await activate(f, t);
  await api.client.start();
  const other = tempDir('kiln-vsc-other-');
  rec.setFolders([other]);
  await rec.waitFor(() => f.received().some((m) => m.result?.roots?.[0]?.uri === `file://${other}`), 5000, 'new roots');
  assert.ok(f.received().some((m) => m.method === 'notifications/roots/list_changed'));
});

test('a tool error (isError) becomes a KilnToolError with the tool text; a JSON-RPC error rejects', async (t) => {
  const f = fake(t);
  const { api } = await activate(f, t);
  await assert.rejects(api.client.callTool('fail'), (e) => e.name === 'KilnToolError' && /call workspace_open/.test(e.message));
  await assert.rejects(api.client.callTool('nope'), /unknown tool nope/);
});

test('progress is routed by token; cancelling sends notifications/cancelled and ends the call at once', async (t) => {
  const f = fake(t);
  const { api, vscode, rec } = await activate(f, t);
  const source = new vscode.CancellationTokenSource();
  const ticks = [];
  const call = api.client.callTool('slow', {}, { token: source.token, onProgress: (p) => ticks.push(p) });
  await rec.waitFor(() => ticks.length >= 3, 5000, 'progress');
  source.cancel();
  await assert.rejects(call, (e) => e.name === 'KilnCancelledError');
  const tool = f.received().find((m) => m.method === 'tools/call');
  assert.match(tool.params._meta.progressToken, /^vscode-\d+$/);
  assert.equal(ticks[0].message, 'tick 1\n');
  await rec.waitFor(() => f.received().some((m) => m.method === 'notifications/cancelled'), 5000, 'cancel');
  const cancel = f.received().find((m) => m.method === 'notifications/cancelled');
  assert.equal(cancel.params.requestId, tool.id);
  assert.ok(!f.received().some((m) => m.method === '$/cancelRequest'), 'no LSP cancel');
  assert.deepEqual(await api.client.callTool('echo', { still: 'fine' }), { still: 'fine' });
});

test('server logs: stderr lines and notifications/message land in the log once, at their level', async (t) => {
  const f = fake(t);
  const { api, rec } = await activate(f, t);
  await api.client.callTool('log');
  const log = rec.channels.get('Kiln');
  await rec.waitFor(() => /hello from the server log/.test(log.text()), 5000, 'log line');
  assert.match(log.text(), /\[info\] \[kiln\] fake kiln starting/);
  assert.match(log.text(), /\[error\] \[kiln\] fake kiln error line/);
  assert.match(log.text(), /\[info\] \[kiln\] hello from the server log/);
  assert.doesNotMatch(log.text(), /an error also written to stderr/, 'errors come from stderr, not twice');
  log.setLogLevel(vscode_LogLevel_Debug);
  await rec.waitFor(() => f.received().filter((m) => m.method === 'logging/setLevel').some((m) => m.params.level === 'debug'), 5000, 'debug level');
});
const vscode_LogLevel_Debug = 2;

test('kiln.trace.server: messages and verbose trace the protocol into the log', async (t) => {
  const f = fake(t, { settings: { 'kiln.trace.server': 'verbose' } });
  const { api, rec } = await activate(f, t);
  await api.client.callTool('echo', { traced: true });
  const log = rec.channels.get('Kiln');
  assert.match(log.text(), /Sending request 'initialize - \(\d+\)'/);
  assert.match(log.text(), /Sending request 'tools\/call - \(\d+\)'\.\nParams: \{[\s\S]*"traced": true/);
  assert.match(log.text(), /Received request 'roots\/list - \(roots-1\)'/);
  rec.setSetting('kiln.trace.server', 'off');
  await sleep(50);
  const before = log.text().length;
  await api.client.callTool('echo', { quiet: true });
  assert.doesNotMatch(log.text().slice(before), /Sending request/);
});

test('a crash restarts the server; after 4 restarts in 3 minutes it gives up and says so', async (t) => {
  const f = fake(t, { mode: 'crash' });
  const { api, rec } = await activate(f, t);
  await api.client.start();
  await rec.waitFor(() => rec.messages.some((m) => /crashed 5 times/.test(m.text)), 30000, 'give up message');
  assert.equal(api.client.state, 'failed');
  const starts = f.received().filter((m) => m.argv).length;
  assert.equal(starts, 5, 'first start plus 4 restarts');
  const m = rec.messages.find((x) => /crashed 5 times/.test(x.text));
  assert.equal(m.kind, 'error');
  assert.deepEqual(m.items, ['Show Log', 'Restart']);
  assert.match(rec.statusItems[0].text, /error/);
  assert.match(rec.channels.get('Kiln').text(), /exited unexpectedly \(code 3\)/);
});

test('a crash during a call rejects it, and the next call starts a new server', async (t) => {
  const f = fake(t);
  const { api } = await activate(f, t);
  const pid = (await api.client.start(), api.client.pid);
  await assert.rejects(api.client.callTool('die'));
  assert.deepEqual(await api.client.callTool('echo', { again: 1 }), { again: 1 });
  assert.notEqual(api.client.pid, pid);
});

test('Restart Server: a new process, the old one stopped gracefully (stdin closed)', async (t) => {
  const f = fake(t);
  const { api, rec } = await activate(f, t);
  await api.client.start();
  const pid = api.client.pid;
  await rec.commands.get('kiln.restartServer')();
  assert.equal(api.client.state, 'running');
  assert.notEqual(api.client.pid, pid);
  assert.throws(() => process.kill(pid, 0), 'the old server is gone');
  assert.match(rec.messages.at(-1).text, /server restarted/);
});

test('a missing binary: the command fails with the setting to fix, state failed', async (t) => {
  const f = fake(t, { settings: { 'kiln.server.path': '/nonexistent/kiln' } });
  const { api, rec } = await activate(f, t);
  await rec.commands.get('kiln.verify')();
  const m = rec.messages.at(-1);
  assert.equal(m.kind, 'error');
  assert.match(m.text, /Verify failed: cannot start the Kiln server "\/nonexistent\/kiln": not found/);
  assert.equal(api.client.state, 'failed');
});

test('deactivate stops the server', async (t) => {
  const f = fake(t);
  const { api, ext } = await activate(f, t);
  await api.client.start();
  const pid = api.client.pid;
  await ext.deactivate();
  assert.equal(api.client.state, 'stopped');
  assert.throws(() => process.kill(pid, 0));
});
