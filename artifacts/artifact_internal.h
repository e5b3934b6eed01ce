// What the artifact store's .cpp files share and nobody else sees: the SQLite statement wrapper,
// the row types behind ArtifactStore's private members, and small encoding helpers.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "artifacts/artifact_store.h"

namespace kiln::artifacts {

namespace detail {

// A statement that finalizes itself.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &st_, nullptr); }
  ~Stmt() { sqlite3_finalize(st_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  void bind(int i, std::string_view s) { sqlite3_bind_text(st_, i, s.data(), int(s.size()), SQLITE_TRANSIENT); }
  void bind(int i, const char* s) { bind(i, std::string_view(s)); }
  void bind(int i, const std::string& s) { bind(i, std::string_view(s)); }
  void bind(int i, std::int64_t v) { sqlite3_bind_int64(st_, i, v); }
  void bind(int i, int v) { sqlite3_bind_int64(st_, i, v); }
  void bind(int i, std::uint64_t v) { sqlite3_bind_int64(st_, i, std::int64_t(v)); }
  void bind(int i, bool v) { sqlite3_bind_int64(st_, i, v ? 1 : 0); }
  void bind_null(int i) { sqlite3_bind_null(st_, i); }
  template <class T>
  void bind(int i, const std::optional<T>& v) {
    if (v) bind(i, *v);
    else bind_null(i);
  }
  int step() { return sqlite3_step(st_); }
  void reset() {
    sqlite3_reset(st_);
    sqlite3_clear_bindings(st_);
  }
  bool is_null(int col) const { return sqlite3_column_type(st_, col) == SQLITE_NULL; }
  std::int64_t int64(int col) const { return sqlite3_column_int64(st_, col); }
  std::string text(int col) const {
    auto p = reinterpret_cast<const char*>(sqlite3_column_text(st_, col));
    return p ? std::string(p, std::size_t(sqlite3_column_bytes(st_, col))) : std::string();
  }
  std::optional<std::string> opt_text(int col) const { return is_null(col) ? std::nullopt : std::optional(text(col)); }
  std::optional<std::int64_t> opt_int(int col) const {
    return is_null(col) ? std::nullopt : std::optional(int64(col));
  }

 private:
  sqlite3_stmt* st_ = nullptr;
  int rc_ = SQLITE_ERROR;
};

Error db_error(sqlite3* db, std::string_view what);

// BEGIN IMMEDIATE (the write lock up front, so a busy database waits in busy_timeout instead of
// failing half-way); rolls back unless commit() succeeded.
class Tx {
 public:
  explicit Tx(sqlite3* db) : db_(db) {}
  ~Tx();
  Tx(const Tx&) = delete;
  Tx& operator=(const Tx&) = delete;
  Result<void> begin();
  Result<void> commit();

 private:
  sqlite3* db_;
  bool open_ = false;
};

std::string iso_utc(std::int64_t unix_s);  // "2026-11-30T20:15:02Z"
std::int64_t real_now_s();
std::string base64url(std::string_view bytes);
std::optional<std::string> base64url_decode(std::string_view text);
std::string to_hex(const unsigned char* p, std::size_t n);
std::string sha256_hex(std::string_view bytes);
bool valid_sha256_hex(std::string_view s);
// A path as it appears in a manifest: relative, '/'-separated, no empty, "." or ".." components,
// no NUL. Anything else can only be a miss, so resolve refuses it outright.
bool valid_manifest_path(std::string_view p);
// now + s, saturating instead of overflowing on absurd expiries.
std::int64_t add_seconds(std::int64_t now, std::int64_t s);
// now + s + 1: an expiry `s` seconds from a whole-second clock that lasts at least `s` seconds.
std::int64_t expiry_after(std::int64_t now, std::int64_t s);
// The text of a failed write into the state directory; a full disk says so and what to do.
std::string write_failure(const std::string& dir, int err);

}  // namespace detail

struct ArtifactStore::Row {
  std::string name;
  std::string workspace_id;
  Share share = Share::public_;
  std::optional<std::string> password_hash;
  std::optional<std::int64_t> expires_at;
  std::int64_t share_gen = 1;
  std::int64_t next_version = 1;
  std::string created_at;
};

struct StagedFile {
  std::string path;  // inside the version
  std::string sha256;
  std::uint64_t size = 0;
};

struct ArtifactStore::Staged {
  std::vector<StagedFile> files;
  std::uint64_t bytes = 0;
  std::uint64_t new_blobs = 0;
  std::uint64_t skipped_symlinks = 0;
  std::uint64_t skipped_other = 0;
};

struct ArtifactStore::ShareChange {
  std::optional<Share> share;
  std::optional<std::string> password_hash;  // already hashed, outside the lock
  std::vector<std::string> invite_names;
  std::vector<std::string> revoke;
  std::optional<std::int64_t> expires_in_s;
  std::optional<std::int64_t> invite_expires_in_s;
};

}  // namespace kiln::artifacts
