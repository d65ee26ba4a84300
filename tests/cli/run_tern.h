// Runs the built `tern` binary as a subprocess for end-to-end CLI tests:
// stdout captured, stderr through a per-process file, stdin closed.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

namespace tern::test {

struct TernOutput {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

inline std::string tern_bin() { return std::string(TERN_BINARY_DIR) + "/tools/tern/tern"; }

// Single-quoted for /bin/sh.
inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// `tern ARGS` (ARGS already quoted as needed). `shell_prefix` comes first on
// the shell line: limits ("ulimit -f 8;") or a wrapper ("timeout 20").
inline TernOutput run_tern(const std::string& args, const std::string& shell_prefix = "") {
  const std::string err_path =
      std::string(TERN_BINARY_DIR) + "/tern_stderr." + std::to_string(::getpid()) + ".txt";
  const std::string cmd = shell_prefix + " " + tern_bin() + " " + args + " 2>" + shell_quote(err_path) + " </dev/null";
  TernOutput o;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return o;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) o.out.append(buf, n);
  const int status = pclose(p);
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  o.err.assign(std::istreambuf_iterator<char>(err), std::istreambuf_iterator<char>());
  std::remove(err_path.c_str());
  return o;
}

// `tern perplexity --json` of a model on a text with the given extra flags
// (window, chunks, threads); NAN (and a failure) when it does not run.
inline double tern_perplexity(const std::string& model, const std::string& text, const std::string& flags) {
  auto o = run_tern("perplexity -m " + shell_quote(model) + " -f " + shell_quote(text) + " " + flags + " --json");
  EXPECT_EQ(o.exit_code, 0) << o.err;
  const size_t at = o.out.find("\"perplexity\":");
  return at == std::string::npos ? NAN : std::strtod(o.out.c_str() + at + 13, nullptr);
}

}  // namespace tern::test
