// `kiln checkpoint list|create|diff|restore|rm|export` and `kiln workspace import` against the real
// binary and a fresh state dir: no server, no sandbox. Export is checked with GNU tar, the round
// trip export -> import must give identical files, modes and links, and hostile tarballs (made
// with python's tarfile) must be refused with nothing written.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { kilnBin, kilnEnv, tempDir } from '../lib/kiln.mjs';

const home = tempDir('kiln-home-');
const ws = tempDir('kiln-cp-ws-');
const scratch = tempDir('kiln-cp-out-');

function kiln(args, opts = {}) {
  const r = spawnSync(kilnBin(), [...args, '--state-dir', home], {
    cwd: opts.cwd ?? ws, env: kilnEnv(home), encoding: 'utf8', timeout: 60000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}
const cp = (...args) => kiln(['checkpoint', ...args]);
function json(r) {
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
}
function sh(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', ...opts });
  assert.equal(r.status, 0, `${cmd} ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

// Every entry beneath `root` (names as bytes, in hex where they are not UTF-8): type, mode, content.
function snapshot(root) {
  const out = {};
  const walk = (dir, rel) => {
    for (const name of fs.readdirSync(dir, { encoding: 'buffer' })) {
      const full = Buffer.concat([dir, Buffer.from('/'), name]);
      const key = rel + (rel ? '/' : '') + name.toString('latin1');
      const st = fs.lstatSync(full);
      const mode = (st.mode & 0o7777).toString(8);
      if (st.isSymbolicLink()) out[key] = `link ${fs.readlinkSync(full, { encoding: 'buffer' }).toString('latin1')}`;
      else if (st.isDirectory()) {
        out[key] = `dir ${mode}`;
        walk(full, key);
      } else out[key] = `file ${mode} ${crypto.createHash('sha256').update(fs.readFileSync(full)).digest('hex')}`;
    }
  };
  walk(Buffer.from(root), '');
  return out;
}

// The workspace: text, an executable, a read-only file, a link, binary bytes, a long name, a name
// that is not UTF-8, an empty folder.
const longName = `${'d'.repeat(120)}/${'f'.repeat(120)}.txt`;
const oddName = Buffer.concat([Buffer.from(ws + '/odd-'), Buffer.from([0xff, 0xfe]), Buffer.from('.txt')]);
fs.writeFileSync(path.join(ws, 'a.txt'), 'one\ntwo\nthree\n');
fs.mkdirSync(path.join(ws, 'sub'));
fs.writeFileSync(path.join(ws, 'sub', 'run.sh'), '#!/bin/sh\necho hi\n', { mode: 0o755 });
fs.writeFileSync(path.join(ws, 'sub', 'ro.txt'), 'read only\n', { mode: 0o444 });
fs.symlinkSync('../a.txt', path.join(ws, 'sub', 'link'));
fs.writeFileSync(path.join(ws, 'blob.bin'), Buffer.from([0, 1, 2, 3, 0xff, 0, 7]));
fs.mkdirSync(path.join(ws, path.dirname(longName)), { recursive: true });
fs.writeFileSync(path.join(ws, longName), 'long\n');
fs.writeFileSync(oddName, 'odd\n');
fs.mkdirSync(path.join(ws, 'empty'));
const original = snapshot(ws);

let first;

test('list in a folder that is no workspace says so (exit 1)', () => {
  const r = cp('list');
  assert.equal(r.code, 1);
  assert.match(r.stderr, /no workspaces|not in a workspace/);
});

test('create and list: text and JSON, from the workspace and a subfolder', () => {
  const c = json(cp('create', '--label', 'first', '--json'));
  assert.match(c.checkpoint_id, /^cp_[0-9a-f]+$/);
  assert.equal(c.label, 'first');
  assert.ok(c.files >= 7, JSON.stringify(c));
  first = c.checkpoint_id;
  const plain = cp('create');
  assert.equal(plain.code, 0, plain.stderr);
  assert.match(plain.stdout, /^cp_[0-9a-f]+\n$/);
  assert.match(plain.stderr, /checkpoint cp_\S+ of \S+: \d+ files/);

  const list = json(cp('list', '--json'));
  assert.equal(list.length, 2);
  assert.equal(list[1].checkpoint_id, first, 'newest first');
  assert.equal(list[1].trigger, 'manual');
  const table = cp('list');
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /^ID\s+TRIGGER\s+CREATED \(UTC\)\s+FILES\s+SIZE\s+LABEL\n/);
  assert.match(table.stdout, new RegExp(`${first}\\s+manual\\s+\\S+ \\S+\\s+\\d+\\s+[\\d.]+ [KM]?i?B\\s+first`));
  // From a subfolder: the workspace it is in, not a new one.
  assert.equal(json(kiln(['checkpoint', 'list', '--json'], { cwd: path.join(ws, 'sub') })).length, 2);
  assert.equal(json(cp('list', '--json', '--limit', '1')).length, 1);
  assert.equal(json(cp('list', '--json', '--workspace', path.basename(ws))).length, 2);
  assert.equal(cp('list', '--workspace', 'no-such-ws').code, 1);
  assert.equal(cp('list', '--limit', '0').code, 2);
});

test('diff: unified like git, binary as sizes and hashes, --path, --json', () => {
  fs.writeFileSync(path.join(ws, 'a.txt'), 'one\nTWO\nthree\n');
  fs.writeFileSync(path.join(ws, 'new.txt'), 'fresh\n');
  fs.writeFileSync(path.join(ws, 'blob.bin'), Buffer.from([9, 9, 0, 9]));
  fs.chmodSync(path.join(ws, 'sub', 'run.sh'), 0o700);
  const d = cp('diff', first);
  assert.equal(d.code, 0, d.stderr);
  assert.match(d.stdout, /diff --git a\/a\.txt b\/a\.txt\n--- a\/a\.txt\n\+\+\+ b\/a\.txt\n@@ .* @@\n one\n-two\n\+TWO\n three\n/);
  assert.match(d.stdout, /diff --git a\/new\.txt b\/new\.txt\nnew file mode 100644\n/);
  assert.match(d.stdout, /diff --git a\/blob\.bin b\/blob\.bin\nBinary files differ \(7 -> 4 bytes, sha256 [0-9a-f]{12} -> [0-9a-f]{12}\)\n/);
  assert.match(d.stdout, /diff --git a\/sub\/run\.sh b\/sub\/run\.sh\nold mode 100755\nnew mode 100700\n/);

  const j = json(cp('diff', first, 'now', '--json'));
  assert.equal(j.from, first);
  assert.equal(j.to, 'now');
  const byPath = Object.fromEntries(j.changes.map((c) => [c.path, c]));
  assert.equal(byPath['a.txt'].change, 'modified');
  assert.equal(byPath['new.txt'].change, 'added');
  assert.equal(byPath['blob.bin'].binary, true);
  assert.equal(byPath['blob.bin'].diff, null);
  assert.equal(j.total, j.changes.length);

  const only = json(cp('diff', first, '--path', 'sub', '--json'));
  assert.deepEqual(only.changes.map((c) => c.path), ['sub/run.sh']);
  // A path relative to the current folder when that is inside the workspace.
  const rel = json(kiln(['checkpoint', 'diff', first, '--path', 'run.sh', '--json'], { cwd: path.join(ws, 'sub') }));
  assert.deepEqual(rel.changes.map((c) => c.path), ['sub/run.sh']);

  const second = json(cp('create', '--json')).checkpoint_id;
  const between = json(cp('diff', first, second, '--json'));
  assert.deepEqual(between.changes.map((c) => c.path).sort(), ['a.txt', 'blob.bin', 'new.txt', 'sub/run.sh']);
  const none = cp('diff', second, second);
  assert.equal(none.code, 0);
  assert.equal(none.stdout, '');
  assert.match(none.stderr, /no changes/);
  assert.equal(cp('diff').code, 2);
  assert.equal(cp('diff', 'cp_0000000000000000').code, 1);
});

test('restore: a dry run changes nothing; then files, modes and deletions, with an undo id', () => {
  const dry = json(cp('restore', first, '--dry-run', '--json'));
  assert.equal(dry.dry_run, true);
  assert.ok(dry.restored.includes('a.txt'));
  assert.deepEqual(dry.deleted, ['new.txt']);
  assert.equal(fs.readFileSync(path.join(ws, 'a.txt'), 'utf8'), 'one\nTWO\nthree\n');
  const dryText = cp('restore', first, '--dry-run');
  assert.match(dryText.stdout, /would restore\s+a\.txt/);
  assert.match(dryText.stdout, /would delete\s+new\.txt/);

  // Only one path first.
  const part = json(cp('restore', first, 'a.txt', '--json'));
  assert.deepEqual(part.restored, ['a.txt']);
  assert.equal(fs.readFileSync(path.join(ws, 'a.txt'), 'utf8'), 'one\ntwo\nthree\n');
  assert.ok(fs.existsSync(path.join(ws, 'new.txt')));

  const r = cp('restore', first);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /deleted\s+new\.txt/);
  const undo = r.stderr.match(/to undo: kiln checkpoint restore (cp_[0-9a-f]+)/);
  assert.ok(undo, r.stderr);
  assert.deepEqual(snapshot(ws), original);

  // The undo puts the changed state back.
  assert.equal(cp('restore', undo[1]).code, 0);
  assert.ok(fs.existsSync(path.join(ws, 'new.txt')));
  assert.equal(cp('restore', first).code, 0);
  assert.deepEqual(snapshot(ws), original);
  assert.equal(cp('restore').code, 2);
  assert.equal(cp('restore', 'cp_0000000000000000').code, 1);
});

test('export: a tar.zst GNU tar lists and unpacks; .tar plain; no overwrite without --force', () => {
  const out = path.join(scratch, 'first.tar.zst');
  const e = json(cp('export', first, '-o', out, '--json'));
  assert.equal(e.compression, 'zstd');
  assert.equal(fs.readFileSync(out).subarray(0, 4).toString('hex'), '28b52ffd', 'zstd magic');
  const listing = sh('tar', ['--zstd', '-tvf', out]);
  assert.match(listing, /^-rwxr-xr-x .* sub\/run\.sh$/m);
  assert.match(listing, /^-r--r--r-- .* sub\/ro\.txt$/m);
  assert.match(listing, /^lrwxrwxrwx .* sub\/link -> \.\.\/a\.txt$/m);
  assert.ok(listing.includes(longName), 'the long name, whole');
  const unpacked = path.join(scratch, 'by-tar');
  fs.mkdirSync(unpacked);
  sh('tar', ['--zstd', '-xpf', out, '-C', unpacked]);
  assert.deepEqual(snapshot(unpacked), original);

  const again = cp('export', first, '-o', out);
  assert.equal(again.code, 1);
  assert.match(again.stderr, /already exists; pass --force/);
  assert.equal(cp('export', first, '-o', out, '--force').code, 0);

  const plain = path.join(scratch, 'first.tar');
  const p = cp('export', first, '-o', plain);
  assert.equal(p.code, 0, p.stderr);
  assert.match(p.stderr, /wrote .*first\.tar: \d+ files/);
  assert.match(sh('tar', ['-tf', plain]), /^sub\/run\.sh$/m);
  assert.equal(cp('export', first, '-o', path.join(scratch, 'x.zip')).code, 2);
  assert.equal(cp('export', first).code, 2);
  assert.equal(cp('export', 'cp_0000000000000000', '-o', path.join(scratch, 'none.tar')).code, 1);
  assert.ok(!fs.existsSync(path.join(scratch, 'none.tar')));
  assert.deepEqual(fs.readdirSync(scratch).filter((n) => n.includes('kiln-export')), [], 'no temporary files left');
});

test('import: export -> import gives identical files and modes, a workspace and a first checkpoint', () => {
  const archive = path.join(scratch, 'first.tar.zst');
  const into = path.join(scratch, 'imported');
  const r = json(kiln(['workspace', 'import', archive, '--into', into, '--name', 'copy-of-ws', '--json'], { cwd: scratch }));
  assert.equal(r.workspace.name, 'copy-of-ws');
  assert.match(r.workspace.id, /\S/);
  assert.equal(r.workspace.root, into);
  assert.deepEqual(snapshot(into), original);
  const list = json(cp('list', '--workspace', 'copy-of-ws', '--json'));
  assert.equal(list.length, 1);
  assert.equal(list[0].checkpoint_id, r.checkpoint_id);
  assert.equal(list[0].label, 'imported from first.tar.zst');
  // Nothing changed since the import.
  assert.equal(json(cp('diff', r.checkpoint_id, '--json')).total, 0);

  // The default folder: ./NAME from the file name; text output names, id and path.
  const t = kiln(['workspace', 'import', path.join(scratch, 'first.tar')], { cwd: scratch });
  assert.equal(t.code, 0, t.stderr);
  assert.match(t.stdout, /^name\s+first\S*\nid\s+\S+\npath\s+.*\/first\ncheckpoint\s+cp_\S+ \(imported from first\.tar\)\n$/);
  assert.deepEqual(snapshot(path.join(scratch, 'first')), original);

  const busy = kiln(['workspace', 'import', archive, '--into', into], { cwd: scratch });
  assert.equal(busy.code, 1);
  assert.match(busy.stderr, /not empty/);
  assert.equal(kiln(['workspace', 'import', path.join(scratch, 'missing.tar')]).code, 1);
  assert.equal(kiln(['workspace', 'import']).code, 2);
});

// Hostile archives, each made by python's tarfile: every one refused, the folder not left behind,
// nothing outside it written.
const outside = tempDir('kiln-cp-outside-');
const evil = {
  absolute: `t.addfile(reg('${outside}/abs.txt'), io.BytesIO(b'x'))`,
  dotdot: `t.addfile(reg('a/../../dotdot.txt'), io.BytesIO(b'x'))`,
  'link-out': `t.addfile(lnk('esc', '${outside}')); t.addfile(reg('esc/slip.txt'), io.BytesIO(b'x'))`,
  'link-up': `t.addfile(lnk('up', '..')); t.addfile(reg('up/slip2.txt'), io.BytesIO(b'x'))`,
  hardlink: `h = tarfile.TarInfo('hard'); h.type = tarfile.LNKTYPE; h.linkname = '/etc/passwd'; t.addfile(h)`,
  device: `d = tarfile.TarInfo('null'); d.type = tarfile.CHRTYPE; d.devmajor = 1; d.devminor = 3; t.addfile(d)`,
  fifo: `f = tarfile.TarInfo('pipe'); f.type = tarfile.FIFOTYPE; t.addfile(f)`,
  setuid: `i = reg('su'); i.mode = 0o4755; t.addfile(i, io.BytesIO(b'x'))`,
};
for (const [name, body] of Object.entries(evil)) {
  test(`import refuses a tarball with ${name}`, () => {
    const file = path.join(scratch, `evil-${name}.tar`);
    const py = [
      'import io, sys, tarfile',
      'def reg(n):',
      '    i = tarfile.TarInfo(n); i.size = 1; i.mode = 0o644; return i',
      'def lnk(n, target):',
      '    i = tarfile.TarInfo(n); i.type = tarfile.SYMTYPE; i.linkname = target; return i',
      `t = tarfile.open(sys.argv[1], 'w', format=tarfile.PAX_FORMAT)`,
      `t.addfile(reg('fine.txt'), io.BytesIO(b'y'))`,
      body,
      't.close()',
    ].join('\n');
    sh('python3', ['-c', py, file]);
    const into = path.join(scratch, `into-${name}`);
    const r = kiln(['workspace', 'import', file, '--into', into]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /refused|absolute|Kiln unpacks|setuid/);
    assert.match(r.stderr, /nothing was imported/);
    assert.ok(!fs.existsSync(into), 'the new folder is removed');
    assert.deepEqual(fs.readdirSync(outside), []);
    assert.ok(!fs.existsSync(path.join(scratch, 'dotdot.txt')) && !fs.existsSync(path.join(path.dirname(scratch), 'dotdot.txt')));
  });
}

test('rm: removes checkpoints, an unknown id is exit 1', () => {
  const before = json(cp('list', '--json'));
  const victim = before[0].checkpoint_id;
  const r = cp('rm', victim);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, new RegExp(`removed ${victim}`));
  assert.ok(!json(cp('list', '--json')).some((c) => c.checkpoint_id === victim));
  const gone = cp('rm', victim, 'cp_0000000000000000');
  assert.equal(gone.code, 1);
  assert.match(gone.stderr, /no checkpoint/);
  assert.equal(cp('rm').code, 2);
  // The rest still exports.
  assert.equal(cp('export', first, '-o', path.join(scratch, 'after-rm.tar')).code, 0);
});
