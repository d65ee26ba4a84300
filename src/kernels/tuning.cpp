#include "kernels/tuning.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>

#include "core/cpu_name.h"

namespace tern::kernels {
namespace {

constexpr CpuLevel kLevels[] = {CpuLevel::Scalar, CpuLevel::Avx2,    CpuLevel::Avx512,
                                CpuLevel::Neon,   CpuLevel::NeonDot, CpuLevel::NeonI8mm};

std::optional<CpuLevel> level_named(std::string_view name) {
  for (CpuLevel l : kLevels)
    if (name == cpu_level_name(l)) return l;
  return std::nullopt;
}

std::optional<gguf::GgmlType> type_named(std::string_view name) {
  for (uint32_t id = 0; id < 1100; ++id)
    if (auto s = gguf::type_size(id); s && s->name == name) return static_cast<gguf::GgmlType>(id);
  return std::nullopt;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

// The record in use. Swapped whole (tern bench --tune); a replaced one is
// kept alive, since a reader may still hold it (a few, at most), and owned
// here so that nothing is lost.
std::atomic<const ActiveTuning*> g_active{nullptr};
std::once_flag g_load_once;
std::mutex g_owned_mutex;
std::vector<std::unique_ptr<ActiveTuning>>& owned() {
  static std::vector<std::unique_ptr<ActiveTuning>> all;
  return all;
}

const ActiveTuning* keep(std::unique_ptr<ActiveTuning> a) {
  std::lock_guard<std::mutex> lock(g_owned_mutex);
  owned().push_back(std::move(a));
  return owned().back().get();
}

std::unique_ptr<ActiveTuning> load_active() {
  auto a = std::make_unique<ActiveTuning>();
  const std::string path = tuning_path();
  if (path.empty()) return a;
  std::ifstream in(path);
  if (!in) return a;  // no record: the defaults, silently
  std::stringstream ss;
  ss << in.rdbuf();
  auto rec = parse_tuning(ss.str());
  if (!rec) {
    std::fprintf(stderr, "tern: ignoring the tuning record %s: %s\n", path.c_str(), rec.status().message().c_str());
    return a;
  }
  if (rec->cpu != cpu_identity()) {
    std::fprintf(stderr,
                 "tern: ignoring the tuning record %s: it was measured on '%s', this is '%s' (run tern bench --tune "
                 "to make one here)\n",
                 path.c_str(), rec->cpu.c_str(), cpu_identity().c_str());
    return a;
  }
  a->record = std::move(*rec);
  a->source = path;
  return a;
}

}  // namespace

const TuningRecord::ActBlock* TuningRecord::find(CpuLevel level, gguf::GgmlType type) const {
  for (const ActBlock& b : act_blocks)
    if (b.level == level && b.type == type) return &b;
  return nullptr;
}

void TuningRecord::set(CpuLevel level, gguf::GgmlType type, size_t bytes) {
  for (ActBlock& b : act_blocks)
    if (b.level == level && b.type == type) {
      b.bytes = bytes;
      return;
    }
  act_blocks.push_back({level, type, bytes});
}

void TuningRecord::erase(CpuLevel level, gguf::GgmlType type) {
  std::erase_if(act_blocks, [&](const ActBlock& b) { return b.level == level && b.type == type; });
}

std::string cpu_identity() {
  static const std::string id = [] {
    const std::string name = trim(cpu_model_name());
    std::string s = (name.empty() ? "unknown" : name) + " | " + trim(cpu_features().describe());
    for (char& c : s)
      if (c == '#' || c == '\n') c = ' ';  // one line, nothing the parser would take for a comment
    return s;
  }();
  return id;
}

std::string format_tuning(const TuningRecord& r) {
  std::string out = "# tern kernel tuning record: written by `tern bench --tune`, read by the kernels at start\n";
  out += "cpu " + r.cpu + "\n";
  for (const auto& b : r.act_blocks)
    out += "act_block_bytes " + std::string(cpu_level_name(b.level)) + " " + std::string(gguf::type_name(b.type)) +
           " " + std::to_string(b.bytes) + "\n";
  return out;
}

Result<TuningRecord> parse_tuning(std::string_view text) {
  TuningRecord r;
  bool have_cpu = false;
  std::istringstream in{std::string(text)};
  int line_no = 0;
  auto bad = [&](const std::string& what) {
    return error(ErrorKind::InvalidFile, "tuning record line " + std::to_string(line_no) + ": " + what);
  };
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    line = trim(line);
    if (line.empty()) continue;
    std::istringstream words(line);
    std::string key;
    words >> key;
    if (key == "cpu") {
      r.cpu = trim(line.substr(3));
      if (r.cpu.empty()) return bad("cpu names no machine");
      have_cpu = true;
    } else if (key == "act_block_bytes") {
      std::string level_s, type_s, bytes_s, extra;
      words >> level_s >> type_s >> bytes_s >> extra;
      if (bytes_s.empty() || !extra.empty()) return bad("expected 'act_block_bytes LEVEL TYPE BYTES', got '" + line + "'");
      const auto level = level_named(level_s);
      if (!level) return bad("unknown kernel level '" + level_s + "'");
      const auto type = type_named(type_s);
      if (!type) return bad("unknown weight type '" + type_s + "'");
      char* end = nullptr;
      const unsigned long long v = std::strtoull(bytes_s.c_str(), &end, 10);
      if (*end || bytes_s[0] == '-' || v < kMinActBlockBytes || v > kMaxActBlockBytes)
        return bad("act_block_bytes '" + bytes_s + "' is not a size in [" + std::to_string(kMinActBlockBytes) + ", " +
                   std::to_string(kMaxActBlockBytes) + "]");
      r.set(*level, *type, static_cast<size_t>(v));
    } else {
      return bad("unknown entry '" + key + "'");
    }
  }
  if (!have_cpu) return error(ErrorKind::InvalidFile, "tuning record: no 'cpu' line (which machine was it measured on?)");
  return r;
}

std::string tuning_path() {
  if (const char* p = std::getenv("TERN_TUNING"); p && *p) return p;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/tern/tuning";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/tern/tuning";
  return "";
}

const ActiveTuning& active_tuning() {
  std::call_once(g_load_once, [] {
    if (!g_active.load(std::memory_order_acquire)) g_active.store(keep(load_active()), std::memory_order_release);
  });
  return *g_active.load(std::memory_order_acquire);
}

void set_active_tuning(TuningRecord record, std::string source) {
  active_tuning();  // the file's load, if any, happens before and not after
  g_active.store(keep(std::make_unique<ActiveTuning>(ActiveTuning{std::move(record), std::move(source)})),
                 std::memory_order_release);
}

size_t tuned_act_block_bytes(CpuLevel level, gguf::GgmlType type, size_t default_bytes) {
  const TuningRecord::ActBlock* b = active_tuning().record.find(level, type);
  return b ? b->bytes : default_bytes;
}

}  // namespace tern::kernels
