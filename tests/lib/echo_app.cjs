// The tiny app the apps tests publish (copied into a temp workspace as server.js; node:* only, so it
// needs no install): it logs every request it gets to $KILN_DATA_DIR/requests.log before anything
// else, so a test can prove which requests reached it, and offers what the tests poke at.
// SOURCE-MARKER-4f1c9e: served as a static file, this line would show the app's code leaked.
'use strict';
const crypto = require('node:crypto');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const http = require('node:http');
const { execFile } = require('node:child_process');

const DATA = process.env.KILN_DATA_DIR;
const LOG = path.join(DATA, 'requests.log');
const NAME = process.env.KILN_APP_LABEL || 'app';

function record(req, extra = {}) {
  fs.appendFileSync(LOG, JSON.stringify({ method: req.method, url: req.url, headers: req.headers, ...extra }) + '\n');
}

function send(res, status, body, type = 'application/json') {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

const esc = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

// The 64 KiB block /download repeats: the tests wrote it next to us, and know its hash.
const block = () => fs.readFileSync(path.join(__dirname, 'pattern.bin'));

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function psql(sql) {
  return new Promise((resolve) => {
    execFile('psql', ['-v', 'ON_ERROR_STOP=1', '-tA', '-c', sql], { timeout: 30000 }, (err, stdout, stderr) => {
      resolve(err ? { ok: false, error: `${err.message} ${stderr}` } : { ok: true, out: stdout.trim() });
    });
  });
}

function tryConnect(host, port) {
  return new Promise((resolve) => {
    const s = net.connect({ host, port: Number(port), timeout: 3000 });
    s.on('connect', () => { s.destroy(); resolve({ host, port, connected: true }); });
    s.on('timeout', () => { s.destroy(); resolve({ host, port, connected: false, code: 'TIMEOUT' }); });
    s.on('error', (e) => resolve({ host, port, connected: false, code: e.code }));
  });
}

// Looks for a file name anywhere this process can see (bounded), outside /proc, /sys, /dev, /usr.
function findName(needle, limit = 500000) {
  const found = [];
  let seen = 0;
  const walk = (dir) => {
    if (seen > limit) return;
    let entries;
    try { entries = fs.readdirSync(dir, { withFileTypes: true }); } catch { return; }
    for (const e of entries) {
      if (++seen > limit) return;
      const p = path.join(dir, e.name);
      if (e.name.includes(needle)) found.push(p);
      if (e.isDirectory() && !['/proc', '/sys', '/dev', '/usr'].includes(p)) walk(p);
    }
  };
  walk('/');
  return { found, seen, truncated: seen > limit };
}

async function route(req, res) {
  const url = new URL(req.url, 'http://app.invalid');
  const user = req.headers['x-kiln-user'];
  if (url.pathname === '/health') return send(res, 200, 'ok', 'text/plain');
  if (url.pathname === '/hang') return undefined;  // never answers: a hung app
  if (url.pathname === '/echo') {
    const body = await readBody(req);
    return send(res, 200, {
      method: req.method, url: req.url, headers: req.headers, body, name: NAME,
      env: { PORT: process.env.PORT, KILN_BASE_PATH: process.env.KILN_BASE_PATH, KILN_DATA_DIR: DATA },
    });
  }
  if (url.pathname === '/log') {
    if (!user) return send(res, 403, { error: 'no X-Kiln-User' });
    return send(res, 200, fs.readFileSync(LOG, 'utf8'), 'text/plain');
  }
  if (url.pathname === '/upload') {
    // Reads nothing for a moment, then hashes as it goes: a proxy that does not respect
    // backpressure would have to hold the client's body meanwhile.
    const hash = crypto.createHash('sha256');
    let bytes = 0;
    req.pause();
    setTimeout(() => req.resume(), Number(url.searchParams.get('hold_ms') ?? 0));
    req.on('data', (c) => { bytes += c.length; hash.update(c); });
    req.on('end', () => send(res, 200, { bytes, sha256: hash.digest('hex'), chunked: req.headers['transfer-encoding'] ?? null }));
    return undefined;
  }
  if (url.pathname === '/download') {
    const total = Number(url.searchParams.get('mb') ?? 1) * 1024 * 1024;
    const b = block();
    res.writeHead(200, { 'content-type': 'application/octet-stream' });  // chunked: no length
    let sent = 0;
    const more = () => {
      while (sent < total) {
        const n = Math.min(b.length, total - sent);
        sent += n;
        if (!res.write(n === b.length ? b : b.subarray(0, n))) return res.once('drain', more);
      }
      return res.end();
    };
    more();
    return undefined;
  }
  if (url.pathname === '/write-here') {
    const out = {};
    try {
      fs.writeFileSync(path.join(__dirname, 'pwned.txt'), 'x');
      out.code_file = 'OK';
    } catch (e) { out.code_file = e.code; }
    try {
      fs.writeFileSync(path.join(__dirname, 'server.js'), '// replaced');
      out.code_replace = 'OK';
    } catch (e) { out.code_replace = e.code; }
    try {
      fs.writeFileSync(path.join(DATA, 'written.txt'), 'data ok');
      out.data = fs.readFileSync(path.join(DATA, 'written.txt'), 'utf8');
    } catch (e) { out.data = e.code; }
    return send(res, 200, out);
  }
  if (url.pathname === '/put') {
    // Leaves a named file in the data folder (the other app's data the security tests look for).
    const file = url.searchParams.get('file');
    fs.writeFileSync(path.join(DATA, path.basename(file)), url.searchParams.get('body') ?? '');
    return send(res, 200, { ok: true });
  }
  if (url.pathname === '/read') {
    const p = url.searchParams.get('path');
    try {
      const text = fs.readFileSync(p, 'utf8');
      return send(res, 200, { path: p, ok: true, text: text.slice(0, 2000) });
    } catch (e) { return send(res, 200, { path: p, ok: false, code: e.code }); }
  }
  if (url.pathname === '/find') return send(res, 200, findName(url.searchParams.get('name')));
  if (url.pathname === '/connect') {
    const targets = JSON.parse(url.searchParams.get('targets'));
    const results = [];
    for (const [host, port] of targets) results.push(await tryConnect(host, port));
    let fetched;
    const fetchUrl = url.searchParams.get('fetch');
    if (fetchUrl) {
      try {
        const r = await fetch(fetchUrl, { signal: AbortSignal.timeout(3000) });
        fetched = { ok: true, status: r.status, text: (await r.text()).slice(0, 500) };
      } catch (e) { fetched = { ok: false, code: e.cause?.code ?? e.name }; }
    }
    return send(res, 200, { results, fetched, interfaces: Object.keys(os.networkInterfaces()) });
  }
  if (url.pathname === '/rows') {
    const made = await psql('CREATE TABLE IF NOT EXISTS notes (id serial PRIMARY KEY, body text NOT NULL)');
    if (!made.ok) return send(res, 500, made);
    if (req.method === 'POST') {
      const n = Number(url.searchParams.get('n') ?? 1);
      const tag = (url.searchParams.get('tag') ?? 'row').replace(/[^a-z0-9-]/gi, '');
      const ins = await psql(`INSERT INTO notes (body) SELECT '${tag}-' || g FROM generate_series(1, ${n}) g`);
      if (!ins.ok) return send(res, 500, ins);
      fs.appendFileSync(path.join(DATA, 'rows-written.txt'), `${tag} ${n}\n`);
    }
    const count = await psql('SELECT count(*) FROM notes');
    return count.ok ? send(res, 200, { count: Number(count.out) }) : send(res, 500, count);
  }
  if (url.pathname === '/greet' && req.method === 'POST') {
    const form = new URLSearchParams(await readBody(req));
    return send(res, 200, `<!doctype html><title>Greeted</title><p id="result">${esc(user)} says: ${esc(form.get('message'))}</p>`,
      'text/html; charset=utf-8');
  }
  if (url.pathname === '/') {
    return send(res, 200, '<!doctype html><title>Echo app</title>' +
      `<h1 id="who">Hello, ${esc(user)}</h1><form method="post" action="${esc(process.env.KILN_BASE_PATH)}greet">` +
      '<input name="message" id="message"><button type="submit" id="send">Send</button></form>', 'text/html; charset=utf-8');
  }
  return send(res, 404, { error: 'no such page', url: req.url });
}

const server = http.createServer((req, res) => {
  record(req);
  route(req, res).catch((e) => send(res, 500, { error: String(e) }));
});

// WebSocket by hand: the handshake, then every text or binary message echoed back.
server.on('upgrade', (req, socket) => {
  record(req, { upgrade: true });
  const key = req.headers['sec-websocket-key'];
  if (req.url !== '/ws' || !key) { socket.end('HTTP/1.1 400 Bad Request\r\n\r\n'); return; }
  const accept = crypto.createHash('sha1').update(key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
  socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n` +
    `X-App-Saw-User: ${req.headers['x-kiln-user'] ?? ''}\r\n\r\n`);
  let buf = Buffer.alloc(0);
  socket.on('data', (c) => {
    buf = Buffer.concat([buf, c]);
    for (;;) {
      if (buf.length < 2) return;
      const op = buf[0] & 0x0f;
      let len = buf[1] & 0x7f;
      let at = 2;
      if (len === 126) { if (buf.length < 4) return; len = buf.readUInt16BE(2); at = 4; }
      else if (len === 127) { if (buf.length < 10) return; len = Number(buf.readBigUInt64BE(2)); at = 10; }
      const masked = (buf[1] & 0x80) !== 0;
      if (buf.length < at + (masked ? 4 : 0) + len) return;
      const mask = masked ? buf.subarray(at, at + 4) : null;
      at += masked ? 4 : 0;
      const payload = Buffer.from(buf.subarray(at, at + len));
      if (mask) for (let i = 0; i < payload.length; i++) payload[i] ^= mask[i & 3];
      buf = buf.subarray(at + len);
      if (op === 0x8) { socket.end(Buffer.from([0x88, 0])); return; }
      if (op === 0x9) { socket.write(frame(0xa, payload)); continue; }
      socket.write(frame(op, payload));
    }
  });
  socket.on('error', () => {});
});

function frame(op, payload) {
  const n = payload.length;
  const head = n < 126 ? Buffer.from([0x80 | op, n])
    : n < 65536 ? Buffer.from([0x80 | op, 126, n >> 8, n & 0xff])
      : Buffer.concat([Buffer.from([0x80 | op, 127]), (() => { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt(n)); return b; })()]);
  return Buffer.concat([head, payload]);
}

server.keepAliveTimeout = 30000;
server.listen(Number(process.env.PORT), '127.0.0.1');
