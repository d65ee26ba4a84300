// tools/tern/backend_flag.h — `--backend cpu|ref` for the commands that run
// a model (run, batch, serve, bench, perplexity), and the backend it names.
#pragma once

#include <memory>
#include <string>

#include "args.h"
#include "backend/backend.h"

namespace tern::cli {

inline constexpr const char* kBackendHelp = "compute backend: cpu (default) or ref (the scalar reference, slow)";

// The backend `name` names; InvalidArgument (a usage error) naming the valid
// names. Commands that hand the name to the engine (batch, serve) check it
// with this first, so a bad name is refused before a model loads or a port opens.
Result<backend::BackendKind> parse_backend_flag(const std::string& name);
// A backend of `name` on n_threads (<= 0: every core); errors as parse_backend_flag.
Result<std::shared_ptr<backend::Backend>> make_backend_from_flag(const std::string& name, int n_threads);

}  // namespace tern::cli
