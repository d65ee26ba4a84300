// Test helper: a Hugging Face model directory (tokenizer.json, tokenizer_config.json,
// config.json) written from a GGUF vocabulary, the way Hugging Face's converters
// would have written it for the same tokenizer, so that read_hf_tokenizer() can be
// checked against llama.cpp's test vectors of that GGUF.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "gguf/reader.h"

namespace tern::test {

struct HfWriteOptions {
  bool merges_as_pairs = false;  // [["a","b"]] (tokenizers >= 0.20) instead of "a b"
  bool metaspace = false;        // SPM: Metaspace pre-tokenizer instead of Prepend+Replace normalizer
  bool holes_for_pads = true;    // leave "[PADi]" tokens out, so the reader must fill them
};

// tokenizer.json for the GGUF's vocabulary: byte-level BPE ("gpt2", with the
// pre-tokenizer steps of tokenizer.ggml.pre), SentencePiece-style BPE ("llama":
// byte_fallback, merges ranked by the SPM scores as HF's converter ranks them) or
// WordPiece ("bert"). Throws std::runtime_error for a vocabulary it cannot write.
nlohmann::json tokenizer_json_from_gguf(const gguf::GgufFile& file, const HfWriteOptions& options);

// tokenizer_config.json with bos/eos/unk/pad tokens (as text) and add_bos/add_eos.
nlohmann::json tokenizer_config_from_gguf(const gguf::GgufFile& file);

// A fresh empty directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  explicit TempDir(const std::string& tag);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  void write(const std::string& name, const std::string& text) const;
  void write_json(const std::string& name, const nlohmann::json& j) const { write(name, j.dump(1)); }

 private:
  std::filesystem::path path_;
};

}  // namespace tern::test
