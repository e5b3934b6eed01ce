// The wiring of the two owners of the blob store (cli/blob_owners.h).
#include "cli/blob_owners.h"

namespace kiln::cli {

Result<BlobOwners> open_blob_owners(const std::string& state_dir) {
  BlobOwners o;
  auto a = artifacts::ArtifactStore::open(state_dir);
  if (!a) return std::unexpected(a.error());
  o.artifacts = std::move(*a);
  auto c = workspace::CheckpointStore::open(state_dir);
  if (!c) return std::unexpected(c.error());
  o.checkpoints = std::shared_ptr<workspace::CheckpointStore>(std::move(*c));
  o.artifacts->set_blob_referrer([cps = o.checkpoints](const std::string& sha) { return cps->references(sha); });
  // The artifact store outlives every checkpoint operation of these processes (both are kept
  // until exit), so a plain pointer does.
  auto* art = o.artifacts.get();
  o.checkpoints->set_blob_referrer([art](const std::string& sha) { return art->references(sha); });
  return o;
}

Result<std::unique_ptr<artifacts::ArtifactStore>> open_artifacts(const std::string& state_dir) {
  auto a = artifacts::ArtifactStore::open(state_dir);
  if (!a) return std::unexpected(a.error());
  auto c = workspace::CheckpointStore::open(state_dir);
  if (!c) return std::unexpected(c.error());
  std::shared_ptr<workspace::CheckpointStore> cps(std::move(*c));
  (*a)->set_blob_referrer([cps](const std::string& sha) { return cps->references(sha); });
  return std::move(*a);
}

}  // namespace kiln::cli
