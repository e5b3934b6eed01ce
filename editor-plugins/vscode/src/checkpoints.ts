// What a run changed, and checkpoints: "Kiln: Show Changes of Run" lists the files a run's trace
// says it changed (checkpoint_diff between its checkpoint_before and checkpoint_after) and opens one
// in VS Code's diff editor; "Kiln: Restore Checkpoint" restores one (dry run and confirmation
// first, the undo id after). The left side of a diff is a read-only kiln-checkpoint: document,
// the file as a checkpoint recorded it: Kiln has no tool that reads a file at a checkpoint, so it
// is the file as it is now with checkpoint_diff {from: CP, path} (CP to now) undone, checked
// against the SHA-256 Kiln gives for the checkpoint's side.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

import * as vscode from 'vscode';

import type { KilnClient } from './client';
import type { CommandContext } from './commands';
import { reportError } from './commands';
import { PatchError, reverseApply } from './patch';
import type { RunChanges, TraceNode, TraceSummary } from './traces';
import { changedCount } from './traces';

export const CHECKPOINT_SCHEME = 'kiln-checkpoint';

export interface DiffChange {
  path: string;
  change: 'added' | 'modified' | 'deleted';
  size_before: number | null;
  size_after: number | null;
  type_before?: string;
  type_after?: string;
  binary?: boolean;
  sha256_before?: string | null;
  sha256_after?: string | null;
  diff: string | null;
  diff_truncated?: boolean;
}

interface DiffResult {
  changes: DiffChange[];
  truncated: boolean;
  next_offset: number | null;
  total?: number;
}

export interface CheckpointInfo {
  checkpoint_id: string;
  label: string;
  trigger: 'manual' | 'exec' | 'verify' | 'restore';
  created_at: string;
  files: number;
  bytes: number;
  trace_id?: string | null;
}

interface RestoreResult {
  checkpoint_id?: string;
  dry_run?: boolean;
  restored: string[];
  deleted: string[];
  checkpoint_before: string | null;
}

/** kiln-checkpoint:/CP/PATH — PATH as the checkpoint CP recorded it. */
export function checkpointUri(checkpointId: string, relPath: string): vscode.Uri {
  return vscode.Uri.from({ scheme: CHECKPOINT_SCHEME, path: `/${checkpointId}/${relPath}` });
}

export function parseCheckpointUri(uri: vscode.Uri): { checkpointId: string; path: string } | undefined {
  const m = /^\/(cp_[A-Za-z0-9_-]+)\/(.+)$/.exec(uri.path);
  return m ? { checkpointId: m[1], path: m[2] } : undefined;
}

const sha256 = (text: string): string => createHash('sha256').update(Buffer.from(text, 'utf8')).digest('hex');

/** The workspace's root folder (where checkpoint paths are relative to). */
export async function workspaceRoot(client: KilnClient): Promise<string> {
  const ws = await client.callTool<{ root: string }>('workspace_info', {});
  return ws.root;
}

/** The file as it is now: text (a link: its target), or undefined when there is none. */
function readNow(root: string, rel: string): string | undefined {
  const file = path.join(root, rel);
  try {
    const st = fs.lstatSync(file);
    if (st.isSymbolicLink()) return fs.readlinkSync(file);
    if (!st.isFile()) return undefined;
    return fs.readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/** Every change from `from` to `to` (default: the files now), all pages; `only` keeps one exact path. */
export async function diffAll(client: KilnClient, from: string, to?: string, only?: string): Promise<DiffChange[]> {
  const out: DiffChange[] = [];
  let offset = 0;
  for (;;) {
    const args: Record<string, unknown> = { from, offset, limit: 500 };
    if (to) args.to = to;
    if (only) args.path = only;
    const r = await client.callTool<DiffResult>('checkpoint_diff', args);
    out.push(...(r.changes ?? []).filter((c) => !only || c.path === only));
    if (!r.truncated || r.next_offset == null || r.next_offset <= offset) return out;
    offset = r.next_offset;
  }
}

export interface CheckpointFile {
  exists: boolean;
  text: string;
}

/**
 * The file `rel` as checkpoint `cp` recorded it: the file now with the diff from cp to now undone,
 * its SHA-256 checked against Kiln's. Throws when that cannot be done (binary, too large, changing).
 */
export async function fileAtCheckpoint(client: KilnClient, root: string, cp: string, rel: string): Promise<CheckpointFile> {
  let last = '';
  for (let attempt = 0; attempt < 3; attempt++) {
    const now = readNow(root, rel);
    const [c] = await diffAll(client, cp, undefined, rel);
    if (!c) {
      // Unchanged since the checkpoint (or never there and still not there).
      if (readNow(root, rel) !== now) continue;
      return { exists: now !== undefined, text: now ?? '' };
    }
    if (c.change === 'added') return { exists: false, text: '' }; // not in the checkpoint
    if (c.binary || c.diff === null) throw new Error(`${rel} is binary or over 1 MiB: Kiln compares it by size and SHA-256 only (${c.sha256_before ?? '?'})`);
    if (c.diff_truncated) throw new Error(`the diff of ${rel} is too large to show`);
    if (c.sha256_after && now !== undefined && sha256(now) !== c.sha256_after) {
      last = `${rel} changed while it was read`;
      continue;
    }
    try {
      const text = reverseApply(now ?? '', c.diff);
      if (c.sha256_before && c.type_before !== 'symlink' && sha256(text) !== c.sha256_before) {
        last = `the reconstructed ${rel} does not match the checkpoint's SHA-256`;
        continue;
      }
      return { exists: true, text };
    } catch (e) {
      if (!(e instanceof PatchError)) throw e;
      last = e.message;
    }
  }
  throw new Error(`cannot show ${rel} as ${cp} had it: ${last}`);
}

/** Read-only documents kiln-checkpoint:/CP/PATH. */
export class CheckpointDocumentProvider implements vscode.TextDocumentContentProvider {
  constructor(private readonly client: KilnClient) {}

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const p = parseCheckpointUri(uri);
    if (!p) return `Not a Kiln checkpoint file: ${uri.toString()}`;
    try {
      const root = await workspaceRoot(this.client);
      return (await fileAtCheckpoint(this.client, root, p.checkpointId, p.path)).text;
    } catch (e) {
      return `Kiln could not read ${p.path} at ${p.checkpointId}: ${(e as Error).message}\n`;
    }
  }
}

// ---- Show Changes of Run --------------------------------------------------------------------

const ICON: Record<DiffChange['change'], string> = { added: '$(diff-added)', modified: '$(diff-modified)', deleted: '$(diff-removed)' };

function sizeText(n: number | null | undefined): string {
  if (n == null) return '-';
  if (n < 1024) return `${n} B`;
  if (n < 1048576) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1048576).toFixed(1)} MiB`;
}

export function changeDescription(c: DiffChange): string {
  const sizes = c.change === 'added' ? sizeText(c.size_after) : c.change === 'deleted' ? sizeText(c.size_before) : `${sizeText(c.size_before)} → ${sizeText(c.size_after)}`;
  return `${c.change} · ${sizes}${c.binary ? ' · binary' : ''}`;
}

async function traceChanges(ctx: CommandContext, traceId: string): Promise<RunChanges | undefined> {
  const { trace } = await ctx.client.callTool<{ trace?: { changes?: RunChanges | null } }>('trace_get', { trace_id: traceId });
  return trace?.changes ?? undefined;
}

/** Recent runs that changed files, for the palette's Show Changes of Run without a trace. */
async function pickRun(ctx: CommandContext): Promise<string | undefined> {
  const { traces } = await ctx.client.callTool<{ traces: TraceSummary[] }>('trace_list', { limit: 30 });
  const runs = (traces ?? []).filter((t) => (t.kind === 'exec' || t.kind === 'verify') && !t.parent_id);
  await ctx.traces.fillChanges(runs);
  type Pick = vscode.QuickPickItem & { traceId: string };
  const items: Pick[] = [];
  for (const t of runs) {
    const c = ctx.traces.changesOf(t.trace_id);
    if (!c || !changedCount(c)) continue;
    items.push({ label: t.command || t.name || t.kind, description: `${changedCount(c)} changed · ${t.trace_id}`, detail: t.started_at, traceId: t.trace_id });
  }
  if (!items.length) {
    void vscode.window.showInformationMessage('Kiln: none of the recent runs changed a file');
    return undefined;
  }
  return (await vscode.window.showQuickPick(items, { title: 'Kiln: Show Changes of Run', placeHolder: 'A run that changed files' }))?.traceId;
}

export interface ShownChange {
  traceId: string;
  change: DiffChange;
  left?: vscode.Uri;
  right?: vscode.Uri;
}

/**
 * Lists what run `arg` (a trace id or a Traces view item; asked for when missing) changed and
 * opens the picked file in the diff editor: the file before the run on the left; on the right the
 * file itself when it is still as the run left it, else the run's version (read-only).
 */
export async function showRunChanges(ctx: CommandContext, arg?: string | TraceNode): Promise<ShownChange | undefined> {
  try {
    const traceId = typeof arg === 'string' ? arg : arg?.type === 'trace' ? arg.trace.trace_id : await pickRun(ctx);
    if (!traceId) return undefined;
    const changes = await traceChanges(ctx, traceId);
    if (!changes?.checkpoint_before || !changes.checkpoint_after) {
      void vscode.window.showInformationMessage(`Kiln: run ${traceId} has no checkpoints (kiln.json "checkpoints": {"auto": false}, or it is not a command or verify)`);
      return undefined;
    }
    const list = changedCount(changes) ? await diffAll(ctx.client, changes.checkpoint_before, changes.checkpoint_after) : [];
    if (!list.length) {
      void vscode.window.showInformationMessage(`Kiln: run ${traceId} changed no files`);
      return undefined;
    }
    type Pick = vscode.QuickPickItem & { change: DiffChange };
    const items: Pick[] = list.map((c) => ({ label: `${ICON[c.change]} ${c.path}`, description: changeDescription(c), change: c }));
    const pick = await vscode.window.showQuickPick(items, {
      title: `Kiln: ${list.length} file${list.length === 1 ? '' : 's'} changed by ${traceId}`,
      placeHolder: 'A file to compare before and after the run',
      matchOnDescription: true,
    });
    if (!pick) return undefined;
    const c = pick.change;
    if (c.binary || c.diff === null) {
      void vscode.window.showInformationMessage(
        `Kiln: ${c.path} is binary or over 1 MiB (${changeDescription(c)}; SHA-256 ${c.sha256_before?.slice(0, 12) ?? '-'} → ${c.sha256_after?.slice(0, 12) ?? '-'})`,
      );
      return { traceId, change: c };
    }
    const left = checkpointUri(changes.checkpoint_before, c.path);
    let right = checkpointUri(changes.checkpoint_after, c.path);
    try {
      // Still as the run left it: the real file on the right, so it can be edited there.
      if (c.change !== 'deleted' && !(await diffAll(ctx.client, changes.checkpoint_after, undefined, c.path)).length) {
        right = vscode.Uri.file(path.join(await workspaceRoot(ctx.client), c.path));
      }
    } catch (e) {
      ctx.log.warn(`checkpoint_diff ${changes.checkpoint_after} ${c.path}: ${(e as Error).message}`);
    }
    const title = `${path.basename(c.path)} (${c.change} by ${traceId}: before ↔ after)`;
    await vscode.commands.executeCommand('vscode.diff', left, right, title, { preview: true });
    return { traceId, change: c, left, right };
  } catch (e) {
    await reportError(ctx, 'Show Changes of Run', e);
    return undefined;
  }
}

// ---- Restore Checkpoint ---------------------------------------------------------------------

function listSome(paths: string[], n = 5): string {
  return paths.length <= n ? paths.join(', ') : `${paths.slice(0, n).join(', ')} and ${paths.length - n} more`;
}

async function pickCheckpoint(ctx: CommandContext): Promise<string | undefined> {
  const { checkpoints } = await ctx.client.callTool<{ checkpoints: CheckpointInfo[] }>('checkpoint_list', { limit: 100 });
  if (!checkpoints?.length) {
    void vscode.window.showInformationMessage('Kiln: no checkpoints yet (every command run and verify makes them)');
    return undefined;
  }
  type Pick = vscode.QuickPickItem & { id: string };
  const items: Pick[] = checkpoints.map((c) => ({
    label: `${c.trigger === 'manual' ? '$(bookmark)' : c.trigger === 'restore' ? '$(discard)' : '$(history)'} ${c.label || c.checkpoint_id}`,
    description: `${c.trigger} · ${c.created_at.replace('T', ' ').replace(/\.\d+Z$/, 'Z')} · ${c.files} files`,
    detail: `${c.checkpoint_id}${c.trace_id ? ` · run ${c.trace_id}` : ''}`,
    id: c.checkpoint_id,
  }));
  const pick = await vscode.window.showQuickPick(items, { title: 'Kiln: Restore Checkpoint', placeHolder: 'The checkpoint to make the workspace like (newest first)', matchOnDetail: true });
  return pick?.id;
}

/**
 * Restores a checkpoint (picked from checkpoint_list when not given; a Traces view item means the
 * state before that run): a dry run first, a modal confirmation with what it would restore and
 * delete, then the restore, and the checkpoint that undoes it.
 */
export async function restoreCheckpoint(ctx: CommandContext, arg?: string | TraceNode): Promise<RestoreResult | undefined> {
  try {
    let id: string | undefined;
    let what = '';
    if (typeof arg === 'string') id = arg;
    else if (arg?.type === 'trace') {
      id = (await traceChanges(ctx, arg.trace.trace_id))?.checkpoint_before;
      what = ` (before run ${arg.trace.trace_id})`;
      if (!id) {
        void vscode.window.showInformationMessage(`Kiln: run ${arg.trace.trace_id} has no checkpoint to restore`);
        return undefined;
      }
    } else id = await pickCheckpoint(ctx);
    if (!id) return undefined;
    const dry = await ctx.client.callTool<RestoreResult>('checkpoint_restore', { checkpoint_id: id, dry_run: true });
    if (!dry.restored.length && !dry.deleted.length) {
      void vscode.window.showInformationMessage(`Kiln: the files already are as ${id} recorded them: nothing to restore`);
      return dry;
    }
    const parts: string[] = [];
    if (dry.restored.length) parts.push(`${dry.restored.length} restored (${listSome(dry.restored)})`);
    if (dry.deleted.length) parts.push(`${dry.deleted.length} deleted (${listSome(dry.deleted)})`);
    const choice = await vscode.window.showWarningMessage(
      `Restore checkpoint ${id}${what}?`,
      { modal: true, detail: `Files: ${parts.join('; ')}. Kiln records the files as they are now first, so this can be undone.` },
      'Restore',
    );
    if (choice !== 'Restore') return undefined;
    const r = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Kiln: restoring ${id}` },
      () => ctx.client.callTool<RestoreResult>('checkpoint_restore', { checkpoint_id: id }),
    );
    ctx.traces.refresh();
    const undo = r.checkpoint_before;
    ctx.log.info(`Restored ${id}: ${r.restored.length} restored, ${r.deleted.length} deleted; undo with checkpoint ${undo}`);
    void vscode.window
      .showInformationMessage(
        `Kiln: restored ${id}: ${r.restored.length} file${r.restored.length === 1 ? '' : 's'} restored, ${r.deleted.length} deleted. Undo: checkpoint ${undo}`,
        'Undo',
        'Copy Undo Id',
      )
      .then((c) => {
        if (c === 'Undo' && undo) void vscode.commands.executeCommand('kiln.restoreCheckpoint', undo);
        if (c === 'Copy Undo Id' && undo) void vscode.env.clipboard.writeText(undo);
      });
    return r;
  } catch (e) {
    await reportError(ctx, 'Restore Checkpoint', e);
    return undefined;
  }
}
