// `kiln artifacts`: reads the artifact store in the state directory itself (WAL lets it read while a
// server writes); only new invite links start `kiln serve`, since they are URLs that must work, and
// removing an app asks kiln serve to stop it first.
#include "cli/blob_owners.h"
#include "cli/artifacts_command.h"

#include <sys/stat.h>

#include <cstdio>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/report.h"
#include "cli/share_input.h"
#include "tools/apps.h"
#include "tools/publish.h"
#include "workspace/state_store.h"

namespace kiln::cli {

using nlohmann::json;
using server::artifact_json;
using server::artifact_url;
using server::invite_links;
using server::serve_base;
using server::ServeBase;
namespace art = kiln::artifacts;

int manage_artifacts(const ArtifactsOptions& o, const std::string& state_dir) {
  struct stat st {};
  const bool exists = ::stat((state_dir + "/artifacts.db").c_str(), &st) == 0;
  if (!exists && (o.action == "list" || o.action == "show")) {
    // Reading must not create a state directory.
    if (o.action == "show") return report(Error{Errc::not_found, fmt::format("no artifact {} in {}", o.name, state_dir)});
    if (o.json) std::printf("[]\n");
    return 0;
  }
  auto store = open_artifacts(state_dir);
  if (!store) return report(store.error());
  if (o.action == "list") {
    std::string ws_id;
    if (!o.workspace.empty()) {
      auto states = workspace::StateStore::open(state_dir);
      if (!states) return report(states.error());
      auto ws = (*states)->find_workspace(o.workspace);
      if (!ws) return report(ws.error());
      if (!*ws) return report(Error{Errc::not_found, fmt::format("no workspace {}", o.workspace)});
      ws_id = (*ws)->id;
    }
    auto list = (*store)->list(ws_id);
    if (!list) return report(list.error());
    ServeBase base = serve_base(state_dir, false);
    json arr = json::array();
    for (const auto& a : *list) arr.push_back(artifact_json(a, base.url));
    if (o.json) {
      std::printf("%s\n", dump_json(arr).c_str());
      return 0;
    }
    if (list->empty()) std::fprintf(stderr, "kiln: nothing published yet; `kiln publish PATH` publishes a folder\n");
    for (const auto& a : *list) {
      std::printf("%-24s %-8s v%-4d %3zu version%s%s  %s\n", a.name.c_str(), art::to_string(a.share), a.latest(),
                  a.versions.size(), a.versions.size() == 1 ? " " : "s",
                  a.expired ? "  expired" : a.expires_at ? fmt::format("  until {}", *a.expires_at).c_str() : "",
                  artifact_url(base.url, a.name).c_str());
    }
    return 0;
  }
  if (o.name.empty()) return usage(fmt::format("kiln artifacts {} needs an artifact NAME", o.action));
  if (o.action == "show") {
    auto a = (*store)->get(o.name);
    if (!a) return report(a.error());
    if (!*a) return report(Error{Errc::not_found, fmt::format("no artifact {}; `kiln artifacts list` shows them", o.name)});
    ServeBase base = serve_base(state_dir, false);
    json j = artifact_json(**a, base.url);
    if (o.json) {
      std::printf("%s\n", dump_json(j).c_str());
      return 0;
    }
    std::printf("%s  share: %s%s  %s\n", o.name.c_str(), j["share"].get<std::string>().c_str(),
                (*a)->expires_at ? fmt::format(" until {}{}", *(*a)->expires_at, (*a)->expired ? " (expired)" : "").c_str()
                                 : "",
                j["url"].get<std::string>().c_str());
    for (const auto& v : (*a)->versions)
      std::printf("  v%-4d %s  %llu files, %llu bytes  from %s  %s\n", v.number, v.created_at.c_str(),
                  static_cast<unsigned long long>(v.files), static_cast<unsigned long long>(v.bytes),
                  v.source_path.c_str(), v.trace_id.c_str());
    for (const auto& i : (*a)->invites)
      std::printf("  invite %s%s%s\n", i.name.c_str(), i.revoked ? " (revoked)" : i.expired ? " (expired)" : "",
                  i.expires_at && !i.revoked ? fmt::format(" until {}", *i.expires_at).c_str() : "");
    return 0;
  }
  if (o.action == "share") {
    auto share = parse_share_option(o.share);
    if (!share) return report(share.error());
    art::ShareRequest req;
    req.name = o.name;
    req.share = *share;
    req.invite_names = o.invites;
    req.revoke = o.revoke;
    req.expires_in_s = o.expires_in_s;
    req.invite_expires_in_s = o.invite_expires_in_s;
    if (o.password_stdin) {
      auto pw = read_password();
      if (!pw) return report(pw.error());
      req.password = std::move(*pw);
    }
    auto r = (*store)->share(req);
    if (!r) return report(r.error());
    ServeBase base = serve_base(state_dir, !r->new_invites.empty());
    json links = invite_links(r->new_invites, o.name, base.url);
    if (o.json) {
      json j = artifact_json(r->artifact, base.url);
      j["new_invites"] = links;
      std::printf("%s\n", dump_json(j).c_str());
      return 0;
    }
    std::fprintf(stderr, "kiln: %s is shared: %s%s\n", o.name.c_str(), art::to_string(r->artifact.share),
                 r->artifact.expires_at ? (" until " + *r->artifact.expires_at).c_str() : "");
    std::printf("%s\n", artifact_url(base.url, o.name).c_str());
    print_invite_links(links);
    return 0;
  }
  if (o.action == "rm") {
    auto r = server::unpublish_artifact(**store, o.name, o.version, o.delete_data);
    if (!r) return report(r.error());
    std::string nums;
    for (int v : (*r)["removed"]) nums += fmt::format("{}v{}", nums.empty() ? "" : ", ", v);
    std::fprintf(stderr, "kiln: removed %s%s%s\n", o.name.c_str(), nums.empty() ? "" : " ", nums.c_str());
    if (r->contains("app")) std::fprintf(stderr, "kiln: %s\n", (*r)["app"].value("note", "").c_str());
    return 0;
  }
  return usage("kiln artifacts needs a subcommand: list, show, share or rm");
}

CLI::App& ArtifactsCommand::configure(CLI::App& app) {
  ArtifactsOptions& o = options_;
  auto* artifacts = app.add_subcommand("artifacts", "List, inspect, share and remove published artifacts");
  artifacts->footer("Exit: 0 ok, 1 not found or failed, 2 usage.");
  list_ = artifacts->add_subcommand("list", "Published artifacts with share mode, versions and URL");
  list_->add_option("--workspace", o.workspace, "Only this workspace (name or id)");
  show_ = artifacts->add_subcommand("show", "One artifact: versions and invites");
  share_ = artifacts->add_subcommand("share", "Change who can see an artifact");
  share_->add_option("--share", o.share, "public, password or invite")
      ->check(CLI::IsMember({"public", "password", "invite"}));
  share_->add_flag("--password-stdin", o.password_stdin, "Read a new password from stdin");
  share_->add_option("--invite", o.invites, "Invite NAME: prints a link of its own (repeatable)");
  share_->add_option("--revoke", o.revoke, "Revoke invite NAME (repeatable)");
  share_->add_option("--expires-in", expires_, "Stop serving after this many seconds (0: remove the expiry)")
      ->check(CLI::Range(std::int64_t(0), kMaxExpiresInS));
  share_->add_option("--invite-expires-in", invite_expires_, "The new invite links stop working after this many seconds")
      ->check(CLI::Range(std::int64_t(1), kMaxExpiresInS));
  rm_ = artifacts->add_subcommand("rm", "Remove an artifact, or one version of it");
  rm_->add_option("--version", version_, "Only this version")->check(CLI::PositiveNumber);
  rm_->add_flag("--delete-data", o.delete_data,
                "For an app removed whole: also delete its data (databases, data folder); kept by default");
  for (auto* sub : {show_, share_, rm_}) sub->add_option("name", o.name, "Artifact name");
  for (auto* sub : {list_, show_, share_}) sub->add_flag("--json", o.json, "Print JSON");
  return *artifacts;
}

int ArtifactsCommand::run(const GlobalOptions& global) {
  ArtifactsOptions& o = options_;
  o.action = list_->parsed() ? "list" : show_->parsed() ? "show" : share_->parsed() ? "share" : rm_->parsed() ? "rm" : "";
  if (share_->count("--expires-in")) o.expires_in_s = expires_;
  if (share_->count("--invite-expires-in")) o.invite_expires_in_s = invite_expires_;
  if (rm_->count("--version")) o.version = version_;
  return manage_artifacts(o, global.state_dir);
}

}  // namespace kiln::cli
