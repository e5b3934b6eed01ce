// Listing = walk + stat + sort + page. Entries are collected per worker without locking, then
// sorted in tree order so that pages are stable between calls on an unchanged tree.
#include "workspace/file_list.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <ctime>
#include <iterator>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "workspace/glob.h"

namespace kiln::workspace {

namespace {

EntryType type_of_mode(mode_t m) {
  if (S_ISREG(m)) return EntryType::file;
  if (S_ISDIR(m)) return EntryType::dir;
  if (S_ISLNK(m)) return EntryType::symlink;
  return EntryType::other;
}

// Fills an entry from fstatat(dir_fd, name) without following a final symlink.
bool stat_entry(int dir_fd, const char* name, std::string path, ListEntry& out) {
  struct stat st{};
  if (::fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return false;  // vanished meanwhile
  out.path = std::move(path);
  out.type = type_of_mode(st.st_mode);
  out.size = out.type == EntryType::dir ? 0 : static_cast<uint64_t>(st.st_size);
  out.mtime = iso8601_utc(st.st_mtim.tv_sec);
  if (out.type == EntryType::symlink) {
    char buf[PATH_MAX];
    ssize_t n = ::readlinkat(dir_fd, name, buf, sizeof buf);
    if (n > 0) out.link_target.assign(buf, static_cast<size_t>(n));
  }
  return true;
}

void page(ListResult& out, std::vector<ListEntry> all, size_t offset, size_t limit) {
  out.total = all.size();
  size_t begin = std::min(offset, all.size());
  size_t end = std::min(all.size(), begin + limit);
  out.entries.assign(std::make_move_iterator(all.begin() + static_cast<ptrdiff_t>(begin)),
                     std::make_move_iterator(all.begin() + static_cast<ptrdiff_t>(end)));
  out.truncated = end < all.size();
  if (out.truncated) out.next_offset = end;
}

}  // namespace

std::string iso8601_utc(int64_t seconds) {
  std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Result<ListResult> list_files(const Root& root, const ListRequest& req, std::stop_token stop) {
  if (req.depth < 0) {
    return fail(Errc::invalid_argument, fmt::format("depth {} is negative; pass 1 for immediate children or 0 for all",
                                                    req.depth));
  }
  if (req.limit == 0) return fail(Errc::invalid_argument, "limit must be at least 1");
  auto rel = root.relative(req.path.empty() ? "." : req.path);
  if (!rel) return std::unexpected(rel.error());
  std::optional<Glob> glob;
  if (!req.glob.empty()) {
    auto g = Glob::compile(req.glob);
    if (!g) return std::unexpected(g.error());
    glob = std::move(*g);
  }
  size_t limit = std::min(req.limit, kMaxListLimit);

  ListResult out;
  out.path = rel->empty() ? "." : *rel;
  auto is_folder = is_folder_beneath(root, *rel, req.path);
  if (!is_folder) return std::unexpected(is_folder.error());
  if (!*is_folder) {
    // A single file lists as itself (as `ls FILE` does), reported without following a final link.
    auto parent = root.open_parent(*rel);
    if (!parent) return std::unexpected(parent.error());
    std::vector<ListEntry> one(1);
    if (!stat_entry(parent->dir.get(), parent->name.c_str(), *rel, one[0])) {
      return fail(Errc::not_found, fmt::format("'{}' vanished while it was being listed", req.path));
    }
    if (glob && !glob->matches(one[0].path)) one.clear();
    page(out, std::move(one), req.offset, limit);
    return out;
  }

  WalkOptions opts;
  opts.start = *rel;
  opts.max_depth = (req.depth == 0 || req.depth > kMaxListDepth) ? kMaxListDepth : req.depth;
  opts.include_ignored = req.include_ignored;
  std::vector<std::vector<ListEntry>> per_worker(walk_thread_count(opts));
  size_t start_len = rel->empty() ? 0 : rel->size() + 1;
  auto walked = walk(root, opts, stop, [&](const WalkEntry& e, unsigned worker) {
    if (glob && !glob->matches(e.path) && !(start_len && glob->matches(e.path.substr(start_len)))) return;
    ListEntry entry;
    if (stat_entry(e.dir_fd, e.name.data(), std::string(e.path), entry)) {
      per_worker[worker].push_back(std::move(entry));
    }
  });
  if (!walked) return std::unexpected(walked.error());

  std::vector<ListEntry> all;
  size_t n = 0;
  for (const auto& v : per_worker) n += v.size();
  all.reserve(n);
  for (auto& v : per_worker) std::move(v.begin(), v.end(), std::back_inserter(all));
  std::sort(all.begin(), all.end(), [](const ListEntry& a, const ListEntry& b) { return path_less(a.path, b.path); });
  page(out, std::move(all), req.offset, limit);
  return out;
}

}  // namespace kiln::workspace
