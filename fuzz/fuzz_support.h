// What the fuzz targets share: a private scratch folder that is removed at exit, silenced logging
// (a fuzzer runs millions of inputs), and splitting one input into the fields a target needs.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/spdlog.h>

namespace kiln::fuzz {

// A scratch folder under $KILN_FUZZ_SCRATCH, else /dev/shm when writable (file-heavy targets run
// faster in memory), else $TMPDIR; removed when the process exits normally.
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    // scripts/fuzz.sh names a folder it removes afterwards, crash or not.
    const char* given = std::getenv("KILN_FUZZ_SCRATCH");
    std::string base = given && *given ? given : "/dev/shm";
    if (::access(base.c_str(), W_OK) != 0) {
      const char* t = std::getenv("TMPDIR");
      base = t && *t ? t : "/tmp";
    }
    std::string tmpl = base + "/kiln-fuzz-XXXXXX";
    if (!::mkdtemp(tmpl.data())) {
      std::perror("kiln fuzz: mkdtemp");
      std::abort();
    }
    std::string made = std::filesystem::canonical(tmpl).string();
    static std::string to_remove = made;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(to_remove, ec);
    });
    return made;
  }();
  return dir;
}

inline void quiet_logs() { spdlog::set_level(spdlog::level::off); }

inline void write_file(const std::string& path, std::string_view data) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

// Splits on '\n' into at most `n` fields; the last field keeps the rest (newlines included).
inline std::vector<std::string> fields(std::string_view input, std::size_t n) {
  std::vector<std::string> out;
  while (out.size() + 1 < n) {
    auto nl = input.find('\n');
    if (nl == std::string_view::npos) break;
    out.emplace_back(input.substr(0, nl));
    input.remove_prefix(nl + 1);
  }
  out.emplace_back(input);
  out.resize(n);
  return out;
}

[[noreturn]] inline void violated(const char* what, std::string_view detail = {}) {
  std::fprintf(stderr, "kiln fuzz: invariant violated: %s: %.*s\n", what, int(std::min<std::size_t>(detail.size(), 2000)),
               detail.data());
  std::abort();
}

}  // namespace kiln::fuzz
