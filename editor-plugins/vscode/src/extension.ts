// Entry point of the Kiln extension: wires the MCP server definition for VS Code's agent, the
// extension's own connection to `kiln mcp`, the commands, the Traces view, Problems and the status
// bar. Every feature is a Kiln tool call; nothing here re-implements one.
import * as vscode from 'vscode';

import { CHECKPOINT_SCHEME, CheckpointDocumentProvider, restoreCheckpoint, showRunChanges } from './checkpoints';
import { KilnClient } from './client';
import type { ClientState } from './client';
import * as commands from './commands';
import type { CommandContext } from './commands';
import { firstFolder, readSettings } from './config';
import { KilnMcpServerProvider, registerMcpProvider } from './mcpProvider';
import { showServices } from './services';
import { TRACE_SCHEME, TraceDocumentProvider, TracesProvider, VIEW_ID } from './traces';
import type { TraceNode, TraceSummary } from './traces';

export interface KilnApi {
  client: KilnClient;
  mcpProvider: KilnMcpServerProvider;
  mcpRegistered: boolean;
  diagnostics: vscode.DiagnosticCollection;
  traces: TracesProvider;
}

let active: { client: KilnClient } | undefined;

export function activate(context: vscode.ExtensionContext): KilnApi {
  const version = String((context.extension?.packageJSON as { version?: string } | undefined)?.version ?? '0.0.0');
  const log = vscode.window.createOutputChannel('Kiln', { log: true });
  const runOutput = vscode.window.createOutputChannel('Kiln: Run');
  const diagnostics = vscode.languages.createDiagnosticCollection('kiln');
  context.subscriptions.push(log, runOutput, diagnostics);

  const client = new KilnClient({
    log,
    clientName: 'kiln-vscode',
    clientVersion: version,
    settings: readSettings,
    folder: () => firstFolder()?.uri.fsPath,
    roots: () => (vscode.workspace.workspaceFolders ?? []).map((f) => ({ uri: f.uri.toString(), name: f.name })),
  });
  context.subscriptions.push(client);
  active = { client };

  // VS Code's agent: the MCP server definition (guarded: older editors lack the API).
  const mcpProvider = new KilnMcpServerProvider();
  context.subscriptions.push(mcpProvider);
  const reg = registerMcpProvider(mcpProvider);
  if (reg.disposable) {
    context.subscriptions.push(reg.disposable);
    log.info('Registered Kiln as an MCP server for VS Code (MCP: List Servers)');
  } else {
    log.warn(`Kiln is not offered to VS Code's agent: ${reg.error}. The Kiln commands still work.`);
  }

  const traces = new TracesProvider(client);
  const traceDocs = new TraceDocumentProvider(client);
  const checkpointDocs = new CheckpointDocumentProvider(client);
  const treeView = vscode.window.createTreeView(VIEW_ID, { treeDataProvider: traces, showCollapseAll: true });
  context.subscriptions.push(
    traces,
    traceDocs,
    treeView,
    vscode.workspace.registerTextDocumentContentProvider(TRACE_SCHEME, traceDocs),
    vscode.workspace.registerTextDocumentContentProvider(CHECKPOINT_SCHEME, checkpointDocs),
    client.onDidUpdateResource((uri) => {
      const m = /^kiln:\/\/trace\/(tr_[A-Za-z0-9_-]+)$/.exec(uri);
      if (m) traceDocs.update(m[1]);
    }),
  );

  const ctx: CommandContext = { client, log, runOutput, diagnostics, traces, traceDocs, state: context.workspaceState };

  // The status bar item shows the connection's state, as language clients do.
  const status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 10);
  status.name = 'Kiln';
  status.command = 'kiln.showLog';
  const showState = (s: ClientState): void => {
    const icon = { stopped: '$(circle-outline)', starting: '$(sync~spin)', running: '$(flame)', failed: '$(error)' }[s];
    status.text = `${icon} Kiln`;
    status.tooltip = `Kiln server: ${s}${client.serverInfo?.version ? ` (kiln ${client.serverInfo.version})` : ''}. Click for the log.`;
    status.backgroundColor = s === 'failed' ? new vscode.ThemeColor('statusBarItem.errorBackground') : undefined;
  };
  showState(client.state);
  status.show();
  context.subscriptions.push(status, client.onDidChangeState(showState));

  const register = (id: string, fn: (...args: any[]) => unknown): void => {
    context.subscriptions.push(vscode.commands.registerCommand(id, fn));
  };
  register('kiln.openWorkspace', (uri?: vscode.Uri) => commands.openWorkspace(ctx, uri instanceof vscode.Uri ? uri : undefined));
  register('kiln.runCommand', (cmd?: string) => commands.runCommand(ctx, typeof cmd === 'string' ? cmd : undefined));
  register('kiln.verify', () => commands.verify(ctx));
  register('kiln.showTraces', () => commands.showTraces(ctx));
  register('kiln.showServices', () => showServices(ctx));
  register('kiln.publish', (p?: string) => commands.publish(ctx, typeof p === 'string' ? p : undefined));
  register('kiln.restartServer', () => commands.restartServer(ctx));
  register('kiln.showLog', () => log.show());
  register('kiln.refreshTraces', () => traces.refresh());
  register('kiln.loadMoreTraces', (node: TraceNode) =>
    traces.loadMore(node).catch((e) => commands.reportError(ctx, 'Load traces', e)),
  );
  register('kiln.openTrace', (arg: string | TraceNode) => {
    const id = typeof arg === 'string' ? arg : arg?.type === 'trace' ? arg.trace.trace_id : undefined;
    return id ? commands.openTrace(id, 'record') : undefined;
  });
  register('kiln.showRunChanges', (arg?: string | TraceNode) => showRunChanges(ctx, arg));
  register('kiln.restoreCheckpoint', (arg?: string) => restoreCheckpoint(ctx, typeof arg === 'string' ? arg : undefined));
  register('kiln.restoreBeforeRun', (arg: string | TraceNode) => {
    const node: TraceNode | undefined = typeof arg === 'string' ? { type: 'trace', trace: { trace_id: arg } as TraceSummary } : arg;
    return node ? restoreCheckpoint(ctx, node) : undefined;
  });
  register('kiln.openTraceOutput', (arg: string | TraceNode) => {
    const id = typeof arg === 'string' ? arg : arg?.type === 'trace' ? arg.trace.trace_id : undefined;
    return id ? commands.openTrace(id, 'output') : undefined;
  });

  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration('kiln.server')) {
        mcpProvider.refresh();
        if (client.state === 'running' || client.state === 'failed') {
          log.info('Kiln server settings changed: restarting');
          void client.restart().catch((err) => log.error(`Restart failed: ${(err as Error).message}`));
        }
      }
      if (e.affectsConfiguration('kiln.trace.server')) void client.updateTrace();
    }),
    vscode.workspace.onDidChangeWorkspaceFolders(() => {
      mcpProvider.refresh();
      client.notifyRootsChanged();
      traces.refresh();
    }),
  );

  return { client, mcpProvider, mcpRegistered: !!reg.disposable, diagnostics, traces };
}

export async function deactivate(): Promise<void> {
  const a = active;
  active = undefined;
  await a?.client.stop();
}
