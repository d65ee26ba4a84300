// backend/ref/ref_backend.h — the scalar reference backend: every op written
// the plain way on one thread (dot products and norms accumulated in double,
// attention with a full softmax, libm's exp), no packing, no SIMD. It runs
// whole models through the same interface as the CPU backend, proving the
// seam, and is the oracle later backends are checked against.
#pragma once

#include <memory>

#include "backend/backend.h"

namespace tern::backend {

std::unique_ptr<Backend> make_ref_backend();

}  // namespace tern::backend
