// One Connection per socket handed over from a sandbox: head -> decision -> resolution and
// address checks -> connect to the checked address -> (CONNECT: ClientHello SNI check) -> relay.
// Every refusal answers with a status and a body naming the rule, and lands in the run's log.
#include "sandbox/egress/egress_proxy.h"

#include <fcntl.h>
#include <ifaddrs.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "core/sigpipe_blocked.h"
#include "core/unique_fd.h"
#include "sandbox/egress/client_hello.h"
#include "sandbox/egress/proxy_request.h"

namespace kiln::egress {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

const char* enforcement_text() {
  return "an empty network namespace (loopback only); the sandbox's pid 1 accepts on a per-run 127.0.0.1 port "
         "and hands each connection to Kiln's proxy outside, which matches the name, resolves it itself, "
         "checks every address and connects to the checked one";
}

struct EgressProxy::Impl {
  Impl(asio::io_context& i, ProxyOptions o) : io(i), opt(std::move(o)) {}
  asio::io_context& io;
  ProxyOptions opt;
  std::size_t per_sandbox = 0;       // the effective cap: see ProxyOptions
  std::atomic<std::size_t> live{0};  // connections admitted and not yet destroyed, all sandboxes

  // hosts-file override
  std::mutex hosts_mu;
  std::map<std::string, std::vector<IpAddress>> hosts;
  struct timespec hosts_mtime {};
  off_t hosts_size = -1;

  std::vector<IpAddress> own;  // the host's own addresses
  Clock::time_point own_at{};

  // Addresses the hosts file maps `name` to; empty when it does not name it.
  std::vector<IpAddress> from_hosts_file(const std::string& name) {
    if (opt.hosts_file.empty()) return {};
    std::lock_guard lock(hosts_mu);
    struct stat st {};
    if (::stat(opt.hosts_file.c_str(), &st) == 0 &&
        (st.st_mtim.tv_sec != hosts_mtime.tv_sec || st.st_mtim.tv_nsec != hosts_mtime.tv_nsec ||
         st.st_size != hosts_size)) {
      hosts.clear();
      hosts_mtime = st.st_mtim;
      hosts_size = st.st_size;
      std::ifstream in(opt.hosts_file);
      std::string line;
      while (std::getline(in, line)) {
        if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
        std::istringstream words(line);
        std::string addr, n;
        if (!(words >> addr)) continue;
        auto ip = IpAddress::parse(addr);
        if (!ip) continue;
        while (words >> n) hosts[normalise_host(n)].push_back(*ip);
      }
    }
    auto it = hosts.find(name);
    return it == hosts.end() ? std::vector<IpAddress>{} : it->second;
  }

  bool is_own(const IpAddress& a) {
    if (Clock::now() - own_at > std::chrono::seconds(2)) {
      own.clear();
      own_at = Clock::now();
      ifaddrs* list = nullptr;
      if (::getifaddrs(&list) == 0) {
        for (auto* i = list; i; i = i->ifa_next)
          if (i->ifa_addr)
            if (auto ip = IpAddress::from_sockaddr(i->ifa_addr)) own.push_back(*ip);
        ::freeifaddrs(list);
      }
    }
    auto plain = a.embedded_v4().value_or(a);
    for (const auto& o : own)
      if (o == plain || o == a) return true;
    return false;
  }
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<EgressProxy::Impl> proxy, const std::shared_ptr<SandboxEgress>& sandbox,
             std::shared_ptr<NetworkLog> log)
      : proxy_(std::move(proxy)), sandbox_(sandbox), log_(std::move(log)), client_(proxy_->io), upstream_(proxy_->io),
        timer_(proxy_->io) {}
  ~Connection() {
    if (admitted_) proxy_->live.fetch_sub(1);
  }

  // `busy`: why it cannot be admitted (too many connections); answer 503 with it and close.
  // Admitted ones count against the proxy's total until they are destroyed (pipes included).
  void start(int fd, std::string busy) {
    boost::system::error_code ec;
    client_.assign(tcp::v4(), fd, ec);
    if (ec) {
      ::close(fd);
      return;
    }
    if (!busy.empty()) return answer(503, "Kiln's egress proxy: " + busy + "; close some and retry\n");
    admitted_ = true;
    proxy_->live.fetch_add(1);
    arm(proxy_->opt.head_timeout);
    read_head();
  }

  // Idempotent: the handlers still queued complete with operation_aborted and end here too.
  void close() {
    if (closed_) return;
    closed_ = true;
    boost::system::error_code ec;
    timer_.cancel();
    client_.close(ec);
    upstream_.close(ec);
    if (logged_ && entry_.allowed && log_ && index_ != std::string::npos) log_->update(index_, bytes_up_, bytes_down_, "", false);
  }

 private:
  void arm(std::chrono::milliseconds d) {
    timer_.expires_after(d);
    timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (!ec) self->close();
    });
  }

  void read_head() {
    head_.resize(head_len_ + 4096);
    client_.async_read_some(asio::buffer(head_.data() + head_len_, head_.size() - head_len_),
                            [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
                              self->on_head(ec, n);
                            });
  }

  void on_head(const boost::system::error_code& ec, std::size_t n) {
    if (ec) return close();
    head_len_ += n;
    auto parsed = parse_proxy_head(std::string_view(head_.data(), head_len_));
    if (parsed.state == HeadParse::State::need_more) return read_head();
    if (parsed.state == HeadParse::State::refused) {
      LogEntry e;
      e.kind = "bad_request";
      e.reason = parsed.error;
      e.at = now_iso8601_ms();
      e.open = false;
      if (log_) log_->add(e);
      return answer(parsed.status, parsed.error + "\n");
    }
    req_ = std::move(parsed.request);
    entry_.host = req_.host;
    entry_.port = req_.port;
    entry_.kind = req_.connect ? "connect" : "http";
    if (!req_.connect) entry_.method = req_.method;
    entry_.at = now_iso8601_ms();
    Verdict v = sandbox_->scope().decide(req_.host, req_.port);
    entry_.reason = v.reason;
    if (!v.allowed) return deny(v.reason, hint_for(v));
    if (auto literal = IpAddress::parse(req_.host)) return check_and_connect({*literal});
    auto mapped = proxy_->from_hosts_file(req_.host);
    if (!mapped.empty()) return check_and_connect(std::move(mapped));
    auto resolver = std::make_shared<tcp::resolver>(proxy_->io);
    resolver->async_resolve(req_.host, std::to_string(req_.port), tcp::resolver::numeric_service,
                            [self = shared_from_this(), resolver](const boost::system::error_code& rec,
                                                                   tcp::resolver::results_type results) {
                              if (rec) return self->fail_allowed(502, fmt::format("cannot resolve {}: {}", self->req_.host, rec.message()));
                              std::vector<IpAddress> addrs;
                              for (const auto& r : results)
                                if (auto ip = IpAddress::from_sockaddr(r.endpoint().data())) addrs.push_back(*ip);
                              self->check_and_connect(std::move(addrs));
                            });
  }

  std::string hint_for(const Verdict& v) const {
    if (v.reason.starts_with("the server's ceiling"))
      return "The server's own allowlist (kiln mcp --network-allow) does not include it; ask the person running "
             "Kiln to add it there.";
    if (v.reason.starts_with("deny ")) return "A deny entry matches it; deny wins over allow.";
    std::string name = req_.host.find(':') != std::string::npos ? "[" + req_.host + "]" : req_.host;
    std::string entry = req_.port == 80 || req_.port == 443 ? name : fmt::format("{}:{}", name, req_.port);
    return fmt::format("To allow it, add \"{}\" to network.allow (sandbox_create, sandbox_exec or kiln.json "
                       "sandbox.network).",
                       entry);
  }

  // Every address the name has must be acceptable: one private answer among public ones is how a
  // rebinding attack would slip through.
  void check_and_connect(std::vector<IpAddress> addrs) {
    if (addrs.empty()) return fail_allowed(502, fmt::format("{} has no address", req_.host));
    const Scope& scope = sandbox_->scope();
    const bool literal = IpAddress::parse(req_.host).has_value();
    for (const auto& a : addrs) {
      if (auto rule = scope.denied_address(a, req_.port)) {
        entry_.address = a.to_string();
        return deny(literal ? fmt::format("{} is denied", a.to_string())
                            : fmt::format("{} resolves to {}, which {} covers", req_.host, a.to_string(), *rule),
                    "A deny entry matches it; deny wins over allow.");
      }
      AddressClass c = classify(a);
      std::string what = c.non_public;
      if (what.empty() && proxy_->is_own(a)) what = "an address of this host";
      if (what.empty()) continue;
      bool ok = scope.allow_private() && (!c.metadata || literal);
      if (!ok) {
        std::string why = literal ? fmt::format("{} is {}", a.to_string(), what)
                                  : fmt::format("{} resolves to {}, {}", req_.host, a.to_string(), what);
        entry_.address = a.to_string();
        return deny(why, c.metadata ? "Cloud metadata addresses are refused; only an address entry with "
                                      "allow_private true reaches one."
                                    : "Set \"allow_private\": true in network to reach private and local addresses.");
      }
    }
    addrs_ = std::move(addrs);
    arm(proxy_->opt.connect_timeout);
    try_connect(0);
  }

  void try_connect(std::size_t i) {
    if (i >= addrs_.size()) return fail_allowed(502, fmt::format("cannot connect to {}:{} ({}): {}", req_.host, req_.port,
                                                                 addrs_.empty() ? "" : addrs_.back().to_string(),
                                                                 last_error_));
    const auto& a = addrs_[i];
    asio::ip::address addr;
    if (a.v6) {
      asio::ip::address_v6::bytes_type b;
      std::copy(a.bytes.begin(), a.bytes.end(), b.begin());
      addr = asio::ip::address_v6(b);
    } else {
      asio::ip::address_v4::bytes_type b;
      std::copy(a.bytes.begin(), a.bytes.begin() + 4, b.begin());
      addr = asio::ip::address_v4(b);
    }
    boost::system::error_code ec;
    upstream_.close(ec);
    upstream_.async_connect(tcp::endpoint(addr, std::uint16_t(req_.port)),
                            [self = shared_from_this(), i](const boost::system::error_code& cec) {
                              if (cec) {
                                self->last_error_ = cec.message();
                                if (cec == asio::error::operation_aborted) return self->fail_allowed(504, "connect timed out");
                                return self->try_connect(i + 1);
                              }
                              self->entry_.address = self->addrs_[i].to_string();
                              self->connected();
                            });
  }

  void connected() {
    timer_.cancel();
    boost::system::error_code ec;
    upstream_.set_option(tcp::no_delay(true), ec);
    client_.set_option(tcp::no_delay(true), ec);
    if (!req_.connect) {
      std::string first = req_.upstream_head;
      first.append(head_.data() + req_.head_bytes, head_len_ - req_.head_bytes);
      return begin_relay(std::move(first));
    }
    static const std::string ok = "HTTP/1.1 200 Connection Established\r\n\r\n";
    asio::async_write(client_, asio::buffer(ok), [self = shared_from_this()](const boost::system::error_code& wec, std::size_t) {
      if (wec) return self->close();
      self->hello_.assign(self->head_.data() + self->req_.head_bytes, self->head_len_ - self->req_.head_bytes);
      self->arm(std::chrono::seconds(10));
      self->check_hello();
    });
  }

  void check_hello() {
    ClientHello h = parse_client_hello(hello_);
    switch (h.state) {
      case ClientHello::State::need_more: {
        std::size_t old = hello_.size();
        hello_.resize(old + 16384);
        client_.async_read_some(asio::buffer(hello_.data() + old, 16384),
                                [self = shared_from_this(), old](const boost::system::error_code& ec, std::size_t n) {
                                  self->hello_.resize(old + n);
                                  if (ec) return self->deny_quietly("the client closed the tunnel before sending anything");
                                  self->check_hello();
                                });
        return;
      }
      case ClientHello::State::not_tls:
        if (sandbox_->scope().explicit_port(req_.host, req_.port)) break;
        return deny_quietly(fmt::format("the tunnel does not start with a TLS ClientHello; a raw tunnel needs an "
                                        "allow entry naming the port (\"{}:{}\")",
                                        req_.host, req_.port));
      case ClientHello::State::malformed: return deny_quietly("malformed TLS ClientHello: " + h.error);
      case ClientHello::State::ok:
        if (!h.server_name) {
          if (IpAddress::parse(req_.host)) break;
          return deny_quietly(fmt::format("the TLS ClientHello names no server; it must name {}", req_.host));
        }
        if (normalise_host(*h.server_name) != req_.host)
          return deny_quietly(fmt::format("the TLS server name {} differs from the CONNECT host {}",
                                          h.server_name->substr(0, 255), req_.host));
        break;
    }
    timer_.cancel();
    begin_relay(std::move(hello_));
  }

  void begin_relay(std::string first_up) {
    entry_.allowed = true;
    entry_.open = true;
    if (log_) index_ = log_->add(entry_);
    logged_ = true;
    if (index_ == std::string::npos) log_.reset();  // past the log's cap: the totals were counted at add
    spliced_ = open_pipes();
    if (!spliced_) {  // no descriptors left for pipes: copy through Kiln instead
      up_.buf.resize(64 * 1024);
      down_.buf.resize(64 * 1024);
    }
    if (!first_up.empty()) {
      auto data = std::make_shared<std::string>(std::move(first_up));
      asio::async_write(upstream_, asio::buffer(*data),
                        [self = shared_from_this(), data](const boost::system::error_code& ec, std::size_t n) {
                          self->bytes_up_ += n;
                          if (ec) return self->close();
                          self->pump(true);
                        });
    } else {
      pump(true);
    }
    pump(false);
  }

  // A relay direction moves bytes socket -> pipe -> socket with splice(2): the kernel hands the
  // pages on without copying them into Kiln and out again (the extra hop is most of a relay's cost).
  struct Pump {
    UniqueFd pipe_r, pipe_w;
    std::size_t in_pipe = 0;  // bytes read from `from` not yet written to `to`
    std::vector<char> buf;    // without pipes: the copy's buffer
    bool done = false;
  };
  static constexpr std::size_t kPipeBytes = 1 << 20;

  // False when the process is out of descriptors (or its pipe quota): the relay then copies.
  bool open_pipes() {
    for (Pump* p : {&up_, &down_}) {
      int fds[2];
      if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return false;
      p->pipe_r = UniqueFd(fds[0]);
      p->pipe_w = UniqueFd(fds[1]);
      // A bigger pipe moves more per wake-up; refused past the user's pipe quota, the default is fine.
      ::fcntl(fds[1], F_SETPIPE_SZ, static_cast<int>(kPipeBytes));
    }
    boost::system::error_code ec;
    client_.native_non_blocking(true, ec);
    if (!ec) upstream_.native_non_blocking(true, ec);
    return !ec;
  }

  // up: client -> upstream; down: upstream -> client. EOF on one side half-closes the other.
  void pump(bool up) {
    if (!spliced_) return copy(up);
    tcp::socket& from = up ? client_ : upstream_;
    from.async_wait(tcp::socket::wait_read, [self = shared_from_this(), up](const boost::system::error_code& ec) {
      if (ec) return self->close();
      self->fill(up);
    });
  }

  void fill(bool up) {
    tcp::socket& from = up ? client_ : upstream_;
    Pump& p = up ? up_ : down_;
    const ssize_t n = ::splice(from.native_handle(), nullptr, p.pipe_w.get(), nullptr, kPipeBytes,
                               SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n > 0) {
      p.in_pipe = static_cast<std::size_t>(n);
      return drain(up);
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return pump(up);
    if (n < 0) return close();
    end_of(up);
  }

  void end_of(bool up) {
    tcp::socket& to = up ? upstream_ : client_;
    boost::system::error_code ignore;
    to.shutdown(tcp::socket::shutdown_send, ignore);
    (up ? up_ : down_).done = true;
    if (up_.done && down_.done) close();
  }

  void copy(bool up) {
    tcp::socket& from = up ? client_ : upstream_;
    Pump& p = up ? up_ : down_;
    from.async_read_some(asio::buffer(p.buf), [self = shared_from_this(), up](const boost::system::error_code& ec, std::size_t n) {
      if (ec == asio::error::eof) return self->end_of(up);
      if (ec) return self->close();
      tcp::socket& to = up ? self->upstream_ : self->client_;
      Pump& p = up ? self->up_ : self->down_;
      asio::async_write(to, asio::buffer(p.buf.data(), n), [self, up](const boost::system::error_code& wec, std::size_t w) {
        (up ? self->bytes_up_ : self->bytes_down_) += w;
        if (wec) return self->close();
        self->counted();
        self->pump(up);
      });
    });
  }

  // Counted as they go, so a run that ends while its connection is still closing has them.
  void counted() {
    if (log_ && !closed_) log_->update(index_, bytes_up_, bytes_down_, "", true);
  }

  void drain(bool up) {
    tcp::socket& to = up ? upstream_ : client_;
    Pump& p = up ? up_ : down_;
    // splice(2) has no MSG_NOSIGNAL: a peer gone mid-write must end this relay, not the process.
    SigpipeBlocked no_sigpipe;
    while (p.in_pipe > 0) {
      const ssize_t w = ::splice(p.pipe_r.get(), nullptr, to.native_handle(), nullptr, p.in_pipe,
                                 SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (w > 0) {
        p.in_pipe -= static_cast<std::size_t>(w);
        (up ? bytes_up_ : bytes_down_) += static_cast<std::uint64_t>(w);
        continue;
      }
      if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
        return to.async_wait(tcp::socket::wait_write, [self = shared_from_this(), up](const boost::system::error_code& ec) {
          if (ec) return self->close();
          self->drain(up);
        });
      }
      return close();
    }
    counted();
    pump(up);
  }

  void answer(int status, const std::string& body) {
    const char* text = status == 403 ? "Forbidden" : status == 502 ? "Bad Gateway" : status == 504 ? "Gateway Timeout"
                       : status == 431 ? "Request Header Fields Too Large" : status == 503 ? "Service Unavailable"
                                                                          : "Bad Request";
    auto msg = std::make_shared<std::string>(fmt::format(
        "HTTP/1.1 {} {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n"
        "X-Kiln-Egress: {}\r\n\r\n{}",
        status, text, body.size(), status == 403 ? "denied" : "error", body));
    asio::async_write(client_, asio::buffer(*msg), [self = shared_from_this(), msg](const boost::system::error_code&, std::size_t) {
      boost::system::error_code ignore;
      self->client_.shutdown(tcp::socket::shutdown_send, ignore);
      self->close();
    });
  }

  void deny(const std::string& why, const std::string& hint) {
    entry_.allowed = false;
    entry_.reason = why;
    entry_.open = false;
    if (log_) log_->add(entry_);
    logged_ = true;
    std::string target = req_.host.find(':') != std::string::npos ? "[" + req_.host + "]" : req_.host;
    answer(403, fmt::format("Kiln's network allowlist refused {}:{}: {}.\n{}\n", target, req_.port, why, hint));
  }

  // After a 200 to CONNECT nothing more can be said in HTTP: the refusal is the closed tunnel and
  // the log entry.
  void deny_quietly(const std::string& why) {
    entry_.allowed = false;
    entry_.reason = why;
    entry_.open = false;
    if (log_) log_->add(entry_);
    logged_ = true;
    close();
  }

  // The rule allowed it but the destination could not be reached.
  void fail_allowed(int status, const std::string& why) {
    entry_.allowed = true;
    entry_.error = why;
    entry_.open = false;
    if (log_) log_->add(entry_);
    logged_ = true;
    answer(status, fmt::format("Kiln's network allowlist allowed {}:{} ({}), but: {}\n", req_.host, req_.port,
                               entry_.reason, why));
  }

  bool closed_ = false;

  std::shared_ptr<EgressProxy::Impl> proxy_;
  std::shared_ptr<SandboxEgress> sandbox_;
  std::shared_ptr<NetworkLog> log_;
  tcp::socket client_, upstream_;
  asio::steady_timer timer_;
  std::vector<char> head_;
  std::size_t head_len_ = 0;
  ProxyRequest req_;
  LogEntry entry_;
  std::vector<IpAddress> addrs_;
  std::string last_error_;
  std::string hello_;
  Pump up_, down_;
  bool spliced_ = false;
  std::uint64_t bytes_up_ = 0, bytes_down_ = 0;
  std::size_t index_ = std::string::npos;
  bool logged_ = false;
  bool admitted_ = false;
};

void SandboxEgress::close_all() {
  closed_ = true;
  auto live = std::move(live_);
  live_.clear();
  for (auto& w : live)
    if (auto c = w.lock()) c->close();
}

EgressProxy::EgressProxy(asio::io_context& io, ProxyOptions options)
    : impl_(std::make_shared<Impl>(io, std::move(options))) {
  if (impl_->opt.hosts_file.empty())
    if (const char* h = std::getenv("KILN_EGRESS_HOSTS"); h && *h) impl_->opt.hosts_file = h;
  auto& total = impl_->opt.max_connections_total;
  if (total == 0) {
    rlimit files{};
    const rlim_t soft = ::getrlimit(RLIMIT_NOFILE, &files) == 0 ? files.rlim_cur : 1024;
    total = soft == RLIM_INFINITY ? 100000 : std::max<std::size_t>(16, soft / 2 / 6);
  }
  impl_->per_sandbox = std::min(impl_->opt.max_connections_per_sandbox, std::max<std::size_t>(8, total / 4));
}

EgressProxy::~EgressProxy() = default;

void EgressProxy::serve(UniqueFd client, const std::shared_ptr<SandboxEgress>& sandbox,
                        const std::shared_ptr<NetworkLog>& log) {
  if (!sandbox || sandbox->closed_) return;
  std::erase_if(sandbox->live_, [](const std::weak_ptr<Connection>& w) { return w.expired(); });
  auto conn = std::make_shared<Connection>(impl_, sandbox, log);
  std::string busy;
  if (sandbox->live_.size() >= impl_->per_sandbox)
    busy = fmt::format("this sandbox has {} connections open already, the most one sandbox may hold", sandbox->live_.size());
  else if (impl_->live.load() >= impl_->opt.max_connections_total)
    busy = fmt::format("{} connections are open through it across all sandboxes, the most Kiln's open-file limit "
                       "leaves room for",
                       impl_->live.load());
  if (busy.empty()) sandbox->live_.push_back(conn);
  conn->start(client.release(), std::move(busy));
}

}  // namespace kiln::egress
