// core/input_file: what a user can point tern at.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/input_file.h"
#include "core/mmap.h"
#include "file_test_util.h"

namespace tern {
namespace {

TEST(InputFile, ReadsRegularFilesExactly) {
  test::ScratchDir d;
  const std::string bytes("a\0b\r\n\xff", 6);
  std::ofstream(d / "f", std::ios::binary) << bytes;
  auto r = read_file(d / "f");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(*r, bytes);
  auto empty = read_file(d / "none");
  test::expect_status_error(empty.status(), ErrorKind::NotFound, "cannot open '" + d / "none" + "'");
}

// /proc files report st_size 0: reading goes by what read() returns, not by fstat.
TEST(InputFile, ReadsFilesWhoseSizeIsNotKnownUpFront) {
  auto r = read_file("/proc/self/status");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_NE(r->find("Name:"), std::string::npos);
}

TEST(InputFile, RefusesFifosDirectoriesAndDevicesWithoutBlocking) {
  test::ScratchDir d;
  ASSERT_EQ(::mkfifo((d / "fifo").c_str(), 0600), 0);
  // No writer ever opens the FIFO: a blocking open() would hang this test.
  test::expect_status_error(read_file(d / "fifo").status(), ErrorKind::IoError,
               "'" + d / "fifo" + "' is a FIFO (named pipe), not a regular file");
  test::expect_status_error(MappedFile::open(d / "fifo").status(), ErrorKind::IoError, "is a FIFO (named pipe)");
  test::expect_status_error(read_file(d.path).status(), ErrorKind::IoError, "'" + d.path + "' is a directory, not a regular file");
  test::expect_status_error(MappedFile::open(d.path).status(), ErrorKind::IoError, "is a directory");
  test::expect_status_error(read_file("/dev/zero").status(), ErrorKind::IoError,
               "'/dev/zero' is a character device, not a regular file");
}

TEST(InputFile, SizeLimitIsCheckedBeforeAndWhileReading) {
  test::ScratchDir d;
  std::ofstream(d / "f") << std::string(100, 'x');
  test::expect_status_error(read_file(d / "f", 99).status(), ErrorKind::OutOfRange, "'" + d / "f" + "' is larger than the");
  EXPECT_TRUE(read_file(d / "f", 100).is_ok());
  // st_size says 0, the content is larger: the read itself stops at the cap.
  test::expect_status_error(read_file("/proc/self/status", 16).status(), ErrorKind::OutOfRange, "is larger than the");
}

TEST(InputFile, SameFileFollowsLinks) {
  test::ScratchDir d;
  std::ofstream(d / "a") << "x";
  std::ofstream(d / "b") << "x";
  std::filesystem::create_hard_link(d / "a", d / "hard");
  std::filesystem::create_symlink(d / "a", d / "soft");
  EXPECT_TRUE(same_file(d / "a", d / "a"));
  EXPECT_TRUE(same_file(d / "a", d.path + "/./a"));
  EXPECT_TRUE(same_file(d / "a", d / "hard"));
  EXPECT_TRUE(same_file(d / "soft", d / "a"));
  EXPECT_FALSE(same_file(d / "a", d / "b"));
  EXPECT_FALSE(same_file(d / "a", d / "absent"));
}

}  // namespace
}  // namespace tern
