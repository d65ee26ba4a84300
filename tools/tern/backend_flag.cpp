#include "backend_flag.h"

namespace tern::cli {

Result<backend::BackendKind> parse_backend_flag(const std::string& name) {
  auto kind = backend::parse_backend_kind(name);
  if (!kind) return error(ErrorKind::InvalidArgument, "--backend: " + kind.status().message());
  return kind;
}

Result<std::shared_ptr<backend::Backend>> make_backend_from_flag(const std::string& name, int n_threads) {
  auto kind = parse_backend_flag(name);
  if (!kind) return kind.status();
  return std::shared_ptr<backend::Backend>(backend::make_backend(*kind, n_threads));
}

}  // namespace tern::cli
