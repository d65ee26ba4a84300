#include "model/arch.h"

namespace tern {
namespace {

using kernels::RopeLayout;

// GGUF converters permute llama/mistral Q and K rows so adjacent-pair (Normal)
// RoPE applies; qwen2 files keep HF's half-split (NeoX) pairing.
constexpr ArchInfo kArchs[] = {
    {"llama", RopeLayout::Normal, true},
    {"mistral", RopeLayout::Normal, true},
    {"qwen2", RopeLayout::NeoX, true},
};

}  // namespace

const ArchInfo* find_arch(std::string_view name) {
  for (const auto& a : kArchs)
    if (a.name == name) return &a;
  return nullptr;
}

std::string_view supported_arch_names() { return "llama, mistral, qwen2"; }

}  // namespace tern
