// A run's output spools: files made with the first byte, tails and paged reads, and the combined
// stream that reads through to one stream until the other speaks, then holds the interleaving.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "../temp_dir.h"
#include "sandbox/combined_output.h"
#include "sandbox/output_spool.h"

using namespace kiln::sandbox;
namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("a spool makes its folder and file with the first byte, keeps a tail and reads any range") {
  kiln::test::TempDir t;
  const std::string dir = t.path + "/run_1";
  OutputSpool s(dir + "/stdout", 8);
  s.append("");
  CHECK_FALSE(fs::exists(dir));  // nothing written, nothing made
  s.append("hello ");
  s.append("world, and more");
  CHECK(fs::exists(dir + "/stdout"));
  CHECK(slurp(dir + "/stdout") == "hello world, and more");
  CHECK(s.size() == 21);
  CHECK(s.read(0, 5) == "hello");      // from the file
  CHECK(s.read(18, 100) == "ore");     // from the tail
  auto tail = s.tail(4);
  CHECK(tail.text == "more");
  CHECK(tail.truncated);
  CHECK(s.write_error() == 0);
}

TEST_CASE("a chunk longer than the kept tail replaces it: every offset still reads its own byte") {
  kiln::test::TempDir t;
  OutputSpool s(t.path + "/run_3/stdout", 8);
  s.append("abcde");
  s.append("0123456789ABCDEF");  // longer than the tail: appending only its end left a gap
  const std::string all = "abcde0123456789ABCDEF";
  for (std::size_t i = 0; i < all.size(); ++i) CHECK(s.read(i, 1) == all.substr(i, 1));
  CHECK(s.tail(8).text == "89ABCDEF");
}

TEST_CASE("a spool whose file cannot be made keeps its tail and says why") {
  kiln::test::TempDir t;
  OutputSpool s(t.path + "/no/such/dir/stdout", 64);  // only the last folder is ever made
  s.append("abc");
  CHECK(s.write_error() == ENOENT);
  CHECK(s.tail(64).text == "abc");
}

TEST_CASE("the combined stream is the one stream until the other speaks, then the interleaving") {
  kiln::test::TempDir t;
  const std::string dir = t.path + "/run_2";
  OutputSpool out(dir + "/stdout", 64 * 1024), err(dir + "/stderr", 64 * 1024);
  CombinedOutput both(dir + "/output", 16 * 1024, out, err);
  auto say = [&](bool is_err, const std::string& text) {
    (is_err ? err : out).append(text);
    both.append(is_err, text);
  };
  CHECK(both.size() == 0);
  say(false, "line 1\n");
  say(false, "line 2\n");
  // Only stdout so far: read through, no file of its own.
  CHECK(both.size() == 14);
  CHECK(both.read(0, 100) == "line 1\nline 2\n");
  CHECK(both.bytes_on_disk() == 0);
  CHECK_FALSE(fs::exists(dir + "/output"));

  say(true, "warning\n");
  say(false, "line 3\n");
  const std::string all = "line 1\nline 2\nwarning\nline 3\n";
  CHECK(both.size() == all.size());
  CHECK(both.read(0, 1000) == all);
  CHECK(both.read(7, 7) == "line 2\n");
  CHECK(both.read(12, 8) == "2\nwarnin");  // across the boundary of the first stream's prefix
  for (std::size_t i = 0; i < all.size(); ++i) CHECK(both.read(i, 1) == all.substr(i, 1));
  // Nothing of the prefix is copied: the file holds the interleaving from the moment stderr spoke.
  CHECK(slurp(dir + "/output") == "warning\nline 3\n");
  CHECK(both.bytes_on_disk() == 15);
  CHECK(out.size() == 21);
  CHECK(err.size() == 8);
  CHECK(both.write_error() == 0);
}

TEST_CASE("a combined stream after a large first stream reads every byte back in order, copying none") {
  kiln::test::TempDir t;
  const std::string dir = t.path + "/run_3";
  OutputSpool out(dir + "/stdout", 64 * 1024), err(dir + "/stderr", 64 * 1024);
  CombinedOutput both(dir + "/output", 16 * 1024, out, err);
  std::string first;
  for (int i = 0; first.size() < 300 * 1024; ++i) first += "stderr line " + std::to_string(i) + "\n";
  err.append(first);
  both.append(true, first);
  out.append("done\n");
  both.append(false, "done\n");
  CHECK(both.size() == first.size() + 5);
  CHECK(both.read(0, first.size() + 5) == first + "done\n");
  CHECK(both.read(1000, 10) == first.substr(1000, 10));  // from stderr's file, not a tail
  CHECK(both.read(first.size() - 3, 100) == first.substr(first.size() - 3) + "done\n");
  CHECK(both.bytes_on_disk() == 5);
  // More of the first stream after the switch lands after "done".
  err.append("late\n");
  both.append(true, "late\n");
  CHECK(both.read(first.size(), 100) == "done\nlate\n");
  CHECK(both.size() == first.size() + 10);
}
