// tools/tern/output.h — what a command writes for the user, with every write
// checked: a full disk, a file-size limit or /dev/full is an error that names
// the destination and makes the command exit non-zero, never a silent loss.
//
// Standard output: write_stdout() checks each write; main() calls
// close_stdout() after every command, which catches what plain printf calls
// left buffered (stdio's error flag is sticky, so no failure slips by).
// Result files (-o FILE): ResultOutput writes through core's AtomicFile, so
// FILE appears complete at finish() or not at all.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/atomic_file.h"
#include "core/status.h"

namespace tern::cli {

// fwrite + fflush of `text` to stdout (streamed output shows up at once).
Status write_stdout(std::string_view text);
// Flushes and closes stdout; IoError if any write to it failed.
Status close_stdout();

// Results to FILE (atomically) or, for an empty path, to stdout.
class ResultOutput {
 public:
  // Creates FILE.tmp now, so an unwritable destination fails before any work.
  static Result<ResultOutput> open(const std::string& path);
  Status write(std::string_view text);
  // FILE: flush, fsync, rename into place; stdout: flush.
  Status finish();

 private:
  std::optional<AtomicFile> file_;  // absent: stdout
};

}  // namespace tern::cli
