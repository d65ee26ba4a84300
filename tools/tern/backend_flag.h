// tools/tern/backend_flag.h — `--backend cpu|ref` for the commands that run
// a model (run, batch, serve, bench, perplexity), and the backend it names.
#pragma once

#include <memory>
#include <string>

#include "args.h"
#include "backend/backend.h"

namespace tern::cli {

inline constexpr const char* kBackendHelp = "compute backend: cpu (default) or ref (the scalar reference, slow)";

// A backend of `name` on n_threads (<= 0: every core); InvalidArgument names the valid names.
Result<std::shared_ptr<backend::Backend>> make_backend_from_flag(const std::string& name, int n_threads);

}  // namespace tern::cli
