// tests/fuzz/fuzz_files.h — for harnesses whose code under test reads files by path (a Hugging
// Face directory, a llama2.c checkpoint): the input split into parts, written into a directory
// of this process's own (made once, reused: tmpfs keeps it cheap).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace tern::fuzz {

// The input as parts: each but the last is a u32 (little-endian) length and that many bytes
// (clamped to what is left); the last is the rest.
inline std::vector<std::string_view> split_parts(const uint8_t* data, size_t size, int n_parts) {
  std::vector<std::string_view> parts;
  const char* p = reinterpret_cast<const char*>(data);
  size_t left = size;
  for (int i = 0; i + 1 < n_parts; ++i) {
    uint32_t n = 0;
    if (left >= 4) std::memcpy(&n, p, 4), p += 4, left -= 4;
    const size_t take = n < left ? n : left;
    parts.emplace_back(p, take);
    p += take, left -= take;
  }
  parts.emplace_back(p, left);
  return parts;
}

inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* t = std::getenv("TMPDIR");
    std::string d = std::string(t && *t ? t : "/tmp") + "/tern-fuzz-XXXXXX";
    if (!::mkdtemp(d.data())) std::abort();
    return d;
  }();
  return dir;
}

// Writes `bytes` as scratch_dir()/name; an empty view with absent = true removes the file.
inline std::string put_file(const std::string& name, std::string_view bytes, bool absent = false) {
  const std::string path = scratch_dir() + "/" + name;
  std::remove(path.c_str());
  if (absent) return path;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace tern::fuzz
