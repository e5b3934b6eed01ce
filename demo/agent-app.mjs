// `make demo`, third sample: an agent publishes examples/incident-tracker (a small web app on
// PostgreSQL, its `pg` client installed into the example's node_modules) as an app that keeps
// running. Through the MCP SDK it opens a temporary copy, publishes it with `app: true` behind
// invite links for alice and bob; alice follows her link and reports an incident through the
// page's form, which the app records as hers (from X-Kiln-User, whatever she sends herself); then
// `kiln serve` is stopped and started again and the incident is still there; the digest schedule
// is run now and its digest read back; bob's invite is revoked and his link gets 403. It prints a
// short transcript and exits non-zero if a step errors or a result is not what it expects.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { alive, readServeInfo, stopProcess, waitForServeInfo } from '../tests/lib/http.mjs';
import { connectClient, kilnBin, repoRoot, sleep, tempDir } from '../tests/lib/kiln.mjs';
import { expect, fingerprint, indent, runSteps } from './steps.mjs';

const sample = path.join(repoRoot, 'examples', 'incident-tracker');
const INCIDENT = { title: 'checkout page returns 500 <again>', severity: 'high' };

// What a browser does, by hand: keep the cookie, never follow a redirect unseen.
async function visit(url, { cookie, method = 'GET', form, headers = {} } = {}) {
  const res = await fetch(url, {
    method, redirect: 'manual', body: form && new URLSearchParams(form),
    headers: { ...(cookie ? { cookie } : {}), ...headers },
  });
  const set = res.headers.getSetCookie()[0];
  return { status: res.status, location: res.headers.get('location'), cookie: set?.split(';')[0], text: await res.text() };
}
const signedInAs = (html) => html.match(/Signed in as <b>(.*?)<\/b>/)?.[1];
const incidentsOf = async (ctx, who) => {
  const r = await visit(new URL('api/incidents', ctx.url), { cookie: ctx.cookies[who] });
  expect(r.status === 200, `GET api/incidents as ${who}: 200 (got ${r.status}: ${r.text.slice(0, 200)})`);
  return JSON.parse(r.text);
};
const statusLines = (r) => [
  `${r.state}, version ${r.version}, restarts ${r.restarts}, ${r.url}`,
  ...(r.schedules ?? []).map((s) => `schedule ${s.name} (${s.cron}): next run ${s.next_run_at}${s.last_run ? `, last ${s.last_run.status} at ${s.last_run.at}` : ''}`),
];

// Stops the state directory's `kiln serve` with SIGTERM and waits until it has exited.
async function stopServe(home, graceMs = 15000) {
  const info = readServeInfo(home);
  if (!info || !alive(info.pid)) return undefined;
  const t0 = Date.now();
  process.kill(info.pid, 'SIGTERM');
  while (alive(info.pid) && Date.now() - t0 < graceMs) await sleep(20);
  expect(!alive(info.pid), `kiln serve (pid ${info.pid}) exits on SIGTERM within ${graceMs / 1000} s`);
  return { ...info, ms: Date.now() - t0 };
}

const steps = [
  {
    note: 'open the example as a workspace: kiln.json declares a postgres service and the app with a daily digest',
    tool: 'workspace_open',
    args: (ctx) => ({ path: ctx.workspace }),
    show: (r) => {
      const services = r.services ?? [];
      expect(services.some((s) => s.name === 'db' && s.kind === 'postgres'), `kiln.json declares db (postgres) (got ${JSON.stringify(services)})`);
      return [`workspace "${r.name}" (id ${r.id}); services: ${services.map((s) => `${s.name} (${s.kind})`).join(', ')}`];
    },
  },
  {
    note: 'publish it as an app that keeps running, with an invite link each for alice and bob',
    tool: 'publish',
    args: () => ({ path: '.', app: true, share: 'invite', invite: ['alice', 'bob'] }),
    timeout_ms: 300000,
    show: (r, ctx) => {
      const links = Object.fromEntries((r.invites ?? []).map((i) => [i.name, i.url]));
      expect(r.share === 'invite' && links.alice && links.bob, `invite links for alice and bob (got ${r.share}, ${JSON.stringify(r.invites?.map((i) => i.name))})`);
      expect(new RegExp(`/a/${r.artifact}/$`).test(r.url), `a URL at /a/${r.artifact}/ (got ${r.url})`);
      expect(r.app && r.app.state !== 'crashed' && r.app.state !== 'unknown', `an app after the deploy (got ${JSON.stringify(r.app)})`);
      Object.assign(ctx, { artifact: r.artifact, url: r.url, links, cookies: {} });
      return [
        `${r.artifact} v${r.version}: ${r.files} files (node_modules with pg included), share ${r.share}, app ${r.app.state}, trace ${r.trace_id}`,
        `URL: ${r.url}`,
        ...(r.invites.map((i) => `invite for ${i.name}: ${i.url.replace(/invite=[^&]+/, 'invite=(token)')}`)),
      ];
    },
  },
  {
    note: "the app's state and its schedule",
    tool: 'app_status',
    args: (ctx) => ({ artifact: ctx.artifact }),
    show: (r, ctx) => {
      expect(['starting', 'running', 'sleeping'].includes(r.state), `the app is starting, running or sleeping (got ${r.state}${r.last_error ? ': ' + r.last_error : ''})`);
      expect(r.schedules?.some((s) => s.name === 'digest'), `a schedule "digest" (got ${JSON.stringify(r.schedules)})`);
      ctx.dataDir = r.data_dir;
      return [...statusLines(r), `its KILN_DATA_DIR on this machine: ${r.data_dir}`];
    },
  },
  {
    note: 'alice and bob follow their invite links: a cookie and a redirect to the app, which knows who they are',
    http: async (ctx) => {
      const out = [];
      for (const who of ['alice', 'bob']) {
        const first = await visit(ctx.links[who]);
        expect(first.status === 303 && first.cookie, `${who}'s link: 303 with a cookie (got ${first.status}: ${first.text.slice(0, 200)})`);
        ctx.cookies[who] = first.cookie;
        const page = await visit(new URL(first.location, ctx.url), { cookie: first.cookie });
        expect(page.status === 200 && signedInAs(page.text) === who, `${who} sees the page signed in as ${who} (got ${page.status}, ${signedInAs(page.text)})`);
        if (who === 'alice') ctx.action = page.text.match(/<form method="post" action="([^"]+)"/)?.[1];
        out.push(`${who}: link -> ${first.status} to ${first.location} with a cookie; the page says "Signed in as ${who}"`);
      }
      expect(ctx.action === `${new URL(ctx.url).pathname}incidents`, `the form posts under the app's URL (got ${ctx.action})`);
      return out;
    },
  },
  {
    note: 'alice reports an incident through the form (pretending to be bob in an X-Kiln-User header of her own)',
    http: async (ctx) => {
      const r = await visit(new URL(ctx.action, ctx.url), { method: 'POST', cookie: ctx.cookies.alice, form: INCIDENT, headers: { 'x-kiln-user': 'bob' } });
      expect(r.status === 303, `the form post answers 303 back to the list (got ${r.status}: ${r.text.slice(0, 200)})`);
      const page = await visit(new URL(r.location, ctx.url), { cookie: ctx.cookies.alice });
      expect(page.text.includes('checkout page returns 500 &lt;again&gt;'), 'the list shows the incident, its title escaped');
      const mine = (await incidentsOf(ctx, 'alice')).find((i) => i.title === INCIDENT.title);
      expect(mine?.reported_by === 'alice', `reported_by alice, not the header she sent (got ${JSON.stringify(mine)})`);
      ctx.incident = mine;
      return [`POST ${ctx.action} -> ${r.status} to ${r.location}`, `listed: #${mine.id} [${mine.severity}] ${mine.title}, reported by ${mine.reported_by}`];
    },
  },
  {
    label: 'restart kiln serve',
    note: 'stop kiln serve (SIGTERM to the pid in serve.json), then start it again as a boot script would: kiln serve --daemon',
    http: async (ctx) => {
      const old = await stopServe(ctx.home);
      expect(old, 'a running kiln serve to restart');
      const listen = new URL(old.url).host;
      const log = fs.openSync(path.join(ctx.home, 'serve.log'), 'a');
      const child = spawn(ctx.bin, ['serve', '--state-dir', ctx.home, '--listen', listen, '--daemon'], { detached: true, stdio: ['ignore', 'ignore', log] });
      child.unref();
      fs.closeSync(log);
      const info = await waitForServeInfo(ctx.home, { pid: child.pid, timeoutMs: 15000 });
      return [`kiln serve pid ${old.pid} exited ${old.ms} ms after SIGTERM`, `kiln serve pid ${info.pid} serving ${info.url} again (nothing republished)`];
    },
  },
  {
    note: 'the app after the restart',
    tool: 'app_status',
    args: (ctx) => ({ artifact: ctx.artifact }),
    show: (r) => {
      expect(['starting', 'running', 'sleeping'].includes(r.state), `the app is back: starting, running or sleeping (got ${r.state}${r.last_error ? ': ' + r.last_error : ''})`);
      return statusLines(r);
    },
  },
  {
    note: "alice's cookie still works and her incident is still there",
    http: async (ctx) => {
      const list = await incidentsOf(ctx, 'alice');
      const same = list.find((i) => i.id === ctx.incident.id);
      expect(same?.title === INCIDENT.title && same.reported_by === 'alice', `incident #${ctx.incident.id} kept (got ${JSON.stringify(list)})`);
      return [`GET api/incidents: ${list.length} incident(s); #${same.id} "${same.title}" by ${same.reported_by}`];
    },
  },
  {
    note: "run the app's daily digest now instead of at 08:00",
    tool: 'schedule_run',
    args: (ctx) => ({ artifact: ctx.artifact, name: 'digest' }),
    timeout_ms: 300000,
    show: (r, ctx) => {
      expect(r.status === 'pass' && r.exit_code === 0, `the digest job passed, exit 0 (got ${r.status}, exit ${r.exit_code})`);
      ctx.scheduleTrace = r.trace_id;
      return [`${r.status}, exit ${r.exit_code} in ${r.duration_ms} ms, trace ${r.trace_id}`];
    },
  },
  {
    note: "the job's one line of output, from its trace",
    tool: 'trace_output',
    args: (ctx) => ({ trace_id: ctx.scheduleTrace, stream: 'stdout', grep: '^digest ' }),
    show: (r) => {
      const line = r.matches?.[0]?.text ?? '';
      expect(line.includes(INCIDENT.title), `a digest line naming the incident (got ${JSON.stringify(r.matches)})`);
      return [line.trim()];
    },
  },
  {
    note: "the digest as the app serves it, and the file the job wrote into the app's data folder",
    http: async (ctx) => {
      const r = await visit(new URL('api/digests', ctx.url), { cookie: ctx.cookies.alice });
      const d = r.status === 200 ? JSON.parse(r.text)[0] : undefined;
      expect(d?.count >= 1 && d.titles.includes(INCIDENT.title), `GET api/digests: a digest with the incident (got ${r.status}: ${r.text.slice(0, 300)})`);
      const file = path.join(ctx.dataDir ?? '(no data_dir)', 'digests', `${d.day}.txt`);
      const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
      expect(text.includes(INCIDENT.title), `${file} names the incident (got ${JSON.stringify(text)})`);
      return [`GET api/digests -> ${r.status}: ${d.day}, ${d.count} incident(s): ${d.titles.join('; ')}`,
        `${file}:`, ...indent(text.trimEnd().split('\n'))];
    },
  },
  {
    note: "revoke bob's invite",
    tool: 'publish_share',
    args: (ctx) => ({ artifact: ctx.artifact, revoke: ['bob'] }),
    show: (r) => {
      const bob = (r.all_invites ?? []).find((i) => i.name === 'bob');
      expect(bob?.revoked === true, `bob's invite is revoked (got ${JSON.stringify(r.all_invites)})`);
      return [(r.all_invites ?? []).map((i) => `${i.name}: ${i.revoked ? 'revoked' : 'active'}`).join(', ')];
    },
  },
  {
    note: "bob's link and cookie get 403 now; alice still gets in",
    http: async (ctx) => {
      const link = await visit(ctx.links.bob);
      const cookie = await visit(ctx.url, { cookie: ctx.cookies.bob });
      const alice = await visit(ctx.url, { cookie: ctx.cookies.alice });
      expect(link.status === 403 && cookie.status === 403, `bob: 403 for his link and his cookie (got ${link.status}, ${cookie.status})`);
      expect(alice.status === 200 && signedInAs(alice.text) === 'alice', `alice: 200 (got ${alice.status})`);
      return [`bob's link -> ${link.status}, bob's cookie -> ${cookie.status}, alice's cookie -> ${alice.status}`];
    },
  },
];

// The example needs PostgreSQL's server binaries (Kiln looks in the same places:
// services/server_binaries.cpp) and its `pg` package in its own node_modules, which goes into the
// published copy: the app's sandbox has no network.
function prepare() {
  if (!process.env.KILN_POSTGRES_BINDIR && spawnSync('sh', ['-c', 'ls /usr/lib/postgresql/*/bin/postgres']).status !== 0) {
    return 'PostgreSQL is not installed (no /usr/lib/postgresql/<version>/bin/postgres): install the Debian package postgresql (scripts/install-deps.sh, which make demo runs, installs it)';
  }
  const deps = spawnSync(path.join(repoRoot, 'scripts', 'npm-deps.sh'), [sample], { encoding: 'utf8' });
  return deps.status === 0 ? null : `npm ci in examples/incident-tracker failed: ${deps.stdout}${deps.stderr}`;
}

async function main() {
  const bin = kilnBin();
  const missing = prepare();
  if (missing) {
    console.log(`Kiln demo, third sample (examples/incident-tracker): cannot run: ${missing}`);
    process.exitCode = 1;
    return;
  }
  const repoBefore = fingerprint(sample);
  const home = tempDir('kiln-demo-app-home-');
  const workspace = path.join(tempDir('kiln-demo-app-'), 'incident-tracker');
  fs.cpSync(sample, workspace, { recursive: true });
  console.log(`Kiln demo, third sample: an MCP client session against ${path.relative(process.cwd(), bin) || bin} mcp`);
  console.log(`workspace: a fresh copy of examples/incident-tracker (an incident tracker on PostgreSQL) at ${workspace}\n`);

  const session = await connectClient({ home, name: 'kiln-demo-app-agent' });
  const failed = await runSteps(session, steps, { bin, ctx: { workspace, home, bin } });
  await session.close();
  // In real use kiln serve and the app keep running; the demo cleans up after itself.
  const info = readServeInfo(home);
  if (info) await stopProcess(info.pid, 15000);
  if (failed) {
    console.log('demo (third sample) stopped at a failed step');
    process.exitCode = 1;
  } else {
    const unchanged = fingerprint(sample) === repoBefore;
    console.log(`demo (third sample) finished: ${steps.length} steps; examples/incident-tracker in the repo is ${unchanged ? 'unchanged' : 'CHANGED (a bug)'}`);
    if (!unchanged) process.exitCode = 1;
  }
}

main().catch((e) => {
  console.error(`demo failed: ${e.stack ?? e}`);
  process.exit(1);
});
