// Opening a store's database: the file mode, the connection flags and the pragmas every store
// relies on, and the wording of the errors a store hands to its callers.
#include "db/database.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "core/unique_fd.h"
#include "db/migrate.h"
#include "db/statement.h"
#include "db/statement_cache.h"

namespace kiln::db {

namespace {

bool is_wal(Database& db) {
  Statement mode(db, "PRAGMA journal_mode");
  auto row = mode.next("journal_mode");
  return row && *row && mode.text(0) == "wal";
}

// A new database is made by one process at a time. Its switch to WAL needs the file to itself, and
// SQLite answers SQLITE_BUSY at once (the busy timeout does not cover it) when another process
// reads or switches the same new file: two `kiln mcp` starting on a fresh state directory lost one
// of them to "database is locked" about once in twenty starts. The turn is an flock of the
// database's folder: it waits without polling and goes with a process that dies. Without the folder
// (it cannot be opened) there is no turn, as before.
UniqueFd take_turn(const std::string& path) {
  auto slash = path.rfind('/');
  std::string folder = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  UniqueFd fd(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return fd;
  while (::flock(fd.get(), LOCK_EX) != 0)
    if (errno != EINTR) return UniqueFd();
  return fd;
}

}  // namespace

Result<Database> Database::open(const std::string& path, const OpenOptions& options) {
  // Held while this process may be the one making the database (see take_turn): from the start when
  // the file is missing or empty, else only if it is found not yet in WAL mode.
  UniqueFd turn;
  if (struct stat st {}; ::stat(path.c_str(), &st) != 0 || st.st_size == 0) turn = take_turn(path);
  if (options.private_file) {
    if (int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600); fd >= 0) {
      ::fchmod(fd, 0600);
      ::close(fd);
    }
  }
  Database db;
  db.label_ = options.label;
  db.cache_ = std::make_unique<StatementCache>();
  int rc = sqlite3_open_v2(path.c_str(), &db.db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    return fail(Errc::io, "cannot open " + options.label + " database " + path + ": " +
                              (db.db_ ? sqlite3_errmsg(db.db_) : "out of memory"));
  }
  sqlite3_busy_timeout(db.db_, options.busy_timeout_ms);
  if (auto r = db.exec("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"); !r) return std::unexpected(r.error());
  // journal_mode=WAL persists in the file, so only a new database needs the switch (a write).
  if (!is_wal(db)) {
    if (!turn) turn = take_turn(path);
    if (!is_wal(db)) {
      if (auto r = db.exec("PRAGMA journal_mode=WAL;"); !r && !is_wal(db)) return std::unexpected(r.error());
    }
  }
  if (auto r = migrate(db, options.schema); !r) return std::unexpected(r.error());
  return db;
}

Database::Database() = default;

Database::~Database() {
  cache_.reset();  // its statements are finalized first, or the close would fail
  if (db_) sqlite3_close(db_);
}

Database::Database(Database&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), label_(std::move(other.label_)), cache_(std::move(other.cache_)) {}

Database& Database::operator=(Database&& other) noexcept {
  if (this != &other) {
    cache_.reset();
    if (db_) sqlite3_close(db_);
    db_ = std::exchange(other.db_, nullptr);
    label_ = std::move(other.label_);
    cache_ = std::move(other.cache_);
  }
  return *this;
}

Result<void> Database::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return fail(Errc::io, label_ + " store: " + msg);
  }
  return {};
}

Error Database::error(std::string_view what) const {
  std::string msg = label_ + " store: " + std::string(what) + " failed: " + sqlite3_errmsg(db_);
  // SQLITE_FULL is a full disk under the state directory: say what to do about it.
  if (sqlite3_errcode(db_) == SQLITE_FULL)
    msg += "; the state directory is full: free space there or set KILN_HOME to a folder on a larger disk";
  return Error{Errc::io, std::move(msg)};
}

}  // namespace kiln::db
