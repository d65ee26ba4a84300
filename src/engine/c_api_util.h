// engine/c_api_util.h — what the C API's entry points share: the per-thread
// error message, Status -> tern_status, the live-handle registry, and the
// guard that turns a C++ exception into a status (none may cross into C).
#pragma once

#include <cstddef>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "tern/status.h"
#include "tern/tern.h"

namespace tern::capi {

// Records `message` as this thread's last error and returns `status`.
tern_status fail(tern_status status, std::string message);
tern_status fail(const Status& status);
tern_status status_of(ErrorKind kind);

// Handles are checked against the set of live ones before they are touched:
// a freed or foreign pointer is refused (TERN_E_BAD_HANDLE), not read. In
// debug builds a freed handle's memory is never reused, so a stale pointer
// cannot alias a newer handle.
void register_handle(const void* handle);
bool unregister_handle(const void* handle);  // false when it was not live
bool is_live(const void* handle);
// Frees a handle made by make_handle: runs its destructor; gives the memory back only in release builds.
template <typename T>
void destroy_handle(T* handle) {
  handle->~T();
#ifdef NDEBUG
  ::operator delete(static_cast<void*>(handle));
#endif
}
template <typename T, typename... Args>
T* make_handle(Args&&... args) {
  void* memory = ::operator new(sizeof(T));
  try {
    return new (memory) T(std::forward<Args>(args)...);
  } catch (...) {
    ::operator delete(memory);
    throw;
  }
}

// Registers a new handle and hands it out (destroyed if registering fails).
template <typename T>
void publish(T* handle, T** out) {
  try {
    register_handle(handle);
  } catch (...) {
    destroy_handle(handle);
    throw;
  }
  *out = handle;
}

tern_status bad_handle(const char* what);

// Runs f() (returning tern_status), mapping exceptions: out of memory, or a bug.
template <typename F>
tern_status guard(F&& f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return fail(TERN_E_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return fail(TERN_E_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(TERN_E_INTERNAL, "internal error");
  }
}

// Copies a versioned parameter struct (its first field is its size): a smaller
// one (an older header) keeps the defaults past its end; a larger one (a newer
// header than this library) is refused.
template <typename P>
tern_status read_params(const P* given, P& out, const char* what) {
  if (!given) return TERN_OK;
  if (given->struct_size < sizeof(uint32_t) || given->struct_size > sizeof(P))
    return fail(TERN_E_INVALID_ARGUMENT, std::string(what) + ".struct_size is " + std::to_string(given->struct_size) +
                                             "; this library knows " + std::to_string(sizeof(P)) +
                                             " bytes (set it with the *_init function of this library's tern.h)");
  std::memcpy(static_cast<void*>(&out), given, given->struct_size);
  out.struct_size = sizeof(P);
  return TERN_OK;
}

}  // namespace tern::capi
