// Runs every golden transcript in tests/wire/cases/*.wire against the real `kiln mcp` binary,
// one fresh process and one fresh KILN_HOME per case. The format is described in
// tests/wire/README.md.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { RawServer, sleep, subsetDiff } from '../lib/kiln.mjs';

const casesDir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'cases');

export function parseCase(text, file = '<case>') {
  const c = { title: '', args: [], env: {}, framing: 'ndjson', quietMs: 300, exitMs: 2000, ignore: [], steps: [] };
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i].replace(/\r$/, '');
    const where = `${file}:${i + 1}`;
    if (raw.trim() === '') continue;
    if (raw.startsWith('#')) {
      if (!c.title && !c.steps.length) c.title = raw.replace(/^#+\s*/, '');
      continue;
    }
    const sp = raw.indexOf(' ');
    const op = sp < 0 ? raw : raw.slice(0, sp);
    const rest = sp < 0 ? '' : raw.slice(sp + 1);
    const json = (s) => {
      try { return JSON.parse(s); } catch (e) { throw new Error(`${where}: bad JSON in expectation: ${e.message}`); }
    };
    switch (op) {
      case '@args': c.args.push(...rest.trim().split(/\s+/)); break;
      case '@env': { const eq = rest.indexOf('='); c.env[rest.slice(0, eq)] = rest.slice(eq + 1); break; }
      case '@framing': c.framing = rest.trim(); break;
      case '@quiet': c.quietMs = Number(rest); break;
      case '@ignore': c.ignore.push(rest.trim()); break;
      // Sent verbatim with a trailing newline: need not be valid JSON.
      case '>': c.steps.push({ where, kind: 'send', data: Buffer.from(rest + '\n') }); break;
      // A JSON string literal, decoded and sent as is (no newline added): raw bytes, partial frames.
      case '>>': c.steps.push({ where, kind: 'send', data: Buffer.from(json(rest)) }); break;
      // One message with a correct Content-Length header.
      case '>cl': {
        const body = Buffer.from(rest);
        c.steps.push({ where, kind: 'send', data: Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`), body]) });
        break;
      }
      // ">pad N JSON": the JSON line with its "$PAD" string grown so the line is N bytes long.
      case '>pad': {
        const m = /^(\d+)\s+(.*)$/.exec(rest);
        if (!m) throw new Error(`${where}: expected '>pad N JSON'`);
        const n = Number(m[1]);
        const base = m[2].replace('"$PAD"', '""');
        const fill = Math.max(0, n - Buffer.byteLength(base));
        c.steps.push({ where, kind: 'send', data: Buffer.from(m[2].replace('"$PAD"', JSON.stringify('x'.repeat(fill))) + '\n') });
        break;
      }
      case '<':
        if (rest.trim() === '(none)') c.steps.push({ where, kind: 'none' });
        else c.steps.push({ where, kind: 'expect', expected: json(rest) });
        break;
      case '<exit': c.steps.push({ where, kind: 'exit', code: Number(rest.trim() || 0) }); break;
      case '~': c.steps.push({ where, kind: 'sleep', ms: Number(rest) }); break;
      default: throw new Error(`${where}: unknown directive '${op}'`);
    }
  }
  return c;
}

async function runCase(c) {
  const server = new RawServer({ args: c.args, env: c.env, framing: c.framing });
  const ignored = (m) => c.ignore.includes(m.method);
  const takeNext = async (timeoutMs) => {
    for (;;) {
      const m = await server.next({ timeoutMs });
      if (!ignored(m)) return m;
    }
  };
  let exited = false;
  try {
    for (const step of c.steps) {
      if (step.kind === 'send') {
        server.write(step.data);
      } else if (step.kind === 'sleep') {
        await sleep(step.ms);
      } else if (step.kind === 'expect') {
        let got;
        try {
          got = await takeNext(5000);
        } catch (e) {
          assert.fail(`${step.where}: expected ${JSON.stringify(step.expected)}\n${e.message}\nstderr:\n${server.stderr}`);
        }
        const diff = subsetDiff(step.expected, got);
        if (diff) assert.fail(`${step.where}: ${diff}\n  got: ${JSON.stringify(got)}`);
      } else if (step.kind === 'none') {
        await sleep(c.quietMs);
        const extra = server.messages.filter((m) => !ignored(m));
        if (extra.length) assert.fail(`${step.where}: expected no message within ${c.quietMs} ms, got ${JSON.stringify(extra)}`);
        server.messages.length = 0;
      } else if (step.kind === 'exit') {
        const r = await server.close(c.exitMs + 3000);
        exited = true;
        assert.equal(r.signal, null, `${step.where}: kiln was killed (${r.signal}): no exit within ${c.exitMs + 3000} ms of stdin EOF`);
        assert.ok(r.ms <= c.exitMs, `${step.where}: exit took ${r.ms} ms after stdin EOF (limit ${c.exitMs})`);
        assert.equal(r.code, step.code, `${step.where}: exit status`);
      }
    }
    if (!exited) {
      const r = await server.close(c.exitMs + 3000);
      assert.equal(r.signal, null, `kiln did not exit within ${c.exitMs + 3000} ms of stdin EOF`);
      assert.equal(r.code, 0, 'exit status after stdin EOF');
      assert.ok(r.ms <= c.exitMs, `exit took ${r.ms} ms after stdin EOF (limit ${c.exitMs})`);
    }
    const extra = server.messages.filter((m) => !ignored(m));
    assert.deepEqual(extra, [], 'messages nobody expected');
    assert.deepEqual(server.garbage, [], 'stdout must carry protocol messages only');
    assert.equal(server.buffer.length, 0, `stdout ended with an incomplete message: ${server.buffer.toString().slice(0, 200)}`);
  } finally {
    server.kill();
  }
}

const files = fs.readdirSync(casesDir).filter((f) => f.endsWith('.wire')).sort();
test('wire cases exist', () => assert.ok(files.length > 0));
for (const f of files) {
  const c = parseCase(fs.readFileSync(path.join(casesDir, f), 'utf8'), f);
  test(`${f.replace(/\.wire$/, '')}: ${c.title}`, () => runCase(c));
}
