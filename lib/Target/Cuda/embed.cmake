# Writes the file IN as a C++ raw string literal to OUT (only when it changed, so that a
# touched but unchanged prelude recompiles nothing).
file(READ "${IN}" text)
if(text MATCHES "\\)medc_prelude\"")
  message(FATAL_ERROR "${IN} contains the raw string's delimiter )medc_prelude\"")
endif()
file(WRITE "${OUT}.tmp" "R\"medc_prelude(${text})medc_prelude\"\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
file(REMOVE "${OUT}.tmp")
