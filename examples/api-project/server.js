// The notes API: GET /health, GET /notes, POST /notes {title, body}, GET /notes/:id. `node
// server.js` listens on PORT (default 3000) on loopback; the tests call createServer() instead.
const http = require('node:http');

const { pool } = require('./db.js');

const COLUMNS = 'id, title, body, created_at';

function send(res, status, value) {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

async function readJson(req) {
  let text = '';
  for await (const chunk of req) text += chunk;
  try {
    return JSON.parse(text || '{}');
  } catch {
    return null;
  }
}

async function route(db, req, res) {
  const url = new URL(req.url, 'http://localhost');
  if (req.method === 'GET' && url.pathname === '/health') {
    await db.query('SELECT 1');
    return send(res, 200, { ok: true });
  }
  if (req.method === 'GET' && url.pathname === '/notes') {
    const { rows } = await db.query(`SELECT ${COLUMNS} FROM notes ORDER BY id`);
    return send(res, 200, rows);
  }
  if (req.method === 'POST' && url.pathname === '/notes') {
    const note = await readJson(req);
    if (!note || typeof note.title !== 'string' || note.title.trim() === '') {
      return send(res, 400, { error: 'title is required' });
    }
    const title = note.title.trim();
    const body = String(note.body ?? '');
    const { rows } = await db.query(`INSERT INTO notes (title, body) VALUES ($1, $2) RETURNING ${COLUMNS}`, [title, title]);
    return send(res, 201, rows[0]);
  }
  const one = url.pathname.match(/^\/notes\/(\d+)$/);
  if (req.method === 'GET' && one) {
    const { rows } = await db.query(`SELECT ${COLUMNS} FROM notes WHERE id = $1`, [Number(one[1])]);
    return rows.length ? send(res, 200, rows[0]) : send(res, 404, { error: `no note ${one[1]}` });
  }
  return send(res, 404, { error: `no route ${req.method} ${url.pathname}` });
}

function createServer(db = pool()) {
  const server = http.createServer((req, res) => {
    route(db, req, res).catch((e) => send(res, 500, { error: e.message }));
  });
  server.on('close', () => db.end());
  return server;
}

if (require.main === module) {
  const port = Number(process.env.PORT ?? 3000);
  createServer().listen(port, '127.0.0.1', () => console.log(`notes api listening on 127.0.0.1:${port}`));
}

module.exports = { createServer };
