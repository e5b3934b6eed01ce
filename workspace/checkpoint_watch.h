// Which folders of a workspace changed since its last scan, from inotify, so an automatic
// checkpoint around a run re-reads only those (a run that changed nothing costs nothing).
// Watches are added as the scan meets each folder, before the folder is read, so a change made
// while the scan runs is never lost; anything the watch cannot vouch for (a queue overflow, a
// folder renamed, an ignore file edited) asks for a full scan.
// Watches come from a per-user pool the whole host shares (fs.inotify.max_user_watches), and a
// command in a sandbox can make as many folders as it likes: all of Kiln's workspaces together
// take at most a quarter of the pool (kMaxWatchesShare). A workspace whose next watch would pass
// that gives all its watches back and scans everything at each checkpoint from then on.
#pragma once

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

namespace kiln::workspace {

class WorkspaceWatch {
 public:
  // Null when inotify is unavailable (then every checkpoint scans everything).
  static std::unique_ptr<WorkspaceWatch> start(const std::string& root_path);
  ~WorkspaceWatch();
  WorkspaceWatch(const WorkspaceWatch&) = delete;
  WorkspaceWatch& operator=(const WorkspaceWatch&) = delete;

  // Watches folder `rel` ("" the root) through its open descriptor (the folder the walk is about
  // to read, whatever its path says by now). A watch that cannot be added makes the next drain
  // ask for everything.
  void add(const std::string& rel, int dir_fd);

  // The watches all of this process's workspaces may hold together.
  static std::size_t budget();

  struct Dirty {
    bool all = false;           // rescan everything
    std::set<std::string> dirs; // folders whose direct entries changed
  };
  // What happened since the last drain.
  Dirty drain();

 private:
  explicit WorkspaceWatch(int fd) : fd_(fd) {}
  void give_up();  // mu_ held: close the descriptor (every watch with it), scan everything from now on
  int fd_;
  std::mutex mu_;
  std::unordered_map<int, std::string> dirs_;  // watch descriptor -> folder
  bool lost_ = false;
  bool gave_up_ = false;
};

}  // namespace kiln::workspace
