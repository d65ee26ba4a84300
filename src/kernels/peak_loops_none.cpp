// kernels/peak_loops.h on an architecture without SIMD kernels: no peaks measured.
#include "kernels/peak_loops.h"

namespace tern::kernels::peak {

Loop f32_fma() { return {}; }
Loop int8_dot() { return {}; }
Loop bf16_dot() { return {}; }
ReadLoop read_loop(int) { return nullptr; }

}  // namespace tern::kernels::peak
