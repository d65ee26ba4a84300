#include "engine_flags.h"

#include "backend/backend.h"
#include "kv/paged_kv_cache.h"
#include "scheduler/scheduler.h"

#include <cctype>
#include <cstdlib>

#include "backend_flag.h"
#include "core/input_file.h"
#include "core/kv_format.h"
#include "engine/streaming.h"

namespace tern::cli {

void EngineFlags::add_to(ArgParser& args) {
  args.add("-t,--threads", &n_threads, "threads (default: all cores)");
  args.add("--backend", &backend, kBackendHelp);
  args.add("-c,--ctx-size", &n_ctx, "context limit per sequence (default: the model's)");
  args.add("--kv-memory", &kv_memory, "KV pool: bytes (4G, 512M) or a fraction of free RAM (0.25, the default)");
  args.add("--kv-type", &kv_type, "KV cache encoding: f16 (default), f32, q8_0 (int8 with a scale per 32 values: ~half the memory), q4_0 (4-bit: ~0.28x, lossy) or fp8 (E4M3: half)");
  args.add("--block-size", &block_size, "KV block size in tokens (default 16)");
  args.add_flag("--no-prefix-cache", &no_prefix_cache, "disable automatic prefix caching");
  args.add("--max-num-seqs", &max_num_seqs, "sequences running at once (default 64)");
  args.add("--max-batched-tokens", &max_batched_tokens, "tokens per engine step (default 512)");
  args.add("--policy", &policy, "scheduling: fcfs (default), priority, sjf, fair");
  args.add("--preemption", &preemption, "when KV runs out: recompute (default) or swap");
  args.add("--swap-compression", &swap_compression, "swap copies: none (default), lz4, zstd");
  args.add("--tenant-weights", &tenant_weights, "fair policy weights, e.g. a=2,b=1");
  args.add("--draft", &draft, kDraftHelp);
  args.add("--spec-k", &spec_k, kSpecKHelp);
  args.add("--spec-tree", &spec_tree, kSpecTreeHelp);
  args.add("--streaming", &streaming, kStreamingHelp);
  args.add("--kv-evict", &kv_evict, kKvEvictHelp);
  memory.add_to(args);
}

Status apply_spec_flags(const std::string& draft, int spec_k, int spec_tree, EngineConfig& c) {
  if (draft.empty() || draft == "none") {
    c.spec = SpecMethod::None;
  } else if (draft == "ngram") {
    c.spec = SpecMethod::Ngram;
  } else if (draft.rfind("self:", 0) == 0) {  // the model itself, re-encoded (checked when the engine loads it)
    c.spec = SpecMethod::SelfDraft;
    c.spec_self_type = draft.substr(5);
  } else {  // a draft model's file (checked when the engine loads it)
    c.spec = SpecMethod::Draft;
    c.spec_draft_path = draft;
  }
  if (spec_k < 1 || spec_k > 16) return error(ErrorKind::InvalidArgument, "--spec-k must be in 1..16");
  c.spec_k = spec_k;
  if (spec_tree < 1 || spec_tree > 8) return error(ErrorKind::InvalidArgument, "--spec-tree must be in 1..8");
  c.spec_tree = spec_tree;
  return Status::ok();
}

Result<SizeArg> parse_size(const std::string& flag, const std::string& text, bool fraction_allowed) {
  const std::string expected = fraction_allowed ? "expected bytes (4G, 512M) or a fraction (0.25)" : "expected bytes (4G, 512M)";
  const char* s = text.c_str();
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (end == s || !(v > 0)) return error(ErrorKind::InvalidArgument, flag + " '" + text + "': " + expected);
  std::string suffix(end);
  for (char& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (suffix == "B") suffix.clear();
  if (!suffix.empty() && suffix.back() == 'B') suffix.pop_back();  // "GB", "MiB" -> "G", "MI"
  if (!suffix.empty() && suffix.back() == 'I') suffix.pop_back();
  double mult = 0;
  if (suffix.empty()) mult = text.find('.') != std::string::npos ? 0 : 1;  // "0.25" fraction, "4096" bytes
  else if (suffix == "K") mult = 1024.0;
  else if (suffix == "M") mult = 1024.0 * 1024;
  else if (suffix == "G") mult = 1024.0 * 1024 * 1024;
  else if (suffix == "T") mult = 1024.0 * 1024 * 1024 * 1024;
  else return error(ErrorKind::InvalidArgument, flag + " '" + text + "': unknown unit '" + std::string(end) + "'");
  if (mult == 0) {  // a fraction
    if (!fraction_allowed) return error(ErrorKind::InvalidArgument, flag + " '" + text + "': " + expected);
    if (v > 1.0) return error(ErrorKind::InvalidArgument, flag + " '" + text + "': a fraction must be <= 1");
    return SizeArg{0, v};
  }
  if (!(v * mult < 0x1p62))  // no machine has 4 EiB; the cast of a larger double would be undefined
    return error(ErrorKind::InvalidArgument, flag + " '" + text + "' is implausibly large");
  return SizeArg{static_cast<int64_t>(v * mult), 0};
}

Status parse_kv_memory(const std::string& text, EngineConfig& config) {
  if (text.empty()) return Status::ok();
  auto size = parse_size("--kv-memory", text, /*fraction_allowed=*/true);
  TERN_RETURN_IF_ERROR(size.status());
  config.kv_memory_bytes = size->bytes;
  if (size->bytes == 0) config.kv_memory_fraction = size->fraction;
  return Status::ok();
}

void MemoryFlags::add_to(ArgParser& args) {
  args.add("--max-rss", &max_rss, "bound on resident memory (4G, 900M): the KV cache is sized to keep the process under it, after the weights and activations");
  args.add_flag("--mlock", &mlock, "pin the weights in RAM (never paged out; needs `ulimit -l` room)");
  args.add_flag("--no-mmap", &no_mmap, "read the model file into memory instead of mapping it");
}

Status MemoryFlags::apply(EngineConfig& c) const {
  c.mlock = mlock;
  c.use_mmap = !no_mmap;
  c.max_rss_bytes = 0;
  if (max_rss.empty()) return Status::ok();
  auto size = parse_size("--max-rss", max_rss, /*fraction_allowed=*/false);
  TERN_RETURN_IF_ERROR(size.status());
  c.max_rss_bytes = size->bytes;
  return Status::ok();
}

Status EngineFlags::apply(EngineConfig& c) const {
  TERN_RETURN_IF_ERROR(parse_kv_memory(kv_memory, c));
  TERN_RETURN_IF_ERROR(memory.apply(c));
  const std::optional<KvType> kv = parse_kv_type(kv_type);
  if (!kv) return error(ErrorKind::InvalidArgument, "--kv-type '" + kv_type + "': expected " + kv_type_choices());
  if (n_threads < 0) return error(ErrorKind::InvalidArgument, "-t must be >= 1");
  c.kv_type = *kv;
  c.prefix_caching = !no_prefix_cache;
  c.block_size = block_size;
  c.max_num_seqs = max_num_seqs;
  c.max_batched_tokens = max_batched_tokens;
  c.n_ctx = n_ctx;
  c.n_threads = n_threads;
  auto be = parse_backend_flag(backend);
  TERN_RETURN_IF_ERROR(be.status());
  c.backend = *be;
  auto pol = parse_schedule_policy(policy);
  TERN_RETURN_IF_ERROR(pol.status());
  c.policy = *pol;
  auto pre = parse_preemption_mode(preemption);
  TERN_RETURN_IF_ERROR(pre.status());
  c.preemption = *pre;
  auto swap = parse_swap_compression(swap_compression);
  TERN_RETURN_IF_ERROR(swap.status());
  c.swap_compression = *swap;
  TERN_RETURN_IF_ERROR(apply_spec_flags(draft, spec_k, spec_tree, c));
  auto st = parse_streaming(streaming);
  TERN_RETURN_IF_ERROR(st.status());
  c.streaming = *st;
  auto ev = parse_kv_evict(kv_evict);
  TERN_RETURN_IF_ERROR(ev.status());
  c.kv_evict = *ev;
  c.tenant_weights.clear();
  size_t pos = 0;
  while (pos < tenant_weights.size()) {
    size_t comma = tenant_weights.find(',', pos);
    if (comma == std::string::npos) comma = tenant_weights.size();
    const std::string item = tenant_weights.substr(pos, comma - pos);
    const size_t eq = item.find('=');
    char* end = nullptr;
    const double w = eq == std::string::npos ? 0 : std::strtod(item.c_str() + eq + 1, &end);
    if (eq == std::string::npos || eq == 0 || *end != '\0' || !(w > 0))
      return error(ErrorKind::InvalidArgument, "--tenant-weights item '" + item + "': expected NAME=WEIGHT with WEIGHT > 0");
    c.tenant_weights.emplace_back(item.substr(0, eq), w);
    pos = comma + 1;
  }
  return Status::ok();
}

Status constraint_from_flags(const std::string& grammar_file, const std::string& schema_file,
                             const std::string& regex, bool json_object, OutputConstraint& out) {
  const int n = !grammar_file.empty() + !schema_file.empty() + !regex.empty() + json_object;
  if (n > 1)
    return error(ErrorKind::InvalidArgument, "--grammar-file, --json-schema-file, --regex and --json are exclusive");
  if (!grammar_file.empty() || !schema_file.empty()) {
    auto text = read_file(grammar_file.empty() ? schema_file : grammar_file);
    TERN_RETURN_IF_ERROR(text.status());
    out.kind = grammar_file.empty() ? ConstraintKind::JsonSchema : ConstraintKind::Gbnf;
    out.text = std::move(text).value();
  } else if (!regex.empty()) {
    out = {ConstraintKind::Regex, regex};
  } else if (json_object) {
    out = {ConstraintKind::JsonObject, {}};
  }
  return Status::ok();
}

}  // namespace tern::cli
