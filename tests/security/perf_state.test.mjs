// Issue 21's state caches attacked (cases 21/36 memory, 30 records, 33 clients): kiln.json parse
// results memoized by text, SQLite statements cached per connection, a trace's end written by one
// guarded UPDATE. A workspace that rewrites kiln.json under the server must never get a stale
// policy; several servers on one state directory, and many concurrent runs, must leave every trace
// ended with its own result; a flood of distinct texts and queries must not grow the server.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { callTool, errorText, exec, ok, rand, requireSandboxTools, startKiln, tempDir, vmRssKb } from './lib.mjs';

let k;
before(async () => {
  k = await startKiln();
  requireSandboxTools(k);
});
after(async () => {
  await k?.close();
});

const writeConfig = (ws, obj) => fs.writeFileSync(path.join(ws, 'kiln.json'), typeof obj === 'string' ? obj : JSON.stringify(obj));

test('a kiln.json rewritten between calls is always the one in force (same length, same second, over the memo\'s 64 KiB)', async () => {
  // Two texts of the same length (a cache keyed by size or mtime would mix them up), and a big one
  // (1 MiB less a little: parsed every time, never memoized) with a third value.
  const small = (v) => ({ sandbox: { env: { KILN_RED: v } } });
  const big = (v) => ({ sandbox: { env: { KILN_RED: v } }, verify: Array.from({ length: 3000 }, (_, i) => ({
    name: `pad-${i}`, run: `echo ${'x'.repeat(250)}` })) });
  const seq = ['aaaa', 'bbbb', 'aaaa', 'BIG1', 'bbbb', 'BIG2', 'BIG1', 'aaaa', 'bbbb', 'bbbb', 'aaaa'];
  for (const v of seq) {
    writeConfig(k.ws, v.startsWith('BIG') ? big(v) : small(v));
    const r = await exec(k, 'printf "%s" "$KILN_RED"');
    assert.equal(r.stdout, v, `kiln.json said KILN_RED=${v}, the command saw "${r.stdout}" ${r.stderr}`);
  }
  // Faster, through workspace_info: many rewrites, each answered with the text on disk.
  for (let i = 0; i < 60; i++) {
    const v = i % 3 === 0 ? 'aaaa' : i % 3 === 1 ? 'bbbb' : `c${String(i).padStart(3, '0')}`;
    writeConfig(k.ws, small(v));
    const info = ok(await callTool(k, 'workspace_info', { workspace: k.wsId }), 'workspace_info');
    assert.equal(info.config?.sandbox?.env?.KILN_RED, v, `round ${i}: workspace_info shows ${JSON.stringify(info.config)}`);
  }
  // A broken text in between is reported as broken, not answered with the last good one.
  writeConfig(k.ws, '{"sandbox": {"env": {"KILN_RED": "aaaa"}}');
  const broken = ok(await callTool(k, 'workspace_info', { workspace: k.wsId }), 'workspace_info');
  assert.ok(broken.config_error, `a broken kiln.json was not reported: ${JSON.stringify(broken).slice(0, 300)}`);
  fs.rmSync(path.join(k.ws, 'kiln.json'));
  const none = await exec(k, 'printf "%s" "${KILN_RED-unset}"');
  assert.equal(none.stdout, 'unset', 'a removed kiln.json still set the environment');
});

test('case 21/36: distinct kiln.json texts and distinct trace queries do not grow the server without bound', async () => {
  const ws = path.join(tempDir('kiln-sec-memo-'), 'ws');
  fs.mkdirSync(ws, { recursive: true });
  const opened = ok(await callTool(k, 'workspace_open', { path: ws }), 'workspace_open');
  const text = (n) => {
    const env = { KILN_RED: `v${n}` };
    for (let i = 0; JSON.stringify(env).length < 60 * 1024; i++) env[`P${n}_${i}`] = `${n}-${i}-${'y'.repeat(600)}`;
    return { sandbox: { env } };
  };
  const round = async (from, to) => {
    for (let n = from; n < to; n++) {
      writeConfig(ws, text(n));
      const info = ok(await callTool(k, 'workspace_info', { workspace: opened.id }), 'workspace_info');
      assert.equal(info.config_source, 'kiln.json', `text ${n} not taken: ${info.config_error}`);
    }
    for (let limit = from + 1; limit <= to; limit++) {
      ok(await callTool(k, 'trace_list', { limit }), 'trace_list');
    }
  };
  await round(0, 30);
  const base = vmRssKb(k.pid);
  await round(30, 230);
  const grown = vmRssKb(k.pid) - base;
  console.log(`server RSS ${base} KiB -> +${grown} KiB over 200 distinct texts`);
  assert.ok(base > 0, 'could not read the server\'s RSS');
  assert.ok(grown < 96 * 1024, `the server grew by ${grown} KiB over 200 more distinct kiln.json texts and trace queries`);
});

test('case 30/33: three servers on one state directory, runs at once in each: every trace ends once, with its own exit code and output', { timeout: 300000 }, async () => {
  const home = tempDir('kiln-sec-shared-state-');
  const ws = path.join(tempDir('kiln-sec-shared-ws-'), 'ws');
  fs.mkdirSync(ws, { recursive: true });
  const servers = [];
  try {
    for (let i = 0; i < 3; i++) servers.push(await startKiln({ home, workspace: ws }));
    const expected = [];
    await Promise.all(servers.map(async (s, si) => {
      for (let batch = 0; batch < 3; batch++) {
        await Promise.all([0, 1].map(async (j) => {
          const tag = `RED-${si}-${batch}-${j}-${rand()}`;
          const code = (si * 7 + batch * 2 + j) % 5;
          const r = await callTool(s, 'sandbox_exec', { command: `echo ${tag}; echo ${tag}-err >&2; exit ${code}` });
          assert.ok(!r.isError, `sandbox_exec: ${errorText(r)}`);
          expected.push({ tag, code, trace: r.structuredContent.trace_id, server: s });
        }));
      }
    }));
    assert.equal(expected.length, 18);
    for (const e of expected) {
      // Each trace read through another server than the one that ran it, too.
      for (const s of [e.server, servers[(servers.indexOf(e.server) + 1) % 3]]) {
        const t = ok(await callTool(s, 'trace_get', { trace_id: e.trace }), `trace_get ${e.trace}`);
        const tr = t.trace ?? t;
        assert.equal(tr.status, e.code === 0 ? 'pass' : 'fail', `${e.trace}: ${JSON.stringify(tr).slice(0, 300)}`);
        assert.equal(tr.exit_code, e.code, `${e.trace}: exit_code`);
        const o = ok(await callTool(s, 'trace_output', { trace_id: e.trace, stream: 'stdout', offset: 0 }), 'trace_output');
        assert.equal(o.data, `${e.tag}\n`, `${e.trace}: stdout is another run's`);
        const er = ok(await callTool(s, 'trace_output', { trace_id: e.trace, stream: 'stderr', offset: 0 }), 'trace_output');
        assert.equal(er.data, `${e.tag}-err\n`, `${e.trace}: stderr is another run's`);
      }
    }
    const listed = ok(await callTool(servers[0], 'trace_list', { limit: 100 }), 'trace_list');
    const running = listed.traces.filter((t) => t.status === 'running');
    assert.deepEqual(running, [], 'traces left running');
  } finally {
    await Promise.all(servers.map((s) => s.close()));
  }
});
