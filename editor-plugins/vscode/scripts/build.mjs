// Builds the extension: copies the repo's schemas/kiln.schema.json next to the manifest (the
// `jsonValidation` contribution points at it; it is never edited here) and bundles src/ with
// esbuild into one CommonJS file, dist/extension.js, with `vscode` left to the editor.
// Usage: node scripts/build.mjs [--production] [--outfile FILE]
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import * as esbuild from 'esbuild';

const ext = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const repo = path.resolve(ext, '..', '..');

export function copySchema() {
  const from = path.join(repo, 'schemas', 'kiln.schema.json');
  const to = path.join(ext, 'schemas', 'kiln.schema.json');
  fs.mkdirSync(path.dirname(to), { recursive: true });
  JSON.parse(fs.readFileSync(from, 'utf8')); // a broken schema fails the build, not the editor
  fs.copyFileSync(from, to);
  return to;
}

export async function bundle({ production = false, outfile = path.join(ext, 'dist', 'extension.js') } = {}) {
  await esbuild.build({
    entryPoints: [path.join(ext, 'src', 'extension.ts')],
    bundle: true,
    outfile,
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    external: ['vscode'],
    sourcemap: production ? false : 'linked',
    minify: false,
    legalComments: 'none',
    logLevel: 'warning',
  });
  return outfile;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const production = args.includes('--production');
  const i = args.indexOf('--outfile');
  const outfile = i >= 0 ? path.resolve(args[i + 1]) : undefined;
  const schema = copySchema();
  const out = await bundle({ production, outfile });
  console.log(`built ${path.relative(process.cwd(), out)} (${fs.statSync(out).size} bytes), schema ${path.relative(process.cwd(), schema)}`);
}
