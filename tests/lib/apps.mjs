// Shared by the apps tests (e2e, browser, security): a workspace holding the tiny echo app
// (tests/lib/echo_app.cjs), a `kiln mcp` that publishes it with app: true and whose daemon it
// stops afterwards, app_status polling, the control API's token, the app's request log read on
// the host, and a hand-written WebSocket client (no npm package needed).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { alive, readServeInfo, stopServeOf } from './http.mjs';
import { connectClient, errorText, kilnBin, sleep, tempDir } from './kiln.mjs';

export const echoAppSource = fs.readFileSync(path.join(path.dirname(fileURLToPath(import.meta.url)), 'echo_app.cjs'), 'utf8');
export const SOURCE_MARKER = 'SOURCE-MARKER-4f1c9e';

// A workspace with server.js (the echo app) and kiln.json {app, services}; `files` adds more.
export function appWorkspace({ app = {}, services, files = {}, prefix = 'kiln-app-ws-' } = {}) {
  const ws = path.join(tempDir(prefix), 'ws');
  fs.mkdirSync(ws, { recursive: true });
  // The sandbox's user (kilntest's run, or a mapped root) must read the copy.
  fs.chmodSync(path.dirname(ws), 0o755);
  fs.chmodSync(ws, 0o755);
  const config = { app: { run: 'node server.js', ready: '/health', idle_s: 0, ...app } };
  if (services) config.services = services;
  fs.writeFileSync(path.join(ws, 'kiln.json'), JSON.stringify(config, null, 2));
  fs.writeFileSync(path.join(ws, 'server.js'), echoAppSource);
  fs.writeFileSync(path.join(ws, 'pattern.bin'), patternBlock());
  for (const [rel, body] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(ws, rel)), { recursive: true });
    fs.writeFileSync(path.join(ws, rel), body);
  }
  return ws;
}

// `kiln mcp --workspace ws` with its own state dir; `kiln serve` (started by publish) listens on
// a free loopback port. `stop()` closes the session and stops the daemon.
export async function startAppKiln({ ws, home = tempDir('kiln-app-home-'), env = {}, args = [] } = {}) {
  const s = await connectClient({ args: ['--workspace', ws, ...args], home, env: { KILN_SERVE_LISTEN: '127.0.0.1:0', ...env } });
  const k = {
    ...s, ws, home,
    call: (name, a, timeout = 300000) => s.client.callTool({ name, arguments: a }, undefined, { timeout, resetTimeoutOnProgress: true }),
    async ok(name, a, timeout) {
      const r = await k.call(name, a, timeout);
      assert.ok(!r.isError, `${name} ${JSON.stringify(a)} failed: ${errorText(r)}`);
      return r.structuredContent;
    },
    serve() { return readServeInfo(home); },
    async stop() {
      await s.close().catch(() => {});
      const info = readServeInfo(home);
      // A daemon that died under the tests says why in its log: show it where the failures are.
      if (info?.pid && !alive(info.pid)) {
        let log = '';
        try { log = fs.readFileSync(path.join(home, 'serve.log'), 'utf8').split('\n').slice(-40).join('\n'); } catch { /* none */ }
        console.log(`# kiln serve (pid ${info.pid}) died before the tests ended; the end of ${home}/serve.log:\n${log.replace(/^/gm, '# ')}`);
      }
      await stopServeOf(home, 15000);
    },
  };
  return k;
}

// publish {path: '.', app: true, ...}: the result, with `base` (http://127.0.0.1:PORT) and
// `prefix` (/a/NAME/) added.
export async function publishApp(k, args) {
  const pub = await k.ok('publish', { path: '.', app: true, ...args });
  assert.match(pub.url ?? '', /^http:\/\/127\.0\.0\.1:\d+\/a\/[^/]+\/$/, `publish returned the URL ${pub.url}`);
  const u = new URL(pub.url);
  return { ...pub, base: u.origin, prefix: u.pathname };
}

// Polls app_status until the app is in one of `states`; fails with the last answer.
export async function waitForState(k, artifact, states = ['running'], ms = 90000) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    last = await k.ok('app_status', { artifact });
    if (states.includes(last.state)) return last;
    if (Date.now() > deadline) assert.fail(`app ${artifact} did not become ${states.join('/')} in ${ms / 1000} s: ${JSON.stringify(last)}`);
    await sleep(200);
  }
}

// The control API's bearer token, the documented way.
export function controlToken(home) {
  const r = spawnSync(kilnBin(), ['serve', '--print-token', '--state-dir', home], { encoding: 'utf8' });
  assert.equal(r.status, 0, `kiln serve --print-token: ${r.stderr}`);
  return r.stdout.trim();
}

// Every request line the app logged (parsed), read on the host from the data folder that
// app_status names; [] when the app never wrote one.
export async function appRequests(k, artifact) {
  const st = await k.ok('app_status', { artifact });
  assert.ok(st.data_dir, `app_status of ${artifact} names no data_dir: ${JSON.stringify(st)}`);
  const file = path.join(st.data_dir, 'requests.log');
  if (!fs.existsSync(file)) return [];
  return fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

// The 64 KiB block the app repeats for /download (it reads it from pattern.bin).
export function patternBlock() {
  const b = Buffer.alloc(64 * 1024);
  let x = 0x2545f491;
  for (let i = 0; i < b.length; i++) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    b[i] = x & 0xff;
  }
  return b;
}

export function procStatusKb(pid, field) {
  const m = new RegExp(`${field}:\\s+(\\d+)`).exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : 0;
}

// Resets the peak RSS (VmHWM) of `pid` when the kernel lets us; true when it did.
export function resetPeakRss(pid) {
  try {
    fs.writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

// Samples VmRSS of `pid` every 20 ms until stop() is called: { stop() -> peak kB }.
export function rssSampler(pid) {
  let peak = procStatusKb(pid, 'VmRSS');
  const t = setInterval(() => { try { peak = Math.max(peak, procStatusKb(pid, 'VmRSS')); } catch { /* gone */ } }, 20);
  return { stop() { clearInterval(t); return peak; } };
}

function wsFrame(op, payload) {
  const n = payload.length;
  const mask = crypto.randomBytes(4);
  let head;
  if (n < 126) head = Buffer.from([0x80 | op, 0x80 | n]);
  else if (n < 65536) head = Buffer.from([0x80 | op, 0x80 | 126, n >> 8, n & 0xff]);
  else {
    head = Buffer.alloc(10);
    head[0] = 0x80 | op;
    head[1] = 0x80 | 127;
    head.writeBigUInt64BE(BigInt(n), 2);
  }
  const body = Buffer.from(payload);
  for (let i = 0; i < body.length; i++) body[i] ^= mask[i & 3];
  return Buffer.concat([head, mask, body]);
}

// A WebSocket client on a bare socket: resolves { status, head (the response head as text),
// send(op, payload), next() -> {op, payload}, close() } once the server answered the upgrade.
export function wsConnect(base, target, headers = {}) {
  const u = new URL(base);
  const key = crypto.randomBytes(16).toString('base64');
  return new Promise((resolve, reject) => {
    const sock = net.connect({ host: u.hostname, port: Number(u.port) });
    let buf = Buffer.alloc(0);
    let head = null;
    const frames = [];
    const waiters = [];
    const wake = () => { while (waiters.length) waiters.shift()(); };
    const timer = setTimeout(() => { sock.destroy(); reject(new Error(`no answer to the upgrade of ${target} in 15 s`)); }, 15000);
    sock.on('connect', () => {
      const lines = [`GET ${target} HTTP/1.1`, `Host: ${u.host}`, 'Upgrade: websocket', 'Connection: Upgrade',
        `Sec-WebSocket-Key: ${key}`, 'Sec-WebSocket-Version: 13', ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
      sock.write(`${lines.join('\r\n')}\r\n\r\n`);
    });
    sock.on('error', (e) => { clearTimeout(timer); if (!head) reject(e); wake(); });
    sock.on('close', () => {
      clearTimeout(timer);
      if (!head) resolve({ status: 0, head: buf.toString('latin1'), closed: true });
      wake();
    });
    sock.on('data', (c) => {
      buf = Buffer.concat([buf, c]);
      if (!head) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        head = buf.subarray(0, end).toString('latin1');
        buf = buf.subarray(end + 4);
        clearTimeout(timer);
        const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
        const accept = crypto.createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
        resolve({
          status, head, acceptOk: new RegExp(`^sec-websocket-accept: ${accept.replace(/[+/]/g, '\\$&')}\\s*$`, 'im').test(head),
          body: () => buf.toString('latin1'),
          send: (op, payload) => sock.write(wsFrame(op, Buffer.from(payload))),
          async next(ms = 15000) {
            const deadline = Date.now() + ms;
            while (!frames.length) {
              if (sock.destroyed || Date.now() > deadline) throw new Error('no WebSocket frame arrived');
              await new Promise((r) => { waiters.push(r); setTimeout(r, 100); });
            }
            return frames.shift();
          },
          close: () => sock.destroy(),
        });
      }
      for (;;) {
        if (buf.length < 2) break;
        let len = buf[1] & 0x7f;
        let at = 2;
        if (len === 126) { if (buf.length < 4) break; len = buf.readUInt16BE(2); at = 4; } else if (len === 127) {
          if (buf.length < 10) break;
          len = Number(buf.readBigUInt64BE(2));
          at = 10;
        }
        if (buf.length < at + len) break;
        frames.push({ op: buf[0] & 0x0f, payload: Buffer.from(buf.subarray(at, at + len)) });
        buf = buf.subarray(at + len);
      }
      wake();
    });
  });
}
