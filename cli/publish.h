// `kiln publish PATH` and `kiln artifacts list|show|share|rm`: the artifact store from the command
// line, the same publish (with its trace) and share rules the MCP tools use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace kiln::server {

struct PublishOptions {
  std::string path;
  std::string name;
  std::string share;      // public | password | invite; empty: keep (public when new)
  std::string workspace;  // default: the current directory, if PATH is inside it
  bool password_stdin = false;
  std::vector<std::string> invites;
  std::optional<std::int64_t> expires_in_s;
  std::optional<std::int64_t> invite_expires_in_s;  // of the invites created by this command
  bool json = false;
};

struct ArtifactsOptions {
  std::string action;  // list | show | share | rm
  std::string name;
  std::string workspace;  // list: only this workspace (name or id)
  std::string share;
  bool password_stdin = false;
  std::vector<std::string> invites, revoke;
  std::optional<std::int64_t> expires_in_s;
  std::optional<std::int64_t> invite_expires_in_s;  // of the invites created by this command
  std::optional<int> version;
  bool json = false;
};

// Exit codes: 0 ok, 1 failed (message on stderr), 2 usage. URLs go to stdout, one per line.
int publish_command(const PublishOptions& options, const std::string& state_dir);
int artifacts_command(const ArtifactsOptions& options, const std::string& state_dir);

// Declares `kiln publish` and `kiln artifacts ...` on `app` (before parsing; the options live in
// this object, so it must outlive the parse) and runs the one given (after parsing). Each also
// accepts --state-dir into main's `state_dir`.
class PublishCommands {
 public:
  PublishCommands(CLI::App& app, std::string& state_dir);
  PublishCommands(const PublishCommands&) = delete;
  PublishCommands& operator=(const PublishCommands&) = delete;

  bool parsed() const;
  int run(const std::string& state_dir);

 private:
  CLI::App* publish_ = nullptr;
  CLI::App* artifacts_ = nullptr;
  CLI::App* list_ = nullptr;
  CLI::App* show_ = nullptr;
  CLI::App* share_ = nullptr;
  CLI::App* rm_ = nullptr;
  PublishOptions pub_;
  ArtifactsOptions art_;
  std::int64_t pub_expires_ = 0, art_expires_ = 0, pub_invite_expires_ = 0, art_invite_expires_ = 0;
  int version_ = 0;
};

}  // namespace kiln::server
