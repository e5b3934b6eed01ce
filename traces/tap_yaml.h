// The small part of YAML that TAP diagnostic blocks use (node, tape, node-tap), read without a
// YAML library: a failure's message and location live in these blocks.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::traces::detail {

using YamlFields = std::vector<std::pair<std::string, std::string>>;

// Lines between "---" and "...", indentation kept. Top-level keys map to their decoded scalar
// (plain, quoted or | > block); a nested mapping gives "parent.child" keys and its raw text under
// "parent". Anything it does not understand is skipped, never an error.
YamlFields read_tap_yaml(const std::vector<std::string_view>& lines);

// The value of key, or "" when absent.
std::string_view yaml_field(const YamlFields& fields, std::string_view key);

}  // namespace kiln::traces::detail
