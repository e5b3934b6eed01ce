// The Traces view (trace_list, newest first; a verify's checks as its children) and read-only
// documents for a trace (trace_get as JSON) and for its output (trace_output, all pages; a live
// service's from its run).
import * as vscode from 'vscode';

import { KilnToolError } from './client';
import type { KilnClient } from './client';
import { networkMarkdown, traceNetworkView } from './network';

export const TRACE_SCHEME = 'kiln-trace';
export const VIEW_ID = 'kiln.traces';
const PAGE = 50;
/** Output beyond this many bytes is left out of the document (with a note saying how to read it). */
const OUTPUT_DOC_LIMIT = 4 * 1024 * 1024;

export interface TraceSummary {
  trace_id: string;
  kind: 'exec' | 'verify' | 'publish' | 'service' | 'app' | 'schedule';
  status: 'running' | 'pass' | 'fail' | 'error' | 'interrupted';
  name?: string;
  command?: string;
  parent_id?: string | null;
  started_at: string;
  ended_at?: string | null;
  duration_ms?: number | null;
  exit_code?: number | null;
  stop_reason?: string;
  uri: string;
  tests?: { passed?: number; failed?: number; skipped?: number } | null;
  /** What the run changed (a later Kiln may list it; else trace_get's changes, fetched for the view). */
  changes?: RunChanges | null;
}

/** trace_get's trace.changes: what a command run or verify changed in the workspace. */
export interface RunChanges {
  added: number;
  modified: number;
  deleted: number;
  paths?: Array<{ path: string; change: 'added' | 'modified' | 'deleted' }>;
  paths_truncated?: boolean;
  checkpoint_before?: string;
  checkpoint_after?: string;
}

export function changedCount(c: RunChanges | null | undefined): number {
  return c ? (c.added ?? 0) + (c.modified ?? 0) + (c.deleted ?? 0) : 0;
}

/** The kinds whose trace records changes (checkpoints around the run). */
function hasChanges(t: TraceSummary): boolean {
  return (t.kind === 'exec' || t.kind === 'verify') && !t.parent_id;
}

interface OutputPage {
  data?: string;
  next_offset: number;
  eof: boolean;
  total_bytes: number;
}
type OutputReader = (stream: 'stdout' | 'stderr', offset: number) => Promise<OutputPage>;

interface TraceListResult {
  traces: TraceSummary[];
  next_cursor?: string;
}

export type TraceNode =
  | { type: 'trace'; trace: TraceSummary }
  | { type: 'more'; cursor: string; parent?: string }
  | { type: 'message'; text: string };

/** A trace's document URI: kiln-trace:/ID.json (the record) or kiln-trace:/ID.output.log (its output). */
export function traceUri(traceId: string, what: 'record' | 'output' = 'record'): vscode.Uri {
  return vscode.Uri.from({ scheme: TRACE_SCHEME, path: `/${traceId}${what === 'record' ? '.json' : '.output.log'}` });
}

export function parseTraceUri(uri: vscode.Uri): { traceId: string; what: 'record' | 'output' } | undefined {
  const m = /^\/?(tr_[A-Za-z0-9_-]+)\.(json|output\.log)$/.exec(uri.path);
  if (!m) return undefined;
  return { traceId: m[1], what: m[2] === 'json' ? 'record' : 'output' };
}

function ago(iso: string): string {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso;
  const s = Math.max(0, Math.round((Date.now() - t) / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.round(s / 60)}m ago`;
  if (s < 86400) return `${Math.round(s / 3600)}h ago`;
  return new Date(t).toLocaleString();
}

function statusIcon(t: TraceSummary): vscode.ThemeIcon {
  switch (t.status) {
    case 'pass':
      return new vscode.ThemeIcon('pass', new vscode.ThemeColor('testing.iconPassed'));
    case 'fail':
      return new vscode.ThemeIcon('error', new vscode.ThemeColor('testing.iconFailed'));
    case 'error':
      return new vscode.ThemeIcon('warning', new vscode.ThemeColor('problemsWarningIcon.foreground'));
    case 'running':
      return new vscode.ThemeIcon('sync~spin');
    default:
      return new vscode.ThemeIcon('circle-slash');
  }
}

export function traceLabel(t: TraceSummary): string {
  const what = t.kind === 'verify' ? (t.command ?? 'verify') : t.name || t.command || t.kind;
  return what.length > 80 ? `${what.slice(0, 77)}...` : what;
}

type TraceRecord = { trace?: { network_log?: unknown; result?: { network?: unknown } } };

/** The kinds whose trace may hold a network log (a sandboxed process ran). */
function hasNetworkLog(t: TraceSummary): boolean {
  return t.kind === 'exec' || t.kind === 'service' || t.kind === 'app' || t.kind === 'schedule';
}

const CHANGE_SIGN = { added: 'A', modified: 'M', deleted: 'D' } as const;
const HOVER_PATHS = 10;

function traceTooltip(t: TraceSummary, changes?: RunChanges | null): vscode.MarkdownString {
  const md = new vscode.MarkdownString();
  md.appendMarkdown(`**${t.kind}** \`${t.trace_id}\` — ${t.status}\n\n`);
  if (t.command) md.appendCodeblock(t.command, 'sh');
  md.appendMarkdown(`\nstarted ${t.started_at}${t.duration_ms != null ? `, ${t.duration_ms} ms` : ''}`);
  if (t.stop_reason && t.stop_reason !== 'exit') md.appendMarkdown(`, stopped: ${t.stop_reason}`);
  const n = changedCount(changes);
  if (changes && n) {
    md.appendMarkdown(`\n\n**${n} changed** (${changes.added} added, ${changes.modified} modified, ${changes.deleted} deleted) — Show Changes of Run compares them\n\n`);
    const paths = changes.paths ?? [];
    for (const p of paths.slice(0, HOVER_PATHS)) md.appendMarkdown(`- ${CHANGE_SIGN[p.change] ?? '?'} \`${p.path}\`\n`);
    const more = n - Math.min(paths.length, HOVER_PATHS);
    if (more > 0) md.appendMarkdown(`- ... ${more} more\n`);
  }
  return md;
}

export class TracesProvider implements vscode.TreeDataProvider<TraceNode> {
  private readonly emitter = new vscode.EventEmitter<TraceNode | undefined | void>();
  readonly onDidChangeTreeData = this.emitter.event;
  /** Extra pages loaded through "Load more" (per parent; '' is the top level). */
  private readonly loaded = new Map<string, { items: TraceSummary[]; cursor?: string }>();
  /** trace_get's changes of finished runs (they do not change once a run ended). */
  private readonly changes = new Map<string, RunChanges | null>();

  constructor(private readonly client: KilnClient) {}

  refresh(): void {
    this.loaded.clear();
    this.emitter.fire();
  }

  getTreeItem(node: TraceNode): vscode.TreeItem {
    if (node.type === 'message') {
      const item = new vscode.TreeItem(node.text, vscode.TreeItemCollapsibleState.None);
      item.iconPath = new vscode.ThemeIcon('info');
      return item;
    }
    if (node.type === 'more') {
      const item = new vscode.TreeItem('Load more...', vscode.TreeItemCollapsibleState.None);
      item.command = { command: 'kiln.loadMoreTraces', title: 'Load more', arguments: [node] };
      return item;
    }
    const t = node.trace;
    const item = new vscode.TreeItem(
      traceLabel(t),
      t.kind === 'verify' && !t.parent_id ? vscode.TreeItemCollapsibleState.Collapsed : vscode.TreeItemCollapsibleState.None,
    );
    item.id = t.trace_id;
    const bits = [t.parent_id ? 'check' : t.kind, t.status];
    if (t.tests && (t.tests.passed || t.tests.failed)) bits.push(`${t.tests.passed ?? 0} passed, ${t.tests.failed ?? 0} failed`);
    else if (typeof t.exit_code === 'number' && t.kind !== 'verify') bits.push(`exit ${t.exit_code}`);
    const changes = this.changesOf(t.trace_id);
    const n = changedCount(changes);
    if (n) bits.push(`${n} changed`);
    bits.push(ago(t.started_at));
    item.description = bits.join(' · ');
    item.iconPath = statusIcon(t);
    // ".changes": the row offers Show Changes of Run and Restore to Before This Run.
    item.contextValue = `kilnTrace.${t.kind}${n ? '.changes' : ''}`;
    // A command's hover also shows its network log, which only trace_get has: resolveTreeItem
    // fills it in when the pointer rests on the row (VS Code resolves only an undefined tooltip).
    if (!hasNetworkLog(t)) item.tooltip = traceTooltip(t, changes);
    // A service's or app's record says little; its output is its log, which is what people open it for.
    item.command =
      t.kind === 'service' || t.kind === 'app'
        ? { command: 'kiln.openTraceOutput', title: 'Open Log', arguments: [t.trace_id] }
        : { command: 'kiln.openTrace', title: 'Open Trace', arguments: [t.trace_id] };
    return item;
  }

  /** On hover: the tooltip with the run's network log (allowlist runs), refusals first. */
  async resolveTreeItem(item: vscode.TreeItem, node: TraceNode, token: vscode.CancellationToken): Promise<vscode.TreeItem> {
    if (node.type !== 'trace' || item.tooltip !== undefined) return item;
    let md = traceTooltip(node.trace, this.changesOf(node.trace.trace_id));
    try {
      const record = await this.client.callTool<TraceRecord>('trace_get', { trace_id: node.trace.trace_id }, { token });
      const changes = (record.trace as { changes?: RunChanges | null } | undefined)?.changes;
      if (changes !== undefined) md = traceTooltip(node.trace, changes);
      const view = traceNetworkView(record);
      if (view) md.appendMarkdown(`\n\n${networkMarkdown(view, node.trace.trace_id)}`);
    } catch {
      // The hover without the network part: Open Trace says what went wrong.
    }
    item.tooltip = md;
    return item;
  }

  async getChildren(node?: TraceNode): Promise<TraceNode[]> {
    if (node && node.type !== 'trace') return [];
    const parent = node?.trace.trace_id;
    if (node && !(node.trace.kind === 'verify' && !node.trace.parent_id)) return [];
    try {
      const key = parent ?? '';
      let page = this.loaded.get(key);
      if (!page) {
        const r = await this.client.callTool<TraceListResult>('trace_list', parent ? { parent, limit: 500 } : { limit: PAGE });
        page = { items: r.traces ?? [], cursor: r.next_cursor || undefined };
        this.loaded.set(key, page);
      }
      await this.fillChanges(page.items);
      const nodes: TraceNode[] = page.items.map((trace) => ({ type: 'trace', trace }));
      if (page.cursor) nodes.push({ type: 'more', cursor: page.cursor, parent });
      return nodes;
    } catch (e) {
      return [{ type: 'message', text: (e as Error).message.split('\n')[0] }];
    }
  }

  /** "Load more...": appends the next page to what the node's level shows. */
  async loadMore(node: TraceNode): Promise<void> {
    if (node.type !== 'more') return;
    const key = node.parent ?? '';
    const args: Record<string, unknown> = { limit: PAGE, cursor: node.cursor };
    if (node.parent) args.parent = node.parent;
    const r = await this.client.callTool<TraceListResult>('trace_list', args);
    const page = this.loaded.get(key) ?? { items: [] };
    await this.fillChanges(r.traces ?? []);
    page.items.push(...(r.traces ?? []));
    page.cursor = r.next_cursor || undefined;
    this.loaded.set(key, page);
    this.emitter.fire();
  }

  /** What a listed run changed, when known (undefined: not a run with checkpoints, or not read yet). */
  changesOf(traceId: string): RunChanges | null | undefined {
    return this.changes.get(traceId);
  }

  /**
   * Reads the changes of finished command runs and verifies that trace_list does not carry: one
   * trace_get each (a few at a time), kept, since a finished run's changes stay as they are.
   */
  async fillChanges(items: TraceSummary[]): Promise<void> {
    const todo: TraceSummary[] = [];
    for (const t of items) {
      if (t.changes !== undefined) this.changes.set(t.trace_id, t.changes);
      else if (hasChanges(t) && t.status !== 'running' && !this.changes.has(t.trace_id)) todo.push(t);
    }
    const worker = async (): Promise<void> => {
      for (let t = todo.shift(); t; t = todo.shift()) {
        try {
          const { trace } = await this.client.callTool<{ trace?: { changes?: RunChanges | null } }>('trace_get', { trace_id: t.trace_id });
          this.changes.set(t.trace_id, trace?.changes ?? null);
        } catch {
          // Shown without the count; Show Changes of Run says what is wrong.
        }
      }
    };
    await Promise.all([worker(), worker(), worker(), worker()]);
  }

  dispose(): void {
    this.emitter.dispose();
  }
}

/** Read-only documents for traces (a content provider's documents cannot be edited or saved). */
export class TraceDocumentProvider implements vscode.TextDocumentContentProvider {
  private readonly emitter = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.emitter.event;
  /** Running traces whose kiln://trace/ID resource we subscribed to (updates reload the document). */
  private readonly subscribed = new Set<string>();

  constructor(private readonly client: KilnClient) {}

  /** A running trace changed (resource update): reload its open documents. */
  update(traceId: string): void {
    this.emitter.fire(traceUri(traceId, 'record'));
    this.emitter.fire(traceUri(traceId, 'output'));
  }

  async provideTextDocumentContent(uri: vscode.Uri, token: vscode.CancellationToken): Promise<string> {
    const parsed = parseTraceUri(uri);
    if (!parsed) return `Not a Kiln trace: ${uri.toString()}`;
    try {
      if (parsed.what === 'record') {
        const record = await this.client.callTool<{ trace?: { status?: string } }>('trace_get', { trace_id: parsed.traceId }, { token });
        if (record.trace?.status === 'running') this.subscribe(parsed.traceId);
        return JSON.stringify(record, null, 2) + '\n';
      }
      this.subscribe(parsed.traceId);
      return await this.outputText(parsed.traceId, token);
    } catch (e) {
      return `Kiln could not read trace ${parsed.traceId}: ${(e as Error).message}\n`;
    }
  }

  /** Asks Kiln for notifications/resources/updated while the trace runs (it grows, then ends). */
  private subscribe(traceId: string): void {
    if (this.subscribed.has(traceId)) return;
    this.subscribed.add(traceId);
    this.client.request('resources/subscribe', { uri: `kiln://trace/${traceId}` }).catch(() => this.subscribed.delete(traceId));
  }

  private async outputText(traceId: string, token: vscode.CancellationToken): Promise<string> {
    let read: OutputReader = (stream, offset) =>
      this.client.callTool<OutputPage>('trace_output', { trace_id: traceId, stream, offset, limit: 131072 }, { token });
    try {
      return await this.pages(traceId, read);
    } catch (e) {
      // Kiln's trace store keeps no output for a service yet (trace_output refuses the kind):
      // while its sandbox lives, the service's run has it (process_output).
      const run = e instanceof KilnToolError ? await this.serviceRun(traceId, token) : undefined;
      if (!run) throw e;
      read = (stream, offset) =>
        this.client.callTool<OutputPage>('process_output', { run_id: run, stream, offset, limit: 131072 }, { token });
      return this.pages(traceId, read);
    }
  }

  /** The run of a live service whose trace this is (trace_get names its sandbox and service). */
  private async serviceRun(traceId: string, token: vscode.CancellationToken): Promise<string | undefined> {
    try {
      const { trace } = await this.client.callTool<{ trace?: { kind?: string; policy?: { sandbox_id?: string; service?: string } } }>(
        'trace_get',
        { trace_id: traceId },
        { token },
      );
      const sandbox = trace?.policy?.sandbox_id;
      if (trace?.kind !== 'service' || !sandbox) return undefined;
      const { services } = await this.client.callTool<{ services?: Array<{ trace_id?: string; run_id?: string }> }>(
        'service_list',
        { sandbox_id: sandbox },
        { token },
      );
      return services?.find((x) => x.trace_id === traceId)?.run_id || undefined;
    } catch {
      return undefined; // the sandbox is gone: the original error says more
    }
  }

  private async pages(traceId: string, read: OutputReader): Promise<string> {
    const parts: string[] = [];
    for (const stream of ['stdout', 'stderr'] as const) {
      let offset = 0;
      let text = '';
      let total = 0;
      for (;;) {
        const page = await read(stream, offset);
        text += page.data ?? '';
        total = page.total_bytes;
        if (page.eof || page.next_offset <= offset) break;
        offset = page.next_offset;
        if (offset >= OUTPUT_DOC_LIMIT) {
          text += `\n[... ${total - offset} more bytes: read them with trace_output ${traceId} offset ${offset}]\n`;
          break;
        }
      }
      parts.push(`=== ${stream} (${total} bytes) ===\n${text}${text.endsWith('\n') || !text ? '' : '\n'}`);
    }
    return parts.join('\n');
  }

  dispose(): void {
    this.emitter.dispose();
  }
}
