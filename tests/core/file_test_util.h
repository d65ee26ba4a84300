// Helpers for tests that touch files: a scratch directory per test under the
// build tree (removed at the end), writing inputs, reading back what a test
// left behind, and checking a failed Status.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/status.h"

namespace tern::test {

struct ScratchDir {
  std::string path;
  // Named after the running test.
  ScratchDir() : ScratchDir(::testing::UnitTest::GetInstance()->current_test_info()->name()) {}
  // `name` must be unique among tests that run at once; the pid separates processes.
  explicit ScratchDir(const std::string& name)
      : path(std::string(TERN_BINARY_DIR) + "/scratch_" + name + "." + std::to_string(::getpid())) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() { std::filesystem::remove_all(path); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

// Writes `lines`, each ending in '\n', to `path`; returns the path.
inline std::string write_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path, std::ios::binary);
  for (const auto& l : lines) out << l << "\n";
  return path;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The status failed with `kind` and its message contains `needle`.
inline void expect_status_error(const Status& s, ErrorKind kind, const std::string& needle) {
  ASSERT_FALSE(s.is_ok()) << "expected an error containing: " << needle;
  EXPECT_EQ(s.kind(), kind) << s.message();
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
}

}  // namespace tern::test
