// Kiln as an MCP server for VS Code's own agent (chat): a server definition provider that hands
// VS Code the same `kiln mcp` command line the extension uses, so VS Code starts and speaks to
// it directly. Needs VS Code 1.101 (the final MCP API); older editors skip it and keep the rest.
import { execFile } from 'node:child_process';

import * as vscode from 'vscode';

import { expandServerPath, firstFolder, locateExecutable, readSettings, serverArgs } from './config';

/** Must equal contributes.mcpServerDefinitionProviders[0].id in package.json. */
export const MCP_PROVIDER_ID = 'kiln.mcpServers';
export const SERVER_LABEL = 'Kiln';

/** `kiln --version` ("kiln 0.1.0") as "0.1.0", or undefined when it cannot be run. */
export function kilnVersion(command: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile(command, ['--version'], { timeout: 5000 }, (error, stdout) => {
      if (error) return resolve(undefined);
      const m = /(\d+\.\d+\.\d+\S*)/.exec(String(stdout));
      resolve(m ? m[1] : String(stdout).trim() || undefined);
    });
  });
}

export class KilnMcpServerProvider implements vscode.McpServerDefinitionProvider<vscode.McpStdioServerDefinition> {
  private readonly emitter = new vscode.EventEmitter<void>();
  readonly onDidChangeMcpServerDefinitions = this.emitter.event;

  /** Settings or folders changed: VS Code asks for the definitions again. */
  refresh(): void {
    this.emitter.fire();
  }

  async provideMcpServerDefinitions(): Promise<vscode.McpStdioServerDefinition[]> {
    const settings = readSettings();
    const folder = firstFolder();
    const folderPath = folder?.uri.fsPath;
    const command = expandServerPath(settings.serverPath, folderPath);
    const args = serverArgs(settings, folderPath);
    // The version lets VS Code notice a new kiln (it then offers to refresh the cached tools).
    const located = locateExecutable(command);
    const version = located ? await kilnVersion(located) : undefined;
    const def = new vscode.McpStdioServerDefinition(SERVER_LABEL, command, args, {}, version);
    if (folder) def.cwd = folder.uri;
    return [def];
  }

  /** Called when VS Code is about to start the server: refuse with a clear message if kiln is missing. */
  async resolveMcpServerDefinition(
    def: vscode.McpStdioServerDefinition,
  ): Promise<vscode.McpStdioServerDefinition | undefined> {
    if (locateExecutable(def.command)) return def;
    const choice = await vscode.window.showErrorMessage(
      `Kiln: cannot start the MCP server, "${def.command}" was not found. Set "kiln.server.path" to the kiln binary.`,
      'Open Settings',
    );
    if (choice === 'Open Settings') {
      void vscode.commands.executeCommand('workbench.action.openSettings', 'kiln.server.path');
    }
    return undefined;
  }

  dispose(): void {
    this.emitter.dispose();
  }
}

/**
 * Registers the provider where the MCP API exists; returns what happened so activation can log it.
 * An older VS Code (no vscode.lm.registerMcpServerDefinitionProvider, or one that throws because it
 * expects the pre-final contribution) still gets every other feature.
 */
export function registerMcpProvider(
  provider: KilnMcpServerProvider,
): { disposable?: vscode.Disposable; error?: string } {
  const lm = (vscode as { lm?: Partial<typeof vscode.lm> }).lm;
  if (!lm || typeof lm.registerMcpServerDefinitionProvider !== 'function') {
    return { error: `this VS Code (${vscode.version}) has no MCP server API (needs 1.101 or newer)` };
  }
  if (typeof (vscode as { McpStdioServerDefinition?: unknown }).McpStdioServerDefinition !== 'function') {
    return { error: `this VS Code (${vscode.version}) has no McpStdioServerDefinition (needs 1.101 or newer)` };
  }
  try {
    return { disposable: lm.registerMcpServerDefinitionProvider(MCP_PROVIDER_ID, provider) };
  } catch (e) {
    return { error: `registering the MCP server provider failed: ${(e as Error).message}` };
  }
}
