// Decoding and dispatching control requests; the supervisor does the work.
#include "serve/app_control.h"

#include <sodium.h>

#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "serve/app_supervisor.h"
#include "serve/secret_page.h"

namespace kiln::server::apps {
namespace {

using nlohmann::json;

http::Response json_response(int status, const json& j) {
  http::Response r;
  r.status = status;
  r.body = j.dump() + "\n";
  r.headers.emplace_back("Content-Type", "application/json");
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

const char* code_name(Errc c) {
  switch (c) {
    case Errc::not_found: return "not_found";
    case Errc::invalid_argument: return "invalid_argument";
    case Errc::conflict: return "conflict";
    default: return "error";
  }
}

int status_of(Errc c) { return c == Errc::not_found ? 404 : c == Errc::invalid_argument ? 400 : c == Errc::conflict ? 409 : 500; }

bool token_matches(const std::string& header, const std::string& token) {
  constexpr std::string_view bearer = "Bearer ";
  if (token.empty() || header.size() != bearer.size() + token.size() || !header.starts_with(bearer)) return false;
  return sodium_memcmp(header.data() + bearer.size(), token.data(), token.size()) == 0;
}

}  // namespace

bool from_this_machine(const http::Request& r) {
  const bool relayed = r.header("x-forwarded-for") || r.header("forwarded") || r.header("x-real-ip") ||
                       r.header("via");
  return r.client_is_local && !relayed;
}

http::Endpoint control_endpoint(Supervisor& supervisor, std::string token, secrets::SecretRequests* secret_pages) {
  http::Endpoint e;
  e.path = kControlPath;
  e.body_limit = 64 * 1024;
  e.screen = [token](const http::Request& r) -> std::optional<http::Response> {
    if (!from_this_machine(r))
      return json_response(403, {{"error", "the app control API answers this machine only, never through a proxy"}});
    if (r.method != "POST") return json_response(405, {{"error", "POST a JSON {\"op\": ...}"}});
    if (!token_matches(r.authorization, token))
      return json_response(401, {{"error", "a bearer token is required: kiln serve --print-token prints it"}});
    return std::nullopt;
  };
  e.handler = [&supervisor, secret_pages](http::Request r) -> http::Response {
    auto req = json::parse(r.body, nullptr, false);
    if (!req.is_object() || !req.contains("op") || !req["op"].is_string())
      return json_response(400, {{"error", "the body must be a JSON object with \"op\""}});
    const std::string op = req["op"];
    if (op == "list") return json_response(200, supervisor.list());
    if (op == "secret_request") {
      if (!secret_pages) return json_response(501, {{"error", "this kiln serve has no secret pages"}});
      const json& n = req.contains("name") ? req["name"] : json();
      const json& by = req.contains("asked_by") ? req["asked_by"] : json();
      auto issued = secret_pages->issue(n.is_string() ? n.get<std::string>() : std::string(),
                                        by.is_string() ? by.get<std::string>() : std::string());
      if (!issued) {
        const int status = issued.error().code == Errc::unsupported ? 503 : status_of(issued.error().code);
        return json_response(status, {{"error", issued.error().message}});
      }
      return json_response(200, {{"url", issued->url}, {"expires_in_s", issued->expires_in_s}, {"name", issued->name}});
    }
    const std::string name = req.value("artifact", "");
    if (name.empty()) return json_response(400, {{"error", fmt::format("op {} needs \"artifact\"", op)}});
    auto answer = [](const Result<json>& res) {
      return res ? json_response(200, *res) : json_response(status_of(res.error().code), {{"error", res.error().message}});
    };
    if (op == "status") return answer(supervisor.status(name));
    if (op == "stop") return answer(supervisor.stop(name, req.value("delete_data", false)));
    std::function<Result<json>()> work;
    if (op == "deploy") {
      work = [&supervisor, name] { return supervisor.deploy(name); };
    } else if (op == "restart") {
      work = [&supervisor, name] { return supervisor.restart(name); };
    } else if (op == "export") {
      work = [&supervisor, name] { return supervisor.export_data(name); };
    } else if (op == "schedule_run") {
      const std::string schedule = req.value("name", "");
      if (schedule.empty()) return json_response(400, {{"error", "op schedule_run needs \"name\": the schedule"}});
      work = [&supervisor, name, schedule] { return supervisor.run_schedule(name, schedule); };
    } else {
      return json_response(400, {{"error", fmt::format("unknown op {}: one of list, status, deploy, restart, "
                                                       "schedule_run, stop, export, secret_request", op)}});
    }
    // Long work: the answer streams when it is done, from a thread of its own.
    http::Response streamed;
    streamed.headers.emplace_back("Content-Type", "application/json");
    streamed.headers.emplace_back("Cache-Control", "no-store");
    streamed.stream_start = [work = std::move(work)](std::shared_ptr<http::BodyStream> out) {
      std::thread([work, out] {
        auto res = work();
        json j = res ? *res : json{{"error", res.error().message}, {"code", code_name(res.error().code)}};
        out->write(j.dump() + "\n");
        out->end();
      }).detach();
    };
    return streamed;
  };
  return e;
}

}  // namespace kiln::server::apps
