// The schema. kiln.json runs it as the database's `setup`: once for the development database,
// once for the template every verify run's fresh database is copied from.
const { pool } = require('./db.js');

const SCHEMA = `
CREATE TABLE IF NOT EXISTS notes (
  id         serial PRIMARY KEY,
  title      text NOT NULL CHECK (title <> ''),
  body       text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now()
)`;

async function main() {
  const db = pool();
  try {
    await db.query(SCHEMA);
    console.log('migrate: table notes is there');
  } finally {
    await db.end();
  }
}

main().catch((e) => {
  console.error(`migrate: ${e.message}`);
  process.exit(1);
});
