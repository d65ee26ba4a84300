// tools/tern/serve_config.h — `tern serve --config FILE`: a file of serve flags,
// as `tern tune` writes the configuration it found best.
//
// Format: the flags as on the command line, any number per line; '#' starts a
// comment (at the start of a line or of a token); a value with spaces goes in
// double quotes. A `--config` inside the file is refused. The command line's
// own flags come after the file's, so they override them.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace tern::cli {

// The flags in a config file, in order.
Result<std::vector<std::string>> read_flags_file(const std::string& path);

// The arguments with `--config FILE` (or --config=FILE) taken out, and the
// file's flags, if one was given (at most one --config).
struct ConfigArgs {
  std::string path;                     // "" when there was no --config
  std::vector<std::string> file_flags;  // the file's flags
  std::vector<std::string> rest;        // the command line without --config FILE
};
Result<ConfigArgs> split_config(int argc, char** argv);

// char* views of strings (for ArgParser::parse), valid while `strings` lives.
std::vector<char*> argv_of(std::vector<std::string>& strings);

}  // namespace tern::cli
