// HTTP helpers for the `kiln serve` tests and bench: requests whose path reaches the server byte
// for byte (node:http, or a bare socket for what node:http refuses to send), the daemon's
// serve.json, and stopping a daemon the tests started.
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';

import { sleep } from './kiln.mjs';

// One request with node:http; `target` is sent as is (no URL normalisation). Resolves
// { status, headers, body (Buffer), text }.
export function request(base, target, { method = 'GET', headers = {}, body, agent = false } = {}) {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, path: target, method, headers, agent }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const buf = Buffer.concat(chunks);
        resolve({ status: res.statusCode, headers: res.headers, body: buf, text: buf.toString('utf8') });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(15000, () => req.destroy(new Error(`timeout: ${method} ${target}`)));
    if (body !== undefined) req.write(body);
    req.end();
  });
}

// Bytes on a bare socket; resolves with everything the server sent before closing (or `waitMs`).
export function rawExchange(base, bytes, { waitMs = 3000 } = {}) {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const sock = net.connect({ host: u.hostname, port: Number(u.port) }, () => sock.write(bytes));
    const chunks = [];
    const timer = setTimeout(() => sock.destroy(), waitMs);
    sock.on('data', (c) => chunks.push(c));
    sock.on('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks).toString('latin1'));
    });
    sock.on('error', (e) => (e.code === 'ECONNRESET' ? null : reject(e)));
  });
}

// The status codes of every response in a raw exchange, in order.
export function statusesOf(raw) {
  return [...raw.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
}

export function readServeInfo(home) {
  try {
    return JSON.parse(fs.readFileSync(path.join(home, 'serve.json'), 'utf8'));
  } catch {
    return undefined;
  }
}

export async function waitForServeInfo(home, { timeoutMs = 5000, pid } = {}) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const info = readServeInfo(home);
    if (info && (!pid || info.pid === pid)) return info;
    await sleep(20);
  }
  throw new Error(`no serve.json in ${home} within ${timeoutMs} ms`);
}

export function alive(pid) {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

// The parent pid and session id of a live process, from /proc.
export function procStat(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { state: f[0], ppid: Number(f[1]), pgid: Number(f[2]), sid: Number(f[3]) };
}

// SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone.
export async function stopProcess(pid, graceMs = 7000) {
  if (!pid || !alive(pid)) return;
  try { process.kill(pid, 'SIGTERM'); } catch { return; }
  const deadline = Date.now() + graceMs;
  while (alive(pid) && Date.now() < deadline) await sleep(20);
  if (alive(pid)) {
    try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
    while (alive(pid)) await sleep(20);
  }
}

// Stops the kiln serve of state directory `home` (from its serve.json), but only if that pid is
// still a `kiln serve` of that directory: a daemon that is gone leaves a stale pid, which by now
// may be another test's server.
export async function stopServeOf(home, graceMs = 20000) {
  const info = readServeInfo(home);
  if (!info?.pid) return;
  let cmd = '';
  try { cmd = fs.readFileSync(`/proc/${info.pid}/cmdline`, 'utf8'); } catch { return; }
  const args = cmd.split('\0');
  if (!args.includes('serve')) return;
  const dir = args[args.indexOf('--state-dir') + 1];
  if (args.includes('--state-dir') && dir && fs.realpathSync(dir) !== fs.realpathSync(home)) return;
  await stopProcess(info.pid, graceMs);
}

export function basicAuth(password, user = 'any') {
  return `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
}

// "kiln_session=VALUE; Path=...; HttpOnly" -> "kiln_session=VALUE"
export function cookieOf(res) {
  const set = res.headers['set-cookie'];
  const first = Array.isArray(set) ? set[0] : set;
  return first ? first.split(';')[0] : undefined;
}
