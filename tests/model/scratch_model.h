// tests/model/scratch_model.h — a model file under the build tree
// (TERN_BINARY_DIR/test_models/NAME.PID.gguf), removed when the test ends.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace tern::test {

struct ScratchModel {
  std::string path;
  explicit ScratchModel(const std::string& name) {
    const std::string dir = std::string(TERN_BINARY_DIR) + "/test_models";
    std::filesystem::create_directories(dir);
    path = dir + "/" + name + "." + std::to_string(::getpid()) + ".gguf";
  }
  ~ScratchModel() { std::filesystem::remove(path); }
};

}  // namespace tern::test
