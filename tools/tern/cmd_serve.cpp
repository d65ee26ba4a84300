// tern serve -m MODEL [--host H] [--port P] [--api-key KEY | --api-key-file F] [engine flags]
// — the OpenAI-compatible HTTP server. Binds first (so /health can answer 503
// while the model loads), then loads, then serves until SIGINT/SIGTERM, which
// drain in-flight requests up to --shutdown-timeout and exit 0.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <thread>

#include "args.h"
#include "serve_config.h"
#include "commands.h"
#include "core/input_file.h"
#include "engine_flags.h"
#include "fd_limit.h"
#include "server/server.h"

namespace tern::cli {
namespace {

// A key file is tiny; the cap only keeps a wrong path (a model, a log) from
// being read whole. The shared reader refuses directories and FIFOs.
constexpr uint64_t kMaxKeyFileBytes = 64 * 1024;

Status read_key_file(const std::string& path, std::string& key) {
  auto text = read_file(path, kMaxKeyFileBytes);
  if (!text) return text.status().with_context("serve: --api-key-file");
  key = text->substr(0, text->find('\n'));
  while (!key.empty() && (key.back() == '\r' || key.back() == ' ')) key.pop_back();
  if (key.empty()) return error(ErrorKind::InvalidArgument, "serve: --api-key-file " + path + " is empty");
  return Status::ok();
}

}  // namespace

int cmd_serve(int argc, char** argv) {
  server::ServerConfig cfg;
  EngineFlags flags;
  std::string api_key_file, max_body = "8M", chat_template_file;
  float shutdown_timeout_s = 30.0f;
  float header_timeout_s = 10.0f;
  ArgParser args("serve", "tern serve -m MODEL [--host 127.0.0.1] [--port 8080] [--api-key KEY | --api-key-file F] "
                          "[--served-model-name NAME] [--config FILE] [engine flags]");
  std::string config_help;
  args.add("--config", &config_help,
           "a file of serve flags (as `tern tune -o` writes), read first: the command line's flags override it");
  args.add("-m,--model", &cfg.engine.model_path, "GGUF model file");
  args.add("--host", &cfg.http.host, "address to listen on (default 127.0.0.1)");
  args.add("--port", &cfg.http.port, "port (default 8080; 0 = any free port, printed at start)");
  args.add("--api-key", &cfg.api_key, "require 'Authorization: Bearer KEY' on /v1, /tokenize, /detokenize, /stats");
  args.add("--api-key-file", &api_key_file, "read the API key from the first line of a file");
  args.add("--served-model-name", &cfg.served_model_name, "model id in the API (default: general.name)");
  args.add("--max-queue", &cfg.max_pending, "unfinished generations beyond which requests get 429 (default 4096)");
  args.add("--max-body", &max_body, "largest request body, bytes (8M default; larger -> 413)");
  args.add("--io-threads", &cfg.http.n_io_threads, "HTTP I/O threads (default 2)");
  args.add("--workers", &cfg.n_workers, "threads that parse request bodies and tokenize prompts (default 2)");
  args.add("--max-connections", &cfg.http.max_connections,
           "open connections in all; beyond: 503 with Retry-After at once (default 8192; mind ulimit -n)");
  args.add("--max-connections-per-ip", &cfg.http.max_connections_per_ip,
           "open connections one client address may hold; beyond: 503 (default 0 = no limit)");
  args.add("--header-timeout", &header_timeout_s,
           "seconds a request's head may take once its first byte arrives, and a body between reads (default 10)");
  args.add_flag("--special-tokens-in-content", &cfg.special_tokens_in_content,
                "tokenize special-token text in chat message content as those tokens (default: as plain text)");
  args.add("--shutdown-timeout", &shutdown_timeout_s, "seconds in-flight requests get to finish on SIGTERM (30)");
  args.add("--chat-template-file", &chat_template_file, "a Jinja chat template to use instead of the model's");
  std::string pooling = "mean";
  args.add("--pooling", &pooling, "how /v1/embeddings pools hidden states: mean (default) or last");
  flags.add_to(args);
  // Tells "--api-key ''" (a mistake that would turn authentication off) from no flag.
  const std::string kUnset = "\x01unset";
  cfg.api_key = kUnset;
  // --config FILE: its flags are parsed first (so an error names the file),
  // then again with the command line's after them.
  auto config = split_config(argc, argv);
  if (!config) return report(config.status().with_context("serve"));
  if (!config->path.empty()) {
    auto file_argv = argv_of(config->file_flags);
    if (auto s = args.parse(static_cast<int>(config->file_flags.size()), file_argv.data()); !s)
      return report(s.with_context("--config " + config->path));
  }
  std::vector<std::string> all = config->file_flags;
  all.insert(all.end(), config->rest.begin(), config->rest.end());
  auto all_argv = argv_of(all);
  if (auto s = args.parse(static_cast<int>(all.size()), all_argv.data()); !s) return report(s);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  if (cfg.engine.model_path.empty()) return report(error(ErrorKind::InvalidArgument, "serve: -m MODEL is required"));
  if (cfg.http.port < 0 || cfg.http.port > 65535)
    return report(error(ErrorKind::InvalidArgument, "serve: --port must be in [0, 65535]"));
  if (cfg.max_pending < 1) return report(error(ErrorKind::InvalidArgument, "serve: --max-queue must be >= 1"));
  if (cfg.http.n_io_threads < 1 || cfg.http.n_io_threads > 64)
    return report(error(ErrorKind::InvalidArgument, "serve: --io-threads must be in [1, 64]"));
  if (cfg.n_workers < 1 || cfg.n_workers > 64)
    return report(error(ErrorKind::InvalidArgument, "serve: --workers must be in [1, 64]"));
  if (cfg.http.max_connections < 1)
    return report(error(ErrorKind::InvalidArgument, "serve: --max-connections must be >= 1"));
  if (cfg.http.max_connections_per_ip < 0)
    return report(error(ErrorKind::InvalidArgument, "serve: --max-connections-per-ip must be >= 0"));
  if (!(header_timeout_s > 0 && header_timeout_s <= 3600))
    return report(error(ErrorKind::InvalidArgument, "serve: --header-timeout must be in (0, 3600] seconds"));
  cfg.http.header_timeout_s = header_timeout_s;
  cfg.http.body_timeout_s = header_timeout_s;
  if (cfg.api_key.empty())
    return report(error(ErrorKind::InvalidArgument,
                        "serve: --api-key is empty; give a key, or leave the flag out to serve without one"));
  if (cfg.api_key == kUnset) cfg.api_key.clear();
  if (!api_key_file.empty()) {
    if (!cfg.api_key.empty())
      return report(error(ErrorKind::InvalidArgument, "serve: give --api-key or --api-key-file, not both"));
    if (auto s = read_key_file(api_key_file, cfg.api_key); !s) return report(s);
  }
  {
    EngineConfig probe;
    if (auto s = parse_kv_memory(max_body, probe); !s || probe.kv_memory_bytes <= 0)
      return report(error(ErrorKind::InvalidArgument, "serve: --max-body '" + max_body + "': expected bytes (8M, 65536)"));
    cfg.http.max_body_bytes = probe.kv_memory_bytes;
  }
  if (pooling != "mean" && pooling != "last")
    return report(error(ErrorKind::InvalidArgument, "serve: --pooling must be mean or last, not '" + pooling + "'"));
  cfg.pooling = pooling == "last" ? Pooling::Last : Pooling::Mean;
  if (!chat_template_file.empty()) {
    auto text = read_file(chat_template_file);
    if (!text) return report(text.status());
    cfg.chat_template = std::move(text).value();
  }
  if (auto s = flags.apply(cfg.engine); !s) return report(s);
  raise_fd_limit();

  // Signals are taken by sigwait() below, never by a handler on a random thread.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  server::Server srv(cfg);
  if (auto s = srv.start(); !s) return report(s);
  std::fprintf(stderr, "tern serve: listening on http://%s:%d\n", cfg.http.host.c_str(), srv.port());
  std::thread io([&srv] { srv.run_io(); });
  if (auto s = srv.load_model(); !s) {
    report(s);
    srv.shutdown(0);
    io.join();
    return 1;
  }
  std::fprintf(stderr, "tern serve: ready\n");
  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::fprintf(stderr, "tern serve: %s received, draining (up to %.0f s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
               static_cast<double>(shutdown_timeout_s));
  srv.shutdown(shutdown_timeout_s);
  io.join();
  std::fprintf(stderr, "tern serve: stopped\n");
  return 0;
}

}  // namespace tern::cli
