// The `kiln checkpoint` subcommands. The checkpoint store is always opened through
// open_blob_owners, so a removal here never deletes a blob a published artifact still holds.
// The command line acts as the local user's own store: every principal's checkpoints are visible.
#include "cli/checkpoint_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <optional>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/blob_owners.h"
#include "cli/local_workspace.h"
#include "cli/report.h"
#include "mcp/principal.h"
#include "workspace/checkpoint_archive.h"
#include "workspace/checkpoint_store.h"
#include "workspace/root.h"
#include "workspace/state_store.h"

namespace kiln::cli {
namespace {

using nlohmann::json;
using workspace::CheckpointInfo;
using workspace::WorkspaceRecord;

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string current_dir() {
  std::error_code ec;
  auto p = std::filesystem::current_path(ec);
  if (ec) return {};
  auto canon = std::filesystem::weakly_canonical(p, ec);
  return ec ? p.string() : canon.string();
}

// The workspace a command is about: --workspace (name or id), else the registered workspace the
// current folder is in (the innermost, when workspaces nest).
Result<WorkspaceRecord> find_workspace(const std::string& name_or_id, const std::string& state_dir) {
  if (!exists(state_dir + "/kiln.db")) {
    if (!name_or_id.empty()) return fail(Errc::not_found, fmt::format("no workspace '{}' in {}", name_or_id, state_dir));
    return fail(Errc::not_found, fmt::format("no workspaces in {} yet; `kiln checkpoint create` in a folder makes it one",
                                             state_dir));
  }
  auto store = workspace::StateStore::open(state_dir);
  if (!store) return std::unexpected(store.error());
  if (!name_or_id.empty()) {
    auto found = (*store)->find_workspace(name_or_id);
    if (!found) return std::unexpected(found.error());
    if (!*found) return fail(Errc::not_found, fmt::format("no workspace '{}' in {}", name_or_id, state_dir));
    return **found;
  }
  const std::string cwd = current_dir();
  auto all = (*store)->list_workspaces();
  if (!all) return std::unexpected(all.error());
  std::optional<WorkspaceRecord> best;
  for (auto& w : *all) {
    const bool in = cwd == w.root || (cwd.size() > w.root.size() && cwd.starts_with(w.root) &&
                                      (w.root == "/" || cwd[w.root.size()] == '/'));
    if (in && (!best || w.root.size() > best->root.size())) best = std::move(w);
  }
  if (!best)
    return fail(Errc::not_found, fmt::format("{} is not in a workspace; pass --workspace NAME, or `kiln checkpoint create` "
                                             "here makes it one",
                                             cwd));
  return *best;
}

Result<BlobOwners> open_owners(const std::string& state_dir) { return open_blob_owners(state_dir); }

Error no_checkpoints(const std::string& id, const std::string& state_dir) {
  return Error{Errc::not_found, fmt::format("no checkpoint {} in {}; `kiln checkpoint list` shows them", id, state_dir)};
}

// A workspace path given on the command line: relative to the current folder when that is inside
// the workspace (as a person means it), else relative to the workspace's root.
Result<std::string> workspace_relative(const workspace::Root& root, const std::string& arg) {
  if (arg.empty() || arg[0] == '/') return root.relative(arg);
  const std::string cwd = current_dir();
  if (cwd == root.path() || cwd.starts_with(root.path() + "/")) return root.relative(cwd + "/" + arg);
  return root.relative(arg);
}

// `git diff`'s mode numbers: the type bits and the permission bits.
std::string git_mode(const std::string& type, std::uint32_t mode) {
  return fmt::format("{:06o}", (type == "symlink" ? 0120000u : 0100000u) | (mode & 07777));
}

std::string short_sha(const std::string& s) { return s.empty() ? "-" : s.substr(0, 12); }

std::string change_text(const workspace::DiffChange& c) {
  std::string out = fmt::format("diff --git a/{} b/{}\n", c.path, c.path);
  if (c.change == "added") {
    out += fmt::format("new file mode {}\n", git_mode(c.type_after, c.mode_after.value_or(0644)));
  } else if (c.change == "deleted") {
    out += fmt::format("deleted file mode {}\n", git_mode(c.type_before, c.mode_before.value_or(0644)));
  } else if (c.mode_before && c.mode_after &&
             (*c.mode_before != *c.mode_after || c.type_before != c.type_after)) {
    out += fmt::format("old mode {}\nnew mode {}\n", git_mode(c.type_before, *c.mode_before),
                       git_mode(c.type_after, *c.mode_after));
  }
  if (c.binary) {
    auto size = [](const std::optional<std::uint64_t>& s) { return s ? fmt::format("{}", *s) : std::string("-"); };
    out += fmt::format("Binary files differ ({} -> {} bytes, sha256 {} -> {})\n", size(c.size_before),
                       size(c.size_after), short_sha(c.sha_before), short_sha(c.sha_after));
  } else {
    out += c.diff;
    if (!c.diff.empty() && c.diff.back() != '\n') out += '\n';
    if (c.diff_truncated) out += "... (the diff is cut here; --json has the rest of the changes)\n";
  }
  return out;
}

json change_json(const workspace::DiffChange& c) {
  json j = {{"path", c.path}, {"change", c.change}};
  j["size_before"] = c.size_before ? json(*c.size_before) : json(nullptr);
  j["size_after"] = c.size_after ? json(*c.size_after) : json(nullptr);
  if (!c.type_before.empty()) j["type_before"] = c.type_before;
  if (!c.type_after.empty()) j["type_after"] = c.type_after;
  if (c.mode_before) j["mode_before"] = fmt::format("{:04o}", *c.mode_before);
  if (c.mode_after) j["mode_after"] = fmt::format("{:04o}", *c.mode_after);
  j["sha256_before"] = c.sha_before.empty() ? json(nullptr) : json(c.sha_before);
  j["sha256_after"] = c.sha_after.empty() ? json(nullptr) : json(c.sha_after);
  j["binary"] = c.binary;
  j["diff"] = c.binary ? json(nullptr) : json(c.diff);
  if (c.diff_truncated) j["diff_truncated"] = true;
  return j;
}

bool ends_with(const std::string& s, std::string_view tail) { return s.size() >= tail.size() && s.ends_with(tail); }

}  // namespace

CLI::App& CheckpointCommand::configure(CLI::App& app) {
  auto* cp = app.add_subcommand("checkpoint", "List, make, compare, restore, remove and export checkpoints");
  cp->footer(
      "A checkpoint is the state of every file of a workspace (ignore rules honoured); sandboxed runs make "
      "them automatically. Without --workspace, the workspace of the current folder. "
      "Exit: 0 ok, 1 not found or failed, 2 usage.");
  list_ = cp->add_subcommand("list", "Checkpoints of a workspace, newest first");
  list_->add_option("--limit", limit_, "Most checkpoints shown (default 20)");
  create_ = cp->add_subcommand("create", "Record the workspace's files now");
  create_->add_option("--label", label_, "What this state is (\"before the refactor\")");
  for (auto* sub : {list_, create_}) sub->add_option("--workspace", workspace_, "The workspace (name or id)");

  diff_ = cp->add_subcommand("diff", "What changed from one checkpoint to another, or to the files now");
  diff_->add_option("from", from_, "Checkpoint id (cp_...)");
  diff_->add_option("to", to_, "Checkpoint id, or \"now\" (default: the files now)");
  diff_->add_option("--path", path_, "Only changes at or under this path");

  restore_ = cp->add_subcommand("restore", "Put files back as a checkpoint has them (a checkpoint is made first, to undo)");
  restore_->add_option("id", id_, "Checkpoint id (cp_...)");
  restore_->add_option("paths", paths_, "Only these files or folders (default: the whole workspace)");
  restore_->add_flag("--dry-run", dry_run_, "Say what would be restored and deleted; change nothing");

  rm_ = cp->add_subcommand("rm", "Delete checkpoints (their contents go when nothing else holds them)");
  rm_->add_option("ids", ids_, "Checkpoint ids (cp_...)");

  export_ = cp->add_subcommand("export", "Write a checkpoint's files as a tarball (.tar.zst, or .tar)");
  export_->add_option("id", id_, "Checkpoint id (cp_...)");
  export_->add_option("-o,--output", output_, "The file to write: NAME.tar.zst (zstd) or NAME.tar");
  export_->add_flag("--force", force_, "Replace the file if it exists");

  for (auto* sub : {list_, create_, diff_, restore_, export_}) sub->add_flag("--json", json_, "Print JSON");
  return *cp;
}

bool CheckpointCommand::creates_state_dir() const { return create_->parsed() || restore_->parsed(); }

int CheckpointCommand::run(const GlobalOptions& global) {
  const std::string& state_dir = global.state_dir;
  if (list_->parsed()) return list(state_dir);
  if (create_->parsed()) return create(state_dir);
  if (diff_->parsed()) return diff(state_dir);
  if (restore_->parsed()) return restore(state_dir);
  if (rm_->parsed()) return remove(state_dir);
  if (export_->parsed()) return export_archive(state_dir);
  return usage("kiln checkpoint needs a subcommand: list, create, diff, restore, rm or export");
}

int CheckpointCommand::list(const std::string& state_dir) {
  if (limit_ < 1) return usage(fmt::format("--limit {} is not a positive number", limit_));
  auto ws = find_workspace(workspace_, state_dir);
  if (!ws) return report(ws.error());
  std::vector<CheckpointInfo> all;
  if (exists(state_dir + "/checkpoints.db")) {
    auto owners = open_owners(state_dir);
    if (!owners) return report(owners.error());
    std::string cursor;
    while (all.size() < std::size_t(limit_)) {
      auto page = owners->checkpoints->list(ws->id, "", std::min<std::size_t>(500, std::size_t(limit_) - all.size()), cursor);
      if (!page) return report(page.error());
      for (auto& c : page->checkpoints) all.push_back(std::move(c));
      if (!page->next_cursor) break;
      cursor = *page->next_cursor;
    }
  }
  if (json_) {
    json arr = json::array();
    for (const auto& c : all) arr.push_back(c.to_json());
    std::printf("%s\n", dump_json(arr).c_str());
    return 0;
  }
  if (all.empty()) {
    std::fprintf(stderr, "kiln: no checkpoints of %s (%s) yet; `kiln checkpoint create` makes one\n", ws->name.c_str(),
                 ws->root.c_str());
    return 0;
  }
  std::printf("%-23s  %-7s  %-19s  %7s  %10s  %s\n", "ID", "TRIGGER", "CREATED (UTC)", "FILES", "SIZE", "LABEL");
  for (const auto& c : all)
    std::printf("%-23s  %-7s  %-19s  %7llu  %10s  %s\n", c.id.c_str(), c.trigger.c_str(), when(c.created_at).c_str(),
                static_cast<unsigned long long>(c.files), human_bytes(c.bytes).c_str(),
                c.label.empty() && !c.trace_id.empty() ? fmt::format("(run {})", c.trace_id).c_str() : c.label.c_str());
  return 0;
}

int CheckpointCommand::create(const std::string& state_dir) {
  std::string folder;
  if (!workspace_.empty()) {
    auto ws = find_workspace(workspace_, state_dir);
    if (!ws) return report(ws.error());
    folder = ws->root;
  } else if (auto ws = find_workspace("", state_dir)) {
    folder = ws->root;  // the workspace the current folder is in, not a new one for a subfolder
  }
  auto local = open_local_workspace(folder, state_dir);
  if (!local) return report(local.error());
  auto owners = open_owners(state_dir);
  if (!owners) return report(owners.error());
  workspace::CheckpointRequest q;
  q.root = &local->root;
  q.workspace_id = local->record.id;
  q.principal = server::local_principal();
  q.label = label_;
  q.trigger = "manual";
  auto c = owners->checkpoints->create(q);
  if (!c) return report(c.error());
  if (json_) {
    json j = c->to_json();
    j["workspace"] = local->record.name;
    std::printf("%s\n", dump_json(j).c_str());
    return 0;
  }
  std::printf("%s\n", c->id.c_str());
  std::fprintf(stderr, "kiln: checkpoint %s of %s: %llu files, %s (%s new) in %.0f ms\n", c->id.c_str(),
               local->record.name.c_str(), static_cast<unsigned long long>(c->files), human_bytes(c->bytes).c_str(),
               human_bytes(c->new_bytes).c_str(), c->duration_ms);
  for (const auto& s : c->skipped) std::fprintf(stderr, "kiln: skipped %s\n", s.c_str());
  if (c->skipped_count > c->skipped.size())
    std::fprintf(stderr, "kiln: ... and %llu more skipped\n",
                 static_cast<unsigned long long>(c->skipped_count - c->skipped.size()));
  return 0;
}

int CheckpointCommand::diff(const std::string& state_dir) {
  if (from_.empty()) return usage("which checkpoint? pass its id (cp_...), as `kiln checkpoint list` shows");
  if (!exists(state_dir + "/checkpoints.db")) return report(no_checkpoints(from_, state_dir));
  auto owners = open_owners(state_dir);
  if (!owners) return report(owners.error());
  auto& store = *owners->checkpoints;
  auto from = store.get(from_);
  if (!from) return report(from.error());
  workspace::DiffRequest q;
  q.from = from->id;
  if (!to_.empty() && to_ != "now") q.to = to_;
  q.max_diff_bytes = 1 << 20;
  std::optional<workspace::Root> root;
  if (!q.to || !path_.empty()) {
    auto states = workspace::StateStore::open(state_dir);
    if (!states) return report(states.error());
    auto rec = (*states)->find_workspace(from->workspace_id);
    if (!rec) return report(rec.error());
    if (!*rec)
      return report(Error{Errc::not_found, fmt::format("the workspace of {} ({}) is not known in {}", from->id,
                                                       from->workspace_id, state_dir)});
    auto r = workspace::Root::open_resolved((*rec)->root);
    if (!r) return report(r.error());
    root.emplace(std::move(*r));
    q.root = &*root;
  }
  if (!path_.empty()) {
    auto rel = workspace_relative(*root, path_);
    if (!rel) return report(rel.error());
    q.path = *rel;
  }
  json changes = json::array();
  std::string to_name;
  std::size_t total = 0;
  for (q.offset = 0;;) {
    q.limit = 500;
    auto d = store.diff(q);
    if (!d) return report(d.error());
    to_name = d->to;
    total = d->total;
    for (const auto& c : d->changes) {
      if (json_) changes.push_back(change_json(c));
      else std::fputs(change_text(c).c_str(), stdout);
    }
    if (!d->next_offset) break;
    q.offset = *d->next_offset;
  }
  if (json_) {
    std::printf("%s\n", dump_json(json{{"from", from->id}, {"to", to_name}, {"total", total}, {"changes", changes}}).c_str());
    return 0;
  }
  if (total == 0) std::fprintf(stderr, "kiln: no changes from %s to %s\n", from->id.c_str(), to_name.c_str());
  return std::fflush(stdout) == 0 ? 0 : report(Error{Errc::io, "cannot write to stdout"});
}

int CheckpointCommand::restore(const std::string& state_dir) {
  if (id_.empty()) return usage("which checkpoint? pass its id (cp_...), as `kiln checkpoint list` shows");
  if (!exists(state_dir + "/checkpoints.db")) return report(no_checkpoints(id_, state_dir));
  auto owners = open_owners(state_dir);
  if (!owners) return report(owners.error());
  auto& store = *owners->checkpoints;
  auto c = store.get(id_);
  if (!c) return report(c.error());
  auto states = workspace::StateStore::open(state_dir);
  if (!states) return report(states.error());
  auto rec = (*states)->find_workspace(c->workspace_id);
  if (!rec) return report(rec.error());
  if (!*rec)
    return report(Error{Errc::not_found,
                        fmt::format("the workspace of {} ({}) is not known in {}", c->id, c->workspace_id, state_dir)});
  auto root = workspace::Root::open_resolved((*rec)->root);
  if (!root) return report(root.error());
  workspace::RestoreRequest q;
  q.root = &*root;
  q.workspace_id = c->workspace_id;
  q.principal = server::local_principal();
  q.checkpoint_id = c->id;
  q.dry_run = dry_run_;
  for (const auto& p : paths_) {
    auto rel = workspace_relative(*root, p);
    if (!rel) return report(rel.error());
    q.paths.push_back(*rel);
  }
  auto r = store.restore(q);
  if (!r) return report(r.error());
  if (json_) {
    json out = {{"checkpoint_id", c->id},
                {"workspace", (*rec)->name},
                {"dry_run", r->dry_run},
                {"restored", r->restored},
                {"deleted", r->deleted},
                {"checkpoint_before", r->dry_run ? json(nullptr) : json(r->checkpoint_before)}};
    if (!r->kept.empty()) out["kept"] = r->kept;
    std::printf("%s\n", dump_json(out).c_str());
    return 0;
  }
  const char* restored = r->dry_run ? "would restore" : "restored";
  const char* deleted = r->dry_run ? "would delete" : "deleted";
  for (const auto& p : r->restored) std::printf("%-13s %s\n", restored, p.c_str());
  for (const auto& p : r->deleted) std::printf("%-13s %s\n", deleted, p.c_str());
  for (const auto& p : r->kept) std::printf("%-13s %s (it holds ignored files)\n", "kept", p.c_str());
  std::fprintf(stderr, "kiln: %s %zu file%s and %s %zu from %s in %s\n", restored, r->restored.size(),
               r->restored.size() == 1 ? "" : "s", deleted, r->deleted.size(), c->id.c_str(), (*rec)->root.c_str());
  if (!r->dry_run)
    std::fprintf(stderr, "kiln: to undo: kiln checkpoint restore %s\n", r->checkpoint_before.c_str());
  return 0;
}

int CheckpointCommand::remove(const std::string& state_dir) {
  if (ids_.empty()) return usage("which checkpoints? pass their ids (cp_...), as `kiln checkpoint list` shows");
  if (!exists(state_dir + "/checkpoints.db")) return report(no_checkpoints(ids_.front(), state_dir));
  auto owners = open_owners(state_dir);
  if (!owners) return report(owners.error());
  int exit = 0;
  for (const auto& id : ids_) {
    if (auto r = owners->checkpoints->remove(id); !r) {
      exit = report(r.error().code == Errc::not_found ? no_checkpoints(id, state_dir) : r.error());
      continue;
    }
    std::fprintf(stderr, "kiln: removed %s\n", id.c_str());
  }
  return exit;
}

int CheckpointCommand::export_archive(const std::string& state_dir) {
  if (id_.empty()) return usage("which checkpoint? pass its id (cp_...), as `kiln checkpoint list` shows");
  if (output_.empty()) return usage("where to? pass -o FILE.tar.zst (or FILE.tar)");
  workspace::ExportRequest q;
  q.checkpoint_id = id_;
  q.output = output_;
  q.force = force_;
  if (ends_with(output_, ".tar.zst") || ends_with(output_, ".tzst")) q.zstd = true;
  else if (ends_with(output_, ".tar")) q.zstd = false;
  else return usage(fmt::format("{}: name the file NAME.tar.zst (compressed with zstd) or NAME.tar", output_));
  if (!exists(state_dir + "/checkpoints.db")) return report(no_checkpoints(id_, state_dir));
  auto owners = open_owners(state_dir);
  if (!owners) return report(owners.error());
  auto r = workspace::export_checkpoint(*owners->checkpoints, q);
  if (!r) {
    if (r.error().code == Errc::conflict && !force_ && exists(output_))
      return report(Error{Errc::conflict, fmt::format("{} already exists; pass --force to replace it", output_)});
    return report(r.error());
  }
  const auto& n = r->counts;
  if (json_) {
    std::printf("%s\n", dump_json(json{{"checkpoint_id", id_},
                                       {"output", output_},
                                       {"compression", q.zstd ? "zstd" : "none"},
                                       {"files", n.files},
                                       {"folders", n.folders},
                                       {"symlinks", n.symlinks},
                                       {"bytes", n.bytes},
                                       {"archive_bytes", r->archive_bytes}})
                            .c_str());
    return 0;
  }
  std::fprintf(stderr, "kiln: wrote %s: %llu files, %llu folders, %llu links, %s (%s on disk)\n", output_.c_str(),
               static_cast<unsigned long long>(n.files), static_cast<unsigned long long>(n.folders),
               static_cast<unsigned long long>(n.symlinks), human_bytes(n.bytes).c_str(),
               human_bytes(r->archive_bytes).c_str());
  return 0;
}

}  // namespace kiln::cli
