// The incident tracker's web process (node:http, no framework). Kiln serves it at /a/NAME/ with
// that prefix removed, so links are built from KILN_BASE_PATH, and who is asking comes from the
// X-Kiln-User header Kiln sets after the share mode admitted the request.
const http = require('node:http');
const { pool } = require('./db.js');
const { SEVERITIES, listPage } = require('./page.js');

const PORT = Number(process.env.PORT || 3000);
const BASE = (process.env.KILN_BASE_PATH || '/').replace(/\/*$/, '/');
const MAX_BODY = 64 * 1024;
const COLUMNS = 'id, title, severity, reported_by, created_at';
const db = pool();

const send = (res, status, type, body, headers = {}) => {
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store', ...headers });
  res.end(body);
};
const json = (res, status, value) => send(res, status, 'application/json', JSON.stringify(value));

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size > MAX_BODY) reject(Object.assign(new Error('body too large'), { status: 413 }));
      else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

// A form post or a JSON body -> {title, severity}, or a message saying what is wrong.
function parseIncident(type, text) {
  let fields;
  try {
    fields = type.startsWith('application/json') ? JSON.parse(text) : Object.fromEntries(new URLSearchParams(text));
  } catch {
    return { error: 'the body is not valid JSON' };
  }
  const title = String(fields?.title ?? '').trim();
  const severity = String(fields?.severity ?? 'medium');
  if (!title || title.length > 200) return { error: 'title must be 1 to 200 characters' };
  if (!SEVERITIES.includes(severity)) return { error: `severity must be one of ${SEVERITIES.join(', ')}` };
  return { title, severity };
}

async function createIncident(req, res) {
  const type = req.headers['content-type'] || '';
  const wantsJson = type.startsWith('application/json');
  const input = parseIncident(type, await readBody(req));
  if (input.error) return wantsJson ? json(res, 400, { error: input.error }) : send(res, 400, 'text/plain', `${input.error}\n`);
  const user = req.headers['x-kiln-user'] || 'anonymous';
  const { rows } = await db.query(`INSERT INTO incidents (title, severity, reported_by) VALUES ($1, $2, $3) RETURNING ${COLUMNS}`,
    [input.title, input.severity, user]);
  // A form gets the list back (post/redirect/get); an API client gets the new row.
  return wantsJson ? json(res, 201, rows[0]) : send(res, 303, 'text/plain', 'created\n', { location: BASE });
}

const incidents = async () => (await db.query(`SELECT ${COLUMNS} FROM incidents ORDER BY id DESC LIMIT 200`)).rows;

async function route(req, res) {
  const { pathname } = new URL(req.url, 'http://app');
  const key = `${req.method} ${pathname}`;
  if (key === 'GET /health') {
    await db.query('SELECT 1');
    return json(res, 200, { ok: true });
  }
  if (key === 'GET /') return send(res, 200, 'text/html; charset=utf-8', listPage(BASE, await incidents(), req.headers['x-kiln-user'] || 'anonymous'));
  if (key === 'GET /api/incidents') return json(res, 200, await incidents());
  if (key === 'GET /api/digests') {
    const { rows } = await db.query('SELECT id, to_char(day, \'YYYY-MM-DD\') AS day, count, titles, created_at FROM digests ORDER BY id DESC LIMIT 100');
    return json(res, 200, rows);
  }
  if (key === 'POST /incidents') return createIncident(req, res);
  return send(res, 404, 'text/plain', 'not found\n');
}

const server = http.createServer((req, res) => {
  route(req, res).catch((e) => {
    if (!e.status) console.error(`${req.method} ${req.url}: ${e.message}`);
    if (!res.headersSent) send(res, e.status || 500, 'text/plain', e.status ? `${e.message}\n` : 'internal error\n');
    else res.destroy();
  });
});

server.listen(PORT, '127.0.0.1', () => console.log(`incident-tracker listening on 127.0.0.1:${PORT}, base path ${BASE}`));

// Kiln stops a sleeping or replaced app with SIGTERM: finish what is in flight, then go.
process.on('SIGTERM', () => {
  server.close(() => db.end().finally(() => process.exit(0)));
  setTimeout(() => process.exit(0), 5000).unref();
});
