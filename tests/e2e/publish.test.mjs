// The publish tools (issue 5) through the official MCP SDK client: publish (a folder, a file, the
// result's fields against the outputSchema, a URL that answers at once), immutable versions while
// the workspace changes, each share mode with publish_share (password, invite with revoke and
// expiry, switching modes), publish_list, unpublish of a version and of an artifact, one trace per
// publish, workspace_info, the `kiln serve` daemon outliving `kiln mcp`, and the tool errors for
// bad input. A password or an invite token must never show in a result, a trace, a message or any
// file of the state directory. Every test has its own KILN_HOME (so its own daemon, listening on a
// free port), and stops that daemon with SIGTERM when it ends.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';

import { connectClient, errorText, sleep, tempDir } from '../lib/kiln.mjs';
import { alive, basicAuth, procStat, readServeInfo, stopProcess } from '../lib/http.mjs';

const LISTEN = { KILN_SERVE_LISTEN: '127.0.0.1:0' };
const PUBLISH_TOOLS = ['publish', 'publish_list', 'publish_share', 'unpublish'];
const validator = new AjvJsonSchemaValidator();

// A workspace folder holding `files` ({relative path: string or Buffer}).
function makeWs(files = {}) {
  const ws = tempDir('kiln-pub-ws-');
  for (const [rel, content] of Object.entries(files)) writeFile(ws, rel, content);
  return ws;
}

function writeFile(root, rel, content) {
  const p = path.join(root, rel);
  fs.mkdirSync(path.dirname(p), { recursive: true });
  fs.writeFileSync(p, content);
}

const SITE = {
  'site/index.html': '<!doctype html><title>Kiln</title><h1>Hello v1</h1>\n',
  'site/style.css': 'h1 { color: teal }\n',
  'site/data.json': '{"ok":true}\n',
  'site/docs/index.html': '<p>docs v1</p>\n',
};

// Starts `kiln mcp --workspace WS` with its own KILN_HOME (unless given) and lists the tools first,
// so the SDK validates every later result against its tool's outputSchema. Each result is also
// validated here and compared with its JSON text block. The session is closed and every daemon
// seen for the state directory is stopped when the test ends.
async function startKiln(t, { files = SITE, home, ws } = {}) {
  home ??= tempDir('kiln-pub-home-');
  ws ??= makeWs(files);
  const s = await connectClient({ args: ['--workspace', ws], home, env: LISTEN, name: 'kiln-publish-e2e' });
  const { tools } = await s.client.listTools();
  const byName = Object.fromEntries(tools.map((x) => [x.name, x]));
  const daemons = new Set();
  let closed = false;
  const k = {
    session: s, client: s.client, home, ws, tools: byName, pid: s.transport.pid,
    results: [],  // every tool result of this session, for the never-leaks checks
    async call(name, args) {
      const r = await s.client.callTool({ name, arguments: args }, undefined, { timeout: 120000 });
      k.results.push(r);
      const info = readServeInfo(home);
      if (info?.pid) daemons.add(info.pid);
      return r;
    },
    async ok(name, args) {
      const r = await k.call(name, args);
      if (r.isError) assert.fail(`${name} ${JSON.stringify(args)} failed: ${errorText(r)}`);
      checkAgainstSchema(byName[name], r);
      return r.structuredContent;
    },
    // The tool error's text; fails unless the call is a tool error (isError: true).
    async err(name, args) {
      const r = await k.call(name, args);
      assert.equal(r.isError, true, `${name} ${JSON.stringify(args)} should be a tool error, got ${JSON.stringify(r.structuredContent)}`);
      const text = errorText(r);
      assert.ok(text.length > 0, 'a tool error says what went wrong');
      return text;
    },
    daemon() {
      const info = readServeInfo(home);
      if (info?.pid) daemons.add(info.pid);
      return info;
    },
    async close() {
      if (closed) return;
      closed = true;
      await s.close().catch(() => {});
    },
  };
  t.after(async () => {
    await k.close();
    k.daemon();
    for (const pid of daemons) await stopProcess(pid);
  });
  return k;
}

function checkAgainstSchema(tool, r) {
  assert.ok(tool?.outputSchema, `${tool?.name}: an outputSchema`);
  const v = validator.getValidator(tool.outputSchema)(r.structuredContent);
  assert.ok(v.valid, `${tool.name}: structuredContent does not match the outputSchema: ${v.errorMessage}`);
  // The same data as one JSON text block (or a short summary followed by the JSON).
  const text = errorText(r);
  const brace = text.indexOf('{');
  assert.ok(brace >= 0, `${tool.name}: no JSON in the text block`);
  assert.deepEqual(JSON.parse(text.slice(brace)), r.structuredContent, `${tool.name}: text block and structuredContent differ`);
}

async function get(url, headers = {}) {
  const r = await fetch(url, { headers, redirect: 'manual' });
  const body = Buffer.from(await r.arrayBuffer());
  return { status: r.status, headers: r.headers, body, text: body.toString('utf8'), cookie: r.headers.getSetCookie()[0]?.split(';')[0] };
}

// Polls `probe` until it returns a truthy value (or the deadline passes); returns the last value.
async function until(probe, { timeoutMs = 10000, stepMs = 100 } = {}) {
  const deadline = Date.now() + timeoutMs;
  let v;
  while (!(v = await probe()) && Date.now() < deadline) await sleep(stepMs);
  return v;
}

// Every file below `dir` (recursively) as [path, Buffer].
function filesBelow(dir) {
  const out = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...filesBelow(p));
    else if (e.isFile()) out.push([p, fs.readFileSync(p)]);
  }
  return out;
}

const randomSecret = (label) => `${label} ${crypto.randomBytes(9).toString('hex')} +&%!`;
const tokenOf = (inviteUrl) => new URL(inviteUrl).searchParams.get('invite');

test('tools/list: the publish tools with the contract arguments, annotations and output schemas', async (t) => {
  const k = await startKiln(t);
  for (const name of PUBLISH_TOOLS) assert.ok(k.tools[name], `${name} listed`);
  const req = (n) => [...(k.tools[n].inputSchema.required ?? [])].sort();
  assert.deepEqual(req('publish'), ['path']);
  assert.deepEqual(req('publish_list'), []);
  assert.deepEqual(req('publish_share'), ['artifact']);
  assert.deepEqual(req('unpublish'), ['artifact']);
  for (const a of ['path', 'name', 'share', 'password', 'invite', 'expires_in_s']) assert.ok(k.tools.publish.inputSchema.properties[a], `publish.${a}`);
  for (const a of ['artifact', 'share', 'password', 'invite', 'revoke', 'expires_in_s']) assert.ok(k.tools.publish_share.inputSchema.properties[a], `publish_share.${a}`);
  assert.ok(k.tools.unpublish.inputSchema.properties.version);
  assert.deepEqual([...k.tools.publish.outputSchema.required].sort(), ['artifact', 'invites', 'share', 'trace_id', 'url', 'version']);
  assert.ok(k.tools.unpublish.outputSchema.required.includes('removed'));
  assert.equal(k.tools.publish_list.annotations.readOnlyHint, true);
  assert.equal(k.tools.publish.annotations.readOnlyHint, false);
  assert.equal(k.tools.unpublish.annotations.destructiveHint, true);
});

test('publish a folder: the result fields, and a URL that answers at once with the right types', async (t) => {
  const k = await startKiln(t);
  const r = await k.ok('publish', { path: 'site' });
  assert.equal(r.artifact, 'site', 'name defaults to the folder name');
  assert.equal(r.version, 1);
  assert.equal(r.share, 'public', 'a new artifact is public by default');
  assert.deepEqual(r.invites, []);
  assert.match(r.trace_id, /^tr_[0-9a-f]+$/);
  assert.match(r.url, /^http:\/\/127\.0\.0\.1:\d+\/a\/site\/$/);
  assert.equal(r.version_url, `${r.url}v/1/`);
  assert.equal(r.files, 4);
  assert.equal(r.bytes, Object.entries(SITE).reduce((n, [, c]) => n + Buffer.byteLength(c), 0));
  assert.equal(new URL(r.url).origin, k.daemon().url, 'the URL is the daemon of this state directory');

  // No wait, no retry: the URL works when the tool returns.
  const page = await get(r.url);
  assert.equal(page.status, 200);
  assert.match(page.headers.get('content-type'), /^text\/html/);
  assert.equal(page.text, SITE['site/index.html']);
  for (const [p, type] of [['style.css', /^text\/css/], ['data.json', /^application\/json/], ['docs/', /^text\/html/]]) {
    const f = await get(r.url + p);
    assert.equal(f.status, 200, p);
    assert.match(f.headers.get('content-type'), type, p);
  }
  assert.equal((await get(`${r.url}docs/`)).text, SITE['site/docs/index.html']);
  assert.equal((await get(r.version_url)).text, SITE['site/index.html']);
  assert.equal((await get(`${r.url}missing.html`)).status, 404);
});

test('publish a single file: served at the artifact root, name from the file name', async (t) => {
  const k = await startKiln(t, { files: { 'out/report.html': '<p>report</p>\n', 'notes.txt': 'plain notes\n' } });
  const r = await k.ok('publish', { path: 'out/report.html' });
  assert.equal(r.artifact, 'report');
  assert.equal(r.version, 1);
  assert.equal(r.files, 1);
  const page = await get(r.url);
  assert.equal(page.status, 200);
  assert.match(page.headers.get('content-type'), /^text\/html/);
  assert.equal(page.text, '<p>report</p>\n');

  const n = await k.ok('publish', { path: path.join(k.ws, 'notes.txt'), name: 'my-notes' });  // absolute, inside
  assert.equal(n.artifact, 'my-notes');
  const notes = await get(n.url);
  assert.equal(notes.status, 200);
  assert.match(notes.headers.get('content-type'), /^text\/plain/);
  assert.equal(notes.text, 'plain notes\n');
  const list = await k.ok('publish_list', {});
  assert.equal(list.artifacts.find((a) => a.name === 'report').versions[0].single_file, true);
});

test('versions: numbers go up, and an older version stays byte-identical while the workspace changes', async (t) => {
  // A small file and one over 1 MiB (the store streams those).
  const bin1 = crypto.randomBytes(70000);
  const large1 = crypto.randomBytes(1536 * 1024 + 7);
  const k = await startKiln(t, { files: { ...SITE, 'site/blob.bin': bin1, 'site/large.bin': large1 } });
  const v1 = await k.ok('publish', { path: 'site' });
  assert.equal(v1.version, 1);

  // Changed in place (same inode) and a file deleted: the published version must not follow.
  const bin2 = crypto.randomBytes(70000);
  const large2 = crypto.randomBytes(1536 * 1024 + 7);
  fs.writeFileSync(path.join(k.ws, 'site/index.html'), '<h1>Hello v2</h1>\n');
  fs.writeFileSync(path.join(k.ws, 'site/blob.bin'), bin2);
  fs.writeFileSync(path.join(k.ws, 'site/large.bin'), large2);
  fs.rmSync(path.join(k.ws, 'site/docs'), { recursive: true });
  assert.equal((await get(v1.url)).text, SITE['site/index.html'], 'latest unchanged until published again');
  assert.ok((await get(`${v1.url}blob.bin`)).body.equals(bin1));

  const v2 = await k.ok('publish', { path: 'site' });
  assert.equal(v2.version, 2);
  assert.equal(v2.url, v1.url);
  assert.equal(v2.version_url, `${v1.url}v/2/`);
  assert.equal((await get(v2.url)).text, '<h1>Hello v2</h1>\n', 'the artifact URL shows the new version at once');
  assert.ok((await get(`${v2.url}blob.bin`)).body.equals(bin2));
  assert.equal((await get(`${v2.url}docs/`)).status, 404);

  const old = await get(v1.version_url);
  assert.equal(old.status, 200);
  assert.equal(old.text, SITE['site/index.html']);
  assert.ok((await get(`${v1.version_url}blob.bin`)).body.equals(bin1), 'v1 blob.bin byte-identical');
  assert.ok((await get(`${v1.version_url}large.bin`)).body.equals(large1), 'v1 large.bin byte-identical');
  assert.ok((await get(`${v2.version_url}large.bin`)).body.equals(large2));
  assert.equal((await get(`${v1.version_url}docs/`)).text, SITE['site/docs/index.html'], 'a file deleted since stays in v1');

  const v3 = await k.ok('publish', { path: 'site' });
  assert.equal(v3.version, 3);
  assert.equal(v3.new_blobs, 0, 'unchanged content is stored once');
  const list = await k.ok('publish_list', {});
  assert.deepEqual(list.artifacts.find((a) => a.name === 'site').versions.map((v) => v.number), [1, 2, 3]);
});

test('password mode: 401 without credentials, 200 with Basic; the password is never shown or stored in clear', async (t) => {
  const k = await startKiln(t);
  const pw = randomSecret('pw one');
  const pw2 = randomSecret('pw two');
  const r = await k.ok('publish', { path: 'site', name: 'locked', share: 'password', password: pw });
  assert.equal(r.share, 'password');

  const anon = await get(r.url);
  assert.equal(anon.status, 401);
  assert.ok(/^Basic /.test(anon.headers.get('www-authenticate') ?? '') || /<form/i.test(anon.text), 'a login page or a Basic challenge');
  assert.ok(!anon.text.includes('Hello v1'), 'no content without the password');
  assert.equal((await get(r.url, { Authorization: basicAuth('wrong password') })).status, 401);
  const ok = await get(r.url, { Authorization: basicAuth(pw) });
  assert.equal(ok.status, 200);
  assert.equal(ok.text, SITE['site/index.html']);
  assert.ok(ok.cookie, 'a login sets a cookie');
  assert.equal((await get(`${r.url}style.css`, { Cookie: ok.cookie })).status, 200, 'the cookie lets the browser in');
  assert.equal((await get(r.version_url, { Authorization: basicAuth(pw) })).status, 200);
  assert.equal((await get(r.version_url)).status, 401, 'a fixed version is protected too');

  // A later publish keeps the mode and the password.
  const again = await k.ok('publish', { path: 'site', name: 'locked' });
  assert.equal(again.share, 'password');
  assert.equal((await get(again.url)).status, 401);
  assert.equal((await get(again.url, { Authorization: basicAuth(pw) })).status, 200);

  // A new password: the old one and its cookie stop working.
  const ch = await k.ok('publish_share', { artifact: 'locked', password: pw2 });
  assert.equal(ch.share, 'password');
  assert.equal(ch.has_password, true);
  assert.equal((await get(r.url, { Authorization: basicAuth(pw) })).status, 401);
  assert.equal((await get(r.url, { Cookie: ok.cookie })).status, 401);
  assert.equal((await get(r.url, { Authorization: basicAuth(pw2) })).status, 200);
  const list = await k.ok('publish_list', {});
  assert.equal(list.artifacts.find((a) => a.name === 'locked').has_password, true);

  // Nowhere: tool results, every message the server sent, the publish traces, the trace resources.
  const traceIds = [r.trace_id, again.trace_id];
  for (const id of traceIds) {
    const tr = await k.ok('trace_get', { trace_id: id });
    assert.equal(tr.trace.kind, 'publish');
    await k.call('trace_output', { trace_id: id });  // output or a tool error: either way no password
    const res = await k.client.readResource({ uri: `kiln://trace/${id}` }).catch((e) => ({ error: String(e) }));
    k.results.push(res);
  }
  const secrets = (p) => [p, encodeURIComponent(p), Buffer.from(`any:${p}`).toString('base64'), Buffer.from(p).toString('base64')];
  const seen = JSON.stringify(k.results) + JSON.stringify(k.session.wire);
  for (const p of [pw, pw2]) for (const s of secrets(p)) assert.ok(!seen.includes(s), `a password form shows in a result or message: ${s}`);

  // The state directory: every file, serve.log, the SQLite databases with their WAL files.
  const logged = await until(() => {
    try { return /artifact=locked .*outcome=allowed/.test(fs.readFileSync(path.join(k.home, 'serve.log'), 'utf8')); } catch { return false; }
  });
  assert.ok(logged, 'the access decisions reach serve.log');
  const files = filesBelow(k.home);
  const names = files.map(([p]) => path.relative(k.home, p));
  for (const must of ['serve.log', 'artifacts.db']) assert.ok(names.includes(must), `${must} in the state dir (${names.join(', ')})`);
  assert.ok(names.some((n) => n.endsWith('-wal')), 'a WAL file is among the files checked');
  for (const [p, buf] of files) {
    for (const pass of [pw, pw2]) {
      for (const s of secrets(pass)) assert.ok(!buf.includes(Buffer.from(s)), `${path.relative(k.home, p)} holds a form of the password`);
    }
  }
  await k.close();
  for (const pass of [pw, pw2]) assert.ok(!k.session.stderr.includes(pass), 'kiln mcp stderr holds the password');
});

test('invite mode: a distinct working link per name; revoke ends one link at once; the tokens are shown only once', async (t) => {
  const k = await startKiln(t);
  const r = await k.ok('publish', { path: 'site', name: 'guests', share: 'invite', invite: ['alice', 'bob'] });
  assert.equal(r.share, 'invite');
  assert.deepEqual(r.invites.map((i) => i.name).sort(), ['alice', 'bob']);
  const link = Object.fromEntries(r.invites.map((i) => [i.name, i.url]));
  assert.notEqual(link.alice, link.bob);
  const tok = { alice: tokenOf(link.alice), bob: tokenOf(link.bob) };
  for (const n of ['alice', 'bob']) {
    assert.ok(tok[n] && tok[n].length >= 32, `${n}: an unguessable token in the link`);
    assert.ok(link[n].startsWith(r.url), `${n}: the link is on the artifact URL`);
  }

  assert.equal((await get(r.url)).status, 403, 'no link: no access');
  assert.equal((await get(`${r.url}?invite=${tok.alice.slice(0, -2)}xx`)).status, 403, 'a made-up token: no access');
  const cookies = {};
  for (const n of ['alice', 'bob']) {
    const first = await get(link[n]);
    assert.ok(first.status === 200 || first.status === 303, `${n}'s link works (${first.status})`);
    assert.ok(first.cookie, `${n}: a cookie carries the access on`);
    cookies[n] = first.cookie;
    const page = await get(r.url, { Cookie: first.cookie });
    assert.equal(page.status, 200);
    assert.equal(page.text, SITE['site/index.html']);
  }

  // publish_list: names and states, never a link or token.
  const list = await k.ok('publish_list', {});
  const a = list.artifacts.find((x) => x.name === 'guests');
  assert.equal(a.share, 'invite');
  assert.deepEqual(a.invites.map((i) => [i.name, i.revoked]).sort(), [['alice', false], ['bob', false]]);
  assert.ok(!JSON.stringify(list).includes(tok.alice) && !JSON.stringify(list).includes(tok.bob), 'publish_list shows no token');

  const rv = await k.ok('publish_share', { artifact: 'guests', revoke: ['alice'] });
  assert.equal(rv.share, 'invite');
  assert.equal(rv.all_invites.find((i) => i.name === 'alice').revoked, true);
  assert.equal((await get(link.alice)).status, 403, 'revoked link');
  assert.equal((await get(r.url, { Cookie: cookies.alice })).status, 403, 'revoked cookie');
  assert.equal((await get(r.url, { Cookie: cookies.bob })).status, 200, 'bob keeps access');
  assert.ok([200, 303].includes((await get(link.bob)).status), 'bob link still works');

  // A new link for alice: revoke and invite in one call.
  const re = await k.ok('publish_share', { artifact: 'guests', revoke: ['alice'], invite: ['alice'] });
  assert.equal(re.invites.length, 1);
  assert.notEqual(tokenOf(re.invites[0].url), tok.alice);
  assert.ok([200, 303].includes((await get(re.invites[0].url)).status), 'the new link works');
  assert.equal((await get(link.alice)).status, 403, 'the old link stays dead');

  // Invite tokens are stored only as hashes.
  await until(() => {
    try { return /artifact=guests .*outcome=denied/.test(fs.readFileSync(path.join(k.home, 'serve.log'), 'utf8')); } catch { return false; }
  });
  for (const [p, buf] of filesBelow(k.home)) {
    for (const s of [tok.alice, tok.bob, tokenOf(re.invites[0].url)]) assert.ok(!buf.includes(Buffer.from(s)), `${path.relative(k.home, p)} holds an invite token`);
  }
});

test('invite expiry: expires_in_s ends the links; expires_in_s 0 and a fresh invite restore access', async (t) => {
  const k = await startKiln(t);
  const r = await k.ok('publish', { path: 'site', name: 'brief', share: 'invite', invite: ['carol'], expires_in_s: 2 });
  assert.ok(r.invites[0].expires_at, 'the invite carries its expiry');
  const first = await get(r.invites[0].url);
  assert.ok([200, 303].includes(first.status), `works before expiry (${first.status})`);
  const late = await until(async () => {
    const x = await get(r.invites[0].url);
    return [403, 410].includes(x.status) ? x : null;
  });
  assert.ok(late, 'the invite link stops working after its expiry');
  assert.ok([403, 410].includes((await get(r.url, { Cookie: first.cookie })).status), 'its cookie stops too');
  const list = await k.ok('publish_list', {});
  const a = list.artifacts.find((x) => x.name === 'brief');
  assert.equal(a.invites[0].expired, true);

  await k.ok('publish_share', { artifact: 'brief', expires_in_s: 0 });
  assert.equal((await get(r.invites[0].url)).status, 403, 'an expired invite stays expired');
  const again = await k.ok('publish_share', { artifact: 'brief', invite: ['carol'] });
  assert.equal(again.invites[0].expires_at, null);
  assert.ok([200, 303].includes((await get(again.invites[0].url)).status), 'a fresh invite works');

  // publish_share can give a link with an expiry to an existing invite artifact.
  const dave = await k.ok('publish_share', { artifact: 'brief', invite: ['dave'], expires_in_s: 2 });
  assert.ok([200, 303].includes((await get(dave.invites[0].url)).status));
  assert.ok(await until(async () => [403, 410].includes((await get(dave.invites[0].url)).status)), 'dave link expires');
});

test('artifact expiry: expires_in_s stops serving; a new publish gives a URL that works; 0 removes the expiry', async (t) => {
  const k = await startKiln(t);
  const r = await k.ok('publish', { path: 'site', name: 'temp', expires_in_s: 2 });
  assert.ok(r.expires_at, 'expires_at in the result');
  assert.equal((await get(r.url)).status, 200, 'works before expiry');
  const gone = await until(async () => (await get(r.url)).status !== 200);
  assert.ok(gone, 'the artifact stops being served after its expiry');
  assert.ok([403, 404, 410].includes((await get(r.url)).status));
  assert.equal((await k.ok('publish_list', {})).artifacts.find((a) => a.name === 'temp').expired, true);

  // The contract: publish "returns a URL that works". Either the expired artifact is served
  // again, or publish says why it would not be.
  const v2 = await k.call('publish', { path: 'site', name: 'temp' });
  if (!v2.isError) {
    const page = await get(v2.structuredContent.url);
    assert.equal(page.status, 200, `publish v${v2.structuredContent.version} of an expired artifact returned a URL that answers ${page.status} (expires_at ${v2.structuredContent.expires_at})`);
  } else {
    assert.match(errorText(v2), /expire/);
  }
  await k.ok('publish_share', { artifact: 'temp', expires_in_s: 0 });
  assert.equal((await get(r.url)).status, 200, 'expires_in_s 0 serves it again');
});

test('publish_share switches modes: public -> password -> public -> password -> invite -> public', async (t) => {
  const k = await startKiln(t);
  const pw = randomSecret('switch');
  const pw2 = randomSecret('switch again');
  const r = await k.ok('publish', { path: 'site', name: 'flip' });
  assert.equal((await get(r.url)).status, 200);

  let s = await k.ok('publish_share', { artifact: 'flip', share: 'password', password: pw });
  assert.equal(s.share, 'password');
  assert.equal(s.has_password, true);
  assert.equal(s.url, r.url);
  assert.equal((await get(r.url)).status, 401);
  const login = await get(r.url, { Authorization: basicAuth(pw) });
  assert.equal(login.status, 200);

  s = await k.ok('publish_share', { artifact: 'flip', share: 'public' });
  assert.equal(s.share, 'public');
  assert.equal(s.has_password, false, 'leaving password mode forgets the password');
  assert.equal((await get(r.url)).status, 200);
  assert.equal((await get(r.version_url)).status, 200);

  assert.match(await k.err('publish_share', { artifact: 'flip', share: 'password' }), /password/, 'the old password is gone');
  s = await k.ok('publish_share', { artifact: 'flip', share: 'password', password: pw2 });
  assert.equal((await get(r.url)).status, 401);
  assert.equal((await get(r.url, { Cookie: login.cookie })).status, 401, 'a cookie from the earlier password period no longer works');
  assert.equal((await get(r.url, { Authorization: basicAuth(pw) })).status, 401, 'the earlier password no longer works');
  assert.equal((await get(r.url, { Authorization: basicAuth(pw2) })).status, 200);

  s = await k.ok('publish_share', { artifact: 'flip', share: 'invite', invite: ['erin'] });
  assert.equal(s.share, 'invite');
  assert.equal(s.invites.length, 1);
  assert.equal((await get(r.url)).status, 403);
  assert.equal((await get(r.url, { Authorization: basicAuth(pw2) })).status, 403, 'the password does not open an invite artifact');
  assert.ok([200, 303].includes((await get(s.invites[0].url)).status));

  s = await k.ok('publish_share', { artifact: 'flip', share: 'public' });
  assert.equal(s.share, 'public');
  assert.equal((await get(r.url)).status, 200);
  assert.equal((await k.ok('publish_list', {})).artifacts[0].share, 'public');
  const seen = JSON.stringify(k.results);
  assert.ok(!seen.includes(pw) && !seen.includes(pw2), 'no result shows a password');
});

test('publish_list: each artifact with share mode, URL and versions; per workspace', async (t) => {
  const k = await startKiln(t, { files: { ...SITE, 'report.html': '<p>r</p>\n' } });
  const pw = randomSecret('list');
  const a1 = await k.ok('publish', { path: 'site' });
  const a2 = await k.ok('publish', { path: 'site' });
  const b = await k.ok('publish', { path: 'report.html', share: 'password', password: pw });
  const c = await k.ok('publish', { path: 'site', name: 'club', share: 'invite', invite: ['fred'] });
  const list = await k.ok('publish_list', {});
  assert.equal(list.base_url, new URL(a1.url).origin);
  assert.deepEqual(list.artifacts.map((a) => a.name).sort(), ['club', 'report', 'site']);
  const by = Object.fromEntries(list.artifacts.map((a) => [a.name, a]));
  assert.equal(by.site.share, 'public');
  assert.equal(by.report.share, 'password');
  assert.equal(by.club.share, 'invite');
  assert.equal(by.site.url, a1.url);
  assert.equal(by.site.latest, 2);
  assert.deepEqual(by.site.versions.map((v) => [v.number, v.url, v.trace_id, v.source_path]),
    [[1, a1.version_url, a1.trace_id, 'site'], [2, a2.version_url, a2.trace_id, 'site']]);
  assert.equal(by.report.versions[0].single_file, true);
  assert.equal(by.report.versions[0].trace_id, b.trace_id);
  assert.deepEqual(by.club.invites.map((i) => i.name), ['fred']);
  assert.ok(!JSON.stringify(list).includes(tokenOf(c.invites[0].url)));
  assert.ok(!JSON.stringify(list).includes(pw));
  for (const a of list.artifacts) {
    for (const v of a.versions) assert.ok([200, 401, 403].includes((await get(v.url)).status), `${v.url} answers`);
  }
  assert.equal((await get(by.site.versions[0].url)).status, 200);

  // Another workspace in the same state directory lists only its own.
  const other = makeWs({ 'x/index.html': 'x' });
  const opened = await k.ok('workspace_open', { path: other });
  assert.deepEqual((await k.ok('publish_list', {})).artifacts, []);
  await k.ok('publish', { path: 'x', name: 'other-x' });
  assert.deepEqual((await k.ok('publish_list', {})).artifacts.map((a) => a.name), ['other-x']);
  const first = (await k.ok('workspace_list', {})).workspaces.find((w) => w.root === k.ws);
  assert.deepEqual((await k.ok('publish_list', { workspace: first.id })).artifacts.map((a) => a.name).sort(), ['club', 'report', 'site']);
  assert.notEqual(opened.id, first.id);
});

test('unpublish one version: its /v/N/ is gone, the others stay, numbers are not reused', async (t) => {
  const k = await startKiln(t);
  const idx = path.join(k.ws, 'site/index.html');
  const pubs = [];
  for (const n of [1, 2, 3]) {
    fs.writeFileSync(idx, `<h1>content ${n}</h1>\n`);
    pubs.push(await k.ok('publish', { path: 'site', name: 'multi' }));
  }
  assert.deepEqual(pubs.map((p) => p.version), [1, 2, 3]);
  const u = await k.ok('unpublish', { artifact: 'multi', version: 2 });
  assert.deepEqual(u.removed, [2]);
  assert.notEqual(u.artifact_removed, true);
  assert.equal((await get(pubs[1].version_url)).status, 404, 'v2 is gone');
  assert.equal((await get(pubs[0].version_url)).text, '<h1>content 1</h1>\n', 'v1 stays');
  assert.equal((await get(pubs[2].version_url)).text, '<h1>content 3</h1>\n', 'v3 stays');
  assert.equal((await get(pubs[0].url)).text, '<h1>content 3</h1>\n', 'latest is still v3');
  assert.deepEqual((await k.ok('publish_list', {})).artifacts[0].versions.map((v) => v.number), [1, 3]);

  // Removing the latest: the artifact URL falls back to the newest one left.
  await k.ok('unpublish', { artifact: 'multi', version: 3 });
  assert.equal((await get(pubs[0].url)).text, '<h1>content 1</h1>\n');
  assert.equal((await get(pubs[2].version_url)).status, 404);
  fs.writeFileSync(idx, '<h1>content 4</h1>\n');
  const v4 = await k.ok('publish', { path: 'site', name: 'multi' });
  assert.equal(v4.version, 4, 'version numbers are never reused');
  assert.equal((await get(pubs[2].version_url)).status, 404, '/v/3/ stays gone');
  assert.match(await k.err('unpublish', { artifact: 'multi', version: 2 }), /2/, 'an already removed version');
});

test('unpublish a whole artifact: every URL 404s, it leaves publish_list, other artifacts stay', async (t) => {
  const k = await startKiln(t);
  const a = await k.ok('publish', { path: 'site', name: 'gone' });
  await k.ok('publish', { path: 'site', name: 'gone' });
  const keep = await k.ok('publish', { path: 'site', name: 'keep' });  // shares every blob with "gone"
  const u = await k.ok('unpublish', { artifact: 'gone' });
  assert.deepEqual(u.removed, [1, 2]);
  assert.equal(u.artifact_removed, true);
  for (const url of [a.url, a.version_url, `${a.url}v/2/`, `${a.url}style.css`]) assert.equal((await get(url)).status, 404, url);
  assert.deepEqual((await k.ok('publish_list', {})).artifacts.map((x) => x.name), ['keep']);
  assert.equal((await get(`${keep.url}style.css`)).text, SITE['site/style.css'], 'shared content stays for the other artifact');
  assert.match(await k.err('unpublish', { artifact: 'gone' }), /gone/);
});

test('unpublish: the URLs stop at once, also right after they were served', async (t) => {
  // unpublish: "Its URLs stop working at once". Each round serves a URL (so the daemon has it
  // fresh), removes it, and asks again, on the same keep-alive connection, as soon as the tool has
  // answered. A stale answer is a race, so there are many rounds.
  const k = await startKiln(t);
  await k.ok('publish', { path: 'site', name: 'base' });  // the rounds' blobs stay in the store
  const stale = [];
  for (let i = 0; i < 100; i++) {
    const a = await k.ok('publish', { path: 'site', name: `quick-${i}` });
    for (let j = 0; j < 3; j++) assert.equal((await get(a.url)).status, 200);
    await k.ok('unpublish', { artifact: `quick-${i}` });
    const st = (await get(a.url)).status;
    if (st !== 404) stale.push(`round ${i}: ${a.url} -> ${st} right after unpublish`);
  }
  for (let i = 0; i < 10; i++) {
    const v = await k.ok('publish', { path: 'site', name: 'base' });
    for (let j = 0; j < 3; j++) assert.equal((await get(v.version_url)).status, 200);
    await k.ok('unpublish', { artifact: 'base', version: v.version });
    const st = (await get(v.version_url)).status;
    if (st !== 404) stale.push(`version round ${i}: ${v.version_url} -> ${st} right after unpublish of v${v.version}`);
  }
  assert.deepEqual(stale, [], 'removed URLs still served');
});

test('a re-created artifact does not reuse the version numbers its URLs were served under', async (t) => {
  // /a/NAME/v/N/ is served as "immutable" for a year; a new v1 under the same URL would never reach
  // a browser that saw the old one. (unpublish: "Version numbers are never reused.")
  const k = await startKiln(t);
  const v1 = await k.ok('publish', { path: 'site', name: 'again' });
  const cached = await get(v1.version_url);
  assert.match(cached.headers.get('cache-control') ?? '', /immutable/);
  await k.ok('unpublish', { artifact: 'again' });
  fs.writeFileSync(path.join(k.ws, 'site/index.html'), '<h1>other content</h1>\n');
  const n = await k.ok('publish', { path: 'site', name: 'again' });
  assert.notEqual(n.version_url, v1.version_url, `the new content is served at ${n.version_url}, the URL the old v1 was served at as immutable`);
});

test('trace_list kind publish: one trace per publish, matching the results; a failed publish leaves an error trace', async (t) => {
  const k = await startKiln(t, { files: { ...SITE, 'one.txt': '1\n' } });
  const done = [
    await k.ok('publish', { path: 'site' }),
    await k.ok('publish', { path: 'one.txt' }),
    await k.ok('publish', { path: 'site' }),
  ];
  const list = await k.ok('trace_list', { kind: 'publish' });
  assert.equal(list.traces.length, 3, JSON.stringify(list.traces.map((x) => x.command)));
  assert.deepEqual(list.traces.map((x) => x.trace_id).sort(), done.map((d) => d.trace_id).sort());
  for (const x of list.traces) {
    assert.equal(x.kind, 'publish');
    assert.equal(x.status, 'pass');
  }
  assert.equal((await k.ok('trace_list', { kind: 'exec' })).traces.length, 0);
  const tr = (await k.ok('trace_get', { trace_id: done[2].trace_id })).trace;
  assert.equal(tr.kind, 'publish');
  assert.equal(tr.status, 'pass');
  assert.equal(tr.result.artifact, 'site');
  assert.equal(tr.result.version, 2);
  assert.equal(tr.client.name, 'kiln-publish-e2e');

  const bad = await k.err('publish', { path: 'no/such/dir' });
  const id = /tr_[0-9a-f]+/.exec(bad)?.[0];
  assert.ok(id, `the error names its trace: ${bad}`);
  const after = await k.ok('trace_list', { kind: 'publish' });
  assert.equal(after.traces.length, 4);
  assert.equal(after.traces.find((x) => x.trace_id === id).status, 'error');
});

test('trace_output of a publish trace answers without pointing at steps that do not exist', async (t) => {
  const k = await startKiln(t);
  const r = await k.ok('publish', { path: 'site' });
  const tr = (await k.ok('trace_get', { trace_id: r.trace_id })).trace;
  const out = await k.call('trace_output', { trace_id: r.trace_id });
  if (out.isError) {
    // A publish has no children: sending the agent to look for its steps is a dead end.
    const children = tr.children ?? [];
    assert.ok(!/steps|children/.test(errorText(out)) || children.length > 0,
      `trace_output says "${errorText(out)}" but trace_get shows no children`);
  }
});

test('workspace_info lists the published artifacts', async (t) => {
  const k = await startKiln(t, { files: { ...SITE, 'r.html': 'r' } });
  await k.ok('publish', { path: 'site' });
  await k.ok('publish', { path: 'r.html', name: 'rep' });
  const info = await k.ok('workspace_info', {});
  const names = (info.artifacts ?? []).map((a) => a.name ?? a.artifact).sort();
  assert.deepEqual(names, ['rep', 'site'], `workspace_info.artifacts: ${JSON.stringify(info.artifacts)}`);
});

test('the daemon outlives kiln mcp (killed), and the next session finds and reuses it', async (t) => {
  const home = tempDir('kiln-pub-home-');
  const k = await startKiln(t, { home });
  const r = await k.ok('publish', { path: 'site' });
  const info = k.daemon();
  assert.ok(info && alive(info.pid), 'serve.json names a live daemon');
  assert.equal(new URL(r.url).origin, info.url);
  const st = procStat(info.pid);
  assert.notEqual(st.ppid, k.pid, 'not a child of kiln mcp');
  assert.notEqual(st.sid, procStat(k.pid).sid, 'its own session');

  process.kill(k.pid, 'SIGKILL');
  assert.ok(await until(() => !alive(k.pid)), 'kiln mcp is gone');
  await k.close();
  const page = await get(r.url);
  assert.equal(page.status, 200, 'the URL still answers');
  assert.equal(page.text, SITE['site/index.html']);
  assert.ok(alive(info.pid));

  const k2 = await startKiln(t, { home, ws: k.ws });
  const list = await k2.ok('publish_list', {});
  assert.equal(list.base_url, info.url, 'publish_list finds the running daemon');
  const again = await k2.ok('publish', { path: 'site' });
  assert.equal(again.version, 2);
  assert.equal(new URL(again.url).origin, info.url, 'no second daemon');
  assert.equal(k2.daemon().pid, info.pid);
  assert.equal((await get(again.version_url)).status, 200);
});

test('a dead daemon is replaced by the next publish; earlier versions are served again', async (t) => {
  const k = await startKiln(t);
  const r = await k.ok('publish', { path: 'site' });
  const first = k.daemon();
  process.kill(first.pid, 'SIGKILL');
  assert.ok(await until(() => !alive(first.pid)));
  const list = await k.ok('publish_list', {});
  assert.equal(list.artifacts.length, 1);
  assert.ok(list.serve_error, 'publish_list says no server answers');
  const r2 = await k.ok('publish', { path: 'site' });
  assert.equal(r2.serve_error, undefined);
  const second = k.daemon();
  assert.notEqual(second.pid, first.pid);
  assert.equal((await get(r2.url)).status, 200);
  const old = new URL(new URL(r.version_url).pathname, new URL(r2.url).origin).href;
  assert.equal((await get(old)).text, SITE['site/index.html']);
});

test('SIGTERM stops the daemon cleanly and removes serve.json', async (t) => {
  const k = await startKiln(t);
  const r = await k.ok('publish', { path: 'site' });
  const info = k.daemon();
  await k.close();
  assert.equal((await get(r.url)).status, 200);
  process.kill(info.pid, 'SIGTERM');
  assert.ok(await until(() => !alive(info.pid)), 'the daemon exits on SIGTERM');
  assert.equal(readServeInfo(k.home), undefined, 'serve.json removed');
});

test('symlinks inside a published folder are skipped, never followed', async (t) => {
  const outside = tempDir('kiln-pub-outside-');
  fs.writeFileSync(path.join(outside, 'secret.txt'), 'outside secret\n');
  const k = await startKiln(t);
  fs.symlinkSync(path.join(outside, 'secret.txt'), path.join(k.ws, 'site/leak.txt'));
  fs.symlinkSync(outside, path.join(k.ws, 'site/leakdir'));
  const r = await k.ok('publish', { path: 'site' });
  assert.equal(r.files, 4);
  assert.equal(r.skipped_symlinks, 2);
  assert.equal((await get(`${r.url}leak.txt`)).status, 404);
  assert.equal((await get(`${r.url}leakdir/secret.txt`)).status, 404);
});

test('bad input: tool errors (isError) that say what is wrong, and nothing is published', async (t) => {
  const outside = tempDir('kiln-pub-outside-');
  fs.writeFileSync(path.join(outside, 'index.html'), 'outside\n');
  const k = await startKiln(t, { files: { ...SITE, 'empty/.keep-dir': '' } });
  fs.rmSync(path.join(k.ws, 'empty/.keep-dir'));
  fs.symlinkSync(outside, path.join(k.ws, 'link-out'));
  const pw = randomSecret('bad');

  const cases = [
    ['publish', { path: '../outside' }, /outside the workspace/, 'a path with ..'],
    ['publish', { path: 'site/../../x' }, /outside the workspace/, 'a path climbing out'],
    ['publish', { path: outside }, /outside the workspace/, 'an absolute path elsewhere'],
    ['publish', { path: '/etc' }, /outside the workspace/, 'an absolute system path'],
    ['publish', { path: 'link-out' }, /outside the workspace|symbolic link/, 'a symlink pointing out'],
    ['publish', { path: 'link-out/index.html' }, /outside the workspace|symbolic link/, 'through a symlink pointing out'],
    ['publish', { path: '/proc/self/root/etc' }, /outside the workspace/, '/proc/self/root'],
    ['publish', { path: 'nope' }, /does not exist|not found|no such/i, 'a missing path'],
    ['publish', {}, /path/, 'no path at all'],
    ['publish', { path: '' }, /path/, 'an empty path'],
    ['publish', { path: 'empty' }, /no files/, 'an empty folder'],
    ['publish', { path: 'site', share: 'password' }, /needs a password.*pass password/, 'share password without a password'],
    ['publish', { path: 'site', share: 'secret' }, /share.*(public|password|invite)/, 'an unknown share mode'],
    ['publish', { path: 'site', name: 'Bad_Name' }, /name/, 'an invalid name (upper case, underscore)'],
    ['publish', { path: 'site', name: '-dash' }, /name/, 'a name starting with -'],
    ['publish', { path: 'site', name: 'a/b' }, /name/, 'a name with /'],
    ['publish', { path: 'site', name: 'x'.repeat(65) }, /name/, 'a 65-char name'],
    ['publish', { path: 'site', share: 'invite', invite: ['bad/name'] }, /invite/, 'an invalid invite name'],
    ['publish', { path: 'site', password: pw, invite: ['gil'] }, /share/, 'a password and invites without share'],
    ['publish', { path: 'site', share: 'public', password: pw }, /password/, 'a password for a public artifact'],
    ['publish', { path: 'site', expires_in_s: -1 }, /expires_in_s/, 'a negative expiry'],
    ['publish', { path: 'site', bogus: 1 }, /bogus/, 'an unknown argument'],
    ['publish_share', { artifact: 'nope', share: 'public' }, /nope/, 'publish_share of an unknown artifact'],
    ['unpublish', { artifact: 'nope' }, /no artifact.*nope/, 'unpublish of an unknown artifact'],
    ['unpublish', { artifact: '../site' }, /artifact/, 'unpublish of a path-like name'],
  ];
  for (const [tool, args, re, what] of cases) {
    const text = await k.err(tool, args);
    assert.match(text, re, `${what}: ${text}`);
    assert.ok(!text.includes(pw), `${what}: the error shows the password`);
  }
  assert.deepEqual((await k.ok('publish_list', {})).artifacts, [], 'nothing was published');

  // Errors on an existing artifact.
  await k.ok('publish', { path: 'site' });
  for (const [tool, args, re, what] of [
    ['publish_share', { artifact: 'site', share: 'nope' }, /share/, 'an unknown share mode'],
    ['publish_share', { artifact: 'site', share: 'password' }, /needs a password.*pass password/, 'password mode without a password'],
    ['publish_share', { artifact: 'site', revoke: ['zed'] }, /zed/, 'revoking a name never invited'],
    ['publish_share', { artifact: 'site', share: 'public', invite: ['hal'] }, /invite/, 'invites on a public artifact'],
    ['unpublish', { artifact: 'site', version: 7 }, /7/, 'an unknown version'],
    ['unpublish', { artifact: 'site', version: 0 }, /version/, 'version 0'],
  ]) {
    const text = await k.err(tool, args);
    assert.match(text, re, `${what}: ${text}`);
  }
  const inv = await k.ok('publish_share', { artifact: 'site', share: 'invite', invite: ['ivy'] });
  assert.match(await k.err('publish_share', { artifact: 'site', invite: ['ivy'] }), /revoke.*invite/, 'inviting a live name again says how to send a new link');
  assert.ok([200, 303].includes((await get(inv.invites[0].url)).status), 'the failed call left the link working');
  const list = await k.ok('publish_list', {});
  assert.deepEqual(list.artifacts.map((a) => [a.name, a.share, a.latest]), [['site', 'invite', 1]]);
});

test('another workspace cannot take over, reshare or remove an artifact', async (t) => {
  const home = tempDir('kiln-pub-home-');
  const a = await startKiln(t, { home });
  const r = await a.ok('publish', { path: 'site', name: 'mine' });
  const b = await startKiln(t, { home, files: { 'site/index.html': '<h1>intruder</h1>\n' } });
  assert.match(await b.err('publish', { path: 'site', name: 'mine' }), /another workspace/);
  assert.deepEqual((await b.ok('publish_list', {})).artifacts, []);
  const share = await b.call('publish_share', { artifact: 'mine', share: 'invite', invite: ['mallory'] });
  const un = await b.call('unpublish', { artifact: 'mine' });
  const page = await get(r.url);
  assert.equal(page.status, 200, `the owner's artifact answers ${page.status} after another workspace's publish_share (isError ${share.isError}) and unpublish (isError ${un.isError})`);
  assert.equal(page.text, SITE['site/index.html']);
  assert.equal(share.isError, true, 'publish_share from another workspace is refused');
  assert.equal(un.isError, true, 'unpublish from another workspace is refused');
  assert.match(errorText(un), /another workspace/);

  // Naming the owning workspace is the way to change it from elsewhere.
  const owner = (await a.ok('workspace_info', {})).id;
  assert.deepEqual((await b.ok('publish_list', { workspace: owner })).artifacts.map((x) => x.name), ['mine']);
  const s2 = await b.ok('publish_share', { artifact: 'mine', workspace: owner, share: 'password', password: randomSecret('owner') });
  assert.equal(s2.share, 'password');
  assert.equal((await get(r.url)).status, 401);
  assert.deepEqual((await b.ok('unpublish', { artifact: 'mine', workspace: owner })).removed, [1]);
  assert.equal((await get(r.url)).status, 404);
});
