// The suite's fuzz smoke without clang: every file given (or in a directory given) is fed to the
// harness, then --mutations N variants of it, made by a seeded generator (byte flips, inserts,
// deletions, truncations, splices with another seed, repeated runs) — the same every run, so a
// failure reproduces. Coverage-guided fuzzing is scripts/fuzz.sh's job.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "fuzz.h"
#include "seed_files.h"

namespace {

std::string mutate(std::string s, const std::vector<std::string>& seeds, std::mt19937& rng) {
  const int n_edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < n_edits; ++e) {
    const size_t at = s.empty() ? 0 : rng() % s.size();
    switch (rng() % 6) {
      case 0:  // flip bits of a byte
        if (!s.empty()) s[at] = static_cast<char>(s[at] ^ (1 << (rng() % 8)));
        break;
      case 1:  // insert a random or structural byte
        s.insert(at, 1, rng() % 2 ? static_cast<char>(rng() % 256) : "{}[]\"\\:,%{}<>()*+?|\n"[rng() % 21]);
        break;
      case 2:  // delete a run
        if (!s.empty()) s.erase(at, 1 + rng() % std::min<size_t>(8, s.size() - at));
        break;
      case 3:  // truncate
        s.resize(at);
        break;
      case 4: {  // splice in a piece of another seed
        const std::string& o = seeds[rng() % seeds.size()];
        if (!o.empty()) {
          const size_t from = rng() % o.size();
          s.insert(at, o.substr(from, 1 + rng() % std::min<size_t>(64, o.size() - from)));
        }
        break;
      }
      default:  // repeat a run (deep nesting, long strings)
        if (!s.empty()) {
          const std::string run = s.substr(at, 1 + rng() % std::min<size_t>(4, s.size() - at));
          for (unsigned k = rng() % 64; k > 0; --k) s.insert(at, run);
        }
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int mutations = 0;
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--mutations") == 0 && i + 1 < argc) {
      mutations = std::atoi(argv[++i]);
    } else {
      tern::fuzz::add_seed_files(argv[i], files);
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "usage: %s [--mutations N] FILE_OR_DIR...\n", argv[0]);
    return 2;
  }
  std::vector<std::string> seeds;
  for (const auto& f : files) seeds.push_back(tern::fuzz::slurp(f));
  size_t runs = 0;
  for (size_t i = 0; i < seeds.size(); ++i) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(seeds[i].data()), seeds[i].size());
    std::mt19937 rng(static_cast<unsigned>(i + 1));
    for (int m = 0; m < mutations; ++m) {
      const std::string s = mutate(seeds[i], seeds, rng);
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    }
    runs += 1 + static_cast<size_t>(mutations);
  }
  std::printf("%zu inputs from %zu seeds: no crash\n", runs, seeds.size());
  return 0;
}
