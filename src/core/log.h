// core/log.h — leveled logging to stderr.
//
// Lines read "module: function: message key=value". The level is set once
// (from -v flags or TERN_LOG_LEVEL) before threads start; reads are racy-safe
// because the level is an atomic.
#pragma once

#include <cstdarg>

namespace tern {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3, Off = 4 };

void set_log_level(LogLevel level);
LogLevel log_level();
void log_message(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace tern

#define TERN_LOG_DEBUG(...) ::tern::log_message(::tern::LogLevel::Debug, __VA_ARGS__)
#define TERN_LOG_INFO(...) ::tern::log_message(::tern::LogLevel::Info, __VA_ARGS__)
#define TERN_LOG_WARN(...) ::tern::log_message(::tern::LogLevel::Warn, __VA_ARGS__)
#define TERN_LOG_ERROR(...) ::tern::log_message(::tern::LogLevel::Error, __VA_ARGS__)
