// The one `kiln serve` per state directory that outlives MCP sessions: found through
// <state>/serve.json plus a /healthz check, started detached (setsid, double fork) when missing.
#pragma once

#include <optional>
#include <string>

#include "core/error.h"

namespace kiln::server {

// What a running `kiln serve` writes to <state>/serve.json (atomically) once it listens.
struct ServeInfo {
  long pid = 0;
  std::string url;     // "http://127.0.0.1:7700", no trailing slash
  std::string listen;  // the bound HOST:PORT
  std::string started_at;
  std::string state_dir;
};

// The base URL of the `kiln serve` for `state_dir` (no trailing slash; artifacts are at
// URL + "/a/NAME/"), starting one if none answers. The daemon listens on $KILN_SERVE_LISTEN if
// set, else 127.0.0.1:7700, or on a free port when that one belongs to someone else. Waits up to
// 5 s for it to answer, so the URL works when this returns. Safe to call from several processes
// at once (flock on <state>/serve.lock). Blocks; call it off the event loop.
Result<std::string> ensure_serve_running(const std::string& state_dir);

std::optional<ServeInfo> read_serve_info(const std::string& state_dir);
Result<void> write_serve_info(const std::string& state_dir, const ServeInfo& info);
// Removes serve.json if it still names `pid` (a newer server may have replaced it).
void remove_serve_info_if_ours(const std::string& state_dir, long pid);

// GET url/healthz within timeout_ms: true if a kiln serve for `state_dir` answers.
bool serve_answers(const std::string& url, const std::string& state_dir, int timeout_ms);

}  // namespace kiln::server
