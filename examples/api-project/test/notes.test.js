// Integration tests: the real server (on a free port) against the real database Kiln gives the
// check (a fresh copy of the migrated template per verify run, so the table starts empty).
const assert = require('node:assert/strict');
const { after, before, test } = require('node:test');

const { createServer } = require('../server.js');

let server;
let base;
before(async () => {
  server = createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${server.address().port}`;
});
after(() => new Promise((resolve) => server.close(resolve)));

async function call(method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: body ? { 'content-type': 'application/json' } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: await res.json() };
}

test('health answers once the database does', async () => {
  assert.deepEqual(await call('GET', '/health'), { status: 200, body: { ok: true } });
});

test('a posted note is stored with its title and body', async () => {
  const made = await call('POST', '/notes', { title: 'buy milk', body: 'two litres, semi-skimmed' });
  assert.equal(made.status, 201);
  const read = await call('GET', `/notes/${made.body.id}`);
  assert.equal(read.status, 200);
  assert.equal(read.body.title, 'buy milk');
  assert.equal(read.body.body, 'two litres, semi-skimmed');
});

test('the list has every note, oldest first', async () => {
  const before = (await call('GET', '/notes')).body.length;
  await call('POST', '/notes', { title: 'first' });
  await call('POST', '/notes', { title: 'second' });
  const list = (await call('GET', '/notes')).body;
  assert.equal(list.length, before + 2);
  assert.deepEqual(list.slice(-2).map((n) => n.title), ['first', 'second']);
});

test('a note without a title is refused', async () => {
  assert.equal((await call('POST', '/notes', { body: 'no title' })).status, 400);
  assert.equal((await call('POST', '/notes', { title: '  ' })).status, 400);
});

test('an unknown note is 404', async () => {
  assert.equal((await call('GET', '/notes/999999')).status, 404);
});
