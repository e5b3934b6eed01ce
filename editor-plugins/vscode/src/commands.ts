// The editor's commands. Each is a thin shell around one or two Kiln tools: it asks for what the
// tool needs, shows progress (cancellable: VS Code's cancel becomes notifications/cancelled), and
// puts the result where people look (Problems, a notification, the clipboard, an output channel).
import * as fs from 'node:fs';
import * as path from 'node:path';

import * as vscode from 'vscode';

import { KilnCancelledError, KilnToolError } from './client';
import type { KilnClient, ToolProgress } from './client';
import { networkText, refusalsSentence, traceNetworkView } from './network';
import type { RunChanges, TraceDocumentProvider, TracesProvider } from './traces';
import { changedCount, traceUri, VIEW_ID } from './traces';
import { applyDiagnostics, planDiagnostics } from './verify';
import type { VerifyResult } from './verify';

export interface CommandContext {
  client: KilnClient;
  log: vscode.LogOutputChannel;
  runOutput: vscode.OutputChannel;
  diagnostics: vscode.DiagnosticCollection;
  traces: TracesProvider;
  traceDocs: TraceDocumentProvider;
  state: vscode.Memento;
}

interface WorkspaceInfo {
  id: string;
  name: string;
  root: string;
  config?: { publish?: { path?: string; name?: string; share?: string } };
}

/** Shows an error the way every command does (cancellation is not an error). */
export async function reportError(ctx: CommandContext, what: string, e: unknown): Promise<void> {
  if (e instanceof KilnCancelledError) {
    ctx.log.info(`${what}: cancelled`);
    return;
  }
  const msg = (e as Error)?.message ?? String(e);
  ctx.log.error(`${what}: ${msg}`);
  const first = msg.split('\n')[0];
  const actions = e instanceof KilnToolError ? ['Show Log'] : ['Show Log', 'Restart Server'];
  // Kiln's errors say what to do; when that is opening a workspace, offer it.
  if (e instanceof KilnToolError && /workspace_open/.test(msg)) actions.unshift('Open Workspace');
  const choice = await vscode.window.showErrorMessage(`Kiln: ${what} failed: ${first}`, ...actions);
  if (choice === 'Show Log') ctx.log.show();
  if (choice === 'Restart Server') void vscode.commands.executeCommand('kiln.restartServer');
  if (choice === 'Open Workspace') void vscode.commands.executeCommand('kiln.openWorkspace');
}

/** Feeds MCP progress (progress/total) into VS Code's percentage-based progress. */
function progressReporter(progress: vscode.Progress<{ message?: string; increment?: number }>) {
  let shown = 0;
  return (p: ToolProgress): void => {
    let increment: number | undefined;
    if (p.total && p.total > 0) {
      const pct = Math.min(100, (p.progress / p.total) * 100);
      if (pct > shown) {
        increment = pct - shown;
        shown = pct;
      }
    }
    const message = p.message ? lastLine(p.message) : undefined;
    progress.report({ message, increment });
  };
}

function lastLine(text: string): string {
  const lines = text.split('\n').map((l) => l.trim()).filter(Boolean);
  const l = lines[lines.length - 1] ?? '';
  return l.length > 120 ? `${l.slice(0, 117)}...` : l;
}

async function currentWorkspace(ctx: CommandContext, id?: string): Promise<WorkspaceInfo> {
  return ctx.client.callTool<WorkspaceInfo>('workspace_info', id ? { workspace: id } : {});
}

export async function openTrace(traceId: string, what: 'record' | 'output' = 'record'): Promise<void> {
  const doc = await vscode.workspace.openTextDocument(traceUri(traceId, what));
  await vscode.window.showTextDocument(doc, { preview: true });
}

// ---- Open Workspace -------------------------------------------------------------------------

export async function openWorkspace(ctx: CommandContext, folder?: vscode.Uri): Promise<WorkspaceInfo | undefined> {
  try {
    let target = folder?.fsPath;
    if (!target) {
      type Pick = vscode.QuickPickItem & { path?: string; browse?: boolean };
      const items: Pick[] = (vscode.workspace.workspaceFolders ?? []).map((f) => ({
        label: `$(folder) ${f.name}`,
        description: f.uri.fsPath,
        path: f.uri.fsPath,
      }));
      try {
        const known = await ctx.client.callTool<{ workspaces: Array<{ name: string; root: string }> }>('workspace_list');
        for (const w of known.workspaces ?? []) {
          if (!items.some((i) => i.path === w.root)) {
            items.push({ label: `$(history) ${w.name}`, description: w.root, detail: 'known to Kiln', path: w.root });
          }
        }
      } catch (e) {
        ctx.log.warn(`workspace_list: ${(e as Error).message}`);
      }
      items.push({ label: '$(folder-opened) Browse...', browse: true });
      const pick = await vscode.window.showQuickPick(items, { placeHolder: 'Folder to open as the Kiln workspace' });
      if (!pick) return undefined;
      if (pick.browse) {
        const uris = await vscode.window.showOpenDialog({ canSelectFolders: true, canSelectFiles: false, openLabel: 'Open in Kiln' });
        if (!uris?.length) return undefined;
        target = uris[0].fsPath;
      } else {
        target = pick.path;
      }
    }
    const ws = await ctx.client.callTool<WorkspaceInfo>('workspace_open', { path: target });
    ctx.traces.refresh();
    void vscode.window.showInformationMessage(`Kiln: workspace "${ws.name}" open (${ws.root})`);
    return ws;
  } catch (e) {
    await reportError(ctx, 'Open Workspace', e);
    return undefined;
  }
}

// ---- Verify ---------------------------------------------------------------------------------

export async function verify(ctx: CommandContext): Promise<VerifyResult | undefined> {
  try {
    const result = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: 'Kiln: Verify', cancellable: true },
      (progress, token) =>
        ctx.client.callTool<VerifyResult>('verify', {}, { token, onProgress: progressReporter(progress) }),
    );
    let root: string | undefined;
    try {
      root = (await currentWorkspace(ctx, result.workspace)).root;
    } catch (e) {
      ctx.log.warn(`workspace_info: ${(e as Error).message}`);
    }
    if (root) {
      let configText: string | undefined;
      try {
        configText = fs.readFileSync(path.join(root, 'kiln.json'), 'utf8');
      } catch {
        configText = undefined;
      }
      applyDiagnostics(ctx.diagnostics, planDiagnostics(result, root, configText));
    }
    ctx.traces.refresh();
    const summary = result.summary ?? `verify ${result.status}`;
    ctx.log.info(`Verify: ${summary} (trace ${result.trace_id})`);
    if (result.status === 'pass') {
      void vscode.window.showInformationMessage(`Kiln: ${summary}`);
    } else {
      void vscode.window.showErrorMessage(`Kiln: ${summary}`, 'Show Problems', 'Open Trace').then((choice) => {
        if (choice === 'Show Problems') void vscode.commands.executeCommand('workbench.actions.view.problems');
        if (choice === 'Open Trace') void openTrace(result.trace_id);
      });
    }
    return result;
  } catch (e) {
    await reportError(ctx, 'Verify', e);
    return undefined;
  }
}

// ---- Run Command ----------------------------------------------------------------------------

interface ExecResult {
  run_id: string;
  exit_code: number | null;
  signal?: number | string | null;
  stop_reason: string;
  duration_ms: number;
  stdout?: string;
  stderr?: string;
  trace_id?: string;
  isolation?: { egress?: unknown };
}

/** A run's trace record (for its network log and its changes), or undefined when it cannot be read. */
async function traceRecord(ctx: CommandContext, traceId: string): Promise<{ trace?: { changes?: RunChanges | null } } | undefined> {
  try {
    return await ctx.client.callTool('trace_get', { trace_id: traceId });
  } catch (e) {
    ctx.log.warn(`trace_get ${traceId}: ${(e as Error).message}`);
    return undefined;
  }
}

const CHANGE_SIGN = { added: 'A', modified: 'M', deleted: 'D' } as const;

/** "changed: 3 files (1 added, 1 modified, 1 deleted): A notes.txt, M src/case.js, ..." */
export function changesLine(c: RunChanges): string {
  const n = changedCount(c);
  const paths = (c.paths ?? []).slice(0, 10).map((p) => `${CHANGE_SIGN[p.change] ?? '?'} ${p.path}`);
  const more = n - paths.length;
  return `changed: ${n} file${n === 1 ? '' : 's'} (${c.added} added, ${c.modified} modified, ${c.deleted} deleted): ${paths.join(', ')}${more > 0 ? ` and ${more} more` : ''}`;
}

const LAST_COMMAND = 'kiln.lastCommand';

export async function runCommand(ctx: CommandContext, commandArg?: string): Promise<ExecResult | undefined> {
  const command =
    commandArg ??
    (await vscode.window.showInputBox({
      title: 'Kiln: Run Command in Sandbox',
      prompt: 'A shell command (run by /bin/sh -c) in a fresh Kiln sandbox of the workspace',
      value: ctx.state.get<string>(LAST_COMMAND, ''),
      ignoreFocusOut: true,
    }));
  if (!command?.trim()) return undefined;
  await ctx.state.update(LAST_COMMAND, command);
  const out = ctx.runOutput;
  out.appendLine(`$ ${command}`);
  out.show(true);
  let streamed = 0;
  try {
    const r = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Kiln: ${command}`, cancellable: true },
      (progress, token) =>
        ctx.client.callTool<ExecResult>(
          'sandbox_exec',
          { command },
          {
            token,
            // sandbox_exec streams output as progress messages.
            onProgress: (p) => {
              if (p.message) {
                out.append(p.message);
                streamed += p.message.length;
                const l = lastLine(p.message);
                if (l) progress.report({ message: l });
              }
            },
          },
        ),
    );
    if (!streamed) {
      if (r.stdout) out.append(r.stdout.endsWith('\n') ? r.stdout : `${r.stdout}\n`);
      if (r.stderr) out.append(r.stderr.endsWith('\n') ? r.stderr : `${r.stderr}\n`);
    }
    const secs = (r.duration_ms / 1000).toFixed(1);
    const how =
      r.stop_reason === 'exit' ? `exited ${r.exit_code}` : `stopped: ${r.stop_reason}${r.signal ? ` (signal ${r.signal})` : ''}`;
    // With a network allowlist (kiln.json sandbox.network), what it reached and what was refused:
    // the trace has the log (the exec result only says that an allowlist applied).
    // The trace also says which files the run changed (checkpoints before and after it).
    const record = r.trace_id ? await traceRecord(ctx, r.trace_id) : undefined;
    const net = r.isolation?.egress && record ? traceNetworkView(record) : undefined;
    if (net) for (const l of networkText(net, r.trace_id)) out.appendLine(l);
    const changes = record?.trace?.changes;
    const changed = changedCount(changes);
    if (changes && changed) out.appendLine(changesLine(changes));
    out.appendLine(`[${how} in ${secs} s${r.trace_id ? `, trace ${r.trace_id}` : ''}]`);
    ctx.traces.refresh();
    const refused = net ? refusalsSentence(net) : '';
    const netNote = net ? ` · network: ${net.allowed} allowed, ${net.refused} refused${refused ? `: ${refused}` : ''}` : '';
    const changeNote = changed ? ` · ${changed} file${changed === 1 ? '' : 's'} changed` : '';
    const show =
      r.stop_reason === 'exit' && r.exit_code === 0 && !net?.refused ? vscode.window.showInformationMessage : vscode.window.showWarningMessage;
    const actions = changed ? ['Show Changes', 'Show Output', 'Open Trace'] : ['Show Output', 'Open Trace'];
    void show(`Kiln: \`${command}\` ${how} (${secs} s)${changeNote}${netNote}`, ...actions).then((choice) => {
      if (choice === 'Show Changes' && r.trace_id) void vscode.commands.executeCommand('kiln.showRunChanges', r.trace_id);
      if (choice === 'Show Output') out.show();
      if (choice === 'Open Trace' && r.trace_id) void openTrace(r.trace_id);
    });
    return r;
  } catch (e) {
    if (e instanceof KilnCancelledError) {
      out.appendLine('[cancelled]');
      ctx.traces.refresh();
      void vscode.window.showInformationMessage(`Kiln: \`${command}\` cancelled`);
      return undefined;
    }
    await reportError(ctx, 'Run Command', e);
    return undefined;
  }
}

// ---- Publish --------------------------------------------------------------------------------

interface PublishResult {
  artifact: string;
  version: number;
  url: string;
  share: string;
  invites: Array<{ name: string; url: string }>;
  trace_id: string;
  files?: number;
  bytes?: number;
}

export async function publish(ctx: CommandContext, pathArg?: string): Promise<PublishResult | undefined> {
  try {
    let target = pathArg;
    if (target === undefined) {
      let suggestion = '';
      try {
        suggestion = (await currentWorkspace(ctx)).config?.publish?.path ?? '';
      } catch (e) {
        ctx.log.warn(`workspace_info: ${(e as Error).message}`);
      }
      target = await vscode.window.showInputBox({
        title: 'Kiln: Publish',
        prompt: 'Folder or file to publish, relative to the workspace root ("." for the whole workspace)',
        value: suggestion,
        placeHolder: 'dist',
        ignoreFocusOut: true,
        validateInput: (v) => (v.trim() ? undefined : 'A folder or file is needed'),
      });
    }
    if (!target?.trim()) return undefined;
    const args: { path: string; password?: string } = { path: target.trim() };
    const run = () =>
      vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: `Kiln: publishing ${args.path}`, cancellable: true },
        (_progress, token) => ctx.client.callTool<PublishResult>('publish', args, { token }),
      );
    let result: PublishResult;
    try {
      result = await run();
    } catch (e) {
      // kiln.json's publish.share is "password" and the artifact is new: Kiln needs one. Kiln
      // decides that (the artifact may already have a password); the editor only asks for it.
      if (!(e instanceof KilnToolError) || !/needs a password/.test(e.message)) throw e;
      const password = await vscode.window.showInputBox({
        title: 'Kiln: Publish',
        prompt: `A password for the artifact (kiln.json shares it with a password): ${e.message}`,
        password: true,
        ignoreFocusOut: true,
        validateInput: (v) => (v ? undefined : 'A password is needed'),
      });
      if (!password) return undefined;
      args.password = password;
      result = await run();
    }
    await vscode.env.clipboard.writeText(result.url);
    ctx.traces.refresh();
    ctx.log.info(`Published ${result.artifact} v${result.version}: ${result.url}`);
    for (const i of result.invites ?? []) ctx.log.info(`  invite link for ${i.name}: ${i.url}`);
    const actions = ['Open', 'Copy URL'];
    if (result.invites?.length) actions.push('Copy Invite Links');
    void vscode.window
      .showInformationMessage(
        `Kiln: published ${result.artifact} v${result.version} at ${result.url} (URL copied${result.share === 'public' ? '' : `; share: ${result.share}`})`,
        ...actions,
      )
      .then((choice) => {
        if (choice === 'Open') void vscode.env.openExternal(vscode.Uri.parse(result.url));
        if (choice === 'Copy URL') void vscode.env.clipboard.writeText(result.url);
        if (choice === 'Copy Invite Links') {
          void vscode.env.clipboard.writeText(result.invites.map((i) => `${i.name}: ${i.url}`).join('\n'));
        }
      });
    return result;
  } catch (e) {
    await reportError(ctx, 'Publish', e);
    return undefined;
  }
}

// ---- Traces, server, log --------------------------------------------------------------------

export async function showTraces(ctx: CommandContext): Promise<void> {
  ctx.traces.refresh();
  await vscode.commands.executeCommand(`${VIEW_ID}.focus`);
}

export async function restartServer(ctx: CommandContext): Promise<void> {
  try {
    await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Window, title: 'Restarting Kiln' },
      () => ctx.client.restart(),
    );
    ctx.traces.refresh();
    void vscode.window.showInformationMessage(`Kiln: server restarted (pid ${ctx.client.pid})`);
  } catch (e) {
    await reportError(ctx, 'Restart Server', e);
  }
}
