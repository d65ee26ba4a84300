#include "engine/streaming.h"

#include <charconv>

#include "core/json.h"

namespace tern {
namespace {

bool parse_int(std::string_view s, int32_t& out) {
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && p == end && !s.empty();
}

Status bad(std::string_view text) {
  return error(ErrorKind::InvalidArgument, "streaming '" + std::string(text) +
                                               "': expected SINKS,WINDOW (e.g. 4,1020), shift, shift:SINKS or off");
}

}  // namespace

Result<StreamingParams> parse_streaming(std::string_view text) {
  StreamingParams p;
  if (text == "off") return p;
  if (text == "shift" || text.starts_with("shift:")) {
    p.mode = StreamingMode::Shift;
    if (text.size() > 5 && !parse_int(text.substr(6), p.sinks)) return bad(text);
    if (p.sinks < 0) return bad(text);
    return p;
  }
  const size_t comma = text.find(',');
  if (comma == std::string_view::npos || !parse_int(text.substr(0, comma), p.sinks) ||
      !parse_int(text.substr(comma + 1), p.window) || p.sinks < 0 || p.window < 1)
    return bad(text);
  p.mode = StreamingMode::Window;
  return p;
}

Result<StreamingParams> streaming_from_json(const Json& v) {
  if (v.is_string()) return parse_streaming(v.as_string());
  if (v.is_bool() && !v.as_bool()) return StreamingParams{};
  const Status expected = error(ErrorKind::InvalidArgument,
                                "'streaming' must be \"SINKS,WINDOW\", \"shift[:SINKS]\", \"off\", false, "
                                "{\"sinks\": S, \"window\": W} or {\"shift\": true, \"sinks\": S}, got " + v.dump());
  if (!v.is_object()) return expected;
  StreamingParams p;
  for (const auto& [key, value] : v.as_object()) {
    if (key == "shift") {
      if (!value.is_bool()) return expected;
      if (value.as_bool()) p.mode = StreamingMode::Shift;
    } else if (key == "sinks" || key == "window") {
      const auto i = value.to_int64();
      if (!value.is_integer() || !i || *i < 0 || *i > INT32_MAX) return expected;
      (key == "sinks" ? p.sinks : p.window) = static_cast<int32_t>(*i);
    } else {
      return expected;
    }
  }
  if (p.mode == StreamingMode::Shift) return p.window == 0 ? Result<StreamingParams>(p) : Result<StreamingParams>(expected);
  if (p.window < 1) return expected;
  p.mode = StreamingMode::Window;
  return p;
}

std::string streaming_text(const StreamingParams& p) {
  switch (p.mode) {
    case StreamingMode::Window: return std::to_string(p.sinks) + "," + std::to_string(p.window);
    case StreamingMode::Shift: return "shift:" + std::to_string(p.sinks);
    case StreamingMode::Off: break;
  }
  return "off";
}

Result<SeqWindow> streaming_window(const StreamingParams& p, int64_t limit, int block_size) {
  SeqWindow w;
  if (p.mode == StreamingMode::Off) return w;
  if (p.sinks < 0) return error(ErrorKind::InvalidArgument, "streaming sinks must be >= 0");
  const int64_t b = block_size, n_blocks = limit / b, sink_blocks = (p.sinks + b - 1) / b;
  if (p.mode == StreamingMode::Window) {
    if (p.window < 1) return error(ErrorKind::InvalidArgument, "the streaming window must be >= 1");
    // A window not on block boundaries straddles one block more than it fills.
    const int64_t need = sink_blocks + (p.window - 1 + b - 1) / b + 1;
    if (need > n_blocks)
      return error(ErrorKind::InvalidArgument,
                   "streaming keeps " + std::to_string(p.sinks) + " sinks + a window of " + std::to_string(p.window) +
                       " positions, up to " + std::to_string(need) + " KV blocks of " + std::to_string(b) +
                       ", more than the " + std::to_string(n_blocks) +
                       " one sequence may hold (lower the window or raise --ctx-size / --kv-memory)");
    w.n_sink = p.sinks;
    w.window = p.window;
    w.exact_until = static_cast<int32_t>(std::min<int64_t>(int64_t{p.sinks} + p.window, INT32_MAX));
    return w;
  }
  if (sink_blocks + 2 > n_blocks)
    return error(ErrorKind::InvalidArgument, "context shift keeps " + std::to_string(p.sinks) +
                                                 " sinks, which leaves nothing to cut in a context of " +
                                                 std::to_string(limit));
  w.n_sink = p.sinks;
  w.shift_ctx = static_cast<int32_t>(std::min<int64_t>(limit, INT32_MAX));
  w.block_size = block_size;
  return w;
}

Result<KvEvictParams> parse_kv_evict(std::string_view text) {
  KvEvictParams p;
  if (text == "off") return p;
  const Status bad = error(ErrorKind::InvalidArgument, "kv eviction '" + std::string(text) +
                                                           "': expected h2o:BUDGET,RECENT (e.g. h2o:256,64), "
                                                           "snapkv:BUDGET,WINDOW or off");
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) return bad;
  const std::string_view kind = text.substr(0, colon), rest = text.substr(colon + 1);
  if (kind == "h2o")
    p.mode = KvEvictMode::H2o;
  else if (kind == "snapkv")
    p.mode = KvEvictMode::SnapKv;
  else
    return bad;
  const size_t comma = rest.find(',');
  if (comma == std::string_view::npos || !parse_int(rest.substr(0, comma), p.budget) ||
      !parse_int(rest.substr(comma + 1), p.recent) || p.budget < 1 || p.recent < 1)
    return bad;
  return p;
}

std::string kv_evict_text(const KvEvictParams& p) {
  switch (p.mode) {
    case KvEvictMode::H2o: return "h2o:" + std::to_string(p.budget) + "," + std::to_string(p.recent);
    case KvEvictMode::SnapKv: return "snapkv:" + std::to_string(p.budget) + "," + std::to_string(p.recent);
    case KvEvictMode::Off: break;
  }
  return "off";
}

Result<KvEvictParams> kv_evict_from_json(const Json& v) {
  if (v.is_string()) return parse_kv_evict(v.as_string());
  if (v.is_bool() && !v.as_bool()) return KvEvictParams{};
  return error(ErrorKind::InvalidArgument,
               "'kv_evict' must be \"h2o:BUDGET,RECENT\", \"snapkv:BUDGET,WINDOW\", \"off\" or false, got " + v.dump());
}

Status set_kv_evict(const KvEvictParams& p, int block_size, SeqWindow& w) {
  if (p.mode == KvEvictMode::Off) return Status::ok();
  const int64_t b = block_size, kept = p.budget / b;
  const int64_t recent_blocks = p.recent < 1 ? 0 : (p.recent - 1 + b - 1) / b + 1;  // a window straddles one more
  if (p.recent < 1 || kept <= recent_blocks)
    return error(ErrorKind::InvalidArgument,
                 "kv eviction '" + kv_evict_text(p) + "' keeps " + std::to_string(kept) + " KV blocks of " +
                     std::to_string(b) + " positions, and its last " + std::to_string(p.recent) +
                     " positions can span " + std::to_string(recent_blocks) +
                     ": the budget must leave room for at least one more block (raise BUDGET or lower RECENT)");
  w.evict = p.mode == KvEvictMode::H2o ? SeqWindow::Evict::H2o : SeqWindow::Evict::SnapKv;
  w.evict_blocks = static_cast<int32_t>(kept);
  w.evict_recent = p.recent;
  if (p.during_prompt && p.mode != KvEvictMode::H2o)
    return error(ErrorKind::InvalidArgument, "only h2o eviction can run while the prompt is computed");
  w.evict_in_prompt = p.during_prompt;
  return Status::ok();
}

}  // namespace tern
