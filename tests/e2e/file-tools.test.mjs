// Every workspace and file tool through the official SDK client, which validates each result's
// structuredContent against the tool's outputSchema (and throws if it does not match), on a temp
// copy of examples/sample-project.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { connectClient, copySample, errorText, structured } from '../lib/kiln.mjs';

let session;
let ws;
let call;
before(async () => {
  ws = copySample();
  fs.mkdirSync(path.join(ws, 'node_modules', 'dep'), { recursive: true });
  fs.writeFileSync(path.join(ws, 'node_modules', 'dep', 'index.js'), 'export const ignored = true;\n');
  session = await connectClient();
  call = (name, args) => session.client.callTool({ name, arguments: args });
});
after(() => session?.close());

const sha256 = (s) => createHash('sha256').update(s).digest('hex');

test('workspace_open a folder', async () => {
  const r = structured(await call('workspace_open', { path: ws }));
  assert.equal(r.root, ws);
  assert.equal(r.name, 'sample-project');
  assert.equal(typeof r.id, 'string');
  assert.equal(r.is_new, true);
  assert.deepEqual(r.config.verify, [
    { name: 'load', run: ['node', '--input-type=module', '-e', "import './src/index.js'"] },
    {
      name: 'test',
      run: 'mkdir -p reports && node --test --test-reporter=spec --test-reporter-destination=stdout --test-reporter=junit --test-reporter-destination=reports/junit.xml test/',
      report: { format: 'junit', path: 'reports/junit.xml' },
    },
    { name: 'report', run: ['node', 'tools/report.js', 'reports/junit.xml', 'reports/index.html'] },
  ]);
  assert.ok(r.created_at);
});

test('workspace_open again: same identity, not new', async () => {
  const a = structured(await call('workspace_open', { path: ws }));
  const b = structured(await call('workspace_open', { path: ws + '/' }));
  assert.equal(a.id, b.id);
  assert.equal(b.is_new, false);
});

test('file_read: content, lines, hash', async () => {
  const r = structured(await call('file_read', { path: 'src/slugify.js' }));
  const disk = fs.readFileSync(path.join(ws, 'src/slugify.js'), 'utf8');
  assert.equal(r.content, disk);
  assert.equal(r.sha256, sha256(disk));
  assert.equal(r.size, Buffer.byteLength(disk));
  assert.equal(r.total_lines, disk.split('\n').length - (disk.endsWith('\n') ? 1 : 0));
  assert.equal(r.truncated, false);
  // The same data as a text block, for clients that ignore structuredContent.
  const res = await call('file_read', { path: 'src/slugify.js' });
  assert.ok(res.content.some((c) => c.type === 'text' && c.text.includes('"sha256"')));
});

test('file_read pages by lines: offset/limit/next_offset', async () => {
  const first = structured(await call('file_read', { path: 'src/wrap.js', limit: 5 }));
  assert.equal(first.truncated, true);
  assert.equal(first.content.split('\n').filter((l, i, a) => i < a.length - 1 || l).length, 5);
  assert.equal(typeof first.next_offset, 'number');
  const rest = structured(await call('file_read', { path: 'src/wrap.js', offset: first.next_offset }));
  assert.equal(first.content + rest.content, fs.readFileSync(path.join(ws, 'src/wrap.js'), 'utf8'));
});

test('file_read base64 of a binary file', async () => {
  const bytes = Buffer.from([0, 1, 2, 255, 254, 10, 13, 0]);
  fs.writeFileSync(path.join(ws, 'blob.bin'), bytes);
  const r = structured(await call('file_read', { path: 'blob.bin', encoding: 'base64' }));
  assert.equal(Buffer.from(r.content, 'base64').compare(bytes), 0);
});

test('file_read of a missing file is a tool error naming it', async () => {
  const r = await call('file_read', { path: 'src/nope.js' });
  assert.equal(r.isError, true);
  assert.match(errorText(r), /nope\.js/);
});

test('file_write creates, overwrites, creates dirs, honours if_sha256', async () => {
  const w1 = structured(await call('file_write', { path: 'notes/todo.txt', content: 'one\n', create_dirs: true }));
  assert.equal(w1.created, true);
  assert.equal(w1.size, 4);
  assert.equal(w1.sha256, sha256('one\n'));
  assert.equal(fs.readFileSync(path.join(ws, 'notes/todo.txt'), 'utf8'), 'one\n');

  const w2 = structured(await call('file_write', { path: 'notes/todo.txt', content: 'two\n', if_sha256: w1.sha256 }));
  assert.equal(w2.created, false);

  const stale = await call('file_write', { path: 'notes/todo.txt', content: 'three\n', if_sha256: w1.sha256 });
  assert.equal(stale.isError, true, 'a stale if_sha256 is refused');
  assert.equal(fs.readFileSync(path.join(ws, 'notes/todo.txt'), 'utf8'), 'two\n');

  const b64 = structured(await call('file_write', { path: 'notes/b.bin', content: Buffer.from([1, 2, 3]).toString('base64'), encoding: 'base64' }));
  assert.equal(b64.size, 3);
  assert.deepEqual([...fs.readFileSync(path.join(ws, 'notes/b.bin'))], [1, 2, 3]);
});

test('file_write without create_dirs into a missing folder is a tool error', async () => {
  const r = await call('file_write', { path: 'no/such/dir/x.txt', content: 'x' });
  assert.equal(r.isError, true);
});

test('file_edit: exact single match, unified diff, dry_run', async () => {
  const before = fs.readFileSync(path.join(ws, 'src/wrap.js'), 'utf8');
  const dry = structured(await call('file_edit', {
    path: 'src/wrap.js', dry_run: true,
    edits: [{ old_text: 'export function wrap(text, width = 80) {', new_text: 'export function wrap(text, width = 72) {' }],
  }));
  assert.match(dry.diff, /^-export function wrap\(text, width = 80\) \{$/m);
  assert.match(dry.diff, /^\+export function wrap\(text, width = 72\) \{$/m);
  assert.equal(fs.readFileSync(path.join(ws, 'src/wrap.js'), 'utf8'), before, 'dry_run changes nothing');

  const r = structured(await call('file_edit', {
    path: 'src/wrap.js',
    edits: [{ old_text: 'export function wrap(text, width = 80) {', new_text: 'export function wrap(text, width = 72) {' }],
  }));
  assert.equal(r.replacements, 1);
  const after = fs.readFileSync(path.join(ws, 'src/wrap.js'), 'utf8');
  assert.equal(after, before.replace('width = 80', 'width = 72'));
  assert.equal(r.sha256, sha256(after));
});

test('file_edit: zero or several matches are tool errors; replace_all replaces all', async () => {
  fs.writeFileSync(path.join(ws, 'rep.txt'), 'a x\nb x\nc x\n');
  const none = await call('file_edit', { path: 'rep.txt', edits: [{ old_text: 'zzz', new_text: 'y' }] });
  assert.equal(none.isError, true);
  const many = await call('file_edit', { path: 'rep.txt', edits: [{ old_text: 'x', new_text: 'y' }] });
  assert.equal(many.isError, true);
  assert.match(errorText(many), /3|several|multiple|more than one/i);
  assert.equal(fs.readFileSync(path.join(ws, 'rep.txt'), 'utf8'), 'a x\nb x\nc x\n');
  const all = structured(await call('file_edit', { path: 'rep.txt', edits: [{ old_text: 'x', new_text: 'y', replace_all: true }] }));
  assert.equal(all.replacements, 3);
  assert.equal(fs.readFileSync(path.join(ws, 'rep.txt'), 'utf8'), 'a y\nb y\nc y\n');
});

test('file_edit keeps CRLF line endings', async () => {
  fs.writeFileSync(path.join(ws, 'crlf.txt'), 'one\r\ntwo\r\nthree\r\n');
  structured(await call('file_edit', { path: 'crlf.txt', edits: [{ old_text: 'one\ntwo', new_text: 'one\n2' }] }));
  assert.equal(fs.readFileSync(path.join(ws, 'crlf.txt'), 'utf8'), 'one\r\n2\r\nthree\r\n');
});

test('file_list: entries, depth, glob, .gitignore-aware', async () => {
  const r = structured(await call('file_list', { path: '.', depth: 0 }));
  const paths = r.entries.map((e) => e.path);
  for (const p of ['src', 'src/slugify.js', 'test/wrap.test.js', 'kiln.json', 'README.md']) {
    assert.ok(paths.includes(p), `${p} listed; got ${paths.join(', ')}`);
  }
  assert.ok(!paths.some((p) => p.startsWith('node_modules')), 'ignored by .gitignore');
  const e = r.entries.find((x) => x.path === 'src/slugify.js');
  assert.equal(e.type, 'file');
  assert.equal(e.size, fs.statSync(path.join(ws, 'src/slugify.js')).size);
  assert.equal(r.entries.find((x) => x.path === 'src').type, 'dir');

  const shallow = structured(await call('file_list', { path: '.' }));
  assert.ok(!shallow.entries.some((x) => x.path.includes('/')), 'the default depth 1 stays at the top');
  assert.ok(shallow.entries.some((x) => x.path === 'src'));
  const two = structured(await call('file_list', { path: '.', depth: 2 }));
  assert.ok(two.entries.some((x) => x.path === 'src/slugify.js'), 'depth 2 shows src/ contents');

  const globbed = structured(await call('file_list', { path: '.', depth: 0, glob: '**/*.test.js' }));
  assert.deepEqual(globbed.entries.filter((x) => x.type === 'file').map((x) => x.path).sort(),
    ['test/case.test.js', 'test/slugify.test.js', 'test/wrap.test.js']);

  const all = structured(await call('file_list', { path: '.', depth: 0, include_ignored: true }));
  assert.ok(all.entries.some((x) => x.path === 'node_modules/dep/index.js'), 'include_ignored shows them');
});

test('file_search: regex and literal, context lines, glob', async () => {
  const r = structured(await call('file_search', { pattern: 'export function (slugify|wrap)\\b' }));
  const hits = r.matches.map((m) => `${m.path}:${m.line}`).sort();
  assert.equal(hits.length, 2, JSON.stringify(r.matches));
  assert.ok(hits.some((h) => h.startsWith('src/slugify.js:')));
  assert.ok(r.files_scanned >= 5);
  assert.equal(r.truncated, false);
  const m = r.matches.find((x) => x.path === 'src/slugify.js');
  assert.match(m.text, /export function slugify/);
  assert.equal(typeof m.column, 'number');

  const lit = structured(await call('file_search', { pattern: 'a.b(', literal: true }));
  assert.equal(lit.matches.length, 0);
  const ctx = structured(await call('file_search', { pattern: 'DEFAULT_SEPARATOR =', context_lines: 1 }));
  assert.equal(ctx.matches.length, 1);
  assert.equal(ctx.matches[0].before.length, 1);
  assert.equal(ctx.matches[0].after.length, 1);

  const onlyTests = structured(await call('file_search', { pattern: 'import', glob: 'test/**' }));
  assert.ok(onlyTests.matches.length > 0 && onlyTests.matches.every((x) => x.path.startsWith('test/')));
  const ignored = structured(await call('file_search', { pattern: 'ignored = true' }));
  assert.equal(ignored.matches.length, 0, '.gitignore-aware by default');

  const capped = structured(await call('file_search', { pattern: 'test', max_results: 2 }));
  assert.equal(capped.matches.length, 2);
  assert.equal(capped.truncated, true);

  const insensitive = structured(await call('file_search', { pattern: 'EXPORT FUNCTION SLUGIFY', case_sensitive: false }));
  assert.equal(insensitive.matches.length, 1);
});

test('file_search with a bad regex is a tool error', async () => {
  const r = await call('file_search', { pattern: '(unclosed' });
  assert.equal(r.isError, true);
});

test('file_move: rename, refuse to overwrite unless asked', async () => {
  fs.writeFileSync(path.join(ws, 'm1.txt'), 'm1');
  fs.writeFileSync(path.join(ws, 'm2.txt'), 'm2');
  const r = structured(await call('file_move', { from: 'm1.txt', to: 'moved/m1.txt' }));
  assert.equal(r.from, 'm1.txt');
  assert.equal(r.to, 'moved/m1.txt');
  assert.equal(fs.readFileSync(path.join(ws, 'moved/m1.txt'), 'utf8'), 'm1');
  assert.ok(!fs.existsSync(path.join(ws, 'm1.txt')));
  const clash = await call('file_move', { from: 'm2.txt', to: 'moved/m1.txt' });
  assert.equal(clash.isError, true);
  structured(await call('file_move', { from: 'm2.txt', to: 'moved/m1.txt', overwrite: true }));
  assert.equal(fs.readFileSync(path.join(ws, 'moved/m1.txt'), 'utf8'), 'm2');
});

test('file_delete: a file; a folder only with recursive', async () => {
  fs.mkdirSync(path.join(ws, 'trash/sub'), { recursive: true });
  fs.writeFileSync(path.join(ws, 'trash/sub/a.txt'), 'a');
  fs.writeFileSync(path.join(ws, 'gone.txt'), 'x');
  const r = structured(await call('file_delete', { path: 'gone.txt' }));
  assert.ok(r.deleted);
  assert.ok(!fs.existsSync(path.join(ws, 'gone.txt')));
  const dir = await call('file_delete', { path: 'trash' });
  assert.equal(dir.isError, true, 'a non-empty folder needs recursive');
  assert.ok(fs.existsSync(path.join(ws, 'trash/sub/a.txt')));
  structured(await call('file_delete', { path: 'trash', recursive: true }));
  assert.ok(!fs.existsSync(path.join(ws, 'trash')));
  const missing = await call('file_delete', { path: 'gone.txt' });
  assert.equal(missing.isError, true);
});

test('the workspace root itself cannot be deleted or moved', async () => {
  for (const p of ['.', '', ws]) {
    const r = await call('file_delete', { path: p, recursive: true });
    assert.equal(r.isError, true, `delete ${JSON.stringify(p)}`);
  }
  assert.ok(fs.existsSync(path.join(ws, 'kiln.json')));
});

test('absolute paths inside the root are accepted', async () => {
  const r = structured(await call('file_read', { path: path.join(ws, 'kiln.json') }));
  assert.match(r.content, /verify/);
});

test('argument errors are tool results the model can act on', async () => {
  const r = await call('file_read', {});
  assert.equal(r.isError, true);
  assert.match(errorText(r), /path/);
  const extra = await call('file_read', { path: 'kiln.json', bogus: 1 });
  assert.equal(extra.isError, true);
  assert.match(errorText(extra), /bogus/);
});
