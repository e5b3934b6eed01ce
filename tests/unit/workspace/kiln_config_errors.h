// The kiln.json test files' one way to get the message a config is refused with.
#pragma once

#include <string>
#include <string_view>

#include <doctest/doctest.h>

#include "workspace/kiln_config.h"

namespace kiln::test {

// "(valid)" when the text parses; otherwise the invalid_argument message a person would read.
inline std::string config_error_of(std::string_view text) {
  auto r = server::parse_kiln_config(text);
  if (r) return "(valid)";
  CHECK(r.error().code == Errc::invalid_argument);
  return r.error().message;
}

}  // namespace kiln::test
