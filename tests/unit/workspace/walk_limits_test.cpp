// What a command in a sandbox can build in its workspace must not cost Kiln more than bounded
// memory, stack or host resources: folder chains deeper than the walker enters, paths longer than
// any tool takes, more entries than a checkpoint holds, more folders than inotify watches Kiln may
// take from the user's pool. Each case was a hole found by a red team (a 30,000-deep chain crashed
// the server through the checkpoint's recursion; a million empty files took a gigabyte; 195,000
// folders took every watch of the user).
#include <doctest/doctest.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/unique_fd.h"
#include "workspace/checkpoint_scan.h"
#include "workspace/checkpoint_store.h"
#include "workspace/checkpoint_watch.h"
#include "workspace/root.h"
#include "workspace/tree_walk.h"

namespace fs = std::filesystem;
using namespace kiln;
using namespace kiln::workspace;

namespace {

struct Temp {
  fs::path base;
  explicit Temp(const char* under = "/tmp") {
    std::string tmpl = std::string(under) + "/kiln-walk-limits-XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    base = tmpl;
  }
  ~Temp() {
    // std::filesystem cannot remove a chain deeper than PATH_MAX by name: go down by descriptor.
    remove_below(AT_FDCWD, base.c_str());
  }
  static void remove_below(int parent, const char* name) {
    int fd = ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      ::unlinkat(parent, name, 0);
      return;
    }
    DIR* d = ::fdopendir(fd);
    std::vector<std::string> names;
    while (auto* e = ::readdir(d))
      if (std::string_view(e->d_name) != "." && std::string_view(e->d_name) != "..") names.emplace_back(e->d_name);
    for (const auto& n : names) remove_below(::dirfd(d), n.c_str());
    ::closedir(d);
    ::unlinkat(parent, name, AT_REMOVEDIR);
  }
};

// A chain of `depth` folders named `name` under `top`, made by descriptor (no path gets long).
void make_chain(const fs::path& top, int depth, const std::string& name) {
  UniqueFd at(::open(top.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  for (int i = 0; i < depth; ++i) {
    REQUIRE(::mkdirat(at.get(), name.c_str(), 0755) == 0);
    at = UniqueFd(::openat(at.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    REQUIRE(at);
  }
  UniqueFd f(::openat(at.get(), "bottom.txt", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
}

Root open_root(const fs::path& p) {
  auto r = Root::open(p.string());
  REQUIRE(r);
  return std::move(*r);
}

}  // namespace

TEST_CASE("the walker enters no folder more than kMaxWalkDepth deep and says so") {
  Temp t;
  make_chain(t.base, kMaxWalkDepth + 200, "d");
  Root root = open_root(t.base);
  std::atomic<int> deepest{0};
  std::atomic<bool> bottom{false};
  auto r = walk(root, {}, {}, [&](const WalkEntry& e, unsigned) {
    int d = e.depth;
    for (int cur = deepest.load(); d > cur && !deepest.compare_exchange_weak(cur, d);) {
    }
    if (e.name == "bottom.txt") bottom = true;
  });
  REQUIRE(r);
  CHECK(deepest.load() == kMaxWalkDepth);  // the folder at the limit is listed, not entered
  CHECK_FALSE(bottom.load());
  CHECK(r->too_deep == 1);
  CHECK(std::ranges::count(r->first_too_deep, '/') == kMaxWalkDepth - 1);
}

TEST_CASE("the walker visits no path longer than kMaxWalkPath") {
  Temp t;
  make_chain(t.base, 40, std::string(200, 'n'));  // 40 x 201 bytes: past 4096 at the 21st
  Root root = open_root(t.base);
  std::atomic<std::size_t> longest{0};
  auto r = walk(root, {}, {}, [&](const WalkEntry& e, unsigned) {
    for (auto cur = longest.load(); e.path.size() > cur && !longest.compare_exchange_weak(cur, e.path.size());) {
    }
  });
  REQUIRE(r);
  CHECK(longest.load() <= kMaxWalkPath);
  CHECK(longest.load() > kMaxWalkPath - 201);
  CHECK(r->too_deep == 1);
}

TEST_CASE("a checkpoint of a chain deeper than the walker enters is made, and names what it left out") {
  Temp t;
  fs::create_directories(t.base / "ws");
  fs::create_directories(t.base / "state");
  make_chain(t.base / "ws", 3 * kMaxWalkDepth, "d");
  Root root = open_root(t.base / "ws");
  auto store = CheckpointStore::open((t.base / "state").string());
  REQUIRE(store);
  CheckpointRequest q;
  q.root = &root;
  q.workspace_id = "ws_deep";
  q.principal = "me";
  q.trigger = "manual";
  auto cp = (*store)->create(q);
  REQUIRE_MESSAGE(cp, (cp ? "" : cp.error().message));
  REQUIRE(cp->skipped.size() == 1);
  CHECK(cp->skipped[0].find("nested more than 1024 folders deep") != std::string::npos);
  // Reading it back (a restore's dry run flattens the whole stored tree) stays within the limit.
  RestoreRequest rq;
  rq.root = &root;
  rq.workspace_id = "ws_deep";
  rq.principal = "me";
  rq.checkpoint_id = cp->id;
  rq.dry_run = true;
  auto rs = (*store)->restore(rq);
  REQUIRE_MESSAGE(rs, (rs ? "" : rs.error().message));
}

// The cap is kMaxCheckpointEntries (500,000); a smaller one here shows the same code path in
// a fraction of the files.
TEST_CASE("a workspace with more entries than a checkpoint holds is refused, naming the fix") {
  Temp t;
  fs::create_directories(t.base / "many");
  UniqueFd dir(::open((t.base / "many").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  constexpr std::size_t kCap = 2000;
  for (std::size_t i = 0; i + 1 < kCap; ++i) {
    UniqueFd f(::openat(dir.get(), std::to_string(i).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    REQUIRE(f);
  }
  Root root = open_root(t.base);  // the folder "many" itself is one more entry: exactly the cap
  auto fits = scan_workspace(root, {}, nullptr, {}, 0, kCap);
  REQUIRE(fits);
  CHECK(fits->nodes.size() == kCap);
  UniqueFd one_more(::openat(dir.get(), "one-more", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  auto r = scan_workspace(root, {}, nullptr, {}, 0, kCap);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Errc::too_large);
  CHECK(r.error().message.find("more than 2000 files, folders and links") != std::string::npos);
  CHECK(r.error().message.find(".gitignore") != std::string::npos);
}

// The user's watches are shared by the whole host: past Kiln's share a workspace gives every watch
// back and asks for full scans, rather than leave other programs of the user none.
TEST_CASE("a workspace watch past Kiln's share of the user's inotify watches gives them all back") {
  Temp t(fs::is_directory("/dev/shm") ? "/dev/shm" : "/tmp");  // tens of thousands of folders: tmpfs when there is one
  const std::size_t n = WorkspaceWatch::budget() + 16;
  UniqueFd top(::open(t.base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  auto count_watches = [] {
    std::size_t w = 0;
    for (const auto& fd : fs::directory_iterator("/proc/self/fdinfo")) {
      std::ifstream in(fd.path());
      for (std::string line; std::getline(in, line);) w += line.starts_with("inotify wd:");
    }
    return w;
  };
  const std::size_t before = count_watches();
  auto watch = WorkspaceWatch::start(t.base.string());
  REQUIRE(watch);
  (void)watch->drain();
  std::size_t most = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::string name = std::to_string(i);
    REQUIRE(::mkdirat(top.get(), name.c_str(), 0755) == 0);
    UniqueFd d(::openat(top.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    watch->add(name, d.get());
    if (i == n / 2) most = count_watches() - before;
  }
  CHECK(most == n / 2 + 1);  // half way, every folder had its watch
  CHECK(most <= WorkspaceWatch::budget());
  CHECK(count_watches() == before);  // all given back
  CHECK(watch->drain().all);          // and every checkpoint reads everything from now on
  CHECK(watch->drain().all);
}
