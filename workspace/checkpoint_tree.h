// A workspace state as checkpoints hold it: a flat list of entries (path, type, mode, size,
// content hash) and its encoding as one tree object per folder, content-addressed like git's, so
// two checkpoints share every folder that did not change and comparing them skips equal subtrees.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "workspace/tree_walk.h"

namespace kiln::workspace {

struct TreeEntry {
  std::string path;             // relative to the workspace root, '/'-separated
  EntryType type = EntryType::file;  // file, dir or symlink (nothing else is captured)
  std::uint32_t mode = 0;       // permission bits (07777)
  std::uint64_t size = 0;       // a file's bytes; a symlink's target length; 0 for a folder
  std::string sha;              // file: content blob; symlink: blob of the target text; folder: tree object
};
// In tree order (path_less): a folder's contents follow the folder.
using FlatTree = std::vector<TreeEntry>;

// One folder's children as they are encoded: `name` is the last component.
struct TreeChild {
  std::string name;
  EntryType type = EntryType::file;
  std::uint32_t mode = 0;
  std::uint64_t size = 0;
  std::string sha;
};

std::string encode_tree(const std::vector<TreeChild>& children);  // children in name order
Result<std::vector<TreeChild>> decode_tree(std::string_view data);
std::string tree_sha(std::string_view encoded);

// Builds the tree objects of a flat tree bottom-up: `emit(sha, encoded, children)` for each folder
// (the root too), children before parents. Folder entries' sha fields are filled in. Returns the
// root's sha.
using TreeEmitter = std::function<void(const std::string& sha, const std::string& encoded,
                                       const std::vector<TreeChild>& children)>;
// `reuse(path)`: a folder whose entry already carries its sha and that nothing beneath changed
// keeps it without being encoded again (its objects are stored already).
using TreeReuse = std::function<bool(const std::string& folder)>;
std::string build_trees(FlatTree& flat, const TreeEmitter& emit, const TreeReuse& reuse = {});

// Reads tree objects by sha (from the store); nullopt: missing (the store is damaged).
using TreeLoader = std::function<std::optional<std::string>(const std::string& sha)>;

// The flat tree under `root_sha` (folders included), in tree order.
Result<FlatTree> flatten(const std::string& root_sha, const TreeLoader& load);

// What changed from `a` to `b` (flat trees in tree order), files and links only (a folder that
// appears or goes is seen through its contents; an empty one is listed itself).
struct TreeChange {
  std::string path;
  enum class Kind { added, modified, deleted } kind = Kind::modified;
  const TreeEntry* before = nullptr;  // into a
  const TreeEntry* after = nullptr;   // into b
};
const char* to_string(TreeChange::Kind k);
std::vector<TreeChange> compare(const FlatTree& a, const FlatTree& b);

// The same between two stored trees, reading only the folders that differ (equal subtrees share
// a sha and are skipped): what an exec changed costs what it touched, not the workspace's size.
struct ShallowChange {
  std::string path;
  TreeChange::Kind kind;
  std::uint64_t size_before = 0, size_after = 0;
};
Result<std::vector<ShallowChange>> compare_stored(const std::string& a_root, const std::string& b_root,
                                                  const TreeLoader& load);

}  // namespace kiln::workspace
