// `kiln secret`: values come from stdin (hidden on a terminal), never from argv, where `ps` and
// the shell's history would show them.
#include "cli/secret_command.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <iterator>

#include <CLI/CLI.hpp>

#include "cli/terminal_input.h"
#include "sandbox/secrets.h"

namespace kiln::cli {

namespace {

int list(const sandbox::SecretStore& store) {
  for (const auto& n : store.names()) std::printf("%s\n", n.c_str());
  return 0;
}

int remove(sandbox::SecretStore& store, const std::string& name) {
  auto r = store.remove(name);
  if (!r) {
    std::fprintf(stderr, "kiln secret: %s\n", r.error().message.c_str());
    return 1;
  }
  std::fprintf(stderr, "%s %s\n", *r ? "removed" : "no secret named", name.c_str());
  return *r ? 0 : 1;
}

int set(sandbox::SecretStore& store, const std::string& name) {
  std::string value;
  if (::isatty(STDIN_FILENO)) {
    value = read_hidden_line("Value for " + name + " (input hidden, end with Enter): ");
  } else {
    value.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    while (!value.empty() && (value.back() == '\n' || value.back() == '\r')) value.pop_back();
  }
  if (value.empty()) {
    std::fprintf(stderr, "kiln secret: empty value; nothing stored\n");
    return 1;
  }
  auto r = store.set(name, value);
  if (!r) {
    std::fprintf(stderr, "kiln secret: %s\n", r.error().message.c_str());
    return 1;
  }
  std::fprintf(stderr, "stored secret %s (%zu bytes, mode 0600)\n", name.c_str(), value.size());
  return 0;
}

}  // namespace

CLI::App& SecretCommand::configure(CLI::App& app) {
  auto* secret = app.add_subcommand("secret", "Manage secrets passed into sandboxes by name");
  secret->footer(
      "A secret reaches a sandbox only when a run asks for it by name (kiln run --secret NAME, or a sandbox "
      "tool's \"secrets\" argument), as an environment variable. Exit: 0 ok, 1 failed or no such secret.");
  secret->require_subcommand(1);
  set_ = secret->add_subcommand("set", "Store NAME's value, read from stdin (never echoed)");
  set_->add_option("name", name_, "Secret name (an environment variable name)")->required();
  rm_ = secret->add_subcommand("rm", "Remove a stored secret");
  rm_->add_option("name", name_, "Secret name")->required();
  secret->add_subcommand("list", "List stored secret names (never values)");
  return *secret;
}

std::string SecretCommand::action() const { return set_->parsed() ? "set" : rm_->parsed() ? "rm" : "list"; }

int SecretCommand::run(const GlobalOptions& global) {
  if (!state_store_opens(global.state_dir)) return 1;
  sandbox::SecretStore store(global.state_dir);
  const std::string a = action();
  if (a == "list") return list(store);
  if (a == "rm") return remove(store, name_);
  return set(store, name_);
}

}  // namespace kiln::cli
