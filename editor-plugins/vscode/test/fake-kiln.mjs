#!/usr/bin/env node
// A scripted stand-in for `kiln mcp` (NDJSON MCP over stdio) for the client tests: it records every
// message it receives in $FAKE_KILN_LOG (one JSON per line) and behaves as $FAKE_KILN_MODE says:
//   normal   answers initialize, asks roots/list, and serves the tools below
//   crash    like normal, but exits with code 3 half a second after initialized
//   silent   never answers initialize
// Tools: echo (structuredContent = arguments), fail (isError), slow (progress every 50 ms until
// cancelled; never answers a cancelled call), log (sends notifications/message), die (exits 4),
// verify (one failing test whose message has several lines, CRLF included) and workspace_info
// (the root is the fake's cwd).
import fs from 'node:fs';

const logFile = process.env.FAKE_KILN_LOG;
const mode = process.env.FAKE_KILN_MODE ?? 'normal';
const record = (m) => logFile && fs.appendFileSync(logFile, JSON.stringify(m) + '\n');

if (process.argv.includes('--version')) {
  console.log('kiln 9.9.9');
  process.exit(0);
}
record({ argv: process.argv.slice(2), cwd: process.cwd() });
const send = (m) => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', ...m }) + '\n');
process.stderr.write('kiln 2026-01-01T00:00:00.000 info: fake kiln starting\n');
process.stderr.write('kiln 2026-01-01T00:00:00.000 error: fake kiln error line\n');

const slow = new Map();
let buf = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  buf += chunk;
  let nl;
  while ((nl = buf.indexOf('\n')) >= 0) {
    const line = buf.slice(0, nl);
    buf = buf.slice(nl + 1);
    if (line.trim()) handle(JSON.parse(line));
  }
});
process.stdin.on('end', () => process.exit(0));

function handle(m) {
  record(m);
  if (m.method === 'initialize') {
    if (mode === 'silent') return;
    send({ id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {}, logging: {} }, serverInfo: { name: 'fake-kiln', version: '9.9.9' } } });
  } else if (m.method === 'notifications/initialized') {
    send({ id: 'roots-1', method: 'roots/list', params: {} });
    if (mode === 'crash') setTimeout(() => process.exit(3), 500);
  } else if (m.method === 'notifications/roots/list_changed') {
    send({ id: `roots-${Date.now()}`, method: 'roots/list', params: {} });
  } else if (m.method === 'notifications/cancelled') {
    const t = slow.get(m.params.requestId);
    if (t) clearInterval(t);
    slow.delete(m.params.requestId);
  } else if (m.method === 'logging/setLevel') {
    send({ id: m.id, result: {} });
  } else if (m.method === 'tools/call') {
    const { name, arguments: args, _meta } = m.params;
    if (name === 'echo') send({ id: m.id, result: { content: [{ type: 'text', text: JSON.stringify(args) }], structuredContent: args } });
    else if (name === 'verify') {
      const failure = { name: 'kebabCase', file: 'test/case.test.js', line: 10,
        message: "Expected values to be strictly equal:\r\n+ actual - expected\n\n+ 'a'\n- 'b'   \n    ^\n" };
      const result = { status: 'fail', trace_id: 'tr_fake', summary: 'verify fail: 0 of 1 checks passed',
        checks: [{ name: 'test', status: 'fail', trace_id: 'tr_fake1', tests: { passed: 0, failed: 1, failures: [failure] } }] };
      send({ id: m.id, result: { content: [{ type: 'text', text: JSON.stringify(result) }], structuredContent: result } });
    } else if (name === 'workspace_info') {
      const info = { id: 'ws_fake', name: 'fake', root: process.cwd() };
      send({ id: m.id, result: { content: [{ type: 'text', text: JSON.stringify(info) }], structuredContent: info } });
    } else if (name === 'fail') send({ id: m.id, result: { content: [{ type: 'text', text: 'no workspace is open: call workspace_open' }], isError: true } });
    else if (name === 'log') {
      send({ method: 'notifications/message', params: { level: 'info', data: 'hello from the server log' } });
      send({ method: 'notifications/message', params: { level: 'error', data: 'an error also written to stderr' } });
      send({ id: m.id, result: { content: [{ type: 'text', text: '{}' }], structuredContent: {} } });
    } else if (name === 'slow') {
      let n = 0;
      slow.set(m.id, setInterval(() => {
        n++;
        send({ method: 'notifications/progress', params: { progressToken: _meta?.progressToken, progress: n, message: `tick ${n}\n` } });
      }, 50));
    } else if (name === 'die') process.exit(4);
    else send({ id: m.id, error: { code: -32602, message: `unknown tool ${name}` } });
  } else if (m.id !== undefined && m.method) {
    send({ id: m.id, error: { code: -32601, message: `method not found: ${m.method}` } });
  }
}
