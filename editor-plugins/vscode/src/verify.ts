// Turns a `verify` result into Problems: each failed test at its file and line, and a check that
// failed without test failures (or could not run) at that check in kiln.json.
import * as path from 'node:path';

import * as vscode from 'vscode';

export interface VerifyFailure {
  name: string;
  message: string;
  file: string;
  line: number | null;
}

export interface VerifyCheck {
  name: string;
  status: 'pass' | 'fail' | 'error' | 'skipped' | 'cancelled';
  exit_code?: number | null;
  stop_reason?: string | null;
  duration_ms?: number | null;
  error?: string;
  tests?: { passed?: number; failed?: number; skipped?: number; failures?: VerifyFailure[] } | null;
  trace_id: string;
}

export interface VerifyResult {
  status: 'pass' | 'fail' | 'error';
  workspace?: string;
  trace_id: string;
  trace_uri?: string;
  duration_ms?: number;
  summary?: string;
  checks: VerifyCheck[];
}

export interface PlannedDiagnostic {
  /** Absolute path of the file. */
  file: string;
  /** 0-based line. */
  line: number;
  /** 0-based start and end columns on that line. */
  start: number;
  end: number;
  message: string;
  severity: 'error' | 'warning';
  /** The check's name. */
  code: string;
}

const WHOLE_LINE = 1_000_000; // VS Code clamps a range to the line's length

/** Where `"name": "CHECK"` stands in kiln.json's text (0-based), to point a check's problem there. */
export function findCheckInConfig(text: string, check: string): { line: number; start: number; end: number } {
  const lines = text.split('\n');
  const needle = new RegExp(`"name"\\s*:\\s*${JSON.stringify(check).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`);
  for (let i = 0; i < lines.length; i++) {
    const m = needle.exec(lines[i]);
    if (m) return { line: i, start: m.index, end: m.index + m[0].length };
  }
  return { line: 0, start: 0, end: WHOLE_LINE };
}

/**
 * A failure message as the Problems view shows it: its own lines kept (an assertion's diff is
 * unreadable on one line), CRLF as LF, trailing blanks and blank lines at either end dropped.
 */
export function messageLines(message: string): string {
  return message.replace(/\r\n?/g, '\n').split('\n').map((l) => l.trimEnd()).join('\n')
    .replace(/^\n+|\n+$/g, '');
}

/**
 * The diagnostics a verify result should produce. `root` is the workspace root (failure files are
 * relative to it); `configText` is kiln.json's text, when it can be read, to place check-level problems.
 */
export function planDiagnostics(result: VerifyResult, root: string, configText?: string): PlannedDiagnostic[] {
  const out: PlannedDiagnostic[] = [];
  const configFile = path.join(root, 'kiln.json');
  for (const check of result.checks ?? []) {
    const failures = check.tests?.failures ?? [];
    for (const f of failures) {
      const file = f.file ? (path.isAbsolute(f.file) ? f.file : path.join(root, f.file)) : configFile;
      const line = typeof f.line === 'number' && f.line > 0 ? f.line - 1 : 0;
      const text = f.message ? messageLines(f.message) : '';
      const message = text ? `${f.name}: ${text}` : `${f.name} failed`;
      out.push({ file, line, start: 0, end: WHOLE_LINE, message, severity: 'error', code: check.name });
    }
    if ((check.status === 'fail' || check.status === 'error') && failures.length === 0) {
      const at = configText !== undefined ? findCheckInConfig(configText, check.name) : { line: 0, start: 0, end: WHOLE_LINE };
      let why: string;
      if (check.error) why = check.error;
      else if (check.stop_reason && check.stop_reason !== 'exit') why = `stopped: ${check.stop_reason}`;
      else why = `exit code ${check.exit_code ?? '?'}`;
      out.push({
        file: configFile,
        ...at,
        message: `check "${check.name}" ${check.status === 'error' ? 'could not run' : 'failed'}: ${why}`,
        severity: 'error',
        code: check.name,
      });
    }
  }
  return out;
}

/** Replaces the collection's content with the planned diagnostics. */
export function applyDiagnostics(collection: vscode.DiagnosticCollection, planned: PlannedDiagnostic[]): void {
  collection.clear();
  const byFile = new Map<string, vscode.Diagnostic[]>();
  for (const p of planned) {
    const d = new vscode.Diagnostic(
      new vscode.Range(p.line, p.start, p.line, p.end),
      p.message,
      p.severity === 'error' ? vscode.DiagnosticSeverity.Error : vscode.DiagnosticSeverity.Warning,
    );
    d.source = 'kiln verify';
    d.code = p.code;
    const list = byFile.get(p.file) ?? [];
    list.push(d);
    byFile.set(p.file, list);
  }
  for (const [file, list] of byFile) collection.set(vscode.Uri.file(file), list);
}
