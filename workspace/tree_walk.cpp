// A small pool of std::jthread workers sharing a LIFO of folders. LIFO keeps the walk roughly
// depth-first, so only the folders along the current paths hold descriptors (a folder is opened
// lazily from its parent's descriptor when a worker takes it), not every pending one.
#include "workspace/tree_walk.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/fd_io.h"

namespace kiln::workspace {

namespace {

constexpr size_t kMaxIgnoreFileBytes = 4u << 20;  // a bigger "ignore file" is not one

bool read_small_file(int dir_fd, const char* name, std::string& out) {
  int fd = ::openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return false;
  UniqueFd owner(fd);
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) > kMaxIgnoreFileBytes) {
    return false;
  }
  out.resize(static_cast<size_t>(st.st_size));
  ssize_t got = read_full(fd, out.data(), out.size());
  if (got < 0) return false;
  out.resize(static_cast<size_t>(got));
  return true;
}

EntryType type_of_mode(mode_t m) {
  if (S_ISREG(m)) return EntryType::file;
  if (S_ISDIR(m)) return EntryType::dir;
  if (S_ISLNK(m)) return EntryType::symlink;
  return EntryType::other;
}

struct Task {
  std::shared_ptr<UniqueFd> parent;  // null only for the start folder, whose fd is `own`
  UniqueFd own;
  std::string name;
  std::string rel;
  int depth = 0;  // of this folder; the start is 0
  IgnoreChain::Ptr ignore;
};

// Worker threads of all walks in the process together, beyond the threads that asked for them:
// a session's many requests walking at once (searches, listings, checkpoints) share the cores
// instead of starting a pool each, so the threads stay bounded by the cores, not by the requests
// in flight. A walk that finds no slot free works on its caller's thread alone.
class WorkerSlots {
 public:
  unsigned take(unsigned want) {
    int have = free_.load(std::memory_order_relaxed);
    for (;;) {
      int got = std::min(have, int(want));
      if (got <= 0) return 0;
      if (free_.compare_exchange_weak(have, have - got, std::memory_order_acq_rel)) return unsigned(got);
    }
  }
  void give(unsigned n) { free_.fetch_add(int(n), std::memory_order_acq_rel); }

 private:
  std::atomic<int> free_{int(std::max(2u, std::thread::hardware_concurrency()))};
};

WorkerSlots& worker_slots() {
  static WorkerSlots slots;
  return slots;
}

struct Listed {
  std::string path;
  size_t name_at;
  EntryType type;
};

class Walker {
 public:
  Walker(const WalkOptions& o, std::stop_token stop, const WalkVisitor& visit)
      : opts_(o), external_(std::move(stop)), visit_(visit) {}

  Result<WalkStats> run(Task start) {
    unsigned n = walk_thread_count(opts_);
    stack_.push_back(std::move(start));
    std::stop_callback wake(external_, [this] {
      std::lock_guard lk(mu_);
      cv_.notify_all();
    });
    // Threads from the process's slots unless the caller asked for a number. One thread is no
    // better than the caller's own, which waits anyway; ticks need a worker beside the caller's
    // thread, so a ticking walk has one even when no slot is free.
    unsigned slots = 0;
    if (opts_.threads == 0) {
      slots = worker_slots().take(n);
      if (slots < 2 && !opts_.on_tick) {
        worker_slots().give(slots);
        slots = 0;
      }
      n = opts_.on_tick ? std::max(slots, 1u) : slots;
    }
    struct GiveBack {
      unsigned n;
      ~GiveBack() {
        if (n) worker_slots().give(n);
      }
    } give_back{slots};
    // One worker (or none free) and no ticks: the caller's own thread does the work (a one-folder
    // listing, as each automatic checkpoint makes, would otherwise pay for starting a thread).
    if (n <= 1 && !opts_.on_tick) {
      work(0);
    } else {
      std::vector<std::jthread> workers;
      workers.reserve(n);
      for (unsigned i = 0; i < n; ++i) workers.emplace_back([this, i] { work(i); });
      std::unique_lock lk(mu_);
      while (!finished_) {
        if (opts_.on_tick) {
          cv_.wait_for(lk, opts_.tick_interval, [this] { return finished_; });
          if (finished_) break;
          lk.unlock();
          opts_.on_tick();
          lk.lock();
        } else {
          cv_.wait(lk, [this] { return finished_; });
        }
      }
    }  // joins the workers
    if (!failure_.empty()) return fail(Errc::internal, "directory walk failed: " + failure_);
    if (external_.stop_requested()) return fail(Errc::cancelled, "the walk was cancelled");
    return stats_;
  }

 private:
  bool stopping() const { return external_.stop_requested() || abort_.load(std::memory_order_relaxed); }

  void work(unsigned worker) {
    std::vector<char> buf(64 * 1024);
    std::vector<Listed> entries;
    std::vector<Task> children;
    for (;;) {
      Task task;
      {
        std::unique_lock lk(mu_);
        cv_.wait(lk, [this] { return !stack_.empty() || active_ == 0 || stopping(); });
        if (stopping() || (stack_.empty() && active_ == 0)) {
          finished_ = true;
          cv_.notify_all();
          return;
        }
        task = std::move(stack_.back());
        stack_.pop_back();
        ++active_;
      }
      try {
        process(task, worker, buf, entries, children);
      } catch (const std::exception& e) {
        std::lock_guard lk(mu_);
        if (failure_.empty()) failure_ = e.what();
        abort_ = true;
      } catch (...) {
        std::lock_guard lk(mu_);
        if (failure_.empty()) failure_ = "unknown exception";
        abort_ = true;
      }
      std::lock_guard lk(mu_);
      --active_;
      if (active_ == 0 && stack_.empty()) finished_ = true;
      if (finished_ || abort_) cv_.notify_all();
    }
  }

  void process(Task& task, unsigned worker, std::vector<char>& buf, std::vector<Listed>& entries,
               std::vector<Task>& children) {
    int fd = task.own ? task.own.release()
                      : ::openat(task.parent->get(), task.name.c_str(),
                                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      std::lock_guard lk(mu_);
      ++stats_.unreadable;
      return;
    }
    auto dir = std::make_shared<UniqueFd>(fd);
    task.parent.reset();  // the parent's descriptor is no longer needed by this folder
    if (opts_.on_folder_open) opts_.on_folder_open(task.rel, fd);
    IgnoreChain::Ptr chain = opts_.include_ignored ? nullptr : extend_ignore_chain(task.ignore, fd, task.rel);
    int child_depth = task.depth + 1;
    bool descend = opts_.max_depth <= 0 || child_depth < opts_.max_depth;

    entries.clear();
    children.clear();
    bool read_failed = false;
    for (;;) {
      ssize_t n = ::getdents64(fd, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) read_failed = true;
      if (n <= 0) break;
      for (ssize_t off = 0; off < n;) {
        auto* d = reinterpret_cast<struct dirent64*>(buf.data() + off);
        off += d->d_reclen;
        std::string_view name(d->d_name);
        if (name == "." || name == ".." || name == ".git") continue;
        EntryType type;
        switch (d->d_type) {
          case DT_REG: type = EntryType::file; break;
          case DT_DIR: type = EntryType::dir; break;
          case DT_LNK: type = EntryType::symlink; break;
          case DT_UNKNOWN: {
            struct stat st{};
            if (::fstatat(fd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // vanished
            type = type_of_mode(st.st_mode);
            break;
          }
          default: type = EntryType::other; break;
        }
        Listed e;
        e.path.reserve(task.rel.size() + 1 + name.size());
        if (!task.rel.empty()) {
          e.path = task.rel;
          e.path += '/';
        }
        e.name_at = e.path.size();
        e.path += name;
        e.type = type;
        if (chain && chain->ignored(e.path, type == EntryType::dir)) continue;
        if (e.path.size() > kMaxWalkPath) {
          too_deep(e.path);
          continue;
        }
        if (type == EntryType::dir && descend && below_root(e.path) >= kMaxWalkDepth) {
          too_deep(e.path);  // visited, not entered
        } else if (type == EntryType::dir && descend) {
          Task child;
          child.parent = dir;
          child.name = std::string(name);
          child.rel = e.path;
          child.depth = child_depth;
          child.ignore = chain;
          children.push_back(std::move(child));
        }
        entries.push_back(std::move(e));
      }
    }
    {
      std::lock_guard lk(mu_);
      ++stats_.dirs;
      if (read_failed) ++stats_.unreadable;
      // Pushed in reverse so the LIFO hands them out in directory order.
      for (auto it = children.rbegin(); it != children.rend(); ++it) stack_.push_back(std::move(*it));
      if (!children.empty()) cv_.notify_all();
    }
    for (const auto& e : entries) {
      if (stopping()) return;
      WalkEntry we{e.path, std::string_view(e.path).substr(e.name_at), e.type, child_depth, fd};
      visit_(we, worker);
    }
  }

  // How many folders deep `path` (relative to the workspace root) is: "a" 1, "a/b" 2.
  static int below_root(std::string_view path) { return 1 + int(std::ranges::count(path, '/')); }

  void too_deep(std::string_view path) {
    std::lock_guard lk(mu_);
    if (stats_.too_deep++ == 0) stats_.first_too_deep = std::string(path.substr(0, kMaxWalkPath));
  }

  const WalkOptions& opts_;
  std::stop_token external_;
  const WalkVisitor& visit_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Task> stack_;
  size_t active_ = 0;
  bool finished_ = false;
  std::atomic<bool> abort_{false};
  std::string failure_;
  WalkStats stats_;
};

}  // namespace

std::string_view to_string(EntryType type) {
  switch (type) {
    case EntryType::file: return "file";
    case EntryType::dir: return "dir";
    case EntryType::symlink: return "symlink";
    case EntryType::other: return "other";
  }
  return "other";
}

bool path_less(std::string_view a, std::string_view b) {
  size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    if (a[i] == b[i]) continue;
    if (a[i] == '/') return true;
    if (b[i] == '/') return false;
    return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[i]);
  }
  return a.size() < b.size();
}

unsigned walk_thread_count(const WalkOptions& options) {
  if (options.threads > 0) return options.threads;
  return std::max(2u, std::thread::hardware_concurrency());
}

IgnoreChain::Ptr extend_ignore_chain(IgnoreChain::Ptr parent, int dir_fd, const std::string& rel) {
  IgnoreRules rules(rel);
  std::string text;
  // Ascending precedence: exclude < .gitignore < .ignore (ripgrep's order), last match wins.
  if (rel.empty() && read_small_file(dir_fd, ".git/info/exclude", text)) rules.add(text);
  if (read_small_file(dir_fd, ".gitignore", text)) rules.add(text);
  if (read_small_file(dir_fd, ".ignore", text)) rules.add(text);
  return IgnoreChain::push(std::move(parent), std::move(rules));
}

IgnoreChain::Ptr load_ignore_chain(const Root& root, std::string_view rel) {
  IgnoreChain::Ptr chain;
  std::string prefix;
  size_t i = 0;
  for (;;) {
    auto fd = root.open(prefix.empty() ? "." : prefix, O_RDONLY | O_DIRECTORY);
    if (!fd) return chain;
    chain = extend_ignore_chain(std::move(chain), fd->get(), prefix);
    if (i >= rel.size()) return chain;
    size_t slash = rel.find('/', i);
    if (slash == std::string_view::npos) slash = rel.size();
    prefix = std::string(rel.substr(0, slash));
    i = slash + 1;
  }
}

Result<WalkStats> walk(const Root& root, const WalkOptions& options, std::stop_token stop, const WalkVisitor& visit) {
  auto fd = root.open(options.start.empty() ? "." : options.start, O_RDONLY | O_DIRECTORY);
  if (!fd) return std::unexpected(fd.error());
  Task start;
  start.own = std::move(*fd);
  start.rel = options.start;
  if (!options.include_ignored && !options.start.empty()) {
    size_t slash = options.start.rfind('/');
    start.ignore = load_ignore_chain(root, slash == std::string::npos ? "" : options.start.substr(0, slash));
  }
  Walker w(options, std::move(stop), visit);
  return w.run(std::move(start));
}

Result<bool> is_folder_beneath(const Root& root, std::string_view rel, std::string_view shown) {
  auto target = root.open(rel.empty() ? std::string_view(".") : rel, O_PATH);
  if (!target) return std::unexpected(target.error());
  struct stat st{};
  if (::fstat(target->get(), &st) != 0) {
    return fail(Errc::io, fmt::format("cannot inspect '{}': {}", shown, std::strerror(errno)));
  }
  return S_ISDIR(st.st_mode);
}

}  // namespace kiln::workspace
