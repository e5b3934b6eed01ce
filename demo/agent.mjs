// `make demo`: a real agent session against `kiln mcp` through the official MCP SDK client. It
// opens a temporary copy of examples/sample-project (the repo copy is never touched), looks around,
// makes one edit and reads it back, runs the tests in a sandbox, then does the fix-a-failing-test
// loop: `verify` fails on the sample's deliberate bug (kebabCase does not lower-case), the failure
// is read from the check's trace, `file_edit` fixes it and `verify` passes. Then it publishes the
// report page behind a password and fetches its URL without and with the password. It prints a
// short transcript and exits non-zero if a step errors or a result is not what the step expects.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

import { connectClient, copySample, kilnBin, sampleProject, tempDir } from '../tests/lib/kiln.mjs';
import { expect, fingerprint, fixStep, indent, printVerify, runSteps, runText } from './steps.mjs';

const repoBefore = fingerprint(sampleProject);

const workspace = copySample('kiln-demo-');

// The sample's deliberate bug (see examples/sample-project/README.md) and its one-line fix.
const BUG = {
  file: 'src/case.js',
  test: 'kebabCase',
  old_text: "  return words(text).join('-');",
  new_text: "  return words(text).map((w) => w.toLowerCase()).join('-');",
};
const TESTS_TOTAL = 10;
// The demo's own throwaway password for the published report (a real user picks one).
const DEMO_PASSWORD = 'kiln-demo-' + createHash('sha256').update(String(process.pid) + Date.now()).digest('hex').slice(0, 8);

// A step: the tool, its arguments (built from what earlier steps learned), and a few lines that
// show what came back. `note` says why an agent would make this call. `show` calls `expect` for
// what the step must find; a broken expectation stops the demo with a non-zero exit.
const steps = [
  {
    note: 'open the project as a workspace',
    tool: 'workspace_open',
    args: () => ({ path: workspace }),
    show: (r, ctx) => {
      ctx.workspaceId = r.id;
      const checks = r.config?.verify ?? [];
      expect(checks.some((v) => v.name === 'test' && v.report?.format === 'junit'), 'kiln.json has a "test" check with a junit report');
      return [
        `workspace "${r.name}" (id ${r.id}), new: ${r.is_new}`,
        `verify checks from kiln.json:`,
        ...indent(checks.map((v) => `${v.name}: ${runText(v.run)}${v.report ? `  [report: ${v.report.format} ${v.report.path}]` : ''}`)),
      ];
    },
  },
  {
    note: 'see what is there',
    tool: 'file_list',
    args: () => ({ path: '.', depth: 2 }),
    show: (r) => {
      const files = r.entries.filter((e) => e.type === 'file').map((e) => e.path);
      return [`${r.entries.length} entries: ${files.join(', ')}`];
    },
  },
  {
    note: 'find the exported functions',
    tool: 'file_search',
    args: () => ({ pattern: 'export function (\\w+)', path: 'src' }),
    show: (r) => [
      `${r.matches.length} matches in ${r.files_scanned} files scanned`,
      ...r.matches.slice(0, 6).map((m) => `  ${m.path}:${m.line}  ${m.text.trim()}`),
    ],
  },
  {
    note: 'read the file to change',
    tool: 'file_read',
    args: () => ({ path: 'src/slugify.js' }),
    show: (r, ctx) => {
      ctx.sha256 = r.sha256;
      return [`${r.total_lines} lines, ${r.size} bytes, sha256 ${r.sha256.slice(0, 12)}...`];
    },
  },
  {
    note: 'add a maxLength option (refused if the file changed since it was read)',
    tool: 'file_edit',
    args: (ctx) => ({
      path: 'src/slugify.js',
      if_sha256: ctx.sha256,
      edits: [
        {
          old_text: 'export function slugify(text, { separator = DEFAULT_SEPARATOR } = {}) {',
          new_text: 'export function slugify(text, { separator = DEFAULT_SEPARATOR, maxLength = Infinity } = {}) {',
        },
        {
          old_text: '    .join(separator);',
          new_text: "    .join(separator)\n    .slice(0, maxLength)\n    .replace(/[^a-z0-9]+$/, '');",
        },
      ],
    }),
    show: (r) => [`${r.replacements} replacements; diff:`, ...indent(r.diff.trimEnd().split('\n'))],
  },
  {
    note: 'read the change back',
    tool: 'file_read',
    args: () => ({ path: 'src/slugify.js', offset: 8, limit: 13 }),
    show: (r) => [`lines from offset 8 (of ${r.total_lines}):`, ...indent(r.content.trimEnd().split('\n'))],
  },
  {
    note: 'run the test suite inside a strict sandbox (no network, read-only system, workspace read-write); one test fails on purpose',
    tool: 'sandbox_exec',
    args: () => ({ command: 'node --test test/', timeout_s: 120 }),
    show: (r) => {
      const lines = (r.stdout ?? '').trimEnd().split('\n');
      const tail = lines.filter((l) => /^# (pass|fail|tests) /.test(l) || /^ℹ (pass|fail|tests) /.test(l) || /^not ok /.test(l));
      expect(r.exit_code === 1 && r.stop_reason === 'exit', `node --test exits 1 on the deliberate failure (got exit ${r.exit_code}, ${r.stop_reason})`);
      expect(lines.some((l) => /^(# |ℹ )fail 1$/.test(l)) && lines.some((l) => l.startsWith(`not ok `) && l.endsWith(`- ${BUG.test}`)),
        `exactly one failing test, ${BUG.test}`);
      return [`exit ${r.exit_code} (${r.stop_reason}) in ${r.duration_ms} ms: the deliberate bug, as expected`, ...indent(tail)];
    },
  },
  {
    note: 'check what Kiln records about the workspace',
    tool: 'workspace_info',
    args: (ctx) => ({ workspace: ctx.workspaceId }),
    show: (r) => [
      `${r.name} at ${r.root}, config from ${r.config_source ?? 'defaults'}`,
      `created ${r.created_at}; traces: ${r.traces?.total ?? 0}, sandboxes: ${r.sandboxes?.length ?? 0}, artifacts: ${r.artifacts?.length ?? 0}`,
    ],
  },
  {
    note: "run the workspace's checks from kiln.json; the test check fails on the deliberate bug",
    tool: 'verify',
    args: () => ({}),
    show: (r, ctx) => {
      printVerify(r);
      const test = r.checks.find((c) => c.name === 'test');
      expect(r.status === 'fail', `verify status is fail (got ${r.status})`);
      expect(r.checks.find((c) => c.name === 'load')?.status === 'pass', 'the "load" check passes');
      expect(r.checks.find((c) => c.name === 'report')?.status === 'skipped', 'the "report" check after the failed one is skipped');
      expect(test?.status === 'fail' && test.exit_code === 1, `the test check fails with exit 1 (got ${test?.status}, exit ${test?.exit_code})`);
      expect(test.tests, 'the junit report of the test check was parsed (tests is not null)');
      expect(test.tests.failed === 1 && test.tests.passed === TESTS_TOTAL - 1 && test.tests.skipped === 0,
        `tests: ${TESTS_TOTAL - 1} passed, 1 failed, 0 skipped (got ${test.tests.passed}, ${test.tests.failed}, ${test.tests.skipped})`);
      const f = test.tests.failures?.[0];
      expect(test.tests.failures?.length === 1 && f.name === BUG.test, `the one failure is ${BUG.test} (got ${JSON.stringify(test.tests.failures)})`);
      expect(/hello-Big-World/.test(f.message), `the failure message shows the wrong value 'hello-Big-World' (got ${JSON.stringify(f.message)})`);
      expect(test.trace_id, 'the test check has a trace_id');
      ctx.testTrace = test.trace_id;
      return [];
    },
  },
  {
    note: "read the failing check's trace: what ran and how it ended",
    tool: 'trace_get',
    args: (ctx) => ({ trace_id: ctx.testTrace, tail_bytes: 256 }),
    show: (r, ctx) => {
      const t = r.trace;
      expect(t.id === ctx.testTrace, `trace_get returns the trace asked for (got ${t.id})`);
      expect(t.exit_code === 1, `the trace records exit 1 (got ${t.exit_code})`);
      return [
        `${t.kind} ${t.status}: ${runText(t.command)}`,
        `exit ${t.exit_code} (${t.stop_reason}); tests ${t.tests ? `passed ${t.tests.passed}, failed ${t.tests.failed}` : 'not parsed'}; ${r.uri}`,
        ...(r.how_to_page ? [`output: last ${Buffer.byteLength(r.stdout_tail ?? '')} bytes of stdout inline; ${r.how_to_page}`] : []),
      ];
    },
  },
  {
    note: "find the assertion in the check's full output",
    tool: 'trace_output',
    args: (ctx) => ({ trace_id: ctx.testTrace, stream: 'stdout', grep: '✖|^not ok|AssertionError|actual:|expected:|case\\.test\\.js:\\d+', limit: 7 }),
    show: (r) => {
      const m = r.matches ?? [];
      expect(m.some((x) => /AssertionError/.test(x.text)) && m.some((x) => /hello-Big-World/.test(x.text)),
        'the output has the AssertionError with the wrong value hello-Big-World');
      return [`${m.length} matching lines${r.eof ? '' : ' (more from next_offset ' + r.next_offset + ')'}:`, ...indent(m.map((x) => `${x.line_number}: ${x.text.trim()}`))];
    },
  },
  {
    note: 'read the function the failing test calls',
    tool: 'file_read',
    args: () => ({ path: BUG.file }),
    show: (r, ctx) => {
      ctx.caseSha = r.sha256;
      const lines = r.content.split('\n');
      const at = lines.findIndex((l) => l.startsWith('export function kebabCase'));
      expect(at >= 0 && lines[at + 1] === BUG.old_text, `${BUG.file} still has the bug`);
      return [`${BUG.file}, sha256 ${r.sha256.slice(0, 12)}...:`, ...indent(lines.slice(at, at + 3).map((l, i) => `${at + 1 + i}  ${l}`))];
    },
  },
  fixStep('fix it: words() keeps the case, so kebabCase must lower-case each word', BUG, (ctx) => ctx.caseSha),
  {
    note: 'verify again: every check must pass now',
    tool: 'verify',
    args: () => ({}),
    show: (r) => {
      printVerify(r);
      const test = r.checks.find((c) => c.name === 'test');
      expect(r.status === 'pass' && r.checks.every((c) => c.status === 'pass'), `verify status is pass with every check passing (got ${r.status})`);
      expect(test?.tests?.passed === TESTS_TOTAL && test.tests.failed === 0 && (test.tests.failures ?? []).length === 0,
        `all ${TESTS_TOTAL} tests pass (got ${JSON.stringify(test?.tests)})`);
      const report = r.checks.find((c) => c.name === 'report');
      expect(report?.status === 'pass', `the report check wrote reports/index.html (got ${report?.status})`);
      return [];
    },
  },
  {
    note: "publish the report page; its name and share mode (password) come from kiln.json's \"publish\" section",
    tool: 'publish',
    args: () => ({ path: 'reports', password: DEMO_PASSWORD }),
    show: (r, ctx) => {
      expect(r.share === 'password' && r.artifact === 'textkit-report', `a password-protected artifact textkit-report (got ${r.share}, ${r.artifact})`);
      expect(/^http:\/\/[^/]+\/a\/textkit-report\/$/.test(r.url), `a URL at /a/textkit-report/ (got ${r.url})`);
      expect(!JSON.stringify(r).includes(DEMO_PASSWORD), 'the password is not in the result');
      ctx.url = r.url;
      return [
        `${r.artifact} v${r.version}: ${r.files} files, ${r.bytes} bytes, share ${r.share}, trace ${r.trace_id}`,
        `URL: ${r.url}   (password: ${DEMO_PASSWORD})`,
        `this version stays at ${r.version_url}`,
      ];
    },
  },
  {
    note: 'open the URL as a visitor would: first without the password, then with it (HTTP Basic)',
    http: async (ctx) => {
      const anon = await fetch(ctx.url, { headers: { accept: 'text/html' } });
      const anonBody = await anon.text();
      expect(anon.status === 401 && /<form/i.test(anonBody) && !anonBody.includes('all passing'),
        `without the password: 401 and a login form, not the page (got ${anon.status})`);
      const basic = 'Basic ' + Buffer.from(`visitor:${DEMO_PASSWORD}`).toString('base64');
      const ok = await fetch(ctx.url, { headers: { authorization: basic } });
      const page = await ok.text();
      expect(ok.status === 200 && /textkit test report: all passing/.test(page),
        `with the password: 200 and the report page (got ${ok.status})`);
      const title = page.match(/<h1>(.*?)<\/h1>/)?.[1];
      const summary = page.match(/<p id="summary">(.*?)<\/p>/)?.[1];
      return [
        `GET ${ctx.url} without a password: ${anon.status} ${anon.statusText}, ${anon.headers.get('content-type')} (the login page)`,
        `GET ${ctx.url} with the password: ${ok.status} ${ok.statusText}, ${ok.headers.get('content-type')}`,
        `    "${title}" - ${summary}`,
      ];
    },
  },
];

// publish started a `kiln serve` for the demo's throwaway state directory; in real use it keeps
// serving after the agent is gone, but the demo cleans up after itself.
function stopServe(home) {
  try {
    const { pid } = JSON.parse(fs.readFileSync(path.join(home, 'serve.json'), 'utf8'));
    process.kill(pid, 'SIGTERM');
    console.log(`stopped the demo's kiln serve (pid ${pid}); a real one keeps serving published artifacts`);
  } catch {
    // none was started (the demo stopped before publishing)
  }
}

async function main() {
  const bin = kilnBin();
  const home = tempDir('kiln-demo-home-');
  console.log(`Kiln demo: an MCP client session against ${path.relative(process.cwd(), bin) || bin} mcp`);
  console.log(`workspace: a fresh copy of examples/sample-project at ${workspace}\n`);

  const session = await connectClient({ home, name: 'kiln-demo-agent' });
  const { client } = session;
  const server = client.getServerVersion();
  const tools = (await client.listTools()).tools;
  console.log(`connected to ${server.name} ${server.version}; ${tools.length} tools: ${tools.map((t) => t.name).join(', ')}\n`);

  const failed = await runSteps(session, steps, { bin });
  await session.close();
  stopServe(home);
  if (failed) {
    console.log('demo stopped at a failed step');
    process.exitCode = 1;
  } else {
    const unchanged = fingerprint(sampleProject) === repoBefore;
    console.log(`demo finished: ${steps.length} steps; examples/sample-project in the repo is ${unchanged ? 'unchanged' : 'CHANGED (a bug)'}`);
    if (!unchanged) process.exitCode = 1;
  }
}

main().catch((e) => {
  console.error(`demo failed: ${e.stack ?? e}`);
  process.exit(1);
});
