// engine/streaming.h — a request's streaming settings (tern/request.h):
// their text form, and their checked translation into what the scheduler,
// KV manager and model keep per sequence (kv/seq_window.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"
#include "kv/seq_window.h"
#include "tern/request.h"

namespace tern {

// Positions a streaming sequence may reach (32-bit positions, with room for a step's tokens).
constexpr int64_t kMaxStreamingPositions = int64_t{1} << 30;

// "SINKS,WINDOW" (StreamingLLM), "shift" / "shift:SINKS" (context shift,
// 4 sinks by default) or "off"; InvalidArgument saying what is expected.
Result<StreamingParams> parse_streaming(std::string_view text);
std::string streaming_text(const StreamingParams& p);  // the same form back

class Json;
// A request's JSON field: the text form, false (off), or an object
// {"sinks": S, "window": W} / {"shift": true, "sinks": S}; InvalidArgument
// saying what is expected.
Result<StreamingParams> streaming_from_json(const Json& v);

// The sequence window for `p` when one sequence may hold `limit` positions
// in blocks of block_size: Window needs the blocks its sinks and window can
// span to fit that, Shift its sinks' blocks and two more (something to cut).
// InvalidArgument naming the figures otherwise; Off -> no window.
Result<SeqWindow> streaming_window(const StreamingParams& p, int64_t limit, int block_size);

// "h2o:BUDGET,RECENT", "snapkv:BUDGET,WINDOW" or "off" (tern/request.h);
// InvalidArgument saying what is expected.
Result<KvEvictParams> parse_kv_evict(std::string_view text);
std::string kv_evict_text(const KvEvictParams& p);
// A request's JSON field: the text form or false (off).
Result<KvEvictParams> kv_evict_from_json(const Json& v);
// Sets w's eviction for `p` in blocks of block_size: the budget rounded down
// to whole blocks must exceed the blocks the recent positions can straddle
// (room for one heavy hitter); InvalidArgument naming the figures otherwise.
Status set_kv_evict(const KvEvictParams& p, int block_size, SeqWindow& w);

}  // namespace tern
