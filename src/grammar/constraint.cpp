#include "grammar/constraint.h"

#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"

namespace tern::grammar {


namespace {

Result<Grammar> compile_uncached(const OutputConstraint& c) {
  switch (c.kind) {
    case ConstraintKind::Gbnf:
      return parse_gbnf(c.text);
    case ConstraintKind::JsonObject: {
      // Any object: the schema compiler's rules, so both modes bound whitespace and numbers alike.
      auto gbnf = json_schema_to_gbnf(R"({"type":"object"})");
      TERN_RETURN_IF_ERROR(gbnf.status());
      return parse_gbnf(*gbnf);
    }
    case ConstraintKind::JsonSchema: {
      auto gbnf = json_schema_to_gbnf(c.text);
      TERN_RETURN_IF_ERROR(gbnf.status());
      return parse_gbnf(*gbnf);
    }
    case ConstraintKind::Regex: {
      auto expr = regex_to_gbnf(c.text);
      TERN_RETURN_IF_ERROR(expr.status());
      return parse_gbnf("root ::= " + *expr);
    }
    case ConstraintKind::None:
      break;
  }
  return error(ErrorKind::InvalidArgument, "grammar: no constraint");
}

struct Cache {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<const Grammar>> map;
  std::deque<std::string> order;  // insertion order, oldest first
};

Cache& cache() {
  static Cache c;
  return c;
}

}  // namespace

Result<std::shared_ptr<const Grammar>> compile_constraint(const OutputConstraint& c) {
  if (c.kind == ConstraintKind::None) return std::shared_ptr<const Grammar>();
  std::string key(1, static_cast<char>('0' + static_cast<int>(c.kind)));
  key += c.text;
  Cache& k = cache();
  {
    std::lock_guard<std::mutex> lock(k.mu);
    if (auto it = k.map.find(key); it != k.map.end()) return it->second;
  }
  // Compiled outside the lock: a big schema must not stall other requests.
  auto g = compile_uncached(c);
  TERN_RETURN_IF_ERROR(g.status());
  auto shared = std::make_shared<const Grammar>(std::move(g).value());
  std::lock_guard<std::mutex> lock(k.mu);
  if (k.map.emplace(key, shared).second) {
    k.order.push_back(key);
    while (k.order.size() > kCacheEntries) {
      k.map.erase(k.order.front());
      k.order.pop_front();
    }
  }
  return shared;
}

}  // namespace tern::grammar
