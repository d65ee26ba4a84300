// backend/cpu/cpu_backend.h — today's x86 kernels behind the Backend
// interface: run-time dispatched SIMD matmul (packed panels), tiled flash
// attention, vectorised SwiGLU, on a thread pool the backend owns.
#pragma once

#include <memory>

#include "backend/backend.h"

namespace tern::backend {

// n_threads <= 0: every core. pack = false keeps matrices in place (TERN_PACK=0).
std::unique_ptr<Backend> make_cpu_backend(int n_threads, bool pack);

}  // namespace tern::backend
