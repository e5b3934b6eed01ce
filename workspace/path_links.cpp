// One component at a time: lstat, check a link's owner, follow it (see the header).
#include "workspace/path_links.h"

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <deque>
#include <filesystem>

#include <fmt/format.h>

#include "core/quote.h"

namespace kiln::workspace {

namespace {

void push_parts(std::deque<std::string>& q, const std::string& path) {
  std::deque<std::string> parts;
  for (const auto& p : std::filesystem::path(path)) {
    const std::string s = p.string();
    if (!s.empty() && s != "/") parts.push_back(s);
  }
  q.insert(q.begin(), parts.begin(), parts.end());
}

std::string parent_of(const std::string& p) {
  auto slash = p.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : p.substr(0, slash);
}

}  // namespace

Result<std::string> resolve_workspace_path(const std::string& path) {
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(path, ec);
  if (ec) return fail(Errc::invalid_argument, fmt::format("cannot resolve {}: {}", kiln::bounded(path), ec.message()));
  std::deque<std::string> todo;
  push_parts(todo, abs.string());
  std::string cur = "/";
  int links = 0;
  while (!todo.empty()) {
    std::string part = std::move(todo.front());
    todo.pop_front();
    if (part == ".") continue;
    if (part == "..") {
      cur = parent_of(cur);
      continue;
    }
    std::string next = cur == "/" ? "/" + part : cur + "/" + part;
    struct stat st {};
    if (::lstat(next.c_str(), &st) != 0) {
      // Not there (yet): the rest is taken as written, as weakly_canonical does.
      cur = next;
      for (const auto& rest : todo)
        if (rest != ".") cur = rest == ".." ? parent_of(cur) : cur + "/" + rest;
      return cur;
    }
    if (!S_ISLNK(st.st_mode)) {
      cur = next;
      continue;
    }
    if (st.st_uid != ::geteuid() && st.st_uid != 0) {
      return fail(Errc::invalid_argument,
                  fmt::format("refusing workspace {}: {} is a symbolic link owned by another user (uid {}), who can "
                              "point it anywhere; open the folder by its real path",
                              kiln::bounded(path), kiln::bounded(next), st.st_uid));
    }
    if (++links > 40) return fail(Errc::invalid_argument, fmt::format("{}: too many symbolic links", kiln::bounded(path)));
    char target[PATH_MAX];
    ssize_t n = ::readlink(next.c_str(), target, sizeof target - 1);
    if (n < 0) return fail(Errc::io, fmt::format("cannot read the link {}", kiln::bounded(next)));
    std::string t(target, static_cast<std::size_t>(n));
    if (!t.empty() && t[0] == '/') cur = "/";
    push_parts(todo, t);
  }
  return cur;
}

}  // namespace kiln::workspace
