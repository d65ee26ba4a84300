// llama2.c checkpoints: the input is the model file and its tokenizer.bin (fuzz_files.h's
// parts), converted to GGUF as `tern convert --from llama2c` does; what converts must open as a
// GGUF file with its hyper-parameters and tokenizer.
#include <cstdio>
#include <string>

#include "fuzz.h"
#include "fuzz_files.h"
#include "gguf/reader.h"
#include "model/hparams.h"
#include "model/llama2c.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  const auto parts = tern::fuzz::split_parts(data, size, 2);
  tern::Llama2cConvertOptions o;
  o.model_path = tern::fuzz::put_file("model.bin", parts[0]);
  o.vocab_path = tern::fuzz::put_file("tok.bin", parts[1]);
  o.out_path = tern::fuzz::put_file("out.gguf", {}, /*absent=*/true);
  if (!tern::convert_llama2c(o).is_ok()) return 0;
  auto file = tern::gguf::GgufFile::open(o.out_path);
  if (!file.is_ok()) {
    std::fprintf(stderr, "fuzz_llama2c: the converted file does not open: %s\n", file.status().message().c_str());
    std::abort();
  }
  (void)tern::read_hparams(*file, 0);
  auto tok = tern::Tokenizer::from_gguf(*file);
  if (tok.is_ok()) (void)(*tok)->encode("Once upon a time", true, false);
  return 0;
}
