// The server-wide sandbox ceilings as command-line options, shared by `kiln mcp` and
// `kiln serve --mcp` so both spell and explain them the same way.
#pragma once

#include <CLI/CLI.hpp>

#include "sandbox/egress/egress_policy.h"
#include "sandbox/host_budget.h"

namespace kiln::cli {

inline void add_ceiling_options(CLI::App& cmd, sandbox::HostCeilings& c) {
  cmd.add_option("--max-sandboxes", c.max_sandboxes, "Most live sandboxes at once (default 128)")
      ->check(CLI::Range(std::size_t(1), std::size_t(100000)));
  cmd.add_option("--max-sandbox-memory-mb", c.memory_mb,
                 "Most memory all live sandboxes' limits may add up to, in MiB (default: this machine's RAM)")
      ->check(CLI::Range(std::uint64_t(64), std::uint64_t(1) << 40));
  cmd.add_option("--max-sandbox-pids", c.pids,
                 "Most processes all live sandboxes' limits may add up to (default: half the kernel's thread limit)")
      ->check(CLI::Range(std::uint64_t(16), std::uint64_t(1) << 32));
  cmd.add_option("--disk-reserve-mb", c.disk_reserve_mb,
                 "Free space to keep on the workspace's and the state's filesystems; runs are refused or stopped "
                 "below it (default: 2048 or 5% of the filesystem, whichever is less)")
      ->check(CLI::Range(std::uint64_t(1), std::uint64_t(1) << 40));
  cmd.add_option("--network-allow", c.network_allow_file,
                 "A JSON allowlist file ({\"allow\": [...], \"deny\": [...], \"allow_private\": false}): the most any "
                 "sandbox may reach. Requests can narrow it, never widen it; network \"host\" is refused")
      ->check(CLI::Validator(
          [](std::string& path) -> std::string {
            auto p = egress::load_policy_file(path);
            return p ? std::string() : p.error().message;
          },
          "FILE"));
}

}  // namespace kiln::cli
