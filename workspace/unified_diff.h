// Unified diffs of two versions of a text, so an edit can show an agent exactly what changed
// in the form every tool (patch, git apply, reviewers) already reads.
#pragma once

#include <string>
#include <string_view>

namespace kiln::workspace {

// "--- a/PATH" / "+++ b/PATH" and @@ hunks with `context` lines around each change; "" when the
// texts are equal. Lines keep their own endings (a CRLF file shows its CRs); a last line without a
// newline is marked "\ No newline at end of file" as diff(1) does.
std::string unified_diff(std::string_view before, std::string_view after, std::string_view path, int context = 3);

}  // namespace kiln::workspace
