// tests/model/split_text.h — the TinyStories text cut at the paragraph break
// nearest its middle: the first half calibrates, the second evaluates (the
// split docs/quantize.md and bench/prune/stories.sh use). Both halves are
// also written to files, named by `prefix` and the process id (test binaries
// run in parallel), which live as long as the object.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/input_file.h"

namespace tern::test {

struct SplitText {
  std::string calib_path, eval_path, calib, eval;

  explicit SplitText(const std::string& prefix) {
    auto all = read_file(std::string(TERN_SHARED_DIR) + "/data/text/tinystories_val.txt");
    if (!all) return;
    const size_t cut = all->find("\n\n", all->size() / 2) + 2;
    calib = all->substr(0, cut);
    eval = all->substr(cut);
    const std::string dir = std::string(TERN_BINARY_DIR) + "/test_models";
    std::filesystem::create_directories(dir);
    const std::string base = dir + "/" + prefix + "." + std::to_string(::getpid());
    calib_path = base + ".calib.txt";
    eval_path = base + ".eval.txt";
    std::ofstream(calib_path, std::ios::binary) << calib;
    std::ofstream(eval_path, std::ios::binary) << eval;
  }
  ~SplitText() {
    if (calib_path.empty()) return;
    std::filesystem::remove(calib_path);
    std::filesystem::remove(eval_path);
  }
  SplitText(const SplitText&) = delete;
  SplitText& operator=(const SplitText&) = delete;

  bool ok() const { return !calib_path.empty(); }
};

}  // namespace tern::test
