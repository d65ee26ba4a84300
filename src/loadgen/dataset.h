// loadgen/dataset.h — the prompts a serving benchmark sends.
//
// Contract: a Dataset is a list of RequestSpec (prompt text, its prompt length
// in tokens, the max_tokens to ask for). Three sources, named by the
// --dataset flag:
//   sharegpt:FILE            ShareGPT-format JSON: an array of records with
//                            "conversations": [{"from", "value"}, ...] (the
//                            first human/user turn is the prompt; the first
//                            gpt/assistant turn after it sets max_tokens to its
//                            token length), or records with "prompt" and an
//                            optional "response" string. Records that cannot be
//                            used are skipped and counted by reason, never fatal.
//   random:IN,OUT[,SPREAD]   synthetic prompts of about IN tokens and OUT
//                            max_tokens; with SPREAD s in [0, 1) each length is
//                            drawn uniformly from [x(1-s), x(1+s)].
//   prefix:SHARED,IN,OUT     every prompt = one shared prefix of SHARED tokens +
//                            IN tokens of its own (a prefix-caching workload).
// Token lengths come from a TokenCounter: the model's tokenizer when the user
// gave one (exact), else estimate_tokens() (about 4 bytes a token) and the
// Dataset says so (counts_exact = false).
// Threading: pure functions; the counter is called from the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tern::loadgen {

struct RequestSpec {
  std::string prompt;
  int n_prompt_tokens = 0;  // per the dataset's counter (the server's usage wins when reported)
  int max_tokens = 0;
};

struct TokenCounter {
  std::function<int(std::string_view)> count;  // tokens of a text (no BOS)
  bool exact = false;
};
int estimate_tokens(std::string_view text);  // max(1, round(bytes / 4)); 0 for ""
TokenCounter estimating_counter();

struct Dataset {
  std::vector<RequestSpec> requests;
  size_t n_skipped = 0;
  std::map<std::string, size_t> skipped_by_reason;
  bool counts_exact = false;
  std::string description;  // e.g. "sharegpt:FILE (987 usable, 13 skipped)"
};

struct DatasetSpec {
  enum class Kind { ShareGpt, Random, Prefix };
  Kind kind = Kind::Random;
  std::string path;          // ShareGpt
  int n_input = 0, n_output = 0;
  double spread = 0;         // Random
  int n_shared = 0;          // Prefix
};
Result<DatasetSpec> parse_dataset_spec(const std::string& text);

struct ShareGptOptions {
  std::optional<int> output_len;  // forces max_tokens for every record
  int default_output_len = 128;   // when a record has no reply
};
// Parses ShareGPT JSON text; InvalidFile only when the text is not a JSON array.
Result<Dataset> parse_sharegpt(std::string_view json_text, const TokenCounter& counter, const ShareGptOptions& opt);
Result<Dataset> load_sharegpt(const std::string& path, const TokenCounter& counter, const ShareGptOptions& opt);

// Synthetic prompts made of common English words, n of them, reproducible from seed.
Dataset make_random(int n_input, int n_output, double spread, size_t n, uint64_t seed, const TokenCounter& counter);
Dataset make_prefix(int n_shared, int n_input, int n_output, size_t n, uint64_t seed, const TokenCounter& counter);

// n requests from the spec: ShareGPT records are shuffled with seed and taken
// in order (cycling when n exceeds the usable records).
Result<Dataset> build_dataset(const DatasetSpec& spec, size_t n, uint64_t seed, const TokenCounter& counter,
                              const ShareGptOptions& opt);

}  // namespace tern::loadgen
