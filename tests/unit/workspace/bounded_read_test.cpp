// file_read's work per call is bounded whatever the file's size (security case 34): files above
// the whole-file threshold are paged without hashing or scanning all of them, reads stop at the
// size seen at open, and a cancelled call stops. Small thresholds keep the files small.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <stop_token>
#include <string>

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "workspace/file_ops.h"
#include "workspace/root.h"

namespace fs = std::filesystem;
using kiln::Errc;
using namespace kiln::workspace;

namespace {

struct Dir {
  fs::path base;
  std::optional<Root> root;
  Dir() {
    std::string tmpl = "/tmp/kiln-bounded-read-XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    base = tmpl;
    auto r = Root::open(base.string());
    REQUIRE(r);
    root.emplace(std::move(*r));
  }
  ~Dir() {
    std::error_code ec;
    fs::remove_all(base, ec);
  }
  void put(const std::string& name, const std::string& body) const {
    std::ofstream(base / name, std::ios::binary) << body;
  }
};

std::string lines(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += "line " + std::to_string(i) + "\n";
  return s;
}

bool has(const std::string& s, std::string_view what) { return s.find(what) != std::string::npos; }

}  // namespace

TEST_CASE("a file up to the threshold is still read whole") {
  Dir d;
  d.put("small.txt", lines(100));
  auto r = read_file(*d.root, {.path = "small.txt", .offset = 10, .limit = 2, .whole_file_bytes = 4096});
  REQUIRE(r);
  CHECK(r->total_lines == 100);
  CHECK(r->sha256 == sha256_hex(lines(100)));
  CHECK(r->note.empty());
}

TEST_CASE("base64 pages of a bigger file read just their bytes") {
  Dir d;
  d.put("big.bin", lines(1000));  // ~8.9 KB
  auto r = read_file(*d.root, {.path = "big.bin", .offset = 7, .limit = 6, .encoding = Encoding::base64,
                               .whole_file_bytes = 1024});
  REQUIRE(r);
  CHECK(r->content == "bGluZSAx");  // "line 1"
  CHECK(r->count == 6);
  CHECK(r->next_offset == 13);
  CHECK_FALSE(r->sha256);
  CHECK_FALSE(r->total_lines);
  CHECK(r->size == lines(1000).size());
  CHECK(has(r->note, "sha256"));
  auto end = read_file(*d.root, {.path = "big.bin", .offset = r->size - 2, .encoding = Encoding::base64,
                                 .whole_file_bytes = 1024});
  REQUIRE(end);
  CHECK(end->count == 2);
  CHECK_FALSE(end->next_offset);
  auto past = read_file(*d.root, {.path = "big.bin", .offset = r->size + 1, .encoding = Encoding::base64,
                                  .whole_file_bytes = 1024});
  CHECK_FALSE(past);
}

TEST_CASE("a 10 GB sparse file: a base64 page far inside it, and text mode refusing its NULs early") {
  Dir d;
  int fd = ::open((d.base / "sparse").c_str(), O_CREAT | O_WRONLY, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, 10ll << 30) == 0);
  REQUIRE(::pwrite(fd, "hello", 5, 5ll << 30) == 5);
  ::close(fd);
  // With the default thresholds: the old single pass hashed all 10 GB (about a minute) for this.
  auto r = read_file(*d.root, {.path = "sparse", .offset = 5ull << 30, .limit = 5, .encoding = Encoding::base64});
  REQUIRE(r);
  CHECK(r->content == "aGVsbG8=");
  CHECK(r->size == (10ull << 30));
  CHECK_FALSE(r->sha256);
  auto t = read_file(*d.root, {.path = "sparse"});
  REQUIRE_FALSE(t);
  CHECK(has(t.error().message, "base64"));
}

TEST_CASE("text pages of a bigger file scan only until the page is full") {
  Dir d;
  d.put("big.txt", lines(1000));
  auto r = read_file(*d.root, {.path = "big.txt", .offset = 5, .limit = 2, .whole_file_bytes = 1024,
                               .scan_budget = 4096});
  REQUIRE(r);
  CHECK(r->content == "line 5\nline 6\n");
  CHECK(r->count == 2);
  CHECK(r->next_offset == 7);
  CHECK(r->truncated);
  CHECK_FALSE(r->total_lines);
  CHECK_FALSE(r->sha256);
  CHECK(has(r->note, "base64"));
  // A line past the scan budget is an error that says how to get there (the budget is checked
  // per 64 KiB chunk, so the file is bigger than one).
  d.put("bigger.txt", lines(20000));
  auto far = read_file(*d.root, {.path = "bigger.txt", .offset = 15000, .whole_file_bytes = 1024, .scan_budget = 4096});
  REQUIRE_FALSE(far);
  CHECK(far.error().code == Errc::too_large);
  CHECK(has(far.error().message, "base64"));
  CHECK(has(far.error().message, "line 15001"));
  // Bytes that were scanned are still checked for being text (beyond them nothing is: documented).
  d.put("bin.txt", "ok\n" + std::string("\0", 1) + lines(1000));
  auto bin = read_file(*d.root, {.path = "bin.txt", .offset = 0, .limit = 1, .whole_file_bytes = 1024});
  CHECK_FALSE(bin);
}

TEST_CASE("a cancelled read or guarded write stops") {
  Dir d;
  d.put("f.txt", lines(100));
  std::stop_source stop;
  stop.request_stop();
  auto r = read_file(*d.root, {.path = "f.txt"}, stop.get_token());
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Errc::cancelled);
  auto w = write_file(*d.root, {.path = "f.txt", .content = "x", .if_sha256 = sha256_hex(lines(100))}, stop.get_token());
  REQUIRE_FALSE(w);
  CHECK(w.error().code == Errc::cancelled);
  CHECK(read_file(*d.root, {.path = "f.txt"})->sha256 == sha256_hex(lines(100)));
}

TEST_CASE("if_sha256 on a file too big to hash is refused at once") {
  Dir d;
  int fd = ::open((d.base / "huge").c_str(), O_CREAT | O_WRONLY, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, static_cast<off_t>(kWholeFileBytes + 1)) == 0);
  ::close(fd);
  auto w = write_file(*d.root, {.path = "huge", .content = "x", .if_sha256 = std::string(64, '0')});
  REQUIRE_FALSE(w);
  CHECK(w.error().code == Errc::too_large);
  CHECK(has(w.error().message, "without if_sha256"));
}

TEST_CASE("a huge path is quoted by its start only") {
  Dir d;
  std::string path(10 << 20, 'p');
  auto r = read_file(*d.root, {.path = path});
  REQUIRE_FALSE(r);
  CHECK(r.error().message.size() < 4096);
  CHECK(has(r.error().message, "bytes)"));
}
