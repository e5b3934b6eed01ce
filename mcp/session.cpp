// The MCP session: lifecycle, the method table, exactly-one-reply bookkeeping, cancellation,
// progress, logging and server-to-client requests, for legacy requests (after initialize) and
// modern ones (2026-07-28 _meta, served statelessly; subscriptions/listen lives here too). Tool
// and resource logic lives in methods_*.cpp.
#include "mcp/session.h"

#include <atomic>
#include <condition_variable>
#include <limits>
#include <map>
#include <mutex>
#include <set>

#include <spdlog/spdlog.h>

#include "core/quote.h"
#include "protocol/errors.h"
#include "protocol/jsonrpc.h"
#include "protocol/mcp_era.h"
#include "protocol/mcp_params.h"
#include "protocol/mcp_version.h"
#include "mcp/logging.h"
#include "mcp/methods.h"
#include "mcp/principal.h"
#include "mcp/request_runner.h"
#include "mcp/server_identity.h"
#include "mcp/workspace_opening.h"
#include "workspace/state_store.h"

namespace kiln::server {

using nlohmann::json;
namespace proto = kiln::protocol;

namespace {

// An error's `data` with every string in it quoted through bounded(), however deep.
json bounded_data(const json& data) {
  if (data.is_string()) return bounded(data.get_ref<const std::string&>());
  if (!data.is_structured()) return data;
  json out = data;
  for (auto& v : out) v = bounded_data(v);
  return out;
}

// One request being served. `mu` orders progress notifications before the reply and stops
// anything from being sent after it (or after a cancellation).
struct InFlight {
  json id;
  std::string method;
  std::optional<json> progress_token;
  std::stop_source stop;
  std::mutex mu;
  bool finished = false;
  bool cancelled = false;
  double last_progress = -std::numeric_limits<double>::infinity();
  // A modern request: its own capabilities and log level (-1: it asked for no log messages).
  bool modern = false;
  json client_capabilities = json::object();
  int log_rank = -1;
  // subscriptions/listen: open until cancelled or the session ends; these URIs' updates go to it.
  bool listener = false;
  std::set<std::string> listen_uris;
  std::set<std::string> listen_tasks;  // task ids whose changes it hears (the tasks extension)
  std::unique_ptr<std::stop_callback<std::function<void()>>> on_stop;
};

// Which era's requests a method belongs to.
enum class Era { both, legacy, modern };

enum class Phase { awaiting_initialize, initializing, ready };

std::string id_key(const json& id) { return id.dump(); }

}  // namespace

struct Session::Impl : std::enable_shared_from_this<Impl> {
  Impl(ServerContext& s, std::shared_ptr<Outbound> o, std::string principal)
      : server(s), out(std::move(o)),
        legacy_state(std::make_shared<SessionState>(s.store, principal.empty() ? local_principal() : principal)),
        state(*legacy_state) {}

  ServerContext& server;
  std::shared_ptr<Outbound> out;
  std::shared_ptr<SessionState> legacy_state;
  SessionState& state;  // the legacy era's: the one initialize and roots/list fill in
  std::mutex stateless_mu;
  std::shared_ptr<SessionState> stateless_state;  // modern requests', made on the first one
  int events_token = 0;
  int task_events_token = 0;
  // Threads start with the first request that needs one, so `initialize` never waits for them.
  RequestRunner runner{server.options.max_concurrent_requests, server.options.worker_threads};

  std::atomic<Phase> phase{Phase::awaiting_initialize};
  json client_capabilities = json::object();
  std::atomic<int> log_rank{-1};  // -1: the client has not asked for logs
  int log_sink_id = -1;
  std::vector<std::pair<const ResourceProvider*, int>> watches;  // ServerContext::resources watched

  std::mutex inflight_mu;
  std::condition_variable inflight_cv;
  std::map<std::string, std::shared_ptr<InFlight>> inflight;
  bool shutting_down = false;

  std::mutex pending_mu;
  std::int64_t next_request_id = 0;
  std::map<std::string, std::function<void(const json* result, const json* error)>> pending;

  std::mutex subs_mu;
  std::set<std::string> subscriptions;

  // ---- sending -------------------------------------------------------------------------------
  void send(const json& msg) { out->send(msg); }

  void reply(const std::shared_ptr<InFlight>& req, const MethodResult& result) {
    {
      std::lock_guard lock(req->mu);
      if (req->finished) return;
      req->finished = true;
      if (!req->cancelled) {
        if (result && req->modern) {
          json decorated = *result;
          decorate_modern_result(req->method, decorated);
          send(proto::make_response(req->id, std::move(decorated)));
        } else if (result) {
          send(proto::make_response(req->id, *result));
        } else {
          const auto& e = result.error();
          // Every error passes here: whatever a handler echoed of the request (a method name, a
          // URI in `data`), the reply stays far below the 1 MiB a message may take.
          send(proto::make_error(req->id, e.code, bounded(e.message, kMessageBytes),
                                 e.data.is_null() ? std::nullopt : std::optional<json>(bounded_data(e.data))));
        }
      }
    }
    std::lock_guard lock(inflight_mu);
    inflight.erase(id_key(req->id));
    inflight_cv.notify_all();
  }

  void send_request(const std::string& method, json params,
                    std::function<void(const json* result, const json* error)> on_reply) {
    json id;
    {
      std::lock_guard lock(pending_mu);
      id = next_request_id++;
      pending[id_key(id)] = std::move(on_reply);
    }
    send(proto::make_request(id, method, std::move(params)));
  }

  // A request to the client whose answer the calling thread waits for (legacy era only).
  std::optional<json> ask_and_wait(const std::string& method, json params, std::chrono::milliseconds timeout,
                                   std::stop_token stop) {
    struct Waiter {
      std::mutex mu;
      std::condition_variable_any cv;
      bool done = false;
      std::optional<json> answer;
    };
    auto w = std::make_shared<Waiter>();
    send_request(method, std::move(params), [w](const json* result, const json* error) {
      std::lock_guard lock(w->mu);
      w->done = true;
      if (result) w->answer = *result;
      else if (error) w->answer = json{{"error", *error}};
      w->cv.notify_all();
    });
    std::unique_lock lock(w->mu);
    w->cv.wait_for(lock, stop, timeout, [&] { return w->done; });
    return w->answer;
  }

  void log_to_client(std::string_view level, std::string_view logger, std::string_view text) {
    int min = log_rank.load();
    if (min < 0 || proto::log_level_rank(level) < min) return;
    json params = {{"level", level}, {"data", text}};
    if (!logger.empty()) params["logger"] = logger;
    send(proto::make_notification("notifications/message", std::move(params)));
  }

  // ---- dispatch --------------------------------------------------------------------------------
  void handle_payload(std::string_view payload) {
    auto msg = proto::classify(payload);
    std::visit([this](auto&& m) { on_message(m); }, msg);
  }

  void on_message(const proto::Invalid& m) { send(m.reply); }

  void on_message(const proto::Response& m) {
    std::function<void(const json*, const json*)> cb;
    {
      std::lock_guard lock(pending_mu);
      auto it = pending.find(id_key(m.id));
      if (it == pending.end()) return;  // a late or unknown reply: nothing to do
      cb = std::move(it->second);
      pending.erase(it);
    }
    cb(m.result ? &*m.result : nullptr, m.error ? &*m.error : nullptr);
  }

  void on_message(const proto::Notification& m) {
    if (m.method == "notifications/initialized") {
      phase = Phase::ready;
      select_initial_workspace();
    } else if (m.method == "notifications/cancelled") {
      auto p = proto::decode_cancelled(m.params);
      if (!p) return;  // invalid cancellations are ignored (spec)
      std::shared_ptr<InFlight> req;
      {
        std::lock_guard lock(inflight_mu);
        auto it = inflight.find(id_key(p->request_id));
        if (it != inflight.end()) req = it->second;
      }
      if (!req) return;
      {
        std::lock_guard lock(req->mu);
        req->cancelled = true;
      }
      req->stop.request_stop();
      spdlog::debug("request {} cancelled by the client", req->id.dump());
    } else if (m.method == "notifications/roots/list_changed") {
      if (client_capabilities.contains("roots")) request_roots();
    }
    // Other notifications (progress from the client, unknown ones) need no action and no reply.
  }

  void on_message(const proto::Request& m) {
    auto req = std::make_shared<InFlight>();
    req->id = m.id;
    {
      std::lock_guard lock(inflight_mu);
      if (shutting_down) return;
      auto [it, fresh] = inflight.emplace(id_key(m.id), req);
      if (!fresh) {
        send(proto::make_error(m.id, proto::kInvalidRequest,
                               "Invalid Request: id " + m.id.dump() + " is already in use by a request in progress"));
        return;
      }
    }
    if (auto token = proto::progress_token(m.params); token && *token) req->progress_token = **token;
    req->method = m.method;

    if (proto::carries_modern_meta(m.params)) {
      req->modern = true;
      auto meta = proto::decode_request_meta(m.params);
      if (!meta) return reply(req, std::unexpected(RpcError{proto::kInvalidParams, meta.error().message}));
      // server/discover answers whatever version it was asked in: it is how a client learns them.
      if (!proto::is_modern_version(meta->protocol_version) && m.method != "server/discover") {
        return reply(req, std::unexpected(unsupported_version(meta->protocol_version)));
      }
      req->client_capabilities = meta->client_capabilities;
      if (meta->log_level) req->log_rank = proto::log_level_rank(*meta->log_level);
    }

    const Method* method = find_method(m.method);
    if (!method) {
      return reply(req, std::unexpected(RpcError{proto::kMethodNotFound, "Method not found: " + bounded(m.method)}));
    }
    if (req->modern && method->era == Era::legacy) {
      return reply(req, std::unexpected(RpcError{proto::kMethodNotFound,
                                                 "Method not found: " + m.method + " is not part of MCP 2026-07-28" +
                                                     std::string(legacy_replacement(m.method))}));
    }
    if (!req->modern && method->era == Era::modern) {
      return reply(req, std::unexpected(RpcError{
                            proto::kMethodNotFound,
                            "Method not found: " + m.method + " belongs to MCP 2026-07-28; send it with params._meta[\"" +
                                proto::kMetaProtocolVersion + "\"] = \"2026-07-28\" and the client's capabilities"}));
    }
    if (!req->modern && method->needs_initialize && phase == Phase::awaiting_initialize) {
      return reply(req, std::unexpected(RpcError{proto::kInvalidRequest,
                                                 "Invalid Request: send 'initialize' before '" + m.method +
                                                     "' (or carry the MCP 2026-07-28 _meta envelope in each request)"}));
    }
    if (m.method == "subscriptions/listen") return start_listen(req, m.params);
    if (method->runs == Runs::inline_) return run_method(req, *method, m.method, m.params);
    runner.post([self = shared_from_this(), req, method, name = m.method, params = m.params] {
      self->run_method(req, *method, name, params);
    });
  }

  // ---- the method table ------------------------------------------------------------------------
  // Every request method the session serves, once. Inline methods run on the transport's thread, so
  // their effect is ordered before the next message is read; the rest run on the worker pool.
  enum class Runs { inline_, pool };
  struct Method {
    Runs runs;
    bool needs_initialize;  // refused with "send 'initialize' before ..." until the client did (legacy)
    MethodResult (*handle)(Impl& session, MethodEnv& env, const json& params);
    Era era = Era::both;
  };

  template <MethodResult (*F)(MethodEnv&, const json&)>
  static MethodResult with_env(Impl&, MethodEnv& env, const json& params) {
    return F(env, params);
  }

  static MethodResult discover(Impl&, MethodEnv& env, const json&) {
    json out = discover_result();
    if (!env.modern) {
      // Asked without the envelope (a legacy client's probe): the same facts, without claiming
      // the tasks extension for a session whose initialize declared the legacy tasks instead.
      out["capabilities"]["tasks"] = legacy_capabilities()["tasks"];
    }
    return out;
  }

  static const Method* find_method(std::string_view name) {
    static const std::map<std::string_view, Method> table = {
        // Lifecycle and the log level: their order relative to later messages matters.
        {"initialize", {Runs::inline_, false, [](Impl& s, MethodEnv&, const json& p) { return s.initialize(p); }, Era::legacy}},
        {"ping", {Runs::inline_, false, [](Impl&, MethodEnv&, const json&) -> MethodResult { return json::object(); }, Era::legacy}},
        {"logging/setLevel", {Runs::inline_, true, [](Impl& s, MethodEnv&, const json& p) { return s.set_level(p); }, Era::legacy}},
        {"server/discover", {Runs::inline_, false, discover}},
        {"subscriptions/listen", {Runs::inline_, false, nullptr, Era::modern}},
        // Cheap, though they check the URI on disk.
        {"resources/subscribe", {Runs::inline_, true, with_env<resources_subscribe>, Era::legacy}},
        {"resources/unsubscribe", {Runs::inline_, true, with_env<resources_unsubscribe>, Era::legacy}},
        {"tasks/get", {Runs::inline_, true, with_env<tasks_get>}},
        {"tasks/cancel", {Runs::inline_, true, with_env<tasks_cancel>}},
        {"tasks/update", {Runs::inline_, true, with_env<tasks_update>, Era::modern}},
        {"tasks/list", {Runs::inline_, true, with_env<tasks_list>, Era::legacy}},
        {"tasks/result", {Runs::pool, true, with_env<tasks_result>, Era::legacy}},
        {"tools/list", {Runs::pool, true, with_env<tools_list>}},
        {"tools/call", {Runs::pool, true, with_env<tools_call>}},
        {"resources/list", {Runs::pool, true, with_env<resources_list>}},
        {"resources/templates/list", {Runs::pool, true, with_env<resources_templates_list>}},
        {"resources/read", {Runs::pool, true, with_env<resources_read>}},
        {"prompts/list", {Runs::pool, true, with_env<prompts_list>}},
        {"prompts/get", {Runs::pool, true, with_env<prompts_get>}},
        {"completion/complete", {Runs::pool, true, with_env<completion_complete>}},
    };
    auto it = table.find(name);
    return it == table.end() ? nullptr : &it->second;
  }

  static RpcError unsupported_version(const std::string& requested) {
    json supported = json::array();
    for (auto v : proto::all_protocol_versions()) supported.push_back(std::string(v));
    return RpcError{proto::kUnsupportedProtocolVersion,
                    "Unsupported protocol version: " + bounded(requested) +
                        " (this server speaks 2026-07-28 per request, and 2025-11-25, 2025-06-18 and 2025-03-26 "
                        "through initialize)",
                    json{{"supported", std::move(supported)}, {"requested", requested}}};
  }

  static std::string_view legacy_replacement(std::string_view method) {
    if (method == "resources/subscribe" || method == "resources/unsubscribe")
      return " (use subscriptions/listen with notifications.resourceSubscriptions)";
    if (method == "logging/setLevel") return R"( (send params._meta["io.modelcontextprotocol/logLevel"] with each request))";
    if (method == "initialize") return " (send each request with the _meta envelope; server/discover lists versions)";
    if (method == "tasks/result" || method == "tasks/list") return " (poll tasks/get; its result arrives there)";
    if (method == "ping") return " (it was removed; any request, such as server/discover, shows the server is alive)";
    return "";
  }

  CallContext make_context(const std::shared_ptr<InFlight>& req) {
    CallContext ctx;
    ctx.request_id = req->id;
    ctx.progress_token = req->progress_token;
    ctx.stop = req->stop.get_token();
    ctx.session = req->modern ? stateless().get() : &state;
    ctx.modern = req->modern;
    ctx.client_capabilities = req->modern ? req->client_capabilities : client_capabilities;
    std::weak_ptr<InFlight> weak = req;
    std::weak_ptr<Impl> self = weak_from_this();
    if (!req->modern) {
      ctx.ask_client = [self, stop = ctx.stop](const std::string& method, json params,
                                               std::chrono::milliseconds timeout) -> std::optional<json> {
        auto s = self.lock();
        if (!s) return std::nullopt;
        return s->ask_and_wait(method, std::move(params), timeout, stop);
      };
      ctx.notify = [self](const std::string& method, json params) {
        if (auto s = self.lock()) s->send(proto::make_notification(method, std::move(params)));
      };
    }
    ctx.progress = [weak, self](double progress, std::optional<double> total, std::string_view message) {
      auto r = weak.lock();
      auto s = self.lock();
      if (!r || !s || !r->progress_token) return;
      std::lock_guard lock(r->mu);
      if (r->finished || r->cancelled || !(progress > r->last_progress)) return;
      r->last_progress = progress;
      json params = {{"progressToken", *r->progress_token}, {"progress", progress}};
      if (total) params["total"] = *total;
      if (!message.empty()) params["message"] = message;
      s->send(proto::make_notification("notifications/progress", std::move(params)));
    };
    if (req->modern) {
      // The request's own log level, and its messages belong to it (on HTTP, to its stream).
      ctx.log = [weak, self](std::string_view level, std::string_view text) {
        auto r = weak.lock();
        auto s = self.lock();
        if (!r || !s || r->log_rank < 0 || proto::log_level_rank(level) < r->log_rank) return;
        std::lock_guard lock(r->mu);
        if (r->finished || r->cancelled) return;
        s->send(proto::make_notification("notifications/message", {{"level", level}, {"logger", "kiln"}, {"data", text}}));
      };
    } else {
      ctx.log = [self](std::string_view level, std::string_view text) {
        if (auto s = self.lock()) s->log_to_client(level, "kiln", text);
      };
    }
    return ctx;
  }

  void run_method(const std::shared_ptr<InFlight>& req, const Method& m, const std::string& method, const json& params) {
    CallContext ctx = make_context(req);
    std::weak_ptr<Impl> self = weak_from_this();
    std::shared_ptr<SessionState> owner = req->modern ? stateless() : legacy_state;
    MethodEnv env{server, *owner, ctx, req->modern, ctx.client_capabilities, owner,
                  [self](const std::string& uri, bool on) {
                    if (auto s = self.lock()) {
                      std::lock_guard lock(s->subs_mu);
                      if (on) s->subscriptions.insert(uri); else s->subscriptions.erase(uri);
                    }
                  },
                  [server = &server, principal = owner->principal()](const std::string& uri) {
                    // Every session of the process hears it: a listener may live in another one.
                    server->shared->events.publish(principal, uri);
                  }};
    MethodResult result;
    try {
      result = m.handle(*this, env, params);
    } catch (const std::exception& e) {
      // A handler bug must not take the session down; it is the one true internal error.
      spdlog::error("internal error in {}: {}", method, e.what());
      result = std::unexpected(RpcError{proto::kInternalError, std::string("Internal error: ") + e.what()});
    }
    reply(req, result);
  }

  void resource_updated(const std::string& uri) {
    bool legacy_subscribed;
    {
      std::lock_guard lock(subs_mu);
      legacy_subscribed = subscriptions.contains(uri);
    }
    if (legacy_subscribed) send(proto::make_notification("notifications/resources/updated", {{"uri", uri}}));
    std::vector<std::shared_ptr<InFlight>> listening;
    {
      std::lock_guard lock(inflight_mu);
      for (const auto& [key, r] : inflight) {
        if (r->listener && r->listen_uris.contains(uri)) listening.push_back(r);
      }
    }
    for (const auto& r : listening) {
      std::lock_guard lock(r->mu);
      if (r->finished || r->cancelled) continue;
      send(proto::make_notification("notifications/resources/updated",
                                    {{"uri", uri}, {"_meta", {{proto::kMetaSubscriptionId, r->id}}}}));
    }
  }

  // notifications/tasks to the listeners of this task (the whole DetailedTask each time).
  void task_changed(const TaskSnapshot& task) {
    std::vector<std::shared_ptr<InFlight>> listening;
    {
      std::lock_guard lock(inflight_mu);
      for (const auto& [key, r] : inflight) {
        if (r->listener && r->listen_tasks.contains(task.id)) listening.push_back(r);
      }
    }
    if (listening.empty()) return;
    json detail = detailed_task_json(task);
    for (const auto& r : listening) {
      json params = detail;
      params["_meta"] = {{proto::kMetaSubscriptionId, r->id}};
      std::lock_guard lock(r->mu);
      if (r->finished || r->cancelled) continue;
      send(proto::make_notification("notifications/tasks", std::move(params)));
    }
  }

  // ---- the modern era's state and subscriptions ----------------------------------------------
  std::shared_ptr<SessionState> stateless() {
    std::lock_guard lock(stateless_mu);
    if (stateless_state) return stateless_state;
    stateless_state = SessionState::stateless(server.store, state.principal());
    if (!server.options.startup_workspace.empty()) {
      auto& shared = *server.shared;
      std::lock_guard open_lock(shared.fallback_mu);
      if (!shared.fallback_opened) {
        shared.fallback_opened = true;
        auto r = open_workspace_folder(*stateless_state, server.options.startup_workspace, "", false);
        if (r) shared.fallback = r->workspace;
        else spdlog::warn("--workspace {}: {}", server.options.startup_workspace, r.error().message);
      }
      stateless_state->set_fallback(shared.fallback);
    }
    return stateless_state;
  }

  // subscriptions/listen: acknowledged now, answered only when the server ends it (a cancellation
  // ends it without an answer). Kiln's lists never change, so of the filter only
  // resourceSubscriptions is honoured, and the acknowledgement says so.
  void start_listen(const std::shared_ptr<InFlight>& req, const json& params) {
    json uris = json::array();
    if (params.is_object() && params.contains("notifications")) {
      const json& n = params["notifications"];
      if (!n.is_object()) {
        return reply(req, std::unexpected(RpcError{proto::kInvalidParams, "Invalid params: notifications must be an object"}));
      }
      if (n.contains("resourceSubscriptions")) {
        const json& list = n["resourceSubscriptions"];
        if (!list.is_array() || list.size() > 1000) {
          return reply(req, std::unexpected(RpcError{proto::kInvalidParams,
                                                     "Invalid params: notifications.resourceSubscriptions must be an "
                                                     "array of at most 1000 URIs"}));
        }
        for (const auto& u : list) {
          if (!u.is_string() || u.get_ref<const std::string&>().empty() || u.get_ref<const std::string&>().size() > 4096) {
            return reply(req, std::unexpected(RpcError{proto::kInvalidParams,
                                                       "Invalid params: each resourceSubscriptions entry is a URI string"}));
          }
          req->listen_uris.insert(u.get<std::string>());
        }
        CallContext ctx = make_context(req);
        auto owner = stateless();
        MethodEnv env{server, *owner, ctx, true, ctx.client_capabilities, owner,
                      [](const std::string&, bool) {}, [](const std::string&) {}};
        for (const auto& u : req->listen_uris) {
          if (auto ok = check_subscribable(env, u); !ok) {
            RpcError e = ok.error();
            e.message = "Invalid params: cannot listen to " + bounded(u) + ": " + e.message;
            return reply(req, std::unexpected(std::move(e)));
          }
          uris.push_back(u);
        }
      }
    }
    json task_ids = json::array();
    if (params.is_object() && params.contains("notifications") && params["notifications"].contains("taskIds")) {
      const json& list = params["notifications"]["taskIds"];
      if (!list.is_array() || list.size() > 1000) {
        return reply(req, std::unexpected(RpcError{proto::kInvalidParams,
                                                   "Invalid params: notifications.taskIds must be an array of at most "
                                                   "1000 task ids"}));
      }
      if (!list.empty() && !proto::declares_extension(req->client_capabilities, proto::kTasksExtension)) {
        return reply(req, std::unexpected(RpcError{
                              proto::kMissingClientCapability,
                              "Missing required client capability: task notifications need the extension " +
                                  std::string(proto::kTasksExtension) + " in the client's capabilities",
                              json{{"requiredCapabilities", {{"extensions", {{proto::kTasksExtension, json::object()}}}}}}}));
      }
      for (const auto& t : list) {
        if (!t.is_string()) {
          return reply(req, std::unexpected(RpcError{proto::kInvalidParams, "Invalid params: each taskIds entry is a string"}));
        }
        // Only the principal's own tasks are agreed to; the acknowledgement lists those.
        if (server.shared->tasks.get(state.principal(), t.get<std::string>())) req->listen_tasks.insert(t.get<std::string>());
      }
      for (const auto& t : req->listen_tasks) task_ids.push_back(t);
    }
    json ack_filter = json::object();
    if (!uris.empty()) ack_filter["resourceSubscriptions"] = uris;
    if (!task_ids.empty()) ack_filter["taskIds"] = task_ids;
    {
      std::lock_guard lock(req->mu);
      req->listener = true;
      send(proto::make_notification("notifications/subscriptions/acknowledged",
                                    {{"_meta", {{proto::kMetaSubscriptionId, req->id}}}, {"notifications", ack_filter}}));
    }
    // Ends with the request: a cancellation (no answer) or the session's end (a graceful answer).
    std::weak_ptr<InFlight> weak = req;
    std::weak_ptr<Impl> self = weak_from_this();
    std::function<void()> end = [weak, self] {
      auto r = weak.lock();
      auto s = self.lock();
      if (!r || !s) return;
      s->runner.post([r, s] {
        s->reply(r, json{{"_meta", {{proto::kMetaSubscriptionId, r->id}}}});
      });
    };
    req->on_stop = std::make_unique<std::stop_callback<std::function<void()>>>(req->stop.get_token(), std::move(end));
  }

  // ---- lifecycle -------------------------------------------------------------------------------
  MethodResult initialize(const json& params) {
    if (phase != Phase::awaiting_initialize) {
      return std::unexpected(RpcError{proto::kInvalidRequest, "Invalid Request: the session is already initialized"});
    }
    auto p = proto::decode_initialize(params);
    if (!p) return std::unexpected(RpcError{proto::kInvalidParams, p.error().message});
    client_capabilities = p->capabilities;
    state.set_client(ClientInfo{p->client_name, p->client_version});
    phase = Phase::initializing;
    spdlog::info("session initialized by {} {} (protocol {})", p->client_name, p->client_version, p->protocol_version);
    return json{{"protocolVersion", proto::negotiate_protocol_version(p->protocol_version)},
                {"capabilities", legacy_capabilities()},
                {"serverInfo", server_info()},
                {"instructions", server_instructions(false)}};
  }

  MethodResult set_level(const json& params) {
    auto p = proto::decode_set_level(params);
    if (!p) return std::unexpected(RpcError{proto::kInvalidParams, p.error().message});
    log_rank = proto::log_level_rank(p->level);
    return json::object();
  }

  void select_initial_workspace() {
    if (client_capabilities.contains("roots")) {
      request_roots();
    } else if (!server.options.startup_workspace.empty()) {
      open_startup_workspace();
    }
  }

  void open_startup_workspace() {
    auto r = open_workspace_folder(state, server.options.startup_workspace, "", false);
    if (!r) spdlog::warn("--workspace {}: {}", server.options.startup_workspace, r.error().message);
  }

  void request_roots() {
    state.begin_pending_selection();
    std::weak_ptr<Impl> self = weak_from_this();
    send_request("roots/list", json::object(), [self](const json* result, const json* error) {
      auto s = self.lock();
      if (!s) return;
      bool opened = false;
      if (result && result->contains("roots") && (*result)["roots"].is_array()) {
        for (const auto& root : (*result)["roots"]) {
          std::string uri = root.is_object() ? root.value("uri", "") : "";
          std::string path = path_from_file_uri(uri);
          if (path.empty()) continue;
          std::string name = root.is_object() && root.contains("name") && root["name"].is_string()
                                 ? root["name"].get<std::string>() : "";
          auto r = open_workspace_folder(s->state, path, name, false);
          if (r) {
            opened = true;
            break;
          }
          spdlog::warn("client root {}: {}", uri, r.error().message);
        }
      } else if (error) {
        spdlog::warn("roots/list failed: {}", error->dump());
      }
      if (!opened && !s->server.options.startup_workspace.empty()) s->open_startup_workspace();
      s->state.end_pending_selection();
    });
  }

  // Listeners never finish on their own: at the end they are answered, gracefully.
  void end_listeners() {
    std::vector<std::shared_ptr<InFlight>> listeners;
    {
      std::lock_guard lock(inflight_mu);
      for (auto& [key, req] : inflight) {
        if (req->listener) listeners.push_back(req);
      }
    }
    for (auto& r : listeners) {
      r->on_stop.reset();
      reply(r, json{{"_meta", {{proto::kMetaSubscriptionId, r->id}}}});
    }
  }

  bool shutdown(std::chrono::milliseconds drain, std::chrono::milliseconds grace) {
    {
      std::lock_guard lock(inflight_mu);
      shutting_down = true;
    }
    end_listeners();
    std::unique_lock lock(inflight_mu);
    if (inflight_cv.wait_for(lock, drain, [this] { return inflight.empty(); })) return true;
    std::vector<std::shared_ptr<InFlight>> left;
    for (auto& [key, req] : inflight) left.push_back(req);
    // Outside the lock: stop callbacks run on this thread, and reply() takes it.
    lock.unlock();
    for (auto& r : left) r->stop.request_stop();
    lock.lock();
    return inflight_cv.wait_for(lock, grace, [this] { return inflight.empty(); });
  }
};

Session::Session(ServerContext& server, std::shared_ptr<Outbound> out, std::string principal)
    : impl_(std::make_shared<Impl>(server, std::move(out), std::move(principal))) {
  std::weak_ptr<Impl> weak = impl_;
  if (server.options.forward_process_logs) {
    impl_->log_sink_id = add_client_log_sink([weak](std::string_view level, std::string_view text) {
      if (auto s = weak.lock()) s->log_to_client(level, "kiln", text);
    });
  }
  for (const auto* p : server.resources) {
    if (!p->watch) continue;
    int token = p->watch([weak](const std::string& uri) {
      if (auto s = weak.lock()) s->resource_updated(uri);
    });
    impl_->watches.emplace_back(p, token);
  }
  impl_->events_token = server.shared->events.subscribe([weak](const std::string& principal, const std::string& uri) {
    auto s = weak.lock();
    if (s && s->state.principal() == principal) s->resource_updated(uri);
  });
  impl_->task_events_token = server.shared->task_events.subscribe([weak](const std::string& principal, const TaskSnapshot& t) {
    auto s = weak.lock();
    if (s && s->state.principal() == principal) s->task_changed(t);
  });
}

Session::~Session() {
  impl_->server.shared->events.unsubscribe(impl_->events_token);
  impl_->server.shared->task_events.unsubscribe(impl_->task_events_token);
  remove_client_log_sink(impl_->log_sink_id);
  for (const auto& [p, token] : impl_->watches) p->unwatch(token);
  impl_->shutdown(std::chrono::milliseconds(0), std::chrono::milliseconds(0));
  impl_->runner.stop_and_join();
}

void Session::handle_payload(std::string_view payload) { impl_->handle_payload(payload); }

void Session::handle_message(protocol::Message message) {
  std::visit([this](auto&& m) { impl_->on_message(m); }, message);
}

void Session::reject_unparsed(int code, const std::string& message) {
  impl_->send(proto::make_error(nullptr, code, message));
}

bool Session::shutdown(std::chrono::milliseconds drain, std::chrono::milliseconds grace) {
  return impl_->shutdown(drain, grace);
}

void Session::end_listeners() { impl_->end_listeners(); }

void Session::cancel_request(const json& id) {
  impl_->on_message(proto::Notification{"notifications/cancelled", json{{"requestId", id}}});
}

bool serves_method(std::string_view method, bool modern) {
  const auto* m = Session::Impl::find_method(method);
  if (!m) return false;
  return modern ? m->era != Era::legacy : m->era != Era::modern;
}

void Session::log_to_client(std::string_view level, std::string_view logger, std::string_view text) {
  impl_->log_to_client(level, logger, text);
}

}  // namespace kiln::server
