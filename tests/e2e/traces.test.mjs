// Traces through MCP with the official SDK client (issue 4): the record of every kind of ending
// (exit, failure, timeout, cancel, kill, limits, interrupted), trace_get tails, trace_output paging
// and grep, trace_list order/filters/cursors, durability across a restart, secret redaction down to
// the bytes on disk, the kiln://trace/{id} resource with subscriptions, and workspace_info counts.
// Every test runs its own `kiln mcp --workspace WS --state-dir STATE` on fresh temp folders.
// When the sandbox cannot run on this machine, the tests that need it are skipped with the reason
// (failed with it under KILN_REQUIRE_SANDBOX=1).
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

import { errorText, kilnBin, kilnEnv, sleep, structured, TapTransport } from '../lib/kiln.mjs';
import { hostProcs, probeSandbox, uniqueSleep } from '../lib/sandbox_probe.mjs';

const CLIENT_INFO = { name: 'kiln-traces-e2e', version: '4.2.1' };
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

function freshDir(prefix) {
  return fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), prefix)));
}

// Starts `kiln mcp --workspace ws --state-dir state` (fresh temp folders unless given). The
// folders this call made are removed after the test; servers are closed first.
async function startKiln(t, { ws, state, env = {} } = {}) {
  const made = [];
  if (!ws) made.push((ws = freshDir('kiln-tr-ws-')));
  if (!state) made.push((state = freshDir('kiln-tr-state-')));
  const inner = new StdioClientTransport({
    command: kilnBin(),
    args: ['mcp', '--workspace', ws, '--state-dir', state],
    env: kilnEnv(state, env),
    stderr: 'pipe',
  });
  let stderr = '';
  inner.stderr?.on('data', (c) => { stderr += c.toString(); });
  const transport = new TapTransport(inner);
  const client = new Client(CLIENT_INFO, { capabilities: {} });
  await client.connect(transport);
  let closed = false;
  const k = {
    client, transport, ws, state,
    get stderr() { return stderr; },
    get pid() { return transport.pid; },
    call: (name, args, opts) => client.callTool({ name, arguments: args }, undefined, { timeout: 60000, ...opts }),
    async ok(name, args, opts) { return structured(await k.call(name, args, opts)); },
    async close() {
      if (closed) return;
      closed = true;
      await client.close().catch(() => {});
    },
  };
  t.after(async () => {
    await k.close();
    for (const d of made) fs.rmSync(d, { recursive: true, force: true });
  });
  return k;
}

// Can the sandbox run here? If not, each sandbox test is skipped with kiln's reason, or fails
// with it under KILN_REQUIRE_SANDBOX=1 (tests/lib/sandbox_probe.mjs).
let sandboxTest;
{
  const ws = freshDir('kiln-tr-probe-ws-');
  const state = freshDir('kiln-tr-probe-state-');
  const probeT = { after: () => {} };
  const k = await startKiln(probeT, { ws, state });
  ({ test: sandboxTest } = await probeSandbox('traces e2e', k.call));
  await k.close();
  fs.rmSync(ws, { recursive: true, force: true });
  fs.rmSync(state, { recursive: true, force: true });
}

const getTrace = async (k, id) => (await k.ok('trace_get', { trace_id: id })).trace;

// Polls trace_get until the trace is no longer running (at most `ms`).
async function settled(k, id, ms = 10000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const tr = await getTrace(k, id);
    if (tr.status !== 'running' || Date.now() > deadline) return tr;
    await sleep(100);
  }
}

// The whole of one stream, following next_offset until eof.
async function readStream(k, id, stream, limit = 65536) {
  let data = '';
  let offset = 0;
  const pages = [];
  for (let i = 0; i < 1000; i++) {
    const p = await k.ok('trace_output', { trace_id: id, stream, offset, limit });
    assert.equal(p.offset, offset);
    pages.push(p);
    data += p.data ?? '';
    if (p.eof) break;
    assert.ok(p.next_offset > offset, `next_offset moves on (${offset} -> ${p.next_offset})`);
    offset = p.next_offset;
  }
  return { data, pages };
}

sandboxTest('trace of a successful exec: status, stop reason, sizes, resources, policy, client, times', async (t) => {
  const k = await startKiln(t);
  const r = await k.ok('sandbox_exec', { command: 'echo hello; echo oops >&2', env: { E2E_MODE: 'x' } });
  assert.equal(r.exit_code, 0);
  assert.match(r.trace_id, /^tr_[0-9a-f]+$/);
  assert.equal(r.trace_uri, `kiln://trace/${r.trace_id}`);
  const g = await k.ok('trace_get', { trace_id: r.trace_id });
  assert.equal(g.uri, r.trace_uri);
  const tr = g.trace;
  assert.equal(tr.id, r.trace_id);
  assert.equal(tr.kind, 'exec');
  assert.equal(tr.status, 'pass');
  assert.equal(tr.stop_reason, 'exit');
  assert.equal(tr.exit_code, 0);
  assert.equal(tr.signal, null);
  assert.equal(tr.parent_id, null);
  assert.equal(tr.command, 'echo hello; echo oops >&2');
  assert.equal(tr.cwd, k.ws);
  assert.equal(tr.output.stdout_bytes, 'hello\n'.length);
  assert.equal(tr.output.stderr_bytes, 'oops\n'.length);
  assert.equal(typeof tr.resources.user_ms, 'number');
  assert.equal(typeof tr.resources.sys_ms, 'number');
  assert.equal(tr.policy.network, 'none');
  assert.equal(typeof tr.policy.limits, 'object');
  assert.equal(tr.policy.limits.wall_s, 600);
  assert.ok(Array.isArray(tr.policy.env_names));
  assert.deepEqual(tr.policy.secret_names, []);
  assert.deepEqual(tr.client, CLIENT_INFO, 'who ran it: the clientInfo sent in initialize');
  assert.match(tr.started_at, ISO);
  assert.match(tr.ended_at, ISO);
  assert.ok(Date.parse(tr.ended_at) >= Date.parse(tr.started_at));
  assert.equal(typeof tr.duration_ms, 'number');
  assert.ok(tr.duration_ms >= 0);
  // The names of the environment the command got (the exec's `env`) are part of the policy.
  assert.ok(tr.policy.env_names.includes('E2E_MODE'), `env_names: ${JSON.stringify(tr.policy.env_names)}`);
});

sandboxTest('trace of a failing exec: status fail, exit_code 3', async (t) => {
  const k = await startKiln(t);
  const r = await k.call('sandbox_exec', { command: 'echo before; exit 3' });
  assert.equal(r.isError, false, 'a non-zero exit is data');
  const tr = await getTrace(k, r.structuredContent.trace_id);
  assert.equal(tr.status, 'fail');
  assert.equal(tr.stop_reason, 'exit');
  assert.equal(tr.exit_code, 3);
});

sandboxTest('trace of a timeout: stop_reason timeout, status fail', async (t) => {
  const k = await startKiln(t);
  const r = await k.ok('sandbox_exec', { command: 'sleep 30', timeout_s: 1 });
  assert.equal(r.stop_reason, 'timeout');
  const tr = await getTrace(k, r.trace_id);
  assert.equal(tr.status, 'fail');
  assert.equal(tr.stop_reason, 'timeout');
  assert.equal(tr.exit_code, null);
});

sandboxTest('trace of a cancelled exec: stop_reason cancelled', async (t) => {
  const k = await startKiln(t);
  const marker = uniqueSleep();
  const ac = new AbortController();
  const p = k.call('sandbox_exec', { command: `sleep ${marker}` }, { signal: ac.signal });
  for (let i = 0; i < 100 && hostProcs(marker).length === 0; i++) await sleep(50);
  assert.ok(hostProcs(marker).length > 0, 'the command is running');
  const running = (await k.ok('trace_list', { kind: 'exec', status: 'running' })).traces.find((x) => x.command === `sleep ${marker}`);
  assert.ok(running, 'the exec shows up as a running trace');
  ac.abort('the test cancels');
  await assert.rejects(p);
  const tr = await settled(k, running.trace_id);
  assert.equal(tr.stop_reason, 'cancelled');
  assert.equal(tr.status, 'fail');
  for (let i = 0; i < 40 && hostProcs(marker).length; i++) await sleep(50);
  assert.deepEqual(hostProcs(marker), [], 'the command is gone');
  assert.equal((await k.ok('sandbox_exec', { command: 'echo alive' })).stdout, 'alive\n', 'the server goes on');
});

// TOOLS.md: a cancelled call's trace records stop_reason "cancelled"; that holds also when the
// cancel arrives while the sandbox is still being set up, or even before the call started (the tool
// still runs far enough to record it).
sandboxTest('trace of an exec cancelled at once (during sandbox setup): stop_reason cancelled', async (t) => {
  const k = await startKiln(t);
  let tr;
  for (let attempt = 0; attempt < 3 && !tr; attempt++) {
    const marker = uniqueSleep();
    const ac = new AbortController();
    const p = k.call('sandbox_exec', { command: `sleep ${marker}` }, { signal: ac.signal });
    ac.abort('the test cancels at once');
    await assert.rejects(p);
    let found;
    for (let i = 0; i < 20 && !found; i++) {
      found = (await k.ok('trace_list', { kind: 'exec' })).traces.find((x) => x.command === `sleep ${marker}`);
      if (!found) await sleep(50);
    }
    if (found) tr = await settled(k, found.trace_id);
  }
  assert.ok(tr, 'a cancelled exec left a trace');
  assert.equal(tr.stop_reason, 'cancelled', `status ${tr.status}, error ${JSON.stringify(tr.error)}`);
  assert.equal(tr.status, 'fail');
});

sandboxTest('trace of limits: output_bytes -> output_limit, cpu_s -> cpu_limit', async (t) => {
  const k = await startKiln(t);
  const o = await k.ok('sandbox_exec', { command: 'yes kiln', limits: { output_bytes: 50000 } });
  assert.equal(o.stop_reason, 'output_limit');
  const ot = await getTrace(k, o.trace_id);
  assert.equal(ot.stop_reason, 'output_limit');
  assert.equal(ot.status, 'fail');
  assert.equal(ot.policy.limits.output_bytes, 50000);
  const c = await k.ok('sandbox_exec', { command: 'while :; do :; done', limits: { cpu_s: 1 }, timeout_s: 30 });
  assert.equal(c.stop_reason, 'cpu_limit');
  const ct = await getTrace(k, c.trace_id);
  assert.equal(ct.stop_reason, 'cpu_limit');
  assert.equal(ct.status, 'fail');
  assert.equal(ct.policy.limits.cpu_s, 1);
});

sandboxTest('trace_get tails and how_to_page; trace_output pages, tails and greps', async (t) => {
  const k = await startKiln(t);
  const N = 52000; // `seq 1 52000` is 300894 bytes
  const expected = `${Array.from({ length: N }, (_, i) => i + 1).join('\n')}\n`;
  assert.ok(expected.length > 300 * 1000);
  const r = await k.ok('sandbox_exec', { command: `seq 1 ${N}; echo to-stderr >&2` });
  const g = await k.ok('trace_get', { trace_id: r.trace_id });
  assert.equal(typeof g.stdout_tail, 'string');
  assert.ok(g.stdout_tail.length > 0 && g.stdout_tail.length <= 4096, `stdout_tail is a tail (${g.stdout_tail.length} bytes)`);
  assert.ok(expected.endsWith(g.stdout_tail), 'stdout_tail is the end of stdout');
  assert.equal(g.stderr_tail, 'to-stderr\n');
  assert.match(g.how_to_page, /trace_output/);
  assert.ok(g.how_to_page.includes(r.trace_id));

  const { data, pages } = await readStream(k, r.trace_id, 'stdout', 65536);
  assert.equal(data.length, expected.length);
  assert.ok(data === expected, 'the pages put together are exactly the output');
  assert.ok(pages.length >= 5, `paged (${pages.length} pages)`);
  for (const p of pages) {
    assert.ok(Buffer.byteLength(p.data) <= 65536);
    assert.equal(p.total_bytes, expected.length);
  }
  assert.equal(pages.at(-1).eof, true);
  assert.ok(pages.slice(0, -1).every((p) => p.eof === false));
  assert.equal((await readStream(k, r.trace_id, 'stderr')).data, 'to-stderr\n');

  const tail = await k.ok('trace_output', { trace_id: r.trace_id, offset: -4096 });
  assert.equal(tail.data, expected.slice(-4096));
  assert.equal(tail.offset, expected.length - 4096);
  assert.equal(tail.eof, true);

  const m = await k.ok('trace_output', { trace_id: r.trace_id, grep: '^4999[0-9]$' });
  assert.deepEqual(m.matches.map((x) => x.text), Array.from({ length: 10 }, (_, i) => String(49990 + i)));
  assert.deepEqual(m.matches.map((x) => x.line_number), Array.from({ length: 10 }, (_, i) => 49990 + i), '1-based line numbers');
  for (const x of m.matches) assert.equal(x.offset, expected.indexOf(`\n${x.text}\n`) + 1);
  const one = await k.ok('trace_output', { trace_id: r.trace_id, grep: '^1$' });
  assert.deepEqual(one.matches.map((x) => [x.line_number, x.text]), [[1, '1']]);

  const bad = await k.call('trace_output', { trace_id: r.trace_id, grep: '(unclosed' });
  assert.equal(bad.isError, true);
  assert.match(errorText(bad), /grep|pattern|regular expression/i);
  assert.match(errorText(bad), /parenthes/i, `names the problem: ${errorText(bad)}`);
});

sandboxTest('trace_list: newest first, kind/status filters, cursor paging, bad cursor', async (t) => {
  const k = await startKiln(t);
  fs.writeFileSync(path.join(k.ws, 'kiln.json'), JSON.stringify({ verify: [{ name: 'v', run: 'true' }] }));
  const ids = [];
  for (let i = 0; i < 5; i++) ids.push((await k.ok('sandbox_exec', { command: `echo run${i}; exit ${i % 2}` })).trace_id);
  const v = await k.ok('verify', {});
  const all = await k.ok('trace_list', {});
  assert.deepEqual(all.traces.map((x) => x.trace_id), [v.trace_id, ...ids.slice().reverse()], 'newest first, steps left out');
  assert.equal(all.next_cursor, '');
  for (let i = 1; i < all.traces.length; i++) {
    assert.ok(Date.parse(all.traces[i - 1].started_at) >= Date.parse(all.traces[i].started_at));
  }
  const execs = await k.ok('trace_list', { kind: 'exec' });
  assert.deepEqual(execs.traces.map((x) => x.trace_id), ids.slice().reverse());
  const verifies = await k.ok('trace_list', { kind: 'verify' });
  assert.deepEqual(verifies.traces.map((x) => x.trace_id), [v.trace_id]);
  const failed = await k.ok('trace_list', { status: 'fail' });
  assert.deepEqual(failed.traces.map((x) => x.trace_id), [ids[3], ids[1]]);
  for (const x of failed.traces) assert.equal(x.status, 'fail');
  const passedExec = await k.ok('trace_list', { kind: 'exec', status: 'pass' });
  assert.deepEqual(passedExec.traces.map((x) => x.trace_id), [ids[4], ids[2], ids[0]]);

  const seen = [];
  let cursor;
  let pages = 0;
  for (;;) {
    const page = await k.ok('trace_list', { kind: 'exec', limit: 2, ...(cursor ? { cursor } : {}) });
    pages++;
    assert.ok(page.traces.length <= 2);
    seen.push(...page.traces.map((x) => x.trace_id));
    if (!page.next_cursor) break;
    cursor = page.next_cursor;
    assert.ok(pages < 10, 'paging ends');
  }
  assert.equal(pages, 3);
  assert.deepEqual(seen, ids.slice().reverse(), 'each run exactly once, in order');

  const bad = await k.call('trace_list', { cursor: 'not-a-cursor' });
  assert.equal(bad.isError, true);
  assert.match(errorText(bad), /cursor/);
});

sandboxTest('background exec: running while it runs, pass when it ends, killed -> fail/killed', async (t) => {
  const k = await startKiln(t);
  const bg = await k.ok('sandbox_exec', { command: 'read line; echo "got $line"', background: true });
  assert.ok(bg.trace_id);
  const running = await getTrace(k, bg.trace_id);
  assert.equal(running.status, 'running');
  assert.equal(running.ended_at, null);
  const listed = await k.ok('trace_list', { status: 'running' });
  assert.ok(listed.traces.some((x) => x.trace_id === bg.trace_id));
  await k.ok('process_input', { run_id: bg.run_id, data: 'x\n', close: true });
  const done = await settled(k, bg.trace_id);
  assert.equal(done.status, 'pass');
  assert.equal(done.stop_reason, 'exit');
  assert.equal(done.exit_code, 0);
  assert.equal((await k.ok('trace_output', { trace_id: bg.trace_id })).data, 'got x\n');

  const long = await k.ok('sandbox_exec', { command: 'sleep 30', background: true });
  assert.equal((await getTrace(k, long.trace_id)).status, 'running');
  const kill = await k.ok('process_kill', { run_id: long.run_id });
  assert.equal(kill.stop_reason, 'killed');
  const killed = await settled(k, long.trace_id);
  assert.equal(killed.status, 'fail');
  assert.equal(killed.stop_reason, 'killed');
});

sandboxTest('restart: a trace and its output survive the server', async (t) => {
  const state = freshDir('kiln-tr-state-');
  const ws = freshDir('kiln-tr-ws-');
  t.after(() => {
    fs.rmSync(state, { recursive: true, force: true });
    fs.rmSync(ws, { recursive: true, force: true });
  });
  const a = await startKiln(t, { ws, state });
  const r = await a.ok('sandbox_exec', { command: 'seq 1 20000; echo err-line >&2; exit 5' });
  // The fresh sandbox's clean-up report lands in the record just after the result: wait for the
  // complete record before taking the snapshot.
  let before;
  for (let i = 0; i < 50; i++) {
    before = await a.ok('trace_get', { trace_id: r.trace_id });
    if (before.trace.cleanup) break;
    await sleep(50);
  }
  assert.ok(before.trace.cleanup, 'the record gets its clean-up report');
  const outBefore = await readStream(a, r.trace_id, 'stdout');
  const errBefore = await readStream(a, r.trace_id, 'stderr');
  await a.close();

  const b = await startKiln(t, { ws, state });
  const after = await b.ok('trace_get', { trace_id: r.trace_id });
  assert.deepEqual(after, before, 'the same record after a restart');
  assert.equal(after.trace.exit_code, 5);
  assert.equal((await readStream(b, r.trace_id, 'stdout')).data, outBefore.data);
  assert.equal((await readStream(b, r.trace_id, 'stderr')).data, errBefore.data);
  assert.equal(errBefore.data, 'err-line\n');
});

sandboxTest('a run the server died during is interrupted after a restart', async (t) => {
  const state = freshDir('kiln-tr-state-');
  const ws = freshDir('kiln-tr-ws-');
  t.after(() => {
    fs.rmSync(state, { recursive: true, force: true });
    fs.rmSync(ws, { recursive: true, force: true });
  });
  const a = await startKiln(t, { ws, state });
  const bg = await a.ok('sandbox_exec', { command: 'sleep 60', background: true });
  assert.equal((await getTrace(a, bg.trace_id)).status, 'running');
  assert.ok(a.pid > 0, 'the transport knows the server pid');
  process.kill(a.pid, 'SIGKILL');
  for (let i = 0; i < 100; i++) {
    try { process.kill(a.pid, 0); } catch { break; }
    await sleep(50);
  }
  await a.close();

  const b = await startKiln(t, { ws, state });
  const tr = await getTrace(b, bg.trace_id);
  assert.equal(tr.status, 'interrupted');
  assert.equal(tr.stop_reason, 'interrupted');
  const listed = await b.ok('trace_list', { status: 'interrupted' });
  assert.deepEqual(listed.traces.map((x) => x.trace_id), [bg.trace_id]);
});

sandboxTest('a client that closes or stops the server right after a result loses nothing: the run reads as ended, with its changes, after a restart', async (t) => {
  // The end of a sandbox_exec's trace and the checkpoint after it are written just after the
  // answer goes out; a server whose client leaves at once (stdin closed, or SIGTERM) must still
  // write them before it exits. A race, so a few rounds of each.
  const state = freshDir('kiln-tr-state-');
  const ws = freshDir('kiln-tr-ws-');
  t.after(() => {
    fs.rmSync(state, { recursive: true, force: true });
    fs.rmSync(ws, { recursive: true, force: true });
  });
  for (let i = 0; i < 8; i++) {
    const a = await startKiln(t, { ws, state });
    const r = await a.ok('sandbox_exec', { command: `echo ${i} > round-${i}.txt` });
    assert.equal(r.exit_code, 0);
    if (i % 2) process.kill(a.pid, 'SIGTERM');
    await a.close();  // stdin closed at once; the server is waited for (and SIGTERMed after 2 s)
    const b = await startKiln(t, { ws, state });
    const tr = await getTrace(b, r.trace_id);
    assert.equal(tr.status, 'pass', `round ${i}: ${JSON.stringify(tr).slice(0, 300)}`);
    assert.deepEqual(tr.changes?.paths?.map((c) => [c.path, c.change]), [[`round-${i}.txt`, 'added']], `round ${i}: the checkpoint after the run`);
    await b.close();
  }
});

sandboxTest('secrets: the value is in no file of the state dir and no trace answer', async (t) => {
  const SECRET = `e2e-${crypto.randomBytes(12).toString('hex')}`;
  const k = await startKiln(t, { env: { E2E_TOKEN: SECRET } });
  const r = await k.ok('sandbox_exec', { command: 'echo $E2E_TOKEN; echo $E2E_TOKEN >&2', secrets: ['E2E_TOKEN'] });
  assert.equal(r.stdout, '[secret:E2E_TOKEN]\n');
  const answers = [];
  const keep = async (name, args) => {
    const res = await k.call(name, args);
    assert.equal(res.isError, false, errorText(res));
    answers.push(res);
    return res.structuredContent;
  };
  const g = await keep('trace_get', { trace_id: r.trace_id });
  assert.deepEqual(g.trace.policy.secret_names, ['E2E_TOKEN']);
  assert.ok(!g.trace.policy.env_names.includes(SECRET));
  const out = await keep('trace_output', { trace_id: r.trace_id, stream: 'stdout' });
  const err = await keep('trace_output', { trace_id: r.trace_id, stream: 'stderr' });
  assert.ok(out.data.includes('[secret:E2E_TOKEN]'), out.data);
  assert.ok(err.data.includes('[secret:E2E_TOKEN]'), err.data);
  await keep('trace_output', { trace_id: r.trace_id, offset: -10 });
  await keep('trace_output', { trace_id: r.trace_id, grep: 'secret' });
  await keep('trace_list', {});
  for (const a of answers) assert.ok(!JSON.stringify(a).includes(SECRET), `a trace answer holds the value: ${JSON.stringify(a)}`);
  assert.ok(!JSON.stringify(k.transport.received).includes(SECRET), 'no message from the server holds the value');

  const scan = () => {
    const found = [];
    const files = [];
    const walk = (d) => {
      for (const e of fs.readdirSync(d, { withFileTypes: true })) {
        const p = path.join(d, e.name);
        if (e.isDirectory()) walk(p);
        else if (e.isFile()) {
          files.push(path.relative(k.state, p));
          if (fs.readFileSync(p).includes(SECRET)) found.push(p);
        }
      }
    };
    walk(k.state);
    return { found, files };
  };
  const live = scan();
  assert.ok(live.files.includes('traces.db'), `the scan covers the trace database: ${live.files}`);
  assert.ok(live.files.includes('traces.db-wal'), `the scan covers its write-ahead log: ${live.files}`);
  assert.ok(live.files.includes(path.join('traces', r.trace_id, 'stdout')), `the scan covers the output files: ${live.files}`);
  assert.deepEqual(live.found, [], 'files that hold the secret value while the server runs');
  await k.close();
  const closed = scan();
  assert.deepEqual(closed.found, [], 'files that hold the secret value after the server exits');
});

sandboxTest('resources: the trace template, read, and updated on a subscribed run ending', async (t) => {
  const k = await startKiln(t);
  const { resourceTemplates } = await k.client.listResourceTemplates();
  assert.ok(resourceTemplates.some((x) => x.uriTemplate === 'kiln://trace/{id}'), JSON.stringify(resourceTemplates));

  const r = await k.ok('sandbox_exec', { command: 'echo read-me' });
  const read = await k.client.readResource({ uri: r.trace_uri });
  assert.equal(read.contents.length, 1);
  assert.equal(read.contents[0].uri, r.trace_uri);
  assert.equal(read.contents[0].mimeType, 'application/json');
  const doc = JSON.parse(read.contents[0].text);
  assert.equal(doc.trace.id, r.trace_id);
  assert.equal(doc.trace.status, 'pass');

  const updates = [];
  k.client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => { updates.push(n.params.uri); });
  // A run with no output: any update for it is about its ending.
  const bg = await k.ok('sandbox_exec', { command: 'read x; exit 0', background: true });
  await k.client.subscribeResource({ uri: bg.trace_uri });
  assert.equal((await getTrace(k, bg.trace_id)).status, 'running');
  assert.deepEqual(updates.filter((u) => u === bg.trace_uri), []);
  await k.ok('process_input', { run_id: bg.run_id, data: '', close: true });
  const done = await settled(k, bg.trace_id);
  assert.equal(done.status, 'pass');
  for (let i = 0; i < 50 && !updates.includes(bg.trace_uri); i++) await sleep(100);
  assert.ok(updates.includes(bg.trace_uri), `notifications/resources/updated for ${bg.trace_uri} (got ${JSON.stringify(updates)})`);
});

sandboxTest('workspace_info: traces.total grows; last_verify is null until a verify', async (t) => {
  const k = await startKiln(t);
  fs.writeFileSync(path.join(k.ws, 'kiln.json'), JSON.stringify({ verify: [{ name: 'ok', run: 'true' }] }));
  const i0 = await k.ok('workspace_info', {});
  assert.equal(i0.traces.total, 0);
  assert.equal(i0.last_verify, null);
  await k.ok('sandbox_exec', { command: 'true' });
  await k.ok('sandbox_exec', { command: 'false' });
  const i1 = await k.ok('workspace_info', {});
  assert.equal(i1.traces.total, 2);
  assert.equal(i1.last_verify, null);
  const v = await k.ok('verify', {});
  assert.equal(v.status, 'pass');
  const i2 = await k.ok('workspace_info', {});
  assert.ok(i2.traces.total > i1.traces.total, `total grows after a verify (${i1.traces.total} -> ${i2.traces.total})`);
  assert.notEqual(i2.last_verify, null);
  assert.equal(i2.last_verify.status, 'pass');
  assert.equal(i2.last_verify.trace_id, v.trace_id);
});
