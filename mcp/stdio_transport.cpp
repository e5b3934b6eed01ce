// The stdio transport: a reader thread de-frames stdin (blocking reads work for pipes, files and
// terminals alike), a mutex serialises whole frames onto stdout, and the main thread opens the
// runtime once `initialize` is answered (kiln mcp), then waits for EOF or a termination signal and
// shuts the session down.
#include "mcp/stdio_transport.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <variant>

#include <spdlog/spdlog.h>

#include "core/fast_exit.h"
#include "core/fd_io.h"
#include "protocol/errors.h"
#include "protocol/framing.h"
#include "protocol/jsonrpc.h"

namespace kiln::server {

namespace {

using protocol::Framing;

class StdoutOutbound final : public Outbound {
 public:
  void set_mode(Framing mode) { mode_.store(mode); }

  void send(const nlohmann::json& message) override {
    std::string frame = protocol::encode_frame(protocol::serialize(message), mode_.load());
    std::lock_guard lock(mu_);
    if (broken_) return;
    // A failed write: the client went away; nothing more can be said to it.
    if (!write_all(STDOUT_FILENO, frame)) broken_ = true;
  }

  // Nothing more goes out; a frame being written is finished first.
  void seal() {
    std::lock_guard lock(mu_);
    broken_ = true;
  }

 private:
  std::mutex mu_;
  std::atomic<Framing> mode_{Framing::ndjson};
  bool broken_ = false;
};

// Until the runtime is open the reader passes on only a leading `initialize` (see run_stdio).
// The runtime opens once that is answered, so on a busy machine opening it never delays the
// answer; anything else the reader holds then waits for it.
class StartupGate {
 public:
  // The reader (or the end of input, or a signal): the runtime may open now.
  void release() {
    {
      std::lock_guard lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }
  void wait_released() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return released_; });
  }
  // Lets the opener start, then blocks until it settled; whether the runtime opened.
  bool wait() {
    std::unique_lock lock(mu_);
    released_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return state_ != State::opening; });
    return state_ == State::open;
  }
  void settle(bool opened) {
    {
      std::lock_guard lock(mu_);
      released_ = true;
      state_ = opened ? State::open : State::failed;
    }
    cv_.notify_all();
  }

 private:
  enum class State { opening, open, failed };
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
  State state_ = State::opening;
};

struct StopSignal {
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  const char* why = "";
  void raise(const char* reason) {
    {
      std::lock_guard lock(mu);
      if (stop) return;
      stop = true;
      why = reason;
    }
    cv.notify_all();
  }
};

}  // namespace

namespace {

sigset_t termination_signals() {
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGHUP);
  return sigs;
}

}  // namespace

void block_termination_signals() {
  sigset_t sigs = termination_signals();
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
}

int run_stdio(ServerContext& server, const StdioOptions& options, std::function<Result<void>()> open_runtime) {
  // Termination signals are taken synchronously by one thread; every thread created after this
  // inherits the blocked mask (main blocks them even earlier, before its first thread).
  block_termination_signals();
  sigset_t sigs = termination_signals();
  ::signal(SIGPIPE, SIG_IGN);

  auto out = std::make_shared<StdoutOutbound>();
  auto session = std::make_shared<Session>(server, out);
  auto stop = std::make_shared<StopSignal>();
  auto gate = std::make_shared<StartupGate>();
  if (!open_runtime) gate->settle(true);

  std::thread([session, out, stop, gate, max = options.max_message_bytes] {
    protocol::FrameReader reader(max);
    std::vector<char> buf(1 << 16);
    bool opened = false;  // the gate said so once: no more waiting
    bool first = true;
    for (;;) {
      ssize_t n = read_some(STDIN_FILENO, buf.data(), buf.size());
      if (n <= 0) break;
      reader.feed(std::string_view(buf.data(), std::size_t(n)));
      while (auto frame = reader.next()) {
        out->set_mode(reader.mode());
        if (!opened) {
          // `initialize` reads no state, so the first message may be answered before the runtime
          // is open; anything else waits for it (and in order, this thread being the only reader).
          std::optional<protocol::Message> early;
          if (frame->kind == protocol::Frame::Kind::message) early = protocol::classify(frame->payload);
          const auto* request = early ? std::get_if<protocol::Request>(&*early) : nullptr;
          if (!(first && request && request->method == "initialize")) {
            if (!gate->wait()) return;  // the main thread reports why and ends the process
            opened = true;
          }
          first = false;
          if (early) {
            session->handle_message(std::move(*early));
            gate->release();  // answered (inline): the runtime may open now
            continue;
          }
        }
        switch (frame->kind) {
          case protocol::Frame::Kind::message:
            session->handle_payload(frame->payload);
            break;
          case protocol::Frame::Kind::oversize:
            session->reject_unparsed(protocol::kInvalidRequest,
                                     "Invalid Request: message larger than " + std::to_string(max) +
                                         " bytes was discarded");
            break;
          case protocol::Frame::Kind::framing_error:
            session->reject_unparsed(protocol::kParseError, "Parse error: " + frame->detail);
            break;
        }
      }
    }
    stop->raise("end of input");
    gate->release();
  }).detach();

  // After the reader: it is what the client waits for.
  // The first signal stops the server as end of input does (a client may close stdin and signal
  // at the same moment); a second one means now: neither the wait for trace ends nor a client
  // that stopped reading stdout may hold it.
  std::thread([stop, gate, sigs] {
    bool signalled = false;
    for (int sig = 0; sigwait(&sigs, &sig) == 0;) {
      if (std::exchange(signalled, true)) {
        spdlog::default_logger()->flush();
        std::fflush(nullptr);
        kiln::fast_exit(0);
      }
      stop->raise(sig == SIGINT ? "SIGINT" : sig == SIGHUP ? "SIGHUP" : "SIGTERM");
      gate->release();
    }
  }).detach();

  if (open_runtime) {
    // Opened even if the client leaves before saying anything: a start still marks the runs of
    // dead servers interrupted and clears their cgroups, as it always did.
    gate->wait_released();
    auto opened = open_runtime();
    if (!opened) {
      out->seal();  // an `initialize` answer being written is finished, nothing follows it
      std::fprintf(stderr, "kiln: %s\n", opened.error().message.c_str());
      gate->settle(false);
      spdlog::default_logger()->flush();
      std::fflush(nullptr);
      kiln::fast_exit(1);
    }
    gate->settle(true);
  }
  {
    std::unique_lock lock(stop->mu);
    stop->cv.wait(lock, [&] { return stop->stop; });
  }
  spdlog::debug("stopping: {}", stop->why);
  // On end of input the client may still be reading answers to what it sent last (MCP clients
  // wait about 2 s before SIGTERM), so requests in flight get a moment to finish; a signal
  // means stop now.
  bool eof = std::string_view(stop->why) == "end of input";
  session->shutdown(eof ? std::chrono::milliseconds(1500) : std::chrono::milliseconds(0),
                    std::chrono::milliseconds(500));
  if (server.before_exit) server.before_exit();
  spdlog::default_logger()->flush();
  // Handlers that ignored cancellation must not keep the process alive; what before_exit waited
  // for is written, so leave without running destructors that would wait for them.
  std::fflush(nullptr);
  kiln::fast_exit(0);
}

}  // namespace kiln::server
