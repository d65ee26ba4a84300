#include "eval/results.h"

#include <unistd.h>

#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/build_info.h"
#include "core/cpu_name.h"

namespace tern::eval {
namespace {

using nlohmann::json;

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=,:+@%") ==
                        std::string::npos)
    return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

double num(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : kNaN;
}
std::string str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}
int integer(const json& j, const char* key) {
  const double v = num(j, key);
  return std::isfinite(v) ? static_cast<int>(v) : 0;
}
// NaN as null: JSON has no NaN.
json number_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json setup_to_json(const RunSetup& s) {
  return {{"cpu_model", s.cpu_model}, {"n_cores", s.n_cores}, {"ram_bytes", s.ram_bytes}, {"git_sha", s.git_sha},
          {"compiler", s.compiler},   {"command", s.command}, {"model", s.model},         {"model_hash", s.model_hash},
          {"threads", s.threads},     {"date_utc", s.date_utc}};
}

std::optional<RunSetup> setup_from_json(const json& j) {
  auto it = j.find("setup");
  if (it == j.end() || !it->is_object()) return std::nullopt;
  const json& s = *it;
  RunSetup r;
  r.cpu_model = str(s, "cpu_model");
  r.n_cores = integer(s, "n_cores");
  const double ram = num(s, "ram_bytes");
  r.ram_bytes = std::isfinite(ram) && ram > 0 ? static_cast<uint64_t>(ram) : 0;
  r.git_sha = str(s, "git_sha");
  r.compiler = str(s, "compiler");
  r.command = str(s, "command");
  r.model = str(s, "model");
  r.model_hash = str(s, "model_hash");
  r.threads = integer(s, "threads");
  r.date_utc = str(s, "date_utc");
  return r;
}

QuantEval quant_from_json(const json& j) {
  QuantEval q;
  q.setup = setup_from_json(j).value_or(RunSetup{});
  q.text_path = str(j, "text");
  q.n_ctx = integer(j, "n_ctx");
  q.n_chunks = integer(j, "chunks");
  q.n_tokens_scored = integer(j, "tokens_scored");
  q.n_prompt = integer(j, "n_prompt");
  q.n_gen = integer(j, "n_gen");
  q.repetitions = integer(j, "repetitions");
  q.price_per_hour = num(j, "price_per_hour");
  for (const json& r : j.value("rows", json::array())) {
    QuantEvalRow row;
    row.type = str(r, "type");
    row.is_base = r.value("is_base", false);
    const double bytes = num(r, "file_bytes");
    row.file_bytes = std::isfinite(bytes) && bytes > 0 ? static_cast<uint64_t>(bytes) : 0;
    row.bits_per_weight = num(r, "bits_per_weight");
    row.tensor_types = str(r, "tensor_types");
    row.n_fallback = integer(r, "n_fallback");
    row.ppl = num(r, "ppl");
    row.ppl_ratio = num(r, "ppl_ratio");
    row.kl_mean = num(r, "kl_mean");
    row.kl_median = num(r, "kl_median");
    row.kl_p99 = num(r, "kl_p99");
    row.kl_max = num(r, "kl_max");
    row.top1 = num(r, "top1_agreement");
    row.pp_tok_s = num(r, "pp_tok_s");
    row.tg_tok_s = num(r, "tg_tok_s");
    row.pp_tok_s_per_core = num(r, "pp_tok_s_per_core");
    row.tg_tok_s_per_core = num(r, "tg_tok_s_per_core");
    row.cost_per_mtok = num(r, "cost_per_mtok");
    row.auto_kl_predicted = num(r, "auto_kl_predicted");
    row.auto_kl_calib = num(r, "auto_kl_calibration");
    row.kv_type = str(r, "kv_type");
    row.kv_bytes_per_token = num(r, "kv_bytes_per_token");
    q.rows.push_back(row);
  }
  return q;
}

BenchRecord bench_from_json(const json& j) {
  BenchRecord b;
  b.setup = setup_from_json(j);
  b.model = str(j, "model");
  b.model_hash = str(j, "model_hash");
  b.weight_type = str(j, "weight_type");
  b.git_sha = str(j, "git_sha");
  b.compiler = str(j, "compiler");
  b.cpu_flags = str(j, "cpu_flags");
  b.threads = integer(j, "threads");
  b.price_per_hour = num(j, "price_per_hour");
  const json& pp = j["pp"];
  const json& tg = j["tg"];
  b.pp_tokens = integer(pp, "tokens");
  b.pp_tok_s = num(pp, "tok_s");
  b.pp_std = num(pp, "std");
  b.tg_tokens = integer(tg, "tokens");
  b.tg_tok_s = num(tg, "tok_s");
  b.tg_std = num(tg, "std");
  if (auto it = j.find("batched"); it != j.end() && it->is_array())
    for (const json& x : *it) b.batched.emplace_back(integer(x, "batch"), num(x, "tok_s"));
  return b;
}

ServeRecord serve_from_json(const json& j) {
  ServeRecord s;
  s.setup = setup_from_json(j);
  s.completed = num(j, "completed");
  s.failed = num(j, "failed");
  s.duration_s = num(j, "duration_s");
  s.request_throughput = num(j, "request_throughput");
  s.input_throughput = num(j, "input_throughput");
  s.output_throughput = num(j, "output_throughput");
  s.goodput = num(j, "goodput");
  for (const char* key : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"}) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_object()) continue;
    s.latency[key] = {num(*it, "mean"), num(*it, "median"), num(*it, "p90"), num(*it, "p95"), num(*it, "p99")};
  }
  for (const char* key : {"request_rate", "rate", "max_concurrency", "concurrency"}) {
    const double v = num(j, key);
    if (!std::isfinite(v)) continue;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s %g", key, v);
    s.label = buf;
    break;
  }
  return s;
}

}  // namespace

RunSetup collect_setup(int argc, char** argv, const std::string& program) {
  RunSetup s;
  s.cpu_model = cpu_model_name();
  s.n_cores = static_cast<int>(std::thread::hardware_concurrency());
  std::ifstream mem("/proc/meminfo");
  for (std::string key; mem >> key;) {
    uint64_t kb = 0;
    mem >> kb;
    if (key == "MemTotal:") {
      s.ram_bytes = kb * 1024;
      break;
    }
    mem.ignore(1 << 20, '\n');
  }
  s.git_sha = build_git_sha();
  s.compiler = build_compiler();
  s.command = program;
  for (int i = 0; i < argc; ++i) s.command += " " + shell_quote(argv[i]);
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  s.date_utc = buf;
  return s;
}

Result<ResultFile> parse_result_json(std::string_view text, const std::string& path) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return error(ErrorKind::InvalidFile, path + ": not valid JSON");
  if (!j.is_object()) return error(ErrorKind::InvalidFile, path + ": expected a JSON object");
  ResultFile f;
  f.path = path;
  if (str(j, "kind") == "tern.eval.quant") {
    f.kind = ResultKind::QuantEval;
    f.quant = quant_from_json(j);
  } else if (j.contains("pp") && j.contains("tg") && j["pp"].is_object() && j["tg"].is_object()) {
    f.kind = ResultKind::Bench;
    f.bench = bench_from_json(j);
  } else if (j.contains("completed") && (j.contains("request_throughput") || j.contains("ttft_ms"))) {
    f.kind = ResultKind::Serve;
    f.serve = serve_from_json(j);
  } else {
    return error(ErrorKind::InvalidFile, path + ": not a result tern report knows (expected the JSON of tern eval quant "
                                                "--json, tern bench --json or tern bench serve --json)");
  }
  return f;
}

std::string quant_eval_to_json(const QuantEval& q) {
  json rows = json::array();
  for (const auto& r : q.rows)
    rows.push_back({{"type", r.type},
                    {"is_base", r.is_base},
                    {"file_bytes", r.file_bytes},
                    {"bits_per_weight", number_or_null(r.bits_per_weight)},
                    {"tensor_types", r.tensor_types},
                    {"n_fallback", r.n_fallback},
                    {"ppl", number_or_null(r.ppl)},
                    {"ppl_ratio", number_or_null(r.ppl_ratio)},
                    {"kl_mean", number_or_null(r.kl_mean)},
                    {"kl_median", number_or_null(r.kl_median)},
                    {"kl_p99", number_or_null(r.kl_p99)},
                    {"kl_max", number_or_null(r.kl_max)},
                    {"top1_agreement", number_or_null(r.top1)},
                    {"pp_tok_s", number_or_null(r.pp_tok_s)},
                    {"tg_tok_s", number_or_null(r.tg_tok_s)},
                    {"pp_tok_s_per_core", number_or_null(r.pp_tok_s_per_core)},
                    {"tg_tok_s_per_core", number_or_null(r.tg_tok_s_per_core)},
                    {"cost_per_mtok", number_or_null(r.cost_per_mtok)},
                    {"auto_kl_predicted", number_or_null(r.auto_kl_predicted)},
                    {"auto_kl_calibration", number_or_null(r.auto_kl_calib)},
                    {"kv_type", r.kv_type},
                    {"kv_bytes_per_token", number_or_null(r.kv_bytes_per_token)}});
  const json j = {{"kind", "tern.eval.quant"}, {"version", 1},
                  {"setup", setup_to_json(q.setup)},
                  {"text", q.text_path},  {"n_ctx", q.n_ctx}, {"chunks", q.n_chunks},
                  {"tokens_scored", q.n_tokens_scored},
                  {"n_prompt", q.n_prompt}, {"n_gen", q.n_gen}, {"repetitions", q.repetitions},
                  {"price_per_hour", number_or_null(q.price_per_hour)},
                  {"rows", rows}};
  return j.dump(2) + "\n";
}

}  // namespace tern::eval
