# TERN_SANITIZE=address;undefined or thread: applied globally so that every
# library, tool and test shares one instrumented runtime.
if(TERN_SANITIZE)
  string(REPLACE ";" "," _tern_san "${TERN_SANITIZE}")
  add_compile_options(-fsanitize=${_tern_san} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${_tern_san})
endif()
