// `make demo`: a real agent session against `kiln mcp` through the official MCP SDK client. It
// opens a temporary copy of examples/sample-project (the repo copy is never touched), looks around,
// makes one edit and reads it back, printing a short transcript. The session is a list of steps so
// later features (sandbox runs, verify, publish) are one more entry each.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

import { connectClient, copySample, kilnBin, sampleProject, tempDir } from '../tests/lib/kiln.mjs';

// A fingerprint of the repo's sample project, to show the session worked on a copy only.
function fingerprint(dir) {
  const h = createHash('sha256');
  for (const e of fs.readdirSync(dir, { withFileTypes: true, recursive: true }).sort((a, b) => path.join(a.parentPath ?? a.path, a.name).localeCompare(path.join(b.parentPath ?? b.path, b.name)))) {
    if (!e.isFile()) continue;
    const file = path.join(e.parentPath ?? e.path, e.name);
    h.update(path.relative(dir, file)).update('\0').update(fs.readFileSync(file));
  }
  return h.digest('hex');
}
const repoBefore = fingerprint(sampleProject);

const workspace = copySample('kiln-demo-');

// A step: the tool, its arguments (built from what earlier steps learned), and a few lines that
// show what came back. `note` says why an agent would make this call.
const steps = [
  {
    note: 'open the project as a workspace',
    tool: 'workspace_open',
    args: () => ({ path: workspace }),
    show: (r, ctx) => {
      ctx.workspaceId = r.id;
      const verify = (r.config?.verify ?? []).map((v) => `${v.name}: ${v.run}`).join('; ') || 'none';
      return [`workspace "${r.name}" (id ${r.id}), new: ${r.is_new}`, `verify steps from kiln.json: ${verify}`];
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
    note: 'run the test suite inside a strict sandbox (no network, read-only system, workspace read-write)',
    tool: 'sandbox_exec',
    args: () => ({ command: 'node --test test/', timeout_s: 120 }),
    show: (r) => {
      const tail = (r.stdout ?? '').trimEnd().split('\n').filter((l) => /^# (pass|fail|tests)/.test(l) || /^ℹ (pass|fail|tests)/.test(l));
      return [`exit ${r.exit_code} (${r.stop_reason}) in ${r.duration_ms} ms`, ...indent(tail)];
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
];

function indent(lines, by = '    ') {
  return lines.map((l) => by + l);
}

function brief(args) {
  return Object.entries(args)
    .map(([k, v]) => {
      let s = typeof v === 'string' ? v : JSON.stringify(v);
      if (k === 'if_sha256') s = s.slice(0, 12) + '...';
      if (s.length > 70) s = s.slice(0, 67) + '...';
      return `${k}=${s}`;
    })
    .join(' ');
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

  const ctx = {};
  let failed = 0;
  for (const [i, step] of steps.entries()) {
    const args = step.args(ctx);
    console.log(`[${i + 1}] ${step.tool}  ${brief(args)}`);
    console.log(`    (${step.note})`);
    let result;
    try {
      result = await client.callTool({ name: step.tool, arguments: args });
    } catch (e) {
      console.log(`    !! protocol error: ${e.message}\n${session.stderr}`);
      failed++;
      break;
    }
    if (result.isError) {
      console.log(`    !! tool error: ${result.content.map((c) => c.text).join(' ')}\n`);
      failed++;
      break;
    }
    for (const line of step.show(result.structuredContent, ctx)) console.log(`    -> ${line}`);
    console.log();
  }
  await session.close();
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
