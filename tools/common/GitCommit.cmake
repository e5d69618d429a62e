# Writes OUTPUT: `#define MED_GIT_COMMIT "<git describe --always --dirty>"` for SOURCE_DIR, only
# when it changed. Outside a git checkout of SOURCE_DIR (a copied tree, as on the GPU
# machine): the commit scripts/gpu-prepare.sh recorded in .deps/git-commit, else "unknown".
# COMMIT, when given, wins: the GPU machine gets a copy of the tree whose git history may be
# older than the working tree (scripts/gpu-check.sh passes .deps/git-commit).
set(commit "${COMMIT}")
if(commit STREQUAL "")
execute_process(COMMAND git -C "${SOURCE_DIR}" rev-parse --show-prefix
                OUTPUT_VARIABLE prefix OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE rc ERROR_QUIET)
# An empty prefix: SOURCE_DIR is the top of its checkout, not a folder inside another one.
if(rc EQUAL 0 AND prefix STREQUAL "")
  execute_process(COMMAND git -C "${SOURCE_DIR}" describe --always --dirty --abbrev=12
                  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE rc ERROR_QUIET)
  if(NOT rc EQUAL 0)
    set(commit "")
  endif()
endif()
endif()
if(commit STREQUAL "" AND EXISTS "${SOURCE_DIR}/.deps/git-commit")
  file(STRINGS "${SOURCE_DIR}/.deps/git-commit" commit LIMIT_COUNT 1)
endif()
if(commit STREQUAL "")
  set(commit "unknown")
endif()
set(text "#define MED_GIT_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUTPUT}" "${text}")
endif()
