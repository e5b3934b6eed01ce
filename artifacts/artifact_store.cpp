// The artifact store's database side: opening and migrating artifacts.db, reading artifacts and
// versions, resolving a URL path to a blob, and removing versions with their unreferenced blobs.
#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "artifacts/artifact_internal.h"
#include "core/owner_tag.h"
#include "db/migrate.h"

namespace kiln::artifacts {

namespace {

constexpr const char* kSchemaV1 =
    "CREATE TABLE IF NOT EXISTS artifacts ("
    "  name TEXT PRIMARY KEY, workspace_id TEXT NOT NULL, share TEXT NOT NULL, password_hash TEXT,"
    "  expires_at INTEGER, share_gen INTEGER NOT NULL DEFAULT 1, next_version INTEGER NOT NULL DEFAULT 1,"
    "  created_at TEXT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS artifacts_by_workspace ON artifacts(workspace_id);"
    "CREATE TABLE IF NOT EXISTS versions ("
    "  artifact TEXT NOT NULL REFERENCES artifacts(name) ON DELETE CASCADE, number INTEGER NOT NULL,"
    "  created_at TEXT NOT NULL, source_path TEXT NOT NULL, single_file INTEGER NOT NULL,"
    "  files INTEGER NOT NULL, bytes INTEGER NOT NULL, trace_id TEXT NOT NULL DEFAULT '',"
    "  PRIMARY KEY (artifact, number));"
    // The manifest as rows rather than one JSON value: serving a file is one indexed lookup, not a
    // parse of up to 20000 entries per request.
    "CREATE TABLE IF NOT EXISTS files ("
    "  artifact TEXT NOT NULL, version INTEGER NOT NULL, path TEXT NOT NULL, sha256 TEXT NOT NULL,"
    "  size INTEGER NOT NULL, PRIMARY KEY (artifact, version, path),"
    "  FOREIGN KEY (artifact, version) REFERENCES versions(artifact, number) ON DELETE CASCADE) WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS files_by_blob ON files(sha256);"
    // AUTOINCREMENT: an invite cookie names its invite by id, so an id must never come back.
    "CREATE TABLE IF NOT EXISTS invites ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  artifact TEXT NOT NULL REFERENCES artifacts(name) ON DELETE CASCADE, name TEXT NOT NULL,"
    "  token_hash TEXT NOT NULL UNIQUE, created_at TEXT NOT NULL, expires_at INTEGER,"
    "  revoked INTEGER NOT NULL DEFAULT 0);"
    "CREATE UNIQUE INDEX IF NOT EXISTS invites_live_name ON invites(artifact, name) WHERE revoked = 0;";

// Version 2: an artifact removed whole leaves its next version number behind, so publishing the
// name again never hands out /a/NAME/v/N/ again (those URLs were served as immutable and
// browsers keep them for a year).
constexpr const char* kSchemaV2 =
    "CREATE TABLE IF NOT EXISTS retired_names (name TEXT PRIMARY KEY, next_version INTEGER NOT NULL);";

// Version 3: a version may be an app; its run configuration (JSON text) travels with the immutable
// copy, so a restart of kiln serve runs it as published whatever kiln.json says later. NULL: static.
constexpr const char* kSchemaV3 = "ALTER TABLE versions ADD COLUMN app TEXT;";

constexpr db::Migration kSchema[] = {{1, kSchemaV1}, {2, kSchemaV2}, {3, kSchemaV3}};

bool make_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) return false;
  ::chmod(path.c_str(), 0700);
  return true;
}

}  // namespace

Result<std::unique_ptr<ArtifactStore>> ArtifactStore::open(const std::string& state_dir) {
  if (sodium_init() < 0) return fail(Errc::internal, "libsodium could not be initialised");
  std::error_code ec;
  std::filesystem::create_directories(state_dir, ec);
  if (ec) {
    return fail(Errc::io, fmt::format("cannot create state directory {}: {}; set KILN_HOME to a writable folder",
                                      state_dir, ec.message()));
  }
  // Password hashes, invite hashes and the cookie key live here: for the user's eyes only.
  ::chmod(state_dir.c_str(), 0700);
  for (const char* sub : {"/blobs", "/blobs/sha256", "/blobs/tmp", "/blobs/trash"}) {
    if (!make_dir(state_dir + sub))
      return fail(Errc::io, fmt::format("cannot create {}{}: {}", state_dir, sub, std::strerror(errno)));
  }
  std::unique_ptr<ArtifactStore> store(new ArtifactStore(state_dir));
  auto db = db::Database::open(
      state_dir + "/artifacts.db",
      {.label = "artifact", .busy_timeout_ms = 10000, .private_file = true, .schema = kSchema});
  if (!db) return std::unexpected(db.error());
  store->db_ = std::move(*db);
  store->reclaim_leftovers();
  if (auto r = store->load_cookie_key(); !r) return std::unexpected(r.error());
  return store;
}

Result<void> ArtifactStore::load_cookie_key() {
  // Created once per state directory and shared by every process that opens it, so a cookie set
  // by one `kiln serve` stays valid after a restart. link() makes the first creator win a race.
  const std::string path = dir_ + "/serve.key";
  for (int attempt = 0; attempt < 3; ++attempt) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
      unsigned char key[32];
      ssize_t n = ::read(fd, key, sizeof key);
      ::close(fd);
      if (n != ssize_t(sizeof key))
        return fail(Errc::io, fmt::format("{} is not a 32-byte key; delete it and start again (logins will be asked again)", path));
      cookie_key_.assign(reinterpret_cast<const char*>(key), sizeof key);
      sodium_memzero(key, sizeof key);
      key_cookie_mac();
      return {};
    }
    if (errno != ENOENT) return fail(Errc::io, fmt::format("cannot read {}: {}", path, std::strerror(errno)));
    std::string tmp = dir_ + "/blobs/tmp/serve.key." + kiln::owner_tag() + ".XXXXXX";
    int out = ::mkstemp(tmp.data());
    if (out < 0) return fail(Errc::io, fmt::format("cannot create {}: {}", tmp, std::strerror(errno)));
    ::fchmod(out, 0600);
    unsigned char key[32];
    randombytes_buf(key, sizeof key);
    bool ok = ::write(out, key, sizeof key) == ssize_t(sizeof key) && ::fsync(out) == 0;
    sodium_memzero(key, sizeof key);
    ::close(out);
    if (ok && ::link(tmp.c_str(), path.c_str()) != 0 && errno != EEXIST) ok = false;
    ::unlink(tmp.c_str());
    if (!ok) return fail(Errc::io, fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  }
  return fail(Errc::io, fmt::format("cannot create {}", path));
}

std::int64_t ArtifactStore::now() const { return clock_ ? clock_() : detail::real_now_s(); }

void ArtifactStore::set_clock(std::function<std::int64_t()> now_s) {
  std::lock_guard lock(mu_);
  clock_ = std::move(now_s);
}

void ArtifactStore::set_limits(std::uint64_t max_files, std::uint64_t max_bytes) {
  std::lock_guard lock(mu_);
  max_files_ = max_files;
  max_bytes_ = max_bytes;
}

std::string ArtifactStore::blob_path(const std::string& sha256) const {
  return fmt::format("{}/blobs/sha256/{}/{}", dir_, sha256.substr(0, 2), sha256);
}

Result<std::optional<ArtifactStore::Row>> ArtifactStore::row_locked(const std::string& name) {
  db::Statement s(db_,
                  "SELECT name, workspace_id, share, password_hash, expires_at, share_gen, next_version, created_at "
                  "FROM artifacts WHERE name = ?1");
  s.bind(1, name);
  auto found = s.next("select artifact");
  if (!found) return std::unexpected(found.error());
  if (!*found) return std::optional<Row>();
  Row r;
  r.name = s.text(0);
  r.workspace_id = s.text(1);
  r.share = parse_share(s.text(2)).value_or(Share::password);  // unknown: fail closed
  r.password_hash = s.opt_text(3);
  r.expires_at = s.opt_int(4);
  r.share_gen = s.int64(5);
  r.next_version = s.int64(6);
  r.created_at = s.text(7);
  return std::optional<Row>(std::move(r));
}

Result<ArtifactInfo> ArtifactStore::info_locked(const Row& row) {
  const std::int64_t t = now();
  ArtifactInfo a;
  a.name = row.name;
  a.workspace_id = row.workspace_id;
  a.share = row.share;
  a.has_password = row.password_hash.has_value();
  if (row.expires_at) a.expires_at = detail::iso_utc(*row.expires_at);
  a.expired = row.expires_at && *row.expires_at <= t;
  a.created_at = row.created_at;
  db::Statement v(db_,
                  "SELECT number, created_at, source_path, single_file, files, bytes, trace_id, app FROM versions "
                  "WHERE artifact = ?1 ORDER BY number");
  v.bind(1, row.name);
  auto versions = v.each("select versions", [&] {
    VersionInfo info{int(v.int64(0)), v.text(1), v.text(2), v.int64(3) != 0,
                     std::uint64_t(v.int64(4)), std::uint64_t(v.int64(5)), v.text(6), std::nullopt};
    if (auto app = v.opt_text(7)) {
      // Written by publish from a json dump; unreadable text would be a corrupt row, shown as an
      // app without configuration (the supervisor refuses to start it and says why) rather than
      // silently as a static site.
      auto parsed = nlohmann::json::parse(*app, nullptr, false);
      info.app = parsed.is_discarded() ? nlohmann::json::object() : std::move(parsed);
    }
    a.versions.push_back(std::move(info));
  });
  if (!versions) return std::unexpected(versions.error());
  db::Statement i(db_, "SELECT name, created_at, expires_at, revoked FROM invites WHERE artifact = ?1 ORDER BY id");
  i.bind(1, row.name);
  auto invites = i.each("select invites", [&] {
    InviteInfo inv;
    inv.name = i.text(0);
    inv.created_at = i.text(1);
    if (auto e = i.opt_int(2)) {
      inv.expires_at = detail::iso_utc(*e);
      inv.expired = *e <= t;
    }
    inv.revoked = i.int64(3) != 0;
    a.invites.push_back(std::move(inv));
  });
  if (!invites) return std::unexpected(invites.error());
  return a;
}

Result<std::vector<ArtifactInfo>> ArtifactStore::list(const std::string& workspace_id) {
  std::lock_guard lock(mu_);
  db::Statement s(db_, workspace_id.empty() ? "SELECT name FROM artifacts ORDER BY name"
                                            : "SELECT name FROM artifacts WHERE workspace_id = ?1 ORDER BY name");
  if (!workspace_id.empty()) s.bind(1, workspace_id);
  std::vector<std::string> names;
  if (auto r = s.each("list artifacts", [&] { names.push_back(s.text(0)); }); !r) return std::unexpected(r.error());
  std::vector<ArtifactInfo> out;
  for (const auto& n : names) {
    auto row = row_locked(n);
    if (!row) return std::unexpected(row.error());
    if (!*row) continue;  // removed meanwhile by another process
    auto info = info_locked(**row);
    if (!info) return std::unexpected(info.error());
    out.push_back(std::move(*info));
  }
  return out;
}

Result<std::optional<ArtifactInfo>> ArtifactStore::get(const std::string& name) {
  std::lock_guard lock(mu_);
  auto row = row_locked(name);
  if (!row) return std::unexpected(row.error());
  if (!*row) return std::optional<ArtifactInfo>();
  auto info = info_locked(**row);
  if (!info) return std::unexpected(info.error());
  return std::optional<ArtifactInfo>(std::move(*info));
}

Result<ResolvedFile> ArtifactStore::resolve(const std::string& name, std::optional<int> version,
                                            std::string_view path) {
  auto miss = [&] {
    return fail(Errc::not_found, fmt::format("artifact {} has no file '{}'", name, path));
  };
  std::lock_guard lock(mu_);
  db::Statement v(db_, version ? "SELECT number, single_file, app IS NOT NULL FROM versions WHERE artifact = ?1 AND "
                                 "number = ?2"
                               : "SELECT number, single_file, app IS NOT NULL FROM versions WHERE artifact = ?1 ORDER BY "
                                 "number DESC LIMIT 1");
  v.bind(1, name);
  if (version) v.bind(2, *version);
  auto found = v.next("select version");
  if (!found) return std::unexpected(found.error());
  if (!*found) {
    return fail(Errc::not_found, version ? fmt::format("artifact {} has no version {}", name, *version)
                                         : fmt::format("no artifact {}", name));
  }
  const std::int64_t number = v.int64(0);
  const bool single = v.int64(1) != 0;
  const bool app = v.int64(2) != 0;

  // Candidates in order: the path itself, then the folder's index.html.
  std::vector<std::string> candidates;
  if (path.empty()) {
    if (!single) candidates.push_back("index.html");
  } else if (path.back() == '/') {
    std::string_view dir = path.substr(0, path.size() - 1);
    if (!detail::valid_manifest_path(dir)) return miss();
    candidates.push_back(std::string(dir) + "/index.html");
  } else {
    if (!detail::valid_manifest_path(path)) return miss();
    candidates.emplace_back(path);
    candidates.push_back(std::string(path) + "/index.html");
  }
  // A published file is the version's whole content, served at its root.
  db::Statement f(db_, path.empty() && single
                           ? "SELECT path, sha256, size FROM files WHERE artifact = ?1 AND version = ?2 ORDER BY path "
                             "LIMIT 1"
                           : "SELECT path, sha256, size FROM files WHERE artifact = ?1 AND version = ?2 AND path = ?3");
  if (path.empty() && single) candidates.emplace_back();
  for (const auto& c : candidates) {
    f.reset();
    f.bind(1, name);
    f.bind(2, number);
    if (!(path.empty() && single)) f.bind(3, c);
    auto hit = f.next("select file");
    if (!hit) return std::unexpected(hit.error());
    if (*hit) {
      ResolvedFile out;
      out.logical_path = f.text(0);
      out.sha256 = f.text(1);
      out.size = std::uint64_t(f.int64(2));
      if (!detail::valid_sha256_hex(out.sha256)) return fail(Errc::internal, "artifact store: corrupt file row");
      out.blob_path = blob_path(out.sha256);
      out.content_type = content_type_for(out.logical_path);
      out.app = app;
      return out;
    }
  }
  return miss();
}

Result<nlohmann::json> ArtifactStore::manifest(const std::string& name, int version) {
  std::lock_guard lock(mu_);
  db::Statement s(db_, "SELECT path, sha256, size FROM files WHERE artifact = ?1 AND version = ?2 ORDER BY path");
  s.bind(1, name);
  s.bind(2, version);
  nlohmann::json out = nlohmann::json::object();
  auto listed = s.each("select files", [&] { out[s.text(0)] = {{"sha256", s.text(1)}, {"size", s.int64(2)}}; });
  if (!listed) return std::unexpected(listed.error());
  if (out.empty()) {
    db::Statement v(db_, "SELECT 1 FROM versions WHERE artifact = ?1 AND number = ?2");
    v.bind(1, name);
    v.bind(2, version);
    if (!v.next("select version").value_or(false))
      return fail(Errc::not_found, fmt::format("artifact {} has no version {}", name, version));
  }
  return out;
}

Result<std::vector<int>> ArtifactStore::unpublish(const std::string& name, std::optional<int> version) {
  // The blob lock first, always (publish holds it shared before it takes mu_).
  auto hold = blobs_.lock_exclusive();
  if (!hold) return std::unexpected(hold.error());
  std::lock_guard lock(mu_);
  return unpublish_locked(name, version);
}

void ArtifactStore::set_blob_referrer(BlobReferrer referrer) {
  std::lock_guard lock(mu_);
  referrer_ = std::move(referrer);
}

bool ArtifactStore::held_elsewhere(const std::string& sha) {
  if (!referrer_) return false;
  auto r = referrer_(sha);
  return !r || *r;  // unsure: keep it
}

Result<bool> ArtifactStore::references(const std::string& sha) {
  std::lock_guard lock(mu_);
  db::Statement ref(db_, "SELECT 1 FROM files WHERE sha256 = ?1 LIMIT 1");
  ref.bind(1, sha);
  return ref.next("select files");
}

Result<std::vector<int>> ArtifactStore::unpublish_locked(const std::string& name, std::optional<int> version) {
  db::Transaction tx(db_);
  if (auto r = tx.begin(); !r) return std::unexpected(r.error());
  auto row = row_locked(name);
  if (!row) return std::unexpected(row.error());
  if (!*row) return fail(Errc::not_found, fmt::format("no artifact {} (publish_list or `kiln artifacts list` shows them)", name));
  std::vector<int> removed;
  {
    db::Statement s(db_, version ? "SELECT number FROM versions WHERE artifact = ?1 AND number = ?2 ORDER BY number"
                                 : "SELECT number FROM versions WHERE artifact = ?1 ORDER BY number");
    s.bind(1, name);
    if (version) s.bind(2, *version);
    if (auto r = s.each("select versions", [&] { removed.push_back(int(s.int64(0))); }); !r)
      return std::unexpected(r.error());
  }
  if (version && removed.empty()) return fail(Errc::not_found, fmt::format("artifact {} has no version {}", name, *version));
  std::set<std::string> candidates;
  {
    db::Statement s(db_, version ? "SELECT DISTINCT sha256 FROM files WHERE artifact = ?1 AND version = ?2"
                                 : "SELECT DISTINCT sha256 FROM files WHERE artifact = ?1");
    s.bind(1, name);
    if (version) s.bind(2, *version);
    if (auto r = s.each("select files", [&] { candidates.insert(s.text(0)); }); !r) return std::unexpected(r.error());
  }
  if (!version) {
    db::Statement keep(db_,
                       "INSERT INTO retired_names(name, next_version) SELECT name, next_version FROM artifacts "
                       "WHERE name = ?1 ON CONFLICT(name) DO UPDATE SET next_version = max(next_version, "
                       "excluded.next_version)");
    keep.bind(1, name);
    if (auto r = keep.run("retire name"); !r) return std::unexpected(r.error());
  }
  {
    db::Statement d(db_, version ? "DELETE FROM versions WHERE artifact = ?1 AND number = ?2"
                                 : "DELETE FROM artifacts WHERE name = ?1");
    d.bind(1, name);
    if (version) d.bind(2, *version);
    if (auto r = d.run("delete"); !r) return std::unexpected(r.error());
  }
  // Blobs nobody references any more go to the trash while the write lock is held: a publish
  // that deduplicated against one checks, under the same lock, that its blobs still exist.
  std::vector<std::pair<std::string, std::string>> trashed;  // blob, trash path
  auto restore = [&] {
    for (const auto& [from, to] : trashed) ::rename(to.c_str(), from.c_str());
  };
  db::Statement ref(db_, "SELECT 1 FROM files WHERE sha256 = ?1 LIMIT 1");
  for (const auto& sha : candidates) {
    ref.reset();
    ref.bind(1, sha);
    auto used = ref.next("select files");
    if (used && *used) continue;
    if (!used) {
      restore();
      return std::unexpected(used.error());
    }
    if (!detail::valid_sha256_hex(sha) || held_elsewhere(sha)) continue;
    std::string from = blob_path(sha), to = fmt::format("{}/blobs/trash/{}.{:08x}", dir_, sha, randombytes_random());
    if (::rename(from.c_str(), to.c_str()) == 0) trashed.emplace_back(from, to);
  }
  if (auto r = tx.commit(); !r) {
    restore();
    return std::unexpected(r.error());
  }
  for (const auto& t : trashed) ::unlink(t.second.c_str());
  return removed;
}

}  // namespace kiln::artifacts
