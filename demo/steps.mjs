// What both `make demo` agents share: a step runner that calls one MCP tool per step (or does one
// HTTP request), prints the call and a short view of its result, and stops at the first tool
// error or broken expectation, so that each demo is also a check that exits non-zero.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

// A fingerprint of a sample folder in the repo, to show a session worked on a copy only.
export function fingerprint(dir) {
  const h = createHash('sha256');
  for (const e of fs.readdirSync(dir, { withFileTypes: true, recursive: true }).sort((a, b) => path.join(a.parentPath ?? a.path, a.name).localeCompare(path.join(b.parentPath ?? b.path, b.name)))) {
    if (!e.isFile()) continue;
    const file = path.join(e.parentPath ?? e.path, e.name);
    h.update(path.relative(dir, file)).update('\0').update(fs.readFileSync(file));
  }
  return h.digest('hex');
}

export class ExpectationFailed extends Error {}

export function expect(cond, what) {
  if (!cond) throw new ExpectationFailed(what);
}

export const runText = (run) => (Array.isArray(run) ? JSON.stringify(run) : run);

export function indent(lines, by = '    ') {
  return lines.map((l) => by + l);
}

// One line per verify check, then each failed test with where it failed and its message.
export function checkLines(checks) {
  const out = [];
  for (const c of checks) {
    let line = `${c.name}: ${c.status}, exit ${c.exit_code ?? '-'} (${c.stop_reason ?? '-'}) in ${c.duration_ms ?? '-'} ms`;
    if (c.tests) line += `; tests passed ${c.tests.passed}, failed ${c.tests.failed}, skipped ${c.tests.skipped}`;
    if (c.error) line += `; error: ${c.error}`;
    out.push(line);
    for (const f of c.tests?.failures ?? []) {
      const where = f.file ? `${f.file}${f.line != null ? ':' + f.line : ''}` : '(no file/line in the report)';
      const msg = String(f.message ?? '').replace(/\s+/g, ' ').trim();
      out.push(`  FAILED ${f.name} at ${where}`, `    ${msg.length > 110 ? msg.slice(0, 107) + '...' : msg}`);
    }
  }
  return out;
}

// A verify result's summary and one line per check, printed before the step's expectations so a
// failing expectation still shows what verify said.
export function printVerify(r) {
  const lines = [`${r.status} in ${r.duration_ms} ms, trace ${r.trace_id}`, ...indent(checkLines(r.checks))];
  if (r.services?.length) lines.push(`services: ${r.services.map((s) => `${s.name} (database ${s.database})`).join(', ')}`);
  console.log(lines.map((l) => `    -> ${l}`).join('\n'));
}

// The step that fixes a sample's bug: one file_edit, refused if the file changed since `sha(ctx)`.
export function fixStep(note, bug, sha) {
  return {
    note,
    tool: 'file_edit',
    args: (ctx) => ({ path: bug.file, if_sha256: sha(ctx), edits: [{ old_text: bug.old_text, new_text: bug.new_text }] }),
    show: (r) => {
      expect(r.applied === true && r.replacements === 1, 'one replacement applied');
      return [`${r.replacements} replacement; diff:`, ...indent(r.diff.trimEnd().split('\n'))];
    },
  };
}

function brief(args) {
  return Object.entries(args)
    .map(([k, v]) => {
      let s = typeof v === 'string' ? v : JSON.stringify(v);
      if (k === 'if_sha256') s = s.slice(0, 12) + '...';
      if (k === 'password') s = '(hidden)';
      if (s.length > 70) s = s.slice(0, 67) + '...';
      return `${k}=${s}`;
    })
    .join(' ');
}

// Runs `steps` in order ({note, tool, args(ctx), show(result, ctx)} or {note, http(ctx)}, whose
// `label` replaces "HTTP" for a step that is not a request) and returns how many failed (0 or 1:
// the first failure stops the run).
export async function runSteps(session, steps, { bin, ctx = {} } = {}) {
  const { client } = session;
  const available = new Set((await client.listTools()).tools.map((t) => t.name));
  for (const [i, step] of steps.entries()) {
    if (step.http) {
      // Not a tool call: what a person with the link sees.
      console.log(`[${i + 1}] ${step.label ?? 'HTTP'}`);
      console.log(`    (${step.note})`);
      try {
        for (const line of await step.http(ctx)) console.log(`    -> ${line}`);
      } catch (e) {
        console.log(`    !! ${e instanceof ExpectationFailed ? 'unexpected answer: expected ' : ''}${e.message}\n`);
        return 1;
      }
      console.log();
      continue;
    }
    const args = step.args(ctx);
    console.log(`[${i + 1}] ${step.tool}  ${brief(args)}`);
    console.log(`    (${step.note})`);
    if (!available.has(step.tool)) {
      console.log(`    !! tool ${step.tool} not available in this build (${bin}): it lists no "${step.tool}" tool\n`);
      return 1;
    }
    let result;
    try {
      result = await client.callTool({ name: step.tool, arguments: args }, undefined, { timeout: step.timeout_ms ?? 180000 });
    } catch (e) {
      console.log(`    !! protocol error: ${e.message}\n${session.stderr}`);
      return 1;
    }
    if (result.isError) {
      console.log(`    !! tool error: ${result.content.map((c) => c.text).join(' ')}\n`);
      return 1;
    }
    let shown;
    try {
      shown = step.show(result.structuredContent, ctx);
    } catch (e) {
      if (!(e instanceof ExpectationFailed)) throw e;
      console.log(`    !! unexpected result: expected ${e.message}`);
      console.log(`    !! the tool said: ${result.content.map((c) => c.text).join(' ').slice(0, 400)}\n`);
      return 1;
    }
    for (const line of shown) console.log(`    -> ${line}`);
    console.log();
  }
  return 0;
}
