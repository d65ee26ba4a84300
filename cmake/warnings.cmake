# Warnings every tern target gets; applied through tern_target_defaults().
function(tern_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow -Wno-unused-parameter -Wnon-virtual-dtor -Wformat=2)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC's flow-sensitive warnings misfire on inlined std containers (clang has none of these).
    target_compile_options(${target} PRIVATE -Wno-stringop-overflow -Wno-restrict -Wno-maybe-uninitialized)
  endif()
  if(TERN_NATIVE)
    target_compile_options(${target} PRIVATE -march=native)
  endif()
endfunction()
