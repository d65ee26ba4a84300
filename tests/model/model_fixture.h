// Shared fixture: converts ../shared's stories260K to GGUF once per test binary.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "model/llama2c.h"

namespace tern::test {

inline std::string stories_dir() { return std::string(TERN_SHARED_DIR) + "/models/stories260K"; }

// The converted file lives for the test binary's lifetime and is deleted by
// the static's destructor (one file per process: tests run in parallel).
struct ConvertedModel {
  std::string path;
  ConvertedModel() {
    const std::string bin = stories_dir() + "/stories260K.bin", vocab = stories_dir() + "/tok512.bin";
    if (!std::filesystem::exists(bin) || !std::filesystem::exists(vocab)) return;
    std::filesystem::create_directories(std::string(TERN_BINARY_DIR) + "/test_models");
    const std::string out =
        std::string(TERN_BINARY_DIR) + "/test_models/stories260K." + std::to_string(::getpid()) + ".gguf";
    Llama2cConvertOptions o{bin, vocab, out, "stories260K"};
    if (auto s = convert_llama2c(o); !s) {
      ADD_FAILURE() << s.message();
      return;
    }
    path = out;
  }
  ~ConvertedModel() {
    if (!path.empty()) std::filesystem::remove(path);
  }
};

// Path of the converted model, or "" when the shared files are absent.
inline const std::string& stories_gguf() {
  static const ConvertedModel model;
  return model.path;
}

inline std::vector<int> golden_ids() {
  std::ifstream in(stories_dir() + "/expected_greedy_200steps.ids.txt");
  std::vector<int> ids;
  int v;
  while (in >> v) ids.push_back(v);
  return ids;
}

inline std::string golden_text() {
  std::ifstream in(stories_dir() + "/expected_greedy_200steps.txt", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

#define TERN_REQUIRE_STORIES()                                                       \
  do {                                                                               \
    if (::tern::test::stories_gguf().empty()) GTEST_SKIP() << "shared/models/stories260K is absent"; \
  } while (0)

}  // namespace tern::test
