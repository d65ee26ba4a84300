// core/work_dir.h — a directory for a command's intermediate files: the one
// the user named (kept), or a fresh one that is removed with everything in it
// when the WorkDir goes out of scope, on success and on every error path.
#pragma once

#include <filesystem>
#include <string>

#include "core/status.h"

namespace tern {

class WorkDir {
 public:
  // `named` empty: `temporary` is created and owned (removed at the end).
  static Result<WorkDir> make(const std::string& named, const std::filesystem::path& temporary) {
    WorkDir d;
    d.owned_ = named.empty();
    d.path_ = d.owned_ ? temporary : std::filesystem::path(named);
    std::error_code ec;
    std::filesystem::create_directories(d.path_, ec);
    if (ec) return error(ErrorKind::IoError, "cannot create " + d.path_.string() + ": " + ec.message());
    return d;
  }
  WorkDir(WorkDir&& o) noexcept : path_(std::move(o.path_)), owned_(o.owned_) { o.owned_ = false; }
  WorkDir& operator=(WorkDir&&) = delete;
  WorkDir(const WorkDir&) = delete;
  ~WorkDir() {
    std::error_code ec;
    if (owned_) std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  bool owned() const { return owned_; }

 private:
  WorkDir() = default;
  std::filesystem::path path_;
  bool owned_ = false;
};

}  // namespace tern
