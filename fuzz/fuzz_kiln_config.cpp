// Fuzzes kiln.json parsing and validation (workspace/kiln_config.*): never throws, errors say
// "kiln.json: ...", and whatever is accepted keeps the promises verify and publish rely on.
#include <set>

#include "fuzz/fuzz_support.h"
#include "workspace/kiln_config.h"

using kiln::fuzz::violated;

namespace {

bool escapes(const std::string& p) {
  if (p.starts_with('/') || p.find('\0') != std::string::npos) return true;
  std::string_view s = p;
  while (!s.empty()) {
    auto slash = s.find('/');
    if (s.substr(0, slash) == "..") return true;
    if (slash == std::string_view::npos) break;
    s.remove_prefix(slash + 1);
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = kiln::server::parse_kiln_config(text);
  if (!r) {
    if (!r.error().message.starts_with("kiln.json: ")) violated("error without the kiln.json: prefix", r.error().message);
    return 0;
  }
  std::set<std::string> names;
  for (const auto& c : r->checks) {
    if (c.name.empty() || !names.insert(c.name).second) violated("empty or duplicate check name", c.name);
    if (c.argv.empty()) violated("a check with nothing to run", c.name);
    if (escapes(c.cwd)) violated("check cwd leaves the workspace", c.cwd);
    if (c.report) {
      if (c.report->format != "junit" && c.report->format != "tap") violated("report format", c.report->format);
      if (escapes(c.report->path)) violated("report path leaves the workspace", c.report->path);
    }
    if (c.timeout_s && !(*c.timeout_s > 0)) violated("non-positive timeout accepted", c.name);
  }
  if (!r->publish.path.empty() && escapes(r->publish.path)) violated("publish path leaves the workspace", r->publish.path);
  const auto& s = r->publish.share;
  if (!(s.empty() || s == "public" || s == "password" || s == "invite")) violated("publish share", s);
  if (!r->sandbox.is_object()) violated("sandbox is not an object");
  return 0;
}
