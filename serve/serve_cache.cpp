// ServeCache's change signal: every commit, by any process, writes the database's WAL, and
// inotify reports that write; each lookup drains the queue (one non-blocking read) and any event
// on the database becomes a new generation, which drops every kept answer and access rule. Each
// thread reads an inotify instance of its own, so a lookup takes no lock. The one-second expiry
// covers what no file event shows (an artifact's share running out by time).
#include "serve/serve_cache.h"

#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include <spdlog/spdlog.h>

namespace kiln::server::http {
namespace {

constexpr std::size_t kMaxEntries = 4096;
std::atomic<std::uint64_t> g_next_cache_id{1};

void fill(const std::string& path, std::int64_t* out) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;  // all zero: absent
  out[0] = static_cast<std::int64_t>(st.st_ino);
  out[1] = static_cast<std::int64_t>(st.st_size);
  out[2] = static_cast<std::int64_t>(st.st_mtim.tv_sec);
  out[3] = static_cast<std::int64_t>(st.st_mtim.tv_nsec);
}

}  // namespace

int ServeCache::add_watch(int fd) const {
  constexpr std::uint32_t kEvents = IN_MODIFY | IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE |
                                    IN_DELETE_SELF | IN_MOVE_SELF;
  return ::inotify_add_watch(fd, dir_.c_str(), kEvents);
}

ServeCache::ServeCache(std::string dir, std::string db_name, std::chrono::milliseconds ttl)
    : dir_(std::move(dir)), db_name_(std::move(db_name)), wal_name_(db_name_ + "-wal"), ttl_(ttl),
      id_(g_next_cache_id.fetch_add(1)) {
  inotify_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotify_ >= 0 && add_watch(inotify_) >= 0) return;
  spdlog::warn("serve: no inotify on {} ({}); the serving cache checks the database with stat instead", dir_,
               std::strerror(errno));
  if (inotify_ >= 0) ::close(inotify_);
  inotify_ = -1;
}

ServeCache::~ServeCache() {
  if (inotify_ >= 0) ::close(inotify_);
  for (int fd : thread_fds_) ::close(fd);
}

bool ServeCache::drain(int fd) const {
  alignas(inotify_event) char buf[8192];
  bool relevant = false;
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) {
    for (ssize_t off = 0; off < n;) {
      auto* ev = reinterpret_cast<inotify_event*>(buf + off);
      std::string_view name = ev->len ? std::string_view(ev->name) : std::string_view();
      // The log is written all the time; the database and its WAL only on a change. A lost
      // queue (IN_Q_OVERFLOW) or a moved directory could hide one, so they count too.
      if (name == db_name_ || name == wal_name_ || (ev->mask & (IN_Q_OVERFLOW | IN_DELETE_SELF | IN_MOVE_SELF))) {
        relevant = true;
      }
      off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
    }
  }
  return relevant;
}

void ServeCache::on_events() const {
  // One reader at a time, and the generation moves before the lock is let go: a request that
  // starts after an unpublish returned must see the change even if another thread read the event.
  std::lock_guard lock(drain_mu_);
  if (drain(inotify_)) generation_.fetch_add(1, std::memory_order_acq_rel);
}

int ServeCache::thread_fd() const {
  // Hot path: this thread's instance for this cache (ids are never reused, so an entry of a
  // cache that is gone never matches; its descriptor was closed with it).
  thread_local std::vector<std::pair<std::uint64_t, int>> mine;
  for (const auto& [id, fd] : mine)
    if (id == id_) return fd;
  int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd >= 0 && add_watch(fd) < 0) {
    ::close(fd);
    fd = -1;
  }
  if (fd >= 0) {
    std::lock_guard lock(thread_fds_mu_);
    thread_fds_.push_back(fd);
  }
  // Watching from now on; whatever happened before is in the shared queue, read once here.
  on_events();
  mine.emplace_back(id_, fd);  // -1 too: past the limit on instances, the shared queue it is
  return fd;
}

std::string ServeCache::key(Kind kind, const std::string& name, std::optional<int> version, const std::string& rel) {
  std::string k(1, static_cast<char>(kind));
  k += '\n';
  k += name;
  k += '\n';
  k += version ? std::to_string(*version) : std::string("latest");
  k += '\n';
  k += rel;
  return k;
}

ServeCache::Stamp ServeCache::stamp() const {
  Stamp s;
  if (inotify_ >= 0) {
    // inotify queues an event inside the writer's write(2); reading the queue here (one
    // non-blocking read) rather than waiting for the event loop makes a publish, share change or
    // unpublish visible to the very next request. Every instance gets every event, so reading
    // this thread's own queue is enough, and no other thread has to be waited for.
    if (int fd = thread_fd(); fd >= 0) {
      if (drain(fd)) generation_.fetch_add(1, std::memory_order_acq_rel);
    } else {
      on_events();
    }
    s.a[0] = generation_.load(std::memory_order_acquire);
    return s;
  }
  fill(dir_ + "/" + db_name_, s.a);
  fill(dir_ + "/" + wal_name_, s.a + 4);
  return s;
}

std::optional<ServeCache::Hit> ServeCache::get(const std::string& key, const Stamp& now_stamp) {
  auto now = std::chrono::steady_clock::now();
  {
    std::shared_lock lock(mu_);
    if (now_stamp == seen_) {
      auto it = entries_.find(key);
      if (it == entries_.end() || it->second.until < now) return std::nullopt;
      return it->second.hit;
    }
  }
  std::unique_lock lock(mu_);
  if (!(now_stamp == seen_)) reset_locked(now_stamp);
  return std::nullopt;
}

void ServeCache::reset_locked(const Stamp& now) {
  entries_.clear();
  rules_.clear();
  seen_ = now;
}

std::shared_ptr<const artifacts::AccessRules> ServeCache::rules(const std::string& name, const Stamp& now_stamp) {
  auto now = std::chrono::steady_clock::now();
  {
    std::shared_lock lock(mu_);
    if (now_stamp == seen_) {
      auto it = rules_.find(name);
      if (it == rules_.end() || it->second.until < now) return nullptr;
      return it->second.rules;
    }
  }
  std::unique_lock lock(mu_);
  if (!(now_stamp == seen_)) reset_locked(now_stamp);
  return nullptr;
}

void ServeCache::put_rules(std::shared_ptr<const artifacts::AccessRules> rules, const Stamp& before) {
  if (!rules || !(stamp() == before)) return;  // the database changed while they were read
  std::unique_lock lock(mu_);
  if (!(before == seen_)) reset_locked(before);
  if (rules_.size() >= kMaxEntries) rules_.clear();
  std::string name = rules->name;
  rules_[std::move(name)] = RulesEntry{std::move(rules), std::chrono::steady_clock::now() + ttl_};
}

void ServeCache::put(const std::string& key, Hit hit, const Stamp& before) {
  if (!(stamp() == before)) return;  // the answer may already be out of date
  std::unique_lock lock(mu_);
  if (!(before == seen_)) reset_locked(before);
  if (entries_.size() >= kMaxEntries) entries_.clear();
  entries_[key] = Entry{std::move(hit), std::chrono::steady_clock::now() + ttl_};
}

}  // namespace kiln::server::http
