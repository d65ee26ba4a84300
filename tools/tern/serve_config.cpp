#include "serve_config.h"

#include <cctype>

#include "core/input_file.h"

namespace tern::cli {

Result<std::vector<std::string>> read_flags_file(const std::string& path) {
  auto text = read_file(path, uint64_t{1} << 20);
  if (!text) return text.status().with_context("--config");
  std::vector<std::string> out;
  const std::string& s = *text;
  size_t i = 0;
  int line = 1;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '\n') {
      ++line;
      ++i;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '#') {
      while (i < s.size() && s[i] != '\n') ++i;
    } else if (c == '"') {
      const size_t end = s.find('"', i + 1);
      if (end == std::string::npos || s.find('\n', i + 1) < end)
        return error(ErrorKind::InvalidArgument,
                     "--config " + path + ": line " + std::to_string(line) + ": unterminated quote");
      out.push_back(s.substr(i + 1, end - i - 1));
      i = end + 1;
    } else {
      size_t end = i;
      while (end < s.size() && !std::isspace(static_cast<unsigned char>(s[end]))) ++end;
      out.push_back(s.substr(i, end - i));
      i = end;
    }
  }
  for (const std::string& f : out)
    if (f == "--config" || f.rfind("--config=", 0) == 0)
      return error(ErrorKind::InvalidArgument, "--config " + path + ": a config file cannot name another (--config)");
  return out;
}

Result<ConfigArgs> split_config(int argc, char** argv) {
  ConfigArgs c;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    std::string path;
    if (a == "--config") {
      if (i + 1 >= argc) return error(ErrorKind::InvalidArgument, "--config needs a file");
      path = argv[++i];
    } else if (a.rfind("--config=", 0) == 0) {
      path = a.substr(9);
    } else {
      c.rest.push_back(a);
      continue;
    }
    if (!c.path.empty()) return error(ErrorKind::InvalidArgument, "--config given twice");
    if (path.empty()) return error(ErrorKind::InvalidArgument, "--config needs a file");
    c.path = path;
  }
  if (!c.path.empty()) {
    auto flags = read_flags_file(c.path);
    if (!flags) return flags.status();
    c.file_flags = std::move(*flags);
  }
  return c;
}

std::vector<char*> argv_of(std::vector<std::string>& strings) {
  std::vector<char*> v;
  for (std::string& s : strings) v.push_back(s.data());
  v.push_back(nullptr);
  return v;
}

}  // namespace tern::cli
