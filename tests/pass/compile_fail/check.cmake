# SPDX-License-Identifier: Apache-2.0
# Compiles SOURCE (with COMPILER, INCLUDES) and passes when the compile fails with every message
# named on the source's `// expect:` lines.
file(STRINGS ${SOURCE} expect_lines REGEX "^// expect: ")
separate_arguments(includes UNIX_COMMAND "${INCLUDES}")
execute_process(COMMAND ${COMPILER} -std=c++20 -fsyntax-only ${includes} ${SOURCE}
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(result EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must not")
endif()
foreach(line IN LISTS expect_lines)
  string(REPLACE "// expect: " "" expected "${line}")
  string(FIND "${out}${err}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${SOURCE} failed to compile, but without '${expected}':\n${err}")
  endif()
endforeach()
