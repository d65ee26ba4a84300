# Cross-compiling tern for 64-bit ARM Linux with Debian's cross toolchain and
# multiarch libraries (scripts/test-aarch64.sh installs both and runs the tests
# under qemu-user):
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Debian's multiarch layout: the arm64 libraries sit in /usr/lib/aarch64-linux-gnu
# beside the host's, headers are shared, so the host root is searched as is.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
# Test executables (gtest discovery, ctest) run through qemu-user, which finds
# the arm64 loader and libraries at their multiarch paths (not with
# -L /usr/aarch64-linux-gnu: that mixes the cross toolchain's loader with the
# multiarch libc, and pthread_create then hangs). TERN_QEMU_CPU picks the
# emulated CPU, and so which kernel levels the run-time dispatch finds.
if(NOT DEFINED TERN_QEMU_CPU)
  set(TERN_QEMU_CPU max)
endif()
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-cpu;${TERN_QEMU_CPU})
