#include "backend_flag.h"

namespace tern::cli {

Result<std::shared_ptr<backend::Backend>> make_backend_from_flag(const std::string& name, int n_threads) {
  auto kind = backend::parse_backend_kind(name);
  if (!kind) return error(ErrorKind::InvalidArgument, "--backend: " + kind.status().message());
  return std::shared_ptr<backend::Backend>(backend::make_backend(*kind, n_threads));
}

}  // namespace tern::cli
