// Helpers for MCP over Streamable HTTP (`kiln serve --mcp`): start a server on a free port and
// find its URL and bearer token, raw POST/GET/DELETE with every header under the test's control
// (the server's token is sent unless a test overrides or removes it), an incremental Server-Sent
// Events reader that exposes event ids, and SDK clients over HTTP.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { kilnBin, kilnEnv, sleep, tempDir, TapTransport } from './kiln.mjs';
import { stopProcess } from './http.mjs';

export const PROTOCOL = '2025-11-25';

// The bearer token of each started server, by its /mcp URL: every request to it carries the
// token, as a client configured with `kiln serve --print-token` would.
const tokens = new Map();
export function tokenFor(url) { return tokens.get(String(url)); }

// The token a server for state directory `home` uses when no --token-file is given.
export function defaultToken(home) { return fs.readFileSync(path.join(home, 'mcp-token'), 'utf8').trim(); }
export const ACCEPT_BOTH = 'application/json, text/event-stream';

// `kiln serve --mcp` in the foreground. Resolves { url (…/mcp), base, home, proc, stderr, stop() }
// once <home>/serve.json names this process; rejects with stderr if it exits first.
export async function startServe({ args = [], listen = '127.0.0.1:0', home = tempDir('kiln-mcp-http-'), env = {} } = {}) {
  const proc = spawn(kilnBin(), ['serve', '--mcp', '--listen', listen, '--state-dir', home, ...args], {
    env: kilnEnv(home, env), stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  proc.stderr.on('data', (c) => { stderr += c.toString(); });
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  const deadline = Date.now() + 15000;
  for (;;) {
    let info;
    try { info = JSON.parse(fs.readFileSync(path.join(home, 'serve.json'), 'utf8')); } catch { /* not yet */ }
    if (info && info.pid === proc.pid) {
      const tokenFile = args.includes('--token-file') ? args[args.indexOf('--token-file') + 1] : null;
      // A --token-file's first token (bare, or NAME TOKEN) is the one the helpers send.
      const token = tokenFile
        ? fs.readFileSync(tokenFile, 'utf8').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'))[0].split(/\s+/).pop()
        : (fs.existsSync(path.join(home, 'mcp-token')) ? defaultToken(home) : null);  // null: a server that takes none
      if (token) tokens.set(`${info.url}/mcp`, token);
      return {
        url: `${info.url}/mcp`, base: info.url, home, proc, exited, token,
        auth: token ? { authorization: `Bearer ${token}` } : {},
        get stderr() { return stderr; },
        async stop() { await stopProcess(proc.pid); },
      };
    }
    if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`kiln serve exited (${proc.exitCode}): ${stderr}`);
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`kiln serve did not announce itself in 15 s: ${stderr}`);
    }
    await sleep(25);
  }
}

// Runs `kiln serve --mcp` expecting it to refuse to start: resolves { code, stderr }.
export function serveRefusal({ args = [], listen, home = tempDir('kiln-mcp-http-') }) {
  return new Promise((resolve, reject) => {
    const proc = spawn(kilnBin(), ['serve', '--mcp', '--listen', listen, '--state-dir', home, ...args], {
      env: kilnEnv(home, {}), stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    proc.stderr.on('data', (c) => { stderr += c.toString(); });
    const timer = setTimeout(() => { proc.kill('SIGKILL'); reject(new Error(`kiln serve kept running: ${stderr}`)); }, 15000);
    proc.on('exit', (code) => { clearTimeout(timer); resolve({ code, stderr }); });
  });
}

export function initializeBody(id = 0, capabilities = {}) {
  return { jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: PROTOCOL, capabilities, clientInfo: { name: 'kiln-http-test', version: '0' } } };
}

// fetch with MCP defaults: POST JSON, both Accept types, the session and version headers when
// `session` is given. `headers` entries override (null removes one).
export async function mcpFetch(url, { method = 'POST', body, session, headers = {}, signal } = {}) {
  const h = { accept: ACCEPT_BOTH };
  if (tokenFor(url)) h.authorization = `Bearer ${tokenFor(url)}`;
  if (method === 'POST') h['content-type'] = 'application/json';
  if (session) {
    h['mcp-session-id'] = session;
    h['mcp-protocol-version'] = PROTOCOL;
  }
  for (const [k, v] of Object.entries(headers)) {
    if (v === null) delete h[k.toLowerCase()]; else h[k.toLowerCase()] = v;
  }
  return fetch(url, { method, headers: h, body: body === undefined ? undefined : (typeof body === 'string' ? body : JSON.stringify(body)), signal });
}

// Initializes a session the raw way; resolves { session, result }.
export async function rawSession(url, { capabilities = {}, headers = {} } = {}) {
  const r = await mcpFetch(url, { body: initializeBody(0, capabilities), headers });
  if (r.status !== 200) throw new Error(`initialize: HTTP ${r.status} ${await r.text()}`);
  const session = r.headers.get('mcp-session-id');
  const result = (await r.json()).result;
  const n = await mcpFetch(url, { body: { jsonrpc: '2.0', method: 'notifications/initialized' }, session, headers });
  if (n.status !== 202) throw new Error(`initialized: HTTP ${n.status}`);
  return { session, result };
}

// Reads SSE events from a fetch Response as they arrive: `next()` resolves the next event
// { id, data, retry, message } (message = parsed data, or undefined for priming/empty events),
// or null at the end of the stream.
export class SseReader {
  constructor(response) {
    this.reader = response.body.getReader();
    this.decoder = new TextDecoder();
    this.buffer = '';
    this.done = false;
  }

  async next(timeoutMs = 10000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const sep = this.buffer.indexOf('\n\n');
      if (sep >= 0) {
        const block = this.buffer.slice(0, sep);
        this.buffer = this.buffer.slice(sep + 2);
        const ev = { id: undefined, data: '', retry: undefined };
        let sawData = false;
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) continue;
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          let value = colon < 0 ? '' : line.slice(colon + 1);
          if (value.startsWith(' ')) value = value.slice(1);
          if (field === 'id') ev.id = value;
          else if (field === 'retry') ev.retry = Number(value);
          else if (field === 'data') { ev.data = sawData ? `${ev.data}\n${value}` : value; sawData = true; }
        }
        if (ev.id === undefined && !sawData && ev.retry === undefined) continue;  // a comment (keepalive)
        ev.message = ev.data ? JSON.parse(ev.data) : undefined;
        return ev;
      }
      if (this.done) return null;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no SSE event within ${timeoutMs} ms; buffered: ${JSON.stringify(this.buffer)}`);
      let timer;
      const chunk = await Promise.race([
        this.reader.read(),
        new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`no SSE event within ${timeoutMs} ms`)), left); }),
      ]).finally(() => clearTimeout(timer));
      if (chunk.done) this.done = true;
      else this.buffer += this.decoder.decode(chunk.value, { stream: true });
    }
  }

  // Events up to and including the first one whose message satisfies `pred`.
  async until(pred, timeoutMs = 10000) {
    const seen = [];
    for (;;) {
      const ev = await this.next(timeoutMs);
      if (!ev) throw new Error(`stream ended before the expected event; saw ${JSON.stringify(seen.map((e) => e.data))}`);
      seen.push(ev);
      if (ev.message && pred(ev.message)) return seen;
    }
  }

  async rest(timeoutMs = 10000) {
    const all = [];
    for (let ev = await this.next(timeoutMs); ev; ev = await this.next(timeoutMs)) all.push(ev);
    return all;
  }

  cancel() { return this.reader.cancel().catch(() => {}); }
}

// An SDK client over Streamable HTTP; every message it receives is recorded in `wire`.
export async function httpClient(url, { capabilities = {}, headers, name = 'kiln-http-e2e', onRoots } = {}) {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
  const all = { ...(tokenFor(url) ? { authorization: `Bearer ${tokenFor(url)}` } : {}), ...(headers ?? {}) };
  const inner = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: all } });
  const transport = new TapTransport(inner);
  const client = new Client({ name, version: '0.0.0' }, { capabilities });
  const errors = [];
  client.onerror = (e) => errors.push(e);
  if (onRoots) {
    const { ListRootsRequestSchema } = await import('@modelcontextprotocol/sdk/types.js');
    client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: await onRoots() }));
  }
  await client.connect(transport);
  return {
    client, transport, inner, errors, wire: transport.received,
    get sessionId() { return inner.sessionId; },
    async close() { await client.close(); },
    async terminate() { await inner.terminateSession(); await client.close(); },
  };
}

// ---- MCP 2026-07-28 ("modern", stateless) over Streamable HTTP ---------------------------------

export const MODERN = '2026-07-28';
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';
export const TASKS_CAPABILITIES = { extensions: { [TASKS_EXTENSION]: {} } };

// The per-request envelope a 2026-07-28 request carries in params._meta.
export function modernMeta(capabilities = {}, version = MODERN) {
  return {
    'io.modelcontextprotocol/protocolVersion': version,
    'io.modelcontextprotocol/clientInfo': { name: 'kiln-http-modern-test', version: '0' },
    'io.modelcontextprotocol/clientCapabilities': capabilities,
  };
}

// A modern JSON-RPC request body (`id` null: a notification).
export function modernBody(id, method, params = {}, { capabilities = {}, version = MODERN } = {}) {
  const body = { jsonrpc: '2.0', method, params: { ...params, _meta: { ...modernMeta(capabilities, version), ...(params._meta ?? {}) } } };
  if (id !== null) body.id = id;
  return body;
}

// `=?base64?...?=`, the form a header value takes when it cannot be sent as is.
export const base64Sentinel = (value) => `=?base64?${Buffer.from(value, 'utf8').toString('base64')}?=`;

// The params field each method mirrors into Mcp-Name (Streamable HTTP, Request Metadata; tasks
// extension, Routing Headers).
const NAME_FIELD = { 'tools/call': 'name', 'prompts/get': 'name', 'resources/read': 'uri', 'tasks/get': 'taskId', 'tasks/update': 'taskId', 'tasks/cancel': 'taskId' };

// The request metadata headers a conforming client derives from `body`.
export function modernHeaders(body) {
  const h = { 'mcp-protocol-version': body.params?._meta?.['io.modelcontextprotocol/protocolVersion'] ?? MODERN, 'mcp-method': body.method };
  const field = NAME_FIELD[body.method];
  if (field && typeof body.params?.[field] === 'string') {
    const v = body.params[field];
    h['mcp-name'] = /^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/.test(v) && !/^=\?base64\?.*\?=$/.test(v) ? v : base64Sentinel(v);
  }
  return h;
}

// POSTs a modern request with the headers derived from its body; `headers` override (null removes).
export function modernFetch(url, body, { headers = {}, signal } = {}) {
  return mcpFetch(url, { body, headers: { ...modernHeaders(body), ...headers }, signal });
}

// A modern request answered in full: { status, headers, events, messages, response } where
// `response` is the JSON-RPC response (the last SSE message, or the JSON body of a refusal).
export async function modernCall(url, body, { headers, timeoutMs = 60000 } = {}) {
  const r = await modernFetch(url, body, { headers });
  const type = r.headers.get('content-type') ?? '';
  if (!type.startsWith('text/event-stream')) {
    const text = await r.text();
    const parsed = text ? JSON.parse(text) : undefined;
    return { status: r.status, headers: r.headers, events: [], messages: parsed ? [parsed] : [], response: parsed };
  }
  const events = await new SseReader(r).rest(timeoutMs);
  const messages = events.filter((e) => e.message).map((e) => e.message);
  return { status: r.status, headers: r.headers, events, messages, response: messages.at(-1) };
}

// The official SDK v2 client (`@modelcontextprotocol/client`) over Streamable HTTP, negotiating
// `mode` ({pin: '2026-07-28'}, 'auto' or 'legacy'). Every HTTP exchange it makes is recorded in
// `exchanges` ({method, headers, body, status, responseHeaders}), headers lowercased.
export async function modernHttpClient(url, { mode = { pin: MODERN }, capabilities = {}, headers, name = 'kiln-http-v2-e2e' } = {}) {
  const { Client, StreamableHTTPClientTransport } = await import('@modelcontextprotocol/client');
  const all = { ...(tokenFor(url) ? { authorization: `Bearer ${tokenFor(url)}` } : {}), ...(headers ?? {}) };
  const exchanges = [];
  const recordingFetch = async (input, init = {}) => {
    const h = Object.fromEntries([...new Headers(init.headers ?? {})].map(([k, v]) => [k.toLowerCase(), v]));
    let body;
    try { body = typeof init.body === 'string' ? JSON.parse(init.body) : undefined; } catch { body = init.body; }
    const ex = { method: init.method ?? 'GET', headers: h, body };
    exchanges.push(ex);
    const r = await fetch(input, init);
    ex.status = r.status;
    ex.responseHeaders = Object.fromEntries([...r.headers].map(([k, v]) => [k.toLowerCase(), v]));
    return r;
  };
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: all }, fetch: recordingFetch });
  const client = new Client({ name, version: '0.0.0' }, { capabilities, versionNegotiation: { mode } });
  const errors = [];
  client.onerror = (e) => errors.push(e);
  await client.connect(transport);
  return {
    client, transport, exchanges, errors,
    async close() { await client.close(); },
  };
}
