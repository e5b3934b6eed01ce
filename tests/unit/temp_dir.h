// A scratch folder for one test, removed with everything in it when the test ends: what every
// unit-test folder needs (state directories, workspaces, databases).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

#include <doctest/doctest.h>

namespace kiln::test {

struct TempDir {
  std::string path;
  explicit TempDir(const std::string& label = "kiln-unit-test") {
    std::string tmpl = "/tmp/" + label + "-XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace kiln::test
