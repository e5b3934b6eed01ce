// `make demo`, second sample: an agent working on a small HTTP API backed by PostgreSQL
// (examples/api-project, its `pg` client vendored so nothing is downloaded). Through the MCP SDK it
// opens a temporary copy, starts a sandbox with the project's services (a real postgres from the
// host's Debian package and the API itself), calls the API and reads the database from inside the
// sandbox, runs `verify` (the integration test fails on the sample's deliberate bug, in a fresh
// database cloned from the migrated template), reads the failure from the check's trace, fixes it
// with `file_edit`, verifies green, restarts the API, and shows that the development database's
// rows survive sandbox_destroy and a new sandbox_create while verify's rows never reach it. It
// prints a short transcript and exits non-zero if a step errors or a result is not what it expects.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { connectClient, kilnBin, repoRoot, tempDir } from '../tests/lib/kiln.mjs';
import { expect, fingerprint, fixStep, indent, printVerify, runSteps, runText } from './steps.mjs';

const sample = path.join(repoRoot, 'examples', 'api-project');
const repoBefore = fingerprint(sample);

// The sample's deliberate bug (see examples/api-project/README.md) and its one-line fix.
const BUG = {
  file: 'server.js',
  test: 'a posted note is stored with its title and body',
  old_text: 'RETURNING ${COLUMNS}`, [title, title]);',
  new_text: 'RETURNING ${COLUMNS}`, [title, body]);',
};
const TESTS_TOTAL = 5;
const NOTE = { title: 'call the plumber', body: 'Tuesday, after 10' };
const FIXED_NOTE = { title: 'water the plants', body: 'the ones by the window' };

// A POST and a GET as an agent would type them in the sandbox (curl is not part of a fresh
// Debian 12; node is, and its fetch needs nothing else).
const post = (note) =>
  `node -e 'fetch(process.env.KILN_SERVICE_API_URL + "/notes", {method: "POST", body: process.argv[1]}).then(async (r) => console.log(r.status, await r.text()))' '${JSON.stringify(note)}'`;
const PSQL_NOTES = "psql -X -A -F ' | ' -c 'SELECT id, title, body FROM notes ORDER BY id'";
const rowsOf = (stdout) => stdout.trim().split('\n').slice(1, -1); // without the header and "(N rows)"

function execLines(r) {
  const out = [`exit ${r.exit_code} (${r.stop_reason}) in ${r.duration_ms} ms`];
  for (const l of (r.stdout ?? '').trimEnd().split('\n')) if (l) out.push(`  ${l}`);
  for (const l of (r.stderr ?? '').trimEnd().split('\n')) if (l) out.push(`  stderr: ${l}`);
  return out;
}
// POST /notes from inside the sandbox; `check` looks at the created note and adds lines to show.
function postStep(note, body, check) {
  return {
    note,
    tool: 'sandbox_exec',
    args: (ctx) => ({ sandbox_id: ctx.sandbox, command: post(body) }),
    show: (r) => {
      expect(r.exit_code === 0 && /^201 /.test(r.stdout), `POST /notes answers 201 (got exit ${r.exit_code}: ${r.stdout}${r.stderr})`);
      return [...execLines(r), ...check(JSON.parse(r.stdout.slice(4)))];
    },
  };
}
const serviceLines = (services) => services.map((s) => `${s.name} (${s.kind}): ${s.state}${s.url ? ' at ' + s.url : ''}`);

const steps = [
  {
    note: 'open the project as a workspace',
    tool: 'workspace_open',
    args: (ctx) => ({ path: ctx.workspace }),
    show: (r) => {
      const checks = r.config?.verify ?? [];
      const services = r.services ?? [];
      expect(services.some((s) => s.name === 'db' && s.kind === 'postgres') && services.some((s) => s.name === 'api'),
        `kiln.json declares the services db (postgres) and api (got ${JSON.stringify(services)})`);
      expect(checks.some((v) => v.name === 'integration'), 'kiln.json has an "integration" check');
      return [
        `workspace "${r.name}" (id ${r.id}), new: ${r.is_new}`,
        `services from kiln.json:`,
        ...indent(services.map((s) => `${s.name}: ${s.kind}${s.port ? ', port ' + s.port : ''}`)),
        `verify checks from kiln.json:`,
        ...indent(checks.map((v) => `${v.name}: ${runText(v.run)}`)),
      ];
    },
  },
  {
    note: "start a sandbox with the project's services: postgres (a new cluster, then `setup`: node migrate.js) and the API; it returns when both answer",
    tool: 'sandbox_create',
    args: () => ({ services: true }),
    show: (r, ctx) => {
      ctx.sandbox = r.sandbox_id;
      const byName = Object.fromEntries((r.services ?? []).map((s) => [s.name, s]));
      expect(byName.db?.state === 'ready' && byName.api?.state === 'ready', `db and api ready (got ${JSON.stringify(r.services)})`);
      return [`sandbox ${r.sandbox_id}`, ...indent(serviceLines(r.services))];
    },
  },
  postStep('call the API the way a user would: post a note', NOTE, (made) => {
    expect(made.title === NOTE.title && made.body === NOTE.title, `the deliberate bug: the body comes back as the title (got ${JSON.stringify(made)})`);
    return [`the body came back as "${made.body}", not "${NOTE.body}": something is off`];
  }),
  {
    note: 'look at the development database directly (psql gets PGHOST, PGPORT, PGUSER, PGDATABASE from the sandbox)',
    tool: 'sandbox_exec',
    args: (ctx) => ({ sandbox_id: ctx.sandbox, command: PSQL_NOTES }),
    show: (r) => {
      expect(r.exit_code === 0 && rowsOf(r.stdout).length === 1, `psql lists one row (got exit ${r.exit_code}: ${r.stdout}${r.stderr})`);
      return execLines(r);
    },
  },
  {
    note: "run the workspace's checks from kiln.json: the integration test, against a fresh database cloned from the migrated template",
    tool: 'verify',
    args: () => ({}),
    show: (r, ctx) => {
      printVerify(r);
      const check = r.checks.find((c) => c.name === 'integration');
      expect(r.status === 'fail' && check?.status === 'fail', `verify fails on the deliberate bug (got ${r.status}, integration ${check?.status})`);
      expect(check.tests?.failed === 1 && check.tests.passed === TESTS_TOTAL - 1,
        `tests: ${TESTS_TOTAL - 1} passed, 1 failed (got ${JSON.stringify(check.tests)})`);
      const f = check.tests.failures?.[0];
      expect(f?.name === BUG.test, `the one failure is "${BUG.test}" (got ${JSON.stringify(check.tests.failures)})`);
      expect(/verify_[0-9a-f]+/.test(r.services?.[0]?.database ?? ''), `verify ran on its own database (got ${JSON.stringify(r.services)})`);
      ctx.checkTrace = check.trace_id;
      return [];
    },
  },
  {
    note: "read the failing check's trace: what ran, with which services, and how it ended",
    tool: 'trace_get',
    args: (ctx) => ({ trace_id: ctx.checkTrace, tail_bytes: 256 }),
    show: (r, ctx) => {
      const t = r.trace;
      expect(t.id === ctx.checkTrace && t.exit_code === 1, `the trace of the check, exit 1 (got ${t.id}, exit ${t.exit_code})`);
      return [
        `${t.kind} ${t.status}: ${runText(t.command)}`,
        `exit ${t.exit_code} (${t.stop_reason}); tests ${t.tests ? `passed ${t.tests.passed}, failed ${t.tests.failed}` : 'not parsed'}; ${r.uri}`,
        ...(t.policy?.services?.length ? [`ran with the services: ${t.policy.services.map((s) => s.name ?? s).join(', ')}`] : []),
      ];
    },
  },
  {
    note: "find the assertion in the check's full output",
    tool: 'trace_output',
    args: (ctx) => ({ trace_id: ctx.checkTrace, stream: 'stdout', grep: "AssertionError|^\\s*[+-] '|notes\\.test\\.js:\\d+", limit: 4 }),
    show: (r) => {
      const m = r.matches ?? [];
      expect(m.some((x) => /AssertionError/.test(x.text)) && m.some((x) => x.text.includes("'buy milk'")),
        `the output has the AssertionError with the wrong value 'buy milk' (got ${JSON.stringify(m)})`);
      return [`${m.length} matching lines:`, ...indent(m.map((x) => `${x.line_number}: ${x.text.trim()}`))];
    },
  },
  {
    note: 'the body holds the title: find where a note is inserted',
    tool: 'file_search',
    args: () => ({ pattern: 'INSERT INTO notes', path: '.' }),
    show: (r, ctx) => {
      const hit = (r.matches ?? []).find((m) => m.path === BUG.file);
      expect(hit, `a match in ${BUG.file} (got ${JSON.stringify(r.matches)})`);
      ctx.line = hit.line;
      return r.matches.map((m) => `${m.path}:${m.line}  ${m.text.trim()}`);
    },
  },
  {
    note: 'read the lines around it',
    tool: 'file_read',
    args: (ctx) => ({ path: BUG.file, offset: ctx.line - 3, limit: 6 }),
    show: (r, ctx) => {
      ctx.sha = r.sha256;
      expect(r.content.includes(BUG.old_text), `${BUG.file} still has the bug`);
      return [`${BUG.file}, sha256 ${r.sha256.slice(0, 12)}...:`, ...indent(r.content.trimEnd().split('\n'))];
    },
  },
  fixStep('fix it: the second parameter ($2, the body column) is given the title', BUG, (ctx) => ctx.sha),
  {
    note: 'verify again: a new fresh database, every test must pass now',
    tool: 'verify',
    args: () => ({}),
    show: (r) => {
      printVerify(r);
      const check = r.checks.find((c) => c.name === 'integration');
      expect(r.status === 'pass' && check?.tests?.passed === TESTS_TOTAL && check.tests.failed === 0,
        `verify passes with all ${TESTS_TOTAL} tests (got ${r.status}, ${JSON.stringify(check?.tests)})`);
      return [];
    },
  },
  {
    note: 'restart the running API so that it serves the fixed code',
    tool: 'service_restart',
    args: (ctx) => ({ sandbox_id: ctx.sandbox, name: 'api' }),
    show: (r) => {
      expect(r.service?.state === 'ready', `api ready again (got ${JSON.stringify(r.service)})`);
      return [`api: ${r.service.state}, restarts ${r.service.restarts}`];
    },
  },
  postStep('post another note: the body is stored now', FIXED_NOTE, (made) => {
    expect(made.body === FIXED_NOTE.body, `the body is stored (got ${JSON.stringify(made)})`);
    return [];
  }),
  {
    note: 'done with this sandbox: its postgres and API stop',
    tool: 'sandbox_destroy',
    args: (ctx) => ({ sandbox_id: ctx.sandbox }),
    show: (r, ctx) => [`sandbox ${ctx.sandbox} destroyed`],
  },
  {
    note: 'a new sandbox with only the database: the same development data',
    tool: 'sandbox_create',
    args: () => ({ services: ['db'] }),
    show: (r, ctx) => {
      ctx.sandbox = r.sandbox_id;
      expect(r.services?.length === 1 && r.services[0].state === 'ready', `db ready (got ${JSON.stringify(r.services)})`);
      return [`sandbox ${r.sandbox_id}`, ...indent(serviceLines(r.services))];
    },
  },
  {
    note: "the two notes posted through the API are still there; the verify runs' rows never were",
    tool: 'sandbox_exec',
    args: (ctx) => ({ sandbox_id: ctx.sandbox, command: PSQL_NOTES }),
    show: (r) => {
      const rows = rowsOf(r.stdout);
      expect(r.exit_code === 0 && rows.length === 2 && rows[0].includes(NOTE.title) && rows[1].includes(FIXED_NOTE.body),
        `psql lists exactly the two notes posted in the session sandbox (got exit ${r.exit_code}: ${r.stdout}${r.stderr})`);
      return execLines(r);
    },
  },
  {
    note: 'clean up',
    tool: 'sandbox_destroy',
    args: (ctx) => ({ sandbox_id: ctx.sandbox }),
    show: (r, ctx) => [`sandbox ${ctx.sandbox} destroyed`],
  },
];

// The sample needs PostgreSQL's server binaries; without them say so at once, not as a tool error
// halfway through (Kiln looks in the same places: services/server_binaries.cpp).
function postgresMissing() {
  if (process.env.KILN_POSTGRES_BINDIR) return null;
  const found = spawnSync('sh', ['-c', 'ls /usr/lib/postgresql/*/bin/postgres']).status === 0;
  return found ? null : 'PostgreSQL is not installed (no /usr/lib/postgresql/<version>/bin/postgres): install the Debian package postgresql (scripts/install-deps.sh, which make demo runs, installs it)';
}

async function main() {
  const bin = kilnBin();
  const missing = postgresMissing();
  if (missing) {
    console.log(`Kiln demo, second sample (examples/api-project): cannot run: ${missing}`);
    process.exitCode = 1;
    return;
  }
  const home = tempDir('kiln-demo-api-home-');
  const workspace = path.join(tempDir('kiln-demo-api-'), 'api-project');
  fs.cpSync(sample, workspace, { recursive: true });
  console.log(`Kiln demo, second sample: an MCP client session against ${path.relative(process.cwd(), bin) || bin} mcp`);
  console.log(`workspace: a fresh copy of examples/api-project (a notes API on PostgreSQL) at ${workspace}\n`);

  const session = await connectClient({ home, name: 'kiln-demo-api-agent' });
  const failed = await runSteps(session, steps, { bin, ctx: { workspace } });
  await session.close();
  if (failed) {
    console.log('demo (second sample) stopped at a failed step');
    process.exitCode = 1;
  } else {
    const unchanged = fingerprint(sample) === repoBefore;
    console.log(`demo (second sample) finished: ${steps.length} steps; examples/api-project in the repo is ${unchanged ? 'unchanged' : 'CHANGED (a bug)'}`);
    if (!unchanged) process.exitCode = 1;
  }
}

main().catch((e) => {
  console.error(`demo failed: ${e.stack ?? e}`);
  process.exit(1);
});
