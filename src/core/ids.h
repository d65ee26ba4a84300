// core/ids.h — strong integer ids so that a token, a sequence and a block
// can never be swapped by accident (TokenId and RequestId are public:
// tern/ids.h). Containers keyed by an id use the id itself (std::hash is
// defined for StrongId), never its raw value.
#pragma once

#include "tern/ids.h"

namespace tern {

using SeqId = StrongId<struct SeqIdTag>;
using BlockId = StrongId<struct BlockIdTag>;

}  // namespace tern
