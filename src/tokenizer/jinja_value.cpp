// Values with Python semantics: the templates were written for Python's Jinja2, so str(),
// ==, truthiness and json.dumps must behave like Python's for the output to match.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "tokenizer/jinja_ast.h"

namespace tern::jinja {

const Value* Value::find(std::string_view key) const {
  if (!is_mapping() || !dict) return nullptr;
  for (const auto& [k, v] : *dict) {
    if (k == key) return &v;
  }
  return nullptr;
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case ValueKind::Undefined:
    case ValueKind::None: return false;
    case ValueKind::Bool: return v.b;
    case ValueKind::Int: return v.i != 0;
    case ValueKind::Float: return v.f != 0.0;
    case ValueKind::String: return !v.s.empty();
    case ValueKind::Array: return !v.list->empty();
    case ValueKind::Map: return !v.dict->empty();
    case ValueKind::Namespace:
    case ValueKind::Macro: return true;
  }
  return false;
}

namespace {
// Python's bool is an int: True == 1 and 1 == 1.0.
bool numeric(const Value& v) {
  return v.kind == ValueKind::Bool || v.kind == ValueKind::Int || v.kind == ValueKind::Float;
}
double as_double(const Value& v) {
  return v.kind == ValueKind::Float ? v.f : v.kind == ValueKind::Int ? static_cast<double>(v.i) : (v.b ? 1.0 : 0.0);
}
}  // namespace

bool equals(const Value& a, const Value& b) {
  if (numeric(a) && numeric(b)) {
    if (a.kind != ValueKind::Float && b.kind != ValueKind::Float) {
      int64_t x = a.kind == ValueKind::Int ? a.i : a.b, y = b.kind == ValueKind::Int ? b.i : b.b;
      return x == y;
    }
    return as_double(a) == as_double(b);
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case ValueKind::Undefined:
    case ValueKind::None: return true;
    case ValueKind::String: return a.s == b.s;
    case ValueKind::Array: {
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k) {
        if (!equals((*a.list)[k], (*b.list)[k])) return false;
      }
      return true;
    }
    case ValueKind::Map: {
      if (a.dict->size() != b.dict->size()) return false;
      for (const auto& [key, value] : *a.dict) {
        const Value* other = b.find(key);
        if (other == nullptr || !equals(value, *other)) return false;
      }
      return true;
    }
    case ValueKind::Namespace: return a.dict == b.dict;
    case ValueKind::Macro: return a.macro == b.macro && a.closure == b.closure;
    default: return false;
  }
}

const char* type_name(const Value& v) {
  switch (v.kind) {
    case ValueKind::Undefined: return "undefined";
    case ValueKind::None: return "none";
    case ValueKind::Bool: return "bool";
    case ValueKind::Int: return "int";
    case ValueKind::Float: return "float";
    case ValueKind::String: return "str";
    case ValueKind::Array: return "list";
    case ValueKind::Map: return "dict";
    case ValueKind::Namespace: return "namespace";
    case ValueKind::Macro: return "macro";
  }
  return "?";
}

namespace {

// Python's float repr: shortest round-trip digits, always with a '.' or exponent.
void append_float(double f, std::string& out) {
  if (std::isnan(f)) {
    out += "nan";
    return;
  }
  if (std::isinf(f)) {
    out += f < 0 ? "-inf" : "inf";
    return;
  }
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, f);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  out += s;
}

void append_repr_string(const std::string& s, std::string& out) {
  const char quote = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  out += quote;
  for (char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c == quote) {
          out += '\\';
          out += c;
        } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += quote;
}

void append_json_string(const std::string& s, std::string& out) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

bool append_json_at(const Value& v, int indent, int level, std::string& out, size_t max_bytes) {
  if (out.size() > max_bytes) return false;
  auto newline = [&](int lvl) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent) * static_cast<size_t>(lvl), ' ');
  };
  const char* item_sep = indent < 0 ? ", " : ",";
  switch (v.kind) {
    case ValueKind::Undefined:
    case ValueKind::None:
    case ValueKind::Macro: out += "null"; break;  // Jinja would refuse; a template never asks
    case ValueKind::Bool: out += v.b ? "true" : "false"; break;
    case ValueKind::Int: out += std::to_string(v.i); break;
    case ValueKind::Float:
      if (std::isnan(v.f)) {
        out += "NaN";
      } else if (std::isinf(v.f)) {
        out += v.f < 0 ? "-Infinity" : "Infinity";
      } else {
        append_float(v.f, out);
      }
      break;
    case ValueKind::String: append_json_string(v.s, out); break;
    case ValueKind::Array: {
      if (v.list->empty()) {
        out += "[]";
        break;
      }
      out += '[';
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k > 0) out += item_sep;
        newline(level + 1);
        if (!append_json_at((*v.list)[k], indent, level + 1, out, max_bytes)) return false;
      }
      newline(level);
      out += ']';
      break;
    }
    case ValueKind::Map:
    case ValueKind::Namespace: {
      if (v.dict->empty()) {
        out += "{}";
        break;
      }
      out += '{';
      bool first = true;
      for (const auto& [key, value] : *v.dict) {
        if (!first) out += item_sep;
        first = false;
        newline(level + 1);
        append_json_string(key, out);
        out += ": ";
        if (!append_json_at(value, indent, level + 1, out, max_bytes)) return false;
      }
      newline(level);
      out += '}';
      break;
    }
  }
  return out.size() <= max_bytes;
}

}  // namespace

bool append_repr(const Value& v, std::string& out, size_t max_bytes) {
  if (v.kind == ValueKind::String) {
    append_repr_string(v.s, out);
    return out.size() <= max_bytes;
  }
  return append_str(v, out, max_bytes);
}

bool append_str(const Value& v, std::string& out, size_t max_bytes) {
  if (out.size() > max_bytes) return false;
  switch (v.kind) {
    case ValueKind::Undefined: break;
    case ValueKind::None: out += "None"; break;
    case ValueKind::Bool: out += v.b ? "True" : "False"; break;
    case ValueKind::Int: out += std::to_string(v.i); break;
    case ValueKind::Float: append_float(v.f, out); break;
    case ValueKind::String: out += v.s; break;
    case ValueKind::Array: {
      out += '[';
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k > 0) out += ", ";
        if (!append_repr((*v.list)[k], out, max_bytes)) return false;
      }
      out += ']';
      break;
    }
    case ValueKind::Map: {
      out += '{';
      bool first = true;
      for (const auto& [key, value] : *v.dict) {
        if (!first) out += ", ";
        first = false;
        append_repr_string(key, out);
        out += ": ";
        if (!append_repr(value, out, max_bytes)) return false;
      }
      out += '}';
      break;
    }
    case ValueKind::Namespace: out += "<Namespace>"; break;
    case ValueKind::Macro: out += "<Macro>"; break;
  }
  return out.size() <= max_bytes;
}

bool append_json(const Value& v, int indent, std::string& out, size_t max_bytes) {
  return append_json_at(v, indent, 0, out, max_bytes);
}

std::vector<size_t> code_points(const std::string& s) {
  std::vector<size_t> starts;
  starts.reserve(s.size() + 1);
  for (size_t k = 0; k < s.size(); ++k) {
    if ((static_cast<unsigned char>(s[k]) & 0xC0) != 0x80) starts.push_back(k);
  }
  starts.push_back(s.size());
  return starts;
}

}  // namespace tern::jinja
