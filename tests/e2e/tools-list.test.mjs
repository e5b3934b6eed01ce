// What an Inspector-style checker looks at in tools/list: names, descriptions, schemas, annotations.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { connectClient } from '../lib/kiln.mjs';

const required = ['workspace_open', 'workspace_list', 'workspace_info', 'file_read', 'file_write',
  'file_edit', 'file_list', 'file_search', 'file_move', 'file_delete', 'publish', 'unpublish', 'app_status',
  'app_restart', 'schedule_run', 'app_export'];

let session;
let tools;
before(async () => {
  session = await connectClient();
  tools = (await session.client.listTools()).tools;
});
after(() => session?.close());

test('the server identifies itself and declares its capabilities', () => {
  const info = session.client.getServerVersion();
  assert.equal(info.name, 'kiln');
  assert.match(info.version, /^\d+\.\d+\.\d+/);
  const caps = session.client.getServerCapabilities();
  for (const c of ['tools', 'resources', 'prompts', 'logging', 'completions']) assert.ok(caps[c], `capability ${c}`);
});

test('every tool of the contract is listed, once', () => {
  const names = tools.map((t) => t.name);
  assert.equal(new Set(names).size, names.length, `duplicate names: ${names}`);
  for (const name of required) assert.ok(names.includes(name), `missing tool ${name}`);
});

test('names are 1-64 chars of [a-z0-9_]', () => {
  for (const t of tools) assert.match(t.name, /^[a-z0-9_]{1,64}$/);
});

test('every tool has a description an agent can act on', () => {
  for (const t of tools) {
    assert.equal(typeof t.description, 'string', t.name);
    assert.ok(t.description.trim().length >= 20, `${t.name}: description too short: ${t.description}`);
  }
});

test('inputSchema: an object schema with additionalProperties false', () => {
  for (const t of tools) {
    assert.equal(t.inputSchema?.type, 'object', t.name);
    assert.equal(t.inputSchema.additionalProperties, false, `${t.name}: additionalProperties`);
    for (const r of t.inputSchema.required ?? []) {
      assert.ok(t.inputSchema.properties?.[r], `${t.name}: required '${r}' is not a property`);
    }
  }
});

test('outputSchema: declared on every tool, an object schema', () => {
  for (const t of tools) {
    assert.ok(t.outputSchema, `${t.name}: no outputSchema`);
    assert.equal(t.outputSchema.type, 'object', t.name);
  }
});

test('all four annotations are set explicitly as booleans', () => {
  for (const t of tools) {
    for (const a of ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint']) {
      assert.equal(typeof t.annotations?.[a], 'boolean', `${t.name}: ${a}`);
    }
  }
});

test('annotations agree with what the tools do', () => {
  const byName = Object.fromEntries(tools.map((t) => [t.name, t.annotations]));
  for (const n of ['workspace_list', 'workspace_info', 'file_read', 'file_list', 'file_search']) {
    assert.equal(byName[n].readOnlyHint, true, `${n} is read-only`);
  }
  for (const n of ['file_write', 'file_edit', 'file_move', 'file_delete']) {
    assert.equal(byName[n].readOnlyHint, false, `${n} writes`);
  }
  assert.equal(byName.file_delete.destructiveHint, true, 'file_delete is destructive');
});

test('required parameters match the contract', () => {
  const byName = Object.fromEntries(tools.map((t) => [t.name, t.inputSchema]));
  const want = {
    file_read: ['path'], file_write: ['path', 'content'], file_edit: ['path', 'edits'],
    file_search: ['pattern'], file_move: ['from', 'to'], file_delete: ['path'],
    app_status: ['artifact'], app_restart: ['artifact'], schedule_run: ['artifact', 'name'],
    app_export: ['artifact', 'path'],
  };
  for (const [n, req] of Object.entries(want)) {
    assert.deepEqual([...(byName[n].required ?? [])].sort(), [...req].sort(), n);
  }
});
