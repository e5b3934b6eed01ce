// The caller's side of kiln serve's secret pages (issue 20): a tool that lacks a secret asks for a
// one-time page and hands its URL to the person (URL-mode elicitation); the value never comes back.
#pragma once

#include <string>

#include "core/error.h"

namespace kiln::server {

struct SecretPageRequest {
  std::string url;       // http://HOST:PORT/_kiln/secret/<64 hex>: for the person's browser only
  int expires_in_s = 0;  // 900: the page takes one value within this long, then it is gone
};

// Asks the kiln serve of `state_dir` (started if it does not run: ensure_serve_running) for a
// one-time page on which the person types the value of secret `name`. `token` is the state
// directory's bearer token: server::ensure_default_token(state_dir) (mcp/http/token.h), as
// tools/app_control.cpp's app_control gets it. Blocks up to timeout_ms; call it off the event loop.
//
// The page stores the value with sandbox::SecretStore(state_dir).set(name, ...), so after the
// person submits it, SecretStore::resolve finds it (the environment of the server still wins).
// Nothing tells the caller when that happened: poll SecretStore(state_dir).names(), or ask the
// person to confirm. The URL carries the page's only credential: show it to the person (an
// elicitation), never put it in a log, a trace or a tool result the model reads.
//
// Errors: invalid_argument for a name that is not a secret name (sandbox::valid_secret_name),
// with the server's sentence; io when kiln serve cannot be started or does not answer in time,
// or answers without a URL.
Result<SecretPageRequest> request_secret_page(const std::string& state_dir, const std::string& token,
                                              const std::string& name, int timeout_ms,
                                              const std::string& asked_by = {});

}  // namespace kiln::server
