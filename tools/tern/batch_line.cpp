// tools/tern/batch_line.cpp — see batch_line.h.
#include "batch_line.h"

#include <cstdint>
#include <type_traits>

namespace tern::cli {
namespace {

using Json = nlohmann::json;

// Fields that must be JSON integers: nlohmann's get<int>() would cast 1.7 to
// 1 and 1e10 to INT_MIN without a word. Returns an error message or "".
std::string get_integer(const Json& j, const char* key, int64_t lo, int64_t hi, int64_t& out) {
  const Json& v = j[key];
  if (!v.is_number_integer()) return std::string("\"") + key + "\" must be an integer, got " + v.dump();
  const bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(hi)
                                               : v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
  if (!in_range)
    return std::string("\"") + key + "\" = " + v.dump() + " is outside [" + std::to_string(lo) + ", " +
           std::to_string(hi) + "]";
  out = v.get<int64_t>();
  return "";
}

std::string parse_token_ids(const Json& p, std::vector<int32_t>& out) {
  for (size_t i = 0; i < p.size(); ++i) {
    const Json& t = p[i];
    const bool ok = t.is_number_unsigned() ? t.get<uint64_t>() <= INT32_MAX
                                           : t.is_number_integer() && t.get<int64_t>() >= 0 && t.get<int64_t>() <= INT32_MAX;
    if (!ok) return "\"prompt\"[" + std::to_string(i) + "] = " + t.dump() + " is not a token id (an integer >= 0)";
    out.push_back(t.get<int32_t>());
  }
  return "";
}

std::string parse_stop(const Json& s, std::vector<std::string>& out) {
  if (s.is_string()) out.push_back(s.get<std::string>());
  else out = s.get<std::vector<std::string>>();
  for (const std::string& t : out)
    if (t.empty()) return "\"stop\" strings must not be empty (an empty stop would end every request at once)";
  return "";
}

// "grammar" (GBNF), "regex", "json_schema" (a schema) or "response_format"
// ({"type": "json_object"} or {"type": "json_schema", "json_schema": {"schema"}}),
// at most one; the schema keeps the line's key order (its property order).
std::string parse_constraint(const std::string& line, const Json& j, OutputConstraint& out) {
  int n = 0;
  if (j.contains("grammar")) out = {ConstraintKind::Gbnf, j["grammar"].get<std::string>()}, ++n;
  if (j.contains("regex")) out = {ConstraintKind::Regex, j["regex"].get<std::string>()}, ++n;
  const auto ordered = nlohmann::ordered_json::parse(line, nullptr, false);
  if (j.contains("json_schema")) out = {ConstraintKind::JsonSchema, ordered["json_schema"].dump()}, ++n;
  if (j.contains("response_format")) {
    const std::string type = j["response_format"].value("type", "");
    if (type == "json_object") {
      out = {ConstraintKind::JsonObject, ""}, ++n;
    } else if (type == "json_schema") {
      if (!j["response_format"].contains("json_schema") || !j["response_format"]["json_schema"].contains("schema"))
        return "\"response_format\" json_schema needs \"json_schema\": {\"schema\": ...}";
      out = {ConstraintKind::JsonSchema, ordered["response_format"]["json_schema"]["schema"].dump()}, ++n;
    } else if (type != "text") {
      return "\"response_format\" type must be text, json_object or json_schema";
    }
  }
  if (n > 1) return "give at most one of \"grammar\", \"regex\", \"json_schema\" and \"response_format\"";
  return "";
}

}  // namespace

std::string parse_batch_line(const std::string& line, BatchLine& item) {
  Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return "invalid JSON";
  if (!j.is_object()) return "expected a JSON object";
  if (j.contains("id")) item.id = j["id"];
  GenerationRequest& r = item.request;
  r.sampling.seed = SamplingParams::kRandomSeed;
  std::string err;
  int64_t v = 0;
  auto integer = [&](const char* key, int64_t lo, int64_t hi, auto& field) {
    if (!err.empty() || !j.contains(key)) return;
    err = get_integer(j, key, lo, hi, v);
    if (err.empty()) field = static_cast<std::remove_reference_t<decltype(field)>>(v);
  };
  try {
    if (!j.contains("prompt")) return "missing \"prompt\"";
    const Json& p = j["prompt"];
    if (p.is_string()) r.prompt = p.get<std::string>();
    else if (p.is_array()) err = parse_token_ids(p, r.prompt_tokens);
    else return "\"prompt\" must be a string or an array of token ids";
    integer("max_tokens", 0, INT32_MAX, r.max_tokens);
    integer("top_k", INT32_MIN, INT32_MAX, r.sampling.top_k);
    integer("priority", INT32_MIN, INT32_MAX, r.priority);
    if (!err.empty()) return err;
    if (j.contains("seed")) {
      if (!j["seed"].is_number_unsigned()) return "\"seed\" must be an integer >= 0, got " + j["seed"].dump();
      r.sampling.seed = j["seed"].get<uint64_t>();
    }
    if (j.contains("temperature")) r.sampling.temperature = j["temperature"].get<float>();
    if (j.contains("top_p")) r.sampling.top_p = j["top_p"].get<float>();
    if (j.contains("min_p")) r.sampling.min_p = j["min_p"].get<float>();
    if (j.contains("tenant")) r.tenant = j["tenant"].get<std::string>();
    if (j.contains("ignore_eos")) r.ignore_eos = j["ignore_eos"].get<bool>();
    if (j.contains("stop")) err = parse_stop(j["stop"], r.stop);
    if (err.empty()) err = parse_constraint(line, j, r.constraint);
  } catch (const Json::exception& e) {
    return std::string("bad field type: ") + e.what();
  }
  return err;
}

}  // namespace tern::cli
