// Tree objects: one line per child, "<f|d|l> <mode> <size> <sha> <len>:<name>\n", names length-
// prefixed because a file name may hold any byte but NUL and '/'.
#include "workspace/checkpoint_tree.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "blobs/blob_store.h"

namespace kiln::workspace {

namespace {

char type_char(EntryType t) { return t == EntryType::dir ? 'd' : t == EntryType::symlink ? 'l' : 'f'; }

template <class T>
bool parse_number(std::string_view& in, T& out, int base, char end) {
  auto [p, ec] = std::from_chars(in.data(), in.data() + in.size(), out, base);
  if (ec != std::errc() || p == in.data() + in.size() || *p != end) return false;
  in.remove_prefix(std::size_t(p - in.data()) + 1);
  return true;
}

Error damaged(const std::string& what) {
  return Error{Errc::internal, "checkpoint store: " + what + " (the store is damaged; kiln checkpoint rm the checkpoint)"};
}

std::string join(std::string_view dir, std::string_view name) {
  return dir.empty() ? std::string(name) : fmt::format("{}/{}", dir, name);
}

std::string build(FlatTree& flat, std::size_t& i, const std::string& prefix, const TreeEmitter& emit,
                  const TreeReuse& reuse) {
  std::vector<TreeChild> kids;
  auto inside = [&](std::size_t k, const std::string& pre) {
    return k < flat.size() && flat[k].path.size() > pre.size() && flat[k].path.starts_with(pre);
  };
  while (inside(i, prefix)) {
    std::size_t at = i++;
    std::string name = flat[at].path.substr(prefix.size());
    if (name.find('/') != std::string::npos) continue;  // its folder was not listed: not capturable
    if (flat[at].type == EntryType::dir) {
      const std::string sub = flat[at].path + "/";
      if (reuse && !flat[at].sha.empty() && reuse(flat[at].path)) {
        while (inside(i, sub)) ++i;  // unchanged: its stored object stands
      } else {
        flat[at].sha = build(flat, i, sub, emit, reuse);
      }
    }
    const TreeEntry& e = flat[at];
    kids.push_back({std::move(name), e.type, e.mode, e.size, e.sha});
  }
  std::sort(kids.begin(), kids.end(), [](const TreeChild& a, const TreeChild& b) { return a.name < b.name; });
  std::string encoded = encode_tree(kids);
  std::string sha = tree_sha(encoded);
  emit(sha, encoded, kids);
  return sha;
}

// Stored trees are as deep as the walks that made them (kMaxWalkDepth); a deeper one was not made
// here, and following it would recurse past a thread's stack.
Result<void> check_depth(std::string_view dir) {
  if (std::ranges::count(dir, '/') < kMaxWalkDepth) return {};
  return std::unexpected(damaged(fmt::format("a tree nested more than {} folders deep", kMaxWalkDepth)));
}

Result<void> flatten_into(const std::string& sha, const std::string& dir, const TreeLoader& load, FlatTree& out) {
  if (auto deep = check_depth(dir); !deep) return deep;
  auto data = load(sha);
  if (!data) return std::unexpected(damaged(fmt::format("tree {} is missing", sha)));
  auto kids = decode_tree(*data);
  if (!kids) return std::unexpected(kids.error());
  // Tree order is path_less over whole paths; within one folder that is name order, except that a
  // folder's own contents come right after it, which the recursion gives.
  std::sort(kids->begin(), kids->end(), [](const TreeChild& a, const TreeChild& b) { return path_less(a.name, b.name); });
  for (auto& k : *kids) {
    std::string path = join(dir, k.name);
    out.push_back({path, k.type, k.mode, k.size, k.sha});
    if (k.type == EntryType::dir)
      if (auto r = flatten_into(k.sha, path, load, out); !r) return r;
  }
  return {};
}

// Every file and link under a stored folder, as one kind of change.
Result<void> all_under(const TreeChild& dir, const std::string& path, TreeChange::Kind kind, const TreeLoader& load,
                       std::vector<ShallowChange>& out) {
  FlatTree sub;
  if (auto r = flatten_into(dir.sha, path, load, sub); !r) return r;
  for (const auto& e : sub) {
    if (e.type == EntryType::dir) continue;
    ShallowChange c{e.path, kind};
    (kind == TreeChange::Kind::added ? c.size_after : c.size_before) = e.size;
    out.push_back(std::move(c));
  }
  return {};
}

Result<void> compare_into(const std::string& a, const std::string& b, const std::string& dir, const TreeLoader& load,
                          std::vector<ShallowChange>& out) {
  if (a == b) return {};
  if (auto deep = check_depth(dir); !deep) return deep;
  auto da = load(a);
  auto db = load(b);
  if (!da || !db) return std::unexpected(damaged(fmt::format("tree {} is missing", da ? b : a)));
  auto ka = decode_tree(*da);
  if (!ka) return std::unexpected(ka.error());
  auto kb = decode_tree(*db);
  if (!kb) return std::unexpected(kb.error());
  std::size_t i = 0, j = 0;
  auto gone = [&](const TreeChild& c) -> Result<void> {
    std::string p = join(dir, c.name);
    if (c.type == EntryType::dir) return all_under(c, p, TreeChange::Kind::deleted, load, out);
    out.push_back({p, TreeChange::Kind::deleted, c.size, 0});
    return {};
  };
  auto came = [&](const TreeChild& c) -> Result<void> {
    std::string p = join(dir, c.name);
    if (c.type == EntryType::dir) return all_under(c, p, TreeChange::Kind::added, load, out);
    out.push_back({p, TreeChange::Kind::added, 0, c.size});
    return {};
  };
  while (i < ka->size() || j < kb->size()) {
    Result<void> r;
    if (j == kb->size() || (i < ka->size() && (*ka)[i].name < (*kb)[j].name)) {
      r = gone((*ka)[i++]);
    } else if (i == ka->size() || (*kb)[j].name < (*ka)[i].name) {
      r = came((*kb)[j++]);
    } else {
      const TreeChild& x = (*ka)[i++];
      const TreeChild& y = (*kb)[j++];
      std::string p = join(dir, x.name);
      if (x.type == EntryType::dir && y.type == EntryType::dir) {
        r = compare_into(x.sha, y.sha, p, load, out);
      } else if (x.type != y.type) {
        r = gone(x);
        if (r) r = came(y);
      } else if (x.sha != y.sha || x.mode != y.mode) {
        out.push_back({p, TreeChange::Kind::modified, x.size, y.size});
      }
    }
    if (!r) return r;
  }
  return {};
}

}  // namespace

std::string encode_tree(const std::vector<TreeChild>& children) {
  std::string out;
  out.reserve(children.size() * 96);
  for (const auto& c : children)
    fmt::format_to(std::back_inserter(out), "{} {:o} {} {} {}:{}\n", type_char(c.type), c.mode, c.size, c.sha,
                   c.name.size(), c.name);
  return out;
}

Result<std::vector<TreeChild>> decode_tree(std::string_view in) {
  std::vector<TreeChild> out;
  while (!in.empty()) {
    TreeChild c;
    if (in.size() < 2 || in[1] != ' ') return std::unexpected(damaged("a tree line has no type"));
    c.type = in[0] == 'd' ? EntryType::dir : in[0] == 'l' ? EntryType::symlink : EntryType::file;
    if (in[0] != 'd' && in[0] != 'l' && in[0] != 'f') return std::unexpected(damaged("a tree line has a bad type"));
    in.remove_prefix(2);
    std::size_t len = 0;
    if (!parse_number(in, c.mode, 8, ' ') || !parse_number(in, c.size, 10, ' '))
      return std::unexpected(damaged("a tree line has a bad mode or size"));
    auto sp = in.find(' ');
    if (sp == std::string_view::npos) return std::unexpected(damaged("a tree line has no hash"));
    c.sha = std::string(in.substr(0, sp));
    in.remove_prefix(sp + 1);
    if (!parse_number(in, len, 10, ':') || in.size() < len + 1 || in[len] != '\n' || len == 0)
      return std::unexpected(damaged("a tree line has a bad name"));
    c.name = std::string(in.substr(0, len));
    in.remove_prefix(len + 1);
    if (!blobs::valid_sha256_hex(c.sha) || c.name.find('/') != std::string::npos || c.name == "." || c.name == "..")
      return std::unexpected(damaged("a tree line names something unusable"));
    out.push_back(std::move(c));
  }
  return out;
}

std::string tree_sha(std::string_view encoded) { return blobs::sha256_hex(encoded); }

std::string build_trees(FlatTree& flat, const TreeEmitter& emit, const TreeReuse& reuse) {
  std::size_t i = 0;
  return build(flat, i, "", emit, reuse);
}

Result<FlatTree> flatten(const std::string& root_sha, const TreeLoader& load) {
  FlatTree out;
  if (auto r = flatten_into(root_sha, "", load, out); !r) return std::unexpected(r.error());
  return out;
}

const char* to_string(TreeChange::Kind k) {
  switch (k) {
    case TreeChange::Kind::added: return "added";
    case TreeChange::Kind::deleted: return "deleted";
    case TreeChange::Kind::modified: return "modified";
  }
  return "modified";
}

std::vector<TreeChange> compare(const FlatTree& a, const FlatTree& b) {
  std::vector<TreeChange> out;
  std::size_t i = 0, j = 0;
  auto leaf = [](const TreeEntry& e) { return e.type != EntryType::dir; };
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && path_less(a[i].path, b[j].path))) {
      if (leaf(a[i])) out.push_back({a[i].path, TreeChange::Kind::deleted, &a[i], nullptr});
      ++i;
    } else if (i == a.size() || path_less(b[j].path, a[i].path)) {
      if (leaf(b[j])) out.push_back({b[j].path, TreeChange::Kind::added, nullptr, &b[j]});
      ++j;
    } else {
      const TreeEntry& x = a[i++];
      const TreeEntry& y = b[j++];
      if (leaf(x) && leaf(y)) {
        if (x.type != y.type || x.sha != y.sha || x.mode != y.mode)
          out.push_back({x.path, TreeChange::Kind::modified, &x, &y});
      } else if (leaf(x)) {
        out.push_back({x.path, TreeChange::Kind::deleted, &x, nullptr});
      } else if (leaf(y)) {
        out.push_back({y.path, TreeChange::Kind::added, nullptr, &y});
      }
    }
  }
  return out;
}

Result<std::vector<ShallowChange>> compare_stored(const std::string& a_root, const std::string& b_root,
                                                  const TreeLoader& load) {
  std::vector<ShallowChange> out;
  if (auto r = compare_into(a_root, b_root, "", load, out); !r) return std::unexpected(r.error());
  return out;
}

}  // namespace kiln::workspace
