// `kiln publish`: opens the stores in the state directory itself (WAL lets it write while a server
// reads) and starts `kiln serve` only when it hands out a URL, so the URL works at once.
#include "cli/blob_owners.h"
#include "cli/publish_command.h"

#include <cstdio>
#include <filesystem>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/report.h"
#include "cli/share_input.h"
#include "mcp/principal.h"
#include "tools/apps.h"
#include "tools/publish.h"
#include "traces/trace_store.h"
#include "workspace/root.h"
#include "workspace/state_store.h"

namespace kiln::cli {

using nlohmann::json;
using server::apply_publish_defaults;
using server::local_principal;
using server::publish_result_json;
using server::publish_traced;
using server::serve_base;
using server::ServeBase;
namespace art = kiln::artifacts;
namespace fs = std::filesystem;

int publish_path(const PublishOptions& o, const std::string& state_dir) {
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  if (ec) return report(Error{Errc::io, "cannot read the current directory: " + ec.message()});
  // No PATH: kiln.json's publish.path, in the workspace (--workspace or the current directory).
  const fs::path target = o.path.empty() ? fs::path() : fs::absolute(o.path, ec).lexically_normal();
  fs::path ws_dir;
  if (!o.workspace.empty()) {
    ws_dir = fs::absolute(o.workspace, ec);
  } else if (o.path.empty()) {
    ws_dir = cwd;
  } else {
    // The current directory when PATH is inside it; else PATH's own folder (or PATH itself).
    auto rel = target.lexically_relative(cwd);
    bool inside = !rel.empty() && *rel.begin() != "..";
    ws_dir = inside ? cwd : fs::is_directory(target, ec) ? target : target.parent_path();
  }
  auto root = workspace::Root::open(ws_dir.string());
  if (!root) return report(root.error());
  auto share = parse_share_option(o.share);
  if (!share) return report(share.error());
  art::PublishRequest req;
  if (o.password_stdin) {
    auto pw = read_password();
    if (!pw) return report(pw.error());
    req.password = std::move(*pw);
  }
  auto states = workspace::StateStore::open(state_dir);
  if (!states) return report(states.error());
  auto ws = (*states)->open_workspace(root->path(), "", nullptr);
  if (!ws) return report(ws.error());
  auto traces = traces::TraceStore::open(state_dir);
  if (!traces) return report(traces.error());
  auto store = open_artifacts(state_dir);
  if (!store) return report(store.error());

  req.workspace_id = ws->id;
  req.root = &*root;
  req.path = o.path.empty() ? std::string() : target.string();
  req.name = o.name;
  req.share = *share;
  req.invite_names = o.invites;
  req.expires_in_s = o.expires_in_s;
  req.invite_expires_in_s = o.invite_expires_in_s;
  if (auto d = apply_publish_defaults(**store, req); !d) return report(d.error());
  if (o.app) {
    if (auto a = server::apply_app_config(req); !a) return report(a.error());
  }
  auto p = publish_traced(**traces, **store, std::move(req), json{{"name", "kiln-cli"}, {"version", KILN_VERSION}},
                          local_principal());
  if (!p) return report(p.error());
  ServeBase base = serve_base(state_dir, true);
  json out = publish_result_json(*p, base);
  const auto& r = p->result;
  if (auto app = server::app_after_publish(state_dir, r); !app.is_null()) out["app"] = std::move(app);
  if (o.json) {
    std::printf("%s\n", dump_json(out).c_str());
  } else {
    std::fprintf(stderr, "kiln: published %s v%d (%llu files, %llu bytes; %llu new) share: %s, trace %s\n",
                 r.artifact.name.c_str(), r.version.number, static_cast<unsigned long long>(r.version.files),
                 static_cast<unsigned long long>(r.version.bytes), static_cast<unsigned long long>(r.new_blobs),
                 art::to_string(r.artifact.share), p->trace_id.c_str());
    if (r.skipped_symlinks)
      std::fprintf(stderr, "kiln: %llu symlink(s) skipped\n", static_cast<unsigned long long>(r.skipped_symlinks));
    std::printf("%s\n", out["url"].get<std::string>().c_str());
    print_invite_links(out["invites"]);
    if (out.contains("app")) {
      const json& app = out["app"];
      std::fprintf(stderr, "kiln: app %s: %s%s%s\n", r.artifact.name.c_str(), app.value("state", "unknown").c_str(),
                   app.contains("last_error") || app.contains("error") ? ": " : "",
                   app.value("last_error", app.value("error", "")).c_str());
    }
  }
  if (!base.error.empty()) std::fprintf(stderr, "kiln: no server answers these URLs yet: %s\n", base.error.c_str());
  return 0;
}

CLI::App& PublishCommand::configure(CLI::App& app) {
  PublishOptions& o = options_;
  app_ = app.add_subcommand("publish", "Publish a folder or file at a URL served by `kiln serve` (started if needed)");
  app_->footer(
      "Publishing again under the same name adds a version; the URL stays. Prints the URL (and one line per "
      "invite: NAME, a tab, its link) on stdout. Exit: 0 ok, 1 failed, 2 usage.");
  app_->add_option("path", o.path, "Folder or file to publish (default: kiln.json's publish.path)");
  app_->add_option("--name", o.name, "Artifact name in the URL /a/NAME/ (default: the path's last component)");
  app_->add_option("--share", o.share, "public, password or invite (default: keep; public when new)")
      ->check(CLI::IsMember({"public", "password", "invite"}));
  app_->add_flag("--password-stdin", o.password_stdin, "Read the password from stdin (share password)");
  app_->add_option("--invite", o.invites, "Invite NAME: prints a link of its own (repeatable)");
  app_->add_option("--expires-in", expires_, "Stop serving after this many seconds (0: never)")
      ->check(CLI::Range(std::int64_t(0), kMaxExpiresInS));
  app_->add_option("--invite-expires-in", invite_expires_, "The new invite links stop working after this many seconds")
      ->check(CLI::Range(std::int64_t(1), kMaxExpiresInS));
  app_->add_option("--workspace,-w", o.workspace, "Workspace folder (default: the current directory)");
  app_->add_flag("--app", o.app,
                 "Publish the folder as an app: kiln.json's \"app\" server, kept running by kiln serve with its data");
  app_->add_flag("--json", o.json, "Print the result as JSON");
  return *app_;
}

int PublishCommand::run(const GlobalOptions& global) {
  if (app_->count("--expires-in")) options_.expires_in_s = expires_;
  if (app_->count("--invite-expires-in")) options_.invite_expires_in_s = invite_expires_;
  return publish_path(options_, global.state_dir);
}

}  // namespace kiln::cli
