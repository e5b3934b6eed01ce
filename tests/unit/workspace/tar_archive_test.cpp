// The pax tar writer and reader (workspace/tar_format.h), the zstd stream, and the import's
// refusals (workspace/checkpoint_archive.h): round trips in memory and through files, what GNU
// tar makes of our archives and we of its, and each tar-slip shape refused with nothing left.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "../temp_dir.h"
#include "workspace/archive_stream.h"
#include "workspace/checkpoint_archive.h"
#include "workspace/tar_format.h"

using namespace kiln;
using namespace kiln::workspace;
using kiln::test::TempDir;

namespace {

struct Entry {
  TarHeader h;
  std::string data;
};

std::string write_tar(const std::vector<Entry>& entries) {
  std::string out;
  TarWriter w([&](std::string_view d) -> Result<void> {
    out.append(d);
    return {};
  });
  for (const auto& e : entries) {
    REQUIRE(w.add(e.h));
    if (e.h.type == TarType::file) REQUIRE(w.write_data(e.data));
  }
  REQUIRE(w.finish());
  return out;
}

std::vector<Entry> read_tar(const std::string& bytes) {
  std::size_t pos = 0;
  TarReader r([&](char* buf, std::size_t n) -> Result<std::size_t> {
    n = std::min(n, bytes.size() - pos);
    std::memcpy(buf, bytes.data() + pos, n);
    pos += n;
    return n;
  });
  std::vector<Entry> out;
  for (;;) {
    auto h = r.next();
    REQUIRE(h);
    if (!*h) break;
    Entry e{**h, {}};
    char buf[4096];
    for (;;) {
      auto n = r.read_data(buf, sizeof buf);
      REQUIRE(n);
      if (*n == 0) break;
      e.data.append(buf, *n);
    }
    out.push_back(std::move(e));
  }
  return out;
}

TarHeader file(std::string path, std::uint64_t size, std::uint32_t mode = 0644) {
  TarHeader h;
  h.path = std::move(path);
  h.type = TarType::file;
  h.size = size;
  h.mode = mode;
  h.mtime = 1700000000;
  return h;
}
TarHeader dir(std::string path, std::uint32_t mode = 0755) {
  TarHeader h;
  h.path = std::move(path);
  h.type = TarType::dir;
  h.mode = mode;
  return h;
}
TarHeader symlink_entry(std::string path, std::string target) {
  TarHeader h;
  h.path = std::move(path);
  h.type = TarType::symlink;
  h.mode = 0777;
  h.link_target = std::move(target);
  return h;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  ::pclose(p);
  return out;
}

bool have_tar() { return std::system("tar --version >/dev/null 2>&1") == 0; }

}  // namespace

TEST_CASE("pax records count their own length") {
  CHECK(pax_record("a", "b") == "6 a=b\n");
  // 100 bytes exactly: the length's third digit makes the record one longer than 99 would say.
  std::string v(100 - 7 - 3, 'x');  // "100 path=" + v + "\n" -> 3+1+5+v+1
  std::string rec = pax_record("path", v);
  CHECK(rec.size() == std::stoul(rec.substr(0, rec.find(' '))));
  for (std::size_t len = 0; len < 2000; len += 7) {
    std::string r = pax_record("path", std::string(len, 'y'));
    CHECK(r.size() == std::stoul(r.substr(0, r.find(' '))));
  }
}

TEST_CASE("writer and reader round-trip long, non-UTF-8 names, long link targets and modes") {
  const std::string long_name = std::string(150, 'd') + "/" + std::string(120, 'f') + ".txt";  // no ustar split fits
  const std::string split_name = std::string(120, 'p') + "/short.txt";                        // ustar prefix
  const std::string binary_name = std::string("bin/\xff\xfe-\xc3\xa9\x01-name");
  const std::string long_target = std::string(200, 't');
  std::vector<Entry> in = {
      {dir("bin", 0700), ""},
      {file(binary_name, 5, 0755), "hello"},
      {file(long_name, 3), "abc"},
      {file(split_name, 0, 0600), ""},
      {symlink_entry("bin/link", long_target), ""},
      {symlink_entry("rel", "../x/y"), ""},
      {file("big/one.bin", 513), std::string(513, '\x7f')},
  };
  auto out = read_tar(write_tar(in));
  REQUIRE(out.size() == in.size());
  CHECK(out[0].h.path == "bin/");
  CHECK(out[0].h.type == TarType::dir);
  CHECK(out[0].h.mode == 0700);
  CHECK(out[1].h.path == binary_name);
  CHECK(out[1].h.mode == 0755);
  CHECK(out[1].data == "hello");
  CHECK(out[1].h.mtime == 1700000000);
  CHECK(out[2].h.path == long_name);
  CHECK(out[2].data == "abc");
  CHECK(out[3].h.path == split_name);
  CHECK(out[3].h.mode == 0600);
  CHECK(out[4].h.type == TarType::symlink);
  CHECK(out[4].h.link_target == long_target);
  CHECK(out[5].h.link_target == "../x/y");
  CHECK(out[6].data == std::string(513, '\x7f'));
}

TEST_CASE("a size of 8 GiB or more goes in a pax size record") {
  std::string out;
  TarWriter w([&](std::string_view d) -> Result<void> {
    out.append(d);
    return {};
  });
  const std::uint64_t huge = 9ull << 30;  // over the 12-byte octal field's 8 GiB - 1
  REQUIRE(w.add(file("huge.bin", huge)));
  CHECK(out.find(pax_record("size", std::to_string(huge))) != std::string::npos);
  // The header is followed by data the reader would wait for; only the header is read here.
  std::size_t pos = 0;
  TarReader r([&](char* buf, std::size_t n) -> Result<std::size_t> {
    n = std::min(n, out.size() - pos);
    std::memcpy(buf, out.data() + pos, n);
    pos += n;
    return n;
  });
  auto h = r.next();
  REQUIRE(h);
  REQUIRE(*h);
  CHECK((*h)->size == huge);
  CHECK((*h)->path == "huge.bin");
  char buf[16];
  auto n = r.read_data(buf, sizeof buf);  // the stream ends: a truncated archive, said so
  CHECK(!n);
}

TEST_CASE("the reader refuses damage: a wrong checksum, a truncated entry") {
  std::string bytes = write_tar({{file("a.txt", 4), "data"}});
  std::string bad = bytes;
  bad[0] = 'b';  // the name changes, the checksum does not
  std::size_t pos = 0;
  TarReader r([&](char* buf, std::size_t n) -> Result<std::size_t> {
    n = std::min(n, bad.size() - pos);
    std::memcpy(buf, bad.data() + pos, n);
    pos += n;
    return n;
  });
  auto h = r.next();
  REQUIRE(!h);
  CHECK(h.error().message.find("checksum") != std::string::npos);

  std::string cut = bytes.substr(0, 512 + 2);
  pos = 0;
  TarReader r2([&](char* buf, std::size_t n) -> Result<std::size_t> {
    n = std::min(n, cut.size() - pos);
    std::memcpy(buf, cut.data() + pos, n);
    pos += n;
    return n;
  });
  auto h2 = r2.next();
  REQUIRE(h2);
  char buf[16];
  CHECK(!r2.read_data(buf, sizeof buf));
}

TEST_CASE("zstd output is read back; plain input is passed through") {
  TempDir t("kiln-tar");
  for (bool zstd : {true, false}) {
    const std::string path = t.path + (zstd ? "/a.tar.zst" : "/a.tar");
    std::string payload = write_tar({{file("x/y.txt", 6), "line1\n"}, {dir("x")}});
    {
      int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      REQUIRE(fd >= 0);
      auto out = ArchiveOutput::open(fd, zstd);
      REQUIRE(out);
      REQUIRE((*out)->write(payload));
      REQUIRE((*out)->finish());
      ::close(fd);
    }
    auto in = ArchiveInput::open(UniqueFd(::open(path.c_str(), O_RDONLY)), path);
    REQUIRE(in);
    CHECK((*in)->compressed() == zstd);
    std::string back;
    char buf[777];
    for (;;) {
      auto n = (*in)->read(buf, sizeof buf);
      REQUIRE(n);
      if (*n == 0) break;
      back.append(buf, *n);
    }
    CHECK(back == payload);
    if (have_tar() && zstd && std::system("zstd --version >/dev/null 2>&1") == 0) {
      std::string listing = run("tar --zstd -tf " + path);
      CHECK(listing == "x/y.txt\nx/\n");
    }
  }
}

TEST_CASE("GNU tar reads what the writer wrote, names and modes intact") {
  if (!have_tar()) return;
  TempDir t("kiln-tar");
  const std::string long_name = std::string(150, 'd') + "/" + std::string(120, 'f') + ".txt";
  std::string bytes = write_tar({{dir("sub", 0750), ""},
                                 {file("sub/run.sh", 3, 0755), "#!\n"},
                                 {file(long_name, 2), "ok"},
                                 {symlink_entry("sub/up", "../" + long_name), ""}});
  write_file(t.path + "/a.tar", bytes);
  std::filesystem::create_directory(t.path + "/out");
  REQUIRE(std::system(("tar -xpf " + t.path + "/a.tar -C " + t.path + "/out 2>&1").c_str()) == 0);
  struct stat st {};
  REQUIRE(::stat((t.path + "/out/sub/run.sh").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0755);
  REQUIRE(::stat((t.path + "/out/sub").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0750);
  std::ifstream f(t.path + "/out/" + long_name);
  std::string got((std::istreambuf_iterator<char>(f)), {});
  CHECK(got == "ok");
  CHECK(std::filesystem::read_symlink(t.path + "/out/sub/up").string() == "../" + long_name);
}

TEST_CASE("the reader takes GNU tar's own long names") {
  if (!have_tar()) return;
  TempDir t("kiln-tar");
  const std::string deep = std::string(130, 'a') + "/" + std::string(130, 'b');
  std::filesystem::create_directories(t.path + "/src/" + deep);
  write_file(t.path + "/src/" + deep + "/f.txt", "gnu");
  REQUIRE(std::system(("tar --format=gnu -cf " + t.path + "/g.tar -C " + t.path + "/src .").c_str()) == 0);
  auto c = unpack_archive(t.path + "/g.tar", t.path + "/dest");
  REQUIRE_MESSAGE(c, c.error().message);
  CHECK(c->files == 1);
  std::ifstream f(t.path + "/dest/" + deep + "/f.txt");
  std::string got((std::istreambuf_iterator<char>(f)), {});
  CHECK(got == "gnu");
}

TEST_CASE("unpack refuses tar-slip shapes and leaves nothing behind") {
  TempDir t("kiln-tar");
  std::filesystem::create_directory(t.path + "/outside");
  struct Case {
    const char* what;
    std::vector<Entry> entries;
    const char* says;
  };
  std::vector<Case> cases = {
      {"absolute", {{file("/tmp/evil", 1), "x"}}, "absolute"},
      {"dot-dot", {{file("a/../../evil", 1), "x"}}, "\"..\""},
      {"through a link out", {{symlink_entry("l", t.path + "/outside"), ""}, {file("l/evil", 1), "x"}}, "symbolic link"},
      {"through a link in", {{dir("d"), ""}, {symlink_entry("l", "d"), ""}, {file("l/f", 1), "x"}}, "symbolic link"},
      {"twice", {{file("a", 1), "x"}, {file("a", 1), "y"}}, "twice"},
      {"a link then a file of its name", {{symlink_entry("a", "/etc/passwd"), ""}, {file("a", 1), "y"}}, "twice"},
      {"setuid", {{file("su", 1, 04755), "x"}}, "setuid"},
      {"setgid", {{file("sg", 1, 02755), "x"}}, "setgid"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    write_file(t.path + "/evil.tar", write_tar(c.entries));
    const std::string dest = t.path + "/dest";
    auto r = unpack_archive(t.path + "/evil.tar", dest);
    REQUIRE(!r);
    CHECK(r.error().message.find(c.says) != std::string::npos);
    CHECK(!std::filesystem::exists(dest));
    CHECK(std::filesystem::is_empty(t.path + "/outside"));
    CHECK(!std::filesystem::exists("/tmp/evil"));
  }
}

TEST_CASE("unpack applies modes, read-only folders last; refuses a non-empty folder") {
  TempDir t("kiln-tar");
  write_file(t.path + "/ok.tar", write_tar({{dir("ro", 0555), ""},
                                            {file("ro/f.txt", 2, 0444), "hi"},
                                            {file("x/y/deep.txt", 1, 0600), "z"},
                                            {symlink_entry("x/l", "y/deep.txt"), ""}}));
  auto r = unpack_archive(t.path + "/ok.tar", t.path + "/dest");
  REQUIRE_MESSAGE(r, r.error().message);
  CHECK(r->files == 2);
  CHECK(r->folders == 1);
  CHECK(r->symlinks == 1);
  struct stat st {};
  REQUIRE(::stat((t.path + "/dest/ro").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0555);
  REQUIRE(::stat((t.path + "/dest/ro/f.txt").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0444);
  CHECK(std::filesystem::read_symlink(t.path + "/dest/x/l") == "y/deep.txt");
  ::chmod((t.path + "/dest/ro").c_str(), 0755);  // so TempDir can remove it

  auto again = unpack_archive(t.path + "/ok.tar", t.path + "/dest");
  REQUIRE(!again);
  CHECK(again.error().message.find("not empty") != std::string::npos);
  CHECK(std::filesystem::exists(t.path + "/dest/x/y/deep.txt"));  // what was there is untouched

  std::filesystem::create_directory(t.path + "/empty");
  CHECK(unpack_archive(t.path + "/ok.tar", t.path + "/empty"));
  ::chmod((t.path + "/empty/ro").c_str(), 0755);
}
