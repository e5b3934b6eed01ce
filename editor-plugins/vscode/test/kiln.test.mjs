// The commands against the real `kiln mcp` (BUILD/kiln, KILN_BIN or KILN_BUILD) on a copy of
// examples/sample-project with a private KILN_HOME: Verify puts the failing test into Problems at
// its file and line (and clears it once fixed), Run Command streams output and cancels, the Traces
// view lists runs and opens them read-only, Publish copies a URL that serves, Open Workspace switches.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { activate, copySample, kilnBin, sleep, tempDir } from './helpers.mjs';

const bin = kilnBin();
const home = tempDir('kiln-vsc-home-');
const ws = copySample();
let skip = false;
if (!fs.existsSync(bin)) skip = `no kiln binary at ${bin} (set KILN_BIN or KILN_BUILD)`;

const saved = {};
before(() => {
  for (const k of ['KILN_HOME', 'XDG_STATE_HOME', 'KILN_SERVE_LISTEN']) saved[k] = process.env[k];
  process.env.KILN_HOME = home;
  process.env.KILN_SERVE_LISTEN = '127.0.0.1:0';
  delete process.env.XDG_STATE_HOME;
});

after(async () => {
  // Publish started a `kiln serve` daemon for this KILN_HOME: stop it.
  try {
    const { pid } = JSON.parse(fs.readFileSync(path.join(home, 'serve.json'), 'utf8'));
    process.kill(pid, 'SIGTERM');
    for (let i = 0; i < 100; i++) {
      process.kill(pid, 0);
      await sleep(50);
    }
    process.kill(pid, 'SIGKILL');
  } catch {
    /* not started, or gone */
  }
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

function get(url, password) {
  const headers = password ? { authorization: `Basic ${Buffer.from(`any:${password}`).toString('base64')}` } : {};
  return new Promise((resolve, reject) => {
    http.get(url, { headers }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode, body }));
    }).on('error', reject);
  });
}

async function kiln(t, folders = [ws]) {
  return activate({ folders, settings: { 'kiln.server.path': bin } }, t);
}

// The sandbox may be unavailable on some machines: then these tests say why and skip.
if (!skip) {
  const probe = await import('node:child_process').then(({ spawnSync }) =>
    spawnSync(bin, ['run', '--', 'true'], { cwd: ws, env: { ...process.env, KILN_HOME: home }, encoding: 'utf8', timeout: 60000 }));
  if (probe.status !== 0) skip = `the sandbox cannot run here: ${(probe.stderr || probe.error?.message || '').trim().split('\n')[0]}`;
}

test('Verify: the failing test goes into Problems at its file and line, with progress; fixed, Problems clear', { skip }, async (t) => {
  const { rec, api } = await kiln(t);
  rec.messageAnswers.push('Show Problems');
  const result = await rec.commands.get('kiln.verify')();
  assert.equal(result.status, 'fail');
  const p = rec.progress.find((x) => x.title === 'Kiln: Verify');
  assert.ok(p.cancellable);
  assert.ok(p.reports.some((r) => /check test/.test(r.message ?? '')), JSON.stringify(p.reports));
  const pct = p.reports.reduce((s, r) => s + (r.increment ?? 0), 0);
  assert.ok(pct > 30 && pct <= 100.0001, `progress advances with the checks: ${JSON.stringify(p.reports)}`);

  const diags = rec.diagnostics.get('kiln');
  const file = path.join(ws, 'test', 'case.test.js');
  assert.deepEqual([...diags.keys()], [file]);
  const [d] = diags.get(file);
  assert.equal(d.range.start.line, 9, 'line 10 in the report is line 9 zero-based');
  assert.match(d.message, /^kebabCase: Expected values to be strictly equal:\n/, 'the message keeps its line breaks');
  assert.equal(d.severity, 0);
  assert.equal(d.source, 'kiln verify');
  assert.equal(d.code, 'test');

  const m = rec.messages.find((x) => x.kind === 'error');
  assert.match(m.text, /verify fail: 1 of \d checks passed \(9 passed, 1 failed/);
  assert.deepEqual(m.items, ['Show Problems', 'Open Trace']);
  await rec.waitFor(() => rec.executed.find((e) => e.id === 'workbench.actions.view.problems'), 5000, 'problems shown');

  // Fix the deliberate bug; the next verify passes and clears Problems.
  const src = path.join(ws, 'src', 'case.js');
  const orig = fs.readFileSync(src, 'utf8');
  fs.writeFileSync(src, orig.replace("return words(text).join('-');", "return words(text).map((w) => w.toLowerCase()).join('-');"));
  t.after(() => fs.writeFileSync(src, orig));
  const again = await rec.commands.get('kiln.verify')();
  assert.equal(again.status, 'pass', JSON.stringify(again));
  assert.equal(diags.size, 0);
  assert.match(rec.messages.at(-1).text, /verify pass/);
  assert.equal(rec.messages.at(-1).kind, 'info');
  assert.equal(api.client.state, 'running');
});

test('Verify: a check that fails without a test report is put on its entry in kiln.json', { skip }, async (t) => {
  const dir = path.join(tempDir('kiln-vsc-ws2-'), 'broken');
  fs.mkdirSync(dir);
  fs.writeFileSync(path.join(dir, 'kiln.json'), '{\n  "verify": [\n    {"name": "lint", "run": "echo bad style >&2; exit 3"}\n  ]\n}\n');
  const { rec } = await kiln(t, [dir]);
  const r = await rec.commands.get('kiln.verify')();
  assert.equal(r.status, 'fail');
  const list = rec.diagnostics.get('kiln').get(path.join(dir, 'kiln.json'));
  assert.equal(list.length, 1);
  assert.equal(list[0].range.start.line, 2);
  assert.match(list[0].message, /check "lint" failed: exit code 3/);
});

test('Run Command: output streams into "Kiln: Run" and the progress notification; the result is reported', { skip }, async (t) => {
  const { rec } = await kiln(t);
  rec.inputAnswers.push('echo one; sleep 0.5; echo two');
  const r = await rec.commands.get('kiln.runCommand')();
  assert.equal(r.exit_code, 0);
  const out = rec.channels.get('Kiln: Run').text();
  assert.match(out, /\$ echo one; sleep 0\.5; echo two\none\ntwo\n\[exited 0 in [\d.]+ s, trace tr_[0-9a-f]+\]/);
  const p = rec.progress.find((x) => x.title === 'Kiln: echo one; sleep 0.5; echo two');
  assert.ok(p.cancellable);
  assert.ok(p.reports.some((x) => x.message === 'one'), JSON.stringify(p.reports));
  assert.match(rec.messages.at(-1).text, /exited 0/);
  // The last command is offered again next time.
  rec.inputAnswers.push((opts) => opts.value);
  await rec.commands.get('kiln.runCommand')();
  assert.equal(rec.lastInputBox.value, 'echo one; sleep 0.5; echo two');
});

test('Run Command: cancelling the notification stops the sandboxed command (trace: cancelled)', { skip }, async (t) => {
  const { rec, api } = await kiln(t);
  rec.cancelProgress = (p) => p.title.includes('sleep 30') && p.reports.some((x) => x.message === 'started');
  const t0 = Date.now();
  rec.inputAnswers.push('echo started; sleep 30; echo never');
  assert.equal(await rec.commands.get('kiln.runCommand')(), undefined);
  assert.ok(Date.now() - t0 < 15000, 'returned long before the command would have');
  assert.match(rec.channels.get('Kiln: Run').text(), /started\n\[cancelled\]/);
  assert.match(rec.messages.at(-1).text, /cancelled/);
  let last;
  for (let i = 0; i < 50; i++) {
    last = (await api.client.callTool('trace_list', { kind: 'exec', limit: 1 })).traces[0];
    if (last.status !== 'running') break;
    await sleep(100);
  }
  assert.equal(last.command, 'echo started; sleep 30; echo never');
  assert.equal(last.stop_reason, 'cancelled');
});

// A workspace whose kiln.json sets a network allowlist, a real local upstream that up.test maps to
// (KILN_EGRESS_HOSTS, read by the kiln the extension starts), and runs that reach it and get refused.
async function allowlistWorkspace(t) {
  const upstream = http.createServer((req, res) => res.end(`upstream saw ${req.url}\n`));
  await new Promise((r) => upstream.listen(0, '127.0.0.1', r));
  t.after(() => upstream.close());
  const port = upstream.address().port;
  const dir = path.join(tempDir('kiln-vsc-net-'), 'net');
  fs.mkdirSync(dir);
  fs.writeFileSync(path.join(dir, 'kiln.json'), JSON.stringify({ sandbox: { network: { allow: [`up.test:${port}`], allow_private: true } } }));
  const hosts = path.join(path.dirname(dir), 'hosts');
  fs.writeFileSync(hosts, '127.0.0.1 up.test\n');
  const before = process.env.KILN_EGRESS_HOSTS;
  process.env.KILN_EGRESS_HOSTS = hosts;
  t.after(() => {
    if (before === undefined) delete process.env.KILN_EGRESS_HOSTS;
    else process.env.KILN_EGRESS_HOSTS = before;
  });
  return { dir, port };
}

test('Run Command with a network allowlist: the result names what was refused and what to add; the Traces hover shows the log', { skip }, async (t) => {
  const { dir, port } = await allowlistWorkspace(t);
  const { rec, api, vscode } = await kiln(t, [dir]);
  const command = `curl -s http://up.test:${port}/ok; curl -s -o /dev/null http://unlisted.test/; curl -s -o /dev/null http://unlisted.test/again; curl -s -o /dev/null http://other.test:8080/`;
  rec.inputAnswers.push(command);
  const r = await rec.commands.get('kiln.runCommand')();
  assert.equal(r.exit_code, 0, r.stderr);
  assert.match(r.stdout, /upstream saw \/ok/);
  const trace = (await api.client.callTool('trace_get', { trace_id: r.trace_id })).trace;
  assert.equal(trace.network_log.length, 4, JSON.stringify(trace.network_log));

  // The output channel: totals, refusals first (a repeat is one line), then the allowed upstream, then the exit.
  const out = rec.channels.get('Kiln: Run').text();
  const block = /network: 1 allowed, 3 refused; \d+ B up, \d+ B down\n((?: {2}.*\n)+)\[exited 0 in [\d.]+ s, trace tr_[0-9a-f]+\]/.exec(out);
  assert.ok(block, out);
  const lines = block[1].trimEnd().split('\n').map((l) => l.trim());
  assert.deepEqual(lines.map((l) => l.split('  ').slice(0, 2).join(' ')), [
    'refused unlisted.test:80',
    'refused other.test:8080',
    `allowed up.test:${port}`,
  ]);
  assert.match(lines[0], /no allow entry matches \(add "unlisted\.test" to network\.allow\) \(×2\)$/);
  assert.match(lines[1], /no allow entry matches \(add "other\.test:8080" to network\.allow\)$/);
  assert.match(lines[2], /\d+ B up, \d+ B down$/);

  // The notification: a warning (something was refused) that says what to add.
  const m = rec.messages.at(-1);
  assert.equal(m.kind, 'warning');
  assert.match(m.text, /exited 0 \([\d.]+ s\) · network: 1 allowed, 3 refused: unlisted\.test:80 \(add "unlisted\.test"\), other\.test:8080 \(add "other\.test:8080"\)$/);
  assert.deepEqual(m.items, ['Show Output', 'Open Trace']);

  // The Traces view: the run's hover (resolved on hover, from trace_get) has the same log.
  const provider = rec.treeViews.get('kiln.traces').treeDataProvider;
  const node = (await provider.getChildren()).find((n) => n.trace?.trace_id === r.trace_id);
  assert.ok(node, 'the run is listed');
  const item = provider.getTreeItem(node);
  assert.equal(item.tooltip, undefined, 'left for resolveTreeItem');
  const resolved = await provider.resolveTreeItem(item, node, new vscode.CancellationTokenSource().token);
  const md = resolved.tooltip.value;
  assert.match(md, new RegExp(`^\\*\\*exec\\*\\* \`${r.trace_id}\` — pass`));
  assert.match(md, /\*\*Network\*\* 1 allowed, 3 refused; \d+ B up, \d+ B down\n\n- \*\*refused\*\* `unlisted\.test:80` ×2: no allow entry matches — add `unlisted\.test` to network\.allow\n- \*\*refused\*\* `other\.test:8080`: no allow entry matches — add `other\.test:8080` to network\.allow\n- allowed `up\.test:\d+`: \d+ B up, \d+ B down\n$/);
});

test('Run Command with a network allowlist: a long log is capped at 20 lines and says how many more', { skip }, async (t) => {
  const { dir } = await allowlistWorkspace(t);
  const { rec } = await kiln(t, [dir]);
  rec.inputAnswers.push('for i in $(seq 1 25); do curl -s -o /dev/null http://h$i.test/; done');
  const r = await rec.commands.get('kiln.runCommand')();
  assert.equal(r.exit_code, 0, r.stderr);
  const out = rec.channels.get('Kiln: Run').text();
  assert.match(out, /network: 0 allowed, 25 refused; 0 B up, 0 B down\n/);
  const refused = out.split('\n').filter((l) => /^ {2}refused {2}h\d+\.test:80 {2}no allow entry matches/.test(l));
  assert.equal(refused.length, 20, out);
  assert.match(out, new RegExp(`\\n {2}\\.\\.\\. 5 more \\(the whole log is in trace ${r.trace_id}\\)\\n\\[exited 0`));
  assert.match(rec.messages.at(-1).text, /25 refused: h1\.test:80 \(add "h1\.test"\), h2\.test:80 \(add "h2\.test"\), h3\.test:80 \(add "h3\.test"\) and 22 more$/);
});

test('Traces view: runs newest first, a verify with its checks as children, read-only documents', { skip }, async (t) => {
  const { rec } = await kiln(t);
  await rec.commands.get('kiln.verify')();
  const provider = rec.treeViews.get('kiln.traces').treeDataProvider;
  let top = await provider.getChildren();
  assert.ok(top.length >= 1);
  const v = top.find((n) => n.trace?.kind === 'verify');
  assert.ok(v, JSON.stringify(top.map((n) => n.trace?.kind)));
  const item = provider.getTreeItem(v);
  assert.equal(item.collapsibleState, 1);
  assert.match(item.description, /verify · fail · 9 passed, 1 failed/);
  assert.equal(item.iconPath.id, 'error');
  assert.deepEqual(item.command, { command: 'kiln.openTrace', title: 'Open Trace', arguments: [v.trace.trace_id] });
  const children = await provider.getChildren(v);
  assert.deepEqual(children.map((c) => c.trace.name ?? c.trace.command).length, 2);
  assert.ok(children.every((c) => c.trace.parent_id === v.trace.trace_id));

  await rec.commands.get('kiln.openTrace')(v.trace.trace_id);
  const doc = rec.shownDocuments.at(-1);
  assert.equal(doc.uri.scheme, 'kiln-trace');
  assert.equal(doc.uri.path, `/${v.trace.trace_id}.json`);
  const record = JSON.parse(doc.getText());
  assert.equal(record.trace.id, v.trace.trace_id);
  assert.equal(record.children.length, children.length);

  const testCheck = children.find((c) => /node --test/.test(c.trace.command ?? ''));
  await rec.commands.get('kiln.openTraceOutput')(testCheck);
  const out = rec.shownDocuments.at(-1);
  assert.equal(out.uri.path, `/${testCheck.trace.trace_id}.output.log`);
  assert.match(out.getText(), /=== stdout \(\d+ bytes\) ===\n[\s\S]*kebabCase[\s\S]*=== stderr/);

  // Show Traces focuses the view.
  await rec.commands.get('kiln.showTraces')();
  assert.ok(rec.executed.some((e) => e.id === 'kiln.traces.focus'));
  top = await provider.getChildren();
  assert.ok(top.length >= 1);
});

test('Publish: offers kiln.json\'s publish.path, asks for a password when Kiln needs one, copies and shows the URL; it serves', { skip }, async (t) => {
  const { rec } = await kiln(t);
  await rec.commands.get('kiln.verify')(); // writes reports/
  rec.inputAnswers.push((opts) => opts.value); // accept the suggested path
  rec.inputAnswers.push((opts) => (opts.password ? 'hunter2 but longer' : undefined));
  const r = await rec.commands.get('kiln.publish')();
  assert.ok(r, JSON.stringify(rec.messages.at(-1)));
  assert.equal(rec.lastInputBox.password ?? false, r.share === 'password', 'a password prompt only when Kiln asks for one');
  assert.match(r.url, /^http:\/\/127\.0\.0\.1:\d+\/a\/[a-z0-9-]+\/$/);
  assert.equal(rec.clipboard, r.url);
  const m = rec.messages.at(-1);
  assert.equal(m.kind, 'info');
  assert.ok(m.text.includes(r.url), m.text);
  assert.deepEqual(m.items, ['Open', 'Copy URL']);
  // The test check wrote reports/junit.xml (the HTML page only comes once the tests pass).
  const page = await get(`${r.url}junit.xml`, r.share === 'password' ? 'hunter2 but longer' : undefined);
  assert.equal(page.status, 200);
  assert.match(page.body, /<testsuites>[\s\S]*kebabCase/);
});

test('Publish: a folder typed in, in a workspace without kiln.json: public, and the URL serves it', { skip }, async (t) => {
  const dir = path.join(tempDir('kiln-vsc-pub-'), 'plain');
  fs.mkdirSync(path.join(dir, 'site'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'site', 'index.html'), '<!doctype html><h1>Published from VS Code</h1>\n');
  const { rec } = await kiln(t, [dir]);
  rec.inputAnswers.push((opts) => {
    assert.equal(opts.value, '', 'nothing to suggest without kiln.json');
    return 'site';
  });
  const r = await rec.commands.get('kiln.publish')();
  assert.ok(r, JSON.stringify(rec.messages.at(-1)));
  assert.match(r.url, /\/a\/site\/$/);
  assert.equal(r.share, 'public');
  assert.match(rec.lastInputBox.prompt, /relative to the workspace root/);
  const page = await get(r.url);
  assert.equal(page.status, 200);
  assert.match(page.body, /Published from VS Code/);
  assert.equal(rec.clipboard, r.url);
});

test('Services: offers to start kiln.json\'s services, lists them, restarts one and opens its log', { skip }, async (t) => {
  const dir = path.join(tempDir('kiln-vsc-svc-'), 'svc');
  fs.mkdirSync(dir);
  fs.writeFileSync(path.join(dir, 'kiln.json'), JSON.stringify({ services: { api: { run: 'node server.js', port: 3000, ready: '/health' } } }));
  fs.writeFileSync(path.join(dir, 'server.js'),
    "require('http').createServer((q, s) => s.end('ok')).listen(3000, '127.0.0.1', () => console.log('api listening on 3000'));\n");
  const { rec, api } = await kiln(t, [dir]);
  const named = (name) => (items) => items.find((i) => i.label.endsWith(` ${name}`));
  const action = (label) => (items) => items.find((i) => i.label.endsWith(label));

  rec.messageAnswers.push('Start Services');
  rec.quickPickAnswers.push(named('api'), action('Restart'));
  const chosen = await rec.commands.get('kiln.showServices')();
  assert.match(rec.messages[0].text, /^Kiln: no sandbox runs services\. kiln\.json declares api \(\w+\)\.$/);
  assert.ok(chosen, JSON.stringify(rec.messages));
  assert.equal(chosen.service.state, 'ready');
  assert.equal(chosen.service.url, 'http://127.0.0.1:3000');
  const restarted = await rec.waitFor(() => rec.messages.find((m) => /restarted/.test(m.text)), 60000, 'the restart');
  assert.equal(restarted.text, 'Kiln: api restarted: ready at http://127.0.0.1:3000');

  // Listed again: the sandbox the command started, the restart counted; Open Log shows its output.
  rec.quickPickAnswers.push(named('api'), action('Open Log'));
  const again = await rec.commands.get('kiln.showServices')();
  assert.equal(again.sandbox_id, chosen.sandbox_id);
  const row = rec.lastQuickPick.items; // the actions of the second pick
  assert.deepEqual(row.map((i) => i.label), ['$(debug-restart) Restart', '$(output) Open Log', '$(copy) Copy URL']);
  const listed = (await api.client.callTool('service_list', { sandbox_id: chosen.sandbox_id })).services;
  assert.deepEqual(listed.map((s) => [s.name, s.state, s.restarts]), [['api', 'ready', 1]]);
  const doc = await rec.waitFor(() => rec.shownDocuments.find((d) => /\.output\.log$/.test(d.uri.path)), 10000, 'the log');
  assert.equal(doc.uri.path, `/${listed[0].trace_id}.output.log`);
  assert.match(doc.getText(), /api listening on 3000/);

  // The Traces view knows the service trace; it opens as its output.
  const provider = rec.treeViews.get('kiln.traces').treeDataProvider;
  const node = (await provider.getChildren()).find((n) => n.trace?.kind === 'service');
  assert.ok(node, 'a service trace in the Traces view');
  assert.equal(provider.getTreeItem(node).command.command, 'kiln.openTraceOutput');
});

test('Open Workspace: picks a folder and makes it the session\'s workspace', { skip }, async (t) => {
  const other = path.join(tempDir('kiln-vsc-ws3-'), 'other');
  fs.mkdirSync(other);
  const { rec, api } = await kiln(t, [ws, other]);
  rec.quickPickAnswers.push((items) => items.find((i) => i.path === other));
  const opened = await rec.commands.get('kiln.openWorkspace')();
  assert.equal(opened.root, other);
  assert.match(rec.messages.at(-1).text, /workspace "other" open/);
  const info = await api.client.callTool('workspace_info');
  assert.equal(info.root, other);
  assert.ok(rec.lastQuickPick.items.some((i) => i.browse));
});

test('no workspace open: the error says so and offers Open Workspace', { skip }, async (t) => {
  const { rec } = await kiln(t, []);
  rec.messageAnswers.push('Open Workspace');
  rec.quickPickAnswers.push(undefined); // dismiss the picker it opens
  assert.equal(await rec.commands.get('kiln.verify')(), undefined);
  const m = rec.messages.at(-1);
  assert.equal(m.kind, 'error');
  assert.match(m.text, /Kiln: Verify failed: .*workspace_open/);
  assert.deepEqual(m.items, ['Open Workspace', 'Show Log']);
  await rec.waitFor(() => rec.executed.find((e) => e.id === 'kiln.openWorkspace'), 5000, 'open workspace offered');
});

test('a running trace\'s output document follows it (resources/subscribe, notifications/resources/updated)', { skip }, async (t) => {
  const { rec, api } = await kiln(t);
  const bg = await api.client.callTool('sandbox_exec', { command: 'echo first; sleep 1.5; echo second', background: true });
  const traceId = bg.trace_id ?? (await api.client.callTool('trace_list', { kind: 'exec', limit: 1 })).traces[0].trace_id;
  const docs = rec.contentProviders.get('kiln-trace');
  const changed = [];
  docs.onDidChange((uri) => changed.push(uri.path));
  await rec.commands.get('kiln.openTraceOutput')(traceId);
  assert.match(rec.shownDocuments.at(-1).getText(), /=== stdout/);
  await rec.waitFor(() => changed.includes(`/${traceId}.output.log`), 15000, 'an update of the output document');
  let text = '';
  for (let i = 0; i < 40 && !/second/.test(text); i++) {
    text = (await vscode_open(rec, traceId)).getText();
    await sleep(100);
  }
  assert.match(text, /first\nsecond/);
});

async function vscode_open(rec, traceId) {
  await rec.commands.get('kiln.openTraceOutput')(traceId);
  return rec.shownDocuments.at(-1);
}

test('Show Changes of Run: a run that changes files says so; the diff editor shows each file before and after; Restore Checkpoint undoes it', { skip }, async (t) => {
  const dir = copySample();
  const { rec, vscode } = await kiln(t, [dir]);
  const read = (rel) => fs.readFileSync(path.join(dir, rel), 'utf8');
  const origCase = read('src/case.js');
  const origReadme = read('README.md');
  rec.inputAnswers.push("sed -i 's/join(.-.)/join(\"_\")/' src/case.js && printf 'line one\\nline two\\n' > notes.txt && rm README.md");
  const r = await rec.commands.get('kiln.runCommand')();
  assert.equal(r.exit_code, 0, r.stderr);
  const afterCase = read('src/case.js');
  assert.notEqual(afterCase, origCase);

  // Kiln: Run and the notification say what changed, and offer Show Changes.
  const out = rec.channels.get('Kiln: Run').text();
  assert.match(out, /changed: 3 files \(1 added, 1 modified, 1 deleted\): D README\.md, A notes\.txt, M src\/case\.js\n\[exited 0 in [\d.]+ s, trace tr_[0-9a-f]+\]/);
  const m = rec.messages.at(-1);
  assert.match(m.text, /exited 0 \([\d.]+ s\) · 3 files changed$/);
  assert.deepEqual(m.items, ['Show Changes', 'Show Output', 'Open Trace']);

  // The Traces view: "3 changed" on the row, the paths in its hover, the commands on its menu.
  const provider = rec.treeViews.get('kiln.traces').treeDataProvider;
  const node = (await provider.getChildren()).find((n) => n.trace?.trace_id === r.trace_id);
  const item = provider.getTreeItem(node);
  assert.match(item.description, /^exec · pass · exit 0 · 3 changed · /);
  assert.equal(item.contextValue, 'kilnTrace.exec.changes');
  const hover = (await provider.resolveTreeItem(item, node, new vscode.CancellationTokenSource().token)).tooltip.value;
  assert.match(hover, /\*\*3 changed\*\* \(1 added, 1 modified, 1 deleted\)[^\n]*\n\n- D `README\.md`\n- A `notes\.txt`\n- M `src\/case\.js`\n/);

  // Show Changes of Run on the row: the changed files to pick from; the diff editor opens.
  rec.quickPickAnswers.push((items) => items.find((i) => i.label.endsWith(' src/case.js')));
  const shown = await rec.commands.get('kiln.showRunChanges')(node);
  assert.deepEqual(rec.lastQuickPick.items.map((i) => i.label), ['$(diff-removed) README.md', '$(diff-added) notes.txt', '$(diff-modified) src/case.js']);
  assert.match(rec.lastQuickPick.items[2].description, /^modified · 647 B → 647 B$/);
  const diffCall = rec.executed.find((e) => e.id === 'vscode.diff');
  assert.ok(diffCall, 'vscode.diff executed');
  const [left, right, title] = diffCall.args;
  assert.equal(left.scheme, 'kiln-checkpoint');
  assert.equal(left.path, `/${shown.left.path.split('/')[1]}/src/case.js`);
  assert.equal(title, `case.js (modified by ${r.trace_id}: before ↔ after)`);
  assert.equal((await vscode.workspace.openTextDocument(left)).getText(), origCase, 'left: the file before the run');
  assert.equal(right.scheme, 'file', 'right: the file itself, still as the run left it');
  assert.equal(right.fsPath, path.join(dir, 'src', 'case.js'));

  // Edited after the run: the right side is the run's version (read-only), the left still the original.
  fs.writeFileSync(path.join(dir, 'src', 'case.js'), `// edited later\n${afterCase}`);
  rec.quickPickAnswers.push((items) => items.find((i) => i.label.endsWith(' src/case.js')));
  const again = await rec.commands.get('kiln.showRunChanges')(r.trace_id);
  assert.equal(again.right.scheme, 'kiln-checkpoint');
  assert.equal((await vscode.workspace.openTextDocument(again.left)).getText(), origCase);
  assert.equal((await vscode.workspace.openTextDocument(again.right)).getText(), afterCase);

  // A deleted file: its text on the left, nothing on the right; an added one the other way round.
  rec.quickPickAnswers.push((items) => items.find((i) => i.label.endsWith(' README.md')));
  const del = await rec.commands.get('kiln.showRunChanges')(r.trace_id);
  assert.equal((await vscode.workspace.openTextDocument(del.left)).getText(), origReadme);
  assert.equal((await vscode.workspace.openTextDocument(del.right)).getText(), '');
  rec.quickPickAnswers.push((items) => items.find((i) => i.label.endsWith(' notes.txt')));
  const add = await rec.commands.get('kiln.showRunChanges')(r.trace_id);
  assert.equal((await vscode.workspace.openTextDocument(add.left)).getText(), '');
  assert.equal(add.right.scheme, 'file');

  // Restore Files to Before This Run: a dry run, a modal confirmation listing it, the undo id.
  rec.messageAnswers.push('Restore');
  const restored = await rec.commands.get('kiln.restoreBeforeRun')(node);
  const confirm = rec.messages.at(-2);
  assert.equal(confirm.kind, 'warning');
  assert.match(confirm.text, /^Restore checkpoint cp_[0-9a-f]+ \(before run tr_[0-9a-f]+\)\?$/);
  assert.deepEqual(confirm.items, ['Restore']);
  assert.deepEqual([...restored.restored].sort(), ['README.md', 'src/case.js']);
  assert.deepEqual(restored.deleted, ['notes.txt']);
  assert.equal(read('src/case.js'), origCase);
  assert.equal(read('README.md'), origReadme);
  assert.ok(!fs.existsSync(path.join(dir, 'notes.txt')));
  const done = rec.messages.at(-1);
  assert.equal(done.text, `Kiln: restored ${shown.left.path.split('/')[1]}: 2 files restored, 1 deleted. Undo: checkpoint ${restored.checkpoint_before}`);
  assert.deepEqual(done.items, ['Undo', 'Copy Undo Id']);

  // Kiln: Restore Checkpoint, picking the undo checkpoint from checkpoint_list: the edit is back.
  rec.quickPickAnswers.push((items) => items.find((i) => i.id === restored.checkpoint_before));
  rec.messageAnswers.push('Restore');
  const undone = await rec.commands.get('kiln.restoreCheckpoint')();
  assert.ok(rec.lastQuickPick.items.some((i) => /^\$\(discard\) /.test(i.label) && /^restore · /.test(i.description)), JSON.stringify(rec.lastQuickPick.items.slice(0, 3)));
  assert.ok(undone.checkpoint_before);
  assert.equal(read('src/case.js'), `// edited later\n${afterCase}`);
  assert.ok(fs.existsSync(path.join(dir, 'notes.txt')));

  // Declining the confirmation changes nothing.
  rec.messageAnswers.push(undefined);
  assert.equal(await rec.commands.get('kiln.restoreCheckpoint')(shown.left.path.split('/')[1]), undefined);
  assert.match(rec.messages.at(-1).text, /^Restore checkpoint cp_/);
  assert.ok(fs.existsSync(path.join(dir, 'notes.txt')));
  // Already as it was: nothing to confirm.
  assert.deepEqual((await rec.commands.get('kiln.restoreCheckpoint')(restored.checkpoint_before)).restored, []);
  assert.match(rec.messages.at(-1).text, /already are as cp_[0-9a-f]+ recorded them: nothing to restore$/);
});
