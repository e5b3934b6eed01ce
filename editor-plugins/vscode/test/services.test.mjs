// Kiln: Services against the scripted fake (fake-kiln.mjs): one quick pick of every live sandbox's
// services (a failed one with its error), restart and open-log actions on the chosen one, and with
// no sandbox running services, an offer to start the ones kiln.json declares (or a plain message).
// The same command against the real kiln is in kiln.test.mjs.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { activate, fakeServer } from './helpers.mjs';

async function fake(t, services) {
  const f = fakeServer(t, { env: { FAKE_KILN_SERVICES: services } });
  return { ...(await activate(f, t)), calls: f.calls };
}

const pickNamed = (name) => (items) => items.find((i) => i.label.endsWith(` ${name}`));
const pickAction = (label) => (items) => items.find((i) => i.label.endsWith(label));

test('Services: one quick pick with name, kind, state and URL; a failed one shows its error', async (t) => {
  const { rec, calls } = await fake(t, 'running');
  rec.quickPickAnswers.push(undefined);
  assert.equal(await rec.commands.get('kiln.showServices')(), undefined, 'dismissed: nothing chosen');
  const { items, opts } = rec.lastQuickPick;
  assert.equal(opts.title, 'Kiln: Services');
  assert.deepEqual(items.map((i) => [i.label, i.description]), [
    ['$(pass) db', 'postgres · ready · postgres://kiln@127.0.0.1:5432/kiln'],
    ['$(error) api', 'command · failed · http://127.0.0.1:3000'],
  ]);
  assert.equal(items[0].detail, 'sandbox sb_fake · pid 12');
  assert.equal(items[1].detail, '$(warning) exited with code 7: listening failed');
  assert.deepEqual(calls('service_list'), [{ sandbox_id: 'sb_fake' }]);
  assert.deepEqual(calls('service_restart'), [], 'nothing restarted without asking');
});

test('Services: Restart calls service_restart for the chosen service and reports its new state', async (t) => {
  const { rec, calls } = await fake(t, 'running');
  rec.quickPickAnswers.push(pickNamed('api'), pickAction('Restart'));
  const chosen = await rec.commands.get('kiln.showServices')();
  assert.equal(chosen.service.name, 'api');
  assert.deepEqual(rec.lastQuickPick.items.map((i) => i.label), ['$(debug-restart) Restart', '$(output) Open Log', '$(copy) Copy URL']);
  await rec.waitFor(() => calls('service_restart').length, 5000, 'service_restart');
  assert.deepEqual(calls('service_restart'), [{ sandbox_id: 'sb_fake', name: 'api' }]);
  const m = await rec.waitFor(() => rec.messages.find((x) => /restarted/.test(x.text)), 5000, 'the restart message');
  assert.equal(m.text, 'Kiln: api restarted: ready at http://127.0.0.1:3000');
  assert.deepEqual(m.items, ['Open Log']);
});

test('Services: Open Log opens the service trace output read-only', async (t) => {
  const { rec } = await fake(t, 'running');
  rec.quickPickAnswers.push(pickNamed('db'), pickAction('Open Log'));
  await rec.commands.get('kiln.showServices')();
  const doc = await rec.waitFor(() => rec.shownDocuments.at(-1), 5000, 'the log document');
  assert.equal(doc.uri.scheme, 'kiln-trace');
  assert.equal(doc.uri.path, '/tr_svcdb.output.log');
  assert.match(doc.getText(), /=== stdout \(\d+ bytes\) ===\nlog of tr_svcdb\n/);
});

test('Services: no sandbox runs services: offers to start the declared ones (sandbox_create {services: true})', async (t) => {
  const { rec, calls } = await fake(t, 'declared');
  rec.messageAnswers.push('Start Services');
  rec.quickPickAnswers.push(pickNamed('db'), undefined);
  const chosen = await rec.commands.get('kiln.showServices')();
  assert.match(rec.messages[0].text, /^Kiln: no sandbox runs services\. kiln\.json declares db \(postgres\)\.$/);
  assert.deepEqual(rec.messages[0].items, ['Start Services']);
  assert.deepEqual(calls('sandbox_create'), [{ services: true }]);
  assert.ok(rec.progress.some((p) => p.title === 'Kiln: starting services' && p.cancellable));
  assert.equal(chosen.sandbox_id, 'sb_new');
  assert.equal(chosen.service.state, 'ready');
});

test('Services: declining the offer to start them starts nothing', async (t) => {
  const declared = await fake(t, 'declared');
  declared.rec.messageAnswers.push(undefined);
  assert.equal(await declared.rec.commands.get('kiln.showServices')(), undefined);
  assert.deepEqual(declared.calls('sandbox_create'), []);
  assert.equal(declared.rec.lastQuickPick, undefined);
});

test('Services: nothing declared and nothing running is a message, not an offer', async (t) => {
  const { rec, calls } = await fake(t, 'none');
  assert.equal(await rec.commands.get('kiln.showServices')(), undefined);
  assert.match(rec.messages.at(-1).text, /no sandbox runs services, and kiln\.json declares none/);
  assert.deepEqual(rec.messages.at(-1).items, []);
  assert.deepEqual(calls('sandbox_create'), []);
});
