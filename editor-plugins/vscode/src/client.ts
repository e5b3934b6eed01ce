// The extension's own MCP connection to `kiln mcp` (for its commands, tree and Problems), built the
// way vscode-languageclient builds an LSP client: vscode-jsonrpc over the child's stdio (NDJSON
// framing here), lazy start, protocol tracing into the log, stderr into the log, restart after a
// crash (at most 4 times in 3 minutes), graceful stop (close stdin, then SIGTERM, then SIGKILL).
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import * as os from 'node:os';

import * as vscode from 'vscode';
import { createMessageConnection, Trace, TraceFormat } from 'vscode-jsonrpc/node';
import type { CancellationStrategy, Logger, MessageConnection } from 'vscode-jsonrpc/node';
import { CancellationReceiverStrategy } from 'vscode-jsonrpc/node';

import { expandServerPath, serverArgs } from './config';
import type { Settings } from './config';
import { NdjsonMessageReader, NdjsonMessageWriter } from './ndjson';

export const PROTOCOL_VERSION = '2025-11-25';
/** Crashes tolerated within CRASH_WINDOW_MS before the client stops restarting the server. */
export const MAX_RESTARTS = 4;
export const CRASH_WINDOW_MS = 3 * 60 * 1000;
const INITIALIZE_TIMEOUT_MS = 30_000;
const STOP_GRACE_MS = 2_000;

export type ClientState = 'stopped' | 'starting' | 'running' | 'failed';

export interface ToolProgress {
  progress: number;
  total?: number;
  message?: string;
}

export interface CallOptions {
  token?: vscode.CancellationToken;
  onProgress?: (p: ToolProgress) => void;
}

export interface McpRoot {
  uri: string;
  name: string;
}

export interface ClientOptions {
  log: vscode.LogOutputChannel;
  clientName: string;
  clientVersion: string;
  settings: () => Settings;
  /** The folder the server starts in and opens when roots are not used. */
  folder: () => string | undefined;
  roots: () => McpRoot[];
}

/** A tool answered with `isError: true`: the message is the tool's own text, meant for people. */
export class KilnToolError extends Error {
  constructor(
    readonly tool: string,
    message: string,
  ) {
    super(message);
    this.name = 'KilnToolError';
  }
}

/** The user cancelled the call (the server was told with notifications/cancelled). */
export class KilnCancelledError extends Error {
  constructor() {
    super('Cancelled');
    this.name = 'KilnCancelledError';
  }
}

interface ToolResult {
  content?: Array<{ type: string; text?: string }>;
  structuredContent?: unknown;
  isError?: boolean;
}

function textOf(result: ToolResult): string {
  return (result.content ?? [])
    .filter((c) => c.type === 'text' && typeof c.text === 'string')
    .map((c) => c.text)
    .join('\n')
    .trim();
}

/** VS Code's log levels (vscode.LogLevel) as MCP's logging levels. */
export function mcpLogLevel(level: vscode.LogLevel): string {
  switch (level) {
    case vscode.LogLevel.Trace:
    case vscode.LogLevel.Debug:
      return 'debug';
    case vscode.LogLevel.Info:
      return 'info';
    case vscode.LogLevel.Warning:
      return 'warning';
    case vscode.LogLevel.Error:
      return 'error';
    default:
      return 'emergency';
  }
}

function traceOf(setting: Settings['trace']): Trace {
  return setting === 'verbose' ? Trace.Verbose : setting === 'messages' ? Trace.Messages : Trace.Off;
}

const STDERR_LINE = /^kiln \S+ (trace|debug|info|warning|warn|error|critical): (.*)$/;

export class KilnClient implements vscode.Disposable {
  private child: ChildProcess | undefined;
  private connection: MessageConnection | undefined;
  private starting: Promise<void> | undefined;
  private stopping = false;
  private _state: ClientState = 'stopped';
  private crashes: number[] = [];
  private progressSeq = 0;
  private readonly progressHandlers = new Map<string, (p: ToolProgress) => void>();
  private readonly stateEmitter = new vscode.EventEmitter<ClientState>();
  private readonly resourceEmitter = new vscode.EventEmitter<string>();
  private readonly disposables: vscode.Disposable[] = [];
  private addedLogLevel = false;
  private stderrTail: string[] = [];
  serverInfo: { name?: string; version?: string } | undefined;
  instructions: string | undefined;

  /** Fires on every state change. */
  readonly onDidChangeState = this.stateEmitter.event;
  /** Fires with the URI of a subscribed resource the server reports as updated. */
  readonly onDidUpdateResource = this.resourceEmitter.event;

  constructor(private readonly opts: ClientOptions) {
    this.disposables.push(
      this.stateEmitter,
      this.resourceEmitter,
      opts.log.onDidChangeLogLevel(() => void this.sendLogLevel()),
    );
  }

  get state(): ClientState {
    return this._state;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  private setState(s: ClientState): void {
    if (s === this._state) return;
    this._state = s;
    this.stateEmitter.fire(s);
  }

  /** Starts the server unless it runs; concurrent callers share one start. */
  start(): Promise<void> {
    if (this._state === 'running' && this.connection) return Promise.resolve();
    if (!this.starting) {
      this.starting = this.doStart().finally(() => {
        this.starting = undefined;
      });
    }
    return this.starting;
  }

  private async doStart(): Promise<void> {
    const log = this.opts.log;
    this.setState('starting');
    const settings = this.opts.settings();
    const folder = this.opts.folder();
    const command = expandServerPath(settings.serverPath, folder);
    // stderr carries errors (and crashes); everything else comes as notifications/message at the
    // level the log is set to, so nothing appears twice.
    const args = serverArgs(settings, folder, { '--log-level': 'error' });
    this.addedLogLevel = !settings.extraArgs.some((a) => a === '--log-level' || a.startsWith('--log-level='));
    log.info(`Starting the Kiln server: ${command} ${args.join(' ')}`);
    this.stderrTail = [];

    const child = spawn(command, args, {
      cwd: folder ?? os.homedir(),
      env: process.env,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    try {
      await new Promise<void>((resolve, reject) => {
        child.once('spawn', resolve);
        child.once('error', reject);
      });
    } catch (e) {
      this.setState('failed');
      const err = e as NodeJS.ErrnoException;
      const why = err.code === 'ENOENT' ? 'not found' : err.message;
      throw new Error(
        `cannot start the Kiln server "${command}": ${why}. Set "kiln.server.path" to the kiln binary (kiln-sandbox must be next to it).`,
      );
    }
    this.child = child;
    child.stdin.on('error', () => {}); // EPIPE after the server died: reported through 'exit'
    this.pipeStderr(child);

    const logger: Logger = {
      error: (m) => log.error(m),
      warn: (m) => log.warn(m),
      info: (m) => log.info(m),
      log: (m) => log.debug(m),
    };
    const cancellationStrategy: CancellationStrategy = {
      receiver: CancellationReceiverStrategy.Message,
      sender: {
        // MCP cancels with notifications/cancelled, not LSP's $/cancelRequest.
        sendCancellation: (conn, id) =>
          conn.sendNotification('notifications/cancelled', { requestId: id, reason: 'Cancelled in VS Code' }),
        cleanup: () => {},
      },
    };
    const conn = createMessageConnection(
      new NdjsonMessageReader(child.stdout),
      new NdjsonMessageWriter(child.stdin),
      logger,
      { cancellationStrategy },
    );
    this.connection = conn;
    conn.onRequest('roots/list', () => ({ roots: this.opts.roots() }));
    conn.onRequest('ping', () => ({}));
    conn.onNotification('notifications/progress', (p: { progressToken?: string | number } & ToolProgress) => {
      const handler = p && p.progressToken !== undefined ? this.progressHandlers.get(String(p.progressToken)) : undefined;
      handler?.({ progress: p.progress, total: p.total, message: p.message });
    });
    conn.onNotification('notifications/message', (p: { level?: string; logger?: string; data?: unknown }) =>
      this.logServerMessage(p),
    );
    conn.onNotification('notifications/resources/updated', (p: { uri?: string }) => {
      if (p && typeof p.uri === 'string') this.resourceEmitter.fire(p.uri);
    });
    conn.onError(([error]) => log.error(`Kiln connection: ${error.message}`));
    child.on('exit', (code, signal) => this.onExit(child, conn, code, signal));
    conn.listen();
    await this.applyTrace(settings);

    try {
      const init = await withTimeout(
        conn.sendRequest<{
          protocolVersion?: string;
          serverInfo?: { name?: string; version?: string };
          instructions?: string;
        }>('initialize', {
          protocolVersion: PROTOCOL_VERSION,
          capabilities: { roots: { listChanged: true } },
          clientInfo: { name: this.opts.clientName, version: this.opts.clientVersion },
        }),
        INITIALIZE_TIMEOUT_MS,
        'the Kiln server did not answer initialize',
      );
      this.serverInfo = init.serverInfo;
      this.instructions = init.instructions;
      await conn.sendNotification('notifications/initialized');
      log.info(
        `Kiln server ${init.serverInfo?.name ?? 'kiln'} ${init.serverInfo?.version ?? ''} running (pid ${child.pid}, MCP ${init.protocolVersion})`,
      );
    } catch (e) {
      this.stopping = true;
      child.kill('SIGKILL');
      this.setState('failed');
      const tail = this.stderrTail.join('\n');
      throw new Error(`the Kiln server failed to start: ${(e as Error).message}${tail ? `\n${tail}` : ''}`);
    }
    this.setState('running');
    await this.sendLogLevel();
  }

  private pipeStderr(child: ChildProcess): void {
    let buf = '';
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      buf += chunk;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        this.logStderr(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
      }
    });
    child.stderr?.on('end', () => {
      if (buf) this.logStderr(buf);
      buf = '';
    });
  }

  private logStderr(line: string): void {
    if (!line.trim()) return;
    this.stderrTail.push(line);
    if (this.stderrTail.length > 20) this.stderrTail.shift();
    const log = this.opts.log;
    const m = STDERR_LINE.exec(line);
    if (!m) return log.warn(`[kiln] ${line}`);
    const [, level, text] = m;
    if (level === 'trace' || level === 'debug') log.debug(`[kiln] ${text}`);
    else if (level === 'info') log.info(`[kiln] ${text}`);
    else if (level === 'warning' || level === 'warn') log.warn(`[kiln] ${text}`);
    else log.error(`[kiln] ${text}`);
  }

  private logServerMessage(p: { level?: string; logger?: string; data?: unknown }): void {
    const log = this.opts.log;
    const level = p?.level ?? 'info';
    const serious = ['error', 'critical', 'alert', 'emergency'].includes(level);
    if (serious && this.addedLogLevel) return; // already on stderr
    const data = typeof p?.data === 'string' ? p.data : JSON.stringify(p?.data);
    const text = `[kiln${p?.logger ? `/${p.logger}` : ''}] ${data}`;
    if (level === 'debug') log.debug(text);
    else if (level === 'info' || level === 'notice') log.info(text);
    else if (level === 'warning') log.warn(text);
    else log.error(text);
  }

  private async sendLogLevel(): Promise<void> {
    if (this._state !== 'running' || !this.connection) return;
    try {
      await this.connection.sendRequest('logging/setLevel', { level: mcpLogLevel(this.opts.log.logLevel) });
    } catch (e) {
      this.opts.log.warn(`logging/setLevel: ${(e as Error).message}`);
    }
  }

  private async applyTrace(settings: Settings): Promise<void> {
    if (!this.connection) return;
    const log = this.opts.log;
    await this.connection.trace(
      traceOf(settings.trace),
      {
        log: (message: unknown, data?: string) => {
          const text = typeof message === 'string' ? message : JSON.stringify(message);
          log.info(data ? `${text}\n${data}` : text);
        },
      },
      { sendNotification: false, traceFormat: TraceFormat.Text },
    );
  }

  /** Applies a changed `kiln.trace.server` to the running connection. */
  async updateTrace(): Promise<void> {
    await this.applyTrace(this.opts.settings());
  }

  private onExit(child: ChildProcess, conn: MessageConnection, code: number | null, signal: NodeJS.Signals | null): void {
    if (this.child !== child) return;
    this.child = undefined;
    this.connection = undefined;
    conn.dispose(); // rejects every pending request
    const how = signal ? `signal ${signal}` : `code ${code}`;
    if (this.stopping) {
      this.stopping = false;
      this.opts.log.info(`Kiln server stopped (${how})`);
      if (this._state !== 'failed') this.setState('stopped');
      return;
    }
    const wasRunning = this._state === 'running';
    this.opts.log.error(`The Kiln server exited unexpectedly (${how})`);
    if (!wasRunning) {
      this.setState('failed');
      return;
    }
    const now = Date.now();
    this.crashes = this.crashes.filter((t) => now - t < CRASH_WINDOW_MS);
    this.crashes.push(now);
    if (this.crashes.length > MAX_RESTARTS) {
      this.setState('failed');
      void vscode.window
        .showErrorMessage(
          `The Kiln server crashed ${this.crashes.length} times in the last 3 minutes. It will not be restarted.`,
          'Show Log',
          'Restart',
        )
        .then((choice) => {
          if (choice === 'Show Log') this.opts.log.show();
          if (choice === 'Restart') void this.restart().catch((e) => this.opts.log.error(String(e)));
        });
      return;
    }
    this.setState('stopped');
    this.opts.log.info(`Restarting the Kiln server (${this.crashes.length} of ${MAX_RESTARTS} restarts)`);
    this.start().catch((e) => this.opts.log.error(`Restart failed: ${(e as Error).message}`));
  }

  /** Stops the server: close stdin (kiln exits at EOF), then SIGTERM, then SIGKILL. */
  async stop(): Promise<void> {
    if (this.starting) await this.starting.catch(() => {});
    const child = this.child;
    if (!child) {
      if (this._state !== 'failed') this.setState('stopped');
      return;
    }
    this.stopping = true;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const within = (ms: number) => Promise.race([exited.then(() => true), sleep(ms).then(() => false)]);
    child.stdin?.end();
    if (!(await within(STOP_GRACE_MS))) {
      child.kill('SIGTERM');
      if (!(await within(STOP_GRACE_MS))) {
        child.kill('SIGKILL');
        await within(STOP_GRACE_MS);
      }
    }
    this.setState('stopped');
  }

  /** Stops and starts again; also clears the crash count, as a user-requested restart should. */
  async restart(): Promise<void> {
    await this.stop();
    this.crashes = [];
    await this.start();
  }

  /** Tells the server the workspace folders changed (it asks roots/list again). */
  notifyRootsChanged(): void {
    if (this._state === 'running' && this.connection) {
      void this.connection.sendNotification('notifications/roots/list_changed').catch(() => {});
    }
  }

  /** A raw MCP request (starting the server if needed); a cancelled token rejects at once. */
  async request<T>(method: string, params: object | undefined, token?: vscode.CancellationToken): Promise<T> {
    await this.start();
    const conn = this.connection;
    if (!conn) throw new Error('the Kiln server is not running');
    if (token?.isCancellationRequested) throw new KilnCancelledError();
    return new Promise<T>((resolve, reject) => {
      // MCP servers send no response to a cancelled request, so the call ends here.
      const sub = token?.onCancellationRequested(() => reject(new KilnCancelledError()));
      const p = token ? conn.sendRequest<T>(method, params, token) : conn.sendRequest<T>(method, params);
      p.then(resolve, (e: Error) => reject(new Error(e.message))).finally(() => sub?.dispose());
    });
  }

  /** Calls a tool and returns its structuredContent; `isError` results throw KilnToolError. */
  async callTool<T = Record<string, unknown>>(name: string, args: object = {}, opts: CallOptions = {}): Promise<T> {
    const params: { name: string; arguments: object; _meta?: { progressToken: string } } = { name, arguments: args };
    let progressToken: string | undefined;
    if (opts.onProgress) {
      progressToken = `vscode-${++this.progressSeq}`;
      this.progressHandlers.set(progressToken, opts.onProgress);
      params._meta = { progressToken };
    }
    try {
      const result = await this.request<ToolResult>('tools/call', params, opts.token);
      if (result.isError) throw new KilnToolError(name, textOf(result) || `${name} failed`);
      if (result.structuredContent !== undefined) return result.structuredContent as T;
      const text = textOf(result);
      try {
        return JSON.parse(text) as T;
      } catch {
        return { text } as T;
      }
    } finally {
      if (progressToken) this.progressHandlers.delete(progressToken);
    }
  }

  dispose(): void {
    void this.stop();
    for (const d of this.disposables) d.dispose();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${what} within ${ms / 1000} s`)), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e) => {
        clearTimeout(t);
        reject(e);
      },
    );
  });
}
