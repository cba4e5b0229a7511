// A fresh directory under the system's temporary directory for one test, removed with it (also
// when an assertion ends the test early). The name says which test made it; a random number keeps
// concurrent runs apart.
#pragma once
#include <filesystem>
#include <random>
#include <string>
#include <system_error>

namespace jiriki::testing {

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& name)
      : path(std::filesystem::temp_directory_path() /
             ("jiriki_test_" + name + "_" + std::to_string(std::random_device{}()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path / name).string(); }
};

}  // namespace jiriki::testing
