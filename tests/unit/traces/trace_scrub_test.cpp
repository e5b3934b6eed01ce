// The store's scrubber (issue 14 item 4): every string a record keeps passes it, whichever
// caller wrote the record, so a secret given as an argument (cwd, a check name, an error) is not
// stored in clear.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "trace_test_support.h"
#include "traces/trace_store.h"

using namespace kiln::traces;
using namespace kiln::traces::testing;
using nlohmann::json;

namespace {

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    if (text.substr(i).starts_with(from)) {
      out += to;
      i += from.size();
    } else {
      out += text[i++];
    }
  }
  return out;
}

}  // namespace

TEST_CASE("every stored string passes the scrubber") {
  TempDir dir;
  auto store = open_store(dir.path);
  store->set_scrubber([](std::string_view t) { return replace_all(t, "SeCrEt", "[secret:S]"); });
  TraceStart s;
  s.kind = "exec";
  s.workspace_id = "ws_1";
  s.name = "check SeCrEt";
  s.command = "echo SeCrEt";
  s.cwd = "/ws/SeCrEt";
  s.client = {{"name", "SeCrEt"}};
  s.policy = {{"env_names", {"SeCrEt"}}, {"SeCrEt", 1}};
  auto rec = store->start(s);
  REQUIRE(rec);
  TraceFinish f;
  f.status = "error";
  f.error = "cannot chdir to /ws/SeCrEt";
  f.result = {{"warning", "SeCrEt"}};
  REQUIRE(store->finish(rec->id, f));
  REQUIRE(store->set_cleanup(rec->id, {{"leftovers", {"/tmp/SeCrEt"}}}));
  REQUIRE(store->set_tests(rec->id, {{"cases", {{{"name", "SeCrEt"}}}}}, "fail", "SeCrEt failed"));
  auto got = store->get(rec->id);
  REQUIRE(got);
  REQUIRE(*got);
  std::string all = to_json(**got).dump();
  CHECK(all.find("SeCrEt") == std::string::npos);
  CHECK(all.find("[secret:S]") != std::string::npos);
  CHECK((*got)->cwd == "/ws/[secret:S]");
  store.reset();
  // Nor in the database file itself.
  std::ifstream db(dir.path + "/traces.db", std::ios::binary);
  std::stringstream bytes;
  bytes << db.rdbuf();
  CHECK(bytes.str().find("SeCrEt") == std::string::npos);
}
