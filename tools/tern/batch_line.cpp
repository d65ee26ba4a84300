// tools/tern/batch_line.cpp — see batch_line.h.
#include "batch_line.h"

#include <cstdint>
#include <type_traits>

#include "engine/streaming.h"

namespace tern::cli {
namespace {

std::string quoted(const char* key) { return std::string("\"") + key + "\""; }

// Fields that must be JSON integers (1.7 and 1e10 are refused, not cast).
// Returns an error message or "".
std::string get_integer(const Json& v, const char* key, int64_t lo, int64_t hi, int64_t& out) {
  if (!v.is_integer()) return quoted(key) + " must be an integer, got " + v.dump();
  const auto i = v.to_int64();
  if (!i || *i < lo || *i > hi)
    return quoted(key) + " = " + v.dump() + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  out = *i;
  return "";
}

std::string parse_token_ids(const Json& p, std::vector<int32_t>& out) {
  const Json::Array& ids = p.as_array();
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto t = ids[i].to_int64();
    if (!t || *t < 0 || *t > INT32_MAX)
      return "\"prompt\"[" + std::to_string(i) + "] = " + ids[i].dump() + " is not a token id (an integer >= 0)";
    out.push_back(static_cast<int32_t>(*t));
  }
  return "";
}

std::string parse_stop(const Json& s, std::vector<std::string>& out) {
  if (s.is_string()) {
    out.push_back(s.as_string());
  } else if (s.is_array()) {
    for (const Json& t : s.as_array()) {
      if (!t.is_string()) return "\"stop\" must be a string or an array of strings, got " + s.dump();
      out.push_back(t.as_string());
    }
  } else {
    return "\"stop\" must be a string or an array of strings, got " + s.dump();
  }
  for (const std::string& t : out)
    if (t.empty()) return "\"stop\" strings must not be empty (an empty stop would end every request at once)";
  return "";
}

// "grammar" (GBNF), "regex", "json_schema" (a schema) or "response_format"
// ({"type": "json_object"} or {"type": "json_schema", "json_schema": {"schema"}}),
// at most one; the schema keeps the line's key order (its property order).
std::string parse_constraint(const Json& j, OutputConstraint& out) {
  int n = 0;
  for (const auto& [key, kind] : {std::pair{"grammar", ConstraintKind::Gbnf}, std::pair{"regex", ConstraintKind::Regex}}) {
    const Json* v = j.find(key);
    if (!v) continue;
    if (!v->is_string()) return quoted(key) + " must be a string, got " + std::string(v->type_name());
    out = {kind, v->as_string()}, ++n;
  }
  if (const Json* schema = j.find("json_schema")) out = {ConstraintKind::JsonSchema, schema->dump()}, ++n;
  if (const Json* rf = j.find("response_format")) {
    if (!rf->is_object()) return "\"response_format\" must be an object";
    const Json& type = (*rf)["type"];
    const std::string t = type.is_string() ? type.as_string() : "";
    if (t == "json_object") {
      out = {ConstraintKind::JsonObject, ""}, ++n;
    } else if (t == "json_schema") {
      const Json* schema = (*rf)["json_schema"].find("schema");
      if (!schema) return "\"response_format\" json_schema needs \"json_schema\": {\"schema\": ...}";
      out = {ConstraintKind::JsonSchema, schema->dump()}, ++n;
    } else if (t != "text") {
      return "\"response_format\" type must be text, json_object or json_schema";
    }
  }
  if (n > 1) return "give at most one of \"grammar\", \"regex\", \"json_schema\" and \"response_format\"";
  return "";
}

std::string parse_number(const Json& j, const char* key, float& out) {
  const Json* v = j.find(key);
  if (!v) return "";
  if (!v->is_number()) return quoted(key) + " must be a number, got " + v->dump();
  out = static_cast<float>(v->as_double());
  return "";
}

}  // namespace

std::string parse_batch_line(const std::string& line, BatchLine& item) {
  auto parsed = Json::parse(line, /*max_depth=*/64);
  if (!parsed) return parsed.status().message();
  const Json& j = *parsed;
  if (!j.is_object()) return "expected a JSON object";
  if (const Json* id = j.find("id")) item.id = *id;
  GenerationRequest& r = item.request;
  r.sampling.seed = SamplingParams::kRandomSeed;
  std::string err;
  int64_t v = 0;
  auto integer = [&](const char* key, int64_t lo, int64_t hi, auto& field) {
    const Json* f = j.find(key);
    if (!err.empty() || !f) return;
    err = get_integer(*f, key, lo, hi, v);
    if (err.empty()) field = static_cast<std::remove_reference_t<decltype(field)>>(v);
  };
  const Json* p = j.find("prompt");
  if (!p) return "missing \"prompt\"";
  if (p->is_string()) r.prompt = p->as_string();
  else if (p->is_array()) err = parse_token_ids(*p, r.prompt_tokens);
  else return "\"prompt\" must be a string or an array of token ids";
  integer("max_tokens", 0, INT32_MAX, r.max_tokens);
  integer("top_k", INT32_MIN, INT32_MAX, r.sampling.top_k);
  integer("priority", INT32_MIN, INT32_MAX, r.priority);
  if (!err.empty()) return err;
  if (const Json* seed = j.find("seed")) {
    if (!seed->to_uint64()) return "\"seed\" must be an integer >= 0, got " + seed->dump();
    r.sampling.seed = *seed->to_uint64();
  }
  for (const auto& [key, field] : {std::pair<const char*, float*>{"temperature", &r.sampling.temperature},
                                   {"top_p", &r.sampling.top_p}, {"min_p", &r.sampling.min_p}})
    if (err = parse_number(j, key, *field); !err.empty()) return err;
  if (const Json* t = j.find("tenant")) {
    if (!t->is_string()) return "\"tenant\" must be a string, got " + t->dump();
    r.tenant = t->as_string();
  }
  if (const Json* e = j.find("ignore_eos")) {
    if (!e->is_bool()) return "\"ignore_eos\" must be true or false, got " + e->dump();
    r.ignore_eos = e->as_bool();
  }
  if (const Json* s = j.find("streaming")) {
    auto st = streaming_from_json(*s);
    if (!st) return st.status().message();
    r.streaming = *st;
  }
  if (const Json* e = j.find("kv_evict")) {
    auto ev = kv_evict_from_json(*e);
    if (!ev) return ev.status().message();
    r.kv_evict = *ev;
  }
  if (const Json* s = j.find("stop")) err = parse_stop(*s, r.stop);
  if (err.empty()) err = parse_constraint(j, r.constraint);
  return err;
}

}  // namespace tern::cli
