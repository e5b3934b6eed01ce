// A run's network log (trace_get's network_log and result.network, for runs with an allowlist) in
// a few lines: totals, then the refused destinations with their reason and what to add to the
// allowlist, then the allowed ones with their bytes. Repeats of one destination are one line.
export interface NetworkEntry {
  host?: string;
  port?: number;
  decision?: string;
  reason?: string;
  kind?: string;
  address?: string;
  bytes_up?: number;
  bytes_down?: number;
  at?: string;
  error?: string;
  open?: boolean;
}

export interface NetworkTotals {
  allowed?: number;
  denied?: number;
  not_listed?: number;
  bytes_up?: number;
  bytes_down?: number;
}

export interface NetworkLine {
  denied: boolean;
  /** host:port (or "bad request" for a request Kiln could not read). */
  target: string;
  /** A refusal's reason; an allowed destination's bytes (and error, still open). */
  detail: string;
  /** How many log entries this line stands for. */
  count: number;
  /** What to add to network.allow, when adding an entry is what would let it through. */
  allowEntry?: string;
}

export interface NetworkView {
  /** "2 allowed, 1 refused; 1.2 KiB up, 30.5 KiB down". */
  summary: string;
  allowed: number;
  refused: number;
  /** At most `cap` lines, refusals first. */
  lines: NetworkLine[];
  /** Lines left out past the cap. */
  more: number;
}

/** The number of destination lines shown before "N more". */
export const NETWORK_LINES = 20;

export function humanBytes(n: unknown): string {
  if (typeof n !== 'number' || !Number.isFinite(n)) return '?';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 * 1024 * 1024) return `${(n / (1024 * 1024)).toFixed(1)} MiB`;
  return `${(n / (1024 * 1024 * 1024)).toFixed(2)} GiB`;
}

// The entry Kiln's 403 suggests ("To allow it, add ..."): the name, with the port unless 80 or 443.
function allowEntryFor(e: NetworkEntry): string | undefined {
  const reason = e.reason ?? '';
  if (!e.host || !(reason === 'no allow entry matches' || reason.startsWith('an IP address is refused unless'))) return undefined;
  const name = e.host.includes(':') ? `[${e.host}]` : e.host;
  return e.port === 80 || e.port === 443 || e.port === undefined ? name : `${name}:${e.port}`;
}

/** The view of a trace's network log; undefined when the run had no allowlist (no log). */
export function networkView(log: unknown, totals?: unknown, cap = NETWORK_LINES): NetworkView | undefined {
  if (!Array.isArray(log)) return undefined;
  const entries = log.filter((e): e is NetworkEntry => !!e && typeof e === 'object');
  const groups = new Map<string, NetworkLine & { up: number; down: number; errors: Set<string>; open: boolean }>();
  let allowed = 0;
  let refused = 0;
  let up = 0;
  let down = 0;
  for (const e of entries) {
    const denied = e.decision !== 'allowed';
    if (denied) refused++;
    else allowed++;
    up += e.bytes_up ?? 0;
    down += e.bytes_down ?? 0;
    const name = e.host?.includes(':') ? `[${e.host}]` : e.host;
    const target = name ? `${name}:${e.port ?? '?'}` : e.kind === 'bad_request' ? 'bad request' : '?';
    const key = `${denied ? 'D' : 'A'} ${target} ${denied ? (e.reason ?? '') : ''}`;
    let g = groups.get(key);
    if (!g) {
      const allowEntry = denied ? allowEntryFor(e) : undefined;
      const detail = denied ? e.reason || 'refused' : '';
      g = { denied, target, detail, count: 0, up: 0, down: 0, errors: new Set(), open: false, allowEntry };
      groups.set(key, g);
    }
    g.count++;
    g.up += e.bytes_up ?? 0;
    g.down += e.bytes_down ?? 0;
    if (e.error) g.errors.add(e.error);
    if (e.open) g.open = true;
  }
  const all = [...groups.values()];
  for (const g of all) {
    if (g.denied) continue;
    g.detail = `${humanBytes(g.up)} up, ${humanBytes(g.down)} down`;
    if (g.errors.size) g.detail += `, error: ${[...g.errors].join('; ')}`;
    if (g.open) g.detail += ', still open';
  }
  const ordered = [...all.filter((g) => g.denied), ...all.filter((g) => !g.denied)];
  const lines: NetworkLine[] = ordered
    .slice(0, cap)
    .map(({ denied, target, detail, count, allowEntry }) => ({ denied, target, detail, count, allowEntry }));
  // result.network counts every connection (the log keeps at most 1000): its totals when present.
  const t = totals && typeof totals === 'object' ? (totals as NetworkTotals) : undefined;
  if (typeof t?.allowed === 'number') allowed = t.allowed;
  if (typeof t?.denied === 'number') refused = t.denied;
  if (typeof t?.bytes_up === 'number') up = t.bytes_up;
  if (typeof t?.bytes_down === 'number') down = t.bytes_down;
  let summary = `${allowed} allowed, ${refused} refused; ${humanBytes(up)} up, ${humanBytes(down)} down`;
  if (t?.not_listed) summary += ` (${t.not_listed} not in the log)`;
  return { summary, allowed, refused, lines, more: ordered.length - lines.length };
}

/** The view of trace_get's answer ({trace: {network_log, result: {network}}}). */
export function traceNetworkView(record: unknown): NetworkView | undefined {
  const trace = (record as { trace?: { network_log?: unknown; result?: { network?: unknown } } } | undefined)?.trace;
  return trace ? networkView(trace.network_log, trace.result?.network) : undefined;
}

/** One destination as a line of text: `refused  unlisted.test:80  no allow entry matches (add "unlisted.test" to network.allow)`. */
export function networkLineText(l: NetworkLine): string {
  const times = l.count > 1 ? ` (×${l.count})` : '';
  const hint = l.allowEntry ? ` (add "${l.allowEntry}" to network.allow)` : '';
  return `${l.denied ? 'refused' : 'allowed'}  ${l.target}  ${l.detail}${hint}${times}`;
}

/** The whole view as plain lines (the run output channel): summary, destinations, "N more". */
export function networkText(v: NetworkView, traceId?: string): string[] {
  const out = [`network: ${v.summary}`, ...v.lines.map((l) => `  ${networkLineText(l)}`)];
  if (v.more > 0) out.push(`  ... ${v.more} more${traceId ? ` (the whole log is in trace ${traceId})` : ''}`);
  return out;
}

/** The refusals in one short phrase for a notification (the first three, then how many more). */
export function refusalsSentence(v: NetworkView): string {
  const denied = v.lines.filter((l) => l.denied);
  if (!denied.length) return '';
  const shown = denied.slice(0, 3).map((l) => `${l.target} (${l.allowEntry ? `add "${l.allowEntry}"` : l.detail})`);
  const rest = v.refused - denied.slice(0, 3).reduce((s, l) => s + l.count, 0);
  return `${shown.join(', ')}${rest > 0 ? ` and ${rest} more` : ''}`;
}

const escapeMd = (s: string): string => s.replace(/[\\`*_[\]|<>]/g, '\\$&');

/** The view as Markdown for a hover: a heading line, then one bullet per destination. */
export function networkMarkdown(v: NetworkView, traceId?: string): string {
  const rows = v.lines.map((l) => {
    const times = l.count > 1 ? ` ×${l.count}` : '';
    const hint = l.allowEntry ? ` — add \`${l.allowEntry}\` to network.allow` : '';
    return `- ${l.denied ? '**refused**' : 'allowed'} \`${l.target}\`${times}: ${escapeMd(l.detail)}${hint}`;
  });
  if (v.more > 0) rows.push(`- ... ${v.more} more${traceId ? ` (Open Trace shows the whole log)` : ''}`);
  return `**Network** ${escapeMd(v.summary)}\n\n${rows.join('\n')}\n`;
}
