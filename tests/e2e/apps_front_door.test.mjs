// kiln serve as an app's front door (TOOLS.md "Apps"), tried from outside over plain HTTP: the
// echo app (tests/lib/echo_app.cjs) is published three times (public, password, invite) and logs
// every request it gets in its data folder, so a refused request that left a line there reached it.
// Then the headers the app sees, 50 MB each way with kiln serve's memory watched, WebSocket,
// keep-alive, files that are read-only while KILN_DATA_DIR is not, a sleeping app that refused
// requests do not wake, and a hung app that holds up nobody else while its own limits answer.
// Skipped when the sandbox cannot run here (failed under KILN_REQUIRE_SANDBOX=1).
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after } from 'node:test';

import {
  appRequests, appWorkspace, patternBlock, procStatusKb, publishApp, resetPeakRss, rssSampler, startAppKiln, waitForState,
  wsConnect,
} from '../lib/apps.mjs';
import { basicAuth, cookieOf, rawExchange, request } from '../lib/http.mjs';
import { probeSandbox } from '../lib/sandbox_probe.mjs';

const PASSWORD = 'app door pass 731';
const mark = () => `m${crypto.randomBytes(5).toString('hex')}`;
const ws = appWorkspace({ files: { 'site/index.html': '<p>static next door</p>\n' } });
const k = await startAppKiln({ ws });
after(() => k.stop());
// A second workspace on the same state dir (and so the same kiln serve): an app that sleeps after
// 2 s idle, takes 4 requests at once and 2 s to start answering.
const tightWs = appWorkspace({ app: { idle_s: 2, max_connections: 4, request_timeout_s: 2 } });
let tight;
after(() => tight?.close());
const gate = await probeSandbox('apps front door e2e', k.call);

// Published once, on first use: the same files as three apps behind the three share modes.
let apps;
async function setup() {
  if (apps) return apps;
  const pub = await publishApp(k, { name: 'pub', share: 'public' });
  const pw = await publishApp(k, { name: 'pw', share: 'password', password: PASSWORD });
  const inv = await publishApp(k, { name: 'inv', share: 'invite', invite: ['alice', 'bob'] });
  for (const a of ['pub', 'pw', 'inv']) await waitForState(k, a);
  const links = Object.fromEntries(inv.invites.map((i) => [i.name, i.url]));
  assert.ok(links.alice && links.bob, `an invite link each for alice and bob: ${JSON.stringify(inv.invites)}`);
  apps = { base: pub.base, pub, pw, inv, links, cookies: {} };
  return apps;
}

// Follows an invite link the way a browser would: 303 without the token, and a cookie.
async function inviteCookie(who) {
  const a = await setup();
  if (a.cookies[who]) return a.cookies[who];
  const u = new URL(a.links[who]);
  const r = await request(a.base, u.pathname + u.search);
  assert.equal(r.status, 303, `${who}'s invite link: ${r.status} ${r.text.slice(0, 200)}`);
  assert.ok(!r.headers.location.includes('invite='), `the redirect keeps the token: ${r.headers.location}`);
  a.cookies[who] = cookieOf(r);
  assert.match(a.cookies[who] ?? '', /^kiln_session=./, 'the invite link sets kiln_session');
  return a.cookies[who];
}

const json = (r, what) => {
  assert.equal(r.status, 200, `${what}: ${r.status} ${r.text.slice(0, 300)}`);
  try { return JSON.parse(r.text); } catch { return assert.fail(`${what}: not the app's JSON: ${r.text.slice(0, 300)}`); }
};
const logText = async (name) => JSON.stringify(await appRequests(k, name));

gate.test('share modes decide first: refused requests never reach the app (its own log shows none of them)', async () => {
  const { base } = await setup();
  const refused = [];  // [marker, what]
  const refuse = async (what, expect, target, opts = {}) => {
    const m = mark();
    refused.push([m, what]);
    const r = await request(base, target.replace('MARK', m), opts);
    assert.ok(expect.includes(r.status), `${what}: expected ${expect}, got ${r.status} ${r.text.slice(0, 200)}`);
    return r;
  };
  // password
  await refuse('pw without credentials', [401], '/a/pw/MARK');
  await refuse('pw with a wrong Basic password', [401], '/a/pw/MARK', { headers: { Authorization: basicAuth('wrong') } });
  await refuse('pw with a made-up cookie', [401], '/a/pw/MARK', { headers: { Cookie: 'kiln_session=forged0123456789' } });
  await refuse('pw: a POST body without credentials', [401], '/a/pw/echo?MARK', { method: 'POST', body: 'secret=1', headers: { 'Content-Type': 'text/plain' } });
  await refuse('pw: HEAD without credentials', [401], '/a/pw/MARK', { method: 'HEAD' });
  await refuse('pw: a client-sent X-Kiln-User without credentials', [401], '/a/pw/MARK', { headers: { 'X-Kiln-User': 'password' } });
  // invite
  await refuse('inv without anything', [403], '/a/inv/MARK');
  await refuse('inv with a made-up token', [403], '/a/inv/MARK?invite=notatoken');
  await refuse('inv with a made-up cookie', [403], '/a/inv/MARK', { headers: { Cookie: 'kiln_session=forged0123456789' } });
  await refuse('inv with Basic and the pw app\'s password', [403, 401], '/a/inv/MARK', { headers: { Authorization: basicAuth(PASSWORD) } });
  await refuse('inv: a spoofed X-Kiln-User: alice', [403], '/a/inv/MARK', { headers: { 'X-Kiln-User': 'alice' } });
  const wsMark = mark();
  refused.push([wsMark, 'inv: a WebSocket upgrade without a cookie']);
  const up = await wsConnect(base, '/a/inv/ws', { 'X-Test-Marker': wsMark });
  assert.notEqual(up.status, 101, 'a WebSocket upgrade to an invite app without a cookie was let through');
  up.close?.();

  // Admitted: each leaves its line, so the log is known to work.
  const admitted = [];
  const admit = async (what, target, opts = {}) => {
    const m = mark();
    admitted.push([m, what]);
    const r = await request(base, target.replace('MARK', m), opts);
    assert.equal(r.status, 200, `${what}: ${r.status} ${r.text.slice(0, 200)}`);
  };
  await admit('pub', '/a/pub/echo?MARK');
  await admit('pw with the right Basic password', '/a/pw/echo?MARK', { headers: { Authorization: basicAuth(PASSWORD) } });
  const alice = await inviteCookie('alice');
  await admit('inv with alice\'s cookie', '/a/inv/echo?MARK', { headers: { Cookie: alice } });

  // Bob, once revoked, is refused too, also with the cookie he already has.
  const bob = await inviteCookie('bob');
  await admit('inv with bob\'s cookie before the revoke', '/a/inv/echo?MARK', { headers: { Cookie: bob } });
  await k.ok('publish_share', { artifact: 'inv', revoke: ['bob'] });
  await refuse('inv with bob\'s cookie after the revoke', [403], '/a/inv/MARK', { headers: { Cookie: bob } });

  const logs = {};
  for (const name of ['pub', 'pw', 'inv']) logs[name] = await logText(name);
  const all = Object.values(logs).join('\n');
  for (const [m, what] of admitted) assert.ok(all.includes(m), `control: the admitted request "${what}" left no line in the app's log`);
  const leaked = refused.filter(([m]) => all.includes(m)).map(([, what]) => what);
  assert.deepEqual(leaked, [], `refused requests reached the app: ${leaked.join('; ')}`);
  // The app's own /log (only for admitted users) says the same as the file on the host.
  const viaApp = await request(base, '/a/pw/log', { headers: { Authorization: basicAuth(PASSWORD) } });
  assert.equal(viaApp.status, 200);
  for (const [m, what] of refused) assert.ok(!viaApp.text.includes(m), `the pw app's /log shows "${what}"`);
});

gate.test('headers: prefix removed, X-Forwarded-* and X-Kiln-User set; cookie, Authorization, invite and client X-Kiln-* gone', async () => {
  const { base } = await setup();
  const port = new URL(base).port;
  // A real session cookie of the pw app, from its login form.
  const login = await request(base, '/a/pw/_kiln/login', {
    method: 'POST', body: `password=${encodeURIComponent(PASSWORD)}&next=%2Fa%2Fpw%2F`,
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
  });
  assert.equal(login.status, 303, `login form: ${login.status}`);
  const session = cookieOf(login);
  const sessionValue = session.split('=')[1];
  const spoof = {
    'X-Kiln-User': 'admin', 'x-kiln-principal': 'root', 'X-Kiln-Anything': 'x', 'X-Forwarded-Prefix': '/evil',
    'X-Forwarded-Host': 'evil.example', 'X-Forwarded-Proto': 'https', 'X-Custom': 'kept',
  };
  const viaBasic = json(await request(base, '/a/pw/echo?x=1&y=two', {
    headers: { ...spoof, Authorization: basicAuth(PASSWORD), Cookie: 'theme=dark' },
  }), 'pw with Basic');
  const viaCookie = json(await request(base, '/a/pw/echo?x=1&y=two', {
    headers: { ...spoof, Cookie: `theme=dark; ${session}; other=1` },
  }), 'pw with the session cookie');
  for (const [what, e] of [['Basic', viaBasic], ['cookie', viaCookie]]) {
    const h = e.headers;
    assert.equal(e.url, '/echo?x=1&y=two', `${what}: the app sees the path without /a/pw`);
    assert.equal(h['x-kiln-user'], 'password', `${what}: X-Kiln-User`);
    assert.deepEqual(Object.keys(h).filter((n) => n.startsWith('x-kiln-')), ['x-kiln-user'], `${what}: client X-Kiln-* headers reached the app`);
    assert.equal(h['x-forwarded-prefix'], '/a/pw', `${what}: X-Forwarded-Prefix`);
    assert.equal(h['x-forwarded-host'], `127.0.0.1:${port}`, `${what}: X-Forwarded-Host`);
    assert.equal(h['x-forwarded-proto'], 'http', `${what}: X-Forwarded-Proto`);
    assert.equal(h.authorization, undefined, `${what}: the Authorization header reached the app`);
    assert.equal(h['x-custom'], 'kept', `${what}: an ordinary header was dropped`);
    assert.ok(!JSON.stringify(e).includes(sessionValue), `${what}: Kiln's session cookie reached the app`);
    assert.ok(!JSON.stringify(e).includes(Buffer.from(`any:${PASSWORD}`).toString('base64')), `${what}: the Basic credentials reached the app`);
    assert.equal(e.env.KILN_BASE_PATH, '/a/pw/');
    assert.match(e.env.PORT ?? '', /^\d+$/);
    assert.ok(e.env.KILN_DATA_DIR, 'KILN_DATA_DIR set');
  }
  assert.equal(viaBasic.headers.cookie, 'theme=dark', 'the app\'s own cookies pass');
  assert.equal(viaCookie.headers.cookie, 'theme=dark; other=1', 'the app\'s own cookies pass, Kiln\'s is taken out');

  // Public: a spoofed X-Kiln-User, also sent twice and in odd case on the raw wire.
  const raw = await rawExchange(base, 'GET /a/pub/echo HTTP/1.1\r\nHost: x\r\nX-Kiln-User: alice\r\nx-KILN-user: bob\r\n' +
    'X-Kiln-User:carol\r\nConnection: close\r\n\r\n');
  assert.match(raw, /^HTTP\/1\.1 200 /, raw.slice(0, 300));
  const rawEcho = JSON.parse(raw.slice(raw.indexOf('{'), raw.lastIndexOf('}') + 1));
  assert.equal(rawEcho.headers['x-kiln-user'], 'public', `spoofed X-Kiln-User reached the public app: ${rawEcho.headers['x-kiln-user']}`);

  // Invite: the token leaves the URL before the app is asked; the app never sees it.
  const link = new URL(apps.links.alice);
  const token = link.searchParams.get('invite');
  const first = await request(base, `/a/inv/echo?invite=${token}&keep=1`);
  assert.equal(first.status, 303);
  assert.equal(first.headers.location, '/a/inv/echo?keep=1');
  const cookie = cookieOf(first);
  const inv = json(await request(base, first.headers.location, { headers: { Cookie: cookie } }), 'inv after the redirect');
  assert.equal(inv.url, '/echo?keep=1');
  assert.equal(inv.headers['x-kiln-user'], 'alice');
  const again = await request(base, `/a/inv/echo?keep=2&invite=${token}`, { headers: { Cookie: cookie } });
  assert.equal(again.status, 303, 'a request with the token again is redirected, not forwarded with it');
  assert.ok(!(await logText('inv')).includes(token), 'the invite token reached the app');

  // An app is more than GET and POST.
  for (const method of ['PUT', 'PATCH', 'DELETE', 'OPTIONS']) {
    // Node frames a DELETE or OPTIONS body only when told its length.
    const body = `body of ${method}`;
    const e = json(await request(base, '/a/pub/echo', { method, body, headers: { 'Content-Type': 'text/plain', 'Content-Length': body.length } }), method);
    assert.equal(e.method, method);
    assert.equal(e.body, `body of ${method}`);
  }
});

// Bytes to and from the app, 64 KiB at a time, respecting backpressure on our side.
function upload(base, target, totalBytes) {
  const block = patternBlock();
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, path: target, method: 'POST', agent: false,
      headers: { 'Content-Type': 'application/octet-stream' } }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    req.setTimeout(120000, () => req.destroy(new Error('upload timed out')));
    let sent = 0;
    const more = () => {
      while (sent < totalBytes) {
        sent += block.length;
        if (!req.write(block)) return req.once('drain', more);
      }
      return req.end();
    };
    more();
  });
}

function download(base, target, holdMs) {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.get({ host: u.hostname, port: u.port, path: target, agent: false }, (res) => {
      const hash = crypto.createHash('sha256');
      let bytes = 0;
      let held = false;
      res.on('data', (c) => {
        bytes += c.length;
        hash.update(c);
        // A slow reader for a moment: a proxy that ignores backpressure would pile the app's bytes up.
        if (!held) { held = true; res.pause(); setTimeout(() => res.resume(), holdMs); }
      });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, bytes, sha256: hash.digest('hex') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(120000, () => req.destroy(new Error('download timed out')));
  });
}

const ioChars = (pid) => Object.fromEntries(fs.readFileSync(`/proc/${pid}/io`, 'utf8').split('\n').filter(Boolean)
  .map((l) => l.split(':')).map(([key, v]) => [key, Number(v)]));

gate.test('50 MB up (chunked) and 50 MB down stream through, kiln serve\'s memory grows by far less', { timeout: 300000 }, async (t) => {
  const { base } = await setup();
  const serve = k.serve();
  assert.ok(serve?.pid, 'serve.json names kiln serve\'s pid');
  const TOTAL = 50 * 1024 * 1024;
  const block = patternBlock();
  const expected = crypto.createHash('sha256');
  for (let i = 0; i < TOTAL / block.length; i++) expected.update(block);
  const sha = expected.digest('hex');
  const LIMIT_KB = 30 * 1024;

  for (const dir of ['upload', 'download']) {
    const before = procStatusKb(serve.pid, 'VmRSS');
    const ioBefore = ioChars(serve.pid);
    const hwm = resetPeakRss(serve.pid);
    const sampler = rssSampler(serve.pid);
    let r;
    if (dir === 'upload') {
      const res = await upload(base, '/a/pub/upload?hold_ms=1500', TOTAL);
      r = json({ ...res, status: res.status }, 'upload');
      assert.equal(r.bytes, TOTAL, 'the app got every byte');
      assert.equal(r.sha256, sha, 'the app got the bytes unchanged');
      assert.equal(r.chunked, 'chunked', 'the upload reached the app chunked (streamed, not collected into one Content-Length body)');
    } else {
      r = await download(base, '/a/pub/download?mb=50', 1500);
      assert.equal(r.status, 200);
      assert.equal(r.bytes, TOTAL, 'every byte arrived');
      assert.equal(r.sha256, sha, 'the bytes arrived unchanged');
    }
    const peak = Math.max(sampler.stop(), hwm ? procStatusKb(serve.pid, 'VmHWM') : 0);
    // Control: the bytes went through this process. rchar/wchar count read(2)/write(2) but not
    // recvmsg/sendmsg, so only one of the two sockets may show up: their sum must hold the body.
    const moved = ioChars(serve.pid);
    assert.ok(moved.rchar - ioBefore.rchar + moved.wchar - ioBefore.wchar >= TOTAL,
      `${dir}: pid ${serve.pid} from serve.json did not carry the body (/proc/PID/io: rchar +${moved.rchar - ioBefore.rchar}, wchar +${moved.wchar - ioBefore.wchar}), so its memory says nothing`);
    t.diagnostic(`${dir}: kiln serve RSS ${Math.round(before / 1024)} MiB before, peak ${Math.round(peak / 1024)} MiB (VmHWM reset: ${hwm})`);
    assert.ok(peak - before < LIMIT_KB,
      `${dir}: kiln serve's RSS grew by ${Math.round((peak - before) / 1024)} MiB for a 50 MiB body (from ${Math.round(before / 1024)} MiB; limit 30): it buffers`);
  }
});

gate.test('WebSocket: the upgrade passes through after admission and messages echo both ways', async () => {
  const { base } = await setup();
  const c = await wsConnect(base, '/a/pub/ws');
  assert.equal(c.status, 101, `upgrade answered ${c.head.slice(0, 200)}`);
  assert.ok(c.acceptOk, `Sec-WebSocket-Accept is the app's answer to our key: ${c.head}`);
  c.send(0x1, 'hello through kiln');
  let f = await c.next();
  assert.deepEqual([f.op, f.payload.toString()], [0x1, 'hello through kiln']);
  const big = crypto.randomBytes(200 * 1024);
  c.send(0x2, big);
  f = await c.next();
  assert.equal(f.op, 0x2);
  assert.ok(f.payload.equals(big), `a 200 KiB binary message came back as ${f.payload.length} bytes`);
  c.send(0x8, Buffer.alloc(0));
  f = await c.next();
  assert.equal(f.op, 0x8, 'the close handshake passes too');
  c.close();

  // Through the invite app: the app is told who it is, and Kiln's cookie stays out of the upgrade.
  const alice = await inviteCookie('alice');
  const m = mark();
  const a = await wsConnect(base, '/a/inv/ws', { Cookie: `${alice}; mine=1`, 'X-Test-Marker': m, 'X-Kiln-User': 'bob' });
  assert.equal(a.status, 101, a.head.slice(0, 200));
  assert.match(a.head, /^x-app-saw-user: alice\s*$/im, 'the app saw X-Kiln-User: alice on the upgrade');
  a.send(0x1, 'as alice');
  assert.equal((await a.next()).payload.toString(), 'as alice');
  a.close();
  const line = (await appRequests(k, 'inv')).find((l) => l.upgrade && l.headers['x-test-marker'] === m);
  assert.ok(line, 'the app logged the upgrade');
  assert.ok(!JSON.stringify(line).includes(alice.split('=')[1]), 'Kiln\'s cookie reached the app in the upgrade');
  assert.equal(line.headers.cookie, 'mine=1');
});

gate.test('keep-alive: two requests on one connection, both answered by the app', async () => {
  const { base } = await setup();
  const u = new URL(base);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const get = (target) => new Promise((resolve, reject) => {
    const req = http.get({ host: u.hostname, port: u.port, path: target, agent }, (res) => {
      let body = '';
      res.on('data', (c) => { body += c; });
      res.on('end', () => resolve({ status: res.statusCode, body, reused: req.reusedSocket, headers: res.headers }));
    });
    req.on('error', reject);
  });
  try {
    const [m1, m2] = [mark(), mark()];
    const one = await get(`/a/pub/echo?${m1}`);
    const two = await get(`/a/pub/echo?${m2}`);
    assert.equal(one.status, 200);
    assert.equal(two.status, 200);
    assert.notEqual(one.headers.connection, 'close', 'kiln serve closes the connection after one app response');
    assert.equal(two.reused, true, 'the second request did not go over the first one\'s connection');
    assert.equal(JSON.parse(two.body).url, `/echo?${m2}`);
    const log = await logText('pub');
    assert.ok(log.includes(m1) && log.includes(m2), 'the app saw both requests');
  } finally {
    agent.destroy();
  }
});

gate.test('the app\'s files are read-only; KILN_DATA_DIR is writable and kept on the host', async () => {
  const { base } = await setup();
  const r = json(await request(base, '/a/pub/write-here', { method: 'POST', body: '' }), 'write-here');
  assert.ok(['EROFS', 'EACCES', 'EPERM'].includes(r.code_file), `writing next to server.js: ${r.code_file}`);
  assert.ok(['EROFS', 'EACCES', 'EPERM'].includes(r.code_replace), `replacing server.js: ${r.code_replace}`);
  assert.equal(r.data, 'data ok', `writing into KILN_DATA_DIR: ${r.data}`);
  assert.ok(!fs.existsSync(path.join(ws, 'pwned.txt')), 'the write landed in the workspace');
  const st = await k.ok('app_status', { artifact: 'pub' });
  assert.equal(fs.readFileSync(path.join(st.data_dir, 'written.txt'), 'utf8'), 'data ok', 'the data folder on the host holds the app\'s file');
  const again = await request(base, '/a/pub/echo');
  assert.equal(again.status, 200, 'the app still answers (server.js was not replaced)');
});

async function tightApp() {
  await setup();
  if (tight) return tight;
  tight = await startAppKiln({ ws: tightWs, home: k.home });
  const pub = await publishApp(tight, { name: 'tight', share: 'invite', invite: ['erin'] });
  assert.equal(pub.base, apps.base, 'the second session found the same kiln serve');
  await waitForState(tight, 'tight');
  const u = new URL(pub.invites[0].url);
  const r = await request(apps.base, u.pathname + u.search);
  assert.equal(r.status, 303);
  tight.cookie = cookieOf(r);
  return tight;
}

gate.test('a sleeping app stays asleep for refused requests and wakes for an admitted one', async () => {
  const t = await tightApp();
  const asleep = await waitForState(t, 'tight', ['sleeping'], 60000);
  const linesBefore = (await appRequests(t, 'tight')).length;
  for (const opts of [{}, { headers: { Cookie: 'kiln_session=forged0123456789' } }, { headers: { 'X-Kiln-User': 'erin' } }]) {
    const r = await request(apps.base, `/a/tight/echo?${mark()}`, opts);
    assert.equal(r.status, 403, `refused: ${r.status}`);
  }
  const still = await t.ok('app_status', { artifact: 'tight' });
  assert.equal(still.state, 'sleeping', `a refused request woke the app: ${JSON.stringify(still)}`);
  assert.equal(still.started_at, asleep.started_at, 'the app was started again by refused requests');
  assert.equal((await appRequests(t, 'tight')).length, linesBefore, 'refused requests reached the sleeping app');
  const woke = await request(apps.base, '/a/tight/echo', { headers: { Cookie: t.cookie } });
  assert.equal(woke.status, 200, `the admitted request that wakes the app: ${woke.status} ${woke.text.slice(0, 200)}`);
  assert.equal(JSON.parse(woke.text).headers['x-kiln-user'], 'erin');
});

gate.test('a hung app holds up nobody else; its own limits answer 503 and 504', async () => {
  const t = await tightApp();
  const { base } = apps;
  // Awake first: requests that wake a sleeping app wait in a queue of their own.
  assert.equal((await request(base, '/a/tight/echo', { headers: { Cookie: t.cookie } })).status, 200);
  const hung = [];
  for (let i = 0; i < 6; i++) hung.push(request(base, `/a/tight/hang?${i}`, { headers: { Cookie: t.cookie } }).catch((e) => ({ status: e.message })));
  // While tight hangs: the other apps, a static artifact and kiln serve itself answer.
  await k.ok('publish', { path: 'site', name: 'next-door', share: 'public' });
  for (const [target, opts] of [['/a/pub/echo', {}], ['/a/pw/echo', { headers: { Authorization: basicAuth(PASSWORD) } }],
    ['/a/next-door/', {}], ['/healthz', {}]]) {
    const r = await request(base, target, opts);
    assert.equal(r.status, 200, `${target} while another app hangs: ${r.status}`);
  }
  const statuses = (await Promise.all(hung)).map((r) => r.status);
  assert.ok(statuses.every((s) => s === 503 || s === 504), `the hung requests: ${statuses}`);
  assert.ok(statuses.includes(504), `none of the hung requests timed out with 504 (request_timeout_s 2): ${statuses}`);
  assert.ok(statuses.includes(503), `6 requests to an app with max_connections 4 all got in: ${statuses}`);
  const later = await request(base, '/a/tight/echo', { headers: { Cookie: t.cookie } });
  assert.equal(later.status, 200, `tight answers again once the hung requests are gone: ${later.status}`);
});

gate.test('a burst of requests that wakes a sleeping app is held to max_connections too', async () => {
  const t = await tightApp();
  await waitForState(t, 'tight', ['sleeping'], 60000);
  const hung = [];
  for (let i = 0; i < 6; i++) hung.push(request(apps.base, `/a/tight/hang?wake${i}`, { headers: { Cookie: t.cookie } }).catch((e) => ({ status: e.message })));
  const statuses = (await Promise.all(hung)).map((r) => r.status);
  assert.ok(statuses.every((s) => s === 503 || s === 504), `the hung requests: ${statuses}`);
  assert.ok(statuses.includes(503), `6 requests that woke an app with max_connections 4 all got in: ${statuses}`);
});
