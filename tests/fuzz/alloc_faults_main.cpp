// Allocation failure at every point (issue 19): a harness's entry point (fuzz.h) run on each seed
// with its n-th allocation failing — operator new throws std::bad_alloc, as it does when memory
// runs out — for n = 0, 1, 2, ... up to the allocations the seed makes (every one of the first
// 400, then evenly spaced ones up to 1,500 points). Each run must end in an error or in
// std::bad_alloc reaching the caller (the boundaries — tern's main, the server's workers — turn it
// into "out of memory" / 503): never a crash, a hang or, under ASan, a leak. Afterwards the seed
// runs once more without failures, so no half-built state (a cache, a static) survives a failure.
// Only the calling thread's allocations are counted and failed.
//   fuzz_<harness>_alloc FILE_OR_DIR...
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <new>
#include <string>
#include <vector>

#include "failing_new.h"
#include "fuzz.h"
#include "seed_files.h"

namespace {

using tern::test::failing_new::allocations;
using tern::test::failing_new::arm;
using tern::test::failing_new::count_only;
using tern::test::failing_new::disarm;

void run(const std::string& s) { LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) tern::fuzz::add_seed_files(argv[i], files);
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
    return 2;
  }
  constexpr long kEvery = 400, kMaxPoints = 1500;
  long points = 0, thrown = 0;
  for (const auto& f : files) {
    const std::string seed = tern::fuzz::slurp(f);
    run(seed);  // first: statics and caches built outside the count
    count_only();
    run(seed);
    const long total = allocations();
    disarm();
    const long stride = total <= kMaxPoints ? 1 : std::max(1L, (total - kEvery) / (kMaxPoints - kEvery));
    for (long n = 0; n < total; n += n < kEvery ? 1 : stride) {
      arm(n);
      try {
        run(seed);
      } catch (const std::bad_alloc&) {
        ++thrown;
      }
      disarm();
      ++points;
    }
    run(seed);
    std::printf("%s: %ld allocations\n", f.filename().c_str(), total);
  }
  std::printf("%ld failure points from %zu seeds (%ld reached the caller as std::bad_alloc): no crash\n", points,
              files.size(), thrown);
  return 0;
}
