// Filters, tests and methods that chat templates call. Each follows the Python/Jinja2
// original closely enough for the outputs to match; case mapping is ASCII-only.
#include <algorithm>
#include <cctype>

#include "tokenizer/jinja_ast.h"

namespace tern::jinja {

const Value* CallArgs::kwarg(std::string_view key) const {
  for (const auto& [k, v] : kwargs) {
    if (k == key) return &v;
  }
  return nullptr;
}

namespace {

Status type_error(const std::string& message) { return error(ErrorKind::InvalidArgument, message); }
Status too_large() { return error(ErrorKind::OutOfRange, "a string grew past the output limit"); }

// Positional argument k, or the keyword `key`, or null.
const Value* arg(const CallArgs& call, size_t k, std::string_view key) {
  if (k < call.args.size()) return &call.args[k];
  return call.kwarg(key);
}

bool is_py_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

std::string strip(const std::string& s, const Value* chars, bool left, bool right) {
  auto strip_char = [&](char c) {
    return chars != nullptr && chars->is_string() ? chars->s.find(c) != std::string::npos : is_py_space(c);
  };
  size_t b = 0, e = s.size();
  if (left) {
    while (b < e && strip_char(s[b])) ++b;
  }
  if (right) {
    while (e > b && strip_char(s[e - 1])) --e;
  }
  return s.substr(b, e - b);
}

std::string ascii_case(std::string s, bool upper) {
  for (char& c : s) c = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Python str.title(): a letter after a non-letter is upper-cased, every other letter lowered.
std::string title_case(std::string s) {
  bool prev_letter = false;
  for (char& c : s) {
    bool letter = std::isalpha(static_cast<unsigned char>(c)) != 0;
    if (letter) c = static_cast<char>(prev_letter ? std::tolower(static_cast<unsigned char>(c)) : std::toupper(static_cast<unsigned char>(c)));
    prev_letter = letter;
  }
  return s;
}

std::string capitalize(std::string s) {
  s = ascii_case(std::move(s), false);
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s;
}

Result<Value> replace(const std::string& s, const Value* old_v, const Value* new_v, const Value* count_v,
                      size_t max_bytes) {
  if (old_v == nullptr || new_v == nullptr || !old_v->is_string() || !new_v->is_string()) {
    return type_error("replace() needs two strings");
  }
  const std::string& from = old_v->s;
  const std::string& to = new_v->s;
  int64_t limit = count_v != nullptr && count_v->kind == ValueKind::Int ? count_v->i : -1;
  std::string out;
  size_t pos = 0;
  int64_t n = 0;
  if (from.empty()) {  // Python inserts `to` before every character and at the end
    std::vector<size_t> cps = code_points(s);
    const size_t n_chars = cps.size() - 1;
    for (size_t k = 0; k <= n_chars; ++k) {
      if (limit < 0 || n < limit) {
        out += to;
        ++n;
      }
      if (k < n_chars) out.append(s, cps[k], cps[k + 1] - cps[k]);
      if (out.size() > max_bytes) return too_large();
    }
    return Value::of_string(std::move(out));
  }
  for (;;) {
    size_t hit = s.find(from, pos);
    if (hit == std::string::npos || (limit >= 0 && n >= limit)) break;
    out.append(s, pos, hit - pos);
    out += to;
    pos = hit + from.size();
    ++n;
    if (out.size() > max_bytes) return too_large();
  }
  out.append(s, pos, std::string::npos);
  return Value::of_string(std::move(out));
}

// Items of an iterable as Python iterates it: list elements, dict keys, string characters.
Result<List> iterate(const Value& v) {
  switch (v.kind) {
    case ValueKind::Undefined: return List{};
    case ValueKind::Array: return *v.list;
    case ValueKind::Map: {
      List keys;
      for (const auto& kv : *v.dict) keys.push_back(Value::of_string(kv.first));
      return keys;
    }
    case ValueKind::String: {
      List chars;
      std::vector<size_t> cps = code_points(v.s);
      for (size_t k = 0; k + 1 < cps.size(); ++k) chars.push_back(Value::of_string(v.s.substr(cps[k], cps[k + 1] - cps[k])));
      return chars;
    }
    default: return type_error(std::string("'") + type_name(v) + "' object is not iterable");
  }
}

Value get_attribute(const Value& v, const std::string& name) {
  const Value* found = v.find(name);
  return found != nullptr ? *found : Value{};
}

// selectattr / rejectattr / select / reject: `first_test_arg` is where the test name sits.
Result<Value> select_items(const Value& in, const CallArgs& call, bool by_attr, bool keep_when) {
  auto items = iterate(in);
  if (!items.is_ok()) return items.status();
  size_t t = by_attr ? 1 : 0;
  if (by_attr && (call.args.empty() || !call.args[0].is_string())) return type_error("selectattr() needs an attribute name");
  CallArgs test_args;
  for (size_t k = t + 1; k < call.args.size(); ++k) test_args.args.push_back(call.args[k]);
  List out;
  for (const Value& item : items.value()) {
    Value subject = by_attr ? get_attribute(item, call.args[0].s) : item;
    bool pass = truthy(subject);
    if (t < call.args.size()) {
      if (!call.args[t].is_string()) return type_error("the test name must be a string");
      auto r = apply_test(call.args[t].s, subject, test_args);
      if (!r.is_ok()) return r.status();
      pass = r.value();
    }
    if (pass == keep_when) out.push_back(item);
  }
  return Value::of_list(std::move(out));
}

Result<Value> join(const Value& in, const CallArgs& call, size_t max_bytes) {
  auto items = iterate(in);
  if (!items.is_ok()) return items.status();
  const Value* sep = arg(call, 0, "d");
  const Value* attribute = call.kwarg("attribute");
  std::string out;
  bool first = true;
  for (const Value& item : items.value()) {
    if (!first && sep != nullptr && !append_str(*sep, out, max_bytes)) return too_large();
    first = false;
    const Value& v = attribute != nullptr && attribute->is_string() ? get_attribute(item, attribute->s) : item;
    if (!append_str(v, out, max_bytes)) return too_large();
  }
  return Value::of_string(std::move(out));
}

Result<Value> map_items(const Value& in, const CallArgs& call, size_t max_bytes) {
  auto items = iterate(in);
  if (!items.is_ok()) return items.status();
  const Value* attribute = call.kwarg("attribute");
  List out;
  if (attribute != nullptr && attribute->is_string()) {
    const Value* fallback = call.kwarg("default");
    for (const Value& item : items.value()) {
      Value v = get_attribute(item, attribute->s);
      out.push_back(v.is_undefined() && fallback != nullptr ? *fallback : v);
    }
    return Value::of_list(std::move(out));
  }
  if (call.args.empty() || !call.args[0].is_string()) return type_error("map() needs a filter name or attribute=");
  CallArgs rest;
  rest.args.assign(call.args.begin() + 1, call.args.end());
  for (const Value& item : items.value()) {
    auto r = apply_filter(call.args[0].s, item, rest, max_bytes);
    if (!r.is_ok()) return r.status();
    out.push_back(std::move(r.value()));
  }
  return Value::of_list(std::move(out));
}

Result<Value> length(const Value& in) {
  switch (in.kind) {
    case ValueKind::Undefined: return Value::of_int(0);
    case ValueKind::String: return Value::of_int(static_cast<int64_t>(code_points(in.s).size() - 1));
    case ValueKind::Array: return Value::of_int(static_cast<int64_t>(in.list->size()));
    case ValueKind::Map:
    case ValueKind::Namespace: return Value::of_int(static_cast<int64_t>(in.dict->size()));
    default: return type_error(std::string("object of type '") + type_name(in) + "' has no length");
  }
}

Result<Value> first_or_last(const Value& in, bool last) {
  auto items = iterate(in);
  if (!items.is_ok()) return items.status();
  if (items.value().empty()) return Value{};
  return last ? items.value().back() : items.value().front();
}

Result<Value> to_int(const Value& in, const CallArgs& call) {
  const Value* fallback = arg(call, 0, "default");
  Value def = fallback != nullptr ? *fallback : Value::of_int(0);
  switch (in.kind) {
    case ValueKind::Int: return in;
    case ValueKind::Bool: return Value::of_int(in.b ? 1 : 0);
    case ValueKind::Float: return Value::of_int(static_cast<int64_t>(in.f));
    case ValueKind::String: {
      std::string s = strip(in.s, nullptr, true, true);
      char* end = nullptr;
      long long v = std::strtoll(s.c_str(), &end, 10);
      return !s.empty() && end != nullptr && *end == '\0' ? Value::of_int(v) : def;
    }
    default: return def;
  }
}

Result<Value> to_float(const Value& in, const CallArgs& call) {
  const Value* fallback = arg(call, 0, "default");
  Value def = fallback != nullptr ? *fallback : Value::of_float(0.0);
  switch (in.kind) {
    case ValueKind::Float: return in;
    case ValueKind::Int: return Value::of_float(static_cast<double>(in.i));
    case ValueKind::Bool: return Value::of_float(in.b ? 1.0 : 0.0);
    case ValueKind::String: {
      std::string s = strip(in.s, nullptr, true, true);
      char* end = nullptr;
      double v = std::strtod(s.c_str(), &end);
      return !s.empty() && end != nullptr && *end == '\0' ? Value::of_float(v) : def;
    }
    default: return def;
  }
}

Result<Value> string_filter(const Value& in, size_t max_bytes) {
  std::string out;
  if (!append_str(in, out, max_bytes)) return too_large();
  return Value::of_string(std::move(out));
}

Result<Value> split(const std::string& s, const CallArgs& call) {
  const Value* sep = arg(call, 0, "sep");
  const Value* max_v = arg(call, 1, "maxsplit");
  int64_t max_split = max_v != nullptr && max_v->kind == ValueKind::Int ? max_v->i : -1;
  List out;
  if (sep == nullptr || sep->kind == ValueKind::None) {  // runs of whitespace; no empty items
    size_t k = 0;
    while (k < s.size()) {
      while (k < s.size() && is_py_space(s[k])) ++k;
      if (k >= s.size()) break;
      if (max_split >= 0 && static_cast<int64_t>(out.size()) >= max_split) {
        out.push_back(Value::of_string(strip(s.substr(k), nullptr, false, true)));
        break;
      }
      size_t e = k;
      while (e < s.size() && !is_py_space(s[e])) ++e;
      out.push_back(Value::of_string(s.substr(k, e - k)));
      k = e;
    }
    return Value::of_list(std::move(out));
  }
  if (!sep->is_string() || sep->s.empty()) return type_error("split() separator must be a non-empty string");
  size_t pos = 0;
  for (;;) {
    size_t hit = s.find(sep->s, pos);
    if (hit == std::string::npos || (max_split >= 0 && static_cast<int64_t>(out.size()) >= max_split)) break;
    out.push_back(Value::of_string(s.substr(pos, hit - pos)));
    pos = hit + sep->s.size();
  }
  out.push_back(Value::of_string(s.substr(pos)));
  return Value::of_list(std::move(out));
}

// startswith/endswith take a string or a tuple of strings.
Result<Value> affix_test(const std::string& s, const CallArgs& call, bool prefix) {
  if (call.args.empty()) return type_error("startswith()/endswith() need an argument");
  List candidates = call.args[0].kind == ValueKind::Array ? *call.args[0].list : List{call.args[0]};
  for (const Value& c : candidates) {
    if (!c.is_string()) return type_error("startswith()/endswith() need string arguments");
    bool hit = prefix ? s.compare(0, c.s.size(), c.s) == 0 && s.size() >= c.s.size()
                      : s.size() >= c.s.size() && s.compare(s.size() - c.s.size(), c.s.size(), c.s) == 0;
    if (hit) return Value::of_bool(true);
  }
  return Value::of_bool(false);
}

Result<Value> string_method(const std::string& s, const std::string& name, const CallArgs& call, size_t max_bytes) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const Value* chars = call.args.empty() ? nullptr : &call.args[0];
    return Value::of_string(strip(s, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "upper" || name == "lower") return Value::of_string(ascii_case(s, name == "upper"));
  if (name == "title") return Value::of_string(title_case(s));
  if (name == "capitalize") return Value::of_string(capitalize(s));
  if (name == "startswith" || name == "endswith") return affix_test(s, call, name == "startswith");
  if (name == "split") return split(s, call);
  if (name == "replace") {
    return replace(s, arg(call, 0, "old"), arg(call, 1, "new"), arg(call, 2, "count"), max_bytes);
  }
  if (name == "find") {
    if (call.args.empty() || !call.args[0].is_string()) return type_error("find() needs a string");
    size_t hit = s.find(call.args[0].s);
    if (hit == std::string::npos) return Value::of_int(-1);
    return Value::of_int(static_cast<int64_t>(code_points(s.substr(0, hit)).size() - 1));
  }
  if (name == "join") {
    if (call.args.empty()) return type_error("join() needs an iterable");
    CallArgs sep;
    sep.args.push_back(Value::of_string(s));
    return join(call.args[0], sep, max_bytes);
  }
  return type_error("'str' object has no method '" + name + "'");
}

Result<Value> dict_method(const Value& d, const std::string& name, const CallArgs& call) {
  if (name == "items" || name == "keys" || name == "values") {
    List out;
    for (const auto& [k, v] : *d.dict) {
      if (name == "items") {
        out.push_back(Value::of_list({Value::of_string(k), v}));
      } else {
        out.push_back(name == "keys" ? Value::of_string(k) : v);
      }
    }
    return Value::of_list(std::move(out));
  }
  if (name == "get") {
    if (call.args.empty() || !call.args[0].is_string()) return type_error("get() needs a string key");
    const Value* found = d.find(call.args[0].s);
    if (found != nullptr) return *found;
    return call.args.size() > 1 ? call.args[1] : Value::none();
  }
  return type_error(std::string("'") + type_name(d) + "' object has no method '" + name + "'");
}

}  // namespace

Result<Value> apply_filter(const std::string& name, const Value& in, const CallArgs& call, size_t max_bytes) {
  if (name == "trim" || name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    auto s = string_filter(in, max_bytes);
    if (!s.is_ok()) return s;
    const std::string& text = s.value().s;
    if (name == "trim") return Value::of_string(strip(text, arg(call, 0, "chars"), true, true));
    if (name == "title") return Value::of_string(title_case(text));
    if (name == "capitalize") return Value::of_string(capitalize(text));
    return Value::of_string(ascii_case(text, name == "upper"));
  }
  if (name == "length" || name == "count") return length(in);
  if (name == "string") return string_filter(in, max_bytes);
  if (name == "safe") return in;
  if (name == "tojson") {
    const Value* indent = arg(call, 0, "indent");
    std::string out;
    int n = indent != nullptr && indent->kind == ValueKind::Int ? static_cast<int>(std::clamp<int64_t>(indent->i, 0, 64)) : -1;
    if (!append_json(in, n, out, max_bytes)) return too_large();
    return Value::of_string(std::move(out));
  }
  if (name == "default" || name == "d") {
    const Value* fallback = arg(call, 0, "default_value");
    const Value* boolean = arg(call, 1, "boolean");
    bool use_fallback = in.is_undefined() || (boolean != nullptr && truthy(*boolean) && !truthy(in));
    if (!use_fallback) return in;
    return fallback != nullptr ? *fallback : Value::of_string("");
  }
  if (name == "first" || name == "last") return first_or_last(in, name == "last");
  if (name == "join") return join(in, call, max_bytes);
  if (name == "items") {
    if (in.is_undefined()) return Value::of_list({});
    if (!in.is_mapping()) return type_error(std::string("items expects a mapping, got '") + type_name(in) + "'");
    return dict_method(in, "items", call);
  }
  if (name == "list") {
    auto items = iterate(in);
    if (!items.is_ok()) return items.status();
    return Value::of_list(std::move(items.value()));
  }
  if (name == "unique") {
    auto items = iterate(in);
    if (!items.is_ok()) return items.status();
    List out;
    for (const Value& v : items.value()) {
      if (std::none_of(out.begin(), out.end(), [&](const Value& o) { return equals(o, v); })) out.push_back(v);
    }
    return Value::of_list(std::move(out));
  }
  if (name == "replace") {
    auto s = string_filter(in, max_bytes);
    if (!s.is_ok()) return s;
    return replace(s.value().s, arg(call, 0, "old"), arg(call, 1, "new"), arg(call, 2, "count"), max_bytes);
  }
  if (name == "int") return to_int(in, call);
  if (name == "float") return to_float(in, call);
  if (name == "abs") {
    if (in.kind == ValueKind::Int) return Value::of_int(in.i < 0 ? -in.i : in.i);
    if (in.kind == ValueKind::Float) return Value::of_float(in.f < 0 ? -in.f : in.f);
    return type_error(std::string("bad operand type for abs(): '") + type_name(in) + "'");
  }
  if (name == "selectattr" || name == "rejectattr") return select_items(in, call, true, name == "selectattr");
  if (name == "select" || name == "reject") return select_items(in, call, false, name == "select");
  if (name == "map") return map_items(in, call, max_bytes);
  return type_error("unsupported filter '" + name + "'");
}

Result<bool> apply_test(const std::string& name, const Value& in, const CallArgs& call) {
  const Value* a = call.args.empty() ? nullptr : &call.args[0];
  const ValueKind k = in.kind;
  if (name == "defined") return !in.is_undefined();
  if (name == "undefined") return in.is_undefined();
  if (name == "none") return k == ValueKind::None;
  if (name == "string") return k == ValueKind::String;
  if (name == "number") return k == ValueKind::Int || k == ValueKind::Float || k == ValueKind::Bool;
  if (name == "integer") return k == ValueKind::Int;
  if (name == "float") return k == ValueKind::Float;
  if (name == "boolean") return k == ValueKind::Bool;
  if (name == "mapping") return k == ValueKind::Map;
  if (name == "iterable" || name == "sequence") return k == ValueKind::String || k == ValueKind::Array || k == ValueKind::Map;
  if (name == "callable") return false;
  if (name == "true") return k == ValueKind::Bool && in.b;
  if (name == "false") return k == ValueKind::Bool && !in.b;
  if (name == "lower" || name == "upper") {
    return k == ValueKind::String && ascii_case(in.s, name == "upper") == in.s;
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (k != ValueKind::Int) return type_error(std::string("test '") + name + "' needs an integer");
    if (name == "odd") return in.i % 2 != 0;
    if (name == "even") return in.i % 2 == 0;
    if (a == nullptr || a->kind != ValueKind::Int || a->i == 0) return type_error("divisibleby needs a non-zero integer");
    return in.i % a->i == 0;
  }
  if (name == "equalto" || name == "eq" || name == "sameas") return a != nullptr && equals(in, *a);
  if (name == "ne") return a == nullptr || !equals(in, *a);
  if (name == "in") {
    if (a == nullptr) return type_error("test 'in' needs a container");
    if (a->is_string() && in.is_string()) return a->s.find(in.s) != std::string::npos;
    if (a->kind == ValueKind::Array) {
      return std::any_of(a->list->begin(), a->list->end(), [&](const Value& v) { return equals(v, in); });
    }
    if (a->is_mapping() && in.is_string()) return a->find(in.s) != nullptr;
    return false;
  }
  return type_error("unsupported test '" + name + "'");
}

Result<Value> call_method(const Value& obj, const std::string& name, const CallArgs& call, size_t max_bytes) {
  if (obj.is_string()) return string_method(obj.s, name, call, max_bytes);
  if (obj.kind == ValueKind::Map) return dict_method(obj, name, call);
  return type_error(std::string("'") + type_name(obj) + "' object has no method '" + name + "'");
}

}  // namespace tern::jinja
