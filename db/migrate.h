// Schema versions by PRAGMA user_version: each step brings the schema to its version, and a
// database is only ever moved forward, one transaction for all the steps it lacks.
#pragma once

#include <span>

#include "core/error.h"
#include "db/database.h"

namespace kiln::db {

struct Migration {
  int version;      // user_version after this step; steps are listed in increasing order
  const char* sql;  // the step's statements, without the user_version pragma
};

// Runs, in order, the steps above the database's user_version and sets user_version after each,
// all in one BEGIN IMMEDIATE transaction: a failed step leaves the database as it was. An
// up-to-date database is only read (start-up should not cost a write), and a database another
// process migrated while this one waited for the lock is left alone.
Result<void> migrate(Database& db, std::span<const Migration> steps);

}  // namespace kiln::db
