// file_list and file_search against real folders: depth, paging, .gitignore handling, symlinks
// that must not lead out, and the search options an agent relies on.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "workspace/file_list.h"
#include "workspace/root.h"
#include "workspace/search.h"
#include "workspace/search_text.h"
#include "workspace/tree_walk.h"

namespace fs = std::filesystem;
using kiln::Errc;
using namespace kiln::workspace;

namespace {

struct Tree {
  fs::path dir;
  Tree() {
    std::string tmpl = (fs::temp_directory_path() / "kiln-ls-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    dir = tmpl;
  }
  ~Tree() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  void write(const std::string& rel, const std::string& content) const {
    fs::path p = dir / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
  }
  void mkdir(const std::string& rel) const { fs::create_directories(dir / rel); }
  Root root() const {
    auto r = Root::open(dir.string());
    REQUIRE(r);
    return std::move(*r);
  }
};

std::vector<std::string> paths(const ListResult& r) {
  std::vector<std::string> out;
  for (const auto& e : r.entries) out.push_back(e.path);
  return out;
}

std::vector<std::string> where(const SearchResult& r) {
  std::vector<std::string> out;
  for (const auto& m : r.matches) out.push_back(m.path + ":" + std::to_string(m.line));
  return out;
}

ListResult list(const Root& root, ListRequest req) {
  auto r = list_files(root, req);
  REQUIRE_MESSAGE(r, (r ? "" : r.error().message));
  return std::move(*r);
}

SearchResult find(const Root& root, SearchRequest req) {
  auto r = search(root, req, {});
  REQUIRE_MESSAGE(r, (r ? "" : r.error().message));
  return std::move(*r);
}

using Strings = std::vector<std::string>;

}  // namespace

TEST_CASE("list: depth, tree order, types, sizes and times") {
  Tree t;
  t.write("b.txt", "hello");
  t.write("a-b/x", "");
  t.write("a/one.c", "1");
  t.write("a/deep/two.c", "22");
  fs::create_symlink("b.txt", t.dir / "link");
  auto root = t.root();

  auto top = list(root, {});
  CHECK(top.path == ".");
  CHECK(paths(top) == Strings{"a", "a-b", "b.txt", "link"});
  CHECK(top.total == 4);
  CHECK_FALSE(top.truncated);
  CHECK_FALSE(top.next_offset);
  CHECK(top.entries[0].type == EntryType::dir);
  CHECK(top.entries[2].type == EntryType::file);
  CHECK(top.entries[2].size == 5);
  CHECK(top.entries[3].type == EntryType::symlink);
  CHECK(top.entries[3].link_target == "b.txt");
  CHECK(std::regex_match(top.entries[2].mtime, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")));

  ListRequest all;
  all.depth = 0;
  CHECK(paths(list(root, all)) == Strings{"a", "a/deep", "a/deep/two.c", "a/one.c", "a-b", "a-b/x", "b.txt", "link"});
  ListRequest two;
  two.depth = 2;
  CHECK(paths(list(root, two)) == Strings{"a", "a/deep", "a/one.c", "a-b", "a-b/x", "b.txt", "link"});

  ListRequest sub;
  sub.path = "a/";
  auto s = list(root, sub);
  CHECK(s.path == "a");
  CHECK(paths(s) == Strings{"a/deep", "a/one.c"});

  ListRequest file;
  file.path = "a/one.c";
  CHECK(paths(list(root, file)) == Strings{"a/one.c"});

  ListRequest glob;
  glob.depth = 0;
  glob.glob = "*.c";
  CHECK(paths(list(root, glob)) == Strings{"a/deep/two.c", "a/one.c"});
  glob.path = "a";
  glob.glob = "deep/*.c";  // relative to `path` works as well as to the root
  CHECK(paths(list(root, glob)) == Strings{"a/deep/two.c"});
}

TEST_CASE("list: paging is stable and says where to continue") {
  Tree t;
  for (int i = 0; i < 25; ++i) t.write("f" + std::string(i < 10 ? "0" : "") + std::to_string(i), "");
  auto root = t.root();
  ListRequest req;
  req.limit = 10;
  auto p1 = list(root, req);
  CHECK(p1.entries.size() == 10);
  CHECK(p1.total == 25);
  CHECK(p1.truncated);
  REQUIRE(p1.next_offset);
  CHECK(*p1.next_offset == 10);
  CHECK(p1.entries.front().path == "f00");
  req.offset = 20;
  auto p3 = list(root, req);
  CHECK(paths(p3) == Strings{"f20", "f21", "f22", "f23", "f24"});
  CHECK_FALSE(p3.truncated);
  CHECK_FALSE(p3.next_offset);
  req.offset = 100;
  CHECK(list(root, req).entries.empty());
}

TEST_CASE("list: .gitignore, .ignore and .git/info/exclude hide entries unless include_ignored") {
  Tree t;
  t.write(".gitignore", "*.log\nbuild/\n/top-only\n");
  t.write(".ignore", "secret.txt\n");
  t.write(".git/info/exclude", "excluded\n");
  t.write(".git/HEAD", "ref: refs/heads/main\n");
  t.write("a.log", "");
  t.write("keep.c", "");
  t.write("secret.txt", "");
  t.write("excluded", "");
  t.write("top-only", "");
  t.write("build/out.o", "");
  t.write("sub/top-only", "");
  t.write("sub/.gitignore", "!important.log\n");
  t.write("sub/important.log", "");
  t.write("sub/other.log", "");
  auto root = t.root();

  ListRequest req;
  req.depth = 0;
  CHECK(paths(list(root, req)) ==
        Strings{".gitignore", ".ignore", "keep.c", "sub", "sub/.gitignore", "sub/important.log", "sub/top-only"});

  req.include_ignored = true;
  auto every = paths(list(root, req));
  CHECK(every == Strings{".gitignore", ".ignore", "a.log", "build", "build/out.o", "excluded", "keep.c", "secret.txt",
                         "sub", "sub/.gitignore", "sub/important.log", "sub/other.log", "sub/top-only", "top-only"});

  // Starting below the root still applies the root's rules to the subtree.
  ListRequest sub;
  sub.path = "sub";
  CHECK(paths(list(root, sub)) == Strings{"sub/.gitignore", "sub/important.log", "sub/top-only"});
  // Naming an ignored folder lists it (the caller asked), with its own contents filtered as usual.
  ListRequest build;
  build.path = "build";
  CHECK(paths(list(root, build)) == Strings{"build/out.o"});
}

TEST_CASE("list: symlinks are reported, never followed out of the root") {
  Tree outside;
  outside.write("secret/key", "x");
  Tree t;
  t.write("in.txt", "");
  fs::create_directory_symlink(outside.dir / "secret", t.dir / "out");
  fs::create_directory_symlink(t.dir / "sub", t.dir / "loop");
  t.mkdir("sub");
  auto root = t.root();
  ListRequest req;
  req.depth = 0;
  auto r = list(root, req);
  CHECK(paths(r) == Strings{"in.txt", "loop", "out", "sub"});
  for (const auto& e : r.entries) {
    if (e.path == "out" || e.path == "loop") CHECK(e.type == EntryType::symlink);
  }
  ListRequest escape;
  escape.path = "out";
  auto esc = list_files(root, escape);
  REQUIRE_FALSE(esc);
  CHECK(esc.error().code == Errc::path_escape);
}

TEST_CASE("list: bad paths and arguments are refused naming the problem") {
  Tree t;
  auto root = t.root();
  ListRequest missing;
  missing.path = "nope/there";
  auto m = list_files(root, missing);
  REQUIRE_FALSE(m);
  CHECK(m.error().code == Errc::not_found);
  CHECK(m.error().message.find("nope/there") != std::string::npos);

  ListRequest up;
  up.path = "../x";
  auto u = list_files(root, up);
  REQUIRE_FALSE(u);
  CHECK(u.error().code == Errc::path_escape);

  ListRequest neg;
  neg.depth = -1;
  CHECK(list_files(root, neg).error().code == Errc::invalid_argument);
}

TEST_CASE("walk: every entry once, in parallel, and ticks while slow visitors run") {
  Tree t;
  for (int d = 0; d < 8; ++d)
    for (int f = 0; f < 20; ++f) t.write("d" + std::to_string(d) + "/s/f" + std::to_string(f), "");
  auto root = t.root();
  std::atomic<int> files{0}, dirs{0}, ticks{0};
  WalkOptions opts;
  opts.threads = 3;
  opts.tick_interval = std::chrono::milliseconds(10);
  opts.on_tick = [&] { ++ticks; };
  auto r = walk(root, opts, {}, [&](const WalkEntry& e, unsigned worker) {
    CHECK(worker < 3);
    if (e.type == EntryType::dir) ++dirs;
    if (e.type == EntryType::file) ++files;
    if (e.path == "d3/s/f7") std::this_thread::sleep_for(std::chrono::milliseconds(60));
  });
  REQUIRE(r);
  CHECK(files == 160);
  CHECK(dirs == 16);
  CHECK(r->dirs == 17);
  CHECK(ticks >= 1);

  std::stop_source stopped;
  stopped.request_stop();
  auto c = walk(root, opts, stopped.get_token(), [](const WalkEntry&, unsigned) {});
  REQUIRE_FALSE(c);
  CHECK(c.error().code == Errc::cancelled);
}

TEST_CASE("walk: many walks at once share the process's worker threads, each still complete") {
  Tree t;
  for (int d = 0; d < 6; ++d)
    for (int f = 0; f < 10; ++f) t.write("d" + std::to_string(d) + "/f" + std::to_string(f), "");
  auto root = t.root();
  const unsigned slots = std::max(2u, std::thread::hardware_concurrency());
  // Threads that visit entries and are none of the callers: the walks' own workers.
  std::mutex mu;
  std::set<std::thread::id> callers, busy;
  std::size_t most_busy = 0;
  std::atomic<int> complete{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 24; ++i)
    threads.emplace_back([&] {
      {
        std::lock_guard lk(mu);
        callers.insert(std::this_thread::get_id());
      }
      std::atomic<int> files{0};
      auto r = walk(root, WalkOptions{}, {}, [&](const WalkEntry& e, unsigned worker) {
        CHECK(worker < walk_thread_count(WalkOptions{}));
        if (e.type == EntryType::file) ++files;
        const auto me = std::this_thread::get_id();
        {
          std::lock_guard lk(mu);
          if (!callers.contains(me)) busy.insert(me);
          most_busy = std::max(most_busy, busy.size());
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::lock_guard lk(mu);
        busy.erase(me);
      });
      if (r && files == 60) ++complete;
    });
  for (auto& th : threads) th.join();
  CHECK(complete == 24);
  // 24 walks of 2+ workers each would be 48 threads or more without the shared slots.
  CHECK(most_busy <= slots);
}

TEST_CASE("search: regex, literal, case, columns") {
  Tree t;
  t.write("src/a.c", "int main() {\n  return foo(1);\n}\n");
  t.write("src/b.c", "// FOO bar\nfoo.bar(x)\nfooXbar\n");
  t.write("README", "no match here\n");
  auto root = t.root();

  SearchRequest re;
  re.pattern = R"(foo\(\d\))";
  auto r = find(root, re);
  REQUIRE(r.matches.size() == 1);
  CHECK(r.matches[0].path == "src/a.c");
  CHECK(r.matches[0].line == 2);
  CHECK(r.matches[0].column == 10);
  CHECK(r.matches[0].text == "  return foo(1);");
  CHECK(r.files_scanned == 3);
  CHECK(r.files_matched == 1);
  CHECK_FALSE(r.truncated);

  SearchRequest dot;
  dot.pattern = "foo.bar";
  CHECK(where(find(root, dot)) == Strings{"src/b.c:2", "src/b.c:3"});
  dot.literal = true;
  CHECK(where(find(root, dot)) == Strings{"src/b.c:2"});

  SearchRequest caseless;
  caseless.pattern = "foo bar";
  CHECK(find(root, caseless).matches.empty());
  caseless.case_sensitive = false;
  CHECK(where(find(root, caseless)) == Strings{"src/b.c:1"});
  CHECK(find(root, caseless).matches[0].column == 4);

  SearchRequest anchors;  // ^ and $ work per line
  anchors.pattern = "^}$";
  CHECK(where(find(root, anchors)) == Strings{"src/a.c:3"});

  SearchRequest across;  // a match may not run over a newline
  across.pattern = R"(\{\s+return)";
  CHECK(find(root, across).matches.empty());
  across.pattern = R"(\s+return)";
  CHECK(where(find(root, across)) == Strings{"src/a.c:2"});
  CHECK(find(root, across).matches[0].column == 1);

  SearchRequest unicode;
  t.write("u.txt", "Grüße aus Köln\n");
  unicode.pattern = "AUS KÖLN";
  unicode.case_sensitive = false;  // Unicode case folding: Ö matches ö
  auto u = find(root, unicode);
  REQUIRE(u.matches.size() == 1);
  CHECK(u.matches[0].column == 9);  // columns count bytes: "Grüße " is 8 bytes
}

TEST_CASE("search: context lines, at file edges too") {
  Tree t;
  t.write("f.txt", "l1\nl2\nHIT3\nl4\nl5\nl6\nl7\nHIT8");
  auto root = t.root();
  SearchRequest req;
  req.pattern = "HIT";
  req.context_lines = 2;
  auto r = find(root, req);
  REQUIRE(r.matches.size() == 2);
  CHECK(r.matches[0].before == Strings{"l1", "l2"});
  CHECK(r.matches[0].after == Strings{"l4", "l5"});
  CHECK(r.matches[1].line == 8);
  CHECK(r.matches[1].before == Strings{"l6", "l7"});
  CHECK(r.matches[1].after.empty());
  req.context_lines = 3;
  CHECK(find(root, req).matches[0].before == Strings{"l1", "l2"});
}

TEST_CASE("search: big files read in small chunks give the same answer") {
  Tree t;
  std::string body;
  for (int i = 1; i <= 3000; ++i) {
    body += (i % 97 == 0 ? "needle " : "hay ") + std::to_string(i) + (i % 5 == 0 ? "\r\n" : "\n");
    if (i == 1500) body += std::string(700, 'z') + " needle at the end of a long line\n";
  }
  t.write("big.txt", body);
  auto root = t.root();
  SearchRequest req;
  req.pattern = "needle";
  req.context_lines = 3;
  auto whole = find(root, req);
  REQUIRE(whole.matches.size() == 31);
  CHECK(whole.matches[0].line == 97);
  CHECK(whole.matches[0].text == "needle 97");
  CHECK(whole.matches[0].before == Strings{"hay 94", "hay 95", "hay 96"});
  for (size_t chunk : {16, 64, 1000, 4096}) {
    CAPTURE(chunk);
    req.read_chunk = chunk;
    auto pieces = find(root, req);
    REQUIRE(pieces.matches.size() == whole.matches.size());
    for (size_t i = 0; i < pieces.matches.size(); ++i) {
      CHECK(pieces.matches[i].line == whole.matches[i].line);
      CHECK(pieces.matches[i].column == whole.matches[i].column);
      CHECK(pieces.matches[i].text == whole.matches[i].text);
      CHECK(pieces.matches[i].before == whole.matches[i].before);
      CHECK(pieces.matches[i].after == whole.matches[i].after);
    }
  }
  // The long line is clipped around its match, with ellipses where it was cut.
  const SearchMatch* long_line = nullptr;
  for (const auto& m : whole.matches)
    if (m.column > 1) long_line = &m;
  REQUIRE(long_line);
  CHECK(long_line->line == 1501);
  CHECK(long_line->column == 702);
  CHECK(long_line->text.size() <= kMaxLineBytes + 6);
  CHECK(long_line->text.starts_with("\xE2\x80\xA6"));
  CHECK(long_line->text.find("needle at the end") != std::string::npos);
}

TEST_CASE("search: max_results cuts deterministically and counts what it saw") {
  Tree t;
  for (int f = 0; f < 30; ++f) {
    std::string body;
    for (int l = 0; l < 10; ++l) body += "match " + std::to_string(l) + "\n";
    t.write("d" + std::to_string(f % 3) + "/f" + std::to_string(f), body);
  }
  auto root = t.root();
  SearchRequest req;
  req.pattern = "match";
  req.max_results = 25;
  auto a = find(root, req);
  CHECK(a.matches.size() == 25);
  CHECK(a.truncated);
  CHECK(a.total_matches_seen == 300);
  CHECK(a.files_matched == 30);
  for (int i = 0; i < 5; ++i) CHECK(where(find(root, req)) == where(a));
  CHECK(a.matches.front().path == "d0/f0");
  CHECK(a.matches[10].path == "d0/f12");  // tree order: f0, f12 (after f0's ten lines)
  req.max_results = 300;
  auto all = find(root, req);
  CHECK_FALSE(all.truncated);
  CHECK(all.matches.size() == 300);
  for (size_t i = 0; i < 25; ++i) CHECK(all.matches[i].path + std::to_string(all.matches[i].line) ==
                                        a.matches[i].path + std::to_string(a.matches[i].line));
}

TEST_CASE("search: binary files, ignored files, globs and single files") {
  Tree t;
  t.write(".gitignore", "gen/\n");
  t.write("bin.dat", std::string("needle\0\x01\x02", 9));
  t.write("gen/out.c", "needle\n");
  t.write("src/x.c", "needle\n");
  t.write("src/x.h", "needle\n");
  t.write("bad.txt", "needle \xff\xfe here\n");
  auto root = t.root();
  SearchRequest req;
  req.pattern = "needle";
  auto r = find(root, req);
  CHECK(where(r) == Strings{"bad.txt:1", "src/x.c:1", "src/x.h:1"});
  CHECK(r.binary_files_skipped == 1);
  CHECK(valid_utf8(r.matches[0].text));
  CHECK(r.matches[0].text == "needle \xEF\xBF\xBD\xEF\xBF\xBD here");

  req.include_ignored = true;
  CHECK(where(find(root, req)) == Strings{"bad.txt:1", "gen/out.c:1", "src/x.c:1", "src/x.h:1"});
  req.include_ignored = false;
  req.glob = "*.c";
  CHECK(where(find(root, req)) == Strings{"src/x.c:1"});
  req.glob = "src/*.{h,c}";
  CHECK(where(find(root, req)) == Strings{"src/x.c:1", "src/x.h:1"});
  req.glob.clear();
  req.path = "gen/out.c";
  CHECK(where(find(root, req)) == Strings{"gen/out.c:1"});
  req.path = "src";
  CHECK(where(find(root, req)) == Strings{"src/x.c:1", "src/x.h:1"});
}

TEST_CASE("search: refusals and cancellation") {
  Tree t;
  t.write("a.txt", "text\n");
  auto root = t.root();
  SearchRequest bad;
  bad.pattern = "foo(bar";
  auto r = search(root, bad, {});
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Errc::invalid_argument);
  CHECK(r.error().message.find("offset 7") != std::string::npos);
  CHECK(r.error().message.find("literal: true") != std::string::npos);
  bad.literal = true;
  CHECK(search(root, bad, {}));

  SearchRequest missing;
  missing.pattern = "x";
  missing.path = "no/such";
  auto m = search(root, missing, {});
  REQUIRE_FALSE(m);
  CHECK(m.error().code == Errc::not_found);

  SearchRequest escape;
  escape.pattern = "x";
  escape.path = "/etc";
  CHECK(search(root, escape, {}).error().code == Errc::path_escape);

  std::stop_source stop;
  stop.request_stop();
  SearchRequest req;
  req.pattern = "text";
  auto c = search(root, req, stop.get_token());
  REQUIRE_FALSE(c);
  CHECK(c.error().code == Errc::cancelled);
}

TEST_CASE("search text helpers: UTF-8 repair and clipping") {
  CHECK(valid_utf8("plain ascii"));
  CHECK(valid_utf8("K\xC3\xB6ln"));
  CHECK_FALSE(valid_utf8("\xC0\xAF"));          // overlong '/'
  CHECK_FALSE(valid_utf8("\xED\xA0\x80"));      // surrogate
  CHECK_FALSE(valid_utf8("\xF4\x90\x80\x80"));  // past U+10FFFF
  CHECK(sanitize_utf8("a\xFF" "b") == "a\xEF\xBF\xBD" "b");
  std::string line = std::string(300, 'a') + "\xC3\xB6" + std::string(300, 'b');
  std::string clipped = clip_line(line, 300, 100);
  CHECK(valid_utf8(clipped));
  CHECK(clipped.find("\xC3\xB6") != std::string::npos);
  CHECK(clipped.size() <= 106);
  CHECK(clip_line("short", 0, 100) == "short");
}
