// `kiln publish [PATH]`: a folder or file at a URL that outlives the session, through the same
// publish (with its trace) and share rules the MCP tools use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"

namespace kiln::cli {

struct PublishOptions {
  std::string path;
  std::string name;
  std::string share;      // public | password | invite; empty: keep (public when new)
  std::string workspace;  // default: the current directory, if PATH is inside it
  bool password_stdin = false;
  std::vector<std::string> invites;
  std::optional<std::int64_t> expires_in_s;
  std::optional<std::int64_t> invite_expires_in_s;  // of the invites created by this command
  bool app = false;  // --app: publish as an app (kiln.json "app"), deployed at once
  bool json = false;
};

// Exit codes: 0 ok, 1 failed (message on stderr), 2 usage. URLs go to stdout, one per line.
int publish_path(const PublishOptions& options, const std::string& state_dir);

class PublishCommand final : public Command {
 public:
  std::string_view name() const override { return "publish"; }
  CLI::App& configure(CLI::App& app) override;
  int run(const GlobalOptions& global) override;
  const PublishOptions& options() const { return options_; }  // complete after run() began

 private:
  CLI::App* app_ = nullptr;
  PublishOptions options_;
  std::int64_t expires_ = 0, invite_expires_ = 0;
};

}  // namespace kiln::cli
