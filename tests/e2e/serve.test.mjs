// `kiln serve` over real HTTP: artifacts published through the MCP `publish` tool (which starts
// the daemon), then status codes, types, ETag/304, Range, HEAD, limits and traversal attempts
// (raw and encoded, sent byte for byte), each share mode with revoke and expiry, rate limiting,
// the daemon outliving the MCP session, and an access log that never holds a secret.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { connectClient, kilnBin, kilnEnv, sleep, structured, tempDir } from '../lib/kiln.mjs';
import {
  alive, basicAuth, cookieOf, procStat, rawExchange, readServeInfo, request, statusesOf, stopProcess, waitForServeInfo,
} from '../lib/http.mjs';

const PASSWORD = 'correct horse battery 9';
const home = tempDir('kiln-serve-home-');
const ws = tempDir('kiln-serve-ws-');
const started = [];  // daemon pids to stop at the end
let session;
let kilnPid;
let base;  // http://127.0.0.1:PORT
const tokens = {};

const bigBytes = Buffer.alloc(300 * 1024, 0);
for (let i = 0; i < bigBytes.length; i++) bigBytes[i] = (i * 7 + (i >> 8)) & 0xff;
const png = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010806000000', 'hex');

function makeSite() {
  const site = path.join(ws, 'site');
  fs.mkdirSync(path.join(site, 'docs'), { recursive: true });
  fs.mkdirSync(path.join(site, 'assets'), { recursive: true });
  fs.writeFileSync(path.join(site, 'index.html'), '<!doctype html><title>Kiln site</title><h1>Hello from kiln</h1>\n');
  fs.writeFileSync(path.join(site, 'style.css'), 'h1 { color: teal }\n');
  fs.writeFileSync(path.join(site, 'app.js'), 'console.log("hi");\n');
  fs.writeFileSync(path.join(site, 'data.json'), '{"ok":true}\n');
  fs.writeFileSync(path.join(site, 'docs', 'index.html'), '<p>docs</p>\n');
  fs.writeFileSync(path.join(site, 'assets', 'logo.png'), png);
  fs.writeFileSync(path.join(site, 'big.bin'), bigBytes);
}

const call = async (name, args) => structured(await session.client.callTool({ name, arguments: args }, undefined, { timeout: 60000 }));

before(async () => {
  makeSite();
  session = await connectClient({ args: ['--workspace', ws], home, env: { KILN_SERVE_LISTEN: '127.0.0.1:0' } });
  kilnPid = session.transport.pid;
  const pub = await call('publish', { path: 'site', name: 'site', share: 'public' });
  assert.match(pub.url, /^http:\/\/127\.0\.0\.1:\d+\/a\/site\/$/);
  base = new URL(pub.url).origin;
  const info = readServeInfo(home);
  assert.ok(info, 'serve.json written');
  started.push(info.pid);
  const pw = await call('publish', { path: 'site', name: 'locked', share: 'password', password: PASSWORD });
  assert.equal(pw.share, 'password');
  const inv = await call('publish', { path: 'site', name: 'guests', share: 'invite', invite: ['alice', 'bob'] });
  for (const i of inv.invites) tokens[i.name] = new URL(i.url).searchParams.get('invite');
  assert.ok(tokens.alice && tokens.bob, 'one link per invited name');
});

after(async () => {
  await session?.close().catch(() => {});
  for (const pid of started) await stopProcess(pid);
});

test('the URL publish returns works at once; files, types, folders, redirects', async () => {
  const r = await request(base, '/a/site/');
  assert.equal(r.status, 200);
  assert.match(r.text, /Hello from kiln/);
  assert.match(r.headers['content-type'], /^text\/html/);
  assert.equal(r.headers['x-content-type-options'], 'nosniff');
  assert.equal(r.headers['referrer-policy'], 'no-referrer');
  assert.equal(r.headers['cache-control'], 'no-cache');
  assert.ok(r.headers.date);
  for (const [p, type] of [['style.css', /^text\/css/], ['app.js', /javascript/], ['data.json', /^application\/json/],
    ['assets/logo.png', /^image\/png$/], ['big.bin', /^application\/octet-stream$/]]) {
    const f = await request(base, `/a/site/${p}`);
    assert.equal(f.status, 200, p);
    assert.match(f.headers['content-type'], type, p);
  }
  const big = await request(base, '/a/site/big.bin');
  assert.ok(big.body.equals(bigBytes), 'a large file arrives intact');
  assert.equal(big.headers['content-length'], String(bigBytes.length));

  let x = await request(base, '/a/site');
  assert.equal(x.status, 301);
  assert.equal(x.headers.location, '/a/site/');
  x = await request(base, '/a/site/docs');
  assert.equal(x.status, 301);
  assert.equal(x.headers.location, '/a/site/docs/');
  assert.equal((await request(base, '/a/site/docs/')).text, '<p>docs</p>\n');
  assert.equal((await request(base, '/a/site/assets/')).status, 404, 'no directory listings');
  assert.equal((await request(base, '/a/site/nope.html')).status, 404);
  assert.equal((await request(base, '/a/none/')).status, 404);
  assert.equal((await request(base, '/')).status, 404);
  const v1 = await request(base, '/a/site/v/1/style.css');
  assert.equal(v1.status, 200);
  assert.equal(v1.headers['cache-control'], 'public, max-age=31536000, immutable');
  assert.equal((await request(base, '/a/site/v/1')).status, 301);
  assert.equal((await request(base, '/a/site/v/7/')).status, 404);
  assert.equal((await request(base, '/a/site/', { method: 'DELETE' })).status, 405);
});

test('ETag and If-None-Match, HEAD, Range', async () => {
  const r = await request(base, '/a/site/style.css');
  const etag = r.headers.etag;
  assert.match(etag, /^"[0-9a-f]{64}"$/);
  const nm = await request(base, '/a/site/style.css', { headers: { 'If-None-Match': etag } });
  assert.equal(nm.status, 304);
  assert.equal(nm.body.length, 0);
  assert.equal((await request(base, '/a/site/style.css', { headers: { 'If-None-Match': '"x"' } })).status, 200);

  const head = await request(base, '/a/site/big.bin', { method: 'HEAD' });
  assert.equal(head.status, 200);
  assert.equal(head.headers['content-length'], String(bigBytes.length));
  assert.equal(head.body.length, 0);
  assert.equal(head.headers.etag, (await request(base, '/a/site/big.bin')).headers.etag);

  let p = await request(base, '/a/site/big.bin', { headers: { Range: 'bytes=100-199' } });
  assert.equal(p.status, 206);
  assert.equal(p.headers['content-range'], `bytes 100-199/${bigBytes.length}`);
  assert.ok(p.body.equals(bigBytes.subarray(100, 200)));
  p = await request(base, '/a/site/big.bin', { headers: { Range: 'bytes=-10' } });
  assert.ok(p.body.equals(bigBytes.subarray(bigBytes.length - 10)));
  p = await request(base, '/a/site/big.bin', { headers: { Range: `bytes=${bigBytes.length - 5}-` } });
  assert.equal(p.status, 206);
  assert.equal(p.body.length, 5);
  p = await request(base, '/a/site/style.css', { headers: { Range: 'bytes=2-4' } });
  assert.equal(p.text, 'h1 { color: teal }\n'.slice(2, 5));
  p = await request(base, '/a/site/big.bin', { headers: { Range: `bytes=${bigBytes.length}-` } });
  assert.equal(p.status, 416);
  assert.equal(p.headers['content-range'], `bytes */${bigBytes.length}`);
  p = await request(base, '/a/site/big.bin', { headers: { Range: 'bytes=0-1,5-9' } });
  assert.equal(p.status, 200, 'several ranges: the whole file');
});

test('traversal attempts, raw and encoded, never escape', async () => {
  const secret = fs.readFileSync('/etc/passwd', 'utf8').split('\n')[0];
  for (const t of ['/a/site/../locked/', '/a/site/%2e%2e/locked/', '/a/site/..%2flocked/', '/a/site/..%2Flocked/',
    '/a/site//etc/passwd', '/a/site/..\\..\\etc\\passwd', '/a/site/%5c..%5cetc%5cpasswd', '/a/site/%2e%2e/%2e%2e/etc/passwd',
    '/a/site/index.html%00.png', '/a/site/./index.html', '/a/../etc/passwd', '/a/site/%252e%252e/%252e%252e/etc/passwd',
    '/a/site/%c0%ae%c0%ae/etc/passwd', `/a/site/${'..%2f'.repeat(8)}etc/passwd`]) {
    const r = await request(base, t);
    assert.ok(r.status === 400 || r.status === 404, `${t} -> ${r.status}`);
    assert.ok(!r.text.includes(secret), `${t} leaked /etc/passwd`);
  }
  // What node:http would not send: a bare NUL and a space in the target.
  const raw = await rawExchange(base, 'GET /a/site/\0/../../etc/passwd HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  assert.match(raw, /^HTTP\/1\.1 400 /);
  assert.ok(!raw.includes(secret));
});

test('limits: 8 KiB of headers, 4 KiB of body, keep-alive pipelining', async () => {
  const hugeHeader = await rawExchange(base, `GET /a/site/ HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(9000)}\r\n\r\n`);
  assert.match(hugeHeader, /^HTTP\/1\.1 431 /);
  const body = 'password=' + 'x'.repeat(5000);
  const bigBody = await rawExchange(base, `POST /a/locked/_kiln/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
  assert.match(bigBody, /^HTTP\/1\.1 413 /);
  const two = await rawExchange(base, 'GET /a/site/style.css HTTP/1.1\r\nHost: x\r\n\r\nHEAD /a/site/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  assert.deepEqual(statusesOf(two), [200, 200]);
});

test('password mode: 401 with login page and Basic challenge, Basic, form login, cookie, wrong password', async () => {
  const r = await request(base, '/a/locked/docs/');
  assert.equal(r.status, 401);
  assert.equal(r.headers['www-authenticate'], 'Basic realm="kiln: locked", charset="UTF-8"');
  assert.match(r.text, /<form method="post" action="\/a\/locked\/_kiln\/login">/);
  assert.match(r.text, /name="next" value="\/a\/locked\/docs\/"/);
  assert.ok(!r.text.includes('docs</p>'));

  const basic = await request(base, '/a/locked/', { headers: { Authorization: basicAuth(PASSWORD) } });
  assert.equal(basic.status, 200);
  assert.match(basic.text, /Hello from kiln/);
  assert.equal(basic.headers['cache-control'], 'private, no-cache');
  assert.match(basic.headers['set-cookie'][0], /HttpOnly/);
  assert.equal((await request(base, '/a/locked/', { headers: { Authorization: basicAuth('wrong') } })).status, 401);

  const form = `password=${encodeURIComponent(PASSWORD)}&next=${encodeURIComponent('/a/locked/docs/')}`;
  const login = await request(base, '/a/locked/_kiln/login', {
    method: 'POST', body: form, headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
  });
  assert.equal(login.status, 303);
  assert.equal(login.headers.location, '/a/locked/docs/');
  const setCookie = login.headers['set-cookie'][0];
  assert.match(setCookie, /Path=\/a\/locked\//);
  assert.match(setCookie, /SameSite=Lax/);
  // The browser keeps a login exactly as long as the server takes it: 12 h, not 30 days.
  assert.match(setCookie, /Max-Age=43200;/);
  assert.match(basic.headers['set-cookie'][0], /Max-Age=43200;/);
  const cookie = cookieOf(login);
  const page = await request(base, '/a/locked/docs/', { headers: { Cookie: cookie } });
  assert.equal(page.status, 200);
  assert.equal(page.text, '<p>docs</p>\n');
  tokens.cookie = cookie.split('=')[1];

  const open = await request(base, '/a/locked/_kiln/login', {
    method: 'POST', body: `password=${encodeURIComponent(PASSWORD)}&next=https%3A%2F%2Fevil.example%2F`,
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
  });
  assert.equal(open.headers.location, '/a/locked/', 'no open redirect');
  const wrong = await request(base, '/a/locked/_kiln/login', {
    method: 'POST', body: 'password=nope&next=%2Fa%2Flocked%2F', headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
  });
  assert.equal(wrong.status, 401);
  assert.match(wrong.text, /not right/);
});

test('password mode: failed logins are rate-limited per artifact and client', async () => {
  const statuses = [];
  for (let i = 0; i < 12; i++) {
    const r = await request(base, '/a/locked/', { headers: { Authorization: basicAuth(`guess-${i}`) } });
    statuses.push(r.status);
    if (r.status === 429) {
      assert.ok(Number(r.headers['retry-after']) >= 1);
      break;
    }
  }
  assert.equal(statuses.at(-1), 429, `statuses: ${statuses}`);
  assert.ok(statuses.length <= 11, `429 only after ${statuses.length} attempts`);
  // Even the right password waits now, from this client...
  assert.equal((await request(base, '/a/locked/', { headers: { Authorization: basicAuth(PASSWORD) } })).status, 429);
  // ...while another artifact is not affected.
  assert.equal((await request(base, '/a/site/')).status, 200);
});

test('invite mode: link -> 303 without the token + cookie, revoke, expiry', async () => {
  assert.equal((await request(base, '/a/guests/')).status, 403);
  assert.equal((await request(base, '/a/guests/?invite=made-up-token')).status, 403);
  const r = await request(base, `/a/guests/docs/?invite=${tokens.alice}`);
  assert.equal(r.status, 303);
  assert.equal(r.headers.location, '/a/guests/docs/');
  assert.equal(r.headers['referrer-policy'], 'no-referrer');
  const alice = cookieOf(r);
  assert.equal((await request(base, '/a/guests/docs/', { headers: { Cookie: alice } })).status, 200);

  await call('publish_share', { artifact: 'guests', revoke: ['alice'] });
  assert.equal((await request(base, '/a/guests/', { headers: { Cookie: alice } })).status, 403, 'revoked cookie');
  assert.equal((await request(base, `/a/guests/?invite=${tokens.alice}`)).status, 403, 'revoked link');
  assert.equal((await request(base, `/a/guests/?invite=${tokens.bob}`)).status, 303, 'bob still in');

  const brief = await call('publish', { path: 'site', name: 'brief', share: 'invite', invite: ['carol'], expires_in_s: 1 });
  const carol = new URL(brief.invites[0].url).searchParams.get('invite');
  tokens.carol = carol;
  assert.equal((await request(base, `/a/brief/?invite=${carol}`)).status, 303);
  await sleep(2200);
  const late = await request(base, `/a/brief/?invite=${carol}`);
  assert.ok(late.status === 410 || late.status === 403, `expired -> ${late.status}`);
});

test('the daemon outlives the MCP session and is reused by the next one', async () => {
  const info = readServeInfo(home);
  assert.ok(alive(info.pid));
  const st = procStat(info.pid);
  assert.notEqual(st.ppid, kilnPid, 'not a child of kiln mcp');
  assert.notEqual(st.sid, procStat(kilnPid).sid, 'own session');
  await session.close();
  const deadline = Date.now() + 5000;
  while (alive(kilnPid) && Date.now() < deadline) await sleep(20);
  assert.ok(!alive(kilnPid), 'kiln mcp exited');
  await sleep(200);
  assert.ok(alive(info.pid), 'kiln serve still running');
  assert.equal((await request(base, '/a/site/')).status, 200);

  session = await connectClient({ args: ['--workspace', ws], home, env: { KILN_SERVE_LISTEN: '127.0.0.1:0' } });
  assert.match((await request(base, '/a/site/')).text, /Hello from kiln/);
  fs.writeFileSync(path.join(ws, 'site', 'index.html'), '<!doctype html><h1>Hello again</h1>\n');
  const again = await call('publish', { path: 'site', name: 'site' });
  assert.match((await request(base, '/a/site/')).text, /Hello again/, 'the new version shows at once');
  assert.equal(new URL(again.url).origin, base, 'the running server is found, not a second one started');
  assert.equal(readServeInfo(home).pid, info.pid);
  assert.equal((await request(base, `/a/site/v/${again.version}/`)).status, 200);
});

test('the access log names artifact, version, share, outcome; never a password, cookie or token', async () => {
  await sleep(1300);  // the daemon flushes its log every second
  const log = fs.readFileSync(path.join(home, 'serve.log'), 'utf8');
  assert.match(log, /access GET \/a\/locked\/ artifact=locked version=1 share=password outcome=need_login status=401 client=127\.0\.0\.1/);
  assert.match(log, /artifact=guests version=\d+ share=invite outcome=denied status=403/);
  assert.match(log, /outcome=rate_limited status=429/);
  assert.match(log, /invite=bob/);
  for (const secret of [PASSWORD, encodeURIComponent(PASSWORD), tokens.alice, tokens.bob, tokens.carol, tokens.cookie]) {
    assert.ok(secret && !log.includes(secret), `the log holds a secret (${secret?.slice(0, 4)}...)`);
  }
});

test('foreground kiln serve: port 0, serve.json, graceful SIGTERM', async () => {
  const h = tempDir('kiln-serve-fg-');
  const child = spawn(kilnBin(), ['serve', '--state-dir', h, '--listen', '127.0.0.1:0'], { env: kilnEnv(h), stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (c) => { stderr += c; });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  try {
    const info = await waitForServeInfo(h, { pid: child.pid });
    assert.match(info.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    const health = JSON.parse((await request(info.url, '/healthz')).text);
    assert.equal(health.service, 'kiln-serve');
    assert.equal(health.state_dir, fs.realpathSync(h));
    assert.equal(health.pid, child.pid);
    // An idle keep-alive connection must not hold the shutdown up.
    const agent = new http.Agent({ keepAlive: true });
    await request(info.url, '/healthz', { agent });
    const t0 = Date.now();
    child.kill('SIGTERM');
    const r = await exited;
    agent.destroy();
    assert.equal(r.code, 0, stderr);
    assert.ok(Date.now() - t0 < 3000, 'idle connections close at once');
    assert.equal(readServeInfo(h), undefined, 'serve.json removed on exit');
  } finally {
    child.kill('SIGKILL');
  }
});

test('a taken default port: the daemon falls back to a free one', async () => {
  const blocker = http.createServer((_, res) => res.end('not kiln'));
  await new Promise((r) => blocker.listen(0, '127.0.0.1', r));
  const port = blocker.address().port;
  const h = tempDir('kiln-serve-busy-');
  const s = await connectClient({ args: ['--workspace', ws], home: h, env: { KILN_SERVE_LISTEN: `127.0.0.1:${port}` } });
  try {
    const pub = structured(await s.client.callTool({ name: 'publish', arguments: { path: 'site', name: 'busy' } }, undefined, { timeout: 60000 }));
    assert.notEqual(new URL(pub.url).port, String(port));
    assert.equal((await request(new URL(pub.url).origin, '/a/busy/')).status, 200);
    started.push(readServeInfo(h).pid);
  } finally {
    await s.close();
    blocker.close();
  }
});
