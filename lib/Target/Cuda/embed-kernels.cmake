# Writes the kernel library's .cuh files (FILES, separated by |) to OUT as the entries of a table
# { "name.cuh", R"medc_kernel(text)medc_kernel" }, (only when it changed, so that a touched
# but unchanged file recompiles nothing).
string(REPLACE "|" ";" files "${FILES}")
set(body "")
foreach(f ${files})
  file(READ "${f}" text)
  if(text MATCHES "\\)medc_kernel\"")
    message(FATAL_ERROR "${f} contains the raw string's delimiter )medc_kernel\"")
  endif()
  get_filename_component(name "${f}" NAME)
  string(APPEND body "{\"${name}\", R\"medc_kernel(${text})medc_kernel\"},\n")
endforeach()
file(WRITE "${OUT}.tmp" "${body}")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
file(REMOVE "${OUT}.tmp")
