// A partial read for a checkpoint: the last scan with the folders inotify named read again, so
// what a run changed costs what it touched, not the size of the workspace.
#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "workspace/checkpoint_internal.h"

namespace kiln::workspace {

std::string parent_folder(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

namespace {
bool beneath(const std::string& path, const std::string& dir) {
  return path.size() > dir.size() + 1 && path.starts_with(dir) && path[dir.size()] == '/';
}
}  // namespace

Result<std::vector<ScanNode>> rescan_changed(const Root& root, std::vector<ScanNode>&& base, std::set<std::string> dirty,
                                             WorkspaceWatch* watch, std::stop_token stop, ScanResult& notes,
                                             std::unordered_set<std::string>& changed,
                                             std::vector<std::string>& removed) {
  std::unordered_map<std::string, std::string> old_dirs;  // folder -> its stored object
  for (const auto& n : base) {
    if (n.entry.type == EntryType::file && n.nlink > 1) dirty.insert(parent_folder(n.entry.path));
    else if (n.entry.type == EntryType::dir) old_dirs.emplace(n.entry.path, n.entry.sha);
  }
  std::vector<ScanNode> fresh;
  std::set<std::string> gone;  // folders to drop whole
  for (const auto& d : dirty) {
    if (!d.empty() && !old_dirs.count(d)) continue;  // new: scanned whole below, from its parent
    auto r = scan_workspace(root, stop, watch, d, 1);
    if (!r) {
      if (r.error().code == Errc::cancelled) return std::unexpected(r.error());
      if (d.empty()) return std::unexpected(r.error());
      gone.insert(d);
      continue;
    }
    for (auto& s : r->skipped) notes.skipped.push_back(std::move(s));
    notes.skipped_count += r->skipped_count;
    std::move(r->nodes.begin(), r->nodes.end(), std::back_inserter(fresh));
  }
  std::unordered_set<std::string> fresh_dirs;
  for (const auto& n : fresh)
    if (n.entry.type == EntryType::dir) fresh_dirs.insert(n.entry.path);
  // Old folders directly in a re-read folder that are no longer folders there.
  for (const auto& [od, od_sha] : old_dirs)
    if (dirty.count(parent_folder(od)) && !gone.count(parent_folder(od)) && !fresh_dirs.count(od)) gone.insert(od);
  auto mark = [&](std::string d) {
    for (;;) {
      if (!changed.insert(d).second || d.empty()) return;
      d = parent_folder(d);
    }
  };
  for (const auto& d : dirty) mark(d);
  for (const auto& g : gone) mark(g);
  std::vector<ScanNode> out;
  out.reserve(base.size() + fresh.size());
  // The scan is in tree order, so siblings come in runs: the decision for a folder's entries is
  // made once per run, not looked up (and its name copied) for each of a large tree's entries.
  std::string last_parent;
  bool have_last = false, last_relisted = false;
  for (auto& n : base) {
    const std::string& p = n.entry.path;
    const auto slash = p.rfind('/');
    const std::string_view parent = slash == std::string::npos ? std::string_view() : std::string_view(p).substr(0, slash);
    if (!have_last || parent != last_parent) {
      last_parent.assign(parent);
      last_relisted = dirty.count(last_parent) && !gone.count(last_parent);
      have_last = true;
    }
    const bool relisted = last_relisted;
    bool dropped = false;
    if (!relisted && !gone.empty()) {
      dropped = gone.count(p) > 0;
      for (const auto& g : gone)
        if (!dropped && beneath(p, g)) dropped = true;
    }
    if (relisted || dropped) {
      if (n.entry.type == EntryType::file) removed.push_back(p);  // back below if still there
      continue;
    }
    out.push_back(std::move(n));
  }
  const std::size_t kept = out.size();
  for (auto& n : fresh) {
    bool is_new_dir = n.entry.type == EntryType::dir && !old_dirs.count(n.entry.path);
    // A folder listed again but not itself re-read keeps its object (its contents are unchanged).
    if (n.entry.type == EntryType::dir && !is_new_dir && !changed.count(n.entry.path))
      n.entry.sha = old_dirs[n.entry.path];
    std::string path = n.entry.path;
    out.push_back(std::move(n));
    if (!is_new_dir) continue;
    auto sub = scan_workspace(root, stop, watch, path, 0);
    if (!sub) {
      if (sub.error().code == Errc::cancelled) return std::unexpected(sub.error());
      continue;  // went again already
    }
    std::move(sub->nodes.begin(), sub->nodes.end(), std::back_inserter(out));
  }
  // The kept part is in tree order already: sort what was read again and merge it in.
  auto less = [](const ScanNode& a, const ScanNode& b) { return path_less(a.entry.path, b.entry.path); };
  std::sort(out.begin() + std::ptrdiff_t(kept), out.end(), less);
  std::inplace_merge(out.begin(), out.begin() + std::ptrdiff_t(kept), out.end(), less);
  return out;
}

}  // namespace kiln::workspace
