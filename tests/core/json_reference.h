// tests/core/json_reference.h — core/json.h checked against an independent
// reader, nlohmann::json (test-only here): the same texts accepted and the same
// values read. Used by test_json.cpp and the json fuzz harness.
#pragma once

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>

#include "core/json.h"

namespace tern::test {

// Deepest nesting of '[' / '{' outside strings (nlohmann has no depth limit; ours does).
inline int json_nesting(std::string_view s) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

// "" when `ours` holds the value `ref` holds, else where they differ. Objects:
// the same distinct keys, each key's (last) value equal; arrays element-wise;
// integers by value; floats bit for bit.
inline std::string json_difference(const Json& ours, const nlohmann::ordered_json& ref, const std::string& at = "$") {
  using V = nlohmann::ordered_json::value_t;
  const auto differ = [&](const char* what) { return at + ": " + what + " (ours " + ours.dump() + ", ref " + ref.dump() + ")"; };
  switch (ref.type()) {
    case V::null: return ours.is_null() ? "" : differ("type");
    case V::boolean: return ours.is_bool() && ours.as_bool() == ref.get<bool>() ? "" : differ("boolean");
    case V::number_integer:
      return ours.to_int64() && *ours.to_int64() == ref.get<int64_t>() ? "" : differ("integer");
    case V::number_unsigned:
      return ours.to_uint64() && *ours.to_uint64() == ref.get<uint64_t>() ? "" : differ("unsigned");
    case V::number_float: {
      if (ours.type() != Json::Type::Double) return differ("float type");
      const double a = ours.as_double(), b = ref.get<double>();
      return std::memcmp(&a, &b, sizeof a) == 0 ? "" : differ("float bits");
    }
    case V::string: return ours.is_string() && ours.as_string() == ref.get<std::string>() ? "" : differ("string");
    case V::array: {
      if (!ours.is_array() || ours.size() != ref.size()) return differ("array");
      for (size_t i = 0; i < ref.size(); ++i) {
        std::string d = json_difference(ours.as_array()[i], ref[i], at + "[" + std::to_string(i) + "]");
        if (!d.empty()) return d;
      }
      return "";
    }
    case V::object: {
      if (!ours.is_object()) return differ("object");
      std::set<std::string_view> distinct;
      for (const auto& m : ours.as_object()) distinct.insert(m.first);
      if (distinct.size() != ref.size()) return differ("object keys");
      for (const auto& [k, v] : ref.items()) {
        const Json* mine = ours.find(k);
        if (!mine) return differ(("missing key " + k).c_str());
        std::string d = json_difference(*mine, v, at + "." + k);
        if (!d.empty()) return d;
      }
      return "";
    }
    default: return differ("unexpected reference type");
  }
}

}  // namespace tern::test
