// Long calls: progress notifications for a file_search with a progressToken, cancellation through
// an AbortSignal (the SDK sends notifications/cancelled; no response follows), and a slow call not
// blocking ping. Progress is counted on the raw wire, because the SDK can drop a notification that
// arrives just before the response (notes/MCP_SPEC.md section 9).
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { connectClient, generateTree, sleep, structured, tempDir } from '../lib/kiln.mjs';

const FILES = Number(process.env.KILN_E2E_TREE_FILES ?? 30000);

let s;
let ws;
before(async () => {
  ws = path.join(tempDir('kiln-big-'), 'big');
  generateTree(ws, FILES, { needleEvery: 1000 });
  s = await connectClient();
  structured(await s.client.callTool({ name: 'workspace_open', arguments: { path: ws } }));
});
after(() => s?.close());

const progressFor = (token) => s.wire.filter((m) => m.method === 'notifications/progress' && m.params?.progressToken === token);

test(`file_search over ${FILES} files reports increasing progress before its response`, async () => {
  const seenBySdk = [];
  const r = await s.client.callTool({ name: 'file_search', arguments: { pattern: 'needle_marker', max_results: 1000 } },
    undefined, { onprogress: (p) => seenBySdk.push(p), timeout: 120000 });
  const out = structured(r);
  assert.equal(out.matches.length, FILES / 1000);
  assert.ok(out.files_scanned >= FILES);

  // The SDK uses the request id as the progress token.
  const req = s.transport.sent.findLast((m) => m.method === 'tools/call');
  const token = req.params._meta.progressToken;
  const progress = progressFor(token);
  assert.ok(progress.length >= 1, 'at least one notifications/progress on the wire');
  for (let i = 1; i < progress.length; i++) {
    assert.ok(progress[i].params.progress > progress[i - 1].params.progress, 'progress increases');
  }
  for (const p of progress) {
    if (p.params.total !== undefined) assert.ok(p.params.progress <= p.params.total);
  }
  const responseAt = s.wire.findIndex((m) => m.id === req.id && ('result' in m || 'error' in m));
  const lastProgressAt = s.wire.lastIndexOf(progress.at(-1));
  assert.ok(lastProgressAt < responseAt, 'no progress after the response');
  assert.ok(seenBySdk.length <= progress.length);
});

test('a request without a progressToken gets no progress notifications', async () => {
  const before = s.wire.filter((m) => m.method === 'notifications/progress').length;
  structured(await s.client.callTool({ name: 'file_search', arguments: { pattern: 'needle_marker', max_results: 1000 } },
    undefined, { timeout: 120000 }));
  assert.equal(s.wire.filter((m) => m.method === 'notifications/progress').length, before);
});

// A search over this tree takes tens of milliseconds, so the server can finish before the cancel
// reaches it; the spec allows that reply ("the sender SHOULD ignore any response that arrives
// afterward"). Each attempt aborts a few milliseconds after sending (the cancel follows the request
// on the same stream, so the server has registered it); a server that honours cancellation drops
// the reply in at least one of several attempts, one that ignores it never does.
test('cancelling through an AbortSignal stops the call: no response, the server goes on', async () => {
  const attempts = [];
  for (const delayMs of [5, 0, 10, 0, 2, 0]) {
    const ac = new AbortController();
    const call = s.client.callTool({ name: 'file_search', arguments: { pattern: 'nothing_matches_(this|that)', max_results: 10 } },
      undefined, { signal: ac.signal, onprogress: () => {}, timeout: 120000 });
    await sleep(delayMs);
    const id = s.transport.sent.findLast((m) => m.method === 'tools/call').id;
    ac.abort('test cancels');
    await assert.rejects(call);
    const cancel = s.transport.sent.find((m) => m.method === 'notifications/cancelled' && m.params.requestId === id);
    assert.ok(cancel, 'the SDK sent notifications/cancelled');
    await sleep(1000);
    const answered = s.wire.some((m) => m.id === id && ('result' in m || 'error' in m));
    attempts.push({ id, answered });
    if (answered) continue;
    // Progress already in flight when the cancel arrived is a tolerated race; later progress is not.
    const progressSoFar = progressFor(id).length;
    await sleep(300);
    assert.equal(progressFor(id).length, progressSoFar, 'no progress for a cancelled request');
    break;
  }
  assert.ok(attempts.some((a) => !a.answered), `a cancelled request got no response (attempts: ${JSON.stringify(attempts)})`);
  await s.client.ping();
  const again = structured(await s.client.callTool({ name: 'file_search', arguments: { pattern: 'needle_marker', max_results: 5 } }));
  assert.equal(again.matches.length, 5);
});

test('a slow call does not block ping', async () => {
  let progressed;
  const inProgress = new Promise((r) => { progressed = r; });
  let slowDone = false;
  const slow = s.client.callTool({ name: 'file_search', arguments: { pattern: '(x+x+)+y|never_there', max_results: 10 } },
    undefined, { onprogress: () => progressed(), timeout: 120000 }).then((r) => { slowDone = true; return r; });
  await Promise.race([inProgress, sleep(30)]);
  const t0 = Date.now();
  await s.client.ping();
  const pingMs = Date.now() - t0;
  const slowWasRunning = !slowDone;
  const r = await slow;
  assert.ok(!r.isError);
  assert.ok(slowWasRunning, `ping (${pingMs} ms) answered while file_search was still running`);
});
