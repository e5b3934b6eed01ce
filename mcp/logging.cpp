// spdlog set-up and the bridge from spdlog to MCP notifications/message.
#include "mcp/logging.h"

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/rotating_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace kiln::server {

namespace {

std::mutex g_sinks_mu;
std::map<int, ClientLogSink> g_sinks;
int g_next_sink = 1;

std::string_view mcp_level(spdlog::level::level_enum l) {
  switch (l) {
    case spdlog::level::trace:
    case spdlog::level::debug: return "debug";
    case spdlog::level::info: return "info";
    case spdlog::level::warn: return "warning";
    case spdlog::level::err: return "error";
    case spdlog::level::critical: return "critical";
    default: return "info";
  }
}

// Forwards every formatted line to the registered client sinks; each decides by its own level.
class ClientBridgeSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::string text(msg.payload.data(), msg.payload.size());
    std::map<int, ClientLogSink> sinks;
    {
      std::lock_guard lock(g_sinks_mu);
      sinks = g_sinks;
    }
    for (auto& [id, sink] : sinks) sink(mcp_level(msg.level), text);
  }
  void flush_() override {}
};

}  // namespace

std::span<const std::string_view> log_level_names() {
  static constexpr std::string_view names[] = {"debug", "info", "notice", "warning", "error", "critical", "off"};
  return names;
}

std::optional<spdlog::level::level_enum> parse_level(std::string_view level) {
  if (level == "debug" || level == "trace") return spdlog::level::debug;
  if (level == "info" || level == "notice") return spdlog::level::info;
  if (level == "warning" || level == "warn") return spdlog::level::warn;
  if (level == "error") return spdlog::level::err;
  if (level == "critical" || level == "alert" || level == "emergency") return spdlog::level::critical;
  if (level == "off") return spdlog::level::off;
  return std::nullopt;
}

void init_logging(std::string_view level) {
  auto stderr_sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  stderr_sink->set_pattern("kiln %Y-%m-%dT%H:%M:%S.%e %l: %v");
  auto bridge = std::make_shared<ClientBridgeSink>();
  bridge->set_level(spdlog::level::debug);
  auto logger = std::make_shared<spdlog::logger>("kiln", spdlog::sinks_init_list{stderr_sink, bridge});
  auto l = parse_level(level).value_or(spdlog::level::info);
  stderr_sink->set_level(l);
  logger->set_level(spdlog::level::debug);  // the bridge sees debug; stderr filters by `level`
  spdlog::set_default_logger(logger);
}

void init_file_logging(const std::string& path, std::string_view level) {
  try {
    // kiln serve logs a line per request (the access log). With stdio's default 4 KiB buffer that
    // was a write(2) every 25 or so requests, each also an inotify event for every watcher of the
    // state folder (the serving cache's, one per io thread): 2-3% of a small page's CPU. The
    // flush every second below keeps the file at most a second behind; warnings flush at once.
    // glibc ignores the size unless it is given the buffer, which must outlive its FILE: one per
    // file, replaced when a rotation opens the next (the previous file is closed by then), the
    // last one kept by the handlers' copy inside the sink until the sink closes its file.
    constexpr std::size_t kBuffer = 64 * 1024;
    auto buffer = std::make_shared<std::unique_ptr<char[]>>();
    spdlog::file_event_handlers handlers;
    handlers.after_open = [buffer](const spdlog::filename_t&, std::FILE* f) {
      *buffer = std::make_unique_for_overwrite<char[]>(kBuffer);
      std::setvbuf(f, buffer->get(), _IOFBF, kBuffer);
    };
    auto sink = std::make_shared<spdlog::sinks::rotating_file_sink_mt>(path, 10 << 20, 3, false, handlers);
    sink->set_pattern("kiln %Y-%m-%dT%H:%M:%S.%e %l: %v");
    auto logger = std::make_shared<spdlog::logger>("kiln", sink);
    logger->set_level(parse_level(level).value_or(spdlog::level::info));
    logger->flush_on(spdlog::level::warn);
    spdlog::set_default_logger(logger);
    spdlog::flush_every(std::chrono::seconds(1));
  } catch (const spdlog::spdlog_ex& e) {
    spdlog::warn("serve: cannot log to {} ({}); logging to stderr", path, e.what());
  }
}

int add_client_log_sink(ClientLogSink sink) {
  std::lock_guard lock(g_sinks_mu);
  int id = g_next_sink++;
  g_sinks[id] = std::move(sink);
  return id;
}

void remove_client_log_sink(int id) {
  std::lock_guard lock(g_sinks_mu);
  g_sinks.erase(id);
}

}  // namespace kiln::server
