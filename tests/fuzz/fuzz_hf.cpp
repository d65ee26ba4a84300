// A Hugging Face checkpoint directory: the input is config.json, tokenizer.json (absent when
// empty) and model.safetensors (fuzz_files.h's parts). The safetensors image is parsed from
// memory too; then the directory is planned as tern's loader plans it (config, names, shapes,
// transforms), the first and last row of every planned tensor read through its transform, the
// tokenizer read, and the whole opened as the model view, its tokenizer built and run.
#include <algorithm>
#include <string>
#include <vector>

#include "fuzz.h"
#include "fuzz_files.h"
#include "gguf/safetensors.h"
#include "model/hf_model.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  const auto parts = tern::fuzz::split_parts(data, size, 3);
  (void)tern::safetensors::SafetensorsFile::from_bytes(std::vector<uint8_t>(parts[2].begin(), parts[2].end()));
  tern::fuzz::put_file("config.json", parts[0]);
  tern::fuzz::put_file("tokenizer.json", parts[1], /*absent=*/parts[1].empty());
  tern::fuzz::put_file("model.safetensors", parts[2]);
  const std::string& dir = tern::fuzz::scratch_dir();
  auto plan = tern::hf::plan_hf_model(dir);
  if (plan.is_ok()) {
    for (const auto& t : plan->tensors) {
      if (t.dims.empty() || t.dims[0] == 0 || t.dims[0] > (1u << 20)) continue;
      int64_t rows = 1;
      for (size_t d = 1; d < t.dims.size(); ++d) rows *= static_cast<int64_t>(t.dims[d]);
      if (rows <= 0) continue;
      std::vector<float> row(t.dims[0]);
      tern::hf::read_planned_row(t, 0, row.data());
      tern::hf::read_planned_row(t, rows - 1, row.data());
    }
  }
  auto meta = tern::hf::read_tokenizer_metadata(dir);
  if (!meta.is_ok()) return 0;
  auto view = tern::hf::open_hf_view(dir, *meta);
  if (!view.is_ok()) return 0;
  auto tok = tern::Tokenizer::from_gguf(*view);
  if (!tok.is_ok()) return 0;
  const auto ids = (*tok)->encode("Hello world \u00e9\U0001F600 123", true, true);
  (void)(*tok)->decode(ids);
  return 0;
}
