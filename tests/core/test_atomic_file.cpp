// core/atomic_file: what tern leaves behind when a write fails.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/atomic_file.h"
#include "file_test_util.h"

namespace tern {
namespace {

using test::slurp;
TEST(AtomicFile, AppearsOnlyAtCommit) {
  test::ScratchDir d;
  const std::string path = d / "out";
  std::ofstream(path) << "old";
  {
    auto f = AtomicFile::create(path);
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    ASSERT_TRUE(f->write(std::string_view("new header.")).is_ok());
    ASSERT_TRUE(f->write(std::string_view(" body")).is_ok());
    const uint8_t patch[3] = {'N', 'E', 'W'};
    ASSERT_TRUE(f->write_at(0, patch).is_ok());
    EXPECT_TRUE(std::filesystem::exists(path + ".tmp"));
    EXPECT_EQ(slurp(path), "old");
    ASSERT_TRUE(f->commit().is_ok());
  }
  EXPECT_EQ(slurp(path), "NEW header. body");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  {
    auto abandoned = AtomicFile::create(path);
    ASSERT_TRUE(abandoned.is_ok());
    ASSERT_TRUE(abandoned->write(std::string_view("half")).is_ok());
  }
  EXPECT_EQ(slurp(path), "NEW header. body");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  test::expect_status_error(AtomicFile::create(d / "missing/out").status(), ErrorKind::IoError,
               "cannot create '" + d / "missing/out.tmp" + "'");
}

// A write that fails midway (here RLIMIT_FSIZE, as a full disk would) is
// sticky, removes the temporary file and leaves the old file alone.
TEST(AtomicFile, FailedWriteLeavesTheOldFile) {
  test::ScratchDir d;
  const std::string path = d / "out";
  std::ofstream(path) << "old";
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto* old_handler = signal(SIGXFSZ, SIG_IGN);
  rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  Status s;
  {
    auto f = AtomicFile::create(path);
    ASSERT_TRUE(f.is_ok());
    const std::string chunk(1000, 'x');
    for (int i = 0; i < 20 && s.is_ok(); ++i) s = f->write(chunk);
    if (s.is_ok()) s = f->commit();
    EXPECT_EQ(f->commit().message(), s.message()) << "the first error is sticky";
  }
  setrlimit(RLIMIT_FSIZE, &saved);
  signal(SIGXFSZ, old_handler);
  test::expect_status_error(s, ErrorKind::IoError, "cannot write '" + path + "': File too large");
  EXPECT_EQ(slurp(path), "old");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

}  // namespace
}  // namespace tern
