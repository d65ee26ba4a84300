// grammar/constraint.h — a request's OutputConstraint (tern/request.h)
// compiled to a Grammar, through a process-wide cache keyed by the
// constraint's exact kind and text: a server sees the same schema on request
// after request, and compiling it again each time would cost more than the
// masks. The cache holds at most kCacheEntries grammars (oldest out).
//
// Errors are InvalidArgument (or OutOfRange for size limits) naming what is
// wrong, for a 400. Thread-safe.
#pragma once

#include <memory>

#include "core/status.h"
#include "grammar/grammar.h"
#include "tern/request.h"

namespace tern::grammar {

inline constexpr size_t kCacheEntries = 64;

// Null for ConstraintKind::None.
Result<std::shared_ptr<const Grammar>> compile_constraint(const OutputConstraint& c);

}  // namespace tern::grammar
