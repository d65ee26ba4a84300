// tools/tern/args.h — a small typed command-line parser for the subcommands.
//
// Each subcommand declares its flags bound to variables; parse() fills them
// and returns a Status naming the offending flag for unknown flags, missing
// values and values that do not parse.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace tern::cli {

class ArgParser {
 public:
  ArgParser(std::string command, std::string usage) : command_(std::move(command)), usage_(std::move(usage)) {}

  // names: "-m,--model" style, comma separated.
  void add(const std::string& names, std::string* out, const std::string& help);
  void add(const std::string& names, int* out, const std::string& help);
  void add(const std::string& names, int64_t* out, const std::string& help);
  void add(const std::string& names, uint64_t* out, const std::string& help);
  void add(const std::string& names, float* out, const std::string& help);
  void add_flag(const std::string& names, bool* out, const std::string& help);
  // Bare arguments (not starting with '-') in order.
  void add_positional(const std::string& name, std::string* out, const std::string& help, bool required = true);

  Status parse(int argc, char** argv);
  bool help_requested() const { return help_; }
  std::string help_text() const;

 private:
  enum class Kind { String, Int, Int64, UInt64, Float, Flag };
  struct Option {
    std::vector<std::string> names;
    Kind kind;
    void* out;
    std::string help;
  };
  struct Positional {
    std::string name;
    std::string* out;
    std::string help;
    bool required;
  };
  void add_option(const std::string& names, Kind kind, void* out, const std::string& help);
  Status assign(const Option& opt, const std::string& name, const std::string& value);

  std::string command_, usage_;
  std::vector<Option> options_;
  std::vector<Positional> positionals_;
  bool help_ = false;
};

}  // namespace tern::cli
