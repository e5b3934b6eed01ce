// `kiln artifacts list|show|share|rm`: the published artifacts of the state directory, with the
// same share rules the MCP tools use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"

namespace kiln::cli {

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
  bool delete_data = false;  // rm of an app: also delete its data (whole artifact only)
  bool json = false;
};

// Exit codes: 0 ok, 1 not found or failed (message on stderr), 2 usage. URLs go to stdout.
int manage_artifacts(const ArtifactsOptions& options, const std::string& state_dir);

class ArtifactsCommand final : public Command {
 public:
  std::string_view name() const override { return "artifacts"; }
  CLI::App& configure(CLI::App& app) override;
  int run(const GlobalOptions& global) override;
  const ArtifactsOptions& options() const { return options_; }  // complete after run() began

 private:
  CLI::App* list_ = nullptr;
  CLI::App* show_ = nullptr;
  CLI::App* share_ = nullptr;
  CLI::App* rm_ = nullptr;
  ArtifactsOptions options_;
  std::int64_t expires_ = 0, invite_expires_ = 0;
  int version_ = 0;
};

}  // namespace kiln::cli
