// Undoing Kiln's unified diffs (checkpoint_diff's format, from workspace/unified_diff.cpp): the
// left side of a run's diff is the file now with the diff from the checkpoint to now undone.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { loadModule } from './helpers.mjs';

const { reverseApply, parseHunks, PatchError } = await loadModule('src/patch.ts');

test('a changed line in the middle, with context', () => {
  const before = 'a\nb\nc\nd\ne\nf\ng\nh\n';
  const after = 'a\nb\nc\nD\ne\nf\ng\nh\n';
  const diff = '--- a/x\n+++ b/x\n@@ -1,7 +1,7 @@\n a\n b\n c\n-d\n+D\n e\n f\n g\n';
  assert.equal(reverseApply(after, diff), before);
});

test('two hunks, lines added and removed, counts of 1 left out', () => {
  const before = ['1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '11', '12'].map((l) => `${l}\n`).join('');
  const after = ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '12'].map((l) => `${l}\n`).join('');
  const diff = '--- a/x\n+++ b/x\n@@ -1,3 +1,4 @@\n+0\n 1\n 2\n 3\n@@ -9,4 +10,3 @@\n 9\n 10\n-11\n 12\n';
  assert.equal(reverseApply(after, diff), before);
  assert.deepEqual(parseHunks('@@ -3 +3 @@\n-x\n+y\n').map((h) => [h.oldStart, h.oldCount, h.newStart, h.newCount]), [[3, 1, 3, 1]]);
});

test('an added file undone is empty; a deleted one comes back whole', () => {
  assert.equal(reverseApply('line one\nline two\n', '--- a/n\n+++ b/n\n@@ -0,0 +1,2 @@\n+line one\n+line two\n'), '');
  assert.equal(reverseApply('', '--- a/n\n+++ b/n\n@@ -1,2 +0,0 @@\n-line one\n-line two\n'), 'line one\nline two\n');
});

test('"\\ No newline at end of file" on either side', () => {
  const diff = '--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n';
  assert.equal(reverseApply('a\nc', diff), 'a\nb');
  const diff2 = '--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+a\n';
  assert.equal(reverseApply('a\n', diff2), 'a');
  assert.equal(reverseApply('a\r\nB\r\n', '--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\r\n-b\r\n+B\r\n'), 'a\r\nb\r\n', 'CRs kept');
});

test('a diff that does not fit the file, or is cut short, is refused', () => {
  assert.throws(() => reverseApply('a\nX\nc\n', '--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n'), PatchError);
  assert.throws(() => reverseApply('a\nB\n', '--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n'), /cut short/);
  assert.equal(reverseApply('same\n', ''), 'same\n');
});
