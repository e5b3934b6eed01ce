// Checkpoints on real temp folders: the tree encoding, the stat cache (a change inside the same
// mtime tick is still seen), restore (bytes, modes, links as links, nothing followed out), undo,
// dry runs, ignore rules, FIFOs, and reference counting down to the blobs on disk.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "workspace/checkpoint_store.h"
#include "workspace/checkpoint_tree.h"
#include "workspace/root.h"

namespace fs = std::filesystem;
using namespace kiln::workspace;

namespace {

struct Scratch {
  fs::path base, ws, state, outside;
  std::optional<Root> root;
  std::unique_ptr<CheckpointStore> store;
  Scratch() {
    std::string tmpl = "/tmp/kiln-checkpoint-test-XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    base = tmpl;
    ws = base / "ws";
    state = base / "state";
    outside = base / "outside";
    fs::create_directories(ws);
    fs::create_directories(state);
    fs::create_directories(outside);
    auto r = Root::open(ws.string());
    REQUIRE(r);
    root.emplace(std::move(*r));
    auto s = CheckpointStore::open(state.string());
    REQUIRE(s);
    store = std::move(*s);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(base, ec);
  }
  void put(const std::string& rel, const std::string& s) {
    fs::path p = ws / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary | std::ios::trunc) << s;
  }
  std::string get(const std::string& rel) {
    std::ifstream in(ws / rel, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  CheckpointInfo checkpoint(const std::string& trigger = "manual", bool reuse = false) {
    CheckpointRequest q;
    q.root = &*root;
    q.workspace_id = "ws_test";
    q.principal = "me";
    q.trigger = trigger;
    q.reuse_latest = reuse;
    auto c = store->create(q);
    REQUIRE_MESSAGE(c, (c ? "" : c.error().message));
    return *c;
  }
  RestoreResult restore(const std::string& id, std::vector<std::string> paths = {}, bool dry = false) {
    RestoreRequest q;
    q.root = &*root;
    q.workspace_id = "ws_test";
    q.principal = "me";
    q.checkpoint_id = id;
    q.paths = std::move(paths);
    q.dry_run = dry;
    auto r = store->restore(q);
    REQUIRE_MESSAGE(r, (r ? "" : r.error().message));
    return *r;
  }
  std::size_t blobs_on_disk() {
    std::size_t n = 0;
    for (auto& e : fs::recursive_directory_iterator(state / "blobs" / "sha256"))
      if (e.is_regular_file()) ++n;
    return n;
  }
};

}  // namespace

TEST_CASE("tree objects round-trip any name, and equal folders share one object") {
  std::vector<TreeChild> kids = {{"a b\nc", EntryType::file, 0644, 3, std::string(64, 'a')},
                                 {"dir", EntryType::dir, 0755, 0, std::string(64, 'b')},
                                 {"l", EntryType::symlink, 0777, 5, std::string(64, 'c')}};
  auto enc = encode_tree(kids);
  auto back = decode_tree(enc);
  REQUIRE(back);
  REQUIRE(back->size() == 3);
  CHECK((*back)[0].name == "a b\nc");
  CHECK((*back)[1].type == EntryType::dir);
  CHECK((*back)[2].mode == 0777);
  CHECK_FALSE(decode_tree("f 644 3 xyz 1:a\n"));     // not a hash
  CHECK_FALSE(decode_tree(enc.substr(0, enc.size() - 2)));
  FlatTree flat = {{"x", EntryType::dir, 0755, 0, ""}, {"x/f", EntryType::file, 0644, 1, std::string(64, 'd')},
                   {"y", EntryType::dir, 0755, 0, ""}, {"y/f", EntryType::file, 0644, 1, std::string(64, 'd')}};
  std::map<std::string, std::string> objects;
  auto root = build_trees(flat, [&](const std::string& sha, const std::string& e, const auto&) { objects[sha] = e; });
  CHECK(flat[0].sha == flat[2].sha);  // x and y hold the same: one object
  CHECK(objects.size() == 2);
  auto again = flatten(root, [&](const std::string& sha) -> std::optional<std::string> {
    auto it = objects.find(sha);
    return it == objects.end() ? std::nullopt : std::optional(it->second);
  });
  REQUIRE(again);
  CHECK(again->size() == 4);
  CHECK((*again)[1].path == "x/f");
}

TEST_CASE("a run's changes: exactly the files added, modified and deleted") {
  Scratch s;
  s.put("keep.txt", "same");
  s.put("edit.txt", "one");
  s.put("gone/old.txt", "old");
  auto a = s.checkpoint("exec");
  s.put("edit.txt", "two");
  s.put("new/deep/file.txt", "new");
  fs::remove_all(s.ws / "gone");
  auto b = s.checkpoint("exec");
  auto ch = s.store->changes(a.id, b.id);
  REQUIRE(ch);
  CHECK(ch->added == 1);
  CHECK(ch->modified == 1);
  CHECK(ch->deleted == 1);
  std::set<std::string> paths;
  for (const auto& p : ch->paths) paths.insert(p["path"].get<std::string>() + " " + p["change"].get<std::string>());
  CHECK(paths == std::set<std::string>{"edit.txt modified", "gone/old.txt deleted", "new/deep/file.txt added"});
}

TEST_CASE("the stat cache: unchanged files are not read again, but a same-tick change with the same size is seen") {
  Scratch s;
  // Old mtimes, so the cache may vouch for these files (a file hashed in the tick it was written is
  // always read again) and only the ctime can tell what changed below.
  struct timespec old_times[2] = {{1600000000, 0}, {1600000000, 0}};
  for (int i = 0; i < 50; ++i) {
    s.put("f" + std::to_string(i), "content " + std::to_string(i));
    REQUIRE(::utimensat(AT_FDCWD, (s.ws / ("f" + std::to_string(i))).c_str(), old_times, 0) == 0);
  }
  auto first = s.checkpoint();
  CHECK(first.new_bytes > 0);
  // Rewrite a file with the same size, then put its mtime back: only ctime (and perhaps the
  // inode) tells. It must still be seen as changed.
  struct stat st {};
  REQUIRE(::stat((s.ws / "f7").c_str(), &st) == 0);
  s.put("f7", "CONTENT 7");
  struct timespec times[2] = {st.st_atim, st.st_mtim};
  REQUIRE(::utimensat(AT_FDCWD, (s.ws / "f7").c_str(), times, 0) == 0);
  auto second = s.checkpoint();
  auto ch = s.store->changes(first.id, second.id);
  REQUIRE(ch);
  CHECK(ch->modified == 1);
  REQUIRE(ch->paths.size() == 1);
  CHECK(ch->paths[0]["path"] == "f7");
  // Nothing changed: an automatic checkpoint is the latest one again, no new record.
  auto third = s.checkpoint("exec", true);
  CHECK(third.reused);
  CHECK(third.id == second.id);
}

TEST_CASE("restore brings every byte and mode back, removes what was added, keeps links as links") {
  Scratch s;
  s.put("a.txt", "alpha");
  s.put("bin/run.sh", "#!/bin/sh\necho hi\n");
  fs::permissions(s.ws / "bin/run.sh", fs::perms(0755));
  fs::create_symlink("a.txt", s.ws / "link");
  std::string big(3 << 20, 'x');
  big[12345] = '\0';
  s.put("big.bin", big);
  auto cp = s.checkpoint();

  s.put("a.txt", "changed");
  fs::permissions(s.ws / "bin/run.sh", fs::perms(0600));
  fs::remove(s.ws / "link");
  fs::create_symlink(s.outside / "target", s.ws / "link");  // now points out of the workspace
  fs::remove(s.ws / "big.bin");
  s.put("added/new.txt", "new");

  auto dry = s.restore(cp.id, {}, true);
  CHECK(dry.dry_run);
  CHECK(s.get("a.txt") == "changed");  // a dry run changes nothing
  CHECK(fs::exists(s.ws / "added/new.txt"));

  auto r = s.restore(cp.id);
  CHECK(s.get("a.txt") == "alpha");
  CHECK(s.get("big.bin") == big);
  CHECK((fs::status(s.ws / "bin/run.sh").permissions() & fs::perms::all) == fs::perms(0755));
  CHECK(fs::is_symlink(s.ws / "link"));
  CHECK(fs::read_symlink(s.ws / "link") == "a.txt");
  CHECK_FALSE(fs::exists(s.ws / "added/new.txt"));
  CHECK_FALSE(fs::exists(s.ws / "added"));
  CHECK_FALSE(fs::exists(s.outside / "target"));  // nothing was written through the link
  CHECK(std::find(r.deleted.begin(), r.deleted.end(), "added/new.txt") != r.deleted.end());
  REQUIRE_FALSE(r.checkpoint_before.empty());

  // Undo: restoring the state before puts the changes back.
  s.restore(r.checkpoint_before);
  CHECK(s.get("a.txt") == "changed");
  CHECK(fs::exists(s.ws / "added/new.txt"));
  CHECK(fs::read_symlink(s.ws / "link") == s.outside / "target");
}

TEST_CASE("restore of some paths leaves the rest alone; a link in the way is replaced, not followed") {
  Scratch s;
  s.put("src/a.txt", "a1");
  s.put("docs/b.txt", "b1");
  auto cp = s.checkpoint();
  s.put("src/a.txt", "a2");
  s.put("docs/b.txt", "b2");
  s.restore(cp.id, {"src"});
  CHECK(s.get("src/a.txt") == "a1");
  CHECK(s.get("docs/b.txt") == "b2");
  // The folder swapped for a link pointing out: restore replaces the link with the folder.
  fs::remove_all(s.ws / "src");
  fs::create_directories(s.outside / "src");
  fs::create_symlink(s.outside / "src", s.ws / "src");
  s.restore(cp.id, {"src/a.txt"});
  CHECK(fs::is_directory(fs::symlink_status(s.ws / "src")));
  CHECK(s.get("src/a.txt") == "a1");
  CHECK(fs::is_empty(s.outside / "src"));
}

TEST_CASE("ignored files are not captured and survive a restore; a FIFO is skipped with a note") {
  Scratch s;
  s.put(".gitignore", "build/\n");
  s.put("build/out.o", "object");
  s.put("main.c", "int main(){}");
  REQUIRE(::mkfifo((s.ws / "pipe").c_str(), 0600) == 0);
  auto cp = s.checkpoint();
  CHECK(cp.files == 2);
  CHECK(cp.skipped_count == 1);
  REQUIRE(cp.skipped.size() == 1);
  CHECK(cp.skipped[0].find("pipe: a FIFO") != std::string::npos);
  auto files = s.store->files(cp.id);
  REQUIRE(files);
  for (const auto& e : *files) CHECK(e.path.find("build") == std::string::npos);
  s.put("build/out.o", "newer object");
  s.restore(cp.id);
  CHECK(s.get("build/out.o") == "newer object");
}

TEST_CASE("removing checkpoints collects the blobs only they held") {
  Scratch s;
  s.put("shared.txt", "kept by both");
  s.put("only.txt", "first version");
  auto a = s.checkpoint();
  s.put("only.txt", "second version");
  auto b = s.checkpoint();
  CHECK(s.blobs_on_disk() == 3);
  REQUIRE(s.store->remove(a.id));
  CHECK(s.blobs_on_disk() == 2);
  CHECK_FALSE(s.store->get(a.id));
  // The cache must not vouch for a collected blob: the next checkpoint still restores.
  s.put("only.txt", "first version");
  auto c = s.checkpoint();
  REQUIRE(s.store->remove(b.id));
  s.put("only.txt", "third");
  s.restore(c.id);
  CHECK(s.get("only.txt") == "first version");
  REQUIRE(s.store->remove(c.id));
  // Restore made a "before" checkpoint; remove everything and nothing is left.
  auto page = s.store->list("ws_test", "me", 100);
  REQUIRE(page);
  for (const auto& cp : page->checkpoints) REQUIRE(s.store->remove(cp.id));
  CHECK(s.blobs_on_disk() == 0);
  auto refs = s.store->references(std::string(64, 'a'));
  REQUIRE(refs);
  CHECK_FALSE(*refs);
}

TEST_CASE("another owner's references keep a blob a prune would free") {
  Scratch s;
  s.put("x.txt", "published too");
  auto a = s.checkpoint();
  s.store->set_blob_referrer([](const std::string&) -> kiln::Result<bool> { return true; });
  REQUIRE(s.store->remove(a.id));
  CHECK(s.blobs_on_disk() == 1);
}

TEST_CASE("checkpoint_diff: text as unified diffs, binary by hash, paged") {
  Scratch s;
  s.put("t.txt", "line1\nline2\n");
  s.put("b.bin", std::string("\0\1\2", 3));
  auto cp = s.checkpoint();
  s.put("t.txt", "line1\nLINE2\n");
  s.put("b.bin", std::string("\0\1\3", 3));
  s.put("n.txt", "new\n");
  DiffRequest q;
  q.from = cp.id;
  q.root = &*s.root;
  auto d = s.store->diff(q);
  REQUIRE(d);
  CHECK(d->to == "now");
  REQUIRE(d->changes.size() == 3);
  const auto& bin = d->changes[0];
  CHECK(bin.path == "b.bin");
  CHECK(bin.binary);
  CHECK(bin.sha_before != bin.sha_after);
  CHECK(d->changes[2].path == "t.txt");
  CHECK(d->changes[2].diff.find("-line2") != std::string::npos);
  CHECK(d->changes[2].diff.find("+LINE2") != std::string::npos);
  q.limit = 1;
  q.offset = 1;
  auto p = s.store->diff(q);
  REQUIRE(p);
  CHECK(p->changes.size() == 1);
  CHECK(p->changes[0].path == "n.txt");
  CHECK(p->changes[0].change == "added");
  CHECK(p->next_offset == 2);
}
