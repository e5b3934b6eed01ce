// The static-serving part of `make bench`: `kiln serve` against nginx on loopback, driven by wrk
// in the same run (interleaved rounds, medians), for a small HTML file and a 1 MB file, each public,
// password-protected (kiln: the session cookie of one login; nginx: auth_basic) and
// invite-protected (kiln: the session cookie an invite link set; nginx: the same Cookie header
// compared with the expected value). Every row carries the issue 21 target it is held to.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

import { connectClient, sleep, structured, tempDir } from '../tests/lib/kiln.mjs';
import { cookieOf, readServeInfo, request, stopProcess } from '../tests/lib/http.mjs';
import { nginxConf } from './lib.mjs';

const PASSWORD = 'bench password 1';
// kiln req/s / nginx req/s, the same row measured side by side (issue 21).
export const SERVE_TARGETS = { public_small: 1.0, protected_small: 0.8, big: 0.9 };

const onPath = (cmd) => (process.env.PATH ?? '').split(':').some((d) => d && fs.existsSync(path.join(d, cmd)));
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function smallHtml() {
  const rows = Array.from({ length: 30 }, (_, i) => `<li>check ${i + 1}: passed in ${(i * 37) % 900} ms</li>`).join('\n');
  return `<!doctype html>\n<html><head><meta charset="utf-8"><title>Build report</title></head><body>\n<h1>All checks passed</h1>\n<ul>\n${rows}\n</ul>\n</body></html>\n`;
}

// wrk -t2 -c50 -d{secs}s; requests/s, or an error when anything but 2xx came back.
function wrk(url, secs, headers = {}) {
  const args = ['-t2', '-c50', `-d${secs}s`];
  for (const [k, v] of Object.entries(headers)) args.push('-H', `${k}: ${v}`);
  const r = spawnSync('wrk', [...args, url], { encoding: 'utf8', timeout: (secs + 30) * 1000 });
  if (r.status !== 0) return { error: `wrk exit ${r.status}: ${(r.stderr || r.stdout || '').trim().slice(0, 200)}` };
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(r.stdout);
  const bad = /Non-2xx or 3xx responses:\s+(\d+)/.exec(r.stdout);
  const errs = /Socket errors:(.*)/.exec(r.stdout);
  if (!rps) return { error: `no Requests/sec in wrk output: ${r.stdout.slice(0, 200)}` };
  if (bad) return { error: `${bad[1]} non-2xx answers` };
  return { rps: Number(rps[1]), note: errs ? errs[1].trim() : undefined };
}

function killGroup(child, signal) {
  try { process.kill(-child.pid, signal); } catch { /* already gone */ }
}

async function startNginx(dir, files, inviteCookie) {
  const port = await freePort();
  const prefix = tempDir('kiln-bench-nginx-');
  fs.chmodSync(prefix, 0o755);  // its workers (nobody, when started as root) read the htpasswd
  fs.writeFileSync(path.join(prefix, 'htpasswd'), `bench:{PLAIN}${PASSWORD}\n`, { mode: 0o644 });
  const tmp = (n) => path.join(prefix, n);
  const conf = nginxConf(prefix, `  sendfile on;
  tcp_nopush on;
  types { text/html html; application/octet-stream bin; }
  server {
    listen 127.0.0.1:${port};
    root ${dir};
    etag on;
    location /priv/ { auth_basic "bench"; auth_basic_user_file ${tmp('htpasswd')}; }
    location /inv/ { if ($cookie_kiln_session != "${inviteCookie}") { return 403; } }
  }
`);
  fs.writeFileSync(tmp('nginx.conf'), conf);
  // Its own process group, so the workers go with the master whatever happens.
  const child = spawn('nginx', ['-e', tmp('error.log'), '-p', prefix, '-c', tmp('nginx.conf')],
    { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  let stderr = '';
  child.stderr.on('data', (c) => { stderr += c; });
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 5000;
  for (;;) {
    try {
      const r = await request(base, `/pub/${files.small}`);
      if (r.status === 200) break;
    } catch { /* not up yet */ }
    if (Date.now() > deadline || child.exitCode !== null) {
      killGroup(child, 'SIGKILL');
      throw new Error(`nginx did not start: ${stderr.trim() || fs.readFileSync(tmp('error.log'), 'utf8').slice(-300)}`);
    }
    await sleep(50);
  }
  const version = spawnSync('nginx', ['-v'], { encoding: 'utf8' }).stderr.trim().replace('nginx version: ', '');
  return { base, child, version };
}

// Returns { cases, secs, rounds, ... } for the table, or { error } when a peer or tool is missing.
export async function serveBench({ quick = false } = {}) {
  const missing = ['wrk', 'nginx'].filter((c) => !onPath(c) && !fs.existsSync(`/usr/sbin/${c}`));
  if (missing.length) return { error: `${missing.join(' and ')} not installed (Debian packages; make bench installs them)` };
  const secs = quick ? 3 : 4;
  const rounds = quick ? 1 : 5;
  const files = { small: 'small.html', big: 'big.bin' };
  const html = smallHtml();
  const big = Buffer.alloc(1 << 20);
  for (let i = 0; i < big.length; i++) big[i] = (i * 31 + (i >> 10)) & 0xff;

  // The same bytes for both: a workspace folder for kiln, a web root for nginx.
  const ws = tempDir('kiln-bench-serve-ws-');
  const webroot = tempDir('kiln-bench-serve-root-');
  fs.chmodSync(webroot, 0o755);  // nginx started as root serves as nobody
  for (const d of [path.join(ws, 'site'), ...['pub', 'priv', 'inv'].map((f) => path.join(webroot, f))]) {
    fs.mkdirSync(d, { recursive: true, mode: 0o755 });
    fs.writeFileSync(path.join(d, files.small), html, { mode: 0o644 });
    fs.writeFileSync(path.join(d, files.big), big, { mode: 0o644 });
  }
  const home = tempDir('kiln-bench-serve-home-');
  const c = await connectClient({ args: ['--workspace', ws], home, name: 'kiln-bench', env: { KILN_SERVE_LISTEN: '127.0.0.1:0' } });
  let kilnBase, inviteUrl;
  try {
    const call = async (args) => structured(await c.client.callTool({ name: 'publish', arguments: args }, undefined, { timeout: 60000 }));
    kilnBase = new URL((await call({ path: 'site', name: 'pub', share: 'public' })).url).origin;
    await call({ path: 'site', name: 'priv', share: 'password', password: PASSWORD });
    inviteUrl = new URL((await call({ path: 'site', name: 'inv', share: 'invite', invite: ['bench'] })).invites[0].url);
  } finally {
    await c.close();
  }
  const kilnPid = readServeInfo(home)?.pid;
  // The cookies a visitor holds after one login and after following the invite link once.
  const login = await request(kilnBase, '/a/priv/_kiln/login', {
    method: 'POST', body: `password=${encodeURIComponent(PASSWORD)}&next=%2Fa%2Fpriv%2F`,
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
  });
  const cookie = cookieOf(login);
  if (login.status !== 303 || !cookie) throw new Error(`kiln login failed: ${login.status}`);
  const invited = await request(kilnBase, inviteUrl.pathname + inviteUrl.search);
  const inviteCookie = cookieOf(invited);
  if (invited.status !== 303 || !inviteCookie) throw new Error(`kiln invite link answered ${invited.status} without a cookie`);
  const inviteValue = inviteCookie.slice(inviteCookie.indexOf('=') + 1);
  const nginxAuth = `Basic ${Buffer.from(`bench:${PASSWORD}`).toString('base64')}`;

  let nginx;
  const cases = [];
  const loadStart = os.loadavg()[0];
  try {
    nginx = await startNginx(webroot, files, inviteValue);
    for (const [label, file, big] of [['small HTML (2 KB)', files.small, false], ['1 MB file', files.big, true]]) {
      cases.push({
        name: `${label}, public`, target: big ? SERVE_TARGETS.big : SERVE_TARGETS.public_small,
        kiln: { url: `${kilnBase}/a/pub/${file}` }, nginx: { url: `${nginx.base}/pub/${file}` },
      });
      cases.push({
        name: `${label}, password`, target: big ? SERVE_TARGETS.big : SERVE_TARGETS.protected_small,
        kiln: { url: `${kilnBase}/a/priv/${file}`, headers: { Cookie: cookie } },
        nginx: { url: `${nginx.base}/priv/${file}`, headers: { Authorization: nginxAuth } },
      });
      cases.push({
        name: `${label}, invite`, target: big ? SERVE_TARGETS.big : SERVE_TARGETS.protected_small,
        kiln: { url: `${kilnBase}/a/inv/${file}`, headers: { Cookie: inviteCookie } },
        nginx: { url: `${nginx.base}/inv/${file}`, headers: { Cookie: inviteCookie } },
      });
    }
    for (const cs of cases) {
      for (const side of ['kiln', 'nginx']) {
        const u = new URL(cs[side].url);
        const probe = await request(u.origin, u.pathname, { headers: cs[side].headers });
        if (probe.status !== 200) cs[side].error = `probe answered ${probe.status}`;
        else if (!probe.body.equals(cs.name.startsWith('1 MB') ? big : Buffer.from(html))) cs[side].error = 'probe answered other bytes';
        // Without the credential both must refuse, so the row measures a protected page.
        if (cs.name.endsWith('public')) continue;
        const bare = await request(u.origin, u.pathname);
        if (bare.status < 400) cs[side].error = `answered ${bare.status} without credentials`;
      }
      for (const side of ['kiln', 'nginx']) cs[side].runs = [];
    }
    // Interleaved: each round runs every case on both servers, alternating which goes first.
    for (let round = 0; round < rounds; round++) {
      for (const cs of cases) {
        const order = round % 2 ? ['nginx', 'kiln'] : ['kiln', 'nginx'];
        for (const side of order) {
          if (cs[side].error) continue;
          const r = wrk(cs[side].url, secs, cs[side].headers);
          if (r.error) cs[side].error = r.error; else cs[side].runs.push(r.rps);
        }
      }
    }
  } finally {
    if (nginx) {
      killGroup(nginx.child, 'SIGQUIT');  // graceful: the master stops its workers
      await new Promise((r) => (nginx.child.exitCode !== null ? r() : nginx.child.on('exit', r)));
    }
    await stopProcess(kilnPid);
  }
  for (const cs of cases) {
    for (const side of ['kiln', 'nginx']) cs[side].rps = cs[side].runs.length ? median(cs[side].runs) : undefined;
    // Each round's own ratio too: how far apart the rounds were.
    const n = Math.min(cs.kiln.runs.length, cs.nginx.runs.length);
    cs.ratios = Array.from({ length: n }, (_, i) => cs.kiln.runs[i] / cs.nginx.runs[i]);
  }
  return { cases, secs, rounds, nginxVersion: nginx?.version, load: [loadStart, os.loadavg()[0]] };
}

export function serveTable(sv) {
  const header = ['static serving (wrk -t2 -c50)', 'kiln serve req/s', 'nginx req/s', 'ratio kiln/nginx', 'rounds\' ratios', 'target'];
  if (sv.error) return { header, table: [], notes: [`static serving not measured: ${sv.error}`] };
  const fmtRps = (x) => (x === undefined ? 'n/a' : Math.round(x).toLocaleString('en-US'));
  const table = sv.cases.map((cs) => {
    const ratio = cs.kiln.rps && cs.nginx.rps ? cs.kiln.rps / cs.nginx.rps : undefined;
    const spread = cs.ratios.length > 1 ? `${Math.min(...cs.ratios).toFixed(2)}-${Math.max(...cs.ratios).toFixed(2)}x` : '-';
    return [cs.name, fmtRps(cs.kiln.rps), fmtRps(cs.nginx.rps), ratio === undefined ? '-' : `${ratio.toFixed(2)}x`, spread,
      `>= ${cs.target}x ${ratio === undefined ? '(no figure)' : ratio >= cs.target ? 'met' : 'NOT met'}`];
  });
  const notes = [];
  for (const cs of sv.cases) for (const side of ['kiln', 'nginx']) if (cs[side].error) notes.push(`${cs.name}, ${side}: ${cs[side].error}`);
  notes.push(`medians of ${sv.rounds} interleaved ${sv.secs} s wrk runs per side (-t2 -c50, keep-alive) on loopback; the ratio is of the ` +
    `two medians, "rounds' ratios" the lowest and highest of the rounds' own kiln/nginx; 1-minute load average ${sv.load[0].toFixed(2)} ` +
    `before, ${sv.load[1].toFixed(2)} after (wrk and the two servers count in it). nginx ${sv.nginxVersion ?? '?'} with 2 workers, sendfile, tcp_nopush, access_log off; ` +
    'kiln serve with its 2 io threads, its access log on.');
  notes.push('Protected rows: kiln checks the session cookie on every request (HMAC-SHA256 verified in constant time, then its ' +
    'fields against the share\'s rules kept in memory until the database changes); password: the cookie of one login, ' +
    'nginx auth_basic ({PLAIN} htpasswd, which nginx reads per request); invite: the cookie the invite link set, nginx ' +
    'comparing the same Cookie header with the expected value (`if ($cookie_kiln_session != ...) { return 403; }`). ' +
    'Before the runs each URL is probed for the right bytes, and each protected one for a refusal without its credential.');
  return { header, table, notes };
}
