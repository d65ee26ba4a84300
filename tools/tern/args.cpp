#include "args.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace tern::cli {

void ArgParser::add_option(const std::string& names, Kind kind, void* out, const std::string& help) {
  Option opt{{}, kind, out, help};
  std::stringstream ss(names);
  std::string n;
  while (std::getline(ss, n, ',')) opt.names.push_back(n);
  options_.push_back(std::move(opt));
}

void ArgParser::add(const std::string& names, std::string* out, const std::string& help) { add_option(names, Kind::String, out, help); }
void ArgParser::add(const std::string& names, int* out, const std::string& help) { add_option(names, Kind::Int, out, help); }
void ArgParser::add(const std::string& names, int64_t* out, const std::string& help) { add_option(names, Kind::Int64, out, help); }
void ArgParser::add(const std::string& names, uint64_t* out, const std::string& help) { add_option(names, Kind::UInt64, out, help); }
void ArgParser::add(const std::string& names, float* out, const std::string& help) { add_option(names, Kind::Float, out, help); }
void ArgParser::add_flag(const std::string& names, bool* out, const std::string& help) { add_option(names, Kind::Flag, out, help); }
void ArgParser::add_positional(const std::string& name, std::string* out, const std::string& help, bool required) {
  positionals_.push_back({name, out, help, required});
}

Status ArgParser::assign(const Option& opt, const std::string& name, const std::string& value) {
  auto bad = [&](const char* what) {
    return error(ErrorKind::InvalidArgument, command_ + ": " + name + " expects " + what + ", got '" + value + "'");
  };
  errno = 0;
  char* end = nullptr;
  switch (opt.kind) {
    case Kind::String: *static_cast<std::string*>(opt.out) = value; break;
    case Kind::Int:
    case Kind::Int64: {
      long long v = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end || errno) return bad("an integer");
      if (opt.kind == Kind::Int) {
        if (v < INT32_MIN || v > INT32_MAX) return bad("an integer in 32-bit range");
        *static_cast<int*>(opt.out) = static_cast<int>(v);
      } else {
        *static_cast<int64_t*>(opt.out) = v;
      }
      break;
    }
    case Kind::UInt64: {
      if (!value.empty() && value[0] == '-') return bad("a non-negative integer");
      unsigned long long v = std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || *end || errno) return bad("a non-negative integer");
      *static_cast<uint64_t*>(opt.out) = v;
      break;
    }
    case Kind::Float: {
      float v = std::strtof(value.c_str(), &end);
      if (value.empty() || *end || errno || !std::isfinite(v)) return bad("a number");
      *static_cast<float*>(opt.out) = v;
      break;
    }
    case Kind::Flag: *static_cast<bool*>(opt.out) = true; break;
  }
  return Status::ok();
}

Status ArgParser::parse(int argc, char** argv) {
  size_t n_positional = 0;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      help_ = true;
      return Status::ok();
    }
    if (arg.size() > 1 && arg[0] == '-' && !(arg.size() > 1 && (std::isdigit(static_cast<unsigned char>(arg[1])) || arg[1] == '.'))) {
      std::string value;
      bool has_inline = false;
      if (auto eq = arg.find('='); eq != std::string::npos && arg.rfind("--", 0) == 0) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        has_inline = true;
      }
      const Option* found = nullptr;
      for (const auto& opt : options_)
        for (const auto& n : opt.names)
          if (n == arg) found = &opt;
      if (!found)
        return error(ErrorKind::InvalidArgument, command_ + ": unknown option '" + arg + "' (see tern " + command_ + " --help)");
      if (found->kind == Kind::Flag) {
        if (has_inline) return error(ErrorKind::InvalidArgument, command_ + ": " + arg + " takes no value");
        TERN_RETURN_IF_ERROR(assign(*found, arg, ""));
        continue;
      }
      if (!has_inline) {
        if (i + 1 >= argc) return error(ErrorKind::InvalidArgument, command_ + ": " + arg + " needs a value");
        value = argv[++i];
      }
      TERN_RETURN_IF_ERROR(assign(*found, arg, value));
      continue;
    }
    if (n_positional >= positionals_.size())
      return error(ErrorKind::InvalidArgument, command_ + ": unexpected argument '" + arg + "'");
    *positionals_[n_positional++].out = arg;
  }
  for (size_t i = n_positional; i < positionals_.size(); ++i)
    if (positionals_[i].required)
      return error(ErrorKind::InvalidArgument, command_ + ": missing " + positionals_[i].name + " (usage: " + usage_ + ")");
  return Status::ok();
}

std::string ArgParser::help_text() const {
  std::string out = "usage: " + usage_ + "\n";
  for (const auto& p : positionals_) out += "  " + p.name + std::string(p.name.size() < 22 ? 22 - p.name.size() : 1, ' ') + p.help + "\n";
  for (const auto& opt : options_) {
    std::string names;
    for (const auto& n : opt.names) names += (names.empty() ? "" : ", ") + n;
    out += "  " + names + std::string(names.size() < 22 ? 22 - names.size() : 1, ' ') + opt.help + "\n";
  }
  return out;
}

}  // namespace tern::cli
