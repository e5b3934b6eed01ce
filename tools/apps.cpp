// app_status, app_restart, schedule_run, app_export: thin handlers that check the artifact is this
// workspace's app, ask kiln serve's supervisor, and (export) copy what it dumped into the workspace.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/fd_io.h"
#include "core/unique_fd.h"
#include "mcp/session_state.h"
#include "mcp/tool_registry.h"
#include "tools/apps.h"
#include "tools/publish.h"
#include "tools/tools.h"
#include "workspace/root.h"

namespace kiln::server {

using nlohmann::json;
namespace art = kiln::artifacts;

namespace {

constexpr int kStatusMs = 15000;
constexpr int kRestartMs = 600000;  // a start may make a database first
constexpr int kExportMs = 1800000;  // pg_dump of a large database

// The artifact, when it is this workspace's app; errors say what to do instead.
Result<art::ArtifactInfo> app_of(CallContext& ctx, RunTracer& tracer, art::ArtifactStore& store, const json& args) {
  const std::string name = args.at("artifact");
  auto a = owned_by_session_workspace(ctx, tracer, store, args, name);
  if (!a) return std::unexpected(a.error());
  if (!a->is_app()) {
    return fail(Errc::invalid_argument,
                fmt::format("artifact {} is not an app (its latest version is static files): publish it with app: "
                            "true (kiln.json needs an \"app\" section, e.g. \"app\": {{\"run\": \"node server.js\"}})",
                            name));
  }
  return a;
}

// The supervisor's "not an app" wording names no tool argument; the rest passes through.
Result<json> control(art::ArtifactStore& store, const json& request, int timeout_ms) {
  auto r = app_control(store.dir(), request, timeout_ms);
  if (!r && r.error().code == Errc::io)
    return fail(Errc::io, fmt::format("{}; the app's state is unknown: try again, or look at kiln serve's log", r.error().message));
  return r;
}

// app_status and app_restart: one supervisor call about the artifact, answered as it comes.
Result<ToolOutput> app_op(CallContext& ctx, RunTracer& tracer, art::ArtifactStore& store, const json& args,
                          const char* op, int timeout_ms) {
  auto a = app_of(ctx, tracer, store, args);
  if (!a) return std::unexpected(a.error());
  auto r = control(store, {{"op", op}, {"artifact", a->name}}, timeout_ms);
  if (!r) return std::unexpected(r.error());
  return ToolOutput{std::move(*r)};
}

Result<ToolOutput> schedule_run(CallContext& ctx, RunTracer& tracer, art::ArtifactStore& store, const json& args) {
  auto a = app_of(ctx, tracer, store, args);
  if (!a) return std::unexpected(a.error());
  const std::string name = args.at("name");
  // Named from the running version's configuration, so a typo gets the list rather than a 404.
  const json schedules = a->versions.back().app->value("app", json::object()).value("schedules", json::array());
  std::string names;
  double timeout_s = -1;
  for (const auto& s : schedules) {
    const std::string n = s.value("name", "");
    names += (names.empty() ? "" : ", ") + n;
    if (n == name) timeout_s = s.value("timeout_s", 600.0);
  }
  if (timeout_s < 0) {
    return fail(Errc::not_found,
                names.empty() ? fmt::format("app {} has no schedules: add \"schedules\" to kiln.json's \"app\" section "
                                            "and publish again",
                                            a->name)
                              : fmt::format("app {} has no schedule {}; its schedules: {}", a->name, name, names));
  }
  auto r = control(store, {{"op", "schedule_run"}, {"artifact", a->name}, {"name", name}},
                   int(std::min(timeout_s + 120, 7200.0) * 1000));
  if (!r) return std::unexpected(r.error());
  json out = std::move(*r);
  out["artifact"] = a->name;
  out["name"] = name;
  return ToolOutput{std::move(out)};
}

// --- app_export: files from Kiln's state directory into the workspace --------------------------

struct ExportCount {
  std::uint64_t files = 0, bytes = 0, dirs = 0, skipped_links = 0, skipped_other = 0;
};

Result<void> copy_fd(int in, int out, const std::string& shown, std::uint64_t& bytes) {
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(in, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(Errc::io, fmt::format("cannot read the app's data for {}: {}", shown, std::strerror(errno)));
    if (n == 0) return {};
    if (!write_all(out, buf, std::size_t(n)))
      return fail(Errc::io, fmt::format("cannot write {}: {}", shown, std::strerror(errno)));
    bytes += std::uint64_t(n);
  }
}

// One file into the workspace at `rel`, through the root (no symlink out; O_NOFOLLOW on the file).
Result<void> write_into(const workspace::Root& root, const std::string& rel, int in, bool overwrite, ExportCount& n) {
  auto parent = root.open_parent(rel, true);
  if (!parent) return std::unexpected(parent.error());
  const int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (overwrite ? O_TRUNC : O_EXCL);
  UniqueFd out(::openat(parent->dir.get(), parent->name.c_str(), flags, 0644));
  if (out.get() < 0) {
    if (errno == EEXIST) return fail(Errc::conflict, fmt::format("{} exists; pass overwrite: true to replace it", rel));
    if (errno == ELOOP) return fail(Errc::path_escape, fmt::format("{} is a symlink; it is never written through", rel));
    return fail(Errc::io, fmt::format("cannot write {}: {}", rel, std::strerror(errno)));
  }
  if (auto c = copy_fd(in, out.get(), rel, n.bytes); !c) return c;
  ++n.files;
  return {};
}

// The data folder, walked by descriptors with O_NOFOLLOW: the app wrote it, so any link in it
// may point anywhere and is skipped, never followed.
Result<void> copy_tree(const workspace::Root& root, int dir_fd, const std::string& rel, bool overwrite, ExportCount& n) {
  {
    auto parent = root.open_parent(rel, true);
    if (!parent) return std::unexpected(parent.error());
    if (::mkdirat(parent->dir.get(), parent->name.c_str(), 0755) != 0 && errno != EEXIST)
      return fail(Errc::io, fmt::format("cannot create {}: {}", rel, std::strerror(errno)));
    ++n.dirs;
  }
  UniqueFd listing(::dup(dir_fd));
  DIR* d = listing.get() < 0 ? nullptr : ::fdopendir(listing.get());
  if (!d) return fail(Errc::io, fmt::format("cannot list the app's data folder: {}", std::strerror(errno)));
  (void)listing.release();  // the DIR owns it now
  std::vector<std::string> names;
  while (auto* e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
  ::closedir(d);
  for (const auto& name : names) {
    struct stat st {};
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone meanwhile
    const std::string to = rel + "/" + name;
    if (S_ISLNK(st.st_mode)) {
      ++n.skipped_links;
    } else if (S_ISDIR(st.st_mode)) {
      UniqueFd sub(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub.get() < 0) return fail(Errc::io, fmt::format("cannot open the app's data folder {}: {}", name, std::strerror(errno)));
      if (auto r = copy_tree(root, sub.get(), to, overwrite, n); !r) return r;
    } else if (S_ISREG(st.st_mode)) {
      UniqueFd in(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
      if (in.get() < 0) continue;  // swapped for a link or removed since the stat
      if (auto r = write_into(root, to, in.get(), overwrite, n); !r) return r;
    } else {
      ++n.skipped_other;
    }
  }
  return {};
}

// Every path the export would write that already exists, so nothing is written when one would be
// overwritten without permission.
std::vector<std::string> existing(const workspace::Root& root, const std::vector<std::string>& rels) {
  std::vector<std::string> out;
  for (const auto& rel : rels) {
    auto fd = root.open(rel, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd || fd.error().code != Errc::not_found) out.push_back(rel);
  }
  return out;
}

Result<ToolOutput> app_export(CallContext& ctx, RunTracer& tracer, art::ArtifactStore& store, const json& args) {
  auto ws = ctx.session->workspace_for(args);
  if (!ws) return std::unexpected(ws.error());
  const workspace::Root& root = *(*ws)->root;
  auto a = app_of(ctx, tracer, store, args);
  if (!a) return std::unexpected(a.error());
  auto dest = root.relative(args.at("path").get<std::string>());
  if (!dest) return std::unexpected(dest.error());
  if (dest->empty())
    return fail(Errc::invalid_argument, "path is the workspace root; name a folder for the export, e.g. \"export\"");
  const bool overwrite = args.value("overwrite", false);
  auto r = control(store, {{"op", "export"}, {"artifact", a->name}}, kExportMs);
  if (!r) return std::unexpected(r.error());
  const json files = r->value("files", json::array());
  const std::string data_dir = r->value("data_dir", "");
  std::vector<std::string> targets;
  for (const auto& f : files) {
    const std::string name = f.value("name", "");
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
      return fail(Errc::internal, fmt::format("kiln serve named an export file {}", json(name).dump()));
    targets.push_back(*dest + "/" + name);
  }
  if (!data_dir.empty()) targets.push_back(*dest + "/data");
  if (!overwrite) {
    auto there = existing(root, targets);
    if (!there.empty()) {
      std::string list;
      for (const auto& p : there) list += (list.empty() ? "" : ", ") + p;
      return fail(Errc::conflict, fmt::format("nothing was written: {} already exist{} in the workspace; pass "
                                              "overwrite: true to replace, or another path",
                                              list, there.size() == 1 ? "s" : ""));
    }
  }
  ExportCount n;
  json written = json::array();
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string from = files[i].value("path", "");
    UniqueFd in(::open(from.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (in.get() < 0) return fail(Errc::io, fmt::format("cannot read the dump {}: {}", from, std::strerror(errno)));
    const std::uint64_t before = n.bytes;
    if (auto w = write_into(root, targets[i], in.get(), overwrite, n); !w) return std::unexpected(w.error());
    written.push_back({{"name", files[i].value("name", "")}, {"path", targets[i]}, {"bytes", n.bytes - before}});
  }
  json out = {{"artifact", a->name}, {"path", *dest}, {"files", std::move(written)}, {"data", nullptr}};
  if (!data_dir.empty()) {
    UniqueFd dir(::open(data_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (dir.get() < 0 && errno != ENOENT)
      return fail(Errc::io, fmt::format("cannot open the app's data folder {}: {}", data_dir, std::strerror(errno)));
    if (dir.get() >= 0) {
      ExportCount d;
      if (auto c = copy_tree(root, dir.get(), *dest + "/data", overwrite, d); !c) return std::unexpected(c.error());
      out["data"] = {{"path", *dest + "/data"},       {"files", d.files}, {"bytes", d.bytes},
                     {"skipped_symlinks", d.skipped_links}, {"skipped_other", d.skipped_other}};
    }
  }
  return ToolOutput{std::move(out)};
}

}  // namespace

void register_app_tools(ToolRegistry& registry, RunTracer& tracer, art::ArtifactStore& store) {
  registry.add("app_status", [&tracer, &store](CallContext& ctx, const json& args) {
    return app_op(ctx, tracer, store, args, "status", kStatusMs);
  });
  registry.add("app_restart", [&tracer, &store](CallContext& ctx, const json& args) {
    return app_op(ctx, tracer, store, args, "restart", kRestartMs);
  });
  registry.add("schedule_run",
               [&tracer, &store](CallContext& ctx, const json& args) { return schedule_run(ctx, tracer, store, args); });
  registry.add("app_export",
               [&tracer, &store](CallContext& ctx, const json& args) { return app_export(ctx, tracer, store, args); });
}

}  // namespace kiln::server
