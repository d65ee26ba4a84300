// tests/fuzz/seed_files.h — for the suite's drivers of the harnesses (replay_main.cpp,
// alloc_faults_main.cpp): the files named, or found directly in the directories named, in order.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace tern::fuzz {

inline void add_seed_files(const char* arg, std::vector<std::filesystem::path>& files) {
  if (std::filesystem::is_directory(arg)) {
    for (const auto& e : std::filesystem::directory_iterator(arg))
      if (e.is_regular_file()) files.push_back(e.path());
  } else {
    files.emplace_back(arg);
  }
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

}  // namespace tern::fuzz
