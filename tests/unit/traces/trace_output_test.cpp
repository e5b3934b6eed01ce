// Output of a traced run read back: paging at the file's boundaries, tails, and grep with line
// numbers and offsets that stay right across continued calls.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "trace_test_support.h"
#include "traces/trace_store.h"

using namespace kiln::traces;
using namespace kiln::traces::testing;

TEST_CASE("read_output pages through the stream at its boundaries") {
  TempDir t;
  auto s = open_store(t.path);
  auto rec = start(*s);
  auto dir = s->output_dir(rec.id);
  REQUIRE(dir);
  std::string data;
  for (int i = 0; data.size() < 300 * 1024; ++i) data += fmt::format("line {}\n", i);
  std::filesystem::create_directory(*dir);
  write_file(*dir + "/stdout", data);
  const uint64_t total = data.size();

  std::string joined;
  uint64_t off = 0;
  for (int i = 0; i < 10; ++i) {
    auto sl = s->read_output(rec.id, "stdout", int64_t(off), 0);
    REQUIRE(sl);
    CHECK(sl->offset == off);
    CHECK(sl->total_bytes == total);
    CHECK(sl->data.size() <= kOutputPageMax);
    joined += sl->data;
    off = sl->next_offset;
    if (sl->eof) break;
  }
  CHECK(joined == data);

  auto big = s->read_output(rec.id, "stdout", 0, 10 << 20);
  CHECK(big->data.size() == kOutputPageMax);
  auto last = s->read_output(rec.id, "stdout", int64_t(total - 5), 5);
  CHECK(last->data == data.substr(total - 5));
  CHECK(last->eof);
  auto before_last = s->read_output(rec.id, "stdout", int64_t(total - 6), 5);
  CHECK_FALSE(before_last->eof);
  CHECK(before_last->next_offset == total - 1);
  auto at_end = s->read_output(rec.id, "stdout", int64_t(total), 100);
  CHECK(at_end->data.empty());
  CHECK(at_end->eof);
  auto past = s->read_output(rec.id, "stdout", int64_t(total + 100), 100);
  CHECK(past->data.empty());
  CHECK(past->eof);
  auto tail = s->read_output(rec.id, "stdout", -10, 0);
  CHECK(tail->data == data.substr(total - 10));
  CHECK(tail->offset == total - 10);
  auto huge_tail = s->read_output(rec.id, "stdout", -int64_t(total) - 50, 4);
  CHECK(huge_tail->offset == 0);
  CHECK(huge_tail->data == "line");
  auto none = s->read_output(rec.id, "stderr", 0, 0);
  REQUIRE(none);
  CHECK(none->total_bytes == 0);
  CHECK(none->eof);
  CHECK(s->read_output(rec.id, "stdin", 0, 0).error().code == kiln::Errc::invalid_argument);
  CHECK(s->read_output("tr_0000000000000000", "stdout", 0, 0).error().code == kiln::Errc::not_found);
}

TEST_CASE("grep_output finds lines with their numbers and offsets, and continues where it stopped") {
  TempDir t;
  auto s = open_store(t.path);
  auto rec = start(*s);
  auto dir = s->output_dir(rec.id);
  REQUIRE(dir);
  std::string data = "ok 1\nerror: first\r\nok 2\n" + std::string(3000, 'x') + " error long\nerror: \xff bad byte\n";
  for (int i = 0; i < 50; ++i) data += fmt::format("warning {}\n", i);
  data += "error: last, no newline";
  std::filesystem::create_directory(*dir);
  write_file(*dir + "/stderr", data);

  auto g = s->grep_output(rec.id, "stderr", "^error", 0, 0);
  REQUIRE_MESSAGE(g.has_value(), (g ? "" : g.error().message));
  // Still running: the unterminated last line may grow, so it waits for a later call.
  REQUIRE(g->matches.size() == 2);
  CHECK(g->matches[0].line_number == 2);
  CHECK(g->matches[0].offset == 5);
  CHECK(g->matches[0].text == "error: first");
  CHECK(g->matches[1].line_number == 5);
  CHECK(g->matches[1].text == "error: \xff bad byte");
  CHECK(g->eof);
  CHECK(g->next_offset == data.rfind('\n') + 1);

  finish(*s, rec.id, "fail");
  auto rest = s->grep_output(rec.id, "stderr", "^error", g->next_offset, 10);
  REQUIRE(rest);
  REQUIRE(rest->matches.size() == 1);
  CHECK(rest->matches[0].line_number == 56);
  CHECK(rest->matches[0].text == "error: last, no newline");
  CHECK(rest->eof);
  CHECK(rest->next_offset == data.size());

  auto longl = s->grep_output(rec.id, "stderr", "error long", 0, 10);
  REQUIRE(longl->matches.size() == 1);
  CHECK(longl->matches[0].line_number == 4);
  CHECK(longl->matches[0].truncated);
  CHECK(longl->matches[0].text.size() == kGrepLineBytes);

  // Three at a time: line numbers carry over, whether the continuation is remembered or recounted.
  std::vector<uint64_t> lines;
  uint64_t off = 0;
  for (int i = 0; i < 30; ++i) {
    auto fresh = open_store(t.path);  // every other call through a store that never saw the last one
    auto page = (i % 2 ? *fresh : *s).grep_output(rec.id, "stderr", "warning \\d*5$", off, 3);
    REQUIRE(page);
    for (auto& m : page->matches) lines.push_back(m.line_number);
    off = page->next_offset;
    if (page->eof) break;
  }
  CHECK(lines == std::vector<uint64_t>{11, 21, 31, 41, 51});

  auto bad = s->grep_output(rec.id, "stderr", "err(or", 0, 10);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == kiln::Errc::invalid_argument);
  CHECK(bad.error().message.find("offset 6") != std::string::npos);
  auto none = s->grep_output(rec.id, "stdout", "x", 0, 10);
  REQUIRE(none);
  CHECK(none->matches.empty());
  CHECK(none->eof);
}

TEST_CASE("grep_output stays bounded on a line longer than it searches whole") {
  TempDir t;
  auto s = open_store(t.path);
  auto rec = start(*s);
  finish(*s, rec.id, "pass");
  auto dir = s->output_dir(rec.id);
  REQUIRE(dir);
  std::string data = "needle at start" + std::string(3 << 20, 'y') + "needle hidden far\nneedle after\n";
  std::filesystem::create_directory(*dir);
  write_file(*dir + "/stdout", data);
  auto g = s->grep_output(rec.id, "stdout", "needle", 0, 10);
  REQUIRE(g);
  REQUIRE(g->matches.size() == 2);
  CHECK(g->matches[0].line_number == 1);
  CHECK(g->matches[0].truncated);
  CHECK(g->matches[1].line_number == 2);
  CHECK(g->matches[1].text == "needle after");
  CHECK(g->matches[1].offset == data.size() - 13);
  CHECK(g->eof);
}
