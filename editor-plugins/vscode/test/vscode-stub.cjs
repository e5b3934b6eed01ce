// A stand-in for the `vscode` module, enough of it for the extension to activate and run its
// commands under plain Node: it records what the extension registers and shows, answers prompts
// from queues the test fills, and lets a test cancel a progress notification.
'use strict';

const path = require('node:path');

class Disposable {
  constructor(fn) {
    this._fn = fn;
  }
  static from(...items) {
    return new Disposable(() => items.forEach((d) => d && d.dispose && d.dispose()));
  }
  dispose() {
    if (this._fn) this._fn();
    this._fn = undefined;
  }
}

class EventEmitter {
  constructor() {
    this._listeners = new Set();
    this.event = (listener, thisArg, disposables) => {
      const fn = thisArg ? listener.bind(thisArg) : listener;
      this._listeners.add(fn);
      const d = new Disposable(() => this._listeners.delete(fn));
      if (Array.isArray(disposables)) disposables.push(d);
      return d;
    };
  }
  fire(value) {
    for (const l of [...this._listeners]) l(value);
  }
  dispose() {
    this._listeners.clear();
  }
}

class CancellationTokenSource {
  constructor() {
    const emitter = new EventEmitter();
    this._emitter = emitter;
    this.token = { isCancellationRequested: false, onCancellationRequested: emitter.event };
  }
  cancel() {
    if (this.token.isCancellationRequested) return;
    this.token.isCancellationRequested = true;
    this._emitter.fire(undefined);
  }
  dispose() {}
}

class Uri {
  constructor(scheme, p, query = '', fragment = '') {
    this.scheme = scheme;
    this.path = p;
    this.query = query;
    this.fragment = fragment;
  }
  get fsPath() {
    return this.path;
  }
  static file(p) {
    return new Uri('file', path.resolve(p));
  }
  static parse(s) {
    const m = /^([a-z][a-z0-9+.-]*):(?:\/\/[^/]*)?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$/i.exec(s);
    if (!m) throw new Error(`bad uri ${s}`);
    const u = new Uri(m[1], decodeURIComponent(m[2] || '/'), m[3] || '', m[4] || '');
    u._raw = s;
    return u;
  }
  static from({ scheme, path: p = '/', query = '', fragment = '' }) {
    return new Uri(scheme, p, query, fragment);
  }
  static joinPath(base, ...parts) {
    return new Uri(base.scheme, path.posix.join(base.path, ...parts));
  }
  with(change) {
    return new Uri(change.scheme ?? this.scheme, change.path ?? this.path, change.query ?? this.query, change.fragment ?? this.fragment);
  }
  toString() {
    if (this._raw) return this._raw;
    if (this.scheme === 'file') return `file://${encodeURI(this.path)}`;
    return `${this.scheme}:${this.path}${this.query ? `?${this.query}` : ''}`;
  }
}

class Position {
  constructor(line, character) {
    this.line = line;
    this.character = character;
  }
}

class Range {
  constructor(a, b, c, d) {
    if (a instanceof Position) {
      this.start = a;
      this.end = b;
    } else {
      this.start = new Position(a, b);
      this.end = new Position(c, d);
    }
  }
}

const DiagnosticSeverity = { Error: 0, Warning: 1, Information: 2, Hint: 3 };
class Diagnostic {
  constructor(range, message, severity = DiagnosticSeverity.Error) {
    this.range = range;
    this.message = message;
    this.severity = severity;
  }
}

class ThemeIcon {
  constructor(id, color) {
    this.id = id;
    this.color = color;
  }
}
class ThemeColor {
  constructor(id) {
    this.id = id;
  }
}
class MarkdownString {
  constructor(value = '') {
    this.value = value;
  }
  appendMarkdown(s) {
    this.value += s;
    return this;
  }
  appendText(s) {
    this.value += s;
    return this;
  }
  appendCodeblock(code, lang = '') {
    this.value += `\n\`\`\`${lang}\n${code}\n\`\`\`\n`;
    return this;
  }
}
const TreeItemCollapsibleState = { None: 0, Collapsed: 1, Expanded: 2 };
class TreeItem {
  constructor(label, collapsibleState = TreeItemCollapsibleState.None) {
    this.label = label;
    this.collapsibleState = collapsibleState;
  }
}
const StatusBarAlignment = { Left: 1, Right: 2 };
const ProgressLocation = { SourceControl: 1, Window: 10, Notification: 15 };
const LogLevel = { Off: 0, Trace: 1, Debug: 2, Info: 3, Warning: 4, Error: 5 };

class McpStdioServerDefinition {
  constructor(label, command, args, env, version) {
    this.label = label;
    this.command = command;
    this.args = args ?? [];
    this.env = env ?? {};
    this.version = version;
  }
}
class McpHttpServerDefinition {
  constructor(label, uri, headers, version) {
    this.label = label;
    this.uri = uri;
    this.headers = headers ?? {};
    this.version = version;
  }
}

/**
 * A fresh fake `vscode` and what it recorded.
 * options.settings: {'kiln.server.path': ..., ...}; options.folders: [absolute paths];
 * options.mcp: 'final' (default) | 'missing' (pre-1.101) | 'throws' (1.100's pre-final API).
 */
function createVscode(options = {}) {
  const rec = {
    commands: new Map(),
    executed: [],
    messages: [], // {kind, text, items}
    progress: [], // {title, cancellable, reports: []}
    mcpProviders: new Map(),
    treeViews: new Map(),
    contentProviders: new Map(),
    diagnostics: new Map(), // collection name -> Map(fsPath -> Diagnostic[])
    channels: new Map(), // name -> channel
    statusItems: [],
    clipboard: '',
    opened: [], // external URIs
    shownDocuments: [],
    inputAnswers: [], // queue for showInputBox
    quickPickAnswers: [],
    messageAnswers: [], // queue of answers for show*Message (undefined = dismissed)
    cancelProgress: undefined, // set to a function (progressRecord) => boolean to cancel a progress
    waiters: [],
  };
  const settings = { 'kiln.server.path': 'kiln', 'kiln.server.extraArgs': [], 'kiln.trace.server': 'off', ...(options.settings ?? {}) };
  const configEmitter = new EventEmitter();
  const foldersEmitter = new EventEmitter();
  const folders = (options.folders ?? []).map((p, index) => ({ uri: Uri.file(p), name: path.basename(p), index }));

  const notify = () => {
    const w = rec.waiters;
    rec.waiters = [];
    for (const f of w) f();
  };
  /** Resolves when pred() holds (checked after every recorded event, and every 50 ms). */
  rec.waitFor = (pred, timeoutMs = 20000, what = 'condition') =>
    new Promise((resolve, reject) => {
      const deadline = Date.now() + timeoutMs;
      const check = () => {
        let v;
        try {
          v = pred();
        } catch {
          v = undefined;
        }
        if (v) return resolve(v);
        if (Date.now() > deadline) return reject(new Error(`timed out waiting for ${what}`));
        rec.waiters.push(check);
        setTimeout(() => notify(), 50);
      };
      check();
    });

  function makeChannel(name, opts) {
    const lines = [];
    const levelEmitter = new EventEmitter();
    const ch = {
      name,
      lines,
      logLevel: LogLevel.Info,
      onDidChangeLogLevel: levelEmitter.event,
      setLogLevel(l) {
        ch.logLevel = l;
        levelEmitter.fire(l);
      },
      append(s) {
        lines.push(s);
        notify();
      },
      appendLine(s) {
        lines.push(`${s}\n`);
        notify();
      },
      replace(s) {
        lines.length = 0;
        lines.push(s);
      },
      clear() {
        lines.length = 0;
      },
      show() {
        ch.shown = true;
      },
      hide() {},
      dispose() {},
      text() {
        return lines.join('');
      },
    };
    if (opts && opts.log) {
      for (const lvl of ['trace', 'debug', 'info', 'warn', 'error']) {
        ch[lvl] = (msg) => {
          lines.push(`[${lvl}] ${msg}\n`);
          notify();
        };
      }
    }
    rec.channels.set(name, ch);
    return ch;
  }

  const showMessage = (kind) => (text, ...items) => {
    if (items.length && typeof items[0] === 'object' && !Array.isArray(items[0]) && items[0] && !('title' in items[0])) items.shift(); // options
    rec.messages.push({ kind, text, items });
    notify();
    return Promise.resolve(rec.messageAnswers.length ? rec.messageAnswers.shift() : undefined);
  };

  const vscode = {
    version: options.version ?? '1.101.0',
    Disposable,
    EventEmitter,
    CancellationTokenSource,
    Uri,
    Position,
    Range,
    Diagnostic,
    DiagnosticSeverity,
    ThemeIcon,
    ThemeColor,
    MarkdownString,
    TreeItem,
    TreeItemCollapsibleState,
    StatusBarAlignment,
    ProgressLocation,
    LogLevel,
    window: {
      createOutputChannel: (name, opts) => makeChannel(name, typeof opts === 'object' ? opts : undefined),
      createTreeView: (id, opts) => {
        const view = { id, ...opts, dispose() {} };
        rec.treeViews.set(id, view);
        return view;
      },
      registerTreeDataProvider: (id, provider) => {
        rec.treeViews.set(id, { id, treeDataProvider: provider });
        return new Disposable(() => {});
      },
      createStatusBarItem: () => {
        const item = { text: '', show() { item.visible = true; }, hide() { item.visible = false; }, dispose() {} };
        rec.statusItems.push(item);
        return item;
      },
      showInformationMessage: showMessage('info'),
      showWarningMessage: showMessage('warning'),
      showErrorMessage: showMessage('error'),
      showInputBox: async (opts) => {
        rec.lastInputBox = opts;
        const a = rec.inputAnswers.shift();
        return typeof a === 'function' ? a(opts) : a;
      },
      showQuickPick: async (items, opts) => {
        rec.lastQuickPick = { items: await items, opts };
        const a = rec.quickPickAnswers.shift();
        return typeof a === 'function' ? a(await items) : a;
      },
      showOpenDialog: async () => undefined,
      withProgress: async (opts, task) => {
        const source = new CancellationTokenSource();
        const record = { title: opts.title, cancellable: !!opts.cancellable, location: opts.location, reports: [], source };
        rec.progress.push(record);
        notify();
        const progress = {
          report: (v) => {
            record.reports.push(v);
            notify();
            if (rec.cancelProgress && rec.cancelProgress(record)) source.cancel();
          },
        };
        return task(progress, source.token);
      },
      showTextDocument: async (doc) => {
        rec.shownDocuments.push(doc);
        notify();
        return { document: doc };
      },
    },
    workspace: {
      get workspaceFolders() {
        return folders.length ? folders : undefined;
      },
      getConfiguration: (section) => ({
        get: (key, dflt) => {
          const full = section ? `${section}.${key}` : key;
          return full in settings ? settings[full] : dflt;
        },
        has: (key) => `${section}.${key}` in settings,
        update: async (key, value) => {
          settings[`${section}.${key}`] = value;
        },
      }),
      onDidChangeConfiguration: configEmitter.event,
      onDidChangeWorkspaceFolders: foldersEmitter.event,
      registerTextDocumentContentProvider: (scheme, provider) => {
        rec.contentProviders.set(scheme, provider);
        return new Disposable(() => rec.contentProviders.delete(scheme));
      },
      openTextDocument: async (uri) => {
        const provider = rec.contentProviders.get(uri.scheme);
        if (!provider) throw new Error(`no content provider for ${uri.scheme}`);
        const text = await provider.provideTextDocumentContent(uri, new CancellationTokenSource().token);
        return { uri, getText: () => text, isDirty: false };
      },
    },
    languages: {
      createDiagnosticCollection: (name) => {
        const map = new Map();
        rec.diagnostics.set(name, map);
        return {
          name,
          set: (uri, list) => {
            map.set(uri.fsPath, list);
            notify();
          },
          delete: (uri) => map.delete(uri.fsPath),
          clear: () => map.clear(),
          get: (uri) => map.get(uri.fsPath),
          forEach: (fn) => map.forEach((v, k) => fn(Uri.file(k), v)),
          dispose: () => map.clear(),
        };
      },
    },
    commands: {
      registerCommand: (id, fn) => {
        if (rec.commands.has(id)) throw new Error(`command '${id}' already exists`);
        rec.commands.set(id, fn);
        return new Disposable(() => rec.commands.delete(id));
      },
      executeCommand: async (id, ...args) => {
        rec.executed.push({ id, args });
        notify();
        const fn = rec.commands.get(id);
        return fn ? fn(...args) : undefined;
      },
    },
    env: {
      clipboard: {
        writeText: async (t) => {
          rec.clipboard = t;
          notify();
        },
        readText: async () => rec.clipboard,
      },
      openExternal: async (uri) => {
        rec.opened.push(uri.toString());
        return true;
      },
    },
  };

  const mcp = options.mcp ?? 'final';
  if (mcp !== 'missing') {
    vscode.McpStdioServerDefinition = McpStdioServerDefinition;
    vscode.McpHttpServerDefinition = McpHttpServerDefinition;
    vscode.lm = {
      registerMcpServerDefinitionProvider: (id, provider) => {
        if (mcp === 'throws') {
          throw new Error(`MCP configuration providers must be registered in the contributes.modelContextServerCollections array within your package.json, but "${id}" was not`);
        }
        rec.mcpProviders.set(id, provider);
        return new Disposable(() => rec.mcpProviders.delete(id));
      },
    };
  }

  /** Changes settings and fires onDidChangeConfiguration like VS Code does. */
  rec.setSetting = (key, value) => {
    settings[key] = value;
    configEmitter.fire({ affectsConfiguration: (s) => key === s || key.startsWith(`${s}.`) });
  };
  rec.setFolders = (paths) => {
    folders.length = 0;
    paths.forEach((p, index) => folders.push({ uri: Uri.file(p), name: path.basename(p), index }));
    foldersEmitter.fire({ added: [], removed: [] });
  };
  return { vscode, rec };
}

/** A fake ExtensionContext. */
function createContext(packageJSON) {
  const store = new Map();
  const memento = {
    get: (k, d) => (store.has(k) ? store.get(k) : d),
    update: async (k, v) => {
      store.set(k, v);
    },
    keys: () => [...store.keys()],
  };
  return {
    subscriptions: [],
    workspaceState: memento,
    globalState: { ...memento, setKeysForSync() {} },
    extension: { packageJSON, id: `${packageJSON.publisher}.${packageJSON.name}` },
    extensionPath: path.resolve(__dirname, '..'),
  };
}

module.exports = { createVscode, createContext };
