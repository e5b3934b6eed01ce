// Small fd helpers shared by the outer process, pid 1 and exec children; all async-signal-safe
// enough to use between fork and exec (no allocation).
#pragma once

#include <cstddef>
#include <string>

#include "core/fd_io.h"  // write_all, read_all

namespace kiln::helper {

// Closes every fd >= 3 except those listed (the list need not be sorted; at most 8 entries).
void close_fds_except(const int* keep, int n);
bool write_file(const char* path, const char* data);
bool set_cloexec(int fd, bool on);

}  // namespace kiln::helper
