// The daily digest (kiln.json schedule "digest"): the incidents of the last 24 hours, kept as a row
// in the digests table and as a text file in the app's data folder, with one line on stdout for
// the schedule's trace.
const fs = require('node:fs');
const path = require('node:path');
const { pool } = require('../db.js');

async function main() {
  const db = pool();
  try {
    const { rows } = await db.query("SELECT title, severity FROM incidents WHERE created_at > now() - interval '24 hours' ORDER BY id");
    const day = new Date().toISOString().slice(0, 10);
    const titles = rows.map((r) => r.title);
    await db.query('INSERT INTO digests (day, count, titles) VALUES ($1, $2, $3)', [day, rows.length, titles]);
    // KILN_DATA_DIR is the app's writable folder; outside Kiln, ./data.
    const dir = path.join(process.env.KILN_DATA_DIR || 'data', 'digests');
    fs.mkdirSync(dir, { recursive: true });
    const file = path.join(dir, `${day}.txt`);
    const text = [`Incidents in the 24 hours before ${new Date().toISOString()}: ${rows.length}`, ...rows.map((r) => `- [${r.severity}] ${r.title}`)];
    fs.writeFileSync(file, text.join('\n') + '\n');
    console.log(`digest ${day}: ${rows.length} incident(s) in the last 24 h${titles.length ? ': ' + titles.join('; ') : ''} (${file})`);
  } finally {
    await db.end();
  }
}

main().catch((e) => {
  console.error(`digest: ${e.message}`);
  process.exit(1);
});
