// The file operations on real temp folders: paging, encodings, atomic and guarded writes, edit
// matching rules and diffs, moves, and deletes that never follow a link out of the workspace.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <atomic>
#include <string>
#include <thread>

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "workspace/file_ops.h"
#include "workspace/root.h"
#include "workspace/unified_diff.h"

namespace fs = std::filesystem;
using kiln::Errc;
using namespace kiln::workspace;

namespace {

struct Scratch {
  fs::path base, ws, out;
  std::optional<Root> root;
  Scratch() {
    std::string tmpl = "/tmp/kiln-fileops-test-XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    base = tmpl;
    ws = base / "ws";
    out = base / "out";
    fs::create_directories(ws);
    fs::create_directories(out);
    put(out / "secret.txt", "secret");
    auto r = Root::open(ws.string());
    REQUIRE(r);
    root.emplace(std::move(*r));
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(base, ec);
  }
  static void put(const fs::path& p, const std::string& s) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << s;
  }
  static std::string get(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // Names in a folder that look like our temp files: none may survive a write.
  static int temp_files(const fs::path& dir) {
    int n = 0;
    for (auto& e : fs::directory_iterator(dir))
      if (e.path().filename().string().starts_with(".kiln-write-")) ++n;
    return n;
  }
};

std::string numbered(int n) {
  std::string s;
  for (int i = 1; i <= n; ++i) s += "line " + std::to_string(i) + "\n";
  return s;
}

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

}  // namespace

TEST_CASE("sha256_hex matches known digests") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("read_file pages by lines and reports the whole file") {
  Scratch s;
  std::string body = numbered(10);
  Scratch::put(s.ws / "a.txt", body);
  auto r = read_file(*s.root, {.path = "./a.txt", .offset = 2, .limit = 3});
  REQUIRE(r);
  CHECK(r->path == "a.txt");
  CHECK(r->content == "line 3\nline 4\nline 5\n");
  CHECK(r->total_lines == 10);
  CHECK(r->truncated);
  CHECK(r->next_offset == 5);
  CHECK(r->count == 3);
  CHECK(r->size == body.size());
  CHECK(r->sha256 == sha256_hex(body));

  auto last = read_file(*s.root, {.path = "a.txt", .offset = 8, .limit = 5});
  REQUIRE(last);
  CHECK(last->content == "line 9\nline 10\n");
  CHECK_FALSE(last->truncated);
  CHECK_FALSE(last->next_offset.has_value());

  auto all = read_file(*s.root, {.path = "a.txt"});
  REQUIRE(all);
  CHECK(all->content == body);
  CHECK_FALSE(all->truncated);

  auto past = read_file(*s.root, {.path = "a.txt", .offset = 11});
  REQUIRE_FALSE(past);
  CHECK(past.error().code == Errc::invalid_argument);

  Scratch::put(s.ws / "nonl.txt", "x\ny");
  auto nonl = read_file(*s.root, {.path = "nonl.txt"});
  REQUIRE(nonl);
  CHECK(nonl->total_lines == 2);
  Scratch::put(s.ws / "empty.txt", "");
  auto empty = read_file(*s.root, {.path = "empty.txt"});
  REQUIRE(empty);
  CHECK(empty->total_lines == 0);
  CHECK(empty->content.empty());
  CHECK_FALSE(empty->truncated);
}

TEST_CASE("read_file caps a page at 256 KiB across read chunks") {
  Scratch s;
  std::string line(1000, 'x');
  line += '\n';
  std::string body;
  for (int i = 0; i < 600; ++i) body += line;  // ~600 KB, spans many 64 KiB chunks
  Scratch::put(s.ws / "big.txt", body);
  auto r = read_file(*s.root, {.path = "big.txt"});
  REQUIRE(r);
  CHECK(r->truncated);
  CHECK(r->content.size() <= kMaxPageBytes);
  CHECK(r->next_offset == kMaxPageBytes / line.size());
  CHECK(r->content.size() == *r->next_offset * line.size());
  CHECK(r->total_lines == 600);

  std::string huge(300 * 1024, 'y');
  Scratch::put(s.ws / "oneline.txt", "a\n" + huge + "\nb\n");
  auto cut = read_file(*s.root, {.path = "oneline.txt", .offset = 1});
  REQUIRE(cut);
  CHECK(cut->content.size() == kMaxPageBytes);
  CHECK(cut->next_offset == 2);
  CHECK_FALSE(cut->note.empty());
}

TEST_CASE("read_file refuses binary in text mode and pages bytes in base64") {
  Scratch s;
  std::string bin("ab\0cd\nef", 8);
  Scratch::put(s.ws / "b.bin", bin);
  auto r = read_file(*s.root, {.path = "b.bin"});
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Errc::invalid_argument);
  CHECK(contains(r.error().message, "base64"));

  Scratch::put(s.ws / "latin1.txt", "caf\xe9\n");
  CHECK_FALSE(read_file(*s.root, {.path = "latin1.txt"}));
  Scratch::put(s.ws / "utf8.txt", "caf\xc3\xa9 \xf0\x9f\x94\xa5\n");
  CHECK(read_file(*s.root, {.path = "utf8.txt"}));

  auto b = read_file(*s.root, {.path = "b.bin", .offset = 1, .limit = 3, .encoding = Encoding::base64});
  REQUIRE(b);
  CHECK(b->content == "YgBj");  // "b\0c"
  CHECK(b->next_offset == 4);
  CHECK(b->size == 8);
  CHECK(b->total_lines == 2);
  auto rest = read_file(*s.root, {.path = "b.bin", .offset = 4, .encoding = Encoding::base64});
  REQUIRE(rest);
  CHECK(rest->content == "ZAplZg==");
  CHECK_FALSE(rest->next_offset);
}

TEST_CASE("read_file refuses folders, missing files and escapes") {
  Scratch s;
  fs::create_directories(s.ws / "dir");
  fs::create_symlink("../out/secret.txt", s.ws / "leak");
  auto d = read_file(*s.root, {.path = "dir"});
  REQUIRE_FALSE(d);
  CHECK(contains(d.error().message, "file_list"));
  CHECK(read_file(*s.root, {.path = "nope"}).error().code == Errc::not_found);
  CHECK(read_file(*s.root, {.path = "leak"}).error().code == Errc::path_escape);
  CHECK(read_file(*s.root, {.path = "../out/secret.txt"}).error().code == Errc::path_escape);
  CHECK(read_file(*s.root, {.path = (s.out / "secret.txt").string()}).error().code == Errc::path_escape);
  ::mkfifo((s.ws / "fifo").c_str(), 0600);
  CHECK(read_file(*s.root, {.path = "fifo"}).error().code == Errc::invalid_argument);  // and does not hang
}

TEST_CASE("write_file is atomic, guarded by if_sha256, and needs create_dirs for new folders") {
  Scratch s;
  auto w = write_file(*s.root, {.path = "a.txt", .content = "one\n"});
  REQUIRE(w);
  CHECK(w->created);
  CHECK(w->size == 4);
  CHECK(w->sha256 == sha256_hex("one\n"));
  CHECK(Scratch::get(s.ws / "a.txt") == "one\n");
  CHECK((fs::status(s.ws / "a.txt").permissions() & fs::perms::all) == fs::perms(0644));

  ::chmod((s.ws / "a.txt").c_str(), 0600);
  auto stale = write_file(*s.root, {.path = "a.txt", .content = "two\n", .if_sha256 = sha256_hex("other")});
  REQUIRE_FALSE(stale);
  CHECK(stale.error().code == Errc::conflict);
  CHECK(contains(stale.error().message, sha256_hex("one\n")));
  CHECK(Scratch::get(s.ws / "a.txt") == "one\n");

  std::string upper = sha256_hex("one\n");
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  auto ok = write_file(*s.root, {.path = "a.txt", .content = "two\n", .if_sha256 = upper});
  REQUIRE(ok);
  CHECK_FALSE(ok->created);
  CHECK(Scratch::get(s.ws / "a.txt") == "two\n");
  CHECK((fs::status(s.ws / "a.txt").permissions() & fs::perms::all) == fs::perms(0600));  // mode kept

  auto gone = write_file(*s.root, {.path = "missing.txt", .content = "x", .if_sha256 = sha256_hex("")});
  CHECK(gone.error().code == Errc::conflict);
  CHECK_FALSE(fs::exists(s.ws / "missing.txt"));

  auto nodir = write_file(*s.root, {.path = "d/e/f.txt", .content = "x"});
  REQUIRE_FALSE(nodir);
  CHECK(nodir.error().code == Errc::not_found);
  CHECK(contains(nodir.error().message, "create_dirs"));
  auto mk = write_file(*s.root, {.path = "d/e/f.txt", .content = "x", .create_dirs = true});
  REQUIRE(mk);
  CHECK(Scratch::get(s.ws / "d/e/f.txt") == "x");

  auto over_dir = write_file(*s.root, {.path = "d", .content = "x"});
  REQUIRE_FALSE(over_dir);
  CHECK(over_dir.error().code == Errc::invalid_argument);
  CHECK(fs::is_directory(s.ws / "d"));

  auto b64 = write_file(*s.root, {.path = "bin", .content = "AAEC/w==", .encoding = Encoding::base64});
  REQUIRE(b64);
  CHECK(Scratch::get(s.ws / "bin") == std::string("\x00\x01\x02\xff", 4));
  CHECK(write_file(*s.root, {.path = "bin", .content = "not base64!", .encoding = Encoding::base64})
            .error()
            .code == Errc::invalid_argument);
  CHECK(Scratch::temp_files(s.ws) == 0);
  CHECK(Scratch::temp_files(s.ws / "d/e") == 0);
}

TEST_CASE("write_file stays inside: links out refused, links inside write the target") {
  Scratch s;
  fs::create_symlink("../out/secret.txt", s.ws / "leak");
  fs::create_directory_symlink("../out", s.ws / "outdir");
  Scratch::put(s.ws / "real.txt", "old");
  fs::create_symlink("real.txt", s.ws / "alias");

  auto a = write_file(*s.root, {.path = "leak", .content = "pwned"});
  REQUIRE_FALSE(a);
  CHECK(a.error().code == Errc::path_escape);
  auto b = write_file(*s.root, {.path = "outdir/new.txt", .content = "pwned", .create_dirs = true});
  REQUIRE_FALSE(b);
  CHECK(b.error().code == Errc::path_escape);
  CHECK(write_file(*s.root, {.path = "outdir/secret.txt", .content = "pwned"}).error().code == Errc::path_escape);
  CHECK(write_file(*s.root, {.path = "../out/secret.txt", .content = "pwned"}).error().code == Errc::path_escape);
  CHECK(Scratch::get(s.out / "secret.txt") == "secret");
  CHECK_FALSE(fs::exists(s.out / "new.txt"));

  auto c = write_file(*s.root, {.path = "alias", .content = "new"});
  REQUIRE(c);
  CHECK(fs::is_symlink(s.ws / "alias"));
  CHECK(Scratch::get(s.ws / "real.txt") == "new");
}

TEST_CASE("edit_file replaces exactly once, or reports where") {
  Scratch s;
  std::string body = "alpha\nbeta\ngamma\nbeta\ndelta\n";
  Scratch::put(s.ws / "e.txt", body);

  auto once = edit_file(*s.root, {.path = "e.txt", .edits = {{"gamma", "GAMMA"}}});
  REQUIRE(once);
  CHECK(once->replacements == 1);
  CHECK(once->applied);
  CHECK(Scratch::get(s.ws / "e.txt") == "alpha\nbeta\nGAMMA\nbeta\ndelta\n");
  CHECK(once->sha256 == sha256_hex("alpha\nbeta\nGAMMA\nbeta\ndelta\n"));
  CHECK(once->diff == "--- a/e.txt\n+++ b/e.txt\n@@ -1,5 +1,5 @@\n alpha\n beta\n-gamma\n+GAMMA\n beta\n delta\n");

  auto many = edit_file(*s.root, {.path = "e.txt", .edits = {{"beta", "B"}}});
  REQUIRE_FALSE(many);
  CHECK(many.error().code == Errc::conflict);
  CHECK(contains(many.error().message, "lines 2, 4"));
  CHECK(contains(many.error().message, "replace_all"));

  auto zero = edit_file(*s.root, {.path = "e.txt", .edits = {{"  delta", "D"}}});
  REQUIRE_FALSE(zero);
  CHECK(zero.error().code == Errc::not_found);
  CHECK(contains(zero.error().message, "line 5"));

  auto none = edit_file(*s.root, {.path = "e.txt", .edits = {{"omega", "O"}}});
  REQUIRE_FALSE(none);
  CHECK(contains(none.error().message, "whitespace"));

  CHECK(edit_file(*s.root, {.path = "e.txt", .edits = {{"", "x"}}}).error().code == Errc::invalid_argument);
  CHECK(edit_file(*s.root, {.path = "nope.txt", .edits = {{"a", "b"}}}).error().code == Errc::not_found);

  auto all = edit_file(*s.root, {.path = "e.txt", .edits = {{"beta", "B", true}}});
  REQUIRE(all);
  CHECK(all->replacements == 2);
  CHECK(Scratch::get(s.ws / "e.txt") == "alpha\nB\nGAMMA\nB\ndelta\n");
}

TEST_CASE("edit_file is all-or-nothing, honours dry_run and if_sha256") {
  Scratch s;
  std::string body = "one\ntwo\nthree\n";
  Scratch::put(s.ws / "f.txt", body);
  auto bad = edit_file(*s.root, {.path = "f.txt", .edits = {{"one", "1"}, {"missing", "x"}}});
  REQUIRE_FALSE(bad);
  CHECK(contains(bad.error().message, "edit 2 of 2"));
  CHECK(Scratch::get(s.ws / "f.txt") == body);

  // Later edits see earlier ones.
  auto chain = edit_file(*s.root, {.path = "f.txt", .edits = {{"one", "uno"}, {"uno\ntwo", "uno\ndos"}}, .dry_run = true});
  REQUIRE(chain);
  CHECK_FALSE(chain->applied);
  CHECK(chain->replacements == 2);
  CHECK(chain->sha256 == sha256_hex("uno\ndos\nthree\n"));
  CHECK(Scratch::get(s.ws / "f.txt") == body);
  CHECK(contains(chain->diff, "-one\n-two\n+uno\n+dos\n"));

  auto stale = edit_file(*s.root, {.path = "f.txt", .edits = {{"one", "1"}}, .if_sha256 = sha256_hex("x")});
  REQUIRE_FALSE(stale);
  CHECK(stale.error().code == Errc::conflict);
  auto fresh = edit_file(*s.root, {.path = "f.txt", .edits = {{"one", "1"}}, .if_sha256 = sha256_hex(body)});
  REQUIRE(fresh);
  CHECK(Scratch::get(s.ws / "f.txt") == "1\ntwo\nthree\n");
  CHECK(Scratch::temp_files(s.ws) == 0);
}

TEST_CASE("edit_file tolerates CRLF/LF and keeps the file's endings") {
  Scratch s;
  Scratch::put(s.ws / "crlf.txt", "a\r\nb\r\nc\r\n");
  auto r = edit_file(*s.root, {.path = "crlf.txt", .edits = {{"a\nb\n", "x\ny\nz\n"}}});
  REQUIRE(r);
  CHECK(Scratch::get(s.ws / "crlf.txt") == "x\r\ny\r\nz\r\nc\r\n");

  Scratch::put(s.ws / "lf.txt", "a\nb\nc\n");
  auto l = edit_file(*s.root, {.path = "lf.txt", .edits = {{"b\r\nc", "B\r\nC"}}});
  REQUIRE(l);
  CHECK(Scratch::get(s.ws / "lf.txt") == "a\nB\nC\n");
}

TEST_CASE("edit_file refuses to edit through a link that leaves the workspace") {
  Scratch s;
  fs::create_symlink("../out/secret.txt", s.ws / "leak");
  auto r = edit_file(*s.root, {.path = "leak", .edits = {{"secret", "pwned"}}});
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Errc::path_escape);
  CHECK(Scratch::get(s.out / "secret.txt") == "secret");
}

TEST_CASE("unified_diff hunks, context and missing final newline") {
  CHECK(unified_diff("same\n", "same\n", "p") == "");
  CHECK(unified_diff("", "a\n", "new.txt") == "--- a/new.txt\n+++ b/new.txt\n@@ -0,0 +1 @@\n+a\n");
  CHECK(unified_diff("a\nb", "a\nc", "x") ==
        "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n");
  // Two changes far apart make two hunks; close ones merge into one.
  std::string before = numbered(20);
  std::string after = before;
  after.replace(after.find("line 2\n"), 7, "LINE 2\n");
  after.replace(after.find("line 19\n"), 8, "LINE 19\n");
  std::string d = unified_diff(before, after, "n.txt");
  CHECK(contains(d, "@@ -1,5 +1,5 @@\n line 1\n-line 2\n+LINE 2\n line 3\n line 4\n line 5\n"));
  CHECK(contains(d, "@@ -16,5 +16,5 @@\n line 16\n line 17\n line 18\n-line 19\n+LINE 19\n line 20\n"));
  std::string near = before;
  near.replace(near.find("line 5\n"), 7, "");
  near.replace(near.find("line 11\n"), 8, "");
  std::string d2 = unified_diff(before, near, "n.txt");
  CHECK(contains(d2, "@@ -2,13 +2,11 @@\n"));
}

TEST_CASE("move_path renames beneath the root, with overwrite and parents") {
  Scratch s;
  Scratch::put(s.ws / "a.txt", "A");
  Scratch::put(s.ws / "b.txt", "B");
  auto m = move_path(*s.root, {.from = "a.txt", .to = "sub/dir/a2.txt"});
  REQUIRE(m);
  CHECK(m->from == "a.txt");
  CHECK(m->to == "sub/dir/a2.txt");
  CHECK(Scratch::get(s.ws / "sub/dir/a2.txt") == "A");
  CHECK_FALSE(fs::exists(s.ws / "a.txt"));

  auto clash = move_path(*s.root, {.from = "sub/dir/a2.txt", .to = "b.txt"});
  REQUIRE_FALSE(clash);
  CHECK(clash.error().code == Errc::conflict);
  CHECK(contains(clash.error().message, "overwrite: true"));
  CHECK(Scratch::get(s.ws / "b.txt") == "B");
  REQUIRE(move_path(*s.root, {.from = "sub/dir/a2.txt", .to = "b.txt", .overwrite = true}));
  CHECK(Scratch::get(s.ws / "b.txt") == "A");

  CHECK(move_path(*s.root, {.from = "nope", .to = "x"}).error().code == Errc::not_found);
  CHECK(move_path(*s.root, {.from = ".", .to = "x"}).error().code == Errc::invalid_argument);
  CHECK(move_path(*s.root, {.from = "sub", .to = "sub/dir/inner"}).error().code == Errc::invalid_argument);
}

TEST_CASE("move_path refuses to move in or out through links that leave") {
  Scratch s;
  Scratch::put(s.ws / "f.txt", "F");
  fs::create_directory_symlink("../out", s.ws / "outdir");
  auto out = move_path(*s.root, {.from = "f.txt", .to = "outdir/f.txt"});
  REQUIRE_FALSE(out);
  CHECK(out.error().code == Errc::path_escape);
  CHECK_FALSE(fs::exists(s.out / "f.txt"));
  auto in = move_path(*s.root, {.from = "outdir/secret.txt", .to = "stolen.txt"});
  REQUIRE_FALSE(in);
  CHECK(in.error().code == Errc::path_escape);
  CHECK(fs::exists(s.out / "secret.txt"));
  // Moving the link itself is fine: it is an entry of the workspace, and its target is untouched.
  REQUIRE(move_path(*s.root, {.from = "outdir", .to = "renamed_link"}));
  CHECK(fs::is_symlink(s.ws / "renamed_link"));
  CHECK(fs::exists(s.out / "secret.txt"));
}

TEST_CASE("delete_path removes files, needs recursive for folders, never follows links") {
  Scratch s;
  Scratch::put(s.ws / "f.txt", "F");
  Scratch::put(s.ws / "tree/a/1.txt", "1");
  Scratch::put(s.ws / "tree/a/2.txt", "2");
  Scratch::put(s.ws / "tree/b.txt", "b");
  fs::create_directory_symlink(s.out, s.ws / "tree/a/outlink");
  fs::create_symlink(s.out / "secret.txt", s.ws / "tree/secretlink");
  fs::create_directory_symlink("../out", s.ws / "outdir");

  auto f = delete_path(*s.root, {.path = "f.txt"});
  REQUIRE(f);
  CHECK(f->deleted == 1);
  CHECK_FALSE(fs::exists(s.ws / "f.txt"));

  auto nr = delete_path(*s.root, {.path = "tree"});
  REQUIRE_FALSE(nr);
  CHECK(nr.error().code == Errc::conflict);
  CHECK(contains(nr.error().message, "recursive: true"));
  CHECK(fs::exists(s.ws / "tree/b.txt"));

  auto r = delete_path(*s.root, {.path = "tree", .recursive = true});
  REQUIRE(r);
  CHECK(r->deleted == 7);  // tree, a, 1.txt, 2.txt, outlink, b.txt, secretlink
  CHECK_FALSE(fs::exists(s.ws / "tree"));
  CHECK(Scratch::get(s.out / "secret.txt") == "secret");

  auto through = delete_path(*s.root, {.path = "outdir/secret.txt"});
  REQUIRE_FALSE(through);
  CHECK(through.error().code == Errc::path_escape);
  CHECK(fs::exists(s.out / "secret.txt"));
  auto link = delete_path(*s.root, {.path = "outdir", .recursive = true});
  REQUIRE(link);
  CHECK(link->deleted == 1);
  CHECK_FALSE(fs::exists(fs::symlink_status(s.ws / "outdir")));
  CHECK(fs::exists(s.out / "secret.txt"));

  CHECK(delete_path(*s.root, {.path = "."}).error().code == Errc::invalid_argument);
  CHECK(delete_path(*s.root, {.path = s.root->path()}).error().code == Errc::invalid_argument);
  CHECK(delete_path(*s.root, {.path = "gone"}).error().code == Errc::not_found);
  CHECK(delete_path(*s.root, {.path = "../out"}).error().code == Errc::path_escape);
  CHECK(fs::is_directory(s.ws));
}

TEST_CASE("a folder swapped for a link to outside mid-operation never redirects writes or deletes") {
  // One thread atomically exchanges ws/d (a real folder) with ws/d.alt (a symlink to the outside
  // folder) while this one writes, edits, moves and deletes under d/. Whatever the interleaving,
  // nothing outside may change. Run through openat2 and through the fallback walk.
  struct ResetWalk {
    ~ResetWalk() { Root::force_component_walk(false); }
  } reset;
  for (bool walk : {false, true}) {
    CAPTURE(walk);
    Root::force_component_walk(walk);
    Scratch s;
    fs::create_directories(s.out / "keep");
    Scratch::put(s.out / "keep" / "victim.txt", "precious");
    fs::create_directories(s.ws / "d" / "keep");
    fs::create_directory_symlink(s.out, s.ws / "d.alt");
    std::atomic<bool> stop{false};
    std::atomic<long> swaps{0};
    std::thread flipper([&] {
      while (!stop.load()) {
        if (::renameat2(AT_FDCWD, (s.ws / "d").c_str(), AT_FDCWD, (s.ws / "d.alt").c_str(), RENAME_EXCHANGE) == 0)
          ++swaps;
      }
    });
    int landed = 0, refused = 0;
    for (int i = 0; i < 1500; ++i) {
      auto w = write_file(*s.root, {.path = "d/keep/victim.txt", .content = "pwned", .create_dirs = true});
      if (w) ++landed;
      else if (w.error().code == Errc::path_escape) ++refused;
      (void)edit_file(*s.root, {.path = "d/keep/victim.txt", .edits = {{"precious", "pwned"}}});
      (void)move_path(*s.root, {.from = "d/keep/victim.txt", .to = "moved.txt", .overwrite = true});
      (void)delete_path(*s.root, {.path = "d/keep", .recursive = true});
    }
    stop.store(true);
    flipper.join();
    INFO("swaps " << swaps.load() << ", writes landed inside " << landed << ", refused as escapes " << refused);
    CHECK(Scratch::get(s.out / "keep" / "victim.txt") == "precious");
    CHECK(Scratch::get(s.out / "secret.txt") == "secret");
  }
}
