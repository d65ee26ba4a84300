#include "tokenizer/pre_tokenizer.h"

#include "tokenizer/unicode.h"

namespace tern {

namespace {

using namespace pretok;

struct Family {
  std::vector<std::string_view> names;
  std::vector<FindFn> steps;
  bool ignore_merges = false;
  bool default_add_bos = false;
};

// One row per rule set; the names are llama.cpp's tokenizer.ggml.pre values.
// The steps are the regexes of each family's tokenizer.json, in order.
const std::vector<Family>& families() {
  static const auto* table = new std::vector<Family>{
      Family{{"default"}, {find_punct_default, find_gpt2, find_digit_run, find_ascii_digit_3}},
      Family{{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v1-en", "jina-v2-es", "jina-v2-de",
              "jina-v2-code", "roberta-bpe", "mpt", "olmo", "jais", "exaone4", "a.x-4.0", "mellum",
              "modern-bert", "trillion", "granite-docling"},
             {find_gpt2}},
      Family{{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
             {find_digit, find_gpt2}},
      Family{{"falcon"}, {find_punct_falcon, find_gpt2, find_ascii_digit_3}},
      Family{{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
             {find_llama3},
             /*ignore_merges=*/true,
             /*default_add_bos=*/true},
      Family{{"dbrx", "smaug-bpe", "chatglm-bpe", "glm4"}, {find_llama3}},
      Family{{"qwen2", "stablelm2", "megrez", "deepseek-r1-qwen", "hunyuan", "solar-open", "grok-2",
              "bailingmoe", "bailingmoe2", "llada-moe", "kormo"},
             {find_qwen2}},
      Family{{"seed-coder"}, {find_seed_coder}},
      Family{{"tekken"}, {find_tekken}, /*ignore_merges=*/true, /*default_add_bos=*/true},
      Family{{"gpt-4o", "llama4", "minimax-m2"}, {find_o200k}},
      Family{{"deepseek-llm"},
             {find_newline_char, find_deepseek_latin, find_deepseek_punct, find_trailing_space,
              find_deepseek_cjk, find_digit_run}},
      Family{{"deepseek-coder"},
             {find_newline_char, find_space_letters, find_space_puncts, find_deepseek_cjk, find_digit}},
      Family{{"deepseek-v3", "hunyuan-dense", "joyai-llm"},
             {find_digits_1_3, find_deepseek3_cjk, find_deepseek3_words}},
      Family{{"bloom", "poro-chat", "gpt3-finnish"}, {find_bloom}},
      Family{{"viking"}, {find_bloom, find_digit}},
  };
  return *table;
}

}  // namespace

Result<PreTokenizer> PreTokenizer::from_name(std::string_view name) {
  for (const Family& family : families()) {
    for (std::string_view n : family.names) {
      if (n != name) continue;
      PreTokenizer p;
      p.name_ = std::string(name);
      p.steps_ = family.steps;
      p.ignore_merges_ = family.ignore_merges;
      p.default_add_bos_ = family.default_add_bos;
      return p;
    }
  }
  return error(ErrorKind::Unsupported,
               "unsupported pre-tokenizer tokenizer.ggml.pre='" + std::string(name) + "'");
}

std::vector<std::string_view> PreTokenizer::known_names() {
  std::vector<std::string_view> names;
  for (const Family& family : families()) names.insert(names.end(), family.names.begin(), family.names.end());
  return names;
}

std::vector<ByteRange> PreTokenizer::split(std::string_view text) const {
  if (text.empty()) return {};
  const unicode::CodePoints cps = unicode::decode_with_flags(text);
  // Fragments as code point index ranges; each step refines the previous list.
  std::vector<ByteRange> fragments{{0, cps.cps.size()}};
  std::vector<ByteRange> next;
  for (FindFn find : steps_) {
    next.clear();
    next.reserve(fragments.size() * 2);
    for (const ByteRange& f : fragments) {
      const Span span{cps.cps.data() + f.begin, cps.flags.data() + f.begin, f.end - f.begin};
      size_t done = 0;
      size_t mb = 0, me = 0;
      while (done < span.n && find(span, done, &mb, &me)) {
        if (mb > done) next.push_back({f.begin + done, f.begin + mb});
        next.push_back({f.begin + mb, f.begin + me});
        done = me;
      }
      if (done < span.n) next.push_back({f.begin + done, f.end});
    }
    fragments.swap(next);
  }
  for (ByteRange& f : fragments) f = {cps.offsets[f.begin], cps.offsets[f.end]};
  return fragments;
}

}  // namespace tern
