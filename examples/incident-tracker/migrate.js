// The schema. kiln.json runs it as the database's `setup`, once per new database (the app's, a
// development sandbox's, verify's template); IF NOT EXISTS makes a second run harmless.
const { pool } = require('./db.js');

const SCHEMA = `
CREATE TABLE IF NOT EXISTS incidents (
  id          serial PRIMARY KEY,
  title       text NOT NULL CHECK (title <> ''),
  severity    text NOT NULL CHECK (severity IN ('low', 'medium', 'high', 'critical')),
  reported_by text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS digests (
  id         serial PRIMARY KEY,
  day        date NOT NULL,
  count      integer NOT NULL,
  titles     text[] NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
)`;

async function main() {
  const db = pool();
  try {
    await db.query(SCHEMA);
    console.log('migrate: tables incidents and digests are there');
  } finally {
    await db.end();
  }
}

main().catch((e) => {
  console.error(`migrate: ${e.message}`);
  process.exit(1);
});
