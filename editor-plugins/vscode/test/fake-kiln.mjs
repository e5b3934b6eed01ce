#!/usr/bin/env node
// A scripted stand-in for `kiln mcp` (NDJSON MCP over stdio) for the client tests: it records every
// message it receives in $FAKE_KILN_LOG (one JSON per line) and behaves as $FAKE_KILN_MODE says:
//   normal   answers initialize, asks roots/list, and serves the tools below
//   crash    like normal, but exits with code 3 half a second after initialized
//   silent   never answers initialize
// Tools: echo (structuredContent = arguments), fail (isError), slow (progress every 50 ms until
// cancelled; never answers a cancelled call), log (sends notifications/message), die (exits 4),
// verify (one failing test whose message has several lines, CRLF included) and workspace_info
// (the root is the fake's cwd; it declares the services of $FAKE_KILN_SERVICES), and the services
// tools: sandbox_list, service_list, service_restart, sandbox_create and trace_output. With
// $FAKE_KILN_SERVICES = running (the default) sandbox sb_fake runs db (ready) and api (failed);
// declared: no sandbox yet, kiln.json declares db, sandbox_create {services: true} starts it;
// none: no sandbox and nothing declared.
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
const servicesMode = process.env.FAKE_KILN_SERVICES ?? 'running';
const db = () => ({ name: 'db', kind: 'postgres', state: 'ready', url: 'postgres://kiln@127.0.0.1:5432/kiln', port: 5432, pid: 12, restarts: 0, trace_id: 'tr_svcdb', database: 'kiln' });
const sandboxes = new Map(servicesMode === 'running'
  ? [['sb_fake', [db(), { name: 'api', kind: 'command', state: 'failed', url: 'http://127.0.0.1:3000', port: 3000, pid: null, restarts: 0, trace_id: 'tr_svcapi', error: 'exited with code 7: listening failed' }]]]
  : []);
const result = (id, value) => send({ id, result: { content: [{ type: 'text', text: JSON.stringify(value) }], structuredContent: value } });
const toolError = (id, text) => send({ id, result: { content: [{ type: 'text', text }], isError: true } });

function servicesTool(id, name, args) {
  if (name === 'sandbox_list') return result(id, { sandboxes: [...sandboxes.keys()].map((sandbox_id) => ({ sandbox_id, workspace: 'ws_fake' })) });
  if (name === 'sandbox_create') {
    if (args.services !== true) return toolError(id, 'the fake only starts all services');
    sandboxes.set('sb_new', [db()]);
    return result(id, { sandbox_id: 'sb_new', services: sandboxes.get('sb_new') });
  }
  const list = sandboxes.get(args.sandbox_id);
  if (!list) return toolError(id, `no live sandbox '${args.sandbox_id}': call sandbox_list to see the live ones`);
  if (name === 'service_list') return result(id, { sandbox_id: args.sandbox_id, services: list });
  const s = list.find((x) => x.name === args.name);
  if (!s) return toolError(id, `no service '${args.name}' in ${args.sandbox_id}`);
  s.restarts += 1;
  s.pid = 100 + s.restarts;
  s.state = 'ready';
  delete s.error;
  return result(id, { sandbox_id: args.sandbox_id, service: s });
}

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
      const info = { id: 'ws_fake', name: 'fake', root: process.cwd(), services: servicesMode === 'none' ? [] : [{ name: 'db', kind: 'postgres', port: 5432 }] };
      send({ id: m.id, result: { content: [{ type: 'text', text: JSON.stringify(info) }], structuredContent: info } });
    } else if (['sandbox_list', 'sandbox_create', 'service_list', 'service_restart'].includes(name)) servicesTool(m.id, name, args ?? {});
    else if (name === 'trace_output') {
      const data = args.stream === 'stdout' && args.offset === 0 ? `log of ${args.trace_id}\n` : '';
      result(m.id, { data, next_offset: (args.offset ?? 0) + data.length, eof: true, total_bytes: data.length });
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
