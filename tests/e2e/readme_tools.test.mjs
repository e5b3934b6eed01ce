// The README's tool table must be the one generated from schemas/ (run
// `node scripts/tool-table.mjs --write` after changing a schema).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { toolTable, readmeBlock, firstSentence } from '../../scripts/tool-table.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

test('README tool table matches schemas/tools', () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const block = readmeBlock(readme);
  assert.ok(block, 'README.md lacks the TOOLS:BEGIN/TOOLS:END markers');
  assert.equal(block, toolTable(), 'README tool table is stale: run node scripts/tool-table.mjs --write');
});

test('first sentence keeps abbreviations such as e.g. and i.e. inside the sentence', () => {
  assert.equal(firstSentence('Copies a folder (e.g. dist/) somewhere. Then more.'),
    'Copies a folder (e.g. dist/) somewhere.');
  assert.equal(firstSentence('Reads one page, i.e. a slice. Rest.'), 'Reads one page, i.e. a slice.');
  assert.equal(firstSentence('Stops a run. The rest.'), 'Stops a run.');
  assert.equal(firstSentence('No full stop at all'), 'No full stop at all');
  // "fee.g. " is not the abbreviation: the sentence ends there.
  assert.equal(firstSentence('Pays a fee.g. Next.'), 'Pays a fee.g.');
});

test('every row of the tool table is a whole sentence of its description', () => {
  const rows = toolTable().split('\n').filter((l) => l.startsWith('| `'));
  assert.ok(rows.length > 0);
  for (const row of rows) {
    const text = row.split(' | ').at(-1).replace(/ \|$/, '');
    assert.ok(text.endsWith('.'), `${row} does not end a sentence`);
    assert.doesNotMatch(text, /\b(e\.g|i\.e)\.$/, `${row} stops at an abbreviation`);
    const opens = text.split('(').length;
    assert.equal(opens, text.split(')').length, `${row} has unbalanced parentheses`);
  }
});
