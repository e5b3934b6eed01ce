// Closing file descriptors exactly once (see UniqueFd in root.h).
#include <unistd.h>

#include "workspace/root.h"

namespace kiln::workspace {

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace kiln::workspace
