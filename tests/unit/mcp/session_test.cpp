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

struct Fixture {
  TempDir state;
  TempDir folder;
  std::unique_ptr<workspace::StateStore> store;
  server::ToolRegistry registry;
  std::unique_ptr<server::ServerContext> ctx;
  std::shared_ptr<FakeClient> client = std::make_shared<FakeClient>();
  std::unique_ptr<server::Session> session;
  std::atomic<bool> slow_saw_cancel{false};

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
  f.send({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "server/discover"}});
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
