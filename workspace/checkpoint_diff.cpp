// checkpoint_diff: two checkpoints, or one and the files now, compared entry by entry; text files
// (and link targets) as unified diffs, anything else by size and hash, one page at a time.
#include <fcntl.h>
#include <sys/stat.h>

#include <fmt/format.h>

#include "core/fd_io.h"
#include "core/path_under.h"
#include "workspace/checkpoint_internal.h"
#include "workspace/unified_diff.h"

namespace kiln::workspace {

namespace {

constexpr std::uint64_t kMaxDiffInput = 1 << 20;  // larger files are compared by size and hash

std::optional<std::string> read_fd(int fd, std::uint64_t size) {
  std::string s(std::size_t(size) + 1, '\0');
  ssize_t n = read_full(fd, s.data(), s.size());
  if (n < 0 || std::uint64_t(n) > size) return std::nullopt;
  s.resize(std::size_t(n));
  return s;
}

bool under(std::string_view path, std::string_view scope) { return scope.empty() || path_under(path, scope); }

bool is_text(std::string_view s) { return s.find('\0') == std::string_view::npos; }

}  // namespace

Result<DiffResult> CheckpointStore::diff(const DiffRequest& req, const std::string& principal) {
  auto from = impl_->row(req.from, principal);
  if (!from) return std::unexpected(from.error());
  auto a = flatten(from->root, impl_->loader());
  if (!a) return std::unexpected(a.error());
  FlatTree b;
  DiffResult out;
  out.from = req.from;
  if (req.to) {
    auto to = impl_->row(*req.to, principal);
    if (!to) return std::unexpected(to.error());
    if (to->workspace_id != from->workspace_id)
      return fail(Errc::invalid_argument, fmt::format("{} and {} are checkpoints of different workspaces", req.from, *req.to));
    auto fb = flatten(to->root, impl_->loader());
    if (!fb) return std::unexpected(fb.error());
    b = std::move(*fb);
    out.to = *req.to;
  } else {
    if (!req.root) return fail(Errc::internal, "a diff against the files now needs the workspace");
    auto now = snapshot_now(*impl_, *req.root, from->workspace_id, {});
    if (!now) return std::unexpected(now.error());
    b = std::move(*now);
    out.to = "now";
  }
  std::vector<TreeChange> all;
  for (auto& c : compare(*a, b))
    if (under(c.path, req.path)) all.push_back(c);
  out.total = all.size();
  const std::size_t limit = std::clamp<std::size_t>(req.limit, 1, 500);
  const std::size_t begin = std::min(req.offset, all.size());
  const std::size_t end = std::min(all.size(), begin + limit);
  if (end < all.size()) {
    out.truncated = true;
    out.next_offset = end;
  }
  // One side's bytes: a blob of a checkpoint, or the workspace's file when `to` is now.
  auto content = [&](const TreeEntry& e, bool now_side) -> std::optional<std::string> {
    if (e.size > kMaxDiffInput) return std::nullopt;
    if (now_side && e.type == EntryType::file) {
      auto fd = req.root->open(e.path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
      if (!fd) return std::nullopt;
      return read_fd(fd->get(), e.size);
    }
    if (now_side) {  // a link now: its target
      auto parent = req.root->open_parent(e.path);
      if (!parent) return std::nullopt;
      std::string t(std::size_t(e.size) + 1, '\0');
      ssize_t n = ::readlinkat(parent->dir.get(), parent->name.c_str(), t.data(), t.size());
      if (n < 0) return std::nullopt;
      t.resize(std::size_t(n));
      return t;
    }
    UniqueFd fd(::open(impl_->blobs.path(e.sha).c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return std::nullopt;
    return read_fd(fd.get(), e.size);
  };
  for (std::size_t i = begin; i < end; ++i) {
    const TreeChange& c = all[i];
    DiffChange d;
    d.path = c.path;
    d.change = to_string(c.kind);
    std::optional<std::string> before, after;
    if (c.before) {
      d.size_before = c.before->size;
      d.type_before = std::string(to_string(c.before->type));
      d.sha_before = c.before->sha;
      d.mode_before = c.before->mode;
      before = content(*c.before, false);
    }
    if (c.after) {
      d.size_after = c.after->size;
      d.type_after = std::string(to_string(c.after->type));
      d.sha_after = c.after->sha;
      d.mode_after = c.after->mode;
      after = content(*c.after, !req.to);
    }
    bool ok_before = !c.before || (before && is_text(*before));
    bool ok_after = !c.after || (after && is_text(*after));
    if (ok_before && ok_after) {
      d.diff = unified_diff(before.value_or(""), after.value_or(""), c.path);
      if (d.diff.size() > req.max_diff_bytes) {
        d.diff.resize(req.max_diff_bytes);
        d.diff_truncated = true;
      }
    } else {
      d.binary = true;
    }
    out.changes.push_back(std::move(d));
  }
  return out;
}

}  // namespace kiln::workspace
