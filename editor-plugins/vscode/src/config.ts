// The extension's settings and how they turn into a `kiln mcp` command line, shared by the editor's
// own connection and the MCP server definition handed to VS Code's agent, so both start the same server.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import * as vscode from 'vscode';

export type TraceSetting = 'off' | 'messages' | 'verbose';

export interface Settings {
  /** `kiln.server.path` as written (default "kiln"). */
  serverPath: string;
  /** `kiln.server.extraArgs`: arguments after `kiln mcp`. */
  extraArgs: string[];
  /** `kiln.trace.server`. */
  trace: TraceSetting;
}

export function readSettings(): Settings {
  const c = vscode.workspace.getConfiguration('kiln');
  const serverPath = (c.get<string>('server.path') ?? '').trim() || 'kiln';
  const rawArgs = c.get<unknown>('server.extraArgs');
  const extraArgs = Array.isArray(rawArgs) ? rawArgs.filter((a): a is string => typeof a === 'string') : [];
  const t = c.get<string>('trace.server');
  const trace: TraceSetting = t === 'messages' || t === 'verbose' ? t : 'off';
  return { serverPath, extraArgs, trace };
}

/** The first folder of the VS Code window: Kiln's workspace unless the user opens another. */
export function firstFolder(): vscode.WorkspaceFolder | undefined {
  return vscode.workspace.workspaceFolders?.[0];
}

/** Expands `~` and `${workspaceFolder}`; a relative path with a slash is taken from the first folder. */
export function expandServerPath(setting: string, folder: string | undefined): string {
  let p = setting.replace(/\$\{workspaceFolder\}/g, folder ?? '');
  if (p === '~' || p.startsWith('~/')) p = path.join(os.homedir(), p.slice(1));
  if (p.includes('/') && !path.isAbsolute(p) && folder) p = path.join(folder, p);
  return p;
}

/** Where the command would be found: itself when it has a slash, else the first match on PATH. */
export function locateExecutable(command: string, envPath = process.env.PATH ?? ''): string | undefined {
  const isExec = (p: string): boolean => {
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return fs.statSync(p).isFile();
    } catch {
      return false;
    }
  };
  if (command.includes('/')) return isExec(command) ? command : undefined;
  for (const dir of envPath.split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, command);
    if (isExec(candidate)) return candidate;
  }
  return undefined;
}

function hasOption(args: readonly string[], name: string): boolean {
  return args.some((a) => a === name || a.startsWith(`${name}=`));
}

/**
 * `mcp`, then `--workspace FOLDER` (a fallback for clients without roots; VS Code and the
 * extension both offer roots) unless the user's arguments already choose one, then the user's
 * arguments, then `extra` options the user did not set themselves.
 */
export function serverArgs(settings: Settings, folder: string | undefined, extra: Record<string, string> = {}): string[] {
  const args = ['mcp'];
  if (folder && !hasOption(settings.extraArgs, '--workspace')) args.push('--workspace', folder);
  args.push(...settings.extraArgs);
  for (const [name, value] of Object.entries(extra)) {
    if (!hasOption(settings.extraArgs, name)) args.push(name, value);
  }
  return args;
}
