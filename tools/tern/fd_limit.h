// tools/tern/fd_limit.h — lifting the open-file limit for commands that hold
// thousands of sockets (tern serve, tern bench serve/sweep).
#pragma once

#include <sys/resource.h>

namespace tern::cli {

// Raises the soft RLIMIT_NOFILE to the hard limit; a failure leaves it as it was.
inline void raise_fd_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

}  // namespace tern::cli
