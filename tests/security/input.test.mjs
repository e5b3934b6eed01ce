// Issue 14: hostile input to the server itself rather than to a sandbox. Case 34 of
// shared/SANDBOX_CASES.md (file tools on a huge sparse file, a growing file, a FIFO: bounded and
// cancellable, and one client's slow calls never starve its others), huge arguments in error
// messages, duplicate JSON keys, secrets stored through arguments, and a session sandbox's env.
// No timing is asserted: the bounds below only say how long a failure may take to show, and are
// far beyond what the fixed server needs and far below what the old one took.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { RawServer } from '../lib/kiln.mjs';
import { mcpFetch, rawSession, startServe } from '../lib/mcp_http.mjs';
import {
  callTool, errorText, exec, ok, rand, requireSandboxTools, sleep, startKiln, tempDir, waitFor, withSandbox,
} from './lib.mjs';

const GiB = 1024 ** 3;
const BOUND = 60000;  // per call; the old server took ~57 s for ONE read of a 10 GB file
const sha = (s) => crypto.createHash('sha256').update(s).digest('hex');

function sparse(file, size) {
  const fd = fs.openSync(file, 'w');
  fs.ftruncateSync(fd, size);
  fs.closeSync(fd);
}

// utime + stime of a process, in seconds (fields 14 and 15 of /proc/PID/stat, in clock ticks).
function cpuSeconds(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

// Every file of the state dir (but the secret store) that contains `needle`.
function stateFilesWith(k, needle) {
  const found = [];
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile() && !p.startsWith(path.join(k.kilnHome, 'secrets')) && fs.readFileSync(p).includes(needle)) {
        found.push(p);
      }
    }
  };
  walk(k.kilnHome);
  return found;
}

describe('case 34: file tools on huge, growing and special files', () => {
  test('eight parallel reads of a 10 GB sparse file and a small read all complete', async () => {
    const k = await startKiln();
    try {
      sparse(path.join(k.ws, 'huge.bin'), 10 * GiB);
      fs.writeFileSync(path.join(k.ws, 'small.txt'), 'small\n');
      const huge = Array.from({ length: 8 }, (_, i) => callTool(k, 'file_read',
        { path: 'huge.bin', encoding: 'base64', offset: (i + 1) * GiB, limit: 10 }, { timeout: BOUND }));
      const small = callTool(k, 'file_read', { path: 'small.txt' }, { timeout: BOUND });
      const results = await Promise.all([...huge, small]);
      for (const r of results.slice(0, 8)) {
        const s = ok(r, 'file_read huge.bin');
        assert.equal(Buffer.from(s.content, 'base64').toString('hex'), '00'.repeat(10));
        assert.equal(s.size, 10 * GiB);
        assert.equal(s.sha256, undefined, 'a sha256 of 10 GB means the whole file was hashed');
        assert.match(s.note ?? '', /base64/, 'the note says why sha256/total_lines are absent');
      }
      assert.equal(ok(results[8], 'file_read small.txt').content, 'small\n');
      // Text mode refuses the NULs at once; a hash guard on it is refused rather than computed.
      const text = await callTool(k, 'file_read', { path: 'huge.bin' }, { timeout: BOUND });
      assert.equal(text.isError, true);
      assert.match(errorText(text), /base64/);
      const w = await callTool(k, 'file_write', { path: 'huge.bin', content: 'x', if_sha256: '0'.repeat(64) }, { timeout: BOUND });
      assert.equal(w.isError, true);
      assert.match(errorText(w), /if_sha256/);
      assert.equal(fs.statSync(path.join(k.ws, 'huge.bin')).size, 10 * GiB, 'the guarded write must not happen');
    } finally {
      await k.close();
    }
  });

  test('cancelled huge reads stop burning CPU', async () => {
    const k = await startKiln();
    try {
      sparse(path.join(k.ws, 'huge.bin'), 10 * GiB);
      const ac = new AbortController();
      const calls = Array.from({ length: 4 }, () => callTool(k, 'file_read',
        { path: 'huge.bin', encoding: 'base64', offset: 0, limit: 16 }, { timeout: BOUND, signal: ac.signal })
        .catch((e) => e));
      await sleep(300);
      ac.abort();
      await Promise.all(calls);
      await sleep(500);
      const t0 = cpuSeconds(k.pid);
      await sleep(2000);
      const burnt = cpuSeconds(k.pid) - t0;
      assert.ok(burnt < 0.5, `the server used ${burnt.toFixed(2)} s of CPU in the 2 s after the reads were cancelled`);
      // And it still answers.
      fs.writeFileSync(path.join(k.ws, 'after.txt'), 'ok\n');
      assert.equal(ok(await callTool(k, 'file_read', { path: 'after.txt' }, { timeout: 10000 }), 'file_read').content, 'ok\n');
    } finally {
      await k.close();
    }
  });

  test('a file that keeps growing is read only up to its size at the start of the call', async () => {
    const k = await startKiln();
    const file = path.join(k.ws, 'grow.log');
    fs.writeFileSync(file, 'head\n');
    // Grows by 1 GiB of hole every 10 ms (no disk used) for at most 2 minutes.
    const grower = spawn('/usr/bin/python3', ['-c', [
      'import os, sys, time',
      'fd = os.open(sys.argv[1], os.O_WRONLY)',
      'for i in range(1, 12000):',
      '    os.ftruncate(fd, 5 + i * (1 << 30)); time.sleep(0.01)',
    ].join('\n'), file], { stdio: 'ignore' });
    try {
      await waitFor(() => fs.statSync(file).size > 4 * GiB, 10000);
      const b = ok(await callTool(k, 'file_read', { path: 'grow.log', encoding: 'base64', limit: 5 }, { timeout: BOUND }),
        'file_read grow.log base64');
      assert.equal(Buffer.from(b.content, 'base64').toString(), 'head\n');
      assert.ok(b.size <= fs.statSync(file).size);
      const t = await callTool(k, 'file_read', { path: 'grow.log', limit: 1 }, { timeout: BOUND });
      // Either the first line (scanned no further than needed) or "not UTF-8" for the hole's NULs.
      if (!t.isError) assert.equal(t.structuredContent.content, 'head\n');
      const s = ok(await callTool(k, 'file_search', { pattern: 'head', path: 'grow.log' }, { timeout: BOUND }), 'file_search');
      assert.ok(s.files_scanned <= 1);
    } finally {
      grower.kill('SIGKILL');
      await k.close();
    }
  });

  test('a FIFO is refused by every file tool without blocking', async () => {
    const k = await startKiln();
    try {
      const { execFileSync } = await import('node:child_process');
      execFileSync('mkfifo', [path.join(k.ws, 'pipe')]);
      for (const [tool, args] of [
        ['file_read', { path: 'pipe' }],
        ['file_read', { path: 'pipe', encoding: 'base64' }],
        ['file_write', { path: 'pipe', content: 'x', if_sha256: '0'.repeat(64) }],
        ['file_edit', { path: 'pipe', edits: [{ old_text: 'a', new_text: 'b' }] }],
      ]) {
        const r = await callTool(k, tool, args, { timeout: 20000 });
        assert.equal(r.isError, true, `${tool} on a FIFO`);
        assert.match(errorText(r), /not a regular file/, `${tool}: ${errorText(r)}`);
      }
      const s = ok(await callTool(k, 'file_search', { pattern: 'x', path: 'pipe' }, { timeout: 20000 }), 'file_search');
      assert.equal(s.matches.length, 0);
    } finally {
      await k.close();
    }
  });

  test("one client's slow calls do not hold up its quick ones", async () => {
    const k = await startKiln();
    requireSandboxTools(k);
    try {
      fs.writeFileSync(path.join(k.ws, 'quick.txt'), 'quick\n');
      await withSandbox(k, {}, async (id) => {
        const ac = new AbortController();
        let slowDone = 0;
        // More slow calls than the old pool had workers (8).
        const slow = Array.from({ length: 10 }, () => callTool(k, 'sandbox_exec',
          { sandbox_id: id, command: 'sleep 40' }, { timeout: 120000, signal: ac.signal })
          .catch((e) => e).finally(() => { slowDone += 1; }));
        await sleep(2000);  // lets them all start; not an assertion
        const quick = await callTool(k, 'file_read', { path: 'quick.txt' }, { timeout: 120000 });
        const doneBefore = slowDone;
        ac.abort();
        await Promise.all(slow);
        assert.equal(ok(quick, 'file_read').content, 'quick\n');
        assert.equal(doneBefore, 0, 'the quick read was answered only after a slow call had ended');
      });
    } finally {
      await k.close();
    }
  });
});

describe('huge arguments in error messages', () => {
  let k;
  before(async () => { k = await startKiln(); requireSandboxTools(k); });
  after(() => k?.close());
  const HUGE = 'p'.repeat(10 * 1024 * 1024);
  const LIMIT = 64 * 1024;  // far below the 1 MiB contract; a quoted argument is 200 bytes

  test('a 10 MiB path, cwd, workspace path or tool name gives a small error', async () => {
    for (const [tool, args] of [
      ['file_read', { path: HUGE }],
      ['file_write', { path: `${HUGE}/x`, content: 'x' }],
      ['file_list', { path: HUGE }],
      ['workspace_open', { path: `/${HUGE}` }],
      ['sandbox_exec', { command: 'true', cwd: HUGE }],
      ['sandbox_exec', { command: 'true', sandbox_id: HUGE }],
    ]) {
      const r = await callTool(k, tool, args, { timeout: BOUND });
      assert.equal(r.isError, true, tool);
      const msg = errorText(r);
      assert.ok(msg.length < LIMIT, `${tool}: a ${msg.length}-byte error message`);
      assert.match(msg, /bytes\)/, `${tool}: the quote says how long the argument was: ${msg.slice(0, 300)}`);
    }
    await assert.rejects(k.client.callTool({ name: HUGE, arguments: {} }, undefined, { timeout: BOUND }),
      (e) => e.message.length < LIMIT || assert.fail(`a ${e.message.length}-byte JSON-RPC error`));
  });

  // 100,000 arguments (1.1 MB) do not fit one request to the helper: the error says so and what to
  // do instead (it used to read "stopped answering (its helper is gone)"), in a session sandbox
  // the sandbox keeps working, and a fresh exec right after still runs.
  test('an argv too large for one exec request gives a clear error, and the sandbox stays usable', async () => {
    const argv = ['/bin/echo', ...Array.from({ length: 100000 }, () => 'x'.repeat(10))];
    const fresh = await callTool(k, 'sandbox_exec', { command: argv }, { timeout: BOUND });
    assert.equal(fresh.isError, true, 'a fresh exec of a 1.1 MB argv is refused');
    assert.match(errorText(fresh), /more than one exec request can carry.*write the long part to a file/s, errorText(fresh));
    assert.doesNotMatch(errorText(fresh), /helper is gone/);
    await withSandbox(k, {}, async (id) => {
      const r = await callTool(k, 'sandbox_exec', { command: argv, sandbox_id: id }, { timeout: BOUND });
      assert.equal(r.isError, true);
      assert.match(errorText(r), /more than one exec request can carry/);
      const after = ok(await callTool(k, 'sandbox_exec', { command: ['/bin/echo', 'still here'], sandbox_id: id }), 'exec after');
      assert.equal(after.stdout, 'still here\n');
    });
    const next = ok(await callTool(k, 'sandbox_exec', { command: ['/bin/echo', 'fresh again'] }), 'fresh exec after');
    assert.equal(next.stdout, 'fresh again\n');
  });

  // The command's process starts on a stack of its own (the helper's clone with CLONE_VM), and
  // for a script without "#!" execvpe copies argv onto that stack to run it with /bin/sh: 40,000
  // arguments (320 KB of pointers) must fit, not crash the child.
  test('a script without #! gets all of 40,000 arguments', async () => {
    fs.writeFileSync(path.join(k.ws, 'count.sh'), 'echo "$#"\n', { mode: 0o755 });
    const r = ok(await callTool(k, 'sandbox_exec', { command: ['./count.sh', ...Array(40000).fill('a')] }, { timeout: BOUND }), 'count.sh');
    assert.equal(r.exit_code, 0, r.stderr);
    assert.equal(r.stdout, '40000\n');
  });
});

describe('duplicate JSON keys', () => {
  test('stdio: a repeated tool name is refused, and neither tool runs', async () => {
    const ws = path.join(tempDir('kiln-sec-dup-'), 'ws');
    fs.mkdirSync(ws);
    const raw = new RawServer({ args: ['--workspace', ws] });
    try {
      await raw.initialize();
      const marker = path.join(ws, 'pwned');
      raw.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"file_read","name":"sandbox_exec",`
        + `"arguments":{"command":"touch ${marker}"}}}`);
      const r = await raw.reply(5, 30000);
      assert.ok(r.error, `a result came back: ${JSON.stringify(r).slice(0, 300)}`);
      assert.ok([-32600, -32700].includes(r.error.code), JSON.stringify(r.error));
      assert.match(r.error.message, /duplicate/i);
      assert.ok(!fs.existsSync(marker), 'sandbox_exec ran');
      // A message with one key twice in a nested object, and a repeated id, the same.
      raw.send('{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"file_list","arguments":{"path":".","path":".."}}}');
      assert.ok((await raw.reply(6, 30000)).error);
      raw.send('{"jsonrpc":"2.0","id":7,"id":8,"method":"ping"}');
      const dupId = await raw.next({ timeoutMs: 30000, pred: (m) => m.error && m.id === null });
      assert.ok(dupId.error);
      // Control: the same request without the duplicate works.
      assert.ok((await raw.request(9, 'ping', {}, 30000)).result);
    } finally {
      raw.kill();
    }
  });

  test('HTTP: a repeated method is refused with 400', async () => {
    const srv = await startServe();
    try {
      const { session } = await rawSession(srv.url);
      const r = await mcpFetch(srv.url, { body: '{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/list"}', session });
      const text = await r.text();
      assert.equal(r.status, 400, text.slice(0, 300));
      const err = JSON.parse(text).error;
      assert.ok([-32600, -32700].includes(err.code), text);
      assert.match(err.message, /duplicate/i);
    } finally {
      await srv.stop();
    }
  });
});

describe('secrets in arguments that Kiln stores', () => {
  const TOKEN = `tok-${rand()}${rand()}`;
  let k;
  // A fresh server, so the first use of the secret is in these tests (a trace is written before
  // the sandbox that resolves the secret is built).
  before(async () => {
    k = await startKiln({ args: ['--log-level', 'debug'], env: { KILNSEC_ARGTOKEN: TOKEN } });
    requireSandboxTools(k);
  });
  after(() => k?.close());

  test('a secret value as cwd, in the command or in env is redacted in traces and the state dir', async () => {
    const secrets = ['KILNSEC_ARGTOKEN'];
    const wireStart = k.wire.length;
    const cwdRun = await callTool(k, 'sandbox_exec', { command: 'pwd', cwd: `sub/${TOKEN}`, secrets });
    const cmdRun = await exec(k, `echo ${TOKEN} >/dev/null; echo done`, { secrets, env: { EXTRA: TOKEN }, stdin: TOKEN });
    assert.match(cmdRun.stdout, /done/);
    await withSandbox(k, { secrets }, async (id) => {
      await callTool(k, 'sandbox_exec', { sandbox_id: id, command: 'true', cwd: `d/${TOKEN}` });
    });
    for (const r of [cwdRun, cmdRun.raw]) assert.ok(!JSON.stringify(r).includes(TOKEN), 'a result shows the value');
    const list = ok(await callTool(k, 'trace_list', { kind: 'exec', limit: 100 }), 'trace_list');
    const ids = (list.traces ?? []).map((t) => t.id ?? t.trace_id);
    assert.ok(ids.length >= 3, `expected the three runs' traces: ${JSON.stringify(list).slice(0, 500)}`);
    for (const id of ids) {
      const tr = ok(await callTool(k, 'trace_get', { trace_id: id }), 'trace_get');
      assert.ok(!JSON.stringify(tr).includes(TOKEN), `trace ${id} holds the secret value: ${JSON.stringify(tr).slice(0, 600)}`);
    }
    assert.ok(!JSON.stringify(k.wire.slice(wireStart)).includes(TOKEN), 'a message the server sent holds the value');
    assert.ok(!k.stderr.includes(TOKEN), 'the server log holds the value');
    assert.deepEqual(stateFilesWith(k, TOKEN), [], 'files of the state dir hold the value');
  });
});

describe('session sandboxes keep what they were created with', () => {
  const TOKEN = `tok-${rand()}`;
  let k;
  before(async () => { k = await startKiln({ env: { KILNSEC_SBTOKEN: TOKEN } }); requireSandboxTools(k); });
  after(() => k?.close());

  test('env and secrets of sandbox_create reach every exec in it', async () => {
    await withSandbox(k, { env: { FOO_BAR: 'v1' }, secrets: ['KILNSEC_SBTOKEN'] }, async (id) => {
      const r = await exec(k, 'echo "[$FOO_BAR]"; printf %s "$KILNSEC_SBTOKEN" | sha256sum', { sandbox_id: id });
      assert.match(r.stdout, /^\[v1\]$/m, `the sandbox's env is lost: ${r.out}`);
      assert.match(r.stdout, new RegExp(sha(TOKEN)), `the sandbox's secret is lost: ${r.out}`);
      const again = await exec(k, 'echo "[$FOO_BAR]"', { sandbox_id: id });
      assert.match(again.stdout, /^\[v1\]$/m, 'a second exec lost it');
      const per = await exec(k, 'echo "[$FOO_BAR]"', { sandbox_id: id, env: { FOO_BAR: 'v2' } });
      assert.match(per.stdout, /^\[v2\]$/m, "an exec's own env wins for that exec");
      const back = await exec(k, 'echo "[$FOO_BAR]"', { sandbox_id: id });
      assert.match(back.stdout, /^\[v1\]$/m, "an exec's own env does not stick");
    });
  });
});
