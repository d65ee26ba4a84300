// Helpers for tokenizer tests: tiny vocabularies built as in-memory GGUF files.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "tokenizer/tokenizer.h"

namespace tern::test {

// A tiny SentencePiece vocabulary: <unk> <s> </s>, the 256 byte tokens, then
// a few pieces that spell "hello" and "world", a user-defined "<|user|>" and a
// control "<|im_end|>". Ids of the named pieces are constants below.
struct TinySpm {
  static constexpr TokenId kUnk = 0, kBos = 1, kEos = 2, kByte0 = 3;
  static constexpr TokenId kSpace = 259, kH = 260, kE = 261, kL = 262, kO = 263, kW = 264, kR = 265, kD = 266;
  static constexpr TokenId kSpaceH = 267, kLL = 268, kSpaceHe = 269, kLLO = 270, kSpaceHello = 271;
  static constexpr TokenId kUser = 272, kImEnd = 273, kSpaceW = 274, kOR = 275, kSpaceWor = 276,
                           kSpaceWorld = 277;
  static constexpr TokenId kLD = 278;

  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  TinySpm();
  // The writer with every tokenizer.ggml.* key set; tests change keys before building.
  gguf::GgufWriter writer() const;
};

inline TokenId byte_token(uint8_t b) { return TinySpm::kByte0 + b; }

Result<gguf::GgufFile> to_file(const gguf::GgufWriter& w);
// Builds the tokenizer or fails the current test (returns nullptr).
std::unique_ptr<Tokenizer> build(const gguf::GgufWriter& w);

// A tiny byte-level BPE vocabulary: every byte's spelling, then merges that
// build "hello", " world" and "12".
gguf::GgufWriter tiny_bpe_writer(const std::string& pre = "gpt-2");

// llama.cpp's tokenizer test vectors (../shared/testdata/tokenizers/ggml-vocab-NAME.gguf
// with .inp and .out files).
std::filesystem::path vectors_dir();
std::string read_all(const std::filesystem::path& p);
// Each test string of an .inp file is followed by a separator line; a trailing
// remainder without one is taken as a last string too.
std::vector<std::string> split_inputs(const std::string& data);
// One line of space-separated ids per test string.
std::vector<std::vector<TokenId>> parse_outputs(const std::string& data);

}  // namespace tern::test
