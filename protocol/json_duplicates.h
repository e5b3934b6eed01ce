// Objects that repeat a key are read differently by different JSON parsers (nlohmann keeps the
// last, others the first), so `"name":"file_read","name":"sandbox_exec"` could be checked as one
// tool and run as another. The protocol edge notes the first repeated key while parsing.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kiln::protocol {

struct DuplicateKey {
  std::string key;      // the repeated name
  std::string pointer;  // JSON pointer of the object holding it ("" for the top level)
};

// One JSON pointer segment (RFC 6901: ~ as ~0, / as ~1).
std::string json_pointer_segment(std::string_view s);

// json::parse that also reports the first duplicate key. Throws what json::parse throws, so only
// the nlohmann edge of this layer (classify) calls it.
nlohmann::json parse_noting_duplicates(std::string_view text, std::optional<DuplicateKey>& duplicate);

}  // namespace kiln::protocol
