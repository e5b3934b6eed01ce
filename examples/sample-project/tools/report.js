// Turns the JUnit report of the test check into a small HTML page (reports/index.html), the page
// `make demo` publishes once the checks pass. No dependencies: a few regular expressions are
// enough for the XML node's junit reporter writes.
import fs from 'node:fs';
import path from 'node:path';

const [input = 'reports/junit.xml', output = 'reports/index.html'] = process.argv.slice(2);
const xml = fs.readFileSync(input, 'utf8');

const unescape = (s) =>
  s.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&apos;/g, "'").replace(/&amp;/g, '&');
const escape = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

const cases = [];
for (const m of xml.matchAll(/<testcase\b([^>]*?)(\/>|>([\s\S]*?)<\/testcase>)/g)) {
  const attr = (name) => unescape(m[1].match(new RegExp(`\\b${name}="([^"]*)"`))?.[1] ?? '');
  const body = m[3] ?? '';
  const status = /<failure\b/.test(body) ? 'fail' : /<skipped\b/.test(body) ? 'skip' : 'pass';
  cases.push({ name: attr('name'), suite: attr('classname'), time: attr('time'), status });
}
const count = (s) => cases.filter((c) => c.status === s).length;
const [passed, failed, skipped] = [count('pass'), count('fail'), count('skip')];
const verdict = failed ? `${failed} failing` : 'all passing';

const rows = cases
  .map((c) => `<tr class="${c.status}"><td>${c.status}</td><td>${escape(c.name)}</td><td>${escape(c.time)} s</td></tr>`)
  .join('\n');
const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>textkit test report</title>
<style>
body { font: 15px/1.5 system-ui, sans-serif; margin: 2rem auto; max-width: 44rem; color: #222; }
table { border-collapse: collapse; width: 100%; }
td { border-bottom: 1px solid #ddd; padding: .3rem .6rem; }
tr.pass td:first-child { color: #1a7f37; } tr.fail td:first-child { color: #cf222e; font-weight: bold; }
</style>
</head>
<body>
<h1>textkit test report: ${verdict}</h1>
<p id="summary">${cases.length} tests: ${passed} passed, ${failed} failed, ${skipped} skipped.</p>
<table>
${rows}
</table>
</body>
</html>
`;
fs.mkdirSync(path.dirname(output), { recursive: true });
fs.writeFileSync(output, html);
console.log(`${output}: ${cases.length} tests, ${passed} passed, ${failed} failed, ${skipped} skipped`);
