#include "core/log.h"

#include "core/config.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tern {
namespace {

LogLevel initial_level() {
  const std::string& env = env_config().log_level;
  if (env == "debug") return LogLevel::Debug;
  if (env == "info") return LogLevel::Info;
  if (env == "error") return LogLevel::Error;
  if (env == "off") return LogLevel::Off;
  return LogLevel::Warn;
}

std::atomic<LogLevel>& level_ref() {
  static std::atomic<LogLevel> level{initial_level()};
  return level;
}

}  // namespace

void set_log_level(LogLevel level) { level_ref().store(level); }
LogLevel log_level() { return level_ref().load(); }

void log_message(LogLevel level, const char* fmt, ...) {
  if (level < log_level()) return;
  static const char* const kNames[] = {"debug", "info", "warn", "error"};
  char line[2048];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(line, sizeof line, fmt, args);
  va_end(args);
  std::fprintf(stderr, "[%s] %s\n", kNames[static_cast<int>(level)], line);
}

}  // namespace tern
