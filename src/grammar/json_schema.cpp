#include "grammar/json_schema.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "core/json.h"
#include "grammar/regex.h"

namespace tern::grammar {
namespace {

// Rules every schema grammar may use; numbers and whitespace are bounded so
// a model cannot run on forever inside one token class.
constexpr const char* kPrimitives = R"G(
ws      ::= ( " " | "\n" [ \t]{0,20} )?
value   ::= object | array | string | number | "true" | "false" | "null"
object  ::= "{" ws ( member ( ws "," ws member )* ws )? "}"
member  ::= string ws ":" ws value
array   ::= "[" ws ( value ( ws "," ws value )* ws )? "]"
string  ::= "\"" char* "\""
char    ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
number  ::= "-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?
integer ::= "-"? ( "0" | [1-9] [0-9]{0,18} )
boolean ::= "true" | "false"
null    ::= "null"
date    ::= [0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] )
time    ::= ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,9} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )
)G";

const std::map<std::string, std::string> kFormats = {
    {"date", "\"\\\"\" date \"\\\"\""},
    {"time", "\"\\\"\" time \"\\\"\""},
    {"date-time", "\"\\\"\" date \"T\" time \"\\\"\""},
    {"uuid", "\"\\\"\" [0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{12} \"\\\"\""},
    {"email", "\"\\\"\" [A-Za-z0-9._%+-]{1,64} \"@\" [A-Za-z0-9-]{1,63} ( \".\" [A-Za-z0-9-]{1,63} )* \".\" [A-Za-z]{2,24} "
              "\"\\\"\""},
};

const std::set<std::string> kUnsupported = {
    "not", "if", "then", "else", "uniqueItems", "multipleOf", "patternProperties", "propertyNames",
    "dependentRequired", "dependentSchemas", "dependencies", "contains", "minContains", "maxContains",
    "unevaluatedProperties", "unevaluatedItems", "minProperties", "maxProperties"};

std::string digits_class(char lo, char hi) {
  if (lo == hi) return std::string("\"") + lo + "\"";
  return std::string("[") + lo + "-" + hi + "]";
}

// Decimal strings of equal length n, lo <= hi: the numbers between them.
std::string same_length_range(const std::string& lo, const std::string& hi) {
  const size_t n = lo.size();
  if (n == 0) return "\"\"";
  if (lo[0] == hi[0]) {
    if (n == 1) return digits_class(lo[0], hi[0]);
    return digits_class(lo[0], lo[0]) + " " + same_length_range(lo.substr(1), hi.substr(1));
  }
  if (n == 1) return digits_class(lo[0], hi[0]);
  const std::string rest_lo = lo.substr(1), rest_hi = hi.substr(1);
  const std::string nines(n - 1, '9'), zeros(n - 1, '0');
  std::vector<std::string> alts;
  char first = lo[0], last = hi[0];
  if (rest_lo != zeros) {
    alts.push_back(digits_class(lo[0], lo[0]) + " (" + same_length_range(rest_lo, nines) + ")");
    ++first;
  }
  if (rest_hi != nines) {
    alts.push_back(digits_class(hi[0], hi[0]) + " (" + same_length_range(zeros, rest_hi) + ")");
    --last;
  }
  if (first <= last) alts.insert(alts.begin() + (rest_lo != zeros ? 1 : 0), digits_class(first, last) + " [0-9]{" + std::to_string(n - 1) + "}");
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

constexpr int kMaxDigits = 19;

// Non-negative integers in [lo, hi] (hi < 0: unbounded), as JSON writes them.
std::string natural_range(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  const std::string slo = std::to_string(lo);
  const int n_lo = static_cast<int>(slo.size());
  const int n_hi = hi < 0 ? kMaxDigits : static_cast<int>(std::to_string(hi).size());
  for (int n = n_lo; n <= n_hi; ++n) {
    const std::string a = n == n_lo ? slo : "1" + std::string(static_cast<size_t>(n - 1), '0');
    if (hi < 0 && n > n_lo) {
      // Every longer number: one rule instead of one alternative per length.
      alts.push_back("[1-9] [0-9]{" + std::to_string(n - 1) + "," + std::to_string(kMaxDigits - 1) + "}");
      break;
    }
    const std::string b = (hi >= 0 && n == n_hi) ? std::to_string(hi) : std::string(static_cast<size_t>(n), '9');
    alts.push_back(same_length_range(a, b));
  }
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

class Converter {
 public:
  explicit Converter(Json root) : root_(std::move(root)) {}

  Result<std::string> run() {
    const std::string top = visit(root_, "root-value", 0);
    if (!err_.empty()) return error(kind_, "json_schema: " + err_);
    std::string out = "root ::= ws " + top + " ws\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out + kPrimitives;
  }

 private:
  void fail(ErrorKind k, const std::string& m) {
    if (err_.empty()) kind_ = k, err_ = m;
  }

  std::string rule(const std::string& hint, const std::string& body) {
    const std::string name = unique_name(hint);
    rules_.emplace_back(name, body);
    return name;
  }
  std::string unique_name(const std::string& hint) {
    std::string base;
    for (char c : hint) base += (std::isalnum(static_cast<unsigned char>(c)) ? c : '-');
    if (base.empty()) base = "s";
    base = "x-" + base;  // never a primitive's name
    std::string name = base;
    for (int i = 2; !names_.insert(name).second; ++i) name = base + "-" + std::to_string(i);
    return name;
  }

  std::string ref(const std::string& r, int depth) {
    if (auto it = refs_.find(r); it != refs_.end()) return it->second;
    const Json* target = nullptr;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      const std::string p(prefix);
      if (r.rfind(p, 0) == 0) {
        const char* key = prefix[2] == '$' ? "$defs" : "definitions";
        const std::string name = r.substr(p.size());
        if (const Json* t = std::as_const(root_)[key].find(name)) target = t;  // const: never inserts
      }
    }
    if (r == "#") target = &root_;
    if (!target) {
      fail(ErrorKind::Unsupported, "$ref '" + r + "' does not name a schema under #/$defs or #/definitions");
      return "value";
    }
    // Named before it is converted, so a recursive schema refers to itself.
    const std::string name = unique_name("ref-" + r.substr(r.find_last_of('/') + 1));
    refs_.emplace(r, name);
    const size_t slot = rules_.size();
    rules_.emplace_back(name, "");
    rules_[slot].second = visit(*target, name, depth + 1);
    return name;
  }

  std::string alternatives(const Json& list, const std::string& hint, int depth, const char* kw) {
    if (!list.is_array() || list.empty()) {
      fail(ErrorKind::InvalidArgument, std::string("'") + kw + "' must be a non-empty array");
      return "value";
    }
    std::string body;
    for (size_t i = 0; i < list.size(); ++i)
      body += (i ? " | " : "") + visit(list.as_array()[i], hint + "-" + std::to_string(i), depth + 1);
    return rule(hint, body);
  }

  std::string visit(const Json& s, const std::string& hint, int depth) {
    if (!err_.empty()) return "value";
    if (depth > 64) {
      fail(ErrorKind::InvalidArgument, "the schema nests deeper than 64 levels");
      return "value";
    }
    if (s.is_bool()) {
      if (!s.as_bool()) fail(ErrorKind::InvalidArgument, "schema 'false' at " + hint + " matches nothing");
      return "value";
    }
    if (!s.is_object()) {
      fail(ErrorKind::InvalidArgument, "a schema must be an object or a boolean (at " + hint + ")");
      return "value";
    }
    for (const auto& [k, v] : s.as_object())
      if (kUnsupported.count(k)) {
        fail(ErrorKind::Unsupported, "keyword '" + k + "' is not supported (at " + hint + ")");
        return "value";
      }
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) fail(ErrorKind::InvalidArgument, "'$ref' must be a string");
      return err_.empty() ? ref(s["$ref"].as_string(), depth) : "value";
    }
    if (s.contains("const")) return gbnf_literal(s["const"].dump());
    if (s.contains("enum")) {
      const Json& e = s["enum"];
      if (!e.is_array() || e.empty()) {
        fail(ErrorKind::InvalidArgument, "'enum' must be a non-empty array (at " + hint + ")");
        return "value";
      }
      std::string body;
      for (size_t i = 0; i < e.size(); ++i) body += (i ? " | " : "") + gbnf_literal(e.as_array()[i].dump());
      return rule(hint, body);
    }
    if (s.contains("anyOf")) return alternatives(s["anyOf"], hint, depth, "anyOf");
    if (s.contains("oneOf")) return alternatives(s["oneOf"], hint, depth, "oneOf");
    if (s.contains("allOf")) return all_of(s, hint, depth);
    if (s.contains("type")) {
      const Json& t = s["type"];
      if (t.is_array()) {
        std::string body;
        for (size_t i = 0; i < t.size(); ++i) {
          Json one = s;
          one["type"] = t.as_array()[i];
          body += (i ? " | " : "") + visit(one, hint + "-" + std::to_string(i), depth + 1);
        }
        if (t.empty()) fail(ErrorKind::InvalidArgument, "'type' must not be an empty list");
        return rule(hint, body);
      }
      if (!t.is_string()) {
        fail(ErrorKind::InvalidArgument, "'type' must be a string or a list (at " + hint + ")");
        return "value";
      }
      return typed(s, t.as_string(), hint, depth);
    }
    if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties"))
      return typed(s, "object", hint, depth);
    if (s.contains("items") || s.contains("prefixItems")) return typed(s, "array", hint, depth);
    return "value";
  }

  std::string all_of(const Json& s, const std::string& hint, int depth) {
    // Object schemas merge: properties and required lists unite.
    Json merged;
    merged["type"] = "object";
    merged["properties"] = Json::object();
    merged["required"] = Json::array();
    const Json& list = s["allOf"];
    if (!list.is_array() || list.empty()) {
      fail(ErrorKind::InvalidArgument, "'allOf' must be a non-empty array");
      return "value";
    }
    if (list.size() == 1) return visit(list.as_array()[0], hint, depth + 1);
    for (Json part : list.as_array()) {
      for (int i = 0; i < 8 && part.is_object() && part.contains("$ref") && part["$ref"].is_string(); ++i) {
        const std::string r = part["$ref"].as_string();
        const std::string name = r.substr(r.find_last_of('/') + 1);
        const char* key = r.rfind("#/$defs/", 0) == 0 ? "$defs" : "definitions";
        const Json* target = std::as_const(root_)[key].find(name);
        if (!target) break;
        part = *target;
      }
      if (!part.is_object() || (part.contains("type") && part["type"] != "object") || !part["properties"].is_object()) {
        fail(ErrorKind::Unsupported, "'allOf' is supported for object schemas only (at " + hint + ")");
        return "value";
      }
      for (const auto& [k, v] : part["properties"].distinct_members()) merged["properties"][k] = *v;
      if (part["required"].is_array())
        for (const Json& r : part["required"].as_array()) merged["required"].push_back(r);
      if (part.contains("additionalProperties")) merged["additionalProperties"] = part["additionalProperties"];
    }
    return typed(merged, "object", hint, depth);
  }

  std::string typed(const Json& s, const std::string& t, const std::string& hint, int depth) {
    if (t == "object") return object(s, hint, depth);
    if (t == "array") return array(s, hint, depth);
    if (t == "string") return string(s, hint);
    if (t == "integer") return integer(s, hint);
    if (t == "number") {
      for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
        if (s.contains(k)) {
          fail(ErrorKind::Unsupported, std::string("'") + k + "' on type number is not supported (use type integer)");
          return "value";
        }
      return "number";
    }
    if (t == "boolean") return "boolean";
    if (t == "null") return "null";
    fail(ErrorKind::InvalidArgument, "unknown type '" + t + "' (at " + hint + ")");
    return "value";
  }

  std::string object(const Json& s, const std::string& hint, int depth) {
    const Json props = s.contains("properties") ? s["properties"] : Json::object();
    if (!props.is_object()) {
      fail(ErrorKind::InvalidArgument, "'properties' must be an object (at " + hint + ")");
      return "value";
    }
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) fail(ErrorKind::InvalidArgument, "'required' must be an array of names");
      else
        for (const Json& r : s["required"].as_array())
          if (r.is_string()) required.insert(r.as_string());
    }
    for (const std::string& r : required)
      if (!props.contains(r)) {
        fail(ErrorKind::Unsupported, "required property '" + r + "' has no schema in 'properties' (at " + hint + ")");
        return "value";
      }
    // Extra members: as the schema says; by default only when it lists no properties.
    std::string extra;  // value expression of extra members, empty = none
    const Json add = s.contains("additionalProperties") ? s["additionalProperties"] : Json(props.empty());
    if (add.is_bool()) {
      if (add.as_bool()) extra = "value";
    } else {
      extra = visit(add, hint + "-additional", depth + 1);
    }
    const std::string extra_member = extra.empty() ? "" : rule(hint + "-extra", "string ws \":\" ws " + extra);
    std::vector<std::pair<std::string, bool>> kvs;  // (member expression, required)
    for (const auto& [key, v] : props.distinct_members()) {  // a property sent twice: once, its last schema
      const std::string k(key);
      const std::string value = visit(*v, hint + "-" + k, depth + 1);
      kvs.emplace_back(gbnf_literal(Json(k).dump()) + " ws \":\" ws " + value, required.count(k) > 0);
    }
    const std::string more = extra.empty() ? "" : "( ws \",\" ws " + extra_member + " )*";
    if (kvs.empty()) {
      if (extra.empty()) return rule(hint, "\"{\" ws \"}\"");
      return rule(hint, "\"{\" ws ( " + extra_member + " " + more + " ws )? \"}\"");
    }
    // tail_i: members i.. after at least one was written (each with its comma).
    std::vector<std::string> tail(kvs.size() + 1);
    tail[kvs.size()] = more.empty() ? "\"\"" : rule(hint + "-more", more);
    for (size_t i = kvs.size(); i-- > 0;) {
      const std::string with = "ws \",\" ws " + kvs[i].first + " " + tail[i + 1];
      tail[i] = rule(hint + "-tail", kvs[i].second ? with : with + " | " + tail[i + 1]);
    }
    // The first member written: any property up to the first required one,
    // or (when all are optional) an extra member, or none.
    std::vector<std::string> firsts;
    bool all_optional = true;
    for (size_t i = 0; i < kvs.size(); ++i) {
      firsts.push_back(kvs[i].first + " " + tail[i + 1]);
      if (kvs[i].second) {
        all_optional = false;
        break;
      }
    }
    if (all_optional && !extra.empty()) firsts.push_back(extra_member + " " + tail[kvs.size()]);
    std::string first;
    for (size_t i = 0; i < firsts.size(); ++i) first += (i ? " | " : "") + firsts[i];
    const std::string members = rule(hint + "-members", first);
    return rule(hint, "\"{\" ws " + (all_optional ? "( " + members + " ws )?" : members + " ws") + " \"}\"");
  }

  int count(const Json& s, const char* k, int fallback) {
    if (!s.contains(k)) return fallback;
    const auto v = s[k].to_int64();
    if (!v || *v < 0 || *v > 10000) {
      fail(ErrorKind::InvalidArgument, std::string("'") + k + "' must be an integer in [0, 10000]");
      return fallback;
    }
    return static_cast<int>(*v);
  }

  std::string array(const Json& s, const std::string& hint, int depth) {
    const int min = count(s, "minItems", 0), max = count(s, "maxItems", -1);
    if (max >= 0 && max < min) fail(ErrorKind::InvalidArgument, "'maxItems' is below 'minItems' (at " + hint + ")");
    std::vector<std::string> prefix;
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) fail(ErrorKind::InvalidArgument, "'prefixItems' must be an array");
      else
        for (size_t i = 0; i < s["prefixItems"].size(); ++i)
          prefix.push_back(visit(s["prefixItems"].as_array()[i], hint + "-" + std::to_string(i), depth + 1));
    }
    const bool no_more = s.contains("items") && s["items"].is_bool() && !s["items"].as_bool();
    const std::string item = s.contains("items") && !no_more ? visit(s["items"], hint + "-item", depth + 1) : "value";
    if (!err_.empty()) return "value";
    if (!prefix.empty()) {
      // A tuple: the prefix items in order (all of them), then more items if allowed.
      std::string body = "\"[\" ws ";
      for (size_t i = 0; i < prefix.size(); ++i) body += (i ? " ws \",\" ws " : "") + prefix[i];
      if (!no_more) body += " ( ws \",\" ws " + item + " )*";
      return rule(hint, body + " ws \"]\"");
    }
    if (max == 0) return rule(hint, "\"[\" ws \"]\"");
    const std::string rest_max = max < 0 ? "" : std::to_string(max - 1);
    const std::string reps = "( ws \",\" ws " + item + " ){" + std::to_string(std::max(0, min - 1)) + "," + rest_max + "}";
    const std::string items = item + " " + reps;
    return rule(hint, "\"[\" ws " + (min == 0 ? "( " + items + " ws )?" : items + " ws") + " \"]\"");
  }

  std::string string(const Json& s, const std::string& hint) {
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) {
        fail(ErrorKind::InvalidArgument, "'pattern' must be a string");
        return "value";
      }
      auto body = regex_to_gbnf(s["pattern"].as_string(), /*json_string=*/true);
      if (!body.is_ok()) {
        fail(ErrorKind::InvalidArgument, "pattern at " + hint + ": " + body.status().message());
        return "value";
      }
      return rule(hint, "\"\\\"\" " + *body + " \"\\\"\"");
    }
    if (s.contains("format") && s["format"].is_string())
      if (auto it = kFormats.find(s["format"].as_string()); it != kFormats.end()) return rule(hint, it->second);
    const int min = count(s, "minLength", 0), max = count(s, "maxLength", -1);
    if (max >= 0 && max < min) fail(ErrorKind::InvalidArgument, "'maxLength' is below 'minLength' (at " + hint + ")");
    if (min == 0 && max < 0) return "string";
    return rule(hint, "\"\\\"\" char{" + std::to_string(min) + "," + (max < 0 ? "" : std::to_string(max)) + "} \"\\\"\"");
  }

  std::string integer(const Json& s, const std::string& hint) {
    // Inclusive int64 bounds; a fractional or exclusive bound moves inwards.
    std::optional<int64_t> lo, hi;
    auto read = [&](const char* k, double& d) {
      if (!s.contains(k)) return false;
      if (!s[k].is_number() || !(s[k].as_double() > -9.0e18 && s[k].as_double() < 9.0e18)) {
        fail(ErrorKind::InvalidArgument, std::string("'") + k + "' must be a number within the 64-bit range");
        return false;
      }
      d = s[k].as_double();
      return true;
    };
    auto raise = [&](int64_t v) { lo = lo ? std::max(*lo, v) : v; };
    auto lower = [&](int64_t v) { hi = hi ? std::min(*hi, v) : v; };
    double d = 0;
    if (read("minimum", d)) raise(static_cast<int64_t>(std::ceil(d)));
    if (read("exclusiveMinimum", d)) raise(static_cast<int64_t>(std::floor(d)) + 1);
    if (read("maximum", d)) lower(static_cast<int64_t>(std::floor(d)));
    if (read("exclusiveMaximum", d)) lower(static_cast<int64_t>(std::ceil(d)) - 1);
    if (!err_.empty()) return "value";
    if (!lo && !hi) return "integer";
    if (lo && hi && *lo > *hi) {
      fail(ErrorKind::InvalidArgument, "no integer lies between the bounds (at " + hint + ")");
      return "value";
    }
    std::vector<std::string> alts;
    // Negative part: -(magnitudes in [max(1, -hi), -lo]).
    if (!lo || *lo < 0) {
      const int64_t mag_lo = hi && *hi < 0 ? -*hi : 1;
      const int64_t mag_hi = lo ? -*lo : -1;
      alts.push_back("\"-\" " + natural_range(mag_lo, mag_hi));
    }
    if (!hi || *hi >= 0) alts.push_back(natural_range(lo && *lo > 0 ? *lo : 0, hi ? *hi : -1));
    std::string body;
    for (size_t i = 0; i < alts.size(); ++i) body += (i ? " | " : "") + alts[i];
    return rule(hint, body);
  }

  Json root_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::map<std::string, std::string> refs_;
  std::set<std::string> names_;
  std::string err_;
  ErrorKind kind_ = ErrorKind::InvalidArgument;
};

}  // namespace

Result<std::string> json_schema_to_gbnf(std::string_view schema_json) {
  auto schema = Json::parse(schema_json);
  if (!schema) return error(ErrorKind::InvalidArgument, "json_schema: the schema is not valid JSON: " + schema.status().message());
  return Converter(std::move(schema).value()).run();
}

}  // namespace tern::grammar
