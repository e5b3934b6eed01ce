// Services inside the sandbox (issue 16) attacked the way SANDBOX_CASES.md attacks any sandbox: a
// service's data folder lives in Kiln's state directory, not in the workspace, and postgres/redis
// run with no authentication on loopback, so both must stay inside the sandbox and its limits.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { test } from 'node:test';

import { httpClient, startServe } from '../lib/mcp_http.mjs';
import { callTool, errorText, exec, ok, rand, startKiln, tempDir, waitFor } from './lib.mjs';

const installed = (check) => spawnSync('sh', ['-c', check]).status === 0;
const havePostgres = installed('ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1');
const haveRedis = installed('command -v redis-server >/dev/null 2>&1');
const needs = (what, have) => (have ? false : `${what} is not installed (Debian package ${what === 'postgres' ? 'postgresql' : 'redis-server'})`);

function workspaceWith(config) {
  const ws = path.join(tempDir('kiln-sec-ws-'), 'ws');
  fs.mkdirSync(ws, { recursive: true });
  fs.writeFileSync(path.join(ws, 'kiln.json'), JSON.stringify(config));
  return ws;
}

// A state directory on another filesystem than the workspace: /dev/shm (tmpfs) against /tmp.
function stateElsewhere(ws) {
  if (!fs.existsSync('/dev/shm')) return { why: 'no /dev/shm for a state directory on another filesystem' };
  const dir = fs.mkdtempSync('/dev/shm/kiln-sec-state-');
  if (fs.statSync(dir).dev === fs.statSync(ws).dev) {
    fs.rmSync(dir, { recursive: true, force: true });
    return { why: '/dev/shm and the workspace share one filesystem here' };
  }
  return { dir };
}

test('case 20/36: a run that fills a service\'s data folder (in the state directory, on another filesystem) is stopped by limits.disk_mb',
  { skip: needs('postgres', havePostgres) }, async (t) => {
    const ws = workspaceWith({ services: { db: { kind: 'postgres' } } });
    const state = stateElsewhere(ws);
    if (state.why) return t.skip(state.why);
    const k = await startKiln({ workspace: ws, home: state.dir });
    try {
      const sb = ok(await callTool(k, 'sandbox_create', { services: ['db'], limits: { disk_mb: 64 } }), 'sandbox_create');
      // 3 GB asked, 64 MiB allowed: what the workspace's filesystem is spared, the state dir's must be too.
      const r = await exec(k, 'dd if=/dev/zero of=/var/lib/kiln/services/db/fill bs=1M count=3000 2>&1; echo dd=$?',
        { sandbox_id: sb.sandbox_id, timeout_s: 300 }, { timeout: 320000 });
      const fill = path.join(state.dir, 'services', k.wsId, 'db', 'dev', 'fill');
      const size = fs.existsSync(fill) ? fs.statSync(fill).size : 0;
      assert.equal(r.stop_reason, 'disk_limit', `stop_reason ${r.stop_reason}; the state directory got ${size} bytes: ${r.out.slice(-300)}`);
      assert.ok(r.limits_hit?.includes('disk_mb'), `limits_hit ${JSON.stringify(r.limits_hit)}`);
      assert.ok(size < 3000 * 2 ** 20, `dd wrote all ${size} bytes into the state directory`);
    } finally {
      await k.close();
      fs.rmSync(state.dir, { recursive: true, force: true });
    }
  });

// --allow-unsandboxed lets kiln.json run checks without a sandbox; a service there would be an
// unauthenticated redis/postgres of the server's user on the host's own loopback, open to every
// local user (redis CONFIG SET dir + SAVE writes any file the server's user can).
test('services never run outside a sandbox: verify with isolation none and a service is refused, nothing listens on the host',
  { skip: needs('redis', haveRedis) }, async () => {
    const port = 20000 + Math.floor(Math.random() * 20000);
    const ws = workspaceWith({
      sandbox: { isolation: 'none' },
      services: { cache: { kind: 'redis', port } },
      verify: [{ name: 'probe', services: ['cache'], run: 'sleep 5' }],
    });
    const k = await startKiln({ workspace: ws, args: ['--allow-unsandboxed'] });
    try {
      const pending = callTool(k, 'verify', {}, { timeout: 120000 });
      let reached = false;
      for (let i = 0; i < 30 && !reached; i++) {
        reached = await new Promise((resolve) => {
          const s = net.connect({ host: '127.0.0.1', port }, () => { s.destroy(); resolve(true); });
          s.on('error', () => resolve(false));
        });
        if (!reached) await new Promise((r) => setTimeout(r, 200));
      }
      const r = await pending;
      assert.equal(reached, false, `a host-side client reached the verify's redis on 127.0.0.1:${port}`);
      const out = r.structuredContent ?? {};
      assert.notEqual(out.status, 'pass', `verify passed with its service run unsandboxed: ${JSON.stringify(out).slice(0, 800)}`);
      assert.match(JSON.stringify(out) + errorText(r), /strict sandbox/, 'the error says services need a strict sandbox');
    } finally {
      await k.close();
    }
  });

// Case 33 for services: two principals of one `kiln serve` share a workspace (workspaces are the
// server's, not a principal's), but not each other's sandboxes.
test('case 33: another principal cannot list or restart a sandbox\'s services, and a refused sandbox_create does not name it',
  { skip: needs('postgres', havePostgres), timeout: 240000 }, async () => {
    const dir = tempDir('kiln-sec-tokens-');
    const alice = `alice-${rand()}${rand()}${rand()}`, bob = `bob-${rand()}${rand()}${rand()}`;
    fs.writeFileSync(path.join(dir, 'tokens'), `${alice}\n${bob}\n`, { mode: 0o600 });
    const ws = workspaceWith({ services: { db: { kind: 'postgres' } } });
    const s = await startServe({ args: ['--token-file', path.join(dir, 'tokens')] });
    const a = await httpClient(s.url, { headers: { authorization: `Bearer ${alice}` }, name: 'alice' });
    const b = await httpClient(s.url, { headers: { authorization: `Bearer ${bob}` }, name: 'bob' });
    try {
      const call = (c, name, args) => c.client.callTool({ name, arguments: args }, undefined, { timeout: 180000 });
      for (const c of [a, b]) ok(await call(c, 'workspace_open', { path: ws }), 'workspace_open');
      const sb = ok(await call(a, 'sandbox_create', { services: ['db'] }), 'alice sandbox_create').sandbox_id;
      const ghost = sb.replace(/[0-9a-f]/g, (c) => (c === '0' ? '1' : '0'));
      for (const [tool, args] of [['service_list', { sandbox_id: sb }], ['service_restart', { sandbox_id: sb, name: 'db' }]]) {
        const theirs = await call(b, tool, args);
        const missing = await call(b, tool, { ...args, sandbox_id: ghost });
        assert.ok(theirs.isError, `${tool} with alice's sandbox worked for bob: ${JSON.stringify(theirs).slice(0, 300)}`);
        assert.equal(errorText(theirs).split(sb).join('ID'), errorText(missing).split(ghost).join('ID'), `${tool}: the refusal tells the ids apart`);
      }
      const refused = await call(b, 'sandbox_create', { services: ['db'] });
      assert.ok(refused.isError, 'bob got a second postmaster on alice\'s running cluster');
      assert.ok(!errorText(refused).includes(sb), `bob's refusal names alice's sandbox: ${errorText(refused)}`);
      const listed = ok(await call(a, 'service_list', { sandbox_id: sb }), 'alice service_list');
      assert.equal(listed.services[0].state, 'ready', 'bob\'s calls touched alice\'s database');
      assert.equal(listed.services[0].restarts, 0);
    } finally {
      await a.close().catch(() => {});
      await b.close().catch(() => {});
      await s.stop().catch(() => {});
    }
  });

// A verify waits (up to ready_timeout_s, at most an hour) while another verify of the workspace
// uses the template cluster; a cancelled verify must stop waiting, not hold its call and trace.
test('a verify waiting for another verify\'s template ends when it is cancelled', { skip: needs('postgres', havePostgres) }, async () => {
  const ws = workspaceWith({
    services: { db: { kind: 'postgres', ready_timeout_s: 3600 } },
    // Holds the template until the test lets it go (a `release` file), at most a minute.
    verify: [{ name: 'hold', services: ['db'], run: 'touch holding; i=0; while [ ! -e release ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done' }],
  });
  const k = await startKiln({ workspace: ws });
  try {
    let firstDone = false;
    const first = callTool(k, 'verify', {}, { timeout: 180000 }).finally(() => { firstDone = true; });
    const verifies = async () => ok(await callTool(k, 'trace_list', { kind: 'verify' }), 'trace_list').traces;
    const running = (list) => list.filter((t) => t.status === 'running');
    // The first verify holds the template once its check runs.
    assert.ok(await waitFor(() => fs.existsSync(path.join(ws, 'holding')), 60000), 'the first verify\'s check never ran');
    const ac = new AbortController();
    const second = callTool(k, 'verify', {}, { timeout: 180000, signal: ac.signal }).catch((e) => e);
    assert.ok(await waitFor(async () => running(await verifies()).length === 2, 20000), 'the second verify did not start');
    ac.abort();
    await second;
    const ended = await waitFor(async () => running(await verifies()).length === 1, 20000);
    assert.ok(ended, `the cancelled verify still waits for the template: ${JSON.stringify(running(await verifies()))}`);
    assert.equal(firstDone, false, 'control: the first verify, which holds the template, still runs');
    fs.writeFileSync(path.join(ws, 'release'), '');
    await first;
  } finally {
    await k.close();
  }
});

// The services' own trust: postgres runs with trust authentication and redis with no password,
// because only the sandbox's own loopback can reach them. network "host" would put them on the
// host's loopback, where any local user is a superuser (COPY ... TO PROGRAM runs code inside).
const reachable = async (port) => {
  for (let i = 0; i < 50; i++) {
    const hit = await new Promise((resolve) => {
      const s = net.connect({ host: '127.0.0.1', port }, () => { s.destroy(); resolve(true); });
      s.on('error', () => resolve(false));
    });
    if (hit) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
};

test('case 15 for services: network "host" never puts a service on the host\'s loopback (sandbox_create and verify)', async () => {
  const port = 20000 + Math.floor(Math.random() * 20000);
  const ws = workspaceWith({
    services: { api: { run: `exec python3 -m http.server ${port} --bind 127.0.0.1`, port } },
    verify: [{ name: 'probe', services: ['api'], run: 'sleep 3' }],
  });
  const k = await startKiln({ workspace: ws });
  try {
    const made = await callTool(k, 'sandbox_create', { services: ['api'], network: 'host' });
    assert.equal(await reachable(port), false, `sandbox_create's service listens on the host's 127.0.0.1:${port}`);
    if (!made.isError) await callTool(k, 'sandbox_destroy', { sandbox_id: made.structuredContent.sandbox_id });
    fs.writeFileSync(path.join(ws, 'kiln.json'), JSON.stringify({
      sandbox: { network: 'host' },
      services: { api: { run: `exec python3 -m http.server ${port} --bind 127.0.0.1`, port } },
      verify: [{ name: 'probe', services: ['api'], run: 'sleep 3' }],
    }));
    const pending = callTool(k, 'verify', {}, { timeout: 120000 });
    const hit = await reachable(port);
    await pending;
    assert.equal(hit, false, `verify's service listens on the host's 127.0.0.1:${port}`);
  } finally {
    await k.close();
  }
});
