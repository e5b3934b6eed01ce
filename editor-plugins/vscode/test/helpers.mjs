// Shared by the unit tests: bundles the extension once per test file (the same esbuild settings as
// the shipped one), loads it with the stub `vscode`, and finds the kiln binary of the build.
import fs from 'node:fs';
import Module, { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { bundle } from '../scripts/build.mjs';

const require = createRequire(import.meta.url);
const { createVscode, createContext } = require('./vscode-stub.cjs');

export const extDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const repoRoot = path.resolve(extDir, '..', '..');
export const packageJson = JSON.parse(fs.readFileSync(path.join(extDir, 'package.json'), 'utf8'));
export { createVscode, createContext };

let currentVscode;
const originalLoad = Module._load;
Module._load = function load(request, parent, isMain) {
  if (request === 'vscode') {
    if (!currentVscode) throw new Error('vscode stub not set');
    return currentVscode;
  }
  return originalLoad.call(this, request, parent, isMain);
};

const tempDirs = [];
process.on('exit', () => {
  for (const d of tempDirs) fs.rmSync(d, { recursive: true, force: true });
});

/** A fresh temp dir (realpath), removed at exit. */
export function tempDir(prefix = 'kiln-vsc-') {
  const d = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), prefix)));
  tempDirs.push(d);
  return d;
}

let bundlePath;
async function ensureBundle() {
  if (!bundlePath) bundlePath = await bundle({ outfile: path.join(tempDir('kiln-vsc-bundle-'), 'extension.js') });
  return bundlePath;
}

/**
 * Loads a fresh copy of the bundled extension against a new stub, activates it and returns
 * {ext, api, vscode, rec, context}. `stubOptions` go to createVscode.
 */
export async function activate(stubOptions = {}, t) {
  const file = await ensureBundle();
  const { vscode, rec } = createVscode(stubOptions);
  currentVscode = vscode;
  delete require.cache[file];
  const ext = require(file);
  const context = createContext(packageJson);
  const api = ext.activate(context);
  const result = { ext, api, vscode, rec, context };
  t?.after(async () => {
    await ext.deactivate();
    for (const d of context.subscriptions) {
      try {
        d.dispose();
      } catch {
        /* already gone */
      }
    }
  });
  return result;
}

/** BUILD/kiln: KILN_BIN, else KILN_BUILD/kiln, else the repo's build/kiln. */
export function kilnBin() {
  if (process.env.KILN_BIN) return path.resolve(process.env.KILN_BIN);
  const build = process.env.KILN_BUILD ? path.resolve(process.env.KILN_BUILD) : path.join(repoRoot, 'build');
  return path.join(build, 'kiln');
}

/** A copy of examples/sample-project in a temp dir. */
export function copySample() {
  const dir = path.join(tempDir('kiln-vsc-ws-'), 'sample-project');
  fs.cpSync(path.join(repoRoot, 'examples', 'sample-project'), dir, { recursive: true });
  return dir;
}

export const fakeKiln = path.join(extDir, 'test', 'fake-kiln.mjs');

/**
 * Settings and folders for activate() that run fake-kiln.mjs in `mode` with the FAKE_KILN_* `env`
 * (unset when the test ends); received() is every message it got, calls(tool) the arguments of
 * each call of one tool.
 */
export function fakeServer(t, { mode = 'normal', env = {}, settings = {}, folders } = {}) {
  const dir = tempDir('kiln-vsc-fake-');
  const logFile = path.join(dir, 'received.ndjson');
  const vars = { FAKE_KILN_LOG: logFile, FAKE_KILN_MODE: mode, ...env };
  Object.assign(process.env, vars);
  t.after(() => {
    for (const k of Object.keys(vars)) delete process.env[k];
  });
  const received = () => (fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l)) : []);
  const calls = (tool) => received().filter((m) => m.method === 'tools/call' && m.params.name === tool).map((m) => m.params.arguments);
  return { folders: folders ?? [dir], settings: { 'kiln.server.path': fakeKiln, ...settings }, received, calls, dir };
}
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Bundles one source module (e.g. src/ndjson.ts) on its own, for tests of code below the extension. */
export async function loadModule(rel) {
  const esbuild = await import('esbuild');
  const outfile = path.join(tempDir('kiln-vsc-mod-'), `${path.basename(rel, '.ts')}.js`);
  await esbuild.build({ entryPoints: [path.join(extDir, rel)], bundle: true, outfile, format: 'cjs', platform: 'node', target: 'node20', external: ['vscode'], logLevel: 'warning' });
  return require(outfile);
}
