# Warnings every tern target gets; applied through tern_target_defaults().
function(tern_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow -Wno-unused-parameter
                                           -Wnon-virtual-dtor -Wformat=2 -Wno-stringop-overflow -Wno-restrict -Wno-maybe-uninitialized)
  if(TERN_NATIVE)
    target_compile_options(${target} PRIVATE -march=native)
  endif()
endfunction()
