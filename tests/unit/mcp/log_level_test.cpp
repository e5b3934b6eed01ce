// One log-level parser for `kiln mcp` and the serve daemon: every level name keeps its meaning,
// `off` and `critical` included (the daemon once had its own mapping that made both `info`).
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "mcp/logging.h"

namespace lvl = spdlog::level;

TEST_CASE("parse_level: each spdlog level name comes back as itself") {
  for (auto l : {lvl::debug, lvl::info, lvl::warn, lvl::err, lvl::critical, lvl::off}) {
    std::string name(lvl::to_string_view(l).data(), lvl::to_string_view(l).size());
    CAPTURE(name);
    CHECK(kiln::server::parse_level(name) == l);
  }
}

TEST_CASE("parse_level: the MCP (RFC 5424) names map onto the nearest spdlog level") {
  using kiln::server::parse_level;
  CHECK(parse_level("trace") == lvl::debug);
  CHECK(parse_level("notice") == lvl::info);
  CHECK(parse_level("warning") == lvl::warn);
  CHECK(parse_level("error") == lvl::err);
  CHECK(parse_level("alert") == lvl::critical);
  CHECK(parse_level("emergency") == lvl::critical);
  CHECK_FALSE(parse_level("no such level").has_value());  // the command line refuses it; loggers fall back to info
}

TEST_CASE("init_file_logging: the daemon's logger takes the level it was given") {
  auto before = spdlog::default_logger();
  auto dir = std::filesystem::temp_directory_path() / ("kiln-log-level-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const char* name : {"debug", "info", "warning", "error", "critical", "off"}) {
    CAPTURE(name);
    kiln::server::init_file_logging((dir / "serve.log").string(), name);
    CHECK(spdlog::default_logger()->level() == kiln::server::parse_level(name));
  }
  CHECK(std::filesystem::exists(dir / "serve.log"));
  spdlog::set_default_logger(before);
  std::filesystem::remove_all(dir);
}
