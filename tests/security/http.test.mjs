// Cases 32, 33 and 35 of shared/SANDBOX_CASES.md against a real `kiln serve --mcp`: another local
// user attacking a root-run server on loopback (no token, a wrong token, the token file), two
// principals of one server trying each other's sandbox, run and trace ids, and a thousand
// connections that never finish their headers while real clients still get in.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, describe, test } from 'node:test';

import { request } from '../lib/http.mjs';
import { httpClient, initializeBody, mcpFetch, startServe } from '../lib/mcp_http.mjs';
import { errorText, isRoot, kilnBin, kilnEnv, rand, sleep, tempDir, waitFor } from './lib.mjs';

const ATTACKER = 'kilntest';
const servers = [];
after(async () => { for (const s of servers) await s.stop().catch(() => {}); });

async function serve(opts) {
  const s = await startServe(opts);
  servers.push(s);
  return s;
}

// The attacker account, made as run.mjs makes it when the suite runs as root on its own.
function userExists(name) {
  if (spawnSync('id', ['-u', name], { stdio: 'ignore' }).status === 0) return true;
  if (!isRoot) return false;
  spawnSync('useradd', ['--no-create-home', '--home-dir', '/nonexistent', '--shell', '/usr/sbin/nologin', '--user-group', name]);
  return spawnSync('id', ['-u', name], { stdio: 'ignore' }).status === 0;
}

// ---- case 32 -------------------------------------------------------------------------------

// Runs as ATTACKER: everything a local user without the token can try against the server and its
// state directory, reported as JSON. Any initialize that succeeds goes on to the real attack:
// workspace_open /etc, file_read shadow.
const ATTACK = String.raw`
const fs = require('node:fs');
const [url, stateDir, tokenFile] = process.argv.slice(2);
const out = { tried: [], files: {} };
const grab = (p) => { try { return { ok: true, text: fs.readFileSync(p, 'utf8') }; } catch (e) { return { ok: false, code: e.code }; } };
out.files.token = grab(tokenFile);
try { out.files.listing = fs.readdirSync(stateDir); } catch (e) { out.files.listing = e.code; }
try { fs.writeFileSync(stateDir + '/planted', 'x'); out.files.planted = 'written'; } catch (e) { out.files.planted = e.code; }
const post = async (auth, body, session) => {
  const h = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  if (auth) h.authorization = auth;
  if (session) { h['mcp-session-id'] = session; h['mcp-protocol-version'] = '2025-11-25'; }
  const r = await fetch(url, { method: 'POST', headers: h, body: JSON.stringify(body) });
  return { status: r.status, session: r.headers.get('mcp-session-id'), text: await r.text() };
};
(async () => {
  const guesses = [['none', null], ['wrong', 'Bearer ' + '0'.repeat(64)], ['empty', 'Bearer '],
    ['from-file', out.files.token.ok ? 'Bearer ' + out.files.token.text.trim() : null],
    ['given', process.env.KILN_ATTACK_TOKEN ? 'Bearer ' + process.env.KILN_ATTACK_TOKEN : null]];
  for (const [name, auth] of guesses) {
    if ((name === 'from-file' || name === 'given') && !auth) continue;
    const init = await post(auth, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'attacker', version: '0' } } });
    const t = { name, status: init.status, bodies: [init.text] };
    if (init.status === 200 && init.session) {
      await post(auth, { jsonrpc: '2.0', method: 'notifications/initialized' }, init.session);
      t.bodies.push((await post(auth, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'workspace_open', arguments: { path: '/etc' } } }, init.session)).text);
      t.bodies.push((await post(auth, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'file_read', arguments: { path: 'shadow' } } }, init.session)).text);
    }
    out.tried.push(t);
  }
  process.stdout.write(JSON.stringify(out));
})().catch((e) => { process.stdout.write(JSON.stringify({ error: String(e) })); });
`;

function runAttack(url, stateDir, env = {}) {
  const dir = tempDir('kiln-sec-attack-');
  fs.chmodSync(dir, 0o755);
  const script = path.join(dir, 'attack.cjs');
  fs.writeFileSync(script, ATTACK, { mode: 0o644 });
  const r = spawnSync('runuser', ['-u', ATTACKER, '--', process.execPath, script, url, stateDir, path.join(stateDir, 'mcp-token')], {
    encoding: 'utf8', timeout: 120000, env: { PATH: process.env.PATH, HOME: '/tmp', ...env },
  });
  assert.equal(r.status, 0, `the attack script did not run as ${ATTACKER}: ${r.stderr}`);
  const out = JSON.parse(r.stdout);
  assert.ok(!out.error, `the attack script failed: ${out.error}`);
  return out;
}

// A piece of /etc/shadow that would only be in an answer that carries the file.
function shadowMarker() {
  const line = fs.readFileSync('/etc/shadow', 'utf8').split('\n').find((l) => l.startsWith('root:'));
  return line ?? fs.readFileSync('/etc/shadow', 'utf8').split('\n')[0];
}

describe('case 32: another local user and a root-run kiln serve --mcp on loopback', () => {
  const why = !isRoot ? 'needs root: the attack is a second local user against a server run by root'
    : !userExists(ATTACKER) ? `no user ${ATTACKER} and useradd could not make it` : null;

  test('no token, a wrong token, the token file: /mcp refuses all of them, and /etc/shadow never comes back', { skip: why ?? false }, async () => {
    const home = tempDir('kiln-sec-root-state-');
    const s = await serve({ home });
    const marker = shadowMarker();
    const out = runAttack(s.url, s.home);
    assert.ok(!out.files.token.ok, `${ATTACKER} read the token file: ${JSON.stringify(out.files.token)}`);
    assert.equal(out.files.token.code, 'EACCES');
    assert.equal(out.files.listing, 'EACCES', `${ATTACKER} listed the state directory: ${out.files.listing}`);
    assert.equal(out.files.planted, 'EACCES', `${ATTACKER} wrote into the state directory`);
    assert.ok(out.tried.length >= 3, JSON.stringify(out.tried));
    for (const t of out.tried) {
      assert.equal(t.status, 401, `${t.name}: HTTP ${t.status} ${t.bodies.join(' | ').slice(0, 500)}`);
      for (const b of t.bodies) assert.ok(!b.includes(marker), `${t.name}: /etc/shadow came back`);
    }
    // The control: the same script holding the real token gets in and reads the file. So the
    // probe works, and a token is exactly the server user's power (README, security model).
    const control = runAttack(s.url, s.home, { KILN_ATTACK_TOKEN: s.token });
    const given = control.tried.find((t) => t.name === 'given');
    assert.equal(given?.status, 200, JSON.stringify(control.tried));
    assert.ok(given.bodies.some((b) => b.includes(marker)), 'the control attack with the token should read /etc/shadow');
  });

  test('the state directory: 0700 and the server user\'s; nothing in it open to others', { skip: why ?? false }, async () => {
    const home = tempDir('kiln-sec-root-state-');
    fs.chmodSync(home, 0o777);  // a directory others could write: narrowed at start
    const s = await serve({ home });
    await mcpFetch(s.url, { body: initializeBody() });
    const st = fs.statSync(home);
    assert.equal(st.mode & 0o777, 0o700);
    assert.equal(st.uid, process.getuid());
    const token = fs.statSync(path.join(home, 'mcp-token'));
    assert.equal(token.mode & 0o077, 0, 'the token file is the owner\'s only');
    // Every path in it, tried by the other user: none can be reached.
    const paths = [];
    const walk = (d) => { for (const e of fs.readdirSync(d, { withFileTypes: true })) { const p = path.join(d, e.name); paths.push(p); if (e.isDirectory()) walk(p); } };
    walk(home);
    assert.ok(paths.some((p) => p.endsWith('mcp-token')));
    for (const p of paths) {
      const r = spawnSync('runuser', ['-u', ATTACKER, '--', 'test', '-e', p]);
      assert.notEqual(r.status, 0, `${ATTACKER} can see ${p}`);
      const sock = fs.lstatSync(p);
      assert.ok(!sock.isSocket() || (sock.mode & 0o077) === 0, `${p} is a socket others may use`);
    }
  });

  test('a state directory owned by another user is refused (its owner could swap the token or the secrets)', { skip: why ?? false }, async () => {
    const home = tempDir('kiln-sec-foreign-state-');
    const uid = Number(spawnSync('id', ['-u', ATTACKER], { encoding: 'utf8' }).stdout.trim());
    fs.chownSync(home, uid, uid);
    const r = spawnSync(kilnBin(), ['serve', '--mcp', '--listen', '127.0.0.1:0', '--state-dir', home], {
      env: kilnEnv(home), encoding: 'utf8', timeout: 30000,
    });
    assert.equal(r.status, 1, `kiln serve started on ${ATTACKER}'s state directory: ${r.stderr}`);
    assert.match(r.stderr, /belongs to uid/);
    assert.ok(!fs.existsSync(path.join(home, 'mcp-token')), 'no token was written into it');
  });

  // H5: another user plants the state dir's name as a symlink to a folder of root's (in a folder
  // of theirs, or straight in sticky /tmp); root's kiln must neither chmod it nor write the token.
  test('a state directory that another user planted as a symlink, or under a folder of theirs, is refused', { skip: why ?? false }, () => {
    const victim = tempDir('kiln-sec-victim-');  // root's, as /root would be
    fs.chmodSync(victim, 0o755);
    const as = (...cmd) => spawnSync('runuser', ['-u', ATTACKER, '--', ...cmd], { encoding: 'utf8' });
    const shared = path.join('/tmp', `kiln-sec-shared-${rand()}`);
    const inTmp = path.join('/tmp', `kiln-sec-st-${rand()}`);
    try {
      assert.equal(as('mkdir', '-m', '0755', shared).status, 0);
      assert.equal(as('ln', '-s', victim, path.join(shared, 'st3')).status, 0);
      assert.equal(as('ln', '-s', victim, inTmp).status, 0);
      for (const [dir, why] of [[path.join(shared, 'st3'), /symlink/], [inTmp, /symlink/], [path.join(shared, 'new'), /belongs to uid/]]) {
        for (const argv of [['--state-dir', dir, 'serve', '--print-token'], ['serve', '--mcp', '--listen', '127.0.0.1:0', '--state-dir', dir]]) {
          const r = spawnSync(kilnBin(), argv, { env: kilnEnv(dir), encoding: 'utf8', timeout: 30000 });
          assert.notEqual(r.status, 0, `${argv.join(' ')} was accepted: ${r.stdout}`);
          assert.match(r.stderr, why, argv.join(' '));
        }
        assert.equal(fs.statSync(victim).mode & 0o777, 0o755, `${dir}: the folder it points at was chmodded`);
        assert.ok(!fs.existsSync(path.join(victim, 'mcp-token')), `${dir}: a token was written where it points`);
      }
      assert.ok(!fs.existsSync(path.join(shared, 'new')), 'nothing was made under the other user\'s folder');
    } finally {
      fs.rmSync(shared, { recursive: true, force: true });
      fs.rmSync(inTmp, { force: true });
    }
  });
});

describe('case 32 as any user: loopback is no credential', () => {
  test('a loopback kiln serve --mcp answers 401 to a request without the token or with a wrong one', async () => {
    const s = await serve();
    for (const authorization of [null, `Bearer ${'0'.repeat(64)}`, 'Bearer ', `Basic ${Buffer.from('x:y').toString('base64')}`]) {
      const r = await mcpFetch(s.url, { body: initializeBody(), headers: { authorization } });
      assert.equal(r.status, 401, `Authorization: ${authorization}`);
    }
    assert.equal((await mcpFetch(s.url, { body: initializeBody() })).status, 200, 'with the token it serves');
  });
});

// ---- case 33 -------------------------------------------------------------------------------

const structured = (r) => {
  assert.ok(!r.isError, `tool error: ${errorText(r)}`);
  return r.structuredContent;
};
// The error text with `id` written as ID: an unknown id of the same shape is the control.
const shape = (text, id) => text.split(id).join('ID');
const ghost = (id) => id.replace(/[0-9a-f]/g, (c) => (c === '0' ? '1' : '0'));

describe('case 33: another client of the same server', () => {
  test('another principal\'s sandbox, run and trace ids answer exactly as missing ones; lists show only the caller\'s', { timeout: 240000 }, async () => {
    const dir = tempDir('kiln-sec-tokens-');
    const alice = `alice-${rand()}${rand()}${rand()}`, bob = `bob-${rand()}${rand()}${rand()}`;
    // Bare tokens, named by their position: token-1 is alice's, token-2 bob's.
    fs.writeFileSync(path.join(dir, 'tokens'), `${alice}\n${bob}\n`, { mode: 0o600 });
    const ws = tempDir('kiln-sec-ws-');
    const s = await serve({ args: ['--token-file', path.join(dir, 'tokens')] });
    const a = await httpClient(s.url, { headers: { authorization: `Bearer ${alice}` }, name: 'alice-1' });
    const a2 = await httpClient(s.url, { headers: { authorization: `Bearer ${alice}` }, name: 'alice-2' });
    const b = await httpClient(s.url, { headers: { authorization: `Bearer ${bob}` }, name: 'bob' });
    try {
      const call = (c, name, args) => c.client.callTool({ name, arguments: args }, undefined, { timeout: 120000 });
      for (const c of [a, a2, b]) structured(await call(c, 'workspace_open', { path: ws }));
      const sb = structured(await call(a, 'sandbox_create', {})).sandbox_id;
      const bg = structured(await call(a, 'sandbox_exec', { sandbox_id: sb, command: 'echo alice-secret-output; sleep 300', background: true }));
      const done = structured(await call(a, 'sandbox_exec', { command: 'echo alice-trace' }));
      const trace = done.trace_id;
      assert.ok(trace, 'sandbox_exec returned a trace_id');

      // Bob, with Alice's ids, and with ids of the same shape that do not exist.
      const pairs = [
        ['sandbox_exec', { sandbox_id: sb, command: 'cat /etc/hostname' }, sb],
        ['sandbox_destroy', { sandbox_id: sb }, sb],
        ['process_output', { run_id: bg.run_id }, bg.run_id],
        ['process_input', { run_id: bg.run_id, data: 'x' }, bg.run_id],
        ['process_kill', { run_id: bg.run_id }, bg.run_id],
        ['trace_get', { trace_id: trace }, trace],
        ['trace_output', { trace_id: trace }, trace],
      ];
      for (const [tool, args, id] of pairs) {
        const theirs = await call(b, tool, args);
        const fake = ghost(id);
        const missing = await call(b, tool, JSON.parse(JSON.stringify(args).split(id).join(fake)));
        assert.ok(theirs.isError, `${tool} with alice's id worked for bob: ${JSON.stringify(theirs).slice(0, 300)}`);
        assert.equal(shape(errorText(theirs), id), shape(errorText(missing), fake), `${tool}: the refusal tells the ids apart`);
        assert.ok(!JSON.stringify(theirs).includes('alice-secret-output'));
      }
      for (const method of ['readResource', 'subscribeResource']) {
        const err = async (uri) => b.client[method]({ uri }).then(() => null, (e) => e);
        const theirs = await err(`kiln://trace/${trace}`);
        const missing = await err(`kiln://trace/${ghost(trace)}`);
        assert.ok(theirs, `${method} of alice's trace worked for bob`);
        assert.equal(theirs.code, missing.code);
        assert.equal(shape(theirs.message, trace), shape(missing.message, ghost(trace)), `${method}: the refusal tells the ids apart`);
      }
      const bobSandboxes = structured(await call(b, 'sandbox_list', {})).sandboxes;
      assert.deepEqual(bobSandboxes.map((x) => x.sandbox_id), [], 'bob lists none of alice\'s sandboxes');
      const bobTraces = structured(await call(b, 'trace_list', {})).traces;
      assert.ok(!bobTraces.some((t) => t.trace_id === trace), 'bob lists none of alice\'s traces');
      const bobInfo = structured(await call(b, 'workspace_info', {}));
      assert.deepEqual(bobInfo.sandboxes, []);

      // Alice's other session shares what is hers, and nothing of it was touched by bob.
      assert.ok(structured(await call(a2, 'sandbox_list', {})).sandboxes.some((x) => x.sandbox_id === sb));
      const page = structured(await call(a2, 'process_output', { run_id: bg.run_id, wait_ms: 5000 }));
      assert.match(page.data, /alice-secret-output/);
      assert.equal(page.running, true, 'bob could not kill alice\'s run');
      const got = structured(await call(a2, 'trace_get', { trace_id: trace }));
      assert.equal(got.trace.principal, 'token-1', 'the trace records its principal');
      assert.ok(structured(await call(a2, 'trace_list', {})).traces.some((t) => t.trace_id === trace));
      structured(await call(a, 'sandbox_destroy', { sandbox_id: sb }));

      // The CLI acts as the local user, another principal than token-1: alice's trace is not its.
      const cli = (...args) => spawnSync(kilnBin(), ['traces', ...args, '--state-dir', s.home], { env: kilnEnv(s.home), encoding: 'utf8' });
      const listed0 = cli('list', '--json');
      assert.equal(listed0.status, 0, listed0.stderr);
      assert.ok(!JSON.parse(listed0.stdout).some((t) => t.id === trace), 'kiln traces list shows another principal\'s trace');
      const shown = cli('show', trace);
      assert.notEqual(shown.status, 0, 'kiln traces show printed another principal\'s trace');
      assert.equal(shown.stderr.split(trace).join('ID'), cli('show', ghost(trace)).stderr.split(ghost(trace)).join('ID'));

      // Artifacts: the workspace is shared (any token may open any folder of the server user's),
      // the artifact is not: bob can neither re-share nor remove nor overwrite alice's.
      fs.mkdirSync(path.join(ws, 'site'), { recursive: true });
      fs.writeFileSync(path.join(ws, 'site', 'index.html'), 'alice only\n');
      const art = `alice-${rand()}`;
      structured(await call(a, 'publish', { path: 'site', name: art, share: 'public' }));
      const nobody = `nobody-${rand()}`;
      for (const [tool, args] of [['unpublish', {}], ['publish_share', { share: 'public' }]]) {
        const theirs = await call(b, tool, { artifact: art, ...args });
        const missing = await call(b, tool, { artifact: nobody, ...args });
        assert.ok(theirs.isError, `${tool} of alice's artifact worked for bob`);
        assert.equal(shape(errorText(theirs), art), shape(errorText(missing), nobody), `${tool}: the refusal tells the artifacts apart`);
      }
      const over = await call(b, 'publish', { path: 'site', name: art });
      assert.ok(over.isError, 'bob published a new version over alice\'s artifact');
      const listed = structured(await call(a2, 'publish_list', {})).artifacts.find((x) => x.name === art);
      assert.equal(listed?.versions?.length, 1, `alice's artifact is untouched: ${JSON.stringify(listed)}`);
    } finally {
      for (const c of [a, a2, b]) await c.terminate().catch(() => {});
    }
  });
});

// ---- case 35 -------------------------------------------------------------------------------

// Opens `n` connections that each send the start of a request head and never finish it, and
// opens a new one whenever the server closes one (an attacker who keeps the pressure on).
// With `body`, each sends a whole `POST /mcp` head without a token announcing a 1,000-byte body,
// then one byte of it a second (a slow body rather than a slow head).
// With `auth` too, the heads carry that header (a token holder trickling: only eviction helps).
function slowloris(port, n, { body = false, auth = '' } = {}) {
  const sockets = new Set();
  const connected = new Set();
  let stopped = false;
  let opened = 0;
  const statuses = {};
  const open = () => {
    if (stopped) return;
    const s = net.connect(port, '127.0.0.1');
    opened += 1;
    let timer = null;
    let seen = false;
    s.on('connect', () => {
      connected.add(s);
      if (!body) return s.write('GET /a/site/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ');
      s.write(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\n` +
        'Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n' +
        (auth ? `Authorization: ${auth}\r\n` : '') + '\r\n');
      timer = setInterval(() => s.write('x'), 1000);
    });
    s.on('data', (d) => {
      if (seen) return;
      seen = true;
      const m = /^HTTP\/1\.1 (\d+)/.exec(d.toString('latin1'));
      if (m) statuses[m[1]] = (statuses[m[1]] ?? 0) + 1;
    });
    s.on('error', () => {});
    s.on('close', () => {
      clearInterval(timer);
      sockets.delete(s);
      connected.delete(s);
      if (!stopped) setTimeout(open, 200);
    });
    sockets.add(s);
  };
  for (let i = 0; i < n; i++) open();
  return {
    get open() { return connected.size; },
    get opened() { return opened; },
    statuses,
    stop() { stopped = true; for (const s of sockets) s.destroy(); },
  };
}

// Fresh connections only (agent: false): a pooled keep-alive one from before the attack would
// walk past the cap and prove nothing. A few tries, each bounded: a client whose connection is
// refused retries, as a browser does.
async function attemptUnder(attack, base, target, opts) {
  const bounded = (p) => Promise.race([p, sleep(20000).then(() => { throw new Error('no answer within 20 s'); })]);
  let last = null;
  for (let i = 0; i < 3; i++) {
    try { return await bounded(request(base, target, opts)); } catch (e) { last = e; }
  }
  assert.fail(`${opts.method ?? 'GET'} ${target} failed under the attack (${attack.open} attack sockets open): ${last?.code ?? last}`);
}

describe('case 35: slow HTTP clients', () => {
  test('1,100 connections that never finish their headers lock nobody out: an artifact GET and an /mcp request both work', { timeout: 240000 }, async () => {
    const s = await serve();
    const ws = tempDir('kiln-sec-ws-');
    fs.mkdirSync(path.join(ws, 'site'));
    fs.writeFileSync(path.join(ws, 'site', 'index.html'), '<h1>still here</h1>\n');
    const c = await httpClient(s.url);
    try {
      structured(await c.client.callTool({ name: 'workspace_open', arguments: { path: ws } }));
      structured(await c.client.callTool({ name: 'publish', arguments: { path: 'site', name: 'site', share: 'public' } }));
    } finally {
      await c.terminate();
    }
    const port = Number(new URL(s.base).port);
    const attack = slowloris(port, 1100);
    try {
      // Until the attack holds: most sockets connected and parked, or the server already closing
      // some (reopened at once) because it holds as many as its cap allows. Bounded.
      await waitFor(() => attack.open >= 1000 || attack.opened >= 1300, 60000, 200);
      await sleep(1000);
      // Fresh connections only (agent: false): a pooled keep-alive one from before the attack
      // would walk past the cap and prove nothing.
      const bounded = (p) => Promise.race([p, sleep(20000).then(() => { throw new Error('no answer within 20 s'); })]);
      const attempt = async (target, opts) => {
        let last = null;
        // A few tries, each bounded: a client whose connection is refused retries, as a browser does.
        for (let i = 0; i < 3; i++) {
          try { return await bounded(request(s.base, target, opts)); } catch (e) { last = e; }
        }
        assert.fail(`${opts.method ?? 'GET'} ${target} failed under the attack (${attack.open} attack sockets open): ${last?.code ?? last}`);
      };
      const page = await attempt('/a/site/', {});
      assert.equal(page.status, 200);
      assert.match(page.text, /still here/);
      const mcp = await attempt('/mcp', {
        method: 'POST', body: JSON.stringify(initializeBody()),
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...s.auth },
      });
      assert.equal(mcp.status, 200, mcp.text);
      assert.ok(JSON.parse(mcp.text).result?.protocolVersion);
      assert.ok(attack.open > 300, `the attack was still on (${attack.open} sockets open)`);
    } finally {
      attack.stop();
    }
  });

  // H4: a complete head without a token is answered 401 at once (the body is never waited for),
  // and a connection still receiving a body can be evicted like one still receiving its head.
  test('1,100 tokenless POST /mcp heads trickling their bodies a byte a second lock nobody out', { timeout: 240000 }, async () => {
    const s = await serve();
    const port = Number(new URL(s.base).port);
    const attack = slowloris(port, 1100, { body: true });
    try {
      await waitFor(() => attack.opened >= 1100, 60000, 200);
      await sleep(3000);
      const started = Date.now();
      const mcp = await attemptUnder(attack, s.base, '/mcp', {
        method: 'POST', body: JSON.stringify(initializeBody()),
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...s.auth },
      });
      assert.equal(mcp.status, 200, mcp.text);
      assert.ok(JSON.parse(mcp.text).result?.protocolVersion);
      assert.ok(Date.now() - started < 20000);
      // The attackers were told no from their heads alone, long before 1,000 bytes at 1 byte/s.
      assert.ok((attack.statuses['401'] ?? 0) >= 1000, `401s seen by the attack: ${JSON.stringify(attack.statuses)}`);
      assert.deepEqual(Object.keys(attack.statuses), ['401']);
    } finally {
      attack.stop();
    }
  });

  test('1,100 slow bodies behind a valid token: connections reading a body are evicted oldest first', { timeout: 240000 }, async () => {
    const s = await serve();
    const port = Number(new URL(s.base).port);
    const attack = slowloris(port, 1100, { body: true, auth: s.auth.authorization });
    try {
      await waitFor(() => attack.open >= 1000 || attack.opened >= 1300, 60000, 200);
      await sleep(2000);
      const mcp = await attemptUnder(attack, s.base, '/mcp', {
        method: 'POST', body: JSON.stringify(initializeBody()),
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...s.auth },
      });
      assert.equal(mcp.status, 200, mcp.text);
      assert.ok(attack.open > 300, `the attack was still on (${attack.open} sockets open)`);
    } finally {
      attack.stop();
    }
  });
});
