// `kiln checkpoint list|create|diff|restore|rm|export`: the checkpoints of the state directory for
// people and scripts, through the same engine the checkpoint tools use, no server needed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/command.h"

namespace kiln::cli {

// Exit codes: 0 ok, 1 not found or failed (message on stderr), 2 usage.
class CheckpointCommand final : public Command {
 public:
  std::string_view name() const override { return "checkpoint"; }
  CLI::App& configure(CLI::App& app) override;
  // Listing, diffing and exporting only read: a missing state directory stays missing.
  bool creates_state_dir() const override;
  int run(const GlobalOptions& global) override;

 private:
  int list(const std::string& state_dir);
  int create(const std::string& state_dir);
  int diff(const std::string& state_dir);
  int restore(const std::string& state_dir);
  int remove(const std::string& state_dir);
  int export_archive(const std::string& state_dir);

  CLI::App* list_ = nullptr;
  CLI::App* create_ = nullptr;
  CLI::App* diff_ = nullptr;
  CLI::App* restore_ = nullptr;
  CLI::App* rm_ = nullptr;
  CLI::App* export_ = nullptr;

  std::string workspace_;
  std::int64_t limit_ = 20;
  std::string label_;
  std::string from_, to_, path_;
  std::vector<std::string> ids_;    // rm
  std::string id_;                  // restore, export
  std::vector<std::string> paths_;  // restore
  bool dry_run_ = false;
  std::string output_;
  bool force_ = false;
  bool json_ = false;
};

}  // namespace kiln::cli
