// Whether a workspace root and Kiln's state directory overlap, decided by device and inode so that
// symlinks, bind mounts, "..", case folding or a second name cannot make them look apart: a
// workspace that is, contains or sits inside the state directory would expose its tokens, secrets
// and other principals' traces to file tools and sandboxes.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"

namespace kiln {

enum class Nesting { apart, same, inside, contains };

namespace path_nesting_detail {

struct DevIno {
  dev_t dev;
  ino_t ino;
  bool operator==(const DevIno&) const = default;
};

// The folder itself and every folder above it, walked through ".." of an open descriptor (the
// kernel's physical parent, never a symlink's).
inline Result<std::vector<DevIno>> chain(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return fail(errno == ENOENT ? Errc::not_found : Errc::io, dir + ": " + std::strerror(errno));
  std::vector<DevIno> out;
  for (int depth = 0; depth < 4096; ++depth) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) break;
    DevIno here{st.st_dev, st.st_ino};
    if (!out.empty() && out.back() == here) break;  // "/" is its own parent
    out.push_back(here);
    int up = ::openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ::close(fd);
    fd = up;
    if (fd < 0) break;  // an unreadable ancestor ends the walk; what we have is still compared
  }
  if (fd >= 0) ::close(fd);
  return out;
}

}  // namespace path_nesting_detail

// How `root` relates to `state_dir`. A state directory that does not exist yet is apart from
// everything, and so is a missing root (nothing there to expose; whoever makes and opens it comes
// through this check again). A root that exists but cannot be opened is an error.
inline Result<Nesting> nesting_of(const std::string& root, const std::string& state_dir) {
  using namespace path_nesting_detail;
  auto r = chain(root);
  if (!r) return r.error().code == Errc::not_found ? Result<Nesting>(Nesting::apart) : std::unexpected(r.error());
  if (state_dir.empty()) return Nesting::apart;
  auto s = chain(state_dir);
  if (!s && s.error().code == Errc::not_found) {
    // Not made yet (a check before the first start): only names can be compared.
    std::error_code ec;
    auto rp = std::filesystem::weakly_canonical(root, ec);
    auto sp = std::filesystem::weakly_canonical(state_dir, ec);
    if (ec) return Nesting::apart;
    auto within = [](const std::filesystem::path& in, const std::filesystem::path& out) {
      auto rel = in.lexically_relative(out);
      return !rel.empty() && *rel.begin() != "..";
    };
    if (rp == sp) return Nesting::same;
    if (within(sp, rp)) return Nesting::contains;
    if (within(rp, sp)) return Nesting::inside;
    return Nesting::apart;
  }
  if (!s) return std::unexpected(s.error());
  if (r->empty() || s->empty()) return Nesting::apart;
  if (r->front() == s->front()) return Nesting::same;
  for (std::size_t i = 1; i < r->size(); ++i) {
    if ((*r)[i] != s->front()) continue;
    // A named workspace (workspace_open {name, create}) is a folder of <state>/workspaces/: one
    // of those, or a folder in it, holds only what clients wrote there. The physical parent walk
    // means a symlink there to <state>/secrets does not pass.
    auto managed = chain(state_dir + "/workspaces");
    if (i >= 2 && managed && !managed->empty() && (*r)[i - 1] == managed->front()) return Nesting::apart;
    return Nesting::inside;
  }
  for (std::size_t i = 1; i < s->size(); ++i)
    if ((*s)[i] == r->front()) return Nesting::contains;
  return Nesting::apart;
}

// The refusal every entry point gives (workspace_open, client roots, --workspace, sandboxes,
// `kiln run`, `kiln verify`), with why and what to do instead.
inline Result<void> check_apart_from_state_dir(const std::string& root, const std::string& state_dir) {
  auto n = nesting_of(root, state_dir);
  if (!n) return fail(Errc::invalid_argument, "workspace " + root + " cannot be checked: " + n.error().message);
  const char* how = nullptr;
  switch (*n) {
    case Nesting::apart: return {};
    case Nesting::same: how = "is Kiln's state directory"; break;
    case Nesting::inside: how = "is inside Kiln's state directory"; break;
    case Nesting::contains: how = "contains Kiln's state directory"; break;
  }
  return fail(Errc::invalid_argument,
              "refusing workspace " + root + ": it " + how + " (" + state_dir +
                  ": tokens, secrets, every principal's traces), which no file tool or sandbox may reach; open a "
                  "project folder that neither contains nor lies inside it, or move the state directory "
                  "(KILN_HOME or --state-dir)");
}

}  // namespace kiln
