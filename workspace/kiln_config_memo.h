// kiln.json parsed once per distinct text: tool calls read the file on every call (it may change
// at any time), but parsing and validating it again, with the schema's regex patterns compiled
// anew, was a tenth of the server's work for a short sandbox_exec.
#pragma once

#include <string_view>

#include "workspace/kiln_config.h"

namespace kiln::server {

// parse_kiln_config's answer for `text`, from a small process-wide memo keyed by the whole text
// (so an edited file is parsed again, whatever its timestamps say). Thread-safe.
Result<KilnConfig> parse_kiln_config_memo(std::string_view text);

}  // namespace kiln::server
