// model/arch.h — the architecture table: what differs between members of the
// Llama family that share one forward pass. Adding an architecture of this
// family is one row here (plus a golden test), not a new code path.
#pragma once

#include <string_view>

#include "kernels/ref/ops.h"

namespace tern {

struct ArchInfo {
  std::string_view name;            // general.architecture value and key prefix
  kernels::RopeLayout rope_layout;  // pairing used by this arch's GGUF files
  bool reads_sliding_window;        // honours <arch>.attention.sliding_window
};

// nullptr when the architecture is not supported.
const ArchInfo* find_arch(std::string_view name);
// Comma-separated list for error messages.
std::string_view supported_arch_names();

}  // namespace tern
