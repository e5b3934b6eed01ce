import assert from 'node:assert/strict';
import { test } from 'node:test';
import { slugify } from '../src/index.js';

test('slugify lower-cases and joins words with dashes', () => {
  assert.equal(slugify('Hello, World!'), 'hello-world');
});

test('slugify drops accents', () => {
  assert.equal(slugify('Crème brûlée'), 'creme-brulee');
});

test('slugify takes a custom separator', () => {
  assert.equal(slugify('a b c', { separator: '_' }), 'a_b_c');
});
