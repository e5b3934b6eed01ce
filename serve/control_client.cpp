// POST /_kiln/apps over the blocking client; maps the server's status codes onto Errc so a tool
// can say "not an app" apart from "kiln serve is not answering".
#include "serve/control_client.h"

#include <fmt/format.h>

#include "serve/blocking_http.h"
#include "serve/daemon.h"

namespace kiln::server {

Result<nlohmann::json> call_serve_control(const std::string& state_dir, const std::string& token,
                                          const nlohmann::json& request, int timeout_ms) {
  auto url = ensure_serve_running(state_dir);
  if (!url) return std::unexpected(url.error());
  BlockingRequest req;
  req.method = "POST";
  req.path = "/_kiln/apps";
  req.headers = {{"Authorization", "Bearer " + token}, {"Content-Type", "application/json"}};
  req.body = request.dump();
  req.timeout_ms = timeout_ms;
  req.max_body = kMaxControlAnswer;
  const std::string op = request.value("op", "?");
  auto resp = blocking_http(*url, req);
  if (!resp) {
    return fail(Errc::io, fmt::format("kiln serve at {} gave no answer to the app control call \"{}\" within {} s; "
                                      "see its log (serve.log in the state directory)",
                                      *url, op, (timeout_ms + 999) / 1000));
  }
  auto body = nlohmann::json::parse(resp->body, nullptr, false);
  if (resp->status == 200) {
    if (body.is_discarded() || !body.is_object())
      return fail(Errc::io, fmt::format("kiln serve answered the app control call \"{}\" with something that is not "
                                        "a JSON object",
                                        op));
    return body;
  }
  std::string message = body.is_object() && body.contains("error") && body["error"].is_string()
                            ? body["error"].get<std::string>()
                            : fmt::format("kiln serve answered the app control call \"{}\" with HTTP {}", op, resp->status);
  const Errc code = resp->status == 404 ? Errc::not_found : resp->status == 400 ? Errc::invalid_argument : Errc::io;
  return fail(code, std::move(message));
}

}  // namespace kiln::server
