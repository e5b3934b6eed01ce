// Paths that resolve outside the workspace are refused with a tool error naming the path, and
// nothing outside is read, written, moved or deleted: "..", absolute paths elsewhere, symlinks
// planted in the workspace that point out, /proc/self/root.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { connectClient, copySample, errorText } from '../lib/kiln.mjs';

let session;
let ws;
let outside;
let call;
before(async () => {
  ws = copySample();
  outside = path.join(path.dirname(ws), 'outside');
  fs.mkdirSync(outside);
  fs.writeFileSync(path.join(outside, 'secret.txt'), 'top secret\n');
  fs.symlinkSync(outside, path.join(ws, 'link-dir'));
  fs.symlinkSync(path.join(outside, 'secret.txt'), path.join(ws, 'link-file'));
  fs.symlinkSync('../outside/secret.txt', path.join(ws, 'src', 'rel-link'));
  fs.symlinkSync('/etc', path.join(ws, 'etc-link'));
  session = await connectClient();
  call = (name, args) => session.client.callTool({ name, arguments: args });
  const open = await call('workspace_open', { path: ws });
  assert.ok(!open.isError, errorText(open));
});
after(() => session?.close());

const escapes = () => [
  '../outside/secret.txt',
  'src/../../outside/secret.txt',
  path.join(outside, 'secret.txt'),
  '/etc/passwd',
  'link-dir/secret.txt',
  'link-file',
  'src/rel-link',
  'etc-link/passwd',
  '/proc/self/root/etc/passwd',
  `/proc/self/root${ws}/../outside/secret.txt`,
];

async function refused(tool, args, shown) {
  const r = await call(tool, args);
  assert.equal(r.isError, true, `${tool} ${JSON.stringify(args)} must be refused; got ${JSON.stringify(r.structuredContent)}`);
  const text = errorText(r);
  assert.ok(text.includes(shown), `${tool}: the error names the path ${shown}: ${text}`);
  assert.doesNotMatch(text, /top secret|root:x:0/);
}

test('file_read refuses every escape', async () => {
  for (const p of escapes()) await refused('file_read', { path: p }, p);
});

test('file_write refuses every escape and writes nothing outside', async () => {
  for (const p of escapes()) await refused('file_write', { path: p, content: 'pwned\n' }, p);
  await refused('file_write', { path: 'link-dir/new.txt', content: 'pwned\n' }, 'link-dir/new.txt');
  await refused('file_write', { path: '../outside/new.txt', content: 'pwned\n', create_dirs: true }, '../outside/new.txt');
  assert.deepEqual(fs.readdirSync(outside).sort(), ['secret.txt']);
  assert.equal(fs.readFileSync(path.join(outside, 'secret.txt'), 'utf8'), 'top secret\n');
});

test('file_edit refuses every escape', async () => {
  for (const p of escapes()) {
    await refused('file_edit', { path: p, edits: [{ old_text: 'top secret', new_text: 'pwned' }] }, p);
  }
  assert.equal(fs.readFileSync(path.join(outside, 'secret.txt'), 'utf8'), 'top secret\n');
});

test('file_list and file_search do not follow links out', async () => {
  await refused('file_list', { path: '..' }, '..');
  await refused('file_list', { path: 'link-dir' }, 'link-dir');
  await refused('file_search', { pattern: 'secret', path: '../outside' }, '../outside');
  const r = await call('file_search', { pattern: 'top secret|root:x:0' });
  assert.ok(!r.isError, errorText(r));
  assert.equal(r.structuredContent.matches.length, 0, JSON.stringify(r.structuredContent.matches));
  const listed = await call('file_list', { path: '.', depth: 0, include_ignored: true });
  assert.ok(!listed.isError, errorText(listed));
  assert.ok(!listed.structuredContent.entries.some((e) => e.path.startsWith('link-dir/') || e.path.startsWith('etc-link/')));
});

test('file_move and file_delete refuse escapes on either side', async () => {
  fs.writeFileSync(path.join(ws, 'inside.txt'), 'inside\n');
  await refused('file_move', { from: 'inside.txt', to: '../outside/moved.txt' }, '../outside/moved.txt');
  await refused('file_move', { from: '../outside/secret.txt', to: 'stolen.txt' }, '../outside/secret.txt');
  await refused('file_move', { from: 'link-dir/secret.txt', to: 'stolen.txt' }, 'link-dir/secret.txt');
  await refused('file_delete', { path: '../outside/secret.txt' }, '../outside/secret.txt');
  await refused('file_delete', { path: 'link-dir/secret.txt' }, 'link-dir/secret.txt');
  await refused('file_delete', { path: '/proc/self/root/etc/hostname' }, '/proc/self/root/etc/hostname');
  assert.ok(fs.existsSync(path.join(ws, 'inside.txt')));
  assert.deepEqual(fs.readdirSync(outside).sort(), ['secret.txt']);
});

test('deleting a symlink that points out removes the link, not its target', async () => {
  const r = await call('file_delete', { path: 'link-file' });
  if (!r.isError) {
    // Allowed (the link itself lives inside): then the link is gone and only the link.
    assert.throws(() => fs.lstatSync(path.join(ws, 'link-file')), { code: 'ENOENT' });
  }
  assert.equal(fs.readFileSync(path.join(outside, 'secret.txt'), 'utf8'), 'top secret\n');
});

test('a workspace argument naming no known workspace is a tool error', async () => {
  const r = await call('file_read', { path: 'kiln.json', workspace: 'no-such-workspace' });
  assert.equal(r.isError, true);
});
