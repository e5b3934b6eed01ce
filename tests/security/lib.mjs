// Shared helpers of the security suite (shared/SANDBOX_CASES.md): a `kiln mcp` server with a fake
// HOME full of planted secrets and bait in its environment, thin wrappers over the sandbox tools
// that fail loudly when a tool or a result field is missing, host-side probes (pgrep, listeners,
// cgroup folders) and the C probes compiled at test time.
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { TapTransport, errorText, kilnBin, kilnEnv, sleep, tempDir } from '../lib/kiln.mjs';

export { errorText, kilnBin, kilnEnv, sleep, tempDir };
export const here = path.dirname(fileURLToPath(import.meta.url));
export const isRoot = process.getuid() === 0;
export const whoami = os.userInfo().username;
export const rand = () => crypto.randomBytes(6).toString('hex');
// A number unique to this run, used as a `sleep` argument so host-side pgrep finds exactly the
// processes one test started (e.g. `sleep 7123456`).
export const marker = () => String(7000000 + crypto.randomInt(0, 999999)) ;

// --- planted secrets -------------------------------------------------------------------------

// A fake HOME for the server process with the secrets an attacker goes for. Every file carries a
// unique marker, so a leak is found by searching any output for `secretMarker`.
export function makeFakeHome() {
  const home = path.join(tempDir('kiln-sec-home-'), 'home');
  const mark = `KILNSEC-${rand()}`;
  const files = {
    '.ssh/id_rsa': `-----BEGIN OPENSSH PRIVATE KEY-----\n${mark}-ssh\n-----END OPENSSH PRIVATE KEY-----\n`,
    '.ssh/config': `Host *\n  IdentityFile ~/.ssh/id_rsa # ${mark}-sshconfig\n`,
    '.aws/credentials': `[default]\naws_access_key_id = AKIA${mark}\naws_secret_access_key = ${mark}-aws\n`,
    '.config/gh/hosts.yml': `github.com:\n  oauth_token: ghp_${mark}\n  user: kilnsec\n`,
    '.kube/config': `apiVersion: v1\nusers:\n- name: admin\n  user:\n    token: ${mark}-kube\n`,
    '.netrc': `machine example.com login kilnsec password ${mark}-netrc\n`,
    '.docker/config.json': JSON.stringify({ auths: { 'registry.example.com': { auth: `${mark}-docker` } } }),
    '.npmrc': `//registry.npmjs.org/:_authToken=${mark}-npm\n`,
    '.bash_history': `export GITHUB_TOKEN=${mark}-history\n`,
  };
  for (const [rel, body] of Object.entries(files)) {
    const p = path.join(home, rel);
    fs.mkdirSync(path.dirname(p), { recursive: true, mode: 0o700 });
    fs.writeFileSync(p, body, { mode: 0o600 });
  }
  return { home, mark, files: Object.keys(files).map((r) => path.join(home, r)) };
}

// Bait in the server's environment (case 28): none of it may reach a sandbox.
export function hostBaitEnv() {
  const v = `KILNSEC-ENV-${rand()}`;
  return {
    value: v,
    env: {
      KILN_SECTEST_HOST_VAR: v,
      AWS_SECRET_ACCESS_KEY: `${v}-aws`,
      GITHUB_TOKEN: `${v}-gh`,
      NPM_TOKEN: `${v}-npm`,
      SSH_AUTH_SOCK: `/tmp/${v}-agent.sock`,
    },
  };
}

// --- the server ------------------------------------------------------------------------------

const SANDBOX_TOOLS = ['sandbox_create', 'sandbox_exec', 'process_output', 'process_input', 'process_kill',
  'sandbox_list', 'sandbox_destroy'];

// Starts `kiln mcp` (optionally under `wrapper` argv, e.g. the nofeature probe) with a fresh state
// dir, a fake HOME with planted secrets and host bait in its environment, and opens `workspace`
// (a fresh temp folder unless given).
export async function startKiln({ args = [], env = {}, wrapper = [], workspace, open = true, home } = {}) {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
  const bin = kilnBin();
  const kilnHome = home ?? tempDir('kiln-sec-state-');
  const fake = makeFakeHome();
  const bait = hostBaitEnv();
  const fullEnv = kilnEnv(kilnHome, { ...bait.env, HOME: fake.home, ...env });
  const command = wrapper.length ? wrapper[0] : bin;
  const argv = wrapper.length ? [...wrapper.slice(1), bin, 'mcp', ...args] : ['mcp', ...args];
  const inner = new StdioClientTransport({ command, args: argv, env: fullEnv, stderr: 'pipe' });
  let stderr = '';
  inner.stderr?.on('data', (c) => { stderr += c.toString(); });
  const transport = new TapTransport(inner);
  const transportErrors = [];
  const client = new Client({ name: 'kiln-security', version: '0.0.0' }, { capabilities: {} });
  client.onerror = (e) => transportErrors.push(e);
  await client.connect(transport);
  const tools = new Set((await client.listTools()).tools.map((t) => t.name));
  const k = {
    client, transport, kilnHome, fake, bait, tools, transportErrors, bin,
    get stderr() { return stderr; },
    get pid() { return transport.pid; },
    wire: transport.received,
    ws: null,
    wsId: null,
    async close() {
      try { await client.close(); } catch { /* already gone */ }
    },
    call: (name, a, opts) => callTool(k, name, a, opts),
  };
  if (open) {
    k.ws = workspace ?? path.join(tempDir('kiln-sec-ws-'), 'ws');
    fs.mkdirSync(k.ws, { recursive: true });
    const r = await client.callTool({ name: 'workspace_open', arguments: { path: k.ws } });
    assert.ok(!r.isError, `workspace_open ${k.ws}: ${errorText(r)}`);
    k.wsId = r.structuredContent?.id;
  }
  return k;
}

// Calls a tool; a tool missing from tools/list is a clear failure (the parent side must have it).
export async function callTool(k, name, args = {}, { timeout = 120000, signal } = {}) {
  if (!k.tools.has(name)) {
    assert.fail(`Kiln does not expose the tool ${name} (tools/list: ${[...k.tools].join(', ')})`);
  }
  return k.client.callTool({ name, arguments: args }, undefined, { timeout, signal, resetTimeoutOnProgress: true });
}

export function requireSandboxTools(k) {
  const missing = SANDBOX_TOOLS.filter((t) => !k.tools.has(t));
  assert.deepEqual(missing, [], `Kiln does not expose the sandbox tools ${missing.join(', ')}`);
}

// structuredContent of a successful call, or a failure quoting the tool error.
export function ok(r, what) {
  assert.ok(!r.isError, `${what}: tool error: ${errorText(r)}`);
  assert.ok(r.structuredContent && typeof r.structuredContent === 'object', `${what}: no structuredContent`);
  return r.structuredContent;
}

function needFields(obj, fields, what) {
  for (const f of fields) {
    assert.ok(f in obj, `${what}: result has no field "${f}" (TOOLS.md contract); got keys ${Object.keys(obj).join(', ')}`);
  }
}

// Runs `command` (a /bin/sh -c string or an argv array) through sandbox_exec and returns the
// structured result with `out` = stdout + stderr. Extra arguments go through unchanged.
export async function exec(k, command, extra = {}, opts = {}) {
  const r = await callTool(k, 'sandbox_exec', { command, ...extra }, opts);
  const s = { ...ok(r, `sandbox_exec ${JSON.stringify(command).slice(0, 200)}`) };
  if (!extra.background) {
    needFields(s, ['run_id', 'exit_code', 'signal', 'stop_reason', 'duration_ms', 'stdout', 'stderr'], 'sandbox_exec');
    s.out = `${s.stdout}${s.stderr}`;
  } else {
    needFields(s, ['run_id', 'pid'], 'sandbox_exec background');
  }
  s.raw = r;
  return s;
}

// The whole text of a result (every content block and the structured JSON), for leak searches.
export function resultText(r) {
  return JSON.stringify(r.raw ?? r);
}

export async function createSandbox(k, args = {}) {
  const s = ok(await callTool(k, 'sandbox_create', args), `sandbox_create ${JSON.stringify(args)}`);
  needFields(s, ['sandbox_id', 'isolation'], 'sandbox_create');
  return s;
}

export async function destroySandbox(k, id) {
  const s = ok(await callTool(k, 'sandbox_destroy', { sandbox_id: id }), `sandbox_destroy ${id}`);
  needFields(s, ['cleanup'], 'sandbox_destroy');
  return s.cleanup;
}

// Creates a session sandbox, runs fn(id), destroys it (also on failure) and returns fn's value.
export async function withSandbox(k, args, fn) {
  const sb = await createSandbox(k, args);
  try {
    return await fn(sb.sandbox_id, sb);
  } finally {
    await callTool(k, 'sandbox_destroy', { sandbox_id: sb.sandbox_id }).catch(() => {});
  }
}

// Reads a background run's whole output (both streams) until it ends or `ms` pass.
export async function readAll(k, runId, { stream = 'both', ms = 30000 } = {}) {
  let data = '';
  let offset = 0;
  const deadline = Date.now() + ms;
  for (;;) {
    const p = ok(await callTool(k, 'process_output', { run_id: runId, stream, offset, wait_ms: 1000 }), 'process_output');
    data += p.data;
    offset = p.next_offset;
    if ((p.eof && !p.running) || Date.now() > deadline) return { data, last: p };
  }
}

// --- host-side checks --------------------------------------------------------------------------

export function pgrep(pattern) {
  const r = spawnSync('pgrep', ['-f', pattern], { encoding: 'utf8' });
  return r.stdout.split(/\s+/).filter(Boolean).map(Number).filter((p) => p !== process.pid);
}

// Polls until `pred()` is true or `ms` pass; returns the last value of pred (no timing assertion:
// the wait only bounds how long a failure takes to show).
export async function waitFor(pred, ms = 10000, step = 100) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await pred();
    if (v || Date.now() > deadline) return v;
    await sleep(step);
  }
}

export const waitGone = (pattern, ms = 10000) => waitFor(() => pgrep(pattern).length === 0, ms);

export function alive(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\S+ \(.*\) [ZX]/s.test(stat);
  } catch {
    return false;
  }
}

export function vmRssKb(pid) {
  try {
    const m = /VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

// A process on the host whose command line carries `tag` (argv[0]), for cases 9, 10 and 26.
export function hostSleeper(tag) {
  const p = spawn('sleep', ['600'], { argv0: tag, stdio: 'ignore', detached: false });
  return p;
}

// Cgroup folders of one sandbox (or all of kiln's with no id) on this host: cgroup v1 per
// controller and v2, wherever the server's own group is (kiln puts them under <group>/kiln/).
export function kilnCgroupDirs(id = '') {
  const found = [];
  const walk = (dir, depth) => {
    if (depth > 6) return;
    let entries;
    try { entries = fs.readdirSync(dir, { withFileTypes: true }); } catch { return; }
    for (const e of entries) {
      if (!e.isDirectory()) continue;
      const p = path.join(dir, e.name);
      if (e.name === 'kiln' || p.includes('/kiln/')) {
        if (!id || p.includes(id)) found.push(p);
      }
      walk(p, depth + 1);
    }
  };
  walk('/sys/fs/cgroup', 0);
  return found;
}

export function mountLines(filter) {
  return fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter((l) => l && filter(l));
}

// --- probes ----------------------------------------------------------------------------------

// Compiles tests/security/probes/NAME.c into `dir` (a workspace) with the host's cc.
export function compileProbe(dir, name = 'probe') {
  const out = path.join(dir, name);
  execFileSync('cc', ['-O1', '-o', out, path.join(here, 'probes', `${name}.c`)], { stdio: 'pipe' });
  return out;
}

// "name rc errno" lines -> {name: {rc, errno}}.
export function parseProbe(text) {
  const rows = {};
  for (const line of text.split('\n')) {
    const m = /^(\w+) (-?\d+) (\d+)$/.exec(line.trim());
    if (m) rows[m[1]] = { rc: Number(m[2]), errno: Number(m[3]) };
  }
  return rows;
}

// Runs `kiln run ...` synchronously with a fake HOME and a private state dir.
export function kilnRun(args, { cwd, env = {}, timeout = 120000, input } = {}) {
  const home = tempDir('kiln-sec-run-state-');
  const r = spawnSync(kilnBin(), ['run', ...args], {
    cwd, env: kilnEnv(home, env), encoding: 'utf8', timeout, input, maxBuffer: 64 << 20,
  });
  return { code: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr, error: r.error };
}
