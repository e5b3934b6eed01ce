// Activation against the stub `vscode`: every contributed command, view, provider and scheme is
// registered; the MCP server definition is right and follows the settings; an older VS Code (no
// MCP API, or the pre-final one that throws) still gets the rest; the kiln.json schema is wired.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { copySchema } from '../scripts/build.mjs';
import { activate, extDir, fakeKiln, packageJson, repoRoot, tempDir } from './helpers.mjs';

const contributed = packageJson.contributes.commands.map((c) => c.command);

test('manifest: engine ^1.101.0, @types/vscode pinned to it, main is the bundle', () => {
  assert.equal(packageJson.engines.vscode, '^1.101.0');
  assert.equal(packageJson.devDependencies['@types/vscode'], '1.101.0');
  assert.equal(packageJson.main, './dist/extension.js');
  for (const [name, v] of Object.entries({ ...packageJson.dependencies, ...packageJson.devDependencies })) {
    assert.match(v, /^\d+\.\d+\.\d+$/, `${name} is pinned to an exact version`);
  }
  const lock = JSON.parse(fs.readFileSync(path.join(extDir, 'package-lock.json'), 'utf8'));
  assert.equal(lock.packages['node_modules/@types/vscode'].version, '1.101.0');
});

test('every contributed command is registered, and nothing else', async (t) => {
  const { rec } = await activate({ folders: [tempDir()] }, t);
  assert.deepEqual([...rec.commands.keys()].sort(), [...contributed].sort());
  for (const id of ['kiln.openWorkspace', 'kiln.runCommand', 'kiln.verify', 'kiln.showTraces', 'kiln.publish', 'kiln.restartServer', 'kiln.showLog', 'kiln.showRunChanges', 'kiln.restoreCheckpoint']) {
    assert.ok(rec.commands.has(id), id);
  }
});

test('commands are named in the palette under the Kiln category; helpers are hidden', () => {
  for (const c of packageJson.contributes.commands) assert.equal(c.category, 'Kiln', c.command);
  const hidden = packageJson.contributes.menus.commandPalette.filter((m) => m.when === 'false').map((m) => m.command);
  assert.deepEqual(hidden.sort(), ['kiln.loadMoreTraces', 'kiln.openTrace', 'kiln.openTraceOutput', 'kiln.refreshTraces', 'kiln.restoreBeforeRun']);
});

test('the Traces view, the trace document scheme, the log channel and the status bar item are registered', async (t) => {
  const { rec } = await activate({ folders: [tempDir()] }, t);
  for (const [, views] of Object.entries(packageJson.contributes.views)) {
    for (const v of views) assert.ok(rec.treeViews.get(v.id)?.treeDataProvider, `tree view ${v.id}`);
  }
  assert.ok(rec.contentProviders.has('kiln-trace'));
  assert.ok(rec.contentProviders.has('kiln-checkpoint'));
  const log = rec.channels.get('Kiln');
  assert.ok(log && typeof log.info === 'function', 'a log output channel named Kiln');
  assert.match(rec.statusItems[0].text, /Kiln/);
  assert.ok(rec.statusItems[0].visible);
  assert.ok(rec.diagnostics.has('kiln'));
});

test('the MCP provider is registered under the contributed id', async (t) => {
  const { rec, api } = await activate({ folders: [tempDir()] }, t);
  const ids = packageJson.contributes.mcpServerDefinitionProviders.map((p) => p.id);
  assert.deepEqual(ids, ['kiln.mcpServers']);
  assert.deepEqual([...rec.mcpProviders.keys()], ids);
  assert.equal(api.mcpRegistered, true);
  assert.match(rec.channels.get('Kiln').text(), /Registered Kiln as an MCP server/);
});

test('the server definition: label, command, args, cwd = the workspace folder, version from kiln --version', async (t) => {
  const folder = tempDir('kiln-vsc-folder-');
  const { rec, vscode } = await activate({ folders: [folder], settings: { 'kiln.server.path': fakeKiln } }, t);
  const provider = rec.mcpProviders.get('kiln.mcpServers');
  const defs = await provider.provideMcpServerDefinitions(new vscode.CancellationTokenSource().token);
  assert.equal(defs.length, 1);
  const [d] = defs;
  assert.ok(d instanceof vscode.McpStdioServerDefinition);
  assert.equal(d.label, 'Kiln');
  assert.equal(d.command, fakeKiln);
  assert.deepEqual(d.args, ['mcp', '--workspace', folder]);
  assert.deepEqual(d.env, {});
  assert.equal(d.version, '9.9.9');
  assert.equal(d.cwd.fsPath, folder);
  assert.equal(d.cwd.scheme, 'file');
  assert.equal(await provider.resolveMcpServerDefinition(d, new vscode.CancellationTokenSource().token), d);
});

test('settings: extra arguments follow `mcp`, a --workspace of the user wins, changes fire onDidChange', async (t) => {
  const folder = tempDir('kiln-vsc-folder-');
  const { rec, vscode } = await activate({ folders: [folder], settings: { 'kiln.server.path': fakeKiln, 'kiln.server.extraArgs': ['--log-level', 'debug'] } }, t);
  const provider = rec.mcpProviders.get('kiln.mcpServers');
  let [d] = await provider.provideMcpServerDefinitions();
  assert.deepEqual(d.args, ['mcp', '--workspace', folder, '--log-level', 'debug']);
  let fired = 0;
  provider.onDidChangeMcpServerDefinitions(() => fired++);
  rec.setSetting('kiln.server.extraArgs', ['--workspace', '/elsewhere', '--sandbox-idle-s', '60']);
  assert.equal(fired, 1);
  [d] = await provider.provideMcpServerDefinitions();
  assert.deepEqual(d.args, ['mcp', '--workspace', '/elsewhere', '--sandbox-idle-s', '60']);
  rec.setSetting('kiln.server.path', '${workspaceFolder}/bin/kiln');
  assert.equal(fired, 2);
  [d] = await provider.provideMcpServerDefinitions();
  assert.equal(d.command, path.join(folder, 'bin/kiln'));
  assert.equal(d.version, undefined, 'no version when the binary is missing');
  rec.setFolders([folder, tempDir()]);
  assert.equal(fired, 3, 'folder changes fire too');
  assert.ok(vscode);
});

test('no folder open: no cwd and no --workspace', async (t) => {
  const { rec } = await activate({ settings: { 'kiln.server.path': fakeKiln } }, t);
  const [d] = await rec.mcpProviders.get('kiln.mcpServers').provideMcpServerDefinitions();
  assert.deepEqual(d.args, ['mcp']);
  assert.equal(d.cwd, undefined);
});

test('a missing kiln binary: resolve refuses to start it and says which setting to fix', async (t) => {
  const { rec } = await activate({ folders: [tempDir()], settings: { 'kiln.server.path': '/nonexistent/kiln' } }, t);
  const provider = rec.mcpProviders.get('kiln.mcpServers');
  const [d] = await provider.provideMcpServerDefinitions();
  rec.messageAnswers.push('Open Settings');
  assert.equal(await provider.resolveMcpServerDefinition(d), undefined);
  const m = rec.messages.at(-1);
  assert.equal(m.kind, 'error');
  assert.match(m.text, /\/nonexistent\/kiln.*not found.*kiln\.server\.path/);
  await rec.waitFor(() => rec.executed.find((e) => e.id === 'workbench.action.openSettings'), 2000, 'open settings');
});

for (const [mode, why] of [['missing', /no MCP server API/], ['throws', /registering the MCP server provider failed: MCP configuration providers must be registered/]]) {
  test(`an older VS Code (MCP API ${mode}) still activates everything else`, async (t) => {
    const { rec, api } = await activate({ folders: [tempDir()], mcp: mode, version: '1.100.3' }, t);
    assert.equal(api.mcpRegistered, false);
    assert.equal(rec.mcpProviders.size, 0);
    assert.deepEqual([...rec.commands.keys()].sort(), [...contributed].sort());
    assert.ok(rec.treeViews.has('kiln.traces'));
    assert.match(rec.channels.get('Kiln').text(), why);
  });
}

test('jsonValidation: kiln.json validated by the repo schema, copied verbatim at build time', () => {
  assert.deepEqual(packageJson.contributes.jsonValidation, [{ fileMatch: 'kiln.json', url: './schemas/kiln.schema.json' }]);
  const copied = copySchema();
  assert.equal(copied, path.join(extDir, 'schemas', 'kiln.schema.json'));
  assert.deepEqual(fs.readFileSync(copied), fs.readFileSync(path.join(repoRoot, 'schemas', 'kiln.schema.json')));
  const ignore = fs.readFileSync(path.join(extDir, '.vscodeignore'), 'utf8');
  assert.match(ignore, /^!schemas\/kiln\.schema\.json$/m, 'the schema is packaged');
  assert.match(ignore, /^!dist\/extension\.js$/m, 'the bundle is packaged');
});

test('settings contributed: server path, extra arguments, trace level', () => {
  const props = packageJson.contributes.configuration.properties;
  assert.equal(props['kiln.server.path'].default, 'kiln');
  assert.equal(props['kiln.server.extraArgs'].type, 'array');
  assert.deepEqual(props['kiln.trace.server'].enum, ['off', 'messages', 'verbose']);
});

test('the run changes commands are offered on rows of runs that changed files', () => {
  const item = packageJson.contributes.menus['view/item/context'];
  const on = (cmd) => item.filter((m) => m.command === cmd).map((m) => m.when);
  for (const cmd of ['kiln.showRunChanges', 'kiln.restoreBeforeRun']) {
    assert.ok(on(cmd).length >= 1, cmd);
    for (const w of on(cmd)) assert.match(w, /viewItem =~ \/\\\.changes\$\//, cmd);
  }
  assert.ok(packageJson.contributes.menus['view/title'].some((m) => m.command === 'kiln.restoreCheckpoint'));
});
