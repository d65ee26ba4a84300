# cmake -DIN=file -DOUT=header -DNAME=kName -P embed_asset.cmake
# Writes a header holding the file as one raw string literal (assets are
# embedded in the binary: the server needs no files at run time).
file(READ "${IN}" content)
string(FIND "${content}" ")tern_asset\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter )tern_asset\"")
endif()
file(WRITE "${OUT}.tmp" "// Generated from ${IN}; do not edit.\n#pragma once\n#include <string_view>\nnamespace tern::server {\ninline constexpr std::string_view ${NAME} = R\"tern_asset(${content})tern_asset\";\n}  // namespace tern::server\n")
file(RENAME "${OUT}.tmp" "${OUT}")
