// A real browser against `kiln serve`: headless Chromium (Debian's, driven by playwright-core)
// opens a password-protected artifact, gets the login form (not a Basic-auth dialog), fills it and
// sees the page; and an invited person opens their invite link to an app, lands on it (cookie set,
// token gone from the address bar), submits the app's form and sees the answer with their name.
// Screenshots are kept in BUILD/test-artifacts/ (browser-login-form.png, browser-login.png,
// browser-app.png). If Chromium cannot start here the test is reported as skipped with the reason,
// never as passed; so is the app test where the sandbox cannot run (failed under
// KILN_REQUIRE_SANDBOX=1).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';

import { appWorkspace, publishApp, startAppKiln, waitForState } from '../lib/apps.mjs';
import { launchChromium } from '../lib/browser.mjs';
import { connectClient, kilnBin, structured, tempDir } from '../lib/kiln.mjs';
import { readServeInfo, stopProcess } from '../lib/http.mjs';
import { probeExec, sandboxOrSkip } from '../lib/sandbox_probe.mjs';

const PASSWORD = 'open sesame 42';
const home = tempDir('kiln-browser-home-');
let daemonPid;

after(async () => {
  if (daemonPid) await stopProcess(daemonPid);
});

test('a browser logs in to a password-protected artifact and sees the page', async (t) => {
  const { browser, why } = await launchChromium();
  if (!browser) {
    console.log(`# browser test not run: ${why}`);
    t.skip(why);
    return;
  }
  const ws = tempDir('kiln-browser-ws-');
  fs.mkdirSync(path.join(ws, 'report'));
  fs.writeFileSync(path.join(ws, 'report', 'index.html'),
    '<!doctype html><html><head><title>Build report</title><link rel="stylesheet" href="style.css"></head>' +
    '<body><h1 id="title">All 42 checks passed</h1><p>Published by kiln.</p></body></html>\n');
  fs.writeFileSync(path.join(ws, 'report', 'style.css'), 'body{font-family:sans-serif;background:#eef7ee} h1{color:#185c18}\n');
  const s = await connectClient({ args: ['--workspace', ws], home, env: { KILN_SERVE_LISTEN: '127.0.0.1:0' } });
  let pub;
  try {
    pub = structured(await s.client.callTool({ name: 'publish', arguments: { path: 'report', name: 'report', share: 'password', password: PASSWORD } },
      undefined, { timeout: 60000 }));
  } finally {
    await s.close();
  }
  daemonPid = readServeInfo(home)?.pid;
  try {
    const page = await browser.newPage();
    const first = await page.goto(pub.url);
    assert.equal(first.status(), 401);
    const field = page.locator('input[type=password]');
    await field.waitFor({ state: 'visible', timeout: 10000 });
    assert.match(await page.title(), /password required/);
    const outDir = path.join(path.dirname(kilnBin()), 'test-artifacts');
    fs.mkdirSync(outDir, { recursive: true });
    await page.screenshot({ path: path.join(outDir, 'browser-login-form.png') });
    await field.fill(PASSWORD);
    // The form posts, the server answers 303 back to the page with the session cookie.
    await page.locator('button[type=submit]').click();
    await page.locator('#title').waitFor({ timeout: 10000 });
    assert.equal(page.url(), pub.url);
    assert.equal(await page.locator('#title').textContent(), 'All 42 checks passed');
    // The stylesheet came through the same cookie.
    const color = await page.locator('h1').evaluate((el) => getComputedStyle(el).color);
    assert.equal(color, 'rgb(24, 92, 24)');
    const cookies = await page.context().cookies();
    const session = cookies.find((c) => c.name === 'kiln_session');
    assert.ok(session?.httpOnly, 'an HttpOnly session cookie');
    const shot = path.join(outDir, 'browser-login.png');
    await page.screenshot({ path: shot, fullPage: true });
    assert.ok(fs.statSync(shot).size > 1000);
    console.log(`# screenshot: ${shot}`);
  } finally {
    await browser.close();
  }
});

test('an invited person opens their link to an app, uses its form and is greeted by name', async (t) => {
  const k = await startAppKiln({ ws: appWorkspace() });
  t.after(() => k.stop());
  if (sandboxOrSkip(t, await probeExec(k.call))) return;
  const { browser, why } = await launchChromium();
  if (!browser) {
    console.log(`# browser app test not run: ${why}`);
    t.skip(why);
    return;
  }
  try {
    const pub = await publishApp(k, { name: 'guestbook', share: 'invite', invite: ['dana'] });
    await waitForState(k, 'guestbook');
    const link = pub.invites.find((i) => i.name === 'dana').url;
    const page = await browser.newPage();
    const landed = await page.goto(link);
    assert.equal(landed.status(), 200, 'the link lands on the app');
    assert.equal(page.url(), pub.url, 'the token is gone from the address bar');
    assert.equal(await page.locator('#who').textContent(), 'Hello, dana');
    const session = (await page.context().cookies()).find((c) => c.name === 'kiln_session');
    assert.ok(session?.httpOnly, 'an HttpOnly kiln_session cookie');
    assert.equal(session.path, '/a/guestbook/');
    await page.locator('#message').fill('kiln <apps> work');
    await page.locator('#send').click();
    await page.locator('#result').waitFor({ timeout: 15000 });
    assert.equal(page.url(), `${pub.url}greet`);
    assert.equal(await page.locator('#result').textContent(), 'dana says: kiln <apps> work');
    // The app never had Kiln's cookie to hand to its page.
    assert.equal(await page.evaluate(() => document.cookie), '');
    const outDir = path.join(path.dirname(kilnBin()), 'test-artifacts');
    fs.mkdirSync(outDir, { recursive: true });
    await page.screenshot({ path: path.join(outDir, 'browser-app.png'), fullPage: true });
  } finally {
    await browser.close();
  }
});
