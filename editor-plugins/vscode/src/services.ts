// Kiln: Services: the services (kiln.json "services") running in the live sandboxes of this
// editor's Kiln session, as one quick pick (sandbox_list, then service_list for each), with a
// restart (service_restart) and the service's log (its trace's output) for the chosen one.
import * as vscode from 'vscode';

import type { CommandContext } from './commands';
import { openTrace, reportError } from './commands';

export interface ServiceInfo {
  name: string;
  kind: string;
  state: 'starting' | 'ready' | 'failed' | 'stopped' | string;
  url: string;
  port?: number;
  pid?: number | null;
  restarts?: number;
  run_id?: string;
  trace_id?: string;
  database?: string;
  error?: string;
}

/** A service and the sandbox it runs in. */
export interface SandboxService {
  sandbox_id: string;
  service: ServiceInfo;
}

interface DeclaredService {
  name: string;
  kind: string;
  port?: number;
}

/** Every service of every live sandbox this session sees (sandboxes without services add none). */
export async function listServices(ctx: CommandContext): Promise<SandboxService[]> {
  const { sandboxes } = await ctx.client.callTool<{ sandboxes: Array<{ sandbox_id: string }> }>('sandbox_list', {});
  const out: SandboxService[] = [];
  for (const sb of sandboxes ?? []) {
    try {
      const r = await ctx.client.callTool<{ services: ServiceInfo[] }>('service_list', { sandbox_id: sb.sandbox_id });
      for (const service of r.services ?? []) out.push({ sandbox_id: sb.sandbox_id, service });
    } catch (e) {
      // A sandbox destroyed (or reaped when idle) between the two calls has no services to show.
      ctx.log.warn(`service_list ${sb.sandbox_id}: ${(e as Error).message}`);
    }
  }
  return out;
}

function stateIcon(state: string): string {
  switch (state) {
    case 'ready':
      return '$(pass)';
    case 'starting':
      return '$(sync~spin)';
    case 'failed':
      return '$(error)';
    default:
      return '$(circle-slash)';
  }
}

/** One quick pick row: name; kind, state and URL; the error of a failed one, else where it runs. */
function serviceItem(s: SandboxService): vscode.QuickPickItem & { entry: SandboxService } {
  const v = s.service;
  const where = [`sandbox ${s.sandbox_id}`];
  if (typeof v.pid === 'number') where.push(`pid ${v.pid}`);
  if (v.restarts) where.push(`restarted ${v.restarts}×`);
  return {
    label: `${stateIcon(v.state)} ${v.name}`,
    description: `${v.kind} · ${v.state} · ${v.url}`,
    detail: v.error ? `$(warning) ${v.error}` : where.join(' · '),
    entry: s,
  };
}

/** Starts the declared services in a new session sandbox (sandbox_create returns once they are ready). */
async function startServices(ctx: CommandContext): Promise<SandboxService[] | undefined> {
  try {
    const r = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: 'Kiln: starting services', cancellable: true },
      (_progress, token) =>
        ctx.client.callTool<{ sandbox_id: string; services?: ServiceInfo[] }>('sandbox_create', { services: true }, { token }),
    );
    ctx.traces.refresh();
    const list = (r.services ?? []).map((service) => ({ sandbox_id: r.sandbox_id, service }));
    ctx.log.info(`Services started in ${r.sandbox_id}: ${list.map((s) => `${s.service.name} ${s.service.url}`).join(', ')}`);
    return list;
  } catch (e) {
    await reportError(ctx, 'Start Services', e);
    return undefined;
  }
}

async function restartService(ctx: CommandContext, s: SandboxService): Promise<ServiceInfo | undefined> {
  try {
    const r = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Kiln: restarting ${s.service.name}`, cancellable: true },
      (_progress, token) =>
        ctx.client.callTool<{ service: ServiceInfo }>('service_restart', { sandbox_id: s.sandbox_id, name: s.service.name }, { token }),
    );
    const v = r.service;
    ctx.traces.refresh();
    ctx.log.info(`Restarted ${v.name} in ${s.sandbox_id}: ${v.state} ${v.url}${v.error ? ` (${v.error})` : ''}`);
    const logAction = v.trace_id ? ['Open Log'] : [];
    const shown =
      v.state === 'failed'
        ? vscode.window.showErrorMessage(`Kiln: ${v.name} failed after the restart: ${v.error ?? 'see its log'}`, ...logAction)
        : vscode.window.showInformationMessage(`Kiln: ${v.name} restarted: ${v.state} at ${v.url}`, ...logAction);
    void shown.then((choice) => {
      if (choice === 'Open Log' && v.trace_id) void openTrace(v.trace_id, 'output');
    });
    return v;
  } catch (e) {
    await reportError(ctx, 'Restart Service', e);
    return undefined;
  }
}

type Action = vscode.QuickPickItem & { run: () => Thenable<unknown> };

/** What can be done with one service: restart it, open its log, copy its URL. */
async function chooseAction(ctx: CommandContext, s: SandboxService): Promise<unknown> {
  const v = s.service;
  const actions: Action[] = [
    { label: '$(debug-restart) Restart', description: `service_restart ${v.name}`, run: () => restartService(ctx, s) },
  ];
  if (v.trace_id) {
    actions.push({ label: '$(output) Open Log', description: v.trace_id, run: () => openTrace(v.trace_id as string, 'output') });
  }
  actions.push({ label: '$(copy) Copy URL', description: v.url, run: () => vscode.env.clipboard.writeText(v.url) });
  const pick = await vscode.window.showQuickPick(actions, { title: `Kiln: ${v.name} (${v.kind}, ${v.state})`, placeHolder: v.url });
  return pick?.run();
}

/** Kiln: Services. Returns what the user picked (for tests and keybindings that chain). */
export async function showServices(ctx: CommandContext): Promise<SandboxService | undefined> {
  let list: SandboxService[];
  try {
    list = await listServices(ctx);
  } catch (e) {
    await reportError(ctx, 'Services', e);
    return undefined;
  }
  if (!list.length) {
    let declared: DeclaredService[] = [];
    try {
      declared = (await ctx.client.callTool<{ services?: DeclaredService[] }>('workspace_info', {})).services ?? [];
    } catch (e) {
      ctx.log.warn(`workspace_info: ${(e as Error).message}`);
    }
    if (!declared.length) {
      void vscode.window.showInformationMessage('Kiln: no sandbox runs services, and kiln.json declares none (its "services" section).');
      return undefined;
    }
    const names = declared.map((d) => `${d.name} (${d.kind})`).join(', ');
    const choice = await vscode.window.showInformationMessage(`Kiln: no sandbox runs services. kiln.json declares ${names}.`, 'Start Services');
    if (choice !== 'Start Services') return undefined;
    const started = await startServices(ctx);
    if (!started) return undefined;
    list = started;
  }
  const pick = await vscode.window.showQuickPick(list.map(serviceItem), {
    title: 'Kiln: Services',
    placeHolder: 'A service to restart, or to open its log',
    matchOnDescription: true,
  });
  if (!pick) return undefined;
  await chooseAction(ctx, pick.entry);
  return pick.entry;
}
