// The MCP Inspector's CLI (@modelcontextprotocol/inspector --cli, run with this folder's Node 22)
// against Kiln, as a person checking a server would: over stdio (`kiln mcp`) and over Streamable
// HTTP (`kiln serve --mcp`, with the state directory's own bearer token or a --token-file's, always
// sent with --header) it lists the tools and calls them.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { kilnBin, tempDir } from '../lib/kiln.mjs';
import { inspectorCli, node22, startKiln } from './run.mjs';

const missing = [node22, inspectorCli].find((p) => !fs.existsSync(p));
const why = missing && `${missing} is not installed: run scripts/npm-deps.sh tests/conformance (make test does)`;

// One Inspector CLI run; resolves the parsed JSON it prints (it prints one document on success).
function inspector(args, { home }) {
  return new Promise((resolve, reject) => {
    // The Inspector keeps its own settings under $HOME: give it a private one.
    execFile(node22, [inspectorCli, '--cli', ...args], { env: { ...process.env, HOME: home }, timeout: 60000, maxBuffer: 32 << 20 },
      (err, stdout, stderr) => {
        if (err) return reject(new Error(`inspector ${args.join(' ')} failed (${err.code ?? err.signal}):\n${stdout}\n${stderr}`));
        try {
          resolve(JSON.parse(stdout));
        } catch {
          reject(new Error(`inspector printed no JSON:\n${stdout}\n${stderr}`));
        }
      });
  });
}

describe('MCP Inspector CLI', { skip: why ? `not run: ${why}` : false }, () => {
  let home;
  let ws;
  let state;
  let serve;

  before(async () => {
    home = tempDir('kiln-inspector-home-');
    state = tempDir('kiln-inspector-state-');
    ws = tempDir('kiln-inspector-ws-');
    fs.writeFileSync(path.join(ws, 'notes.txt'), 'inspected\n');
  });

  after(async () => { await serve?.stop(); });

  // The Inspector starts stdio servers with a minimal environment: pass the state dir with -e.
  const stdio = (args) => inspector(['-e', `KILN_HOME=${state}`, kilnBin(), 'mcp', '--workspace', ws, ...args], { home });

  test('over stdio: tools/list shows Kiln\'s tools with schemas', async () => {
    const r = await stdio(['--method', 'tools/list']);
    const names = r.tools.map((t) => t.name);
    for (const n of ['workspace_open', 'workspace_list', 'file_read', 'file_list', 'sandbox_exec', 'verify']) {
      assert.ok(names.includes(n), `${n} listed`);
    }
    for (const t of r.tools) assert.equal(t.inputSchema.type, 'object', t.name);
  });

  test('over stdio: tools/call runs a tool in the workspace', async () => {
    const r = await stdio(['--method', 'tools/call', '--tool-name', 'file_list']);
    assert.equal(r.isError, false);
    assert.deepEqual(r.structuredContent.entries.map((e) => e.path), ['notes.txt']);
    const read = await stdio(['--method', 'tools/call', '--tool-name', 'file_read', '--tool-arg', 'path=notes.txt']);
    assert.match(JSON.stringify(read.structuredContent), /inspected/);
  });

  test('over HTTP: the same state through kiln serve --mcp, tools listed and called', async () => {
    // The state dir the stdio runs used: the workspace they opened is known here too.
    serve = await startKilnWithState(state);
    const auth = ['--header', `Authorization: Bearer ${serve.token}`];
    const r = await inspector([serve.url, '--transport', 'http', ...auth, '--method', 'tools/list'], { home });
    assert.ok(r.tools.some((t) => t.name === 'workspace_list'));
    const listed = await inspector([serve.url, '--transport', 'http', ...auth, '--method', 'tools/call', '--tool-name', 'workspace_list'], { home });
    assert.equal(listed.isError, false);
    const known = listed.structuredContent.workspaces.find((w) => w.root === ws);
    assert.ok(known, `workspace_list over HTTP shows the workspace opened over stdio: ${JSON.stringify(listed.structuredContent)}`);
    const files = await inspector([serve.url, '--transport', 'http', ...auth, '--method', 'tools/call', '--tool-name', 'file_list',
      '--tool-arg', `workspace=${known.id}`], { home });
    assert.deepEqual(files.structuredContent.entries.map((e) => e.path), ['notes.txt']);
  });

  test('over HTTP: without the token it is refused, on loopback too', async () => {
    await assert.rejects(inspector([serve.url, '--transport', 'http', '--method', 'tools/list'], { home }), /401|Unauthorized|auth_required/);
  });

  test('over HTTP with a --token-file token: refused without it, served with --header', async () => {
    const dir = tempDir('kiln-inspector-token-');
    const token = 'inspector-token-0123456789abcdef0123456789';
    fs.writeFileSync(path.join(dir, 'tokens'), `${token}\n`, { mode: 0o600 });
    const guarded = await startKiln(kilnBin(), ['--token-file', path.join(dir, 'tokens')]);
    try {
      await assert.rejects(inspector([guarded.url, '--transport', 'http', '--method', 'tools/list'], { home }), /401|Unauthorized|auth_required/);
      const r = await inspector([guarded.url, '--transport', 'http', '--header', `Authorization: Bearer ${token}`,
        '--method', 'tools/call', '--tool-name', 'workspace_list'], { home });
      assert.equal(r.isError, false);
    } finally {
      await guarded.stop();
    }
  });
});

function startKilnWithState(state) {
  return startKiln(kilnBin(), [], state);
}
