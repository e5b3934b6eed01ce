// The docs are the front door: every relative link in README.md, CHANGELOG.md and docs/*.md must
// reach a file that exists and, with a #fragment, a heading of that file (GitHub's anchor rules).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

// GitHub's heading slug: lower case, punctuation (backticks included) dropped, spaces to dashes.
const slug = (heading) => heading.trim().toLowerCase().replace(/[^\p{L}\p{N}_\- ]/gu, '').replaceAll(' ', '-');
const withoutFences = (text) => text.replace(/^```[\s\S]*?^```/gm, '');

function anchorsOf(file) {
  const anchors = new Set();
  for (const line of withoutFences(readFileSync(file, 'utf8')).split('\n')) {
    const m = /^#{1,6}\s+(.*)$/.exec(line);
    if (m) anchors.add(slug(m[1]));
  }
  return anchors;
}

const docs = ['README.md', 'CHANGELOG.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

test('every relative link in README.md, CHANGELOG.md and docs/ resolves', () => {
  const broken = [];
  let links = 0;
  for (const doc of docs) {
    const file = join(root, doc);
    for (const m of withoutFences(readFileSync(file, 'utf8')).matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1];
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:, ...
      links++;
      const [path, fragment] = target.split('#');
      const resolved = path ? resolve(dirname(file), path) : file;
      if (!existsSync(resolved)) {
        broken.push(`${doc} -> ${target} (no ${relative(root, resolved)})`);
      } else if (fragment && resolved.endsWith('.md') && !anchorsOf(resolved).has(fragment)) {
        broken.push(`${doc} -> ${target} (no heading #${fragment})`);
      }
    }
  }
  assert.ok(links > 20, `only ${links} links found: the scan is broken`);
  assert.deepEqual(broken, []);
});
