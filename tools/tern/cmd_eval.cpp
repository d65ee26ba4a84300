// tern eval quant -m BASE.gguf --types Q8_0,Q4_K_M,... -f TEXT [options]
// Quantizes the base model to each type, then measures every file on the same
// text and machine: perplexity, KL divergence against the base's saved
// distributions, top-1 agreement, and pp/tg speed. Prints one markdown table
// (stdout); --json and --plot write the record and a quality–speed scatter.
// --kv-types adds rows of the base weights run with a quantized K/V cache, against the same
// base logits (computed with an f32 cache): what the cache alone costs.
#include <unistd.h>

#include <cstdio>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>

#include "args.h"
#include "commands.h"
#include "core/atomic_file.h"
#include "core/input_file.h"
#include "core/kv_format.h"
#include "core/work_dir.h"
#include "engine/auto_mix.h"
#include "engine/bench.h"
#include "engine/calibrate.h"
#include "eval/report.h"
#include "logits_pass.h"
#include "model/batch_runner.h"
#include "model/hf_model.h"
#include "model/quantize.h"
#include "quant/quant.h"
#include "tokenizer/tokenizer.h"

namespace tern::cli {
namespace {

namespace fs = std::filesystem;

struct EvalQuantArgs {
  std::string model_path, text_path, types_text = "Q8_0,Q6_K,Q5_K_M,Q4_K_M,Q4_0", out_dir, json_path, plot_path;
  std::string plot_metric = "kl";
  std::string calib_path, methods_text = "rtn", calib_text, auto_bpw_text, auto_types, kv_types_text;
  int n_ctx = 0, n_chunks = 0, n_threads = 0;
  BenchOptions bench{.n_prompt = 128, .n_gen = 32, .batches = {}, .n_batch = 512, .repetitions = 3, .seed = 42};
  float price_per_hour = 0;
};

// "Q8_0 x7, F32 x5": the tensor types a file really holds, most common first.
std::string tensor_types(const Model& m) {
  std::map<std::string, int> counts;
  for (const auto& t : m.file().tensors()) ++counts[std::string(gguf::type_name(t.type))];
  std::vector<std::pair<int, std::string>> order;
  for (const auto& [name, n] : counts) order.emplace_back(-n, name);
  std::sort(order.begin(), order.end());
  std::string out;
  for (const auto& [neg, name] : order) out += (out.empty() ? "" : ", ") + name + " x" + std::to_string(-neg);
  return out;
}

// The type holding most of the file's bytes ("F32" for a converted base).
std::string main_type(const Model& m) {
  std::map<std::string, uint64_t> bytes;
  for (const auto& t : m.file().tensors()) bytes[std::string(gguf::type_name(t.type))] += t.n_bytes;
  auto it = std::max_element(bytes.begin(), bytes.end(), [](const auto& x, const auto& y) { return x.second < y.second; });
  return it == bytes.end() ? "?" : it->first;
}

double bits_per_weight(const Model& m) {
  uint64_t bytes = 0, elements = 0;
  for (const auto& t : m.file().tensors()) bytes += t.n_bytes, elements += t.n_elements;
  return elements ? 8.0 * bytes / elements : 0.0;
}

void status_line(const std::string& what) {
  if (isatty(STDERR_FILENO)) std::fprintf(stderr, "\r\033[K%s", what.c_str());
  else std::fprintf(stderr, "%s\n", what.c_str());
}

// Measures one model file into a table row: quality against the base logits
// (or saves them, for the base) and speed.
Result<eval::QuantEvalRow> measure(const std::string& label, const std::string& path, const std::vector<TokenId>& tokens,
                                   PerplexityOptions ppl, const std::string& logits_path, bool is_base,
                                   const EvalQuantArgs& a, ThreadPool& pool, KvType kv = KvType::F32) {
  // A backend per model: what it prepared (packed panels) goes with the model.
  auto model = Model::load(path, backend::make_backend(backend::BackendKind::Cpu, pool.n_threads()));
  if (!model) return model.status();
  const Model& m = **model;
  eval::QuantEvalRow row;
  row.type = label;
  row.is_base = is_base;
  row.file_bytes = fs::file_size(path);
  row.bits_per_weight = bits_per_weight(m);
  row.tensor_types = tensor_types(m);
  ppl.kv_type = kv;
  row.kv_type = kv_type_name(kv);
  row.kv_bytes_per_token = static_cast<double>(BatchRunner::kv_bytes(m, 1, ppl.n_ctx, kv)) / ppl.n_ctx;
  LogitsPassOptions lo{ppl, is_base ? logits_path : "", is_base ? "" : logits_path};
  auto pass = run_logits_pass(m, tokens, lo, [&](int w, double p) {
    if (isatty(STDERR_FILENO))
      std::fprintf(stderr, "\r\033[Keval: %s: window %d, perplexity %.4f", label.c_str(), w + 1, p);
  });
  if (!pass) return pass.status().with_context(label);
  row.ppl = pass->perplexity;
  if (pass->kl) {
    row.ppl_ratio = pass->kl->ppl_ratio;
    row.kl_mean = pass->kl->kl_mean;
    row.kl_median = pass->kl->kl_median;
    row.kl_p99 = pass->kl->kl_p99;
    row.kl_max = pass->kl->kl_max;
    row.top1 = pass->kl->top1_agreement;
  } else {  // the base against itself
    row.ppl_ratio = 1.0;
    row.kl_mean = row.kl_median = row.kl_p99 = row.kl_max = 0.0;
    row.top1 = 1.0;
  }
  status_line("eval: " + label + ": measuring speed");
  BenchOptions bo = a.bench;
  bo.kv_type = kv;
  auto bench = run_bench(m, bo);
  if (!bench) return bench.status().with_context(label);
  const int n = pool.n_threads();
  if (bench->pp.tokens > 0) row.pp_tok_s = bench->pp.tok_s, row.pp_tok_s_per_core = bench->pp.tok_s / n;
  if (bench->tg.tokens > 0) row.tg_tok_s = bench->tg.tok_s, row.tg_tok_s_per_core = bench->tg.tok_s / n;
  if (a.price_per_hour > 0 && row.tg_tok_s > 0) row.cost_per_mtok = a.price_per_hour / (row.tg_tok_s * 3600.0) * 1e6;
  return row;
}

int eval_quant(int argc, char** argv) {
  EvalQuantArgs a;
  ArgParser args("eval quant",
                 "tern eval quant -m BASE.gguf -f TEXT [--types Q8_0,Q4_K_M,...] [--kv-types f16,q8_0,...] [-c CTX] [--chunks N] [--out-dir DIR]\n"
                 "                [-p 128] [-n 32] [-r 3] [-t THREADS] [--json OUT.json] [--plot OUT.svg] [--price-per-hour P]");
  args.add("-m,--model", &a.model_path, "base GGUF model (F32/F16/BF16 for a fair baseline)");
  args.add("-f,--file", &a.text_path, "text to score");
  args.add("--types", &a.types_text, "comma-separated quant types or mixes (default Q8_0,Q6_K,Q5_K_M,Q4_K_M,Q4_0)");
  args.add("-c,--ctx-size", &a.n_ctx, "perplexity window in tokens (default min(512, training context))");
  args.add("--chunks", &a.n_chunks, "score only the first N windows (default all; the base logits take 2*n_vocab bytes a token)");
  args.add("--calib", &a.calib_path, "calibration file (tern calibrate) for the calibrated methods; the text must not overlap it");
  args.add("--methods", &a.methods_text, "comma-separated rtn, imatrix, gptq, awq, smoothquant: each type is made by each that applies (smoothquant: W8A8 only; W8A8: rtn and smoothquant; FP8: rtn) (default rtn)");
  args.add("--calib-text", &a.calib_text, "gptq: the calibration text, if it moved since tern calibrate");
  args.add("--auto-bpw", &a.auto_bpw_text, "comma-separated bits/weight: also an automatic mix (quantize --auto) at each, by each method but awq (needs --calib)");
  args.add("--auto-types", &a.auto_types, "candidate types of the automatic mixes (default: quantize --auto's per method)");
  args.add("--kv-types", &a.kv_types_text,
           "comma-separated K/V cache encodings (f16, q8_0, q4_0, fp8): also a row of the base weights with each, against the base's f32-cache logits");
  args.add("--out-dir", &a.out_dir, "keep the quantized files and base logits here (default: a temporary directory, removed)");
  args.add("-p,--n-prompt", &a.bench.n_prompt, "prompt tokens for pp (default 128, 0 skips)");
  args.add("-n,--n-gen", &a.bench.n_gen, "generated tokens for tg (default 32, 0 skips)");
  args.add("-r,--repetitions", &a.bench.repetitions, "speed repetitions after one warm-up (default 3)");
  args.add("-t,--threads", &a.n_threads, "threads (default: all cores)");
  args.add("--json", &a.json_path, "write the results (with the setup: machine, build, command) as JSON");
  args.add("--plot", &a.plot_path, "write an SVG scatter of quality against tg tok/s");
  args.add("--plot-metric", &a.plot_metric, "quality axis of --plot: kl (default) or ppl (perplexity ratio)");
  args.add("--price-per-hour", &a.price_per_hour, "machine price per hour: adds cost per million generated tokens");
  if (auto s = args.parse(argc, argv); !s) return report(s);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  if (a.model_path.empty() || a.text_path.empty())
    return report(error(ErrorKind::InvalidArgument, "eval quant: -m BASE.gguf and -f TEXT are required"));
  // It quantizes and hashes the base file itself: a directory would have to be converted on every run.
  if (hf::is_hf_dir(a.model_path))
    return report(error(ErrorKind::InvalidArgument, "eval quant: -m must be a GGUF file; convert the Hugging Face "
                                                    "directory first (tern convert --from hf DIR -o BASE.gguf --type F16)"));
  if (a.n_ctx < 0 || a.n_chunks < 0 || a.n_threads < 0 || a.price_per_hour < 0 || a.bench.repetitions < 1)
    return report(error(ErrorKind::InvalidArgument, "eval quant: counts and price must not be negative (-r >= 1)"));
  if (a.plot_metric != "kl" && a.plot_metric != "ppl")
    return report(error(ErrorKind::InvalidArgument, "eval quant: --plot-metric is kl or ppl"));
  auto schemes = parse_quant_schemes(a.types_text);
  if (!schemes) return report(schemes.status().with_context("eval quant --types"));
  if (schemes->empty()) return report(error(ErrorKind::InvalidArgument, "eval quant: --types is empty"));
  std::vector<QuantMethod> methods;
  {
    std::stringstream ss(a.methods_text);
    for (std::string item; std::getline(ss, item, ',');) {
      auto m = parse_quant_method(item);
      if (!m) return report(m.status());
      methods.push_back(*m);
    }
  }
  const bool calibrated = std::any_of(methods.begin(), methods.end(), [](QuantMethod m) { return m != QuantMethod::Rtn; });
  if (methods.empty()) return report(error(ErrorKind::InvalidArgument, "eval quant: --methods is empty"));
  if (calibrated && a.calib_path.empty())
    return report(error(ErrorKind::InvalidArgument, "eval quant: --methods imatrix/gptq/awq need --calib CALIB.gguf"));

  std::vector<double> auto_bpw;
  {
    std::stringstream ss(a.auto_bpw_text);
    for (std::string item; std::getline(ss, item, ',');) {
      char* end = nullptr;
      const double v = std::strtod(item.c_str(), &end);
      if (item.empty() || *end || !(v > 0 && v <= 32))
        return report(error(ErrorKind::InvalidArgument, "eval quant: --auto-bpw '" + item + "' is not a number in (0, 32]"));
      auto_bpw.push_back(v);
    }
  }
  if (!auto_bpw.empty() && a.calib_path.empty())
    return report(error(ErrorKind::InvalidArgument, "eval quant: --auto-bpw needs --calib CALIB.gguf (sensitivity is measured on its text)"));
  std::vector<KvType> kv_types;
  {
    std::stringstream ss(a.kv_types_text);
    for (std::string item; std::getline(ss, item, ',');) {
      const std::optional<KvType> t = parse_kv_type(item);
      if (!t)
        return report(error(ErrorKind::InvalidArgument, "eval quant: --kv-types '" + item + "': expected " + kv_type_choices()));
      if (*t == KvType::F32) continue;  // the base row is that
      kv_types.push_back(*t);
    }
  }
  auto auto_candidates = parse_quant_schemes(a.auto_types);  // empty: quantize --auto's defaults per method
  if (!auto_candidates) return report(auto_candidates.status().with_context("eval quant --auto-types"));
  auto text = read_file(a.text_path);
  if (!text) return report(text.status());
  if (!a.calib_path.empty()) {
    // Quality measured on the text the statistics came from would flatter the calibrated methods.
    auto calib = read_calibration(a.calib_path);
    if (!calib) return report(calib.status());
    if (auto s = check_disjoint(*calib, *text, a.text_path); !s) return report(s.with_context("eval quant"));
  }
  std::vector<TokenId> tokens;
  PerplexityOptions ppl;
  eval::QuantEval result;
  result.setup = eval::collect_setup(argc, argv, "tern eval quant");
  {
    auto base = Model::load(a.model_path);
    if (!base) return report(base.status());
    auto tok = Tokenizer::from_gguf((*base)->file());
    if (!tok) return report(tok.status().with_context(a.model_path));
    tokens = (*tok)->encode(*text, true, false);
    ppl.n_ctx = a.n_ctx > 0 ? a.n_ctx : std::min(512, (*base)->hparams().n_ctx_train);
    ppl.max_windows = a.n_chunks;
    ppl.add_bos = (*tok)->add_bos();
    ppl.bos = (*tok)->bos_id();
    result.rows.reserve(schemes->size() + 1);
    result.rows.push_back({});
    result.rows[0].type = "base (" + main_type(**base) + ")";
  }
  auto work = WorkDir::make(a.out_dir, fs::temp_directory_path() / ("tern-eval-" + std::to_string(::getpid())));
  if (!work) return report(work.status().with_context("eval quant"));
  const fs::path& dir = work->path();
  const bool temp_dir = work->owned();
  std::error_code ec;

  ThreadPool pool(a.n_threads > 0 ? a.n_threads : ThreadPool::default_threads());
  const std::string logits_path = (dir / "base.logits").string();
  const std::string stem = fs::path(a.model_path).stem().string();
  auto base_row = measure(result.rows[0].type, a.model_path, tokens, ppl, logits_path, true, a, pool);
  if (!base_row) return report(base_row.status());
  result.rows[0] = *base_row;
  const size_t n_runs = schemes->size() * methods.size();
  for (size_t i = 0; i < n_runs; ++i) {
    const QuantScheme& scheme = *(*schemes)[i / methods.size()];
    const QuantMethod method = methods[i % methods.size()];
    // smoothquant makes W8A8 only, W8A8 takes rtn or smoothquant, FP8 rtn only: other pairs have no file to measure.
    const bool w8a8 = scheme.base == gguf::GgmlType::I8;
    const bool fp8 = quant::has_row_scale(scheme.base) && !w8a8;
    if (w8a8 ? method != QuantMethod::Rtn && method != QuantMethod::SmoothQuant
             : method == QuantMethod::SmoothQuant || (fp8 && method != QuantMethod::Rtn))
      continue;
    const std::string name =
        std::string(scheme.name) + (method == QuantMethod::Rtn ? "" : std::string(" ") + quant_method_name(method));
    status_line("eval: [" + std::to_string(i + 1) + "/" + std::to_string(n_runs) + "] quantizing " + name);
    const std::string qpath =
        (dir / (stem + "-" + std::string(scheme.name) + "-" + quant_method_name(method) + ".gguf")).string();
    QuantizeOptions qo{a.model_path, qpath, scheme, method};
    std::unique_ptr<CalibrationSource> src;
    if (method != QuantMethod::Rtn) {
      auto s = CalibrationSource::for_method(method, scheme, a.calib_path, a.model_path, a.calib_text, 4ull << 30,
                                             pool.n_threads());
      if (!s) return report(s.status());
      src = std::move(*s);
      qo.inputs = [&](const std::string& key) { return src->get(key); };
    }
    auto q = quantize_gguf(qo, pool);
    if (!q) return report(q.status().with_context(name));
    auto row = measure(name, qpath, tokens, ppl, logits_path, false, a, pool);
    if (!row) return report(row.status());
    row->n_fallback = static_cast<int>(q->n_fallback);
    result.rows.push_back(*row);
    if (temp_dir) fs::remove(qpath, ec);
  }
  // The base weights with each K/V cache encoding.
  for (KvType kv : kv_types) {
    const std::string label = result.rows[0].type + ", KV " + kv_type_name(kv);
    status_line("eval: " + label);
    auto row = measure(label, a.model_path, tokens, ppl, logits_path, false, a, pool, kv);
    if (!row) return report(row.status());
    result.rows.push_back(*row);
  }
  // Automatic mixes: chosen on the calibration text, measured here like every other row.
  for (double bpw : auto_bpw) {
    for (QuantMethod method : methods) {
      if (method == QuantMethod::Awq || method == QuantMethod::SmoothQuant) continue;  // quantize --auto refuses them (folded norms)
      char label[64];
      std::snprintf(label, sizeof label, "auto %.2f%s%s", bpw, method == QuantMethod::Rtn ? "" : " ",
                    method == QuantMethod::Rtn ? "" : quant_method_name(method));
      status_line(std::string("eval: quantizing ") + label);
      AutoMixOptions ao;
      ao.in_path = a.model_path;
      ao.out_path = (dir / (stem + "-auto-" + std::to_string(bpw) + "-" + quant_method_name(method) + ".gguf")).string();
      ao.target_bpw = bpw;
      ao.method = method;
      ao.calib_path = a.calib_path;
      ao.calib_text = a.calib_text;
      ao.candidates = *auto_candidates;
      auto q = quantize_auto(ao, pool, [](const std::string& what) { status_line(what); });
      if (!q) return report(q.status().with_context(label));
      auto row = measure(label, ao.out_path, tokens, ppl, logits_path, false, a, pool);
      if (!row) return report(row.status());
      row->auto_kl_predicted = q->predicted_kl;
      row->auto_kl_calib = q->measured_kl;
      result.rows.push_back(*row);
      if (temp_dir) fs::remove(ao.out_path, ec);
    }
  }
  if (isatty(STDERR_FILENO)) std::fprintf(stderr, "\r\033[K");

  result.setup.model = a.model_path;
  if (auto h = hash_file(a.model_path)) {
    char hex[20];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(*h));
    result.setup.model_hash = hex;
  }
  result.setup.threads = pool.n_threads();
  result.text_path = a.text_path;
  result.n_ctx = ppl.n_ctx;
  result.n_chunks = static_cast<int>(std::min<size_t>(a.n_chunks > 0 ? a.n_chunks : SIZE_MAX, tokens.size() / ppl.n_ctx));
  result.n_tokens_scored = static_cast<int64_t>(result.n_chunks) * (ppl.n_ctx - 1 - ppl.n_ctx / 2);
  result.n_prompt = a.bench.n_prompt;
  result.n_gen = a.bench.n_gen;
  result.repetitions = a.bench.repetitions;
  if (a.price_per_hour > 0) result.price_per_hour = a.price_per_hour;

  std::fputs(eval::quant_table(result).c_str(), stdout);
  if (!a.json_path.empty())
    if (auto s = write_file_atomically(a.json_path, eval::quant_eval_to_json(result)); !s) return report(s);
  if (!a.plot_path.empty()) {
    const auto metric = a.plot_metric == "kl" ? eval::QualityMetric::Kl : eval::QualityMetric::PplRatio;
    const std::string svg = eval::render_svg(eval::quant_chart({&result}, {stem}, metric));
    if (auto s = write_file_atomically(a.plot_path, svg); !s) return report(s);
  }
  return 0;
}

}  // namespace

int cmd_eval(int argc, char** argv) {
  if (argc >= 1 && !std::strcmp(argv[0], "quant")) return eval_quant(argc - 1, argv + 1);
  const bool help = argc >= 1 && (!std::strcmp(argv[0], "-h") || !std::strcmp(argv[0], "--help"));
  std::fputs("usage: tern eval quant -m BASE.gguf -f TEXT [--types ...] (tern eval quant --help for details)\n",
             help ? stdout : stderr);
  return help ? 0 : 2;
}

}  // namespace tern::cli
