#include "loadgen/dataset.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>

#include "core/input_file.h"
#include "core/json.h"

namespace tern::loadgen {
namespace {

using json = ::tern::Json;

// Words for synthetic prompts: short, common, one token in most vocabularies.
constexpr const char* kWords[] = {
    "the",   "time",  "people", "way",   "year",  "day",   "thing",  "man",   "world", "life",  "hand",
    "part",  "child", "eye",    "woman", "place", "work",  "week",   "case",  "point", "number", "group",
    "river", "fact",  "story",  "house", "light", "water", "friend", "door",  "tree",  "road",  "city",
    "small", "large", "old",    "new",   "good",  "long",  "great",  "high",  "early", "young", "green",
    "runs",  "sees",  "makes",  "takes", "finds", "gives", "tells",  "feels", "keeps", "opens", "walks",
    "and",   "but",   "with",   "from",  "over",  "under", "after",  "into",  "near",  "about", "then"};
constexpr size_t kNumWords = sizeof(kWords) / sizeof(kWords[0]);

// Words drawn from rng, joined by spaces, cut to the shortest prefix whose
// token count reaches target (binary search over the number of words).
std::string words_for_tokens(int target, std::mt19937_64& rng, const TokenCounter& counter, int* n_tokens) {
  if (target <= 0) {
    *n_tokens = 0;
    return {};
  }
  std::uniform_int_distribution<size_t> pick(0, kNumWords - 1);
  std::vector<size_t> ends;  // ends[k] = length of the text holding k+1 words
  std::string text;
  auto grow_to = [&](size_t n_words) {
    while (ends.size() < n_words) {
      if (!text.empty()) text += ' ';
      text += kWords[pick(rng)];
      ends.push_back(text.size());
    }
  };
  auto count_words = [&](size_t k) { return counter.count(std::string_view(text).substr(0, ends[k - 1])); };
  size_t hi = static_cast<size_t>(target);
  grow_to(hi);
  while (count_words(hi) < target) {  // counters giving < 1 token a word: grow until reached
    hi *= 2;
    grow_to(hi);
  }
  size_t lo = 1;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (count_words(mid) >= target) hi = mid;
    else lo = mid + 1;
  }
  text.resize(ends[hi - 1]);
  *n_tokens = counter.count(text);
  return text;
}

int spread_length(int base, double spread, std::mt19937_64& rng) {
  if (spread <= 0) return base;
  const double lo = std::max(1.0, std::floor(base * (1.0 - spread)));
  const double hi = std::max(lo, std::ceil(base * (1.0 + spread)));
  std::uniform_int_distribution<int> d(static_cast<int>(lo), static_cast<int>(hi));
  return d(rng);
}

bool is_role(const std::string& from, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (from == n) return true;
  return false;
}

struct Turns {
  const std::string* prompt = nullptr;
  const std::string* reply = nullptr;
};

// Why a record cannot be used, or "" with the turns filled in.
std::string read_record(const json& rec, Turns& t) {
  if (!rec.is_object()) return "not an object";
  const json* conv = rec.find("conversations");
  if (conv && conv->is_array()) {
    for (const json& turn : conv->as_array()) {
      if (!turn.is_object()) return "turn is not an object";
      const json* from = turn.find("from");
      const json* value = turn.find("value");
      if (!from || !from->is_string() || !value || !value->is_string()) return "turn without string from/value";
      const std::string& role = from->as_string();
      if (!t.prompt && is_role(role, {"human", "user"})) t.prompt = &value->as_string();
      else if (t.prompt && is_role(role, {"gpt", "assistant", "chatgpt", "bard", "model"})) {
        t.reply = &value->as_string();
        break;
      }
    }
    if (!t.prompt) return "no human turn";
  } else {
    const json* prompt = rec.find("prompt");
    if (!prompt || !prompt->is_string()) return "no conversations or prompt";
    t.prompt = &prompt->as_string();
    const json* response = rec.find("response");
    if (response && response->is_string()) t.reply = &response->as_string();
  }
  if (t.prompt->empty()) return "empty prompt";
  return {};
}

}  // namespace

int estimate_tokens(std::string_view text) {
  if (text.empty()) return 0;
  return std::max(1, static_cast<int>(std::lround(static_cast<double>(text.size()) / 4.0)));
}

TokenCounter estimating_counter() { return TokenCounter{[](std::string_view s) { return estimate_tokens(s); }, false}; }

Result<DatasetSpec> parse_dataset_spec(const std::string& text) {
  const auto colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  const std::string rest = colon == std::string::npos ? "" : text.substr(colon + 1);
  auto bad = [&](const std::string& why) {
    return error(ErrorKind::InvalidArgument,
                 "--dataset '" + text + "': " + why +
                     " (expected sharegpt:FILE, random:IN,OUT[,SPREAD] or prefix:SHARED,IN,OUT)");
  };
  DatasetSpec spec;
  if (kind == "sharegpt") {
    if (rest.empty()) return bad("missing FILE");
    spec.kind = DatasetSpec::Kind::ShareGpt;
    spec.path = rest;
    return spec;
  }
  std::vector<double> nums;
  std::stringstream ss(rest);
  for (std::string item; std::getline(ss, item, ',');) {
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end || !std::isfinite(v) || v < 0) return bad("'" + item + "' is not a number >= 0");
    nums.push_back(v);
  }
  auto is_count = [](double v) { return v == std::floor(v) && v >= 1 && v <= 1e6; };
  if (kind == "random") {
    if (nums.size() < 2 || nums.size() > 3) return bad("random takes 2 or 3 numbers");
    if (!is_count(nums[0]) || !is_count(nums[1])) return bad("IN and OUT must be whole numbers >= 1");
    spec.kind = DatasetSpec::Kind::Random;
    spec.n_input = static_cast<int>(nums[0]);
    spec.n_output = static_cast<int>(nums[1]);
    spec.spread = nums.size() == 3 ? nums[2] : 0.0;
    if (spec.spread >= 1) return bad("SPREAD must be in [0, 1)");
    return spec;
  }
  if (kind == "prefix") {
    if (nums.size() != 3) return bad("prefix takes 3 numbers");
    if (!is_count(nums[0]) || !is_count(nums[1]) || !is_count(nums[2]))
      return bad("SHARED, IN and OUT must be whole numbers >= 1");
    spec.kind = DatasetSpec::Kind::Prefix;
    spec.n_shared = static_cast<int>(nums[0]);
    spec.n_input = static_cast<int>(nums[1]);
    spec.n_output = static_cast<int>(nums[2]);
    return spec;
  }
  return bad("unknown kind '" + kind + "'");
}

Result<Dataset> parse_sharegpt(std::string_view json_text, const TokenCounter& counter, const ShareGptOptions& opt) {
  const auto parsed = json::parse(json_text);
  if (!parsed) return error(ErrorKind::InvalidFile, "ShareGPT file is not valid JSON: " + parsed.status().message());
  const json& doc = *parsed;
  if (!doc.is_array()) return error(ErrorKind::InvalidFile, "ShareGPT file must hold a JSON array of records");
  Dataset ds;
  ds.counts_exact = counter.exact;
  for (const json& rec : doc) {
    Turns t;
    const std::string why = read_record(rec, t);
    if (!why.empty()) {
      ++ds.n_skipped;
      ++ds.skipped_by_reason[why];
      continue;
    }
    RequestSpec r;
    r.prompt = *t.prompt;
    r.n_prompt_tokens = counter.count(r.prompt);
    if (opt.output_len) r.max_tokens = *opt.output_len;
    else if (t.reply && !t.reply->empty()) r.max_tokens = std::max(1, counter.count(*t.reply));
    else r.max_tokens = opt.default_output_len;
    ds.requests.push_back(std::move(r));
  }
  return ds;
}

Result<Dataset> load_sharegpt(const std::string& path, const TokenCounter& counter, const ShareGptOptions& opt) {
  auto text = read_file(path);  // the public ShareGPT file is ~650 MB, under the 1 GiB cap
  if (!text) return text.status().with_context("ShareGPT file");
  auto ds = parse_sharegpt(*text, counter, opt);
  if (!ds) return ds.status().with_context(path);
  ds->description = "sharegpt:" + path + " (" + std::to_string(ds->requests.size()) + " usable, " +
                    std::to_string(ds->n_skipped) + " skipped)";
  return ds;
}

Dataset make_random(int n_input, int n_output, double spread, size_t n, uint64_t seed, const TokenCounter& counter) {
  Dataset ds;
  ds.counts_exact = counter.exact;
  std::mt19937_64 rng(seed ^ 0x52414e44ULL);
  for (size_t i = 0; i < n; ++i) {
    RequestSpec r;
    const int want_in = spread_length(n_input, spread, rng);
    r.max_tokens = spread_length(n_output, spread, rng);
    r.prompt = words_for_tokens(want_in, rng, counter, &r.n_prompt_tokens);
    ds.requests.push_back(std::move(r));
  }
  ds.description = "random:" + std::to_string(n_input) + "," + std::to_string(n_output);
  return ds;
}

Dataset make_prefix(int n_shared, int n_input, int n_output, size_t n, uint64_t seed, const TokenCounter& counter) {
  Dataset ds;
  ds.counts_exact = counter.exact;
  std::mt19937_64 rng(seed ^ 0x50524546ULL);
  int n_prefix = 0;
  const std::string prefix = words_for_tokens(n_shared, rng, counter, &n_prefix);
  for (size_t i = 0; i < n; ++i) {
    RequestSpec r;
    int n_own = 0;
    r.prompt = prefix + " " + words_for_tokens(n_input, rng, counter, &n_own);
    r.n_prompt_tokens = counter.count(r.prompt);
    r.max_tokens = n_output;
    ds.requests.push_back(std::move(r));
  }
  ds.description = "prefix:" + std::to_string(n_shared) + "," + std::to_string(n_input) + "," + std::to_string(n_output);
  return ds;
}

Result<Dataset> build_dataset(const DatasetSpec& spec, size_t n, uint64_t seed, const TokenCounter& counter,
                              const ShareGptOptions& opt) {
  switch (spec.kind) {
    case DatasetSpec::Kind::Random: return make_random(spec.n_input, spec.n_output, spec.spread, n, seed, counter);
    case DatasetSpec::Kind::Prefix: return make_prefix(spec.n_shared, spec.n_input, spec.n_output, n, seed, counter);
    case DatasetSpec::Kind::ShareGpt: break;
  }
  auto all = load_sharegpt(spec.path, counter, opt);
  if (!all) return all.status();
  if (all->requests.empty())
    return error(ErrorKind::InvalidFile, spec.path + ": no usable ShareGPT records (" +
                                             std::to_string(all->n_skipped) + " skipped)");
  std::vector<size_t> order(all->requests.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  Dataset out = *all;
  out.requests.clear();
  for (size_t i = 0; i < n; ++i) out.requests.push_back(all->requests[order[i % order.size()]]);
  return out;
}

}  // namespace tern::loadgen
