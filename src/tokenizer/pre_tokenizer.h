// tokenizer/pre_tokenizer.h — split text into the words byte-level BPE merges within.
//
// Contract: a PreTokenizer is chosen by the GGUF value tokenizer.ggml.pre
// (llama.cpp's names). It is a sequence of split rules applied one after
// another, each isolating its matches inside the fragments the previous rules
// left (Hugging Face's Split with behaviour Isolated). The words returned
// cover the input exactly, in order, with no empty word. Invalid UTF-8 is
// split like U+FFFD but its bytes are kept. Immutable; safe from many threads.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/pre_tokenizer_rules.h"

namespace tern {

struct ByteRange {
  size_t begin = 0;
  size_t end = 0;
};

class PreTokenizer {
 public:
  // Unknown names are Unsupported, naming the value.
  static Result<PreTokenizer> from_name(std::string_view name);

  // Words of text as byte ranges into it. Shape: [n_words], ascending, contiguous.
  std::vector<ByteRange> split(std::string_view text) const;

  const std::string& name() const { return name_; }
  // llama.cpp's per-family settings: merge a word only when it is not already
  // a token (llama3, tekken), and whether BOS is added when the GGUF is silent.
  bool ignore_merges() const { return ignore_merges_; }
  bool default_add_bos() const { return default_add_bos_; }

  // All names from_name() accepts (docs, tests).
  static std::vector<std::string_view> known_names();

 private:
  std::string name_;
  std::vector<pretok::FindFn> steps_;
  bool ignore_merges_ = false;
  bool default_add_bos_ = false;
};

}  // namespace tern
