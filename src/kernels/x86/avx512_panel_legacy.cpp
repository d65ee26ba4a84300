// AVX-512 VNNI panel kernels for Q4_0, Q8_0, IQ4_NL and MXFP4 (the machinery
// and its description: avx512_panel_legacy.h).
#include "kernels/x86/avx512_panel_legacy.h"

namespace tern::kernels::x86 {

PanelFn avx512_legacy_panel(GgmlType t, bool packed) {
  switch (t) {
    case GgmlType::Q4_0: return packed ? panel<Q4_0, true> : panel<Q4_0, false>;
    case GgmlType::Q8_0: return packed ? panel<Q8_0, true> : panel<Q8_0, false>;
    case GgmlType::IQ4_NL: return packed ? panel<Iq4Nl, true> : panel<Iq4Nl, false>;
    case GgmlType::MXFP4: return packed ? panel<Mxfp4, true> : panel<Mxfp4, false>;
    default: return nullptr;
  }
}

}  // namespace tern::kernels::x86
