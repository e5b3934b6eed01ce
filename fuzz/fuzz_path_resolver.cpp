// Fuzzes the workspace path resolver (workspace/root.*) on a real folder with symlinks that stay
// inside and symlinks that lead out: whatever it opens or creates must be beneath the root, with
// openat2 and with the per-component walk.
#include <fcntl.h>
#include <sys/stat.h>

#include <set>

#include "fuzz/fuzz_support.h"
#include "workspace/root.h"

namespace fs = std::filesystem;
using kiln::fuzz::violated;
using kiln::workspace::Root;

namespace {

struct World {
  std::string top, root, outside;
  std::unique_ptr<Root> ws;
  std::set<std::string> original;  // every entry under root at start
};

std::set<std::string> entries(const std::string& dir) {
  std::set<std::string> out;
  for (auto& e : fs::recursive_directory_iterator(dir)) out.insert(e.path().string());
  return out;
}

World& world() {
  static World w = [] {
    kiln::fuzz::quiet_logs();
    World w;
    w.top = kiln::fuzz::scratch_dir();
    w.root = w.top + "/ws";
    w.outside = w.top + "/outside";
    kiln::fuzz::write_file(w.root + "/src/main.c", "int main(){}\n");
    kiln::fuzz::write_file(w.root + "/a/b/c.txt", "c\n");
    kiln::fuzz::write_file(w.outside + "/secret.txt", "secret\n");
    fs::create_symlink("../outside", w.root + "/out");             // leads out
    fs::create_symlink("/etc/passwd", w.root + "/passwd");         // absolute, out
    fs::create_symlink("src/main.c", w.root + "/in");              // stays in
    fs::create_symlink("a/b", w.root + "/ab");                     // a folder, in
    fs::create_symlink("../../ws/src", w.root + "/a/loop");        // out and back in by name
    fs::create_symlink("/proc/self/root", w.root + "/magic");      // magic link
    fs::create_symlink("self", w.root + "/self");                  // a loop
    auto r = Root::open(w.root);
    if (!r) violated("cannot open the fuzz root", r.error().message);
    w.ws = std::make_unique<Root>(std::move(*r));
    w.original = entries(w.root);
    return w;
  }();
  return w;
}

std::string fd_path(int fd) {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/fd/" + std::to_string(fd), ec);
  return ec ? std::string() : p.string();
}

void check_beneath(const World& w, int fd, std::string_view input) {
  std::string p = fd_path(fd);
  if (p != w.root && !p.starts_with(w.root + "/")) violated("opened outside the root", p + " for input " + std::string(input));
}

void check_relative(std::string_view rel, std::string_view input) {
  if (rel.starts_with('/') || rel.ends_with('/') || rel == "." ) violated("relative() not normalised", rel);
  std::string_view s = rel;
  while (!s.empty()) {
    auto slash = s.find('/');
    auto part = s.substr(0, slash);
    if (part.empty() || part == "." || part == "..") violated("relative() kept a dot or empty component", std::string(rel) + " <- " + std::string(input));
    if (slash == std::string_view::npos) break;
    s.remove_prefix(slash + 1);
  }
}

// Nothing may appear next to ws/ and outside/, nor inside outside/.
void check_no_escape(const World& w) {
  std::size_t n = 0;
  for (auto& e : fs::directory_iterator(w.top)) {
    (void)e;
    ++n;
  }
  std::size_t m = 0;
  for (auto& e : fs::directory_iterator(w.outside)) {
    (void)e;
    ++m;
  }
  if (n != 2 || m != 1) violated("something was created outside the root");
}

}  // namespace

// Byte 0: bit 0 forces the component walk, bits 1-2 pick the operation; the rest is the path.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  World& w = world();
  Root::force_component_walk(data[0] & 1);
  std::string_view path(reinterpret_cast<const char*>(data + 1), size - 1);

  auto rel = w.ws->relative(path);
  if (rel) check_relative(*rel, path);
  switch ((data[0] >> 1) & 3) {
    case 0:
      if (auto fd = w.ws->open(path, O_RDONLY | O_CLOEXEC)) check_beneath(w, fd->get(), path);
      break;
    case 1:
      if (auto fd = w.ws->open(path, O_PATH | O_CLOEXEC)) check_beneath(w, fd->get(), path);
      break;
    case 2:
      if (auto p = w.ws->open_parent(path, (data[0] & 8) != 0)) {
        check_beneath(w, p->dir.get(), path);
        if (p->name.empty() || p->name == "." || p->name == ".." || p->name.find('/') != std::string::npos)
          violated("open_parent returned a bad last component", p->name);
      }
      break;
    case 3:
      if (auto r = w.ws->resolve(path)) check_relative(*r, path);
      break;
  }
  check_no_escape(w);
  // Folders open_parent made are removed again, so inputs do not depend on each other.
  if (data[0] & 8) {
    for (const auto& e : entries(w.root)) {
      std::error_code ec;
      if (!w.original.contains(e)) fs::remove_all(e, ec);
    }
  }
  return 0;
}
