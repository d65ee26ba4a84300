// GGUF files: the input is a file image. Whatever parses has its metadata read back, its
// hyper-parameters read as the model loader reads them, and its tokenizer built and run over a
// few strings (encode, then decode what came out).
#include <string>
#include <vector>

#include "fuzz.h"
#include "gguf/reader.h"
#include "model/hparams.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  auto file = tern::gguf::GgufFile::from_bytes(std::vector<uint8_t>(data, data + size));
  if (!file.is_ok()) return 0;
  for (const auto& [key, value] : file->metadata()) {
    (void)file->get_string(key);
    (void)file->get_u64(key);
  }
  (void)tern::read_hparams(*file, 0);
  auto tok = tern::Tokenizer::from_gguf(*file);
  if (!tok.is_ok()) return 0;
  for (const char* text : {"Hello world", " a\tb\n\u00e9\U0001F600 12345", "<s>x</s>", ""}) {
    const std::vector<tern::TokenId> ids = (*tok)->encode(text, /*add_special=*/true, /*parse_special=*/true);
    std::string back;
    for (tern::TokenId id : ids) back += (*tok)->token_to_piece(id);
  }
  return 0;
}
