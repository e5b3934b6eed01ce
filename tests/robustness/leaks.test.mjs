// "No leak at exit under LeakSanitizer", on the ways kiln's servers really end: `kiln mcp` after a
// session with tool calls, ended by end of input and by SIGTERM, and `kiln serve` (with and
// without --mcp) ended by SIGTERM. Each has a control run with LeakSanitizer's roots switched off
// (nothing is reachable, so everything live is a "leak"): a report there proves the exit path
// really runs the check, so a clean run means something. Needs a sanitizer build: make test-asan
// sets KILN_SANITIZED=1; elsewhere every test is skipped with that reason.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { stopProcess, waitForServeInfo, request } from '../lib/http.mjs';
import { copySample, kilnBin, kilnEnv, RawServer, tempDir } from '../lib/kiln.mjs';
import { httpClient, startServe } from '../lib/mcp_http.mjs';

const sanitized = process.env.KILN_SANITIZED === '1';
const skip = sanitized ? false : 'needs kiln built with AddressSanitizer/LeakSanitizer: run make test-asan (sets KILN_SANITIZED=1)';
const SLOW = 120000;

// Sanitizer options for one kiln process: reports under `dir` (so each test reads only its own),
// and for a control run, LeakSanitizer without roots.
function sanitizerEnv(dir, { control = false } = {}) {
  const withLog = (opts, prefix) => [...(opts ?? '').split(':').filter((o) => o && !o.startsWith('log_path=')),
    `log_path=${path.join(dir, prefix)}`].join(':');
  const env = {
    ASAN_OPTIONS: withLog(process.env.ASAN_OPTIONS, 'asan'),
    UBSAN_OPTIONS: withLog(process.env.UBSAN_OPTIONS, 'ubsan'),
  };
  const lsan = (process.env.LSAN_OPTIONS ?? '').split(':').filter(Boolean);
  if (control) lsan.push('use_globals=0', 'use_stacks=0', 'use_registers=0', 'use_tls=0');
  env.LSAN_OPTIONS = lsan.join(':');
  return env;
}

// The reports a process wrote (LOG_PATH.PID), as text.
function reportsOf(dir, pid) {
  return fs.readdirSync(dir).filter((f) => f.endsWith(`.${pid}`)).map((f) => fs.readFileSync(path.join(dir, f), 'utf8')).join('\n');
}

// The reports of every other process (kiln-sandbox helpers, a daemon): never expected.
function otherReports(dir, pid) {
  return fs.readdirSync(dir).filter((f) => !f.endsWith(`.${pid}`)).map((f) => `${f}:\n${fs.readFileSync(path.join(dir, f), 'utf8')}`).join('\n');
}

async function toolCall(k, id, name, args) {
  const r = await k.request(id, 'tools/call', { name, arguments: args }, SLOW);
  assert.equal(r.error, undefined, `${name}: ${JSON.stringify(r.error)}`);
  return r.result;
}

// A `kiln mcp` session over stdio that touches every layer, ended by `end` ('eof' or 'SIGTERM').
async function stdioSession(end, { control }) {
  const dir = tempDir('kiln-lsan-');
  const ws = copySample();
  const k = new RawServer({ args: ['--workspace', ws], env: sanitizerEnv(dir, { control }) });
  try {
    await k.initialize();
    let id = 1;
    const ok = async (name, args) => {
      const r = await toolCall(k, id++, name, args);
      assert.ok(!r.isError, `${name} failed: ${JSON.stringify(r.content)}`);
      return r.structuredContent;
    };
    await ok('workspace_info', {});
    await ok('file_write', { path: 'notes/leak-check.txt', content: 'one\ntwo\n', create_dirs: true });
    await ok('file_edit', { path: 'notes/leak-check.txt', edits: [{ old_text: 'two', new_text: 'three' }] });
    await ok('file_read', { path: 'notes/leak-check.txt' });
    await ok('file_list', { depth: 2 });
    await ok('file_search', { pattern: 'slug' });
    const run = await ok('sandbox_exec', { command: 'echo out; echo err >&2; exit 3' });
    assert.equal(run.exit_code, 3);
    await ok('verify', {});
    await ok('trace_list', { limit: 5 });
    // An unknown tool and a bad argument: the error paths allocate too.
    assert.ok((await k.request(id++, 'tools/call', { name: 'no_such_tool', arguments: {} }, SLOW)).error);
    const bad = await k.request(id++, 'tools/call', { name: 'file_read', arguments: { path: 42 } }, SLOW);
    assert.ok(bad.error || bad.result?.isError);
    let exit;
    if (end === 'eof') {
      exit = await k.close(SLOW);
    } else {
      k.child.kill('SIGTERM');
      exit = await k.exited;
    }
    return { exit, dir, pid: k.child.pid, stderr: k.stderr };
  } finally {
    k.kill();
  }
}

async function plainServe({ control }) {
  const dir = tempDir('kiln-lsan-');
  const home = tempDir('kiln-lsan-home-');
  const child = spawn(kilnBin(), ['serve', '--state-dir', home, '--listen', '127.0.0.1:0'], {
    env: kilnEnv(home, sanitizerEnv(dir, { control })), stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (c) => { stderr += c.toString(); });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  try {
    const info = await waitForServeInfo(home, { timeoutMs: 30000, pid: child.pid });
    const r = await request(info.url, '/a/nothing-here/');
    assert.equal(r.status, 404);
    child.kill('SIGTERM');
    return { exit: await exited, dir, pid: child.pid, stderr };
  } finally {
    await stopProcess(child.pid);
  }
}

async function mcpServe({ control }) {
  const dir = tempDir('kiln-lsan-');
  const ws = copySample();
  const s = await startServe({ args: ['--workspace', ws], env: sanitizerEnv(dir, { control }) });
  try {
    const c = await httpClient(s.url);
    const call = async (name, args) => {
      const r = await c.client.callTool({ name, arguments: args });
      assert.ok(!r.isError, `${name} failed: ${JSON.stringify(r.content)}`);
      return r.structuredContent;
    };
    await call('file_read', { path: 'package.json' });
    await call('file_search', { pattern: 'slug' });
    assert.equal((await call('sandbox_exec', { command: 'echo hi' })).exit_code, 0);
    // A second session left open: the server must release it at exit, not leak it.
    const c2 = await httpClient(s.url);
    await c2.client.listTools();
    await c.terminate();
    s.proc.kill('SIGTERM');
    return { exit: await s.exited, dir, pid: s.proc.pid, stderr: s.stderr };
  } finally {
    await s.stop();
  }
}

// `kiln run` returns from main, so LeakSanitizer checks it at exit. Its timeout path once leaked
// the whole sandbox manager: handlers still queued in its event loop held it (shared_from_this).
async function cliRun(args, { control }) {
  const dir = tempDir('kiln-lsan-');
  const ws = tempDir('kiln-lsan-ws-');
  const home = tempDir('kiln-lsan-home-');
  const child = spawn(kilnBin(), ['run', '--workspace', ws, ...args], {
    env: kilnEnv(home, sanitizerEnv(dir, { control })), stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (c) => { stderr += c.toString(); });
  const exit = await new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return { exit, dir, pid: child.pid, stderr };
}

function assertClean({ exit, dir, pid, stderr }, expectCode = 0) {
  const own = reportsOf(dir, pid);
  assert.equal(own, '', `kiln (pid ${pid}) wrote a sanitizer report:\n${own}`);
  assert.deepEqual({ code: exit.code, signal: exit.signal }, { code: expectCode, signal: null }, `kiln did not exit cleanly; stderr:\n${stderr}`);
  const others = otherReports(dir, pid);
  assert.equal(others, '', `a child process wrote a sanitizer report:\n${others}`);
}

// The control: LeakSanitizer ran on this exit path (abort_on_error makes that SIGABRT).
function assertChecked({ exit, dir, pid, stderr }) {
  const own = reportsOf(dir, pid);
  assert.match(own, /ERROR: LeakSanitizer: detected memory leaks/,
    `no leak check ran at exit (exit ${JSON.stringify(exit)}); stderr:\n${stderr}`);
  assert.notDeepEqual({ code: exit.code, signal: exit.signal }, { code: 0, signal: null });
}

test('kiln mcp ended by end of input: no leak', { skip, timeout: 2 * SLOW }, async () => {
  assertClean(await stdioSession('eof', { control: false }));
});

test('kiln mcp ended by SIGTERM: no leak', { skip, timeout: 2 * SLOW }, async () => {
  assertClean(await stdioSession('SIGTERM', { control: false }));
});

test('kiln mcp: the leak check runs on its exit path (control)', { skip, timeout: 2 * SLOW }, async () => {
  assertChecked(await stdioSession('eof', { control: true }));
});

test('kiln serve ended by SIGTERM: no leak', { skip, timeout: SLOW }, async () => {
  assertClean(await plainServe({ control: false }));
});

test('kiln serve: the leak check runs on its exit path (control)', { skip, timeout: SLOW }, async () => {
  assertChecked(await plainServe({ control: true }));
});

test('kiln serve --mcp after HTTP sessions with tool calls, ended by SIGTERM: no leak', { skip, timeout: SLOW }, async () => {
  assertClean(await mcpServe({ control: false }));
});

test('kiln serve --mcp: the leak check runs on its exit path (control)', { skip, timeout: SLOW }, async () => {
  assertChecked(await mcpServe({ control: true }));
});

test('kiln run stopped by --timeout: no leak', { skip, timeout: SLOW }, async () => {
  // Several times: what is still queued when the run ends depends on timing.
  for (let i = 0; i < 3; i++) assertClean(await cliRun(['--timeout', '1', '--', 'sleep', '30'], { control: false }), 124);
});

test('kiln run: the leak check runs on its exit path (control)', { skip, timeout: SLOW }, async () => {
  assertChecked(await cliRun(['--', 'true'], { control: true }));
});
