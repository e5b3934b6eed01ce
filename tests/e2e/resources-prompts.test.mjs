// Resources (file:// URIs of the open workspace), resource templates, prompts, completion and
// logging, through the SDK client.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { pathToFileURL } from 'node:url';

import { connectClient, copySample, structured } from '../lib/kiln.mjs';

let s;
let ws;
before(async () => {
  ws = copySample();
  s = await connectClient();
  structured(await s.client.callTool({ name: 'workspace_open', arguments: { path: ws } }));
});
after(() => s?.close());

test('resources/list: the workspace files as file:// URIs', async () => {
  const all = [];
  let cursor;
  do {
    const page = await s.client.listResources(cursor ? { cursor } : {});
    all.push(...page.resources);
    cursor = page.nextCursor;
  } while (cursor);
  const uris = all.map((r) => r.uri);
  const readme = pathToFileURL(path.join(ws, 'README.md')).href;
  assert.ok(uris.includes(readme), `${readme} in ${uris.slice(0, 20).join(', ')}`);
  for (const r of all) {
    assert.match(r.uri, /^(file|kiln):\/\//);
    assert.equal(typeof r.name, 'string');
  }
  const js = all.find((r) => r.uri.endsWith('/src/slugify.js'));
  assert.ok(js, 'src/slugify.js listed');
});

test('resources/read of a file:// URI returns its text', async () => {
  const uri = pathToFileURL(path.join(ws, 'src', 'wrap.js')).href;
  const r = await s.client.readResource({ uri });
  assert.equal(r.contents.length, 1);
  assert.equal(r.contents[0].uri, uri);
  assert.equal(r.contents[0].text, fs.readFileSync(path.join(ws, 'src', 'wrap.js'), 'utf8'));
  assert.equal(typeof r.contents[0].mimeType, 'string');
});

test('resources/read of a binary file returns a base64 blob', async () => {
  const bytes = Buffer.from([0xff, 0x00, 0xfe, 0x01]);
  fs.writeFileSync(path.join(ws, 'bin.dat'), bytes);
  const r = await s.client.readResource({ uri: pathToFileURL(path.join(ws, 'bin.dat')).href });
  assert.equal(Buffer.from(r.contents[0].blob, 'base64').compare(bytes), 0);
});

test('resources/read of a missing file or a file outside the workspace is an error', async () => {
  await assert.rejects(s.client.readResource({ uri: pathToFileURL(path.join(ws, 'missing.txt')).href }),
    (e) => e.code === -32002 || e.code === -32602);
  await assert.rejects(s.client.readResource({ uri: 'file:///etc/passwd' }), (e) => typeof e.code === 'number');
});

test('resources/templates/list offers the workspace file template', async () => {
  const r = await s.client.listResourceTemplates();
  assert.ok(r.resourceTemplates.length >= 1);
  for (const t of r.resourceTemplates) {
    assert.equal(typeof t.uriTemplate, 'string');
    assert.equal(typeof t.name, 'string');
  }
  assert.ok(r.resourceTemplates.some((t) => t.uriTemplate.startsWith('file://') && t.uriTemplate.includes('{')));
});

test('prompts/list contains fix_failing_checks; prompts/get renders it', async () => {
  const r = await s.client.listPrompts();
  const p = r.prompts.find((x) => x.name === 'fix_failing_checks');
  assert.ok(p, JSON.stringify(r.prompts));
  assert.equal(typeof p.description, 'string');
  const got = await s.client.getPrompt({ name: 'fix_failing_checks', arguments: { checks: 'test' } });
  assert.ok(got.messages.length >= 1);
  assert.equal(got.messages[0].role, 'user');
  assert.match(got.messages[0].content.text, /verify/);
  await assert.rejects(s.client.getPrompt({ name: 'no_such_prompt' }), (e) => e.code === -32602);
});

test('completion/complete: prompt arguments and resource template paths', async () => {
  const checks = await s.client.complete({ ref: { type: 'ref/prompt', name: 'fix_failing_checks' }, argument: { name: 'checks', value: 't' } });
  assert.deepEqual(checks.completion.values, ['test']);
  const names = await s.client.complete({ ref: { type: 'ref/prompt', name: 'fix_failing_checks' }, argument: { name: 'workspace', value: '' } });
  assert.ok(names.completion.values.includes('sample-project'), JSON.stringify(names));
  const tpl = (await s.client.listResourceTemplates()).resourceTemplates.find((t) => t.uriTemplate.startsWith('file://'));
  const varName = /\{\+?(\w+)\}/.exec(tpl.uriTemplate)[1];
  const files = await s.client.complete({ ref: { type: 'ref/resource', uri: tpl.uriTemplate }, argument: { name: varName, value: 'src/s' } });
  assert.ok(files.completion.values.includes('src/slugify.js'), JSON.stringify(files));
  assert.ok(files.completion.values.length <= 100);
});

test('logging/setLevel debug makes the server send notifications/message', async () => {
  const { LoggingMessageNotificationSchema } = await import('@modelcontextprotocol/sdk/types.js');
  const seen = [];
  s.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { seen.push(n.params); });
  await s.client.setLoggingLevel('debug');
  // Something worth logging: a tool call that fails and one that works.
  await s.client.callTool({ name: 'file_read', arguments: { path: 'does/not/exist' } });
  structured(await s.client.callTool({ name: 'file_list', arguments: {} }));
  for (let i = 0; i < 40 && seen.length === 0; i++) await new Promise((r) => setTimeout(r, 25));
  assert.ok(seen.length > 0, 'at least one notifications/message after setLevel debug');
  const levels = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'];
  for (const m of seen) assert.ok(levels.includes(m.level), JSON.stringify(m));

  await s.client.setLoggingLevel('emergency');
  const before = seen.length;
  await s.client.callTool({ name: 'file_read', arguments: { path: 'does/not/exist' } });
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(seen.length, before, 'nothing below emergency is sent');
});

test('file changes notify resource subscribers', async () => {
  const { ResourceUpdatedNotificationSchema } = await import('@modelcontextprotocol/sdk/types.js');
  const uri = pathToFileURL(path.join(ws, 'README.md')).href;
  const updates = [];
  s.client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => updates.push(n.params.uri));
  await s.client.subscribeResource({ uri });
  structured(await s.client.callTool({ name: 'file_write', arguments: { path: 'README.md', content: '# changed\n' } }));
  for (let i = 0; i < 40 && updates.length === 0; i++) await new Promise((r) => setTimeout(r, 25));
  assert.deepEqual(updates, [uri]);
  await s.client.unsubscribeResource({ uri });
});

// H12: an error quotes the start of what it was sent, never all of it (no message over 1 MiB).
test('errors for a 4 MiB URI, method or prompt name stay small', async () => {
  const { RawServer } = await import('../lib/kiln.mjs');
  const srv = new RawServer({ args: ['--workspace', ws] });
  try {
    await srv.initialize();
    const huge = 'x'.repeat(4 << 20);
    const cases = [
      ['resources/read', { uri: `file://${ws}/${huge}` }],
      ['resources/read', { uri: `kiln://trace/${huge}` }],
      ['resources/read', { uri: `gopher://${huge}` }],
      ['resources/subscribe', { uri: `file://${ws}/${huge}` }],
      ['resources/subscribe', { uri: `kiln://trace/${huge}` }],
      ['prompts/get', { name: huge }],
      [`no/such/${huge}`, {}],
    ];
    let id = 100;
    for (const [method, params] of cases) {
      const r = await srv.request(++id, method, params, 20000);
      assert.ok(r.error, `${method.slice(0, 40)}: an error`);
      const size = JSON.stringify(r).length;
      assert.ok(size < 64 * 1024, `${method.slice(0, 40)} ${JSON.stringify(params).slice(0, 40)}: a ${size}-byte error`);
    }
  } finally {
    await srv.close();
  }
});
