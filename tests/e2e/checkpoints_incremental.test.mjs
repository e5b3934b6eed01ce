// Automatic checkpoints in one long session re-read only the folders inotify names. The oracle:
// after every run, checkpoint_diff from its checkpoint_after to "now" (a full read of the files,
// trusting no watch) must be empty, and the run's changes must be exactly what it did, through
// new and removed folders, renames, type changes, deep edits and hard links.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';

import { connectClient, generateTree, structured, tempDir } from '../lib/kiln.mjs';
import { probeSandbox } from '../lib/sandbox_probe.mjs';

const ws = path.join(tempDir('kiln-cpinc-'), 'ws');
generateTree(ws, 600, { perDir: 20 });
const outside = tempDir('kiln-cpinc-out-');
fs.writeFileSync(path.join(outside, 'linked.txt'), 'one\n');
fs.linkSync(path.join(outside, 'linked.txt'), path.join(ws, 'hardlink.txt'));

const s = await connectClient();
after(() => s.close());
const call = (name, args) => s.client.callTool({ name, arguments: args }, undefined, { timeout: 60000 });
structured(await call('workspace_open', { path: ws }));
const { test: sandboxTest } = await probeSandbox('incremental checkpoints e2e', call);

const steps = [
  ['edit a deep file', 'echo changed >> d000/s1/f3.js', { modified: ['d000/s1/f3.js'] }],
  ['nothing', 'true', {}],
  ['a new folder with files', 'mkdir -p newdir/inner && echo a > newdir/a.txt && echo b > newdir/inner/b.txt',
    { added: ['newdir/a.txt', 'newdir/inner/b.txt'] }],
  ['rename a folder', 'mv newdir renamed', { added: ['renamed/a.txt', 'renamed/inner/b.txt'], deleted: ['newdir/a.txt', 'newdir/inner/b.txt'] }],
  ['edit inside the renamed folder', 'echo again >> renamed/inner/b.txt', { modified: ['renamed/inner/b.txt'] }],
  ['a file becomes a folder', 'rm d000/s2/f0.js && mkdir d000/s2/f0.js && echo x > d000/s2/f0.js/inside',
    { added: ['d000/s2/f0.js/inside'], deleted: ['d000/s2/f0.js'] }],
  ['remove a folder', 'rm -rf renamed', { deleted: ['renamed/a.txt', 'renamed/inner/b.txt'] }],
  ['a mode change', 'chmod +x d000/s3/f1.js', { modified: ['d000/s3/f1.js'] }],
  ['a symlink', 'ln -s d000/s1/f3.js link.js', { added: ['link.js'] }],
];

sandboxTest('each run in a session records exactly what it changed, and its checkpoint equals a full read', async () => {
  const sb = structured(await call('sandbox_create', {}));
  let prev;
  for (const [what, command, want] of steps) {
    const r = structured(await call('sandbox_exec', { sandbox_id: sb.sandbox_id, command }));
    assert.equal(r.exit_code, 0, `${what}: ${r.stderr}`);
    const t = structured(await call('trace_get', { trace_id: r.trace_id })).trace;
    const got = { added: [], modified: [], deleted: [] };
    for (const p of t.changes.paths) got[p.change].push(p.path);
    for (const k of Object.keys(got)) assert.deepEqual(got[k].sort(), (want[k] ?? []).sort(), `${what}: ${k}`);
    const d = structured(await call('checkpoint_diff', { from: t.changes.checkpoint_after }));
    assert.equal(d.total, 0, `${what}: the checkpoint differs from a full read: ${JSON.stringify(d.changes.map((c) => c.path))}`);
    prev = t.changes.checkpoint_after;
  }
  // Written outside through the other name of a hard link: no event reaches the workspace's folder,
  // yet the next run's checkpoint before sees it (folders holding such files are always read
  // again), so the run itself is not blamed for it.
  fs.appendFileSync(path.join(outside, 'linked.txt'), 'two\n');
  const r = structured(await call('sandbox_exec', { sandbox_id: sb.sandbox_id, command: 'true' }));
  const t = structured(await call('trace_get', { trace_id: r.trace_id })).trace;
  assert.deepEqual(t.changes.paths, []);
  const seen = structured(await call('checkpoint_diff', { from: prev, to: t.changes.checkpoint_before }));
  assert.deepEqual(seen.changes.map((c) => c.path), ['hardlink.txt']);
  const now = structured(await call('checkpoint_diff', { from: t.changes.checkpoint_after }));
  assert.equal(now.total, 0, `after the hard-link write: ${JSON.stringify(now.changes.map((c) => c.path))}`);
  // A manual checkpoint after all of it equals a full read too.
  const m = structured(await call('checkpoint_create', { label: 'after the session' }));
  const final = structured(await call('checkpoint_diff', { from: m.checkpoint_id }));
  assert.equal(final.total, 0);
  await call('sandbox_destroy', { sandbox_id: sb.sandbox_id });
});
