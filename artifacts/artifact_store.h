// Published artifacts: immutable, content-addressed copies of a workspace folder or file, versioned
// per artifact name, with the share state (public, password, invite) that `kiln serve` enforces.
// SQLite (WAL) metadata in <state>/artifacts.db; file bytes in <state>/blobs/sha256/<aa>/<hex>,
// stored once however many versions or artifacts hold them. Knows nothing of MCP or HTTP.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "blobs/blob_store.h"
#include "core/error.h"
#include "db/database.h"

namespace kiln::workspace { class Root; }

namespace kiln::artifacts {

enum class Share { public_, password, invite };
const char* to_string(Share s);
std::optional<Share> parse_share(std::string_view s);

// Names appear in URLs (/a/NAME/): 1-64 of [a-z0-9-], starting with a letter or digit.
bool valid_artifact_name(std::string_view name);
// Invite names show in lists and access logs: 1-64 of letters, digits, space and ._@+-
bool valid_invite_name(std::string_view name);
// The name a publish gets when none is given: the path's last component (the workspace folder's
// name for the root; a file without its extension), lowercased and made valid; "site" if nothing is left.
std::string default_artifact_name(std::string_view rel_path, std::string_view root_path);
// Content-Type for a file name, from a small table; text types carry "; charset=utf-8".
std::string content_type_for(std::string_view path);

// A version holds at most this much; a publish over it fails with Errc::too_large.
inline constexpr std::uint64_t kMaxVersionFiles = 20000;
inline constexpr std::uint64_t kMaxVersionBytes = std::uint64_t(1) << 30;

struct InviteInfo {
  std::string name;
  std::string created_at;
  std::optional<std::string> expires_at;
  bool revoked = false;
  bool expired = false;  // expires_at has passed (as of the answer)
  std::string token;  // only in the answer that created it (stored as a hash, never readable again)
};

struct VersionInfo {
  int number = 0;
  std::string created_at;
  std::string source_path;  // workspace-relative path that was published
  bool single_file = false;  // a file was published: the version serves it at /a/NAME/ directly
  std::uint64_t files = 0;
  std::uint64_t bytes = 0;
  std::string trace_id;
  // An app version (publish {app: true}): {"app": the AppConfig as JSON, "services": [the
  // ServiceConfig of each service it names]}, as kiln.json said at publish time. The store keeps
  // it opaque; kiln serve's supervisor reads it.
  std::optional<nlohmann::json> app;
};

struct ArtifactInfo {
  std::string name;
  std::string workspace_id;
  Share share = Share::public_;
  bool has_password = false;
  std::optional<std::string> expires_at;  // the whole artifact stops being served after this
  bool expired = false;                   // expires_at has passed (as of the answer)
  std::string created_at;
  std::vector<VersionInfo> versions;  // oldest first
  std::vector<InviteInfo> invites;    // without tokens
  int latest() const { return versions.empty() ? 0 : versions.back().number; }
  // The latest version is an app: the artifact runs (an older app version alone does not make it one).
  bool is_app() const { return !versions.empty() && versions.back().app.has_value(); }
};

struct PublishRequest {
  std::string workspace_id;
  const workspace::Root* root = nullptr;  // files are read through it (confined, no symlink escapes)
  std::string path;                        // folder or file, relative to the root (the root itself: what git would keep)
  std::string name;                        // empty: derived from the path's last component
  std::optional<Share> share;              // nullopt: keep the artifact's mode (public when new)
  std::string password;                    // required when share becomes password and none is set
  std::vector<std::string> invite_names;   // invites to create (share invite)
  std::optional<std::int64_t> expires_in_s;
  std::optional<std::int64_t> invite_expires_in_s;  // of the invites created here; nullopt: expires_in_s
  std::string trace_id;
  std::optional<nlohmann::json> app;       // stored with the version (VersionInfo::app); only for a folder
};

struct PublishResult {
  ArtifactInfo artifact;       // after the publish
  VersionInfo version;         // the new version
  std::vector<InviteInfo> new_invites;  // with tokens
  std::uint64_t new_blobs = 0;          // files not stored before (the rest were deduplicated)
  std::uint64_t skipped_symlinks = 0;   // symlinks in the folder are never followed nor stored
  std::uint64_t skipped_other = 0;      // fifos, sockets, devices
};

struct ShareRequest {
  std::string name;
  std::optional<Share> share;
  std::string password;                   // sets (or replaces) the password
  std::vector<std::string> invite_names;  // invites to add
  std::vector<std::string> revoke;        // invite names to revoke
  std::optional<std::int64_t> expires_in_s;  // 0 clears the expiry
  std::optional<std::int64_t> invite_expires_in_s;  // of the invites created here; nullopt: expires_in_s
};

struct ShareResult {
  ArtifactInfo artifact;
  std::vector<InviteInfo> new_invites;  // with tokens
};

// One file of a version, ready to serve.
struct ResolvedFile {
  std::string blob_path;     // absolute path of the content-addressed blob
  std::uint64_t size = 0;
  std::string sha256;        // hex; the strong ETag is "\"" + sha256 + "\""
  std::string content_type;  // from the file name
  std::string logical_path;  // path inside the version ("index.html" for a folder request)
  bool app = false;          // the version is an app: its files are its source, never served as pages
};

// What the HTTP layer knows about the visitor.
struct Credentials {
  std::optional<std::string> password;      // from HTTP Basic or the login form
  std::optional<std::string> cookie;        // the kiln session cookie's value
  std::optional<std::string> invite_token;  // from /a/NAME/?invite=TOKEN or the invite cookie
  std::string client;                        // client address, for rate limiting
};

enum class AccessOutcome {
  allowed,
  need_login,    // password mode, no or wrong credentials: show the login page / 401
  rate_limited,  // too many failed logins for this artifact and client: 429
  denied,        // invite mode without a valid invite, a revoked or expired invite: 403
  expired,       // the artifact's share expired: 410
  not_found,     // no such artifact or version: 404
};

// How long a login (password mode) lasts. The store refuses its cookie after this, and the
// Set-Cookie Max-Age says the same, so a browser never holds a cookie the server no longer takes.
inline constexpr std::int64_t kPasswordCookieS = 12 * 3600;

struct AccessDecision {
  AccessOutcome outcome = AccessOutcome::not_found;
  Share share = Share::public_;
  int version = 0;                       // the version that would be served
  std::optional<std::string> set_cookie; // a fresh signed cookie value to send (after a login or invite)
  std::int64_t cookie_max_age_s = 0;     // its Max-Age: the same lifetime the store signed into it
  std::string invite_name;               // who, for the access log (never the token)
  int retry_after_s = 0;                 // for rate_limited
};

// One artifact's access rules as the database held them at one moment: what admits the bearer
// of a session cookie. `kiln serve` keeps these in memory until the database changes
// (serve/serve_cache.h), so a protected page costs no query; everything that ends a cookie
// (a new password, a mode change, a revoked or expired invite, the artifact's expiry, an
// unpublish) is a database change or a time checked against these fields on every request.
struct AccessRules {
  std::string name;
  Share share = Share::public_;
  std::int64_t share_gen = 0;
  std::optional<std::int64_t> expires_at;
  std::vector<int> versions;  // ascending
  struct Invite {
    std::string name;
    std::optional<std::int64_t> expires_at;
    bool revoked = false;
  };
  std::map<std::int64_t, Invite> invites;  // by id (what an invite cookie names)
};

class ArtifactStore {
 public:
  static Result<std::unique_ptr<ArtifactStore>> open(const std::string& state_dir);
  ArtifactStore(const ArtifactStore&) = delete;
  ArtifactStore& operator=(const ArtifactStore&) = delete;

  const std::string& dir() const { return dir_; }

  // Copies the folder or file into the blob store and records a new version. A half-written
  // version is never visible: blobs are written first (temp file + rename), the version row
  // last, in one transaction.
  Result<PublishResult> publish(const PublishRequest& req);
  Result<std::vector<ArtifactInfo>> list(const std::string& workspace_id);  // empty: all
  Result<std::optional<ArtifactInfo>> get(const std::string& name);
  Result<ShareResult> share(const ShareRequest& req);
  // Removes one version, or the whole artifact (nullopt); blobs nobody references are deleted.
  // Returns the version numbers removed.
  Result<std::vector<int>> unpublish(const std::string& name, std::optional<int> version);

  // Serving. `version` nullopt: the latest. `path` is the URL path after /a/NAME/ or
  // /a/NAME/v/N/, already percent-decoded; "" or a folder means its index.html. Paths that
  // are not in the version's manifest (including any ".." or escape) are not_found.
  Result<ResolvedFile> resolve(const std::string& name, std::optional<int> version, std::string_view path);
  AccessDecision check_access(const std::string& name, std::optional<int> version, const Credentials& creds);
  // The rules admit_cookie checks against; nullopt: no such artifact.
  Result<std::optional<AccessRules>> access_rules(const std::string& name);
  // check_access's answer for a request whose only credential is `cookie`, decided from `rules`
  // without the database or the store's lock: the cookie's signature is verified (constant time)
  // and every field checked against the rules and the clock, as check_access does. Only an
  // admission is answered here; nullopt (invalid cookie, expired artifact, no such version)
  // means "ask check_access", which says why.
  std::optional<AccessDecision> admit_cookie(const AccessRules& rules, std::optional<int> version,
                                             const std::string& cookie) const;

  // A version's files as {path: {sha256, size}}.
  Result<nlohmann::json> manifest(const std::string& name, int version);

  // Whether another owner of the shared blob store (the checkpoints) still references a blob; an
  // unpublish deletes only what neither holds. An error keeps the blob. Unset: nobody else.
  using BlobReferrer = std::function<Result<bool>(const std::string& sha256)>;
  void set_blob_referrer(BlobReferrer referrer);
  // True when a version of any artifact holds the blob (the checkpoints ask before deleting).
  Result<bool> references(const std::string& sha256);
  const blobs::BlobStore& blob_store() const { return blobs_; }

  // Tests: the unix-seconds clock behind expiries, cookies and rate limiting, and smaller limits.
  void set_clock(std::function<std::int64_t()> now_s);
  void set_limits(std::uint64_t max_files, std::uint64_t max_bytes);

 private:
  explicit ArtifactStore(std::string dir) : dir_(dir), blobs_(std::move(dir)) {}
  struct Row;     // an artifacts row, as the .cpp files read it
  struct Staged;  // a copied folder: its manifest and counts, before the version row exists
  struct ShareChange;
  Result<void> load_cookie_key();
  void key_cookie_mac();  // cookie_mac_ from cookie_key_
  std::int64_t now() const;
  Result<Staged> stage(const PublishRequest& req, const std::string& rel, bool single_file,
                       std::vector<std::string>& added);
  Result<std::optional<Row>> row_locked(const std::string& name);
  Result<ArtifactInfo> info_locked(const Row& row);
  Result<void> apply_share_locked(Row& row, const ShareChange& change, std::vector<InviteInfo>& new_invites);
  Result<std::string> hash_password(const std::string& password);
  bool cookie_valid_locked(const Row& row, const std::string& cookie, std::string& invite_name);
  struct CookieFields;
  // The fields of a cookie we signed (HMAC checked in constant time), or nullopt.
  std::optional<CookieFields> verify_cookie(const std::string& cookie) const;
  std::string make_cookie(const std::string& name, const std::string& kind, std::int64_t expires, std::int64_t gen) const;
  std::string blob_path(const std::string& sha256) const;
  Result<std::vector<int>> unpublish_locked(const std::string& name, std::optional<int> version);
  // Crash leftovers (artifact_recovery.cpp): dead writers' temp copies, an interrupted unpublish's
  // trash, and the new blobs of a copy that failed half-way.
  void reclaim_leftovers();
  void drop_unreferenced(const std::vector<std::string>& sha256s);

  bool held_elsewhere(const std::string& sha256);

  std::string dir_;
  blobs::BlobStore blobs_;
  BlobReferrer referrer_;
  db::Database db_;
  std::mutex mu_;
  std::map<std::string, std::pair<int, std::int64_t>> failures_;  // (artifact, client) -> count, window start
  std::string cookie_key_;  // 32 random bytes from <state>/serve.key (0600)
  // HMAC-SHA256 keyed with cookie_key_ once (its inner and outer pads already hashed): every
  // protected page verifies a cookie, and keying afresh was a third of the MAC's cost.
  struct CookieMac;
  std::shared_ptr<const CookieMac> cookie_mac_;
  void cookie_mac(std::string_view payload, unsigned char* out) const;  // 32 bytes
  std::function<std::int64_t()> clock_;
  std::uint64_t max_files_ = kMaxVersionFiles;
  std::uint64_t max_bytes_ = kMaxVersionBytes;
};

}  // namespace kiln::artifacts
