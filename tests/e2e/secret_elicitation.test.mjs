// Secrets asked of the person (issue 20, docs/security.md): when sandbox_exec or verify names a
// secret Kiln has neither in its environment nor in its store, a client that declared URL-mode
// elicitation is handed a one-time page of `kiln serve` (started for the same state dir on demand)
// and the person types the value there, in a real Chromium (playwright-core). Legacy era (v1 SDK,
// after initialize): elicitation/create, the server waits for the page, then
// notifications/elicitation/complete and the run. Modern era (v2 SDK pinned to 2026-07-28): an
// input_required result whose retry runs. Decline, a client without URL elicitation, and verify's
// kiln.json secrets. After each flow the value's bytes are looked for in every file of the state
// dir, every MCP message and kiln's stderr: only secrets/NAME may hold them. Without Chromium the
// browser cases are reported as skipped with the reason, never as passed; so are the runs when
// the sandbox cannot start here (failed under KILN_REQUIRE_SANDBOX=1).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';

import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

import { launchChromium } from '../lib/browser.mjs';
import { alive, readServeInfo, request, stopServeOf } from '../lib/http.mjs';
import { connectClient, errorText, kilnBin, kilnEnv, RawServer, sleep, TapTransport, tempDir } from '../lib/kiln.mjs';
import { filesHolding } from '../lib/leak_scan.mjs';
import { probeExec, sandboxOrSkip } from '../lib/sandbox_probe.mjs';

const NAME = 'KILN_T_SECRET';
const MODERN = '2026-07-28';
// The daemon the flow starts listens on a free loopback port.
const SERVE_ENV = { KILN_SERVE_LISTEN: '127.0.0.1:0' };
const PAGE_URL = /^http:\/\/127\.0\.0\.1:\d+\/_kiln\/secret\/[0-9a-f]{64}$/;

// Can the sandbox run here? (A run without secrets asks nothing.)
const sandboxWhy = await (async () => {
  const home = tempDir('kiln-elicit-probe-');
  const k = await connectClient({ args: ['--state-dir', home, '--workspace', tempDir('kiln-elicit-probe-ws-')], home });
  try {
    return await probeExec((name, args) => k.client.callTool({ name, arguments: args }, undefined, { timeout: 60000 }));
  } finally {
    await k.close();
  }
})();

const chromium = await launchChromium();
after(async () => { await chromium.browser?.close(); });

function browserOrSkip(t) {
  if (chromium.browser) return false;
  console.log(`# secret elicitation browser test not run: ${chromium.why}`);
  t.skip(chromium.why);
  return true;
}

// A distinctive value, and a command that proves the sandbox sees it without printing it.
function secretValue() {
  const value = `kiln-elicit-${crypto.randomBytes(16).toString('hex')}`;
  const prefix = crypto.createHash('sha256').update(value).digest('hex').slice(0, 16);
  const command = `test "$(printf %s "$${NAME}" | sha256sum | cut -c1-16)" = ${prefix} && echo match`;
  return { value, command };
}

// A state dir and workspace of the test's own; the kiln serve the flow starts is stopped after.
function freshKiln(t) {
  const home = tempDir('kiln-elicit-home-');
  const ws = tempDir('kiln-elicit-ws-');
  t.after(() => stopServeOf(home));
  // Debug logs: the most kiln writes to its stderr, all of it scanned for the value.
  return { home, ws, args: ['--state-dir', home, '--workspace', ws, '--log-level', 'debug'] };
}

// The person: opens the page in Chromium, types the value, submits, sees it stored.
async function typeOnPage(url, value) {
  const tab = await chromium.browser.newPage();
  try {
    const first = await tab.goto(url);
    assert.equal(first.status(), 200, `GET ${url}`);
    assert.match(await tab.title(), new RegExp(NAME));
    await tab.locator('input[type=password]').fill(value);
    const [answer] = await Promise.all([
      tab.waitForResponse((r) => r.request().method() === 'POST'),
      tab.locator('button[type=submit]').click(),
    ]);
    assert.equal(answer.status(), 200, await answer.text());
    await tab.locator('h1').filter({ hasText: `Stored ${NAME}` }).waitFor({ timeout: 15000 });
  } finally {
    await tab.close();
  }
}

// The page URL is kiln serve's own address for this state dir, and that daemon is running.
function assertPageOfOwnServe(home, url) {
  assert.match(url, PAGE_URL);
  const serve = readServeInfo(home);
  assert.ok(serve?.pid && alive(serve.pid), `kiln serve was started for ${home}: ${JSON.stringify(serve)}`);
  assert.equal(fs.realpathSync(serve.state_dir), home);
  assert.equal(new URL(url).origin, new URL(serve.url).origin.replace('localhost', '127.0.0.1'));
}

// The value is in secrets/NAME (0600) and in no other file of the state dir or the workspace,
// no MCP message either way, and not in kiln's stderr; the page token is on no disk at all.
function assertNoLeak({ home, ws, value, token, messages, stderr }) {
  const file = path.join(home, 'secrets', NAME);
  assert.equal(fs.readFileSync(file, 'utf8'), value);
  assert.equal(fs.statSync(file).mode & 0o777, 0o600);
  assert.deepEqual(filesHolding(home, value), [path.join('secrets', NAME)], 'only the secret store holds the value');
  assert.deepEqual(filesHolding(ws, value), [], 'the workspace does not hold the value');
  assert.ok(!JSON.stringify(messages).includes(value), 'no MCP message carries the value');
  assert.ok(!stderr.includes(value), "kiln's stderr does not carry the value");
  if (token) assert.deepEqual(filesHolding(home, token), [], 'the page token is never written to disk');
}

// After the processes are gone (logs flushed, databases closed), the same scan once more.
async function assertNoLeakAfterExit(k, opts) {
  await k.close();
  await stopServeOf(opts.home);
  const scanned = fs.readdirSync(opts.home, { recursive: true });
  for (const kind of [/\.db$/, /\.db-wal$/, /^serve\.log$/, /^traces\/.+\/stdout$/]) {
    assert.ok(scanned.some((f) => kind.test(f)), `the scan covers ${kind}: ${scanned}`);
  }
  assertNoLeak({ ...opts, stderr: k.stderr });
}

function deferred() {
  let resolve;
  let reject;
  const promise = new Promise((a, b) => { resolve = a; reject = b; });
  return { promise, resolve, reject };
}

// A v2 SDK client pinned to 2026-07-28 on a fresh `kiln mcp`, every message recorded both ways.
// `onElicit(params)` answers elicitation/create (the SDK fulfils input_required through it).
async function connectModern({ args, home, capabilities, onElicit, inputRequired }) {
  const { Client } = await import('@modelcontextprotocol/client');
  const { StdioClientTransport } = await import('@modelcontextprotocol/client/stdio');
  const inner = new StdioClientTransport({ command: kilnBin(), args: ['mcp', ...args], env: kilnEnv(home, SERVE_ENV), stderr: 'pipe' });
  let stderr = '';
  inner.stderr?.on('data', (c) => { stderr += c.toString(); });
  const transport = new TapTransport(inner);
  const client = new Client({ name: 'kiln-elicit-e2e', version: '0.0.0' },
    { capabilities, versionNegotiation: { mode: { pin: MODERN } }, ...(inputRequired ? { inputRequired } : {}) });
  if (onElicit) client.setRequestHandler('elicitation/create', async (req) => onElicit(req.params));
  await client.connect(transport);
  return {
    client, transport,
    get stderr() { return stderr; },
    call: (name, a) => client.callTool({ name, arguments: a }, { timeout: 120000, resetTimeoutOnProgress: true }),
    async close() { await client.close().catch(() => {}); },
  };
}

// The tools/call requests the client sent, each with the server's answer.
function toolCalls(transport) {
  return transport.sent.filter((m) => m.method === 'tools/call')
    .map((req) => ({ req, res: transport.received.find((m) => m.id === req.id && !('method' in m)) }));
}

test('legacy: elicitation/create points at the page, the person types the value in Chromium, complete, and the run sees it', async (t) => {
  if (sandboxOrSkip(t, sandboxWhy) || browserOrSkip(t)) return;
  const { home, ws, args } = freshKiln(t);
  const { value, command } = secretValue();
  const k = await connectClient({ args, home, env: SERVE_ENV, capabilities: { elicitation: { url: {} } } });
  t.after(() => k.close());
  const asked = [];
  const typed = deferred();
  k.client.setRequestHandler(ElicitRequestSchema, async (req) => {
    asked.push(req.params);
    // Accept is the person's consent; the typing happens afterwards, out of band.
    typeOnPage(req.params.url, value).then(typed.resolve, typed.reject);
    return { action: 'accept' };
  });
  const call = (a) => k.client.callTool({ name: 'sandbox_exec', arguments: a }, undefined, { timeout: 120000, resetTimeoutOnProgress: true });

  const pending = call({ command, secrets: [NAME] });
  const r = await Promise.race([pending, typed.promise.then(() => pending)]);
  assert.equal(asked.length, 1, `one elicitation; result: ${JSON.stringify(r)}`);
  await typed.promise;
  assert.ok(!r.isError, errorText(r));
  assert.equal(r.structuredContent.exit_code, 0, JSON.stringify(r.structuredContent));
  assert.equal(r.structuredContent.stdout, 'match\n');

  const [ask] = asked;
  assert.equal(ask.mode, 'url');
  assert.match(ask.elicitationId, /^\S+$/);
  assert.match(ask.message, new RegExp(NAME));
  assert.match(ask.message, new RegExp(`kiln secret set ${NAME}`));
  assertPageOfOwnServe(home, ask.url);

  const wire = k.wire;
  const completes = wire.filter((m) => m.method === 'notifications/elicitation/complete');
  assert.deepEqual(completes.map((m) => m.params), [{ elicitationId: ask.elicitationId }]);
  const [first] = toolCalls(k.transport);
  assert.ok(wire.indexOf(completes[0]) < wire.indexOf(first.res), 'complete arrives before the tool result');

  // The value is stored now: a second run asks nothing.
  const again = await call({ command, secrets: [NAME] });
  assert.ok(!again.isError, errorText(again));
  assert.equal(again.structuredContent.stdout, 'match\n');
  assert.equal(asked.length, 1);
  assert.equal(k.wire.filter((m) => m.method === 'elicitation/create').length, 1);

  const scan = { home, ws, value, token: ask.url.split('/').pop(), messages: [k.wire, k.transport.sent] };
  assertNoLeak({ ...scan, stderr: k.stderr });
  await assertNoLeakAfterExit(k, scan);
});

test('modern: the first tools/call answers input_required with the page, the SDK retries after the person typed, and the run sees it', async (t) => {
  if (sandboxOrSkip(t, sandboxWhy) || browserOrSkip(t)) return;
  const { home, ws, args } = freshKiln(t);
  const { value, command } = secretValue();
  const asked = [];
  const k = await connectModern({
    args, home, capabilities: { elicitation: { url: {} } },
    async onElicit(params) {
      asked.push(params);
      // Kiln's retry does not wait for the page, so the person types before the client retries.
      await typeOnPage(params.url, value);
      return { action: 'accept' };
    },
  });
  t.after(() => k.close());

  const r = await k.call('sandbox_exec', { command, secrets: [NAME] });
  assert.ok(!r.isError, errorText(r));
  assert.equal(r.structuredContent.stdout, 'match\n');
  assert.equal(asked.length, 1);

  const calls = toolCalls(k.transport);
  assert.equal(calls.length, 2, JSON.stringify(calls));
  const [ask, retry] = calls;
  assert.equal(ask.res.result.resultType, 'input_required', JSON.stringify(ask.res));
  const input = ask.res.result.inputRequests?.[`kiln_secret_${NAME}`];
  assert.equal(input?.method, 'elicitation/create', JSON.stringify(ask.res.result));
  assert.equal(input.params.mode, 'url');
  assert.match(input.params.message, new RegExp(`kiln secret set ${NAME}`));
  assert.equal(input.params.url, asked[0].url);
  assertPageOfOwnServe(home, input.params.url);
  assert.notEqual(retry.req.id, ask.req.id);
  assert.deepEqual(retry.req.params.inputResponses, { [`kiln_secret_${NAME}`]: { action: 'accept' } });
  assert.equal(retry.res.result.resultType, 'complete');
  // 2026-07-28 on stdio: no server-to-client request, and elicitation/complete is gone.
  assert.deepEqual(k.transport.received.filter((m) => 'method' in m && 'id' in m), []);
  assert.deepEqual(k.transport.received.filter((m) => m.method === 'notifications/elicitation/complete'), []);

  const again = await k.call('sandbox_exec', { command, secrets: [NAME] });
  assert.equal(again.structuredContent.stdout, 'match\n');
  assert.equal(asked.length, 1);
  assert.equal(toolCalls(k.transport).length, 3, 'the second run needed no retry');

  const scan = { home, ws, value, token: input.params.url.split('/').pop(), messages: [k.transport.received, k.transport.sent] };
  assertNoLeak({ ...scan, stderr: k.stderr });
  await assertNoLeakAfterExit(k, scan);
});

test('legacy: a declined or cancelled page is a tool error that says how to set the secret', async (t) => {
  const { home, args } = freshKiln(t);
  const k = await connectClient({ args, home, env: SERVE_ENV, capabilities: { elicitation: { url: {} } } });
  t.after(() => k.close());
  const answers = ['decline', 'cancel'];
  const asked = [];
  k.client.setRequestHandler(ElicitRequestSchema, async (req) => {
    asked.push(req.params);
    return { action: answers[asked.length - 1] };
  });
  for (const [i, action] of answers.entries()) {
    const r = await k.client.callTool({ name: 'sandbox_exec', arguments: { command: 'true', secrets: [NAME] } }, undefined, { timeout: 60000 });
    assert.equal(asked.length, i + 1, `${action}: asked once`);
    assert.equal(r.isError, true, `${action}: ${JSON.stringify(r)}`);
    assert.match(errorText(r), new RegExp(`kiln secret set ${NAME}`), action);
    assert.match(asked[i].url, PAGE_URL);
  }
  assert.ok(!fs.existsSync(path.join(home, 'secrets', NAME)), 'nothing stored');
  assert.deepEqual(k.wire.filter((m) => m.method === 'notifications/elicitation/complete'), [], 'no complete for a page not used');
});

test('modern: a retry whose inputResponses decline the page is a tool error that says how to set the secret, not another page', async (t) => {
  const { home, args } = freshKiln(t);
  const asked = [];
  const k = await connectModern({
    args, home, capabilities: { elicitation: { url: {} } },
    onElicit(params) { asked.push(params); return { action: 'decline' }; },
  });
  t.after(() => k.close());
  const r = await k.call('sandbox_exec', { command: 'true', secrets: [NAME] }).catch((e) => e);
  const calls = toolCalls(k.transport);
  assert.ok(!(r instanceof Error),
    `the declined retry got another input_required each time (${calls.length} tools/call, ${asked.length} pages): ${r.message}`);
  assert.equal(r.isError, true, JSON.stringify(r));
  assert.match(errorText(r), new RegExp(`kiln secret set ${NAME}`));
  assert.equal(asked.length, 1, 'a declined page is not asked again');
  assert.ok(!fs.existsSync(path.join(home, 'secrets', NAME)), 'nothing stored');
});

test('a client without URL elicitation gets the ordinary error naming `kiln secret set`, and no page is requested', async (t) => {
  const { home, args } = freshKiln(t);
  // Legacy, elicitation declared for forms only.
  const legacy = await connectClient({ args, home, env: SERVE_ENV, capabilities: { elicitation: { form: {} } } });
  t.after(() => legacy.close());
  let asked = 0;
  legacy.client.setRequestHandler(ElicitRequestSchema, async () => { asked++; return { action: 'cancel' }; });
  const r = await legacy.client.callTool({ name: 'sandbox_exec', arguments: { command: 'true', secrets: [NAME] } }, undefined, { timeout: 60000 });
  assert.equal(r.isError, true, JSON.stringify(r));
  assert.match(errorText(r), new RegExp(`kiln secret set ${NAME}`));
  assert.equal(asked, 0);
  assert.deepEqual(legacy.wire.filter((m) => m.method === 'elicitation/create'), []);
  await legacy.close();

  // Modern, no elicitation at all: a complete error result, no input_required.
  const modern = await connectModern({ args, home, capabilities: {} });
  t.after(() => modern.close());
  const m = await modern.call('sandbox_exec', { command: 'true', secrets: [NAME] });
  assert.equal(m.isError, true, JSON.stringify(m));
  assert.match(errorText(m), new RegExp(`kiln secret set ${NAME}`));
  const calls = toolCalls(modern.transport);
  assert.equal(calls.length, 1);
  assert.equal(calls[0].res.result.resultType, 'complete');

  assert.equal(readServeInfo(home), undefined, 'no kiln serve was started: no page was requested');
});

test('sandbox_create asks too; a secret the environment or the store already has is not asked for', async (t) => {
  const { home, args } = freshKiln(t);
  const stored = secretValue();
  const set = spawnSync(kilnBin(), ['secret', 'set', NAME, '--state-dir', home], { input: stored.value, env: kilnEnv(home), encoding: 'utf8' });
  assert.equal(set.status, 0, set.stderr);
  const fromEnv = `kiln-elicit-env-${crypto.randomBytes(8).toString('hex')}`;
  const k = await connectClient({ args, home, env: { ...SERVE_ENV, KILN_T_ENV: fromEnv }, capabilities: { elicitation: { url: {} } } });
  t.after(() => k.close());
  const asked = [];
  k.client.setRequestHandler(ElicitRequestSchema, async (req) => { asked.push(req.params); return { action: 'decline' }; });
  const call = (name, a) => k.client.callTool({ name, arguments: a }, undefined, { timeout: 60000 });

  const created = await call('sandbox_create', { secrets: ['KILN_T_MISSING'] });
  assert.equal(created.isError, true, JSON.stringify(created));
  assert.match(errorText(created), /kiln secret set KILN_T_MISSING/);
  assert.equal(asked.length, 1, 'sandbox_create asked for the missing secret');
  assert.match(asked[0].message, /KILN_T_MISSING/);

  if (sandboxOrSkip(t, sandboxWhy)) return;
  const r = await call('sandbox_exec', {
    command: `${stored.command} && test "$KILN_T_ENV" = ${fromEnv} && echo env`, secrets: [NAME, 'KILN_T_ENV'],
  });
  assert.ok(!r.isError, errorText(r));
  assert.equal(r.structuredContent.stdout, 'match\nenv\n');
  assert.equal(asked.length, 1, 'nothing more was asked');
});

// A modern request's _meta envelope.
function envelope(capabilities) {
  return {
    'io.modelcontextprotocol/protocolVersion': MODERN,
    'io.modelcontextprotocol/clientInfo': { name: 'kiln-elicit-raw', version: '0' },
    'io.modelcontextprotocol/clientCapabilities': capabilities,
  };
}

test('modern verify with a kiln.json secret it lacks: input_required before any task or run starts; the retry runs once it is stored', async (t) => {
  const { home, ws, args } = freshKiln(t);
  const VNAME = 'KILN_T_VERIFY';
  fs.writeFileSync(path.join(ws, 'kiln.json'), JSON.stringify({
    sandbox: { secrets: [VNAME] },
    verify: [{ name: 'marker', run: `touch ran-marker && test -n "$${VNAME}"` }],
  }));
  // URL elicitation and the tasks extension: verify would run as a task, but asks first.
  const caps = { elicitation: { url: {} }, extensions: { 'io.modelcontextprotocol/tasks': {} } };
  const s = new RawServer({ args, home, env: SERVE_ENV });
  t.after(() => s.close());
  let id = 0;
  const rpc = async (method, params) => {
    const r = await s.request(++id, method, { ...params, _meta: envelope(caps) }, 60000);
    assert.ok(r.result, `${method}: ${JSON.stringify(r)}`);
    return r.result;
  };

  const first = await rpc('tools/call', { name: 'verify', arguments: {} });
  assert.equal(first.resultType, 'input_required', JSON.stringify(first));
  assert.equal(first.taskId, undefined, 'no task was started');
  assert.deepEqual(Object.keys(first.inputRequests), [`kiln_secret_${VNAME}`]);
  const ask = first.inputRequests[`kiln_secret_${VNAME}`];
  assert.equal(ask.method, 'elicitation/create');
  assert.equal(ask.params.mode, 'url');
  assert.match(ask.params.message, new RegExp(`kiln secret set ${VNAME}`));
  assertPageOfOwnServe(home, ask.params.url);
  assert.ok(!fs.existsSync(path.join(ws, 'ran-marker')), 'no check ran');
  const traces = await rpc('tools/call', { name: 'trace_list', arguments: {} });
  assert.ok(!traces.isError, JSON.stringify(traces));
  assert.deepEqual(traces.structuredContent.traces, [], 'no verify trace was started');
  assert.deepEqual(s.all.filter((m) => 'method' in m), [], 'no server-to-client message on a modern stdio');

  // The person stores the value on the page (a plain form post, as the browser sends it).
  if (sandboxOrSkip(t, sandboxWhy)) return;
  const page = new URL(ask.params.url);
  const value = `kiln-elicit-verify-${crypto.randomBytes(12).toString('hex')}`;
  const posted = await request(page.origin, page.pathname, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Origin: page.origin },
    body: new URLSearchParams({ value }).toString(),
  });
  assert.equal(posted.status, 200, posted.text);

  const task = await rpc('tools/call', {
    name: 'verify', arguments: {}, inputResponses: { [`kiln_secret_${VNAME}`]: { action: 'accept' } },
  });
  assert.equal(task.resultType, 'task', JSON.stringify(task));
  let got;
  for (const deadline = Date.now() + 120000; ;) {
    got = await rpc('tasks/get', { taskId: task.taskId });
    if (got.status !== 'working' || Date.now() > deadline) break;
    await sleep(Math.min(task.pollIntervalMs ?? 200, 1000));
  }
  assert.equal(got.status, 'completed', JSON.stringify(got));
  assert.equal(got.result.structuredContent.status, 'pass', JSON.stringify(got.result));
  assert.ok(fs.existsSync(path.join(ws, 'ran-marker')), 'the check ran');
  assert.ok(!JSON.stringify(s.all).includes(value) && !s.stderr.includes(value), 'the value never crossed the wire');
});
