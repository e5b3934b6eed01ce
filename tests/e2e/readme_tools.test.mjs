// The README's tool table must be the one generated from schemas/ (run
// `node scripts/tool-table.mjs --write` after changing a schema).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { toolTable, readmeBlock } from '../../scripts/tool-table.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

test('README tool table matches schemas/tools', () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const block = readmeBlock(readme);
  assert.ok(block, 'README.md lacks the TOOLS:BEGIN/TOOLS:END markers');
  assert.equal(block, toolTable(), 'README tool table is stale: run node scripts/tool-table.mjs --write');
});
