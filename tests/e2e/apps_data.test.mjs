// An app's data belongs to its artifact (TOOLS.md "Apps"): the echo app with a postgres service
// writes rows through psql; app_export writes a dump and the data folder into the workspace, and
// the dump loads into a fresh PostgreSQL of our own (initdb in a temp dir, outside Kiln) with every
// row; unpublish keeps the data for a republish of the same name, and unpublish {delete_data}
// removes it. Skipped when the sandbox cannot run here or postgres is not installed (both failures
// under KILN_REQUIRE_SANDBOX=1).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';

import { appWorkspace, publishApp, startAppKiln, waitForState } from '../lib/apps.mjs';
import { request } from '../lib/http.mjs';
import { postgresBindir, startCluster } from '../lib/pg_cluster.mjs';
import { tempDir } from '../lib/kiln.mjs';
import { probeSandbox, sandboxRequired } from '../lib/sandbox_probe.mjs';

const bindir = postgresBindir();
const havePostgres = Boolean(bindir);

const ws = appWorkspace({ services: { db: { kind: 'postgres' } }, app: { services: ['db'] } });
const k = await startAppKiln({ ws });
after(() => k.stop());
const gate = await probeSandbox('apps data e2e', k.call);

function pgTest(name, fn) {
  if (!havePostgres) {
    const why = 'postgres is not installed (Debian package postgresql)';
    return sandboxRequired ? test(name, () => assert.fail(why)) : test(name, { skip: why }, () => {});
  }
  return gate.test(name, { timeout: 600000 }, fn);
}

const rows = async (base, method = 'GET', query = '') => {
  const r = await request(base, `/a/notes/rows${query}`, { method });
  assert.equal(r.status, 200, `${method} /a/notes/rows${query}: ${r.status} ${r.text.slice(0, 400)}`);
  return JSON.parse(r.text).count;
};

function filesUnder(dir) {
  const out = [];
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out.push(p);
    }
  };
  if (fs.existsSync(dir)) walk(dir);
  return out;
}

// A throwaway cluster outside Kiln (tests/lib/pg_cluster.mjs: as kilntest or nobody when root).
async function freshPostgres() {
  const cluster = await startCluster(bindir, tempDir('kiln-app-pg-'));
  const psql = (db, args) => spawnSync(path.join(bindir, 'psql'), [cluster.url.replace(/\/postgres$/, `/${db}`), '-v', 'ON_ERROR_STOP=1', ...args],
    { encoding: 'utf8' });
  return { psql, stop: cluster.stop };
}

pgTest('app_export round-trips: the dump loads into a fresh postgres with every row, the data folder comes along', async () => {
  const pub = await publishApp(k, { name: 'notes', share: 'public' });
  await waitForState(k, 'notes');
  assert.equal(await rows(pub.base, 'POST', '?n=7&tag=first'), 7, 'the app wrote its rows');
  const ex = await k.ok('app_export', { artifact: 'notes', path: 'export' });
  const files = filesUnder(path.join(ws, 'export'));
  const dumps = files.filter((f) => f.endsWith('.sql'));
  assert.equal(dumps.length, 1, `one database dump under export/ (db.sql), got ${JSON.stringify(files)}; result ${JSON.stringify(ex)}`);
  assert.equal(path.basename(dumps[0]), 'db.sql', 'the dump is named after the service');
  const dataCopy = files.find((f) => path.basename(f) === 'rows-written.txt');
  assert.ok(dataCopy, `the data folder's rows-written.txt is in the export: ${JSON.stringify(files)}`);
  assert.equal(fs.readFileSync(dataCopy, 'utf8'), 'first 7\n');

  const pg = await freshPostgres();
  try {
    let r = pg.psql('postgres', ['-c', 'CREATE DATABASE restored']);
    assert.equal(r.status, 0, r.stderr);
    r = pg.psql('restored', ['-q', '-f', dumps[0]]);
    assert.equal(r.status, 0, `loading ${dumps[0]}: ${r.stderr}`);
    r = pg.psql('restored', ['-tA', '-c', "SELECT count(*), count(*) FILTER (WHERE body LIKE 'first-%') FROM notes"]);
    assert.equal(r.stdout.trim(), '7|7', `rows in the restored database: ${r.stdout}${r.stderr}`);
  } finally {
    pg.stop();
  }
});

pgTest('unpublish keeps the data for a republish of the same name; unpublish {delete_data: true} removes it', async () => {
  let pub = await publishApp(k, { name: 'notes', share: 'public' });
  await waitForState(k, 'notes');
  const before = await rows(pub.base, 'POST', '?n=3&tag=kept');
  assert.ok(before >= 3, `rows before unpublish: ${before}`);
  const dataDir = (await k.ok('app_status', { artifact: 'notes' })).data_dir;
  assert.ok(dataDir && fs.existsSync(path.join(dataDir, 'rows-written.txt')), `the data folder ${dataDir} holds the app's file`);

  await k.ok('unpublish', { artifact: 'notes' });
  const gone = await request(pub.base, '/a/notes/rows');
  assert.equal(gone.status, 404, `an unpublished app still answers: ${gone.status} ${gone.text.slice(0, 200)}`);
  assert.ok(fs.existsSync(path.join(dataDir, 'rows-written.txt')), 'unpublish without delete_data removed the data folder');

  pub = await publishApp(k, { name: 'notes', share: 'public' });
  await waitForState(k, 'notes');
  assert.equal(await rows(pub.base), before, 'the republished app lost its rows');
  assert.ok(fs.readFileSync(path.join(dataDir, 'rows-written.txt'), 'utf8').includes('kept 3'), 'the data folder came back');

  await k.ok('unpublish', { artifact: 'notes', delete_data: true });
  assert.ok(!fs.existsSync(path.join(dataDir, 'rows-written.txt')), `unpublish {delete_data: true} left ${dataDir}`);
  pub = await publishApp(k, { name: 'notes', share: 'public' });
  await waitForState(k, 'notes');
  assert.equal(await rows(pub.base), 0, 'rows survived unpublish {delete_data: true}');
  const st = await k.ok('app_status', { artifact: 'notes' });
  assert.ok(!fs.existsSync(path.join(st.data_dir, 'rows-written.txt')), 'the data folder survived unpublish {delete_data: true}');
});
