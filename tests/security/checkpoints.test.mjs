// Checkpoints attacked from outside (TOOLS.md "Checkpoints and what each run changed", with
// SANDBOX_CASES 3, 4, 6 and 31 applied to checkpoint_restore): a folder swapped for a link to a
// folder outside (another user's, when run as root) while a restore runs, names with newlines and
// bytes that are not UTF-8, a huge sparse file, another workspace's checkpoint id, `..` and
// absolute `paths`, hard links to files outside (restore must replace the link, never write or
// chmod the outside inode), set-id modes (restore never makes a set-id file: as root it would be a
// setuid-root program), and the blob store shared with published artifacts both ways. Judged on the
// host: the victim folders and files are compared before and after. Runs as root and as kilntest
// (tests/security/run.mjs).
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { errorText, exec, isRoot, ok, startKiln, tempDir } from './lib.mjs';

// Everything below `root` (no link followed): mode, owner and sha256 of files, link targets,
// folder modes. Paths as latin1 so names that are not UTF-8 compare byte for byte.
function snapshot(root) {
  const out = {};
  const walk = (dir, rel) => {
    for (const name of fs.readdirSync(dir, { encoding: 'buffer' }).sort(Buffer.compare)) {
      const r = rel ? `${rel}/${name.toString('latin1')}` : name.toString('latin1');
      const p = Buffer.concat([Buffer.from(`${dir}/`), name]);
      const st = fs.lstatSync(p);
      const m = `${(st.mode & 0o7777).toString(8)} ${st.uid}`;
      if (st.isSymbolicLink()) out[r] = `link ${fs.readlinkSync(p)}`;
      else if (st.isDirectory()) { out[r] = `dir ${m}`; walk(p, r); }
      else if (st.isFile()) out[r] = `file ${m} ${crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex')}`;
      else out[r] = `special ${st.mode.toString(8)}`;
    }
  };
  walk(Buffer.isBuffer(root) ? root : Buffer.from(root), '');
  return out;
}

function setIdFiles(root) {
  const found = [];
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      const st = fs.lstatSync(p);
      if (!st.isSymbolicLink() && st.mode & 0o6000) found.push(`${p} ${(st.mode & 0o7777).toString(8)} uid ${st.uid}`);
      if (e.isDirectory()) walk(p);
    }
  };
  walk(root);
  return found;
}

async function kiln(t, opts = {}) {
  const k = await startKiln(opts);
  t.after(() => k.close());
  return k;
}

test('set-id modes: restore never makes a setuid or setgid file or folder (as root it would be a setuid-root program on the host)', async (t) => {
  const k = await kiln(t);
  fs.copyFileSync('/bin/true', path.join(k.ws, 'suid'));
  fs.chmodSync(path.join(k.ws, 'suid'), 0o4755);
  fs.copyFileSync('/bin/true', path.join(k.ws, 'sgid'));
  fs.chmodSync(path.join(k.ws, 'sgid'), 0o2755);
  fs.mkdirSync(path.join(k.ws, 'gdir'));
  fs.chmodSync(path.join(k.ws, 'gdir'), 0o2775);
  fs.writeFileSync(path.join(k.ws, 'gdir', 'x'), 'x');
  fs.copyFileSync('/bin/true', path.join(k.ws, 'later'));
  fs.chmodSync(path.join(k.ws, 'later'), 0o4755);
  const planted = setIdFiles(k.ws);
  if (planted.length < 4) return t.skip(`this filesystem does not keep set-id bits for ${process.getuid() === 0 ? 'root' : 'this user'}: ${planted.join(', ')}`);
  const cp = ok(await k.call('checkpoint_create', {}), 'checkpoint_create');
  // Gone and brought back by the restore (new files and a new folder), and one that only has its
  // mode changed back (same content, the chmod path).
  for (const n of ['suid', 'sgid', 'gdir']) fs.rmSync(path.join(k.ws, n), { recursive: true });
  fs.chmodSync(path.join(k.ws, 'later'), 0o755);
  const r = ok(await k.call('checkpoint_restore', { checkpoint_id: cp.checkpoint_id }), 'checkpoint_restore');
  assert.ok(r.restored.includes('suid') && r.restored.includes('gdir/x'), JSON.stringify(r));
  assert.deepEqual(setIdFiles(k.ws), [], 'restore made set-id files');
  assert.equal(fs.statSync(path.join(k.ws, 'suid')).mode & 0o777, 0o755, 'the other mode bits are restored');
  assert.ok(fs.readFileSync(path.join(k.ws, 'suid')).equals(fs.readFileSync('/bin/true')));
});

test('hard links to files outside: restore replaces the link and never writes or chmods the outside inode', async (t) => {
  const outside = tempDir('kiln-sec-cp-out-');
  const k = await kiln(t);
  fs.writeFileSync(path.join(k.ws, 'same.txt'), 'SAME CONTENT\n', { mode: 0o644 });
  fs.writeFileSync(path.join(k.ws, 'other.txt'), 'checkpoint content\n', { mode: 0o644 });
  fs.chmodSync(path.join(k.ws, 'same.txt'), 0o755);
  const cp = ok(await k.call('checkpoint_create', {}), 'checkpoint_create');
  // Outside files, then the workspace names made hard links to them: one with the checkpoint's
  // bytes but another mode (restore would only chmod), one with other bytes (restore rewrites).
  fs.writeFileSync(path.join(outside, 'same.txt'), 'SAME CONTENT\n');
  fs.chmodSync(path.join(outside, 'same.txt'), 0o600);
  fs.writeFileSync(path.join(outside, 'other.txt'), 'OUTSIDE, KEEP ME\n');
  fs.chmodSync(path.join(outside, 'other.txt'), 0o600);
  for (const n of ['same.txt', 'other.txt']) {
    fs.rmSync(path.join(k.ws, n));
    fs.linkSync(path.join(outside, n), path.join(k.ws, n));
  }
  const before = snapshot(outside);
  ok(await k.call('checkpoint_restore', { checkpoint_id: cp.checkpoint_id }), 'checkpoint_restore');
  assert.deepEqual(snapshot(outside), before, 'the restore changed a file outside the workspace through a hard link');
  for (const n of ['same.txt', 'other.txt']) {
    assert.equal(fs.statSync(path.join(outside, n)).nlink, 1, `${n}: the workspace name still shares the outside inode`);
  }
  assert.equal(fs.readFileSync(path.join(k.ws, 'other.txt'), 'utf8'), 'checkpoint content\n');
  assert.equal(fs.statSync(path.join(k.ws, 'same.txt')).mode & 0o777, 0o755);
});

test('a folder swapped for a link to a folder outside while restores run: nothing outside changes', { timeout: 300000 }, async (t) => {
  // The victim: as root another user's private folder, else one of ours; only root may write it.
  const victim = fs.mkdtempSync('/var/tmp/kiln-sec-victim-');
  t.after(() => fs.rmSync(victim, { recursive: true, force: true }));
  fs.writeFileSync(path.join(victim, 'f0'), 'VICTIM\n', { mode: 0o600 });
  fs.mkdirSync(path.join(victim, 'deeper'), { mode: 0o700 });
  fs.chmodSync(victim, 0o700);
  if (isRoot) execFileSync('chown', ['-R', '65534:65534', victim]);
  const victimBefore = snapshot(victim);
  const victimMode = fs.statSync(victim).mode & 0o7777;

  const k = await kiln(t);
  const N = 12;
  for (let i = 0; i < N; i++) {
    fs.mkdirSync(path.join(k.ws, `sub${i}`, 'deeper'), { recursive: true });
    for (let f = 0; f < 20; f++) fs.writeFileSync(path.join(k.ws, `sub${i}`, `f${f}`), `restored ${i}/${f}\n`);
    fs.writeFileSync(path.join(k.ws, `sub${i}`, 'deeper', 'f0'), 'deep\n');
    fs.chmodSync(path.join(k.ws, `sub${i}`), 0o755);
    fs.chmodSync(path.join(k.ws, `sub${i}`, 'deeper'), 0o777);
  }
  const cp = ok(await k.call('checkpoint_create', {}), 'checkpoint_create');
  // A checkpoint without the folders: restoring it and then `cp` removes and remakes every one.
  const moved = tempDir('kiln-sec-moved-');
  for (let i = 0; i < N; i++) fs.renameSync(path.join(k.ws, `sub${i}`), path.join(moved, `sub${i}`));
  const empty = ok(await k.call('checkpoint_create', {}), 'checkpoint_create without the folders');

  // The attacker: plants links to the victim where the restore makes folders, and swaps existing
  // folders for such links (renameat2 RENAME_EXCHANGE), as fast as it can.
  const dir = tempDir('kiln-sec-flip-');
  fs.writeFileSync(path.join(dir, 'flip.c'), `#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/fs.h>
int main(int argc, char **argv) {
  int ws = open(argv[1], O_RDONLY | O_DIRECTORY);
  int n = atoi(argv[3]);
  char name[64], link[64];
  for (unsigned long round = 0;; round++) {
    for (int i = 0; i < n; i++) {
      snprintf(name, sizeof name, "sub%d", i);
      snprintf(link, sizeof link, "lnk%d", i);
      symlinkat(argv[2], ws, link);  /* again after a restore removed it */
      if (round & 1) {
        syscall(SYS_renameat2, ws, name, ws, link, RENAME_EXCHANGE);
        syscall(SYS_renameat2, ws, name, ws, link, RENAME_EXCHANGE);
      } else if (symlinkat(argv[2], ws, name) == 0) {
        for (volatile int s = 0; s < 2000; s++) {}
        unlinkat(ws, name, 0);
      }
    }
  }
}
`);
  const cc = spawnSync('cc', ['-O1', '-o', path.join(dir, 'flip'), path.join(dir, 'flip.c')], { encoding: 'utf8' });
  if (cc.status !== 0) return t.skip(`cc failed: ${cc.stderr}`);
  const flip = spawn(path.join(dir, 'flip'), [k.ws, victim, String(N)], { stdio: 'ignore' });
  t.after(() => flip.kill('SIGKILL'));
  let restored = 0, refused = 0;
  const errors = new Set();
  try {
    for (let round = 0; round < 40; round++) {
      const r = await k.call('checkpoint_restore', { checkpoint_id: (round & 1 ? empty : cp).checkpoint_id });
      if (r.isError) { refused++; errors.add(errorText(r).replace(/(sub|lnk)\d+/g, '$1N').replace(/cp_[0-9a-f]+/g, 'cp_ID').slice(0, 200)); } else restored++;
      assert.deepEqual(snapshot(victim), victimBefore, `round ${round}: the restore changed the victim folder`);
      assert.equal(fs.statSync(victim).mode & 0o7777, victimMode, `round ${round}: the restore chmod-ed the victim folder`);
    }
  } finally {
    flip.kill('SIGKILL');
  }
  t.diagnostic(`${restored} restores finished, ${refused} refused: ${[...errors].join(' | ')}`);
  // Without the attacker the restore is whole again.
  ok(await k.call('checkpoint_restore', { checkpoint_id: empty.checkpoint_id }), 'checkpoint_restore of the empty one without the attacker');
  const r = ok(await k.call('checkpoint_restore', { checkpoint_id: cp.checkpoint_id }), 'checkpoint_restore without the attacker');
  assert.ok(r.restored.includes('sub0/deeper/f0'));
  assert.equal(fs.statSync(path.join(k.ws, 'sub3', 'deeper')).mode & 0o777, 0o777);
  assert.deepEqual(snapshot(victim), victimBefore);
});

test('names with line breaks are skipped with a note (never failing the checkpoint); control characters and bytes that are not UTF-8 come back exactly', async (t) => {
  const k = await kiln(t);
  const names = ['tab\tname', '\x01\x1b[31mred', '-rf', ' lead', 'trail ', 'quo"te\'s', 'back\\slash', '日本語.txt', 'a b/c d'];
  for (const n of names) {
    fs.mkdirSync(path.dirname(path.join(k.ws, n)), { recursive: true });
    fs.writeFileSync(path.join(k.ws, n), `content of ${JSON.stringify(n)}\n`);
  }
  const raw = Buffer.concat([Buffer.from(`${k.ws}/`), Buffer.from([0x6e, 0xff, 0xfe, 0x80, 0x2e, 0x62])]);
  fs.writeFileSync(raw, 'not utf-8 name\n');
  // Names no workspace path may hold (the file tools refuse them): a file, and a folder with one.
  fs.writeFileSync(path.join(k.ws, 'new\nline'), 'NL\n');
  fs.mkdirSync(path.join(k.ws, 'cr\rdir'));
  fs.writeFileSync(path.join(k.ws, 'cr\rdir', 'inside'), 'CR\n');
  const breaks = new Set(['new\nline', 'cr\rdir', 'cr\rdir/inside']);
  const want = snapshot(k.ws);
  const cp = ok(await k.call('checkpoint_create', {}), 'checkpoint_create');
  assert.equal(cp.files, names.length + 1);
  assert.ok(cp.skipped?.paths?.some((p) => p.startsWith('new\nline: ') && /line break/.test(p)), JSON.stringify(cp.skipped));
  for (const n of fs.readdirSync(k.ws, { encoding: 'buffer' })) {
    if (breaks.has(n.toString('latin1'))) continue;
    fs.rmSync(Buffer.concat([Buffer.from(`${k.ws}/`), n]), { recursive: true });
  }
  const d = ok(await k.call('checkpoint_diff', { from: cp.checkpoint_id }), 'checkpoint_diff');
  assert.equal(d.changes.length, names.length + 1, JSON.stringify(d.changes.map((c) => c.path)));
  assert.ok(d.changes.some((c) => c.path === 'tab\tname' && c.change === 'deleted'));
  ok(await k.call('checkpoint_restore', { checkpoint_id: cp.checkpoint_id }), 'checkpoint_restore');
  assert.deepEqual(snapshot(k.ws), want, 'every name came back byte for byte, and the skipped ones were left alone');
  // A run inside can make such a name: its changes are still recorded.
  const r = await exec(k, "printf x > \"$(printf 'made\\nin')\"; echo y > after.txt");
  const changes = ok(await k.call('trace_get', { trace_id: r.trace_id }), 'trace_get').trace.changes;
  assert.deepEqual(changes?.paths, [{ path: 'after.txt', change: 'added' }], JSON.stringify(changes));
});

test('a huge sparse file: the checkpoint and the restore finish and keep its size', { timeout: 300000 }, async (t) => {
  const k = await kiln(t);
  const big = path.join(k.ws, 'sparse.img');
  const fd = fs.openSync(big, 'w');
  fs.writeSync(fd, 'head', 0);
  fs.writeSync(fd, 'tail', (1536 << 20) - 4);
  fs.closeSync(fd);
  const cp = await k.call('checkpoint_create', {});
  if (cp.isError) {
    assert.match(errorText(cp), /full|space|large|size/i, `not a clear error: ${errorText(cp)}`);
    return;
  }
  const c = cp.structuredContent;
  t.diagnostic(`checkpoint of a 1.5 GiB sparse file: ${c.files} files, ${c.bytes} bytes, ${c.new_bytes} new bytes in the store, ${c.duration_ms} ms; skipped ${JSON.stringify(c.skipped ?? null)}`);
  fs.rmSync(big);
  ok(await k.call('checkpoint_restore', { checkpoint_id: c.checkpoint_id }), 'checkpoint_restore');
  const st = fs.statSync(big);
  assert.equal(st.size, 1536 << 20);
  const tail = Buffer.alloc(4);
  const rfd = fs.openSync(big, 'r');
  fs.readSync(rfd, tail, 0, 4, st.size - 4);
  fs.closeSync(rfd);
  assert.equal(tail.toString(), 'tail');
});

test('a checkpoint id of another workspace passed to restore never writes into the current one; `paths` with .. or absolute are refused', async (t) => {
  const k = await kiln(t);
  const other = path.join(tempDir('kiln-sec-cp-other-'), 'other');
  fs.mkdirSync(other);
  fs.writeFileSync(path.join(other, 'o.txt'), 'other v1\n');
  fs.writeFileSync(path.join(k.ws, 'o.txt'), 'current, keep\n');
  fs.writeFileSync(path.join(k.ws, 'mine.txt'), 'mine\n');
  ok(await k.call('workspace_open', { path: other }), 'workspace_open other');
  const cpOther = ok(await k.call('checkpoint_create', {}), 'checkpoint_create other');
  ok(await k.call('workspace_open', { path: k.ws }), 'workspace_open back');
  const cpMine = ok(await k.call('checkpoint_create', {}), 'checkpoint_create current');
  fs.writeFileSync(path.join(other, 'o.txt'), 'other v2\n');
  const mine = snapshot(k.ws);
  const r = await k.call('checkpoint_restore', { checkpoint_id: cpOther.checkpoint_id });
  assert.deepEqual(snapshot(k.ws), mine, 'another workspace\'s checkpoint changed the current workspace');
  t.diagnostic(`restore of the other workspace's checkpoint: ${r.isError ? `refused: ${errorText(r)}` : `restored its own workspace: ${JSON.stringify(r.structuredContent.restored)}`}`);
  if (!r.isError) assert.equal(fs.readFileSync(path.join(other, 'o.txt'), 'utf8'), 'other v1\n');

  const outside = tempDir('kiln-sec-cp-escape-');
  fs.writeFileSync(path.join(outside, 'x'), 'outside\n');
  const outsideBefore = snapshot(outside);
  fs.writeFileSync(path.join(k.ws, 'mine.txt'), 'changed\n');
  const now = snapshot(k.ws);
  for (const p of ['..', '../other', `${outside}/x`, '/etc', '/etc/passwd', 'a/../../x', `${k.ws}/../other/o.txt`, 'mine.txt\u0000x', `../${path.basename(k.ws)}/mine.txt/..`]) {
    for (const dry_run of [true, false]) {
      const res = await k.call('checkpoint_restore', { checkpoint_id: cpMine.checkpoint_id, paths: [p], dry_run });
      assert.equal(res.isError, true, `paths ${JSON.stringify(p)} was accepted: ${JSON.stringify(res.structuredContent)}`);
    }
    const res = await k.call('checkpoint_diff', { from: cpMine.checkpoint_id, path: p });
    assert.equal(res.isError, true, `checkpoint_diff path ${JSON.stringify(p)} was accepted`);
  }
  assert.deepEqual(snapshot(k.ws), now, 'a refused restore changed files');
  assert.deepEqual(snapshot(outside), outsideBefore);
  // An absolute path inside the workspace is the same as its relative one.
  const inside = ok(await k.call('checkpoint_restore', { checkpoint_id: cpMine.checkpoint_id, paths: [path.join(k.ws, 'mine.txt')] }), 'absolute inside');
  assert.deepEqual(inside.restored, ['mine.txt']);
});

const SITE = { 'index.html': '<h1>shared blobs</h1>\n', 'app.js': 'console.log("kept");\n', 'big.bin': crypto.randomBytes(300 * 1024) };

async function get(url) {
  const r = await fetch(url);
  return { status: r.status, body: Buffer.from(await r.arrayBuffer()) };
}

test('artifacts and checkpoints share blobs: unpublish keeps checkpoint contents, pruned checkpoints keep the published site', { timeout: 600000 }, async (t) => {
  const k = await kiln(t, { env: { KILN_SERVE_LISTEN: '127.0.0.1:0' } });
  t.after(() => {
    try {
      const info = JSON.parse(fs.readFileSync(path.join(k.kilnHome, 'serve.json'), 'utf8'));
      if (info.pid) process.kill(info.pid, 'SIGTERM');
    } catch { /* no daemon */ }
  });
  const site = path.join(k.ws, 'site');
  fs.mkdirSync(site);
  for (const [n, c] of Object.entries(SITE)) fs.writeFileSync(path.join(site, n), c);
  // One way: publish, checkpoint the same files, unpublish (deleting), restore.
  const pub = await k.call('publish', { path: 'site', name: 'one' });
  if (pub.isError) return t.skip(`publish does not work here: ${errorText(pub)}`);
  const cp = ok(await k.call('checkpoint_create', {}), 'checkpoint_create');
  assert.equal(cp.new_bytes, 0, 'the published contents were stored again for the checkpoint instead of shared');
  ok(await k.call('unpublish', { artifact: 'one' }), 'unpublish');
  fs.rmSync(site, { recursive: true });
  ok(await k.call('checkpoint_restore', { checkpoint_id: cp.checkpoint_id }), 'checkpoint_restore');
  for (const [n, c] of Object.entries(SITE)) assert.ok(fs.readFileSync(path.join(site, n)).equals(Buffer.from(c)), `${n} lost its contents`);

  // The other way: publish, let automatic checkpoints hold the same files, then have every one of
  // them pruned (the newest 200 automatic are kept): the site still serves every byte.
  // Other bytes than the manual checkpoint holds, so only automatic checkpoints share them.
  const site2 = path.join(k.ws, 'site2');
  const SITE2 = { 'index.html': `<h1>two ${crypto.randomUUID()}</h1>\n`, 'big.bin': crypto.randomBytes(200 * 1024) };
  fs.mkdirSync(site2);
  for (const [n, c] of Object.entries(SITE2)) fs.writeFileSync(path.join(site2, n), c);
  const two = ok(await k.call('publish', { path: 'site2', name: 'two' }), 'publish two');
  const held = await exec(k, 'echo 0 > n');
  const heldBy = ok(await k.call('trace_get', { trace_id: held.trace_id }), 'trace_get').trace.changes?.checkpoint_after;
  assert.ok(heldBy, 'the exec made an automatic checkpoint');
  fs.rmSync(site2, { recursive: true });
  for (let i = 1; i <= 205; i++) await exec(k, `echo ${i} > n`);
  const listed = ok(await k.call('checkpoint_list', { limit: 1000 }), 'checkpoint_list').checkpoints;
  assert.ok(listed.filter((c) => c.trigger !== 'manual').length <= 200, 'automatic checkpoints were not pruned');
  assert.ok(!listed.some((c) => c.checkpoint_id === heldBy), 'the checkpoint holding the site was not pruned');
  for (const [n, c] of Object.entries(SITE2)) {
    const r = await get(`${two.url}${n}`);
    assert.equal(r.status, 200, `${n}: ${r.status}`);
    assert.ok(r.body.equals(Buffer.from(c)), `${n}: the published bytes changed or went with the checkpoints`);
  }
  // And the manual checkpoint still restores them after all that pruning.
  ok(await k.call('checkpoint_restore', { checkpoint_id: cp.checkpoint_id, paths: ['site'] }), 'restore site');
  assert.ok(fs.readFileSync(path.join(site, 'big.bin')).equals(SITE['big.bin']));
});
