// Checkpoints through MCP with the official SDK client (TOOLS.md "Checkpoints and what each run
// changed"): the changes a sandbox_exec (foreground and background) and a verify record in their
// traces, checkpoint_diff of those ids, restore of bytes, modes and links (never following a link
// out of the workspace), undo through checkpoint_before, dry_run, ignored files, FIFOs and sockets
// skipped with a note, "checkpoints": {"auto": false}, checkpoint_list paging, another principal's
// and made-up ids, kill -9 of the server during a big checkpoint and during a restore, and a full
// state directory. Every test runs its own `kiln mcp --workspace WS --state-dir STATE` on fresh
// temp folders. Tests that need the sandbox are skipped with kiln's reason when it cannot run here
// (failed with it under KILN_REQUIRE_SANDBOX=1); the disk-full test needs root (a small tmpfs).
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

import { errorText, kilnBin, kilnEnv, sleep, structured, TapTransport, tempDir } from '../lib/kiln.mjs';
import { httpClient, startServe } from '../lib/mcp_http.mjs';
import { stopProcess } from '../lib/http.mjs';
import { probeSandbox } from '../lib/sandbox_probe.mjs';

const isRoot = process.getuid() === 0;

function freshDir(prefix) {
  return fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), prefix)));
}

// Writes `files` ({relative path: string | Buffer | {mode, data} | {link}}) below `root`.
function plant(root, files) {
  for (const [rel, v] of Object.entries(files)) {
    const p = path.join(root, rel);
    fs.mkdirSync(path.dirname(p), { recursive: true });
    if (v && typeof v === 'object' && 'link' in v) fs.symlinkSync(v.link, p);
    else if (v && typeof v === 'object' && !Buffer.isBuffer(v)) {
      fs.writeFileSync(p, v.data);
      fs.chmodSync(p, v.mode);
    } else fs.writeFileSync(p, v);
  }
}

// Everything below `root` (no link followed) as {rel: description}: files by mode and sha256,
// links by target, folders by mode. Two equal snapshots mean equal trees, byte for byte.
function snapshot(root, { skip = () => false } = {}) {
  const out = {};
  const walk = (dir, rel) => {
    for (const name of fs.readdirSync(dir).sort()) {
      const r = rel ? `${rel}/${name}` : name;
      if (skip(r)) continue;
      const p = path.join(dir, name);
      const st = fs.lstatSync(p);
      const mode = (st.mode & 0o7777).toString(8);
      if (st.isSymbolicLink()) out[r] = `link ${fs.readlinkSync(p)}`;
      else if (st.isDirectory()) {
        out[r] = `dir ${mode}`;
        walk(p, r);
      } else if (st.isFile()) out[r] = `file ${mode} ${crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex')}`;
      else out[r] = `special ${st.mode.toString(8)}`;
    }
  };
  walk(root, '');
  return out;
}

// Starts `kiln mcp --workspace ws --state-dir state` (fresh temp folders unless given); the folders
// this call made are removed after the test, servers closed first.
async function startKiln(t, { ws, state, files, env = {} } = {}) {
  const made = [];
  if (!ws) made.push((ws = freshDir('kiln-cp-ws-')));
  if (!state) made.push((state = freshDir('kiln-cp-state-')));
  if (files) plant(ws, files);
  const inner = new StdioClientTransport({
    command: kilnBin(), args: ['mcp', '--workspace', ws, '--state-dir', state], env: kilnEnv(state, env), stderr: 'pipe',
  });
  let stderr = '';
  inner.stderr?.on('data', (c) => { stderr += c.toString(); });
  const transport = new TapTransport(inner);
  const client = new Client({ name: 'kiln-checkpoints-e2e', version: '1.0.0' }, { capabilities: {} });
  await client.connect(transport);
  let closed = false;
  const k = {
    client, transport, ws, state,
    get stderr() { return stderr; },
    get pid() { return transport.pid; },
    call: (name, args, opts) => client.callTool({ name, arguments: args }, undefined, { timeout: 300000, ...opts }),
    async ok(name, args, opts) { return structured(await k.call(name, args, opts)); },
    async err(name, args) {
      const r = await k.call(name, args);
      assert.equal(r.isError, true, `${name} ${JSON.stringify(args)} should fail, got ${JSON.stringify(r.structuredContent)}`);
      return errorText(r);
    },
    async close() {
      if (closed) return;
      closed = true;
      await client.close().catch(() => {});
    },
  };
  t.after(async () => {
    await k.close();
    if (!process.env.KILN_KEEP_TEMP) for (const d of made) fs.rmSync(d, { recursive: true, force: true });
  });
  return k;
}

const trace = async (k, id) => (await k.ok('trace_get', { trace_id: id })).trace;

// Polls trace_get until the trace has ended and has its changes (at most `ms`).
async function endedTrace(k, id, ms = 60000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const tr = await trace(k, id);
    if (tr.status !== 'running' && tr.changes) return tr;
    if (Date.now() > deadline) return tr;
    await sleep(100);
  }
}

const byPath = (paths) => Object.fromEntries(paths.map((p) => [p.path, p.change]));

let sandboxTest;
{
  const probeT = { after: () => {} };
  const k = await startKiln(probeT, { ws: freshDir('kiln-cp-probe-ws-'), state: freshDir('kiln-cp-probe-state-') });
  ({ test: sandboxTest } = await probeSandbox('checkpoints e2e', k.call));
  await k.close();
  fs.rmSync(k.ws, { recursive: true, force: true });
  fs.rmSync(k.state, { recursive: true, force: true });
}

sandboxTest('an exec that adds, modifies and deletes files has exactly those in its trace\'s changes; checkpoint_diff takes its ids', async (t) => {
  const k = await startKiln(t, { files: { 'keep.txt': 'same\n', 'mod.txt': 'one\n', 'gone.txt': 'bye\n', 'src/deep/x.c': 'int x;\n' } });
  const r = await k.ok('sandbox_exec', { command: 'echo two >> mod.txt; rm gone.txt; mkdir -p new/dir; echo hi > new/dir/added.txt; touch keep.txt' });
  assert.equal(r.exit_code, 0);
  const tr = await endedTrace(k, r.trace_id);
  const c = tr.changes;
  assert.ok(c, `the trace has changes: ${JSON.stringify(tr).slice(0, 400)}`);
  assert.deepEqual(byPath(c.paths), { 'mod.txt': 'modified', 'gone.txt': 'deleted', 'new/dir/added.txt': 'added' });
  assert.deepEqual([c.added, c.modified, c.deleted], [1, 1, 1]);
  assert.match(c.checkpoint_before, /^cp_[0-9a-f]+$/);
  assert.match(c.checkpoint_after, /^cp_[0-9a-f]+$/);
  assert.notEqual(c.checkpoint_before, c.checkpoint_after);

  const d = await k.ok('checkpoint_diff', { from: c.checkpoint_before, to: c.checkpoint_after });
  assert.deepEqual(byPath(d.changes), byPath(c.paths));
  const mod = d.changes.find((x) => x.path === 'mod.txt');
  assert.match(mod.diff, /^\+two$/m);
  assert.equal(mod.size_before, 4);
  assert.equal(mod.size_after, 8);
  // Against the files now (the default `to`): nothing changed since the exec.
  assert.deepEqual((await k.ok('checkpoint_diff', { from: c.checkpoint_after })).changes, []);
  // `path` narrows the diff.
  assert.deepEqual((await k.ok('checkpoint_diff', { from: c.checkpoint_before, to: c.checkpoint_after, path: 'new' })).changes.map((x) => x.path), ['new/dir/added.txt']);
  // The exec's checkpoints are listed with their trigger and trace.
  const listed = (await k.ok('checkpoint_list', {})).checkpoints;
  for (const id of [c.checkpoint_before, c.checkpoint_after]) {
    const e = listed.find((x) => x.checkpoint_id === id);
    assert.ok(e, `${id} in checkpoint_list`);
    assert.equal(e.trigger, 'exec');
  }
});

test('restore brings back every byte and mode, removes what was added, keeps links as links and never follows one out', async (t) => {
  const outside = freshDir('kiln-cp-outside-');
  t.after(() => fs.rmSync(outside, { recursive: true, force: true }));
  fs.writeFileSync(path.join(outside, 'target.txt'), 'OUTSIDE\n');
  fs.mkdirSync(path.join(outside, 'dir'));
  const outsideBefore = snapshot(outside);
  const binary = crypto.randomBytes(200 * 1024);
  const k = await startKiln(t, {
    files: {
      'data.bin': binary,
      'run.sh': { data: '#!/bin/sh\necho run\n', mode: 0o755 },
      'secret.txt': { data: 'private\n', mode: 0o600 },
      'empty.txt': '',
      'cfg/settings.ini': 'a=1\n',
      'sub/inner.txt': 'inner\n',
      'rel-link': { link: 'data.bin' },
      'dangling': { link: 'does/not/exist' },
      'abs-out': { link: path.join(outside, 'target.txt') },
    },
  });
  fs.chmodSync(path.join(k.ws, 'cfg'), 0o750);
  const want = snapshot(k.ws);
  const cp = await k.ok('checkpoint_create', { label: 'good' });
  assert.match(cp.checkpoint_id, /^cp_/);
  assert.equal(cp.label, 'good');
  assert.equal(cp.files, 9, 'files and links are counted');

  // Wreck it: new bytes, lost modes, a link turned into a file and a file into a link that points
  // out of the workspace, a folder replaced by a link to a folder outside, additions everywhere.
  const ws = k.ws;
  fs.writeFileSync(path.join(ws, 'data.bin'), crypto.randomBytes(1000));
  fs.chmodSync(path.join(ws, 'run.sh'), 0o644);
  fs.chmodSync(path.join(ws, 'secret.txt'), 0o666);
  fs.writeFileSync(path.join(ws, 'empty.txt'), 'not empty');
  fs.rmSync(path.join(ws, 'rel-link'));
  fs.writeFileSync(path.join(ws, 'rel-link'), 'now a file');
  fs.rmSync(path.join(ws, 'cfg', 'settings.ini'));
  fs.symlinkSync(path.join(outside, 'target.txt'), path.join(ws, 'cfg', 'settings.ini'));
  fs.rmSync(path.join(ws, 'sub'), { recursive: true });
  fs.symlinkSync(path.join(outside, 'dir'), path.join(ws, 'sub'));
  fs.chmodSync(path.join(ws, 'cfg'), 0o777);
  plant(ws, { 'added.txt': 'new\n', 'newdir/a/b.txt': 'deep new\n', 'cfg/extra.ini': 'x\n' });
  const wrecked = snapshot(ws);

  const r = await k.ok('checkpoint_restore', { checkpoint_id: cp.checkpoint_id });
  assert.equal(r.dry_run, false);
  assert.match(r.checkpoint_before, /^cp_/);
  for (const p of ['data.bin', 'run.sh', 'secret.txt', 'empty.txt', 'rel-link', 'cfg/settings.ini', 'sub/inner.txt']) {
    assert.ok(r.restored.includes(p), `${p} in restored ${JSON.stringify(r.restored)}`);
  }
  for (const p of ['added.txt', 'newdir/a/b.txt', 'cfg/extra.ini']) assert.ok(r.deleted.includes(p), `${p} in deleted ${JSON.stringify(r.deleted)}`);
  assert.deepEqual(snapshot(ws), want, 'the workspace is as the checkpoint recorded it');
  assert.ok(fs.readFileSync(path.join(ws, 'data.bin')).equals(binary));
  assert.equal(fs.statSync(path.join(ws, 'run.sh')).mode & 0o777, 0o755);
  assert.equal(fs.lstatSync(path.join(ws, 'abs-out')).isSymbolicLink(), true, 'a link stays a link');
  assert.equal(fs.lstatSync(path.join(ws, 'sub')).isDirectory(), true, 'the folder is a folder again, not the link');
  assert.deepEqual(snapshot(outside), outsideBefore, 'nothing outside the workspace changed');
  assert.equal(fs.readFileSync(path.join(outside, 'target.txt'), 'utf8'), 'OUTSIDE\n');
  assert.ok(!fs.readdirSync(ws).some((n) => n.startsWith('.kiln-restore')), 'no temp files left');

  // Undo: the checkpoint made just before the restore brings the wrecked state back.
  const u = await k.ok('checkpoint_restore', { checkpoint_id: r.checkpoint_before });
  assert.deepEqual(snapshot(ws), wrecked, 'checkpoint_before undoes the restore');
  assert.deepEqual(snapshot(outside), outsideBefore, 'the undo put the links back without following them');
  // And the undo is undoable too.
  await k.ok('checkpoint_restore', { checkpoint_id: u.checkpoint_before });
  assert.deepEqual(snapshot(ws), want);
  const list = (await k.ok('checkpoint_list', {})).checkpoints;
  assert.ok(list.some((c) => c.checkpoint_id === r.checkpoint_before && c.trigger === 'restore'), 'checkpoint_before is listed as trigger restore');
});

test('restore of some paths touches only those; dry_run changes nothing', async (t) => {
  const k = await startKiln(t, { files: { 'a/1.txt': '1\n', 'a/2.txt': '2\n', 'b/3.txt': '3\n', 'top.txt': 'top\n' } });
  const cp = await k.ok('checkpoint_create', {});
  plant(k.ws, { 'a/1.txt': 'ONE\n', 'b/3.txt': 'THREE\n', 'a/new.txt': 'n\n', 'top.txt': 'TOP\n' });
  fs.rmSync(path.join(k.ws, 'a/2.txt'));
  const before = snapshot(k.ws);
  const listed = (await k.ok('checkpoint_list', {})).checkpoints.length;

  const dry = await k.ok('checkpoint_restore', { checkpoint_id: cp.checkpoint_id, dry_run: true });
  assert.equal(dry.dry_run, true);
  assert.equal(dry.checkpoint_before, null);
  assert.deepEqual([...dry.restored].sort(), ['a/1.txt', 'a/2.txt', 'b/3.txt', 'top.txt']);
  assert.deepEqual(dry.deleted, ['a/new.txt']);
  assert.deepEqual(snapshot(k.ws), before, 'a dry run changed files');
  assert.equal((await k.ok('checkpoint_list', {})).checkpoints.length, listed, 'a dry run made a checkpoint');

  const dryA = await k.ok('checkpoint_restore', { checkpoint_id: cp.checkpoint_id, paths: ['a'], dry_run: true });
  assert.deepEqual([...dryA.restored].sort(), ['a/1.txt', 'a/2.txt']);
  const r = await k.ok('checkpoint_restore', { checkpoint_id: cp.checkpoint_id, paths: ['a', 'top.txt'] });
  assert.deepEqual([...r.restored].sort(), ['a/1.txt', 'a/2.txt', 'top.txt']);
  assert.deepEqual(r.deleted, ['a/new.txt']);
  assert.equal(fs.readFileSync(path.join(k.ws, 'b/3.txt'), 'utf8'), 'THREE\n', 'a path outside `paths` was restored');
  assert.equal(fs.readFileSync(path.join(k.ws, 'a/1.txt'), 'utf8'), '1\n');
  assert.equal(fs.readFileSync(path.join(k.ws, 'top.txt'), 'utf8'), 'top\n');
});

test('ignored files are not captured and restore leaves them alone', async (t) => {
  const k = await startKiln(t, {
    files: { '.gitignore': 'build/\n*.log\n', 'src/main.c': 'int main;\n', 'build/out.o': 'OBJ1', 'debug.log': 'log1\n', 'src/trace.log': 't1\n' },
  });
  const cp = await k.ok('checkpoint_create', {});
  assert.equal(cp.files, 2, `only .gitignore and src/main.c are captured: ${JSON.stringify(cp)}`);
  plant(k.ws, { 'build/out.o': 'OBJ2', 'build/more.o': 'more', 'debug.log': 'log2\n', 'src/main.c': 'int main(void);\n', 'src/new.log': 'n\n' });
  fs.rmSync(path.join(k.ws, 'src/trace.log'));
  const d = await k.ok('checkpoint_diff', { from: cp.checkpoint_id });
  assert.deepEqual(byPath(d.changes), { 'src/main.c': 'modified' }, 'ignored files show up in the diff');
  const r = await k.ok('checkpoint_restore', { checkpoint_id: cp.checkpoint_id });
  assert.deepEqual(r.restored, ['src/main.c']);
  assert.deepEqual(r.deleted, []);
  assert.equal(fs.readFileSync(path.join(k.ws, 'build/out.o'), 'utf8'), 'OBJ2');
  assert.equal(fs.readFileSync(path.join(k.ws, 'build/more.o'), 'utf8'), 'more');
  assert.equal(fs.readFileSync(path.join(k.ws, 'debug.log'), 'utf8'), 'log2\n');
  assert.equal(fs.readFileSync(path.join(k.ws, 'src/new.log'), 'utf8'), 'n\n');
  assert.equal(fs.existsSync(path.join(k.ws, 'src/trace.log')), false, 'restore brought back an ignored file');
});

test('a FIFO and a socket are skipped with a note; restore leaves them in place', async (t) => {
  const k = await startKiln(t, { files: { 'a.txt': 'a\n' } });
  const fifo = path.join(k.ws, 'pipe');
  const mk = spawnSync('mkfifo', [fifo]);
  if (mk.status !== 0) return t.skip(`mkfifo failed here: ${mk.stderr}`);
  const sockPath = path.join(k.ws, 'sock');
  const server = net.createServer();
  await new Promise((resolve, reject) => { server.once('error', reject); server.listen(sockPath, resolve); });
  t.after(() => server.close());
  const cp = await k.ok('checkpoint_create', {});
  assert.equal(cp.files, 1);
  assert.ok(cp.skipped, `skipped is reported: ${JSON.stringify(cp)}`);
  assert.equal(cp.skipped.count, 2);
  assert.ok(cp.skipped.paths.some((p) => /^pipe: .*FIFO/.test(p)), JSON.stringify(cp.skipped));
  assert.ok(cp.skipped.paths.some((p) => /^sock: .*socket/.test(p)), JSON.stringify(cp.skipped));
  const listed = (await k.ok('checkpoint_list', {})).checkpoints.find((c) => c.checkpoint_id === cp.checkpoint_id);
  assert.equal(listed.skipped?.count, 2, 'checkpoint_list keeps the note');
  fs.writeFileSync(path.join(k.ws, 'a.txt'), 'changed\n');
  const r = await k.ok('checkpoint_restore', { checkpoint_id: cp.checkpoint_id });
  assert.deepEqual(r.restored, ['a.txt']);
  assert.deepEqual(r.deleted, []);
  assert.ok(fs.lstatSync(fifo).isFIFO(), 'the FIFO is still there');
  assert.ok(fs.lstatSync(sockPath).isSocket(), 'the socket is still there');
});

sandboxTest('kiln.json "checkpoints": {"auto": false}: no checkpoints and no changes in the trace', async (t) => {
  const k = await startKiln(t, { files: { 'kiln.json': JSON.stringify({ checkpoints: { auto: false } }), 'a.txt': 'a\n' } });
  const r = await k.ok('sandbox_exec', { command: 'echo b > b.txt; rm a.txt' });
  const tr = await trace(k, r.trace_id);
  assert.ok(tr.changes === undefined || tr.changes === null, `changes recorded with auto off: ${JSON.stringify(tr.changes)}`);
  assert.deepEqual((await k.ok('checkpoint_list', {})).checkpoints, []);
  // Manual checkpoints still work.
  const cp = await k.ok('checkpoint_create', {});
  assert.equal(cp.files, 2);
});

sandboxTest('a background sandbox_exec records its changes when it ends', async (t) => {
  const k = await startKiln(t, { files: { 'a.txt': 'a\n' } });
  const bg = await k.ok('sandbox_exec', { command: 'read x; echo "$x" > bg.txt; rm a.txt', background: true });
  assert.ok(bg.trace_id, 'a background run has a trace');
  const running = await trace(k, bg.trace_id);
  assert.ok(!running.changes?.paths?.length, `changes before the run ended: ${JSON.stringify(running.changes)}`);
  await k.ok('process_input', { run_id: bg.run_id, data: 'hello\n', close: true });
  const tr = await endedTrace(k, bg.trace_id);
  assert.ok(tr.changes, `no changes after the background run ended: ${JSON.stringify(tr).slice(0, 500)}`);
  assert.deepEqual(byPath(tr.changes.paths), { 'a.txt': 'deleted', 'bg.txt': 'added' });
  const d = await k.ok('checkpoint_diff', { from: tr.changes.checkpoint_before, to: tr.changes.checkpoint_after, path: 'bg.txt' });
  assert.match(d.changes[0].diff, /^\+hello$/m);
});

sandboxTest('verify\'s trace gets the changes its checks made', async (t) => {
  const kilnJson = { verify: [{ name: 'make', run: 'mkdir -p out && echo built > out/made.txt && rm -f stale.txt' }] };
  const k = await startKiln(t, { files: { 'kiln.json': JSON.stringify(kilnJson), 'stale.txt': 's\n', 'src.c': 'c\n' } });
  const v = await k.ok('verify', {});
  assert.ok(v.trace_id, `verify has a trace: ${JSON.stringify(v).slice(0, 300)}`);
  const tr = await endedTrace(k, v.trace_id);
  assert.ok(tr.changes, `verify's trace has no changes: ${JSON.stringify(tr).slice(0, 500)}`);
  assert.deepEqual(byPath(tr.changes.paths), { 'out/made.txt': 'added', 'stale.txt': 'deleted' });
  const listed = (await k.ok('checkpoint_list', {})).checkpoints;
  assert.ok(listed.some((c) => c.checkpoint_id === tr.changes.checkpoint_after && c.trigger === 'verify'), JSON.stringify(listed.map((c) => c.trigger)));
});

test('checkpoint_list pages newest first with next_cursor; a bad cursor is a clear error', async (t) => {
  const k = await startKiln(t, { files: { 'n.txt': '0' } });
  const made = [];
  for (let i = 0; i < 7; i++) {
    fs.writeFileSync(path.join(k.ws, 'n.txt'), String(i));
    made.push((await k.ok('checkpoint_create', { label: `cp ${i}` })).checkpoint_id);
  }
  const seen = [];
  let cursor;
  let pages = 0;
  do {
    const page = await k.ok('checkpoint_list', { limit: 3, ...(cursor ? { cursor } : {}) });
    assert.ok(page.checkpoints.length <= 3);
    seen.push(...page.checkpoints.map((c) => c.checkpoint_id));
    cursor = page.next_cursor;
    pages++;
    assert.ok(pages < 10, 'paging never ends');
  } while (cursor);
  assert.equal(pages, 3);
  assert.deepEqual(seen, [...made].reverse(), 'every checkpoint once, newest first');
  const labels = (await k.ok('checkpoint_list', { limit: 2 })).checkpoints.map((c) => c.label);
  assert.deepEqual(labels, ['cp 6', 'cp 5']);
  assert.match(await k.err('checkpoint_list', { cursor: 'not-a-cursor' }), /cursor/);
});

test('a made-up checkpoint id is not_found for diff and restore, and changes nothing', async (t) => {
  const k = await startKiln(t, { files: { 'a.txt': 'a\n' } });
  const real = await k.ok('checkpoint_create', {});
  const fake = real.checkpoint_id.replace(/[0-9a-f]/g, (c) => (c === '0' ? '1' : '0'));
  for (const [tool, args] of [['checkpoint_restore', { checkpoint_id: fake }], ['checkpoint_diff', { from: fake }],
    ['checkpoint_diff', { from: real.checkpoint_id, to: fake }], ['checkpoint_restore', { checkpoint_id: 'cp_../../etc' }]]) {
    const text = await k.err(tool, args);
    assert.match(text, /no checkpoint/, `${tool}: ${text}`);
  }
  assert.equal(fs.readFileSync(path.join(k.ws, 'a.txt'), 'utf8'), 'a\n');
});

test('another principal\'s checkpoint ids answer exactly as missing ones; lists show only the caller\'s', async (t) => {
  const dir = tempDir('kiln-cp-tokens-');
  const alice = crypto.randomBytes(24).toString('hex'), bob = crypto.randomBytes(24).toString('hex');
  fs.writeFileSync(path.join(dir, 'tokens'), `alice ${alice}\nbob ${bob}\n`, { mode: 0o600 });
  const ws = freshDir('kiln-cp-shared-ws-');
  t.after(() => fs.rmSync(ws, { recursive: true, force: true }));
  plant(ws, { 'a.txt': 'alice data\n' });
  const s = await startServe({ args: ['--token-file', path.join(dir, 'tokens')] });
  t.after(() => s.stop());
  const a = await httpClient(s.url, { headers: { authorization: `Bearer ${alice}` }, name: 'alice' });
  const b = await httpClient(s.url, { headers: { authorization: `Bearer ${bob}` }, name: 'bob' });
  t.after(async () => { await a.close().catch(() => {}); await b.close().catch(() => {}); });
  const call = (c, name, args) => c.client.callTool({ name, arguments: args }, undefined, { timeout: 120000 });
  for (const c of [a, b]) structured(await call(c, 'workspace_open', { path: ws }));
  const cp = structured(await call(a, 'checkpoint_create', { label: 'alice' })).checkpoint_id;
  fs.writeFileSync(path.join(ws, 'a.txt'), 'changed\n');
  const fake = cp.replace(/[0-9a-f]/g, (c) => (c === '0' ? '1' : '0'));
  const shape = (text, id) => text.split(id).join('ID');
  for (const [tool, args] of [['checkpoint_restore', { checkpoint_id: cp }], ['checkpoint_restore', { checkpoint_id: cp, dry_run: true }],
    ['checkpoint_diff', { from: cp }]]) {
    const theirs = await call(b, tool, args);
    const missing = await call(b, tool, JSON.parse(JSON.stringify(args).split(cp).join(fake)));
    assert.ok(theirs.isError, `${tool} with alice's id worked for bob: ${String(JSON.stringify(theirs.structuredContent)).slice(0, 300)}`);
    assert.equal(shape(errorText(theirs), cp), shape(errorText(missing), fake), `${tool}: the refusal tells the ids apart`);
    assert.ok(!JSON.stringify(theirs).includes('alice data'));
  }
  assert.equal(fs.readFileSync(path.join(ws, 'a.txt'), 'utf8'), 'changed\n', 'bob restored alice\'s checkpoint');
  const bobs = structured(await call(b, 'checkpoint_list', {})).checkpoints;
  assert.ok(!bobs.some((c) => c.checkpoint_id === cp), 'bob lists alice\'s checkpoint');
  const alices = structured(await call(a, 'checkpoint_list', {})).checkpoints;
  assert.ok(alices.some((c) => c.checkpoint_id === cp));
  // Alice herself still can.
  structured(await call(a, 'checkpoint_restore', { checkpoint_id: cp }));
  assert.equal(fs.readFileSync(path.join(ws, 'a.txt'), 'utf8'), 'alice data\n');
});

// A tree big enough that a checkpoint or a restore of it takes a while: many small files and a
// few large ones, every byte depending on `seed`.
function bigTree(root, seed, { files = 3000, large = 4, largeMb = 24 } = {}) {
  for (let i = 0; i < files; i++) {
    const p = path.join(root, `d${i % 30}`, `f${i}.txt`);
    fs.mkdirSync(path.dirname(p), { recursive: true });
    fs.writeFileSync(p, `${seed} file ${i}\n`.repeat(20));
  }
  for (let i = 0; i < large; i++) {
    const chunk = crypto.createHash('sha256').update(`${seed}-${i}`).digest();
    fs.writeFileSync(path.join(root, `large${i}.bin`), Buffer.alloc(largeMb << 20, chunk));
  }
}

const listAll = async (k) => (await k.ok('checkpoint_list', { limit: 1000 })).checkpoints;

test('kill -9 during a big checkpoint: after a restart the store is consistent and checkpoints and restores work', async (t) => {
  const ws = freshDir('kiln-cp-kill-ws-');
  const state = freshDir('kiln-cp-kill-state-');
  t.after(() => { fs.rmSync(ws, { recursive: true, force: true }); fs.rmSync(state, { recursive: true, force: true }); });
  plant(ws, { 'small.txt': 'v1\n' });
  const k1 = await startKiln(t, { ws, state });
  const first = await k1.ok('checkpoint_create', { label: 'small' });
  bigTree(ws, 'v1');
  // Start the big one and kill the server while it runs (once its blobs start to appear).
  const pending = k1.call('checkpoint_create', { label: 'big' }).catch((e) => e);
  const blobsDir = path.join(state, 'blobs');
  const countBlobs = () => { try { return spawnSync('find', [state, '-type', 'f'], { encoding: 'utf8' }).stdout.split('\n').length; } catch { return 0; } };
  const base = countBlobs();
  const deadline = Date.now() + 30000;
  while (countBlobs() <= base + 5 && Date.now() < deadline) await sleep(5);
  process.kill(k1.pid, 'SIGKILL');
  await pending;
  await k1.close();
  t.diagnostic(`killed with ${countBlobs() - base} new files in the state dir (${fs.existsSync(blobsDir) ? 'blobs/' : 'no blobs/'})`);

  const k2 = await startKiln(t, { ws, state });
  const list = await listAll(k2);
  assert.ok(list.some((c) => c.checkpoint_id === first.checkpoint_id), 'the earlier checkpoint survived');
  for (const c of list) {
    // Every checkpoint listed is whole: its diff against the files now can be read.
    await k2.ok('checkpoint_diff', { from: c.checkpoint_id, limit: 5 });
  }
  const snapV1 = snapshot(ws);
  const big = await k2.ok('checkpoint_create', { label: 'big again' });
  assert.equal(big.files, 3000 + 4 + 1);
  fs.rmSync(path.join(ws, 'd0'), { recursive: true });
  fs.writeFileSync(path.join(ws, 'large0.bin'), 'short');
  await k2.ok('checkpoint_restore', { checkpoint_id: big.checkpoint_id });
  assert.deepEqual(snapshot(ws), snapV1, 'a restore after the crash brings every byte back');
  await k2.ok('checkpoint_restore', { checkpoint_id: first.checkpoint_id });
  assert.deepEqual(Object.keys(snapshot(ws)), ['small.txt']);
});

test('kill -9 during a restore: the next checkpoint call finishes it, the files end as the checkpoint said, never a mix', async (t) => {
  const ws = freshDir('kiln-cp-killr-ws-');
  const state = freshDir('kiln-cp-killr-state-');
  t.after(() => { fs.rmSync(ws, { recursive: true, force: true }); fs.rmSync(state, { recursive: true, force: true }); });
  bigTree(ws, 'old', { files: 4000, large: 4 });
  const k1 = await startKiln(t, { ws, state });
  const old = await k1.ok('checkpoint_create', { label: 'old' });
  const want = snapshot(ws);
  // Emptied in place: kiln holds the workspace folder open, a new folder of that name is another.
  for (const n of fs.readdirSync(ws)) fs.rmSync(path.join(ws, n), { recursive: true, force: true });
  bigTree(ws, 'new', { files: 4000, large: 4 });
  plant(ws, { 'only-new.txt': 'n\n' });
  const newer = await k1.ok('checkpoint_create', { label: 'new' });
  const wantNew = snapshot(ws);

  const pending = k1.call('checkpoint_restore', { checkpoint_id: old.checkpoint_id }).catch((e) => e);
  // Kill it once the restore has visibly begun: any file already holds its old bytes.
  const probe = path.join(ws, 'd0', 'f0.txt');
  const started = () => { try { return fs.readFileSync(probe, 'utf8').startsWith('old') || !fs.existsSync(path.join(ws, 'only-new.txt')); } catch { return false; } };
  const deadline = Date.now() + 60000;
  while (!started() && Date.now() < deadline) await sleep(1);
  process.kill(k1.pid, 'SIGKILL');
  const res = await pending;
  await k1.close();
  const atKill = snapshot(ws);
  const mixed = JSON.stringify(atKill) !== JSON.stringify(want) && JSON.stringify(atKill) !== JSON.stringify(wantNew);
  t.diagnostic(`killed ${mixed ? 'part-way through the restore' : 'with the restore not yet begun or finished'} (${res instanceof Error ? 'no reply' : 'a reply'})`);

  // After a restart, the first checkpoint call (a listing) finishes the journal's restore.
  const k2 = await startKiln(t, { ws, state });
  await k2.ok('checkpoint_list', {});
  const after = snapshot(ws);
  assert.ok(JSON.stringify(after) === JSON.stringify(want) || (!mixed && JSON.stringify(after) === JSON.stringify(wantNew)),
    `the files are neither the old nor the new state after the restart: ${Object.keys(after).length} entries, only-new.txt ${'only-new.txt' in after}`);
  assert.ok(!Object.keys(after).some((p) => p.split('/').pop().startsWith('.kiln-restore')), 'restore temp files left behind');
  // The store is consistent: restores both ways work and are exact.
  await k2.ok('checkpoint_restore', { checkpoint_id: newer.checkpoint_id });
  assert.deepEqual(snapshot(ws), wantNew);
  await k2.ok('checkpoint_restore', { checkpoint_id: old.checkpoint_id });
  assert.deepEqual(snapshot(ws), want);
});

test('a full state directory is a clear error, and checkpoints work again once there is room', async (t) => {
  if (!isRoot) return t.skip('needs root: the state directory is a 2 MiB tmpfs mounted for this test');
  const state = freshDir('kiln-cp-full-state-');
  const m = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', state], { encoding: 'utf8' });
  if (m.status !== 0) return t.skip(`cannot mount a tmpfs here: ${m.stderr.trim()}`);
  t.after(() => {
    spawnSync('umount', ['-l', state]);
    fs.rmSync(state, { recursive: true, force: true });
  });
  const k = await startKiln(t, { state, files: { 'small.txt': 'fits\n' } });
  await k.ok('checkpoint_create', { label: 'fits' });
  fs.writeFileSync(path.join(k.ws, 'big.bin'), crypto.randomBytes(3 << 20));
  const text = await k.err('checkpoint_create', { label: 'too big' });
  assert.match(text, /full|No space left/i, text);
  assert.match(text, /state directory|KILN_HOME/, text);
  assert.ok(!(await listAll(k)).some((c) => c.label === 'too big'), 'a checkpoint was recorded although its contents were not stored');
  fs.rmSync(path.join(k.ws, 'big.bin'));
  // A sparse file takes no room in the workspace but all of its bytes in the store: refused
  // before anything is written, and the state directory is not left full.
  fs.writeFileSync(path.join(k.ws, 'sparse.img'), '');
  fs.truncateSync(path.join(k.ws, 'sparse.img'), 1 << 30);
  const sparse = await k.err('checkpoint_create', { label: 'sparse' });
  assert.match(sparse, /hold 10\d\d MiB, \d+ MiB are free/, sparse);
  const df = spawnSync('df', ['--output=avail', '-B1', state], { encoding: 'utf8' });
  assert.ok(Number(df.stdout.trim().split('\n').pop()) > 512 * 1024, `the state directory was left full: ${df.stdout}`);
  fs.rmSync(path.join(k.ws, 'sparse.img'));
  fs.writeFileSync(path.join(k.ws, 'small.txt'), 'changed\n');
  const again = await k.ok('checkpoint_create', { label: 'fits again' });
  const first = (await listAll(k)).find((c) => c.label === 'fits');
  await k.ok('checkpoint_restore', { checkpoint_id: first.checkpoint_id });
  assert.equal(fs.readFileSync(path.join(k.ws, 'small.txt'), 'utf8'), 'fits\n');
  assert.ok(again.checkpoint_id);
});
