// `kiln workspace import FILE`: a tarball (a checkpoint export, or any tar or tar.zst) unpacked
// safely into a new folder, registered as a workspace and given a first checkpoint.
#pragma once

#include <string>

#include "cli/command.h"

namespace kiln::cli {

// Exit codes: 0 ok, 1 failed or refused (message on stderr), 2 usage.
class WorkspaceCommand final : public Command {
 public:
  std::string_view name() const override { return "workspace"; }
  CLI::App& configure(CLI::App& app) override;
  int run(const GlobalOptions& global) override;

 private:
  int import_archive(const std::string& state_dir);

  CLI::App* import_ = nullptr;
  std::string file_;
  std::string into_;
  std::string name_;
  bool json_ = false;
};

}  // namespace kiln::cli
