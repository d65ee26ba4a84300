#include "core/status.h"

namespace tern {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Ok: return "ok";
    case ErrorKind::InvalidArgument: return "invalid argument";
    case ErrorKind::InvalidFile: return "invalid file";
    case ErrorKind::NotFound: return "not found";
    case ErrorKind::Unsupported: return "unsupported";
    case ErrorKind::IoError: return "I/O error";
    case ErrorKind::OutOfRange: return "out of range";
    case ErrorKind::Unavailable: return "unavailable";
    case ErrorKind::Internal: return "internal error";
  }
  return "unknown";
}

}  // namespace tern
