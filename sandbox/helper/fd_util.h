// Small fd helpers shared by the outer process, pid 1 and exec children; all async-signal-safe
// enough to use between fork and exec (no allocation).
#pragma once

#include <cstddef>
#include <string>

namespace kiln::helper {

bool write_all(int fd, const void* data, std::size_t len);
bool write_all(int fd, const std::string& s);
// Reads until EOF, failing when more than `limit` bytes arrive.
bool read_all(int fd, std::string& out, std::size_t limit);
// Closes every fd >= 3 except those listed (the list need not be sorted; at most 8 entries).
void close_fds_except(const int* keep, int n);
bool write_file(const char* path, const char* data);
bool set_cloexec(int fd, bool on);

}  // namespace kiln::helper
