// The connection's side of the reverse proxy: a claimed request waits (bounded) for the route's
// decision, which may come from any thread; an answer goes out like any other, an upstream starts
// a ProxyExchange; afterwards the connection reads its next request as usual.
#include <atomic>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "http/proxy_exchange.h"

namespace kiln::server::http {

namespace {

thread_local Session* g_deciding = nullptr;  // see start_proxy

// A decision on its way to the connection. If its upstream is never used (the connection went
// away, the decision came too late or twice), its `done` still runs, once.
struct PendingDecision {
  ProxyDecision decision;
  ~PendingDecision() {
    if (decision.upstream && decision.upstream->done) {
      ProxyOutcome unused;
      unused.upstream_failed = true;
      decision.upstream->done(std::move(unused));
    }
  }
};

}  // namespace

void Session::start_proxy(Request head) {
  not_evictable();  // an exchange may stream for long; eviction is for connections without a request
  busy_ = true;
  auto& m = parser_->get();
  keep_alive_ = m.keep_alive();
  http11_ = m.version() >= 11;
  stream_.expires_never();  // the exchange keeps its own timeouts
  const ProxyRoute& route = *srv_.options.proxy;
  auto replied = std::make_shared<std::atomic<bool>>(false);
  auto self = shared_from_this();
  wait_timer_.expires_after(route.decide_timeout);
  wait_timer_.async_wait([self, replied](beast::error_code ec) {
    if (ec || replied->exchange(true)) return;
    self->fail(504, "The app did not become ready in time.");
  });
  std::weak_ptr<Session> weak = self;
  // Set while decide() runs on this connection's thread: a reply made inside it is this
  // connection's own, on its own thread, with nothing of it in progress.
  struct Deciding {
    Session* prev;
    explicit Deciding(Session* s) : prev(g_deciding) { g_deciding = s; }
    ~Deciding() { g_deciding = prev; }
  } deciding(this);
  route.decide(head, [weak, gate = srv_.proxy_gate, replied](ProxyDecision d) {
    auto pending = std::make_shared<PendingDecision>(std::move(d));  // released after the lock below
    if (replied->exchange(true)) return;
    std::unique_lock lock(gate->mu);
    if (!gate->open) return;
    auto s = weak.lock();
    if (!s) return;
    if (g_deciding == s.get()) {
      // Decided at once, inside start_proxy (the common case: a public app, or a cookie, for an
      // app that runs): no trip through the io loop. (This looked for the connection's strand,
      // which connections lost with their io_context of their own, so every reply was posted.)
      // The loop runs, so the server is alive; and the exchange may drop a pooled socket, which
      // takes the gate: let it go first.
      lock.unlock();
      return s->on_decision(pending->decision);
    }
    net::post(s->executor(), [s, pending] { s->on_decision(pending->decision); });
  });
}

void Session::on_decision(ProxyDecision& d) {
  wait_timer_.cancel();
  if (closed_) return;
  if (d.answer) {
    Response r = std::move(*d.answer);
    if (parser_->get().method() == bhttp::verb::head) r.head = true;
    // Nothing of the request left unread: the connection may go on.
    if (parser_->is_done()) return write(std::move(r));
    return refuse_early(std::move(r));
  }
  if (!d.upstream) return fail(502, "The proxy route named no upstream.");
  auto exchange = std::make_shared<ProxyExchange>(shared_from_this(), std::move(*d.upstream));
  d.upstream.reset();
  proxy_ = exchange;
  exchange->start();
}

void Session::proxy_ended(bool keep, bool drain) {
  proxy_.reset();
  if (!keep) keep_alive_ = false;
  drain_ = drain;
  done();
}

}  // namespace kiln::server::http
