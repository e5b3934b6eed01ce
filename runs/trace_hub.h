// Fans "trace X changed" out to every session of this process, so a client subscribed to
// kiln://trace/X hears about output and the end of a run started by any session.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>

namespace kiln::server {

class TraceHub {
 public:
  using Listener = std::function<void(const std::string& trace_id)>;

  int listen(Listener l) {
    std::lock_guard lock(mu_);
    listeners_[++next_] = std::move(l);
    return next_;
  }
  void unlisten(int token) {
    std::lock_guard lock(mu_);
    listeners_.erase(token);
  }
  void changed(const std::string& trace_id) const {
    std::map<int, Listener> copy;
    {
      std::lock_guard lock(mu_);
      copy = listeners_;
    }
    for (const auto& [token, l] : copy) l(trace_id);
  }

 private:
  mutable std::mutex mu_;
  std::map<int, Listener> listeners_;
  int next_ = 0;
};

}  // namespace kiln::server
