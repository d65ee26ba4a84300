#include "model/arch.h"

#include <string>

namespace tern {
namespace archs {
// Rows defined in model/archs/<name>.cpp.
extern const ArchInfo kLlama;
extern const ArchInfo kMistral;
extern const ArchInfo kQwen2;
extern const ArchInfo kQwen3;
extern const ArchInfo kPhi3;
extern const ArchInfo kGemma2;
extern const ArchInfo kGemma3;
extern const ArchInfo kQwen2Moe;
extern const ArchInfo kQwen3Moe;
extern const ArchInfo kMamba;
extern const ArchInfo kMamba2;
extern const ArchInfo kNemotronH;
}  // namespace archs

namespace {

// The registry: the one list of supported architectures.
constexpr const ArchInfo* kRegistry[] = {&archs::kLlama,  &archs::kMistral, &archs::kQwen2, &archs::kQwen3,
                                         &archs::kPhi3,   &archs::kGemma2,  &archs::kGemma3, &archs::kQwen2Moe,
                                         &archs::kQwen3Moe, &archs::kMamba, &archs::kMamba2,
                                         &archs::kNemotronH};

}  // namespace

std::span<const ArchInfo* const> registered_archs() { return kRegistry; }

const ArchInfo* find_arch(std::string_view name) {
  for (const ArchInfo* a : kRegistry)
    if (a->name == name) return a;
  return nullptr;
}

std::string_view supported_arch_names() {
  static const std::string names = [] {
    std::string s;
    for (const ArchInfo* a : kRegistry) s += (s.empty() ? "" : ", ") + std::string(a->name);
    return s;
  }();
  return names;
}

}  // namespace tern
