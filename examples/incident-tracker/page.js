// The HTML of the one page: the incident list and the report form. Every value from the database or
// the request goes through esc(), and every link and form action starts at the app's base path.
const SEVERITIES = ['low', 'medium', 'high', 'critical'];

const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);

function row(i) {
  return `<tr><td>${i.id}</td><td>${esc(i.title)}</td><td class="sev-${esc(i.severity)}">${esc(i.severity)}</td>` +
    `<td>${esc(i.reported_by)}</td><td>${esc(new Date(i.created_at).toISOString())}</td></tr>`;
}

function listPage(base, incidents, user) {
  const options = SEVERITIES.map((s) => `<option${s === 'medium' ? ' selected' : ''}>${s}</option>`).join('');
  const rows = incidents.length ? incidents.map(row).join('\n') : '<tr><td colspan="5">No incidents yet.</td></tr>';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Incidents</title>
<style>body{font:15px system-ui,sans-serif;margin:2em}table{border-collapse:collapse}td,th{padding:.3em .8em;border-bottom:1px solid #ddd;text-align:left}.sev-high,.sev-critical{color:#b00}</style>
</head><body>
<h1>Incidents</h1>
<p>Signed in as <b>${esc(user)}</b>. JSON: <a href="${esc(base)}api/incidents">incidents</a>, <a href="${esc(base)}api/digests">digests</a>.</p>
<form method="post" action="${esc(base)}incidents">
<input name="title" required maxlength="200" placeholder="What happened?" size="40">
<select name="severity">${options}</select>
<button>Report</button>
</form>
<table><thead><tr><th>#</th><th>Title</th><th>Severity</th><th>Reported by</th><th>When (UTC)</th></tr></thead>
<tbody>
${rows}
</tbody></table>
</body></html>
`;
}

module.exports = { SEVERITIES, esc, listPage };
