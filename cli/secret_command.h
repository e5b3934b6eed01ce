// `kiln secret set|list|rm`: the secrets `kiln run --secret` and the sandbox tools pass into a
// sandbox by name, kept in the state directory (never in argv, logs or traces).
#pragma once

#include <string>

#include "cli/command.h"

namespace CLI {
class App;
}

namespace kiln::cli {

class SecretCommand final : public Command {
 public:
  std::string_view name() const override { return "secret"; }
  CLI::App& configure(CLI::App& app) override;
  int run(const GlobalOptions& global) override;

  // set | rm | list, after parsing.
  std::string action() const;
  const std::string& secret_name() const { return name_; }

 private:
  CLI::App* set_ = nullptr;
  CLI::App* rm_ = nullptr;
  std::string name_;
};

}  // namespace kiln::cli
