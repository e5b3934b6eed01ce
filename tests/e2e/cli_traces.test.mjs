// `kiln traces list|show|output|export` against the traces `kiln run` (and `kiln verify`) leave in
// a fresh state dir, with no server running. When the sandbox cannot run here, each test that
// needs a run is reported as skipped with the reason (failed with it under KILN_REQUIRE_SANDBOX=1).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { kilnBin, kilnEnv, tempDir } from '../lib/kiln.mjs';
import { sandboxGate } from '../lib/sandbox_probe.mjs';

const home = tempDir('kiln-home-');
// The workspace must not contain the state dir: kiln refuses to sandbox its own state.
const ws = tempDir('kiln-traces-ws-');

function kiln(args, opts = {}) {
  const r = spawnSync(kilnBin(), args, { cwd: opts.cwd ?? ws, env: kilnEnv(home), encoding: opts.encoding ?? 'utf8', timeout: 60000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr?.toString() ?? '' };
}
const traces = (...args) => kiln(['traces', ...args, '--state-dir', home]);
const listJson = (...args) => {
  const r = traces('list', '--json', ...args);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
};

// The run every test reads; when the sandbox cannot run it, the tests that need it are skipped
// with kiln's reason, or fail with it under KILN_REQUIRE_SANDBOX=1 (tests/lib/sandbox_probe.mjs).
const run = kiln(['run', '--state-dir', home, '--', 'sh', '-c', 'echo hi; echo oops >&2; echo second']);
const { test: sandboxTest } = sandboxGate('cli traces e2e',
  run.code === 0 ? null : `kiln run cannot run a command here (exit ${run.code}): ${run.stderr.trim()}`);
let id;
if (run.code === 0) id = listJson()[0]?.id;

sandboxTest('kiln run leaves one trace', () => {
  assert.equal(listJson().length, 1, 'one kiln run, one trace record');
});

const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;
const NANOS = /^[0-9]+$/;

// The OTLP/JSON ExportTraceServiceRequest shape a collector accepts; returns the spans.
function otlpSpans(doc) {
  assert.equal(doc.resourceSpans.length, 1);
  const rs = doc.resourceSpans[0];
  assert.deepEqual(rs.resource.attributes.find((a) => a.key === 'service.name').value, { stringValue: 'kiln' });
  assert.equal(rs.scopeSpans[0].scope.name, 'kiln');
  const spans = rs.scopeSpans[0].spans;
  for (const s of spans) {
    assert.match(s.traceId, HEX32);
    assert.equal(s.traceId, spans[0].traceId);
    assert.match(s.spanId, HEX16);
    assert.equal(s.kind, 2);
    assert.match(s.startTimeUnixNano, NANOS);
    assert.match(s.endTimeUnixNano, NANOS);
    assert.ok(BigInt(s.endTimeUnixNano) >= BigInt(s.startTimeUnixNano));
    assert.ok(Array.isArray(s.attributes));
  }
  return spans;
}
const attr = (span, key) => span.attributes.find((a) => a.key === key)?.value;

sandboxTest('list: a table and JSON, newest first, with filters', (t) => {
  const table = traces('list');
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /^ID\s+KIND\s+NAME\/COMMAND\s+STATUS\s+STARTED/);
  assert.match(table.stdout, new RegExp(`${id}\\s+exec\\s+sh -c echo hi.*\\s+pass\\s+`));
  const [r] = listJson();
  assert.equal(r.id, id);
  assert.match(r.id, /^tr_[0-9a-f]{16}$/);
  assert.equal(r.kind, 'exec');
  assert.equal(r.status, 'pass');
  assert.equal(r.exit_code, 0);
  assert.deepEqual(listJson('--kind', 'verify').filter((x) => x.id === id), []);
  assert.ok(listJson('--status', 'pass').some((x) => x.id === id));
  assert.ok(listJson('--workspace', path.basename(ws)).some((x) => x.id === id), 'workspace by name');
  assert.ok(listJson('--workspace', r.workspace_id).some((x) => x.id === id), 'workspace by id');
  assert.equal(listJson('--limit', '1').length, 1);
  const noWs = traces('list', '--workspace', 'no-such-workspace');
  assert.equal(noWs.code, 1);
  assert.match(noWs.stderr, /no workspace 'no-such-workspace'/);
  assert.equal(traces('list', '--kind', 'bogus').code, 2);
  // An empty state dir lists nothing, and is not created by looking.
  const empty = path.join(tempDir('kiln-empty-'), 'state');
  const none = kiln(['traces', 'list', '--json', '--state-dir', empty]);
  assert.equal(none.code, 0, none.stderr);
  assert.deepEqual(JSON.parse(none.stdout), []);
  assert.equal(fs.existsSync(empty), false);
});

sandboxTest('show: readable text and the JSON record', (t) => {
  const text = traces('show', id);
  assert.equal(text.code, 0, text.stderr);
  assert.match(text.stdout, new RegExp(`^${id}\\s+exec\\s+pass`));
  assert.match(text.stdout, /command\s+sh -c echo hi; echo oops >&2; echo second/);
  assert.match(text.stdout, /outcome\s+exit code 0/);
  const json = traces('show', id, '--json');
  assert.equal(json.code, 0, json.stderr);
  const r = JSON.parse(json.stdout);
  assert.equal(r.id, id);
  assert.equal(r.cwd, ws);
  assert.equal(r.output.stdout_bytes, 'hi\nsecond\n'.length);
});

sandboxTest('output: raw streams, and grep as LINE:TEXT', (t) => {
  const out = kiln(['traces', 'output', id, '--state-dir', home], { encoding: 'buffer' });
  assert.equal(out.code, 0, out.stderr);
  assert.equal(out.stdout.toString('utf8'), 'hi\nsecond\n');
  const err = traces('output', id, '--stream', 'stderr');
  assert.equal(err.code, 0, err.stderr);
  assert.equal(err.stdout, 'oops\n');
  const g = traces('output', id, '--grep', 'sec.nd');
  assert.equal(g.code, 0, g.stderr);
  assert.equal(g.stdout, '2:second\n');
  assert.equal(traces('output', id, '--grep', 'nothing-matches-this').stdout, '');
  assert.equal(traces('output', id, '--grep', '(').code, 2, 'a bad pattern is a usage error');
  assert.equal(traces('output', id, '--stream', 'stdin').code, 2);
});

sandboxTest('export --otlp: an ExportTraceServiceRequest on stdout or in a file', (t) => {
  const out = traces('export', id, '--otlp');
  assert.equal(out.code, 0, out.stderr);
  const spans = otlpSpans(JSON.parse(out.stdout));
  assert.equal(spans.length, 1);
  assert.equal(spans[0].spanId, id.slice(3));
  assert.equal(spans[0].parentSpanId, undefined);
  assert.deepEqual(spans[0].status, { code: 1 });
  assert.deepEqual(attr(spans[0], 'kiln.kind'), { stringValue: 'exec' });
  assert.deepEqual(attr(spans[0], 'kiln.exit_code'), { intValue: '0' });
  const file = path.join(tempDir('kiln-otlp-'), 'trace.json');
  const toFile = traces('export', id, '--otlp', '--output', file);
  assert.equal(toFile.code, 0, toFile.stderr);
  assert.equal(toFile.stdout, '');
  assert.deepEqual(JSON.parse(fs.readFileSync(file, 'utf8')), JSON.parse(out.stdout));
  assert.equal(traces('export', id).code, 2, 'the format must be named');
});

sandboxTest('a verify exports with its checks as child spans', (t) => {
  fs.writeFileSync(path.join(ws, 'kiln.json'), JSON.stringify({
    verify: [{ name: 'build', run: 'echo building' }, { name: 'test', run: 'echo testing; exit 3' }],
  }));
  const v = kiln(['verify', '--state-dir', home]);
  const verify = listJson('--kind', 'verify')[0];
  assert.ok(verify, `kiln verify left no trace (exit ${v.code}): ${v.stderr.trim()}`);
  const out = traces('export', verify.id, '--otlp');
  assert.equal(out.code, 0, out.stderr);
  const spans = otlpSpans(JSON.parse(out.stdout));
  assert.equal(spans.length, 3);
  const [root, ...steps] = spans;
  assert.equal(root.parentSpanId, undefined);
  for (const s of steps) assert.equal(s.parentSpanId, root.spanId);
  assert.deepEqual(steps.map((s) => s.name), ['exec build', 'exec test']);
  assert.equal(root.status.code, 2);
  assert.equal(steps[1].status.code, 2);
  assert.match(steps[1].status.message, /exit code 3/);
  const shown = traces('show', verify.id);
  assert.match(shown.stdout, /steps\n.*build.*pass.*\n.*test.*fail/);
});

test('an unknown or missing id is a clear error with exit 1 or 2', (t) => {
  for (const sub of [['show'], ['output'], ['export', '--otlp']]) {
    const r = traces(sub[0], 'tr_0000000000000000', ...sub.slice(1));
    assert.equal(r.code, 1, `${sub[0]}: ${r.stderr}`);
    assert.match(r.stderr, /no trace tr_0000000000000000 in .*kiln traces list/);
    assert.equal(r.stdout, '');
  }
  assert.equal(traces('show', '../../etc/passwd').code, 1);
  const missing = traces('show');
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /which trace\?/);
});

// A helper that dies before reading its spec (here /bin/false) closes the spec pipe under kiln's
// write: kiln run and kiln verify must report why, not die of SIGPIPE (exit 141, no message).
test('kiln run and kiln verify with a helper that cannot start: a clear error, not a SIGPIPE death', () => {
  const env = { ...kilnEnv(home), KILN_SANDBOX_HELPER: '/bin/false' };
  for (const args of [['run', '--', 'true'], ['verify']]) {
    const r = spawnSync(kilnBin(), args, { cwd: ws, env, encoding: 'utf8', timeout: 60000 });
    assert.equal(r.signal, null, `kiln ${args[0]} was killed by ${r.signal}`);
    assert.notEqual(r.status, 141, `kiln ${args[0]} died of SIGPIPE: ${r.stderr}`);
    assert.notEqual(r.status, 0, r.stderr);
    assert.match(r.stderr, /sandbox|helper/i, `kiln ${args[0]} said nothing useful: ${r.stderr}`);
  }
});
