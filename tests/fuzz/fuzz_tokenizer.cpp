// Tokenizers of every kind on real vocabularies (llama.cpp's ggml-vocab-*.gguf test files in
// ../shared: SPM, BPE with several pre-tokenizers, WPM): byte 0 picks the vocabulary, byte 1 the
// flags (add_special, parse_special, render_special), the rest is the text. Every id that comes
// out must be in the vocabulary, and decoding it must work. And the quoted path must be what it
// promises: text whose special-token strings are all quoted encodes exactly as plain text.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "fuzz.h"
#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"

#ifndef TERN_VOCAB_DIR
#error "TERN_VOCAB_DIR: the directory of ggml-vocab-*.gguf files"
#endif

namespace {

std::vector<std::unique_ptr<tern::Tokenizer>> load_all() {
  std::vector<std::filesystem::path> paths;
  for (const auto& e : std::filesystem::directory_iterator(TERN_VOCAB_DIR))
    if (e.path().extension() == ".gguf") paths.push_back(e.path());
  std::sort(paths.begin(), paths.end());
  std::vector<std::unique_ptr<tern::Tokenizer>> out;
  for (const auto& p : paths) {
    auto file = tern::gguf::GgufFile::open(p.string());
    if (!file.is_ok()) continue;
    auto tok = tern::Tokenizer::from_gguf(*file);
    if (tok.is_ok()) out.push_back(std::move(tok).value());
  }
  if (out.empty()) {
    std::fprintf(stderr, "fuzz_tokenizer: no vocabulary loaded from %s\n", TERN_VOCAB_DIR);
    std::abort();
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<std::unique_ptr<tern::Tokenizer>> toks = load_all();
  if (size < 2 || size > 16384) return 0;
  const tern::Tokenizer& tok = *toks[data[0] % toks.size()];
  const bool add_special = data[1] & 1, parse_special = data[1] & 2;
  const std::string_view text(reinterpret_cast<const char*>(data) + 2, size - 2);
  const std::vector<tern::TokenId> ids = tok.encode(text, add_special, parse_special);
  for (tern::TokenId id : ids)
    if (id < 0 || id >= tok.n_vocab()) {
      std::fprintf(stderr, "fuzz_tokenizer: id %d outside the vocabulary of %d\n", id, tok.n_vocab());
      std::abort();
    }
  (void)tok.decode(ids, /*render_special=*/data[1] & 4);
  if (text.find(tern::Tokenizer::kQuoteOpen) == std::string_view::npos &&
      text.find(tern::Tokenizer::kQuoteClose) == std::string_view::npos &&
      tok.encode_quoted(tok.quote_special(text), add_special) != tok.encode(text, add_special, false)) {
    std::fprintf(stderr, "fuzz_tokenizer: quoted text encodes differently from plain text\n");
    std::abort();
  }
  return 0;
}
