// The `kiln publish` and `kiln artifacts` subcommands. They open the stores in the state directory
// themselves (WAL lets them write while a server reads) and start `kiln serve` only when they hand
// out a URL that must work: a publish, or new invite links.
#include "cli/publish.h"

#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "mcp/principal.h"
#include "tools/publish.h"
#include "workspace/root.h"
#include "workspace/state_store.h"

namespace kiln::server {
namespace {

using nlohmann::json;
namespace art = kiln::artifacts;
namespace fs = std::filesystem;

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

int report(const Error& e) {
  std::fprintf(stderr, "kiln: %s\n", e.message.c_str());
  return e.code == Errc::invalid_argument ? kExitUsage : kExitError;
}

int usage(const std::string& message) {
  std::fprintf(stderr, "kiln: %s\n", message.c_str());
  return kExitUsage;
}

// One line from stdin; on a terminal it is asked for without echo. Never logged or printed.
Result<std::string> read_password() {
  const bool tty = ::isatty(STDIN_FILENO);
  termios old{};
  if (tty) {
    std::fprintf(stderr, "Password: ");
    std::fflush(stderr);
    ::tcgetattr(STDIN_FILENO, &old);
    termios quiet = old;
    quiet.c_lflag &= ~tcflag_t(ECHO);
    ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
  }
  std::string line;
  std::getline(std::cin, line);
  if (tty) {
    ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
    std::fprintf(stderr, "\n");
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.empty()) return fail(Errc::invalid_argument, "--password-stdin read an empty password");
  return line;
}

Result<std::optional<art::Share>> parse_share_option(const std::string& s) {
  if (s.empty()) return std::optional<art::Share>();
  auto share = art::parse_share(s);
  if (!share) return fail(Errc::invalid_argument, fmt::format("--share {}: use public, password or invite", s));
  return std::optional<art::Share>(*share);
}

void print_links(const json& invites) {
  for (const auto& i : invites)
    std::printf("%s\t%s\n", i["name"].get<std::string>().c_str(), i["url"].get<std::string>().c_str());
}

std::string dump(const json& j) { return j.dump(2, ' ', false, json::error_handler_t::replace); }

}  // namespace

int publish_command(const PublishOptions& o, const std::string& state_dir) {
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
  auto store = art::ArtifactStore::open(state_dir);
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
  auto p = publish_traced(**traces, **store, std::move(req), json{{"name", "kiln-cli"}, {"version", KILN_VERSION}},
                          local_principal());
  if (!p) return report(p.error());
  ServeBase base = serve_base(state_dir, true);
  json out = publish_result_json(*p, base);
  const auto& r = p->result;
  if (o.json) {
    std::printf("%s\n", dump(out).c_str());
  } else {
    std::fprintf(stderr, "kiln: published %s v%d (%llu files, %llu bytes; %llu new) share: %s, trace %s\n",
                 r.artifact.name.c_str(), r.version.number, static_cast<unsigned long long>(r.version.files),
                 static_cast<unsigned long long>(r.version.bytes), static_cast<unsigned long long>(r.new_blobs),
                 art::to_string(r.artifact.share), p->trace_id.c_str());
    if (r.skipped_symlinks)
      std::fprintf(stderr, "kiln: %llu symlink(s) skipped\n", static_cast<unsigned long long>(r.skipped_symlinks));
    std::printf("%s\n", out["url"].get<std::string>().c_str());
    print_links(out["invites"]);
  }
  if (!base.error.empty()) std::fprintf(stderr, "kiln: no server answers these URLs yet: %s\n", base.error.c_str());
  return 0;
}

int artifacts_command(const ArtifactsOptions& o, const std::string& state_dir) {
  struct stat st {};
  const bool exists = ::stat((state_dir + "/artifacts.db").c_str(), &st) == 0;
  if (!exists && (o.action == "list" || o.action == "show")) {
    // Reading must not create a state directory.
    if (o.action == "show") return report(Error{Errc::not_found, fmt::format("no artifact {} in {}", o.name, state_dir)});
    if (o.json) std::printf("[]\n");
    return 0;
  }
  auto store = art::ArtifactStore::open(state_dir);
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
      std::printf("%s\n", dump(arr).c_str());
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
      std::printf("%s\n", dump(j).c_str());
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
      std::printf("%s\n", dump(j).c_str());
      return 0;
    }
    std::fprintf(stderr, "kiln: %s is shared: %s%s\n", o.name.c_str(), art::to_string(r->artifact.share),
                 r->artifact.expires_at ? (" until " + *r->artifact.expires_at).c_str() : "");
    std::printf("%s\n", artifact_url(base.url, o.name).c_str());
    print_links(links);
    return 0;
  }
  if (o.action == "rm") {
    auto r = (*store)->unpublish(o.name, o.version);
    if (!r) return report(r.error());
    std::string nums;
    for (int v : *r) nums += fmt::format("{}v{}", nums.empty() ? "" : ", ", v);
    std::fprintf(stderr, "kiln: removed %s%s%s\n", o.name.c_str(), nums.empty() ? "" : " ", nums.c_str());
    return 0;
  }
  return usage("kiln artifacts needs a subcommand: list, show, share or rm");
}

PublishCommands::PublishCommands(CLI::App& app, std::string& state_dir) {
  publish_ = app.add_subcommand("publish", "Publish a folder or file at a URL served by `kiln serve` (started if needed)");
  publish_->add_option("path", pub_.path, "Folder or file to publish (default: kiln.json's publish.path)");
  publish_->add_option("--name", pub_.name, "Artifact name in the URL /a/NAME/ (default: the path's last component)");
  publish_->add_option("--share", pub_.share, "public, password or invite (default: keep; public when new)")
      ->check(CLI::IsMember({"public", "password", "invite"}));
  publish_->add_flag("--password-stdin", pub_.password_stdin, "Read the password from stdin (share password)");
  publish_->add_option("--invite", pub_.invites, "Invite NAME: prints a link of its own (repeatable)");
  publish_->add_option("--expires-in", pub_expires_, "Stop serving after this many seconds (0: never)")
      ->check(CLI::Range(std::int64_t(0), std::int64_t(10) * 365 * 24 * 3600));
  publish_->add_option("--invite-expires-in", pub_invite_expires_, "The new invite links stop working after this many seconds")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(10) * 365 * 24 * 3600));
  publish_->add_option("--workspace,-w", pub_.workspace, "Workspace folder (default: the current directory)");
  publish_->add_flag("--json", pub_.json, "Print the result as JSON");
  publish_->add_option("--state-dir", state_dir, "State directory");

  artifacts_ = app.add_subcommand("artifacts", "List, inspect, share and remove published artifacts");
  artifacts_->add_option("--state-dir", state_dir, "State directory");
  list_ = artifacts_->add_subcommand("list", "Published artifacts with share mode, versions and URL");
  list_->add_option("--workspace", art_.workspace, "Only this workspace (name or id)");
  show_ = artifacts_->add_subcommand("show", "One artifact: versions and invites");
  share_ = artifacts_->add_subcommand("share", "Change who can see an artifact");
  share_->add_option("--share", art_.share, "public, password or invite")
      ->check(CLI::IsMember({"public", "password", "invite"}));
  share_->add_flag("--password-stdin", art_.password_stdin, "Read a new password from stdin");
  share_->add_option("--invite", art_.invites, "Invite NAME: prints a link of its own (repeatable)");
  share_->add_option("--revoke", art_.revoke, "Revoke invite NAME (repeatable)");
  share_->add_option("--expires-in", art_expires_, "Stop serving after this many seconds (0: remove the expiry)")
      ->check(CLI::Range(std::int64_t(0), std::int64_t(10) * 365 * 24 * 3600));
  share_->add_option("--invite-expires-in", art_invite_expires_, "The new invite links stop working after this many seconds")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(10) * 365 * 24 * 3600));
  rm_ = artifacts_->add_subcommand("rm", "Remove an artifact, or one version of it");
  rm_->add_option("--version", version_, "Only this version")->check(CLI::PositiveNumber);
  for (auto* sub : {show_, share_, rm_}) sub->add_option("name", art_.name, "Artifact name");
  for (auto* sub : {list_, show_, share_}) sub->add_flag("--json", art_.json, "Print JSON");
  for (auto* sub : {list_, show_, share_, rm_}) sub->add_option("--state-dir", state_dir, "State directory");
}

bool PublishCommands::parsed() const { return publish_->parsed() || artifacts_->parsed(); }

int PublishCommands::run(const std::string& state_dir) {
  if (publish_->parsed()) {
    if (publish_->count("--expires-in")) pub_.expires_in_s = pub_expires_;
    if (publish_->count("--invite-expires-in")) pub_.invite_expires_in_s = pub_invite_expires_;
    return publish_command(pub_, state_dir);
  }
  art_.action = list_->parsed() ? "list" : show_->parsed() ? "show" : share_->parsed() ? "share" : rm_->parsed() ? "rm" : "";
  if (share_->count("--expires-in")) art_.expires_in_s = art_expires_;
  if (share_->count("--invite-expires-in")) art_.invite_expires_in_s = art_invite_expires_;
  if (rm_->count("--version")) art_.version = version_;
  return artifacts_command(art_, state_dir);
}

}  // namespace kiln::server
