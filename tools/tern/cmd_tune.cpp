// tern tune — finds the serving configuration with the best goodput for a
// model, a workload and SLOs. Each candidate (a point of the grid the list
// flags span: threads, --max-num-seqs, --max-batched-tokens, --kv-type,
// --draft, weight files) runs a `tern serve` this command starts itself, under
// the load `tern bench serve` would send; successive halving keeps the better
// half of the candidates each round and doubles their requests. It prints
// every candidate's figures with the Pareto front of goodput against cost per
// million output tokens, and writes the best configuration as a file
// `tern serve --config FILE` reads.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <thread>

#include "args.h"
#include "bench_serve_setup.h"
#include "commands.h"
#include "fd_limit.h"
#include "core/atomic_file.h"
#include "loadgen/openai_client.h"
#include "serve_config.h"

extern char** environ;

namespace tern::cli {
namespace {

using namespace tern::loadgen;

// One point of the grid: the serve flags that differ from the defaults.
struct Candidate {
  std::vector<std::pair<std::string, std::string>> flags;  // (flag, value)
  std::string label;
  int threads = 0;  // for the cost: the cores this configuration occupies
  // Figures of the last round it ran, and how far it got.
  RunMetrics metrics;
  int rounds = 0, requests = 0;
  std::string failure;  // why its server could not serve (then it is out)
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// The grid of every list flag's values; an empty list leaves serve's default.
struct Axis {
  std::string flag, short_name;
  std::vector<std::string> values;
};

std::vector<Candidate> grid(const std::vector<Axis>& axes, int default_threads) {
  std::vector<Candidate> out(1);
  for (const Axis& a : axes) {
    if (a.values.empty()) continue;
    std::vector<Candidate> next;
    for (const Candidate& c : out)
      for (const std::string& v : a.values) {
        Candidate d = c;
        if (!(a.flag == "--draft" && v == "none")) d.flags.emplace_back(a.flag, v);
        d.label += (d.label.empty() ? "" : " ") + a.short_name + "=" + v;
        next.push_back(std::move(d));
      }
    out = std::move(next);
  }
  for (Candidate& c : out) {
    if (c.label.empty()) c.label = "defaults";
    c.threads = default_threads;
    for (const auto& [f, v] : c.flags)
      if (f == "--threads") c.threads = std::atoi(v.c_str());
  }
  return out;
}

// A `tern serve` child with its stderr read through a pipe.
class ServerProcess {
 public:
  ~ServerProcess() { stop(); }

  // Starts it and waits (up to timeout_s) for "ready"; the port comes from its "listening on" line.
  Status start(const std::vector<std::string>& args, double timeout_s) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return error(ErrorKind::Internal, "tune: pipe failed");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDERR_FILENO);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    std::vector<std::string> a = args;
    auto argv = argv_of(a);
    const int rc = posix_spawn(&pid_, "/proc/self/exe", &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) {
      close(fds[0]);
      pid_ = -1;
      return error(ErrorKind::Internal, "tune: could not start tern serve");
    }
    fd_ = fds[0];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    std::string buf;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return error(ErrorKind::Internal, "tern serve was not ready after " + std::to_string(int(timeout_s)) + " s");
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000))) <= 0) continue;
      char chunk[4096];
      const ssize_t n = read(fd_, chunk, sizeof chunk);
      if (n <= 0) return error(ErrorKind::InvalidArgument, "tern serve exited: " + last_lines(log_ + buf));
      buf.append(chunk, static_cast<size_t>(n));
      for (size_t nl; (nl = buf.find('\n')) != std::string::npos; buf.erase(0, nl + 1)) {
        const std::string line = buf.substr(0, nl);
        log_ += line + "\n";
        if (const size_t at = line.find("listening on http://"); at != std::string::npos) {
          const size_t colon = line.rfind(':');
          if (colon != std::string::npos && colon > at) port_ = std::atoi(line.c_str() + colon + 1);
        }
        if (line.find("tern serve: ready") != std::string::npos) {
          if (port_ <= 0) return error(ErrorKind::Internal, "tern serve printed no port");
          // From here its stderr is read and dropped until it exits, so that
          // the server never blocks on a full pipe.
          drain_ = std::thread([this] {
            char c[4096];
            while (read(fd_, c, sizeof c) > 0) {
            }
          });
          return Status::ok();
        }
      }
    }
  }

  int port() const { return port_; }

  // SIGTERM, then SIGKILL after 20 s.
  void stop() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      for (int i = 0; i < 200 && waitpid(pid_, &status, WNOHANG) == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (waitpid(pid_, &status, WNOHANG) == 0) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
      }
      pid_ = -1;
    }
    if (drain_.joinable()) drain_.join();
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  static std::string last_lines(const std::string& s) {
    std::string t = s;
    while (!t.empty() && t.back() == '\n') t.pop_back();
    if (t.size() > 600) t = "..." + t.substr(t.size() - 600);
    return t.empty() ? "(no output)" : t;
  }

  pid_t pid_ = -1;
  int fd_ = -1, port_ = 0;
  std::string log_;
  std::thread drain_;
};

// The cost of a million output tokens: the price of the cores a configuration
// occupies (its threads' share of the machine) for the time it takes.
double cost_per_million(const Candidate& c, double price_per_hour, int machine_cores) {
  if (!(c.metrics.output_throughput > 0)) return INFINITY;
  const double share = std::min(1.0, static_cast<double>(c.threads) / std::max(1, machine_cores));
  return price_per_hour * share / 3600.0 / c.metrics.output_throughput * 1e6;
}

// Better: higher goodput, then more output tokens per second.
bool better(const Candidate& a, const Candidate& b) {
  if (a.metrics.goodput != b.metrics.goodput) return a.metrics.goodput > b.metrics.goodput;
  return a.metrics.output_throughput > b.metrics.output_throughput;
}

std::string fmt(double v, int decimals = 2) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

int cmd_tune(int argc, char** argv) {
  std::string model, threads, seqs, batched, kv_types, drafts, weights, serve_args, out_path = "tune.conf";
  CommonFlags f;
  f.warmup = 1;  // each server is new: its first request would pay for paging the weights in
  int rounds = 0;
  float start_timeout_s = 300;
  ArgParser args("tune",
                 "tern tune -m MODEL --dataset SPEC -n N [--slo-ttft MS] [--slo-tpot MS] [--threads 1,2] "
                 "[--max-num-seqs 4,16,64] [--max-batched-tokens 256,512] [--kv-type f16,q8_0] [--draft none,ngram] "
                 "[--weights A.gguf,B.gguf] [-o FILE]");
  args.add("-m,--model", &model, "GGUF model file (or HF directory) to serve");
  args.add("--threads", &threads, "thread counts to try (default: serve's, all cores)");
  args.add("--max-num-seqs", &seqs, "--max-num-seqs values to try");
  args.add("--max-batched-tokens", &batched, "--max-batched-tokens values to try");
  args.add("--kv-type", &kv_types, "KV cache types to try (f16, f32, q8_0, q4_0, fp8)");
  args.add("--draft", &drafts, "speculative settings to try: none, ngram, self:TYPE, a draft GGUF");
  args.add("--weights", &weights, "other files of the same model (other weight types) to try instead of -m");
  args.add("--serve-args", &serve_args, "more flags every server gets, space-separated (e.g. \"-c 2048 --kv-memory 2G\")");
  args.add("--rounds", &rounds, "halving rounds (default: until one candidate is left)");
  args.add("--start-timeout", &start_timeout_s, "seconds a server may take to load (default 300)");
  args.add("-o,--output", &out_path, "where the best configuration goes, as flags for `tern serve --config` (default tune.conf)");
  // The load generator's flags, as `tern bench serve` takes them (its --url and --model are ours to set).
  args.add("--dataset", &f.dataset, "sharegpt:FILE | random:IN,OUT[,SPREAD] | prefix:SHARED,IN,OUT");
  args.add("-n,--num-requests", &f.num_requests, "measured requests per candidate in the first round (doubled each round)");
  args.add("--request-rate", &f.rate_text, "requests per second, or inf = all at once (default inf)");
  args.add("--max-concurrency", &f.max_concurrency, "most requests in flight at once (default: no cap)");
  args.add("--seed", &f.seed, "seed for the dataset and arrivals (default 0)");
  args.add("--warmup", &f.warmup, "requests sent to each new server first, left out of its figures (default 1: the first pays for paging the model in)");
  args.add("--slo-ttft", &f.slo_ttft_ms, "goodput SLO on time to first token, ms");
  args.add("--slo-tpot", &f.slo_tpot_ms, "goodput SLO on time per output token, ms");
  args.add("--slo-e2e", &f.slo_e2e_ms, "goodput SLO on end-to-end latency, ms");
  args.add_flag("--chat", &f.chat, "use /v1/chat/completions (default /v1/completions)");
  args.add_flag("--ignore-eos", &f.ignore_eos, "every output exactly max_tokens long");
  args.add("--tokenizer", &f.tokenizer, "GGUF whose tokenizer counts the dataset's tokens (else estimated)");
  args.add("--output-len", &f.output_len, "sharegpt: max_tokens for every request");
  args.add("--timeout", &f.timeout_s, "seconds one request may take (default 300)");
  args.add("--max-duration", &f.max_duration_s, "seconds one run may take; the rest is cancelled (default 3600)");
  args.add("--price-per-hour", &f.price_per_hour, "machine price per hour (default 1): cost per million output tokens");
  if (auto s = args.parse(argc, argv); !s) return report(s);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  if (model.empty()) return report(error(ErrorKind::InvalidArgument, "tune: -m MODEL is required"));
  if (rounds < 0 || rounds > 20) return report(error(ErrorKind::InvalidArgument, "tune: --rounds must be in [1, 20]"));
  if (!(start_timeout_s > 0)) return report(error(ErrorKind::InvalidArgument, "tune: --start-timeout must be > 0"));
  raise_fd_limit();

  const int machine_cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<Axis> axes = {{"-m", "weights", split_list(weights)},
                            {"--threads", "t", split_list(threads)},
                            {"--max-num-seqs", "seqs", split_list(seqs)},
                            {"--max-batched-tokens", "tokens", split_list(batched)},
                            {"--kv-type", "kv", split_list(kv_types)},
                            {"--draft", "draft", split_list(drafts)}};
  for (const Axis& a : axes)
    if (a.flag == "--threads" || a.flag == "--max-num-seqs" || a.flag == "--max-batched-tokens")
      for (const std::string& v : a.values) {
        char* end = nullptr;
        const long n = std::strtol(v.c_str(), &end, 10);
        if (*end || n < 1 || n > 1000000)
          return report(error(ErrorKind::InvalidArgument, "tune: " + a.flag + " '" + v + "' is not a whole number >= 1"));
      }
  std::vector<std::string> extra;
  {
    std::stringstream ss(serve_args);
    for (std::string t; ss >> t;) extra.push_back(t);
  }
  // Threads every server gets (--serve-args "-t N"), unless the grid sets them.
  int fixed_threads = machine_cores;
  for (size_t i = 0; i + 1 < extra.size(); ++i)
    if (extra[i] == "-t" || extra[i] == "--threads") fixed_threads = std::max(1, std::atoi(extra[i + 1].c_str()));
  std::vector<Candidate> cands = grid(axes, fixed_threads);
  if (cands.size() > 256)
    return report(error(ErrorKind::InvalidArgument,
                        "tune: " + std::to_string(cands.size()) + " configurations: at most 256 (shorten the lists)"));
  int n_rounds = rounds;
  if (n_rounds == 0)
    while ((size_t{1} << n_rounds) < cands.size()) ++n_rounds;
  n_rounds = std::max(1, n_rounds);
  if (f.num_requests < 1 || static_cast<int64_t>(f.num_requests) << (n_rounds - 1) > kMaxRequests)
    return report(error(ErrorKind::InvalidArgument, "tune: -n must be >= 1, and -n x 2^(rounds-1) at most 1000000"));

  // The dataset for the last round; each round sends its first n x 2^round requests.
  CommonFlags lf = f;
  lf.url = "http://127.0.0.1:1";  // replaced by each server's
  lf.model = "tune";
  lf.num_requests = f.num_requests << (n_rounds - 1);
  lf.server_cores = machine_cores;
  auto setup = prepare(lf, "tune");
  if (!setup) return report(setup.status());
  const double price = f.price_per_hour >= 0 ? f.price_per_hour : 1.0;

  std::fprintf(stderr, "tune: %zu configurations, %d round%s, %d requests each in the first\n", cands.size(), n_rounds,
               n_rounds == 1 ? "" : "s", f.num_requests);
  std::vector<size_t> alive(cands.size());
  for (size_t i = 0; i < alive.size(); ++i) alive[i] = i;
  for (int r = 0; r < n_rounds && !alive.empty(); ++r) {
    const int n_req = f.num_requests << r;
    Setup s = *setup;
    s.measured.resize(static_cast<size_t>(n_req));
    for (size_t k = 0; k < alive.size(); ++k) {
      Candidate& c = cands[alive[k]];
      std::vector<std::string> sargs = {"tern", "serve", "-m", model, "--host", "127.0.0.1", "--port", "0",
                                        "--served-model-name", "tune", "--shutdown-timeout", "2"};
      sargs.insert(sargs.end(), extra.begin(), extra.end());
      for (const auto& [flag, value] : c.flags) {
        sargs.push_back(flag);  // a later -m (--weights) replaces the first
        sargs.push_back(value);
      }
      std::fprintf(stderr, "tune: round %d/%d, %zu of %zu: %s (%d requests)\n", r + 1, n_rounds, k + 1, alive.size(),
                   c.label.c_str(), n_req);
      ServerProcess server;
      if (auto st = server.start(sargs, start_timeout_s); !st) {
        c.failure = st.message();  // one table cell: no line breaks or bars
        for (char& ch : c.failure)
          if (ch == '\n' || ch == '|') ch = ch == '\n' ? ' ' : '/';
        std::fprintf(stderr, "tune:   left out: %s\n", c.failure.c_str());
        continue;
      }
      auto url = parse_http_url("http://127.0.0.1:" + std::to_string(server.port()));
      if (!url) return report(url.status());
      s.run.url = *url;
      run_warmup(s);
      const std::vector<RunResult> runs = run_repeats(s, s.run, "tune " + c.label);
      server.stop();
      c.metrics = pool(runs, s, nullptr);
      c.rounds = r + 1;
      c.requests = n_req;
      std::fprintf(stderr, "tune:   goodput %.2f req/s, %.1f output tok/s, TTFT p99 %.1f ms, TPOT p99 %.1f ms, %zu failed\n",
                   c.metrics.goodput, c.metrics.output_throughput, c.metrics.ttft_ms.p99, c.metrics.tpot_ms.p99,
                   c.metrics.failed);
    }
    std::vector<size_t> ran;
    for (size_t i : alive)
      if (cands[i].failure.empty()) ran.push_back(i);
    std::stable_sort(ran.begin(), ran.end(), [&](size_t a, size_t b) { return better(cands[a], cands[b]); });
    ran.resize(std::min(ran.size(), std::max<size_t>(1, (ran.size() + 1) / 2)));
    alive = r + 1 < n_rounds ? ran : std::vector<size_t>(ran.begin(), ran.begin() + std::min<size_t>(1, ran.size()));
  }
  if (alive.empty()) return report(error(ErrorKind::InvalidArgument, "tune: no configuration could serve the workload"));
  const Candidate& best = cands[alive.front()];

  // Every candidate that ran, best first (later rounds first: more requests
  // behind their figures), with the Pareto front of goodput against cost among
  // the candidates measured on the same requests (the same round).
  std::vector<size_t> order;
  for (size_t i = 0; i < cands.size(); ++i)
    if (cands[i].failure.empty() && cands[i].rounds > 0) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (cands[a].rounds != cands[b].rounds) return cands[a].rounds > cands[b].rounds;
    return better(cands[a], cands[b]);
  });
  std::printf("| configuration | rounds | requests | goodput req/s | output tok/s | TTFT p99 ms | TPOT p99 ms | failed | "
              "cost / 1M output tokens | Pareto |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|:---:|\n");
  for (size_t i : order) {
    const Candidate& c = cands[i];
    const double cost = cost_per_million(c, price, machine_cores);
    bool dominated = false;
    for (size_t j : order) {
      const Candidate& o = cands[j];
      const double oc = cost_per_million(o, price, machine_cores);
      if (j != i && o.rounds == c.rounds && o.metrics.goodput >= c.metrics.goodput && oc <= cost &&
          (o.metrics.goodput > c.metrics.goodput || oc < cost))
        dominated = true;
    }
    std::printf("| %s%s | %d | %d | %s | %s | %s | %s | %zu | %s | %s |\n", c.label.c_str(), &c == &best ? " **(best)**" : "",
                c.rounds, c.requests, fmt(c.metrics.goodput).c_str(), fmt(c.metrics.output_throughput, 1).c_str(),
                fmt(c.metrics.ttft_ms.p99, 1).c_str(), fmt(c.metrics.tpot_ms.p99, 1).c_str(), c.metrics.failed,
                fmt(cost, 4).c_str(), dominated ? "" : "yes");
  }
  for (const Candidate& c : cands)
    if (!c.failure.empty()) std::printf("| %s | - | - | left out: %s |\n", c.label.c_str(), c.failure.c_str());
  std::printf("\nPareto: no configuration of the same round has both more goodput and a lower cost.\n");
  std::printf("cost: %.2f per machine-hour x the configuration's share of %d cores%s\n", price, machine_cores,
              f.price_per_hour >= 0 ? "" : " (no --price-per-hour: 1)");

  // The winner as serve flags: the model, the fixed flags, its own.
  std::string conf = "# tern tune: the best of " + std::to_string(cands.size()) + " configurations for " +
                     setup->config["dataset"].get<std::string>() + "\n";
  conf += "# goodput " + fmt(best.metrics.goodput) + " req/s, " + fmt(best.metrics.output_throughput, 1) +
          " output tok/s, TTFT p99 " + fmt(best.metrics.ttft_ms.p99, 1) + " ms, TPOT p99 " +
          fmt(best.metrics.tpot_ms.p99, 1) + " ms over " + std::to_string(best.requests) + " requests\n";
  conf += "# use: tern serve --config " + out_path + " [--port P ...]\n";
  auto quoted = [](const std::string& v) { return v.find_first_of(" \t#") == std::string::npos ? v : "\"" + v + "\""; };
  std::string model_file = model;
  for (const auto& [flag, value] : best.flags)
    if (flag == "-m") model_file = value;
  conf += "-m " + quoted(model_file) + "\n";
  if (!extra.empty()) {
    std::string line;
    for (const std::string& e : extra) line += (line.empty() ? "" : " ") + quoted(e);
    conf += line + "\n";
  }
  for (const auto& [flag, value] : best.flags)
    if (flag != "-m") conf += flag + " " + quoted(value) + "\n";
  if (auto st = write_file_atomically(out_path, conf); !st) return report(st);
  std::fprintf(stderr, "tune: best: %s; wrote %s\n", best.label.c_str(), out_path.c_str());
  return 0;
}

}  // namespace tern::cli
