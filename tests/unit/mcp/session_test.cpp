// Drives a Session in-process through a fake client: lifecycle, dispatch, exactly one reply,
// cancellation, progress and workspace selection, without a transport in the way.
#include <doctest/doctest.h>

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "mcp/session.h"
#include "mcp/tool_registry.h"
#include "tools/tools.h"
#include "workspace/state_store.h"
#include "../temp_dir.h"

using nlohmann::json;
using namespace kiln;
using namespace std::chrono_literals;

namespace {

// A scratch folder named for these tests (tests/unit/temp_dir.h).
struct TempDir : kiln::test::TempDir {
  TempDir() : kiln::test::TempDir("kiln-session-test") {}
};

// Collects everything the session sends and lets a test wait for a particular message.
class FakeClient final : public server::Outbound {
 public:
  void send(const json& message) override {
    std::lock_guard lock(mu_);
    messages_.push_back(message);
    cv_.notify_all();
  }
  std::optional<json> wait_for(const std::function<bool(const json&)>& pred, std::chrono::milliseconds timeout = 5s) {
    std::unique_lock lock(mu_);
    std::optional<json> found;
    cv_.wait_for(lock, timeout, [&] {
      for (const auto& m : messages_) {
        if (pred(m)) {
          found = m;
          return true;
        }
      }
      return false;
    });
    return found;
  }
  std::optional<json> reply(const json& id, std::chrono::milliseconds timeout = 5s) {
    return wait_for([&](const json& m) { return m.contains("id") && m["id"] == id && !m.contains("method"); },
                    timeout);
  }
  std::vector<json> all() {
    std::lock_guard lock(mu_);
    return messages_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<json> messages_;
};

json slow_tool_definition() {
  return json::parse(R"({
    "name": "test_slow", "description": "waits until cancelled or 10 s pass, reporting progress",
    "annotations": {"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false},
    "inputSchema": {"type": "object", "additionalProperties": false, "properties": {"n": {"type": "integer"}}},
    "outputSchema": {"type": "object", "properties": {"done": {"type": "boolean"}}}
  })");
}

// Answers with the arguments it was handed, to show what tools/call passes a handler.
json echo_tool_definition() {
  return json::parse(R"({
    "name": "test_echo", "description": "returns its arguments",
    "annotations": {"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false},
    "inputSchema": {"type": "object", "additionalProperties": false, "properties": {
      "n": {"type": "integer", "minimum": 1, "default": 7}, "s": {"type": "string"},
      "o": {"type": "object", "properties": {"flag": {"type": "boolean", "default": false}}}}},
    "outputSchema": {"type": "object", "properties": {"args": {"type": "object"}}}
  })");
}

// May run as a task (execution.taskSupport), and runs until released or cancelled.
json task_tool_definition() {
  return json::parse(R"({
    "name": "test_task", "description": "runs until released or cancelled",
    "annotations": {"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false},
    "execution": {"taskSupport": "optional"},
    "inputSchema": {"type": "object", "additionalProperties": false, "properties": {}},
    "outputSchema": {"type": "object", "properties": {"done": {"type": "boolean"}}}
  })");
}

// The envelope of a 2026-07-28 request.
json modern_meta(json caps = json::object()) {
  return {{"io.modelcontextprotocol/protocolVersion", "2026-07-28"},
          {"io.modelcontextprotocol/clientCapabilities", std::move(caps)},
          {"io.modelcontextprotocol/clientInfo", {{"name", "fake-modern"}, {"version", "2"}}}};
}

struct Fixture {
  TempDir state;
  TempDir folder;
  std::unique_ptr<workspace::StateStore> store;
  server::ToolRegistry registry;
  std::unique_ptr<server::ServerContext> ctx;
  std::shared_ptr<FakeClient> client = std::make_shared<FakeClient>();
  std::unique_ptr<server::Session> session;
  std::atomic<bool> slow_saw_cancel{false};
  std::atomic<bool> task_release{false};
  std::atomic<bool> task_saw_cancel{false};

  Fixture() {
    auto opened = workspace::StateStore::open(state.path);
    REQUIRE_MESSAGE(opened.has_value(), (opened ? "" : opened.error().message));
    store = std::move(*opened);
    server::register_workspace_tools(registry);
    server::register_file_tools(registry);
    server::register_search_tools(registry);
    registry.add_definition(slow_tool_definition(), [this](server::CallContext& c, const json&) -> Result<server::ToolOutput> {
      for (int i = 1; i <= 1000; ++i) {
        if (c.cancelled()) {
          slow_saw_cancel = true;
          return fail(Errc::cancelled, "cancelled");
        }
        c.progress(i, std::nullopt, "tick");
        std::this_thread::sleep_for(10ms);
      }
      return server::ToolOutput{json{{"done", true}}};
    });
    registry.add_definition(task_tool_definition(), [this](server::CallContext& c, const json&) -> Result<server::ToolOutput> {
      c.progress(1, 2, "half way");
      while (!task_release && !c.cancelled()) std::this_thread::sleep_for(5ms);
      if (c.cancelled()) {
        task_saw_cancel = true;
        return fail(Errc::cancelled, "cancelled");
      }
      return server::ToolOutput{json{{"done", true}}};
    });
    registry.add_definition(echo_tool_definition(), [](server::CallContext&, const json& args) -> Result<server::ToolOutput> {
      return server::ToolOutput{json{{"args", args}}};
    });
    ctx = std::make_unique<server::ServerContext>(server::ServerContext{*store, registry, {}});
    session = std::make_unique<server::Session>(*ctx, client);
  }
  void send(const json& m) { session->handle_payload(m.dump()); }
  void initialize(json caps = json::object()) {
    send({{"jsonrpc", "2.0"}, {"id", 0}, {"method", "initialize"},
          {"params", {{"protocolVersion", "2025-11-25"}, {"capabilities", caps},
                      {"clientInfo", {{"name", "fake"}, {"version", "1"}}}}}});
    REQUIRE(client->reply(0));
    send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
  }
  json modern(int id, const std::string& method, json params = json::object(), json caps = json::object()) {
    params["_meta"] = modern_meta(std::move(caps));
    send({{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}});
    auto r = client->reply(id);
    REQUIRE(r);
    return *r;
  }
  json call(int id, const std::string& tool, json args) {
    send({{"jsonrpc", "2.0"}, {"id", id}, {"method", "tools/call"}, {"params", {{"name", tool}, {"arguments", args}}}});
    auto r = client->reply(id);
    REQUIRE(r);
    return *r;
  }
};

}  // namespace

TEST_CASE("initialize negotiates the protocol version and declares capabilities") {
  Fixture f;
  f.send({{"jsonrpc", "2.0"}, {"id", 1}, {"method", "initialize"},
          {"params", {{"protocolVersion", "1999-01-01"}, {"capabilities", json::object()},
                      {"clientInfo", {{"name", "fake"}, {"version", "1"}}}}}});
  auto r = f.client->reply(1);
  REQUIRE(r);
  CHECK((*r)["result"]["protocolVersion"] == "2025-11-25");
  CHECK((*r)["result"]["capabilities"].contains("tools"));
  CHECK((*r)["result"]["serverInfo"]["name"] == "kiln");

  f.send({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "initialize"},
          {"params", {{"protocolVersion", "2025-06-18"}, {"capabilities", json::object()},
                      {"clientInfo", {{"name", "fake"}, {"version", "1"}}}}}});
  auto again = f.client->reply(2);
  REQUIRE(again);
  CHECK((*again)["error"]["code"] == -32600);
}

TEST_CASE("requests before initialize are refused, unknown methods get -32601") {
  Fixture f;
  f.send({{"jsonrpc", "2.0"}, {"id", 1}, {"method", "tools/list"}});
  auto r = f.client->reply(1);
  REQUIRE(r);
  CHECK((*r)["error"]["code"] == -32600);
  f.send({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "server/frobnicate"}});
  auto d = f.client->reply(2);
  REQUIRE(d);
  CHECK((*d)["error"]["code"] == -32601);
  f.send({{"jsonrpc", "2.0"}, {"id", 3}, {"method", "ping"}});
  auto p = f.client->reply(3);
  REQUIRE(p);
  CHECK((*p)["result"] == json::object());
}

TEST_CASE("tools/list carries every tool with schemas and annotations") {
  Fixture f;
  f.initialize();
  f.send({{"jsonrpc", "2.0"}, {"id", 5}, {"method", "tools/list"}});
  auto r = f.client->reply(5);
  REQUIRE(r);
  auto tools = (*r)["result"]["tools"];
  CHECK(tools.size() >= 10);
  for (const auto& t : tools) {
    CHECK(t["inputSchema"]["type"] == "object");
    CHECK(t["outputSchema"]["type"] == "object");
    CHECK(t["annotations"].contains("readOnlyHint"));
    CHECK(!t["description"].get<std::string>().empty());
  }
}

TEST_CASE("tool errors are results with isError; unknown tools are -32602") {
  Fixture f;
  f.initialize();
  auto none = f.call(1, "file_read", {{"path", "x"}});
  CHECK(none["result"]["isError"] == true);
  CHECK(none["result"]["content"][0]["text"].get<std::string>().find("workspace_open") != std::string::npos);

  auto bad = f.call(2, "file_read", {{"path", 3}});
  CHECK(bad["result"]["isError"] == true);
  CHECK(bad["result"]["content"][0]["text"].get<std::string>().find("/path") != std::string::npos);

  f.send({{"jsonrpc", "2.0"}, {"id", 3}, {"method", "tools/call"}, {"params", {{"name", "nope"}}}});
  auto unknown = f.client->reply(3);
  REQUIRE(unknown);
  CHECK((*unknown)["error"]["code"] == -32602);
}

TEST_CASE("a handler receives the schema's defaults for absent arguments, never for bad ones") {
  Fixture f;
  f.initialize();
  CHECK(f.call(1, "test_echo", json::object())["result"]["structuredContent"]["args"] == json{{"n", 7}});
  CHECK(f.call(2, "test_echo", {{"n", 2}, {"s", "x"}, {"o", json::object()}})["result"]["structuredContent"]["args"] ==
        json{{"n", 2}, {"s", "x"}, {"o", {{"flag", false}}}});
  auto bad = f.call(3, "test_echo", {{"n", 0}});
  CHECK(bad["result"]["isError"] == true);
  CHECK(bad["result"]["content"][0]["text"].get<std::string>().find("arguments/n") != std::string::npos);
}

TEST_CASE("workspace_open makes the folder current and file tools work on it") {
  Fixture f;
  f.initialize();
  auto opened = f.call(1, "workspace_open", {{"path", f.folder.path}});
  REQUIRE(opened["result"]["isError"] == false);
  auto sc = opened["result"]["structuredContent"];
  CHECK(sc["is_new"] == true);
  CHECK(sc["root"] == std::filesystem::canonical(f.folder.path).string());
  // The text block carries the same JSON.
  CHECK(json::parse(opened["result"]["content"][0]["text"].get<std::string>()) == sc);

  auto written = f.call(2, "file_write", {{"path", "a.txt"}, {"content", "hello\n"}});
  CHECK(written["result"]["isError"] == false);
  auto read = f.call(3, "file_read", {{"path", "a.txt"}});
  CHECK(read["result"]["structuredContent"]["content"] == "hello\n");

  auto reopened = f.call(4, "workspace_open", {{"path", f.folder.path}});
  CHECK(reopened["result"]["structuredContent"]["is_new"] == false);
  CHECK(reopened["result"]["structuredContent"]["id"] == sc["id"]);
}

TEST_CASE("cancellation stops the handler and suppresses the reply; ping is not blocked") {
  Fixture f;
  f.initialize();
  f.send({{"jsonrpc", "2.0"}, {"id", "slow"}, {"method", "tools/call"},
          {"params", {{"name", "test_slow"}, {"arguments", json::object()}, {"_meta", {{"progressToken", "tok"}}}}}});
  // Progress arrives while it runs, and ping is answered meanwhile.
  REQUIRE(f.client->wait_for([](const json& m) { return m.value("method", "") == "notifications/progress"; }));
  f.send({{"jsonrpc", "2.0"}, {"id", 9}, {"method", "ping"}});
  REQUIRE(f.client->reply(9, 1s));
  f.send({{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"}, {"params", {{"requestId", "slow"}}}});
  for (int i = 0; i < 200 && !f.slow_saw_cancel; ++i) std::this_thread::sleep_for(10ms);
  CHECK(f.slow_saw_cancel);
  CHECK_FALSE(f.client->reply("slow", 300ms));
  // Progress values only grow.
  double last = 0;
  for (const auto& m : f.client->all()) {
    if (m.value("method", "") != "notifications/progress") continue;
    CHECK(m["params"]["progress"].get<double>() > last);
    last = m["params"]["progress"].get<double>();
  }
}

TEST_CASE("a client with roots gets its first root opened") {
  Fixture f;
  f.initialize({{"roots", {{"listChanged", true}}}});
  auto req = f.client->wait_for([](const json& m) { return m.value("method", "") == "roots/list"; });
  REQUIRE(req);
  f.send({{"jsonrpc", "2.0"}, {"id", (*req)["id"]},
          {"result", {{"roots", json::array({{{"uri", "file://" + f.folder.path}, {"name", "proj"}}})}}}});
  auto info = f.call(7, "workspace_info", json::object());
  REQUIRE(info["result"]["isError"] == false);
  CHECK(info["result"]["structuredContent"]["root"] == std::filesystem::canonical(f.folder.path).string());
  CHECK(info["result"]["structuredContent"]["name"] == "proj");
}

TEST_CASE("logging/setLevel validates the level and turns on notifications/message") {
  Fixture f;
  f.initialize();
  f.send({{"jsonrpc", "2.0"}, {"id", 1}, {"method", "logging/setLevel"}, {"params", {{"level", "loud"}}}});
  auto bad = f.client->reply(1);
  REQUIRE(bad);
  CHECK((*bad)["error"]["code"] == -32602);
  f.send({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "logging/setLevel"}, {"params", {{"level", "debug"}}}});
  REQUIRE(f.client->reply(2));
  f.session->log_to_client("warning", "test", "hello from the server");
  CHECK(f.client->wait_for([](const json& m) {
    return m.value("method", "") == "notifications/message" && m["params"]["data"] == "hello from the server";
  }));
}

TEST_CASE("server/discover answers without initialize, listing both eras") {
  Fixture f;
  auto d = f.modern(1, "server/discover");
  REQUIRE(d.contains("result"));
  const json& r = d["result"];
  CHECK(r["resultType"] == "complete");
  CHECK(r["supportedVersions"] == json::array({"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"}));
  CHECK(r["capabilities"]["extensions"].contains("io.modelcontextprotocol/tasks"));
  CHECK(r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "kiln");
  CHECK(r["ttlMs"].is_number_integer());
  CHECK(r["cacheScope"] == "private");
  // A legacy client's probe, without the envelope, is answered too.
  f.send({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "server/discover"}});
  auto legacy = f.client->reply(2);
  REQUIRE(legacy);
  CHECK((*legacy)["result"]["supportedVersions"][0] == "2026-07-28");
}

TEST_CASE("a modern request is served without initialize and carries resultType, ttlMs and cacheScope") {
  Fixture f;
  auto list = f.modern(1, "tools/list");
  REQUIRE(list.contains("result"));
  CHECK(list["result"]["resultType"] == "complete");
  CHECK(list["result"]["cacheScope"] == "private");
  CHECK(list["result"]["ttlMs"].is_number_integer());
  bool saw_task_tool = false;
  for (const auto& t : list["result"]["tools"]) {
    CHECK_FALSE(t.contains("execution"));  // no such field in 2026-07-28
    saw_task_tool = saw_task_tool || t["name"] == "test_task";
  }
  CHECK(saw_task_tool);
  // The same order every time.
  auto again = f.modern(2, "tools/list");
  CHECK(again["result"]["tools"] == list["result"]["tools"]);
  auto call = f.modern(3, "tools/call", {{"name", "test_echo"}, {"arguments", {{"s", "x"}}}});
  CHECK(call["result"]["resultType"] == "complete");
  CHECK(call["result"]["structuredContent"]["args"]["s"] == "x");
  CHECK_FALSE(call["result"].contains("ttlMs"));
}

TEST_CASE("modern envelope errors: missing capabilities, unsupported version, legacy-only methods") {
  Fixture f;
  f.send({{"jsonrpc", "2.0"}, {"id", 1}, {"method", "tools/list"},
          {"params", {{"_meta", {{"io.modelcontextprotocol/protocolVersion", "2026-07-28"}}}}}});
  auto missing = f.client->reply(1);
  REQUIRE(missing);
  CHECK((*missing)["error"]["code"] == -32602);
  f.send({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/list"},
          {"params", {{"_meta", {{"io.modelcontextprotocol/protocolVersion", "1900-01-01"},
                                 {"io.modelcontextprotocol/clientCapabilities", json::object()}}}}}});
  auto old = f.client->reply(2);
  REQUIRE(old);
  CHECK((*old)["error"]["code"] == -32022);
  CHECK((*old)["error"]["data"]["requested"] == "1900-01-01");
  CHECK((*old)["error"]["data"]["supported"][0] == "2026-07-28");
  CHECK(f.modern(3, "logging/setLevel", {{"level", "debug"}})["error"]["code"] == -32601);
  CHECK(f.modern(4, "resources/subscribe", {{"uri", "file:///x"}})["error"]["code"] == -32601);
  CHECK(f.modern(5, "initialize")["error"]["code"] == -32601);
  // and the other way round: modern-only methods need the envelope.
  f.initialize();
  f.send({{"jsonrpc", "2.0"}, {"id", 6}, {"method", "subscriptions/listen"}, {"params", json::object()}});
  auto listen = f.client->reply(6);
  REQUIRE(listen);
  CHECK((*listen)["error"]["code"] == -32601);
}

TEST_CASE("modern requests have no current workspace, even after a legacy client opened one") {
  Fixture f;
  f.initialize();
  auto opened = f.call(1, "workspace_open", {{"path", f.folder.path}});
  REQUIRE(opened["result"]["isError"] == false);
  std::string id = opened["result"]["structuredContent"]["id"];
  auto nameless = f.modern(2, "tools/call", {{"name", "file_list"}, {"arguments", json::object()}});
  CHECK(nameless["result"]["isError"] == true);
  CHECK(nameless["result"]["content"][0]["text"].get<std::string>().find("pass \"workspace\"") != std::string::npos);
  auto named = f.modern(3, "tools/call", {{"name", "file_list"}, {"arguments", {{"workspace", id}}}});
  CHECK(named["result"]["isError"] == false);
  // A modern workspace_open does not select it for the next modern request either.
  auto m_open = f.modern(4, "tools/call", {{"name", "workspace_open"}, {"arguments", {{"path", f.folder.path}}}});
  CHECK(m_open["result"]["isError"] == false);
  CHECK(f.modern(5, "tools/call", {{"name", "file_list"}, {"arguments", json::object()}})["result"]["isError"] == true);
  // The legacy session's current workspace is untouched.
  CHECK(f.call(6, "file_list", json::object())["result"]["isError"] == false);
}

TEST_CASE("modern log level comes from each request's _meta") {
  Fixture f;
  json params = {{"name", "test_slow"}, {"arguments", {{"n", 1}}}};
  params["_meta"] = modern_meta();
  params["_meta"]["io.modelcontextprotocol/logLevel"] = "bogus";
  f.send({{"jsonrpc", "2.0"}, {"id", 1}, {"method", "tools/call"}, {"params", params}});
  auto bad = f.client->reply(1);
  REQUIRE(bad);
  CHECK((*bad)["error"]["code"] == -32602);
  // Process-wide log lines do not reach modern requests (no logging/setLevel exists for them).
  f.session->log_to_client("error", "test", "not for modern clients");
  std::this_thread::sleep_for(50ms);
  for (const auto& m : f.client->all()) CHECK(m.value("method", "") != "notifications/message");
}

TEST_CASE("subscriptions/listen: acknowledged with its id, updates tagged, cancellation ends it without a reply") {
  Fixture f;
  auto opened = f.modern(1, "tools/call", {{"name", "workspace_open"}, {"arguments", {{"path", f.folder.path}}}});
  REQUIRE(opened["result"]["isError"] == false);
  std::string ws = opened["result"]["structuredContent"]["id"];
  std::string root = opened["result"]["structuredContent"]["root"];
  std::string uri = "file://" + root + "/note.txt";
  json listen = {{"notifications", {{"resourceSubscriptions", json::array({uri})}, {"toolsListChanged", true}}}};
  listen["_meta"] = modern_meta();
  f.send({{"jsonrpc", "2.0"}, {"id", "listen:0"}, {"method", "subscriptions/listen"}, {"params", listen}});
  auto ack = f.client->wait_for([](const json& m) { return m.value("method", "") == "notifications/subscriptions/acknowledged"; });
  REQUIRE(ack);
  CHECK((*ack)["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen:0");
  CHECK((*ack)["params"]["notifications"]["resourceSubscriptions"] == json::array({uri}));
  CHECK_FALSE((*ack)["params"]["notifications"].contains("toolsListChanged"));  // Kiln's lists never change
  auto wrote = f.modern(2, "tools/call", {{"name", "file_write"}, {"arguments", {{"workspace", ws}, {"path", "note.txt"}, {"content", "hi"}}}});
  REQUIRE(wrote["result"]["isError"] == false);
  auto updated = f.client->wait_for([&](const json& m) {
    return m.value("method", "") == "notifications/resources/updated" && m["params"]["uri"] == uri;
  });
  REQUIRE(updated);
  CHECK((*updated)["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen:0");
  f.send({{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"}, {"params", {{"requestId", "listen:0"}}}});
  std::this_thread::sleep_for(100ms);
  auto count_updates = [&] {
    int n = 0;
    for (const auto& m : f.client->all()) n += m.value("method", "") == "notifications/resources/updated";
    return n;
  };
  int before = count_updates();
  f.modern(3, "tools/call", {{"name", "file_write"}, {"arguments", {{"workspace", ws}, {"path", "note.txt"}, {"content", "again"}}}});
  std::this_thread::sleep_for(100ms);
  CHECK(count_updates() == before);
  CHECK_FALSE(f.client->reply("listen:0", 10ms));  // cancelled: no response, ever
}

TEST_CASE("a listener still open when the session ends gets a graceful answer") {
  Fixture f;
  json listen = {{"notifications", json::object()}};
  listen["_meta"] = modern_meta();
  f.send({{"jsonrpc", "2.0"}, {"id", 9}, {"method", "subscriptions/listen"}, {"params", listen}});
  REQUIRE(f.client->wait_for([](const json& m) { return m.value("method", "") == "notifications/subscriptions/acknowledged"; }));
  CHECK(f.session->shutdown(200ms, 200ms));
  auto end = f.client->reply(9);
  REQUIRE(end);
  CHECK(end->at("result")["resultType"] == "complete");
  CHECK(end->at("result")["_meta"]["io.modelcontextprotocol/subscriptionId"] == 9);
}

TEST_CASE("modern tasks: a handle at once, polled with progress, cancelled on tasks/cancel") {
  Fixture f;
  json caps = {{"extensions", {{"io.modelcontextprotocol/tasks", json::object()}}}};
  auto created = f.modern(1, "tools/call", {{"name", "test_task"}, {"arguments", json::object()}}, caps);
  REQUIRE(created.contains("result"));
  const json& t = created["result"];
  CHECK(t["resultType"] == "task");
  CHECK(t["status"] == "working");
  CHECK(t["ttlMs"].is_number_integer());
  CHECK(t["pollIntervalMs"].is_number_integer());
  std::string id = t["taskId"];
  // Progress shows as the status message.
  json got;
  for (int i = 0; i < 200; ++i) {
    got = f.modern(100 + i, "tasks/get", {{"taskId", id}}, caps);
    if (got["result"].value("statusMessage", "").find("half way") != std::string::npos) break;
    std::this_thread::sleep_for(10ms);
  }
  CHECK(got["result"]["resultType"] == "complete");
  CHECK(got["result"]["status"] == "working");
  CHECK(got["result"]["statusMessage"].get<std::string>().find("half way") != std::string::npos);
  auto cancelled = f.modern(2, "tasks/cancel", {{"taskId", id}}, caps);
  CHECK(cancelled["result"]["resultType"] == "complete");
  for (int i = 0; i < 200 && !f.task_saw_cancel; ++i) std::this_thread::sleep_for(10ms);
  CHECK(f.task_saw_cancel);
  CHECK(f.modern(3, "tasks/get", {{"taskId", id}}, caps)["result"]["status"] == "cancelled");
  CHECK(f.modern(4, "tasks/get", {{"taskId", "task-nope"}}, caps)["error"]["code"] == -32602);
  // Without the extension the same call runs to its end and answers directly.
  f.task_release = true;
  auto direct = f.modern(5, "tools/call", {{"name", "test_task"}, {"arguments", json::object()}});
  CHECK(direct["result"]["resultType"] == "complete");
  CHECK(direct["result"]["structuredContent"]["done"] == true);
}

TEST_CASE("modern tasks: a completed task returns the call's result") {
  Fixture f;
  f.task_release = true;
  json caps = {{"extensions", {{"io.modelcontextprotocol/tasks", json::object()}}}};
  auto created = f.modern(1, "tools/call", {{"name", "test_task"}, {"arguments", json::object()}}, caps);
  std::string id = created["result"]["taskId"];
  json got;
  for (int i = 0; i < 300; ++i) {
    got = f.modern(10 + i, "tasks/get", {{"taskId", id}}, caps);
    if (got["result"]["status"] != "working") break;
    std::this_thread::sleep_for(10ms);
  }
  CHECK(got["result"]["status"] == "completed");
  CHECK(got["result"]["result"]["structuredContent"]["done"] == true);
  CHECK(got["result"]["result"]["resultType"] == "complete");
}

TEST_CASE("legacy tasks: tools/call with params.task, tasks/get, tasks/result, tasks/list, tasks/cancel") {
  Fixture f;
  f.initialize();
  f.send({{"jsonrpc", "2.0"}, {"id", 1}, {"method", "tools/list"}});
  auto list = f.client->reply(1);
  REQUIRE(list);
  bool optional = false;
  for (const auto& t : (*list)["result"]["tools"]) {
    if (t["name"] == "test_task") optional = t["execution"]["taskSupport"] == "optional";
  }
  CHECK(optional);
  f.send({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/call"},
          {"params", {{"name", "test_task"}, {"arguments", json::object()}, {"task", {{"ttl", 60000}}}}}});
  auto created = f.client->reply(2);
  REQUIRE(created);
  const json& task = (*created)["result"]["task"];
  CHECK(task["status"] == "working");
  CHECK(task["ttl"] == 60000);
  std::string id = task["taskId"];
  f.send({{"jsonrpc", "2.0"}, {"id", 3}, {"method", "tasks/list"}});
  auto listed = f.client->reply(3);
  REQUIRE(listed);
  CHECK((*listed)["result"]["tasks"][0]["taskId"] == id);
  f.send({{"jsonrpc", "2.0"}, {"id", 4}, {"method", "tasks/result"}, {"params", {{"taskId", id}}}});
  f.task_release = true;
  auto result = f.client->reply(4);
  REQUIRE(result);
  CHECK((*result)["result"]["structuredContent"]["done"] == true);
  CHECK((*result)["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] == id);
  f.send({{"jsonrpc", "2.0"}, {"id", 5}, {"method", "tasks/cancel"}, {"params", {{"taskId", id}}}});
  auto late = f.client->reply(5);
  REQUIRE(late);
  CHECK((*late)["error"]["code"] == -32602);  // already terminal
  // A tool that cannot be a task refuses params.task.
  f.send({{"jsonrpc", "2.0"}, {"id", 6}, {"method", "tools/call"},
          {"params", {{"name", "test_echo"}, {"arguments", json::object()}, {"task", json::object()}}}});
  auto refused = f.client->reply(6);
  REQUIRE(refused);
  CHECK((*refused)["error"]["code"] == -32601);
}

TEST_CASE("modern resources/read finds the workspace from the URI; not found is -32602, not -32002") {
  Fixture f;
  auto opened = f.modern(1, "tools/call", {{"name", "workspace_open"}, {"arguments", {{"path", f.folder.path}}}});
  REQUIRE(opened["result"]["isError"] == false);
  std::string ws = opened["result"]["structuredContent"]["id"];
  std::string root = opened["result"]["structuredContent"]["root"];
  f.modern(2, "tools/call", {{"name", "file_write"}, {"arguments", {{"workspace", ws}, {"path", "r.txt"}, {"content", "read me"}}}});
  auto read = f.modern(3, "resources/read", {{"uri", "file://" + root + "/r.txt"}});
  REQUIRE(read.contains("result"));
  CHECK(read["result"]["contents"][0]["text"] == "read me");
  CHECK(read["result"]["ttlMs"] == 0);
  CHECK(read["result"]["cacheScope"] == "private");
  CHECK(f.modern(4, "resources/read", {{"uri", "file://" + root + "/missing.txt"}})["error"]["code"] == -32602);
  CHECK(f.modern(5, "resources/read", {{"uri", "file:///nowhere/known/x"}})["error"]["code"] == -32602);
}

TEST_CASE("subscriptions/listen with taskIds: -32021 without the extension; notifications/tasks carry the DetailedTask") {
  Fixture f;
  json caps = {{"extensions", {{"io.modelcontextprotocol/tasks", json::object()}}}};
  auto created = f.modern(1, "tools/call", {{"name", "test_task"}, {"arguments", json::object()}}, caps);
  std::string id = created["result"]["taskId"];
  json no_ext = {{"notifications", {{"taskIds", json::array({id})}}}};
  no_ext["_meta"] = modern_meta();
  f.send({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "subscriptions/listen"}, {"params", no_ext}});
  auto refused = f.client->reply(2);
  REQUIRE(refused);
  CHECK((*refused)["error"]["code"] == -32021);
  CHECK((*refused)["error"]["data"]["requiredCapabilities"]["extensions"].contains("io.modelcontextprotocol/tasks"));
  json listen = {{"notifications", {{"taskIds", json::array({id, "task-not-mine"})}}}};
  listen["_meta"] = modern_meta(caps);
  f.send({{"jsonrpc", "2.0"}, {"id", "tl"}, {"method", "subscriptions/listen"}, {"params", listen}});
  auto ack = f.client->wait_for([](const json& m) { return m.value("method", "") == "notifications/subscriptions/acknowledged"; });
  REQUIRE(ack);
  CHECK((*ack)["params"]["notifications"]["taskIds"] == json::array({id}));  // only its own task is agreed to
  f.task_release = true;
  auto done = f.client->wait_for([&](const json& m) {
    return m.value("method", "") == "notifications/tasks" && m["params"]["taskId"] == id && m["params"]["status"] == "completed";
  });
  REQUIRE(done);
  CHECK((*done)["params"]["result"]["structuredContent"]["done"] == true);
  CHECK((*done)["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "tl");
}
