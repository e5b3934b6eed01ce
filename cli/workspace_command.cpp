// `kiln workspace import`: unpack (workspace/checkpoint_archive.h refuses anything that could
// write outside the new folder), register, then a first checkpoint so the imported state can
// always be restored. The checkpoint store is opened through open_blob_owners, as everywhere.
#include "cli/workspace_command.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/blob_owners.h"
#include "cli/report.h"
#include "core/path_nesting.h"
#include "mcp/principal.h"
#include "workspace/checkpoint_archive.h"
#include "workspace/root.h"
#include "workspace/state_store.h"

namespace kiln::cli {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// "site-v2.tar.zst" -> "site-v2": the default folder (and workspace) name.
std::string stem_of(const std::string& file) {
  std::string name = fs::path(file).filename().string();
  for (std::string_view ext : {".tar.zst", ".tzst", ".tar"})
    if (name.size() > ext.size() && name.ends_with(ext)) return name.substr(0, name.size() - ext.size());
  auto dot = name.rfind('.');
  return dot != std::string::npos && dot > 0 ? name.substr(0, dot) : name;
}

}  // namespace

CLI::App& WorkspaceCommand::configure(CLI::App& app) {
  auto* ws = app.add_subcommand("workspace", "Workspaces: import one from a tarball");
  ws->footer("Exit: 0 ok, 1 failed or refused, 2 usage.");
  import_ = ws->add_subcommand("import", "Unpack a .tar.zst or .tar (e.g. a checkpoint export) into a new workspace");
  import_->add_option("file", file_, "The archive");
  import_->add_option("--into", into_, "The new folder (default: ./NAME); it must not exist, or be empty");
  import_->add_option("--name", name_, "The workspace's name (default: the file's name without .tar.zst)");
  import_->add_flag("--json", json_, "Print JSON");
  import_->footer(
      "Refused, with nothing left behind: absolute paths, \"..\", entries beneath a symbolic link, the same path "
      "twice, hard links, devices, FIFOs, setuid and setgid files.");
  return *ws;
}

int WorkspaceCommand::run(const GlobalOptions& global) {
  if (import_->parsed()) return import_archive(global.state_dir);
  return usage("kiln workspace needs a subcommand: import");
}

int WorkspaceCommand::import_archive(const std::string& state_dir) {
  if (file_.empty()) return usage("which archive? pass FILE.tar.zst (or FILE.tar)");
  struct stat st {};
  if (::stat(file_.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return report(Error{Errc::not_found, fmt::format("{} is not a file", file_)});
  const std::string stem = stem_of(file_);
  const std::string folder_name = name_.empty() ? stem : name_;
  if (into_.empty() && (folder_name.empty() || folder_name == "." || folder_name == ".." ||
                        folder_name.find('/') != std::string::npos))
    return usage(fmt::format("cannot make a folder name of '{}'; pass --into DIR", folder_name));
  std::error_code ec;
  fs::path dest = fs::absolute(into_.empty() ? fs::path(folder_name) : fs::path(into_), ec).lexically_normal();
  if (ec) return report(Error{Errc::io, fmt::format("cannot tell where {} is: {}", into_, ec.message())});
  if (dest.has_filename() == false) dest = dest.parent_path();

  // Never into the state directory, inside it or around it (a workspace there would expose it).
  if (fs::exists(dest, ec)) {
    if (auto apart = check_apart_from_state_dir(dest.string(), state_dir); !apart) return report(apart.error());
  } else {
    auto n = nesting_of(dest.parent_path().string(), state_dir);
    if (!n) return report(Error{Errc::not_found, fmt::format("cannot make {}: {}", dest.string(), n.error().message)});
    if (*n == Nesting::same || *n == Nesting::inside)
      return report(Error{Errc::invalid_argument,
                          fmt::format("{} would be inside Kiln's state directory {}; import somewhere else", dest.string(),
                                      state_dir)});
  }

  auto counts = workspace::unpack_archive(file_, dest.string());
  if (!counts) {
    std::fprintf(stderr, "kiln: %s\n", counts.error().message.c_str());
    std::fprintf(stderr, "kiln: nothing was imported from %s\n", file_.c_str());
    return kExitError;
  }
  auto root = workspace::Root::open(dest.string());
  if (!root) return report(root.error());
  auto states = workspace::StateStore::open(state_dir);
  if (!states) return report(states.error());
  bool created = false;
  auto rec = (*states)->open_workspace(root->path(), name_.empty() ? stem : name_, &created);
  if (!rec) return report(rec.error());
  auto owners = open_blob_owners(state_dir);
  if (!owners) return report(owners.error());
  workspace::CheckpointRequest q;
  q.root = &*root;
  q.workspace_id = rec->id;
  q.principal = server::local_principal();
  q.label = "imported from " + fs::path(file_).filename().string();
  q.trigger = "manual";
  auto cp = owners->checkpoints->create(q);
  if (!cp) return report(cp.error());

  if (json_) {
    std::printf("%s\n", dump_json(json{{"workspace", {{"name", rec->name}, {"id", rec->id}, {"root", rec->root}}},
                                       {"checkpoint_id", cp->id},
                                       {"files", counts->files},
                                       {"folders", counts->folders},
                                       {"symlinks", counts->symlinks},
                                       {"bytes", counts->bytes}})
                            .c_str());
    return 0;
  }
  std::fprintf(stderr, "kiln: imported %s: %llu files, %llu folders, %llu links, %s\n", file_.c_str(),
               static_cast<unsigned long long>(counts->files), static_cast<unsigned long long>(counts->folders),
               static_cast<unsigned long long>(counts->symlinks), human_bytes(counts->bytes).c_str());
  std::printf("name        %s\nid          %s\npath        %s\ncheckpoint  %s (%s)\n", rec->name.c_str(),
              rec->id.c_str(), rec->root.c_str(), cp->id.c_str(), q.label.c_str());
  return 0;
}

}  // namespace kiln::cli
