// The resource-change hub of a server process.
#include "mcp/server_shared.h"

#include <vector>

namespace kiln::server {

int ResourceEvents::subscribe(Listener listener) {
  std::lock_guard lock(mu_);
  int token = next_++;
  listeners_[token] = std::make_shared<Listener>(std::move(listener));
  return token;
}

void ResourceEvents::unsubscribe(int token) {
  std::lock_guard lock(mu_);
  listeners_.erase(token);
}

void ResourceEvents::publish(const std::string& principal, const std::string& uri) {
  std::vector<std::shared_ptr<Listener>> all;
  {
    std::lock_guard lock(mu_);
    for (const auto& [t, l] : listeners_) all.push_back(l);
  }
  // Called without the lock: a listener may unsubscribe (a session ending) meanwhile.
  for (const auto& l : all) (*l)(principal, uri);
}

int TaskEvents::subscribe(Listener listener) {
  std::lock_guard lock(mu_);
  int token = next_++;
  listeners_[token] = std::make_shared<Listener>(std::move(listener));
  return token;
}

void TaskEvents::unsubscribe(int token) {
  std::lock_guard lock(mu_);
  listeners_.erase(token);
}

void TaskEvents::publish(const std::string& principal, const TaskSnapshot& task) {
  std::vector<std::shared_ptr<Listener>> all;
  {
    std::lock_guard lock(mu_);
    for (const auto& [t, l] : listeners_) all.push_back(l);
  }
  for (const auto& l : all) (*l)(principal, task);
}

std::shared_ptr<ServerShared> make_server_shared() { return std::make_shared<ServerShared>(); }

}  // namespace kiln::server
