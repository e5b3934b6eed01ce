// The one connection pool, from the environment Kiln gives a sandbox with services (DATABASE_URL,
// or the PG* variables that pg also reads); the client library is vendored, see vendor/README.md.
const { Pool } = require('./vendor/pg.js');

function pool() {
  return new Pool(process.env.DATABASE_URL ? { connectionString: process.env.DATABASE_URL } : {});
}

module.exports = { pool };
