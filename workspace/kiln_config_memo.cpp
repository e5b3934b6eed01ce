// The memo behind parse_kiln_config_memo: the last few texts and what they parsed to.
#include "workspace/kiln_config_memo.h"

#include <deque>
#include <mutex>
#include <string>
#include <utility>

namespace kiln::server {

namespace {

// A server sees a handful of workspaces; each holds one kiln.json at a time. Real files are a few
// KiB; a larger one (up to the 1 MiB parse_kiln_config accepts) is parsed each time rather than
// kept, so the memo stays small whatever a workspace holds.
constexpr std::size_t kEntries = 16;
constexpr std::size_t kMaxKeptText = 64 * 1024;

struct Memo {
  std::mutex mu;
  std::deque<std::pair<std::string, Result<KilnConfig>>> entries;  // newest first
};

Memo& memo() {
  static Memo m;
  return m;
}

}  // namespace

Result<KilnConfig> parse_kiln_config_memo(std::string_view text) {
  if (text.size() > kMaxKeptText) return parse_kiln_config(text);
  Memo& m = memo();
  {
    std::lock_guard lock(m.mu);
    for (const auto& [seen, parsed] : m.entries)
      if (seen == text) return parsed;
  }
  auto parsed = parse_kiln_config(text);
  std::lock_guard lock(m.mu);
  m.entries.emplace_front(std::string(text), parsed);
  if (m.entries.size() > kEntries) m.entries.pop_back();
  return parsed;
}

}  // namespace kiln::server
