// Fault injection through the `tern` binary (core/atomic_file.h's
// TERN_FAULT_IO_STEP): a command that writes files is run with its I/O step
// 0, 1, 2, ... failing as a full disk does, until a run no fault reaches
// succeeds. Every failing run must exit 1 naming the full disk, leave each
// output file as it was before ("earlier output") and leave no temporary file
// in the outputs' directory.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../core/file_test_util.h"
#include "cli/run_tern.h"

namespace tern::test {

// Returns the number of failure points (runs that failed) before the run that succeeded.
inline int enumerate_write_faults(const std::string& args, const std::vector<std::string>& outputs,
                                  int max_steps = 400) {
  const std::string earlier = "earlier output\n";
  for (int step = 0; step <= max_steps; ++step) {
    for (const auto& out : outputs) std::ofstream(out) << earlier;
    const TernOutput o = run_tern(args, "TERN_FAULT_IO_STEP=" + std::to_string(step));
    if (o.exit_code == 0) {
      for (const auto& out : outputs) EXPECT_NE(slurp(out), earlier) << args << ": " << out << " not written";
      return step;
    }
    EXPECT_EQ(o.exit_code, 1) << args << " (I/O step " << step << " failed)\n" << o.err;
    EXPECT_NE(o.err.find("No space left on device"), std::string::npos)
        << args << " (I/O step " << step << " failed)\n" << o.err;
    for (const auto& out : outputs)
      EXPECT_EQ(slurp(out), earlier) << args << ": " << out << " changed by a run whose I/O step " << step << " failed";
    // No temporary file left anywhere beside the outputs (a report's charts too).
    for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(outputs.front()).parent_path()))
      EXPECT_NE(e.path().extension(), ".tmp") << args << ": " << e.path() << " left by I/O step " << step;
    if (::testing::Test::HasFailure()) return -1;
  }
  ADD_FAILURE() << args << ": still failing after " << max_steps << " injected faults";
  return -1;
}

}  // namespace tern::test
