import assert from 'node:assert/strict';
import { test } from 'node:test';
import { camelCase, kebabCase, titleCase, words } from '../src/index.js';

test('words splits on punctuation and case changes', () => {
  assert.deepEqual(words('fooBar baz-qux'), ['foo', 'Bar', 'baz', 'qux']);
});

test('camelCase', () => assert.equal(camelCase('hello big world'), 'helloBigWorld'));
test('kebabCase', () => assert.equal(kebabCase('helloBigWorld'), 'hello-big-world'));
test('titleCase', () => assert.equal(titleCase('hello big-world'), 'Hello Big World'));
