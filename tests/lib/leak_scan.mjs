// Looking for a value's bytes where it must not be: every regular file below a directory
// (databases, their WAL and SHM, traces, logs included), for the secret tests' leak scans.
import fs from 'node:fs';
import path from 'node:path';

// Every regular file below `dir` whose bytes contain `needle`, relative to `dir`, sorted.
export function filesHolding(dir, needle) {
  const hits = [];
  const bytes = Buffer.from(needle);
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    const p = path.join(entry.parentPath ?? entry.path, entry.name);
    if (!entry.isFile()) continue;
    let data;
    try { data = fs.readFileSync(p); } catch { continue; }
    if (data.includes(bytes)) hits.push(path.relative(dir, p));
  }
  return hits.sort();
}
