#include "loadgen/token_counter.h"

#include <memory>

#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"

namespace tern::loadgen {

Result<TokenCounter> tokenizer_counter(const std::string& gguf_path) {
  auto file = gguf::GgufFile::open(gguf_path);
  if (!file) return file.status().with_context("--tokenizer");
  auto tok = Tokenizer::from_gguf(*file);
  if (!tok) return tok.status().with_context("--tokenizer " + gguf_path);
  std::shared_ptr<const Tokenizer> shared(std::move(*tok));
  return TokenCounter{[shared](std::string_view text) {
                        return static_cast<int>(shared->encode(text, /*add_special=*/false, /*parse_special=*/false).size());
                      },
                      true};
}

}  // namespace tern::loadgen
