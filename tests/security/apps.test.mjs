// Apps (issue 17) attacked from outside and from inside: kiln serve's app control API without the
// right token or through a relaying proxy; an app (the echo app, tests/lib/echo_app.cjs) trying to
// reach kiln serve, the host's loopback and the metadata address, another app's data folder and
// Kiln's state dir; an app's Set-Cookie for Kiln's own cookie; an invite revoked while its keep-alive connection stays open; Kiln's own
// /_kiln/ pages under an app's prefix; and path tricks aimed at another artifact or at the app's
// source as a static file. Judged on the host: the apps' request logs in their data folders, host
// listeners' connection counts, the state dir's files.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { after } from 'node:test';

import {
  SOURCE_MARKER, appRequests, appWorkspace, controlToken, publishApp, startAppKiln, waitForState,
} from '../lib/apps.mjs';
import { basicAuth, cookieOf, rawExchange, request, statusesOf } from '../lib/http.mjs';
import { probeSandbox } from '../lib/sandbox_probe.mjs';
import { rand } from './lib.mjs';

const PASSWORD = `sec-app-${rand()}`;
const SITE_MARKER = `SITE-MARKER-${rand()}`;
// An app that tries to plant (or clear) Kiln's session cookie, beside a cookie of its own.
const COOKIE_APP = `require('node:http').createServer((req, res) => {
  res.writeHead(200, { 'content-type': 'text/plain', 'set-cookie': [
    'kiln_session=planted; Path=/a/other/', 'KILN_SESSION=; Path=/; Max-Age=0', '=kiln_session=nameless; Path=/',
    'app_pref=blue; Path=/a/sec-cookie/'] });
  res.end('cookies');
}).listen(Number(process.env.PORT), '127.0.0.1');
`;
const ws = appWorkspace({ files: { 'site/index.html': `<p>${SITE_MARKER}</p>\n`, 'cookie-app/server.js': COOKIE_APP } });
const k = await startAppKiln({ ws });
after(() => k.stop());
const gate = await probeSandbox('apps security', k.call);
const m = () => `m${rand()}`;

let world;
async function setup() {
  if (world) return world;
  const a = await publishApp(k, { name: 'sec-a', share: 'public' });
  await publishApp(k, { name: 'sec-b', share: 'public' });
  await publishApp(k, { name: 'sec-pw', share: 'password', password: PASSWORD });
  const inv = await publishApp(k, { name: 'sec-inv', share: 'invite', invite: ['carol', 'dave'] });
  const site = await k.ok('publish', { path: 'site', name: 'sec-site', share: 'password', password: PASSWORD });
  assert.ok(site.url, 'the static artifact was published');
  for (const n of ['sec-a', 'sec-b', 'sec-pw', 'sec-inv']) await waitForState(k, n);
  const serve = k.serve();
  assert.ok(serve?.url && serve.pid, 'serve.json names the daemon');
  world = { base: a.base, serve, links: Object.fromEntries(inv.invites.map((i) => [i.name, i.url])) };
  return world;
}

const echo = async (target, opts) => {
  const r = await request(world.base, target, opts);
  assert.equal(r.status, 200, `${target}: ${r.status} ${r.text.slice(0, 200)}`);
  return JSON.parse(r.text);
};
const logOf = async (name) => JSON.stringify(await appRequests(k, name));

async function inviteCookie(who) {
  const u = new URL(world.links[who]);
  const r = await request(world.base, u.pathname + u.search);
  assert.equal(r.status, 303, `${who}'s link: ${r.status}`);
  return cookieOf(r);
}

gate.test('apps control API: no token, a wrong token, a token elsewhere than Bearer are refused, and nothing happens', async () => {
  const { base } = await setup();
  const token = controlToken(k.home);
  const stop = JSON.stringify({ op: 'stop', artifact: 'sec-a', delete_data: true });
  const post = (headers, target = '/_kiln/apps', body = stop) => request(base, target, {
    method: 'POST', body, headers: { 'Content-Type': 'application/json', ...headers },
  });
  const wrong = token.replace(/./, (c) => (c === 'a' ? 'b' : 'a'));
  const cases = [
    ['no Authorization', {}],
    ['a wrong token of the same length', { Authorization: `Bearer ${wrong}` }],
    ['the token minus its last character', { Authorization: `Bearer ${token.slice(0, -1)}` }],
    ['the token plus a character', { Authorization: `Bearer ${token}x` }],
    ['the token as Basic credentials', { Authorization: basicAuth(token) }],
    ['the token as a cookie', { Cookie: `kiln_session=${token}` }],
    ['an empty Bearer', { Authorization: 'Bearer ' }],
  ];
  for (const [what, headers] of cases) {
    const r = await post(headers);
    assert.ok(r.status === 401 || r.status === 403, `${what}: ${r.status} ${r.text.slice(0, 200)}`);
  }
  const inQuery = await post({}, `/_kiln/apps?token=${token}`);
  assert.ok(inQuery.status === 401 || inQuery.status === 403, `the token in the query string: ${inQuery.status}`);
  const st = await k.ok('app_status', { artifact: 'sec-a' });
  assert.equal(st.state, 'running', `a refused stop stopped the app: ${JSON.stringify(st)}`);
  assert.equal((await request(base, '/a/sec-a/echo')).status, 200, 'the app answers after the refused calls');
  // Control: the right token works, so the refusals above were about the token.
  const good = await post({ Authorization: `Bearer ${token}` }, '/_kiln/apps', JSON.stringify({ op: 'status', artifact: 'sec-a' }));
  assert.equal(good.status, 200, `status with the right token: ${good.status} ${good.text.slice(0, 200)}`);
  assert.equal(JSON.parse(good.text).state, 'running');
});

// kiln serve behind a reverse proxy on the same machine (nginx proxy_pass to 127.0.0.1) sees every
// visitor as loopback; a request that says it was relayed is not this machine's own.
gate.test('apps control API: a request relayed for another client (X-Forwarded-For, Forwarded) is refused even with the token', async () => {
  const { base } = await setup();
  const token = controlToken(k.home);
  for (const [what, h] of [['X-Forwarded-For', { 'X-Forwarded-For': '203.0.113.7' }], ['Forwarded', { Forwarded: 'for=203.0.113.7;proto=https' }],
    ['X-Real-IP', { 'X-Real-IP': '203.0.113.7' }]]) {
    const r = await request(base, '/_kiln/apps', {
      method: 'POST', body: JSON.stringify({ op: 'list' }),
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}`, ...h },
    });
    assert.equal(r.status, 403, `${what}: 203.0.113.7 (relayed by a local proxy) got ${r.status} from the control API: ${r.text.slice(0, 200)}`);
  }
});

gate.test('an app cannot reach kiln serve, the host\'s loopback or the metadata address; it has only its own loopback', async () => {
  const { serve } = await setup();
  let hits = 0;
  const listener = net.createServer((s) => { hits++; s.destroy(); });
  await new Promise((r) => listener.listen(0, '127.0.0.1', r));
  const bait = listener.address().port;
  const servePort = Number(new URL(serve.url).port);
  try {
    const targets = [['127.0.0.1', bait], ['127.0.0.1', servePort], ['localhost', servePort], ['::1', servePort], ['169.254.169.254', 80]];
    const r = await echoConnect(targets, `${serve.url}/healthz`);
    for (const t of r.results) assert.equal(t.connected, false, `the app connected to ${t.host}:${t.port}`);
    assert.equal(r.fetched?.ok, false, `the app fetched kiln serve's /healthz: ${JSON.stringify(r.fetched)}`);
    assert.deepEqual(r.interfaces, ['lo'], `the app's network interfaces: ${r.interfaces}`);
    assert.equal(hits, 0, 'the host listener on 127.0.0.1 got a connection from the app');
  } finally {
    listener.close();
  }
});

async function echoConnect(targets, fetchUrl) {
  return echo(`/a/sec-a/connect?targets=${encodeURIComponent(JSON.stringify(targets))}&fetch=${encodeURIComponent(fetchUrl)}`);
}

gate.test('an app cannot read another app\'s data folder or Kiln\'s state dir', async () => {
  await setup();
  const secret = `secret-${rand()}.txt`;
  const body = `KILNSEC-${rand()}`;
  await echo(`/a/sec-b/put?file=${secret}&body=${body}`);
  const bData = (await k.ok('app_status', { artifact: 'sec-b' })).data_dir;
  assert.equal(fs.readFileSync(path.join(bData, secret), 'utf8'), body, 'control: sec-b\'s file is in its data folder on the host');
  const aDir = path.dirname((await k.ok('app_status', { artifact: 'sec-a' })).data_dir);

  // Every file of the state dir, at its host path, from inside sec-a (its own folder aside).
  const stateFiles = [];
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (p.startsWith(aDir + path.sep)) continue;
      if (e.isDirectory()) walk(p);
      else if (e.isFile() && stateFiles.length < 200) stateFiles.push(p);
    }
  };
  walk(k.home);
  assert.ok(stateFiles.includes(path.join(bData, secret)), 'the walk covers sec-b\'s data');
  const tries = [...stateFiles, `/var/lib/kiln/data/../../../..${bData}/${secret}`, `/var/lib/kiln/data/../../../../${path.join(bData, '..', 'data', secret)}`];
  const read = [];
  for (const p of tries) {
    const r = await echo(`/a/sec-a/read?path=${encodeURIComponent(p)}`);
    if (r.ok) read.push(`${p}: ${r.text.slice(0, 80)}`);
  }
  assert.deepEqual(read, [], 'sec-a read files of the state dir');
  for (const name of [secret, 'mcp-token', 'apps.db', 'serve.json']) {
    const f = await echo(`/a/sec-a/find?name=${encodeURIComponent(name)}`);
    assert.deepEqual(f.found, [], `sec-a can see ${name} (walked ${f.seen} entries)`);
    assert.equal(f.truncated, false, `the walk of what sec-a sees stopped after ${f.seen} entries, so it proves nothing`);
  }
});

function keepAliveGet(agent, target, headers = {}) {
  const u = new URL(world.base);
  return new Promise((resolve, reject) => {
    const req = http.get({ host: u.hostname, port: u.port, path: target, agent, headers }, (res) => {
      let text = '';
      res.on('data', (c) => { text += c; });
      res.on('end', () => resolve({ status: res.statusCode, text, reused: req.reusedSocket }));
    });
    req.on('error', reject);
  });
}

gate.test('keep-alive: every request on a connection is admitted on its own; a revoke refuses the next one', async () => {
  await setup();
  const carol = await inviteCookie('carol');
  // Pipelined: an admitted request, then one with no cookie, then one for another app.
  const [m1, m2, m3] = [m(), m(), m()];
  const raw = await rawExchange(world.base,
    `GET /a/sec-inv/echo?${m1} HTTP/1.1\r\nHost: x\r\nCookie: ${carol}\r\n\r\n` +
    `GET /a/sec-inv/echo?${m2} HTTP/1.1\r\nHost: x\r\n\r\n` +
    `GET /a/sec-b/echo?${m3} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`, { waitMs: 10000 });
  assert.deepEqual(statusesOf(raw), [200, 403, 200], raw.slice(0, 400));
  const invLog = await logOf('sec-inv');
  assert.ok(invLog.includes(m1), 'control: the admitted request reached sec-inv');
  assert.ok(!invLog.includes(m2), 'the cookieless request after an admitted one on the same connection reached sec-inv');
  assert.ok(!invLog.includes(m3), 'the request for sec-b went to sec-inv (the connection stayed pinned to the first app)');
  assert.ok((await logOf('sec-b')).includes(m3), 'the request for sec-b did not reach sec-b');

  // A revoke while the connection is open.
  const dave = await inviteCookie('dave');
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const [m4, m5] = [m(), m()];
    const one = await keepAliveGet(agent, `/a/sec-inv/echo?${m4}`, { Cookie: dave });
    assert.equal(one.status, 200);
    await k.ok('publish_share', { artifact: 'sec-inv', revoke: ['dave'] });
    const two = await keepAliveGet(agent, `/a/sec-inv/echo?${m5}`, { Cookie: dave });
    assert.equal(two.reused, true, 'kiln serve closed the connection after the app\'s answer, so this case did not run: keep-alive is required');
    assert.equal(two.status, 403, `dave's revoked cookie on the open connection got ${two.status}: ${two.text.slice(0, 200)}`);
    const log = await logOf('sec-inv');
    assert.ok(log.includes(m4) && !log.includes(m5), 'the request after the revoke reached the app');
  } finally {
    agent.destroy();
  }
});

gate.test('an app cannot set or clear Kiln\'s session cookie (any Path, any case, nameless); its own cookies pass', async () => {
  const { base } = await setup();
  await publishApp(k, { path: 'cookie-app', name: 'sec-cookie', share: 'public' });
  await waitForState(k, 'sec-cookie');
  const r = await request(base, '/a/sec-cookie/');
  assert.equal(r.status, 200, r.text.slice(0, 200));
  const set = r.headers['set-cookie'] ?? [];
  assert.ok(set.some((c) => c.startsWith('app_pref=blue')), `control: the app's own cookie reaches the client (${JSON.stringify(set)})`);
  assert.deepEqual(set.filter((c) => /kiln_session/i.test(c)), [], 'a Set-Cookie naming Kiln\'s cookie reached the client');
});

gate.test('/a/NAME/_kiln/ stays Kiln\'s: login and logout pages, with or without access, never reach the app', async () => {
  const { base } = await setup();
  const page = await request(base, '/a/sec-pw/_kiln/login');
  assert.equal(page.status, 200);
  assert.match(page.text, /<form method="post" action="\/a\/sec-pw\/_kiln\/login">/, 'Kiln\'s login page');
  const basic = { Authorization: basicAuth(PASSWORD) };
  const admitted = await request(base, '/a/sec-pw/_kiln/login?next=%2Fa%2Fsec-pw%2F', { headers: basic });
  assert.ok([200, 303].includes(admitted.status) && !admitted.text.includes('no such page'), `with access: ${admitted.status} ${admitted.text.slice(0, 200)}`);
  const login = await request(base, '/a/sec-pw/_kiln/login', {
    method: 'POST', body: `password=${encodeURIComponent(PASSWORD)}&next=%2Fa%2Fsec-pw%2F`,
    headers: { ...basic, 'Content-Type': 'application/x-www-form-urlencoded' },
  });
  assert.equal(login.status, 303, `the login form with access already: ${login.status}`);
  const cookie = cookieOf(login);
  const out = await request(base, '/a/sec-pw/_kiln/logout', { headers: { Cookie: cookie } });
  assert.equal(out.status, 303, `logout: ${out.status}`);
  const pub = await request(base, '/a/sec-b/_kiln/login');
  assert.ok([200, 303].includes(pub.status) && !pub.text.includes('no such page'), `a public app's login page: ${pub.status}`);
  // Spellings of the same path, sent with access.
  for (const t of ['/a/sec-pw/%5fkiln/login', '/a/sec-pw/%5Fkiln/login', '/a/sec-pw/_kiln/login/', '/a/sec-pw/_kiln/', '/a/sec-pw/_kiln',
    '/a/sec-pw/_kil%6e/logout', '/a/sec-pw/_kiln/login?x=1']) {
    await request(base, t, { headers: basic });
  }
  const lines = await appRequests(k, 'sec-pw');
  const kilnPaths = lines.map((l) => l.url).filter((u) => { try { return decodeURIComponent(u.split('?')[0]).startsWith('/_kiln'); } catch { return true; } });
  assert.deepEqual(kilnPaths, [], 'Kiln\'s /_kiln/ paths reached the app');
  assert.ok(!JSON.stringify(lines).includes(encodeURIComponent(PASSWORD)) && !JSON.stringify(lines).includes(PASSWORD),
    'the share password reached the app');
});

gate.test('path tricks under an app\'s prefix never reach another artifact, nor serve the app\'s source as a file', async () => {
  const { base } = await setup();
  const sent = [];
  const tricks = (mk) => [
    `/a/sec-a/../sec-b/echo?${mk}`, `/a/sec-a/%2e%2e/sec-b/echo?${mk}`, `/a/sec-a/..%2fsec-b/echo?${mk}`, `/a/sec-a/..%2Fsec-b/echo?${mk}`,
    `/a/sec-a%2f..%2fsec-b/echo?${mk}`, `/a/sec-a/./../sec-b/echo?${mk}`, `/a/sec-a//../sec-b/echo?${mk}`, `/a/sec-a/..;/sec-b/echo?${mk}`,
    `/a/sec-a/%252e%252e/sec-b/echo?${mk}`, `/a/sec-a/%2e%2e%2fsec-b%2fecho?${mk}`, `/a/sec-a%2Fsec-b/echo?${mk}`, `/a/sec-a/..%5csec-b/echo?${mk}`,
    `/a/sec-a/../sec-site/?${mk}`, `/a/sec-a/%2e%2e/sec-site/index.html?${mk}`, `/a/sec-a/..%2fsec-site/?${mk}`,
    `http://x/a/sec-a/../sec-b/echo?${mk}`,
  ];
  for (const t of tricks(m())) {
    const r = await request(base, t, { headers: { Authorization: basicAuth('not the password') } });
    sent.push(t);
    assert.ok(!r.text.includes(SITE_MARKER), `${t} served the password-protected static artifact: ${r.status}`);
  }
  const bLog = await logOf('sec-b');
  const reachedB = sent.filter((t) => bLog.includes(t.split('?')[1]));
  assert.deepEqual(reachedB, [], 'requests under /a/sec-a/ reached sec-b');
  // The app's own files are what it runs, not something kiln serve hands out.
  const served = [];
  for (const t of ['/a/sec-a/server.js', '/a/%73ec-a/server.js', '/a/sec-%61/server.js', '/a/SEC-A/server.js', '/a/sec-a/v/1/server.js',
    '/a/sec-a/v/1/kiln.json', '/a/%73ec-a/v/1/server.js', '/a/%73ec-a/kiln.json', '/a/sec-a/%2e/server.js', '/a/sec-pw/server.js',
    '/a/%73ec-pw/server.js']) {
    const r = await request(base, t, { headers: { Authorization: basicAuth(PASSWORD) } });
    if (r.text.includes(SOURCE_MARKER)) served.push(`${t} -> ${r.status} server.js`);
    if (r.text.includes('"run"')) served.push(`${t} -> ${r.status} kiln.json`);
  }
  assert.deepEqual(served, [], 'kiln serve handed out the app\'s own files as static files');
});

// An invited user who is let in must not get a request to the app past the front door under
// someone else's name: whatever framing trick the client tries, every request the app sees was
// admitted on its own and carries the X-Kiln-User Kiln set.
gate.test('an admitted invitee cannot smuggle a request to the app as someone else (framing tricks)', async (t) => {
  await setup();
  const carol = await inviteCookie('carol');
  const s = m();
  const inner = `GET /echo?${s} HTTP/1.1\r\nHost: x\r\nX-Kiln-User: dave\r\nContent-Length: 0\r\n\r\n`;
  const chunk = (text) => `${text.length.toString(16)}\r\n${text}\r\n`;
  const head = (extra) => `POST /a/sec-inv/echo HTTP/1.1\r\nHost: x\r\nCookie: ${carol}\r\n${extra}`;
  const attempts = [
    ['Content-Length and Transfer-Encoding', `${head(`Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n`)}0\r\n\r\n${inner}`],
    ['Transfer-Encoding then Content-Length', `${head(`Transfer-Encoding: chunked\r\nContent-Length: ${inner.length + 5}\r\n\r\n`)}0\r\n\r\n${inner}`],
    ['two Content-Lengths', `${head(`Content-Length: 0\r\nContent-Length: ${inner.length}\r\n\r\n`)}${inner}`],
    ['Transfer-Encoding: chunked, identity', `${head('Transfer-Encoding: chunked, identity\r\n\r\n')}${chunk('x')}0\r\n\r\n${inner}`],
    ['Transfer-Encoding: xchunked', `${head(`Transfer-Encoding: xchunked\r\nContent-Length: ${inner.length}\r\n\r\n`)}${inner}`],
    ['a space before the colon', `${head(`Transfer-Encoding : chunked\r\nContent-Length: ${inner.length}\r\n\r\n`)}${inner}`],
    ['a chunk extension with a newline', `${head('Transfer-Encoding: chunked\r\n\r\n')}1;a=b\nx\r\nx\r\n0\r\n\r\n${inner}`],
    ['a body that holds a whole request', `${head(`Content-Length: ${inner.length}\r\n\r\n`)}${inner}`],
    ['a pipelined request with no cookie', `${head('Content-Length: 0\r\n\r\n')}${inner.replace('/echo', '/a/sec-inv/echo')}`],
    ['an obs-folded X-Kiln-User', `GET /a/sec-inv/echo?${s} HTTP/1.1\r\nHost: x\r\nCookie: ${carol}\r\nX-Kiln-User: carol\r\n dave\r\nConnection: close\r\n\r\n`],
  ];
  for (const [what, bytes] of attempts) t.diagnostic(`${what}: ${statusesOf(await rawExchange(world.base, bytes, { waitMs: 3000 })).join(', ')}`);
  // Control: the marker does reach the app when carol asks for it plainly.
  await echo(`/a/sec-inv/echo?${s}`, { headers: { Cookie: carol } });
  const lines = (await appRequests(k, 'sec-inv')).filter((l) => l.url.includes(s));
  assert.ok(lines.length >= 1, 'control: carol\'s plain request with the marker left no line');
  assert.deepEqual(lines.filter((l) => l.headers['x-kiln-user'] !== 'carol').map((l) => `${l.method} ${l.url} as ${l.headers['x-kiln-user']}`), [],
    'requests reached sec-inv under a name Kiln did not set for them');
});
