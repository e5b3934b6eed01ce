// Artifacts and checkpoints share one blob store; each deletes a blob only when the other does
// not hold it. Every process that opens the artifact store opens it through here, so no command
// can collect a blob a checkpoint still needs (and the other way round).
#pragma once

#include <memory>
#include <string>

#include "artifacts/artifact_store.h"
#include "core/error.h"
#include "workspace/checkpoint_store.h"

namespace kiln::cli {

// The artifact store, asking the checkpoints (opened alongside, kept alive by it) before it
// deletes a blob.
Result<std::unique_ptr<artifacts::ArtifactStore>> open_artifacts(const std::string& state_dir);

// Both, each asking the other: for a process that uses both (kiln mcp, kiln serve --mcp).
struct BlobOwners {
  std::unique_ptr<artifacts::ArtifactStore> artifacts;
  std::shared_ptr<workspace::CheckpointStore> checkpoints;
};
Result<BlobOwners> open_blob_owners(const std::string& state_dir);

}  // namespace kiln::cli
