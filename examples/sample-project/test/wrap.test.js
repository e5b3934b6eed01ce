import assert from 'node:assert/strict';
import { test } from 'node:test';
import { wrap } from '../src/index.js';

test('wrap breaks at spaces', () => {
  assert.equal(wrap('the quick brown fox', 10), 'the quick\nbrown fox');
});

test('wrap keeps a long word whole', () => {
  assert.equal(wrap('a supercalifragilistic b', 5), 'a\nsupercalifragilistic\nb');
});

test('wrap rejects a bad width', () => {
  assert.throws(() => wrap('x', 0), RangeError);
});
