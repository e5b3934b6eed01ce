// Shared helpers for the wire, end-to-end, demo and bench scripts: where the binary is, fresh
// state dirs and workspace copies, a raw stdio peer that sees every byte, and an SDK client.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const testsDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const repoRoot = path.resolve(testsDir, '..');
export const sampleProject = path.join(repoRoot, 'examples', 'sample-project');

// KILN_BIN if set (relative paths are taken from the current directory), else ../build/kiln
// relative to tests/.
export function kilnBin() {
  const fromEnv = process.env.KILN_BIN;
  const bin = fromEnv ? path.resolve(fromEnv) : path.resolve(testsDir, '..', 'build', 'kiln');
  if (!fs.existsSync(bin)) {
    throw new Error(`kiln binary not found at ${bin}: run 'make build' or set KILN_BIN`);
  }
  return bin;
}

const tempDirs = [];
process.on('exit', () => {
  if (process.env.KILN_KEEP_TEMP) return;
  for (const d of tempDirs) fs.rmSync(d, { recursive: true, force: true });
});

// A fresh directory under the OS temp dir, removed when the process exits.
export function tempDir(prefix = 'kiln-test-') {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  tempDirs.push(d);
  return fs.realpathSync(d);
}

// A fresh copy of examples/sample-project (the repo copy is never touched).
export function copySample(prefix = 'kiln-ws-') {
  const root = path.join(tempDir(prefix), 'sample-project');
  fs.cpSync(sampleProject, root, { recursive: true });
  return root;
}

// The environment a kiln child gets: ours plus a private state dir.
export function kilnEnv(home, extra = {}) {
  const env = { ...process.env, KILN_HOME: home, ...extra };
  delete env.XDG_STATE_HOME;
  return env;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Polls `probe` (sync or async) until it returns a truthy value, which is returned; fails with
// `what` after `timeoutMs`. For waiting on behaviour without assuming how long it takes.
export async function waitUntil(probe, { timeoutMs = 30000, intervalMs = 50, what = 'the condition' } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(intervalMs);
  }
}

// A raw peer on `kiln mcp`'s stdio: writes bytes verbatim, reads newline-delimited (or
// Content-Length framed) messages, and keeps every stdout byte so tests can assert that stdout
// carries protocol messages only.
export class RawServer {
  // `argv` replaces ['mcp', ...args] (to drive another stdio server, e.g. in bench/).
  constructor({ args = [], home = tempDir('kiln-home-'), env = {}, framing = 'ndjson', bin, argv } = {}) {
    bin ??= kilnBin();
    this.home = home;
    this.framing = framing;
    this.child = spawn(bin, argv ?? ['mcp', ...args], { env: kilnEnv(home, env), stdio: ['pipe', 'pipe', 'pipe'] });
    this.stdoutBytes = Buffer.alloc(0);
    this.stderr = '';
    this.buffer = Buffer.alloc(0);
    this.messages = [];        // parsed, not yet consumed
    this.all = [];             // every message, in order
    this.garbage = [];         // stdout chunks that were not JSON-RPC
    this.waiters = [];
    this.exited = new Promise((resolve) => {
      this.child.on('exit', (code, signal) => {
        this.exitCode = code;
        this.exitSignal = signal;
        this.exitedAt = Date.now();
        resolve({ code, signal });
        this.#wake();
      });
    });
    this.child.stdin.on('error', () => {}); // EPIPE once the server is gone
    this.child.stdout.on('data', (chunk) => {
      this.stdoutBytes = Buffer.concat([this.stdoutBytes, chunk]);
      this.buffer = Buffer.concat([this.buffer, chunk]);
      this.#drain();
    });
    this.child.stderr.on('data', (chunk) => { this.stderr += chunk.toString(); });
  }

  #accept(text) {
    let msg;
    try {
      msg = JSON.parse(text);
    } catch {
      this.garbage.push(text);
      return;
    }
    if (msg === null || typeof msg !== 'object' || msg.jsonrpc !== '2.0') this.garbage.push(text);
    this.messages.push(msg);
    this.all.push(msg);
  }

  #drain() {
    for (;;) {
      if (this.framing === 'content-length') {
        const headerEnd = this.buffer.indexOf('\r\n\r\n');
        if (headerEnd < 0) break;
        const header = this.buffer.subarray(0, headerEnd).toString('latin1');
        const m = /^Content-Length:\s*(\d+)\s*$/im.exec(header);
        if (!m) {
          this.garbage.push(header);
          this.buffer = this.buffer.subarray(headerEnd + 4);
          continue;
        }
        const len = Number(m[1]);
        if (this.buffer.length < headerEnd + 4 + len) break;
        this.#accept(this.buffer.subarray(headerEnd + 4, headerEnd + 4 + len).toString('utf8'));
        this.buffer = this.buffer.subarray(headerEnd + 4 + len);
      } else {
        const nl = this.buffer.indexOf(0x0a);
        if (nl < 0) break;
        const line = this.buffer.subarray(0, nl).toString('utf8');
        this.buffer = this.buffer.subarray(nl + 1);
        if (line.trim() === '') { this.garbage.push(line); continue; }
        this.#accept(line);
      }
    }
    this.#wake();
  }

  #wake() {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  #changed(ms) {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.waiters.push(() => { clearTimeout(t); resolve(); });
    });
  }

  write(data) {
    this.child.stdin.write(data);
  }

  // Sends one message (object or raw string) followed by a newline.
  send(msg) {
    this.write((typeof msg === 'string' ? msg : JSON.stringify(msg)) + '\n');
  }

  // The next message that satisfies `pred` (default: any), consuming it and everything before it
  // that `skip` allows. Rejects after `timeoutMs`.
  async next({ timeoutMs = 5000, pred = () => true } = {}) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const i = this.messages.findIndex(pred);
      if (i >= 0) return this.messages.splice(i, 1)[0];
      const left = deadline - Date.now();
      if (left <= 0 || this.exitCode !== undefined) {
        if (this.exitCode !== undefined && this.messages.findIndex(pred) < 0) {
          throw new Error(`kiln exited (code ${this.exitCode}, signal ${this.exitSignal}) before the expected message; stderr:\n${this.stderr}`);
        }
        if (left <= 0) throw new Error(`no matching message within ${timeoutMs} ms; unconsumed: ${JSON.stringify(this.messages)}`);
      }
      await this.#changed(Math.max(1, left));
    }
  }

  // The reply to request `id`.
  reply(id, timeoutMs = 5000) {
    return this.next({ timeoutMs, pred: (m) => m.id === id && !('method' in m) });
  }

  // Sends a request and waits for its reply.
  async request(id, method, params, timeoutMs = 5000) {
    const msg = { jsonrpc: '2.0', id, method };
    if (params !== undefined) msg.params = params;
    this.send(msg);
    return this.reply(id, timeoutMs);
  }

  notify(method, params) {
    const msg = { jsonrpc: '2.0', method };
    if (params !== undefined) msg.params = params;
    this.send(msg);
  }

  async initialize({ protocolVersion = '2025-11-25', capabilities = {}, id = 'init' } = {}) {
    const r = await this.request(id, 'initialize', {
      protocolVersion, capabilities, clientInfo: { name: 'kiln-raw-test', version: '0' },
    });
    if (r.error) throw new Error(`initialize failed: ${JSON.stringify(r.error)}`);
    this.notify('notifications/initialized');
    return r.result;
  }

  // Resolves true if nothing arrives within `ms`.
  async quiet(ms = 300) {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline && this.messages.length === 0) await this.#changed(deadline - Date.now());
    return this.messages.length === 0;
  }

  // Closes stdin and waits for the process to exit; kills it after `timeoutMs`.
  async close(timeoutMs = 5000) {
    const closedAt = Date.now();
    this.child.stdin.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), timeoutMs);
    const r = await this.exited;
    clearTimeout(timer);
    return { ...r, ms: (this.exitedAt ?? Date.now()) - closedAt };
  }

  kill() {
    if (this.exitCode === undefined) this.child.kill('SIGKILL');
  }
}

// True if `actual` contains `expected`: objects by key (recursively), arrays element by element
// with equal length, scalars by equality. Strings in `expected` may be matchers:
//   "$any" (present, any value), "$absent" (key must be missing), "$string", "$number",
//   "$re:REGEX" (a string matching REGEX).
// Returns null on a match, else a description of the first difference.
export function subsetDiff(expected, actual, where = '$') {
  if (typeof expected === 'string' && expected.startsWith('$')) {
    if (expected === '$any') return actual === undefined ? `${where}: missing` : null;
    if (expected === '$absent') return actual === undefined ? null : `${where}: expected absent, got ${JSON.stringify(actual)}`;
    if (expected === '$string') return typeof actual === 'string' ? null : `${where}: expected a string, got ${JSON.stringify(actual)}`;
    if (expected === '$number') return typeof actual === 'number' ? null : `${where}: expected a number, got ${JSON.stringify(actual)}`;
    if (expected.startsWith('$re:')) {
      const re = new RegExp(expected.slice(4), 's');
      return typeof actual === 'string' && re.test(actual) ? null : `${where}: expected /${re.source}/, got ${JSON.stringify(actual)}`;
    }
    if (expected.startsWith('$$')) expected = expected.slice(1); // escaped literal "$..."
  }
  if (expected === null || typeof expected !== 'object') {
    return Object.is(expected, actual) ? null : `${where}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`;
  }
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual)) return `${where}: expected an array, got ${JSON.stringify(actual)}`;
    if (expected.length !== actual.length) return `${where}: expected ${expected.length} elements, got ${actual.length}`;
    for (let i = 0; i < expected.length; i++) {
      const d = subsetDiff(expected[i], actual[i], `${where}[${i}]`);
      if (d) return d;
    }
    return null;
  }
  if (actual === null || typeof actual !== 'object' || Array.isArray(actual)) {
    return `${where}: expected an object, got ${JSON.stringify(actual)}`;
  }
  for (const [k, v] of Object.entries(expected)) {
    const d = subsetDiff(v, actual[k], `${where}.${k}`);
    if (d) return d;
  }
  return null;
}

// An SDK client connected to a fresh `kiln mcp`. Every message the server sends is recorded in
// `wire` (raw, before the SDK filters anything), so tests can count notifications the SDK drops.
export async function connectClient({
  args = [], home = tempDir('kiln-home-'), env = {}, capabilities = {}, name = 'kiln-e2e',
  onRoots, bin = kilnBin(),
} = {}) {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
  const inner = new StdioClientTransport({ command: bin, args: ['mcp', ...args], env: kilnEnv(home, env), stderr: 'pipe' });
  let stderr = '';
  inner.stderr?.on('data', (c) => { stderr += c.toString(); });
  const transport = new TapTransport(inner);
  const client = new Client({ name, version: '0.0.0' }, { capabilities });
  if (onRoots) {
    const { ListRootsRequestSchema } = await import('@modelcontextprotocol/sdk/types.js');
    client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: await onRoots() }));
  }
  await client.connect(transport);
  return {
    client, transport, home,
    get stderr() { return stderr; },
    wire: transport.received,
    async close() { await client.close(); },
  };
}

// Wraps a transport and records what crosses it, in both directions.
export class TapTransport {
  constructor(inner) {
    this.inner = inner;
    this.received = [];
    this.sent = [];
    inner.onmessage = (m, extra) => { this.received.push(m); this.onmessage?.(m, extra); };
    inner.onclose = () => this.onclose?.();
    inner.onerror = (e) => this.onerror?.(e);
  }
  start() { return this.inner.start(); }
  send(m, opts) { this.sent.push(m); return this.inner.send(m, opts); }
  close() { return this.inner.close(); }
  get pid() { return this.inner.pid; }
  get sessionId() { return this.inner.sessionId; }
  setProtocolVersion(v) { this.inner.setProtocolVersion?.(v); }
}

// The parsed structuredContent of a tool result, failing loudly on isError.
export function structured(result) {
  if (result.isError) throw new Error(`tool error: ${result.content?.map((c) => c.text).join('\n')}`);
  return result.structuredContent;
}

export function errorText(result) {
  return (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

// Writes `count` small text files spread over nested folders under `root` (for search and
// progress tests, and the benchmark tree).
export function generateTree(root, count, { perDir = 100, needleEvery = 500 } = {}) {
  let made = 0;
  for (let d = 0; made < count; d++) {
    const dir = path.join(root, `d${String(Math.floor(d / 10)).padStart(3, '0')}`, `s${d % 10}`);
    fs.mkdirSync(dir, { recursive: true });
    for (let f = 0; f < perDir && made < count; f++, made++) {
      const body = [
        `// file ${made} of a generated tree`,
        `export const value${made} = ${made * 7 % 1000};`,
        made % needleEvery === 0 ? `// needle_marker here in file ${made}` : `// nothing to see ${made}`,
        'function helper(x) { return x * 2 + 1; }',
        '',
      ].join('\n');
      fs.writeFileSync(path.join(dir, `f${f}.js`), body);
    }
  }
  return made;
}
