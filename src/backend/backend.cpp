#include "backend/backend.h"

#include "backend/cpu/cpu_backend.h"
#include "backend/ref/ref_backend.h"
#include "core/config.h"

namespace tern::backend {

Result<BackendKind> parse_backend_kind(std::string_view name) {
  if (name == "cpu") return BackendKind::Cpu;
  if (name == "ref") return BackendKind::Ref;
  return error(ErrorKind::InvalidArgument, "unknown backend '" + std::string(name) + "' (expected cpu or ref)");
}

const char* backend_kind_name(BackendKind kind) { return kind == BackendKind::Ref ? "ref" : "cpu"; }

std::unique_ptr<Backend> make_backend(BackendKind kind, int n_threads) {
  if (kind == BackendKind::Ref) return make_ref_backend();
  return make_cpu_backend(n_threads, env_config().pack_weights);
}

}  // namespace tern::backend
