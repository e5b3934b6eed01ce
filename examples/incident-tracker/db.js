// The one connection pool, from DATABASE_URL (Kiln sets it for an app or sandbox with a postgres
// service; pg also reads the PG* variables when it is not set).
const { Pool } = require('pg');

function pool() {
  return new Pool(process.env.DATABASE_URL ? { connectionString: process.env.DATABASE_URL } : {});
}

module.exports = { pool };
