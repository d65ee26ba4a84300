// An independent JSON Schema validator for the keywords grammar/json_schema.h
// supports, written for the tests from the specification (not from the
// converter): the oracle that generated instances are checked against.
// Follows the converter's documented decisions where the spec leaves room:
// listed properties close an object unless additionalProperties says
// otherwise, prefixItems are all required, patterns match the whole string.
#pragma once

#include <nlohmann/json.hpp>
#include <regex>
#include <string>

namespace tern::grammar::testing {

class SchemaValidator {
 public:
  explicit SchemaValidator(nlohmann::ordered_json root) : root_(std::move(root)) {}
  bool valid(const nlohmann::ordered_json& v) const { return check(root_, v, 0); }

 private:
  using json = nlohmann::ordered_json;

  static size_t utf8_length(const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
  }

  const json& resolve(const std::string& ref) const {
    if (ref == "#") return root_;
    const size_t slash = ref.find_last_of('/');
    const std::string key = ref.rfind("#/$defs/", 0) == 0 ? "$defs" : "definitions";
    return root_[key][ref.substr(slash + 1)];
  }

  bool check(const json& s, const json& v, int depth) const {
    if (depth > 100) return false;
    if (s.is_boolean()) return s.get<bool>();
    if (s.contains("$ref")) return check(resolve(s["$ref"].get<std::string>()), v, depth + 1);
    if (s.contains("const")) return s["const"] == v;
    if (s.contains("enum")) {
      for (const json& e : s["enum"])
        if (e == v) return true;
      return false;
    }
    if (s.contains("anyOf") || s.contains("oneOf")) {
      for (const json& sub : s.contains("anyOf") ? s["anyOf"] : s["oneOf"])
        if (check(sub, v, depth + 1)) return true;
      return false;
    }
    if (s.contains("allOf")) {
      json merged = {{"type", "object"}, {"properties", json::object()}, {"required", json::array()}};
      for (json part : s["allOf"]) {
        if (part.contains("$ref")) part = resolve(part["$ref"].get<std::string>());
        for (const auto& [k, p] : part["properties"].items()) merged["properties"][k] = p;
        if (part.contains("required"))
          for (const json& r : part["required"]) merged["required"].push_back(r);
      }
      return check(merged, v, depth + 1);
    }
    if (s.contains("type") && s["type"].is_array()) {
      for (const json& t : s["type"]) {
        json one = s;
        one["type"] = t;
        if (check(one, v, depth + 1)) return true;
      }
      return false;
    }
    std::string type = s.value("type", "");
    if (type.empty() && (s.contains("properties") || s.contains("additionalProperties"))) type = "object";
    if (type.empty() && (s.contains("items") || s.contains("prefixItems"))) type = "array";
    if (type == "object") return check_object(s, v, depth);
    if (type == "array") return check_array(s, v, depth);
    if (type == "string") {
      if (!v.is_string()) return false;
      const std::string str = v.get<std::string>();
      const size_t n = utf8_length(str);
      if (s.contains("minLength") && n < s["minLength"].get<size_t>()) return false;
      if (s.contains("maxLength") && n > s["maxLength"].get<size_t>()) return false;
      if (s.contains("pattern") && !std::regex_match(str, std::regex(s["pattern"].get<std::string>()))) return false;
      if (s.contains("format")) {
        const std::string f = s["format"].get<std::string>();
        const char* re = f == "date"      ? R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01]))"
                         : f == "uuid"    ? R"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
                         : f == "email"   ? R"([A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,})"
                         : f == "date-time" ? R"(\d{4}-\d\d-\d\dT([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]\d\d:\d\d))"
                                            : nullptr;
        if (re && !std::regex_match(str, std::regex(re))) return false;
      }
      return true;
    }
    if (type == "integer") {
      if (!v.is_number_integer()) return false;
      const double x = v.get<double>();
      if (s.contains("minimum") && x < s["minimum"].get<double>()) return false;
      if (s.contains("maximum") && x > s["maximum"].get<double>()) return false;
      if (s.contains("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>()) return false;
      if (s.contains("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>()) return false;
      return true;
    }
    if (type == "number") return v.is_number();
    if (type == "boolean") return v.is_boolean();
    if (type == "null") return v.is_null();
    return true;  // no type: any value
  }

  bool check_object(const json& s, const json& v, int depth) const {
    if (!v.is_object()) return false;
    const json props = s.value("properties", json::object());
    if (s.contains("required"))
      for (const json& r : s["required"])
        if (!v.contains(r.get<std::string>())) return false;
    const json add = s.contains("additionalProperties") ? s["additionalProperties"] : json(props.empty());
    for (const auto& [k, x] : v.items()) {
      if (props.contains(k)) {
        if (!check(props[k], x, depth + 1)) return false;
      } else if (!check(add, x, depth + 1)) {
        return false;
      }
    }
    return true;
  }

  bool check_array(const json& s, const json& v, int depth) const {
    if (!v.is_array()) return false;
    size_t first = 0;
    if (s.contains("prefixItems")) {
      const json& pre = s["prefixItems"];
      if (v.size() < pre.size()) return false;
      for (size_t i = 0; i < pre.size(); ++i)
        if (!check(pre[i], v[i], depth + 1)) return false;
      first = pre.size();
    }
    const json items = s.contains("items") ? s["items"] : json(true);
    for (size_t i = first; i < v.size(); ++i)
      if (!check(items, v[i], depth + 1)) return false;
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
    return true;
  }

  json root_;
};

}  // namespace tern::grammar::testing
