// Reverse application of a unified diff (as Kiln's checkpoint_diff writes them: "--- a/P",
// "+++ b/P", @@ hunks, lines keeping their own endings, "\ No newline at end of file"). Kiln has no
// "read a file at a checkpoint" tool; checkpoint_diff {from: CP, path} against the files now gives
// the diff from CP to now, so undoing it on the file as it is now gives the file as CP had it.

export class PatchError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PatchError';
  }
}

interface HunkLine {
  kind: ' ' | '-' | '+';
  text: string; // with its '\n', unless the line had none
}

interface Hunk {
  oldStart: number;
  oldCount: number;
  newStart: number;
  newCount: number;
  lines: HunkLine[];
}

/** Splits a text into lines that keep their '\n' (a last line without one stays without). */
export function splitLines(text: string): string[] {
  const out: string[] = [];
  let pos = 0;
  while (pos < text.length) {
    const nl = text.indexOf('\n', pos);
    const end = nl < 0 ? text.length : nl + 1;
    out.push(text.slice(pos, end));
    pos = end;
  }
  return out;
}

export function parseHunks(diff: string): Hunk[] {
  const lines = splitLines(diff);
  const hunks: Hunk[] = [];
  let cur: Hunk | undefined;
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i];
    if (!cur && (l.startsWith('--- ') || l.startsWith('+++ '))) continue;
    const m = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/.exec(l);
    if (m) {
      cur = {
        oldStart: Number(m[1]),
        oldCount: m[2] === undefined ? 1 : Number(m[2]),
        newStart: Number(m[3]),
        newCount: m[4] === undefined ? 1 : Number(m[4]),
        lines: [],
      };
      hunks.push(cur);
      continue;
    }
    if (!cur) throw new PatchError(`not a unified diff: ${JSON.stringify(l.slice(0, 60))}`);
    if (l.startsWith('\\')) {
      // "\ No newline at end of file": the line before has no '\n' of its own.
      const prev = cur.lines[cur.lines.length - 1];
      if (prev && prev.text.endsWith('\n')) prev.text = prev.text.slice(0, -1);
      continue;
    }
    const kind = l[0];
    if (kind !== ' ' && kind !== '-' && kind !== '+') throw new PatchError(`bad diff line: ${JSON.stringify(l.slice(0, 60))}`);
    cur.lines.push({ kind, text: l.slice(1) });
  }
  for (const h of hunks) {
    const olds = h.lines.filter((x) => x.kind !== '+').length;
    const news = h.lines.filter((x) => x.kind !== '-').length;
    if (olds !== h.oldCount || news !== h.newCount) throw new PatchError('a hunk is cut short (the diff was truncated?)');
  }
  return hunks;
}

/** The text before `diff` was applied, given the text after it. Throws PatchError when they do not fit. */
export function reverseApply(after: string, diff: string): string {
  if (!diff) return after;
  const lines = splitLines(after);
  const out: string[] = [];
  let at = 0; // next line of `after` (0-based) not yet copied
  for (const h of parseHunks(diff)) {
    // newStart is 1-based; an empty new side names the line before it.
    const start = h.newCount === 0 ? h.newStart : h.newStart - 1;
    if (start < at || start > lines.length) throw new PatchError('the diff does not fit the file (it changed meanwhile?)');
    out.push(...lines.slice(at, start));
    at = start;
    for (const l of h.lines) {
      if (l.kind === '-') {
        out.push(l.text);
        continue;
      }
      if (lines[at] !== l.text) throw new PatchError(`the diff does not fit the file at line ${at + 1} (it changed meanwhile?)`);
      if (l.kind === ' ') out.push(l.text);
      at++;
    }
  }
  out.push(...lines.slice(at));
  return out.join('');
}
