// Renders a tmux `capture-pane -e -p` dump (text with SGR colour codes) to a PNG through an HTML
// <pre> in headless Chromium (playwright-core from tests/node_modules, Debian's /usr/bin/chromium).
// Usage: node render-screen.mjs SCREEN.ansi OUT.png [title]
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const [input, output, title = ''] = process.argv.slice(2);
if (!input || !output) {
  console.error('usage: node render-screen.mjs SCREEN.ansi OUT.png [title]');
  process.exit(2);
}

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../../package.json'));
const { chromium } = require('playwright-core');

// xterm's 16 colours, then the 6x6x6 cube and the grey ramp.
const base16 = ['#000000', '#cd3131', '#0dbc79', '#e5e510', '#2472c8', '#bc3fbc', '#11a8cd', '#e5e5e5',
  '#666666', '#f14c4c', '#23d18b', '#f5f543', '#3b8eea', '#d670d6', '#29b8db', '#ffffff'];
function color256(n) {
  if (n < 16) return base16[n];
  if (n < 232) {
    const c = n - 16;
    const v = (x) => (x === 0 ? 0 : 55 + x * 40);
    return `rgb(${v(Math.floor(c / 36))},${v(Math.floor(c / 6) % 6)},${v(c % 6)})`;
  }
  const g = 8 + (n - 232) * 10;
  return `rgb(${g},${g},${g})`;
}

const DEFAULT_FG = '#e0e2ea';
const DEFAULT_BG = '#14161b';
const esc = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function render(text) {
  let st = { fg: null, bg: null, bold: false, italic: false, underline: false, reverse: false };
  let html = '';
  const re = /\x1b\[([0-9;:]*)m/g;
  let last = 0;
  const emit = (chunk) => {
    if (!chunk) return;
    let fg = st.fg ?? DEFAULT_FG;
    let bg = st.bg;
    if (st.reverse) [fg, bg] = [bg ?? DEFAULT_BG, fg];
    const css = [`color:${fg}`];
    if (bg) css.push(`background:${bg}`);
    if (st.bold) css.push('font-weight:bold');
    if (st.italic) css.push('font-style:italic');
    if (st.underline) css.push('text-decoration:underline');
    html += `<span style="${css.join(';')}">${esc(chunk)}</span>`;
  };
  for (let m; (m = re.exec(text));) {
    emit(text.slice(last, m.index));
    last = re.lastIndex;
    const p = m[1] === '' ? [0] : m[1].split(/[;:]/).map(Number);
    for (let i = 0; i < p.length; i++) {
      const c = p[i];
      if (c === 0) st = { fg: null, bg: null, bold: false, italic: false, underline: false, reverse: false };
      else if (c === 1) st.bold = true;
      else if (c === 3) st.italic = true;
      else if (c === 4) st.underline = true;
      else if (c === 7) st.reverse = true;
      else if (c === 22) st.bold = false;
      else if (c === 23) st.italic = false;
      else if (c === 24) st.underline = false;
      else if (c === 27) st.reverse = false;
      else if (c >= 30 && c <= 37) st.fg = base16[c - 30];
      else if (c >= 90 && c <= 97) st.fg = base16[c - 90 + 8];
      else if (c >= 40 && c <= 47) st.bg = base16[c - 40];
      else if (c >= 100 && c <= 107) st.bg = base16[c - 100 + 8];
      else if (c === 39) st.fg = null;
      else if (c === 49) st.bg = null;
      else if (c === 38 || c === 48) {
        let col = null;
        if (p[i + 1] === 5) { col = color256(p[i + 2]); i += 2; }
        else if (p[i + 1] === 2) { col = `rgb(${p[i + 2]},${p[i + 3]},${p[i + 4]})`; i += 4; }
        if (c === 38) st.fg = col; else st.bg = col;
      }
    }
  }
  emit(text.slice(last));
  return html;
}

const screen = readFileSync(input, 'utf8').replace(/\n$/, '');
const page = `<!doctype html><meta charset="utf-8"><style>
  body { margin: 0; background: #0b0c0f; padding: 18px; font-family: sans-serif; }
  .title { color: #9aa0a6; font-size: 13px; margin: 0 0 8px 4px; }
  pre { margin: 0; padding: 10px 12px; display: inline-block; background: ${DEFAULT_BG}; color: ${DEFAULT_FG};
        font: 14px/1.3 "DejaVu Sans Mono", "Liberation Mono", monospace; border-radius: 6px;
        box-shadow: 0 4px 20px rgba(0,0,0,.5); }
</style><body><div id="shot" style="display:inline-block">${title ? `<div class="title">${esc(title)}</div>` : ''}<pre>${render(screen)}</pre></div></body>`;

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
try {
  const p = await browser.newPage({ deviceScaleFactor: 1 });
  await p.setContent(page);
  await p.locator('#shot').screenshot({ path: output });
} finally {
  await browser.close();
}
console.log(`wrote ${output}`);
