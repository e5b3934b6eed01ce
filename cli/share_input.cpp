// The shared share options of cli/share_input.h.
#include "cli/share_input.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/terminal_input.h"

namespace kiln::cli {

Result<std::string> read_password() {
  std::string line;
  if (::isatty(STDIN_FILENO)) line = read_hidden_line("Password: ");
  else std::getline(std::cin, line);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.empty()) return fail(Errc::invalid_argument, "--password-stdin read an empty password");
  return line;
}

Result<std::optional<artifacts::Share>> parse_share_option(const std::string& s) {
  if (s.empty()) return std::optional<artifacts::Share>();
  auto share = artifacts::parse_share(s);
  if (!share) return fail(Errc::invalid_argument, fmt::format("--share {}: use public, password or invite", s));
  return std::optional<artifacts::Share>(*share);
}

void print_invite_links(const nlohmann::json& invites) {
  for (const auto& i : invites)
    std::printf("%s\t%s\n", i["name"].get<std::string>().c_str(), i["url"].get<std::string>().c_str());
}

}  // namespace kiln::cli
