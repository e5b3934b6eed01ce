// Path confinement tried for real: escapes by "..", absolute paths, control bytes, planted symlinks
// and magic links, through both openat2 and the per-component walk used on older kernels.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <fcntl.h>
#include <unistd.h>

#include "workspace/root.h"

namespace fs = std::filesystem;
using kiln::Errc;
using kiln::workspace::Root;

namespace {

// A scratch tree under /tmp: `ws` is the workspace, `out` a sibling that must stay unreachable.
struct Scratch {
  fs::path base, ws, out;
  Scratch() {
    std::string tmpl = "/tmp/kiln-root-test-XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    base = tmpl;
    ws = base / "ws";
    out = base / "out";
    fs::create_directories(ws / "sub");
    fs::create_directories(out);
    write(out / "secret.txt", "secret");
    write(ws / "sub" / "inner.txt", "inner");
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(base, ec);
  }
  static void write(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }
};

std::string read_fd(int fd) {
  std::string s;
  char buf[256];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<size_t>(n));
  return s;
}

// Runs each test body once with openat2 and once with the fallback walk.
struct WalkMode {
  explicit WalkMode(bool on) { Root::force_component_walk(on); }
  ~WalkMode() { Root::force_component_walk(false); }
};

}  // namespace

TEST_CASE("Root::open canonicalises and refuses non-folders") {
  Scratch s;
  auto r = Root::open((s.ws / "sub" / "..").string());
  REQUIRE(r);
  CHECK(r->path() == fs::canonical(s.ws).string());
  CHECK(r->fd() >= 0);
  auto missing = Root::open((s.base / "nope").string());
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == Errc::not_found);
  auto file = Root::open((s.ws / "sub" / "inner.txt").string());
  REQUIRE_FALSE(file);
  CHECK(file.error().code == Errc::invalid_argument);
}

TEST_CASE("Root::relative normalises and refuses lexical escapes") {
  Scratch s;
  auto root = Root::open(s.ws.string());
  REQUIRE(root);
  CHECK(*root->relative(".") == "");
  CHECK(*root->relative("./sub//inner.txt/") == "sub/inner.txt");
  CHECK(*root->relative("sub/../sub/./inner.txt") == "sub/inner.txt");
  CHECK(*root->relative(root->path() + "/sub/inner.txt") == "sub/inner.txt");
  CHECK(*root->relative(root->path()) == "");

  auto up = root->relative("../x");
  REQUIRE_FALSE(up);
  CHECK(up.error().code == Errc::path_escape);
  CHECK(up.error().message.find("'../x'") != std::string::npos);
  CHECK(up.error().message.find(root->path()) != std::string::npos);

  auto deep = root->relative("sub/../../ws/sub");
  REQUIRE_FALSE(deep);
  CHECK(deep.error().code == Errc::path_escape);

  auto abs = root->relative("/etc/passwd");
  REQUIRE_FALSE(abs);
  CHECK(abs.error().code == Errc::path_escape);
  CHECK(abs.error().message.find("/etc/passwd") != std::string::npos);
  // A sibling whose name starts with the root's name is not inside it.
  CHECK_FALSE(root->relative(root->path() + "x/file"));
  CHECK_FALSE(root->relative(root->path() + "/../out/secret.txt"));
  CHECK_FALSE(root->relative("/proc/self/root" + root->path()));

  CHECK(root->relative("").error().code == Errc::invalid_argument);
  CHECK(root->relative(std::string("a\0b", 3)).error().code == Errc::invalid_argument);
  CHECK(root->relative("a\nb").error().code == Errc::invalid_argument);
  CHECK(root->relative("a\rb").error().code == Errc::invalid_argument);
}

TEST_CASE("Root::relative accepts the spelling the root was opened by") {
  Scratch s;
  fs::create_directory_symlink(s.ws, s.base / "alias");
  auto root = Root::open((s.base / "alias").string());
  REQUIRE(root);
  CHECK(root->path() == fs::canonical(s.ws).string());
  CHECK(*root->relative((s.base / "alias" / "sub").string()) == "sub");
  CHECK(*root->relative((s.ws / "sub").string()) == "sub");
}

TEST_CASE("Root::open confines symlinks (openat2 and walk)") {
  for (bool walk : {false, true}) {
    CAPTURE(walk);
    WalkMode mode(walk);
    Scratch s;
    fs::create_symlink(s.out / "secret.txt", s.ws / "abs_file_link");
    fs::create_symlink("../out/secret.txt", s.ws / "rel_file_link");
    fs::create_directory_symlink("../out", s.ws / "dir_link");
    fs::create_symlink("/proc/self/root", s.ws / "proc_root");
    fs::create_symlink("sub/inner.txt", s.ws / "good_link");
    fs::create_directory_symlink("../sub", s.ws / "sub" / "loop_back");
    fs::create_symlink("self_loop", s.ws / "self_loop");
    auto root = Root::open(s.ws.string());
    REQUIRE(root);

    for (const char* p : {"abs_file_link", "rel_file_link", "dir_link/secret.txt", "proc_root/etc/passwd",
                          "proc_root"}) {
      CAPTURE(p);
      auto fd = root->open(p, O_RDONLY);
      REQUIRE_FALSE(fd);
      CHECK(fd.error().code == Errc::path_escape);
      CHECK(fd.error().message.find(p) != std::string::npos);
    }
    // Creating through a link that points out must not create anything outside.
    auto created = root->open("dir_link/new.txt", O_WRONLY | O_CREAT, 0644);
    CHECK_FALSE(created);
    CHECK_FALSE(fs::exists(s.out / "new.txt"));

    auto good = root->open("good_link", O_RDONLY);
    REQUIRE(good);
    CHECK(read_fd(good->get()) == "inner");
    auto via = root->open("sub/loop_back/loop_back/inner.txt", O_RDONLY);
    REQUIRE(via);
    CHECK(read_fd(via->get()) == "inner");

    auto loop = root->open("self_loop", O_RDONLY);
    REQUIRE_FALSE(loop);
    CHECK(loop.error().code == Errc::path_escape);
    auto missing = root->open("sub/none.txt", O_RDONLY);
    REQUIRE_FALSE(missing);
    CHECK(missing.error().code == Errc::not_found);
    auto nofollow = root->open("good_link", O_RDONLY | O_NOFOLLOW);
    REQUIRE_FALSE(nofollow);
    CHECK(nofollow.error().code == Errc::invalid_argument);

    auto dot = root->open(".", O_RDONLY | O_DIRECTORY);
    REQUIRE(dot);
    auto made = root->open("sub/made.txt", O_WRONLY | O_CREAT | O_EXCL, 0600);
    REQUIRE(made);
    CHECK(fs::exists(s.ws / "sub" / "made.txt"));
  }
}

TEST_CASE("Root::open_parent splits, creates folders beneath, refuses escapes") {
  for (bool walk : {false, true}) {
    CAPTURE(walk);
    WalkMode mode(walk);
    Scratch s;
    fs::create_directory_symlink("../out", s.ws / "dir_link");
    auto root = Root::open(s.ws.string());
    REQUIRE(root);

    auto p = root->open_parent("sub/inner.txt");
    REQUIRE(p);
    CHECK(p->name == "inner.txt");
    CHECK(p->rel == "sub/inner.txt");
    CHECK(::faccessat(p->dir.get(), "inner.txt", F_OK, 0) == 0);

    auto top = root->open_parent("top.txt");
    REQUIRE(top);
    CHECK(top->name == "top.txt");

    CHECK(root->open_parent(".").error().code == Errc::invalid_argument);
    CHECK(root->open_parent("sub/..").error().code == Errc::invalid_argument);

    auto missing = root->open_parent("a/b/c.txt");
    REQUIRE_FALSE(missing);
    CHECK(missing.error().code == Errc::not_found);
    auto made = root->open_parent("a/b/c.txt", true);
    REQUIRE(made);
    CHECK(fs::is_directory(s.ws / "a" / "b"));
    CHECK(made->name == "c.txt");

    auto out = root->open_parent("dir_link/x/y.txt", true);
    REQUIRE_FALSE(out);
    CHECK(out.error().code == Errc::path_escape);
    CHECK_FALSE(fs::exists(s.out / "x"));
    auto out2 = root->open_parent("dir_link/y.txt");
    REQUIRE_FALSE(out2);
    CHECK(out2.error().code == Errc::path_escape);
  }
}

TEST_CASE("Root::resolve follows links inside and refuses links out") {
  Scratch s;
  fs::create_symlink("sub/inner.txt", s.ws / "good_link");
  fs::create_symlink("../out/secret.txt", s.ws / "bad_link");
  auto root = Root::open(s.ws.string());
  REQUIRE(root);
  CHECK(*root->resolve("good_link") == "sub/inner.txt");
  CHECK(*root->resolve("sub") == "sub");
  CHECK(*root->resolve(".") == "");
  CHECK(root->resolve("bad_link").error().code == Errc::path_escape);
}
