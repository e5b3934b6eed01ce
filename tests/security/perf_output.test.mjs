// Issue 21's run output attacked (cases 20, 21, 30): each stream's file and the run's folder are
// made with the stream's first byte, and the combined stream (process_output "both") reads through
// to the one stream that spoke until the other speaks, then is that stream's bytes so far (read
// from its file, not copied) followed by a file of its own. Judged on the host: the files of <state>/traces/<id>/ byte for byte, their modes,
// and the state directory's free space.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { callTool, errorText, exec, isRoot, ok, readAll, requireSandboxTools, startKiln, tempDir } from './lib.mjs';

let k;
before(async () => {
  k = await startKiln();
  requireSandboxTools(k);
});
after(async () => {
  await k?.close();
});

const traceDir = (kk, id) => path.join(kk.kilnHome, 'traces', id);
const mode = (p) => fs.statSync(p).mode & 0o777;

// The whole of one stream of a finished run through process_output.
async function streamOf(runId, stream) {
  const { data, last } = await readAll(k, runId, { stream, ms: 60000 });
  assert.ok(last.eof && !last.running, `process_output ${stream} of ${runId} did not reach the end`);
  return data;
}

test('case 30/21: a run that prints nothing leaves no output folder, and its trace still answers trace_output', async () => {
  const r = await exec(k, 'true');
  assert.equal(r.exit_code, 0, r.out);
  const id = r.raw.structuredContent.trace_id;
  assert.ok(id, 'sandbox_exec returned no trace_id');
  assert.ok(!fs.existsSync(traceDir(k, id)), `an empty run made ${traceDir(k, id)}`);
  for (const stream of ['stdout', 'stderr']) {
    const o = ok(await callTool(k, 'trace_output', { trace_id: id, stream, offset: 0 }), `trace_output ${stream}`);
    assert.equal(o.total_bytes, 0, `trace_output ${stream} of a silent run: ${JSON.stringify(o)}`);
  }
  const got = ok(await callTool(k, 'trace_get', { trace_id: id }), 'trace_get');
  assert.equal((got.trace ?? got).status, 'pass', `the silent run's trace: ${JSON.stringify(got).slice(0, 400)}`);
});

test('case 21: stderr first, then stdout, then stderr again, in binary: every file and stream holds exactly its bytes, modes 0700/0600', async () => {
  // Random bytes (NULs, invalid UTF-8, ANSI escapes all likely), written from files the host
  // made, with pauses so the order in which kiln reads the two pipes is the order written.
  const parts = { a: crypto.randomBytes(300 * 1024), b: crypto.randomBytes(1000), c: crypto.randomBytes(70 * 1024) };
  for (const [n, buf] of Object.entries(parts)) fs.writeFileSync(path.join(k.ws, `part-${n}.bin`), buf);
  const r = await exec(k, 'cat part-b.bin >&2; sleep 0.5; cat part-a.bin; sleep 0.5; cat part-c.bin >&2; sleep 0.3; echo', {});
  assert.equal(r.exit_code, 0, r.out.slice(0, 400));
  const id = r.raw.structuredContent.trace_id;
  const dir = traceDir(k, id);
  // The combined stream is stderr's bytes until stdout first speaks, read from stderr's own file,
  // then the `output` file, which takes every chunk from that moment on: nothing is copied.
  const expect = {
    stdout: Buffer.concat([parts.a, Buffer.from('\n')]),
    stderr: Buffer.concat([parts.b, parts.c]),
    output: Buffer.concat([parts.a, parts.c, Buffer.from('\n')]),
  };
  const both = await readAll(k, r.raw.structuredContent.run_id, { stream: 'both', ms: 60000 });
  assert.equal(both.last.next_offset, parts.b.length + parts.a.length + parts.c.length + 1,
    `process_output "both" ends at ${both.last.next_offset}`);
  for (const [name, want] of Object.entries(expect)) {
    const p = path.join(dir, name);
    assert.ok(fs.existsSync(p), `${p} is missing`);
    const got = fs.readFileSync(p);
    assert.ok(got.equals(want), `${name}: ${got.length} bytes on disk, ${want.length} expected (first difference at ${
      [...want].findIndex((b, i) => got[i] !== b)})`);
    assert.equal(mode(p), 0o600, `${p} has mode ${mode(p).toString(8)}`);
  }
  assert.equal(mode(dir), 0o700, `${dir} has mode ${mode(dir).toString(8)}`);
  assert.equal(mode(path.join(k.kilnHome, 'traces')), 0o700);
  assert.equal(mode(k.kilnHome), 0o700);
  // Only the run's own files, no stray copy.
  assert.deepEqual(fs.readdirSync(dir).sort(), ['output', 'stderr', 'stdout']);
});

test('case 21: heavy interleaving of stdout and stderr: "both" is exactly a merge of the two streams, nothing lost or doubled', async () => {
  // stdout speaks lower case and newlines only, stderr upper case and '|' only: "both" filtered by
  // alphabet must give back each stream exactly, whatever the chunking.
  const py = [
    'import os, random',
    'random.seed(21)',
    'lo = "abcdefghijklmnopqrstuvwxyz"; up = lo.upper()',
    'for i in range(4000):',
    '    if random.random() < 0.5:',
    '        os.write(1, ("".join(random.choice(lo) for _ in range(random.randint(1, 200))) + "\\n").encode())',
    '    else:',
    '        os.write(2, ("".join(random.choice(up) for _ in range(random.randint(1, 200))) + "|").encode())',
  ].join('\n');
  fs.writeFileSync(path.join(k.ws, 'interleave.py'), py);
  const r = await exec(k, ['/usr/bin/python3', 'interleave.py'], { background: true });
  const runId = r.run_id;
  const both = await streamOf(runId, 'both');
  const out = await streamOf(runId, 'stdout');
  const err = await streamOf(runId, 'stderr');
  assert.ok(out.length > 100000 && err.length > 100000, `too little output: ${out.length} / ${err.length}`);
  assert.equal(both.length, out.length + err.length, `"both" has ${both.length} bytes, the streams ${out.length} + ${err.length}`);
  assert.equal(both.replace(/[A-Z|]/g, ''), out, '"both" without stderr\'s bytes is not stdout');
  assert.equal(both.replace(/[a-z\n]/g, ''), err, '"both" without stdout\'s bytes is not stderr');
  assert.match(out, /^[a-z\n]+$/, 'stdout holds bytes of stderr');
  assert.match(err, /^[A-Z|]+$/, 'stderr holds bytes of stdout');
});

// The combined stream keeps a 16 KiB tail in memory (stdout and stderr 64 KiB); a chunk larger than
// that tail arrives whole when one write() fills the pipe (kiln reads up to 64 KiB at once). The
// tail must stay the stream's last bytes, or a page of "both" that starts inside it is served
// from the wrong place. stdout 5,000 bytes, stderr one, then stdout 60 KiB in one write, read
// back in pages of 1,000 bytes.
test('case 21: process_output pages of "both" after a chunk larger than its kept tail are the bytes at their offsets', async () => {
  fs.writeFileSync(path.join(k.ws, 'bigchunk.py'),
    'import os, time\nos.write(1, b"a" * 5000)\ntime.sleep(0.3)\nos.write(2, b"E")\ntime.sleep(0.3)\nos.write(1, b"b" * 61440)\n');
  const want = { both: `${'a'.repeat(5000)}E${'b'.repeat(61440)}`, stdout: `${'a'.repeat(5000)}${'b'.repeat(61440)}`, stderr: 'E' };
  const r = await exec(k, ['/usr/bin/python3', 'bigchunk.py']);
  assert.equal(r.exit_code, 0, r.out.slice(0, 300));
  for (const stream of ['both', 'stdout', 'stderr']) {
    let data = '';
    let offset = 0;
    for (let pages = 0; pages < 200; pages++) {
      const p = ok(await callTool(k, 'process_output', { run_id: r.run_id, stream, offset, limit: 1000 }), `process_output ${stream}`);
      assert.equal(p.offset, offset);
      data += p.data;
      offset = p.next_offset;
      if (p.eof) break;
    }
    const w = want[stream];
    let d = 0;
    while (d < w.length && data[d] === w[d]) d++;
    assert.ok(data === w, `${stream}: ${data.length} bytes read, ${w.length} written; first wrong byte at offset ${d}: ${JSON.stringify(data.slice(d, d + 16))} instead of ${JSON.stringify(w.slice(d, d + 16))}`);
  }
  // On disk the combined file holds the interleaving from the moment stderr first spoke; the 5000
  // bytes before it are read from stdout's own file (nothing is copied).
  const file = fs.readFileSync(path.join(traceDir(k, r.raw.structuredContent.trace_id), 'output'), 'latin1');
  assert.ok(file === `E${'b'.repeat(61440)}`, `the output file holds ${file.length} bytes starting ${JSON.stringify(file.slice(0, 8))}`);
});

// A full disk when the combined stream takes over: the state directory on a 40 MiB tmpfs (in a
// mount namespace of kiln's own, so nothing on the host changes), the workspace elsewhere. The
// command prints 30 MiB to stdout (it fits) and then one line to stderr. An earlier version copied
// the 30 MiB into the combined file at that moment and filled the disk; the combined stream now
// reads those bytes from stdout's file, and a spool that hits ENOSPC cuts its file to nothing so
// that the run's record can still be written (output_spool.cpp). Either way one command must not
// leave the state directory full, its trace "running" and every later run refused.
test('case 20/30: a disk full when "both" takes over leaves the space free: the trace ends and the next run starts', { skip: isRoot ? false : 'needs root to mount a small tmpfs as the state directory' }, async () => {
  const home = tempDir('kiln-sec-fullstate-');
  const wrapper = ['unshare', '-m', '--propagation', 'private', '/bin/sh', '-c',
    `mount -t tmpfs -o size=40m,mode=0700 kilnsec-full "${home}" && exec "$@"`, 'sh'];
  const kf = await startKiln({ home, wrapper });
  try {
    const root = `/proc/${kf.pid}/root${home}`;
    const freeMiB = () => { const s = fs.statfsSync(root); return (s.bavail * s.bsize) / 2 ** 20; };
    assert.ok(freeMiB() > 35, `the state tmpfs is not in place (${freeMiB()} MiB free)`);
    const r = await callTool(kf, 'sandbox_exec', { command: 'head -c 31457280 /dev/zero | tr "\\0" a; echo second-stream >&2' });
    // The run itself may be reported with an output error: that is the honest answer.
    const text = r.isError ? errorText(r) : JSON.stringify(r.structuredContent);
    const traceId = /tr_[0-9a-f]+/.exec(text)?.[0];
    assert.ok(traceId, `no trace id in the result: ${text.slice(0, 300)}`);
    const files = fs.readdirSync(path.join(root, 'traces', traceId))
      .map((f) => `${f}: ${fs.statSync(path.join(root, 'traces', traceId, f)).size}`);
    const free = freeMiB();
    const t = await callTool(kf, 'trace_get', { trace_id: traceId });
    const status = t.isError ? `error: ${errorText(t)}` : (t.structuredContent.trace ?? t.structuredContent).status;
    const next = await callTool(kf, 'sandbox_exec', { command: 'echo next-run' });
    assert.ok(free > 1, `the state directory was left full (${free.toFixed(2)} MiB free); trace files: ${files.join(', ')}`);
    assert.notEqual(status, 'running', `the trace of the run stayed "running" (its end could not be recorded); files: ${files.join(', ')}`);
    assert.ok(!next.isError, `the next run was refused: ${errorText(next)}`);
  } finally {
    await kf.close();
  }
});
