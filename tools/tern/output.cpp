#include "output.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace tern::cli {
namespace {

Status stdout_error(int err) {
  return error(ErrorKind::IoError, std::string("cannot write to standard output: ") +
                                       (err ? std::strerror(err) : "an earlier write failed"));
}

Status put_stdout(std::string_view text) {
  errno = 0;
  if (!text.empty() && std::fwrite(text.data(), 1, text.size(), stdout) != text.size()) return stdout_error(errno);
  return Status::ok();
}

Status flush_stdout() {
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) return stdout_error(errno);
  return Status::ok();
}

}  // namespace

Status write_stdout(std::string_view text) {
  TERN_RETURN_IF_ERROR(put_stdout(text));
  return flush_stdout();
}

Status close_stdout() {
  Status s = flush_stdout();
  errno = 0;
  // fclose reports what a file system only says at close (NFS, quotas).
  if (std::fclose(stdout) != 0 && s.is_ok()) s = stdout_error(errno);
  return s;
}

Result<ResultOutput> ResultOutput::open(const std::string& path) {
  ResultOutput out;
  if (path.empty()) return out;
  auto file = AtomicFile::create(path);
  if (!file) return file.status();
  out.file_.emplace(std::move(file).value());
  return out;
}

Status ResultOutput::write(std::string_view text) {
  return file_ ? file_->write(text) : put_stdout(text);
}

Status ResultOutput::finish() { return file_ ? file_->commit() : flush_stdout(); }

}  // namespace tern::cli
