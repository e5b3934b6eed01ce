// What the artifact store's .cpp files share and nobody else sees: the row types behind
// ArtifactStore's private members, and small encoding helpers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "artifacts/artifact_store.h"
#include "db/statement.h"
#include "db/transaction.h"

namespace kiln::artifacts {

namespace detail {

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
