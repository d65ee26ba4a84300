// tern/ids.h — strong integer ids (public API): a request id can never be
// mistaken for a number of another kind. src/core/ids.h adds the internal ones.
#pragma once

#include <cstdint>
#include <functional>

namespace tern {

template <typename Tag, typename Rep = int32_t>
struct StrongId {
  Rep value = 0;
  constexpr StrongId() = default;
  constexpr explicit StrongId(Rep v) : value(v) {}
  constexpr auto operator<=>(const StrongId&) const = default;
};

using TokenId = int32_t;  // tokens stay plain ints: they are data in hot loops and files
using RequestId = StrongId<struct RequestIdTag, uint64_t>;

}  // namespace tern

template <typename Tag, typename Rep>
struct std::hash<tern::StrongId<Tag, Rep>> {
  size_t operator()(const tern::StrongId<Tag, Rep>& id) const noexcept { return std::hash<Rep>{}(id.value); }
};
