// Which workspace is current: none until workspace_open, --workspace PATH, the client's first
// file:// root; the durable record (workspace_list/info) shared by processes on one KILN_HOME.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';

import { spawnSync } from 'node:child_process';

import { connectClient, copySample, errorText, kilnBin, kilnEnv, structured, tempDir } from '../lib/kiln.mjs';

const call = (s, name, args = {}) => s.client.callTool({ name, arguments: args });

test('no workspace open: file tools say to call workspace_open', async () => {
  const s = await connectClient();
  try {
    for (const [tool, args] of [['file_read', { path: 'README.md' }], ['file_list', {}], ['file_search', { pattern: 'x' }],
      ['file_write', { path: 'a.txt', content: 'a' }]]) {
      const r = await call(s, tool, args);
      assert.equal(r.isError, true, tool);
      assert.match(errorText(r), /workspace_open/, tool);
    }
    const list = structured(await call(s, 'workspace_list'));
    assert.deepEqual(list.workspaces, []);
  } finally {
    await s.close();
  }
});

test('the server never exposes its own working directory by default', async () => {
  const s = await connectClient();
  try {
    const r = await call(s, 'file_list', {});
    assert.equal(r.isError, true);
  } finally {
    await s.close();
  }
});

test('workspace_open by path, then by name; workspace_list and workspace_info', async () => {
  const ws = copySample();
  const s = await connectClient();
  try {
    const opened = structured(await call(s, 'workspace_open', { path: ws }));
    const byName = structured(await call(s, 'workspace_open', { name: opened.name }));
    assert.equal(byName.id, opened.id);
    assert.equal(byName.root, ws);

    const list = structured(await call(s, 'workspace_list'));
    assert.equal(list.workspaces.length, 1);
    assert.deepEqual(
      { id: list.workspaces[0].id, name: list.workspaces[0].name, root: list.workspaces[0].root },
      { id: opened.id, name: opened.name, root: ws });
    assert.ok(list.workspaces[0].last_opened_at);

    const info = structured(await call(s, 'workspace_info', { workspace: opened.id }));
    assert.equal(info.root, ws);
    assert.deepEqual(info.config.verify, [
      { name: 'load', run: ['node', '--input-type=module', '-e', "import './src/index.js'"] },
      {
        name: 'test',
        run: 'mkdir -p reports && node --test --test-reporter=spec --test-reporter-destination=stdout --test-reporter=junit --test-reporter-destination=reports/junit.xml test/',
        report: { format: 'junit', path: 'reports/junit.xml' },
      },
      { name: 'report', run: ['node', 'tools/report.js', 'reports/junit.xml', 'reports/index.html'] },
    ]);
    const current = structured(await call(s, 'workspace_info', {}));
    assert.equal(current.root, ws, 'workspace_info defaults to the current workspace');
    const byNameInfo = structured(await call(s, 'workspace_info', { workspace: opened.name }));
    assert.equal(byNameInfo.root, ws);
  } finally {
    await s.close();
  }
});

test('workspace_open with create makes the folder; without it a missing folder is an error', async () => {
  const parent = tempDir('kiln-create-');
  const target = path.join(parent, 'fresh');
  const s = await connectClient();
  try {
    const missing = await call(s, 'workspace_open', { path: target });
    assert.equal(missing.isError, true);
    assert.ok(!fs.existsSync(target));
    const r = structured(await call(s, 'workspace_open', { path: target, create: true }));
    assert.equal(r.root, target);
    assert.ok(fs.statSync(target).isDirectory());
    assert.deepEqual(r.config.verify ?? [], [], 'no kiln.json: defaults');
    structured(await call(s, 'file_write', { path: 'hello.txt', content: 'hi\n' }));
    assert.equal(fs.readFileSync(path.join(target, 'hello.txt'), 'utf8'), 'hi\n');
  } finally {
    await s.close();
  }
});

test('the state lives in KILN_HOME, never in the workspace folder', async () => {
  const ws = copySample();
  const home = tempDir('kiln-home-');
  const before = fs.readdirSync(ws).sort();
  const s = await connectClient({ home });
  try {
    structured(await call(s, 'workspace_open', { path: ws }));
  } finally {
    await s.close();
  }
  assert.deepEqual(fs.readdirSync(ws).sort(), before);
  assert.ok(fs.readdirSync(home).length > 0, 'something was recorded in KILN_HOME');
});

test('kiln mcp --workspace PATH opens PATH when the client offers no roots', async () => {
  const ws = copySample();
  const s = await connectClient({ args: ['--workspace', ws] });
  try {
    const r = structured(await call(s, 'file_read', { path: 'kiln.json' }));
    assert.match(r.content, /node --test/);
    assert.equal(structured(await call(s, 'workspace_info')).root, ws);
  } finally {
    await s.close();
  }
});

test('a client with the roots capability gets its first file:// root opened', async () => {
  const ws = copySample();
  let asked = 0;
  const s = await connectClient({
    capabilities: { roots: { listChanged: true } },
    onRoots: () => {
      asked++;
      return [{ uri: 'https://example.invalid/not-a-file-root', name: 'web' }, { uri: pathToFileURL(ws).href, name: 'sample' }];
    },
  });
  try {
    const r = structured(await call(s, 'file_read', { path: 'README.md' }));
    assert.match(r.content, /textkit/);
    assert.equal(asked, 1);
    assert.equal(structured(await call(s, 'workspace_info')).root, ws);
  } finally {
    await s.close();
  }
});

test('roots/list_changed makes the server follow the new first root', async () => {
  const a = copySample('kiln-root-a-');
  const b = copySample('kiln-root-b-');
  fs.writeFileSync(path.join(b, 'only-in-b.txt'), 'b\n');
  let roots = [{ uri: pathToFileURL(a).href }];
  const s = await connectClient({ capabilities: { roots: { listChanged: true } }, onRoots: () => roots });
  try {
    assert.equal(structured(await call(s, 'workspace_info')).root, a);
    roots = [{ uri: pathToFileURL(b).href }];
    await s.client.sendRootsListChanged();
    let root;
    for (let i = 0; i < 50; i++) {
      root = structured(await call(s, 'workspace_info')).root;
      if (root === b) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(root, b);
  } finally {
    await s.close();
  }
});

test('two kiln mcp processes on the same KILN_HOME both work at once', async () => {
  const home = tempDir('kiln-shared-home-');
  const wsA = copySample('kiln-two-a-');
  const wsB = copySample('kiln-two-b-');
  const [s1, s2] = await Promise.all([connectClient({ home }), connectClient({ home })]);
  try {
    const [a, b] = await Promise.all([
      call(s1, 'workspace_open', { path: wsA }), call(s2, 'workspace_open', { path: wsB })]);
    assert.ok(!a.isError, errorText(a));
    assert.ok(!b.isError, errorText(b));
    await Promise.all([s1, s2].map(async (s, i) => {
      for (let k = 0; k < 10; k++) {
        structured(await call(s, 'file_write', { path: `w${i}-${k}.txt`, content: `${k}\n` }));
        structured(await call(s, 'workspace_open', { path: i ? wsB : wsA }));
      }
    }));
    const l1 = structured(await call(s1, 'workspace_list'));
    const l2 = structured(await call(s2, 'workspace_list'));
    assert.deepEqual(l1.workspaces.map((w) => w.root).sort(), [wsA, wsB].sort());
    assert.deepEqual(l2.workspaces.map((w) => w.root).sort(), [wsA, wsB].sort());
  } finally {
    await Promise.all([s1.close(), s2.close()]);
  }
});

// H3: Kiln's state directory (token, secrets, every principal's traces) is never a workspace, nor
// inside one, nor holds one; compared by device and inode, so symlinks and second names do not help.
test('the state directory, anything inside it and anything holding it are refused as workspaces', async () => {
  const home = tempDir('kiln-home-');
  const s = await connectClient({ home });
  try {
    const secrets = path.join(home, 'secrets');
    fs.mkdirSync(secrets, { recursive: true });
    fs.writeFileSync(path.join(secrets, 'MYTOKEN'), 'hunter2\n');
    const link = path.join(tempDir('kiln-link-'), 'innocent');
    fs.symlinkSync(secrets, link);
    for (const p of [home, secrets, path.join(home, 'traces'), link, path.dirname(home)]) {
      const r = await call(s, 'workspace_open', { path: p, create: true });
      assert.equal(r.isError, true, p);
      assert.match(errorText(r), /state directory/, p);
      assert.doesNotMatch(JSON.stringify(r), /hunter2/);
    }
    const made = await call(s, 'workspace_open', { path: path.join(secrets, 'made', 'deeper'), create: true });
    assert.equal(made.isError, true);
    assert.match(errorText(made), /state directory/);
    assert.ok(!fs.existsSync(path.join(secrets, 'made')), 'nothing was created inside the state directory');
    const read = await call(s, 'file_read', { path: 'MYTOKEN' });
    assert.equal(read.isError, true);
    assert.doesNotMatch(JSON.stringify(read), /hunter2/);
    // A named workspace (a folder of <state>/workspaces) still opens.
    const named = await call(s, 'workspace_open', { name: 'scratch', create: true });
    assert.ok(!named.isError, errorText(named));

    // A record made before this check (simulated: a registered folder later swapped for a link
    // into the state directory) is refused whenever it is named.
    const ws = copySample();
    const opened = structured(await call(s, 'workspace_open', { path: ws }));
    structured(await call(s, 'workspace_open', { name: 'scratch' }));
    fs.renameSync(ws, ws + '.old');
    fs.symlinkSync(secrets, ws);
    for (const args of [{ workspace: opened.id, path: 'MYTOKEN' }]) {
      const r = await call(s, 'file_read', args);
      assert.equal(r.isError, true);
      assert.match(errorText(r), /state directory/);
    }
    const again = await call(s, 'workspace_open', { name: opened.name });
    assert.equal(again.isError, true);
    assert.match(errorText(again), /state directory/);
  } finally {
    await s.close();
  }
  // --workspace and the CLI's sandboxed commands say the same.
  const cli = spawnSync(kilnBin(), ['run', '--workspace', path.join(home, 'secrets'), '--', 'cat', 'MYTOKEN'],
    { env: kilnEnv(home), encoding: 'utf8' });
  assert.notEqual(cli.status, 0);
  assert.doesNotMatch(cli.stdout, /hunter2/);
  assert.match(cli.stderr, /state directory/);
  const ver = spawnSync(kilnBin(), ['verify', '--workspace', path.join(home, 'secrets')], { env: kilnEnv(home), encoding: 'utf8' });
  assert.notEqual(ver.status, 0);
  assert.match(ver.stderr, /state directory/);
});
